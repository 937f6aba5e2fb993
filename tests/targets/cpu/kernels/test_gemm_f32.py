"""The fast FP32 kernel templates (lamina/targets/cpu/kernels/gemm_f32.py, conv_f32.py) against the
``tpu`` ops' ``execute``: each op built as a one-op ``tpu`` module, planned and emitted into a fresh
llvmlite module, compiled for the host and called through the kernel ABI (``bufs``, ``part``,
``nparts``) with every part in turn, on AVX-512, AVX2-width and 16-byte vectors.

Tolerance (float sums run in another order than numpy's): ``|got - ref| <= 1e-4 * max|ref|``, plus
one ulp of the result type at ``|ref|`` for f16/bf16 results (the f32 sums differ by rounding, so
the result can round to the neighbouring value)."""

from __future__ import annotations

import ctypes
import sys
from pathlib import Path
from typing import Any

import llvmlite.binding as llvm
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from llvmlite import ir

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
from tpu_cases import FLOATS, arr, dense, fl, op, per_axis, q8, t

from lamina.targets.cpu.kernels.abi import Isa, Template
from lamina.targets.cpu.kernels.conv_f32 import ConvF32, DepthwiseF32
from lamina.targets.cpu.kernels.gemm_f32 import BatchMatMulF32, MatMulF32

llvm.initialize_native_target()
llvm.initialize_native_asmprinter()

ISAS = {64: Isa(64, frozenset({"avx512f", "fma"})), 32: Isa(32, frozenset({"avx2", "fma"})), 16: Isa(16)}
KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)


def _target_machine() -> Any:
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )


class Compiled:
    """One template's kernel for one op, compiled for the host (MCJIT)."""

    def __init__(self, template: Template, o: Any, isa: Isa, **plan_options: Any) -> None:
        assert template.matches(o, isa)
        self.plan = template.plan(o, "kernel", isa, **plan_options)
        module = ir.Module()
        template.emit(module, self.plan, o, isa)
        mod = llvm.parse_assembly(str(module))
        mod.verify()
        tm = _target_machine()  # the engine owns its target machine
        pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
        pb.getModulePassManager().run(mod, pb)
        self.engine = llvm.create_mcjit_compiler(mod, tm)
        self.engine.finalize_object()
        self.fn = KERNEL(self.engine.get_function_address("kernel"))

    def __call__(self, arrays: dict[str, np.ndarray], nparts: int, parts: list[int] | None = None) -> None:
        scratch = np.zeros(self.plan.scratch_bytes * nparts + 64, np.uint8)
        scratch[-64:] = 0xAB  # a canary after the last part's slice: no kernel writes past its scratch
        ptrs = []
        for kind, key in self.plan.buffers:
            if kind == "weight":
                ptrs.append(self.plan.weights[key].ctypes.data)
            elif kind == "scratch":
                ptrs.append(scratch.ctypes.data)
            else:
                ptrs.append(arrays[key].ctypes.data)
        bufs = (ctypes.c_void_p * len(ptrs))(*ptrs)
        for p in range(nparts) if parts is None else parts:
            self.fn(bufs, p, nparts)
        assert (scratch[-64:] == 0xAB).all(), "a kernel wrote past its scratch"


def _close(got: np.ndarray, ref: np.ndarray, ft: str) -> None:
    g, r = got.astype(np.float32), np.asarray(ref).astype(np.float32)
    assert g.shape == r.shape
    scale = max(float(np.abs(r).max()) if r.size else 0.0, 1e-30)
    ulp = {"f32": 0.0, "f16": 2.0**-10, "bf16": 2.0**-7}[ft]
    tol = 1e-4 * scale + ulp * np.abs(r)
    bad = np.abs(g - r) > tol
    assert not bad.any(), (
        f"{int(bad.sum())} of {bad.size} differ; worst {np.abs(g - r).max()} (scale {scale})"
    )


def _empty(shape: tuple[int, ...], ft: str) -> np.ndarray:
    """An output buffer full of NaN (an element no part writes fails the comparison)."""
    return np.full(shape, np.nan, np.float32).astype(FLOATS[ft])


# ---- conv ------------------------------------------------------------------------------------------------


def conv_op(
    rng: np.random.Generator,
    xs: tuple[int, ...],
    cout: int,
    k: tuple[int, int],
    s: tuple[int, int],
    d: tuple[int, int],
    pads: list[int],
    g: int,
    ft: str,
    bias: bool,
    relu: str,
) -> tuple[Any, list[Any], tuple[int, ...]]:
    ws = (cout, xs[1] // g, *k)
    oh = (xs[2] + pads[0] + pads[2] - (k[0] - 1) * d[0] - 1) // s[0] + 1
    ow = (xs[3] + pads[1] + pads[3] - (k[1] - 1) * d[1] - 1) // s[1] + 1
    w = fl(rng, ws, ft)
    b = fl(rng, (cout,), ft) if bias else None
    attrs = [arr("strides", s), arr("dilations", d), arr("pads", pads), f"group = {g} : i64"]
    if relu:
        attrs.append("do_relu = true")
    if relu == "limit":
        attrs.append("relu_limit = 0.75")
    operands: list[Any] = [
        t(xs, ft),
        ("const", dense(w.astype(np.float32)), t(ws, ft)),
        ("const", dense(b.astype(np.float32)), t((cout,), ft)) if b is not None else None,
    ]
    ys = (xs[0], cout, oh, ow)
    return op("tpu.Conv", operands, t(ys, ft), ", ".join(attrs)), [fl(rng, xs, ft), w, b], ys


def check_conv(
    xs: tuple[int, ...],
    cout: int,
    k: tuple[int, int],
    s: tuple[int, int] = (1, 1),
    d: tuple[int, int] = (1, 1),
    pads: tuple[int, ...] = (0, 0, 0, 0),
    g: int = 1,
    ft: str = "f32",
    bias: bool = True,
    relu: str = "",
    vb: int = 64,
    nparts: int = 1,
    seed: int = 0,
) -> None:
    rng = np.random.default_rng(seed)
    o, ins, ys = conv_op(rng, xs, cout, k, s, d, list(pads), g, ft, bias, relu)
    template = DepthwiseF32() if g == xs[1] == cout and g > 1 and s[1] <= 2 else ConvF32()
    kernel = Compiled(template, o, ISAS[vb])
    y = _empty(ys, ft)
    kernel({"input": ins[0], "output": y}, nparts)
    _close(y, o.execute(ins)[0], ft)


CONVS = [
    # (xs, cout, k, s, d, pads)
    ((1, 3, 9, 9), 5, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 8, 7, 6), 20, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),  # in place (1x1), two images
    ((1, 3, 15, 13), 9, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((1, 5, 10, 11), 7, (3, 2), (2, 1), (2, 2), (2, 0, 1, 1)),  # dilations, asymmetric pads
    ((1, 5, 10, 11), 17, (3, 2), (1, 3), (1, 1), (2, 0, 1, 1)),  # stride 3 (scalar copies)
    ((1, 3, 20, 20), 16, (7, 7), (2, 2), (1, 1), (3, 3, 3, 3)),  # a stem
    ((1, 4, 8, 8), 11, (1, 1), (2, 2), (1, 1), (0, 0, 0, 0)),  # strided 1x1 (im2col)
    ((1, 64, 7, 7), 40, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),  # few pixels: parts split channels
    ((1, 16, 5, 5), 24, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),  # in place, parts split channels
    ((1, 2, 3, 30), 3, (2, 5), (1, 1), (1, 2), (1, 4, 0, 4)),
    # pixel-major (vectors along the output channels): few pixels, many channels
    ((2, 48, 7, 7), 64, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0)),  # in place
    ((1, 32, 8, 9), 72, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((1, 20, 6, 6), 37, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    # H stride 1, W stride 2, H dilation 2: the row-shifted copies (one per kw, rows of every kh)
    ((1, 6, 11, 13), 10, (3, 3), (1, 2), (2, 1), (2, 1, 2, 1)),
]


@pytest.mark.parametrize("vb", [64, 32, 16])
@pytest.mark.parametrize("case", range(len(CONVS)))
def test_conv_examples(case: int, vb: int) -> None:
    xs, cout, k, s, d, pads = CONVS[case]
    check_conv(xs, cout, k, s, d, pads, vb=vb, nparts=1 + case % 3, relu=["", "relu", "limit"][case % 3])


@pytest.mark.parametrize("vb", [64, 32])
@pytest.mark.parametrize("case", [0, 2, 3, 5, 7, 9, 12, 13])
def test_conv_k_blocks(case: int, vb: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Small im2col blocks: K split into blocks of input channels, partial sums kept in the output."""
    import lamina.targets.cpu.kernels.conv_f32 as conv_f32

    monkeypatch.setattr(conv_f32, "BLOCK_BYTES", 1024)
    monkeypatch.setattr(conv_f32, "PIX_BYTES", 0)
    xs, cout, k, s, d, pads = CONVS[case]
    o, _, _ = conv_op(np.random.default_rng(0), xs, cout, k, s, d, list(pads), 1, "f32", True, "")
    lay = ConvF32()._layout(o, ISAS[vb])
    assert lay["mode"] == "nchw" and (lay["kc_ch"] < xs[1] or xs[1] == 1 or lay["direct"])
    check_conv(xs, cout, k, s, d, pads, vb=vb, nparts=1 + case % 3, relu=["", "relu", "limit"][case % 3])


@pytest.mark.parametrize("vb", [64, 32])
@pytest.mark.parametrize("case", [5, 7, 10, 11])
@pytest.mark.parametrize("nparts", [1, 2, 3])
def test_conv_pix_k_blocks(case: int, vb: int, nparts: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pixel-major with K in blocks (``PIX_KC``): partial sums per tile in the part's buffer, each
    part's (panel, tile) units over one K block before the next."""
    import lamina.targets.cpu.kernels.conv_f32 as conv_f32

    monkeypatch.setattr(conv_f32, "PIX_KC", 12)
    xs, cout, k, s, d, pads = CONVS[case]
    o, _, _ = conv_op(np.random.default_rng(0), xs, cout, k, s, d, list(pads), 1, "f32", True, "")
    lay = ConvF32()._layout(o, ISAS[vb])
    assert lay["mode"] == "pix" and lay["pix_nkb"] > 2
    check_conv(
        xs, cout, k, s, d, pads, vb=vb, nparts=nparts, relu=["", "relu", "limit"][case % 3], seed=nparts
    )


def test_transpose16x8() -> None:
    """The pixel-major store's in-register transpose, 1 to 8 rows of 16 lanes."""
    from lamina.targets.cpu.kernels.conv_f32 import _transpose16x8
    from lamina.targets.cpu.kernels.gemm_f32 import Fn

    for rows in (1, 3, 5, 8):
        module = ir.Module()
        fn = Fn(module, "kernel")
        src, dst = fn.buf(0), fn.buf(1)
        vecs = [fn.vload(fn.at(src, 16 * i), 16) for i in range(rows)]
        for ch, v in enumerate(_transpose16x8(fn, vecs)):
            fn.vstore(v, fn.at(dst, 8 * ch))
        fn.ret()
        mod = llvm.parse_assembly(str(module))
        engine = llvm.create_mcjit_compiler(mod, _target_machine())
        engine.finalize_object()
        f = KERNEL(engine.get_function_address("kernel"))
        a = np.arange(16 * rows, dtype=np.float32).reshape(rows, 16) + 1
        out = np.full((16, 8), np.nan, np.float32)
        f((ctypes.c_void_p * 2)(a.ctypes.data, out.ctypes.data), 0, 1)
        ref = np.zeros((8, 16), np.float32)
        ref[:rows] = a
        np.testing.assert_array_equal(out, ref.T)


@pytest.mark.parametrize("ft", ["f32", "bf16"])
@pytest.mark.parametrize("case", [0, 1, 7, 10, 12])
@pytest.mark.parametrize("kblocks", [False, True])
def test_conv_fused_residual(case: int, ft: str, kblocks: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """``plan(..., residual=True, post_relu=True)``: relu(round(conv) + r) as tpu.Add + tpu.Relu."""
    import lamina.targets.cpu.kernels.conv_f32 as conv_f32
    from lamina.dialects.tpu.quantize import round_float

    if kblocks:
        monkeypatch.setattr(conv_f32, "BLOCK_BYTES", 1024)
        monkeypatch.setattr(conv_f32, "PIX_BYTES", 0)
        monkeypatch.setattr(conv_f32, "PIX_KC", 12)
    xs, cout, k, s, d, pads = CONVS[case]
    rng = np.random.default_rng(case)
    o, ins, ys = conv_op(rng, xs, cout, k, s, d, list(pads), 1, ft, True, "relu" if case % 2 else "")
    isa = ISAS[64]
    kernel = Compiled(ConvF32(), o, isa, residual=True, post_relu=True)
    assert kernel.plan.buffers[1] == ("in", "residual")
    r = fl(rng, ys, ft)
    y = _empty(ys, ft)
    kernel({"input": ins[0], "residual": r, "output": y}, 2)
    conv = o.execute(ins)[0]
    ref = np.maximum(round_float(conv.astype(np.float32) + r.astype(np.float32), o.output.type), 0)
    _close(y, ref, ft)


@pytest.mark.parametrize("ft", ["f16", "bf16"])
@pytest.mark.parametrize("k", [1, 3])
def test_conv_half_modes(ft: str, k: int) -> None:
    check_conv((1, 6, 9, 10), 13, (k, k), pads=(k // 2,) * 4, ft=ft, relu="limit", nparts=2)


DEPTHWISE = [
    ((1, 6, 9, 19), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
    ((2, 6, 9, 37), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1)),
    ((1, 5, 9, 19), (3, 3), (1, 2), (2, 1), (0, 2, 1, 1)),
    ((1, 3, 12, 40), (5, 5), (1, 1), (1, 1), (2, 2, 2, 2)),
    ((1, 4, 4, 3), (2, 3), (3, 1), (1, 2), (0, 1, 1, 2)),
]


@pytest.mark.parametrize("vb", [64, 32, 16])
@pytest.mark.parametrize("case", range(len(DEPTHWISE)))
def test_depthwise_examples(case: int, vb: int) -> None:
    xs, k, s, d, pads = DEPTHWISE[case]
    check_conv(
        xs, xs[1], k, s, d, pads, g=xs[1], vb=vb, nparts=1 + case % 3, relu=["", "relu", "limit"][case % 3]
    )


@pytest.mark.parametrize("ft", ["f16", "bf16"])
def test_depthwise_half_modes(ft: str) -> None:
    check_conv((1, 6, 9, 19), 6, (3, 3), (2, 2), pads=(1, 1, 1, 1), g=6, ft=ft, relu="relu", nparts=2)


@st.composite
def conv_params(draw: Any) -> dict[str, Any]:
    kind = draw(st.sampled_from(["dense", "dense", "depthwise", "grouped"]))
    depthwise = kind == "depthwise"
    g = draw(st.integers(2, 4)) if kind == "grouped" else 1
    cin = draw(st.integers(1, 12)) * g if kind != "depthwise" else draw(st.integers(1, 12))
    cout = cin if depthwise else draw(st.integers(1, 40 // g)) * g
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, k[i % 2] - 1)) for i in range(4))
    hw = (draw(st.integers(1, 20)), draw(st.integers(1, 40)))
    for i in range(2):
        assume(hw[i] + pads[i] + pads[i + 2] >= (k[i] - 1) * d[i] + 1)
    assume(not depthwise or cin > 1)
    return dict(
        xs=(draw(st.integers(1, 2)), cin, *hw),
        cout=cout,
        k=k,
        s=s,
        d=d,
        pads=pads,
        g=cin if depthwise else g,
        ft=draw(st.sampled_from(["f32", "f32", "f16", "bf16"])),
        bias=draw(st.booleans()),
        relu=draw(st.sampled_from(["", "relu", "limit"])),
        vb=draw(st.sampled_from([64, 32, 16])),
        nparts=draw(st.integers(1, 3)),
        seed=draw(st.integers(0, 2**31)),
    )


@settings(max_examples=25, deadline=None)
@given(conv_params())
def test_conv_property(p: dict[str, Any]) -> None:
    check_conv(**p)


def test_conv_parts_write_disjoint_bytes() -> None:
    """Each part alone writes its own elements; together they write every one once."""
    for xs, cout, k, pads, g in [
        ((1, 8, 13, 11), 20, (3, 3), (1, 1, 1, 1), 1),
        ((1, 16, 6, 6), 40, (1, 1), (0, 0, 0, 0), 1),
        ((1, 8, 13, 11), 20, (1, 1), (0, 0, 0, 0), 1),
        ((2, 7, 9, 9), 7, (3, 3), (1, 1, 1, 1), 7),
        ((1, 48, 7, 7), 64, (1, 1), (0, 0, 0, 0), 1),  # pixel-major
        ((1, 32, 6, 5), 37, (3, 3), (1, 1, 1, 1), 1),
    ]:
        rng = np.random.default_rng(1)
        o, ins, ys = conv_op(rng, xs, cout, k, (1, 1), (1, 1), list(pads), g, "f32", True, "")
        kernel = Compiled(DepthwiseF32() if g > 1 else ConvF32(), o, ISAS[64])
        written = np.zeros(ys, np.int64)
        for part in range(3):
            y = _empty(ys, "f32")
            kernel({"input": ins[0], "output": y}, 3, [part])
            written += ~np.isnan(y)
        assert (written == 1).all()


def test_conv_refuses_what_it_cannot_do() -> None:
    rng = np.random.default_rng(2)
    grouped, _, _ = conv_op(rng, (1, 4, 6, 6), 6, (3, 3), (1, 1), (1, 1), [1, 1, 1, 1], 2, "f32", False, "")
    depthwise_x2, _, _ = conv_op(
        rng, (1, 4, 6, 6), 8, (3, 3), (1, 1), (1, 1), [1, 1, 1, 1], 4, "f32", False, ""
    )
    strided_w3, _, _ = conv_op(
        rng, (1, 4, 6, 9), 4, (3, 3), (1, 3), (1, 1), [1, 1, 1, 1], 4, "f32", False, ""
    )
    isa = ISAS[64]
    for o in (grouped, depthwise_x2):  # grouped GEMMs: ConvF32's, not DepthwiseF32's
        assert ConvF32().matches(o, isa) and not DepthwiseF32().matches(o, isa)
    # a depthwise stride DepthwiseF32 does not take: a grouped GEMM
    assert not DepthwiseF32().matches(strided_w3, isa) and ConvF32().matches(strided_w3, isa)
    # INT8 (the int8 templates' job)
    w = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    int8 = op(
        "tpu.Conv",
        [
            t((1, 3, 6, 6), q8(True, 0.05)),
            ("const", dense(w), t((4, 3, 3, 3), per_axis([0.01] * 4, 0)), t((4, 3, 3, 3), "i8")),
            None,
        ],
        t((1, 4, 6, 6), q8(True, 0.02)),
        f"{arr('strides', [1, 1])}, {arr('pads', [1, 1, 1, 1])}, {arr('multiplier', [1 << 30])}, {arr('rshift', [5])}",
    )
    assert not ConvF32().matches(int8, isa) and not DepthwiseF32().matches(int8, isa)
    # a 3-d convolution
    conv3d = op(
        "tpu.Conv",
        [
            t((1, 3, 4, 4, 4), "f32"),
            ("const", dense(np.ones((2, 3, 3, 3, 3), np.float32)), t((2, 3, 3, 3, 3), "f32")),
            None,
        ],
        t((1, 2, 2, 2, 2), "f32"),
    )
    assert not ConvF32().matches(conv3d, isa) and not DepthwiseF32().matches(conv3d, isa)


@pytest.mark.parametrize("vb", [64, 32])
@pytest.mark.parametrize(
    "case",
    [
        ((1, 8, 9, 9), 12, (3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 2),
        ((2, 12, 10, 7), 6, (1, 1), (1, 1), (1, 1), (0, 0, 0, 0), 3),  # in place
        ((1, 16, 14, 14), 32, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 4),
        ((1, 4, 9, 9), 8, (3, 3), (1, 1), (2, 2), (2, 2, 2, 2), 4),  # depthwise x2 (one in, two out)
        ((1, 5, 8, 13), 5, (3, 3), (1, 3), (1, 1), (1, 1, 1, 1), 5),  # depthwise, W stride 3
    ],
)
def test_conv_grouped(case: tuple[Any, ...], vb: int) -> None:
    xs, cout, k, s, d, pads, g = case
    check_conv(xs, cout, k, s, d, pads, g=g, vb=vb, nparts=2, relu="relu")


@pytest.mark.parametrize("vb", [64, 16])
@pytest.mark.parametrize(
    "case",
    [
        # (x shape, cout, k, s, d, pads, group)
        ((2, 5, 40), 7, 3, 1, 1, (1, 1), 1),
        ((1, 8, 33), 20, 5, 2, 2, (4, 0), 1),
        ((1, 64, 9), 96, 1, 1, 1, (0, 0), 1),
        ((1, 6, 50), 6, 3, 2, 1, (1, 1), 6),
    ],
)
def test_conv_1d(case: tuple[Any, ...], vb: int) -> None:
    """1-d convolutions (NCW) as 2-d ones of height 1."""
    xs, cout, k, s, d, pads, g = case
    rng = np.random.default_rng(4)
    ws = (cout, xs[1] // g, k)
    ow = (xs[2] + pads[0] + pads[1] - (k - 1) * d - 1) // s + 1
    w = fl(rng, ws, "f32")
    b = fl(rng, (cout,), "f32")
    attrs = f"{arr('strides', [s])}, {arr('dilations', [d])}, {arr('pads', list(pads))}, group = {g} : i64, do_relu = true"
    o = op(
        "tpu.Conv",
        [t(xs, "f32"), ("const", dense(w), t(ws, "f32")), ("const", dense(b), t((cout,), "f32"))],
        t((xs[0], cout, ow), "f32"),
        attrs,
    )
    x = fl(rng, xs, "f32")
    kernel = Compiled(DepthwiseF32() if g == xs[1] == cout else ConvF32(), o, ISAS[vb])
    y = _empty((xs[0], cout, ow), "f32")
    kernel({"input": x, "output": y}, 2)
    _close(y, o.execute([x, w, b])[0], "f32")


# ---- matmul ----------------------------------------------------------------------------------------------


def matmul_op(
    rng: np.random.Generator,
    a_s: tuple[int, ...],
    b_s: tuple[int, ...],
    ft: str,
    const: bool,
    bias: bool,
    relu: str,
) -> tuple[Any, list[Any]]:
    bv = fl(rng, b_s, ft)
    n = b_s[-1]
    out = np.matmul(np.zeros(a_s, np.float32), np.zeros(b_s, np.float32)).shape
    bb = fl(rng, (n,), ft) if bias else None
    attrs = {"": "", "relu": "do_relu = true", "limit": "do_relu = true, relu_limit = 0.5"}[relu]
    operands: list[Any] = [
        t(a_s, ft),
        ("const", dense(bv.astype(np.float32)), t(b_s, ft)) if const else t(b_s, ft),
        ("const", dense(bb.astype(np.float32)), t((n,), ft)) if bb is not None else None,
    ]
    return op("tpu.MatMul", operands, t(tuple(out), ft), attrs), [fl(rng, a_s, ft), bv, bb]


def check_matmul(
    a_s: tuple[int, ...],
    b_s: tuple[int, ...],
    ft: str = "f32",
    const: bool = True,
    bias: bool = True,
    relu: str = "",
    vb: int = 64,
    nparts: int = 1,
    seed: int = 0,
) -> None:
    rng = np.random.default_rng(seed)
    o, ins = matmul_op(rng, a_s, b_s, ft, const, bias, relu)
    kernel = Compiled(MatMulF32() if const else BatchMatMulF32(), o, ISAS[vb])
    ref = o.execute(ins)[0]
    y = _empty(ref.shape, ft)
    arrays = {"input": ins[0], "output": y}
    if not const:
        arrays["right"] = ins[1]
    kernel(arrays, nparts)
    _close(y, ref, ft)


MATMULS = [
    ((5, 7), (7, 3)),
    ((37, 33), (33, 50)),
    ((1, 64), (64, 17)),
    ((2, 3, 9, 20), (20, 49)),  # batch dims flatten into rows
    ((16,), (16, 5)),  # a vector
    ((64, 128), (128, 96)),
]


@pytest.mark.parametrize("vb", [64, 32, 16])
@pytest.mark.parametrize("case", range(len(MATMULS)))
def test_matmul_examples(case: int, vb: int) -> None:
    a_s, b_s = MATMULS[case]
    check_matmul(
        a_s, b_s, vb=vb, nparts=1 + case % 3, relu=["", "relu", "limit"][case % 3], bias=case % 2 == 0
    )


@pytest.mark.parametrize("ft", ["f16", "bf16"])
def test_matmul_half_modes(ft: str) -> None:
    check_matmul((13, 20), (20, 30), ft=ft, relu="limit", nparts=2)


@pytest.mark.parametrize("vb", [64, 32, 16])
@pytest.mark.parametrize(
    "shapes",
    [((2, 5, 7), (2, 7, 19)), ((3, 17, 9), (9, 33)), ((2, 2, 9, 64), (2, 2, 64, 40)), ((4, 4), (4, 4))],
)
def test_batch_matmul_examples(shapes: tuple[tuple[int, ...], tuple[int, ...]], vb: int) -> None:
    check_matmul(*shapes, const=False, bias=False, vb=vb, nparts=2, relu="relu")


@settings(max_examples=30, deadline=None)
@given(
    st.integers(1, 20),
    st.integers(1, 40),
    st.integers(1, 60),
    st.sampled_from([(), (2,), (2, 3)]),
    st.sampled_from(["weight", "act", "vec"]),
    st.sampled_from(["f32", "f16", "bf16"]),
    st.booleans(),
    st.sampled_from(["", "relu", "limit"]),
    st.sampled_from([64, 32, 16]),
    st.integers(1, 3),
    st.integers(0, 2**31),
)
def test_matmul_property(
    m: int,
    k: int,
    n: int,
    batch: tuple[int, ...],
    kind: str,
    ft: str,
    bias: bool,
    relu: str,
    vb: int,
    nparts: int,
    seed: int,
) -> None:
    if kind == "act":
        ft = "f32"
        a_s, b_s = (*batch, m, k), (*batch, k, n)
    elif kind == "vec":
        a_s, b_s = (k,), (k, n)
    else:
        a_s, b_s = (*batch, m, k), (k, n)
    check_matmul(a_s, b_s, ft, kind != "act", bias, relu, vb, nparts, seed)


def test_matmul_refuses_what_it_cannot_do() -> None:
    rng = np.random.default_rng(3)
    isa = ISAS[64]
    act, _ = matmul_op(rng, (2, 3, 4), (2, 4, 5), "f32", False, False, "")
    assert not MatMulF32().matches(act, isa) and BatchMatMulF32().matches(act, isa)
    const, _ = matmul_op(rng, (3, 4), (4, 5), "f32", True, False, "")
    assert MatMulF32().matches(const, isa) and not BatchMatMulF32().matches(const, isa)
    broadcast, _ = matmul_op(rng, (2, 3, 4), (1, 4, 5), "f32", False, False, "")
    assert not BatchMatMulF32().matches(broadcast, isa)
    half_act, _ = matmul_op(rng, (3, 4), (4, 5), "bf16", False, False, "")
    assert not BatchMatMulF32().matches(half_act, isa)
    wq = rng.integers(-127, 128, (4, 5)).astype(np.int8)
    int8 = op(
        "tpu.MatMul",
        [
            t((3, 4), q8(True, 0.04)),
            ("const", dense(wq), t((4, 5), per_axis([0.01] * 5, 1)), t((4, 5), "i8")),
            None,
        ],
        t((3, 5), q8(True, 0.1)),
        f"{arr('multiplier', [1 << 30])}, {arr('rshift', [5])}",
    )
    assert not MatMulF32().matches(int8, isa) and not BatchMatMulF32().matches(int8, isa)

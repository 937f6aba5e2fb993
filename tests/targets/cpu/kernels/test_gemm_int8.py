"""The CPU target's INT8 templates (``lamina/targets/cpu/kernels/gemm_int8.py``): each kernel,
compiled for the host with llvmlite and called through ctypes (``int8_harness``) for every part of
``nparts`` in 1, 2, 3, equals the ``tpu`` op's ``execute`` **bit for bit** (no tolerance) — over
random shapes, strides, pads, dilations, groups, symmetric / asymmetric / uint8 inputs, per-channel
and per-tensor requantization, relu and relu limits, extreme values (all -128 / 127 / 255, int32
accumulations that wrap) — with the host's ISA and with narrower ones forced (AVX2-width without
VNNI, 16-byte vectors, 512-bit without VNNI, 256-bit VNNI). Hypothesis examples are derandomized
(the same every run)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled, host_isa
from tpu_cases import arr, dense, op, per_axis, q8, t

from lamina.dialects.tpu.quantize import quantize_multiplier
from lamina.ir.constants import constant_array
from lamina.targets.cpu.kernels.abi import Isa, Template
from lamina.targets.cpu.kernels.gemm_int8 import (
    TEMPLATES,
    Int8Conv,
    Int8ConvChannels,
    Int8Depthwise,
    Int8MatMul,
    vnni,
)

HOST = host_isa()
#: ISAs to force: the host's, AVX2 width without VNNI, 16-byte vectors, 512-bit without VNNI,
#: and 256-bit VNNI where the host runs it
ISAS = [
    HOST,
    Isa(32, frozenset({"fma", "avx2"})),
    Isa(16),
    Isa(64, frozenset({"avx512f", "avx512bw"})),
]
if HOST.has("avx512vnni") and HOST.has("avx512vl"):
    ISAS.append(Isa(32, frozenset({"avxvnni", "fma"})))
ISA_IDS = ["host", "avx2", "v16", "avx512-novnni", "avxvnni"][: len(ISAS)]
SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def _inputs(o: Any, x: np.ndarray) -> list[Any]:
    return [x] + [constant_array(v) if str(v.type) != "none" else None for v in o.operands[1:]]


def conv_template(o: Any, isa: Isa) -> Template:
    """The one conv template that takes ``o`` (exactly one of the two does)."""
    found = [tp for tp in (Int8Conv(), Int8Depthwise()) if tp.matches(o, isa)]
    assert len(found) == 1
    return found[0]


def check(
    tpl: Template,
    o: Any,
    x: np.ndarray,
    isa: Isa,
    nparts: tuple[int, ...] = (1, 2, 3),
    ir_passes: bool = False,
) -> None:
    """The kernel of ``tpl`` for ``o`` equals ``o.execute`` bit for bit for every nparts (compiled
    by codegen alone, or after LLVM's O3 IR pipeline with ``ir_passes``)."""
    assert tpl.matches(o, isa)
    ref = o.execute(_inputs(o, x))[0]
    c = Compiled(tpl, o, isa, ir_passes=ir_passes)
    c.expect([x], ref, nparts)


def _mults(rng: np.random.Generator, n: int, lo: float, hi: float) -> tuple[list[int], list[int]]:
    pairs = [quantize_multiplier(float(r)) for r in np.exp(rng.uniform(np.log(lo), np.log(hi), n))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _act(rng: np.random.Generator, shape: tuple[int, ...], signed: bool, fill: str) -> np.ndarray:
    dt = np.int8 if signed else np.uint8
    lo, hi = (-128, 127) if signed else (0, 255)
    if fill == "min":
        return np.full(shape, lo, dt)
    if fill == "max":
        return np.full(shape, hi, dt)
    return rng.integers(lo, hi + 1, shape).astype(dt)


def _weight(rng: np.random.Generator, shape: tuple[int, ...], fill: str) -> np.ndarray:
    if fill == "min":
        return np.full(shape, -127, np.int8)
    if fill == "max":
        return np.full(shape, 127, np.int8)
    return rng.integers(-127, 128, shape).astype(np.int8)


def conv_op(
    rng: np.random.Generator,
    n: int,
    cin: int,
    hw: tuple[int, ...],
    cout: int,
    k: tuple[int, ...],
    s: tuple[int, ...],
    d: tuple[int, ...],
    pads: list[int],
    g: int,
    mode: str,
    relu: str,
    per_channel: bool,
    bias: str,
    wfill: str = "rand",
    big: bool = False,
) -> Any:
    """A ``tpu.Conv`` INT8 (rank 3 or 4 as ``len(hw)``)."""
    nd = len(hw)
    xs, ws = (n, cin, *hw), (cout, cin // g, *k)
    out_sp = tuple((hw[i] + pads[i] + pads[i + nd] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(nd))
    signed = mode != "u8"
    zp = {"asym": -37, "asym+": 90}.get(mode, 0)
    w = _weight(rng, ws, wfill)
    operands: list[Any] = [
        t(xs, q8(signed, 0.05, zp)),
        ("const", dense(w), t(ws, per_axis([0.01] * cout, 0)), t(ws, "i8")),
        None,
    ]
    if bias != "none":
        lim = 2**31 - 1 if bias == "huge" else 5000
        bv = rng.integers(-lim, lim, (cout,)).astype(np.int32)
        operands[2] = ("const", dense(bv), t((cout,), "i32"))
    m, r = _mults(rng, cout if per_channel else 1, 1e-9 if big else 1e-4, 0.9 if big else 0.05)
    attrs = [
        arr("strides", s),
        arr("dilations", d),
        arr("pads", pads),
        f"group = {g} : i64",
        arr("multiplier", m),
        arr("rshift", r),
    ]
    if relu != "none":
        attrs.append("do_relu = true")
    if relu == "limit":
        attrs.append("relu_limit = 1.5")
    out_signed = relu == "none"
    out_t = t((n, cout, *out_sp), q8(out_signed, 0.02, 5 if out_signed else 0))
    return op("tpu.Conv", operands, out_t, ", ".join(attrs))


def draw_conv(
    draw: Any,
    nd: int,
    g: int,
    cin: int,
    cout: int,
    k: tuple[int, ...],
    d: tuple[int, ...],
    s: tuple[int, ...],
    hw: tuple[int, ...],
) -> tuple[Any, np.ndarray]:
    """A conv of the given geometry with drawn pads (the input at least one dilated kernel wide),
    batch, input mode, relu, per-channel or per-tensor requant, bias and extreme fills, and its
    input: what every INT8 conv template's property test draws (``conv_cases``, ``stem_cases``)."""
    pads = [draw(st.integers(0, k[i % nd])) for i in range(2 * nd)]
    for i in range(nd):
        assume(hw[i] + pads[i] + pads[i + nd] >= (k[i] - 1) * d[i] + 1)
    n = draw(st.integers(1, 2))
    mode = draw(st.sampled_from(["sym", "asym", "asym+", "u8"]))
    relu = draw(st.sampled_from(["none", "relu", "limit"]))
    per_channel = draw(st.booleans())
    bias = draw(st.sampled_from(["none", "small", "huge"]))
    fill = draw(st.sampled_from(["rand", "rand", "min", "max"]))
    wfill = draw(st.sampled_from(["rand", "rand", "min", "max"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    o = conv_op(
        rng, n, cin, hw, cout, k, s, d, pads, g, mode, relu, per_channel, bias, wfill, big=fill != "rand"
    )
    return o, _act(rng, (n, cin, *hw), mode != "u8", fill)


@st.composite
def conv_cases(draw: Any, depthwise: bool, channel_block: int = 1) -> tuple[Any, np.ndarray]:
    nd = draw(st.sampled_from([2, 2, 2, 1]))
    g = draw(st.integers(1, 4)) if not depthwise else draw(st.integers(1, 9))
    cin = g if depthwise else g * draw(st.integers(1, 9))
    cout = g if depthwise else g * channel_block * draw(st.integers(1, 11 if channel_block == 1 else 3))
    k = tuple(draw(st.integers(1, 5)) for _ in range(nd))
    d = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    hw = tuple(draw(st.integers(1, 19)) for _ in range(nd))
    return draw_conv(draw, nd, g, cin, cout, k, d, s, hw)


@SETTINGS
@given(case=conv_cases(depthwise=False))
def test_conv_bit_exact(case: tuple[Any, np.ndarray]) -> None:
    check(conv_template(case[0], HOST), *case, HOST)


@SETTINGS
@given(case=conv_cases(depthwise=False, channel_block=16))
def test_conv_channel_lanes_bit_exact(case: tuple[Any, np.ndarray]) -> None:
    """The channel-lane conv kernel (forced on every conv it can run)."""
    check(Int8ConvChannels(force=True), *case, HOST)


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=conv_cases(depthwise=False, channel_block=16))
def test_conv_channel_lanes_narrower_isa(isa: Isa, case: tuple[Any, np.ndarray]) -> None:
    check(Int8ConvChannels(force=True), *case, isa, nparts=(1, 3))


def test_channel_lanes_taken_where_it_pays() -> None:
    """Small images with many channels go to the channel-lane kernel, large ones stay on pixels."""
    rng = np.random.default_rng(0)
    small = conv_op(rng, 1, 64, (7, 7), 64, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "u8", "relu", True, "small")
    large = conv_op(rng, 1, 16, (40, 40), 16, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "u8", "relu", True, "small")
    assert Int8ConvChannels().matches(small, HOST) and Int8Conv().matches(small, HOST)
    assert Int8ConvChannels().priority > Int8Conv().priority
    assert not Int8ConvChannels().matches(large, HOST)


def test_small_images_take_the_tile_of_least_padding() -> None:
    """At most 400 positions (14x14): the pixel-lane tile computes the fewest unused positions with
    at least 8 accumulators (8 channels x 1 register: 208 positions for 196), where the general
    choice (loads weighted more) takes 8 x 2 (224); larger images keep the general choice; every
    forced ISA gets a tile that fits its registers."""
    from lamina.targets.cpu.kernels.gemm_int8 import conv_geom

    rng = np.random.default_rng(1)
    small = conv_op(
        rng, 1, 256, (14, 14), 1024, (1, 1), (1, 1), (1, 1), [0] * 4, 1, "u8", "none", True, "small"
    )
    large = conv_op(
        rng, 1, 64, (28, 28), 128, (1, 1), (1, 1), (1, 1), [0] * 4, 1, "u8", "none", True, "small"
    )
    g_small, g_large = conv_geom(small), conv_geom(large)
    wide = Isa(64, frozenset({"avx512f", "avx512bw", "avx512vnni"}))
    assert Int8Conv()._tile(g_small, wide) == (8, 1)
    assert Int8Conv()._base_tile(g_small, wide) == (8, 2)
    assert Int8Conv()._tile(g_large, wide) == Int8Conv()._base_tile(g_large, wide)
    for isa in ISAS:
        mr, nv = Int8Conv()._tile(g_small, isa)
        regs = (30 if isa.vector_bytes == 64 else 14) // (1 if vnni(isa) else 2)
        assert mr * nv + nv <= regs and mr * nv >= min(8, regs - 1)


@SETTINGS
@given(case=conv_cases(depthwise=True))
def test_depthwise_bit_exact(case: tuple[Any, np.ndarray]) -> None:
    check(Int8Depthwise(), *case, HOST)


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=conv_cases(depthwise=False))
def test_conv_narrower_isa(isa: Isa, case: tuple[Any, np.ndarray]) -> None:
    check(conv_template(case[0], isa), *case, isa, nparts=(1, 3))


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=conv_cases(depthwise=True))
def test_depthwise_narrower_isa(isa: Isa, case: tuple[Any, np.ndarray]) -> None:
    check(Int8Depthwise(), *case, isa, nparts=(1, 2))


def test_conv_accumulation_wraps() -> None:
    """255 x 127 over K = 1400 * 7 * 7 (2.2e9 per output) plus a bias near 2**31: the int32 register
    wraps in the contract and in the kernel alike (u8 input, then int8 with zero point -128)."""
    rng = np.random.default_rng(1)
    for mode, fill in (("u8", "max"), ("asym", "min")):
        o = conv_op(
            rng,
            1,
            1400,
            (4, 4),
            4,
            (7, 7),
            (1, 1),
            (1, 1),
            [3] * 4,
            1,
            mode,
            "none",
            True,
            "huge",
            "max",
            big=True,
        )
        x = _act(rng, (1, 1400, 4, 4), mode != "u8", fill)
        ref = o.execute(_inputs(o, x))[0]
        acc = 1400 * 49 * 255 * 127
        assert acc > 2**31  # the exact sum does not fit the register
        check(Int8Conv(), o, x, HOST, nparts=(1, 2))
        assert len(np.unique(ref)) > 1


@pytest.mark.parametrize(
    "cin,hw,cout,k,s,p",
    [
        (3, 32, 16, 7, 2, 3),  # a ResNet stem
        (16, 15, 24, 3, 2, 1),
        (32, 8, 32, 1, 1, 0),  # 1x1 as a GEMM
        (20, 9, 8, 1, 2, 0),  # 1x1 stride 2 (downsample)
        (24, 7, 84, 3, 1, 1),  # few positions, many channels: the parts split the channel tiles
    ],
)
def test_conv_resnet_like(cin: int, hw: int, cout: int, k: int, s: int, p: int) -> None:
    rng = np.random.default_rng(cin * hw)
    for mode in ("u8", "asym"):
        o = conv_op(
            rng, 1, cin, (hw, hw), cout, (k, k), (s, s), (1, 1), [p] * 4, 1, mode, "relu", True, "small"
        )
        check(Int8Conv(), o, _act(rng, (1, cin, hw, hw), mode != "u8", "rand"), HOST)


@pytest.mark.parametrize("isa", [HOST, ISAS[1], ISAS[3]], ids=["host", "avx2", "avx512-novnni"])
@pytest.mark.parametrize(
    "hw,k,s,p",
    [
        (7, 1, 1, 0),  # rows narrower than a chunk of 16 positions: one masked chunk
        (14, 1, 1, 0),
        (14, 1, 2, 0),  # 1x1/2 down conv: 16 positions from 32 input bytes, the row's end masked
        (15, 3, 1, 1),  # padded row of 17: the last chunk overlaps
        (16, 1, 1, 0),  # exactly one chunk
        (17, 3, 2, 2),
        (28, 1, 2, 0),
        (31, 5, 3, 2),
        (33, 3, 1, 1),
    ],
)
def test_conv_pack_row_widths(isa: Isa, hw: int, k: int, s: int, p: int) -> None:
    """The input pack over row widths below, at and past a chunk of 16 positions (AVX-512 BW: whole
    chunks, masked at the padding and the input's end; else vector chunks and bytes), strides 1-3,
    pads, a channel group of four left incomplete: both conv templates, bit for bit."""
    rng = np.random.default_rng(hw * 31 + k * 7 + s)
    for mode, cin in (("u8", 13), ("asym", 8)):
        o = conv_op(
            rng, 2, cin, (hw, hw), 32, (k, k), (s, s), (1, 1), [p] * 4, 1, mode, "relu", True, "small"
        )
        x = _act(rng, (2, cin, hw, hw), mode != "u8", "rand")
        check(Int8Conv(), o, x, isa, (1, 2))
        check(Int8ConvChannels(force=True), o, x, isa, (1, 3))


# ---- matmul ------------------------------------------------------------------------------------


def matmul_op(
    rng: np.random.Generator,
    ashape: tuple[int, ...],
    n: int,
    mode: str,
    relu: str,
    per_channel: bool,
    bias: str,
    wfill: str = "rand",
    per_axis_in: bool = False,
    per_axis_out: bool = False,
    big: bool = False,
    limit_per_axis: bool = False,
) -> Any:
    k = ashape[-1]
    signed = mode != "u8"
    zp = {"asym": 21, "asym+": -100}.get(mode, 0)
    w = _weight(rng, (k, n), wfill)
    if per_axis_in:
        in_t = f"!quant.uniform<i8:f32:{len(ashape) - 1}, {{{', '.join(repr(0.01 * (i + 1)) for i in range(k))}}}>"
    else:
        in_t = q8(signed, 0.05, zp)
    operands: list[Any] = [
        t(ashape, in_t),
        ("const", dense(w), t((k, n), per_axis([0.01] * n, 1)), t((k, n), "i8")),
        None,
    ]
    if bias != "none":
        lim = 2**31 - 1 if bias == "huge" else 5000
        bv = rng.integers(-lim, lim, (n,)).astype(np.int32)
        operands[2] = ("const", dense(bv), t((n,), "i32"))
    mm, r = _mults(rng, n if per_channel or per_axis_out else 1, 1e-9 if big else 1e-4, 0.9 if big else 0.05)
    attrs = [arr("multiplier", mm), arr("rshift", r)]
    if relu != "none":
        attrs.append("do_relu = true")
    if relu == "limit" and (limit_per_axis or not per_axis_out):
        attrs.append("relu_limit = 1.5")
    oshape = (*ashape[:-1], n)
    if per_axis_out:
        out_t = per_axis([0.02 + 0.001 * i for i in range(n)], len(oshape) - 1, weight=False)
    else:
        out_t = q8(relu == "none", 0.02, -3 if relu == "none" else 0)
    return op("tpu.MatMul", operands, t(oshape, out_t), ", ".join(attrs))


@st.composite
def matmul_cases(draw: Any) -> tuple[Any, np.ndarray]:
    rank = draw(st.integers(2, 3))
    ashape = (
        *tuple(draw(st.integers(1, 4)) for _ in range(rank - 2)),
        draw(st.integers(1, 20)),
        draw(st.integers(1, 150)),
    )
    n = draw(st.integers(1, 80))
    per_in = draw(st.booleans()) and draw(st.booleans())
    mode = "sym" if per_in else draw(st.sampled_from(["sym", "asym", "asym+", "u8"]))
    relu = draw(st.sampled_from(["none", "relu", "limit"]))
    per_out = draw(st.booleans()) and draw(st.booleans())
    fill = draw(st.sampled_from(["rand", "rand", "min", "max"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    o = matmul_op(
        rng, ashape, n, mode, relu, draw(st.booleans()), draw(st.sampled_from(["none", "small", "huge"])),
        draw(st.sampled_from(["rand", "min", "max"])), per_in, per_out, big=fill != "rand",
    )  # fmt: skip
    return o, _act(rng, ashape, mode != "u8", fill)


@SETTINGS
@given(case=matmul_cases())
def test_matmul_bit_exact(case: tuple[Any, np.ndarray]) -> None:
    check(Int8MatMul(), *case, HOST)


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=matmul_cases())
def test_matmul_narrower_isa(isa: Isa, case: tuple[Any, np.ndarray]) -> None:
    check(Int8MatMul(), *case, isa, nparts=(1, 3))


def test_matmul_fc_and_wrap() -> None:
    """A batch-1 FC (1 x 512 x 1000: parts split the columns) and K = 70000 of 255 x 127 (wraps)."""
    rng = np.random.default_rng(3)
    o = matmul_op(rng, (1, 512), 1000, "sym", "none", True, "small")
    check(Int8MatMul(), o, _act(rng, (1, 512), True, "rand"), HOST)
    o = matmul_op(rng, (3, 70000), 17, "u8", "none", True, "huge", "max", big=True)
    check(Int8MatMul(), o, _act(rng, (3, 70000), False, "max"), HOST, nparts=(1, 2))


# ---- what the templates take, and what they leave to the generic path ------------------------------


def test_matches_refuses_what_it_cannot_run_exactly() -> None:
    rng = np.random.default_rng(0)
    conv = conv_op(rng, 1, 4, (5, 5), 4, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "sym", "none", True, "small")
    dw = conv_op(rng, 1, 4, (5, 5), 4, (3, 3), (1, 1), (1, 1), [1] * 4, 4, "sym", "none", True, "small")
    mm = matmul_op(rng, (2, 8), 4, "sym", "none", True, "small")
    assert Int8Conv().matches(conv, HOST) and not Int8Depthwise().matches(conv, HOST)
    assert Int8Depthwise().matches(dw, HOST) and not Int8Conv().matches(dw, HOST)
    assert Int8MatMul().matches(mm, HOST) and not Int8Conv().matches(mm, HOST)
    # float convolution: not INT8
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    fconv = op(
        "tpu.Conv",
        [t((1, 4, 5, 5), "f32"), ("const", dense(w), t((4, 4, 3, 3), "f32")), None],
        t((1, 4, 3, 3), "f32"),
    )
    assert not any(tp.matches(fconv, HOST) for tp in TEMPLATES)
    # activation x activation matmul (no constant weight)
    aa = op(
        "tpu.MatMul",
        [t((2, 8), q8(True, 0.05)), t((8, 4), q8(True, 0.05)), None],
        t((2, 4), q8(True, 0.1)),
        ", ".join([arr("multiplier", [1 << 30]), arr("rshift", [3])]),
    )
    assert not Int8MatMul().matches(aa, HOST)
    # per-axis output with a relu limit (the contract reads one scale): left to the generic path
    pa = matmul_op(rng, (2, 8), 4, "sym", "relu", True, "small", per_axis_out=True)
    assert Int8MatMul().matches(pa, HOST)
    pl = matmul_op(rng, (2, 8), 4, "sym", "limit", True, "small", per_axis_out=True, limit_per_axis=True)
    assert pl.attr("relu_limit") == 1.5 and not Int8MatMul().matches(pl, HOST)


def test_narrow_isa_emits_no_vnni() -> None:
    """Without VNNI features no x86 dot-product intrinsic appears in the IR (the i32 path)."""
    from llvmlite import ir

    rng = np.random.default_rng(0)
    o = conv_op(rng, 1, 8, (6, 6), 8, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "sym", "none", True, "small")
    for isa in ISAS:
        m = ir.Module(name="m")
        Int8Conv().emit(m, Int8Conv().plan(o, "k", isa), o, isa)
        assert ("vpdpbusd" in str(m)) == vnni(isa)


# ---- ops as the lowering makes them -------------------------------------------------------------------

CONV_MODULE = """
func.func @main(%x: tensor<1x6x9x9x!quant.calibrated<f32<{lo}:2.0>>>) -> tensor<1x8x5x5xf32> {{
  %in = "top.Input"(%x) : (tensor<1x6x9x9x!quant.calibrated<f32<{lo}:2.0>>>) -> tensor<1x6x9x9x!quant.calibrated<f32<{lo}:2.0>>> loc("x")
  %w = "top.Weight"() <{{value = dense<{w}> : tensor<8x6x3x3xf32>}}> : () -> tensor<8x6x3x3xf32>
  %b = "top.Weight"() <{{value = dense<{b}> : tensor<8xf32>}}> : () -> tensor<8xf32>
  %c = "top.Conv"(%in, %w, %b) <{{pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>, do_relu = true}}> : (tensor<1x6x9x9x!quant.calibrated<f32<{lo}:2.0>>>, tensor<8x6x3x3xf32>, tensor<8xf32>) -> tensor<1x8x5x5x!quant.calibrated<f32<0.0:3.0>>> loc("conv")
  return %c : tensor<1x8x5x5x!quant.calibrated<f32<0.0:3.0>>>
}}
"""

MATMUL_MODULE = """
func.func @main(%x: tensor<4x24x!quant.calibrated<f32<{lo}:2.0>>>) -> tensor<4x10xf32> {{
  %in = "top.Input"(%x) : (tensor<4x24x!quant.calibrated<f32<{lo}:2.0>>>) -> tensor<4x24x!quant.calibrated<f32<{lo}:2.0>>> loc("x")
  %w = "top.Weight"() <{{value = dense<{w}> : tensor<24x10xf32>}}> : () -> tensor<24x10xf32>
  %b = "top.Weight"() <{{value = dense<{b}> : tensor<10xf32>}}> : () -> tensor<10xf32>
  %c = "top.MatMul"(%in, %w, %b) : (tensor<4x24x!quant.calibrated<f32<{lo}:2.0>>>, tensor<24x10xf32>, tensor<10xf32>) -> tensor<4x10x!quant.calibrated<f32<-3.0:3.0>>> loc("fc")
  return %c : tensor<4x10x!quant.calibrated<f32<-3.0:3.0>>>
}}
"""


def _lit(a: np.ndarray) -> str:
    if a.ndim == 0:
        return repr(float(a))
    return "[" + ", ".join(_lit(x) for x in a) + "]"


@pytest.mark.parametrize("asym", [False, True])
@pytest.mark.parametrize("lo", ["-2.0", "0.0", "-0.5"])
@pytest.mark.parametrize("kind", ["conv", "matmul"])
def test_lowered_ops(kind: str, lo: str, asym: bool) -> None:
    """One-op ``top`` modules lowered with ``convert-top-to-tpu`` (symmetric and asymmetric, signed
    and unsigned input ranges): the template takes the lowered op and matches its execute."""
    from lamina.dialects.tpu.transforms import convert_top_to_tpu
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module

    rng = np.random.default_rng(7)
    if kind == "conv":
        w, b = rng.standard_normal((8, 6, 3, 3)) * 0.3, rng.standard_normal(8)
        text = CONV_MODULE.format(lo=lo, w=_lit(w), b=_lit(b))
        xs: tuple[int, ...] = (1, 6, 9, 9)
    else:
        w, b = rng.standard_normal((24, 10)) * 0.3, rng.standard_normal(10)
        text = MATMUL_MODULE.format(lo=lo, w=_lit(w), b=_lit(b))
        xs = (4, 24)
    m = parse_module(text, Context())
    assert m is not None
    ok, stats = convert_top_to_tpu(m, "INT8", asymmetric=asym)  # type: ignore[arg-type]
    assert ok and stats["int8"] >= 1
    o = next(x for x in m.walk_ops() if x.name in ("tpu.Conv", "tpu.MatMul"))  # type: ignore[attr-defined]
    e = o.operands[0].type.element_type
    x = _act(rng, xs, bool(e.signed), "rand")
    tpl = Int8Conv() if kind == "conv" else Int8MatMul()
    check(tpl, o, x, HOST, ir_passes=True)
    if kind == "conv":  # 8 output channels: no channel-lane kernel (needs multiples of 16)
        assert not Int8ConvChannels(force=True).matches(o, HOST)


@pytest.mark.slow
@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    case=st.one_of(
        conv_cases(depthwise=False),
        conv_cases(depthwise=True),
        conv_cases(depthwise=False, channel_block=16),
        matmul_cases(),
    ),
    isa=st.sampled_from(ISAS),
)
def test_many_bit_exact(case: tuple[Any, np.ndarray], isa: Isa) -> None:
    """The long run (``-m slow``): every template, every ISA, more examples."""
    o = case[0]
    check(conv_template(o, isa) if o.name == "tpu.Conv" else Int8MatMul(), *case, isa, ir_passes=True)
    if Int8ConvChannels(force=True).matches(o, isa):
        check(Int8ConvChannels(force=True), *case, isa, ir_passes=True)


def test_ir_key_names_what_the_code_depends_on() -> None:
    """Two convs differing only in weights, bias and multipliers share a key and emit the same
    function (but for its name); another output zero point or shape gives another key."""
    from llvmlite import ir

    rng = np.random.default_rng(5)
    args = (1, 8, (6, 6), 16, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "asym", "none", True, "small")
    a, b = conv_op(rng, *args), conv_op(rng, *args)
    other = conv_op(rng, 1, 8, (7, 6), 16, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "asym", "none", True, "small")
    for tp in (Int8Conv(), Int8ConvChannels(force=True)):
        assert tp.ir_key(a, HOST) == tp.ir_key(b, HOST) != tp.ir_key(other, HOST)
        texts = []
        for o in (a, b):
            m = ir.Module(name="m")
            tp.emit(m, tp.plan(o, "k", HOST), o, HOST)
            texts.append(str(m))
        assert texts[0] == texts[1]
    ma = matmul_op(rng, (3, 20), 8, "sym", "none", True, "small")
    mb = matmul_op(rng, (3, 20), 8, "sym", "none", True, "small")
    mc = matmul_op(rng, (3, 20), 8, "u8", "none", True, "small")
    assert Int8MatMul().ir_key(ma, HOST) == Int8MatMul().ir_key(mb, HOST) != Int8MatMul().ir_key(mc, HOST)


def test_conv_auto_pad_same() -> None:
    rng = np.random.default_rng(9)
    w = rng.integers(-127, 128, (8, 4, 3, 3)).astype(np.int8)
    for mode in ("SAME_UPPER", "SAME_LOWER"):
        o = op(
            "tpu.Conv",
            [
                t((1, 4, 8, 7), q8(True, 0.05, 2)),
                ("const", dense(w), t((8, 4, 3, 3), per_axis([0.01] * 8, 0)), t((8, 4, 3, 3), "i8")),
                None,
            ],
            t((1, 8, 4, 4), q8(True, 0.02, 1)),
            ", ".join(
                [
                    arr("strides", [2, 2]),
                    f'auto_pad = "{mode}"',
                    arr("multiplier", [1 << 30]),
                    arr("rshift", [8]),
                ]
            ),
        )
        check(Int8Conv(), o, _act(rng, (1, 4, 8, 7), True, "rand"), HOST)


def test_many_taps_loop_over_kernel_rows() -> None:
    """A 7x7 kernel runs its rows as a loop over a constant table (smaller code), still exact."""
    rng = np.random.default_rng(11)
    o = conv_op(rng, 1, 3, (20, 20), 16, (7, 7), (2, 2), (1, 1), [3] * 4, 1, "sym", "relu", True, "small")
    c = Compiled(Int8Conv(), o, HOST)
    assert ".rows" in c.ir_text
    check(Int8Conv(), o, _act(rng, (1, 3, 20, 20), True, "rand"), HOST)


# ---- a fused tpu.Lut (the compiler's epilogue hook) ------------------------------------------------


def with_lut(o: Any, rng: np.random.Generator, lut_signed: bool) -> tuple[Any, Any]:
    """``o``'s module with a ``tpu.Lut`` (a random table) after ``o``, ``cpu.fused = 1`` on the
    reparsed ``o`` as the compiler sets it: (producer, lut)."""
    from lamina.ir.attributes import IntegerAttr
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.ir.printer import print_operation
    from lamina.ir.types import i64

    m = o
    while m.parent_op() is not None:
        m = m.parent_op()
    text = print_operation(m)
    ret = next(line for line in text.splitlines() if line.strip().startswith("return "))
    name, ty = ret.strip()[len("return ") :].split(" : ")
    shape = ty[len("tensor<") :].rsplit("x!quant", 1)[0]
    ty2 = f"tensor<{shape}x{q8(lut_signed, 0.03, 2 if lut_signed else 0)}>"
    table = rng.integers(-128, 128, 256) if lut_signed else rng.integers(0, 256, 256)
    tt = f"tensor<256x{'i8' if lut_signed else 'ui8'}>"
    lut = f'    %lut = "tpu.Lut"({name}) <{{table = {dense(table)} : {tt}}}> : ({ty}) -> {ty2}\n'
    text = text.replace(ret, lut + f"    return %lut : {ty2}").replace(f"-> {ty} {{", f"-> {ty2} {{")
    mod = parse_module(text, Context())
    assert mod is not None
    prod = next(x for x in mod.walk_ops() if x.name in ("tpu.Conv", "tpu.MatMul"))  # type: ignore[attr-defined]
    lut_op = next(x for x in mod.walk_ops() if x.name == "tpu.Lut")  # type: ignore[attr-defined]
    assert Int8Conv().fuses(prod, lut_op) if prod.name == "tpu.Conv" else Int8MatMul().fuses(prod, lut_op)
    prod.set_attr("cpu.fused", IntegerAttr(1, i64))
    return prod, lut_op


@pytest.mark.parametrize(
    "kind,isa",
    [
        ("conv", HOST),
        ("conv-channels", HOST),
        ("depthwise", HOST),
        ("matmul", HOST),
        ("conv", ISAS[1]),
        ("matmul", ISAS[1]),
    ],
    ids=["conv", "conv-channels", "depthwise", "matmul", "conv-avx2", "matmul-avx2"],
)
def test_fused_lut(kind: str, isa: Isa) -> None:
    """The kernel writes ``Lut(op(x))``: the table applied to each requantized register."""
    rng = np.random.default_rng(13)
    for out_mode, lut_signed in (("none", True), ("relu", False), ("none", False)):
        if kind == "matmul":
            o = matmul_op(rng, (5, 40), 37, "asym", out_mode, True, "small")
            x = _act(rng, (5, 40), True, "rand")
            tpl: Template = Int8MatMul()
        else:
            g = 16 if kind == "depthwise" else 1
            o = conv_op(
                rng, 1, 16, (9, 9), 16, (3, 3), (1, 1), (1, 1), [1] * 4, g, "sym", out_mode, True, "small"
            )
            x = _act(rng, (1, 16, 9, 9), True, "rand")
            tpl = {
                "conv": Int8Conv(),
                "conv-channels": Int8ConvChannels(force=True),
                "depthwise": Int8Depthwise(),
            }[kind]
        prod, lut = with_lut(o, rng, lut_signed)
        assert tpl.matches(prod, isa)
        ref = lut.execute([prod.execute(_inputs(prod, x))[0]])[0]
        c = Compiled(tpl, prod, isa)
        assert ("weight", "lut") in c.plan.buffers
        assert ("vpermi2var" in c.ir_text) == (isa.has("avx512vbmi") and isa.vector_bytes == 64)
        for n in (1, 2):
            np.testing.assert_array_equal(c([x], ref.shape, ref.dtype, n), ref)

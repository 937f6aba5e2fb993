"""``convert-tpu-to-cpu``'s fusion of a consumer with a second tensor operand — a residual add —
into the producer conv's kernel, compiled and run against the ``tpu`` interpreter: INT8 bit for bit
(``int8-conv`` / ``int8-conv-channels``: the conv's requant, the add's per-operand multipliers, the
ReLU's table), F32 within 1e-5 of the output's scale (``conv_f32``: the add and a ReLU after it, or
a SiLU). Random weights, both operand orders of the add, the residual computed before the conv (a
block's input: fused into the conv) or after it (a downsample conv: the add fuses into that one),
the host ISA and AVX2, one and two threads. The FileCheck tests (``tests/filecheck/cpu``) show
the kernel level."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import lamina.dialects
import lamina.runtime as rt
import lamina.targets
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.quant.deploy import deploy_module, run_tpu_module
from lamina.targets.base import CompileOptions
from lamina.targets.container import write_model
from lamina.targets.cpu import target

_ = lamina.dialects


def _t(shape: tuple[int, ...], lo: float, hi: float) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x!quant.calibrated<f32<{lo}:{hi}>>>"


def _dense(a: np.ndarray) -> str:
    return (
        "dense<"
        + np.array2string(a, separator=", ", threshold=10**9, floatmode="unique").replace("\n", "")
        + ">"
    )


def block_model(
    rng: np.random.Generator,
    c: int,
    hw: int,
    cout: int,
    stride: int,
    swap: bool,
    downsample_after: bool,
    tail: str,
) -> str:
    """``tail(conv2(relu(conv1(x))) + r)`` where ``r`` is ``x`` (a plain block, needs ``c ==
    cout`` and stride 1) or ``conv1x1/stride(x)`` placed after conv2 (``downsample_after``) or
    before conv1; ``swap``: ``r + conv2`` instead; ``tail``: ``relu``, ``silu`` or ``conv`` (a 1x1
    conv reads the sum, as in MobileNetV2's linear bottlenecks: a sum that is the function's result
    would take the int16 ``wide_sum`` form instead)."""
    oh = (hw - 1) // stride + 1
    xs, ys = (1, c, hw, hw), (1, cout, oh, oh)
    w1 = rng.normal(0, 0.3, (cout, c, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, (cout,)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (cout, cout, 3, 3)).astype(np.float32)
    wd = rng.normal(0, 0.3, (cout, c, 1, 1)).astype(np.float32)
    X, Y1, Y2, R, A = (
        _t(xs, -2.0, 2.0),
        _t(ys, 0.0, 6.0),
        _t(ys, -5.0, 5.0),
        _t(ys, -4.0, 4.0),
        _t(ys, -8.0, 8.0),
    )
    lines = [
        f'  %in = "top.Input"(%x) : ({X}) -> {X} loc("x")',
        '  %none = "top.None"() : () -> none',
    ]
    conv1 = [
        f'  %w1 = "top.Weight"() <{{value = {_dense(w1)} : tensor<{cout}x{c}x3x3xf32>}}> : () -> tensor<{cout}x{c}x3x3xf32>',
        f'  %b1 = "top.Weight"() <{{value = {_dense(b1)} : tensor<{cout}xf32>}}> : () -> tensor<{cout}xf32>',
        f'  %c1 = "top.Conv"(%in, %w1, %b1) <{{do_relu = true, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: {stride}, {stride}>}}> : ({X}, tensor<{cout}x{c}x3x3xf32>, tensor<{cout}xf32>) -> {Y1} loc("c1")',
    ]
    conv2 = [
        f'  %w2 = "top.Weight"() <{{value = {_dense(w2)} : tensor<{cout}x{cout}x3x3xf32>}}> : () -> tensor<{cout}x{cout}x3x3xf32>',
        f'  %c2 = "top.Conv"(%c1, %w2, %none) <{{pads = array<i64: 1, 1, 1, 1>}}> : ({Y1}, tensor<{cout}x{cout}x3x3xf32>, none) -> {Y2} loc("c2")',
    ]
    if stride == 1 and c == cout and not downsample_after:
        res, rt_ = "%in", X
        body = conv1 + conv2
    else:
        ds = [
            f'  %wd = "top.Weight"() <{{value = {_dense(wd)} : tensor<{cout}x{c}x1x1xf32>}}> : () -> tensor<{cout}x{c}x1x1xf32>',
            f'  %d = "top.Conv"(%in, %wd, %none) <{{strides = array<i64: {stride}, {stride}>}}> : ({X}, tensor<{cout}x{c}x1x1xf32>, none) -> {R} loc("d")',
        ]
        res, rt_ = "%d", R
        body = conv1 + conv2 + ds if downsample_after else ds + conv1 + conv2
    lines += body
    a, b, ta, tb = ("%c2", res, Y2, rt_) if not swap else (res, "%c2", rt_, Y2)
    lines.append(f'  %a = "top.Add"({a}, {b}) : ({ta}, {tb}) -> {A} loc("a")')
    out, OT = "%a", A
    if tail == "conv":
        wt = rng.normal(0, 0.2, (cout, cout, 1, 1)).astype(np.float32)
        OT = _t(ys, -6.0, 6.0)
        lines.append(
            f'  %wt = "top.Weight"() <{{value = {_dense(wt)} : tensor<{cout}x{cout}x1x1xf32>}}> : () -> tensor<{cout}x{cout}x1x1xf32>'
        )
        lines.append(
            f'  %r = "top.Conv"(%a, %wt, %none) : ({A}, tensor<{cout}x{cout}x1x1xf32>, none) -> {OT} loc("r")'
        )
        out = "%r"
    elif tail:
        OT = _t(ys, 0.0 if tail == "relu" else -0.3, 8.0)
        name = {"relu": "Relu", "silu": "SiLU"}[tail]
        lines.append(f'  %r = "top.{name}"(%a) : ({A}) -> {OT} loc("r")')
        out = "%r"
    lines.append(f"  return {out} : {OT}")
    return f"func.func @main(%x: {X}) -> {OT} {{\n" + "\n".join(lines) + "\n}\n"


def compile_and_run(
    text: str, mode: str, isa: str, tmp: Any, threads: int, asymmetric: bool = False
) -> tuple[Any, Any, Any]:
    tpu = deploy_module(parse_module(text, Context()), mode, asymmetric=asymmetric)
    x = {"x": np.random.default_rng(1).uniform(-2, 2, tpu_input_shape(tpu)).astype(np.float32)}
    want = next(iter(run_tpu_module(tpu, x).values()))
    res = target(isa=isa).compile(tpu, CompileOptions(name="blk", mode=mode))
    path = tmp / f"blk_{mode}_{isa}.lamina"
    write_model(path, res.model)
    got = next(iter(rt.load(path, threads=threads).run(x).values()))
    return got, want, res.model.metadata["kernels"]


def tpu_input_shape(tpu: Any) -> tuple[int, ...]:
    from lamina.dialects.func.ops import FuncOp

    f = next(iter(tpu.walk_ops(FuncOp)))
    return tuple(int(d) for d in f.regions[0].blocks[0].args[0].type.shape)


#: (channels in, spatial, channels out, stride, swap, downsample after conv2, tail)
BLOCKS = [
    (16, 12, 16, 1, False, False, "relu"),  # plain block: the input is the residual
    (16, 12, 16, 1, True, False, "relu"),
    (8, 14, 32, 2, False, True, "relu"),  # downsample after conv2: the add fuses into it
    (8, 14, 32, 2, True, False, "relu"),  # downsample first: into conv2
    (32, 7, 32, 1, False, False, "conv"),  # 7x7: the channel-lane INT8 conv / the pixel-major F32 one
    (32, 7, 48, 1, True, True, "relu"),
]


def _fused_ops(kernels: list[dict[str, Any]]) -> list[list[str]]:
    return [k["ops"] for k in kernels if len(k["ops"]) > 1]


@pytest.mark.parametrize(("isa", "asym"), [("host", False), ("avx2", False), ("host", True)])
@pytest.mark.parametrize("case", range(len(BLOCKS)))
def test_int8_residual_block_bit_exact(case: int, isa: str, asym: bool, tmp_path: Any) -> None:
    """Symmetric and asymmetric (zero points on every operand of the add)."""
    c, hw, cout, s, swap, after, tail = BLOCKS[case]
    text = block_model(np.random.default_rng(case), c, hw, cout, s, swap, after, tail)
    got, want, kernels = compile_and_run(text, "INT8", isa, tmp_path, 1 + case % 2, asym)
    assert np.array_equal(got, want), f"max |d| {np.abs(got - want).max()}"
    fused = _fused_ops(kernels)
    want_ops = ["tpu.Conv", "tpu.Add"] + (["tpu.Lut"] if tail in ("relu", "silu") else [])
    assert fused == [want_ops], fused
    fused_kernel = next(k for k in kernels if len(k["ops"]) > 1)
    # (the 3x3 stride-1 conv of a plain block is winograd_int8's where its sums stay below 2**25)
    assert fused_kernel["template"].startswith("int8-conv") or fused_kernel["template"] == "winograd_int8"


@pytest.mark.parametrize("isa", ["host", "avx2"])
@pytest.mark.parametrize("case", range(len(BLOCKS)))
def test_f32_residual_block(case: int, isa: str, tmp_path: Any) -> None:
    c, hw, cout, s, swap, after, tail = BLOCKS[case]
    text = block_model(np.random.default_rng(case), c, hw, cout, s, swap, after, tail)
    got, want, kernels = compile_and_run(text, "F32", isa, tmp_path, 1 + case % 2)
    scale = float(np.abs(want).max())
    assert np.abs(got - want).max() <= 1e-5 * scale
    assert _fused_ops(kernels) == [["tpu.Conv", "tpu.Add"] + (["tpu.Relu"] if tail == "relu" else [])]
    # 3x3 stride-1 convs of 16+ channels are Winograd's (winograd_f32), the others conv_f32's
    assert all(k["template"] in ("conv_f32", "winograd_f32") for k in kernels if k["ops"][0] == "tpu.Conv")


def silu_model(rng: np.random.Generator, c: int, hw: int, cout: int, k: int) -> str:
    """``SiLU(conv(x))`` (YOLO's conv block), then a second conv and SiLU."""
    xs, ys = (1, c, hw, hw), (1, cout, hw, hw)
    X, Y = _t(xs, -2.0, 2.0), _t(ys, -1.0, 6.0)
    w = rng.normal(0, 0.3, (cout, c, k, k)).astype(np.float32)
    b = rng.normal(0, 0.1, (cout,)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (cout, cout, 1, 1)).astype(np.float32)
    p = k // 2
    return f"""func.func @main(%x: {X}) -> {Y} {{
  %in = "top.Input"(%x) : ({X}) -> {X} loc("x")
  %none = "top.None"() : () -> none
  %w = "top.Weight"() <{{value = {_dense(w)} : tensor<{cout}x{c}x{k}x{k}xf32>}}> : () -> tensor<{cout}x{c}x{k}x{k}xf32>
  %b = "top.Weight"() <{{value = {_dense(b)} : tensor<{cout}xf32>}}> : () -> tensor<{cout}xf32>
  %c = "top.Conv"(%in, %w, %b) <{{pads = array<i64: {p}, {p}, {p}, {p}>}}> : ({X}, tensor<{cout}x{c}x{k}x{k}xf32>, tensor<{cout}xf32>) -> {Y} loc("c")
  %s = "top.SiLU"(%c) : ({Y}) -> {Y} loc("s")
  %w2 = "top.Weight"() <{{value = {_dense(w2)} : tensor<{cout}x{cout}x1x1xf32>}}> : () -> tensor<{cout}x{cout}x1x1xf32>
  %c2 = "top.Conv"(%s, %w2, %none) : ({Y}, tensor<{cout}x{cout}x1x1xf32>, none) -> {Y} loc("c2")
  %s2 = "top.SiLU"(%c2) : ({Y}) -> {Y} loc("s2")
  return %s2 : {Y}
}}
"""


@pytest.mark.parametrize("isa", ["host", "avx2"])
@pytest.mark.parametrize("shape", [(8, 20, 16, 3), (32, 7, 64, 3)])
def test_f32_silu_fused(shape: tuple[int, int, int, int], isa: str, tmp_path: Any) -> None:
    """A SiLU after a conv is computed in its epilogue (an inline vectorized sigmoid: within
    1e-5 of the output's scale of numpy's); both convs (channel-major, pixel-major at 7x7)."""
    text = silu_model(np.random.default_rng(7), *shape)
    got, want, kernels = compile_and_run(text, "F32", isa, tmp_path, 2)
    assert np.abs(got - want).max() <= 1e-5 * float(np.abs(want).max())
    assert _fused_ops(kernels) == [["tpu.Conv", "tpu.SiLU"]] * 2

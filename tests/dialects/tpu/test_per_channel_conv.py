"""Per-channel 4-d (convolutional) activations along axis 1: the lowering's choices, the integer
results against independent int64 references, and the targets that do not take them."""

from __future__ import annotations

import numpy as np
from test_ops import (
    _ops,
    _parse,
    ref_conv_int,
    ref_requant_py,
)  # the shared helpers (this directory is on sys.path)

import lamina.dialects
import lamina.dialects.tpu  # noqa: F401
from lamina.dialects.quant import UniformQuantizedPerAxisType
from lamina.dialects.tpu import REFERENCE
from lamina.dialects.tpu.quantize import dequantize, qparams
from lamina.dialects.tpu.transforms import convert_top_to_tpu
from lamina.execution.interpreter import Interpreter
from lamina.ir.verifier import verify

# A PP-LCNet stem in miniature: conv -> Mul(scalar) -> Add(scalar) -> depthwise conv -> 1x1 conv.
# Channel 5 of the first three tensors is an outlier (x40), as in PP-OCRv4's stem.
CI, CH, HW = 3, 8, 6
OUT = 5
SCALE, SHIFT = 1.5, 0.25


def _ths(base: float, out: float) -> list[float]:
    return [out if c == OUT else base for c in range(CH)]


def _attrs(th: list[float]) -> str:
    vals = ", ".join(f"{v:.4f}" for v in th)
    return f"{{lamina.channel_axis = 1 : i64, lamina.channel_th = dense<[{vals}]> : tensor<{CH}xf32>}}"


def _weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    w1 = rng.uniform(-0.5, 0.5, (CH, CI, 3, 3)).round(3)
    w1[OUT] *= 40.0
    dw = rng.uniform(-0.5, 0.5, (CH, 1, 3, 3)).round(3)
    dw[OUT] /= 40.0  # the outlier channel is brought back to the others' range
    pw = rng.uniform(-0.5, 0.5, (4, CH, 1, 1)).round(3)
    return w1, dw, pw


def _txt(a: np.ndarray) -> str:
    return np.array2string(a, separator=", ", threshold=10**6, floatmode="fixed", precision=4).replace(
        "\n", ""
    )


def _module(with_channels: bool) -> str:
    w1, dw, pw = _weights()
    a1, a2, a3 = (
        (_attrs(_ths(2.1, 90.0)), _attrs(_ths(3.1, 135.0)), _attrs(_ths(3.4, 135.0)))
        if with_channels
        else ("",) * 3
    )
    t = lambda c, lo, hi: f"tensor<1x{c}x{HW}x{HW}x!quant.calibrated<f32<{lo}:{hi}>>>"  # noqa: E731
    big = t(CH, -90.0, 90.0)
    return f"""
func.func @main(%x: {t(CI, -1.0, 1.0)}) -> {t(4, -2.1, 2.1)} {{
  %in = "top.Input"(%x) : ({t(CI, -1.0, 1.0)}) -> {t(CI, -1.0, 1.0)} loc("x")
  %w1 = "top.Weight"() <{{value = dense<{_txt(w1)}> : tensor<{CH}x{CI}x3x3xf32>}}> : () -> tensor<{CH}x{CI}x3x3xf32>
  %b1 = "top.Weight"() <{{value = dense<0.125> : tensor<{CH}xf32>}}> : () -> tensor<{CH}xf32>
  %c1 = "top.Conv"(%in, %w1, %b1) <{{kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64}}> {a1} : ({t(CI, -1.0, 1.0)}, tensor<{CH}x{CI}x3x3xf32>, tensor<{CH}xf32>) -> {big} loc("conv1")
  %s = "top.Weight"() <{{value = dense<{SCALE}> : tensor<1xf32>}}> : () -> tensor<1xf32>
  %m = "top.Mul"(%s, %c1) {a2} : (tensor<1xf32>, {big}) -> {t(CH, -135.0, 135.0)} loc("mul")
  %k = "top.Weight"() <{{value = dense<{SHIFT}> : tensor<1xf32>}}> : () -> tensor<1xf32>
  %a = "top.Add"(%m, %k) {a3} : ({t(CH, -135.0, 135.0)}, tensor<1xf32>) -> {t(CH, -135.0, 135.0)} loc("add")
  %dw = "top.Weight"() <{{value = dense<{_txt(dw)}> : tensor<{CH}x1x3x3xf32>}}> : () -> tensor<{CH}x1x3x3xf32>
  %nb = "top.None"() : () -> none
  %c2 = "top.Conv"(%a, %dw, %nb) <{{kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, group = {CH} : i64}}> : ({t(CH, -135.0, 135.0)}, tensor<{CH}x1x3x3xf32>, none) -> {t(CH, -3.6, 3.6)} loc("dw")
  %pw = "top.Weight"() <{{value = dense<{_txt(pw)}> : tensor<4x{CH}x1x1xf32>}}> : () -> tensor<4x{CH}x1x1xf32>
  %c3 = "top.Conv"(%c2, %pw, %nb) <{{kernel_shape = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>, dilations = array<i64: 1, 1>, group = 1 : i64}}> : ({t(CH, -3.6, 3.6)}, tensor<4x{CH}x1x1xf32>, none) -> {t(4, -2.1, 2.1)} loc("pw")
  return %c3 : {t(4, -2.1, 2.1)}
}}
"""


def _lowered(with_channels: bool, capabilities: object = None) -> tuple:
    m, _ = _parse(_module(with_channels))
    kw = {} if capabilities is None else {"capabilities": capabilities}
    ok, stats = convert_top_to_tpu(m, "INT8", **kw)
    assert ok
    verify(m)
    return m, stats


def _x() -> np.ndarray:
    return np.random.default_rng(1).uniform(-1, 1, (1, CI, HW, HW)).astype(np.float32)


def _float_reference(x: np.ndarray) -> np.ndarray:
    w1, dw, pw = _weights()

    def conv(a: np.ndarray, w: np.ndarray, pad: int, g: int) -> np.ndarray:
        a = np.pad(a.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
        o, cg, kh, kw = w.shape
        out = np.zeros((1, o, a.shape[2] - kh + 1, a.shape[3] - kw + 1))
        for oc in range(o):
            grp = oc // (o // g)
            for j in range(cg):
                for i in range(kh):
                    for k in range(kw):
                        out[0, oc] += (
                            w[oc, j, i, k] * a[0, grp * cg + j, i : i + out.shape[2], k : k + out.shape[3]]
                        )
        return out

    c1 = conv(x, w1, 1, 1) + 0.125
    a = c1 * SCALE + SHIFT
    return conv(conv(a, dw, 1, CH), pw, 0, 1)


def _axis1(v: object) -> bool:
    e = v.type.element_type  # type: ignore[attr-defined]
    return isinstance(e, UniformQuantizedPerAxisType) and e.axis == 1


def test_conv_outlier_channels_get_per_axis_types_through_the_chain() -> None:
    m, stats = _lowered(True)
    assert stats["per_channel"] == 3  # conv1, mul, add
    (c1, c2, c3), (mul,), (add,) = _ops(m, "tpu.Conv"), _ops(m, "tpu.Mul"), _ops(m, "tpu.Add")
    for v in (c1.results[0], mul.operands[1], mul.results[0], add.results[0], c2.operands[0]):
        assert _axis1(v), v.type
    assert not _axis1(c2.results[0]) and not _axis1(c3.operands[0])
    assert not _ops(m, "tpu.Requant")


def test_a_target_without_conv_channel_scales_keeps_them_per_tensor() -> None:
    caps = REFERENCE.with_conv_channel_scales(False)
    assert REFERENCE.conv_channel_scales and not caps.conv_channel_scales
    m, stats = _lowered(True, caps)
    assert stats["per_channel"] == 0
    assert not any(_axis1(v) for op in m.walk_ops() for v in op.results if hasattr(v.type, "element_type"))


def test_per_channel_conv_mul_add_are_bit_exact() -> None:
    m, _ = _lowered(True)
    (c1, c2, _c3), (mul,), (add,) = _ops(m, "tpu.Conv"), _ops(m, "tpu.Mul"), _ops(m, "tpu.Add")
    dump = Interpreter(m).run([_x()], dump_all=True)
    xq = dump["x_i8"].astype(np.int64)

    def consts(op: object) -> list[np.ndarray]:
        out = []
        for v in op.operands:  # type: ignore[attr-defined]
            d = v.defining_op()
            out.append(d.execute([])[0].astype(np.int64) if d is not None and "Weight" in d.name else None)
        return out

    # conv1: per output channel requant of the exact accumulation
    _, w1q, b1q = consts(c1)
    acc = ref_conv_int(xq, w1q, 1) + b1q.reshape(1, -1, 1, 1)
    mult, rsh = c1.attr("multiplier"), c1.attr("rshift")
    exp = np.vectorize(lambda a, c: ref_requant_py(int(a), mult[c], rsh[c], 0, -128, 127))(
        acc, np.arange(CH)[None, :, None, None]
    )
    np.testing.assert_array_equal(dump["conv1"].astype(np.int64), exp)
    # mul: the scalar's integer times each channel, one multiplier and shift per channel
    sq = int(consts(mul)[0].reshape(-1)[0])
    mm, ms = mul.attr("multiplier"), mul.attr("rshift")
    assert len(mm) == CH and len(ms) == CH
    prod = exp * sq
    exp_m = np.vectorize(lambda a, c: ref_requant_py(int(a), mm[c], ms[c], 0, -128, 127))(
        prod, np.arange(CH)[None, :, None, None]
    )
    np.testing.assert_array_equal(dump["mul"].astype(np.int64), exp_m)
    # add: per-channel multipliers of both inputs (the scalar constant per-tensor)
    assert len(add.attr("multiplier")) == 2 * CH
    # the depthwise conv folds its input's channel scales into the filter: W'[o, 0] = W[o, 0] * s_x[o]
    _, dwq, _ = consts(c2)
    s_x = qparams(c2.operands[0].type)[0]
    w = _weights()[1] * np.asarray(s_x).reshape(-1, 1, 1, 1)
    np.testing.assert_allclose(dequantize(dwq, c2.operands[1].type), w, atol=float(np.max(np.abs(w))) / 127)
    acc2 = np.zeros((1, CH, HW, HW), np.int64)
    aq = dump["add"].astype(np.int64)
    for c in range(CH):
        acc2[:, c : c + 1] = ref_conv_int(aq[:, c : c + 1], dwq[c : c + 1], 1)
    m2, s2 = c2.attr("multiplier"), c2.attr("rshift")
    lo, hi = (0, 255) if not c2.results[0].type.element_type.signed else (-128, 127)
    exp2 = np.vectorize(lambda a, c: ref_requant_py(int(a), m2[c], s2[c], 0, lo, hi))(
        acc2, np.arange(CH)[None, :, None, None]
    )
    np.testing.assert_array_equal(dump["dw"].astype(np.int64), exp2)


def test_per_channel_beats_per_tensor_on_a_conv_stem() -> None:
    x = _x()
    ref = _float_reference(x)
    errs = []
    for ch in (False, True):
        m, _ = _lowered(ch)
        got = next(iter(Interpreter(m).run([x]).values())).astype(np.float64)
        errs.append(float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    # per-tensor: the ordinary channels of conv1/mul/add get steps of 40x theirs
    assert errs[1] < 0.5 * errs[0], errs


def test_a_conv_kept_in_float_reads_its_input_per_channel() -> None:
    """The depthwise Conv kept in F32 by a qtable (the mixed-precision search floats such layers):
    the Add feeding it keeps its per-channel type (the float Conv reads it through a per-channel
    cast), rather than falling back to one scale of the outlier channel; floating the Conv then
    makes the result more accurate, not less."""
    x = _x()
    ref = _float_reference(x)
    errs = []
    for qtable in ({}, {"dw": "F32"}):
        m, _ = _parse(_module(True))
        ok, stats = convert_top_to_tpu(m, "INT8", qtable=qtable)
        assert ok
        verify(m)
        (add,) = _ops(m, "tpu.Add")
        assert _axis1(add.results[0]), add.results[0].type
        assert stats["per_channel"] == 3
        got = next(iter(Interpreter(m).run([x]).values())).astype(np.float64)
        errs.append(float(np.linalg.norm(got - ref) / np.linalg.norm(ref)))
    assert errs[1] < errs[0], errs

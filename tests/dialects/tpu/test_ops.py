"""Bit-exactness of the tpu INT8 ops against independent int64 references, float modes, and an
end-to-end ONNX CNN through import-calibration-table and convert-top-to-tpu."""

from __future__ import annotations

import numpy as np
import pytest

import lamina.dialects
import lamina.dialects.tpu  # noqa: F401
from lamina.dialects.tpu.quantize import qparams, quantize
from lamina.dialects.tpu.transforms import convert_top_to_tpu
from lamina.execution.interpreter import Interpreter
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.verifier import verify

CONV = """
func.func @main(%x: tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x3x5x5xf32> {
  %in = "top.Input"(%x) : (tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<[[[[0.5, -0.25, 0.1], [0.3, 0.2, -0.7], [0.05, 0.9, -0.4]], [[0.15, -0.35, 0.6], [-0.8, 0.45, 0.25], [0.33, -0.12, 0.07]]], [[[0.2, 0.2, 0.2], [0.2, 0.2, 0.2], [0.2, 0.2, 0.2]], [[-0.1, -0.1, -0.1], [-0.1, -0.1, -0.1], [-0.1, -0.1, -0.1]]], [[[1.0, 0.0, -1.0], [0.5, 0.0, -0.5], [0.25, 0.0, -0.25]], [[0.0, 0.0, 0.0], [0.0, 0.01, 0.0], [0.0, 0.0, 0.0]]]]> : tensor<3x2x3x3xf32>}> : () -> tensor<3x2x3x3xf32>
  %b = "top.Weight"() <{value = dense<[0.1, -0.2, 0.3]> : tensor<3xf32>}> : () -> tensor<3xf32>
  %c = "top.Conv"(%in, %w, %b) <{pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>>, tensor<3x2x3x3xf32>, tensor<3xf32>) -> tensor<1x3x5x5x!quant.calibrated<f32<-3.0:3.0>>> loc("conv")
  %in2 = "top.Weight"() <{value = dense<0.3> : tensor<1x3x5x5xf32>}> : () -> tensor<1x3x5x5xf32>
  %m = "top.Add"(%c, %in2) : (tensor<1x3x5x5x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x3x5x5xf32>) -> tensor<1x3x5x5x!quant.calibrated<f32<-4.0:4.0>>> loc("add")
  return %m : tensor<1x3x5x5x!quant.calibrated<f32<-4.0:4.0>>>
}
"""


def _parse(text: str) -> tuple:
    ctx = Context()
    m = parse_module(text, ctx)
    assert m is not None
    return m, ctx


def _ops(m: object, name: str) -> list:
    return [o for o in m.walk_ops() if o.name == name]  # type: ignore[attr-defined]


def ref_conv_int(x: np.ndarray, w: np.ndarray, pad: int) -> np.ndarray:
    """Direct int64 convolution (NCHW, stride 1)."""
    x = np.pad(x.astype(np.int64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    n, _c, h, wd = x.shape
    m, _, kh, kw = w.shape
    oh, ow = h - kh + 1, wd - kw + 1
    y = np.zeros((n, m, oh, ow), np.int64)
    for o in range(m):
        for i in range(oh):
            for j in range(ow):
                y[0, o, i, j] = int(np.sum(x[0, :, i : i + kh, j : j + kw] * w[o].astype(np.int64)))
    return y


def ref_requant_py(acc: int, m: int, s: int, zp: int, lo: int, hi: int) -> int:
    p = acc * m
    sh = 31 + s
    q = (abs(p) + (1 << (sh - 1))) >> sh
    q = q if p >= 0 else -q
    return max(lo, min(hi, q + zp))


def _conv_module() -> tuple:
    return _parse(CONV)


def test_int8_conv_and_add_are_bit_exact() -> None:
    m, _ctx = _conv_module()
    # the 8-bit forms (wide_sum, on by default, gives an Add read only in float an int16 result)
    ok, stats = convert_top_to_tpu(m, "INT8", int_forms="lut,gather,softmax,attention")
    assert ok and stats["int8"] == 2
    verify(m)
    conv = _ops(m, "tpu.Conv")[0]
    add = _ops(m, "tpu.Add")[0]
    rng = np.random.default_rng(3)
    x = rng.uniform(-2, 2, (1, 2, 5, 5)).astype(np.float32)
    dump = Interpreter(m).run([x], dump_all=True)
    # input quantization
    xq = quantize(x, conv.operands[0].type)
    np.testing.assert_array_equal(dump["x_i8"], xq)
    wq = conv.operands[1].defining_op().execute([])[0]
    bq = conv.operands[2].defining_op().execute([])[0].astype(np.int64)
    acc = ref_conv_int(xq, wq, 1) + bq.reshape(1, -1, 1, 1)
    mult = conv.attr("multiplier")
    rsh = conv.attr("rshift")
    lo, hi = -128, 127
    expect = np.empty_like(acc)
    for idx in np.ndindex(*acc.shape):
        expect[idx] = ref_requant_py(int(acc[idx]), mult[idx[1]], rsh[idx[1]], 0, lo, hi)
    np.testing.assert_array_equal(dump["conv"].astype(np.int64), expect)
    # add: sum of rescaled inputs with a shared shift
    a = dump["conv"].astype(np.int64)
    bw = add.operands[1].defining_op().execute([])[0].astype(np.int64)
    ms, rs = add.attr("multiplier"), add.attr("rshift")[0]
    sh = 31 + rs
    tot = a * ms[0] + bw * ms[1]
    ref = np.array(
        [
            max(
                -128,
                min(127, (abs(t) + (1 << (sh - 1))) >> sh if t >= 0 else -((abs(t) + (1 << (sh - 1))) >> sh)),
            )
            for t in tot.ravel()
        ]
    )
    np.testing.assert_array_equal(dump["add"].astype(np.int64).ravel(), ref)
    # the float output is the dequantized add
    out_name = next(k for k in dump if k.startswith("add_"))
    s_out = float(qparams(add.results[0].type)[0])
    np.testing.assert_array_equal(dump[out_name], (dump["add"].astype(np.float64) * s_out).astype(np.float32))


MATMUL = """
func.func @main(%x: tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>>) -> tensor<2x3xf32> {
  %in = "top.Input"(%x) : (tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>>) -> tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<[[0.5, -0.25, 0.1], [0.3, 0.2, -0.7], [0.05, 0.9, -0.4], [1.0, -1.0, 0.02]]> : tensor<4x3xf32>}> : () -> tensor<4x3xf32>
  %n = "top.None"() : () -> none
  %y = "top.MatMul"(%in, %w, %n) <{do_relu = 1 : i64}> : (tensor<2x4x!quant.calibrated<f32<-1.0:1.0>>>, tensor<4x3xf32>, none) -> tensor<2x3x!quant.calibrated<f32<0.0:2.0>>> loc("mm")
  %s = "top.Sigmoid"(%y) : (tensor<2x3x!quant.calibrated<f32<0.0:2.0>>>) -> tensor<2x3x!quant.calibrated<f32<0.0:1.0>>> loc("sig")
  return %s : tensor<2x3x!quant.calibrated<f32<0.0:1.0>>>
}
"""


def test_int8_matmul_relu_and_lut_are_bit_exact() -> None:
    m, _ = _parse(MATMUL)
    # the 8-bit forms (lut16, on by default, gives the MatMul an int16 result and a 65536-entry
    # table: test_int_forms.py)
    ok, _ = convert_top_to_tpu(m, "INT8", int_forms="lut,gather,softmax,attention")
    assert ok
    verify(m)
    mm = _ops(m, "tpu.MatMul")[0]
    lut = _ops(m, "tpu.Lut")[0]
    x = np.array([[0.9, -0.3, 0.55, -1.2], [0.1, 0.2, -0.7, 0.33]], np.float32)
    dump = Interpreter(m).run([x], dump_all=True)
    xq = quantize(x, mm.operands[0].type).astype(np.int64)
    wq = mm.operands[1].defining_op().execute([])[0].astype(np.int64)
    acc = xq @ wq
    out_t = mm.results[0].type
    assert str(out_t.element_type).startswith("!quant.uniform<u8")
    mult, rsh = mm.attr("multiplier"), mm.attr("rshift")
    exp = np.array(
        [[ref_requant_py(int(acc[i, j]), mult[j], rsh[j], 0, 0, 255) for j in range(3)] for i in range(2)]
    )
    np.testing.assert_array_equal(dump["mm"].astype(np.int64), exp)
    table = lut.properties["table"].to_numpy()
    np.testing.assert_array_equal(dump["sig"], table[dump["mm"].astype(np.int64)])


@pytest.mark.parametrize("mode,tol", [("F16", 1e-3), ("BF16", 1e-2), ("F32", 1e-6)])
def test_float_modes_round_like_the_types(mode: str, tol: float) -> None:
    text = (
        MATMUL.replace("!quant.calibrated<f32<-1.0:1.0>>", "f32")
        .replace("!quant.calibrated<f32<0.0:2.0>>", "f32")
        .replace("!quant.calibrated<f32<0.0:1.0>>", "f32")
    )
    m, _ = _parse(text)
    ref_m, _ = _parse(text)
    ok, _ = convert_top_to_tpu(m, mode)
    assert ok
    verify(m)
    x = np.array([[0.9, -0.3, 0.55, -1.2], [0.1, 0.2, -0.7, 0.33]], np.float32)
    dump = Interpreter(m).run([x], dump_all=True)
    ref = Interpreter(ref_m).run([x])
    key = next(iter(ref))
    if mode != "F32":
        import ml_dtypes

        dt = np.float16 if mode == "F16" else ml_dtypes.bfloat16
        assert dump["mm"].dtype == np.dtype(dt)
        # the op computes in f32 on the rounded operands, then rounds its result
        xr = x.astype(dt).astype(np.float32)
        w = _ops(m, "tpu.MatMul")[0].operands[1].defining_op().execute([])[0].astype(np.float32)
        np.testing.assert_array_equal(dump["mm"], np.maximum(xr @ w, 0).astype(dt))
    np.testing.assert_allclose(
        dump[key] if key in dump else list(dump.values())[-1], ref[key], atol=tol, rtol=tol
    )


def test_qtable_floats_one_op() -> None:
    m, _ = _parse(MATMUL)
    ok, st = convert_top_to_tpu(m, "INT8", qtable={"sig": "F16"})
    assert ok and st["float"] == 1
    assert not _ops(m, "tpu.Lut")
    assert _ops(m, "tpu.Sigmoid")[0].results[0].type.element_type.name == "f16"

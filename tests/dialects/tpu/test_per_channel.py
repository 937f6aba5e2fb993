"""Per-channel activations (outlier channels) and per-axis Concat: the lowering's choices, and the
integer results against independent int64 references (``ref_requant_py``)."""

from __future__ import annotations

import numpy as np
from test_ops import _ops, _parse, ref_requant_py  # the shared helpers (this directory is on sys.path)

import lamina.dialects
import lamina.dialects.tpu  # noqa: F401
from lamina.dialects.quant import UniformQuantizedPerAxisType
from lamina.dialects.tpu.quantize import dequantize, qparams, quantize
from lamina.dialects.tpu.transforms import convert_top_to_tpu
from lamina.execution.interpreter import Interpreter
from lamina.ir.verifier import verify


def _rdiv(p: int, sh: int) -> int:
    """``p / 2**sh`` rounded half away from zero (Python integers: exact)."""
    q = (abs(p) + (1 << (sh - 1))) >> sh
    return q if p >= 0 else -q


# A post-LN transformer residual block in miniature: y = LN(x); z = y @ W + b; out = z + y. Channel 5
# of every tensor is an outlier (x100), as in BERT-style residual streams.
CH = 8
TH_Y = [3.0] * 5 + [200.0] + [3.0] * 2
TH_Z = [6.0] * 5 + [300.0] + [6.0] * 2
TH_O = [8.0] * 5 + [500.0] + [8.0] * 2


def _attrs(th: list[float]) -> str:
    vals = ", ".join(f"{v:.1f}" for v in th)
    return f"{{lamina.channel_axis = 2 : i64, lamina.channel_th = dense<[{vals}]> : tensor<{CH}xf32>}}"


def _block(with_channels: bool) -> str:
    w = _block_weight()
    wtxt = "[" + ", ".join("[" + ", ".join(f"{v:.3f}" for v in row) + "]" for row in w) + "]"
    gamma = ", ".join("100.0" if i == 5 else "1.0" for i in range(CH))
    ay, az, ao = (_attrs(TH_Y), _attrs(TH_Z), _attrs(TH_O)) if with_channels else ("", "", "")
    t = lambda lo, hi: f"tensor<1x4x{CH}x!quant.calibrated<f32<{lo}:{hi}>>>"  # noqa: E731
    return f"""
func.func @main(%x: {t(-3.0, 3.0)}) -> {t(-500.0, 500.0)} {{
  %in = "top.Input"(%x) : ({t(-3.0, 3.0)}) -> {t(-3.0, 3.0)} loc("x")
  %g = "top.Weight"() <{{value = dense<[{gamma}]> : tensor<{CH}xf32>}}> : () -> tensor<{CH}xf32>
  %b0 = "top.Weight"() <{{value = dense<0.0> : tensor<{CH}xf32>}}> : () -> tensor<{CH}xf32>
  %y:3 = "top.LayerNorm"(%in, %g, %b0) <{{axis = -1 : i64}}> {ay} : ({t(-3.0, 3.0)}, tensor<{CH}xf32>, tensor<{CH}xf32>) -> ({t(-200.0, 200.0)}, tensor<1x4x1xf32>, tensor<1x4x1xf32>) loc("ln")
  %w = "top.Weight"() <{{value = dense<{wtxt}> : tensor<{CH}x{CH}xf32>}}> : () -> tensor<{CH}x{CH}xf32>
  %b = "top.Weight"() <{{value = dense<0.25> : tensor<{CH}xf32>}}> : () -> tensor<{CH}xf32>
  %z = "top.MatMul"(%y#0, %w, %b) {az} : ({t(-200.0, 200.0)}, tensor<{CH}x{CH}xf32>, tensor<{CH}xf32>) -> {t(-300.0, 300.0)} loc("fc")
  %o = "top.Add"(%z, %y#0) {ao} : ({t(-300.0, 300.0)}, {t(-200.0, 200.0)}) -> {t(-500.0, 500.0)} loc("res")
  return %o : {t(-500.0, 500.0)}
}}
"""


#: the 8-bit forms: the per-channel MatMul input folded into the weight rows, as on targets without
#: ``i16`` (the CPU, the NPU); the default ``wide_input`` takes it on an int16 grid instead
#: (test_int_forms.py)
FORMS_8BIT = "lut,gather,softmax,attention"


def _lowered(with_channels: bool) -> object:
    m, _ = _parse(_block(with_channels))
    ok, stats = convert_top_to_tpu(m, "INT8", int_forms=FORMS_8BIT)
    assert ok
    verify(m)
    return m, stats


def _x() -> np.ndarray:
    return np.random.default_rng(1).normal(0, 1, (1, 4, CH)).astype(np.float32)


def test_outlier_channels_get_per_axis_types() -> None:
    m, stats = _lowered(True)
    assert stats["per_channel"] == 2  # the MatMul's and the Add's results
    mm, add = _ops(m, "tpu.MatMul")[0], _ops(m, "tpu.Add")[0]
    for v in (mm.operands[0], mm.results[0], add.results[0]):
        e = v.type.element_type
        assert isinstance(e, UniformQuantizedPerAxisType) and e.axis == 2
    # the LN output is quantized per channel once and read by both users
    assert mm.operands[0] is add.operands[1]
    assert not _ops(m, "tpu.Requant")


def test_per_channel_matmul_folds_input_scales_and_is_bit_exact() -> None:
    m, _ = _lowered(True)
    mm = _ops(m, "tpu.MatMul")[0]
    dump = Interpreter(m).run([_x()], dump_all=True)
    xq = dump["ln_i8"].astype(np.int64)
    wq = mm.operands[1].defining_op().execute([])[0].astype(np.int64)
    bq = mm.operands[2].defining_op().execute([])[0].astype(np.int64)
    acc = xq @ wq + bq
    mult, rsh = mm.attr("multiplier"), mm.attr("rshift")
    exp = np.vectorize(lambda a, j: ref_requant_py(int(a), mult[j], rsh[j], 0, -128, 127))(
        acc, np.arange(CH)[None, None, :]
    )
    np.testing.assert_array_equal(dump["fc"].astype(np.int64), exp)
    # the folded weight is W * s_x[k], quantized per column
    s_x = qparams(mm.operands[0].type)[0]
    w = np.asarray(_block_weight(), np.float64) * s_x[:, None]
    np.testing.assert_allclose(dequantize(wq, mm.operands[1].type), w, atol=float(np.max(np.abs(w))) / 127)


def _block_weight() -> np.ndarray:
    """Random weights; the outlier channel's row is small (its product stays in z's ranges)."""
    w = np.random.default_rng(0).uniform(-0.5, 0.5, (CH, CH)).round(3)
    w[5] = 0.001
    w[5, 5] = 1.0
    return w


def test_per_channel_add_is_bit_exact() -> None:
    m, _ = _lowered(True)
    add = _ops(m, "tpu.Add")[0]
    dump = Interpreter(m).run([_x()], dump_all=True)
    a, b = dump["fc"].astype(np.int64), dump["ln_i8"].astype(np.int64)
    ms, rs = add.attr("multiplier"), add.attr("rshift")
    assert len(ms) == 2 * CH and len(rs) == CH
    exp = np.empty_like(a)
    for idx in np.ndindex(*a.shape):
        c = idx[2]
        tot = int(a[idx]) * ms[c] + int(b[idx]) * ms[CH + c]
        exp[idx] = max(-128, min(127, _rdiv(tot, 31 + rs[c])))
    np.testing.assert_array_equal(dump["res"].astype(np.int64), exp)


def test_per_channel_beats_per_tensor_on_outlier_channels() -> None:
    x = _x()
    ref = _float_reference(x)
    errs = []
    for ch in (False, True):
        m, _ = _lowered(ch)
        out = Interpreter(m).run([x])
        got = next(iter(out.values()))
        normal = [i for i in range(CH) if i != 5]
        errs.append(float(np.max(np.abs(got[..., normal] - ref[..., normal]))))
    # per-tensor: the ordinary channels get steps of 500/127 ~ 3.9; per-channel: 5/127 ~ 0.04
    assert errs[1] < 0.1 < errs[0], errs


def _float_reference(x: np.ndarray) -> np.ndarray:
    g = np.where(np.arange(CH) == 5, 100.0, 1.0)
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    y = (x - mu) / np.sqrt(var + 1e-5) * g
    return (y @ _block_weight() + 0.25) + y


CONCAT = """
func.func @main(%a: tensor<1x2x4x!quant.calibrated<f32<-400.0:400.0>>>, %b: tensor<1x3x4x!quant.calibrated<f32<0.0:1.0>>>) -> tensor<1x5x4x!quant.calibrated<f32<-400.0:400.0>>> {
  %x = "top.Input"(%a) : (tensor<1x2x4x!quant.calibrated<f32<-400.0:400.0>>>) -> tensor<1x2x4x!quant.calibrated<f32<-400.0:400.0>>> loc("boxes")
  %y = "top.Input"(%b) : (tensor<1x3x4x!quant.calibrated<f32<0.0:1.0>>>) -> tensor<1x3x4x!quant.calibrated<f32<0.0:1.0>>> loc("scores")
  %c = "top.Concat"(%x, %y) <{axis = 1 : i64}> : (tensor<1x2x4x!quant.calibrated<f32<-400.0:400.0>>>, tensor<1x3x4x!quant.calibrated<f32<0.0:1.0>>>) -> tensor<1x5x4x!quant.calibrated<f32<-400.0:400.0>>> loc("out")
  return %c : tensor<1x5x4x!quant.calibrated<f32<-400.0:400.0>>>
}
"""


def test_concat_of_different_scales_is_per_axis_and_keeps_small_values() -> None:
    m, _ = _parse(CONCAT)
    ok, stats = convert_top_to_tpu(m, "INT8")
    assert ok and stats["per_channel"] == 1
    verify(m)
    cat = _ops(m, "tpu.Concat")[0]
    e = cat.results[0].type.element_type
    assert isinstance(e, UniformQuantizedPerAxisType) and e.axis == 1
    # boxes keep 400/127; the u8 scores become i8 with 1/127 (no requant of the boxes)
    np.testing.assert_allclose(e.scales, [400 / 127] * 2 + [1 / 127] * 3)
    rng = np.random.default_rng(2)
    a = rng.uniform(-400, 400, (1, 2, 4)).astype(np.float32)
    b = rng.uniform(0, 1, (1, 3, 4)).astype(np.float32)
    got = next(iter(Interpreter(m).run([a, b]).values()))
    np.testing.assert_allclose(got[:, 2:], b, atol=0.5 / 255 + 0.5 / 127 + 1e-6)  # u8, then i8
    # the boxes are not requantized: their integers are the input's, bit for bit
    dump = Interpreter(m).run([a, b], dump_all=True)
    np.testing.assert_array_equal(dump["out"][:, :2], quantize(a, cat.operands[0].type))


def test_asymmetric_concat_inputs_become_symmetric_per_axis() -> None:
    m, _ = _parse(CONCAT)
    ok, stats = convert_top_to_tpu(m, "INT8", asymmetric=True)
    assert ok and stats["per_channel"] == 1
    verify(m)
    e = _ops(m, "tpu.Concat")[0].results[0].type.element_type
    assert isinstance(e, UniformQuantizedPerAxisType) and set(e.zero_points) == {0}
    rng = np.random.default_rng(2)
    a = rng.uniform(-400, 400, (1, 2, 4)).astype(np.float32)
    b = rng.uniform(0, 1, (1, 3, 4)).astype(np.float32)
    got = next(iter(Interpreter(m).run([a, b]).values()))
    # scores: asymmetric input step 1/255, then requantized to symmetric 1/127
    np.testing.assert_allclose(got[:, 2:], b, atol=0.5 / 255 + 0.5 / 127 + 1e-6)


def test_per_channel_module_round_trips_through_text() -> None:
    """The deployed text (what model_deploy writes and model_runner reads) keeps the per-axis
    types and per-channel requantization: re-parsed, it computes the same integers."""
    from lamina.ir.printer import print_operation

    m, _ = _lowered(True)
    text = print_operation(m, debuginfo=True)
    assert "!quant.uniform<i8:f32:2, {" in text
    m2, _ = _parse(text)
    verify(m2)
    assert print_operation(m2, debuginfo=True) == text
    x = _x()
    a, b = Interpreter(m).run([x], dump_all=True), Interpreter(m2).run([x], dump_all=True)
    named = [k for k in a if not k.startswith("top.Weight_")]  # unnamed constants are keyed by id
    assert "res" in named and "ln_i8" in named
    for k in named:
        np.testing.assert_array_equal(a[k], b[k])


def test_a_float_matmul_casts_its_outlier_channels_per_axis() -> None:
    """The MatMul kept in F32 by a qtable (the mixed-precision search floats such layers): its result
    is cast to int8 per channel for the INT8 Add, as an INT8 MatMul's would be, not with one scale of
    the outlier channel (which costs the ordinary channels all their levels)."""
    x = _x()
    ref = _float_reference(x)
    m, _ = _parse(_block(True))
    ok, _ = convert_top_to_tpu(m, "INT8", qtable={"fc": "F32"})
    assert ok
    verify(m)
    (mm,) = _ops(m, "tpu.MatMul")
    assert str(mm.results[0].type) == f"tensor<1x4x{CH}xf32>"
    add = _ops(m, "tpu.Add")[0]
    for v in add.operands:
        assert isinstance(v.type.element_type, UniformQuantizedPerAxisType), v.type
    got = next(iter(Interpreter(m).run([x]).values()))
    normal = [i for i in range(CH) if i != 5]
    assert float(np.max(np.abs(got[..., normal] - ref[..., normal]))) < 0.2

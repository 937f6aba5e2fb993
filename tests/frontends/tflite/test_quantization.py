"""Full-integer TFLite models (int8 activations, per-channel int8 weights, int32 biases), made by
:mod:`quantizer` from the tests' float models: imported to float ``top`` with the calibration table
derived from the model's own scales and zero points, then lowered to INT8 with that table
(``--asymmetric``) and compared with LiteRT's own int8 execution, integer for integer.

Measured (benchmarks/RESULTS.md) and asserted below: the single-op models agree with LiteRT within 1
quantization step of the output (65 of 84 bit-exact), except where LiteRT itself rounds more
(:data:`MORE_STEPS`, each with its reason); the int8 MobileNet-style CNN within 1 step (cosine
0.99991), with int8 or float inputs and outputs; the int8 transformer block within 3 steps (cosine
0.99983): 1-step rounding differences of its LayerNorm's MEAN and MUL, amplified by its SOFTMAX.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite")
pytest.importorskip("ai_edge_litert")

import networks as N  # noqa: N812
import test_converters as TC  # noqa: N812
from builder import ModelBuilder
from quantizer import dequantize_array, int8_feeds, quantize_model

from lamina.dialects.quant import CalibratedQuantizedType
from lamina.dialects.tpu.lowering.policy import quant_type_for
from lamina.dialects.tpu.tables import CalibrationTable
from lamina.flows.transform import QUANTIZED_TOP_PIPELINE, optimize_top
from lamina.frontends.model_io import run_top_module
from lamina.frontends.tflite import parse_model
from lamina.frontends.tflite.importer import import_tflite_with_ranges
from lamina.frontends.tflite.quantization import calibration_table, real_range
from lamina.frontends.tflite.runtime import reference_view, run_litert, tflite_layout_view
from lamina.ir.context import Context
from lamina.ir.types import f32
from lamina.quant.deploy import deploy_module, run_tpu_module


def lower(buf: bytes, asymmetric: bool = True) -> tuple[object, object, CalibrationTable]:
    """The imported, optimized top module, its INT8 tpu module (derived table) and the table."""
    ctx = Context(handler=None)
    module, ranges = import_tflite_with_ranges(buf, ctx, "q.tflite")
    optimize_top(module, ctx, QUANTIZED_TOP_PIPELINE)
    table = calibration_table(module, ranges, "q.tflite")
    assert table is not None
    tpu = deploy_module(
        module, "INT8", asymmetric=asymmetric, calibration_table=table, ctx=ctx, warn=lambda m: None
    )
    return module, tpu, table


def steps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in quantization steps of two int8 tensors."""
    return np.abs(a.astype(np.int64) - b.astype(np.int64))


# ---- the table ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("dtype", "scale", "zp"), [(np.int8, 0.0173, -7), (np.uint8, 0.0042, 131)])
def test_derived_range_reads_back_as_the_models_scale_and_zero_point(
    dtype: type, scale: float, zp: int
) -> None:
    """The table's min/max, written with every digit and read by import-calibration-table in
    asymmetric mode, give the lowering exactly the model's float32 scale and its zero point (a uint8
    one minus 128: int8 storage of the same real values)."""
    m = ModelBuilder()
    x = m.input("x", [1, 4], dtype, quant=(scale, zp, 0))
    m.output(m.op("RELU", [x], [1, 4], "y", out_dtype=dtype, out_quant=(scale, zp, 0)))
    model = parse_model(m.build(), "r.tflite")
    lo, hi = real_range(model.tensors[0])  # type: ignore[misc]
    ctx = Context(handler=None)
    module, ranges = import_tflite_with_ranges(model, ctx)
    table = calibration_table(module, ranges, "r.tflite")
    assert table is not None and "x_dequantized" in table and "y" in table
    back = CalibrationTable.parse(table.to_text())["x_dequantized"]
    assert (back.min, back.max, back.threshold) == (lo, hi, max(-lo, hi))
    qt = quant_type_for(CalibratedQuantizedType(f32, min(back.min, 0.0), max(back.max, 0.0)), True)
    assert qt.scale == float(np.float32(scale))
    assert qt.zero_point == (zp if dtype == np.int8 else zp - 128)


def test_table_names_every_quantized_value_of_the_module() -> None:
    """Every float value the lowering quantizes — under its TFLite name, its ``_nchw`` copy, the
    dequantized input — has an entry, so that INT8 runs every convolution, pool, add and
    reshape in INT8; the only values left float are inside one TFLite op (none in this CNN)."""
    from lamina.dialects.quant import QuantizedType
    from lamina.ir.constants import holds_constant
    from lamina.ir.naming import result_names
    from lamina.ir.types import FloatType, ShapedType

    buf, _ = N.mobilenet_v2_int8("int8")
    module, tpu, table = lower(buf)
    floats = [
        n
        for op in module.walk_ops()  # type: ignore[attr-defined]
        if op.dialect_name == "top" and not holds_constant(op)
        for n, r in zip(result_names(op), op.results)
        if isinstance(r.type, ShapedType) and isinstance(r.type.element_type, FloatType)
    ]
    assert floats and set(floats) <= set(table.thresholds)
    assert {"image_dequantized", "stem_nchw", "block3_add_nchw", "pool_nchw", "logits"} <= set(
        table.thresholds
    )
    lowered = [op for op in tpu.walk_ops() if op.name in ("tpu.Conv", "tpu.Add", "tpu.AvgPool", "tpu.MatMul")]  # type: ignore[attr-defined]
    assert len(lowered) == 13
    assert all(isinstance(op.results[0].type.element_type, QuantizedType) for op in lowered)


# ---- single ops ---------------------------------------------------------------------------------------

#: float-only in LiteRT (no int8 kernel), or an int8 kernel that is not real arithmetic
INT8_SKIP = {
    "add_n": "no int8 ADD_N kernel",
    "ceil": "float only",
    "floor": "float only",
    "cos": "float only",
    "sin": "float only",
    "sign": "float only",
    "square": "float only",
    "pow": "float only",
    "l2_pool_same": "float only",
    "neg": "LiteRT's int8 NEG negates the stored integers (right only when zp_out = -zp_in; -128 wraps)",
    "arg_max": "integer output (covered by the float test)",
    "arg_min": "integer output (covered by the float test)",
}
# (DIV runs: with other data than the test's, LiteRT's int8 DIV was seen returning -128 for a
# quotient of -0.01, (-1 step) / the largest divisor, where Lamina gives the right 0 step.)
#: where Lamina and LiteRT differ by more than 1 step (measured over 6 seeds: the bound), and why
MORE_STEPS = {
    # LiteRT rounds twice where Lamina rounds once
    "relu6_nchw": (2, "CONV_2D then RELU6: LiteRT requantizes the conv's output, then clamps; Lamina fuses"),
    # Lamina's lowering quantizes FULLY_CONNECTED weights per output channel: per-tensor int8
    # weights are requantized (per-channel ones, what recent TensorFlow converters write, are exact)
    "fully_connected": (2, "per-tensor weights"),
    "hard_swish_nchw": (2, "LiteRT's fixed-point HARD_SWISH"),
    # a 1-step difference of the conv before it, amplified: SOFTMAX's 1/256 output steps are much
    # finer than its input's
    "softmax_nchw": (3, "the input's 1-step difference through SOFTMAX"),
    # LiteRT's int8 REDUCE_PROD rounds every partial product (Lamina's product is exact here)
    "reduce_prod": (5, "LiteRT rounds each partial product"),
}
INT8_CASES = sorted(k for k in TC.CASES if k not in INT8_SKIP)


@pytest.mark.parametrize("name", INT8_CASES)
def test_int8_op_matches_litert(name: str) -> None:
    """One op (and its helper ops) in full integer, int8 inputs and outputs: Lamina's INT8 lowering
    with the derived table against LiteRT, integer for integer; the float ``top`` model, its output
    quantized, within a few steps (LiteRT also quantizes its helper ops' outputs)."""
    seed = zlib.crc32(name.encode())
    TC.RNG = np.random.default_rng(seed)  # the case's weights, whatever ran before
    rng = np.random.default_rng(seed)
    m = ModelBuilder()
    x = m.input("x", [1, 6, 6, 4])
    m.output(TC.CASES[name](m, x, False))
    samples = [{"x": rng.standard_normal((1, 6, 6, 4)).astype(np.float32)} for _ in range(4)]
    q = quantize_model(m, samples, io="int8")
    buf = q.build()
    feeds = int8_feeds(q, samples[0])
    y = q.tensors[q.outputs[0]]["name"]
    ref = run_litert(buf, feeds)[y]
    assert ref.dtype == np.int8
    with np.errstate(divide="ignore", invalid="ignore"):  # RSQRT of 0 is inf, as in float
        module, tpu, _ = lower(buf)
        got = run_tpu_module(tpu, feeds)[y]
        top = run_top_module(module, feeds)[y]
    assert got.dtype == np.int8 and got.shape == ref.shape
    d = steps(got, ref)
    assert d.max() <= MORE_STEPS.get(name, (1, ""))[0], (d.max(), np.mean(d == 0))
    s, z, _ = q.tensors[q.outputs[0]]["quant"]
    cos = _cosine(dequantize_array(top, s, z), dequantize_array(ref, s, z))
    assert cos > 0.99, cos


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 1.0 if na == nb == 0 else float(a @ b / (na * nb))


# ---- networks -----------------------------------------------------------------------------------------

NETWORKS = {
    # name: (builder, input name, shape, io, max steps of Lamina's INT8 against LiteRT)
    "mobilenet_int8_io": (N.mobilenet_v2_int8, "image", (1, 32, 32, 3), "int8", 1),
    "mobilenet_float_io": (N.mobilenet_v2_int8, "image", (1, 32, 32, 3), "float", 1),
    "transformer_int8_io": (N.transformer_block_int8, "tokens", (1, 6, 16), "int8", 3),
}


@pytest.mark.parametrize("name", sorted(NETWORKS))
def test_int8_network_matches_litert(name: str) -> None:
    make, inp, shape, io, max_steps = NETWORKS[name]
    buf, q = make(io)
    feeds = int8_feeds(q, N.test_input(inp, shape))
    model = parse_model(buf, "n.tflite")
    out = model.tensors[model.outputs[0]]
    ref_all = reference_view(model, run_litert(buf, feeds, dump_all=True))
    module, tpu, _ = lower(buf)
    got = run_tpu_module(tpu, feeds)[out.name]
    ref = ref_all[out.name]
    qt = out if io == "int8" else next(t for t in model.tensors if t.name == out.name + "_int8")
    assert qt.quant is not None
    s, z = float(qt.quant.scale[0]), int(qt.quant.zero_point[0])
    if io == "int8":
        d = steps(got, ref)
        got, ref = dequantize_array(got, s, z), dequantize_array(ref, s, z)
    else:  # float outputs: in steps of the int8 tensor DEQUANTIZE reads
        d = np.abs(np.round((got - ref) / s))
    assert d.max() <= max_steps, (d.max(), np.mean(d == 0))
    assert _cosine(got, ref) > 0.9995
    # the float top model against LiteRT's int8 execution, layer by layer (dequantized)
    top = tflite_layout_view(run_top_module(module, feeds, dump_all=True))
    common = [k for k in ref_all if k in top and np.asarray(ref_all[k]).dtype.kind == "f"]
    assert len(common) >= 10
    assert min(_cosine(top[k], ref_all[k]) for k in common) > 0.99


def test_symmetric_int8_still_runs_on_coarser_grids() -> None:
    """Without ``--asymmetric`` the table's thresholds give symmetric types: the model runs, within
    a few steps of LiteRT (measured 2 on the int8 CNN)."""
    buf, q = N.mobilenet_v2_int8("int8")
    feeds = int8_feeds(q, N.test_input("image", (1, 32, 32, 3)))
    ref = run_litert(buf, feeds)["probs"]
    _, tpu, _ = lower(buf, asymmetric=False)
    got = run_tpu_module(tpu, feeds)["probs"]
    assert 0 < steps(got, ref).max() <= 4


def test_uint8_model_matches_litert() -> None:
    """An older full-integer model in uint8 (asymmetric uint8 weights, uint8 activations with zero
    point 128): imported, lowered with its table (uint8 ranges as int8 with zero point - 128) and
    returned in uint8, within 1 step of LiteRT (the uint8 weights, asymmetric per tensor, are
    requantized per channel by Lamina's lowering: 64% of the outputs equal)."""
    rng = np.random.default_rng(0)
    m = ModelBuilder()
    xs = 0.02
    x = m.input("x", [1, 6, 6, 4], np.uint8, quant=(xs, 128, 0))
    w = rng.standard_normal((5, 3, 3, 4)).astype(np.float32)
    ws = float(np.float32((w.max() - w.min()) / 255))
    wz = int(np.round(-w.min() / ws))
    wq = np.clip(np.round(w / ws) + wz, 0, 255).astype(np.uint8)
    bq = np.round(rng.standard_normal(5) / (xs * ws)).astype(np.int32)
    conv = ("Conv2DOptions", {"Padding": 0, "StrideH": 1, "StrideW": 1, "FusedActivationFunction": 1})
    ins = [x, m.const("w", wq, quant=(ws, wz, 0)), m.const("b", bq, quant=(xs * ws, 0, 0))]
    c = m.op("CONV_2D", ins, [1, 6, 6, 5], "c", conv, np.uint8, out_quant=(0.05, 0, 0))
    pool = ("Pool2DOptions", {"Padding": 1, "StrideH": 2, "StrideW": 2, "FilterHeight": 2, "FilterWidth": 2})
    m.output(m.op("AVERAGE_POOL_2D", [c], [1, 3, 3, 5], "p", pool, np.uint8, out_quant=(0.05, 0, 0)))
    buf = m.build()
    feeds = {"x": rng.integers(0, 256, (1, 6, 6, 4)).astype(np.uint8)}
    ref = run_litert(buf, feeds)["p"]
    _, tpu, table = lower(buf)
    assert table["x_dequantized"].min == pytest.approx(-128 * xs)
    got = run_tpu_module(tpu, feeds)["p"]
    assert got.dtype == ref.dtype == np.uint8
    assert steps(got, ref).max() <= 1


def test_int16_activations_import_exactly() -> None:
    """A 16x8 model (int16 activations with zero point 0, int8 weights, int64 biases): the float top
    model, its output quantized to int16, is within 1 int16 step of LiteRT. (Lamina's INT8 lowering
    has 8 bits: about 1 int8 step, 256 int16 steps, from LiteRT's 16-bit result.)"""
    rng = np.random.default_rng(0)
    m = ModelBuilder()
    xs = 3.0 / 32767
    x = m.input("x", [1, 6, 6, 4], np.int16, quant=(xs, 0, 0))
    w = rng.standard_normal((5, 3, 3, 4)).astype(np.float32)
    ws = np.abs(w).reshape(5, -1).max(1) / 127
    wq = np.round(w / ws[:, None, None, None]).astype(np.int8)
    bq = np.round(rng.standard_normal(5) / (xs * ws)).astype(np.int64)
    ins = [x, m.const("w", wq, quant=(ws, np.zeros(5, np.int64), 0))]
    ins.append(m.const("b", bq, quant=(xs * ws, np.zeros(5, np.int64), 0)))
    opts = ("Conv2DOptions", {"Padding": 0, "StrideH": 1, "StrideW": 1})
    m.output(m.op("CONV_2D", ins, [1, 6, 6, 5], "y", opts, np.int16, out_quant=(20.0 / 32767, 0, 0)))
    buf = m.build()
    feeds = {"x": rng.integers(-30000, 30000, (1, 6, 6, 4)).astype(np.int16)}
    ref = run_litert(buf, feeds)["y"]
    ctx = Context(handler=None)
    module, ranges = import_tflite_with_ranges(buf, ctx, "i16.tflite")
    top = run_top_module(module, feeds)["y"]
    assert top.dtype == ref.dtype == np.int16
    assert steps(top, ref).max() <= 1
    assert ranges["y_nchw"] == pytest.approx((-32768 * 20.0 / 32767, 20.0))


def test_the_quant_range_attribute_is_the_lowerings() -> None:
    from lamina.dialects.tpu.lowering import pattern
    from lamina.frontends.tflite.quantization import QUANT_RANGE_ATTR

    assert pattern.QUANT_RANGE_ATTR == QUANT_RANGE_ATTR


# ---- the flow ----------------------------------------------------------------------------------------


def test_model_transform_then_deploy_int8_with_the_derived_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """model_transform writes the derived table; model_deploy INT8 --asymmetric with it (no
    calibration run) gives LiteRT's int8 outputs; model_runner runs the .tflite on LiteRT and on
    Lamina."""
    from lamina.tools import deploy, runner, transform

    monkeypatch.chdir(tmp_path)
    buf, q = N.mobilenet_v2_int8("int8")
    Path("q.tflite").write_bytes(buf)
    feeds = int8_feeds(q, N.test_input("image", (1, 32, 32, 3)))
    np.savez("in.npz", **feeds)
    assert transform.main(["--model_def", "q.tflite", "--test_input", "in.npz", "--mlir", "q.mlir"]) == 0
    out = capsys.readouterr().out
    assert "wrote ./q_cali_table" in out or "wrote q_cali_table" in out, out
    assert "--quantize INT8 --asymmetric --calibration_table" in out
    assert "at INT8's tolerance 0.9,0.8" in out
    text = Path("q_cali_table").read_text()
    assert "derived from the quantization parameters of 'q.tflite'" in text
    ref_dump = np.load("q_ref_outputs.npz")
    assert ref_dump["probs"].dtype == np.int8  # the output in the model's type
    assert ref_dump["stem"].dtype == np.float32  # activations dequantized
    argv = ["--mlir", "q.mlir", "--quantize", "INT8", "--asymmetric", "--calibration_table", "q_cali_table"]
    rc = deploy.main(
        [*argv, "--test_input", "in.npz", "--test_reference", "q_top_outputs.npz", "--model", "q"]
    )
    assert rc == 0, capsys.readouterr().err
    litert = run_litert(buf, feeds)["probs"]
    assert steps(np.load("q_tpu_outputs.npz")["probs"], litert).max() <= 1
    # model_runner: LiteRT (as the reference step prints it) and Lamina's import
    for engine, out_npz in ((None, "r.npz"), ("lamina", "l.npz")):
        argv = ["--input", "in.npz", "--model", "q.tflite", "--output", out_npz, "--dump_all_tensors"]
        assert runner.main(argv + (["--engine", engine] if engine else [])) == 0
    r, lam = np.load("r.npz"), np.load("l.npz")
    for k in ref_dump.files:
        np.testing.assert_array_equal(r[k], ref_dump[k])
    assert lam["probs"].dtype == np.int8 and steps(lam["probs"], r["probs"]).max() <= 3
    assert {"stem", "block3_add", "pool", "logits"} <= set(lam.files)


# ---- bad quantized models ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("quant", "message"),
    [
        ((np.full(3, 0.1), np.zeros(3, np.int64), 0), "has 3 scales for its dimension 0 of size 5"),
        (
            (np.full(5, 0.1), np.zeros(5, np.int64), 4),
            "(shape [5, 1, 1, 4]) is quantized along dimension 4, which it has not",
        ),
        ((np.full(5, 0.1), np.zeros(2, np.int64), 0), "has 5 scale(s) but 2 zero points"),
    ],
)
def test_quantization_that_does_not_fit_its_tensor_is_one_clear_error(quant: tuple, message: str) -> None:
    from lamina.frontends.tflite import TfliteImportError

    m = ModelBuilder()
    x = m.input("x", [1, 6, 6, 4], np.int8, quant=(0.02, 0, 0))
    w = m.const("w", np.ones((5, 1, 1, 4), np.int8), quant=quant)
    opts = ("Conv2DOptions", {"Padding": 1, "StrideH": 1, "StrideW": 1})
    m.output(m.op("CONV_2D", [x, w, -1], [1, 6, 6, 5], "y", opts, np.int8, out_quant=(0.05, 0, 0)))
    with pytest.raises(TfliteImportError, match=re.escape("'bad.tflite': tensor 'w' " + message)):
        parse_model(m.build(), "bad.tflite")


def test_bytes_flipped_in_a_quantized_model_never_crash() -> None:
    """Random corruption of a full-integer model: imported (with its table) or refused with
    TfliteImportError, nothing else."""
    import contextlib

    from lamina.frontends.tflite import TfliteImportError

    good, _ = N.mobilenet_v2_int8("int8")
    rng = np.random.default_rng(17)
    for _ in range(60):
        b = bytearray(good)
        for i in rng.integers(8, len(b), size=4):
            b[i] = int(rng.integers(0, 256))
        with contextlib.suppress(TfliteImportError), np.errstate(all="ignore"):
            module, ranges = import_tflite_with_ranges(bytes(b), Context(handler=None), "fuzz.tflite")
            calibration_table(module, ranges, "fuzz.tflite")


def test_api_on_a_full_integer_model(tmp_path: Path) -> None:
    """lamina.api: transform gives the derived table's path; run takes the .tflite on LiteRT (the
    default) or on Lamina; load imports it, integers in and out."""
    import lamina.api as lm

    buf, q = N.mobilenet_v2_int8("int8")
    p = tmp_path / "q.tflite"
    p.write_bytes(buf)
    feeds = int8_feeds(q, N.test_input("image", (1, 32, 32, 3)))
    res = lm.transform(str(p), test_input=_npz(tmp_path / "in.npz", feeds), mlir=str(tmp_path / "q.mlir"))
    assert res.passed and res.calibration_table == str(tmp_path / "q_cali_table")
    assert res.report is not None and res.report.tolerance == (0.9, 0.8)
    litert, lamina = lm.run(str(p), feeds), lm.run(str(p), feeds, engine="lamina")
    assert litert["probs"].dtype == lamina["probs"].dtype == np.int8
    assert steps(litert["probs"], lamina["probs"]).max() <= 3
    model = lm.load(str(p))
    assert model.run(feeds)["probs"].dtype == np.int8
    with pytest.raises(lm.LaminaError, match="--engine onnxruntime cannot run the TFLite model"):
        lm.run(str(p), feeds, engine="onnxruntime")


def _npz(path: Path, arrays: dict[str, np.ndarray]) -> str:
    np.savez(path, **arrays)
    return str(path)


def test_an_image_for_a_quantized_input_is_quantized_with_its_parameters(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """model_transform --test_input img.png on an int8-input model: the image is preprocessed to
    real values (mean, scale, NHWC), then quantized with the input's scale and zero point."""
    from PIL import Image

    from lamina.tools import transform

    monkeypatch.chdir(tmp_path)
    buf, q = N.mobilenet_v2_int8("int8")
    Path("q.tflite").write_bytes(buf)
    pixels = np.random.default_rng(4).integers(0, 255, (32, 32, 3), dtype=np.uint8)
    Image.fromarray(pixels).save("img.png")
    argv = ["--model_def", "q.tflite", "--test_input", "img.png", "--mean", "127.5,127.5,127.5"]
    rc = transform.main([*argv, "--scale", "0.01,0.01,0.01", "--pixel_format", "rgb", "--mlir", "q.mlir"])
    out = capsys.readouterr()
    assert rc == 0, out.out + out.err
    fed = np.load("q_in_f32.npz")["image"]
    s, z, _ = q.tensors[q.inputs[0]]["quant"]
    real = (pixels.astype(np.float64) - 127.5) * 0.01
    expected = np.clip(np.sign(real / s) * np.floor(np.abs(real / s) + 0.5) + z, -128, 127)
    assert fed.dtype == np.int8 and fed.shape == (1, 32, 32, 3)
    np.testing.assert_array_equal(fed[0], expected.astype(np.int8))

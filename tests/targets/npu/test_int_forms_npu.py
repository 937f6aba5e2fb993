"""The optional integer forms on the NPU: the chip lists the forms whose ops the TIU runs (LUTs,
Gather as a host op) and keeps Softmax / LayerNorm / Attention in float on the TIU, so a model
deployed with ``--int_forms all`` compiles, places those on the NPU, and matches the ``tpu``
interpreter bit for bit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lamina import api
from lamina.dialects.tpu import REFERENCE
from lamina.targets.npu import isa
from lamina.targets.npu.arch import load_chip
from lamina.targets.npu.processor import capabilities_of

pytest.importorskip("onnx")


@pytest.mark.parametrize("chip", ["lnpu", "lnpu-edge"])
def test_int_forms_all_deploys_bit_exact(chip: str, tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = {
        "emb": rng.standard_normal((20, 16)).astype(np.float32),
        "g": rng.uniform(0.5, 1.5, 16).astype(np.float32),
        "b": rng.standard_normal(16).astype(np.float32) * 0.1,
    }
    nodes = [
        helper.make_node("Gather", ["emb", "ids"], ["e"], name="e", axis=0),
        helper.make_node("LayerNormalization", ["e", "g", "b"], ["n"], name="n", axis=-1),
        helper.make_node("Sigmoid", ["n"], ["s"], name="s"),
        helper.make_node("Softmax", ["s"], ["y"], name="y", axis=-1),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    api.transform(str(tmp_path / "m.onnx"), mlir=str(tmp_path / "m.mlir"))
    m = api.load(tmp_path / "m.mlir")
    samples = [{"ids": rng.integers(0, 20, (1, 8)).astype(np.int64)} for _ in range(4)]
    table = api.calibrate(m, samples=samples, calibration_method="max", tune_num=0)
    res = api.deploy(
        m, "INT8", calibration_table=table, processor=chip, test_input=samples[0], int_forms="all"
    )
    assert res.result.target_check == []  # the simulator equals the tpu interpreter bit for bit
    place = res.result.placement
    assert place["e"] != "npu"  # Gather: no TIU form, the host
    assert place["n"] == "npu" and place["y"] == "npu", place  # float LayerNorm / Softmax on the TIU
    assert place["s"] == "npu", place  # the Sigmoid LUT
    # the Gather gives int8 (its table quantized): the cast to the LayerNorm's float is on the NPU
    assert [place[k] for k in ("e_f32", "e_bf16") if k in place] == ["npu"], place


def test_the_npu_keeps_softmax_layernorm_attention_in_float() -> None:
    caps = capabilities_of(load_chip("lnpu"))
    for name in ("top.Softmax", "top.LayerNorm", "top.Attention"):
        assert REFERENCE.supports(name, "INT8") and not caps.supports(name, "INT8")
    assert caps.supports("top.Gather", "INT8") and caps.form("top.GELU", "INT8") == "lut"


def test_int16_and_per_channel_capabilities_per_chip() -> None:
    """The int16 forms where the chip computes in ``int16`` (``lnpu``; not ``lnpu-edge``, whose
    64 KiB lanes cannot hold a 65536-entry table); per-channel 4-d activations on every chip (the
    TIU's Conv requantizes per output channel, its Eltwise / Requant / Cast take per-channel
    parameters along any dim, its Mul one multiplier per channel)."""
    lnpu, edge = capabilities_of(load_chip("lnpu")), capabilities_of(load_chip("lnpu-edge"))
    for name in ("top.MatMul", "top.GELU", "top.Add", "top.Sub"):
        assert lnpu.supports(name, "INT8", "i16") and not edge.supports(name, "INT8", "i16"), name
        assert edge.supports(name, "INT8", "i8")
    assert lnpu.conv_channel_scales and edge.conv_channel_scales and REFERENCE.conv_channel_scales


def _save(tmp_path: Path, nodes: list, inputs: list, outputs: list, inits: dict[str, np.ndarray]) -> str:
    import onnx
    from onnx import helper, numpy_helper

    g = helper.make_graph(
        nodes, "g", inputs, outputs, initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "m.onnx"))
    return str(tmp_path / "m.onnx")


S, D, F = 16, 24, 40  # sequence, hidden, FFN width


def ffn_onnx(tmp_path: Path, gelu_outlier: float = 0.0) -> str:
    """A padded-MiniLM-like block: ``ln2(x + fc2(gelu(fc1(ln1(x)))))``, ``ln1``'s gamma with one
    outlier channel (its output gets a ``#channel_th``, as MiniLM's); ``gelu_outlier`` added to
    fc1's bias of one channel gives the GELU's output an outlier (a wide range, as MiniLM's), so
    that its 8-bit step adds far more than fc2's own rounding to fc2's result and ``lut16`` gives
    it an int16 result on a chip whose int16 MatMul costs more (the choice per layer)."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(3)
    g1 = np.ones(D, np.float32)
    g1[5] = 40.0
    inits = {
        "g1": g1,
        "b1": np.zeros(D, np.float32),
        "g2": np.ones(D, np.float32),
        "b2": np.zeros(D, np.float32),
        "w1": rng.normal(0, 0.3, (D, F)).astype(np.float32),
        "c1": (rng.normal(0, 0.1, (F,)) + gelu_outlier * (np.arange(F) == 7)).astype(np.float32),
        # the outlier channel's fc2 row small: the outlier widens the GELU's range, not fc2's
        "w2": (
            rng.normal(0, 0.2, (F, D))
            * np.where(np.arange(F) == 7, 0.01 if gelu_outlier else 1.0, 1.0)[:, None]
        ).astype(np.float32),
    }
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g1", "b1"], ["ln1"], name="ln1", axis=-1),
        helper.make_node("MatMul", ["ln1", "w1"], ["mm1"], name="mm1"),
        helper.make_node("Add", ["mm1", "c1"], ["fc1"], name="fc1"),
        helper.make_node("Gelu", ["fc1"], ["gelu"], name="gelu"),
        helper.make_node("MatMul", ["gelu", "w2"], ["fc2"], name="fc2"),
        helper.make_node("Add", ["x", "fc2"], ["sum"], name="sum"),
        helper.make_node("LayerNormalization", ["sum", "g2", "b2"], ["y"], name="y", axis=-1),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, D])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return _save(tmp_path, nodes, [x], [y], inits)


def _deploy(onnx_path: str, tmp_path: Path, samples: list, chip: str, **kw: object) -> object:
    api.transform(onnx_path, mlir=str(tmp_path / "m.mlir"))
    m = api.load(tmp_path / "m.mlir")
    table = api.calibrate(m, samples=samples, calibration_method="max", tune_num=0)
    res = api.deploy(m, "INT8", calibration_table=table, processor=chip, test_input=samples[0], **kw)  # type: ignore[arg-type]
    assert res.result.target_check == []  # the simulator equals the tpu interpreter bit for bit
    return res


def _on_host(res: object, chip: str) -> list[str]:
    """The layers not on the NPU, but (on ``lnpu-edge``, which has no F32) the model's f32
    boundary casts and float LayerNorms."""
    place = res.result.placement  # type: ignore[attr-defined]
    host = [k for k, v in place.items() if v != "npu"]
    if chip == "lnpu-edge":
        ops = [o for o in res.module.walk_ops() if o.results]  # type: ignore[attr-defined]
        f32 = [str(o.location) for o in ops if any("xf32>" in str(v.type) for v in (*o.operands, *o.results))]
        host = [k for k in host if not any(f'"{k}"' in loc for loc in f32)]
    return host


def _types(res: object) -> dict[str, list[str]]:
    """tpu op name → its result types (printed), of the deployed ``tpu`` module."""
    out: dict[str, list[str]] = {}
    for o in res.module.walk_ops():  # type: ignore[attr-defined]
        if o.name.startswith("tpu.") and o.results:
            out.setdefault(o.name, []).append(str(o.results[0].type))
    return out


@pytest.mark.parametrize("chip", ["lnpu", "lnpu-edge"])
def test_int16_forms_ffn_on_the_chip(chip: str, tmp_path: Path) -> None:
    """``lut16`` (an int16 pre-GELU MatMul, a ``Lut16`` command, an int16 FFN-out input),
    ``wide_input`` (the LayerNorm's per-channel output on one int16 grid) and ``wide_sum`` (the
    residual sum read by the float LayerNorm) all on the NPU of ``lnpu``, bit-exact; ``lnpu-edge``
    (no ``int16``) keeps the 8-bit forms, on the chip too."""
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((1, S, D)).astype(np.float32) * 2} for _ in range(4)]
    res = _deploy(ffn_onnx(tmp_path, gelu_outlier=1000.0), tmp_path, samples, chip)
    types = _types(res)
    assert not _on_host(res, chip), res.result.placement  # type: ignore[attr-defined]
    mm_in = [str(o.operands[0].type) for o in res.module.walk_ops() if o.name == "tpu.MatMul"]  # type: ignore[attr-defined]
    if chip == "lnpu":
        assert "tpu.Lut16" in types and "tpu.Lut" not in types, types
        assert all("i16" in t for t in mm_in), mm_in  # wide_input (fc1), lut16's GELU output (fc2)
        assert any("i16" in t for t in types["tpu.MatMul"])  # fc1's int16 pre-GELU result
        assert all("i16" in t for t in types["tpu.Add"]), types["tpu.Add"]  # wide_sum
        model = res.compiled.model  # type: ignore[attr-defined]
        cmds = [c for sec in model.sections if sec.kind == "commands" for c in isa.decode(bytes(sec.data))]
        kinds = {type(c).__name__ for c in cmds}
        assert {"Lut16", "MatMul", "Eltwise", "Cast"} <= kinds, kinds
        wide = [c for c in cmds if isinstance(c, isa.TiuCommand) and c.compute_dtype == "int16"]
        assert {type(c).__name__ for c in wide} == {"Lut16", "MatMul", "Eltwise", "Cast"}, wide
    else:
        assert "tpu.Lut16" not in types and "tpu.Lut" in types, types
        assert not any("i16" in t for ts in types.values() for t in ts), types


def test_lut16_keeps_an_8_bit_gelu_output_where_int16_does_not_pay(tmp_path: Path) -> None:
    """``lnpu``'s int16 MatMul runs at half its int8 rate (its capability cost 2): a GELU whose
    8-bit step adds little to fc2's own rounding (gain ~0.8, below ``WIDE_GAIN``) still reads
    fc1's int16 result through a ``Lut16`` but gives fc2 an int8 input — bit-exact on the chip."""
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((1, S, D)).astype(np.float32) * 2} for _ in range(4)]
    res = _deploy(ffn_onnx(tmp_path), tmp_path, samples, "lnpu")
    assert not _on_host(res, "lnpu"), res.result.placement  # type: ignore[attr-defined]
    assert "tpu.Lut16" in _types(res)
    mm_in = [str(o.operands[0].type) for o in res.module.walk_ops() if o.name == "tpu.MatMul"]  # type: ignore[attr-defined]
    assert "i16" in mm_in[0] and "i16" not in mm_in[1], mm_in  # wide_input (fc1); fc2 reads int8


def test_a_table_that_does_not_fit_runs_on_the_host(tmp_path: Path) -> None:
    """A user's chip with ``int16`` but 64 KiB lanes: the GELU's 128 KiB ``Lut16`` table fits no
    layer group, so that one op runs on the host (``model_deploy`` names it), the rest on the
    NPU, still bit-exact."""
    import json

    d = json.loads((Path(__file__).parents[3] / "lamina/targets/npu/chips/lnpu.json").read_text())
    d.update(name="small16", lmem_bytes_per_lane=65536)
    chip = tmp_path / "small16.json"
    chip.write_text(json.dumps(d))
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((1, S, D)).astype(np.float32) * 2} for _ in range(2)]
    res = _deploy(ffn_onnx(tmp_path), tmp_path, samples, "lnpu", chip_config=str(chip))
    assert _on_host(res, "lnpu") == ["gelu"], res.result.placement  # type: ignore[attr-defined]
    assert "tpu.Lut16" in _types(res)


def _per_axis1(t: str) -> bool:
    return ":f32:1," in t


def conv_onnx(tmp_path: Path) -> str:
    """A small stem: ``conv1`` (channel 5 an outlier) → ``* 1.5`` → ``+ 0.25`` → ``* sigmoid-free
    self product`` → depthwise conv → 1x1 conv, and a ``Sigmoid`` reading the chain."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    c = 16
    w1 = rng.uniform(-0.5, 0.5, (c, 3, 3, 3)).astype(np.float32)
    w1[5] *= 40.0
    dw = rng.uniform(-0.5, 0.5, (c, 1, 3, 3)).astype(np.float32)
    dw[5] /= 40.0
    inits = {
        "w1": w1,
        "b1": np.full(c, 0.125, np.float32),
        "k": np.array([1.5], np.float32),
        "a": np.array([0.25], np.float32),
        "dw": dw,
        "pw": rng.uniform(-0.5, 0.5, (8, c, 1, 1)).astype(np.float32),
    }
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["conv1"], name="conv1", **conv),
        helper.make_node("Mul", ["conv1", "k"], ["mul"], name="mul"),
        helper.make_node("Add", ["mul", "a"], ["add"], name="add"),
        helper.make_node("Mul", ["add", "conv1"], ["sq"], name="sq"),
        helper.make_node("Conv", ["sq", "dw"], ["dwc"], name="dwc", group=c, **conv),
        helper.make_node("Conv", ["dwc", "pw"], ["y"], name="y"),
        helper.make_node("Sigmoid", ["add"], ["sig"], name="sig"),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 10, 10])
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("y", "sig")]
    return _save(tmp_path, nodes, [x], outs, inits)


@pytest.mark.parametrize("chip", ["lnpu", "lnpu-edge"])
def test_per_channel_conv_activations_on_the_chip(chip: str, tmp_path: Path) -> None:
    """Per-channel axis-1 activations on the NPU: the Conv's per-output-channel requant to a
    per-axis result, per-channel Mul and Add, the depthwise conv reading it with the scales folded
    into its filter, the Sigmoid's LUT behind a per-channel Requant — all TIU commands, bit-exact."""
    rng = np.random.default_rng(1)
    samples = [{"x": rng.uniform(-1, 1, (1, 3, 10, 10)).astype(np.float32)} for _ in range(4)]
    res = _deploy(conv_onnx(tmp_path), tmp_path, samples, chip)
    types = _types(res)
    per = {n for n, ts in types.items() if any(_per_axis1(t) for t in ts)}
    assert {"tpu.Conv", "tpu.Mul", "tpu.Add"} <= per, types
    assert any(
        o.name == "tpu.Requant" and _per_axis1(str(o.operands[0].type))
        for o in res.module.walk_ops()  # type: ignore[attr-defined]
    )
    assert not _on_host(res, chip), res.result.placement  # type: ignore[attr-defined]

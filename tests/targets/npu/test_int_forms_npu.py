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


def test_the_npu_keeps_4d_activations_per_tensor() -> None:
    """The TIU's elementwise and requant commands take per-channel parameters along the last axis
    only, and its mul one multiplier: the chips do not declare per-channel 4-d activations."""
    for chip in ("lnpu", "lnpu-edge"):
        assert not capabilities_of(load_chip(chip)).conv_channel_scales
    assert REFERENCE.conv_channel_scales

"""lamina.api.calibrate and lamina.api.deploy run the flows the commands run: a calibrate -> deploy ->
run round trip on the built-in example model writes the same bytes as run_calibration, model_deploy
and model_runner."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import lamina.api as lm
from lamina.dialects.tpu.tables import CalibrationTable
from lamina.examples.models import build_example_cnn, example_input
from lamina.support.fileio import save_npz


def _without_time(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if "genetated time" not in line)


@pytest.fixture(scope="module")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example model through model_transform, run_calibration, model_deploy INT8 (with its
    outputs) and model_runner, as ``lamina example`` runs them."""
    from lamina.tools.calibrate import main as calibrate_main
    from lamina.tools.deploy import main as deploy_main
    from lamina.tools.runner import main as runner_main
    from lamina.tools.transform import main as transform_main

    w = tmp_path_factory.mktemp("cli")
    model = build_example_cnn(str(w / "example_cnn.onnx"))
    save_npz(str(w / "input.npz"), {"input": example_input()})
    os.makedirs(w / "samples")
    for i in range(4):
        save_npz(str(w / "samples" / f"{i:02d}.npz"), {"input": example_input(seed=100 + i)})
    mlir = str(w / "example_cnn.mlir")
    assert transform_main(["--model_def", model, "--input_shapes", "[[1,3,32,32]]",
                           "--test_input", str(w / "input.npz"), "--mlir", mlir]) == 0  # fmt: skip
    assert calibrate_main([mlir, "--dataset", str(w / "samples"), "--input_num", "4", "-q",
                           "-o", str(w / "example_cnn_cali_table")]) == 0  # fmt: skip
    assert deploy_main(["--mlir", mlir, "--quantize", "INT8", "--calibration_table", str(w / "example_cnn_cali_table"),
                        "--test_input", str(w / "example_cnn_in_f32.npz"),
                        "--test_reference", str(w / "example_cnn_top_outputs.npz"),
                        "--model", str(w / "example_cnn_int8.bmodel")]) == 0  # fmt: skip
    assert runner_main(["--input", str(w / "example_cnn_in_f32.npz"), "--model", str(w / "example_cnn_int8_tpu.mlir"),
                        "--output", str(w / "runner_all.npz"), "--dump_all_tensors"]) == 0  # fmt: skip
    return w


def test_calibrate_deploy_run_round_trip_equals_the_commands(cli: Path, tmp_path: Path) -> None:
    mlir = str(cli / "example_cnn.mlir")
    table = lm.calibrate(mlir, dataset=cli / "samples", input_num=4)
    assert isinstance(table, CalibrationTable)
    assert _without_time(table.to_text()) == _without_time((cli / "example_cnn_cali_table").read_text())

    int8 = lm.deploy(mlir, "INT8", calibration_table=table)
    assert isinstance(int8, lm.DeployedModel) and int8.report is None and int8.passed
    out = tmp_path / "example_cnn_int8_tpu.mlir"
    weights = int8.save(out)
    assert weights == str(tmp_path / "example_cnn_int8_tpu_weights.npz")
    assert out.read_bytes() == (cli / "example_cnn_int8_tpu.mlir").read_bytes()
    assert Path(weights).read_bytes() == (cli / "example_cnn_int8_tpu_weights.npz").read_bytes()

    outs = int8.run(cli / "example_cnn_in_f32.npz")
    save_npz(str(tmp_path / "outs.npz"), outs)
    assert (tmp_path / "outs.npz").read_bytes() == (cli / "example_cnn_int8_tpu_outputs.npz").read_bytes()
    every = lm.run(int8, cli / "example_cnn_in_f32.npz", dump_all=True, output=tmp_path / "all.npz")
    assert (tmp_path / "all.npz").read_bytes() == (cli / "runner_all.npz").read_bytes()
    assert set(outs) <= set(every)


def test_deploy_compares_and_writes_like_model_deploy(cli: Path, tmp_path: Path) -> None:
    model = lm.load(cli / "example_cnn.mlir")
    int8 = lm.deploy(
        model, "INT8", calibration_table=cli / "example_cnn_cali_table",
        test_input=cli / "example_cnn_in_f32.npz", test_reference=cli / "example_cnn_top_outputs.npz",
        output=tmp_path / "example_cnn_int8.bmodel",
    )  # fmt: skip
    assert int8.passed and int8.report is not None and int8.report.results
    for f in (
        "example_cnn_int8_tpu.mlir",
        "example_cnn_int8_tpu_weights.npz",
        "example_cnn_int8_tpu_outputs.npz",
    ):
        assert (tmp_path / f).read_bytes() == (cli / f).read_bytes(), f
    assert "top.Conv" in model.text()  # the loaded top model is left as it was
    # a reference it cannot meet names the first diverging layers
    strict = lm.deploy(
        model, "INT8", calibration_table=cli / "example_cnn_cali_table", test_input=cli / "example_cnn_in_f32.npz",
        test_reference=cli / "example_cnn_top_outputs.npz", tolerance=(0.999999, 0.999999),
    )  # fmt: skip
    assert not strict.passed and strict.diverging


def test_calibrate_from_samples_in_memory_and_mixed_precision(cli: Path) -> None:
    model = lm.load(cli / "example_cnn.mlir")
    samples = [{"input": example_input(seed=100 + i)} for i in range(4)]
    table = lm.calibrate(model, samples=samples)
    from_dir = lm.calibrate(model, cli / "samples")
    assert table.thresholds == from_dir.thresholds
    assert lm.calibrate(model, samples=[s["input"] for s in samples]).thresholds == table.thresholds
    layer = next(iter(table.thresholds.keys() - set(model.input_names)))
    mixed = lm.deploy(model, "INT8", calibration_table=table, quantize_table={layer: "F16"})
    x = example_input()
    assert set(mixed.run(x)) == set(model.output_names)
    f16 = lm.deploy(model, "F16", test_input={"input": x}, test_reference=model.run(x))
    assert f16.passed and f16.outputs is not None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"quantize": "INT8"}, "--quantize INT8 needs --calibration_table"),
        ({"quantize": "F16", "asymmetric": True}, "--asymmetric applies to --quantize INT8 only"),
        ({"quantize": 8}, "quantize must be a str"),
        ({"quantize": "F32", "tolerance": (0.9, 0.9)}, "--tolerance needs --test_input"),
        ({"quantize": "F32", "quantize_table": {"nope": "F16"}}, "1 op(s) not in the model: 'nope'"),
        ({"quantize": "F32", "calibration_table": 3}, "calibration_table must be a path"),
    ],
)
def test_deploy_bad_arguments(cli: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(lm.LaminaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        lm.deploy(cli / "example_cnn.mlir", **kwargs)


def test_calibrate_bad_arguments(cli: Path) -> None:
    mlir = cli / "example_cnn.mlir"
    with pytest.raises(lm.LaminaError, match="give either samples or a dataset"):
        lm.calibrate(mlir, cli / "samples", samples=[np.zeros((1, 3, 32, 32), np.float32)])
    with pytest.raises(lm.LaminaError, match="calibration_method must be one of"):
        lm.calibrate(mlir, cli / "samples", calibration_method="best")
    with pytest.raises(lm.LaminaError, match="calibration sample 0: input 'input' has shape"):
        lm.calibrate(mlir, samples=[np.zeros((1, 3, 8, 8), np.float32)])
    with pytest.raises(lm.LaminaError, match="is an ONNX model"):
        lm.calibrate(cli / "example_cnn.onnx", cli / "samples")
    with pytest.raises(
        lm.LaminaError, match=r"--mask_input 'x' is not an input of the model \(inputs: input\)"
    ):
        lm.calibrate(mlir, cli / "samples", mask_input="x")
    with pytest.raises(lm.LaminaError, match="mask_input must be an input name, 'auto' or 'none', got int"):
        lm.calibrate(mlir, cli / "samples", mask_input=3)  # type: ignore[arg-type]

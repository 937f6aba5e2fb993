"""model_runner reads back what model_deploy wrote in every float mode: f16/bf16 weights are stored
in the weight file as their 16-bit patterns (uint16), which the weight-file check must accept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lamina.tools.deploy import main as deploy_main
from lamina.tools.runner import main as runner_main
from lamina.tools.transform import main as transform_main


@pytest.mark.parametrize("mode", ["F16", "BF16", "F32"])
def test_runner_reads_deployed_float_model(tmp_path: Path, conv_model: str, mode: str) -> None:
    x = tmp_path / "in.npz"
    np.savez(x, x=np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32))
    mlir = tmp_path / "conv.mlir"
    assert (
        transform_main(["--model_def", conv_model, "--input_shapes", "[[1,3,8,8]]", "--mlir", str(mlir)]) == 0
    )
    assert deploy_main(["--mlir", str(mlir), "--quantize", mode, "--model", str(tmp_path / "m.bmodel")]) == 0
    with np.load(tmp_path / "m_tpu_weights.npz") as z:
        assert z.files, "the deployed model keeps its weights in the weight file"
    out = tmp_path / "out.npz"
    assert (
        runner_main(["--input", str(x), "--model", str(tmp_path / "m_tpu.mlir"), "--output", str(out)]) == 0
    )
    with np.load(out) as z:
        assert z["y"].shape == (1, 4, 8, 8) and np.isfinite(z["y"]).all()

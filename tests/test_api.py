"""The Python API (lamina.api): load / run / transform / compare / preprocess."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lamina.api as lm

onnx = pytest.importorskip("onnx")
from mlp_model import save_mlp, sigmoid_mm  # noqa: E402


@pytest.fixture
def model_path(tmp_path: Path) -> str:
    return save_mlp(tmp_path / "mlp.onnx")


def test_load_onnx_and_run(model_path: str) -> None:
    model = lm.load(model_path, input_shapes=[[2, 4]])
    assert model.input_names == ["x"] and model.output_names == ["y"] and model.input_shapes == [(2, 4)]
    x = np.ones((2, 4), np.float32)
    want = sigmoid_mm(x)
    np.testing.assert_allclose(model.run({"x": x})["y"], want, rtol=1e-6)
    np.testing.assert_allclose(model.run(x)["y"], want, rtol=1e-6)
    every = lm.run(model, {"x": x}, dump_all=True)
    assert list(every)[-2:] == ["mm", "y"] and "W" not in every
    with pytest.raises(lm.LaminaError, match=r"input .x. has shape \[3, 4\] but the model expects \[2, 4\]"):
        model.run({"x": np.ones((3, 4), np.float32)})
    assert "x: [2, 4]" in repr(model)


def test_transform_save_load_compare(tmp_path: Path, model_path: str) -> None:
    np.savez(tmp_path / "in.npz", x=np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32))
    res = lm.transform(
        model_path,
        input_shapes=[[2, 4]],
        test_input=str(tmp_path / "in.npz"),
        mlir=str(tmp_path / "mlp.mlir"),
    )
    assert res.passed and res.report is not None and len(res.report.results) == 2
    assert Path(res.mlir).is_file() and res.weights and Path(res.weights).is_file()
    # the written .mlir loads back and gives the same outputs as onnxruntime
    model = lm.load(res.mlir)
    out = lm.run(model, str(tmp_path / "in.npz"), output=str(tmp_path / "out.npz"))
    ref = lm.run(model_path, str(tmp_path / "in.npz"))
    rep = lm.compare(out, ref, html=str(tmp_path / "r.html"))
    assert rep.passed and (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    rep = lm.compare(str(tmp_path / "out.npz"), res.ref_npz, tolerance=(0.99, 0.99))
    assert rep.passed and [r.name for r in rep.results] == ["y"]
    # Model.save writes a module + weights pair that loads back
    wf = model.save(str(tmp_path / "copy.mlir"))
    assert wf and Path(wf).is_file()
    x = np.load(tmp_path / "in.npz")["x"]
    np.testing.assert_array_equal(lm.load(str(tmp_path / "copy.mlir")).run(x)["y"], out["y"])


def test_api_errors(tmp_path: Path) -> None:
    with pytest.raises(lm.LaminaError, match="does not exist"):
        lm.load(str(tmp_path / "missing.onnx"))
    (tmp_path / "junk.onnx").write_bytes(b"\x00\x01junk")
    with pytest.raises(lm.LaminaError, match=r"junk\.onnx"):
        lm.load(str(tmp_path / "junk.onnx"))
    with pytest.raises(lm.LaminaError, match="does not exist"):
        lm.transform(str(tmp_path / "missing.onnx"))


def test_preprocess_array() -> None:
    img = np.zeros((4, 6, 3), np.uint8)
    img[..., 0] = 10
    img[..., 2] = 30
    x = lm.preprocess(img, [2, 3, 4, 6], mean=[10, 0, 0], scale=[1, 1, 0.5], pixel_format="rgb")
    assert x.shape == (2, 3, 4, 6) and x.dtype == np.float32
    np.testing.assert_array_equal(x[:, 0], 0)
    np.testing.assert_array_equal(x[:, 2], 15)
    # resize + keep aspect ratio pads with pad_value (centred)
    x = lm.preprocess(
        np.full((2, 4, 1), 200, np.uint8),
        [1, 1, 4, 4],
        pixel_format="gray",
        keep_aspect_ratio=True,
        pad_value=7,
    )
    np.testing.assert_array_equal(x[0, 0, 0], 7)
    np.testing.assert_array_equal(x[0, 0, 1:3], 200)
    np.testing.assert_array_equal(x[0, 0, 3], 7)
    # nhwc layout
    x = lm.preprocess(img, [1, 4, 6, 3], pixel_format="rgb", channel_format="nhwc")
    assert x.shape == (1, 4, 6, 3) and x[0, 0, 0, 2] == 30

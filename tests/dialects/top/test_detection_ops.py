"""``top.Nms``, ``top.GridSample``, ``top.RoiAlign`` against onnxruntime on random inputs (the node
suite's ``test_nonmaxsuppression_*``, ``test_gridsample_*``, ``test_roialign_*`` cover the corner
cases), and their shape inference."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from lamina.execution import Interpreter
from lamina.frontends.onnx import import_onnx
from lamina.frontends.onnx.testing import run_onnxruntime, single_node_model
from lamina.ir.types import RankedTensorType


def _run_both(model, feeds):  # type: ignore[no-untyped-def]
    module = import_onnx(model)
    got = Interpreter(module).run(feeds)
    ref = run_onnxruntime(model, feeds)
    return module, got, ref


def _random_boxes(rng: np.random.Generator, b: int, n: int) -> np.ndarray:
    xy = rng.uniform(0, 50, (b, n, 2))
    wh = rng.uniform(2, 20, (b, n, 2))
    return np.concatenate([xy, xy + wh], axis=-1).astype(np.float32)[..., [1, 0, 3, 2]]


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("score_threshold", [None, 0.3])
def test_nms_matches_onnxruntime(center: int, score_threshold: float | None) -> None:
    rng = np.random.default_rng(center + 7)
    boxes = _random_boxes(rng, 2, 60)
    if center:
        y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
        boxes = np.stack([(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1], -1).astype(np.float32)
    scores = rng.uniform(0, 1, (2, 3, 60)).astype(np.float32)
    ins = {
        "boxes": boxes,
        "scores": scores,
        "max_out": np.array([7], np.int64),
        "iou": np.array([0.4], np.float32),
    }
    init = ["max_out", "iou"]
    if score_threshold is not None:
        ins["st"] = np.array([score_threshold], np.float32)
        init.append("st")
    model = single_node_model(
        "NonMaxSuppression", ins, {"center_point_box": center}, initializers=init, opset=11
    )
    feeds = {"boxes": boxes, "scores": scores}
    _, got, ref = _run_both(model, feeds)
    np.testing.assert_array_equal(got["y0"], ref["y0"])
    assert got["y0"].dtype == np.int64 and got["y0"].shape[1] == 3


def test_nms_without_max_output_selects_nothing() -> None:
    rng = np.random.default_rng(0)
    boxes = _random_boxes(rng, 1, 5)
    scores = rng.uniform(size=(1, 1, 5)).astype(np.float32)
    model = single_node_model("NonMaxSuppression", {"boxes": boxes, "scores": scores}, opset=11)
    _, got, ref = _run_both(model, {"boxes": boxes, "scores": scores})
    assert got["y0"].shape == ref["y0"].shape == (0, 3)


@pytest.mark.parametrize(
    ("mode", "padding", "align", "opset"),
    [
        ("bilinear", "zeros", 0, 16),
        ("bilinear", "border", 1, 16),
        ("nearest", "reflection", 0, 16),
        ("bicubic", "zeros", 1, 16),
        ("bicubic", "reflection", 0, 16),
        ("linear", "border", 0, 20),
        ("cubic", "border", 1, 20),
        ("cubic", "reflection", 1, 20),
        ("nearest", "border", 1, 20),
    ],
)
def test_grid_sample_matches_onnxruntime(mode: str, padding: str, align: int, opset: int) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    grid = rng.uniform(-1.3, 1.3, (2, 5, 7, 2)).astype(np.float32)
    model = single_node_model(
        "GridSample",
        {"x": x, "grid": grid},
        {"mode": mode, "padding_mode": padding, "align_corners": align},
        opset=opset,
    )
    module, got, ref = _run_both(model, {"x": x, "grid": grid})
    np.testing.assert_allclose(got["y0"], ref["y0"], rtol=1e-4, atol=1e-5)
    t = next(op for op in module.walk_ops() if op.name == "top.GridSample").results[0].type
    assert isinstance(t, RankedTensorType) and t.shape == (2, 3, 5, 7)


@pytest.mark.parametrize(
    ("mode", "ctm", "ratio"),
    [
        ("avg", "half_pixel", 0),
        ("avg", "output_half_pixel", 2),
        ("max", "half_pixel", 2),
        ("max", "half_pixel", 0),
    ],
)
def test_roi_align_matches_onnxruntime(mode: str, ctm: str, ratio: int) -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 16, 20)).astype(np.float32)
    xy = rng.uniform(-2, 30, (6, 2))
    wh = rng.uniform(1, 24, (6, 2))
    rois = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    bidx = rng.integers(0, 2, 6).astype(np.int64)
    attrs = {
        "mode": mode,
        "coordinate_transformation_mode": ctm,
        "output_height": 3,
        "output_width": 4,
        "sampling_ratio": ratio,
        "spatial_scale": 0.5,
    }
    model = single_node_model("RoiAlign", {"x": x, "rois": rois, "bi": bidx}, attrs, opset=16)
    module, got, ref = _run_both(model, {"x": x, "rois": rois, "bi": bidx})
    np.testing.assert_allclose(got["y0"], ref["y0"], rtol=1e-4, atol=1e-5)
    t = next(op for op in module.walk_ops() if op.name == "top.RoiAlign").results[0].type
    assert t.shape == (6, 4, 3, 4)

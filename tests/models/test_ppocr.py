"""A real trained text detector end to end: PaddleOCR's PP-OCRv4 detector (``ch_PP-OCRv4_det_infer.onnx``
from the ``rapidocr-onnxruntime`` wheel) at 1x3x384x768, calibrated on synthetic text pages
(``benchmarks/data.py``), deployed in INT8 and checked on held-out pages the calibration never saw:
the probability map's cosine and its text mask (at 0.3) against float, pure INT8 and with the
mixed-precision search (``benchmarks/RESULTS.md``, "text detector (issue 13)", has the figures)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
rapidocr = pytest.importorskip("rapidocr_onnxruntime", reason="the detector ships in rapidocr-onnxruntime")
MODEL = os.path.join(os.path.dirname(rapidocr.__file__), "models", "ch_PP-OCRv4_det_infer.onnx")
if not os.path.exists(MODEL):
    pytest.skip(f"{MODEL} is missing", allow_module_level=True)

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import data  # noqa: E402

pytestmark = pytest.mark.slow

#: held-out floors, below the figures of benchmarks/RESULTS.md (24 calibration pages, 8 held out:
#: INT8 0.9794 / IoU 0.9471) by a margin for 12 calibration pages and 3 held out
COS_INT8, IOU_INT8 = 0.97, 0.93
COS_MIXED, IOU_MIXED = 0.975, 0.935


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel().astype(np.float64), b.ravel().astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _iou(a: np.ndarray, b: np.ndarray, t: float = 0.3) -> float:
    m, n = a > t, b > t
    return float((m & n).sum() / max((m | n).sum(), 1))


def test_ppocr_int8_and_mixed(tmp_path: Path) -> None:
    import lamina.api as lm
    from lamina.quant.calibration import calibrate
    from lamina.quant.deploy import deploy_module, run_tpu_module
    from lamina.quant.search import search_qtable

    mlir = tmp_path / "ppocr.mlir"
    lm.transform(MODEL, model_name="ppocr", input_shapes=[[1, 3, 384, 768]], mlir=str(mlir))
    top = lm.load(str(mlir))
    cal = [{"x": x[None]} for x in data.text_pages(12, "calibration")]
    test = [{"x": x[None]} for x in data.text_pages(3, "test")]
    table = calibrate(top.module, cal, "kl", tune_num=5).table
    assert any("consumer rule: p2o.Add.281" in c for c in table.comments)  # the logits capped
    refs = [top.run(s)["sigmoid_0.tmp_0"] for s in test]

    def held_out(qtable: dict[str, str] | None, tbl: object) -> tuple[float, float]:
        tpu = deploy_module(top.module, "INT8", calibration_table=tbl, qtable=qtable, ctx=top.ctx)
        got = [run_tpu_module(tpu, s)["sigmoid_0.tmp_0"] for s in test]
        return (
            float(np.mean([_cos(g, r) for g, r in zip(got, refs)])),
            float(np.mean([_iou(g, r) for g, r in zip(got, refs)])),
        )

    cos, iou = held_out(None, table)
    assert cos >= COS_INT8 and iou >= IOU_INT8, (cos, iou)
    refined = tmp_path / "table.refined"
    res = search_qtable(
        top.module, table, cal[:10], expected_cos=0.99, refined_table=str(refined), ctx=top.ctx, log=None
    )
    assert len(res.float_layers) <= res.max_float_layers
    cos_m, iou_m = held_out(res.qtable, str(refined))
    assert cos_m >= COS_MIXED and iou_m >= IOU_MIXED, (cos_m, iou_m)
    assert cos_m >= cos - 0.002  # the search never makes the calibration pages worse

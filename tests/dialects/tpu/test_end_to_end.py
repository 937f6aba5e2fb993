"""ONNX CNN → top → max calibration (computed here) → import-calibration-table → convert-top-to-tpu
→ the tpu interpreter, against the float model."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "models"))

import zoo

import lamina.api as api
from lamina.dialects.tpu.tables import CalibrationTable, TensorStats
from lamina.dialects.tpu.transforms import convert_top_to_tpu, import_calibration
from lamina.execution.interpreter import Interpreter
from lamina.ir.verifier import verify


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _max_table(model: object, samples: list) -> CalibrationTable:
    it = Interpreter(model)  # type: ignore[arg-type]
    stats: dict[str, tuple[float, float]] = {}
    for s in samples:
        for k, v in it.run(s, dump_all=True).items():
            if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.size:
                lo, hi = float(v.min()), float(v.max())
                if k in stats:
                    lo, hi = min(lo, stats[k][0]), max(hi, stats[k][1])
                stats[k] = (lo, hi)
    return CalibrationTable(thresholds={k: TensorStats(max(-a, b), a, b) for k, (a, b) in stats.items()})


@pytest.mark.parametrize("mode,floor", [("INT8", 0.99), ("F16", 0.9999), ("BF16", 0.999)])
def test_resnet_end_to_end(
    mode: str, floor: float, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # model_transform writes r.mlir and its weights in the cwd
    path = zoo.export("resnet18", "small")
    samples = zoo.inputs("resnet18", "small")
    ref_model = api.transform(path, model_name="r").module
    ref = Interpreter(ref_model).run(samples[0])
    m = api.transform(path, model_name="r").module
    if mode == "INT8":
        assert import_calibration(m, _max_table(m, samples)) > 10
    ok, stats = convert_top_to_tpu(m, mode)
    assert ok
    verify(m)
    assert not [
        o
        for o in m.walk_ops()
        if o.dialect_name == "top" and o.name not in ("top.Input", "top.Weight", "top.None")
    ]
    if mode == "INT8":
        assert stats["int8"] >= 30 and stats["float"] == 0
    out = Interpreter(m).run(samples[0])
    for k, v in ref.items():
        assert _cos(out[k], v) >= floor, (k, _cos(out[k], v))

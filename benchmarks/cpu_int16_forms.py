#!/usr/bin/env python
"""The int16 integer forms on the CPU target: what they cost in speed (issue 13).

MiniLM-L6 (real, ``tests/models/minilm.py``, 1x64 tokens) in INT8, calibrated once (``--calib``
samples, method ``max``, as ``cpu_whole_models.py``), deployed for the CPU three times —
``--int_forms default`` (``lut16`` + ``wide_input`` + ``wide_sum``), without ``wide_input``, and
the 8-bit forms only (``lut,gather,softmax,attention,wide_sum``: what the CPU took before it had an
int16 GEMM) — and timed against onnxruntime's QDQ u8s8 per-channel model of the same samples in one
loop: calling-thread CPU time (one thread), engines alternating, best of ``--repeat`` rounds of
``--inner`` runs. Every deployment is checked bit for bit against the ``tpu`` interpreter on the
first sample. numpy does no timed work (``OPENBLAS_CORETYPE`` is left alone).

Usage::

    PYTHONPATH=. python benchmarks/cpu_int16_forms.py [--calib 3] [--repeat 7] [--inner 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "models"), HERE]

FORMS = {
    "default": "default",
    "without wide_input": "lut,gather,softmax,attention,lut16,wide_sum",
    "8-bit forms only": "lut,gather,softmax,attention,wide_sum",
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calib", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--inner", type=int, default=2)
    a = ap.parse_args(argv)
    import cpu_whole_models as cw

    import lamina.api as api
    import lamina.runtime as rt

    d = tempfile.mkdtemp(prefix="lamina-int16-forms-")
    path, sets = cw.model_and_samples("minilm", max(a.calib, 1))
    mlir = os.path.join(d, "minilm.mlir")
    api.transform(path, model_name="minilm", mlir=mlir)
    names = [i.name for i in cw.ort_session(path, 1).get_inputs()]
    feeds = [dict(zip(names, s)) for s in sets]
    table = api.calibrate(mlir, samples=feeds, calibration_method="max")
    sess = cw.ort_session(cw.ort_int8(path, feeds, os.path.join(d, "qdq.onnx")), 1)
    x = feeds[0]
    engines = {"onnxruntime QDQ": lambda: sess.run(None, x)}
    for tag, forms in FORMS.items():
        out = os.path.join(d, f"{len(engines)}.lamina")
        dep = api.deploy(mlir, "INT8", calibration_table=table, processor="cpu", output=out, int_forms=forms)
        m = rt.load(out, threads=1)
        got, want = m.run(x), dep.run(x)
        exact = all(np.array_equal(np.asarray(got[k]), np.asarray(want[k])) for k in m.output_names)
        print(f"# {tag} ({forms}): {len(m.kernels)} kernels, bit-exact vs tpu interpreter: {exact}")
        engines[tag] = lambda m=m: m.run(x)
    for f in engines.values():
        f()
        f()
    t = cw.timed(engines, 1, a.repeat, a.inner)
    ort = t["onnxruntime QDQ"][0]
    print("| MiniLM seq 64 INT8 on the CPU | ms (CPU, 1 thread) | ratio |\n|---|---:|---:|")
    for k, (c, _) in t.items():
        print(f"| {k} | {c * 1e3:.2f} | {c / ort:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

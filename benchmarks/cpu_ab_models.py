#!/usr/bin/env python
"""A/B of two Lamina source trees on whole compiled models, in one process, against onnxruntime.

On a shared, loaded machine two runs of ``cpu_whole_models.py`` minutes apart differ by more than a
change's effect. This script compiles each model with both trees (``--before``, ``--after``: source
directories, e.g. ``git archive <commit> | tar -x -C DIR``; each compiles in a subprocess with its
own ``PYTHONPATH``), then loads both ``.lamina`` files with *this* tree's ``lamina.runtime`` and
times them interleaved with onnxruntime on the same input, for each of ``--threads`` (default 1):
one thread, the calling thread's CPU time (``time.thread_time``); more, the wall time (each engine's
round after a 50 ms pause, as ``cpu_whole_models.py``: on a shared machine the neighbours count);
best of ``--rounds`` rounds of 2 runs. It prints each
engine's time, the ratios to onnxruntime, after / before, the kernel counts and whether the two
files' outputs are identical bit for bit. Models, inputs, calibration (3 samples, ``max``) and
onnxruntime's INT8 QDQ model as ``cpu_whole_models.py``'s. numpy does no timed work
(OPENBLAS_CORETYPE is left alone).

Usage::

    python benchmarks/cpu_ab_models.py --before /tmp/main_src --after . \\
        [--models resnet18,resnet50,yolo] [--modes F32,INT8] [--threads 1,2] [--rounds 8] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "models"), HERE]

BUILD = """
import os, sys
root, name, mode, out = sys.argv[1:5]
sys.path[:0] = [root, os.path.join(root, "tests", "models"), os.path.join(root, "benchmarks")]
import cpu_whole_models as cw
import lamina.api as api
path, sets = cw.model_and_samples(name, 3)
probe = cw.ort_session(path, 1)
feeds = [dict(zip([i.name for i in probe.get_inputs()], s)) for s in sets]
api.transform(path, model_name=name, mlir=out + ".mlir")
table = api.calibrate(out + ".mlir", samples=feeds, calibration_method="max") if mode == "INT8" else None
api.deploy(out + ".mlir", mode, calibration_table=table, processor="cpu", output=out)
"""


def build(src: str, name: str, mode: str, out: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(src)}
    subprocess.run([sys.executable, "-c", BUILD, os.path.abspath(src), name, mode, out], check=True, env=env)


def compare(name: str, mode: str, d: str, rounds: int, threads: int = 1) -> str:
    import cpu_whole_models as cw

    import lamina.runtime as rt

    path, sets = cw.model_and_samples(name, 3)
    probe = cw.ort_session(path, 1)
    feeds = [dict(zip([i.name for i in probe.get_inputs()], s)) for s in sets]
    ort_path = path
    if mode == "INT8":
        ort_path = cw.ort_int8(path, feeds, os.path.join(d, f"{name}_qdq.onnx"))
    sess = cw.ort_session(ort_path, threads)
    x = feeds[0]
    ms = {
        k: rt.load(os.path.join(d, f"{k}_{name}_{mode}.lamina"), threads=threads) for k in ("before", "after")
    }
    outs = {k: m.run(x) for k, m in ms.items()}
    same = all(
        np.array_equal(np.asarray(outs["before"][o]), np.asarray(outs["after"][o]))
        for o in ms["after"].output_names
    )
    engines = {
        "before": lambda: ms["before"].run(x),
        "after": lambda: ms["after"].run(x),
        "ort": lambda: sess.run(None, x),
    }
    for f in engines.values():
        f()
        f()
    t = cw.timed(engines, threads, rounds, 2)
    col = 0 if threads == 1 else 1  # calling-thread CPU on one thread, wall on more
    b, a, o = (t[k][col] for k in ("before", "after", "ort"))
    what = "CPU" if threads == 1 else "wall"
    return (
        f"{name} {mode} {threads}T ({what}): before {b * 1e3:.2f} ms ({b / o:.3f}x ORT), after {a * 1e3:.2f} ms "
        f"({a / o:.3f}x ORT), ORT {o * 1e3:.2f} ms; after/before {a / b:.3f}; kernels {len(ms['before'].kernels)} "
        f"-> {len(ms['after'].kernels)}; outputs identical: {same}; load {os.getloadavg()[0]:.1f}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", required=True, help="source tree compiled as 'before'")
    ap.add_argument("--after", default=ROOT, help="source tree compiled as 'after' (default: this one)")
    ap.add_argument("--models", default="resnet18,resnet50,yolo")
    ap.add_argument("--modes", default="F32,INT8")
    ap.add_argument("--threads", default="1", help="thread counts, e.g. 1,2")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--workdir", default=None, help="where the compiled files go (default: a temporary one)")
    args = ap.parse_args()
    d = args.workdir or tempfile.mkdtemp(prefix="lamina_ab_")
    os.makedirs(d, exist_ok=True)
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} before={args.before} after={args.after}")
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            for key, src in (("before", args.before), ("after", args.after)):
                build(src, name, mode, os.path.join(d, f"{key}_{name}_{mode}.lamina"))
            for n in (int(v) for v in args.threads.split(",")):
                print(compare(name, mode, d, args.rounds, n), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

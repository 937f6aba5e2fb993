#!/usr/bin/env python
"""Latency of Lamina's ``top`` reference interpreter vs onnxruntime, single-threaded, same process.

Models (built with PyTorch from ``tests/models/zoo.py``, exported once to the zoo cache):

* ``resnet50``: ResNet-50 at 1x3x224x224 (issue 3 target: within 3x of onnxruntime);
* ``bert``: a BERT-base-shaped encoder (12 layers, hidden 768, 12 heads, seq 128; target: within 5x);
* optionally ``resnet18``, ``mobilenetv2``, ``yolo`` (640x640), ``lstm``, ``gru``.

onnxruntime runs with ``intra_op_num_threads=1``/``inter_op_num_threads=1`` and all graph
optimizations (its default); numpy's BLAS is pinned to one thread by setting
``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1`` before numpy is imported. The reported
latency is the best of ``--repeat`` runs after ``--warmup`` runs (the machine may be shared).

Usage::

    python benchmarks/interpreter_vs_onnxruntime.py [--models resnet50,bert] [--repeat 5]
        [--profile] [--md]
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import datetime  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))

import zoo  # noqa: E402

TARGETS = {"resnet50": 3.0, "bert": 5.0}
LABELS = {
    "resnet18": "ResNet-18 1x3x224x224",
    "resnet50": "ResNet-50 1x3x224x224",
    "mobilenetv2": "MobileNetV2 1x3x224x224",
    "yolo": "YOLO-style (w16) 1x3x640x640",
    "bert": "BERT-base encoder (12x768, seq 128)",
    "lstm": "2-layer LSTM (h256, T100, B2)",
    "gru": "bi-GRU (h256, T100, B2)",
}


def export_in_subprocess(name: str) -> str:
    """Export with PyTorch in a child process, so torch's thread pools never load into this one."""
    models = os.path.join(ROOT, "tests", "models")
    code = (
        f"import sys; sys.path.insert(0, {ROOT!r}); sys.path.insert(0, {models!r}); import zoo; "
        f"print(zoo.export({name!r}, 'full'))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return out.stdout.strip().splitlines()[-1]


def best_of(fn, warmup: int, repeat: int) -> float:  # type: ignore[no-untyped-def]
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def machine() -> dict[str, str]:
    import onnxruntime as ort

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "date": datetime.date.today().isoformat(),
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "onnxruntime": ort.__version__,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,bert")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--profile", action="store_true", help="print the interpreter's time per op type")
    args = ap.parse_args()

    import onnxruntime as ort

    from lamina.execution import Interpreter
    from lamina.frontends.onnx import import_onnx

    m = machine()
    print(
        f"# {m['date']}  nproc={m['nproc']}  cpu={m['cpu']}  python {m['python']}  numpy {m['numpy']}  "
        f"onnxruntime {m['onnxruntime']}  load avg {m['load']}"
    )
    print(
        "# single thread: onnxruntime intra_op_num_threads=1, inter_op_num_threads=1; "
        "numpy BLAS pinned with OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1"
    )
    print(f"# best of {args.repeat} after {args.warmup} warm-up run(s)")
    rows = []
    for name in args.models.split(","):
        path = export_in_subprocess(name)
        feeds_list = zoo.inputs(name, "full")[0]
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        in_names = [i.name for i in sess.get_inputs()]
        feeds = dict(zip(in_names, feeds_list))
        t0 = time.perf_counter()
        module = import_onnx(path)
        interp = Interpreter(module)
        t_import = time.perf_counter() - t0
        ref = sess.run(None, feeds)
        got = interp.run(feeds)
        cos = min(zoo.cosine(got[o.name], r) for o, r in zip(sess.get_outputs(), ref))
        t_ort = best_of(lambda s=sess, f=feeds: s.run(None, f), args.warmup, args.repeat)
        t_lam = best_of(lambda i=interp, f=feeds: i.run(f), args.warmup, args.repeat)
        ratio = t_lam / t_ort
        rows.append((name, t_ort, t_lam, ratio, cos, t_import))
        print(
            f"{name}: onnxruntime {t_ort * 1e3:.1f} ms, lamina {t_lam * 1e3:.1f} ms, ratio {ratio:.2f}x, "
            f"min cosine {cos:.7f}, import+plan {t_import:.2f} s",
            flush=True,
        )
        if args.profile:
            prof = interp.profile(feeds)
            total = sum(t for _, t, _ in prof)
            for op, t, n in prof[:12]:
                print(f"    {op:24s} {t * 1e3:8.2f} ms  {100 * t / total:5.1f}%  ({n} ops)")
    print()
    print("| model | onnxruntime (ms) | lamina interpreter (ms) | ratio | target | min cosine |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, t_ort, t_lam, ratio, cos, _ in rows:
        tgt = TARGETS.get(name)
        verdict = "" if tgt is None else (f"≤ {tgt:.0f}x ✓" if ratio <= tgt else f"≤ {tgt:.0f}x ✗")
        print(
            f"| {LABELS.get(name, name)} | {t_ort * 1e3:.1f} | {t_lam * 1e3:.1f} | {ratio:.2f}x | {verdict} | "
            f"{cos:.7f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

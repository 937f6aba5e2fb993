#!/usr/bin/env python
"""Whole compiled models: the CPU target vs onnxruntime, both engines in this process, 1 and 2 threads.

For each zoo model (``tests/models/zoo.py``, the ``full`` variants: ResNet-18/50 and MobileNetV2 at
1x3x224x224, the YOLO-style detector w16 at 1x3x640x640, the BERT-base-shaped encoder 12 x 768,
12 heads, FFN 3072, 1x128 tokens; ``minilm``: the real all-MiniLM-L6-v2, ``tests/models/minilm.py``,
1x64 tokens) and each mode:

* **F32**: Lamina ``api.transform`` -> ``api.deploy(.., "F32", processor="cpu", output=X.lamina)``
  against onnxruntime FP32 on the same ONNX file; correctness: cosine of every output to
  onnxruntime's >= 0.99999;
* **INT8**: Lamina ``api.calibrate`` (``--calib`` random samples, method ``max``) ->
  ``api.deploy(.., "INT8", processor="cpu")`` (symmetric, per-channel weights as Lamina's INT8
  default) against onnxruntime's ``quantize_static`` QDQ u8s8 per-channel model (MinMax on the same
  samples); correctness: the compiled outputs equal the ``tpu`` interpreter's bit for bit on the
  first sample.

Each deploy runs without validation (``test_input`` not given) and is timed (process CPU seconds
and wall seconds): the compile time. The compiled file is loaded with ``lamina.runtime.load(path,
threads=N)``.

Timing: 1 thread — the **calling thread's CPU time** (``time.thread_time``) for both engines:
onnxruntime with ``intra_op_num_threads=1`` runs in the calling thread, and Lamina's runtime with
``threads=1`` calls the compiled entry on the caller's thread (``threads.Pool``: tid 0 is the caller,
no worker exists). Wall time is printed too. 2 threads: process CPU time and wall time (neither is
reliable on a loaded shared machine: CPU time counts spinning at barriers, wall time counts the
neighbours). Runs of the two engines alternate; best of ``--repeat`` rounds of ``--inner`` runs each.

numpy does no timed work here (OPENBLAS_CORETYPE is left alone).

Usage::

    python benchmarks/cpu_whole_models.py [--models resnet18,resnet50,mobilenetv2,yolo,bert,minilm]
        [--modes F32,INT8] [--threads 1,2] [--repeat 5] [--inner 3] [--md]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests", "models"), HERE]
# the compile column is a cold compile: no machine code from the CPU compiler's disk cache
# (lamina/targets/cpu/cache.py) unless LAMINA_CACHE is set
os.environ.setdefault("LAMINA_CACHE", "off")

LABELS = {
    "resnet18": "ResNet-18 1x3x224x224",
    "resnet50": "ResNet-50 1x3x224x224",
    "mobilenetv2": "MobileNetV2 1x3x224x224",
    "yolo": "YOLO-style w16 1x3x640x640",
    "bert": "BERT-base encoder 12x768 seq 128",
    "minilm": "MiniLM-L6 (real) seq 64",
}


def model_and_samples(name: str, n: int) -> tuple[str, list[list[np.ndarray]]]:
    """The ONNX path and ``n`` input sets (the first the zoo's own) of a model."""
    import zoo

    if name == "minilm":
        import minilm

        path = minilm.export(1, minilm.SEQ)
        texts = ["A man is playing a guitar.", "The cat sits on the mat.", "Stocks fell sharply today.",
                 "How do I bake bread?", "It rained all day in the city."]  # fmt: skip
        return path, [minilm.inputs([texts[i % len(texts)]], minilm.SEQ) for i in range(n)]
    path = zoo.export(name, "full")
    first = zoo.inputs(name, "full")[0]
    sets = [first]
    rng = np.random.default_rng(1)
    for _ in range(n - 1):
        if name == "bert":
            sets.append(zoo.bert_inputs(1, 128, 30522, seed=int(rng.integers(1 << 30))))
        else:
            sets.append([rng.standard_normal(a.shape).astype(np.float32) for a in first])
    return path, sets


def ort_session(path: str, threads: int) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_int8(path: str, samples: list[dict[str, np.ndarray]], out: str) -> str:
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    logging.getLogger().setLevel(logging.ERROR)
    quantize_static(path, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)  # fmt: skip
    return out


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    d = np.linalg.norm(a) * np.linalg.norm(b)
    return 1.0 if d == 0 else float(a @ b / d)


def timed(engines: dict[str, Any], threads: int, repeat: int, inner: int) -> dict[str, tuple[float, float]]:
    """Best per-run (CPU seconds, wall seconds) of each engine, runs alternating; CPU is the calling
    thread's for one thread, the process's for more. With more than one thread each engine's round
    starts after a 50 ms pause: onnxruntime's intra-op workers spin for a while after a run (its
    default), and without the pause they held the second core through Lamina's next round (MobileNetV2
    F32 on two threads: Lamina 12.2 ms wall alternating without the pause, 4.6 ms with it, 3.5 ms
    in a process of its own)."""
    cpu_clock = time.thread_time if threads == 1 else time.process_time
    best = {k: (float("inf"), float("inf")) for k in engines}
    for _ in range(repeat):
        for k, fn in engines.items():
            if threads > 1:
                time.sleep(0.05)
            c0, w0 = cpu_clock(), time.perf_counter()
            for _ in range(inner):
                fn()
            c, w = (cpu_clock() - c0) / inner, (time.perf_counter() - w0) / inner
            best[k] = (min(best[k][0], c), min(best[k][1], w))
    return best


def run_one(name: str, mode: str, threads: list[int], args: Any, d: str) -> list[dict[str, Any]]:
    import lamina.api as api
    import lamina.runtime as rt

    path, sets = model_and_samples(name, max(args.calib, 1))
    mlir = os.path.join(d, f"{name}.mlir")
    api.transform(path, model_name=name, mlir=mlir)
    probe = ort_session(path, 1)
    in_names = [i.name for i in probe.get_inputs()]
    feeds = [dict(zip(in_names, s)) for s in sets]
    table = None
    ort_path = path
    if mode == "INT8":
        table = api.calibrate(mlir, samples=feeds, calibration_method="max")
        ort_path = ort_int8(path, feeds, os.path.join(d, f"{name}_qdq.onnx"))
    out = os.path.join(d, f"{name}_{mode.lower()}.lamina")
    c0, w0 = time.process_time(), time.perf_counter()
    dep = api.deploy(mlir, mode, calibration_table=table, processor="cpu", output=out)
    compile_cpu, compile_wall = time.process_time() - c0, time.perf_counter() - w0
    ref_ops = [ln for ln in dep.result.compile_report if "reference executor" in ln or "skipped" in ln]
    x = feeds[0]
    # correctness on the first sample
    m1 = rt.load(out, threads=1)
    lam = m1.run(x)
    if mode == "INT8":
        interp = dep.run(x)
        ok = all(np.array_equal(np.asarray(lam[k]), np.asarray(interp[k])) for k in m1.output_names)
        check = (
            "bit-exact vs tpu interpreter"
            if ok
            else "NOT bit-exact: "
            + ", ".join(
                f"{k} max|d|={np.max(np.abs(np.asarray(lam[k], np.float64) - np.asarray(interp[k], np.float64))):.3g}"
                for k in m1.output_names
            )
        )
    else:
        ref = dict(zip([o.name for o in probe.get_outputs()], probe.run(None, x)))
        cos = min(cosine(lam[k], ref[k]) for k in m1.output_names if k in ref)
        check = f"min cosine vs ORT {cos:.7f}" + ("" if cos >= 0.99999 else " (< 0.99999!)")
    del probe
    rows = []
    for n in threads:
        sess = ort_session(ort_path, n)
        m = m1 if n == 1 else rt.load(out, threads=n)
        for _ in range(2):
            sess.run(None, x)
            m.run(x)
        engines = {"lamina": lambda m=m: m.run(x), "ort": lambda s=sess: s.run(None, x)}
        t = timed(engines, n, args.repeat, args.inner)
        rows.append(
            dict(
                model=name,
                mode=mode,
                threads=n,
                lam=t["lamina"],
                ort=t["ort"],
                compile=(compile_cpu, compile_wall),
                check=check,
                ref_ops=ref_ops,
                kernels=len(m1.kernels),
            )
        )
        r = rows[-1]
        print(
            f"{name} {mode} {n}T: Lamina {r['lam'][0] * 1e3:.2f} ms CPU / {r['lam'][1] * 1e3:.2f} ms wall; "
            f"ORT {r['ort'][0] * 1e3:.2f} ms CPU / {r['ort'][1] * 1e3:.2f} ms wall; ratio (CPU) "
            f"{r['lam'][0] / r['ort'][0]:.2f}x; compile {compile_cpu:.1f} s CPU ({compile_wall:.1f} s wall); "
            f"{len(m1.kernels)} kernels; {check}",
            flush=True,
        )
        for ln in ref_ops:
            print("   ", ln)
    return rows


def target(name: str, mode: str) -> float:
    return 1.0 if mode == "F32" and name.startswith("resnet") else 0.9


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,resnet50,mobilenetv2,yolo,bert,minilm")
    ap.add_argument("--modes", default="F32,INT8")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--inner", type=int, default=3)
    ap.add_argument("--calib", type=int, default=4, help="calibration samples (random inputs)")
    ap.add_argument("--md", action="store_true", help="print the RESULTS.md table")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    bad = [m for m in args.models.split(",") if m not in LABELS] + [
        m for m in args.modes.split(",") if m not in ("F32", "INT8")
    ]
    if bad:
        print(
            f"cpu_whole_models: unknown model or mode {bad[0]!r} (models: {', '.join(LABELS)}; modes F32, INT8)"
        )
        return 1
    import onnxruntime as ort

    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} onnxruntime {ort.__version__} "
          f"nproc {os.cpu_count()} load avg {os.getloadavg()}")  # fmt: skip
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            with tempfile.TemporaryDirectory() as d:
                try:
                    rows += run_one(name, mode, threads, args, d)
                except Exception as e:  # a benchmark reports the failure and goes on with the next model
                    print(f"{name} {mode}: FAILED {type(e).__name__}: {e}", flush=True)
    print(f"# end load avg {os.getloadavg()}")
    if args.md:
        print(
            "\n| model | mode | Lamina 1T ms | ORT 1T ms | ratio | target | Lamina 2T ms (CPU / wall) "
            "| ORT 2T ms (CPU / wall) | 2T ratio (wall) | compile s (CPU) | correctness |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        by = {(r["model"], r["mode"], r["threads"]): r for r in rows}
        for name, mode in dict.fromkeys((r["model"], r["mode"]) for r in rows):
            one, two = by.get((name, mode, 1)), by.get((name, mode, 2))
            base = one or two
            assert base is not None
            c1 = "—" if one is None else f"{one['lam'][0] * 1e3:.2f} | {one['ort'][0] * 1e3:.2f} | "
            if one is not None:
                c1 += f"{one['lam'][0] / one['ort'][0]:.2f}x"
            else:
                c1 += " | — | —"
            c2 = (
                "— | — | —"
                if two is None
                else f"{two['lam'][0] * 1e3:.1f} / {two['lam'][1] * 1e3:.1f} | {two['ort'][0] * 1e3:.1f} / "
                f"{two['ort'][1] * 1e3:.1f} | {two['lam'][1] / two['ort'][1]:.2f}x"
            )
            print(
                f"| {LABELS[name]} | {mode} | {c1} | ≤ {target(name, mode):.1f}x | {c2} | "
                f"{base['compile'][0]:.1f} | {base['check']} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

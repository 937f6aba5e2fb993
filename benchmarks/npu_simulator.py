#!/usr/bin/env python
"""The NPU compiler and simulator on the model zoo (issue 10's benchmarks), on ``lnpu``.

For each model (``tests/models/zoo.py``, full size: ResNet-18 and MobileNetV2 at 1x3x224x224, the
YOLO-style detector at 640x640, the BERT-base-shaped encoder at seq 128) and mode (INT8, BF16):

* **compile** — :func:`lamina.targets.npu.compiler.compile_module` on the lowered ``tpu`` module (the
  NPU passes, codegen and the container: what ``model_deploy --processor lnpu`` runs without
  ``--test_input``), in seconds; the lowering (``convert-top-to-tpu`` for lnpu's capabilities, after a
  ``max`` calibration on the one test sample for INT8) is not included;
* **simulator** — wall time of one inference of the written ``.lamina`` file through
  ``lamina.runtime`` (best of ``--repeat`` after a warm-up run), against **onnxruntime** FP32 on one
  thread (``intra_op_num_threads=inter_op_num_threads=1``) on the same ONNX file in the same process,
  and their ratio (issue 10's targets: within 20x in INT8, 40x in BF16);
* the simulated **latency** (µs), **MAC utilization** (the profile's: MACs executed / (peak x cycles);
  and over the model's MACs counted once, the profile's ``model_mac_utilization`` — a sliced layer
  group recomputes halos and producers per slice, which counts as executed MACs), **DDR** bytes; and
  the same compiled with
  ``disable_layer_group`` (every op alone, through DDR): its utilization and DDR bytes, so what the
  layer groups gain shows;
* the first simulated run checked once against the ``tpu`` interpreter: bit for bit in INT8 where no
  float GEMM feeds the output (``lamina.flows.deploy.exact_outputs``), cosine otherwise.

For ResNet-18 INT8 it also prints the bound the chip's DDR puts on the latency — every weight byte and
the input read once at the GDMA's DDR bandwidth — and the MAC utilization that bound allows (issue 10
asks >= 60 %).

PyTorch exports the ONNX files in a child process (cached in the zoo cache), so torch's thread pools
never load into the timing process; numpy's BLAS is pinned to one thread before numpy is imported
(``OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1``), as onnxruntime's.

Usage::

    python benchmarks/npu_simulator.py [--models resnet18,mobilenetv2,yolo,bert] [--modes INT8,BF16]
        [--repeat 3] [--md]
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import zoo  # noqa: E402
from interpreter_vs_onnxruntime import best_of, export_in_subprocess, machine  # noqa: E402

LABELS = {
    "resnet18": "ResNet-18 1x3x224x224",
    "mobilenetv2": "MobileNetV2 1x3x224x224",
    "yolo": "YOLO-style (w16) 1x3x640x640",
    "bert": "BERT-base encoder (12x768, seq 128)",
}
#: issue 10's simulator targets: within this factor of onnxruntime FP32 on one thread
RATIO_TARGET = {"INT8": 20.0, "BF16": 40.0}


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    return 1.0 if na == nb == 0 else float(a64 @ b64 / (na * nb))


def model_macs(module: Any) -> int:
    """The model's convolution and matrix-product MACs (FLOPs / 2 of its ``top`` ops)."""
    return sum(
        op.flops() // 2 for op in module.walk_ops() if op.name in ("top.Conv", "top.MatMul", "top.Gemm")
    )


def check(outs: dict[str, np.ndarray], ref: dict[str, np.ndarray], exact: list[str]) -> str:
    """The simulator's outputs against the interpreter's: ``bit-exact`` (required on ``exact``, and
    said of the others when they happen to be), else ``cosine c`` (the worst of the others, which
    must reach 0.99999), or what differs."""
    worst, problems, inexact = 1.0, [], []
    for name, want in ref.items():
        got = outs[name]
        equal = np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes()
        if name in exact and not equal:
            problems.append(f"{name}: {int(np.count_nonzero(got != want))} of {want.size} differ")
        elif not equal:
            inexact.append(name)
            worst = min(worst, _cosine(got, want))
    if worst < 0.99999:
        problems.append(f"cosine {worst:.6f} < 0.99999")
    if problems:
        return "DIFFERS (" + "; ".join(problems) + ")"
    if not inexact:
        return "bit-exact"
    return f"cosine {worst:.7f} ({', '.join(inexact)})"


def compile_and_profile(
    tpu: Any, chip: Any, name: str, mode: str, path: str, x: dict[str, np.ndarray], disable: bool
) -> Any:
    """Compile (timed), write ``path``, load it with lamina.runtime and run it once with a profile;
    (compile seconds, the loaded model, its outputs, the profile summary, the container)."""
    import lamina.runtime as rt
    from lamina.targets.base import CompileOptions
    from lamina.targets.container import write_model
    from lamina.targets.npu.compiler import compile_module

    t0 = time.perf_counter()
    built = compile_module(tpu, chip, CompileOptions(name=name, mode=mode, disable_layer_group=disable))
    t_compile = time.perf_counter() - t0
    write_model(path, built.model)
    cm = rt.load(path)
    outs = cm.run(x, profile=path + ".trace.json")
    return t_compile, cm, outs, cm.last_profile, built


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,mobilenetv2,yolo,bert")
    ap.add_argument("--modes", default="INT8,BF16")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--md", action="store_true", help="print the results as a markdown table")
    args = ap.parse_args()

    import onnx
    import onnxruntime as ort

    import lamina.api as api
    from lamina.flows.deploy import exact_outputs
    from lamina.quant.deploy import deploy_module, run_tpu_module
    from lamina.targets.base import get_target

    m = machine()
    print(
        f"# {m['date']}  nproc={m['nproc']}  cpu={m['cpu']}  python {m['python']}  numpy {m['numpy']}  "
        f"onnxruntime {m['onnxruntime']}  load avg {m['load']}"
    )
    print(
        "# single thread: onnxruntime intra_op_num_threads=1, inter_op_num_threads=1; "
        "numpy BLAS pinned with OPENBLAS_NUM_THREADS=OMP_NUM_THREADS=MKL_NUM_THREADS=1"
    )
    print(f"# best of {args.repeat} after {args.warmup} warm-up run(s); chip lnpu", flush=True)
    target = get_target("lnpu")
    assert target is not None
    chip = target.chip  # type: ignore[attr-defined]
    work = tempfile.mkdtemp(prefix="npu_simulator_")
    rows: list[dict[str, Any]] = []
    for name in args.models.split(","):
        path = export_in_subprocess(name)
        in_names = [i.name for i in onnx.load(path, load_external_data=False).graph.input]
        x = dict(zip(in_names, zoo.inputs(name, "full")[0]))
        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        t_ort = best_of(lambda s=sess, f=x: s.run(None, f), args.warmup, args.repeat)
        top = api.transform(path, model_name=name, mlir=os.path.join(work, f"{name}.mlir"))
        model = api.load(top.mlir)
        macs = model_macs(model.module)
        table = None
        for mode in args.modes.split(","):
            if mode == "INT8" and table is None:
                table = api.calibrate(model, samples=[x], calibration_method="max", tune_num=0)
            t0 = time.perf_counter()
            tpu = deploy_module(
                model.module,
                mode,
                calibration_table=table if mode == "INT8" else None,
                ctx=model.ctx,
                clone=True,
                warn=lambda s: None,
                capabilities=target.capabilities,
            )
            t_lower = time.perf_counter() - t0
            file = os.path.join(work, f"{name}_{mode.lower()}.lamina")
            t_compile, cm, outs, prof, built = compile_and_profile(tpu, chip, name, mode, file, x, False)
            ref = run_tpu_module(tpu, x)
            exact = exact_outputs(tpu, list(ref)) if mode == "INT8" else []
            verdict = check(outs, ref, exact)
            t_sim = best_of(lambda c=cm, f=x: c.run(f), args.warmup, args.repeat)
            t_nolg, _, outs2, prof2, _ = compile_and_profile(
                tpu, chip, name, mode, os.path.join(work, f"{name}_{mode.lower()}_nolg.lamina"), x, True
            )
            verdict2 = check(outs2, ref, exact)
            host = [k for k, v in built.placement.items() if v != "npu"]
            row = {
                "name": name,
                "mode": mode,
                "lower_s": t_lower,
                "compile_s": t_compile,
                "compile_nolg_s": t_nolg,
                "sim_s": t_sim,
                "ort_s": t_ort,
                "ratio": t_sim / t_ort,
                "latency_us": prof["time_us"],
                "cycles": prof["total_cycles"],
                "util": prof["mac_utilization"],
                "util_model": prof["model_mac_utilization"],
                "recompute": prof["macs"] / prof["model_macs"] if prof["model_macs"] else 0.0,
                "ddr": prof["ddr_bytes"],
                "weights": built.model.bytes_of("weights"),
                "util_nolg": prof2["mac_utilization"],
                "latency_nolg_us": prof2["time_us"],
                "ddr_nolg": prof2["ddr_bytes"],
                "check": verdict,
                "check_nolg": verdict2,
                "host": host,
                "subnets": len(built.model.subnets),
            }
            rows.append(row)
            print(
                f"{name} {mode}: compile {t_compile:.1f} s (lowering {t_lower:.1f} s; without groups "
                f"{t_nolg:.1f} s), simulator {t_sim * 1e3:.0f} ms vs onnxruntime {t_ort * 1e3:.1f} ms "
                f"({row['ratio']:.1f}x), simulated {row['latency_us']:.0f} us, MAC utilization "
                f"{100 * row['util']:.1f} % (model MACs {100 * row['util_model']:.1f} %, executed/model "
                f"{row['recompute']:.2f}), DDR {row['ddr'] / 1e6:.2f} MB (weights {row['weights'] / 1e6:.2f} MB); "
                f"without layer groups {row['latency_nolg_us']:.0f} us, {100 * row['util_nolg']:.1f} %, "
                f"DDR {row['ddr_nolg'] / 1e6:.2f} MB; {len(host)} layer(s) on the host in "
                f"{row['subnets']} subnet(s); vs the tpu interpreter: {verdict} (without groups: {verdict2})",
                flush=True,
            )
            if name == "resnet18" and mode == "INT8":
                in_bytes = sum(int(np.prod(t.shape)) * np.dtype(t.dtype).itemsize for t in built.model.inputs)
                bound = (row["weights"] + in_bytes) / chip.gdma_ddr_bytes_per_cycle
                print(
                    f"  DDR bound: ({row['weights']} weight + {in_bytes} input bytes) / "
                    f"{chip.gdma_ddr_bytes_per_cycle:g} B/cycle = {bound:.0f} cycles ({bound / chip.clock_hz * 1e6:.1f} us); "
                    f"{macs} MACs / ({chip.peak_macs_per_cycle:g} x {bound:.0f}) = "
                    f"{100 * macs / (chip.peak_macs_per_cycle * bound):.1f} % utilization at most "
                    f"(the simulated run: {row['cycles']} cycles, {row['cycles'] / bound:.2f}x the bound)",
                    flush=True,
                )
    if args.md:
        print()
        print(
            "| model | mode | compile (s) | simulator (ms) | onnxruntime FP32 (ms) | ratio | target | "
            "simulated (µs) | MAC util. | util. (model MACs) | DDR (MB) | no groups: µs | no groups: util. | "
            "no groups: DDR (MB) | vs interpreter |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for r in rows:
            tgt = RATIO_TARGET.get(r["mode"])
            verdict = "" if tgt is None else (f"≤ {tgt:.0f}x ✓" if r["ratio"] <= tgt else f"≤ {tgt:.0f}x ✗")
            print(
                f"| {LABELS.get(r['name'], r['name'])} | {r['mode']} | {r['compile_s']:.1f} | {r['sim_s'] * 1e3:.0f} | "
                f"{r['ort_s'] * 1e3:.1f} | {r['ratio']:.1f}x | {verdict} | {r['latency_us']:.0f} | "
                f"{100 * r['util']:.1f} % | {100 * r['util_model']:.1f} % | {r['ddr'] / 1e6:.2f} | "
                f"{r['latency_nolg_us']:.0f} | {100 * r['util_nolg']:.1f} % | {r['ddr_nolg'] / 1e6:.2f} | {r['check']} |"
            )
    print(f"# load avg at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return (
        0
        if all(
            not r["check"].startswith("DIFFERS") and not r["check_nolg"].startswith("DIFFERS") for r in rows
        )
        else 1
    )


if __name__ == "__main__":
    raise SystemExit(main())

#!/usr/bin/env python
"""Compile time of the CPU target: ``api.deploy(.., processor="cpu", output=X.lamina)`` without
validation, process CPU seconds, for the zoo models of ``cpu_whole_models.py`` — optionally for two
source trees side by side (A/B in one run, the deploys alternating).

Each model is imported (``api.transform``) and, for INT8, calibrated (3 random samples, ``max``, as
``cpu_whole_models.py``) once into ``--workdir`` by this tree; then every deploy runs in a fresh
subprocess with ``PYTHONPATH`` set to the tree timed (nothing carried between deploys: no warm
cache), reading that ``.mlir`` and table. Printed per deploy: process CPU seconds around
``api.deploy`` (imports excluded), wall seconds, and the compiler's own report line (kernel level /
codegen / LLVM seconds, kernels). Best of ``--repeat`` (CPU and wall each: the compiler runs LLVM
on the CPUs the process may use, so the wall time a user waits is below the CPU time when a core
is free; on a machine shared with others' jobs both are noisy).

Every deploy is cold: the CPU compiler's disk cache (``lamina/targets/cpu/cache.py``) is switched
off (``LAMINA_CACHE=off``). ``--warm``: each deploy instead reads a cache that one untimed deploy of
the same model by the same tree filled first (a fresh directory per tree, under ``--workdir``):
what deploying the same model again costs.

``--profile FILE``: one more deploy of the first model under ``cProfile`` (this tree), stats written
to FILE and the top functions by cumulative time printed.

Usage::

    python benchmarks/cpu_compile_time.py [--models resnet50,yolo] [--modes F32,INT8] [--repeat 3]
        [--trees before=/tmp/main_src,after=.] [--workdir DIR] [--warm] [--profile out.prof]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

PREP = """
import os, sys
root, name, mode, out = sys.argv[1:5]
sys.path[:0] = [root, os.path.join(root, "tests", "models"), os.path.join(root, "benchmarks")]
import cpu_whole_models as cw
import lamina.api as api
path, sets = cw.model_and_samples(name, 3)
probe = cw.ort_session(path, 1)
feeds = [dict(zip([i.name for i in probe.get_inputs()], s)) for s in sets]
api.transform(path, model_name=name, mlir=out + ".mlir")
if mode == "INT8":
    api.calibrate(out + ".mlir", samples=feeds, calibration_method="max", calibration_table=out + ".table")
"""

DEPLOY = """
import json, os, sys, time
root, mlir, mode, table, out, prof = sys.argv[1:7]
sys.path.insert(0, root)  # before the current directory ('' for -c), which may hold another tree
import lamina.api as api
import lamina.targets.cpu.compiler  # noqa: F401  (imports outside the timed region)
kw = dict(calibration_table=table if mode == "INT8" else None, processor="cpu", output=out)
if prof != "-":
    import cProfile
    cProfile.run("api.deploy(mlir, mode, **kw)", prof)
    sys.exit(0)
c0, w0 = time.process_time(), time.perf_counter()
dep = api.deploy(mlir, mode, **kw)
cpu, wall = time.process_time() - c0, time.perf_counter() - w0
import lamina
assert os.path.dirname(os.path.dirname(lamina.__file__)) == root, lamina.__file__
print("RESULT " + json.dumps(dict(cpu=cpu, wall=wall, report=dep.result.compile_report[:2])))
"""


def prepare(name: str, mode: str, workdir: str) -> tuple[str, str]:
    base = os.path.join(workdir, f"{name}_{mode.lower()}")
    if not os.path.exists(base + ".mlir") or (mode == "INT8" and not os.path.exists(base + ".table")):
        env = {**os.environ, "PYTHONPATH": ROOT}
        subprocess.run([sys.executable, "-c", PREP, ROOT, name, mode, base], check=True, env=env)
    return base + ".mlir", base + ".table"


def deploy(tree: str, mlir: str, mode: str, table: str, out: str, prof: str = "-", cache: str = "") -> dict:
    root = os.path.abspath(tree)
    env = {**os.environ, "PYTHONPATH": root, "LAMINA_CACHE": "on" if cache else "off"}
    if cache:
        env["LAMINA_CACHE_DIR"] = cache
    p = subprocess.run(
        [sys.executable, "-c", DEPLOY, root, mlir, mode, table, out, prof],
        check=True,
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    if prof != "-":
        return {}
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT ") :])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,resnet50,mobilenetv2,yolo,bert,minilm")
    ap.add_argument("--modes", default="F32,INT8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trees", default=f"this={ROOT}", help="label=DIR,... source trees to time")
    ap.add_argument("--workdir", default="/tmp/lamina_compile_time")
    ap.add_argument("--profile", default="", help="cProfile one deploy of the first model to FILE")
    ap.add_argument("--warm", action="store_true", help="deploys read a cache filled by one deploy first")
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    trees = dict(t.split("=", 1) for t in args.trees.split(","))
    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} nproc {os.cpu_count()} "
        f"load avg {os.getloadavg()}",
        flush=True,
    )
    table_rows = []
    for name in args.models.split(","):
        for mode in args.modes.split(","):
            mlir, table = prepare(name, mode, args.workdir)
            if args.profile:
                out = os.path.join(args.workdir, f"{name}_{mode.lower()}_prof.lamina")
                deploy(ROOT, mlir, mode, table, out, args.profile)
                import pstats

                pstats.Stats(args.profile).sort_stats("cumulative").print_stats(45)
                return 0
            best: dict[str, dict] = {}
            walls: dict[str, list[float]] = {}
            caches = {label: "" for label in trees}
            if args.warm:
                import shutil

                for label, tree in trees.items():
                    caches[label] = os.path.join(args.workdir, f"cache_{label}")
                    shutil.rmtree(caches[label], ignore_errors=True)
                    out = os.path.join(args.workdir, f"{name}_{mode.lower()}_{label}.lamina")
                    deploy(tree, mlir, mode, table, out, cache=caches[label])
            for _ in range(args.repeat):
                for label, tree in trees.items():
                    out = os.path.join(args.workdir, f"{name}_{mode.lower()}_{label}.lamina")
                    r = deploy(tree, mlir, mode, table, out, cache=caches[label])
                    print(f"{name} {mode} {label}: {r['cpu']:.2f} s CPU, {r['wall']:.2f} s wall; {r['report'][0]}",
                          flush=True)  # fmt: skip
                    walls.setdefault(label, []).append(r["wall"])
                    if label not in best or r["cpu"] < best[label]["cpu"]:
                        best[label] = r
            for label in best:
                best[label]["best_wall"] = min(walls[label])
            table_rows.append((name, mode, best))
    print(f"# end load avg {os.getloadavg()}")
    labels = list(trees)
    print("\n| model | mode | " + " | ".join(f"{lb} s CPU / wall" for lb in labels) + " | kernels |")
    print("|---|---|" + "---:|" * len(labels) + "---|")
    for name, mode, best in table_rows:
        kern = best[labels[-1]]["report"][1].split(" (")[0]
        cells = [f"{best[lb]['cpu']:.2f} / {best[lb]['best_wall']:.2f}" for lb in labels]
        print(f"| {name} | {mode} | " + " | ".join(cells) + f" | {kern} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

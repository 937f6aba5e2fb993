"""Layer-level timings of the CPU target's templates for the YOLO-style detector's F32 model against
the templates they supersede, each kernel compiled alone for the host and called through ctypes on
one thread, best of ``4 * --repeat`` short batches of calling-thread CPU time
(``cpu_vs_onnxruntime.timed``), the two templates of a row timed in the same run:

* every distinct 3x3 stride-1 conv of the model: ``winograd_f32`` vs ``conv_f32`` (plain convs, the
  fused SiLU not included), with the largest difference of their outputs relative to the output's
  scale;
* (``yolo``) the head's box-distribution Softmax (1x16x4x8400 along 16): ``softmax_f32`` vs
  ``generic.softmax``; one C2f Split at 160x160: ``run_copy`` vs ``generic.gather``.

``--models`` takes zoo names (``yolo``, ``resnet18``, ``resnet50``): the ``full`` variant lowered to
``tpu`` F32 by ``api.deploy``. Usage::

    PYTHONPATH=. python benchmarks/cpu_yolo_kernels.py [--models yolo,resnet18] [--repeat 3] [--md] [--skip-convs]

numpy does no timed work (OPENBLAS_CORETYPE is left alone)."""

from __future__ import annotations

import argparse
import ctypes
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "tests" / "targets" / "npu"))

import cpu_vs_onnxruntime as cvo  # noqa: E402
import llvmlite.binding as llvm  # noqa: E402
from llvmlite import ir  # noqa: E402
from tpu_cases import build, dense, op, t  # noqa: E402

from lamina.targets.cpu.kernels import by_name  # noqa: E402


def compiled(name: str, o: Any, isa: Any, arrays: dict[Any, np.ndarray]) -> tuple[Any, Any, list[Any]]:
    """(function, buffers, keep-alive) of template ``name``'s kernel for ``o``; ``arrays`` by the
    plan's ``(kind, key)`` entries (``in`` / ``out``)."""
    tp = by_name(name)
    plan = tp.plan(o, "kernel", isa)
    m = ir.Module()
    tp.emit(m, plan, o, isa)
    engine, fn = cvo.jit(m, "kernel")
    scratch = np.zeros(plan.scratch_bytes + 64, np.uint8)
    ptrs = []
    for kind, key in plan.buffers:
        a = plan.weights[key] if kind == "weight" else scratch if kind == "scratch" else arrays[(kind, key)]
        ptrs.append(a.ctypes.data)
    return fn, (ctypes.c_void_p * len(ptrs))(*ptrs), [engine, plan, scratch]


def compare(
    label: str, o: Any, isa: Any, names: list[str], ins: list[np.ndarray], repeat: int
) -> dict[str, Any]:
    outs = {n: [np.zeros(tuple(r.type.shape), np.float32) for r in o.results] for n in names}
    times, keep = {}, []
    for n in names:
        arrays: dict[Any, np.ndarray] = {("in", i): x for i, x in enumerate(ins)}
        arrays[("in", "input")] = ins[0]
        for j, y in enumerate(outs[n]):
            arrays[("out", j)] = y
            arrays[("out", "output")] = y
        fn, bufs, k = compiled(n, o, isa, arrays)
        keep.append(k)
        fn(bufs, 0, 1)
        times[n] = cvo.timed(fn, bufs, 1, repeat)
    a, b = outs[names[0]][0], outs[names[1]][0]
    err = float(np.abs(a - b).max() / max(float(np.abs(b).max()), 1e-30))
    return dict(
        label=label, new=names[0], old=names[1], t_new=times[names[0]], t_old=times[names[1]], err=err
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="yolo")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--skip-convs", action="store_true", help="only the softmax and copy rows (yolo)")
    args = ap.parse_args()
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    isa = cvo.host_isa()
    m = cvo.machine()
    print(f"# {m['date']}  cpu={m['cpu']} ({llvm.get_host_cpu_name()})  load avg {m['load']}")
    rows = []
    rng = np.random.default_rng(0)
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as d:
            if args.skip_convs:
                break
            _path, model = cvo.lower(name, d)
            seen: dict[str, tuple[Any, int]] = {}
            for o in model.module.walk_ops():
                if o.name == "tpu.Conv" and "3x3/1" in cvo.describe(o) and " dw" not in cvo.describe(o):
                    key = cvo.describe(o)
                    seen[key] = (seen[key][0], seen[key][1] + 1) if key in seen else (o, 1)
            for key, (o, count) in seen.items():
                if not by_name("winograd_f32").matches(o, isa):
                    continue
                x = rng.standard_normal(tuple(o.input.type.shape)).astype(np.float32)
                r = compare(
                    f"{name} {key} (x{count})", o, isa, ["winograd_f32", "conv_f32"], [x], args.repeat
                )
                r["macs"] = int(np.prod(o.output.type.shape)) * int(np.prod(o.filter.type.shape[1:]))
                rows.append(r)
                print(r, flush=True)
    if "yolo" in args.models.split(","):
        xs = (1, 16, 4, 8400)
        sm = op("tpu.Softmax", [t(xs, "f32")], t(xs, "f32"), "axis = 1 : i64, log = false")
        x = rng.standard_normal(xs).astype(np.float32)
        rows.append(
            compare(
                "yolo head Softmax 1x16x4x8400 axis 1",
                sm,
                isa,
                ["softmax_f32", "generic.softmax"],
                [x],
                args.repeat,
            )
        )
        split = build(
            "tpu.Split",
            [t((1, 32, 160, 160), "f32"), ("const", dense(np.array([16, 16], np.int64)), t((2,), "i64"))],
            [t((1, 16, 160, 160), "f32")] * 2,
            "axis = 1 : i64",
        )
        x = rng.standard_normal((1, 32, 160, 160)).astype(np.float32)
        rows.append(
            compare(
                "yolo C2f Split 1x32x160x160 -> 2 x 16",
                split,
                isa,
                ["run_copy", "generic.gather"],
                [x],
                args.repeat,
            )
        )
        for r in rows[-2:]:
            print(r, flush=True)
    if args.md:
        print("\n| layer | new template | ms | old template | ms | speed-up | max rel diff |")
        print("|---|---|---:|---|---:|---:|---:|")
        for r in rows:
            gf = f" ({2 * r['macs'] / r['t_new'] / 1e9:.0f} direct-GFLOP/s)" if "macs" in r else ""
            print(
                f"| {r['label']} | {r['new']} | {r['t_new'] * 1e3:.3f}{gf} | {r['old']} | {r['t_old'] * 1e3:.3f} | "
                f"{r['t_old'] / r['t_new']:.2f}x | {r['err']:.1e} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())

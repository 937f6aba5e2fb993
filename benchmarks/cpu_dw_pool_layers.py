"""Layer-level timings of the CPU target's depthwise-conv and pooling templates against the
templates they supersede, each kernel compiled alone for the host and called through ctypes on one
thread (``int8_harness.Compiled``), best of ``--repeat`` samples of calling-thread CPU time
(``time.thread_time``), the two templates interleaved in the same run.

Usage::

    PYTHONPATH=. python benchmarks/cpu_dw_pool_layers.py [--repeat 30] [--only pool|dw]

numpy does no timed work (OPENBLAS_CORETYPE is left alone)."""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "targets" / "npu"))
sys.path.insert(0, str(ROOT / "tests" / "targets" / "cpu" / "kernels"))

from int8_harness import Compiled, host_isa  # noqa: E402
from tpu_cases import arr, build, dense, op, per_axis, q8, t  # noqa: E402

from lamina.dialects.tpu.quantize import quantize_multiplier  # noqa: E402
from lamina.targets.cpu.kernels import by_name  # noqa: E402
from lamina.targets.cpu.lowering import np_dtype  # noqa: E402


def pool_op(kind: str, mode: str, shape: tuple[int, ...], k: int, s: int, p: int) -> Any:
    elem = "f32" if mode == "F32" else q8(True, 0.05, 0)
    oh = (shape[2] + 2 * p - k) // s + 1
    ys = (*shape[:2], oh, oh)
    attrs = [arr("kernel_shape", [k, k]), arr("strides", [s, s]), arr("pads", [p] * 4)]
    if kind == "max":
        return build("tpu.MaxPool", [t(shape, elem)], [t(ys, elem), "none"], ", ".join(attrs))
    out_e = elem
    if mode != "F32":
        mu, r = quantize_multiplier(0.05 / (0.01 * k * k))
        attrs += [arr("multiplier", [mu]), arr("rshift", [r])]
        out_e = q8(True, 0.01, 0)
    return op("tpu.AvgPool", [t(shape, elem)], t(ys, out_e), ", ".join(attrs))


def dw_op(mode: str, c: int, hw: int, k: int, s: int, relu6: bool = True) -> Any:
    rng = np.random.default_rng(0)
    p = k // 2
    o = (hw + 2 * p - k) // s + 1
    xs, ws, ys = (1, c, hw, hw), (c, 1, k, k), (1, c, o, o)
    attrs = [arr("kernel_shape", [k, k]), arr("strides", [s, s]), arr("pads", [p] * 4), "group = " + str(c)]
    if mode == "F32":
        w = rng.standard_normal(ws).astype(np.float32)
        bias = rng.standard_normal(c).astype(np.float32)
        if relu6:
            attrs += ["do_relu = true", "relu_limit = 6.0 : f64"]
        return op(
            "tpu.Conv",
            [t(xs, "f32"), ("const", dense(w), t(ws, "f32")), ("const", dense(bias), t((c,), "f32"))],
            t(ys, "f32"),
            ", ".join(attrs),
        )
    w = rng.integers(-127, 128, ws).astype(np.int8)
    bias = rng.integers(-5000, 5000, c).astype(np.int32)
    mu, r = zip(*[quantize_multiplier(float(v)) for v in rng.uniform(1e-3, 1e-2, c)])
    attrs += [arr("multiplier", mu), arr("rshift", r)]
    if relu6:
        attrs += ["do_relu = true"]
    wt = t(ws, per_axis([0.01] * c, 0))
    return op(
        "tpu.Conv",
        [
            t(xs, q8(True, 0.05, 0)),
            ("const", dense(w), wt, t(ws, "i8")),
            ("const", dense(bias), t((c,), "i32")),
        ],
        t(ys, q8(True, 0.05, 0)),
        ", ".join(attrs),
    )


def bench(o: Any, names: list[str], repeat: int) -> dict[str, float]:
    isa = host_isa()
    xs = tuple(o.operands[0].type.shape)
    rng = np.random.default_rng(1)
    dt = np_dtype(o.operands[0].type)
    x = (
        rng.standard_normal(xs).astype(np.float32)
        if dt == np.float32
        else rng.integers(-128, 128, xs).astype(dt)
    )
    ys = tuple(o.results[0].type.shape)
    comp = {n: Compiled(by_name(n), o, isa, ir_passes=True) for n in names}  # O3 IR pipeline, as the compiler
    y = np.zeros(ys, np_dtype(o.results[0].type))
    calls = {}
    for n, c in comp.items():  # buffers named by index (INT8) or accessor (F32)
        arr, keep = c.buffers({0: x, "input": x}, {0: y, "output": y}, 1)  # type: ignore[arg-type]
        calls[n] = (c.fn, arr, keep)
        c.fn(arr, 0, 1)
    best = {n: math.inf for n in names}
    for _ in range(repeat):
        for n, (fn, arr, _keep) in calls.items():
            t0 = time.thread_time()
            for _ in range(3):
                fn(arr, 0, 1)
            best[n] = min(best[n], (time.thread_time() - t0) / 3)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--only", choices=["pool", "dw"], default=None)
    a = ap.parse_args()
    rows = []
    if a.only in (None, "pool"):
        for kind, mode, shape, k, s, p, what in [
            ("max", "INT8", (1, 64, 112, 112), 3, 2, 1, "ResNet stem max pool"),
            ("max", "F32", (1, 64, 112, 112), 3, 2, 1, "ResNet stem max pool"),
            ("max", "F32", (1, 128, 20, 20), 5, 1, 2, "YOLO SPPF max pool"),
            ("max", "INT8", (1, 128, 20, 20), 5, 1, 2, "YOLO SPPF max pool"),
            ("avg", "F32", (1, 64, 56, 56), 3, 1, 1, "3x3 average"),
            ("avg", "INT8", (1, 64, 56, 56), 3, 1, 1, "3x3 average"),
        ]:
            o = pool_op(kind, mode, shape, k, s, p)
            r = bench(o, ["pool", "generic.pool"], a.repeat)
            rows.append(
                (
                    f"{what} {kind} {k}x{k}/{s} {shape[1]}x{shape[2]}x{shape[3]}",
                    mode,
                    "pool",
                    r["pool"],
                    "generic.pool",
                    r["generic.pool"],
                )
            )
    if a.only in (None, "dw"):
        for c, hw, k, s in [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 1), (144, 56, 3, 2), (192, 28, 3, 1),
                            (384, 14, 3, 1), (576, 14, 3, 2), (960, 7, 3, 1)]:  # fmt: skip
            what = f"MobileNetV2 depthwise {c}x{hw}x{hw} {k}x{k}/{s} ReLU6"
            for mode, new, old in [("F32", "depthwise_f32_direct", "depthwise_f32"),
                                   ("INT8", "int8-depthwise-planes", "int8-depthwise")]:  # fmt: skip
                r = bench(dw_op(mode, c, hw, k, s), [new, old], a.repeat)
                rows.append((what, mode, new, r[new], old, r[old]))
    print("| layer | mode | new template | us | old template | us | speed-up |")
    print("|---|---|---|---:|---|---:|---:|")
    for w, mode, new, tnew, old, told in rows:
        print(f"| {w} | {mode} | {new} | {tnew * 1e6:.1f} | {old} | {told * 1e6:.1f} | {told / tnew:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())

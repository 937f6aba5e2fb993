#!/usr/bin/env python
"""The CPU target's F32 attention kernels alone: the fused ``attention_f32`` template against the scalar
``generic.attention`` on the same ``tpu.Attention`` op, one thread (one part), compiled for this CPU.

Shapes: MiniLM-L6's attention (12 heads, 64 tokens, 32 per head) and BERT-base's (12 heads, 128
tokens, 64 per head), 4-d ``(B, H, S, D)`` with a ``(B, 1, 1, S)`` additive padding mask, as the
lowering produces them; ``--types``: the operands' element type (f32; bf16 / f16 where the CPU
converts them in vectors, else the fused template does not take them and the row says so). Timing: the calling thread's CPU time (``time.thread_time``), best of
``--repeat`` rounds of ``--inner`` calls; GFLOP/s count ``2 * H * Sq * Skv * (D + Dv)`` (the two
products; the softmax not counted). numpy does no timed work here (OPENBLAS_CORETYPE left alone).

Usage::

    python benchmarks/cpu_attention_f32.py [--types f32,bf16,f16] [--repeat 5] [--inner 20]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [
    ROOT,
    os.path.join(ROOT, "tests", "targets", "cpu", "kernels"),
    os.path.join(ROOT, "tests", "targets", "npu"),
]

SHAPES = {"MiniLM-L6 (12 x 64 x 32)": (12, 64, 32), "BERT-base (12 x 128 x 64)": (12, 128, 64)}


def compiled(template: Any, op: Any, ins: list[Any]) -> tuple[Any, Any, list[Any]]:
    """The kernel compiled for this CPU, its buffer array and the arrays it points at."""
    import llvmlite.ir as ir

    from lamina.targets.cpu.jit import KERNEL_CTYPE, LoadedCode, compile_ir, host_spec

    spec = host_spec()
    plan = template.plan(op, "k0", spec.isa)
    module = ir.Module("k0")
    template.emit(module, plan, op, spec.isa)
    obj, _ = compile_ir(str(module), spec)
    code = LoadedCode(obj, spec)
    fn = KERNEL_CTYPE(code.function("k0"))
    keep: list[Any] = [code]
    ptrs = []
    for kind, key in plan.buffers:
        if kind == "scratch":
            a = np.zeros(max(plan.scratch_bytes, 1), np.uint8)
        elif kind == "out":
            a = np.zeros(tuple(op.results[0].type.shape), np.float32).astype(ins[0].dtype)
        else:
            a = np.ascontiguousarray(ins[key])
        keep.append(a)
        ptrs.append(a.ctypes.data)
    return fn, (ctypes.c_void_p * len(ptrs))(*ptrs), keep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--types", default="f32")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--inner", type=int, default=20)
    args = ap.parse_args()
    from test_attention_f32 import attention

    from lamina.targets.cpu.jit import host_spec
    from lamina.targets.cpu.kernels import by_name

    print(
        f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} nproc {os.cpu_count()} load avg {os.getloadavg()}"
    )
    print("| attention | attention_f32 ms | GFLOP/s | generic.attention ms | GFLOP/s | speed-up |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, (h, s, d), ft in ((lb, sh, ft) for ft in args.types.split(",") for lb, sh in SHAPES.items()):
        op, ins = attention(1, h, h, s, s, d, d, "b11n", False, False, None, np.random.default_rng(0), ft)
        label = f"{label} {ft}"
        if not by_name("attention_f32").matches(op, host_spec().isa):
            print(f"| {label} | (not taken on this CPU) | | | | |")
            continue
        flops = 2 * h * s * s * (d + d)
        best = {}
        for name in ("attention_f32", "generic.attention"):
            fn, bufs, _keep = compiled(by_name(name), op, ins)
            n = args.inner if name == "attention_f32" else max(1, args.inner // 10)
            t = float("inf")
            for _ in range(args.repeat):
                c0 = time.thread_time()
                for _ in range(n):
                    fn(bufs, 0, 1)
                t = min(t, (time.thread_time() - c0) / n)
            best[name] = t
        f, g = best["attention_f32"], best["generic.attention"]
        print(
            f"| {label} | {f * 1e3:.3f} | {flops / f / 1e9:.1f} | {g * 1e3:.3f} | {flops / g / 1e9:.1f} | {g / f:.1f}x |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

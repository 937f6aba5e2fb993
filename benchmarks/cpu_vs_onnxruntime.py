#!/usr/bin/env python
"""The CPU target's FP32 kernels vs onnxruntime, both in this process, 1 and 2 threads.

For each model (``resnet18``, ``resnet50``, ``mobilenetv2`` at 1x3x224x224, built with PyTorch from
``tests/models/zoo.py``) the script lowers the ONNX model to the ``tpu`` dialect in F32 (``api.transform``
+ ``api.deploy(..., "F32", processor="cpu")``: BatchNorm folded into the convolutions, ReLU fused),
then for every ``tpu.Conv`` / ``tpu.MatMul`` picks the fast template that matches
(``lamina/targets/cpu/kernels/conv_f32.py``, ``gemm_f32.py``), compiles it alone with llvmlite for
the host CPU (``-O3`` pipeline, the host's CPU name and features) and times it standalone on a
random input with the model's real weights:

* 1 thread: ``kernel(bufs, 0, 1)`` back to back, best of ``--repeat`` batches, timed as the calling
  thread's **CPU time** (``time.thread_time``), for both engines (onnxruntime with
  ``intra_op_num_threads=1`` runs in the calling thread): the machine these figures come from is
  shared (load average ~10 on 2 cores), where wall time measures the neighbours;
* 2 threads: two Python threads each calling ``kernel(bufs, part, 2)`` back to back (ctypes
  releases the GIL; parts write disjoint bytes, so runs need no barrier between them), timed as
  the slowest part's thread CPU time per run (what the split takes when each thread has a core). There is no barrier per run,
  as a whole-model runtime would need, so the figure is the kernels' throughput with the work split.

Each kernel's output is checked once against the ``tpu`` op's ``execute`` (max error relative to the
output's scale). Reported per layer: achieved GFLOP/s (2 x MACs / time) and its share of the
machine's **measured FP32 peak**: a kernel emitted here of 24 independent ``llvm.fma.v16f32`` chains
(8 on AVX2) in a counted loop, run on 1 thread and on 2 threads at once, best of several runs.

The first whole-model figure compares **one pass over the model's conv/matmul kernels in model
order** (each reading the previous one's output where the shapes match; 2 threads: each thread its
part of every kernel, no barrier between kernels) with onnxruntime's **whole model**
(intra_op_num_threads = 1 / 2, all graph optimizations), the two timed alternately,
``4 * --repeat`` times, best of each: the kernels are most of ResNet's time, but the pooling,
residual adds and other elementwise ops are not counted on Lamina's side, so the ratio flatters
Lamina somewhat. Per layer, each kernel is timed in short batches, every round timing every layer
once, best of ``4 * --repeat`` rounds. ``--whole-model NAME=M.lamina`` (a file ``model_deploy
--processor cpu`` wrote for model NAME) also runs the compiled model through
``lamina.runtime.load(M, threads=N)`` and reports it against the same onnxruntime figure.
``--models`` also takes ``bert`` and ``yolo`` (zoo models). ``--md`` prints the summary table.

Whole compiled models in F32 and INT8 (against onnxruntime FP32 and QDQ u8s8 per-channel), with
compile time and correctness checked in the same run: ``benchmarks/cpu_whole_models.py``.

numpy is not used for any timed work (so OPENBLAS_CORETYPE is irrelevant and left alone).

Usage::

    python benchmarks/cpu_vs_onnxruntime.py [--models resnet18,resnet50,mobilenetv2] [--repeat 5]
        [--threads 1,2] [--whole-model resnet18=r18.lamina] [--md]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import llvmlite.binding as llvm  # noqa: E402
from interpreter_vs_onnxruntime import export_in_subprocess, machine  # noqa: E402
from llvmlite import ir  # noqa: E402

from lamina.targets.cpu.kernels.abi import Isa, Template  # noqa: E402
from lamina.targets.cpu.kernels.conv_f32 import ConvF32, DepthwiseF32  # noqa: E402
from lamina.targets.cpu.kernels.gemm_f32 import F32, BatchMatMulF32, Fn, MatMulF32  # noqa: E402

KERNEL = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64)
TEMPLATES: list[Template] = [ConvF32(), DepthwiseF32(), MatMulF32(), BatchMatMulF32()]
LABELS = {
    "resnet18": "ResNet-18 1x3x224x224",
    "resnet50": "ResNet-50 1x3x224x224",
    "mobilenetv2": "MobileNetV2 1x3x224x224",
    "bert": "BERT-base encoder (12x768, seq 128)",
    "yolo": "YOLO-style (w16) 1x3x640x640",
}


def host_isa() -> Isa:
    feats = {f[1:] for f in llvm.get_host_cpu_features().flatten().split(",") if f.startswith("+")}
    vb = 64 if "avx512f" in feats else 32 if "avx2" in feats else 16
    return Isa(vb, frozenset(feats))


def target_machine() -> Any:
    target = llvm.Target.from_triple(llvm.get_process_triple())
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )


def jit(module: ir.Module, symbol: str) -> tuple[Any, Any]:
    """(engine, function) of ``module`` compiled for the host (the engine owns its target machine)."""
    mod = llvm.parse_assembly(str(module))
    mod.verify()
    tm = target_machine()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
    pb.getModulePassManager().run(mod, pb)
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    return engine, KERNEL(engine.get_function_address(symbol))


def clock() -> float:
    """The calling thread's CPU time: on a shared machine the 1-thread figures count only the time
    the thread ran (onnxruntime with ``intra_op_num_threads=1`` runs in the calling thread too)."""
    return time.thread_time()


def run_parts(fn: Any, bufs: Any, nthreads: int, runs: int) -> float:
    """Seconds per run of ``runs`` back-to-back runs, the parts on ``nthreads`` threads, as CPU
    time (see :func:`clock`): one thread, the calling thread's; more, the slowest part's thread's
    (what the split takes when each thread has a core: the figure of the parts' balance and of the
    kernels' speed with the work split, not of the machine's memory bandwidth shared by two busy
    cores, which a machine this loaded cannot show)."""
    if nthreads == 1:
        t0 = clock()
        for _ in range(runs):
            fn(bufs, 0, 1)
        return (clock() - t0) / runs
    start = threading.Barrier(nthreads)
    cpu = [0.0] * nthreads

    def work(p: int) -> None:
        start.wait()
        t0 = clock()
        for _ in range(runs):
            fn(bufs, p, nthreads)
        cpu[p] = clock() - t0

    ts = [threading.Thread(target=work, args=(p,)) for p in range(nthreads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return max(cpu) / runs


def timed(fn: Any, bufs: Any, nthreads: int, repeat: int, budget: float = 0.01) -> float:
    """Best time of one run: the fastest of ``4 * repeat`` short batches (the machine may be shared:
    the best batch is the one that had the cores)."""
    one = run_parts(fn, bufs, nthreads, 1)  # warm-up and size the batch
    runs = max(1, min(2000, int(budget / max(one, 1e-7))))
    return min(run_parts(fn, bufs, nthreads, runs) for _ in range(4 * repeat))


# ---- the machine's FP32 peak ----------------------------------------------------------------------


def fma_peak(isa: Isa, threads: int, repeat: int) -> float:
    """GFLOP/s of 24 (AVX2: 12) independent FMA chains per thread, ``threads`` threads at once."""
    lanes = max(4, isa.vector_bytes // 4)
    nacc = 24 if isa.vector_bytes >= 64 else 12
    m = ir.Module()
    fn = Fn(m, "peak")
    out = fn.buf(0)
    iters = fn.b.load(fn.buf(1), typ=ir.IntType(64), align=8)
    mul, add = fn.vconst(0.999999, lanes), fn.vconst(1e-7, lanes)

    def body(_i: Any, accs: list[Any]) -> list[Any]:
        for _ in range(4):
            accs = [fn.fma(a, mul, add) for a in accs]
        return accs

    accs = fn.loop(0, iters, body, [fn.vconst(1.0 + i * 1e-3, lanes) for i in range(nacc)])
    total = accs[0]
    for a in accs[1:]:
        total = fn.b.fadd(total, a)
    fn.vstore(total, fn.at(out, fn.mul(fn.part, lanes), F32))
    fn.ret()
    _engine, k = jit(m, "peak")
    sink = np.zeros(lanes * threads, np.float32)
    n = np.array([50_000], np.int64)  # ~5 ms a run: short runs, the best of many (a shared machine)
    bufs = (ctypes.c_void_p * 2)(sink.ctypes.data, n.ctypes.data)
    best = min(run_parts(k, bufs, threads, 1) for _ in range(20 * repeat))
    return threads * int(n[0]) * 4 * nacc * lanes * 2 / best / 1e9


# ---- layers ----------------------------------------------------------------------------------------------


@dataclass
class Layer:
    name: str
    shape: str
    template: str
    macs: int
    compile_ms: float
    err: float
    fn: Any = None
    bufs: Any = None
    keep: list[Any] = field(default_factory=list)
    times: dict[int, float] = field(default_factory=dict)
    count: int = 1


def describe(op: Any) -> str:
    if op.name == "tpu.Conv":
        xs, ws = op.input.type.shape, op.filter.type.shape
        k = "x".join(str(d) for d in ws[2:])
        s = op.attr("strides") or [1, 1]
        dw = " dw" if int(op.attr("group")) > 1 else ""
        return f"{xs[1]}->{ws[0]} {k}/{s[0]}{dw} @{xs[2]}x{xs[3]}"
    a, b = op.input.type.shape, op.right.type.shape
    return f"matmul {list(a)}x{list(b)}"


def compile_layer(op: Any, isa: Isa, max_threads: int) -> Layer | None:
    """The op's fast kernel compiled alone, its buffers allocated, its output checked once."""
    template = next((t for t in TEMPLATES if t.matches(op, isa)), None)
    if template is None:
        return None
    t0 = clock()  # CPU time: plan (packing) + emit + LLVM -O3 + machine code, all in this thread
    plan = template.plan(op, "kernel", isa)
    module = ir.Module()
    template.emit(module, plan, op, isa)
    engine, fn = jit(module, "kernel")
    compile_ms = (clock() - t0) * 1e3
    rng = np.random.default_rng(0)
    x = rng.standard_normal(op.input.type.shape).astype(np.float32)
    y = np.zeros(op.output.type.shape, np.float32)
    arrays: dict[Any, np.ndarray] = {"input": x, "output": y}
    if ("in", "right") in plan.buffers:
        arrays["right"] = rng.standard_normal(op.right.type.shape).astype(np.float32)
    scratch = np.zeros(plan.scratch_bytes * max_threads + 64, np.uint8)
    ptrs = []
    for kind, key in plan.buffers:
        a = plan.weights[key] if kind == "weight" else scratch if kind == "scratch" else arrays[key]
        ptrs.append(a.ctypes.data)
    bufs = (ctypes.c_void_p * len(ptrs))(*ptrs)
    fn(bufs, 0, 1)
    from lamina.ir.constants import constant_array

    ins = []
    for v in op.operands:
        if v is op.input:
            ins.append(x)
        elif "right" in arrays and v is op.right:
            ins.append(arrays["right"])
        else:
            ins.append(constant_array(v))
    ref = op.execute(ins)[0]
    err = float(np.abs(ref - y).max() / max(float(np.abs(ref).max()), 1e-30))
    return Layer(
        str(op.location),
        describe(op),
        template.name,
        plan.macs,
        compile_ms,
        err,
        fn,
        bufs,
        [engine, plan, arrays, scratch],
    )


def measure_layers(layers: list[Layer], threads: list[int], repeat: int) -> None:
    """Each layer's best time per run over ``4 * repeat`` rounds, every round timing every layer
    once (a short batch), so that each layer's samples spread over the whole measurement."""
    runs = {}
    for lay in layers:
        one = run_parts(lay.fn, lay.bufs, 1, 1)
        runs[id(lay)] = max(1, min(2000, int(0.01 / max(one, 1e-7))))
    for n in threads:
        for lay in layers:
            lay.times[n] = float("inf")
        for _ in range(4 * repeat):
            for lay in layers:
                lay.times[n] = min(lay.times[n], run_parts(lay.fn, lay.bufs, n, runs[id(lay)]))


def chain(sequence: list[Layer]) -> list[tuple[Any, Any]]:
    """(kernel, bufs) per occurrence in model order, each writing its own output, reading the
    previous kernel's output when the shapes match (activations flow through the caches as in the
    model), else its own input."""
    out: list[tuple[Any, Any]] = []
    prev: np.ndarray | None = None
    for lay in sequence:
        _engine, plan, arrays, scratch = lay.keep[:4]
        x = arrays["input"]
        if prev is not None and prev.shape == x.shape:
            x = prev
        y = np.zeros_like(arrays["output"])
        lay.keep.append((x, y))
        ptrs = []
        for kind, key in plan.buffers:
            if kind == "weight":
                ptrs.append(plan.weights[key].ctypes.data)
            elif kind == "scratch":
                ptrs.append(scratch.ctypes.data)
            else:
                ptrs.append({"input": x, "output": y}.get(key, arrays.get(key)).ctypes.data)
        out.append((lay.fn, (ctypes.c_void_p * len(ptrs))(*ptrs)))
        prev = y
    return out


def run_sequence(sequence: list[tuple[Any, Any]], nthreads: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one pass over the model's kernels in order (each thread its part of
    each; no barrier between kernels). One thread: the CPU time twice; more: the wall time and the
    slowest thread's CPU time."""

    def one_pass(p: int) -> None:
        for fn, bufs in sequence:
            fn(bufs, p, nthreads)

    if nthreads == 1:
        t0 = clock()
        one_pass(0)
        t = clock() - t0
        return t, t
    start = threading.Barrier(nthreads + 1)
    cpu = [0.0] * nthreads

    def work(p: int) -> None:
        start.wait()
        t0 = clock()
        one_pass(p)
        cpu[p] = clock() - t0

    ts = [threading.Thread(target=work, args=(p,)) for p in range(nthreads)]
    for th in ts:
        th.start()
    start.wait()
    t0 = time.perf_counter()
    for th in ts:
        th.join()
    return time.perf_counter() - t0, max(cpu)


def lower(name: str, workdir: str) -> Any:
    import lamina.api as api

    path = export_in_subprocess(name)
    mlir = os.path.join(workdir, f"{name}.mlir")
    api.transform(path, model_name=name, mlir=mlir)
    api.deploy(api.load(mlir), "F32", processor="cpu", output=os.path.join(workdir, f"{name}_f32"))
    return path, api.load(os.path.join(workdir, f"{name}_f32_tpu.mlir"))


def ort_sessions(path: str, name: str, threads: list[int]) -> tuple[dict[int, Any], dict[str, Any]]:
    import onnxruntime as ort
    import zoo

    feeds_list = zoo.inputs(name, "full")[0]
    sessions: dict[int, Any] = {}
    feeds: dict[str, Any] = {}
    for n in threads:
        so = ort.SessionOptions()
        so.intra_op_num_threads = n
        so.inter_op_num_threads = 1
        so.log_severity_level = 3
        sessions[n] = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feeds = dict(zip([i.name for i in sessions[n].get_inputs()], feeds_list))
        sessions[n].run(None, feeds)
    return sessions, feeds


def whole_model(path: str, feeds: dict[str, Any], threads: list[int], repeat: int) -> dict[int, float]:
    """Latency of a compiled ``.lamina`` model through ``lamina.runtime`` per thread count, best of
    ``4 * repeat`` runs: one thread as the process's CPU time (the runtime may run its one part on
    a pool thread; onnxruntime's sessions are idle meanwhile), more as wall time."""
    import lamina.runtime as rt

    out = {}
    for n in threads:
        m = rt.load(path, threads=n)
        m.run(feeds)
        tick = time.process_time if n == 1 else time.perf_counter
        best = float("inf")
        for _ in range(4 * repeat):
            t0 = tick()
            m.run(feeds)
            best = min(best, tick() - t0)
        out[n] = best
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet18,resnet50,mobilenetv2")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--whole-model", action="append", default=[], metavar="NAME=M.lamina")
    ap.add_argument("--md", action="store_true", help="print the RESULTS.md tables")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    bad = [w for w in args.whole_model if "=" not in w or not os.path.isfile(w.split("=", 1)[1])]
    if bad:
        print(f"cpu_vs_onnxruntime: --whole-model expects NAME=PATH of an existing file, got {bad[0]!r}")
        return 1
    compiled = dict(w.split("=", 1) for w in args.whole_model)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    isa = host_isa()
    m = machine()
    print(
        f"# {m['date']}  nproc={m['nproc']}  cpu={m['cpu']} ({llvm.get_host_cpu_name()}, {isa.vector_bytes}-byte "
        f"vectors)  onnxruntime {m['onnxruntime']}  load avg {m['load']}"
    )
    peak = {n: max(fma_peak(isa, n, args.repeat) for _ in range(2)) for n in threads}
    print(
        "# measured FP32 peak (FMA-chain kernel): "
        + ", ".join(f"{n} thread(s) {peak[n]:.1f} GFLOP/s" for n in threads)
    )
    summary = []
    for name in args.models.split(","):
        with tempfile.TemporaryDirectory() as d:
            path, model = lower(name, d)
            sessions, feeds = ort_sessions(path, name, threads)
            layers: dict[str, Layer] = {}
            sequence: list[Layer] = []
            for op in model.module.walk_ops():
                if op.name not in ("tpu.Conv", "tpu.MatMul"):
                    continue
                key = describe(op) + f" relu={bool(op.attr('do_relu'))}"
                if key in layers:
                    layers[key].count += 1
                    sequence.append(layers[key])
                    continue
                layer = compile_layer(op, isa, max(threads))
                if layer is None:
                    print(f"  (no fast template: {describe(op)})")
                    continue
                layers[key] = layer
                sequence.append(layer)
            distinct = list(layers.values())
            measure_layers(distinct, threads, args.repeat)
            # the model's kernels in order vs onnxruntime's whole model, interleaved, best of each
            chained = chain(sequence)
            ort_t = {n: float("inf") for n in threads}
            seq_t = {n: float("inf") for n in threads}
            seq_cpu = {n: float("inf") for n in threads}
            for _ in range(4 * args.repeat):
                for n in threads:
                    tick = clock if n == 1 else time.perf_counter
                    t0 = tick()
                    sessions[n].run(None, feeds)
                    ort_t[n] = min(ort_t[n], tick() - t0)
                    wall, cpu = run_sequence(chained, n)
                    seq_t[n] = min(seq_t[n], wall)
                    seq_cpu[n] = min(seq_cpu[n], cpu)
            print(f"\n## {LABELS.get(name, name)}: {len(sequence)} kernels, {len(distinct)} distinct")
            print(
                "| layer | x | template | GFLOP | compile ms | max rel err | "
                + " | ".join(f"{n}T GFLOP/s (% peak)" for n in threads)
                + " |"
            )
            print("|---|---:|---|---:|---:|---:|" + "---:|" * len(threads))
            for lay in distinct:
                cells = " | ".join(
                    f"{2 * lay.macs / lay.times[n] / 1e9:.1f} ({100 * 2 * lay.macs / lay.times[n] / 1e9 / peak[n]:.0f} %)"
                    for n in threads
                )
                print(
                    f"| {lay.shape} | {lay.count} | {lay.template} | {2 * lay.macs / 1e9:.3f} | {lay.compile_ms:.0f} | "
                    f"{lay.err:.1e} | {cells} |"
                )
            total = {n: sum(lay.times[n] * lay.count for lay in distinct) for n in threads}
            flops = sum(2 * lay.macs for lay in sequence)
            comp = sum(lay.compile_ms for lay in distinct)
            lam_whole = whole_model(compiled[name], feeds, threads, args.repeat) if name in compiled else None
            for n in threads:
                line = (
                    f"{name} {n}T: onnxruntime whole model {ort_t[n] * 1e3:.2f} ms; Lamina's conv/matmul kernels in "
                    f"sequence {seq_t[n] * 1e3:.2f} ms (ratio {seq_t[n] / ort_t[n]:.2f}x; "
                    f"{flops / seq_t[n] / 1e9:.0f} GFLOP/s, {100 * flops / seq_t[n] / 1e9 / peak[n]:.0f} % of peak), "
                    f"best layer times summed {total[n] * 1e3:.2f} ms"
                    + (f"; slowest thread's CPU time {seq_cpu[n] * 1e3:.2f} ms" if n > 1 else "")
                )
                if lam_whole is not None:
                    line += f"; Lamina whole model {lam_whole[n] * 1e3:.2f} ms, ratio {lam_whole[n] / ort_t[n]:.2f}x"
                print(line, flush=True)
                summary.append(
                    (
                        name,
                        n,
                        ort_t[n],
                        seq_t[n],
                        seq_cpu[n],
                        lam_whole[n] if lam_whole else None,
                        flops,
                        comp,
                    )
                )
    if args.md:
        print(
            "\n| model | threads | onnxruntime whole model (ms) | Lamina conv/matmul kernels in sequence (ms) | ratio "
            "| slowest thread's CPU (ms) | kernels' GFLOP/s (% of peak) | Lamina whole model (ms) "
            "| compile, distinct kernels (CPU s) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, n, t_ort, t_seq, t_cpu, t_whole, flops, comp in summary:
            whole = "—" if t_whole is None else f"{t_whole * 1e3:.2f} ({t_whole / t_ort:.2f}x)"
            cpu = "(same)" if n == 1 else f"{t_cpu * 1e3:.2f}"
            best = t_seq if n == 1 else t_cpu
            print(
                f"| {LABELS.get(name, name)} | {n} | {t_ort * 1e3:.2f} | {t_seq * 1e3:.2f} | {t_seq / t_ort:.2f}x | {cpu} | "
                f"{flops / best / 1e9:.0f} ({100 * flops / best / 1e9 / peak[n]:.0f} %) | {whole} | {comp / 1e3:.1f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

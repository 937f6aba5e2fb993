"""The CPU target's INT8 kernel templates (``lamina/targets/cpu/kernels/gemm_int8.py``) on one
thread: per-layer GOP/s (2 x MACs / s) on ResNet-18's convolution shapes, against the machine's
INT8 peak measured here (a loop of independent ``vpdpbusd`` emitted the same way), with compile
times; optionally onnxruntime's QDQ u8s8 per-channel ResNet-18 (``quantize_static``) whole-model
time on one thread, as the reference for the sum of the layers.

    python benchmarks/cpu_int8_kernels.py [--repeat 20] [--inner 1] [--rounds 3] [--ort] [--size 224]
        [--threads 1] [--markdown] [--net resnet18|resnet50|mobilenetv2]

Timings: best of ``--rounds`` x ``--repeat`` runs of ``--inner`` calls each (the layers timed in
turn, round after round; the peak before and after), one thread by its CPU time
(``time.thread_time``, as the cores here are shared with other processes), several by wall time;
the peak, the layers and onnxruntime run in one process, one after the other. ``--threads N`` calls the kernel's parts from N Python threads
(ctypes releases the GIL) to show the split scales; the headline figures are one thread.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import os
import platform
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "targets", "npu"))
sys.path.insert(0, os.path.join(ROOT, "tests", "targets", "cpu", "kernels"))

#: one thread is timed by its own CPU time (``time.thread_time``: this machine's cores are shared
#: with other processes, and the time a thread waits for a core is not the kernel's); several
#: threads by wall time
CLOCK = time.thread_time

#: ResNet-18's convolutions at 224x224: (name, Cin, H, Cout, k, stride, pad), each counted once
RESNET18_CONVS = [
    ("conv1 7x7/2", 3, 224, 64, 7, 2, 3),
    ("layer1 3x3", 64, 56, 64, 3, 1, 1),
    ("layer2.0 3x3/2", 64, 56, 128, 3, 2, 1),
    ("layer2.0 down 1x1/2", 64, 56, 128, 1, 2, 0),
    ("layer2 3x3", 128, 28, 128, 3, 1, 1),
    ("layer3.0 3x3/2", 128, 28, 256, 3, 2, 1),
    ("layer3.0 down 1x1/2", 128, 28, 256, 1, 2, 0),
    ("layer3 3x3", 256, 14, 256, 3, 1, 1),
    ("layer4.0 3x3/2", 256, 14, 512, 3, 2, 1),
    ("layer4.0 down 1x1/2", 256, 14, 512, 1, 2, 0),
    ("layer4 3x3", 512, 7, 512, 3, 1, 1),
]
#: how many times each shape occurs in ResNet-18
RESNET18_COUNT = {"layer1 3x3": 4, "layer2 3x3": 3, "layer3 3x3": 3, "layer4 3x3": 3}

#: the convolutions of ResNet-50 and MobileNetV2 at 224x224 that take a fused epilogue or are the
#: largest of their kind, ``(name, Cin, H, Cout, k, stride, pad, relu, residual, count)``: ``relu``
#: none / relu / limit (ReLU6), ``residual`` the conv takes the block's ``tpu.Add`` and the ReLU
#: ``tpu.Lut`` after it (as the compiler fuses them)
NETS: dict[str, list[tuple[str, int, int, int, int, int, int, str, bool, int]]] = {
    "resnet50": [
        ("stem 7x7/2", 3, 224, 64, 7, 2, 3, "relu", False, 1),
        ("s1 reduce 1x1", 256, 56, 64, 1, 1, 0, "relu", False, 2),
        ("s1 3x3", 64, 56, 64, 3, 1, 1, "relu", False, 3),
        ("s2 3x3", 128, 28, 128, 3, 1, 1, "relu", False, 3),
        ("s1 expand 1x1 + add", 64, 56, 256, 1, 1, 0, "none", True, 3),
        ("s2 expand 1x1 + add", 128, 28, 512, 1, 1, 0, "none", True, 3),
        ("s3 reduce 1x1", 1024, 14, 256, 1, 1, 0, "relu", False, 5),
        ("s3 3x3", 256, 14, 256, 3, 1, 1, "relu", False, 5),
        ("s4 3x3", 512, 7, 512, 3, 1, 1, "relu", False, 2),
        ("s3 expand 1x1 + add", 256, 14, 1024, 1, 1, 0, "none", True, 5),
        ("s4 expand 1x1 + add", 512, 7, 2048, 1, 1, 0, "none", True, 2),
    ],
    "mobilenetv2": [
        ("stem 3x3/2", 3, 224, 32, 3, 2, 1, "limit", False, 1),
        ("b2 expand 1x1", 16, 112, 96, 1, 1, 0, "limit", False, 1),
        ("b3 expand 1x1", 24, 56, 144, 1, 1, 0, "limit", False, 2),
        ("b3 project 1x1 + add", 144, 56, 24, 1, 1, 0, "none", True, 1),
        ("b12 project 1x1 + add", 576, 14, 96, 1, 1, 0, "none", True, 2),
        ("b18 1x1", 320, 7, 1280, 1, 1, 0, "limit", False, 1),
    ],
}


def vnni_peak(inner: int = 200_000, repeat: int = 5) -> tuple[float, float]:
    """The INT8 peak of one core in GOP/s: a loop of 24 independent ``vpdpbusd`` (zmm, 64 MACs
    each) per iteration, compiled for the host; returns ``(GOP/s, compile ms)``."""
    import llvmlite.binding as llvm
    from int8_harness import _init
    from llvmlite import ir

    _init()
    t0 = time.perf_counter()
    i8, i32, i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
    v32, v8 = ir.VectorType(i32, 16), ir.VectorType(i8, 64)
    mod = ir.Module(name="peak")
    dp = ir.Function(mod, ir.FunctionType(v32, [v32, v8, v8]), "llvm.x86.avx512.vpdpbusd.512")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [v32.as_pointer(), i64]), "peak")
    out, n = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    seed = b.load(out, align=64)
    ua = b.bitcast(seed, v8)
    sa = b.bitcast(b.add(seed, ir.Constant(v32, [ir.Constant(i32, 3)] * 16)), v8)
    pre = b.block
    hdr = b.append_basic_block("h")
    body = b.append_basic_block("b")
    ext = b.append_basic_block("e")
    b.branch(hdr)
    b.position_at_end(hdr)
    iv = b.phi(i64)
    iv.add_incoming(ir.Constant(i64, 0), pre)
    accs = []
    for k in range(24):
        p = b.phi(v32)
        p.add_incoming(ir.Constant(v32, [ir.Constant(i32, k)] * 16), pre)
        accs.append(p)
    b.cbranch(b.icmp_signed("<", iv, n), body, ext)
    b.position_at_end(body)
    new = [b.call(dp, [a, ua, sa]) for a in accs]
    iv.add_incoming(b.add(iv, ir.Constant(i64, 1)), body)
    for p, v in zip(accs, new):
        p.add_incoming(v, body)
    b.branch(hdr)
    b.position_at_end(ext)
    s = accs[0]
    for a in accs[1:]:
        s = b.add(s, a)
    b.store(s, out, align=64)
    b.ret_void()
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )
    m = llvm.parse_assembly(str(mod))
    ee = llvm.create_mcjit_compiler(m, tm)
    ee.finalize_object()
    cms = (time.perf_counter() - t0) * 1e3
    f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)(ee.get_function_address("peak"))
    raw = np.zeros(32, np.int32)
    buf = raw[(-raw.ctypes.data % 64) // 4 :][:16]
    f(buf.ctypes.data, 1000)
    best = 1e9
    for _ in range(repeat):
        t = CLOCK()
        f(buf.ctypes.data, inner)
        best = min(best, CLOCK() - t)
    return 2 * 24 * 64 * inner / best / 1e9, cms


def conv_op(
    cin: int, h: int, cout: int, k: int, s: int, p: int, signed: bool, seed: int = 0, relu: str = "relu"
) -> tuple[Any, np.ndarray]:
    """A ``tpu.Conv`` INT8 (per-channel weights and requant; ``relu``: ``relu`` — do_relu into u8 —,
    ``limit`` — a ReLU6 —, ``none`` — int8 out) and an input."""
    from tpu_cases import arr, dense, op, per_axis, q8, t

    from lamina.dialects.tpu.quantize import quantize_multiplier

    rng = np.random.default_rng(seed)
    xs, ws = (1, cin, h, h), (cout, cin, k, k)
    oh = (h + 2 * p - k) // s + 1
    # trained layers' int8 weights are small (uniform ones over [-127, 127] would put ResNet's 256- and
    # 512-channel 3x3 convs past winograd_int8's exactness bound): normal, sigma 20, clipped
    w = np.clip(np.round(rng.normal(0, 20, ws)), -127, 127).astype(np.int8)
    bias = rng.integers(-5000, 5000, (cout,)).astype(np.int32)
    pairs = [quantize_multiplier(float(r)) for r in rng.uniform(1e-4, 1e-2, cout)]
    attrs = [arr("strides", [s, s]), arr("pads", [p] * 4), arr("multiplier", [a for a, _ in pairs]),
             arr("rshift", [r for _, r in pairs])] + (["do_relu = true"] if relu != "none" else [])  # fmt: skip
    if relu == "limit":
        attrs.append("relu_limit = 6.0")
    o = op(
        "tpu.Conv",
        [
            t(xs, q8(signed, 0.05, 0)),
            ("const", dense(w), t(ws, per_axis([0.01] * cout, 0)), t(ws, "i8")),
            ("const", dense(bias), t((cout,), "i32")),
        ],
        t((1, cout, oh, oh), q8(relu == "none", 0.02 if relu != "limit" else 0.03, 0)),
        ", ".join(attrs),
    )
    x = (rng.integers(-128, 128, xs) if signed else rng.integers(0, 256, xs)).astype(
        np.int8 if signed else np.uint8
    )
    return o, x


def time_kernel(
    c: Any, x: np.ndarray, out_shape: Sequence[int], threads: int, inner: int, repeat: int
) -> float:
    out = np.zeros(tuple(out_shape), np.uint8)
    arr, keep = c.buffers([x], [out], threads)

    def run() -> None:
        if threads == 1:
            for _ in range(inner):
                c.fn(arr, 0, 1)
            return
        ths = []
        for p in range(threads):

            def work(p: int = p) -> None:
                for _ in range(inner):
                    c.fn(arr, p, threads)

            ths.append(threading.Thread(target=work))
        for th in ths:
            th.start()
        for th in ths:
            th.join()

    run()
    clock = CLOCK if threads == 1 else time.perf_counter
    best = 1e9
    for _ in range(repeat):
        t0 = clock()
        run()
        best = min(best, (clock() - t0) / inner)
    del keep
    return best


def resnet18_layers(
    size: int, threads: int, repeat: int, inner: int, rounds: int = 3
) -> list[dict[str, Any]]:
    """GOP/s of the INT8 conv templates on ResNet-18's convolutions (input size ``size``): every
    layer compiled and checked bit-exact first, then all timed in ``rounds`` rounds (best kept),
    so that a layer is not judged by one unlucky moment of the shared machine."""
    from int8_harness import Compiled, host_isa

    from lamina.targets.cpu.kernels import select

    isa = host_isa()
    rows = []
    for name, cin, h, cout, k, s, p in RESNET18_CONVS:
        h = h * size // 224
        o, x = conv_op(cin, h, cout, k, s, p, signed=False)
        tpl = select(o, isa)  # as the compiler picks (the stem: int8-conv-im2col)
        c = Compiled(tpl, o, isa)
        ref = o.execute([x, _const(o, 1), _const(o, 2)])[0]
        y = c([x], ref.shape, ref.dtype)
        assert np.array_equal(y, ref), f"{name}: not bit-exact"
        alt = _alternative(o, isa, tpl, [x], ref)
        rows.append(
            {
                "layer": name,
                "shape": f"{cin}x{h}x{h} -> {cout}, {k}x{k}/{s}",
                "template": tpl.name,
                "macs": c.plan.macs,
                "compile_ms": c.compile_ms,
                "count": RESNET18_COUNT.get(name, 1),
                "run": (c, x, ref.shape),
                "ms": math.inf,
                **alt,
            }
        )
    for _ in range(rounds):
        for r in rows:
            c, x, shape = r["run"]
            r["ms"] = min(r["ms"], time_kernel(c, x, shape, threads, inner, repeat) * 1e3)
            if "alt_c" in r:
                r["alt_ms"] = min(
                    r["alt_ms"], time_kernel(r["alt_c"], x, shape, threads, inner, repeat) * 1e3
                )
    for r in rows:
        r.pop("alt_c", None)
        r["gops"] = 2 * r["macs"] / r["ms"] / 1e6
        del r["run"]
    return rows


def net_layers(net: str, repeat: int, inner: int, rounds: int = 3) -> list[dict[str, Any]]:
    """As :func:`resnet18_layers` for :data:`NETS` ``[net]``: each layer (with its fused residual add
    and Lut where the model has them) compiled by the template the compiler picks, checked bit-exact
    against the ops' ``execute`` chained, then timed in rounds."""
    from int8_harness import Compiled, host_isa
    from test_gemm_int8_epilogue import with_residual

    from lamina.targets.cpu.kernels import select

    isa = host_isa()
    rows = []
    for name, cin, h, cout, k, s, p, relu, res, count in NETS[net]:
        o, x = conv_op(cin, h, cout, k, s, p, signed=False, relu=relu)
        others: list[tuple[Any, np.ndarray]] = []
        ref = o.execute([x, _const(o, 1), _const(o, 2)])[0]
        if res:
            rng = np.random.default_rng(7)
            o, add, lut = with_residual(o, rng, True, 0, (True, 0), (1 << 30, 3 << 28), 0, False, "unsigned")
            r = rng.integers(-128, 128, ref.shape).astype(np.int8)
            others = [(add.operands[1], r)]
            ref = lut.execute([add.execute([ref, r])[0]])[0]
        tpl = select(o, isa)
        c = Compiled(tpl, o, isa)
        y = c([x], ref.shape, ref.dtype, 1, others)
        assert np.array_equal(y, ref), f"{name}: not bit-exact"
        alt = _alternative(o, isa, tpl, [x], ref, others)
        rows.append({"layer": name, "shape": f"{cin}x{h}x{h} -> {cout}, {k}x{k}/{s}" + (" + add + lut" if res else ""),
                     "template": tpl.name, "macs": c.plan.macs, "compile_ms": c.compile_ms, "count": count,
                     "run": (c, x, ref, others), "ms": math.inf, **alt})  # fmt: skip
    for _ in range(rounds):
        for r_ in rows:
            c, x, ref, others = r_["run"]
            for key, cc in (("ms", c), ("alt_ms", r_.get("alt_c"))):
                if cc is None:
                    continue
                out = np.zeros(ref.shape, ref.dtype)
                arr, keep = cc.buffers([x], [out], 1, others)
                cc.fn(arr, 0, 1)
                for _ in range(repeat):
                    t0 = CLOCK()
                    for _ in range(inner):
                        cc.fn(arr, 0, 1)
                    r_[key] = min(r_[key], (CLOCK() - t0) / inner * 1e3)
                del keep
    for r_ in rows:
        r_.pop("alt_c", None)
        r_["gops"] = 2 * r_["macs"] / r_["ms"] / 1e6
        del r_["run"]
    return rows


def _alternative(
    o: Any, isa: Any, tpl: Any, ins: list[np.ndarray], ref: np.ndarray, others: Any = ()
) -> dict[str, Any]:
    """For a layer ``winograd_int8`` runs: the template the compiler would take without it, compiled
    (checked bit-exact) to be timed beside it (``alt_c``, ``alt``, ``alt_ms``); else nothing."""
    from int8_harness import Compiled

    from lamina.targets.cpu.kernels import candidates

    if tpl.name != "winograd_int8":
        return {}
    nxt = next(t for t in candidates(o, isa) if t.name != tpl.name)
    c = Compiled(nxt, o, isa)
    assert np.array_equal(c(ins, ref.shape, ref.dtype, 1, others), ref), f"{nxt.name}: not bit-exact"
    return {"alt_c": c, "alt": nxt.name, "alt_ms": math.inf}


def _const(o: Any, i: int) -> np.ndarray:
    from lamina.ir.constants import constant_array

    return constant_array(o.operands[i])


def ort_resnet18_int8(size: int, threads: int, repeat: int) -> float | None:
    """Milliseconds of onnxruntime's QDQ u8s8 per-channel ResNet-18 (``quantize_static``, MinMax
    calibration on 8 sample crops) at ``threads`` intra-op threads, best of ``repeat`` x 20 runs."""
    try:
        import onnxruntime as ort
        from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    except ImportError:
        return None
    import logging

    import data

    from tests.models import zoo

    logging.getLogger().setLevel(logging.ERROR)
    path = zoo.export("resnet18", "small" if size < 224 else "full")
    calib = [x[None] for x in data.imagenet_inputs(8, size, "calibration")]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(calib)

        def get_next(self) -> dict[str, np.ndarray] | None:
            s = next(self.it, None)
            return None if s is None else {"input": s}

    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "r18_int8.onnx")
        quantize_static(path, out, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)  # fmt: skip
        so = ort.SessionOptions()
        so.log_severity_level = 3
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"])
        feed = {"input": calib[0]}
        for _ in range(5):
            sess.run(None, feed)
        clock = CLOCK if threads == 1 else time.perf_counter
        best = 1e9
        for _ in range(repeat):
            t0 = clock()
            for _ in range(20):
                sess.run(None, feed)
            best = min(best, (clock() - t0) / 20)
    return best * 1e3


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--inner", type=int, default=1)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--ort", action="store_true", help="also time onnxruntime's QDQ INT8 ResNet-18")
    p.add_argument("--markdown", action="store_true")
    p.add_argument(
        "--net", default="resnet18", choices=["resnet18", *NETS],
        help="the layer set: ResNet-18's convolutions (default), or ResNet-50's / MobileNetV2's largest "
        "and fused-epilogue ones (224x224, one thread)",
    )  # fmt: skip
    a = p.parse_args(argv)
    peak, peak_ms = vnni_peak()
    if a.net != "resnet18":
        rows = net_layers(a.net, a.repeat, a.inner, a.rounds)
    else:
        rows = resnet18_layers(a.size, a.threads, a.repeat, a.inner, a.rounds)
    peak = max(peak, vnni_peak()[0])
    total_ms = sum(r["ms"] * r["count"] for r in rows)
    print(
        f"# {platform.processor() or platform.machine()}, python {platform.python_version()}, threads {a.threads}"
    )
    print(f"# measured INT8 peak (24 independent vpdpbusd zmm per iteration, one thread): {peak:.0f} GOP/s "
          f"(compiled in {peak_ms:.0f} ms)")  # fmt: skip
    bar = "|" if a.markdown else ""
    print(
        f"{bar} layer {bar} shape {bar} template {bar} x {bar} ms {bar} GOP/s {bar} % of peak {bar} compile ms {bar} "
        f"without winograd_int8 {bar}"
    )
    if a.markdown:
        print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        alt = f"{r['alt']} {r['alt_ms']:.3f} ms ({r['alt_ms'] / r['ms']:.2f}x)" if "alt" in r else ""
        print(f"{bar} {r['layer']} {bar} {r['shape']} {bar} {r['template']} {bar} {r['count']} {bar} {r['ms']:.3f} {bar} {r['gops']:.0f} {bar} "
              f"{100 * r['gops'] / peak:.0f} % {bar} {r['compile_ms']:.0f} {bar} {alt} {bar}")  # fmt: skip
    macs = sum(r["macs"] * r["count"] for r in rows)
    print(f"# all {a.net} convolutions listed (x count): {total_ms:.2f} ms, {2 * macs / total_ms / 1e6:.0f} GOP/s "
          f"({100 * 2 * macs / total_ms / 1e6 / peak:.0f} % of peak)")  # fmt: skip
    if a.ort:
        ort_ms = ort_resnet18_int8(a.size, a.threads, a.repeat)
        if ort_ms is None:
            print("# onnxruntime: not installed")
        else:
            print(f"# onnxruntime QDQ u8s8 per-channel ResNet-18 whole model, {a.threads} thread(s): {ort_ms:.2f} ms; "
                  f"Lamina's convolutions alone / onnxruntime's whole model = {total_ms / ort_ms:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

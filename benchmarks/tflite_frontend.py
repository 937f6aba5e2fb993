"""The TFLite front end (issue 12): op coverage against TPU-MLIR's TFLite converter; for each test
network (``tests/frontends/tflite/networks.py``, float and full-integer) the import time and, on the
module after ``model_transform``'s top pipeline, the ``top`` interpreter's agreement with LiteRT
over every tensor both dump (min cosine, in TFLite's layout; a full-integer model's LiteRT tensors
dequantized) and its latency relative to LiteRT's (both single-threaded, no delegate); and for the
full-integer models, Lamina's INT8 lowering with the calibration table derived from the model's own
quantization parameters against LiteRT's int8 execution (max difference in quantization steps of the
output, the share of output integers equal, cosine), over the networks and the single-op cases of
``tests/frontends/tflite/test_quantization.py``.

    python benchmarks/tflite_frontend.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
import zlib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "frontends", "tflite"))

#: the builtin ops of TPU-MLIR's TFLite converter (``BuiltinOptionsToAttributes`` in
#: sophgo/tpu-mlir python/transform/TFLiteConverter.py, the version read holds 28; the issue counts 29)
TPU_MLIR_OPS = {
    "ADD", "SUB", "PAD", "PADV2", "SOFTMAX", "MEAN", "SUM", "REDUCE_MAX", "REDUCE_MIN", "CONV_2D",
    "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "MAX_POOL_2D", "AVERAGE_POOL_2D", "DEQUANTIZE", "QUANTIZE",
    "CAST", "RESHAPE", "CONCATENATION", "LOGISTIC", "MUL", "RESIZE_NEAREST_NEIGHBOR", "STRIDED_SLICE",
    "SPLIT", "PACK", "UNPACK", "GATHER", "TRANSPOSE",
}  # fmt: skip


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 1.0 if na == nb == 0 else float(a @ b / (na * nb))


def best(fn: object, repeat: int) -> float:
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        ts.append(time.perf_counter() - t)
    return min(ts)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    import networks as nets
    import test_converters as tc
    import test_quantization as tq
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from builder import ModelBuilder
    from quantizer import dequantize_array, int8_feeds, quantize_model

    from lamina.execution import Interpreter as TopInterpreter
    from lamina.flows.transform import QUANTIZED_TOP_PIPELINE, TOP_PIPELINE, optimize_top
    from lamina.frontends.model_io import run_top_module
    from lamina.frontends.tflite import converters as _c  # noqa: F401
    from lamina.frontends.tflite import parse_model
    from lamina.frontends.tflite.importer import import_tflite_with_ranges
    from lamina.frontends.tflite.quantization import calibration_table
    from lamina.frontends.tflite.registry import CONVERTERS
    from lamina.frontends.tflite.runtime import reference_view, run_litert, tflite_layout_view
    from lamina.ir.context import Context
    from lamina.quant.deploy import deploy_module, run_tpu_module

    ours = {k for k in CONVERTERS if k.isupper()}
    print(f"| | builtin ops | of TPU-MLIR's {len(TPU_MLIR_OPS)} |")
    print("|---|---|---|")
    print(f"| Lamina | {len(ours)} (+ custom {len(CONVERTERS) - len(ours)}) | {len(ours & TPU_MLIR_OPS)} |")
    n = len(TPU_MLIR_OPS)
    print(f"| TPU-MLIR | {n} (int8-quantized models only) | {n} |")
    print(f"\nOf TPU-MLIR's, Lamina lacks: {', '.join(sorted(TPU_MLIR_OPS - ours)) or 'none'}")

    rng = np.random.default_rng(0)
    mb_int8, mb_int8_q = nets.mobilenet_v2_int8("int8")
    mb_fio, mb_fio_q = nets.mobilenet_v2_int8("float")
    tr_int8, tr_int8_q = nets.transformer_block_int8("int8")
    mb_feed = nets.test_input("image", (1, 32, 32, 3))
    tr_feed = nets.test_input("tokens", (1, 6, 16))
    networks = [
        ("MobileNet-style CNN (16x16x3, fp16 depthwise weights)", nets.mobilenet_like(), None,
         {"image": rng.standard_normal((1, 16, 16, 3)).astype(np.float32)}),
        ("transformer block (6 tokens, d=16, 2 heads)", nets.transformer_block(), None,
         {"tokens": rng.standard_normal((1, 6, 16)).astype(np.float32)}),
        ("MobileNetV2-style CNN, full int8, int8 I/O (32x32x3)", mb_int8, mb_int8_q, int8_feeds(mb_int8_q, mb_feed)),
        ("the same, float I/O (QUANTIZE/DEQUANTIZE)", mb_fio, mb_fio_q, int8_feeds(mb_fio_q, mb_feed)),
        ("transformer block, full int8, int8 I/O", tr_int8, tr_int8_q, int8_feeds(tr_int8_q, tr_feed)),
    ]  # fmt: skip
    print()
    print("| network | TFLite ops | import ms | tensors compared | min cosine | Lamina / LiteRT latency |")
    print("|---|---|---|---|---|---|")
    lowered = {}
    for name, buf, q, x in networks:
        times = []
        for _ in range(5):
            t = time.perf_counter()
            import_tflite_with_ranges(buf, Context(handler=None), name)
            times.append(time.perf_counter() - t)
        ctx = Context(handler=None)
        module, ranges = import_tflite_with_ranges(buf, ctx, name)
        optimize_top(module, ctx, QUANTIZED_TOP_PIPELINE if ranges else TOP_PIPELINE)  # as model_transform
        model = parse_model(buf, name)
        ref = reference_view(model, run_litert(buf, x, dump_all=True))
        got = tflite_layout_view(run_top_module(module, x, dump_all=True))
        common = [k for k in ref if k in got and ref[k].shape == got[k].shape]
        mincos = min(cosine(got[k], ref[k]) for k in common)
        it = Interpreter(
            model_content=buf,
            num_threads=1,
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
        it.allocate_tensors()
        for d in it.get_input_details():
            it.set_tensor(d["index"], next(iter(x.values())))
        top = TopInterpreter(module)
        lat_ref = best(it.invoke, args.repeat)
        lat_top = best(lambda: top.run(x), args.repeat)  # noqa: B023
        print(
            f"| {name} | {len(model.operators)} | {min(times) * 1e3:.1f} | {len(common)} | {mincos:.7f} | "
            f"{lat_top / lat_ref:.1f}x ({lat_top * 1e6:.0f} / {lat_ref * 1e6:.0f} us) |"
        )
        if q is not None:
            lowered[name] = (buf, q, x, module, ranges, ctx, model)

    print()
    print("| full-integer network | INT8 lowering | max steps | outputs equal | cosine | deploy s |")
    print("|---|---|---|---|---|---|")
    for name, (buf, _q, x, module, ranges, ctx, model) in lowered.items():
        out = model.tensors[model.outputs[0]]
        litert = run_litert(buf, x)[out.name]
        table = calibration_table(module, ranges, name)
        for asym in (True, False):
            t = time.perf_counter()
            tpu = deploy_module(module, "INT8", asymmetric=asym, calibration_table=table, ctx=ctx)
            dt = time.perf_counter() - t
            got = run_tpu_module(tpu, x)[out.name]
            if got.dtype.kind in "iu":
                qt = out
                d = np.abs(got.astype(np.int64) - litert.astype(np.int64))
            else:  # float outputs: steps of the int8 tensor the final DEQUANTIZE reads
                qt = next(t for t in model.tensors if t.name == out.name + "_int8")
                d = np.abs(np.round((got - litert) / float(qt.quant.scale[0])))  # type: ignore[union-attr]
            s, z = float(qt.quant.scale[0]), int(qt.quant.zero_point[0])  # type: ignore[union-attr]
            a, b = (dequantize_array(v, s, z) if v.dtype.kind in "iu" else v for v in (got, litert))
            mode = "--asymmetric (the model's zero points)" if asym else "symmetric (thresholds)"
            print(
                f"| {name} | {mode} | {int(d.max())} | {np.mean(d == 0) * 100:.0f}% | "
                f"{cosine(a, b):.6f} | {dt:.2f} |"
            )

    # the single-op cases of test_quantization.py: per case, max steps of Lamina's INT8 against LiteRT
    hist: dict[int, list[str]] = {}
    for case in tq.INT8_CASES:
        seed = zlib.crc32(case.encode())
        tc.RNG = np.random.default_rng(seed)
        r = np.random.default_rng(seed)
        m = ModelBuilder()
        xi = m.input("x", [1, 6, 6, 4])
        m.output(tc.CASES[case](m, xi, False))
        samples = [{"x": r.standard_normal((1, 6, 6, 4)).astype(np.float32)} for _ in range(4)]
        qm = quantize_model(m, samples, io="int8")
        b = qm.build()
        feeds = int8_feeds(qm, samples[0])
        y = qm.tensors[qm.outputs[0]]["name"]
        with np.errstate(all="ignore"):
            _, tpu, _ = tq.lower(b)
            d = tq.steps(run_tpu_module(tpu, feeds)[y], run_litert(b, feeds)[y])
        hist.setdefault(int(d.max()), []).append(case)
    print()
    print(
        f"Single-op int8 models ({len(tq.INT8_CASES)}, int8 I/O, per-channel weights), Lamina INT8 vs LiteRT:"
    )
    for k in sorted(hist):
        shown = ", ".join(hist[k]) if k else f"{len(hist[k])} cases"
        print(f"- max {k} step(s): {len(hist[k])} ({shown})")


if __name__ == "__main__":
    main()

"""The TFLite front end (issue 12): op coverage against TPU-MLIR's TFLite converter, and for each test
network (``tests/frontends/tflite/networks.py``) the import time and, on the module after
``model_transform``'s top pipeline, the ``top`` interpreter's agreement
with LiteRT over every tensor both dump (min cosine, in TFLite's layout) and its latency relative to
LiteRT's (both single-threaded, no delegate).

    python benchmarks/tflite_frontend.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

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
    a, b = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return 1.0 if na == nb == 0 else float(a @ b / (na * nb))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    from ai_edge_litert.interpreter import Interpreter, OpResolverType
    from networks import mobilenet_like, transformer_block

    from lamina.execution import Interpreter as TopInterpreter
    from lamina.flows.transform import optimize_top
    from lamina.frontends.model_io import run_top_module
    from lamina.frontends.tflite import converters as _c  # noqa: F401
    from lamina.frontends.tflite import import_tflite, parse_model
    from lamina.frontends.tflite.registry import CONVERTERS
    from lamina.frontends.tflite.runtime import run_litert, tflite_layout_view
    from lamina.ir.context import Context

    ours = {k for k in CONVERTERS if k.isupper()}
    print(f"| | builtin ops | of TPU-MLIR's {len(TPU_MLIR_OPS)} |")
    print("|---|---|---|")
    print(f"| Lamina | {len(ours)} (+ custom {len(CONVERTERS) - len(ours)}) | {len(ours & TPU_MLIR_OPS)} |")
    n = len(TPU_MLIR_OPS)
    print(f"| TPU-MLIR | {n} (int8-quantized models only) | {n} |")
    print(f"\nOf TPU-MLIR's, Lamina lacks: {', '.join(sorted(TPU_MLIR_OPS - ours)) or 'none'}")
    print()
    print("| network | ops | import ms | tensors compared | min cosine | Lamina / LiteRT latency |")
    print("|---|---|---|---|---|---|")
    rng = np.random.default_rng(0)
    for name, buf, shape, inp in (
        ("MobileNet-style CNN", mobilenet_like(), (1, 16, 16, 3), "image"),
        ("transformer block", transformer_block(), (1, 6, 16), "tokens"),
    ):
        x = {inp: rng.standard_normal(shape).astype(np.float32)}
        times = []
        for _ in range(5):
            t = time.perf_counter()
            module = import_tflite(buf, Context(handler=None), name)
            times.append(time.perf_counter() - t)
        ctx = Context(handler=None)
        module = import_tflite(buf, ctx, name)
        optimize_top(module, ctx)  # as model_transform writes it
        ref = run_litert(buf, x, dump_all=True)
        got = tflite_layout_view(run_top_module(module, x, dump_all=True))
        common = [k for k in ref if k in got and ref[k].shape == got[k].shape]
        mincos = min(cosine(got[k], ref[k]) for k in common)
        it = Interpreter(
            model_content=buf,
            num_threads=1,
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        )
        it.allocate_tensors()
        it.set_tensor(it.get_input_details()[0]["index"], x[inp])
        top = TopInterpreter(module)

        def best(fn: object) -> float:
            ts = []
            for _ in range(args.repeat):
                t = time.perf_counter()
                fn()  # type: ignore[operator]
                ts.append(time.perf_counter() - t)
            return min(ts)

        lat_ref = best(it.invoke)
        lat_top = best(lambda: top.run(x))  # noqa: B023
        nops = len(parse_model(buf, name).operators)
        print(
            f"| {name} | {nops} | {min(times) * 1e3:.1f} | {len(common)} | {mincos:.7f} | "
            f"{lat_top / lat_ref:.1f}x ({lat_top * 1e6:.0f} / {lat_ref * 1e6:.0f} us) |"
        )


if __name__ == "__main__":
    main()

"""ONNX import: cost of running ONNX's shape inference in a forked worker (Hardening).

ONNX's C++ shape inference kills its process (SIGSEGV, SIGFPE) on some invalid models, so the
importer runs it in a forked worker (``lamina.frontends.onnx.onnx_inference``) on a
copy of the model without the data of large initializers. This measures, best of N wall seconds:

* ``in-process``: ``onnx.shape_inference.infer_shapes(model, data_prop=True)`` as before;
* ``worker``: ``onnx_shape_inference(model)`` (the worker already started);
* ``import``: the whole ``import_onnx(path)``;

for the models in the zoo cache (``$LAMINA_TEST_CACHE`` or ``~/.cache/lamina-tests/zoo``, built by
tests/models) and, summed, for the 1,765 models of the ONNX backend node suite.

Usage: ``python benchmarks/onnx_import.py [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def best(fn: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    import onnx

    from lamina.frontends.onnx import import_onnx
    from lamina.frontends.onnx.onnx_inference import onnx_shape_inference

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()

    def in_process(m: Any) -> Any:
        return onnx.shape_inference.infer_shapes(m, strict_mode=False, data_prop=True)

    cache = os.environ.get("LAMINA_TEST_CACHE") or os.path.expanduser("~/.cache/lamina-tests/zoo")
    print("| model | MB | in-process s | worker s | import s |")
    print("|---|---|---|---|---|")
    onnx_shape_inference(onnx.ModelProto())  # start the worker
    for path in sorted(glob.glob(os.path.join(cache, "*.onnx"))):
        m = onnx.load(path)
        mb = os.path.getsize(path) / 1e6
        t_in = best(lambda m=m: in_process(m), a.repeat)
        t_w = best(lambda m=m: onnx_shape_inference(m), a.repeat)
        t_imp = best(lambda p=path: import_onnx(p), a.repeat)
        name = os.path.basename(path).split("-")[0]
        print(f"| {name} | {mb:.1f} | {t_in:.4f} | {t_w:.4f} | {t_imp:.3f} |")
    node_dir = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    models = [onnx.load(p) for p in sorted(glob.glob(os.path.join(node_dir, "*", "model.onnx")))]
    if models:
        t_in = best(lambda: [in_process(m) for m in models], a.repeat)
        t_w = best(lambda: [onnx_shape_inference(m) for m in models], a.repeat)
        print(f"| node suite ({len(models)} models, total) | | {t_in:.3f} | {t_w:.3f} | |")


if __name__ == "__main__":
    main()

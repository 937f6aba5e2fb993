"""``lamina``: the umbrella command.

lamina example            # the main job on the built-in example (see README)
lamina opt ARGS...        # same as lamina-opt
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from lamina.tools.common import internal_error_guard

EXAMPLE_PIPELINE = "builtin.module(inline,func.func(canonicalize,cse),symbol-dce)"


def example(args: argparse.Namespace) -> int:
    """The main job on built-in examples: (1) the IR core on a small program — parse, verify, run a
    pass pipeline, print; (2) model_transform on a small generated ONNX CNN — import to ``top``,
    run it on Lamina's interpreter and on onnxruntime, compare every layer."""
    rc = example_ir(args)
    if rc:
        return rc
    return example_model(args)


def example_model(args: argparse.Namespace) -> int:
    """The model flow on the built-in CNN, in ``args.workdir``: model_transform (ONNX -> top, checked
    against onnxruntime), run_calibration (on generated samples), model_deploy INT8 (top -> tpu,
    run on the bit-exact tpu interpreter, compared with the top outputs)."""
    import os

    from lamina.examples.models import build_example_cnn, example_input
    from lamina.support.fileio import save_npz
    from lamina.tools.calibrate import calibrate_main
    from lamina.tools.deploy import deploy_main
    from lamina.tools.transform import transform_main

    w = args.workdir
    if not w.strip():
        print("lamina: error: --workdir is empty", file=sys.stderr)
        return 1
    for d in (w, os.path.join(w, "calibration_samples")):
        if os.path.exists(d) and not os.path.isdir(d):
            print(f"lamina: error: --workdir: '{d}' exists and is not a directory", file=sys.stderr)
            return 1
    try:
        os.makedirs(os.path.join(w, "calibration_samples"), exist_ok=True)
    except OSError as e:
        print(f"lamina: error: cannot create --workdir '{w}': {e.strerror or e}", file=sys.stderr)
        return 1
    model = build_example_cnn(os.path.join(w, "example_cnn.onnx"))
    test_input = os.path.join(w, "example_cnn_input.npz")
    save_npz(test_input, {"input": example_input()})
    for i in range(16):
        save_npz(
            os.path.join(w, "calibration_samples", f"{i:02d}.npz"), {"input": example_input(seed=100 + i)}
        )
    mlir = os.path.join(w, "example_cnn.mlir")
    steps = [
        ("model_transform on the built-in example model", transform_main, [
            "--model_name", "example_cnn", "--model_def", model, "--input_shapes", "[[1,3,32,32]]",
            "--test_input", test_input, "--test_result", os.path.join(w, "example_cnn_top_outputs.npz"),
            "--mlir", mlir,
        ]),
        ("run_calibration on 16 generated samples", calibrate_main, [
            mlir, "--dataset", os.path.join(w, "calibration_samples"), "--input_num", "16",
            "-o", os.path.join(w, "example_cnn_cali_table"),
        ]),
        ("model_deploy INT8, compared with the top outputs", deploy_main, [
            "--mlir", mlir, "--quantize", "INT8", "--calibration_table", os.path.join(w, "example_cnn_cali_table"),
            "--processor", "cpu", "--test_input", os.path.join(w, "example_cnn_in_f32.npz"),
            "--test_reference", os.path.join(w, "example_cnn_top_outputs.npz"),
            "--model", os.path.join(w, "example_cnn_int8.bmodel"),
        ]),
    ]  # fmt: skip
    for title, fn, argv in steps:
        print(f"\n// ---- {title}", flush=True)
        rc = fn(argv)
        if rc:
            return rc
    return 0


def example_ir(args: argparse.Namespace) -> int:
    """Parse the built-in IR example, verify it, run a pipeline, print before and after."""
    import lamina.dialects
    import lamina.transforms  # noqa: F401
    from lamina.examples import example_path
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.ir.printer import print_operation
    from lamina.ir.source_diagnostics import SourceBuffer, SourceDiagnosticPrinter
    from lamina.ir.verifier import verify
    from lamina.passes import PassManager

    path = example_path("simple.mlir")
    text = path.read_text()
    ctx = Context(handler=SourceDiagnosticPrinter({str(path): SourceBuffer(str(path), text)}))
    with ctx:
        t0 = time.perf_counter()
        module = parse_module(text, ctx, filename=str(path))
        if module is None or not verify(module, ctx):
            return 1
        print(f"// ---- input: {path}")
        print(print_operation(module), end="")
        pipeline = args.pipeline
        print(f"// ---- equivalent command: lamina-opt {path} --pass-pipeline='{pipeline}'")
        pm = PassManager.parse(pipeline, ctx)
        pm.enable_timing()
        if not pm.run(module):
            return 1
        print(f"// ---- after {pipeline}")
        print(print_operation(module), end="")
        sys.stderr.write(pm.timing_report())
        print(f"// done in {1000 * (time.perf_counter() - t0):.1f} ms")
    return 0


# `lamina <verb> ARGS...` runs the same code as the TPU-MLIR-named commands.
VERBS = {
    "opt": ("lamina.tools.opt", "main", "lamina-opt: parse, verify, run passes, print"),
    "transform": (
        "lamina.tools.transform",
        "transform_main",
        "model_transform: ONNX -> top IR, checked layer by layer",
    ),
    "run": ("lamina.tools.runner", "run_main", "model_runner: run a .mlir or .onnx model on an npz input"),
    "compare": (
        "lamina.tools.npz_tool",
        "compare_main",
        "npz_tool compare: per-tensor similarity of two npz files",
    ),
    "calibrate": (
        "lamina.tools.calibrate",
        "calibrate_main",
        "run_calibration: a calibration table from a dataset",
    ),
    "deploy": (
        "lamina.tools.deploy",
        "deploy_main",
        "model_deploy: lower a top .mlir to the quantized tpu IR and compare",
    ),
    "info": ("lamina.tools.model_tool", "info_main", "model_tool --info: what a .lamina model file holds"),
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in VERBS:
        import importlib

        module, fn, _ = VERBS[argv[0]]
        return getattr(importlib.import_module(module), fn)(argv[1:])
    p = argparse.ArgumentParser(
        prog="lamina", description="Lamina: a deep-learning compiler on an MLIR-style IR."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    ex = sub.add_parser("example", help="run the main job on the built-in example")
    ex.add_argument(
        "--pipeline", default=EXAMPLE_PIPELINE, help=f"pass pipeline (default: {EXAMPLE_PIPELINE})"
    )
    ex.add_argument(
        "--workdir",
        default="lamina_example",
        help="where the example model's files go (default: ./lamina_example)",
    )
    for verb, (_, _, help_text) in VERBS.items():
        sub.add_parser(verb, help=f"{help_text} (further arguments are passed on)")
    args = p.parse_args(argv)
    return internal_error_guard("lamina", lambda: example(args))


if __name__ == "__main__":
    sys.exit(main())

"""``model_runner`` / ``lamina run``: run a model on inputs from an ``.npz`` and save its outputs.

    model_runner --input x.npz --model M.mlir --output out.npz [--dump_all_tensors]
    model_runner --input x.npz --model M.onnx --output ref.npz [--dump_all_tensors] [--engine lamina]
    model_runner --input x.npz --model M.tflite --output ref.npz [--dump_all_tensors] [--engine lamina]
    model_runner --input x.npz --model M.lamina --output out.npz [--profile trace.json]

A compiled ``.lamina`` model (``model_deploy --model``; any extension) runs on its target's runtime —
the NPU simulator, the CPU target's code — and ``--profile`` writes a Chrome trace of the run (open it
in Perfetto) with its summary beside it (``trace.summary.json``). A ``.mlir`` model runs on Lamina's
``top`` interpreter; an ``.onnx`` model runs on onnxruntime (as TPU-MLIR's model_runner does) and a
``.tflite`` model on LiteRT, or either is imported and interpreted by Lamina with ``--engine lamina``.
Outputs are keyed by the model's output names; ``--dump_all_tensors`` adds every intermediate tensor
keyed by its tensor (location) name, in network order. The output file is written atomically.

The flow itself is :func:`lamina.flows.run.run_model_file`; this module parses the flags and prints.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from lamina.flows.run import run_model_file
from lamina.frontends.model_io import save_npz
from lamina.support.errors import ToolError
from lamina.support.paths import check_outputs
from lamina.tools.common import internal_error_guard

TOOL = "model_runner"


def build_parser(prog: str = TOOL) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Run a model (.mlir — top or quantized tpu — on Lamina, .onnx on onnxruntime, "
        ".tflite on LiteRT).",
    )
    p.add_argument("--input", required=True, help="input .npz (keyed by input name) or .npy (single input)")
    p.add_argument("--model", required=True, help="model: .mlir (top or tpu dialect), .onnx or .tflite")
    p.add_argument("--output", required=True, help="output .npz")
    p.add_argument("--dump_all_tensors", action="store_true", help="also save every intermediate tensor")
    p.add_argument(
        "--out_fixed",
        action="store_true",
        help="for a quantized _tpu.mlir: keep integer outputs (no dequantizing)",
    )
    p.add_argument(
        "--profile",
        metavar="TRACE.json",
        help="for a compiled .lamina model: write a Chrome trace of the run and its summary (TRACE.summary.json)",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        metavar="N",
        help="for a compiled CPU .lamina model: run on N threads (default 1)",
    )
    p.add_argument(
        "--engine",
        choices=("onnxruntime", "litert", "lamina"),
        default=None,
        help="for .onnx models: onnxruntime (default); for .tflite models: litert (default); "
        "lamina: import the model and run it on Lamina",
    )
    return p


def _run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    try:
        outputs = [("--output", args.output)]
        if args.profile:
            from lamina.targets.profile import summary_path

            outputs += [("--profile", args.profile), ("the profile summary", summary_path(args.profile))]
        if args.threads is not None and args.threads < 1:
            raise ToolError(f"--threads must be at least 1, got {args.threads}")
        check_outputs([("--input", args.input), ("--model", args.model)], outputs)
        res = run_model_file(
            args.model,
            args.input,
            args.dump_all_tensors,
            args.engine,
            args.out_fixed,
            profile=args.profile,
            threads=args.threads,
        )
        save_npz(args.output, res)
    except ToolError as e:
        print(f"{TOOL}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{TOOL}: error: cannot write '{args.output}': {e.strerror or e}", file=sys.stderr)
        return 1
    print(
        f"{TOOL}: wrote {len(res)} tensor(s) to {args.output} in {time.perf_counter() - t0:.2f} s",
        file=sys.stderr,
    )
    if args.profile:
        import json

        from lamina.targets.profile import describe, summary_path

        with open(summary_path(args.profile), encoding="utf-8") as f:
            summary = json.load(f)
        print(
            f"{TOOL}: profile: {describe(summary)}; wrote {args.profile} and {summary_path(args.profile)}",
            file=sys.stderr,
        )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return internal_error_guard(TOOL, lambda: _run(build_parser().parse_args(argv)))


def run_main(argv: Sequence[str] | None = None) -> int:
    """``lamina run ...``"""
    return internal_error_guard("lamina run", lambda: _run(build_parser("lamina run").parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

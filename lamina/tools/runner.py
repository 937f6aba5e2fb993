"""``model_runner`` / ``lamina run``: run a model on inputs from an ``.npz`` and save its outputs.

    model_runner --input x.npz --model M.mlir --output out.npz [--dump_all_tensors]
    model_runner --input x.npz --model M.onnx --output ref.npz [--dump_all_tensors] [--engine lamina]

A ``.mlir`` model runs on Lamina's ``top`` interpreter; an ``.onnx`` model runs on onnxruntime (as
TPU-MLIR's model_runner does), or imported and interpreted by Lamina with ``--engine lamina``.
Outputs are keyed by the model's output names; ``--dump_all_tensors`` adds every intermediate tensor
keyed by its tensor (location) name, in network order. The output file is written atomically.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence

import numpy as np

from lamina.frontends.model_io import (
    ToolError,
    check_inputs,
    import_onnx_file,
    load_npz,
    module_signature,
    onnx_signature,
    ordered,
    parse_mlir_file,
    run_onnxruntime,
    run_top_module,
    save_npz,
)
from lamina.support.paths import check_input_file, check_outputs
from lamina.tools.common import internal_error_guard

TOOL = "model_runner"


def run_model_file(
    model_path: str,
    inputs: Mapping[str, np.ndarray] | str,
    dump_all: bool = False,
    engine: str | None = None,
    out_fixed: bool = False,
) -> dict[str, np.ndarray]:
    """Run ``model_path`` (``.mlir`` — a ``top`` or a quantized ``tpu`` module — or ``.onnx``) on
    ``inputs`` (arrays by name, or an npz path)."""
    source = inputs if isinstance(inputs, str) else "inputs"
    arrays = load_npz(inputs, "input file") if isinstance(inputs, str) else dict(inputs)
    check_input_file(model_path, "model")
    if model_path.endswith(".onnx"):
        from lamina.frontends.onnx import OnnxImportError, load_model

        try:
            model = load_model(model_path)
        except OnnxImportError as e:
            raise ToolError(str(e)) from None
        sig = onnx_signature(model)
        if (engine or "onnxruntime") == "onnxruntime":
            feeds = check_inputs(arrays, sig, source)
            res = run_onnxruntime(model, feeds, dump_all, model_path)
            return ordered(res, sig.output_names) if not dump_all else res
        feeds = check_inputs(arrays, sig, source)
        shapes = {n: list(a.shape) for n, a in feeds.items()}
        module, _ = import_onnx_file(model_path, input_shapes=shapes)
        return run_top_module(module, check_inputs(feeds, module_signature(module), source), dump_all)
    if engine not in (None, "lamina"):
        raise ToolError(f"--engine {engine} can only run .onnx models; '{model_path}' is run by Lamina")
    module, _ = parse_mlir_file(model_path)
    feeds = check_inputs(arrays, module_signature(module, f"model '{model_path}'"), source)
    if any(op.name.startswith("tpu.") for op in module.walk_ops()):
        from lamina.quant.deploy import run_tpu_module

        # A quantized module (model_deploy's _tpu.mlir): outputs dequantized to float32, unless
        # out_fixed keeps the stored integers.
        return run_tpu_module(module, feeds, dump_all=dump_all, out_fixed=out_fixed)
    if out_fixed:
        raise ToolError(f"--out_fixed needs a quantized (tpu) model; '{model_path}' is not one")
    return run_top_module(module, feeds, dump_all)


def runner_command(inp: str, model: str, out: str, dump_all: bool, engine: str | None = None) -> str:
    cmd = f"model_runner --input {inp} --model {model} --output {out}"
    if dump_all:
        cmd += " --dump_all_tensors"
    if engine:
        cmd += f" --engine {engine}"
    return cmd


def build_parser(prog: str = TOOL) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run a model (.mlir — top or quantized tpu — on Lamina, .onnx on onnxruntime)."
    )
    p.add_argument("--input", required=True, help="input .npz (keyed by input name) or .npy (single input)")
    p.add_argument("--model", required=True, help="model: .mlir (top or tpu dialect) or .onnx")
    p.add_argument("--output", required=True, help="output .npz")
    p.add_argument("--dump_all_tensors", action="store_true", help="also save every intermediate tensor")
    p.add_argument(
        "--out_fixed",
        action="store_true",
        help="for a quantized _tpu.mlir: keep integer outputs (no dequantizing)",
    )
    p.add_argument(
        "--engine",
        choices=("onnxruntime", "lamina"),
        default=None,
        help="for .onnx models: run on onnxruntime (default) or import and run on Lamina",
    )
    return p


def _run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    try:
        check_outputs([("--input", args.input), ("--model", args.model)], [("--output", args.output)])
        res = run_model_file(args.model, args.input, args.dump_all_tensors, args.engine, args.out_fixed)
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
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return internal_error_guard(TOOL, lambda: _run(build_parser().parse_args(argv)))


def run_main(argv: Sequence[str] | None = None) -> int:
    """``lamina run ...``"""
    return internal_error_guard("lamina run", lambda: _run(build_parser("lamina run").parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

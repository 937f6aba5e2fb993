"""The ``model_runner`` flow: run a model file on inputs and return its tensors.

A compiled ``.lamina`` model (whatever its extension: ``model_deploy --model x.bmodel`` writes one)
runs on its target's runtime (:func:`lamina.targets.base.load_model_file`: the NPU simulator, the
CPU target's code), optionally profiled. A ``.mlir`` model runs on Lamina's interpreter (a ``top`` module, or a quantized ``tpu`` module with its
outputs dequantized to float32 unless ``out_fixed``); an ``.onnx`` model runs on onnxruntime (as
TPU-MLIR's model_runner does), or imported and interpreted by Lamina with ``engine="lamina"``; a
``.tflite`` model runs on LiteRT, or on Lamina the same way
(:func:`lamina.frontends.tflite.runtime.run_tflite_file`).
Outputs are keyed by the model's output names; ``dump_all`` adds every intermediate tensor keyed by
its tensor (location) name, in network order. ``model_runner`` (:mod:`lamina.tools.runner`) and
:func:`lamina.api.run` call :func:`run_model_file`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lamina.frontends.model_io import (
    check_inputs,
    import_onnx_file,
    load_npz,
    module_signature,
    ordered,
    parse_mlir_file,
    run_top_module,
)
from lamina.frontends.onnx.runtime import onnx_signature, run_onnxruntime
from lamina.support.errors import ToolError
from lamina.support.paths import check_input_file

__all__ = ["is_tpu_module", "run_model_file", "runner_command"]


def is_tpu_module(module: Any) -> bool:
    """Whether ``module`` is lowered to the quantized ``tpu`` level (model_deploy's ``_tpu.mlir``)."""
    return any(op.name.startswith("tpu.") for op in module.walk_ops())


def run_model_file(
    model_path: str,
    inputs: Mapping[str, np.ndarray] | str,
    dump_all: bool = False,
    engine: str | None = None,
    out_fixed: bool = False,
    profile: str | None = None,
    threads: int | None = None,
) -> dict[str, np.ndarray]:
    """Run ``model_path`` (``.mlir`` — a ``top`` or a quantized ``tpu`` module —, ``.onnx``,
    ``.tflite``, or a compiled ``.lamina`` file) on ``inputs`` (arrays by name, or an npz path).
    ``profile`` (``trace.json``, compiled models only) also writes the run's Chrome trace and summary;
    ``threads``: a compiled CPU model's thread count (default: the runtime's, one)."""
    source = inputs if isinstance(inputs, str) else "inputs"
    arrays = load_npz(inputs, "input file") if isinstance(inputs, str) else dict(inputs)
    check_input_file(model_path, "model")
    from lamina.targets.base import is_model_file, load_model_file

    if is_model_file(model_path):
        for flag, given in (
            ("--dump_all_tensors", dump_all),
            ("--engine", engine),
            ("--out_fixed", out_fixed),
        ):
            if given:
                raise ToolError(
                    f"{flag} does not apply to a compiled model ('{model_path}' gives its outputs)"
                )
        compiled = load_model_file(model_path, **({} if threads is None else {"threads": threads}))
        feeds = compiled.check_inputs(arrays, source)
        return compiled.run(feeds, profile=profile)
    if profile is not None:
        raise ToolError(f"--profile needs a compiled model (.lamina); '{model_path}' is not one")
    if threads is not None:
        raise ToolError(f"--threads needs a compiled CPU model (.lamina); '{model_path}' is not one")
    if model_path.lower().endswith(".tflite"):
        from lamina.frontends.tflite.runtime import run_tflite_file

        if out_fixed:
            raise ToolError(f"--out_fixed needs a quantized (tpu) model; '{model_path}' is not one")
        return run_tflite_file(model_path, arrays, dump_all, engine, source)
    if model_path.endswith(".onnx"):
        from lamina.frontends.onnx import OnnxImportError, load_model

        try:
            model = load_model(model_path)
        except OnnxImportError as e:
            raise ToolError(str(e)) from None
        sig = onnx_signature(model)
        if engine == "litert":
            raise ToolError(f"--engine litert runs .tflite models; '{model_path}' is an ONNX model")
        if (engine or "onnxruntime") == "onnxruntime":
            feeds = check_inputs(arrays, sig, source)
            res = run_onnxruntime(model, feeds, dump_all, model_path)
            return ordered(res, sig.output_names) if not dump_all else res
        feeds = check_inputs(arrays, sig, source)
        shapes = {n: list(a.shape) for n, a in feeds.items()}
        module, _ = import_onnx_file(model_path, input_shapes=shapes)
        return run_top_module(module, check_inputs(feeds, module_signature(module), source), dump_all)
    if engine not in (None, "lamina"):
        raise ToolError(
            f"--engine {engine} can only run .onnx and .tflite models; '{model_path}' is run by Lamina"
        )
    module, _ = parse_mlir_file(model_path)
    feeds = check_inputs(arrays, module_signature(module, f"model '{model_path}'"), source)
    if is_tpu_module(module):
        from lamina.quant.deploy import run_tpu_module

        # A quantized module (model_deploy's _tpu.mlir): outputs dequantized to float32, unless
        # out_fixed keeps the stored integers.
        return run_tpu_module(module, feeds, dump_all=dump_all, out_fixed=out_fixed)
    if out_fixed:
        raise ToolError(f"--out_fixed needs a quantized (tpu) model; '{model_path}' is not one")
    return run_top_module(module, feeds, dump_all)


def runner_command(inp: str, model: str, out: str, dump_all: bool, engine: str | None = None) -> str:
    """The ``model_runner`` command line of a run (the flows print each step's equivalent command)."""
    cmd = f"model_runner --input {inp} --model {model} --output {out}"
    if dump_all:
        cmd += " --dump_all_tensors"
    if engine:
        cmd += f" --engine {engine}"
    return cmd

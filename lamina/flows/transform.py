"""The ``model_transform`` flow: ONNX → ``top`` .mlir, checked layer by layer against onnxruntime.

:func:`transform` takes a :class:`TransformOptions` (the command's flags as Python values) and returns a
:class:`TransformResult` (the module, the files written, the comparison); ``model_transform``
(:mod:`lamina.tools.transform`) parses its flags into the options and prints the result, and
:func:`lamina.api.transform` checks its arguments into the same options.

Files written, next to ``mlir`` (default ``<model_name>.mlir``): the ``top`` module (with locations,
so tensor names survive) and its weight file ``<model_name>_top_weights.npz``; with ``test_input``,
``<model_name>_in_f32.npz`` (the preprocessed inputs), ``<model_name>_ref_outputs.npz`` (every tensor of
the ONNX graph by onnxruntime) and ``test_result`` (default ``<model_name>_top_outputs.npz``, every
tensor by Lamina's interpreter from the written .mlir), compared tensor by tensor.

A ``.tflite`` model is checked against LiteRT instead; a full-integer (quantized) one is imported to
float ``top`` and ``<model_name>_cali_table`` is written beside the ``.mlir``: the calibration table
derived from the model's own scales and zero points (:mod:`lamina.frontends.tflite.quantization`),
for ``model_deploy --quantize INT8 --asymmetric --calibration_table``. Its tensors are compared
with LiteRT's dequantized, the outputs in the model's own type.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from lamina.compare import CompareReport, compare_sets
from lamina.frontends.model_io import (
    Signature,
    import_onnx_file,
    input_ops,
    module_signature,
    parse_mlir_file,
    save_npz,
)
from lamina.frontends.onnx.runtime import run_onnxruntime
from lamina.frontends.preprocess import PreprocessConfig, check_test_input_files, load_test_inputs
from lamina.support.errors import ToolError
from lamina.support.fileio import atomic_write
from lamina.support.paths import check_input_file, check_outputs

__all__ = [
    "QUANTIZED_TOP_PIPELINE",
    "TOP_PIPELINE",
    "TransformOptions",
    "TransformResult",
    "optimize_top",
    "transform",
    "transform_command",
    "write_mlir",
]


# ---- progress ------------------------------------------------------------------------------------------


class Progress:
    """Step progress on stderr (a tqdm bar; silent when stderr is not a terminal)."""

    def __init__(self, total: int, enabled: bool = True, stream: TextIO | None = None) -> None:
        from tqdm import tqdm

        self._bar = tqdm(
            total=total,
            file=stream or sys.stderr,
            leave=False,
            unit="step",
            disable=None if enabled else True,
        )

    def step(self, desc: str) -> None:
        self._bar.set_description(desc)
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()


# ---- options and result --------------------------------------------------------------------------------


@dataclass
class TransformOptions:
    model_def: str
    model_name: str | None = None
    input_shapes: list[list[int]] | None = None
    input_types: list[Any] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    mean: list[float] | None = None
    scale: list[float] | None = None
    pixel_format: str | None = None
    channel_format: str | None = None
    resize_dims: list[int] | None = None
    keep_aspect_ratio: bool = False
    pad_value: int = 0
    test_input: str | None = None
    test_result: str | None = None
    #: None: :data:`DEFAULT_TOLERANCE`, or :data:`QUANTIZED_TOLERANCE` for a full-integer TFLite model
    tolerance: tuple[float, float] | None = None
    excepts: list[str] = field(default_factory=list)
    mlir: str | None = None
    debug: bool = False

    def name(self) -> str:
        return self.model_name or os.path.splitext(os.path.basename(self.model_def))[0]

    def has_preprocess(self) -> bool:
        return (
            any(
                x is not None
                for x in (self.mean, self.scale, self.pixel_format, self.channel_format, self.resize_dims)
            )
            or self.keep_aspect_ratio
            or bool(self.pad_value)
        )

    def preprocess_config(self) -> PreprocessConfig:
        cfg = PreprocessConfig(
            mean=self.mean,
            scale=self.scale,
            pixel_format=self.pixel_format or "bgr",
            # TFLite models take NHWC images
            channel_format=self.channel_format
            or ("nhwc" if self.model_def.lower().endswith(".tflite") else "nchw"),
            resize_dims=self.resize_dims,
            keep_aspect_ratio=self.keep_aspect_ratio,
            pad_value=self.pad_value,
        )
        cfg.validate()
        return cfg


@dataclass
class TransformResult:
    """What ``transform`` produced: the module, the files written and the comparison (if any)."""

    module: Any
    signature: Signature
    mlir: str
    weights: str | None
    inputs_npz: str | None = None
    ref_npz: str | None = None
    result_npz: str | None = None
    #: the calibration table derived from a quantized TFLite model's own quantization parameters
    calibration_table: str | None = None
    report: CompareReport | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.report is None or self.report.passed


# ---- the steps -------------------------------------------------------------------------------------------

#: model_transform's default --tolerance (cosine, euclidean)
DEFAULT_TOLERANCE = (0.99, 0.99)
#: the default for a full-integer TFLite model, whose float top differs from LiteRT's int8 execution by
#: the model's own quantization error (model_deploy's INT8 default)
QUANTIZED_TOLERANCE = (0.90, 0.80)


# What model_transform runs on the imported module (as TPU-MLIR runs shape inference and
# canonicalization): fold constant subgraphs, fuse BN/activations, recognise GELU/LayerNorm/SiLU/
# attention, drop identities; fused ops keep the location (tensor name) of the last op they replace.
TOP_PIPELINE = "builtin.module(func.func(top-const-fold,canonicalize,top-shape-infer))"
# A full-integer TFLite model quantizes every tensor its ops produce: the fusions that would replace
# quantized tensors by one float op (attention, LayerNorm, GELU/SiLU recognition) are left out, so that
# model_deploy INT8 keeps LiteRT's quantization points. Activations fused into their producer stay
# fused: TFLite's kernels requantize once, to the activation's output.
QUANTIZED_TOP_PIPELINE = (
    "builtin.module(func.func(top-const-fold,"
    "canonicalize{disable-patterns=FuseAttention,FuseLayerNorm,FuseGELU,FuseSiLU},top-shape-infer))"
)


def optimize_top(module: Any, ctx: Any, pipeline: str = TOP_PIPELINE) -> None:
    """Run ``pipeline`` (:data:`TOP_PIPELINE`); a failure is a ToolError with the diagnostics."""
    from lamina.passes import PassManager

    diags: list[str] = []
    with ctx.diagnostics.handler(lambda d: diags.append(str(d))), ctx:
        pm = PassManager.parse(pipeline, ctx)
        if not pm.run(module):
            raise ToolError("optimizing the top IR failed:\n" + "\n".join(diags))


def write_mlir(module: Any, mlir_path: str, weights_path: str) -> str | None:
    """Print ``module`` with locations to ``mlir_path``, weights to ``weights_path`` (both atomically).
    Returns the weight file written (None when the module has no weights)."""
    from lamina.ir.printer import print_operation

    d = os.path.dirname(os.path.abspath(mlir_path))
    if not os.path.isdir(d):
        raise ToolError(f"cannot write '{mlir_path}': directory '{d}' does not exist")
    if os.path.dirname(os.path.abspath(weights_path)) != d:
        raise ToolError("the weight file must be in the same directory as the .mlir")
    tmpdir = tempfile.mkdtemp(prefix=".lamina-", dir=d)
    try:
        tmp_weights = os.path.join(tmpdir, os.path.basename(weights_path))
        text = print_operation(module, debuginfo=True, resources="external", external_weights=tmp_weights)
        module.attributes.pop("lamina.weight_file", None)
        wrote = os.path.exists(tmp_weights)
        if wrote:
            os.replace(tmp_weights, weights_path)
        atomic_write(mlir_path, text)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return weights_path if wrote else None


def _quantized_image_inputs(model: Any, files: list[str]) -> dict[str, Any]:
    """The quantized inputs of a TFLite model that ``--test_input`` feeds with an image (one file
    per input), by name."""
    from lamina.frontends.preprocess import IMAGE_EXTS
    from lamina.frontends.tflite.quantization import is_quantized

    out = {}
    if len(files) == len(model.inputs):
        for f, i in zip(files, model.inputs):
            t = model.tensors[i]
            if os.path.splitext(f)[1].lower() in IMAGE_EXTS and is_quantized(t):
                out[t.name] = t
    return out


def _quantized_tflite(path: str) -> bool:
    """Whether the TFLite model at ``path`` has quantized activations (an unreadable model is
    reported by its import)."""
    from lamina.frontends.tflite import TfliteImportError, load_model
    from lamina.frontends.tflite.quantization import is_quantized

    try:
        model = load_model(path)
    except TfliteImportError:
        return False
    return any(is_quantized(t) and t.data is None for t in model.tensors)


def transform_command(o: TransformOptions) -> str:
    """The ``model_transform`` command line equivalent to ``o``."""
    parts = ["model_transform", f"--model_name {o.name()}", f"--model_def {o.model_def}"]
    if o.input_shapes:
        parts.append("--input_shapes " + str(o.input_shapes).replace(" ", ""))
    if o.input_types:
        parts.append("--input_types " + ",".join(str(t) for t in o.input_types))
    if o.output_names:
        parts.append("--output_names " + ",".join(o.output_names))
    for flag, v in (("--mean", o.mean), ("--scale", o.scale)):
        if v is not None:
            parts.append(f"{flag} " + ",".join(f"{x:g}" for x in v))
    for flag, v in (("--pixel_format", o.pixel_format), ("--channel_format", o.channel_format)):
        if v is not None:
            parts.append(f"{flag} {v}")
    if o.resize_dims:
        parts.append("--resize_dims " + ",".join(map(str, o.resize_dims)))
    if o.keep_aspect_ratio:
        parts.append("--keep_aspect_ratio")
    if o.test_input:
        parts.append(f"--test_input {o.test_input}")
    if o.test_result:
        parts.append(f"--test_result {o.test_result}")
    if o.tolerance is not None and tuple(o.tolerance) != DEFAULT_TOLERANCE:
        parts.append(f"--tolerance {o.tolerance[0]},{o.tolerance[1]}")
    if o.excepts:
        parts.append("--excepts " + ",".join(o.excepts))
    parts.append(f"--mlir {o.mlir or o.name() + '.mlir'}")
    return " ".join(parts)


def transform(
    o: TransformOptions,
    log: Callable[[str], None] | None = print,
    progress: bool = True,
) -> TransformResult:
    """Run the whole model_transform flow; raises :class:`ToolError` on bad input. A comparison failure
    does not raise: check ``result.passed`` / ``result.report``."""
    from lamina.flows.run import runner_command
    from lamina.frontends.model_io import run_top_module  # looked up per call: tests perturb it
    from lamina.ir.verifier import verify

    say = log or (lambda s: None)
    name = o.name()
    mlir = o.mlir or f"{name}.mlir"

    def beside(suffix: str) -> str:
        return os.path.join(os.path.dirname(mlir), f"{name}{suffix}")

    weights = beside("_top_weights.npz")
    in_npz, ref_npz = beside("_in_f32.npz"), beside("_ref_outputs.npz")
    result_npz = o.test_result or beside("_top_outputs.npz")
    check_input_file(o.model_def, "--model_def")
    is_tflite = o.model_def.lower().endswith(".tflite")
    if not (o.model_def.endswith(".onnx") or is_tflite):
        raise ToolError(
            f"--model_def '{o.model_def}': only ONNX (.onnx) and TFLite (.tflite) models are supported"
        )
    test_files = check_test_input_files(o.test_input) if o.test_input is not None else []
    table_path = beside("_cali_table")
    quantized = is_tflite and _quantized_tflite(o.model_def)
    outputs = [("--mlir", mlir), ("the weight file", weights)]
    if quantized:
        outputs.append(("the derived calibration table", table_path))
    if o.test_input:
        ref_what = "the LiteRT reference" if is_tflite else "the onnxruntime reference"
        outputs += [("the preprocessed inputs", in_npz), (ref_what, ref_npz)]
        outputs.append(("--test_result", result_npz))
    check_outputs([("--model_def", o.model_def)] + [("--test_input", f) for f in test_files], outputs)
    cfg = o.preprocess_config()
    steps = 3 + (4 if o.test_input else 0)
    bar = Progress(steps, progress)
    timings: dict[str, float] = {}
    try:
        t = time.perf_counter()
        bar.step(f"importing {o.model_def}")
        ranges: dict[str, tuple[float, float]] = {}
        if is_tflite:
            from lamina.frontends.tflite.importer import load_tflite

            imported = load_tflite(o.model_def, o.input_shapes, o.output_names)
            module, ctx, ranges = imported.module, imported.ctx, imported.ranges
        else:
            module, ctx = import_onnx_file(o.model_def, o.input_shapes, o.output_names)
        if o.has_preprocess():
            for op in input_ops(module):
                if op is not None and getattr(op.results[0].type, "rank", 0) == 4:
                    cfg.apply_to_input_op(op)
        diags: list[str] = []
        with ctx.diagnostics.handler(lambda d: diags.append(str(d))):
            if not verify(module, ctx):
                raise ToolError(
                    f"the imported module of '{o.model_def}' does not verify:\n" + "\n".join(diags)
                )
        timings["import"] = time.perf_counter() - t

        t = time.perf_counter()
        bar.step("optimizing top IR")
        pipeline = QUANTIZED_TOP_PIPELINE if ranges else TOP_PIPELINE
        say(f"# top pipeline: {pipeline}")
        optimize_top(module, ctx, pipeline)
        sig = module_signature(module)
        table = None
        if ranges:  # a quantized TFLite model: its own scales, named as the optimized module's tensors
            from lamina.frontends.tflite.quantization import calibration_table

            table = calibration_table(module, ranges, o.model_def)
        timings["optimize"] = time.perf_counter() - t

        # The test inputs are read and checked against the model before anything is written.
        inputs = None
        if o.test_input:
            t = time.perf_counter()
            bar.step(f"preprocessing {o.test_input}")
            configs = [
                PreprocessConfig.from_input_op(op) if o.has_preprocess() else cfg for op in input_ops(module)
            ]
            images = _quantized_image_inputs(imported.model, test_files) if quantized else {}
            if images:  # preprocessed as real values, then quantized with the input's parameters
                import numpy as np

                dts = [
                    np.dtype(np.float32) if n in images else d
                    for n, d in zip(sig.input_names, sig.input_dtypes)
                ]
                real_sig = Signature(sig.input_names, sig.input_shapes, dts, sig.output_names)
                inputs = load_test_inputs(o.test_input, real_sig, configs, o.input_types)
                from lamina.frontends.tflite.quantization import quantize_array

                for n, tensor in images.items():
                    inputs[n] = quantize_array(tensor, inputs[n])
            else:
                inputs = load_test_inputs(o.test_input, sig, configs, o.input_types)
            timings["preprocess"] = time.perf_counter() - t

        t = time.perf_counter()
        bar.step(f"writing {mlir}")
        wrote = write_mlir(module, mlir, weights)
        timings["write"] = time.perf_counter() - t
        say(f"# {transform_command(o)}")
        say(f"wrote {mlir}" + (f" and {wrote}" if wrote else ""))
        res = TransformResult(module, sig, mlir, wrote, timings=timings)
        if table is not None and quantized:
            table.write(table_path)
            res.calibration_table = table_path
            say(
                f"wrote {table_path} ({len(table)} tensors, from the model's quantization parameters); deploy "
                f"with: model_deploy --mlir {mlir} --quantize INT8 --asymmetric --calibration_table {table_path}"
            )
        if inputs is None:
            return res

        save_npz(in_npz, inputs)
        res.inputs_npz = in_npz
        say(f"wrote {in_npz} ({', '.join(f'{k}: {list(v.shape)}' for k, v in inputs.items())})")

        # onnxruntime reference
        t = time.perf_counter()
        bar.step(f"{'LiteRT' if is_tflite else 'onnxruntime'} reference (all tensors)")
        say(f"# {runner_command(in_npz, o.model_def, ref_npz, True)}")
        if is_tflite:  # LiteRT, every tensor in TFLite's layout
            from lamina.frontends.tflite.reader import read_bytes
            from lamina.frontends.tflite.runtime import reference_view, run_litert

            ref = reference_view(
                imported.model, run_litert(read_bytes(o.model_def), inputs, dump_all=True, source=o.model_def)
            )
        else:
            from lamina.frontends.onnx import OnnxImportError, load_model

            try:
                onnx_model = load_model(o.model_def)
            except OnnxImportError as e:
                raise ToolError(str(e)) from None
            ref = run_onnxruntime(onnx_model, inputs, dump_all=True, source=o.model_def)
        save_npz(ref_npz, ref)
        res.ref_npz = ref_npz
        timings["onnxruntime"] = time.perf_counter() - t

        # Lamina, from the written file
        t = time.perf_counter()
        bar.step(f"Lamina interpreter on {mlir}")
        say(f"# {runner_command(in_npz, mlir, result_npz, True)}")
        written, _ = parse_mlir_file(mlir)
        top = run_top_module(written, inputs, dump_all=True)
        if is_tflite:  # NCHW tensors compared in TFLite's layout
            from lamina.frontends.tflite.runtime import tflite_layout_view

            top = tflite_layout_view(top)
        save_npz(result_npz, top)
        res.result_npz = result_npz
        timings["lamina"] = time.perf_counter() - t

        # compare
        t = time.perf_counter()
        bar.step("comparing")
        tolerance = o.tolerance or (QUANTIZED_TOLERANCE if quantized else DEFAULT_TOLERANCE)
        tol = f"{tolerance[0]},{tolerance[1]}"
        exc = f" --excepts {','.join(o.excepts)}" if o.excepts else ""
        if quantized and o.tolerance is None:
            say(
                f"# a full-integer model: float top against LiteRT's int8 execution, at INT8's tolerance {tol}"
            )
        say(f"# npz_tool compare {result_npz} {ref_npz} --tolerance {tol}{exc} -v")
        report = compare_sets(top, ref, tolerance, o.excepts, name_a=result_npz, name_b=ref_npz)
        missing = [n for n in sig.output_names if n not in ref or n not in top]
        if missing:
            raise ToolError(f"model output(s) {', '.join(missing)} missing from the tensor dumps")
        res.report = report
        timings["compare"] = time.perf_counter() - t
        return res
    finally:
        bar.close()

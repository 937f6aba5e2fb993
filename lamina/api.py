"""The Python API: the commands (``model_transform``, ``model_runner``, ``npz_tool compare``) as functions,
for notebooks and scripts.

    import lamina.api as lm

    res = lm.transform("resnet.onnx", input_shapes=[[1, 3, 224, 224]], mean=[123.675, 116.28, 103.53],
                       scale=[0.0171, 0.0175, 0.0174], pixel_format="rgb", test_input="dog.jpg",
                       mlir="out/resnet.mlir")
    res.passed, res.report.summary()

    model = lm.load("out/resnet.mlir")          # or lm.load("resnet.onnx", input_shapes=[[1, 3, 224, 224]])
    outs = model.run({"input": x})                # outputs by ONNX output name
    every = lm.run(model, {"input": x}, dump_all=True)
    report = lm.compare(every, "out/resnet_ref_outputs.npz", tolerance=(0.99, 0.99), html="report.html")

Errors are raised as :class:`LaminaError` (a bad file, flag or input) with the same one-line messages
the commands print.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lamina.compare import CompareReport, TensorResult, compare_sets, compare_tensors
from lamina.frontends.model_io import Signature, ToolError, check_inputs, load_npz, module_signature
from lamina.frontends.preprocess import PreprocessConfig, preprocess_image, read_image
from lamina.tools.transform import TransformOptions, TransformResult

LaminaError = ToolError

Arrays = Mapping[str, np.ndarray]


class Model:
    """A loaded ``top`` module, ready to run. ``module`` is the IR; ``input_names``/``output_names``
    are the ONNX names; :meth:`run` executes it on the reference interpreter."""

    def __init__(self, module: Any, ctx: Any = None, path: str | None = None) -> None:
        self.module = module
        self.ctx = ctx
        self.path = path
        self.signature: Signature = module_signature(module)
        self._interp: Any = None

    @property
    def input_names(self) -> list[str]:
        return list(self.signature.input_names)

    @property
    def output_names(self) -> list[str]:
        return list(self.signature.output_names)

    @property
    def input_shapes(self) -> list[tuple[int, ...] | None]:
        return list(self.signature.input_shapes)

    def run(
        self, inputs: Arrays | Sequence[np.ndarray] | np.ndarray, dump_all: bool = False
    ) -> dict[str, np.ndarray]:
        """Run on ``inputs`` (by name, in order, or one array for a one-input model); returns outputs by
        name, plus every intermediate tensor (weights excepted) with ``dump_all``."""
        from lamina.frontends.model_io import run_top_module

        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if not isinstance(inputs, Mapping):
            inputs = list(inputs)
            if len(inputs) != len(self.input_names):
                raise LaminaError(
                    f"the model has {len(self.input_names)} input(s), got {len(inputs)} array(s)"
                )
            inputs = dict(zip(self.input_names, inputs))
        feeds = check_inputs(inputs, self.signature, "inputs")
        return run_top_module(self.module, feeds, dump_all=dump_all)

    def save(self, mlir: str, weights: str | None = None) -> str | None:
        """Write the module (with locations) to ``mlir`` and its weights to ``weights`` (default
        ``<stem>_weights.npz`` next to it). Returns the weight file written, if any."""
        from lamina.tools.transform import write_mlir

        stem = os.path.splitext(mlir)[0]
        return write_mlir(self.module, mlir, weights or f"{stem}_weights.npz")

    def text(self, generic: bool = False) -> str:
        """The module as MLIR text (weights inline)."""
        from lamina.ir.printer import print_operation

        return print_operation(self.module, generic=generic)

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {list(s) if s else '?'}" for n, s in zip(self.input_names, self.input_shapes))
        return f"<lamina Model ({ins}) -> ({', '.join(self.output_names)})>"


def load(
    path: str,
    input_shapes: Sequence[Sequence[int]] | Mapping[str, Sequence[int]] | None = None,
    output_names: Sequence[str] | None = None,
) -> Model:
    """Load a model: a ``.mlir`` file (``top`` dialect, weights from its weight file) or an ``.onnx``
    file (imported; ``input_shapes`` fixes dynamic dimensions, ``output_names`` picks the outputs)."""
    from lamina.frontends.model_io import import_onnx_file, parse_mlir_file

    if path.endswith(".onnx"):
        if not os.path.exists(path):
            raise LaminaError(f"model '{path}' does not exist")
        module, ctx = import_onnx_file(path, input_shapes, output_names)
    else:
        module, ctx = parse_mlir_file(path)
    return Model(module, ctx, path)


def transform(
    model_def: str,
    *,
    model_name: str | None = None,
    input_shapes: Sequence[Sequence[int]] | None = None,
    input_types: Sequence[str] | None = None,
    output_names: Sequence[str] | None = None,
    mean: Sequence[float] | None = None,
    scale: Sequence[float] | None = None,
    pixel_format: str | None = None,
    channel_format: str | None = None,
    resize_dims: Sequence[int] | None = None,
    keep_aspect_ratio: bool = False,
    pad_value: int = 0,
    test_input: str | None = None,
    test_result: str | None = None,
    tolerance: Sequence[float] = (0.99, 0.99),
    excepts: Sequence[str] = (),
    mlir: str | None = None,
    verbose: bool = False,
) -> TransformResult:
    """``model_transform`` as a function (same names as the flags). Returns a :class:`TransformResult`
    with ``module``, the files written and, with ``test_input``, the comparison ``report``; ``passed``
    tells whether every tensor is within ``tolerance``. Prints the step commands when ``verbose``."""
    from lamina.frontends.preprocess import parse_dtypes
    from lamina.tools.transform import transform as run_transform

    o = TransformOptions(
        model_def=model_def,
        model_name=model_name,
        input_shapes=[list(s) for s in input_shapes] if input_shapes is not None else None,
        input_types=parse_dtypes(",".join(input_types)) if input_types else [],
        output_names=list(output_names or []),
        mean=list(mean) if mean is not None else None,
        scale=list(scale) if scale is not None else None,
        pixel_format=pixel_format,
        channel_format=channel_format,
        resize_dims=list(resize_dims) if resize_dims is not None else None,
        keep_aspect_ratio=keep_aspect_ratio,
        pad_value=pad_value,
        test_input=test_input,
        test_result=test_result,
        tolerance=(float(tolerance[0]), float(tolerance[1])),
        excepts=list(excepts),
        mlir=mlir,
    )
    return run_transform(o, log=print if verbose else None, progress=verbose)


def run(
    model: Model | str,
    inputs: Arrays | Sequence[np.ndarray] | np.ndarray | str,
    dump_all: bool = False,
    output: str | None = None,
    engine: str | None = None,
) -> dict[str, np.ndarray]:
    """``model_runner`` as a function: ``model`` is a :class:`Model` or a ``.mlir``/``.onnx`` path,
    ``inputs`` arrays or an ``.npz`` path. Saves to ``output`` (an ``.npz``) when given."""
    from lamina.frontends.model_io import save_npz
    from lamina.tools.runner import run_model_file

    if isinstance(model, Model):
        res = model.run(load_npz(inputs, "input file") if isinstance(inputs, str) else inputs, dump_all)
    else:
        if isinstance(inputs, np.ndarray):
            inputs = {"input": inputs}
        elif not isinstance(inputs, (str, Mapping)):
            raise LaminaError("inputs must be a mapping of arrays or an .npz path when the model is a path")
        res = run_model_file(model, inputs, dump_all, engine)
    if output:
        save_npz(output, res)
    return res


def compare(
    a: Arrays | str,
    b: Arrays | str,
    tolerance: Sequence[float] = (0.99, 0.99),
    excepts: Sequence[str] = (),
    html: str | None = None,
) -> CompareReport:
    """``npz_tool compare`` as a function: ``a``/``b`` are arrays by name or ``.npz`` paths. Returns the
    :class:`~lamina.compare.CompareReport` (``passed``, ``failed``, ``summary()``); writes an HTML report
    to ``html`` when given."""
    name_a = a if isinstance(a, str) else "a"
    name_b = b if isinstance(b, str) else "b"
    da = load_npz(a, "npz file") if isinstance(a, str) else a
    db = load_npz(b, "npz file") if isinstance(b, str) else b
    report = compare_sets(
        da, db, (float(tolerance[0]), float(tolerance[1])), excepts, name_a=name_a, name_b=name_b
    )
    if html:
        from lamina.tools.common import atomic_write
        from lamina.tools.npz_tool import render_html

        atomic_write(html, render_html(report))
    return report


def preprocess(
    image: str | np.ndarray,
    shape: Sequence[int],
    *,
    mean: Sequence[float] | None = None,
    scale: Sequence[float] | None = None,
    pixel_format: str = "bgr",
    channel_format: str = "nchw",
    resize_dims: Sequence[int] | None = None,
    keep_aspect_ratio: bool = False,
    pad_value: int = 0,
) -> np.ndarray:
    """TPU-MLIR preprocessing of one image (a file, or an ``HxWxC`` array already in ``pixel_format``
    order) into a float32 input of ``shape``."""
    cfg = PreprocessConfig(
        mean=list(mean) if mean is not None else None,
        scale=list(scale) if scale is not None else None,
        pixel_format=pixel_format,
        channel_format=channel_format,
        resize_dims=list(resize_dims) if resize_dims is not None else None,
        keep_aspect_ratio=keep_aspect_ratio,
        pad_value=pad_value,
    )
    cfg.validate()
    img = read_image(image, pixel_format) if isinstance(image, str) else np.asarray(image)
    return preprocess_image(img, cfg, shape)


__all__ = [
    "CompareReport",
    "LaminaError",
    "Model",
    "TensorResult",
    "TransformResult",
    "compare",
    "compare_tensors",
    "load",
    "preprocess",
    "run",
    "transform",
]

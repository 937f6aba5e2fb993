"""Bringing models and their data in, shared by the flows (:mod:`lamina.flows`), :mod:`lamina.quant`
and :mod:`lamina.api`: reading and atomically writing ``.npz`` files, loading a model (``.mlir`` or
``.onnx``), a model's signature, checking inputs against it and running a ``top`` module on the
reference interpreter. Running onnxruntime is :mod:`lamina.frontends.onnx.runtime`.

Every problem is a :class:`~lamina.support.errors.ToolError` whose message names the file and what
was expected; the commands print it as one line and exit non-zero.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from lamina.support import fileio
from lamina.support.dtypes import is_numeric
from lamina.support.errors import ToolError
from lamina.support.paths import check_input_file

# ---- npz ------------------------------------------------------------------------------------------


def load_npz(path: str, what: str = "npz file") -> dict[str, np.ndarray]:
    """All arrays of an ``.npz`` (or a single ``.npy``, keyed by its file stem), in file order."""
    check_input_file(path, what)
    with open(path, "rb") as f:
        magic = f.read(6)
    if not (magic.startswith(b"PK") or magic == b"\x93NUMPY"):
        raise ToolError(f"{what} '{path}' cannot be read: it is not an .npz or .npy file")
    try:
        if path.endswith(".npy"):
            return {os.path.splitext(os.path.basename(path))[0]: np.load(path, allow_pickle=False)}
        z = np.load(path, allow_pickle=False)
        if not isinstance(z, np.lib.npyio.NpzFile):
            return {os.path.splitext(os.path.basename(path))[0]: np.asarray(z)}
        with z:
            return {k: z[k] for k in z.files}
    except ToolError:
        raise
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise ToolError(f"{what} '{path}' cannot be read (corrupt or not an .npz/.npy file): {e}") from None


def save_npz(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Write ``arrays`` as an ``.npz`` atomically (any key allowed); a missing directory is a ToolError."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    if not os.path.isdir(d):
        raise ToolError(f"cannot write '{path}': directory '{d}' does not exist")
    if os.path.isdir(path):
        raise ToolError(f"cannot write '{path}': it is a directory")
    fileio.save_npz(path, arrays)


# ---- models -----------------------------------------------------------------------------------------


@dataclass
class Signature:
    """A model's inputs and outputs: names, shapes (None where unknown) and numpy dtypes."""

    input_names: list[str]
    input_shapes: list[tuple[int, ...] | None]
    input_dtypes: list[np.dtype]
    output_names: list[str]


def main_function(module: Any, source: str = "the model") -> Any:
    """The function a model runs: ``func.func @main``, else the first ``func.func``; one with a body."""
    from lamina.execution import ExecutionError
    from lamina.execution.interpreter import find_main

    try:
        func = find_main(module)
    except ExecutionError:
        raise ToolError(
            f"{source} has no function to run: expected a 'func.func @main' (or a single func.func)"
        ) from None
    if not func.regions or not func.regions[0].blocks:
        raise ToolError(f"{source}: the function to run is a declaration without a body")
    return func


def module_signature(module: Any, source: str = "the model") -> Signature:
    from lamina.execution.interpreter import io_names
    from lamina.ir.attributes import element_type_to_dtype
    from lamina.ir.types import RankedTensorType, ShapedType

    func = main_function(module, source)
    entry = func.regions[0].blocks[0]
    shapes: list[tuple[int, ...] | None] = []
    dtypes: list[np.dtype] = []
    for a in entry.args:
        t = a.type
        if isinstance(t, RankedTensorType):
            shapes.append(tuple(t.shape) if t.has_static_shape else None)
        else:
            shapes.append(None if isinstance(t, ShapedType) else ())  # a scalar (i32, index, f32)
        try:
            dtypes.append(np.dtype(element_type_to_dtype(t.element_type if isinstance(t, ShapedType) else t)))
        except Exception:
            dtypes.append(np.dtype(np.float32))
    inputs, outputs = io_names(func)
    return Signature(inputs, shapes, dtypes, outputs)


def input_ops(module: Any) -> list[Any]:
    """The ``top.Input`` op of each function argument (None where an argument has none)."""
    from lamina.dialects.top.io import InputOp

    entry = main_function(module).regions[0].blocks[0]
    out = []
    for a in entry.args:
        users = [u.owner for u in a.uses] if hasattr(a, "uses") else []
        op = next((u for u in users if isinstance(u, InputOp)), None)
        out.append(op)
    return out


def weight_names(module: Any) -> set[str]:
    """Location names of the weights and of the absent operand (``top.Weight``, ``tpu.Weight``,
    ``top.None``): left out of tensor dumps. They are the model's plumbing (:class:`NotALayer`) that
    reads nothing; a ``top.Input``, which reads its argument, is dumped under the input's name."""
    from lamina.ir.constants import holds_constant
    from lamina.ir.naming import result_names

    out: set[str] = set()
    for op in module.walk_ops():
        if holds_constant(op):
            out.update(result_names(op))
    return out


def run_top_module(
    module: Any, inputs: Mapping[str, np.ndarray], dump_all: bool = False
) -> dict[str, np.ndarray]:
    """Run a ``top`` module on the interpreter; with ``dump_all`` every tensor except weights, in
    network order with the outputs last-written under their ONNX output names."""
    from lamina.execution import ExecutionError, Interpreter

    try:
        interp = Interpreter(module)
        res = interp.run(dict(inputs), dump_all=dump_all)
    except ExecutionError as e:
        raise ToolError(f"execution failed: {e}") from None
    if dump_all:
        skip = weight_names(module) - set(interp.output_names)
        res = {k: v for k, v in res.items() if k not in skip and v is not None}
    return {k: np.asarray(v) for k, v in res.items()}


def parse_mlir_file(path: str) -> tuple[Any, Any]:
    """Parse and verify a ``.mlir`` file; diagnostics become one ToolError."""
    import lamina.dialects  # noqa: F401
    from lamina.dialects.top.transforms.shape_infer import check_result_types
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.ir.verifier import verify

    check_input_file(path, "model")
    if path.lower().endswith(".onnx"):
        raise ToolError(f"model '{path}' is an ONNX model: give the .mlir that model_transform writes")
    if path.lower().endswith(".tflite"):
        raise ToolError(f"model '{path}' is a TFLite model: give the .mlir that model_transform writes")
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"model '{path}' is not a UTF-8 text .mlir file") from None
    except OSError as e:
        raise ToolError(f"cannot read model '{path}': {e.strerror or e}") from None
    diags: list[str] = []
    ctx = Context(handler=lambda d: diags.append(_format_diag(d)))
    with ctx:
        module = parse_module(text, ctx, filename=path)
        if module is None:
            raise ToolError(f"cannot parse model '{path}':\n" + "\n".join(diags or ["(no diagnostic)"]))
        if not verify(module, ctx):
            raise ToolError(f"model '{path}' does not verify:\n" + "\n".join(diags))
        if not check_result_types(module):
            raise ToolError(f"model '{path}' is inconsistent:\n" + "\n".join(diags))
    return module, ctx


def _format_diag(d: Any) -> str:
    try:
        return str(d)
    except Exception:
        return getattr(d, "message", repr(d))


def import_onnx_file(
    path: str,
    input_shapes: Any = None,
    output_names: Any = None,
) -> tuple[Any, Any]:
    """Import an ONNX file into a ``top`` module; import problems become one ToolError."""
    from lamina.frontends.onnx import OnnxImportError, import_onnx
    from lamina.ir.context import Context

    check_input_file(path, "model")
    ctx = Context(handler=None)
    try:
        module = import_onnx(path, ctx, input_shapes=input_shapes, output_names=output_names or None)
    except OnnxImportError as e:
        raise ToolError(str(e)) from None
    return module, ctx


# ---- inputs --------------------------------------------------------------------------------------


def check_inputs(arrays: Mapping[str, np.ndarray], sig: Signature, source: str) -> dict[str, np.ndarray]:
    """The inputs the model needs, taken from ``arrays`` (read from ``source``), with shapes checked and
    dtypes converted to the model's. A single unnamed array feeds a single-input model; the arrays
    of a file whose names match none of a model that names no input feed it by position."""
    arrays = dict(arrays)
    if len(sig.input_names) == 1 and len(arrays) == 1 and sig.input_names[0] not in arrays:
        arrays = {sig.input_names[0]: next(iter(arrays.values()))}
    elif _unnamed(sig) and len(arrays) == len(sig.input_names) and not set(arrays) & set(sig.input_names):
        arrays = dict(zip(sig.input_names, arrays.values()))  # by position, in file order
    missing = [n for n in sig.input_names if n not in arrays]
    if missing:
        have = ", ".join(f"'{k}'" for k in arrays) or "none"
        raise ToolError(
            f"{source}: missing input(s) {', '.join(repr(m) for m in missing)}; the model expects "
            f"{', '.join(repr(n) for n in sig.input_names)} (the file has {have})"
        )
    out: dict[str, np.ndarray] = {}
    for name, shape, dt in zip(sig.input_names, sig.input_shapes, sig.input_dtypes):
        try:
            a = np.asarray(arrays[name])
        except (ValueError, TypeError) as e:  # ragged nested lists, objects numpy cannot take
            raise ToolError(f"{source}: input '{name}' is not an array: {e}") from None
        if shape is not None and tuple(a.shape) != tuple(shape):
            raise ToolError(
                f"{source}: input '{name}' has shape {list(a.shape)} but the model expects {list(shape)}"
            )
        if a.dtype != dt:
            if not is_numeric(a.dtype) or a.dtype.kind == "c":
                raise ToolError(f"{source}: input '{name}' has dtype {a.dtype}, expected {dt}")
            a = a.astype(dt)
        out[name] = a
    return out


def _unnamed(sig: Signature) -> bool:
    """Whether the model names none of its inputs (``input_0``, ``input_1``…: a hand-written
    function), so that a file's arrays may feed them by position."""
    return sig.input_names == [f"input_{i}" for i in range(len(sig.input_names))]


def ordered(arrays: Mapping[str, np.ndarray], first: Iterable[str]) -> dict[str, np.ndarray]:
    out = {k: arrays[k] for k in first if k in arrays}
    out.update((k, v) for k, v in arrays.items() if k not in out)
    return out

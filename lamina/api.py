"""The Python API: the commands (``model_transform``, ``model_runner``, ``npz_tool compare``,
``run_calibration``, ``model_deploy``) as functions, for notebooks and scripts. They run the same flows
as the commands (:mod:`lamina.flows`).

    import lamina.api as lm

    res = lm.transform("resnet.onnx", input_shapes=[[1, 3, 224, 224]], mean=[123.675, 116.28, 103.53],
                       scale=[0.0171, 0.0175, 0.0174], pixel_format="rgb", test_input="dog.jpg",
                       mlir="out/resnet.mlir")
    res.passed, res.report.summary()

    model = lm.load("out/resnet.mlir")          # or lm.load("resnet.onnx", input_shapes=[[1, 3, 224, 224]])
    outs = model.run({"input": x})                # outputs by ONNX output name
    every = lm.run(model, {"input": x}, dump_all=True)
    report = lm.compare(every, "out/resnet_ref_outputs.npz", tolerance=(0.99, 0.99), html="report.html")

    table = lm.calibrate("out/resnet.mlir", dataset="calib_images/", input_num=100)
    int8 = lm.deploy("out/resnet.mlir", "INT8", calibration_table=table,
                     test_input="out/resnet_in_f32.npz", test_reference="out/resnet_top_outputs.npz")
    int8.passed, int8.run({"input": x}), int8.save("out/resnet_int8_tpu.mlir")

Paths may be ``str``, ``os.PathLike`` or ``bytes``; list arguments also take the commands' string forms
(``input_shapes="[[1,3,224,224]]"``, ``tolerance="0.99,0.99"``, ``mean="0,0,0"``); docs/tools.md lists
every accepted form. Every argument is checked before any work or any file written: errors are raised
as :class:`LaminaError` (a bad argument, file or input) with the same one-line messages the commands
print.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any, Union

import numpy as np

from lamina.compare import CompareReport, TensorResult, compare_sets, parse_tolerance
from lamina.flows.transform import TransformOptions, TransformResult
from lamina.frontends.model_io import (
    Signature,
    check_inputs,
    load_npz,
    module_signature,
)
from lamina.frontends.preprocess import (
    CHANNEL_FORMATS,
    PIXEL_FORMATS,
    PreprocessConfig,
    parse_dtypes,
    parse_floats,
    parse_ints,
    parse_names,
    parse_shapes,
    preprocess_image,
    read_image,
)
from lamina.support.errors import LaminaError
from lamina.support.paths import check_outputs

Arrays = Mapping[str, np.ndarray]
PathLike = Union[str, bytes, "os.PathLike[str]"]
ENGINES = ("onnxruntime", "litert", "lamina")


# ---- argument checking: every bad argument is a LaminaError naming it --------------------------------


def _type_name(v: Any) -> str:
    return "None" if v is None else type(v).__name__


def _path(v: Any, what: str) -> str:
    """A path argument (``str``, ``bytes`` or ``os.PathLike``) as a ``str``."""
    if isinstance(v, (str, bytes, os.PathLike)):
        p = os.fsdecode(os.fspath(v))
        if p:
            return p
        raise LaminaError(f"{what}: the path is empty")
    raise LaminaError(f"{what} must be a path (str or os.PathLike), got {_type_name(v)}")


def _opt_path(v: Any, what: str) -> str | None:
    return None if v is None else _path(v, what)


def _is_path(v: Any) -> bool:
    return isinstance(v, (str, bytes, os.PathLike))


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, (bool, np.bool_))


def _is_real(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, (bool, np.bool_))


def _seq(v: Any, what: str, example: str) -> list[Any]:
    """``v`` as a list when it is a sequence (never a string, never a mapping)."""
    if isinstance(v, (str, bytes, Mapping)) or not isinstance(v, (Sequence, np.ndarray)):
        raise LaminaError(f"{what} must be a list like {example}, got {_type_name(v)} {v!r}")
    return list(v)


def _shape(v: Any, what: str) -> list[int]:
    dims = _seq(v, what, "[1, 3, 224, 224]")
    if not all(_is_int(d) for d in dims):
        raise LaminaError(f"{what} must be a list of integers like [1, 3, 224, 224], got {v!r}")
    if any(d <= 0 for d in dims):
        raise LaminaError(f"{what}: dimensions must be positive, got {[int(d) for d in dims]}")
    return [int(d) for d in dims]


def _shapes(v: Any) -> list[list[int]] | dict[str, list[int]] | None:
    """``input_shapes``: the CLI string ``"[[1,3,224,224],[1,10]]"``, shapes in input order, one shape,
    or shapes by input name."""
    if v is None:
        return None
    if isinstance(v, str):
        return parse_shapes(v)
    if isinstance(v, Mapping):
        if not all(isinstance(k, str) for k in v):
            raise LaminaError(f"input_shapes: the keys must be input names (str), got {list(v)!r}")
        return {k: _shape(s, f"input_shapes['{k}']") for k, s in v.items()}
    shapes = _seq(v, "input_shapes", "[[1, 3, 224, 224]]")
    if not shapes:
        raise LaminaError("input_shapes is empty; expected a list of shapes like [[1, 3, 224, 224]]")
    if all(_is_int(d) for d in shapes):  # one shape, as the CLI takes it
        return [_shape(shapes, "input_shapes")]
    return [_shape(s, f"input_shapes[{i}]") for i, s in enumerate(shapes)]


def _floats(v: Any, what: str) -> list[float] | None:
    """Numbers: a list, one number, or the CLI string ``"0.5,0.5,0.5"``; finite and at least one."""
    if v is None:
        return None
    if isinstance(v, str):
        vals = parse_floats(v, what)
        if vals is None:
            raise LaminaError(f"{what} is empty; expected numbers like 0.5,0.5,0.5")
    elif _is_real(v):
        vals = [float(v)]
    else:
        items = _seq(v, what, "[0.5, 0.5, 0.5]")
        if not all(_is_real(x) for x in items):
            raise LaminaError(f"{what} must be a list of numbers like [0.5, 0.5, 0.5], got {v!r}")
        vals = [float(x) for x in items]
    if not vals:
        raise LaminaError(f"{what} is empty; expected numbers like [0.5, 0.5, 0.5]")
    if not all(math.isfinite(x) for x in vals):
        raise LaminaError(f"{what} must be finite numbers, got {vals}")
    return vals


def _ints(v: Any, what: str) -> list[int] | None:
    if v is None:
        return None
    if isinstance(v, str):
        vals = parse_ints(v, what)
        return vals if vals else _ints([], what)
    items = _seq(v, what, "[256, 256]")
    if not items or not all(_is_int(x) for x in items):
        raise LaminaError(f"{what} must be a list of integers like [256, 256], got {v!r}")
    return [int(x) for x in items]


def _names(v: Any, what: str) -> list[str]:
    """Names: a list of strings or the CLI string ``"a,b"``."""
    if v is None:
        return []
    if isinstance(v, str):
        return parse_names(v)
    items = _seq(v, what, "['a', 'b']")
    if not all(isinstance(x, str) and x for x in items):
        raise LaminaError(f"{what} must be a list of non-empty names (str), got {v!r}")
    return items


def _tolerance(v: Any) -> tuple[float, float]:
    """``(cosine, euclidean)`` similarities, each in [-1, 1]; or the CLI string ``"0.99,0.99"``."""
    if isinstance(v, str):
        try:
            return _tolerance(parse_tolerance(v))
        except ValueError as e:
            raise LaminaError(str(e)) from None
    items = _seq(v, "tolerance", "(0.99, 0.99)")
    if len(items) != 2 or not all(_is_real(x) for x in items):
        raise LaminaError(f"tolerance expects two numbers (cosine, euclidean) like (0.99, 0.99), got {v!r}")
    vals = (float(items[0]), float(items[1]))
    if not all(-1.0 <= x <= 1.0 for x in vals):  # NaN fails too
        raise LaminaError(f"tolerance: similarities lie in [-1, 1], got {vals}")
    return vals


def _choice(v: Any, what: str, choices: Sequence[str], optional: bool = True) -> Any:
    if (v is None and optional) or (isinstance(v, str) and v in choices):
        return v
    raise LaminaError(f"{what} must be one of {', '.join(map(repr, choices))}, got {v!r}")


def _bool(v: Any, what: str) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise LaminaError(f"{what} must be True or False, got {_type_name(v)} {v!r}")
    return bool(v)


def _opt_float(v: Any, what: str) -> float | None:
    """None, or one finite number."""
    if v is None:
        return None
    if not _is_real(v) or not math.isfinite(float(v)):
        raise LaminaError(f"{what} must be a finite number, got {_type_name(v)} {v!r}")
    return float(v)


def _int(v: Any, what: str) -> int:
    if not _is_int(v):
        raise LaminaError(f"{what} must be an integer, got {_type_name(v)} {v!r}")
    return int(v)


def _array(v: Any, what: str) -> np.ndarray:
    try:
        a = np.asarray(v)
    except (ValueError, TypeError) as e:  # ragged nested lists, objects numpy cannot take
        raise LaminaError(f"{what} is not an array: {e}") from None
    if a.dtype.kind == "O":
        raise LaminaError(f"{what} is not an array of numbers (dtype object)")
    return a


def _arrays(v: Any, what: str) -> dict[str, np.ndarray]:
    """A mapping name → array (as compare takes it), or an ``.npz``/``.npy`` path."""
    if _is_path(v):
        return load_npz(_path(v, what), "npz file")
    if not isinstance(v, Mapping):
        raise LaminaError(f"{what} must be arrays by name (a dict) or an .npz path, got {_type_name(v)}")
    bad = [k for k in v if not isinstance(k, str)]
    if bad:
        raise LaminaError(f"{what}: tensor names must be str, got {bad[0]!r}")
    return {k: _array(a, f"{what}: tensor '{k}'") for k, a in v.items()}


class Model:
    """A loaded ``top`` module, ready to run. ``module`` is the IR; ``input_names``/``output_names``
    are the ONNX names; :meth:`run` executes it on the reference interpreter."""

    def __init__(self, module: Any, ctx: Any = None, path: str | None = None) -> None:
        from lamina.ir.core import Operation

        if not isinstance(module, Operation) or module.name != "builtin.module":
            raise LaminaError(f"Model takes a parsed module (use lamina.api.load), got {_type_name(module)}")
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
        self, inputs: Arrays | Sequence[np.ndarray] | np.ndarray | PathLike, dump_all: bool = False
    ) -> dict[str, np.ndarray]:
        """Run on ``inputs`` (by name, in order, one array for a one-input model, or an ``.npz``/``.npy``
        path); returns outputs by name, plus every intermediate tensor (weights excepted) with
        ``dump_all``. A quantized (``tpu``) module's tensors are dequantized to float32, as
        ``model_runner`` gives them."""
        from lamina.flows.run import is_tpu_module
        from lamina.frontends.model_io import run_top_module

        dump_all = _bool(dump_all, "dump_all")
        source = "inputs"
        if _is_path(inputs):
            source = _path(inputs, "inputs")
            inputs = load_npz(source, "input file")
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        elif inputs is None or not isinstance(inputs, (Mapping, Sequence)):
            raise LaminaError(
                "inputs must be arrays by input name (a dict), a list of arrays in input order, one array "
                f"or an .npz path, got {_type_name(inputs)}"
            )
        if isinstance(inputs, Mapping):
            bad = [k for k in inputs if not isinstance(k, str)]
            if bad:
                raise LaminaError(f"inputs: input names must be str, got {bad[0]!r}")
        else:
            inputs = list(inputs)
            if len(inputs) != len(self.input_names):
                raise LaminaError(
                    f"the model has {len(self.input_names)} input(s), got {len(inputs)} array(s)"
                )
            inputs = dict(zip(self.input_names, inputs))
        feeds = check_inputs(inputs, self.signature, source)
        if is_tpu_module(self.module):
            from lamina.quant.deploy import run_tpu_module

            return run_tpu_module(self.module, feeds, dump_all=dump_all)
        return run_top_module(self.module, feeds, dump_all=dump_all)

    def save(self, mlir: PathLike, weights: PathLike | None = None) -> str | None:
        """Write the module (with locations) to ``mlir`` and its weights to ``weights`` (default
        ``<stem>_weights.npz`` next to it). Returns the weight file written, if any."""
        from lamina.flows.transform import write_mlir

        mlir = _path(mlir, "mlir")
        weights = _opt_path(weights, "weights") or f"{os.path.splitext(mlir)[0]}_weights.npz"
        check_outputs([("the model file loaded", self.path)], [("mlir", mlir), ("weights", weights)])
        return write_mlir(self.module, mlir, weights)

    def text(self, generic: bool = False) -> str:
        """The module as MLIR text (weights inline)."""
        from lamina.ir.printer import print_operation

        return print_operation(self.module, generic=_bool(generic, "generic"))

    def __repr__(self) -> str:
        ins = ", ".join(f"{n}: {list(s) if s else '?'}" for n, s in zip(self.input_names, self.input_shapes))
        return f"<lamina Model ({ins}) -> ({', '.join(self.output_names)})>"


def load(
    path: PathLike,
    input_shapes: Sequence[Sequence[int]] | Mapping[str, Sequence[int]] | str | None = None,
    output_names: Sequence[str] | str | None = None,
) -> Model:
    """Load a model: a ``.mlir`` file (``top`` dialect, weights from its weight file), an ``.onnx``
    file (imported; ``output_names`` picks the outputs) or a ``.tflite`` file (imported, NHWC inputs
    and outputs under their TFLite names; ``output_names`` picks the outputs too). ``input_shapes`` (in input order, by name, or
    the CLI string ``"[[1,3,224,224]]"``) sets the input shapes: dynamic dimensions of an ONNX model
    are fixed, a ``.mlir`` module's shapes are re-inferred from them."""
    from lamina.frontends.model_io import import_onnx_file, parse_mlir_file

    path = _path(path, "path")
    shapes = _shapes(input_shapes)
    names = _names(output_names, "output_names")
    if path.endswith(".onnx"):
        if not os.path.exists(path):
            raise LaminaError(f"model '{path}' does not exist")
        module, ctx = import_onnx_file(path, shapes, names)
        return Model(module, ctx, path)
    if path.lower().endswith(".tflite"):
        from lamina.frontends.tflite import import_tflite_file

        if not os.path.exists(path):
            raise LaminaError(f"model '{path}' does not exist")
        module, ctx = import_tflite_file(path, shapes, names or ())
        return Model(module, ctx, path)
    if names:
        raise LaminaError(f"output_names applies to .onnx and .tflite models only; '{path}' is not one")
    module, ctx = parse_mlir_file(path)
    if shapes is not None:
        _reshape_module(module, ctx, shapes, path)
    return Model(module, ctx, path)


def _reshape_module(module: Any, ctx: Any, shapes: list[list[int]] | dict[str, list[int]], path: str) -> None:
    """Give a loaded module's inputs ``shapes`` and re-infer every type (``top-shape-infer``)."""
    from lamina.dialects.top.transforms.shape_infer import infer_shapes
    from lamina.execution.interpreter import find_main
    from lamina.ir.verifier import verify

    sig = module_signature(module)
    if isinstance(shapes, Mapping):
        unknown = [n for n in shapes if n not in sig.input_names]
        if unknown:
            raise LaminaError(
                f"{path}: input_shapes names unknown input(s) {', '.join(map(repr, unknown))}; the model's "
                f"inputs are {', '.join(map(repr, sig.input_names))}"
            )
    elif len(shapes) != len(sig.input_names):
        raise LaminaError(
            f"{path}: input_shapes gives {len(shapes)} shape(s) but the model has {len(sig.input_names)} "
            f"input(s) ({', '.join(map(repr, sig.input_names))})"
        )
    by_name = shapes if isinstance(shapes, Mapping) else dict(zip(sig.input_names, shapes))
    new: list[tuple[int, ...]] = []
    for name, arg in zip(sig.input_names, find_main(module).regions[0].blocks[0].args):
        old = list(getattr(arg.type, "shape", ()) or ())
        want = by_name.get(name)
        if want is None:
            new.append(tuple(old))
            continue
        if getattr(arg.type, "has_rank", True) and len(want) != len(old):
            raise LaminaError(
                f"{path}: input_shapes gives rank {len(want)} for input '{name}' of rank {len(old)} {old}"
            )
        new.append(tuple(want))
    with ctx, ctx.diagnostics.capture() as diags:
        inf = infer_shapes(module, new)
        ok = not inf.failed and verify(module, ctx)
    if not ok:
        detail = "\n".join(str(d) for d in diags) or "(no diagnostic)"
        raise LaminaError(
            f"{path}: the module does not take input shapes {[list(s) for s in new]} "
            f"(inputs {', '.join(map(repr, sig.input_names))}):\n{detail}"
        )


def transform(
    model_def: PathLike,
    *,
    model_name: str | None = None,
    input_shapes: Sequence[Sequence[int]] | str | None = None,
    input_types: Sequence[str] | str | None = None,
    output_names: Sequence[str] | str | None = None,
    mean: Sequence[float] | str | None = None,
    scale: Sequence[float] | str | None = None,
    pixel_format: str | None = None,
    channel_format: str | None = None,
    resize_dims: Sequence[int] | str | None = None,
    keep_aspect_ratio: bool = False,
    pad_value: int = 0,
    test_input: PathLike | Sequence[PathLike] | None = None,
    test_result: PathLike | None = None,
    tolerance: Sequence[float] | str | None = None,
    excepts: Sequence[str] | str = (),
    mlir: PathLike | None = None,
    verbose: bool = False,
) -> TransformResult:
    """``model_transform`` as a function (same names as the flags, and each also takes the flag's
    string form). Returns a :class:`TransformResult` with ``module``, the files written and, with
    ``test_input`` (one path, or one path per input), the comparison ``report``; ``passed`` tells
    whether every tensor is within ``tolerance`` (default ``(0.99, 0.99)``, ``(0.90, 0.80)`` for a
    full-integer TFLite model; ``calibration_table`` is then the table derived from its scales).
    Prints the step commands when ``verbose``."""
    from lamina.flows.transform import transform as run_transform

    if model_name is not None and (not isinstance(model_name, str) or not model_name):
        raise LaminaError(f"model_name must be a non-empty str, got {model_name!r}")
    shapes = _shapes(input_shapes)
    if isinstance(shapes, dict):
        raise LaminaError("transform takes input_shapes in input order (a list of shapes), not by name")
    if test_input is not None and not _is_path(test_input):
        files = _seq(test_input, "test_input", "['a.npy', 'b.jpg']")
        test_input = ",".join(_path(f, f"test_input[{i}]") for i, f in enumerate(files))
    types = _names(input_types, "input_types")
    o = TransformOptions(
        model_def=_path(model_def, "model_def"),
        model_name=model_name,
        input_shapes=shapes,
        input_types=parse_dtypes(",".join(types)),
        output_names=_names(output_names, "output_names"),
        mean=_floats(mean, "mean"),
        scale=_floats(scale, "scale"),
        pixel_format=_choice(pixel_format, "pixel_format", PIXEL_FORMATS),
        channel_format=_choice(channel_format, "channel_format", CHANNEL_FORMATS),
        resize_dims=_ints(resize_dims, "resize_dims"),
        keep_aspect_ratio=_bool(keep_aspect_ratio, "keep_aspect_ratio"),
        pad_value=_int(pad_value, "pad_value"),
        test_input=_opt_path(test_input, "test_input"),
        test_result=_opt_path(test_result, "test_result"),
        tolerance=_tolerance(tolerance) if tolerance is not None else None,
        excepts=_names(excepts, "excepts"),
        mlir=_opt_path(mlir, "mlir"),
    )
    verbose = _bool(verbose, "verbose")
    return run_transform(o, log=print if verbose else None, progress=verbose)


def run(
    model: Model | PathLike,
    inputs: Arrays | Sequence[np.ndarray] | np.ndarray | PathLike,
    dump_all: bool = False,
    output: PathLike | None = None,
    engine: str | None = None,
) -> dict[str, np.ndarray]:
    """``model_runner`` as a function: ``model`` is a :class:`Model` or a ``.mlir``/``.onnx``/``.tflite``
    path, ``inputs`` arrays or an ``.npz`` path. ``engine`` (``.onnx`` and ``.tflite`` paths only):
    ``"onnxruntime"`` (an ``.onnx`` model's default), ``"litert"`` (a ``.tflite`` model's) or
    ``"lamina"``. Saves to ``output`` (an ``.npz``) when given."""
    from lamina.flows.run import run_model_file
    from lamina.frontends.model_io import save_npz

    dump_all = _bool(dump_all, "dump_all")
    output = _opt_path(output, "output")
    engine = _choice(engine, "engine", ENGINES)
    in_path = _path(inputs, "inputs") if _is_path(inputs) else None
    model_path = None if isinstance(model, Model) else _path(model, "model")
    if output:
        loaded = model.path if isinstance(model, Model) else model_path
        check_outputs([("the input file", in_path), ("the input file", loaded)], [("output", output)])
    if isinstance(model, Model):
        if engine is not None:
            raise LaminaError(
                "engine applies to an .onnx or .tflite model path; a loaded Model runs on Lamina"
            )
        res = model.run(in_path or inputs, dump_all)
    else:
        if in_path is not None:
            inputs = in_path
        elif isinstance(inputs, np.ndarray):
            inputs = {"input": inputs}
        elif not isinstance(inputs, Mapping):
            raise LaminaError(
                f"inputs must be arrays by input name (a dict) or an .npz path when the model is a path, "
                f"got {_type_name(inputs)}"
            )
        res = run_model_file(model_path, inputs, dump_all, engine)
    if output:
        save_npz(output, res)
    return res


def compare(
    a: Arrays | PathLike,
    b: Arrays | PathLike,
    tolerance: Sequence[float] | str = (0.99, 0.99),
    excepts: Sequence[str] | str = (),
    html: PathLike | None = None,
) -> CompareReport:
    """``npz_tool compare`` as a function: ``a``/``b`` are arrays by name or ``.npz`` paths;
    ``tolerance`` is ``(cosine, euclidean)`` or ``"0.99,0.99"``. Returns the
    :class:`~lamina.compare.CompareReport` (``passed``, ``failed``, ``summary()``); writes an HTML report
    to ``html`` when given."""
    tol = _tolerance(tolerance)
    skip = _names(excepts, "excepts")
    html = _opt_path(html, "html")
    name_a = _path(a, "a") if _is_path(a) else "a"
    name_b = _path(b, "b") if _is_path(b) else "b"
    if html:
        sources = [
            ("the input file", name_a if _is_path(a) else None),
            ("the input file", name_b if _is_path(b) else None),
        ]
        check_outputs(sources, [("html", html)])
    report = compare_sets(_arrays(a, "a"), _arrays(b, "b"), tol, skip, name_a=name_a, name_b=name_b)
    if html:
        from lamina.support.fileio import atomic_write
        from lamina.tools.npz_tool import render_html

        atomic_write(html, render_html(report))
    return report


def compare_tensors(
    name: str,
    a: np.ndarray,
    b: np.ndarray,
    tolerance: Sequence[float] | str = (0.99, 0.99),
    close_order: int = 3,
) -> TensorResult:
    """Compare two tensors as ``npz_tool compare`` does (see :mod:`lamina.compare` for the verdicts)."""
    from lamina.compare import compare_tensors as compare_pair

    if not isinstance(name, str):
        raise LaminaError(f"name must be a str, got {_type_name(name)}")
    if _int(close_order, "close_order") < 1:
        raise LaminaError(f"close_order must be at least 1, got {close_order}")
    return compare_pair(name, _array(a, "a"), _array(b, "b"), _tolerance(tolerance), close_order)


def preprocess(
    image: PathLike | np.ndarray,
    shape: Sequence[int] | str,
    *,
    mean: Sequence[float] | str | None = None,
    scale: Sequence[float] | str | None = None,
    pixel_format: str = "bgr",
    channel_format: str = "nchw",
    resize_dims: Sequence[int] | str | None = None,
    keep_aspect_ratio: bool = False,
    pad_value: int = 0,
) -> np.ndarray:
    """TPU-MLIR preprocessing of one image (a file, or an ``HxWxC``/``HxW`` array already in
    ``pixel_format`` order) into a float32 input of ``shape`` (4-D)."""
    shapes = _shapes(shape)
    if not isinstance(shapes, list) or len(shapes) != 1 or len(shapes[0]) != 4:
        raise LaminaError(f"shape must be one 4-D shape like [1, 3, 224, 224], got {shape!r}")
    cfg = PreprocessConfig(
        mean=_floats(mean, "mean"),
        scale=_floats(scale, "scale"),
        pixel_format=_choice(pixel_format, "pixel_format", PIXEL_FORMATS, optional=False),
        channel_format=_choice(channel_format, "channel_format", CHANNEL_FORMATS, optional=False),
        resize_dims=_ints(resize_dims, "resize_dims"),
        keep_aspect_ratio=_bool(keep_aspect_ratio, "keep_aspect_ratio"),
        pad_value=_int(pad_value, "pad_value"),
    )
    cfg.validate()
    if _is_path(image):
        img = read_image(_path(image, "image"), pixel_format)
    elif isinstance(image, np.ndarray):
        img = image
        if img.ndim not in (2, 3) or img.size == 0 or img.dtype.kind not in "biuf":
            raise LaminaError(
                f"image must be a non-empty HxWxC (or HxW) array of numbers, got shape {list(img.shape)} "
                f"dtype {img.dtype}"
            )
    else:
        raise LaminaError(f"image must be an image file path or an HxWxC array, got {_type_name(image)}")
    return preprocess_image(img, cfg, shapes[0])


# ---- quantization: calibrate and deploy ----------------------------------------------------------------


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise LaminaError(f"{what} must be a str, got {_type_name(v)} {v!r}")
    return v


def _model_source(model: Any, what: str = "model") -> tuple[str | None, Any, Any]:
    """``(path, module, ctx)`` of a ``top`` model given as a :class:`Model` or a ``.mlir`` path."""
    if isinstance(model, Model):
        return model.path, model.module, model.ctx
    path = _path(model, what)
    if path.lower().endswith(".onnx"):
        raise LaminaError(f"{what} '{path}' is an ONNX model: give the .mlir of transform (or its Model)")
    return path, None, None


def _samples(v: Any, input_names: Sequence[str] | None = None) -> list[dict[str, np.ndarray]]:
    """Calibration samples: a list of samples, each arrays by input name, a list of arrays in input
    order, or one array (a one-input model)."""
    items = _seq(v, "samples", "[{'input': x0}, {'input': x1}]")
    out: list[dict[str, np.ndarray]] = []
    for i, s in enumerate(items):
        what = f"samples[{i}]"
        if isinstance(s, Mapping):
            bad = [k for k in s if not isinstance(k, str)]
            if bad:
                raise LaminaError(f"{what}: input names must be str, got {bad[0]!r}")
            out.append({k: _array(a, f"{what}: input '{k}'") for k, a in s.items()})
        elif isinstance(s, np.ndarray):
            out.append({"": _array(s, what)})  # a single unnamed array feeds a one-input model
        elif isinstance(s, (list, tuple)) and input_names is not None:
            if len(s) != len(input_names):
                raise LaminaError(f"{what}: the model has {len(input_names)} input(s), got {len(s)} array(s)")
            out.append({n: _array(a, f"{what}[{j}]") for j, (n, a) in enumerate(zip(input_names, s))})
        else:
            raise LaminaError(
                f"{what} must be arrays by input name (a dict), a list of arrays or one array, "
                f"got {_type_name(s)}"
            )
    return out


def calibrate(
    model: Model | PathLike,
    dataset: PathLike | None = None,
    *,
    samples: Sequence[Any] | None = None,
    data_list: PathLike | None = None,
    input_num: int = 0,
    calibration_method: str = "kl",
    tune_num: int = 5,
    histogram_bin_num: int = 2048,
    outlier_ratio: float | None = None,
    asym_tail: float | None = None,
    calibration_table: PathLike | None = None,
    verbose: bool = False,
    mask_input: str | None = "auto",
    conv_outlier_ratio: float | None = None,
) -> Any:
    """``run_calibration`` as a function (same names as the flags): the calibration table of a ``top``
    model (a :class:`Model` or a ``.mlir`` path) from ``dataset`` (a directory of samples),
    ``data_list`` (a file listing them) or ``samples`` in memory (each arrays by input name, a list
    of arrays in input order, or one array). Returns the
    :class:`~lamina.dialects.tpu.tables.CalibrationTable` (pass it to :func:`deploy`); writes it to
    ``calibration_table`` when given. Shows progress and notes when ``verbose``. ``mask_input``:
    the attention-mask input whose kept positions the statistics count ("auto": detected; an input
    name; None or "none": every position)."""
    from lamina.flows.calibrate import calibrate_file
    from lamina.quant.methods import METHODS

    path, module, _ = _model_source(model)
    method = calibration_method.lower() if isinstance(calibration_method, str) else calibration_method
    if isinstance(method, str) and method.startswith("use_"):
        method = method[4:]
    method = _choice(method, "calibration_method", tuple(METHODS), optional=False)
    if samples is not None:
        names = list(model.input_names) if isinstance(model, Model) else None
        if names is None:
            from lamina.frontends.model_io import parse_mlir_file

            module, _ = parse_mlir_file(path or "")
            names = module_signature(module, f"model '{path}'").input_names
        samples = _samples(samples, names)
    for what, v in (
        ("outlier_ratio", outlier_ratio),
        ("conv_outlier_ratio", conv_outlier_ratio),
        ("asym_tail", asym_tail),
    ):
        if v is not None and not _is_real(v):
            raise LaminaError(f"{what} must be a number, got {_type_name(v)} {v!r}")
    verbose = _bool(verbose, "verbose")
    if mask_input is not None and not isinstance(mask_input, str):
        raise LaminaError(f"mask_input must be an input name, 'auto' or 'none', got {_type_name(mask_input)}")
    res = calibrate_file(
        path,
        dataset=_opt_path(dataset, "dataset"),
        data_list=_opt_path(data_list, "data_list"),
        input_num=_int(input_num, "input_num"),
        method=method,
        tune_num=_int(tune_num, "tune_num"),
        histogram_bin_num=_int(histogram_bin_num, "histogram_bin_num"),
        calibration_table=_opt_path(calibration_table, "calibration_table"),
        progress=verbose,
        log=print if verbose else None,
        outlier_ratio=None if outlier_ratio is None else float(outlier_ratio),
        conv_outlier_ratio=None if conv_outlier_ratio is None else float(conv_outlier_ratio),
        asym_tail=None if asym_tail is None else float(asym_tail),
        mask_input=mask_input,
        module=module,
        samples=samples,
    )
    return res.table


class DeployedModel(Model):
    """A model lowered to the quantized ``tpu`` IR by :func:`deploy`: runs (outputs dequantized to
    float32) and saves like any :class:`Model`; ``result`` is the deployment (files written,
    ``outputs`` on ``test_input``, the comparison ``report`` with ``test_reference``, ``passed``,
    the first ``diverging`` layers)."""

    def __init__(self, result: Any, ctx: Any = None) -> None:
        super().__init__(result.module, ctx, result.tpu_mlir)
        self.result = result

    @property
    def report(self) -> CompareReport | None:
        return self.result.report

    @property
    def passed(self) -> bool:
        return bool(self.result.passed)

    @property
    def diverging(self) -> list[str]:
        return list(self.result.diverging)

    @property
    def outputs(self) -> dict[str, np.ndarray] | None:
        return self.result.outputs

    @property
    def compiled(self) -> Any:
        """The compiled model (a :class:`lamina.runtime.CompiledModel`) for a processor with a
        target, else None."""
        return self.result.compiled

    @property
    def placement(self) -> dict[str, str]:
        """Where each layer runs on the compiled target (layer name → ``npu``/``cpu``...)."""
        return dict(self.result.placement)


def deploy(
    model: Model | PathLike,
    quantize: str,
    *,
    calibration_table: Any = None,
    quantize_table: Mapping[str, str] | PathLike | None = None,
    asymmetric: bool = False,
    int_forms: str = "default",
    processor: str = "cpu",
    test_input: Arrays | PathLike | None = None,
    test_reference: Arrays | PathLike | None = None,
    tolerance: Sequence[float] | str | None = None,
    excepts: Sequence[str] | str = (),
    compare_all: bool = False,
    output: PathLike | None = None,
    verbose: bool = False,
    chip_config: PathLike | None = None,
    disable_layer_group: bool = False,
    task: str | None = None,
    task_threshold: float | None = None,
    task_tolerance: float | None = None,
    export_lib: bool = False,
    mask_input: str | None = "auto",
) -> DeployedModel:
    """``model_deploy`` as a function (same names as the flags): lower a ``top`` model (a :class:`Model`,
    left untouched, or a ``.mlir`` path) to the quantized ``tpu`` IR in ``quantize`` mode (F32, F16,
    BF16, INT8). ``calibration_table``: a path or the table :func:`calibrate` returns (INT8 needs
    one); ``quantize_table``: a path or a mapping ``op name -> mode``; ``test_input`` /
    ``test_reference``: paths or arrays by name, to run the result and compare it under ``tolerance``
    (the mode's default as ``model_deploy``'s). ``output`` (``model_deploy --model``) writes
    ``<prefix>_tpu.mlir``, its weights and, with ``test_input``, ``<prefix>_tpu_outputs.npz``; for a
    processor with a compiled target (``lnpu``, ``lnpu-edge``; ``chip_config``: a chip JSON file) also
    the compiled ``.lamina`` file (``output`` itself when it ends in ``.lamina`` or ``.bmodel``),
    checked against the interpreter on ``test_input``. ``disable_layer_group``: NPU — every op alone.
    ``export_lib``: CPU — also ``<prefix>.so`` and ``<prefix>.h``, the model as a C library.
    ``task`` (``cls``, ``det``, ``seg``, ``ocr``, ``embed``; needs both test sets): the outputs also
    compared as the task reads them (``result.task_reports``), failing under ``task_tolerance``.
    ``mask_input``: the attention-mask input whose kept positions (in ``test_input``) the
    comparison counts ("auto": detected; None or "none": every position).
    ``int_forms``: INT8's optional integer forms (``model_deploy --int_forms``).
    Returns a :class:`DeployedModel`; prints the step commands when ``verbose``."""
    from lamina.dialects.tpu.tables import CalibrationTable
    from lamina.flows.deploy import DeployOptions
    from lamina.flows.deploy import deploy as run_deploy

    path, module, ctx = _model_source(model)
    table = calibration_table
    if table is not None and not isinstance(table, CalibrationTable):
        table = _path(table, "calibration_table")
    qtable: Any = quantize_table
    if qtable is not None and not isinstance(qtable, Mapping):
        qtable = _path(qtable, "quantize_table")

    def arrays(v: Any, what: str) -> Any:
        return None if v is None else (_path(v, what) if _is_path(v) else _arrays(v, what))

    o = DeployOptions(
        mlir=path,
        quantize=_str(quantize, "quantize"),
        model=_opt_path(output, "output"),
        processor=_str(processor, "processor"),
        asymmetric=_bool(asymmetric, "asymmetric"),
        int_forms=_str(int_forms, "int_forms"),
        calibration_table=table,
        quantize_table=qtable,
        test_input=arrays(test_input, "test_input"),
        test_reference=arrays(test_reference, "test_reference"),
        tolerance=None if tolerance is None else _tolerance(tolerance),
        compare_all=_bool(compare_all, "compare_all"),
        excepts=_names(excepts, "excepts"),
        chip_config=_opt_path(chip_config, "chip_config"),
        disable_layer_group=_bool(disable_layer_group, "disable_layer_group"),
        export_lib=_bool(export_lib, "export_lib"),
        task=None if task is None else _str(task, "task"),
        task_threshold=_opt_float(task_threshold, "task_threshold"),
        task_tolerance=_opt_float(task_tolerance, "task_tolerance"),
        mask_input=None if mask_input is None else _str(mask_input, "mask_input"),
    )
    verbose = _bool(verbose, "verbose")
    res = run_deploy(o, log=print if verbose else None, module=module, ctx=ctx)
    return DeployedModel(res, ctx)


__all__ = [
    "CompareReport",
    "DeployedModel",
    "LaminaError",
    "Model",
    "TensorResult",
    "TransformResult",
    "calibrate",
    "compare",
    "compare_tensors",
    "deploy",
    "load",
    "preprocess",
    "run",
    "transform",
]

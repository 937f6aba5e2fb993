"""Running a TFLite model on LiteRT (``ai-edge-litert``, the reference ``model_transform`` compares
with), with every intermediate tensor on request, a TFLite model's signature, the view of a Lamina
tensor dump in TFLite's layout, and ``model_runner`` on a ``.tflite`` file (:func:`run_tflite_file`:
LiteRT, or Lamina's import and interpreter).

A quantized model's tensors are compared as the imported ``top`` model holds them: LiteRT's
quantized tensors dequantized to their real values (:func:`reference_view`), the model's outputs
in the model's own type on both sides.

Problems are a :class:`~lamina.support.errors.ToolError` naming the model.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from lamina.frontends.model_io import Signature, check_inputs, ordered
from lamina.support.errors import ToolError

from .quantization import dequantized_dumps
from .reader import TfliteImportError, TfliteModel, load_model, parse_model, read_bytes
from .registry import TO_NHWC

#: the engines that run a .tflite model: LiteRT (the default) or Lamina (import, then interpret)
ENGINES = ("litert", "lamina")


def tflite_signature(model: TfliteModel) -> Signature:
    """The inputs and outputs of subgraph 0."""
    ins = [model.tensors[i] for i in model.inputs]
    return Signature(
        [t.name for t in ins],
        [tuple(t.shape) if all(d > 0 for d in t.shape) else None for t in ins],
        [t.dtype for t in ins],
        [model.tensors[i].name for i in model.outputs],
    )


def run_litert(
    data: bytes, feeds: Mapping[str, np.ndarray], dump_all: bool = False, source: str = "model"
) -> dict[str, np.ndarray]:
    """Run a ``.tflite`` model (its bytes) on LiteRT's interpreter (no delegate, so that every
    intermediate tensor is kept). Outputs, and with ``dump_all`` every tensor an operator produces,
    keyed by tensor name (as the reader names them) in TFLite's layout."""
    try:
        from ai_edge_litert.interpreter import Interpreter, OpResolverType
    except ImportError:
        raise ToolError("LiteRT is not installed (pip install ai-edge-litert)") from None
    try:
        it = Interpreter(
            model_content=data,
            experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            experimental_preserve_all_tensors=dump_all,
        )
        it.allocate_tensors()
    except (RuntimeError, ValueError) as e:
        raise ToolError(f"LiteRT cannot load '{source}': {str(e).strip().splitlines()[0]}") from None
    # keyed by the importer's names (the reader makes repeated or empty names unique)
    try:
        names = [t.name for t in parse_model(data, source).tensors]
    except TfliteImportError as e:
        raise ToolError(str(e)) from None
    for d in it.get_input_details():
        name = names[d["index"]]
        if name not in feeds:
            raise ToolError(f"'{source}': no value for input '{name}'")
        it.set_tensor(d["index"], np.asarray(feeds[name], dtype=d["dtype"]))
    try:
        it.invoke()
    except RuntimeError as e:
        raise ToolError(f"LiteRT failed to run '{source}': {str(e).strip().splitlines()[0]}") from None
    res: dict[str, np.ndarray] = {}
    if dump_all:
        produced = {int(i) for op in it._get_ops_details() for i in op["outputs"]}
        for d in it.get_tensor_details():
            if d["index"] in produced:
                try:
                    res[names[d["index"]]] = np.array(it.get_tensor(d["index"]))
                except ValueError:
                    continue  # a tensor LiteRT did not keep
    for d in it.get_output_details():
        res[names[d["index"]]] = np.array(it.get_tensor(d["index"]))
    return res


def tflite_layout_view(dumps: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A Lamina tensor dump of an imported TFLite model in TFLite's layout: each rank-4 tensor
    ``<name>_nchw`` (the NCHW value of TFLite tensor ``<name>``, see :mod:`.importer`) is added as
    ``<name>`` in NHWC where the dump has no ``<name>`` of its own."""
    out = dict(dumps)
    for k, v in dumps.items():
        if k.endswith("_nchw") and np.ndim(v) == 4:
            base = k[: -len("_nchw")]
            if base not in out:
                out[base] = np.ascontiguousarray(np.transpose(v, TO_NHWC))
    return out


def reference_view(model: TfliteModel, dumps: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """LiteRT's tensors as the imported model holds them: quantized ones dequantized to their real
    values, except the model's outputs (returned in the model's own type by both)."""
    return dequantized_dumps(model, dumps, keep=[model.tensors[i].name for i in model.outputs])


def run_tflite_file(
    path: str,
    arrays: Mapping[str, np.ndarray],
    dump_all: bool = False,
    engine: str | None = None,
    source: str = "inputs",
) -> dict[str, np.ndarray]:
    """``model_runner`` on a ``.tflite`` file: LiteRT (``engine`` None or ``"litert"``), or Lamina's
    import of the model on its interpreter (``"lamina"``). Inputs are checked against the model's
    (names, shapes; dtypes converted). Outputs by TFLite name in TFLite's layout, and with
    ``dump_all`` every tensor, a quantized model's as :func:`reference_view` gives them, so that both
    engines' dumps compare with each other (and with ``model_transform``'s)."""
    if engine not in (None, *ENGINES):
        raise ToolError(f"--engine {engine} cannot run the TFLite model '{path}' (use litert or lamina)")
    try:
        model = load_model(path)
    except TfliteImportError as e:
        raise ToolError(str(e)) from None
    sig = tflite_signature(model)
    feeds = check_inputs(arrays, sig, source)
    if engine == "lamina":
        from lamina.frontends.model_io import run_top_module

        from .importer import load_tflite

        res = tflite_layout_view(run_top_module(load_tflite(path).module, feeds, dump_all))
    else:
        res = reference_view(model, run_litert(read_bytes(path), feeds, dump_all, source=path))
    return ordered(res, sig.output_names) if not dump_all else res

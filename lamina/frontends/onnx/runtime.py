"""Running an ONNX model on onnxruntime (the reference ``model_transform`` and ``model_runner`` compare
with), with every intermediate tensor on request, and an ONNX model's signature.

Problems are a :class:`~lamina.support.errors.ToolError` naming the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from lamina.frontends.model_io import Signature
from lamina.support.errors import ToolError


def onnx_signature(model: Any) -> Signature:
    """The inputs (initializers left out) and outputs of an ONNX ModelProto."""
    from onnx import helper

    inits = {t.name for t in model.graph.initializer}
    names, shapes, dtypes = [], [], []
    for i in model.graph.input:
        if i.name in inits:
            continue
        names.append(i.name)
        tt = i.type.tensor_type
        dims = (
            [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            if tt.HasField("shape")
            else None
        )
        shapes.append(tuple(dims) if dims is not None and all(d > 0 for d in dims) else None)
        try:
            dtypes.append(np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))
        except Exception:
            dtypes.append(np.dtype(np.float32))
    return Signature(names, shapes, dtypes, [o.name for o in model.graph.output])


def onnx_intermediate_names(model: Any) -> list[str]:
    """Every tensor produced by a top-level node, in graph order."""
    seen: set[str] = set()
    names: list[str] = []
    for node in model.graph.node:
        for o in node.output:
            if o and o not in seen:
                seen.add(o)
                names.append(o)
    return names


def run_onnxruntime(
    model: Any, feeds: Mapping[str, np.ndarray], dump_all: bool = False, source: str = "model"
) -> dict[str, np.ndarray]:
    """Run an ONNX ModelProto with onnxruntime (CPU). With ``dump_all`` every intermediate tensor of the
    top-level graph is added as an output (on a copy of the model), keyed by its tensor name."""
    import onnx

    try:
        import onnxruntime as ort
    except ImportError:
        raise ToolError("onnxruntime is not installed (pip install onnxruntime)") from None
    out_names = [o.name for o in model.graph.output]
    m = model
    if dump_all:
        m = onnx.ModelProto()
        m.CopyFrom(model)
        existing = set(out_names)
        for name in onnx_intermediate_names(model):
            if name not in existing:
                m.graph.output.append(onnx.ValueInfoProto(name=name))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    except Exception as e:
        if dump_all:  # some graphs reject extra outputs: fall back to the model's own outputs
            return run_onnxruntime(model, feeds, False, source)
        raise ToolError(f"onnxruntime cannot load '{source}': {_first_line(e)}") from None
    inputs = {i.name for i in sess.get_inputs()}
    names = [o.name for o in sess.get_outputs()]
    try:
        vals = sess.run(names, {k: v for k, v in feeds.items() if k in inputs})
    except Exception as e:
        raise ToolError(f"onnxruntime failed to run '{source}': {_first_line(e)}") from None
    res: dict[str, np.ndarray] = {}
    for n, v in zip(names, vals):
        if isinstance(v, np.ndarray):
            res[n] = v
    return res


def _first_line(e: BaseException) -> str:
    s = str(e).strip()
    return s if len(s) < 600 else s[:600] + " ..."

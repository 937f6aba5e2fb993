"""Helpers to build small ONNX models and run them with onnxruntime (tests, benchmarks, compare tools)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np


def single_node_model(
    op_type: str,
    inputs: Mapping[str, np.ndarray | None],
    attrs: Mapping[str, Any] | None = None,
    n_outputs: int = 1,
    opset: int = 18,
    initializers: Sequence[str] = (),
    domain: str = "",
) -> Any:
    """A model with one ``op_type`` node. ``inputs`` maps input names to example arrays (their dtype
    and shape become the graph input types; None means an absent optional input); names listed in
    ``initializers`` become initializers instead of graph inputs. Outputs are ``y0, y1, ...``."""
    import onnx
    from onnx import helper, numpy_helper

    g_inputs, inits, names = [], [], []
    for name, arr in inputs.items():
        if arr is None:
            names.append("")
            continue
        names.append(name)
        if name in initializers:
            inits.append(numpy_helper.from_array(np.asarray(arr), name))
        else:
            et = helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype)
            g_inputs.append(helper.make_tensor_value_info(name, et, np.asarray(arr).shape))
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(
        op_type, names, outs, name=f"{op_type.lower()}_node", domain=domain, **dict(attrs or {})
    )
    graph = helper.make_graph(
        [node],
        f"{op_type}_graph",
        g_inputs,
        [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outs],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return onnx.shape_inference.infer_shapes(model)


def run_onnxruntime(model: Any, feeds: Mapping[str, np.ndarray], threads: int = 1) -> dict[str, np.ndarray]:
    """Run ``model`` with onnxruntime on the CPU; returns outputs by name."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, dict(feeds))))

"""The small ONNX model the ``lamina.api`` tests share: ``x[batch,4] @ W[4,3] -> Sigmoid -> y``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10


def sigmoid_mm(x: np.ndarray) -> np.ndarray:
    """What the model computes."""
    return 1 / (1 + np.exp(-(x @ W)))


def save_mlp(path: Path) -> str:
    """Write the model to ``path`` (an ``.onnx``); returns the path as a string."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(
        [
            helper.make_node("MatMul", ["x", "W"], ["mm"], name="matmul"),
            helper.make_node("Sigmoid", ["mm"], ["y"], name="sigmoid"),
        ],
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(W, "W")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)

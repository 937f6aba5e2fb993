"""Small ONNX models for the command tests (built with onnx.helper, saved under tmp_path)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def _onnx():
    return pytest.importorskip("onnx")


def _save(model, path: Path) -> str:
    model.ir_version = 8
    _onnx().save(model, str(path))
    return str(path)


def conv_relu_add_model(path: Path) -> str:
    """x[N,3,8,8] -> Conv(4) -> c; Relu(c) -> r; r + c -> y. Batch is symbolic."""
    TensorProto, helper, numpy_helper = _imports()
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Add", ["r", "c"], ["y"], name="add"),
    ]
    g = helper.make_graph(
        nodes,
        "conv_relu_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
    )
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def two_input_model(path: Path) -> str:
    """a[1,4] (float), b[1,4] (float): s = a + b; m = s * a; outputs s and m."""
    TensorProto, helper, numpy_helper = _imports()  # noqa: RUF059
    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "a"], ["m"], name="mul"),
    ]
    g = helper.make_graph(
        nodes,
        "two_inputs",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4]),
        ],
        [
            helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 4]),
        ],
    )
    return _save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def unsupported_model(path: Path) -> str:
    """Relu followed by an op type no converter knows (custom domain), used twice."""
    TensorProto, helper, numpy_helper = _imports()  # noqa: RUF059
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("FancyOp", ["r"], ["f1"], name="fancy_1", domain="com.example"),
        helper.make_node("FancyOp", ["f1"], ["y"], name="fancy_2", domain="com.example"),
    ]
    g = helper.make_graph(
        nodes,
        "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    m = helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)]
    )
    return _save(m, path)


def _imports():
    onnx = _onnx()
    return onnx.TensorProto, onnx.helper, onnx.numpy_helper


@pytest.fixture
def conv_model(tmp_path: Path) -> str:
    return conv_relu_add_model(tmp_path / "conv.onnx")


@pytest.fixture
def two_input(tmp_path: Path) -> str:
    return two_input_model(tmp_path / "two.onnx")


@pytest.fixture
def unsupported(tmp_path: Path) -> str:
    return unsupported_model(tmp_path / "bad.onnx")

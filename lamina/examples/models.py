"""Built-in example models, generated (not downloaded): small, deterministic, ONNX."""

from __future__ import annotations

import numpy as np

from lamina.support.fileio import atomic_write


def build_example_cnn(path: str, seed: int = 0) -> str:
    """A ResNet-style block with a classifier head, written to ``path`` as ONNX (opset 17):

    input[1,3,32,32] → Conv3x3 → BatchNorm → Relu → Conv3x3 → Add(skip) → Relu → MaxPool
    → GlobalAveragePool → Flatten → Gemm → Softmax → ``prob``.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)

    def w(name: str, *shape: int, scale: float = 0.2) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    c = 16
    inits = [
        w("stem.weight", c, 3, 3, 3),
        w("stem.bias", c),
        numpy_helper.from_array((1 + 0.1 * rng.standard_normal(c)).astype(np.float32), "bn.scale"),
        w("bn.bias", c, scale=0.1),
        w("bn.mean", c, scale=0.1),
        numpy_helper.from_array((1 + 0.2 * rng.random(c)).astype(np.float32), "bn.var"),
        w("block.weight", c, c, 3, 3, scale=0.1),
        w("block.bias", c),
        w("fc.weight", 10, c, scale=0.5),
        w("fc.bias", 10),
    ]
    nodes = [
        helper.make_node(
            "Conv", ["input", "stem.weight", "stem.bias"], ["stem"], "stem_conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node(
            "BatchNormalization", ["stem", "bn.scale", "bn.bias", "bn.mean", "bn.var"], ["bn"], "bn"
        ),
        helper.make_node("Relu", ["bn"], ["relu1"], "relu1"),
        helper.make_node(
            "Conv", ["relu1", "block.weight", "block.bias"], ["block"], "block_conv", pads=[1, 1, 1, 1]
        ),
        helper.make_node("Add", ["block", "relu1"], ["residual"], "residual_add"),
        helper.make_node("Relu", ["residual"], ["relu2"], "relu2"),
        helper.make_node("MaxPool", ["relu2"], ["pool"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["pool"], ["gap"], "gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], "flatten"),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], "fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], "softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "lamina_example_cnn",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="lamina")
    onnx.checker.check_model(model)
    atomic_write(path, model.SerializeToString())
    return path


def example_input(seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)

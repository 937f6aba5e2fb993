"""Shape inference never executes ops: a model on a 1x64x4096x4096 float32 input (4 GiB) gets ranked
types for every result while Python allocates almost nothing; every op has a closed-form rule."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lamina.dialects.top import ALL_OPS  # noqa: E402
from lamina.dialects.top.base import TopOp  # noqa: E402
from lamina.frontends.onnx import import_onnx  # noqa: E402
from lamina.ir.types import RankedTensorType  # noqa: E402


def _big_model() -> onnx.ModelProto:
    ints = lambda name, v: numpy_helper.from_array(np.asarray(v, np.int64), name)  # noqa: E731
    inits = [
        numpy_helper.from_array(np.ones((8, 64, 1, 1), np.float32), "w"),
        numpy_helper.from_array(np.ones(4096, np.float32), "ln_w"),
        ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]),
        ints("starts", [0]),
        ints("ends", [1024]),
        ints("axes2", [2]),
        ints("axes0", [0]),
        ints("idx", [0, 1]),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["conv"]),
        helper.make_node("MaxPool", ["conv"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Pad", ["pool", "pads"], ["pad"]),
        helper.make_node("Slice", ["pad", "starts", "ends", "axes2"], ["slice"]),
        helper.make_node("Unsqueeze", ["slice", "axes0"], ["unsq"]),
        helper.make_node("Squeeze", ["unsq", "axes0"], ["sq"]),
        helper.make_node("Flatten", ["sq"], ["flat"], axis=2),
        helper.make_node("Gather", ["flat", "idx"], ["gather"], axis=0),
        helper.make_node("Split", ["gather"], ["s0", "s1"], axis=0, num_outputs=2),
        helper.make_node("LayerNormalization", ["x", "ln_w"], ["ln"], axis=-1),
        helper.make_node("DepthToSpace", ["x"], ["d2s"], blocksize=2),
    ]
    outs = ["s0", "s1", "ln", "d2s"]
    graph = helper.make_graph(
        nodes,
        "big",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 4096, 4096])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def test_big_tensor_gets_ranked_shapes_without_allocating() -> None:
    model = _big_model()
    tracemalloc.start()
    try:
        module = import_onnx(model)
        ops = [op for op in module.walk_ops() if isinstance(op, TopOp) and op.name != "top.Weight"]
        inferred = {op.name: op.infer_shapes() for op in ops}
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, f"shape inference allocated {peak} bytes"
    want = {
        "top.Conv": [(1, 8, 4096, 4096)],
        "top.MaxPool": [(1, 8, 2048, 2048), None],
        "top.Pad": [(1, 8, 2050, 2050)],
        "top.Slice": [(1, 8, 1024, 2050)],
        "top.Unsqueeze": [(1, 1, 8, 1024, 2050)],
        "top.Squeeze": [(1, 8, 1024, 2050)],
        "top.Flatten": [(8, 1024 * 2050)],
        "top.Gather": [(2, 1024 * 2050)],
        "top.Split": [(1, 1024 * 2050), (1, 1024 * 2050)],
        "top.LayerNorm": [(1, 64, 4096, 4096), (1, 64, 4096, 1), (1, 64, 4096, 1)],
        "top.DepthToSpace": [(1, 16, 8192, 8192)],
    }
    for name, shapes in want.items():
        got = inferred[name]
        for t, s in zip(got, shapes):
            if s is not None:
                assert isinstance(t, RankedTensorType) and t.shape == s, (name, str(t))
    for op in ops:  # and the imported module carries them
        for r in op.results:
            assert not hasattr(r.type, "has_rank") or r.type.has_rank or op.name == "top.Input", op.name


def test_every_op_has_a_shape_rule() -> None:
    """No op relies on the default rule unless its result is its input's type or its shapes are
    known only at run time (data-dependent, regions): every other op has a closed-form rule."""
    plumbing = ("top.Input", "top.None", "top.Weight", "top.Yield")
    for c in ALL_OPS:
        if c.infer_shapes is TopOp.infer_shapes:
            assert c.result_like_input or c.data_dependent or c.name in plumbing, c.name

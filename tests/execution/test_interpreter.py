"""The reference interpreter: execution plan, output naming, tensor dumps, memory release, errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lamina.execution import ExecutionError, Interpreter, run_module  # noqa: E402
from lamina.frontends.onnx import import_onnx  # noqa: E402
from lamina.ir.context import Context  # noqa: E402


def _chain_model():
    w = numpy_helper.from_array(np.full((3, 3), 0.5, np.float32), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h1"], name="mm"),
        helper.make_node("Relu", ["h1"], ["h2"], name="relu"),
        helper.make_node("Add", ["h2", "x"], ["out_a"], name="add"),
        helper.make_node("Sigmoid", ["h1"], ["out_b"], name="sig"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [
            helper.make_tensor_value_info("out_a", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("out_b", TensorProto.FLOAT, [2, 3]),
        ],
        initializer=[w],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return import_onnx(m, Context(handler=None), filename="chain.onnx")


def test_outputs_keyed_by_onnx_names_and_positional_inputs() -> None:
    module = _chain_model()
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    interp = Interpreter(module)
    assert interp.input_names == ["x"] and interp.output_names == ["out_a", "out_b"]
    h1 = x @ np.full((3, 3), 0.5, np.float32)
    for out in (interp.run({"x": x}), interp.run([x]), run_module(module, [x])):
        assert set(out) == {"out_a", "out_b"}
        np.testing.assert_allclose(out["out_a"], np.maximum(h1, 0) + x)
        np.testing.assert_allclose(out["out_b"], 1 / (1 + np.exp(-h1)), rtol=1e-6)


def test_dump_all_tensors_by_location_name() -> None:
    module = _chain_model()
    x = np.ones((2, 3), np.float32)
    out = Interpreter(module).run({"x": x}, dump_all=True)
    assert {"x", "w", "h1", "h2", "out_a", "out_b"} <= set(out)
    np.testing.assert_allclose(out["h1"], np.full((2, 3), 1.5))


def test_intermediates_are_freed_after_last_use() -> None:
    module = _chain_model()
    interp = Interpreter(module)
    freed = {s for f in interp._free for s in f}
    names = dict(interp._names)
    freed_names = {names[s] for s in freed if s in names}
    assert {"h2", "w"} <= freed_names  # dead after their last reader
    assert not freed_names & {"out_a", "out_b"}  # outputs are kept
    # the plan is a flat list of (fn, input slots, output slots, ...) steps
    assert all(isinstance(s[1], tuple) and isinstance(s[2], tuple) for s in interp.plan)


def test_input_errors() -> None:
    interp = Interpreter(_chain_model())
    with pytest.raises(ExecutionError, match="missing input"):
        interp.run({"y": np.ones((2, 3), np.float32)})
    with pytest.raises(ExecutionError, match="expected 1 inputs"):
        interp.run([])


def test_failing_op_is_located() -> None:
    interp = Interpreter(_chain_model())
    with pytest.raises(ExecutionError) as ei:
        interp.run({"x": np.ones((2, 4), np.float32)})  # wrong contraction size for the MatMul
    msg = str(ei.value)
    assert "'top.MatMul' op" in msg and "chain.onnx:0:0" in msg and "'h1'" in msg


@pytest.mark.parametrize("in_branch", [False, True], ids=["top_level", "in_if_branch"])
def test_tensor_larger_than_memory_is_refused_before_allocation(in_branch: bool) -> None:
    shape = numpy_helper.from_array(np.array([100000, 100000, 1000], np.int64), "s")
    nodes = [
        helper.make_node("ConstantOfShape", ["s"], ["big"], name="cos"),
        helper.make_node("ReduceMax", ["big"], ["y"], name="rmax", keepdims=0),
    ]
    vi = helper.make_tensor_value_info
    if in_branch:
        branch = helper.make_graph(nodes, "then", [], [vi("y", TensorProto.FLOAT, None)])
        other = helper.make_graph(
            [helper.make_node("Neg", ["x"], ["n"])], "else", [], [vi("n", TensorProto.FLOAT, None)]
        )
        nodes = [helper.make_node("If", ["c"], ["out"], name="if0", then_branch=branch, else_branch=other)]
    g = helper.make_graph(
        nodes,
        "g",
        [vi("c", TensorProto.BOOL, []), vi("x", TensorProto.FLOAT, [])],
        [vi("out" if in_branch else "y", TensorProto.FLOAT, None)],
        initializer=[shape],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    interp = Interpreter(import_onnx(m, Context(handler=None)))
    with pytest.raises(
        ExecutionError, match=r"tensor 'big' of type tensor<100000x100000x1000xf32> needs 36\.38 TiB"
    ):
        interp.run({"c": np.array(True), "x": np.float32(1)})
    if in_branch:  # the branch not taken costs nothing
        assert interp.run({"c": np.array(False), "x": np.float32(1)})["out"] == -1

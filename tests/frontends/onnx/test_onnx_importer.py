"""The ONNX importer: module structure, locations, weights, subgraphs, input shapes, and errors."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lamina.execution import Interpreter  # noqa: E402
from lamina.frontends.onnx import OnnxImportError, import_onnx  # noqa: E402
from lamina.ir.context import Context  # noqa: E402
from lamina.ir.location import FileLineColLoc, NameLoc  # noqa: E402
from lamina.ir.types import DYNAMIC, RankedTensorType  # noqa: E402


def _model(nodes, inputs, outputs, inits=(), opset=18):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _vi(name, shape, et=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def test_module_structure_and_locations() -> None:
    w = np.arange(6, dtype=np.float32).reshape(3, 2)
    m = _model(
        [
            helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul0"),
            helper.make_node("Relu", ["mm"], ["y"], name="relu0"),
        ],
        [_vi("x", [4, 3])],
        [_vi("y", [4, 2])],
        [numpy_helper.from_array(w, "w")],
    )
    module = import_onnx(m, Context(handler=None), filename="net.onnx")
    assert module.name == "builtin.module"
    func = module.body.first_op
    assert func.name == "func.func" and func.properties["sym_name"].value == "main"
    names = [op.name for op in func.entry_block]
    # absent optional operands (the MatMul bias) read one shared top.None
    assert names == ["top.None", "top.Input", "top.Weight", "top.MatMul", "top.Relu", "func.return"]
    relu = func.entry_block.ops[4]
    assert relu.location == NameLoc("y", FileLineColLoc("net.onnx", 0, 0))
    assert relu.result.type == RankedTensorType([4, 2], relu.result.type.element_type)
    x = np.ones((4, 3), np.float32)
    out = Interpreter(module).run({"x": x})
    np.testing.assert_allclose(out["y"], np.maximum(x @ w, 0))


def test_unsupported_ops_listed_once_with_node_names() -> None:
    m = _model(
        [
            helper.make_node("Relu", ["x"], ["a"], name="ok"),
            helper.make_node("FancyOp", ["a"], ["b"], name="fancy1"),
            helper.make_node("FancyOp", ["b"], ["c"], name="fancy2"),
            helper.make_node("OtherOp", ["c"], ["y"], name="other", domain="com.example"),
        ],
        [_vi("x", [2])],
        [_vi("y", [2])],
    )
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    ctx = Context(handler=None)
    with ctx.diagnostics.capture() as diags, pytest.raises(OnnxImportError) as ei:
        import_onnx(m, ctx, filename="bad.onnx")
    e = ei.value
    assert e.kind == "unsupported"
    assert e.unsupported == {"FancyOp": ["fancy1", "fancy2"], "com.example::OtherOp": ["other"]}
    msg = str(e)
    assert "2 unsupported ONNX op type(s)" in msg and "'fancy1', 'fancy2'" in msg and "'other'" in msg
    assert len(diags) == 1 and diags[0].severity == "error"
    assert diags[0].location == FileLineColLoc("bad.onnx", 0, 0)
    assert [n.location for n in diags[0].notes] == [
        NameLoc("fancy1", FileLineColLoc("bad.onnx", 0, 0)),
        NameLoc("other", FileLineColLoc("bad.onnx", 0, 0)),
    ]


@pytest.mark.parametrize("content", [b"", b"\x08\x07\x12\x03abc\x3a\xff\xff\xff", b"not a model at all"])
def test_malformed_file_gives_clear_message(tmp_path, content: bytes) -> None:
    p = tmp_path / "m.onnx"
    p.write_bytes(content)
    with pytest.raises(OnnxImportError) as ei:
        import_onnx(p, Context(handler=None))
    assert ei.value.kind == "malformed"
    assert str(p) in str(ei.value)
    assert "Traceback" not in str(ei.value)


def test_truncated_real_model(tmp_path) -> None:
    w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [1, 64])], [_vi("y", [1, 64])], [w])
    data = m.SerializeToString()
    p = tmp_path / "trunc.onnx"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(OnnxImportError, match="truncated"):
        import_onnx(p, Context(handler=None))
    with pytest.raises(OnnxImportError, match="no such file"):
        import_onnx(tmp_path / "missing.onnx", Context(handler=None))


def test_input_shapes_fix_dynamic_dims() -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["N", 3])], [_vi("y", ["N", 3])])
    module = import_onnx(m, Context(handler=None))
    assert module.body.first_op.entry_block.args[0].type.shape == (DYNAMIC, 3)
    module = import_onnx(m, Context(handler=None), input_shapes=[[5, 3]])
    func = module.body.first_op
    assert func.entry_block.args[0].type.shape == (5, 3)
    assert func.entry_block.ops[1].result.type.shape == (5, 3)
    with pytest.raises(OnnxImportError, match="static shape"):
        import_onnx(m, Context(handler=None), input_shapes=[[5, 4]])
    with pytest.raises(OnnxImportError, match="gives 2 shape"):
        import_onnx(m, Context(handler=None), input_shapes=[[5, 3], [1]])


def test_constant_nodes_become_weights_and_old_opset_attrs_are_normalized() -> None:
    m = _model(
        [
            helper.make_node(
                "Constant", [], ["c"], value=numpy_helper.from_array(np.float32([1, 2, 3]), "c")
            ),
            helper.make_node("Add", ["x", "c"], ["s"]),
            helper.make_node("Unsqueeze", ["s"], ["u"], axes=[0]),
            helper.make_node("ReduceSum", ["u"], ["y"], axes=[1], keepdims=0),
        ],
        [_vi("x", [3])],
        [_vi("y", [1])],
        opset=11,
    )
    module = import_onnx(m, Context(handler=None))
    ops = [op.name for op in module.walk_ops()]
    assert ops.count("top.Weight") == 3  # the constant, the unsqueeze axes, the reduce axes
    out = Interpreter(module).run([np.float32([1, 1, 1])])
    np.testing.assert_allclose(out["y"], [9.0])


def test_if_and_loop_become_regions() -> None:
    then_g = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [_vi("t", [2])])
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["e"])], "else", [], [_vi("e", [2])])
    body = helper.make_graph(
        [
            helper.make_node("Add", ["acc_in", "x"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        ],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("cond_in", [], TensorProto.BOOL), _vi("acc_in", [2])],
        [_vi("cond_out", [], TensorProto.BOOL), _vi("acc_out", [2])],
    )
    m = _model(
        [
            helper.make_node("If", ["c"], ["r"], then_branch=then_g, else_branch=else_g),
            helper.make_node("Loop", ["n", "", "r"], ["y"], body=body),
        ],
        [_vi("c", [], TensorProto.BOOL), _vi("x", [2]), _vi("n", [], TensorProto.INT64)],
        [_vi("y", [2])],
    )
    module = import_onnx(m, Context(handler=None))
    if_op = next(op for op in module.walk_ops() if op.name == "top.If")
    loop = next(op for op in module.walk_ops() if op.name == "top.Loop")
    assert len(if_op.regions) == 2 and if_op.regions[0].blocks[0].last_op.name == "top.Yield"
    assert len(loop.regions[0].blocks[0].args) == 3
    interp = Interpreter(module)
    x = np.float32([1, -2])
    out = interp.run({"c": np.array(True), "x": x, "n": np.array(3, np.int64)})
    np.testing.assert_allclose(out["y"], -x + 3 * x)
    out = interp.run({"c": np.array(False), "x": x, "n": np.array(2, np.int64)})
    np.testing.assert_allclose(out["y"], np.maximum(x, 0) + 2 * x)


def test_undefined_tensor_is_a_located_error() -> None:
    m = _model([helper.make_node("Relu", ["nope"], ["y"], name="r")], [_vi("x", [2])], [_vi("y", [2])])
    ctx = Context(handler=None)
    with ctx.diagnostics.capture() as diags, pytest.raises(OnnxImportError, match="undefined tensor 'nope'"):
        import_onnx(m, ctx, filename="u.onnx")
    assert diags and diags[0].location == NameLoc("y", FileLineColLoc("u.onnx", 0, 0))


def _if_squeeze_model(else_op: str = "Squeeze"):
    """If(sr == 16000) then Relu(x) else Squeeze(x, axis 1) (or Concat(x, c) on axis 0 with c of
    shape [1, 1, 4]): for x of shape [2, 3, 4] the else branch cannot run, as in real
    voice-activity detectors branching on the sample rate."""
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [], [_vi("t", None)]
    )
    if else_op == "Squeeze":
        node = helper.make_node("Squeeze", ["x", "ax"], ["e"], name="else_squeeze")
    else:
        node = helper.make_node("Concat", ["x", "c"], ["e"], name="else_concat", axis=0)
    else_g = helper.make_graph([node], "else", [], [_vi("e", None)])
    return _model(
        [
            helper.make_node("Equal", ["sr", "k"], ["cond"], name="eq"),
            helper.make_node("If", ["cond"], ["y"], name="if0", then_branch=then_g, else_branch=else_g),
        ],
        [_vi("x", ["N", "C", 4]), _vi("sr", [1], TensorProto.INT64)],
        [_vi("y", None)],
        [
            numpy_helper.from_array(np.array([1], np.int64), "ax"),
            numpy_helper.from_array(np.array([16000], np.int64), "k"),
            numpy_helper.from_array(np.ones((1, 1, 4), np.float32), "c"),
        ],
        opset=17,
    )


@pytest.mark.parametrize("else_op", ["Squeeze", "Concat"])
@pytest.mark.parametrize(("shape", "rate"), [((2, 3, 4), 16000), ((2, 1, 4), 8000)], ids=["then", "else"])
def test_branch_that_does_not_fit_the_input_shapes_runs_like_onnxruntime(
    tmp_path, shape, rate, else_op
) -> None:
    from lamina.frontends.model_io import parse_mlir_file
    from lamina.frontends.onnx.testing import run_onnxruntime
    from lamina.tools.transform import main as transform

    m = _if_squeeze_model(else_op)
    path = tmp_path / "vad.onnx"
    path.write_bytes(m.SerializeToString())
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    feeds = {"x": x, "sr": np.array([rate], np.int64)}
    np.savez(tmp_path / "in.npz", **feeds)
    mlir = tmp_path / "vad.mlir"
    args = ["--model_def", str(path), "--mlir", str(mlir), "--input_shapes", str([list(shape), [1]])]
    assert transform([*args, "--test_input", str(tmp_path / "in.npz")]) == 0
    module, _ = parse_mlir_file(str(mlir))
    got = Interpreter(module).run(feeds)["y"]
    want = run_onnxruntime(m, feeds)["y"]
    np.testing.assert_array_equal(got, want)

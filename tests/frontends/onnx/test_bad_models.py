"""Malformed and invalid ONNX models: each is one clear error naming the tensor or node and what was
expected (OnnxImportError from the importer, exit 1 from model_transform), never an internal error."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lamina.frontends.onnx import OnnxImportError, import_onnx, load_model  # noqa: E402
from lamina.ir.context import Context  # noqa: E402
from lamina.tools.transform import main as transform  # noqa: E402


def _vi(name, shape, et=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, et, shape)


def _model(nodes, inputs, outputs, inits=(), opset=18, ir=8):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = ir
    return m


def _add_w(w):
    return _model(
        [helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [_vi("x", [4])], [_vi("y", [4])], [w]
    )


def _short_raw():
    t = numpy_helper.from_array(np.ones(4, np.float32), "w")
    t.raw_data = t.raw_data[:6]
    return _add_w(t)


def _short_typed():
    t = helper.make_tensor("w", TensorProto.FLOAT, [2], [1.0, 2.0])
    t.dims[0] = 4
    return _add_w(t)


def _short_constant():
    c = helper.make_node(
        "Constant", [], ["w"], name="c0", value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1])
    )
    c.attribute[0].t.dims[0] = 4
    return _model(
        [c, helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [_vi("x", [4])], [_vi("y", [4])]
    )


def _relu(**kw):
    return _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [4])], [_vi("y", [4])], **kw)


def _no_outputs():
    return _model([helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [4])], [])


def _negative_dim():
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [1, 3, -5, 32])], [_vi("y", None)]
    )


def _missing_chain():
    """One missing tensor read by the first and last node of a chain of ten."""
    nodes = [helper.make_node("Relu", ["missing"], ["b0"], name="n0")]
    nodes += [helper.make_node("Relu", [f"b{i}"], [f"b{i + 1}"], name=f"n{i + 1}") for i in range(8)]
    nodes.append(helper.make_node("Add", ["b8", "missing"], ["y"], name="add"))
    return _model(nodes, [_vi("x", [4])], [_vi("y", [4])])


def _duplicate_producer():
    return _model(
        [helper.make_node("Relu", ["x"], ["y"], name="r1"), helper.make_node("Neg", ["x"], ["y"], name="r2")],
        [_vi("x", [4])],
        [_vi("y", [4])],
    )


def _cycle():
    return _model(
        [
            helper.make_node("Add", ["x", "b"], ["a"], name="c1"),
            helper.make_node("Relu", ["a"], ["b"], name="c2"),
            helper.make_node("Relu", ["a"], ["y"], name="c3"),
        ],
        [_vi("x", [4])],
        [_vi("y", [4])],
    )


def _conv(**attrs):
    w = numpy_helper.from_array(np.ones((2, 3, 3, 3), np.float32), "W")
    return _model(
        [
            helper.make_node("Conv", ["x", "W"], ["c"], name="conv1", **attrs),
            helper.make_node("GlobalAveragePool", ["c"], ["y"], name="gap"),
        ],
        [_vi("x", [1, 3, 8, 8])],
        [_vi("y", None)],
        [w],
    )


def _maxpool(**attrs):
    return _model(
        [helper.make_node("MaxPool", ["x"], ["y"], name="mp", **attrs)],
        [_vi("x", [1, 3, 8, 8])],
        [_vi("y", None)],
    )


def _matmul_mismatch():
    w = numpy_helper.from_array(np.ones((5, 2), np.float32), "w")
    return _model(
        [helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [_vi("x", [4, 3])], [_vi("y", None)], [w]
    )


def _matmul_mismatch_declared_static():
    """The same, with the wrong output type declared static in the model (so ONNX types look complete)."""
    m = _matmul_mismatch()
    m.graph.output[0].CopyFrom(_vi("y", [4, 2]))
    return m


def _empty_op_type():
    return _model([helper.make_node("", ["x"], ["y"], name="empty")], [_vi("x", [4])], [_vi("y", [4])])


def _wrong_attr_type():
    return _model(
        [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=1.5)],
        [_vi("x", [4, 3])],
        [_vi("y", None)],
    )


def _bad_perm():
    return _model(
        [helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 5])],
        [_vi("x", [4, 3])],
        [_vi("y", None)],
    )


def _subgraph_missing():
    then_g = helper.make_graph(
        [helper.make_node("Relu", ["nowhere"], ["t"], name="tr")], "then", [], [_vi("t", None)]
    )
    else_g = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["e"], name="er")], "else", [], [_vi("e", None)]
    )
    return _model(
        [helper.make_node("If", ["c"], ["y"], name="if0", then_branch=then_g, else_branch=else_g)],
        [_vi("c", [], TensorProto.BOOL), _vi("x", [4])],
        [_vi("y", None)],
    )


def _one_node(node, inputs=(("x", [4]),)):
    return _model([node], [_vi(n, sh) for n, sh in inputs], [_vi(o, None) for o in node.output])


def _weights(**arrays):
    return [numpy_helper.from_array(np.asarray(a), n) for n, a in arrays.items()]


def _if(cond_input, then_g, else_g, inputs):
    node = helper.make_node("If", [cond_input], ["y"], name="if0", then_branch=then_g, else_branch=else_g)
    return _model([node], inputs, [_vi("y", None)])


def _branch(name, nodes, outs):
    return helper.make_graph(nodes, name, [], [_vi(o, None) for o in outs])


def _if_cycle():
    g = _branch(
        "then",
        [
            helper.make_node("Relu", ["b"], ["a"], name="s1"),
            helper.make_node("Relu", ["a"], ["b"], name="s2"),
        ],
        ["a"],
    )
    return _if("c", g, g, [_vi("c", [], TensorProto.BOOL)])


def _if_counts():
    t = _branch("then", [helper.make_node("Relu", ["x"], ["a"])], ["a"])
    e = _branch(
        "else", [helper.make_node("Relu", ["x"], ["b"]), helper.make_node("Neg", ["x"], ["c"])], ["b", "c"]
    )
    return _if("c", t, e, [_vi("c", [], TensorProto.BOOL), _vi("x", [4])])


def _if_float_cond():
    t = _branch("then", [helper.make_node("Relu", ["x"], ["a"])], ["a"])
    return _if("x", t, t, [_vi("x", [4])])


def _scan_too_many_scan_inputs():
    body = helper.make_graph(
        [helper.make_node("Add", ["s", "x"], ["s2"]), helper.make_node("Identity", ["s2"], ["y"])],
        "body",
        [_vi("s", [2]), _vi("x", [2])],
        [_vi("s2", [2]), _vi("y", [2])],
    )
    node = helper.make_node("Scan", ["s0", "xs"], ["sf", "ys"], name="scan0", body=body, num_scan_inputs=5)
    return _model([node], [_vi("s0", [2]), _vi("xs", [3, 2])], [_vi("sf", None), _vi("ys", None)])


def _no_default_opset():
    m = _relu()
    del m.opset_import[:]
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return m


CASES = [
    ("short_raw_data", _short_raw, ["initializer 'w'", "needs 16 bytes of raw_data but has 6"]),
    ("short_typed_data", _short_typed, ["initializer 'w'", "needs 4 values in float_data but has 2"]),
    ("short_constant", _short_constant, ["node 'c0' (Constant)", "attribute 'value'", "needs 4 values"]),
    (
        "opset_99",
        lambda: _relu(opset=99),
        ["opset 99 of the default ONNX domain is not supported", "opsets 1 to"],
    ),
    ("ir_version_99", lambda: _relu(ir=99), ["ONNX IR version 99 is newer"]),
    ("no_outputs", _no_outputs, ["the graph has no outputs"]),
    ("negative_dim", _negative_dim, ["input 'x' has negative dim -5 at index 2"]),
    (
        "missing_tensor",
        _missing_chain,
        ["undefined tensor 'missing'", "read by node 'n0' (Relu), node 'add' (Add)"],
    ),
    (
        "duplicate_producer",
        _duplicate_producer,
        ["tensor 'y' is written by both node 'r1' (Relu) and node 'r2' (Neg)"],
    ),
    ("cycle", _cycle, ["cycle: node 'c1' (Add) -> node 'c2' (Relu) -> node 'c1' (Add)"]),
    (
        "conv_kernel_rank",
        lambda: _conv(kernel_shape=[3]),
        ["node 'conv1' (Conv)", "'kernel_shape' has 1 values"],
    ),
    (
        "conv_zero_strides",
        lambda: _conv(strides=[0, 0]),
        ["node 'conv1' (Conv)", "'strides' [0, 0] must all be >= 1"],
    ),
    ("conv_negative_pads", lambda: _conv(pads=[-1, -1, -1, -1]), ["node 'conv1' (Conv)", "'pads'"]),
    (
        "conv_dilated_kernel_too_big",
        lambda: _conv(dilations=[5, 5]),
        ["node 'conv1' (Conv)", "exceeds the padded"],
    ),
    (
        "pool_kernel_too_big",
        lambda: _maxpool(kernel_shape=[20, 20]),
        ["node 'mp' (MaxPool)", "exceeds the padded"],
    ),
    (
        "pool_kernel_rank",
        lambda: _maxpool(kernel_shape=[2]),
        ["node 'mp' (MaxPool)", "'kernel_shape' [2] has 1"],
    ),
    ("matmul_contracting", _matmul_mismatch, ["node 'mm' (MatMul)", "contracting dimensions differ"]),
    (
        "matmul_contracting_static_types",
        _matmul_mismatch_declared_static,
        ["node 'mm' (MatMul)", "contracting dimensions differ"],
    ),
    ("empty_op_type", _empty_op_type, ["node 'empty'", "empty op_type"]),
    ("wrong_attribute_type", _wrong_attr_type, ["node 't' (Transpose)", "'perm' has type FLOAT", "INTS"]),
    ("bad_permutation", _bad_perm, ["node 't' (Transpose)", "not a permutation"]),
    (
        "required_input_empty",
        lambda: _one_node(helper.make_node("Cast", [""], ["y"], name="cast", to=1)),
        ["node 'cast' (Cast): required input #0 ('input') of Cast is empty"],
    ),
    (
        "too_many_inputs",
        lambda: _one_node(helper.make_node("Relu", ["x", "x"], ["y"], name="r")),
        ["node 'r' (Relu): has 2 inputs but Relu takes 1"],
    ),
    (
        "required_attribute_missing",
        lambda: _one_node(helper.make_node("Cast", ["x"], ["y"], name="cast")),
        ["node 'cast' (Cast): required attribute 'to' of Cast is missing"],
    ),
    (
        "unnamed_node",
        lambda: _one_node(helper.make_node("Transpose", ["x"], ["y"], perm=[0, 5]), [("x", [4, 3])]),
        ["unnamed Transpose node writing 'y'", "not a permutation"],
    ),
    (
        "split_sizes",
        lambda: _model(
            [helper.make_node("Split", ["x", "sp"], ["a", "b"], name="sp0")],
            [_vi("x", [4])],
            [_vi("a", None), _vi("b", None)],
            _weights(sp=np.array([1, 5], np.int64)),
        ),
        ["node 'sp0' (Split): split sizes [1, 5] must be 2 non-negative sizes adding up to the split dim 4"],
    ),
    (
        "concat_shapes",
        lambda: _one_node(
            helper.make_node("Concat", ["x", "z"], ["y"], name="cat", axis=0), [("x", [4, 2]), ("z", [3, 3])]
        ),
        ["node 'cat' (Concat): input shapes [[4, 2], [3, 3]] differ outside the concatenation axis 0"],
    ),
    (
        "softmax_axis",
        lambda: _one_node(helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=5), [("x", [4, 3])]),
        ["node 'sm' (Softmax): axis 5 is out of range for an input of rank 2 (expected -2 to 1)"],
    ),
    (
        "gather_axis",
        lambda: _model(
            [helper.make_node("Gather", ["x", "i"], ["y"], name="g0", axis=3)],
            [_vi("x", [4])],
            [_vi("y", None)],
            _weights(i=np.array([0], np.int64)),
        ),
        ["node 'g0' (Gather): axis 3 is out of range"],
    ),
    (
        "gather_index",
        lambda: _model(
            [helper.make_node("Gather", ["x", "i"], ["y"], name="g0")],
            [_vi("x", [4])],
            [_vi("y", None)],
            _weights(i=np.array([7], np.int64)),
        ),
        ["node 'g0' (Gather)", "index 7 is out of bounds"],
    ),
    ("conv_group_zero", lambda: _conv(group=0), ["node 'conv1' (Conv): group 0 must be >= 1"]),
    ("if_branch_counts", _if_counts, ["node 'if0' (If): region #1 yields 2 values, expected 1"]),
    ("if_float_condition", _if_float_cond, ["node 'if0' (If): input #0 ('x') is tensor(float) but If takes"]),
    (
        "float_shape",
        lambda: _model(
            [helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")],
            [_vi("x", [4])],
            [_vi("y", None)],
            _weights(s=np.array([2.0, 2.0], np.float32)),
        ),
        ["node 'rs' (Reshape): input #1 ('s') is tensor(float) but Reshape takes tensor(int64) there"],
    ),
    (
        "mixed_types",
        lambda: _model(
            [helper.make_node("Add", ["x", "i"], ["y"], name="add")],
            [_vi("x", [4]), _vi("i", [4], TensorProto.INT64)],
            [_vi("y", None)],
        ),
        [
            "node 'add' (Add): inputs #0 and #1 must have the same type (T) but are tensor(float) and tensor(int64)"
        ],
    ),
    (
        "scan_inputs",
        _scan_too_many_scan_inputs,
        ["node 'scan0' (Scan): num_scan_inputs 5 must be between 1 and"],
    ),
    ("subgraph_cycle_once", _if_cycle, ["subgraph 'then' of node 'if0' (If): the graph has a cycle"]),
    ("no_default_opset", _no_default_opset, ["node 'r' (Relu) is an ONNX op but the model imports no opset"]),
    (
        "unknown_attribute",
        lambda: _one_node(helper.make_node("Relu", ["x"], ["y"], name="r", bogus=3)),
        ["node 'r' (Relu): Relu has no attribute 'bogus'"],
    ),
    (
        "unknown_input_element_type",
        lambda: _model(
            [helper.make_node("Relu", ["x"], ["y"], name="r")], [_vi("x", [4], 99)], [_vi("y", None)]
        ),
        ["input 'x': tensors of element type 99 are not supported"],
    ),
    (
        "input_without_element_type",
        lambda: _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", [4], 0)], [_vi("y", None)]),
        ["input 'x' has no element type"],
    ),
    (
        "subgraph_missing_tensor",
        _subgraph_missing,
        ["subgraph 'then' of node 'if0' (If)", "undefined tensor 'nowhere'"],
    ),
]


@pytest.mark.parametrize(("build", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_model_is_one_clear_error(
    build, expected, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(OnnxImportError) as ei:
        import_onnx(build(), Context(handler=None), filename="m.onnx")
    msg = str(ei.value)
    for e in expected:
        assert e in msg, msg
    assert msg.startswith("m.onnx: ") and "\n" not in msg, msg  # one root cause, one line

    path = tmp_path / "m.onnx"
    path.write_bytes(build().SerializeToString())
    rc = transform(["--model_def", str(path), "--mlir", str(tmp_path / "out.mlir")])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "internal error" not in err and expected[-1] in err, err
    assert not (tmp_path / "out.mlir").exists()


def _attention(**attrs):
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="attn", q_num_heads=3, **attrs)
    return _model(
        [node], [_vi("q", [2, 4, 24]), _vi("k", [2, 6, 24]), _vi("v", [2, 6, 24])], [_vi("y", None)], opset=23
    )


def _layernorm_axis():
    outs = ["y", "mean", "inv_std"]  # ONNX infers the shape of mean from the axis: out of range, SIGSEGV
    node = helper.make_node("LayerNormalization", ["x", "w", "b"], outs, name="ln", axis=10**12)
    shape = [2, 3, 4, 5]
    inputs = [_vi("x", shape), _vi("w", shape), _vi("b", shape)]
    return _model([node], inputs, [_vi(o, None) for o in outs], opset=17)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: _attention(kv_num_heads=0),
            "node 'attn' (Attention): attribute 'kv_num_heads' is 0 but must be >= 1",
        ),
        (
            lambda: _attention(kv_num_heads=[1, 2]),
            "attribute 'kv_num_heads' has type INTS, but Attention expects INT",
        ),
        (
            _layernorm_axis,
            "node 'ln' (LayerNormalization): axis 1000000000000 is out of range for an input of rank 4",
        ),
    ],
    ids=["attention_zero_heads", "attention_heads_type", "layernorm_axis"],
)
def test_models_that_crash_onnx_shape_inference(tmp_path: Path, build, message) -> None:
    """ONNX's own shape inference divides by kv_num_heads (SIGFPE) and indexes by a LayerNormalization
    axis (SIGSEGV), killing the process: such attributes are checked before it runs, or it runs in a
    child process and Lamina's checks name the node. In a subprocess, so that a regression fails this
    test instead of killing the test run."""
    import subprocess
    import sys

    path = tmp_path / "m.onnx"
    path.write_bytes(build().SerializeToString())
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    cmd = [
        sys.executable,
        "-m",
        "lamina.tools.transform",
        "--model_def",
        str(path),
        "--mlir",
        str(tmp_path / "o.mlir"),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert message in proc.stderr


def test_missing_tensor_does_not_cascade() -> None:
    ctx = Context(handler=None)
    with ctx.diagnostics.capture() as diags, pytest.raises(OnnxImportError) as ei:
        import_onnx(_missing_chain(), ctx, filename="m.onnx")
    assert str(ei.value).count("undefined") == 1 and "'b" not in str(ei.value)
    assert len(diags) == 1


def test_unsorted_graph_is_imported_in_topological_order() -> None:
    m = _model(
        [
            helper.make_node("Neg", ["a"], ["y"], name="second"),
            helper.make_node("Relu", ["x"], ["a"], name="first"),
        ],
        [_vi("x", [4])],
        [_vi("y", [4])],
    )
    from lamina.execution import Interpreter

    x = np.array([-1, 2, -3, 4], np.float32)
    out = Interpreter(import_onnx(m, Context(handler=None))).run({"x": x})
    np.testing.assert_array_equal(out["y"], -np.maximum(x, 0))


def test_input_shape_larger_than_memory_names_the_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["N", 3, 32, 32])], [_vi("y", None)])
    with pytest.raises(
        OnnxImportError, match=r"input 'x' of type tensor<100000000x3x32x32xf32> needs 1\.12 TiB"
    ):
        import_onnx(m, input_shapes=[[100000000, 3, 32, 32]])
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    args = [
        "--model_def",
        str(path),
        "--mlir",
        str(tmp_path / "m.mlir"),
        "--input_shapes",
        "[[100000000,3,32,32]]",
    ]
    assert transform(args) == 1
    assert "needs 1.12 TiB" in capsys.readouterr().err
    assert not (tmp_path / "m.mlir").exists()


def test_negative_input_shape_names_the_input() -> None:
    with pytest.raises(OnnxImportError, match=r"--input_shapes gives \[1, -3\] for input 'x'.*negative"):
        import_onnx(
            _model([helper.make_node("Relu", ["x"], ["y"])], [_vi("x", ["N", 3])], [_vi("y", None)]),
            input_shapes=[[1, -3]],
        )


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p.write_bytes(np.random.default_rng(0).bytes(1000)), "not a valid ONNX model"),
        (lambda p: p.write_bytes(_short_raw().SerializeToString()[:40]), "not a valid ONNX model"),
        (lambda p: p.write_bytes(b""), "the file is empty"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: os.mkfifo(p), "not a regular file"),
    ],
    ids=["random_bytes", "truncated", "empty", "directory", "fifo"],
)
def test_load_model_refuses_unreadable_files(tmp_path: Path, make, message: str) -> None:
    p = tmp_path / "m.onnx"
    make(p)
    with pytest.raises(OnnxImportError, match=message):
        load_model(p)
    with pytest.raises(OnnxImportError, match=message):
        import_onnx(str(p))


def test_load_model_refuses_devices_and_huge_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(OnnxImportError, match="not a regular file"):
        load_model("/dev/zero")
    p = tmp_path / "big.onnx"
    with open(p, "wb") as f:  # sparse: no disk space used
        f.truncate(2**31 + 1)
    with pytest.raises(OnnxImportError, match="more than the 2 GiB"):
        load_model(p)


def test_short_external_data_names_the_initializer(tmp_path: Path) -> None:
    m = _add_w(numpy_helper.from_array(np.ones(4, np.float32), "w"))
    onnx.save_model(
        m, str(tmp_path / "m.onnx"), save_as_external_data=True, size_threshold=0, location="w.bin"
    )
    with open(tmp_path / "w.bin", "r+b") as f:
        f.truncate(10)
    with pytest.raises(OnnxImportError) as ei:
        import_onnx(str(tmp_path / "m.onnx"))
    assert "'w'" in str(ei.value) and "internal" not in str(ei.value)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="inference runs in-process without fork")
def test_onnx_inference_worker_survives_a_crash_and_keeps_serving() -> None:
    from lamina.frontends.onnx.onnx_inference import _WORKER, onnx_shape_inference

    assert onnx_shape_inference(_layernorm_axis()) is None  # ONNX's inference died on it
    big = numpy_helper.from_array(np.ones((100, 100), np.float32), "w")
    m = _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_vi("x", [2, 100])], [_vi("y", None)], [big])
    inferred = onnx_shape_inference(m)  # a new worker answers
    assert inferred is not None and [
        d.dim_value for d in inferred.graph.output[0].type.tensor_type.shape.dim
    ] == [2, 100]
    assert not inferred.graph.initializer[0].raw_data  # large weights are not sent
    assert m.graph.initializer[0].raw_data  # (nor taken from the caller's model)
    assert _WORKER.pid and _WORKER.owner == os.getpid()


@pytest.mark.parametrize(
    ("old", "new", "where"),
    [
        (b"\x1a\x01r", b"\x1a\x01\xff", "a name in node #0 of the graph"),  # node name 'r'
        (b"\x12\x01gZ", b"\x12\x01\xffZ", "the name of the graph"),  # graph name 'g'
    ],
    ids=["node_name", "graph_name"],
)
def test_invalid_utf8_in_a_name_is_a_malformed_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], old: bytes, new: bytes, where: str
) -> None:
    data = _relu().SerializeToString()
    assert old in data
    path = tmp_path / "m.onnx"
    path.write_bytes(data.replace(old, new))
    with pytest.raises(OnnxImportError, match=f"not a valid ONNX model: {where} is not valid UTF-8"):
        import_onnx(str(path))
    assert transform(["--model_def", str(path), "--mlir", str(tmp_path / "o.mlir")]) == 1
    assert "not valid UTF-8" in capsys.readouterr().err

"""The argument forms the Python API (lamina.api) accepts: ``str``/``os.PathLike``/``bytes`` paths
everywhere, the commands' string forms (``"[[1,3,224,224]]"``, ``"0.99,0.99"``, ``"0,0,0"``), an
``.npz`` path as a model's inputs, new input shapes for a ``.mlir`` module, int4 inputs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lamina.api as lm

onnx = pytest.importorskip("onnx")
from mlp_model import save_mlp, sigmoid_mm  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


@pytest.fixture
def onnx_path(tmp_path: Path) -> Path:
    return Path(save_mlp(tmp_path / "mlp.onnx"))


def test_pathlib_and_bytes_paths(tmp_path: Path, onnx_path: Path) -> None:
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.savez(tmp_path / "in.npz", x=x)
    res = lm.transform(
        onnx_path, input_shapes=[[2, 4]], test_input=tmp_path / "in.npz", mlir=tmp_path / "mlp.mlir"
    )
    assert res.passed and Path(res.mlir).is_file()
    model = lm.load(tmp_path / "mlp.mlir")
    assert lm.load(bytes(tmp_path / "mlp.mlir")).input_shapes == [(2, 4)]
    out = lm.run(tmp_path / "mlp.mlir", tmp_path / "in.npz", output=tmp_path / "out.npz")
    np.testing.assert_allclose(out["y"], sigmoid_mm(x), rtol=1e-6)
    np.testing.assert_array_equal(model.run(tmp_path / "in.npz")["y"], out["y"])
    rep = lm.compare(tmp_path / "out.npz", Path(res.ref_npz), html=tmp_path / "r.html")
    assert rep.passed and (tmp_path / "r.html").is_file()
    assert model.save(tmp_path / "copy.mlir") == str(tmp_path / "copy_weights.npz")
    assert lm.run(onnx_path, tmp_path / "in.npz", engine="lamina")["y"].shape == (2, 3)


def test_string_forms_as_the_commands_take_them(tmp_path: Path, onnx_path: Path) -> None:
    model = lm.load(str(onnx_path), input_shapes="[[2,4]]", output_names="y")
    assert model.input_shapes == [(2, 4)] and model.output_names == ["y"]
    assert lm.load(str(onnx_path), input_shapes=[2, 4]).input_shapes == [(2, 4)]  # one shape
    x = np.ones((2, 4), np.float32)
    # Model.run with an .npz path loads it (it never iterates the string)
    np.savez(tmp_path / "in.npz", x=x)
    np.testing.assert_allclose(model.run(str(tmp_path / "in.npz"))["y"], sigmoid_mm(x), rtol=1e-6)
    a = {"t": np.arange(6.0), "u": np.ones(3)}
    b = {"t": np.arange(6.0) + 0.5, "u": np.ones(3)}
    assert lm.compare(a, b, tolerance="0.99,0.9").passed == lm.compare(a, b, tolerance=(0.99, 0.9)).passed
    assert lm.compare(a, b, tolerance="1,1", excepts="t").excepted == ["t"]
    img = np.full((4, 4, 3), 10, np.uint8)
    y = lm.preprocess(img, "[1,3,4,4]", mean="10,0,0", scale="1,1,0.5", resize_dims="4,4")
    np.testing.assert_array_equal(y, lm.preprocess(img, [1, 3, 4, 4], mean=[10, 0, 0], scale=[1, 1, 0.5]))
    assert y[0, 0].max() == 0 and y[0, 2].max() == 5
    res = lm.transform(
        str(onnx_path),
        input_shapes="[[2,4]]",
        test_input=[tmp_path / "in.npz"],
        tolerance="0.99,0.99",
        mlir=str(tmp_path / "s.mlir"),
    )
    assert res.passed


def test_mlir_input_shapes_are_applied(tmp_path: Path, onnx_path: Path) -> None:
    """load('x.mlir', input_shapes=...) re-infers the module from the new shapes (it used to ignore them)."""
    lm.load(onnx_path, input_shapes=[[2, 4]]).save(tmp_path / "mlp.mlir")
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    for shapes in ([[5, 4]], {"x": [5, 4]}, "[[5,4]]"):
        model = lm.load(tmp_path / "mlp.mlir", input_shapes=shapes)
        assert model.input_shapes == [(5, 4)] and "tensor<5x3xf32>" in model.text()
        np.testing.assert_allclose(model.run(x)["y"], sigmoid_mm(x), rtol=1e-6)


def test_int4_inputs_run(tmp_path: Path) -> None:
    """An int4 array (as onnx.numpy_helper gives it) feeds an INT4 input; it used to be refused with
    "input 'x' has dtype int4, expected int8"."""
    g = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT, name="cast")],
        "cast4",
        [helper.make_tensor_value_info("x", TensorProto.INT4, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.save(m, str(tmp_path / "cast4.onnx"))
    x = numpy_helper.to_array(helper.make_tensor("x", TensorProto.INT4, [4], [-8, -1, 0, 7]))
    assert x.dtype.name == "int4"
    y = lm.load(tmp_path / "cast4.onnx").run(x)["y"]
    np.testing.assert_array_equal(y, np.array([-8, -1, 0, 7], np.float32))

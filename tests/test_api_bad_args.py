"""Every bad argument to the Python API (lamina.api) raises LaminaError with a message naming the
argument and what was expected; never a raw AttributeError/TypeError/ValueError/KeyError/IndexError."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lamina.api as lm
import lamina.runtime as rt

onnx = pytest.importorskip("onnx")
from mlp_model import save_mlp  # noqa: E402


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An MLP (x[batch,4] @ W[4,3] -> Sigmoid -> y) as .onnx, as .mlir (x: 2x4) and an input .npz."""
    d = tmp_path_factory.mktemp("api_bad_args")
    save_mlp(d / "mlp.onnx")
    lm.load(str(d / "mlp.onnx"), input_shapes=[[2, 4]]).save(str(d / "mlp.mlir"))
    np.savez(d / "in.npz", x=np.ones((2, 4), np.float32))
    lm.deploy(str(d / "mlp.mlir"), "F32", processor="lnpu", output=str(d / "mlp.bmodel"))  # compiled
    return {
        "onnx": str(d / "mlp.onnx"),
        "mlir": str(d / "mlp.mlir"),
        "npz": str(d / "in.npz"),
        "bmodel": str(d / "mlp.bmodel"),
        "dir": str(d),
    }


def tr(f: dict[str, str], model_def: Any = "", **kw: Any) -> Any:
    """transform writing into the test's directory."""
    return lm.transform(
        f["onnx"] if model_def == "" else model_def, mlir=kw.pop("mlir", f["dir"] + "/t.mlir"), **kw
    )


X = np.ones((2, 4), np.float32)
IMG = np.zeros((4, 4, 3), np.uint8)
NAN = float("nan")

# (id, call(files), message regex)
CASES: list[tuple[str, Callable[[dict[str, str]], Any], str]] = [
    # load
    ("load None", lambda f: lm.load(None), r"path must be a path \(str or os.PathLike\), got None"),
    ("load int", lambda f: lm.load(5), r"path must be a path .*got int"),
    ("load empty", lambda f: lm.load(""), r"path: the path is empty"),
    ("load shapes str", lambda f: lm.load(f["onnx"], input_shapes="[[2,4"), r"cannot parse '\[\[2,4'"),
    ("load shapes int", lambda f: lm.load(f["onnx"], input_shapes=5), r"input_shapes must be a list"),
    ("load shapes names", lambda f: lm.load(f["onnx"], input_shapes=[["a"]]), r"input_shapes\[0\] must be"),
    ("load shapes zero", lambda f: lm.load(f["onnx"], input_shapes=[[0, 4]]), r"must be positive"),
    ("load shapes mixed", lambda f: lm.load(f["onnx"], input_shapes=[1, [2]]), r"input_shapes\[0\] must be"),
    ("load shapes empty", lambda f: lm.load(f["onnx"], input_shapes=[]), r"input_shapes is empty"),
    ("load shapes key", lambda f: lm.load(f["onnx"], input_shapes={1: [2, 4]}), r"keys must be input names"),
    ("load out names", lambda f: lm.load(f["onnx"], output_names=[1]), r"output_names must be a list"),
    ("mlir out names", lambda f: lm.load(f["mlir"], output_names=["y"]), r"applies to \.onnx and \.tflite"),
    ("mlir rank", lambda f: lm.load(f["mlir"], input_shapes=[[2, 4, 1]]), r"rank 3 for input 'x' of rank 2"),
    ("mlir count", lambda f: lm.load(f["mlir"], input_shapes=[[2, 4], [2, 4]]), r"2 shape\(s\).*1 input"),
    ("mlir unknown", lambda f: lm.load(f["mlir"], input_shapes={"z": [2, 4]}), r"unknown input\(s\) 'z'"),
    (
        "mlir incompatible",
        lambda f: lm.load(f["mlir"], input_shapes=[[2, 5]]),
        r"does not take input shapes \[\[2, 5\]\] \(inputs 'x'\).*\n.*contracting dimensions",
    ),
    # Model.run
    ("run None", lambda f: lm.load(f["mlir"]).run(None), r"inputs must be arrays .*got None"),
    ("run float", lambda f: lm.load(f["mlir"]).run(5.0), r"inputs must be arrays .*got float"),
    ("run count", lambda f: lm.load(f["mlir"]).run([X, X]), r"1 input\(s\), got 2 array\(s\)"),
    ("run ragged", lambda f: lm.load(f["mlir"]).run({"x": [[1, 2], [3]]}), r"input 'x' is not an array"),
    ("run none value", lambda f: lm.load(f["mlir"]).run({"x": None}), r"input 'x' has shape \[\]"),
    ("run str value", lambda f: lm.load(f["mlir"]).run({"x": np.full((2, 4), "a")}), r"dtype <U1, expected"),
    ("run key", lambda f: lm.load(f["mlir"]).run({1: X}), r"input names must be str, got 1"),
    (
        "run missing",
        lambda f: lm.load(f["mlir"]).run(f["dir"] + "/no.npz"),
        r"input file '.*no\.npz' does not",
    ),
    ("run missing name", lambda f: lm.load(f["mlir"]).run({"a": X, "b": X}), r"missing input\(s\) 'x'"),
    ("run dump_all", lambda f: lm.load(f["mlir"]).run(X, dump_all="yes"), r"dump_all must be True or False"),
    # Model.save / text
    ("save None", lambda f: lm.load(f["mlir"]).save(None), r"mlir must be a path"),
    ("save same", lambda f: lm.load(f["mlir"]).save(f["mlir"]), r"is the same file as the model file loaded"),
    (
        "save pair",
        lambda f: lm.load(f["mlir"]).save(f["dir"] + "/a.mlir", f["dir"] + "/a.mlir"),
        r"two outputs cannot share one file",
    ),
    ("text generic", lambda f: lm.load(f["mlir"]).text(generic=None), r"generic must be True or False"),
    # run
    (
        "run engine",
        lambda f: lm.run(f["onnx"], {"x": X}, engine="tvm"),
        r"engine must be one of 'onnxruntime', 'litert', 'lamina', got 'tvm'",
    ),
    (
        "run engine Model",
        lambda f: lm.run(lm.load(f["mlir"]), X, engine="lamina"),
        r"engine applies to an \.onnx",
    ),
    ("run model None", lambda f: lm.run(None, {"x": X}), r"model must be a path .*got None"),
    ("run inputs int", lambda f: lm.run(f["mlir"], 5), r"inputs must be arrays .*got int"),
    ("run output int", lambda f: lm.run(f["mlir"], {"x": X}, output=5), r"output must be a path"),
    (
        "run output=input",
        lambda f: lm.run(f["mlir"], f["npz"], output=f["npz"]),
        r"output '.*in\.npz' is the same file as the input",
    ),
    (
        "run output=model",
        lambda f: lm.run(lm.load(f["mlir"]), X, output=f["mlir"]),
        r"is the same file as the input file",
    ),
    # compare
    ("tol str short", lambda f: lm.compare({"x": X}, {"x": X}, tolerance="0.99"), r"expects two numbers"),
    ("tol str bad", lambda f: lm.compare({"x": X}, {"x": X}, tolerance="a,b"), r"expects two numbers"),
    ("tol str big", lambda f: lm.compare({"x": X}, {"x": X}, tolerance="5,5"), r"at most 1\.0"),
    ("tol one", lambda f: lm.compare({"x": X}, {"x": X}, tolerance=(0.9,)), r"tolerance expects two numbers"),
    ("tol big", lambda f: lm.compare({"x": X}, {"x": X}, tolerance=(5, 5)), r"similarities lie in \[-1, 1\]"),
    ("tol small", lambda f: lm.compare({"x": X}, {"x": X}, tolerance=(0.9, -2)), r"lie in \[-1, 1\]"),
    ("tol nan", lambda f: lm.compare({"x": X}, {"x": X}, tolerance=(NAN, 0.9)), r"lie in \[-1, 1\]"),
    ("tol None", lambda f: lm.compare({"x": X}, {"x": X}, tolerance=None), r"tolerance must be a list"),
    ("tol strs", lambda f: lm.compare({"x": X}, {"x": X}, tolerance=("a", "b")), r"two numbers"),
    ("compare None", lambda f: lm.compare(None, {"x": X}), r"a must be arrays by name .*got None"),
    ("compare list", lambda f: lm.compare({"x": X}, [X]), r"b must be arrays by name .*got list"),
    (
        "compare ragged",
        lambda f: lm.compare({"x": [[1], [1, 2]]}, {"x": X}),
        r"a: tensor 'x' is not an array",
    ),
    (
        "compare objects",
        lambda f: lm.compare({"x": [None]}, {"x": X}),
        r"tensor 'x' is not an array of numbers",
    ),
    ("tensors tol", lambda f: lm.compare_tensors("t", X, X, tolerance="a,b"), r"expects two numbers"),
    ("tensors ragged", lambda f: lm.compare_tensors("t", [[1], [1, 2]], X), r"a is not an array"),
    ("tensors name", lambda f: lm.compare_tensors(None, X, X), r"name must be a str"),
    (
        "tensors order",
        lambda f: lm.compare_tensors("t", X, X, close_order=0),
        r"close_order must be at least 1",
    ),
    ("Model None", lambda f: lm.Model(None), r"Model takes a parsed module .*got None"),
    ("compare key", lambda f: lm.compare({1: X}, {"x": X}), r"tensor names must be str"),
    ("compare missing", lambda f: lm.compare(f["dir"] + "/no.npz", {"x": X}), r"no\.npz' does not exist"),
    ("compare excepts", lambda f: lm.compare({"x": X}, {"x": X}, excepts=5), r"excepts must be a list"),
    ("compare html", lambda f: lm.compare({"x": X}, {"x": X}, html=5), r"html must be a path"),
    (
        "compare html=a",
        lambda f: lm.compare(f["npz"], f["npz"], html=f["npz"]),
        r"is the same file as the input file",
    ),
    # preprocess
    ("pre 1-D", lambda f: lm.preprocess(np.zeros(4), [1, 3, 4, 4]), r"HxWxC .* got shape \[4\]"),
    ("pre zero dim", lambda f: lm.preprocess(np.zeros((0, 4, 3)), [1, 3, 4, 4]), r"non-empty .*\[0, 4, 3\]"),
    ("pre objects", lambda f: lm.preprocess(np.full((4, 4, 3), None), [1, 3, 4, 4]), r"dtype object"),
    ("pre image None", lambda f: lm.preprocess(None, [1, 3, 4, 4]), r"image must be .*got None"),
    ("pre image missing", lambda f: lm.preprocess(f["dir"] + "/no.png", [1, 3, 4, 4]), r"no\.png' does not"),
    ("pre shape None", lambda f: lm.preprocess(IMG, None), r"shape must be one 4-D shape"),
    ("pre shape 3-D", lambda f: lm.preprocess(IMG, [1, 3, 4]), r"shape must be one 4-D shape"),
    ("pre shape zero", lambda f: lm.preprocess(IMG, [1, 3, 0, 4]), r"must be positive"),
    (
        "pre mean str",
        lambda f: lm.preprocess(IMG, [1, 3, 4, 4], mean=["a"]),
        r"mean must be a list of numbers",
    ),
    (
        "pre mean text",
        lambda f: lm.preprocess(IMG, [1, 3, 4, 4], mean="a,b"),
        r"mean: expected comma-separated",
    ),
    ("pre mean nan", lambda f: lm.preprocess(IMG, [1, 3, 4, 4], mean=[NAN]), r"mean must be finite"),
    ("pre mean empty", lambda f: lm.preprocess(IMG, [1, 3, 4, 4], mean=[]), r"mean is empty"),
    ("pre mean count", lambda f: lm.preprocess(IMG, [1, 3, 4, 4], mean=[1, 2]), r"--mean has 2 values"),
    (
        "pre scale inf",
        lambda f: lm.preprocess(IMG, [1, 3, 4, 4], scale=[float("inf")]),
        r"scale must be finite",
    ),
    (
        "pre pixel",
        lambda f: lm.preprocess(IMG, [1, 3, 4, 4], pixel_format="yuv"),
        r"pixel_format must be one of 'rgb'",
    ),
    (
        "pre pixel None",
        lambda f: lm.preprocess(IMG, [1, 3, 4, 4], pixel_format=None),
        r"pixel_format must be",
    ),
    (
        "pre channel",
        lambda f: lm.preprocess(IMG, [1, 3, 4, 4], channel_format="chwn"),
        r"channel_format must be",
    ),
    ("pre resize", lambda f: lm.preprocess(IMG, [1, 3, 4, 4], resize_dims=[4]), r"resize_dims expects two"),
    ("pre resize str", lambda f: lm.preprocess(IMG, [1, 3, 4, 4], resize_dims=["a"]), r"resize_dims must be"),
    ("pre pad", lambda f: lm.preprocess(IMG, [1, 3, 4, 4], pad_value=1.5), r"pad_value must be an integer"),
    (
        "pre keep",
        lambda f: lm.preprocess(IMG, [1, 3, 4, 4], keep_aspect_ratio="yes"),
        r"keep_aspect_ratio must be",
    ),
    # deploy for an NPU, and lamina.runtime on its compiled model
    (
        "npu chip int",
        lambda f: lm.deploy(f["mlir"], "F32", processor="lnpu", chip_config=5),
        r"chip_config must be a path \(str or os.PathLike\), got int",
    ),
    (
        "npu chip empty",
        lambda f: lm.deploy(f["mlir"], "F32", processor="lnpu", chip_config=""),
        r"chip_config: the path is empty",
    ),
    (
        "npu chip missing",
        lambda f: lm.deploy(f["mlir"], "F32", processor="lnpu", chip_config=f["dir"] + "/no.json"),
        r"--chip_config '.*no\.json' does not exist",
    ),
    (
        "npu chip binary",
        lambda f: lm.deploy(f["mlir"], "F32", processor="lnpu", chip_config=f["onnx"]),
        r"mlp\.onnx: (cannot read chip file|.*invalid JSON)",
    ),
    (
        "npu chip cpu",
        lambda f: lm.deploy(f["mlir"], "F32", chip_config=f["mlir"]),
        r"--chip_config describes an NPU chip; --processor cpu is not an NPU",
    ),
    (
        "npu layer group",
        lambda f: lm.deploy(f["mlir"], "F32", processor="lnpu", disable_layer_group="yes"),
        r"disable_layer_group must be True or False",
    ),
    (
        "npu edge F16",
        lambda f: lm.deploy(f["mlir"], "F16", processor="lnpu-edge"),
        r"--processor lnpu-edge does not run F16 models \(it runs BF16, INT8\)",
    ),
    (
        "npu output=mlir",
        lambda f: lm.deploy(f["mlir"], "F32", processor="lnpu", output=f["dir"] + "/./mlp.mlir"),
        r"is the same file as --mlir",
    ),
    (
        "npu output=bmodel input",
        lambda f: lm.deploy(f["mlir"], "F32", processor="lnpu", test_input=f["bmodel"], output=f["bmodel"]),
        r"is the same file as --test_input",
    ),
    ("rt load None", lambda f: rt.load(None), r"load: expected a path \(str or os.PathLike\), got NoneType"),
    ("rt load int", lambda f: rt.load(5), r"load: expected a path .*got int"),
    ("rt load mlir", lambda f: rt.load(f["mlir"]), r"mlp\.mlir': not a valid \.lamina model file: bad magic"),
    ("rt load missing", lambda f: rt.load(f["dir"] + "/no.lamina"), r"no\.lamina' does not exist"),
    (
        "rt load option",
        lambda f: rt.load(f["bmodel"], threads=2),
        r"takes no option 'threads' \(it takes: chip_config\)",
    ),
    ("rt load chip int", lambda f: rt.load(f["bmodel"], chip_config=5), r"chip_config must be a path"),
    (
        "rt load chip other",
        lambda f: rt.load(f["bmodel"], chip_config="lnpu-edge"),
        r"compiled for chip 'lnpu'; --chip_config 'lnpu-edge' describes another chip",
    ),
    (
        "rt run None",
        lambda f: rt.load(f["bmodel"]).run(None),
        r"inputs must be arrays by input name .*got NoneType",
    ),
    (
        "rt run count",
        lambda f: rt.load(f["bmodel"]).run([X, X]),
        r"the model has 1 input\(s\), got 2 array\(s\)",
    ),
    ("rt run key", lambda f: rt.load(f["bmodel"]).run({1: X}), r"input names must be str, got 1"),
    ("rt run missing", lambda f: rt.load(f["bmodel"]).run({}), r"missing input\(s\) 'x'"),
    (
        "rt run shape",
        lambda f: rt.load(f["bmodel"]).run(np.ones((3, 4), np.float32)),
        r"input 'x' has shape \[3, 4\] but the model expects \[2, 4\]",
    ),
    (
        "rt profile int",
        lambda f: rt.load(f["bmodel"]).run(X, profile=5),
        r"profile must be a path \(str or os.PathLike\), got int",
    ),
    (
        "rt profile=model",
        lambda f: rt.load(f["bmodel"]).run(
            X, profile=f["dir"] + "/../" + Path(f["dir"]).name + "/mlp.bmodel"
        ),
        r"profile '.*' is the same file as the model file",
    ),
    (
        "rt profile nodir",
        lambda f: rt.load(f["bmodel"]).run(X, profile=f["dir"] + "/no/t.json"),
        r"cannot write profile '.*t\.json': directory '.*no' does not exist",
    ),
    ("rt profile empty", lambda f: rt.load(f["bmodel"]).run(X, profile=""), r"profile is empty"),
    # transform
    ("tr model None", lambda f: tr(f, model_def=None), r"model_def must be a path"),
    ("tr name", lambda f: tr(f, model_name=3), r"model_name must be a non-empty str"),
    ("tr mean", lambda f: tr(f, mean=["a"]), r"mean must be a list of numbers"),
    ("tr tol", lambda f: tr(f, tolerance=(5, 5)), r"lie in \[-1, 1\]"),
    ("tr pixel", lambda f: tr(f, pixel_format="yuv"), r"pixel_format must be one of"),
    ("tr channel", lambda f: tr(f, channel_format="x"), r"channel_format must be one of"),
    ("tr types", lambda f: tr(f, input_types=["int3"]), r"unknown type 'int3'"),
    ("tr types int", lambda f: tr(f, input_types=[3]), r"input_types must be a list"),
    ("tr shapes", lambda f: tr(f, input_shapes=[[0]]), r"must be positive"),
    ("tr shapes dict", lambda f: tr(f, input_shapes={"x": [2, 4]}), r"in input order"),
    ("tr test_input", lambda f: tr(f, test_input=[5]), r"test_input\[0\] must be a path"),
    ("tr test_input int", lambda f: tr(f, test_input=5), r"test_input must be a list"),
    ("tr keep", lambda f: tr(f, keep_aspect_ratio=None), r"keep_aspect_ratio must be"),
    ("tr pad", lambda f: tr(f, pad_value="0"), r"pad_value must be an integer"),
    ("tr excepts", lambda f: tr(f, excepts=[None]), r"excepts must be a list"),
    ("tr mlir", lambda f: tr(f, mlir=1.5), r"mlir must be a path"),
    ("tr verbose", lambda f: tr(f, verbose="no"), r"verbose must be True or False"),
]


@pytest.mark.parametrize("call,message", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_argument_raises_lamina_error(files: dict[str, str], call: Callable, message: str) -> None:
    with pytest.raises(lm.LaminaError, match=message):
        call(files)


def test_bad_arguments_write_nothing(files: dict[str, str]) -> None:
    """A rejected call leaves the working directory as it was (nothing written before the checks)."""

    def snapshot() -> list[tuple[str, int, int]]:
        return sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in Path(files["dir"]).iterdir())

    before = snapshot()
    for _, call, _ in CASES:
        with contextlib.suppress(lm.LaminaError):
            call(files)
    assert snapshot() == before

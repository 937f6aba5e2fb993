"""Fuzzing the commands with broken inputs: mutated ONNX models through ``model_transform`` and mutated
calibration tables through ``model_deploy``.

Whatever the mutation, a command either succeeds (a mutation can be harmless) or fails with exit 1
and one message: never an internal error (exit 3), never a traceback, and never a changed input file.
Under CI the examples are a fixed, derandomized set (tests/conftest.py); ``HYPOTHESIS_PROFILE=explore``
searches harder.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lamina.tools.deploy import main as deploy_main  # noqa: E402
from lamina.tools.transform import main as transform_main  # noqa: E402

# Cheap examples (most mutations fail early): at least 200 each; HYPOTHESIS_PROFILE=explore runs more.
FUZZ = settings(
    max_examples=max(200, settings.default.max_examples),
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


def _model() -> onnx.ModelProto:
    """x[1,3,8,8] -> Conv -> Relu -> MaxPool -> Flatten -> Gemm -> Softmax, plus a Concat side branch."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), "W"),
        numpy_helper.from_array(rng.standard_normal(4).astype(np.float32), "B"),
        numpy_helper.from_array(rng.standard_normal((10, 64)).astype(np.float32), "FW"),
        numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "FB"),
        numpy_helper.from_array(np.array([1, -1], dtype=np.int64), "shape"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "shape"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "FW", "FB"], ["g"], name="fc", transB=1),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=1),
        helper.make_node("Concat", ["g", "y"], ["z"], name="concat", axis=1),
    ]
    g = helper.make_graph(
        nodes,
        "fuzz",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 20]),
        ],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


_OP_TYPES = ["Conv", "Relu", "MaxPool", "Reshape", "Gemm", "Softmax", "Concat", "Add", "Squeeze", "Nope", ""]
_ATTR_VALUES = [0, -1, 7, 10**12, [0, 0], [3], [-2, 5, 1, 1], [1, 1, 1, 1, 1, 1], 1.5, "abc", [0.5, 2.0]]
_DIMS = [0, -5, 1, 3, 10**9]


def _mutate(m: onnx.ModelProto, data: st.DataObject) -> None:
    """One structural mutation of the kinds real broken exports show."""
    g = m.graph
    kind = data.draw(
        st.sampled_from(
            [
                "drop_node",
                "op_type",
                "rename_input",
                "drop_input",
                "attribute",
                "init_dims",
                "init_truncate",
                "init_dtype",
                "input_dims",
                "opset",
                "ir_version",
                "no_outputs",
                "duplicate_producer",
                "cycle",
            ]
        ),
        label="mutation",
    )
    n = data.draw(st.integers(0, len(g.node) - 1), label="node")
    node = g.node[n]
    if kind == "drop_node":
        del g.node[n]
    elif kind == "op_type":
        node.op_type = data.draw(st.sampled_from(_OP_TYPES), label="op_type")
    elif kind == "rename_input" and node.input:
        node.input[data.draw(st.integers(0, len(node.input) - 1))] = "undefined_tensor"
    elif kind == "drop_input" and node.input:
        del node.input[data.draw(st.integers(0, len(node.input) - 1))]
    elif kind == "attribute":
        name = data.draw(st.sampled_from(["kernel_shape", "strides", "pads", "axis", "dilations", "transB"]))
        for i, a in enumerate(node.attribute):
            if a.name == name:
                del node.attribute[i]
                break
        node.attribute.append(helper.make_attribute(name, data.draw(st.sampled_from(_ATTR_VALUES))))
    elif kind in ("init_dims", "init_truncate", "init_dtype"):
        t = g.initializer[data.draw(st.integers(0, len(g.initializer) - 1), label="initializer")]
        if kind == "init_dims":
            t.dims[data.draw(st.integers(0, len(t.dims) - 1))] = data.draw(st.sampled_from(_DIMS))
        elif kind == "init_truncate":
            t.raw_data = t.raw_data[: data.draw(st.integers(0, max(len(t.raw_data) - 1, 0)))]
        else:
            t.data_type = data.draw(
                st.sampled_from([TensorProto.INT8, TensorProto.DOUBLE, TensorProto.STRING, 99])
            )
    elif kind == "input_dims":
        d = g.input[0].type.tensor_type.shape.dim[data.draw(st.integers(0, 3))]
        d.dim_value = data.draw(st.sampled_from(_DIMS))
    elif kind == "opset":
        m.opset_import[0].version = data.draw(st.sampled_from([1, 6, 23, 99]))
    elif kind == "ir_version":
        m.ir_version = data.draw(st.sampled_from([0, 99]))
    elif kind == "no_outputs":
        del g.output[:]
    elif kind == "duplicate_producer":
        other = g.node[(n + 1) % len(g.node)]
        other.output[0] = node.output[0]
    elif kind == "cycle" and n + 1 < len(g.node) and node.input:
        node.input[0] = g.node[-1].output[0]


def _digest(paths: list[Path]) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths if p.is_file()}


def _run(main, argv: list[str]) -> tuple[int, str]:
    """Run a command in-process; its stderr, with any Python warning it let out (a numpy
    RuntimeWarning leaking to the user is a defect too)."""
    err = io.StringIO()
    with (
        warnings.catch_warnings(record=True) as leaked,
        contextlib.redirect_stderr(err),
        contextlib.redirect_stdout(io.StringIO()),
    ):
        warnings.simplefilter("always")
        rc = main(argv)
    return rc, err.getvalue() + "".join(
        f"\nwarning leaked: {w.message}" for w in leaked if issubclass(w.category, RuntimeWarning)
    )


def _check(rc: int, err: str, before: dict[Path, str]) -> None:
    assert rc in (0, 1), f"exit {rc}:\n{err}"
    assert "internal error" not in err and "Traceback" not in err and "warning leaked" not in err, err
    if rc == 1:
        assert err.strip(), "a failure must say why"
    assert _digest(list(before)) == before, "an input file changed"


@FUZZ
@given(data=st.data())
def test_mutated_onnx_through_model_transform(data: st.DataObject) -> None:
    m = _model()
    if data.draw(st.booleans(), label="bytes"):
        raw = bytearray(m.SerializeToString())
        if data.draw(st.booleans(), label="truncate"):
            raw = raw[: data.draw(st.integers(1, len(raw) - 1))]
        for _ in range(data.draw(st.integers(1, 8))):
            raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
        payload = bytes(raw)
    else:
        for _ in range(data.draw(st.integers(1, 2), label="mutations")):
            _mutate(m, data)
        payload = m.SerializeToString()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        model = tmp / "m.onnx"
        model.write_bytes(payload)
        x = tmp / "x.npz"
        np.savez(x, x=np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32))
        before = _digest([model, x])
        argv = ["--model_def", str(model), "--test_input", str(x), "--mlir", str(tmp / "out" / "m.mlir")]
        os.mkdir(tmp / "out")
        rc, err = _run(transform_main, argv)
        _check(rc, err, before)


@pytest.fixture(scope="module")
def deployable(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """model_transform of the fuzz model, and a calibration table naming every tensor."""
    tmp = tmp_path_factory.mktemp("fuzz_deploy")
    model = tmp / "m.onnx"
    model.write_bytes(_model().SerializeToString())
    x = tmp / "x.npz"
    np.savez(x, x=np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32))
    rc, err = _run(
        transform_main, ["--model_def", str(model), "--test_input", str(x), "--mlir", str(tmp / "m.mlir")]
    )
    assert rc == 0, err
    outs = np.load(tmp / "m_top_outputs.npz")
    lines = ["# generated by the fuzz test", "# op_name threshold min max"]
    for k in outs.files:
        v = outs[k]
        t = float(np.abs(v).max()) or 1.0
        lines.append(f"{k} {t:.6f} {float(v.min()):.6f} {float(v.max()):.6f}")
    table = "\n".join(lines) + "\n"
    return {"dir": str(tmp), "mlir": str(tmp / "m.mlir"), "table": table}


_TOKENS = ["0", "-1", "nan", "inf", "-inf", "1e40", "abc", "", "#channel_th", "#asym_op", "###", "x 1 2", "7"]


@FUZZ
@given(data=st.data())
def test_mutated_calibration_table_through_model_deploy(
    deployable: dict[str, str], data: st.DataObject
) -> None:
    lines = deployable["table"].splitlines()
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        kind = data.draw(st.sampled_from(["drop", "duplicate", "token", "truncate", "insert", "channel_th"]))
        i = data.draw(st.integers(0, len(lines) - 1), label="line")
        if kind == "drop" and len(lines) > 1:
            del lines[i]
        elif kind == "duplicate":
            lines.insert(i, lines[i])
        elif kind == "token":
            toks = lines[i].split(" ")
            toks[data.draw(st.integers(0, len(toks) - 1))] = data.draw(st.sampled_from(_TOKENS))
            lines[i] = " ".join(toks)
        elif kind == "truncate":
            lines[i] = lines[i][: data.draw(st.integers(0, len(lines[i])))]
        elif kind == "insert":
            lines.insert(i, data.draw(st.text(alphabet="ab #_.-0123456789e\t", max_size=30)))
        else:
            name = lines[-1].split(" ")[0]
            axis = data.draw(st.sampled_from(["1", "7", "-1", "x"]))
            vals = " ".join(["1.0"] * data.draw(st.integers(0, 12)))
            lines.append(f"#channel_th {name} {axis} {vals}")
    d = deployable["dir"]
    with tempfile.TemporaryDirectory(dir=d) as out:
        table = Path(out) / "cali_table"
        table.write_text("\n".join(lines) + "\n")
        inputs = [Path(deployable["mlir"]), Path(d) / "m_top_weights.npz", Path(d) / "m_in_f32.npz"]
        inputs += [Path(d) / "m_top_outputs.npz", table]
        before = _digest(inputs)
        argv = ["--mlir", deployable["mlir"], "--quantize", "INT8", "--calibration_table", str(table)]
        argv += ["--test_input", f"{d}/m_in_f32.npz", "--test_reference", f"{d}/m_top_outputs.npz"]
        argv += ["--model", f"{out}/m_int8.bmodel"]
        rc, err = _run(deploy_main, argv)
        _check(rc, err, before)

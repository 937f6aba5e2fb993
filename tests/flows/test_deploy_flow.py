"""The deploy flow with tables and data in memory: a calibration table object and a qtable mapping
lower exactly as the same tables read from files, and no temporary file is written for them."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import numpy as np
import pytest

import lamina.dialects
import lamina.dialects.tpu  # noqa: F401
from lamina.dialects.tpu.tables import CalibrationTable, read_calibration_table, write_qtable
from lamina.flows.deploy import DeployOptions, deploy, summarize_tpu_module
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation
from lamina.quant.deploy import deploy_module, deploy_pipeline
from lamina.support.errors import ToolError, UsageError

IR = """
func.func @main(%x: tensor<1x4xf32> {onnx.name = "x"}) -> (tensor<1x4xf32> {onnx.name = "sig"}) {
  %in = "top.Input"(%x) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("x")
  %r = "top.Relu"(%in) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("relu")
  %s = "top.Sigmoid"(%r) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("sig")
  return %s : tensor<1x4xf32>
}
"""
#: thresholds with more than the 7 decimals a table file keeps: in memory they must lower as read back
TABLE = "###\nx 2.0 -2.0 2.0\nrelu 3.0 0.0 3.0\nsig 1.0 0.0 1.0\n"


def _module() -> tuple[object, Context]:
    ctx = Context()
    return parse_module(IR, ctx), ctx


@pytest.fixture
def no_temp_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("a temporary file was created")

    for name in ("mkdtemp", "mkstemp", "NamedTemporaryFile", "TemporaryDirectory"):
        monkeypatch.setattr(tempfile, name, refuse)


def _table(tmp_path: Path) -> tuple[str, CalibrationTable]:
    path = tmp_path / "cali_table"
    path.write_text(TABLE)
    table = read_calibration_table(str(path))
    table.thresholds["relu"].threshold = 2.999999999  # rounds to 3.0000000 in a file
    return str(path), table


def test_table_object_lowers_as_its_file(tmp_path: Path, no_temp_files: None) -> None:
    path, table = _table(tmp_path)
    m1, c1 = _module()
    m2, c2 = _module()
    from_file = deploy_module(m1, "INT8", calibration_table=path, ctx=c1)
    from_object = deploy_module(m2, "INT8", calibration_table=table, ctx=c2)
    assert print_operation(from_object) == print_operation(from_file)
    assert table.thresholds["relu"].threshold == 2.999999999  # the caller's table is left alone


def test_qtable_mapping_lowers_as_its_file(tmp_path: Path) -> None:
    path, _ = _table(tmp_path)
    qpath = tmp_path / "qtable"
    write_qtable(str(qpath), {"relu": "F16"})
    m1, c1 = _module()
    m2, c2 = _module()
    from_file = deploy_module(m1, "INT8", calibration_table=path, qtable=str(qpath), ctx=c1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tempfile, "mkdtemp", lambda *a, **k: pytest.fail("temporary directory"))
        from_mapping = deploy_module(m2, "INT8", calibration_table=path, qtable={"relu": "f16"}, ctx=c2)
    assert print_operation(from_mapping) == print_operation(from_file)
    assert "f16" in print_operation(from_mapping)


def test_in_memory_tables_are_named_in_errors_and_warnings(tmp_path: Path, no_temp_files: None) -> None:
    m, ctx = _module()
    with pytest.raises(ToolError, match="<calibration table>: error: the calibration table names none"):
        deploy_module(m, "INT8", calibration_table=CalibrationTable.parse("###\n/a 1.0 -1.0 1.0\n"), ctx=ctx)
    with pytest.raises(
        ToolError, match="<calibration table>: error: the calibration table has no thresholds"
    ):
        deploy_module(m, "INT8", calibration_table=CalibrationTable(), ctx=ctx)
    with pytest.raises(ToolError, match="unknown quantize mode 'F99' for 'relu'"):
        deploy_module(m, "F32", qtable={"relu": "F99"}, ctx=ctx)
    warned: list[str] = []
    deploy_module(m, "F32", qtable={"gone": "F16", "relu": "F16"}, ctx=ctx, warn=warned.append)
    assert (
        len(warned) == 1 and "<qtable>: 1 of the qtable's 2 layers are not in the model: 'gone'" in warned[0]
    )


def test_pipeline_of_tables_in_memory() -> None:
    p = deploy_pipeline("INT8", True, CalibrationTable(), {"a": "F16"})
    assert p.startswith("builtin.module(import-calibration-table{asymmetric=true},convert-top-to-tpu{")
    assert "qtable" not in p
    assert deploy_pipeline("INT8", False, CalibrationTable(), None).startswith(
        "builtin.module(import-calibration-table,convert-top-to-tpu{mode=INT8 asymmetric=false}"
    )


def test_deploy_flow_in_memory_writes_nothing(tmp_path: Path) -> None:
    path, table = _table(tmp_path)
    x = np.linspace(-2, 2, 4, dtype=np.float32).reshape(1, 4)
    m, ctx = _module()
    from lamina.frontends.model_io import run_top_module

    ref = run_top_module(m, {"x": x})
    logged: list[str] = []
    o = DeployOptions(
        mlir=None, quantize="INT8", calibration_table=table, quantize_table={"sig": "F32"},
        test_input={"x": x}, test_reference=ref,
    )  # fmt: skip
    res = deploy(o, log=logged.append, module=m, ctx=ctx)
    assert res.tpu_mlir is None and res.outputs_npz is None and res.weights is None
    assert res.passed and res.report is not None and res.outputs is not None
    assert "top.Relu" in print_operation(m)  # the given module is left untouched
    assert logged[0].startswith(
        "# model_deploy --mlir <module in memory> --quantize INT8 --calibration_table"
    )
    assert "1 op INT8" in summarize_tpu_module(res.module)
    # the same deployment from the files
    qpath = tmp_path / "qtable"
    write_qtable(str(qpath), {"sig": "F32"})
    np.savez(tmp_path / "x.npz", x=x)
    np.savez(tmp_path / "ref.npz", **ref)
    mlir = tmp_path / "m.mlir"
    mlir.write_text(IR)
    o2 = DeployOptions(
        mlir=str(mlir), quantize="INT8", calibration_table=path, quantize_table=str(qpath),
        test_input=str(tmp_path / "x.npz"), test_reference=str(tmp_path / "ref.npz"),
        model=str(tmp_path / "m_int8.bmodel"),
    )  # fmt: skip
    res2 = deploy(o2)
    assert res2.tpu_mlir == str(tmp_path / "m_int8_tpu.mlir")
    assert np.array_equal(res2.outputs["sig"], res.outputs["sig"])  # type: ignore[index]


def test_deploy_flow_rejects_bad_in_memory_qtables() -> None:
    m, ctx = _module()
    for qtable, msg in (
        ({"nope": "F16"}, "quantize_table: error: 1 op(s) not in the model: 'nope'"),
        ({"relu": "INT4"}, "quantize_table: error: mode(s) INT4 cannot be lowered yet"),
        ({"relu": 3}, "quantize_table: error: entries must be 'op name' -> 'mode' strings"),
        (["relu"], "quantize_table must be a path or a mapping"),
    ):
        with pytest.raises(UsageError, match=re.escape(msg)):
            deploy(DeployOptions(mlir=None, quantize="F32", quantize_table=qtable), module=m, ctx=ctx)

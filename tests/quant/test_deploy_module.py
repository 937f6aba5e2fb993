"""deploy_module checks the calibration table and the qtable against the model before lowering:
errors name the table (and its line), names the model lacks are one warning."""

from __future__ import annotations

from pathlib import Path

import pytest

import lamina.dialects
import lamina.dialects.tpu  # noqa: F401
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.quant.deploy import deploy_module
from lamina.support.errors import ToolError

IR = """
func.func @main(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("x")
  %r = "top.Relu"(%in) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("relu")
  return %r : tensor<1x4xf32>
}
"""
GOOD = "###\nx 2.0 -2.0 2.0\nrelu 3.0 0.0 3.0\n"


def _deploy(tmp_path: Path, table: str, qtable: str | None = None, warn: object = None) -> object:
    ctx = Context()
    m = parse_module(IR, ctx)
    t = tmp_path / "cali_table"
    t.write_text(table)
    q = None
    if qtable is not None:
        q = tmp_path / "qtable"
        q.write_text(qtable)
    return deploy_module(m, "INT8", calibration_table=str(t), qtable=q and str(q), ctx=ctx, warn=warn)


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ("# nothing\n###\n", "{t}: error: the calibration table has no thresholds: an INT8 deployment would leave every op in F32"),
        ("###\n/a 1.0 -1.0 1.0\n", "{t}: error: the calibration table names none of the model's 2 tensors"),
        (GOOD + "#channel_th relu 7 1 2 3 4\n", "{t}:4:1: error: #channel_th axis 7 is out of range for 'relu'"),
        (GOOD + "#channel_th relu 1 1 2\n", "{t}:4:1: error: #channel_th 'relu' has 2 threshold(s) but the tensor has 4"),
        ("###\nx 2.0 -2.0 2.0\nrelu nan 0.0 3.0\n", "{t}:3:1: error: threshold is NaN"),
        ("###\nx 2.0 -2.0 2.0\nrelu 0.0 0.0 3.0\n", "{t}:3:1: error: threshold of 'relu' must be a finite number > 0, got 0.0"),
        ("###\nx 2.0 -2.0 2.0\nrelu -inf 0.0 3.0\n", "{t}:3:1: error: threshold of 'relu' is negative (-inf)"),
        ("###\nx 2.0 -2.0 2.0\nrelu 1.0 0.0 abc\n", "{t}:3:1: error: expected a number for max, got 'abc'"),
    ],
)  # fmt: skip
def test_bad_tables_are_errors_naming_the_table(tmp_path: Path, table: str, expected: str) -> None:
    with pytest.raises(ToolError) as e:
        _deploy(tmp_path, table)
    assert expected.format(t=tmp_path / "cali_table") in str(e.value)


def test_unknown_names_are_one_warning(tmp_path: Path) -> None:
    got: list[str] = []
    extra = "".join(f"/gone/{i} 1.0 -1.0 1.0\n" for i in range(5))
    tpu = _deploy(tmp_path, GOOD + extra, qtable="relu F32\n/q/gone F16\n", warn=got.append)
    assert any(op.name == "tpu.Relu" for op in tpu.walk_ops())
    assert got == [
        f"{tmp_path / 'cali_table'}:4:1: warning: 5 of the table's 7 tensors are not in the model: '/gone/0', "
        "'/gone/1', '/gone/2' and 2 more (ignored; names are the tensor names of model_transform's dumps)",
        f"{tmp_path / 'qtable'}:2:1: warning: 1 of the qtable's 2 layers are not in the model: '/q/gone' "
        "(ignored; names are the tensor names of model_transform's dumps)",
    ]
    with pytest.warns(UserWarning, match="5 of the table's 7 tensors"):
        _deploy(tmp_path, GOOD + extra)

"""import-calibration-table reads a TPU-MLIR-format table and attaches calibrated types."""

from __future__ import annotations

from pathlib import Path

import lamina.dialects
import lamina.dialects.tpu  # noqa: F401
from lamina.dialects.quant import CalibratedQuantizedType
from lamina.dialects.tpu.tables import read_calibration_table
from lamina.dialects.tpu.transforms import import_calibration
from lamina.ir.context import Context
from lamina.ir.parser import parse_module

TABLE = """# genetated time: 2024-05-01 10:00:00.000000
# histogram number: 2048
# sample number: 10
###
# op_name    threshold    min    max
x 2.0000000 -1.5000000 2.5000000
relu 3.0000000 0.0000000 4.0000000
"""

IR = """
func.func @main(%x: tensor<2xf32>) -> tensor<2xf32> {
  %in = "top.Input"(%x) : (tensor<2xf32>) -> tensor<2xf32> loc("x")
  %r = "top.Relu"(%in) : (tensor<2xf32>) -> tensor<2xf32> loc("relu")
  return %r : tensor<2xf32>
}
"""


def _types(tmp_path: Path, asym: bool) -> list:
    p = tmp_path / "cali_table"
    p.write_text(TABLE)
    m = parse_module(IR, Context())
    assert import_calibration(m, read_calibration_table(str(p)), asym) == 2
    return [o.results[0].type.element_type for o in m.walk_ops() if o.name in ("top.Input", "top.Relu")]


def test_symmetric(tmp_path: Path) -> None:
    x, r = _types(tmp_path, False)
    assert isinstance(x, CalibratedQuantizedType) and (x.min, x.max) == (-2.0, 2.0)
    assert (r.min, r.max) == (0.0, 3.0)


def test_asymmetric(tmp_path: Path) -> None:
    x, r = _types(tmp_path, True)
    assert (x.min, x.max) == (-1.5, 2.5)
    assert (r.min, r.max) == (0.0, 4.0)


ASYM_IR = """
func.func @main(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("x")
  %g = "top.GELU"(%in) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("gelu")
  %w = "top.Weight"() <{value = dense<0.5> : tensor<4x4xf32>}> : () -> tensor<4x4xf32>
  %n = "top.None"() : () -> none
  %m = "top.MatMul"(%g, %w, %n) : (tensor<1x4xf32>, tensor<4x4xf32>, none) -> tensor<1x4xf32> loc("fc")
  %s = "top.SiLU"(%m) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc("silu")
  return %s : tensor<1x4xf32>
}
"""


def test_asym_op_is_read_as_tpu_mlir_reads_it() -> None:
    """``#asym_op``: a GELU/SiLU (any non-Conv/MatMul op) named there gets an asymmetric result; a
    MatMul named there gets an asymmetric *input* (TPU-MLIR's input_asym), not result."""
    from lamina.dialects.tpu.tables import CalibrationTable

    text = (
        "###\nx 2.0 -2.0 2.0\ngelu 4.0 -0.17 4.0\nfc 3.0 -0.1 3.0\nsilu 3.0 -0.28 3.0\n#asym_op\nfc\nsilu\n"
    )
    m = parse_module(ASYM_IR, Context())
    import_calibration(m, CalibrationTable.parse(text, "t"), False)
    got = {o.location.name: o.results[0].type.element_type for o in m.walk_ops() if o.name != "top.Weight" and o.results and hasattr(o.location, "name")}  # fmt: skip
    assert (got["gelu"].min, got["gelu"].max) == (-0.17, 4.0)  # the MatMul's input: asymmetric
    assert (got["fc"].min, got["fc"].max) == (-3.0, 3.0)  # the MatMul's own result: symmetric
    assert (got["silu"].min, got["silu"].max) == (-0.28, 3.0)
    assert (got["x"].min, got["x"].max) == (-2.0, 2.0)

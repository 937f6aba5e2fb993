"""import-calibration-table reads a TPU-MLIR-format table and attaches calibrated types."""

from __future__ import annotations

from pathlib import Path

import lamina.dialects
import lamina.dialects.tpu  # noqa: F401
from lamina.dialects.quant import CalibratedQuantizedType
from lamina.dialects.tpu.transforms import import_calibration
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.quant.table import read_calibration_table

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

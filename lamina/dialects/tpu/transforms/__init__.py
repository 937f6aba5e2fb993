"""Passes of the ``tpu`` dialect.

* ``import-calibration-table`` (:mod:`.import_calibration`): ``!quant.calibrated`` types from a table;
* ``convert-top-to-tpu`` (:mod:`.lowering`): top → tpu in F32/F16/BF16/INT8 with a qtable;
* ``tpu-canonicalize`` (:mod:`.canonicalize`): fold cast pairs, merge requants.
"""

from .canonicalize import TpuCanonicalize, canonicalize_tpu
from .import_calibration import ImportCalibrationTable, import_calibration
from .lowering import ConvertTopToTpu, convert_top_to_tpu, quant_type_for

__all__ = [
    "ConvertTopToTpu",
    "ImportCalibrationTable",
    "TpuCanonicalize",
    "canonicalize_tpu",
    "convert_top_to_tpu",
    "import_calibration",
    "quant_type_for",
]

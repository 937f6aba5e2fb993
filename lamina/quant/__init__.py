"""Quantization support.

- :mod:`lamina.dialects.tpu.tables`: calibration tables and qtables in TPU-MLIR's formats.
- :mod:`lamina.quant.calibration`: :func:`calibrate` (statistics over samples with the ``top``
  interpreter, a threshold method, tuning) -> :class:`CalibrationResult` with its ``table``.
- :mod:`lamina.quant.histogram`, :mod:`lamina.quant.methods`, :mod:`lamina.quant.tune`,
  :mod:`lamina.quant.dataset`: the pieces (streaming statistics, threshold methods, tuning, samples).
- :mod:`lamina.quant.masking`: attention-mask inputs and the masked sequence axis of every tensor
  (calibration, the search and comparisons count only the kept positions of padded sequences).
"""

from lamina.dialects.tpu.tables import (
    CalibrationTable,
    CalibrationTableError,
    TensorStats,
    read_calibration_table,
    read_qtable,
    write_qtable,
)
from lamina.quant.calibration import CalibrationError, CalibrationResult, calibrate
from lamina.quant.methods import METHODS

__all__ = [
    "METHODS",
    "CalibrationError",
    "CalibrationResult",
    "CalibrationTable",
    "CalibrationTableError",
    "TensorStats",
    "calibrate",
    "read_calibration_table",
    "read_qtable",
    "write_qtable",
]

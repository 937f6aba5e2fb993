"""What counts as a number among numpy dtypes."""

from __future__ import annotations

import numpy as np


def is_numeric(dt: np.dtype) -> bool:
    """Booleans, integers, floats, complex numbers and ml_dtypes' numbers (int4, uint4, bfloat16,
    float8_*: ONNX's numpy_helper gives them), which convert to float64 and other numeric dtypes by
    value."""
    return dt.kind in "biufc" or (dt.kind == "V" and dt.type.__module__.startswith("ml_dtypes"))

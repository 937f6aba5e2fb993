"""The quantized-type policy of the lowering: which type each value gets.

Quantized types: symmetric — ``lo < 0``: ``i8`` with ``scale = max(-lo, hi) / 127``; else ``u8``
with ``scale = hi / 255``; asymmetric (or a calibrated range not symmetric about 0) — ``i8`` with
``scale = (hi - lo) / 255`` and ``zp = round_half_away(-128 - lo / scale)``. In a float mode,
calibrated and f32 tensors take the mode's float type.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.quant import CalibratedQuantizedType, UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.ir.types import FloatType, RankedTensorType, ShapedType, Type, f32
from lamina.rewrite.conversion import TypeConverter

from ..quantize import qparams, round_half_away

MODES = ("F32", "F16", "BF16", "INT8")
FLOAT_TYPES: dict[str, Type] = {"F32": f32, "F16": FloatType("f16"), "BF16": FloatType("bf16")}


def quant_type_for(cal: CalibratedQuantizedType, asymmetric: bool) -> UniformQuantizedType:
    """The 8-bit uniform type of a calibrated range (see the module doc)."""
    lo, hi = float(cal.min), float(cal.max)
    et = cal.expressed_type
    if lo < 0 < hi and abs(hi + lo) > 1e-6 * max(hi, -lo):
        asymmetric = True  # a range not symmetric about 0 (an #asym_op of the table)
    if asymmetric:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        scale = (hi - lo) / 255.0 if hi > lo else 1.0
        zp = int(round_half_away(np.float64(-128.0 - lo / scale)))
        return UniformQuantizedType(8, True, et, scale, max(-128, min(127, zp)))
    th = max(-lo, hi)
    if th <= 0:
        th = 1e-6
    if lo < 0:
        return UniformQuantizedType(8, True, et, th / 127.0, 0)
    return UniformQuantizedType(8, False, et, th / 255.0, 0)


def symmetric_i8(shape: Any, th: float) -> RankedTensorType:
    """A per-tensor symmetric int8 tensor type covering ``[-th, th]``."""
    return RankedTensorType(shape, UniformQuantizedType(8, True, f32, th / 127.0, 0))


def elem(t: Type) -> Type:
    return t.element_type if isinstance(t, ShapedType) else t


def with_elem(t: Type, e: Type) -> Type:
    if isinstance(t, RankedTensorType):
        return RankedTensorType(t.shape, e)
    return t


def is_floatish(t: Type) -> bool:
    e = elem(t)
    return isinstance(t, ShapedType) and isinstance(e, (FloatType, CalibratedQuantizedType))


def plain(t: Type) -> Type:
    """Calibrated element types → their expressed type."""
    e = elem(t)
    if isinstance(e, CalibratedQuantizedType):
        return with_elem(t, e.expressed_type)
    return t


def scale(t: Type) -> float:
    return float(elem(t).scale)  # type: ignore[attr-defined]


def scales(t: Type) -> np.ndarray:
    """The scale(s) of a quantized type: a 0-d array (per-tensor) or one per channel."""
    return np.asarray(qparams(t)[0], np.float64)


def zp_of(t: Type) -> int | None:
    zp = qparams(t)[1]
    return None if np.ndim(zp) else int(zp)


def is_per_axis(t: Type) -> bool:
    return isinstance(elem(t), UniformQuantizedPerAxisType)


def make_type_converter(mode: str, asymmetric: bool) -> TypeConverter:
    """Calibrated tensors → their 8-bit type (INT8) or the mode's float type; f32 tensors → f16 /
    bf16 in those modes; anything else unchanged."""
    tc = TypeConverter()
    tc.add_conversion(lambda t: t)

    def conv(t: Type) -> Any:
        e = elem(t)
        if not isinstance(t, RankedTensorType):
            return None
        if isinstance(e, CalibratedQuantizedType):
            if mode == "INT8":
                return RankedTensorType(t.shape, quant_type_for(e, asymmetric))
            return RankedTensorType(t.shape, FLOAT_TYPES[mode])
        if isinstance(e, FloatType) and e is f32 and mode in ("F16", "BF16"):
            return RankedTensorType(t.shape, FLOAT_TYPES[mode])
        return None

    tc.add_conversion(conv)
    return tc

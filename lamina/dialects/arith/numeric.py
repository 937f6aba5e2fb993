"""Numeric helpers shared by arith folders and the interpreter hooks.

Values are computed on numpy arrays in a *compute domain*:

* integers (and index) as ``uint64`` bit patterns masked to the type's width, so that add/sub/mul
  wrap exactly as two's-complement arithmetic of that width (widths above 64 are not folded);
* floats as arrays of the type's numpy dtype (``float32``, ``ml_dtypes.bfloat16``, ...).

Scalars are arrays of shape ``(1,)``; a splat dense attribute is one element that broadcasts.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.ir.attributes import (
    Attribute,
    DenseElementsAttr,
    FloatAttr,
    IntegerAttr,
    element_type_to_dtype,
    float_dtype,
)
from lamina.ir.types import FloatType, IndexType, IntegerType, ShapedType, Type

_U64 = np.uint64


def element_type(t: Type) -> Type:
    return t.element_type if isinstance(t, ShapedType) else t


def int_width(t: Type) -> int | None:
    """Bit width of an integer-like (element) type; 64 for index; None otherwise."""
    t = element_type(t)
    if isinstance(t, IntegerType):
        return t.width
    if isinstance(t, IndexType):
        return 64
    return None


def is_signed_repr(t: Type) -> bool:
    """Whether values of this integer type are stored signed (signless, signed and index are)."""
    t = element_type(t)
    return not (isinstance(t, IntegerType) and t.is_unsigned)


def mask(width: int) -> np.uint64:
    return _U64((1 << width) - 1)


def wrap(u: np.ndarray, width: int) -> np.ndarray:
    return u & mask(width)


def to_signed(u: np.ndarray, width: int) -> np.ndarray:
    """Bit patterns of ``width`` bits -> signed int64 values (sign extension)."""
    sb = _U64(1 << (width - 1))
    with np.errstate(all="ignore"):
        x = ((np.asarray(u, dtype=_U64) & mask(width)) ^ sb) - sb
    return np.asarray(x, dtype=_U64).view(np.int64)


def to_bits(x: Any, width: int) -> np.ndarray:
    """Any integer/bool array or scalar -> uint64 bit patterns of ``width`` bits (at least 1-d)."""
    if isinstance(x, (int, bool)) and not isinstance(x, np.generic):
        return np.array([int(x) & ((1 << 64) - 1)], dtype=_U64) & mask(width)
    a = np.atleast_1d(np.asarray(x))
    with np.errstate(all="ignore"):
        if a.dtype.kind == "f":
            a = a.astype(np.int64)
        return a.astype(_U64) & mask(width)


def float_array(x: Any, t: Type) -> np.ndarray | None:
    dt = float_dtype(element_type(t))  # type: ignore[arg-type]
    if dt is None:
        return None
    return np.atleast_1d(
        np.asarray(x, dtype=dt) if not isinstance(x, np.ndarray) else x.astype(dt, copy=False)
    )


# ---- attributes <-> compute domain ---------------------------------------------------------------


def attr_to_domain(a: Attribute | None) -> np.ndarray | None:
    """The compute-domain array of a constant attribute (None if not a foldable constant)."""
    if isinstance(a, IntegerAttr):
        w = int_width(a.type)
        if w is None or w > 64:
            return None
        return to_bits(a.value, w)
    if isinstance(a, FloatAttr):
        return float_array(a.value, a.type)
    if isinstance(a, DenseElementsAttr):
        et = a.type.element_type
        raw = np.atleast_1d(a.raw)
        w = int_width(et)
        if w is not None:
            if w > 64:
                return None
            return to_bits(raw, w)
        if isinstance(et, FloatType):
            return float_array(raw, et)
    return None


def domain_to_storage(out: np.ndarray, t: Type) -> np.ndarray:
    """Compute-domain result -> array of the storage dtype of ``t``'s elements."""
    et = element_type(t)
    w = int_width(et)
    with np.errstate(all="ignore"):
        if w is not None:
            u = to_bits(out, w) if out.dtype != _U64 else out & mask(w)
            if w == 1:
                return u.astype(np.bool_)
            dt = element_type_to_dtype(et)
            if is_signed_repr(et):
                return to_signed(u, w).astype(dt)
            return u.astype(dt)
        return np.asarray(out).astype(element_type_to_dtype(et))


def domain_to_attr(out: np.ndarray, t: Type) -> Attribute | None:
    """Compute-domain result -> IntegerAttr/FloatAttr (scalar ``t``) or DenseElementsAttr."""
    et = element_type(t)
    if isinstance(t, ShapedType):
        if not t.has_static_shape:
            return None
        arr = domain_to_storage(out, t)
        if arr.size != 1 and arr.shape != tuple(t.shape):
            if arr.size == t.num_elements:
                arr = arr.reshape(t.shape)
            else:
                arr = np.broadcast_to(arr, t.shape)
        return DenseElementsAttr(t, arr)
    if out.size != 1:
        return None
    w = int_width(et)
    if w is not None:
        u = int(np.asarray(out).astype(_U64).reshape(-1)[0]) & ((1 << w) - 1)
        if is_signed_repr(et) and w > 1 and u >= 1 << (w - 1):
            u -= 1 << w
        return IntegerAttr(u, et)
    if isinstance(et, FloatType):
        return FloatAttr(float(np.asarray(out).reshape(-1)[0]), et)
    return None


def runtime_to_domain(x: Any, t: Type) -> np.ndarray:
    """An interpreter value (numpy array/scalar or Python number) -> compute domain."""
    w = int_width(t)
    if w is not None:
        return to_bits(x, w)
    arr = float_array(x, t)
    if arr is None:
        raise TypeError(f"cannot compute on values of type {t}")
    return arr


def domain_to_runtime(out: np.ndarray, t: Type) -> Any:
    """Compute domain -> interpreter value: a numpy scalar for scalar types, an array for shaped."""
    arr = domain_to_storage(out, t)
    if isinstance(t, ShapedType):
        if t.has_static_shape and arr.shape != tuple(t.shape):
            arr = np.broadcast_to(arr, t.shape).copy()
        return arr
    return arr.reshape(-1)[0]


# ---- constant queries used by the identity folds -------------------------------------------------


def splat_int(a: Attribute | None) -> int | None:
    """The integer value of a scalar or splat integer constant (signed for signless types)."""
    if isinstance(a, IntegerAttr):
        return a.value
    if isinstance(a, DenseElementsAttr) and a.is_splat and int_width(a.type.element_type) is not None:
        return int(a.splat_value)
    return None


def splat_float(a: Attribute | None) -> float | None:
    if isinstance(a, FloatAttr):
        return a.value
    if isinstance(a, DenseElementsAttr) and a.is_splat and isinstance(a.type.element_type, FloatType):
        return float(a.splat_value)
    return None


def is_all_ones(v: int, t: Type) -> bool:
    w = int_width(t)
    return w is not None and (v & ((1 << w) - 1)) == (1 << w) - 1


def const_of(value: int | float, t: Type) -> Attribute | None:
    """A constant of type ``t`` (scalar or splat) with the given value."""
    et = element_type(t)
    if isinstance(t, ShapedType):
        if not t.has_static_shape:
            return None
        return DenseElementsAttr(t, np.asarray(value).astype(element_type_to_dtype(et)))
    if isinstance(et, FloatType):
        return FloatAttr(float(value), et)
    w = int_width(et)
    if w is None:
        return None
    v = int(value) & ((1 << w) - 1)
    if is_signed_repr(et) and w > 1 and v >= 1 << (w - 1):
        v -= 1 << w
    return IntegerAttr(v, et)

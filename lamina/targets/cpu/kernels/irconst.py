"""Vector constants made once per compiler process: llvmlite spells out a constant's text (every
lane's type and value, a float as its hexadecimal double) each time an ``ir.Constant`` is made and
printed, and a kernel's splats (a polynomial's coefficients per register, a clamp's bounds per
store) are made thousands of times — a third of YOLO F32's Python emission. The same object is
returned for the same element type and the same lanes bit for bit (``0.0`` and ``-0.0`` differ);
constants are immutable and belong to no module, so sharing them leaves the emitted IR unchanged."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from llvmlite import ir

__all__ = ["splat", "vector"]

_CACHE: dict[Any, ir.Constant] = {}


def _bits(v: int | float) -> Any:
    return struct.pack("<d", v) if isinstance(v, float) else int(v)


def splat(elem: ir.Type, x: int | float, n: int) -> ir.Constant:
    """``<n x elem>`` with every lane ``x``."""
    key = ("splat", str(elem), n, type(x).__name__, _bits(x))
    c = _CACHE.get(key)
    if c is None:
        c = _CACHE[key] = ir.Constant(ir.VectorType(elem, n), [x] * n)
    return c


def vector(elem: ir.Type, values: Sequence[int | float]) -> ir.Constant:
    """``<len(values) x elem>`` of these lanes."""
    key = ("vector", str(elem), tuple((type(v).__name__, _bits(v)) for v in values))
    c = _CACHE.get(key)
    if c is None:
        c = _CACHE[key] = ir.Constant(
            ir.VectorType(elem, len(values)), [ir.Constant(elem, v) for v in values]
        )
    return c

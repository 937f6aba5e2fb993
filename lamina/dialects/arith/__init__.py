"""The ``arith`` dialect (see :mod:`lamina.dialects.arith.ops`)."""

from __future__ import annotations

from typing import Any

from lamina.dialects.arith import ops as _ops
from lamina.dialects.arith.attributes import (
    FASTMATH_NONE,
    OVERFLOW_NONE,
    FastMathFlagsAttr,
    IntegerOverflowFlagsAttr,
)
from lamina.dialects.arith.ops import *  # noqa: F403
from lamina.dialects.arith.ops import ConstantOp
from lamina.ir.attributes import Attribute, DenseElementsAttr, FloatAttr, IntegerAttr
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.core import register_canonicalization_module
from lamina.ir.location import Location
from lamina.ir.opdef import declared_ops
from lamina.ir.types import Type


def materialize_constant(value: Attribute, type: Type, loc: Location | None = None) -> ConstantOp | None:
    """An (uninserted) ``arith.constant`` of ``value`` with result ``type``, or None if it cannot
    hold that value."""
    if isinstance(value, (IntegerAttr, FloatAttr, DenseElementsAttr)) and value.type is type:
        return ConstantOp.build(value=value, result=type, loc=loc)
    if isinstance(value, IntegerAttr) and value.type is not type and type is not None:
        from lamina.dialects.arith.numeric import const_of, int_width

        if int_width(type) is not None and int_width(value.type) is not None:
            c = const_of(value.value, type)
            if c is not None:
                return ConstantOp.build(value=c, result=type, loc=loc)
    return None


def _materialize(*args: Any) -> ConstantOp | None:
    # Accept both (value, type, loc) and (builder, value, type, loc).
    if len(args) == 4:
        args = args[1:]
    return materialize_constant(*args)


ARITH = register_dialect(
    Dialect(
        "arith",
        declared_ops(vars(_ops).values()),
        attributes=[IntegerOverflowFlagsAttr, FastMathFlagsAttr],
        materialize_constant=_materialize,
        description="Integer and floating-point arithmetic.",
    )
)

__all__ = [*_ops.__all__, "ARITH", "FASTMATH_NONE", "OVERFLOW_NONE", "FastMathFlagsAttr",
           "IntegerOverflowFlagsAttr", "materialize_constant"]  # fmt: skip

# The op classes' canonicalization patterns register themselves when first asked for.
register_canonicalization_module("arith", "lamina.dialects.arith.canonicalize")

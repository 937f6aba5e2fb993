"""The constant value of a Value: what a ``ConstantLike`` op (``top.Weight``, ``tpu.Weight``,
``arith.constant``, ...) produces, as its attribute or as a numpy array.

Passes ask here rather than testing op names, so a new dialect's constant op is recognised by its
trait. (Folding small computations on constants, as ``top``'s shape chains, is the dialect's own
business: :func:`lamina.dialects.top.base.const_value` builds on this.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from lamina.ir.attributes import Attribute, DenseElementsAttr, DenseResourceElementsAttr
from lamina.ir.traits import ConstantLike, ConstantValueInterface, NotALayer

if TYPE_CHECKING:
    from lamina.ir.core import Operation, Value


def constant_value(op: Operation | None) -> Attribute | None:
    """The attribute a ConstantLike op produces (its ``value``), else None."""
    if op is None or ConstantLike not in op.traits:
        return None
    iface = ConstantValueInterface.get(op)
    if iface is not None:
        try:
            return iface.constant_value()
        except NotImplementedError:
            pass
    return op.get_attr("value")


def value_constant(v: Value) -> Attribute | None:
    """The constant value of ``v`` if it is the result of a ConstantLike op."""
    return constant_value(v.defining_op())


def is_constant(v: Value) -> bool:
    """Whether ``v`` is the result of a ConstantLike op."""
    op = v.defining_op()
    return op is not None and ConstantLike in op.traits


def constant_array(v: Value) -> Any:
    """The elements of ``v`` as a numpy array if it is the result of a ConstantLike op holding a
    dense or ``dense_resource`` tensor (with data), else None. (For a quantized weight, the stored
    integers.)"""
    a = value_constant(v)
    if isinstance(a, (DenseElementsAttr, DenseResourceElementsAttr)):
        try:
            return a.to_numpy()
        except ValueError:  # a resource without data
            return None
    return None


__all__ = ["constant_array", "constant_value", "is_constant", "value_constant"]


def holds_constant(op: Operation) -> bool:
    """Whether ``op`` is model plumbing that reads nothing (:class:`NotALayer` without operands: a
    weight, the absent operand): what it produces is fixed, not computed from the model's inputs."""
    return NotALayer in op.traits and not op.operands

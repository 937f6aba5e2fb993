"""Canonicalization patterns of the arith dialect (written against :mod:`lamina.rewrite`).

This module imports :mod:`lamina.rewrite` and registers each pattern for its root op class
(:func:`~lamina.ir.core.register_canonicalization`); the dialect names this module so that it is
imported on the first request for patterns, and loads without the rewrite machinery.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.arith import ops as arith_ops
from lamina.dialects.arith.numeric import attr_to_domain, domain_to_attr
from lamina.ir.attributes import Attribute
from lamina.ir.core import Operation, Value, register_canonicalization
from lamina.ir.traits import ConstantLike
from lamina.rewrite.pattern import PatternRewriter, RewritePattern


def constant_attr(v: Value) -> Attribute | None:
    """The value attribute of a constant-like defining op, or None."""
    d = v.defining_op()
    if d is not None and ConstantLike in d.traits:
        return d.properties.get("value")
    return None


def _combine(fn: Any, a: Attribute, b: Attribute, result_type: Any) -> Attribute | None:
    x, y = attr_to_domain(a), attr_to_domain(b)
    if x is None or y is None:
        return None
    with np.errstate(all="ignore"):
        return domain_to_attr(np.asarray(fn(x, y)), result_type)


def _rebuild(rewriter: PatternRewriter, op: Operation, cls: type, x: Value, c: Attribute) -> bool:
    t = op.results[0].type
    cst = rewriter.create(arith_ops.ConstantOp, value=c, result=t, loc=op.location)
    new = rewriter.create(cls, lhs=x, rhs=cst.results[0], loc=op.location)
    rewriter.replace_op(op, [new.results[0]])
    return True


class _ReassocConstant(RewritePattern):
    """``outer(inner(x, c1), c2) -> new_op(x, fn(c1, c2))``."""

    outer: Any = None
    inner: Any = None
    inner_commutative = True
    fn: Any = None
    result_cls: Any = None
    benefit = 1

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        c2 = constant_attr(op.operands[1])
        if c2 is None:
            return False
        inner = op.operands[0].defining_op()
        if not isinstance(inner, self.inner):
            return False
        x, c1 = inner.operands[0], constant_attr(inner.operands[1])
        if c1 is None and self.inner_commutative:
            x, c1 = inner.operands[1], constant_attr(inner.operands[0])
        if c1 is None:
            return False
        c = _combine(type(self).fn, c1, c2, op.results[0].type)
        if c is None:
            return False
        return _rebuild(rewriter, op, self.result_cls, x, c)


class AddIAddIConstant(_ReassocConstant):
    """``addi(addi(x, c1), c2) -> addi(x, c1 + c2)``."""

    root = arith_ops.AddIOp
    inner = arith_ops.AddIOp
    result_cls = arith_ops.AddIOp

    @staticmethod
    def fn(a: Any, b: Any) -> Any:
        return a + b


class AddISubIConstant(_ReassocConstant):
    """``addi(subi(x, c1), c2) -> addi(x, c2 - c1)``."""

    root = arith_ops.AddIOp
    inner = arith_ops.SubIOp
    inner_commutative = False
    result_cls = arith_ops.AddIOp

    @staticmethod
    def fn(c1: Any, c2: Any) -> Any:
        return c2 - c1


class SubIAddIConstant(_ReassocConstant):
    """``subi(addi(x, c1), c2) -> addi(x, c1 - c2)``."""

    root = arith_ops.SubIOp
    inner = arith_ops.AddIOp
    result_cls = arith_ops.AddIOp

    @staticmethod
    def fn(c1: Any, c2: Any) -> Any:
        return c1 - c2


class MulIMulIConstant(_ReassocConstant):
    """``muli(muli(x, c1), c2) -> muli(x, c1 * c2)``."""

    root = arith_ops.MulIOp
    inner = arith_ops.MulIOp
    result_cls = arith_ops.MulIOp

    @staticmethod
    def fn(a: Any, b: Any) -> Any:
        return a * b


_CMPI_INVERSE = {"eq": "ne", "ne": "eq", "slt": "sge", "sge": "slt", "sle": "sgt", "sgt": "sle",
                 "ult": "uge", "uge": "ult", "ule": "ugt", "ugt": "ule"}  # fmt: skip


class XOrINotCmpI(RewritePattern):
    """``xori(cmpi(pred, a, b), true) -> cmpi(!pred, a, b)``."""

    root = arith_ops.XOrIOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        c = constant_attr(op.operands[1])
        cmp = op.operands[0].defining_op()
        if (
            c is None
            or not isinstance(cmp, arith_ops.CmpIOp)
            or not getattr(c, "value", 0)
            or op.results[0].type is not cmp.results[0].type
        ):
            return False
        if op.results[0].type is not arith_ops.i1:
            return False
        new = rewriter.create(
            arith_ops.CmpIOp,
            predicate=_CMPI_INVERSE[cmp.predicate_name],
            lhs=cmp.lhs,
            rhs=cmp.rhs,
            loc=op.location,
        )
        rewriter.replace_op(op, [new.results[0]])
        return True


class ExtOfExt(RewritePattern):
    """``ext(ext(x)) -> ext(x)`` for extsi and extui."""

    def __init__(self, cls: type) -> None:
        self.root = cls  # type: ignore[misc]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        inner = op.operands[0].defining_op()
        if type(inner) is not type(op):
            return False
        new = rewriter.create(type(op), in_=inner.operands[0], out=op.results[0].type, loc=op.location)
        rewriter.replace_op(op, [new.results[0]])
        return True


def all_patterns() -> list[RewritePattern]:
    pats: list[RewritePattern] = []
    for cls in arith_ops.__dict__.values():
        if isinstance(cls, type) and issubclass(cls, arith_ops.ArithOp) and cls.name:
            pats.extend(cls.get_canonicalization_patterns())
    return pats


register_canonicalization(arith_ops.AddIOp, AddIAddIConstant, AddISubIConstant)
register_canonicalization(arith_ops.SubIOp, SubIAddIConstant)
register_canonicalization(arith_ops.MulIOp, MulIMulIConstant)
register_canonicalization(arith_ops.XOrIOp, XOrINotCmpI)
register_canonicalization(arith_ops.ExtSIOp, lambda: ExtOfExt(arith_ops.ExtSIOp))
register_canonicalization(arith_ops.ExtUIOp, lambda: ExtOfExt(arith_ops.ExtUIOp))

"""Canonicalization patterns of the cf dialect (written against :mod:`lamina.rewrite`)."""

from __future__ import annotations

from lamina.dialects.cf.ops import AssertOp, BranchOp, CondBranchOp
from lamina.ir.attributes import DenseElementsAttr, IntegerAttr
from lamina.ir.core import Operation, Value
from lamina.ir.traits import ConstantLike
from lamina.rewrite.pattern import PatternRewriter, RewritePattern


def _const_bool(v: Value) -> bool | None:
    d = v.defining_op()
    if d is None or ConstantLike not in d.traits:
        return None
    a = d.properties.get("value")
    if isinstance(a, IntegerAttr):
        return bool(a.value)
    if isinstance(a, DenseElementsAttr) and a.is_splat:
        return bool(a.splat_value)
    return None


class SimplifyConstCondBranch(RewritePattern):
    """``cond_br true, ^a(x), ^b(y) -> br ^a(x)`` (and false -> ``^b(y)``)."""

    root = CondBranchOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        assert isinstance(op, CondBranchOp)
        c = _const_bool(op.condition)
        if c is None:
            return False
        dest, args = (op.true_dest, op.true_dest_operands) if c else (op.false_dest, op.false_dest_operands)
        new = rewriter.create(BranchOp, dest=dest, dest_operands=list(args), loc=op.location)
        rewriter.replace_op(op, new)
        return True


class SimplifyCondBranchSameSuccessors(RewritePattern):
    """``cond_br %c, ^a(x), ^a(x) -> br ^a(x)``."""

    root = CondBranchOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        assert isinstance(op, CondBranchOp)
        if op.true_dest is not op.false_dest:
            return False
        t, f = op.true_dest_operands, op.false_dest_operands
        if len(t) != len(f) or any(a is not b for a, b in zip(t, f)):
            return False
        new = rewriter.create(BranchOp, dest=op.true_dest, dest_operands=list(t), loc=op.location)
        rewriter.replace_op(op, new)
        return True


class SimplifyBrToBlockWithSinglePred(RewritePattern):
    """``br ^b(x)`` where ``^b`` has only this predecessor: merge ``^b`` into the current block."""

    root = BranchOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        assert isinstance(op, BranchOp)
        dest = op.dest
        block = op.parent
        if block is None or dest is block or len(dest.uses) != 1 or dest.parent is not block.parent:
            return False
        if dest.parent is not None and dest.parent.blocks[0] is dest:
            return False  # never merge away the entry block
        args = list(op.dest_operands)
        rewriter.erase_op(op)
        rewriter.merge_blocks(dest, block, args)
        return True


class EraseTrueAssert(RewritePattern):
    """``cf.assert true, "..."`` is a no-op."""

    root = AssertOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        if _const_bool(op.operands[0]) is True:
            rewriter.erase_op(op)
            return True
        return False

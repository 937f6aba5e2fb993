"""Canonicalization patterns of the cf dialect (written against :mod:`lamina.rewrite`)."""

from __future__ import annotations

from lamina.dialects.cf.ops import AssertOp, BranchOp, CondBranchOp
from lamina.ir.attributes import DenseElementsAttr, IntegerAttr
from lamina.ir.core import Block, BlockArgument, Operation, Value, register_canonicalization
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
    """``cond_br %c, ^a(x), ^a(x) -> br ^a(x)``; when this block is ``^a``'s only predecessor,
    operands that differ between the two edges become ``arith.select %c, t, f``
    (``cond_br %c, ^a(x), ^a(y) -> br ^a(select(%c, x, y))``), as MLIR does."""

    root = CondBranchOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        assert isinstance(op, CondBranchOp)
        if op.true_dest is not op.false_dest:
            return False
        t, f = op.true_dest_operands, op.false_dest_operands
        if len(t) != len(f):
            return False
        same = all(a is b for a, b in zip(t, f))
        if not same and any(u.owner.parent is not op.parent for u in op.true_dest.uses):
            return False  # selects only when this block is the destination's one predecessor
        args: list[Value] = []
        for a, b in zip(t, f):
            if a is b:
                args.append(a)
                continue
            from lamina.dialects.arith.ops import SelectOp

            sel = rewriter.create(
                SelectOp, condition=op.condition, true_value=a, false_value=b, loc=op.location
            )
            args.append(sel.results[0])
        new = rewriter.create(BranchOp, dest=op.true_dest, dest_operands=args, loc=op.location)
        rewriter.replace_op(op, new)
        return True


def collapse_branch(dest: Block, operands: list[Value]) -> tuple[Block, list[Value]] | None:
    """Follow an edge into ``dest`` when ``dest`` holds nothing but ``cf.br ^next(...)`` whose
    operands are ``dest``'s arguments or values from outside it: the edge can go to ``^next``
    directly, with those arguments replaced by the edge's own operands. None when it cannot (more
    ops in ``dest``, another terminator, an argument used elsewhere, or a branch to itself)."""
    br = dest.first_op
    if br is None or br is not dest.last_op or not isinstance(br, BranchOp):
        return None
    nxt = br.dest
    if nxt is dest:
        return None  # an infinite loop stays
    args = list(dest.args)
    if any(u.owner is not br for a in args for u in a.uses):
        return None
    forwarded = []
    for v in br.dest_operands:
        if isinstance(v, BlockArgument) and v.owner is dest:
            forwarded.append(operands[v.index])
        else:
            forwarded.append(v)
    return nxt, forwarded


class SimplifyPassThroughBr(RewritePattern):
    """``br ^a(x)`` where ``^a: br ^b(f(x))`` holds nothing else -> ``br ^b(f(x))``."""

    root = BranchOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        assert isinstance(op, BranchOp)
        c = collapse_branch(op.dest, list(op.dest_operands))
        if c is None:
            return False
        new = rewriter.create(BranchOp, dest=c[0], dest_operands=c[1], loc=op.location)
        rewriter.replace_op(op, new)
        return True


class SimplifyPassThroughCondBranch(RewritePattern):
    """``cond_br`` to a block that only branches on: target the final block directly (each side)."""

    root = CondBranchOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        assert isinstance(op, CondBranchOp)
        t_dest, t_ops = op.true_dest, list(op.true_dest_operands)
        f_dest, f_ops = op.false_dest, list(op.false_dest_operands)
        ct = collapse_branch(t_dest, t_ops)
        cf = collapse_branch(f_dest, f_ops)
        if ct is None and cf is None:
            return False
        if ct is not None:
            t_dest, t_ops = ct
        if cf is not None:
            f_dest, f_ops = cf
        new = rewriter.create(
            CondBranchOp,
            condition=op.condition,
            true_dest=t_dest,
            true_dest_operands=t_ops,
            false_dest=f_dest,
            false_dest_operands=f_ops,
            loc=op.location,
        )
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


register_canonicalization(BranchOp, SimplifyBrToBlockWithSinglePred, SimplifyPassThroughBr)
register_canonicalization(
    CondBranchOp, SimplifyConstCondBranch, SimplifyCondBranchSameSuccessors, SimplifyPassThroughCondBranch
)
register_canonicalization(AssertOp, EraseTrueAssert)

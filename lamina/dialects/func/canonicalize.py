"""Canonicalization patterns of the func dialect (written against :mod:`lamina.rewrite`)."""

from __future__ import annotations

from lamina.dialects.func.ops import CallIndirectOp, CallOp, ConstantOp
from lamina.ir.core import Operation, register_canonicalization
from lamina.rewrite.pattern import PatternRewriter, RewritePattern


class SimplifyIndirectCallWithKnownCallee(RewritePattern):
    """``call_indirect (func.constant @f)(args) -> call @f(args)``; as mlir-opt-22 does, the new
    call carries none of the indirect call's attributes or ``arg_attrs``/``res_attrs``."""

    root = CallIndirectOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        c = op.operands[0].defining_op()
        if not isinstance(c, ConstantOp):
            return False
        props = {"callee": c.properties["value"]}
        new = CallOp.create(
            list(op.operands[1:]), [r.type for r in op.results], props, {}, 0, (), op.location
        )
        rewriter.insert(new)
        rewriter.replace_op(op, new)
        return True


register_canonicalization(CallIndirectOp, SimplifyIndirectCallWithKnownCallee)

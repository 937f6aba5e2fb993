"""A small ``lam_test`` dialect for the pass/rewrite/transform tests (not named ``test``: that name
belongs to mlir-opt's own test dialect)."""

from __future__ import annotations

from collections.abc import Sequence

import lamina.dialects  # noqa: F401  (registers func)
from lamina.ir.attributes import Attribute, IntegerAttr, StringAttr
from lamina.ir.context import Context, Dialect, register_dialect
from lamina.ir.core import Block, Operation, Value
from lamina.ir.location import Location
from lamina.ir.opdef import Op, operand, opt_prop, prop, region, result_def, var_operand, var_result
from lamina.ir.traits import Commutative, ConstantLike, IsTerminator, Pure
from lamina.ir.types import IntegerType
from lamina.rewrite import PatternRewriter, RewritePattern

i32 = IntegerType(32)
i64 = IntegerType(64)


class ConstOp(Op):
    name = "lam_test.const"
    traits = (Pure(), ConstantLike())
    value = prop(IntegerAttr)
    out = result_def()

    def fold(self, operands: Sequence[Attribute | None]) -> Sequence[Attribute | Value] | None:
        return [self.properties["value"]]


class AddOp(Op):
    name = "lam_test.add"
    traits = (Pure(), Commutative())
    lhs = operand()
    rhs = operand()
    out = result_def()

    def fold(self, operands: Sequence[Attribute | None]) -> Sequence[Attribute | Value] | None:
        a, b = operands
        if isinstance(a, IntegerAttr) and isinstance(b, IntegerAttr):
            return [IntegerAttr(a.value + b.value, self.results[0].type)]
        if isinstance(b, IntegerAttr) and b.value == 0:
            return [self.lhs]
        return None


class NegNegPattern(RewritePattern):
    root = "lam_test.neg"
    benefit = 1

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        inner = op.operand(0).defining_op()
        if not isinstance(inner, NegOp):
            return False
        rewriter.replace_op(op, [inner.operand(0)])
        return True


class NegOp(Op):
    name = "lam_test.neg"
    traits = (Pure(),)
    input = operand()
    out = result_def()

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[RewritePattern]:
        return [NegNegPattern()]


class EffectOp(Op):
    """Has side effects: never erased, never CSE'd."""

    name = "lam_test.effect"
    args = var_operand()
    outs = var_result()


class FlipPattern(RewritePattern):
    """Never converges: flips an attribute forever."""

    root = "lam_test.flip"

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        cur = op.attributes.get("state")
        new = StringAttr("b" if cur is StringAttr("a") else "a")
        rewriter.modify_op_in_place(op, lambda: op.attributes.__setitem__("state", new))
        return True


class FlipOp(Op):
    name = "lam_test.flip"
    args = var_operand()

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[RewritePattern]:
        return [FlipPattern()]


class FooOp(Op):
    """A source op for conversion tests."""

    name = "lam_test.foo"
    args = var_operand()
    outs = var_result()
    tag = opt_prop(StringAttr)


class BarOp(Op):
    """A target op for conversion tests."""

    name = "lam_test.bar"
    args = var_operand()
    outs = var_result()


class CrashOp(Op):
    name = "lam_test.crash"
    args = var_operand()


class WrapOp(Op):
    """A non-isolated op with a region (for nesting tests)."""

    name = "lam_test.wrap"
    args = var_operand()
    outs = var_result()
    body = region()


class YieldOp(Op):
    name = "lam_test.yield"
    traits = (IsTerminator(), Pure())
    args = var_operand()


def _materialize(value: Attribute, type: object, loc: Location) -> Operation | None:
    if isinstance(value, IntegerAttr):
        return ConstOp.build(value=value, out=type, loc=loc)
    return None


LAM_TEST = register_dialect(
    Dialect(
        "lam_test",
        [ConstOp, AddOp, NegOp, EffectOp, FlipOp, FooOp, BarOp, CrashOp, WrapOp, YieldOp],
        materialize_constant=_materialize,
    )
)


def make_context() -> Context:
    ctx = Context(load_all=False, handler=None)
    ctx.load_dialect("func")
    ctx.load_dialect(LAM_TEST)
    return ctx


def const(block: Block, v: int, t: IntegerType = i32) -> Value:
    return block.append(ConstOp.build(value=IntegerAttr(v, t), out=t)).results[0]


def add(block: Block, a: Value, b: Value) -> Value:
    return block.append(AddOp.build(lhs=a, rhs=b, out=a.type)).results[0]


def neg(block: Block, a: Value) -> Value:
    return block.append(NegOp.build(input=a, out=a.type)).results[0]


def effect(block: Block, *args: Value, results: int = 0) -> Operation:
    return block.append(EffectOp.build(args=list(args), outs=[i32] * results))

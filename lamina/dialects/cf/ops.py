"""The ``cf`` dialect: unstructured control flow (``cf.br``, ``cf.cond_br``, ``cf.assert``).

Branches implement :class:`~lamina.ir.traits.BranchOpInterface`; the verifier checks that the
operands forwarded to each successor match its block arguments in number and type (MLIR's
``branch has N operands for successor #i, but target block has M`` and ``type mismatch for bb
argument #j of successor #i``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.ir.attributes import DenseArrayAttr, StringAttr
from lamina.ir.constraints import Predicate
from lamina.ir.core import Block, Value
from lamina.ir.location import Location
from lamina.ir.opdef import OPERAND_SEGMENTS, Op, operand, prop, successor, var_operand
from lamina.ir.traits import BranchOpInterface, ExecutableOpInterface, IsTerminator, Pure
from lamina.ir.types import IntegerType

_i1 = IntegerType(1)
_i32 = IntegerType(32)
I1 = Predicate(lambda t: t is _i1, "1-bit signless integer")


def _print_attrs(op: Op, p: Any, elided: tuple[str, ...]) -> None:
    props = op.properties
    if op.attributes or any(k not in elided for k in props):
        merged = {k: v for k, v in props.items() if k not in elided}
        merged.update(op.attributes)
        p.print_optional_attr_dict(merged)


def _parse_attrs(cls: Any, parser: Any, props: dict[str, Any]) -> dict[str, Any]:
    attrs = parser.parse_optional_attr_dict()
    names = cls.op_def.prop_names
    for k in [k for k in attrs if k in names]:
        props[k] = attrs.pop(k)
    return attrs


class BranchOp(Op, BranchOpInterface):
    """``cf.br ^dest(%operands)``."""

    name = "cf.br"
    traits = (Pure(), IsTerminator())
    dest_operands = var_operand()
    dest = successor()

    @classmethod
    def new(cls, dest: Block, operands: Sequence[Value] = (), loc: Location | None = None) -> BranchOp:
        return cls.build(dest=dest, dest_operands=list(operands), loc=loc)

    def successor_operands(self, index: int) -> Sequence[Value]:
        if index != 0:
            raise IndexError(f"cf.br has one successor, not #{index}")
        return self.operands

    def execute_branch(self, inputs: Sequence[Any]) -> tuple[int, Sequence[Any]]:
        return 0, inputs

    # ``^bb1(%a, %b : i32, i32) {attrs}``
    def print(self, p: Any) -> None:
        p.write(" ")
        p.print_successor_and_use_list(self.successors[0], self.operands)
        _print_attrs(self, p, ())

    @classmethod
    def parse(cls, parser: Any) -> BranchOp:
        dest, vals = parser.parse_successor_and_use_list()
        props: dict[str, Any] = {}
        attrs = _parse_attrs(cls, parser, props)
        return parser.create_op(cls, vals, (), props, attrs, (), [dest])

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        from lamina.dialects.cf.canonicalize import SimplifyBrToBlockWithSinglePred, SimplifyPassThroughBr

        return [SimplifyBrToBlockWithSinglePred(), SimplifyPassThroughBr()]


class CondBranchOp(Op, BranchOpInterface):
    """``cf.cond_br %c, ^t(%a), ^f(%b)`` with ``operandSegmentSizes = [1, #a, #b]``."""

    name = "cf.cond_br"
    traits = (Pure(), IsTerminator())
    condition = operand(I1)
    true_dest_operands = var_operand()
    false_dest_operands = var_operand()
    true_dest = successor()
    false_dest = successor()

    @classmethod
    def new(
        cls,
        condition: Value,
        true_dest: Block,
        true_operands: Sequence[Value],
        false_dest: Block,
        false_operands: Sequence[Value] = (),
        loc: Location | None = None,
    ) -> CondBranchOp:
        return cls.build(
            condition=condition,
            true_dest=true_dest,
            true_dest_operands=list(true_operands),
            false_dest=false_dest,
            false_dest_operands=list(false_operands),
            loc=loc,
        )

    def successor_operands(self, index: int) -> Sequence[Value]:
        if index == 0:
            return self.true_dest_operands
        if index == 1:
            return self.false_dest_operands
        raise IndexError(f"cf.cond_br has two successors, not #{index}")

    def execute_branch(self, inputs: Sequence[Any]) -> tuple[int, Sequence[Any]]:
        """To the true successor when the condition (``inputs[0]``) holds, with its operands."""
        n_true = len(self.true_dest_operands)
        if inputs[0]:
            return 0, inputs[1 : 1 + n_true]
        return 1, inputs[1 + n_true :]

    # ``%c, ^bb1(%a : i32), ^bb2 {attrs}``
    def print(self, p: Any) -> None:
        succ = self.successors
        p.write(" " + p.value_name(self.operands[0]) + ", ")
        p.print_successor_and_use_list(succ[0], self.true_dest_operands)
        p.write(", ")
        p.print_successor_and_use_list(succ[1], self.false_dest_operands)
        _print_attrs(self, p, (OPERAND_SEGMENTS,))

    @classmethod
    def parse(cls, parser: Any) -> CondBranchOp:
        u = parser.parse_operand()
        parser.expect(",")
        t, tvals = parser.parse_successor_and_use_list()
        parser.expect(",")
        f, fvals = parser.parse_successor_and_use_list()
        props: dict[str, Any] = {}
        attrs = _parse_attrs(cls, parser, props)
        props[OPERAND_SEGMENTS] = DenseArrayAttr(_i32, [1, len(tvals), len(fvals)])
        cond = parser.resolve_operand(u, _i1)
        return parser.create_op(cls, [cond, *tvals, *fvals], (), props, attrs, (), [t, f])

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        from lamina.dialects.cf.canonicalize import (
            SimplifyCondBranchSameSuccessors,
            SimplifyConstCondBranch,
            SimplifyPassThroughCondBranch,
        )

        return [
            SimplifyConstCondBranch(),
            SimplifyCondBranchSameSuccessors(),
            SimplifyPassThroughCondBranch(),
        ]


class AssertOp(Op, ExecutableOpInterface):
    """``cf.assert %cond, "message"``: aborts with the message when the condition is false."""

    name = "cf.assert"
    arg = operand(I1)
    msg = prop(StringAttr)

    @classmethod
    def new(cls, cond: Value, msg: str, loc: Location | None = None) -> AssertOp:
        return cls.build(arg=cond, msg=StringAttr(msg), loc=loc)

    # ``%c, "message" {attrs}``
    def print(self, p: Any) -> None:
        p.write(" " + p.value_name(self.operands[0]) + ", ")
        p.print_attribute(self.properties["msg"])
        _print_attrs(self, p, ("msg",))

    @classmethod
    def parse(cls, parser: Any) -> AssertOp:
        u = parser.parse_operand()
        parser.expect(",")
        props: dict[str, Any] = {"msg": StringAttr(parser.parse_string())}
        attrs = _parse_attrs(cls, parser, props)
        return parser.create_op(cls, [parser.resolve_operand(u, _i1)], (), props, attrs)

    def execute(self, inputs: Sequence[Any]) -> Sequence[Any]:
        if not bool(inputs[0]):
            raise AssertionError(self.properties["msg"].value)
        return []

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        from lamina.dialects.cf.canonicalize import EraseTrueAssert

        return [EraseTrueAssert()]


__all__ = ["AssertOp", "BranchOp", "CondBranchOp"]

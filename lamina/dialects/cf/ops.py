"""The ``cf`` dialect: unstructured control flow (``cf.br``, ``cf.cond_br``, ``cf.assert``).

Branches implement :class:`~lamina.ir.traits.BranchOpInterface`; the verifier checks that the
operands forwarded to each successor match its block arguments in number and type (MLIR's
``branch has N operands for successor #i, but target block has M`` and ``type mismatch for bb
argument #j of successor #i``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.ir.attributes import StringAttr
from lamina.ir.constraints import Predicate
from lamina.ir.core import Block, Value
from lamina.ir.location import Location
from lamina.ir.opdef import Op, operand, prop, successor, var_operand
from lamina.ir.traits import BranchOpInterface, ExecutableOpInterface, IsTerminator, Pure
from lamina.ir.types import IntegerType

_i1 = IntegerType(1)
I1 = Predicate(lambda t: t is _i1, "1-bit signless integer")


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

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        from lamina.dialects.cf.canonicalize import SimplifyBrToBlockWithSinglePred

        return [SimplifyBrToBlockWithSinglePred()]


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

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        from lamina.dialects.cf.canonicalize import SimplifyCondBranchSameSuccessors, SimplifyConstCondBranch

        return [SimplifyConstCondBranch(), SimplifyCondBranchSameSuccessors()]


class AssertOp(Op, ExecutableOpInterface):
    """``cf.assert %cond, "message"``: aborts with the message when the condition is false."""

    name = "cf.assert"
    arg = operand(I1)
    msg = prop(StringAttr)

    @classmethod
    def new(cls, cond: Value, msg: str, loc: Location | None = None) -> AssertOp:
        return cls.build(arg=cond, msg=StringAttr(msg), loc=loc)

    def execute(self, inputs: Sequence[Any]) -> Sequence[Any]:
        if not bool(inputs[0]):
            raise AssertionError(self.properties["msg"].value)
        return []

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        from lamina.dialects.cf.canonicalize import EraseTrueAssert

        return [EraseTrueAssert()]


__all__ = ["AssertOp", "BranchOp", "CondBranchOp"]

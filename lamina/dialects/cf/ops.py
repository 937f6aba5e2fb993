"""The ``cf`` dialect: unstructured control flow (``cf.br``, ``cf.cond_br``, ``cf.switch``,
``cf.assert``).

Branches implement :class:`~lamina.ir.traits.BranchOpInterface`; the verifier checks that the
operands forwarded to each successor match its block arguments in number and type (MLIR's
``branch has N operands for successor #i, but target block has M`` and ``type mismatch for bb
argument #j of successor #i``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.ir.attributes import DenseArrayAttr, DenseElementsAttr, StringAttr
from lamina.ir.constraints import Predicate, SignlessInteger
from lamina.ir.core import Block, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.location import Location
from lamina.ir.opdef import (
    OPERAND_SEGMENTS,
    Op,
    operand,
    opt_prop,
    prop,
    successor,
    var_operand,
    var_successor,
)
from lamina.ir.traits import BranchOpInterface, ExecutableOpInterface, IsTerminator, Pure
from lamina.ir.types import IntegerType, VectorType

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


class SwitchOp(Op, BranchOpInterface):
    """``cf.switch %flag : i32, [default: ^bb1(%a : i32), 42: ^bb2, ...]``: to the successor of the
    case value equal to ``flag``, else to the default. ``case_values`` is a ``vector<Nxi..>`` of
    the flag's type (absent without cases); ``case_operand_segments`` splits ``case_operands`` by
    case (MLIR's VariadicOfVariadic)."""

    name = "cf.switch"
    traits = (Pure(), IsTerminator())
    flag = operand(SignlessInteger)
    default_operands = var_operand()
    case_operands = var_operand()
    case_values = opt_prop(DenseElementsAttr)
    case_operand_segments = prop(DenseArrayAttr)
    default_destination = successor()
    case_destinations = var_successor()

    @classmethod
    def new(
        cls,
        flag: Value,
        default: Block,
        default_operands: Sequence[Value] = (),
        cases: Sequence[tuple[int, Block, Sequence[Value]]] = (),
        loc: Location | None = None,
    ) -> SwitchOp:
        """``cases``: (value, successor, operands) in order."""
        return cls._make(flag, default, list(default_operands), cases, {}, loc)

    @classmethod
    def _make(
        cls,
        flag: Value,
        default: Block,
        default_operands: list[Value],
        cases: Sequence[tuple[int, Block, Sequence[Value]]],
        attrs: dict[str, Any],
        loc: Location | None = None,
        create: Any = None,
    ) -> Any:
        t = flag.type
        case_ops = [v for _, _, vals in cases for v in vals]
        props: dict[str, Any] = {
            "case_operand_segments": DenseArrayAttr(_i32, [len(vals) for _, _, vals in cases])
        }
        if cases:
            values = np.array([_wrap_signed(v, t.width) for v, _, _ in cases], dtype=np.int64)
            props["case_values"] = DenseElementsAttr(VectorType([len(cases)], t), values)
        props[OPERAND_SEGMENTS] = DenseArrayAttr(_i32, [1, len(default_operands), len(case_ops)])
        operands = [flag, *default_operands, *case_ops]
        successors = [default, *(b for _, b, _ in cases)]
        if create is not None:
            return create(cls, operands, (), props, attrs, (), successors)
        return cls.create(operands, [], props, dict(attrs), 0, successors, loc)

    def _case_slices(self) -> list[tuple[int, int]]:
        segs = list(self.properties["case_operand_segments"])
        starts = np.concatenate([[0], np.cumsum(segs)]).astype(int) if segs else [0]
        return [(int(starts[i]), int(starts[i + 1])) for i in range(len(segs))]

    def case_value_list(self) -> list[int]:
        """The case values as signed integers (empty without cases)."""
        cv = self.properties.get("case_values")
        return [] if cv is None else [int(x) for x in np.asarray(cv.to_numpy()).reshape(-1)]

    def successor_operands(self, index: int) -> Sequence[Value]:
        if index == 0:
            return self.default_operands
        lo, hi = self._case_slices()[index - 1]
        return self.case_operands[lo:hi]

    def execute_branch(self, inputs: Sequence[Any]) -> tuple[int, Sequence[Any]]:
        """To the first case whose value equals the flag (as bits of the flag's width), else the
        default."""
        w = self.operands[0].type.width
        flag = int(np.asarray(inputs[0]).reshape(-1)[0]) % (1 << w)
        n_default = len(self.default_operands)
        base = 1 + n_default
        for i, v in enumerate(self.case_value_list()):
            if v % (1 << w) == flag:
                lo, hi = self._case_slices()[i]
                return i + 1, inputs[base + lo : base + hi]
        return 0, inputs[1:base]

    def verify_(self) -> None:
        segs = list(self.properties["case_operand_segments"])
        if sum(segs) != len(self.case_operands):
            raise VerifyError(
                f"'case_operand_segments' sums to {sum(segs)} but there are {len(self.case_operands)} "
                "case operands"
            )
        cv = self.properties.get("case_values")
        n_dest = len(self.successors) - 1
        if cv is None and not n_dest:
            return
        n_values = 0 if cv is None else int(np.prod(cv.type.shape))
        if cv is not None and cv.type.element_type is not self.operands[0].type:
            raise VerifyError(
                f"'flag' type ('{self.operands[0].type}') should match case value type "
                f"('{cv.type.element_type}')"
            )
        if n_values != n_dest:
            raise VerifyError(
                f"number of case values ({n_values}) should match number of case destinations ({n_dest})"
            )
        if len(segs) != n_dest:
            raise VerifyError(
                f"'case_operand_segments' has {len(segs)} entries but there are {n_dest} case destinations"
            )

    # ``%flag : i32, [\n  default: ^bb1(%a : i32),\n  42: ^bb2\n]`` (as mlir-opt prints it: the
    # values unsigned, no newline before ``]`` without cases)
    def print(self, p: Any) -> None:
        flag = self.operands[0]
        p.write(" " + p.value_name(flag) + " : " + str(flag.type) + ", [")
        p.print_new_line()
        p.write("  default: ")
        p.print_successor_and_use_list(self.successors[0], self.default_operands)
        values = self.case_value_list()
        w = flag.type.width
        for i, v in enumerate(values):
            p.write(",")
            p.print_new_line()
            p.write(f"  {v % (1 << w)}: ")
            p.print_successor_and_use_list(self.successors[i + 1], self.successor_operands(i + 1))
        if values:
            p.print_new_line()
        p.write("]")
        _print_attrs(self, p, ("case_values", "case_operand_segments", OPERAND_SEGMENTS))

    @classmethod
    def parse(cls, parser: Any) -> SwitchOp:
        u = parser.parse_operand()
        t = parser.parse_colon_type()
        if not isinstance(t, IntegerType):
            raise parser.error(f"'cf.switch' flag must be a signless integer, got '{t}'")
        parser.expect(",")
        parser.expect("[")
        parser.parse_keyword("default")
        parser.expect(":")
        default, default_ops = parser.parse_successor_and_use_list()
        cases: list[tuple[int, Block, Sequence[Value]]] = []
        while parser.parse_optional(","):
            v = parser.parse_integer()
            parser.expect(":")
            b, vals = parser.parse_successor_and_use_list()
            cases.append((v, b, vals))
        parser.expect("]")
        attrs = parser.parse_optional_attr_dict()
        flag = parser.resolve_operand(u, t)
        return cls._make(flag, default, default_ops, cases, attrs, create=parser.create_op)  # type: ignore[no-any-return]


def _wrap_signed(v: int, width: int) -> int:
    v &= (1 << width) - 1
    return v - (1 << width) if width > 1 and v >= 1 << (width - 1) else v


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


__all__ = ["AssertOp", "BranchOp", "CondBranchOp", "SwitchOp"]

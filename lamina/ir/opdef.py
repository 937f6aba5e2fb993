"""Declarative op definitions (Lamina's ODS).

An op is declared once, in one class::

    class AddIOp(Op):
        name = "arith.addi"
        traits = (Pure(), Commutative(), SameOperandsAndResultType())
        lhs = operand(SignlessIntegerLike)
        rhs = operand(SignlessIntegerLike)
        result = result_def(SignlessIntegerLike)
        overflow = prop(DictionaryAttr, optional=True)

        def verify_(self):  # anything the declaration cannot say
            ...

That gives, for free: typed accessors (``op.lhs`` is a Value; a property reads as its constraint's
Python value — ``op.group`` an ``int`` under ``I64Attr``, a ``bool`` under ``BoolProp``, a tuple
under ``I64ArrayAttr``, the attribute itself under a plain attribute class — or its default;
``op.properties[name]`` is always the attribute), a keyword builder (``AddIOp.build(lhs=a, rhs=b, result=t)``), and verification of operand
and result counts, segment sizes, type and attribute constraints, required properties, region and
successor counts, and every trait — before the op's own ``verify_`` runs.

Variadic and optional groups: with one variadic group the split is implied by the counts; with more,
the op stores ``operandSegmentSizes`` / ``resultSegmentSizes`` properties as MLIR does (the builder
fills them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from lamina.ir.attributes import (
    Attribute,
    DenseArrayAttr,
)
from lamina.ir.constraints import Constraint, to_constraint
from lamina.ir.core import Block, IRError, Operation, Region, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.location import Location
from lamina.ir.traits import Trait, trait_closure
from lamina.ir.types import IntegerType, Type

SINGLE, OPTIONAL, VARIADIC = "single", "optional", "variadic"
OPERAND_SEGMENTS = "operandSegmentSizes"
RESULT_SEGMENTS = "resultSegmentSizes"
_i32 = IntegerType(32)


class _Field:
    __slots__ = ("name", "kind", "constraint", "index", "owner")

    def __init__(self, kind: str, constraint: Any) -> None:
        self.name = ""
        self.kind = kind
        self.constraint: Constraint = to_constraint(constraint)
        self.index = 0
        self.owner: OpDef | None = None

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name


class OperandDef(_Field):
    __slots__ = ()

    def __get__(self, op: Operation | None, cls: type | None = None) -> Any:
        if op is None:
            return self
        assert self.owner is not None
        lo, hi = self.owner.operand_range(op, self.index)
        if self.kind == SINGLE:
            return op._operands[lo].value
        vals = [o.value for o in op._operands[lo:hi]]
        if self.kind == OPTIONAL:
            return vals[0] if vals else None
        return vals


class ResultDef(_Field):
    __slots__ = ()

    def __get__(self, op: Operation | None, cls: type | None = None) -> Any:
        if op is None:
            return self
        assert self.owner is not None
        lo, hi = self.owner.result_range(op, self.index)
        if self.kind == SINGLE:
            return op.results[lo]
        vals = list(op.results[lo:hi])
        if self.kind == OPTIONAL:
            return vals[0] if vals else None
        return vals


class PropDef:
    """An inherent attribute, stored in ``op.properties``.

    Reading ``op.<prop>`` gives ``constraint.to_python(attribute)`` (or of the default; None when
    absent without one); assigning stores ``constraint.from_python(value)``, None removes it."""

    __slots__ = ("name", "constraint", "default", "optional")

    def __init__(
        self, constraint: Any = None, default: Attribute | None = None, optional: bool = False, name: str = ""
    ) -> None:
        self.name = name  # the MLIR attribute name; defaults to the Python field name
        self.constraint = to_constraint(constraint)
        self.default = default
        self.optional = optional or default is not None

    def __set_name__(self, owner: type, name: str) -> None:
        if not self.name:
            self.name = name

    def __get__(self, op: Operation | None, cls: type | None = None) -> Any:
        if op is None:
            return self
        a = op.properties.get(self.name, self.default)
        return None if a is None else self.constraint.to_python(a)

    def __set__(self, op: Operation, value: Any) -> None:
        if value is None:
            op.properties.pop(self.name, None)
        else:
            op.properties[self.name] = self.constraint.from_python(value)


class RegionDef:
    __slots__ = ("name", "variadic", "index", "single_block")

    def __init__(self, variadic: bool = False, single_block: bool = False) -> None:
        self.name = ""
        self.variadic = variadic
        self.single_block = single_block
        self.index = 0

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, op: Operation | None, cls: type | None = None) -> Any:
        if op is None:
            return self
        return op.regions[self.index :] if self.variadic else op.regions[self.index]


class SuccessorDef:
    __slots__ = ("name", "variadic", "index")

    def __init__(self, variadic: bool = False) -> None:
        self.name = ""
        self.variadic = variadic
        self.index = 0

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, op: Operation | None, cls: type | None = None) -> Any:
        if op is None:
            return self
        succ = op.successors
        return succ[self.index :] if self.variadic else succ[self.index]


# ---- declaration helpers (read like ODS) ------------------------------------------------------


def operand(constraint: Any = None) -> Any:
    return OperandDef(SINGLE, constraint)


def opt_operand(constraint: Any = None) -> Any:
    return OperandDef(OPTIONAL, constraint)


def var_operand(constraint: Any = None) -> Any:
    return OperandDef(VARIADIC, constraint)


def result_def(constraint: Any = None) -> Any:
    return ResultDef(SINGLE, constraint)


def opt_result(constraint: Any = None) -> Any:
    return ResultDef(OPTIONAL, constraint)


def var_result(constraint: Any = None) -> Any:
    return ResultDef(VARIADIC, constraint)


def prop(
    constraint: Any = None, default: Attribute | None = None, optional: bool = False, name: str = ""
) -> Any:
    """An inherent attribute. ``name`` overrides the attribute name when the Python name differs."""
    return PropDef(constraint, default, optional, name)


def opt_prop(constraint: Any = None, name: str = "") -> Any:
    return PropDef(constraint, None, True, name)


def region(single_block: bool = False) -> Any:
    return RegionDef(False, single_block)


def var_region() -> Any:
    return RegionDef(True)


def successor() -> Any:
    return SuccessorDef(False)


def var_successor() -> Any:
    return SuccessorDef(True)


# ---- the definition -----------------------------------------------------------------------


class OpDef:
    """Everything declared about one op class; used by accessors, builder and verifier."""

    __slots__ = (
        "operands",
        "results",
        "props",
        "prop_names",
        "regions",
        "successors",
        "operand_segmented",
        "result_segmented",
        "upgrades",
    )

    def __init__(self, cls: type) -> None:
        self.operands: list[OperandDef] = []
        self.results: list[ResultDef] = []
        self.props: list[PropDef] = []
        self.regions: list[RegionDef] = []
        self.successors: list[SuccessorDef] = []
        for klass in reversed(cls.__mro__):
            for v in vars(klass).values():
                if isinstance(v, OperandDef):
                    _replace(self.operands, v)
                elif isinstance(v, ResultDef):
                    _replace(self.results, v)
                elif isinstance(v, PropDef):
                    _replace(self.props, v)
                elif isinstance(v, RegionDef):
                    _replace(self.regions, v)
                elif isinstance(v, SuccessorDef):
                    _replace(self.successors, v)
        for i, f in enumerate(self.operands):
            f.index, f.owner = i, self
        for i, rf in enumerate(self.results):
            rf.index, rf.owner = i, self
        for i, r in enumerate(self.regions):
            r.index = i
        for i, s in enumerate(self.successors):
            s.index = i
        self.operand_segmented = sum(f.kind != SINGLE for f in self.operands) > 1
        self.result_segmented = sum(f.kind != SINGLE for f in self.results) > 1
        #: Properties whose constraint reads what earlier Lamina versions wrote (0/1 booleans).
        self.upgrades = tuple(p for p in self.props if type(p.constraint).upgrade is not Constraint.upgrade)
        self.prop_names = (
            frozenset(p.name for p in self.props)
            | ({OPERAND_SEGMENTS} if self.operand_segmented else set())
            | ({RESULT_SEGMENTS} if self.result_segmented else set())
        )

    def upgrade(self, properties: dict[str, Attribute]) -> dict[str, Attribute]:
        """``properties`` with what earlier Lamina versions wrote read as today's attributes (a
        ``1 : i64`` boolean becomes ``true``); the same dict when nothing changes."""
        out = properties
        for p in self.upgrades:
            a = properties.get(p.name)
            if a is not None:
                b = p.constraint.upgrade(a)
                if b is not a:
                    if out is properties:
                        out = dict(properties)
                    out[p.name] = b
        return out

    # segment computation ------------------------------------------------------------------

    def _range(
        self, fields: Sequence[_Field], n: int, index: int, segmented: bool, segs: Sequence[int] | None
    ) -> tuple[int, int]:
        if segmented:
            if segs is None:  # missing segment sizes: all groups empty (as MLIR's default)
                return 0, 0
            start = sum(segs[:index])
            return start, start + segs[index]
        lo = 0
        var_len = n - sum(1 for f in fields if f.kind == SINGLE)
        for f in fields[:index]:
            lo += 1 if f.kind == SINGLE else var_len
        size = 1 if fields[index].kind == SINGLE else var_len
        return lo, lo + size

    def operand_range(self, op: Operation, index: int) -> tuple[int, int]:
        segs = op.properties.get(OPERAND_SEGMENTS) if self.operand_segmented else None
        return self._range(
            self.operands,
            len(op._operands),
            index,
            self.operand_segmented,
            segs.values if isinstance(segs, DenseArrayAttr) else None,
        )

    def result_range(self, op: Operation, index: int) -> tuple[int, int]:
        segs = op.properties.get(RESULT_SEGMENTS) if self.result_segmented else None
        return self._range(
            self.results,
            len(op.results),
            index,
            self.result_segmented,
            segs.values if isinstance(segs, DenseArrayAttr) else None,
        )


def _replace(lst: list, field: _Field | PropDef | RegionDef | SuccessorDef) -> None:
    for i, f in enumerate(lst):
        if f.name == field.name:
            lst[i] = field
            return
    lst.append(field)


_RESERVED = {
    "results",
    "regions",
    "properties",
    "attributes",
    "location",
    "parent",
    "operands",
    "name",
    "traits",
    "successors",
    "verify_",
    "fold",
    "create",
    "build",
    "clone",
    "erase",
    "walk",
}


class Op(Operation):
    """Base class of declared ops. Subclasses set ``name``, ``traits`` and fields."""

    __slots__ = ()
    trait_list: ClassVar[tuple[Trait, ...]] = ()
    #: Optional declarative assembly format (see :mod:`lamina.ir.assembly_format`).
    assembly_format: ClassVar[str | None] = None

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        declared = cls.__dict__.get("traits")
        if declared is not None and not isinstance(declared, frozenset):
            cls.trait_list = tuple(declared)
        elif declared is None:
            cls.trait_list = getattr(cls, "trait_list", ())
        cls.traits = trait_closure(cls.trait_list)
        for k, v in cls.__dict__.items():
            if isinstance(v, (_Field, PropDef, RegionDef, SuccessorDef)) and k in _RESERVED:
                raise TypeError(f"{cls.__name__}: field name '{k}' is reserved by Operation")
        cls.op_def = OpDef(cls)
        if "parse" in cls.__dict__ or "print" in cls.__dict__ or cls.assembly_format:
            cls.has_custom_assembly = True

    # ---- builder -------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        loc: Location | None = None,
        attributes: dict[str, Attribute] | None = None,
        **kwargs: Any,
    ) -> Any:
        """Keyword builder: one keyword per declared operand, result (its type), property, region
        and successor. Optional groups may be omitted; variadic ones take lists."""
        od: OpDef = cls.op_def
        operands: list[Value] = []
        oseg: list[int] = []
        for f in od.operands:
            v = kwargs.pop(f.name, None)
            if f.kind == SINGLE:
                if v is None:
                    raise IRError(f"{cls.name}: missing operand '{f.name}'")
                operands.append(v)
                oseg.append(1)
            else:
                vals = [] if v is None else ([v] if isinstance(v, Value) else list(v))
                operands.extend(vals)
                oseg.append(len(vals))
        rtypes: list[Type] = []
        rseg: list[int] = []
        for rf in od.results:
            t = kwargs.pop(rf.name, None)
            if rf.kind == SINGLE:
                if t is None:
                    raise IRError(f"{cls.name}: missing result type '{rf.name}'")
                rtypes.append(t)
                rseg.append(1)
            else:
                ts = [] if t is None else ([t] if isinstance(t, Type) else list(t))
                rtypes.extend(ts)
                rseg.append(len(ts))
        props: dict[str, Attribute] = {}
        for p in od.props:
            v = kwargs.pop(p.name, None)
            if v is not None:
                props[p.name] = p.constraint.from_python(v)
        if od.operand_segmented:
            props[OPERAND_SEGMENTS] = DenseArrayAttr(_i32, oseg)
        if od.result_segmented:
            props[RESULT_SEGMENTS] = DenseArrayAttr(_i32, rseg)
        regions: list[Region] = []
        for r in od.regions:
            v = kwargs.pop(r.name, None)
            if r.variadic:
                regions.extend(v or [])
            else:
                regions.append(v if v is not None else Region())
        succs: list[Block] = []
        for s in od.successors:
            v = kwargs.pop(s.name, None)
            if s.variadic:
                succs.extend(v or [])
            elif v is None:
                raise IRError(f"{cls.name}: missing successor '{s.name}'")
            else:
                succs.append(v)
        if kwargs:
            raise IRError(f"{cls.name}: unknown builder argument(s) {', '.join(sorted(kwargs))}")
        return cls.create(operands, rtypes, props, dict(attributes or {}), regions, succs, loc)


# ---- verification of the declaration ------------------------------------------------------------


def _count_msg(what: str, fields: list, n: int) -> str | None:
    """MLIR's wording (OpDefinition.cpp's verifyNOperands/verifyOneResult/...) for a bad count."""
    fixed = sum(1 for f in fields if f.kind == SINGLE)
    has_var = any(f.kind == VARIADIC for f in fields)
    n_opt = sum(1 for f in fields if f.kind == OPTIONAL)
    if has_var or n_opt:
        if n < fixed:
            return f"expected {fixed} or more {what}s, but found {n}"
        if not has_var and n > fixed + n_opt:
            first = next(i for i, f in enumerate(fields) if f.kind == OPTIONAL)
            return f"{what} group starting at #{first} requires 0 or 1 element, but found {n - fixed}"
        return None
    if n == fixed:
        return None
    if fixed == 0:
        return f"requires zero {what}s"
    if fixed == 1:
        return "requires a single operand" if what == "operand" else "requires one result"
    if what == "result":
        return f"expected {fixed} results"
    return f"expected {fixed} {what}s, but found {n}"


def _check_segments(op: Operation, key: str, fields: list, n: int, what: str) -> None:
    segs = op.properties.get(key)
    if segs is None:  # MLIR's default-initialised property: all zeros
        segs = DenseArrayAttr(_i32, [0] * len(fields))
    if not isinstance(segs, DenseArrayAttr) or len(segs) != len(fields):
        raise VerifyError(f"'{key}' must be an array<i32> of {len(fields)} elements")
    if sum(segs.values) != n:
        raise VerifyError(
            f"{what} count ({n}) does not match with the total size ({sum(segs.values)}) specified in attribute '{key}'"
        )
    for f, s in zip(fields, segs.values):
        if s < 0 or (f.kind == SINGLE and s != 1) or (f.kind == OPTIONAL and s > 1):
            raise VerifyError(f"'{key}' has an invalid size {s} for {what} group '{f.name}'")


def verify_op_def(op: Operation) -> None:
    """Check an op against its declaration; raises VerifyError with MLIR-like messages."""
    od: OpDef | None = op.op_def
    if od is None:
        return
    # operands
    if od.operand_segmented:
        _check_segments(op, OPERAND_SEGMENTS, od.operands, len(op._operands), "operand")
    else:
        msg = _count_msg("operand", od.operands, len(op._operands))
        if msg:
            raise VerifyError(msg)
    for f in od.operands:
        lo, hi = od.operand_range(op, f.index)
        for i in range(lo, hi):
            t = op._operands[i].value.type
            if not f.constraint.check(t):
                raise VerifyError(f"operand #{i} must be {f.constraint.description}, but got '{t}'")
    # results
    if od.result_segmented:
        _check_segments(op, RESULT_SEGMENTS, od.results, len(op.results), "result")
    else:
        msg = _count_msg("result", od.results, len(op.results))
        if msg:
            raise VerifyError(msg)
    for rf in od.results:
        lo, hi = od.result_range(op, rf.index)
        for i in range(lo, hi):
            t = op.results[i].type
            if not rf.constraint.check(t):
                raise VerifyError(f"result #{i} must be {rf.constraint.description}, but got '{t}'")
    # properties
    for p in od.props:
        a = op.properties.get(p.name)
        if a is None:
            if not p.optional:
                raise VerifyError(f"requires attribute '{p.name}'")
            continue
        if not p.constraint.check(a):
            raise VerifyError(
                f"attribute '{p.name}' failed to satisfy constraint: {p.constraint.description}"
            )
    # regions
    n_fixed = sum(1 for r in od.regions if not r.variadic)
    has_var = any(r.variadic for r in od.regions)
    nr = len(op.regions)
    if has_var and nr < n_fixed:
        raise VerifyError(f"expected {n_fixed} or more regions")
    if not has_var and nr != n_fixed:
        raise VerifyError(
            {0: "requires zero regions", 1: "requires one region"}.get(n_fixed, f"expected {n_fixed} regions")
        )
    for r in od.regions:
        if r.single_block and not r.variadic and len(op.regions[r.index].blocks) > 1:
            raise VerifyError(
                f"region #{r.index} ('{r.name}') failed to verify constraint: region with 1 blocks"
            )
    # successors
    ns_fixed = sum(1 for s in od.successors if not s.variadic)
    s_var = any(s.variadic for s in od.successors)
    ns = len(op._successors)
    if s_var and ns < ns_fixed:
        raise VerifyError(f"requires at least {ns_fixed} successors but found {ns}")
    if not s_var and ns != ns_fixed:
        raise VerifyError(f"requires {ns_fixed} successor{'' if ns_fixed == 1 else 's'} but found {ns}")


def verify_traits(op: Operation) -> None:
    for t in getattr(type(op), "trait_list", ()):
        t.verify(op)


def declared_ops(objs: Sequence[Any]) -> list[type[Op]]:
    """The Op subclasses among ``objs`` (e.g. ``vars(module).values()``), for dialect registration."""
    return [o for o in objs if isinstance(o, type) and issubclass(o, Op) and o is not Op and o.name]

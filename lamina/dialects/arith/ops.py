"""The ``arith`` dialect: integer and float arithmetic, comparisons, select and casts.

Op names, operand/property names, predicates and verifier messages follow upstream MLIR. Every op
folds (constants through numpy, wrapping at the integer width, plus algebraic identities) and can
be executed by the reference interpreter (:class:`~lamina.ir.traits.ExecutableOpInterface`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np

from lamina.dialects.arith.attributes import (
    FASTMATH_NONE,
    OVERFLOW_NONE,
    FastMathFlagsAttr,
    IntegerOverflowFlagsAttr,
)
from lamina.dialects.arith.numeric import (
    attr_to_domain,
    const_of,
    domain_to_attr,
    domain_to_runtime,
    element_type,
    int_width,
    is_all_ones,
    mask,
    runtime_to_domain,
    splat_float,
    splat_int,
    to_signed,
)
from lamina.ir.attributes import (
    Attribute,
    DenseElementsAttr,
    ElementsAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    UnitAttr,
)
from lamina.ir.constraints import (
    FloatLike,
    Predicate,
    SignlessIntegerLike,
    SignlessIntegerOrFloatLike,
)
from lamina.ir.core import OpTraits, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.location import Location
from lamina.ir.opdef import Op, opt_prop, prop, result_def
from lamina.ir.opdef import operand as operand_def
from lamina.ir.traits import (
    Commutative,
    ConstantLike,
    ConstantValueInterface,
    Elementwise,
    ExecutableOpInterface,
    NoMemoryEffect,
    Pure,
    SameOperandsAndResultType,
    SameTypeOperands,
)
from lamina.ir.types import (
    FloatType,
    IndexType,
    IntegerType,
    RankedTensorType,
    ShapedType,
    Type,
    UnrankedTensorType,
    VectorType,
    i1,
)

_i64 = IntegerType(64)


def _elem(t: Type) -> Type:
    return t.element_type if isinstance(t, (RankedTensorType, UnrankedTensorType, VectorType)) else t


BoolLike = Predicate(lambda t: _elem(t) is i1, "bool-like")
SignlessFixedWidthIntegerLike = Predicate(
    lambda t: isinstance(_elem(t), IntegerType) and _elem(t).is_signless, "signless-fixed-width-integer-like"
)
IndexCastable = SignlessIntegerLike
TypedAttrConstraint = Predicate(lambda a: isinstance(getattr(a, "type", None), Type), "TypedAttr instance")


# --------------------------------------------------------------------------------------------
# Base classes
# --------------------------------------------------------------------------------------------


class ArithOp(Op, ExecutableOpInterface):
    """Base of arith ops: fills default-valued properties on creation (as MLIR stores them, so the
    generic form prints them), and provides fold/execute through ``_compute``."""

    _defaults: ClassVar[tuple[tuple[str, Attribute], ...] | None] = None

    @classmethod
    def create(cls, *args: Any, **kwargs: Any) -> Any:
        op = super().create(*args, **kwargs)
        defaults = cls.__dict__.get("_defaults")
        if defaults is None:
            defaults = tuple((p.name, p.default) for p in cls.op_def.props if p.default is not None)
            cls._defaults = defaults
        if defaults:
            props = op.properties
            missing = [(k, v) for k, v in defaults if k not in props]
            if missing:
                op.properties = {**props, **dict(missing)}
        return op

    # Subclasses implement _compute on compute-domain arrays (see numeric.py); None: cannot fold.
    def _compute(self, args: list[np.ndarray]) -> np.ndarray | None:
        return None

    def _fold_identity(self, operands: Sequence[Attribute | None]) -> list[Attribute | Value] | None:
        return None

    def fold(self, operands: Sequence[Attribute | None]) -> Sequence[Attribute | Value] | None:
        r = self._fold_identity(operands)
        if r is not None:
            return r
        if not operands or any(a is None for a in operands):
            return None
        args = [attr_to_domain(a) for a in operands]
        if any(a is None for a in args):
            return None
        with np.errstate(all="ignore"):
            out = self._compute(args)  # type: ignore[arg-type]
        if out is None:
            return None
        attr = domain_to_attr(np.asarray(out), self.results[0].type)
        return [attr] if attr is not None else None

    def execute(self, inputs: Sequence[Any]) -> Sequence[Any]:
        args = [runtime_to_domain(x, v.type) for x, v in zip(inputs, self.operands)]
        with np.errstate(all="ignore"):
            out = self._compute(args)
        if out is None:
            raise ArithmeticError(
                f"'{self.name}' has undefined behaviour on these inputs (e.g. division by zero)"
            )
        return [domain_to_runtime(np.asarray(out), self.results[0].type)]


# --------------------------------------------------------------------------------------------
# Custom assembly (what mlir-opt prints by default)
# --------------------------------------------------------------------------------------------

#: ``arith.truncf`` rounding modes (``roundingmode`` is an i32 enum attribute).
ROUNDING_MODES = ("to_nearest_even", "downward", "upward", "toward_zero", "to_nearest_away")
_i32 = IntegerType(32)
# Optional flag groups printed between the operands and the attribute dictionary, in MLIR's
# order: (property name, keyword, attribute class).
_FLAG_ORDER = (
    ("isExact", "exact", None),
    ("overflowFlags", "overflow", IntegerOverflowFlagsAttr),
    ("roundingmode", "roundingmode", None),
    ("fastmath", "fastmath", FastMathFlagsAttr),
)
_FLAG_DEFAULTS = {"overflowFlags": OVERFLOW_NONE, "fastmath": FASTMATH_NONE}


def _asm_flags(cls: Any) -> tuple[tuple[str, str, Any, Any], ...]:
    """The flag groups of an op class: (prop, keyword, attr class, default elided when printing)."""
    flags = cls.__dict__.get("_asm_flag_specs")
    if flags is None:
        props = {pd.name: pd for pd in cls.op_def.props}
        flags = tuple((n, kw, ac, props[n].default) for n, kw, ac in _FLAG_ORDER if n in props)
        cls._asm_flag_specs = flags
    return flags


def _print_flags_and_attrs(op: Any, p: Any, elided: tuple[str, ...] = ()) -> None:
    """`` exact``/`` overflow<nsw>``/`` downward``/`` fastmath<fast>`` then the attribute dict."""
    props = op.properties
    handled = list(elided)
    for name, kw, attr_cls, default in _asm_flags(type(op)):
        a = props.get(name)
        if a is None or a is default:
            handled.append(name)
            continue
        if kw == "exact":
            if isinstance(a, UnitAttr):
                p.write(" exact")
                handled.append(name)
        elif kw == "roundingmode":
            if isinstance(a, IntegerAttr) and 0 <= a.value < len(ROUNDING_MODES):
                p.write(" " + ROUNDING_MODES[a.value])
                handled.append(name)
        elif isinstance(a, attr_cls):
            p.write(" " + kw + a.print_body())
            handled.append(name)
    rest = [k for k in props if k not in handled]
    if rest or op.attributes:
        merged = {k: props[k] for k in rest}
        merged.update(op.attributes)
        p.print_optional_attr_dict(merged)


def _parse_flags_and_attrs(cls: Any, parser: Any) -> tuple[dict[str, Attribute], dict[str, Attribute]]:
    props: dict[str, Attribute] = {}
    for name, kw, attr_cls, _ in _asm_flags(cls):
        if kw == "exact":
            if parser.parse_optional_keyword("exact") is not None:
                props[name] = UnitAttr()
        elif kw == "roundingmode":
            k = parser.parse_optional_keyword(ROUNDING_MODES)
            if k is not None:
                props[name] = IntegerAttr(ROUNDING_MODES.index(k), _i32)
        elif parser.parse_optional_keyword(kw) is not None:
            props[name] = _parse_flag_body(cls, parser, attr_cls)
    attrs = parser.parse_optional_attr_dict()
    if attrs:
        names = cls.op_def.prop_names
        for k in [k for k in attrs if k in names]:
            props[k] = attrs.pop(k)
    return props, attrs


_FLAG_ENUMS = {
    "overflow": ("::mlir::arith::IntegerOverflowFlags", ("none", "nsw", "nuw")),
    "fastmath": (
        "::mlir::arith::FastMathFlags",
        ("none", "reassoc", "nnan", "ninf", "nsz", "arcp", "contract", "afn", "fast"),
    ),
}


def _parse_flag_body(cls: Any, parser: Any, attr_cls: Any) -> Attribute:
    """``<nsw, nuw>`` / ``<fast>`` after the ``overflow`` / ``fastmath`` keyword."""
    enum, allowed = _FLAG_ENUMS[attr_cls.mnemonic]
    parser.expect("<")
    flags = []
    while True:
        parser.skip()
        pos = parser.pos
        kw = parser.parse_optional_keyword()
        if kw not in allowed:
            raise parser.error(
                f"custom op '{cls.name}' expected {enum} to be one of: {', '.join(allowed)}", pos
            )
        flags.append(kw)
        if not parser.parse_optional(","):
            break
    parser.expect(">")
    return attr_cls(flags)


def _parse_operands(parser: Any, n: int) -> list[Any]:
    us = [parser.parse_operand()]
    for _ in range(n - 1):
        parser.expect(",")
        us.append(parser.parse_operand())
    return us


def _signed_int(value: int, t: Type) -> int:
    w = t.width if isinstance(t, IntegerType) else 64
    value &= (1 << w) - 1
    return value - (1 << w) if value >= 1 << (w - 1) else value


def _same_type_build(cls: type, kwargs: dict[str, Any], src: str = "lhs") -> None:
    if kwargs.get("result") is None and isinstance(kwargs.get(src), Value):
        kwargs["result"] = kwargs[src].type


class _BinaryOp(ArithOp):
    traits: ClassVar[OpTraits] = (Pure(), SameOperandsAndResultType(), Elementwise())
    lhs = operand_def(SignlessIntegerLike)
    rhs = operand_def(SignlessIntegerLike)
    result = result_def(SignlessIntegerLike)

    @classmethod
    def build(cls, *, loc: Location | None = None, attributes: Any = None, **kwargs: Any) -> Any:
        _same_type_build(cls, kwargs)
        return super().build(loc=loc, attributes=attributes, **kwargs)

    @classmethod
    def new(cls, lhs: Value, rhs: Value, loc: Location | None = None, **props: Any) -> Any:
        return cls.build(lhs=lhs, rhs=rhs, loc=loc, **props)

    @property
    def width(self) -> int:
        return int_width(self.results[0].type) or 0

    # ``%a, %b [exact] [overflow<...>] [fastmath<...>] {attrs} : type``
    def print(self, p: Any) -> None:
        ops = self._operands
        p.write(" " + p.value_name(ops[0].value) + ", " + p.value_name(ops[1].value))
        _print_flags_and_attrs(self, p)
        p.write(" : " + str(self.results[0].type))

    @classmethod
    def parse(cls, parser: Any) -> Any:
        us = _parse_operands(parser, 2)
        props, attrs = _parse_flags_and_attrs(cls, parser)
        t = parser.parse_colon_type()
        return parser.create_op(cls, parser.resolve_operands(us, [t, t]), [t], props, attrs)

    @property
    def _is_int(self) -> bool:
        return int_width(self.results[0].type) is not None


def _fold_same_operands(op: Any) -> list | None:
    """``min(x, x)`` / ``max(x, x)`` is ``x``."""
    return [op.lhs] if op.lhs is op.rhs else None


class _IntBinaryOp(_BinaryOp):
    pass


class _FloatBinaryOp(_BinaryOp):
    lhs = operand_def(FloatLike)
    rhs = operand_def(FloatLike)
    result = result_def(FloatLike)
    fastmath = prop(FastMathFlagsAttr, default=FASTMATH_NONE)


class _OverflowMixin:
    __slots__ = ()
    overflow_flags = prop(IntegerOverflowFlagsAttr, default=OVERFLOW_NONE, name="overflowFlags")


def _w(op: Any) -> int:
    return int_width(op.results[0].type) or 64


def _s(op: Any, u: np.ndarray) -> np.ndarray:
    return to_signed(u, _w(op))


def _magnitude(x: np.ndarray) -> np.ndarray:
    """``|x|`` of int64 values as uint64 (exact for the most negative value too)."""
    u = x.astype(np.uint64)
    return np.where(x < 0, np.uint64(0) - u, u)


def _signed_divrem(
    op: Any, a: list[np.ndarray], overflow_is_poison: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Signed division of ``a[0]`` by ``a[1]`` at ``op``'s width, rounding toward zero: (quotient
    bits, remainder bits (the dividend's sign), whether the exact quotient is negative), computed on
    magnitudes so that i64's most negative value is exact. None (poison) on division by zero and,
    when ``overflow_is_poison``, on the overflowing ``min / -1``."""
    x, y = _s(op, a[0]), _s(op, a[1])
    if np.any(y == 0):
        return None
    if overflow_is_poison and np.any((x == -(1 << (_w(op) - 1))) & (y == -1)):
        return None
    ax, ay = _magnitude(x), _magnitude(y)
    q, r = ax // ay, ax % ay
    negative = (x < 0) != (y < 0)
    zero = np.uint64(0)
    return np.where(negative, zero - q, q), np.where(x < 0, zero - r, r), negative


def _zero_like(op: Any) -> Attribute | None:
    return const_of(0, op.results[0].type)


# --------------------------------------------------------------------------------------------
# Constant
# --------------------------------------------------------------------------------------------


class ConstantOp(ArithOp, ConstantValueInterface):
    """``arith.constant``: an integer, float or elements constant."""

    name = "arith.constant"
    traits = (ConstantLike(), Pure())
    value = prop(TypedAttrConstraint)
    result = result_def()

    @classmethod
    def build(cls, *, loc: Location | None = None, attributes: Any = None, **kwargs: Any) -> Any:
        v = kwargs.get("value")
        if kwargs.get("result") is None and v is not None and isinstance(getattr(v, "type", None), Type):
            kwargs["result"] = v.type
        return super().build(loc=loc, attributes=attributes, **kwargs)

    @classmethod
    def new(
        cls, value: Attribute | int | float | bool, type: Type | None = None, loc: Location | None = None
    ) -> ConstantOp:
        """``new(IntegerAttr(1, i32))``, ``new(3, i32)``, ``new(1.5, f32)``, ``new(True)``."""
        if not isinstance(value, Attribute):
            if isinstance(value, bool):
                value = IntegerAttr(int(value), type or i1)
            elif isinstance(value, int):
                value = IntegerAttr(value, type or _i64)
            elif isinstance(value, float):
                if type is None:
                    raise ValueError("a float constant needs a type")
                value = FloatAttr(value, type)
            elif isinstance(value, np.ndarray):
                value = (
                    DenseElementsAttr(type, value)
                    if type is not None
                    else DenseElementsAttr.from_numpy(value)
                )
            else:
                raise TypeError(f"cannot make an arith.constant of {value!r}")
        return cls.build(value=value, result=type if type is not None else value.type, loc=loc)  # type: ignore[union-attr]

    def verify_(self) -> None:
        v = self.properties["value"]
        if getattr(v, "type", None) is not self.results[0].type:
            raise VerifyError("failed to verify that all of {value, result} have same type")
        if not isinstance(v, (IntegerAttr, FloatAttr, ElementsAttr)):
            raise VerifyError("value must be an integer, float, or elements attribute")

    def constant_value(self) -> Attribute:
        return self.properties["value"]

    # ``{attrs} 3 : i32`` / ``true`` / ``dense<...> : tensor<4xf32>``
    def print(self, p: Any) -> None:
        props = self.properties
        if len(props) > 1 or self.attributes:
            merged = {k: v for k, v in props.items() if k != "value"}
            merged.update(self.attributes)
            p.print_optional_attr_dict(merged)
        p.write(" ")
        p.print_attribute(props["value"])

    @classmethod
    def parse(cls, parser: Any) -> Any:
        attrs = parser.parse_optional_attr_dict()
        parser.skip()
        pos = parser.pos
        value = parser.parse_attribute()
        t = getattr(value, "type", None)
        if not isinstance(t, Type):
            raise parser.error("expected a typed attribute for arith.constant", pos)
        props: dict[str, Attribute] = {"value": value}
        for k in [k for k in attrs if k in cls.op_def.prop_names]:
            props[k] = attrs.pop(k)
        return parser.create_op(cls, (), [t], props, attrs)

    def get_asm_result_names(self) -> list[str | None]:
        """MLIR's ``getAsmResultNames``: ``%c3_i32``, ``%c0`` (index), ``%true``, ``%cst``."""
        v = self.properties.get("value")
        t = self.results[0].type
        if isinstance(v, IntegerAttr):
            if isinstance(t, IntegerType) and t.width == 1:
                return ["true" if v.value else "false"]
            name = "c" + str(_signed_int(v.value, v.type))
            if isinstance(t, IntegerType):
                name += "_" + str(t)
            return [name]
        return ["cst"]

    def fold(self, operands: Sequence[Attribute | None]) -> Sequence[Attribute | Value] | None:
        return [self.properties["value"]]

    def execute(self, inputs: Sequence[Any]) -> Sequence[Any]:
        v = self.properties["value"]
        t = self.results[0].type
        if isinstance(v, ElementsAttr):
            return [np.array(v.to_numpy())]
        dom = attr_to_domain(v)
        if dom is None:
            raise TypeError(f"cannot execute a constant of {v}")
        return [domain_to_runtime(dom, t)]


# --------------------------------------------------------------------------------------------
# Integer binary ops
# --------------------------------------------------------------------------------------------


class AddIOp(_OverflowMixin, _IntBinaryOp):
    name = "arith.addi"
    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] + a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        if splat_int(c[1]) == 0:
            return [self.lhs]
        if splat_int(c[0]) == 0:
            return [self.rhs]
        # addi(subi(x, y), y) -> x
        d = self.lhs.defining_op()
        if isinstance(d, SubIOp) and d.rhs is self.rhs:
            return [d.lhs]
        return None


class SubIOp(_OverflowMixin, _IntBinaryOp):
    name = "arith.subi"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] - a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        if self.lhs is self.rhs:
            z = _zero_like(self)
            return [z] if z is not None else None
        if splat_int(c[1]) == 0:
            return [self.lhs]
        # subi(addi(x, y), y) -> x
        d = self.lhs.defining_op()
        if isinstance(d, AddIOp):
            if d.rhs is self.rhs:
                return [d.lhs]
            if d.lhs is self.rhs:
                return [d.rhs]
        return None


class MulIOp(_OverflowMixin, _IntBinaryOp):
    name = "arith.muli"
    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] * a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        for i in (1, 0):
            v = splat_int(c[i])
            if v == 1:
                return [self.operands[1 - i]]
            if v == 0:
                return [c[i]]  # type: ignore[list-item]
        return None


class DivSIOp(_IntBinaryOp):
    name = "arith.divsi"
    traits = (NoMemoryEffect(), SameOperandsAndResultType(), Elementwise())
    is_exact = opt_prop(UnitAttr, name="isExact")

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        d = _signed_divrem(self, a, overflow_is_poison=True)
        return None if d is None else d[0]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        return [self.lhs] if splat_int(c[1]) == 1 else None


class DivUIOp(_IntBinaryOp):
    name = "arith.divui"
    traits = (NoMemoryEffect(), SameOperandsAndResultType(), Elementwise())
    is_exact = opt_prop(UnitAttr, name="isExact")

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        if np.any(a[1] == 0):
            return None
        return a[0] // a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        return [self.lhs] if splat_int(c[1]) == 1 else None


class RemSIOp(_IntBinaryOp):
    name = "arith.remsi"
    traits = (NoMemoryEffect(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        d = _signed_divrem(self, a, overflow_is_poison=False)  # min % -1 is 0
        return None if d is None else d[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        v = splat_int(c[1])
        if v in (1, -1):
            z = _zero_like(self)
            return [z] if z is not None else None
        return None


class RemUIOp(_IntBinaryOp):
    name = "arith.remui"
    traits = (NoMemoryEffect(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        if np.any(a[1] == 0):
            return None
        return a[0] % a[1]


class CeilDivSIOp(_IntBinaryOp):
    name = "arith.ceildivsi"
    traits = (NoMemoryEffect(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        d = _signed_divrem(self, a, overflow_is_poison=True)
        if d is None:
            return None
        q, r, inexact_negative = d
        return q + ((r != 0) & ~inexact_negative).astype(np.uint64)  # round up a positive quotient

    def fold(self, operands: Sequence[Attribute | None]) -> Sequence[Attribute | Value] | None:
        # MLIR's folder gives up where its intermediate negation overflows (an operand is the most
        # negative value and the dividend is not zero); so does this one, to print what mlir-opt
        # prints. Execution still computes the exact quotient.
        args = [attr_to_domain(a) for a in operands]
        if len(args) == 2 and args[0] is not None and args[1] is not None:
            x, y = _s(self, args[0]), _s(self, args[1])
            smin = -(1 << (_w(self) - 1))
            if np.any(((x == smin) | (y == smin)) & (x != 0)):
                return None
        return super().fold(operands)


class CeilDivUIOp(_IntBinaryOp):
    name = "arith.ceildivui"
    traits = (NoMemoryEffect(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        if np.any(a[1] == 0):
            return None
        q = a[0] // a[1]
        return q + (a[0] % a[1] != 0).astype(np.uint64)


class FloorDivSIOp(_IntBinaryOp):
    name = "arith.floordivsi"
    traits = (NoMemoryEffect(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        d = _signed_divrem(self, a, overflow_is_poison=True)
        if d is None:
            return None
        q, r, negative = d
        return q - ((r != 0) & negative).astype(np.uint64)  # round down a negative quotient


class AndIOp(_IntBinaryOp):
    name = "arith.andi"
    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] & a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        if self.lhs is self.rhs:
            return [self.lhs]
        t = self.results[0].type
        for i in (1, 0):
            v = splat_int(c[i])
            if v == 0:
                return [c[i]]  # type: ignore[list-item]
            if v is not None and is_all_ones(v, t):
                return [self.operands[1 - i]]
        return None


class OrIOp(_IntBinaryOp):
    name = "arith.ori"
    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] | a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        if self.lhs is self.rhs:
            return [self.lhs]
        t = self.results[0].type
        for i in (1, 0):
            v = splat_int(c[i])
            if v == 0:
                return [self.operands[1 - i]]
            if v is not None and is_all_ones(v, t):
                return [c[i]]  # type: ignore[list-item]
        return None


class XOrIOp(_IntBinaryOp):
    name = "arith.xori"
    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] ^ a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        if self.lhs is self.rhs:
            z = _zero_like(self)
            return [z] if z is not None else None
        for i in (1, 0):
            if splat_int(c[i]) == 0:
                return [self.operands[1 - i]]
        # xori(xori(x, y), y) -> x
        d = self.lhs.defining_op()
        if isinstance(d, XOrIOp) and d.rhs is self.rhs:
            return [d.lhs]
        return None


class _ShiftOp(_IntBinaryOp):
    def _shift_amount(self, b: np.ndarray) -> np.ndarray | None:
        if np.any(b >= np.uint64(_w(self))):
            return None  # poison
        return b

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        return [self.lhs] if splat_int(c[1]) == 0 else None


class ShLIOp(_OverflowMixin, _ShiftOp):
    name = "arith.shli"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        b = self._shift_amount(a[1])
        return None if b is None else a[0] << b


class ShRSIOp(_ShiftOp):
    name = "arith.shrsi"
    is_exact = opt_prop(UnitAttr, name="isExact")

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        b = self._shift_amount(a[1])
        if b is None:
            return None
        return (_s(self, a[0]) >> b.astype(np.int64)).astype(np.uint64)


class ShRUIOp(_ShiftOp):
    name = "arith.shrui"
    is_exact = opt_prop(UnitAttr, name="isExact")

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        b = self._shift_amount(a[1])
        return None if b is None else a[0] >> b


class _MinMaxIOp(_IntBinaryOp):
    """The integer min/max family: commutative, and ``op(x, x)`` folds to ``x``."""

    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        return _fold_same_operands(self)


class MaxSIOp(_MinMaxIOp):
    name = "arith.maxsi"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.maximum(_s(self, a[0]), _s(self, a[1])).astype(np.uint64)


class MinSIOp(_MinMaxIOp):
    name = "arith.minsi"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.minimum(_s(self, a[0]), _s(self, a[1])).astype(np.uint64)


class MaxUIOp(_MinMaxIOp):
    name = "arith.maxui"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.maximum(a[0], a[1])


class MinUIOp(_MinMaxIOp):
    name = "arith.minui"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.minimum(a[0], a[1])


# --------------------------------------------------------------------------------------------
# Float ops
# --------------------------------------------------------------------------------------------


class AddFOp(_FloatBinaryOp):
    name = "arith.addf"
    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] + a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        # x + (-0.0) -> x (x + 0.0 is not an identity for x = -0.0)
        for i in (1, 0):
            v = splat_float(c[i])
            if v == 0.0 and np.signbit(v):
                return [self.operands[1 - i]]
        return None


class SubFOp(_FloatBinaryOp):
    name = "arith.subf"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] - a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        v = splat_float(c[1])
        if v == 0.0 and not np.signbit(v):
            return [self.lhs]
        return None


class MulFOp(_FloatBinaryOp):
    name = "arith.mulf"
    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] * a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        for i in (1, 0):
            if splat_float(c[i]) == 1.0:
                return [self.operands[1 - i]]
        return None


class DivFOp(_FloatBinaryOp):
    name = "arith.divf"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0] / a[1]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        return [self.lhs] if splat_float(c[1]) == 1.0 else None


class RemFOp(_FloatBinaryOp):
    name = "arith.remf"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.fmod(a[0], a[1])


class _MinMaxFOp(_FloatBinaryOp):
    """The float min/max family: commutative, and ``op(x, x)`` folds to ``x``."""

    traits = (Pure(), Commutative(), SameOperandsAndResultType(), Elementwise())

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        return _fold_same_operands(self)


class MaxNumFOp(_MinMaxFOp):
    name = "arith.maxnumf"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.fmax(a[0], a[1])


class MinNumFOp(_MinMaxFOp):
    name = "arith.minnumf"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.fmin(a[0], a[1])


class MaximumFOp(_MinMaxFOp):
    """IEEE 754-2019 maximum: NaN if either is NaN; -0.0 is less than +0.0."""

    name = "arith.maximumf"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        x, y = a
        return np.where(x == y, np.where(np.signbit(x), y, x), np.maximum(x, y))


class MinimumFOp(_MinMaxFOp):
    """IEEE 754-2019 minimum: NaN if either is NaN; -0.0 is less than +0.0."""

    name = "arith.minimumf"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        x, y = a
        return np.where(x == y, np.where(np.signbit(x), x, y), np.minimum(x, y))


class NegFOp(ArithOp):
    name = "arith.negf"
    traits = (Pure(), SameOperandsAndResultType(), Elementwise())
    operand = operand_def(FloatLike)
    result = result_def(FloatLike)
    fastmath = prop(FastMathFlagsAttr, default=FASTMATH_NONE)

    @classmethod
    def build(cls, *, loc: Location | None = None, attributes: Any = None, **kwargs: Any) -> Any:
        _same_type_build(cls, kwargs, "operand")
        return super().build(loc=loc, attributes=attributes, **kwargs)

    @classmethod
    def new(cls, x: Value, loc: Location | None = None) -> NegFOp:
        return cls.build(operand=x, loc=loc)

    def print(self, p: Any) -> None:
        p.write(" " + p.value_name(self._operands[0].value))
        _print_flags_and_attrs(self, p)
        p.write(" : " + str(self.results[0].type))

    @classmethod
    def parse(cls, parser: Any) -> Any:
        u = parser.parse_operand()
        props, attrs = _parse_flags_and_attrs(cls, parser)
        t = parser.parse_colon_type()
        return parser.create_op(cls, [parser.resolve_operand(u, t)], [t], props, attrs)

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return -a[0]

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        d = self.operand.defining_op()
        if isinstance(d, NegFOp):
            return [d.operand]
        return None


# --------------------------------------------------------------------------------------------
# Comparisons and select
# --------------------------------------------------------------------------------------------

CMPI_PREDICATES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF_PREDICATES = (
    "false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord",
    "ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true",
)  # fmt: skip


def _bool_result_type(t: Type) -> Type:
    if isinstance(t, RankedTensorType):
        return RankedTensorType(t.shape, i1, t.encoding)
    if isinstance(t, UnrankedTensorType):
        return UnrankedTensorType(i1)
    if isinstance(t, VectorType):
        return VectorType(t.shape, i1)
    return i1


def _same_shape(a: Type, b: Type) -> bool:
    if isinstance(a, ShapedType) != isinstance(b, ShapedType):
        return False
    if not isinstance(a, ShapedType):
        return True
    if type(a) is not type(b) and not {type(a), type(b)} <= {RankedTensorType, UnrankedTensorType}:
        return False
    if a.has_rank and b.has_rank:
        return a.shape == b.shape  # type: ignore[union-attr]
    return True


def _predicate_attr(p: Any, names: tuple[str, ...]) -> Any:
    if isinstance(p, str):
        if p not in names:
            raise ValueError(f"unknown predicate {p!r}; expected one of {', '.join(names)}")
        return IntegerAttr(names.index(p), _i64)
    if isinstance(p, int) and not isinstance(p, bool):
        return IntegerAttr(p, _i64)
    return p


class _CmpOp(ArithOp):
    PREDICATES: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def build(cls, *, loc: Location | None = None, attributes: Any = None, **kwargs: Any) -> Any:
        if "predicate" in kwargs:
            kwargs["predicate"] = _predicate_attr(kwargs["predicate"], cls.PREDICATES)
        if kwargs.get("result") is None and isinstance(kwargs.get("lhs"), Value):
            kwargs["result"] = _bool_result_type(kwargs["lhs"].type)
        return super().build(loc=loc, attributes=attributes, **kwargs)

    @classmethod
    def new(cls, predicate: str | int, lhs: Value, rhs: Value, loc: Location | None = None) -> Any:
        return cls.build(predicate=predicate, lhs=lhs, rhs=rhs, loc=loc)

    @property
    def predicate_name(self) -> str:
        return self.PREDICATES[self.properties["predicate"].value]

    # ``slt, %a, %b [fastmath<...>] {attrs} : type``
    def print(self, p: Any) -> None:
        pred = self.properties.get("predicate")
        names = self.PREDICATES
        if isinstance(pred, IntegerAttr) and 0 <= pred.value < len(names):
            p.write(" " + names[pred.value] + ",")
        else:  # not a valid enum value: print the raw attribute (as MLIR prints an invalid op)
            p.write(" ")
            p.print_attribute(pred)
            p.write(",")
        ops = self._operands
        p.write(" " + p.value_name(ops[0].value) + ", " + p.value_name(ops[1].value))
        _print_flags_and_attrs(self, p, ("predicate",))
        p.write(" : " + str(ops[0].value.type))

    @classmethod
    def parse(cls, parser: Any) -> Any:
        parser.skip()
        pos = parser.pos
        kw = parser.parse_optional_keyword()
        if kw is None:
            kw = parser.parse_optional_string()
        if kw not in cls.PREDICATES:
            raise parser.error(
                f"custom op '{cls.name}' expected string or keyword containing one of the following enum "
                f"values for attribute 'predicate' [{', '.join(cls.PREDICATES)}]",
                pos,
            )
        parser.expect(",")
        us = _parse_operands(parser, 2)
        props, attrs = _parse_flags_and_attrs(cls, parser)
        props["predicate"] = IntegerAttr(cls.PREDICATES.index(kw), _i64)
        t = parser.parse_colon_type()
        vals = parser.resolve_operands(us, [t, t])
        return parser.create_op(cls, vals, [_bool_result_type(t)], props, attrs)

    def verify_(self) -> None:
        p = self.properties["predicate"]
        if not 0 <= p.value < len(self.PREDICATES):
            raise VerifyError(
                "attribute 'predicate' failed to satisfy constraint: 64-bit signless integer attribute "
                f"whose value is one of {list(range(len(self.PREDICATES)))}"
            )
        if self.results[0].type is not _bool_result_type(self.operands[0].type):
            raise VerifyError(
                "failed to verify that result type has i1 element type and same shape as operands"
            )


class CmpIOp(_CmpOp):
    """``arith.cmpi``: ``predicate`` is an i64 IntegerAttr (eq=0 ne=1 slt=2 sle=3 sgt=4 sge=5
    ult=6 ule=7 ugt=8 uge=9)."""

    name = "arith.cmpi"
    traits = (Pure(), SameTypeOperands(), Elementwise())
    predicate = prop(IntegerAttr)
    lhs = operand_def(SignlessIntegerLike)
    rhs = operand_def(SignlessIntegerLike)
    result = result_def(BoolLike)

    PREDICATES: ClassVar[tuple[str, ...]] = CMPI_PREDICATES

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        p = self.predicate_name
        w = int_width(self.lhs.type) or 64
        x, y = a
        if p in ("slt", "sle", "sgt", "sge"):
            x, y = to_signed(x, w), to_signed(y, w)
        op = p[1:] if p[0] in "su" else p
        r = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
             "gt": np.greater, "ge": np.greater_equal}[op](x, y)  # fmt: skip
        return r.astype(np.uint64)

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        if self.lhs is self.rhs:
            val = self.predicate_name in ("eq", "sle", "sge", "ule", "uge")
            r = const_of(int(val), self.results[0].type)
            return [r] if r is not None else None
        return None


class CmpFOp(_CmpOp):
    """``arith.cmpf``: predicates false=0 oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno
    true=15."""

    name = "arith.cmpf"
    traits = (Pure(), SameTypeOperands(), Elementwise())
    predicate = prop(IntegerAttr)
    lhs = operand_def(FloatLike)
    rhs = operand_def(FloatLike)
    result = result_def(BoolLike)
    fastmath = prop(FastMathFlagsAttr, default=FASTMATH_NONE)

    PREDICATES: ClassVar[tuple[str, ...]] = CMPF_PREDICATES

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        p = self.predicate_name
        x, y = a
        if p == "false":
            return np.zeros(np.broadcast(x, y).shape, np.uint64)
        if p == "true":
            return np.ones(np.broadcast(x, y).shape, np.uint64)
        unordered = np.isnan(x) | np.isnan(y)
        if p == "ord":
            return (~unordered).astype(np.uint64)
        if p == "uno":
            return unordered.astype(np.uint64)
        rel = {"eq": np.equal, "gt": np.greater, "ge": np.greater_equal, "lt": np.less,
               "le": np.less_equal, "ne": np.not_equal}[p[1:]](x, y)  # fmt: skip
        r = (rel | unordered) if p[0] == "u" else (rel & ~unordered)
        return r.astype(np.uint64)


class SelectOp(ArithOp):
    name = "arith.select"
    traits = (Pure(), Elementwise())
    condition = operand_def(BoolLike)
    true_value = operand_def()
    false_value = operand_def()
    result = result_def()

    @classmethod
    def build(cls, *, loc: Location | None = None, attributes: Any = None, **kwargs: Any) -> Any:
        _same_type_build(cls, kwargs, "true_value")
        return super().build(loc=loc, attributes=attributes, **kwargs)

    @classmethod
    def new(cls, cond: Value, a: Value, b: Value, loc: Location | None = None) -> SelectOp:
        return cls.build(condition=cond, true_value=a, false_value=b, loc=loc)

    # ``%c, %a, %b {attrs} : [cond_type, ]type`` (the condition type only when it is shaped)
    def print(self, p: Any) -> None:
        p.write(" ")
        p.print_operands([o.value for o in self._operands])
        p.print_optional_attr_dict({**self.properties, **self.attributes})
        ct = self._operands[0].value.type
        p.write(" : " + (str(ct) + ", " if isinstance(ct, ShapedType) else "") + str(self.results[0].type))

    @classmethod
    def parse(cls, parser: Any) -> Any:
        us = _parse_operands(parser, 3)
        attrs = parser.parse_optional_attr_dict()
        t = parser.parse_colon_type()
        ct: Type = i1
        if parser.parse_optional(","):
            ct, t = t, parser.parse_type()
        vals = parser.resolve_operands(us, [ct, t, t])
        return parser.create_op(cls, vals, [t], {}, attrs)

    def verify_(self) -> None:
        t = self.results[0].type
        if self.true_value.type is not t or self.false_value.type is not t:
            raise VerifyError("failed to verify that all of {true_value, false_value, result} have same type")
        ct = self.condition.type
        if ct is not i1 and not (isinstance(ct, ShapedType) and _same_shape(ct, t)):
            raise VerifyError("failed to verify that condition is signless i1 or has matching shape")

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return np.where(a[0] != 0, a[1], a[2])

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        if self.true_value is self.false_value:
            return [self.true_value]
        cv = splat_int(c[0])
        if cv is not None:
            return [self.true_value if cv else self.false_value]
        if self.results[0].type is i1:
            tv, fv = splat_int(c[1]), splat_int(c[2])
            if tv == 1 and fv == 0:
                return [self.condition]
        return None


# --------------------------------------------------------------------------------------------
# Casts
# --------------------------------------------------------------------------------------------


class _CastOp(ArithOp):
    traits = (Pure(), Elementwise())
    in_ = operand_def()
    out = result_def()

    @classmethod
    def new(cls, x: Value, type: Type, loc: Location | None = None) -> Any:
        return cls.build(in_=x, out=type, loc=loc)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        raise NotImplementedError

    # ``%x [overflow<...>] [roundingmode] [fastmath<...>] {attrs} : t1 to t2``
    def print(self, p: Any) -> None:
        v = self._operands[0].value
        p.write(" " + p.value_name(v))
        _print_flags_and_attrs(self, p)
        p.write(" : " + str(v.type) + " to " + str(self.results[0].type))

    @classmethod
    def parse(cls, parser: Any) -> Any:
        u = parser.parse_operand()
        props, attrs = _parse_flags_and_attrs(cls, parser)
        a = parser.parse_colon_type()
        parser.parse_keyword("to")
        b = parser.parse_type()
        return parser.create_op(cls, [parser.resolve_operand(u, a)], [b], props, attrs)

    def verify_(self) -> None:
        a, b = self.operands[0].type, self.results[0].type
        if not _same_shape(a, b) or not self.are_cast_compatible(_elem(a), _elem(b)):
            raise VerifyError(f"operand type '{a}' and result type '{b}' are cast incompatible")

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        # cast(cast(x)) of the inverse kind back to x's type -> x
        d = self.operands[0].defining_op()
        inverse = getattr(self, "_inverse", ())
        if d is not None and type(d).__name__ in inverse and d.operands[0].type is self.results[0].type:
            return [d.operands[0]]
        return None


def _is_int(t: Type) -> bool:
    return isinstance(t, IntegerType)


def _iw(t: Type) -> int:
    return int_width(t) or 0


class ExtSIOp(_CastOp):
    name = "arith.extsi"
    in_ = operand_def(SignlessFixedWidthIntegerLike)
    out = result_def(SignlessFixedWidthIntegerLike)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        return _is_int(a) and _is_int(b) and _iw(b) > _iw(a)

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return to_signed(a[0], _iw(self.operands[0].type)).astype(np.uint64)


class ExtUIOp(_CastOp):
    name = "arith.extui"
    in_ = operand_def(SignlessFixedWidthIntegerLike)
    out = result_def(SignlessFixedWidthIntegerLike)
    are_cast_compatible = ExtSIOp.__dict__["are_cast_compatible"]

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0]


class TruncIOp(_CastOp):
    name = "arith.trunci"
    in_ = operand_def(SignlessFixedWidthIntegerLike)
    out = result_def(SignlessFixedWidthIntegerLike)
    overflow_flags = prop(IntegerOverflowFlagsAttr, default=OVERFLOW_NONE, name="overflowFlags")

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        return _is_int(a) and _is_int(b) and _iw(b) < _iw(a)

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0]  # masked to the result width on the way out

    def _fold_identity(self, c: Sequence[Attribute | None]) -> list | None:
        d = self.operands[0].defining_op()
        if isinstance(d, (ExtSIOp, ExtUIOp)) and d.operands[0].type is self.results[0].type:
            return [d.operands[0]]
        return None


class IndexCastOp(_CastOp):
    name = "arith.index_cast"
    in_ = operand_def(IndexCastable)
    out = result_def(IndexCastable)
    _inverse = ("IndexCastOp",)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        return (isinstance(a, IndexType) and _is_int(b)) or (_is_int(a) and isinstance(b, IndexType))

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return to_signed(a[0], _iw(self.operands[0].type)).astype(np.uint64)


class IndexCastUIOp(IndexCastOp):
    name = "arith.index_castui"
    _inverse = ("IndexCastUIOp",)

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0]


def _int_to_float(x: np.ndarray, dt: np.dtype) -> np.ndarray:
    """Integers (int64 or uint64) rounded to the nearest ``dt``: numpy's own cast for float32 and
    float64 (one correct rounding; through float64 an i64 would round twice and could land a ulp
    off in f32); the other floats through float64, exact for every integer they can hold."""
    if dt in (np.float32, np.float64):
        return x.astype(dt)
    return x.astype(np.float64).astype(dt)


class SIToFPOp(_CastOp):
    name = "arith.sitofp"
    in_ = operand_def(SignlessFixedWidthIntegerLike)
    out = result_def(FloatLike)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        return _is_int(a) and isinstance(b, FloatType)

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        from lamina.ir.attributes import float_dtype

        dt = float_dtype(_elem(self.results[0].type))  # type: ignore[arg-type]
        if dt is None:
            return None
        return _int_to_float(to_signed(a[0], _iw(self.operands[0].type)), dt)


class UIToFPOp(SIToFPOp):
    name = "arith.uitofp"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        from lamina.ir.attributes import float_dtype

        dt = float_dtype(_elem(self.results[0].type))  # type: ignore[arg-type]
        return None if dt is None else _int_to_float(a[0], dt)


class FPToSIOp(_CastOp):
    name = "arith.fptosi"
    in_ = operand_def(FloatLike)
    out = result_def(SignlessFixedWidthIntegerLike)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        return isinstance(a, FloatType) and _is_int(b)

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        x = a[0].astype(np.float64)
        w = _iw(self.results[0].type)
        if (
            np.any(~np.isfinite(x))
            or np.any(np.trunc(x) >= 2.0 ** (w - 1))
            or np.any(np.trunc(x) < -(2.0 ** (w - 1)))
        ):
            return None  # poison
        return np.trunc(x).astype(np.int64).astype(np.uint64)


class FPToUIOp(FPToSIOp):
    name = "arith.fptoui"

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        x = a[0].astype(np.float64)
        w = _iw(self.results[0].type)
        if np.any(~np.isfinite(x)) or np.any(np.trunc(x) >= 2.0**w) or np.any(np.trunc(x) <= -1.0):
            return None
        return np.trunc(x).astype(np.uint64)


class ExtFOp(_CastOp):
    name = "arith.extf"
    in_ = operand_def(FloatLike)
    out = result_def(FloatLike)
    fastmath = opt_prop(FastMathFlagsAttr)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        return isinstance(a, FloatType) and isinstance(b, FloatType) and b.width > a.width

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0]  # converted to the result dtype on the way out


class TruncFOp(_CastOp):
    name = "arith.truncf"
    in_ = operand_def(FloatLike)
    out = result_def(FloatLike)
    roundingmode = opt_prop()
    fastmath = opt_prop(FastMathFlagsAttr)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        return isinstance(a, FloatType) and isinstance(b, FloatType) and b.width < a.width

    def _compute(self, a: list[np.ndarray]) -> np.ndarray:
        return a[0]


def _bitwidth(t: Type) -> int | None:
    if isinstance(t, FloatType):
        return t.width
    if isinstance(t, IntegerType):
        return t.width
    return None


class BitcastOp(_CastOp):
    name = "arith.bitcast"
    in_ = operand_def(SignlessIntegerOrFloatLike)
    out = result_def(SignlessIntegerOrFloatLike)
    _inverse = ("BitcastOp",)

    @classmethod
    def are_cast_compatible(cls, a: Type, b: Type) -> bool:
        wa, wb = _bitwidth(a), _bitwidth(b)
        return wa is not None and wa == wb

    def _compute(self, a: list[np.ndarray]) -> np.ndarray | None:
        from lamina.ir.attributes import float_dtype

        src, dst = _elem(self.operands[0].type), _elem(self.results[0].type)
        w = _bitwidth(src)
        if w not in (8, 16, 32, 64):
            return None
        ui = np.dtype(f"uint{w}")
        x = a[0]
        bits = x.astype(ui) if isinstance(src, IntegerType) else x.view(ui)
        if isinstance(dst, IntegerType):
            return bits.astype(np.uint64) & mask(w)
        dt = float_dtype(dst)  # type: ignore[arg-type]
        return None if dt is None else bits.view(dt)


__all__ = [
    "AddFOp", "AddIOp", "AndIOp", "BitcastOp", "CeilDivSIOp", "CeilDivUIOp", "CmpFOp", "CmpIOp",
    "ConstantOp", "DivFOp", "DivSIOp", "DivUIOp", "ExtFOp", "ExtSIOp", "ExtUIOp", "FPToSIOp",
    "FPToUIOp", "FloorDivSIOp", "IndexCastOp", "IndexCastUIOp", "MaxNumFOp", "MaxSIOp", "MaxUIOp",
    "MaximumFOp", "MinNumFOp", "MinSIOp", "MinUIOp", "MinimumFOp", "MulFOp", "MulIOp", "NegFOp",
    "OrIOp", "RemFOp", "RemSIOp", "RemUIOp", "SIToFPOp", "SelectOp", "ShLIOp", "ShRSIOp", "ShRUIOp",
    "SubFOp", "SubIOp", "TruncFOp", "TruncIOp", "UIToFPOp", "XOrIOp", "CMPI_PREDICATES",
    "CMPF_PREDICATES", "BoolLike", "element_type",
]  # fmt: skip
_ = StringAttr  # re-exported for dialect users building assert messages

"""Type and attribute constraints used by op definitions (ODS's TypeConstraint/AttrConstraint).

A property's constraint also says how the property reads in Python (ODS's ``getX()`` next to
``getXAttr()``): :class:`AttrKind` constraints such as :data:`I64Attr` make ``op.group`` an
``int``, :data:`BoolProp` a ``bool``, :data:`I64ArrayAttr` a tuple of ints; any other constraint
reads as the attribute itself. ``op.properties[name]`` is always the attribute.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina.ir.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DenseResourceElementsAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TypeAttr,
    attr_from_python,
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
    f64,
    i1,
    i64,
)


class Constraint:
    """A predicate on a type or attribute with a human-readable description."""

    __slots__ = ("description",)

    def __init__(self, description: str) -> None:
        self.description = description

    def check(self, x: Any) -> bool:
        raise NotImplementedError

    def to_python(self, a: Attribute) -> Any:
        """How a property under this constraint reads (``op.<prop>``): here the attribute itself."""
        return a

    def from_python(self, v: Any) -> Attribute:
        """The attribute stored for ``op.<prop> = v`` (an attribute is stored as it is)."""
        return attr_from_python(v)

    def upgrade(self, a: Attribute) -> Attribute:
        """The attribute a file written by an earlier Lamina means here (see :data:`BoolProp`)."""
        return a

    def __or__(self, other: Any) -> Constraint:
        return AnyOf(self, to_constraint(other))

    def __repr__(self) -> str:
        return self.description


class _Any(Constraint):
    __slots__ = ()

    def check(self, x: Any) -> bool:
        return True


class IsInstance(Constraint):
    __slots__ = ("classes",)

    def __init__(self, *classes: type, description: str | None = None) -> None:
        super().__init__(description or " or ".join(c.__name__ for c in classes))
        self.classes = classes

    def check(self, x: Any) -> bool:
        return isinstance(x, self.classes)


class Equals(Constraint):
    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        super().__init__(f"'{value}'")
        self.value = value

    def check(self, x: Any) -> bool:
        return x is self.value or x == self.value


class AnyOf(Constraint):
    __slots__ = ("options",)

    def __init__(self, *options: Constraint) -> None:
        super().__init__(" or ".join(o.description for o in options))
        self.options = options

    def check(self, x: Any) -> bool:
        return any(o.check(x) for o in self.options)

    def to_python(self, a: Attribute) -> Any:
        """Read as the first option ``a`` satisfies does (``I64Attr | I64ArrayAttr``: int or tuple)."""
        for o in self.options:
            if o.check(a):
                return o.to_python(a)
        return a


class Predicate(Constraint):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], bool], description: str) -> None:
        super().__init__(description)
        self.fn = fn

    def check(self, x: Any) -> bool:
        return bool(self.fn(x))


class ShapedOf(Constraint):
    """A shaped type (of the given classes) whose element type satisfies ``element``."""

    __slots__ = ("classes", "element")

    def __init__(
        self,
        element: Any = None,
        classes: tuple[type[ShapedType], ...] = (RankedTensorType, UnrankedTensorType),
        description: str | None = None,
    ) -> None:
        self.classes = classes
        self.element = to_constraint(element)
        kinds = " or ".join(
            "tensor" if c in (RankedTensorType, UnrankedTensorType) else c.__name__
            for c in dict.fromkeys(classes)
        )
        kinds = "tensor" if set(classes) == {RankedTensorType, UnrankedTensorType} else kinds
        super().__init__(description or f"{kinds} of {self.element.description} values")

    def check(self, x: Any) -> bool:
        return isinstance(x, self.classes) and self.element.check(x.element_type)


def to_constraint(c: Any) -> Constraint:
    """Accept a Constraint, a class (isinstance), a tuple of classes, an instance (equality), None (any)."""
    if c is None:
        return AnyType
    if isinstance(c, Constraint):
        return c
    if isinstance(c, type):
        return IsInstance(c)
    if isinstance(c, tuple) and all(isinstance(x, type) for x in c):
        return IsInstance(*c)
    return Equals(c)


AnyType = _Any("any type")
AnyAttr = _Any("any attribute")
SignlessInteger = Predicate(lambda t: isinstance(t, IntegerType) and t.is_signless, "signless integer")
AnyInteger = IsInstance(IntegerType, description="integer")
Index = IsInstance(IndexType, description="index")
AnyFloat = IsInstance(FloatType, description="floating-point")
AnyTensor = IsInstance(RankedTensorType, UnrankedTensorType, description="tensor of any type values")
AnyRankedTensor = IsInstance(RankedTensorType, description="ranked tensor of any type values")
AnyShaped = IsInstance(ShapedType, description="shaped of any type values")


def _is_signless_integer(t: Type) -> bool:
    return isinstance(t, IntegerType) and t.is_signless


def _elem(t: Type) -> Type:
    return t.element_type if isinstance(t, (RankedTensorType, UnrankedTensorType, VectorType)) else t


SignlessIntegerLike = Predicate(
    lambda t: isinstance(_elem(t), IndexType) or _is_signless_integer(_elem(t)),
    "signless-integer-like",
)
FloatLike = Predicate(lambda t: isinstance(_elem(t), FloatType), "floating-point-like")
SignlessIntegerOrFloatLike = Predicate(
    lambda t: SignlessIntegerLike.check(t) or FloatLike.check(t),
    "signless-integer-like or floating-point-like",
)


# ---- attribute kinds: constraints with a Python reading ---------------------------------------


class AttrKind(Predicate):
    """An attribute constraint that also converts: ``to_python`` is what ``op.<prop>`` returns,
    ``from_python`` what ``op.<prop> = value`` (and the builder) store for a plain Python value."""

    __slots__ = ("_to", "_from")

    def __init__(
        self,
        fn: Callable[[Any], bool],
        description: str,
        to_python: Callable[[Any], Any],
        from_python: Callable[[Any], Attribute],
    ) -> None:
        super().__init__(fn, description)
        self._to = to_python
        self._from = from_python

    def to_python(self, a: Attribute) -> Any:
        return self._to(a)

    def from_python(self, v: Any) -> Attribute:
        return v if isinstance(v, Attribute) else self._from(v)


class _BoolKind(AttrKind):
    """``true``/``false`` (an ``i1`` integer attribute). Files written before booleans were
    ``BoolAttr`` hold ``0 : i64`` / ``1 : i64``: :meth:`upgrade` reads those as false/true (any
    other integer is left for the verifier to reject, at the op's location)."""

    __slots__ = ()

    def upgrade(self, a: Attribute) -> Attribute:
        if isinstance(a, IntegerAttr) and a.type is i64 and a.value in (0, 1):
            return BoolAttr(bool(a.value))
        return a


def _ints(v: Sequence[int]) -> DenseArrayAttr:
    return DenseArrayAttr(i64, [int(x) for x in v])


def _floats(v: Sequence[float]) -> DenseArrayAttr:
    return DenseArrayAttr(f64, [float(x) for x in v])


def _elements_value(a: Any) -> Any:
    return a.to_numpy()


I64Attr = AttrKind(
    lambda a: isinstance(a, IntegerAttr) and a.type is i64,
    "64-bit signless integer attribute",
    lambda a: a.value,
    lambda v: IntegerAttr(int(v), i64),
)
F64Attr = AttrKind(
    lambda a: isinstance(a, FloatAttr) and a.type is f64,
    "64-bit float attribute",
    lambda a: a.value,
    lambda v: FloatAttr(float(v), f64),
)
BoolProp = _BoolKind(
    lambda a: isinstance(a, IntegerAttr) and a.type is i1,
    "bool attribute",
    lambda a: bool(a.value),
    lambda v: BoolAttr(bool(v)),
)
StrAttr = AttrKind(
    lambda a: isinstance(a, StringAttr), "string attribute", lambda a: a.value, lambda v: StringAttr(str(v))
)
I64ArrayAttr = AttrKind(
    lambda a: isinstance(a, DenseArrayAttr) and a.element_type is i64,
    "i64 dense array attribute",
    lambda a: a.values,
    _ints,
)
F64ArrayAttr = AttrKind(
    lambda a: isinstance(a, DenseArrayAttr) and a.element_type is f64,
    "f64 dense array attribute",
    lambda a: a.values,
    _floats,
)
StrArrayAttr = AttrKind(
    lambda a: isinstance(a, ArrayAttr) and all(isinstance(x, StringAttr) for x in a),
    "array of strings",
    lambda a: tuple(x.value for x in a),
    lambda v: ArrayAttr([StringAttr(str(x)) for x in v]),
)
TypeAttrC = AttrKind(
    lambda a: isinstance(a, TypeAttr), "type attribute", lambda a: a.value, lambda v: TypeAttr(v)
)
#: Elements (``dense<...>`` or ``dense_resource<...>``) read as a read-only numpy array.
ElementsAttrC = AttrKind(
    lambda a: isinstance(a, (DenseResourceElementsAttr, DenseElementsAttr)),
    "elements attribute",
    _elements_value,
    lambda v: DenseElementsAttr.from_numpy(v),
)


def StrEnum(*values: str) -> AttrKind:  # noqa: N802 - reads like an ODS constraint
    """A string attribute whose value is one of ``values``; reads as ``str``."""
    allowed = frozenset(values)
    return AttrKind(
        lambda a: isinstance(a, StringAttr) and a.value in allowed,
        "string attribute whose value is one of " + ", ".join(repr(v) for v in values),
        lambda a: a.value,
        lambda v: StringAttr(str(v)),
    )

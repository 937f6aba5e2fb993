"""Type and attribute constraints used by op definitions (ODS's TypeConstraint/AttrConstraint)."""

from __future__ import annotations

from typing import Any

from lamina.ir.types import (
    FloatType,
    IndexType,
    IntegerType,
    RankedTensorType,
    ShapedType,
    Type,
    UnrankedTensorType,
    VectorType,
)


class Constraint:
    """A predicate on a type or attribute with a human-readable description."""

    __slots__ = ("description",)

    def __init__(self, description: str) -> None:
        self.description = description

    def check(self, x: Any) -> bool:
        raise NotImplementedError

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


class Predicate(Constraint):
    __slots__ = ("fn",)

    def __init__(self, fn: Any, description: str) -> None:
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
        classes: tuple[type, ...] = (RankedTensorType, UnrankedTensorType),
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


def _elem(t: Type) -> Type:
    return t.element_type if isinstance(t, (RankedTensorType, UnrankedTensorType, VectorType)) else t


SignlessIntegerLike = Predicate(
    lambda t: (
        isinstance(_elem(t), (IndexType,)) or (isinstance(_elem(t), IntegerType) and _elem(t).is_signless)
    ),
    "signless-integer-like",
)
FloatLike = Predicate(lambda t: isinstance(_elem(t), FloatType), "floating-point-like")
SignlessIntegerOrFloatLike = Predicate(
    lambda t: SignlessIntegerLike.check(t) or FloatLike.check(t),
    "signless-integer-like or floating-point-like",
)

"""Builtin types. All are uniqued: ``IntegerType(32) is IntegerType(32)``.

Dialect types (``!quant.uniform<...>`` and friends) subclass :class:`DialectType` and register a
parser hook with their dialect; unknown dialect types parse to :class:`OpaqueType` when unregistered
dialects are allowed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, ClassVar

from lamina.ir.base import Uniqued

if TYPE_CHECKING:
    from lamina.ir.attributes import Attribute

DYNAMIC = -1
"""Marker for a dynamic dimension (printed ``?``)."""


class Type(Uniqued):
    """Base of all types."""

    __slots__ = ()


class IntegerType(Type):
    """``iN`` (signless), ``siN`` (signed) or ``uiN`` (unsigned), any width."""

    __slots__ = ("width", "signedness")
    SIGNLESS: ClassVar[str] = ""
    SIGNED: ClassVar[str] = "s"
    UNSIGNED: ClassVar[str] = "u"

    width: int
    signedness: str

    @classmethod
    def _key(cls, width: int, signedness: str = "") -> tuple:
        if signedness not in ("", "s", "u"):
            raise ValueError(f"bad integer signedness {signedness!r}")
        return (int(width), signedness)

    def _init(self, width: int, signedness: str) -> None:
        self._set(width=width, signedness=signedness)

    def _params(self) -> tuple:
        return (self.width, self.signedness)

    @property
    def bitwidth(self) -> int:
        return self.width

    @property
    def is_signless(self) -> bool:
        return self.signedness == ""

    @property
    def is_signed(self) -> bool:
        return self.signedness == "s"

    @property
    def is_unsigned(self) -> bool:
        return self.signedness == "u"


class IndexType(Type):
    __slots__ = ()

    def _init(self) -> None:
        pass

    def _params(self) -> tuple:
        return ()


class NoneType(Type):
    __slots__ = ()

    def _init(self) -> None:
        pass

    def _params(self) -> tuple:
        return ()


_FLOAT_WIDTHS = {
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
    "f80": 80,
    "f128": 128,
    "tf32": 19,
    "f8E4M3FN": 8,
    "f8E5M2": 8,
    "f8E4M3": 8,
    "f8E5M2FNUZ": 8,
    "f8E4M3FNUZ": 8,
    "f8E4M3B11FNUZ": 8,
    "f8E3M4": 8,
    "f8E8M0FNU": 8,
    "f4E2M1FN": 4,
    "f6E2M3FN": 6,
    "f6E3M2FN": 6,
}


class FloatType(Type):
    """A floating-point type named as MLIR spells it (``f32``, ``bf16``, ``f8E4M3FN``, ...)."""

    __slots__ = ("name", "width")
    name: str
    width: int
    NAMES: ClassVar[dict[str, int]] = _FLOAT_WIDTHS

    @classmethod
    def _key(cls, name: str) -> tuple:
        if name not in _FLOAT_WIDTHS:
            raise ValueError(f"unknown float type {name!r}")
        return (name,)

    def _init(self, name: str) -> None:
        self._set(name=name, width=_FLOAT_WIDTHS[name])

    def _params(self) -> tuple:
        return (self.name,)

    @property
    def bitwidth(self) -> int:
        return self.width


class ShapedType(Type):
    """Types with an element type and (maybe) a shape: the ShapedType interface."""

    __slots__ = ()
    element_type: Type

    @property
    def has_rank(self) -> bool:
        return False

    @property
    def shape(self) -> tuple[int, ...]:
        raise ValueError(f"{self} has no rank")

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def has_static_shape(self) -> bool:
        return self.has_rank and DYNAMIC not in self.shape

    @property
    def num_elements(self) -> int:
        if not self.has_static_shape:
            raise ValueError(f"{self} has no static shape")
        return math.prod(self.shape)


def _checked_shape(
    shape: Iterable[int], element_type: Type, what: str, lowest: int = DYNAMIC
) -> tuple[int, ...]:
    """``shape`` as a tuple of ints; ValueError (MLIR's words) for a dim below ``lowest``."""
    dims = tuple(int(d) for d in shape)
    if dims and min(dims) < lowest:
        bad = min(dims)
        text = "x".join("?" if d == DYNAMIC else str(d) for d in dims)
        rule = "a positive constant" if lowest > 0 else ">= 0, or DYNAMIC (-1, printed '?')"
        raise ValueError(
            f"invalid {what} dimension size {bad} in {what}<{text}x{element_type}> (a dimension is {rule})"
        )
    return dims


class RankedTensorType(ShapedType):
    """``tensor<2x?x3xf32>``, optionally with an encoding attribute."""

    __slots__ = ("shape_", "element_type", "encoding")
    shape_: tuple[int, ...]
    encoding: Attribute | None

    @classmethod
    def _key(cls, shape: Iterable[int], element_type: Type, encoding: Attribute | None = None) -> tuple:
        return (_checked_shape(shape, element_type, "tensor"), element_type, encoding)

    def _init(self, shape: tuple, element_type: Type, encoding: Attribute | None) -> None:
        self._set(shape_=shape, element_type=element_type, encoding=encoding)

    def _params(self) -> tuple:
        return (self.shape_, self.element_type, self.encoding)

    @property
    def has_rank(self) -> bool:
        return True

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shape_

    def with_shape(self, shape: Sequence[int]) -> RankedTensorType:
        return RankedTensorType(shape, self.element_type, self.encoding)

    def with_element_type(self, element_type: Type) -> RankedTensorType:
        return RankedTensorType(self.shape_, element_type, self.encoding)


class UnrankedTensorType(ShapedType):
    """``tensor<*xf32>``."""

    __slots__ = ("element_type",)

    @classmethod
    def _key(cls, element_type: Type) -> tuple:
        return (element_type,)

    def _init(self, element_type: Type) -> None:
        self._set(element_type=element_type)

    def _params(self) -> tuple:
        return (self.element_type,)


class VectorType(ShapedType):
    """``vector<4xf32>`` (scalable dims are not modelled)."""

    __slots__ = ("shape_", "element_type")
    shape_: tuple[int, ...]

    @classmethod
    def _key(cls, shape: Iterable[int], element_type: Type) -> tuple:
        return (_checked_shape(shape, element_type, "vector", 1), element_type)

    def _init(self, shape: tuple, element_type: Type) -> None:
        self._set(shape_=shape, element_type=element_type)

    def _params(self) -> tuple:
        return (self.shape_, self.element_type)

    @property
    def has_rank(self) -> bool:
        return True

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shape_


class MemRefType(ShapedType):
    """``memref<4x?xf32>`` with optional layout and memory space attributes."""

    __slots__ = ("shape_", "element_type", "layout", "memory_space")
    shape_: tuple[int, ...]
    layout: Attribute | None
    memory_space: Attribute | None

    @classmethod
    def _key(
        cls,
        shape: Iterable[int],
        element_type: Type,
        layout: Attribute | None = None,
        memory_space: Attribute | None = None,
    ) -> tuple:
        return (_checked_shape(shape, element_type, "memref"), element_type, layout, memory_space)

    def _init(
        self, shape: tuple, element_type: Type, layout: Attribute | None, memory_space: Attribute | None
    ) -> None:
        self._set(shape_=shape, element_type=element_type, layout=layout, memory_space=memory_space)

    def _params(self) -> tuple:
        return (self.shape_, self.element_type, self.layout, self.memory_space)

    @property
    def has_rank(self) -> bool:
        return True

    @property
    def shape(self) -> tuple[int, ...]:
        return self.shape_


class FunctionType(Type):
    """``(i32, f32) -> f32``."""

    __slots__ = ("inputs", "results")
    inputs: tuple[Type, ...]
    results: tuple[Type, ...]

    @classmethod
    def _key(cls, inputs: Iterable[Type], results: Iterable[Type]) -> tuple:
        return (tuple(inputs), tuple(results))

    def _init(self, inputs: tuple, results: tuple) -> None:
        self._set(inputs=inputs, results=results)

    def _params(self) -> tuple:
        return (self.inputs, self.results)


class TupleType(Type):
    """``tuple<i32, f32>``."""

    __slots__ = ("types",)
    types: tuple[Type, ...]

    @classmethod
    def _key(cls, types: Iterable[Type]) -> tuple:
        return (tuple(types),)

    def _init(self, types: tuple) -> None:
        self._set(types=types)

    def _params(self) -> tuple:
        return (self.types,)


class DialectType(Type):
    """Base of types that belong to a dialect and print as ``!dialect.mnemonic<...>``.

    Subclasses set ``dialect`` and ``mnemonic`` and implement ``print_body`` (the text after the
    mnemonic); their dialect registers a parser for the mnemonic.
    """

    __slots__ = ()
    dialect: ClassVar[str] = ""
    mnemonic: ClassVar[str] = ""

    def print_body(self) -> str:
        raise NotImplementedError

    def shaped_type_error(self, shape: tuple[int, ...]) -> str | None:
        """What is wrong with this type as the element type of a ranked shaped type of ``shape``
        (None: nothing). Checked by the verifier on every operand and result type."""
        return None


class OpaqueType(Type):
    """A type of an unregistered dialect, kept as text: ``!foo.bar<...>``."""

    __slots__ = ("dialect", "data")
    dialect: str
    data: str

    @classmethod
    def _key(cls, dialect: str, data: str) -> tuple:
        return (dialect, data)

    def _init(self, dialect: str, data: str) -> None:
        self._set(dialect=dialect, data=data)

    def _params(self) -> tuple:
        return (self.dialect, self.data)


# Convenience singletons.
i1 = IntegerType(1)
i4 = IntegerType(4)
i8 = IntegerType(8)
i16 = IntegerType(16)
i32 = IntegerType(32)
i64 = IntegerType(64)
si8 = IntegerType(8, "s")
ui8 = IntegerType(8, "u")
index = IndexType()
none = NoneType()
f16 = FloatType("f16")
bf16 = FloatType("bf16")
f32 = FloatType("f32")
f64 = FloatType("f64")
f8E4M3FN = FloatType("f8E4M3FN")
f8E5M2 = FloatType("f8E5M2")


def tensor(shape: Sequence[int], element_type: Type, encoding: Attribute | None = None) -> RankedTensorType:
    """Shorthand for :class:`RankedTensorType`."""
    return RankedTensorType(shape, element_type, encoding)


def is_compatible_type(a: Type, b: Type) -> bool:
    """MLIR's ``verifyCompatibleShape`` plus equal element types: the same type, or shaped types
    of one element type whose shapes agree wherever both are known (an unranked tensor or a
    dynamic dim is compatible with any)."""
    if a is b:
        return True
    tensors = (RankedTensorType, UnrankedTensorType)
    same_kind = type(a) is type(b) or (isinstance(a, tensors) and isinstance(b, tensors))
    if not (same_kind and isinstance(a, ShapedType) and isinstance(b, ShapedType)):
        return False
    if a.element_type is not b.element_type:
        return False
    if not (a.has_rank and b.has_rank):
        return True
    return len(a.shape) == len(b.shape) and all(x == y or DYNAMIC in (x, y) for x, y in zip(a.shape, b.shape))


def shaped_type_error(t: Type) -> str | None:
    """What is wrong with a ranked shaped type's dialect element type in that shape, or None."""
    if isinstance(t, ShapedType) and t.has_rank:
        e = t.element_type
        if isinstance(e, DialectType):
            return e.shaped_type_error(t.shape)
    return None


def is_integer_like(t: Type) -> bool:
    return isinstance(t, (IntegerType, IndexType))


def get_element_type_or_self(t: Type) -> Type:
    return t.element_type if isinstance(t, ShapedType) else t

"""Builtin attributes.

Small attributes are uniqued like types (``IntegerAttr(3, i32) is IntegerAttr(3, i32)``). Dense
element attributes carry a numpy array, are not uniqued and compare by value; their data is never
walked element by element in Python.

Large weights use :class:`DenseResourceElementsAttr`: the attribute holds a :class:`ResourceHandle`
(a key and a blob held by reference); the blob is printed once in the module's
``{-# dialect_resources: ... #-}`` section or kept in an external weight file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from lamina.ir.floatfmt import float_dtypes
from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

from lamina.ir.base import Uniqued
from lamina.ir.types import (
    FloatType,
    IndexType,
    IntegerType,
    ShapedType,
    Type,
    i1,
    i64,
)


class Attribute(Uniqued):
    """Base of all attributes."""

    __slots__ = ()


class DialectAttribute(Attribute):
    """Base of attributes that belong to a dialect: ``#dialect.mnemonic<...>``."""

    __slots__ = ()
    dialect: ClassVar[str] = ""
    mnemonic: ClassVar[str] = ""

    def print_body(self) -> str:
        raise NotImplementedError


class OpaqueAttr(Attribute):
    """An attribute of an unregistered dialect kept as text: ``#foo.bar<...>``."""

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


class UnitAttr(Attribute):
    __slots__ = ()

    def _init(self) -> None:
        pass

    def _params(self) -> tuple:
        return ()


class IntegerAttr(Attribute):
    """An integer of a given integer or index type. ``i1`` integers print as ``true``/``false``."""

    __slots__ = ("value", "type")
    value: int
    type: Type

    @classmethod
    def _key(cls, value: int | bool, type: Type = i64) -> tuple:
        if isinstance(type, IntegerType) and type.width == 1:
            value = 1 if value else 0
        return (int(value), type)

    def _init(self, value: int, type: Type) -> None:
        self._set(value=value, type=type)

    def _params(self) -> tuple:
        return (self.value, self.type)

    def __int__(self) -> int:
        return self.value

    def __index__(self) -> int:
        return self.value

    def __bool__(self) -> bool:
        return bool(self.value)


def BoolAttr(value: bool) -> IntegerAttr:  # noqa: N802 - reads like the MLIR class
    """``true`` / ``false``: an ``i1`` :class:`IntegerAttr`."""
    return IntegerAttr(1 if value else 0, i1)


def _round_to(value: float, type: Type) -> float:
    if isinstance(type, FloatType) and type.width < 64:
        dt = float_dtype(type)
        if dt is not None:
            with np.errstate(over="ignore"):
                return float(np.asarray(value, dtype=np.float64).astype(dt))
    return float(value)


class FloatAttr(Attribute):
    """A float of a float type; the value is rounded to that type on creation."""

    __slots__ = ("value", "type")
    value: float
    type: Type

    @classmethod
    def _key(cls, value: float, type: Type) -> tuple:
        v = _round_to(float(value), type)
        # Key on the bit pattern so that 0.0 and -0.0 (equal as floats) stay distinct.
        return (v.hex(), type)

    def _init(self, hexval: str, type: Type) -> None:
        self._set(value=float.fromhex(hexval), type=type)

    def _params(self) -> tuple:
        return (self.value, self.type)

    def __float__(self) -> float:
        return self.value


class StringAttr(Attribute):
    """``"text"``, or ``"text" : type`` (MLIR's strings may carry a type; None when they do not)."""

    __slots__ = ("value", "type")
    value: str
    type: Type | None

    @classmethod
    def _key(cls, value: str, type: Type | None = None) -> tuple:
        return (value, type)

    def _init(self, value: str, type: Type | None) -> None:
        self._set(value=value, type=type)

    def _params(self) -> tuple:
        return (self.value,) if self.type is None else (self.value, self.type)


class ArrayAttr(Attribute):
    """``[a, b, c]``: an immutable sequence of attributes."""

    __slots__ = ("elements",)
    elements: tuple[Attribute, ...]

    @classmethod
    def _key(cls, elements: Iterable[Attribute] = ()) -> tuple:
        return (tuple(elements),)

    def _init(self, elements: tuple) -> None:
        self._set(elements=elements)

    def _params(self) -> tuple:
        return (self.elements,)

    def __len__(self) -> int:
        return len(self.elements)

    def __getitem__(self, i: int) -> Attribute:
        return self.elements[i]

    def __iter__(self) -> Iterator[Attribute]:
        return iter(self.elements)


class DenseArrayAttr(Attribute):
    """``array<i64: 1, 2, 3>``: a flat array of integers or floats of one element type."""

    __slots__ = ("element_type", "values")
    element_type: Type
    values: tuple

    @classmethod
    def _key(cls, element_type: Type, values: Iterable[Any] = ()) -> tuple:
        if isinstance(element_type, IntegerType):
            vals: tuple = (
                tuple(bool(v) for v in values) if element_type.width == 1 else tuple(int(v) for v in values)
            )
        elif isinstance(element_type, FloatType):
            floats = tuple(_round_to(float(v), element_type) for v in values)
            return (element_type, tuple(v.hex() for v in floats))
        else:
            raise ValueError(f"dense array element type must be integer or float, got {element_type}")
        return (element_type, vals)

    def _init(self, element_type: Type, values: tuple) -> None:
        if isinstance(element_type, FloatType):
            values = tuple(float.fromhex(v) for v in values)
        self._set(element_type=element_type, values=values)

    def _params(self) -> tuple:
        return (self.element_type, self.values)

    @staticmethod
    def i64(values: Iterable[int]) -> DenseArrayAttr:
        return DenseArrayAttr(i64, values)

    @staticmethod
    def i32(values: Iterable[int]) -> DenseArrayAttr:
        return DenseArrayAttr(IntegerType(32), values)

    @staticmethod
    def f32(values: Iterable[float]) -> DenseArrayAttr:
        return DenseArrayAttr(FloatType("f32"), values)

    @staticmethod
    def f64(values: Iterable[float]) -> DenseArrayAttr:
        return DenseArrayAttr(FloatType("f64"), values)

    @staticmethod
    def bool(values: Iterable[bool]) -> DenseArrayAttr:
        return DenseArrayAttr(i1, values)

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: int) -> Any:
        return self.values[i]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.values)


class DictionaryAttr(Attribute):
    """``{a = 1, b = "x"}``; entries are kept sorted by name, as MLIR does."""

    __slots__ = ("items_", "_dict")
    items_: tuple[tuple[str, Attribute], ...]
    _dict: dict[str, Attribute]

    @classmethod
    def _key(cls, entries: Mapping[str, Attribute] | Iterable[tuple[str, Attribute]] = ()) -> tuple:
        if isinstance(entries, Mapping):
            entries = entries.items()
        return (tuple(sorted(entries, key=lambda kv: kv[0])),)

    def _init(self, items: tuple) -> None:
        self._set(items_=items, _dict=dict(items))

    def _params(self) -> tuple:
        return (self.items_,)

    def __getitem__(self, k: str) -> Attribute:
        return self._dict[k]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __contains__(self, k: object) -> bool:
        return k in self._dict

    def get(self, k: str, default: Any = None) -> Any:
        return self._dict.get(k, default)

    def keys(self) -> Any:
        return self._dict.keys()

    def values(self) -> Any:
        return self._dict.values()

    def items(self) -> Any:
        return self._dict.items()


class TypeAttr(Attribute):
    __slots__ = ("value",)
    value: Type

    @classmethod
    def _key(cls, value: Type) -> tuple:
        return (value,)

    def _init(self, value: Type) -> None:
        self._set(value=value)

    def _params(self) -> tuple:
        return (self.value,)


class SymbolRefAttr(Attribute):
    """``@root`` or ``@root::@nested::@leaf``."""

    __slots__ = ("root", "nested")
    root: str
    nested: tuple[str, ...]

    @classmethod
    def _key(cls, root: str, nested: Iterable[str] = ()) -> tuple:
        return (root, tuple(nested))

    def _init(self, root: str, nested: tuple) -> None:
        self._set(root=root, nested=nested)

    def _params(self) -> tuple:
        return (self.root, self.nested)

    @property
    def leaf(self) -> str:
        return self.nested[-1] if self.nested else self.root

    @property
    def is_flat(self) -> bool:
        return not self.nested


def FlatSymbolRefAttr(name: str) -> SymbolRefAttr:  # noqa: N802
    return SymbolRefAttr(name)


# --------------------------------------------------------------------------------------------
# numpy <-> element type
# --------------------------------------------------------------------------------------------


def float_dtype(t: FloatType) -> np.dtype | None:
    return float_dtypes().get(t.name)


def element_type_to_dtype(t: Type) -> np.dtype:
    """The numpy dtype that stores elements of ``t`` (``i4`` is stored unpacked in ``int8``)."""
    if isinstance(t, FloatType):
        dt = float_dtypes().get(t.name)
        if dt is None:
            raise ValueError(f"no numpy dtype for {t}")
        return dt
    if isinstance(t, IndexType):
        return np.dtype(np.int64)
    if isinstance(t, IntegerType):
        w = t.width
        if w == 1:
            return np.dtype(np.bool_)
        for bits in (8, 16, 32, 64):
            if w <= bits:
                return np.dtype(f"uint{bits}" if t.is_unsigned else f"int{bits}")
    raise ValueError(f"no numpy dtype for {t}")


def dtype_to_element_type(dt: Any) -> Type:
    dt = np.dtype(dt)
    if dt == np.bool_:
        return i1
    if dt.kind in "iu":
        return IntegerType(dt.itemsize * 8, "u" if dt.kind == "u" else "")
    for name, fdt in float_dtypes().items():
        if fdt == dt:
            return FloatType(name)
    raise ValueError(f"no element type for numpy dtype {dt}")


# --------------------------------------------------------------------------------------------
# Dense elements
# --------------------------------------------------------------------------------------------


class ElementsAttr(Attribute):
    """Base of attributes that hold a tensor of elements (``type`` is a shaped type)."""

    __slots__ = ()
    type: ShapedType

    def to_numpy(self) -> np.ndarray:
        raise NotImplementedError


class DenseElementsAttr(ElementsAttr):
    """``dense<...>`` backed by a read-only numpy array (a splat is stored as one value)."""

    __slots__ = ("type", "_data", "is_splat", "_hash")
    _uniqued = False
    type: ShapedType
    is_splat: bool
    _data: np.ndarray
    _hash: int | None

    def __init__(self, type: ShapedType, data: Any) -> None:
        dt = element_type_to_dtype(type.element_type)
        arr = np.asarray(data)
        if arr.dtype != dt:
            arr = arr.astype(dt)
        shape = tuple(type.shape)
        if arr.size == 1 and math.prod(shape) != 1:
            splat = True
            arr = arr.reshape(())
        elif arr.shape == shape:
            splat = False
        elif arr.size == math.prod(shape):
            splat = False
            arr = arr.reshape(shape)
        else:
            raise ValueError(f"dense elements of shape {arr.shape} do not match type {type}")
        if arr.flags.writeable:
            arr = arr.view()  # held by reference: a read-only view, never a copy
            arr.flags.writeable = False
        object.__setattr__(self, "type", type)
        object.__setattr__(self, "_data", arr)
        object.__setattr__(self, "is_splat", splat)
        object.__setattr__(self, "_hash", None)

    @staticmethod
    def from_numpy(arr: np.ndarray, element_type: Type | None = None) -> DenseElementsAttr:
        from lamina.ir.types import RankedTensorType

        et = element_type or dtype_to_element_type(arr.dtype)
        return DenseElementsAttr(RankedTensorType(arr.shape, et), arr)

    def _params(self) -> tuple:
        return (self.type, self._data)

    def __reduce__(self) -> Any:
        return (DenseElementsAttr, (self.type, self._data))

    def to_numpy(self) -> np.ndarray:
        """The elements as a read-only array of the full shape (a splat is broadcast, not copied)."""
        if self.is_splat:
            return np.broadcast_to(self._data, self.type.shape)
        return self._data

    @property
    def splat_value(self) -> Any:
        if not self.is_splat:
            raise ValueError("not a splat")
        return self._data.item()

    @property
    def raw(self) -> np.ndarray:
        """The stored array: 0-d for a splat, full-shaped otherwise."""
        return self._data

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, DenseElementsAttr) or other.type is not self.type:
            return False
        if self.is_splat != other.is_splat:
            return False
        a, b = self._data, other._data
        return a.shape == b.shape and a.tobytes() == b.tobytes()

    def __hash__(self) -> int:
        h = self._hash
        if h is None:
            h = hash((self.type, self.is_splat, self._data.tobytes()))
            object.__setattr__(self, "_hash", h)
        return h


class ResourceError(ValueError):
    """A resource blob that cannot be loaded or does not fit the type of its ``dense_resource``."""


class ResourceBlob:
    """Bytes of a resource, held by reference. ``data`` may be loaded lazily from a file."""

    __slots__ = ("_data", "alignment", "_loader")

    def __init__(
        self,
        data: np.ndarray | bytes | memoryview | None = None,
        alignment: int = 16,
        loader: Callable[[], np.ndarray] | None = None,
    ) -> None:
        self._data = data
        self.alignment = alignment
        self._loader = loader

    @property
    def data(self) -> np.ndarray | bytes | memoryview:
        if self._data is None:
            if self._loader is None:
                raise ValueError("resource blob has no data")
            self._data = self._loader()
            self._loader = None
        return self._data

    @property
    def is_loaded(self) -> bool:
        return self._data is not None

    def as_bytes(self) -> memoryview:
        d = self.data
        if isinstance(d, np.ndarray):
            # A uint8 view works for every dtype, incl. ml_dtypes ones (bf16, f8) that the buffer
            # protocol cannot export.
            return memoryview(np.ascontiguousarray(d).reshape(-1).view(np.uint8))  # type: ignore[arg-type]
        return memoryview(d).cast("B")


class ResourceHandle:
    """A named resource (``dense_resource<key>``); its blob is filled when known."""

    __slots__ = ("key", "blob", "dialect")

    def __init__(self, key: str, blob: ResourceBlob | None = None, dialect: str = "builtin") -> None:
        self.key = key
        self.blob = blob
        self.dialect = dialect

    def __repr__(self) -> str:
        return f"ResourceHandle({self.key!r})"


class DenseResourceElementsAttr(ElementsAttr):
    """``dense_resource<key> : tensor<...>``; equality is by handle identity."""

    __slots__ = ("type", "handle")
    type: ShapedType
    handle: ResourceHandle

    @classmethod
    def _key(cls, type: ShapedType, handle: ResourceHandle) -> tuple:
        return (type, handle)

    def _init(self, type: ShapedType, handle: ResourceHandle) -> None:
        self._set(type=type, handle=handle)

    def _params(self) -> tuple:
        return (self.type, self.handle)

    def to_numpy(self) -> np.ndarray:
        """Zero-copy view of the blob as an array of the attribute's type."""
        if self.handle.blob is None:
            raise ValueError(f"resource '{self.handle.key}' has no data")
        data = self.handle.blob.data
        dt = element_type_to_dtype(self.type.element_type)
        if isinstance(data, np.ndarray) and data.dtype == dt:
            return data.reshape(self.type.shape)
        return np.frombuffer(self.handle.blob.as_bytes(), dtype=dt).reshape(self.type.shape)


class ResourceManager:
    """Owns resource handles by key for one context (MLIR's DialectResourceBlobManager)."""

    __slots__ = ("_handles",)

    def __init__(self) -> None:
        self._handles: dict[str, ResourceHandle] = {}

    def get(self, key: str) -> ResourceHandle | None:
        return self._handles.get(key)

    def get_or_create(self, key: str, dialect: str = "builtin") -> ResourceHandle:
        h = self._handles.get(key)
        if h is None:
            h = self._handles[key] = ResourceHandle(key, None, dialect)
        return h

    def insert(self, key: str, data: np.ndarray | bytes, alignment: int = 16) -> ResourceHandle:
        """Add a new resource; the key is made unique by a numeric suffix if taken."""
        base, n = key, 0
        while key in self._handles:
            n += 1
            key = f"{base}_{n}"
        h = self._handles[key] = ResourceHandle(key, ResourceBlob(data, alignment))
        return h

    def __iter__(self) -> Iterator[ResourceHandle]:
        return iter(self._handles.values())

    def __len__(self) -> int:
        return len(self._handles)


def dense_resource(
    manager: ResourceManager, key: str, array: np.ndarray, element_type: Type | None = None
) -> DenseResourceElementsAttr:
    """Wrap ``array`` (held by reference, not copied) as a ``dense_resource`` attribute."""
    from lamina.ir.types import RankedTensorType

    et = element_type or dtype_to_element_type(array.dtype)
    h = manager.insert(key, np.ascontiguousarray(array))
    return DenseResourceElementsAttr(RankedTensorType(array.shape, et), h)


def attr_from_python(value: Any) -> Attribute:
    """Best-effort conversion of plain Python values to attributes (for builders)."""
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        return BoolAttr(value)
    if isinstance(value, int):
        return IntegerAttr(value, i64)
    if isinstance(value, float):
        return FloatAttr(value, FloatType("f64"))
    if isinstance(value, str):
        return StringAttr(value)
    if isinstance(value, Type):
        return TypeAttr(value)
    if isinstance(value, np.ndarray):
        return DenseElementsAttr.from_numpy(value)
    if isinstance(value, Mapping):
        return DictionaryAttr({k: attr_from_python(v) for k, v in value.items()})
    if isinstance(value, Sequence):
        return ArrayAttr(attr_from_python(v) for v in value)
    raise TypeError(f"cannot convert {value!r} to an attribute")

"""Helpers shared by the ``top`` passes and patterns: scalar constants, creating new ``top.Weight``
ops backed by ``dense_resource`` blobs, and small matching utilities. (A Value's constant array and
a location's tensor name are IR-level: :mod:`lamina.ir.constants`, :mod:`lamina.ir.naming`.)"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from lamina.ir.attributes import (
    DenseResourceElementsAttr,
    ResourceBlob,
    ResourceHandle,
    ResourceManager,
    dtype_to_element_type,
)
from lamina.ir.constants import constant_array
from lamina.ir.core import Operation, Value
from lamina.ir.location import Location, NameLoc
from lamina.ir.naming import location_name
from lamina.ir.types import NoneType, RankedTensorType, ShapedType, Type

OpT = TypeVar("OpT", bound=Operation)

# ---- reading values ---------------------------------------------------------------------------


def scalar_of(v: Value) -> float | None:
    """The value of a constant whose elements are all equal (a splat or a one-element tensor)."""
    a = constant_array(v)
    if a is None or a.size == 0 or a.dtype.kind not in "fiub":
        return None
    first = a.reshape(-1)[0]
    if a.size > 1 and not np.all(a == first):
        return None
    if a.dtype.kind == "f" and a.dtype.itemsize < 8:
        return float(str(first))  # the shortest decimal that round-trips: 1e-05, not 9.99999974e-06
    return float(first)


def is_scalar(v: Value, value: float, rtol: float = 1e-6) -> bool:
    s = scalar_of(v)
    return s is not None and abs(s - value) <= rtol * max(1.0, abs(value))


def producer(v: Value, op_class: type[OpT]) -> OpT | None:
    """``v``'s defining op if it is an ``op_class`` op, typed so that its named accessors
    (``conv.filter``) can be used. Compared by name: a ``tpu`` op is never a ``top`` one."""
    op = v.defining_op()
    return op if op is not None and op.name == op_class.name else None  # type: ignore[return-value]


def single_use(v: Value) -> bool:
    return len(v.uses) == 1


def is_none_value(v: Value) -> bool:
    return isinstance(v.type, NoneType)


def static_shape(v: Value | Type) -> tuple[int, ...] | None:
    t = v if isinstance(v, Type) else v.type
    if isinstance(t, ShapedType) and t.has_rank and t.has_static_shape:
        return tuple(t.shape)
    return None


# ---- locations --------------------------------------------------------------------------------


def derived_loc(loc: Location, suffix: str) -> Location:
    """A location for a *new* tensor made from the one at ``loc``: ``name`` becomes ``name_suffix``.

    Tensors are compared with the framework by location name, so an op that computes something else
    than the tensor named at ``loc`` must not reuse that name."""
    name = location_name(loc)
    child = loc.child if isinstance(loc, NameLoc) else None
    return NameLoc(f"{name or 'tensor'}_{suffix}", child)


# ---- new weights ------------------------------------------------------------------------------


def root_op(op: Operation) -> Operation:
    while True:
        parent = op.parent_op()
        if parent is None:
            return op
        op = parent


def _resource_keys(root: Operation) -> set[str]:
    keys: set[str] = set()
    for o in root.walk_ops():
        for a in o.properties.values():
            if isinstance(a, DenseResourceElementsAttr):
                keys.add(a.handle.key)
        for a in o.attributes.values():
            if isinstance(a, DenseResourceElementsAttr):
                keys.add(a.handle.key)
    return keys


class WeightFactory:
    """Makes ``dense_resource`` attributes whose keys are unique in a module (and in the context's
    resource manager when one is given). The module's keys are collected once, on first use."""

    __slots__ = ("_keys", "manager", "root")

    def __init__(self, root: Operation, manager: ResourceManager | None = None) -> None:
        self.root = root
        self.manager = manager
        self._keys: set[str] | None = None

    def _unique(self, hint: str) -> str:
        if self._keys is None:
            self._keys = _resource_keys(self.root)
        base = "".join(c if (c.isalnum() or c in "_.-") else "_" for c in hint) or "weight"
        key, n = base, 0
        mgr = self.manager
        while key in self._keys or (mgr is not None and mgr.get(key) is not None):
            n += 1
            key = f"{base}_{n}"
        self._keys.add(key)
        return key

    def attr(
        self, array: np.ndarray, hint: str, element_type: Type | None = None
    ) -> DenseResourceElementsAttr:
        """A ``dense_resource`` holding ``array`` (by reference) under a fresh key derived from ``hint``."""
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would make a 0-d array 1-d)
            array = array.copy(order="C")
        et = element_type or dtype_to_element_type(array.dtype)
        key = self._unique(hint)
        if self.manager is not None:
            handle = self.manager.insert(key, array)
        else:
            handle = ResourceHandle(key, ResourceBlob(array))
        return DenseResourceElementsAttr(RankedTensorType(array.shape, et), handle)


class FactoryCache:
    """One :class:`WeightFactory` per root op (patterns do not know their module up front)."""

    __slots__ = ("_factory", "manager")

    def __init__(self, manager: ResourceManager | None = None) -> None:
        self._factory: WeightFactory | None = None
        self.manager = manager

    def for_op(self, op: Operation) -> WeightFactory:
        root = root_op(op)
        f = self._factory
        if f is None or f.root is not root:
            f = self._factory = WeightFactory(root, self.manager)
        return f


def create_weight(
    rewriter: Any,
    factory: WeightFactory,
    array: np.ndarray,
    hint: str,
    loc: Location | None = None,
    element_type: Type | None = None,
) -> Value:
    """Insert a ``top.Weight`` holding ``array`` at the rewriter's insertion point; its result."""
    from lamina.dialects.top.io import WeightOp

    attr = factory.attr(array, hint, element_type)
    op = rewriter.create(WeightOp, output=attr.type, value=attr, loc=loc)
    return op.results[0]

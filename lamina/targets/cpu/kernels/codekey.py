"""Code keys: what a kernel's LLVM function depends on, known before it is emitted.

:func:`code_key` ``(template, op, plan, isa)`` is a hashable key such that two kernels with equal
keys get the same function but for its name: the compiler emits the first and calls it for both,
skipping the second's Python emission and LLVM (``codegen.generate``). Equal keys must never mean
different code, so the key always holds the template (its class, name and instance fields), the
ISA and the plan's structure (its fields but the symbol; its buffers, the operand or result each
names by position; its weights by key, dtype and shape), and then

* the template's own key where its own class declares one (:meth:`Template.code_key` — a
  subclass that does not re-declare it gets the default, as it may emit other code than its
  parent) and it is not None. Then a value from outside the kernel region that the plan names (a
  fused residual) is in the structure by its shape and storage type, zero points and bounds, not
  its scales: an own key holds what the code reads of them (ResNet-50 INT8: 8 of 40 emissions
  were kernels whose residual alone had another scale, their IR the same);
* else the default: the whole kernel region (every op: name, result types, operands by position,
  properties and attributes) and the plan's weights *by content*: only kernels whose inputs to
  ``emit`` are the same share a key. A template declaring ``code_reads_constants = False`` (in its
  own class: ``emit`` reads the op's constants and the plan's weights for their types and shapes,
  never their values — the weights are buffers) gets the default without the data: same-shaped
  layers of other weights share one function.

Anything the canonical form does not know (an object without a content-based equality) makes the key
unique, so it never merges. Kernels without a common key are still compared by their emitted text.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Hashable
from typing import Any

import numpy as np

from lamina.ir.attributes import Attribute, DenseElementsAttr, DenseResourceElementsAttr
from lamina.ir.core import Operation, Value
from lamina.ir.types import Type

from .abi import Isa, KernelPlan, Template

__all__ = ["code_key", "declares"]


class _Unique:
    """A key part equal only to itself (what the canonical form cannot compare by content)."""

    __slots__ = ()


def declares(t: Template, name: str) -> bool:
    """Whether ``name`` is defined by the template's own class (not inherited)."""
    return name in type(t).__dict__


def _digest(a: np.ndarray) -> bytes:
    flat = np.ascontiguousarray(a).reshape(-1)
    return hashlib.blake2b(flat.view(np.uint8).data, digest_size=20).digest()


class _Data:
    """Data in a key, compared by content only when needed: its hash is its dtype/type and shape's
    (cheap), and two with the same are compared by a digest of their bytes, computed once — so a
    kernel's weights are hashed only when another kernel's key matches it up to them."""

    __slots__ = ("form", "_get", "_digest")

    def __init__(self, form: tuple[Any, ...], get: Any) -> None:
        self.form = form
        self._get = get
        self._digest: bytes | None = None

    def digest(self) -> bytes:
        if self._digest is None:
            self._digest = self._get()
            self._get = None
        return self._digest

    def __hash__(self) -> int:
        return hash(self.form)

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        return isinstance(other, _Data) and self.form == other.form and self.digest() == other.digest()


def _resource_digest(a: DenseResourceElementsAttr) -> bytes:
    try:
        return _digest(a.to_numpy())
    except ValueError:  # a resource without data: equal to nothing
        return repr(object()).encode()


def _array(a: np.ndarray) -> Any:
    if a.dtype.hasobject:
        return _Unique()
    return _Data(("nd", a.dtype.str, a.shape), lambda: _digest(a))


class _Canon:
    """The canonical form of what ``emit`` sees: values by position in the kernel region, data by
    content (or, ``data=False``, by dtype and shape only)."""

    def __init__(self, block: Any, data: bool, own: bool = False) -> None:
        self.data = data
        self.own = own
        self.pos: dict[int, tuple[Any, ...]] = {}
        if block is not None:
            for i, a in enumerate(block.args):
                self.pos[id(a)] = ("arg", i, a.type)
            for j, o in enumerate(block.ops):
                for r, v in enumerate(o.results):
                    self.pos[id(v)] = ("res", j, r)

    def value(self, v: Value) -> Any:
        p = self.pos.get(id(v))
        if p is not None:
            return p
        # a value from outside the region (a residual named by the plan): its type, and its data
        # when it is a constant
        from lamina.ir.constants import value_constant

        c = value_constant(v)
        return ("outer", self.outer_type(v.type), None if c is None else self.attr(c))

    def outer_type(self, t: Type) -> Any:
        """An outside value's type; for a template with its own key, a quantized one without its
        scales (they reach the code through buffers; what the code reads of them — the rounding
        forms they allow — is the own key's to hold, as ``gemm_int8``'s ``_fused_key``)."""
        from lamina.dialects.tpu.families.common import is_quant
        from lamina.dialects.tpu.quantize import qparams, storage_dtype
        from lamina.ir.types import ShapedType

        if not self.own or not isinstance(t, ShapedType) or not is_quant(t):
            return t
        _, zp, axis, lo, hi = qparams(t)
        e = t.element_type
        return (
            "quant",
            tuple(t.shape),
            storage_dtype(e).str,  # type: ignore[arg-type]
            str(getattr(e, "expressed_type", "")),
            tuple(int(z) for z in np.asarray(zp).reshape(-1)),
            axis,
            int(lo),
            int(hi),
        )

    def attr(self, a: Any) -> Any:
        if isinstance(a, (DenseElementsAttr, DenseResourceElementsAttr)):
            if not self.data:
                return ("elements", a.type)
            if isinstance(a, DenseElementsAttr):
                raw = a.raw  # 0-d for a splat
                return _Data(("dense", a.type, raw.shape), lambda: _digest(raw))
            return _Data(("resource", a.type), lambda: _resource_digest(a))
        return a  # uniqued: equal when their parameters are

    def __call__(self, x: Any) -> Any:
        if x is None or isinstance(x, (bool, int, str, bytes)):
            return (type(x).__name__, x)
        if isinstance(x, float):
            return ("float", x.hex())  # 0.0 and -0.0 differ
        if isinstance(x, Value):
            return self.value(x)
        if isinstance(x, Attribute):
            return self.attr(x)
        if isinstance(x, (Type, Isa)):
            return x
        if isinstance(x, np.ndarray):
            return _array(x) if self.data else ("nd", x.dtype.str, x.shape)
        if isinstance(x, np.generic):
            return ("np", x.dtype.str, x.tobytes())
        if isinstance(x, (list, tuple)):
            return (type(x).__name__, tuple(self(y) for y in x))
        if isinstance(x, dict):
            return ("dict", tuple((self(k), self(v)) for k, v in x.items()))
        if isinstance(x, (set, frozenset)):
            return ("set", frozenset(self(y) for y in x))
        if dataclasses.is_dataclass(x) and not isinstance(x, type):
            return (
                type(x).__qualname__,
                tuple((f.name, self(getattr(x, f.name))) for f in dataclasses.fields(x)),
            )
        return _Unique()

    def op(self, o: Operation) -> tuple[Any, ...]:
        return (
            o.name,
            tuple(self.value(v) for v in o.operands),
            tuple(r.type for r in o.results),
            tuple((k, self(v)) for k, v in o.properties.items()),
            tuple((k, self(v)) for k, v in o.attributes.items()),
            tuple(tuple(tuple(self.op(x) for x in b.ops) for b in r.blocks) for r in o.regions),
        )


def _plan(c: _Canon, plan: KernelPlan) -> tuple[Any, ...]:
    fields = [f.name for f in dataclasses.fields(plan) if f.name not in ("symbol", "weights")]
    weights = tuple((k, c(v)) for k, v in plan.weights.items())
    return (type(plan).__qualname__, tuple((n, c(getattr(plan, n))) for n in fields), weights)


def code_key(t: Template, op: Any, plan: KernelPlan, isa: Isa) -> Hashable:
    """The key of the code ``t.emit`` makes for ``op`` and ``plan`` on ``isa`` (see the module)."""
    block = op.parent if isinstance(op, Operation) else None
    own = t.code_key(op, plan, isa) if declares(t, "code_key") else None
    blind = own is not None or (declares(t, "code_reads_constants") and not t.code_reads_constants)
    c = _Canon(block, data=not blind, own=own is not None)
    who = (type(t).__module__, type(t).__qualname__, t.name, c(dict(vars(t))))
    structure = (who, isa, _plan(c, plan))
    if own is not None:
        key: Any = (structure, "own", own)
    elif block is None:
        key = (structure, "default", (c.op(op),), 0)
    else:
        ops = list(block.ops)
        key = (
            structure,
            "default",
            tuple(c.op(o) for o in ops),
            next(i for i, o in enumerate(ops) if o is op),
        )
    try:
        hash(key)
    except TypeError:  # a part without a hash (a template's own key holding a list)
        return _Unique()
    return key

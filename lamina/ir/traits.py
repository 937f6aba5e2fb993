"""Traits and interfaces.

A **trait** is a static property of an op class (``Pure``, ``IsTerminator``, ``HasParent("func.func")``)
that may carry a structural check (``verify``). Op classes list trait *instances*; membership is
asked by class: ``op.has_trait(IsTerminator)``.

An **interface** is a set of methods a pass can call without knowing the op. An op class implements
one by inheriting it (``class AddOp(Op, InferTypeOpInterface)``); an op defined elsewhere can be
given one after the fact with ``Interface.attach(OpClass, impl)`` (MLIR's external models). Passes
ask ``Interface.get(op)``, which returns an object exposing the interface methods bound to ``op``, or
None. Type and attribute interfaces work the same way on type/attribute classes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from lamina.ir.diagnostics import VerifyError

if TYPE_CHECKING:
    from lamina.ir.attributes import Attribute
    from lamina.ir.core import Block, Operation, Value
    from lamina.ir.types import Type


# --------------------------------------------------------------------------------------------
# Traits
# --------------------------------------------------------------------------------------------


class Trait:
    """Base of traits. ``verify`` runs before the op's own verifier."""

    __slots__ = ()
    #: Also count as having these traits (e.g. Pure implies NoMemoryEffect).
    implies: ClassVar[tuple[type[Trait], ...]] = ()

    def verify(self, op: Operation) -> None:
        pass

    def __repr__(self) -> str:
        return type(self).__name__


class NoMemoryEffect(Trait):
    """The op reads and writes no memory."""


class Speculatable(Trait):
    """The op may be hoisted or executed speculatively."""


class Pure(Trait):
    """No side effects and speculatable: removable when unused, CSE-able."""

    implies = (NoMemoryEffect, Speculatable)


class ConstantLike(Trait):
    """The op materialises a constant; it has no operands, one result and a ``value`` property."""

    def verify(self, op: Operation) -> None:
        if op.num_operands or op.num_results != 1:
            raise VerifyError("constant-like op must have no operands and one result")


class Commutative(Trait):
    pass


class Elementwise(Trait):
    pass


class IsTerminator(Trait):
    def verify(self, op: Operation) -> None:
        b = op.parent
        if b is not None and b.last_op is not op:
            raise VerifyError("must be the last operation in the parent block")


class ReturnLike(Trait):
    """A terminator that returns control to the parent op (``func.return``)."""


class NotALayer(Trait):
    """Model plumbing, not a layer: the op produces no tensor of its own that per-layer comparison,
    calibration, quantization or the mixed-precision search should look at (a model input's
    wrapper, a weight, the absent operand, a region terminator)."""


class NoTerminator(Trait):
    """The op's single-block regions need no terminator (``builtin.module``)."""


class SingleBlock(Trait):
    def verify(self, op: Operation) -> None:
        for i, r in enumerate(op.regions):
            if len(r.blocks) > 1:
                raise VerifyError(f"expects region #{i} to have 0 or 1 blocks")


class IsolatedFromAbove(Trait):
    """Nested ops may not use values defined above this op."""


class AffineScope(Trait):
    pass


class AutomaticAllocationScope(Trait):
    pass


class HasParent(Trait):
    """The op must be nested directly in one of the named ops."""

    __slots__ = ("names",)

    def __init__(self, *names: str) -> None:
        self.names = names

    def verify(self, op: Operation) -> None:
        p = op.parent_op()
        if p is None or p.name not in self.names:
            expected = ", ".join(f"'{n}'" for n in self.names)
            raise VerifyError(f"expects parent op {'to be one of ' if len(self.names) > 1 else ''}{expected}")

    def __repr__(self) -> str:
        return f"HasParent({', '.join(self.names)})"


class SameOperandsAndResultType(Trait):
    def verify(self, op: Operation) -> None:
        types = [*op.operand_types, *op.result_types]
        if types and any(t is not types[0] for t in types):
            raise VerifyError("requires the same type for all operands and results")


class SameOperandsAndResultShape(Trait):
    def verify(self, op: Operation) -> None:
        shapes = {
            getattr(t, "shape", None)
            for t in [*op.operand_types, *op.result_types]
            if getattr(t, "has_rank", False)
        }
        if len(shapes) > 1:
            raise VerifyError("requires the same shape for all operands and results")


class SameTypeOperands(Trait):
    def verify(self, op: Operation) -> None:
        types = op.operand_types
        if types and any(t is not types[0] for t in types):
            raise VerifyError("requires all operands to have the same type")


def trait_closure(traits: Sequence[Trait]) -> frozenset[type[Trait]]:
    """All trait classes an op with ``traits`` has (including base classes and implied traits)."""
    out: set[type[Trait]] = set()
    todo: list[type] = [type(t) for t in traits]
    while todo:
        c = todo.pop()
        if c in out or not (isinstance(c, type) and issubclass(c, Trait)) or c is Trait:
            continue
        out.add(c)
        todo.extend(c.__mro__[1:])
        todo.extend(c.implies)
    return frozenset(out)


# --------------------------------------------------------------------------------------------
# Interfaces
# --------------------------------------------------------------------------------------------


class Interface:
    """Base of op/type/attribute interfaces.

    ``Iface.get(obj)`` returns ``obj`` itself if its class inherits the interface, an adapter bound
    to ``obj`` if an external model was attached to its class, else None.
    """

    __slots__ = ()

    _external: ClassVar[dict[type, Any]]

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if Interface in cls.__bases__:
            cls._external = {}

    @classmethod
    def attach(cls, target: type, model: Any) -> None:
        """Attach an external model: an object whose methods take the op as first argument."""
        cls._external[target] = model

    @classmethod
    def get(cls, obj: Any) -> Any:
        if isinstance(obj, cls):
            return obj
        ext = cls._external
        if ext:
            for c in type(obj).__mro__:
                m = ext.get(c)
                if m is not None:
                    return _Bound(m, obj)
        return None

    @classmethod
    def implemented_by(cls, obj: Any) -> bool:
        return cls.get(obj) is not None


class _Bound:
    """An external model bound to one object: ``adapter.method(*a)`` calls ``model.method(obj, *a)``."""

    __slots__ = ("_model", "_obj")

    def __init__(self, model: Any, obj: Any) -> None:
        self._model = model
        self._obj = obj

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self._model, name)
        obj = self._obj
        return lambda *a, **k: fn(obj, *a, **k)


class SymbolOpInterface(Interface):
    """Ops that define a symbol (``sym_name`` property, optional ``sym_visibility``)."""

    __slots__ = ()

    def symbol_name(self) -> str | None:
        a = self.properties.get("sym_name")  # type: ignore[attr-defined]
        return a.value if a is not None else None

    def symbol_visibility(self) -> str:
        v = self.get_attr("sym_visibility")  # type: ignore[attr-defined]
        return v.value if v is not None else "public"

    def is_public_symbol(self) -> bool:
        return self.symbol_visibility() == "public"


class CallOpInterface(Interface):
    """Ops that call a symbol or value."""

    __slots__ = ()

    def callee(self) -> Any:  # SymbolRefAttr or Value
        raise NotImplementedError

    def arg_operands(self) -> Sequence[Value]:
        raise NotImplementedError


class CallableOpInterface(Interface):
    """Ops that can be called (``func.func``)."""

    __slots__ = ()

    def callable_region(self) -> Any:
        raise NotImplementedError

    def argument_types(self) -> Sequence[Type]:
        raise NotImplementedError

    def result_types_(self) -> Sequence[Type]:
        raise NotImplementedError


class BranchOpInterface(Interface):
    """Terminators with successors: which operands flow into successor ``i``'s block arguments."""

    __slots__ = ()

    def successor_operands(self, index: int) -> Sequence[Value]:
        raise NotImplementedError

    def execute_branch(self, inputs: Sequence[Any]) -> tuple[int, Sequence[Any]]:
        """Where control goes at run time, given the runtime values of the op's operands (in
        operand order): the successor's index and the values its block arguments take (MLIR's
        ``getSuccessorForOperands``, for the interpreter)."""
        raise NotImplementedError


class RegionBranchOpInterface(Interface):
    """Ops whose regions are entered and left by structured control flow (``scf.if``)."""

    __slots__ = ()


class InferTypeOpInterface(Interface):
    """Ops that can compute their result types from operands and properties."""

    __slots__ = ()

    def infer_result_types(self) -> Sequence[Type]:
        raise NotImplementedError


class ExecutableOpInterface(Interface):
    """Ops that the reference interpreter can execute on runtime values."""

    __slots__ = ()

    def execute(self, inputs: Sequence[Any]) -> Sequence[Any]:
        raise NotImplementedError


class ConstantValueInterface(Interface):
    """Ops whose result is a known constant attribute (used by folding)."""

    __slots__ = ()

    def constant_value(self) -> Attribute:
        raise NotImplementedError


class MemoryEffectOpInterface(Interface):
    """Ops with memory effects described precisely: a list of ('read'|'write'|'alloc'|'free', value)."""

    __slots__ = ()

    def memory_effects(self) -> Sequence[tuple[str, Value | None]]:
        raise NotImplementedError


def is_pure(op: Operation) -> bool:
    """True when removing the op if unused cannot change behaviour."""
    return NoMemoryEffect in op.traits


def get_successor_block(op: Operation, i: int) -> Block:
    return op.successors[i]

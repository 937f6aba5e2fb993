"""What the ``top`` pattern families share: the pattern base class (each pattern declares its root
op), clean-up of the ops a rewrite leaves dead, and small matchers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from lamina.dialects.top.io import NoneOp
from lamina.ir.core import IRMapping, Operation, Value
from lamina.ir.types import none
from lamina.rewrite.greedy import is_trivially_dead
from lamina.rewrite.pattern import PatternRewriter, RewritePattern

from ..utils import FactoryCache


class TopPattern(RewritePattern):
    """A ``top`` canonicalization pattern. It declares the op class it is rooted at (``root``), or
    several (``roots``: the registry makes one instance per root with ``cls(root)``), and may
    create weights (one factory per module)."""

    #: The op classes of a pattern rooted at several ops (empty: the single ``root``).
    roots: ClassVar[tuple[type[Operation], ...]] = ()

    def __init__(self, root: type[Operation] | None = None) -> None:
        if root is not None:
            self.root = root  # type: ignore[misc]
        self.factories = FactoryCache()


def pattern_roots(cls: type[TopPattern]) -> tuple[type[Operation], ...]:
    """The op classes ``cls`` is rooted at."""
    return cls.roots or (cls.root,)


def prop(op: Operation, name: str) -> Any:
    """A ``top`` op's property as a Python value (its declared default when absent)."""
    return op.attr(name)  # type: ignore[attr-defined]


def erase_dead(rewriter: PatternRewriter, ops: Iterable[Operation | None]) -> None:
    """Erase ``ops`` (in order) and, transitively, the ``top`` producers they leave unused (those
    without effects: a model input stays)."""
    work = [o for o in ops if o is not None]
    seen: set[int] = set()
    while work:
        op = work.pop(0)
        if id(op) in seen or op.parent is None:
            continue
        if op.dialect_name != "top" or not is_trivially_dead(op):
            continue
        seen.add(id(op))
        producers = [v.defining_op() for v in op.operands]
        rewriter.erase_op(op)
        work.extend(p for p in producers if p is not None)


def none_value(rewriter: PatternRewriter, loc: Any) -> Value:
    """A new ``top.None`` (the absent optional operand) at the rewriter's insertion point."""
    return rewriter.create(NoneOp, output=none, loc=loc).results[0]


def clone_with(
    rewriter: PatternRewriter,
    op: Operation,
    operands: dict[int, Value],
    loc: Any,
    props: dict[str, Any] | None = None,
) -> Operation:
    """Insert a copy of ``op`` with some operands and properties replaced and location ``loc``."""
    new = op.clone(IRMapping())
    for i, v in operands.items():
        new.set_operand(i, v)
    if props:
        new.properties.update(props)
    new.location = loc
    return rewriter.insert(new)


def ordered(op: Operation) -> list[tuple[Value, Value]]:
    """Both orders of a commutative binary op's operands (none for a variadic Add/Mul/... with
    other than two operands, as an ONNX Sum of one or three tensors)."""
    if len(op.operands) != 2:
        return []
    a, b = op.operands[0], op.operands[1]
    return [(a, b), (b, a)]


def same_type_result(op: Operation, v: Value) -> bool:
    return op.results[0].type is v.type

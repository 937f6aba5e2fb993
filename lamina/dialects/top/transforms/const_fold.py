"""Constant folding of ``top`` ops (``top-const-fold``, and a canonicalization pattern).

An op whose operands are all ``top.Weight`` s (or ``none``) is evaluated once with its numpy
``execute`` and replaced by a new ``top.Weight`` holding the result as a ``dense_resource`` blob.
``top.Shape`` / ``top.Size`` of a statically shaped value are constants too, and so is a
``top.Gather`` of static dims out of a ``top.Shape`` of a partially dynamic value, which turns the
usual ``Shape -> Gather -> Concat -> Reshape`` chains into constant shapes.

Results larger than ``max_bytes`` that would also grow the model (more than twice the bytes of the
inputs: ``Expand``/``Tile``/``ConstantOfShape`` of large shapes) are left alone.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.top.tensor import GatherOp, ShapeOp, SizeOp
from lamina.execution.memory import static_nbytes
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.constants import constant_array
from lamina.ir.core import Block, Operation
from lamina.ir.naming import location_name
from lamina.ir.traits import NotALayer
from lamina.ir.types import DYNAMIC, NoneType, ShapedType
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.rewrite.greedy import is_trivially_dead
from lamina.rewrite.pattern import PatternRewriter, RewritePattern

from .utils import FactoryCache, WeightFactory, create_weight, producer, static_shape


def foldable(op_class: type[Operation]) -> bool:
    """Whether ops of this class may be constant-folded: not model plumbing (inputs, weights, the
    absent operand, terminators: :class:`NotALayer`), without regions (``If``/``Loop``/``Scan``),
    and with results that are a function of their operands (not a random op)."""
    op_def = getattr(op_class, "op_def", None)
    return (
        NotALayer not in op_class.traits
        and not (op_def is not None and op_def.regions)
        and getattr(op_class, "deterministic", True)
    )


DEFAULT_MAX_BYTES = 16 << 20


def _shape_constant(op: Operation) -> np.ndarray | None:
    """``top.Shape`` / ``top.Size`` of a statically shaped value."""
    s = static_shape(op.input)  # type: ignore[attr-defined]
    if s is None:
        return None
    return op.execute([np.empty(s, dtype=np.bool_)])[0]  # type: ignore[attr-defined]


def _gather_of_shape(op: GatherOp) -> np.ndarray | None:
    """``Gather(Shape(x), idx)`` (axis 0) where the gathered dims of ``x`` are static."""
    sh = producer(op.input, ShapeOp)
    if sh is None:
        return None
    if (op.attr("axis") or 0) not in (0, -1):
        return None
    idx = op.indices
    t = sh.input.type
    if not (isinstance(t, ShapedType) and t.has_rank):
        return None
    ind = constant_array(idx)
    if ind is None or ind.dtype.kind not in "iu":
        return None
    a, b = sh._range(len(t.shape))
    dims = np.asarray(t.shape[a:b], dtype=np.int64)
    n = len(dims)
    if n == 0 or np.any(ind < -n) or np.any(ind >= n):
        return None
    picked = dims[np.where(ind < 0, ind + n, ind)]
    if np.any(picked == DYNAMIC):
        return None
    return picked.astype(np.int64)


def evaluate(op: Operation, max_bytes: int = DEFAULT_MAX_BYTES) -> list[np.ndarray | None] | None:
    """The values of ``op``'s results if they are compile-time constants, else None."""
    name = op.name
    if not name.startswith("top.") or not foldable(type(op)) or op.regions or not op.results:
        return None
    if name in (ShapeOp.name, SizeOp.name):
        c = _shape_constant(op)
        return None if c is None else [c]
    if isinstance(op, GatherOp) and name == GatherOp.name:
        c = _gather_of_shape(op)
        if c is not None:
            return [c]
    if not op.operands:  # sources (random generators, ...): not folded
        return None
    ins: list[Any] = []
    in_bytes = 0
    for v in op.operands:
        if isinstance(v.type, NoneType):
            ins.append(None)
            continue
        a = constant_array(v)
        if a is None:
            return None
        ins.append(a)
        in_bytes += a.nbytes
    for r in op.results:  # too large to keep: decided from the result types, before allocating
        n = static_nbytes(r.type)
        if n is not None and n > max_bytes and n > 2 * in_bytes:
            return None
    try:
        with np.errstate(all="ignore"):
            outs = op.execute(ins)  # type: ignore[attr-defined]
    except Exception:  # an op that cannot run on these values is simply not folded
        return None
    if len(outs) != len(op.results):
        return None
    result: list[np.ndarray | None] = []
    for r, o in zip(op.results, outs):
        if isinstance(r.type, NoneType):
            result.append(None)
            continue
        if o is None:
            return None
        a = np.asarray(o)
        if a.nbytes > max_bytes and a.nbytes > 2 * in_bytes:
            return None
        t = r.type
        if isinstance(t, ShapedType):
            try:
                dt = element_type_to_dtype(t.element_type)
            except ValueError:
                return None
            if a.dtype != dt:
                a = a.astype(dt)
            if t.has_rank and (
                len(t.shape) != a.ndim or any(d != DYNAMIC and d != s for d, s in zip(t.shape, a.shape))
            ):
                return None  # the declared type disagrees with the value: leave it to the verifier
        result.append(a)
    return result


def fold_op(
    op: Operation, rewriter: PatternRewriter, factory: WeightFactory, max_bytes: int = DEFAULT_MAX_BYTES
) -> bool:
    """Replace ``op`` by ``top.Weight`` s of its values; False if it is not constant."""
    vals = evaluate(op, max_bytes)
    if vals is None:
        return False
    ip = rewriter.save_insertion_point()
    rewriter.set_insertion_point(op)
    base = location_name(op.location) or op.name.removeprefix("top.").lower()
    new = []
    for i, (r, a) in enumerate(zip(op.results, vals)):
        if a is None or not r.uses:
            new.append(r if a is not None else _none_value(rewriter, r, op))
            continue
        t = r.type
        et = t.element_type if isinstance(t, ShapedType) else None
        hint = base if len(op.results) == 1 else f"{base}_{i}"
        new.append(create_weight(rewriter, factory, a, hint, op.location, et))
    rewriter.restore_insertion_point(ip)
    for r, v in zip(op.results, new):
        if v is not r:
            rewriter.replace_all_uses_with(r, v)
    rewriter.erase_op(op)
    return True


def _none_value(rewriter: PatternRewriter, r: Any, op: Operation) -> Any:
    if not r.uses:
        return r
    from lamina.dialects.top.io import NoneOp

    return rewriter.create(NoneOp, output=r.type, loc=op.location).results[0]


class ConstantFoldPattern(RewritePattern):
    """Canonicalization: fold a ``top`` op whose operands are constants into a ``top.Weight``."""

    benefit = 10

    def __init__(self, root: str | None = None, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.root = root  # type: ignore[misc]
        self.max_bytes = max_bytes
        self.factories = FactoryCache()

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        return fold_op(op, rewriter, self.factories.for_op(op), self.max_bytes)


def _erase_dead_weights(block: Block, rewriter: PatternRewriter) -> int:
    """Erase the unused weights and ``none`` values of ``block`` (plumbing with no effects)."""
    n = 0
    for op in list(block.reversed()):
        if NotALayer in op.traits and is_trivially_dead(op):
            rewriter.erase_op(op)
            n += 1
    return n


def const_fold(
    root: Operation, factory: WeightFactory | None = None, max_bytes: int = DEFAULT_MAX_BYTES
) -> tuple[int, int]:
    """Fold every constant ``top`` op nested in ``root`` in one forward sweep (operands are
    defined before their users, so whole constant subgraphs fold); erase weights left unused.
    Returns (ops folded, weights erased)."""
    from .utils import root_op

    factory = factory or WeightFactory(root_op(root))
    rewriter = PatternRewriter()
    folded = 0
    erased = 0
    blocks: list[Block] = [b for region in root.regions for b in region.blocks]
    while blocks:
        block = blocks.pop()
        op = block.first_op
        while op is not None:
            nxt = op.next_op
            for region in op.regions:
                blocks.extend(region.blocks)
            if fold_op(op, rewriter, factory, max_bytes):
                folded += 1
            op = nxt
        erased += _erase_dead_weights(block, rewriter)
    return folded, erased


@register_pass
class TopConstFold(Pass):
    name = "top-const-fold"
    summary = "Evaluate top ops whose operands are all constant (and static shapes) into top.Weight"
    display_name = "ConstFoldPass"

    max_mb = Option(
        int,
        DEFAULT_MAX_BYTES >> 20,
        "Do not fold results above this many MiB that are also larger than twice their inputs",
    )

    num_folded = Statistic("num-folded", "Number of ops folded into weights")
    num_erased = Statistic("num-erased", "Number of unused weights erased")

    def run_on_operation(self, op: Operation) -> Any:
        from .utils import root_op

        mgr = self.context.resources if self.context is not None else None
        folded, erased = const_fold(op, WeightFactory(root_op(op), mgr), self.max_mb << 20)
        self.num_folded += folded
        self.num_erased += erased

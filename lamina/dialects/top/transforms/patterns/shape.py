"""Shape clean-ups: identities (Identity, inference Dropout, reshapes/Expand/Cast to the same type,
identity Permute) and merges (consecutive reshapes, consecutive Permutes, a computed Reshape shape
that is static)."""

from __future__ import annotations

import numpy as np

from lamina.dialects.top.base import Ints
from lamina.dialects.top.elementwise import CastOp, DropoutOp, IdentityOp
from lamina.dialects.top.tensor import (
    ExpandOp,
    FlattenOp,
    PermuteOp,
    ReshapeOp,
    SqueezeOp,
    UnsqueezeOp,
)
from lamina.ir.constants import constant_array
from lamina.ir.core import Operation
from lamina.ir.naming import location_name
from lamina.ir.types import RankedTensorType
from lamina.rewrite.pattern import PatternRewriter

from ..utils import create_weight, is_none_value, producer, static_shape
from .common import TopPattern, erase_dead, prop

#: The ops that only reshape their ``input``.
_RESHAPE_LIKE = (ReshapeOp, SqueezeOp, UnsqueezeOp, FlattenOp)
_RESHAPE_LIKE_NAMES = frozenset(c.name for c in _RESHAPE_LIKE)


class RemoveIdentityLike(TopPattern):
    """An op whose result is its input (same type): Identity, Reshape/Squeeze/Unsqueeze/Flatten/
    Expand to the same static shape, Cast to the same type, Permute by the identity order."""

    roots = (IdentityOp, ReshapeOp, SqueezeOp, UnsqueezeOp, FlattenOp, ExpandOp, CastOp, PermuteOp)
    benefit = 2

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        x = op.input  # type: ignore[attr-defined]
        if x.type is not op.results[0].type:
            return False
        name = op.name
        if name == PermuteOp.name:
            order = prop(op, "order")
            rank = len(x.type.shape) if isinstance(x.type, RankedTensorType) else None
            if (
                rank is None
                or (order is None and rank > 1)
                or (order is not None and list(order) != list(range(rank)))
            ):
                return False
        elif name != IdentityOp.name and name != CastOp.name and static_shape(x) is None:
            return False
        producers = [o.defining_op() for o in op.operands[1:]]
        rewriter.replace_op(op, [x])
        erase_dead(rewriter, producers)
        return True


class RemoveInferenceDropout(TopPattern):
    """``Dropout`` in inference mode (no or a false ``training_mode``) with its mask unused."""

    root = DropoutOp
    benefit = 2

    def match_and_rewrite(self, op: DropoutOp, rewriter: PatternRewriter) -> bool:  # type: ignore[override]
        x, training = op.input, op.training_mode
        if not is_none_value(training):
            t = constant_array(training)
            if t is None or bool(np.any(t)):
                return False
        if op.mask is not None and op.mask.uses:
            return False
        if x.type is not op.output.type:
            return False
        rewriter.replace_all_uses_with(op.output, x)
        rewriter.erase_op(op)
        return True


class MergeReshapes(TopPattern):
    """``reshape(reshape(x))`` -> ``Reshape(x, <static result shape>)`` for any two of Reshape,
    Squeeze, Unsqueeze and Flatten, when the outer result is statically shaped."""

    roots = _RESHAPE_LIKE
    benefit = 3

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        inner = op.input.defining_op()  # type: ignore[attr-defined]
        if inner is None or inner.name not in _RESHAPE_LIKE_NAMES:
            return False
        shape = static_shape(op.results[0])
        if shape is None:
            return False
        x = inner.input  # type: ignore[attr-defined]
        rewriter.set_insertion_point(op)
        shape_v = None
        if isinstance(op, ReshapeOp):
            cur = constant_array(op.shape)
            if cur is not None and tuple(int(d) for d in cur.reshape(-1)) == shape:
                shape_v = op.shape
        if shape_v is None:
            f = self.factories.for_op(op)
            shape_v = create_weight(
                rewriter,
                f,
                np.asarray(shape, dtype=np.int64),
                (location_name(op.location) or "reshape") + "_shape",
                op.location,
            )
        if x.type is op.results[0].type:
            rewriter.replace_op(op, [x])
        else:
            rewriter.replace_op_with_new_op(op, ReshapeOp, input=x, shape=shape_v, output=op.results[0].type)
        erase_dead(rewriter, [inner])
        return True


class ReshapeConstantShape(TopPattern):
    """A ``Reshape`` with a statically shaped result whose shape operand is computed (a
    ``Shape -> Gather -> Concat`` chain, ...) takes the shape as a constant; the chain dies."""

    root = ReshapeOp
    benefit = 2

    def match_and_rewrite(self, op: ReshapeOp, rewriter: PatternRewriter) -> bool:  # type: ignore[override]
        sv = op.shape
        if constant_array(sv) is not None:
            return False
        shape = static_shape(op.results[0])
        if shape is None:
            return False
        rewriter.set_insertion_point(op)
        f = self.factories.for_op(op)
        nv = create_weight(
            rewriter,
            f,
            np.asarray(shape, dtype=np.int64),
            (location_name(op.location) or "reshape") + "_shape",
            op.location,
        )
        old = sv.defining_op()
        rewriter.modify_op_in_place(op, lambda: op.set_operand(ReshapeOp.shape.index, nv))
        erase_dead(rewriter, [old])
        return True


class MergePermutes(TopPattern):
    """``Permute(Permute(x, p1), p2)`` -> ``Permute(x, p1[p2])`` (or ``x`` when that is the identity)."""

    root = PermuteOp
    benefit = 3

    def match_and_rewrite(self, op: PermuteOp, rewriter: PatternRewriter) -> bool:  # type: ignore[override]
        inner = producer(op.input, PermuteOp)
        if inner is None:
            return False
        x = inner.input
        if not isinstance(x.type, RankedTensorType):
            return False
        rank = len(x.type.shape)
        p1 = inner._perm(rank)
        p2 = op._perm(rank)
        order = [p1[i] for i in p2]
        if order == list(range(rank)) and x.type is op.results[0].type:
            rewriter.replace_op(op, [x])
        else:
            rewriter.replace_op_with_new_op(
                op, PermuteOp, input=x, order=Ints(order), output=op.results[0].type
            )
        erase_dead(rewriter, [inner])
        return True


PATTERNS = (RemoveIdentityLike, RemoveInferenceDropout, MergeReshapes, ReshapeConstantShape, MergePermutes)

"""Activations fused into their producer: Relu and Clip(0, n) / ReLU6 into Conv and MatMul as
``do_relu`` / ``relu_limit``; a Relu of a relu'd value dropped."""

from __future__ import annotations

from lamina.dialects.top.base import F
from lamina.dialects.top.elementwise import ClipOp, ReluOp
from lamina.dialects.top.nn import ConvOp, MatMulOp
from lamina.ir.attributes import BoolAttr
from lamina.ir.core import Operation, Value
from lamina.rewrite.pattern import PatternRewriter

from ..utils import is_none_value, is_scalar, scalar_of, single_use
from .common import TopPattern, prop

#: The ops with a fused activation (``do_relu`` / ``relu_limit``).
_RELU_PRODUCERS = (ConvOp.name, MatMulOp.name)


def _relu_fusable(v: Value) -> Operation | None:
    p = v.defining_op()
    if p is None or p.name not in _RELU_PRODUCERS or not single_use(v):
        return None
    if v.type is not p.results[0].type:
        return None
    return p


class FuseReluIntoProducer(TopPattern):
    """``Relu(Conv|MatMul(...))`` -> ``Conv|MatMul(...){do_relu = 1}``; ``Relu`` of a value that is
    already relu'd (``do_relu`` set, or another Relu) is dropped."""

    root = ReluOp
    benefit = 4

    def match_and_rewrite(self, relu: Operation, rewriter: PatternRewriter) -> bool:
        x = relu.input  # type: ignore[attr-defined]
        p = x.defining_op()
        if (
            p is not None
            and x.type is relu.results[0].type
            and (p.name == ReluOp.name or (p.name in _RELU_PRODUCERS and prop(p, "do_relu")))
        ):
            rewriter.replace_op(relu, [x])
            return True
        p = _relu_fusable(x)
        if p is None or x.type is not relu.results[0].type:
            return False
        loc = relu.location

        def update() -> None:
            p.properties["do_relu"] = BoolAttr(True)
            p.location = loc

        rewriter.modify_op_in_place(p, update)
        rewriter.replace_op(relu, [x])
        return True


class FuseClipIntoProducer(TopPattern):
    """``Clip(Conv|MatMul(...), 0, n)`` -> ``do_relu = 1, relu_limit = n`` (ReLU6 is n = 6);
    ``Clip(y, 0, none)`` is a Relu."""

    root = ClipOp
    benefit = 4

    def match_and_rewrite(self, clip: ClipOp, rewriter: PatternRewriter) -> bool:  # type: ignore[override]
        x, lo, hi = clip.input, clip.min, clip.max
        if is_none_value(lo) or not is_scalar(lo, 0.0):
            return False
        limit = -1.0
        if not is_none_value(hi):
            h = scalar_of(hi)
            if h is None or h <= 0:
                return False
            limit = h
        if x.type is not clip.results[0].type:
            return False
        p = _relu_fusable(x)
        if p is None:
            return False
        old_limit = prop(p, "relu_limit")
        if prop(p, "do_relu") and old_limit is not None and old_limit > 0:
            limit = min(limit, old_limit) if limit > 0 else old_limit
        loc = clip.location

        def update() -> None:
            p.properties["do_relu"] = BoolAttr(True)
            if limit > 0:
                p.properties["relu_limit"] = F(limit)
            p.location = loc

        rewriter.modify_op_in_place(p, update)
        rewriter.replace_op(clip, [x])
        return True


PATTERNS = (FuseReluIntoProducer, FuseClipIntoProducer)

"""Fusions into a convolution: BatchNorm, and a per-channel affine ``Mul``/``Add`` by constants
(PaddleOCR's "learnable affine blocks", a bias added apart), folded into the Conv that feeds it."""

from __future__ import annotations

import numpy as np

from lamina.dialects.top.elementwise import AddOp, MulOp
from lamina.dialects.top.nn import BatchNormOp, ConvOp
from lamina.ir.constants import constant_array
from lamina.ir.core import Operation, Value
from lamina.ir.naming import location_name
from lamina.rewrite.pattern import PatternRewriter

from ..utils import create_weight, is_none_value, producer, single_use
from .common import TopPattern, clone_with, erase_dead, prop, same_type_result


class FuseBatchNormIntoConv(TopPattern):
    """``BatchNorm(Conv(x, W, b))`` -> ``Conv(x, W * s, (b - mean) * s + beta)``, ``s = gamma / sqrt(var + eps)``
    (per output channel, computed in float64)."""

    root = BatchNormOp
    benefit = 5

    def match_and_rewrite(self, bn: BatchNormOp, rewriter: PatternRewriter) -> bool:  # type: ignore[override]
        conv = producer(bn.input, ConvOp)
        if conv is None or not single_use(conv.output) or prop(conv, "do_relu"):
            return False
        w = constant_array(conv.filter)
        b_val = conv.bias
        bias = None if is_none_value(b_val) else constant_array(b_val)
        if w is None or w.dtype.kind != "f" or (bias is None and not is_none_value(b_val)):
            return False
        params = [constant_array(v) for v in (bn.gamma, bn.beta, bn.mean, bn.variance)]
        m = w.shape[0]
        if any(p is None or p.size != m for p in params):
            return False
        gamma, beta, mean, var = (np.asarray(p, dtype=np.float64).reshape(m) for p in params)  # type: ignore[arg-type]
        scale = gamma / np.sqrt(var + prop(bn, "epsilon"))
        new_w = (w.astype(np.float64) * scale.reshape((m,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b0 = np.zeros(m) if bias is None else bias.astype(np.float64).reshape(m)
        new_b = ((b0 - mean) * scale + beta).astype(w.dtype)
        rewriter.set_insertion_point(conv)
        f = self.factories.for_op(bn)
        base = location_name(bn.location) or "bn"
        wv = create_weight(rewriter, f, new_w, base + "_filter", conv.filter.defining_op().location)  # type: ignore[union-attr]
        bv = create_weight(rewriter, f, new_b, base + "_bias", bn.location)
        new = clone_with(rewriter, conv, {ConvOp.filter.index: wv, ConvOp.bias.index: bv}, bn.location)
        if not same_type_result(bn, new.results[0]):
            new.results[0].type = bn.results[0].type
        rewriter.replace_op(bn, new)
        erase_dead(rewriter, [conv])
        return True


def _channel_constant(v: Value, channels: int, rank: int) -> np.ndarray | None:
    """A float constant broadcasting along the channel axis only (a scalar, ``[C]`` trailing-aligned
    only when the rank is 2, or ``[1, C, 1, ...]``) as a float64 ``[C]`` vector, else None."""
    a = constant_array(v)
    if a is None or a.dtype.kind != "f" or a.ndim > rank:
        return None
    if a.size == 1:
        return np.full(channels, float(a.reshape(-1)[0]))
    shape = (1,) * (rank - a.ndim) + tuple(a.shape)
    if shape[1] != channels or any(d != 1 for i, d in enumerate(shape) if i != 1):
        return None
    return a.astype(np.float64).reshape(channels)


class FuseAffineIntoConv(TopPattern):
    """``Conv(x, W, b) * a`` -> ``Conv(x, W * a, b * a)`` and ``Conv(x, W, b) + c`` -> ``Conv(x, W, b + c)``
    for constants ``a``, ``c`` that are scalars or per output channel (float64 arithmetic, stored
    in the weight's type). PP-OCRv4's backbone scales and shifts every convolution's output by
    learned scalars (``Mul``, ``Add``): left apart, each is a tensor of its own to quantize."""

    roots = (MulOp, AddOp)
    benefit = 5

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        if len(op.operands) != 2:
            return False
        for i in (0, 1):
            conv = producer(op.operands[i], ConvOp)
            if conv is None or not single_use(conv.output) or prop(conv, "do_relu"):
                continue
            w = constant_array(conv.filter)
            b_val = conv.bias
            bias = None if is_none_value(b_val) else constant_array(b_val)
            if w is None or w.dtype.kind != "f" or (bias is None and not is_none_value(b_val)):
                return False
            m = w.shape[0]
            rank = len(conv.output.type.shape)  # type: ignore[attr-defined]
            k = _channel_constant(op.operands[1 - i], m, rank)
            if k is None or not same_type_result(op, conv.output):
                return False
            b0 = np.zeros(m) if bias is None else bias.astype(np.float64).reshape(m)
            if isinstance(op, MulOp):
                new_w = (w.astype(np.float64) * k.reshape((m,) + (1,) * (w.ndim - 1))).astype(w.dtype)
                new_b = (b0 * k).astype(w.dtype)
            else:
                new_w, new_b = w, (b0 + k).astype(w.dtype)
            rewriter.set_insertion_point(conv)
            f = self.factories.for_op(op)
            base = location_name(op.location) or "affine"
            repl: dict[int, Value] = {
                ConvOp.bias.index: create_weight(rewriter, f, new_b, base + "_bias", op.location)
            }
            if new_w is not w:
                repl[ConvOp.filter.index] = create_weight(
                    rewriter,
                    f,
                    new_w,
                    base + "_filter",
                    conv.filter.defining_op().location,  # type: ignore[union-attr]
                )
            new = clone_with(rewriter, conv, repl, op.location)
            rewriter.replace_op(op, new)
            erase_dead(rewriter, [conv])
            return True
        return False


PATTERNS = (FuseBatchNormIntoConv, FuseAffineIntoConv)

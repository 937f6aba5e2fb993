"""Fusions into a convolution: BatchNorm folded into the Conv that feeds it."""

from __future__ import annotations

import numpy as np

from lamina.dialects.top.nn import BatchNormOp, ConvOp
from lamina.ir.constants import constant_array
from lamina.ir.naming import location_name
from lamina.rewrite.pattern import PatternRewriter

from ..utils import create_weight, derived_loc, is_none_value, producer, single_use
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
        # the bias is a tensor of its own: the BatchNorm's name is the fused Conv's (a weight holding
        # it first took it, and calibration skipped the Conv as a name given twice: PP-OCRv4's first
        # Conv ran in F32)
        bv = create_weight(rewriter, f, new_b, base + "_bias", derived_loc(bn.location, "bias"))
        new = clone_with(rewriter, conv, {ConvOp.filter.index: wv, ConvOp.bias.index: bv}, bn.location)
        if not same_type_result(bn, new.results[0]):
            new.results[0].type = bn.results[0].type
        rewriter.replace_op(bn, new)
        erase_dead(rewriter, [conv])
        return True


PATTERNS = (FuseBatchNormIntoConv,)

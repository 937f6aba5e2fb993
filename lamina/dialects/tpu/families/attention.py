"""The attention family: ``tpu.Attention`` (fused scaled dot-product attention), its INT8 form and
its lowering (the ``attention`` integer form of ``convert-top-to-tpu{int-forms=...}``).

INT8 (4-d ``(B, H, S, D)`` query, key and value of one head count, an optional additive mask — not
boolean —, no KV cache, causal masking, softcap, ``softmax_precision`` or extra results): integer
products, logits in units of ``2**-10`` (the scale folded into one requantization factor, the mask
into another), the exponentials of ``max - logit`` from two fixed 128-entry tables, the weighted sum
of ``v`` divided by the sum of the weights with one rounding (:func:`~..quantize.int_attention`).
The probabilities are never quantized to 8 bits. ``docs/tpu.md`` states the contract.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.top import extra as top_extra
from lamina.dialects.top.base import I64ArrayAttr
from lamina.ir.attributes import DenseArrayAttr
from lamina.ir.core import Operation, Value
from lamina.ir.opdef import prop
from lamina.ir.types import NoneType, RankedTensorType, i64
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import elem, scale
from ..quantize import ATTENTION_LOGIT_BITS, int_attention, quantize_multiplier, round_half_away
from .common import bounds, declare, is_quant, store, zp


def _attention_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """:func:`~..quantize.int_attention` with the op's factors (``qk_factor``, ``mask_factor``:
    ``[multiplier, total shift]``; ``out_factor``: ``[A]``)."""
    out_t = self.output.type
    lo, hi = bounds(out_t)
    ops = self.operands
    has_mask = is_quant(ops[3].type)
    zps = (zp(ops[0].type), zp(ops[1].type), zp(ops[2].type), zp(ops[3].type) if has_mask else 0)
    qk = tuple(int(a) for a in self.attr("qk_factor"))
    mf = tuple(int(a) for a in self.attr("mask_factor")) if has_mask else (0, 1)
    a = int(self.attr("out_factor")[0])
    zp_out = zp(out_t)

    def run(ins: Sequence[Any]) -> list[Any]:
        m = ins[3] if has_mask else None
        y = int_attention(ins[0], ins[1], ins[2], m, zps, qk, mf, a, zp_out, lo, hi)  # type: ignore[arg-type]
        return [store(y, out_t), None, None, None]

    return run


AttentionOp = declare(
    top_extra.AttentionOp,
    {
        "qk_factor": prop(I64ArrayAttr, optional=True),
        "mask_factor": prop(I64ArrayAttr, optional=True),
        "out_factor": prop(I64ArrayAttr, optional=True),
        "int_executor": _attention_int,
    },
    __name__,
)


def _factor(real: float) -> list[int]:
    """``[multiplier, 31 + rshift]`` of a positive real factor; ``[rha(real), 0]`` (no shift) from
    ``2**30`` (a padding mask of -1e9) up to ``2**54``; NoInt8 beyond."""
    if not 0.0 < real < 2.0**54:
        raise NoInt8
    if real >= 2.0**30:
        return [int(round_half_away(np.float64(real))), 0]
    m, rs = quantize_multiplier(real)
    return [m, 31 + rs]


class AttentionLowering(FamilyLowering):
    """top.Attention → its integer form when the ``attention`` form is enabled and the op fits."""

    roots = (top_extra.AttentionOp,)

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if "attention" not in self.s.int_forms:
            raise NoInt8
        a = op.attr  # type: ignore[attr-defined]
        if a("is_causal") or a("softcap") or a("softmax_precision") is not None:
            raise NoInt8
        if any(not isinstance(v.type, NoneType) for v in op.operands[4:]):
            raise NoInt8
        if any(r.uses for r in op.results[1:]):
            raise NoInt8
        shapes = [v.type for v in op.operands[:3]]
        if not all(
            isinstance(t, RankedTensorType) and t.has_static_shape and len(t.shape) == 4 for t in shapes
        ):
            raise NoInt8
        qs, ks, vs = (t.shape for t in shapes)  # type: ignore[attr-defined]
        if qs[1] != ks[1] or ks != vs or qs[3] != ks[3] or qs[3] > 2**15:
            raise NoInt8
        mask_t = op.operands[3].type
        has_mask = not isinstance(mask_t, NoneType)
        if has_mask:
            if not (isinstance(mask_t, RankedTensorType) and mask_t.has_static_shape and mask_t.shape):
                raise NoInt8
            full = (qs[0], qs[1], qs[2], ks[2])
            ms = (1,) * (4 - len(mask_t.shape)) + tuple(mask_t.shape)
            if len(ms) != 4 or any(d not in (1, f) for d, f in zip(ms, full)) or ms[3] != ks[2]:
                raise NoInt8
        xs = [self.qin(rw, o, v) for o, v in zip(op.operands[:3], ins[:3])]
        if any(elem(x.type).storage_width != 8 for x in xs):  # type: ignore[attr-defined]
            raise NoInt8
        mask = ins[3]
        extra: dict[str, Any] = {}
        if has_mask:
            mask = self.qin(rw, op.operands[3], ins[3])
            if elem(mask.type).storage_width != 8:  # type: ignore[attr-defined]
                raise NoInt8
            extra["mask_factor"] = DenseArrayAttr(i64, _factor(scale(mask.type) * 2.0**ATTENTION_LOGIT_BITS))
        out_t = self.qout(op.results[0])
        alpha = a("scale")
        alpha = 1.0 / math.sqrt(qs[3]) if alpha is None else float(alpha)
        if alpha <= 0:
            raise NoInt8
        real = alpha * scale(xs[0].type) * scale(xs[1].type) * 2.0**ATTENTION_LOGIT_BITS
        extra["qk_factor"] = DenseArrayAttr(i64, _factor(real))
        factor = int(round_half_away(np.float64(scale(xs[2].type) / scale(out_t) * 2.0**16)))
        if factor < 1 or factor * 255 * 2**15 * ks[2] >= 2**62:
            raise NoInt8
        extra["out_factor"] = DenseArrayAttr(i64, [factor])
        rtypes = [out_t, NoneType(), NoneType(), NoneType()]
        return self.emit(op, rw, [*xs, mask, *ins[4:]], rtypes, extra)

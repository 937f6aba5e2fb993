"""``tpu-canonicalize``: fold cast pairs and merge requantizations (run by this pass only:
the generic ``canonicalize`` leaves ``tpu`` ops alone).

* ``Cast(Cast(x : A -> B) -> A)`` → ``x`` when ``B`` is f32 and ``A`` is f16, bf16 or an 8-bit
  quantized type (the round trip is exact);
* ``Cast(Cast(x : Q1 -> float) -> Q2)`` with quantized ``Q1 != Q2`` → ``Requant(x -> Q2)``;
* ``Requant(Requant(x : Q1 -> Q2) -> Q3)`` → ``Requant(x : Q1 -> Q3)`` (one rounding instead of two),
  or ``x`` when ``Q3`` is ``Q1``.

``make_requant`` (the one way to build a requantization) lives with ``tpu.Requant`` in
:mod:`..families.plumbing` and is re-exported here.
"""

from __future__ import annotations

from typing import Any

from lamina.ir.core import Operation
from lamina.ir.types import FloatType, ShapedType, f32
from lamina.passes import Pass, Statistic, register_pass
from lamina.rewrite.greedy import apply_patterns_greedily
from lamina.rewrite.pattern import PatternRewriter, RewritePattern

from ..families.plumbing import CastOp, RequantOp, is_quant, make_requant


def _elem(t: Any) -> Any:
    return t.element_type if isinstance(t, ShapedType) else t


def _exact_roundtrip(a: Any, b: Any) -> bool:
    ea, eb = _elem(a), _elem(b)
    if eb is not f32:
        return False
    if isinstance(ea, FloatType):
        return ea.name in ("f16", "bf16")
    return is_quant(a) and getattr(ea, "storage_width", 0) == 8


class FoldCastPair(RewritePattern):
    root = CastOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        src = op.operands[0]
        d = src.defining_op()
        if not isinstance(d, CastOp):
            return False
        x = d.operands[0]
        out_t = op.results[0].type
        if x.type is out_t and _exact_roundtrip(x.type, src.type):
            rewriter.replace_op(op, [x])
            return True
        if (
            is_quant(x.type)
            and is_quant(out_t)
            and isinstance(_elem(src.type), FloatType)
            and _elem(src.type) is f32
        ):
            new = make_requant(rewriter, x, out_t, op.location)
            if new is None:
                return False
            rewriter.replace_op(op, [new])
            return True
        return False


class MergeRequants(RewritePattern):
    root = RequantOp

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        d = op.operands[0].defining_op()
        if not isinstance(d, RequantOp):
            return False
        x = d.operands[0]
        out_t = op.results[0].type
        if x.type is out_t:
            rewriter.replace_op(op, [x])
            return True
        new = make_requant(rewriter, x, out_t, op.location)
        if new is None:
            return False
        rewriter.replace_op(op, [new])
        return True


def canonicalize_tpu(op: Operation, stats: dict[str, int] | None = None) -> bool:
    pats = [FoldCastPair(), MergeRequants()]
    return apply_patterns_greedily(op, pats, max_iterations=10, stats=stats)


@register_pass
class TpuCanonicalize(Pass):
    name = "tpu-canonicalize"
    summary = "Fold tpu cast pairs and merge consecutive requantizations"
    display_name = "TpuCanonicalizePass"

    num_rewrites = Statistic("num-rewrites", "Number of pattern rewrites")

    def run_on_operation(self, op: Operation) -> Any:
        stats: dict[str, int] = {}
        canonicalize_tpu(op, stats)
        self.num_rewrites += stats.get("rewrites", 0)


__all__ = ["FoldCastPair", "MergeRequants", "TpuCanonicalize", "canonicalize_tpu", "make_requant"]

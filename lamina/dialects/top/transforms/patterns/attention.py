"""Recognition of decomposed scaled-dot-product attention."""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.top.base import F, I, Ints
from lamina.dialects.top.elementwise import AddOp, DivOp, MulOp, WhereOp
from lamina.dialects.top.extra import AttentionOp
from lamina.dialects.top.nn import MatMulOp, SoftmaxOp
from lamina.dialects.top.tensor import PermuteOp
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.core import Operation
from lamina.ir.naming import location_name
from lamina.ir.types import RankedTensorType, i1, none
from lamina.rewrite.pattern import PatternRewriter

from ..utils import create_weight, derived_loc, is_none_value, producer, scalar_of, single_use
from .common import TopPattern, erase_dead, none_value, ordered, prop


class FuseAttention(TopPattern):
    """``MatMul(Softmax(MatMul(Q, Permute(K)) / scale [+ mask]), V)`` -> ``top.Attention``
    (3-d inputs as one head, 4-d as (batch, heads, seq, dim)); ``* c`` for ``/ scale`` too.
    A boolean mask applied as ``Where(mask, scores, fill)`` becomes the additive mask
    ``Where(mask, 0, fill)`` (computed on the small mask tensor)."""

    root = MatMulOp
    benefit = 6

    def match_and_rewrite(self, out: MatMulOp, rewriter: PatternRewriter) -> bool:  # type: ignore[override]
        probs, v = out.input, out.right
        if not is_none_value(out.bias) or prop(out, "do_relu"):
            return False
        sm = producer(probs, SoftmaxOp)
        if sm is None or not single_use(probs) or prop(sm, "log"):
            return False
        s = sm.input
        st = s.type
        if not isinstance(st, RankedTensorType) or len(st.shape) not in (3, 4):
            return False
        rank = len(st.shape)
        if prop(sm, "axis") not in (-1, rank - 1) or not single_use(s):
            return False
        ops: list[Operation] = [sm]
        mask = None
        cur = s
        where = producer(cur, WhereOp)
        where_mask = None
        if where is not None:
            # Where(cond, scores, fill): an additive mask Where(cond, 0, fill), so that fully
            # masked rows stay uniform as in the original (fill is a large negative or -inf)
            cond, sc, fill = where.cond, where.tbrn, where.fbrn
            fv = scalar_of(fill)
            ct = cond.type
            if (
                fv is None
                or not single_use(sc)
                or sc.type is not cur.type
                or not isinstance(ct, RankedTensorType)
                or ct.element_type is not i1
                or len(ct.shape) > rank
                or (rank == 3 and len(ct.shape) > 2)
            ):
                return False
            where_mask = (cond, fill)
            ops.append(where)
            cur = sc
        add = producer(cur, AddOp) if where_mask is None else None
        if add is not None:
            for a, b in ordered(add):
                src = a.defining_op()
                if (
                    src is not None
                    and src.name in (DivOp.name, MulOp.name, MatMulOp.name)
                    and single_use(a)
                    and a.type is cur.type
                ):
                    mask, cur = b, a
                    break
            if mask is None:
                return False
            ops.append(add)
        scale = 1.0
        sop = cur.defining_op()
        if sop is not None and sop.name in (DivOp.name, MulOp.name) and len(sop.operands) == 2:
            if not single_use(cur):
                return False
            c = scalar_of(sop.operands[1])
            qk = sop.operands[0]
            if c is None and sop.name == MulOp.name:
                c, qk = scalar_of(sop.operands[0]), sop.operands[1]
            if c is None or c == 0:
                return False
            scale = 1.0 / c if sop.name == DivOp.name else c
            ops.append(sop)
            cur = qk
        mm = producer(cur, MatMulOp)
        if mm is None or not single_use(cur) or not is_none_value(mm.bias) or prop(mm, "do_relu"):
            return False
        ops.append(mm)
        q, kt = mm.input, mm.right
        for t in (q, kt, v, out.results[0]):
            if not isinstance(t.type, RankedTensorType) or len(t.type.shape) != rank:
                return False
        qs, ks, vs = q.type.shape, kt.type.shape, v.type.shape  # type: ignore[union-attr]
        if not (qs[:-2] == ks[:-2] == vs[:-2]):
            return False
        if mask is not None:
            mt = mask.type
            if not isinstance(mt, RankedTensorType) or (
                rank == 3 and len(mt.shape) > 2 and any(d != 1 for d in mt.shape[:-2])
            ):
                return False
            if rank == 3 and len(mt.shape) > 2:
                return False
        swap = [*range(rank - 2), rank - 1, rank - 2]
        kop = producer(kt, PermuteOp)
        rewriter.set_insertion_point(out)
        if kop is not None and kop._perm(rank) == swap and single_use(kt):
            key = kop.input
            ops.append(kop)
        else:
            kshape = list(ks)
            kshape[-1], kshape[-2] = kshape[-2], kshape[-1]

            key = rewriter.create(
                PermuteOp,
                input=kt,
                order=Ints(swap),
                output=RankedTensorType(kshape, kt.type.element_type),  # type: ignore[union-attr]
                # K itself, not the K^T named at kt: a name of its own.
                loc=derived_loc(
                    kt.defining_op().location if kt.defining_op() is not None else out.location, "key"
                ),
            ).results[0]
        nv = none_value(rewriter, out.location)
        if where_mask is not None:
            cond, fill = where_mask
            et = st.element_type
            f = self.factories.for_op(out)
            zero = create_weight(
                rewriter,
                f,
                np.zeros((), dtype=element_type_to_dtype(et)),
                (location_name(out.location) or "attention") + "_mask_zero",
                out.location,
                et,
            )
            mask = rewriter.create(
                WhereOp,
                cond=cond,
                tbrn=zero,
                fbrn=fill,
                output=RankedTensorType(cond.type.shape, et),  # type: ignore[union-attr]
                loc=derived_loc(where.location, "additive_mask"),  # type: ignore[union-attr]
            ).results[0]
        kw: dict[str, Any] = {"scale": F(scale)}
        if rank == 3:
            kw["q_num_heads"] = I(1)
            kw["kv_num_heads"] = I(1)
        new = rewriter.create(
            AttentionOp,
            query=q,
            key=key,
            value=v,
            attn_mask=mask if mask is not None else nv,
            past_key=nv,
            past_value=nv,
            nonpad_kv_seqlen=nv,
            output=out.results[0].type,
            present_key=none,
            present_value=none,
            qk_matmul_output=none,
            loc=out.location,
            **kw,
        )
        rewriter.replace_op(out, [new.results[0]])
        erase_dead(rewriter, ops)
        return True


PATTERNS = (FuseAttention,)

"""Recognition of a decomposed LayerNorm over trailing axes."""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.top.base import F, I
from lamina.dialects.top.elementwise import AddOp, DivOp, MulOp, PowOp, ReciprocalOp, SqrtOp, SubOp
from lamina.dialects.top.nn import LayerNormOp
from lamina.dialects.top.reduce import ReduceOp
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.constants import constant_array
from lamina.ir.core import Operation, Value
from lamina.ir.naming import location_name
from lamina.ir.types import RankedTensorType, none
from lamina.rewrite.pattern import PatternRewriter

from ..utils import create_weight, is_none_value, is_scalar, producer, scalar_of, single_use, static_shape
from .common import TopPattern, erase_dead, none_value, ordered, prop


def _reduce_mean_axes(v: Value) -> tuple[Operation, Value, tuple[int, ...]] | None:
    """``(op, input, axes)`` of a keepdims ``ReduceMean``."""
    r = producer(v, ReduceOp)
    if r is None or prop(r, "mode") != "ReduceMean" or not prop(r, "keepdims"):
        return None
    x = r.input
    if not isinstance(x.type, RankedTensorType):
        return None
    rank = len(x.type.shape)
    ax = constant_array(r.axes) if not is_none_value(r.axes) else None
    if ax is None:
        return None
    axes = tuple(sorted(int(a) + rank if a < 0 else int(a) for a in ax.reshape(-1)))
    return r, x, axes


def _layernorm_core(v: Value) -> dict[str, Any] | None:
    """``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`` over trailing axes."""
    n = v.defining_op()
    if n is None:
        return None
    ops: list[Operation] = [n]
    if n.name == DivOp.name:
        d, sd = n.lhs, n.rhs  # type: ignore[attr-defined]
    elif n.name == MulOp.name and len(n.operands) == 2:
        d, rec = n.operands
        rop = producer(rec, ReciprocalOp)
        if rop is None or not single_use(rec):
            return None
        sd = rop.input  # type: ignore[attr-defined]
        ops.append(rop)
    else:
        return None
    sq = producer(sd, SqrtOp)
    if sq is None or not single_use(sd):
        return None
    radicand = sq.input  # type: ignore[attr-defined]
    ve = producer(radicand, AddOp)
    if ve is None or not single_use(radicand):
        return None
    eps = None
    var = None
    for a, b in ordered(ve):
        e = scalar_of(b)
        if e is not None and constant_array(b) is not None and constant_array(b).size == 1:  # type: ignore[union-attr]
            eps, var = e, a
            break
    if var is None or eps is None:
        return None
    rv = _reduce_mean_axes(var)
    if rv is None or not single_use(var):
        return None
    p = rv[1]
    pop = p.defining_op()
    if pop is None or not single_use(p):
        return None
    if pop.name == PowOp.name and is_scalar(pop.rhs, 2.0) and pop.lhs is d:  # type: ignore[attr-defined]
        pass
    elif not (pop.name == MulOp.name and len(pop.operands) == 2 and all(o is d for o in pop.operands)):
        return None
    sub = producer(d, SubOp)
    if sub is None or {u.owner for u in d.uses} != {pop, n}:
        return None
    x, mean = sub.lhs, sub.rhs
    rm = _reduce_mean_axes(mean)
    if rm is None or rm[1] is not x or not single_use(mean) or rm[2] != rv[2]:
        return None
    t = x.type
    assert isinstance(t, RankedTensorType)
    rank = len(t.shape)
    axes = rv[2]
    if not axes or axes != tuple(range(axes[0], rank)):
        return None
    ops += [sq, ve, rv[0], pop, sub, rm[0]]
    return {"x": x, "axis": axes[0], "eps": eps, "ops": ops}


def _layernorm_match(op: Operation) -> dict[str, Any] | None:
    """The whole LayerNorm ending at ``op`` (core, then ``* gamma``, then ``+ beta``)."""
    beta = gamma = None
    cur = op
    extra: list[Operation] = []
    if cur.name == AddOp.name:
        for a, b in ordered(cur):
            if constant_array(b) is not None and a.defining_op() is not None and single_use(a):
                beta, nxt = b, a.defining_op()
                break
        else:
            return None
        extra.append(cur)
        cur = nxt  # type: ignore[assignment]
    if cur.name == MulOp.name:
        for a, b in ordered(cur):
            if constant_array(b) is not None and single_use(a):
                core = _layernorm_core(a)
                if core is not None:
                    gamma = b
                    extra.append(cur)
                    core["gamma"], core["beta"] = gamma, beta
                    core["ops"] = extra + core["ops"]
                    return core
    if beta is not None:
        return None  # + beta without * gamma: not handled
    core = _layernorm_core(cur.results[0])
    if core is None:
        return None
    core["gamma"], core["beta"] = None, None
    return core


class FuseLayerNorm(TopPattern):
    """``ReduceMean / Sub / Pow / ReduceMean / Add eps / Sqrt / Div [/ Mul gamma [/ Add beta]]``
    over trailing axes -> ``top.LayerNorm``."""

    roots = (AddOp, MulOp, DivOp)
    benefit = 6

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        m = _layernorm_match(op)
        if m is None:
            return False
        # A larger match ends at the single user (the affine Mul / Add): let that one fuse.
        r = op.results[0]
        if single_use(r):
            user = next(iter(r.uses)).owner
            if user.name in (MulOp.name, AddOp.name) and _layernorm_match(user) is not None:
                return False
        x = m["x"]
        if x.type is not op.results[0].type:
            return False
        rewriter.set_insertion_point(op)
        gamma = m["gamma"]
        if gamma is None:
            xs = static_shape(x)
            ns = xs[m["axis"] :] if xs is not None else (1,)
            try:
                dt = element_type_to_dtype(x.type.element_type)  # type: ignore[union-attr]
            except ValueError:
                return False
            if dt.kind != "f":
                return False
            f = self.factories.for_op(op)
            gamma = create_weight(
                rewriter,
                f,
                np.ones(ns, dtype=dt),
                (location_name(op.location) or "ln") + "_weight",
                op.location,
            )
        beta = m["beta"] if m["beta"] is not None else none_value(rewriter, op.location)
        new = rewriter.create(
            LayerNormOp,
            input=x,
            weight=gamma,
            bias=beta,
            output=x.type,
            mean=none,
            rstd=none,
            axis=I(m["axis"]),
            epsilon=F(m["eps"]),
            loc=op.location,
        )
        rewriter.replace_op(op, [new.results[0]])
        erase_dead(rewriter, m["ops"][1:] if m["ops"] and m["ops"][0] is op else m["ops"])
        return True


PATTERNS = (FuseLayerNorm,)

"""Recognition of decomposed activations: GELU (erf and tanh forms) and SiLU."""

from __future__ import annotations

import math
from typing import Any

from lamina.dialects.top.base import F, S
from lamina.dialects.top.elementwise import (
    AddOp,
    DivOp,
    ErfOp,
    GELUOp,
    MulOp,
    PowOp,
    SigmoidOp,
    SiLUOp,
    TanhOp,
)
from lamina.ir.core import Operation, Value
from lamina.rewrite.pattern import PatternRewriter

from ..utils import is_scalar, producer, scalar_of, single_use
from .common import TopPattern, erase_dead, ordered

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _scaled_input(v: Value, factor: float) -> Value | None:
    """``x`` if ``v`` is ``x * factor`` (Mul by the scalar, either side) or ``x / (1 / factor)``."""
    p = v.defining_op()
    if p is None or not single_use(v):
        return None
    if p.name == MulOp.name:
        for a, b in ordered(p):
            if is_scalar(b, factor, 1e-4):
                return a
    div = producer(v, DivOp)
    if div is not None and is_scalar(div.rhs, 1.0 / factor, 1e-4):
        return div.lhs
    return None


def _cube_of(v: Value) -> Value | None:
    """``x`` if ``v`` is ``Pow(x, 3)``, ``x * (x * x)`` or ``(x * x) * x``."""
    p = v.defining_op()
    if p is None or not single_use(v):
        return None
    pow_ = producer(v, PowOp)
    if pow_ is not None and is_scalar(pow_.rhs, 3.0):
        return pow_.lhs
    if p.name == MulOp.name:
        for a, b in ordered(p):
            q = producer(b, MulOp)
            if (
                q is not None
                and single_use(b)
                and len(q.inputs) == 2
                and q.inputs[0] is a
                and q.inputs[1] is a
            ):
                return a
    return None


def _gelu_branch(v: Value) -> tuple[Value, str, list[Operation]] | None:
    """``(x, approximate, ops)`` if ``v`` is ``1 + erf(x / sqrt 2)`` or
    ``1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))`` (single-use intermediates ``ops``)."""
    add = producer(v, AddOp)
    if add is None or not single_use(v):
        return None
    for g, one in ordered(add):
        if not is_scalar(one, 1.0):
            continue
        gop = g.defining_op()
        if gop is None or not single_use(g):
            continue
        if gop.name == ErfOp.name:
            scaled = gop.input  # type: ignore[attr-defined]
            x = _scaled_input(scaled, 1.0 / _SQRT2)
            if x is not None:
                return x, "none", [add, gop, scaled.defining_op()]
        elif gop.name == TanhOp.name:
            scaled = gop.input  # type: ignore[attr-defined]
            inner = _scaled_input(scaled, _SQRT_2_OVER_PI)
            s = producer(inner, AddOp) if inner is not None else None
            if s is None or not single_use(inner):  # type: ignore[arg-type]
                continue
            for x, m in ordered(s):
                cube = _scaled_input(m, 0.044715)
                if cube is not None and _cube_of(cube) is x:
                    ops = [add, gop, scaled.defining_op(), s, m.defining_op(), cube.defining_op()]
                    return x, "tanh", ops  # type: ignore[return-value]
    return None


class FuseGELU(TopPattern):
    """Decomposed GELU -> ``top.GELU``: ``x * 0.5 * (1 + erf(x / sqrt 2))`` (any association of the
    three factors; ``x * 0.7071`` for the division) and the tanh form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (``approximate = "tanh"``)."""

    root = MulOp
    benefit = 6

    def _match(self, out: Operation) -> tuple[Value, str, list[Operation]] | None:
        for p, q in ordered(out):
            # (x * branch) * 0.5
            if is_scalar(q, 0.5):
                m = producer(p, MulOp)
                if m is not None and single_use(p):
                    for u, w in ordered(m):
                        g = _gelu_branch(w)
                        if g is not None and g[0] is u:
                            return g[0], g[1], [m, *g[2]]
            g = _gelu_branch(q)
            if g is not None:
                # (x * 0.5) * branch
                h = producer(p, MulOp)
                if h is not None and single_use(p):
                    for u, c in ordered(h):
                        if u is g[0] and is_scalar(c, 0.5):
                            return g[0], g[1], [h, *g[2]]
            # x * (branch * 0.5)
            h = producer(q, MulOp)
            if h is not None and single_use(q):
                for w, c in ordered(h):
                    if is_scalar(c, 0.5):
                        g = _gelu_branch(w)
                        if g is not None and g[0] is p:
                            return g[0], g[1], [h, *g[2]]
        return None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        m = self._match(op)
        if m is None:
            return False
        x, approx, ops = m
        if x.type is not op.results[0].type:
            return False
        rewriter.set_insertion_point(op)
        kw: dict[str, Any] = {"approximate": S(approx)} if approx != "none" else {}
        new = rewriter.create(GELUOp, input=x, output=x.type, loc=op.location, **kw)
        rewriter.replace_op(op, new)
        erase_dead(rewriter, ops)
        return True


class FuseSiLU(TopPattern):
    """``x * sigmoid(x)`` -> ``top.SiLU``; ``x * sigmoid(a * x)`` -> ``top.SiLU{alpha = a}``."""

    root = MulOp
    benefit = 5

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        for x, s in ordered(op):
            sig = producer(s, SigmoidOp)
            if sig is None or not single_use(s):
                continue
            t = sig.input  # type: ignore[attr-defined]
            alpha = 1.0
            extra: Operation | None = None
            if t is not x:
                mul = producer(t, MulOp)
                if mul is None or not single_use(t):
                    continue
                for a, c in ordered(mul):
                    sc = scalar_of(c)
                    if a is x and sc is not None:
                        alpha, extra = sc, mul
                        break
                if extra is None:
                    continue
            if x.type is not op.results[0].type:
                return False
            rewriter.set_insertion_point(op)
            kw: dict[str, Any] = {} if alpha == 1.0 else {"alpha": F(alpha)}
            new = rewriter.create(SiLUOp, input=x, output=x.type, loc=op.location, **kw)
            rewriter.replace_op(op, new)
            erase_dead(rewriter, [sig, extra])
            return True
        return False


PATTERNS = (FuseGELU, FuseSiLU)

"""A vectorized F32 ``tpu.Softmax`` (``log = false``) along any axis for the CPU target.

The tensor is ``[outer, n, inner]`` around the axis (``n`` its size). Two schedules:

* **across** (``inner > 1``: the axis is not the last, e.g. a detector's box-distribution softmax
  ``(1, 16, 4, 8400)`` along 16): vectors run along the contiguous ``inner`` elements; a unit is
  one ``outer`` index and a chunk of up to :data:`CHUNK_VECTORS` vectors of ``inner`` (the last
  chunk masked), and three passes over the ``n`` rows of the chunk (a few KiB, in L1): the running
  maximum, ``e = exp(x - max)`` stored and summed, the stored values divided by the sum;
* **along** (``inner == 1``: the last axis): one row of ``n`` contiguous values per unit, vectors
  along the row (the tail masked), the maximum and the sum reduced across the lanes at the end.

As ``execute``: the maximum propagates NaN (``llvm.maximum``) and a non-finite maximum counts as 0;
``exp(d)`` is ``exp(d / 2)**2`` by the inline Cephes polynomial of :func:`.vmath_f32.vexp` (within
5 ulp over the whole float range: 0 for ``-inf``, ``+inf`` where ``np.exp`` overflows); ``e / sum``
divided (not multiplied by a reciprocal). Sums run in another order than numpy's pairwise one:
within 1e-6 relative, not bit for bit — so an INT8 model's exact path (``exact_for``) keeps
``generic.softmax``'s. Parts split the units."""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from .abi import Isa, KernelPlan, Template
from .gemm_f32 import Fn, elem_name, static_shape
from .vmath_f32 import htree, vexp

__all__ = ["CHUNK_VECTORS", "SoftmaxF32"]

#: the most vectors of ``inner`` one unit of the *across* schedule keeps (its max and sum registers)
CHUNK_VECTORS = 4


def _rows(op: Any) -> tuple[int, int, int] | None:
    xs = static_shape(op.operands[0].type)
    if xs is None or not xs:
        return None
    axis = int(op.attr("axis")) % len(xs)
    return math.prod(xs[:axis]), xs[axis], math.prod(xs[axis + 1 :])


class SoftmaxF32(Template):
    name = "softmax_f32"
    priority = 10
    exact = False  # its own sum order and exp

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Softmax" or len(op.operands) != 1 or bool(op.attr("log")):
            return False
        if elem_name(op.operands[0].type) != "f32" or elem_name(op.results[0].type) != "f32":
            return False
        r = _rows(op)
        return (
            r is not None
            and r[1] >= 1
            and static_shape(op.results[0].type) == static_shape(op.operands[0].type)
        )

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        outer, n, inner = _rows(op)  # type: ignore[misc]
        return KernelPlan(symbol, [("in", 0), ("out", 0)], bytes=8 * outer * n * inner)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        outer, n, inner = _rows(op)  # type: ignore[misc]
        fn = Fn(module, plan.symbol)
        ln = max(4, isa.vector_bytes // 4)
        if inner > 1:
            _across(fn, ln, outer, n, inner)
        else:
            _along(fn, ln, outer, n)
        fn.ret()


def _vmax(fn: Fn, a: ir.Value, b: ir.Value) -> ir.Value:
    vt = a.type
    return fn.b.call(fn.intrinsic(f"llvm.maximum.v{vt.count}f32", vt, [vt, vt]), [a, b])


def _finite_or_zero(fn: Fn, m: ir.Value) -> ir.Value:
    """``m`` where finite, else 0 (``execute``'s ``np.where(np.isfinite(m), m, 0)``)."""
    b = fn.b
    vt = m.type
    fabs = fn.intrinsic(f"llvm.fabs.v{vt.count}f32", vt, [vt])
    inf = fn.vconst(math.inf, vt.count)
    return b.select(b.fcmp_ordered("one", b.call(fabs, [m]), inf), m, fn.vzero(vt.count))


def _exp(fn: Fn, d: ir.Value) -> ir.Value:
    """``exp(d)`` as ``exp(d / 2)**2`` (:func:`.vmath_f32.vexp` clamps its argument to the range
    where ``expf`` is finite, ``exp(88.38)``; squared, the whole float range: +inf above
    ``ln(FLT_MAX)`` and for +inf, as ``np.exp`` overflows; subnormal results below -87.3 instead of
    the clamp's; 0 for -inf; NaN for NaN). Within 5 ulp."""
    b = fn.b
    h = vexp(b, fn.m, b.fmul(d, fn.vconst(0.5, d.type.count)), zero_below=True)
    return b.fmul(h, h)


def _across(fn: Fn, ln: int, outer: int, n: int, inner: int) -> None:
    b = fn.b
    x, y = fn.buf(0), fn.buf(1)
    width = min(CHUNK_VECTORS * ln, -(-inner // ln) * ln)  # elements of one chunk
    nchunks = -(-inner // width)
    tail = inner - (nchunks - 1) * width  # elements of the last chunk
    lo, hi = fn.share(outer * nchunks)

    def chunk(base: ir.Value, count: int) -> None:
        nv = -(-count // ln)
        masks = [fn.mask(ln, count, j * ln) for j in range(nv)]

        def ptr(p: ir.Value, i: Any, j: int) -> ir.Value:
            return fn.at(p, fn.add(fn.add(base, fn.mul(i, inner)), j * ln))

        def pmax(i: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            return [_vmax(fn, acc[j], fn.vload(ptr(x, i, j), ln, mask=masks[j])) for j in range(nv)]

        first = [fn.vload(ptr(x, 0, j), ln, mask=masks[j]) for j in range(nv)]
        mx = [_finite_or_zero(fn, m) for m in fn.loop(1, n, pmax, first)]

        def pexp(i: ir.Value, acc: list[ir.Value]) -> list[ir.Value]:
            out = []
            for j in range(nv):
                e = _exp(fn, b.fsub(fn.vload(ptr(x, i, j), ln, mask=masks[j]), mx[j]))
                fn.vstore(e, ptr(y, i, j), masks[j])
                out.append(b.fadd(acc[j], e))
            return out

        sums = fn.loop(0, n, pexp, [fn.vzero(ln)] * nv)

        def pdiv(i: ir.Value, _c: Any) -> None:
            for j in range(nv):
                p = ptr(y, i, j)
                fn.vstore(b.fdiv(fn.vload(p, ln, mask=masks[j]), sums[j]), p, masks[j])

        fn.loop(0, n, pdiv)

    def unit(u: ir.Value, _c: Any) -> None:
        o = fn.udiv(u, nchunks)
        c = b.urem(u, fn.c(nchunks))
        base = fn.add(fn.mul(o, n * inner), fn.mul(c, width))
        if tail == width:
            chunk(base, width)
        else:
            fn.when(
                b.icmp_unsigned("<", c, fn.c(nchunks - 1)),
                lambda: chunk(base, width),
                lambda: chunk(base, tail),
            )

    fn.loop(lo, hi, unit)


def _along(fn: Fn, ln: int, outer: int, n: int) -> None:
    b = fn.b
    x, y = fn.buf(0), fn.buf(1)
    full = n // ln
    rest = n - full * ln
    tmask = fn.mask(ln, rest) if rest else None
    lo, hi = fn.share(outer)
    ninf = fn.vconst(-math.inf, ln)

    def row(r: ir.Value, _c: Any) -> None:
        base = fn.mul(r, n)

        def p(q: ir.Value, v: Any) -> ir.Value:
            return fn.at(q, fn.add(base, fn.mul(v, ln)))

        def tail_load(q: ir.Value) -> ir.Value:
            return fn.vload(fn.at(q, fn.add(base, full * ln)), ln, mask=tmask)

        acc = fn.loop(0, full, lambda v, a: [_vmax(fn, a[0], fn.vload(p(x, v), ln))], [ninf])[0]
        if rest:
            assert tmask is not None
            acc = _vmax(fn, acc, b.select(tmask, tail_load(x), ninf))
        m = _finite_or_zero(fn, fn.splat(htree(fn.b, acc, lambda x, y: _vmax(fn, x, y)), ln))

        def pexp(v: ir.Value, a: list[ir.Value]) -> list[ir.Value]:
            e = _exp(fn, b.fsub(fn.vload(p(x, v), ln), m))
            fn.vstore(e, p(y, v))
            return [b.fadd(a[0], e)]

        s = fn.loop(0, full, pexp, [fn.vzero(ln)])[0]
        if rest:
            assert tmask is not None
            e = _exp(fn, b.fsub(tail_load(x), m))
            fn.vstore(e, fn.at(y, fn.add(base, full * ln)), tmask)
            s = b.fadd(s, b.select(tmask, e, fn.vzero(ln)))
        total = fn.splat(htree(fn.b, s, fn.b.fadd), ln)

        def pdiv(v: ir.Value, _c: Any) -> None:
            q = p(y, v)
            fn.vstore(b.fdiv(fn.vload(q, ln), total), q)

        fn.loop(0, full, pdiv)
        if rest:
            q = fn.at(y, fn.add(base, full * ln))
            fn.vstore(b.fdiv(fn.vload(q, ln, mask=tmask), total), q, tmask)

    fn.loop(lo, hi, row)


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [SoftmaxF32()]

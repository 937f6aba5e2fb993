"""The fast fused float attention for the CPU target: ``tpu.Attention`` computed in f32 (3-d
``(B, S, H*D)`` or 4-d ``(B, H, S, D)`` operands, an additive mask broadcast to ``(B, Hq, Sq, Skv)``,
causal masking, grouped heads, ``Sq != Skv``; no KV cache, padding lengths, softcap, softmax
precision or extra results — the generic template, :mod:`.generic_norm`, takes those). F32
operands, or F16 / BF16 ones (one type for query, key, value and result) where the CPU converts them
in vectors (F16: F16C and 32-byte vectors; BF16: AVX512-BF16): the query rows of a unit and the
values of a head are widened to f32 into scratch, the result rounded once to the 2-byte type.

One unit of work is a block of ``R`` query rows of one (batch, head) (``R`` = the GEMM tile's rows:
8 on AVX-512, 6 on AVX2, 4 on 16-byte vectors); the parts split the units, in order, so that a part
meets the units of one head one after the other. Per head the part's scratch holds the keys
transposed and scaled, ``Kt[t][j] = k[j][t] * scale`` (columns padded with zeros to whole vectors),
re-made only when the (batch, key head) changes. Per block:

1. the scores ``S = Q_rows . Kt`` with the register-tiled FMA micro-kernel of :mod:`.gemm_f32`
   (rows broadcast, key columns in vectors) into a ``R x Skv`` scratch block (L1-resident);
2. per row: the mask added and the causal positions set to ``-inf`` while taking the maximum, then
   ``e = exp(s - max)`` with an inline vectorized ``exp`` (Cephes' polynomial, no library call;
   exactly 0 below ``-87.3``, so ``-inf`` scores weigh nothing) and the sum of ``e``;
3. ``O_rows = (E . V) / sum`` — the micro-kernel again, value columns in vectors, each row scaled by
   the reciprocal of its sum as it is stored.

A row whose every score is ``-inf`` gives NaN, as ``execute``'s ``0/0``; a NaN score makes its row
NaN. The sums run in another order than ``execute``'s (scale applied to the key rather than the
square root of it to both, the division after the weighted sum): results within 1e-4 relative
(2-byte types: plus one unit in the last place; ``execute`` rounds each step to the 2-byte type,
the kernel only its result).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir

from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .gemm_f32 import ELEMS, F32, I64, Fn, Tile, elem_name, gemm_tile, static_shape, tile_for
from .generic_ir import broadcast_strides
from .generic_norm import Attention as _GenericAttention
from .vmath_f32 import htree
from .vmath_f32 import vexp as _vexp

__all__ = ["AttentionF32", "vexp", "hmax", "hsum"]


def vexp(fn: Fn, x: ir.Value) -> ir.Value:
    """``exp(x)`` of an f32 vector, 0 below ``-87.33654`` (:func:`.vmath_f32.vexp`)."""
    return _vexp(fn.b, fn.m, x, zero_below=True)


def _vmax(fn: Fn, a: ir.Value, c: ir.Value) -> ir.Value:
    """``c > a ? c : a`` per lane (a NaN score does not win the max; it makes its row NaN anyway)."""
    return fn.b.select(fn.b.fcmp_ordered(">", c, a), c, a)


def hmax(fn: Fn, v: ir.Value) -> ir.Value:
    return htree(fn.b, v, lambda x, y: _vmax(fn, x, y))


def hsum(fn: Fn, v: ir.Value) -> ir.Value:
    return htree(fn.b, v, fn.b.fadd)


class AttentionF32(Template):
    """``tpu.Attention`` with float query, key, value, mask and result (see the module docstring)."""

    name = "attention_f32"
    priority = 10
    exact = False

    def matches(self, op: Any, isa: Isa) -> bool:
        if not _GenericAttention().matches(op, isa):
            return False
        ops = [op.operands[i] for i in range(3)] + [op.results[0]]
        if isinstance(op.operands[3].type, RankedTensorType):
            ops.append(op.operands[3])
        names = {elem_name(v.type) for v in ops[:4]}
        if len(names) != 1 or None in names or (len(ops) > 4 and elem_name(ops[4].type) is None):
            return False
        for v in ops:  # 2-byte floats where the CPU converts them in vectors (else the generic's)
            e = elem_name(v.type)
            if e == "bf16" and not (isa.has("avx512bf16") and isa.vector_bytes >= 64):
                return False
            if e == "f16" and not (isa.has("f16c") and isa.vector_bytes >= 32):
                return False
        shapes = [static_shape(v.type) for v in ops]
        return all(sh is not None and 0 not in sh for sh in shapes)  # (empty tensors: the generic's)

    @staticmethod
    def _dims(op: Any) -> dict[str, Any]:
        return _GenericAttention()._dims(op)

    @staticmethod
    def _geometry(g: dict[str, Any], isa: Isa, narrow: bool) -> tuple[Tile, int, int]:
        """(the QK tile, padded key count, scratch floats per part: the transposed keys, the scores
        block, the rows' 1 / sum; for 2-byte operands also a block of query rows and the head's
        values widened to f32)."""
        tile = tile_for(isa)
        skvp = -(-g["skv"] // tile.lanes) * tile.lanes
        floats = g["d"] * skvp + tile.mr * skvp + tile.mr
        if narrow:
            floats += tile.mr * g["d"] + g["skv"] * g["dv"]
        floats = -(-floats // 16) * 16
        return tile, skvp, floats

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        g = self._dims(op)
        _, _, floats = self._geometry(g, isa, elem_name(op.results[0].type) != "f32")
        bufs: list[tuple[str, Any]] = [("in", 0), ("in", 1), ("in", 2)]
        if isinstance(op.operands[3].type, RankedTensorType):
            bufs.append(("in", 3))
        bufs += [("out", 0), ("scratch", None)]
        macs = g["b"] * g["hq"] * g["sq"] * g["skv"] * (g["d"] + g["dv"])
        nbytes = 4 * (
            g["b"] * g["hq"] * g["sq"] * (g["d"] + g["dv"]) + g["b"] * g["hk"] * g["skv"] * (g["d"] + g["dv"])
        )
        return KernelPlan(symbol, bufs, scratch_bytes=4 * floats, macs=macs, bytes=nbytes)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        g = self._dims(op)
        ety = ELEMS[elem_name(op.results[0].type) or "f32"][0]
        narrow = ety != F32
        has_m = isinstance(op.operands[3].type, RankedTensorType)
        mety = ELEMS[(elem_name(op.operands[3].type) if has_m else None) or "f32"][0]
        tile, skvp, floats = self._geometry(g, isa, narrow)
        ln, rb = tile.lanes, tile.mr
        d, dv, sq, skv = g["d"], g["dv"], g["sq"], g["skv"]
        has_mask = isinstance(op.operands[3].type, RankedTensorType)
        scale = op.attr("scale")
        scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
        causal = bool(op.attr("is_causal"))
        rep = g["hq"] // g["hk"]
        mst = (
            broadcast_strides(static_shape(op.operands[3].type), [g["b"], g["hq"], sq, skv])  # type: ignore[arg-type]
            if has_mask
            else None
        )

        fn = Fn(module, plan.symbol)
        b = fn.b
        qp, kp, vp = fn.buf(0), fn.buf(1), fn.buf(2)
        mp = fn.buf(3) if has_mask else None
        j0 = 4 if has_mask else 3
        out = fn.buf(j0)
        scr = fn.at(fn.buf(j0 + 1), fn.mul(fn.part, floats))
        kt = scr
        pbuf = fn.at(scr, d * skvp)
        cached = b.alloca(I64)
        b.store(ir.Constant(I64, -1), cached)
        invp = fn.at(pbuf, rb * skvp)  # the rows' 1 / sum
        qbuf = fn.at(invp, rb)  # (2-byte operands) the unit's query rows, then the head's values, in f32
        vbuf = fn.at(qbuf, rb * d)

        def inv_at(i: Any) -> ir.Value:
            return fn.at(invp, i)

        def off(st: list[int], bi: Any, h: Any, i: Any) -> Any:
            return fn.add(fn.add(fn.mul(bi, st[0]), fn.mul(h, st[1])), fn.mul(i, st[2]))

        nblk = -(-sq // rb)
        rem = sq - (nblk - 1) * rb
        lo, hi = fn.share(g["b"] * g["hq"] * nblk)
        neg_inf = fn.vconst(-math.inf, ln)
        iota = ir.Constant(ir.VectorType(I64, ln), list(range(ln)))
        nfull, tail = skv // ln, skv % ln
        tail_mask = fn.mask(ln, skv, nfull * ln) if tail else None
        nvv = -(-dv // ln)
        budget = tile.mr * tile.nv
        nvp = min(nvv, tile.nv + 1)

        def widen_row(src: ir.Value, dst: ir.Value, n: int) -> None:
            """dst[0:n] (f32) = src[0:n] (the 2-byte operand type) widened."""

            def el(e: ir.Value, _c: Any) -> None:
                b.store(fn.widen(fn.load(fn.at(src, e, ety), ety)), fn.at(dst, e), align=4)

            fn.loop(0, n, el)

        def transpose(bi: Any, hk: Any) -> None:
            """Kt[t][j] = k[bi, hk, j, t] * scale; columns skv..skvp zero."""
            kbase = fn.at(kp, off(g["k"], bi, hk, 0), ety)
            sc = ir.Constant(F32, float(np.float32(scale)))

            def row(j: ir.Value, _c: Any) -> None:
                krow = fn.at(kbase, fn.mul(j, g["k"][2]), ety)

                def el(t: ir.Value, _c2: Any) -> None:
                    x = b.fmul(fn.widen(fn.load(fn.at(krow, t, ety), ety)), sc)
                    b.store(x, fn.at(kt, fn.add(fn.mul(t, skvp), j)), align=4)

                fn.loop(0, d, el)

            fn.loop(0, skv, row)
            if skvp > skv:

                def pad(t: ir.Value, _c: Any) -> None:
                    for j in range(skv, skvp):
                        b.store(ir.Constant(F32, 0.0), fn.at(kt, fn.add(fn.mul(t, skvp), j)), align=4)

                fn.loop(0, d, pad)
            if narrow:
                vb = fn.at(vp, off(g["v"], bi, hk, 0), ety)

                fn.loop(
                    0,
                    skv,
                    lambda j, _c: widen_row(
                        fn.at(vb, fn.mul(j, g["v"][2]), ety), fn.at(vbuf, fn.mul(j, dv)), dv
                    ),
                )

        def softmax_row(i: ir.Value, r0: Any, bi: Any, h: Any) -> None:
            prow = fn.at(pbuf, fn.mul(i, skvp))
            qi = fn.add(r0, i)
            mrow = fn.at(mp, off(mst, bi, h, qi), mety) if mp is not None and mst is not None else None
            qsplat = fn.splat(qi, ln) if causal else None

            def score(c: Any, mask: ir.Value | None) -> ir.Value:
                s = fn.vload(fn.at(prow, fn.mul(c, ln)), ln)
                if mrow is not None:
                    s = b.fadd(s, fn.widen(fn.vload(fn.at(mrow, fn.mul(c, ln), mety), ln, mety, mask=mask)))
                if qsplat is not None:
                    cols = b.add(iota, fn.splat(fn.c(fn.mul(c, ln)), ln))
                    s = b.select(b.icmp_signed(">", cols, qsplat), neg_inf, s)
                if mask is not None:
                    s = b.select(mask, s, neg_inf)
                fn.vstore(s, fn.at(prow, fn.mul(c, ln)))
                return s

            mx = fn.loop(0, nfull, lambda c, acc: [_vmax(fn, acc[0], score(c, None))], [neg_inf])[0]
            if tail:
                mx = _vmax(fn, mx, score(nfull, tail_mask))
            m = hmax(fn, mx)
            finite = b.fcmp_ordered(
                "one", b.call(fn.intrinsic("llvm.fabs.f32", F32, [F32]), [m]), ir.Constant(F32, math.inf)
            )
            m = b.select(finite, m, ir.Constant(F32, 0.0))
            ms = fn.splat(m, ln)

            def ex(c: Any, acc: list[ir.Value]) -> list[ir.Value]:
                p = fn.at(prow, fn.mul(c, ln))
                e = vexp(fn, b.fsub(fn.vload(p, ln), ms))
                fn.vstore(e, p)
                return [b.fadd(acc[0], e)]

            total = fn.loop(0, nfull + (1 if tail else 0), ex, [fn.vzero(ln)])[0]
            s = hsum(fn, total)
            b.store(b.fdiv(ir.Constant(F32, 1.0), s), inv_at(i), align=4)

        def block(bi: Any, h: Any, hk: Any, r0: Any, rows: int) -> None:
            # 1. scores
            qbase, q_rs = fn.at(qp, off(g["q"], bi, h, r0), ety), g["q"][2]
            if narrow:  # the rows widened to f32
                for i in range(rows):
                    widen_row(fn.at(qbase, i * q_rs, ety), fn.at(qbuf, i * d), d)
                qbase, q_rs = qbuf, d
            nb = tile.nb
            npan, ptail = skvp // nb, (skvp % nb) // ln

            def panel(c0: Any, t: Tile) -> None:
                accs = gemm_tile(fn, t, rows, d, qbase, q_rs, 1, fn.at(kt, c0), skvp)
                for i in range(rows):
                    for j in range(t.nv):
                        fn.vstore(accs[i * t.nv + j], fn.at(pbuf, fn.add(fn.add(i * skvp, c0), j * ln)))

            fn.loop(0, npan, lambda p, _c: panel(fn.mul(p, nb), tile))
            if ptail:
                panel(npan * nb, Tile(ln, tile.mr, ptail))
            # 2. softmax rows
            fn.loop(0, rows, lambda i, _c: softmax_row(i, r0, bi, h))
            # 3. E . V / sum
            vbase, v_rs = (vbuf, dv) if narrow else (fn.at(vp, off(g["v"], bi, hk, 0)), g["v"][2])
            obase = fn.at(out, off(g["o"], bi, h, r0), ety)
            for e0 in range(0, nvv, nvp):
                nv_here = min(nvp, nvv - e0)
                t = Tile(ln, tile.mr, nv_here)
                mr_pv = max(1, min(rows, budget // nv_here))
                masks = [fn.mask(ln, dv, (e0 + j) * ln) for j in range(nv_here)]
                for i0 in range(0, rows, mr_pv):
                    mr = min(mr_pv, rows - i0)
                    accs = gemm_tile(
                        fn,
                        t,
                        mr,
                        skv,
                        fn.at(pbuf, i0 * skvp),
                        skvp,
                        1,
                        fn.at(vbase, e0 * ln),
                        v_rs,
                        masks,
                    )
                    for i in range(mr):
                        sv = fn.splat(fn.load(inv_at(i0 + i)), ln)
                        orow = fn.at(obase, fn.mul(i0 + i, g["o"][2]), ety)
                        for j in range(nv_here):
                            y = fn.narrow(b.fmul(accs[i * nv_here + j], sv), ety)
                            fn.vstore(y, fn.at(orow, (e0 + j) * ln, ety), masks[j])

        def unit(u: ir.Value, _c: Any) -> None:
            bh = fn.udiv(u, nblk)
            blk = b.urem(u, fn.c(nblk))
            h = b.urem(bh, fn.c(g["hq"]))
            bi = fn.udiv(bh, g["hq"])
            hk = fn.udiv(h, rep)
            key = fn.add(fn.mul(bi, g["hk"]), hk)

            def fresh() -> None:
                transpose(bi, hk)
                b.store(key, cached, align=8)

            fn.when(b.icmp_signed("!=", b.load(cached, align=8), key), fresh)
            r0 = fn.mul(blk, rb)
            if rem == rb:
                block(bi, h, hk, r0, rb)
            else:
                fn.when(
                    b.icmp_unsigned("==", blk, fn.c(nblk - 1)),
                    lambda: block(bi, h, hk, (nblk - 1) * rb, rem),
                    lambda: block(bi, h, hk, r0, rb),
                )

        fn.loop(lo, hi, unit)
        fn.ret()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [AttentionF32()]

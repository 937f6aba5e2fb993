"""Vectorized pooling templates of the CPU target: ``tpu.MaxPool`` (F32; INT8 on the storage
integers) and ``tpu.AvgPool`` (F32; INT8 with the contract's requantization, bit-exact), 1-d (NCW)
and 2-d (NCHW), any kernel size, dilation, explicit padding and ceil mode the op has, W stride 1
or 2 (other strides: ``generic.pool``).

F32 reads the input rows directly: every tap of a register of 16 outputs is one vector load at a
constant offset (W stride 2: the even or odd lanes of two loads), masked where the window leaves
the row (those lanes read the padding value), window rows outside the image left out (border
output rows emitted apart). INT8: per channel plane the part's scratch holds the padded plane in
the compute type (int8/uint8 for a max pool; int32 ``q - zp`` for an average), its borders
written once with the padding value (the storage minimum for max, 0 for average) and its interior
overwritten per plane; with W stride 2 it holds the padded rows' even and odd columns as two
planes, so that every tap of every output row is one contiguous vector load (16 int32 or 64 bytes
with AVX-512). Each output row is ``kh * kw`` vector max / add over those loads, then the epilogue:
F32 average divides by the window's count (a compile-time table when padding makes it vary, as
``execute`` counts: explicit padding with ``count_include_pad``, never the ceil mode's extra); INT8
average requantizes the int32 sums (wrapping, as ``wrap_int32`` of the int64 sums) with
:meth:`.gemm_int8.Gen.requant`, the INT8 templates' epilogue. Parts split the (image, channel)
planes. F32 MaxPool compares and selects (a NaN in the window propagates, as numpy's ``max``; the
sign of a zero maximum may differ from ``execute``'s, so an INT8 model's exact path leaves float
pools to ``generic.pool``); F32 AvgPool sums in its own order (within rounding). Global pools (one
output per plane) are left to ``generic.pool``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.tpu.quantize import MAX_SHIFT, qparams
from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .gemm_int8 import I8, I32, Gen, QuantInfo, vt

__all__ = ["GlobalMeanF32", "PoolF32Int8", "TEMPLATES"]

F32 = ir.FloatType()


def _q8(t: Any) -> Any:
    e = getattr(t, "element_type", None)
    if isinstance(e, UniformQuantizedType) and e.storage_width == 8:
        return e
    return None


def _static(t: Any) -> bool:
    return isinstance(t, RankedTensorType) and all(isinstance(d, int) and d > 0 for d in t.shape)


@dataclass
class PoolGeo:
    """One pool's geometry as 2-d (a 1-d one has height 1), the kind and the compute type."""

    n: int
    c: int
    h: int
    w: int
    oh: int
    ow: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    is_max: bool
    kind: str  # "f32", "i8" (signed storage), "u8"
    lanes: int  # compute lanes per vector
    ph: int = 0  # padded rows held
    pwp: int = 0  # width of one phase plane

    @property
    def ety(self) -> ir.Type:
        """The compute element type."""
        if self.kind == "f32":
            return F32
        return I8 if self.is_max else I32

    @property
    def esize(self) -> int:
        return 4 if self.kind == "f32" or not self.is_max else 1

    @property
    def nvec(self) -> int:
        return -(-self.ow // self.lanes)

    @property
    def plane_elems(self) -> int:
        return self.ph * self.pwp * self.sw


def pool_geo(op: Any, isa: Isa) -> PoolGeo | None:
    """The geometry of a pool this module runs, or None."""
    if op.name not in ("tpu.MaxPool", "tpu.AvgPool"):
        return None
    x_t, r_t = op.operands[0].type, op.results[0].type
    if (
        not (_static(x_t) and _static(r_t))
        or len(x_t.shape) not in (3, 4)
        or len(r_t.shape) != len(x_t.shape)
    ):
        return None
    is_max = op.name == "tpu.MaxPool"
    if is_max and len(op.results) > 1 and isinstance(op.results[1].type, RankedTensorType):
        return None  # indices
    qx, qr = _q8(x_t), _q8(r_t)
    if str(x_t.element_type) == "f32" and str(r_t.element_type) == "f32":
        kind = "f32"
    elif qx is not None and qr is not None:
        kind = "i8" if qx.signed else "u8"
        if is_max and (qr.signed != qx.signed):
            return None
    else:
        return None
    xs = list(x_t.shape)
    try:
        k, s, d, p, eo = op._geometry(xs)
    except Exception:
        return None
    nd = len(k)
    if nd != len(xs) - 2 or list(r_t.shape[2:]) != list(eo[nd:]) or list(r_t.shape[:2]) != xs[:2]:
        return None
    if nd == 1:
        k, s, d = [1, k[0]], [1, s[0]], [1, d[0]]
        p = [0, p[0], 0, p[1]]
        xs = [xs[0], xs[1], 1, xs[2]]
        ys = [r_t.shape[0], r_t.shape[1], 1, r_t.shape[2]]
    else:
        ys = list(r_t.shape)
    if s[1] not in (1, 2) or min(p) < 0:
        return None
    if ys[2] * ys[3] == 1:
        return None  # a global pool: one output per plane, generic.pool's row loop is as fast
    if kind != "f32" and not is_max:
        # the contract: explicit padding counted, no ceil mode, auto_pad or dilation
        if op.attr("ceil_mode") or op.attr("auto_pad") not in (None, "NOTSET") or d != [1, 1]:
            return None
        m, r = op.attr("multiplier"), op.attr("rshift")
        if m is None or r is None or np.size(m) != 1 or np.size(r) != 1:
            return None
        m0, s0 = int(np.ravel(m)[0]), 31 + int(np.ravel(r)[0])
        if not (0 <= m0 < 2**31 and 1 <= s0 <= MAX_SHIFT):
            return None
        if isinstance(qx, UniformQuantizedPerAxisType) or isinstance(qr, UniformQuantizedPerAxisType):
            return None
    vb = isa.vector_bytes
    esize = 4 if kind == "f32" or not is_max else 1
    lanes = max(4, vb // esize)
    g = PoolGeo(
        xs[0],
        xs[1],
        xs[2],
        xs[3],
        ys[2],
        ys[3],
        k[0],
        k[1],
        s[0],
        s[1],
        d[0],
        d[1],
        p[0],
        p[1],
        is_max,
        kind,
        lanes,
    )
    g.ph = (g.oh - 1) * g.sh + (g.kh - 1) * g.dh + 1
    reach = g.nvec * lanes + ((g.kw - 1) * g.dw) // g.sw
    g.pwp = max(-(-(g.w + g.pl) // g.sw), reach)
    g.pwp += (-g.pwp) % lanes
    return g


def _counts(op: Any, g: PoolGeo) -> np.ndarray:
    """The F32 average's divisor per output position, as ``execute`` counts it (explicit padding
    with ``count_include_pad``, never the ceil mode's extra rows/columns)."""
    from lamina.execution.kernels.windows import windows

    xs = list(op.operands[0].type.shape)
    k, s, d, p, eo = op._geometry(xs)
    nd = len(k)
    mask = np.ones((1, 1, *xs[2:]), np.float32)
    mw = [(0, 0), (0, 0)] + [(p[i], p[i + nd]) for i in range(nd)]
    mask = np.pad(mask, mw, constant_values=1.0 if op.attr("count_include_pad") else 0.0)
    mask = np.pad(mask, [(0, 0), (0, 0)] + [(0, eo[i]) for i in range(nd)])
    osz = eo[nd:]
    idx = (slice(None), slice(None), *[slice(0, o) for o in osz])
    win = windows(mask, k, s, d)[idx]
    cnt = win.sum(axis=tuple(range(2 + nd, 2 + 2 * nd)))
    return np.maximum(cnt, 1).astype(np.float32).reshape(g.oh, g.ow)


class PoolF32Int8(Template):
    """Max / average pooling in F32 and INT8, vectorized along W over a padded copy of each plane
    (see the module docstring)."""

    name = "pool"
    priority = 10

    def exact_for(self, op: Any) -> bool:
        """INT8 kernels are bit for bit the contract; F32 max differs from ``execute`` in the sign
        of a zero maximum at most, F32 average sums in another order."""
        g = pool_geo(op, Isa(64))
        return g is not None and g.kind != "f32"

    def matches(self, op: Any, isa: Isa) -> bool:
        return pool_geo(op, isa) is not None

    def _const_count(self, op: Any, g: PoolGeo) -> float | None:
        cnt = _counts(op, g)
        return float(cnt.flat[0]) if np.all(cnt == cnt.flat[0]) else None

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        g = pool_geo(op, isa)
        assert g is not None
        bufs: list[tuple[str, Any]] = [("in", 0)]
        weights: dict[str, np.ndarray] = {}
        if g.kind == "f32" and not g.is_max and self._const_count(op, g) is None:
            cnt = _counts(op, g)
            tab = np.ones((g.oh, g.nvec * g.lanes), np.float32)
            tab[:, : g.ow] = cnt
            weights["cnt"] = tab.reshape(-1)
            bufs.append(("weight", "cnt"))
        bufs.append(("out", 0))
        scratch = 0
        if g.kind != "f32":  # F32 reads the input directly (_emit_direct)
            bufs.append(("scratch", None))
            scratch = g.plane_elems * g.esize + 64
            scratch += (-scratch) % 64
        in_b = np.dtype(np.float32 if g.kind == "f32" else np.int8).itemsize
        return KernelPlan(
            symbol,
            bufs,
            weights,
            scratch,
            macs=0,
            bytes=in_b * (g.n * g.c * (g.h * g.w + g.oh * g.ow)),
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        g = pool_geo(op, isa)
        assert g is not None
        if g.kind == "f32":
            self._emit_direct(module, plan, op, g, isa)
            return
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        L = g.lanes  # noqa: N806
        ety = g.ety
        sty = F32 if g.kind == "f32" else I8  # storage element

        def buf(key: tuple[str, Any]) -> Any:
            return gen.bufs[plan.buffers.index(key)] if key in plan.buffers else None

        x, out, cnt_tab = buf(("in", 0)), buf(("out", 0)), buf(("weight", "cnt"))
        plane = b.gep(buf(("scratch", None)), [b.mul(gen.part, gen.c(plan.scratch_bytes))])
        ssz = 4 if sty == F32 else 1  # storage bytes
        es = g.esize
        signed = g.kind == "i8"

        # -- the padding value over the whole plane(s), once: interiors are overwritten per plane
        if g.is_max:
            if g.kind == "f32":
                pad = ir.Constant(vt(F32, L), [float("-inf")] * L)
            else:
                pad = gen.cv([-128 if signed else 0] * L, I8)
        elif g.kind == "f32":
            pad = ir.Constant(vt(F32, L), [0.0] * L)
        else:
            pad = gen.cv([0] * L, I32)
        total_vecs = g.plane_elems // L

        def pad_vec(i: Any, _: list[Any]) -> list[Any]:
            gen.store(pad, plane, b.mul(i, gen.c(L * es)))
            return []

        gen.loop(0, total_vecs, pad_vec)

        zp_in = 0
        q: QuantInfo | None = None
        m_v = s_v = cf_v = None
        count_v = None
        if g.kind != "f32" and not g.is_max:
            from lamina.dialects.tpu.families.common import bounds, zp

            zp_in = int(qparams(_q8(op.operands[0].type))[1])
            r_t = op.results[0].type
            lo, hi = bounds(r_t)
            m0 = int(np.ravel(op.attr("multiplier"))[0])
            s0 = 31 + int(np.ravel(op.attr("rshift"))[0])
            q = QuantInfo(signed, zp_in, int(lo), int(hi), int(zp(r_t)), np.array([m0]), np.array([s0]),
                          np.zeros(1, np.int8), None, bool(_q8(r_t).signed))  # fmt: skip
            m_v, s_v, cf_v = gen.cv([m0] * L), gen.cv([s0] * L), gen.cv([0] * L)
        elif g.kind == "f32" and not g.is_max and cnt_tab is None:
            c0 = self._const_count(op, g)
            assert c0 is not None
            count_v = ir.Constant(vt(F32, L), [float(c0)] * L)

        in_plane, out_plane = g.h * g.w, g.oh * g.ow
        rows_in = min(g.h, g.ph - g.pt)  # input rows some window reads

        def masked_store(v: Any, base: Any, off: Any, count: int) -> None:
            """Store the first ``count`` lanes of ``v`` at ``base + off`` bytes."""
            n = v.type.count
            if count == 1:  # a byte store (LLVM 22 stores a one-lane masked i8 as 4 bytes)
                b.store(b.extract_element(v, gen.c(0, I32)), gen.ptr(base, off, v.type.element))
                return
            mask = ir.Constant(vt(ir.IntType(1), n), [1 if i < count else 0 for i in range(n)])
            e = v.type.element
            suffix = "f32" if e == F32 else f"i{e.width}"
            f = gen.intrinsic(
                f"llvm.masked.store.v{n}{suffix}.p0",
                ir.VoidType(),
                [v.type, v.type.as_pointer(), I32, mask.type],
            )
            b.call(f, [v, gen.ptr(base, off, v.type), gen.c(1, I32), mask])

        def widen(v: Any) -> Any:
            """A loaded storage vector as the compute type (INT8 average: ``q - zp`` in int32)."""
            if g.kind == "f32" or g.is_max:
                return v
            n = v.type.count
            w = b.sext(v, vt(I32, n)) if signed else b.zext(v, vt(I32, n))
            return b.sub(w, gen.cv([zp_in] * n)) if zp_in else w

        def vload_in(base: Any, off_elems: Any, n: int, count: int) -> Any:
            """``n`` storage elements at ``base + off`` (``count`` of them valid, static)."""
            ty = vt(sty, n)
            p = gen.ptr(base, b.mul(gen.i64(off_elems), gen.c(ssz)), ty)
            if count >= n:
                return b.load(p, align=1)
            mask = ir.Constant(vt(ir.IntType(1), n), [1 if i < count else 0 for i in range(n)])
            f = gen.intrinsic(
                f"llvm.masked.load.v{n}{'f32' if sty == F32 else 'i8'}.p0",
                ty,
                [ty.as_pointer(), I32, vt(ir.IntType(1), n), ty],
            )
            return b.call(f, [p, gen.c(1, I32), mask, ir.Constant(ty, None)])

        def vstore_c(v: Any, base: Any, off_elems: Any, count: int) -> None:
            """Store the first ``count`` (static) lanes of a compute vector at element ``off``."""
            n = v.type.count
            off = b.mul(gen.i64(off_elems), gen.c(es))
            if count >= n:
                gen.store(v, base, off)
                return
            masked_store(v, base, off, count)

        def fill_row(src: Any, dst_row: Any) -> None:
            """Padded row ``dst_row`` (element offset of its start in phase plane 0) from the
            input row at ``src`` (storage pointer)."""
            if g.sw == 1:
                for j0 in range(0, g.w, L):
                    v = widen(vload_in(src, j0, L, g.w - j0))
                    vstore_c(v, plane, b.add(dst_row, gen.c(g.pl + j0)), min(L, g.w - j0))
                return
            evens = gen.cv(list(range(0, 2 * L, 2)))
            odds = gen.cv(list(range(1, 2 * L, 2)))
            first = g.pl % 2  # the phase of iw = 0
            d0 = b.add(dst_row, gen.c(first * g.ph * g.pwp + g.pl // 2))
            d1 = b.add(dst_row, gen.c((1 - first) * g.ph * g.pwp + (g.pl + 1) // 2))
            for j0 in range(0, g.w, 2 * L):
                cnt = g.w - j0
                v0 = vload_in(src, j0, L, cnt)
                v1 = vload_in(src, j0 + L, L, cnt - L) if cnt > L else ir.Constant(v0.type, None)
                n_even, n_odd = min(L, -(-cnt // 2)), min(L, cnt // 2)
                vstore_c(widen(b.shuffle_vector(v0, v1, evens)), plane, b.add(d0, gen.c(j0 // 2)), n_even)
                if n_odd > 0:
                    vstore_c(widen(b.shuffle_vector(v0, v1, odds)), plane, b.add(d1, gen.c(j0 // 2)), n_odd)

        def combine(a: Any, v: Any) -> Any:
            if g.is_max:
                if g.kind == "f32":
                    # a NaN in the window propagates (as numpy's max): keep a NaN accumulator
                    keep = b.or_(b.fcmp_ordered(">", a, v), b.fcmp_unordered("uno", a, a))
                    return b.select(keep, a, v)
                return b.select(b.icmp_signed(">", a, v) if signed else b.icmp_unsigned(">", a, v), a, v)
            return b.fadd(a, v) if g.kind == "f32" else b.add(a, v)

        taps = [
            ((kw * g.dw) % g.sw, kh * g.dh, (kw * g.dw) // g.sw) for kh in range(g.kh) for kw in range(g.kw)
        ]

        def out_vectors(oh: Any, obase: Any, vs: list[int], v_dyn: Any = None) -> None:
            """Output row ``oh``, vectors ``vs`` (static indices, offset by ``v_dyn`` vectors)."""
            r0 = b.mul(oh, gen.c(g.sh))
            col0 = gen.c(0) if v_dyn is None else b.mul(v_dyn, gen.c(L))
            accs: list[Any] = [None] * len(vs)
            for phase, roff, coff in taps:
                rbase = b.add(b.mul(b.add(r0, gen.c(roff)), gen.c(g.pwp)), gen.c(phase * g.ph * g.pwp + coff))
                rbase = b.add(rbase, col0)
                for i, vi in enumerate(vs):
                    v = gen.load(plane, b.mul(b.add(rbase, gen.c(vi * L)), gen.c(es)), vt(ety, L), align=es)
                    accs[i] = v if accs[i] is None else combine(accs[i], v)
            for i, vi in enumerate(vs):
                a = accs[i]
                col = b.add(col0, gen.c(vi * L))
                valid = g.ow - vi * L if v_dyn is None else L  # dynamic vectors are full
                if g.is_max:
                    y = a
                elif g.kind == "f32":
                    if cnt_tab is not None:
                        coff = b.mul(b.add(b.mul(oh, gen.c(g.nvec * L)), col), gen.c(4))
                        cv_ = gen.load(cnt_tab, coff, vt(F32, L), align=4)
                    else:
                        cv_ = count_v
                    y = b.fdiv(a, cv_)
                else:
                    assert q is not None
                    y = gen.requant(a, cf_v, m_v, s_v, q)
                off = b.add(b.add(obase, b.mul(oh, gen.c(g.ow))), col)
                n = y.type.count
                boff = b.mul(off, gen.c(ssz))
                if valid >= n:
                    gen.store(y, out, boff)
                else:
                    masked_store(y, out, boff, valid)

        full = g.ow // L  # vectors without a tail
        group = 4
        ngroups = full // group if full > group else 0

        def plane_body(nc: Any, _: list[Any]) -> list[Any]:
            src = b.gep(x, [b.mul(nc, gen.c(in_plane * ssz))])

            def fill(ih: Any, _: list[Any]) -> list[Any]:
                srow = b.gep(src, [b.mul(ih, gen.c(g.w * ssz))])
                fill_row(srow, b.mul(b.add(ih, gen.c(g.pt)), gen.c(g.pwp)))
                return []

            gen.loop(0, rows_in, fill)
            obase = b.mul(nc, gen.c(out_plane))

            def row(oh: Any, _: list[Any]) -> list[Any]:
                if ngroups:

                    def vgroup(vg: Any, _c: list[Any]) -> list[Any]:
                        out_vectors(oh, obase, list(range(group)), b.mul(vg, gen.c(group)))
                        return []

                    gen.loop(0, ngroups, vgroup)
                rest = list(range(ngroups * group, g.nvec))
                for i in range(0, len(rest), group):
                    out_vectors(oh, obase, rest[i : i + group])
                return []

            gen.loop(0, g.oh, row)
            return []

        lo, hi = gen.part_range(g.n * g.c)
        gen.loop(lo, hi, plane_body)
        b.ret_void()

    def _emit_direct(self, module: Any, plan: KernelPlan, op: Any, g: PoolGeo, isa: Isa) -> None:
        """F32: every tap of a register of ``L`` outputs loaded straight from the input row
        (masked where the window leaves the row: those lanes read the padding value; W stride 2:
        the even or odd lanes of two loads); window rows outside the image are left out (the border
        output rows emitted apart, the interior ones in a loop)."""
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        L = g.lanes  # noqa: N806
        vty = vt(F32, L)
        x = gen.bufs[plan.buffers.index(("in", 0))]
        out = gen.bufs[plan.buffers.index(("out", 0))]
        cnt_tab = (
            gen.bufs[plan.buffers.index(("weight", "cnt"))] if ("weight", "cnt") in plan.buffers else None
        )
        padv = ir.Constant(vty, [float("-inf") if g.is_max else 0.0] * L)
        count_v = None
        if not g.is_max and cnt_tab is None:
            c0 = self._const_count(op, g)
            assert c0 is not None
            count_v = ir.Constant(vty, [float(c0)] * L)
        i1v = vt(ir.IntType(1), L)
        mload = gen.intrinsic(f"llvm.masked.load.v{L}f32.p0", vty, [vty.as_pointer(), I32, i1v, vty])

        def load(row: Any, start: int) -> Any:
            bits = [1 if 0 <= start + i < g.w else 0 for i in range(L)]
            if not any(bits):
                return padv
            p = gen.ptr(row, start * 4, vty)
            if all(bits):
                return b.load(p, align=4)
            return b.call(mload, [p, gen.c(4, I32), ir.Constant(i1v, bits), padv])

        def tap(row: Any, j0: int, t: int) -> Any:
            if g.sw == 1:
                return load(row, j0 + t)
            base = 2 * j0 + t
            e = base % 2
            base -= e
            return b.shuffle_vector(
                load(row, base), load(row, base + L), gen.cv([2 * i + e for i in range(L)])
            )

        def combine(a: Any, v: Any) -> Any:
            if g.is_max:  # a NaN in the window propagates (as numpy's max)
                keep = b.or_(b.fcmp_ordered(">", a, v), b.fcmp_unordered("uno", a, a))
                return b.select(keep, a, v)
            return b.fadd(a, v)

        def out_row(src: Any, obase: Any, oh: Any, valid: Any) -> None:
            """Output row ``oh``; ``valid(kh)``: whether the window row is inside (None: all)."""
            for g0 in range(0, g.nvec, 4):
                vs = list(range(g0, min(g.nvec, g0 + 4)))
                accs: list[Any] = [None] * len(vs)
                for kh in range(g.kh):
                    if valid is not None and not valid(kh):
                        continue
                    ih = b.sub(b.add(b.mul(gen.i64(oh), gen.c(g.sh)), gen.c(kh * g.dh)), gen.c(g.pt))
                    row = b.gep(src, [b.mul(ih, gen.c(g.w * 4))])
                    for kw in range(g.kw):
                        for i, vi in enumerate(vs):
                            v = tap(row, vi * L, kw * g.dw - g.pl)
                            accs[i] = v if accs[i] is None else combine(accs[i], v)
                for i, vi in enumerate(vs):
                    a = padv if accs[i] is None else accs[i]
                    col = vi * L
                    if not g.is_max:
                        if cnt_tab is not None:
                            coff = b.mul(b.add(b.mul(gen.i64(oh), gen.c(g.nvec * L)), gen.c(col)), gen.c(4))
                            a = b.fdiv(a, gen.load(cnt_tab, coff, vty, align=4))
                        else:
                            a = b.fdiv(a, count_v)
                    off = b.mul(b.add(b.add(obase, b.mul(gen.i64(oh), gen.c(g.ow))), gen.c(col)), gen.c(4))
                    valid_n = g.ow - col
                    if valid_n >= L:
                        gen.store(a, out, off)
                    else:
                        mask = ir.Constant(i1v, [1 if j < valid_n else 0 for j in range(L)])
                        f = gen.intrinsic(
                            f"llvm.masked.store.v{L}f32.p0", ir.VoidType(), [vty, vty.as_pointer(), I32, i1v]
                        )
                        b.call(f, [a, gen.ptr(out, off, vty), gen.c(4, I32), mask])

        lo_r = min(g.oh, -(-g.pt // g.sh))
        hi_r = max(lo_r, min(g.oh, (g.h - 1 + g.pt - (g.kh - 1) * g.dh) // g.sh + 1))

        def plane(nc: Any, _: list[Any]) -> list[Any]:
            src = b.gep(x, [b.mul(nc, gen.c(g.h * g.w * 4))])
            obase = b.mul(nc, gen.c(g.oh * g.ow))
            for r in list(range(lo_r)) + list(range(hi_r, g.oh)):
                out_row(src, obase, r, lambda kh, r=r: 0 <= r * g.sh + kh * g.dh - g.pt < g.h)

            def row(oh: Any, _c: list[Any]) -> list[Any]:
                out_row(src, obase, oh, None)
                return []

            gen.loop(lo_r, hi_r, row)
            return []

        lo, hi = gen.part_range(g.n * g.c)
        gen.loop(lo, hi, plane)
        b.ret_void()


class GlobalMeanF32(Template):
    """A global average in F32: ``tpu.Reduce`` ReduceMean over the trailing axes (contiguous runs of
    ``L`` elements; a global average pool as the frontends lower it) — each run summed in four
    vector accumulators (masked at its end), added as a tree, divided by ``L``. Sums in its own
    order (``generic.reduce`` keeps ``execute``'s, bit for bit, and stays the exact path)."""

    name = "global-mean-f32"
    priority = 10
    exact = False

    def _run(self, op: Any) -> tuple[int, int] | None:
        """(runs, run length) of a ReduceMean over the trailing axes of an f32 tensor."""
        from lamina.ir.constants import constant_array

        if op.name != "tpu.Reduce" or op.attr("mode") != "ReduceMean" or len(op.operands) < 2:
            return None
        x_t, r_t = op.operands[0].type, op.results[0].type
        if not (_static(x_t) and _static(r_t)) or str(x_t.element_type) != "f32":
            return None
        if str(r_t.element_type) != "f32":
            return None
        a = constant_array(op.operands[1])
        if a is None:
            return None
        nd = len(x_t.shape)
        axes = sorted({int(v) % nd for v in np.asarray(a).reshape(-1)})
        if not axes or axes != list(range(nd - len(axes), nd)):
            return None
        n = int(np.prod(x_t.shape[nd - len(axes) :]))
        rows = int(np.prod(x_t.shape[: nd - len(axes)]))
        if rows * n != int(np.prod(x_t.shape)) or int(np.prod(r_t.shape)) != rows or n < 2:
            return None
        return rows, n

    def matches(self, op: Any, isa: Isa) -> bool:
        return self._run(op) is not None

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = self._run(op)
        assert r is not None
        return KernelPlan(symbol, [("in", 0), ("out", 0)], bytes=4 * r[0] * (r[1] + 1))

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from .gemm_f32 import Fn

        r = self._run(op)
        assert r is not None
        rows, n = r
        fn = Fn(module, plan.symbol)
        b = fn.b
        ln = max(4, isa.vector_bytes // 4)
        x, out = fn.buf(0), fn.buf(1)
        nacc = 4
        full = n // (ln * nacc)  # iterations of four full vectors
        zero = fn.vzero(ln)

        def row(i: Any, _c: list[Any]) -> None:
            base = fn.at(x, fn.mul(i, n))

            def step(j: Any, accs: list[Any]) -> list[Any]:
                o = fn.mul(j, ln * nacc)
                return [b.fadd(a, fn.vload(fn.at(base, fn.add(o, t * ln)), ln)) for t, a in enumerate(accs)]

            accs = fn.loop(0, full, step, [zero] * nacc) if full else [zero] * nacc
            for t, j0 in enumerate(range(full * ln * nacc, n, ln)):
                v = fn.vload(fn.at(base, j0), ln, F32, fn.mask(ln, n - j0))
                accs[t % nacc] = b.fadd(accs[t % nacc], v)
            tot = b.fadd(b.fadd(accs[0], accs[1]), b.fadd(accs[2], accs[3]))
            w = ln
            while w > 1:  # lanes folded in halves
                w //= 2
                hi = b.shuffle_vector(
                    tot, tot, ir.Constant(ir.VectorType(I32, ln), [(k + w) % ln for k in range(ln)])
                )
                tot = b.fadd(tot, hi)
            s = b.extract_element(tot, ir.Constant(I32, 0))
            b.store(b.fdiv(s, ir.Constant(F32, float(n))), fn.at(out, i), align=4)

        lo, hi = fn.share(rows)
        fn.loop(lo, hi, row)
        fn.ret()


TEMPLATES: list[Template] = [PoolF32Int8(), GlobalMeanF32()]

"""Depthwise convolution templates of the CPU target (``group == Cin == Cout``, W stride 1 or 2),
taking over from :class:`.gemm_int8.Int8Depthwise` (priority 12 against its 10).

**INT8** (:class:`Int8DepthwiseFast`): bit for bit with ``execute`` (the arithmetic, the weight
packing, the folded per-channel constants and the requant epilogue are :mod:`.gemm_int8`'s, by
import). What differs is the schedule. Parts split the (image, channel) planes, not the output rows,
so that every part computes whole planes and the geometry is static; per plane, the part's scratch
holds the plane's stride phases (``x_pad[i*sh + a, j*sw + b]``, bytes ``q + off``) — a few KiB that
stay in L1 while the plane's taps read them, instead of a whole-image copy before the first
output — packed with vector loads (masked at the row's end; W stride 2: the even or odd bytes of
two 64-byte loads) where the older template copied narrow planes (7x7, 14x14) byte by byte; the
padding bytes are written once per kernel (every plane pads the same positions). As in the older
template, 16 consecutive positions ``q = oh * Wph + ow`` of a phase image of row width ``Wph`` are
one register, so a small plane's rows share registers instead of wasting lanes; with few position
tiles (at most :data:`UNROLL_TILES`) the tiles are unrolled and their store masks are constants.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from .abi import Isa, KernelPlan, Template
from .conv_f32 import DepthwiseF32, _bias, _buffers, _bufptrs, conv_geometry
from .gemm_f32 import F32, Fn, _relu_attrs, elem_name, tile_for, weight_of
from .gemm_int8 import (
    I8,
    I32,
    ConvGeom,
    Gen,
    Int8Depthwise,
    QuantInfo,
    _tap_runs,
    fast_shift,
    lanes,
    vt,
)

__all__ = ["ROWS", "TEMPLATES", "UNROLL_TILES", "DepthwiseF32Direct", "Int8DepthwiseFast"]

#: position tiles per plane up to which they are unrolled (static store masks)
UNROLL_TILES = 4
#: output rows an INT8 row-mode iteration computes (their shared phase rows load once)
ROWS = 2


class Int8DepthwiseFast(Int8Depthwise):
    """INT8 depthwise convolution, W stride 1 or 2: per plane, pack its phases (L1) and compute its
    position tiles (see the module docstring)."""

    name = "int8-depthwise-planes"
    priority = 12

    def _geo(self, op: Any) -> tuple[ConvGeom, QuantInfo] | None:
        r = super()._geo(op)
        if r is None or r[0].sw not in (1, 2) or r[0].iw > 4096:
            return None
        return r

    def _layout(self, geo: ConvGeom, isa: Isa) -> tuple[int, int, int, int]:
        """(positions per tile, tiles per plane, phase rows held, plane bytes)."""
        nl = lanes(isa)
        qtl = self._nv(isa) * nl
        ntiles = -(-(geo.oh * geo.wph) // qtl)
        ra = geo.oh + -(-(geo.max_off + qtl) // geo.wph) + 1
        plane = len(geo.phases) * ra * geo.wph
        return qtl, ntiles, ra, plane

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        p = super().plan(op, symbol, isa)
        r = self._geo(op)
        assert r is not None
        _, _, _, plane = self._layout(r[0], isa)
        # the last tile's loads read up to a tile and two registers past the plane
        p.scratch_bytes = (plane + 4 * lanes(isa) * 4 + 64 + 63) // 64 * 64
        return p

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        nl = gen.nl
        nv = self._nv(isa)
        x, wp, ct, mt, st_, out, scr = gen.std_bufs(plan, q.out_signed)
        ct = b.bitcast(ct, I32.as_pointer())
        mt = b.bitcast(mt, I32.as_pointer())
        st_ = b.bitcast(st_, I32.as_pointer())
        qtl, ntiles, ra, _ = self._layout(geo, isa)
        scr = b.gep(scr, [b.mul(gen.part, gen.c(plan.scratch_bytes))])
        off = 128 if q.in_signed else 0
        padu = (q.zp_in + off) & 0xFF
        # the padding value over the whole plane (and the slack), once
        fill = gen.cv([padu] * 64, I8)
        nfill = plan.scratch_bytes // 64

        def fill_vec(i: Any, _: list[Any]) -> list[Any]:
            gen.store(fill, scr, b.mul(i, gen.c(64)))
            return []

        gen.loop(0, nfill, fill_vec)

        runs = _tap_runs(geo, ra)
        run_offs = [o for o, _ in runs]
        plane_in, plane_out = geo.ih * geo.iw, geo.oh * geo.ow
        qend = geo.oh * geo.wph
        sw = geo.sw

        def pack(src: Any) -> None:
            """The plane at ``src`` into the scratch's phase rows (valid rows and columns only)."""
            for pi, (a, bb) in enumerate(geo.phases):
                # phase columns j whose input column j*sw + bb - pl is inside the row
                j_lo = max(0, -(-(geo.pl - bb) // sw))
                j_hi = (
                    min(geo.wph, (geo.iw - 1 + geo.pl - bb) // sw + 1) if geo.iw - 1 + geo.pl - bb >= 0 else 0
                )
                # phase rows i whose input row i*sh + a - pt is inside the image
                i_lo = max(0, -(-(geo.pt - a) // geo.sh))
                i_hi = min(ra, (geo.ih - 1 + geo.pt - a) // geo.sh + 1) if geo.ih - 1 + geo.pt - a >= 0 else 0
                if j_hi <= j_lo or i_hi <= i_lo:
                    continue
                ncols = j_hi - j_lo
                c_in0 = j_lo * sw + bb - geo.pl  # the input column of phase column j_lo

                def row(i: Any, _: list[Any], pi: int = pi, a: int = a, ncols: int = ncols, c_in0: int = c_in0,
                        j_lo: int = j_lo) -> list[Any]:  # fmt: skip
                    ir_ = b.sub(b.add(b.mul(i, gen.c(geo.sh)), gen.c(a)), gen.c(geo.pt))
                    srow = b.gep(src, [b.add(b.mul(ir_, gen.c(geo.iw)), gen.c(c_in0))])
                    drow = b.gep(scr, [b.add(b.mul(b.add(i, gen.c(pi * ra)), gen.c(geo.wph)), gen.c(j_lo))])
                    for j0 in range(0, ncols, 64):
                        n_out = min(64, ncols - j0)
                        if sw == 1:
                            v = _load_bytes(gen, srow, j0, 64, n_out)
                        else:
                            n_in = 2 * (n_out - 1) + 1  # input bytes this vector needs
                            v0 = _load_bytes(gen, srow, 2 * j0, 64, n_in)
                            v1 = _load_bytes(gen, srow, 2 * j0 + 64, 64, n_in - 64) if n_in > 64 else None
                            v = b.shuffle_vector(
                                v0,
                                v1 if v1 is not None else ir.Constant(v0.type, None),
                                gen.cv(list(range(0, 128, 2))),
                            )
                        if off:
                            v = b.xor(v, gen.cv([off] * 64, I8))
                        _store_bytes(gen, v, drow, j0, n_out)
                    return []

                gen.loop(i_lo, i_hi, row)

        def accumulate(xq: Any, wc: Any, regs: list[int], c: Any) -> list[Any]:
            """The int32 sums of the registers ``regs`` (position offsets ``v * nl`` from ``xq``),
            started at channel ``c``'s folded constant."""
            cf = gen.splat(b.load(b.gep(ct, [c])), nl)
            accs = [cf for _ in regs]
            for ri, roff in enumerate(run_offs):
                wb = gen.bcast32(wc, ri * 4, nl)
                for i, v in enumerate(regs):
                    win = gen.load(xq, roff + v * nl, vt(I8, 2 * nl))
                    u = b.shuffle_vector(win, win, gen.cv([j + t for j in range(nl) for t in range(4)]))
                    accs[i] = gen.dot(accs[i], u, wb)
            return accs

        gen.fast_shift = fast_shift(q)  # the requant in int32 lanes (exact for shifts >= 32)

        def epilogue(c: Any) -> Any:
            """The channel's requant: a function of an int32 register to its bytes."""
            mu = gen.splat(b.load(b.gep(mt, [c])), nl)
            sh = gen.splat(b.load(b.gep(st_, [c])), nl)
            return lambda acc: gen.requant(acc, None, mu, sh, q)  # the constant: in the sums

        def tile(nc: Any, c: Any, q0: int) -> None:
            """Positions [q0, q0 + qtl) of the plane (static), stored through static masks."""
            regs = list(range(min(nv, -(-(qend - q0) // nl))))  # registers past the plane: none
            accs = accumulate(b.gep(scr, [gen.c(q0)]), b.gep(wp, [b.mul(c, gen.c(len(runs) * 4))]), regs, c)
            requant = epilogue(c)
            obase = b.gep(out, [b.mul(nc, gen.c(plane_out))])
            for v, acc in zip(regs, accs):
                y = requant(acc)
                for offs, lanes_on in _static_masks(geo, q0 + v * nl, nl, qend):
                    _store_lanes(gen, y, obase, offs, lanes_on)

        def out_rows(nc: Any, c: Any, oh: Any, nrows: int) -> None:
            """Output rows ``oh .. oh + nrows - 1``: ``ceil(OW / nl)`` registers each, in groups of
            ``nv``; the rows' shared windows (a phase row read by two of them) load and shuffle once
            (LLVM merges the equal loads of one block)."""
            nreg = -(-geo.ow // nl)
            wc = b.gep(wp, [b.mul(c, gen.c(len(runs) * 4))])
            requant = epilogue(c)
            for g0 in range(0, nreg, nv):
                regs = list(range(g0, min(nreg, g0 + nv)))
                sums = []
                for rr in range(nrows):
                    r = b.add(oh, gen.c(rr))
                    sums.append((r, accumulate(b.gep(scr, [b.mul(r, gen.c(geo.wph))]), wc, regs, c)))
                for r, accs in sums:
                    orow = b.gep(out, [b.add(b.mul(nc, gen.c(plane_out)), b.mul(r, gen.c(geo.ow)))])
                    for v, acc in zip(regs, accs):
                        _store_bytes(gen, requant(acc), orow, v * nl, geo.ow - v * nl)

        def plane(nc: Any, _: list[Any]) -> list[Any]:
            c = b.urem(nc, gen.c(geo.cout))
            pack(b.gep(x, [b.mul(nc, gen.c(plane_in))]))
            if ntiles <= UNROLL_TILES:
                for t in range(ntiles):
                    tile(nc, c, t * qtl)
            else:

                def rows(i: Any, _c: list[Any]) -> list[Any]:
                    out_rows(nc, c, b.mul(i, gen.c(ROWS)), ROWS)
                    return []

                gen.loop(0, geo.oh // ROWS, rows)
                if geo.oh % ROWS:
                    out_rows(nc, c, gen.c(geo.oh // ROWS * ROWS), geo.oh % ROWS)
            return []

        lo, hi = gen.part_range(geo.batch * geo.cout)
        gen.loop(lo, hi, plane)
        b.ret_void()


def _static_masks(geo: ConvGeom, qv: int, nl: int, qend: int) -> list[tuple[int, list[int]]]:
    """For the register of positions ``[qv, qv + nl)``: one ``(offset in the output plane, lanes
    on)`` per output row it holds valid positions of (column ``< OW``, position ``< qend``)."""
    out = []
    rows = sorted({q // geo.wph for q in range(qv, min(qv + nl, qend))})
    for r in rows:
        lanes_on = [1 if (qv + i) // geo.wph == r and (qv + i) % geo.wph < geo.ow and qv + i < qend else 0
                    for i in range(nl)]  # fmt: skip
        if any(lanes_on):
            out.append((r * geo.ow - r * geo.wph + qv, lanes_on))
    return out


def _store_lanes(gen: Gen, v: Any, base: Any, off: int, lanes_on: list[int]) -> None:
    """Store the lanes of the byte vector ``v`` that ``lanes_on`` marks at ``base + off + lane``.
    One lane: a byte store (LLVM 22's x86 backend turns a one-lane masked byte store into a 4-byte
    ``vmovd``, writing three bytes past it)."""
    if sum(lanes_on) == 1:
        k = lanes_on.index(1)
        gen.b.store(gen.b.extract_element(v, gen.c(k, I32)), gen.b.gep(base, [gen.c(off + k)]))
        return
    n = v.type.count
    gen.masked_store(v, base, off, ir.Constant(vt(ir.IntType(1), n), lanes_on))


def _load_bytes(gen: Gen, base: Any, off: int, n: int, count: int) -> Any:
    """``n`` bytes at ``base + off``, the first ``count`` of them read (the rest undefined)."""
    ty = vt(I8, n)
    if count >= n:
        return gen.load(base, off, ty)
    mask = ir.Constant(vt(ir.IntType(1), n), [1 if i < count else 0 for i in range(n)])
    f = gen.intrinsic(f"llvm.masked.load.v{n}i8.p0", ty, [ty.as_pointer(), I32, vt(ir.IntType(1), n), ty])
    return gen.b.call(f, [gen.ptr(base, off, ty), gen.c(1, I32), mask, ir.Constant(ty, None)])


def _store_bytes(gen: Gen, v: Any, base: Any, off: int, count: int) -> None:
    """The first ``count`` bytes of ``v`` at ``base + off``."""
    n = v.type.count
    if count >= n:
        gen.store(v, base, off)
        return
    _store_lanes(gen, v, base, off, [1 if i < count else 0 for i in range(n)])


# ---- F32 ---------------------------------------------------------------------------------------


class DepthwiseF32Direct(DepthwiseF32):
    """F32 depthwise ``tpu.Conv``, W stride 1 or 2, straight from the input: each tap of a register
    of ``L`` outputs is a vector load of the input row at a constant offset (W stride 2: the even or
    odd lanes of two loads, one shuffle), masked where the window leaves the row (the lanes read 0:
    the padding); rows of the window outside the image are left out (the border output rows are
    emitted apart, the interior ones in a loop of ``R`` rows at a time — 4, stride 2: 2 — whose
    shared input rows load once). No copy of the plane: the older template's padded plane (stride 2:
    its even/odd deinterleave, half of whose stores straddle cache lines) cost as much as the FMAs.
    Parts split the (image, channel) planes."""

    name = "depthwise_f32_direct"
    priority = 12

    def matches(self, op: Any, isa: Isa) -> bool:
        return super().matches(op, isa) and elem_name(op.input.type) == "f32"

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        xs, ys, k, _s, _d, _p, _g = conv_geometry(op)  # type: ignore[misc]
        c = xs[1]
        wts = {"w": np.ascontiguousarray(weight_of(op.filter).reshape(c, k[0] * k[1]))}  # type: ignore[union-attr]
        b = _bias(op, c, c)
        if b is not None:
            wts["b"] = b
        return KernelPlan(
            symbol,
            _buffers(b is not None, False),
            wts,
            0,
            macs=xs[0] * c * ys[2] * ys[3] * k[0] * k[1],
            bytes=4 * (int(np.prod(xs)) + int(np.prod(ys))) + wts["w"].nbytes,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        xs, ys, (kh_n, kw_n), (sh, sw), (dh, dw), p, _g = conv_geometry(op)  # type: ignore[misc]
        n_img, c, h, w = xs
        oh, ow = ys[2], ys[3]
        pt, pl = p[0], p[1]
        ln = tile_for(isa).lanes
        nvec = -(-ow // ln)
        nr = (4 if sh == 1 else 2) if ln >= 16 else 1
        group = 4 if ln >= 16 else 2  # registers of a row computed together
        fn = Fn(module, plan.symbol)
        ptr = _bufptrs(fn, plan)
        relu, limit = _relu_attrs(op)
        b = fn.b
        zero = fn.vzero(ln)
        lim = fn.vconst(limit, ln) if relu and limit > 0 else None

        def tap(row: Any, j0: int, t: int) -> Any:
            """``x[row][sw * (j0 + i) + t]`` for lanes ``i`` (0 outside ``[0, W)``)."""

            def load(start: int) -> Any:
                bits = [1 if 0 <= start + i < w else 0 for i in range(ln)]
                if not any(bits):
                    return zero
                mask = None if all(bits) else ir.Constant(ir.VectorType(ir.IntType(1), ln), bits)
                return fn.vload(fn.at(row, start), ln, F32, mask)

            if sw == 1:
                return load(j0 + t)
            base = 2 * j0 + t
            e = base % 2
            base -= e
            return b.shuffle_vector(load(base), load(base + ln), ir.Constant(
                ir.VectorType(I32, ln), [2 * i + e for i in range(ln)]))  # fmt: skip

        def block(src: Any, dst: Any, wts: list[Any], bv: Any, r0: Any, nrows: int, valid: Any) -> None:
            """Output rows ``r0 .. r0 + nrows - 1``; ``valid(rr, kh)``: whether the tap row is in the
            image (None: all are)."""
            for g0 in range(0, nvec, group):
                vs = list(range(g0, min(nvec, g0 + group)))
                accs = [[bv if bv is not None else zero] * len(vs) for _ in range(nrows)]
                for rr in range(nrows):
                    for kh in range(kh_n):
                        if valid is not None and not valid(rr, kh):
                            continue
                        ih = fn.sub(fn.add(fn.mul(fn.add(r0, rr), sh), kh * dh), pt)
                        row = fn.at(src, fn.mul(ih, w))
                        for kw in range(kw_n):
                            for i, vi in enumerate(vs):
                                xv = tap(row, vi * ln, kw * dw - pl)
                                accs[rr][i] = fn.fma(wts[kh * kw_n + kw], xv, accs[rr][i])
                for rr in range(nrows):
                    for i, vi in enumerate(vs):
                        v = accs[rr][i]
                        if relu:
                            v = b.select(b.fcmp_unordered(">=", v, zero), v, zero)
                            if lim is not None:
                                v = b.select(b.fcmp_unordered("<=", v, lim), v, lim)
                        fn.vstore(
                            v,
                            fn.at(dst, fn.add(fn.mul(fn.add(r0, rr), ow), vi * ln)),
                            fn.mask(ln, ow, vi * ln),
                        )

        # output rows whose every tap row is inside the image
        lo = min(oh, -(-pt // sh))
        hi = max(lo, min(oh, (h - 1 + pt - (kh_n - 1) * dh) // sh + 1))

        def inside(r: int, kh: int) -> bool:
            return 0 <= r * sh + kh * dh - pt < h

        def plane(nc: Any, _c: Any) -> None:
            ch = b.urem(nc, fn.c(c))
            src = fn.at(ptr["input"], fn.mul(nc, h * w))
            dst = fn.at(ptr["output"], fn.mul(nc, oh * ow))
            wts = [
                fn.splat(fn.load(fn.at(ptr["w"], fn.add(fn.mul(ch, kh_n * kw_n), t))), ln)
                for t in range(kh_n * kw_n)
            ]
            bias = ptr.get("b")
            bv = fn.splat(fn.load(fn.at(bias, ch)), ln) if bias is not None else None
            for r in list(range(lo)) + list(range(hi, oh)):
                block(src, dst, wts, bv, r, 1, lambda rr, kh, r=r: inside(r + rr, kh))
            full = (hi - lo) // nr
            if full:
                fn.loop(0, full, lambda i, _c: block(src, dst, wts, bv, fn.add(fn.mul(i, nr), lo), nr, None))
            for r in range(lo + full * nr, hi):
                block(src, dst, wts, bv, r, 1, None)

        c_lo, c_hi = fn.share(n_img * c)
        fn.loop(c_lo, c_hi, plane)
        fn.ret()


TEMPLATES: list[Template] = [Int8DepthwiseFast(), DepthwiseF32Direct()]

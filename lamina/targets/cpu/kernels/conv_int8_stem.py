"""The INT8 convolution of few input channels as an im2col GEMM (``int8-conv-im2col``): a network's
stem (ResNet's 7x7/2 over 3 channels, MobileNetV2's 3x3/2), bit for bit with ``execute``.

:class:`~.gemm_int8.Int8Conv` dots four *channels* of one tap per ``vpdpbusd`` lane: with 3 input
channels a quarter of every dot product multiplies the padding channel (7x7x3: 49 dot products
per register of outputs where 37 hold the 147 products). Here ``K = cin * kh * kw`` is one
dimension padded to a multiple of 4 (148: 37 dot products), and the input of a block of output rows
is laid out for it (``[K/4][position][4]``, positions ``q = row * OW + col`` with no unused
columns) in two steps per part:

1. the stride phases of each input channel, padded (``gemm_int8._emit_pack`` without interleave:
   ``[c][phase][row][col]``, on which each tap is a constant offset);
2. per block of output rows, each group of four ``k`` as one vector of ``nl`` positions x 4 bytes:
   the ``k`` are ordered by (channel, phase, phase row, column), so that the four of a group are
   consecutive columns of at most two phase rows — two vector loads and one two-source byte
   shuffle (``vpermi2b``) per group, made once for all output channels.

The register tile (``MR`` output channels broadcast x ``NV`` registers of positions, the folded
constants starting the accumulators) and the epilogue (requant in int32 lanes where the shifts
allow, a fused ``tpu.Lut``) are :mod:`.gemm_int8`'s; the output positions of a register are
consecutive in the NCHW plane: one store, masked at the block's end only. Position tiles outer,
channel tiles inner: a tile's columns stay in L1 over all the output channels. Parts split the
output rows. Taken (priority 12) where its dot products are at most 0.8 of ``int8-conv``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .gemm_int8 import (
    BUFFERS,
    I1,
    I8,
    I32,
    ConvGeom,
    Gen,
    Int8Conv,
    LutFusion,
    QuantInfo,
    _emit_pack,
    _fused,
    _fused_key,
    _scalars,
    _tables,
    _with_lut,
    fast_shift,
    lanes,
    vnni,
    vt,
)

__all__ = ["TEMPLATES", "Int8ConvIm2col", "col_order"]

#: bytes of one block's columns (``[K/4][positions][4]``) a part aims at (L2-resident)
BLOCK_BYTES = 56 * 1024
#: the most groups of four ``k`` (the packing and the dot products are unrolled over them)
MAX_K4 = 256


def col_order(geo: ConvGeom) -> list[tuple[int, int, int, int, int]]:
    """The ``k`` of the GEMM in order: ``(channel, tap index, phase, phase row, column)`` sorted by
    channel, phase, phase row and column, so that consecutive ``k`` are consecutive columns of one
    phase row wherever the kernel allows."""
    ks = []
    for c in range(geo.cig):
        for ti, (pi, ro, co) in enumerate(geo.taps):
            ks.append((c, ti, pi, ro, co))
    return sorted(ks, key=lambda k: (k[0], k[2], k[3], k[4]))


def _sources(group: list[tuple[int, int, int, int, int]], span: int) -> list[tuple[int, int, int, int]]:
    """The phase-row windows ``(channel, phase, phase row, first column)`` one group of four ``k``
    reads: a ``k`` joins a window of its row when its column is at most ``span`` past the first."""
    srcs: list[tuple[int, int, int, int]] = []
    for c, _, pi, ro, co in group:
        if not any(s[:3] == (c, pi, ro) and 0 <= co - s[3] <= span for s in srcs):
            srcs.append((c, pi, ro, co))
    return srcs


@dataclass(frozen=True)
class PoolFuse:
    """A ``tpu.MaxPool`` fused after the conv (2-d, no dilation): kernel, strides, the explicit
    top / left pads, its output rows and columns."""

    kh: int
    kw: int
    sh: int
    sw: int
    pt: int
    pl: int
    oh: int
    ow: int


def pool_fuse(op: Any, pool: Any) -> PoolFuse | None:
    """The fusable form of the ``tpu.MaxPool`` ``pool`` reading the conv ``op``'s result, or None:
    2-d, no dilation, no indices, the conv's 8-bit type kept, conv rows a whole number of 16-lane
    registers wide (``OW % 16``: every register of the conv's positions lies in one row)."""
    if pool.name != "tpu.MaxPool" or not pool.operands or pool.operands[0] is not op.results[0]:
        return None
    if len(pool.results) > 1 and isinstance(pool.results[1].type, RankedTensorType):
        return None
    x_t, r_t = pool.operands[0].type, pool.results[0].type
    if str(x_t.element_type) != str(r_t.element_type) or len(x_t.shape) != 4 or len(r_t.shape) != 4:
        return None
    if x_t.shape[3] % 16 or list(r_t.shape[:2]) != list(x_t.shape[:2]):
        return None
    try:
        k, st, d, p, _ = pool._geometry(list(x_t.shape))
    except Exception:
        return None
    if len(k) != 2 or list(d) != [1, 1] or min(p) < 0 or min(st) < 1 or p[0] >= k[0] or p[1] >= k[1]:
        return None
    return PoolFuse(k[0], k[1], st[0], st[1], p[0], p[1], int(r_t.shape[2]), int(r_t.shape[3]))


def _pool_of(op: Any) -> PoolFuse | None:
    f = _fused(op)
    return pool_fuse(op, f[0]) if f and f[0].name == "tpu.MaxPool" else None


class Int8ConvIm2col(LutFusion, Template):
    """INT8 convolution with ``K = cin * kh * kw`` packed densely (im2col per block of output
    rows): see the module's docstring."""

    name = "int8-conv-im2col"
    priority = 12
    residual = False  # a stem takes no residual add (int8-conv does, where a model has one)

    def _geo(self, op: Any) -> tuple[ConvGeom, QuantInfo] | None:
        r = Int8Conv._geo(Int8Conv(), op)
        if r is None or r[0].groups != 1:
            return None
        return r

    @staticmethod
    def k4(geo: ConvGeom) -> int:
        return -(-geo.cig * len(geo.taps) // 4)

    def matches(self, op: Any, isa: Isa) -> bool:
        r = self._geo(op)
        if r is None:
            return False
        geo = r[0]
        k4 = self.k4(geo)
        return k4 <= MAX_K4 and k4 <= 0.8 * (-(-geo.cig // 4) * len(geo.taps))

    def fuses(self, op: Any, consumer: Any) -> bool:
        """A following ``tpu.Lut`` (:class:`LutFusion`) or ``tpu.MaxPool`` (:func:`pool_fuse`)."""
        if consumer.name == "tpu.MaxPool":
            return op.get_attr("cpu.fused") is None and pool_fuse(op, consumer) is not None
        return LutFusion.fuses(self, op, consumer)

    def ir_key(self, op: Any, isa: Isa) -> tuple[Any, ...]:
        """Ops of equal keys get the same function but for its name (as ``Int8Conv.ir_key``)."""
        r = self._geo(op)
        assert r is not None
        return (self.name, repr(r[0]), _scalars(r[1]), _fused_key(op, r[1]), _pool_of(op), isa)

    def code_key(self, op: Any, plan: KernelPlan, isa: Isa) -> Any:
        """:meth:`ir_key`: the compiler's code key (``kernels/codekey.py``)."""
        return self.ir_key(op, isa)

    def _tile(self, geo: ConvGeom, isa: Isa) -> tuple[int, int]:
        return self._schedule(geo, isa)[:2]

    def _block(self, geo: ConvGeom, isa: Isa) -> tuple[int, int]:
        return self._schedule(geo, isa)[2:]

    def _schedule(self, geo: ConvGeom, isa: Isa) -> tuple[int, int, int, int]:
        """``(MR, NV, RB, qcap)``: the register tile, the output rows per block and the positions
        of one ``k`` group's row of the block's columns — the tile and block of least estimated
        cost: the padded work (channels to ``MR``, the block's positions to whole tiles; a block's
        columns within :data:`BLOCK_BYTES`) times ``1 + 0.25 / NV + 0.06 / MR`` (per dot product:
        the weight broadcasts, measured dearer than the column loads — ResNet's stem 8 x 3 at
        0.65 ms, 2 x 7 at 0.63 ms)."""
        nl = lanes(isa)
        regs = 30 if isa.vector_bytes == 64 else 14
        if not vnni(isa):
            regs //= 2
        row = geo.ow * self.k4(geo) * 4
        top = max(1, min(geo.oh, BLOCK_BYTES // max(1, row)))
        best: tuple[float, int, int, int] = (np.inf, 1, 1, 1)
        for nv in range(1, 8):
            for mr in range(1, 9):
                if mr * nv + nv > regs:
                    continue
                tq = nv * nl
                chans = -(-geo.cout // mr) * mr / geo.cout
                for rb in range(1, top + 1):
                    pos = (-(-rb * geo.ow // tq) * tq) / (rb * geo.ow) + 0.01 / rb
                    cost = chans * pos * (1 + 0.25 / nv + 0.06 / mr)
                    if cost < best[0] - 1e-9:
                        best = (cost, mr, nv, rb)
        _, mr, nv, rb = best
        tq = nv * nl
        return mr, nv, rb, -(-(rb * geo.ow + nl) // tq) * tq

    def _scratch(self, geo: ConvGeom, isa: Isa, pf: PoolFuse | None = None) -> tuple[int, int, int]:
        """``(phase rows packed, byte offset of the columns, scratch bytes per part)`` (a fused
        pool's ring of conv rows after the columns: :meth:`_ring`)."""
        nl = lanes(isa)
        ra = geo.rows_alloc(4 * nl)
        phases = geo.cig * len(geo.phases) * ra * geo.wph
        col_at = -(-(phases + 4 * nl) // 64) * 64
        _, qcap = self._block(geo, isa)
        end = -(-(col_at + self.k4(geo) * qcap * 4 + 4 * nl) // 64) * 64
        if pf is not None:
            nr, rw = self._ring(geo, isa, pf)
            end += geo.cout * (nr + 1) * rw + 8 * nl
        return ra, col_at, end + 64

    def _ring(self, geo: ConvGeom, isa: Isa, pf: PoolFuse) -> tuple[int, int]:
        """A fused pool's ring of conv rows per channel: ``(rows, bytes per row)`` — the rows of a
        block and the ``kh - 1`` before it a pending pool row still reads (plus one row of the
        padding value after them), each with the pool's left padding and room on the right for the
        last pool register's reads."""
        rb, _ = self._block(geo, isa)
        v = 2 * lanes(isa)
        reach = (-(-pf.ow // v) * v - 1) * pf.sw + pf.kw + 4 * v
        return rb + pf.kh - 1, -(-(pf.pl + max(geo.ow, reach)) // 64) * 64

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        mr, _ = self._tile(geo, isa)
        k4 = self.k4(geo)
        cot = -(-geo.cout // mr)
        ntap = len(geo.taps)
        w = q.weight.reshape(geo.cout, geo.cig, ntap).astype(np.int8)
        wk = np.zeros((cot * mr, k4 * 4), np.int8)
        for i, (c, ti, *_) in enumerate(col_order(geo)):
            wk[: geo.cout, i] = w[:, c, ti]
        # [cot][k4][mr][4]
        wp = wk.reshape(cot, mr, k4, 4).transpose(0, 2, 1, 3).copy()
        wsum = w.astype(np.int64).sum(axis=(1, 2))
        weights = {"w": wp.reshape(-1), **_tables(q, wsum, geo.cout + mr)}
        scratch = self._scratch(geo, isa, _pool_of(op))[2]
        macs = geo.batch * geo.cout * geo.oh * geo.ow * geo.cig * ntap
        nbytes = int(np.prod(op.operands[0].type.shape)) + int(np.prod(op.results[0].type.shape)) + wp.size
        return _with_lut(op, symbol, list(BUFFERS), weights, scratch, macs, nbytes, q=q)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b, c = gen.b, gen.c
        nl = gen.nl
        vb = 4 * nl  # bytes of one register
        mr, nv = self._tile(geo, isa)
        tq = nv * nl
        k4 = self.k4(geo)
        rb_rows, qcap = self._block(geo, isa)
        pf = _pool_of(op)
        ra, col_at, _ = self._scratch(geo, isa)
        x, wp, ct, mt, st_, out, scr = gen.std_bufs(plan, q.out_signed, op)
        gen.fast_shift = fast_shift(q)
        ct = b.bitcast(ct, I32.as_pointer())
        mt = b.bitcast(mt, I32.as_pointer())
        st_ = b.bitcast(st_, I32.as_pointer())
        nph = len(geo.phases)
        ow, wph = geo.ow, geo.wph
        plane_out = geo.oh * ow
        cot = -(-geo.cout // mr)
        scr = b.gep(scr, [b.mul(gen.part, c(plan.scratch_bytes))])
        col = b.gep(scr, [c(col_at)])
        if pf is None:
            r0, r1 = gen.part_range(geo.oh)
            p0 = p1 = ring = None
            nring = rw = 0
        else:
            # parts split the pool's rows; a part computes the conv rows its windows read
            p0, p1 = gen.part_range(pf.oh)
            lo_ = b.sub(b.mul(p0, c(pf.sh)), c(pf.pt))
            hi_ = b.add(b.mul(b.sub(p1, c(1)), c(pf.sh)), c(pf.kh - pf.pt))
            some = b.icmp_signed("<", p0, p1)
            r0 = b.select(some, gen.smax(lo_, c(0)), c(0))
            r1 = b.select(some, gen.smin(hi_, c(geo.oh)), c(0))
            nring, rw = self._ring(geo, isa, pf)
            ring = b.gep(col, [c(-(-(self.k4(geo) * qcap * 4 + 4 * nl) // 64) * 64)])
            padv = gen.cv([-128 if q.out_signed else 0] * vb, I8)
            gen.loop(
                0, geo.cout * (nring + 1) * rw // vb, lambda i, _: gen.store(padv, ring, b.mul(i, c(vb)))
            )
        nblk = b.sdiv(b.add(b.sub(r1, r0), c(rb_rows - 1)), c(rb_rows))

        order = col_order(geo)
        groups = [order[4 * d : 4 * d + 4] for d in range(k4)]
        srcs = [_sources(g, vb - nl) for g in groups]

        # per group: the byte index of (lane j, byte t) in its sources laid end to end
        def shuffle_idx(d: int) -> list[int]:
            g, ss = groups[d], srcs[d]
            idx = []
            for j in range(nl):
                for t in range(4):
                    if t >= len(g):
                        idx.append(j)  # a padding k (weight 0): any byte
                        continue
                    cc, _, pi, ro, co = g[t]
                    si = next(
                        i for i, s in enumerate(ss) if s[:3] == (cc, pi, ro) and 0 <= co - s[3] <= vb - nl
                    )
                    idx.append(si * vb + j + co - ss[si][3])
            return idx

        idxs = [shuffle_idx(d) for d in range(k4)]
        # the runs of nl output columns a row is packed in (the last one overlapping its neighbour)
        run_starts = [min(j, max(0, ow - nl)) for j in range(0, ow, nl)] if ow > nl else [0]

        def pack_row(i: Any, _: list[Any], rb: Any) -> None:
            """The columns of output row ``rb + i`` (relative row ``rb - r0 + i`` of the phases)."""
            prow = b.add(b.sub(rb, r0), i)

            def run(ri: Any, _: list[Any]) -> None:
                ow0 = b.mul(ri, c(nl))
                if ow > nl and ow % nl:
                    ow0 = b.select(b.icmp_signed(">", ow0, c(ow - nl)), c(ow - nl), ow0)
                base = b.gep(scr, [b.add(b.mul(prow, c(wph)), ow0)])
                dst = b.gep(col, [b.mul(b.add(b.mul(i, c(ow)), ow0), c(4))])
                for d in range(k4):
                    loads = [
                        gen.load(base, ((cc * nph + pi) * ra + ro) * wph + co, vt(I8, vb))
                        for cc, pi, ro, co in srcs[d]
                    ]
                    gen.store(_gather(gen, loads, idxs[d]), dst, d * qcap * 4)

            gen.loop(0, len(run_starts), run)

        def pool_row(po: Any, _: list[Any], n: Any) -> None:
            """Row ``po`` of the fused max pool, every channel, from the ring of conv rows."""
            assert pf is not None
            v = 2 * nl  # output bytes a register
            nsrc = -(-(pf.sw * (v - 1) + pf.kw) // vb)
            rows = []
            for kh in range(pf.kh):
                rr = b.add(b.sub(b.mul(po, c(pf.sh)), c(pf.pt)), c(kh))
                valid = b.and_(b.icmp_signed(">=", rr, c(0)), b.icmp_signed("<", rr, c(geo.oh)))
                slot = b.urem(b.select(valid, rr, c(0)), c(nring))
                rows.append(b.mul(b.select(valid, slot, c(nring)), c(rw)))
            wider = b.icmp_signed if q.out_signed else b.icmp_unsigned

            def vmax(a: Any, y: Any) -> Any:
                return b.select(wider(">", a, y), a, y)

            def channel(co: Any, _: list[Any]) -> None:
                base = b.gep(ring, [b.mul(co, c((nring + 1) * rw))])
                obase = b.gep(
                    out, [b.mul(b.add(b.mul(b.add(b.mul(n, c(geo.cout)), co), c(pf.oh)), po), c(pf.ow))]
                )
                for j0 in range(0, pf.ow, v):
                    srcs_ = []
                    for si in range(nsrc):
                        m = None
                        for ro in rows:
                            ld = gen.load(b.gep(base, [ro]), j0 * pf.sw + si * vb, vt(I8, vb))
                            m = ld if m is None else vmax(m, ld)
                        srcs_.append(m)
                    acc = None
                    for kw in range(pf.kw):
                        idx = [j * pf.sw + kw for j in range(v)] + [0] * (vb - v)
                        g = _gather(gen, srcs_, idx)
                        g = b.shuffle_vector(g, g, gen.iota(v))
                        acc = g if acc is None else vmax(acc, g)
                    cnt = min(v, pf.ow - j0)
                    if cnt == v:
                        gen.store(acc, obase, j0)
                    elif cnt == 1:  # a byte store (a one-lane masked store writes 4 bytes)
                        b.store(b.extract_element(acc, c(0, I32)), b.gep(obase, [c(j0)]))
                    else:
                        mask = ir.Constant(vt(I1, v), [ir.Constant(I1, int(j < cnt)) for j in range(v)])
                        gen.masked_store(acc, obase, j0, mask)

            gen.loop(0, geo.cout, channel)

        def block(bi: Any, carry: list[Any], n: Any) -> list[Any]:
            rb = b.add(r0, b.mul(bi, c(rb_rows)))
            nb = b.sub(r1, rb)
            nb = b.select(b.icmp_signed(">", nb, c(rb_rows)), c(rb_rows), nb)
            gen.loop(0, nb, lambda i, v: pack_row(i, v, rb))
            nq = b.mul(nb, c(ow))
            ntiles = b.sdiv(b.add(nq, c(tq - 1)), c(tq))
            obase0 = b.mul(rb, c(ow))

            def ptile(pt: Any, _: list[Any]) -> None:
                q0 = b.mul(pt, c(tq))
                xq = b.gep(col, [b.mul(q0, c(4))])
                masks = []
                for v in range(nv):
                    left = b.trunc(b.sub(nq, b.add(q0, c(v * nl))), I32)
                    masks.append(b.icmp_signed("<", gen.iota(nl), gen.splat(left, nl)))
                ring_at = []  # a fused pool: each register's offset in a channel's ring
                for v in range(nv if pf is not None else 0):
                    qv = b.add(q0, c(v * nl))
                    slot = b.urem(b.add(rb, b.udiv(qv, c(ow))), c(nring))
                    ring_at.append(b.add(b.mul(slot, c(rw)), b.add(b.urem(qv, c(ow)), c(pf.pl if pf else 0))))

                def cotile(ci: Any, _: list[Any]) -> None:
                    wt = b.gep(wp, [b.mul(ci, c(k4 * mr * 4))])
                    chans = [b.add(b.mul(ci, c(mr)), c(mm)) for mm in range(mr)]
                    accs = [
                        gen.splat(b.load(b.gep(ct, [chans[mm]])), nl) for mm in range(mr) for _ in range(nv)
                    ]
                    accs = _kloop(gen, xq, wt, accs, k4, qcap, mr, nv)
                    for mm in range(mr):

                        def epi(mm: int = mm) -> None:
                            co = chans[mm]
                            mu = gen.splat(b.load(b.gep(mt, [co])), nl)
                            sh = gen.splat(b.load(b.gep(st_, [co])), nl)
                            ys = [
                                gen.requant(accs[mm * nv + v], None, mu, sh, q, lut=False) for v in range(nv)
                            ]
                            if pf is not None:  # into the ring (a register lies in one conv row)
                                cbase = b.mul(co, c((nring + 1) * rw))
                                for v, y in enumerate(ys):
                                    gen.masked_store(y, ring, b.add(cbase, ring_at[v]), masks[v])
                                return
                            plane = b.mul(b.add(b.mul(n, c(geo.cout)), co), c(plane_out))
                            obase = b.gep(out, [b.add(plane, b.add(obase0, q0))])
                            for v, y in enumerate(gen.apply_luts(ys)):
                                gen.masked_store(y, obase, v * nl, masks[v])

                        if geo.cout % mr:
                            gen.when(b.icmp_signed("<", chans[mm], c(geo.cout)), epi)
                        else:
                            epi()

                gen.loop(0, cot, cotile)

            gen.loop(0, ntiles, ptile)
            if pf is None:
                return []
            # the pool rows whose windows end in the rows computed so far
            done = b.add(rb, nb)
            num = b.sub(done, c(pf.kh - pf.pt))
            ready = b.select(b.icmp_signed("<", num, c(0)), c(0), b.add(b.sdiv(num, c(pf.sh)), c(1)))
            ready = b.select(b.icmp_signed(">=", done, r1), p1, gen.smin(ready, p1))
            ready = gen.smax(ready, carry[0])
            gen.loop(carry[0], ready, lambda po, v: pool_row(po, v, n))
            return [ready]

        def image(n: Any, _: list[Any]) -> None:
            _emit_pack(gen, geo, x, n, r0, scr, ra, q, 1)
            gen.loop(0, nblk, lambda bi, v: block(bi, v, n), [p0] if pf is not None else [])

        def images() -> None:
            gen.loop(0, geo.batch, image)

        gen.when(b.icmp_signed("<", r0, r1), images)
        b.ret_void()


def _gather(gen: Gen, loads: list[Any], idx: list[int]) -> Any:
    """The bytes ``idx`` of ``loads`` laid end to end (each ``vb`` bytes), as one ``vb``-byte vector:
    one two-source shuffle per source after the second."""
    b = gen.b
    vb = loads[0].type.count
    if vb == 64 and len(loads) <= 2 and gen.isa.has("avx512vbmi"):
        # one vpermi2b (LLVM would otherwise make the windows of unpacks and aligns)
        f = gen.intrinsic("llvm.x86.avx512.vpermi2var.qi.512", vt(I8, 64), [vt(I8, 64)] * 3)
        return b.call(f, [loads[0], gen.cv(idx, I8), loads[-1]])
    if len(loads) == 1:
        return b.shuffle_vector(loads[0], loads[0], gen.cv(idx))
    first = [i if i < 2 * vb else 0 for i in idx]
    acc = b.shuffle_vector(loads[0], loads[1], gen.cv(first))
    for s in range(2, len(loads)):
        step = [p if not (s * vb <= i < (s + 1) * vb) else vb + i - s * vb for p, i in enumerate(idx)]
        acc = b.shuffle_vector(acc, loads[s], gen.cv(step))
    return acc


def _kloop(gen: Gen, xq: Any, wt: Any, accs: list[Any], k4: int, qcap: int, mr: int, nv: int) -> list[Any]:
    """The dot products of one tile over the ``k4`` groups: unrolled in steps of :data:`UNROLL`
    groups (a loop over the steps where there are more), the rest after."""
    b = gen.b
    nl = gen.nl
    vb = 4 * nl

    def groups(xc: Any, wc: Any, accs: list[Any], n: int) -> list[Any]:
        accs = list(accs)
        for d in range(n):
            xv = [gen.load(xc, (d * qcap + v * nl) * 4, vt(I8, vb)) for v in range(nv)]
            for mm in range(mr):
                wb = gen.bcast32(wc, (d * mr + mm) * 4, nl)
                for v in range(nv):
                    accs[mm * nv + v] = gen.dot(accs[mm * nv + v], xv[v], wb)
        return accs

    if k4 <= 2 * UNROLL:
        return groups(xq, wt, accs, k4)
    steps = k4 // UNROLL

    def step(si: Any, acc: list[Any]) -> list[Any]:
        d0 = b.mul(si, gen.c(UNROLL))
        xc = b.gep(xq, [b.mul(d0, gen.c(qcap * 4))])
        wc = b.gep(wt, [b.mul(d0, gen.c(mr * 4))])
        return groups(xc, wc, acc, UNROLL)

    accs = gen.loop(0, steps, step, accs)
    rest = k4 - steps * UNROLL
    if rest:
        d0 = steps * UNROLL
        accs = groups(b.gep(xq, [gen.c(d0 * qcap * 4)]), b.gep(wt, [gen.c(d0 * mr * 4)]), accs, rest)
    return accs


#: groups of four ``k`` unrolled per step of the dot-product loop
UNROLL = 8

TEMPLATES: list[Template] = [Int8ConvIm2col()]

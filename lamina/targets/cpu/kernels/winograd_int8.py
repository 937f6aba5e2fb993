"""Exact INT8 Winograd F(4x4, 3x3) for the INT8 3x3 stride-1 convolutions of the CPU target
(``winograd_int8``, priority 12: over ``int8-conv`` and ``int8-conv-channels`` where
:meth:`WinogradInt8.matches` takes the op), bit-exact with ``tpu.Conv``'s ``execute``.

Each 4x4 block of output pixels (a *tile*) of output channel ``n`` is ``Y = Σ_c Σ_taps d[c] w[n,c]``
with ``d = q - zp_in`` (padding 0), computed in integer arithmetic modulo ``2**32``:

* ``X' = B^T d B`` of the tile's 6x6 patch, int16 (``|X'| <= 100 max|d| <= 25500``);
* ``W' = G' g G'^T`` with the integer ``G' = diag(24, 24, 24, 24, 24, 1) G`` (``|W'| <= 144 *
  128``), int16, packed at compile time;
* ``M = Σ_c W' X'`` per position ``xi`` of the 6x6, int32 wrapping, over pairs of channels:
  ``vpdpwssd`` (VNNI) or ``vpmaddwd`` + ``vpaddd`` (a pair's sum is below ``2**30``: no overflow);
* ``Z = A'^T M A'`` with the integer ``A'^T = A^T diag(1, 1, 1, 1, 1, 24)`` (shifts and adds, as
  ``B^T``): ``Z = 576 Y mod 2**32``, so ``Z * 9**-1 = 64 Y mod 2**32`` and ``Y = (Z * 9**-1) >> 6``
  (arithmetic) — exact whenever ``|Y| < 2**25``, which :meth:`WinogradInt8.matches` checks per
  output channel from the constant weights (``max|d| * Σ|w[n]| < 2**25``; else the direct
  kernels run the op).

The contract's accumulator is then ``Y + bias`` (int32 wrap) and the epilogue is the direct
kernel's (``gemm_int8.Gen``: requant, zero point, clamps / ReLU, a fused residual ``tpu.Add`` and
``tpu.Lut``, the same int32 and float forms).

**Schedule.** Blocks of ``R`` rows of tiles (``TW = ceil(OW / 4)`` tiles a row, the block's tiles
``t = r * TW + tw`` in vectors of ``nl`` lanes across tile rows); the parts split the (image,
block) pairs or, where that costs more, every block's panels of ``MR`` output channels (each part
transforming the block's input). Per block, in the part's scratch:

1. per pair of input channels (in chunks of :data:`P_BYTES`): ``P[i][j][t]``, the 36 patch planes
   of the block's tiles as int16 ``d`` pairs (one int32 lane: the two channels; each input row
   loaded with masks, split by column phase mod 4, the planes ``j = 4, 5`` stored once more one
   tile left) — a patch element of ``nl`` consecutive tiles is one aligned load —, then
   ``V[c/2][xi][t] = X'``;
2. per panel: ``M[xi] = W'[xi] x V[xi]`` (36 GEMMs of ``MR`` x ``NV`` vector register tiles over
   ``C/2`` channel pairs, the weights' pairs broadcast, ``W'`` per panel one stream prefetched
   :data:`PREFETCH` bytes ahead) into a per-part buffer, then per channel and vector of tiles the
   output transform, the epilogue on the 16 values of each tile, each output row's four columns
   interleaved into ``4 nl`` bytes, stored by segments (one per tile row the vector spans, masked
   by two scalar bounds: the row's columns, rows past the output).

3x3, stride 1, dilation 1, one group, pads at most 1 each side; 8-bit storage, as ``int8-conv``."""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from .abi import Isa, KernelPlan, Template
from .gemm_f32 import units_or_panels
from .gemm_int8 import (
    BUFFERS,
    I8,
    I16,
    I32,
    ConvGeom,
    Gen,
    Int8Conv,
    LutFusion,
    QuantInfo,
    _fused_key,
    _scalars,
    _set_fast,
    _tables,
    _with_lut,
    fast_shift,
    lanes,
    residual32,
    vnni,
    vt,
)

__all__ = ["WinogradInt8", "winograd_weights", "exact_bound", "BOUND"]

#: ``B^T`` of F(4x4, 3x3)
BT = np.array(
    [
        [4, 0, -5, 0, 1, 0],
        [0, -4, -4, 1, 1, 0],
        [0, 4, -4, -1, 1, 0],
        [0, -2, -1, 2, 1, 0],
        [0, 2, -1, -2, 1, 0],
        [0, 4, 0, -5, 0, 1],
    ],
    np.int64,
)
#: the integer ``G' = diag(24, 24, 24, 24, 24, 1) G`` (rows of absolute sums 6, 12, 12, 7, 7, 1)
GI = np.array([[6, 0, 0], [-4, -4, -4], [-4, 4, -4], [1, 2, 4], [1, -2, 4], [0, 0, 1]], np.int64)
#: the integer ``A'^T = A^T diag(1, 1, 1, 1, 1, 24)``: ``A'^T (G' g G'^T . X') A' = 576 Y``
ATI = np.array(
    [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 24]], np.int64
)
INV9 = pow(9, -1, 1 << 32)
#: ``|Y| < BOUND`` makes ``(Z * 9**-1) >> 6`` exact
BOUND = 1 << 25

#: the most bytes of a block's transformed input ``V`` (read again by every panel)
V_BYTES = 512 * 1024
#: the block's tiles aimed at
COLS = 128
#: how far ahead of the GEMM its weights are prefetched (bytes)
PREFETCH = 2048
#: the most bytes of padded input rows packed before their transform
P_BYTES = 16 * 1024


def winograd_weights(w: np.ndarray) -> np.ndarray:
    """``W'[xi][n][c]`` (``xi = 6a + b``, int16) of int8 weights ``w[n][c][3][3]``."""
    # G' g G'^T by its few nonzero terms, in int32 over whole [N][C] planes (fast at 256 x 256)
    wi = w.astype(np.int32)
    t = [
        [sum(int(GI[a, k]) * wi[:, :, k, j] for k in range(3) if GI[a, k]) for j in range(3)]
        for a in range(6)
    ]
    u = np.stack([np.stack([sum(int(GI[bb, j]) * t[a][j] for j in range(3) if GI[bb, j]) for bb in range(6)])
                  for a in range(6)])  # fmt: skip
    assert np.abs(u).max(initial=0) <= 32767
    return np.ascontiguousarray(u.reshape(36, w.shape[0], w.shape[1]).astype(np.int16))


def dmax(q: QuantInfo) -> int:
    """The largest ``|q - zp_in|`` of the input's storage."""
    if q.in_signed:
        return max(128 + q.zp_in, 127 - q.zp_in)
    return max(q.zp_in, 255 - q.zp_in)


def exact_bound(q: QuantInfo, cout: int) -> np.ndarray:
    """Per output channel, the bound ``max|d| * Σ|w[n]|`` of ``|Y|``."""
    w = np.abs(q.weight.reshape(cout, -1).astype(np.int64)).sum(axis=1)
    return dmax(q) * w


def _tile(isa: Isa, nl: int, nvec: int) -> tuple[int, int]:
    """The GEMM's register tile ``(MR, NV)``: output channels x vectors of tiles (``nvec`` vectors a
    block). 4 x 6 on 16-lane blocks of 6 vectors and more (ResNet-50's 56x56 layers: blocks of 7 and
    6 vectors in 3 tiles instead of 5, 0.394 -> 0.383 ms; 8 x 3 at 28x28 / 14x14 ran faster)."""
    if isa.vector_bytes == 64:
        if not vnni(isa):
            return (4, 3)
        return (4, 6) if nl == 16 and nvec >= 6 else (8, 3)
    return (4, 2)


def _geometry(op: Any) -> tuple[ConvGeom, QuantInfo] | None:
    r = Int8Conv()._geo(op)
    if r is None:
        return None
    g, q = r
    if (g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.groups) != (3, 3, 1, 1, 1, 1, 1):
        return None
    pb, pr = g.oh + 2 - g.ih - g.pt, g.ow + 2 - g.iw - g.pl
    if any(not 0 <= p <= 1 for p in (g.pt, g.pl, pb, pr)):
        return None
    if dmax(q) * 100 > 32767:
        return None
    return g, q


def _widths(isa: Isa) -> list[int]:
    """The vector widths (int32 lanes) the kernel may take: the ISA's, and 8 on AVX-512 with VL
    (the same work per lane on Zen 4's 2 x 256-bit units, fewer lanes wasted on few tiles)."""
    nl = lanes(isa)
    return [nl, 8] if nl == 16 and isa.has("avx512vl") else [nl]


def _layout(geo: ConvGeom, isa: Isa) -> dict[str, Any]:
    """The layout of the lane width that computes the fewest lanes, the narrower one only where
    it saves more than 5 % (ResNet-50's 28x28 layers: 56 lanes for 49 tiles instead of 64, 0.43 ->
    0.39 ms; its 56x56 ones: 200 instead of 208 ran slower)."""
    lays = [_layout_nl(geo, isa, nl) for nl in _widths(isa)]
    return min(lays, key=lambda lay: (lay["lanes"] * (1.0 if lay["nl"] == lanes(isa) else 1.05), -lay["nl"]))


def _layout_nl(geo: ConvGeom, isa: Isa, nl: int) -> dict[str, Any]:
    th, tw = -(-geo.oh // 4), -(-geo.ow // 4)
    groups = -(-(tw + 1) // nl)  # packed groups of 4 * nl columns per input row
    cp = -(-geo.cin // 2)

    best = None
    for r in range(1, th + 1):
        cols = r * tw
        nvec = -(-cols // nl)
        if r > 1 and 144 * cp * nvec * nl > V_BYTES:
            break
        # the lanes computed (the blocks' last vectors partly for nothing), then blocks of about
        # COLS tiles
        last = th - (-(-th // r) - 1) * r
        key = ((-(-th // r) - 1) * nvec * nl + -(-(last * tw) // nl) * nl, abs(cols - COLS))
        if best is None or key < best[0]:
            best = (key, r)
    assert best is not None
    r = best[1]
    cols = r * tw
    nvec = -(-cols // nl)
    vcols = nvec * nl
    mr, nv = _tile(isa, nl, nvec)
    # P: per channel pair, 36 planes (patch row i, column j) of the block's tiles, 16 entries
    # before each (a shifted store's first lane) and slack after (a row's last group)
    plane = 16 + -(-max((r - 1) * tw + groups * nl, vcols) // 16) * 16
    p_cp = 36 * plane * 4
    cpc = max(1, min(cp, P_BYTES // p_cp))  # channel pairs packed at a time
    p_bytes = cpc * p_cp
    v_bytes = 36 * cp * vcols * 4
    m_bytes = 36 * mr * vcols * 4

    def up(v: int) -> int:
        return -(-v // 64) * 64

    last = th - (-(-th // r) - 1) * r  # tile rows of the last block
    return dict(
        lanes=(-(-th // r) - 1) * vcols + -(-(last * tw) // nl) * nl,
        nl=nl,
        mr=mr,
        nv=nv,
        th=th,
        tw=tw,
        groups=groups,
        cp=cp,
        r=r,
        cols=cols,
        nvec=nvec,
        nblk=-(-th // r),
        vcols=vcols,
        plane=plane,
        panels=-(-geo.cout // mr),
        p_cp=p_cp,
        cpc=cpc,
        v_off=up(p_bytes),
        m_off=up(p_bytes) + up(v_bytes),
        scratch=up(p_bytes) + up(v_bytes) + up(m_bytes),
    )


def _pack_weights(w: np.ndarray, cout: int, cin: int, mr: int, panels: int) -> np.ndarray:
    """``W'`` as the GEMM reads it: ``[panel][36][C/2][MR][2]`` int16 (zero rows and channels pad;
    a panel's weights one sequential stream)."""
    u = winograd_weights(w.reshape(cout, cin, 3, 3))
    cp = -(-cin // 2)
    up = np.zeros((36, panels * mr, 2 * cp), np.int16)
    up[:, :cout, :cin] = u
    up = up.reshape(36, panels, mr, cp, 2).transpose(1, 0, 3, 2, 4)
    return np.ascontiguousarray(up).reshape(-1)


class WinogradInt8(LutFusion, Template):
    name = "winograd_int8"
    #: over int8-conv and int8-conv-channels (11) where it matches
    priority = 12
    residual = True

    def __init__(self, force: bool = False):
        #: run every op it can run exactly, whatever its size (the tests)
        self.force = force

    #: the smallest layers it runs, measured against the direct kernels (one thread, Zen 4): 32
    #: channels lost (0.96x at 56x56, 0.90x at 28x28), 48 won (1.17x, 1.31x); maps of fewer than 16
    #: tiles lost (12x12 and 10x10: 9 tiles, 0.93x / 0.70x; 8x8 and 7x7: 4), 14x14 and 16x16 won
    MIN_CIN = 48
    MIN_COUT = 48
    MIN_TILES = 16

    def matches(self, op: Any, isa: Isa) -> bool:
        r = _geometry(op)
        if r is None:
            return False
        geo, q = r
        tiles = -(-geo.oh // 4) * -(-geo.ow // 4)
        small = geo.cin < self.MIN_CIN or geo.cout < self.MIN_COUT or tiles < self.MIN_TILES
        if small and not self.force:
            return False
        return bool(np.all(exact_bound(q, geo.cout) < BOUND))

    def ir_key(self, op: Any, isa: Isa) -> tuple[Any, ...]:
        """Ops of equal keys get the same function but for its name (as ``Int8Conv.ir_key``)."""
        r = _geometry(op)
        assert r is not None
        return (self.name, repr(r[0]), _scalars(r[1]), _fused_key(op, r[1]), isa)

    def code_key(self, op: Any, plan: KernelPlan, isa: Isa) -> Any:
        """:meth:`ir_key`: the compiler's code key (``kernels/codekey.py``)."""
        return self.ir_key(op, isa)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = _geometry(op)
        assert r is not None
        geo, q = r
        assert np.all(exact_bound(q, geo.cout) < BOUND), "a channel's |Y| may reach 2**25"
        lay = _layout(geo, isa)
        mr, panels = lay["mr"], lay["panels"]
        weights = {
            "w": _pack_weights(q.weight, geo.cout, geo.cin, mr, panels),
            **_tables(q, np.zeros(geo.cout, np.int64), panels * mr),
        }
        macs = geo.batch * geo.cout * geo.oh * geo.ow * geo.cin * 9
        nbytes = int(np.prod(op.operands[0].type.shape)) + int(np.prod(op.results[0].type.shape))
        nbytes += weights["w"].nbytes
        return _with_lut(op, symbol, list(BUFFERS), weights, lay["scratch"], macs, nbytes, q=q)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = _geometry(op)
        assert r is not None
        geo, q = r
        lay = _layout(geo, isa)
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        _emit(gen, plan, op, geo, q, lay)


def _emit(gen: Gen, plan: KernelPlan, op: Any, geo: ConvGeom, q: QuantInfo, lay: dict[str, Any]) -> None:
    b = gen.b
    c = gen.c
    nl, mr, nv = lay["nl"], lay["mr"], lay["nv"]
    tw, cp_n, rr_, nblk = lay["tw"], lay["cp"], lay["r"], lay["nblk"]
    nseg = (nl - 1) // tw + 2  # tile rows a vector of tiles spans, at most
    vcols, panels, th, groups = lay["vcols"], lay["panels"], lay["th"], lay["groups"]
    cpc = lay["cpc"]
    cin, cout, h, w, oh, ow = geo.cin, geo.cout, geo.ih, geo.iw, geo.oh, geo.ow
    x, wp, ct, mt, st_, out, scr = gen.std_bufs(plan, q.out_signed, op)
    gen.fast_shift = fast_shift(q)
    gen.res32 = residual32(gen.res[2], q) if gen.res is not None else None
    _set_fast(gen, q, gen.isa)
    i32p = I32.as_pointer()
    prefetch = gen.intrinsic("llvm.prefetch.p0", ir.VoidType(), [gen.bufs[0].type, I32, I32, I32])
    ct, mt, st_ = (b.bitcast(v, i32p) for v in (ct, mt, st_))
    rtab = b.bitcast(gen.res[1], i32p) if gen.res is not None else None
    base = b.gep(scr, [b.mul(gen.part, c(plan.scratch_bytes))])
    pbuf = base
    vbuf = b.gep(base, [c(lay["v_off"])])
    mbuf = b.gep(base, [c(lay["m_off"])])
    v16 = vt(I16, 2 * nl)
    v32 = vt(I32, nl)

    def add(*vals: Any) -> Any:
        """The sum of i64 values and ints (ints folded)."""
        k = sum(v for v in vals if isinstance(v, int))
        vs = [v for v in vals if not isinstance(v, int)]
        if not vs:
            return k
        a = vs[0]
        for v in vs[1:]:
            a = b.add(a, v)
        return b.add(a, c(k)) if k else a

    def mul(a: Any, k: int) -> Any:
        return a * k if isinstance(a, int) else b.mul(a, c(k))

    def shl(v: Any, k: int) -> Any:
        n = v.type.count
        return b.shl(v, ir.Constant(vt(v.type.element, n), [k] * n))

    def bt(d: list[Any]) -> list[Any]:
        """``B^T d`` of six vectors (the common terms once; :data:`BT`)."""
        d42, d31 = b.sub(d[4], d[2]), b.sub(d[3], d[1])
        s12, s34 = b.add(d[1], d[2]), b.add(d[3], d[4])
        e12, e43 = b.sub(d[1], d[2]), b.sub(d[4], d[3])
        t = shl(d31, 1)
        return [
            b.add(shl(b.sub(d[0], d[2]), 2), d42),  # 4 d0 - 5 d2 + d4
            b.sub(s34, shl(s12, 2)),
            b.add(e43, shl(e12, 2)),
            b.add(d42, t),
            b.sub(d42, t),
            b.sub(b.add(shl(b.sub(d[1], d[3]), 2), d[5]), d[3]),  # 4 d1 - 5 d3 + d5
        ]

    def at(m: list[Any]) -> list[Any]:
        """``A'^T m`` of six vectors (:data:`ATI`)."""
        s12, e12 = b.add(m[1], m[2]), b.sub(m[1], m[2])
        s34, e34 = b.add(m[3], m[4]), b.sub(m[3], m[4])
        m5 = b.add(shl(m[5], 4), shl(m[5], 3))
        return [
            b.add(b.add(m[0], s12), s34),
            b.add(e12, shl(e34, 1)),
            b.add(s12, shl(s34, 2)),
            b.add(b.add(e12, shl(e34, 3)), m5),
        ]

    def transform(f: Any, vals: list[list[Any]]) -> list[list[Any]]:
        """``F vals F^T`` of a square grid of vectors (``f``: ``F`` applied to a column)."""
        cols = [f([vals[i][j] for i in range(len(vals))]) for j in range(len(vals[0]))]
        rows = [[cols[j][a] for j in range(len(cols))] for a in range(len(cols[0]))]
        return [f(r) for r in rows]

    ext = (lambda v: b.sext(v, vt(I16, 4 * nl))) if q.in_signed else (lambda v: b.zext(v, vt(I16, 4 * nl)))
    first_off = ir.Constant(vt(ir.IntType(1), nl), [0] + [1] * (nl - 1))
    plane = lay["plane"]
    inv9 = gen.cv([INV9 - (1 << 32) if INV9 >= 1 << 31 else INV9] * nl)
    six = gen.cv([6] * nl)
    iota8 = gen.iota(4 * nl, I8)
    zp_byte = ((q.zp_in + 128) & 0xFF) - 128
    zfill = gen.cv([zp_byte] * (4 * nl), I8)
    zp16 = gen.cv([q.zp_in] * (4 * nl), I16)

    def block(unit: Any, _: list[Any]) -> None:
        img = b.udiv(unit, c(nblk))
        blk = b.urem(unit, c(nblk))
        t0 = b.mul(blk, c(rr_))
        nrows = gen.smin(c(rr_), b.sub(c(th), t0))
        nvb = b.udiv(add(b.mul(nrows, c(tw)), nl - 1), c(nl))  # vectors of the block's tiles
        x_img = b.gep(x, [b.mul(img, c(cin * h * w))])

        # 1. per channel pair: P (the padded rows, d = q - zp as int16 pairs, by column phase),
        #    then V = B^T d B of the block's tiles
        def pack(cpi: Any, _: list[Any]) -> None:
            c0 = b.mul(cpi, c(2))
            pb_ = b.gep(pbuf, [b.mul(b.urem(cpi, c(cpc)), c(lay["p_cp"]))])

            def tile_row(rl: Any, _: list[Any]) -> None:
                for i in range(6):
                    ih = b.sub(add(b.mul(add(t0, rl), c(4)), i), c(geo.pt))
                    inside = b.and_(b.icmp_signed(">=", ih, c(0)), b.icmp_signed("<", ih, c(h)))
                    ihc = gen.smin(gen.smax(ih, c(0)), c(h - 1))
                    ab = []
                    for k in range(2):
                        ch = gen.smin(add(c0, k), c(cin - 1))
                        ok = inside if k == 0 else b.and_(inside, b.icmp_signed("<", add(c0, k), c(cin)))
                        # the row's bytes from column -pl on, zp outside the image (masked lanes
                        # not read)
                        src = b.gep(x_img, [add(b.mul(ch, c(h * w)), b.mul(ihc, c(w)), -geo.pl)])
                        vs = []
                        for g in range(groups):
                            on = [1 if 0 <= g * 4 * nl + e - geo.pl < w else 0 for e in range(4 * nl)]
                            if not any(on):
                                vs.append(zfill)
                                continue
                            mask = ir.Constant(vt(ir.IntType(1), 4 * nl), on)
                            v = gen.load(src, g * 4 * nl, vt(I8, 4 * nl)) if all(on) else gen.masked_load(
                                src, g * 4 * nl, mask, zfill)  # fmt: skip
                            vs.append(b.select(ok, v, zfill))
                        ab.append(vs)
                    # column 4 tw + j of tile (rl, tw) to plane (i, j) at rl * TW + tw: phase j of
                    # the 4 nl columns of group g for j < 4, phase j - 4 one tile left for j >= 4
                    # (its first lane in the previous row's slot when g = 0: not stored). Rows in
                    # order: a row's lanes past its end land in the next rows' slots, rewritten.
                    tb = add(b.mul(rl, c(tw)), 16)
                    for g in range(groups):
                        d0, d1 = (b.sub(ext(ab[k][g]), zp16) if q.zp_in else ext(ab[k][g]) for k in range(2))
                        for ph in range(4):
                            idx = [4 * (e // 2) + ph + (4 * nl if e % 2 else 0) for e in range(2 * nl)]
                            val = b.bitcast(b.shuffle_vector(d0, d1, gen.cv(idx)), v32)
                            gen.store(val, pb_, mul(add(tb, (6 * i + ph) * plane + g * nl), 4))
                            if ph < 2:
                                off = mul(add(tb, (6 * i + 4 + ph) * plane + g * nl - 1), 4)
                                if g == 0:
                                    gen.masked_store(val, pb_, off, first_off)
                                else:
                                    gen.store(val, pb_, off)

            gen.loop(0, nrows, tile_row)

        def trans(cpi: Any, _: list[Any]) -> None:
            pb_ = b.gep(pbuf, [b.mul(b.urem(cpi, c(cpc)), c(lay["p_cp"]))])

            def vec(v: Any, _: list[Any]) -> None:
                d = [[gen.load(pb_, mul(add(b.mul(v, c(nl)), (6 * i + j) * plane + 16), 4), v16, align=4 * nl)
                      for j in range(6)] for i in range(6)]  # fmt: skip
                xs = transform(bt, d)
                for a in range(6):
                    for bb in range(6):
                        off = mul(add(b.mul(cpi, c(36 * vcols)), b.mul(v, c(nl)), (6 * a + bb) * vcols), 4)
                        gen.store(xs[a][bb], vbuf, off, align=4 * nl)

            gen.loop(0, nvb, vec)

        # (in chunks of cpc pairs: the transform reads P long after its stores)
        def chunk(k: Any, _: list[Any]) -> None:
            lo = b.mul(k, c(cpc))
            hi = gen.smin(add(lo, cpc), c(cp_n))
            gen.loop(lo, hi, pack)
            gen.loop(lo, hi, trans)

        gen.loop(0, -(-cp_n // cpc), chunk)

        # 2. per panel: M = W' x V (36 GEMMs), then the output transform and the epilogue
        def panel(p: Any, _: list[Any]) -> None:
            def gemm(xi: Any, _: list[Any]) -> None:
                wbase = b.gep(wp, [b.mul(add(b.mul(p, c(36)), xi), c(cp_n * mr * 4))])
                vrow = b.gep(vbuf, [b.mul(xi, c(vcols * 4))])
                mrow = b.gep(mbuf, [b.mul(xi, c(mr * vcols * 4))])

                def ctile(g: Any, nvt: int) -> None:
                    col0 = mul(g, nv * nl)

                    def kstep(k: Any, accs: list[Any]) -> list[Any]:
                        vb = b.gep(vrow, [b.mul(add(b.mul(k, c(36 * vcols)), col0), c(4))])
                        vv = [gen.load(vb, j * nl * 4, v32) for j in range(nvt)]
                        wb = b.gep(wbase, [b.mul(k, c(mr * 4))])
                        # the panel's weights stream from memory (8x the direct conv's bytes: not
                        # always in cache): fetched PREFETCH bytes ahead
                        b.call(prefetch, [b.gep(wb, [c(PREFETCH)]), ir.Constant(I32, 0), ir.Constant(I32, 3),
                                          ir.Constant(I32, 1)])  # fmt: skip
                        accs = list(accs)
                        for m in range(mr):
                            wv = gen.splat(gen.load(wb, m * 4, I32, align=4), nl)
                            for j in range(nvt):
                                accs[m * nvt + j] = gen.pmadd(vv[j], wv, accs[m * nvt + j])
                        return accs

                    zero = gen.cv([0] * nl)
                    accs = gen.loop(0, cp_n, kstep, [zero] * (mr * nvt))
                    for m in range(mr):
                        for j in range(nvt):
                            gen.store(accs[m * nvt + j], mrow, mul(add(m * vcols, col0, j * nl), 4))

                # the tiles that hold one of the block's nvb vectors (a partial last block
                # skips the rest: ResNet's 56x56 layers, 8 + 6 tile rows of 7 + 6 vectors)
                full = lay["nvec"] // nv
                if full:
                    gen.loop(0, gen.smin(c(full), b.udiv(add(nvb, nv - 1), c(nv))), lambda g, _: ctile(g, nv))
                if lay["nvec"] % nv:
                    with b.if_then(b.icmp_signed(">", nvb, c(full * nv))):
                        ctile(full, lay["nvec"] % nv)

            gen.loop(0, 36, gemm)
            rows = gen.smin(c(mr), b.sub(c(cout), b.mul(p, c(mr))))

            def chan(m: Any, _: list[Any]) -> None:
                co = add(b.mul(p, c(mr)), m)
                bias = gen.splat(b.load(b.gep(ct, [co])), nl)
                mu = gen.splat(b.load(b.gep(mt, [co])), nl)
                sh = gen.splat(b.load(b.gep(st_, [co])), nl)
                plane = b.mul(add(b.mul(img, c(cout)), co), c(oh * ow))
                obase = b.gep(out, [plane])
                am = rm = ash = c32 = fc = None
                rbase = None
                if gen.res is not None and rtab is not None:
                    rbase = b.gep(gen.res[0], [plane])
                    c32, fc, am, rm, ash = gen.residual_consts(rtab, co, cout, nl)
                mrow = b.gep(mbuf, [b.mul(m, c(vcols * 4))])

                def vec(v: Any, _: list[Any]) -> None:
                    t_first = b.mul(v, c(nl))
                    mb = b.gep(mrow, [b.mul(t_first, c(4))])
                    mm = [[gen.load(mb, (6 * a + bb) * mr * vcols * 4, v32, align=4 * nl) for bb in range(6)]
                          for a in range(6)]  # fmt: skip
                    zs = transform(at, mm)
                    # the bytes e of an output row's vector: tile v * nl + e // 4, column e % 4; the
                    # tiles' rows rl0 .. rl0 + nseg - 1 of the block each a run of the vector, bytes
                    # [e0, e0 + OW) of it (e0 = 4 (rs TW - v nl)), as far as the vector spans
                    rl0 = b.udiv(t_first, c(tw))
                    segs = []
                    for sg in range(nseg):
                        rs_ = add(rl0, sg)
                        e0 = b.mul(b.sub(b.mul(rs_, c(tw)), t_first), c(4))
                        lo_ = gen.smax(e0, c(0))
                        hi_ = gen.smin(add(e0, ow), c(4 * nl))
                        segs.append((rs_, lo_, hi_, b.icmp_signed("<", rs_, nrows)))
                    for i in range(4):
                        accs = [b.add(b.ashr(b.mul(zs[i][j], inv9), six), bias) for j in range(4)]
                        stores = []
                        for rs_, lo_, hi_, in_blk in segs:
                            ohv = add(b.mul(add(t0, rs_), c(4)), i)
                            ok = b.and_(in_blk, b.icmp_signed("<", ohv, c(oh)))
                            hi_i = b.trunc(b.select(ok, hi_, lo_), I8)
                            mask = b.and_(
                                b.icmp_signed(">=", iota8, gen.splat(b.trunc(lo_, I8), 4 * nl)),
                                b.icmp_signed("<", iota8, gen.splat(hi_i, 4 * nl)),
                            )
                            off = add(b.mul(ohv, c(ow)), b.mul(t_first, c(4)), b.mul(rs_, c(-4 * tw)))
                            stores.append((off, mask))
                        rs: list[Any] = []
                        if rbase is not None:
                            rv = gen.cv([0] * (4 * nl), I8)
                            for off, mask in stores:
                                rv = gen.masked_load(rbase, off, mask, rv)
                            rs = [
                                b.shuffle_vector(rv, rv, gen.cv([4 * t + j for t in range(nl)]))
                                for j in range(4)
                            ]

                        def exact(accs: list[Any] = accs, rs: list[Any] = rs) -> list[Any]:
                            ys = []
                            for j in range(4):
                                y = gen.requant(accs[j], None, mu, sh, q, lut=False, raw=gen.res is not None)
                                if gen.res is not None:
                                    y = gen.add_residual(y, rs[j], am, rm, ash, q, consts=c32, lut=False)
                                ys.append(y)
                            return ys

                        if fc is not None and gen.fast1 is not None:
                            ys = gen.fast_requant_residual(accs, rs, mu, sh, q, fc, exact)
                        else:
                            ys = exact()
                        y01 = b.shuffle_vector(ys[0], ys[1], gen.iota(2 * nl))
                        y23 = b.shuffle_vector(ys[2], ys[3], gen.iota(2 * nl))
                        yrow = b.shuffle_vector(
                            y01, y23, gen.cv([(e % 4) * nl + e // 4 for e in range(4 * nl)])
                        )
                        yrow = gen.apply_luts([yrow])[0]
                        for off, mask in stores:
                            gen.masked_store(yrow, obase, off, mask)

                gen.loop(0, nvb, vec)

            gen.loop(0, rows, chan)

        gen.loop(p_lo, p_hi, panel)

    units = geo.batch * nblk
    lo, hi, p_lo, p_hi = units_or_panels(b, gen.nparts, units, panels, 1.0, gen.part_range)
    gen.loop(lo, hi, block)
    b.ret_void()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [WinogradInt8()]

"""Winograd F(2x2, 3x3) for the F32 3x3 stride-1 convolutions of the CPU target (``winograd_f32``,
priority 11: over ``conv_f32`` where :meth:`WinogradF32.matches` says it wins).

Each 2x2 block of output pixels (a *tile*) is ``A^T [ (G g G^T) . (B^T d B) ] A`` of its 4x4 input
patch ``d``: 16 products per tile and channel pair instead of 36 multiply-adds, 2.25x fewer MACs.

* **Weights** (compile time): ``U[xi][co][ci] = (G g G^T)`` for the 16 positions ``xi``, packed as
  :mod:`.conv_f32` packs a GEMM's panels, ``[16][Cout/mr][Cin][mr]`` (zero rows pad the last).
* **Blocks**: ``R`` rows of tiles (``TW = ceil(OW / 2)`` tiles each; ``R`` chosen so that the
  block's ``R * TW`` columns fill whole GEMM tiles and the transformed input stays near
  :data:`V_BYTES`); the parts split the (image, block) pairs — or, where that costs more (fewer
  pairs than parts: one block of a 14x14 layer), every block's panels of output channels, each
  part transforming the block's input (``Fn.share_units_or_panels``). Per block, in the part's
  scratch:
  1. ``P``: the ``2R + 2`` input rows of each channel, zero-padded (``pad`` columns left, zeros
     right; rows outside the image all zeros);
  2. ``V[xi][ci][t] = (B^T d B)[xi]`` for the block's tiles ``t = r * TW + tw``, vectors of
     ``lanes`` tiles along a row (a patch column is the even or odd elements of two vectors of
     ``P``: one two-source shuffle);
  3. per panel of ``mr`` output channels: ``M[xi] = U[xi] x V[xi]`` by the register-tiled FMA
     micro-kernel (:func:`.gemm_f32.gemm_tile`), stored in a small per-panel buffer, then
     ``Y = A^T M A`` per tile, the two output columns of a tile row interleaved into one vector of
     ``2 * lanes`` pixels, the epilogue (bias, the op's ReLU, a fused SiLU or residual add +
     ReLU, as :class:`.conv_f32.ConvF32` fuses them) and a store masked at the row's end.

Within 1e-4 of ``execute`` (the transforms' sums round differently: a few ulp of the inputs'
magnitude). 3x3, stride 1, dilation 1, one group, padding at most 1 each side; F32 only."""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir

from .abi import Isa, KernelPlan, Template
from .conv_f32 import ConvPlan, _chain, _epilogue_ops, _float_conv, conv_geometry
from .gemm_f32 import (
    I32,
    Epilogue,
    Fn,
    Int,
    Tile,
    _relu_attrs,
    elem_name,
    gemm_tile,
    store_tile,
    tile_for,
    vsilu,
    weight_of,
)
from .generic_ir import fused_consumers

__all__ = ["V_BYTES", "WinogradF32", "winograd_weights"]

#: the most bytes of a block's transformed input ``V`` (read again by every panel of output channels)
V_BYTES = 1024 * 1024
#: the block's GEMM columns (tiles) aimed at
COLS = 192

_G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]], np.float64)


def winograd_weights(w: np.ndarray) -> np.ndarray:
    """``U[xi][co][ci]`` (``xi = 4a + b``) of 3x3 weights ``w[co][ci][3][3]``: ``G g G^T``."""
    u = np.einsum("ak,oikl,bl->aboi", _G, w.astype(np.float64), _G)
    return np.ascontiguousarray(u.reshape(16, w.shape[0], w.shape[1]).astype(np.float32))


def _geometry(op: Any) -> dict[str, Any] | None:
    if _float_conv(op) != "f32":
        return None
    g = conv_geometry(op)
    if g is None:
        return None
    xs, ys, k, s, d, p, groups = g
    if list(k) != [3, 3] or list(s) != [1, 1] or list(d) != [1, 1] or groups != 1:
        return None
    if len(p) != 4 or any(v < 0 or v > 1 for v in p):
        return None
    n, cin, h, w = xs
    cout, oh, ow = ys[1], ys[2], ys[3]
    if oh != h + p[0] + p[2] - 2 or ow != w + p[1] + p[3] - 2 or oh < 2 or ow < 2:
        return None
    return dict(n=n, cin=cin, h=h, w=w, cout=cout, oh=oh, ow=ow, pt=p[0], pl=p[1])


def _layout(geo: dict[str, Any], isa: Isa) -> dict[str, Any]:
    tile = tile_for(isa)
    ln, _nb = tile.lanes, tile.nb
    th, tw = -(-geo["oh"] // 2), -(-geo["ow"] // 2)
    twv = -(-tw // ln)  # vectors of tiles per tile row
    cin = geo["cin"]
    best = None
    for r in range(1, th + 1):
        cols = r * tw
        if r > 1 and 64 * cin * cols > V_BYTES:
            break
        # lanes the GEMM computes for nothing (its tail tile skips whole empty vectors), unused tile
        # rows of the last block; then blocks of about COLS columns (fewer, longer GEMM rows)
        waste = 1 - cols / (-(-cols // ln) * ln) + (-(-th // r) * r - th) / th
        key = (round(waste, 2), abs(cols - COLS))
        if best is None or key < best[0]:
            best = (key, r)
    assert best is not None
    r = best[1]
    cols = r * tw
    # P rows: 2 * twv * ln + 2 columns read (pl of them padding), plus one vector of slack
    prow = -(-(2 * twv * ln + 2 + 2 * ln) // ln) * ln
    # V columns: whole vectors past the block's columns (the GEMM's tail tile reads and writes
    # them), and the slack a tile row's last (masked) vector spans
    vcols = max(-(-cols // ln) * ln, (r - 1) * tw + twv * ln)
    panels = -(-geo["cout"] // tile.mr)
    return dict(
        geo,
        tile=tile,
        th=th,
        tw=tw,
        twv=twv,
        r=r,
        cols=cols,
        nblk=-(-th // r),
        vcols=vcols,
        prow=prow,
        panels=panels,
        p_bytes=4 * cin * (2 * r + 2) * prow,
        v_bytes=4 * 16 * cin * vcols,
        m_bytes=4 * 16 * tile.mr * vcols,
    )


class WinogradF32(Template):
    name = "winograd_f32"
    priority = 11
    code_reads_constants = False  # the transformed weights and bias are buffers (kernels/codekey.py)

    #: the smallest layers measured faster than conv_f32 (YOLO's and ResNet-18's 3x3 stride-1 layers,
    #: ``benchmarks/cpu_yolo_kernels.py``, Zen 4): 16 channels at 160x160 1.5x, 20x20 1.6-2x
    MIN_CIN = 16
    MIN_COUT = 16
    MIN_OW = 8

    def matches(self, op: Any, isa: Isa) -> bool:
        geo = _geometry(op)
        if geo is None:
            return False
        if geo["cin"] < self.MIN_CIN or geo["cout"] < self.MIN_COUT or geo["ow"] < self.MIN_OW:
            return False
        # a block of fewer than two vectors of tiles (very many input channels on few columns)
        # leaves the GEMM too few independent accumulators
        lay = _layout(geo, isa)
        return bool(lay["cols"] >= 2 * lay["tile"].lanes)

    def fuses(self, op: Any, consumer: Any) -> bool:
        """As :meth:`.conv_f32.ConvF32.fuses`: a residual add (then a ReLU) or a SiLU."""
        chain = _chain(op, consumer)
        if chain is None or op.get_attr("cpu.fused") is not None:
            return False
        return _epilogue_ops(op, [*chain, consumer]) is not None

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        geo = _geometry(op)
        assert geo is not None
        lay = _layout(geo, isa)
        tile: Tile = lay["tile"]
        mr, cout, cin = tile.mr, lay["cout"], lay["cin"]
        fused = fused_consumers(op)
        ep = _epilogue_ops(op, fused) if fused else None
        res_value, post_relu, silu = ep if ep is not None else (None, False, None)
        u = winograd_weights(weight_of(op.filter).reshape(cout, cin, 3, 3))  # type: ignore[union-attr]
        up = np.zeros((16, lay["panels"] * mr, cin), np.float32)
        up[:, :cout] = u
        up = np.ascontiguousarray(up.reshape(16, lay["panels"], mr, cin).transpose(0, 1, 3, 2))
        weights = {"w": up}
        bufs: list[tuple[str, Any]] = [("in", "input")]
        if res_value is not None:
            bufs.append(("in", res_value))
        bufs.append(("weight", "w"))
        bias = op.bias
        if elem_name(bias.type) is not None:
            b = np.zeros(lay["panels"] * mr, np.float32)
            b[:cout] = weight_of(bias).reshape(-1)  # type: ignore[union-attr]
            weights["b"] = b
            bufs.append(("weight", "b"))
        bufs.append(("out", 0 if fused else "output"))
        bufs.append(("scratch", None))
        scratch = lay["p_bytes"] + lay["v_bytes"] + lay["m_bytes"]
        n, oh, ow = lay["n"], lay["oh"], lay["ow"]
        return ConvPlan(
            symbol,
            bufs,
            weights,
            -(-scratch // 64) * 64,
            macs=n * cout * oh * ow * cin * 9,
            bytes=4 * n * (cin * lay["h"] * lay["w"] + (2 if res_value is not None else 1) * cout * oh * ow)
            + up.nbytes,
            residual=res_value is not None,
            post_relu=post_relu,
            silu=silu,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        geo = _geometry(op)
        assert geo is not None
        lay = _layout(geo, isa)
        tile: Tile = lay["tile"]
        ln, nb, mr = tile.lanes, tile.nb, tile.mr
        cin, cout, h, w, oh, ow = (lay[k] for k in ("cin", "cout", "h", "w", "oh", "ow"))
        th, tw, _twv, r, nblk = lay["th"], lay["tw"], lay["twv"], lay["r"], lay["nblk"]
        vcols, prow, panels = lay["vcols"], lay["prow"], lay["panels"]
        pt, pl = lay["pt"], lay["pl"]
        relu, limit = _relu_attrs(op)
        silu = getattr(plan, "silu", None)
        post_relu = bool(getattr(plan, "post_relu", False))

        fn = Fn(module, plan.symbol)
        b = fn.b
        ptr: dict[str, ir.Value] = {}
        for i, (kind, key) in enumerate(plan.buffers):
            name = (
                ("input" if key == "input" else "residual")
                if kind == "in"
                else "output"
                if kind == "out"
                else "scratch"
                if kind == "scratch"
                else key
            )
            ptr[name] = fn.buf(i)
        i8 = ir.IntType(8)
        base = fn.at(ptr["scratch"], fn.mul(fn.part, plan.scratch_bytes), i8)
        pbuf = base
        vbuf = fn.at(base, lay["p_bytes"], i8)
        mbuf = fn.at(base, lay["p_bytes"] + lay["v_bytes"], i8)
        memcpy = fn.intrinsic(
            "llvm.memcpy.p0.p0.i64", ir.VoidType(), [ir.PointerType()] * 2 + [ir.IntType(64), ir.IntType(1)]
        )
        zero = fn.vzero(ln)
        rows_p = 2 * r + 2

        def even_odd(a: ir.Value, c: ir.Value) -> tuple[ir.Value, ir.Value]:
            ev = ir.Constant(ir.VectorType(I32, ln), [2 * i for i in range(ln)])
            od = ir.Constant(ir.VectorType(I32, ln), [2 * i + 1 for i in range(ln)])
            return b.shuffle_vector(a, c, ev), b.shuffle_vector(a, c, od)

        def block(unit: ir.Value, _c: Any) -> None:
            img = fn.udiv(unit, nblk)
            blk = b.urem(unit, fn.c(nblk))
            t0 = fn.mul(blk, r)  # first tile row
            x_img = fn.at(ptr["input"], fn.mul(img, cin * h * w))
            y_img = fn.at(ptr["output"], fn.mul(img, cout * oh * ow))
            r_img = fn.at(ptr["residual"], fn.mul(img, cout * oh * ow)) if "residual" in ptr else None

            # 1. P: the block's padded input rows
            def fill(ci: ir.Value, _c: Any) -> None:
                def one_row(rr: ir.Value, _c: Any) -> None:
                    dst = fn.at(pbuf, fn.mul(fn.add(fn.mul(ci, rows_p), rr), prow))
                    for j in range(prow // ln):
                        fn.vstore(zero, fn.at(dst, j * ln))
                    ih = fn.sub(fn.add(fn.mul(t0, 2), rr), pt)
                    inside = b.and_(
                        b.icmp_signed(">=", fn.c(ih), fn.c(0)), b.icmp_signed("<", fn.c(ih), fn.c(h))
                    )

                    def copy() -> None:
                        src = fn.at(x_img, fn.add(fn.mul(ci, h * w), fn.mul(ih, w)))
                        b.call(
                            memcpy,
                            [
                                fn.at(dst, pl),
                                src,
                                ir.Constant(ir.IntType(64), 4 * w),
                                ir.Constant(ir.IntType(1), 0),
                            ],
                        )

                    fn.when(inside, copy)

                fn.loop(0, rows_p, one_row)

            fn.loop(0, cin, fill)

            # 2. V = B^T d B for every tile of the block, vectors of ln tiles along a tile row
            def vtrans(ci: ir.Value, _c: Any) -> None:
                def trow(rl: ir.Value, _c: Any) -> None:
                    prow0 = fn.at(pbuf, fn.mul(fn.add(fn.mul(ci, rows_p), fn.mul(rl, 2)), prow))

                    def vec(v: Int, mask: Any) -> None:
                        d = []
                        for rr in range(4):
                            row = fn.at(prow0, fn.add(rr * prow, fn.mul(v, 2 * ln)))
                            a0, a1 = fn.vload(row, ln), fn.vload(fn.at(row, ln), ln)
                            c0, c1 = fn.vload(fn.at(row, 2), ln), fn.vload(fn.at(row, ln + 2), ln)
                            e0, o0 = even_odd(a0, a1)
                            e2, o2 = even_odd(c0, c1)
                            d.append([e0, o0, e2, o2])
                        # rows: B^T d
                        t = [
                            [b.fsub(d[0][c], d[2][c]) for c in range(4)],
                            [b.fadd(d[1][c], d[2][c]) for c in range(4)],
                            [b.fsub(d[2][c], d[1][c]) for c in range(4)],
                            [b.fsub(d[1][c], d[3][c]) for c in range(4)],
                        ]
                        col = fn.add(fn.mul(rl, tw), fn.mul(v, ln))
                        for a in range(4):
                            q = t[a]
                            vals = [
                                b.fsub(q[0], q[2]),
                                b.fadd(q[1], q[2]),
                                b.fsub(q[2], q[1]),
                                b.fsub(q[1], q[3]),
                            ]
                            for bb in range(4):
                                xi = 4 * a + bb
                                dst = fn.at(vbuf, fn.add(fn.mul(fn.add(xi * cin, ci), vcols), col))
                                fn.vstore(vals[bb], dst, mask)

                    full = tw // ln
                    fn.loop(0, full, lambda v, _c: vec(v, None))
                    if tw % ln:
                        vec(full, fn.mask(ln, tw % ln))

                fn.loop(0, r, trow)

            fn.loop(0, cin, vtrans)

            # 3. per panel: M = U x V (16 GEMMs), then Y = A^T M A with the epilogue
            cols = lay["cols"]
            ncol_tiles = cols // nb
            ctail = cols - ncol_tiles * nb
            # the tail tile: as many vectors as the block's last columns need (a partial one in full:
            # its extra lanes land in V's and M's slack)
            ttile = Tile(ln, mr, -(-ctail // ln))

            def panel(p: Int, rows: int) -> None:
                def gemm(xi: ir.Value, _c: Any) -> None:
                    wpan = fn.at(ptr["w"], fn.mul(fn.add(fn.mul(xi, panels), p), cin * mr))
                    vrow = fn.at(vbuf, fn.mul(xi, cin * vcols))
                    mrow = fn.at(mbuf, fn.mul(xi, mr * vcols))

                    def ctile(g: Int, tl: Tile) -> None:
                        bp = fn.at(vrow, fn.mul(g, nb))
                        accs = gemm_tile(fn, tl, rows, cin, wpan, 1, mr, bp, vcols)
                        store_tile(fn, tl, accs, rows, fn.at(mrow, fn.mul(g, nb)), vcols, Epilogue())

                    fn.loop(0, ncol_tiles, lambda g, _c: ctile(g, tile))
                    if ctail:
                        ctile(ncol_tiles, ttile)

                fn.loop(0, 16, gemm)

                def chan(i: ir.Value, _c: Any) -> None:
                    co = fn.add(fn.mul(p, mr), i)
                    bias = fn.splat(fn.load(fn.at(ptr["b"], co)), 2 * ln) if "b" in ptr else None
                    inter = ir.Constant(
                        ir.VectorType(I32, 2 * ln), [j // 2 + (j % 2) * ln for j in range(2 * ln)]
                    )

                    def orow(rl: ir.Value, _c: Any) -> None:
                        tr = fn.add(t0, rl)

                        def vec(v: Int, mask: Any) -> None:
                            col = fn.add(fn.mul(rl, tw), fn.mul(v, ln))
                            m = [
                                fn.vload(
                                    fn.at(
                                        mbuf, fn.add(fn.mul(xi * mr, vcols), fn.add(fn.mul(i, vcols), col))
                                    ),
                                    ln,
                                )
                                for xi in range(16)
                            ]
                            # rows: A^T M (a = 0, 1), per column c
                            s0 = [b.fadd(b.fadd(m[c], m[4 + c]), m[8 + c]) for c in range(4)]
                            s1 = [b.fsub(b.fsub(m[4 + c], m[8 + c]), m[12 + c]) for c in range(4)]
                            for a, s in ((0, s0), (1, s1)):
                                y0 = b.fadd(b.fadd(s[0], s[1]), s[2])
                                y1 = b.fsub(b.fsub(s[1], s[2]), s[3])
                                yv = b.shuffle_vector(y0, y1, inter)
                                ohv = fn.add(fn.mul(tr, 2), a)
                                off = fn.add(fn.add(fn.mul(co, oh * ow), fn.mul(ohv, ow)), fn.mul(v, 2 * ln))

                                def store(yv: ir.Value = yv, off: Int = off) -> None:
                                    out = yv
                                    z2 = fn.vzero(2 * ln)
                                    if bias is not None:
                                        out = b.fadd(out, bias)
                                    if relu:
                                        out = b.select(b.fcmp_unordered(">=", out, z2), out, z2)
                                        if limit > 0:
                                            lim = fn.vconst(limit, 2 * ln)
                                            out = b.select(b.fcmp_unordered("<=", out, lim), out, lim)
                                    if silu is not None:
                                        out = vsilu(fn, out, silu)
                                    if r_img is not None:
                                        out = b.fadd(out, fn.vload(fn.at(r_img, off), 2 * ln, mask=mask))
                                        if post_relu:
                                            out = b.select(b.fcmp_unordered(">=", out, z2), out, z2)
                                    fn.vstore(out, fn.at(y_img, off), mask)

                                if a == 1 and oh % 2:
                                    fn.when(fn.lt(ohv, oh), store)
                                else:
                                    store()

                        fullp = ow // (2 * ln)  # whole vectors of output pixels per row
                        fn.loop(0, fullp, lambda v, _c: vec(v, None))
                        if ow % (2 * ln):
                            vec(fullp, fn.mask(2 * ln, ow % (2 * ln)))

                    nrows = fn.min(r, fn.sub(th, t0))
                    fn.loop(0, nrows, orow)

                fn.loop(0, rows, chan)

            full_panels = cout // mr
            fn.loop(p_lo, fn.min(p_hi, full_panels), lambda p, _c: panel(p, mr))
            if cout % mr:
                mine = fn.b.and_(fn.lt(full_panels, p_hi), fn.b.not_(fn.lt(full_panels, p_lo)))
                fn.when(mine, lambda: panel(full_panels, cout % mr))

        # the (image, block) pairs split between the parts, or each block's panels (one V transform
        # per part: about one panel's work)
        lo, hi, p_lo, p_hi = fn.share_units_or_panels(lay["n"] * nblk, lay["panels"], 1.0)
        fn.loop(lo, hi, block)
        fn.ret()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [WinogradF32()]

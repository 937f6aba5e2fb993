"""Fast FP32 (and F16/BF16-mode) convolution templates for the CPU target: :class:`ConvF32` (dense
2-d convolutions as a GEMM ``W[Cout, K] x X[K, HW]``) and :class:`DepthwiseF32` (direct, along W).

**ConvF32**, NCHW in and out as the ``tpu`` op, in one of two modes chosen per layer by the share
of vector lanes each wastes:

* *channel-major* (``"nchw"``, most layers): weights packed at compile time into panels of ``mr``
  output channels, ``[Cout/mr][K][mr]`` (``K = Cin * kh * kw``, zero rows pad the last panel); the
  micro-kernel (:func:`.gemm_f32.gemm_tile`) broadcasts ``mr`` weights per k and FMAs them into
  ``nv`` vectors of consecutive output pixels, so each tile row is stored straight into NCHW
  (masked at the tail). 1x1 stride-1 unpadded F32 convolutions read the input in place
  (``X[Cin, HW]`` *is* the GEMM operand); the others copy a block of output rows' windows into the
  part's scratch first (im2col, ``[K][rows * OW]``: contiguous vector copies along W for stride 1,
  even-lane shuffles for stride 2, scalar copies otherwise; zeros for the padding; f16/bf16
  widened to f32 here; W strides 1 and 2 write whole vectors, one masked load each). F32
  convolutions with fewer H phases than kernel rows (``kh * dh % sh``: every 3x3/1 or /2, the 7x7/2
  stem) copy instead one row-shifted copy per (channel, H phase, kw) over the block's rows and the
  ``kh * dh // sh`` after them (:func:`_im2col_shift`), which the micro-kernel reads at a static
  offset per tap (``b_taps``): ``kh / phases`` times fewer bytes copied. The block's row count is
  chosen to fill whole tiles (over 1 and 2 parts, at most :data:`MAX_COLS` pixels); F32
  convolutions split K into blocks of input channels so that a block stays near
  :data:`BLOCK_BYTES` (in L2 while every weight panel passes over it), the partial sums waiting in
  the output (the epilogue runs with the last K block).
* *pixel-major* (``"pix"``, few pixels: 7x7, 14x14, ... where pixel tails would waste lanes):
  weights packed ``[Cout/nb][K][nb]``; the micro-kernel broadcasts ``mr`` pixels' window values and
  FMAs them into ``nv`` vectors of output channels. Each part copies the whole image's windows (at
  most :data:`PIX_BYTES`; row-shifted copies as above where they apply, ``a_taps``). K runs in
  blocks of about :data:`PIX_KC`: per panel, each of the part's tiles goes over one block before
  the next (the block of the weight panel stays in L2), the partial sums in the part's buffer.
  F32 tiles with 16-lane vectors are transposed in registers (:func:`_transpose16x8`) and stored
  as one masked 8-lane vector of the tile's pixels per channel (the residual loaded alike); other
  types and ISAs go through a per-part buffer and out channel by channel.

Parts (threads) split the output rows (im2col) or the pixel tiles (in place), each part writing its
own pixels of every channel; with few pixels they split the output-channel panels (channel-major)
or the (channel panel, pixel tile) pairs (pixel-major) instead.

Epilogue (K-blocked convolutions: in the last K block only): bias, ReLU / ReLU limit as the op has
them and, declared in the plan (:meth:`ConvF32.plan` ``residual=True``, ``post_relu``) or fused by
the compiler (:meth:`ConvF32.fuses`: a following ``tpu.Add`` of the result and a tensor of its type,
then a ``tpu.Relu``; or an F32 ``tpu.SiLU``), a residual add and a ReLU after it, or a SiLU (an
inline vectorized sigmoid, :func:`.gemm_f32.vsigmoid`).

**DepthwiseF32** (``group == Cin == Cout``, stride 1 or 2 along W): per channel, the part's scratch
holds the zero-padded input plane (stride 2: its even and odd columns as two planes); each output
row is ``kh * kw`` FMAs of weight broadcasts with contiguous vectors loaded along W, several rows
at once (AVX-512: 4, or 2 at stride 2 along H) so that their shared input rows load once. Parts
split the channels.

1-d convolutions (NCW) run as 2-d ones of height 1. Grouped convolutions (not depthwise, e.g. a depthwise
multiplier) run one channel-major GEMM per group. ``matches`` refuses what these do not do
exactly (3-d, element types that differ
between operands, non-constant weights) so that a generic template takes it; depthwise ones with
a stride above 2 along W run as grouped GEMMs. The kernels' code depends on the op's shapes, attributes and the ISA only
(weights are buffers): ops alike in those can share one function.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from lamina.ir.types import NoneType

from .abi import Isa, KernelPlan, Template
from .gemm_f32 import (
    ELEMS,
    F32,
    I32,
    UNROLL,
    Epilogue,
    Fn,
    Int,
    Tile,
    _relu_attrs,
    elem_name,
    gemm_tile,
    static_shape,
    store_tile,
    tile_for,
    vsilu,
    weight_of,
)
from .generic_ir import fused_consumers

#: target size of an im2col block (bytes): it stays in L2 while every weight panel passes over it
BLOCK_BYTES = 384 * 1024
#: output rows a depthwise kernel computes at once (AVX-512, stride 1 along H; stride 2: 2)
DW_ROWS = 4
#: the most output pixels in an im2col block (K-blocked f32 convolutions)
MAX_COLS = 384
#: the largest whole-image im2col (bytes) for which the pixel-major mode is considered
PIX_BYTES = 2 * 1024 * 1024
#: bytes after an im2col block that its last row's whole-vector stores may write (:func:`_im2col`)
SLACK = 64
#: K per block of the pixel-major mode (its block of a 64-channel weight panel: 64 KiB, in L2)
PIX_KC = 256


def conv_geometry(
    op: Any,
) -> tuple[tuple[int, ...], tuple[int, ...], list[int], list[int], list[int], list[int], int] | None:
    """(x shape, y shape, kernel, strides, dilations, pads, group) of a static 2-d ``tpu.Conv``; a
    1-d one (NCW) as a 2-d one of height 1 (the same bytes)."""
    xs, ws, ys = (static_shape(v.type) for v in (op.input, op.filter, op.output))
    if xs is None or ws is None or ys is None or len(xs) != len(ws) or len(xs) not in (3, 4):
        return None
    k, s, d, p = op.geometry(xs, ws)
    if len(xs) == 3:
        one = (xs[0], xs[1], 1, xs[2]), (ys[0], ys[1], 1, ys[2])
        return one[0], one[1], [1, k[0]], [1, s[0]], [1, d[0]], [0, p[0], 0, p[1]], int(op.attr("group"))
    return xs, ys, list(k), list(s), list(d), list(p), int(op.attr("group"))


def _float_conv(op: Any) -> str | None:
    """The element type of a float-mode conv whose operands all have it, with constant weights."""
    if op.name != "tpu.Conv" or len(op.operands) != 3:
        return None
    ft = elem_name(op.input.type)
    if ft is None or elem_name(op.output.type) != ft or elem_name(op.filter.type) != ft:
        return None
    if weight_of(op.filter) is None:
        return None
    if not isinstance(op.bias.type, NoneType) and (
        elem_name(op.bias.type) != ft or weight_of(op.bias) is None
    ):
        return None
    return ft


def _bias(op: Any, n: int, pad_to: int) -> np.ndarray | None:
    if isinstance(op.bias.type, NoneType):
        return None
    b = np.zeros(pad_to, np.float32)
    b[:n] = weight_of(op.bias).reshape(-1)  # type: ignore[union-attr]
    return b


def _buffers(has_bias: bool, scratch: bool) -> list[tuple[str, Any]]:
    bufs: list[tuple[str, Any]] = [("in", "input"), ("weight", "w")]
    if has_bias:
        bufs.append(("weight", "b"))
    bufs.append(("out", "output"))
    if scratch:
        bufs.append(("scratch", None))
    return bufs


def _bufptrs(fn: Fn, plan: KernelPlan) -> dict[str, ir.Value]:
    """The buffers by role: ``input``, ``residual`` (any other ``in``: the residual, by name or by
    the fused add's operand), ``output``, ``scratch`` and the weights by key."""
    out: dict[str, ir.Value] = {}
    for i, (kind, key) in enumerate(plan.buffers):
        if kind == "in":
            name = "input" if key in ("input", 0) else "residual"
        elif kind == "out":
            name = "output"
        elif kind == "scratch":
            name = "scratch"
        else:
            name = key
        out[name] = fn.buf(i)
    return out


def _chain(op: Any, consumer: Any) -> list[Any] | None:
    """The single-user chain from ``op``'s result up to (not including) ``consumer``, or None
    when ``consumer`` is not on it."""
    chain: list[Any] = []
    cur = op
    while len(cur.results) == 1 and len(cur.results[0].users) == 1:
        u = cur.results[0].users[0]
        if u is consumer:
            return chain
        chain.append(u)
        cur = u
    return None


def _epilogue_ops(op: Any, ops: list[Any]) -> tuple[Any, bool, float | None] | None:
    """What a chain of consumers fused after a float conv computes, when the epilogue can:
    ``(residual, post_relu, silu_alpha)`` — ``[Add(conv, r)]``, ``[Add(conv, r), Relu]`` or
    ``[SiLU]``; else None."""
    if not ops or len(ops) > 2:
        return None
    t = op.results[0].type
    first = ops[0]
    if first.name == "tpu.SiLU" and len(ops) == 1:
        alpha = first.attr("alpha")
        if len(first.operands) != 1 or first.results[0].type != t:
            return None
        return None, False, float(alpha) if alpha is not None else 1.0
    if first.name != "tpu.Add" or len(first.operands) != 2 or first.results[0].type != t:
        return None
    if any(first.attr(a) is not None for a in ("multiplier", "rshift", "do_relu", "coeff")):
        return None
    a, b = first.operands
    r = b if a is op.results[0] else a if b is op.results[0] else None
    if r is None or r is op.results[0] or r.type != t:
        return None
    if len(ops) == 2:
        relu = ops[1]
        if relu.name != "tpu.Relu" or len(relu.operands) != 1 or relu.results[0].type != t:
            return None
        if any(relu.attr(a) is not None for a in ("relu_limit", "do_relu")):
            return None
    return r, len(ops) == 2, None


@dataclass
class ConvPlan(KernelPlan):
    """A :class:`KernelPlan` with the fused residual add (and ReLU after it) of :meth:`ConvF32.plan`."""

    residual: bool = False
    post_relu: bool = False
    silu: float | None = None


class ConvF32(Template):
    """Dense or grouped 2-d (or 1-d) ``tpu.Conv`` in a float mode as a register-tiled GEMM (grouped:
    one GEMM per group, channel-major; depthwise ones are :class:`DepthwiseF32`'s)."""

    name = "conv_f32"
    priority = 10
    code_reads_constants = False  # the weights and bias are buffers (kernels/codekey.py)

    def matches(self, op: Any, isa: Isa) -> bool:
        if _float_conv(op) is None:
            return False
        g = conv_geometry(op)
        if g is None:
            return False
        xs, ys, grp = g[0], g[1], g[6]
        # depthwise: DepthwiseF32's, unless its W stride is one that template does not take
        return grp == 1 or not (grp == xs[1] == ys[1]) or g[3][1] > 2

    def fuses(self, op: Any, consumer: Any) -> bool:
        """The epilogue takes a residual add of the result and a tensor of its type (then a ReLU),
        or (F32) a SiLU: :func:`_epilogue_ops`."""
        chain = _chain(op, consumer)
        if chain is None or op.get_attr("cpu.fused") is not None:
            return False
        ep = _epilogue_ops(op, [*chain, consumer])
        return ep is not None and (ep[2] is None or elem_name(op.output.type) == "f32")

    # -- the layout decisions, shared by plan and emit --
    def _layout(self, op: Any, isa: Isa) -> dict[str, Any]:
        xs, ys, k, s, d, p, groups = conv_geometry(op)  # type: ignore[misc]
        tile = tile_for(isa)
        ft = elem_name(op.input.type)
        n, cin, h, w = xs
        cout, oh, ow = ys[1], ys[2], ys[3]
        cin, cout = cin // groups, cout // groups  # per group
        kk = cin * k[0] * k[1]
        direct = ft == "f32" and k == [1, 1] and s == [1, 1] and not any(p)
        hw = oh * ow
        panels = -(-cout // tile.mr)
        ptiles = -(-hw // tile.nb)
        # few pixels (deep layers): parts split the channel panels
        by_cout = ptiles < 8 and panels >= 2
        taps = k[0] * k[1]
        if ft == "f32" and not direct:
            # K blocks of whole input channels (a divisor of Cin) keep a block of about BLOCK_BYTES
            # while the row count is chosen for whole tiles: partial sums wait in the output
            max_cols = max(ow, MAX_COLS)
            cands = range(1, oh + 1) if by_cout else range(1, max(1, min(oh, max_cols // ow)) + 1)
            rows = (
                oh if by_cout else min(cands, key=lambda r: (round(_split_waste(oh, ow, r, tile.nb), 2), -r))
            )
            # fewer H phases than kh: the block holds one row-shifted copy per (channel, H phase, kw)
            # over the rows of every kh (:func:`_im2col_shift`), kh_n / phases times fewer bytes
            phases, ext = _h_phases(k[0], s[0], d[0])
            shift = len(phases) < k[0] and s[1] in (1, 2)
            per_ch = 4 * k[1] * len(phases) * (rows + ext) * ow if shift else 4 * taps * rows * ow
            kc_ch = max(1, BLOCK_BYTES // per_ch)
            kc_ch = max(c for c in range(1, min(cin, kc_ch) + 1) if cin % c == 0)
        else:
            shift = False
            max_rows = max(1, min(oh, -(-(BLOCK_BYTES // (4 * kk)) // ow)))
            if by_cout:
                max_rows = oh if 4 * kk * oh * ow <= 2 * BLOCK_BYTES else max_rows
            # the block's row count wasting the fewest tile columns (ties: more rows)
            rows = min(range(1, max_rows + 1), key=lambda r: (_waste(r * ow, tile.nb), -r))
            kc_ch = cin
        ncols = rows * ow
        ld = -(-ncols // tile.nb) * tile.nb  # scratch row stride: whole tiles (garbage lanes never stored)
        kc = kc_ch * taps
        phases, ext = _h_phases(k[0], s[0], d[0])
        ld_s = ext * ow + ld  # a shifted copy's stride (rows of every kh, whole tiles)
        # pixel-major mode (vectors along the output channels, pixels broadcast): no pixel tails to
        # waste, at the cost of scalar stores; taken when the whole image's windows fit the block
        pix = _pix_tile(tile, cout, hw)
        eff_nchw = 1.0 - (
            _waste(hw, tile.nb) if direct or (by_cout and rows == oh) else _waste(ncols, tile.nb)
        )
        eff_pix = (1.0 - _waste(hw, pix.mr)) * (1.0 - _waste(cout, tile.lanes)) / (1.0 + tile.lanes / kk)
        pix_fits = direct or 4 * kk * hw <= PIX_BYTES
        mode = "pix" if groups == 1 and pix_fits and eff_pix > eff_nchw + 0.02 else "nchw"
        return dict(
            tile=tile,
            ft=ft,
            n=n,
            cin=cin,
            h=h,
            w=w,
            cout=cout,
            oh=oh,
            ow=ow,
            kk=kk,
            k=k,
            s=s,
            d=d,
            p=p,
            direct=direct,
            hw=hw,
            panels=panels,
            ptiles=ptiles,
            by_cout=by_cout,
            rows=rows,
            ld=ld,
            kc_ch=kc_ch,
            kc=kc,
            mode=mode,
            groups=groups,
            pix=pix,
            pix_ld=hw + (-hw) % tile.lanes,
            # the pixel-major mode's im2col as the row-shifted copies too (its K blocks whole channels)
            pix_shift=shift,
            pix_ld_s=ext * ow + hw + (-hw) % tile.lanes,
            **_pix_kblocks(kk, taps if shift else 1),
            shift=shift,
            ld_s=ld_s,
            phases=phases,
        )

    def plan(
        self, op: Any, symbol: str, isa: Isa, residual: bool = False, post_relu: bool = False
    ) -> KernelPlan:
        """The plan; ``residual``: fuse an add of a tensor shaped as the output (the buffer
        ``("in", "residual")``, right after the input) into the epilogue — the op's result rounded
        to its type, plus the residual, rounded again, as a separate ``tpu.Add`` computes it —
        and ``post_relu``: a ReLU after that add. The residual must not share bytes with the
        output (K-blocked kernels keep partial sums in the output before they read it). With
        consumers fused by the compiler (``cpu.fused``) the plan follows them: the residual is the
        fused add's other operand (``("in", value)``) and the kernel writes the last consumer's
        result (``("out", 0)``); a fused SiLU (``silu``) is applied after the op's own ReLU."""
        fused = fused_consumers(op)
        ep = _epilogue_ops(op, fused) if fused else None
        res_value = None
        silu = None
        if ep is not None:
            res_value, post_relu, silu = ep
            residual = res_value is not None
        lay = self._layout(op, isa)
        tile: Tile = lay["tile"]
        groups = lay["groups"]
        wm = weight_of(op.filter).reshape(groups * lay["cout"], lay["kk"])  # type: ignore[union-attr]
        if lay["mode"] == "pix":
            # [Cout/nb][K][nb]: each k's nb output channels contiguous
            nbp = lay["pix"].nb
            panels = -(-lay["cout"] // nbp)
            wp = np.zeros((panels * nbp, lay["kk"]), np.float32)
            wp[: lay["cout"]] = wm
            wp = np.ascontiguousarray(wp.reshape(panels, nbp, lay["kk"]).transpose(0, 2, 1))
            b = _bias(op, lay["cout"], panels * nbp)
            scratch = _pix_im2col_bytes(lay) + 4 * lay["pix"].mr * nbp
            if lay["pix_nkb"] > 1:  # the partial sums of every pixel tile of one panel
                scratch += 4 * -(-lay["hw"] // lay["pix"].mr) * lay["pix"].mr * nbp
        else:
            # per group: [Cout_g/mr][K][mr], groups one after another
            mr, panels, cg = tile.mr, lay["panels"], lay["cout"]
            wp = np.zeros((groups, panels * mr, lay["kk"]), np.float32)
            wp[:, :cg] = wm.reshape(groups, cg, lay["kk"])
            wp = np.ascontiguousarray(wp.reshape(groups, panels, mr, lay["kk"]).transpose(0, 1, 3, 2))
            b = _bias(op, groups * cg, groups * cg)
            if b is not None:
                bp = np.zeros((groups, panels * mr), np.float32)
                bp[:, :cg] = b.reshape(groups, cg)
                b = bp.reshape(-1)
            if lay["direct"]:
                scratch = 0
            elif lay["shift"]:
                scratch = 4 * lay["kc_ch"] * len(lay["phases"]) * lay["k"][1] * lay["ld_s"] + SLACK
            else:
                scratch = 4 * lay["kc"] * lay["ld"] + SLACK
        weights = {"w": wp}
        if b is not None:
            weights["b"] = b
        esz = ELEMS[lay["ft"]][1]
        buffers = _buffers(b is not None, scratch > 0)
        if fused:
            buffers[buffers.index(("out", "output"))] = ("out", 0)
        if residual:
            buffers.insert(1, ("in", "residual" if res_value is None else res_value))
        return ConvPlan(
            symbol,
            buffers,
            weights,
            _round64(scratch),
            macs=lay["n"] * groups * lay["cout"] * lay["hw"] * lay["kk"],
            bytes=esz
            * lay["n"]
            * groups
            * (lay["cin"] * lay["h"] * lay["w"] + (2 if residual else 1) * lay["cout"] * lay["hw"])
            + wp.nbytes,
            residual=residual,
            post_relu=post_relu,
            silu=silu,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        lay = self._layout(op, isa)
        if lay["mode"] == "pix":
            self._emit_pix(module, plan, op, lay)
            return
        tile: Tile = lay["tile"]
        ln, nb, mr = tile.lanes, tile.nb, tile.mr
        ety = ELEMS[lay["ft"]][0]
        fn = Fn(module, plan.symbol)
        ptr = _bufptrs(fn, plan)
        relu, limit = _relu_attrs(op)
        cout, kk, hw, ow, oh = lay["cout"], lay["kk"], lay["hw"], lay["ow"], lay["oh"]
        panels = lay["panels"]
        full_panels = cout // mr
        rem = cout - full_panels * mr
        groups = lay["groups"]
        y = ptr["output"]
        in_img = lay["cin"] * lay["h"] * lay["w"]  # one group's
        cur: dict[str, Any] = {"wp": ptr["w"], "bias": ptr.get("b")}  # the group's weights
        scratch = None
        if not lay["direct"]:
            scratch = fn.at(ptr["scratch"], fn.mul(fn.part, plan.scratch_bytes), ir.IntType(8))

        def panel_range(p_lo: Int, p_hi: Int, body: Any) -> None:
            """``body(p, rows)`` for the panels in [p_lo, p_hi): full panels, then the partial one."""
            fn.loop(p_lo, fn.min(p_hi, full_panels), lambda p, _c: body(p, mr))
            if rem:
                fn.when(fn.lt(full_panels, p_hi), lambda: body(full_panels, rem))

        def gemm_block(
            bp: ir.Value,
            b_ks: Int,
            col0: Int,
            ncols: Int,
            yimg: ir.Value,
            p_lo: Int,
            p_hi: Int,
            masked_loads: bool,
            kblock: tuple[Int, int, ir.Value, bool] | None = None,
            taps: tuple[int, list[int]] | None = None,
        ) -> None:
            """out[co, col0 + c] for c < ncols, co in the panels [p_lo, p_hi), from the operand at
            ``bp`` (row stride ``b_ks``); ``kblock``: (first k, length, accumulate, last) of one
            K block (else the whole K at once): the epilogue runs in the last block only."""
            ntiles_full = fn.udiv(ncols, nb)
            k0, klen, acc_flag, last = kblock if kblock is not None else (0, kk, None, True)

            def panel(p: Int, rows: int) -> None:
                wpan = fn.at(cur["wp"], fn.add(fn.mul(p, kk * mr), fn.mul(k0, mr)))
                ep = Epilogue(
                    ety,
                    relu,
                    limit,
                    row_bias=fn.at(cur["bias"], fn.mul(p, mr)) if cur["bias"] is not None else None,
                    accumulate=acc_flag,
                    raw=not last,
                )
                yoff = fn.add(fn.mul(fn.mul(p, mr), hw), col0)
                yrow = fn.at(yimg, yoff, ety)

                def one(t: Int, masks: list[Any] | None) -> None:
                    c0 = fn.mul(t, nb)
                    if rimg is not None:
                        ep.residual = fn.at(rimg, fn.add(yoff, c0), ety)
                        ep.post_relu = post_relu
                    ep.silu = silu
                    accs = gemm_tile(
                        fn,
                        tile,
                        rows,
                        klen,
                        wpan,
                        1,
                        mr,
                        fn.at(bp, c0),
                        b_ks,
                        b_masks=masks if masked_loads else None,
                        b_taps=taps,
                    )
                    store_tile(fn, tile, accs, rows, fn.at(yrow, c0, ety), hw, ep, masks)

                fn.loop(0, ntiles_full, lambda t, _c: one(t, None))
                tail = fn.sub(ncols, fn.mul(ntiles_full, nb))
                if isinstance(tail, int):
                    if tail:
                        one(ntiles_full, [fn.mask(ln, tail, j * ln) for j in range(tile.nv)])
                else:
                    fn.when(
                        fn.lt(0, tail),
                        lambda: one(ntiles_full, [fn.mask(ln, tail, j * ln) for j in range(tile.nv)]),
                    )

            panel_range(p_lo, p_hi, panel)

        residual = ptr.get("residual")
        post_relu = bool(getattr(plan, "post_relu", False))
        silu = getattr(plan, "silu", None)
        rimg: ir.Value | None = None

        def image(ng: ir.Value, _c: Any) -> None:
            """Image ``ng // groups``, group ``ng % groups`` (one GEMM)."""
            nonlocal rimg
            gi = fn.b.urem(ng, fn.c(groups)) if groups > 1 else 0
            ximg = fn.at(ptr["input"], fn.mul(ng, in_img), ety)
            yimg = fn.at(y, fn.mul(ng, cout * hw), ety)
            rimg = fn.at(residual, fn.mul(ng, cout * hw), ety) if residual is not None else None
            cur["wp"] = fn.at(ptr["w"], fn.mul(gi, panels * kk * mr))
            cur["bias"] = fn.at(ptr["b"], fn.mul(gi, panels * mr)) if "b" in ptr else None
            if lay["direct"]:
                if lay["by_cout"]:
                    p_lo, p_hi = fn.share(panels)
                    gemm_block(ximg, hw, 0, hw, yimg, p_lo, p_hi, True)
                else:
                    t_lo, t_hi = fn.share(lay["ptiles"])
                    c_lo = fn.mul(t_lo, nb)
                    c_hi = fn.min(fn.mul(t_hi, nb), hw)
                    gemm_block(fn.at(ximg, c_lo), hw, c_lo, fn.sub(c_hi, c_lo), yimg, 0, panels, True)
                return
            if lay["by_cout"]:
                r_lo, r_hi = 0, oh
                p_lo, p_hi = fn.share(panels)
            else:
                r_lo, r_hi = fn.share(oh)
                p_lo, p_hi = 0, panels
            rows = lay["rows"]

            kc_ch, kc = lay["kc_ch"], lay["kc"]
            nkb = lay["cin"] // kc_ch

            shift = lay["shift"]
            # the shifted copies' taps: (channel stride, offset of each (kh, kw)) in the block
            taps = _shift_taps(lay) if shift else None
            copy = _im2col_shift if shift else _im2col

            def block(r0: ir.Value, _c: Any) -> None:
                nrows = fn.min(rows, fn.sub(r_hi, r0))
                if nkb == 1:
                    copy(fn, lay, ety, ximg, r0, nrows, scratch)
                    gemm_block(
                        scratch,
                        lay["ld"],
                        fn.mul(r0, ow),
                        fn.mul(nrows, ow),
                        yimg,
                        p_lo,
                        p_hi,
                        False,
                        taps=taps,
                    )
                    return

                def kblock(kb: Int, last: bool) -> None:
                    copy(fn, lay, ety, ximg, r0, nrows, scratch, fn.mul(kb, kc_ch), kc_ch)
                    acc = ir.Constant(ir.IntType(1), 1) if last else fn.b.icmp_unsigned("!=", kb, fn.c(0))
                    gemm_block(
                        scratch,
                        lay["ld"],
                        fn.mul(r0, ow),
                        fn.mul(nrows, ow),
                        yimg,
                        p_lo,
                        p_hi,
                        False,
                        (fn.mul(kb, kc), kc, acc, last),
                        taps=taps,
                    )

                # the first K blocks store partial sums; the last one (code of its own) the epilogue
                fn.loop(0, nkb - 1, lambda kb, _c: kblock(kb, False))
                kblock(nkb - 1, True)

            fn.loop(r_lo, r_hi, block, step=rows)

        fn.loop(0, lay["n"] * groups, image)
        fn.ret()

    def _emit_pix(self, module: Any, plan: KernelPlan, op: Any, lay: dict[str, Any]) -> None:
        """Pixel-major: ``out[co, px]`` tiles of ``mr`` pixels x ``nb`` channels; the part's units are
        (channel panel, pixel tile) pairs, taken panel by panel; each part first copies the whole
        image's windows. A long K runs in blocks of :data:`PIX_KC` (``pix_kc``): per panel, every
        tile of the part goes over one block before the next (the block of the weight panel stays
        in L2), the partial sums waiting in the part's accumulator buffer. F32 tiles with 16-lane
        vectors are transposed in registers (:func:`_transpose16x8`) and stored as one masked
        vector of the tile's pixels per channel; other types and ISAs go through a tile buffer,
        channel by channel."""
        tile: Tile = lay["pix"]
        ln, nb, mr = tile.lanes, tile.nb, tile.mr
        ety = ELEMS[lay["ft"]][0]
        fn = Fn(module, plan.symbol)
        ptr = _bufptrs(fn, plan)
        relu, limit = _relu_attrs(op)
        cout, kk, hw = lay["cout"], lay["kk"], lay["hw"]
        panels = -(-cout // nb)
        rtiles = -(-hw // mr)
        rem_rows = hw - (rtiles - 1) * mr
        tail_cols = cout - (panels - 1) * nb
        kcb, nkb = lay["pix_kc"], lay["pix_nkb"]
        k_last = kk - (nkb - 1) * kcb
        wp, bias, y = ptr["w"], ptr.get("b"), ptr["output"]
        in_img = lay["cin"] * lay["h"] * lay["w"]
        mine = fn.at(ptr["scratch"], fn.mul(fn.part, plan.scratch_bytes), ir.IntType(8))
        scratch = None if lay["direct"] else mine
        tbuf = fn.at(mine, _pix_im2col_bytes(lay), ir.IntType(8))
        accbuf = fn.at(tbuf, 4 * mr * nb, ir.IntType(8))
        a_ks = hw if lay["direct"] else lay["pix_ld"]
        a_taps = (
            _shift_taps({**lay, "ld_s": lay["pix_ld_s"]}) if lay["pix_shift"] and not lay["direct"] else None
        )
        u_lo, u_hi = fn.share(panels * rtiles)
        b = fn.b
        fast = ety == F32 and ln == 16 and mr <= 8

        residual = ptr.get("residual")
        post_relu = bool(getattr(plan, "post_relu", False))
        silu = getattr(plan, "silu", None)
        zero = fn.vzero(ln)
        lim = fn.vconst(limit, ln) if relu and limit > 0 else None

        def act(v: ir.Value, bv: ir.Value | None) -> ir.Value:
            """The op's own epilogue of one accumulator (per-channel lanes): bias, ReLU, SiLU."""
            if bv is not None:
                v = b.fadd(v, bv)
            if relu:
                v = b.select(b.fcmp_unordered(">=", v, zero), v, zero)
                if lim is not None:
                    v = b.select(b.fcmp_unordered("<=", v, lim), v, lim)
            if silu is not None:
                v = vsilu(fn, v, silu)
            return v

        def image(n: ir.Value, _c: Any) -> None:
            ximg = fn.at(ptr["input"], fn.mul(n, in_img), ety)
            yimg = fn.at(y, fn.mul(n, cout * hw), ety)
            rimg = fn.at(residual, fn.mul(n, cout * hw), ety) if residual is not None else None
            if lay["direct"]:
                src = ximg
            else:
                assert scratch is not None
                if lay["pix_shift"]:
                    _im2col_shift(fn, {**lay, "ld_s": lay["pix_ld_s"]}, ety, ximg, 0, lay["oh"], scratch)
                else:
                    _im2col(fn, {**lay, "ld": lay["pix_ld"]}, ety, ximg, 0, lay["oh"], scratch)
                src = scratch

            def store_fast(accs: list[ir.Value], c0: Int, r0: Int, rows: int, cols: int) -> None:
                """The tile transposed: per channel one masked vector of its ``rows`` pixels."""
                rmask = fn.mask(8, rows)
                for j in range(tile.nv):
                    if cols - j * ln <= 0:
                        continue
                    bv = fn.vload(fn.at(bias, fn.add(c0, j * ln)), ln) if bias is not None else None
                    vecs = [act(accs[i * tile.nv + j], bv) for i in range(rows)]
                    for ch, v in enumerate(_transpose16x8(fn, vecs)):
                        if j * ln + ch >= cols:
                            break
                        off = fn.add(fn.mul(fn.add(c0, j * ln + ch), hw), r0)
                        if rimg is not None:
                            v = b.fadd(v, fn.vload(fn.at(rimg, off), 8, F32, rmask))
                            if post_relu:
                                z8 = fn.vzero(8)
                                v = b.select(b.fcmp_unordered(">=", v, z8), v, z8)
                        fn.vstore(v, fn.at(yimg, off), rmask)

            def store_slow(accs: list[ir.Value], c0: Int, r0: Int, rows: int, cols: int) -> None:
                """The tile, pixel-major, into the part's tile buffer; then channel by channel out."""
                for j in range(tile.nv):
                    if cols - j * ln <= 0:
                        continue
                    bv = fn.vload(fn.at(bias, fn.add(c0, j * ln)), ln) if bias is not None else None
                    for i in range(rows):
                        fn.vstore(act(accs[i * tile.nv + j], bv), fn.at(tbuf, i * nb + j * ln))
                base = fn.at(yimg, fn.add(fn.mul(c0, hw), r0), ety)
                rbase = fn.at(rimg, fn.add(fn.mul(c0, hw), r0), ety) if rimg is not None else None

                def channel(c: ir.Value, _c: Any) -> None:
                    row = fn.at(base, fn.mul(c, hw), ety)
                    for i in range(rows):
                        e = fn.load(fn.at(tbuf, fn.add(c, i * nb)))
                        if ety != F32:
                            e = b.fptrunc(e, ety)
                        if rbase is not None:
                            r = fn.load(fn.at(rbase, fn.add(fn.mul(c, hw), i), ety), ety)
                            e = b.fadd(fn.widen(e), fn.widen(r))
                            if post_relu:
                                e = b.select(
                                    b.fcmp_unordered(">=", e, ir.Constant(F32, 0.0)), e, ir.Constant(F32, 0.0)
                                )
                            if ety != F32:
                                e = b.fptrunc(e, ety)
                        b.store(e, fn.at(row, i, ety), align=ELEMS[lay["ft"]][1])

                fn.loop(0, cols, channel)

            def one(p: Int, r0: Int, rows: int, cols: int, k0: Int, klen: int, last: bool) -> None:
                c0 = fn.mul(p, nb)
                masks = [fn.mask(ln, cols, j * ln) for j in range(tile.nv)]
                slot = fn.at(accbuf, fn.mul(r0, nb))  # this tile's partial sums (K-blocked)
                init = None
                if nkb > 1:
                    init = [
                        fn.vload(fn.at(slot, i * nb + j * ln), ln)
                        for i in range(rows)
                        for j in range(tile.nv)
                    ]
                if a_taps is not None:  # the row-shifted copies: K blocks of whole channels
                    a0 = fn.at(src, fn.add(r0, fn.mul(fn.udiv(k0, len(a_taps[1])), a_taps[0])))
                else:
                    a0 = fn.at(src, fn.add(r0, fn.mul(k0, a_ks)))
                accs = gemm_tile(
                    fn,
                    tile,
                    rows,
                    klen,
                    a0,
                    1,
                    a_ks,
                    fn.at(wp, fn.add(fn.mul(p, kk * nb), fn.mul(k0, nb))),
                    nb,
                    masks,
                    init=init,
                    a_taps=a_taps,
                )
                if not last:
                    for i in range(rows):
                        for j in range(tile.nv):
                            fn.vstore(accs[i * tile.nv + j], fn.at(slot, i * nb + j * ln))
                    return
                (store_fast if fast else store_slow)(accs, c0, r0, rows, cols)

            def tile_at(p: Int, t: Int, k0: Int, klen: int, last: bool) -> None:
                def rows_case(cols: int) -> None:
                    if rem_rows == mr:
                        one(p, fn.mul(t, mr), mr, cols, k0, klen, last)
                    else:
                        is_last = b.icmp_unsigned("==", t, fn.c(rtiles - 1))
                        fn.when(
                            is_last,
                            lambda: one(p, (rtiles - 1) * mr, rem_rows, cols, k0, klen, last),
                            lambda: one(p, fn.mul(t, mr), mr, cols, k0, klen, last),
                        )

                if tail_cols == nb:
                    rows_case(nb)
                else:
                    lastp = b.icmp_unsigned("==", p, fn.c(panels - 1))
                    fn.when(lastp, lambda: rows_case(tail_cols), lambda: rows_case(nb))

            def panel(p: ir.Value, _c: Any) -> None:
                base = fn.mul(p, rtiles)
                t_lo = b.select(b.icmp_signed("<", u_lo, base), fn.c(0), fn.c(fn.sub(u_lo, base)))
                t_hi = fn.min(fn.sub(u_hi, base), rtiles)
                if nkb > 1:
                    # zero the partial sums of this panel's tiles, then K block by K block
                    fn.loop(
                        fn.mul(t_lo, mr * nb // ln),
                        fn.mul(t_hi, mr * nb // ln),
                        lambda i, _c: fn.vstore(zero, fn.at(accbuf, fn.mul(i, ln))),
                    )
                    fn.loop(
                        0,
                        nkb - 1,
                        lambda kb, _c: fn.loop(
                            t_lo, t_hi, lambda t, _c2: tile_at(p, t, fn.mul(kb, kcb), kcb, False)
                        ),
                    )
                fn.loop(t_lo, t_hi, lambda t, _c: tile_at(p, t, (nkb - 1) * kcb, k_last, True))

            fn.loop(fn.udiv(u_lo, rtiles), fn.udiv(fn.add(u_hi, rtiles - 1), rtiles), panel)

        fn.loop(0, lay["n"], image)
        fn.ret()


def _transpose16x8(fn: Fn, rows: list[ir.Value]) -> list[ir.Value]:
    """Up to 8 vectors of 16 f32 lanes (missing rows read as 0) transposed: 16 vectors of 8 lanes,
    ``out[ch][i] = rows[i][ch]``, in three levels of two-source shuffles (24 in all)."""
    b = fn.b
    zero = fn.vzero(16)
    a = list(rows) + [zero] * (8 - len(rows))

    def shuf(x: ir.Value, y: ir.Value, idx: list[int]) -> ir.Value:
        return b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, len(idx)), idx))

    out: list[ir.Value] = [zero] * 16
    for h in range(2):
        l1 = [8 * h + c + 16 * s for c in range(8) for s in range(2)]
        u = [shuf(a[2 * q], a[2 * q + 1], l1) for q in range(4)]
        for q in range(2):
            l2 = [
                2 * (4 * q + c) + i if i < 2 else 16 + 2 * (4 * q + c) + i - 2
                for c in range(4)
                for i in range(4)
            ]
            v, w = shuf(u[0], u[1], l2), shuf(u[2], u[3], l2)
            for z in range(2):
                l3 = [
                    4 * (2 * z + c) + i if i < 4 else 16 + 4 * (2 * z + c) + i - 4
                    for c in range(2)
                    for i in range(8)
                ]
                zz = shuf(v, w, l3)
                for c in range(2):
                    out[8 * h + 4 * q + 2 * z + c] = shuf(zz, zz, list(range(8 * c, 8 * c + 8)))
    return out


def _round64(n: int) -> int:
    """``n`` rounded up to whole cache lines (each part's scratch slice starts on one)."""
    return n + (-n) % 64


def _pix_kblocks(kk: int, taps: int = 1) -> dict[str, int]:
    """The pixel-major mode's K blocks: ``pix_nkb`` blocks of ``pix_kc`` (a multiple of the
    micro-kernel's unroll; the last one shorter), about :data:`PIX_KC` each; with the row-shifted
    copies (``taps`` > 1) whole channels of ``taps`` each."""
    if taps > 1:
        kc = taps * max(1, round(PIX_KC / taps))
        return dict(pix_kc=kc, pix_nkb=-(-kk // kc))
    nkb = max(1, round(kk / PIX_KC))
    kc = -(-kk // nkb)
    kc += (-kc) % UNROLL
    return dict(pix_kc=kc, pix_nkb=-(-kk // kc))


def _pix_im2col_bytes(lay: dict[str, Any]) -> int:
    """The pixel-major mode's im2col bytes per part (none in place), a multiple of 64."""
    if lay["direct"]:
        n = 0
    elif lay["pix_shift"]:
        n = 4 * lay["cin"] * len(lay["phases"]) * lay["k"][1] * lay["pix_ld_s"] + SLACK
    else:
        n = 4 * lay["kk"] * lay["pix_ld"] + SLACK
    return n + (-n) % 64


def _split_waste(oh: int, ow: int, rows: int, nb: int) -> float:
    """The share of tile columns wasted by blocks of ``rows`` output rows, averaged over 1 and 2
    parts (each part's rows cut into blocks, the last one shorter)."""
    slots = used = 0
    for nparts in (1, 2):
        for part in range(nparts):
            mine = (part + 1) * oh // nparts - part * oh // nparts
            for r0 in range(0, mine, rows):
                cols = min(rows, mine - r0) * ow
                used += cols
                slots += -(-cols // nb) * nb
    return (slots - used) / slots


def _waste(n: int, unit: int) -> float:
    """The share of ``ceil(n / unit) * unit`` slots beyond ``n``."""
    slots = -(-n // unit) * unit
    return (slots - n) / slots


def _pix_tile(tile: Tile, cout: int, hw: int) -> Tile:
    """The pixel-major tile: vectors along the channels (AVX-512: 4 when they come in 64s, else up
    to 3; narrower: 2 or 1), as many pixel rows as fit the accumulators (24 or 12), the count wasting the fewest pixels (ties: more rows)."""
    acc = 24 if tile.lanes >= 16 else 12  # 32 vector registers with AVX-512, else 16
    widest = 4 if tile.lanes >= 16 else 2
    nv = widest if cout % (widest * tile.lanes) == 0 else min(widest - 1 or 1, -(-cout // tile.lanes))
    top = max(1, min(8, acc // nv))
    # fewer rows load more per FMA: weigh the pixel waste against the tile's density
    mr = max(range(max(1, top - 3), top + 1), key=lambda m: ((1 - _waste(hw, m)) * (1 - 0.15 / m), m))
    return Tile(tile.lanes, mr, nv)


def _im2col(
    fn: Fn,
    lay: dict[str, Any],
    ety: ir.Type,
    ximg: ir.Value,
    r0: Int,
    nrows: Int,
    scratch: ir.Value,
    ci0: Int = 0,
    count: int | None = None,
) -> None:
    """scratch[k][r * OW + ow] = x[ci0 + ci, (r0 + r) * sh + kh * dh - pt, ow * sw + kw * dw - pl]
    (0 outside), ``k = (ci * KH + kh) * KW + kw``, for ``r < nrows`` and ``ci < count`` (all
    channels by default), as f32. W strides 1 and 2 write each row as whole vectors
    (:func:`_copy_row`): a row's last vector runs past it into the next row (or the block's spare
    columns, or the :data:`SLACK` bytes after the block), which is written after it."""
    tile: Tile = lay["tile"]
    ln = tile.lanes
    kh_n, kw_n = lay["k"]
    sh, sw = lay["s"]
    dh, dw = lay["d"]
    pt, pl = lay["p"][0], lay["p"][1]
    h, w, ow, ld = lay["h"], lay["w"], lay["ow"], lay["ld"]
    b = fn.b

    def ci_body(ci: ir.Value, _c: Any) -> None:
        xc = fn.at(ximg, fn.mul(fn.add(ci0, ci), h * w), ety)

        def kh_body(kh: ir.Value, _c: Any) -> None:
            for kw in range(kw_n):
                off = kw * dw - pl
                lo = -(off // sw) if off < 0 else 0  # ceil(-off / sw)
                hi = min(ow, (w - 1 - off) // sw + 1) if w - 1 - off >= 0 else 0
                hi = max(hi, lo)
                krow = fn.add(fn.mul(fn.add(fn.mul(ci, kh_n), kh), kw_n * ld), kw * ld)
                dst_k = fn.at(scratch, krow)

                def row(
                    r: ir.Value, _c: Any, off: int = off, lo: int = lo, hi: int = hi, dst_k: Any = dst_k
                ) -> None:
                    ih = fn.add(fn.mul(fn.add(r0, r), sh), fn.sub(fn.mul(kh, dh), pt))
                    dst = fn.at(dst_k, fn.mul(r, ow))
                    valid = b.icmp_unsigned("<", fn.c(ih), fn.c(h))

                    def copy() -> None:
                        _zero(fn, dst, 0, lo, ln)
                        _zero(fn, dst, hi, ow, ln)
                        src = fn.at(xc, fn.add(fn.mul(ih, w), lo * sw + off), ety)
                        _copy(fn, dst, lo, hi - lo, src, sw, ety, ln)

                    def copy_vec() -> None:
                        _copy_row(fn, dst, fn.at(xc, fn.mul(ih, w), ety), ow, lo, hi, off, sw, ety, ln)

                    def zero_vec() -> None:
                        _run(
                            fn, 0, -(-ow // ln), lambda v: fn.vstore(fn.vzero(ln), fn.at(dst, fn.mul(v, ln)))
                        )

                    if sw in (1, 2):
                        fn.when(valid, copy_vec, zero_vec)
                    else:
                        fn.when(valid, copy, lambda: _zero(fn, dst, 0, ow, ln))

                fn.loop(0, nrows, row)

        fn.loop(0, kh_n, kh_body)

    fn.loop(0, lay["cin"] if count is None else count, ci_body)


def _h_phases(kh_n: int, sh: int, dh: int) -> tuple[list[int], int]:
    """The distinct ``kh * dh % sh`` (the H phases of the taps) and the largest ``kh * dh // sh``."""
    return sorted({kh * dh % sh for kh in range(kh_n)}), (kh_n - 1) * dh // sh


def _shift_taps(lay: dict[str, Any]) -> tuple[int, list[int]]:
    """:func:`_im2col_shift`'s block as the micro-kernel's ``b_taps``: the channel stride and the
    offset of each tap ``(kh, kw)``: copy ``(phase of kh, kw)``, ``kh * dh // sh`` rows in."""
    kh_n, kw_n = lay["k"]
    sh, dh = lay["s"][0], lay["d"][0]
    ph, ld_s, ow = lay["phases"], lay["ld_s"], lay["ow"]
    offs = [
        (ph.index(kh * dh % sh) * kw_n + kw) * ld_s + kh * dh // sh * ow
        for kh in range(kh_n)
        for kw in range(kw_n)
    ]
    return len(ph) * kw_n * ld_s, offs


def _im2col_shift(
    fn: Fn,
    lay: dict[str, Any],
    ety: ir.Type,
    ximg: ir.Value,
    r0: Int,
    nrows: Int,
    scratch: ir.Value,
    ci0: Int = 0,
    count: int | None = None,
) -> None:
    """``scratch[(ci * P + pi) * KW + kw][r * OW + ow] = x[ci0 + ci, (r0 + r) * sh + p - pt, ow * sw
    + kw * dw - pl]`` (0 outside) for the H phases ``p = phases[pi]`` (:func:`_h_phases`), the
    block's rows and the ``ext`` after them, ``ci < count`` (all channels by default), as f32,
    copies ``ld_s`` apart: the window element of tap ``(kh, kw)`` for the block's pixel ``c`` is in
    copy ``(phase of kh * dh, kw)`` at ``kh * dh // sh * OW + c`` (:func:`_shift_taps`). Rows as
    whole vectors (:func:`_copy_row`)."""
    ln = lay["tile"].lanes
    kw_n = lay["k"][1]
    sw = lay["s"][1]
    dw = lay["d"][1]
    pt, pl = lay["p"][0], lay["p"][1]
    h, w, ow, ld_s = lay["h"], lay["w"], lay["ow"], lay["ld_s"]
    sh = lay["s"][0]
    phases = lay["phases"]
    ext = _h_phases(lay["k"][0], sh, lay["d"][0])[1]
    b = fn.b

    def ci_body(ci: ir.Value, _c: Any) -> None:
        xc = fn.at(ximg, fn.mul(fn.add(ci0, ci), h * w), ety)
        for pi, kw in [(pi, kw) for pi in range(len(phases)) for kw in range(kw_n)]:
            off = kw * dw - pl
            lo = -(off // sw) if off < 0 else 0
            hi = min(ow, (w - 1 - off) // sw + 1) if w - 1 - off >= 0 else 0
            hi = max(hi, lo)
            dst_k = fn.at(scratch, fn.mul(fn.add(fn.mul(ci, len(phases) * kw_n), pi * kw_n + kw), ld_s))

            def row(
                r: ir.Value,
                _c: Any,
                off: int = off,
                lo: int = lo,
                hi: int = hi,
                dst_k: Any = dst_k,
                p: int = phases[pi],
            ) -> None:
                ih = fn.sub(fn.mul(fn.add(r0, r), sh), pt - p)
                dst = fn.at(dst_k, fn.mul(r, ow))
                valid = b.icmp_unsigned("<", fn.c(ih), fn.c(h))
                fn.when(
                    valid,
                    lambda: _copy_row(fn, dst, fn.at(xc, fn.mul(ih, w), ety), ow, lo, hi, off, sw, ety, ln),
                    lambda: _run(
                        fn, 0, -(-ow // ln), lambda v: fn.vstore(fn.vzero(ln), fn.at(dst, fn.mul(v, ln)))
                    ),
                )

            fn.loop(0, fn.add(nrows, ext), row)

    fn.loop(0, lay["cin"] if count is None else count, ci_body)


def _run(fn: Fn, lo: int, hi: int, body: Any) -> None:
    """``body(v)`` for ``lo <= v < hi`` (static): unrolled when short, else a counted loop."""
    if hi - lo > 8:
        fn.loop(lo, hi, lambda v, _c: body(v))
    else:
        for v in range(lo, hi):
            body(v)


def _copy_row(
    fn: Fn, dst: ir.Value, src: ir.Value, ow: int, lo: int, hi: int, off: int, sw: int, ety: ir.Type, ln: int
) -> None:
    """``dst[j] = f32(src[j * sw + off])`` for ``lo <= j < hi``, 0 for the other ``j < ow``, as
    ``ceil(ow / ln)`` whole-vector stores (lanes past ``ow`` are 0); W stride 1 or 2. Each vector is
    one masked load (stride 2: two, and the even lanes) whose masked-off lanes are the zeros; the
    vectors all inside ``[lo, hi)`` run in a loop when there are many."""
    b = fn.b
    evens = ir.Constant(ir.VectorType(I32, ln), list(range(0, 2 * ln, 2)))
    nvec = -(-ow // ln)

    def lane_mask(v: int, first: int, count: int) -> ir.Value | None:
        """Source lanes ``first .. first + count`` of vector ``v``: on where needed."""
        bits = []
        for m in range(first, first + count):
            if sw == 1:
                j = v * ln + m
                bits.append(lo <= j < hi)
            else:
                j = v * ln + m // 2
                bits.append(m % 2 == 0 and lo <= j < hi)
        if all(bits):
            return None
        return ir.Constant(ir.VectorType(ir.IntType(1), ln), [1 if x else 0 for x in bits])

    def one(v: Int, masks: tuple[Any, Any]) -> None:
        if sw == 1:
            x = fn.vload(fn.at(src, fn.add(fn.mul(v, ln), off), ety), ln, ety, masks[0])
        else:
            base = fn.add(fn.mul(v, 2 * ln), off)
            x0 = fn.vload(fn.at(src, base, ety), ln, ety, masks[0])
            x1 = fn.vload(fn.at(src, fn.add(base, ln), ety), ln, ety, masks[1])
            x = b.shuffle_vector(x0, x1, evens)
        fn.vstore(fn.widen(x), fn.at(dst, fn.mul(v, ln)))

    def masks_of(v: int) -> tuple[Any, Any]:
        if sw == 1:
            return lane_mask(v, 0, ln), None
        return lane_mask(v, 0, ln), lane_mask(v, ln, ln)

    def needed(v: int) -> bool:
        return any(lo <= j < hi for j in range(v * ln, v * ln + ln))

    full = [v for v in range(nvec) if v * ln >= lo and v * ln + ln <= hi]
    f_lo, f_hi = (full[0], full[-1] + 1) if full else (0, 0)
    for v in range(nvec):
        if f_lo <= v < f_hi:
            if v == f_lo:
                _run(fn, f_lo, f_hi, lambda u: one(u, (None, None)))
            continue
        if needed(v):
            one(v, masks_of(v))
        else:
            fn.vstore(fn.vzero(ln), fn.at(dst, v * ln))


def _zero(fn: Fn, dst: ir.Value, lo: int, hi: int, ln: int) -> None:
    """dst[lo:hi] = 0 (static bounds)."""
    z = fn.vzero(ln)
    i = lo
    while i < hi:
        fn.vstore(z, fn.at(dst, i), fn.mask(ln, hi - i))
        i += ln


def _copy(
    fn: Fn, dst: ir.Value, d0: int, count: int, src: ir.Value, stride: int, ety: ir.Type, ln: int
) -> None:
    """dst[d0 + j] = f32(src[j * stride]) for j < count (static)."""
    if count <= 0:
        return
    b = fn.b
    if stride == 1:
        if count > 16 * ln:
            full = count // ln

            def vec(j: ir.Value, _c: Any) -> None:
                o = fn.mul(j, ln)
                fn.vstore(fn.widen(fn.vload(fn.at(src, o, ety), ln, ety)), fn.at(dst, fn.add(d0, o)))

            fn.loop(0, full, vec)
            j0 = full * ln
        else:
            j0 = 0
        while j0 < count:
            m = fn.mask(ln, count - j0)
            v = fn.widen(fn.vload(fn.at(src, j0, ety), ln, ety, m))
            fn.vstore(v, fn.at(dst, d0 + j0), m)
            j0 += ln
        return
    if stride == 2:
        evens = ir.Constant(ir.VectorType(ir.IntType(32), ln), list(range(0, 2 * ln, 2)))
        j0 = 0
        while j0 < count:
            n_out = min(ln, count - j0)
            n_in = 2 * (n_out - 1) + 1  # source elements this vector needs
            lo_m = fn.mask(ln, n_in)
            hi_m = fn.mask(ln, n_in, ln)
            v0 = fn.vload(fn.at(src, 2 * j0, ety), ln, ety, lo_m)
            if n_in > ln:
                v1 = fn.vload(fn.at(src, 2 * j0 + ln, ety), ln, ety, hi_m)
            else:
                v1 = ir.Constant(v0.type, None)
            v = fn.widen(b.shuffle_vector(v0, v1, evens))
            fn.vstore(v, fn.at(dst, d0 + j0), fn.mask(ln, n_out))
            j0 += ln
        return
    for j in range(count):
        fn.b.store(fn.widen(fn.load(fn.at(src, j * stride, ety), ety)), fn.at(dst, d0 + j), align=4)


class DepthwiseF32(Template):
    """Depthwise 2-d ``tpu.Conv`` (``group == Cin == Cout``) in a float mode, stride 1 or 2 along
    W: direct, vectorized along W over a zero-padded copy of each channel plane (stride 2: its even
    and odd columns as two planes)."""

    name = "depthwise_f32"
    priority = 10

    def matches(self, op: Any, isa: Isa) -> bool:
        if _float_conv(op) is None:
            return False
        g = conv_geometry(op)
        if g is None:
            return False
        xs, ys, _k, s, _d, _p, grp = g
        return grp == xs[1] == ys[1] and grp > 1 and s[1] in (1, 2)

    def _layout(self, op: Any, isa: Isa) -> dict[str, Any]:
        xs, ys, k, s, d, p, _g = conv_geometry(op)  # type: ignore[misc]
        ln = tile_for(isa).lanes
        nv = min(4, -(-ys[3] // ln))
        ovec = -(-ys[3] // ln)  # vectors per output row
        # padded plane(s): rows of the input's padded height, width enough for the last vector's
        # reads; stride 2 along W: two planes, the padded row's even and odd columns, so that every
        # tap reads a contiguous vector
        ph = xs[2] + p[0] + p[2]
        if s[1] == 1:
            reads = (ovec - 1) * ln + (k[1] - 1) * d[1] + ln
            pw = max(xs[3] + p[1] + p[3], reads)
        else:
            reads = (ovec - 1) * ln + ((k[1] - 1) * d[1]) // 2 + ln
            pw = max(-(-(xs[3] + p[1] + p[3]) // 2), reads)
        pw += (-pw) % ln
        return dict(
            ln=ln,
            nv=nv,
            ovec=ovec,
            pw=pw,
            ph=ph,
            xs=xs,
            ys=ys,
            k=k,
            s=s,
            d=d,
            p=p,
            ft=elem_name(op.input.type),
        )

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        lay = self._layout(op, isa)
        xs, ys, k = lay["xs"], lay["ys"], lay["k"]
        c = xs[1]
        wts = {"w": np.ascontiguousarray(weight_of(op.filter).reshape(c, k[0] * k[1]))}  # type: ignore[union-attr]
        b = _bias(op, c, c)
        if b is not None:
            wts["b"] = b
        esz = ELEMS[lay["ft"]][1]
        return KernelPlan(
            symbol,
            _buffers(b is not None, True),
            wts,
            _round64(4 * lay["ph"] * lay["pw"] * lay["s"][1]),
            macs=xs[0] * c * ys[2] * ys[3] * k[0] * k[1],
            bytes=esz * (int(np.prod(xs)) + int(np.prod(ys))) + wts["w"].nbytes,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        lay = self._layout(op, isa)
        ln, ovec, pw, ph = lay["ln"], lay["ovec"], lay["pw"], lay["ph"]
        xs, ys, (kh_n, kw_n), (sh, sw), (dh, dw), p = (
            lay["xs"],
            lay["ys"],
            lay["k"],
            lay["s"],
            lay["d"],
            lay["p"],
        )
        n_img, c, h, w = xs
        oh, ow = ys[2], ys[3]
        ety = ELEMS[lay["ft"]][0]
        fn = Fn(module, plan.symbol)
        ptr = _bufptrs(fn, plan)
        relu, limit = _relu_attrs(op)
        b = fn.b
        plane = fn.at(ptr["scratch"], fn.mul(fn.part, plan.scratch_bytes), ir.IntType(8))
        odd_plane = fn.at(plane, ph * pw) if sw == 2 else plane
        bias = ptr.get("b")
        zero = fn.vzero(ln)
        lim = fn.vconst(limit, ln) if relu and limit > 0 else None
        c_lo, c_hi = fn.share(n_img * c)
        # zero the plane's borders once: the interior is overwritten per channel, borders stay zero
        _zero_plane(fn, plane, ph * pw * sw, ln)

        def channel(nc: ir.Value, _c: Any) -> None:
            ch = b.urem(nc, fn.c(c))
            src = fn.at(ptr["input"], fn.mul(nc, h * w), ety)

            def fill(r: ir.Value, _c: Any) -> None:
                row = fn.mul(fn.add(r, p[0]), pw)
                srow = fn.at(src, fn.mul(r, w), ety)
                if sw == 1:
                    _copy_dyn(fn, fn.at(plane, fn.add(row, p[1])), srow, w, ety, ln)
                else:
                    # padded column q = p[1] + iw goes to plane q % 2 at q // 2
                    first = p[1] % 2  # the plane of iw = 0
                    dst0 = fn.at(odd_plane if first else plane, fn.add(row, p[1] // 2))
                    dst1 = fn.at(plane if first else odd_plane, fn.add(row, (p[1] + 1) // 2))
                    _deinterleave(fn, dst0, dst1, srow, w, ety, ln)

            fn.loop(0, h, fill)
            wts = [
                fn.splat(fn.load(fn.at(ptr["w"], fn.add(fn.mul(ch, kh_n * kw_n), t))), ln)
                for t in range(kh_n * kw_n)
            ]
            bv = fn.splat(fn.load(fn.at(bias, ch)), ln) if bias is not None else None
            dst = fn.at(ptr["output"], fn.mul(nc, oh * ow), ety)

            def out_rows(r: Int, nr: int) -> None:
                """Output rows r .. r + nr - 1 (the rows' shared input rows loaded once: LLVM merges
                the repeated loads)."""
                for v0 in range(0, ovec, lay["nv"]):
                    vs = list(range(v0, min(ovec, v0 + lay["nv"])))
                    accs = [[zero] * len(vs) for _ in range(nr)]
                    for rr in range(nr):
                        for kh in range(kh_n):
                            roff = fn.mul(fn.add(fn.mul(fn.add(r, rr), sh), kh * dh), pw)
                            rows = (fn.at(plane, roff), fn.at(odd_plane, roff))
                            for kw in range(kw_n):
                                wv = wts[kh * kw_n + kw]
                                q = kw * dw  # padded column of the tap, from the output column * sw
                                rowp, qoff = (rows[0], q) if sw == 1 else (rows[q % 2], q // 2)
                                for i, vi in enumerate(vs):
                                    xv = fn.vload(fn.at(rowp, vi * ln + qoff), ln)
                                    accs[rr][i] = fn.fma(wv, xv, accs[rr][i])
                    for rr in range(nr):
                        for i, vi in enumerate(vs):
                            v = accs[rr][i]
                            if bv is not None:
                                v = b.fadd(v, bv)
                            if relu:
                                v = b.select(b.fcmp_unordered(">=", v, zero), v, zero)
                                if lim is not None:
                                    v = b.select(b.fcmp_unordered("<=", v, lim), v, lim)
                            fn.vstore(
                                fn.narrow(v, ety),
                                fn.at(dst, fn.add(fn.mul(fn.add(r, rr), ow), vi * ln), ety),
                                fn.mask(ln, ow, vi * ln),
                            )

            # several rows at a time with 32 vector registers (their taps share input rows)
            nr = (DW_ROWS if sh == 1 else 2) if ln >= 16 else 1
            fn.loop(0, oh // nr, lambda i, _c: out_rows(fn.mul(i, nr), nr))
            for r_tail in range(oh // nr * nr, oh):
                out_rows(r_tail, 1)

        fn.loop(c_lo, c_hi, channel)
        fn.ret()


def _deinterleave(
    fn: Fn, even: ir.Value, odd: ir.Value, src: ir.Value, count: int, ety: ir.Type, ln: int
) -> None:
    """even[j] = f32(src[2j]), odd[j] = f32(src[2j + 1]) for the ``count`` (static) source elements."""
    b = fn.b
    evens = ir.Constant(ir.VectorType(ir.IntType(32), ln), list(range(0, 2 * ln, 2)))
    odds = ir.Constant(ir.VectorType(ir.IntType(32), ln), list(range(1, 2 * ln, 2)))
    for j0 in range(0, count, 2 * ln):
        v0 = fn.vload(fn.at(src, j0, ety), ln, ety, fn.mask(ln, count - j0))
        v1 = (
            fn.vload(fn.at(src, j0 + ln, ety), ln, ety, fn.mask(ln, count - j0 - ln))
            if count - j0 > ln
            else ir.Constant(v0.type, None)
        )
        n_even, n_odd = -(-(count - j0) // 2), (count - j0) // 2
        fn.vstore(fn.widen(b.shuffle_vector(v0, v1, evens)), fn.at(even, j0 // 2), fn.mask(ln, n_even))
        if n_odd > 0:
            fn.vstore(fn.widen(b.shuffle_vector(v0, v1, odds)), fn.at(odd, j0 // 2), fn.mask(ln, n_odd))


def _zero_plane(fn: Fn, plane: ir.Value, count: int, ln: int) -> None:
    z = fn.vzero(ln)
    fn.loop(0, count // ln, lambda i, _c: fn.vstore(z, fn.at(plane, fn.mul(i, ln))))


def _copy_dyn(fn: Fn, dst: ir.Value, src: ir.Value, count: int, ety: ir.Type, ln: int) -> None:
    """dst[j] = f32(src[j]) for j < count (static count; vector loop plus masked tail)."""
    full = count // ln
    if full:
        fn.loop(
            0,
            full,
            lambda j, _c: fn.vstore(
                fn.widen(fn.vload(fn.at(src, fn.mul(j, ln), ety), ln, ety)), fn.at(dst, fn.mul(j, ln))
            ),
        )
    if count % ln:
        m = fn.mask(ln, count, full * ln)
        v = fn.widen(fn.vload(fn.at(src, full * ln, ety), ln, ety, m))
        fn.vstore(v, fn.at(dst, full * ln), fn.mask(ln, count - full * ln))


__all__ = ["ConvF32", "DepthwiseF32", "F32", "conv_geometry", "f32_templates"]


def f32_templates() -> list[Template]:
    """The fast float-mode templates of this module and :mod:`.gemm_f32`, for the registry
    (``TEMPLATES`` in :mod:`lamina.targets.cpu.kernels`)."""
    from .gemm_f32 import BatchMatMulF32, MatMulF32

    return [ConvF32(), DepthwiseF32(), MatMulF32(), BatchMatMulF32()]

"""Fast FP32 kernels for the CPU target: the LLVM IR building blocks (:class:`Fn`), the register-tiled
GEMM micro-kernel (:func:`gemm_tile`, :func:`store_tile`) and the ``tpu.MatMul`` template
(:class:`MatMulF32`). The convolution templates (:mod:`.conv_f32`) use the same blocks.

The micro-kernel keeps an ``mr x nv`` block of vector accumulators in registers (AVX-512: 8 rows x 3
``<16 x float>``; AVX2: 6 x 2 ``<8 x float>``; 16-byte vectors: 4 x 2 ``<4 x float>``) and runs
the whole K loop with one ``llvm.fma`` per accumulator per k: each k broadcasts ``mr`` scalars of
the *broadcast operand* (``a``: a pre-packed weight panel for convolutions, the activation rows for
MatMul) and loads ``nv`` vectors of the *vector operand* (``b``: im2col/activation columns for
convolutions, a pre-packed weight panel for MatMul). The epilogue adds the bias, applies ReLU / the
ReLU limit as the ``tpu`` op does (NaN propagates like ``np.maximum``/``np.minimum``), rounds to
the result's element type (f16/bf16: round to nearest even, as the op's float mode does) and stores,
masked at the tails.

F16/BF16 modes compute as the ``tpu`` op's float mode does: operands widened to f32 exactly, f32
arithmetic, result rounded once. Sums run in a different order than numpy's, so results agree with
``execute`` to rounding (the tests' tolerance: 1e-4 of the output's scale, plus one ulp of the
result type for f16/bf16).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from lamina.dialects.top.base import elem_of
from lamina.ir.constants import constant_array
from lamina.ir.types import NoneType

from .abi import Isa, KernelPlan, Template
from .irconst import splat
from .vmath_f32 import vexp

F32 = ir.FloatType()
F16 = ir.HalfType()
I1 = ir.IntType(1)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()


class _BFloat(ir.Type):
    """LLVM's ``bfloat`` (llvmlite's IR builder has no class for it)."""

    null = "0xR0000"

    def _to_string(self) -> str:
        return "bfloat"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _BFloat)

    def __hash__(self) -> int:
        return hash("bfloat")


BF16 = _BFloat()

#: element type name -> (LLVM type, bytes, intrinsic suffix)
ELEMS: dict[str, tuple[ir.Type, int, str]] = {
    "f32": (F32, 4, "f32"),
    "f16": (F16, 2, "f16"),
    "bf16": (BF16, 2, "bf16"),
}

#: k steps per iteration of the micro-kernel's K loop
UNROLL = 4

Int = Any  # a Python int (folded at emission) or an ``ir.Value`` of type i64


def elem_name(t: Any) -> str | None:
    """'f32', 'f16' or 'bf16' for a tensor type of those elements, else None."""
    e = str(elem_of(t))
    return e if e in ELEMS else None


def static_shape(t: Any) -> tuple[int, ...] | None:
    s = getattr(t, "shape", None)
    if s is None or any(int(d) < 0 for d in s):
        return None
    return tuple(int(d) for d in s)


def weight_of(v: Any) -> np.ndarray | None:
    """The compile-time value of a weight operand as float32, else None."""
    a = constant_array(v)
    return None if a is None else np.asarray(a).astype(np.float32)


@dataclass(frozen=True)
class Tile:
    """Register tile: vector lanes, accumulator rows, vectors per row."""

    lanes: int
    mr: int
    nv: int

    @property
    def nb(self) -> int:
        return self.lanes * self.nv


def tile_for(isa: Isa) -> Tile:
    if isa.vector_bytes >= 64:
        return Tile(16, 8, 3)
    if isa.vector_bytes >= 32:
        return Tile(8, 6, 2)
    return Tile(4, 4, 2)


def units_or_panels(
    b: ir.IRBuilder, nparts: Any, units: int, panels: int, overhead: float, share: Callable[[int], Any]
) -> tuple[Any, Any, Any, Any]:
    """A part's units ``[u_lo, u_hi)`` of ``units`` and panels ``[p_lo, p_hi)`` of ``panels`` (i64
    values; ``share(n)`` gives the part's balanced ``[lo, hi)`` of ``n``). Each unit's work is
    ``panels`` panels plus ``overhead`` panels' worth every part taking the unit repeats (e.g.
    transforming its input): the units split between the parts (every part taking all panels)
    unless splitting every unit's panels costs less — where there are fewer units than parts, or an
    odd few (Winograd's one block of ResNet-50's 14x14 layers: two threads took as long as one).
    Used by :class:`Fn` and by the INT8 builder's Winograd (:mod:`.winograd_int8`)."""

    def c(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    scale = 16  # fixed point for the overhead
    ov = round(overhead * scale)
    per_u = b.udiv(b.add(c(units), b.sub(nparts, c(1))), nparts)
    per_p = b.udiv(b.add(c(panels), b.sub(nparts, c(1))), nparts)
    cost_u = b.mul(per_u, c(panels * scale + ov))
    cost_p = b.mul(c(units), b.add(b.mul(per_p, c(scale)), c(ov)))
    by_p = b.icmp_signed("<", cost_p, cost_u)
    u_lo, u_hi = share(units)
    p_lo, p_hi = share(panels)
    return (
        b.select(by_p, c(0), u_lo),
        b.select(by_p, c(units), u_hi),
        b.select(by_p, p_lo, c(0)),
        b.select(by_p, p_hi, c(panels)),
    )


class Fn:
    """One kernel function ``void @symbol(ptr bufs, i64 part, i64 nparts)`` being built, with
    helpers that fold Python ints and build counted loops."""

    def __init__(self, module: ir.Module, symbol: str) -> None:
        self.m = module
        self.f = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), symbol)
        self.f.args[0].name, self.f.args[1].name, self.f.args[2].name = "bufs", "part", "nparts"
        self.bufs, self.part, self.nparts = self.f.args
        self.b = ir.IRBuilder(self.f.append_basic_block("entry"))

    # ---- integers (Python ints fold) ----
    def c(self, v: Int) -> ir.Value:
        return ir.Constant(I64, v) if isinstance(v, int) else v

    def add(self, a: Int, b: Int) -> Int:
        if isinstance(a, int) and isinstance(b, int):
            return a + b
        if isinstance(b, int) and b == 0:
            return a
        if isinstance(a, int) and a == 0:
            return b
        return self.b.add(self.c(a), self.c(b))

    def sub(self, a: Int, b: Int) -> Int:
        if isinstance(a, int) and isinstance(b, int):
            return a - b
        if isinstance(b, int) and b == 0:
            return a
        return self.b.sub(self.c(a), self.c(b))

    def mul(self, a: Int, b: Int) -> Int:
        if isinstance(a, int) and isinstance(b, int):
            return a * b
        if (isinstance(a, int) and a == 0) or (isinstance(b, int) and b == 0):
            return 0
        if isinstance(b, int) and b == 1:
            return a
        if isinstance(a, int) and a == 1:
            return b
        return self.b.mul(self.c(a), self.c(b))

    def udiv(self, a: Int, b: Int) -> Int:
        if isinstance(a, int) and isinstance(b, int):
            return a // b
        return self.b.udiv(self.c(a), self.c(b))

    def min(self, a: Int, b: Int) -> Int:
        if isinstance(a, int) and isinstance(b, int):
            return min(a, b)
        return self.b.select(self.b.icmp_signed("<", self.c(a), self.c(b)), self.c(a), self.c(b))

    def lt(self, a: Int, b: Int) -> ir.Value:
        return self.b.icmp_signed("<", self.c(a), self.c(b))

    def share(self, total: int, part: Int | None = None) -> tuple[Int, Int]:
        """[lo, hi) of this part's share of ``total`` units (balanced to one unit)."""
        p = self.part if part is None else part
        lo = self.udiv(self.mul(p, total), self.nparts)
        hi = self.udiv(self.mul(self.add(p, 1), total), self.nparts)
        return lo, hi

    def share_units_or_panels(self, units: int, panels: int, overhead: float) -> tuple[Int, Int, Int, Int]:
        """This part's units ``[u_lo, u_hi)`` of ``units`` and panels ``[p_lo, p_hi)`` of ``panels``:
        :func:`units_or_panels` with this function's balanced shares."""
        return units_or_panels(
            self.b, self.nparts, units, panels, overhead, lambda n: tuple(self.c(v) for v in self.share(n))
        )

    # ---- memory ----
    def buf(self, i: int) -> ir.Value:
        p = self.b.gep(self.bufs, [self.c(i)], source_etype=PTR)
        return self.b.load(p, typ=PTR, align=8)

    def at(self, p: ir.Value, off: Int, ety: ir.Type = F32) -> ir.Value:
        if isinstance(off, int) and off == 0:
            return p
        return self.b.gep(p, [self.c(off)], source_etype=ety)

    def load(self, p: ir.Value, ety: ir.Type = F32) -> ir.Value:
        return self.b.load(p, typ=ety, align=ELEMS_BYTES.get(str(ety), 4))

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        g = self.m.globals.get(name)
        if g is None:
            g = ir.Function(self.m, ir.FunctionType(ret, list(args)), name)
        return g

    def vload(self, p: ir.Value, lanes: int, ety: ir.Type = F32, mask: ir.Value | None = None) -> ir.Value:
        vt = ir.VectorType(ety, lanes)
        align = ELEMS_BYTES[str(ety)]
        if mask is None:
            return self.b.load(p, typ=vt, align=align)
        fn = self.intrinsic(f"llvm.masked.load.v{lanes}{_suffix(ety)}.p0", vt, [PTR, I32, mask.type, vt])
        return self.b.call(fn, [p, ir.Constant(I32, align), mask, ir.Constant(vt, None)])

    def vstore(self, v: ir.Value, p: ir.Value, mask: ir.Value | None = None) -> None:
        vt = v.type
        align = ELEMS_BYTES[str(vt.element)]
        if mask is None:
            self.b.store(v, p, align=align)
            return
        fn = self.intrinsic(
            f"llvm.masked.store.v{vt.count}{_suffix(vt.element)}.p0", ir.VoidType(), [vt, PTR, I32, mask.type]
        )
        self.b.call(fn, [v, p, ir.Constant(I32, align), mask])

    def splat(self, s: ir.Value, lanes: int) -> ir.Value:
        vt = ir.VectorType(s.type, lanes)
        v = self.b.insert_element(ir.Constant(vt, ir.Undefined), s, ir.Constant(I32, 0))
        return self.b.shuffle_vector(
            v, ir.Constant(vt, ir.Undefined), ir.Constant(ir.VectorType(I32, lanes), None)
        )

    def vzero(self, lanes: int) -> ir.Value:
        return ir.Constant(ir.VectorType(F32, lanes), None)

    def vconst(self, x: float, lanes: int) -> ir.Value:
        return splat(F32, float(x), lanes)

    def fma(self, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
        vt = a.type
        fn = self.intrinsic(f"llvm.fma.v{vt.count}f32", vt, [vt, vt, vt])
        return self.b.call(fn, [a, b, c])

    def mask(self, lanes: int, n: Int, first: int = 0) -> ir.Value | None:
        """The lane mask ``first + lane < n`` (None when all lanes are on; a constant when ``n`` is)."""
        if isinstance(n, int):
            if n - first >= lanes:
                return None
            return ir.Constant(ir.VectorType(I1, lanes), [1 if first + i < n else 0 for i in range(lanes)])
        iota = ir.Constant(ir.VectorType(I64, lanes), [first + i for i in range(lanes)])
        return self.b.icmp_signed("<", iota, self.splat(self.c(n), lanes))

    # ---- element conversion ----
    def widen(self, v: ir.Value) -> ir.Value:
        """f16/bf16 vector (or scalar) -> f32 (exact)."""
        if v.type == F32 or (isinstance(v.type, ir.VectorType) and v.type.element == F32):
            return v
        t = ir.VectorType(F32, v.type.count) if isinstance(v.type, ir.VectorType) else F32
        return self.b.fpext(v, t)

    def narrow(self, v: ir.Value, ety: ir.Type) -> ir.Value:
        """f32 vector -> ``ety`` (round to nearest even)."""
        if ety == F32:
            return v
        return self.b.fptrunc(v, ir.VectorType(ety, v.type.count))

    # ---- control ----
    def loop(
        self,
        lo: Int,
        hi: Int,
        body: Callable[[ir.Value, list[ir.Value]], list[ir.Value] | None],
        carried: Sequence[ir.Value] = (),
        step: int = 1,
    ) -> list[ir.Value]:
        """``for (i = lo; i < hi; i += step)`` with loop-carried values; returns their final values."""
        b = self.b
        if isinstance(lo, int) and isinstance(hi, int) and lo >= hi:
            return list(carried)
        pre = b.block
        body_bb = self.f.append_basic_block("loop")
        exit_bb = self.f.append_basic_block("endloop")
        guarded = not (isinstance(lo, int) and isinstance(hi, int))
        if not guarded:
            b.branch(body_bb)
        else:
            b.cbranch(self.lt(lo, hi), body_bb, exit_bb)
        b.position_at_end(body_bb)
        i = b.phi(I64, "i")
        i.add_incoming(self.c(lo), pre)
        phis = []
        for v in carried:
            p = b.phi(v.type)
            p.add_incoming(v, pre)
            phis.append(p)
        new = body(i, list(phis))
        new = list(phis) if new is None else new
        nxt = b.add(i, self.c(step))
        end = b.block
        i.add_incoming(nxt, end)
        for p, v in zip(phis, new):
            p.add_incoming(v, end)
        b.cbranch(self.lt(nxt, hi), body_bb, exit_bb)
        b.position_at_end(exit_bb)
        if not guarded:
            return new
        outs = []
        for v0, v in zip(carried, new):
            p = b.phi(v0.type)
            p.add_incoming(v0, pre)
            p.add_incoming(v, end)
            outs.append(p)
        return outs

    def when(
        self, cond: ir.Value, then: Callable[[], None], otherwise: Callable[[], None] | None = None
    ) -> None:
        b = self.b
        t_bb = self.f.append_basic_block("then")
        e_bb = self.f.append_basic_block("else") if otherwise else None
        j_bb = self.f.append_basic_block("endif")
        b.cbranch(cond, t_bb, e_bb or j_bb)
        b.position_at_end(t_bb)
        then()
        b.branch(j_bb)
        if e_bb is not None and otherwise is not None:
            b.position_at_end(e_bb)
            otherwise()
            b.branch(j_bb)
        b.position_at_end(j_bb)

    def ret(self) -> None:
        self.b.ret_void()


ELEMS_BYTES = {"float": 4, "half": 2, "bfloat": 2, "i64": 8, "i32": 4, "i16": 2, "i8": 1, "ptr": 8}


def _suffix(ety: ir.Type) -> str:
    return {"float": "f32", "half": "f16", "bfloat": "bf16"}[str(ety)]


# ---- the micro-kernel --------------------------------------------------------------------------------


def gemm_tile(
    fn: Fn,
    tile: Tile,
    mr: int,
    k_total: int,
    a: ir.Value,
    a_rs: int,
    a_ks: int,
    bp: ir.Value,
    b_ks: Int,
    b_masks: Sequence[ir.Value | None] | None = None,
    unroll: int | None = None,
    init: Sequence[ir.Value] | None = None,
    b_taps: tuple[int, Sequence[int]] | None = None,
    a_taps: tuple[int, Sequence[int]] | None = None,
) -> list[ir.Value]:
    """``acc[i][j] = sum_k a[i*a_rs + k*a_ks] * b[k*b_ks + j*lanes : +lanes]`` for ``i < mr``,
    ``j < tile.nv`` (row-major list of ``mr * nv`` f32 vectors). ``b_masks``: per-vector load masks
    (tails of unpadded operands); ``init``: the accumulators' starting values (zeros by default: a
    K block continuing earlier blocks' partial sums). ``b_taps = (stride, offsets)``: the vector
    operand's k-th row is at ``(k // T) * stride + offsets[k % T]`` instead of ``k * b_ks``
    (``T = len(offsets)`` dividing ``k_total``; a convolution's taps over a row-shifted copy);
    ``a_taps`` the same for the broadcast operand (instead of ``k * a_ks``)."""
    ln, nv = tile.lanes, tile.nv
    unroll = UNROLL if unroll is None else unroll
    masks = list(b_masks) if b_masks is not None else [None] * nv
    live = [j for j in range(nv) if not (masks[j] is not None and _all_off(masks[j]))]

    def step(
        kk: Int, accs: list[ir.Value], boff: Int | None = None, aoff: Int | None = None
    ) -> list[ir.Value]:
        boff = fn.mul(kk, b_ks) if boff is None else boff
        bv = {j: fn.vload(fn.at(bp, fn.add(boff, j * ln)), ln, mask=masks[j]) for j in live}
        aoff = fn.mul(kk, a_ks) if aoff is None else aoff
        for i in range(mr):
            s = fn.splat(fn.load(fn.at(a, fn.add(aoff, i * a_rs))), ln)
            for j in live:
                accs[i * nv + j] = fn.fma(s, bv[j], accs[i * nv + j])
        return accs

    def body(k: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
        for u in range(unroll):
            accs = step(fn.add(k, u), accs)
        return accs

    start = list(init) if init is not None else [fn.vzero(ln)] * (mr * nv)
    if b_taps is not None or a_taps is not None:
        nt = len((b_taps or a_taps)[1])  # type: ignore[index]
        assert k_total % nt == 0 and (a_taps is None or b_taps is None or len(a_taps[1]) == nt)

        def outer(o: ir.Value, accs: list[ir.Value]) -> list[ir.Value]:
            for t in range(nt):
                kk = fn.add(fn.mul(o, nt), t)
                boff = fn.add(fn.mul(o, b_taps[0]), b_taps[1][t]) if b_taps is not None else None
                aoff = fn.add(fn.mul(o, a_taps[0]), a_taps[1][t]) if a_taps is not None else None
                accs = step(kk, accs, boff, aoff)
            return accs

        return fn.loop(0, k_total // nt, outer, start)
    main = k_total // unroll * unroll
    accs = fn.loop(0, main, body, start, step=unroll) if main else start
    for kk in range(main, k_total):
        accs = step(kk, accs)
    return accs


def _all_off(m: ir.Value) -> bool:
    """Whether ``m`` is a constant mask with no lane on (its lanes are ``ir.Constant`` objects,
    always truthy themselves: their ``constant`` is the value)."""
    if not (isinstance(m, ir.Constant) and isinstance(m.constant, list)):
        return False
    return not any(getattr(c, "constant", c) for c in m.constant)


def vsigmoid(fn: Fn, x: ir.Value) -> ir.Value:
    """``1 / (1 + exp(-x))`` of an f32 vector, inline, with the exp the generic elementwise kernels
    compute (:func:`.vmath_f32.vexp`, Cephes' ``expf`` within 2 ulp), lane by lane."""
    b = fn.b
    one = fn.vconst(1.0, x.type.count)
    return b.fdiv(one, b.fadd(one, vexp(b, fn.m, b.fneg(x))))


def vsilu(fn: Fn, x: ir.Value, alpha: float) -> ir.Value:
    """``x * sigmoid(alpha * x)`` (``tpu.SiLU``) of an f32 vector."""
    a = x if alpha == 1.0 else fn.b.fmul(x, fn.vconst(alpha, x.type.count))
    return fn.b.fmul(x, vsigmoid(fn, a))


@dataclass
class Epilogue:
    """What the tile's store does: bias per row (``row_bias``, f32 pointer at the tile's first row)
    or per column (``col_bias``, at its first column, padded), ``relu``, ``limit`` (> 0: clamp above)
    and the result element type. K-blocked tiles: ``accumulate`` (a runtime i1) adds what the
    output holds (f32) before; ``raw``: a K block that is not the last (the f32 partial sums
    stored, no epilogue: it runs with the last block). ``residual``: a pointer laid out as the output whose values are
    added after the op's own ReLU (the op's result rounded to its type first, as the separate add
    would see it), then ``post_relu``; ``silu``: a SiLU of that ``alpha`` after the op's ReLU (f32)."""

    out_ety: ir.Type = F32
    relu: bool = False
    limit: float = -1.0
    row_bias: ir.Value | None = None
    col_bias: ir.Value | None = None
    #: a fused unary activation of the f32 vectors, applied last (MatMul's fused GELU)
    act: Callable[[ir.Value], ir.Value] | None = None
    accumulate: ir.Value | None = None
    residual: ir.Value | None = None
    post_relu: bool = False
    silu: float | None = None
    raw: bool = False


def store_tile(
    fn: Fn,
    tile: Tile,
    accs: list[ir.Value],
    rows: int,
    cp: ir.Value,
    c_rs: Int,
    ep: Epilogue,
    s_masks: Sequence[ir.Value | None] | None = None,
) -> None:
    """Store the first ``rows`` rows of a tile at ``cp + i*c_rs + j*lanes`` (elements of the result
    type), with the epilogue; ``s_masks``: per-vector store masks."""
    ln, nv = tile.lanes, tile.nv
    masks = list(s_masks) if s_masks is not None else [None] * nv
    b = fn.b
    zero = fn.vzero(ln)
    lim = fn.vconst(ep.limit, ln) if ep.relu and ep.limit > 0 else None
    cb = [fn.vload(fn.at(ep.col_bias, j * ln), ln) for j in range(nv)] if ep.col_bias is not None else None
    for i in range(rows):
        rb = fn.splat(fn.load(fn.at(ep.row_bias, i)), ln) if ep.row_bias is not None else None
        for j in range(nv):
            if masks[j] is not None and _all_off(masks[j]):
                continue
            off = fn.add(fn.mul(i, c_rs), j * ln)
            dst = fn.at(cp, off, ep.out_ety)
            v = accs[i * nv + j]
            if ep.accumulate is not None:
                old = fn.vload(dst, ln, F32, masks[j])
                v = b.select(ep.accumulate, b.fadd(v, old), v)
            if ep.raw:
                fn.vstore(v, dst, masks[j])
                continue
            if rb is not None:
                v = b.fadd(v, rb)
            if cb is not None:
                v = b.fadd(v, cb[j])
            if ep.relu:
                v = b.select(b.fcmp_unordered(">=", v, zero), v, zero)
                if lim is not None:
                    v = b.select(b.fcmp_unordered("<=", v, lim), v, lim)
            if ep.silu is not None:
                v = vsilu(fn, v, ep.silu)
            if ep.residual is not None:
                v = fn.widen(fn.narrow(v, ep.out_ety))
                v = b.fadd(
                    v, fn.widen(fn.vload(fn.at(ep.residual, off, ep.out_ety), ln, ep.out_ety, masks[j]))
                )
                if ep.post_relu:
                    v = b.select(b.fcmp_unordered(">=", v, zero), v, zero)
            if ep.act is not None:
                v = ep.act(v)
            fn.vstore(fn.narrow(v, ep.out_ety), dst, masks[j])


# ---- MatMul ----------------------------------------------------------------------------------------------


def _relu_attrs(op: Any) -> tuple[bool, float]:
    relu = bool(op.attr("do_relu"))
    limit = op.attr("relu_limit")
    return relu, float(limit) if limit is not None else -1.0


def _bias_ok(op: Any, n: int) -> bool:
    """No bias, or a constant one of ``n`` values along the last axis (broadcast over the rest)."""
    if isinstance(op.bias.type, NoneType):
        return True
    bs = static_shape(op.bias.type)
    if bs is None or weight_of(op.bias) is None or elem_name(op.bias.type) != elem_name(op.input.type):
        return False
    return (
        bool(bs)
        and bs[-1] == n
        and all(d == 1 for d in bs[:-1])
        and len(bs) <= len(static_shape(op.output.type) or ())
    )


def _matmul_dims(op: Any) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of a MatMul of an activation ``[..., M, K]`` (or ``[K]``) by a 2-d weight."""
    a, w = static_shape(op.input.type), static_shape(op.right.type)
    if a is None or w is None or len(w) != 2 or not a:
        return None
    if len(a) == 1:
        return (1, 1, a[0], w[1]) if a[0] == w[0] else None
    if a[-1] != w[0]:
        return None
    return int(np.prod(a[:-2], dtype=np.int64)), a[-2], a[-1], w[1]


class MatMulF32(Template):
    """``tpu.MatMul`` in a float mode of an activation ``[..., M, K]`` by a constant ``[K, N]``
    weight: rows of the activation broadcast, weight panels of ``lanes * nv`` columns packed
    ``[N/nb][K][nb]`` (zero-padded), bias per column, ReLU. Parts split the rows (``M * batch``)
    when there are enough, else the column panels."""

    name = "matmul_f32"
    priority = 10
    code_reads_constants = False  # the weight panels and bias are buffers (kernels/codekey.py)

    def fuses(self, op: Any, consumer: Any) -> bool:
        """An erf GELU of an f32 MatMul's result (BERT's FFN): computed on the tile's registers."""
        if consumer.name != "tpu.GELU" or consumer.attr("approximate") == "tanh":
            return False
        if op.get_attr("cpu.fused") is not None or consumer.operands[0].defining_op() is not op:
            return False
        return elem_name(op.output.type) == "f32" and elem_name(consumer.results[0].type) == "f32"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.MatMul" or len(op.operands) != 3:
            return False
        ft = elem_name(op.input.type)
        if ft is None or elem_name(op.output.type) != ft or elem_name(op.right.type) != ft:
            return False
        if _matmul_dims(op) is None or weight_of(op.right) is None:
            return False
        return _bias_ok(op, static_shape(op.right.type)[-1])  # type: ignore[index]

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        tile = tile_for(isa)
        batch, m, k, n = _matmul_dims(op)  # type: ignore[misc]
        w = weight_of(op.right)
        assert w is not None
        panels = -(-n // tile.nb)
        wp = np.zeros((panels, k, tile.nb), np.float32)
        for p in range(panels):
            cols = w[:, p * tile.nb : (p + 1) * tile.nb]
            wp[p, :, : cols.shape[1]] = cols
        weights = {"w": wp}
        buffers: list[tuple[str, Any]] = [("in", "input"), ("weight", "w")]
        if not isinstance(op.bias.type, NoneType):
            bias = np.zeros(panels * tile.nb, np.float32)
            bias[:n] = weight_of(op.bias).reshape(-1)  # type: ignore[union-attr]
            weights["b"] = bias
            buffers.append(("weight", "b"))
        fused = op.get_attr("cpu.fused") is not None
        buffers.append(("out", 0) if fused else ("out", "output"))  # a fused GELU's: the kernel's result
        esz = ELEMS[elem_name(op.input.type)][1]  # type: ignore[index]
        return KernelPlan(
            symbol,
            buffers,
            weights,
            0,
            macs=batch * m * k * n,
            bytes=esz * batch * m * (k + n) + 4 * k * n,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        tile = tile_for(isa)
        ln, nb = tile.lanes, tile.nb
        batch, m, k, n = _matmul_dims(op)  # type: ignore[misc]
        ety = ELEMS[elem_name(op.input.type)][0]  # type: ignore[index]
        rows = batch * m
        fn = Fn(module, plan.symbol)
        keys = [b for b in plan.buffers]
        x = fn.buf(keys.index(("in", "input")))
        wp = fn.buf(keys.index(("weight", "w")))
        bias = fn.buf(keys.index(("weight", "b"))) if ("weight", "b") in keys else None
        y = fn.buf(len(keys) - 1)  # the result (the op's, or a fused GELU's)
        relu, limit = _relu_attrs(op)
        act = _fused_act(module, fn, op)
        panels = -(-n // nb)
        full_rows = rows // tile.mr * tile.mr
        rem_rows = rows - full_rows
        rtiles = -(-rows // tile.mr)
        # split rows when there are at least 2 row tiles per part (for 2 parts), else panels
        by_rows = rtiles >= 4 or panels == 1
        if by_rows:
            t_lo, t_hi = fn.share(rtiles)
            p_lo, p_hi = 0, panels
        else:
            t_lo, t_hi = 0, rtiles
            p_lo, p_hi = fn.share(panels)

        def do_panel(p: ir.Value) -> None:
            col0 = fn.mul(p, nb)
            wpan = fn.at(wp, fn.mul(p, k * nb))
            ncols = fn.sub(n, col0)
            smasks = [fn.mask(ln, ncols, j * ln) for j in range(tile.nv)]
            ep = Epilogue(ety, relu, limit, col_bias=fn.at(bias, col0) if bias is not None else None, act=act)

            def row_tile(mr: int, r0: Int) -> None:
                if ety == F32:
                    a = fn.at(x, fn.mul(r0, k))
                    a_rs = k
                    accs = gemm_tile(fn, tile, mr, k, a, a_rs, 1, wpan, nb)
                else:
                    # widen the rows' scalars on the fly (f16/bf16 activations)
                    accs = _gemm_tile_narrow(fn, tile, mr, k, x, r0, ety, wpan, nb)
                store_tile(fn, tile, accs, mr, fn.at(y, fn.add(fn.mul(r0, n), col0), ety), n, ep, smasks)

            def full(t: ir.Value) -> None:
                row_tile(tile.mr, fn.mul(t, tile.mr))

            last_full = full_rows // tile.mr
            fn.loop(t_lo, fn.min(t_hi, last_full), lambda t, _c: full(t))
            if rem_rows:
                fn.when(fn.lt(last_full, t_hi), lambda: row_tile(rem_rows, full_rows))

        # the last panel's stores are masked; masks computed from the remaining columns
        fn.loop(p_lo, p_hi, lambda p, _c: do_panel(p))
        fn.ret()


def _fused_act(module: Any, fn: Fn, op: Any) -> Callable[[ir.Value], ir.Value] | None:
    """The GELU fused into a MatMul's kernel (``cpu.fused``, :meth:`MatMulF32.fuses`), else None."""
    from .generic_ir import fused_consumers
    from .vmath_f32 import vgelu

    if any(c.name == "tpu.GELU" for c in fused_consumers(op)):
        return lambda v: vgelu(fn.b, module, v)
    return None


def _gemm_tile_narrow(
    fn: Fn, tile: Tile, mr: int, k_total: int, x: ir.Value, r0: Int, ety: ir.Type, wpan: ir.Value, nb: int
) -> list[ir.Value]:
    """:func:`gemm_tile` with the broadcast operand in f16/bf16 rows of ``k_total`` elements."""
    ln, nv = tile.lanes, tile.nv

    def step(kk: Int, accs: list[ir.Value]) -> list[ir.Value]:
        boff = fn.mul(kk, nb)
        bv = [fn.vload(fn.at(wpan, fn.add(boff, j * ln)), ln) for j in range(nv)]
        for i in range(mr):
            s = fn.widen(fn.load(fn.at(x, fn.add(fn.mul(fn.add(r0, i), k_total), kk), ety), ety))
            sv = fn.splat(s, ln)
            for j in range(nv):
                accs[i * nv + j] = fn.fma(sv, bv[j], accs[i * nv + j])
        return accs

    zero = fn.vzero(ln)
    return fn.loop(0, k_total, lambda k, accs: step(k, accs), [zero] * (mr * nv))


class BatchMatMulF32(Template):
    """``tpu.MatMul`` in a float mode of two activations ``[*batch, M, K] x [*batch, K, N]`` (the
    same batch, or a 2-d right operand): no packing; rows of the left operand broadcast, the right
    operand's rows loaded in place (masked at the column tail); constant bias per column, ReLU.
    Parts split the (batch, row tile) pairs."""

    name = "batch_matmul_f32"
    priority = 10

    @staticmethod
    def _dims(op: Any) -> tuple[int, int, int, int, bool] | None:
        a, b = static_shape(op.input.type), static_shape(op.right.type)
        if a is None or b is None or len(a) < 2 or len(b) < 2 or a[-1] != b[-2]:
            return None
        if len(b) == 2:
            shared = True
        elif tuple(a[:-2]) == tuple(b[:-2]):
            shared = False
        else:
            return None
        return int(np.prod(a[:-2], dtype=np.int64)), a[-2], a[-1], b[-1], shared

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.MatMul" or len(op.operands) != 3:
            return False
        ft = elem_name(op.input.type)
        if ft != "f32" or elem_name(op.output.type) != ft or elem_name(op.right.type) != ft:
            return False
        if self._dims(op) is None or weight_of(op.right) is not None:
            return False
        return _bias_ok(op, self._dims(op)[3])  # type: ignore[index]

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        tile = tile_for(isa)
        batch, m, k, n, shared = self._dims(op)  # type: ignore[misc]
        buffers: list[tuple[str, Any]] = [("in", "input"), ("in", "right")]
        weights = {}
        if not isinstance(op.bias.type, NoneType):
            bias = np.zeros(-(-n // tile.nb) * tile.nb, np.float32)
            bias[:n] = weight_of(op.bias).reshape(-1)  # type: ignore[union-attr]
            weights["b"] = bias
            buffers.append(("weight", "b"))
        buffers.append(("out", "output"))
        return KernelPlan(
            symbol,
            buffers,
            weights,
            0,
            macs=batch * m * k * n,
            bytes=4 * (batch * m * (k + n) + (1 if shared else batch) * k * n),
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        tile = tile_for(isa)
        ln, nb, mr = tile.lanes, tile.nb, tile.mr
        batch, m, k, n, shared = self._dims(op)  # type: ignore[misc]
        fn = Fn(module, plan.symbol)
        keys = list(plan.buffers)
        x = fn.buf(keys.index(("in", "input")))
        r = fn.buf(keys.index(("in", "right")))
        bias = fn.buf(keys.index(("weight", "b"))) if ("weight", "b") in keys else None
        y = fn.buf(keys.index(("out", "output")))
        relu, limit = _relu_attrs(op)
        rtiles = -(-m // mr)
        rem = m - (rtiles - 1) * mr
        full_panels, tail = n // nb, n % nb
        u_lo, u_hi = fn.share(batch * rtiles)

        def rows_tile(bi: Int, r0: Int, rows: int) -> None:
            a = fn.at(x, fn.add(fn.mul(bi, m * k), fn.mul(r0, k)))
            rb = fn.at(r, fn.mul(bi, k * n)) if not shared else r
            yb = fn.at(y, fn.add(fn.mul(bi, m * n), fn.mul(r0, n)))

            def panel(c0: Int, masks: list[Any] | None) -> None:
                accs = gemm_tile(fn, tile, rows, k, a, k, 1, fn.at(rb, c0), n, b_masks=masks)
                ep = Epilogue(F32, relu, limit, col_bias=fn.at(bias, c0) if bias is not None else None)
                store_tile(fn, tile, accs, rows, fn.at(yb, c0), n, ep, masks)

            fn.loop(0, full_panels, lambda p, _c: panel(fn.mul(p, nb), None))
            if tail:
                panel(full_panels * nb, [fn.mask(ln, tail, j * ln) for j in range(tile.nv)])

        def unit(u: ir.Value, _c: Any) -> None:
            bi = fn.udiv(u, rtiles)
            t = fn.b.urem(u, fn.c(rtiles))
            if rem == mr:
                rows_tile(bi, fn.mul(t, mr), mr)
            else:
                last = fn.b.icmp_unsigned("==", t, fn.c(rtiles - 1))
                fn.when(
                    last,
                    lambda: rows_tile(bi, (rtiles - 1) * mr, rem),
                    lambda: rows_tile(bi, fn.mul(t, mr), mr),
                )

        fn.loop(u_lo, u_hi, unit)
        fn.ret()

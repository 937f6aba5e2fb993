"""Fast INT8 kernel templates of the CPU target: ``tpu.Conv`` (grouped, strided, dilated, padded),
depthwise ``tpu.Conv`` and ``tpu.MatMul`` with a constant weight, emitted as LLVM IR (llvmlite),
bit-exact with the ops' ``execute`` (``docs/tpu.md``, "Integer arithmetic").

**Arithmetic.** Activations enter as unsigned bytes ``u = q + off`` (``off`` = 128 for int8
storage, 0 for uint8): the unsigned x signed dot product of four byte pairs into an int32 lane is
``vpdpbusd`` (AVX-512 VNNI / AVX-VNNI), or its exact emulation in plain i32 vectors without VNNI.
The contract's accumulator is ``Σ (q - zp) * w = Σ u * w - (zp + off) * Σ w``, wrapped to int32,
plus the bias with wrap; every step here is int32 arithmetic modulo 2**32, so folding
``bias - (zp + off) * Σ_k w[c, k]`` into one per-channel int32 constant (packed with the weights)
gives the same register bit for bit. Padding reads the byte ``zp + off`` (a centred 0), and
channels or K positions added to fill a group of four have weight 0 (the folded constant starts
the accumulators). The epilogue is the requantization of
:func:`lamina.dialects.tpu.quantize.requantize` — in int32 lanes when every total shift is at least
32 (:meth:`Gen._requant32`: the magnitude times the multiplier as exact 32 x 32 -> 64-bit products
of the even and odd lanes), else in i64 lanes (``p = acc * multiplier``, ``(p + 2**(S-1) - (p <
0)) >> S``) —, the output zero point, saturation and the ``do_relu`` / ``relu_limit`` clamps
folded into one pair of bounds.

**Convolution** (NCHW at the boundary). Each part packs the rows of the padded input it needs into
its scratch, split by stride phase — phase ``(a, b)`` holds ``x_pad[i*sh + a, j*sw + b]`` — with
channels in groups of four interleaved per pixel (``[g][ci/4][phase][row][col][4]``). On a phase
image of row width ``Wph`` every kernel tap is one constant offset, so 16 consecutive output
positions ``q = oh * Wph + ow`` (a register of 64 bytes) are one unaligned load: the columns
``ow >= OW`` are computed and never stored (masked stores, one per output row a register spans).
The register tile is ``MR`` output channels x ``NV`` registers of positions (weights broadcast,
4 bytes per channel and tap, packed ``[g][co/MR][ci/4][tap][MR][4]``). Parts split the output rows.

**Fused epilogues** (the compiler's ``fuses`` hook, :class:`LutFusion`): a following ``tpu.Lut``
(table lookups of each requantized register); for the convolutions also a residual ``tpu.Add`` of
the result and a tensor computed earlier (:class:`ResidualAdd`: the conv's requantized bytes, as it
would store them, plus the residual's bytes at the same positions, with the Add's multipliers and
rounding — in int32 lanes where :func:`residual32` admits it, else i64 lanes) and a Lut after that
add (several registers looked up at once: :meth:`Gen.apply_luts`).

**Depthwise.** The same packing without interleave; per channel and tap, one i32 multiply-add of
a register of 16 positions (products of a byte and a weight are exact in i32).

**MatMul** ``[.., M, K] x [K, N]``: lanes along N (the weight's columns, packed
``[N/(NV*L)][K/4][NV][L][4]``, ``L`` int32 lanes per register), four activation bytes broadcast;
each part packs (offsets, pads K to a multiple of 4) the rows it computes; parts split rows, or column tiles when there are fewer
row tiles than parts.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.tpu.quantize import MAX_SHIFT, qparams, round_half_away
from lamina.execution.kernels.geometry import conv_pads
from lamina.ir.constants import constant_array
from lamina.ir.types import IntegerType, NoneType, RankedTensorType

from .abi import Isa, KernelPlan, Template
from .generic_ir import fused_consumers
from .irconst import vector

__all__ = [
    "LutFusion",
    "fused_lut",
    "Int8Conv",
    "Int8ConvChannels",
    "Int8Depthwise",
    "Int8MatMul",
    "TEMPLATES",
    "vnni",
    "lanes",
]

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I16 = ir.IntType(16)
F32 = ir.FloatType()
I8P = I8.as_pointer()


def vnni(isa: Isa) -> bool:
    """Whether ``vpdpbusd`` is usable at the Isa's vector width."""
    if isa.vector_bytes == 64:
        return isa.has("avx512vnni")
    return isa.has("avxvnni") or (isa.has("avx512vnni") and isa.has("avx512vl"))


def lanes(isa: Isa) -> int:
    """int32 lanes per vector register."""
    return max(4, isa.vector_bytes // 4)


# ---- the quantization parameters an INT8 template needs ---------------------------------------


@dataclass
class QuantInfo:
    """What the integer form reads, checked: input offset/zero point, the output's bounds, the
    per-channel multipliers and total shifts, the (signed int8) weight and int32 bias."""

    in_signed: bool
    zp_in: int
    lo: int
    hi: int
    zp_out: int
    mult: np.ndarray  # int64 per output channel
    shift: np.ndarray  # total shift 31 + rshift per output channel
    weight: np.ndarray  # int8 storage
    bias: np.ndarray | None  # int32 per output channel
    out_signed: bool = True


def _quant8(t: Any) -> Any:
    e = getattr(t, "element_type", None)
    if isinstance(e, (UniformQuantizedType, UniformQuantizedPerAxisType)) and e.storage_width == 8:
        return e
    return None


def _static(t: Any) -> bool:
    """A ranked tensor type of static, nonzero dimensions (empty tensors go to the generic path)."""
    return isinstance(t, RankedTensorType) and all(isinstance(d, int) and d > 0 for d in t.shape)


def _quant_info(op: Any, channels: int) -> QuantInfo | None:
    """The checked integer parameters of an INT8 Conv / MatMul with a constant weight, or None when
    the op is not one this module runs bit-exactly."""
    x_t, w_t, out_t = op.operands[0].type, op.operands[1].type, op.results[0].type
    ex, ew, eo = _quant8(x_t), _quant8(w_t), _quant8(out_t)
    if ex is None or ew is None or eo is None or not all(_static(t) for t in (x_t, w_t, out_t)):
        return None
    _, zx, ax, _, _ = qparams(ex)
    _, zw, _, _, _ = qparams(ew)
    _, zo, ao, lo, hi = qparams(eo)
    if np.any(np.asarray(zw) != 0) or not ew.signed:
        return None
    if ax is not None and np.any(np.asarray(zx) != 0):
        return None
    if ao is not None and np.any(np.asarray(zo) != 0):
        return None
    zp_in = 0 if ax is not None else int(zx)
    zp_out = 0 if ao is not None else int(zo)
    p = weight_requant_bias(op, channels, eo, zp_out, lo, hi)
    if p is None:
        return None
    w, m, s, lo_c, hi_c, bias = p
    return QuantInfo(bool(ex.signed), zp_in, lo_c, hi_c, zp_out, m, s, w, bias, bool(eo.signed))


def weight_requant_bias(
    op: Any, channels: int, eo: Any, zp_out: int, lo: Any, hi: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int, int, np.ndarray | None] | None:
    """The parts of an integer Conv / MatMul with a constant weight that every integer template
    checks alike: ``(weight int8, multiplier and total shift 31 + rshift per output channel, the
    result's clamp after a fused ReLU / ReLU6, int32 bias or None)``, or None when the op is not
    one the templates run bit-exactly (a weight outside int8, factors outside the contract's range,
    a ReLU6 limit over per-channel result scales, a bias not of ``channels`` integers)."""
    w = constant_array(op.operands[1])
    if w is None:
        return None
    w = np.asarray(w)
    if w.dtype.kind not in "iu" or w.min(initial=0) < -128 or w.max(initial=0) > 127:
        return None
    m, r = op.attr("multiplier"), op.attr("rshift")
    if m is None or r is None:
        return None
    m = np.asarray(m, np.int64).reshape(-1)
    s = 31 + np.asarray(r, np.int64).reshape(-1)
    if m.size not in (1, channels) or s.size != m.size:
        return None
    if np.any(m < 0) or np.any(m >= 2**31) or np.any(s < 1) or np.any(s > MAX_SHIFT):
        return None
    m = np.broadcast_to(m, (channels,)).copy()
    s = np.broadcast_to(s, (channels,)).copy()
    lo_c, hi_c = int(lo), int(hi)
    if op.attr("do_relu"):
        lo_c = max(lo_c, zp_out)
        limit = op.attr("relu_limit")
        if limit is not None and limit > 0:
            sc = qparams(eo)[0]
            if np.size(sc) != 1:
                return None  # the contract reads one output scale here
            hi_c = min(hi_c, zp_out + int(round_half_away(np.float64(limit / float(np.ravel(sc)[0])))))
            if hi_c < lo_c:
                return None
    bias = None
    bt = op.operands[2].type if len(op.operands) > 2 else NoneType()
    if not isinstance(bt, NoneType):
        b = constant_array(op.operands[2])
        if b is None or not isinstance(getattr(bt, "element_type", None), IntegerType):
            return None
        b = np.asarray(b)
        if (
            b.size != channels
            or b.dtype.kind not in "iu"
            or (_is(op, "tpu.MatMul") and b.ndim > 0 and b.shape[-1] != channels)
        ):
            return None
        bias = b.reshape(-1).astype(np.int64).astype(np.int32)
    return w.astype(np.int8), m, s, lo_c, hi_c, bias


def fast_shift(q: QuantInfo) -> bool:
    """Whether every channel's total shift is at least 32 (:meth:`Gen._requant32` applies)."""
    return bool(np.all(q.shift >= 32))


def _scalars(q: QuantInfo) -> tuple[bool, int, int, int, int, bool, bool]:
    """What the emitted code reads of the quantization (the rest lives in the packed tables)."""
    return (q.in_signed, q.zp_in, q.lo, q.hi, q.zp_out, q.out_signed, fast_shift(q))


def _fold(q: QuantInfo, wsum: np.ndarray) -> np.ndarray:
    """``bias - (zp_in + off) * Σ w`` per channel, in wrapping int32 arithmetic."""
    zpu = q.zp_in + (128 if q.in_signed else 0)
    b = np.zeros(wsum.shape, np.int64) if q.bias is None else q.bias.astype(np.int64)
    return ((b - zpu * wsum.astype(np.int64)) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)


def _tables(q: QuantInfo, wsum: np.ndarray, pad_to: int) -> dict[str, np.ndarray]:
    """The per-channel epilogue tables (int32): folded constant, multiplier, total shift."""
    n = wsum.size
    c = np.zeros(pad_to, np.int32)
    m = np.zeros(pad_to, np.int32)
    s = np.full(pad_to, 31, np.int32)
    c[:n] = _fold(q, wsum)
    m[:n] = q.mult
    s[:n] = q.shift
    return {"c": c, "m": m, "s": s}


# ---- IR generation helpers ------------------------------------------------------------------------


def vt(elem: ir.Type, n: int) -> ir.VectorType:
    return ir.VectorType(elem, n)


#: every template's buffers, in call order: the input, the packed weights, the folded per-channel
#: constant, the requant multipliers and shifts, the output, the per-part scratch (a fused table
#: ``("weight", "lut")`` goes before the output: :func:`_with_lut`)
BUFFERS: tuple[tuple[str, Any], ...] = (
    ("in", 0),
    ("weight", "w"),
    ("weight", "c"),
    ("weight", "m"),
    ("weight", "s"),
    ("out", 0),
    ("scratch", None),
)


class Gen:
    """One kernel function under construction: ``void @symbol(i8** bufs, i64 part, i64 nparts)``
    with the buffer pointers loaded, plus loops, vectors and the INT8 primitives."""

    def __init__(self, module: ir.Module, symbol: str, nbufs: int, isa: Isa):
        self.module = module
        self.isa = isa
        self.nl = lanes(isa)
        fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I8P.as_pointer(), I64, I64]), symbol)
        self.fn = fn
        self.b = ir.IRBuilder(fn.append_basic_block("entry"))
        bufs, self.part, self.nparts = fn.args
        self.bufs = [self.b.load(self.b.gep(bufs, [self.c(i)])) for i in range(nbufs)]
        self._iota: dict[tuple[int, int], ir.Constant] = {}
        #: a fused ``tpu.Lut``: (its table, whether the kernel's own result is signed)
        self.lut: tuple[Any, bool] | None = None
        #: a fused residual ``tpu.Add``: (the residual's pointer, its tables' pointer, the add)
        self.res: tuple[Any, Any, ResidualAdd] | None = None
        #: every channel's total shift is at least 32: :meth:`requant` in int32 lanes
        #: (:meth:`_requant32`); set by the templates (:func:`fast_shift`)
        self.fast_shift = False
        #: the fused residual add's int32 form (:func:`residual32`), set by the conv templates
        self.res32: tuple[int, ...] | None = None
        #: the float fast forms of the requant and the fused add (:func:`fast_requant`,
        #: :func:`fast_residual`), set by the conv templates where the ISA has them
        self.fast1: FastForm | None = None
        self.fast2: Any = None

    def std_bufs(self, plan: KernelPlan, out_signed: bool, op: Any = None) -> list[Any]:
        """The pointers of ``in 0, w, c, m, s, out 0, scratch`` (the templates' buffers) in that
        order, the fused table (``weight lut``) noted for :meth:`requant` and the fused residual
        add (its tensor and ``weight ra``) for :meth:`add_residual`."""
        if ("weight", "ra") in plan.buffers and op is not None:
            ra = residual_add(op)
            assert ra is not None
            i = next(
                j
                for j, (k, v) in enumerate(plan.buffers)
                if k == "in" and not (isinstance(v, int) and v == 0)
            )
            self.res = (self.bufs[i], self.bufs[plan.buffers.index(("weight", "ra"))], ra)
            out_signed = ra.out_signed
        if ("weight", "lut") in plan.buffers:
            self.lut = (self.bufs[plan.buffers.index(("weight", "lut"))], out_signed)
        return [self.bufs[plan.buffers.index(k)] for k in BUFFERS]

    def apply_luts(self, ys: list[Any]) -> list[Any]:
        """:meth:`apply_lut` of each byte vector of ``ys``, several at a time where the table lookup
        takes 64 lanes (``vpermi2b``): their concatenation looked up once, then split."""
        if self.lut is None:
            return ys
        n = ys[0].type.count
        if not (self.isa.has("avx512vbmi") and self.isa.vector_bytes == 64 and n <= 32 and 64 % n == 0):
            return [self.apply_lut(y) for y in ys]
        per = 64 // n
        out = []
        for i in range(0, len(ys), per):
            grp = ys[i : i + per]
            cat = self.apply_lut(_concat(self, grp) if len(grp) > 1 else grp[0])
            out += [self.b.shuffle_vector(cat, cat, self.iota(n) if j == 0 else self.cv(range(j * n, (j + 1) * n)))
                    for j in range(len(grp))]  # fmt: skip
        return out

    def apply_lut(self, y: Any) -> Any:
        """``table[y + base]`` per lane (``base`` 128 for a signed result, else 0): two
        ``vpermi2b`` lookups of 128 entries and a select where AVX-512 VBMI is available (16 lanes
        and more), else one load per lane."""
        assert self.lut is not None
        tab, signed = self.lut
        b = self.b
        n = y.type.count
        idx = b.xor(y, self.cv([128] * n, I8)) if signed else y
        if self.isa.has("avx512vbmi") and self.isa.vector_bytes == 64 and 16 <= n <= 64:
            wide = b.shuffle_vector(idx, idx, self.cv([i % n for i in range(64)]))
            f = self.intrinsic("llvm.x86.avx512.vpermi2var.qi.512", vt(I8, 64), [vt(I8, 64)] * 3)
            t = [self.load(tab, 64 * k, vt(I8, 64)) for k in range(4)]
            lo = b.call(f, [t[0], wide, t[1]])
            hi = b.call(f, [t[2], wide, t[3]])
            r = b.select(b.icmp_signed("<", wide, self.cv([0] * 64, I8)), hi, lo)
            return b.shuffle_vector(r, r, self.iota(n))
        out = y
        for lane in range(n):
            e = b.extract_element(idx, self.c(lane, I32))
            v = b.load(b.gep(tab, [b.zext(e, I64)]))
            out = b.insert_element(out, v, self.c(lane, I32))
        return out

    # constants / casts
    @staticmethod
    def c(v: int, ty: ir.Type = I64) -> ir.Constant:
        return ir.Constant(ty, v)

    @staticmethod
    def cv(vals: Sequence[int], ty: ir.Type = I32) -> ir.Constant:
        return vector(ty, [int(v) for v in vals])

    def i64(self, v: Any) -> Any:
        return self.c(v) if isinstance(v, int) else v

    def splat(self, v: Any, n: int) -> Any:
        b = self.b
        ty = v.type
        one = b.insert_element(ir.Constant(vt(ty, 1), None), v, self.c(0, I32))
        return b.shuffle_vector(one, one, ir.Constant(vt(I32, n), [0] * n))

    def ptr(self, base: Any, off: Any, ty: ir.Type) -> Any:
        """``(ty*)(base + off bytes)``."""
        p = self.b.gep(base, [self.i64(off)]) if not (isinstance(off, int) and off == 0) else base
        return self.b.bitcast(p, ty.as_pointer())

    def load(self, base: Any, off: Any, ty: ir.Type, align: int = 1) -> Any:
        return self.b.load(self.ptr(base, off, ty), align=align)

    def store(self, v: Any, base: Any, off: Any, align: int = 1) -> None:
        self.b.store(v, self.ptr(base, off, v.type), align=align)

    def intrinsic(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        g = self.module.globals.get(name)
        if g is None:
            g = ir.Function(self.module, ir.FunctionType(ret, list(args)), name)
        return g

    def masked_store(self, v: Any, base: Any, off: Any, mask: Any) -> None:
        """Store the lanes of ``v`` where ``mask`` is set (no access to the others)."""
        n = v.type.count
        f = self.intrinsic(
            f"llvm.masked.store.v{n}i{v.type.element.width}.p0",
            ir.VoidType(),
            [v.type, v.type.as_pointer(), I32, vt(I1, n)],
        )
        self.b.call(f, [v, self.ptr(base, off, v.type), self.c(1, I32), mask])

    def smax(self, a: Any, b: Any) -> Any:
        return self.b.select(self.b.icmp_signed(">", a, b), a, b)

    def smin(self, a: Any, b: Any) -> Any:
        return self.b.select(self.b.icmp_signed("<", a, b), a, b)

    def iota(self, n: int, ty: ir.Type = I32) -> ir.Constant:
        return self.cv(list(range(n)), ty)

    # control flow
    def loop(
        self,
        start: Any,
        stop: Any,
        body: Callable[[Any, list[Any]], Sequence[Any] | None],
        carry: Sequence[Any] = (),
        step: int = 1,
    ) -> list[Any]:
        """``for i in range(start, stop, step)`` with loop-carried values ``carry`` (``body(i,
        values)`` returns the next values); returns the values after the loop."""
        b = self.b
        start, stop = self.i64(start), self.i64(stop)
        pre = b.block
        hdr = b.append_basic_block("h")
        bod = b.append_basic_block("b")
        ext = b.append_basic_block("e")
        b.branch(hdr)
        b.position_at_end(hdr)
        iv = b.phi(I64)
        iv.add_incoming(start, pre)
        phis = []
        for v in carry:
            p = b.phi(v.type)
            p.add_incoming(v, pre)
            phis.append(p)
        b.cbranch(b.icmp_signed("<", iv, stop), bod, ext)
        b.position_at_end(bod)
        new = list(body(iv, list(phis)) or [])
        end = b.block
        iv.add_incoming(b.add(iv, self.c(step)), end)
        for p, v in zip(phis, new):
            p.add_incoming(v, end)
        b.branch(hdr)
        b.position_at_end(ext)
        return list(phis)

    def when(self, cond: Any, body: Callable[[], None]) -> None:
        with self.b.if_then(cond):
            body()

    # INT8 primitives
    def dot(self, acc: Any, u: Any, s: Any) -> Any:
        """``acc[j] + Σ_t u[4j+t] * s[4j+t]`` (u unsigned bytes, s signed bytes; wrapping int32)."""
        n = acc.type.count
        b = self.b
        if vnni(self.isa) and n * 4 in (16, 32, 64):
            bits = n * 32
            f = self.intrinsic(
                f"llvm.x86.avx512.vpdpbusd.{bits}", vt(I32, n), [vt(I32, n), vt(I8, 4 * n), vt(I8, 4 * n)]
            )
            return b.call(f, [acc, u, s])
        uz = b.zext(u, vt(I32, 4 * n))
        sz = b.sext(s, vt(I32, 4 * n))
        p = b.mul(uz, sz)
        r = acc
        for t in range(4):
            r = b.add(r, b.shuffle_vector(p, p, self.cv([4 * j + t for j in range(n)])))
        return r

    def rdiv(self, p: Any, shift: Any) -> Any:
        """``(p + 2**(S-1) - (p < 0)) >> S`` of i64 lanes (round half away from zero), ``shift``
        ``<n x i32>`` or ``<n x i64>``."""
        b = self.b
        n = p.type.count
        s64 = b.zext(shift, vt(I64, n)) if shift.type.element.width == 32 else shift
        ones = self.cv([1] * n, I64)
        half = b.shl(ones, b.sub(s64, ones))
        neg = b.ashr(p, self.cv([63] * n, I64))
        return b.ashr(b.add(b.add(p, half), neg), s64)

    def requant(
        self, acc: Any, cf: Any, mult: Any, shift: Any, q: QuantInfo, lut: bool = True, raw: bool = False
    ) -> Any:
        """The epilogue of ``n`` int32 lanes: ``sat(zp + rdiv((acc + cf) * m, 2**S))`` clamped to
        the relu bounds, as ``<n x i8>``. ``cf``/``mult``/``shift`` are ``<n x i32>``. Then the
        fused table's lookup (unless ``lut`` is false, or a residual add comes first:
        :meth:`add_residual` applies it). With ``raw`` (for :meth:`add_residual`), the int32 form
        returns its clamped value before the zero point, as int32 lanes."""
        b = self.b
        n = acc.type.count
        a = acc if cf is None else b.add(acc, cf)
        if self.fast_shift and n % 2 == 0:
            y = self._requant32(a, mult, shift, q, raw)
            if raw:
                return y
            return self.apply_lut(y) if lut and self.lut is not None and self.res is None else y
        p = b.mul(b.sext(a, vt(I64, n)), b.sext(mult, vt(I64, n)))
        y = self.rdiv(p, shift)
        y = b.trunc(
            self.smin(self.smax(y, self.cv([q.lo - q.zp_out] * n, I64)), self.cv([q.hi - q.zp_out] * n, I64)),
            vt(I32, n),
        )
        y = b.add(y, self.cv([q.zp_out] * n, I32))
        y = b.trunc(y, vt(I8, n))
        return self.apply_lut(y) if lut and self.lut is not None and self.res is None else y

    def mulshift(self, a: Any, mult: Any, shift: Any) -> Any:
        """``(a * m + 2**(S-1)) >> S`` of ``<n x i32>`` lanes ``a`` read as unsigned (``<= 2**31``),
        ``0 <= m < 2**31``, ``32 <= S <= 62`` (``<n x i32>`` each): the even and odd lanes' exact
        32 x 32 -> 64-bit unsigned products (``vpmuludq``), the quotients (``< 2**30``) back in
        the int32 lanes — the odd ones shifted by ``S - 32`` so that their high halves are the
        quotient (one blend, no shift back)."""
        b = self.b
        n = a.type.count
        h = n // 2
        w = vt(I64, h)
        lo = self.cv([0xFFFFFFFF] * h, I64)
        c32 = self.cv([32] * h, I64)
        one = self.cv([1] * h, I64)
        a64, m64, s64 = (b.bitcast(v, w) for v in (a, mult, shift))
        s_e = b.and_(s64, lo)
        s_o = b.sub(b.lshr(s64, c32), c32)
        half_e = b.shl(one, b.sub(s_e, one))
        half_o = b.shl(one, b.add(s_o, self.cv([31] * h, I64)))
        pe = b.mul(b.and_(a64, lo), b.and_(m64, lo))
        po = b.mul(b.lshr(a64, c32), b.lshr(m64, c32))
        e = b.bitcast(b.lshr(b.add(pe, half_e), s_e), vt(I32, n))
        o = b.bitcast(b.lshr(b.add(po, half_o), s_o), vt(I32, n))
        return b.shuffle_vector(e, o, self.cv([i if i % 2 == 0 else n + i for i in range(n)]))

    def _requant32(self, a: Any, mult: Any, shift: Any, q: QuantInfo, raw: bool = False) -> Any:
        """:meth:`requant` (after the folded constant) for total shifts ``S >= 32`` in int32 lanes:
        the contract's ``(a*m + 2**(S-1) - (a*m < 0)) >> S`` (half away from zero) is
        ``sign(a) * ((|a| * m + 2**(S-1)) >> S)`` (:meth:`mulshift` of the magnitude). With a lower
        bound at or above the zero point (a ReLU), negative sums give the bound: ``a`` is clamped
        at 0 first and no sign is kept. The clamps and the zero point in int32 (``|y| < 2**30``)."""
        b = self.b
        n = a.type.count
        zero = self.cv([0] * n)
        lo, hi = q.lo - q.zp_out, q.hi - q.zp_out
        if lo >= 0:
            y = self.mulshift(self.smax(a, zero), mult, shift)
            if lo > 0:
                y = self.smax(y, self.cv([lo] * n))
        else:
            neg = b.icmp_signed("<", a, zero)
            r = self.mulshift(b.select(neg, b.sub(zero, a), a), mult, shift)
            y = self.smax(b.select(neg, b.sub(zero, r), r), self.cv([lo] * n))
        if raw:
            return self.smin(y, self.cv([hi] * n))
        # y >= lo here: the stored value clamp(y + zp, q.lo, q.hi), saturating where it can be
        if q.zp_out:
            y = b.add(y, self.cv([q.zp_out] * n))
        return self.sat8(y, q.lo, q.hi, above_lo=True)

    def add_residual(
        self,
        y: Any,
        r: Any,
        m_conv: Any,
        m_res: Any,
        shift: Any,
        q: QuantInfo,
        consts: Any = None,
        lut: bool = True,
    ) -> Any:
        """The fused ``tpu.Add`` of the conv's stored result ``y`` and the residual's ``r`` (both
        ``<n x i8>``): ``sat(zp + rdiv((y - zp_y) * m_y + (r - zp_r) * m_r, 2**S))`` in i64 lanes
        (the contract, ``docs/tpu.md``), then the fused table. ``m_*``/``shift``: ``<n x i32>``."""
        assert self.res is not None
        ra = self.res[2]
        b = self.b
        n = y.type.count
        if self.res32 is not None:
            return self._add_residual32(y, r, q, consts, lut)
        w = vt(I64, n)
        if y.type.element.width == 32:  # requant's raw form: the value before the zero point
            yc = b.add(b.sext(y, w), self.cv([q.zp_out - ra.zp_conv] * n, I64))
        else:
            yc = b.sub(b.sext(y, w) if q.out_signed else b.zext(y, w), self.cv([ra.zp_conv] * n, I64))
        rc = b.sub(b.sext(r, w) if ra.res_signed else b.zext(r, w), self.cv([ra.zp_res] * n, I64))
        acc = b.add(b.mul(yc, b.zext(m_conv, w)), b.mul(rc, b.zext(m_res, w)))
        z = self.rdiv(acc, shift)
        z = self.smin(
            self.smax(z, self.cv([ra.lo - ra.zp_out] * n, I64)), self.cv([ra.hi - ra.zp_out] * n, I64)
        )
        z = b.trunc(b.add(z, self.cv([ra.zp_out] * n, I64)), vt(I8, n))
        return self.apply_lut(z) if lut and self.lut is not None else z

    def pmadd(self, pairs: Any, factors: Any, acc: Any) -> Any:
        """``acc + lo16(p) * lo16(f) + hi16(p) * hi16(f)`` per int32 lane (signed 16-bit halves;
        exact for the products :func:`residual32` admits): ``vpdpwssd`` with VNNI, ``vpmaddwd`` and
        an add on x86, two int32 products elsewhere."""
        b = self.b
        n = pairs.type.count
        w16 = vt(ir.IntType(16), 2 * n)
        if vnni(self.isa) and n in (4, 8, 16):
            f = self.intrinsic(f"llvm.x86.avx512.vpdpwssd.{32 * n}", vt(I32, n), [vt(I32, n), w16, w16])
            return b.call(f, [acc, b.bitcast(pairs, w16), b.bitcast(factors, w16)])
        return b.add(self._pmadd(pairs, factors), acc)

    def _pmadd(self, pairs: Any, factors: Any) -> Any:
        b = self.b
        n = pairs.type.count
        name = {16: ("avx512bw", "llvm.x86.avx512.pmaddw.d.512"), 8: ("avx2", "llvm.x86.avx2.pmadd.wd"),
                4: ("sse2", "llvm.x86.sse2.pmadd.wd")}.get(n)  # fmt: skip
        if name is not None and self.isa.has(name[0]) and self.isa.vector_bytes >= 4 * n:
            f = self.intrinsic(name[1], vt(I32, n), [vt(ir.IntType(16), 2 * n)] * 2)
            w16 = vt(ir.IntType(16), 2 * n)
            return b.call(f, [b.bitcast(pairs, w16), b.bitcast(factors, w16)])
        c16 = self.cv([16] * n)

        def lo(v: Any) -> Any:
            return b.ashr(b.shl(v, c16), c16)

        return b.add(b.mul(lo(pairs), lo(factors)), b.mul(b.ashr(pairs, c16), b.ashr(factors, c16)))

    def res32_consts(self, n: int) -> tuple[Any, ...]:
        """The int32 form's six constants (:func:`residual32`) splat over ``n`` lanes, loaded from
        the add's table (load them before the epilogue's stores: they are then loaded once)."""
        assert self.res is not None
        b = self.b
        tab = b.bitcast(self.res[1], I32.as_pointer())
        return tuple(self.splat(b.load(b.gep(tab, [self.c(i)])), n) for i in range(6))

    def _add_residual32(
        self, y: Any, r: Any, q: QuantInfo, consts: tuple[Any, ...] | None = None, lut: bool = True
    ) -> Any:
        """:meth:`add_residual` in int32 lanes (:func:`residual32`: the split multipliers as
        16-bit pairs of the two bytes, one ``vpmaddwd`` per half, the rounding from the two sums)."""
        assert self.res is not None and self.res32 is not None
        ra = self.res[2]
        b = self.b
        n = y.type.count
        w = vt(I32, n)
        kh, kl, mh, ml, bq, sh = consts if consts is not None else self.res32_consts(n)
        if y.type.element.width == 32:  # requant's raw form: the stored byte is y + zp
            yv = b.add(y, self.cv([q.zp_out] * n)) if q.zp_out else y
        else:
            yv = b.sext(y, w) if q.out_signed else b.zext(y, w)
        rv = b.sext(r, w) if ra.res_signed else b.zext(r, w)
        c16 = self.cv([16] * n)
        pairs = b.or_(b.and_(yv, self.cv([0xFFFF] * n)), b.shl(rv, c16))
        t_hi = self.pmadd(pairs, mh, kh)
        t_lo = self.pmadd(pairs, ml, kl)
        qq = b.add(t_hi, b.ashr(t_lo, c16))
        tie = b.and_(
            b.icmp_signed("<", qq, bq),
            b.icmp_unsigned("==", b.and_(t_lo, self.cv([0xFFFF] * n)), self.cv([0] * n)),
        )
        z = b.ashr(b.select(tie, b.sub(qq, self.cv([1] * n)), qq), sh)
        z = self.smin(self.smax(z, self.cv([ra.lo] * n)), self.cv([ra.hi] * n))
        z = b.trunc(z, vt(I8, n))
        return self.apply_lut(z) if lut and self.lut is not None else z

    # the float fast forms (fast_requant / fast_residual): exact lanes, uncertain ones flagged
    def cvt_rne(self, v: Any) -> Any:
        """``<n x float>`` to ``<n x i32>`` rounded to nearest even (AVX-512: ``{rn-sae}``; AVX2:
        ``vroundps`` with the mode in its immediate, then the truncating conversion of that integral
        value — neither reads MXCSR, which a host program may have changed); out of range:
        ``-2**31``."""
        n = v.type.count
        if n == 16:
            f = self.intrinsic(
                "llvm.x86.avx512.mask.cvtps2dq.512", vt(I32, 16), [vt(F32, 16), vt(I32, 16), I16, I32]
            )
            return self.b.call(f, [v, self.cv([0] * 16), ir.Constant(I16, -1), self.c(8, I32)])
        rnd = self.intrinsic("llvm.x86.avx.round.ps.256", vt(F32, 8), [vt(F32, 8), I32])
        f = self.intrinsic("llvm.x86.avx.cvtt.ps2dq.256", vt(I32, 8), [vt(F32, 8)])
        return self.b.call(f, [self.b.call(rnd, [v, self.c(8, I32)])])  # 8: nearest, no exception

    def fma(self, a: Any, x: Any, c: Any) -> Any:
        n = a.type.count
        f = self.intrinsic(f"llvm.fma.v{n}f32", vt(F32, n), [vt(F32, n)] * 3)
        return self.b.call(f, [a, x, c])

    def fast_round(self, v: Any, shift: Any, mask: Any) -> tuple[Any, Any]:
        """``(U >> F, uncertain)`` of ``U = rne(v)`` (``v`` carries ``H``; ``shift`` / ``mask``:
        ``<n x i32>`` of ``F`` and :attr:`FastForm.mask`): the lemma of :func:`fast_requant` — where
        ``U mod 2**F >= P`` (the fraction bits ``P .. 2**F - 1`` not all 0: one ``vptestnmd``)
        ``U >> F`` is the value rounded as the contract rounds it; the other lanes (within ``P/2``
        of a tie, or out of range) are flagged."""
        b = self.b
        n = v.type.count
        z, t = self._fast_round(v, shift, mask)
        return z, b.icmp_unsigned("==", t, self.cv([0] * n))

    def _fast_round(self, v: Any, shift: Any, mask: Any) -> tuple[Any, Any]:
        """:meth:`fast_round` with the test's value: ``(U >> F, U & mask)`` (uncertain where 0)."""
        u = self.cvt_rne(v)
        return self.b.ashr(u, shift), self.b.and_(u, mask)

    def fast_requant(self, acc: Any, mult: Any, shift: Any, q: QuantInfo, form: FastForm) -> tuple[Any, Any]:
        """:func:`fast_requant`'s form of :meth:`requant` (after the folded constant): ``(y,
        uncertain)``, ``y`` the stored value clamped, as float lanes (:meth:`fast_residual` reads
        them so). The lemma's ``U`` is kept in float, scaled by ``2**-F`` (exact): ``v = fl(fl(acc)
        * f'' + K'')``, ``f'' = fl(m) * 2**-S``, ``K'' = zp + H / 2**F``; ``floor(v)`` is certain
        where ``v - floor(v) >= P / 2**F`` (``U mod 2**F >= P``; the fraction of a float is
        exact, and 0 from ``|v| >= 2**23`` on: uncertain)."""
        y, frac = self._fast_requant(acc, mult, shift, q, form)
        n = acc.type.count
        return y, self.b.fcmp_ordered("<", frac, ir.Constant(vt(F32, n), [form.p / 2**form.f] * n))

    def _fast_requant(
        self, acc: Any, mult: Any, shift: Any, q: QuantInfo, form: FastForm, fm: Any = None
    ) -> tuple[Any, Any]:
        """:meth:`fast_requant` with the test's value: ``(y, v - floor(v))`` (uncertain below
        ``P / 2**F``); ``fm``: ``fl(m) * 2**-S`` as float lanes, else computed here."""
        b = self.b
        n = acc.type.count
        f32 = vt(F32, n)
        if fm is None:
            p2 = b.bitcast(b.shl(b.sub(self.cv([127] * n), shift), self.cv([23] * n)), f32)
            fm = b.fmul(b.sitofp(mult, f32), p2)
        k = ir.Constant(f32, [float(q.zp_out + form.h / 2**form.f)] * n)
        v = self.fma(b.sitofp(acc, f32), fm, k)
        fl = b.call(self.intrinsic(f"llvm.floor.v{n}f32", f32, [f32]), [v])
        lo, hi = ir.Constant(f32, [float(q.lo)] * n), ir.Constant(f32, [float(q.hi)] * n)
        y = b.select(b.fcmp_ordered("<", fl, lo), lo, fl)
        y = b.select(b.fcmp_ordered(">", y, hi), hi, y)
        return y, b.fsub(v, fl)

    def residual_consts(self, rtab: Any, co: Any, cout: int, n: int) -> tuple[Any, ...]:
        """The fused residual add's constants for output channel ``co`` (i64) on ``n`` lanes,
        ``(c32, fast, am, rm, ash)``: the int32 form's (:meth:`res32_consts`, and its float fast
        form's, :meth:`res_fast_consts`), or the i64 form's three per-channel table entries
        ``rtab[j * cout + co]``; None where a form does not apply."""
        c32 = fc = am = rm = ash = None
        if self.res32 is not None:
            c32 = self.res32_consts(n)
            if self.fast2 is not None:
                fc = self.res_fast_consts(n)
        else:
            b = self.b
            am, rm, ash = (
                self.splat(b.load(b.gep(rtab, [co if j == 0 else b.add(co, self.c(j * cout))])), n)
                for j in range(3)
            )
        return c32, fc, am, rm, ash

    def res_fast_consts(self, n: int) -> tuple[Any, ...]:
        """:func:`fast_residual`'s ``g1, g2, C`` (float) and ``F``, mask (int32) splat over ``n``
        lanes, from entries 8..12 of the add's table (load them before the stores)."""
        assert self.res is not None
        b = self.b
        tab = b.bitcast(self.res[1], I32.as_pointer())
        vals = [self.splat(b.load(b.gep(tab, [self.c(8 + i)])), n) for i in range(5)]
        return (*(b.bitcast(v, vt(F32, n)) for v in vals[:3]), vals[3], vals[4])

    def fast_residual(self, y: Any, r: Any, q: QuantInfo, consts: tuple[Any, ...]) -> tuple[Any, Any]:
        """:func:`fast_residual`'s form of :meth:`add_residual`: ``y`` the conv's stored value (int32
        lanes, in ``[q.lo, q.hi]``), ``r`` the residual's bytes; ``(bytes, uncertain)``."""
        z, t = self._fast_residual(y, r, q, consts)
        return z, self.b.icmp_unsigned("==", t, self.cv([0] * y.type.count))

    def _fast_residual(self, y: Any, r: Any, q: QuantInfo, consts: tuple[Any, ...]) -> tuple[Any, Any]:
        """:meth:`fast_residual` with the test's value (:meth:`_fast_round`: uncertain where 0)."""
        assert self.res is not None
        ra = self.res[2]
        b = self.b
        n = y.type.count
        f32 = vt(F32, n)
        g1, g2, c, sh, mask = consts
        rv = b.sext(r, vt(I32, n)) if ra.res_signed else b.zext(r, vt(I32, n))
        yf = y if isinstance(y.type.element, ir.FloatType) else b.sitofp(y, f32)
        v = self.fma(yf, g1, self.fma(b.sitofp(rv, f32), g2, c))
        z, t = self._fast_round(v, sh, mask)
        return self.sat8(z, ra.lo, ra.hi), t

    def sat8(self, y: Any, lo: int, hi: int, above_lo: bool = False) -> Any:
        """``clamp(y, lo, hi)`` of int32 lanes as bytes (``-128 <= lo <= hi <= 255``; ``above_lo``:
        ``y >= lo`` already). Where the upper bound is the byte's (127 signed, 255 unsigned) and the
        lanes are 16 (AVX-512), the clamp at it is the saturating truncation (``vpmovsdb`` /
        ``vpmovusdb``, unsigned once ``y >= 0``): one or two operations fewer."""
        b = self.b
        n = y.type.count
        sat = None
        if n == 16 and self.isa.vector_bytes == 64 and self.isa.has("avx512f"):
            if hi == 127 and lo >= -128:
                sat = "llvm.x86.avx512.mask.pmovs.db.512"
            elif hi == 255 and lo >= 0:
                sat = "llvm.x86.avx512.mask.pmovus.db.512"
        if sat is None:
            if not above_lo:
                y = self.smax(y, self.cv([lo] * n))
            return b.trunc(self.smin(y, self.cv([hi] * n)), vt(I8, n))
        if not above_lo and not (hi == 127 and lo == -128):
            y = self.smax(y, self.cv([lo] * n))
        f = self.intrinsic(sat, vt(I8, 16), [vt(I32, 16), vt(I8, 16), I16])
        return b.call(f, [y, self.cv([0] * 16, I8), ir.Constant(I16, -1)])

    def fast_requant_residual(
        self,
        accs: list[Any],
        rs: list[Any],
        mult: Any,
        shift: Any,
        q: QuantInfo,
        consts: tuple[Any, ...],
        exact: Callable[[], list[Any]],
        fm: Any = None,
    ) -> list[Any]:
        """The fused residual's float fast form (:meth:`fast_requant` then :meth:`fast_residual`) of
        the accumulators ``accs`` with the residual bytes ``rs`` (one each), or ``exact()`` where
        any lane of any of them is uncertain (:meth:`unless_uncertain`). The lanes a tile does not
        store are dot products of packed bytes too, as rarely uncertain: not masked off. ``fm``:
        the requant's float factor ``fl(m) * 2**-S`` loaded from a table (:func:`fast_factors`),
        else computed from ``mult`` and ``shift``."""
        assert len(accs) == len(rs) and self.fast1 is not None
        b = self.b
        n = accs[0].type.count
        form = self.fast1
        # the two tests' values, their lane-wise minima over the registers (unsigned for the
        # second), tested once: two operations a register instead of two compares and two ors
        fz, frac, t = [], None, None
        for acc, r in zip(accs, rs):
            y, f1 = self._fast_requant(acc, mult, shift, q, form, fm)
            z, t2 = self._fast_residual(y, r, q, consts)
            frac = f1 if frac is None else self.fmin(frac, f1)
            t = t2 if t is None else b.select(b.icmp_unsigned("<", t2, t), t2, t)
            fz.append(z)
        unc = b.or_(
            b.fcmp_ordered("<", frac, ir.Constant(vt(F32, n), [form.p / 2**form.f] * n)),
            b.icmp_unsigned("==", t, self.cv([0] * n)),
        )
        return self.unless_uncertain(unc, fz, exact)

    def fmin(self, a: Any, x: Any) -> Any:
        """Lane-wise minimum of two float vectors without NaNs."""
        return self.b.select(self.b.fcmp_ordered("<", a, x), a, x)

    def unless_uncertain(self, unc: Any, fast: list[Any], exact: Callable[[], list[Any]]) -> list[Any]:
        """``fast``, or where any lane of ``unc`` is set ``exact()`` (emitted in a branch that is
        rarely taken)."""
        b = self.b
        n = unc.type.count
        any_ = b.icmp_unsigned("!=", b.bitcast(unc, ir.IntType(n)), ir.Constant(ir.IntType(n), 0))
        pre = b.block
        with b.if_then(any_, likely=False):
            ex = exact()
            ex_blk = b.block
        out = []
        for f, e in zip(fast, ex):
            ph = b.phi(f.type)
            ph.add_incoming(f, pre)
            ph.add_incoming(e, ex_blk)
            out.append(ph)
        return out

    def stack_array(self, vals: list[Any]) -> Any:
        """``vals`` (one type) stored to a stack array allocated in the entry block, for a loop that
        reads them back by a runtime index (:meth:`slot`): an epilogue emitted once and looped over
        a tile's accumulators instead of unrolled (LLVM optimizes one copy)."""
        b = self.b
        here = b.block
        b.position_at_start(self.fn.entry_basic_block)
        slots = b.alloca(ir.ArrayType(vals[0].type, len(vals)))
        b.position_at_end(here)
        for j, a in enumerate(vals):
            b.store(a, b.gep(slots, [self.c(0, I32), self.c(j, I32)]))
        return slots

    def slot(self, slots: Any, i: Any) -> Any:
        """Element ``i`` (an i64 value) of a :meth:`stack_array`."""
        return self.b.load(self.b.gep(slots, [self.c(0, I32), i]))

    def masked_load(self, base: Any, off: Any, mask: Any, passthru: Any) -> Any:
        """The lanes of ``<n x i8>`` at ``base + off`` where ``mask`` is set, ``passthru``'s elsewhere
        (no access to the others)."""
        n = passthru.type.count
        f = self.intrinsic(
            f"llvm.masked.load.v{n}i8.p0",
            passthru.type,
            [passthru.type.as_pointer(), I32, vt(I1, n), passthru.type],
        )
        return self.b.call(f, [self.ptr(base, off, passthru.type), self.c(1, I32), mask, passthru])

    def bcast32(self, base: Any, off: Any, n: int) -> Any:
        """4 bytes at ``base + off`` repeated over ``n`` int32 lanes, as ``<4n x i8>``."""
        return self.b.bitcast(self.splat(self.load(base, off, I32, align=4), n), vt(I8, 4 * n))

    def part_range(self, total: Any) -> tuple[Any, Any]:
        """``[total * part / nparts, total * (part + 1) / nparts)``."""
        b = self.b
        total = self.i64(total)
        lo = b.sdiv(b.mul(total, self.part), self.nparts)
        hi = b.sdiv(b.mul(total, b.add(self.part, self.c(1))), self.nparts)
        return lo, hi

    def matmul_split(self, mrows: int, mr: int, nt: int) -> tuple[Any, Any, Any, Any]:
        """A MatMul's share of this part: rows ``[m_lo, m_hi)``, column tiles ``[nt_lo, nt_hi)`` — whole tiles of
        ``mr`` rows split between the parts when there are at least as many as parts (every part
        taking all ``nt`` column tiles), else the column tiles (every part taking all rows);
        ``m_hi`` clipped to ``mrows``."""
        b, c = self.b, self.c
        mtiles = -(-mrows // mr)
        by_rows = b.icmp_signed(">=", c(mtiles), self.nparts)
        t_lo, t_hi = self.part_range(mtiles)
        n_lo, n_hi = self.part_range(nt)
        m_lo = b.select(by_rows, b.mul(t_lo, c(mr)), c(0))
        m_hi = b.select(by_rows, b.mul(t_hi, c(mr)), c(mtiles * mr))
        m_hi = b.select(b.icmp_signed(">", m_hi, c(mrows)), c(mrows), m_hi)
        return m_lo, m_hi, b.select(by_rows, c(0), n_lo), b.select(by_rows, c(nt), n_hi)

    def conv_split(
        self, geo: ConvGeom, qtl: int, cot: int, tile_dots: int, row_pos: int = 0
    ) -> tuple[Any, Any, Any, Any]:
        """A convolution's share of this part: output rows ``[r0, r1)`` and channel tiles
        ``[ct_lo, ct_hi)`` of ``cot`` — the rows split between the parts (every part taking all
        channel tiles) unless splitting the channel tiles costs less: a part's position tiles of
        ``qtl`` positions (``row_pos`` a row, default ``Wph``) times its channel tiles times
        ``tile_dots`` (the dot products of one tile), plus its input rows to pack (each part packs
        the whole image when the channels are split). Rows split into fewer positions than one tile
        do not shrink a part's tiles (MobileNetV2's 7x7 160 -> 960 1x1 convs took as long on two
        threads as on one), and 7 rows split 4 + 3."""
        b, c = self.b, self.c
        np_ = self.nparts
        r0, r1 = self.part_range(geo.oh)
        row_pos = row_pos or geo.wph
        qt_all = -(-(geo.oh * row_pos) // qtl)
        rows_max = b.sdiv(b.add(c(geo.oh), b.sub(np_, c(1))), np_)
        qt_rows = b.sdiv(b.add(b.mul(rows_max, c(row_pos)), c(qtl - 1)), c(qtl))
        # ~24 cycles per 16 packed positions of a row and group of four channels (four loads, the
        # interleave, the store; half the input in the other core's cache): with 8, MobileNetV2's
        # 14x14 384 -> 64 1x1 convs split their channels and took 30 us instead of 26
        pack_row = -(-geo.cig // 4) * len(geo.phases) * -(-geo.wph // 16) * 24
        by_rows = b.add(b.mul(qt_rows, c(cot * tile_dots)), b.mul(rows_max, c(pack_row)))
        cot_max = b.sdiv(b.add(c(cot), b.sub(np_, c(1))), np_)
        by_ch = b.add(b.mul(c(qt_all * tile_dots), cot_max), c(geo.oh * pack_row))
        chans = b.icmp_signed("<", by_ch, by_rows)
        t_lo, t_hi = self.part_range(cot)
        return (
            b.select(chans, c(0), r0),
            b.select(chans, c(geo.oh), r1),
            b.select(chans, t_lo, c(0)),
            b.select(chans, t_hi, c(cot)),
        )


def _choose_tile(
    rows: int,
    cols: int,
    nl: int,
    regs: int,
    mr_max: int,
    nv_max: int,
    load_weight: float = 0.5,
    min_accs: int = 1,
) -> tuple[int, int]:
    """Register tile ``(MR, NV)``: ``MR`` rows x ``NV`` vectors of ``nl`` columns, ``MR*NV + NV`` of
    the ``regs`` vector registers and at least ``min_accs`` accumulators where possible, chosen to
    minimise the padded work weighted by the load cost (``load_weight`` per load and dot)."""
    fits = [(mr, nv) for nv in range(1, nv_max + 1) for mr in range(1, mr_max + 1) if mr * nv + nv <= regs]
    if any(mr * nv >= min_accs for mr, nv in fits):
        fits = [(mr, nv) for mr, nv in fits if mr * nv >= min_accs]
    best: tuple[float, int, int] = (math.inf, 1, 1)
    for mr, nv in fits:
        work = math.ceil(rows / mr) * mr * math.ceil(cols / (nv * nl)) * nv * nl
        cost = work * (1.0 + load_weight * (mr + nv) / (mr * nv))
        if cost < best[0] - 1e-9:
            best = (cost, mr, nv)
    return best[1], best[2]


# ---- convolution geometry ----------------------------------------------------------------------


@dataclass
class ConvGeom:
    batch: int
    cin: int
    ih: int
    iw: int
    cout: int
    groups: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    oh: int
    ow: int
    wph: int
    phases: list[tuple[int, int]]  # used stride phases (a, b)
    taps: list[tuple[int, int, int]]  # per (kh, kw): (phase index, row offset, column offset)

    @property
    def cig(self) -> int:
        return self.cin // self.groups

    @property
    def cog(self) -> int:
        return self.cout // self.groups

    @property
    def max_off(self) -> int:
        return max(r * self.wph + c for _, r, c in self.taps)

    def rows_alloc(self, qt: int) -> int:
        """Phase rows packed per part (for at most oh output rows and q tiles of ``qt``)."""
        return self.oh + -(-(qt + self.max_off) // self.wph) + 1


def conv_geom(op: Any) -> ConvGeom | None:
    xs = op.operands[0].type.shape
    ws = op.operands[1].type.shape
    os_ = op.results[0].type.shape
    if len(xs) not in (3, 4) or len(ws) != len(xs):
        return None
    nd = len(xs) - 2
    k = list(op.attr("kernel_shape") or ws[2:])
    s = list(op.attr("strides") or [1] * nd)
    d = list(op.attr("dilations") or [1] * nd)
    pads = conv_pads(op.attr("auto_pad") or "NOTSET", list(xs[2:]), k, s, d, op.attr("pads"))
    if list(k) != list(ws[2:]) or min(s) < 1 or min(d) < 1 or min(pads) < 0:
        return None
    if nd == 1:
        xs, ws, os_ = [xs[0], xs[1], 1, xs[2]], [ws[0], ws[1], 1, ws[2]], [os_[0], os_[1], 1, os_[2]]
        k, s, d, pads = [1, k[0]], [1, s[0]], [1, d[0]], [0, pads[0], 0, pads[1]]
    g = int(op.attr("group") or 1)
    batch, cin, ih, iw = xs
    cout = ws[0]
    if cin % g or cout % g or ws[1] != cin // g:
        return None
    pt, pl, pb, pr = pads
    hp, wpad = ih + pt + pb, iw + pl + pr
    oh = (hp - (k[0] - 1) * d[0] - 1) // s[0] + 1
    ow = (wpad - (k[1] - 1) * d[1] - 1) // s[1] + 1
    if [oh, ow] != list(os_[2:]) or oh < 1 or ow < 1 or os_[1] != cout:
        return None
    wph = -(-wpad // s[1])
    phases: list[tuple[int, int]] = []
    taps = []
    for kh in range(k[0]):
        for kw in range(k[1]):
            ph = ((kh * d[0]) % s[0], (kw * d[1]) % s[1])
            if ph not in phases:
                phases.append(ph)
            taps.append((phases.index(ph), (kh * d[0]) // s[0], (kw * d[1]) // s[1]))
    return ConvGeom(
        batch, cin, ih, iw, cout, g, k[0], k[1], s[0], s[1], d[0], d[1], pt, pl, oh, ow, wph, phases, taps
    )


def _interleave(gen: Gen, vs: list[Any]) -> Any:
    """Four registers of 16 bytes (16 positions of one channel each) as one of 64, the four
    channels' bytes of a position together (the pack's ``[pos][4]``); one register as it is."""
    if len(vs) == 1:
        return vs[0]
    b = gen.b
    lo2 = b.shuffle_vector(vs[0], vs[1], gen.iota(32))
    hi2 = b.shuffle_vector(vs[2], vs[3], gen.iota(32))
    cat = b.shuffle_vector(lo2, hi2, gen.iota(64))
    return b.shuffle_vector(cat, cat, gen.cv([t * 16 + jj for jj in range(16) for t in range(4)]))


def _emit_pack(
    gen: Gen,
    geo: ConvGeom,
    x: Any,
    n: Any,
    r0: Any,
    dst: Any,
    ra: int,
    q: QuantInfo,
    inter: int,
    rows: Any = None,
) -> None:
    """Pack the phase rows ``[r0, r0 + rows)`` (default ``ra``; the layout keeps ``ra`` rows) of
    image ``n`` into ``dst``: layout ``[g][c/inter][phase][row][col][inter]`` of bytes ``q + off``
    (``zp + off`` for padding and for missing channels of the last group)."""
    b = gen.b
    off = 128 if q.in_signed else 0
    padu = (q.zp_in + off) & 0xFF
    wph, sw, iw, ih = geo.wph, geo.sw, geo.iw, geo.ih
    cig = geo.cig
    ngroups = -(-cig // inter)
    nph = len(geo.phases)
    row_bytes = wph * inter
    xor = gen.cv([off] * 64, I8) if off else None
    # AVX-512 BW: every row as whole chunks of 16 positions, the padding and the columns past the
    # input read as masked-off lanes (rows narrower than a chunk — 14x14, 7x7 — were byte by byte)
    masked = gen.isa.vector_bytes == 64 and gen.isa.has("avx512bw")

    def row_ptrs(gi: Any, cg: Any, nchan: int, ir_: Any) -> list[Any]:
        ptrs = []
        for t in range(nchan):
            ch = b.add(b.mul(gi, gen.c(cig)), b.add(b.mul(cg, gen.c(inter)), gen.c(t)))
            plane = b.add(b.mul(n, gen.c(geo.cin)), ch)
            ptrs.append(b.gep(x, [b.mul(b.add(b.mul(plane, gen.c(ih)), ir_), gen.c(iw))]))
        return ptrs

    def pack_group(gi: Any, cg: Any, nchan: int) -> None:
        for pi, (a, bb) in enumerate(geo.phases):
            # columns j whose input column j*sw + bb - pl lies in [0, iw)
            j_lo = max(0, -(-(geo.pl - bb) // sw))
            j_hi = min(wph, (iw - 1 + geo.pl - bb) // sw + 1) if iw - 1 + geo.pl - bb >= 0 else 0
            j_hi = max(j_hi, j_lo)
            span = 16 * sw
            # vector chunk starts j: j >= j_lo and j*sw + bb - pl + span <= iw
            jv_max = (iw - span + geo.pl - bb) // sw if iw - span + geo.pl - bb >= 0 else -1
            jv_end = min(jv_max, j_hi - 16)
            chunks = list(range(j_lo, jv_end + 1, 16))
            if chunks and chunks[-1] != jv_end:
                chunks.append(jv_end)
            covered: set[int] = set()
            for j in chunks:
                covered.update(range(j, j + 16))
            scalar_js = [j for j in range(j_lo, j_hi) if j not in covered]

            def row_body(
                i: Any,
                _: list[Any],
                pi: int = pi,
                a: int = a,
                bb: int = bb,
                j_lo: int = j_lo,
                j_hi: int = j_hi,
                chunks: list[int] = chunks,
                scalar_js: list[int] = scalar_js,
                span: int = span,
            ) -> None:
                phrow = b.add(r0, i)
                ir_ = b.sub(b.add(b.mul(phrow, gen.c(geo.sh)), gen.c(a)), gen.c(geo.pt))
                base_idx = b.add(
                    b.mul(
                        b.add(b.mul(b.add(b.mul(gi, gen.c(ngroups)), cg), gen.c(nph)), gen.c(pi)), gen.c(ra)
                    ),
                    i,
                )
                drow = b.gep(dst, [b.mul(base_idx, gen.c(row_bytes))])
                inside = b.and_(b.icmp_signed(">=", ir_, gen.c(0)), b.icmp_signed("<", ir_, gen.c(ih)))
                with b.if_else(inside) as (then, other):
                    with then:
                        ptrs = row_ptrs(gi, cg, nchan, ir_)
                        if masked:
                            _pack_row_masked(gen, geo, ptrs, drow, bb, inter, nchan, padu, off)
                        else:
                            # padding columns
                            for j in list(range(0, j_lo)) + list(range(j_hi, wph)):
                                gen.store(gen.cv([padu] * inter, I8), drow, j * inter)
                            for j in chunks:
                                c0 = j * sw + bb - geo.pl
                                vs = []
                                for t in range(inter):
                                    if t < nchan:
                                        v = gen.load(ptrs[t], c0, vt(I8, span))
                                        if sw > 1:
                                            v = b.shuffle_vector(v, v, gen.cv([jj * sw for jj in range(16)]))
                                    else:
                                        v = gen.cv([padu ^ off] * 16, I8)
                                    vs.append(v)
                                out = _interleave(gen, vs)
                                if xor is not None:
                                    out = b.xor(out, gen.cv([off] * (16 * inter), I8))
                                gen.store(out, drow, j * inter)
                            for j in scalar_js:
                                c0 = j * sw + bb - geo.pl
                                for t in range(inter):
                                    if t < nchan:
                                        v = b.load(b.gep(ptrs[t], [gen.c(c0)]))
                                        if off:
                                            v = b.xor(v, gen.c(off, I8))
                                    else:
                                        v = gen.c(padu, I8)
                                    b.store(v, b.gep(drow, [gen.c(j * inter + t)]))
                    with other:
                        fill = gen.cv([padu] * 64, I8)
                        nfull = row_bytes // 64
                        for kk in range(nfull):
                            gen.store(fill, drow, kk * 64)
                        for kk in range(nfull * 64, row_bytes):
                            b.store(gen.c(padu, I8), b.gep(drow, [gen.c(kk)]))

            gen.loop(0, ra if rows is None else rows, row_body)

    def group_body(gi: Any, _: list[Any]) -> None:
        full = cig // inter
        if full:
            gen.loop(0, full, lambda cg, __: pack_group(gi, cg, inter))
        if cig % inter:
            pack_group(gi, gen.c(full), cig % inter)

    gen.loop(0, geo.groups, group_body)


def _pack_row_masked(
    gen: Gen, geo: ConvGeom, ptrs: list[Any], drow: Any, bb: int, inter: int, nchan: int, padu: int, off: int
) -> None:
    """One packed phase row (column phase ``bb``) of ``_emit_pack`` in chunks of 16 positions, each
    a load of ``16 * sw`` input bytes per channel (``ptrs``: the channels' input rows) masked to the
    columns inside the input — the others read the padding byte —, interleaved, offset and stored
    whole; the last chunk overlaps the one before it, or (a row under 16 positions) is stored
    masked to the row. No byte outside the input rows or the packed row is accessed."""
    b = gen.b
    sw, wph, iw = geo.sw, geo.wph, geo.iw
    span = 16 * sw
    pad_in = gen.cv([padu ^ off] * span, I8)
    starts = list(range(0, wph - 15, 16)) if wph >= 16 else [0]
    if wph >= 16 and starts[-1] + 16 < wph:
        starts.append(wph - 16)
    for j in starts:
        c0 = j * sw + bb - geo.pl
        # the lanes read: those of a position (every sw-th), inside the input row
        lanes_ok = [s % sw == 0 and 0 <= c0 + s < iw for s in range(span)]
        vs = []
        for t in range(inter):
            if t >= nchan or not any(lanes_ok):
                vs.append(gen.cv([padu ^ off] * 16, I8))
                continue
            if all(0 <= c0 + s < iw for s in range(span)):
                v = gen.load(ptrs[t], c0, vt(I8, span))
            else:
                mask = ir.Constant(vt(I1, span), [int(m) for m in lanes_ok])
                v = gen.masked_load(ptrs[t], c0, mask, pad_in)
            if sw > 1:
                v = b.shuffle_vector(v, v, gen.cv([jj * sw for jj in range(16)]))
            vs.append(v)
        out = _interleave(gen, vs)
        if off:
            out = b.xor(out, gen.cv([off] * (16 * inter), I8))
        if j + 16 <= wph:
            gen.store(out, drow, j * inter)
        else:
            keep = ir.Constant(vt(I1, 16 * inter), [int(i < wph * inter) for i in range(16 * inter)])
            gen.masked_store(out, drow, j * inter, keep)


def _part_pack_rows(gen: Gen, geo: ConvGeom, nrows: Any, ra: int) -> Any:
    """The phase rows a part computing ``nrows`` output rows packs: those its stored outputs read
    (position ``r * Wph + c`` with ``c < OW`` reads up to ``max_off`` positions on), at most ``ra``.
    The rows after them, which only the unstored lanes of a part's last tile read, keep whatever
    the scratch held: packing all ``ra`` rows made every part pack the whole image (ResNet/MobileNetV2
    convs on two threads: each part's pack as long as one thread's)."""
    b = gen.b
    need = b.add(nrows, gen.c(geo.max_off // geo.wph + 1))
    return b.select(b.icmp_signed("<", need, gen.c(ra)), need, gen.c(ra))


def _store_masks(gen: Gen, geo: ConvGeom, qv: Any, qend: Any, r0: Any) -> list[tuple[Any, Any]]:
    """For the register of positions ``[qv, qv + nl)`` (relative to row ``r0``): one ``(offset in
    the output plane, lane mask)`` per output row it may span."""
    b = gen.b
    nl = gen.nl
    wph = geo.wph
    if wph == geo.ow:
        # no computed-but-unused columns (1x1 / unpadded stride-1 convs along W): the register's
        # positions are consecutive in the output plane, one store masked at the tail only
        qvec = b.add(gen.splat(b.trunc(qv, I32), nl), gen.iota(nl))
        valid = b.icmp_unsigned("<", qvec, gen.splat(b.trunc(qend, I32), nl))
        return [(b.add(b.mul(r0, gen.c(geo.ow)), qv), valid)]
    nseg = (nl - 1) // wph + 2
    qvec = b.add(gen.splat(b.trunc(qv, I32), nl), gen.iota(nl))
    row = b.udiv(qvec, gen.cv([wph] * nl))
    col = b.urem(qvec, gen.cv([wph] * nl))
    valid = b.and_(
        b.icmp_unsigned("<", col, gen.cv([geo.ow] * nl)),
        b.icmp_unsigned("<", qvec, gen.splat(b.trunc(qend, I32), nl)),
    )
    row0 = b.udiv(qv, gen.c(wph))
    out = []
    for s in range(nseg):
        rs = b.add(row0, gen.c(s))
        mask = b.and_(valid, b.icmp_unsigned("==", row, gen.splat(b.trunc(rs, I32), nl)))
        offs = b.add(b.sub(b.mul(b.add(r0, rs), gen.c(geo.ow)), b.mul(rs, gen.c(wph))), qv)
        out.append((offs, mask))
    return out


def _row_table(gen: Gen, geo: ConvGeom, tap_offs: list[int], tile: int) -> tuple[Any, list[int]]:
    """For kernels with many taps (more than ~250 dot products unrolled): when every kernel row's
    taps sit at the same offsets from the row's first, a constant table of the rows' first offsets
    (an internal global) and those column offsets, so the rows run as a loop (smaller code, faster
    compile); else ``(None, [])`` (all taps unrolled)."""
    if len(tap_offs) * tile <= 256 or geo.kh < 2:
        return None, []
    starts = [tap_offs[kh * geo.kw] for kh in range(geo.kh)]
    cols = [tap_offs[kw] - starts[0] for kw in range(geo.kw)]
    for kh in range(geo.kh):
        if [tap_offs[kh * geo.kw + kw] - starts[kh] for kw in range(geo.kw)] != cols:
            return None, []
    aty = ir.ArrayType(I64, geo.kh)
    g = ir.GlobalVariable(gen.module, aty, gen.module.get_unique_name(gen.fn.name + ".rows"))
    g.global_constant = True
    g.linkage = "internal"
    g.initializer = ir.Constant(aty, [ir.Constant(I64, v) for v in starts])
    return g, cols


def _fused(op: Any) -> list[Any]:
    return fused_consumers(op) if hasattr(op, "get_attr") and op.get_attr("cpu.fused") is not None else []


def fused_lut(op: Any) -> Any:
    """The ``tpu.Lut`` fused into ``op``'s kernel (``cpu.fused`` set by the compiler when
    :meth:`LutFusion.fuses` accepted it: right after ``op`` or after its fused residual add), or
    None."""
    f = _fused(op)
    return f[-1] if f and f[-1].name == "tpu.Lut" else None


@dataclass(frozen=True)
class ResidualAdd:
    """A ``tpu.Add`` of a conv's result and a residual tensor fused into the conv's epilogue: the
    residual's operand index, the zero points and signedness of both inputs, the result's bounds
    and zero point, and the tables ``[m_conv][m_res][31 + rshift]`` (int32, one per channel ``C``:
    the per-tensor factors repeated, as the kernels read them per channel)."""

    res_index: int
    zp_conv: int
    zp_res: int
    res_signed: bool
    lo: int
    hi: int
    zp_out: int
    out_signed: bool
    tables: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]

    def key(self) -> tuple[Any, ...]:
        """What the emitted code depends on (the tables are a buffer)."""
        return (self.zp_conv, self.zp_res, self.res_signed, self.lo, self.hi, self.zp_out, self.out_signed)


def _residual_add_of(op: Any, add: Any) -> ResidualAdd | None:
    """The fusable form of ``add`` after the INT8 conv ``op`` (NCHW), or None: two 8-bit quantized
    operands of the conv's result shape — one of them the conv's result —, an 8-bit result, the
    contract's per-tensor multipliers (two, one shift), scalar zero points."""
    from lamina.dialects.tpu.families.common import bounds, result_channel_axis, zp

    if add.name != "tpu.Add" or len(add.operands) != 2 or add.attr("do_relu"):
        return None
    out = op.results[0]
    if sum(v is out for v in add.operands) != 1:
        return None
    ri = 0 if add.operands[1] is out else 1
    r = add.operands[ri]
    ts = [v.type for v in add.operands]
    ot = add.results[0].type
    if any(_quant8(t) is None or not _static(t) for t in (*ts, ot)):
        return None
    shape = list(out.type.shape)
    if len(shape) != 4 or any(list(t.shape) != shape for t in (*ts, ot)):
        return None
    m, rs = add.attr("multiplier"), add.attr("rshift")
    if m is None or rs is None:
        return None
    m = np.asarray(m, np.int64).reshape(-1)
    sh = 31 + np.asarray(rs, np.int64).reshape(-1)
    c = shape[1]
    # per tensor only: two multipliers, one shift (a conv's result is never per-channel quantized:
    # per-channel activations are the last axis of rank-2/3 tensors, docs/tpu.md)
    if m.size != 2 or sh.size != 1 or result_channel_axis(ot, ts) is not None:
        return None
    mm = np.repeat(m.reshape(2, 1), c, axis=1)
    sh = np.repeat(sh, c)
    if np.any(mm < 0) or np.any(mm >= 2**31) or np.any(sh < 1) or np.any(sh > MAX_SHIFT):
        return None
    try:
        zps = [int(zp(t)) for t in (*ts, ot)]
    except (TypeError, ValueError):
        return None
    lo, hi = bounds(ot)
    ci = 1 - ri
    return ResidualAdd(
        ri,
        zps[ci],
        zps[ri],
        bool(_quant8(r.type).signed),
        int(lo),
        int(hi),
        zps[2],
        bool(_quant8(ot).signed),
        (tuple(int(v) for v in mm[ci]), tuple(int(v) for v in mm[ri]), tuple(int(v) for v in sh)),
    )


def residual32(ra: ResidualAdd, q: QuantInfo) -> tuple[int, ...] | None:
    """The constants of the fused add in int32 lanes (:meth:`Gen.add_residual`), or None where its
    bounds do not allow it (the i64 form then). With ``y``, ``r`` the stored bytes of the conv's
    result and the residual, ``t = (y - zp_y) * M1 + (r - zp_r) * M2`` and ``K = -zp_y * M1 - zp_r *
    M2 + 2**(S-1) + zp_out * 2**S``, the multipliers are split ``M = Mh * 2**16 + Ml`` (``Ml`` in
    ``[-2**15, 2**15)``, ``Mh < 2**15``) and ``K = Kh * 2**16 + Kl`` (``0 <= Kl < 2**16``):
    ``T_hi = y * Mh1 + r * Mh2 + Kh`` and ``T_lo = y * Ml1 + r * Ml2 + Kl`` are int32 (checked
    here from the bytes' ranges) and ``t + 2**(S-1) + zp_out * 2**S = T_hi * 2**16 + T_lo``. With
    ``Q = T_hi + (T_lo >> 16)`` (floor) and ``w = T_lo mod 2**16``, ``t < 0`` iff ``Q < B``
    (``B = 2**(S-17) + zp_out * 2**(S-16)``) and the contract's ``(t + 2**(S-1) - (t < 0)) >> S``
    plus ``zp_out`` is ``(Q - (t < 0 and w == 0)) >> (S - 16)``. Needs ``17 <= S <= 47``.
    Returns ``(Kh, Kl, Mh1 | Mh2 << 16, Ml1 | Ml2 << 16, B, S - 16)`` as int32 values."""
    m1, m2, sh = ra.tables[0][0], ra.tables[1][0], ra.tables[2][0]
    if not 17 <= sh <= 47:
        return None
    halves = []
    for m in (m1, m2):
        ml = ((m + 2**15) & 0xFFFF) - 2**15
        mh = (m - ml) >> 16
        if not (-(2**15) <= mh < 2**15):
            return None
        halves.append((mh, ml))
    (mh1, ml1), (mh2, ml2) = halves
    zp_y = ra.zp_conv
    k = -zp_y * m1 - ra.zp_res * m2 + 2 ** (sh - 1) + ra.zp_out * 2**sh
    kh, kl = k >> 16, k & 0xFFFF
    ymax = max(abs(q.lo), abs(q.hi))
    rmax = 128 if ra.res_signed else 255
    t_hi = ymax * abs(mh1) + rmax * abs(mh2) + abs(kh)
    t_lo = ymax * abs(ml1) + rmax * abs(ml2) + kl
    bq = 2 ** (sh - 17) + ra.zp_out * 2 ** (sh - 16)
    if t_hi + 2**15 + 1 >= 2**31 or t_lo >= 2**31 or abs(bq) >= 2**31:
        return None

    def i32(v: int) -> int:
        return ((v + 2**31) & 0xFFFFFFFF) - 2**31

    return (
        kh,
        kl,
        i32((mh1 & 0xFFFF) | (mh2 << 16)),
        i32((ml1 & 0xFFFF) | ((ml2 & 0xFFFF) << 16)),
        bq,
        sh - 16,
    )


#: unit roundoff of float32 (round to nearest even): a rounded result is ``x * (1 + d)``, ``|d| <= U32``
U32 = 2.0**-24


def _pow2_above(x: float) -> int:
    """The smallest power of two strictly above ``x`` (``x >= 0``)."""
    p = 1
    while p <= x:
        p *= 2
    return p


@dataclass(frozen=True)
class FastForm:
    """The float fast form of one rounding (:meth:`Gen.fast_round`): ``F`` fraction bits of the
    fixed-point value ``U``, ``P`` (a power of two) the width of the uncertain window, and ``H =
    2**(F-1) + P/2`` (the rounding half plus the window's half) that the constant term carries."""

    f: int
    p: int

    @property
    def h(self) -> int:
        return 2 ** (self.f - 1) + self.p // 2

    @property
    def mask(self) -> int:
        """The fraction bits ``p .. F-1``: a lane is certain iff ``U & mask != 0``."""
        return 2**self.f - self.p


def _fast_form(err: Callable[[int, int], float], fmax: int, fmin: int = 12) -> FastForm | None:
    """The largest ``F`` in ``[fmin, fmax]`` whose error bound ``err(F, P)`` (in units of
    ``2**-F``; it may depend on ``P`` through ``H``) fits a window ``P <= 2**(F-6)`` with ``P/2 >
    err``, or None."""
    for f in range(fmax, fmin - 1, -1):
        e = err(f, 2 ** (f - 6))  # H's term at the largest window admitted: an upper bound
        if not e < 2 ** (f - 7):
            continue
        p = _pow2_above(2 * e)
        if p <= 2 ** (f - 6):
            return FastForm(f, p)
    return None


def fast_requant(q: QuantInfo) -> FastForm | None:
    """The float fast form of the conv's requant (:meth:`Gen.fast_requant`), or None.

    The contract's ``y = clamp(zp + rdiv(acc * m, 2**S), lo, hi)``. With ``z = acc * m / 2**S``
    (real) and ``K = zp * 2**F + H`` (an integer below ``2**24``), the kernel computes ``U = 2**F *
    fl(fl(acc) * f'' + K / 2**F)``, ``f'' = fl(m) * 2**-S`` (the powers of two are exact).
    **Lemma**: if ``|U - (z * 2**F + K)| <= E < P/2`` and ``U mod 2**F >= P``, then ``z + 1/2`` is
    no integer (``z`` is no tie) and ``floor(U / 2**F) = zp + floor(z + 1/2)``, which is the
    contract's value (off ties every rounding to nearest agrees). *Proof*: with ``X = (zp + z) *
    2**F + 2**(F-1)``, ``U`` lies in ``(X, X + P)``; ``U = q 2**F + rho``, ``P <= rho < 2**F``, so
    ``q 2**F <= U - P < X < U < (q + 1) 2**F``. *Error*: the three float roundings (``fl(acc)``,
    ``fl(m)``, the fma) are relative ``(1 + d)``, ``|d| <= u = 2**-24``: ``E <= |z| 2**F * 3.0001 u
    + |K| u`` (plus 1/2 allowed for a rounding conversion). Only lanes with ``|z| <= Z = max(hi -
    zp, zp - lo) + 2`` need exactness; for the others the same relative bound puts ``floor(U /
    2**F)`` within 1 of ``zp + round(z)`` — beyond the same clamp bound — up to ``|U / 2**F| <
    2**23``, from where the float's fraction is 0: uncertain. Uncertain lanes take the exact int32
    form. Needs ``(Z + |zp| + 1) * 2**F < 2**24``."""
    zs = max(q.hi - q.zp_out, q.zp_out - q.lo) + 2
    if not _ties_rare(q.mult, q.shift):
        return None

    def err(f: int, p: int) -> float:
        k = abs(q.zp_out) * 2**f + 2 ** (f - 1) + p // 2
        if (zs * 2**f + k) >= 2**24:
            return math.inf
        return 0.5 + zs * 2**f * 3.0001 * U32 + k * U32

    return _fast_form(err, 16)


def fast_residual_form(ra: ResidualAdd, q: QuantInfo) -> tuple[FastForm, float, float, float] | None:
    """The float fast form of the fused add (:meth:`Gen.fast_residual`): ``(form, g1, g2, C)``
    (float32 values), or None. With the stored bytes ``y`` (in ``[q.lo, q.hi]``) and ``r``, the
    contract's ``clamp(zp_o + rdiv((y - zp_y) M1 + (r - zp_r) M2, 2**S))``; the kernel computes
    ``U = rne(fl(y g1' + fl(r g2' + C')))`` with ``g_i' = fl(M_i 2**(F-S))``, ``C' = fl(C)``, ``C =
    zp_o 2**F + H - zp_y g1 - zp_r g2`` — of the real value ``T = y g1 + r g2 + C`` (the add's
    result times ``2**F`` plus ``zp_o 2**F + H``) within ``E = 1/2 + 1.01 u (2 A + 3 B + 3 |C|)``
    (``A = max|y| g1``, ``B = max|r| g2``: five relative roundings, each at most ``u`` of a sum of
    those magnitudes), then :meth:`Gen.fast_round`'s lemma. Every lane is bounded (bytes), so
    ``A + B + |C| < 2**30`` keeps the conversion in range."""
    m1, m2, sh = ra.tables[0][0], ra.tables[1][0], ra.tables[2][0]
    ymax = max(abs(q.lo), abs(q.hi))
    rmax = 128 if ra.res_signed else 255

    def consts(f: int, p: int) -> tuple[float, float, float]:
        g1 = float(np.float32(m1 * 2.0 ** (f - sh)))
        g2 = float(np.float32(m2 * 2.0 ** (f - sh)))
        c = (
            ra.zp_out * 2.0**f
            + 2 ** (f - 1)
            + p // 2
            - ra.zp_conv * m1 * 2.0 ** (f - sh)
            - ra.zp_res * m2 * 2.0 ** (f - sh)
        )
        return g1, g2, c

    def err(f: int, p: int) -> float:
        g1, g2, c = consts(f, p)
        a, b_ = ymax * g1, rmax * g2
        if a + b_ + abs(c) >= 2**29 or not all(math.isfinite(v) for v in (g1, g2, c)):
            return math.inf
        return 0.5 + 1.01 * U32 * (2 * a + 3 * b_ + 3 * abs(c))

    form = _fast_form(err, 20)
    if form is None:
        return None
    g1, g2, c = consts(form.f, form.p)
    return form, g1, g2, float(np.float32(c))


def fast_residual(ra: ResidualAdd, q: QuantInfo) -> tuple[FastForm, float, float, float] | None:
    """:func:`fast_residual_form` where exact ties are rare (:func:`_ties_rare`), else None."""
    if not _ties_rare(np.asarray(ra.tables[:2])[:, 0], np.asarray(ra.tables[2][:1] * 2)):
        return None
    return fast_residual_form(ra, q)


def _ties_rare(mult: np.ndarray, shift: np.ndarray) -> bool:
    """Whether exact ties are rare enough for the fast forms (their lanes all take the exact path):
    a product with ``m = o * 2**j`` (``o`` odd) is a tie of ``2**S`` only at multiples of
    ``2**(S-1-j)`` — frequent where ``S - j`` is small (power-of-two scale ratios: 0.5, 0.375...)."""
    m = np.asarray(mult, np.int64).reshape(-1)
    s = np.asarray(shift, np.int64).reshape(-1)
    j = np.zeros(m.shape, np.int64)
    v = m.copy()
    while np.any((v != 0) & (v % 2 == 0)):
        even = (v != 0) & (v % 2 == 0)
        j += even
        v = np.where(even, v // 2, v)
    return bool(np.all((m == 0) | (s - j >= 14)))


def fast_isa(isa: Isa) -> bool:
    """Whether the ISA has what the fast forms emit: the rounding float -> int32 conversion and fma
    of AVX-512 (16 lanes) or AVX2 + FMA (8 lanes)."""
    if isa.vector_bytes == 64:
        return isa.has("avx512f")
    return isa.vector_bytes == 32 and isa.has("avx2") and isa.has("fma")


def residual_add(op: Any) -> ResidualAdd | None:
    """The residual ``tpu.Add`` fused into ``op``'s kernel (the first fused consumer), or None."""
    f = _fused(op)
    return _residual_add_of(op, f[0]) if f and f[0].name == "tpu.Add" else None


def _fused_key(op: Any, q: QuantInfo) -> tuple[Any, ...]:
    ra = residual_add(op)
    res = None
    if ra is not None:
        res = (
            ra.key(),
            residual32(ra, q) is not None,
            fast_residual(ra, q) is not None,
            fast_requant(q) is not None,
        )
    return (fused_lut(op) is not None, res)


def _with_lut(
    op: Any,
    symbol: str,
    buffers: list[tuple[str, Any]],
    weights: dict[str, np.ndarray],
    *rest: Any,
    q: QuantInfo | None = None,
) -> KernelPlan:
    """The plan, with a fused ``tpu.Lut``'s table (as its result's storage) as a weight buffer
    before the output."""
    lut = fused_lut(op)
    if lut is not None:
        from lamina.dialects.tpu.quantize import storage_dtype

        e = lut.results[0].type.element_type
        weights["lut"] = np.ascontiguousarray(
            np.asarray(lut.properties["table"].to_numpy()).astype(storage_dtype(e))
        )
        buffers.insert(buffers.index(("out", 0)), ("weight", "lut"))
    ra = residual_add(op)
    if ra is not None:
        add = _fused(op)[0]
        c = len(ra.tables[0])
        r32 = residual32(ra, q) if q is not None else None
        if r32 is not None:  # the int32 form's constants (Gen.add_residual), then the fast form's
            f2 = fast_residual(ra, q) if q is not None else None
            fast = [0] * 8
            if f2 is not None:
                form, g1, g2, cc = f2
                fl = np.asarray([g1, g2, cc], np.float32).view(np.int32)
                fast = [int(fl[0]), int(fl[1]), int(fl[2]), form.f, form.mask, 0, 0, 0]
            weights["ra"] = np.asarray([*r32, 0, 0, *fast], np.int64).astype(np.int32)
        else:
            weights["ra"] = np.asarray(ra.tables, np.int64).astype(np.int32).reshape(3, c)
        at = buffers.index(("out", 0))
        buffers[at:at] = [("in", add.operands[ra.res_index]), ("weight", "ra")]
    return KernelPlan(symbol, buffers, weights, *rest)


class LutFusion:
    """The epilogue hook of the compiler: a following ``tpu.Lut`` (an INT8 activation such as SiLU
    or GELU, 8-bit in and out) is applied to each requantized register (table lookups) and the
    kernel writes the Lut's result. Templates with ``residual = True`` (the convs) also take a
    residual ``tpu.Add`` of the result and another tensor (:func:`_residual_add_of`), and a Lut
    after it: the add's requant runs on each requantized register."""

    residual = False

    def fuses(self, op: Any, consumer: Any) -> bool:
        if op.get_attr("cpu.fused") is not None:
            return False
        prev = consumer.operands[0].defining_op() if consumer.operands else None
        if consumer.name == "tpu.Add" and self.residual:
            return len(op.results[0].users) == 1 and _residual_add_of(op, consumer) is not None
        if consumer.name != "tpu.Lut":
            return False
        if prev is not op and not (
            self.residual
            and prev is not None
            and prev.name == "tpu.Add"
            and len(op.results[0].users) == 1
            and op.results[0].users[0] is prev
            and _residual_add_of(op, prev) is not None
        ):
            return False
        ti, to = consumer.operands[0].type, consumer.results[0].type
        tab = consumer.properties.get("table") if hasattr(consumer, "properties") else None
        return _quant8(ti) is not None and _quant8(to) is not None and _static(to) and tab is not None


def _images(gen: Gen, n: int, body: Callable[[Any, list[Any]], None]) -> None:
    gen.loop(0, n, body)


# ---- templates ----------------------------------------------------------------------------------


def _is(op: Any, name: str) -> bool:
    return getattr(op, "name", None) == name


def _conv_plan(op: Any, symbol: str, geo: Any, q: Any, t: int, rows: int) -> KernelPlan:
    """The plan of the two INT8 conv templates: weights packed in tiles of ``t`` output channels
    (``[g][cot][cig4][tap][t][4]``, what ``vpdpbusd`` reads), the folded per-channel constants and
    requant tables, per-part scratch for ``rows`` output rows' stride phases of the input."""
    cig4 = -(-geo.cig // 4)
    cot = -(-geo.cog // t)
    ntap = len(geo.taps)
    w = q.weight.reshape(geo.groups, geo.cog, geo.cig, geo.kh * geo.kw).astype(np.int8)
    wp = np.zeros((geo.groups, cot * t, cig4 * 4, ntap), np.int8)
    wp[:, : geo.cog, : geo.cig] = w
    # [g][cot][cig4][tap][t][4]
    wp = wp.reshape(geo.groups, cot, t, cig4, 4, ntap).transpose(0, 1, 3, 5, 2, 4).copy()
    wsum = w.astype(np.int64).sum(axis=(2, 3)).reshape(-1)
    weights = {"w": wp.reshape(-1), **_tables(q, wsum, geo.cout + t)}
    ra = geo.rows_alloc(rows)
    scratch = geo.groups * cig4 * len(geo.phases) * ra * geo.wph * 4 + 64
    macs = geo.batch * geo.cout * geo.oh * geo.ow * geo.cig * geo.kh * geo.kw
    nbytes = int(np.prod(op.operands[0].type.shape)) + int(np.prod(op.results[0].type.shape)) + wp.size
    plan = _with_lut(op, symbol, list(BUFFERS), weights, scratch, macs, nbytes, q=q)
    fm = fast_factors(op, q, geo.cout + t)
    if fm is not None:
        plan.weights["fm"] = fm
        plan.buffers.append(("weight", "fm"))
    return plan


def fast_factors(op: Any, q: QuantInfo, pad_to: int) -> np.ndarray | None:
    """Where a conv's fused residual add takes the float fast forms (:func:`fast_requant`,
    :func:`fast_residual`), its requant's float factors ``fl(m) * 2**-S`` per output channel (exact:
    a power of two times a float; padded with 0) — one table load a channel instead of four
    operations (:meth:`Gen.fast_requant_residual`); else None."""
    ra = residual_add(op)
    if ra is None or residual32(ra, q) is None or fast_residual(ra, q) is None or fast_requant(q) is None:
        return None
    f = np.zeros(pad_to, np.float32)
    f[: q.mult.size] = (
        q.mult.astype(np.float32).astype(np.float64) * np.exp2(-q.shift.astype(np.float64))
    ).astype(np.float32)
    return f.view(np.int32)


def _fm_table(gen: Gen, plan: KernelPlan) -> Any:
    """The plan's table of :func:`fast_factors` (as ``i32*``) where the kernel takes the fast forms,
    else None."""
    if gen.fast1 is None or ("weight", "fm") not in plan.buffers:
        return None
    return gen.b.bitcast(gen.bufs[plan.buffers.index(("weight", "fm"))], I32.as_pointer())


def _set_fast(gen: Gen, q: QuantInfo, isa: Isa) -> None:
    """The float fast forms of a conv with a fused residual add in the int32 form, where the ISA has
    them (:func:`fast_isa`)."""
    if gen.res is None or gen.res32 is None or not fast_isa(isa):
        return
    gen.fast2 = fast_residual(gen.res[2], q)
    gen.fast1 = fast_requant(q) if gen.fast2 is not None else None


class Int8Conv(LutFusion, Template):
    """INT8 convolution (any groups but depthwise, strides, dilations, pads; 1-d and 2-d) as a
    register-tiled implicit GEMM over stride-phase-packed input (``vpdpbusd`` where present)."""

    name = "int8-conv"
    priority = 10
    residual = True

    def _geo(self, op: Any) -> tuple[ConvGeom, QuantInfo] | None:
        if not _is(op, "tpu.Conv") or len(op.operands) != 3:
            return None
        try:
            geo = conv_geom(op)
        except (TypeError, ValueError):
            return None
        if geo is None:
            return None
        q = _quant_info(op, geo.cout)
        if q is None:
            return None
        return geo, q

    def matches(self, op: Any, isa: Isa) -> bool:
        r = self._geo(op)
        return r is not None and not (r[0].cig == 1 and r[0].cog == 1)

    def ir_key(self, op: Any, isa: Isa) -> tuple[Any, ...]:
        """Ops of equal keys get the same function but for its name (the per-channel factors, bias
        and weights are buffers): a compiler may emit one and call it for all. (Not in the ABI.)"""
        r = self._geo(op)
        assert r is not None
        g = r[0]
        return (self.name, repr(g), _scalars(r[1]), _fused_key(op, r[1]), isa)

    def code_key(self, op: Any, plan: KernelPlan, isa: Isa) -> Any:
        """:meth:`ir_key`: the compiler's code key (``kernels/codekey.py``)."""
        return self.ir_key(op, isa)

    def _tile(self, geo: ConvGeom, isa: Isa, op: Any = None) -> tuple[int, int]:
        """The register tile: :meth:`_base_tile`, but on small images (at most 400 positions: 14x14,
        7x7) the one of least padded work with at least 8 accumulators, loads weighted 0.1 — a
        register of 16 positions leaves fewer computed-but-unused positions there (ResNet-50's
        14x14 1x1 convs: 8 x 1 instead of 8 x 2, 208 positions computed instead of 224 — 5 % less
        time in the model)."""
        if geo.oh * geo.wph > 400:
            return self._base_tile(geo, isa, op)
        return self._base_tile(geo, isa, op, 0.1, 8)

    def _base_tile(
        self, geo: ConvGeom, isa: Isa, op: Any = None, load_weight: float = 0.5, min_accs: int = 1
    ) -> tuple[int, int]:
        """The register tile of :func:`_choose_tile` over the registers the conv leaves (the
        estimate :class:`Int8ConvChannels` compares with)."""
        nl = lanes(isa)
        regs = 30 if isa.vector_bytes == 64 else 14
        short = -(-geo.cig // 4) * len(geo.taps) <= 32
        if isa.vector_bytes == 64 and short and op is not None and residual_add(op) is not None:
            # a short K loop and the fused add's constants: a smaller tile spills less in the
            # epilogue (ResNet-50's 64 -> 256 1x1 + add at 56x56: 600 -> 533 us)
            regs = 16
        if not vnni(isa):
            regs = regs // 2
        return _choose_tile(geo.cog, geo.oh * geo.wph, nl, regs, 8, 4, load_weight, min_accs)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        nl = lanes(isa)
        mr, nv = self._tile(geo, isa, op)
        return _conv_plan(op, symbol, geo, q, mr, nv * nl)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        nl = gen.nl
        mr, nv = self._tile(geo, isa, op)
        x, wp, ct, mt, st_, out, scr = gen.std_bufs(plan, q.out_signed, op)
        gen.fast_shift = fast_shift(q)
        gen.res32 = residual32(gen.res[2], q) if gen.res is not None else None
        _set_fast(gen, q, isa)
        ct = b.bitcast(ct, I32.as_pointer())
        mt = b.bitcast(mt, I32.as_pointer())
        st_ = b.bitcast(st_, I32.as_pointer())
        rtab = b.bitcast(gen.res[1], I32.as_pointer()) if gen.res is not None else None
        fmt = _fm_table(gen, plan)
        cig4 = -(-geo.cig // 4)
        cot = -(-geo.cog // mr)
        ntap = len(geo.taps)
        nph = len(geo.phases)
        qtl = nv * nl
        ra = geo.rows_alloc(qtl)
        scr = b.gep(scr, [b.mul(gen.part, gen.c(plan.scratch_bytes))])
        r0, r1, ct_lo, ct_hi = gen.conv_split(geo, qtl, cot, cig4 * ntap * mr * nv)
        nrows = b.sub(r1, r0)
        qend = b.mul(nrows, gen.c(geo.wph))
        nqt = b.sdiv(b.add(qend, gen.c(qtl - 1)), gen.c(qtl))
        plane_out = geo.oh * geo.ow
        cig_stride = nph * ra * geo.wph * 4  # bytes per channel group of four
        tap_offs = [((pi * ra + ro) * geo.wph + co) * 4 for pi, ro, co in geo.taps]
        rows_tab, col_offs = _row_table(gen, geo, tap_offs, mr * nv)

        prows = _part_pack_rows(gen, geo, nrows, ra)

        def image(n: Any, _: list[Any]) -> None:
            _emit_pack(gen, geo, x, n, r0, scr, ra, q, 4, prows)

            def group(gi: Any, _: list[Any]) -> None:
                # position tiles outer, channel tiles inner: a tile's packed input stays in L1 while
                # the weights stream (the other order streamed the packed input from L2 once per
                # channel tile; ResNet-50 INT8 in the model: its 1x1 + add convs 3-4 % faster,
                # ResNet-18 / MobileNetV2 unchanged)
                def cotile(ct_i: Any) -> tuple[Any, list[tuple[Any, Any]]]:
                    """The channel tile's packed weights and its channels (in the group, overall)."""
                    wt = b.gep(wp, [b.mul(b.add(b.mul(gi, gen.c(cot)), ct_i), gen.c(cig4 * ntap * mr * 4))])
                    chans = []
                    for mm in range(mr):
                        col = b.add(b.mul(ct_i, gen.c(mr)), gen.c(mm))
                        co = b.add(b.mul(gi, gen.c(geo.cog)), col)
                        chans.append((col, co))
                    return wt, chans

                def qtile(qt: Any, _: list[Any]) -> None:
                    # the position tile's store masks and packed input, then its channel tiles
                    q0 = b.mul(qt, gen.c(qtl))
                    masks = [_store_masks(gen, geo, b.add(q0, gen.c(v * nl)), qend, r0) for v in range(nv)]
                    xg = b.gep(scr, [b.add(b.mul(gi, gen.c(cig4 * cig_stride)), b.mul(q0, gen.c(4)))])
                    gen.loop(ct_lo, ct_hi, lambda ct_i, __: tile(ct_i, q0, masks, xg))

                def tile(ct_i: Any, q0: Any, masks: list[list[tuple[Any, Any]]], xg: Any) -> None:
                    wt, chans = cotile(ct_i)

                    def taps(xc: Any, wc: Any, accs: list[Any], offs: list[int], first: int) -> list[Any]:
                        accs = list(accs)
                        for ti, toff in enumerate(offs):
                            xv = [gen.load(xc, toff + v * nl * 4, vt(I8, 4 * nl)) for v in range(nv)]
                            for mm in range(mr):
                                wb = gen.bcast32(wc, ((first + ti) * mr + mm) * 4, nl)
                                for v in range(nv):
                                    accs[mm * nv + v] = gen.dot(accs[mm * nv + v], xv[v], wb)
                        return accs

                    def kstep(cg: Any, accs: list[Any]) -> list[Any]:
                        xc = b.gep(xg, [b.mul(cg, gen.c(cig_stride))])
                        wc = b.gep(wt, [b.mul(cg, gen.c(ntap * mr * 4))])
                        if rows_tab is None:
                            return taps(xc, wc, accs, tap_offs, 0)

                        # many taps: the kernel rows as a loop (row offsets from a table)
                        def krow(kh: Any, acc: list[Any]) -> list[Any]:
                            ro = b.load(b.gep(rows_tab, [gen.c(0), kh]))
                            wk = b.gep(wc, [b.mul(kh, gen.c(geo.kw * mr * 4))])
                            return taps(b.gep(xc, [ro]), wk, acc, col_offs, 0)

                        return gen.loop(0, geo.kh, krow, accs)

                    # the folded per-channel constant starts each accumulator
                    cfs = [gen.splat(b.load(b.gep(ct, [chans[mm][1]])), nl) for mm in range(mr)]
                    accs = gen.loop(0, cig4, kstep, [cfs[mm] for mm in range(mr) for _ in range(nv)])

                    def epi(co: Any, acc: list[Any]) -> None:
                        """Channel ``co``'s epilogue of its ``nv`` accumulators ``acc``."""
                        cf = None  # folded into the accumulators' start
                        mu = gen.splat(b.load(b.gep(mt, [co])), nl)
                        sh = gen.splat(b.load(b.gep(st_, [co])), nl)
                        plane = b.mul(b.add(b.mul(n, gen.c(geo.cout)), co), gen.c(plane_out))
                        obase = b.gep(out, [plane])
                        am = rm = ash = c32 = fc = None
                        if gen.res is not None and rtab is not None:
                            rbase = b.gep(gen.res[0], [plane])
                            c32, fc, am, rm, ash = gen.residual_consts(rtab, co, geo.cout, nl)
                        rs = []
                        if gen.res is not None:
                            for v in range(nv):
                                r = gen.cv([0] * nl, I8)
                                for offs, mask in masks[v]:
                                    r = gen.masked_load(rbase, offs, mask, r)
                                rs.append(r)

                        def exact() -> list[Any]:
                            ys = []
                            for v in range(nv):
                                y = gen.requant(
                                    acc[v],
                                    cf,
                                    mu,
                                    sh,
                                    q,
                                    lut=False,
                                    raw=gen.res is not None,
                                )
                                if gen.res is not None:
                                    y = gen.add_residual(y, rs[v], am, rm, ash, q, consts=c32, lut=False)
                                ys.append(y)
                            return ys

                        if fc is not None and gen.fast1 is not None:
                            # the float fast form, the exact one for a row with an uncertain lane
                            fm = None
                            if fmt is not None:
                                fm = b.bitcast(gen.splat(b.load(b.gep(fmt, [co])), nl), vt(F32, nl))
                            ys = gen.fast_requant_residual(
                                [acc[v] for v in range(nv)], rs[:nv], mu, sh, q, fc, exact, fm
                            )
                        else:
                            ys = exact()
                        for v, y in enumerate(gen.apply_luts(ys)):
                            for offs, mask in masks[v]:
                                gen.masked_store(y, obase, offs, mask)

                    if mr == 1:
                        epi(chans[0][1], accs)
                    else:
                        # the epilogue once in the IR, looped over the tile's mr channels, the
                        # accumulators through a stack array (allocated in the entry block): LLVM
                        # optimizes one copy instead of mr (ResNet-50 INT8: these kernels' IR 2-5x
                        # smaller, their LLVM time 2.66 -> 1.78 s; the layers as fast, measured)
                        slots = gen.stack_array(accs)

                        def channel(m_i: Any, _: list[Any]) -> None:
                            col = b.add(b.mul(ct_i, gen.c(mr)), m_i)
                            co = b.add(b.mul(gi, gen.c(geo.cog)), col)
                            acc = [gen.slot(slots, b.add(b.mul(m_i, gen.c(nv)), gen.c(v))) for v in range(nv)]
                            if geo.cog % mr:
                                gen.when(b.icmp_signed("<", col, gen.c(geo.cog)), lambda: epi(co, acc))
                            else:
                                epi(co, acc)

                        gen.loop(0, mr, channel)

                gen.loop(0, nqt, qtile)

            gen.loop(0, geo.groups, group)

        gen.when(b.icmp_signed("<", r0, r1), lambda: _images(gen, geo.batch, image))
        b.ret_void()


class Int8ConvChannels(Int8Conv):
    """INT8 convolution with the output channels along the vector lanes: ``MR`` output positions
    (four input bytes each broadcast) x ``NV`` registers of 16 channels. It reads only the valid
    positions of the phase-packed input, so it wins where the pixel-lane kernel's computed but
    unused columns (``Wph - OW`` per row) are many — small images such as 14x14 and 7x7 — and it
    scatters each output register's bytes to their channel planes (NCHW). Taken (priority 11) only
    where its estimated efficiency beats :class:`Int8Conv`'s; ``force`` takes every conv it can run
    (tests)."""

    name = "int8-conv-channels"
    priority = 11
    code_key = Int8Conv.code_key  # its ir_key (re-declared: a subclass may emit other code)

    def __init__(self, force: bool = False):
        self.force = force

    def _ctile(self, geo: ConvGeom, isa: Isa) -> tuple[int, int]:
        nl = lanes(isa)
        regs = 29 if isa.vector_bytes == 64 else 13
        if not vnni(isa):
            regs = regs // 2
        return _choose_tile(geo.oh * geo.ow, geo.cog, nl, regs, 8, 4)

    def _better(self, geo: ConvGeom, isa: Isa) -> bool:
        nl = lanes(isa)
        mr, nv = Int8Conv._base_tile(self, geo, isa)
        qtl = nv * nl
        q = geo.oh * geo.wph
        pos = geo.oh * geo.ow
        e_pix = pos / (-(-q // qtl) * qtl) * (geo.cog / (-(-geo.cog // mr) * mr))
        cr, cv = self._ctile(geo, isa)
        k4 = -(-geo.cig // 4) * len(geo.taps)
        e_ch = pos / (-(-pos // cr) * cr) * (geo.cog / (-(-geo.cog // (cv * nl)) * cv * nl))
        e_ch *= k4 / (k4 + 12)
        return e_ch > 1.03 * e_pix

    def matches(self, op: Any, isa: Isa) -> bool:
        r = self._geo(op)
        if r is None or (r[0].cig == 1 and r[0].cog == 1) or r[0].cog % lanes(isa):
            return False
        return self.force or self._better(r[0], isa)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        nl = lanes(isa)
        _, nv = self._ctile(geo, isa)
        cw = nv * nl
        return _conv_plan(op, symbol, geo, q, cw, 4)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        nl = gen.nl
        mr, nv = self._ctile(geo, isa)
        cw = nv * nl
        x, wp, ct, mt, st_, out, scr = gen.std_bufs(plan, q.out_signed, op)
        gen.fast_shift = fast_shift(q)
        gen.res32 = residual32(gen.res[2], q) if gen.res is not None else None
        _set_fast(gen, q, isa)
        fmt = _fm_table(gen, plan)
        cig4 = -(-geo.cig // 4)
        cot = -(-geo.cog // cw)
        ntap = len(geo.taps)
        nph = len(geo.phases)
        ra = geo.rows_alloc(4)
        scr = b.gep(scr, [b.mul(gen.part, gen.c(plan.scratch_bytes))])
        r0, r1, ct_lo, ct_hi = gen.conv_split(geo, mr, cot, cig4 * ntap * mr * nv, geo.ow)
        npos = b.mul(b.sub(r1, r0), gen.c(geo.ow))
        npt = b.sdiv(b.add(npos, gen.c(mr - 1)), gen.c(mr))
        plane_out = geo.oh * geo.ow
        cig_stride = nph * ra * geo.wph * 4
        tap_offs = [((pi * ra + ro) * geo.wph + co) * 4 for pi, ro, co in geo.taps]
        pbase = b.mul(r0, gen.c(geo.ow))
        prows = _part_pack_rows(gen, geo, b.sub(r1, r0), ra)

        def image(n: Any, _: list[Any]) -> None:
            _emit_pack(gen, geo, x, n, r0, scr, ra, q, 4, prows)

            def group(gi: Any, _: list[Any]) -> None:
                xg = b.gep(scr, [b.mul(gi, gen.c(cig4 * cig_stride))])

                def cotile(ct_i: Any, _: list[Any]) -> None:
                    wt = b.gep(wp, [b.mul(b.add(b.mul(gi, gen.c(cot)), ct_i), gen.c(cig4 * ntap * cw * 4))])
                    col0 = b.mul(ct_i, gen.c(cw))
                    ch0 = b.add(b.mul(gi, gen.c(geo.cog)), col0)
                    tabs = []
                    rtabs = []
                    for v in range(nv):
                        o4 = b.mul(b.add(ch0, gen.c(v * nl)), gen.c(4))
                        tabs.append(tuple(gen.load(tb, o4, vt(I32, nl), 4) for tb in (ct, mt, st_)))
                        if gen.res is not None and gen.res32 is None:
                            rt_ = gen.res[1]
                            rtabs.append(
                                tuple(
                                    gen.load(rt_, b.add(o4, gen.c(4 * j * geo.cout)), vt(I32, nl), 4)
                                    for j in range(3)
                                )
                            )

                    def ptile(pt: Any, _: list[Any]) -> None:
                        p0 = b.mul(pt, gen.c(mr))
                        last = b.sub(npos, gen.c(1))
                        xoffs = []
                        for rr in range(mr):
                            p = b.add(p0, gen.c(rr))
                            p = b.select(b.icmp_signed(">", p, last), last, p)
                            qq = b.add(
                                b.mul(b.udiv(p, gen.c(geo.ow)), gen.c(geo.wph)), b.urem(p, gen.c(geo.ow))
                            )
                            xoffs.append(b.mul(qq, gen.c(4)))

                        def kstep(cg: Any, accs: list[Any]) -> list[Any]:
                            xc = b.gep(xg, [b.mul(cg, gen.c(cig_stride))])
                            wc = b.gep(wt, [b.mul(cg, gen.c(ntap * cw * 4))])
                            xr = [b.gep(xc, [xo]) for xo in xoffs]
                            accs = list(accs)
                            for ti, toff in enumerate(tap_offs):
                                wv = [gen.load(wc, (ti * nv + v) * nl * 4, vt(I8, 4 * nl)) for v in range(nv)]
                                for rr in range(mr):
                                    a = gen.bcast32(xr[rr], toff, nl)
                                    for v in range(nv):
                                        accs[rr * nv + v] = gen.dot(accs[rr * nv + v], a, wv[v])
                            return accs

                        accs = gen.loop(0, cig4, kstep, [tabs[v][0] for _ in range(mr) for v in range(nv)])

                        def epi_v(vo: Any, mu: Any, sh: Any, rt3: Any, acc: list[Any]) -> None:
                            """The epilogue of the channels ``ch0 + vo`` (one register: ``nl``) of
                            the tile's ``mr`` positions, accumulators ``acc``."""
                            cf = None  # folded into the accumulators' start
                            at = b.add(
                                b.mul(
                                    b.add(b.mul(n, gen.c(geo.cout)), b.add(ch0, vo)),
                                    gen.c(plane_out),
                                ),
                                b.add(pbase, p0),
                            )
                            obase = b.gep(out, [at])
                            rbase = b.gep(gen.res[0], [at]) if gen.res is not None else None
                            am, rm, ash = rt3 if rt3 is not None else (None, None, None)

                            def full() -> None:
                                # the channels' runs of mr positions, transposed in registers: one
                                # load / store of mr bytes per channel, masked to the positions
                                # the part computes (the last tile's)
                                left = b.trunc(b.sub(npos, p0), I32)
                                run_mask = b.icmp_signed("<", gen.iota(mr), gen.splat(left, mr))
                                c32 = gen.res32_consts(nl) if gen.res32 is not None else None
                                fc = gen.res_fast_consts(nl) if gen.fast2 is not None else None
                                rs: list[Any] = []
                                if rbase is not None:
                                    runs = [
                                        gen.masked_load(rbase, c * plane_out, run_mask, gen.cv([0] * mr, I8))
                                        for c in range(nl)
                                    ]
                                    rs = _transpose(gen, runs, nl, mr)

                                def exact() -> list[Any]:
                                    ys = [
                                        gen.requant(
                                            acc[rr],
                                            cf,
                                            mu,
                                            sh,
                                            q,
                                            lut=False,
                                            raw=rbase is not None,
                                        )
                                        for rr in range(mr)
                                    ]
                                    if rbase is not None:
                                        ys = [
                                            gen.add_residual(y, r, am, rm, ash, q, consts=c32, lut=False)
                                            for y, r in zip(ys, rs)
                                        ]
                                    return ys

                                if fc is not None and gen.fast1 is not None and rs:
                                    # the float fast form; a tile with an uncertain lane: exact
                                    fm = None
                                    if fmt is not None:
                                        fm = b.bitcast(
                                            gen.load(
                                                b.bitcast(fmt, I8P),
                                                b.mul(b.add(ch0, vo), gen.c(4)),
                                                vt(I32, nl),
                                                4,
                                            ),
                                            vt(F32, nl),
                                        )
                                    ys = gen.fast_requant_residual(
                                        [acc[rr] for rr in range(mr)],
                                        rs[:mr],
                                        mu,
                                        sh,
                                        q,
                                        fc,
                                        exact,
                                        fm,
                                    )
                                else:
                                    ys = exact()
                                ys = gen.apply_luts(ys)
                                for c, run in enumerate(_transpose(gen, ys, mr, nl)):
                                    gen.masked_store(run, obase, c * plane_out, run_mask)

                            def tail() -> None:
                                for rr in range(mr):
                                    gen.when(
                                        b.icmp_signed("<", b.add(p0, gen.c(rr)), npos),
                                        functools.partial(epi_r, rr),
                                    )

                            def epi_r(rr: int) -> None:
                                y = gen.requant(acc[rr], cf, mu, sh, q)
                                if rbase is not None:
                                    r = gen.cv([0] * nl, I8)
                                    for lane in range(nl):
                                        e = b.load(b.gep(rbase, [gen.c(lane * plane_out + rr)]))
                                        r = b.insert_element(r, e, gen.c(lane, I32))
                                    y = gen.add_residual(y, r, am, rm, ash, q)
                                for lane in range(nl):
                                    e = b.extract_element(y, gen.c(lane, I32))
                                    b.store(e, b.gep(obase, [gen.c(lane * plane_out + rr)]))

                            if mr >= 2:
                                full()
                            else:  # one position a tile: byte stores (a one-lane masked store
                                tail()  # is a 4-byte write with LLVM 22)

                        def channels_of(v: Any) -> None:
                            if geo.cog % cw:
                                gen.when(
                                    b.icmp_signed("<", b.add(col0, v[0]), gen.c(geo.cog)), lambda: epi_v(*v)
                                )
                            else:
                                epi_v(*v)

                        if nv == 1:
                            channels_of((gen.c(0), tabs[0][1], tabs[0][2], rtabs[0] if rtabs else None, accs))
                        else:
                            # the epilogue once in the IR, looped over the tile's nv registers of
                            # channels, the accumulators through a stack array (allocated in the
                            # entry block): LLVM optimizes one copy instead of nv
                            slots = gen.stack_array(accs)

                            def register(v_i: Any, _: list[Any]) -> None:
                                vo = b.mul(v_i, gen.c(nl))
                                o4 = b.mul(b.add(ch0, vo), gen.c(4))
                                mu, sh = (gen.load(tb, o4, vt(I32, nl), 4) for tb in (mt, st_))
                                rt3 = None
                                if rtabs and gen.res is not None:
                                    rt_ = gen.res[1]
                                    rt3 = tuple(
                                        gen.load(rt_, b.add(o4, gen.c(4 * j * geo.cout)), vt(I32, nl), 4)
                                        for j in range(3)
                                    )
                                acc = [gen.slot(slots, b.add(gen.c(rr * nv), v_i)) for rr in range(mr)]
                                channels_of((vo, mu, sh, rt3, acc))

                            gen.loop(0, nv, register)

                    gen.loop(0, npt, ptile)

                gen.loop(ct_lo, ct_hi, cotile)

            gen.loop(0, geo.groups, group)

        gen.when(b.icmp_signed("<", r0, r1), lambda: _images(gen, geo.batch, image))
        b.ret_void()


def _concat(gen: Gen, vs: list[Any]) -> Any:
    """The vectors ``vs`` (one type) end to end, as one vector (padded with undefined lanes to a
    power-of-two count of them)."""
    vs = list(vs)
    while len(vs) > 1:
        if len(vs) % 2:
            vs.append(ir.Constant(vs[0].type, None))
        n = vs[0].type.count
        vs = [gen.b.shuffle_vector(vs[i], vs[i + 1], gen.iota(2 * n)) for i in range(0, len(vs), 2)]
    return vs[0]


def _transpose(gen: Gen, vs: list[Any], rows: int, cols: int) -> list[Any]:
    """``cols`` vectors of ``rows`` bytes from ``rows`` vectors of ``cols`` bytes (``vs[i][j]`` is
    ``out[j][i]``): one shuffle of their concatenation into the transposed order, then its
    consecutive pieces (cheaper for LLVM to lower than one gathering shuffle per result)."""
    assert len(vs) == rows and all(v.type.count == cols for v in vs)
    b = gen.b
    cat = _concat(gen, vs)
    t = b.shuffle_vector(cat, cat, gen.cv([i * cols + j for j in range(cols) for i in range(rows)]))
    if rows in (2, 4, 8):  # pieces as integer lanes
        w = b.bitcast(t, vt(ir.IntType(8 * rows), cols))
        return [b.bitcast(b.extract_element(w, gen.c(j, I32)), vt(I8, rows)) for j in range(cols)]
    return [b.shuffle_vector(t, t, gen.cv(range(j * rows, (j + 1) * rows))) for j in range(cols)]


def _tap_runs(geo: ConvGeom, ra: int) -> list[tuple[int, list[tuple[int, int]]]]:
    """The taps of a depthwise kernel grouped into 4-byte windows of one phase row: ``(offset of
    the window in the channel's packed plane, [(tap index, byte in the window)])`` — a 3x3 kernel
    of stride 1 is three windows, each one ``vpdpbusd`` over 16 positions (``ra``: phase rows per
    channel in the packed plane)."""
    by_row: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for ti, (pi, ro, co) in enumerate(geo.taps):
        by_row.setdefault((pi, ro), []).append((co, ti))
    out = []
    for (pi, ro), cols in by_row.items():
        cols.sort()
        i = 0
        while i < len(cols):
            c0 = cols[i][0]
            members = []
            while i < len(cols) and cols[i][0] - c0 < 4:
                members.append((cols[i][1], cols[i][0] - c0))
                i += 1
            out.append(((pi * ra + ro) * geo.wph + c0, members))
    return out


class Int8Depthwise(LutFusion, Template):
    """INT8 depthwise convolution (group == input channels == output channels): per channel, taps
    unrolled over registers of positions in i32 lanes."""

    name = "int8-depthwise"
    priority = 10
    code_key = Int8Conv.code_key  # its ir_key (re-declared: a subclass may emit other code)

    def _geo(self, op: Any) -> tuple[ConvGeom, QuantInfo] | None:
        r = Int8Conv._geo(Int8Conv(), op)
        if r is None or not (r[0].cig == 1 and r[0].cog == 1):
            return None
        return r

    def matches(self, op: Any, isa: Isa) -> bool:
        return self._geo(op) is not None

    def ir_key(self, op: Any, isa: Isa) -> tuple[Any, ...]:
        """As :meth:`Int8Conv.ir_key`."""
        r = self._geo(op)
        assert r is not None
        return (self.name, repr(r[0]), _scalars(r[1]), fused_lut(op) is not None, isa)

    @staticmethod
    def _nv(isa: Isa) -> int:
        return 4 if isa.vector_bytes >= 32 else 2

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        nl = lanes(isa)
        nv = self._nv(isa)
        w = q.weight.reshape(geo.cout, geo.kh * geo.kw).astype(np.int8)
        wsum = w.astype(np.int64).sum(axis=1)
        runs = _tap_runs(geo, 1)
        wr = np.zeros((geo.cout, len(runs), 4), np.int8)
        for ri, (_, members) in enumerate(runs):
            for ti, pos in members:
                wr[:, ri, pos] = w[:, ti]
        weights = {"w": wr.reshape(-1), **_tables(q, wsum, geo.cout + 1)}
        ra = geo.rows_alloc(nv * nl)
        scratch = geo.groups * len(geo.phases) * ra * geo.wph + 2 * nl + 64
        macs = geo.batch * geo.cout * geo.oh * geo.ow * geo.kh * geo.kw
        nbytes = int(np.prod(op.operands[0].type.shape)) + int(np.prod(op.results[0].type.shape)) + w.size
        return _with_lut(
            op,
            symbol,
            list(BUFFERS),
            weights,
            scratch,
            macs,
            nbytes,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = self._geo(op)
        assert r is not None
        geo, q = r
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        nl = gen.nl
        nv = self._nv(isa)
        x, wp, ct, mt, st_, out, scr = gen.std_bufs(plan, q.out_signed)
        gen.fast_shift = fast_shift(q)
        ct = b.bitcast(ct, I32.as_pointer())
        mt = b.bitcast(mt, I32.as_pointer())
        st_ = b.bitcast(st_, I32.as_pointer())
        nph = len(geo.phases)
        qtl = nv * nl
        ra = geo.rows_alloc(qtl)
        scr = b.gep(scr, [b.mul(gen.part, gen.c(plan.scratch_bytes))])
        r0, r1 = gen.part_range(geo.oh)
        qend = b.mul(b.sub(r1, r0), gen.c(geo.wph))
        nqt = b.sdiv(b.add(qend, gen.c(qtl - 1)), gen.c(qtl))
        plane_out = geo.oh * geo.ow
        ch_stride = nph * ra * geo.wph
        runs = _tap_runs(geo, ra)
        run_offs = [off for off, _ in runs]

        def image(n: Any, _: list[Any]) -> None:
            _emit_pack(gen, geo, x, n, r0, scr, ra, q, 1)

            # position tiles outer (their store masks computed once), channels inner
            def qtile(qt: Any, _: list[Any]) -> None:
                q0 = b.mul(qt, gen.c(qtl))
                masks = [_store_masks(gen, geo, b.add(q0, gen.c(v * nl)), qend, r0) for v in range(nv)]

                def channel(c: Any, _: list[Any]) -> None:
                    xq = b.gep(scr, [b.add(b.mul(c, gen.c(ch_stride)), q0)])
                    wc = b.gep(wp, [b.mul(c, gen.c(len(runs) * 4))])
                    accs = [gen.cv([0] * nl, I32) for _ in range(nv)]
                    for ri, roff in enumerate(run_offs):
                        wb = gen.bcast32(wc, ri * 4, nl)
                        for v in range(nv):
                            win = gen.load(xq, roff + v * nl, vt(I8, 2 * nl))
                            u = b.shuffle_vector(
                                win, win, gen.cv([j + t for j in range(nl) for t in range(4)])
                            )
                            accs[v] = gen.dot(accs[v], u, wb)
                    cf = gen.splat(b.load(b.gep(ct, [c])), nl)
                    mu = gen.splat(b.load(b.gep(mt, [c])), nl)
                    sh = gen.splat(b.load(b.gep(st_, [c])), nl)
                    obase = b.gep(out, [b.mul(b.add(b.mul(n, gen.c(geo.cout)), c), gen.c(plane_out))])
                    for v in range(nv):
                        y = gen.requant(accs[v], cf, mu, sh, q)
                        for offs, mask in masks[v]:
                            gen.masked_store(y, obase, offs, mask)

                gen.loop(0, geo.cout, channel)

            gen.loop(0, nqt, qtile)

        gen.when(b.icmp_signed("<", r0, r1), lambda: _images(gen, geo.batch, image))
        b.ret_void()


class Int8MatMul(LutFusion, Template):
    """INT8 MatMul ``[.., M, K] x W[K, N]`` with a constant weight (per-column requant, per-axis
    inputs along K and per-axis outputs included): register-tiled, lanes along N."""

    name = "int8-matmul"
    priority = 10
    code_key = Int8Conv.code_key  # its ir_key (re-declared: a subclass may emit other code)

    def _info(self, op: Any) -> tuple[int, int, int, QuantInfo] | None:
        if not _is(op, "tpu.MatMul") or len(op.operands) != 3:
            return None
        a_t, w_t, o_t = op.operands[0].type, op.operands[1].type, op.results[0].type
        if not all(_static(t) for t in (a_t, w_t, o_t)):
            return None
        if len(w_t.shape) != 2 or len(a_t.shape) < 2:
            return None
        kdim, ncols = w_t.shape
        if a_t.shape[-1] != kdim or list(o_t.shape) != [*a_t.shape[:-1], ncols]:
            return None
        ea = _quant8(a_t)
        if ea is not None and isinstance(ea, UniformQuantizedPerAxisType) and ea.axis != len(a_t.shape) - 1:
            return None
        eo = _quant8(o_t)
        if eo is not None and isinstance(eo, UniformQuantizedPerAxisType) and eo.axis != len(o_t.shape) - 1:
            return None
        ew = _quant8(w_t)
        if ew is not None and isinstance(ew, UniformQuantizedPerAxisType) and ew.axis != 1:
            return None
        q = _quant_info(op, ncols)
        if q is None:
            return None
        mrows = int(np.prod(a_t.shape[:-1]))
        return mrows, kdim, ncols, q

    def matches(self, op: Any, isa: Isa) -> bool:
        return self._info(op) is not None

    def ir_key(self, op: Any, isa: Isa) -> tuple[Any, ...]:
        """As :meth:`Int8Conv.ir_key`."""
        r = self._info(op)
        assert r is not None
        return (self.name, r[:3], _scalars(r[3]), fused_lut(op) is not None, isa)

    def _tile(self, mrows: int, ncols: int, isa: Isa) -> tuple[int, int]:
        nl = lanes(isa)
        regs = 30 if isa.vector_bytes == 64 else 14
        if not vnni(isa):
            regs = regs // 2
        return _choose_tile(mrows, ncols, nl, regs, 6, 8)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = self._info(op)
        assert r is not None
        mrows, kdim, ncols, q = r
        nl = lanes(isa)
        mr, nv = self._tile(mrows, ncols, isa)
        kg = -(-kdim // 4)
        nt = -(-ncols // (nv * nl))
        w = np.zeros((kg * 4, nt * nv * nl), np.int8)
        w[:kdim, :ncols] = q.weight
        # [nt][kg][nv*nl][4]
        wp = w.reshape(kg, 4, nt, nv * nl).transpose(2, 0, 3, 1).copy()
        wsum = q.weight.astype(np.int64).sum(axis=0)
        weights = {"w": wp.reshape(-1), **_tables(q, wsum, nt * nv * nl)}
        scratch = (mrows + mr) * kg * 4 + 64
        nbytes = mrows * kdim + mrows * ncols + wp.size
        return _with_lut(
            op,
            symbol,
            list(BUFFERS),
            weights,
            scratch,
            mrows * kdim * ncols,
            nbytes,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = self._info(op)
        assert r is not None
        mrows, kdim, ncols, q = r
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        nl = gen.nl
        mr, nv = self._tile(mrows, ncols, isa)
        a, wp, ct, mt, st_, out, scr = gen.std_bufs(plan, q.out_signed)
        gen.fast_shift = fast_shift(q)
        ct = b.bitcast(ct, I32.as_pointer())
        mt = b.bitcast(mt, I32.as_pointer())
        st_ = b.bitcast(st_, I32.as_pointer())
        kg = -(-kdim // 4)
        k4 = kg * 4
        nt = -(-ncols // (nv * nl))
        scr = b.gep(scr, [b.mul(gen.part, gen.c(plan.scratch_bytes))])
        off = 128 if q.in_signed else 0
        # split row tiles when there are enough, else column tiles
        m_lo, m_hi, nt_lo, nt_hi = gen.matmul_split(mrows, mr, nt)

        # pack rows [m_lo, m_hi): bytes + off, kdim padded to k4 with zeros
        def pack_row(m: Any, _: list[Any]) -> None:
            src = b.gep(a, [b.mul(m, gen.c(kdim))])
            dst = b.gep(scr, [b.mul(b.sub(m, m_lo), gen.c(k4))])
            nfull = kdim // 64

            def chunk(ci: Any, _: list[Any]) -> None:
                o64 = b.mul(ci, gen.c(64))
                v = gen.load(src, o64, vt(I8, 64))
                if off:
                    v = b.xor(v, gen.cv([off] * 64, I8))
                gen.store(v, dst, o64)

            if nfull:
                gen.loop(0, nfull, chunk)
            for k in range(nfull * 64, k4):
                if k < kdim:
                    v = b.load(b.gep(src, [gen.c(k)]))
                    if off:
                        v = b.xor(v, gen.c(off, I8))
                else:
                    v = gen.c(0, I8)
                b.store(v, b.gep(dst, [gen.c(k)]))

        gen.loop(m_lo, m_hi, pack_row)
        full_n = ncols % (nv * nl) == 0

        def ntile(ti: Any, _: list[Any]) -> None:
            wt = b.gep(wp, [b.mul(ti, gen.c(kg * nv * nl * 4))])
            ncol = b.mul(ti, gen.c(nv * nl))
            cfs = [
                gen.load(b.bitcast(ct, I8P), b.mul(b.add(ncol, gen.c(v * nl)), gen.c(4)), vt(I32, nl), 4)
                for v in range(nv)
            ]
            mus = [
                gen.load(b.bitcast(mt, I8P), b.mul(b.add(ncol, gen.c(v * nl)), gen.c(4)), vt(I32, nl), 4)
                for v in range(nv)
            ]
            shs = [
                gen.load(b.bitcast(st_, I8P), b.mul(b.add(ncol, gen.c(v * nl)), gen.c(4)), vt(I32, nl), 4)
                for v in range(nv)
            ]
            nmask = []
            if not full_n:
                for v in range(nv):
                    cols = b.add(gen.splat(b.trunc(b.add(ncol, gen.c(v * nl)), I32), nl), gen.iota(nl))
                    nmask.append(b.icmp_signed("<", cols, gen.cv([ncols] * nl)))

            def mtile(m0: Any, _: list[Any]) -> None:
                ab = b.gep(scr, [b.mul(b.sub(m0, m_lo), gen.c(k4))])

                def kstep(k: Any, accs: list[Any]) -> list[Any]:
                    wk = b.gep(wt, [b.mul(k, gen.c(nv * nl * 4))])
                    wv = [gen.load(wk, v * nl * 4, vt(I8, 4 * nl)) for v in range(nv)]
                    accs = list(accs)
                    for mm in range(mr):
                        av = gen.bcast32(ab, b.add(gen.c(mm * k4), b.mul(k, gen.c(4))), nl)
                        for v in range(nv):
                            accs[mm * nv + v] = gen.dot(accs[mm * nv + v], av, wv[v])
                    return accs

                accs = gen.loop(0, kg, kstep, [cfs[v] for _ in range(mr) for v in range(nv)])
                for mm in range(mr):
                    row = b.add(m0, gen.c(mm))

                    def epi(mm: int = mm, row: Any = row) -> None:
                        ob = b.gep(out, [b.add(b.mul(row, gen.c(ncols)), ncol)])
                        for v in range(nv):
                            y = gen.requant(accs[mm * nv + v], None, mus[v], shs[v], q)
                            if full_n:
                                gen.store(y, ob, v * nl)
                            else:
                                gen.masked_store(y, ob, v * nl, nmask[v])

                    gen.when(b.icmp_signed("<", row, m_hi), epi)

            gen.loop(m_lo, m_hi, mtile, step=mr)

        gen.loop(nt_lo, nt_hi, ntile)
        b.ret_void()


TEMPLATES: list[Template] = [Int8Conv(), Int8ConvChannels(), Int8Depthwise(), Int8MatMul()]

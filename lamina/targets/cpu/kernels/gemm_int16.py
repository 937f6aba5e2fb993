"""The CPU target's int16 x int8 GEMM: ``tpu.MatMul`` with a constant int8 weight whose input or
result is on a 16-bit grid (the ``lut16`` and ``wide_input`` forms, ``docs/tpu.md`` "Optional
integer forms"), and ``tpu.Lut16`` (a 65536-entry table gather), bit-exact with the ops'
``execute``.

**Arithmetic.** Each part packs the rows it computes as int16 ``q - zp`` (exact: an 8-bit input's
``q - zp`` and a 16-bit input's ``q``, zero point 0, both fit), K padded to even with zeros. The
weight is packed as int16 pairs ``[N/(NV*L)][K/2][NV*L][2]``; two input values broadcast over the
``L`` int32 lanes of a register and multiplied pairwise is ``vpmaddwd`` (the pair's sum cannot
overflow: ``|q| <= 32768``, ``|w| <= 128``) — fused with the accumulation into ``vpdpwssd`` on
AVX-512 VNNI / AVX-VNNI. An 8-bit input (the ``lut16`` form's pre-activation MatMul) on a VNNI
CPU runs on bytes instead, at twice the rate: ``u = q + off`` (``off`` 128 for int8, 0 for uint8)
by ``vpdpbusd`` on weights packed ``[N/(NV*L)][K/4][NV*L][4]``, ``bias - (zp + off) * Σ_k w``
folded into one per-column int32 constant, as :class:`~.gemm_int8.Int8MatMul`; only the
epilogue's bounds and store differ. The accumulators wrap modulo ``2**32`` as the contract's int32
accumulator; the bias is added with wrap. The epilogue is :func:`lamina.dialects.tpu.quantize.requantize`
in i64 lanes (``p = acc * multiplier``, ``(p + 2**(S-1) - (p < 0)) >> S``), the zero point,
saturation to the result's storage range (8 or 16 bits) and the relu bounds folded into one pair.

**Tiles and parts** as :class:`~.gemm_int8.Int8MatMul`: ``MR`` rows x ``NV`` registers of
columns; parts split the row tiles, or the column tiles when there are fewer row tiles than parts.
The last column tile's partial register is stored lane by lane (no masked store: LLVM lowered a
one-lane masked byte store to a wider write).

**Lut16**: ``y = table[q + 32768]`` — 16 (8 on AVX2) lanes at a time by a dword gather at byte
offset ``2 * (q + 32768)`` (scale 2) of the table stored as int16 (int8 results widened), 2 bytes of
padding after it, then truncated; scalar elsewhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from llvmlite import ir

from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.tpu.quantize import qparams
from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .gemm_int8 import Gen, lanes, vnni, vt, weight_requant_bias

__all__ = ["Int16MatMul", "Lut16", "TEMPLATES"]

I8 = ir.IntType(8)
I16 = ir.IntType(16)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
I8P = I8.as_pointer()


def _quant(t: Any, widths: tuple[int, ...]) -> Any:
    e = getattr(t, "element_type", None)
    if isinstance(e, (UniformQuantizedType, UniformQuantizedPerAxisType)) and e.storage_width in widths:
        return e
    return None


def _static(t: Any) -> bool:
    return isinstance(t, RankedTensorType) and all(isinstance(d, int) and d > 0 for d in t.shape)


def _is(op: Any, name: str) -> bool:
    return getattr(op, "name", None) == name


def vnni16(isa: Isa) -> bool:
    """Whether ``vpdpwssd`` is usable at the Isa's vector width."""
    if isa.vector_bytes == 64:
        return isa.has("avx512vnni")
    if isa.vector_bytes == 32:
        return isa.has("avxvnni") or (isa.has("avx512vnni") and isa.has("avx512vl"))
    return False


@dataclass
class Quant16:
    """The checked integer parameters of a MatMul this module runs: the input's width and zero
    point, the result's width, bounds and zero point, per-column multipliers and total shifts, the
    int8 weight and the int32 bias."""

    in_bits: int
    in_signed: bool
    zp_in: int
    out_bits: int
    out_signed: bool
    lo: int
    hi: int
    zp_out: int
    mult: np.ndarray
    shift: np.ndarray
    weight: np.ndarray
    bias: np.ndarray | None

    def scalars(self) -> tuple[int, bool, int, int, bool, int, int, int]:
        return (
            self.in_bits,
            self.in_signed,
            self.zp_in,
            self.out_bits,
            self.out_signed,
            self.lo,
            self.hi,
            self.zp_out,
        )


def quant16(op: Any) -> tuple[int, int, int, Quant16] | None:
    """``(rows, K, N, params)`` of a ``tpu.MatMul [.., M, K] x W[K, N]`` with a constant int8
    weight (zero point 0, per column or per tensor), an 8- or 16-bit input (per tensor, or per axis
    along K with zero points 0) and an 8- or 16-bit result (per tensor or per column, zero points
    0), one of them 16-bit; None otherwise."""
    if not _is(op, "tpu.MatMul") or len(op.operands) != 3:
        return None
    a_t, w_t, o_t = op.operands[0].type, op.operands[1].type, op.results[0].type
    if not all(_static(t) for t in (a_t, w_t, o_t)) or len(w_t.shape) != 2 or len(a_t.shape) < 2:
        return None
    kdim, ncols = w_t.shape
    if a_t.shape[-1] != kdim or list(o_t.shape) != [*a_t.shape[:-1], ncols]:
        return None
    ea, ew, eo = _quant(a_t, (8, 16)), _quant(w_t, (8,)), _quant(o_t, (8, 16))
    if ea is None or ew is None or eo is None or 16 not in (ea.storage_width, eo.storage_width):
        return None
    if ea.storage_width == 16 and not ea.signed:
        return None
    _, zx, ax, _, _ = qparams(ea)
    _, zw, aw, _, _ = qparams(ew)
    _, zo, ao, lo, hi = qparams(eo)
    if ax is not None and (ax != len(a_t.shape) - 1 or np.any(np.asarray(zx) != 0)):
        return None
    if aw is not None and aw != 1:
        return None
    if ao is not None and (ao != len(o_t.shape) - 1 or np.any(np.asarray(zo) != 0)):
        return None
    if np.any(np.asarray(zw) != 0) or not ew.signed:
        return None
    zp_in = 0 if ax is not None else int(zx)
    zp_out = 0 if ao is not None else int(zo)
    if ea.storage_width == 16 and zp_in != 0:
        return None  # q - zp must fit in int16
    p = weight_requant_bias(op, ncols, eo, zp_out, lo, hi)
    if p is None:
        return None
    w, m, s, lo_c, hi_c, bias = p
    q = Quant16(
        ea.storage_width,
        bool(ea.signed),
        zp_in,
        eo.storage_width,
        bool(eo.signed),
        lo_c,
        hi_c,
        zp_out,
        m,
        s,
        w,
        bias,
    )
    return int(np.prod(a_t.shape[:-1])), kdim, ncols, q


def _choose_tile(rows: int, cols: int, nl: int, regs: int) -> tuple[int, int]:
    """Register tile ``(MR, NV)`` (``MR*NV + NV`` of the ``regs`` registers) minimising the padded
    work weighted by the loads per multiply-add."""
    best: tuple[float, int, int] = (math.inf, 1, 1)
    for nv in range(1, 9):
        for mr in range(1, 7):
            if mr * nv + nv > regs:
                continue
            work = math.ceil(rows / mr) * mr * math.ceil(cols / (nv * nl)) * nv * nl
            cost = work * (1.0 + 0.5 * (mr + nv) / (mr * nv))
            if cost < best[0] - 1e-9:
                best = (cost, mr, nv)
    return best[1], best[2]


class Gen16(Gen):
    """:class:`~.gemm_int8.Gen` with the int16 primitives."""

    def madd(self, acc: Any, a: Any, w: Any) -> Any:
        """``acc[j] + a[2j] * w[2j] + a[2j+1] * w[2j+1]`` (int16 pairs; wrapping int32)."""
        b = self.b
        n = acc.type.count
        bits = n * 32
        if vnni16(self.isa) and bits in (256, 512):
            f = self.intrinsic(
                f"llvm.x86.avx512.vpdpwssd.{bits}", vt(I32, n), [vt(I32, n), vt(I16, 2 * n), vt(I16, 2 * n)]
            )
            return b.call(f, [acc, a, w])
        if bits == 512 and self.isa.has("avx512bw"):
            f = self.intrinsic("llvm.x86.avx512.pmaddw.d.512", vt(I32, n), [vt(I16, 2 * n)] * 2)
            return b.add(acc, b.call(f, [a, w]))
        if bits == 256 and self.isa.has("avx2"):
            f = self.intrinsic("llvm.x86.avx2.pmadd.wd", vt(I32, n), [vt(I16, 2 * n)] * 2)
            return b.add(acc, b.call(f, [a, w]))
        p = b.mul(b.sext(a, vt(I32, 2 * n)), b.sext(w, vt(I32, 2 * n)))
        ev = b.shuffle_vector(p, p, self.cv([2 * j for j in range(n)]))
        od = b.shuffle_vector(p, p, self.cv([2 * j + 1 for j in range(n)]))
        return b.add(acc, b.add(ev, od))

    def requant16(self, acc: Any, cf: Any, mult: Any, shift: Any, q: Quant16) -> Any:
        """``sat(zp + rdiv((acc + bias) * m, 2**S))`` clamped to the bounds, as ``<n x i32>``."""
        b = self.b
        n = acc.type.count
        a = b.add(acc, cf)
        p = b.mul(b.sext(a, vt(I64, n)), b.sext(mult, vt(I64, n)))
        y = self.rdiv(p, shift)
        y = self.smin(self.smax(y, self.cv([q.lo - q.zp_out] * n, I64)), self.cv([q.hi - q.zp_out] * n, I64))
        return b.add(b.trunc(y, vt(I32, n)), self.cv([q.zp_out] * n, I32))


#: the MatMul's buffers in call order
BUFFERS: list[tuple[str, Any]] = [
    ("in", 0),
    ("weight", "w"),
    ("weight", "c"),
    ("weight", "m"),
    ("weight", "s"),
    ("out", 0),
    ("scratch", None),
]


def _bytes(q: Quant16, isa: Isa) -> bool:
    """Whether the kernel runs on bytes (an 8-bit input with ``vpdpbusd``: twice the int16 rate)."""
    return q.in_bits == 8 and vnni(isa)


class Int16MatMul(Template):
    """``tpu.MatMul [.., M, K] x W[K, N]`` with a constant int8 weight and an int16 input or result
    (see the module doc)."""

    name = "int16-matmul"
    priority = 10

    def matches(self, op: Any, isa: Isa) -> bool:
        return quant16(op) is not None

    def ir_key(self, op: Any, isa: Isa) -> tuple[Any, ...]:
        r = quant16(op)
        assert r is not None
        return (self.name, r[:3], r[3].scalars(), _bytes(r[3], isa), isa)

    def _tile(self, mrows: int, ncols: int, isa: Isa) -> tuple[int, int]:
        regs = 30 if isa.vector_bytes == 64 else 14
        if not vnni16(isa):
            regs = regs // 2
        return _choose_tile(mrows, ncols, lanes(isa), regs)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = quant16(op)
        assert r is not None
        mrows, kdim, ncols, q = r
        nl = lanes(isa)
        mr, nv = self._tile(mrows, ncols, isa)
        grp = 4 if _bytes(q, isa) else 2
        kg = -(-kdim // grp)
        nt = -(-ncols // (nv * nl))
        w = np.zeros((kg * grp, nt * nv * nl), np.int8 if grp == 4 else np.int16)
        w[:kdim, :ncols] = q.weight
        wp = w.reshape(kg, grp, nt, nv * nl).transpose(2, 0, 3, 1).copy()  # [nt][kg][nv*nl][grp]
        pad = nt * nv * nl
        c = np.zeros(pad, np.int64)
        mt = np.zeros(pad, np.int32)
        st = np.full(pad, 31, np.int32)
        if q.bias is not None:
            c[:ncols] = q.bias
        if grp == 4:  # bytes u = q + off: fold -(zp + off) * sum_k w into the bias (wrapping int32)
            zpu = q.zp_in + (128 if q.in_signed else 0)
            c[:ncols] -= zpu * q.weight.astype(np.int64).sum(axis=0)
        c = (c & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
        mt[:ncols] = q.mult
        st[:ncols] = q.shift
        weights = {"w": wp.reshape(-1), "c": c, "m": mt, "s": st}
        scratch = (mrows + mr) * kg * 4 + 64
        ib, ob = q.in_bits // 8, q.out_bits // 8
        nbytes = mrows * kdim * ib + mrows * ncols * ob + wp.nbytes
        return KernelPlan(symbol, list(BUFFERS), weights, scratch, mrows * kdim * ncols, nbytes)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = quant16(op)
        assert r is not None
        mrows, kdim, ncols, q = r
        gen = Gen16(module, plan.symbol, len(plan.buffers), isa)
        b = gen.b
        nl = gen.nl
        mr, nv = self._tile(mrows, ncols, isa)
        a, wp, ct, mt, st_, out, scr = (gen.bufs[plan.buffers.index(k)] for k in BUFFERS)
        byt = _bytes(q, isa)
        grp = 4 if byt else 2
        kg = -(-kdim // grp)
        k2 = kg * grp  # packed elements per row (kg * 4 bytes)
        nt = -(-ncols // (nv * nl))
        ib, ob = q.in_bits // 8, q.out_bits // 8
        ity, oty = ir.IntType(q.in_bits), ir.IntType(q.out_bits)
        scr = b.gep(scr, [b.mul(gen.part, gen.c(plan.scratch_bytes))])
        m_lo, m_hi, nt_lo, nt_hi = gen.matmul_split(mrows, mr, nt)

        def widen(v: Any, n: int) -> Any:
            """Storage values → int16 ``q - zp``."""
            if q.in_bits == 8:
                v = b.sext(v, vt(I16, n)) if q.in_signed else b.zext(v, vt(I16, n))
            if q.zp_in:
                v = b.sub(v, gen.cv([q.zp_in] * n, I16))
            return v

        # pack rows [m_lo, m_hi) as int16 q - zp (bytes: q + off), K padded to k2 with zeros
        chunk_n = 64 if byt else 32
        eb = 1 if byt else 2  # bytes per packed element
        off = 128 if q.in_signed else 0

        def conv(v: Any, n: int) -> Any:
            if byt:
                return b.xor(v, gen.cv([off] * n, I8)) if off else v
            return widen(v, n)

        def pack_row(m: Any, _: list[Any]) -> None:
            src = b.gep(a, [b.mul(m, gen.c(kdim * ib))])
            dst = b.gep(scr, [b.mul(b.sub(m, m_lo), gen.c(k2 * eb))])
            nfull = kdim // chunk_n

            def chunk(ci: Any, _: list[Any]) -> None:
                k0 = b.mul(ci, gen.c(chunk_n))
                v = gen.load(src, b.mul(k0, gen.c(ib)), vt(ity, chunk_n))
                gen.store(conv(v, chunk_n), dst, b.mul(k0, gen.c(eb)))

            if nfull:
                gen.loop(0, nfull, chunk)
            ety = I8 if byt else I16
            for k in range(nfull * chunk_n, k2):
                if k < kdim:
                    v = b.load(gen.ptr(src, k * ib, ity))
                    v = b.extract_element(
                        conv(b.insert_element(ir.Constant(vt(ity, 1), None), v, gen.c(0, I32)), 1),
                        gen.c(0, I32),
                    )
                else:
                    v = gen.c(0, ety)
                b.store(v, gen.ptr(dst, eb * k, ety))

        gen.loop(m_lo, m_hi, pack_row)
        rem = ncols - (nt - 1) * nv * nl  # valid columns of the last tile

        def ntile(ti: Any, _: list[Any]) -> None:
            wt = b.gep(wp, [b.mul(ti, gen.c(kg * nv * nl * 4))])
            ncol = b.mul(ti, gen.c(nv * nl))

            def tab(base: Any) -> list[Any]:
                return [
                    gen.load(base, b.mul(b.add(ncol, gen.c(v * nl)), gen.c(4)), vt(I32, nl), 4)
                    for v in range(nv)
                ]

            cfs, mus, shs = tab(ct), tab(mt), tab(st_)
            last = b.icmp_signed("==", ti, gen.c(nt - 1))

            def mtile(m0: Any, _: list[Any]) -> None:
                ab = b.gep(scr, [b.mul(b.sub(m0, m_lo), gen.c(k2 * eb))])
                zero = gen.cv([0] * nl, I32)

                def kstep(k: Any, accs: list[Any]) -> list[Any]:
                    wk = b.gep(wt, [b.mul(k, gen.c(nv * nl * 4))])
                    lty = vt(I8, 4 * nl) if byt else vt(I16, 2 * nl)
                    wv = [gen.load(wk, v * nl * 4, lty) for v in range(nv)]
                    accs = list(accs)
                    for mm in range(mr):
                        av = b.bitcast(
                            gen.bcast32(ab, b.add(gen.c(mm * k2 * eb), b.mul(k, gen.c(4))), nl), lty
                        )
                        for v in range(nv):
                            acc = accs[mm * nv + v]
                            accs[mm * nv + v] = gen.dot(acc, av, wv[v]) if byt else gen.madd(acc, av, wv[v])
                    return accs

                accs = gen.loop(0, kg, kstep, [zero] * (mr * nv))
                for mm in range(mr):
                    row = b.add(m0, gen.c(mm))

                    def epi(mm: int = mm, row: Any = row) -> None:
                        ob_ = b.gep(out, [b.mul(b.add(b.mul(row, gen.c(ncols)), ncol), gen.c(ob))])
                        ys = [
                            b.trunc(gen.requant16(accs[mm * nv + v], cfs[v], mus[v], shs[v], q), vt(oty, nl))
                            for v in range(nv)
                        ]

                        def full() -> None:
                            for v in range(nv):
                                gen.store(ys[v], ob_, v * nl * ob)

                        if rem == nv * nl:
                            full()
                            return
                        with b.if_else(last) as (then, other):
                            with then:
                                for v in range(nv):
                                    if (v + 1) * nl <= rem:
                                        gen.store(ys[v], ob_, v * nl * ob)
                                    else:
                                        for lane in range(max(0, rem - v * nl)):
                                            e = b.extract_element(ys[v], gen.c(lane, I32))
                                            b.store(e, gen.ptr(ob_, (v * nl + lane) * ob, oty))
                            with other:
                                full()

                    gen.when(b.icmp_signed("<", row, m_hi), epi)

            gen.loop(m_lo, m_hi, mtile, step=mr)

        gen.loop(nt_lo, nt_hi, ntile)
        b.ret_void()


def lut16_table(op: Any) -> np.ndarray | None:
    """The Lut16's 65536 storage values (as the result's storage dtype) or None."""
    if not _is(op, "tpu.Lut16"):
        return None
    it, ot = op.operands[0].type, op.results[0].type
    if not (_static(it) and _static(ot)) or list(it.shape) != list(ot.shape):
        return None
    ei, eo = _quant(it, (16,)), _quant(ot, (8, 16))
    if ei is None or eo is None or not ei.signed:
        return None
    if np.asarray(op.properties["table"].to_numpy()).shape != (65536,):
        return None
    # the op's own executor on every int16 value: its table in the result's storage dtype
    return np.asarray(op.executor()([np.arange(-32768, 32768, dtype=np.int16)])[0])


class Lut16(Template):
    """``tpu.Lut16``: ``y = table[q + 32768]`` (see the module doc)."""

    name = "lut16"
    priority = 10

    def matches(self, op: Any, isa: Isa) -> bool:
        return lut16_table(op) is not None

    def ir_key(self, op: Any, isa: Isa) -> tuple[Any, ...]:
        return (self.name, int(np.prod(op.results[0].type.shape)), str(op.results[0].type.element_type), isa)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        t = lut16_table(op)
        assert t is not None
        n = int(np.prod(op.results[0].type.shape))
        tab = np.zeros(65536 + 2, np.int16)  # widened, 2 bytes of padding for the dword gather
        tab[:65536] = t.astype(np.int16)
        return KernelPlan(
            symbol,
            [("in", 0), ("weight", "table"), ("out", 0)],
            {"table": tab},
            0,
            0,
            n * (2 + t.dtype.itemsize),
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        n = int(np.prod(op.results[0].type.shape))
        eo = _quant(op.results[0].type, (8, 16))
        oty = ir.IntType(eo.storage_width)
        ob = eo.storage_width // 8
        gen = Gen(module, plan.symbol, 3, isa)
        b = gen.b
        x, tab, out = gen.bufs
        nl = 16 if isa.vector_bytes == 64 else 8 if isa.vector_bytes == 32 and isa.has("avx2") else 0
        lo, hi = gen.part_range(n)

        def scalar(i: Any, _: list[Any]) -> None:
            v = b.load(gen.ptr(x, b.mul(i, gen.c(2)), I16))
            idx = b.add(b.sext(v, I64), gen.c(32768))
            e = b.load(gen.ptr(tab, b.mul(idx, gen.c(2)), I16))
            b.store(b.trunc(e, oty) if ob == 1 else e, gen.ptr(out, b.mul(i, gen.c(ob)), oty))

        if not nl:
            gen.loop(lo, hi, scalar)
            b.ret_void()
            return
        if nl == 16:
            f = gen.intrinsic(
                "llvm.x86.avx512.gather.dpi.512",
                vt(I32, 16),
                [vt(I32, 16), I8P, vt(I32, 16), ir.IntType(16), I32],
            )
        else:
            f = gen.intrinsic(
                "llvm.x86.avx2.gather.d.d.256", vt(I32, 8), [vt(I32, 8), I8P, vt(I32, 8), vt(I32, 8), I8]
            )
        # vector body over [lo, lo + nl * ((hi - lo) // nl)), then the scalar rest
        nvec = b.sdiv(b.sub(hi, lo), gen.c(nl))
        vend = b.add(lo, b.mul(nvec, gen.c(nl)))

        def vec(j: Any, _: list[Any]) -> None:
            i = b.add(lo, b.mul(j, gen.c(nl)))
            v = gen.load(x, b.mul(i, gen.c(2)), vt(I16, nl))
            idx = b.add(b.sext(v, vt(I32, nl)), gen.cv([32768] * nl, I32))
            src = gen.cv([0] * nl, I32)
            if nl == 16:
                g = b.call(f, [src, tab, idx, ir.Constant(ir.IntType(16), -1), gen.c(2, I32)])
            else:
                g = b.call(f, [src, tab, idx, gen.cv([-1] * nl, I32), gen.c(2, I8)])
            gen.store(b.trunc(g, vt(oty, nl)), out, b.mul(i, gen.c(ob)))

        gen.loop(0, nvec, vec)
        gen.loop(vend, hi, scalar)
        b.ret_void()


TEMPLATES: list[Template] = [Int16MatMul(), Lut16()]

"""Generic compiled templates for the float normalizations and attention: ``tpu.Softmax`` (and log-softmax) along
any axis and ``tpu.LayerNorm`` over the trailing dims (without its mean / inv-std results), in F32,
F16 and BF16 (computed in f32, f64 for f64 tensors, as the float mode). One row — the ``n``
elements normalized together, ``stride`` apart — per step, the rows split between the parts:
softmax subtracts the row's max (0 when it is not finite), exponentiates, divides by the sum;
layer norm takes the mean, the mean square of the differences, ``1 / sqrt(var + eps)``, then the
scale and bias (constants packed as f32 rows). ``tpu.Attention`` (3-d or 4-d, an additive float
mask, causal, grouped heads; no KV cache, padding lengths, softcap or extra results): one query row
per step — its scores against every key in f32 (``q*sqrt(s) . k*sqrt(s)`` as the reference scales
them), the mask, the softmax, then the weighted sum of the values — in a scratch row."""

from __future__ import annotations

import math
from typing import Any

import llvmlite.ir as ir
import numpy as np

from lamina.ir.constants import constant_array, value_constant
from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .generic import _is_float, _np, _shape, _static
from .generic_ir import (
    F32,
    F64,
    I64,
    Kernel,
    compute_float,
    const,
    fconst,
    intrinsic,
    libm,
    load_float,
    storage_type,
    store_float,
)

__all__ = ["Attention", "LayerNorm", "Softmax", "pairwise_sum"]


def _rows(shape: list[int], axis: int) -> tuple[int, int, int]:
    """(outer, n, inner) of a tensor normalized along ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _reduce(k: Kernel, n: int, init: Any, step: Any) -> Any:
    """``acc = init; for i in range(n): acc = step(i, acc)``; the final value."""
    b = k.b
    pre = b.block
    cond = b.append_basic_block("red.cond")
    body = b.append_basic_block("red.body")
    end = b.append_basic_block("red.end")
    b.branch(cond)
    b.position_at_end(cond)
    i = b.phi(I64)
    acc = b.phi(init.type)
    i.add_incoming(const(0), pre)
    acc.add_incoming(init, pre)
    b.cbranch(b.icmp_signed("<", i, const(n)), body, end)
    b.position_at_end(body)
    nv = step(i, acc)
    i.add_incoming(b.add(i, const(1)), b.block)
    acc.add_incoming(nv, b.block)
    b.branch(cond)
    b.position_at_end(end)
    return acc


def pairwise_sum(k: Kernel, n: int, val: Any, t: Any, start: int = 0) -> Any:
    """numpy's pairwise summation of ``val(i)`` for ``i`` in ``[start, start + n)``, in its order (so
    that a float reduction gives numpy's bits): under 8 terms one after the other from -0.0; up to
    128, eight strided partial sums combined as ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))`` and the rest
    added one by one; above, the two halves (the first a multiple of 8) summed so and added."""
    b = k.b
    if n < 8:
        res = fconst(-0.0, t)
        for i in range(n):
            res = b.fadd(res, val(const(start + i)))
        return res
    if n <= 128:
        with b.goto_entry_block():
            acc = b.alloca(ir.ArrayType(t, 8))
        slots = [
            b.gep(acc, [ir.Constant(ir.IntType(32), 0), ir.Constant(ir.IntType(32), j)]) for j in range(8)
        ]
        for j in range(8):
            b.store(val(const(start + j)), slots[j])
        blocks = n // 8
        if blocks > 1:
            with k.loop(1, blocks, "pw") as q:
                base = b.add(const(start), b.mul(q, const(8)))
                for j in range(8):
                    b.store(b.fadd(b.load(slots[j]), val(b.add(base, const(j)))), slots[j])
        r = [b.load(p) for p in slots]
        res = b.fadd(
            b.fadd(b.fadd(r[0], r[1]), b.fadd(r[2], r[3])), b.fadd(b.fadd(r[4], r[5]), b.fadd(r[6], r[7]))
        )
        for i in range(n - n % 8, n):
            res = b.fadd(res, val(const(start + i)))
        return res
    n2 = n // 2
    n2 -= n2 % 8
    left = pairwise_sum(k, n2, val, t, start)
    return b.fadd(left, pairwise_sum(k, n - n2, val, t, start + n2))


class Softmax(Template):
    name = "generic.softmax"
    exact = False  # expf is the C library's, not numpy's

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Softmax":
            return False
        x, r = op.operands[0].type, op.results[0].type
        return _static(x) and _static(r) and _is_float(x) and _is_float(r) and len(x.shape) > 0

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        n = int(np.prod(_shape(op.operands[0].type)))
        return KernelPlan(symbol, [("in", 0), ("out", 0)], bytes=2 * n * _np(op.operands[0].type).itemsize)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        shape = _shape(op.operands[0].type)
        axis = int(op.attr("axis")) % len(shape)
        outer, n, inner = _rows(shape, axis)
        x_dt, o_dt = _np(op.operands[0].type), _np(op.results[0].type)
        ct = compute_float(x_dt)
        log = bool(op.attr("log"))
        k = Kernel(module, plan.symbol)
        b = k.b
        x = k.buf(0, storage_type(x_dt))
        out = k.buf(1, storage_type(o_dt))
        exp = libm(module, "exp" if ct == F64 else "expf", ct)
        lo, hi = k.share(outer * inner)
        with k.loop(lo, hi, "row") as row:
            base = b.add(b.mul(b.udiv(row, const(inner)), const(n * inner)), b.urem(row, const(inner)))
            xr, orow = b.gep(x, [base]), b.gep(out, [base])

            def at(p: Any, i: Any) -> Any:
                return b.gep(p, [b.mul(i, const(inner))])

            mx = _reduce(
                k,
                n,
                fconst(-math.inf, ct),
                lambda i, a: b.call(
                    intrinsic(module, "llvm.maximum", ct, 2), [a, load_float(b, at(xr, i), x_dt, ct)]
                ),
            )
            finite = b.fcmp_ordered(
                "one", b.call(intrinsic(module, "llvm.fabs", ct), [mx]), fconst(math.inf, ct)
            )
            mx = b.select(finite, mx, fconst(0.0, ct))
            total = _reduce(
                k,
                n,
                fconst(0.0, ct),
                lambda i, a: b.fadd(a, b.call(exp, [b.fsub(load_float(b, at(xr, i), x_dt, ct), mx)])),
            )
            if log:
                lt = b.call(libm(module, "log" if ct == F64 else "logf", ct), [total])
            with k.loop(0, n, "i") as i:
                e = b.fsub(load_float(b, at(xr, i), x_dt, ct), mx)
                y = b.fsub(e, lt) if log else b.fdiv(b.call(exp, [e]), total)
                store_float(b, y, at(orow, i), o_dt)
        k.finish()


class LayerNorm(Template):
    name = "generic.layernorm"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.LayerNorm":
            return False
        x, r = op.operands[0].type, op.results[0].type
        if not (_static(x) and _static(r) and _is_float(x) and _is_float(r)) or not x.shape:
            return False
        _, n, _ = self._geo(op)
        for v in op.operands[1:]:
            computed = isinstance(v.type, RankedTensorType) and value_constant(v) is None
            if computed and not (_static(v.type) and _is_float(v.type) and int(np.prod(_shape(v.type))) == n):
                return False
        return all(
            _static(t.type) and _is_float(t.type)
            for t in op.results[1:]
            if isinstance(t.type, RankedTensorType)
        )

    def _geo(self, op: Any) -> tuple[int, int, list[int]]:
        shape = _shape(op.operands[0].type)
        axis = int(op.attr("axis")) % len(shape)
        return math.prod(shape[:axis]), math.prod(shape[axis:]), shape[axis:]

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        rows, n, trail = self._geo(op)
        weights: dict[str, np.ndarray] = {}
        bufs: list[tuple[str, Any]] = [("in", 0)]
        for idx, key in ((1, "w"), (2, "b")):
            v = op.operands[idx]
            if not isinstance(v.type, RankedTensorType):
                continue
            if value_constant(v) is not None:
                a = np.asarray(constant_array(v)).astype(np.float32)
                weights[key] = np.ascontiguousarray(np.broadcast_to(a, trail).reshape(-1))
                bufs.append(("weight", key))
            else:
                bufs.append(("in", idx))
        bufs += [("out", j) for j, r in enumerate(op.results) if isinstance(r.type, RankedTensorType)]
        return KernelPlan(symbol, bufs, weights, bytes=2 * rows * n * _np(op.operands[0].type).itemsize)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        rows, n, _ = self._geo(op)
        x_dt = _np(op.operands[0].type)
        ct = compute_float(x_dt)
        eps = float(op.attr("epsilon"))
        k = Kernel(module, plan.symbol)
        b = k.b
        ptr: dict[Any, tuple[Any, Any]] = {}
        for j, (kind, key) in enumerate(plan.buffers):
            if kind == "weight":
                ptr[key] = (k.buf(j, F32), np.dtype(np.float32))
            elif kind == "in" and key > 0:
                dt = _np(op.operands[key].type)
                ptr["w" if key == 1 else "b"] = (k.buf(j, storage_type(dt)), dt)
            elif kind == "out":
                dt = _np(op.results[key].type)
                ptr[("out", key)] = (k.buf(j, storage_type(dt)), dt)
        x = k.buf(0, storage_type(x_dt))
        out, o_dt = ptr[("out", 0)]
        lo, hi = k.share(rows)
        with k.loop(lo, hi, "row") as row:
            xr, orow = b.gep(x, [b.mul(row, const(n))]), b.gep(out, [b.mul(row, const(n))])
            # the sums in numpy's pairwise order: the mean and variance numpy's mean gives, bit for bit
            s = pairwise_sum(k, n, lambda i: load_float(b, b.gep(xr, [i]), x_dt, ct), ct)
            mean = b.fdiv(s, fconst(n, ct))

            def sq(i: Any) -> Any:
                d = b.fsub(load_float(b, b.gep(xr, [i]), x_dt, ct), mean)
                return b.fmul(d, d)

            var = b.fdiv(pairwise_sum(k, n, sq, ct), fconst(n, ct))
            inv = b.fdiv(
                fconst(1.0, ct), b.call(intrinsic(module, "llvm.sqrt", ct), [b.fadd(var, fconst(eps, ct))])
            )
            for j, v in ((1, mean), (2, inv)):
                if ("out", j) in ptr:
                    p, dt = ptr[("out", j)]
                    store_float(b, b.fptrunc(v, F32) if v.type == F64 else v, b.gep(p, [row]), dt)
            with k.loop(0, n, "i") as i:
                y = b.fmul(b.fsub(load_float(b, b.gep(xr, [i]), x_dt, ct), mean), inv)
                if "w" in ptr:
                    p, dt = ptr["w"]
                    y = b.fmul(y, load_float(b, b.gep(p, [i]), dt, ct))
                if "b" in ptr:
                    p, dt = ptr["b"]
                    y = b.fadd(y, load_float(b, b.gep(p, [i]), dt, ct))
                store_float(b, y, b.gep(orow, [i]), o_dt)
        k.finish()


class Attention(Template):
    name = "generic.attention"
    exact = False

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Attention":
            return False
        q, k, v, mask, pk, pv, npad = op.operands
        if any(isinstance(x.type, RankedTensorType) for x in (pk, pv, npad)):
            return False
        if any(isinstance(r.type, RankedTensorType) for r in op.results[1:]):
            return False
        if (op.attr("softcap") or 0) > 0 or op.attr("softmax_precision") is not None:
            return False
        ts = [q.type, k.type, v.type, op.results[0].type]
        if not all(_static(t) and _is_float(t) for t in ts) or len(q.type.shape) not in (3, 4):
            return False
        if isinstance(mask.type, RankedTensorType):
            if not (_static(mask.type) and _is_float(mask.type)) or len(mask.type.shape) > 4:
                return False
            if mask.type.shape[-1] != self._dims(op)["skv"]:
                return False
        d = self._dims(op)
        return d["hq"] % d["hk"] == 0

    def _dims(self, op: Any) -> dict[str, Any]:
        qs, ks, vs = (_shape(op.operands[i].type) for i in range(3))
        if len(qs) == 3:
            hq, hk = int(op.attr("q_num_heads")), int(op.attr("kv_num_heads"))
            b, sq, skv = qs[0], qs[1], ks[1]
            d, dv = qs[2] // hq, vs[2] // hk

            def st3(s: int, h: int, e: int) -> list[int]:  # (b, h, row, elem) of a (B, S, H*E) tensor
                return [s * h * e, e, h * e, 1]

            sq_, sk_, sv_, so_ = st3(sq, hq, d), st3(skv, hk, d), st3(skv, hk, dv), st3(sq, hq, dv)
        else:
            b, hq, sq, d = qs
            hk, skv, dv = ks[1], ks[2], vs[3]
            sq_, sk_, sv_, so_ = (
                [hq * sq * d, sq * d, d, 1],
                [hk * skv * d, skv * d, d, 1],
                [hk * skv * dv, skv * dv, dv, 1],
                [hq * sq * dv, sq * dv, dv, 1],
            )
        return dict(b=b, hq=hq, hk=hk, sq=sq, skv=skv, d=d, dv=dv, q=sq_, k=sk_, v=sv_, o=so_)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        g = self._dims(op)
        bufs: list[tuple[str, Any]] = [("in", 0), ("in", 1), ("in", 2)]
        if isinstance(op.operands[3].type, RankedTensorType):
            bufs.append(("in", 3))
        bufs += [("out", 0), ("scratch", None)]
        macs = g["b"] * g["hq"] * g["sq"] * g["skv"] * (g["d"] + g["dv"])
        return KernelPlan(symbol, bufs, scratch_bytes=(g["skv"] + g["dv"]) * 4, macs=macs)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from .generic_ir import broadcast_strides

        g = self._dims(op)
        dts = [_np(op.operands[i].type) for i in range(3)]
        o_dt = _np(op.results[0].type)
        has_mask = isinstance(op.operands[3].type, RankedTensorType)
        m_dt = _np(op.operands[3].type) if has_mask else None
        scale = op.attr("scale")
        scale = 1.0 / math.sqrt(g["d"]) if scale is None else float(scale)
        s = float(np.float32(math.sqrt(scale)))
        causal = bool(op.attr("is_causal"))
        k = Kernel(module, plan.symbol)
        b = k.b
        qp, kp, vp = (k.buf(i, storage_type(dts[i])) for i in range(3))
        mp = k.buf(3, storage_type(m_dt)) if has_mask else None
        j0 = 4 if has_mask else 3
        out = k.buf(j0, storage_type(o_dt))
        scr = b.gep(k.buf(j0 + 1, F32), [b.mul(k.part, const(g["skv"] + g["dv"]))])
        srow, acc = scr, b.gep(scr, [const(g["skv"])])
        mst = (
            broadcast_strides(_shape(op.operands[3].type), [g["b"], g["hq"], g["sq"], g["skv"]])
            if has_mask
            else None
        )
        rep = g["hq"] // g["hk"]
        lo, hi = k.share(g["b"] * g["hq"] * g["sq"])
        sc = fconst(s)

        def off(st: list[int], bi: Any, h: Any, i: Any) -> Any:
            return b.add(b.add(b.mul(bi, const(st[0])), b.mul(h, const(st[1]))), b.mul(i, const(st[2])))

        with k.loop(lo, hi, "row") as row:
            i = b.urem(row, const(g["sq"]))
            bh = b.udiv(row, const(g["sq"]))
            h = b.urem(bh, const(g["hq"]))
            bi = b.udiv(bh, const(g["hq"]))
            hk = b.udiv(h, const(rep))
            qrow = b.gep(qp, [off(g["q"], bi, h, i)])
            with k.loop(0, g["skv"], "j") as j:
                krow = b.gep(kp, [off(g["k"], bi, hk, j)])

                def dot(t: Any, a: Any, krow: Any = krow) -> Any:
                    x = b.fmul(load_float(b, b.gep(qrow, [t]), dts[0], F32), sc)
                    y = b.fmul(load_float(b, b.gep(krow, [t]), dts[1], F32), sc)
                    return b.fadd(a, b.fmul(x, y))

                sco = _reduce(k, g["d"], fconst(0.0), dot)
                if mp is not None and mst is not None:
                    mo = b.add(off(mst, bi, h, i), b.mul(j, const(mst[3])))
                    sco = b.fadd(sco, load_float(b, b.gep(mp, [mo]), m_dt, F32))
                if causal:
                    sco = b.select(b.icmp_signed(">", j, i), fconst(-math.inf), sco)
                b.store(sco, b.gep(srow, [j]))
            mx = _reduce(
                k,
                g["skv"],
                fconst(-math.inf),
                lambda t, a: b.call(intrinsic(module, "llvm.maximum", F32, 2), [a, b.load(b.gep(srow, [t]))]),
            )
            finite = b.fcmp_ordered(
                "one", b.call(intrinsic(module, "llvm.fabs", F32), [mx]), fconst(math.inf)
            )
            mx = b.select(finite, mx, fconst(0.0))
            exp = libm(module, "expf", F32)

            def ex(t: Any, a: Any) -> Any:
                p = b.gep(srow, [t])
                e = b.call(exp, [b.fsub(b.load(p), mx)])
                b.store(e, p)
                return b.fadd(a, e)

            total = _reduce(k, g["skv"], fconst(0.0), ex)
            with k.loop(0, g["dv"], "z") as z:
                b.store(fconst(0.0), b.gep(acc, [z]))
            with k.loop(0, g["skv"], "j2") as j:
                pj = b.fdiv(b.load(b.gep(srow, [j])), total)
                vrow = b.gep(vp, [off(g["v"], bi, hk, j)])
                with k.loop(0, g["dv"], "e") as e:
                    ap = b.gep(acc, [e])
                    b.store(b.fadd(b.load(ap), b.fmul(pj, load_float(b, b.gep(vrow, [e]), dts[2], F32))), ap)
            orow = b.gep(out, [off(g["o"], bi, h, i)])
            with k.loop(0, g["dv"], "e2") as e:
                store_float(b, b.load(b.gep(acc, [e])), b.gep(orow, [e]), o_dt)
        k.finish()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [Softmax(), LayerNorm(), Attention()]

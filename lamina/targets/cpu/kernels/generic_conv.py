"""Generic compiled templates for the linear-algebra, pooling and reduction ops, in every mode: the
fallback of the fast templates (correct for every shape; loops the vectorizer takes).

* ``generic.conv`` — ``tpu.Conv`` 1-d/2-d, any groups (depthwise included), strides, dilations and
  pads: one output channel's plane per step (the parts share the ``N x OC`` planes), accumulated
  in a scratch row of f32 (float modes) or i32 (INT8: ``(q_x - zp_x) (q_w - zp_w)``, wrapping as
  the int32 register does) over input channel x kernel tap, the innermost loop over the output
  row; the epilogue adds the bias, applies relu / relu_limit (INT8: after the per-channel
  requantization, in the integer domain) and stores the result type;
* ``generic.matmul`` — ``tpu.MatMul`` with batch broadcasting, a constant or computed right operand,
  a bias of ``N`` values: a row of ``N`` accumulators per output row;
* ``generic.pool`` — ``tpu.MaxPool`` (float, and INT8 on the storage integers), ``tpu.AvgPool``
  (float; INT8: window sums of ``q - zp`` requantized, padding counted in the window);
* ``generic.reduce`` — ``tpu.Reduce`` Mean/Max/Min (INT8 and float) and Sum (float) over axes
  that coalesce into one strided run.

Weights are packed at compile time: float weights widened to f32, INT8 weights centred on their
zero points as i16."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import llvmlite.ir as ir
import numpy as np

from lamina.ir.constants import constant_array, value_constant
from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .generic import LutEpilogue, _is_float, _np, _quant, _shape, _static
from .generic_ir import (
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    Kernel,
    clamp_i64,
    coalesce,
    compute_float,
    const,
    contiguous_strides,
    emit_strided,
    fconst,
    intrinsic,
    load_float,
    load_int,
    rounding_rshift,
    storage_type,
    store_float,
    store_int,
)

__all__ = ["Conv", "ConvOC", "MatMul", "Pool", "Reduce"]


def _max(b: ir.IRBuilder, x: Any, y: Any) -> Any:
    return b.select(b.icmp_signed(">", x, y), x, y)


def _min(b: ir.IRBuilder, x: Any, y: Any) -> Any:
    return b.select(b.icmp_signed("<", x, y), x, y)


def _relu_q(op: Any, out_t: Any) -> tuple[int | None, int | None]:
    """The integer relu clamp of an INT8 op: (lower, upper) in the output's storage (None: none)."""
    from lamina.dialects.tpu.families.common import zp
    from lamina.dialects.tpu.quantize import qparams, round_half_away

    if not op.attr("do_relu"):
        return None, None
    z = zp(out_t)
    limit = op.attr("relu_limit")
    if limit is not None and limit > 0:
        scale = float(qparams(out_t)[0])
        return z, z + int(round_half_away(np.float64(limit / scale)))
    return z, None


def _requant_epilogue(b: ir.IRBuilder, acc32: Any, m: Any, s: Any, op: Any, out_t: Any) -> Any:
    """int32 ``acc32`` → the stored integer: ``clip(zp + rdiv(acc * m, 2**s))``, then the relu clamp."""
    from lamina.dialects.tpu.families.common import bounds, zp

    lo, hi = bounds(out_t)
    y = b.add(rounding_rshift(b, b.mul(b.sext(acc32, I64), m), s), const(zp(out_t)))
    y = clamp_i64(b, y, lo, hi)
    rl, rh = _relu_q(op, out_t)
    if rl is not None:
        y = _max(b, y, const(rl))
    if rh is not None:
        y = _min(b, y, const(rh))
    return y


def _float_relu(b: ir.IRBuilder, m: ir.Module, v: Any, op: Any) -> Any:
    if not op.attr("do_relu"):
        return v
    t = v.type
    v = b.call(intrinsic(m, "llvm.maximum", t, 2), [v, fconst(0.0, t)])
    limit = op.attr("relu_limit")
    if limit is not None and limit > 0:
        v = b.call(intrinsic(m, "llvm.minimum", t, 2), [v, fconst(float(np.float32(limit)), t)])
    return v


def _int_params(op: Any) -> tuple[np.ndarray, np.ndarray]:
    from lamina.dialects.tpu.families.common import mult_props

    m, s = mult_props(op)
    return np.asarray(m, np.int64).reshape(-1), (31 + np.asarray(s, np.int64)).reshape(-1)


#: the geometry a generic conv reads at run time (``weights["geo"]``, i64), in this order
GEO = ("N", "C", "H", "W", "OC", "OH", "OW", "KH", "KW", "SH", "SW", "DH", "DW", "PH", "PW", "ICG", "OCG")
#: then, INT8: input and output zero points, output bounds, relu clamps (-2**62 / 2**62: none);
#: float: relu (0/1) and relu_limit (as f64 bits, <= 0: none)
QGEO = ("ZX", "ZO", "LO", "HI", "RL", "RH")


class Conv(Template):
    """The generic convolution. Its code depends only on the storage types and on whether a bias is
    present; the geometry is read at run time from a small weight array, so every conv of a model
    in one mode shares one LLVM function (compile time)."""

    name = "generic.conv"

    def exact_for(self, op: Any) -> bool:
        return _quant(op.input.type)  # integer accumulation; float sums in another order

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Conv":
            return False
        x, w, r = op.input.type, op.filter.type, op.output.type
        if not (_static(x) and _static(w) and _static(r)) or len(x.shape) not in (3, 4):
            return False
        if value_constant(op.filter) is None:
            return False
        q = _quant(x)
        if q:
            return _quant(w) and _quant(r) and op.attr("multiplier") is not None
        return _is_float(x) and _is_float(w) and _is_float(r)

    def _geo(self, op: Any) -> dict[str, int]:
        xs, ws = _shape(op.input.type), _shape(op.filter.type)
        rs = _shape(op.output.type)
        if len(xs) == 3:
            k, s, d, p = op.geometry(xs, ws)
            xs, ws, rs = [xs[0], xs[1], 1, xs[2]], [ws[0], ws[1], 1, ws[2]], [rs[0], rs[1], 1, rs[2]]
            k, s, d, p = [1, k[0]], [1, s[0]], [1, d[0]], [0, p[0], 0, p[1]]
        else:
            k, s, d, p = op.geometry(xs, ws)
        g = int(op.attr("group"))
        vals = [
            xs[0],
            xs[1],
            xs[2],
            xs[3],
            rs[1],
            rs[2],
            rs[3],
            k[0],
            k[1],
            s[0],
            s[1],
            d[0],
            d[1],
            p[0],
            p[1],
        ]
        return dict(zip(GEO, [*vals, xs[1] // g, rs[1] // g]))

    def _params(self, op: Any) -> np.ndarray:
        from lamina.dialects.tpu.families.common import bounds, zp

        geo = self._geo(op)
        vals = [geo[k] for k in GEO]
        if _quant(op.input.type):
            out_t = op.output.type
            lo, hi = bounds(out_t)
            rl, rh = _relu_q(op, out_t)
            vals += [
                zp(op.input.type),
                zp(out_t),
                lo,
                hi,
                -(2**62) if rl is None else rl,
                2**62 if rh is None else rh,
            ]
        else:
            limit = op.attr("relu_limit")
            lim = float(np.float32(limit)) if op.attr("do_relu") and limit is not None and limit > 0 else -1.0
            vals += [1 if op.attr("do_relu") else 0, int(np.float64(lim).view(np.int64))]
        return np.asarray(vals, np.int64)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        from lamina.dialects.tpu.quantize import qparams

        geo = self._geo(op)
        w = np.asarray(constant_array(op.filter))
        weights: dict[str, np.ndarray] = {"geo": self._params(op)}
        q = _quant(op.input.type)
        if q:
            wzp = qparams(op.filter.type)[1]
            wc = w.astype(np.int64) - (
                np.asarray(wzp).reshape((-1,) + (1,) * (w.ndim - 1)) if np.ndim(wzp) else int(wzp)
            )
            weights["w"] = np.ascontiguousarray(wc.astype(np.int16))
            m, s = _int_params(op)
            oc = geo["OC"]
            weights["m"] = np.broadcast_to(m, (oc,)).astype(np.int64)
            weights["s"] = np.broadcast_to(s, (oc,)).astype(np.int64)
            if isinstance(op.bias.type, RankedTensorType):
                weights["b"] = np.asarray(constant_array(op.bias)).astype(np.int32).reshape(-1)
        else:
            weights["w"] = np.ascontiguousarray(w.astype(np.float32))
            if isinstance(op.bias.type, RankedTensorType):
                weights["b"] = np.asarray(constant_array(op.bias)).astype(np.float32).reshape(-1)
        bufs: list[tuple[str, Any]] = (
            [("in", 0)] + [("weight", k) for k in weights] + [("out", 0), ("scratch", None)]
        )
        macs = geo["N"] * geo["OC"] * geo["OH"] * geo["OW"] * geo["ICG"] * geo["KH"] * geo["KW"]
        return KernelPlan(symbol, bufs, weights, scratch_bytes=geo["OH"] * geo["OW"] * 4, macs=macs)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        b = k.b
        io = self._bind(k, plan, op)
        q, x_dt, g, x, w, keys = io.q, io.x_dt, io.g, io.x, io.w, io.keys
        acc_t = I32 if q else F32
        scratch = k.buf(2 + len(keys), acc_t)
        plane = b.mul(g["OH"], g["OW"])
        acc = b.gep(scratch, [b.mul(k.part, plane)])
        hw = b.mul(g["H"], g["W"])
        khw = b.mul(g["KH"], g["KW"])
        lo, hi = k.share(b.mul(g["N"], g["OC"]))
        with k.loop(lo, hi, "row") as row:
            n = b.udiv(row, g["OC"])
            oc = b.urem(row, g["OC"])
            grp = b.udiv(oc, g["OCG"])
            with k.loop(0, plane, "z") as z:
                b.store(ir.Constant(acc_t, 0), b.gep(acc, [z]))
            with k.loop(0, g["ICG"], "ic") as ic:
                cin = b.add(b.mul(grp, g["ICG"]), ic)
                xbase = b.gep(x, [b.mul(b.add(b.mul(n, g["C"]), cin), hw)])
                wbase = b.gep(w, [b.mul(b.add(b.mul(oc, g["ICG"]), ic), khw)])
                with k.loop(0, g["KH"], "kh") as kh, k.loop(0, g["KW"], "kw") as kw:
                    wp = b.gep(wbase, [b.add(b.mul(kh, g["KW"]), kw)])
                    wv = b.sext(b.load(wp), I32) if q else b.load(wp)
                    # the output columns whose input column iw = ow*SW + off lies inside the row
                    off = b.sub(b.mul(kw, g["DW"]), g["PW"])
                    ow_lo = _max(b, const(0), _ceil_div(b, b.sub(const(0), off), g["SW"]))
                    ow_hi = _min(
                        b,
                        g["OW"],
                        b.add(_floor_div_v(b, b.sub(b.sub(g["W"], const(1)), off), g["SW"]), const(1)),
                    )
                    with k.loop(0, g["OH"], "oh") as oh:
                        ih = b.add(b.sub(b.mul(oh, g["SH"]), g["PH"]), b.mul(kh, g["DH"]))
                        inside = b.and_(b.icmp_signed(">=", ih, const(0)), b.icmp_signed("<", ih, g["H"]))
                        with b.if_then(inside):
                            xrow = b.gep(xbase, [b.add(b.mul(ih, g["W"]), off)])
                            arow = b.gep(acc, [b.mul(oh, g["OW"])])
                            with k.loop(ow_lo, ow_hi, "ow") as ow:
                                xp = b.gep(xrow, [b.mul(ow, g["SW"])])
                                ap = b.gep(arow, [ow])
                                if q:
                                    xv = b.trunc(b.sub(load_int(b, xp, x_dt), g["ZX"]), I32)
                                    b.store(b.add(b.load(ap), b.mul(xv, wv)), ap)
                                else:
                                    xv = load_float(b, xp, x_dt, F32)
                                    b.store(b.fadd(b.load(ap), b.fmul(xv, wv)), ap)
            obase = b.gep(io.out, [b.mul(row, plane)])
            per_oc = self._channel(k, io, oc)  # hoisted out of the plane loop
            with k.loop(0, plane, "p") as p:
                self._store(k, module, io, b.load(b.gep(acc, [p])), per_oc, b.gep(obase, [p]))
        k.finish()

    def _bind(self, k: Kernel, plan: KernelPlan, op: Any) -> SimpleNamespace:
        """The kernel's buffers and run-time geometry (``g``), and the float relu flags."""
        b = k.b
        q = _quant(op.input.type)
        keys = list(plan.weights)
        x_dt = _np(op.input.type)
        gp = k.buf(1 + keys.index("geo"), I64)
        names = GEO + (QGEO if q else ("RELU", "LIMIT"))
        g = {n: b.load(b.gep(gp, [const(i)]), name=n.lower()) for i, n in enumerate(names)}
        io = SimpleNamespace(q=q, keys=keys, x_dt=x_dt, out_dt=_np(op.output.type), g=g)
        io.x = k.buf(0, storage_type(x_dt))
        io.w = k.buf(1 + keys.index("w"), I16 if q else F32)
        io.bias = k.buf(1 + keys.index("b"), I32 if q else F32) if "b" in keys else None
        io.mv = k.buf(1 + keys.index("m"), I64) if q else None
        io.sv = k.buf(1 + keys.index("s"), I64) if q else None
        io.out = k.buf(1 + len(keys), storage_type(io.out_dt))
        if not q:
            io.relu = b.icmp_signed("!=", g["RELU"], const(0))
            io.limit = b.fptrunc(b.bitcast(g["LIMIT"], ir.DoubleType()), F32)
            io.has_limit = b.fcmp_ordered(">", io.limit, fconst(0.0))
        return io

    def _channel(self, k: Kernel, io: SimpleNamespace, oc: Any) -> tuple[Any, Any, Any]:
        """Output channel ``oc``'s bias, multiplier and shift (None where absent)."""
        b = k.b
        bv = b.load(b.gep(io.bias, [oc])) if io.bias is not None else None
        if not io.q:
            return bv, None, None
        return bv, b.load(b.gep(io.mv, [oc])), b.load(b.gep(io.sv, [oc]))

    def _store(
        self,
        k: Kernel,
        module: Any,
        io: SimpleNamespace,
        a: Any,
        per_oc: tuple[Any, Any, Any],
        dst: Any,
        lut: Any = None,
    ) -> None:
        """The epilogue: + bias; INT8 ``clip(zp + rdiv(a * m, 2**s))`` and the relu clamps (then a
        fused Lut: ``(table, ...)`` as :meth:`LutEpilogue.store_lut` takes), float relu /
        relu_limit; store the result type at ``dst``."""
        b, g = k.b, io.g
        bv, m, s = per_oc
        if bv is not None:
            a = b.add(a, bv) if io.q else b.fadd(a, bv)
        if io.q:
            y = b.add(rounding_rshift(b, b.mul(b.sext(a, I64), m), s), g["ZO"])
            y = _max(b, _min(b, y, g["HI"]), g["LO"])
            y = _min(b, _max(b, y, g["RL"]), g["RH"])
            if lut is not None:
                self.store_lut(b, y, lut[0], lut[1], dst, lut[2])  # type: ignore[attr-defined]
            else:
                store_int(b, y, dst, io.out_dt)
            return
        r = b.call(intrinsic(module, "llvm.maximum", F32, 2), [a, fconst(0.0)])
        r = b.select(
            b.and_(io.relu, io.has_limit), b.call(intrinsic(module, "llvm.minimum", F32, 2), [r, io.limit]), r
        )
        store_float(b, b.select(io.relu, r, a), dst, io.out_dt)


class ConvOC(LutEpilogue, Conv):
    """The generic convolution with the output channels innermost: per output pixel, a row of
    ``OC`` accumulators takes ``x[ic, ih, iw] * w[ic, kh, kw, :]`` for every tap (weights packed
    ``[G, ICg*KH*KW, OCg]``): long contiguous vector loops whatever the spatial size, for the convs
    with at least 8 output channels per group (depthwise convs keep :class:`Conv`)."""

    name = "generic.conv_oc"
    priority = 1

    def matches(self, op: Any, isa: Isa) -> bool:
        if not super().matches(op, isa):
            return False
        geo = self._geo(op)
        return geo["OCG"] >= 8

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        p = super().plan(op, symbol, isa)
        geo = self._geo(op)
        w = p.weights["w"]
        g, ocg = geo["G"] if "G" in geo else geo["C"] // geo["ICG"], geo["OCG"]
        # [OC, ICg, KH, KW] -> [G, ICg*KH*KW, OCg]
        p.weights["w"] = np.ascontiguousarray(
            w.reshape(g, ocg, geo["ICG"] * geo["KH"] * geo["KW"]).transpose(0, 2, 1)
        )
        p.scratch_bytes = geo["OC"] * 4
        lut = self.lut(op) if _quant(op.input.type) else None
        if lut is not None:  # a fused tpu.Lut: its table, before the output in the buffers
            p.weights["lut"] = lut[0]
            p.buffers.insert(p.buffers.index(("out", 0)), ("weight", "lut"))
        return p

    def fuses(self, op: Any, consumer: Any) -> bool:
        return _quant(op.input.type) and super().fuses(op, consumer)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        b = k.b
        io = self._bind(k, plan, op)
        q, x_dt, g, x, w, keys = io.q, io.x_dt, io.g, io.x, io.w, io.keys
        lut = self.lut(op) if q else None
        tp = k.buf(1 + keys.index("lut"), I8) if lut is not None else None
        acc_t = I32 if q else F32
        acc = b.gep(k.buf(2 + len(keys), acc_t), [b.mul(k.part, g["OC"])])
        hw = b.mul(g["H"], g["W"])
        taps = b.mul(b.mul(g["ICG"], g["KH"]), g["KW"])
        ngroups = b.udiv(g["OC"], g["OCG"])
        plane = b.mul(g["OH"], g["OW"])
        lo, hi = k.share(b.mul(g["N"], g["OH"]))
        with k.loop(lo, hi, "row") as row:
            n = b.udiv(row, g["OH"])
            oh = b.urem(row, g["OH"])
            with k.loop(0, g["OW"], "ow") as ow:
                with k.loop(0, g["OC"], "z") as z:
                    b.store(ir.Constant(acc_t, 0), b.gep(acc, [z]))
                with k.loop(0, ngroups, "grp") as grp, k.loop(0, g["ICG"], "ic") as ic:
                    cin = b.add(b.mul(grp, g["ICG"]), ic)
                    xbase = b.gep(x, [b.mul(b.add(b.mul(n, g["C"]), cin), hw)])
                    agrp = b.gep(acc, [b.mul(grp, g["OCG"])])
                    wgrp = b.gep(w, [b.mul(b.mul(grp, taps), g["OCG"])])
                    with k.loop(0, g["KH"], "kh") as kh:
                        ih = b.add(b.sub(b.mul(oh, g["SH"]), g["PH"]), b.mul(kh, g["DH"]))
                        in_h = b.and_(b.icmp_signed(">=", ih, const(0)), b.icmp_signed("<", ih, g["H"]))
                        with b.if_then(in_h), k.loop(0, g["KW"], "kw") as kw:
                            iw = b.add(b.sub(b.mul(ow, g["SW"]), g["PW"]), b.mul(kw, g["DW"]))
                            in_w = b.and_(b.icmp_signed(">=", iw, const(0)), b.icmp_signed("<", iw, g["W"]))
                            with b.if_then(in_w):
                                xp = b.gep(xbase, [b.add(b.mul(ih, g["W"]), iw)])
                                if q:
                                    xv = b.trunc(b.sub(load_int(b, xp, x_dt), g["ZX"]), I32)
                                else:
                                    xv = load_float(b, xp, x_dt, F32)
                                tap = b.add(b.mul(b.add(b.mul(ic, g["KH"]), kh), g["KW"]), kw)
                                wrow = b.gep(wgrp, [b.mul(tap, g["OCG"])])
                                with k.loop(0, g["OCG"], "o") as o:
                                    ap = b.gep(agrp, [o])
                                    wv = b.load(b.gep(wrow, [o]))
                                    if q:
                                        b.store(b.add(b.load(ap), b.mul(xv, b.sext(wv, I32))), ap)
                                    else:
                                        b.store(b.fadd(b.load(ap), b.fmul(xv, wv)), ap)
                pix = b.add(b.mul(oh, g["OW"]), ow)
                obase = b.gep(io.out, [b.add(b.mul(b.mul(n, g["OC"]), plane), pix)])
                with k.loop(0, g["OC"], "oc") as oc:
                    fused = (tp, lut[1], lut[2]) if lut is not None else None
                    dst = b.gep(obase, [b.mul(oc, plane)])
                    self._store(k, module, io, b.load(b.gep(acc, [oc])), self._channel(k, io, oc), dst, fused)
        k.finish()


def _floor_div_v(b: ir.IRBuilder, a: Any, s: Any) -> Any:
    """floor(a / s) for i64 ``a`` of any sign and a positive i64 ``s``."""
    q = b.sdiv(a, s)
    fix = b.and_(b.icmp_signed("<", a, const(0)), b.icmp_signed("!=", b.mul(q, s), a))
    return b.sub(q, b.zext(fix, I64))


def _ceil_div(b: ir.IRBuilder, a: Any, s: Any) -> Any:
    """ceil(a / s) = -floor(-a / s)."""
    return b.sub(const(0), _floor_div_v(b, b.sub(const(0), a), s))


class MatMul(Template):
    name = "generic.matmul"

    def exact_for(self, op: Any) -> bool:
        return _quant(op.input.type)

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.MatMul":
            return False
        a, w, r = op.input.type, op.right.type, op.output.type
        if not (_static(a) and _static(w) and _static(r)) or not a.shape or not w.shape:
            return False
        n = w.shape[-1] if len(w.shape) > 1 else 1
        if isinstance(op.bias.type, RankedTensorType) and (
            value_constant(op.bias) is None
            or int(np.prod(op.bias.type.shape)) != n
            or op.bias.type.shape[-1] != n
        ):
            return False
        if _quant(a):
            return _quant(w) and _quant(r) and op.attr("multiplier") is not None
        return _is_float(a) and _is_float(w) and _is_float(r)

    def _dims(self, op: Any) -> tuple[list[int], int, int, int, list[int], list[int]]:
        a, w = _shape(op.input.type), _shape(op.right.type)
        a = [1, *a] if len(a) == 1 else a  # numpy's promotion of vectors: the same bytes
        w = [*w, 1] if len(w) == 1 else w
        nb = max(len(a), len(w)) - 2
        r = [*_shape(op.output.type)]
        r = [*r[:nb], a[-2], w[-1]]
        batch = r[:-2]
        mm, kk_, nn_ = a[-2], a[-1], w[-1]
        from .generic_ir import broadcast_strides

        sa = broadcast_strides(a[:-2], batch) if batch else []
        sb = broadcast_strides(w[:-2], batch) if batch else []
        return batch, mm, kk_, nn_, [x * mm * kk_ for x in sa], [x * kk_ * nn_ for x in sb]

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        from lamina.dialects.tpu.quantize import qparams

        batch, mm, kk_, nn_, _, _ = self._dims(op)
        q = _quant(op.input.type)
        weights: dict[str, np.ndarray] = {}
        bufs: list[tuple[str, Any]] = [("in", 0)]
        wconst = value_constant(op.right) is not None
        if wconst:
            wa = np.asarray(constant_array(op.right))
            if q:
                _, wzp, axis, _, _ = qparams(op.right.type)
                if axis is not None:
                    shape = [1] * wa.ndim
                    shape[axis] = -1
                    wc = wa.astype(np.int64) - np.asarray(wzp).reshape(shape)
                else:
                    wc = wa.astype(np.int64) - int(wzp)
                weights["w"] = np.ascontiguousarray(wc.astype(np.int16))
            else:
                weights["w"] = np.ascontiguousarray(wa.astype(np.float32))
            bufs.append(("weight", "w"))
        else:
            bufs.append(("in", 1))
        if q:
            m, s = _int_params(op)
            weights["m"] = np.broadcast_to(m, (nn_,)).astype(np.int64).copy()
            weights["s"] = np.broadcast_to(s, (nn_,)).astype(np.int64).copy()
            bufs += [("weight", "m"), ("weight", "s")]
        if isinstance(op.bias.type, RankedTensorType):
            bb = np.asarray(constant_array(op.bias)).reshape(-1)
            weights["b"] = bb.astype(np.int32) if q else bb.astype(np.float32)
            bufs.append(("weight", "b"))
        bufs += [("out", 0), ("scratch", None)]
        rows = int(np.prod(batch)) * mm if batch else mm
        return KernelPlan(symbol, bufs, weights, scratch_bytes=nn_ * 4, macs=rows * kk_ * nn_)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from lamina.dialects.tpu.families.common import zp
        from lamina.dialects.tpu.quantize import qparams

        batch, mm, kk_, nn_, sa, sb = self._dims(op)
        q = _quant(op.input.type)
        k = Kernel(module, plan.symbol)
        b = k.b
        a_dt, out_dt = _np(op.input.type), _np(op.output.type)
        wconst = "w" in plan.weights
        i = 0
        ap = k.buf(i, storage_type(a_dt))
        i += 1
        w_dt = (
            np.dtype(np.int16) if (wconst and q) else np.dtype(np.float32) if wconst else _np(op.right.type)
        )
        wp = k.buf(i, storage_type(w_dt))
        i += 1
        mv = sv = bias = None
        if q:
            mv, sv = k.buf(i, I64), k.buf(i + 1, I64)
            i += 2
        if "b" in plan.weights:
            bias = k.buf(i, I32 if q else F32)
            i += 1
        out = k.buf(i, storage_type(out_dt))
        acc_t = I32 if q else F32
        acc = b.gep(k.buf(i + 1, acc_t), [b.mul(k.part, const(nn_))])
        za = zp(op.input.type) if q else 0
        zw = 0
        if q and not wconst:
            zw = int(qparams(op.right.type)[1])
        rows = int(np.prod(batch)) * mm if batch else mm
        lo, hi = k.share(rows)
        with k.loop(lo, hi, "row") as row:
            bi = b.udiv(row, const(mm))
            mi = b.urem(row, const(mm))
            aoff, woff = const(0), const(0)
            rem = bi
            for d in range(len(batch) - 1, -1, -1):
                c = b.urem(rem, const(batch[d]))
                rem = b.udiv(rem, const(batch[d]))
                if sa[d]:
                    aoff = b.add(aoff, b.mul(c, const(sa[d])))
                if sb[d]:
                    woff = b.add(woff, b.mul(c, const(sb[d])))
            arow = b.gep(ap, [b.add(aoff, b.mul(mi, const(kk_)))])
            wmat = b.gep(wp, [woff])
            with k.loop(0, nn_, "z") as z:
                b.store(ir.Constant(acc_t, 0), b.gep(acc, [z]))
            with k.loop(0, kk_, "kk") as kk:
                ax = b.gep(arow, [kk])
                av = (
                    b.trunc(b.sub(load_int(b, ax, a_dt), const(za)), I32)
                    if q
                    else load_float(b, ax, a_dt, F32)
                )
                wrow = b.gep(wmat, [b.mul(kk, const(nn_))])
                with k.loop(0, nn_, "n") as nn:
                    wx = b.gep(wrow, [nn])
                    cp = b.gep(acc, [nn])
                    if q:
                        wv = b.trunc(b.sub(load_int(b, wx, w_dt), const(zw)), I32)
                        b.store(b.add(b.load(cp), b.mul(av, wv)), cp)
                    else:
                        wv = load_float(b, wx, w_dt, F32)
                        b.store(b.fadd(b.load(cp), b.fmul(av, wv)), cp)
            orow = b.gep(out, [b.mul(row, const(nn_))])
            with k.loop(0, nn_, "n2") as nn:
                v = b.load(b.gep(acc, [nn]))
                if bias is not None:
                    bv = b.load(b.gep(bias, [nn]))
                    v = b.add(v, bv) if q else b.fadd(v, bv)
                if q:
                    y = _requant_epilogue(
                        b, v, b.load(b.gep(mv, [nn])), b.load(b.gep(sv, [nn])), op, op.output.type
                    )
                    store_int(b, y, b.gep(orow, [nn]), out_dt)
                else:
                    store_float(b, _float_relu(b, module, v, op), b.gep(orow, [nn]), out_dt)
        k.finish()


class Pool(Template):
    name = "generic.pool"

    def exact_for(self, op: Any) -> bool:
        return op.name == "tpu.MaxPool" or _quant(op.operands[0].type)  # float window sums: another order

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name not in ("tpu.MaxPool", "tpu.AvgPool"):
            return False
        x, r = op.operands[0].type, op.results[0].type
        if not (_static(x) and _static(r)) or len(x.shape) not in (3, 4):
            return False
        if len(op.results) > 1 and isinstance(op.results[1].type, RankedTensorType):
            return False  # MaxPool indices
        if op.name == "tpu.AvgPool" and _quant(x):
            if op.attr("auto_pad") not in (None, "NOTSET") or op.attr("ceil_mode"):
                return False
            return op.attr("multiplier") is not None
        return _quant(x) or (_is_float(x) and _is_float(r))

    def _geo(self, op: Any) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
        from lamina.execution.kernels.geometry import window_geometry

        xs = _shape(op.operands[0].type)
        k, s, d, p = window_geometry(
            xs[2:],
            op.attr("kernel_shape"),
            op.attr("strides"),
            op.attr("dilations"),
            op.attr("pads"),
            op.attr("auto_pad") or "NOTSET",
        )
        if len(xs) == 3:
            return [xs[0], xs[1], 1, xs[2]], [1, k[0]], [1, s[0]], [1, d[0]], [0, p[0], 0, p[1]]
        return xs, k, s, d, p

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        n = int(np.prod(_shape(op.operands[0].type)))
        return KernelPlan(symbol, [("in", 0), ("out", 0)], bytes=_np(op.operands[0].type).itemsize * n)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from lamina.dialects.tpu.families.common import zp

        xs, (kh_n, kw_n), (sh, sw), (dh, dw), p = self._geo(op)
        n_, c_, h_, w_ = xs
        rs = _shape(op.results[0].type)
        oh_n, ow_n = (rs[2], rs[3]) if len(rs) == 4 else (1, rs[2])
        x_t, r_t = op.operands[0].type, op.results[0].type
        x_dt, o_dt = _np(x_t), _np(r_t)
        q = _quant(x_t)
        is_max = op.name == "tpu.MaxPool"
        ct = compute_float(x_dt)
        cip = bool(op.attr("count_include_pad")) if not is_max else False
        if not is_max and not q and x_dt == np.float16:
            ct = F64  # the reference sums f16 windows in f64
        k = Kernel(module, plan.symbol)
        b = k.b
        x = k.buf(0, storage_type(x_dt))
        out = k.buf(1, storage_type(o_dt))
        if is_max:
            init = const(-(2**62)) if q else fconst(-math.inf, ct)
        else:
            init = const(0) if q else fconst(0.0, ct)
        with b.goto_entry_block():
            accp = b.alloca(init.type)
            cntp = b.alloca(I64)
        clamp = is_max and dh == 1 and dw == 1  # the count is the average's only
        lo, hi = k.share(n_ * c_ * oh_n)
        with k.loop(lo, hi, "row") as row:
            nc = b.udiv(row, const(oh_n))
            oh = b.urem(row, const(oh_n))
            xbase = b.gep(x, [b.mul(nc, const(h_ * w_))])
            with k.loop(0, ow_n, "ow") as ow:
                b.store(init, accp)
                b.store(const(0), cntp)
                ph1, pw1 = (p[2], p[3]) if len(p) == 4 else (p[0], p[1])
                if clamp:  # the window's rows/columns inside the input: no test per element
                    h0 = b.sub(const(p[0]), b.mul(oh, const(sh)))  # the first kh inside is h0
                    w0 = b.sub(const(p[1]), b.mul(ow, const(sw)))
                    kh_lo, kh_hi = _max(b, h0, const(0)), _min(b, b.add(h0, const(h_)), const(kh_n))
                    kw_lo, kw_hi = _max(b, w0, const(0)), _min(b, b.add(w0, const(w_)), const(kw_n))
                else:
                    kh_lo, kh_hi, kw_lo, kw_hi = const(0), const(kh_n), const(0), const(kw_n)
                with k.loop(kh_lo, kh_hi, "kh") as kh, k.loop(kw_lo, kw_hi, "kw") as kw:
                    ih = b.add(b.sub(b.mul(oh, const(sh)), const(p[0])), b.mul(kh, const(dh)))
                    iw = b.add(b.sub(b.mul(ow, const(sw)), const(p[1])), b.mul(kw, const(dw)))
                    if clamp:
                        xp = b.gep(xbase, [b.add(b.mul(ih, const(w_)), iw)])
                        a = b.load(accp)
                        if q:
                            b.store(_max(b, a, load_int(b, xp, x_dt)), accp)
                        else:
                            v = load_float(b, xp, x_dt, ct)
                            b.store(b.call(intrinsic(module, "llvm.maximum", ct, 2), [a, v]), accp)
                    else:
                        inside = b.and_(
                            b.and_(b.icmp_signed(">=", ih, const(0)), b.icmp_signed("<", ih, const(h_))),
                            b.and_(b.icmp_signed(">=", iw, const(0)), b.icmp_signed("<", iw, const(w_))),
                        )
                        if cip:  # explicit padding counts in the divisor, ceil mode's extra does not
                            counted = b.and_(
                                b.and_(
                                    b.icmp_signed(">=", ih, const(-p[0])),
                                    b.icmp_signed("<", ih, const(h_ + ph1)),
                                ),
                                b.and_(
                                    b.icmp_signed(">=", iw, const(-p[1])),
                                    b.icmp_signed("<", iw, const(w_ + pw1)),
                                ),
                            )
                        else:
                            counted = inside
                        b.store(b.add(b.load(cntp), b.zext(counted, I64)), cntp)
                        with b.if_then(inside):
                            xp = b.gep(xbase, [b.add(b.mul(ih, const(w_)), iw)])
                            a = b.load(accp)
                            if q:
                                v = load_int(b, xp, x_dt)
                                nv = _max(b, a, v) if is_max else b.add(a, b.sub(v, const(zp(x_t))))
                            else:
                                v = load_float(b, xp, x_dt, ct)
                                fn = "llvm.maximum" if is_max else None
                                nv = b.call(intrinsic(module, fn, ct, 2), [a, v]) if fn else b.fadd(a, v)
                            b.store(nv, accp)
                res = b.load(accp)
                dst = b.gep(out, [b.add(b.mul(row, const(ow_n)), ow)])
                if is_max:
                    if q:
                        store_int(b, res, dst, o_dt)
                    else:
                        store_float(b, res, dst, o_dt)
                elif q:
                    m, s = _int_params(op)
                    y = _requant_epilogue_plain(b, b.trunc(res, I32), const(int(m[0])), const(int(s[0])), r_t)
                    store_int(b, y, dst, o_dt)
                else:
                    cnt = b.sitofp(_max(b, b.load(cntp), const(1)), ct)
                    store_float(b, b.fdiv(res, cnt), dst, o_dt)
        k.finish()


def _requant_epilogue_plain(b: ir.IRBuilder, acc32: Any, m: Any, s: Any, out_t: Any) -> Any:
    from lamina.dialects.tpu.families.common import bounds, zp

    lo, hi = bounds(out_t)
    y = b.add(rounding_rshift(b, b.mul(b.sext(acc32, I64), m), s), const(zp(out_t)))
    return clamp_i64(b, y, lo, hi)


#: the float reductions that sum (in :func:`lamina.execution.kernels.reduce.ordered_sum`'s order)
SUMS = ("ReduceMean", "ReduceSum", "ReduceL1", "ReduceL2", "ReduceSumSquare")


class Reduce(Template):
    name = "generic.reduce"

    def _axes(self, op: Any) -> list[int] | None:
        if len(op.operands) < 2 or not isinstance(op.operands[1].type, RankedTensorType):
            return None
        a = constant_array(op.operands[1])
        if a is None:
            return None
        nd = len(op.operands[0].type.shape)
        return sorted({int(v) % nd for v in np.asarray(a).reshape(-1)})

    def _split(self, op: Any) -> tuple[list[int], list[int], int, int] | None:
        """(kept dims, their input strides, the reduced run's length, its stride) when the reduced
        dims coalesce into one strided run."""
        xs = _shape(op.operands[0].type)
        axes = self._axes(op)
        if axes is None:
            return None
        st = contiguous_strides(xs)
        red = [xs[a] for a in axes]
        dims, strides = coalesce(red, [[st[a] for a in axes]])
        if len(dims) != 1:
            return None
        kept = [d for d in range(len(xs)) if d not in axes]
        return [xs[d] for d in kept], [st[d] for d in kept], dims[0], strides[0][0]

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Reduce" or len(op.results) != 1:
            return False
        x, r = op.operands[0].type, op.results[0].type
        if not (_static(x) and _static(r)) or self._split(op) is None:
            return False
        mode = op.attr("mode")
        if _quant(x):
            return mode in ("ReduceMax", "ReduceMin") or (
                mode == "ReduceMean" and op.attr("multiplier") is not None
            )
        return _is_float(x) and _is_float(r) and mode in (*SUMS, "ReduceMax", "ReduceMin")

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        split = self._split(op)
        assert split is not None
        tree = not _quant(op.operands[0].type) and op.attr("mode") in SUMS
        ct = compute_float(_np(op.operands[0].type))
        return KernelPlan(
            symbol,
            [("in", 0), ("out", 0)] + ([("scratch", None)] if tree else []),
            scratch_bytes=split[2] * (8 if ct == F64 else 4) if tree else 0,
            bytes=_np(op.operands[0].type).itemsize * int(np.prod(_shape(op.operands[0].type))),
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from lamina.dialects.tpu.families.common import zp

        split = self._split(op)
        assert split is not None
        kshape, kstr, n, rstride = split
        x_t, r_t = op.operands[0].type, op.results[0].type
        x_dt, o_dt = _np(x_t), _np(r_t)
        q = _quant(x_t)
        mode = op.attr("mode")
        k = Kernel(module, plan.symbol)
        x = k.buf(0, storage_type(x_dt))
        out = k.buf(1, storage_type(o_dt))
        ct = compute_float(x_dt)
        if not kshape:
            kshape, kstr = [1], [0]
        if q and mode == "ReduceMean":
            m, s = _int_params(op)

        if not q and mode in SUMS:
            scr = k.b.gep(k.buf(2, ct), [k.b.mul(k.part, const(n))])

            def tree(b: ir.IRBuilder, ps: list[Any]) -> None:
                """ordered_sum's order: the terms in a row, then pairs (2i, 2i+1) summed level by
                level, an odd last one carried up — bit for bit the interpreter's float sums."""
                with k.loop(0, n, "t") as t:
                    v = load_float(b, b.gep(ps[0], [b.mul(t, const(rstride))]), x_dt, ct)
                    if mode in ("ReduceL2", "ReduceSumSquare"):
                        v = b.fmul(v, v)
                    elif mode == "ReduceL1":
                        v = b.call(intrinsic(module, "llvm.fabs", ct), [v])
                    b.store(v, b.gep(scr, [t]))
                m_ = n
                while m_ > 1:
                    half = m_ // 2
                    with k.loop(0, half, "lvl") as i:
                        two = b.mul(i, const(2))
                        a = b.load(b.gep(scr, [two]))
                        c = b.load(b.gep(scr, [b.add(two, const(1))]))
                        b.store(b.fadd(a, c), b.gep(scr, [i]))
                    if m_ % 2:
                        b.store(b.load(b.gep(scr, [const(m_ - 1)])), b.gep(scr, [const(half)]))
                    m_ = half + m_ % 2
                total = b.load(scr) if n else fconst(0.0, ct)
                if mode == "ReduceMean":
                    total = b.fdiv(total, fconst(n, ct))
                elif mode == "ReduceL2":
                    total = b.call(intrinsic(module, "llvm.sqrt", ct), [total])
                store_float(b, total, ps[1], o_dt)

            emit_strided(k, kshape, [(x, kstr, 0), (out, contiguous_strides(kshape), 0)], tree)
            k.finish()
            return

        def body(b: ir.IRBuilder, ps: list[Any]) -> None:
            if q:
                init = const(0) if mode == "ReduceMean" else load_int(b, ps[0], x_dt)
            else:
                init = (
                    fconst(0.0, ct) if mode in ("ReduceMean", "ReduceSum") else load_float(b, ps[0], x_dt, ct)
                )
            pre = b.block
            cond = b.append_basic_block("r.cond")
            bod = b.append_basic_block("r.body")
            end = b.append_basic_block("r.end")
            b.branch(cond)
            b.position_at_end(cond)
            i = b.phi(I64)
            acc = b.phi(init.type)
            i.add_incoming(const(0), pre)
            acc.add_incoming(init, pre)
            b.cbranch(b.icmp_signed("<", i, const(n)), bod, end)
            b.position_at_end(bod)
            xp = b.gep(ps[0], [b.mul(i, const(rstride))])
            if q:
                v = load_int(b, xp, x_dt)
                if mode == "ReduceMean":
                    nv = b.add(acc, b.sub(v, const(zp(x_t))))
                else:
                    nv = _max(b, acc, v) if mode == "ReduceMax" else _min(b, acc, v)
            else:
                v = load_float(b, xp, x_dt, ct)
                if mode in ("ReduceMean", "ReduceSum"):
                    nv = b.fadd(acc, v)
                else:
                    nv = b.call(
                        intrinsic(module, "llvm.maximum" if mode == "ReduceMax" else "llvm.minimum", ct, 2),
                        [acc, v],
                    )
            i.add_incoming(b.add(i, const(1)), b.block)
            acc.add_incoming(nv, b.block)
            b.branch(cond)
            b.position_at_end(end)
            if q:
                if mode == "ReduceMean":
                    y = _requant_epilogue_plain(b, b.trunc(acc, I32), const(int(m[0])), const(int(s[0])), r_t)
                    store_int(b, y, ps[1], o_dt)
                else:
                    store_int(b, acc, ps[1], o_dt)
            else:
                v = b.fdiv(acc, fconst(n, ct)) if mode == "ReduceMean" else acc
                store_float(b, v, ps[1], o_dt)

        emit_strided(k, kshape, [(x, kstr, 0), (out, contiguous_strides(kshape), 0)], body)
        k.finish()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [Conv(), ConvOC(), MatMul(), Pool(), Reduce()]

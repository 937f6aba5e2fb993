"""The arithmetic family: ``tpu.Add``, ``tpu.Sub`` and ``tpu.Mul``, their INT8 forms and their
lowering.

Add/Sub: ``y = sat(zp + rdiv(sum_i sign_i * (q_i - zp_i) * multiplier_i, 2**(31 + rshift)))`` —
one multiplier per input sharing one shift (from the largest scale ratio); per channel, one shift
per channel and one multiplier per input and channel. Mul: ``y = sat(zp + rdiv(prod_i (q_i - zp_i)
* multiplier, 2**(31 + rshift)))``, two inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.top import elementwise as top_ew
from lamina.dialects.top.base import TopOp
from lamina.ir.attributes import DenseArrayAttr
from lamina.ir.core import Operation, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.types import i64
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import is_per_axis, scale, scales
from ..quantize import qparams, quantize_multiplier, requantize, round_half_away, rounding_rshift
from .common import along, bounds, declare, mult_props, quant_props, result_channel_axis, store, zp


def _linear_int(self: Any, signs: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """Add/Sub: ``y = sat(zp + rdiv(sum_i sign_i * (q_i - zp_i) * multiplier_i, 2**(31 + rshift)))``.

    Per channel (``rshift`` has one entry per channel ``c`` of the channel axis — the result's if it
    is per-axis, else the per-axis input's): ``multiplier`` holds ``n_inputs x C`` values, input-major,
    and channel ``c`` uses ``multiplier[i * C + c]`` and ``rshift[c]``."""
    in_ts = [v.type for v in self.operands]
    out_t = self.output.type
    m, s = mult_props(self)
    lo, hi = bounds(out_t)
    zp_out = zp(out_t)
    nd = len(out_t.shape)
    axis = result_channel_axis(out_t, in_ts)
    per = s.size > 1 or (axis is not None and m.size > len(in_ts))

    if per:
        c = s.size
        ms = [along(m[i * c : (i + 1) * c], nd, axis) for i in range(len(in_ts))]  # type: ignore[arg-type]
        shift = along(31 + s, nd, axis)  # type: ignore[arg-type]
    else:
        ms = [int(x) for x in m]
        shift = 31 + int(s[0])

    def run(ins: Sequence[Any]) -> list[Any]:
        acc: Any = np.int64(0)
        for i, (x, t) in enumerate(zip(ins, in_ts)):
            acc = acc + (np.asarray(x, np.int64) - zp(t)) * (int(signs[i]) * ms[i])
        acc = np.broadcast_to(np.asarray(acc, np.int64), out_t.shape)
        y = np.clip(rounding_rshift(acc, shift) + zp_out, lo, hi)
        return [store(y, out_t)]

    return run


def _linear_verifier(top_cls: type[TopOp]) -> Callable[[Any], None]:
    def verify_(self: Any) -> None:
        top_cls.verify_(self)  # type: ignore[arg-type]
        m, s = self.attr("multiplier"), self.attr("rshift")
        if m is None or s is None:
            return
        n, nm, ns = len(self.operands), len(m), len(s)
        if ns == 1 and nm == n:
            return
        if ns < 1 or nm != n * ns:
            raise VerifyError(
                f"expected {n} multipliers and 1 rshift, or {n} x C multipliers and C rshifts "
                f"(per channel), got {nm} and {ns}"
            )

    return verify_


AddOp = declare(
    top_ew.AddOp,
    {
        **quant_props(),
        "int_executor": lambda self: _linear_int(self, [1] * len(self.operands)),
        "verify_": _linear_verifier(top_ew.AddOp),
    },
    __name__,
)
SubOp = declare(
    top_ew.SubOp,
    {
        **quant_props(),
        "int_executor": lambda self: _linear_int(self, [1, -1]),
        "verify_": _linear_verifier(top_ew.SubOp),
    },
    __name__,
)


def _mul_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """``y = sat(zp + rdiv(prod_i (q_i - zp_i) * multiplier, 2**(31 + rshift)))``; per channel (one
    ``multiplier`` and ``rshift`` per channel of the result's channel axis) when they have more than
    one entry."""
    in_ts = [v.type for v in self.operands]
    out_t = self.output.type
    m, s = mult_props(self)
    lo, hi = bounds(out_t)
    zp_out = zp(out_t)
    axis = result_channel_axis(out_t, in_ts) if m.size > 1 else None

    def run(ins: Sequence[Any]) -> list[Any]:
        prod: Any = np.int64(1)
        for x, t in zip(ins, in_ts):
            prod = prod * (np.asarray(x, np.int64) - zp(t))
        prod = np.broadcast_to(np.asarray(prod, np.int64), out_t.shape)
        if axis is None:
            return [store(requantize(prod, int(m[0]), int(s[0]), zp_out, lo, hi), out_t)]
        return [store(requantize(prod, m, s, zp_out, lo, hi, axis=axis), out_t)]

    return run


def _mul_verify(self: Any) -> None:
    top_ew.MulOp.verify_(self)
    m, s = self.attr("multiplier"), self.attr("rshift")
    if m is None or s is None:
        return
    if len(m) != len(s):
        raise VerifyError(f"expected as many multipliers as rshifts, got {len(m)} and {len(s)}")
    if len(m) > 1:
        axis = result_channel_axis(self.output.type, [v.type for v in self.operands])
        c = None if axis is None else self.output.type.shape[axis]
        if c != len(m):
            raise VerifyError(
                f"expected 1 multiplier, or one per channel of a per-axis result, got {len(m)}"
                + ("" if c is None else f" for {c} channels")
            )


MulOp = declare(top_ew.MulOp, {**quant_props(), "int_executor": _mul_int, "verify_": _mul_verify}, __name__)


class ArithmeticLowering(FamilyLowering):
    """top.Add / top.Sub / top.Mul → tpu.Add / tpu.Sub / tpu.Mul. INT8: Add/Sub per-tensor, or per
    channel when the result's type is per-axis; Mul of two inputs, one multiplier (one per channel
    when the result's type is per-axis)."""

    roots = (top_ew.AddOp, top_ew.SubOp, top_ew.MulOp)

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if isinstance(op, top_ew.MulOp):
            return self._mul(op, ins, rw)
        return self._add(op, ins, rw)

    def _add(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        out_t = self.qout(op.results[0], per_axis=True)
        out_t = self.s.wide_sum(op.results[0], out_t) or out_t  # int16 for float users (wide_sum)
        nd = len(out_t.shape)  # type: ignore[attr-defined]
        out_axis = qparams(out_t)[2]
        xs = []
        for o, v in zip(op.operands, ins):
            x = self.qin(rw, o, v, per_axis=out_axis is not None)
            if is_per_axis(x.type) and qparams(x.type)[2] + nd - len(x.type.shape) != out_axis:  # type: ignore[attr-defined]
                x = self.qin(rw, o, x)
            xs.append(x)
        if out_axis is None:
            ratios = [scale(x.type) / scale(out_t) for x in xs]
            mx = max(ratios)
            if mx >= 2.0**30:
                raise NoInt8
            _, rs = quantize_multiplier(mx)
            shift = 31 + rs
            ms = [int(round_half_away(np.float64(r * 2.0**shift))) for r in ratios]
            extra = {"multiplier": DenseArrayAttr(i64, ms), "rshift": DenseArrayAttr(i64, [rs])}
            return self.emit(op, rw, xs, [out_t], extra)
        # per channel: one shift per channel (from the largest ratio), one multiplier per input
        s_o = scales(out_t)
        r = np.stack([np.broadcast_to(scales(x.type), s_o.shape) / s_o for x in xs])
        if np.any(r >= 2.0**30):
            raise NoInt8
        rs = np.array([quantize_multiplier(float(c))[1] for c in r.max(axis=0)], np.int64)
        ms = round_half_away(r * np.exp2(31.0 + rs)).astype(np.int64)
        extra = {
            "multiplier": DenseArrayAttr(i64, [int(v) for v in ms.reshape(-1)]),
            "rshift": DenseArrayAttr(i64, [int(v) for v in rs]),
        }
        return self.emit(op, rw, xs, [out_t], extra)

    def _mul(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if len(ins) != 2:
            raise NoInt8
        out_t = self.qout(op.results[0], per_axis=True)
        out_axis = qparams(out_t)[2]
        if out_axis is None:
            xs = [self.qin(rw, o, v) for o, v in zip(op.operands, ins)]
            real = scale(xs[0].type) * scale(xs[1].type) / scale(out_t)
            if real >= 2.0**30:
                raise NoInt8
            m, s = quantize_multiplier(real)
            extra = {"multiplier": DenseArrayAttr(i64, [m]), "rshift": DenseArrayAttr(i64, [s])}
            return self.emit(op, rw, xs, [out_t], extra)
        # per channel (a rank-4 result along axis 1): one multiplier and shift per channel
        nd = len(out_t.shape)  # type: ignore[attr-defined]
        xs = []
        for o, v in zip(op.operands, ins):
            x = self.qin(rw, o, v, per_axis=True)
            ax = qparams(x.type)[2]
            if ax is not None and ax + nd - len(x.type.shape) != out_axis:  # type: ignore[attr-defined]
                x = self.qin(rw, o, x)
            xs.append(x)
        s_o = scales(out_t)
        real = np.broadcast_to(scales(xs[0].type), s_o.shape) * scales(xs[1].type) / s_o
        if np.any(real >= 2.0**30) or np.any(~np.isfinite(real)):
            raise NoInt8
        pairs = [quantize_multiplier(float(r)) for r in real]
        extra = {
            "multiplier": DenseArrayAttr(i64, [p[0] for p in pairs]),
            "rshift": DenseArrayAttr(i64, [p[1] for p in pairs]),
        }
        return self.emit(op, rw, xs, [out_t], extra)

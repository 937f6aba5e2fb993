"""The linear-algebra family: ``tpu.Conv`` and ``tpu.MatMul``, their INT8 forms and their lowering.

INT8: ``acc = sum((q_x - zp_x) * (q_w - zp_w)) (+ bias, int32)`` in the int32 register, then
``y = sat(zp_out + rdiv(acc * multiplier, 2**(31 + rshift)))`` per output channel, ``do_relu`` /
``relu_limit`` clamped in the integer domain. Weights are quantized per output channel, symmetric
int8 in [-127, 127] (``scale_c = max|w_c| / 127``); biases int32 ``round_half_away(b / (s_in *
s_w_c))``. A MatMul whose input has per-channel scales along K (:mod:`..lowering.per_channel`)
folds them into the weight rows, ``W'[k, n] = W[k, n] * s_x[k]``, and may produce per-channel
output scales (the weight's columns); a Conv likewise along its input channels (axis 1; grouped:
``W'[o, j, ...] = W[o, j, ...] * s_x[(o // (O / g)) * (C / g) + j]``) and output channels, where
the target takes per-channel 4-d activations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.top import nn as top_nn
from lamina.execution.kernels.integer import conv_accumulate, matmul_accumulate
from lamina.ir.attributes import DenseArrayAttr
from lamina.ir.core import Operation, Value
from lamina.ir.naming import location_name as loc_name
from lamina.ir.types import IntegerType, NoneType, RankedTensorType, f32, i64
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import is_floatish, is_per_axis, scale, scales
from ..quantize import qparams, quantize, quantize_multiplier, requantize, round_half_away, wrap_int32
from .common import acc_int32, bounds, centered, declare, mult_props, quant_props, relu_clamp, store, zp
from .plumbing import CastOp


def _conv_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    geometry = (
        self.attr("kernel_shape"),
        self.attr("strides"),
        self.attr("dilations"),
        self.attr("pads"),
        self.attr("auto_pad"),
    )
    g = self.attr("group")
    in_t, w_t, out_t = self.input.type, self.filter.type, self.output.type
    m, s = mult_props(self)
    lo, hi = bounds(out_t)
    zp_out = zp(out_t)
    w_zp = qparams(w_t)[1]
    cache: dict[Any, Any] = {}

    def run(ins: Sequence[Any]) -> list[Any]:
        x, w, b = ins
        xf = centered(x, in_t)
        wf = np.asarray(w, dtype=np.float64) - (
            w_zp.reshape((-1,) + (1,) * (w.ndim - 1)) if np.ndim(w_zp) else float(w_zp)
        )
        acc = acc_int32(conv_accumulate(xf, wf, g, geometry, cache))
        if b is not None:
            acc = wrap_int32(
                acc.astype(np.int64) + np.asarray(b, np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
            )
        y = requantize(acc, m if m.size > 1 else m[0], s if s.size > 1 else s[0], zp_out, lo, hi, axis=1)
        return [store(relu_clamp(y, self, out_t), out_t)]

    return run


ConvOp = declare(top_nn.ConvOp, {**quant_props(), "int_executor": _conv_int}, __name__)


def _matmul_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    a_t, b_t, out_t = self.input.type, self.right.type, self.output.type
    m, s = mult_props(self)
    lo, hi = bounds(out_t)
    zp_out = zp(out_t)
    _b_scales, b_zp, b_axis, _, _ = qparams(b_t)

    def run(ins: Sequence[Any]) -> list[Any]:
        a, b, bias = ins
        acc = acc_int32(matmul_accumulate(centered(a, a_t), b, b_zp, b_axis))
        if bias is not None:
            acc = wrap_int32(acc.astype(np.int64) + np.asarray(bias, np.int64))
        per = m.size > 1
        y = requantize(
            acc, m if per else m[0], s if per else s[0], zp_out, lo, hi, axis=acc.ndim - 1 if per else None
        )
        return [store(relu_clamp(y, self, out_t), out_t)]

    return run


MatMulOp = declare(top_nn.MatMulOp, {**quant_props(), "int_executor": _matmul_int}, __name__)


def _filter_scales(s_x: np.ndarray, w: np.ndarray, op: Operation) -> np.ndarray:
    """The input-channel scale of every filter element ``w[o, j, ...]`` of a grouped Conv: input
    channel ``(o // (O / g)) * (C / g) + j``, shaped to broadcast against ``w``."""
    g = int(op.attr("group") or 1)  # type: ignore[attr-defined]
    o, cg = w.shape[0], w.shape[1]
    if s_x.size != g * cg or o % g:
        raise NoInt8
    per_o = s_x.reshape(g, cg)[np.arange(o) // (o // g)]  # (O, C/g)
    return per_o.reshape(per_o.shape + (1,) * (w.ndim - 2))


class ConvMatMulLowering(FamilyLowering):
    """top.Conv / top.MatMul → tpu.Conv / tpu.MatMul (INT8: quantized weights and bias, one
    multiplier and shift per output channel)."""

    roots = (top_nn.ConvOp, top_nn.MatMulOp)

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        is_conv = isinstance(op, top_nn.ConvOp)
        w = self.s.weight_array(ins[1])
        # per-channel input/output possible: a MatMul's along the last axis, a Conv's along axis 1
        # (where the target takes per-channel 4-d activations)
        per = w is not None and (w.ndim == 2 if not is_conv else self.s.capabilities.conv_channel_scales)
        out_t = self.qout(op.results[0], per_axis=per)
        wide = None if is_conv else self.s.wide_type(op.results[0])
        if wide is not None:  # the lut16 form: an int16 result for the activation's 65536-entry table
            out_t = wide
        x = self.qin(rw, op.operands[0], ins[0], per_axis=per)
        in_axis = 1 if is_conv else len(x.type.shape) - 1  # type: ignore[attr-defined]
        if is_per_axis(x.type) and qparams(x.type)[2] != in_axis:
            x = self.qin(rw, op.operands[0], x)
        if w is not None and not is_conv and is_per_axis(x.type) and self.s.wide_input(op):
            # (a MatMul's: a Conv folds its per-channel input into its filter, docs/tpu.md)
            x = self._wide_input(rw, x, int(w.shape[0]))
        s_o = scales(out_t)
        if w is None:
            if is_conv:
                raise NoInt8
            # activation x activation: per-tensor
            y = self.qin(rw, op.operands[1], ins[1])
            s_w = np.array([scale(y.type)])
            s_x = scales(x.type)
            wv = y
        else:
            if is_per_axis(x.type):
                # per-channel input scales along K (a Conv's input channels) folded into the weight
                # rows: the integer accumulation then carries scale 1 on the input side
                w = w.astype(np.float64) * (
                    _filter_scales(scales(x.type), w, op) if is_conv else scales(x.type)[:, None]
                )
                s_x = np.float64(1.0)
            else:
                s_x = scales(x.type)
            axis = 0 if is_conv else w.ndim - 1
            red = tuple(i for i in range(w.ndim) if i != axis)
            amax = np.max(np.abs(w), axis=red) if w.ndim > 1 else np.abs(w)
            s_w = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float64)
            et = UniformQuantizedPerAxisType(8, True, f32, list(s_w), [0] * len(s_w), axis, -127, 127)
            wt = RankedTensorType(w.shape, et)
            wq = quantize(w.astype(np.float32) if not is_per_axis(x.type) else w, wt)
            wv = self.s.new_weight(rw, wq, wt, (loc_name(op.location) or "w") + "_filter_i8", op.location)
        real = np.atleast_1d(s_x * s_w / s_o)
        if np.any(real >= 2.0**30) or np.any(~np.isfinite(real)):
            raise NoInt8
        pairs = [quantize_multiplier(float(r)) for r in real]
        bias = ins[2]
        if not isinstance(bias.type, NoneType):
            b = self.s.weight_array(bias)
            if b is None:
                raise NoInt8
            bq = round_half_away(b.astype(np.float64) / (s_x * s_w))
            bq = np.clip(bq, -(2**31), 2**31 - 1).astype(np.int32)
            bias = self.s.new_weight(
                rw,
                bq,
                RankedTensorType(bq.shape, IntegerType(32)),
                (loc_name(op.location) or "b") + "_bias_i32",
                op.location,
            )
        extra = {
            "multiplier": DenseArrayAttr(i64, [p[0] for p in pairs]),
            "rshift": DenseArrayAttr(i64, [p[1] for p in pairs]),
        }
        return self.emit(op, rw, [x, wv, bias], [out_t], extra)

    def _wide_input(self, rw: ConversionPatternRewriter, x: Value, k: int) -> Value:
        """The ``wide_input`` form: a per-channel input ``x`` (along K) on one int16 grid instead of
        its scales folded into the weight rows: ``scale = max_c(s_c) * 127 / L``, storage
        ``[-L, L]``, ``L = min(32767, (2**31 - 1) // (127 * K))`` so that no int32 accumulation can
        overflow; a float source is quantized to it directly, an int8 one requantized."""
        th = float(np.max(scales(x.type))) * 127.0
        lv = min(32767, (2**31 - 1) // (127 * max(1, k)))
        t16 = RankedTensorType(x.type.shape, UniformQuantizedType(16, True, f32, th / lv, 0, -lv, lv))  # type: ignore[attr-defined]
        d = x.defining_op()
        if isinstance(d, CastOp) and is_floatish(d.operands[0].type):
            return self.s.cast(rw, d.operands[0], t16)
        return self.s.cast(rw, x, t16)

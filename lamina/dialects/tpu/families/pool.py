"""The pooling family: ``tpu.MaxPool`` and ``tpu.AvgPool``, their INT8 forms and their lowering.

MaxPool INT8: the ``top`` reference on the storage integers (the result keeps the input's type; no
indices result). AvgPool INT8: window sums of ``q - zp`` (padding contributes 0) in int64,
requantized by ``multiplier/rshift`` encoding ``s_in / (s_out * window_size)`` — explicit padding
counted in the window (``count_include_pad``), no ``auto_pad``, ``ceil_mode`` or dilation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.top import nn as top_nn
from lamina.execution.kernels.integer import window_sums
from lamina.ir.attributes import DenseArrayAttr
from lamina.ir.core import Operation, Value
from lamina.ir.types import NoneType, i64
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import elem, scale, with_elem
from ..quantize import quantize_multiplier, requantize, wrap_int32
from .common import bounds, declare, mult_props, quant_props, store, zp


def _maxpool_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    base = self._top_fn()
    out_t = self.output.type

    def run(ins: Sequence[Any]) -> list[Any]:
        outs = base([np.asarray(ins[0], np.float64)])
        return [store(outs[0], out_t), *outs[1:]]

    return run


MaxPoolOp = declare(top_nn.MaxPoolOp, {"int_executor": _maxpool_int}, __name__)


def _avgpool_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """Window sums of ``q - zp`` (padding contributes 0) in int64, requantized by
    ``multiplier/rshift`` (which encode ``s_in / (s_out * window_size)``)."""
    in_t, out_t = self.input.type, self.output.type
    m, s = mult_props(self)
    lo, hi = bounds(out_t)
    zp_out = zp(out_t)
    k = list(self.attr("kernel_shape"))
    nd = len(k)
    st = list(self.attr("strides") or [1] * nd)
    pads = list(self.attr("pads") or [0] * (2 * nd))

    def run(ins: Sequence[Any]) -> list[Any]:
        acc = window_sums(np.asarray(ins[0], np.int64) - zp(in_t), k, st, pads)
        return [store(requantize(wrap_int32(acc), int(m[0]), int(s[0]), zp_out, lo, hi), out_t)]

    return run


AvgPoolOp = declare(top_nn.AvgPoolOp, {**quant_props(), "int_executor": _avgpool_int}, __name__)


class PoolLowering(FamilyLowering):
    """top.MaxPool / top.AvgPool → tpu.MaxPool / tpu.AvgPool."""

    roots = (top_nn.MaxPoolOp, top_nn.AvgPoolOp)

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if isinstance(op, top_nn.MaxPoolOp):
            if not isinstance(op.results[1].type, NoneType):
                raise NoInt8
            x = self.qin(rw, op.operands[0], ins[0])
            return self.emit(op, rw, [x], [with_elem(op.results[0].type, elem(x.type)), op.results[1].type])
        a = op.attr  # type: ignore[attr-defined]
        k = list(a("kernel_shape"))
        pads = list(a("pads") or [0] * (2 * len(k)))
        if a("auto_pad") != "NOTSET" or a("ceil_mode") or (any(pads) and not a("count_include_pad")):
            raise NoInt8
        if a("dilations") and any(d != 1 for d in a("dilations")):
            raise NoInt8
        out_t = self.qout(op.results[0])
        x = self.qin(rw, op.operands[0], ins[0])
        real = scale(x.type) / (scale(out_t) * math.prod(k))
        m, s = quantize_multiplier(real)
        extra = {"multiplier": DenseArrayAttr(i64, [m]), "rshift": DenseArrayAttr(i64, [s])}
        return self.emit(op, rw, [x], [out_t], extra)

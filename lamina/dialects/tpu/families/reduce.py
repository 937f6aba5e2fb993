"""The reduction family: ``tpu.Reduce``, its INT8 form and its lowering.

INT8 (constant axes, static shapes): ReduceMean — the int64 sum of ``q - zp`` requantized
(``multiplier`` encodes ``s_in / (s_out * N)``); ReduceMax / ReduceMin — on the storage integers
(the result keeps the input's type). Other reductions run in float.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.top import reduce as top_reduce
from lamina.dialects.top.io import WeightOp as TopWeight
from lamina.ir.attributes import DenseArrayAttr
from lamina.ir.core import Operation, Value
from lamina.ir.types import NoneType, RankedTensorType, i64
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import elem, scale, with_elem
from ..quantize import quantize_multiplier, requantize, wrap_int32
from .common import bounds, declare, mult_props, quant_props, store, zp


def _reduce_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """ReduceMean: int64 sum of ``q - zp`` requantized (multiplier encodes ``s_in/(s_out*N)``);
    ReduceMax/ReduceMin: on the storage integers (the output type is the input type)."""
    in_t, out_t = self.input.type, self.output.type
    mode = self.attr("mode")
    keep = bool(self.attr("keepdims"))
    m, s = mult_props(self) if self.attr("multiplier") is not None else (None, None)
    lo, hi = bounds(out_t)
    zp_out = zp(out_t)

    def run(ins: Sequence[Any]) -> list[Any]:
        x, axes = ins
        ax = tuple(int(a) for a in np.asarray(axes).reshape(-1)) if axes is not None else None
        if mode == "ReduceMean":
            acc = (np.asarray(x, np.int64) - zp(in_t)).sum(axis=ax, keepdims=keep)
            return [store(requantize(wrap_int32(acc), int(m[0]), int(s[0]), zp_out, lo, hi), out_t)]  # type: ignore[index]
        fn = np.max if mode == "ReduceMax" else np.min
        return [store(fn(np.asarray(x), axis=ax, keepdims=keep), out_t)]

    return run


ReduceOp = declare(top_reduce.ReduceOp, {**quant_props(), "int_executor": _reduce_int}, __name__)


class ReduceLowering(FamilyLowering):
    """top.Reduce → tpu.Reduce."""

    roots = (top_reduce.ReduceOp,)

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        mode = op.attr("mode")  # type: ignore[attr-defined]
        if mode not in ("ReduceMean", "ReduceMax", "ReduceMin"):
            raise NoInt8
        xs = op.operands[0].type
        axes_op = ins[1].defining_op()
        if isinstance(ins[1].type, NoneType) or not isinstance(axes_op, TopWeight):
            raise NoInt8
        if not (isinstance(xs, RankedTensorType) and xs.has_static_shape):
            raise NoInt8
        x = self.qin(rw, op.operands[0], ins[0])
        if mode != "ReduceMean":
            return self.emit(op, rw, [x, ins[1]], [with_elem(op.results[0].type, elem(x.type))])
        axes = np.asarray(axes_op.properties["value"].to_numpy()).reshape(-1)
        n = math.prod(xs.shape[int(ax)] for ax in axes)
        out_t = self.qout(op.results[0])
        m, s = quantize_multiplier(scale(x.type) / (scale(out_t) * n))
        extra = {"multiplier": DenseArrayAttr(i64, [m]), "rshift": DenseArrayAttr(i64, [s])}
        return self.emit(op, rw, [x, ins[1]], [out_t], extra)

"""The data-movement family: ``tpu.Concat`` and the ops that only move data (Reshape, Flatten,
Squeeze, Unsqueeze, Permute, Slice, Split, Interp nearest, Tile, Expand, DepthToSpace,
SpaceToDepth, Gather), their INT8 forms and their lowering.

INT8: the ``top`` reference on the storage integers, the result keeping the input's quantized type
(float64 carries the integers exactly where the reference needs a float: padding with -inf,
interpolation indices). Concat: inputs requantized to the result's type; when the 8-bit inputs'
scales differ by more than 2x, the result is per-axis along the concat axis instead, each input's
channels keeping its own scale (YOLO heads concatenate box coordinates — hundreds — with scores).
Gather (the ``gather`` integer form): of an activation, the storage values move; of a constant
table (an embedding), the table is quantized at lowering to the result's calibrated type (per
channel along the last axis when the result is) and the op gathers its storage values — the very
integers the float Gather followed by the result's cast gives, without the float table or the cast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.top import ALL_OPS
from lamina.dialects.top import extra as top_extra
from lamina.dialects.top import tensor as top_tensor
from lamina.dialects.top.base import TopOp
from lamina.ir.core import Operation, Value
from lamina.ir.types import RankedTensorType, f32
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import elem, is_floatish, is_per_axis, scale, with_elem, zp_of
from ..quantize import qparams
from .common import ModeOp, declare, is_quant, store

#: top op names whose tpu op moves data only (INT8: same quantized type in and out)
MOVE_OPS = (
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Permute",
    "Slice",
    "Split",
    "Interp",
    "Tile",
    "Expand",
    "DepthToSpace",
    "SpaceToDepth",
    "Gather",
)


def _move_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """Data movement on storage integers: the ``top`` reference applied to them unchanged (result
    types equal the input's quantized type); float64 carries the integers exactly where the
    reference needs a float (padding with -inf, interpolation indices)."""
    base = self._top_fn()
    rtypes = [r.type for r in self.results]

    def run(ins: Sequence[Any]) -> list[Any]:
        outs = base([np.asarray(x, np.float64) if i == 0 else x for i, x in enumerate(ins)])
        return [o if not is_quant(t) else store(np.asarray(o), t) for o, t in zip(outs, rtypes)]

    return run


def _concat_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    out_t = self.output.type
    axis = self.attr("axis")

    def run(ins: Sequence[Any]) -> list[Any]:
        return [store(np.concatenate([np.asarray(x) for x in ins], axis=axis), out_t)]

    return run


ConcatOp = declare(top_tensor.ConcatOp, {"int_executor": _concat_int}, __name__)

#: the top classes of :data:`MOVE_OPS`
MOVE_CLASSES: tuple[type[TopOp], ...] = tuple(c for c in ALL_OPS if c.name.split(".", 1)[1] in MOVE_OPS)
#: their tpu ops, by top op name
MOVE_TPU_OPS: dict[str, type[ModeOp]] = {
    c.name: declare(c, {"int_executor": _move_int}, __name__) for c in MOVE_CLASSES
}


class MoveLowering(FamilyLowering):
    """The data-movement ops: INT8 keeps the input's quantized type (Interp only in nearest mode);
    Concat: see :meth:`_concat`."""

    roots = (top_tensor.ConcatOp, *MOVE_CLASSES)

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if isinstance(op, top_tensor.ConcatOp):
            return self._concat(op, ins, rw)
        if isinstance(op, top_extra.InterpOp) and op.attr("mode") != "nearest":
            raise NoInt8
        if isinstance(op, top_tensor.GatherOp):
            return self._gather(op, ins, rw)
        x = self.qin(rw, op.operands[0], ins[0])
        rtypes = [with_elem(r.type, elem(x.type)) if is_floatish(r.type) else r.type for r in op.results]
        return self.emit(op, rw, [x, *ins[1:]], rtypes)

    def _gather(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        """An activation's storage values gathered (its type kept), or a constant table quantized
        to the result's type (per-axis only along the last axis, not the gathered one)."""
        if "gather" not in self.s.int_forms:
            raise NoInt8
        table = self.s.weight_array(ins[0])
        if table is None:
            x = self.qin(rw, op.operands[0], ins[0])
            return self.emit(op, rw, [x, ins[1]], [with_elem(op.results[0].type, elem(x.type))])
        out_t = self.qout(op.results[0], per_axis=True)
        rt, tt = op.results[0].type, ins[0].type
        if not (isinstance(rt, RankedTensorType) and isinstance(tt, RankedTensorType)):
            raise NoInt8
        et = elem(out_t)
        if is_per_axis(out_t):
            axis = qparams(out_t)[2]
            g = int(op.attr("axis")) % len(tt.shape)  # type: ignore[attr-defined]
            if axis != len(rt.shape) - 1 or g == len(tt.shape) - 1:
                raise NoInt8
            et = UniformQuantizedPerAxisType(
                8,
                True,
                f32,
                list(et.scales),  # type: ignore[attr-defined]
                list(et.zero_points),  # type: ignore[attr-defined]
                len(tt.shape) - 1,
                -128,
                127,  # type: ignore[attr-defined]
            )
        w = self.s.cast(rw, ins[0], RankedTensorType(tt.shape, et))
        return self.emit(op, rw, [w, ins[1]], [out_t])

    def _concat(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        """Per-tensor, inputs requantized to the result's type; when the 8-bit
        inputs' scales differ by more than 2x, the result is per-axis along the concat axis instead,
        each input's channels keeping its own scale (no requantization of symmetric inputs of one
        signedness; asymmetric inputs are requantized to symmetric int8 first, u8 among i8 to i8)."""
        out_t = self.qout(op.results[0])
        xs = [self.qin(rw, o, v) for o, v in zip(op.operands, ins)]
        rt = op.results[0].type
        axis = op.attr("axis")  # type: ignore[attr-defined]
        shapes = [x.type.shape for x in xs]  # type: ignore[attr-defined]
        scales = [scale(x.type) for x in xs]
        if (
            len(xs) > 1
            and isinstance(rt, RankedTensorType)
            and rt.has_static_shape
            and all(zp_of(x.type) is not None for x in xs)
            and max(scales) > 2.0 * min(scales)
        ):
            # asymmetric inputs are first requantized to symmetric int8 covering their range
            for i, x in enumerate(xs):
                zp = zp_of(x.type)
                if zp:
                    e = elem(x.type)
                    th = max(-(e.storage_min - zp), e.storage_max - zp) * scales[i]  # type: ignore[attr-defined]
                    t = RankedTensorType(shapes[i], UniformQuantizedType(8, True, f32, th / 127.0, 0))
                    xs[i] = self.s.cast(rw, x, t)
                    scales[i] = th / 127.0
            ax = axis % len(rt.shape)
            signed = any(elem(x.type).signed for x in xs)  # type: ignore[attr-defined]
            seg_scales: list[float] = []
            parts = []
            for x, shp, sc in zip(xs, shapes, scales):
                if elem(x.type).signed != signed:  # type: ignore[attr-defined]  # u8 [0, 255] -> i8 [0, 127]
                    t = RankedTensorType(shp, UniformQuantizedType(8, True, f32, sc * 255.0 / 127.0, 0))
                    x = self.s.cast(rw, x, t)
                    sc = sc * 255.0 / 127.0
                parts.append(x)
                seg_scales.extend([sc] * shp[ax])
            lo, hi = (-128, 127) if signed else (0, 255)
            et = UniformQuantizedPerAxisType(8, signed, f32, seg_scales, [0] * len(seg_scales), ax, lo, hi)
            self.s.stats["per_channel"] += 1
            return self.emit(op, rw, parts, [RankedTensorType(rt.shape, et)])
        # each input keeps its own shape: only its element type becomes the result's
        xs = [self.s.cast(rw, x, with_elem(x.type, elem(out_t))) for x in xs]
        return self.emit(op, rw, xs, [out_t])

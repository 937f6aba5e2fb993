"""More ``top`` ops with ONNX semantics: ``top.Unique``, ``top.CenterCropPad``, ``top.Col2Im``,
``top.AffineGrid`` (pairs with ``top.GridSample`` in spatial transformers), ``top.MaxUnpool``,
``top.BitCast`` and ``top.Det``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import DYNAMIC, Type

from .base import (
    AnyTensor,
    AnyTensorOrNone,
    BoolAttr,
    BoolProp,
    I64ArrayAttr,
    I64Attr,
    TopOp,
    const_value,
    elem_of,
    known_values,
    norm_axis,
    result_dtype,
    shape_of,
    tensor_of,
)


def _ints(v: Any) -> list[int]:
    return [int(x) for x in np.asarray(v).reshape(-1)]


class UniqueOp(TopOp):
    """Unique elements (or slices along ``axis``), sorted or in order of first occurrence; also
    first-occurrence indices, inverse indices and counts (int64)."""

    name = "top.Unique"
    data_dependent = True
    input = operand(AnyTensor)
    Y = result_def(AnyTensorOrNone)
    indices = result_def(AnyTensorOrNone)
    inverse_indices = result_def(AnyTensorOrNone)
    counts = result_def(AnyTensorOrNone)
    axis = prop(I64Attr, optional=True)
    sorted = prop(BoolProp, default=BoolAttr(True))

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        ax = self.axis
        if ax is None:
            y, idx, inv, cnt = np.unique(
                x.reshape(-1), return_index=True, return_inverse=True, return_counts=True
            )
            ax_n = 0
        else:
            ax_n = norm_axis(ax, x.ndim)
            y, idx, inv, cnt = np.unique(
                x, return_index=True, return_inverse=True, return_counts=True, axis=ax_n
            )
        inv = inv.reshape(-1)
        if not self.sorted:  # order of first occurrence
            order = np.argsort(idx, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            y = np.take(y, order, axis=ax_n)
            idx, cnt, inv = idx[order], cnt[order], rank[inv]
        outs = [y, idx.astype(np.int64), inv.astype(np.int64), cnt.astype(np.int64)]
        return [None if self.results[i].type.__class__.__name__ == "NoneType" else outs[i] for i in range(4)]


class CenterCropPadOp(TopOp):
    """Crop or zero-pad ``input`` around its center to ``shape`` along ``axes`` (default: all)."""

    name = "top.CenterCropPad"
    input = operand(AnyTensor)
    shape = operand(AnyTensor)
    output = result_def(AnyTensor)
    axes = prop(I64ArrayAttr, optional=True)
    shape_operands = ("shape",)

    def infer_shapes(self) -> list[Type]:
        xs, shp = shape_of(self.input), const_value(self.shape)
        if xs is None or shp is None:
            return self.unranked_results()
        out = list(xs)
        for a, t in zip((norm_axis(a, len(xs)) for a in (self.axes or range(len(xs)))), _ints(shp)):
            out[a] = t
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, shp = inputs
        target = _ints(shp)
        axes = [norm_axis(a, x.ndim) for a in (self.axes or range(x.ndim))]
        out_shape = list(x.shape)
        src: list[slice] = [slice(None)] * x.ndim
        dst: list[slice] = [slice(None)] * x.ndim
        for a, t in zip(axes, target):
            d = x.shape[a]
            out_shape[a] = t
            if t <= d:
                b = (d - t) // 2
                src[a] = slice(b, b + t)
            else:
                b = (t - d) // 2
                dst[a] = slice(b, b + d)
        y = np.zeros(out_shape, dtype=x.dtype)
        y[tuple(dst)] = x[tuple(src)]
        return [y]


class Col2ImOp(TopOp):
    """Rearrange (N, C * prod(block), L) column blocks into (N, C, *image_shape), summing overlaps."""

    name = "top.Col2Im"
    input = operand(AnyTensor)
    image_shape = operand(AnyTensor)
    block_shape = operand(AnyTensor)
    output = result_def(AnyTensor)
    dilations = prop(I64ArrayAttr, optional=True)
    pads = prop(I64ArrayAttr, optional=True)
    strides = prop(I64ArrayAttr, optional=True)
    shape_operands = ("image_shape", "block_shape")

    def infer_shapes(self) -> list[Type]:
        xs, vals = shape_of(self.input), known_values(self.image_shape, self.block_shape)
        if xs is None or vals is None or DYNAMIC in xs[:2]:
            return self.unranked_results()
        img, blk = _ints(vals[0]), _ints(vals[1])
        return [tensor_of([xs[0], xs[1] // math.prod(blk), *img], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, img, blk = inputs
        img, blk = _ints(img), _ints(blk)
        nd = len(img)
        d = list(self.dilations or [1] * nd)
        s = list(self.strides or [1] * nd)
        p = list(self.pads or [0] * (2 * nd))
        n = x.shape[0]
        c = x.shape[1] // math.prod(blk)
        padded = [img[i] + p[i] + p[i + nd] for i in range(nd)]
        nblocks = [(padded[i] - ((blk[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nd)]
        cols = x.reshape(n, c, *blk, *nblocks)
        y = np.zeros((n, c, *padded), dtype=x.dtype)
        for kidx in np.ndindex(*blk):
            dst = (
                slice(None),
                slice(None),
                *(
                    slice(kidx[i] * d[i], kidx[i] * d[i] + (nblocks[i] - 1) * s[i] + 1, s[i])
                    for i in range(nd)
                ),
            )
            y[dst] += cols[(slice(None), slice(None), *kidx)]
        crop = (slice(None), slice(None), *(slice(p[i], p[i] + img[i]) for i in range(nd)))
        return [np.ascontiguousarray(y[crop])]


class AffineGridOp(TopOp):
    """Sampling grid (N, *spatial, r) for ``top.GridSample`` from affine matrices ``theta``
    (N, 2, 3) or (N, 3, 4) and the output ``size`` (N, C, *spatial)."""

    name = "top.AffineGrid"
    theta = operand(AnyTensor)
    size = operand(AnyTensor)
    output = result_def(AnyTensor)
    align_corners = prop(BoolProp, default=BoolAttr(False))
    shape_operands = ("size",)

    def infer_shapes(self) -> list[Type]:
        ts, size = shape_of(self.theta), const_value(self.size)
        if ts is None or size is None:
            return self.unranked_results()
        sp = _ints(size)[2:]
        return [tensor_of([ts[0], *sp, len(sp)], elem_of(self.theta))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        theta, size = inputs
        sp = _ints(size)[2:]
        ac = self.align_corners
        axes = []
        for dim in sp:
            k = np.arange(dim, dtype=np.float64)
            if ac:
                axes.append(k * (2.0 / (dim - 1)) - 1 if dim > 1 else np.zeros(1))
            else:
                axes.append((2 * k + 1) / dim - 1)
        mesh = np.meshgrid(*axes, indexing="ij")  # spatial order: (D,) H, W
        coords = [*reversed(mesh), np.ones_like(mesh[0])]  # x, y, (z), 1
        base = np.stack(coords, axis=-1).reshape(-1, len(sp) + 1)  # (P, r + 1)
        grid = np.einsum("pk,nrk->npr", base, theta.astype(np.float64))
        return [grid.reshape(theta.shape[0], *sp, len(sp)).astype(theta.dtype)]


class MaxUnpoolOp(TopOp):
    """Scatter pooled values back to the positions recorded by MaxPool's indices; zeros elsewhere."""

    name = "top.MaxUnpool"
    input = operand(AnyTensor)
    indices = operand(AnyTensor)
    output_shape = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    kernel_shape = prop(I64ArrayAttr)
    pads = prop(I64ArrayAttr, optional=True)
    strides = prop(I64ArrayAttr, optional=True)
    shape_operands = ("output_shape",)

    def infer_shapes(self) -> list[Type]:
        xs, vals = shape_of(self.input), known_values(self.output_shape)
        if xs is None or vals is None or DYNAMIC in xs:
            return self.unranked_results()
        if vals[0] is not None:
            return [tensor_of(_ints(vals[0]), elem_of(self.input))]
        nd = len(xs) - 2
        k = list(self.kernel_shape)
        s = list(self.strides or [1] * nd)
        p = list(self.pads or [0] * (2 * nd))
        sp = [(xs[2 + i] - 1) * s[i] - p[i] - p[i + nd] + k[i] for i in range(nd)]
        return [tensor_of([*xs[:2], *sp], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, idx, oshape = inputs
        nd = x.ndim - 2
        k = list(self.kernel_shape)
        s = list(self.strides or [1] * nd)
        p = list(self.pads or [0] * (2 * nd))
        inferred = [*x.shape[:2], *((x.shape[2 + i] - 1) * s[i] - p[i] - p[i + nd] + k[i] for i in range(nd))]
        y = np.zeros(math.prod(inferred), dtype=x.dtype)
        y[np.asarray(idx).reshape(-1)] = x.reshape(-1)
        y = y.reshape(inferred)
        if oshape is None:
            return [y]
        # indices address the inferred shape; a larger output_shape pads at the end
        out = np.zeros(_ints(oshape), dtype=x.dtype)
        out[tuple(slice(0, d) for d in inferred)] = y
        return [out]


class BitCastOp(TopOp):
    """Reinterpret the bytes of ``input`` as the result's element type (same bit width)."""

    name = "top.BitCast"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        from .base import elem_of

        return [tensor_of(shape_of(self.input), elem_of(self.output))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        return [(x if x.flags.c_contiguous else x.copy()).view(result_dtype(self))]

    flops_per_element = 0  # data movement: no arithmetic


class DetOp(TopOp):
    """Determinant of the trailing square matrices."""

    name = "top.Det"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        from .base import elem_of

        s = shape_of(self.input)
        return [tensor_of(None if s is None else s[:-2], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        return [np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)]


MISC_OPS: list[type[TopOp]] = [
    UniqueOp,
    CenterCropPadOp,
    Col2ImOp,
    AffineGridOp,
    MaxUnpoolOp,
    BitCastOp,
    DetOp,
]

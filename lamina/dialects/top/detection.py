"""Detection and sampling ``top`` ops: NonMaxSuppression (``top.Nms``), ``top.GridSample`` and
``top.RoiAlign``, with ONNX semantics (the onnx reference implementation and onnxruntime agree).

All three are vectorized: NMS computes one IoU matrix per batch and does the greedy selection with
boolean masks; GridSample gathers the ``2**r`` (linear) or ``4**r`` (cubic) taps for all output
points at once; RoiAlign builds, per ROI, separable sampling matrices (``avg``) or gathers the four
bilinear taps of every sampling point (``max``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import Type, i64

from .base import (
    AnyTensor,
    AnyTensorOrNone,
    BoolAttr,
    BoolProp,
    F,
    F64Attr,
    I,
    I64Attr,
    S,
    StrEnum,
    TopOp,
    elem_of,
    num_elements,
    shape_of,
    tensor_of,
)

# ---- NonMaxSuppression ------------------------------------------------------------------------


def _scalar(v: Any, default: float) -> float:
    if v is None:
        return default
    a = np.asarray(v).reshape(-1)
    return a[0].item() if a.size else default


def _corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(y1, x1, y2, x2) with y1 <= y2, x1 <= x2, of boxes (N, 4)."""
    if center_point_box:
        xc, yc, w, h = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
        return yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
    y1, x1, y2, x2 = boxes[:, 0], boxes[:, 1], boxes[:, 2], boxes[:, 3]
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def _iou_matrix(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    y1, x1, y2, x2 = _corners(boxes, center_point_box)
    iy = np.minimum(y2[:, None], y2[None, :]) - np.maximum(y1[:, None], y1[None, :])
    ix = np.minimum(x2[:, None], x2[None, :]) - np.maximum(x1[:, None], x1[None, :])
    inter = np.where((iy > 0) & (ix > 0), iy * ix, 0)
    area = (y2 - y1) * (x2 - x1)
    union = area[:, None] + area[None, :] - inter
    valid = (inter > 0) & (area[:, None] > 0) & (area[None, :] > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(valid, inter / np.where(union > 0, union, 1), 0)


class NmsOp(TopOp):
    """ONNX NonMaxSuppression: greedy per-(batch, class) selection by score; returns
    ``(num_selected, 3)`` int64 rows ``[batch, class, box]``."""

    name = "top.Nms"
    data_dependent = True
    boxes = operand(AnyTensor)
    scores = operand(AnyTensor)
    max_output_boxes_per_class = operand(AnyTensorOrNone)
    iou_threshold = operand(AnyTensorOrNone)
    score_threshold = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    center_point_box = prop(I64Attr, default=I(0))

    def infer_shapes(self) -> list[Type]:
        from lamina.ir.types import DYNAMIC

        return [tensor_of([DYNAMIC, 3], i64)]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        boxes, scores, max_out, iou_t, score_t = inputs
        max_per_class = max(int(_scalar(max_out, 0)), 0)
        iou_thr = _scalar(iou_t, 0.0)
        has_score_t = score_t is not None and np.asarray(score_t).size > 0
        score_thr = _scalar(score_t, 0.0)
        cpb = self.center_point_box
        rows: list[np.ndarray] = []
        if max_per_class == 0:
            return [np.zeros((0, 3), dtype=np.int64)]
        nb, nc = scores.shape[:2]
        for b in range(nb):
            iou = _iou_matrix(boxes[b], cpb)
            suppress = iou > iou_thr
            for c in range(nc):
                s = scores[b, c]
                order = np.argsort(-s, kind="stable")  # by score descending, ties by lower index
                if has_score_t:
                    order = order[s[order] > score_thr]
                alive = np.ones(order.size, dtype=bool)
                sub = suppress[np.ix_(order, order)]
                chosen: list[int] = []
                for i in range(order.size):
                    if not alive[i]:
                        continue
                    chosen.append(int(order[i]))
                    if len(chosen) >= max_per_class:
                        break
                    alive &= ~sub[i]
                if chosen:
                    r = np.empty((len(chosen), 3), dtype=np.int64)
                    r[:, 0] = b
                    r[:, 1] = c
                    r[:, 2] = chosen
                    rows.append(r)
        return [np.concatenate(rows) if rows else np.zeros((0, 3), dtype=np.int64)]

    def flops(self) -> int:
        bs = shape_of(self.boxes)
        ss = shape_of(self.scores)
        if not bs or not ss or min(bs + ss) < 0:
            return 0
        return 10 * bs[0] * bs[1] * bs[1] + ss[0] * ss[1] * bs[1] * max(1, int(math.log2(max(bs[1], 2))))


# ---- GridSample -------------------------------------------------------------------------------


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect coordinates by the near border until inside ``[lo, hi]`` (PyTorch/ONNX semantics)."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    dlo = lo - x
    nlo = np.trunc(dlo / rng)
    rlo = dlo - nlo * rng
    below = np.where(nlo % 2 == 0, lo + rlo, hi - rlo)
    dhi = x - hi
    nhi = np.trunc(dhi / rng)
    rhi = dhi - nhi * rng
    above = np.where(nhi % 2 == 0, hi - rhi, lo + rhi)
    return np.where(x < lo, below, np.where(x > hi, above, x))


def _cubic_coeffs(t: np.ndarray, a: float = -0.75) -> list[np.ndarray]:
    def k(d: np.ndarray) -> np.ndarray:
        d = np.abs(d)
        return np.where(
            d <= 1,
            ((a + 2) * d - (a + 3)) * d * d + 1,
            np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0),
        )

    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


class GridSampleOp(TopOp):
    """ONNX GridSample (opsets 16 and 20, any number of spatial dims): sample ``input`` (N, C, *D)
    at the normalized coordinates of ``grid`` (N, *O, r), last grid entry indexing the first spatial dim.
    """

    name = "top.GridSample"
    input = operand(AnyTensor)
    grid = operand(AnyTensor)
    output = result_def(AnyTensor)
    mode = prop(StrEnum("linear", "nearest", "cubic"), default=S("linear"))
    padding_mode = prop(StrEnum("zeros", "border", "reflection"), default=S("zeros"))
    align_corners = prop(BoolProp, default=BoolAttr(False))

    def infer_shapes(self) -> list[Type]:
        xs, gs = shape_of(self.input), shape_of(self.grid)
        if xs is None or gs is None:
            return [tensor_of(None, elem_of(self.input))]
        return [tensor_of([gs[0], xs[1], *gs[1:-1]], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, grid = inputs
        n, c = x.shape[:2]
        dims = x.shape[2:]
        r = len(dims)
        osp = grid.shape[1:-1]
        if n == 0 or c == 0 or math.prod(osp) == 0:
            return [np.zeros((n, c, *osp), dtype=x.dtype)]
        mode = self.mode
        pad = self.padding_mode
        ac = bool(self.align_corners)
        g = grid.reshape(n, -1, r).astype(np.float64)  # (N, P, r)
        coords: list[np.ndarray] = []
        borders: list[tuple[float, float]] = []
        for i, d in enumerate(dims):
            gi = g[:, :, r - 1 - i]  # grid is in reverse dimension order (x, y, z)
            xi = (gi + 1) / 2 * (d - 1) if ac else ((gi + 1) * d - 1) / 2
            lo, hi = (0.0, d - 1.0) if ac else (-0.5, d - 0.5)
            if mode == "nearest":
                xi = np.rint(xi)
            if mode == "cubic":
                pass  # as PyTorch and onnxruntime: bicubic pads each tap, not the sample coordinate
            elif pad == "border":
                xi = np.where((xi < lo) | (xi > hi), np.clip(xi, 0, d - 1), xi)
            elif pad == "reflection":
                xi = _reflect(xi, lo, hi)
            coords.append(xi)
            borders.append((lo, hi))

        def tap_index(i: int, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
            """Integer index along dim ``i`` and the validity mask (zeros padding)."""
            d = dims[i]
            if pad == "zeros":
                ok = (idx >= 0) & (idx < d)
                return np.clip(idx, 0, d - 1), ok
            if pad == "border":
                return np.clip(idx, 0, d - 1), None
            lo, hi = borders[i]
            return np.clip(
                np.trunc(_reflect(idx.astype(np.float64), lo, hi)).astype(np.int64), 0, d - 1
            ), None

        if mode == "nearest":
            taps_per_dim = [[(coords[i].astype(np.int64), None)] for i in range(r)]
        else:
            taps_per_dim = []
            for i in range(r):
                base = np.floor(coords[i])
                t = coords[i] - base
                b = base.astype(np.int64)
                if mode == "linear":
                    taps_per_dim.append([(b, 1 - t), (b + 1, t)])
                else:
                    w = _cubic_coeffs(t)
                    taps_per_dim.append([(b + o, w[o + 1]) for o in range(-1, 3)])
        xf = x.reshape(n, c, -1)
        strides = [math.prod(dims[i + 1 :]) for i in range(r)]
        nidx = np.arange(n)[:, None, None]
        cidx = np.arange(c)[None, :, None]
        acc = np.zeros((n, c, g.shape[1]), dtype=np.float64)
        for combo in itertools.product(*taps_per_dim):
            lin = np.zeros(g.shape[:2], dtype=np.int64)
            weight: np.ndarray | None = None
            for i, (idx, w) in enumerate(combo):
                ii, ok = tap_index(i, idx)
                lin += ii * strides[i]
                if w is not None:
                    weight = w if weight is None else weight * w
                if ok is not None:
                    weight = ok.astype(np.float64) if weight is None else np.where(ok, weight, 0.0)
            vals = xf[nidx, cidx, lin[:, None, :]]
            acc += vals if weight is None else vals * weight[:, None, :]
        return [acc.reshape(n, c, *osp).astype(x.dtype)]

    def flops(self) -> int:
        return 8 * num_elements(self.output.type)


# ---- RoiAlign ---------------------------------------------------------------------------------


def _axis_samples(
    start: float, bin_size: float, pooled: int, grid: int, length: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Sampling along one axis: for each (pooled bin, sample) the low/high taps, their weights and
    whether the sample lies in range (``-1 <= v <= length``)."""
    p = np.arange(pooled, dtype=np.float64)[:, None]
    s = np.arange(grid, dtype=np.float64)[None, :]
    v = start + p * bin_size + (s + 0.5) * bin_size / grid  # (pooled, grid)
    ok = (v >= -1.0) & (v <= length)
    v = np.maximum(v, 0.0)
    lo = np.trunc(v).astype(np.int64)
    at_end = lo >= length - 1
    lo = np.where(at_end, length - 1, lo)
    hi = np.where(at_end, length - 1, lo + 1)
    v = np.where(at_end, lo.astype(np.float64), v)
    lw = v - lo
    return lo, hi, 1.0 - lw, lw, ok


class RoiAlignOp(TopOp):
    """ONNX RoiAlign: average (or max) of bilinear samples over each output bin of each ROI."""

    name = "top.RoiAlign"
    input = operand(AnyTensor)
    rois = operand(AnyTensor)
    batch_indices = operand(AnyTensor)
    output = result_def(AnyTensor)
    coordinate_transformation_mode = prop(StrEnum("half_pixel", "output_half_pixel"), default=S("half_pixel"))
    mode = prop(StrEnum("avg", "max"), default=S("avg"))
    output_height = prop(I64Attr, default=I(1))
    output_width = prop(I64Attr, default=I(1))
    sampling_ratio = prop(I64Attr, default=I(0))
    spatial_scale = prop(F64Attr, default=F(1.0))

    def infer_shapes(self) -> list[Type]:
        xs, rs = shape_of(self.input), shape_of(self.rois)
        if xs is None or rs is None:
            return [tensor_of(None, elem_of(self.input))]
        return [tensor_of([rs[0], xs[1], self.output_height, self.output_width], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, rois, bidx = inputs
        _, c, h, w = x.shape
        ph, pw = self.output_height, self.output_width
        scale = self.spatial_scale
        sr = self.sampling_ratio
        half = self.coordinate_transformation_mode == "half_pixel"
        is_max = self.mode == "max"
        off = 0.5 if half else 0.0
        rois64 = np.asarray(rois, dtype=np.float64)
        bidx = np.asarray(bidx).reshape(-1).astype(np.int64)
        out = np.empty((rois64.shape[0], c, ph, pw), dtype=x.dtype)
        xw = x.astype(np.float64, copy=False)
        for r in range(rois64.shape[0]):
            x1, y1, x2, y2 = (rois64[r, :4] * scale - off).tolist()
            rw, rh = x2 - x1, y2 - y1
            if not half:
                rw, rh = max(rw, 1.0), max(rh, 1.0)
            bh, bw = rh / ph, rw / pw
            gh = sr if sr > 0 else math.ceil(rh / ph)
            gw = sr if sr > 0 else math.ceil(rw / pw)
            feat = xw[bidx[r]]  # (C, H, W)
            if gh <= 0 or gw <= 0:
                out[r] = 0
                continue
            ylo, yhi, wyl, wyh, oky = _axis_samples(y1, bh, ph, gh, h)
            xlo, xhi, wxl, wxh, okx = _axis_samples(x1, bw, pw, gw, w)
            if not is_max:
                # separable: out[c] = Ay @ feat[c] @ Ax.T / count
                ay = np.zeros((ph, h))
                for lo, wt in ((ylo, wyl), (yhi, wyh)):
                    np.add.at(ay, (np.repeat(np.arange(ph), gh), lo.reshape(-1)), (wt * oky).reshape(-1))
                ax = np.zeros((pw, w))
                for lo, wt in ((xlo, wxl), (xhi, wxh)):
                    np.add.at(ax, (np.repeat(np.arange(pw), gw), lo.reshape(-1)), (wt * okx).reshape(-1))
                out[r] = (ay @ feat @ ax.T) / max(gh * gw, 1)
                continue
            # max: per sample, the max of the four weighted taps; then the max over the bin's samples
            best = None
            for yi, wy in ((ylo, wyl), (yhi, wyh)):
                for xi, wx in ((xlo, wxl), (xhi, wxh)):
                    v = feat[:, yi[:, :, None, None], xi[None, None, :, :]]  # (C, ph, gh, pw, gw)
                    wt = (wy * oky)[:, :, None, None] * (wx * okx)[None, None, :, :]
                    v = v * wt
                    best = v if best is None else np.maximum(best, v)
            out[r] = best.max(axis=(2, 4))  # type: ignore[union-attr]
        return [out]

    def flops(self) -> int:
        return 16 * num_elements(self.output.type)


DETECTION_OPS: list[type[TopOp]] = [NmsOp, GridSampleOp, RoiAlignOp]

"""Shape-manipulation and data-movement ``top`` ops: Reshape, Permute, Concat, Split, Slice,
Squeeze/Unsqueeze, Flatten, Shape, Size, ConstantOfShape, Expand, Tile, Gather*, Scatter*, Pad,
Range, Trilu, DepthToSpace/SpaceToDepth, TopK, NonZero, OneHot, Compress, EyeLike, ...

Operands that ONNX lets be runtime tensors (a Reshape's shape, a Slice's starts) are operands;
``infer_shapes`` reads them when they are ``top.Weight`` constants.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.ir.attributes import dtype_to_element_type
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import operand, prop, result_def, var_operand, var_result
from lamina.ir.types import DYNAMIC, Type, i64

from .base import (
    AnyTensor,
    AnyTensorOrNone,
    BoolAttr,
    BoolProp,
    ElementsAttrC,
    I,
    I64ArrayAttr,
    I64Attr,
    S,
    StrEnum,
    TopOp,
    check_axis,
    const_value,
    elem_of,
    is_none,
    norm_axis,
    result_dtype,
    shape_of,
    tensor_of,
)


def _ints(a: Any) -> list[int]:
    return [int(x) for x in np.asarray(a).reshape(-1)]


def _dim_product(dims: Sequence[int]) -> int:
    """The product of ``dims`` (dynamic if any is)."""
    return DYNAMIC if DYNAMIC in dims else int(np.prod(dims, dtype=np.int64))


def _dim_mul(d: int, n: int) -> int:
    return DYNAMIC if d == DYNAMIC else d * n


def _dim_div(d: int, n: int) -> int:
    return DYNAMIC if d == DYNAMIC else d // n


def _slices(
    rank: int, shape: Sequence[int], starts: list[int], ends: list[int], axes: list[int], steps: list[int]
) -> list[tuple[int, slice]]:
    """ONNX Slice's (axis, slice) pairs with starts and ends clamped to each dim (dynamic dims
    get ``slice(None)``)."""
    out = []
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = norm_axis(a, rank)
        d = shape[a]
        if d == DYNAMIC:
            out.append((a, slice(None)))
            continue
        if st > 0:
            s = max(0, min(d, s + d if s < 0 else s))
            e = max(0, min(d, e + d if e < 0 else e))
        else:
            s = max(-1, min(d - 1, s + d if s < 0 else s))
            e = max(-1, min(d - 1, e + d if e < 0 else e))
            if e == -1:
                e = None  # type: ignore[assignment]
        out.append((a, slice(s, e, st)))
    return out


def reshape_target(in_shape: Sequence[int], shape: Sequence[int], allowzero: bool) -> list[int]:
    out = list(shape)
    if not allowzero:
        for i, d in enumerate(out):
            if d == 0:
                out[i] = in_shape[i]
    return out


class ReshapeOp(TopOp):
    """Reshape to ``shape`` (0 copies the input dim unless ``allowzero``; -1 is inferred)."""

    name = "top.Reshape"
    input = operand(AnyTensor)
    shape = operand(AnyTensor)
    output = result_def(AnyTensor)
    allowzero = prop(BoolProp, default=BoolAttr(False))

    def infer_shapes(self) -> list[Type]:
        s, c = shape_of(self.input), const_value(self.shape)
        if c is None:
            n = shape_of(self.shape)
            return [tensor_of([DYNAMIC] * n[0] if n and n[0] >= 0 else None, elem_of(self.input))]
        tgt = _ints(c)
        if s is not None and DYNAMIC not in s:
            tgt = list(
                np.empty(s, dtype=np.bool_).reshape(reshape_target(s, tgt, bool(self.allowzero))).shape
            )
        elif -1 in tgt or 0 in tgt:
            tgt = [DYNAMIC if d in (-1, 0) else d for d in tgt]
        return [tensor_of(tgt, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, shape = inputs
        return [x.reshape(reshape_target(x.shape, _ints(shape), bool(self.allowzero)))]

    flops_per_element = 0  # data movement: no arithmetic


class PermuteOp(TopOp):
    """Transpose by ``order`` (ONNX Transpose; default reverses the dims)."""

    name = "top.Permute"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    order = prop(I64ArrayAttr, optional=True)

    def _perm(self, rank: int) -> list[int]:
        o = self.order
        return list(o) if o is not None else list(range(rank - 1, -1, -1))

    def verify_(self) -> None:
        s = shape_of(self.input)
        if s is not None and sorted(self._perm(len(s))) != list(range(len(s))):
            raise VerifyError(f"order {list(self._perm(len(s)))} is not a permutation of {len(s)} dims")

    def infer_shapes(self) -> list[Type]:
        s = shape_of(self.input)
        return [tensor_of(None if s is None else [s[i] for i in self._perm(len(s))], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        return [np.transpose(x, self._perm(x.ndim))]

    flops_per_element = 0  # data movement: no arithmetic


class ConcatOp(TopOp):
    name = "top.Concat"
    inputs = var_operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr)

    def _check_shapes(self) -> None:
        ranked = [v for v in self.operands if shape_of(v) is not None]
        if not ranked:
            return
        check_axis(self, ranked[0])
        shapes = [shape_of(v) for v in ranked]
        r = len(shapes[0])
        ax = norm_axis(self.axis, r)
        for s in shapes[1:]:
            if len(s) != r:
                raise VerifyError(f"inputs have different ranks: {[list(x) for x in shapes]}")
            if any(a != b and DYNAMIC not in (a, b) for i, (a, b) in enumerate(zip(shapes[0], s)) if i != ax):
                raise VerifyError(
                    f"input shapes {[list(x) for x in shapes]} differ outside the concatenation axis {ax}"
                )

    def infer_shapes(self) -> list[Type]:
        shapes = [shape_of(v) for v in self.operands]
        if any(s is None for s in shapes):
            return [tensor_of(None, elem_of(self.operands[0]))]
        self._check_shapes()
        ax = norm_axis(self.axis, len(shapes[0]))
        out = list(shapes[0])
        out[ax] = DYNAMIC if any(s[ax] == DYNAMIC for s in shapes) else sum(s[ax] for s in shapes)
        return [tensor_of(out, elem_of(self.operands[0]))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [np.concatenate(inputs, axis=self.axis)]

    flops_per_element = 0  # data movement: no arithmetic


class SplitOp(TopOp):
    """Split along ``axis`` into the given sizes (or ``num_outputs`` equal parts)."""

    name = "top.Split"
    shape_operands = ("split",)
    input = operand(AnyTensor)
    split = operand(AnyTensorOrNone)
    outputs = var_result(AnyTensor)
    axis = prop(I64Attr, default=I(0))
    num_outputs = prop(I64Attr, optional=True)

    def infer_shapes(self) -> list[Type]:
        check_axis(self, self.input)
        split, xs = const_value(self.split), shape_of(self.input)
        if split is not None and xs is not None:
            _split_sizes(self, xs[norm_axis(self.axis, len(xs))], split)
        if xs is None or (split is None and not is_none(self.split)):
            return self.unranked_results()
        ax = norm_axis(self.axis, len(xs))
        if xs[ax] == DYNAMIC:
            return self.unranked_results()
        sizes = _split_sizes(self, xs[ax], split)
        return [tensor_of([*xs[:ax], n, *xs[ax + 1 :]], elem_of(self.input)) for n in sizes]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, split = inputs
        ax = norm_axis(self.axis, x.ndim)
        sizes = _split_sizes(self, x.shape[ax], split)
        idx = np.cumsum(sizes)[:-1]
        return list(np.split(x, idx, axis=ax))

    flops_per_element = 0  # data movement: no arithmetic


def _split_sizes(op: SplitOp, d: int, split: Any) -> list[int]:
    """The part sizes of a Split of a dim of size ``d`` (``split`` None: equal parts)."""
    n = len(op.results)
    if split is None:
        k = -(-d // n)
        return [min(k, max(d - k * i, 0)) for i in range(n)]
    sizes = _ints(split)
    if d == DYNAMIC:
        return sizes
    if len(sizes) != n or any(s < 0 for s in sizes) or sum(sizes) != d:
        raise VerifyError(
            f"split sizes {sizes} must be {n} non-negative sizes adding up to the split dim {d}"
        )
    return sizes


class SliceOp(TopOp):
    """ONNX Slice: starts/ends/axes/steps operands (axes, steps may be none)."""

    name = "top.Slice"
    shape_operands = ("starts", "ends", "axes", "steps")
    input = operand(AnyTensor)
    starts = operand(AnyTensor)
    ends = operand(AnyTensor)
    axes = operand(AnyTensorOrNone)
    steps = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        vals = [None if is_none(v) else const_value(v) for v in self.operands[1:]]
        if (
            xs is None
            or vals[0] is None
            or vals[1] is None
            or any(v is None and not is_none(o) for v, o in zip(vals, self.operands[1:]))
        ):
            return self.unranked_results()
        starts, ends = _ints(vals[0]), _ints(vals[1])
        axes = _ints(vals[2]) if vals[2] is not None else list(range(len(starts)))
        steps = _ints(vals[3]) if vals[3] is not None else [1] * len(starts)
        out = list(xs)
        for a, sl in _slices(len(xs), xs, starts, ends, axes, steps):
            out[a] = DYNAMIC if xs[a] == DYNAMIC else len(range(*sl.indices(xs[a])))
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, starts, ends, axes, steps = inputs
        starts, ends = _ints(starts), _ints(ends)
        axes = _ints(axes) if axes is not None else list(range(len(starts)))
        steps = _ints(steps) if steps is not None else [1] * len(starts)
        sl = [slice(None)] * x.ndim
        for a, one in _slices(x.ndim, x.shape, starts, ends, axes, steps):
            sl[a] = one
        return [x[tuple(sl)]]

    flops_per_element = 0  # data movement: no arithmetic


class SqueezeOp(TopOp):
    name = "top.Squeeze"
    shape_operands = ("axes",)
    input = operand(AnyTensor)
    axes = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        if xs is None:
            return self.unranked_results()
        if is_none(self.axes):
            if DYNAMIC in xs:  # which dims are 1 is known at run time
                return self.unranked_results()
            return [tensor_of([d for d in xs if d != 1], elem_of(self.input))]
        axes = const_value(self.axes)
        if axes is None:
            return self.unranked_results()
        drop = set()
        for a in _ints(axes):  # numpy's messages, as when shapes were found by execution
            if not -len(xs) <= a < len(xs):
                raise VerifyError(f"axis {a} is out of bounds for array of dimension {len(xs)}")
            if norm_axis(a, len(xs)) in drop:
                raise VerifyError("duplicate value in 'axis'")
            drop.add(norm_axis(a, len(xs)))
        if any(xs[a] not in (1, DYNAMIC) for a in drop):
            raise VerifyError("cannot select an axis to squeeze out which has size not equal to one")
        return [tensor_of([d for i, d in enumerate(xs) if i not in drop], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, axes = inputs
        if axes is None:
            return [np.squeeze(x)]
        return [np.squeeze(x, axis=tuple(norm_axis(a, x.ndim) for a in _ints(axes)))]

    flops_per_element = 0  # data movement: no arithmetic


class UnsqueezeOp(TopOp):
    name = "top.Unsqueeze"
    shape_operands = ("axes",)
    input = operand(AnyTensor)
    axes = operand(AnyTensor)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        xs, axes = shape_of(self.input), const_value(self.axes)
        if xs is None or axes is None:
            return self.unranked_results()
        ax = _ints(axes)
        r = len(xs) + len(ax)
        out = list(xs)
        for a in ax:
            if not -r <= a < r:
                raise VerifyError(f"axis {a} is out of bounds for array of dimension {r}")
        if len({norm_axis(a, r) for a in ax}) != len(ax):
            raise VerifyError("repeated axis")
        for a in sorted(norm_axis(a, r) for a in ax):
            out.insert(a, 1)
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, axes = inputs
        ax = _ints(axes)
        r = x.ndim + len(ax)
        return [np.expand_dims(x, tuple(sorted(norm_axis(a, r) for a in ax)))]

    flops_per_element = 0  # data movement: no arithmetic


class FlattenOp(TopOp):
    name = "top.Flatten"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(1))

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        if xs is None:
            return self.unranked_results()
        ax = norm_axis(self.axis, len(xs))
        return [tensor_of([_dim_product(xs[:ax]), _dim_product(xs[ax:])], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        ax = norm_axis(self.axis, x.ndim)
        lead = int(np.prod(x.shape[:ax], dtype=np.int64))
        return [x.reshape(lead, -1) if x.size else x.reshape(lead, int(np.prod(x.shape[ax:])))]

    flops_per_element = 0  # data movement: no arithmetic


class ShapeOp(TopOp):
    """The input's shape as an i64 tensor (dims ``start:end``)."""

    name = "top.Shape"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    start = prop(I64Attr, optional=True)
    end = prop(I64Attr, optional=True)

    def _range(self, rank: int) -> tuple[int, int]:
        s = self.start or 0
        e = self.end
        e = rank if e is None else e
        s = min(max(s + rank if s < 0 else s, 0), rank)
        e = min(max(e + rank if e < 0 else e, 0), rank)
        return s, e

    def infer_shapes(self) -> list[Type]:
        s = shape_of(self.input)
        if s is None:
            return [tensor_of([DYNAMIC], i64)]
        a, b = self._range(len(s))
        return [tensor_of([max(b - a, 0)], i64)]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        a, b = self._range(x.ndim)
        return [np.array(x.shape[a:b], dtype=np.int64)]

    flops_per_element = 0  # data movement: no arithmetic


class SizeOp(TopOp):
    name = "top.Size"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        return [tensor_of([], i64)]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [np.array(inputs[0].size, dtype=np.int64)]

    flops_per_element = 0  # data movement: no arithmetic


class ConstantOfShapeOp(TopOp):
    """A tensor of the given (runtime) shape filled with ``value`` (a one-element tensor)."""

    name = "top.ConstantOfShape"
    shape_operands = ("shape",)
    shape = operand(AnyTensor)
    output = result_def(AnyTensor)
    value = prop(ElementsAttrC, optional=True)

    def infer_shapes(self) -> list[Type]:
        shape = const_value(self.shape)
        if shape is None:
            return [tensor_of(None, elem_of(self.output))]
        dims = _ints(shape)
        if any(d < 0 for d in dims):
            raise VerifyError(f"shape {dims} has negative dims")
        return [tensor_of(dims, elem_of(self.output))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        v = self.value
        fill = np.asarray(v).reshape(-1)[0] if v is not None else np.float32(0)
        return [np.full(_ints(inputs[0]), fill, dtype=result_dtype(self))]


class ExpandOp(TopOp):
    """Broadcast to ``shape`` (bidirectionally, as ONNX Expand)."""

    name = "top.Expand"
    shape_operands = ("shape",)
    input = operand(AnyTensor)
    shape = operand(AnyTensor)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        shape, xs = const_value(self.shape), shape_of(self.input)
        if shape is None or xs is None or DYNAMIC in xs:
            return [tensor_of(None, elem_of(self.input))]
        try:
            out = np.broadcast_shapes(tuple(xs), tuple(_ints(shape)))
        except ValueError:
            raise VerifyError(f"cannot expand shape {list(xs)} to {_ints(shape)}") from None
        return [tensor_of(list(out), elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, shape = inputs
        out = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
        return [np.array(np.broadcast_to(x, out))]

    flops_per_element = 0  # data movement: no arithmetic


class TileOp(TopOp):
    name = "top.Tile"
    shape_operands = ("repeats",)
    input = operand(AnyTensor)
    repeats = operand(AnyTensor)
    output = result_def(AnyTensor)

    def infer_shapes(self) -> list[Type]:
        reps, xs = const_value(self.repeats), shape_of(self.input)
        if reps is None or xs is None:
            return [tensor_of(None, elem_of(self.input))]
        r = _ints(reps)
        if len(r) != len(xs) or any(n < 0 for n in r):
            raise VerifyError(f"repeats {r} must be {len(xs)} non-negative counts (one per input dim)")
        return [tensor_of([DYNAMIC if d == DYNAMIC else d * n for d, n in zip(xs, r)], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [np.tile(inputs[0], _ints(inputs[1]))]

    flops_per_element = 0  # data movement: no arithmetic


def _fix_indices(idx: np.ndarray, dim: int) -> np.ndarray:
    idx = idx.astype(np.int64, copy=False)
    return np.where(idx < 0, idx + dim, idx)


def _check_indices(indices: Any, d: int, axis: int) -> None:
    """Raise IndexError (numpy's message) if constant ``indices`` fall outside a dim of size ``d``."""
    idx = const_value(indices)
    if idx is None or d == DYNAMIC or idx.size == 0:
        return
    bad = idx[(idx < -d) | (idx >= d)]
    if bad.size:
        raise IndexError(f"index {int(bad.reshape(-1)[0])} is out of bounds for axis {axis} with size {d}")


class GatherOp(TopOp):
    name = "top.Gather"
    input = operand(AnyTensor)
    indices = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(0))

    def infer_shapes(self) -> list[Type]:
        check_axis(self, self.operands[0])
        xs, idx = shape_of(self.input), shape_of(self.indices)
        if xs is None or idx is None:
            return self.unranked_results()
        ax = norm_axis(self.axis, len(xs))
        _check_indices(self.indices, xs[ax], ax)
        return [tensor_of([*xs[:ax], *idx, *xs[ax + 1 :]], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, idx = inputs
        ax = norm_axis(self.axis, x.ndim)
        return [np.take(x, _fix_indices(idx, x.shape[ax]), axis=ax)]

    flops_per_element = 0  # data movement: no arithmetic


class GatherElementsOp(TopOp):
    name = "top.GatherElements"
    input = operand(AnyTensor)
    indices = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(0))

    def infer_shapes(self) -> list[Type]:
        check_axis(self, self.input)
        xs = shape_of(self.input)
        if xs is not None:
            ax = norm_axis(self.axis, len(xs))
            _check_indices(self.indices, xs[ax], ax)
        return [tensor_of(shape_of(self.indices), elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, idx = inputs
        ax = norm_axis(self.axis, x.ndim)
        return [np.take_along_axis(x, _fix_indices(idx, x.shape[ax]), axis=ax)]

    flops_per_element = 0  # data movement: no arithmetic


class GatherNDOp(TopOp):
    name = "top.GatherND"
    input = operand(AnyTensor)
    indices = operand(AnyTensor)
    output = result_def(AnyTensor)
    batch_dims = prop(I64Attr, default=I(0))

    def infer_shapes(self) -> list[Type]:
        xs, idx = shape_of(self.input), shape_of(self.indices)
        if xs is None or idx is None or not idx or idx[-1] == DYNAMIC:
            return self.unranked_results()
        b, k = self.batch_dims, idx[-1]
        return [tensor_of([*idx[:-1], *xs[b + k :]], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, idx = inputs
        b = self.batch_dims
        idx = idx.astype(np.int64)
        k = idx.shape[-1]
        bshape = x.shape[:b]
        nb = int(np.prod(bshape, dtype=np.int64))
        xr = x.reshape((nb, *x.shape[b:]))
        ir = idx.reshape((nb, -1, k))
        dims = np.array(x.shape[b : b + k])
        ir = np.where(ir < 0, ir + dims, ir)
        bi = np.arange(nb)[:, None]
        out = xr[(bi, *[ir[..., j] for j in range(k)])]
        return [out.reshape(idx.shape[:-1] + x.shape[b + k :])]

    flops_per_element = 0  # data movement: no arithmetic


def _scatter_reduce(dst: np.ndarray, index: tuple, upd: np.ndarray, reduction: str) -> None:
    if reduction == "none":
        dst[index] = upd
    elif reduction == "add":
        np.add.at(dst, index, upd)
    elif reduction == "mul":
        np.multiply.at(dst, index, upd)
    elif reduction == "max":
        np.maximum.at(dst, index, upd)
    elif reduction == "min":
        np.minimum.at(dst, index, upd)


class ScatterElementsOp(TopOp):
    name = "top.ScatterElements"
    input = operand(AnyTensor)
    indices = operand(AnyTensor)
    updates = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(0))
    reduction = prop(StrEnum("none", "add", "mul", "max", "min"), default=S("none"))

    def infer_shapes(self) -> list[Type]:
        return [self.input.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, idx, upd = inputs
        ax = norm_axis(self.axis, x.ndim)
        out = np.array(x)
        idx = _fix_indices(idx, x.shape[ax])
        grids = list(np.indices(idx.shape, sparse=True))
        grids[ax] = idx
        _scatter_reduce(out, tuple(grids), upd, self.reduction)
        return [out]


class ScatterNDOp(TopOp):
    name = "top.ScatterND"
    input = operand(AnyTensor)
    indices = operand(AnyTensor)
    updates = operand(AnyTensor)
    output = result_def(AnyTensor)
    reduction = prop(StrEnum("none", "add", "mul", "max", "min"), default=S("none"))

    def infer_shapes(self) -> list[Type]:
        return [self.input.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, idx, upd = inputs
        out = np.array(x)
        idx = idx.astype(np.int64)
        k = idx.shape[-1]
        flat = idx.reshape(-1, k)
        u = upd.reshape((flat.shape[0], *x.shape[k:]))
        _scatter_reduce(out, tuple(flat[:, j] for j in range(k)), u, self.reduction)
        return [out]


class PadOp(TopOp):
    """Pad with ``pads`` ([begins..., ends...], negative crops) in ``mode``."""

    name = "top.Pad"
    shape_operands = ("pads", "axes")
    input = operand(AnyTensor)
    pads = operand(AnyTensor)
    constant_value = operand(AnyTensorOrNone)
    axes = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    mode = prop(StrEnum("constant", "reflect", "edge", "wrap"), default=S("constant"))

    def infer_shapes(self) -> list[Type]:
        xs, pads = shape_of(self.input), const_value(self.pads)
        axes = None if is_none(self.axes) else const_value(self.axes)
        if xs is None or pads is None or (axes is None and not is_none(self.axes)):
            return self.unranked_results()
        p, r = _ints(pads), len(xs)
        ax = [norm_axis(a, r) for a in _ints(axes)] if axes is not None else list(range(r))
        out = list(xs)
        for i, a in enumerate(ax):
            out[a] = DYNAMIC if xs[a] == DYNAMIC else xs[a] + p[i] + p[i + len(ax)]
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, pads, cval, axes = inputs
        p = _ints(pads)
        r = x.ndim
        ax = [norm_axis(a, r) for a in _ints(axes)] if axes is not None else list(range(r))
        n = len(ax)
        width = [[0, 0] for _ in range(r)]
        for i, a in enumerate(ax):
            width[a] = [p[i], p[i + n]]
        # negative pads crop
        crop = tuple(
            slice(-b if b < 0 else 0, x.shape[i] + e if e < 0 else None) for i, (b, e) in enumerate(width)
        )
        x = x[crop]
        width = [(max(b, 0), max(e, 0)) for b, e in width]
        mode = self.mode
        if mode == "constant":
            c = np.asarray(cval).reshape(-1)[0] if cval is not None and np.asarray(cval).size else 0
            return [np.pad(x, width, mode="constant", constant_values=c)]
        return [np.pad(x, width, mode={"reflect": "reflect", "edge": "edge", "wrap": "wrap"}[mode])]

    flops_per_element = 0  # data movement: no arithmetic


class RangeOp(TopOp):
    name = "top.Range"
    data_dependent = True
    start = operand(AnyTensor)
    limit = operand(AnyTensor)
    delta = operand(AnyTensor)
    output = result_def(AnyTensor)

    @staticmethod
    def _count(inputs: Sequence[Any]) -> tuple[Any, Any, int]:
        """start, delta and the number of elements ceil((limit - start) / delta) (at least 0)."""
        s, l_, d = (np.asarray(v).reshape(()) for v in inputs)
        return s, d, max(int(np.ceil((l_ - s) / d)), 0)

    def infer_shapes(self) -> list[Type]:
        vals = [const_value(v) for v in self.operands]
        if all(v is not None for v in vals):
            return [tensor_of([self._count(vals)[2]], elem_of(self.start))]
        return [tensor_of([DYNAMIC], elem_of(self.start))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        s, d, n = self._count(inputs)
        return [(s + np.arange(n, dtype=s.dtype) * d).astype(s.dtype)]


class TriluOp(TopOp):
    name = "top.Trilu"
    input = operand(AnyTensor)
    k = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    upper = prop(BoolProp, default=BoolAttr(True))

    def infer_shapes(self) -> list[Type]:
        return [self.input.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, k = inputs
        kk = int(np.asarray(k).reshape(-1)[0]) if k is not None else 0
        return [np.triu(x, kk) if self.upper else np.tril(x, kk)]

    flops_per_element = 0  # data movement: no arithmetic


class DepthToSpaceOp(TopOp):
    name = "top.DepthToSpace"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    blocksize = prop(I64Attr)
    mode = prop(StrEnum("DCR", "CRD"), default=S("DCR"))

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        if xs is None or len(xs) != 4:
            return self.unranked_results()
        n, c, h, w = xs
        b = self.blocksize
        if c != DYNAMIC and c % (b * b):
            raise VerifyError(f"{c} channels are not a multiple of blocksize {b} squared")
        out = [n, _dim_div(c, b * b), _dim_mul(h, b), _dim_mul(w, b)]
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        b = self.blocksize
        n, c, h, w = x.shape
        if self.mode == "DCR":
            t = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            t = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return [t.reshape(n, c // (b * b), h * b, w * b)]

    flops_per_element = 0  # data movement: no arithmetic


class SpaceToDepthOp(TopOp):
    name = "top.SpaceToDepth"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    blocksize = prop(I64Attr)

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        if xs is None or len(xs) != 4:
            return self.unranked_results()
        n, c, h, w = xs
        b = self.blocksize
        if any(d != DYNAMIC and d % b for d in (h, w)):
            raise VerifyError(f"spatial size {h}x{w} is not a multiple of blocksize {b}")
        out = [n, _dim_mul(c, b * b), _dim_div(h, b), _dim_div(w, b)]
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        b = self.blocksize
        n, c, h, w = x.shape
        t = x.reshape(n, c, h // b, b, w // b, b).transpose(0, 3, 5, 1, 2, 4)
        return [t.reshape(n, c * b * b, h // b, w // b)]

    flops_per_element = 0  # data movement: no arithmetic


class TopKOp(TopOp):
    name = "top.TopK"
    data_dependent = True
    input = operand(AnyTensor)
    K = operand(AnyTensor)
    values = result_def(AnyTensor)
    indices = result_def(AnyTensorOrNone)
    axis = prop(I64Attr, default=I(-1))
    largest = prop(BoolProp, default=BoolAttr(True))
    sorted = prop(BoolProp, default=BoolAttr(True))

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, k = inputs
        k = int(np.asarray(k).reshape(-1)[0])
        ax = norm_axis(self.axis, x.ndim)
        if self.largest:
            # stable: larger values first, ties by lower index
            order = np.argsort(
                -x if x.dtype.kind != "u" else np.iinfo(x.dtype).max - x, axis=ax, kind="stable"
            )
        else:
            order = np.argsort(x, axis=ax, kind="stable")
        idx = np.take(order, np.arange(k), axis=ax)
        return [np.take_along_axis(x, idx, axis=ax), idx.astype(np.int64)]


class NonZeroOp(TopOp):
    name = "top.NonZero"
    data_dependent = True
    input = operand(AnyTensor)
    output = result_def(AnyTensor)

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [np.array(np.nonzero(inputs[0]), dtype=np.int64).reshape(inputs[0].ndim, -1)]


class OneHotOp(TopOp):
    name = "top.OneHot"
    shape_operands = ("depth",)
    indices = operand(AnyTensor)
    depth = operand(AnyTensor)
    values = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(-1))

    def infer_shapes(self) -> list[Type]:
        idx, depth = shape_of(self.indices), const_value(self.depth)
        if idx is None or depth is None:
            return self.unranked_results()
        out = list(idx)
        out.insert(norm_axis(self.axis, len(idx) + 1), int(np.asarray(depth).reshape(-1)[0]))
        return [tensor_of(out, elem_of(self.values))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        idx, depth, vals = inputs
        d = int(np.asarray(depth).reshape(-1)[0])
        idx = np.asarray(idx).astype(np.int64)
        idx = np.where(idx < 0, idx + d, idx)
        r = idx.ndim + 1
        ax = norm_axis(self.axis, r)
        shape = [1] * r
        shape[ax] = d
        rng = np.arange(d).reshape(shape)
        hot = np.expand_dims(idx, ax) == rng
        off, on = np.asarray(vals).reshape(-1)[:2]
        return [np.where(hot, on, off).astype(vals.dtype)]


class CompressOp(TopOp):
    name = "top.Compress"
    data_dependent = True
    input = operand(AnyTensor)
    condition = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, optional=True)

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, c = inputs
        return [np.compress(np.asarray(c, bool).reshape(-1), x, axis=self.axis)]


class EyeLikeOp(TopOp):
    name = "top.EyeLike"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    k = prop(I64Attr, default=I(0))

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        if xs is None:
            return self.unranked_results()
        return [tensor_of(list(xs[:2]), dtype_to_element_type(result_dtype(self)))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        return [np.eye(x.shape[0], x.shape[1], k=self.k, dtype=result_dtype(self))]


class ReverseSequenceOp(TopOp):
    name = "top.ReverseSequence"
    input = operand(AnyTensor)
    sequence_lens = operand(AnyTensor)
    output = result_def(AnyTensor)
    batch_axis = prop(I64Attr, default=I(1))
    time_axis = prop(I64Attr, default=I(0))

    def infer_shapes(self) -> list[Type]:
        return [self.input.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, lens = inputs
        out = np.array(x)
        ba, ta = self.batch_axis, self.time_axis
        for b, n in enumerate(_ints(lens)):
            src = [slice(None)] * x.ndim
            src[ba] = b
            src[ta] = slice(0, n)
            dst = list(src)
            dst[ta] = slice(n - 1, None, -1) if n > 0 else slice(0, 0)
            out[tuple(src)] = x[tuple(dst)]
        return [out]


TENSOR_OPS: list[type[TopOp]] = [
    ReshapeOp,
    PermuteOp,
    ConcatOp,
    SplitOp,
    SliceOp,
    SqueezeOp,
    UnsqueezeOp,
    FlattenOp,
    ShapeOp,
    SizeOp,
    ConstantOfShapeOp,
    ExpandOp,
    TileOp,
    GatherOp,
    GatherElementsOp,
    GatherNDOp,
    ScatterElementsOp,
    ScatterNDOp,
    PadOp,
    RangeOp,
    TriluOp,
    DepthToSpaceOp,
    SpaceToDepthOp,
    TopKOp,
    NonZeroOp,
    OneHotOp,
    CompressOp,
    EyeLikeOp,
    ReverseSequenceOp,
]

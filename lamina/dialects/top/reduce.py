"""Reductions: ``top.Reduce`` (mode ReduceMean/Max/Min/Sum/Prod/L1/L2/LogSum/LogSumExp/SumSquare),
``top.Arg`` (ArgMax/ArgMin), ``top.CumSum`` / ``top.CumProd``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.execution.kernels.reduce import ordered_mean, ordered_sum
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import Type, i64

from .base import (
    AnyTensor,
    AnyTensorOrNone,
    BoolAttr,
    BoolProp,
    I,
    I64Attr,
    StrEnum,
    TopOp,
    const_value,
    elem_of,
    norm_axis,
    num_elements,
    shape_of,
    tensor_of,
)

_MODES = (
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceSum",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
)


def _acc(dt: np.dtype) -> np.dtype:
    """The dtype a sum of ``dt`` accumulates in: float32 for the 2-byte floats, else ``dt``."""
    return np.dtype(np.float32) if dt.kind in "fV" and dt.itemsize < 4 else dt


def _reduce(mode: str, x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    """Sums add in :func:`ordered_sum`'s fixed order, so a slice of the result is bit for bit the
    reduction of that slice of ``x`` (what a target computing in slices reproduces)."""
    dt = x.dtype

    def total(v: np.ndarray, keepdims: bool = keep, dtype: Any = None) -> np.ndarray:
        return ordered_sum(v, axes, keepdims=keepdims, dtype=dtype or _acc(v.dtype))

    if mode == "ReduceSum":
        r = total(x)
    elif mode == "ReduceMean":
        r = ordered_mean(x, axes, keepdims=keep, dtype=np.float64 if dt.kind in "iu" else _acc(dt))
    elif mode == "ReduceMax":
        r = np.max(x, axis=axes, keepdims=keep, initial=_lowest(dt))
    elif mode == "ReduceMin":
        r = np.min(x, axis=axes, keepdims=keep, initial=_highest(dt))
    elif mode == "ReduceProd":
        r = np.prod(x, axis=axes, keepdims=keep, dtype=dt)
    elif mode == "ReduceL1":
        r = total(np.abs(x))
    elif mode == "ReduceL2":
        r = np.sqrt(total(np.square(x.astype(np.float64) if dt.kind in "iu" else x)))
    elif mode == "ReduceLogSum":
        r = np.log(total(x))
    elif mode == "ReduceLogSumExp":
        xf = x.astype(np.float64)
        m = np.max(xf, axis=axes, keepdims=True, initial=-np.inf) if x.size else np.zeros([1] * x.ndim)
        m = np.where(np.isfinite(m), m, 0)
        r = np.log(total(np.exp(xf - m), keepdims=True)) + m
        if not keep:
            r = np.squeeze(r, axis=axes if axes is not None else None)
    else:  # ReduceSumSquare
        r = total(np.square(x))
    return np.asarray(r).astype(dt, copy=False)


def _lowest(dt: np.dtype) -> Any:
    if dt.kind == "f":
        return -np.inf
    if dt.kind == "b":
        return False
    return np.iinfo(dt).min


def _highest(dt: np.dtype) -> Any:
    if dt.kind == "f":
        return np.inf
    if dt.kind == "b":
        return True
    return np.iinfo(dt).max


class ReduceOp(TopOp):
    """Reduction over ``axes`` (an operand; none = all axes unless ``noop_with_empty_axes``)."""

    name = "top.Reduce"
    input = operand(AnyTensor)
    axes = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    mode = prop(StrEnum(*_MODES))
    keepdims = prop(BoolProp, default=BoolAttr(True))
    noop_with_empty_axes = prop(BoolProp, default=BoolAttr(False))

    def _axes(self, rank: int, axes: Any) -> tuple[int, ...] | None:
        if axes is None or np.asarray(axes).size == 0:
            return () if self.noop_with_empty_axes else None
        return tuple(sorted(norm_axis(int(a), rank) for a in np.asarray(axes).reshape(-1)))

    def infer_shapes(self) -> list[Type]:
        s = shape_of(self.input)
        c = const_value(self.axes) if not isinstance(self.axes.type, type(None)) else None
        from lamina.ir.types import NoneType

        if s is None or (c is None and not isinstance(self.axes.type, NoneType)):
            return [tensor_of(None, elem_of(self.input))]
        axes = self._axes(len(s), c)
        red = set(range(len(s))) if axes is None else set(axes)
        keep = self.keepdims
        out = (
            [1 if i in red else d for i, d in enumerate(s)]
            if keep
            else [d for i, d in enumerate(s) if i not in red]
        )
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, axes = inputs
        ax = self._axes(x.ndim, axes)
        if ax == ():
            return [x]
        with np.errstate(divide="ignore", invalid="ignore"):
            return [_reduce(self.mode, x, ax, bool(self.keepdims))]

    def flops(self) -> int:
        return num_elements(self.input.type)


class ArgOp(TopOp):
    """Index of the max/min along ``axis`` (i64)."""

    name = "top.Arg"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    mode = prop(StrEnum("ArgMax", "ArgMin"))
    axis = prop(I64Attr, default=I(0))
    keepdims = prop(BoolProp, default=BoolAttr(True))
    select_last_index = prop(BoolProp, default=BoolAttr(False))

    def infer_shapes(self) -> list[Type]:
        s = shape_of(self.input)
        if s is None:
            return [tensor_of(None, i64)]
        ax = norm_axis(self.axis, len(s))
        out = (
            [1 if i == ax else d for i, d in enumerate(s)]
            if self.keepdims
            else [d for i, d in enumerate(s) if i != ax]
        )
        return [tensor_of(out, i64)]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        ax = norm_axis(self.axis, x.ndim)
        fn = np.argmax if self.mode == "ArgMax" else np.argmin
        if self.select_last_index:
            xr = np.flip(x, axis=ax)
            r = x.shape[ax] - 1 - fn(xr, axis=ax)
        else:
            r = fn(x, axis=ax)
        if self.keepdims:
            r = np.expand_dims(r, ax)
        return [r.astype(np.int64)]


class CumSumOp(TopOp):
    name = "top.CumSum"
    input = operand(AnyTensor)
    axis = operand(AnyTensor)
    output = result_def(AnyTensor)
    exclusive = prop(BoolProp, default=BoolAttr(False))
    reverse = prop(BoolProp, default=BoolAttr(False))
    fn = staticmethod(np.cumsum)
    identity = 0

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, axis = inputs
        ax = norm_axis(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
        if self.reverse:
            x = np.flip(x, ax)
        r = type(self).fn(x, axis=ax, dtype=x.dtype)
        if self.exclusive:
            r = np.concatenate(
                [
                    np.full_like(np.take(r, [0], axis=ax), self.identity),
                    np.take(r, np.arange(r.shape[ax] - 1), axis=ax),
                ],
                axis=ax,
            )
        if self.reverse:
            r = np.flip(r, ax)
        return [np.ascontiguousarray(r)]


class CumProdOp(CumSumOp):
    name = "top.CumProd"
    fn = staticmethod(np.cumprod)
    identity = 1


REDUCE_OPS: list[type[TopOp]] = [ReduceOp, ArgOp, CumSumOp, CumProdOp]

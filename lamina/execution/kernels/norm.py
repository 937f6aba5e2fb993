"""Fast normalization kernels (LayerNorm, in-place Softmax). Their contracts are the ops'
``execute``; the property tests in ``tests/execution/kernels`` hold them to it. Inputs they do not
handle go to the ``fallback`` (the contract)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Step = Callable[[Sequence[Any]], Sequence[Any]]


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def layer_norm_kernel(axis: int, epsilon: float, fallback: Step) -> Step:
    """LayerNorm ``(x, w, b) -> [y, None, None]`` for float32 with only the normalized output
    wanted: one subtraction, one square, in-place scale and shift (no float64 temporaries). Bit for
    bit the contract: the same float32 operations in the same order (``diff * (1 / sqrt(var +
    eps))``), only in place."""

    def run(inputs: Sequence[Any]) -> Sequence[Any]:
        x, w, b = inputs
        if x.dtype != np.float32:
            return fallback(inputs)
        axes = tuple(range(_norm_axis(axis, x.ndim), x.ndim))
        y = x - x.mean(axis=axes, keepdims=True)
        sq = np.square(y)
        var = sq.mean(axis=axes, keepdims=True)
        var += np.float32(epsilon)
        np.sqrt(var, out=var)
        np.divide(np.float32(1.0), var, out=var)
        y *= var
        y *= w
        if b is not None:
            y += b
        return [y, None, None]

    return run


def softmax_inplace_kernel(axis: int, fallback: Step) -> Step:
    """Softmax computed into its float input (which the interpreter hands over as a fresh array
    nobody else sees); non-float or non-finite inputs go to ``fallback``."""

    def run(inputs: Sequence[Any]) -> Sequence[Any]:
        x = inputs[0]
        if x.dtype.kind != "f":
            return fallback(inputs)
        ax = _norm_axis(axis, x.ndim)
        m = np.max(x, axis=ax, keepdims=True)
        if not np.isfinite(m).all():
            return fallback(inputs)
        x -= m
        np.exp(x, out=x)
        x /= np.sum(x, axis=ax, keepdims=True)
        return [x]

    return run


__all__ = ["layer_norm_kernel", "softmax_inplace_kernel"]

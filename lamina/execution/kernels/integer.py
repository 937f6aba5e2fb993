"""Integer kernels of the ``tpu`` dialect's INT8 forms: the exact accumulations (convolution,
matrix product, pooling windows) on zero-point-centred storage integers. The ops in
:mod:`lamina.dialects.tpu.families` state the semantics (accumulate, add the bias, requantize,
saturate); these functions compute the accumulations fast.

Accumulators are float64 arrays holding exact integers (8-bit operands: every product and partial
sum is far below 2**53), turned into the int32 register by the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .conv import ConvPlan
from .geometry import conv_pads


def conv_accumulate(
    x: np.ndarray,
    w: np.ndarray,
    group: int,
    geometry: tuple[Any, Any, Any, Any, str],
    cache: dict[Any, Any],
) -> np.ndarray:
    """``sum(x * w)`` over each output position's window (an N-d grouped convolution) of the
    centred input ``x`` (N, C, *spatial) and centred filter ``w`` (M, C/group, *kernel), float64.
    ``geometry`` is ``(kernel_shape, strides, dilations, pads, auto_pad)`` as the op's properties
    (None where absent); ``cache`` keeps one plan per (input, filter) shape.

    The plan (im2col, depthwise) is the ``top.Conv`` kernel's.
    """
    key = (x.shape, w.shape)
    plan = cache.get(key)
    if plan is None:
        nd = w.ndim - 2
        ks, st, dl, pads, auto = geometry
        k = list(ks or w.shape[2:])
        sv = list(st or [1] * nd)
        d = list(dl or [1] * nd)
        p = conv_pads(auto, x.shape[2:], k, sv, d, pads)
        plan = cache[key] = ConvPlan((k, sv, d, p), x, w, group)
    return plan.run(x, w, None, False)


def matmul_accumulate(a: np.ndarray, b: np.ndarray, b_zp: Any, b_axis: int | None) -> np.ndarray:
    """``a @ (b - b_zp)`` in float64 for the centred left operand ``a`` and the storage integers
    ``b`` with zero point(s) ``b_zp`` (one per channel along ``b_axis`` when per-axis)."""
    bf = np.asarray(b, dtype=np.float64)
    if b_axis is None:
        bf = bf - float(b_zp)
    else:
        shape = [1] * bf.ndim
        shape[b_axis] = -1
        bf = bf - b_zp.reshape(shape)
    return np.matmul(a, bf)


def window_sums(
    x: np.ndarray, kernel: Sequence[int], strides: Sequence[int], pads: Sequence[int]
) -> np.ndarray:
    """The int64 sums of ``x`` (N, C, *spatial; padding contributes 0) over each pooling window."""
    nd = len(kernel)
    x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
    win = np.lib.stride_tricks.sliding_window_view(x, kernel, axis=tuple(range(2, 2 + nd)))
    win = win[(slice(None), slice(None), *[slice(None, None, t) for t in strides])]
    return win.sum(axis=tuple(range(-nd, 0)))

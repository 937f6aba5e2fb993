"""Sliding windows as strided views (no copy): the building block of the pooling and
convolution contracts and of the generic kernels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .geometry import effective_kernel


def windows(x: np.ndarray, k: Sequence[int], s: Sequence[int], d: Sequence[int]) -> np.ndarray:
    """View of ``x`` (N, C, *spatial) as (N, C, *out, *k) windows with strides ``s`` and
    dilations ``d``; no copy."""
    nd = len(k)
    ek = [effective_kernel(k[i], d[i]) for i in range(nd)]
    w = sliding_window_view(x, ek, axis=tuple(range(2, 2 + nd)))
    sl = (
        slice(None),
        slice(None),
        *[slice(None, None, si) for si in s],
        *[slice(None, None, di) for di in d],
    )
    return w[sl]


def window_sum(win: np.ndarray, nd: int, dtype: Any = None) -> np.ndarray:
    """Each window's sum over the last ``nd`` (kernel) axes of a :func:`windows` view, added element
    by element in row-major kernel order (in ``dtype``, default the view's): the same order whatever
    the outer shape, so the sum of a slice of the output is bit for bit that slice of the whole sum
    (``ndarray.sum`` picks its order by shape and strides: pairwise once axes coalesce)."""
    out: np.ndarray | None = None
    for idx in np.ndindex(*win.shape[win.ndim - nd :]):
        key = (Ellipsis, *idx)
        t = np.array(win[key], dtype=dtype or win.dtype)
        out = t if out is None else np.add(out, t, out=out)
    assert out is not None
    return out


__all__ = ["window_sum", "windows"]

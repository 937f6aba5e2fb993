"""Sliding windows as strided views (no copy): the building block of the pooling and
convolution contracts and of the generic kernels."""

from __future__ import annotations

from collections.abc import Sequence

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


__all__ = ["windows"]

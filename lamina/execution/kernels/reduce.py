"""Sums in an order fixed by the reduced axes alone.

``ndarray.sum`` picks its order by shape and strides (pairwise over a contiguous run, which grows
when axes coalesce), so the float sum of a slice of a tensor need not be bit for bit that slice of
the whole sum. A target that computes a tensor in slices must agree with the interpreter bit for
bit, so the float reduction contracts add in the order below, whatever the other axes are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def ordered_sum(
    x: np.ndarray, axes: Sequence[int] | None = None, *, keepdims: bool = False, dtype: Any = None
) -> np.ndarray:
    """The sum of ``x`` over ``axes`` (all when None) in ``dtype`` (default ``x``'s): the reduced
    elements, in row-major order over ``axes``, added as a pairwise tree — element ``i`` of each
    level is elements ``2i`` and ``2i + 1`` of the one before, an odd last element carried up."""
    red = tuple(range(x.ndim)) if axes is None else tuple(sorted({int(a) % max(x.ndim, 1) for a in axes}))
    rest = [d for d in range(x.ndim) if d not in red]
    out_shape = [x.shape[d] for d in rest]
    n_red = int(np.prod([x.shape[d] for d in red], dtype=np.int64))
    t = np.transpose(x, (*red, *rest)).reshape(n_red, *out_shape).astype(dtype or x.dtype)
    if t.shape[0] == 0:
        t = np.zeros((1, *out_shape), t.dtype)
    while t.shape[0] > 1:
        n = t.shape[0] - t.shape[0] % 2
        pairs = t[0:n:2] + t[1:n:2]
        t = np.concatenate([pairs, t[n:]]) if n < t.shape[0] else pairs
    r = t[0]
    if keepdims:
        r = r.reshape([1 if d in red else x.shape[d] for d in range(x.ndim)])
    return np.asarray(r)


def ordered_mean(
    x: np.ndarray, axes: Sequence[int] | None = None, *, keepdims: bool = False, dtype: Any = None
) -> np.ndarray:
    """:func:`ordered_sum` over the count of reduced elements, divided in the sum's dtype."""
    s = ordered_sum(x, axes, keepdims=keepdims, dtype=dtype)
    count = x.size // max(s.size, 1) if x.size else 0
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(s / s.dtype.type(count))


__all__ = ["ordered_mean", "ordered_sum"]

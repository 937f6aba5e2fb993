"""Fast pooling kernels. Their contracts are ``top.MaxPool.execute`` (and friends); the property
tests in ``tests/execution/kernels`` hold them to it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .geometry import pool_output_size, window_geometry


def max_pool_kernel(
    kernel_shape: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str,
    ceil_mode: bool,
) -> Callable[[Sequence[Any]], list[Any]]:
    """A max-pooling step ``(x,) -> [y, None]`` (no indices result): a running ``np.maximum``
    over the kernel taps, strided views of the padded input kept in a per-shape buffer."""
    cache: dict[tuple[Any, ...], Any] = {}

    def run(inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        key = (x.shape, x.dtype)
        ent = cache.get(key)
        if ent is None:
            geo = window_geometry(x.shape[2:], kernel_shape, strides, dilations, pads, auto_pad)
            k, s, d, p = geo
            osz, extra = pool_output_size(x.shape[2:], geo, ceil_mode)
            nd = len(k)
            lo = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
            padded = None
            if any(p) or any(extra):
                padded = np.full(
                    (*x.shape[:2], *(x.shape[2 + i] + p[i] + p[i + nd] + extra[i] for i in range(nd))),
                    lo,
                    dtype=x.dtype,
                )
            inner = (slice(None), slice(None), *(slice(p[i], p[i] + x.shape[2 + i]) for i in range(nd)))
            taps = [
                (
                    slice(None),
                    slice(None),
                    *(slice(idx[i] * d[i], idx[i] * d[i] + (osz[i] - 1) * s[i] + 1, s[i]) for i in range(nd)),
                )
                for idx in np.ndindex(*k)
            ]
            ent = cache[key] = (padded, inner, taps)
        padded, inner, taps = ent
        if padded is not None:
            padded[inner] = x
            xp = padded
        else:
            xp = x
        y = xp[taps[0]].copy()
        for t in taps[1:]:
            np.maximum(y, xp[t], out=y)
        return [y, None]

    return run


__all__ = ["max_pool_kernel"]

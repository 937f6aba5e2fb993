"""Fast float convolution kernels: im2col into reused buffers, 1x1 as a plain GEMM, depthwise
without im2col, bias and ReLU fused in place. Their contract is ``top.Conv.execute``; the property
tests in ``tests/execution/kernels`` hold them to it.

Convolution never copies the input per kernel position: the padded input is viewed as windows
(:func:`~lamina.execution.kernels.windows.windows` or ``as_strided``) and copied once into the
im2col buffer, then contracted with the filter by one GEMM; the bias is added in place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .geometry import window_geometry
from .windows import windows


class DepthwisePlan:
    """2-d depthwise convolution (channel multiplier 1) without im2col: the zero-padded input is
    split into ``stride`` phase planes, so that every kernel tap reads one *contiguous* run of
    each flattened plane. The output is accumulated over the planes' full width (a few wasted
    columns per row) and cropped once at the end: two passes over the output per tap, all with
    long inner loops."""

    __slots__ = ("inner", "l", "ow", "padded", "phases", "pw", "taps", "yshape")

    def __init__(self, geo: Any, x: np.ndarray) -> None:
        k, s, d, p = geo
        n, c, h, w = x.shape
        ek = [(k[i] - 1) * d[i] + 1 for i in range(2)]
        hp, wp = h + p[0] + p[2], w + p[1] + p[3]
        oh = (hp - ek[0]) // s[0] + 1
        self.ow = (wp - ek[1]) // s[1] + 1
        ph, pw = -(-hp // s[0]) + 1, -(-wp // s[1])  # one spare row: the last taps run past the end
        self.pw = pw
        self.padded = np.zeros((n, c, ph * s[0], pw * s[1]), dtype=x.dtype)
        self.inner = (slice(None), slice(None), slice(p[0], p[0] + h), slice(p[1], p[1] + w))
        self.phases: dict[tuple[int, int], Any] = {}
        self.taps: list[tuple[int, tuple[int, int], int]] = []
        for t, (i, j) in enumerate(np.ndindex(k[0], k[1])):
            r, q = i * d[0], j * d[1]
            key = (r % s[0], q % s[1])
            if key not in self.phases:
                if s == [1, 1]:
                    self.phases[key] = (None, self.padded.reshape(n, c, -1))
                else:
                    buf = np.empty((n, c, ph, pw), dtype=x.dtype)
                    src = self.padded[:, :, key[0] :: s[0], key[1] :: s[1]]
                    self.phases[key] = ((buf, src), buf.reshape(n, c, -1))
            self.taps.append((t, key, (r // s[0]) * pw + q // s[1]))
        self.l = oh * pw
        self.yshape = (n, c, oh, pw)

    def run(self, x: np.ndarray, w: np.ndarray, b: Any, relu: bool) -> np.ndarray:
        self.padded[self.inner] = x
        for copy, _ in self.phases.values():
            if copy is not None:
                np.copyto(copy[0], copy[1])
        n, c = x.shape[:2]
        wt = w.reshape(c, -1)
        ln = self.l
        y = np.empty((n, c, ln), dtype=x.dtype)
        tmp = np.empty_like(y)
        for idx, (t, key, off) in enumerate(self.taps):
            src = self.phases[key][1][:, :, off : off + ln]
            if idx == 0:
                np.multiply(src, wt[:, t, None], out=y)
            else:
                np.multiply(src, wt[:, t, None], out=tmp)
                y += tmp
        if b is not None:
            y += b.reshape(c, 1).astype(y.dtype, copy=False)
        if relu:
            np.maximum(y, 0, out=y)
        return np.ascontiguousarray(y.reshape(self.yshape)[:, :, :, : self.ow])


class ConvPlan:
    """Per-shape state of one convolution: geometry, fast-path choice and scratch buffers."""

    __slots__ = (
        "cols",
        "dw",
        "fast",
        "geo",
        "group",
        "m",
        "n",
        "oshape",
        "osp",
        "padded",
        "view_shape",
        "view_strides",
    )

    def __init__(self, geo: Any, x: np.ndarray, w: np.ndarray, group: int) -> None:
        self.geo = geo
        self.group = group
        k, s, d, p = geo
        nd = len(k)
        self.n, self.m = x.shape[0], w.shape[0]
        simple = nd == 2 and x.dtype == w.dtype and x.dtype.kind == "f"
        self.fast = simple and group == 1 and x.shape[1] == w.shape[1]
        self.dw: DepthwisePlan | None = None
        self.padded: np.ndarray | None = None
        self.cols: np.ndarray | None = None
        if simple and group == x.shape[1] == self.m and w.shape[1] == 1:
            self.dw = DepthwisePlan(geo, x)
        if not self.fast:
            return
        n, c, h, wd = x.shape
        hp, wp = h + p[0] + p[2], wd + p[1] + p[3]
        oh = (hp - ((k[0] - 1) * d[0] + 1)) // s[0] + 1
        ow = (wp - ((k[1] - 1) * d[1] + 1)) // s[1] + 1
        self.osp = (oh, ow)
        self.oshape = (n, self.m, oh, ow)
        if any(p):
            self.padded = np.zeros((n, c, hp, wp), dtype=x.dtype)
        if k != [1, 1] or s != [1, 1]:
            self.cols = np.empty((n, c * k[0] * k[1], oh * ow), dtype=x.dtype)
            it = x.dtype.itemsize
            self.view_shape = (n, c, k[0], k[1], oh, ow)
            self.view_strides = (
                c * hp * wp * it,
                hp * wp * it,
                d[0] * wp * it,
                d[1] * it,
                s[0] * wp * it,
                s[1] * it,
            )

    def run(self, x: np.ndarray, w: np.ndarray, b: Any, relu: bool) -> np.ndarray:
        if self.dw is not None:
            return self.dw.run(x, w, b, relu)
        if not self.fast:
            return conv_generic(x, w, b, self.geo, self.group, relu)
        p = self.geo[3]
        n, m = self.n, self.m
        if self.padded is not None:
            xp = self.padded
            xp[:, :, p[0] : p[0] + x.shape[2], p[1] : p[1] + x.shape[3]] = x
        else:
            xp = np.ascontiguousarray(x)
        wm = w.reshape(m, -1)
        if self.cols is None:  # 1x1, stride 1: the input is already the im2col matrix
            cols = xp.reshape(n, xp.shape[1], -1)
        else:
            cols = self.cols
            view = as_strided(xp, self.view_shape, self.view_strides, writeable=False)
            np.copyto(cols.reshape(self.view_shape), view)
        y = np.matmul(wm, cols[0]) if n == 1 else np.matmul(wm, cols)
        y = y.reshape(self.oshape)
        if b is not None:
            y += b.reshape(1, m, 1, 1).astype(y.dtype, copy=False)
        if relu:
            np.maximum(y, 0, out=y)
        return y


def conv_generic(x: Any, w: Any, b: Any, geo: Any, group: int, relu: bool) -> Any:
    """Any convolution (N-d, grouped, any dtype): im2col from a strided view of the padded input
    and one batched GEMM per group; 1x1 kernels use the input itself and depthwise convolutions
    accumulate over the kernel taps."""
    k, s, d, p = geo
    nd = len(k)
    if any(p):
        x = np.pad(x, [(0, 0), (0, 0)] + [(p[i], p[i + nd]) for i in range(nd)])
    g = group
    n, c = x.shape[:2]
    m = w.shape[0]
    dt = np.result_type(x, w)
    if all(v == 1 for v in (*k, *s)):  # 1x1 convolution: a plain GEMM on the input, no im2col
        osp = x.shape[2:]
        cols = x.reshape(n, g, c // g, -1)
    else:
        win = windows(x, k, s, d)  # (N, C, *O, *k) strided view, no copy
        osp = win.shape[2 : 2 + nd]
        if c == g and m == g:  # depthwise: accumulate over kernel taps, vectorized over channels
            return _depthwise(win, w, b, osp, dt, relu)
        # im2col: (N, G, C/G * prod(k), prod(O)) in the order the filter is laid out
        cols = np.empty((n, c, int(np.prod(k)), *osp), dtype=x.dtype)
        for t, idx in enumerate(np.ndindex(*k)):
            cols[:, :, t] = win[(slice(None), slice(None), *[slice(None)] * nd, *idx)]
        cols = cols.reshape(n, g, (c // g) * int(np.prod(k)), -1)
    wm = w.reshape(g, m // g, -1)  # (G, M/G, K)
    y = np.matmul(wm, cols)  # (N, G, M/G, P): already NC(spatial) ordered
    y = y.reshape(n, m, *osp)
    if b is not None:
        y += b.reshape((1, m) + (1,) * nd).astype(dt, copy=False)
    if relu:
        np.maximum(y, 0, out=y)
    return y if y.dtype == dt else y.astype(dt)


def _depthwise(win: np.ndarray, w: np.ndarray, b: Any, osp: Sequence[int], dt: Any, relu: bool) -> np.ndarray:
    nd = len(osp)
    n, m = win.shape[:2]
    k = w.shape[2:]
    wr = w.reshape(m, -1).astype(dt, copy=False)
    y = np.zeros((n, m, *osp), dtype=dt)
    tmp = np.empty_like(y)
    bshape = (1, m) + (1,) * nd
    for t, idx in enumerate(np.ndindex(*k)):
        tap = win[(slice(None), slice(None), *[slice(None)] * nd, *idx)]
        np.multiply(tap, wr[:, t].reshape(bshape), out=tmp)
        y += tmp
    if b is not None:
        y += b.reshape(bshape).astype(dt, copy=False)
    if relu:
        np.maximum(y, 0, out=y)
    return y


def conv_kernel(
    kernel_shape: Sequence[int] | None,
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str,
    group: int,
    do_relu: bool,
    relu_limit: float,
) -> Callable[[Sequence[Any]], list[Any]]:
    """A convolution step ``(x, w, b) -> [y]`` for ``top.Conv`` properties, keeping per input
    shape the geometry and scratch buffers (zero-padded input, im2col matrix) between runs.

    2-d, ``group == 1`` float convolutions take the fast path: 1x1 kernels are one GEMM on the
    input itself; others copy the windows once (a single ``copyto`` from a strided view) into
    the im2col buffer and do one GEMM; bias and ReLU are applied in place on the GEMM output.
    Depthwise convolutions accumulate over kernel taps; anything else takes the generic path."""
    relu = bool(do_relu)
    limit = relu_limit if relu else -1.0
    cache: dict[tuple[Any, ...], ConvPlan] = {}

    def run(inputs: Sequence[Any]) -> list[Any]:
        x, w, b = inputs
        key = (x.shape, w.shape, x.dtype, w.dtype)
        ent = cache.get(key)
        if ent is None:
            geo = window_geometry(
                x.shape[2:], kernel_shape or w.shape[2:], strides, dilations, pads, auto_pad
            )
            ent = cache[key] = ConvPlan(geo, x, w, group)
        y = ent.run(x, w, b, relu)
        if limit > 0:
            np.minimum(y, y.dtype.type(limit), out=y)
        return [y]

    return run


__all__ = ["ConvPlan", "DepthwisePlan", "conv_generic", "conv_kernel"]

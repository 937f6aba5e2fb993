"""The integer kernels of the tpu INT8 forms against direct int64 statements of their semantics
(shift-and-add convolution, loops over pooling windows), on random shapes, strides, pads,
dilations and groups. Exact: the accumulations carry integers."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.execution.kernels.integer import conv_accumulate, matmul_accumulate, window_sums


def ref_conv(
    x: np.ndarray, w: np.ndarray, group: int, s: list[int], d: list[int], p: list[int]
) -> np.ndarray:
    """Grouped N-d convolution by shift-and-add over the kernel offsets, int64."""
    nd = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p[i], p[i + nd]) for i in range(nd)])
    k = w.shape[2:]
    out = [(x.shape[2 + i] - ((k[i] - 1) * d[i] + 1)) // s[i] + 1 for i in range(nd)]
    n, m, cg = x.shape[0], w.shape[0], w.shape[1]
    mg = m // group
    y = np.zeros((n, m, *out), np.int64)
    for off in itertools.product(*[range(kk) for kk in k]):
        sl = tuple(slice(off[i] * d[i], off[i] * d[i] + s[i] * (out[i] - 1) + 1, s[i]) for i in range(nd))
        for g in range(group):
            xs = x[(slice(None), slice(g * cg, (g + 1) * cg), *sl)]
            ws = w[(slice(g * mg, (g + 1) * mg), slice(None), *off)]
            y[:, g * mg : (g + 1) * mg] += np.einsum("nc...,mc->nm...", xs, ws)
    return y


@settings(max_examples=60, deadline=None)
@given(
    nd=st.sampled_from([1, 2]),
    n=st.integers(1, 2),
    groups=st.sampled_from([1, 2, 3]),
    cg=st.integers(1, 3),
    mg=st.integers(1, 3),
    size=st.integers(3, 7),
    k=st.integers(1, 3),
    s=st.integers(1, 2),
    d=st.integers(1, 2),
    pad=st.integers(0, 2),
    seed=st.integers(0, 2**31 - 1),
)
def test_conv_accumulate(
    nd: int, n: int, groups: int, cg: int, mg: int, size: int, k: int, s: int, d: int, pad: int, seed: int
) -> None:
    if (k - 1) * d + 1 > size + 2 * pad:
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (n, groups * cg, *([size] * nd))).astype(np.float64)
    w = rng.integers(-127, 128, (groups * mg, cg, *([k] * nd))).astype(np.float64)
    geometry = ([k] * nd, [s] * nd, [d] * nd, [pad] * (2 * nd), "NOTSET")
    got = conv_accumulate(x, w, groups, geometry, {})
    want = ref_conv(x.astype(np.int64), w.astype(np.int64), groups, [s] * nd, [d] * nd, [pad] * (2 * nd))
    np.testing.assert_array_equal(np.rint(got).astype(np.int64), want)


def test_conv_accumulate_depthwise_and_cache() -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 4, 6, 6)).astype(np.float64)
    w = rng.integers(-127, 128, (4, 1, 3, 3)).astype(np.float64)
    cache: dict[Any, Any] = {}
    geometry = (None, [2, 2], None, [1, 1, 1, 1], "NOTSET")
    for _ in range(2):  # the second call reuses the plan
        got = conv_accumulate(x, w, 4, geometry, cache)
        np.testing.assert_array_equal(
            got, ref_conv(x.astype(np.int64), w.astype(np.int64), 4, [2, 2], [1, 1], [1] * 4)
        )
    assert len(cache) == 1


@settings(max_examples=40, deadline=None)
@given(
    m=st.integers(1, 5),
    kk=st.integers(1, 6),
    nn=st.integers(1, 5),
    per_axis=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
def test_matmul_accumulate(m: int, kk: int, nn: int, per_axis: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, (m, kk))
    b = rng.integers(-128, 128, (kk, nn))
    zp = rng.integers(-5, 6, nn) if per_axis else int(rng.integers(-5, 6))
    got = matmul_accumulate(
        a.astype(np.float64), b, np.asarray(zp) if per_axis else zp, 1 if per_axis else None
    )
    want = a.astype(np.int64) @ (b.astype(np.int64) - (zp[None, :] if per_axis else zp))
    np.testing.assert_array_equal(np.rint(got).astype(np.int64), want)


@settings(max_examples=60, deadline=None)
@given(
    nd=st.sampled_from([1, 2]),
    size=st.integers(2, 7),
    k=st.integers(1, 3),
    s=st.integers(1, 3),
    pad=st.integers(0, 1),
    seed=st.integers(0, 2**31 - 1),
)
def test_window_sums(nd: int, size: int, k: int, s: int, pad: int, seed: int) -> None:
    if k > size + 2 * pad:
        return
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (2, 3, *([size] * nd))).astype(np.int64)
    got = window_sums(x, [k] * nd, [s] * nd, [pad] * (2 * nd))
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pad, pad)] * nd)
    out = [(size + 2 * pad - k) // s + 1] * nd
    want = np.zeros((2, 3, *out), np.int64)
    for idx in itertools.product(*[range(o) for o in out]):
        win = tuple(slice(i * s, i * s + k) for i in idx)
        want[(slice(None), slice(None), *idx)] = xp[(slice(None), slice(None), *win)].sum(
            axis=tuple(range(2, 2 + nd))
        )
    np.testing.assert_array_equal(got, want)

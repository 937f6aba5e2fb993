"""The fixed-order sums (lamina/execution/kernels/reduce.py, windows.window_sum): close to numpy's
sums (float32, relative 1e-5 of the absolute sum), exact on integers, and — the point of them — a
slice of the result is bit for bit the sum of that slice of the input, whatever the slice."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.execution.kernels.reduce import ordered_mean, ordered_sum
from lamina.execution.kernels.windows import window_sum, windows


@st.composite
def _case(draw: st.DrawFn) -> tuple[np.ndarray, tuple[int, ...], tuple[slice, ...]]:
    shape = draw(st.lists(st.integers(1, 6), min_size=1, max_size=4))
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    seed = draw(st.integers(0, 2**31 - 1))
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    cut = []
    for d, n in enumerate(shape):
        lo = draw(st.integers(0, n - 1)) if d not in axes else 0
        hi = draw(st.integers(lo + 1, n)) if d not in axes else n
        cut.append(slice(lo, hi))
    return x, axes, tuple(cut)


@settings(max_examples=200, deadline=None)
@given(_case())
def test_a_slice_sums_as_the_whole(case: tuple[np.ndarray, tuple[int, ...], tuple[slice, ...]]) -> None:
    x, axes, cut = case
    whole = ordered_sum(x, axes, keepdims=True)
    part = ordered_sum(np.ascontiguousarray(x[cut]), axes, keepdims=True)
    kept = tuple(slice(0, 1) if d in axes else c for d, c in enumerate(cut))
    np.testing.assert_array_equal(part.view(np.uint32), whole[kept].view(np.uint32))
    ref = np.sum(x.astype(np.float64), axis=axes, keepdims=True)
    tol = 1e-5 * np.sum(np.abs(x.astype(np.float64)), axis=axes, keepdims=True) + 1e-30
    assert np.all(np.abs(whole - ref) <= tol)


def test_shapes_dtypes_and_empty_sets() -> None:
    x = np.arange(24, dtype=np.int8).reshape(2, 3, 4)
    assert ordered_sum(x, [0, 2]).tolist() == x.astype(np.int64).sum((0, 2)).tolist()
    assert ordered_sum(x, [-1], keepdims=True).shape == (2, 3, 1)
    assert ordered_sum(x).shape == () and int(ordered_sum(x, dtype=np.int64)) == 276
    assert ordered_mean(x.astype(np.float32), [1]).tolist() == np.mean(x.astype(np.float32), 1).tolist()
    assert ordered_sum(np.zeros((0, 3), np.float32), [0]).tolist() == [0, 0, 0]
    assert ordered_sum(np.zeros((2, 0), np.float32), [0]).shape == (0,)
    assert np.isnan(ordered_mean(np.zeros((0, 3), np.float32), [0])).all()


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_window_sums_of_a_slice_are_the_whole_ones(kh: int, kw: int, s: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((2, 3, 7, 9)).astype(np.float32)
    whole = window_sum(windows(x, [kh, kw], [s, s], [1, 1]), 2)
    ref = windows(x.astype(np.float64), [kh, kw], [s, s], [1, 1]).sum(axis=(-2, -1))
    np.testing.assert_allclose(whole, ref, rtol=1e-5, atol=1e-5)
    # one output element alone: its window is the only one (numpy would coalesce it and sum pairwise)
    rows = slice(s, s + kh)
    part = window_sum(windows(np.ascontiguousarray(x[1:2, 2:3, rows, 0:kw]), [kh, kw], [s, s], [1, 1]), 2)
    np.testing.assert_array_equal(part.view(np.uint32), whole[1:2, 2:3, 1:2, 0:1].view(np.uint32))

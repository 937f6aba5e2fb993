"""The small-tensor rule of lamina.quant.methods: fewer than SMALL_TENSOR elements per sample take
the absmax whatever the method."""

from __future__ import annotations

import numpy as np
import pytest

from lamina.quant.histogram import TensorObserver
from lamina.quant.methods import METHODS, SMALL_TENSOR, compute_threshold, is_small


def _stream(samples: list[np.ndarray]) -> TensorObserver:
    o = TensorObserver()
    for s in samples:
        o.update(s)
    return o


def test_pooled_tensor_takes_its_max() -> None:
    # An SE convolution's output after global pooling: 1x24x1x1 per sample, a heavy tail (one
    # channel far larger, as PP-OCRv4's conv2d_487.tmp_0: KL 4.9 against a max of 70).
    rng = np.random.default_rng(0)
    samples = [rng.laplace(0, 1, (1, 24, 1, 1)).astype(np.float32) for _ in range(24)]
    samples[5][0, 3] = 70.0
    o = _stream(samples)
    assert o.samples == 24 and o.per_sample == 24 and is_small(o)
    for m in METHODS:
        assert compute_threshold(m, o) == pytest.approx(70.0), m
    # the same values as one large sample are not small: KL clips the outlier
    big = _stream([np.concatenate([s.ravel() for s in samples] * 50)])
    assert not is_small(big)
    assert compute_threshold("kl", big) < 35.0


def test_the_bound_is_per_sample() -> None:
    rng = np.random.default_rng(1)
    just_below = _stream([rng.standard_normal(SMALL_TENSOR - 1).astype(np.float32) for _ in range(3)])
    at = _stream([rng.standard_normal(SMALL_TENSOR).astype(np.float32) for _ in range(3)])
    assert is_small(just_below) and not is_small(at)
    # merging observers keeps the per-sample count
    a, b = _stream([np.ones(10, np.float32)] * 2), _stream([np.ones(10, np.float32)] * 3)
    a.merge(b)
    assert a.samples == 5 and a.per_sample == 10
    assert not is_small(TensorObserver())  # nothing seen: not small (and threshold 1e-5)

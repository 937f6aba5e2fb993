"""Threshold methods: from a tensor's statistics to a symmetric clipping threshold for int8.

``kl``              TensorRT's entropy calibration: over a ``bin_num``-bin histogram of ``|x|``, every
                    candidate ``i`` in ``[target_bins, bin_num]`` keeps bins ``[0, i)`` (outliers folded
                    into the last one) as the reference P, quantizes them to ``target_bins`` levels
                    (each level's mass spread evenly over its nonzero bins) as Q, and the ``i`` with the
                    smallest KL(P||Q) gives the threshold ``i * absmax / bin_num``. Vectorized over all
                    candidates with prefix sums (no loop over candidates).
``max``             ``absmax``.
``percentile9999``  the 99.99th percentile of ``|x|``.
``mse``             OCTAV (Sakr et al., 2022): the Newton-style fixed point
                    ``s = E[|x| 1{|x|>s}] / (c P(|x|<=s) + P(|x|>s))`` with ``c = 1 / (3 * 4 * 127^2)``,
                    the clipping that minimizes ``E[(x - Q_s(x))^2]`` for the 255-level int8 grid.
``aciq_gauss``      ACIQ (Banner et al., 2019), Gaussian prior: ``|mean| + 3.92 * std`` (8 bits).
``aciq_laplace``    ACIQ, Laplace prior: ``|mean| + 9.89 * b`` with ``b = std / sqrt(2)`` (8 bits).

Every threshold is clamped to ``(0, absmax]``; an all-zero tensor gets ``1e-5`` (as TPU-MLIR).

**Small tensors take ``absmax`` whatever the method.** A tensor with fewer than
:data:`SMALL_TENSOR` (1024) elements per sample — pooled features (``1xCx1x1`` after a global
average pool, the squeeze-and-excitation convolutions on them), logits, small fully connected
layers — has two problems with a clipping method: its histogram is too sparse to estimate a
distribution (24 samples of a ``1x24x1x1`` tensor are 576 values spread over 2048 bins), and each of
its elements carries a whole channel's information (a clipped SE gate input scales a whole feature
map wrongly), so clipping trades a few large errors for rounding noise that costs nothing on so few
values. PP-OCRv4's ``conv2d_487.tmp_0`` (``1x24x1x1``) had a KL threshold of 4.9 against a max of 70.
"""

from __future__ import annotations

import math

import numpy as np

from lamina.quant.histogram import TensorObserver

METHODS: tuple[str, ...] = ("kl", "max", "percentile9999", "mse", "aciq_gauss", "aciq_laplace")

#: ACIQ optimal clipping in units of the prior's scale (std for Gaussian, b for Laplace), by bit width.
ACIQ_GAUSS = {2: 1.71, 3: 2.15, 4: 2.55, 5: 2.93, 6: 3.28, 7: 3.61, 8: 3.92}
ACIQ_LAPLACE = {2: 2.83, 3: 3.89, 4: 5.03, 5: 6.2, 6: 7.41, 7: 8.64, 8: 9.89}

MIN_THRESHOLD = 1e-5
#: tensors with fewer elements per sample than this take their absmax (see the module doc)
SMALL_TENSOR = 1024
#: probability given to an empty quantized level under reference mass (KL smoothing)
SMOOTH_EPS = 1e-4


def kl_threshold_index(hist: np.ndarray, target_bins: int = 128) -> int:
    """The number of bins ``i`` (``target_bins <= i <= len(hist)``) minimizing KL(P_i || Q_i)."""
    h = np.asarray(hist, np.float64)
    n = h.size
    if n <= target_bins:
        return n
    total = h.sum()
    if total <= 0:
        return n
    c = np.concatenate([[0.0], np.cumsum(h)])  # c[k] = sum h[:k]
    nzc = np.concatenate([[0], np.cumsum(h > 0)])  # nonzero bins before k
    with np.errstate(divide="ignore", invalid="ignore"):
        hlogh = np.where(h > 0, h * np.log(np.where(h > 0, h, 1.0)), 0.0)
    hl = np.concatenate([[0.0], np.cumsum(hlogh)])

    i = np.arange(target_bins, n + 1)  # candidates
    m = i // target_bins  # bins merged per level
    j = np.arange(target_bins)
    start = j[None, :] * m[:, None]  # (I, B)
    end = start + m[:, None]
    end[:, -1] = i  # the last level takes the remainder
    last_p = c[n] - c[i - 1]  # P[i-1]: bin i-1 plus every outlier beyond
    qb = c[end] - c[start]  # Q mass per level (outliers not included)
    nz = nzc[end] - nzc[start]
    # bin i-1 is "nonzero" in P when it or the outliers have mass
    last_nz_h = (h[i - 1] > 0).astype(np.int64)
    nz[:, -1] += (last_p > 0).astype(np.int64) - last_nz_h
    s = qb.copy()  # P mass per level
    s[:, -1] += last_p - h[i - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        # sum_k P_k log P_k over k < i
        plogp = hl[i - 1] + np.where(last_p > 0, last_p * np.log(np.where(last_p > 0, last_p, 1.0)), 0.0)
        # sum_k P_k log Q_k: Q is constant (qb / nz) on the nonzero bins of each level
        qsum = c[i]
        # P has mass where Q has none (outliers beyond an empty last level): smooth Q there with a
        # small probability, as TensorRT/MXNet do, instead of an infinite divergence
        qb = np.where((s > 0) & (qb <= 0), SMOOTH_EPS * qsum[:, None], qb)
        lq = np.where(s > 0, s * np.log(qb / np.maximum(nz, 1)), 0.0)
        bad = ~np.isfinite(lq).all(axis=1)
        kl = (plogp - lq.sum(axis=1)) / total - math.log(total) + np.log(qsum)
    kl = np.where(bad | ~np.isfinite(kl), np.inf, kl)
    if not np.isfinite(kl).any():
        return n
    return int(i[int(np.argmin(kl))])


def kl_threshold(hist: np.ndarray, absmax: float, target_bins: int = 128) -> float:
    """TensorRT-style KL threshold for a histogram of ``|x|`` over ``[0, absmax]``."""
    n = len(hist)
    return float(kl_threshold_index(hist, target_bins) * absmax / n)


def octav_threshold(obs: TensorObserver, bits: int = 8, iters: int = 50) -> float:
    """OCTAV's MSE-optimal clipping on the observer's histogram."""
    amax = obs.absmax
    if amax <= 0:
        return 0.0
    levels = (1 << (bits - 1)) - 1  # 127
    c = 1.0 / (12.0 * levels * levels)
    hist = obs.linear_histogram(4096, amax)
    centers = (np.arange(hist.size) + 0.5) * (amax / hist.size)
    total = float(obs.count)
    # suffix sums: mass and first moment above each bin edge
    above_n = np.concatenate([np.cumsum(hist[::-1])[::-1], [0.0]])
    above_m = np.concatenate([np.cumsum((hist * centers)[::-1])[::-1], [0.0]])
    s = max(float(np.sum(hist * centers)) / total, amax / hist.size)  # start at E|x|
    for _ in range(iters):
        k = min(int(s / amax * hist.size), hist.size)
        p_above = above_n[k] / total
        m_above = above_m[k] / total
        new = m_above / (c * (1.0 - p_above) + p_above) if m_above > 0 else s
        new = min(max(new, amax / hist.size), amax)
        if abs(new - s) <= 1e-6 * amax:
            s = new
            break
        s = new
    return float(s)


def is_small(obs: TensorObserver) -> bool:
    """Fewer than :data:`SMALL_TENSOR` elements per sample (absmax, whatever the method)."""
    return 0 < obs.per_sample < SMALL_TENSOR


def compute_threshold(method: str, obs: TensorObserver, bin_num: int = 2048) -> float:
    """The threshold of one tensor by ``method`` (one of :data:`METHODS`)."""
    amax = obs.absmax
    if amax <= 0 or obs.count == 0:
        return MIN_THRESHOLD
    if method not in METHODS:
        raise ValueError(f"unknown calibration method '{method}' (expected one of {', '.join(METHODS)})")
    if method == "max" or is_small(obs):
        th = amax
    elif method == "kl":
        th = kl_threshold(obs.linear_histogram(bin_num, amax), amax)
    elif method == "percentile9999":
        th = obs.percentile(99.99)
    elif method == "mse":
        th = octav_threshold(obs)
    elif method == "aciq_gauss":
        th = abs(obs.mean) + ACIQ_GAUSS[8] * obs.std
    else:  # aciq_laplace
        th = abs(obs.mean) + ACIQ_LAPLACE[8] * obs.std / math.sqrt(2.0)
    if not math.isfinite(th) or th <= 0:
        th = amax
    return float(max(min(th, amax), MIN_THRESHOLD))

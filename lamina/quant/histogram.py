"""Streaming per-tensor statistics with a memory bound independent of the number of samples.

Each tensor gets a :class:`TensorObserver` holding its min, max, element count, sum and sum of
squares, and a histogram of ``|x|`` on a *logarithmic* grid read straight from the float32 bit
pattern: the bin of ``x`` is ``(bits(x) & 0x7fffffff) >> 16``, i.e. the exponent and the top 7
mantissa bits, so every octave is split into 128 bins (relative bin width <= 1/128) and the grid is
the same for every sample. Streaming is therefore exact — the histogram of a stream of samples equals
the histogram of their concatenation, bin for bin — and needs one pass and no range known in advance
(no second pass over the samples, no rebinning). Exact zeros (and float32 subnormals, the lowest
bin) are counted apart, as TPU-MLIR leaves zeros out of its histograms.

:meth:`TensorObserver.linear_histogram` turns the log histogram into the classic ``bin_num``-bin
histogram of ``|x|`` over ``[0, absmax]`` (edges ``k * absmax / bin_num``) that the KL method uses,
splitting each log bin over the linear bins it overlaps in proportion to the overlap (mass assumed
uniform inside a log bin, which is < 0.8% wide).

Memory: 32768 int64 counters (256 KiB) per tensor, whatever the number of samples.

Tensors of rank 2 or 3 (``[batch, channels]``, ``[batch, tokens, channels]``: the activations of
transformers and fully connected layers) also keep the running ``max |x|`` of every channel of their
last axis (:attr:`TensorObserver.channel_absmax`), from which calibration finds *outlier channels*;
rank-4 tensors (``[batch, channels, height, width]``: convolutional activations) keep it for axis 1.
"""

from __future__ import annotations

import sys

import numpy as np

SHIFT = 16
_LITTLE = sys.byteorder == "little"
NUM_LOG_BINS = 1 << (31 - SHIFT)  # 32768: bins of |x|


def _log_edges() -> np.ndarray:
    """Value at the lower edge of every log bin (and the upper edge of the last), float64."""
    bits = np.arange(NUM_LOG_BINS + 1, dtype=np.uint64) << SHIFT
    bits = np.minimum(bits, 0x7F800000).astype(np.uint32)  # the top edge is +inf
    return bits.view(np.float32).astype(np.float64)


_EDGES: np.ndarray | None = None


def log_edges() -> np.ndarray:
    global _EDGES
    if _EDGES is None:
        _EDGES = _log_edges()
    return _EDGES


class TensorObserver:
    """Running statistics of one tensor over samples (see the module docstring)."""

    __slots__ = (
        "channel_absmax",
        "channel_axis",
        "count",
        "hist",
        "max",
        "min",
        "nonfinite",
        "samples",
        "sum",
        "sumsq",
        "zeros",
        "_buf",
    )

    #: the fewest channels for which per-channel maxima are kept
    MIN_CHANNELS = 8

    def __init__(self) -> None:
        self.count = 0
        #: the number of samples seen (calls to :meth:`update`)
        self.samples = 0
        self.zeros = 0
        self.nonfinite = 0
        self.min = np.inf
        self.max = -np.inf
        self.sum = 0.0
        self.sumsq = 0.0
        self.hist = np.zeros(NUM_LOG_BINS, np.int64)
        self._buf: np.ndarray | None = None
        #: running max |x| per channel of the last axis (rank 2-3 tensors) or of axis 1 (rank 4),
        #: else None
        self.channel_absmax: np.ndarray | None = None
        #: the axis of those channels (the tensor's last; 1 for rank 4)
        self.channel_axis = -1

    @property
    def absmax(self) -> float:
        if self.count == 0:
            return 0.0
        return float(max(abs(self.min), abs(self.max)))

    @property
    def mean(self) -> float:
        return self.sum / self.count if self.count else 0.0

    @property
    def std(self) -> float:
        if not self.count:
            return 0.0
        m = self.mean
        return float(np.sqrt(max(self.sumsq / self.count - m * m, 0.0)))

    def update(self, x: np.ndarray) -> None:
        """Add one sample of the tensor."""
        a = np.asarray(x)
        if a.dtype != np.float32:
            a = a.astype(np.float32)
        self.samples += 1
        if a.ndim in (2, 3) and a.shape[-1] >= self.MIN_CHANNELS and a.size:
            self.channel_axis = a.ndim - 1
            self._update_channels(a.reshape(-1, a.shape[-1]))
        elif a.ndim == 4 and a.shape[1] >= self.MIN_CHANNELS and a.size:
            self.channel_axis = 1
            self._update_channels(a, (0, 2, 3))
        a = a.reshape(-1)
        if a.size == 0:
            return
        lo, hi = float(a.min()), float(a.max())
        if not (np.isfinite(lo) and np.isfinite(hi)):
            fin = np.isfinite(a)
            self.nonfinite += int(a.size - np.count_nonzero(fin))
            a = a[fin]
            if a.size == 0:
                return
            lo, hi = float(a.min()), float(a.max())
        self.min = min(self.min, lo)
        self.max = max(self.max, hi)
        self.count += a.size
        self.sum += float(a.sum(dtype=np.float64))
        self.sumsq += float(np.dot(a, a))
        if _LITTLE:  # the high 16 bits of each float32, read in place (no shift pass)
            b = a.view(np.uint16)[1::2]
        else:  # pragma: no cover - big-endian hosts
            buf = self._buf
            if buf is None or buf.size < a.size:
                buf = self._buf = np.empty(a.size, np.int64)
            b = buf[: a.size]
            np.right_shift(a.view(np.uint32), SHIFT, out=b, casting="unsafe")
        h = np.bincount(b, minlength=2 * NUM_LOG_BINS)
        h = h[:NUM_LOG_BINS] + h[NUM_LOG_BINS : 2 * NUM_LOG_BINS]  # fold the sign bit
        self.zeros += int(h[0])  # zeros and subnormals
        h[0] = 0
        self.hist += h

    def _update_channels(self, a2: np.ndarray, axes: int | tuple[int, ...] = 0) -> None:
        with np.errstate(invalid="ignore"):
            m = np.maximum(np.max(a2, axis=axes), -np.min(a2, axis=axes))
        m = np.where(np.isfinite(m), m, 0.0).astype(np.float64)
        c = self.channel_absmax
        if c is None:
            self.channel_absmax = m
        elif c.shape == m.shape:
            np.maximum(c, m, out=c)
        else:  # the channel count changed between samples (dynamic shapes): per-tensor only
            self.channel_absmax = None

    def release(self) -> None:
        """Drop the scratch buffer (statistics are kept)."""
        self._buf = None

    @property
    def per_sample(self) -> float:
        """Elements per sample (finite ones, on average)."""
        return self.count / self.samples if self.samples else 0.0

    def merge(self, other: TensorObserver) -> None:
        self.count += other.count
        self.samples += other.samples
        self.zeros += other.zeros
        self.nonfinite += other.nonfinite
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        self.sum += other.sum
        self.sumsq += other.sumsq
        self.hist += other.hist
        if self.channel_absmax is not None and other.channel_absmax is not None:
            if self.channel_absmax.shape == other.channel_absmax.shape:
                np.maximum(self.channel_absmax, other.channel_absmax, out=self.channel_absmax)
            else:
                self.channel_absmax = None
        elif self.channel_absmax is None and other.channel_absmax is not None:
            self.channel_absmax = other.channel_absmax.copy()
            self.channel_axis = other.channel_axis

    # ---- derived histograms ------------------------------------------------------------------

    def abs_cdf(self, values: np.ndarray) -> np.ndarray:
        """Number of elements with ``|x| <= v`` for each ``v`` (zeros included), interpolated
        linearly inside log bins."""
        edges = log_edges()
        cum = np.concatenate([[0.0], np.cumsum(self.hist, dtype=np.float64)])
        top = min(self.absmax, float(edges[-2]))
        nz = np.nonzero(self.hist)[0]
        if nz.size == 0:
            return np.full(np.shape(values), float(self.zeros))
        first, last = int(nz[0]), int(nz[-1])
        # only the occupied range, with the last bin's upper edge clamped to absmax
        e = edges[first : last + 2].copy()
        e[-1] = max(min(e[-1], top), e[-2])
        c = cum[first : last + 2]
        return self.zeros + np.interp(np.asarray(values, np.float64), e, c, left=0.0, right=c[-1])

    def linear_histogram(self, bin_num: int = 2048, absmax: float | None = None) -> np.ndarray:
        """Counts of nonzero ``|x|`` in ``bin_num`` equal bins over ``[0, absmax]`` (float64)."""
        amax = self.absmax if absmax is None else float(absmax)
        if amax <= 0 or self.count == 0:
            return np.zeros(bin_num)
        edges = np.linspace(0.0, amax, bin_num + 1)
        cdf = self.abs_cdf(edges) - self.zeros
        cdf[0] = 0.0
        h = np.diff(cdf)
        return np.maximum(h, 0.0)

    def percentile(self, q: float) -> float:
        """The ``q``-th percentile (0..100) of ``|x|`` over every element, zeros included."""
        if self.count == 0:
            return 0.0
        target = self.count * q / 100.0
        if target <= self.zeros:
            return 0.0
        edges = log_edges()
        cum = np.cumsum(self.hist, dtype=np.float64) + self.zeros
        i = int(np.searchsorted(cum, target))
        if i >= NUM_LOG_BINS:
            return self.absmax
        lo_c = cum[i - 1] if i > 0 else float(self.zeros)
        lo_v, hi_v = float(edges[i]), min(float(edges[i + 1]), self.absmax)
        frac = (target - lo_c) / max(cum[i] - lo_c, 1e-300)
        return float(min(lo_v + frac * max(hi_v - lo_v, 0.0), self.absmax))

"""Tensor similarity metrics and per-tensor verdicts, as TPU-MLIR's ``npz_tool compare`` computes them.

For each tensor present in both sets (in the order of the first set), :func:`compare_tensors` gives
one verdict, checked in this order:

* ``EQUAL``: the arrays are identical (NaNs in the same places count as equal);
* ``CLOSE``: ``allclose(a, b, rtol=10**-k, atol=1e-8)`` for some ``k >= close_order`` (default 3);
* ``SIMILAR``: cosine similarity > the cosine tolerance **and** euclidean similarity > the
  euclidean tolerance (``--tolerance cos,euc``, default ``0.99,0.99``);
* ``NOT_SIMILAR``: otherwise (fails);
* ``MISMATCH``: the element counts differ (fails). Tensors of equal size but different shape are
  compared flattened, as TPU-MLIR does.

With ``select`` (an attention mask, ``npz_tool compare --mask``), a tensor it restricts is compared
on the elements it selects (the kept positions of a padded sequence), both sets alike; its result
says so in ``note``.

The metrics, computed in float64 on the flattened tensors:

* cosine similarity ``a·b / (‖a‖ ‖b‖)`` (1 if both are all-zero, 0 if only one is);
* euclidean similarity ``1 - ‖a - b‖ / ‖(a + b) / 2‖`` (1 if both are all-zero, 0 if only the mean is);
* SQNR in dB, TPU-MLIR's definition with ``a`` as the signal: zeros of ``a`` are dropped, then
  ``10·log10(Σ(a - ā)² / Σ(n - n̄)²)`` with noise ``n = a - b`` (``inf`` when the noise is constant).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lamina.support.dtypes import is_numeric

EQUAL = "EQUAL"
CLOSE = "CLOSE"
SIMILAR = "SIMILAR"
NOT_SIMILAR = "NOT_SIMILAR"
MISMATCH = "MISMATCH"
PASSING = (EQUAL, CLOSE, SIMILAR)

DEFAULT_TOLERANCE = (0.99, 0.99)
DEFAULT_CLOSE_ORDER = 3


def _flat64(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a)
    if a.dtype == np.float64:
        return a.reshape(-1)
    return a.reshape(-1).astype(np.float64)


def cosine_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """``a·b / (‖a‖ ‖b‖)`` on the flattened tensors."""
    x, y = _flat64(a), _flat64(b)
    nx, ny = float(np.linalg.norm(x)), float(np.linalg.norm(y))
    if nx == 0.0 or ny == 0.0:
        return 1.0 if nx == ny else 0.0
    return float(np.dot(x, y) / (nx * ny))


def euclidean_similarity(a: np.ndarray, b: np.ndarray) -> float:
    """``1 - ‖a - b‖ / ‖(a + b) / 2‖`` on the flattened tensors."""
    x, y = _flat64(a), _flat64(b)
    dist = float(np.linalg.norm(x - y))
    mid = float(np.linalg.norm((x + y) * 0.5))
    if mid == 0.0:
        return 1.0 if dist == 0.0 else 0.0
    return 1.0 - dist / mid


def sqnr(signal: np.ndarray, other: np.ndarray, remove_zero: bool = True) -> float:
    """Signal-to-quantization-noise ratio in dB (TPU-MLIR's definition; not symmetric)."""
    raw, deq = _flat64(signal), _flat64(other)
    if remove_zero:
        keep = raw != 0
        raw, deq = raw[keep], deq[keep]
    if raw.size == 0:
        return math.inf
    noise = raw - deq
    var_raw = float(np.sum(np.square(raw - raw.mean())))
    var_noise = float(np.sum(np.square(noise - noise.mean())))
    if var_noise == 0.0 or var_raw == 0.0:
        return math.inf
    return 10.0 * math.log10(var_raw / var_noise)


@dataclass
class TensorResult:
    """The comparison of one tensor."""

    name: str
    verdict: str
    shape_a: tuple[int, ...]
    shape_b: tuple[int, ...]
    dtype_a: str
    dtype_b: str
    cosine: float | None = None
    euclid: float | None = None
    sqnr: float | None = None
    close_order: int | None = None
    max_abs_diff: float | None = None
    note: str = ""

    @property
    def passed(self) -> bool:
        return self.verdict in PASSING

    def similarity(self) -> tuple[float, float]:
        """(cosine, euclidean) for plotting: 1.0 for EQUAL/CLOSE tensors, 0.0 for a MISMATCH."""
        if self.verdict == MISMATCH:
            return 0.0, 0.0
        return (
            1.0 if self.cosine is None else self.cosine,
            1.0 if self.euclid is None else self.euclid,
        )


def _finite_mask_equal(a: np.ndarray, b: np.ndarray) -> bool:
    try:
        return bool(np.array_equal(a, b, equal_nan=a.dtype.kind in "fc" and b.dtype.kind in "fc"))
    except TypeError:
        return bool(np.array_equal(a, b))


def compare_tensors(
    name: str,
    a: np.ndarray,
    b: np.ndarray,
    tolerance: Sequence[float] = DEFAULT_TOLERANCE,
    close_order: int = DEFAULT_CLOSE_ORDER,
) -> TensorResult:
    """Compare two tensors; see the module docstring for the verdicts and metrics."""
    a, b = np.asarray(a), np.asarray(b)
    res = TensorResult(name, EQUAL, tuple(a.shape), tuple(b.shape), str(a.dtype), str(b.dtype))
    if a.size != b.size:
        res.verdict = MISMATCH
        res.note = f"{a.size} vs {b.size} elements"
        return res
    if a.shape != b.shape:
        res.note = "shapes differ; compared flattened"
        a, b = a.reshape(-1), b.reshape(-1)
    if not is_numeric(a.dtype) or not is_numeric(b.dtype):
        res.verdict = EQUAL if _finite_mask_equal(a, b) else NOT_SIMILAR
        return res
    if _finite_mask_equal(a, b):
        return res
    x, y = a.astype(np.float64, copy=False), b.astype(np.float64, copy=False)
    with np.errstate(all="ignore"):
        diff = np.abs(x - y)
        seen = diff[~np.isnan(diff)]  # (np.nanmax warns on an all-NaN difference)
        res.max_abs_diff = float(seen.max()) if seen.size else (math.nan if diff.size else 0.0)
        order = close_order + 2
        while order > 1:
            if np.allclose(x, y, rtol=10.0**-order, atol=1e-8, equal_nan=True):
                break
            order -= 1
        if order >= close_order:
            res.verdict = CLOSE
            res.close_order = order
            return res
        res.cosine = cosine_similarity(x, y)
        res.euclid = euclidean_similarity(x, y)
        res.sqnr = sqnr(x, y)
    cos_tol, euc_tol = float(tolerance[0]), float(tolerance[1])
    ok = (
        not math.isnan(res.cosine)
        and not math.isnan(res.euclid)
        and res.cosine > cos_tol
        and res.euclid > euc_tol
    )
    res.verdict = SIMILAR if ok else NOT_SIMILAR
    return res


@dataclass
class CompareReport:
    """The comparison of two tensor sets (npz files)."""

    results: list[TensorResult]
    tolerance: tuple[float, float]
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)
    excepted: list[str] = field(default_factory=list)
    name_a: str = "a"
    name_b: str = "b"
    #: ``excepts`` naming a tensor of neither set (a typo? TPU-MLIR ignores them; the tools warn).
    unknown_excepts: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    @property
    def failed(self) -> list[TensorResult]:
        return [r for r in self.results if not r.passed]

    def count(self, verdict: str) -> int:
        return sum(1 for r in self.results if r.verdict == verdict)

    def min_similarity(self) -> tuple[float, float, float]:
        """The smallest cosine, euclidean and SQNR over the tensors that have them."""
        cos = [r.cosine for r in self.results if r.cosine is not None]
        euc = [r.euclid for r in self.results if r.euclid is not None]
        sq = [r.sqnr for r in self.results if r.sqnr is not None]
        return (min(cos, default=1.0), min(euc, default=1.0), min(sq, default=math.inf))

    def summary(self) -> str:
        n = len(self.results)
        npass = n - len(self.failed)
        cos, euc, sq = self.min_similarity()
        return (
            f"{n} compared, {npass} passed ({self.count(EQUAL)} equal, {self.count(CLOSE)} close, "
            f"{self.count(SIMILAR)} similar), {len(self.failed)} failed ({self.count(NOT_SIMILAR)} not similar, "
            f"{self.count(MISMATCH)} mismatched); min cosine {cos:.6f}, min euclidean {euc:.6f}, "
            f"min sqnr {format_db(sq)}; tolerance cosine > {self.tolerance[0]}, euclidean > {self.tolerance[1]}"
        )


def format_db(v: float | None) -> str:
    if v is None:
        return "-"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return f"{v:.2f} dB"


def compare_sets(
    a: Mapping[str, np.ndarray],
    b: Mapping[str, np.ndarray],
    tolerance: Sequence[float] = DEFAULT_TOLERANCE,
    excepts: Iterable[str] = (),
    close_order: int = DEFAULT_CLOSE_ORDER,
    name_a: str = "a",
    name_b: str = "b",
    select: Callable[[str, np.ndarray], np.ndarray | None] | None = None,
) -> CompareReport:
    """Compare every tensor present in both ``a`` and ``b`` (in ``a``'s order), skipping ``excepts``.
    ``select(name, array)``: the elements to compare (e.g. the kept positions of a padded sequence),
    or None for the whole tensor."""
    excepts = list(excepts)
    skip = set(excepts)
    bkeys = set(b.keys())
    results: list[TensorResult] = []
    excepted: list[str] = []
    for k in a:
        if k not in bkeys:
            continue
        if k in skip:
            excepted.append(k)
            continue
        x, y = a[k], b[k]
        sx = sy = None
        if select is not None and np.shape(x) == np.shape(y):
            sx, sy = select(k, np.asarray(x)), select(k, np.asarray(y))
        if sx is not None and sy is not None:
            r = compare_tensors(k, sx, sy, tolerance, close_order)
            r.shape_a, r.shape_b = tuple(np.shape(x)), tuple(np.shape(y))
            r.note = (r.note + "; " if r.note else "") + f"over kept positions ({sx.size} of {np.size(x)})"
            results.append(r)
        else:
            results.append(compare_tensors(k, x, y, tolerance, close_order))
    akeys = set(a.keys())
    return CompareReport(
        results,
        (float(tolerance[0]), float(tolerance[1])),
        only_a=[k for k in a if k not in bkeys],
        only_b=[k for k in b if k not in akeys],
        excepted=excepted,
        name_a=name_a,
        name_b=name_b,
        unknown_excepts=[k for k in dict.fromkeys(excepts) if k not in akeys and k not in bkeys],
    )


def parse_tolerance(text: str) -> tuple[float, float]:
    """``"0.99,0.99"`` → (cosine, euclidean); raises ValueError with a clear message."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    if len(parts) != 2:
        raise ValueError(f"--tolerance expects two numbers 'cosine,euclidean' (like 0.99,0.99), got '{text}'")
    try:
        vals = (float(parts[0]), float(parts[1]))
    except ValueError:
        raise ValueError(f"--tolerance expects two numbers 'cosine,euclidean', got '{text}'") from None
    if any(not math.isfinite(v) or v > 1.0 or v < -1.0 for v in vals):
        raise ValueError(f"--tolerance values must be finite, at least -1 and at most 1.0, got '{text}'")
    return vals


__all__ = [
    "CLOSE",
    "EQUAL",
    "MISMATCH",
    "NOT_SIMILAR",
    "SIMILAR",
    "CompareReport",
    "TensorResult",
    "compare_sets",
    "compare_tensors",
    "cosine_similarity",
    "euclidean_similarity",
    "parse_tolerance",
    "sqnr",
]

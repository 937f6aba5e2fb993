"""Threshold tuning: refine each tensor's threshold between its initial (KL) value and its absmax.

For a tensor ``T`` with threshold ``t0`` and absolute maximum ``A``, candidates in ``[t0, A]`` are
scored on the tuning samples: ``T`` is int8 fake-quantized with the candidate (symmetric, scale
``th / 127``, round half to even, clamp to [-128, 127]) and every op consuming ``T`` is executed (its
own ``execute``, the interpreter's step) on that and its other inputs in float; the score is the
relative squared error ``|y - y_ref|^2 / |y_ref|^2`` of the consumers' float outputs, summed over
consumers and samples (a tensor nobody consumes — a model output — is scored on itself). The search
is a coarse grid of ``steps // 2 + 1`` candidates including both ends, then the two midpoints on each
side of the best one, repeated while the step is above ``(A - t0) / steps``; ties keep the smaller
threshold. Ops with regions are not re-executed (their tensors are scored on themselves).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np


def fake_quant(x: np.ndarray, threshold: float, qmin: int = -128, qmax: int = 127) -> np.ndarray:
    """Symmetric int8 quantize-dequantize of ``x`` with ``scale = threshold / 127``."""
    scale = np.float32(threshold / 127.0)
    q = np.asarray(np.rint(x / scale))  # a 0-d x gives a numpy scalar: clip(out=) needs an array
    np.clip(q, qmin, qmax, out=q)
    q *= scale
    return q.astype(x.dtype, copy=False)


def _rel_err(y: np.ndarray, ref: np.ndarray) -> float:
    d = (np.asarray(y, np.float32) - np.asarray(ref, np.float32)).ravel()
    r = np.asarray(ref, np.float32).ravel()
    den = float(np.dot(r, r))
    num = float(np.dot(d, d))
    return num / den if den > 0 else num


def tune_thresholds(
    runner: Any,
    envs: list[list[Any]],
    thresholds: Mapping[str, float],
    absmax: Mapping[str, float],
    steps: int = 4,
    progress: bool = False,
    kept: Any = None,
) -> dict[str, float]:
    """Tuned thresholds for the tensors in ``thresholds`` (those with room between t0 and absmax).
    ``kept(env index, slot, array)``, when given, restricts every error to the elements a sample's
    attention mask keeps (see :mod:`lamina.quant.masking`)."""

    def part(k: int, slot: int, x: Any) -> Any:
        return x if kept is None else kept(k, slot, x)

    it = runner.interp
    slot_of = {name: s for s, name in runner.names.items()}
    consumers: dict[int, list[tuple[Any, tuple[int, ...], tuple[int, ...], Any]]] = {}
    for fn, ins, outs, _, op in it.plan:
        if op.regions:
            continue
        sub = _channel_subset(op, ins, envs[0]) if envs else None
        for s in set(ins):
            if sub is not None and s == ins[0]:
                consumers.setdefault(s, []).append((fn, ins, outs, sub))
            else:
                consumers.setdefault(s, []).append((fn, ins, outs, None))
    todo = [
        n for n, th in thresholds.items() if n in slot_of and absmax.get(n, 0.0) > th * (1 + 1e-6) and th > 0
    ]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc="tune", unit="tensor", leave=False, dynamic_ncols=True, disable=None)
    out: dict[str, float] = {}
    for name in todo:
        s = slot_of[name]
        cons = consumers.get(s, [])
        cache: dict[float, float] = {}

        def score(th: float, s: int = s, cons: list = cons, cache: dict = cache) -> float:
            if th in cache:
                return cache[th]
            total = 0.0
            for k, env in enumerate(envs):
                x = env[s]
                if not isinstance(x, np.ndarray):
                    continue
                xq = fake_quant(x, th)
                if not cons:
                    total += _rel_err(part(k, s, xq), part(k, s, x))
                    continue
                for fn, ins, outs, sub in cons:
                    args = [xq if i == s else env[i] for i in ins]
                    if sub is not None:  # a convolution scored on a subset of its output channels
                        args[1] = sub[0]
                        if sub[1] is not None:
                            args[2] = sub[1]
                        res = fn(args)
                        total += _rel_err(res[0], env[outs[0]][:, :: sub[2]])  # convolutions: no mask
                        continue
                    res = fn(args)
                    for o, y in zip(outs, res):
                        ref = env[o]
                        if isinstance(ref, np.ndarray) and ref.dtype.kind == "f" and ref.size:
                            total += _rel_err(part(k, o, np.asarray(y)), part(k, o, ref))
            cache[th] = total
            return total

        t0, a = float(thresholds[name]), float(absmax[name])
        out[name] = _search(score, t0, a, steps)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return out


#: a convolution consumer is scored on every k-th output channel, keeping at least this many
CONV_SCORE_CHANNELS = 16


def _channel_subset(op: Any, ins: tuple[int, ...], env: list[Any]) -> tuple[Any, Any, int] | None:
    """For a ``group == 1`` ``top.Conv`` with many output channels: the filter and bias restricted to
    every k-th output channel, and k (the op's output is linear per channel, so this scores the same
    quantity on a uniform subsample at a fraction of the cost)."""
    if op.name != "top.Conv" or len(ins) < 2 or op.group != 1:  # op.group: an int (default 1)
        return None
    w = env[ins[1]]
    if not isinstance(w, np.ndarray) or w.ndim < 3 or w.shape[0] < 2 * CONV_SCORE_CHANNELS:
        return None
    k = w.shape[0] // CONV_SCORE_CHANNELS
    b = env[ins[2]] if len(ins) > 2 else None
    bs = np.ascontiguousarray(b[::k]) if isinstance(b, np.ndarray) and b.ndim == 1 else None
    if len(ins) > 2 and bs is None and b is not None:
        return None
    return np.ascontiguousarray(w[::k]), bs, k


def _search(score: Any, lo: float, hi: float, steps: int) -> float:
    n = max(2, steps // 2)
    grid = [lo + (hi - lo) * k / n for k in range(n + 1)]
    best = min(grid, key=lambda t: (score(t), t))
    step = (hi - lo) / n
    finest = (hi - lo) / max(steps, 1)
    while step > finest * (1 + 1e-9):
        step /= 2
        cands = [best] + [t for t in (best - step, best + step) if lo <= t <= hi]
        best = min(cands, key=lambda t: (score(t), t))
    return float(best)

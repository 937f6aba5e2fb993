"""Data movement as strided GDMA moves: which elements of its inputs each element of a data-movement
op's result is, found by running the op's own reference on index tensors, then written as a few
strided 4-d moves (``npu.Copy``).

:func:`index_map` runs the ``top`` reference of a movement op (Slice, Concat, Split, Permute, Tile,
Expand, nearest Interp, DepthToSpace, ...) on inputs whose elements are their own flat indices
(offset per input, so that a result element names the input it came from); :func:`moves_of` splits
that map into pieces that are affine in the result's multi-index — trying the whole, then each axis
split into (outer, factor) for small factors (upsampling, depth-to-space), then chunks along one axis
(concatenation, tiling) — and writes each piece as strided moves of at most four dims. The result
is checked by executing the moves (:meth:`lamina.targets.npu.dialect.CopyOp.execute`'s semantics)
against the map itself, so a move list is never wrong: where no short list exists the op stays on
the host.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

__all__ = ["MAX_MOVES", "Move", "copy_map", "index_map", "moves_of", "normalize"]

#: the most moves one op may become (beyond it, the op runs on the host)
MAX_MOVES = 256
#: the factors tried when splitting an axis (upsampling by 2/3/4, depth-to-space blocks)
_FACTORS = (2, 3, 4, 8)

#: (input, src offset, shape, src strides, dst offset, dst strides), in elements
Move = tuple[int, int, tuple[int, ...], tuple[int, ...], int, tuple[int, ...]]


def index_map(run: object, shapes: Sequence[Sequence[int]]) -> np.ndarray | list[np.ndarray] | None:
    """The result(s) of ``run(inputs)`` (a movement op's reference) on index inputs: input ``i``'s
    elements are ``base_i + flat index`` (``base_i``: the elements of the inputs before it), in
    float64 (exact integers). None when a result is not made of such indices."""
    arrays = []
    base = 0
    for s in shapes:
        n = int(np.prod(s)) if len(s) else 1
        arrays.append((np.arange(n, dtype=np.float64) + base).reshape(tuple(s)))
        base += n
    try:
        outs = run(arrays)  # type: ignore[operator]
    except Exception:
        return None
    res = []
    for o in outs:
        a = np.asarray(o, dtype=np.float64)
        if a.size and (
            not np.all(np.isfinite(a)) or np.any(a != np.round(a)) or a.min() < 0 or a.max() >= base
        ):
            return None
        res.append(a.astype(np.int64))
    return res


def _affine(m: np.ndarray) -> tuple[int, tuple[int, ...]] | None:
    """``(offset, strides)`` when ``m[o] == offset + sum(o_k * strides_k)`` for every index ``o``."""
    if m.size == 0:
        return None
    off = int(m.reshape(-1)[0])
    strides = []
    for k, d in enumerate(m.shape):
        if d == 1:
            strides.append(0)
            continue
        idx = [0] * m.ndim
        idx[k] = 1
        strides.append(int(m[tuple(idx)]) - off)
    expect = np.full(m.shape, off, dtype=np.int64)
    for k, s in enumerate(strides):
        if s and m.shape[k] > 1:
            shape = [1] * m.ndim
            shape[k] = -1
            expect = expect + (np.arange(m.shape[k], dtype=np.int64) * s).reshape(shape)
    if not np.array_equal(expect, m) or min(strides, default=0) < 0:
        return None
    return off, tuple(strides)


def normalize(
    shape: Sequence[int], src: Sequence[int], dst: Sequence[int]
) -> tuple[list[int], list[int], list[int]]:
    """Drop dims of size 1 and merge adjacent dims that are contiguous in both views."""
    dims = [(int(d), int(s), int(t)) for d, s, t in zip(shape, src, dst) if d != 1]
    out: list[tuple[int, int, int]] = []
    for d, s, t in dims:
        if out:
            pd, ps, pt = out[-1]
            if ps == s * d and pt == t * d:
                out[-1] = (pd * d, s, t)
                continue
        out.append((d, s, t))
    if not out:
        out = [(1, 1, 1)]
    return [o[0] for o in out], [o[1] for o in out], [o[2] for o in out]


def _emit(
    inp: int, src_off: int, shape: list[int], src: list[int], dst_off: int, dst: list[int], out: list[Move]
) -> bool:
    """Append the moves of one affine piece (at most 4 dims each: outer dims unrolled)."""
    shape, src, dst = normalize(shape, src, dst)
    while len(shape) < 4:
        shape, src, dst = [1, *shape], [0, *src], [0, *dst]
    outer = shape[:-4]
    count = math.prod(outer) if outer else 1
    if len(out) + count > MAX_MOVES:
        return False
    for idx in np.ndindex(*outer) if outer else [()]:
        so = src_off + sum(i * s for i, s in zip(idx, src))
        do = dst_off + sum(i * s for i, s in zip(idx, dst))
        out.append((inp, so, tuple(shape[-4:]), tuple(src[-4:]), do, tuple(dst[-4:])))
    return True


def _splits(shape: Sequence[int], dst: Sequence[int]) -> list[tuple[list[int], list[int]]]:
    """Ways to view a piece: as is, with one axis split into (outer, factor), or two (depth-to-space
    splits h and w): ``(shape, dst strides)`` each."""

    def split(sh: list[int], ds: list[int], k: int, f: int) -> tuple[list[int], list[int]]:
        return [*sh[:k], sh[k] // f, f, *sh[k + 1 :]], [*ds[:k], ds[k] * f, ds[k], *ds[k + 1 :]]

    views = [(list(shape), list(dst))]
    ones = []
    for k, d in enumerate(shape):
        for f in _FACTORS:
            if d % f == 0 and d > f:
                ones.append((k, f))
                views.append(split(list(shape), list(dst), k, f))
    for i, (k1, f1) in enumerate(ones):
        for k2, f2 in ones[i + 1 :]:
            if k2 > k1:  # split the later axis first: the earlier one keeps its index
                sh, ds = split(list(shape), list(dst), k2, f2)
                views.append(split(sh, ds, k1, f1))
    return views


def _piece(
    m: np.ndarray,
    dst_strides: Sequence[int],
    dst_off: int,
    bases: Sequence[int],
    out: list[Move],
    depth: int = 0,
) -> bool:
    """Append the moves writing the part ``m`` of the map (at ``dst_off``, ``dst_strides`` in the
    result): one affine view of a single input, else chunks along one axis (at most two levels)."""
    lo, hi = int(m.min()), int(m.max())
    inp = int(np.searchsorted(bases, lo, side="right")) - 1
    if int(np.searchsorted(bases, hi, side="right")) - 1 == inp:
        for shape, ds in _splits(m.shape, dst_strides):
            a = _affine(m.reshape(shape))
            if a is not None:
                return _emit(inp, a[0] - int(bases[inp]), shape, list(a[1]), dst_off, ds, out)
    if depth >= 2:
        return False
    # chunks along one axis (concatenation, tiling): runs of one input with one step, each a piece
    for k, d in enumerate(m.shape):
        if d < 2:
            continue
        cuts = _cuts(m, k, bases)
        if len(cuts) < 3 or len(cuts) > MAX_MOVES:
            continue
        trial: list[Move] = []
        ok = True
        for a0, a1 in itertools.pairwise(cuts):
            sl = [slice(None)] * m.ndim
            sl[k] = slice(a0, a1)
            if not _piece(m[tuple(sl)], dst_strides, dst_off + a0 * dst_strides[k], bases, trial, depth + 1):
                ok = False
                break
        if ok and len(out) + len(trial) <= MAX_MOVES:
            out.extend(trial)
            return True
    return False


def _cuts(m: np.ndarray, axis: int, bases: Sequence[int]) -> list[int]:
    """Positions along ``axis`` where the map changes input or breaks its step: the chunk bounds."""
    d = m.shape[axis]
    first = np.moveaxis(m, axis, 0).reshape(d, -1)
    owner = np.searchsorted(bases, first[:, 0], side="right") - 1
    cuts = [0]
    step = None
    for i in range(1, d):
        if owner[i] != owner[i - 1]:
            cuts.append(i)
            step = None
            continue
        s = first[i] - first[i - 1]
        if step is None:
            step = s
        elif not np.array_equal(s, step):
            cuts.append(i)
            step = None
    cuts.append(d)
    return cuts


def moves_of(maps: np.ndarray, shapes: Sequence[Sequence[int]]) -> list[Move] | None:
    """The strided moves that build a result of index map ``maps`` (see :func:`index_map`) from inputs
    of ``shapes``, checked by executing them; None when there is no list of at most
    :data:`MAX_MOVES`."""
    bases = np.cumsum([0] + [int(np.prod(s)) if len(s) else 1 for s in shapes])[:-1]
    m = np.asarray(maps)
    out_strides = [int(s) for s in (np.array(_contiguous(m.shape), dtype=np.int64))]
    moves: list[Move] = []
    if m.size == 0 or not _piece(m, out_strides, 0, list(bases), moves):
        return None
    # the check: executing the moves gives the map exactly, every element written once
    flat = np.full(m.size, -1, dtype=np.int64)
    seen = np.zeros(m.size, dtype=np.int64)
    for inp, so, shape, ss, do, ds in moves:
        src = np.arange(int(np.prod(shapes[inp])) if len(shapes[inp]) else 1, dtype=np.int64) + int(
            bases[inp]
        )
        sv = np.lib.stride_tricks.as_strided(src[so:], shape, [s * 8 for s in ss], writeable=False)
        idx = np.lib.stride_tricks.as_strided(
            np.arange(m.size, dtype=np.int64)[do:], shape, [s * 8 for s in ds]
        )
        flat[idx.reshape(-1)] = sv.reshape(-1)
        np.add.at(seen, idx.reshape(-1), 1)
    if not (np.array_equal(flat, m.reshape(-1)) and np.all(seen == 1)):
        return None
    return moves


def copy_map(moves: Sequence[Move], shapes: Sequence[Sequence[int]], size: int) -> np.ndarray:
    """The index map (as :func:`index_map` numbers the inputs' elements) that ``moves`` build: for each
    element of the result, the element it is; -1 where no move writes."""
    bases = np.cumsum([0] + [int(np.prod(s)) if len(s) else 1 for s in shapes])
    out = np.full(size, -1, dtype=np.int64)
    for inp, so, shape, ss, do, ds in moves:
        n = int(bases[inp + 1] - bases[inp])
        src = np.arange(n, dtype=np.int64) + int(bases[inp])
        sv = np.lib.stride_tricks.as_strided(src[so:], shape, [s * 8 for s in ss], writeable=False)
        dv = np.lib.stride_tricks.as_strided(out[do:], shape, [s * 8 for s in ds])
        dv[...] = sv
    return out


def _contiguous(shape: Sequence[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return list(reversed(out))

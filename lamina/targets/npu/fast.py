"""Fast exact integer accumulations for the TIU's INT8 commands (convolution, matrix product), and
their requantization in place.

The ``tpu`` ops accumulate ``(x - x_zp) * (w - w_zp)`` exactly (float64 GEMMs on centred storage
integers, :mod:`lamina.execution.kernels.integer`). Here the same sums run as **float32** GEMMs —
about twice as fast, and half the memory for the im2col matrix — over chunks of the reduction
dimension ``K`` small enough that every partial sum is exact: with ``|x - x_zp| <= bx`` and
``|w - w_zp| <= bw`` (bounds read from the data), a chunk of ``k <= 2**24 / (bx * bw)`` terms keeps
every partial sum an integer of magnitude at most ``2**24``, which float32 holds exactly, whatever
order BLAS adds in. Chunks are summed in float64 (exact below ``2**53``); the result is the exact
integer accumulation as int64, which the caller wraps to the int32 register as the contract does.
Depthwise convolutions accumulate their few taps in float32 under the same bound.

The contract is the ``tpu`` op's ``execute``: ``tests/targets/npu/test_tiu.py`` holds
:func:`lamina.targets.npu.tiu.conv` and :func:`~lamina.targets.npu.tiu.matmul` (which call these)
to it, and ``tests/targets/npu/test_fast.py`` holds these to the int64 statement of the sums on
inputs that force many chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from lamina.execution.kernels.conv import DepthwisePlan

__all__ = ["EXACT", "add_bias", "chunk_size", "conv_accumulate", "matmul_accumulate", "requantize"]

#: float32 holds every integer of magnitude at most 2**24 exactly
EXACT = 1 << 24

#: per-geometry scratch buffers (zero-bordered padded input, im2col matrix); bounded
_BUFFERS: dict[Any, tuple[np.ndarray | None, np.ndarray | None]] = {}
_DEPTHWISE: dict[Any, DepthwisePlan] = {}


def _bound(a: np.ndarray, zp: Any) -> float:
    """``max |a - zp|`` over ``a`` (``zp`` a scalar or an array broadcasting against ``a``)."""
    if a.size == 0:
        return 0.0
    z = np.asarray(zp, np.float64)
    if z.ndim == 0:
        return float(max(abs(float(a.max()) - float(z)), abs(float(a.min()) - float(z))))
    return float(np.max(np.abs(np.asarray(a, np.float64) - z)))


def chunk_size(k: int, bx: float, bw: float) -> int:
    """Terms of a float32 dot product of factors bounded by ``bx`` and ``bw`` whose partial sums
    all stay exact (at most ``2**24`` in magnitude): ``k`` itself when that many are safe."""
    p = bx * bw
    if p <= 0:
        return max(k, 1)
    return max(1, min(k, int(EXACT // p)))


def _to_int64(acc: np.ndarray) -> np.ndarray:
    return acc.astype(np.int64)


def _from_one_chunk(acc: np.ndarray) -> np.ndarray:
    """A one-chunk float32 result (every value an integer of magnitude at most 2**24) as int32:
    exact, and already what the int32 register holds (no wrap can occur)."""
    return acc.astype(np.int32)


def _gemm_chunks(wm: np.ndarray, cols: np.ndarray, chunk: int) -> np.ndarray:
    """``wm @ cols`` (``wm`` (M, K), ``cols`` (..., K, P), float32) summed exactly over chunks of
    ``chunk`` columns of ``K`` — int64."""
    k = wm.shape[1]
    if chunk >= k:
        return _from_one_chunk(np.matmul(wm, cols))
    acc: np.ndarray | None = None
    for k0 in range(0, k, chunk):
        part = np.matmul(wm[:, k0 : k0 + chunk], cols[..., k0 : k0 + chunk, :])
        if acc is None:
            acc = part.astype(np.float64)
        else:
            acc += part
    assert acc is not None
    return _to_int64(acc)


def _buffers(key: Any, padded_shape: tuple[int, ...] | None, cols_shape: tuple[int, ...] | None) -> Any:
    ent = _BUFFERS.get(key)
    if ent is None:
        if len(_BUFFERS) > 64:
            _BUFFERS.clear()
        padded = np.zeros(padded_shape, np.float32) if padded_shape is not None else None
        cols = np.empty(cols_shape, np.float32) if cols_shape is not None else None
        ent = _BUFFERS[key] = (padded, cols)
    return ent


def _conv_group(
    xc: np.ndarray,
    wc: np.ndarray,
    stride: Sequence[int],
    dilation: Sequence[int],
    pad: Sequence[int],
    chunk: int,
) -> np.ndarray:
    """One group's convolution (centred float32 ``xc`` (N, C, H, W), ``wc`` (M, C, kh, kw)) as
    im2col and chunked float32 GEMMs — int64 (N, M, OH, OW)."""
    n, c, h, w = xc.shape
    m, _, kh, kw = wc.shape
    (sh, sw), (dh, dw) = stride, dilation
    pt, pl, pb, pr = pad
    hp, wp = h + pt + pb, w + pl + pr
    oh = (hp - ((kh - 1) * dh + 1)) // sh + 1
    ow = (wp - ((kw - 1) * dw + 1)) // sw + 1
    k = c * kh * kw
    wm = wc.reshape(m, k)
    direct = kh == kw == sh == sw == 1 and not any(pad)
    key = (xc.shape, wc.shape, tuple(stride), tuple(dilation), tuple(pad))
    padded, cols = _buffers(
        key,
        (n, c, hp, wp) if any(pad) else None,
        None if direct else (n, k, oh * ow),
    )
    if direct:  # 1x1, stride 1: the input is its own im2col matrix
        return _gemm_chunks(wm, xc.reshape(n, c, h * w), chunk).reshape(n, m, oh, ow)
    if padded is not None:
        padded[:, :, pt : pt + h, pl : pl + w] = xc
        src = padded
    else:
        src = np.ascontiguousarray(xc)
    it = src.itemsize
    view = as_strided(
        src,
        (n, c, kh, kw, oh, ow),
        (c * hp * wp * it, hp * wp * it, dh * wp * it, dw * it, sh * wp * it, sw * it),
        writeable=False,
    )
    np.copyto(cols.reshape(n, c, kh, kw, oh, ow), view)
    return _gemm_chunks(wm, cols, chunk).reshape(n, m, oh, ow)


def conv_accumulate(
    x: np.ndarray,
    w: np.ndarray,
    *,
    x_zp: int,
    w_zp: int,
    stride: Sequence[int],
    dilation: Sequence[int],
    pad: Sequence[int],
    group: int,
) -> np.ndarray | None:
    """The exact sums ``sum((x - x_zp) * (w - w_zp))`` of a grouped 2-d convolution of storage
    integers ``x`` (N, C, H, W) and ``w`` (M, C/group, kh, kw) — padding contributes 0 after
    centring — as int64 (N, M, OH, OW), or int32 when one chunk held the whole sum (it then fits
    the int32 register as it is); ``pad`` is ``(top, left, bottom, right)``. None for anything
    but 2-d (the caller then takes the contract's float64 path)."""
    if x.ndim != 4 or w.ndim != 4 or len(pad) != 4:
        return None
    c, m = x.shape[1], w.shape[0]
    bx, bw = _bound(x, x_zp), _bound(w, w_zp)
    xc = x.astype(np.float32)
    if x_zp:
        xc -= np.float32(x_zp)
    wc = w.astype(np.float32)
    if w_zp:
        wc -= np.float32(w_zp)
    kh, kw = w.shape[2:]
    if group == c == m and w.shape[1] == 1:
        if kh * kw * bx * bw > EXACT:
            return None  # too many large taps for float32: the float64 path
        key = (x.shape, w.shape, tuple(stride), tuple(dilation), tuple(pad))
        plan = _DEPTHWISE.get(key)
        if plan is None:
            if len(_DEPTHWISE) > 64:
                _DEPTHWISE.clear()
            geo = ([kh, kw], list(stride), list(dilation), [pad[0], pad[1], pad[2], pad[3]])
            plan = _DEPTHWISE[key] = DepthwisePlan(geo, xc)
        return _from_one_chunk(plan.run(xc, wc, None, False))
    chunk = chunk_size(w.shape[1] * kh * kw, bx, bw)
    if group == 1:
        return _conv_group(xc, wc, stride, dilation, pad, chunk)
    cg, mg = c // group, m // group
    parts = [
        _conv_group(xc[:, g * cg : (g + 1) * cg], wc[g * mg : (g + 1) * mg], stride, dilation, pad, chunk)
        for g in range(group)
    ]
    return np.concatenate(parts, axis=1)


def matmul_accumulate(a: np.ndarray, b: np.ndarray, *, a_zp: int, b_zp: Any) -> np.ndarray:
    """The exact sums of ``(a - a_zp) @ (b - b_zp)`` (numpy matmul broadcasting; ``b_zp`` one
    value or one per column of ``b``) as int64 (int32 when one chunk held the whole sum)."""
    bx = _bound(a, a_zp)
    bz = np.asarray(b_zp, np.float64)
    bw = _bound(b, bz if bz.ndim == 0 else bz.reshape(-1))
    ac = a.astype(np.float32)
    if a_zp:
        ac -= np.float32(a_zp)
    bc = b.astype(np.float32)
    if bz.ndim == 0:
        if bz:
            bc -= np.float32(bz)
    else:
        bc -= bz.reshape(-1).astype(np.float32)
    k = a.shape[-1]
    chunk = chunk_size(k, bx, bw)
    if chunk >= k:
        return _from_one_chunk(np.matmul(ac, bc))
    acc: np.ndarray | None = None
    for k0 in range(0, k, chunk):
        part = np.matmul(ac[..., k0 : k0 + chunk], bc[..., k0 : k0 + chunk, :])
        acc = part.astype(np.float64) if acc is None else acc + part
    assert acc is not None
    return _to_int64(acc)


def add_bias(acc: np.ndarray, bias: np.ndarray, axis: int) -> np.ndarray:
    """``acc + bias`` (``bias`` one per channel of ``axis``) wrapped to the int32 register, as the
    contract's ``wrap_int32(acc + bias)`` — int32 addition wraps the same, in one pass."""
    shape = [1] * acc.ndim
    shape[axis] = -1
    b = np.asarray(bias)
    if b.dtype != np.int32:  # a wider bias wraps into the register first: the same sum mod 2**32
        b = b.astype(np.int64).astype(np.int32)
    return np.add(acc.astype(np.int32, copy=False), b.reshape(shape))


def requantize(
    acc: np.ndarray,
    multiplier: Any,
    rshift: Any,
    zero_point: int,
    qmin: int,
    qmax: int,
    axis: int | None,
    out_dtype: np.dtype,
) -> np.ndarray:
    """:func:`lamina.dialects.tpu.quantize.requantize` then the cast to ``out_dtype``, bit for bit,
    on one int64 buffer updated in place (the contract makes a new array per step; 4x faster on a
    1x96x112x112 accumulator): ``clip(zero_point + (p + 2**(s-1) - (p < 0)) >> s, qmin, qmax)``
    for ``p = acc * multiplier`` and ``s = 31 + rshift``, one pair or one per channel of ``axis``."""
    m: np.ndarray = np.asarray(multiplier, np.int64).reshape(-1)
    s: np.ndarray = 31 + np.asarray(rshift, np.int64).reshape(-1)
    if m.size > 1 or s.size > 1:
        assert axis is not None, "per-channel requantization needs an axis"
        shape = [1] * acc.ndim
        shape[axis] = -1
        m, s = m.reshape(shape), s.reshape(shape)
    else:
        m, s = m.reshape(()), s.reshape(())
    y = np.multiply(np.ascontiguousarray(acc), m, dtype=np.int64)
    neg = y < 0
    y += np.left_shift(np.int64(1), s - 1)
    np.subtract(y, neg, out=y, casting="unsafe")
    np.right_shift(y, s, out=y)
    if zero_point:
        y += np.int64(zero_point)
    np.clip(y, qmin, qmax, out=y)
    return y.astype(out_dtype)

"""The integer arithmetic of the ``tpu`` dialect: the one place where rounding, requantization,
saturation and float rounding are defined. ``docs/tpu.md`` states the same contract in prose; every
backend must match these functions bit for bit.

* :func:`quantize_multiplier` — a positive real multiplier ``M`` as ``multiplier * 2**-(31 + rshift)``
  with ``multiplier`` an int32 in ``[2**30, 2**31)`` (or smaller when the total shift is capped at 62).
* :func:`requantize` — ``y = sat(zp + rdiv((acc * multiplier), 2**(31 + rshift)))`` where ``rdiv``
  rounds half away from zero, computed exactly in int64.
* :func:`quantize` — float → integer: ``sat(round_half_away(x / scale) + zp)`` computed in float64
  from the float32 input.
* :func:`dequantize` — ``(q - zp) * scale`` in float32.
* :func:`round_float` — float32 → f16 / bf16 (IEEE round to nearest even, as ``ml_dtypes`` does).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from lamina.dialects.quant import QuantizedType, UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.types import FloatType, ShapedType, Type

__all__ = [
    "LUT_FUNCTIONS",
    "MAX_SHIFT",
    "build_lut",
    "int_attention",
    "int_layer_norm",
    "int_softmax",
    "isqrt",
    "rdiv",
    "softmax_exp_table",
    "dequantize",
    "float_dtype",
    "qparams",
    "quantize",
    "quantize_multiplier",
    "requant_factors",
    "requantize",
    "round_float",
    "round_half_away",
    "rounding_rshift",
    "storage_dtype",
    "wrap_int32",
]

#: The largest total right shift ``31 + rshift`` a requantization may use.
MAX_SHIFT = 62


def quantize_multiplier(real: float) -> tuple[int, int]:
    """``real`` (> 0) as ``(multiplier, rshift)`` with ``real ≈ multiplier * 2**-(31 + rshift)``.

    ``real = m * 2**e`` with ``m`` in [0.5, 1); ``multiplier = round_half_away(m * 2**31)`` (a
    carry to ``2**31`` renormalizes to ``2**30`` with ``e + 1``); ``rshift = -e``. When the total
    shift ``31 + rshift`` would exceed :data:`MAX_SHIFT` it is capped there and the multiplier is
    ``round_half_away(real * 2**MAX_SHIFT)`` (possibly 0). ``real == 0`` gives ``(0, 0)``."""
    if not math.isfinite(real) or real < 0:
        raise ValueError(f"requantization multiplier must be finite and >= 0, got {real}")
    if real == 0.0:
        return 0, 0
    m, e = math.frexp(real)  # real = m * 2**e, 0.5 <= m < 1
    q = math.floor(m * (1 << 31) + 0.5)
    if q == 1 << 31:
        q //= 2
        e += 1
    rshift = -e
    if 31 + rshift > MAX_SHIFT:
        rshift = MAX_SHIFT - 31
        q = math.floor(real * 2.0**MAX_SHIFT + 0.5)
    if 31 + rshift < 1:
        raise ValueError(f"requantization multiplier {real} is too large (>= 2**30)")
    return int(q), int(rshift)


def rounding_rshift(x: np.ndarray, shift: np.ndarray | int) -> np.ndarray:
    """``x / 2**shift`` rounded half away from zero, for int64 ``x`` and ``shift`` in [1, 62]:
    ``(x + 2**(shift-1) - (x < 0)) >> shift`` (arithmetic shift)."""
    x = np.asarray(x, dtype=np.int64)
    s = np.asarray(shift, dtype=np.int64)
    half = np.left_shift(np.int64(1), s - 1)
    return np.right_shift(x + half - (x < 0).astype(np.int64), s)


def wrap_int32(x: np.ndarray) -> np.ndarray:
    """Two's-complement wrap of integers to int32 (what a 32-bit accumulator does on overflow)."""
    return np.asarray(x).astype(np.int64).astype(np.int32)


def requantize(
    acc: np.ndarray,
    multiplier: np.ndarray | int,
    rshift: np.ndarray | int,
    zero_point: int,
    qmin: int,
    qmax: int,
    axis: int | None = None,
) -> np.ndarray:
    """int32 ``acc`` → ``clip(zero_point + rdiv(acc * multiplier, 2**(31 + rshift)), qmin, qmax)``
    (int64 arithmetic, ``rdiv`` rounding half away from zero) as int64. With ``axis``, ``multiplier``
    and ``rshift`` are per-channel arrays along that axis of ``acc``."""
    acc = np.asarray(acc).astype(np.int64)
    m = np.asarray(multiplier, dtype=np.int64)
    s = 31 + np.asarray(rshift, dtype=np.int64)
    if axis is not None and m.ndim == 1:
        shape = [1] * acc.ndim
        shape[axis] = -1
        m = m.reshape(shape)
        s = s.reshape(shape)
    y = rounding_rshift(acc * m, s) + np.int64(zero_point)
    return np.clip(y, qmin, qmax)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """Round to nearest, ties away from zero (float64 in, float64 out)."""
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 0:
        return np.sign(x) * np.floor(np.abs(x) + 0.5)
    # ``sign(x) * floor(|x| + 0.5)`` in one buffer (the same operations in the same order, so the
    # same bits): a model's weights are quantized through here, and five temporaries cost 5x more
    r = np.abs(x)
    r += 0.5
    np.floor(r, out=r)
    return np.multiply(np.sign(x), r, out=r)


def storage_dtype(t: QuantizedType) -> np.dtype:
    """The numpy dtype holding the integers of a quantized element type."""
    bits = 8 if t.storage_width <= 8 else 16 if t.storage_width <= 16 else 32
    return np.dtype(f"int{bits}" if t.signed else f"uint{bits}")


def qparams(t: Type) -> tuple[np.ndarray, np.ndarray, int | None, int, int]:
    """``(scales, zero_points, axis, qmin, qmax)`` of a quantized (element or tensor) type; per-tensor
    types give 0-d arrays and ``axis`` None."""
    e = t.element_type if isinstance(t, ShapedType) else t
    if isinstance(e, UniformQuantizedType):
        return np.float64(e.scale), np.int64(e.zero_point), None, e.storage_min, e.storage_max
    if isinstance(e, UniformQuantizedPerAxisType):
        return (
            np.asarray(e.scales, np.float64),
            np.asarray(e.zero_points, np.int64),
            e.axis,
            e.storage_min,
            e.storage_max,
        )
    raise TypeError(f"not a uniform quantized type: {t}")


def requant_factors(in_t: Type, out_t: Type) -> tuple[list[int], list[int], int | None]:
    """``(multipliers, rshifts, axis)`` of the rescale ``s_in / s_out`` between two quantized types:
    one pair for two per-tensor types, else one pair per channel of the per-axis type's ``axis``
    (both per-axis: the same axis)."""
    si, _, ai, _, _ = qparams(in_t)
    so, _, ao, _, _ = qparams(out_t)
    if ai is not None and ao is not None and ai != ao:
        raise ValueError(f"cannot requantize between per-axis types of axes {ai} and {ao}")
    ratio = np.atleast_1d(np.asarray(si, np.float64) / np.asarray(so, np.float64))
    pairs = [quantize_multiplier(float(r)) for r in ratio]
    return [p[0] for p in pairs], [p[1] for p in pairs], (ao if ao is not None else ai)


def zero_point_of(t: Type) -> int:
    """The zero point of a quantized type (per-axis types: all zero points must be 0, the only
    per-axis activations the lowering makes)."""
    zp = qparams(t)[1]
    if np.ndim(zp):
        if np.any(zp != 0):
            raise NotImplementedError("per-axis quantized tensors with nonzero zero points")
        return 0
    return int(zp)


def _bshape(ndim: int, axis: int, n: int) -> list[int]:
    s = [1] * ndim
    s[axis] = n
    return s


def quantize(x: np.ndarray, t: Type) -> np.ndarray:
    """float → storage integers of ``t``: ``clip(round_half_away(float64(x) / scale) + zp)``."""
    e = t.element_type if isinstance(t, ShapedType) else t
    scale, zp, axis, lo, hi = qparams(e)
    xf = np.asarray(x, dtype=np.float64)
    if axis is not None:
        scale = scale.reshape(_bshape(xf.ndim, axis, -1))
        zp = zp.reshape(_bshape(xf.ndim, axis, -1))
    q = round_half_away(xf / scale) + zp
    q = np.nan_to_num(q, nan=0.0, posinf=hi, neginf=lo)
    # np.asarray: a 0-d input stays a 0-d array (ufuncs return numpy scalars for 0-d arrays)
    return np.asarray(np.clip(q, lo, hi)).astype(storage_dtype(e))  # type: ignore[arg-type]


def dequantize(q: np.ndarray, t: Type) -> np.ndarray:
    """storage integers of ``t`` → float32 ``(q - zp) * scale`` (computed in float64, rounded once)."""
    e = t.element_type if isinstance(t, ShapedType) else t
    scale, zp, axis, _, _ = qparams(e)
    qi = np.asarray(q, dtype=np.int64)
    if axis is not None:
        scale = scale.reshape(_bshape(qi.ndim, axis, -1))
        zp = zp.reshape(_bshape(qi.ndim, axis, -1))
    return ((qi - zp) * scale).astype(np.float32)


def float_dtype(t: Type) -> np.dtype | None:
    """The numpy dtype of a float element type (of a tensor type), or None."""
    e = t.element_type if isinstance(t, ShapedType) else t
    if isinstance(e, FloatType):
        return element_type_to_dtype(e)
    return None


def round_float(x: np.ndarray, t: Type) -> np.ndarray:
    """``x`` rounded to the float element type of ``t`` (f16/bf16: round to nearest even via a float32
    intermediate, as hardware converting its float32 result does)."""
    dt = float_dtype(t)
    if dt is None:
        return x
    x = np.asarray(x)
    if x.dtype == dt:
        return x
    if x.dtype.kind == "f" and x.dtype != np.float32 and dt != np.float64:
        x = x.astype(np.float32)
    return x.astype(dt)


# ---- lookup tables -------------------------------------------------------------------------------


_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


LUT_FUNCTIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "SiLU": lambda x: x / (1.0 + np.exp(-x)),
    "GELU": _gelu,
    "Exp": np.exp,
    "Tanh": np.tanh,
    "Elu": lambda x: np.where(x >= 0, x, np.expm1(x)),
    "Softplus": lambda x: np.logaddexp(0.0, x),
    "Mish": lambda x: x * np.tanh(np.logaddexp(0.0, x)),
    "HardSwish": lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    "HardSigmoid": lambda x: np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    "LeakyRelu": lambda x: np.where(x >= 0, x, 0.01 * x),
    "Abs": np.abs,
    "Sqrt": lambda x: np.sqrt(np.maximum(x, 0.0)),
    "Erf": _erf,
}


def build_lut(fn: Callable[[np.ndarray], np.ndarray], in_t: Type, out_t: Type) -> np.ndarray:
    """The table of ``fn`` from a quantized input of width ``w`` (8 or 16 bits) to a quantized
    result: ``2**w`` entries, entry ``i`` the output for the input storage value ``v = base + i``,
    ``base = -2**(w-1)`` (signed input) or ``0`` (unsigned), i.e. the index is ``v - base``;
    ``table[i] = quantize(fn(dequantize(v)))`` with the output type's rounding and saturation, all
    in float64."""
    ie = in_t.element_type if isinstance(in_t, ShapedType) else in_t
    oe = out_t.element_type if isinstance(out_t, ShapedType) else out_t
    width = int(ie.storage_width)  # type: ignore[attr-defined]
    base = -(1 << (width - 1)) if ie.signed else 0
    v = np.arange(base, base + (1 << width), dtype=np.int64)
    scale, zp, _, _, _ = qparams(ie)
    xf = (v - zp) * scale
    with np.errstate(all="ignore"):
        y = np.asarray(fn(xf), dtype=np.float64)
    return quantize(y, oe).astype(storage_dtype(oe))


def lut_index(x: np.ndarray, signed: bool, width: int = 8) -> np.ndarray:
    """The table index of ``width``-bit storage values (``v + 2**(width-1)`` signed, ``v``
    unsigned: ``v + 128`` for int8, ``v + 32768`` for int16)."""
    xi = np.asarray(x, dtype=np.int64)
    return xi + (1 << (width - 1)) if signed else xi


# ---- integer normalizations ----------------------------------------------------------------------


def rdiv(num: np.ndarray, den: np.ndarray | int) -> np.ndarray:
    """``num / den`` rounded half away from zero, for int64 ``num`` and positive int64 ``den``:
    ``sign(num) * ((|num| + den // 2) // den)`` (``den // 2`` floors: an odd ``den`` has no tie)."""
    n = np.asarray(num, dtype=np.int64)
    d = np.asarray(den, dtype=np.int64)
    return np.sign(n) * ((np.abs(n) + d // 2) // d)


#: Softmax: the exponentials' fixed-point one (``exp(0) = 2**SOFTMAX_EXP_BITS``)
SOFTMAX_EXP_BITS = 15
#: Softmax: the fractional bits of the output factor ``A = rha(2**SOFTMAX_OUT_BITS / s_out)``
SOFTMAX_OUT_BITS = 16


def softmax_exp_table(in_scale: float) -> np.ndarray:
    """The 256-entry exponential table of the integer Softmax: ``E[d] = rha(2**15 * exp(-s_in * d))``
    for ``d`` in 0..255 (float64), as int64."""
    d = np.arange(256, dtype=np.float64)
    return round_half_away(np.exp(-float(in_scale) * d) * 2.0**SOFTMAX_EXP_BITS).astype(np.int64)


def int_softmax(
    q: np.ndarray, axis: int, exp_table: np.ndarray, out_factor: int, zp_out: int, qmin: int, qmax: int
) -> np.ndarray:
    """Integer Softmax of 8-bit storage values ``q`` along ``axis`` (per-tensor input type; the zero
    point cancels): ``d = max(q) - q`` (0..255), ``e = exp_table[d]``, ``den = sum(e) * 2**16``,
    ``y = clip(zp_out + (2 * e * out_factor + den) // (2 * den), qmin, qmax)`` — ``e * A / den``
    rounded half up (every term is positive), all in int64."""
    qi = np.asarray(q, dtype=np.int64)
    d = np.max(qi, axis=axis, keepdims=True) - qi
    e = np.asarray(exp_table, np.int64)[d]
    den = np.sum(e, axis=axis, keepdims=True) << SOFTMAX_OUT_BITS
    y = (2 * e * np.int64(out_factor) + den) // (2 * den)
    return np.clip(y + np.int64(zp_out), qmin, qmax)


#: LayerNorm: the bound on ``|X|`` (the input on the common grid) and the largest row
LAYERNORM_X_BITS = 24
LAYERNORM_MAX_N = 4096
#: LayerNorm: the largest total output shift (keeps the bias term within int64)
LAYERNORM_MAX_SHIFT = 52
#: LayerNorm: the fractional bits of ``Z = x_hat * 2**20 / sqrt(N)``
LAYERNORM_Z_BITS = 20
#: LayerNorm: the fractional bits of the input weights (``X = rdiv((q - zp) * in_weight, 2**16)``)
LAYERNORM_W_BITS = 16


def isqrt(v: np.ndarray) -> np.ndarray:
    """The integer square root ``floor(sqrt(v))`` of non-negative int64 values (exact)."""
    flat = np.asarray(v, dtype=np.int64).reshape(-1)
    return np.array([math.isqrt(int(a)) for a in flat], dtype=np.int64).reshape(np.shape(v))


def int_layer_norm(
    q: np.ndarray,
    zp_in: int,
    in_weight: np.ndarray,
    eps: int,
    multiplier: np.ndarray,
    shift: np.ndarray,
    bias: np.ndarray,
    zp_out: int,
    qmin: int,
    qmax: int,
) -> np.ndarray:
    """Integer LayerNorm over the last axis (``N`` channels) of 8-bit storage values ``q``; the
    constants are per channel ``c`` (``in_weight``, ``multiplier``, ``shift``, ``bias``) or scalars.
    All int64 (the lowering bounds every intermediate below ``2**63``), rows independent:

    * ``X_c = rdiv((q_c - zp_in) * in_weight_c, 2**16)``; ``mu = rdiv(sum(X), N)``; ``D_c = X_c - mu``;
    * ``V = max(1, sum(D**2) + eps)``; ``h = max(0, ceil((bitlen(V) - 30) / 2))``;
      ``V' = max(1, rdiv(V, 4**h))``; ``r = isqrt(2**62 // V')``;
    * ``Z_c = rdiv(D_c * r, 2**(11 + h))`` (``= x_hat_c * 2**20 / sqrt(N)``);
    * ``y_c = clip(zp_out + rdiv(Z_c * multiplier_c + bias_c, 2**shift_c), qmin, qmax)``.
    """
    x = rdiv(
        (np.asarray(q, np.int64) - np.int64(zp_in)) * np.asarray(in_weight, np.int64), 1 << LAYERNORM_W_BITS
    )
    n = x.shape[-1]
    mu = rdiv(np.sum(x, axis=-1, keepdims=True), n)
    d = x - mu
    v = np.maximum(np.sum(d * d, axis=-1, keepdims=True) + np.int64(eps), 1)
    bits = np.array([int(a).bit_length() for a in v.reshape(-1)], np.int64).reshape(v.shape)
    h = np.maximum(0, (bits - 30 + 1) // 2)
    vr = np.maximum(rdiv(v, np.left_shift(np.int64(1), 2 * h)), 1)
    r = isqrt(np.int64(1 << 62) // vr)
    z = rdiv(d * r, np.left_shift(np.int64(1), 31 - LAYERNORM_Z_BITS + h))
    s = np.asarray(shift, np.int64)
    acc = z * np.asarray(multiplier, np.int64) + np.asarray(bias, np.int64)
    y = rdiv(acc, np.left_shift(np.int64(1), s))
    return np.clip(y + np.int64(zp_out), qmin, qmax)


#: Attention: the logits' fixed point (units of ``2**-ATTENTION_LOGIT_BITS`` nats)
ATTENTION_LOGIT_BITS = 10
#: Attention: ``d = max - logit`` at or beyond this (16 nats) gives ``exp = 0``
ATTENTION_D_LIMIT = 1 << 14
#: Attention: the two exponential tables, ``exp(-d / 2**10)`` for ``d = 128 * hi + lo``, Q15
ATTENTION_EXP_HI = round_half_away(2.0**15 * np.exp(-128.0 * np.arange(128) / 2.0**10)).astype(np.int64)
ATTENTION_EXP_LO = round_half_away(2.0**15 * np.exp(-1.0 * np.arange(128) / 2.0**10)).astype(np.int64)


def int_attention(
    q: np.ndarray,
    k: np.ndarray,
    v: np.ndarray,
    mask: np.ndarray | None,
    zps: tuple[int, int, int, int],
    qk_factor: tuple[int, int],
    mask_factor: tuple[int, int],
    out_factor: int,
    zp_out: int,
    qmin: int,
    qmax: int,
) -> np.ndarray:
    """Integer scaled dot-product attention of 8-bit storage values ``q`` ``(B, H, Sq, D)``, ``k``,
    ``v`` ``(B, H, Sk, D)`` and an optional additive 8-bit ``mask`` (broadcast to
    ``(B, H, Sq, Sk)``); ``zps`` the zero points of q, k, v, mask; ``qk_factor`` / ``mask_factor``
    ``(multiplier, total shift)`` pairs taking the products / the mask to logits in units of
    ``2**-10``; ``out_factor`` ``A = rha(2**16 * s_v / s_out)``. All int64:

    * ``L = rdiv(sum_d (q - zq)(k - zk) * m_qk, 2**S_qk) + rdiv((mask - zm) * m_m, 2**S_m)``;
    * ``d = max_j L - L``; ``e = rdiv(EXP_HI[d >> 7] * EXP_LO[d & 127], 2**15)`` for
      ``d < 2**14``, else 0;
    * ``y = clip(zp_out + rdiv(sum_j e_j (v_j - zv) * A, sum_j e_j * 2**16), qmin, qmax)``.
    """
    zq, zk, zv, zm = zps
    qi = np.asarray(q, np.int64) - zq
    ki = np.asarray(k, np.int64) - zk
    acc = np.matmul(qi, np.swapaxes(ki, -1, -2))
    logits = rdiv(acc * np.int64(qk_factor[0]), np.int64(1) << qk_factor[1])
    if mask is not None:
        mi = np.asarray(mask, np.int64) - zm
        logits = logits + rdiv(mi * np.int64(mask_factor[0]), np.int64(1) << mask_factor[1])
    d = np.max(logits, axis=-1, keepdims=True) - logits
    inside = d < ATTENTION_D_LIMIT
    dc = np.where(inside, d, 0)
    e = np.where(inside, rdiv(ATTENTION_EXP_HI[dc >> 7] * ATTENTION_EXP_LO[dc & 127], 1 << 15), 0)
    num = np.matmul(e, np.asarray(v, np.int64) - zv)
    den = np.sum(e, axis=-1, keepdims=True) << 16
    return np.clip(rdiv(num * np.int64(out_factor), den) + np.int64(zp_out), qmin, qmax)

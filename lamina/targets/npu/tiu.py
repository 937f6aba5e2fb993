"""The NPU's compute engine (TIU): the arithmetic of every TIU command as a pure numpy function over
logical arrays (NCHW for conv and pooling), bit-exact against the ``tpu`` op it implements.

The simulator turns a command's LMEM operands into these arrays, calls the function and writes the
result back; codegen fills a command record from a ``tpu`` op with :func:`command_for`. The
arithmetic is the ``tpu`` dialect's own (``docs/tpu.md``; :mod:`lamina.dialects.tpu.quantize` and
the integer kernels of :mod:`lamina.execution.kernels`), called, never restated: int32 accumulation
with two's-complement wrap, ``multiplier * 2**-(31 + rshift)`` requantization rounding half away from
zero, saturation. Float commands widen to float32, compute as the ``top`` reference does and round
once to the result's type.

**Slices.** Each function computes whatever window of the op it is given: a conv or pooling command
on an H/W slice carries the slice's own pads (:func:`window_slice` gives the input rows and pads
of an output range), a C-slice carries the matching per-channel parameters, a matmul row slice is
a slice of the left operand. The result equals the same region of the whole op's result
(``tests/targets/npu/test_tiu.py`` checks it).

**Command parameters** (:data:`COMMANDS` holds the same as data; operands are LMEM tensors, the
rest are the record's fields). ``dtype`` names: ``i8 u8 i16 i32 f32 f16 bf16``. Every integer
command's ``out_min``/``out_max`` is its saturation range with ReLU folded in (:func:`clamp_bounds`).

=================  =====================================  ==============================================
command            operands                               fields (type; ``[C]`` per channel, else scalar)
=================  =====================================  ==============================================
conv               x i8/u8, w i8, bias i32[M] or none      x_zp i32; w_zp i32; stride, dilation
                                                          i32[nd]; pad i32[2nd] (begins, ends);
                                                          group i32; multiplier i32[M]; rshift
                                                          i8[M]; out_zp, out_min, out_max i32;
                                                          out_dtype
depthwise          as conv, w (C, 1, *k)                  as conv without group
matmul             a i8/u8, b i8/u8, bias i32[N] or none   a_zp i32; b_zp i32 or i32[N];
                                                          multiplier, rshift scalar or [N];
                                                          out_zp, out_min, out_max i32; out_dtype
add                x_1..x_n i8/u8 (broadcast)             x_zps i32[n]; multipliers i32[n] or
                                                          i32[n, C]; rshift scalar or i8[C];
                                                          channel_axis i32 (-1: per-tensor);
                                                          out_zp, out_min, out_max; out_dtype
sub                a, b                                   as add (n = 2), ``a - b``
mul                a, b                                   a_zp, b_zp i32; multiplier, rshift scalar
                                                          or [C]; channel_axis (-1: per-tensor);
                                                          out_zp, out_min, out_max; out_dtype
max_pool           x (any dtype)                          kernel, stride, dilation i32[nd];
                                                          pad i32[2nd] (ceil mode's extra rows
                                                          added to the ends)
avg_pool           x i8/u8                                x_zp; kernel, stride i32[nd];
                                                          pad i32[2nd]; multiplier i32; rshift i8;
                                                          out_zp, out_min, out_max; out_dtype
lut                x i8/u8, table[256] (out dtype)        (none: the index base follows x's dtype)
lut16              x i16, table[65536] (out dtype)        (none: the index is x + 32768)
requant            x                                      x_zp; multiplier, rshift scalar or [C];
                                                          channel_axis (-1: per-tensor); out_zp,
                                                          out_min, out_max; out_dtype
cast_quantize      x (float)                              scale f64 or f64[C]; zp i32 or i32[C];
                                                          channel_axis; out_min, out_max; out_dtype
cast_dequantize    x (integer)                            scale f64 or f64[C]; zp i32 or i32[C];
                                                          channel_axis; out_dtype
cast_float         x (float)                              out_dtype
permute            x (any dtype)                          order i32[rank]
reduce_mean        x i8/u8                                axes i32[k]; keepdims; x_zp; multiplier
                                                          i32; rshift i8; out_zp, out_min, out_max;
                                                          out_dtype
reduce_max/_min    x (any dtype)                          axes i32[k]; keepdims
conv_f             x, w, bias (float)                     stride, dilation, pad, group; relu;
                                                          relu_limit f64; out_dtype
matmul_f           a, b, bias (float)                     relu; relu_limit f64; out_dtype
add_f, mul_f,      x_1..x_n (float)                       out_dtype
max_f, min_f
sub_f, div_f       a, b (float)                           out_dtype
avg_pool_f         x (float)                              kernel, stride, pad; count_include_pad;
                                                          ceil_extra i32[nd]; out_dtype
reduce_mean_f,     x (float)                              axes; keepdims; out_dtype
reduce_sum_f
active_f           x (float)                              fn (a ``top`` unary op: Relu, SiLU, GELU,
                                                          ...); params (its properties); out_dtype
softmax_f          x (float)                              axis; log; out_dtype
layer_norm_f       x, gamma or none, beta or none         axis (the first normalized); epsilon f64;
                   (float)                                out_dtype
attention_f        q, k, v, mask or none (float)          scale f64; out_dtype
=================  =====================================  ==============================================

:func:`work` gives each command's work count for the cycle model (MACs for conv/depthwise/matmul
and attention, element operations otherwise; :data:`WORK_UNIT`). The ISA records of these
commands, their views and their kernels are ``records.py`` and ``kernels.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import ml_dtypes
import numpy as np

from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.top import extra as top_extra
from lamina.dialects.top import nn as top_nn
from lamina.dialects.top.base import const_value, elem_of
from lamina.dialects.top.elementwise import UNARY_OPS
from lamina.dialects.tpu.families.common import acc_int32, along, is_quant, result_channel_axis
from lamina.dialects.tpu.quantize import (
    dequantize,
    lut_index,
    qparams,
    quantize,
    requant_factors,
    round_half_away,
    rounding_rshift,
    storage_dtype,
    wrap_int32,
)
from lamina.execution.kernels.conv import conv_kernel
from lamina.execution.kernels.geometry import pool_output_size, window_geometry
from lamina.execution.kernels.integer import conv_accumulate, window_sums
from lamina.execution.kernels.pool import max_pool_kernel
from lamina.execution.kernels.reduce import ordered_mean, ordered_sum
from lamina.execution.kernels.windows import window_sum, windows
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.core import Operation
from lamina.ir.types import FloatType, IntegerType, NoneType, Type, f32
from lamina.support.errors import LaminaError

from . import fast

__all__ = [
    "COMMANDS",
    "DTYPES",
    "FUNCTIONS",
    "WORK_UNIT",
    "Field",
    "clamp_bounds",
    "command_for",
    "execute_op",
    "window_slice",
    "work",
]

#: dtype names of command records → numpy dtypes
DTYPES: dict[str, np.dtype] = {
    "i8": np.dtype(np.int8),
    "u8": np.dtype(np.uint8),
    "i16": np.dtype(np.int16),
    "i32": np.dtype(np.int32),
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
}

Array = np.ndarray
Ints = Sequence[int]


def _dt(name: str) -> np.dtype:
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(f"unknown TIU dtype '{name}' (expected one of {', '.join(DTYPES)})") from None


def _dtype_name(dt: np.dtype) -> str:
    for k, v in DTYPES.items():
        if v == dt:
            return k
    raise ValueError(f"dtype {dt} has no TIU name")


def _finish(y: Array, out_dtype: str) -> Array:
    return np.ascontiguousarray(y).astype(_dt(out_dtype), copy=False)


def _per(v: Any, ndim: int, axis: int) -> Any:
    """A per-channel 1-d array shaped to broadcast along ``axis``; a scalar unchanged."""
    a = np.asarray(v, dtype=np.int64)
    return a.reshape(()) if a.size == 1 else along(a, ndim, axis)


# ---- integer commands ---------------------------------------------------------------------------


#: per geometry, the conv kernels' per-shape plans (bounded: cleared past 256 geometries)
_CONV_PLANS: dict[Any, dict[Any, Any]] = {}


def _requant_out(
    acc: Array,
    multiplier: Any,
    rshift: Any,
    axis: int | None,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """``acc`` requantized by one ``(multiplier, rshift)`` pair, or one pair per channel along
    ``axis``, clamped to ``[out_min, out_max]`` and stored as ``out_dtype``: the contract's
    :func:`lamina.dialects.tpu.quantize.requantize` (:func:`fast.requantize` computes it in place)."""
    return fast.requantize(acc, multiplier, rshift, out_zp, out_min, out_max, axis, _dt(out_dtype))


def conv(
    x: Array,
    w: Array,
    bias: Array | None,
    *,
    x_zp: int,
    w_zp: int,
    stride: Ints,
    dilation: Ints,
    pad: Ints,
    group: int,
    multiplier: Any,
    rshift: Any,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """Grouped N-d convolution of 8-bit ``x`` (N, C, *sp) with ``w`` (M, C/group, *k): the exact sum
    of ``(x - x_zp) * (w - w_zp)`` in the int32 register (wrap), ``+ bias`` (wrap), requantized per
    output channel (``multiplier``/``rshift`` of M entries, or one) and clamped to
    ``[out_min, out_max]`` — ``tpu.Conv``'s INT8 form. 2-d convolutions sum in float32 chunks
    (:func:`lamina.targets.npu.fast.conv_accumulate`, exact), others in the contract's float64."""
    exact = fast.conv_accumulate(
        np.asarray(x),
        np.asarray(w),
        x_zp=int(x_zp),
        w_zp=int(w_zp),
        stride=stride,
        dilation=dilation,
        pad=pad,
        group=int(group),
    )
    if exact is not None:
        acc = exact if exact.dtype == np.int32 else wrap_int32(exact)
    else:
        geometry = (None, tuple(stride), tuple(dilation), tuple(pad), "NOTSET")
        key = (geometry, int(group))
        cache = _CONV_PLANS.get(key)
        if cache is None:
            if len(_CONV_PLANS) > 256:
                _CONV_PLANS.clear()
            cache = _CONV_PLANS[key] = {}
        xf = np.asarray(x, np.float64) - float(x_zp)
        wf = np.asarray(w, np.float64) - float(w_zp)
        acc = acc_int32(conv_accumulate(xf, wf, int(group), geometry, cache))
    if bias is not None:
        acc = fast.add_bias(acc, np.asarray(bias).reshape(-1), 1)
    return _requant_out(acc, multiplier, rshift, 1, out_zp, out_min, out_max, out_dtype)


def depthwise(
    x: Array,
    w: Array,
    bias: Array | None,
    *,
    x_zp: int,
    w_zp: int,
    stride: Ints,
    dilation: Ints,
    pad: Ints,
    multiplier: Any,
    rshift: Any,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """Depthwise convolution: :func:`conv` with one filter (``w`` (C, 1, *k)) per input channel."""
    c = x.shape[1]
    if w.shape[0] != c or w.shape[1] != 1:
        raise ValueError(f"depthwise filter {list(w.shape)} does not match {c} input channels")
    return conv(
        x,
        w,
        bias,
        x_zp=x_zp,
        w_zp=w_zp,
        stride=stride,
        dilation=dilation,
        pad=pad,
        group=c,
        multiplier=multiplier,
        rshift=rshift,
        out_zp=out_zp,
        out_min=out_min,
        out_max=out_max,
        out_dtype=out_dtype,
    )


def matmul(
    a: Array,
    b: Array,
    bias: Array | None,
    *,
    a_zp: int,
    b_zp: Any,
    multiplier: Any,
    rshift: Any,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """``(a - a_zp) @ (b - b_zp)`` (numpy matmul broadcasting; ``b_zp`` one or one per column) in
    the int32 register, ``+ bias`` (wrap), requantized per tensor or per column — ``tpu.MatMul``."""
    bz = np.asarray(b_zp, np.int64)
    per_b = bz.ndim > 0 and bz.size > 1
    exact = fast.matmul_accumulate(
        np.asarray(a), np.asarray(b), a_zp=int(a_zp), b_zp=bz.reshape(-1) if per_b else int(bz.reshape(-1)[0])
    )
    acc = exact if exact.dtype == np.int32 else wrap_int32(exact)
    if bias is not None:
        b = np.asarray(bias)
        if b.ndim <= 1:
            acc = fast.add_bias(acc, b.reshape(-1), acc.ndim - 1)
        else:
            acc = wrap_int32(acc.astype(np.int64) + b.astype(np.int64))
    return _requant_out(acc, multiplier, rshift, acc.ndim - 1, out_zp, out_min, out_max, out_dtype)


def _linear(
    xs: Sequence[Array],
    signs: Sequence[int],
    x_zps: Ints,
    multipliers: Any,
    rshift: Any,
    channel_axis: int,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    shape = np.broadcast_shapes(*(np.shape(x) for x in xs))
    nd = len(shape)
    ms = np.asarray(multipliers, np.int64).reshape(len(xs), -1)
    s = np.asarray(rshift, np.int64).reshape(-1)
    per = channel_axis >= 0 and (s.size > 1 or ms.shape[1] > 1)
    acc: Any = np.int64(0)
    for i, x in enumerate(xs):
        m = _per(ms[i], nd, channel_axis) if per else int(ms[i, 0])
        acc = acc + (np.asarray(x, np.int64) - int(x_zps[i])) * (int(signs[i]) * m)
    shift = _per(31 + s, nd, channel_axis) if per else 31 + int(s[0])
    acc = np.broadcast_to(np.asarray(acc, np.int64), shape)
    return _finish(np.clip(rounding_rshift(acc, shift) + out_zp, out_min, out_max), out_dtype)


def add(
    xs: Sequence[Array],
    *,
    x_zps: Ints,
    multipliers: Any,
    rshift: Any,
    channel_axis: int,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """``sat(out_zp + rdiv(sum_i (x_i - x_zp_i) * multiplier_i, 2**(31 + rshift)))`` in int64 over
    broadcast inputs; per channel (``channel_axis >= 0`` with C shifts): ``multipliers[i, c]`` and
    ``rshift[c]`` along that axis of the result — ``tpu.Add``."""
    return _linear(
        xs, [1] * len(xs), x_zps, multipliers, rshift, channel_axis, out_zp, out_min, out_max, out_dtype
    )


def sub(
    a: Array,
    b: Array,
    *,
    x_zps: Ints,
    multipliers: Any,
    rshift: Any,
    channel_axis: int,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """:func:`add` of ``a`` and ``-b`` — ``tpu.Sub``."""
    return _linear(
        [a, b], [1, -1], x_zps, multipliers, rshift, channel_axis, out_zp, out_min, out_max, out_dtype
    )


def mul(
    a: Array,
    b: Array,
    *,
    a_zp: int,
    b_zp: int,
    multiplier: Any,
    rshift: Any,
    channel_axis: int,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """``sat(out_zp + rdiv((a - a_zp) * (b - b_zp) * multiplier, 2**(31 + rshift)))`` over broadcast
    inputs; per channel (``channel_axis >= 0``): ``multiplier[c]``, ``rshift[c]`` along that axis
    of the result — ``tpu.Mul``."""
    prod = (np.asarray(a, np.int64) - int(a_zp)) * (np.asarray(b, np.int64) - int(b_zp))
    if channel_axis < 0:
        m, s = np.asarray(multiplier).reshape(-1), np.asarray(rshift).reshape(-1)
        return _requant_out(prod, int(m[0]), int(s[0]), None, out_zp, out_min, out_max, out_dtype)
    shape = np.broadcast_shapes(np.shape(a), np.shape(b))
    prod = np.broadcast_to(prod, shape)
    return _requant_out(prod, multiplier, rshift, channel_axis, out_zp, out_min, out_max, out_dtype)


def max_pool(x: Array, *, kernel: Ints, stride: Ints, dilation: Ints, pad: Ints) -> Array:
    """The window maximum (padding never wins: the dtype's lowest value, -inf for floats) of any
    dtype — ``tpu.MaxPool`` on storage integers or floats (a maximum needs no rounding). A window
    wholly in padding (possible with dilations) gives the lowest value, where the reference's -inf
    has no integer value."""
    run = max_pool_kernel(list(kernel), list(stride), list(dilation), list(pad), "NOTSET", False)
    xa = np.asarray(x)
    if xa.dtype.kind in "iuf":
        return np.ascontiguousarray(run([xa])[0])
    # bfloat16 (no numpy limits): the maximum in float32, exact back in the input's dtype
    return np.ascontiguousarray(run([xa.astype(np.float32)])[0]).astype(xa.dtype)


def avg_pool(
    x: Array,
    *,
    x_zp: int,
    kernel: Ints,
    stride: Ints,
    pad: Ints,
    multiplier: int,
    rshift: int,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """The window sums of ``x - x_zp`` (padding contributes 0) in the int32 register, requantized
    (``multiplier`` encodes ``s_in / (s_out * prod(kernel))``) — ``tpu.AvgPool``."""
    acc = wrap_int32(window_sums(np.asarray(x, np.int64) - int(x_zp), list(kernel), list(stride), list(pad)))
    return _requant_out(acc, int(multiplier), int(rshift), None, out_zp, out_min, out_max, out_dtype)


def lut(x: Array, table: Array) -> Array:
    """``table[x - base]`` for 8-bit ``x`` (``base`` -128 for int8, 0 for uint8) — ``tpu.Lut``."""
    xa = np.asarray(x)
    if xa.dtype not in (np.int8, np.uint8) or np.shape(table) != (256,):
        raise ValueError(f"lut needs 8-bit input and a 256-entry table, got {xa.dtype} and {np.shape(table)}")
    return np.asarray(table)[lut_index(xa, xa.dtype == np.int8)]


def lut16(x: Array, table: Array) -> Array:
    """``table[x + 32768]`` for int16 ``x`` — ``tpu.Lut16``."""
    xa = np.asarray(x)
    if xa.dtype != np.int16 or np.shape(table) != (65536,):
        raise ValueError(
            f"lut16 needs int16 input and a 65536-entry table, got {xa.dtype} and {np.shape(table)}"
        )
    return np.asarray(table)[lut_index(xa, True, 16)]


def requant(
    x: Array,
    *,
    x_zp: int,
    multiplier: Any,
    rshift: Any,
    channel_axis: int,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """``sat(out_zp + rdiv((x - x_zp) * multiplier, 2**(31 + rshift)))``, one pair or one per
    channel of ``channel_axis`` — ``tpu.Requant``."""
    xc = np.asarray(x, np.int64) - int(x_zp)
    axis = channel_axis if channel_axis >= 0 else None
    return _requant_out(xc, multiplier, rshift, axis, out_zp, out_min, out_max, out_dtype)


def _qtype(scale: Any, zp: Any, channel_axis: int, out_min: int, out_max: int, dtype: str) -> Type:
    """The quantized element type a cast's fields describe (so the cast is :mod:`..quantize`'s)."""
    dt = _dt(dtype)
    bits, signed = dt.itemsize * 8, dt.kind == "i"
    if channel_axis >= 0:
        sc = [float(v) for v in np.asarray(scale, np.float64).reshape(-1)]
        z = [int(v) for v in np.broadcast_to(np.asarray(zp, np.int64).reshape(-1), (len(sc),))]
        return UniformQuantizedPerAxisType(bits, signed, f32, sc, z, channel_axis, out_min, out_max)
    return UniformQuantizedType(
        bits, signed, f32, float(np.asarray(scale)), int(np.asarray(zp)), out_min, out_max
    )


def cast_quantize(
    x: Array, *, scale: Any, zp: Any, channel_axis: int, out_min: int, out_max: int, out_dtype: str
) -> Array:
    """float → integer: ``sat(round_half_away(float64(x) / scale) + zp)`` (NaN → 0), per tensor or
    per channel — ``tpu.Cast`` to a quantized type."""
    t = _qtype(scale, zp, channel_axis, out_min, out_max, out_dtype)
    return quantize(np.asarray(x).astype(np.float32), t)


def cast_dequantize(x: Array, *, scale: Any, zp: Any, channel_axis: int, out_dtype: str) -> Array:
    """integer → float: ``(x - zp) * scale`` in float64, rounded to float32, then to ``out_dtype`` —
    ``tpu.Cast`` from a quantized type."""
    xa = np.asarray(x)
    t = _qtype(
        scale,
        zp,
        channel_axis,
        int(np.iinfo(xa.dtype).min),
        int(np.iinfo(xa.dtype).max),
        _dtype_name(xa.dtype),
    )
    return _finish(dequantize(xa, t), out_dtype)


def cast_float(x: Array, *, out_dtype: str) -> Array:
    """float → float through float32, rounding to nearest even — ``tpu.Cast`` between float types."""
    return _finish(_widen(x), out_dtype)


def permute(x: Array, *, order: Ints) -> Array:
    """The axes of ``x`` in ``order`` (any dtype) — ``tpu.Permute`` (and a transpose)."""
    return np.ascontiguousarray(np.transpose(np.asarray(x), list(order)))


def reduce_mean(
    x: Array,
    *,
    axes: Ints,
    keepdims: bool,
    x_zp: int,
    multiplier: int,
    rshift: int,
    out_zp: int,
    out_min: int,
    out_max: int,
    out_dtype: str,
) -> Array:
    """The int32 sum of ``x - x_zp`` over ``axes``, requantized (``multiplier`` encodes
    ``s_in / (s_out * N)``) — ``tpu.Reduce`` ReduceMean in INT8."""
    acc = wrap_int32((np.asarray(x, np.int64) - int(x_zp)).sum(axis=tuple(axes), keepdims=bool(keepdims)))
    return _requant_out(acc, int(multiplier), int(rshift), None, out_zp, out_min, out_max, out_dtype)


def reduce_max(x: Array, *, axes: Ints, keepdims: bool) -> Array:
    """The maximum over ``axes`` (any dtype) — ``tpu.Reduce`` ReduceMax."""
    return np.asarray(np.max(np.asarray(x), axis=tuple(axes), keepdims=bool(keepdims)))


def reduce_min(x: Array, *, axes: Ints, keepdims: bool) -> Array:
    """The minimum over ``axes`` (any dtype) — ``tpu.Reduce`` ReduceMin."""
    return np.asarray(np.min(np.asarray(x), axis=tuple(axes), keepdims=bool(keepdims)))


# ---- float commands: widen to float32, compute as the top reference, round once --------------------


def _widen(x: Any) -> Any:
    return None if x is None else np.asarray(x).astype(np.float32, copy=False)


def conv_f(
    x: Array,
    w: Array,
    bias: Array | None,
    *,
    stride: Ints,
    dilation: Ints,
    pad: Ints,
    group: int,
    relu: bool,
    relu_limit: float,
    out_dtype: str,
) -> Array:
    """Float convolution (the ``top.Conv`` kernel in float32), ReLU / ReLU limit, rounded to
    ``out_dtype`` — ``tpu.Conv`` in F32/F16/BF16."""
    run = conv_kernel(
        None, list(stride), list(dilation), list(pad), "NOTSET", int(group), bool(relu), relu_limit
    )
    return _finish(run([_widen(x), _widen(w), _widen(bias)])[0], out_dtype)


def matmul_f(
    a: Array, b: Array, bias: Array | None, *, relu: bool, relu_limit: float, out_dtype: str
) -> Array:
    """Float ``a @ b + bias`` in float32, ReLU / ReLU limit, rounded — ``tpu.MatMul`` in a float mode."""
    y = np.matmul(_widen(a), _widen(b))
    if bias is not None:
        y += _widen(bias)
    if relu:
        np.maximum(y, 0, out=y)
        if relu_limit > 0:
            np.minimum(y, np.float32(relu_limit), out=y)
    return _finish(y, out_dtype)


def add_f(xs: Sequence[Array], *, out_dtype: str) -> Array:
    """Float sum of broadcast inputs, left to right in float32 — ``tpu.Add`` in a float mode."""
    y = _widen(xs[0])
    for x in xs[1:]:
        y = np.add(y, _widen(x))
    return _finish(y, out_dtype)


def sub_f(a: Array, b: Array, *, out_dtype: str) -> Array:
    """Float ``a - b`` in float32 — ``tpu.Sub`` in a float mode."""
    return _finish(np.subtract(_widen(a), _widen(b)), out_dtype)


def mul_f(xs: Sequence[Array], *, out_dtype: str) -> Array:
    """Float product of broadcast inputs, left to right in float32 — ``tpu.Mul`` in a float mode."""
    y = _widen(xs[0])
    for x in xs[1:]:
        y = np.multiply(y, _widen(x))
    return _finish(y, out_dtype)


def avg_pool_f(
    x: Array,
    *,
    kernel: Ints,
    stride: Ints,
    pad: Ints,
    count_include_pad: bool,
    ceil_extra: Ints,
    out_dtype: str,
) -> Array:
    """Float window mean: float32 window sums (padding 0) over the count of real elements (explicit
    padding counted with ``count_include_pad``; ``ceil_extra`` end padding never) — ``tpu.AvgPool``
    in a float mode."""
    nd = len(kernel)
    ends = [int(pad[nd + i]) + int(ceil_extra[i]) for i in range(nd)]
    full = [*list(pad[:nd]), *ends]
    xp = np.pad(_widen(x), [(0, 0), (0, 0)] + [(int(full[i]), int(full[nd + i])) for i in range(nd)])
    tot = window_sum(windows(xp, list(kernel), list(stride), [1] * nd), nd)
    ones = np.ones((1, 1, *x.shape[2:]), np.float32)
    if count_include_pad:  # explicit padding counts; the ceil-mode extra does not
        ones = np.pad(
            ones, [(0, 0), (0, 0)] + [(int(pad[i]), int(pad[nd + i])) for i in range(nd)], constant_values=1
        )
        full = [0] * nd + [int(c) for c in ceil_extra]
    cnt = window_sums(ones, list(kernel), list(stride), full)
    return _finish(tot / np.maximum(cnt, 1), out_dtype)


def reduce_mean_f(x: Array, *, axes: Ints, keepdims: bool, out_dtype: str) -> Array:
    """Float mean over ``axes`` in float32, summed in the contract's fixed order — ``tpu.Reduce`` ReduceMean in a float mode."""
    return _finish(ordered_mean(_widen(x), axes, keepdims=bool(keepdims)), out_dtype)


def reduce_sum_f(x: Array, *, axes: Ints, keepdims: bool, out_dtype: str) -> Array:
    """Float sum over ``axes`` in float32, in the contract's fixed order — ``tpu.Reduce`` ReduceSum in a float mode."""
    return _finish(ordered_sum(_widen(x), axes, keepdims=bool(keepdims)), out_dtype)


def max_f(xs: Sequence[Array], *, out_dtype: str) -> Array:
    """Float maximum of broadcast inputs, left to right in float32 — ``tpu.Max`` in a float mode."""
    y = _widen(xs[0])
    for x in xs[1:]:
        y = np.maximum(y, _widen(x))
    return _finish(y, out_dtype)


def min_f(xs: Sequence[Array], *, out_dtype: str) -> Array:
    """Float minimum of broadcast inputs, left to right in float32 — ``tpu.Min`` in a float mode."""
    y = _widen(xs[0])
    for x in xs[1:]:
        y = np.minimum(y, _widen(x))
    return _finish(y, out_dtype)


def div_f(a: Array, b: Array, *, out_dtype: str) -> Array:
    """Float ``a / b`` in float32 (IEEE: ``x / 0`` is ±inf or NaN) — ``tpu.Div`` in a float mode."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return _finish(np.divide(_widen(a), _widen(b)), out_dtype)


class _Props:
    """An op's properties as its ``top`` reference reads them (``op.<name>`` or ``op.attr(name)``),
    from a command's fields — so a float command runs the reference itself, never a restatement."""

    def __init__(self, **props: Any) -> None:
        self.__dict__.update(props)

    def attr(self, name: str) -> Any:
        return self.__dict__[name]


def softmax_f(x: Array, *, axis: int, log: bool, out_dtype: str) -> Array:
    """Softmax (``log``: log-softmax) along ``axis``: the ``top.Softmax`` reference in float32,
    rounded once — ``tpu.Softmax`` in a float mode."""
    with np.errstate(all="ignore"):
        y = top_nn.SoftmaxOp.execute(_Props(axis=int(axis), log=bool(log)), [_widen(x)])[0]  # type: ignore[arg-type]
    return _finish(y, out_dtype)


def layer_norm_f(
    x: Array, gamma: Array | None, beta: Array | None, *, axis: int, epsilon: float, out_dtype: str
) -> Array:
    """Layer normalization over dims ``axis..`` (``gamma`` absent: 1; ``beta`` absent: none): the
    ``top.LayerNorm`` reference in float32, rounded once — ``tpu.LayerNorm`` in a float mode
    (its normalized result)."""
    g = _widen(gamma) if gamma is not None else np.float32(1.0)
    with np.errstate(all="ignore"):
        y = top_nn.LayerNormOp.execute(
            _Props(axis=int(axis), epsilon=float(epsilon)),  # type: ignore[arg-type]
            [_widen(x), g, _widen(beta)],
        )[0]
    return _finish(y, out_dtype)


class _Result:
    def __init__(self, t: Type) -> None:
        self.type = t


def attention_f(q: Array, k: Array, v: Array, mask: Array | None, *, scale: float, out_dtype: str) -> Array:
    """``softmax(scale * q @ k^T + mask) @ v`` over 4-d ``(B, H, S, D)`` inputs (``mask`` additive,
    broadcast): the ``top.Attention`` reference in float32 (no cache, causal mask or softcap),
    rounded once — ``tpu.Attention`` in a float mode."""
    props = _Props(
        is_causal=False,
        q_num_heads=None,
        kv_num_heads=None,
        qk_matmul_output_mode=0,
        scale=float(scale),
        softcap=0.0,
        softmax_precision=None,
        results=[_Result(f32), _Result(NoneType()), _Result(NoneType()), _Result(NoneType())],
    )
    with np.errstate(all="ignore"):
        y = top_extra.AttentionOp.execute(
            props,  # type: ignore[arg-type]
            [_widen(q), _widen(k), _widen(v), _widen(mask), None, None, None],
        )[0]
    return _finish(y, out_dtype)


#: the activations :func:`active_f` computes: the ``top`` unary ops, by short name
ACTIVATIONS: dict[str, Any] = {c.name.split(".", 1)[1]: c for c in UNARY_OPS}


class _Attrs:
    """An activation's properties as its ``top`` reference reads them (``op.attr(name)``), from a
    command's ``params``."""

    def __init__(self, params: dict[str, Any]) -> None:
        self._params = params

    def attr(self, name: str) -> Any:
        return self._params[name]


def active_f(x: Array, *, fn: str, params: dict[str, Any], out_dtype: str) -> Array:
    """A float activation (``fn``: a ``top`` unary op's short name, ``params`` its properties:
    LeakyRelu's alpha, GELU's approximation, ...) computed by the ``top`` reference in float32 and
    rounded once — the ``tpu`` unary op in a float mode."""
    cls = ACTIVATIONS.get(fn)
    if cls is None:
        raise ValueError(f"unknown activation '{fn}'")
    with np.errstate(all="ignore"):
        y = cls.fn(_Attrs(params), _widen(x))
    return _finish(np.asarray(y), out_dtype)


#: every TIU command's function, by command name
FUNCTIONS: dict[str, Callable[..., Array]] = {
    f.__name__: f
    for f in (
        conv,
        depthwise,
        matmul,
        add,
        sub,
        mul,
        max_pool,
        avg_pool,
        lut,
        lut16,
        requant,
        cast_quantize,
        cast_dequantize,
        cast_float,
        permute,
        reduce_mean,
        reduce_max,
        reduce_min,
        conv_f,
        matmul_f,
        add_f,
        sub_f,
        mul_f,
        avg_pool_f,
        reduce_mean_f,
        reduce_sum_f,
        active_f,
        max_f,
        min_f,
        div_f,
        softmax_f,
        layer_norm_f,
        attention_f,
    )
}


class Field(NamedTuple):
    """A command record's field: its name (the function's keyword), element type and shape kind
    (``scalar``, ``per_channel`` — scalar or one per channel —, ``per_input``, ``per_dim``,
    ``per_input_channel``, ``table``)."""

    name: str
    dtype: str
    shape: str


_REQ = (
    Field("out_zp", "i32", "scalar"),
    Field("out_min", "i32", "scalar"),
    Field("out_max", "i32", "scalar"),
)
_OUT = Field("out_dtype", "dtype", "scalar")
_WIN = (
    Field("stride", "i32", "per_dim"),
    Field("dilation", "i32", "per_dim"),
    Field("pad", "i32", "per_dim2"),
)
_CONV = (
    Field("x_zp", "i32", "scalar"),
    Field("w_zp", "i32", "scalar"),
    *_WIN,
    Field("multiplier", "i32", "per_channel"),
    Field("rshift", "i8", "per_channel"),
    *_REQ,
    _OUT,
)
_LIN = (
    Field("x_zps", "i32", "per_input"),
    Field("multipliers", "i32", "per_input_channel"),
    Field("rshift", "i8", "per_channel"),
    Field("channel_axis", "i32", "scalar"),
    *_REQ,
    _OUT,
)
_AXES = (Field("axes", "i32", "per_dim"), Field("keepdims", "bool", "scalar"))
_M1 = (Field("multiplier", "i32", "scalar"), Field("rshift", "i8", "scalar"))

#: every command's record fields (the functions' keyword parameters, in order)
COMMANDS: dict[str, tuple[Field, ...]] = {
    "conv": (*_CONV[:5], Field("group", "i32", "scalar"), *_CONV[5:]),
    "depthwise": _CONV,
    "matmul": (
        Field("a_zp", "i32", "scalar"),
        Field("b_zp", "i32", "per_channel"),
        Field("multiplier", "i32", "per_channel"),
        Field("rshift", "i8", "per_channel"),
        *_REQ,
        _OUT,
    ),
    "add": _LIN,
    "sub": _LIN,
    "mul": (
        Field("a_zp", "i32", "scalar"),
        Field("b_zp", "i32", "scalar"),
        Field("multiplier", "i32", "per_channel"),
        Field("rshift", "i8", "per_channel"),
        Field("channel_axis", "i32", "scalar"),
        *_REQ,
        _OUT,
    ),
    "max_pool": (Field("kernel", "i32", "per_dim"), *_WIN),
    "avg_pool": (
        Field("x_zp", "i32", "scalar"),
        Field("kernel", "i32", "per_dim"),
        Field("stride", "i32", "per_dim"),
        Field("pad", "i32", "per_dim2"),
        *_M1,
        *_REQ,
        _OUT,
    ),
    "lut": (),
    "lut16": (),
    "requant": (
        Field("x_zp", "i32", "scalar"),
        Field("multiplier", "i32", "per_channel"),
        Field("rshift", "i8", "per_channel"),
        Field("channel_axis", "i32", "scalar"),
        *_REQ,
        _OUT,
    ),
    "cast_quantize": (
        Field("scale", "f64", "per_channel"),
        Field("zp", "i32", "per_channel"),
        Field("channel_axis", "i32", "scalar"),
        Field("out_min", "i32", "scalar"),
        Field("out_max", "i32", "scalar"),
        _OUT,
    ),
    "cast_dequantize": (
        Field("scale", "f64", "per_channel"),
        Field("zp", "i32", "per_channel"),
        Field("channel_axis", "i32", "scalar"),
        _OUT,
    ),
    "cast_float": (_OUT,),
    "permute": (Field("order", "i32", "per_dim"),),
    "reduce_mean": (*_AXES, Field("x_zp", "i32", "scalar"), *_M1, *_REQ, _OUT),
    "reduce_max": _AXES,
    "reduce_min": _AXES,
    "conv_f": (
        *_WIN,
        Field("group", "i32", "scalar"),
        Field("relu", "bool", "scalar"),
        Field("relu_limit", "f64", "scalar"),
        _OUT,
    ),
    "matmul_f": (Field("relu", "bool", "scalar"), Field("relu_limit", "f64", "scalar"), _OUT),
    "add_f": (_OUT,),
    "sub_f": (_OUT,),
    "mul_f": (_OUT,),
    "avg_pool_f": (
        Field("kernel", "i32", "per_dim"),
        Field("stride", "i32", "per_dim"),
        Field("pad", "i32", "per_dim2"),
        Field("count_include_pad", "bool", "scalar"),
        Field("ceil_extra", "i32", "per_dim"),
        _OUT,
    ),
    "reduce_mean_f": (*_AXES, _OUT),
    "reduce_sum_f": (*_AXES, _OUT),
    "active_f": (Field("fn", "enum", "scalar"), Field("params", "f64", "per_attr"), _OUT),
    "max_f": (_OUT,),
    "min_f": (_OUT,),
    "div_f": (_OUT,),
    "softmax_f": (Field("axis", "i32", "scalar"), Field("log", "bool", "scalar"), _OUT),
    "layer_norm_f": (Field("axis", "i32", "scalar"), Field("epsilon", "f64", "scalar"), _OUT),
    "attention_f": (Field("scale", "f64", "scalar"), _OUT),
}


# ---- work counts ---------------------------------------------------------------------------------

#: element-wise passes of a softmax (max, subtract, exp, sum, divide)
SOFTMAX_PASSES = 5
#: element-wise passes of a layer norm before its affine operands (mean, subtract, square, mean,
#: rsqrt-and-scale); gamma and beta add one each
LAYER_NORM_PASSES = 5

#: what :func:`work` counts per command: multiply-accumulates or element operations
WORK_UNIT: dict[str, str] = {
    k: ("mac" if k in ("conv", "depthwise", "matmul", "conv_f", "matmul_f", "attention_f") else "elem")
    for k in FUNCTIONS
}


def work(
    command: str, in_shapes: Sequence[Sequence[int]], out_shape: Sequence[int], params: dict[str, Any]
) -> int:
    """The work of one command for the cycle model (:data:`WORK_UNIT` says which unit): conv /
    depthwise MACs ``prod(out) * prod(w.shape[1:])``; matmul ``prod(out) * K``; pooling
    ``prod(out) * prod(kernel)``; add/sub/mul/max/min/div ``prod(out) * (inputs - 1)`` (at least
    ``prod(out)``); reductions ``prod(input)``; softmax ``5 * prod(out)`` (max, subtract, exp, sum,
    divide: :data:`SOFTMAX_PASSES`); layer norm ``(5 + affine operands) * prod(out)`` (mean,
    subtract, square, mean, rsqrt-and-scale, then gamma and beta: :data:`LAYER_NORM_PASSES`);
    attention the MACs of its two products, ``B*H*M*N*D + B*H*M*Dv*N``; everything else
    ``prod(out)``."""
    out = math.prod(out_shape)
    if command in ("conv", "depthwise", "conv_f"):
        return out * math.prod(in_shapes[1][1:])
    if command in ("matmul", "matmul_f"):
        return out * int(in_shapes[0][-1])
    if command in ("max_pool", "avg_pool", "avg_pool_f"):
        return out * math.prod(params["kernel"])
    if command in ("add", "sub", "mul", "add_f", "sub_f", "mul_f", "max_f", "min_f", "div_f"):
        return out * max(len(in_shapes) - 1, 1)
    if command == "softmax_f":
        return out * SOFTMAX_PASSES
    if command == "layer_norm_f":
        return out * (LAYER_NORM_PASSES + len(in_shapes) - 1)
    if command == "attention_f":
        q, k = in_shapes[0], in_shapes[1]
        return math.prod(q[:-1]) * int(k[-2]) * int(q[-1]) + out * int(k[-2])
    if command.startswith("reduce"):
        return math.prod(in_shapes[0])
    if command not in FUNCTIONS:
        raise ValueError(f"unknown TIU command '{command}'")
    return out


# ---- slices ---------------------------------------------------------------------------------------


def window_slice(
    out_start: int, out_stop: int, in_size: int, kernel: int, stride: int, dilation: int, pad_begin: int
) -> tuple[int, int, int, int]:
    """The input range and pads of output positions ``[out_start, out_stop)`` of one spatial axis of
    a conv or pool: ``(in_start, in_stop, pad_lo, pad_hi)`` — the command on input rows
    ``[in_start, in_stop)`` with pads ``(pad_lo, pad_hi)`` on that axis computes exactly those
    output positions (the halo is ``(kernel - 1) * dilation + 1 - stride`` rows)."""
    lo = out_start * stride - pad_begin
    hi = (out_stop - 1) * stride - pad_begin + (kernel - 1) * dilation + 1
    return max(lo, 0), min(hi, in_size), max(-lo, 0), max(hi - in_size, 0)


# ---- from tpu ops --------------------------------------------------------------------------------


def clamp_bounds(out_t: Type, relu: bool = False, relu_limit: float | None = None) -> tuple[int, int]:
    """``(out_min, out_max)`` of a quantized result type with ReLU folded in: the storage range,
    raised to the zero point with ``relu`` and lowered to ``zp + round_half_away(relu_limit /
    scale)`` with a positive ``relu_limit`` (``tpu`` ops clamp in this order, which is the same)."""
    e = elem_of(out_t)
    lo, hi = int(e.storage_min), int(e.storage_max)  # type: ignore[attr-defined]
    if relu:
        z = _zp(out_t)
        lo = max(lo, z)
        if relu_limit is not None and relu_limit > 0:
            hi = min(hi, z + int(round_half_away(np.float64(relu_limit / float(qparams(out_t)[0])))))
    return lo, hi


def _zp(t: Type) -> int:
    z = np.asarray(qparams(t)[1]).reshape(-1)
    if np.any(z != z[0]):
        raise LaminaError(f"per-channel zero points of '{t}' have no TIU form")
    return int(z[0])


def _tname(t: Type) -> str:
    """The TIU dtype name of a tensor type's elements (storage type of a quantized one), or the
    element type's own spelling when the TIU has no such dtype."""
    e = elem_of(t)
    try:
        if is_quant(t):
            dt = storage_dtype(e)  # type: ignore[arg-type]
        elif isinstance(e, IntegerType) and e.width not in (8, 16, 32):
            return str(e)
        else:
            dt = element_type_to_dtype(e)
    except ValueError:
        return str(e)
    return next((k for k, v in DTYPES.items() if v == dt), str(e))


def _out(op: Operation) -> dict[str, Any]:
    t = op.results[0].type
    return {"out_dtype": _tname(t)}


def _req(op: Operation, relu: bool = False) -> dict[str, Any]:
    t = op.results[0].type
    lo, hi = clamp_bounds(t, relu, op.attr("relu_limit") if relu else None)  # type: ignore[attr-defined]
    return {"out_zp": _zp(t), "out_min": lo, "out_max": hi, "out_dtype": _tname(t)}


def _ints(v: Any) -> list[int]:
    return [int(a) for a in np.asarray(v).reshape(-1)]


def _unsupported(op: Operation, why: str) -> LaminaError:
    return LaminaError(f"'{op.name}' at {op.location} has no TIU command ({why}): it runs on the host CPU")


def _conv_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    xs, ws = op.input.type.shape, op.filter.type.shape
    _k, s, d, p = window_geometry(
        xs[2:],
        op.attr("kernel_shape") or ws[2:],
        op.attr("strides"),
        op.attr("dilations"),
        op.attr("pads"),
        op.attr("auto_pad"),
    )
    relu = bool(op.attr("do_relu"))
    g = int(op.attr("group"))
    if not is_quant(op.input.type):
        lim = float(op.attr("relu_limit")) if relu else -1.0
        return "conv_f", {
            "stride": s,
            "dilation": d,
            "pad": p,
            "group": g,
            "relu": relu,
            "relu_limit": lim,
            **_out(op),
        }
    params: dict[str, Any] = {
        "x_zp": _zp(op.input.type),
        "w_zp": _zp(op.filter.type),
        "stride": s,
        "dilation": d,
        "pad": p,
        "group": g,
        "multiplier": _ints(op.attr("multiplier")),
        "rshift": _ints(op.attr("rshift")),
        **_req(op, relu),
    }
    if g == xs[1] == ws[0] and ws[1] == 1:
        del params["group"]
        return "depthwise", params
    return "conv", params


def _matmul_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    relu = bool(op.attr("do_relu"))
    if not is_quant(op.input.type):
        lim = float(op.attr("relu_limit")) if relu else -1.0
        return "matmul_f", {"relu": relu, "relu_limit": lim, **_out(op)}
    bz = np.asarray(qparams(op.right.type)[1]).reshape(-1)
    return "matmul", {
        "a_zp": _zp(op.input.type),
        "b_zp": int(bz[0]) if bz.size == 1 else _ints(bz),
        "multiplier": _ints(op.attr("multiplier")),
        "rshift": _ints(op.attr("rshift")),
        **_req(op, relu),
    }


def _linear_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    kind = op.name.split(".")[1].lower()
    if not is_quant(op.results[0].type):
        return kind + "_f", _out(op)
    if kind == "mul":
        if len(op.operands) != 2:
            raise _unsupported(op, "an INT8 Mul of more than two inputs")
        mu, rs = _ints(op.attr("multiplier")), _ints(op.attr("rshift"))
        in_ts = [v.type for v in op.operands]
        axis = result_channel_axis(op.results[0].type, in_ts) if len(mu) > 1 else None
        return "mul", {
            "a_zp": _zp(op.operands[0].type),
            "b_zp": _zp(op.operands[1].type),
            "multiplier": mu,
            "rshift": rs,
            "channel_axis": -1 if axis is None else int(axis),
            **_req(op),
        }
    s = _ints(op.attr("rshift"))
    n = len(op.operands)
    m = np.asarray(op.attr("multiplier"), np.int64).reshape(n, -1)
    out_t = op.results[0].type
    nd = len(out_t.shape)
    axis = qparams(out_t)[2]
    if axis is None:
        for v in op.operands:
            a = qparams(v.type)[2]
            if a is not None:
                axis = a + nd - len(v.type.shape)
                break
    per = len(s) > 1 or (axis is not None and m.shape[1] > 1)
    return kind, {
        "x_zps": [_zp(v.type) for v in op.operands],
        "multipliers": m.tolist(),
        "rshift": s,
        "channel_axis": int(axis) if per and axis is not None else -1,
        **_req(op),
    }


def _pool_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    xs = op.input.type.shape
    geo = window_geometry(
        xs[2:],
        op.attr("kernel_shape"),
        op.attr("strides"),
        op.attr("dilations"),
        op.attr("pads"),
        op.attr("auto_pad"),
    )
    k, s, d, p = geo
    nd = len(k)
    _, extra = pool_output_size(xs[2:], geo, bool(op.attr("ceil_mode")))
    if op.name == "tpu.MaxPool":
        if len(op.results) > 1 and not isinstance(op.results[1].type, NoneType):
            raise _unsupported(op, "MaxPool with an indices result")
        return "max_pool", {
            "kernel": k,
            "stride": s,
            "dilation": d,
            "pad": [*p[:nd], *(p[nd + i] + extra[i] for i in range(nd))],
        }
    if any(v != 1 for v in d):
        raise _unsupported(op, "AvgPool with dilations")
    if not is_quant(op.input.type):
        return "avg_pool_f", {
            "kernel": k,
            "stride": s,
            "pad": p,
            "count_include_pad": bool(op.attr("count_include_pad")),
            "ceil_extra": extra,
            **_out(op),
        }
    return "avg_pool", {
        "x_zp": _zp(op.input.type),
        "kernel": k,
        "stride": s,
        "pad": p,
        "multiplier": int(op.attr("multiplier")[0]),
        "rshift": int(op.attr("rshift")[0]),
        **_req(op),
    }


def _reduce_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    mode = op.attr("mode")
    rank = len(op.input.type.shape)
    axes_v = const_value(op.axes) if not isinstance(op.axes.type, NoneType) else None
    if axes_v is None and not isinstance(op.axes.type, NoneType):
        raise _unsupported(op, "Reduce with axes computed at run time")
    if axes_v is None or np.asarray(axes_v).size == 0:
        if op.attr("noop_with_empty_axes"):
            raise _unsupported(op, "Reduce with empty axes and noop_with_empty_axes")
        axes = list(range(rank))
    else:
        axes = sorted(int(a) % rank for a in np.asarray(axes_v).reshape(-1))
    base = {"axes": axes, "keepdims": bool(op.attr("keepdims"))}
    if mode in ("ReduceMax", "ReduceMin"):
        return "reduce_" + mode[6:].lower(), base
    if not is_quant(op.input.type):
        if mode not in ("ReduceMean", "ReduceSum"):
            raise _unsupported(op, f"{mode} in a float mode")
        return "reduce_" + mode[6:].lower() + "_f", {**base, **_out(op)}
    if mode != "ReduceMean":
        raise _unsupported(op, f"{mode} in INT8")
    return "reduce_mean", {
        **base,
        "x_zp": _zp(op.input.type),
        "multiplier": int(op.attr("multiplier")[0]),
        "rshift": int(op.attr("rshift")[0]),
        **_req(op),
    }


def _cast_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    a, b = op.input.type, op.results[0].type
    if is_quant(b) and not is_quant(a):
        sc, z, axis, lo, hi = qparams(b)
        return "cast_quantize", {
            "scale": sc.tolist(),
            "zp": z.tolist(),
            "channel_axis": -1 if axis is None else axis,
            "out_min": lo,
            "out_max": hi,
            **_out(op),
        }
    if is_quant(a) and not is_quant(b) and isinstance(elem_of(b), FloatType):
        sc, z, axis, _, _ = qparams(a)
        return "cast_dequantize", {
            "scale": sc.tolist(),
            "zp": z.tolist(),
            "channel_axis": -1 if axis is None else axis,
            **_out(op),
        }
    if isinstance(elem_of(a), FloatType) and isinstance(elem_of(b), FloatType):
        return "cast_float", _out(op)
    raise _unsupported(op, f"a cast from {a} to {b}")


def _requant_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    a, b = op.input.type, op.results[0].type
    _, _, axis = requant_factors(a, b)
    return "requant", {
        "x_zp": _zp(a),
        "multiplier": _ints(op.attr("multiplier")),
        "rshift": _ints(op.attr("rshift")),
        "channel_axis": -1 if axis is None else int(axis),
        **_req(op),
    }


_FROM_OP: dict[str, Callable[[Any], tuple[str, dict[str, Any]]]] = {
    "tpu.Conv": _conv_cmd,
    "tpu.MatMul": _matmul_cmd,
    "tpu.Add": _linear_cmd,
    "tpu.Sub": _linear_cmd,
    "tpu.Mul": _linear_cmd,
    "tpu.MaxPool": _pool_cmd,
    "tpu.AvgPool": _pool_cmd,
    "tpu.Reduce": _reduce_cmd,
    "tpu.Cast": _cast_cmd,
    "tpu.Requant": _requant_cmd,
    "tpu.Lut": lambda op: ("lut", {}),
    "tpu.Lut16": lambda op: ("lut16", {}),
    "tpu.Permute": lambda op: ("permute", {"order": op._perm(len(op.input.type.shape))}),
    "tpu.Max": lambda op: _minmax_div_cmd(op),
    "tpu.Min": lambda op: _minmax_div_cmd(op),
    "tpu.Div": lambda op: _minmax_div_cmd(op),
    "tpu.Softmax": lambda op: _softmax_cmd(op),
    "tpu.LayerNorm": lambda op: _layer_norm_cmd(op),
    "tpu.Attention": lambda op: _attention_cmd(op),
}


def _minmax_div_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    kind = op.name.split(".")[1].lower()
    if any(is_quant(v.type) for v in (*op.operands, *op.results)):
        raise _unsupported(op, f"{op.name.split('.')[1]} has no integer form")
    return kind + "_f", _out(op)


def _float_only(op: Any) -> None:
    if any(is_quant(v.type) for v in (*op.operands, *op.results) if not isinstance(v.type, NoneType)):
        raise _unsupported(op, "it runs in float modes only")


def _softmax_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    _float_only(op)
    rank = len(op.input.type.shape)
    return "softmax_f", {"axis": int(op.attr("axis")) % max(rank, 1), "log": bool(op.attr("log")), **_out(op)}


def _layer_norm_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    _float_only(op)
    if any(not isinstance(r.type, NoneType) and r.has_uses for r in op.results[1:]):
        raise _unsupported(op, "LayerNorm's mean or rstd result is used")
    rank = len(op.input.type.shape)
    axis = int(op.attr("axis"))
    axis = axis + rank if axis < 0 else axis
    return "layer_norm_f", {"axis": axis, "epsilon": float(op.attr("epsilon")), **_out(op)}


def _attention_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    _float_only(op)
    q, k, v, mask, past_k, past_v, nonpad = op.operands
    if any(not isinstance(x.type, NoneType) for x in (past_k, past_v, nonpad)):
        raise _unsupported(op, "Attention with a KV cache or padding lengths")
    if any(not isinstance(r.type, NoneType) for r in op.results[1:]):
        raise _unsupported(op, "Attention's present key/value or qk results")
    if op.attr("is_causal") or (op.attr("softcap") or 0) > 0 or op.attr("softmax_precision") is not None:
        raise _unsupported(op, "Attention with a causal mask, softcap or another softmax precision")
    shapes = [x.type.shape for x in (q, k, v)]
    if any(len(sh) != 4 for sh in shapes):
        raise _unsupported(op, "Attention of 3-d (B, S, H*D) inputs")
    (b, h, _m, d), (bk, hk, n, dk), (bv, hv, nv, _dv) = shapes
    if (bk, hk, dk) != (b, h, d) or (bv, hv, nv) != (b, h, n):
        raise _unsupported(op, "Attention with grouped or broadcast key/value heads")
    if not isinstance(mask.type, NoneType):
        ms = mask.type.shape
        if not isinstance(elem_of(mask.type), FloatType):
            raise _unsupported(op, "Attention with a boolean mask")
        if len(ms) > 4 or ms[-1] != n:
            raise _unsupported(op, "Attention with a mask shorter than the keys")
    scale = op.attr("scale")
    return "attention_f", {"scale": float(1.0 / math.sqrt(d)) if scale is None else float(scale), **_out(op)}


def _active_cmd(op: Any) -> tuple[str, dict[str, Any]]:
    if is_quant(op.input.type):
        raise _unsupported(op, "a quantized activation is a tpu.Lut")
    short = op.name.split(".", 1)[1]
    props = ACTIVATIONS[short].op_def.props
    return "active_f", {"fn": short, "params": {p.name: op.attr(p.name) for p in props}, **_out(op)}


for _name in ACTIVATIONS:
    _FROM_OP["tpu." + _name] = _active_cmd


def command_for(op: Operation) -> tuple[str, dict[str, Any]]:
    """The TIU command (name, record fields) that computes ``op``, a ``tpu`` op; a ``LaminaError``
    naming the op when it has none (such ops run on the host CPU)."""
    fn = _FROM_OP.get(op.name)
    if fn is None:
        raise _unsupported(op, "the TIU has no form of this op")
    data = op.operands[:1] if op.name == "tpu.Reduce" else op.operands  # Reduce's axes are a field
    for v in (*data, *op.results):
        if not isinstance(v.type, NoneType) and _tname(v.type) not in DTYPES:
            raise _unsupported(op, f"its element type {elem_of(v.type)} is not a TIU dtype")
    return fn(op)


def execute_op(op: Operation, inputs: Sequence[Any]) -> Array:
    """``op`` (a ``tpu`` op) computed by its TIU command on ``inputs`` (its operands' values, as the
    interpreter passes them: ``None`` for an absent bias); the Lut's table comes from the op."""
    name, params = command_for(op)
    fn = FUNCTIONS[name]
    if name in ("lut", "lut16"):
        raw = op.properties["table"].to_numpy()  # type: ignore[attr-defined]
        table = np.asarray(raw).astype(storage_dtype(elem_of(op.results[0].type)))  # type: ignore[arg-type]
        return fn(inputs[0], table)
    if name in ("add", "add_f", "mul_f", "max_f", "min_f"):
        return fn(list(inputs), **params)
    if name in (
        "reduce_mean",
        "reduce_max",
        "reduce_min",
        "reduce_mean_f",
        "reduce_sum_f",
        "permute",
        "softmax_f",
    ):
        return fn(inputs[0], **params)
    if name == "attention_f":
        return fn(*inputs[:4], **params)
    return fn(*inputs, **params)

"""The normalization family: ``tpu.Softmax`` and ``tpu.LayerNorm``, their INT8 forms and their
lowering (the ``softmax`` and ``layernorm`` integer forms of ``convert-top-to-tpu{int_forms=...}``).

* Softmax INT8 (8-bit per-tensor input, any axis, not ``log``): ``d = max(q) - q`` indexes a
  256-entry table ``E[d] = rha(2**15 * exp(-s_in * d))``; the output is
  ``zp_out + round(E * A / (sum(E) * 2**16))`` with ``A = rha(2**16 / s_out)``
  (:func:`~..quantize.int_softmax`).
* LayerNorm INT8 (normalization over the last axis only, ``N <= 4096``, constant gamma/beta, no
  Mean/InvStdDev results; input and output per-tensor or per-channel along the last axis): the
  input on a common integer grid, integer mean and variance, an integer reciprocal square root,
  gamma and beta folded into a per-channel requantization (:func:`~..quantize.int_layer_norm`).

``docs/tpu.md`` states both contracts, with how the lowering computes the constants.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.top import nn as top_nn
from lamina.dialects.top.base import I64ArrayAttr
from lamina.ir.attributes import DenseArrayAttr
from lamina.ir.core import Operation, Value
from lamina.ir.opdef import prop
from lamina.ir.types import NoneType, RankedTensorType, i64
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import elem, is_per_axis, scale, scales
from ..quantize import (
    LAYERNORM_MAX_N,
    LAYERNORM_MAX_SHIFT,
    LAYERNORM_W_BITS,
    LAYERNORM_X_BITS,
    LAYERNORM_Z_BITS,
    SOFTMAX_OUT_BITS,
    int_layer_norm,
    int_softmax,
    qparams,
    quantize_multiplier,
    round_half_away,
    softmax_exp_table,
)
from .common import bounds, declare, store, zp


def _ints(op: Any, name: str) -> np.ndarray:
    return np.asarray(op.attr(name), dtype=np.int64)


def _softmax_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """:func:`~..quantize.int_softmax` with the op's ``exp_table`` and ``out_factor``."""
    out_t = self.output.type
    lo, hi = bounds(out_t)
    table = _ints(self, "exp_table")
    factor = int(_ints(self, "out_factor")[0])
    zp_out = zp(out_t)

    def run(ins: Sequence[Any]) -> list[Any]:
        x = np.asarray(ins[0])
        axis = int(self.attr("axis")) % x.ndim
        return [store(int_softmax(x, axis, table, factor, zp_out, lo, hi), out_t)]

    return run


SoftmaxOp = declare(
    top_nn.SoftmaxOp,
    {
        "exp_table": prop(I64ArrayAttr, optional=True),
        "out_factor": prop(I64ArrayAttr, optional=True),
        "int_executor": _softmax_int,
    },
    __name__,
)


def _layer_norm_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """:func:`~..quantize.int_layer_norm` with the op's per-channel constants."""
    in_t, out_t = self.input.type, self.output.type
    lo, hi = bounds(out_t)
    zp_in, zp_out = zp(in_t), zp(out_t)
    w, m, s, b = (_ints(self, k) for k in ("in_weight", "multiplier", "shift", "bias_q"))
    eps = int(_ints(self, "eps_q")[0])

    def run(ins: Sequence[Any]) -> list[Any]:
        y = int_layer_norm(np.asarray(ins[0]), zp_in, w, eps, m, s, b, zp_out, lo, hi)
        return [store(y, out_t), None, None]

    return run


LayerNormOp = declare(
    top_nn.LayerNormOp,
    {
        "in_weight": prop(I64ArrayAttr, optional=True),
        "eps_q": prop(I64ArrayAttr, optional=True),
        "multiplier": prop(I64ArrayAttr, optional=True),
        "shift": prop(I64ArrayAttr, optional=True),
        "bias_q": prop(I64ArrayAttr, optional=True),
        "int_executor": _layer_norm_int,
    },
    __name__,
)


def _arr(vals: Any) -> DenseArrayAttr:
    return DenseArrayAttr(i64, [int(v) for v in np.asarray(vals).reshape(-1)])


def layer_norm_constants(
    in_scales: np.ndarray, eps: float, gamma: np.ndarray, beta: np.ndarray, out_scales: np.ndarray
) -> dict[str, np.ndarray] | None:
    """The integer constants of the LayerNorm contract (``docs/tpu.md``) for ``N`` channels: input
    scales ``s_c``, ``epsilon``, float64 ``gamma``/``beta`` and output scales (each of length ``N``);
    None where the form does not apply (``N`` too large, scales too far apart)."""
    n = int(gamma.size)
    if n > LAYERNORM_MAX_N or n < 1:
        return None
    s_in = np.broadcast_to(np.asarray(in_scales, np.float64), (n,))
    s_out = np.broadcast_to(np.asarray(out_scales, np.float64), (n,))
    s_min = float(s_in.min())
    if not s_min > 0:
        return None
    p = None
    for cand in range(8, -1, -1):
        w = round_half_away(2.0**cand * s_in / s_min)
        if 255.0 * float(w.max()) <= 2.0**LAYERNORM_X_BITS:
            p = cand
            break
    if p is None:
        return None
    in_weight = round_half_away(2.0 ** (p + LAYERNORM_W_BITS) * s_in / s_min).astype(np.int64)
    s_x = s_min / 2.0**p
    eps_q = min(2**61, int(round_half_away(np.float64(n * eps / (s_x * s_x)))))
    mult = np.zeros(n, np.int64)
    shift = np.zeros(n, np.int64)
    bias = np.zeros(n, np.int64)
    for c in range(n):
        g = float(gamma[c]) * math.sqrt(n) * 2.0**-LAYERNORM_Z_BITS / float(s_out[c])
        if g == 0.0:
            sh = 31
            mq = 0
        else:
            try:
                mq, rs = quantize_multiplier(abs(g))
            except ValueError:
                return None
            sh = 31 + rs
            if sh > LAYERNORM_MAX_SHIFT:
                sh = LAYERNORM_MAX_SHIFT
                mq = int(round_half_away(np.float64(abs(g) * 2.0**sh)))
            mq = -mq if g < 0 else mq
        mult[c], shift[c] = mq, sh
        bq = round_half_away(np.float64(float(beta[c]) / float(s_out[c]) * 2.0**sh))
        bias[c] = int(np.clip(bq, -(2.0**61), 2.0**61))
    return {
        "in_weight": in_weight,
        "eps_q": np.array([eps_q]),
        "multiplier": mult,
        "shift": shift,
        "bias_q": bias,
    }


class NormLowering(FamilyLowering):
    """top.Softmax / top.LayerNorm → their integer forms (when the ``softmax`` / ``layernorm``
    forms are enabled and the op's attributes fit), else float."""

    roots = (top_nn.SoftmaxOp, top_nn.LayerNormOp)

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if isinstance(op, top_nn.SoftmaxOp):
            return self._softmax(op, ins, rw)
        return self._layer_norm(op, ins, rw)

    def _softmax(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if "softmax" not in self.s.int_forms or op.attr("log"):  # type: ignore[attr-defined]
            raise NoInt8
        x = self.qin(rw, op.operands[0], ins[0])
        if elem(x.type).storage_width != 8:  # type: ignore[attr-defined]
            raise NoInt8
        out_t = self.qout(op.results[0])
        factor = int(round_half_away(np.float64(2.0**SOFTMAX_OUT_BITS / scale(out_t))))
        if not 0 < factor <= 2**40:
            raise NoInt8
        extra = {"exp_table": _arr(softmax_exp_table(scale(x.type))), "out_factor": _arr([factor])}
        return self.emit(op, rw, [x], [out_t], extra)

    def _layer_norm(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if "layernorm" not in self.s.int_forms:
            raise NoInt8
        if any(r.uses for r in op.results[1:]):
            raise NoInt8
        xs = op.operands[0].type
        if not (isinstance(xs, RankedTensorType) and xs.has_static_shape and xs.shape):
            raise NoInt8
        nd = len(xs.shape)
        if int(op.attr("axis")) % nd != nd - 1:  # type: ignore[attr-defined]
            raise NoInt8
        n = xs.shape[-1]
        gamma = self.s.weight_array(ins[1])
        beta = np.zeros(n) if isinstance(ins[2].type, NoneType) else self.s.weight_array(ins[2])
        if gamma is None or beta is None or gamma.size not in (1, n) or beta.size not in (1, n):
            raise NoInt8
        gamma = np.broadcast_to(np.asarray(gamma, np.float64).reshape(-1), (n,))
        beta = np.broadcast_to(np.asarray(beta, np.float64).reshape(-1), (n,))
        x = self.qin(rw, op.operands[0], ins[0], per_axis=True)
        if elem(x.type).storage_width != 8 or not _last_axis_ok(x.type, nd):  # type: ignore[attr-defined]
            x = self.qin(rw, op.operands[0], x)
        out_t = self.qout(op.results[0], per_axis=True)
        if not _last_axis_ok(out_t, nd):
            raise NoInt8
        consts = layer_norm_constants(
            scales(x.type),
            float(op.attr("epsilon")),  # type: ignore[attr-defined]
            gamma,
            beta,
            scales(out_t),  # type: ignore[attr-defined]
        )
        if consts is None:
            raise NoInt8
        extra = {k: _arr(v) for k, v in consts.items()}
        # the unused Mean / InvStdDev results are dropped (the integer form has none)
        return self.emit(op, rw, [x, ins[1], ins[2]], [out_t, NoneType(), NoneType()], extra)


def _last_axis_ok(t: Any, nd: int) -> bool:
    """Per-tensor, or per-axis along the last axis."""
    return not is_per_axis(t) or qparams(t)[2] == nd - 1

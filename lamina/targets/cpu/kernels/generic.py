"""Generic compiled templates for the elementwise and data-movement ops, in every mode.

Every kernel here is one strided loop nest (:func:`.generic_ir.emit_strided`) over the result, its
outermost loop split between the parts, its innermost contiguous (the loop vectorizer's case):

* ``generic.float_ew`` — float-mode unary/binary/variadic ops with numpy broadcasting (Add, Sub,
  Mul, Div, Max, Min, Mean, Relu, Sigmoid, Tanh, Exp, Log, Sqrt, Abs, Neg, Erf, Reciprocal, GELU,
  SiLU, LeakyRelu, HardSigmoid, HardSwish, Clip), computed in f32 (f64 where an operand is f64) as
  the ``tpu`` float mode does, rounded to the result type;
* ``generic.int_ew`` — the INT8 forms of Add/Sub (per tensor or per channel) and Mul: int64
  arithmetic, ``rounding_rshift`` (half away from zero), saturation — bit for bit the contract;
* ``generic.requant`` — ``tpu.Requant`` (per tensor or per channel);
* ``generic.cast`` — ``tpu.Cast`` quantize (float64 division, round half away, saturate, NaN → 0),
  dequantize (float64 product rounded to f32, then to the result type) and float → float;
* ``generic.lut`` — ``tpu.Lut``: a 256-entry table in the weights;
* ``generic.alias`` — Reshape/Flatten/Squeeze/Unsqueeze of an arena tensor: a view, no code;
* ``generic.gather`` — every other data-movement op (Permute, Slice, Split, Tile, Expand, Interp
  nearest, DepthToSpace, SpaceToDepth, and reshapes that must copy): ``out[i] = in[table[i]]`` with
  the table computed at compile time by running the op's own reference on the element indices;
* ``generic.concat`` — ``tpu.Concat``: each input copied into its slice of the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import llvmlite.ir as ir
import numpy as np

from lamina.ir.constants import constant_array, value_constant
from lamina.ir.types import FloatType, RankedTensorType

from .abi import Isa, KernelPlan, Template
from .generic_ir import (
    F64,
    I64,
    Kernel,
    broadcast_strides,
    clamp_i64,
    compute_float,
    const,
    contiguous_strides,
    emit_strided,
    fconst,
    fused_consumers,
    intrinsic,
    libm,
    load_float,
    load_int,
    lut_of,
    np_dtype,
    rounding_rshift,
    storage_type,
    store_float,
    store_int,
)
from .vmath_f32 import verf, vexp

__all__ = ["FLOAT_EW"]


def _np(t: Any) -> np.dtype:
    return np_dtype(t)


def _static(t: Any) -> bool:
    return isinstance(t, RankedTensorType) and t.has_static_shape


def _is_float(t: Any) -> bool:
    return isinstance(t, RankedTensorType) and isinstance(t.element_type, FloatType)


def _quant(t: Any) -> bool:
    from lamina.dialects.tpu.families.common import is_quant

    return isinstance(t, RankedTensorType) and is_quant(t)


def _short(op: Any) -> str:
    return str(op.name).split(".", 1)[-1]


def _tensor_operands(op: Any) -> list[int]:
    return [i for i, v in enumerate(op.operands) if isinstance(v.type, RankedTensorType)]


def _shape(t: Any) -> list[int]:
    return [int(d) for d in t.shape]


# ---- float-mode elementwise ----------------------------------------------------------------------------


def _sigmoid(b: ir.IRBuilder, m: ir.Module, x: Any) -> Any:
    t = x.type
    if t == F32:
        e = vexp(b, m, b.fneg(x))  # inline, so the loop vectorizer widens it (not expf)
    else:
        e = b.call(libm(m, "exp" if t == F64 else "expf", t), [b.fneg(x)])
    return b.fdiv(fconst(1.0, t), b.fadd(fconst(1.0, t), e))


def _fmax(b: ir.IRBuilder, m: ir.Module, x: Any, y: Any) -> Any:
    """numpy's ``maximum``: ``x >= y or isnan(x) ? x : y`` (NaN propagates; of -0 and 0, the first)."""
    return b.select(b.fcmp_unordered(">=", x, y), x, y)


def _fmin(b: ir.IRBuilder, m: ir.Module, x: Any, y: Any) -> Any:
    """numpy's ``minimum``: ``x <= y or isnan(x) ? x : y``."""
    return b.select(b.fcmp_unordered("<=", x, y), x, y)


def _lib(name: str) -> Any:
    def f(b: ir.IRBuilder, m: ir.Module, op: Any, xs: list[Any]) -> Any:
        t = xs[0].type
        return b.call(libm(m, name if t == F64 else name + "f", t), [xs[0]])

    return f


def _gelu(b: ir.IRBuilder, m: ir.Module, op: Any, xs: list[Any]) -> Any:
    x = xs[0]
    t = x.type
    half = b.fmul(fconst(0.5, t), x)
    if op.attr("approximate") == "tanh":
        inner = b.fmul(
            fconst(math.sqrt(2.0 / math.pi), t),
            b.fadd(x, b.fmul(fconst(0.044715, t), b.fmul(x, b.fmul(x, x)))),
        )
        th = b.call(libm(m, "tanh" if t == F64 else "tanhf", t), [inner])
        return b.fmul(half, b.fadd(fconst(1.0, t), th))
    z = b.fmul(x, fconst(1.0 / math.sqrt(2.0), t))
    er = verf(b, m, z) if t == F32 else b.call(libm(m, "erf" if t == F64 else "erff", t), [z])
    return b.fmul(half, b.fadd(fconst(1.0, t), er))


def _softplus(b: ir.IRBuilder, m: ir.Module, x: Any) -> Any:
    """``logaddexp(0, x) = max(x, 0) + log1p(exp(-|x|))``, as numpy computes it."""
    t = x.type
    ax = b.call(intrinsic(m, "llvm.fabs", t), [x])
    e = b.call(libm(m, "exp" if t == F64 else "expf", t), [b.fneg(ax)])
    l1 = b.call(libm(m, "log1p" if t == F64 else "log1pf", t), [e])
    return b.fadd(_fmax(b, m, x, fconst(0.0, t)), l1)


def _fold(fn: Any) -> Any:
    def f(b: ir.IRBuilder, m: ir.Module, op: Any, xs: list[Any]) -> Any:
        acc = xs[0]
        for x in xs[1:]:
            acc = fn(b, m, acc, x)
        return acc

    return f


def _clip(b: ir.IRBuilder, m: ir.Module, op: Any, xs: list[Any]) -> Any:
    x = xs[0]
    it = iter(xs[1:])
    if op.operands[1].type.__class__ is RankedTensorType:
        x = _fmax(b, m, x, next(it))
    if op.operands[2].type.__class__ is RankedTensorType:
        x = _fmin(b, m, x, next(it))
    return x


def _hsig(b: ir.IRBuilder, m: ir.Module, op: Any, xs: list[Any]) -> Any:
    x = xs[0]
    t = x.type
    y = b.fadd(b.fmul(x, fconst(op.attr("alpha"), t)), fconst(op.attr("beta"), t))
    return _fmin(b, m, _fmax(b, m, y, fconst(0.0, t)), fconst(1.0, t))


def _hswish(b: ir.IRBuilder, m: ir.Module, op: Any, xs: list[Any]) -> Any:
    x = xs[0]
    t = x.type
    y = b.fadd(b.fdiv(x, fconst(6.0, t)), fconst(0.5, t))
    return b.fmul(x, _fmin(b, m, _fmax(b, m, y, fconst(0.0, t)), fconst(1.0, t)))


#: float-mode op (short name) → its element function ``(builder, module, op, operand values)``
FLOAT_EW: dict[str, Any] = {
    "Add": _fold(lambda b, m, x, y: b.fadd(x, y)),
    "Sub": _fold(lambda b, m, x, y: b.fsub(x, y)),
    "Mul": _fold(lambda b, m, x, y: b.fmul(x, y)),
    "Div": _fold(lambda b, m, x, y: b.fdiv(x, y)),
    "Max": _fold(_fmax),
    "Min": _fold(_fmin),
    "Mean": lambda b, m, op, xs: b.fdiv(
        _fold(lambda b, m, x, y: b.fadd(x, y))(b, m, op, xs), fconst(len(xs), xs[0].type)
    ),
    "Relu": lambda b, m, op, xs: _fmax(b, m, xs[0], fconst(0.0, xs[0].type)),
    "Sigmoid": lambda b, m, op, xs: _sigmoid(b, m, xs[0]),
    "SiLU": lambda b, m, op, xs: b.fmul(
        xs[0], _sigmoid(b, m, b.fmul(xs[0], fconst(op.attr("alpha"), xs[0].type)))
    ),
    "Tanh": _lib("tanh"),
    "Exp": _lib("exp"),
    "Log": _lib("log"),
    "Erf": _lib("erf"),
    "Sqrt": lambda b, m, op, xs: b.call(intrinsic(m, "llvm.sqrt", xs[0].type), [xs[0]]),
    "Abs": lambda b, m, op, xs: b.call(intrinsic(m, "llvm.fabs", xs[0].type), [xs[0]]),
    "Neg": lambda b, m, op, xs: b.fneg(xs[0]),
    "Reciprocal": lambda b, m, op, xs: b.fdiv(fconst(1.0, xs[0].type), xs[0]),
    "GELU": _gelu,
    "LeakyRelu": lambda b, m, op, xs: b.select(
        b.fcmp_ordered(">=", xs[0], fconst(0.0, xs[0].type)),
        xs[0],
        b.fmul(xs[0], fconst(op.attr("alpha"), xs[0].type)),
    ),
    "HardSigmoid": _hsig,
    "HardSwish": _hswish,
    "Clip": _clip,
    "Elu": lambda b, m, op, xs: b.select(
        b.fcmp_ordered(">=", xs[0], fconst(0.0, xs[0].type)),
        xs[0],
        b.fmul(_lib("expm1")(b, m, op, xs), fconst(op.attr("alpha"), xs[0].type)),
    ),
    "Softplus": lambda b, m, op, xs: _softplus(b, m, xs[0]),
    "Mish": lambda b, m, op, xs: b.fmul(xs[0], _lib("tanh")(b, m, op, [_softplus(b, m, xs[0])])),
    "Softsign": lambda b, m, op, xs: b.fdiv(
        xs[0], b.fadd(fconst(1.0, xs[0].type), b.call(intrinsic(m, "llvm.fabs", xs[0].type), [xs[0]]))
    ),
    "Floor": lambda b, m, op, xs: b.call(intrinsic(m, "llvm.floor", xs[0].type), [xs[0]]),
    "Ceil": lambda b, m, op, xs: b.call(intrinsic(m, "llvm.ceil", xs[0].type), [xs[0]]),
    "Round": lambda b, m, op, xs: b.call(intrinsic(m, "llvm.rint", xs[0].type), [xs[0]]),
    "Sin": _lib("sin"),
    "Cos": _lib("cos"),
    "Identity": lambda b, m, op, xs: xs[0],
}


def _elementwise_plan(op: Any, symbol: str, extra: dict[str, np.ndarray] | None = None) -> KernelPlan:
    bufs: list[tuple[str, Any]] = [("in", i) for i in _tensor_operands(op)]
    bufs += [("weight", k) for k in (extra or {})]
    bufs.append(("out", 0))
    n = int(np.prod(_shape(op.results[0].type)))
    nbytes = sum(
        int(np.prod(_shape(op.operands[i].type))) * _np(op.operands[i].type).itemsize
        for i in _tensor_operands(op)
    )
    return KernelPlan(symbol, bufs, dict(extra or {}), bytes=nbytes + n * _np(op.results[0].type).itemsize)


def _operand_ptrs(
    k: Kernel, op: Any, out_shape: list[int], extra: Sequence[tuple[np.ndarray, list[int]]] = ()
) -> list[tuple[Any, list[int], int]]:
    """(pointer, broadcast strides, 0) for each tensor operand, then each extra weight (given with
    its strides over the result), then the result."""
    ops = []
    j = 0
    for i in _tensor_operands(op):
        t = op.operands[i].type
        ops.append((k.buf(j, storage_type(_np(t))), broadcast_strides(_shape(t), out_shape), 0))
        j += 1
    for arr, st in extra:
        ops.append((k.buf(j, storage_type(arr.dtype)), st, 0))
        j += 1
    rt = op.results[0].type
    ops.append((k.buf(j, storage_type(_np(rt))), contiguous_strides(out_shape), 0))
    return ops


#: the float functions computed with the C library's, not numpy's, algorithms (the last bit may differ)
TRANSCENDENTAL = frozenset(
    {"Sigmoid", "SiLU", "Tanh", "Exp", "Log", "Erf", "GELU", "Elu", "Softplus", "Mish", "Sin", "Cos"}
)


class FloatElementwise(Template):
    name = "generic.float_ew"
    priority = 0

    def exact_for(self, op: Any) -> bool:
        """IEEE arithmetic (add, mul, div, sqrt, max...) rounds as numpy's; the transcendental
        functions do not (an INT8 model's exact path runs them through the reference)."""
        return _short(op) not in TRANSCENDENTAL

    def matches(self, op: Any, isa: Isa) -> bool:
        if not str(op.name).startswith("tpu.") or _short(op) not in FLOAT_EW or len(op.results) != 1:
            return False
        ts = [op.operands[i].type for i in _tensor_operands(op)] + [op.results[0].type]
        return all(_static(t) and _is_float(t) for t in ts) and all(
            not isinstance(v.type, RankedTensorType) or _is_float(v.type) for v in op.operands
        )

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        return _elementwise_plan(op, symbol)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        out_t = op.results[0].type
        shape = _shape(out_t)
        idx = _tensor_operands(op)
        dts = [_np(op.operands[i].type) for i in idx]
        ct = F64 if any(compute_float(d) == F64 for d in [*dts, _np(out_t)]) else compute_float(dts[0])
        fn = FLOAT_EW[_short(op)]
        ptrs = _operand_ptrs(k, op, shape)

        def body(b: ir.IRBuilder, ps: list[Any]) -> None:
            xs = [load_float(b, p, d, ct) for p, d in zip(ps[:-1], dts)]
            store_float(b, fn(b, module, op, xs), ps[-1], _np(out_t))

        emit_strided(k, shape, ptrs, body)
        k.finish()


# ---- INT8 elementwise -----------------------------------------------------------------------------------


def _axis_strides(shape: list[int], axis: int) -> list[int]:
    return [1 if d == axis else 0 for d in range(len(shape))]


class LutEpilogue:
    """The fusion hook for a following ``tpu.Lut`` (an INT8 activation): the kernel indexes the table
    with its stored integer and writes the table's value (the Lut's result) instead."""

    def fuses(self, op: Any, consumer: Any) -> bool:
        return (
            consumer.name == "tpu.Lut"
            and consumer.operands[0].defining_op() is op
            and _static(consumer.results[0].type)
            and len(fused_consumers(op)) == 0
        )

    @staticmethod
    def lut(op: Any) -> tuple[np.ndarray, int, Any] | None:
        f = fused_consumers(op)
        return lut_of(f[0]) if f else None

    @staticmethod
    def store_lut(b: ir.IRBuilder, y: Any, tp: Any, base: int, ptr: Any, out_t: Any) -> None:
        """``ptr <- table[y + base]`` (``y``: the stored integer, i64)."""
        b.store(b.load(b.gep(tp, [b.add(y, const(base))])), ptr)


class IntElementwise(LutEpilogue, Template):
    """INT8 Add/Sub (``sum_i sign_i (q_i - zp_i) m_i``) and Mul (``prod_i (q_i - zp_i) * m``), then
    ``rounding_rshift(., 31 + s) + zp`` saturated; per channel: multipliers and shifts read along the
    channel axis from the weights (Add/Sub: one per input and channel; Mul: one per channel)."""

    name = "generic.int_ew"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name not in ("tpu.Add", "tpu.Sub", "tpu.Mul") or len(op.results) != 1:
            return False
        if not all(_static(v.type) and _quant(v.type) for v in [*op.operands, op.results[0]]):
            return False
        return op.attr("multiplier") is not None

    def _params(self, op: Any) -> tuple[list[np.ndarray], np.ndarray, int | None]:
        from lamina.dialects.tpu.families.common import mult_props, result_channel_axis

        in_ts = [v.type for v in op.operands]
        out_t = op.results[0].type
        m, s = mult_props(op)
        axis = result_channel_axis(out_t, in_ts)
        if op.name == "tpu.Mul":  # one multiplier, or one per channel of the result's axis
            if m.size > 1 and axis is not None:
                return [np.asarray(m, np.int64)], (31 + s).astype(np.int64), axis
            return [np.array([m[0]], np.int64)], np.array([31 + s[0]], np.int64), None
        signs = [1] * len(in_ts) if op.name == "tpu.Add" else [1, -1]
        per = s.size > 1 or (axis is not None and m.size > len(in_ts))
        if per:
            c = s.size
            ms = [np.asarray(m[i * c : (i + 1) * c], np.int64) * signs[i] for i in range(len(in_ts))]
            return ms, (31 + s).astype(np.int64), axis
        return (
            [np.array([int(m[i]) * signs[i]], np.int64) for i in range(len(in_ts))],
            np.array([31 + int(s[0])], np.int64),
            None,
        )

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        ms, sh, axis = self._params(op)
        extra = {}
        if axis is not None:
            for i, a in enumerate(ms):
                extra[f"m{i}"] = a
            extra["shift"] = sh
        lut = self.lut(op)
        if lut is not None:
            extra["lut"] = lut[0]
        return _elementwise_plan(op, symbol, extra)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from lamina.dialects.tpu.families.common import bounds, zp

        k = Kernel(module, plan.symbol)
        out_t = op.results[0].type
        shape = _shape(out_t)
        ms, sh, axis = self._params(op)
        lo, hi = bounds(out_t)
        zo = zp(out_t)
        in_ts = [v.type for v in op.operands]
        zps = [zp(t) for t in in_ts]
        extra = []
        if axis is not None:
            st = _axis_strides(shape, axis)
            extra = [(a, st) for a in ms] + [(sh, st)]
        lut = self.lut(op)
        if lut is not None:
            extra.append((lut[0], [0] * len(shape)))
        ptrs = _operand_ptrs(k, op, shape, extra)
        n = len(in_ts)
        mul = op.name == "tpu.Mul"

        def body(b: ir.IRBuilder, ps: list[Any]) -> None:
            xs = [b.sub(load_int(b, p, _np(t)), const(z)) for p, t, z in zip(ps[:n], in_ts, zps)]
            if axis is not None:
                mv = [b.load(p) for p in ps[n : n + len(ms)]]
                shift = b.load(ps[n + len(ms)])
            else:
                mv = [const(int(a[0])) for a in ms]
                shift = const(int(sh[0]))
            if mul:
                acc = xs[0]
                for x in xs[1:]:
                    acc = b.mul(acc, x)
                acc = b.mul(acc, mv[0])
            else:
                acc = b.mul(xs[0], mv[0])
                for x, mm in zip(xs[1:], mv[1:]):
                    acc = b.add(acc, b.mul(x, mm))
            y = clamp_i64(b, b.add(rounding_rshift(b, acc, shift), const(zo)), lo, hi)
            if lut is not None:
                self.store_lut(b, y, ps[-2], lut[1], ps[-1], lut[2])
            else:
                store_int(b, y, ps[-1], _np(out_t))

        emit_strided(k, shape, ptrs, body)
        k.finish()


class Requant(LutEpilogue, Template):
    name = "generic.requant"

    def matches(self, op: Any, isa: Isa) -> bool:
        return op.name == "tpu.Requant" and _static(op.operands[0].type) and _static(op.results[0].type)

    def _params(self, op: Any) -> tuple[np.ndarray, np.ndarray, int | None]:
        from lamina.dialects.tpu.families.common import channel_axis

        a, b = op.operands[0].type, op.results[0].type
        m = np.asarray(op.multiplier, np.int64).reshape(-1)
        s = np.asarray(op.rshift, np.int64).reshape(-1)
        axis = channel_axis(b) if channel_axis(b) is not None else channel_axis(a)
        return m, 31 + s, axis

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        m, s, axis = self._params(op)
        extra = {"m": m, "shift": s} if axis is not None else {}
        lut = self.lut(op)
        if lut is not None:
            extra["lut"] = lut[0]
        return _elementwise_plan(op, symbol, extra)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from lamina.dialects.tpu.families.common import bounds, zp

        k = Kernel(module, plan.symbol)
        a, out_t = op.operands[0].type, op.results[0].type
        shape = _shape(out_t)
        m, s, axis = self._params(op)
        lo, hi = bounds(out_t)
        zi, zo = zp(a), zp(out_t)
        extra = [(m, _axis_strides(shape, axis)), (s, _axis_strides(shape, axis))] if axis is not None else []
        lut = self.lut(op)
        if lut is not None:
            extra.append((lut[0], [0] * len(shape)))
        ptrs = _operand_ptrs(k, op, shape, extra)

        def body(b: ir.IRBuilder, ps: list[Any]) -> None:
            x = b.sub(load_int(b, ps[0], _np(a)), const(zi))
            if axis is not None:
                mm, sh = b.load(ps[1]), b.load(ps[2])
            else:
                mm, sh = const(int(m[0])), const(int(s[0]))
            y = clamp_i64(b, b.add(rounding_rshift(b, b.mul(x, mm), sh), const(zo)), lo, hi)
            if lut is not None:
                self.store_lut(b, y, ps[-2], lut[1], ps[-1], lut[2])
            else:
                store_int(b, y, ps[-1], _np(out_t))

        emit_strided(k, shape, ptrs, body)
        k.finish()


class Cast(Template):
    """``tpu.Cast``: quantize, dequantize, float → float, integer → f32/f64 (other integer casts:
    the reference)."""

    name = "generic.cast"

    def _kind(self, op: Any) -> str | None:
        if op.name != "tpu.Cast":
            return None
        a, b = op.operands[0].type, op.results[0].type
        if not (_static(a) and _static(b)):
            return None
        if _quant(b) and _is_float(a):
            return "quantize"
        if _quant(a) and _is_float(b):
            return "dequantize"
        if _is_float(a) and _is_float(b):
            return "float"
        ints = isinstance(a, RankedTensorType) and not _quant(a) and _np(a).kind in "iub"
        if ints and _is_float(b) and _np(b).name in ("float32", "float64"):
            return "int2float"  # numpy's astype: round to nearest, as sitofp/uitofp
        return None

    def matches(self, op: Any, isa: Isa) -> bool:
        return self._kind(op) is not None

    def _qt(self, op: Any) -> Any:
        kind = self._kind(op)
        return op.results[0].type if kind == "quantize" else op.operands[0].type

    def _params(self, op: Any) -> tuple[np.ndarray, np.ndarray, int | None]:
        from lamina.dialects.tpu.quantize import qparams

        scale, zp, axis, _, _ = qparams(self._qt(op))
        return np.atleast_1d(np.asarray(scale, np.float64)), np.atleast_1d(np.asarray(zp, np.int64)), axis

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        if self._kind(op) in ("float", "int2float"):
            return _elementwise_plan(op, symbol)
        sc, zp, axis = self._params(op)
        return _elementwise_plan(op, symbol, {"scale": sc, "zp": zp} if axis is not None else None)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from lamina.dialects.tpu.quantize import qparams

        kind = self._kind(op)
        k = Kernel(module, plan.symbol)
        a, out_t = op.operands[0].type, op.results[0].type
        shape = _shape(out_t)
        da, do = _np(a), _np(out_t)
        if kind == "int2float":
            ptrs = _operand_ptrs(k, op, shape)
            ct = compute_float(do)
            emit_strided(
                k, shape, ptrs, lambda b, ps: store_float(b, load_float(b, ps[0], da, ct), ps[1], do)
            )
            k.finish()
            return
        if kind == "float":
            ptrs = _operand_ptrs(k, op, shape)
            emit_strided(
                k,
                shape,
                ptrs,
                lambda b, ps: store_float(b, load_float(b, ps[0], da, compute_float(da)), ps[1], do),
            )
            k.finish()
            return
        sc, zp, axis = self._params(op)
        _, _, _, lo, hi = qparams(self._qt(op))
        extra = (
            [(sc, _axis_strides(shape, axis)), (zp, _axis_strides(shape, axis))] if axis is not None else []
        )
        ptrs = _operand_ptrs(k, op, shape, extra)
        fabs = intrinsic(module, "llvm.fabs", F64)
        floor = intrinsic(module, "llvm.floor", F64)

        def params(b: ir.IRBuilder, ps: list[Any]) -> tuple[Any, Any]:
            if axis is not None:
                return b.load(ps[1]), b.load(ps[2])
            return fconst(float(sc[0]), F64), const(int(zp[0]))

        def quantize(b: ir.IRBuilder, ps: list[Any]) -> None:
            s, z = params(b, ps)
            x = load_float(b, ps[0], da, F32_OF(da))
            q = b.fdiv(b.fpext(x, F64) if x.type != F64 else x, s)
            r = b.call(floor, [b.fadd(b.call(fabs, [q]), fconst(0.5, F64))])
            r = b.select(b.fcmp_ordered("<", q, fconst(0.0, F64)), b.fneg(r), r)
            r = b.fadd(r, b.sitofp(z, F64))
            nan = b.fcmp_unordered("uno", r, r)
            r = b.select(nan, fconst(0.0, F64), r)
            r = b.select(b.fcmp_ordered("<", r, fconst(lo, F64)), fconst(lo, F64), r)
            r = b.select(b.fcmp_ordered(">", r, fconst(hi, F64)), fconst(hi, F64), r)
            store_int(b, b.fptosi(r, I64), ps[-1], do)

        def dequantize(b: ir.IRBuilder, ps: list[Any]) -> None:
            s, z = params(b, ps)
            q = b.sub(load_int(b, ps[0], da), z)
            y = b.fptrunc(b.fmul(b.sitofp(q, F64), s), F32)
            store_float(b, y, ps[-1], do)

        emit_strided(k, shape, ptrs, quantize if kind == "quantize" else dequantize)
        k.finish()


from .generic_ir import F32  # noqa: E402


def F32_OF(dt: Any) -> ir.Type:  # noqa: N802 - the float a quantize reads its input as
    """``widen(x).astype(float32)``: every float input is read as f32 (an f64 input rounded)."""
    return F32


class Lut(Template):
    name = "generic.lut"

    def matches(self, op: Any, isa: Isa) -> bool:
        return op.name == "tpu.Lut" and _static(op.operands[0].type) and _static(op.results[0].type)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        from lamina.dialects.tpu.families.common import store

        table = store(np.asarray(op.properties["table"].to_numpy()), op.results[0].type)
        return _elementwise_plan(op, symbol, {"table": np.ascontiguousarray(table)})

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        from lamina.dialects.quant import QuantizedType

        k = Kernel(module, plan.symbol)
        a, out_t = op.operands[0].type, op.results[0].type
        shape = _shape(out_t)
        table = plan.weights["table"]
        ptrs = _operand_ptrs(k, op, shape, [(table, [0] * len(shape))])
        e = a.element_type
        assert isinstance(e, QuantizedType)
        base = 128 if e.signed else 0

        def body(b: ir.IRBuilder, ps: list[Any]) -> None:
            i = b.add(load_int(b, ps[0], _np(a)), const(base))
            b.store(b.load(b.gep(ps[1], [i])), ps[-1])

        emit_strided(k, shape, ptrs, body)
        k.finish()


# ---- data movement -----------------------------------------------------------------------------------

RESHAPES = ("tpu.Reshape", "tpu.Flatten", "tpu.Squeeze", "tpu.Unsqueeze")


def _same_storage(op: Any) -> bool:
    a = op.operands[0].type
    return all(_static(r.type) and _np(r.type) == _np(a) for r in op.results) and _static(a)


class Alias(Template):
    """A reshape of an arena tensor: the same bytes (the compiler gives the result its operand's
    offset; no code)."""

    name = "generic.alias"
    priority = 5
    alias = True

    def matches(self, op: Any, isa: Isa) -> bool:
        return op.name in RESHAPES and len(op.results) == 1 and _same_storage(op)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        return KernelPlan(symbol, [("in", 0), ("out", 0)])

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        raise AssertionError("an alias kernel has no code")


def _int_of(dt: np.dtype) -> ir.Type:
    return ir.IntType(8 * dt.itemsize)


class Gather(Template):
    """``out[i] = in[table[i]]`` for the data-movement ops (tables by running the op on indices)."""

    name = "generic.gather"

    def matches(self, op: Any, isa: Isa) -> bool:
        from lamina.dialects.tpu.families.movement import MOVE_OPS

        if not str(op.name).startswith("tpu.") or _short(op) not in MOVE_OPS or not op.operands:
            return False
        if not _same_storage(op) or not isinstance(op.operands[0].type, RankedTensorType):
            return False
        return all(
            value_constant(v) is not None or not isinstance(v.type, RankedTensorType) for v in op.operands[1:]
        )

    def _tables(self, op: Any) -> list[np.ndarray] | None:
        if op.name in RESHAPES:
            return None  # a plain copy
        n = int(np.prod(_shape(op.operands[0].type)))
        idx = np.arange(n, dtype=np.float64).reshape(_shape(op.operands[0].type))
        ins: list[Any] = [idx]
        for v in op.operands[1:]:
            ins.append(constant_array(v) if isinstance(v.type, RankedTensorType) else None)
        outs = op._top_fn()(ins)
        tables = []
        for o, r in zip(outs, op.results):
            t = np.asarray(o, np.float64)
            if (
                t.shape != tuple(_shape(r.type))
                or (t.size and (t.min() < 0 or t.max() >= n))
                or np.any(t != np.floor(t))
            ):
                raise ValueError(f"{op.name}: the reference does not move elements (result is not indices)")
            tables.append(np.ascontiguousarray(t.astype(np.int32 if n < 2**31 else np.int64)))
        return tables

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        tables = self._tables(op)
        bufs: list[tuple[str, Any]] = [("in", 0)]
        weights = {}
        if tables is not None:
            for j, t in enumerate(tables):
                weights[f"t{j}"] = t
                bufs.append(("weight", f"t{j}"))
        bufs += [("out", j) for j in range(len(op.results))]
        nb = sum(int(np.prod(_shape(r.type))) for r in op.results) * _np(op.operands[0].type).itemsize
        return KernelPlan(symbol, bufs, weights, bytes=2 * nb)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        dt = _np(op.operands[0].type)
        et = _int_of(dt)
        src = k.buf(0, et)
        b = k.b
        if not plan.weights:  # a reshape that must copy
            n = int(np.prod(_shape(op.operands[0].type)))
            dst = k.buf(1, et)
            emit_strided(k, [n], [(src, [1], 0), (dst, [1], 0)], lambda b, ps: b.store(b.load(ps[0]), ps[1]))
            k.finish()
            return
        nt = len(plan.weights)
        for j in range(nt):
            tab = plan.weights[f"t{j}"]
            tp = k.buf(1 + j, ir.IntType(8 * tab.dtype.itemsize))
            dst = k.buf(1 + nt + j, et)
            n = tab.size
            if n == 0:
                continue

            def body(b: ir.IRBuilder, ps: list[Any]) -> None:
                i = b.load(ps[0])
                i = b.sext(i, I64) if i.type != I64 else i
                b.store(b.load(b.gep(src, [i])), ps[1])

            emit_strided(k, [n], [(tp, [1], 0), (dst, [1], 0)], body)
        del b
        k.finish()


class Concat(Template):
    name = "generic.concat"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Concat" or len(op.results) != 1 or not _static(op.results[0].type):
            return False
        dt = _np(op.results[0].type)
        return all(_static(v.type) and _np(v.type) == dt for v in op.operands)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        return _elementwise_plan(op, symbol)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        out_t = op.results[0].type
        shape = _shape(out_t)
        axis = int(op.attr("axis")) % len(shape)
        et = _int_of(_np(out_t))
        ost = contiguous_strides(shape)
        dst = k.buf(len(op.operands), et)
        at = 0
        for j, v in enumerate(op.operands):
            s = _shape(v.type)
            src = k.buf(j, et)
            emit_strided(
                k,
                s,
                [(src, contiguous_strides(s), 0), (dst, ost, at * ost[axis])],
                lambda b, ps: b.store(b.load(ps[0]), ps[1]),
            )
            at += s[axis]
        k.finish()


_ICMP = {
    "Equal": "==",
    "NotEqual": "!=",
    "Greater": ">",
    "GreaterOrEqual": ">=",
    "Less": "<",
    "LessOrEqual": "<=",
}


def _numeric(t: Any) -> bool:
    return (
        isinstance(t, RankedTensorType)
        and _static(t)
        and not _quant(t)
        and (_is_float(t) or _np(t).kind in "iub")
    )


class Compare(Template):
    """``tpu.Compare`` (a boolean result; floats compared as f64 — NaN unequal to everything —,
    integers as i64; And/Or/Xor on nonzero-ness) with broadcasting."""

    name = "generic.compare"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Compare" or not all(_numeric(v.type) for v in op.operands):
            return False
        return _np(op.results[0].type).kind == "b" and _static(op.results[0].type)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        return _elementwise_plan(op, symbol)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        shape = _shape(op.results[0].type)
        dts = [_np(v.type) for v in op.operands]
        ints = all(d.kind in "iub" for d in dts)
        mode = str(op.attr("mode"))
        ptrs = _operand_ptrs(k, op, shape)

        def body(b: ir.IRBuilder, ps: list[Any]) -> None:
            if mode in ("And", "Or", "Xor"):
                xs = [
                    b.icmp_signed("!=", load_int(b, p, d), const(0))
                    if d.kind in "iub"
                    else b.fcmp_unordered("une", load_float(b, p, d, F64), fconst(0.0, F64))
                    for p, d in zip(ps[:2], dts)
                ]
                r = {"And": b.and_, "Or": b.or_, "Xor": b.xor}[mode](xs[0], xs[1])
            elif ints:
                x, y = (load_int(b, p, d) for p, d in zip(ps[:2], dts))
                unsigned = all(d.kind in "ub" for d in dts)
                r = (b.icmp_unsigned if unsigned else b.icmp_signed)(_ICMP[mode], x, y)
            else:
                x, y = (load_float(b, p, d, F64) for p, d in zip(ps[:2], dts))
                r = b.fcmp_unordered("!=", x, y) if mode == "NotEqual" else b.fcmp_ordered(_ICMP[mode], x, y)
            b.store(b.zext(r, storage_type(np.dtype(bool))), ps[-1])

        emit_strided(k, shape, ptrs, body)
        k.finish()


class Where(Template):
    """``tpu.Where``: ``cond ? x : y`` with broadcasting, the values copied bit for bit (x, y and the
    result of one storage type)."""

    name = "generic.where"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Where" or not all(_numeric(v.type) or _quant(v.type) for v in op.operands):
            return False
        r = op.results[0].type
        return _static(r) and _np(op.operands[1].type) == _np(op.operands[2].type) == _np(r)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        return _elementwise_plan(op, symbol)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        shape = _shape(op.results[0].type)
        cdt = _np(op.operands[0].type)
        et = _int_of(_np(op.results[0].type))
        ptrs = _operand_ptrs(k, op, shape)

        def body(b: ir.IRBuilder, ps: list[Any]) -> None:
            c = (
                b.icmp_signed("!=", load_int(b, ps[0], cdt), const(0))
                if cdt.kind in "iub"
                else b.fcmp_unordered("une", load_float(b, ps[0], cdt, F64), fconst(0.0, F64))
            )
            x, y = (b.load(b.bitcast(p, et.as_pointer())) for p in ps[1:3])
            b.store(b.select(c, x, y), b.bitcast(ps[-1], et.as_pointer()))

        emit_strided(k, shape, ptrs, body)
        k.finish()


class GatherIndices(Template):
    """``tpu.Gather`` along an axis with computed (or constant) indices: each index (negative ones
    counted from the end; out-of-range ones clamped, never read outside the tensor) selects a slice,
    copied bit for bit."""

    name = "generic.gather_indices"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Gather" or len(op.operands) != 2:
            return False
        x, idx, r = op.operands[0].type, op.operands[1].type, op.results[0].type
        if not (_static(x) and _static(r) and isinstance(idx, RankedTensorType) and _static(idx)):
            return False
        return _np(idx).kind in "iu" and _np(x) == _np(r) and len(x.shape) > 0

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        return KernelPlan(
            symbol,
            [("in", 0), ("in", 1), ("out", 0)],
            bytes=2 * int(np.prod(_shape(op.results[0].type))) * _np(op.results[0].type).itemsize,
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        xs = _shape(op.operands[0].type)
        ax = int(op.attr("axis")) % len(xs)
        outer, dim, inner = math.prod(xs[:ax]), xs[ax], math.prod(xs[ax + 1 :])
        nidx = int(np.prod(_shape(op.operands[1].type)))
        et = _int_of(_np(op.results[0].type))
        idt = _np(op.operands[1].type)
        k = Kernel(module, plan.symbol)
        b = k.b
        x, ip, out = k.buf(0, et), k.buf(1, storage_type(idt)), k.buf(2, et)
        lo, hi = k.share(outer * nidx)
        with k.loop(lo, hi, "row") as row:
            o = b.udiv(row, const(nidx))
            j = b.urem(row, const(nidx))
            i = load_int(b, b.gep(ip, [j]), idt)
            i = b.select(b.icmp_signed("<", i, const(0)), b.add(i, const(dim)), i)
            i = clamp_i64(b, i, 0, dim - 1)
            src = b.gep(x, [b.mul(b.add(b.mul(o, const(dim)), i), const(inner))])
            dst = b.gep(out, [b.mul(row, const(inner))])
            with k.loop(0, inner, "t") as t:
                b.store(b.load(b.gep(src, [t])), b.gep(dst, [t]))
        k.finish()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [
    FloatElementwise(),
    IntElementwise(),
    Requant(),
    Cast(),
    Lut(),
    Alias(),
    Gather(),
    Concat(),
    Compare(),
    Where(),
    GatherIndices(),
]

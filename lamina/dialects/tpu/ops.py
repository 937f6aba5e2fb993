"""The ``tpu`` ops. Quantization is explicit in the types; each op's ``execute`` is the bit-exact
reference (see ``docs/tpu.md`` and :mod:`.quantize`).

Every ``top`` op has a ``tpu`` counterpart of the same name (``top.Softmax`` → ``tpu.Softmax``): a
subclass of the ``top`` class (same operands, results and properties — the subclass adds
properties only, so the shared field descriptors stay valid for both classes) whose execution is
the *float mode*: float16/bfloat16 operands are widened to float32, the ``top`` reference computes
in float32, and float results are rounded to their element type (f16/bf16 round to nearest even).

Ops with an INT8 form (:data:`INT8_OPS`) execute in integer arithmetic when their operands are
quantized (``!quant.uniform`` element types): Conv, MatMul, Add, Sub, Mul, MaxPool, AvgPool,
Reduce (mean/max/min), Concat and the data-movement ops (Reshape, Flatten, Squeeze, Unsqueeze,
Permute, Slice, Split, Interp nearest, Tile, Expand, DepthToSpace, SpaceToDepth). Plus three ops of
its own: ``tpu.Cast`` (quantize / dequantize / float rounding), ``tpu.Requant`` (integer rescale
between two quantized types) and ``tpu.Lut`` (256-entry table), and ``tpu.Weight`` (a constant of a
quantized type whose value holds the storage integers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.quant import QuantizedType, UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.top import ALL_OPS, TopOp
from lamina.dialects.top import elementwise as top_ew
from lamina.dialects.top import nn as top_nn
from lamina.dialects.top import reduce as top_reduce
from lamina.dialects.top import tensor as top_tensor
from lamina.dialects.top.base import AnyTensor, ElementsAttrC, I64ArrayAttr, I64Attr, StrAttr, elem_of
from lamina.dialects.top.elementwise import CastOp as TopCastOp
from lamina.execution.kernels.conv import ConvPlan
from lamina.execution.kernels.geometry import conv_pads
from lamina.ir.attributes import DenseElementsAttr, element_type_to_dtype
from lamina.ir.constraints import AnyOf
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.traits import ConstantLike, NotALayer, Pure
from lamina.ir.types import FloatType, IntegerType, RankedTensorType, ShapedType, Type

from .quantize import (
    dequantize,
    lut_index,
    qparams,
    quantize,
    requantize,
    round_float,
    round_half_away,
    storage_dtype,
    wrap_int32,
    zero_point_of,
)


def is_quant(t: Type) -> bool:
    """Whether ``t`` (or its element type) is a uniform quantized type (calibrated types are not)."""
    return isinstance(elem_of(t), (UniformQuantizedType, UniformQuantizedPerAxisType))


def _widen(x: Any) -> Any:
    """f16/bf16 arrays → float32 (exact); anything else unchanged."""
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.dtype.itemsize == 2:
        return x.astype(np.float32)
    if isinstance(x, np.ndarray) and x.dtype.kind == "V":  # bfloat16 is a void-kind dtype
        return x.astype(np.float32)
    if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":
        return x.astype(np.float32)
    return x


class TpuOp(TopOp):
    """Mixin behaviour of every ``tpu`` op derived from a ``top`` op: float-mode execution
    (widen to f32, run the ``top`` reference, round to the result types) unless the op's
    :meth:`int_executor` applies (some operand is quantized)."""

    #: the ``top`` class this op derives from (None for ops of the tpu dialect's own)
    top_class: type[TopOp] | None = None
    fresh_results = False

    def _top_fn(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        tc = self.top_class
        assert tc is not None
        if tc.executor is TopOp.executor:
            return lambda ins: tc.execute(self, ins)
        return tc.executor(self)

    def int_executor(self) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
        return None

    def executor(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        if any(is_quant(v.type) for v in self.operands):
            fn = self.int_executor()
            if fn is None:
                raise NotImplementedError(f"'{self.name}' has no integer execution")
            return fn
        base = self._top_fn()
        rtypes = [r.type for r in self.results]

        def run(ins: Sequence[Any]) -> list[Any]:
            outs = base([_widen(x) for x in ins])
            return [
                o if o is None or not isinstance(o, np.ndarray) else round_float(o, t)
                for o, t in zip(outs, rtypes)
            ]

        return run

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        # Never through self.executor(): the top executors call self.execute as their fallback.
        if any(is_quant(v.type) for v in self.operands):
            return list(self.executor()(inputs))
        tc = self.top_class
        assert tc is not None
        outs = tc.execute(self, [_widen(x) for x in inputs])
        return [
            o if o is None or not isinstance(o, np.ndarray) else round_float(o, r.type)
            for o, r in zip(outs, self.results)
        ]

    def inplace_executor(self, operand_index: int) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
        return None

    def execute_regions(self, inputs: Sequence[Any], runners: Any) -> list[Any]:
        tc = self.top_class
        return tc.execute_regions(self, inputs, runners)  # type: ignore[union-attr]

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        from .transforms.canonicalize import tpu_patterns_for

        return tpu_patterns_for(cls.name)


def _derive(top_cls: type[TopOp], body: dict[str, Any] | None = None) -> type[TpuOp]:
    short = top_cls.name.split(".", 1)[1]
    ns: dict[str, Any] = {
        "name": "tpu." + short,
        "top_class": top_cls,
        "__doc__": f"``{top_cls.name}`` in the tpu dialect (float mode: compute in f32, round results).",
        "__module__": __name__,
    }
    if getattr(top_cls, "execute_regions", None) is None:
        ns["execute_regions"] = None
    ns.update(body or {})
    return type(top_cls.__name__, (TpuOp, top_cls), ns)  # type: ignore[return-value]


# ---- shared integer helpers ---------------------------------------------------------------------


def _zp(t: Type) -> int:
    return zero_point_of(t)


def _axis(t: Type) -> int | None:
    """The channel axis of a per-axis quantized type, else None."""
    return qparams(t)[2] if is_quant(t) else None


def _along(a: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A 1-d per-channel array shaped to broadcast along ``axis`` of an ``ndim``-d tensor."""
    shape = [1] * ndim
    shape[axis] = -1
    return a.reshape(shape)


def _bounds(t: Type) -> tuple[int, int]:
    e = elem_of(t)
    return e.storage_min, e.storage_max  # type: ignore[attr-defined]


def _store(y: np.ndarray, t: Type) -> np.ndarray:
    return y.astype(storage_dtype(elem_of(t)))  # type: ignore[arg-type]


def _centered(x: np.ndarray, t: Type) -> np.ndarray:
    """storage - zero_point as float64 (exact: |values| < 2**17)."""
    return np.asarray(x, dtype=np.float64) - float(_zp(t))


def _acc_int32(acc_f64: np.ndarray) -> np.ndarray:
    """An exactly integer-valued float64 accumulator as the int32 register (two's-complement wrap)."""
    return wrap_int32(np.rint(acc_f64).astype(np.int64))


def _relu_clamp(y: np.ndarray, op: Any, out_t: Type) -> np.ndarray:
    """``do_relu``: clamp below at the output zero point; ``relu_limit > 0``: also above at
    ``zp + round_half_away(relu_limit / scale)``."""
    if not op.attr("do_relu"):
        return y
    zp = _zp(out_t)
    y = np.maximum(y, zp)
    limit = op.attr("relu_limit")
    if limit is not None and limit > 0:
        scale = float(qparams(out_t)[0])
        y = np.minimum(y, zp + int(round_half_away(np.float64(limit / scale))))
    return y


def _mult_props(op: Any) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(op.attr("multiplier"), dtype=np.int64)
    s = np.asarray(op.attr("rshift"), dtype=np.int64)
    return m, s


# ---- INT8 compute ops ----------------------------------------------------------------------------


class _QuantProps:
    multiplier = prop(I64ArrayAttr, optional=True)
    rshift = prop(I64ArrayAttr, optional=True)


def _conv_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    attrs = (
        self.attr("kernel_shape"),
        self.attr("strides"),
        self.attr("dilations"),
        self.attr("pads"),
        self.attr("auto_pad"),
    )
    g = self.attr("group")
    in_t, w_t, out_t = self.input.type, self.filter.type, self.output.type
    m, s = _mult_props(self)
    lo, hi = _bounds(out_t)
    zp_out = _zp(out_t)
    w_zp = qparams(w_t)[1]
    cache: dict[Any, Any] = {}

    def run(ins: Sequence[Any]) -> list[Any]:
        x, w, b = ins
        xf = _centered(x, in_t)
        wf = np.asarray(w, dtype=np.float64) - (
            w_zp.reshape((-1,) + (1,) * (w.ndim - 1)) if np.ndim(w_zp) else float(w_zp)
        )
        key = (xf.shape, wf.shape)
        plan = cache.get(key)
        if plan is None:
            nd = wf.ndim - 2
            ks, st, dl, pads, auto = attrs
            k = list(ks or wf.shape[2:])
            sv = list(st or [1] * nd)
            d = list(dl or [1] * nd)
            p = conv_pads(auto, xf.shape[2:], k, sv, d, pads)
            plan = cache[key] = ConvPlan((k, sv, d, p), xf, wf, g)
        acc = _acc_int32(plan.run(xf, wf, None, False))
        if b is not None:
            acc = wrap_int32(
                acc.astype(np.int64) + np.asarray(b, np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
            )
        y = requantize(acc, m if m.size > 1 else m[0], s if s.size > 1 else s[0], zp_out, lo, hi, axis=1)
        return [_store(_relu_clamp(y, self, out_t), out_t)]

    return run


ConvOp = _derive(
    top_nn.ConvOp,
    {"multiplier": _QuantProps.multiplier, "rshift": _QuantProps.rshift, "int_executor": _conv_int},
)


def _matmul_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    a_t, b_t, out_t = self.input.type, self.right.type, self.output.type
    m, s = _mult_props(self)
    lo, hi = _bounds(out_t)
    zp_out = _zp(out_t)
    _b_scales, b_zp, b_axis, _, _ = qparams(b_t)

    def run(ins: Sequence[Any]) -> list[Any]:
        a, b, bias = ins
        af = _centered(a, a_t)
        bf = np.asarray(b, dtype=np.float64)
        if b_axis is None:
            bf = bf - float(b_zp)
        else:
            shape = [1] * bf.ndim
            shape[b_axis] = -1
            bf = bf - b_zp.reshape(shape)
        acc = _acc_int32(np.matmul(af, bf))
        if bias is not None:
            acc = wrap_int32(acc.astype(np.int64) + np.asarray(bias, np.int64))
        per = m.size > 1
        y = requantize(
            acc, m if per else m[0], s if per else s[0], zp_out, lo, hi, axis=acc.ndim - 1 if per else None
        )
        return [_store(_relu_clamp(y, self, out_t), out_t)]

    return run


MatMulOp = _derive(
    top_nn.MatMulOp,
    {"multiplier": _QuantProps.multiplier, "rshift": _QuantProps.rshift, "int_executor": _matmul_int},
)


def _linear_int(self: Any, signs: Sequence[int]) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """Add/Sub: ``y = sat(zp + rdiv(sum_i sign_i * (q_i - zp_i) * multiplier_i, 2**(31 + rshift)))``.

    Per channel (``rshift`` has one entry per channel ``c`` of the channel axis — the result's if it
    is per-axis, else the per-axis input's): ``multiplier`` holds ``n_inputs x C`` values, input-major,
    and channel ``c`` uses ``multiplier[i * C + c]`` and ``rshift[c]``."""
    in_ts = [v.type for v in self.operands]
    out_t = self.output.type
    m, s = _mult_props(self)
    lo, hi = _bounds(out_t)
    zp_out = _zp(out_t)
    nd = len(out_t.shape)
    axis = _axis(out_t)
    if axis is None:
        for t in in_ts:
            a = _axis(t)
            if a is not None:
                axis = a + nd - len(t.shape)
                break
    per = s.size > 1 or (axis is not None and m.size > len(in_ts))
    from .quantize import rounding_rshift

    if per:
        c = s.size
        ms = [_along(m[i * c : (i + 1) * c], nd, axis) for i in range(len(in_ts))]  # type: ignore[arg-type]
        shift = _along(31 + s, nd, axis)  # type: ignore[arg-type]
    else:
        ms = [int(x) for x in m]
        shift = 31 + int(s[0])

    def run(ins: Sequence[Any]) -> list[Any]:
        acc: Any = np.int64(0)
        for i, (x, t) in enumerate(zip(ins, in_ts)):
            acc = acc + (np.asarray(x, np.int64) - _zp(t)) * (int(signs[i]) * ms[i])
        acc = np.broadcast_to(np.asarray(acc, np.int64), out_t.shape)
        y = np.clip(rounding_rshift(acc, shift) + zp_out, lo, hi)
        return [_store(y, out_t)]

    return run


def _linear_verifier(top_cls: type[TopOp]) -> Callable[[Any], None]:
    def verify_(self: Any) -> None:
        top_cls.verify_(self)
        m, s = self.attr("multiplier"), self.attr("rshift")
        if m is None or s is None:
            return
        n, nm, ns = len(self.operands), len(m), len(s)
        if ns == 1 and nm == n:
            return
        if ns < 1 or nm != n * ns:
            raise VerifyError(
                f"expected {n} multipliers and 1 rshift, or {n} x C multipliers and C rshifts "
                f"(per channel), got {nm} and {ns}"
            )

    return verify_


AddOp = _derive(
    top_ew.AddOp,
    {
        "multiplier": _QuantProps.multiplier,
        "rshift": _QuantProps.rshift,
        "int_executor": lambda self: _linear_int(self, [1] * len(self.operands)),
        "verify_": _linear_verifier(top_ew.AddOp),
    },
)
SubOp = _derive(
    top_ew.SubOp,
    {
        "multiplier": _QuantProps.multiplier,
        "rshift": _QuantProps.rshift,
        "int_executor": lambda self: _linear_int(self, [1, -1]),
        "verify_": _linear_verifier(top_ew.SubOp),
    },
)


def _mul_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    in_ts = [v.type for v in self.operands]
    out_t = self.output.type
    m, s = _mult_props(self)
    lo, hi = _bounds(out_t)
    zp_out = _zp(out_t)

    def run(ins: Sequence[Any]) -> list[Any]:
        prod: Any = np.int64(1)
        for x, t in zip(ins, in_ts):
            prod = prod * (np.asarray(x, np.int64) - _zp(t))
        return [_store(requantize(prod, int(m[0]), int(s[0]), zp_out, lo, hi), out_t)]

    return run


MulOp = _derive(
    top_ew.MulOp,
    {"multiplier": _QuantProps.multiplier, "rshift": _QuantProps.rshift, "int_executor": _mul_int},
)


def _maxpool_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    base = self._top_fn()
    out_t = self.output.type

    def run(ins: Sequence[Any]) -> list[Any]:
        outs = base([np.asarray(ins[0], np.float64)])
        return [_store(outs[0], out_t), *outs[1:]]

    return run


MaxPoolOp = _derive(top_nn.MaxPoolOp, {"int_executor": _maxpool_int})


def _avgpool_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """Window sums of ``q - zp`` (padding contributes 0) in int64, requantized by
    ``multiplier/rshift`` (which encode ``s_in / (s_out * window_size)``)."""
    in_t, out_t = self.input.type, self.output.type
    m, s = _mult_props(self)
    lo, hi = _bounds(out_t)
    zp_out = _zp(out_t)
    k = list(self.attr("kernel_shape"))
    nd = len(k)
    st = list(self.attr("strides") or [1] * nd)
    pads = list(self.attr("pads") or [0] * (2 * nd))

    def run(ins: Sequence[Any]) -> list[Any]:
        x = np.asarray(ins[0], np.int64) - _zp(in_t)
        x = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd]) for i in range(nd)])
        win = np.lib.stride_tricks.sliding_window_view(x, k, axis=tuple(range(2, 2 + nd)))
        win = win[(slice(None), slice(None), *[slice(None, None, t) for t in st])]
        acc = win.sum(axis=tuple(range(-nd, 0)))
        return [_store(requantize(wrap_int32(acc), int(m[0]), int(s[0]), zp_out, lo, hi), out_t)]

    return run


AvgPoolOp = _derive(
    top_nn.AvgPoolOp,
    {"multiplier": _QuantProps.multiplier, "rshift": _QuantProps.rshift, "int_executor": _avgpool_int},
)


def _reduce_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """ReduceMean: int64 sum of ``q - zp`` requantized (multiplier encodes ``s_in/(s_out*N)``);
    ReduceMax/ReduceMin: on the storage integers (the output type is the input type)."""
    in_t, out_t = self.input.type, self.output.type
    mode = self.attr("mode")
    keep = bool(self.attr("keepdims"))
    m, s = _mult_props(self) if self.attr("multiplier") is not None else (None, None)
    lo, hi = _bounds(out_t)
    zp_out = _zp(out_t)

    def run(ins: Sequence[Any]) -> list[Any]:
        x, axes = ins
        ax = tuple(int(a) for a in np.asarray(axes).reshape(-1)) if axes is not None else None
        if mode == "ReduceMean":
            acc = (np.asarray(x, np.int64) - _zp(in_t)).sum(axis=ax, keepdims=keep)
            return [_store(requantize(wrap_int32(acc), int(m[0]), int(s[0]), zp_out, lo, hi), out_t)]  # type: ignore[index]
        fn = np.max if mode == "ReduceMax" else np.min
        return [_store(fn(np.asarray(x), axis=ax, keepdims=keep), out_t)]

    return run


ReduceOp = _derive(
    top_reduce.ReduceOp,
    {"multiplier": _QuantProps.multiplier, "rshift": _QuantProps.rshift, "int_executor": _reduce_int},
)


def _move_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    """Data movement on storage integers: the ``top`` reference applied to them unchanged (result
    types equal the input's quantized type); float64 carries the integers exactly where the
    reference needs a float (padding with -inf, interpolation indices)."""
    base = self._top_fn()
    rtypes = [r.type for r in self.results]

    def run(ins: Sequence[Any]) -> list[Any]:
        outs = base([np.asarray(x, np.float64) if i == 0 else x for i, x in enumerate(ins)])
        return [o if not is_quant(t) else _store(np.asarray(o), t) for o, t in zip(outs, rtypes)]

    return run


def _concat_int(self: Any) -> Callable[[Sequence[Any]], Sequence[Any]]:
    out_t = self.output.type
    axis = self.attr("axis")

    def run(ins: Sequence[Any]) -> list[Any]:
        return [_store(np.concatenate([np.asarray(x) for x in ins], axis=axis), out_t)]

    return run


ConcatOp = _derive(top_tensor.ConcatOp, {"int_executor": _concat_int})

#: top op names whose tpu op moves data only (INT8: same quantized type in and out)
MOVE_OPS = (
    "Reshape",
    "Flatten",
    "Squeeze",
    "Unsqueeze",
    "Permute",
    "Slice",
    "Split",
    "Interp",
    "Tile",
    "Expand",
    "DepthToSpace",
    "SpaceToDepth",
)

# ---- ops of the tpu dialect's own ---------------------------------------------------------------


class _OwnOp(TopOp):
    """tpu ops without a top counterpart (Cast, Requant, Lut, Weight)."""

    traits = (Pure(),)

    flops_per_element = 0  # data movement: no arithmetic


class CastOp(_OwnOp):
    """Converts between modes, by its types:

    * float → quantized: ``quantize`` (round half away from zero of ``x / scale``, + zp, saturate);
    * quantized → float: ``dequantize`` (``(q - zp) * scale`` in float64, rounded to float32, then
      to the result's float type);
    * float → float: through float32, rounding to nearest even to the result type;
    * anything else (integer ↔ float, integer ↔ integer, as ``top.Cast`` after lowering): exactly
      ``top.Cast``'s semantics, ``saturate`` included.

    It is the one ``tpu.Cast``: ``top.Cast`` lowers to it too (a second class of that name would
    make a printed and re-parsed module pick the wrong one).
    """

    name = "tpu.Cast"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    saturate = prop(I64Attr, optional=True)

    def verify_(self) -> None:
        a, b = self.input.type, self.output.type
        if is_quant(a) and is_quant(b):
            raise VerifyError("quantized to quantized casts are tpu.Requant")
        ranked = isinstance(a, ShapedType) and isinstance(b, ShapedType) and a.has_rank and b.has_rank
        if ranked and a.shape != b.shape:
            raise VerifyError(f"input shape {list(a.shape)} and result shape {list(b.shape)} differ")

    def infer_shapes(self) -> list[Type]:
        return [self.output.type]

    def executor(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        a, b = self.input.type, self.output.type
        if is_quant(b):
            return lambda ins: [quantize(_widen(ins[0]).astype(np.float32), b)]
        if is_quant(a):
            return lambda ins: [round_float(dequantize(ins[0], a), b)]
        if isinstance(getattr(a, "element_type", a), FloatType) and isinstance(
            getattr(b, "element_type", b), FloatType
        ):
            return lambda ins: [round_float(_widen(ins[0]), b)]
        return lambda ins: TopCastOp.execute(self, ins)  # type: ignore[arg-type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return list(self.executor()(inputs))


class RequantOp(_OwnOp):
    """Integer rescale between two quantized types:
    ``y = sat(zp_out + rdiv((q - zp_in) * multiplier, 2**(31 + rshift)))``. Between a per-axis type
    and another type, ``multiplier`` and ``rshift`` are arrays with one entry per channel of the
    per-axis type's axis (the result's if both are per-axis, which must share it)."""

    name = "tpu.Requant"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    multiplier = prop(AnyOf(I64Attr, I64ArrayAttr))
    rshift = prop(AnyOf(I64Attr, I64ArrayAttr))

    def verify_(self) -> None:
        a, b = self.input.type, self.output.type
        if not (is_quant(a) and is_quant(b)):
            raise VerifyError("input and result must be quantized")
        m, s = self.attr("multiplier"), self.attr("rshift")
        nm, ns = np.size(m), np.size(s)
        axis = _axis(b) if _axis(b) is not None else _axis(a)
        if axis is None:
            if nm != 1 or ns != 1:
                raise VerifyError("a per-tensor requant has one multiplier and one rshift")
        else:
            c = (b if _axis(b) is not None else a).shape[axis]  # type: ignore[attr-defined]
            if nm != c or ns != c:
                raise VerifyError(
                    f"expected {c} multipliers and rshifts (one per channel), got {nm} and {ns}"
                )

    def infer_shapes(self) -> list[Type]:
        return [self.output.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        a, b = self.input.type, self.output.type
        lo, hi = _bounds(b)
        x = np.asarray(inputs[0], np.int64) - _zp(a)
        m = np.asarray(self.attr("multiplier"), np.int64).reshape(-1)
        s = np.asarray(self.attr("rshift"), np.int64).reshape(-1)
        axis = _axis(b) if _axis(b) is not None else _axis(a)
        if axis is None:
            return [_store(requantize(x, int(m[0]), int(s[0]), _zp(b), lo, hi), b)]
        return [_store(requantize(x, m, s, _zp(b), lo, hi, axis=axis), b)]


class LutOp(_OwnOp):
    """``y = table[q - storage_base]`` for 8-bit quantized input (``storage_base`` -128 for int8,
    0 for uint8); ``table`` is 256 storage values of the result type, computed at lowering from
    ``fn`` (the activation it implements, for reading) as
    ``quantize(fn(dequantize(v)))`` in float64."""

    name = "tpu.Lut"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    table = prop(ElementsAttrC)
    fn = prop(StrAttr, optional=True)

    def verify_(self) -> None:
        it, ot = elem_of(self.input.type), elem_of(self.output.type)
        if not (isinstance(it, QuantizedType) and it.storage_width == 8):
            raise VerifyError("input must be an 8-bit quantized tensor")
        if not isinstance(ot, QuantizedType):
            raise VerifyError("result must be quantized")
        t = self.properties["table"].type
        if not isinstance(t, ShapedType) or t.shape != (256,):
            raise VerifyError("table must have 256 entries")

    def infer_shapes(self) -> list[Type]:
        return [self.output.type]

    def executor(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        table = np.asarray(self.properties["table"].to_numpy())
        out_t = self.output.type
        table = _store(table, out_t)
        signed = bool(elem_of(self.input.type).signed)  # type: ignore[attr-defined]
        return lambda ins: [table[lut_index(ins[0], signed)]]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return list(self.executor()(inputs))


class WeightOp(_OwnOp):
    """A constant of a quantized type: ``value`` holds the storage integers (element type the
    storage integer type, same shape as the result)."""

    name = "tpu.Weight"
    traits = (Pure(), ConstantLike(), NotALayer())
    output = result_def(AnyTensor)
    value = prop(ElementsAttrC)

    def verify_(self) -> None:
        v = self.properties["value"].type
        r = self.output.type
        if not is_quant(r):
            raise VerifyError("result must be quantized (plain constants are top.Weight)")
        e = elem_of(r)
        if not isinstance(v, ShapedType) or v.shape != r.shape:  # type: ignore[attr-defined]
            raise VerifyError(f"value type '{v}' does not match result type '{r}'")
        ve = v.element_type
        if not isinstance(ve, IntegerType) or ve.width != e.storage_width:  # type: ignore[attr-defined]
            raise VerifyError(f"value element type '{ve}' is not the storage type of '{e}'")

    def infer_shapes(self) -> list[Type]:
        return [self.output.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        a = self.properties["value"].to_numpy()
        return [a.astype(storage_dtype(elem_of(self.output.type)), copy=False)]  # type: ignore[arg-type]

    def constant_value(self) -> Any:
        return self.properties["value"]


def lut_table_attr(table: np.ndarray) -> DenseElementsAttr:
    return DenseElementsAttr.from_numpy(np.ascontiguousarray(table))


# ---- the op list --------------------------------------------------------------------------------

_HAND = {
    c.top_class.name: c
    for c in (ConvOp, MatMulOp, AddOp, SubOp, MulOp, MaxPoolOp, AvgPoolOp, ReduceOp, ConcatOp)
}  # type: ignore[union-attr]
_SKIP = {"top.Input", "top.Weight", "top.None", "top.Yield"}

DERIVED: dict[str, type[TpuOp]] = {}
for _cls in ALL_OPS:
    if _cls.name in _SKIP:
        continue
    if _cls.name in _HAND:
        DERIVED[_cls.name] = _HAND[_cls.name]
    elif _cls.name.split(".", 1)[1] in MOVE_OPS:
        DERIVED[_cls.name] = _derive(_cls, {"int_executor": _move_int})
    else:
        DERIVED[_cls.name] = _derive(_cls)

#: top op name → the tpu op class with an integer execution
INT8_OPS: frozenset[str] = frozenset(
    [c.top_class.name for c in _HAND.values()] + [f"top.{n}" for n in MOVE_OPS]  # type: ignore[union-attr]
)

# top.Cast lowers to the own tpu.Cast (which carries its semantics), not to a derived class.
DERIVED["top.Cast"] = CastOp  # type: ignore[assignment]

OWN_OPS: list[type[TopOp]] = [CastOp, RequantOp, LutOp, WeightOp]
ALL_TPU_OPS: list[type[TopOp]] = [*OWN_OPS, *(c for c in DERIVED.values() if c not in OWN_OPS)]


def tpu_class(top_name: str) -> type[TpuOp] | None:
    """The tpu op class for a top op name."""
    return DERIVED.get(top_name)


def storage_of(t: Type) -> Type:
    """The storage integer tensor type of a quantized tensor type."""
    e = elem_of(t)
    st = IntegerType(e.storage_width, "" if e.signed else "u")  # type: ignore[attr-defined]
    return RankedTensorType(t.shape, st)  # type: ignore[attr-defined]


_ = (math, FloatType, UniformQuantizedType, element_type_to_dtype)

"""Quantization plumbing of the ``tpu`` dialect: ``tpu.Cast`` (quantize / dequantize / float
rounding), ``tpu.Requant`` (integer rescale between two quantized types) and ``tpu.Weight`` (a
constant of a quantized type whose value holds the storage integers). No ``top`` counterpart and no
lowering pattern of their own: the lowering creates them (:mod:`..lowering.state`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.top.base import AnyTensor, BoolProp, ElementsAttrC, I64ArrayAttr, I64Attr, elem_of
from lamina.dialects.top.elementwise import CastOp as TopCastOp
from lamina.ir.attributes import DenseArrayAttr, IntegerAttr
from lamina.ir.constraints import AnyOf
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.traits import ConstantLike, NotALayer, Pure, Trait
from lamina.ir.types import FloatType, IntegerType, RankedTensorType, ShapedType, Type, i64

from ..quantize import dequantize, quantize, requant_factors, requantize, round_float, storage_dtype
from .common import TpuOp, bounds, channel_axis, is_quant, store, widen, zp


class QuantCast(Trait):
    """Quantization plumbing: the op changes how a value is represented (float type, quantized
    type, scale), not what it means — ``tpu.Cast`` and ``tpu.Requant``. An unused one is dropped by
    the lowering's clean-up; a backend may fuse it into its producer or user."""


class PlumbingOp(TpuOp):
    """tpu ops without a top counterpart (Cast, Requant, Lut, Weight)."""

    traits = (Pure(),)

    flops_per_element = 0  # data movement: no arithmetic


class CastOp(PlumbingOp):
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
    traits = (Pure(), QuantCast())
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    saturate = prop(BoolProp, optional=True)

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
            return lambda ins: [quantize(widen(ins[0]).astype(np.float32), b)]
        if is_quant(a):
            return lambda ins: [round_float(dequantize(ins[0], a), b)]
        if isinstance(getattr(a, "element_type", a), FloatType) and isinstance(
            getattr(b, "element_type", b), FloatType
        ):
            return lambda ins: [round_float(widen(ins[0]), b)]
        return lambda ins: TopCastOp.execute(self, ins)  # type: ignore[arg-type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return list(self.executor()(inputs))


class RequantOp(PlumbingOp):
    """Integer rescale between two quantized types:
    ``y = sat(zp_out + rdiv((q - zp_in) * multiplier, 2**(31 + rshift)))``. Between a per-axis type
    and another type, ``multiplier`` and ``rshift`` are arrays with one entry per channel of the
    per-axis type's axis (the result's if both are per-axis, which must share it)."""

    name = "tpu.Requant"
    traits = (Pure(), QuantCast())
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    multiplier = prop(AnyOf(I64Attr, I64ArrayAttr))
    rshift = prop(AnyOf(I64Attr, I64ArrayAttr))

    def verify_(self) -> None:
        a, b = self.input.type, self.output.type
        if not (is_quant(a) and is_quant(b)):
            raise VerifyError("input and result must be quantized")
        ranked = isinstance(a, ShapedType) and isinstance(b, ShapedType) and a.has_rank and b.has_rank
        if ranked and a.shape != b.shape:
            raise VerifyError(f"input shape {list(a.shape)} and result shape {list(b.shape)} differ")
        m, s = self.multiplier, self.rshift
        nm, ns = np.size(m), np.size(s)
        axis = channel_axis(b) if channel_axis(b) is not None else channel_axis(a)
        if axis is None:
            if nm != 1 or ns != 1:
                raise VerifyError("a per-tensor requant has one multiplier and one rshift")
        else:
            c = (b if channel_axis(b) is not None else a).shape[axis]  # type: ignore[attr-defined]
            if nm != c or ns != c:
                raise VerifyError(
                    f"expected {c} multipliers and rshifts (one per channel), got {nm} and {ns}"
                )

    def infer_shapes(self) -> list[Type]:
        return [self.output.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        a, b = self.input.type, self.output.type
        lo, hi = bounds(b)
        x = np.asarray(inputs[0], np.int64) - zp(a)
        m = np.asarray(self.multiplier, np.int64).reshape(-1)
        s = np.asarray(self.rshift, np.int64).reshape(-1)
        axis = channel_axis(b) if channel_axis(b) is not None else channel_axis(a)
        if axis is None:
            return [store(requantize(x, int(m[0]), int(s[0]), zp(b), lo, hi), b)]
        return [store(requantize(x, m, s, zp(b), lo, hi, axis=axis), b)]


def make_requant(rewriter: Any, x: Any, out_t: Any, loc: Any) -> Any:
    """A ``tpu.Requant`` of ``x`` to ``out_t`` (per-tensor or per-channel factors), or None when the
    two types cannot be rescaled into each other (per-axis types of different axes)."""
    try:
        ms, ss, axis = requant_factors(x.type, out_t)
    except ValueError:
        return None
    if axis is None:
        mult, sh = IntegerAttr(ms[0], i64), IntegerAttr(ss[0], i64)
    else:
        mult, sh = DenseArrayAttr(i64, ms), DenseArrayAttr(i64, ss)
    return rewriter.create(RequantOp, input=x, output=out_t, multiplier=mult, rshift=sh, loc=loc).results[0]


class WeightOp(PlumbingOp):
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


def storage_of(t: Type) -> Type:
    """The storage integer tensor type of a quantized tensor type."""
    e = elem_of(t)
    st = IntegerType(e.storage_width, "" if e.signed else "u")  # type: ignore[attr-defined]
    return RankedTensorType(t.shape, st)  # type: ignore[attr-defined]

"""The base of the per-family lowering patterns.

Each op family (:mod:`..families`) has one :class:`FamilyLowering` subclass rooted on the ``top``
op classes it converts (``roots``; the pass makes one instance per root, as the conversion driver
indexes patterns by root). An op lowers to its family's integer form when its mode is INT8, the
target runs the op in INT8 (:class:`~..capabilities.TargetCapabilities`) and the family's
:meth:`~FamilyLowering.lower_int8` succeeds; otherwise it runs in F32 (or its float mode) with casts
around it — a model never fails to lower.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from lamina.dialects.top.base import TopOp
from lamina.ir.core import Operation, Value
from lamina.ir.types import RankedTensorType, ShapedType, Type
from lamina.rewrite.conversion import ConversionPattern, ConversionPatternRewriter, TypeConverter

from ..families.common import is_quant
from ..families.plumbing import CastOp
from .policy import FLOAT_TYPES, elem, is_floatish, is_per_axis, plain, scales, symmetric_i8, with_elem

if TYPE_CHECKING:
    from .state import Lowering


#: a constant's own quantized range ``[lo, hi]`` (f64 array attribute on its ``top.Weight``): a
#: quantized model's constant, stored on that model's grid (the TFLite importer sets it)
QUANT_RANGE_ATTR = "lamina.quant_range"


def constant_qtype(orig: Value, t: RankedTensorType) -> Type | None:
    """The 8-bit type of a constant operand whose ``top.Weight`` names its model's range
    (:data:`QUANT_RANGE_ATTR`): that grid's scale and zero point, so that its values are kept
    exactly; None without the attribute."""
    from lamina.dialects.quant import CalibratedQuantizedType
    from lamina.ir.types import f32

    from .policy import quant_type_for

    d = orig.defining_op()
    rng = d.attributes.get(QUANT_RANGE_ATTR) if d is not None else None
    try:
        lo, hi = (float(a) for a in rng)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        return None
    if not lo <= 0.0 <= hi or hi <= lo:
        return None
    return RankedTensorType(t.shape, quant_type_for(CalibratedQuantizedType(f32, lo, hi), True))


class NoInt8(Exception):
    """This op has no INT8 form here: lower it in float."""


class FamilyLowering(ConversionPattern):
    """Lowers the ops of one family rooted at one ``top`` op class: the family's INT8 form when
    possible in INT8 mode, else float (F32/F16/BF16)."""

    #: the ``top`` op classes the family converts
    roots: ClassVar[tuple[type[TopOp], ...]] = ()

    def __init__(
        self,
        root: type[TopOp],
        tpu_op: type[Any],
        state: Lowering,
        type_converter: TypeConverter | None = None,
    ) -> None:
        super().__init__(type_converter)
        self.root = root
        self.tpu_op = tpu_op
        self.s = state

    def match_and_rewrite(self, op: Operation, operands: list[Value], rw: ConversionPatternRewriter) -> bool:
        ins = [rw.lookup(v) for v in op.operands]
        mode = self.s.mode_of(op)
        caps = self.s.capabilities
        if mode == "INT8":
            try:
                if caps.supports(op.name, "INT8") and self.lower_int8(op, ins, rw):
                    self.s.stats["int8"] += 1
                    return True
            except NoInt8:
                pass
            mode = caps.fallback_mode
        if not caps.supports(op.name, mode):
            mode = caps.fallback_mode
        self.lower_float(op, ins, rw, mode)
        self.s.stats["float"] += 1
        return True

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        """The family's integer form of ``op`` (raise :class:`NoInt8` where it has none)."""
        raise NoInt8

    # -- float --
    def lower_float(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter, mode: str) -> None:
        ft = FLOAT_TYPES[mode]
        new_ins = []
        for orig, v in zip(op.operands, ins):
            if isinstance(v.type, ShapedType) and (is_floatish(orig.type) or is_quant(v.type)):
                want = with_elem(v.type, ft)
                if is_floatish(v.type) and elem(plain(v.type)) is ft:
                    new_ins.append(v)
                    continue
                if self.s.weight_array(v) is not None and mode == "F32":
                    new_ins.append(v)
                    continue
                new_ins.append(self.s.cast(rw, v, want))
            else:
                new_ins.append(v)
        rtypes = [with_elem(r.type, ft) if is_floatish(r.type) else r.type for r in op.results]
        new = self.tpu_op.create(
            new_ins, rtypes, dict(op.properties), dict(op.attributes), 0, (), op.location
        )
        rw.insert(new)
        rw.replace_op(op, new.results)

    # -- int8 helpers --
    def qin(self, rw: ConversionPatternRewriter, orig: Value, v: Value, per_axis: bool = False) -> Value:
        """An activation operand as an 8-bit quantized value; per-tensor unless ``per_axis`` (the
        user can take per-channel scales), a per-channel value being requantized otherwise."""
        orig = rw.original(orig)
        if is_quant(v.type) and per_axis and orig in self.s.per_axis and not is_per_axis(v.type):
            d = v.defining_op()  # a cast the conversion materialized: quantize its float source
            if isinstance(d, CastOp) and is_floatish(d.operands[0].type):
                return self.s.cast(rw, d.operands[0], self.s.per_axis[orig])
        if is_quant(v.type):
            if is_per_axis(v.type) and not per_axis:
                t = self.s.qtype(orig, per_axis=False)
                if t is None or is_per_axis(t):
                    th = float(np.max(scales(v.type))) * 127.0
                    t = symmetric_i8(v.type.shape, th)  # type: ignore[attr-defined]
                return self.s.cast(rw, v, t)
            return v
        t = self.s.qtype(orig, per_axis=per_axis)
        if t is None:
            w = self.s.weight_array(v)
            if w is None or not isinstance(v.type, RankedTensorType):
                raise NoInt8
            t = constant_qtype(orig, v.type)
            if t is None:
                th = float(np.max(np.abs(w))) if w.size else 1.0
                t = symmetric_i8(v.type.shape, th or 1.0)
        return self.s.cast(rw, v, t)

    def qout(self, r: Value, per_axis: bool = False) -> Type:
        """The quantized type of result ``r`` (raise :class:`NoInt8` when it is not calibrated)."""
        t = self.s.qtype(r, per_axis=per_axis)
        if t is None:
            raise NoInt8
        if is_per_axis(t):
            self.s.stats["per_channel"] += 1
        return t

    def emit(
        self,
        op: Operation,
        rw: ConversionPatternRewriter,
        ins: list[Value],
        rtypes: list[Type],
        extra: dict[str, Any] | None = None,
    ) -> bool:
        """Replace ``op`` by its tpu op on ``ins`` with result types ``rtypes`` and the properties
        ``extra`` added to the top op's."""
        props = dict(op.properties)
        props.update(extra or {})
        new = self.tpu_op.create(ins, rtypes, props, dict(op.attributes), 0, (), op.location)
        rw.insert(new)
        rw.replace_op(op, new.results)
        return True

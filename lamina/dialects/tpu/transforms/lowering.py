"""``convert-top-to-tpu{mode=F32|F16|BF16|INT8 asymmetric=false qtable=FILE}``: lower ``top`` to
``tpu`` with the dialect conversion framework.

* The :class:`~lamina.rewrite.conversion.ConversionTarget` makes the ``top`` dialect illegal except
  the boundary ops (``top.Input``, ``top.Weight``, ``top.None``, ``top.Yield``), ops with regions
  and ops nested in them (control flow stays in ``top``, executed in float32).
* The :class:`~lamina.rewrite.conversion.TypeConverter` maps ``!quant.calibrated<f32<lo:hi>>``
  tensors to their ``!quant.uniform`` type (INT8) or to the mode's float type, and materializes
  ``tpu.Cast`` / ``tpu.Requant`` where a value's producer and user run in different modes.
* Each op's mode: its entry in the qtable (by location name), else ``mode``. In INT8, an op is
  lowered to integer form when it has one (:data:`~lamina.dialects.tpu.ops.INT8_OPS`, LUT-able
  elementwise activations) and its tensors are calibrated; otherwise it runs in F32 with casts
  around it — a model never fails to lower.

Quantized types: symmetric — ``lo < 0``: ``i8`` with ``scale = max(-lo, hi) / 127``; else ``u8``
with ``scale = hi / 255``; asymmetric (or a calibrated range not symmetric about 0) — ``i8`` with
``scale = (hi - lo) / 255`` and ``zp = round_half_away(-128 - lo / scale)``.

Per-channel activations: a value whose producer carries ``lamina.channel_th`` (outlier channels,
from the table's ``#channel_th``) gets ``!quant.uniform<i8:f32:axis, {th_c / 127, ...}>`` when its
producer and every user can carry per-channel scales (see :meth:`Lowering.plan_per_axis`): a
MatMul with a constant weight (output channels = the weight's columns; an input with per-channel
scales along K is folded into the weight, ``W'[k, n] = W[k, n] * s_x[k]``, then quantized per
column), Add/Sub (one multiplier per input and channel), float ops and function results (casts).
A Concat whose inputs' scales differ gets a per-axis result keeping every input's scale (no
requantization): YOLO heads concatenate box coordinates (hundreds) with scores (0..1).

Weights: per-channel symmetric int8 in [-127, 127] (``scale_c = max|w_c| / 127``); biases int32
``round_half_away(b / (s_in * s_w_c))``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lamina.dialects.quant import (
    CalibratedQuantizedType,
    UniformQuantizedPerAxisType,
    UniformQuantizedType,
)
from lamina.dialects.top import elementwise as top_ew
from lamina.dialects.top.transforms.utils import WeightFactory, derived_loc, loc_name, root_op
from lamina.execution.interpreter import result_names
from lamina.ir.attributes import DenseArrayAttr, FloatAttr, StringAttr, TypeAttr
from lamina.ir.core import Operation, Value
from lamina.ir.location import Location
from lamina.ir.types import (
    FloatType,
    FunctionType,
    IntegerType,
    NoneType,
    RankedTensorType,
    ShapedType,
    Type,
    f32,
    i64,
)
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.rewrite.conversion import (
    ConversionPattern,
    ConversionPatternRewriter,
    ConversionTarget,
    TypeConverter,
    apply_partial_conversion,
)

from ..ops import (
    INT8_OPS,
    CastOp,
    LutOp,
    WeightOp,
    is_quant,
    lut_table_attr,
    tpu_class,
)
from ..quantize import (
    build_lut,
    qparams,
    quantize,
    quantize_multiplier,
    round_half_away,
)
from .canonicalize import make_requant
from .import_calibration import CHANNEL_AXIS_ATTR, CHANNEL_TH_ATTR

MODES = ("F32", "F16", "BF16", "INT8")
_FLOAT = {"F32": f32, "F16": FloatType("f16"), "BF16": FloatType("bf16")}
_LEGAL_TOP = frozenset({"top.Input", "top.Weight", "top.None", "top.Yield"})
_LUT_EXTRA = frozenset({"top.SiLU", "top.GELU", "top.HardSigmoid", "top.HardSwish", "top.Swish"})


# ---- types ---------------------------------------------------------------------------------------


def quant_type_for(cal: CalibratedQuantizedType, asymmetric: bool) -> UniformQuantizedType:
    """The 8-bit uniform type of a calibrated range (see the module doc)."""
    lo, hi = float(cal.min), float(cal.max)
    et = cal.expressed_type
    if lo < 0 < hi and abs(hi + lo) > 1e-6 * max(hi, -lo):
        asymmetric = True  # a range not symmetric about 0 (an #asym_op of the table)
    if asymmetric:
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        scale = (hi - lo) / 255.0 if hi > lo else 1.0
        zp = int(round_half_away(np.float64(-128.0 - lo / scale)))
        return UniformQuantizedType(8, True, et, scale, max(-128, min(127, zp)))
    th = max(-lo, hi)
    if th <= 0:
        th = 1e-6
    if lo < 0:
        return UniformQuantizedType(8, True, et, th / 127.0, 0)
    return UniformQuantizedType(8, False, et, th / 255.0, 0)


def _elem(t: Type) -> Type:
    return t.element_type if isinstance(t, ShapedType) else t


def _with_elem(t: Type, e: Type) -> Type:
    if isinstance(t, RankedTensorType):
        return RankedTensorType(t.shape, e)
    return t


def _is_floatish(t: Type) -> bool:
    e = _elem(t)
    return isinstance(t, ShapedType) and isinstance(e, (FloatType, CalibratedQuantizedType))


def _plain(t: Type) -> Type:
    """Calibrated element types → their expressed type."""
    e = _elem(t)
    if isinstance(e, CalibratedQuantizedType):
        return _with_elem(t, e.expressed_type)
    return t


def make_type_converter(mode: str, asymmetric: bool) -> TypeConverter:
    tc = TypeConverter()
    tc.add_conversion(lambda t: t)

    def conv(t: Type) -> Any:
        e = _elem(t)
        if not isinstance(t, RankedTensorType):
            return None
        if isinstance(e, CalibratedQuantizedType):
            if mode == "INT8":
                return RankedTensorType(t.shape, quant_type_for(e, asymmetric))
            return RankedTensorType(t.shape, _FLOAT[mode])
        if isinstance(e, FloatType) and e is f32 and mode in ("F16", "BF16"):
            return RankedTensorType(t.shape, _FLOAT[mode])
        return None

    tc.add_conversion(conv)
    return tc


# ---- the lowering state --------------------------------------------------------------------------


class Lowering:
    """Per-run state: modes, weight factory and the casts made so far (one per value and type)."""

    def __init__(
        self,
        root: Operation,
        mode: str,
        asymmetric: bool,
        qtable: dict[str, str],
        resources: Any = None,
    ) -> None:
        self.mode = mode
        self.asymmetric = asymmetric
        self.qtable = qtable
        self.factory = WeightFactory(root_op(root), resources)
        self.casts: dict[tuple[Value, Type], Value] = {}
        self.stats = {"int8": 0, "float": 0, "casts": 0, "per_channel": 0}
        self.per_axis: dict[Value, Type] = self.plan_per_axis(root) if mode == "INT8" else {}

    # -- per-channel activations --
    def _int8_op(self, op: Operation) -> bool:
        return op.dialect_name == "top" and self.mode_of(op) == "INT8"

    def _float_op(self, op: Operation) -> bool:
        """Ops that surely run in float (their users see a float tensor, cast to any type)."""
        if op.name in ("top.Input", "func.return") or not self._int8_op(op):
            return True
        return op.name not in INT8_OPS and not _lutable(op)

    def _const_matrix(self, v: Value) -> bool:
        w = self.weight_array(v)
        return w is not None and w.ndim == 2

    def plan_per_axis(self, root: Operation) -> dict[Value, Type]:
        """The values that get per-channel quantized types: those with ``lamina.channel_th`` whose
        producer can produce and whose every user can consume per-channel scales along the axis
        (Add/Sub users only when their own result is per-channel), to a fixed point."""
        cand: dict[Value, tuple[int, RankedTensorType]] = {}
        for op in root.walk_ops():
            th = op.attributes.get(CHANNEL_TH_ATTR)
            ax = op.attributes.get(CHANNEL_AXIS_ATTR)
            if th is None or ax is None or not op.results or op.dialect_name != "top":
                continue
            v = op.results[0]
            e, t = _elem(v.type), v.type
            if not (isinstance(e, CalibratedQuantizedType) and isinstance(t, RankedTensorType)):
                continue
            axis = int(ax.value)
            nd = len(t.shape)
            arr = np.asarray(th.to_numpy(), np.float64).reshape(-1)
            if not (0 <= axis < nd) or t.shape[axis] != arr.size:
                continue
            if op.name == "top.MatMul":
                ok = (
                    self._int8_op(op)
                    and self._const_matrix(op.operands[1])
                    and axis == nd - 1
                    and not op.attr("do_relu")  # type: ignore[attr-defined]
                )
            elif op.name in ("top.Add", "top.Sub"):
                ok = self._int8_op(op) and len(op.operands) <= 2
            else:
                ok = self._float_op(op)
            if not ok:
                continue
            scales = np.where(arr > 0, arr, 1e-6) / 127.0
            qt = UniformQuantizedPerAxisType(
                8, True, e.expressed_type, [float(x) for x in scales], [0] * arr.size, axis, -128, 127
            )
            cand[v] = (axis, RankedTensorType(t.shape, qt))

        def user_ok(u: Operation, idx: int, v: Value, axis: int) -> bool:
            nd = len(v.type.shape)  # type: ignore[attr-defined]
            if u.name == "top.MatMul":
                if idx == 0 and self._int8_op(u) and self._const_matrix(u.operands[1]) and axis == nd - 1:
                    return True
            elif u.name in ("top.Add", "top.Sub") and self._int8_op(u):
                r = u.results[0]
                if r in cand and cand[r][0] == axis + len(r.type.shape) - nd:  # type: ignore[attr-defined]
                    return True
            return self._float_op(u)

        changed = True
        while changed:
            changed = False
            for v in list(cand):
                axis = cand[v][0]
                if not all(user_ok(u.owner, u.index, v, axis) for u in v.uses):
                    del cand[v]
                    changed = True
        return {v: t for v, (_, t) in cand.items()}

    # -- modes --
    def mode_of(self, op: Operation) -> str:
        name = loc_name(op.location) or ""
        m = self.qtable.get(name)
        if m is None:
            return self.mode
        m = m.upper()
        if m in ("INT8", "UINT8", "INT4"):
            return "INT8" if self.mode == "INT8" else self.mode
        return m if m in _FLOAT else self.mode

    # -- value conversion --
    def qtype(self, v: Value, per_axis: bool = True) -> Type | None:
        """The INT8 tensor type of an original value (from its calibrated type; its per-channel
        type when planned and ``per_axis``), or None."""
        if per_axis:
            pt = self.per_axis.get(v)
            if pt is not None:
                return pt
        e = _elem(v.type)
        if isinstance(e, CalibratedQuantizedType) and isinstance(v.type, RankedTensorType):
            return RankedTensorType(v.type.shape, quant_type_for(e, self.asymmetric))
        if is_quant(v.type):
            return v.type
        return None

    def cast(self, rw: ConversionPatternRewriter, v: Value, t: Type, loc: Location | None = None) -> Value:
        """``v`` as type ``t`` (a cached tpu.Cast / tpu.Requant, or a converted constant)."""
        if v.type is t or _plain(v.type) is t:
            return v
        key = (v, t)
        c = self.casts.get(key)
        if c is not None and c.defining_op() is not None and c.defining_op().parent is not None:
            return c
        w = self._const(rw, v, t)
        if w is not None:
            self.casts[key] = w
            return w
        e = _elem(t)
        suffix = (
            ("u8" if not e.signed else "i8") if is_quant(t) else str(_elem(_plain(t)))  # type: ignore[attr-defined]
        )
        src_loc = _value_loc(v) if v.defining_op() is not None or loc is None else loc
        nloc = derived_loc(src_loc, suffix)
        res = make_requant(rw, v, t, nloc) if is_quant(v.type) and is_quant(t) else None
        if res is None and is_quant(v.type) and is_quant(t):
            # per-axis types of different axes: through float (dequantize, then quantize)
            v = rw.create(CastOp, input=v, output=_with_elem(v.type, f32), loc=nloc).results[0]
        if res is None:
            res = rw.create(CastOp, input=v, output=t, loc=nloc).results[0]
        self.stats["casts"] += 1
        self.casts[key] = res
        return res

    def _const(self, rw: ConversionPatternRewriter, v: Value, t: Type) -> Value | None:
        d = v.defining_op()
        if d is None or d.name != "top.Weight":
            return None
        arr = np.asarray(d.properties["value"].to_numpy())
        if arr.dtype.kind != "f":
            return None
        hint = (loc_name(d.location) or "weight") + "_" + str(_elem(t)).replace("!", "").split("<")[0]
        if is_quant(t):
            q = quantize(arr.astype(np.float32), t)
            attr = self.factory.attr(q, hint)
            return rw.create(WeightOp, output=t, value=attr, loc=d.location).results[0]
        e = _elem(t)
        if isinstance(e, FloatType):
            from lamina.dialects.top.io import WeightOp as TopWeight
            from lamina.ir.attributes import element_type_to_dtype

            with np.errstate(over="ignore"):
                a = arr.astype(np.float32).astype(element_type_to_dtype(e))
            # bfloat16 arrays cannot be exported as buffers: store the bits, typed bf16
            attr = self.factory.attr(a.view(np.uint16) if a.dtype.itemsize == 2 else a, hint, e)
            return rw.create(TopWeight, output=attr.type, value=attr, loc=d.location).results[0]
        return None

    def weight_array(self, v: Value) -> np.ndarray | None:
        d = v.defining_op()
        if d is None or d.name != "top.Weight":
            return None
        a = np.asarray(d.properties["value"].to_numpy())
        return a if a.dtype.kind == "f" else None

    def new_weight(
        self, rw: ConversionPatternRewriter, arr: np.ndarray, t: Type, hint: str, loc: Location
    ) -> Value:
        attr = self.factory.attr(arr, hint)
        if is_quant(t):
            return rw.create(WeightOp, output=t, value=attr, loc=loc).results[0]
        from lamina.dialects.top.io import WeightOp as TopWeight

        return rw.create(TopWeight, output=attr.type, value=attr, loc=loc).results[0]


def _scale(t: Type) -> float:
    e = _elem(t)
    return float(e.scale)  # type: ignore[attr-defined]


def _scales(t: Type) -> np.ndarray:
    """The scale(s) of a quantized type: a 0-d array (per-tensor) or one per channel."""
    return np.asarray(qparams(t)[0], np.float64)


def _zp_of(t: Type) -> int | None:
    zp = qparams(t)[1]
    return None if np.ndim(zp) else int(zp)


def _is_per_axis(t: Type) -> bool:
    return isinstance(_elem(t), UniformQuantizedPerAxisType)


def _lutable(op: Operation) -> bool:
    if len(op.operands) != 1 or len(op.results) != 1:
        return False
    if not (isinstance(op, top_ew.UnaryOp) or op.name in _LUT_EXTRA):
        return False
    return _is_floatish(op.results[0].type)


def _value_loc(v: Value) -> Location:
    d = v.defining_op()
    if d is not None:
        names = result_names(d)
        idx = getattr(v, "index", 0)
        if len(names) > 1 and idx < len(names):
            from lamina.ir.location import NameLoc

            return NameLoc(names[idx])
        return d.location
    return v.location  # type: ignore[attr-defined]


# ---- patterns ------------------------------------------------------------------------------------


def _copy_props(op: Operation) -> dict[str, Any]:
    return dict(op.properties)


class LowerTopOp(ConversionPattern):
    """Lowers any ``top`` op: INT8 form when possible in INT8 mode, else float (F32/F16/BF16)."""

    root = None

    def __init__(self, state: Lowering, type_converter: TypeConverter | None = None) -> None:
        super().__init__(type_converter)
        self.s = state

    def match_and_rewrite(self, op: Operation, operands: list[Value], rw: ConversionPatternRewriter) -> bool:
        if op.dialect_name != "top" or op.name in _LEGAL_TOP or op.regions:
            return False
        cls = tpu_class(op.name)
        if cls is None:
            return False
        ins = [rw.lookup(v) for v in op.operands]
        mode = self.s.mode_of(op)
        if mode == "INT8":
            try:
                if self._int8(op, ins, rw):
                    self.s.stats["int8"] += 1
                    return True
            except _NoInt8:
                pass
            mode = "F32"
        self._float(op, ins, rw, mode)
        self.s.stats["float"] += 1
        return True

    # -- float --
    def _float(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter, mode: str) -> None:
        ft = _FLOAT[mode]
        new_ins = []
        for orig, v in zip(op.operands, ins):
            if isinstance(v.type, ShapedType) and (_is_floatish(orig.type) or is_quant(v.type)):
                want = _with_elem(v.type, ft)
                if _is_floatish(v.type) and _elem(_plain(v.type)) is ft:
                    new_ins.append(v)
                    continue
                if self.s.weight_array(v) is not None and mode == "F32":
                    new_ins.append(v)
                    continue
                new_ins.append(self.s.cast(rw, v, want))
            else:
                new_ins.append(v)
        rtypes = [_with_elem(r.type, ft) if _is_floatish(r.type) else r.type for r in op.results]
        cls = tpu_class(op.name)
        new = cls.create(new_ins, rtypes, _copy_props(op), dict(op.attributes), 0, (), op.location)  # type: ignore[union-attr]
        rw.insert(new)
        rw.replace_op(op, new.results)

    # -- int8 --
    def _qin(self, rw: ConversionPatternRewriter, orig: Value, v: Value, per_axis: bool = False) -> Value:
        """An activation operand as an 8-bit quantized value; per-tensor unless ``per_axis`` (the
        user can take per-channel scales), a per-channel value being requantized otherwise."""
        orig = rw.original(orig)
        if is_quant(v.type) and per_axis and orig in self.s.per_axis and not _is_per_axis(v.type):
            d = v.defining_op()  # a cast the conversion materialized: quantize its float source
            if d is not None and d.name == "tpu.Cast" and _is_floatish(d.operands[0].type):
                return self.s.cast(rw, d.operands[0], self.s.per_axis[orig])
        if is_quant(v.type):
            if _is_per_axis(v.type) and not per_axis:
                t = self.s.qtype(orig, per_axis=False)
                if t is None or _is_per_axis(t):
                    th = float(np.max(_scales(v.type))) * 127.0
                    t = RankedTensorType(v.type.shape, UniformQuantizedType(8, True, f32, th / 127.0, 0))  # type: ignore[attr-defined]
                return self.s.cast(rw, v, t)
            return v
        t = self.s.qtype(orig, per_axis=per_axis)
        if t is None:
            w = self.s.weight_array(v)
            if w is None or not isinstance(v.type, RankedTensorType):
                raise _NoInt8
            th = float(np.max(np.abs(w))) if w.size else 1.0
            t = RankedTensorType(v.type.shape, UniformQuantizedType(8, True, f32, (th or 1.0) / 127.0, 0))
        return self.s.cast(rw, v, t)

    def _qout(self, r: Value, per_axis: bool = False) -> Type:
        t = self.s.qtype(r, per_axis=per_axis)
        if t is None:
            raise _NoInt8
        if _is_per_axis(t):
            self.s.stats["per_channel"] += 1
        return t

    def _int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        name = op.name
        if name in ("top.Conv", "top.MatMul"):
            return self._conv_matmul(op, ins, rw)
        if name in ("top.Add", "top.Sub"):
            return self._add(op, ins, rw)
        if name == "top.Mul":
            return self._mul(op, ins, rw)
        if name == "top.Concat":
            return self._concat(op, ins, rw)
        if name == "top.MaxPool":
            if not isinstance(op.results[1].type, NoneType):
                raise _NoInt8
            x = self._qin(rw, op.operands[0], ins[0])
            return self._emit(
                op, rw, [x], [_with_elem(op.results[0].type, _elem(x.type)), op.results[1].type]
            )
        if name == "top.AvgPool":
            return self._avgpool(op, ins, rw)
        if name == "top.Reduce":
            return self._reduce(op, ins, rw)
        if name in INT8_OPS:  # data movement
            if name == "top.Interp" and op.attr("mode") != "nearest":  # type: ignore[attr-defined]
                raise _NoInt8
            x = self._qin(rw, op.operands[0], ins[0])
            rtypes = [
                _with_elem(r.type, _elem(x.type)) if _is_floatish(r.type) else r.type for r in op.results
            ]
            return self._emit(op, rw, [x, *ins[1:]], rtypes)
        if self._lutable(op):
            x = self._qin(rw, op.operands[0], ins[0])
            if _elem(x.type).storage_width != 8:  # type: ignore[attr-defined]
                raise _NoInt8
            out_t = self._qout(op.results[0])
            top_op = op

            def fn(xf: np.ndarray) -> np.ndarray:
                return np.asarray(top_op.execute([xf.astype(np.float32)])[0], np.float64)  # type: ignore[attr-defined]

            table = build_lut(fn, x.type, out_t)
            new = rw.create(
                LutOp,
                input=x,
                output=out_t,
                table=lut_table_attr(table),
                fn=StringAttr(op.name.split(".", 1)[1]),
                loc=op.location,
            )
            rw.replace_op(op, new.results)
            return True
        raise _NoInt8

    def _lutable(self, op: Operation) -> bool:
        return _lutable(op)

    def _emit(
        self,
        op: Operation,
        rw: ConversionPatternRewriter,
        ins: list[Value],
        rtypes: list[Type],
        extra: dict[str, Any] | None = None,
    ) -> bool:
        props = _copy_props(op)
        props.update(extra or {})
        new = tpu_class(op.name).create(ins, rtypes, props, dict(op.attributes), 0, (), op.location)  # type: ignore[union-attr]
        rw.insert(new)
        rw.replace_op(op, new.results)
        return True

    def _conv_matmul(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        is_conv = op.name == "top.Conv"
        w = self.s.weight_array(ins[1])
        per = not is_conv and w is not None and w.ndim == 2  # per-channel input/output possible
        out_t = self._qout(op.results[0], per_axis=per)
        x = self._qin(rw, op.operands[0], ins[0], per_axis=per)
        if _is_per_axis(x.type) and qparams(x.type)[2] != len(x.type.shape) - 1:  # type: ignore[attr-defined]
            x = self._qin(rw, op.operands[0], x)
        s_o = _scales(out_t)
        if w is None:
            if is_conv:
                raise _NoInt8
            # activation x activation: per-tensor
            y = self._qin(rw, op.operands[1], ins[1])
            s_w = np.array([_scale(y.type)])
            s_x = _scales(x.type)
            wv = y
        else:
            if _is_per_axis(x.type):
                # per-channel input scales along K folded into the weight rows: the integer
                # accumulation then carries scale 1 on the input side
                w = w.astype(np.float64) * _scales(x.type)[:, None]
                s_x = np.float64(1.0)
            else:
                s_x = _scales(x.type)
            axis = 0 if is_conv else w.ndim - 1
            red = tuple(i for i in range(w.ndim) if i != axis)
            amax = np.max(np.abs(w), axis=red) if w.ndim > 1 else np.abs(w)
            s_w = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float64)
            et = UniformQuantizedPerAxisType(8, True, f32, list(s_w), [0] * len(s_w), axis, -127, 127)
            wt = RankedTensorType(w.shape, et)
            wq = quantize(w.astype(np.float32) if not _is_per_axis(x.type) else w, wt)
            wv = self.s.new_weight(rw, wq, wt, (loc_name(op.location) or "w") + "_filter_i8", op.location)
        real = np.atleast_1d(s_x * s_w / s_o)
        if np.any(real >= 2.0**30) or np.any(~np.isfinite(real)):
            raise _NoInt8
        pairs = [quantize_multiplier(float(r)) for r in real]
        bias = ins[2]
        if not isinstance(bias.type, NoneType):
            b = self.s.weight_array(bias)
            if b is None:
                raise _NoInt8
            bq = round_half_away(b.astype(np.float64) / (s_x * s_w))
            bq = np.clip(bq, -(2**31), 2**31 - 1).astype(np.int32)
            bias = self.s.new_weight(
                rw,
                bq,
                RankedTensorType(bq.shape, IntegerType(32)),
                (loc_name(op.location) or "b") + "_bias_i32",
                op.location,
            )
        extra = {
            "multiplier": DenseArrayAttr(i64, [p[0] for p in pairs]),
            "rshift": DenseArrayAttr(i64, [p[1] for p in pairs]),
        }
        return self._emit(op, rw, [x, wv, bias], [out_t], extra)

    def _concat(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        """Per-tensor: inputs requantized to the result's type. When the 8-bit inputs' scales differ
        by more than 2x, the result is per-axis along the concat axis instead, each input's channels
        keeping its own scale (no requantization of symmetric inputs of one signedness; asymmetric
        inputs are requantized to symmetric int8 first, u8 among i8 to i8)."""
        out_t = self._qout(op.results[0])
        xs = [self._qin(rw, o, v) for o, v in zip(op.operands, ins)]
        rt = op.results[0].type
        axis = op.attr("axis")  # type: ignore[attr-defined]
        shapes = [x.type.shape for x in xs]  # type: ignore[attr-defined]
        scales = [_scale(x.type) for x in xs]
        if (
            len(xs) > 1
            and isinstance(rt, RankedTensorType)
            and rt.has_static_shape
            and all(_zp_of(x.type) is not None for x in xs)
            and max(scales) > 2.0 * min(scales)
        ):
            # asymmetric inputs are first requantized to symmetric int8 covering their range
            for i, x in enumerate(xs):
                zp = _zp_of(x.type)
                if zp:
                    e = _elem(x.type)
                    th = max(-(e.storage_min - zp), e.storage_max - zp) * scales[i]  # type: ignore[attr-defined]
                    t = RankedTensorType(shapes[i], UniformQuantizedType(8, True, f32, th / 127.0, 0))
                    xs[i] = self.s.cast(rw, x, t)
                    scales[i] = th / 127.0
            ax = axis % len(rt.shape)
            signed = any(_elem(x.type).signed for x in xs)  # type: ignore[attr-defined]
            seg_scales: list[float] = []
            parts = []
            for x, shp, sc in zip(xs, shapes, scales):
                if _elem(x.type).signed != signed:  # u8 [0, 255] -> i8 [0, 127]: half the steps
                    t = RankedTensorType(shp, UniformQuantizedType(8, True, f32, sc * 255.0 / 127.0, 0))
                    x = self.s.cast(rw, x, t)
                    sc = sc * 255.0 / 127.0
                parts.append(x)
                seg_scales.extend([sc] * shp[ax])
            lo, hi = (-128, 127) if signed else (0, 255)
            et = UniformQuantizedPerAxisType(8, signed, f32, seg_scales, [0] * len(seg_scales), ax, lo, hi)
            self.s.stats["per_channel"] += 1
            return self._emit(op, rw, parts, [RankedTensorType(rt.shape, et)])
        xs = [self.s.cast(rw, x, out_t) for x in xs]
        return self._emit(op, rw, xs, [out_t])

    def _add(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        out_t = self._qout(op.results[0], per_axis=True)
        nd = len(out_t.shape)  # type: ignore[attr-defined]
        out_axis = qparams(out_t)[2]
        xs = []
        for o, v in zip(op.operands, ins):
            x = self._qin(rw, o, v, per_axis=out_axis is not None)
            if _is_per_axis(x.type) and qparams(x.type)[2] + nd - len(x.type.shape) != out_axis:  # type: ignore[attr-defined]
                x = self._qin(rw, o, x)
            xs.append(x)
        if out_axis is None:
            ratios = [_scale(x.type) / _scale(out_t) for x in xs]
            mx = max(ratios)
            if mx >= 2.0**30:
                raise _NoInt8
            _, rs = quantize_multiplier(mx)
            shift = 31 + rs
            ms = [int(round_half_away(np.float64(r * 2.0**shift))) for r in ratios]
            extra = {"multiplier": DenseArrayAttr(i64, ms), "rshift": DenseArrayAttr(i64, [rs])}
            return self._emit(op, rw, xs, [out_t], extra)
        # per channel: one shift per channel (from the largest ratio), one multiplier per input
        s_o = _scales(out_t)
        r = np.stack([np.broadcast_to(_scales(x.type), s_o.shape) / s_o for x in xs])
        if np.any(r >= 2.0**30):
            raise _NoInt8
        rs = np.array([quantize_multiplier(float(c))[1] for c in r.max(axis=0)], np.int64)
        ms = round_half_away(r * np.exp2(31.0 + rs)).astype(np.int64)
        extra = {
            "multiplier": DenseArrayAttr(i64, [int(v) for v in ms.reshape(-1)]),
            "rshift": DenseArrayAttr(i64, [int(v) for v in rs]),
        }
        return self._emit(op, rw, xs, [out_t], extra)

    def _mul(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if len(ins) != 2:
            raise _NoInt8
        out_t = self._qout(op.results[0])
        xs = [self._qin(rw, o, v) for o, v in zip(op.operands, ins)]
        real = _scale(xs[0].type) * _scale(xs[1].type) / _scale(out_t)
        if real >= 2.0**30:
            raise _NoInt8
        m, s = quantize_multiplier(real)
        extra = {"multiplier": DenseArrayAttr(i64, [m]), "rshift": DenseArrayAttr(i64, [s])}
        return self._emit(op, rw, xs, [out_t], extra)

    def _avgpool(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        a = op.attr  # type: ignore[attr-defined]
        k = list(a("kernel_shape"))
        pads = list(a("pads") or [0] * (2 * len(k)))
        if a("auto_pad") != "NOTSET" or a("ceil_mode") or (any(pads) and not a("count_include_pad")):
            raise _NoInt8
        if a("dilations") and any(d != 1 for d in a("dilations")):
            raise _NoInt8
        out_t = self._qout(op.results[0])
        x = self._qin(rw, op.operands[0], ins[0])
        real = _scale(x.type) / (_scale(out_t) * math.prod(k))
        m, s = quantize_multiplier(real)
        extra = {"multiplier": DenseArrayAttr(i64, [m]), "rshift": DenseArrayAttr(i64, [s])}
        return self._emit(op, rw, [x], [out_t], extra)

    def _reduce(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        mode = op.attr("mode")  # type: ignore[attr-defined]
        if mode not in ("ReduceMean", "ReduceMax", "ReduceMin"):
            raise _NoInt8
        xs = op.operands[0].type
        axes_op = ins[1].defining_op()
        if isinstance(ins[1].type, NoneType) or axes_op is None or axes_op.name != "top.Weight":
            raise _NoInt8
        if not (isinstance(xs, RankedTensorType) and xs.has_static_shape):
            raise _NoInt8
        x = self._qin(rw, op.operands[0], ins[0])
        if mode != "ReduceMean":
            return self._emit(op, rw, [x, ins[1]], [_with_elem(op.results[0].type, _elem(x.type))])
        axes = np.asarray(axes_op.properties["value"].to_numpy()).reshape(-1)
        n = math.prod(xs.shape[int(ax)] for ax in axes)
        out_t = self._qout(op.results[0])
        m, s = quantize_multiplier(_scale(x.type) / (_scale(out_t) * n))
        extra = {"multiplier": DenseArrayAttr(i64, [m]), "rshift": DenseArrayAttr(i64, [s])}
        return self._emit(op, rw, [x, ins[1]], [out_t], extra)


class _NoInt8(Exception):
    """This op has no INT8 form here: lower it in float."""


# ---- the driver ----------------------------------------------------------------------------------


def _target() -> ConversionTarget:
    t = ConversionTarget()
    t.add_legal_dialect("tpu", "func", "builtin", "quant", "arith")

    def top_legal(op: Operation) -> bool:
        if op.name in _LEGAL_TOP or op.regions:
            return True
        p = op.parent_op()
        return p is not None and p.name != "func.func"

    t.add_dynamically_legal_dialect("top", top_legal)
    return t


def convert_top_to_tpu(
    module: Operation,
    mode: str = "INT8",
    asymmetric: bool = False,
    qtable: dict[str, str] | None = None,
    resources: Any = None,
) -> tuple[bool, dict[str, int]]:
    """Lower every function of ``module``; returns (success, statistics)."""
    mode = mode.upper()
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}' (expected one of {', '.join(MODES)})")
    state = Lowering(module, mode, asymmetric, dict(qtable or {}), resources)
    tc = make_type_converter(mode, asymmetric)

    def mat(rw: Any, t: Type, inputs: list[Value], loc: Location) -> Value | None:
        if len(inputs) != 1 or not isinstance(t, ShapedType):
            return None
        return state.cast(rw, inputs[0], t, loc)

    tc.add_source_materialization(mat)
    tc.add_target_materialization(mat)
    ok = apply_partial_conversion(module, _target(), [LowerTopOp(state, tc)], tc)
    if ok:
        finalize(module)
    return ok, state.stats


def finalize(module: Operation) -> None:
    """Calibrated element types → expressed types; drop casts to an identical type and unused
    ``top.Weight``/``top.None``/``tpu.Weight``; function signatures follow the returned values."""
    for op in list(module.walk_ops()):
        for r in op.results:
            r.type = _plain(r.type)
        for region in op.regions:
            for b in region.blocks:
                for a in b.args:
                    a.type = _plain(a.type)
    for op in list(module.walk_ops()):
        if op.name == "tpu.Cast" and op.operands[0].type is op.results[0].type:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    changed = True
    while changed:
        changed = False
        for op in list(module.walk_ops()):
            if op.name in ("top.Weight", "top.None", "tpu.Weight", "tpu.Cast", "tpu.Requant") and not any(
                r.uses for r in op.results
            ):
                op.erase()
                changed = True
    for f in module.walk_ops():
        if f.name == "func.func" and f.regions and f.regions[0].blocks:
            entry = f.regions[0].blocks[0]
            ret = entry.last_op
            if ret is not None and ret.name == "func.return":
                f.properties["function_type"] = TypeAttr(
                    FunctionType(list(entry.arg_types), list(ret.operand_types))
                )


@register_pass
class ConvertTopToTpu(Pass):
    name = "convert-top-to-tpu"
    summary = "Lower top to tpu in F32/F16/BF16/INT8 (per-op modes from a qtable)"
    display_name = "ConvertTopToTpuPass"
    op_name = "builtin.module"

    mode = Option(str, "INT8", "Quantization mode", choices=MODES)
    asymmetric = Option(bool, False, "Asymmetric INT8 (zero points) instead of symmetric")
    qtable = Option(str, "", "Quantize table (op_name MODE per line)")

    num_int8 = Statistic("num-int8", "Ops lowered to INT8")
    num_float = Statistic("num-float", "Ops lowered to a float mode")
    num_casts = Statistic("num-casts", "Casts inserted")
    num_per_channel = Statistic("num-per-channel", "Values quantized per channel (outlier channels, Concat)")

    #: The qtable as entries (op name -> mode), set on the instance by the flows and the API: used
    #: instead of reading ``qtable`` (which then only names it in diagnostics).
    qtable_entries: dict[str, str] | None = None

    def run_on_operation(self, op: Operation) -> Any:
        table: dict[str, str] = {}
        if self.qtable_entries is not None:
            from lamina.dialects.tpu.tables import check_qtable
            from lamina.dialects.tpu.transforms.import_calibration import emit_table_diagnostic

            table = dict(self.qtable_entries)
            for w in check_qtable(self.qtable_entries, op, self.qtable or "<qtable>"):
                emit_table_diagnostic(op, w, "warning")
        elif self.qtable:
            from lamina.dialects.tpu.tables import CalibrationTableError, check_qtable, read_qtable
            from lamina.dialects.tpu.transforms.import_calibration import emit_table_diagnostic

            try:
                table = read_qtable(self.qtable)
            except (OSError, CalibrationTableError) as e:
                if isinstance(e, CalibrationTableError):
                    emit_table_diagnostic(op, e, "error")
                else:
                    op.emit_error(f"cannot read '{self.qtable}': {e}")
                self.signal_failure()
                return
            for w in check_qtable(table, op, self.qtable):
                emit_table_diagnostic(op, w, "warning")
        mgr = self.context.resources if self.context is not None else None
        ok, stats = convert_top_to_tpu(op, self.mode, self.asymmetric, table, mgr)
        if not ok:
            self.signal_failure()
            return
        self.num_int8 += stats["int8"]
        self.num_float += stats["float"]
        self.num_casts += stats["casts"]
        self.num_per_channel += stats["per_channel"]


_ = (FloatAttr, CastOp)

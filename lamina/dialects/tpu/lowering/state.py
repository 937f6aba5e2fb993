"""One run of the lowering: the mode of each op (the qtable over the pass's mode, within what the
target supports), the per-channel plan, the weight factory and the casts made so far (one per
value and type)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from lamina.dialects.quant import CalibratedQuantizedType, UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.top.io import WeightOp as TopWeight
from lamina.dialects.top.transforms.utils import WeightFactory, derived_loc, root_op
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.core import Operation, Value
from lamina.ir.location import Location, NameLoc
from lamina.ir.naming import location_name as loc_name
from lamina.ir.naming import result_names
from lamina.ir.traits import NotALayer, ReturnLike
from lamina.ir.types import FloatType, RankedTensorType, Type, f32
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..capabilities import TargetCapabilities
from ..families.activation import lutable
from ..families.common import is_quant
from ..families.plumbing import CastOp, WeightOp, make_requant
from ..quantize import quantize
from .per_channel import plan_per_axis
from .policy import FLOAT_TYPES, elem, plain, quant_type_for, scales, with_elem

#: the optional integer forms (``convert-top-to-tpu{int_forms=...}``): ``lut`` — elementwise
#: activations as 256-entry tables; ``gather`` — Gather of int8 activations and of constant tables
#: (embeddings); ``softmax``, ``layernorm``, ``attention`` — the integer Softmax, LayerNorm and
#: fused attention; ``lut16`` — a MatMul whose one user is an activation requantizes to an int16
#: grid and the activation is a 65536-entry table (``tpu.Lut16``); ``wide_input`` — a MatMul reading
#: a per-channel activation takes it on one int16 grid instead of folding its scales into the
#: weight rows; ``wide_sum`` — an Add/Sub whose every user runs in float (a LayerNorm in F32) gives
#: it an int16 result (``docs/tpu.md``)
INT_FORMS = ("lut", "gather", "softmax", "layernorm", "attention", "lut16", "wide_input", "wide_sum")
#: the forms on by default (those that keep the accuracy of float-between-casts; see
#: ``benchmarks/RESULTS.md``)
DEFAULT_INT_FORMS = ("lut", "gather", "softmax", "attention", "lut16", "wide_input", "wide_sum")
#: the ``lut16`` form gives an activation an int16 result read by a MatMul (instead of its 8-bit
#: one) where its gain (:meth:`Lowering.wide_input_gain`: the added output rounding variance the
#: int16 grid removes, in units of the MatMul's own) is at least this times the extra relative cost
#: of an int16 input on the target (:meth:`~..capabilities.TargetCapabilities.wide_input_cost`;
#: always where it costs nothing extra). Measured on all-MiniLM-L6-v2 padded to 128 (gains 613 ...
#: 5.6 in its six layers), an 8-bit result lost ~2-7e-6 cosine per unit of gain: 32 gives up at
#: most ~2e-4 per layer for halving its FFN-out MatMul's time (``benchmarks/RESULTS.md``)
WIDE_GAIN = 32.0


def parse_int_forms(spec: str, default: Iterable[str] | None = None) -> frozenset[str]:
    """``default``, ``all``, ``none`` or a comma-separated list of :data:`INT_FORMS` (``+`` between
    ``default`` and others adds them: ``default,layernorm``); ValueError naming a bad entry.
    ``default``: the forms ``default`` stands for (a target's, :attr:`~..capabilities.
    TargetCapabilities.default_int_forms`; :data:`DEFAULT_INT_FORMS` when None)."""
    out: set[str] = set()
    for part in (p.strip().lower() for p in spec.replace("+", ",").split(",")):
        if not part:
            continue
        if part == "default":
            out |= set(DEFAULT_INT_FORMS if default is None else default)
        elif part == "all":
            out |= set(INT_FORMS)
        elif part == "none":
            continue
        elif part in INT_FORMS:
            out.add(part)
        else:
            raise ValueError(
                f"unknown integer form '{part}' (expected default, all, none or a list of {', '.join(INT_FORMS)})"
            )
    return frozenset(out)


def form_of(op: Operation) -> str | None:
    """The optional integer form that lowers ``op`` (:data:`INT_FORMS`), None for the others."""
    from lamina.dialects.top import extra as top_extra
    from lamina.dialects.top import nn as top_nn
    from lamina.dialects.top import tensor as top_tensor

    if isinstance(op, top_extra.AttentionOp):
        return "attention"
    if isinstance(op, top_nn.SoftmaxOp):
        return "softmax"
    if isinstance(op, top_nn.LayerNormOp):
        return "layernorm"
    if isinstance(op, top_tensor.GatherOp):
        return "gather"
    if lutable(op):
        return "lut"
    return None


def value_loc(v: Value) -> Location:
    """The location naming ``v``: its producer's (the result's own name for a multi-result op),
    or a block argument's."""
    d = v.defining_op()
    if d is not None:
        names = result_names(d)
        idx = getattr(v, "index", 0)
        if len(names) > 1 and idx < len(names):
            return NameLoc(names[idx])
        return d.location
    return v.location  # type: ignore[attr-defined]


def float_weight(v: Value) -> np.ndarray | None:
    """The value of a float ``top.Weight``, else None."""
    d = v.defining_op()
    if not isinstance(d, TopWeight):
        return None
    a = np.asarray(d.properties["value"].to_numpy())
    return a if a.dtype.kind == "f" else None


class Lowering:
    """Per-run state: modes, weight factory and the casts made so far (one per value and type)."""

    def __init__(
        self,
        root: Operation,
        mode: str,
        asymmetric: bool,
        qtable: dict[str, str],
        capabilities: TargetCapabilities,
        resources: Any = None,
        int_forms: frozenset[str] | None = None,
    ) -> None:
        self.mode = mode
        if int_forms is None:
            int_forms = capabilities.default_int_forms or frozenset(DEFAULT_INT_FORMS)
        self.int_forms = frozenset(int_forms)
        self.asymmetric = asymmetric
        self.qtable = qtable
        self.capabilities = capabilities
        self.factory = WeightFactory(root_op(root), resources)
        self.casts: dict[tuple[Value, Type], Value] = {}
        self.stats = {"int8": 0, "float": 0, "casts": 0, "per_channel": 0, "narrow_lut16": 0}
        #: the ``lut16`` form's int16-result decisions where it costs more than an 8-bit result
        #: (:meth:`wide_result`): ``(activation, gain, extra cost, taken)``
        self.wide_choices: list[tuple[str, float | None, float, bool]] = []
        self.per_axis: dict[Value, Type] = (
            plan_per_axis(
                root,
                self._int8_op,
                self._float_op,
                self._const_matrix,
                self._channel_op,
                conv4=capabilities.conv_channel_scales,
                const_filter=self._const_filter,
            )
            if mode == "INT8"
            else {}
        )

    # -- per-channel activations --
    def _int8_op(self, op: Operation) -> bool:
        return op.dialect_name == "top" and self.mode_of(op) == "INT8"

    def _float_op(self, op: Operation) -> bool:
        """Ops that surely run in float (their users see a float tensor, cast to any type)."""
        if op.has_trait(ReturnLike) or op.has_trait(NotALayer) or not self._int8_op(op):
            return True
        caps = self.capabilities
        if not caps.supports(op.name, "INT8"):
            return True
        f = form_of(op)
        if f is not None and f not in self.int_forms:
            return True
        return caps.form(op.name, "INT8") == "lut" and not lutable(op)

    def _channel_op(self, op: Operation, role: str) -> bool:
        """Whether ``op``'s integer form carries per-channel scales along the last axis as a
        producer (``role`` "out") or as the user of its first operand ("in"): the integer
        LayerNorm (both) and the Gather of a constant table (producer)."""
        from lamina.dialects.top import nn as top_nn
        from lamina.dialects.top import tensor as top_tensor

        if not self._int8_op(op) or not self.capabilities.supports(op.name, "INT8"):
            return False
        if isinstance(op, top_nn.LayerNormOp):
            return "layernorm" in self.int_forms and all(not r.uses for r in op.results[1:])
        if isinstance(op, top_tensor.GatherOp) and role == "out":
            d = op.operands[0]
            w = self.weight_array(d)
            nd = len(getattr(d.type, "shape", ()))
            return (
                "gather" in self.int_forms and w is not None and int(op.attr("axis")) % max(nd, 1) != nd - 1
            )  # type: ignore[attr-defined]
        return False

    def _const_filter(self, v: Value) -> bool:
        w = self.weight_array(v)
        return w is not None and w.ndim >= 3

    def _const_matrix(self, v: Value) -> bool:
        w = self.weight_array(v)
        return w is not None and w.ndim == 2

    # -- modes --
    def mode_of(self, op: Operation) -> str:
        """The op's entry in the qtable (by location name), else the pass's mode."""
        name = loc_name(op.location) or ""
        m = self.qtable.get(name)
        if m is None:
            return self.mode
        m = m.upper()
        if m in ("INT8", "UINT8", "INT4"):
            return "INT8" if self.mode == "INT8" else self.mode
        return m if m in FLOAT_TYPES else self.mode

    # -- value conversion --
    def qtype(self, v: Value, per_axis: bool = True) -> Type | None:
        """The INT8 tensor type of an original value (from its calibrated type; its per-channel
        type when planned and ``per_axis``), or None."""
        if per_axis:
            pt = self.per_axis.get(v)
            if pt is not None:
                return pt
        e = elem(v.type)
        if isinstance(e, CalibratedQuantizedType) and isinstance(v.type, RankedTensorType):
            return RankedTensorType(v.type.shape, quant_type_for(e, self.asymmetric))
        if is_quant(v.type):
            return v.type
        return None

    def wide_type(self, r: Value) -> Type | None:
        """The int16 type of an INT8 MatMul's result ``r`` (an original value) whose one user is an
        activation taking the ``lut16`` form (``tpu.Lut16``), else None: symmetric,
        ``scale = max(-lo, hi) / 32767`` of ``r``'s calibrated range, zero point 0. Only where the
        target runs both ops in INT8 on ``i16`` (:class:`~..capabilities.TargetCapabilities`) and
        ``r`` has no per-channel type."""
        from lamina.dialects.top import nn as top_nn

        d = r.defining_op()
        uses = list(r.uses)
        if "lut16" not in self.int_forms or "lut" not in self.int_forms or len(uses) != 1:
            return None
        u = uses[0].owner
        if not isinstance(d, top_nn.MatMulOp) or r in self.per_axis or not lutable(u):
            return None
        caps = self.capabilities
        if not (self._int8_op(d) and self._int8_op(u) and caps.form(u.name, "INT8") == "lut"):
            return None
        if not (caps.supports(d.name, "INT8", "i16") and caps.supports(u.name, "INT8", "i16")):
            return None
        rng = _abs_range(r)
        if rng is None:
            return None
        th, et = rng
        assert isinstance(r.type, RankedTensorType)  # (as _abs_range checked)
        return RankedTensorType(r.type.shape, UniformQuantizedType(16, True, et, th / 32767.0, 0))

    def wide_result(self, r: Value) -> Type | None:
        """The int16 type of a ``tpu.Lut16`` result ``r`` (an original value) whose one user is an
        INT8 MatMul reading it as its input with a constant 2-d weight of ``K`` rows (the
        ``lut16`` form), else None: symmetric, ``scale = max(-lo, hi) / L``, storage ``[-L, L]``,
        ``L = min(32767, (2**31 - 1) // (127 * K))`` so that the MatMul's int32 accumulation
        cannot overflow. Where the target's MatMul with an int16 operand costs more than with
        int8 ones (:meth:`~..capabilities.TargetCapabilities.wide_input_cost`), only when
        :meth:`wide_input_gain` is at least :data:`WIDE_GAIN` times the extra cost (each decision
        in :attr:`wide_choices`)."""
        from lamina.dialects.top import nn as top_nn

        uses = list(r.uses)
        if "lut16" not in self.int_forms or len(uses) != 1 or uses[0].index != 0 or r in self.per_axis:
            return None
        u = uses[0].owner
        w = self.weight_array(u.operands[1]) if isinstance(u, top_nn.MatMulOp) else None
        if w is None or w.ndim != 2 or not self._int8_op(u):
            return None
        if not self.capabilities.supports(u.name, "INT8", "i16"):
            return None
        rng = _abs_range(r)
        if rng is None:
            return None
        th, et = rng
        extra = self.capabilities.wide_input_cost(u.name) - 1.0
        if extra > 0:
            gain = self.wide_input_gain(r, u, w)
            self.wide_choices.append(
                (loc_name(value_loc(r)) or "?", gain, extra, gain is None or gain >= WIDE_GAIN * extra)
            )
            if gain is not None and gain < WIDE_GAIN * extra:
                self.stats["narrow_lut16"] += 1
                return None
        assert isinstance(r.type, RankedTensorType)  # (as _abs_range checked)
        lv = min(32767, (2**31 - 1) // (127 * max(1, int(w.shape[0]))))
        return RankedTensorType(r.type.shape, UniformQuantizedType(16, True, et, th / lv, 0, -lv, lv))

    def wide_input_gain(self, r: Value, u: Operation, w: np.ndarray) -> float | None:
        """What an int16 grid for ``r`` (read by the MatMul ``u`` with the constant weight ``w``
        ``[K, N]`` as its input) gains over its 8-bit type, in units of ``u``'s own result
        rounding: the variance that ``r``'s 8-bit rounding (step ``s``, errors uniform and
        independent) adds to output column ``c``, ``s**2 / 12 * sum_k w[k, c]**2``, over the
        variance of the column's own 8-bit rounding, ``s_c**2 / 12``, averaged over the columns
        (the int16 grid's rounding is ~``L / 127`` times finer: taken as 0). None when a step is
        unknown (then the form is taken)."""
        t8, to = self.qtype(r, per_axis=False), self.qtype(u.results[0])
        if t8 is None or to is None or not is_quant(t8) or not is_quant(to):
            return None
        s8 = float(np.max(scales(t8)))
        so = np.broadcast_to(np.asarray(scales(to), np.float64), (int(w.shape[1]),))
        if not (s8 > 0 and np.all(so > 0)):
            return None
        col = np.sum(np.square(w.astype(np.float64)), axis=0)
        return float(np.mean(s8 * s8 * col / (so * so)))

    def wide_sum(self, r: Value, t: Type) -> Type | None:
        """The int16 type of an INT8 Add/Sub result ``r`` (an original value, its 8-bit type ``t``)
        whose every user runs in float or is a function result (the ``wide_sum`` form), else None:
        per channel ``scale_c = s_c * 127 / 32767`` of a per-axis ``t``; else symmetric, ``scale =
        max(-lo, hi) / 32767`` of ``r``'s calibrated range; zero points 0. Only where the target
        runs the op in INT8 on ``i16``, and on rank <= 3 (a transformer's residual stream, where it
        gains): on the 4-d sums of a CNN read in float it was measured to lose (PP-OCRv4's
        hard-swish ``x + 3``: cosine 0.99238 -> 0.99025, ``benchmarks/RESULTS.md``)."""
        d = r.defining_op()
        uses = list(r.uses)
        if "wide_sum" not in self.int_forms or d is None or not uses or not isinstance(t, RankedTensorType):
            return None
        if len(t.shape) > 3:
            return None
        if not self.capabilities.supports(d.name, "INT8", "i16"):
            return None
        if not all(self._float_op(u.owner) for u in uses):
            return None
        e = elem(t)
        if isinstance(e, UniformQuantizedPerAxisType):
            if any(z != 0 for z in e.zero_points):
                return None
            sc = [float(x) * 127.0 / 32767.0 for x in e.scales]
            return RankedTensorType(
                t.shape, UniformQuantizedPerAxisType(16, True, e.expressed_type, sc, [0] * len(sc), e.axis)
            )
        rng = _abs_range(r)
        if rng is None:
            return None
        return RankedTensorType(t.shape, UniformQuantizedType(16, True, rng[1], rng[0] / 32767.0, 0))

    def wide_input(self, op: Operation) -> bool:
        """Whether the INT8 MatMul ``op`` takes its per-channel input on an int16 grid (the
        ``wide_input`` form; the target runs MatMul in INT8 on ``i16``)."""
        return "wide_input" in self.int_forms and self.capabilities.supports(op.name, "INT8", "i16")

    def cast(self, rw: ConversionPatternRewriter, v: Value, t: Type, loc: Location | None = None) -> Value:
        """``v`` as type ``t`` (a cached tpu.Cast / tpu.Requant, or a converted constant)."""
        if v.type is t or plain(v.type) is t:
            return v
        key = (v, t)
        c = self.casts.get(key)
        if c is not None and c.defining_op() is not None and c.defining_op().parent is not None:
            return c
        w = self._const(rw, v, t)
        if w is not None:
            self.casts[key] = w
            return w
        e = elem(t)
        suffix = (
            ("u8" if not e.signed else "i8") if is_quant(t) else str(elem(plain(t)))  # type: ignore[attr-defined]
        )
        src_loc = value_loc(v) if v.defining_op() is not None or loc is None else loc
        nloc = derived_loc(src_loc, suffix)
        res = make_requant(rw, v, t, nloc) if is_quant(v.type) and is_quant(t) else None
        if res is None and is_quant(v.type) and is_quant(t):
            # per-axis types of different axes: through float (dequantize, then quantize)
            v = rw.create(CastOp, input=v, output=with_elem(v.type, f32), loc=nloc).results[0]
        if res is None:
            res = rw.create(CastOp, input=v, output=t, loc=nloc).results[0]
        self.stats["casts"] += 1
        self.casts[key] = res
        return res

    def _const(self, rw: ConversionPatternRewriter, v: Value, t: Type) -> Value | None:
        d = v.defining_op()
        if not isinstance(d, TopWeight):
            return None
        arr = np.asarray(d.properties["value"].to_numpy())
        if arr.dtype.kind != "f":
            return None
        hint = (loc_name(d.location) or "weight") + "_" + str(elem(t)).replace("!", "").split("<")[0]
        if is_quant(t):
            q = quantize(arr.astype(np.float32), t)
            attr = self.factory.attr(q, hint)
            return rw.create(WeightOp, output=t, value=attr, loc=d.location).results[0]
        e = elem(t)
        if isinstance(e, FloatType):
            with np.errstate(over="ignore"):
                a = arr.astype(np.float32).astype(element_type_to_dtype(e))
            # bfloat16 arrays cannot be exported as buffers: store the bits, typed bf16
            attr = self.factory.attr(a.view(np.uint16) if a.dtype.itemsize == 2 else a, hint, e)
            return rw.create(TopWeight, output=attr.type, value=attr, loc=d.location).results[0]
        return None

    def weight_array(self, v: Value) -> np.ndarray | None:
        return float_weight(v)

    def new_weight(
        self, rw: ConversionPatternRewriter, arr: np.ndarray, t: Type, hint: str, loc: Location
    ) -> Value:
        attr = self.factory.attr(arr, hint)
        if is_quant(t):
            return rw.create(WeightOp, output=t, value=attr, loc=loc).results[0]
        return rw.create(TopWeight, output=attr.type, value=attr, loc=loc).results[0]


def _abs_range(r: Value) -> tuple[float, Type] | None:
    """``max(-min, max)`` of a calibrated tensor value ``r``'s range (the int16 forms' symmetric
    threshold) and its expressed type; None when ``r`` is not a calibrated ranked tensor or its
    range is empty or infinite."""
    e = elem(r.type)
    if not isinstance(e, CalibratedQuantizedType) or not isinstance(r.type, RankedTensorType):
        return None
    th = max(-float(e.min), float(e.max))
    return (th, e.expressed_type) if np.isfinite(th) and th > 0 else None

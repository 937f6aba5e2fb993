"""``convert-top-to-tpu{mode=F32|F16|BF16|INT8 asymmetric=false qtable=FILE}``: lower ``top`` to
``tpu`` with the dialect conversion framework.

* The :class:`~lamina.rewrite.conversion.ConversionTarget` makes the ``top`` dialect illegal except
  its model plumbing (ops with the :class:`~lamina.ir.traits.NotALayer` trait: ``top.Input``,
  ``top.Weight``, ``top.None``, ``top.Yield``), ops with regions and ops nested in them (control
  flow stays in ``top``, executed in float32).
* The :class:`~lamina.rewrite.conversion.TypeConverter` (:mod:`..lowering.policy`, the
  quantized-type policy) maps ``!quant.calibrated<f32<lo:hi>>`` tensors to their ``!quant.uniform``
  type (INT8) or to the mode's float type, and materializes ``tpu.Cast`` / ``tpu.Requant`` where a
  value's producer and user run in different modes.
* One conversion pattern per op family (:mod:`..families`), rooted on the ``top`` op classes it
  converts; every other op lowers in float mode.
* Optional integer forms (``int-forms``: ``lut``, ``gather``, ``softmax``, ``layernorm``,
  ``attention``; default ``lut,gather,softmax,attention``) choose which ops with such a form use it in INT8
  (the others run in F32).
* Each op's mode: its entry in the qtable (by location name), else ``mode``. In INT8, an op is
  lowered to integer form when the target supports it (:mod:`..capabilities`; the reference
  target: :data:`~..capabilities.REFERENCE`), its family's form covers its attributes and its
  tensors are calibrated; otherwise it runs in F32 with casts around it — a model never fails to
  lower.

Quantized types: :mod:`..lowering.policy`. Per-channel activations: :mod:`..lowering.per_channel`.
Weights: per-channel symmetric int8 in [-127, 127] (``scale_c = max|w_c| / 127``); biases int32
``round_half_away(b / (s_in * s_w_c))`` (:mod:`..families.conv`).

The qtable comes from the ``qtable`` file option (``lamina-opt``) or, set on the pass instance by
a caller holding it in memory, :attr:`ConvertTopToTpu.qtable_entries` (no file then).
"""

from __future__ import annotations

from typing import Any

from lamina.ir.attributes import TypeAttr
from lamina.ir.constants import holds_constant
from lamina.ir.core import Operation, Value
from lamina.ir.location import Location
from lamina.ir.traits import NotALayer
from lamina.ir.types import FunctionType, ShapedType, Type
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.rewrite.conversion import ConversionTarget, apply_partial_conversion

from ..capabilities import REFERENCE, TargetCapabilities
from ..families.plumbing import CastOp, QuantCast
from ..lowering.policy import MODES, make_type_converter, plain, quant_type_for
from ..lowering.state import INT_FORMS, Lowering, parse_int_forms
from ..ops import lowering_roots

# ---- the driver ----------------------------------------------------------------------------------


def _target() -> ConversionTarget:
    t = ConversionTarget()
    t.add_legal_dialect("tpu", "func", "builtin", "quant", "arith")

    def top_legal(op: Operation) -> bool:
        if op.has_trait(NotALayer) or op.regions:
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
    capabilities: TargetCapabilities = REFERENCE,
    int_forms: str | frozenset[str] = "default",
) -> tuple[bool, dict[str, int]]:
    """Lower every function of ``module`` for a target of the given ``capabilities``; returns
    (success, statistics). ``int_forms``: the optional integer forms used in INT8
    (:data:`~..lowering.state.INT_FORMS`; a spec for :func:`~..lowering.state.parse_int_forms`,
    whose ``default`` is the target's :attr:`~..capabilities.TargetCapabilities.default_int_forms`,
    or a set)."""
    mode = mode.upper()
    if mode not in MODES:
        raise ValueError(f"unknown mode '{mode}' (expected one of {', '.join(MODES)})")
    forms = (
        parse_int_forms(int_forms, capabilities.default_int_forms)
        if isinstance(int_forms, str)
        else frozenset(int_forms)
    )
    state = Lowering(module, mode, asymmetric, dict(qtable or {}), capabilities, resources, forms)
    tc = make_type_converter(mode, asymmetric)

    def mat(rw: Any, t: Type, inputs: list[Value], loc: Location) -> Value | None:
        if len(inputs) != 1 or not isinstance(t, ShapedType):
            return None
        return state.cast(rw, inputs[0], t, loc)

    tc.add_source_materialization(mat)
    tc.add_target_materialization(mat)
    patterns = [pat(root, tpu_op, state, tc) for pat, root, tpu_op in lowering_roots()]
    ok = apply_partial_conversion(module, _target(), patterns, tc)
    if ok:
        finalize(module)
    return ok, state.stats


def _droppable(op: Operation) -> bool:
    """Model plumbing without operands (``top.Weight``, ``tpu.Weight``, ``top.None``) and
    quantization plumbing (``tpu.Cast``, ``tpu.Requant``): erased by :func:`finalize` when unused."""
    if not op.results:
        return False
    return op.has_trait(QuantCast) or holds_constant(op)


def finalize(module: Operation) -> None:
    """Calibrated element types → expressed types; drop casts to an identical type and unused
    constants (``top.Weight``/``tpu.Weight``), ``top.None`` and quantization plumbing
    (``tpu.Cast``/``tpu.Requant``); function signatures follow the returned values."""
    for op in list(module.walk_ops()):
        for r in op.results:
            r.type = plain(r.type)
        for region in op.regions:
            for b in region.blocks:
                for a in b.args:
                    a.type = plain(a.type)
    for op in list(module.walk_ops()):
        if isinstance(op, CastOp) and op.operands[0].type is op.results[0].type:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    changed = True
    while changed:
        changed = False
        for op in list(module.walk_ops()):
            if _droppable(op) and not any(r.uses for r in op.results):
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
    int_forms = Option(
        str,
        "default",
        "Optional integer forms in INT8: default, all, none or a list of " + ",".join(INT_FORMS),
    )

    #: The qtable as entries (op name → mode), set on the instance by a caller that holds it in
    #: memory; used instead of reading ``qtable`` when set.
    qtable_entries: dict[str, str] | None = None
    #: What the target runs natively (set on the instance for another target).
    capabilities: TargetCapabilities = REFERENCE

    num_int8 = Statistic("num-int8", "Ops lowered to INT8")
    num_float = Statistic("num-float", "Ops lowered to a float mode")
    num_casts = Statistic("num-casts", "Casts inserted")
    num_per_channel = Statistic("num-per-channel", "Values quantized per channel (outlier channels, Concat)")
    num_narrow_lut16 = Statistic(
        "num-narrow-lut16", "lut16 activations given an 8-bit result (an int16 one costs more than it gains)"
    )

    def run_on_operation(self, op: Operation) -> Any:
        table: dict[str, str] = {}
        if self.qtable_entries is not None:
            from lamina.dialects.tpu.tables import check_qtable
            from lamina.dialects.tpu.transforms.import_calibration import emit_table_diagnostic

            table = dict(self.qtable_entries)
            for w in check_qtable(table, op, self.qtable or "<qtable>"):
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
        try:
            forms = parse_int_forms(self.int_forms, self.capabilities.default_int_forms)
        except ValueError as e:
            op.emit_error(f"convert-top-to-tpu: {e}")
            self.signal_failure()
            return
        mgr = self.context.resources if self.context is not None else None
        ok, stats = convert_top_to_tpu(op, self.mode, self.asymmetric, table, mgr, self.capabilities, forms)
        if not ok:
            self.signal_failure()
            return
        self.num_int8 += stats["int8"]
        self.num_float += stats["float"]
        self.num_casts += stats["casts"]
        self.num_per_channel += stats["per_channel"]
        self.num_narrow_lut16 += stats["narrow_lut16"]


__all__ = ["MODES", "ConvertTopToTpu", "convert_top_to_tpu", "finalize", "quant_type_for"]

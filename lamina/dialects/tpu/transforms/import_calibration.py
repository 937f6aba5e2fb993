"""``import-calibration-table{file=... asymmetric=false}``: give every tensor named in a calibration
table the element type ``!quant.calibrated<f32<lo:hi>>``. The table is read from ``file``, or taken
from the pass instance's ``table`` (a :class:`~lamina.dialects.tpu.tables.CalibrationTable` in memory).

Symmetric (default): ``hi = threshold`` and ``lo = -threshold`` if the table's ``min < 0`` else 0
(a tensor that is never negative becomes uint8 in INT8); a tensor made asymmetric by ``#asym_op``
gets ``lo = min``, ``hi = min(max, threshold)`` — a range not symmetric about 0, which the lowering
quantizes with a zero point. ``#asym_op`` is read as TPU-MLIR reads it: a Conv or MatMul named
there has an asymmetric *input*, any other op an asymmetric result (TPU-MLIR: GELU and SiLU). Asymmetric: ``lo = min(min, 0)``, ``hi = max(max, 0)``. Names are
location names (what the interpreter dumps). Function arguments wrapped by ``top.Input`` take the
input's type too (and the function signature follows).

Per-channel thresholds (``#channel_th``) of an op's first result become two attributes of the op,
``lamina.channel_th`` (a ``tensor<Cxf32>`` of thresholds) and ``lamina.channel_axis``, read by
``convert-top-to-tpu``.
"""

from __future__ import annotations

from typing import Any

from lamina.dialects.quant import CalibratedQuantizedType
from lamina.dialects.top.io import InputOp
from lamina.dialects.tpu.tables import (
    CalibrationTable,
    CalibrationTableError,
    check_table,
    read_calibration_table,
)
from lamina.ir.constants import holds_constant
from lamina.ir.core import Operation, Value
from lamina.ir.naming import result_names
from lamina.ir.types import FloatType, FunctionType, RankedTensorType, ShapedType
from lamina.passes import Option, Pass, Statistic, register_pass

#: how diagnostics name a calibration table given in memory (the pass's ``table``) rather than a file
IN_MEMORY_TABLE = "<calibration table>"


def calibrated_type(t: Any, lo: float, hi: float) -> Any:
    """``t`` with its float element type replaced by ``!quant.calibrated<elem<lo:hi>>``."""
    if not isinstance(t, ShapedType) or not isinstance(t.element_type, FloatType):
        return None
    e = t.element_type
    if isinstance(e, CalibratedQuantizedType):
        e = e.expressed_type
    ct = CalibratedQuantizedType(e, lo, hi)
    return RankedTensorType(t.shape, ct) if isinstance(t, RankedTensorType) else None


def _set_type(v: Value, t: Any) -> None:
    v.type = t


#: the attributes carrying per-channel thresholds from the table to the lowering
CHANNEL_TH_ATTR = "lamina.channel_th"
CHANNEL_AXIS_ATTR = "lamina.channel_axis"


def _attach_channels(op: Operation, r: Value, entry: tuple[int, list[float]]) -> None:
    import numpy as np

    from lamina.ir.attributes import DenseElementsAttr, IntegerAttr
    from lamina.ir.types import i64

    axis, ths = entry
    t = r.type
    if not (isinstance(t, RankedTensorType) and t.has_static_shape and 0 <= axis < len(t.shape)):
        return
    if t.shape[axis] != len(ths):
        return
    op.attributes[CHANNEL_TH_ATTR] = DenseElementsAttr.from_numpy(np.asarray(ths, np.float32))
    op.attributes[CHANNEL_AXIS_ATTR] = IntegerAttr(axis, i64)


#: ops whose ``#asym_op`` entry means an asymmetric *input* (TPU-MLIR's ``input_asym``)
ASYM_INPUT_OPS = frozenset({"top.Conv", "top.MatMul"})


def asym_values(root: Operation, names: Any) -> set[Value]:
    """The values an ``#asym_op`` list makes asymmetric, as TPU-MLIR reads it: a Conv or MatMul
    named there has an asymmetric input (its first operand); any other op (TPU-MLIR: GELU, SiLU)
    an asymmetric result."""
    wanted = set(names)
    out: set[Value] = set()
    if not wanted:
        return out
    for op in root.walk_ops():
        if op.dialect_name != "top":
            continue
        for r, name in zip(op.results, result_names(op)):
            if name in wanted:
                out.add(op.operands[0] if op.name in ASYM_INPUT_OPS and op.operands else r)
    return out


def import_calibration(func_or_module: Operation, table: Any, asymmetric: bool = False) -> int:
    """Annotate the values named in ``table`` (a :class:`lamina.dialects.tpu.tables.CalibrationTable`);
    returns how many values were annotated."""
    count = 0
    asym = asym_values(func_or_module, table.asym_ops)
    channels = table.channel_thresholds
    for op in list(func_or_module.walk_ops()):
        if op.dialect_name != "top" or holds_constant(op):
            continue
        for i, (r, name) in enumerate(zip(op.results, result_names(op))):
            st = table.thresholds.get(name)
            if st is None:
                continue
            if i == 0 and name in channels:
                _attach_channels(op, r, channels[name])
            if asymmetric:
                lo, hi = min(float(st.min), 0.0), max(float(st.max), 0.0)
            elif r in asym and float(st.min) < 0 < float(st.max):
                th = abs(float(st.threshold))
                lo, hi = float(st.min), min(float(st.max), th) if th > 0 else float(st.max)
            else:
                th = abs(float(st.threshold))
                lo, hi = (-th if float(st.min) < 0 else 0.0), th
            if hi <= lo:
                hi = lo + 1e-8
            nt = calibrated_type(r.type, lo, hi)
            if nt is None:
                continue
            _set_type(r, nt)
            count += 1
            if isinstance(op, InputOp):
                arg = op.operands[0]
                _set_type(arg, nt)
    for f in func_or_module.walk_ops():
        if f.name == "func.func" and f.regions and f.regions[0].blocks:
            _sync_signature(f)
    return count


def _sync_signature(func: Operation) -> None:
    from lamina.ir.attributes import TypeAttr

    entry = func.regions[0].blocks[0]
    ret = entry.last_op
    ft = func.properties["function_type"].value
    results = list(ret.operand_types) if ret is not None and ret.name == "func.return" else list(ft.results)
    func.properties["function_type"] = TypeAttr(FunctionType(list(entry.arg_types), results))


@register_pass
class ImportCalibrationTable(Pass):
    name = "import-calibration-table"
    summary = "Attach !quant.calibrated element types to the tensors named in a calibration table"
    display_name = "ImportCalibrationTablePass"
    op_name = "builtin.module"

    file = Option(str, "", "Calibration table (TPU-MLIR format)")
    asymmetric = Option(bool, False, "Use min/max (asymmetric) instead of the threshold (symmetric)")

    num_annotated = Statistic("num-annotated", "Number of tensors given calibrated types")

    #: A table in memory, set on the instance by the flows and the API: used instead of reading
    #: ``file`` (which then only names the table in diagnostics, ``<calibration table>`` without it).
    table: CalibrationTable | None = None

    def run_on_operation(self, op: Operation) -> Any:
        if self.table is None and not self.file:
            op.emit_error("import-calibration-table needs file=<calibration table>")
            self.signal_failure()
            return
        name = self.file or IN_MEMORY_TABLE
        try:
            table = self.table if self.table is not None else read_calibration_table(self.file)
            warnings = check_table(table, op, name)
        except (OSError, CalibrationTableError) as e:
            if isinstance(e, CalibrationTableError):
                emit_table_diagnostic(op, e, "error")
            else:
                op.emit_error(f"cannot read '{self.file}': {e}")
            self.signal_failure()
            return
        for w in warnings:
            emit_table_diagnostic(op, w, "warning")
        self.num_annotated += import_calibration(op, table, self.asymmetric)


def emit_table_diagnostic(op: Operation, problem: Any, severity: str) -> None:
    """Report a table's problem (a :class:`~lamina.dialects.tpu.tables.CalibrationTableError` or
    :class:`~lamina.dialects.tpu.tables.TableWarning`) at its ``file:line``, or on ``op`` naming the file when
    it concerns the whole table."""
    from lamina.ir import diagnostics
    from lamina.ir.location import FileLineColLoc

    emit = diagnostics.emit_error if severity == "error" else diagnostics.emit_warning
    if problem.line:
        emit(FileLineColLoc(problem.path, problem.line, 1), problem.message)
    else:
        emit(op.location, f"{problem.path}: {problem.message}")

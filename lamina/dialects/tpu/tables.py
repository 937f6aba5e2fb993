"""Calibration tables and quantize tables (qtables) in TPU-MLIR's text formats.

A calibration table, as ``run_calibration`` writes it::

    # genetated time: 2024-05-01 10:00:00.000000
    # histogram number: 2048
    # sample number: 100
    # tune number: 10
    ###
    # op_name    threshold    min    max
    input 2.6400001 -2.1179039 2.6400001
    /conv1/Conv_output_0 9.1234567 -12.0000000 11.5000000
    ...
    #int4_th
    /conv1/Conv_output_0 3.0000000 -3.4285714 3.0000000
    #asym_op
    /act/Gelu_output_0
    #weight_scale
    /conv1/Conv_output_0_weight 3 0.01 0.02 0.03

Lamina adds one extension: per-channel thresholds of tensors with *outlier channels* (see
:mod:`lamina.quant.calibration`), one tensor per line, ``axis`` then one threshold per channel::

    #channel_th /layer.0/output/Add_output_0 2 0.51 0.47 ... 223.5 ...

They are written right after the ``op_name threshold min max`` lines, inside TPU-MLIR's int8 block,
where its reader skips any line that does not have exactly those four fields (and they have at
least eleven), so TPU-MLIR reads a Lamina table unchanged.

The ``#`` header lines are free comments (TPU-MLIR spells "genetated"; both spellings are read).
Block markers switch the section that the following lines belong to, as TPU-MLIR's
``import-calibration-table`` does: a comment containing ``#weight_scale`` (also ``#weight_scale_fp8``)
starts per-channel weight scales (``name count v1 ... vcount``), ``#int4_th`` int4 thresholds,
``#tpu-mlir-fp8`` / ``mqbench-fp8`` fp8 thresholds, ``asym_op`` a list of op names quantized
asymmetrically, ``int4_op`` a list of int4 op names. Any other comment is ignored.

A qtable (``--quantize_table``)::

    # op_name   quantize_mode
    /conv1/Conv_output_0 F16
    /fc/Gemm_output_0 F32

Malformed lines raise :class:`CalibrationTableError` whose message is ``file:line: error: ...``.
Writers are atomic: a failure never leaves a half-written file.
"""

from __future__ import annotations

import datetime
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lamina.support.fileio import atomic_write

__all__ = [
    "QTABLE_MODES",
    "QTable",
    "CalibrationTable",
    "CalibrationTableError",
    "TableWarning",
    "TensorStats",
    "check_qtable",
    "check_table",
    "format_qtable",
    "read_calibration_table",
    "read_qtable",
    "write_qtable",
]

#: Modes accepted in a qtable (TPU-MLIR's names; INT4 and F8 variants are read but not lowered yet).
QTABLE_MODES: tuple[str, ...] = ("INT8", "UINT8", "INT4", "F16", "BF16", "F32", "F8E4M3", "F8E5M2")


class CalibrationTableError(ValueError):
    """A malformed calibration table or qtable; ``str(e)`` is ``file:line: error: message``."""

    def __init__(self, path: str, line: int, message: str) -> None:
        self.path = path
        self.line = line
        self.message = message
        super().__init__(f"{path}:{line}: error: {message}" if line else f"{path}: error: {message}")


@dataclass
class TensorStats:
    """One table line: the symmetric threshold (|x| clipping value) and the observed min and max."""

    threshold: float
    min: float
    max: float


_BLOCKS = ("int8", "weight_scale", "int4_th", "fp8_th", "asym_op", "int4_op")


#: the prefix of Lamina's per-channel threshold lines
CHANNEL_TH = "#channel_th"


def _channel_line(line: str, path: str, lineno: int) -> tuple[str, int, list[float]]:
    toks = line.split()
    if len(toks) < 4:
        raise CalibrationTableError(
            path, lineno, "expected '#channel_th op_name axis threshold...' (at least one threshold)"
        )
    try:
        axis = int(toks[2])
    except ValueError:
        raise CalibrationTableError(path, lineno, f"expected an integer axis, got '{toks[2]}'") from None
    if axis < 0:
        raise CalibrationTableError(path, lineno, f"axis of '{toks[1]}' is negative ({axis})")
    ths = [_float(v, path, lineno, "channel threshold") for v in toks[3:]]
    if any(v < 0 or math.isinf(v) for v in ths):
        raise CalibrationTableError(
            path, lineno, f"channel thresholds of '{toks[1]}' must be finite and >= 0"
        )
    return toks[1], axis, ths


def _block_of(line: str) -> str | None:
    """The block a comment line starts (TPU-MLIR's check_flag_line), or None for a plain comment."""
    if "#weight_scale" in line:
        return "weight_scale"
    if "#int4_th" in line:
        return "int4_th"
    if "#tpu-mlir-fp8" in line or "mqbench-fp8" in line:
        return "fp8_th"
    if "asym_op" in line:
        return "asym_op"
    if "int4_op" in line:
        return "int4_op"
    return None


_HEADER_INT = re.compile(r"#\s*(histogram number|sample number|tune number)\s*:\s*(\d+)\s*$")
_HEADER_TIME = re.compile(r"#\s*gene(?:ta|ra)ted time\s*:\s*(.*?)\s*$")


def _fmt(v: float, exact: bool = False) -> str:
    """A table number: 7 decimals as TPU-MLIR writes them, or (``exact``) the shortest text that
    reads back as the same float64."""
    return repr(float(v)) if exact else f"{v:.7f}"


@dataclass
class CalibrationTable:
    """A calibration table: per-tensor statistics keyed by tensor (location) name, in network order."""

    thresholds: dict[str, TensorStats] = field(default_factory=dict)
    int4_thresholds: dict[str, TensorStats] = field(default_factory=dict)
    fp8_thresholds: dict[str, TensorStats] = field(default_factory=dict)
    asym_ops: list[str] = field(default_factory=list)
    int4_ops: list[str] = field(default_factory=list)
    weight_scales: dict[str, list[float]] = field(default_factory=dict)
    #: per-channel thresholds (Lamina's ``#channel_th`` lines): name → (axis, thresholds)
    channel_thresholds: dict[str, tuple[int, list[float]]] = field(default_factory=dict)
    histogram_bin_num: int | None = None
    sample_num: int | None = None
    tune_num: int | None = None
    generated_time: str | None = None
    #: extra ``#`` comment lines written before ``###`` (e.g. the calibration method)
    comments: list[str] = field(default_factory=list)
    #: write thresholds, min and max with every digit instead of 7 decimals (a table derived from
    #: a quantized model's own scales, which must read back exactly); any reader takes both
    exact: bool = field(default=False, compare=False)
    #: where each entry was read (name → line; ``#channel_th`` entries in ``channel_lines``), for
    #: located errors when the table is checked against a model; empty for a table built in memory
    lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)
    channel_lines: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    # -- access ---------------------------------------------------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self.thresholds

    def __getitem__(self, name: str) -> TensorStats:
        return self.thresholds[name]

    def __len__(self) -> int:
        return len(self.thresholds)

    def get(self, name: str) -> TensorStats | None:
        return self.thresholds.get(name)

    # -- text -----------------------------------------------------------------------------------
    def to_text(self) -> str:
        out: list[str] = []
        when = self.generated_time or str(datetime.datetime.now())
        out.append(f"# genetated time: {when}")
        if self.histogram_bin_num is not None:
            out.append(f"# histogram number: {self.histogram_bin_num}")
        if self.sample_num is not None:
            out.append(f"# sample number: {self.sample_num}")
        if self.tune_num is not None:
            out.append(f"# tune number: {self.tune_num}")
        for c in self.comments:
            out.append(c if c.startswith("#") else f"# {c}")
        out.append("###")
        out.append("# op_name    threshold    min    max")
        x = self.exact
        for name, s in self.thresholds.items():
            out.append(f"{name} {_fmt(s.threshold, x)} {_fmt(s.min, x)} {_fmt(s.max, x)}")
        for name, (axis, ths) in self.channel_thresholds.items():
            out.append(" ".join([CHANNEL_TH, name, str(axis), *(_fmt(v, x) for v in ths)]))
        if self.int4_thresholds:
            out.append("")
            out.append("#int4_th")
            for name, s in self.int4_thresholds.items():
                out.append(f"{name} {_fmt(s.threshold)} {_fmt(s.min)} {_fmt(s.max)}")
        if self.fp8_thresholds:
            out.append("#tpu-mlir-fp8")
            for name, s in self.fp8_thresholds.items():
                out.append(f"{name} {_fmt(s.threshold)} {_fmt(s.min)} {_fmt(s.max)}")
        if self.int4_ops:
            out.append("#int4_op")
            out.extend(self.int4_ops)
        if self.asym_ops:
            out.append("#asym_op")
            out.extend(self.asym_ops)
        if self.weight_scales:
            out.append("#weight_scale")
            for name, scales in self.weight_scales.items():
                out.append(" ".join([name, str(len(scales)), *(repr(float(v)) for v in scales)]))
        return "\n".join(out) + "\n"

    def write(self, path: str) -> None:
        """Write the table atomically in TPU-MLIR's format."""
        atomic_write(path, self.to_text())

    @classmethod
    def parse(cls, text: str, path: str = "<table>") -> CalibrationTable:
        return _parse_table(text, path)


def _float(tok: str, path: str, lineno: int, what: str) -> float:
    try:
        v = float(tok)
    except ValueError:
        raise CalibrationTableError(path, lineno, f"expected a number for {what}, got '{tok}'") from None
    if math.isnan(v):
        raise CalibrationTableError(path, lineno, f"{what} is NaN")
    return v


def _stats_line(toks: list[str], path: str, lineno: int) -> tuple[str, TensorStats]:
    if len(toks) != 4:
        raise CalibrationTableError(
            path, lineno, f"expected 'op_name threshold min max' (4 fields), got {len(toks)} field(s)"
        )
    name = toks[0]
    th = _float(toks[1], path, lineno, "threshold")
    lo = _float(toks[2], path, lineno, "min")
    hi = _float(toks[3], path, lineno, "max")
    if th < 0:
        raise CalibrationTableError(path, lineno, f"threshold of '{name}' is negative ({toks[1]})")
    if th == 0 or math.isinf(th):
        raise CalibrationTableError(
            path, lineno, f"threshold of '{name}' must be a finite number > 0, got {toks[1]}"
        )
    for what, v, tok in (("min", lo, toks[2]), ("max", hi, toks[3])):
        if math.isinf(v):
            raise CalibrationTableError(path, lineno, f"{what} of '{name}' must be finite, got {tok}")
    if lo > hi:
        raise CalibrationTableError(path, lineno, f"min {toks[2]} of '{name}' is greater than max {toks[3]}")
    return name, TensorStats(th, lo, hi)


def _parse_table(text: str, path: str) -> CalibrationTable:
    t = CalibrationTable()
    block = "int8"
    seen_marker = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\r").strip()
        if not line:
            continue
        if line.startswith(CHANNEL_TH + " ") or line == CHANNEL_TH:
            name, axis, ths = _channel_line(line, path, lineno)
            if name in t.channel_thresholds:
                raise CalibrationTableError(path, lineno, f"duplicate #channel_th entry for '{name}'")
            t.channel_thresholds[name] = (axis, ths)
            t.channel_lines[name] = lineno
            continue
        if line.startswith("#"):
            nb = _block_of(line)
            if nb is not None:
                block = nb
                continue
            if not seen_marker:
                if line.startswith("###"):
                    seen_marker = True
                    continue
                m = _HEADER_INT.match(line)
                if m:
                    key = {"histogram number": "histogram_bin_num", "sample number": "sample_num"}.get(
                        m.group(1), "tune_num"
                    )
                    setattr(t, key, int(m.group(2)))
                    continue
                m = _HEADER_TIME.match(line)
                if m:
                    t.generated_time = m.group(1)
                    continue
                if not line.startswith("# op_name"):
                    t.comments.append(line)
            continue
        toks = line.split()
        if block in ("int8", "int4_th", "fp8_th"):
            name, stats = _stats_line(toks, path, lineno)
            target = {"int8": t.thresholds, "int4_th": t.int4_thresholds, "fp8_th": t.fp8_thresholds}[block]
            if name in target:
                raise CalibrationTableError(path, lineno, f"duplicate entry for '{name}'")
            target[name] = stats
            if block == "int8":
                t.lines[name] = lineno
        elif block == "weight_scale":
            if len(toks) < 2:
                raise CalibrationTableError(path, lineno, "expected 'name count scale...' in #weight_scale")
            try:
                n = int(toks[1])
            except ValueError:
                raise CalibrationTableError(
                    path, lineno, f"expected a scale count, got '{toks[1]}' in #weight_scale"
                ) from None
            if n < 0 or len(toks) != 2 + n:
                raise CalibrationTableError(
                    path, lineno, f"'{toks[0]}' declares {n} scale(s) but has {len(toks) - 2}"
                )
            t.weight_scales[toks[0]] = [_float(v, path, lineno, "weight scale") for v in toks[2:]]
        else:  # asym_op / int4_op: one op name per line
            if len(toks) != 1:
                raise CalibrationTableError(path, lineno, f"expected one op name per line in #{block}")
            (t.asym_ops if block == "asym_op" else t.int4_ops).append(toks[0])
    return t


def _read_text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise CalibrationTableError(path, 0, f"cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise CalibrationTableError(path, line, f"invalid UTF-8 byte 0x{data[e.start]:02x}") from None


def read_calibration_table(path: str) -> CalibrationTable:
    """Read a calibration table written by Lamina or TPU-MLIR."""
    return _parse_table(_read_text(path), path)


# ---------------------------------------------------------------------------------------------
# checking a table against the model it is used with
# ---------------------------------------------------------------------------------------------

#: how many unknown names a warning lists
SHOWN_NAMES = 3


def model_tensors(module: object) -> dict[str, object]:
    """Tensor name → IR type of every named result of the model's ``top`` ops (first one wins)."""
    from lamina.ir.constants import holds_constant
    from lamina.ir.naming import result_names

    out: dict[str, object] = {}
    for op in module.walk_ops():  # type: ignore[attr-defined]
        if op.dialect_name != "top" or holds_constant(op):
            continue
        for name, r in zip(result_names(op), op.results):
            out.setdefault(name, r.type)
    return out


def _some(names: list[str]) -> str:
    shown = ", ".join(f"'{n}'" for n in names[:SHOWN_NAMES])
    return shown + (f" and {len(names) - SHOWN_NAMES} more" if len(names) > SHOWN_NAMES else "")


@dataclass
class TableWarning:
    """A problem that does not stop the deployment; ``str(w)`` is ``file:line: warning: message``."""

    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return (
            f"{self.path}:{self.line}: warning: {self.message}"
            if self.line
            else f"{self.path}: warning: {self.message}"
        )


def _unknown_names(path: str, what: str, unknown: list[str], total: int, line: int) -> TableWarning:
    """``N of the <what with M> are not in the model: 'a', 'b', 'c' and K more (ignored)``, at the first."""
    return TableWarning(
        path, line, f"{len(unknown)} of the {what.format(total)} are not in the model: {_some(unknown)} "
        "(ignored; names are the tensor names of model_transform's dumps)",
    )  # fmt: skip


def check_table(table: CalibrationTable, module: object, path: str = "<table>") -> list[TableWarning]:
    """Check a calibration table against the ``top`` model it is deployed with, before lowering.

    Errors raise :class:`CalibrationTableError` (located at the table's line when it was read from a
    file): a table naming none of the model's tensors (an INT8 deployment would leave every op in
    F32), ``#channel_th`` entries whose axis is out of range for the tensor or whose number of
    thresholds is not the tensor's channel count. Returns the warnings: the tensors the model does
    not have (TPU-MLIR ignores them silently)."""
    from lamina.ir.types import RankedTensorType

    tensors = model_tensors(module)
    if not table.thresholds:
        raise CalibrationTableError(
            path, 0, "the calibration table has no thresholds: an INT8 deployment would leave every op in F32 "
            "(run run_calibration on this model)"
        )  # fmt: skip
    unknown = [n for n in table.thresholds if n not in tensors]
    if len(unknown) == len(table.thresholds):
        raise CalibrationTableError(
            path, 0, f"the calibration table names none of the model's {len(tensors)} tensors (it has "
            f"{_some(unknown)}; the model has {_some(list(tensors))}): an INT8 deployment would leave every op "
            "in F32; was it made for another model?"
        )  # fmt: skip
    for name, (axis, ths) in table.channel_thresholds.items():
        t = tensors.get(name)
        if not isinstance(t, RankedTensorType) or not t.has_static_shape:
            continue
        line = table.channel_lines.get(name, 0)
        rank = len(t.shape)
        if axis >= rank:
            raise CalibrationTableError(
                path, line, f"#channel_th axis {axis} is out of range for '{name}' of type {t} "
                f"(expected an axis in 0..{rank - 1})"
            )  # fmt: skip
        if len(ths) != t.shape[axis]:
            raise CalibrationTableError(
                path, line, f"#channel_th '{name}' has {len(ths)} threshold(s) but the tensor has "
                f"{t.shape[axis]} channel(s) along axis {axis} (type {t})"
            )  # fmt: skip
    unknown += [n for n in table.channel_thresholds if n not in tensors and n not in table.thresholds]
    if not unknown:
        return []
    line = table.lines.get(unknown[0]) or table.channel_lines.get(unknown[0], 0)
    return [_unknown_names(path, "table's {} tensors", unknown, len(table.thresholds), line)]


def check_qtable(
    qtable: Mapping[str, str], module: object, path: str = "<qtable>", lines: Mapping[str, int] | None = None
) -> list[TableWarning]:
    """The warnings of a qtable against the model: the layer names the model does not have (their
    modes are ignored). Unknown modes are errors when the qtable is read. ``lines``: name → line."""
    tensors = model_tensors(module)
    unknown = [n for n in qtable if n not in tensors]
    if not unknown:
        return []
    lines = lines if lines is not None else getattr(qtable, "lines", {})
    return [_unknown_names(path, "qtable's {} layers", unknown, len(qtable), lines.get(unknown[0], 0))]


# ---------------------------------------------------------------------------------------------
# qtables
# ---------------------------------------------------------------------------------------------


class QTable(dict):
    """A qtable read from a file: ``op_name -> mode`` in file order, with ``lines`` (name → line)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: dict[str, int] = {}


def parse_qtable(text: str, path: str = "<qtable>") -> QTable:
    res = QTable()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        toks = line.split()
        if len(toks) != 2:
            raise CalibrationTableError(
                path, lineno, f"expected 'op_name quantize_mode' (2 fields), got {len(toks)} field(s)"
            )
        name, mode = toks[0], toks[1].upper()
        if mode not in QTABLE_MODES:
            raise CalibrationTableError(
                path, lineno, f"unknown quantize mode '{toks[1]}' (expected one of {', '.join(QTABLE_MODES)})"
            )
        if name in res and res[name] != mode:
            raise CalibrationTableError(path, lineno, f"'{name}' is given two modes ({res[name]} and {mode})")
        res[name] = mode
        res.lines.setdefault(name, lineno)
    return res


def read_qtable(path: str) -> QTable:
    """Read a TPU-MLIR qtable: op_name -> mode (INT8, F16, BF16, F32, ...), in file order."""
    return parse_qtable(_read_text(path), path)


def format_qtable(modes: Mapping[str, str] | Iterable[tuple[str, str]], comments: Iterable[str] = ()) -> str:
    items = list(modes.items()) if isinstance(modes, Mapping) else list(modes)
    out = [f"# genetated time: {datetime.datetime.now()}"]
    out += [c if c.startswith("#") else f"# {c}" for c in comments]
    out += ["###", "# op_name   quantize_mode"]
    for name, mode in items:
        m = mode.upper()
        if m not in QTABLE_MODES:
            raise ValueError(f"unknown quantize mode '{mode}' for '{name}'")
        out.append(f"{name} {m}")
    return "\n".join(out) + "\n"


def write_qtable(
    path: str, modes: Mapping[str, str] | Iterable[tuple[str, str]], comments: Iterable[str] = ()
) -> None:
    """Write a qtable atomically in TPU-MLIR's format."""
    atomic_write(path, format_qtable(modes, comments))

"""Quantizing a module, as a library: lower a ``top`` module to the quantized ``tpu`` IR
(:func:`deploy_module`, running :func:`deploy_pipeline`) and run the result on Lamina's bit-exact
``tpu`` interpreter with its outputs dequantized to float32 (:func:`run_tpu_module`).

The ``model_deploy`` flow (:mod:`lamina.flows.deploy`: options, validation, files, comparison) is
built on these functions; the mixed-precision search (:mod:`lamina.quant.search`), which lives on
this floor, and the benchmarks call them directly. Tables in memory go to the passes as objects (the
passes' ``table`` and ``qtable_entries``), never through temporary files. Failures raise
:class:`~lamina.support.errors.ToolError` with the pass diagnostics.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lamina.frontends.model_io import check_inputs, module_signature, run_top_module, weight_names
from lamina.support.errors import ToolError

__all__ = [
    "MODES",
    "deploy_module",
    "deploy_pipeline",
    "run_tpu_module",
    "to_float",
    "value_types",
]

#: The quantization modes a whole model can be lowered in.
MODES = ("F32", "F16", "BF16", "INT8")


# ---- lowering ------------------------------------------------------------------------------------------


def _quote(path: str) -> str:
    return '"' + path.replace('"', '\\"') + '"' if any(c in path for c in ' ,{}="') else path


def deploy_pipeline(
    mode: str, asymmetric: bool, calibration_table: Any, qtable: Any, int_forms: str = "default"
) -> str:
    """The pass pipeline ``model_deploy`` runs (pass names/options of :mod:`lamina.dialects.tpu`).
    ``calibration_table`` and ``qtable`` are paths (written into the pipeline), None, or objects in
    memory: a table in memory still needs ``import-calibration-table`` (without ``file``; the table
    is set on the pass), a qtable in memory adds no option (it is set on the pass). ``int_forms``:
    ``convert-top-to-tpu``'s ``int-forms`` option (written only when not ``default``)."""
    passes = []
    if calibration_table is not None and calibration_table != "":
        opts = f"file={_quote(calibration_table)}" if isinstance(calibration_table, str) else ""
        if asymmetric:
            opts += (" " if opts else "") + "asymmetric=true"
        passes.append(f"import-calibration-table{{{opts}}}" if opts else "import-calibration-table")
    opts = f"mode={mode} asymmetric={'true' if asymmetric else 'false'}"
    if isinstance(qtable, str) and qtable:
        opts += f" qtable={_quote(qtable)}"
    if int_forms and int_forms != "default":
        opts += f" int-forms={_quote(int_forms)}"
    passes.append(f"convert-top-to-tpu{{{opts}}}")
    passes.append(_canonicalize_pass())
    return "builtin.module(" + ",".join(passes) + ")"


def _canonicalize_pass() -> str:
    """``tpu-canonicalize`` (merge requants, fold casts) when the tpu dialect registers it."""
    try:
        import lamina.dialects.tpu  # noqa: F401
        from lamina.passes.registry import get_pass

        return "tpu-canonicalize" if get_pass("tpu-canonicalize") is not None else "canonicalize"
    except ImportError:
        return "canonicalize"


def deploy_module(
    module: Any,
    mode: str,
    *,
    asymmetric: bool = False,
    calibration_table: Any = None,
    qtable: Any = None,
    ctx: Any = None,
    clone: bool = True,
    warn: Callable[[str], None] | None = None,
    capabilities: Any = None,
    int_forms: str = "default",
) -> Any:
    """Lower a ``top`` module to ``tpu`` in ``mode`` (F32/F16/BF16/INT8) and return the ``tpu`` module.

    ``calibration_table`` is a path or a :class:`~lamina.dialects.tpu.tables.CalibrationTable`; ``qtable`` a
    path or a mapping ``op name -> mode``. The input module is left untouched unless ``clone=False``.
    Both are checked against the model first: a table naming none of its tensors, a ``#channel_th``
    that does not fit its tensor, an unknown qtable mode are errors, and the names the model does not
    have are one warning each, passed to ``warn`` (default: :func:`warnings.warn`; ``lambda m: None``
    silences them). ``capabilities`` (a :class:`~lamina.dialects.tpu.TargetCapabilities`) lowers for
    a target other than the reference interpreter. ``int_forms`` chooses the optional integer forms
    of INT8 (``default``, ``all``, ``none`` or a list of ``lut``, ``gather``, ``softmax``,
    ``layernorm``; ``docs/tpu.md``). Failures (a missing threshold, an op that cannot
    be lowered) raise :class:`ToolError` with the pass diagnostics."""
    import lamina.dialects
    from lamina.ir.context import Context
    from lamina.passes import PassManager

    try:
        import lamina.dialects.tpu  # noqa: F401  (registers the tpu dialect and its passes)
    except ImportError as e:
        raise ToolError(f"the tpu dialect is not available: {e}") from None
    mode = mode.upper()
    if mode not in MODES:
        raise ToolError(f"mode must be one of {', '.join(MODES)}, got '{mode}'")
    from lamina.dialects.tpu.lowering.state import parse_int_forms
    from lamina.dialects.tpu.transforms.import_calibration import IN_MEMORY_TABLE, ImportCalibrationTable
    from lamina.dialects.tpu.transforms.lowering import ConvertTopToTpu
    from lamina.quant.calibration import CalibrationError, check_top_module

    try:
        parse_int_forms(int_forms)
    except ValueError as e:
        raise ToolError(str(e)) from None

    try:
        check_top_module(module, None, "deploy_module")
    except CalibrationError as e:
        raise ToolError(str(e)) from None
    if isinstance(calibration_table, os.PathLike):
        calibration_table = os.fspath(calibration_table)
    if isinstance(qtable, os.PathLike):
        qtable = os.fspath(qtable)
    if isinstance(calibration_table, str) and not calibration_table:
        calibration_table = None
    table = _in_memory_table(calibration_table)
    entries = _in_memory_qtable(qtable)
    table_name = calibration_table if isinstance(calibration_table, str) else IN_MEMORY_TABLE
    qtable_name = (qtable if isinstance(qtable, str) else "<qtable>") if qtable else None
    work = module.clone() if clone else module
    ctx = ctx or getattr(module, "context", None) or Context()
    diags: list[Any] = []
    pipeline = deploy_pipeline(
        mode, asymmetric, calibration_table, qtable if isinstance(qtable, str) else None, int_forms
    )
    with ctx.diagnostics.handler(diags.append), ctx:
        try:
            pm = PassManager.parse(pipeline, ctx)
        except Exception as e:
            raise ToolError(f"cannot build the lowering pipeline '{pipeline}': {e}") from None
        for p in pm.passes():
            if table is not None and isinstance(p, ImportCalibrationTable):
                p.table = table
            if entries is not None and isinstance(p, ConvertTopToTpu):
                p.qtable_entries = entries
            if capabilities is not None and isinstance(p, ConvertTopToTpu):
                p.capabilities = capabilities
        if not pm.run(work):
            table_errors = _file_errors(
                diags, (table_name if calibration_table is not None else None, qtable_name)
            )
            if table_errors:
                raise ToolError("\n".join(table_errors))
            raise ToolError(f"lowering to tpu ({mode}) failed:\n" + "\n".join(str(d) for d in diags))
    for d in diags:
        if d.severity == "warning":
            if warn is None:
                warnings.warn(str(d), stacklevel=2)
            else:
                warn(str(d))
    return work


def _in_memory_table(table: Any) -> Any:
    """A :class:`~lamina.dialects.tpu.tables.CalibrationTable` given in memory, with the values it has
    once written and read back (7 decimals), so that it lowers exactly as the same table deployed
    from its file; None for a path or no table."""
    if table is None or isinstance(table, str):
        return None
    from lamina.dialects.tpu.tables import CalibrationTable
    from lamina.dialects.tpu.transforms.import_calibration import IN_MEMORY_TABLE

    return CalibrationTable.parse(table.to_text(), IN_MEMORY_TABLE)


def _in_memory_qtable(qtable: Any) -> dict[str, str] | None:
    """A qtable given as a mapping, its modes checked and upper-cased; None for a path or none."""
    if qtable is None or isinstance(qtable, str) or not qtable:
        return None
    from lamina.dialects.tpu.tables import QTABLE_MODES

    out: dict[str, str] = {}
    for name, mode in dict(qtable).items():
        if not isinstance(mode, str) or mode.upper() not in QTABLE_MODES:
            raise ToolError(
                f"qtable: unknown quantize mode {mode!r} for '{name}' (expected one of {', '.join(QTABLE_MODES)})"
            )
        out[name] = mode.upper()
    return out


def _file_errors(diags: list[Any], paths: tuple[str | None, ...]) -> list[str]:
    """The errors about the calibration table or qtable themselves (``file:line: error: ...``, or
    ``file: error: ...`` for the whole file): bad input, not a failure of the lowering."""
    out = []
    for d in diags:
        if d.severity != "error":
            continue
        flc = d.location.file_line_col()
        for p in paths:
            if p and flc is not None and flc.filename == p:
                out.append(str(d))
            elif p and d.message.startswith(p + ": "):
                out.append(f"{p}: error: {d.message[len(p) + 2 :]}")
    return out


# ---- running -------------------------------------------------------------------------------------------


def value_types(module: Any) -> dict[str, Any]:
    """Tensor name -> IR type of every named result (for dequantizing dumps)."""
    from lamina.ir.naming import result_names

    out: dict[str, Any] = {}
    for op in module.walk_ops():
        for name, r in zip(result_names(op), op.results):
            out[name] = r.type
    return out


def to_float(a: np.ndarray, t: Any) -> np.ndarray:
    """Dequantize an integer tensor of quantized type ``t`` to float32; f16/bf16 become float32."""
    from lamina.dialects.quant import QuantizedType

    elem = getattr(t, "element_type", None)
    if isinstance(elem, QuantizedType):
        from lamina.dialects.tpu.quantize import dequantize

        return np.asarray(dequantize(np.asarray(a), t), np.float32)
    a = np.asarray(a)
    if a.dtype.kind == "f" and a.dtype != np.float32 and a.dtype != np.float64:
        return a.astype(np.float32)
    if a.dtype.kind == "V" or str(a.dtype) in ("bfloat16", "float16"):
        return a.astype(np.float32)
    return a


def run_tpu_module(
    module: Any, inputs: Mapping[str, np.ndarray], dump_all: bool = False, out_fixed: bool = False
) -> dict[str, np.ndarray]:
    """Run a ``tpu`` module on the interpreter. Outputs keyed by output name (every tensor with
    ``dump_all``), dequantized to float32 unless ``out_fixed`` (the stored integers kept)."""
    sig = module_signature(module)
    feeds = check_inputs(dict(inputs), sig, "inputs")
    fixed_sources = _fixed_output_sources(module) if out_fixed else {}
    res = run_top_module(module, feeds, dump_all=dump_all or bool(fixed_sources))
    if dump_all or fixed_sources:
        skip = weight_names(module) - set(sig.output_names)
        res = {k: v for k, v in res.items() if k not in skip}
    if out_fixed:
        # The stored integers: an output produced by a final dequantizing tpu.Cast is replaced by
        # the cast's quantized input.
        for out_name, src in fixed_sources.items():
            if src in res:
                res[out_name] = res[src]
        return res if dump_all else {k: res[k] for k in sig.output_names if k in res}
    types = value_types(module)
    sig = module_signature(module)
    ret_types = _return_types(module)
    out: dict[str, np.ndarray] = {}
    for k, v in res.items():
        t = types.get(k)
        if k in sig.output_names and k in ret_types:
            t = ret_types[k]
        out[k] = to_float(v, t) if t is not None else np.asarray(v)
    return out


def _fixed_output_sources(module: Any) -> dict[str, str]:
    """Output name -> name of the quantized tensor a final dequantizing ``tpu.Cast`` reads."""
    from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
    from lamina.execution.interpreter import find_main
    from lamina.ir.naming import result_names

    func = find_main(module)
    ret = func.regions[0].blocks[0].last_op
    out: dict[str, str] = {}
    if ret is None:
        return out
    quantized = (UniformQuantizedType, UniformQuantizedPerAxisType)
    for name, v in zip(module_signature(module).output_names, ret.operands):
        op = v.defining_op()
        if op is None or op.name != "tpu.Cast":
            continue
        src = op.operands[0]
        if isinstance(getattr(src.type, "element_type", None), quantized) and src.defining_op() is not None:
            out[name] = result_names(src.defining_op())[src.index]
    return out


def _return_types(module: Any) -> dict[str, Any]:
    from lamina.execution.interpreter import find_main

    func = find_main(module)
    ret = func.regions[0].blocks[0].last_op
    names = module_signature(module).output_names
    return {n: v.type for n, v in zip(names, ret.operands)} if ret is not None else {}

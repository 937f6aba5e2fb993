"""The quantization flow as a library: lower a ``top`` module to the quantized ``tpu`` IR
(:func:`deploy_module`, running :func:`deploy_pipeline`) and run the result on Lamina's bit-exact
``tpu`` interpreter with its outputs dequantized to float32 (:func:`run_tpu_module`).

The ``model_deploy`` command (flags, validation, files, comparison) is built on these functions; the
mixed-precision search (:mod:`lamina.quant.search`) and the benchmarks call them directly. Failures raise
:class:`~lamina.frontends.model_io.ToolError` with the pass diagnostics.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lamina.frontends.model_io import ToolError, check_inputs, module_signature, run_top_module

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


def deploy_pipeline(mode: str, asymmetric: bool, calibration_table: str | None, qtable: str | None) -> str:
    """The pass pipeline ``model_deploy`` runs (pass names/options of :mod:`lamina.dialects.tpu`)."""
    passes = []
    if calibration_table:
        asym = " asymmetric=true" if asymmetric else ""
        passes.append(f"import-calibration-table{{file={_quote(calibration_table)}{asym}}}")
    opts = f"mode={mode} asymmetric={'true' if asymmetric else 'false'}"
    if qtable:
        opts += f" qtable={_quote(qtable)}"
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
) -> Any:
    """Lower a ``top`` module to ``tpu`` in ``mode`` (F32/F16/BF16/INT8) and return the ``tpu`` module.

    ``calibration_table`` is a path or a :class:`~lamina.dialects.tpu.tables.CalibrationTable`; ``qtable`` a
    path or a mapping ``op name -> mode``. The input module is left untouched unless ``clone=False``.
    Both are checked against the model first: a table naming none of its tensors, a ``#channel_th``
    that does not fit its tensor, an unknown qtable mode are errors, and the names the model does not
    have are one warning each, passed to ``warn`` (default: :func:`warnings.warn`; ``lambda m: None``
    silences them). Failures (a missing threshold, an op that cannot be lowered) raise
    :class:`ToolError` with the pass diagnostics."""
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
    from lamina.quant.calibration import CalibrationError, check_top_module

    try:
        check_top_module(module, None, "deploy_module")
    except CalibrationError as e:
        raise ToolError(str(e)) from None
    tmpdir = tempfile.mkdtemp(prefix="lamina-deploy-")
    try:
        table_path = _materialize_table(calibration_table, tmpdir)
        qtable_path = _materialize_qtable(qtable, tmpdir)
        work = module.clone() if clone else module
        ctx = ctx or getattr(module, "context", None) or Context()
        diags: list[Any] = []
        pipeline = deploy_pipeline(mode, asymmetric, table_path, qtable_path)
        with ctx.diagnostics.handler(diags.append), ctx:
            try:
                pm = PassManager.parse(pipeline, ctx)
            except Exception as e:
                raise ToolError(f"cannot build the lowering pipeline '{pipeline}': {e}") from None
            if not pm.run(work):
                table_errors = _file_errors(diags, (table_path, qtable_path))
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
    finally:
        import shutil

        shutil.rmtree(tmpdir, ignore_errors=True)


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


_PLUMBING = frozenset({"tpu.Cast", "tpu.Requant", "tpu.Weight", "top.Weight", "top.None", "top.Input"})


def summarize_tpu_module(module: Any) -> str:
    """One line on what a lowered module computes in which mode: compute ops with quantized values
    (INT8; how many with per-channel activations), ops in each float type, and the casts/requants
    between modes, e.g. ``120 ops INT8 (21 with per-channel activations), 17 F32, 34 casts/requants``."""
    from lamina.dialects.quant import QuantizedType, UniformQuantizedPerAxisType
    from lamina.ir.types import ShapedType

    def elem(v: Any) -> Any:
        return v.type.element_type if isinstance(v.type, ShapedType) else v.type

    def is_weight(v: Any) -> bool:
        d = v.defining_op()
        return d is not None and d.name in ("tpu.Weight", "top.Weight")

    int8 = per_channel = casts = 0
    floats: dict[str, int] = {}
    for op in module.walk_ops():
        if op.name in ("tpu.Cast", "tpu.Requant"):
            casts += 1
        if op.name in _PLUMBING or op.dialect_name not in ("tpu", "top") or not op.results:
            continue
        values = [*op.operands, *op.results]
        if any(isinstance(elem(v), QuantizedType) for v in values):
            int8 += 1
            acts = [v for v in values if not is_weight(v)]
            per_channel += any(isinstance(elem(v), UniformQuantizedPerAxisType) for v in acts)
        else:
            ft = next((str(elem(r)) for r in op.results if isinstance(r.type, ShapedType)), "f32")
            floats[ft.upper()] = floats.get(ft.upper(), 0) + 1

    def ops(n: int) -> str:
        return f"{n} op{'' if n == 1 else 's'}"

    parts = [f"{ops(int8)} INT8" + (f" ({per_channel} with per-channel activations)" if per_channel else "")]
    parts = parts if int8 else []
    parts += [f"{ops(n)} {k}" for k, n in sorted(floats.items())]
    parts.append(f"{casts} casts/requants")
    return ", ".join(parts)


def _materialize_table(table: Any, tmpdir: str) -> str | None:
    if table is None or isinstance(table, (str, os.PathLike)):
        return None if table is None else os.fspath(table)
    path = os.path.join(tmpdir, "cali_table")
    table.write(path)
    return path


def _materialize_qtable(qtable: Any, tmpdir: str) -> str | None:
    if qtable is None or isinstance(qtable, (str, os.PathLike)):
        return None if qtable is None else os.fspath(qtable)
    if not qtable:
        return None
    from lamina.dialects.tpu.tables import write_qtable

    path = os.path.join(tmpdir, "qtable")
    write_qtable(path, dict(qtable))
    return path


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
        skip = _weight_names(module) - set(sig.output_names)
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


def _weight_names(module: Any) -> set[str]:
    from lamina.ir.naming import result_names

    out: set[str] = set()
    for op in module.walk_ops():
        if op.name.endswith((".Weight", ".None")):
            out.update(result_names(op))
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

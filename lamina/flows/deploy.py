"""The ``model_deploy`` flow: lower a ``top`` model to the quantized ``tpu`` IR, run it, compare it.

:func:`deploy` takes a :class:`DeployOptions` (the command's flags as Python values: paths, or a
calibration table, a qtable, inputs and a reference in memory) and returns a :class:`DeployResult`
(the ``tpu`` module, the files written, the outputs, the comparison). ``model_deploy``
(:mod:`lamina.tools.deploy`) parses its flags into the options and prints the result;
:func:`lamina.api.deploy` checks its arguments into the same options.

Steps (each logged as its equivalent command):

1. parse ``mlir`` (a ``top`` module, as ``model_transform`` writes it), unless given the module;
2. lower it (:func:`lamina.quant.deploy.deploy_module`: ``import-calibration-table``,
   ``convert-top-to-tpu`` for the processor's capabilities, ``tpu-canonicalize``) and, with
   ``model``, write ``<prefix>_tpu.mlir`` (weights in ``<prefix>_tpu_weights.npz``), ``<prefix>``
   being ``model`` without its extension (``.lamina``, ``.bmodel``, ``.cvimodel``, ``.mlir``,
   ``.lmodel``);
3. compile it for the processor's target when one is built (:mod:`lamina.targets.base`: the NPU
   chips ``lnpu``, ``lnpu-edge`` or a ``chip_config`` file; the CPU) and, with ``model``, write the
   compiled ``.lamina`` file: ``model`` itself when its extension is a model file's (``.lamina``,
   ``.bmodel``, ``.cvimodel``, ``.lmodel``), else ``<prefix>.lamina``;
4. with ``test_input``: run the ``tpu`` module on Lamina's bit-exact ``tpu`` interpreter (outputs, or
   every tensor with ``compare_all``, dequantized to float32, keyed by tensor name), written to
   ``<prefix>_tpu_outputs.npz`` with ``model``; run the compiled model (read back from its file) and
   check it against the interpreter — bit for bit in INT8 (each output no float GEMM feeds:
   :func:`exact_outputs`), within cosine :data:`FLOAT_TARGET_COSINE` in a float mode and for the
   outputs of a mixed-precision model's float GEMMs — writing ``<prefix>_model_outputs.npz``;
5. with ``test_reference``: compare under ``tolerance`` (defaults as TPU-MLIR's:
   :data:`DEFAULT_TOLERANCE`); outside it, :attr:`DeployResult.diverging` names the first diverging
   layers in network order.

Invalid option combinations raise :class:`~lamina.support.errors.UsageError` before any work (see
:func:`validate`); any other problem a :class:`~lamina.support.errors.ToolError`.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.compare import CompareReport, compare_sets
from lamina.frontends.model_io import check_inputs, load_npz, module_signature, save_npz
from lamina.ir.traits import ConstantLike, NotALayer
from lamina.quant.deploy import MODES, deploy_module, run_tpu_module
from lamina.support.errors import LaminaError, ToolError, UsageError
from lamina.support.paths import check_outputs

__all__ = [
    "DEFAULT_TOLERANCE",
    "FLOAT_TARGET_COSINE",
    "MODES",
    "PROCESSORS",
    "QTABLE_LOWERABLE",
    "DeployOptions",
    "DeployResult",
    "deploy",
    "deploy_command",
    "exact_outputs",
    "layer_names",
    "summarize_tpu_module",
    "validate",
    "validate_with_module",
]

#: Modes a qtable may give an op (TPU-MLIR also has INT4/F8/UINT8 entries; they are not lowered yet).
QTABLE_LOWERABLE = ("F32", "F16", "BF16", "INT8")
#: ``--processor`` values that run the ``tpu`` interpreter unless ``model`` names a compiled file
#: (``cpu``: compiled to native code by the CPU target for ``--model x.lamina``/``x.bmodel``); the
#: built targets add theirs (:func:`processor_names`).
PROCESSORS = ("cpu",)
#: The least cosine between a compiled float model's outputs and the ``tpu`` interpreter's.
FLOAT_TARGET_COSINE = 0.99999
#: TPU-MLIR's default ``--tolerance`` per mode (cosine, euclidean).
DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "INT8": (0.90, 0.80),
    "F16": (0.99, 0.90),
    "BF16": (0.99, 0.90),
    "F32": (0.99, 0.99),
}
MODEL_EXTENSIONS = (".lamina", ".bmodel", ".cvimodel", ".mlir", ".lmodel")
#: ``--model`` extensions naming the compiled file itself
COMPILED_EXTENSIONS = (".lamina", ".bmodel", ".cvimodel", ".lmodel")
#: How many diverging layers a failed comparison names.
FIRST_DIVERGING = 5


def _path(x: Any) -> str | None:
    """``x`` when it is a path, None when it is given in memory (or not at all)."""
    return x if isinstance(x, str) else None


def _given(x: Any) -> bool:
    return bool(x) if isinstance(x, str) else x is not None


@dataclass
class DeployOptions:
    """``model_deploy``'s flags. ``calibration_table``, ``quantize_table``, ``test_input`` and
    ``test_reference`` are paths, or (from the API) a
    :class:`~lamina.dialects.tpu.tables.CalibrationTable`, a mapping ``op name -> mode`` and arrays
    by name. ``mlir`` is None when :func:`deploy` is given the module; ``model`` None writes nothing."""

    mlir: str | None
    quantize: str
    model: str | None = None
    processor: str = "cpu"
    asymmetric: bool = False
    #: ``--int_forms``: the optional integer forms of INT8 (``docs/tpu.md``)
    int_forms: str = "default"
    calibration_table: Any = None
    quantize_table: Any = None
    test_input: Any = None
    test_reference: Any = None
    tolerance: tuple[float, float] | None = None
    compare_all: bool = False
    excepts: list[str] = field(default_factory=list)
    debug: bool = False
    chip_config: str | None = None
    disable_layer_group: bool = False
    #: CPU: also write ``<prefix>.so`` and ``<prefix>.h``, the model as a C-ABI shared library
    export_lib: bool = False
    #: ``--task``: compare the outputs as the task reads them (:mod:`lamina.tasks`), its threshold
    #: (None: the task's default) and the score under which the deployment fails (None: report only)
    task: str | None = None
    task_threshold: float | None = None
    task_tolerance: float | None = None
    #: ``--mask_input``: the attention-mask input whose kept positions the comparison counts
    #: ("auto": detected, :mod:`lamina.quant.masking`; "none": every position)
    mask_input: str | None = "auto"

    @property
    def prefix(self) -> str | None:
        if self.model is None:
            return None
        stem, ext = os.path.splitext(self.model)
        return stem if ext.lower() in MODEL_EXTENSIONS else self.model

    @property
    def compiled_path(self) -> str | None:
        """Where the compiled model goes (None without ``model``)."""
        if self.model is None:
            return None
        if os.path.splitext(self.model)[1].lower() in COMPILED_EXTENSIONS:
            return self.model
        return f"{self.prefix}.lamina"

    @property
    def effective_tolerance(self) -> tuple[float, float]:
        return self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCE[self.quantize]


@dataclass
class DeployResult:
    """What :func:`deploy` did: the ``tpu`` module, the files written and the comparison."""

    module: Any
    tpu_mlir: str | None
    weights: str | None = None
    outputs_npz: str | None = None
    outputs: dict[str, np.ndarray] | None = None
    report: CompareReport | None = None
    diverging: list[str] = field(default_factory=list)
    #: the compiled model (when the processor has a target), its file, where each layer runs, the
    #: lines about it, its outputs on ``test_input`` and their check against the interpreter
    compiled: Any = None
    model_file: str | None = None
    #: the shared library and header of ``export_lib``
    library: tuple[str, str] | None = None
    placement: dict[str, str] = field(default_factory=dict)
    compile_report: list[str] = field(default_factory=list)
    model_outputs: dict[str, np.ndarray] | None = None
    model_outputs_npz: str | None = None
    target_check: list[str] = field(default_factory=list)
    #: the outputs checked bit for bit (the others by cosine: see :func:`exact_outputs`)
    exact_outputs: list[str] = field(default_factory=list)
    #: ``--task``: one report per output checked, and those scoring under ``--task_tolerance``
    task_reports: list[Any] = field(default_factory=list)
    task_failed: list[Any] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return (self.report is None or self.report.passed) and not self.target_check and not self.task_failed


# ---- validation ---------------------------------------------------------------------------------------


def layer_names(module: Any) -> list[str]:
    """The location names of the ops a qtable may name (every op with a tensor result except the
    model's plumbing: inputs, weights and ``top.None``), in network order."""
    from lamina.ir.naming import result_names

    out: list[str] = []
    seen: set[str] = set()
    for op in module.walk_ops():
        if op.has_trait(NotALayer) or not op.results:
            continue
        for n in result_names(op):
            if n not in seen:
                seen.add(n)
                out.append(n)
    return out


def read_qtable_checked(path: str, module: Any | None) -> dict[str, str]:
    """Read a qtable; unknown op names and modes that cannot be lowered are a located UsageError."""
    from lamina.dialects.tpu.tables import CalibrationTableError, read_qtable

    try:
        qtable = read_qtable(path)
    except CalibrationTableError as e:
        raise UsageError(str(e)) from None
    except OSError as e:
        raise UsageError(f"cannot read quantize table '{path}': {e.strerror or e}") from None
    return check_qtable_entries(qtable, module, path)


def check_qtable_entries(qtable: Mapping[str, str], module: Any | None, name: str) -> dict[str, str]:
    """The qtable ``name`` (a file, or ``quantize_table`` in memory) with its modes upper-cased;
    modes that cannot be lowered and op names the model does not have are a UsageError."""
    bad_key = next((k for k, m in qtable.items() if not isinstance(k, str) or not isinstance(m, str)), None)
    if bad_key is not None:
        raise UsageError(f"{name}: error: entries must be 'op name' -> 'mode' strings, got {bad_key!r}")
    bad_modes = sorted({m for m in qtable.values() if m.upper() not in QTABLE_LOWERABLE})
    if bad_modes:
        raise UsageError(
            f"{name}: error: mode(s) {', '.join(bad_modes)} cannot be lowered yet "
            f"(supported: {', '.join(QTABLE_LOWERABLE)})"
        )
    upper = {k: v.upper() for k, v in qtable.items()}
    if module is not None:
        known = set(layer_names(module))
        unknown = [k for k in upper if k not in known]
        if unknown:
            shown = ", ".join(f"'{k}'" for k in unknown[:5]) + (
                f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            )
            raise UsageError(
                f"{name}: error: {len(unknown)} op(s) not in the model: {shown} "
                "(qtable names are the tensor names of model_transform's dumps)"
            )
    return upper


def processor_names() -> tuple[str, ...]:
    """Every ``--processor`` value: ``cpu`` and the names the built targets compile for."""
    from lamina.targets.base import processors

    return tuple(dict.fromkeys((*PROCESSORS, *processors())))


def target_of(o: DeployOptions) -> Any:
    """The compiled target of the options' processor (None: ``cpu`` without a CPU target, or
    without a ``model`` naming a compiled file — ``.lamina``, ``.bmodel``, ... —: the ``tpu``
    interpreter runs it, as before the CPU target); a bad ``chip_config`` is a ToolError naming the
    file."""
    from lamina.targets.base import get_target

    if o.processor in PROCESSORS and not (
        o.model is not None and os.path.splitext(o.model)[1].lower() in COMPILED_EXTENSIONS
    ):
        return None

    extra: dict[str, Any] = {}
    if o.chip_config:
        extra["chip_config"] = o.chip_config
    try:
        return get_target(o.processor, **extra)
    except LaminaError as e:
        raise ToolError(str(e)) from None


def validate(o: DeployOptions) -> None:
    """Reject invalid flags and combinations (module-independent checks) with a UsageError."""
    o.quantize = o.quantize.upper()
    if o.quantize not in MODES:
        raise UsageError(f"--quantize must be one of {', '.join(MODES)}, got '{o.quantize}'")
    names = processor_names()
    if o.processor.lower() not in names:
        raise UsageError(f"--processor '{o.processor}' is not supported: Lamina targets {', '.join(names)}")
    o.processor = o.processor.lower()
    kinds = _processor_kinds()
    if o.chip_config is not None and kinds.get(o.processor) != "npu":
        raise UsageError(f"--chip_config describes an NPU chip; --processor {o.processor} is not an NPU")
    if o.chip_config is not None and not os.path.isfile(o.chip_config):
        raise UsageError(
            f"--chip_config '{o.chip_config}' does not exist"
            if not os.path.exists(o.chip_config)
            else f"--chip_config '{o.chip_config}' is not a file"
        )
    if o.disable_layer_group and kinds.get(o.processor) != "npu":
        raise UsageError(f"--disable_layer_group applies to an NPU processor, not {o.processor}")
    if o.export_lib and (
        kinds.get(o.processor) != "cpu"
        or o.model is None
        or os.path.splitext(o.model)[1].lower() not in COMPILED_EXTENSIONS
    ):
        raise UsageError(
            "--export_lib applies to --processor cpu with --model naming the compiled file (x.lamina, x.bmodel)"
        )
    if o.asymmetric and o.quantize != "INT8":
        raise UsageError(f"--asymmetric applies to --quantize INT8 only, not {o.quantize}")
    if o.int_forms != "default":
        from lamina.dialects.tpu.lowering.state import parse_int_forms

        if o.quantize != "INT8":
            raise UsageError(f"--int_forms applies to --quantize INT8 only, not {o.quantize}")
        try:
            parse_int_forms(o.int_forms)
        except ValueError as e:
            raise UsageError(f"--int_forms: {e}") from None
    if o.quantize == "INT8" and not _given(o.calibration_table):
        raise UsageError("--quantize INT8 needs --calibration_table (run run_calibration first)")
    inputs = [
        ("--mlir", o.mlir),
        ("--chip_config", o.chip_config),
        ("--calibration_table", _path(o.calibration_table)),
        ("--quantize_table", _path(o.quantize_table)),
        ("--test_input", _path(o.test_input)),
        ("--test_reference", _path(o.test_reference)),
    ]
    for flag, path in inputs:
        if path is not None and not os.path.isfile(path):
            raise UsageError(
                f"{flag} '{path}' does not exist"
                if not os.path.exists(path)
                else f"{flag} '{path}' is not a file"
            )
    if not _given(o.test_input):
        for flag, given in (
            ("--test_reference", _given(o.test_reference)),
            ("--compare_all", o.compare_all),
            ("--tolerance", o.tolerance is not None),
            ("--excepts", bool(o.excepts)),
        ):
            if given:
                raise UsageError(f"{flag} needs --test_input (there is nothing to compare without it)")
    elif not _given(o.test_reference):
        for flag, given in (("--tolerance", o.tolerance is not None), ("--excepts", bool(o.excepts))):
            if given:
                raise UsageError(f"{flag} needs --test_reference (the top outputs to compare against)")
    _validate_task(o)
    prefix = o.prefix
    if prefix is None:
        return
    d = os.path.dirname(os.path.abspath(prefix))
    if not os.path.isdir(d):
        raise UsageError(f"--model '{o.model}': directory '{d}' does not exist")
    compiled = o.compiled_path if o.processor in _processor_kinds() else None
    check_outputs(
        inputs,
        [
            ("--model", o.model if compiled != o.model else None),
            ("the tpu .mlir", prefix + "_tpu.mlir"),
            ("the tpu weight file", prefix + "_tpu_weights.npz"),
            ("the tpu outputs", prefix + "_tpu_outputs.npz" if _given(o.test_input) else None),
            ("the compiled model", compiled),
            (
                "the compiled model's outputs",
                prefix + "_model_outputs.npz" if compiled and _given(o.test_input) else None,
            ),
        ],
    )


def _validate_task(o: DeployOptions) -> None:
    from lamina.tasks import TASKS

    if o.task is None:
        for flag, given in (("--task_threshold", o.task_threshold), ("--task_tolerance", o.task_tolerance)):
            if given is not None:
                raise UsageError(f"{flag} needs --task")
        return
    o.task = o.task.lower()
    if o.task not in TASKS:
        raise UsageError(f"--task must be one of {', '.join(TASKS)}, got '{o.task}'")
    if not (_given(o.test_input) and _given(o.test_reference)):
        raise UsageError(
            "--task needs --test_input and --test_reference (the float outputs it compares with)"
        )
    for flag, v in (("--task_threshold", o.task_threshold), ("--task_tolerance", o.task_tolerance)):
        if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v)):
            raise UsageError(f"{flag} must be a number, got {v!r}")
    if o.task_tolerance is not None and not 0 <= o.task_tolerance <= 1:
        raise UsageError(f"--task_tolerance is a score in [0, 1], got {o.task_tolerance}")


def _task_reference(o: DeployOptions, ref: Mapping[str, np.ndarray], sig: Any, source: str) -> dict[str, Any]:
    """The model outputs ``--task`` checks, from the reference (checked before any file is written)."""
    from lamina.tasks import TaskError, task_outputs

    outs = {n: ref[n] for n in sig.output_names if n in ref}
    try:
        task_outputs(str(o.task), outs)
    except TaskError as e:
        raise ToolError(f"{source}: {e}") from None
    return outs


def _processor_kinds() -> dict[str, str]:
    from lamina.targets.base import processors

    return processors()


def validate_with_module(o: DeployOptions, module: Any) -> dict[str, str]:
    """Checks that need the model: the qtable's names and whether the calibration table is used.
    Returns the qtable (empty without one)."""
    qt = o.quantize_table
    if isinstance(qt, str):
        qtable = read_qtable_checked(qt, module) if qt else {}
    elif qt is not None:
        if not isinstance(qt, Mapping):
            raise UsageError(
                f"quantize_table must be a path or a mapping op name -> mode, got {type(qt).__name__}"
            )
        qtable = check_qtable_entries(qt, module, "quantize_table")
    else:
        qtable = {}
    if isinstance(o.calibration_table, str) and o.calibration_table:
        # Read it now: a malformed table is its own located error, not a failure of the lowering.
        from lamina.dialects.tpu.tables import CalibrationTableError, read_calibration_table

        try:
            read_calibration_table(o.calibration_table)
        except CalibrationTableError as e:
            raise ToolError(str(e)) from None
    has_table = _given(o.calibration_table)
    int8_layers = [k for k, m in qtable.items() if m == "INT8"]
    if o.quantize != "INT8":
        if int8_layers and not has_table:
            raise UsageError(
                f"the quantize table puts {len(int8_layers)} op(s) in INT8 (e.g. '{int8_layers[0]}'): "
                "that needs --calibration_table"
            )
        if has_table and not int8_layers:
            raise UsageError(
                f"--calibration_table is not used by --quantize {o.quantize} (no op is INT8); drop it "
                "or use --quantize INT8"
            )
    if any(op.name.startswith("tpu.") for op in module.walk_ops()):  # a wrong file, not a wrong flag
        raise ToolError(f"--mlir '{o.mlir}' is already lowered to tpu; give the top .mlir of model_transform")
    return qtable


# ---- the flow ------------------------------------------------------------------------------------------


def _shown(x: Any, what: str) -> str:
    return x if isinstance(x, str) else f"<{what} in memory>"


def deploy_command(o: DeployOptions) -> str:
    """The ``model_deploy`` command line equivalent to ``o`` (objects in memory shown as such)."""
    cmd = f"model_deploy --mlir {_shown(o.mlir, 'module')} --quantize {o.quantize}"
    if o.asymmetric:
        cmd += " --asymmetric"
    if o.int_forms != "default":
        cmd += f" --int_forms {o.int_forms}"
    if _given(o.calibration_table):
        cmd += f" --calibration_table {_shown(o.calibration_table, 'table')}"
    if _given(o.quantize_table):
        cmd += f" --quantize_table {_shown(o.quantize_table, 'qtable')}"
    cmd += f" --processor {o.processor}"
    if o.chip_config:
        cmd += f" --chip_config {o.chip_config}"
    if o.disable_layer_group:
        cmd += " --disable_layer_group"
    if o.export_lib:
        cmd += " --export_lib"
    if _given(o.test_input):
        cmd += f" --test_input {_shown(o.test_input, 'inputs')}"
    if _given(o.test_reference):
        cmd += f" --test_reference {_shown(o.test_reference, 'reference')}"
        t = o.effective_tolerance
        cmd += f" --tolerance {t[0]},{t[1]}"
    if o.compare_all:
        cmd += " --compare_all"
    if o.task is not None:
        cmd += f" --task {o.task}"
        if o.task_threshold is not None:
            cmd += f" --task_threshold {o.task_threshold:g}"
        if o.task_tolerance is not None:
            cmd += f" --task_tolerance {o.task_tolerance:g}"
    if o.mask_input not in (None, "auto"):
        cmd += f" --mask_input {o.mask_input}"
    return cmd + (f" --model {o.model}" if o.model is not None else "")


def _mask_select(
    o: DeployOptions, module: Any, inputs: Mapping[str, np.ndarray], say: Callable[[str], None]
) -> Callable[[str, np.ndarray], np.ndarray | None] | None:
    """The comparison's restriction to the positions the test input's attention mask keeps (None:
    no mask input, or nothing padded)."""
    from lamina.quant.masking import MaskError, keep_positions, kept_flat, resolve_mask

    try:
        mask = resolve_mask(module, o.mask_input)
    except MaskError as e:
        raise UsageError(str(e)) from None
    keep = keep_positions(mask, inputs)
    if mask is None or keep is None:
        return None
    axes = mask.axes
    say(
        f"# compared over the {int(keep.sum())} of {keep.size} position(s) kept by mask input "
        f"'{mask.input}' (tensors with a masked sequence axis; --mask_input none compares every position)"
    )

    def select(name: str, x: np.ndarray) -> np.ndarray | None:
        spec = axes.get(name)
        return None if spec is None else kept_flat(x, spec, keep)

    return select


def first_diverging(report: CompareReport, n: int = FIRST_DIVERGING) -> list[str]:
    """The first ``n`` failing tensors in network order (the report keeps the dump's order)."""
    return [r.name for r in report.results if not r.passed][:n]


def deploy(
    o: DeployOptions,
    log: Callable[[str], None] | None = None,
    *,
    module: Any = None,
    ctx: Any = None,
    warn: Callable[[str], None] | None = None,
) -> DeployResult:
    """``model_deploy`` as a function: validates, lowers, writes the files, runs and compares.

    ``module`` (with its ``ctx``): the ``top`` module to lower instead of reading ``o.mlir`` (left
    untouched). ``log`` receives the step commands; ``warn`` the warnings about the tables (names the
    model does not have; default :func:`warnings.warn`). Raises :class:`UsageError` for bad options
    and :class:`ToolError` for any other problem."""
    from lamina.flows.transform import write_mlir
    from lamina.frontends.model_io import parse_mlir_file

    say = log or (lambda s: None)
    validate(o)
    say(f"# {deploy_command(o)}")
    t0 = time.perf_counter()
    given = module is not None
    if not given:
        if o.mlir is None:
            raise UsageError("deploy needs the top .mlir (mlir) or the module")
        module, ctx = parse_mlir_file(o.mlir)
    sig = module_signature(module, f"--mlir '{o.mlir}'" if o.mlir else "the model")  # no function: fails here
    qtable = validate_with_module(o, module)
    # Read and check the inputs and the reference before lowering: a bad file fails fast, by name.
    inputs = ref = None
    if _given(o.test_input):
        if isinstance(o.test_input, str):
            arrays, source = load_npz(o.test_input, "--test_input"), f"--test_input '{o.test_input}'"
        else:
            arrays, source = dict(o.test_input), "test_input"
        inputs = check_inputs(arrays, sig, source)
    if _given(o.test_reference):
        t = o.test_reference
        ref = load_npz(t, "--test_reference") if isinstance(t, str) else dict(t)
        if o.task is not None:
            _task_reference(
                o, ref, sig, f"--test_reference '{t}'" if isinstance(t, str) else "test_reference"
            )
    select = _mask_select(o, module, inputs, say) if inputs is not None and ref is not None else None
    target = target_of(o)
    if target is not None and o.quantize not in target.modes:
        raise UsageError(
            f"--processor {o.processor} does not run {o.quantize} models (it runs {', '.join(target.modes)})"
        )
    tpu = deploy_module(
        module,
        o.quantize,
        asymmetric=o.asymmetric,
        int_forms=o.int_forms,
        calibration_table=o.calibration_table,
        qtable=o.quantize_table if isinstance(o.quantize_table, str) else qtable or None,
        ctx=ctx,
        clone=given,
        warn=warn,
        capabilities=None if target is None else target.capabilities,
    )
    res = DeployResult(tpu, None)
    prefix = o.prefix
    done = "lowered to tpu"
    if prefix is not None:
        mlir_out = prefix + "_tpu.mlir"
        res.tpu_mlir = mlir_out
        res.weights = write_mlir(tpu, mlir_out, prefix + "_tpu_weights.npz")
        done = f"wrote {mlir_out}" + (f" and {res.weights}" if res.weights else "")
    say(f"{done} ({o.quantize}, {time.perf_counter() - t0:.2f} s): {summarize_tpu_module(tpu)}")
    if target is not None:
        _compile(o, target, tpu, res, say, sig)
    if inputs is None:
        return res
    out_npz = prefix + "_tpu_outputs.npz" if prefix is not None else None
    say(
        f"# model_runner --input {_shown(o.test_input, 'inputs')} --model {_shown(res.tpu_mlir, 'module')} "
        f"--output {_shown(out_npz, 'outputs')}" + (" --dump_all_tensors" if o.compare_all else "")
    )
    outs = run_tpu_module(tpu, inputs, dump_all=o.compare_all)
    if out_npz is not None:
        save_npz(out_npz, outs)
    res.outputs_npz, res.outputs = out_npz, outs
    if res.compiled is not None:
        cosine = target.float_cosine(o.quantize) if target is not None else FLOAT_TARGET_COSINE
        _check_compiled(o, res, inputs, outs, sig.output_names, say, cosine)
    if ref is None:
        return res
    tol = o.effective_tolerance
    name_a = out_npz or "tpu outputs"
    name_b = _shown(o.test_reference, "reference")
    say(f"# npz_tool compare {name_a} {name_b} --tolerance {tol[0]},{tol[1]} -v")
    report = compare_sets(outs, ref, tol, o.excepts, name_a=name_a, name_b=name_b, select=select)
    res.report = report
    if not report.results:
        raise ToolError(
            f"'{name_a}' and '{name_b}' have no tensor in common (is the reference the top "
            "outputs of model_transform for this model?)"
        )
    if not report.passed:
        full = report
        if not o.compare_all:  # find where it starts to diverge
            every = run_tpu_module(tpu, inputs, dump_all=True)
            full = compare_sets(every, ref, tol, o.excepts, select=select)
        res.diverging = first_diverging(full)
    if o.task is not None:
        from lamina.tasks import task_check

        task_ref = _task_reference(o, ref, sig, name_b)
        res.task_reports = task_check(o.task, outs, task_ref, o.task_threshold)
        if o.task_tolerance is not None:
            res.task_failed = [r for r in res.task_reports if r.score < o.task_tolerance]
    return res


# ---- the compiled model -------------------------------------------------------------------------------


def _compile(
    o: DeployOptions, target: Any, tpu: Any, res: DeployResult, say: Callable[[str], None], sig: Any
) -> None:
    """Compile the ``tpu`` module for ``target``, write the file (with ``model``) and load it back."""
    from lamina.targets.base import CompileOptions
    from lamina.targets.container import write_model

    t0 = time.perf_counter()
    name = (
        os.path.basename(o.prefix) if o.prefix else (os.path.splitext(os.path.basename(o.mlir or "model"))[0])
    )
    opts = CompileOptions(name=name or "model", mode=o.quantize, disable_layer_group=o.disable_layer_group)
    built = target.compile(tpu, opts)
    res.placement, res.compile_report = dict(built.placement), list(built.report)
    path = o.compiled_path
    if path is not None:
        write_model(path, built.model)
        res.model_file = path
    where = f"wrote {path}" if path else "compiled"
    say(f"{where} for {target.processor} ({time.perf_counter() - t0:.2f} s)")
    if o.export_lib and path is not None:
        from lamina.targets.cpu.export import export_library

        res.library = export_library(built.model, os.path.splitext(path)[0])
        say(f"wrote {res.library[0]} and {res.library[1]} (the model as a C library)")
    for line in built.report:
        say(f"  {line}")
    from lamina.targets.base import load_model_file

    if path is not None:
        res.compiled = load_model_file(path, **({"chip_config": o.chip_config} if o.chip_config else {}))
    else:
        import importlib

        from lamina.targets.base import TARGET_PACKAGES

        pkg = importlib.import_module(TARGET_PACKAGES[target.kind])
        res.compiled = pkg.load(
            built.model, "<compiled in memory>", **({"chip_config": o.chip_config} if o.chip_config else {})
        )


def _check_compiled(
    o: DeployOptions,
    res: DeployResult,
    inputs: Mapping[str, np.ndarray],
    tpu_outs: Mapping[str, np.ndarray],
    output_names: list[str],
    say: Callable[[str], None],
    cosine: float = FLOAT_TARGET_COSINE,
) -> None:
    """Run the compiled model on the test inputs and check its outputs against the interpreter's:
    equal bit for bit in INT8 (the ``tpu`` contract) where no float GEMM feeds the output
    (:func:`exact_outputs`), within ``cosine`` otherwise (the target's
    :meth:`~lamina.targets.base.Target.float_cosine`: :data:`FLOAT_TARGET_COSINE` but for the CPU's
    F16/BF16). Failures are named in
    :attr:`DeployResult.target_check`; the outputs checked bit for bit in
    :attr:`DeployResult.exact_outputs`."""
    from lamina.compare import cosine_similarity

    prefix = o.prefix
    npz = prefix + "_model_outputs.npz" if prefix is not None else None
    say(
        f"# model_runner --input {_shown(o.test_input, 'inputs')} --model {res.model_file or '<compiled model>'} "
        f"--output {_shown(npz, 'outputs')}"
    )
    t0 = time.perf_counter()
    got = res.compiled.run(inputs)
    wall = time.perf_counter() - t0
    if npz is not None:
        save_npz(npz, got)
    res.model_outputs, res.model_outputs_npz = got, npz
    exact_names = exact_outputs(res.module, output_names) if o.quantize == "INT8" else []
    res.exact_outputs = exact_names
    problems: list[str] = []
    worst = 1.0
    equal = True
    for name in output_names:
        exact = name in exact_names
        a, b = got.get(name), tpu_outs.get(name)
        if a is None or b is None:
            problems.append(f"output '{name}' is missing from the compiled model's outputs")
            continue
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            problems.append(f"output '{name}': shape {list(a.shape)}, the interpreter's {list(b.shape)}")
            continue
        if exact:
            if not _bit_equal(a, b):
                n = int(np.count_nonzero(a != b))
                problems.append(f"output '{name}': {n} of {a.size} elements differ from the interpreter's")
        else:
            equal = equal and _bit_equal(a, b)
            c = float(cosine_similarity(a, b))
            worst = min(worst, c)
            if not c >= cosine:
                problems.append(f"output '{name}': cosine {c:.6f} to the interpreter's (< {cosine})")
    res.target_check = problems
    floats = [n for n in output_names if n not in exact_names]
    if not floats or equal:
        what = "bit-exact with the tpu interpreter"
    elif not exact_names:
        what = f"within cosine {worst:.7f} of the tpu interpreter (float commands on slices sum in another order)"
    else:
        what = (
            f"bit-exact with the tpu interpreter on {', '.join(exact_names)}; within cosine {worst:.7f} on "
            f"{', '.join(floats)} (fed by float GEMMs, which sum in another order on slices)"
        )
    say(f"compiled model: {what if not problems else 'DIFFERS from the tpu interpreter'} ({wall:.2f} s)")


#: ``tpu`` ops whose float forms are GEMMs: a target may sum their products in another order (a
#: sliced float GEMM picks another BLAS kernel), so what they feed is held to the float contract.
FLOAT_GEMMS = frozenset({"tpu.Conv", "tpu.Deconv", "tpu.MatMul", "tpu.Gemm", "tpu.Attention", "tpu.Einsum"})


def exact_outputs(module: Any, output_names: list[str]) -> list[str]:
    """The outputs of a module lowered in INT8 that a compiled model must give bit for bit: those
    no float GEMM (:data:`FLOAT_GEMMS` with a float result: a layer the qtable or a missing integer
    form puts in a float mode) feeds. Every other output is held to :data:`FLOAT_TARGET_COSINE`,
    as a float model's are (``docs/npu-isa.md``: a sliced float GEMM keeps the cosine, not the bits)."""
    from lamina.execution.interpreter import find_main, io_names
    from lamina.ir.types import FloatType, ShapedType

    def float_gemm(op: Any) -> bool:
        if op.name not in FLOAT_GEMMS or not op.results:
            return False
        t = op.results[0].type
        return isinstance(t, ShapedType) and isinstance(t.element_type, FloatType)

    func = find_main(module)
    block = func.regions[0].blocks[0]
    ret = block.last_op
    if ret is None:
        return list(output_names)
    tainted: set[Any] = set()
    for op in block.ops:
        nested: list[Any] = list(op.walk_ops())
        if any(float_gemm(o) for o in nested) or any(v in tainted for v in op.operands):
            tainted.update(op.results)
    names = io_names(func)[1]
    inexact = {n for n, v in zip(names, ret.operands) if v in tainted}
    return [n for n in output_names if n not in inexact]


def _bit_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit (NaNs of one payload equal; -0.0 and 0.0 differ)."""
    if a.dtype != b.dtype:
        return bool(np.array_equal(a, b))
    if a.dtype.kind in "fcV" or str(a.dtype) == "bfloat16":
        return bool(
            np.array_equal(np.ascontiguousarray(a).view(np.uint8), np.ascontiguousarray(b).view(np.uint8))
        )
    return bool(np.array_equal(a, b))


# ---- the summary line ----------------------------------------------------------------------------------


def summarize_tpu_module(module: Any) -> str:
    """One line on what a lowered module computes in which mode: compute ops with quantized values
    (INT8; how many with per-channel activations), ops in each float type, and the casts/requants
    between modes, e.g. ``120 ops INT8 (21 with per-channel activations), 17 F32, 34 casts/requants``."""
    from lamina.dialects.quant import QuantizedType, UniformQuantizedPerAxisType
    from lamina.dialects.tpu.families.plumbing import QuantCast
    from lamina.ir.types import ShapedType

    def elem(v: Any) -> Any:
        return v.type.element_type if isinstance(v.type, ShapedType) else v.type

    def is_weight(v: Any) -> bool:
        d = v.defining_op()
        return d is not None and d.has_trait(ConstantLike)

    int8 = per_channel = casts = 0
    floats: dict[str, int] = {}
    for op in module.walk_ops():
        mode_change = op.has_trait(QuantCast)
        casts += mode_change
        if mode_change or op.has_trait(NotALayer) or op.dialect_name not in ("tpu", "top") or not op.results:
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

"""``model_deploy`` / ``lamina deploy``: lower a ``top`` model to the quantized ``tpu`` IR and check it.

    model_deploy --mlir M.mlir --quantize INT8 --calibration_table M_cali_table \\
        [--asymmetric] [--quantize_table M_qtable] --processor cpu \\
        --test_input M_in_f32.npz --test_reference M_top_outputs.npz [--tolerance 0.90,0.80] \\
        [--compare_all] --model M_int8.bmodel

Steps (each printed as its equivalent command):

1. parse ``--mlir`` (a ``top`` module, as ``model_transform`` writes it);
2. run ``builtin.module(import-calibration-table{file=T [asymmetric=true]},convert-top-to-tpu{mode=M
   asymmetric=A qtable=Q},canonicalize)`` (the first pass only with a calibration table) and write
   ``<prefix>_tpu.mlir`` (weights in ``<prefix>_tpu_weights.npz``), ``<prefix>`` being ``--model``
   without its extension (``.bmodel``, ``.cvimodel``, ``.mlir``);
3. with ``--test_input``: run the ``tpu`` module on Lamina's bit-exact ``tpu`` interpreter and write
   ``<prefix>_tpu_outputs.npz``: the outputs (every tensor with ``--compare_all``), dequantized to
   float32 and keyed by tensor (location) name;
4. with ``--test_reference`` (the ``top`` outputs of ``model_transform``): compare, as
   ``npz_tool compare`` does, under ``--tolerance`` (defaults as TPU-MLIR's: INT8 ``0.90,0.80``,
   F16/BF16 ``0.99,0.90``, F32 ``0.99,0.99``). Outside the tolerance the command fails naming the first
   diverging layers in network order (every tensor is dumped to find them, even without
   ``--compare_all``).

Invalid flag combinations are rejected before any work (exit 2): INT8 (or a qtable with INT8 layers)
without a calibration table, a calibration table that nothing would use, ``--asymmetric`` without INT8,
a qtable naming ops the model does not have or modes that cannot be lowered, ``--test_reference`` or
``--compare_all`` or ``--tolerance`` without ``--test_input``, an unknown ``--processor``.
Exit status: 0 success, 1 an error or a comparison outside tolerance, 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.compare import CompareReport, compare_sets, parse_tolerance
from lamina.frontends.model_io import ToolError, check_inputs, load_npz, module_signature, save_npz
from lamina.quant.deploy import MODES, deploy_module, run_tpu_module, summarize_tpu_module
from lamina.support.paths import check_outputs
from lamina.tools.common import check_not_empty, internal_error_guard

TOOL = "model_deploy"

#: Modes a qtable may give an op (TPU-MLIR also has INT4/F8/UINT8 entries; they are not lowered yet).
QTABLE_LOWERABLE = ("F32", "F16", "BF16", "INT8")
#: ``--processor`` values: the CPU backend and a placeholder NPU (the backends come in later issues).
PROCESSORS = ("cpu", "lnpu")
#: TPU-MLIR's default ``--tolerance`` per mode (cosine, euclidean).
DEFAULT_TOLERANCE: dict[str, tuple[float, float]] = {
    "INT8": (0.90, 0.80),
    "F16": (0.99, 0.90),
    "BF16": (0.99, 0.90),
    "F32": (0.99, 0.99),
}
MODEL_EXTENSIONS = (".bmodel", ".cvimodel", ".mlir", ".lmodel")
#: How many diverging layers a failed comparison names.
FIRST_DIVERGING = 5
#: Op kinds that carry no tensor of their own (never named in a qtable, never compared).
NON_LAYER_OPS = frozenset(
    {"top.Input", "top.Weight", "top.None", "func.return", "func.func", "builtin.module"}
)


class UsageError(ToolError):
    """An invalid flag or flag combination (exit status 2)."""


@dataclass
class DeployOptions:
    """``model_deploy``'s flags."""

    mlir: str
    quantize: str
    model: str
    processor: str = "cpu"
    asymmetric: bool = False
    calibration_table: str | None = None
    quantize_table: str | None = None
    test_input: str | None = None
    test_reference: str | None = None
    tolerance: tuple[float, float] | None = None
    compare_all: bool = False
    excepts: list[str] = field(default_factory=list)
    debug: bool = False

    @property
    def prefix(self) -> str:
        stem, ext = os.path.splitext(self.model)
        return stem if ext.lower() in MODEL_EXTENSIONS else self.model

    @property
    def effective_tolerance(self) -> tuple[float, float]:
        return self.tolerance if self.tolerance is not None else DEFAULT_TOLERANCE[self.quantize]


@dataclass
class DeployResult:
    """What :func:`deploy` did: the ``tpu`` module, the files written and the comparison."""

    module: Any
    tpu_mlir: str
    weights: str | None = None
    outputs_npz: str | None = None
    outputs: dict[str, np.ndarray] | None = None
    report: CompareReport | None = None
    diverging: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.report is None or self.report.passed


# ---- validation ---------------------------------------------------------------------------------------


def layer_names(module: Any) -> list[str]:
    """The location names of the ops a qtable may name (every op with a tensor result except inputs,
    weights and ``top.None``), in network order."""
    from lamina.ir.naming import result_names

    out: list[str] = []
    seen: set[str] = set()
    for op in module.walk_ops():
        if op.name in NON_LAYER_OPS or not op.results:
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
    bad_modes = sorted({m for m in qtable.values() if m.upper() not in QTABLE_LOWERABLE})
    if bad_modes:
        raise UsageError(
            f"{path}: error: mode(s) {', '.join(bad_modes)} cannot be lowered yet "
            f"(supported: {', '.join(QTABLE_LOWERABLE)})"
        )
    qtable = {k: v.upper() for k, v in qtable.items()}
    if module is not None:
        known = set(layer_names(module))
        unknown = [k for k in qtable if k not in known]
        if unknown:
            shown = ", ".join(f"'{k}'" for k in unknown[:5]) + (
                f" and {len(unknown) - 5} more" if len(unknown) > 5 else ""
            )
            raise UsageError(
                f"{path}: error: {len(unknown)} op(s) not in the model: {shown} "
                "(qtable names are the tensor names of model_transform's dumps)"
            )
    return qtable


def validate(o: DeployOptions) -> None:
    """Reject invalid flags and combinations (module-independent checks) with a UsageError."""
    o.quantize = o.quantize.upper()
    if o.quantize not in MODES:
        raise UsageError(f"--quantize must be one of {', '.join(MODES)}, got '{o.quantize}'")
    if o.processor.lower() not in PROCESSORS:
        raise UsageError(
            f"--processor '{o.processor}' is not supported: Lamina targets {', '.join(PROCESSORS)} "
            "(cpu: the CPU backend; lnpu: the placeholder NPU)"
        )
    o.processor = o.processor.lower()
    if o.asymmetric and o.quantize != "INT8":
        raise UsageError(f"--asymmetric applies to --quantize INT8 only, not {o.quantize}")
    if o.quantize == "INT8" and not o.calibration_table:
        raise UsageError("--quantize INT8 needs --calibration_table (run run_calibration first)")
    for flag, path in (
        ("--mlir", o.mlir),
        ("--calibration_table", o.calibration_table),
        ("--quantize_table", o.quantize_table),
        ("--test_input", o.test_input),
        ("--test_reference", o.test_reference),
    ):
        if path is not None and not os.path.isfile(path):
            raise UsageError(
                f"{flag} '{path}' does not exist"
                if not os.path.exists(path)
                else f"{flag} '{path}' is not a file"
            )
    if not o.test_input:
        for flag, given in (
            ("--test_reference", o.test_reference),
            ("--compare_all", o.compare_all),
            ("--tolerance", o.tolerance is not None),
            ("--excepts", bool(o.excepts)),
        ):
            if given:
                raise UsageError(f"{flag} needs --test_input (there is nothing to compare without it)")
    elif not o.test_reference:
        for flag, given in (("--tolerance", o.tolerance is not None), ("--excepts", bool(o.excepts))):
            if given:
                raise UsageError(f"{flag} needs --test_reference (the top outputs to compare against)")
    d = os.path.dirname(os.path.abspath(o.prefix))
    if not os.path.isdir(d):
        raise UsageError(f"--model '{o.model}': directory '{d}' does not exist")
    check_outputs(
        [
            ("--mlir", o.mlir),
            ("--calibration_table", o.calibration_table),
            ("--quantize_table", o.quantize_table),
            ("--test_input", o.test_input),
            ("--test_reference", o.test_reference),
        ],
        [
            ("--model", o.model),
            ("the tpu .mlir", o.prefix + "_tpu.mlir"),
            ("the tpu weight file", o.prefix + "_tpu_weights.npz"),
            ("the tpu outputs", o.prefix + "_tpu_outputs.npz" if o.test_input else None),
        ],
    )


def validate_with_module(o: DeployOptions, module: Any) -> dict[str, str]:
    """Checks that need the model: the qtable's names and whether the calibration table is used.
    Returns the qtable (empty without one)."""
    qtable = read_qtable_checked(o.quantize_table, module) if o.quantize_table else {}
    if o.calibration_table:
        # Read it now: a malformed table is its own located error, not a failure of the lowering.
        from lamina.dialects.tpu.tables import CalibrationTableError, read_calibration_table

        try:
            read_calibration_table(o.calibration_table)
        except CalibrationTableError as e:
            raise ToolError(str(e)) from None
    int8_layers = [k for k, m in qtable.items() if m == "INT8"]
    if o.quantize != "INT8":
        if int8_layers and not o.calibration_table:
            raise UsageError(
                f"the quantize table puts {len(int8_layers)} op(s) in INT8 (e.g. '{int8_layers[0]}'): "
                "that needs --calibration_table"
            )
        if o.calibration_table and not int8_layers:
            raise UsageError(
                f"--calibration_table is not used by --quantize {o.quantize} (no op is INT8); drop it "
                "or use --quantize INT8"
            )
    if any(op.name.startswith("tpu.") for op in module.walk_ops()):  # a wrong file, not a wrong flag
        raise ToolError(f"--mlir '{o.mlir}' is already lowered to tpu; give the top .mlir of model_transform")
    return qtable


# ---- the command ---------------------------------------------------------------------------------------


def deploy_command(o: DeployOptions) -> str:
    cmd = f"model_deploy --mlir {o.mlir} --quantize {o.quantize}"
    if o.asymmetric:
        cmd += " --asymmetric"
    if o.calibration_table:
        cmd += f" --calibration_table {o.calibration_table}"
    if o.quantize_table:
        cmd += f" --quantize_table {o.quantize_table}"
    cmd += f" --processor {o.processor}"
    if o.test_input:
        cmd += f" --test_input {o.test_input}"
    if o.test_reference:
        cmd += f" --test_reference {o.test_reference}"
        t = o.effective_tolerance
        cmd += f" --tolerance {t[0]},{t[1]}"
    if o.compare_all:
        cmd += " --compare_all"
    return cmd + f" --model {o.model}"


def first_diverging(report: CompareReport, n: int = FIRST_DIVERGING) -> list[str]:
    """The first ``n`` failing tensors in network order (the report keeps the dump's order)."""
    return [r.name for r in report.results if not r.passed][:n]


def deploy(o: DeployOptions, log: Callable[[str], None] | None = None) -> DeployResult:
    """``model_deploy`` as a function: validates, lowers, writes the files, runs and compares.
    Raises :class:`UsageError` for bad flags and :class:`ToolError` for any other problem."""
    from lamina.frontends.model_io import parse_mlir_file
    from lamina.tools.transform import write_mlir

    say = log or (lambda s: None)
    validate(o)
    say(f"# {deploy_command(o)}")
    t0 = time.perf_counter()
    module, ctx = parse_mlir_file(o.mlir)
    sig = module_signature(module, f"--mlir '{o.mlir}'")  # a module without a function fails here
    validate_with_module(o, module)
    # Read and check the inputs and the reference before lowering: a bad file fails fast, by name.
    inputs = ref = None
    if o.test_input:
        inputs = check_inputs(load_npz(o.test_input, "--test_input"), sig, f"--test_input '{o.test_input}'")
    if o.test_reference:
        ref = load_npz(o.test_reference, "--test_reference")
    tpu = deploy_module(
        module,
        o.quantize,
        asymmetric=o.asymmetric,
        calibration_table=o.calibration_table,
        qtable=o.quantize_table,
        ctx=ctx,
        clone=False,
        warn=lambda m: print(m, file=sys.stderr),
    )
    mlir_out = o.prefix + "_tpu.mlir"
    weights = write_mlir(tpu, mlir_out, o.prefix + "_tpu_weights.npz")
    say(
        f"wrote {mlir_out}"
        + (f" and {weights}" if weights else "")
        + f" ({o.quantize}, {time.perf_counter() - t0:.2f} s): {summarize_tpu_module(tpu)}"
    )
    res = DeployResult(tpu, mlir_out, weights)
    if inputs is None:
        return res
    out_npz = o.prefix + "_tpu_outputs.npz"
    say(
        f"# model_runner --input {o.test_input} --model {mlir_out} --output {out_npz}"
        + (" --dump_all_tensors" if o.compare_all else "")
    )
    outs = run_tpu_module(tpu, inputs, dump_all=o.compare_all)
    save_npz(out_npz, outs)
    res.outputs_npz, res.outputs = out_npz, outs
    if ref is None:
        return res
    tol = o.effective_tolerance
    say(f"# npz_tool compare {out_npz} {o.test_reference} --tolerance {tol[0]},{tol[1]} -v")
    report = compare_sets(outs, ref, tol, o.excepts, name_a=out_npz, name_b=o.test_reference)
    res.report = report
    if not report.results:
        raise ToolError(
            f"'{out_npz}' and '{o.test_reference}' have no tensor in common (is the reference the top "
            "outputs of model_transform for this model?)"
        )
    if not report.passed:
        full = report
        if not o.compare_all:  # find where it starts to diverge
            every = run_tpu_module(tpu, inputs, dump_all=True)
            full = compare_sets(every, ref, tol, o.excepts)
        res.diverging = first_diverging(full)
    return res


def build_parser(prog: str = TOOL) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Lower a top .mlir to the quantized tpu IR and check it."
    )
    p.add_argument("--mlir", required=True, help="the top .mlir written by model_transform")
    p.add_argument(
        "--quantize", required=True, type=str.upper, metavar="{F32,F16,BF16,INT8}", help="quantization mode"
    )
    p.add_argument("--asymmetric", action="store_true", help="INT8: asymmetric (zero-point) activations")
    p.add_argument("--calibration_table", help="the calibration table of run_calibration (needed for INT8)")
    p.add_argument(
        "--quantize_table", help="qtable: 'op_name MODE' lines forcing per-op modes (mixed precision)"
    )
    p.add_argument("--processor", default="cpu", help=f"target: {', '.join(PROCESSORS)} (default cpu)")
    p.add_argument("--test_input", help="input .npz (model_transform's _in_f32.npz) to run the tpu IR on")
    p.add_argument("--test_reference", help="reference .npz (model_transform's _top_outputs.npz)")
    p.add_argument(
        "--tolerance",
        help="minimum cosine,euclidean (default INT8 0.90,0.80; F16/BF16 0.99,0.90; F32 0.99,0.99)",
    )
    p.add_argument("--excepts", default="", help="comma-separated tensors not to compare")
    p.add_argument(
        "--compare_all", action="store_true", help="dump and compare every tensor, not only the outputs"
    )
    p.add_argument("--model", required=True, help="output name: <prefix>_tpu.mlir etc. (extension dropped)")
    p.add_argument("--debug", action="store_true", help="print every compared tensor")
    return p


def options_from_args(a: argparse.Namespace) -> DeployOptions:
    check_not_empty(
        *(
            (flag, getattr(a, flag[2:]))
            for flag in (
                "--mlir",
                "--calibration_table",
                "--quantize_table",
                "--test_input",
                "--test_reference",
                "--model",
            )
        )
    )
    tol = None
    if a.tolerance is not None:
        try:
            tol = parse_tolerance(a.tolerance)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return DeployOptions(
        mlir=a.mlir,
        quantize=a.quantize,
        model=a.model,
        processor=a.processor,
        asymmetric=a.asymmetric,
        calibration_table=a.calibration_table,
        quantize_table=a.quantize_table,
        test_input=a.test_input,
        test_reference=a.test_reference,
        tolerance=tol,
        compare_all=a.compare_all,
        excepts=[x.strip() for x in a.excepts.split(",") if x.strip()],
        debug=a.debug,
    )


def _run(a: argparse.Namespace, tool: str) -> int:
    from lamina.dialects.tpu.tables import CalibrationTableError
    from lamina.tools.npz_tool import print_report

    try:
        o = options_from_args(a)
        res = deploy(o, log=print)
    except UsageError as e:
        print(f"{tool}: error: {e}", file=sys.stderr)
        return 2
    except CalibrationTableError as e:
        print(f"{tool}: error: {e}", file=sys.stderr)
        return 1
    except ToolError as e:
        print(f"{tool}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{tool}: error: {e.strerror or e}: {getattr(e, 'filename', '') or ''}", file=sys.stderr)
        return 1
    if res.outputs_npz:
        print(f"wrote {res.outputs_npz} ({len(res.outputs or {})} tensor(s))")
    if res.report is not None:
        print_report(res.report, 2 if o.debug else 1)
        if not res.passed:
            tol = o.effective_tolerance
            print(
                f"{tool}: error: {len(res.report.failed)} tensor(s) outside tolerance {tol[0]},{tol[1]}; "
                f"first diverging layers: {', '.join(repr(n) for n in res.diverging)}",
                file=sys.stderr,
            )
            return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return internal_error_guard(TOOL, lambda: _run(build_parser().parse_args(argv), TOOL))


def deploy_main(argv: Sequence[str] | None = None) -> int:
    """``lamina deploy ...``"""
    return internal_error_guard(
        "lamina deploy", lambda: _run(build_parser("lamina deploy").parse_args(argv), "lamina deploy")
    )


if __name__ == "__main__":
    sys.exit(main())

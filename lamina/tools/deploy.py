"""``model_deploy`` / ``lamina deploy``: lower a ``top`` model to the quantized ``tpu`` IR and check it.

    model_deploy --mlir M.mlir --quantize INT8 --calibration_table M_cali_table \\
        [--asymmetric] [--quantize_table M_qtable] --processor cpu \\
        --test_input M_in_f32.npz --test_reference M_top_outputs.npz [--tolerance 0.90,0.80] \\
        [--compare_all] [--task cls|det|seg|ocr|embed [--task_threshold T] [--task_tolerance S]] \\
        --model M_int8.bmodel

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
   ``--compare_all``);
5. with ``--task``: the outputs compared as the task reads them (:mod:`lamina.tasks`: top-k classes,
   detections matched by IoU, mask IoU, text regions, embedding cosine), one line per output; with
   ``--task_tolerance`` a score under it fails the command.

Invalid flag combinations are rejected before any work (exit 2): INT8 (or a qtable with INT8 layers)
without a calibration table, a calibration table that nothing would use, ``--asymmetric`` without INT8,
a qtable naming ops the model does not have or modes that cannot be lowered, ``--test_reference`` or
``--compare_all`` or ``--tolerance`` without ``--test_input``, an unknown ``--processor``.
Exit status: 0 success, 1 an error or a comparison outside tolerance, 2 bad usage.

The flow itself is :func:`lamina.flows.deploy.deploy`; this module parses the flags and prints.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lamina.compare import parse_tolerance
from lamina.flows.deploy import DeployOptions, deploy, processor_names
from lamina.support.errors import ToolError, UsageError
from lamina.tools.common import check_not_empty, internal_error_guard

TOOL = "model_deploy"


def build_parser(prog: str = TOOL) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Lower a top .mlir to the quantized tpu IR and check it."
    )
    p.add_argument("--mlir", required=True, help="the top .mlir written by model_transform")
    p.add_argument(
        "--quantize", required=True, type=str.upper, metavar="{F32,F16,BF16,INT8}", help="quantization mode"
    )
    p.add_argument("--asymmetric", action="store_true", help="INT8: asymmetric (zero-point) activations")
    p.add_argument(
        "--int_forms",
        default="default",
        help="INT8: the optional integer forms — default (lut,gather,softmax,attention), all, none, or a list "
        "of lut,gather,softmax,layernorm,attention (docs/tpu.md)",
    )
    p.add_argument("--calibration_table", help="the calibration table of run_calibration (needed for INT8)")
    p.add_argument(
        "--quantize_table", help="qtable: 'op_name MODE' lines forcing per-op modes (mixed precision)"
    )
    p.add_argument("--processor", default="cpu", help=f"target: {', '.join(processor_names())} (default cpu)")
    p.add_argument(
        "--chip_config", help="an NPU chip description (JSON, docs/npu-isa.md) instead of the processor's own"
    )
    p.add_argument(
        "--disable_layer_group",
        action="store_true",
        help="NPU: compile every op alone, through DDR (no layer groups), to measure what grouping gains",
    )
    p.add_argument(
        "--export_lib",
        action="store_true",
        help="CPU: also write <prefix>.so and <prefix>.h, the compiled model as a C-ABI shared library",
    )
    p.add_argument("--test_input", help="input .npz (model_transform's _in_f32.npz) to run the tpu IR on")
    p.add_argument("--test_reference", help="reference .npz (model_transform's _top_outputs.npz)")
    p.add_argument(
        "--tolerance",
        help="minimum cosine,euclidean (default INT8 0.90,0.80; F16/BF16 0.99,0.90; F32 0.99,0.99)",
    )
    p.add_argument("--excepts", default="", help="comma-separated tensors not to compare")
    p.add_argument(
        "--mask_input",
        default="auto",
        metavar="NAME|none",
        help="attention-mask input: tensors with a masked sequence axis are compared over the "
        "positions the test input's mask keeps (default: detected; none: every position)",
    )
    p.add_argument(
        "--compare_all", action="store_true", help="dump and compare every tensor, not only the outputs"
    )
    p.add_argument("--model", required=True, help="output name: <prefix>_tpu.mlir etc. (extension dropped)")
    p.add_argument("--debug", action="store_true", help="print every compared tensor")
    p.add_argument(
        "--task",
        help="also compare the outputs as the task reads them: cls (top-1/top-5), det (YOLO detections, "
        "IoU), seg (mask IoU), ocr (text mask IoU and regions), embed (cosine per vector)",
    )
    p.add_argument(
        "--task_threshold",
        type=float,
        help="det: the candidates' score threshold (default 0.25); seg: probability (0.5); ocr: DB (0.3)",
    )
    p.add_argument(
        "--task_tolerance",
        type=float,
        help="fail when a task score (0..1: top-1 agreement, F1, IoU, min cosine) is below this",
    )
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
                "--chip_config",
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
        int_forms=a.int_forms,
        calibration_table=a.calibration_table,
        quantize_table=a.quantize_table,
        test_input=a.test_input,
        test_reference=a.test_reference,
        tolerance=tol,
        compare_all=a.compare_all,
        excepts=[x.strip() for x in a.excepts.split(",") if x.strip()],
        debug=a.debug,
        chip_config=a.chip_config,
        disable_layer_group=a.disable_layer_group,
        export_lib=a.export_lib,
        task=a.task,
        task_threshold=a.task_threshold,
        task_tolerance=a.task_tolerance,
        mask_input=a.mask_input,
    )


def _run(a: argparse.Namespace, tool: str) -> int:
    from lamina.dialects.tpu.tables import CalibrationTableError
    from lamina.tools.npz_tool import print_report

    try:
        o = options_from_args(a)
        res = deploy(o, log=print, warn=lambda m: print(m, file=sys.stderr))
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
    if res.model_outputs_npz:
        print(f"wrote {res.model_outputs_npz} ({len(res.model_outputs or {})} tensor(s))")
    if res.target_check:
        for line in res.target_check:
            print(f"{tool}: error: the compiled model: {line}", file=sys.stderr)
    if res.report is not None:
        print_report(res.report, 2 if o.debug else 1)
    for r in res.task_reports:
        verdict = "" if o.task_tolerance is None else (" [FAILED]" if r in res.task_failed else " [PASSED]")
        print(r.line() + verdict)
    if res.report is not None and not res.report.passed:
        tol = o.effective_tolerance
        print(
            f"{tool}: error: {len(res.report.failed)} tensor(s) outside tolerance {tol[0]},{tol[1]}; "
            f"first diverging layers: {', '.join(repr(n) for n in res.diverging)}",
            file=sys.stderr,
        )
        return 1
    if res.task_failed:
        print(
            f"{tool}: error: task {o.task} score under --task_tolerance {o.task_tolerance:g}: "
            + ", ".join(f"{r.output} {_under(r.score, o.task_tolerance)}" for r in res.task_failed),
            file=sys.stderr,
        )
        return 1
    return 1 if res.target_check else 0


def _under(score: float, tolerance: float | None) -> str:
    """``score`` with the digits that show it is under ``tolerance`` (0.9999996, not 1.0000)."""
    digits = 4
    while tolerance is not None and round(score, digits) >= tolerance and digits < 12:
        digits += 1
    return f"{score:.{digits}f}"


def main(argv: Sequence[str] | None = None) -> int:
    return internal_error_guard(TOOL, lambda: _run(build_parser().parse_args(argv), TOOL))


def deploy_main(argv: Sequence[str] | None = None) -> int:
    """``lamina deploy ...``"""
    return internal_error_guard(
        "lamina deploy", lambda: _run(build_parser("lamina deploy").parse_args(argv), "lamina deploy")
    )


if __name__ == "__main__":
    sys.exit(main())

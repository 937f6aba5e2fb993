"""``run_calibration`` / ``lamina calibrate``: per-tensor int8 thresholds for a ``top`` model.

    run_calibration M.mlir --dataset DIR --input_num 100 [--data_list FILE] \\
        [--calibration_method kl|max|percentile9999|mse|aciq_gauss|aciq_laplace] \\
        [--tune_num 5] [--histogram_bin_num 2048] -o M_cali_table \\
        [--search search_qtable --quantize_table M_qtable [--expected_cos 0.99] [--max_float_layers N] \\
         [--fp_type F32|F16|BF16] [--task ocr --expected_task 0.98 [--task_threshold 0.3]]]

The samples (images preprocessed with the model's ``top.Input`` attributes, or ``.npz``/``.npy``
files) run through Lamina's ``top`` interpreter; every float tensor's statistics give a threshold by
the chosen method (``kl`` by default), refined with ``--tune_num`` samples (0 disables tuning), and
the table is written atomically in TPU-MLIR's format. With an attention-mask input (detected, or
``--mask_input NAME``; ``--mask_input none`` disables it) the statistics count only the positions
the mask keeps, and the tool says which input it took. ``--cali_method`` (TPU-MLIR's newer name, with
its ``use_`` prefixes: ``use_kl``, ``use_mse``, ...) is accepted as well.

Exit status: 0 success; 1 bad input (missing dataset, a sample that does not fit the model, an
unreadable model); 2 bad usage.

The flow itself is :mod:`lamina.flows.calibrate`; this module parses the flags and prints.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

from lamina.flows.calibrate import TOOL, calibrate_file, check_search_flags, search_file
from lamina.quant.methods import METHODS
from lamina.quant.search import FLOAT_MODES
from lamina.support.errors import ToolError
from lamina.tasks import TASKS
from lamina.tools.common import internal_error_guard


def _method(text: str) -> str:
    m = text.strip().lower()
    if m.startswith("use_"):
        m = m[4:]
    if m not in METHODS:
        raise argparse.ArgumentTypeError(f"invalid method '{text}' (choose from {', '.join(METHODS)})")
    return m


def build_parser(prog: str = TOOL) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Calibrate a top-dialect model: write a calibration table."
    )
    p.add_argument("mlir_file", help="the model (.mlir from model_transform)")
    p.add_argument("--dataset", help="directory of calibration samples (images, .npz, .npy)")
    p.add_argument("--data_list", help="text file listing samples, one per line (comma-separated per input)")
    p.add_argument("--input_num", type=int, default=0, help="number of samples to use (0: all)")
    p.add_argument("--tune_num", type=int, default=5, help="samples used to tune thresholds (0: no tuning)")
    p.add_argument("--histogram_bin_num", type=int, default=2048, help="histogram bins for kl (default 2048)")
    p.add_argument(
        "--calibration_method",
        "--cali_method",
        dest="method",
        type=_method,
        default="kl",
        help=f"threshold method: {', '.join(METHODS)} (default kl)",
    )
    p.add_argument(
        "--outlier_ratio",
        type=float,
        default=None,
        help="per-channel thresholds (#channel_th) for rank-2/3 tensors whose largest channel max is "
        "this many times the median one (default 4; 0 disables)",
    )
    p.add_argument(
        "--conv_outlier_ratio",
        type=float,
        default=None,
        help="the same for rank-4 (convolutional) tensors, along axis 1, each capped at the tensor's "
        "threshold (default 2; 0 disables)",
    )
    p.add_argument(
        "--asym_tail",
        type=float,
        default=None,
        help="list tensors with -min <= asym_tail * max under #asym_op, quantized with a zero point "
        "(default 0.05; 0 disables)",
    )
    p.add_argument(
        "--mask_input",
        default="auto",
        metavar="NAME|none",
        help="the attention-mask input: statistics (and the search's cosines) count only the "
        "positions it keeps (default: detected from the graph; none: every position)",
    )
    p.add_argument("-o", "--calibration_table", required=True, help="output calibration table")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.add_argument(
        "--search",
        choices=("search_qtable", "False"),
        default="False",
        help="search_qtable: after calibrating, find the fewest layers to keep in float so that INT8 "
        "reaches --expected_cos; writes --quantize_table and refines the calibration table",
    )
    p.add_argument("--expected_cos", type=float, default=0.99, help="output cosine the search must reach")
    p.add_argument(
        "--max_float_layers", type=int, default=None, help="most layers the search may float (default 10%%)"
    )
    p.add_argument("--quantize_table", default=None, help="where the search writes the qtable")
    p.add_argument(
        "--search_num", type=int, default=10, help="samples every search evaluation runs (default 10)"
    )
    p.add_argument(
        "--fp_type",
        choices=FLOAT_MODES,
        default="F32",
        help="the float mode of the layers the search floats (default F32)",
    )
    p.add_argument(
        "--task",
        choices=TASKS,
        default=None,
        help="the search also scores the outputs as the task reads them (as model_deploy --task) "
        "and must reach --expected_task",
    )
    p.add_argument(
        "--expected_task",
        type=float,
        default=None,
        help="task score in (0, 1] the search must reach beside --expected_cos (ocr/seg: mask IoU, "
        "det: F1, cls: top-1 agreement, embed: worst cosine)",
    )
    p.add_argument(
        "--task_threshold",
        type=float,
        default=None,
        help="the task's threshold (ocr: 0.3, seg: 0.5, det: 0.25 by default)",
    )
    return p


def _run(args: argparse.Namespace, tool: str) -> int:
    t0 = time.perf_counter()
    searching = args.search == "search_qtable"
    if searching and not args.quantize_table:
        print(
            f"{tool}: error: --search search_qtable needs --quantize_table (the qtable to write)",
            file=sys.stderr,
        )
        return 2
    task_flags = args.task is not None or args.expected_task is not None or args.task_threshold is not None
    if not searching and (args.quantize_table or args.max_float_layers is not None or task_flags):
        print(
            f"{tool}: error: --quantize_table, --max_float_layers and --task need --search search_qtable",
            file=sys.stderr,
        )
        return 2
    if (args.task is None) != (args.expected_task is None) or (
        args.task is None and args.task_threshold is not None
    ):
        print(
            f"{tool}: error: --task and --expected_task go together (--task_threshold needs --task)",
            file=sys.stderr,
        )
        return 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    try:
        check_search_flags(
            args.mlir_file,
            args.data_list,
            args.calibration_table,
            args.input_num,
            searching,
            args.quantize_table,
            args.expected_cos,
            args.max_float_layers,
            args.search_num,
            args.expected_task,
        )
        res = calibrate_file(
            args.mlir_file,
            dataset=args.dataset,
            data_list=args.data_list,
            input_num=args.input_num,
            method=args.method,
            tune_num=args.tune_num,
            histogram_bin_num=args.histogram_bin_num,
            calibration_table=args.calibration_table,
            progress=not args.quiet,
            log=log,
            outlier_ratio=args.outlier_ratio,
            conv_outlier_ratio=args.conv_outlier_ratio,
            asym_tail=args.asym_tail,
            mask_input=args.mask_input,
        )
    except ToolError as e:
        print(f"{tool}: error: {e}", file=sys.stderr)
        return 1
    t = res.table
    tuned = sum(1 for k, v in res.tuned.items() if v != res.initial_thresholds.get(k))
    extra = f", tuned on {t.tune_num} ({tuned} threshold(s) changed)" if t.tune_num else ""
    if t.channel_thresholds:
        extra += f", {len(t.channel_thresholds)} with outlier channels (#channel_th)"
    if t.asym_ops:
        extra += f", {len(t.asym_ops)} one-sided (#asym_op)"
    print(
        f"{tool}: {len(t)} tensor(s) calibrated with {args.method} on {t.sample_num} sample(s){extra}; "
        f"wrote {args.calibration_table} in {time.perf_counter() - t0:.2f} s",
        file=sys.stderr,
    )
    if searching:
        from lamina.quant.dataset import list_samples

        entries = list_samples(args.dataset, args.data_list, args.input_num)[: max(1, args.search_num)]
        try:
            found = search_file(
                args.mlir_file,
                args.calibration_table,
                entries,
                args.quantize_table,
                expected_cos=args.expected_cos,
                max_float_layers=args.max_float_layers,
                log=log,
                mask_input=args.mask_input,
                float_mode=args.fp_type,
                task=args.task,
                expected_task=args.expected_task,
                task_threshold=args.task_threshold,
            )
        except ToolError as e:
            print(f"{tool}: error: {e}", file=sys.stderr)
            return 1
        print(f"{tool}: {found.summary()}; wrote {args.quantize_table}", file=sys.stderr)
        if not found.reached:
            want = f"cosine {args.expected_cos}" + (
                f" and task {args.task} score {args.expected_task}" if args.task else ""
            )
            more = (
                f" within {found.max_float_layers} float layers (--max_float_layers raises the limit)"
                if len(found.float_layers) >= found.max_float_layers
                else ""
            )
            print(f"{tool}: error: expected {want} not reached{more}", file=sys.stderr)
            return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return internal_error_guard(TOOL, lambda: _run(build_parser().parse_args(argv), TOOL))


def calibrate_main(argv: Sequence[str] | None = None) -> int:
    """``lamina calibrate ...``"""
    tool = "lamina calibrate"
    return internal_error_guard(tool, lambda: _run(build_parser(tool).parse_args(argv), tool))


if __name__ == "__main__":
    sys.exit(main())

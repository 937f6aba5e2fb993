"""``run_calibration`` / ``lamina calibrate``: per-tensor int8 thresholds for a ``top`` model.

    run_calibration M.mlir --dataset DIR --input_num 100 [--data_list FILE] \\
        [--calibration_method kl|max|percentile9999|mse|aciq_gauss|aciq_laplace] \\
        [--tune_num 5] [--histogram_bin_num 2048] -o M_cali_table

The samples (images preprocessed with the model's ``top.Input`` attributes, or ``.npz``/``.npy``
files) run through Lamina's ``top`` interpreter; every float tensor's statistics give a threshold by
the chosen method (``kl`` by default), refined with ``--tune_num`` samples (0 disables tuning), and
the table is written atomically in TPU-MLIR's format. ``--cali_method`` (TPU-MLIR's newer name, with
its ``use_`` prefixes: ``use_kl``, ``use_mse``, ...) is accepted as well.

Exit status: 0 success; 1 bad input (missing dataset, a sample that does not fit the model, an
unreadable model); 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import Any

from lamina.quant.methods import METHODS
from lamina.tools.common import internal_error_guard

TOOL = "run_calibration"
#: The most histogram bins ``--histogram_bin_num`` may ask for (TPU-MLIR's default is 2048).
MAX_HISTOGRAM_BINS = 1 << 20


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
        "--asym_tail",
        type=float,
        default=None,
        help="list tensors with -min <= asym_tail * max under #asym_op, quantized with a zero point "
        "(default 0.05; 0 disables)",
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
    return p


def calibrate_file(
    mlir_file: str,
    dataset: str | None = None,
    data_list: str | None = None,
    input_num: int = 0,
    method: str = "kl",
    tune_num: int = 5,
    histogram_bin_num: int = 2048,
    calibration_table: str | None = None,
    progress: bool = False,
    log: Any = None,
    outlier_ratio: float | None = None,
    asym_tail: float | None = None,
) -> Any:
    """``run_calibration`` as a function: returns the :class:`CalibrationResult` and writes the table
    when ``calibration_table`` is given. Problems raise :class:`ToolError`."""
    from lamina.frontends.model_io import ToolError, module_signature, parse_mlir_file
    from lamina.quant.calibration import CalibrationError, calibrate, check_top_module
    from lamina.quant.dataset import DatasetError, SampleLoader, list_samples
    from lamina.support.paths import check_outputs

    if dataset is not None and data_list is not None:
        raise ToolError("give either --dataset or --data_list, not both")
    if tune_num < 0:
        raise ToolError(f"--tune_num must be >= 0, got {tune_num}")
    for flag, v in (("--outlier_ratio", outlier_ratio), ("--asym_tail", asym_tail)):
        if v is not None and not (v >= 0 and v != float("inf")):
            raise ToolError(f"{flag} must be a finite number >= 0 (0 disables), got {v}")
    if not 128 <= histogram_bin_num <= MAX_HISTOGRAM_BINS:
        raise ToolError(
            f"--histogram_bin_num must be from 128 to {MAX_HISTOGRAM_BINS}, got {histogram_bin_num}"
        )
    check_outputs([("the model", mlir_file), ("--data_list", data_list)], [("-o", calibration_table)])
    try:
        entries = list_samples(dataset, data_list, input_num)
    except DatasetError as e:
        raise ToolError(str(e)) from None
    if input_num and len(entries) < input_num and log is not None:
        log(f"{TOOL}: note: --input_num {input_num} but only {len(entries)} sample(s) found; using them all")
    module, _ctx = parse_mlir_file(mlir_file)
    module_signature(module, f"model '{mlir_file}'")  # a module without a function is named here
    try:
        check_top_module(module, mlir_file, TOOL)
    except CalibrationError as e:
        raise ToolError(str(e)) from None
    loader = SampleLoader.for_module(module)
    if tune_num > len(entries):
        tune_num = len(entries)
    try:
        # Check every sample can be read before the long run? No: samples are loaded lazily, and a bad
        # one stops the run with its name (the table is not written).
        result = calibrate(
            module,
            loader.iterate(entries),
            method=method,
            tune_num=tune_num,
            bin_num=histogram_bin_num,
            progress=progress,
            num_samples=len(entries),
            **{
                k: v for k, v in (("outlier_ratio", outlier_ratio), ("asym_tail", asym_tail)) if v is not None
            },
        )
    except (DatasetError, CalibrationError) as e:
        raise ToolError(str(e)) from None
    for w in result.warnings:
        if log is not None:
            log(f"{TOOL}: warning: {w}")
    if calibration_table is not None:
        try:
            result.table.write(calibration_table)
        except OSError as e:
            raise ToolError(f"cannot write '{calibration_table}': {e.strerror or e}") from None
    return result


def search_file(
    mlir_file: str,
    calibration_table: str,
    entries: Sequence[str],
    quantize_table: str,
    expected_cos: float = 0.99,
    max_float_layers: int | None = None,
    log: Any = None,
) -> Any:
    """``--search search_qtable``: the mixed-precision search on ``entries`` (sample paths) with the
    table at ``calibration_table``; writes the qtable and rewrites the table refined. Returns the
    :class:`~lamina.quant.search.SearchResult`; problems raise :class:`ToolError`."""
    from lamina.frontends.model_io import ToolError, parse_mlir_file
    from lamina.quant.dataset import DatasetError, SampleLoader
    from lamina.quant.search import SearchError, search_qtable

    module, ctx = parse_mlir_file(mlir_file)
    loader = SampleLoader.for_module(module)
    try:
        samples = [loader.load(e) for e in entries]
        return search_qtable(
            module,
            calibration_table,
            samples,
            expected_cos=expected_cos,
            max_float_layers=max_float_layers,
            quantize_table=quantize_table,
            refined_table=calibration_table,
            ctx=ctx,
            log=log,
        )
    except (DatasetError, SearchError) as e:
        raise ToolError(str(e)) from None


def check_search_flags(args: argparse.Namespace, searching: bool) -> None:
    """The numbers and output paths of the search, checked before calibrating (which takes long)."""
    import math

    from lamina.frontends.model_io import ToolError
    from lamina.support.paths import check_outputs

    if args.input_num < 0:
        raise ToolError(f"--input_num must be >= 0, got {args.input_num}")
    if not searching:
        return
    if not (math.isfinite(args.expected_cos) and -1.0 <= args.expected_cos <= 1.0):
        raise ToolError(f"--expected_cos must be a cosine from -1 to 1, got {args.expected_cos}")
    if args.max_float_layers is not None and args.max_float_layers < 0:
        raise ToolError(f"--max_float_layers must be >= 0, got {args.max_float_layers}")
    if args.search_num < 1:
        raise ToolError(f"--search_num must be at least 1, got {args.search_num}")
    check_outputs(
        [("the model", args.mlir_file), ("--data_list", args.data_list)],
        [("-o", args.calibration_table), ("--quantize_table", args.quantize_table)],
    )


def _run(args: argparse.Namespace, tool: str) -> int:
    from lamina.frontends.model_io import ToolError

    t0 = time.perf_counter()
    searching = args.search == "search_qtable"
    if searching and not args.quantize_table:
        print(
            f"{tool}: error: --search search_qtable needs --quantize_table (the qtable to write)",
            file=sys.stderr,
        )
        return 2
    if not searching and (args.quantize_table or args.max_float_layers is not None):
        print(
            f"{tool}: error: --quantize_table and --max_float_layers need --search search_qtable",
            file=sys.stderr,
        )
        return 2

    def log(msg: str) -> None:
        print(msg, file=sys.stderr)

    try:
        check_search_flags(args, searching)
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
            asym_tail=args.asym_tail,
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
            )
        except ToolError as e:
            print(f"{tool}: error: {e}", file=sys.stderr)
            return 1
        print(f"{tool}: {found.summary()}; wrote {args.quantize_table}", file=sys.stderr)
        if not found.reached:
            print(f"{tool}: error: expected cosine {args.expected_cos} not reached", file=sys.stderr)
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

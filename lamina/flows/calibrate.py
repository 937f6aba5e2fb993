"""The ``run_calibration`` flow: per-tensor int8 thresholds of a ``top`` model, and the
mixed-precision search.

:func:`calibrate_file` runs the samples (images preprocessed with the model's ``top.Input``
attributes, or ``.npz``/``.npy`` files) through Lamina's ``top`` interpreter, computes every float
tensor's threshold by the chosen method, tunes them and writes the table in TPU-MLIR's format;
:func:`search_file` runs the mixed-precision search (:mod:`lamina.quant.search`) and writes the
qtable. ``run_calibration`` (:mod:`lamina.tools.calibrate`) and :func:`lamina.api.calibrate` call them.
Problems raise :class:`~lamina.support.errors.ToolError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from lamina.support.errors import ToolError

__all__ = ["MAX_HISTOGRAM_BINS", "TOOL", "calibrate_file", "check_search_flags", "mask_note", "search_file"]

#: The command whose messages these are (``run_calibration: warning: ...``).
TOOL = "run_calibration"
#: The most histogram bins ``--histogram_bin_num`` may ask for (TPU-MLIR's default is 2048).
MAX_HISTOGRAM_BINS = 1 << 20


def calibrate_file(
    mlir_file: str | None,
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
    *,
    conv_outlier_ratio: float | None = None,
    mask_input: str | None = "auto",
    module: Any = None,
    samples: Sequence[Mapping[str, np.ndarray]] | None = None,
) -> Any:
    """``run_calibration`` as a function: returns the :class:`~lamina.quant.calibration.CalibrationResult`
    and writes the table when ``calibration_table`` is given. The model is ``mlir_file``, or ``module``
    when given (``mlir_file`` then only names it); the samples are listed from ``dataset`` or
    ``data_list``, or given in memory as ``samples`` (arrays by input name; the first ``input_num``
    are used, all with 0). ``mask_input``: the attention-mask input ("auto": detected; "none":
    none; see :mod:`lamina.quant.masking`); the statistics count only the positions it keeps, and
    the mask taken is reported through ``log``. Problems raise :class:`ToolError`."""
    from lamina.frontends.model_io import check_inputs, module_signature, parse_mlir_file
    from lamina.quant.calibration import CalibrationError, calibrate, check_top_module
    from lamina.quant.dataset import DatasetError, SampleLoader, list_samples
    from lamina.support.paths import check_outputs

    if dataset is not None and data_list is not None:
        raise ToolError("give either --dataset or --data_list, not both")
    if samples is not None and (dataset is not None or data_list is not None):
        raise ToolError("give either samples or a dataset (--dataset, --data_list), not both")
    if tune_num < 0:
        raise ToolError(f"--tune_num must be >= 0, got {tune_num}")
    for flag, v in (
        ("--outlier_ratio", outlier_ratio),
        ("--conv_outlier_ratio", conv_outlier_ratio),
        ("--asym_tail", asym_tail),
    ):
        if v is not None and not (v >= 0 and v != float("inf")):
            raise ToolError(f"{flag} must be a finite number >= 0 (0 disables), got {v}")
    if not 128 <= histogram_bin_num <= MAX_HISTOGRAM_BINS:
        raise ToolError(
            f"--histogram_bin_num must be from 128 to {MAX_HISTOGRAM_BINS}, got {histogram_bin_num}"
        )
    check_outputs([("the model", mlir_file), ("--data_list", data_list)], [("-o", calibration_table)])
    if samples is None:
        try:
            entries = list_samples(dataset, data_list, input_num)
        except DatasetError as e:
            raise ToolError(str(e)) from None
        n = len(entries)
    else:
        samples = list(samples)[: input_num or None]
        if not samples:
            raise ToolError("no calibration samples: samples is empty")
        n = len(samples)
    if input_num and n < input_num and log is not None:
        log(f"{TOOL}: note: --input_num {input_num} but only {n} sample(s) found; using them all")
    if module is None:
        if mlir_file is None:
            raise ToolError("calibration needs the model: a .mlir file or a module")
        module, _ctx = parse_mlir_file(mlir_file)
    name = f"model '{mlir_file}'" if mlir_file else "the model"
    sig = module_signature(module, name)  # a module without a function is named here
    try:
        check_top_module(module, mlir_file, TOOL)
    except CalibrationError as e:
        raise ToolError(str(e)) from None
    if samples is None:
        feed: Iterable[Mapping[str, np.ndarray]] = SampleLoader.for_module(module).iterate(entries)
    else:
        feed = (check_inputs(s, sig, f"calibration sample {i}") for i, s in enumerate(samples))
    if tune_num > n:
        tune_num = n
    try:
        # Check every sample can be read before the long run? No: samples are loaded lazily, and a bad
        # one stops the run with its name (the table is not written).
        result = calibrate(
            module,
            feed,
            method=method,
            tune_num=tune_num,
            bin_num=histogram_bin_num,
            progress=progress,
            num_samples=n,
            mask_input=mask_input,
            **{
                k: v
                for k, v in (
                    ("outlier_ratio", outlier_ratio),
                    ("conv_outlier_ratio", conv_outlier_ratio),
                    ("asym_tail", asym_tail),
                )
                if v is not None
            },
        )
    except (DatasetError, CalibrationError) as e:
        raise ToolError(str(e)) from None
    if log is not None:
        log(f"{TOOL}: {mask_note(result.mask, mask_input)}")
    for w in result.warnings:
        if log is not None:
            log(f"{TOOL}: warning: {w}")
    if calibration_table is not None:
        try:
            result.table.write(calibration_table)
        except OSError as e:
            raise ToolError(f"cannot write '{calibration_table}': {e.strerror or e}") from None
    return result


def mask_note(mask: Any, mask_input: str | None) -> str:
    """The line saying which input calibration took as the attention mask."""
    if mask is not None:
        how = "given" if mask_input not in (None, "auto") else "detected"
        return f"{how} {mask.describe()}: statistics over the kept positions"
    if mask_input is not None and str(mask_input).lower() == "none":
        return "no attention mask (--mask_input none): statistics over every position"
    return "no attention-mask input found: statistics over every position"


def search_file(
    mlir_file: str,
    calibration_table: str,
    entries: Sequence[str],
    quantize_table: str,
    expected_cos: float = 0.99,
    max_float_layers: int | None = None,
    log: Any = None,
    mask_input: str | None = "auto",
    float_mode: str = "F32",
    task: str | None = None,
    expected_task: float | None = None,
    task_threshold: float | None = None,
) -> Any:
    """``--search search_qtable``: the mixed-precision search on ``entries`` (sample paths) with the
    table at ``calibration_table``; writes the qtable and rewrites the table refined. Returns the
    :class:`~lamina.quant.search.SearchResult`; problems raise :class:`ToolError`."""
    from lamina.frontends.model_io import parse_mlir_file
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
            mask_input=mask_input,
            float_mode=float_mode,
            task=task,
            expected_task=expected_task,
            task_threshold=task_threshold,
        )
    except (DatasetError, SearchError) as e:
        raise ToolError(str(e)) from None


def check_search_flags(
    mlir_file: str,
    data_list: str | None,
    calibration_table: str | None,
    input_num: int,
    searching: bool,
    quantize_table: str | None = None,
    expected_cos: float = 0.99,
    max_float_layers: int | None = None,
    search_num: int = 10,
    expected_task: float | None = None,
) -> None:
    """The numbers and output paths of the search, checked before calibrating (which takes long)."""
    import math

    from lamina.support.paths import check_outputs

    if input_num < 0:
        raise ToolError(f"--input_num must be >= 0, got {input_num}")
    if not searching:
        return
    if not (math.isfinite(expected_cos) and -1.0 <= expected_cos <= 1.0):
        raise ToolError(f"--expected_cos must be a cosine from -1 to 1, got {expected_cos}")
    if max_float_layers is not None and max_float_layers < 0:
        raise ToolError(f"--max_float_layers must be >= 0, got {max_float_layers}")
    if search_num < 1:
        raise ToolError(f"--search_num must be at least 1, got {search_num}")
    if expected_task is not None and not (math.isfinite(expected_task) and 0.0 < expected_task <= 1.0):
        raise ToolError(f"--expected_task must be a score in (0, 1], got {expected_task}")
    check_outputs(
        [("the model", mlir_file), ("--data_list", data_list)],
        [("-o", calibration_table), ("--quantize_table", quantize_table)],
    )

"""Activation calibration: run the ``top`` interpreter over samples, gather per-tensor statistics,
pick a threshold per tensor, optionally tune it, and build a :class:`CalibrationTable`.

Statistics are gathered in one pass over the samples: after every op of the interpreter's plan, each
float result is fed to its :class:`~lamina.quant.histogram.TensorObserver` (min, max, moments and an
exact streaming log-grid histogram of ``|x|``) and then released as the interpreter's liveness
allows, so memory holds one sample's live tensors plus a fixed 256 KiB per tensor, whatever the
number of samples. The first ``tune_num`` samples keep every tensor for the tuning step.

Tensors with few elements per sample take their absmax whatever the method
(:mod:`lamina.quant.methods`), and a dense head's tensors take thresholds for what their consumer
reads (:mod:`lamina.quant.consumers`: a probability output keeps its range, a Sigmoid's input is
capped where the Sigmoid saturates). Two refinements, written in the table and applied by the
lowering (``docs/tpu.md``):

* **Outlier channels.** Transformers' residual streams carry a few channels hundreds of times larger
  than the rest (Bondarenko et al., "Understanding and Overcoming the Challenges of Efficient
  Transformer Quantization", 2021): one per-tensor scale then leaves the ordinary channels a handful
  of levels. For rank-2/3 tensors whose largest channel max exceeds ``outlier_ratio`` times the
  median channel max, the table gets per-channel thresholds (``#channel_th``), which the lowering
  turns into per-channel activation scales wherever producer and users can carry them (MatMul
  outputs, Add/Sub, float ops; a MatMul reading one folds the scales into its weights). Rank-4
  (convolutional) tensors are treated alike along axis 1 (by ``conv_outlier_ratio``, 2: a
  convolutional stem's channels differ less, and more of them), each channel's threshold capped at the
  tensor's own (its channel max clipped at the tuned per-tensor threshold: on PP-OCRv4 the channel
  maxima themselves, unclipped, cost more than per-channel scales gain, ``benchmarks/RESULTS.md``);
  the lowering takes them on targets that declare it (Conv outputs and inputs, Add/Sub, Mul,
  float ops).
* **One-sided tensors.** A tensor whose negative tail is tiny against its positive range
  (``-min <= asym_tail * max``, e.g. GELU/SiLU outputs, min -0.17 or -0.28) is listed under
  ``#asym_op``: it is quantized with a zero point even in symmetric mode, instead of wasting half the
  int8 range on the tail or clipping it (clipping GELU's tail to 0 costs MiniLM a cosine of 0.4).
  Conv/MatMul results are left out: TPU-MLIR reads a Conv/MatMul entry as "asymmetric input".

**Padded sequences.** When the model has an attention-mask input (found by
:func:`lamina.quant.masking.detect_mask`, or named with ``mask_input``), every statistic above (min,
max, moments, histogram, per-channel maxima, hence the thresholds, the outlier channels and the
one-sided tails) is gathered only over the elements at positions the sample's mask keeps, along each
tensor's masked sequence axes (``np.take`` of the kept indices: one cheap copy); tensors without a
masked axis (a pooled embedding, the mask's own arithmetic) use all their elements. Tuning scores
its consumers' errors over the kept positions as well.

The table names tensors by their location names (the interpreter's dump keys, the ONNX tensor names)
in network order; weights are not calibrated.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.dialects.tpu.tables import CalibrationTable, TensorStats
from lamina.quant.histogram import TensorObserver
from lamina.quant.masking import MaskError, MaskInfo, keep_positions, kept_elements, kept_flat, resolve_mask
from lamina.quant.methods import METHODS, MIN_THRESHOLD, compute_threshold

__all__ = [
    "CalibrationError",
    "CalibrationResult",
    "ModelRunner",
    "calibrate",
    "check_top_module",
    "collect_statistics",
]


#: per-channel thresholds where the largest channel max is this many times the median one
OUTLIER_RATIO = 4.0
#: the same for rank-4 (convolutional) tensors, along axis 1 (PP-OCRv4: 2 is best of 1, 1.5, 2, 3,
#: 4, ``benchmarks/RESULTS.md``)
CONV_OUTLIER_RATIO = 2.0
#: ``#asym_op`` where ``-min <= ASYM_TAIL * max``
ASYM_TAIL = 0.05


class CalibrationError(Exception):
    """Calibration cannot proceed (an op failed on a sample, no samples, ...)."""


def check_top_module(module: Any, source: str | None, tool: str = "run_calibration") -> None:
    """Raise :class:`CalibrationError` unless ``module`` is a ``top`` model that calibration (and the
    INT8 lowering) can take: one with ``tpu`` ops is already deployed, one without ``top`` ops is not a
    model_transform output. ``source`` names the file in the message (None: "the module")."""
    where = f"'{source}'" if source else "the module"
    dialects = {op.dialect_name for op in module.walk_ops()}
    if "tpu" in dialects:
        raise CalibrationError(
            f"{tool} expects a top-level .mlir from model_transform; {where} holds tpu ops (already deployed)"
        )
    if "top" not in dialects:
        raise CalibrationError(
            f"{tool} expects a top-level .mlir from model_transform; {where} has no top ops "
            f"(it holds {', '.join(sorted(d for d in dialects if d != 'builtin')) or 'nothing'})"
        )


class ModelRunner:
    """Runs a module sample by sample on the interpreter, observing every named float tensor as it
    is produced: the fast plan (in place, freeing dead values) for statistics, the full plan (every
    value kept, by slot) for the samples used by tuning."""

    def __init__(self, module: Any) -> None:
        from lamina.execution import ExecutionError, Interpreter

        try:
            self.interp = Interpreter(module)
        except ExecutionError as e:
            raise CalibrationError(f"cannot execute the model: {e}") from None
        self.names: dict[int, str] = {}
        seen: set[str] = set()
        # only values computed at run time: a constant sharing its user's location (a Reshape's
        # shape, an Attention's `none` operands) must not take the name from the tensor
        computed = {s for step in self.interp.plan for s in step[2]}
        for slot, name in self.interp.slot_names:
            if name in seen or slot not in computed:
                continue  # a name given twice: keep the first tensor
            seen.add(name)
            self.names[slot] = name
        self.input_names = list(self.interp.input_names)

    def run(
        self,
        inputs: Mapping[str, np.ndarray],
        observe: Callable[[str, np.ndarray], None] | None = None,
        keep_all: bool = False,
    ) -> list[Any] | None:
        """Run one sample; call ``observe(name, array)`` for every named float result as soon as it
        is computed. With ``keep_all`` returns the environment (every slot's value)."""
        from lamina.execution import ExecutionError

        names = self.names
        observer = None
        if observe is not None:

            def observer(slot: int, v: Any) -> None:
                name = names.get(slot)
                if name is not None and isinstance(v, np.ndarray) and v.dtype.kind == "f":
                    observe(name, v)

        try:
            return self.interp.execute(inputs, observer, keep_env=keep_all)
        except ExecutionError as e:
            raise CalibrationError(f"execution failed: {e}") from None


@dataclass
class CalibrationResult:
    table: CalibrationTable
    observers: dict[str, TensorObserver]
    initial_thresholds: dict[str, float]
    tuned: dict[str, float] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    #: problems that did not stop calibration (tensors holding some NaN/inf values)
    warnings: list[str] = field(default_factory=list)
    #: the attention mask the statistics were restricted by (None: every position counted)
    mask: MaskInfo | None = None


def collect_statistics(
    runner: ModelRunner,
    samples: Iterable[Mapping[str, np.ndarray]],
    keep: int = 0,
    progress: Any = None,
    mask: MaskInfo | None = None,
    kept_masks: list[np.ndarray | None] | None = None,
) -> tuple[dict[str, TensorObserver], list[list[Any]], int]:
    """Observers per tensor (network order), the environments of the first ``keep`` samples, and the
    number of samples seen. With ``mask``, each tensor with a masked axis is observed over the
    sample's kept positions only; ``kept_masks`` (when given) receives the kept positions of the first
    ``keep`` samples (None where nothing is padded)."""
    observers: dict[str, TensorObserver] = {}
    for name in runner.names.values():
        observers[name] = TensorObserver()
    used: set[str] = set()
    axes = mask.axes if mask is not None else {}
    cur: list[np.ndarray | None] = [None]

    def observe(name: str, v: np.ndarray) -> None:
        o = observers[name]
        k = cur[0]
        if k is not None and name in axes:
            for part in kept_elements(v, axes[name], k):
                o.update(part)
        else:
            o.update(v)
        used.add(name)

    envs: list[list[Any]] = []
    n = 0
    for inputs in samples:
        cur[0] = keep_positions(mask, inputs)
        if kept_masks is not None and n < keep:
            kept_masks.append(cur[0])
        env = runner.run(inputs, observe, keep_all=n < keep)
        if env is not None:
            envs.append(env)
        n += 1
        if progress is not None:
            progress.update(1)
    for o in observers.values():
        o.release()
    return {k: v for k, v in observers.items() if k in used}, envs, n


def calibrate(
    module: Any,
    samples: Iterable[Mapping[str, np.ndarray]],
    method: str = "kl",
    tune_num: int = 0,
    bin_num: int = 2048,
    tune_steps: int = 4,
    progress: bool = False,
    num_samples: int | None = None,
    blas_threads: int | None = 1,
    outlier_ratio: float = OUTLIER_RATIO,
    asym_tail: float = ASYM_TAIL,
    mask_input: str | None = "auto",
    conv_outlier_ratio: float = CONV_OUTLIER_RATIO,
) -> CalibrationResult:
    """Calibrate ``module`` on ``samples`` (input dicts). ``tune_num > 0`` tunes every threshold on the
    first ``tune_num`` samples (see :mod:`lamina.quant.tune`).

    ``blas_threads`` limits numpy's BLAS thread pool while calibrating (restored afterwards, with
    ``threadpoolctl``; None leaves it alone). One thread is the default: the
    convolutions' GEMMs are small enough that OpenBLAS's spinning worker threads cost more than they
    give, and on a loaded machine they make calibration several times slower (see
    benchmarks/RESULTS.md).

    ``outlier_ratio`` (rank-2/3 tensors), ``conv_outlier_ratio`` (rank-4 tensors) and ``asym_tail``
    (0 disables each) control the per-channel thresholds and the ``#asym_op`` list (see the module
    doc).

    ``mask_input``: "auto" (default) detects an attention-mask input
    (:func:`lamina.quant.masking.detect_mask`) and gathers the statistics over the positions it
    keeps; an input name says which input it is (checked); None or "none" disables it. The mask used
    is :attr:`CalibrationResult.mask`."""
    try:
        mask = resolve_mask(module, mask_input)
    except MaskError as e:
        raise CalibrationError(str(e)) from None
    with _limit_blas(blas_threads):
        res = _calibrate(module, samples, method, tune_num, bin_num, tune_steps, progress, num_samples, mask)
    res.mask = mask
    from lamina.quant.consumers import apply_consumer_rules

    res.table.comments += [f"# consumer rule: {n}" for n in apply_consumer_rules(module, res.table)]
    mark_outlier_channels(res.table, res.observers, outlier_ratio, conv_outlier_ratio)
    _drop_sequence_channels(module, res.table, mask)
    mark_one_sided(res.table, res.observers, asym_tail, _asym_input_names(module))
    return res


def _asym_input_names(module: Any) -> set[str]:
    """Result names of the ops whose ``#asym_op`` entry TPU-MLIR reads as "asymmetric input"."""
    from lamina.dialects.tpu.transforms.import_calibration import ASYM_INPUT_OPS
    from lamina.ir.naming import result_names

    return {n for op in module.walk_ops() if op.name in ASYM_INPUT_OPS for n in result_names(op)}


def mark_outlier_channels(
    table: CalibrationTable,
    observers: Mapping[str, TensorObserver],
    ratio: float,
    conv_ratio: float = CONV_OUTLIER_RATIO,
) -> None:
    """Add ``#channel_th`` entries for the tensors with outlier channels (see the module doc):
    rank-2/3 tensors by ``ratio``, rank-4 ones by ``conv_ratio`` (0 disables either)."""
    for name, o in observers.items():
        c = o.channel_absmax
        if c is None or name not in table.thresholds or c.size < TensorObserver.MIN_CHANNELS:
            continue
        r = conv_ratio if o.channel_axis == 1 else ratio
        top, med = float(np.max(c)), float(np.median(c))
        if r > 0 and top > 0 and top >= r * max(med, 1e-30):
            if o.channel_axis == 1:  # rank 4: never coarser than the tensor's own threshold
                c = np.minimum(c, table.thresholds[name].threshold)
            table.channel_thresholds[name] = (int(o.channel_axis), [float(v) for v in c])


def _drop_sequence_channels(module: Any, table: CalibrationTable, mask: MaskInfo | None) -> None:
    """Drop the rank-4 ``#channel_th`` entries whose axis 1 is not a channel axis of the model's
    tensor: a masked sequence axis (a transformer's ``[batch, tokens, heads, dim]``, observed over
    the kept positions only) or one whose static size differs from the entry's."""
    from lamina.dialects.tpu.tables import model_tensors

    masked = set(mask.axes) if mask is not None else set()
    types = model_tensors(module)
    for name, (axis, ths) in list(table.channel_thresholds.items()):
        shape = getattr(types.get(name), "shape", None)
        if shape is None or len(shape) != 4:
            continue
        if name in masked or axis != 1 or shape[1] != len(ths):
            del table.channel_thresholds[name]


def mark_one_sided(
    table: CalibrationTable,
    observers: Mapping[str, TensorObserver],
    tail: float,
    skip: Iterable[str] = (),
) -> None:
    """List the tensors with a tiny negative tail under ``#asym_op`` (see the module doc), except
    those in ``skip``: Conv/MatMul results, whose entry TPU-MLIR reads as "asymmetric input"."""
    if tail <= 0:
        return
    skip = set(skip)
    for name, o in observers.items():
        st = table.thresholds.get(name)
        if st is None or name in table.asym_ops or name in skip or not o.count:
            continue
        if st.min < 0 < st.max and -st.min <= tail * st.max:
            table.asym_ops.append(name)


def _limit_blas(threads: int | None) -> Any:
    import contextlib

    if threads is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits  # a declared dependency

    return threadpool_limits(limits=threads, user_api="blas")


def _calibrate(
    module: Any,
    samples: Iterable[Mapping[str, np.ndarray]],
    method: str,
    tune_num: int,
    bin_num: int,
    tune_steps: int,
    progress: bool,
    num_samples: int | None,
    mask: MaskInfo | None = None,
) -> CalibrationResult:
    if method not in METHODS:
        raise CalibrationError(
            f"unknown calibration method '{method}' (expected one of {', '.join(METHODS)})"
        )
    if bin_num < 128:
        raise CalibrationError(f"--histogram_bin_num must be at least 128, got {bin_num}")
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    runner = ModelRunner(module)
    bar = _bar(progress, num_samples, "statistics")
    kept_masks: list[np.ndarray | None] = []
    try:
        observers, envs, n = collect_statistics(
            runner, samples, keep=tune_num, progress=bar, mask=mask, kept_masks=kept_masks
        )
    finally:
        if bar is not None:
            bar.close()
    if n == 0:
        raise CalibrationError("no calibration samples")
    warnings = _check_finite(observers, n)
    timings["statistics"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    thresholds = {name: compute_threshold(method, o, bin_num) for name, o in observers.items()}
    timings["thresholds"] = time.perf_counter() - t1
    tuned: dict[str, float] = {}
    final = dict(thresholds)
    if tune_num > 0 and envs:
        from lamina.quant.tune import tune_thresholds

        t2 = time.perf_counter()
        absmax = {k: o.absmax for k, o in observers.items()}
        kept = None
        if mask is not None and any(k is not None for k in kept_masks):
            kept = _kept_fn(runner, mask, kept_masks)
        tuned = tune_thresholds(
            runner, envs, thresholds, absmax, steps=tune_steps, progress=progress, kept=kept
        )
        final.update(tuned)
        timings["tune"] = time.perf_counter() - t2
    table = CalibrationTable(
        histogram_bin_num=bin_num,
        sample_num=n,
        tune_num=min(tune_num, len(envs)) if tune_num > 0 else None,
        comments=[f"# calibration method: {method}"],
    )
    for name, o in observers.items():
        th = final[name]
        if not math.isfinite(th) or th <= 0:
            th = MIN_THRESHOLD
        lo, hi = (o.min, o.max) if o.count else (-MIN_THRESHOLD, MIN_THRESHOLD)
        if o.count and o.absmax == 0:
            lo, hi = -MIN_THRESHOLD, MIN_THRESHOLD
        table.thresholds[name] = TensorStats(float(th), float(lo), float(hi))
    timings["total"] = time.perf_counter() - t0
    return CalibrationResult(table, observers, thresholds, tuned, timings, warnings)


def _kept_fn(
    runner: ModelRunner, mask: MaskInfo, kept_masks: list[np.ndarray | None]
) -> Callable[[int, int, np.ndarray], np.ndarray]:
    """``kept(env index, slot, array)``: the array's elements at the kept positions of that sample
    (flattened), for tuning's error measure."""
    specs = {slot: mask.axes[name] for slot, name in runner.names.items() if name in mask.axes}

    def kept(k: int, slot: int, x: np.ndarray) -> np.ndarray:
        spec = specs.get(slot)
        m = kept_masks[k] if k < len(kept_masks) else None
        if spec is None or m is None:
            return x
        return kept_flat(x, spec, m)

    return kept


def _check_finite(observers: Mapping[str, TensorObserver], n: int) -> list[str]:
    """A tensor NaN/inf in every sample is an error (no threshold can be chosen for it); one holding
    NaN/inf in part is one warning line for all such tensors (the statistics ignore those values)."""
    dead = [k for k, o in observers.items() if o.count == 0 and o.nonfinite > 0]
    if dead:
        more = f" (and {len(dead) - 1} more: {', '.join(repr(d) for d in dead[1:4])}{' ...' if len(dead) > 4 else ''})"
        raise CalibrationError(
            f"tensor '{dead[0]}' is NaN/inf everywhere in all {n} sample(s)"
            f"{more if len(dead) > 1 else ''}: no threshold can be chosen; check the samples and the model"
        )
    partial = [(k, o) for k, o in observers.items() if o.nonfinite > 0]
    if not partial:
        return []
    shown = ", ".join(f"'{k}' ({o.nonfinite} of {o.nonfinite + o.count} values)" for k, o in partial[:3])
    return [
        f"{len(partial)} tensor(s) hold NaN/inf in the calibration samples: {shown}"
        f"{f' and {len(partial) - 3} more' if len(partial) > 3 else ''}; their statistics ignore those values"
    ]


def _bar(progress: bool, total: int | None, desc: str) -> Any:
    if not progress:
        return None
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return None
    return tqdm(total=total, desc=desc, unit="sample", leave=False, dynamic_ncols=True, disable=None)

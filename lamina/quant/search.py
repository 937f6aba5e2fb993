"""Automatic mixed precision: choose the fewest layers to keep in float so that the INT8 model's final
outputs stay within ``expected_cos`` of the float model.

The entry point, called by ``run_calibration --search search_qtable --expected_cos 0.99
--max_float_layers N --quantize_table out_qtable``::

    result = search_qtable(module, table, samples, expected_cos=0.99, max_float_layers=None,
                           quantize_table="M_qtable", refined_table="M_cali_table.refined")

Steps:

1. **Automatic marking** (:func:`auto_float_ops`): shape-computing ops (integer results: ``Shape``,
   ``Range``, the attention-mask ``Compare``/``Cast``, index ``Gather`` ...) are marked ``F32`` and
   not counted as float layers (they are never INT8 compute); *fragile patterns* are candidates
   for floating first: detection-head coordinate outputs (an output ``Concat`` mixing inputs whose
   calibrated ranges differ by :data:`RANGE_RATIO` or more, with the ops decoding the wide-range
   branch back to the last convolution), and the softmax / LayerNorm / GELU paths of transformers
   (``Softmax``, ``Attention``, ``LayerNorm``, ``RMSNorm``, ``GELU`` and the ``Erf`` GELU pattern).
2. **Baseline**: all layers INT8 except the shape ops and a detection head's coordinate decoding
   (the elementwise ops from the box branch to the output ``Concat``, and that ``Concat``): int8
   coordinates step by range/127 — 5 px at 640x640 — which the output cosine hardly shows but box
   overlap does, and those ops cost nothing next to the convolutions (onnxruntime's
   ``quantize_static`` leaves them in float as well); the cosine of the worst final output of each
   sample, averaged over the samples, against the float ``top`` interpreter. (In pure INT8 the head
   ``Concat`` keeps the scores anyway: the lowering gives it a per-axis type, see ``docs/tpu.md``.)
3. **Sensitivity ranking**. A model of at most :data:`EXHAUSTIVE_LAYERS` layers whose ranking is
   estimated (layers x the baseline's time on the rank samples) to take at most
   :data:`EXHAUSTIVE_SECONDS` (or any model with a stand-in ``evaluate``): float one layer at a time and measure the cosine gained (``gain = cos(layer in
   float) - cos(baseline)``). A larger model: each tensor's *own* INT8 error, ``1 - cos(x,
   fake_quant(x))`` with its calibrated threshold, from one float run of :data:`QERR_SAMPLES`
   samples, with no lowering at all; its selection, pruning and refinement then measure on the first
   :data:`RANK_SAMPLES` samples and the result is confirmed on all of them. One layer at a time costs one lowering and run per layer
   (642 of them for a PP-OCR-sized detector: hours), and it misses what such networks suffer from:
   a channel far larger than the others crushes every tensor along the chain carrying it, and
   floating any one of them alone gains nothing. The ranking is printed, most sensitive first.
4. **Selection**: with a measured ranking, greedy: layers in ranking order (a fragile-pattern layer
   before an equally sensitive one) are floated one at a time, each kept only when the re-measured
   model improves. With the error ranking, bisection: the fewest first layers of the ranking, each
   followed by the layers reading its tensor (a tensor's error goes only when it stays float end to
   end; floating its producer alone casts it back to int8 for its readers), that reach the target
   (the cosine grows with the prefix, nearly): about log2(limit) evaluations.
   Both stop at ``expected_cos`` or ``max_float_layers`` float layers (default: 10% of the layers,
   at least 1). With a **task objective** (``task``, ``expected_task``: ``run_calibration --task ocr
   --expected_task 0.98``) every evaluation also scores the outputs as ``model_deploy --task`` does
   (:func:`lamina.tasks.task_check`, averaged over the samples), the target is both, and candidates
   are compared by the smaller margin. A large model's bisection then measures two orders at the
   float budget, by INT8 error and in network order (a block from the input: a task score lost
   thinly along a backbone, as PP-OCRv4's mask IoU, is recovered by floating its first part, not by
   its worst tensors), bisects the better one, and for a block bisects its start as well.
5. **Pruning**: each floated layer, least useful first (at most :data:`RANK_TOP` of them with the
   error ranking), is put back to INT8 when the target still holds without it. Then the
   confirmation on all samples; when it falls short, greedy continues on all samples. The result is
   never worse than all-INT8.
6. **Refinement** (``refine_top``, default 4; skipped for a large model with a task objective): the thresholds of the most sensitive layers that stay
   INT8 are re-chosen among ``threshold * {0.6, 0.75, 0.9, 1.0}`` and ``max(|min|, |max|)`` by the
   final-output cosine; kept only when they also help on all samples; the refined table is written
   to ``refined_table`` when given.

Every phase reports progress through ``log`` (phase, candidates done/total, elapsed time, ETA), and
``max_evaluations`` (default :data:`MAX_EVALUATIONS`) bounds the lowerings measured: when it is spent
the search keeps the best found so far. Figures: ``benchmarks/search_speed.py`` and
``benchmarks/RESULTS.md``.

The measure is the real thing: every candidate is lowered with ``convert-top-to-tpu`` (through
:func:`lamina.quant.deploy.deploy_module`) and run on the bit-exact ``tpu`` interpreter. Tests and
other searches may pass their own ``evaluate(qtable, table) -> cosine`` instead.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

__all__ = [
    "FLOAT_MODES",
    "FRAGILE_OP_TYPES",
    "RANGE_RATIO",
    "LayerSensitivity",
    "SearchError",
    "SearchResult",
    "auto_float_ops",
    "layers",
    "output_cosine",
    "search_qtable",
]

#: The float modes a layer may be kept in on the reference ``tpu`` target (its
#: :attr:`~lamina.dialects.tpu.capabilities.TargetCapabilities.float_modes`); another target's come
#: from the ``capabilities`` given to :func:`search_qtable`.
FLOAT_MODES = ("F32", "F16", "BF16")
#: samples the ranking, greedy and pruning measure on (the result is confirmed on all)
RANK_SAMPLES = 4
#: models with at most this many layers get the measured one-layer-at-a-time ranking
EXHAUSTIVE_LAYERS = 200
#: ... unless that ranking (one evaluation per layer on the rank samples, estimated from the
#: baseline's time) would take longer than this many seconds: then the error ranking
EXHAUSTIVE_SECONDS = 120.0
#: at most this many floated layers are tried for pruning with the error ranking
RANK_TOP = 16
#: samples whose float run gives each tensor's own quantization error
QERR_SAMPLES = 2
#: the default bound on the lowerings measured
MAX_EVALUATIONS = 200
#: ``top`` op types whose INT8 lowering is known to lose accuracy in transformers.
FRAGILE_OP_TYPES = frozenset(
    {"top.Softmax", "top.Attention", "top.LayerNorm", "top.RMSNorm", "top.GELU", "top.Erf", "top.GroupNorm"}
)
#: Ops that produce or only move shapes/indices.
SHAPE_OP_TYPES = frozenset(
    {
        "top.Shape",
        "top.Size",
        "top.Range",
        "top.ConstantOfShape",
        "top.NonZero",
        "top.Compare",
        "top.TopK",
        "top.Arg",
    }
)
#: A ``Concat`` feeding an output whose inputs' calibrated ranges differ by this factor is a
#: detection head mixing coordinates (hundreds) with scores (0..1).
RANGE_RATIO = 8.0
#: Ops walked back from a detection head's wide-range branch (the decoding arithmetic).
_DECODE_OP_TYPES = frozenset(
    {"top.Add", "top.Sub", "top.Mul", "top.Div", "top.Concat", "top.Reshape", "top.Permute", "top.Slice",
     "top.Split", "top.Squeeze", "top.Unsqueeze", "top.Flatten", "top.Softmax", "top.Expand"}
)  # fmt: skip


class SearchError(Exception):
    """The search cannot run (no samples, nothing to quantize, a lowering failure)."""


@dataclass
class LayerSensitivity:
    """One layer of the ranking: the final-output cosine with only this layer in float and its gain
    over all-INT8; for a model ranked by each tensor's own INT8 error, ``cos`` is NaN and ``gain`` is
    that error (``1 - cos`` of the tensor fake-quantized with its threshold)."""

    name: str
    op_type: str
    cos: float
    gain: float


@dataclass
class SearchResult:
    """The qtable chosen and how it was found."""

    qtable: dict[str, str]
    float_layers: list[str]
    shape_ops: list[str]
    fragile: dict[str, str]
    ranking: list[LayerSensitivity]
    baseline_cos: float
    final_cos: float
    expected_cos: float
    n_layers: int
    max_float_layers: int
    refined: dict[str, float] = field(default_factory=dict)
    evaluations: int = 0
    #: the attention-mask input the outputs were compared over (None: every position)
    mask_input: str | None = None
    #: the float mode of the floated layers
    float_mode: str = "F32"
    #: the task objective (:mod:`lamina.tasks`: ``ocr``, ``seg``...) and its scores (None: cosine only)
    task: str | None = None
    expected_task: float | None = None
    baseline_task: float | None = None
    final_task: float | None = None

    @property
    def reached(self) -> bool:
        task_ok = self.task is None or (
            self.final_task is not None
            and self.expected_task is not None
            and self.final_task >= self.expected_task
        )
        return self.final_cos >= self.expected_cos and task_ok

    def summary(self) -> str:
        pct = 100.0 * len(self.float_layers) / max(1, self.n_layers)
        base, final, want = f"cos {self.baseline_cos:.6f}", f"{self.final_cos:.6f}", f"{self.expected_cos}"
        if self.task is not None:
            base += f", task {self.task} {self.baseline_task:.4f}"
            final += f", task {self.task} {self.final_task:.4f}"
            want += f" and task {self.task} {self.expected_task}"
        return (
            f"INT8 baseline {base} -> {final} with {len(self.float_layers)} of "
            f"{self.n_layers} layers in float ({self.float_mode}, {pct:.1f}%, limit {self.max_float_layers})"
            f"{'' if self.reached else f'; expected {want} NOT reached'}"
            f"{f', {len(self.refined)} threshold(s) refined' if self.refined else ''}; {self.evaluations} evaluations"
            f"{f'; cosines over the positions kept by mask input {self.mask_input!r}' if self.mask_input else ''}"
        )

    def ranking_text(self, top: int | None = None) -> str:
        rows = self.ranking if top is None else self.ranking[:top]
        w = min(60, max([len(r.name) for r in rows] + [5]))
        own = bool(rows) and math.isnan(rows[0].cos)  # ranked by their own INT8 error
        head = f"{'INT8 error':>12}" if own else f"{'cos if float':>12} {'gain':>10}"
        out = [f"{'rank':>4}  {'layer':<{w}}  {'type':<14} {head}"]
        for i, r in enumerate(rows, 1):
            mark = " *" if r.name in self.float_layers else ""
            vals = f"{r.gain:>12.6f}" if own else f"{r.cos:>12.6f} {r.gain:>10.6f}"
            out.append(f"{i:>4}  {r.name:<{w}}  {r.op_type[4:]:<14} {vals}{mark}")
        return "\n".join(out)


# ---- the graph -------------------------------------------------------------------------------------------


def _names(op: Any) -> list[str]:
    from lamina.ir.naming import result_names

    return result_names(op)


def _is_integer(t: Any) -> bool:
    from lamina.ir.types import IntegerType, ShapedType

    elem = t.element_type if isinstance(t, ShapedType) else t
    return isinstance(elem, IntegerType) or type(elem).__name__ == "IndexType"


def layers(module: Any) -> list[tuple[str, Any]]:
    """``(name, op)`` of every op a qtable may name (first result's name), in network order."""
    from lamina.ir.traits import NotALayer

    out: list[tuple[str, Any]] = []
    for op in module.walk_ops():
        if op.dialect_name != "top" or op.has_trait(NotALayer) or not op.results:
            continue
        out.append((_names(op)[0], op))
    return out


def auto_float_ops(module: Any, table: Any = None) -> tuple[list[str], dict[str, str]]:
    """(shape ops, fragile layers with the reason) of a ``top`` module; ``table`` (a
    :class:`~lamina.dialects.tpu.tables.CalibrationTable`) enables the detection-head rule."""
    shape_ops: list[str] = []
    fragile: dict[str, str] = {}
    all_layers = layers(module)
    for name, op in all_layers:
        if op.name in SHAPE_OP_TYPES or all(_is_integer(r.type) for r in op.results):
            shape_ops.append(name)
        elif op.name in FRAGILE_OP_TYPES:
            fragile[name] = f"{op.name[4:]} (transformer softmax/LayerNorm/GELU path)"
    if table is not None:
        for name, why in _detection_heads(module, table).items():
            if name not in shape_ops:
                fragile.setdefault(name, why)
    return shape_ops, fragile


def _threshold(table: Any, name: str) -> float | None:
    s = table.get(name) if table is not None else None
    if s is None:
        return None
    return max(abs(s.threshold), abs(s.min), abs(s.max))


def _detection_heads(module: Any, table: Any) -> dict[str, str]:
    """Output Concats mixing a wide-range branch with narrow ones, and the wide branch's decoding."""
    from lamina.execution.interpreter import find_main

    func = find_main(module)
    ret = func.regions[0].blocks[0].last_op
    out: dict[str, str] = {}
    if ret is None:
        return out
    for v in ret.operands:
        op = v.owner if hasattr(v, "owner") else None
        while op is not None and op.name in ("top.Reshape", "top.Permute", "top.Squeeze", "top.Unsqueeze"):
            op = getattr(op.operands[0], "owner", None)
        if op is None or op.name != "top.Concat" or len(op.operands) < 2:
            continue
        ranges = []
        for x in op.operands:
            src = getattr(x, "owner", None)
            t = _threshold(table, _names(src)[0]) if src is not None and hasattr(src, "name") else None
            ranges.append(t)
        known = [r for r in ranges if r]
        if len(known) < 2 or max(known) / max(min(known), 1e-12) < RANGE_RATIO:
            continue
        head = _names(op)[0]
        out[head] = f"detection-head output Concat (input ranges {min(known):.3g} .. {max(known):.3g})"
        wide = [x for x, r in zip(op.operands, ranges) if r and r >= max(known) / RANGE_RATIO]
        stack = [getattr(x, "owner", None) for x in wide]
        seen: set[int] = set()
        while stack:
            o = stack.pop()
            if o is None or not hasattr(o, "name") or id(o) in seen or o.name not in _DECODE_OP_TYPES:
                continue
            seen.add(id(o))
            out.setdefault(_names(o)[0], f"detection-head coordinate decoding feeding '{head}'")
            stack.extend(getattr(x, "owner", None) for x in o.operands)
    return out


# ---- measuring ---------------------------------------------------------------------------------------------


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    if not np.all(np.isfinite(b)):
        return 0.0
    na, nb = float(np.linalg.norm(a)), float(np.linalg.norm(b))
    if na == 0.0 or nb == 0.0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def output_cosine(
    ref: Sequence[Mapping[str, np.ndarray]],
    got: Sequence[Mapping[str, np.ndarray]],
    names: Sequence[str],
    mask: Any = None,
    keeps: Sequence[np.ndarray | None] | None = None,
) -> float:
    """The worst output's cosine (float64, flattened) per sample, averaged over the samples. With
    ``mask`` (a :class:`~lamina.quant.masking.MaskInfo`) and ``keeps`` (each sample's kept positions),
    an output with a masked axis is compared over its kept positions only."""
    from lamina.quant.masking import kept_flat

    vals = []
    for i, (r, g) in enumerate(zip(ref, got)):
        k = keeps[i] if keeps is not None and i < len(keeps) else None
        if mask is None or k is None:
            vals.append(min(_cos(r[n], g[n]) for n in names))
            continue
        vals.append(
            min(
                _cos(kept_flat(r[n], mask.axes.get(n), k), kept_flat(g[n], mask.axes.get(n), k))
                for n in names
            )
        )
    return float(np.mean(vals)) if vals else 0.0


class TpuEvaluator:
    """The real measure: lower with ``convert-top-to-tpu`` and run the ``tpu`` interpreter on the
    first ``n`` samples (all by default) against the float ``top`` outputs, computed once.
    :meth:`local_errors` gives the cheap sensitivity estimate the search ranks layers with first."""

    def __init__(
        self,
        module: Any,
        samples: Sequence[Mapping[str, np.ndarray]],
        asymmetric: bool,
        ctx: Any,
        mask: Any = None,
        task: str | None = None,
        task_threshold: float | None = None,
    ):
        from lamina.frontends.model_io import module_signature, run_top_module
        from lamina.quant.masking import keep_positions
        from lamina.tasks import TaskError, task_outputs

        self.module, self.samples, self.asymmetric, self.ctx = module, list(samples), asymmetric, ctx
        self.outs = module_signature(module).output_names
        self.ref = [run_top_module(module, dict(s)) for s in self.samples]
        #: the attention mask the outputs are compared over (None: every position)
        self.mask = mask
        self.keeps = [keep_positions(mask, s) for s in self.samples]
        #: the task whose score is measured beside the cosine (None: cosine only), on these outputs
        self.task, self.task_threshold = task, task_threshold
        self.task_names: list[str] = []
        if task is not None:
            try:
                self.task_names = task_outputs(task, self.ref[0])
            except TaskError as e:
                raise SearchError(f"the task objective: {e}") from None

    def deploy(self, qtable: dict[str, str], table: Any) -> Any:
        from lamina.quant.deploy import deploy_module

        return deploy_module(
            self.module, "INT8", asymmetric=self.asymmetric, calibration_table=table, qtable=qtable or None,
            ctx=self.ctx, warn=lambda m: None,
        )  # fmt: skip

    def __call__(self, qtable: dict[str, str], table: Any, n: int | None = None) -> float:
        return self.measure(qtable, table, n)[0]

    def measure(self, qtable: dict[str, str], table: Any, n: int | None = None) -> tuple[float, float | None]:
        """(the outputs' cosine, the task score or None) on the first ``n`` samples: the task score
        is :func:`lamina.tasks.task_check`'s (the worst checked output's) averaged over the samples,
        as ``model_deploy --task`` scores one sample."""
        from lamina.quant.deploy import run_tpu_module
        from lamina.tasks import task_check

        tpu = self.deploy(qtable, table)
        k = len(self.samples) if n is None else min(n, len(self.samples))
        got = [run_tpu_module(tpu, dict(s)) for s in self.samples[:k]]
        cos = output_cosine(self.ref[:k], got, self.outs, self.mask, self.keeps[:k])
        if self.task is None:
            return cos, None
        scores = [
            min(r.score for r in task_check(self.task, g, ref, self.task_threshold, self.task_names))
            for g, ref in zip(got, self.ref[:k])
        ]
        return cos, float(np.mean(scores))

    def quant_errors(self, table: Any, n: int) -> dict[str, float]:
        """Each tensor's own INT8 error, ``1 - cos(x, fake_quant(x))`` with its calibrated threshold
        (per channel when the table has ``#channel_th`` for it), averaged over the first ``n``
        samples of one dumped float run each: the tensors whose quantization loses the most
        (an outlier channel crushing the others, a clipped tail) come first, and so does every
        tensor along a chain that carries such a channel, which floating one layer at a time misses."""
        from lamina.frontends.model_io import run_top_module
        from lamina.quant.consumers import read_through_sigmoid
        from lamina.quant.masking import kept_flat

        # a tensor only a Sigmoid reads (a dense head's logits) is compared where it is read:
        # sigmoid(x + offset), so that clipping where the Sigmoid saturates counts as nothing
        through = read_through_sigmoid(self.module)

        def seen(name: str, x: np.ndarray) -> np.ndarray:
            off = through.get(name)
            if off is None:
                return x
            with np.errstate(over="ignore"):
                return 1.0 / (1.0 + np.exp(-(x.astype(np.float64) + off)))

        err: dict[str, float] = {}
        k = max(1, min(n, len(self.samples)))
        axes = self.mask.axes if self.mask is not None else {}
        for i, s in enumerate(self.samples[:k]):
            keep = self.keeps[i]
            for name, x in run_top_module(self.module, dict(s), dump_all=True).items():
                st = table.get(name)
                if st is None or x.dtype.kind != "f" or not x.size:
                    continue
                xq = _fake_quant(x, st, table.channel_thresholds.get(name))
                x, xq = seen(name, x), seen(name, xq)
                spec = axes.get(name)
                if keep is not None and spec is not None:  # over the kept positions only
                    x, xq = kept_flat(x, spec, keep), kept_flat(xq, spec, keep)
                err[name] = err.get(name, 0.0) + (1.0 - _cos(x, xq)) / k
        return err


def _fake_quant(x: np.ndarray, st: Any, channels: tuple[int, list[float]] | None) -> np.ndarray:
    """``x`` quantized to int8 and back as the lowering does: symmetric, unsigned when never negative."""
    th: Any = float(st.threshold)
    if channels is not None:
        axis, ths = channels
        if 0 <= axis < x.ndim and x.shape[axis] == len(ths):
            shape = [1] * x.ndim
            shape[axis] = len(ths)
            th = np.maximum(np.asarray(ths, np.float64), 1e-12).reshape(shape)
    x = np.asarray(x, np.float32)
    lo, levels = (0, 255) if st.min >= 0 and channels is None else (-128, 127)
    scale = np.asarray(th / levels, np.float32)
    q = np.round(x / scale)
    np.clip(q, lo, levels, out=q)
    q *= scale
    return q


class _Progress:
    """Progress lines with an estimate: ``phase: done/total candidates, elapsed, ETA``, through ``say``
    at most every ``interval`` seconds (and at the end of each phase)."""

    def __init__(self, say: Callable[[str], None], interval: float) -> None:
        self.say, self.interval = say, interval
        self.t0 = time.perf_counter()
        self.phase, self.total, self.start, self.last = "", 0, self.t0, -math.inf

    def begin(self, phase: str, total: int) -> None:
        self.phase, self.total, self.start, self.last = phase, total, time.perf_counter(), -math.inf

    def step(self, done: int) -> None:
        now = time.perf_counter()
        if done < self.total and now - self.last < self.interval:
            return
        self.last = now
        took = now - self.start
        eta = took / done * (self.total - done) if done else 0.0
        self.say(
            f"search_qtable: {self.phase}: {done}/{self.total} candidates, {now - self.t0:.0f} s elapsed, "
            f"ETA {eta:.0f} s for this phase"
        )


class _OutOfBudget(Exception):
    pass


# ---- the search --------------------------------------------------------------------------------------------


def search_qtable(
    module: Any,
    calibration_table: Any,
    samples: Sequence[Mapping[str, np.ndarray]],
    *,
    expected_cos: float = 0.99,
    max_float_layers: int | None = None,
    float_mode: str = "F32",
    asymmetric: bool = False,
    quantize_table: str | None = None,
    refined_table: str | None = None,
    refine_top: int = 4,
    ctx: Any = None,
    log: Callable[[str], None] | None = print,
    evaluate: Callable[..., float] | None = None,
    rank_samples: int = RANK_SAMPLES,
    rank_top: int = RANK_TOP,
    exhaustive_layers: int = EXHAUSTIVE_LAYERS,
    max_evaluations: int | None = MAX_EVALUATIONS,
    progress_interval: float = 5.0,
    capabilities: Any = None,
    mask_input: str | None = "auto",
    task: str | None = None,
    expected_task: float | None = None,
    task_threshold: float | None = None,
) -> SearchResult:
    """Find the fewest layers to run in ``float_mode`` so that INT8 reaches ``expected_cos`` (and,
    with ``task``, the task score ``expected_task``).

    ``module``: the ``top`` module (not modified); ``calibration_table``: a path or a
    :class:`~lamina.dialects.tpu.tables.CalibrationTable`; ``samples``: inputs by name; ``max_float_layers``:
    the most layers in float (default 10% of the layers, at least 1; shape ops are not counted);
    ``asymmetric``: INT8 asymmetric activations; ``quantize_table`` / ``refined_table``: where to write
    the qtable and the refined calibration table (atomically; nothing is written when None); ``log``:
    where the ranking and the progress lines go (None: silent; progress at most every
    ``progress_interval`` seconds, with the phase, candidates done/total, elapsed time and ETA).

    Speed: a model of more than ``exhaustive_layers`` layers is ranked by each tensor's own INT8
    error (no lowering), the number of layers to float is found by bisection and at most ``rank_top``
    of them are tried for pruning, all measured on the first ``rank_samples`` samples, and the
    result is confirmed on all of them (greedy continues on all when the confirmation falls short);
    smaller models are searched as before, on all samples. At most ``max_evaluations`` lowerings are measured (None: no bound).

    ``task`` (one of :data:`lamina.tasks.TASKS`: ``ocr``, ``seg``, ``det``, ``cls``, ``embed``) adds
    the task's score, as ``model_deploy --task`` computes it (:func:`lamina.tasks.task_check`, at
    ``task_threshold``: the task's default when None), averaged over the samples: the search stops
    when both the cosine reaches ``expected_cos`` and the score ``expected_task``, and compares
    candidates by the smaller of the two margins. A large model's bisection then also tries the
    layers in network order (contiguous blocks from the input), keeps the order whose
    ``max_float_layers`` first layers score better, and skips the threshold refinement.

    ``evaluate(qtable, table) -> cosine`` (or ``(cosine, task score)`` with ``task``) replaces the
    real lowering (tests; every layer is then measured). ``capabilities``: the target's
    :class:`~lamina.dialects.tpu.capabilities.TargetCapabilities` (default: the reference ``tpu``
    target), whose float modes ``float_mode`` must be one of. ``mask_input``: the attention-mask
    input whose kept positions the outputs are compared over ("auto": detected,
    :func:`lamina.quant.masking.detect_mask`; None or "none": every position). Returns a :class:`SearchResult`;
    raises :class:`SearchError` when the search cannot run."""
    from lamina.dialects.tpu.capabilities import REFERENCE
    from lamina.dialects.tpu.tables import CalibrationTable, read_calibration_table, write_qtable

    say = log or (lambda s: None)
    modes = (capabilities or REFERENCE).float_modes
    if float_mode.upper() not in modes:
        raise SearchError(f"float_mode must be one of {', '.join(modes)}, got '{float_mode}'")
    float_mode = float_mode.upper()
    if not 0.0 < expected_cos <= 1.0:
        raise SearchError(f"expected_cos must be in (0, 1], got {expected_cos}")
    if max_evaluations is not None and max_evaluations < 1:
        raise SearchError(f"max_evaluations must be >= 1, got {max_evaluations}")
    from lamina.tasks import TASKS

    if task is not None:
        if task not in TASKS:
            raise SearchError(f"task must be one of {', '.join(TASKS)}, got '{task}'")
        if expected_task is None or not 0.0 < expected_task <= 1.0:
            raise SearchError(f"task {task} needs expected_task, a score in (0, 1], got {expected_task}")
    elif expected_task is not None or task_threshold is not None:
        raise SearchError("expected_task and task_threshold need a task")
    table: CalibrationTable = (
        read_calibration_table(calibration_table) if isinstance(calibration_table, str) else calibration_table
    )
    from lamina.quant.masking import MaskError, resolve_mask

    try:
        mask = resolve_mask(module, mask_input)
    except MaskError as e:
        raise SearchError(str(e)) from None
    real: TpuEvaluator | None = None
    if evaluate is None:
        if not samples:
            raise SearchError("the search needs at least one sample")
        real = TpuEvaluator(module, samples, asymmetric, ctx, mask, task, task_threshold)
        evaluate = real
    all_layers = layers(module)
    shape_ops, fragile = auto_float_ops(module, table)
    shape_set = set(shape_ops)
    types = {n: op.name for n, op in all_layers}
    candidates = [n for n, _ in all_layers if n not in shape_set]
    if not candidates:
        raise SearchError("the model has no layer to quantize")
    n_layers = len(candidates)
    # a large model: ranked by each tensor's own INT8 error, measured on fewer samples, bisection
    fast = real is not None and n_layers > exhaustive_layers
    n_all = len(real.samples) if real is not None else 1
    n_rank = max(1, min(rank_samples, n_all)) if fast and rank_samples > 0 else n_all
    subset = n_rank < n_all
    limit = max(1, math.floor(0.10 * n_layers)) if max_float_layers is None else int(max_float_layers)
    if limit < 0:
        raise SearchError(f"max_float_layers must be >= 0, got {limit}")
    budget = math.inf if max_evaluations is None else max_evaluations
    # A detection head's coordinate decoding (the elementwise tail from the box branch to the output
    # Concat) is floated up front: int8 coordinates step by range/127 (5 px at 640x640), which the
    # output cosine barely shows but box IoU does, and these ops cost nothing next to the
    # convolutions. (onnxruntime's quantize_static leaves them in float too.) The Concat itself
    # would keep the scores in INT8 (per-axis), but it joins float coordinates here.
    heads = [n for n, why in fragile.items() if why.startswith("detection-head")][:limit]
    base_q = dict.fromkeys(shape_ops, "F32")
    base_q.update(dict.fromkeys(heads, float_mode))
    count = [0]
    prog = _Progress(say, progress_interval)
    measured: dict[tuple[Any, ...], tuple[float, float | None]] = {}
    alive: list[Any] = []  # the tables measured with (keys hold their ids)
    last: list[tuple[float, float | None]] = [(0.0, None)]

    def margin(m: tuple[float, float | None]) -> float:
        """How far a measure is above the target (>= 0: reached): the smaller of the margins."""
        c, t = m
        v = c - expected_cos
        if task is not None:
            assert expected_task is not None
            v = min(v, (t if t is not None else 0.0) - expected_task)
        return v

    def show(m: tuple[float, float | None]) -> str:
        return f"cosine {m[0]:.6f}" + (
            f", task {task} {m[1]:.4f}" if task is not None and m[1] is not None else ""
        )

    def qtable_of(floated: Sequence[str]) -> dict[str, str]:
        q = dict(base_q)
        q.update(dict.fromkeys(floated, float_mode))
        return q

    def cos_of(floated: Sequence[str], tbl: Any = None, n: int | None = None, reserve: int = 0) -> float:
        """The margin over the target (:func:`margin`) with ``floated`` in float on the first ``n``
        samples (None: all), keeping ``reserve`` evaluations of the budget for the confirmation on
        all samples; the measure itself goes to ``last`` (a set measured before is not measured
        again)."""
        t = tbl if tbl is not None else table
        k = n_all if n is None else min(n, n_all)
        key = (frozenset(qtable_of(floated)), id(t), k)
        if key not in measured:
            alive.append(t)  # its id stays its own while the measure is kept
            if count[0] + 1 + reserve > budget:
                raise _OutOfBudget
            count[0] += 1
            if real is not None:
                c, sc = real.measure(qtable_of(floated), t, n)
            else:
                got = evaluate(qtable_of(floated), t)
                c, sc = got if isinstance(got, tuple) else (got, None)
            c = c if math.isfinite(c) else 0.0
            sc = sc if sc is None or math.isfinite(sc) else 0.0
            measured[key] = (float(c), None if sc is None else float(sc))
        last[0] = measured[key]
        return margin(measured[key])

    def on_rank(floated: Sequence[str], tbl: Any = None) -> float:
        return cos_of(floated, tbl, n_rank, reserve=1 if subset else 0)

    if mask is not None and real is not None:
        say(f"search_qtable: outputs compared over the kept positions: {mask.describe()}")
    say(f"search_qtable: {n_layers} layers, {len(shape_ops)} shape op(s) kept in F32, "
        f"{len(fragile)} fragile-pattern layer(s), at most {limit} in {float_mode}"
        f"{f', at most {max_evaluations} evaluations' if max_evaluations is not None else ''}")  # fmt: skip
    for n, why in fragile.items():
        say(f"  fragile: {n}: {why}")
    t_base = time.perf_counter()
    baseline = cos_of([])
    base_m = last[0]
    t_base = time.perf_counter() - t_base
    want = f"{expected_cos}" + (f", task {task} {expected_task}" if task is not None else "")
    say(
        f"search_qtable: all-INT8 {show(base_m)} (expected {want})"
        + (f" with the detection-head decoding ({', '.join(heads)}) in {float_mode}" if heads else "")
    )
    if real is not None and not fast and rank_samples > 0 and baseline < 0:
        # the measured ranking costs one evaluation per layer: too slow for a large input
        # (PP-OCRv4 at 384x768: 189 layers of ~4 s each on 4 samples), rank by errors instead
        n_fast = max(1, min(rank_samples, n_all))
        estimate = n_layers * t_base * n_fast / n_all
        if estimate > EXHAUSTIVE_SECONDS:
            fast, n_rank = True, n_fast
            subset = n_rank < n_all
            say(
                f"search_qtable: a one-layer-at-a-time ranking would take ~{estimate:.0f} s "
                f"(> {EXHAUSTIVE_SECONDS:.0f}); ranking by each tensor's own INT8 error"
            )
    ranking: list[LayerSensitivity] = []
    floated: list[str] = list(heads)
    final = baseline
    order: list[str] = []  # the layers in the order they are worth floating
    if baseline < 0 and limit > 0:
        current = baseline
        phase = "sensitivity"
        try:
            if fast:
                assert real is not None
                # Many layers: order them by their own quantization error (one float run per rank
                # sample), then bisect on how many of the first ones to float.
                phase = "quantization errors"
                n_err = min(n_rank, QERR_SAMPLES)
                prog.begin(f"quantization errors on {n_err} sample(s)", 1)
                qerr = real.quant_errors(table, n_err)
                prog.step(1)
                by_err = sorted(
                    (n for n in candidates if qerr.get(n, 0.0) > 0 and n not in floated),
                    key=lambda n: (-qerr[n], n not in fragile),
                )
                ranking = [LayerSensitivity(n, types[n], math.nan, qerr[n]) for n in by_err]
                # a tensor's error goes only when it stays float end to end: with its producer,
                # every layer reading it runs in float too (else it is cast to int8 for them)
                order = _with_readers(by_err, _readers(all_layers), set(candidates) - set(floated))
                room = limit - len(floated)
                blocks = False
                if task is not None and room > 0:
                    # a task score is lost along the whole network, not at a few tensors: the
                    # layers in network order (contiguous blocks from the input) are the other order
                    net = [n for n in candidates if n not in floated]
                    phase = "choosing the order"
                    by_err_m = on_rank([*floated, *order[:room]])
                    err_m = last[0]
                    by_net_m = on_rank([*floated, *net[:room]])
                    blocks = by_net_m > by_err_m
                    say(f"search_qtable: the first {room} layers floated by INT8 error: {show(err_m)}; "
                        f"in network order: {show(last[0])}; bisecting "
                        f"{'in network order' if blocks else 'by INT8 error'}")  # fmt: skip
                    if blocks:
                        order = net
                phase = "bisection"
                floated, current = _bisect(floated, order, room, 0.0, on_rank, prog, f"on {n_rank} sample(s)")
                if blocks and current >= 0:
                    # the block [0, k) reaches the target: the latest start j keeping [j, k) there
                    block = floated[len(heads) :]
                    phase = "the block's start"
                    floated, current = _bisect(
                        list(heads), block[::-1], len(block), 0.0, on_rank, prog, f"on {n_rank} sample(s)"
                    )
                    floated = [*heads, *(m for m in block if m in set(floated))]
                else:
                    phase = "pruning"
                    prunable = [m for m in reversed(floated) if m not in heads][:rank_top]
                    floated, current = _prune(
                        floated, prunable, 0.0, current, on_rank, prog, f"on {n_rank} sample(s)"
                    )
            else:
                current = on_rank([]) if subset else baseline
                prog.begin(f"sensitivity on {n_rank} sample(s)", len(candidates))
                for i, n in enumerate(candidates):
                    c = on_rank([n])
                    ranking.append(LayerSensitivity(n, types[n], last[0][0], c - current))
                    prog.step(i + 1)
                ranking.sort(key=lambda r: (-r.gain, r.name))
                gain = {r.name: r.gain for r in ranking}
                # most sensitive first; a fragile-pattern layer goes before an equally sensitive one
                order = [
                    r.name
                    for r in sorted(ranking, key=lambda r: (-r.gain, r.name not in fragile))
                    if r.gain > 0
                ]
                phase = "greedy"
                floated, current = _greedy(
                    floated, order, limit, 0.0, current, on_rank, prog, f"on {n_rank} sample(s)"
                )
                phase = "pruning"
                prunable = sorted((m for m in floated if m not in heads), key=lambda n: gain.get(n, 0.0))
                floated, current = _prune(
                    floated, prunable, 0.0, current, on_rank, prog, f"on {n_rank} sample(s)"
                )
        except _OutOfBudget:
            say(f"search_qtable: the evaluation budget ({max_evaluations}) is spent during {phase}; "
                "keeping the best found so far")  # fmt: skip
        if not subset:
            final = current
        elif floated != heads:
            final = cos_of(floated)  # the confirmation on all samples (kept in reserve)
        if subset and final < 0 <= current:
            # the rank samples were too optimistic: continue on all samples (the next layers in order)
            try:
                todo = [n for n in order if n not in floated][:rank_top]
                floated, final = _greedy(
                    floated, todo, limit, 0.0, final, cos_of, prog, f"on all {n_all} samples"
                )
            except _OutOfBudget:
                say(f"search_qtable: the evaluation budget ({max_evaluations}) is spent")
        if final < baseline:  # never worse than where the search started
            floated, final = list(heads), baseline
        if ranking and math.isnan(ranking[0].cos):
            say(
                "search_qtable: layers by their own INT8 error (1 - cos of the tensor fake-quantized; * = floated):"
            )
        else:
            say("search_qtable: sensitivity ranking (cosine with only that layer in float; * = floated):")
        res_tmp = SearchResult(
            {}, floated, shape_ops, fragile, ranking, base_m[0], final, expected_cos, n_layers, limit
        )
        say(res_tmp.ranking_text(top=min(len(ranking), max(20, len(floated)))))
    refined: dict[str, float] = {}
    # a large model with a task objective: refinement compares each candidate threshold's task
    # score on QERR_SAMPLES samples only (too few for a mask IoU), and on PP-OCRv4 it took 16
    # evaluations (~300 s, more than the rest of the search) to refine nothing: skipped
    refining = refine_top > 0 and not (task is not None and fast)
    if refining and ranking and count[0] + (2 if subset else 1) <= budget:
        names = [r.name for r in ranking if r.name not in floated][:refine_top]
        # with the error ranking (a large model), the candidate thresholds are compared on fewer samples
        n_ref = min(n_rank, QERR_SAMPLES) if math.isnan(ranking[0].cos) else n_rank

        def on_ref(tbl: Any) -> float:
            return cos_of(floated, tbl, n_ref, reserve=1 if n_ref < n_all else 0)

        before = on_ref(table) if n_ref < n_all else final
        try:
            prog.begin(f"refinement on {n_ref} sample(s)", len(names))
            new_table, got, refined = _refine(table, names, on_ref, before, say, prog.step)
        except _OutOfBudget:
            new_table, got, refined = table, before, {}
        if refined and n_ref < n_all:
            got = cos_of(floated, new_table)
            if got < final:  # better on the rank samples only: keep the calibrated thresholds
                say("search_qtable: the refined thresholds do not help on all samples; not kept")
                refined = {}
        if refined:
            table, final = new_table, got
    qtable = qtable_of(floated)
    final_m = measured.get((frozenset(qtable), id(table), n_all))
    if final_m is None:  # not measured on all samples yet (the budget is spent): measure it
        budget = math.inf
        cos_of(floated)
        final_m = last[0]
    result = SearchResult(
        qtable,
        floated,
        shape_ops,
        fragile,
        ranking,
        base_m[0],
        final_m[0],
        expected_cos,
        n_layers,
        limit,
        refined,
        count[0],
        mask.input if mask is not None and real is not None else None,
        float_mode,
        task,
        expected_task,
        base_m[1],
        final_m[1],
    )
    say(f"search_qtable: {result.summary()}")
    if quantize_table:
        write_qtable(quantize_table, qtable, comments=[f"search_qtable: {result.summary()}"])
        say(f"wrote {quantize_table}")
    if refined_table:
        table.write(refined_table)
        say(f"wrote {refined_table}")
    return result


def _greedy(
    floated: list[str],
    order: Sequence[str],
    limit: int,
    expected_cos: float,
    current: float,
    cos_of: Callable[[Sequence[str]], float],
    prog: _Progress,
    where: str,
) -> tuple[list[str], float]:
    """Float the layers of ``order`` one at a time, each kept only when the cosine improves, until
    ``expected_cos`` or ``limit`` float layers."""
    floated = list(floated)
    todo = [n for n in order if n not in floated]
    prog.begin(f"greedy {where}", len(todo))
    for i, n in enumerate(todo):
        if current >= expected_cos or len(floated) >= limit:
            break
        trial = cos_of([*floated, n])
        if trial > current:
            floated.append(n)
            current = trial
        prog.step(i + 1)
    return floated, current


def _prune(
    floated: list[str],
    prunable: Sequence[str],
    expected_cos: float,
    current: float,
    cos_of: Callable[[Sequence[str]], float],
    prog: _Progress,
    where: str,
) -> tuple[list[str], float]:
    """Put the layers of ``prunable`` back to INT8 one at a time, in order, each time the target
    still holds without it."""
    prog.begin(f"pruning {where}", len(prunable))
    for i, n in enumerate(prunable):
        if current < expected_cos:
            break
        rest = [m for m in floated if m != n]
        c = cos_of(rest)
        if c >= expected_cos:
            floated, current = rest, c
        prog.step(i + 1)
    return floated, current


def _readers(all_layers: Sequence[tuple[str, Any]]) -> dict[str, list[str]]:
    """Layer name -> the names of the layers reading its first result, in network order."""
    name_of = {id(op): n for n, op in all_layers}
    out: dict[str, list[str]] = {}
    for n, op in all_layers:
        users = [name_of.get(id(u.owner)) for u in op.results[0].uses]
        out[n] = list(dict.fromkeys(u for u in users if u is not None and u != n))
    return out


def _with_readers(order: Sequence[str], readers: Mapping[str, list[str]], allowed: set[str]) -> list[str]:
    """``order`` with each layer followed by the layers reading it (once each, only ``allowed``)."""
    out: dict[str, None] = {}
    for n in order:
        for m in (n, *readers.get(n, ())):
            if m in allowed:
                out.setdefault(m)
    return list(out)


def _bisect(
    floated: list[str],
    order: Sequence[str],
    room: int,
    expected_cos: float,
    cos_of: Callable[[Sequence[str]], float],
    prog: _Progress,
    where: str,
) -> tuple[list[str], float]:
    """The fewest first layers of ``order`` (at most ``room``) to float with ``floated`` so that the
    cosine reaches ``expected_cos``, by bisection (the cosine grows with the prefix, nearly); when
    even ``room`` layers fall short, those ``room`` layers."""
    order = [n for n in order if n not in floated][: max(0, room)]
    if not order:
        return list(floated), cos_of(floated)
    steps = max(1, math.ceil(math.log2(len(order) + 1))) + 1
    prog.begin(f"bisection {where}", steps)
    best_k, best_c = len(order), cos_of([*floated, *order])
    done = 1
    prog.step(done)
    if best_c < expected_cos:
        prog.step(steps)
        return [*floated, *order], best_c
    lo, hi = 0, len(order)  # cos(prefix lo) < expected <= cos(prefix hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        c = cos_of([*floated, *order[:mid]])
        done += 1
        prog.step(min(done, steps - 1))
        if c >= expected_cos:
            hi, best_k, best_c = mid, mid, c
        else:
            lo = mid
    prog.step(steps)
    return [*floated, *order[:best_k]], best_c


def _refine(
    table: Any,
    names: Sequence[str],
    cos_with: Callable[[Any], float],
    current: float,
    say: Callable[[str], None],
    step: Callable[[int], None] = lambda done: None,
) -> tuple[Any, float, dict[str, float]]:
    """Re-choose the thresholds of ``names`` one at a time by the final-output cosine."""
    refined: dict[str, float] = {}
    thresholds = dict(table.thresholds)
    for i, n in enumerate(names):
        step(i)
        s = thresholds.get(n)
        if s is None or s.threshold <= 0:
            continue
        absmax = max(abs(s.min), abs(s.max), s.threshold)
        best_t, best_c = s.threshold, current
        for t in sorted({s.threshold * f for f in (0.6, 0.75, 0.9)} | {absmax}):
            if t <= 0 or t == s.threshold:
                continue
            trial = replace(table, thresholds={**thresholds, n: replace(s, threshold=float(t))})
            c = cos_with(trial)
            if c > best_c + 1e-7:
                best_t, best_c = float(t), c
        if best_t != s.threshold:
            thresholds[n] = replace(s, threshold=best_t)
            refined[n] = best_t
            say(
                f"  refined threshold of {n}: {s.threshold:.6g} -> {best_t:.6g} "
                f"(margin over the target {current:+.6f} -> {best_c:+.6f})"
            )
            current = best_c
    step(len(names))
    return replace(table, thresholds=thresholds), current, refined

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
3. **Sensitivity ranking**: float one layer at a time from the baseline and measure the cosine gained
   (``gain = cos(layer in float) - cos(baseline)``). The ranking is printed, most sensitive first.
4. **Greedy selection**: layers in ranking order (a fragile-pattern layer before an equally sensitive
   one) are floated one at a time, each kept only when the re-measured whole model improves, until
   ``expected_cos`` is reached or ``max_float_layers`` are float (default: 10% of the layers, at
   least 1).
5. **Pruning**: each floated layer, least useful first, is put back to INT8 when the target still
   holds without it, so the qtable ends with the fewest layers found.
6. **Refinement** (``refine_top``, default 4): the thresholds of the most sensitive layers that stay
   INT8 are re-chosen among ``threshold * {0.6, 0.75, 0.9, 1.0}`` and ``max(|min|, |max|)`` by the
   final-output cosine; the refined table is written to ``refined_table`` when given.

The measure is the real thing: every candidate is lowered with ``convert-top-to-tpu`` (through
:func:`lamina.quant.deploy.deploy_module`) and run on the bit-exact ``tpu`` interpreter. Tests and
other searches may pass their own ``evaluate(qtable, table) -> cosine`` instead.
"""

from __future__ import annotations

import math
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

FLOAT_MODES = ("F32", "F16", "BF16")
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
_NON_LAYER = frozenset({"top.Input", "top.Weight", "top.None", "func.return", "func.func", "builtin.module"})


class SearchError(Exception):
    """The search cannot run (no samples, nothing to quantize, a lowering failure)."""


@dataclass
class LayerSensitivity:
    """One layer of the ranking: the final-output cosine with only this layer in float."""

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

    @property
    def reached(self) -> bool:
        return self.final_cos >= self.expected_cos

    def summary(self) -> str:
        pct = 100.0 * len(self.float_layers) / max(1, self.n_layers)
        return (
            f"INT8 baseline cos {self.baseline_cos:.6f} -> {self.final_cos:.6f} with {len(self.float_layers)} of "
            f"{self.n_layers} layers in float ({pct:.1f}%, limit {self.max_float_layers})"
            f"{'' if self.reached else f'; expected {self.expected_cos} NOT reached'}"
            f"{f', {len(self.refined)} threshold(s) refined' if self.refined else ''}; {self.evaluations} evaluations"
        )

    def ranking_text(self, top: int | None = None) -> str:
        rows = self.ranking if top is None else self.ranking[:top]
        w = min(60, max([len(r.name) for r in rows] + [5]))
        out = [f"{'rank':>4}  {'layer':<{w}}  {'type':<14} {'cos if float':>12} {'gain':>10}"]
        for i, r in enumerate(rows, 1):
            mark = " *" if r.name in self.float_layers else ""
            out.append(f"{i:>4}  {r.name:<{w}}  {r.op_type[4:]:<14} {r.cos:>12.6f} {r.gain:>10.6f}{mark}")
        return "\n".join(out)


# ---- the graph -------------------------------------------------------------------------------------------


def _names(op: Any) -> list[str]:
    from lamina.execution.interpreter import result_names

    return result_names(op)


def _is_integer(t: Any) -> bool:
    from lamina.ir.types import IntegerType, ShapedType

    elem = t.element_type if isinstance(t, ShapedType) else t
    return isinstance(elem, IntegerType) or type(elem).__name__ == "IndexType"


def layers(module: Any) -> list[tuple[str, Any]]:
    """``(name, op)`` of every op a qtable may name (first result's name), in network order."""
    out: list[tuple[str, Any]] = []
    for op in module.walk_ops():
        if op.name in _NON_LAYER or not op.results or not op.name.startswith("top."):
            continue
        out.append((_names(op)[0], op))
    return out


def auto_float_ops(module: Any, table: Any = None) -> tuple[list[str], dict[str, str]]:
    """(shape ops, fragile layers with the reason) of a ``top`` module; ``table`` (a
    :class:`~lamina.quant.table.CalibrationTable`) enables the detection-head rule."""
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
    ref: Sequence[Mapping[str, np.ndarray]], got: Sequence[Mapping[str, np.ndarray]], names: Sequence[str]
) -> float:
    """The worst output's cosine (float64, flattened) per sample, averaged over the samples."""
    vals = [min(_cos(r[n], g[n]) for n in names) for r, g in zip(ref, got)]
    return float(np.mean(vals)) if vals else 0.0


def _tpu_evaluator(
    module: Any, samples: Sequence[Mapping[str, np.ndarray]], asymmetric: bool, ctx: Any
) -> Callable[[dict[str, str], Any], float]:
    from lamina.frontends.model_io import module_signature, run_top_module
    from lamina.quant.deploy import deploy_module, run_tpu_module

    outs = module_signature(module).output_names
    ref = [run_top_module(module, dict(s)) for s in samples]

    def evaluate(qtable: dict[str, str], table: Any) -> float:
        tpu = deploy_module(
            module, "INT8", asymmetric=asymmetric, calibration_table=table, qtable=qtable or None, ctx=ctx
        )
        got = [run_tpu_module(tpu, dict(s)) for s in samples]
        return output_cosine(ref, got, outs)

    return evaluate


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
    evaluate: Callable[[dict[str, str], Any], float] | None = None,
) -> SearchResult:
    """Find the fewest layers to run in ``float_mode`` so that INT8 reaches ``expected_cos``.

    ``module``: the ``top`` module (not modified); ``calibration_table``: a path or a
    :class:`~lamina.quant.table.CalibrationTable`; ``samples``: inputs by name (a few are enough;
    every evaluation runs all of them); ``max_float_layers``: the most layers in float (default 10% of
    the layers, at least 1; shape ops are not counted); ``asymmetric``: INT8 asymmetric activations;
    ``quantize_table`` / ``refined_table``: where to write the qtable and the refined calibration
    table (atomically; nothing is written when None); ``log``: where the ranking and progress go
    (None: silent); ``evaluate(qtable, table) -> cosine`` replaces the real lowering (tests).
    Returns a :class:`SearchResult`; raises :class:`SearchError` when the search cannot run."""
    from lamina.quant.table import CalibrationTable, read_calibration_table, write_qtable

    say = log or (lambda s: None)
    if float_mode.upper() not in FLOAT_MODES:
        raise SearchError(f"float_mode must be one of {', '.join(FLOAT_MODES)}, got '{float_mode}'")
    float_mode = float_mode.upper()
    if not 0.0 < expected_cos <= 1.0:
        raise SearchError(f"expected_cos must be in (0, 1], got {expected_cos}")
    table: CalibrationTable = (
        read_calibration_table(calibration_table) if isinstance(calibration_table, str) else calibration_table
    )
    if evaluate is None:
        if not samples:
            raise SearchError("the search needs at least one sample")
        evaluate = _tpu_evaluator(module, samples, asymmetric, ctx)
    all_layers = layers(module)
    shape_ops, fragile = auto_float_ops(module, table)
    shape_set = set(shape_ops)
    types = {n: op.name for n, op in all_layers}
    candidates = [n for n, _ in all_layers if n not in shape_set]
    if not candidates:
        raise SearchError("the model has no layer to quantize")
    n_layers = len(candidates)
    limit = max(1, math.floor(0.10 * n_layers)) if max_float_layers is None else int(max_float_layers)
    if limit < 0:
        raise SearchError(f"max_float_layers must be >= 0, got {limit}")
    # A detection head's coordinate decoding (the elementwise tail from the box branch to the output
    # Concat) is floated up front: int8 coordinates step by range/127 (5 px at 640x640), which the
    # output cosine barely shows but box IoU does, and these ops cost nothing next to the
    # convolutions. (onnxruntime's quantize_static leaves them in float too.) The Concat itself
    # would keep the scores in INT8 (per-axis), but it joins float coordinates here.
    heads = [n for n, why in fragile.items() if why.startswith("detection-head")][:limit]
    base_q = dict.fromkeys(shape_ops, "F32")
    base_q.update(dict.fromkeys(heads, float_mode))
    count = [0]

    def cos_of(floated: Sequence[str], tbl: Any = None) -> float:
        count[0] += 1
        q = dict(base_q)
        q.update(dict.fromkeys(floated, float_mode))
        c = evaluate(q, tbl if tbl is not None else table)
        return c if math.isfinite(c) else 0.0

    say(f"search_qtable: {n_layers} layers, {len(shape_ops)} shape op(s) kept in F32, "
        f"{len(fragile)} fragile-pattern layer(s), at most {limit} in {float_mode}")  # fmt: skip
    for n, why in fragile.items():
        say(f"  fragile: {n}: {why}")
    baseline = cos_of([])
    say(
        f"search_qtable: all-INT8 cosine {baseline:.6f} (expected {expected_cos})"
        + (f" with the detection-head decoding ({', '.join(heads)}) in {float_mode}" if heads else "")
    )
    ranking: list[LayerSensitivity] = []
    floated: list[str] = list(heads)
    final = baseline
    if baseline < expected_cos and limit > 0:
        for i, n in enumerate(candidates):
            c = cos_of([n])
            ranking.append(LayerSensitivity(n, types[n], c, c - baseline))
            if (i + 1) % 20 == 0:
                say(f"  sensitivity: {i + 1}/{n_layers} layers")
        ranking.sort(key=lambda r: (-r.gain, r.name))
        gain = {r.name: r.gain for r in ranking}
        # most sensitive first; a fragile-pattern layer goes before an equally sensitive one
        order = [
            r.name for r in sorted(ranking, key=lambda r: (-r.gain, r.name not in fragile)) if r.gain > 0
        ]
        for n in order:
            if final >= expected_cos or len(floated) >= limit:
                break
            if n in floated:
                continue
            trial = cos_of([*floated, n])
            if trial > final:
                floated.append(n)
                final = trial
        for n in sorted((m for m in floated if m not in heads), key=lambda n: gain.get(n, 0.0)):  # prune
            if final < expected_cos:
                break
            rest = [m for m in floated if m != n]
            c = cos_of(rest)
            if c >= expected_cos:
                floated, final = rest, c
        say("search_qtable: sensitivity ranking (cosine with only that layer in float; * = floated):")
        res_tmp = SearchResult(
            {}, floated, shape_ops, fragile, ranking, baseline, final, expected_cos, n_layers, limit
        )
        say(res_tmp.ranking_text(top=min(len(ranking), max(20, len(floated)))))
    refined: dict[str, float] = {}
    if refine_top > 0 and ranking:
        table, final, refined = _refine(table, [r.name for r in ranking if r.name not in floated][:refine_top],
                                        lambda t: cos_of(floated, t), final, say)  # fmt: skip
    qtable = dict(base_q)
    qtable.update(dict.fromkeys(floated, float_mode))
    result = SearchResult(
        qtable,
        floated,
        shape_ops,
        fragile,
        ranking,
        baseline,
        final,
        expected_cos,
        n_layers,
        limit,
        refined,
        count[0],
    )
    say(f"search_qtable: {result.summary()}")
    if quantize_table:
        write_qtable(quantize_table, qtable, comments=[f"search_qtable: {result.summary()}"])
        say(f"wrote {quantize_table}")
    if refined_table:
        table.write(refined_table)
        say(f"wrote {refined_table}")
    return result


def _refine(
    table: Any,
    names: Sequence[str],
    cos_with: Callable[[Any], float],
    current: float,
    say: Callable[[str], None],
) -> tuple[Any, float, dict[str, float]]:
    """Re-choose the thresholds of ``names`` one at a time by the final-output cosine."""
    refined: dict[str, float] = {}
    thresholds = dict(table.thresholds)
    for n in names:
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
                f"  refined threshold of {n}: {s.threshold:.6g} -> {best_t:.6g} (cos {current:.6f} -> {best_c:.6f})"
            )
            current = best_c
    return replace(table, thresholds=thresholds), current, refined

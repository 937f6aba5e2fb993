"""Thresholds chosen for what a tensor's consumer reads (dense-prediction heads).

A threshold method looks at one tensor's values; a few tensors are read in a way that makes their
distribution the wrong guide. Two rules, applied to the calibration table after the method (and
tuning), each listed in the table's comments:

* **Probability outputs keep their whole range.** A model output produced by a bounded activation
  (``Sigmoid``, ``HardSigmoid``: values in ``[0, 1]``) takes its observed maximum as threshold. Its
  user thresholds the map anywhere in the range (a DB text detector at 0.3, a segmenter at 0.5),
  while most pixels are background near 0: KL clips such a map at 0.06 (PP-OCRv4's, without tuning),
  which leaves no text pixel at all.
* **A Sigmoid's input is read only where the Sigmoid does not saturate.** The Sigmoid's INT8 result
  is ``u8`` with scale ``q = th_out / 255``: every input above ``logit(th_out - q/2)`` gives code 255
  and every input below ``logit(q/2)`` gives 0, so the input's threshold is capped at the larger of
  their magnitudes (``ln(509) = 6.23`` for ``th_out = 1``) when the Sigmoid is the input's only
  user: the int8 steps then fall where the probabilities change (PP-OCRv4's logits span +-171, a
  step of 1.18 in logit units where ``logit(0.3) = -0.85``; capped, a step of 0.049). The cap goes
  back through a chain of single-use ``Add`` of a scalar constant (a bias added apart), widened by
  the constant's magnitude. The table's min and max are clamped to the cap as well (the asymmetric
  mode reads them).
"""

from __future__ import annotations

import math
from typing import Any

from lamina.dialects.tpu.tables import CalibrationTable, TensorStats

__all__ = ["BOUNDED_OUTPUT_OPS", "apply_consumer_rules", "read_through_sigmoid", "sigmoid_input_cap"]

#: activations whose results lie in [0, 1]
BOUNDED_OUTPUT_OPS = frozenset({"top.Sigmoid", "top.HardSigmoid"})


def sigmoid_input_cap(th_out: float) -> float:
    """The input magnitude beyond which a Sigmoid whose result is ``u8`` with scale ``th_out / 255``
    saturates to code 0 or 255 (see the module doc)."""
    th_out = min(max(th_out, 1e-6), 1.0)
    q = th_out / 255.0
    hi = th_out - q / 2.0

    def logit(p: float) -> float:
        return math.log(p / (1.0 - p)) if 0.0 < p < 1.0 else math.inf

    return max(abs(logit(q / 2.0)), abs(logit(hi)))


def _scalar(v: Any) -> float | None:
    from lamina.dialects.top.transforms.utils import scalar_of

    return scalar_of(v)


def _name_of(v: Any) -> str | None:
    from lamina.ir.naming import result_names

    op = v.defining_op()
    if op is None:
        return None
    names = result_names(op)
    idx = getattr(v, "index", 0)
    return names[idx] if idx < len(names) else None


def _sigmoid_chains(module: Any) -> list[tuple[Any, list[tuple[Any, float]]]]:
    """Each Sigmoid with the chain read only through it: ``(value, offset)`` pairs from its input
    back through single-use ``Add`` of a scalar, ``offset`` the sum of the constants added after."""
    out = []
    for op in module.walk_ops():
        if op.name != "top.Sigmoid" or not op.results or not op.operands:
            continue
        chain: list[tuple[Any, float]] = []
        v, off = op.operands[0], 0.0
        while v is not None and len(v.uses) == 1 and v.defining_op() is not None:
            chain.append((v, off))
            d = v.defining_op()
            nxt = None
            if d.name == "top.Add" and len(d.operands) == 2:
                for a, c in ((d.operands[0], d.operands[1]), (d.operands[1], d.operands[0])):
                    k = _scalar(c)
                    if k is not None and a.defining_op() is not None and _scalar(a) is None:
                        nxt, off = a, off + k
                        break
            v = nxt
        out.append((op, chain))
    return out


def read_through_sigmoid(module: Any) -> dict[str, float]:
    """Tensor name -> the constant added before the Sigmoid that alone reads it (what its consumer
    sees is ``sigmoid(x + offset)``): the search ranks such a tensor's INT8 error there."""
    out: dict[str, float] = {}
    for _, chain in _sigmoid_chains(module):
        for v, off in chain:
            name = _name_of(v)
            if name is not None:
                out[name] = off
    return out


def apply_consumer_rules(module: Any, table: CalibrationTable) -> list[str]:
    """Apply the rules of the module doc to ``table`` in place; one line per changed tensor."""
    from lamina.execution.interpreter import find_main

    notes: list[str] = []
    func = find_main(module)
    ret = func.regions[0].blocks[0].last_op
    outputs = {id(v) for v in ret.operands} if ret is not None else set()
    chains = dict((id(op), chain) for op, chain in _sigmoid_chains(module))
    for op in module.walk_ops():
        if op.name not in BOUNDED_OUTPUT_OPS or not op.results:
            continue
        out = op.results[0]
        out_name = _name_of(out)
        st = table.thresholds.get(out_name) if out_name else None
        if st is None or out_name is None:
            continue
        if id(out) in outputs:
            amax = max(abs(st.min), abs(st.max))
            if amax > st.threshold:
                notes.append(
                    f"{out_name}: a probability output keeps its range, {st.threshold:.6g} -> {amax:.6g}"
                )
                st = TensorStats(amax, st.min, st.max)
                table.thresholds[out_name] = st
        cap0 = sigmoid_input_cap(st.threshold)
        for v, off in chains.get(id(op), []):
            name = _name_of(v)
            ist = table.thresholds.get(name) if name else None
            if ist is None or name is None:
                break
            cap = cap0 + abs(off)
            if ist.threshold > cap:
                notes.append(
                    f"{name}: read through a Sigmoid saturating beyond {cap:.4g}, {ist.threshold:.6g} -> {cap:.6g}"
                )
                table.thresholds[name] = TensorStats(cap, max(ist.min, -cap), min(ist.max, cap))
    return notes

"""Attention-mask inputs: which input masks the sequence, and which axis of every tensor it masks.

A static-shape deployment pads every sentence to a fixed length (``[batch, seq]`` token ids and an
``attention_mask`` of 1 for real tokens, 0 for padding). The padded positions carry large,
meaningless activations; statistics and cosines over them say nothing about what a user reads.
:func:`detect_mask` finds the mask input by graph analysis and labels the axes; calibration
(:mod:`lamina.quant.calibration`), the mixed-precision search (:mod:`lamina.quant.search`) and
``npz_tool compare --mask`` then count only the *kept* positions.

**Which input is the mask.** An input of rank 2 ``[B, S]`` (integer, bool or float) is followed
forward through the ops computed from it alone (with constants: ``Cast``, ``Sub``, ``Mul``,
``Unsqueeze``, ``Reshape``, ``Expand``, ``Where``, ``Compare`` ...: its *mask-derived* values) to
where one of them meets the model's activations:

* the ``attn_mask`` operand of a fused ``top.Attention``;
* an ``Add``/``Sub`` with the attention scores, whose result reaches a ``Softmax`` over an axis of
  length ``S`` (through shape-only and elementwise ops);
* the condition of a ``Where`` selecting scores that reach such a ``Softmax``.

The polarity is read from the graph, not assumed: the mask-derived subgraph alone is evaluated with
each op's own ``execute`` on a probe mask (the first half of the positions 1, the rest 0), and the
value reaching the application says which positions attend (additive mask: 0 attends, a large
negative value does not; ``Where``: the condition selects the scores; boolean ``attn_mask``: true
attends). The mask input is accepted only when the probe's attending positions are exactly its
nonzero positions (``keep = mask != 0``, BERT's convention) or exactly its zero ones (``keep = mask
== 0``: an additive float mask, or PyTorch's ``key_padding_mask``).

**Which axis is masked.** Axis labels are propagated forward with the shapes: every input whose
shape starts with ``[B, S]`` (the mask, the token ids, embeddings) has axis 0 labelled *batch* and
axis 1 *sequence*; elementwise ops (right-aligned broadcasting) and same-shape ops (``LayerNorm``,
``Softmax``, activations) keep a label where the operand's dim equals the result's; ``Reshape`` /
``Squeeze`` / ``Unsqueeze`` / ``Flatten`` move it to the result axis with the same dim and the same
product of the dims before it (a split ``[B, S, H] -> [B, S, heads, dh]`` keeps ``S`` at axis 1);
``Permute`` permutes the labels; ``MatMul`` takes the row axis from its left operand and the column
axis from its right one (``q @ k^T`` gives scores ``[B, heads, S, S]`` with both axes labelled:
query rows and keys); ``Gather`` takes the labels of its indices (an embedding lookup
``[B, S] -> [B, S, H]``); a fused ``Attention`` takes its query's. Any other op, or one that merges
the sequence axis with another or reduces over it (mean pooling ``[B, S, H] -> [B, H]``), drops the
label: that tensor has no masked axis and its statistics use all its elements.

The kept elements of a tensor are those whose index along *every* sequence axis is a kept position
(scores: query and key both real). Two exceptions: the mask-derived values themselves (their large
negative entries at padded keys are what masks; they must keep their range), and the result of the
op that applies the mask to the scores, where the key axis stays whole (the padded keys' large
negative scores must survive quantization so that the softmax still ignores them); its query axis
is still restricted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "MaskError",
    "MaskInfo",
    "MaskSpec",
    "detect_mask",
    "keep_positions",
    "kept_elements",
    "kept_flat",
    "resolve_mask",
    "shape_spec",
]

#: a value of an additive mask at most this far below 0 (relative to its largest magnitude) attends
_ADDITIVE_TOL = 1e-3
#: ops followed from a mask application to find the Softmax it feeds
_SOFTMAX_HOPS = 4


class MaskError(Exception):
    """A ``mask_input`` that names no input, or an input that is not an attention mask."""


@dataclass(frozen=True)
class MaskSpec:
    """Which axes of one tensor the mask applies to: ``seq_axes`` (each indexed by position, of
    length ``S``) and ``batch_axis`` (indexed by sample row; None when unknown or merged)."""

    seq_axes: tuple[int, ...]
    batch_axis: int | None = 0


@dataclass
class MaskInfo:
    """The attention-mask input of a model and the masked axes of its tensors (by location name)."""

    input: str
    shape: tuple[int, ...]
    #: True: a position is kept where the mask is nonzero; False: where it is zero
    keep_nonzero: bool
    #: how the input reaches the attention scores (for messages)
    reason: str
    axes: dict[str, MaskSpec] = field(default_factory=dict)
    #: tensors computed from the mask alone (never restricted)
    derived: set[str] = field(default_factory=set)

    @property
    def seq_len(self) -> int:
        return int(self.shape[-1])

    def keep(self, mask: np.ndarray) -> np.ndarray:
        """The kept positions ``[B, S]`` (bool) of one sample's mask."""
        m = np.asarray(mask)
        if m.ndim == 1:
            m = m[None]
        m = m.reshape(m.shape[0], -1) if m.ndim > 2 else m
        return (m != 0) if self.keep_nonzero else (m == 0)

    def describe(self) -> str:
        pol = "nonzero" if self.keep_nonzero else "zero"
        return (
            f"mask input '{self.input}' {list(self.shape)} ({self.reason}); positions where it is {pol} "
            f"are kept; {len(self.axes)} tensor(s) have a masked sequence axis"
        )


# ---- kept elements --------------------------------------------------------------------------------


def keep_positions(info: MaskInfo | None, inputs: Mapping[str, Any]) -> np.ndarray | None:
    """The kept positions ``[B, S]`` of one sample (None: no mask, or every position kept)."""
    if info is None or info.input not in inputs:
        return None
    k = info.keep(np.asarray(inputs[info.input]))
    if k.all() or not k.any():  # nothing padded; or an empty mask: count every position
        return None
    return k


def kept_elements(x: np.ndarray, spec: MaskSpec | None, keep: np.ndarray | None) -> list[np.ndarray]:
    """The parts of ``x`` at kept positions along its masked axes, each of ``x``'s rank (one part,
    or one per batch row when the rows' masks differ). ``[x]`` when there is nothing to restrict."""
    if spec is None or keep is None or not spec.seq_axes:
        return [x]
    seq = keep.shape[1]
    axes = [a for a in spec.seq_axes if 0 <= a < x.ndim and x.shape[a] == seq]
    if not axes:
        return [x]
    rows = keep
    b = spec.batch_axis
    same = rows.shape[0] == 1 or bool((rows == rows[:1]).all())
    if same or b is None or not (0 <= b < x.ndim) or x.shape[b] != rows.shape[0]:
        # one mask for the whole tensor (batch 1, equal rows, or no batch axis: their union)
        idx = np.flatnonzero(rows[0] if same else rows.any(axis=0))
        for a in axes:
            x = np.take(x, idx, axis=a)
        return [x]
    parts = []
    for r in range(rows.shape[0]):
        idx = np.flatnonzero(rows[r])
        p = np.take(x, [r], axis=b)
        for a in axes:
            p = np.take(p, idx, axis=a)
        parts.append(p)
    return parts


def kept_flat(x: np.ndarray, spec: MaskSpec | None, keep: np.ndarray | None) -> np.ndarray:
    """:func:`kept_elements` flattened into one vector."""
    parts = kept_elements(x, spec, keep)
    if len(parts) == 1:
        return parts[0].reshape(-1)
    return np.concatenate([p.reshape(-1) for p in parts])


def shape_spec(shape: Sequence[int], keep: np.ndarray) -> MaskSpec | None:
    """The masked axes of a tensor known only by its shape (no graph: ``npz_tool compare --mask``):
    with a leading batch axis of the mask's batch size (or 1), every later axis of the mask's
    sequence length. None when it has none (a pooled ``[B, H]``)."""
    nb, seq = keep.shape
    if len(shape) < 2 or shape[0] not in (nb, 1):
        return None
    axes = tuple(i for i in range(1, len(shape)) if shape[i] == seq)
    return MaskSpec(axes, 0) if axes else None


# ---- detection --------------------------------------------------------------------------------------


def _shape(v: Any) -> tuple[int, ...] | None:
    from lamina.ir.types import RankedTensorType

    t = v.type
    if isinstance(t, RankedTensorType) and t.has_static_shape:
        return tuple(int(d) for d in t.shape)
    return None


def _is_const(v: Any) -> bool:
    from lamina.ir.traits import NotALayer

    op = v.defining_op() if hasattr(v, "defining_op") else None
    return op is not None and NotALayer in op.traits and not op.operands


def _entry(module: Any) -> Any:
    from lamina.execution.interpreter import find_main

    return find_main(module).regions[0].blocks[0]


def _inputs(module: Any) -> list[tuple[str, Any]]:
    """(name, top.Input result) of each model input."""
    from lamina.frontends.model_io import input_ops, module_signature

    sig = module_signature(module)
    out = []
    for name, op in zip(sig.input_names, input_ops(module)):
        if op is not None and op.results:
            out.append((name, op.results[0]))
    return out


def _ops(module: Any) -> list[Any]:
    return [op for op in _entry(module).ops]


def _mask_arithmetic(op: Any) -> bool:
    """Whether ``op`` may be part of a mask's own arithmetic: elementwise ops (``Elementwise``:
    Cast, Sub, Mul, Not, Compare ...), ``Where``, reductions and data movement (Reshape, Unsqueeze,
    Expand, Permute, Tile, Slice, Concat). Not a lookup or a contraction (``Gather`` on a table,
    ``MatMul``): what token ids compute through those is the network, not a mask."""
    from lamina.dialects.top.elementwise import WhereOp
    from lamina.dialects.top.reduce import ReduceOp
    from lamina.dialects.top.tensor import (
        ConcatOp,
        ExpandOp,
        FlattenOp,
        PermuteOp,
        ReshapeOp,
        SliceOp,
        SqueezeOp,
        TileOp,
        UnsqueezeOp,
    )
    from lamina.ir.traits import Elementwise

    movement = (WhereOp, ReduceOp, ConcatOp, ExpandOp, FlattenOp, PermuteOp, ReshapeOp, SliceOp, SqueezeOp)
    return op.has_trait(Elementwise) or isinstance(op, (*movement, TileOp, UnsqueezeOp))


def _derived_values(ops: Sequence[Any], seed: Any) -> tuple[set[int], list[Any]]:
    """ids of the values computed from ``seed`` and constants alone by mask arithmetic
    (:func:`_mask_arithmetic`), and the ops computing them."""
    derived = {id(seed)}
    chain: list[Any] = []
    for op in ops:
        if not op.results or not op.operands:
            continue
        ins = list(op.operands)
        if not any(id(v) in derived for v in ins):
            continue
        if all(id(v) in derived or _is_const(v) or _is_none(v) for v in ins) and op.dialect_name == "top":
            if op.name == "top.Input" or not _mask_arithmetic(op):
                continue
            derived.update(id(r) for r in op.results)
            chain.append(op)
    return derived, chain


def _is_none(v: Any) -> bool:
    op = v.defining_op() if hasattr(v, "defining_op") else None
    return op is not None and op.name == "top.None"


def _reaches_softmax(v: Any, seq: int) -> bool:
    """Whether ``v`` reaches, within a few ops, a Softmax over an axis of length ``seq``."""
    from lamina.dialects.top.nn import SoftmaxOp

    frontier, seen = [v], set()
    for _ in range(_SOFTMAX_HOPS):
        nxt = []
        for x in frontier:
            for u in x.users:
                if id(u) in seen:
                    continue
                seen.add(id(u))
                if isinstance(u, SoftmaxOp):
                    s = _shape(x)
                    ax = int(u.axis)
                    if s is not None and s and s[ax % len(s)] == seq:
                        return True
                    continue
                nxt.extend(u.results)
        frontier = nxt
    return False


def _applications(ops: Sequence[Any], derived: set[int], seq: int) -> list[tuple[Any, Any, str]]:
    """(op, its mask-derived operand, kind) where a mask-derived value meets the attention scores."""
    from lamina.dialects.top.elementwise import AddOp, SubOp, WhereOp
    from lamina.dialects.top.extra import AttentionOp

    out: list[tuple[Any, Any, str]] = []
    for op in ops:
        if not op.results or all(id(r) in derived for r in op.results):
            continue
        ins = list(op.operands)
        dv = [v for v in ins if id(v) in derived]
        if not dv:
            continue
        if isinstance(op, AttentionOp):
            m = op.attn_mask
            if m is not None and id(m) in derived:
                out.append((op, m, "attention"))
            continue
        act = [v for v in ins if id(v) not in derived and not _is_const(v) and not _is_none(v)]
        if not act:
            continue
        if isinstance(op, (AddOp, SubOp)) and _reaches_softmax(op.results[0], seq):
            out.append((op, dv[0], "additive"))
        elif isinstance(op, WhereOp) and id(ins[0]) in derived and _reaches_softmax(op.results[0], seq):
            out.append((op, ins[0], "where"))
    return out


def _probe_values(chain: Sequence[Any], seed: Any, probe: np.ndarray) -> dict[int, np.ndarray]:
    """The mask-derived values for the mask ``probe``, each op run by its own ``execute``."""
    from lamina.ir.constants import constant_array

    env: dict[int, np.ndarray] = {id(seed): probe}
    for op in chain:
        args: list[Any] = []
        for v in op.operands:
            if id(v) in env:
                args.append(env[id(v)])
            elif _is_none(v):
                args.append(None)
            else:
                a = constant_array(v)
                if a is None:
                    raise ValueError("a constant without data")
                args.append(a)
        res = op.execute(args)
        for r, a in zip(op.results, res):
            env[id(r)] = np.asarray(a)
    return env


def _attending(
    kind: str, op: Any, operand: Any, val: np.ndarray, seq: int, derived: set[int]
) -> np.ndarray | None:
    """Which of the ``S`` key positions attend, from the value ``val`` of the mask-derived
    ``operand`` of ``op``."""
    v = np.asarray(val)
    if v.ndim == 0 or v.shape[-1] != seq:
        return None
    v = v.reshape(-1, seq)
    if kind == "where":
        # Where(cond, a, b): a position attends when the condition selects the scores
        scores_first = id(op.operands[1]) not in derived and not _is_const(op.operands[1])
        c = v.astype(bool)
        return c[0] if scores_first else ~c[0]
    if v.dtype == np.bool_:  # a boolean attn_mask: true attends
        return v[0]
    f = v.astype(np.float64)[0]
    big = float(np.max(np.abs(f))) if f.size else 0.0
    if big == 0:
        return np.ones(seq, bool)
    # Sub(scores, m) subtracts the mask: large positive values mask there
    sign = -1.0 if kind == "additive" and op.name == "top.Sub" and op.operands[1] is operand else 1.0
    return sign * f >= -_ADDITIVE_TOL * big


def _check_input(module: Any, name: str, value: Any, ops: Sequence[Any]) -> tuple[MaskInfo | None, str]:
    """A :class:`MaskInfo` (axes not yet labelled) when ``value`` is an attention mask, else the reason."""
    shape = _shape(value)
    if shape is None or len(shape) != 2 or shape[1] < 2:
        return None, f"its shape {list(shape) if shape else '?'} is not [batch, seq]"
    seq = shape[1]
    derived, chain = _derived_values(ops, value)
    apps = _applications(ops, derived, seq)
    if not apps:
        return (
            None,
            "it does not reach attention scores (an Attention mask, an Add or Where before a Softmax)",
        )
    probe = np.zeros(shape, np.float64)
    probe[:, : seq // 2] = 1
    dtype = np.dtype(_dtype(value))
    try:
        env = _probe_values(chain, value, probe.astype(dtype))
    except Exception as e:  # an op that cannot run on the probe: the polarity is unknown
        return None, f"its effect on the scores cannot be evaluated ({type(e).__name__}: {e})"
    keep_nz = probe[0] != 0
    polarity: bool | None = None
    for op, v, kind in apps:
        val = env.get(id(v))
        if val is None:
            continue
        att = _attending(kind, op, v, val, seq, derived)
        if att is None:
            continue
        pol = True if np.array_equal(att, keep_nz) else False if np.array_equal(att, ~keep_nz) else None
        if pol is None or (polarity is not None and pol != polarity):
            return None, "its values do not select whole key positions of the scores"
        polarity = pol
    if polarity is None:
        return None, "its values do not select whole key positions of the scores"
    kinds = sorted({k for _, _, k in apps})
    where = {"attention": "Attention attn_mask", "additive": "Add on the scores before a Softmax",
             "where": "Where selecting the scores"}  # fmt: skip
    reason = f"reaches {len(apps)} attention op(s): " + ", ".join(where[k] for k in kinds)
    info = MaskInfo(name, shape, polarity, reason)
    return info, ""


def _dtype(v: Any) -> Any:
    from lamina.ir.attributes import element_type_to_dtype

    try:
        return element_type_to_dtype(v.type.element_type)
    except Exception:
        return np.float32


def detect_mask(module: Any) -> MaskInfo | None:
    """The attention-mask input of a ``top`` module with its masked axes, or None (see the module doc)."""
    ops = _ops(module)
    for name, v in _inputs(module):
        info, _ = _check_input(module, name, v, ops)
        if info is not None:
            label_axes(module, info, ops)
            return info
    return None


def resolve_mask(module: Any, mask_input: str | None) -> MaskInfo | None:
    """``mask_input``: None or "auto" detects; "none" disables; an input name must be an attention
    mask (:class:`MaskError` naming the inputs otherwise)."""
    if mask_input is None or mask_input == "auto":
        return detect_mask(module)
    if mask_input.lower() == "none":
        return None
    ins = _inputs(module)
    names = [n for n, _ in ins]
    if mask_input not in names:
        raise MaskError(
            f"--mask_input '{mask_input}' is not an input of the model (inputs: {', '.join(names)})"
        )
    ops = _ops(module)
    v = dict(ins)[mask_input]
    info, why = _check_input(module, mask_input, v, ops)
    if info is None:
        raise MaskError(
            f"--mask_input '{mask_input}' is not an attention mask: {why} (inputs: {', '.join(names)}; "
            "--mask_input none disables masking)"
        )
    label_axes(module, info, ops)
    return info


# ---- axis labels ------------------------------------------------------------------------------------

Labels = dict[int, str]  # axis -> "seq" (sequence) or "B" (batch)


def _reshape_labels(src: tuple[int, ...], dst: tuple[int, ...], lab: Labels) -> Labels:
    """Move labels through a reshape: to the result axis of the same dim after the same product."""
    out: Labels = {}
    pre_dst = [int(np.prod(dst[:m], dtype=np.int64)) for m in range(len(dst))]
    for k, kind in lab.items():
        p = int(np.prod(src[:k], dtype=np.int64))
        for m in range(len(dst)):
            if pre_dst[m] == p and dst[m] == src[k] and m not in out:
                out[m] = kind
                break
    return out


def _broadcast_labels(operands: Sequence[tuple[tuple[int, ...], Labels]], out: tuple[int, ...]) -> Labels:
    res: Labels = {}
    nr = len(out)
    for shp, lab in operands:
        r = len(shp)
        if r > nr:
            continue
        for k, kind in lab.items():
            m = k + nr - r
            if 0 <= m < nr and out[m] == shp[k]:
                res.setdefault(m, kind)
    return res


def _spec_of(v: Any, labels: Mapping[int, Labels], free: Mapping[int, set[int]]) -> MaskSpec | None:
    lab = labels.get(id(v))
    if not lab:
        return None
    kept_axes = tuple(sorted(a for a, k in lab.items() if k == "seq" and a not in free.get(id(v), set())))
    if not kept_axes:
        return None
    return MaskSpec(kept_axes, next((a for a, k in lab.items() if k == "B"), None))


def label_axes(module: Any, info: MaskInfo, ops: Sequence[Any] | None = None) -> None:
    """Fill ``info.axes`` and ``info.derived`` (see the module doc)."""
    from lamina.dialects.top.elementwise import AddOp, SubOp, WhereOp
    from lamina.dialects.top.extra import AttentionOp
    from lamina.dialects.top.nn import MatMulOp
    from lamina.dialects.top.tensor import FlattenOp, GatherOp, PermuteOp, ReshapeOp, SqueezeOp, UnsqueezeOp
    from lamina.ir.naming import result_names

    ops = _ops(module) if ops is None else ops
    nb, seq = info.shape
    inputs = _inputs(module)
    labels: dict[int, Labels] = {}
    mask_v = dict(inputs)[info.input]
    derived, _ = _derived_values(ops, mask_v)
    for _, v in inputs:
        s = _shape(v)
        if s is not None and len(s) >= 2 and s[:2] == (nb, seq):
            labels[id(v)] = {0: "B", 1: "seq"}
    free: dict[int, set[int]] = {}  # result id -> axes left whole (the key axis where the mask applies)
    for op in ops:
        if not op.results or op.name == "top.Input":
            continue
        out = _shape(op.results[0])
        if out is None:
            continue
        ins = [(v, _shape(v), labels.get(id(v), {})) for v in op.operands if not _is_none(v)]
        if not any(lab for _, _, lab in ins):
            continue
        res: Labels = {}
        x_shape, x_lab = (ins[0][1], ins[0][2]) if ins else (None, {})
        if isinstance(op, (ReshapeOp, SqueezeOp, UnsqueezeOp, FlattenOp)):
            if x_shape is not None:
                res = _reshape_labels(x_shape, out, x_lab)
        elif isinstance(op, PermuteOp):
            if x_shape is not None:
                perm = op._perm(len(x_shape))
                res = {m: x_lab[p] for m, p in enumerate(perm) if p in x_lab}
        elif isinstance(op, MatMulOp):
            (_, sa, la), (_, sb, lb) = ins[0], ins[1]
            if sa is not None and sb is not None and len(sa) >= 2 and len(sb) >= 2:
                nr = len(out)
                for k, kind in la.items():
                    if k < len(sa) - 1 and out[k + nr - len(sa)] == sa[k]:
                        res[k + nr - len(sa)] = kind
                for k, kind in lb.items():
                    if k == len(sb) - 1:
                        res.setdefault(nr - 1, kind)
                    elif k < len(sb) - 2 and out[k + nr - len(sb)] == sb[k]:
                        res.setdefault(k + nr - len(sb), kind)
        elif isinstance(op, GatherOp):
            (_, st, lt), (_, si, li) = ins[0], ins[1]
            if st is not None and si is not None:
                ax = int(op.axis) % len(st)
                for k, kind in li.items():
                    res[ax + k] = kind
                for k, kind in lt.items():
                    if k != ax:
                        res.setdefault(k if k < ax else k + len(si) - 1, kind)
        elif isinstance(op, AttentionOp):
            _, sq, lq = ins[0]
            if sq is not None and sq == out:
                res = dict(lq)
        else:
            res = _broadcast_labels([(s, lab) for _, s, lab in ins if s is not None], out)
            if res and isinstance(op, (AddOp, SubOp, WhereOp)) and id(op.results[0]) not in derived:
                dv = [(s, lab) for v, s, lab in ins if id(v) in derived and s is not None]
                if dv and any(id(v) not in derived and not _is_const(v) for v, _, _ in ins):
                    keyax = {m for m, kind in _broadcast_labels(dv, out).items() if kind == "seq"}
                    if keyax:
                        free[id(op.results[0])] = keyax
        if res:
            for r in op.results:
                rs = _shape(r)
                if rs == out:
                    labels[id(r)] = res
                elif rs is not None:
                    # a second result of another shape (LayerNorm's mean/rstd [B, seq, 1])
                    labels[id(r)] = _broadcast_labels([(out, res)], rs)
    names: dict[str, MaskSpec] = {}
    derived_names: set[str] = set()
    for op in ops:
        if not op.results:
            continue
        for r, n in zip(op.results, result_names(op)):
            if id(r) in derived:
                derived_names.add(n)
                continue
            spec = _spec_of(r, labels, free)
            if spec is not None and n not in names:
                names[n] = spec
    for n, v in inputs:
        if id(v) in derived:
            derived_names.add(n)
    # the outputs also go by their ONNX names (the dumps' and the comparisons' keys)
    from lamina.frontends.model_io import module_signature

    ret = _entry(module).last_op
    if ret is not None:
        for n, v in zip(module_signature(module).output_names, ret.operands):
            spec = _spec_of(v, labels, free)
            if id(v) in derived:
                derived_names.add(n)
            elif spec is not None:
                names[n] = spec
    info.axes = names
    info.derived = derived_names

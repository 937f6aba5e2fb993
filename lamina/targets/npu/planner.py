"""The layer-group planner: which consecutive NPU commands run together in local memory, and in how
many slices — what ``npu-layer-group`` decides and ``npu-slice`` / ``npu-lmem-alloc`` write down.

A **group** is a run of command ops ``nodes[i:j]`` of one segment (commands not separated by a DDR
operation: a copy, a reshape, a host op) whose last op is its only sink (every other op feeds one
inside the group). It computes its sink's output in ``secs = (n, c, h, w)`` slices — a partition of
each dim into near-equal parts — and, **backwards**, every op's output region per slice from what
its users in the group read (:func:`propagate`: the union over users of the regions
:func:`lamina.targets.npu.records.slice_command` gives, halos of convolutions and pools included; a
value stored to DDR is widened to cover its whole tensor). Dims are independent (every command maps
an output dim to the same input dims), so a region is kept per dim: ``parts[value][d]`` is the list of
``secs[d]`` ranges.

**Local memory** (:func:`local_values`, :func:`lmem_plan`): each value the group touches has an LMEM
buffer — its largest slice region in the chip's lane layout (``Chip.tensor_bytes_per_lane``). Loads
whose region is the same in every slice (weights of an h-sliced group) are loaded once, in the
prologue; other loads, and values stored to DDR, are double-buffered (the GDMA fills or drains one
buffer while the TIU uses the other); intermediates live from their producer to their last user.
:func:`pack` places them, address x time, aligned to the EU width, preferring placements where no
command's operands share an LMEM bank.

**Cost** (:func:`group_cycles`): the chip's cycle model on the group's software pipeline — the
prologue loads, then per timestep ``t`` the GDMA loading slice ``t`` and storing slice ``t - 2``
while the TIU computes slice ``t - 1`` — with each command's work scaled to its slice region.

**Grouping** (:func:`plan_segment`): an interval dynamic programme over cut points, as TPU-MLIR's
``--opt 2``: ``best[j] = min_i best[i] + cost(i, j)`` over groups of at most :data:`MAX_GROUP` ops,
``cost(i, j)`` the cheapest feasible slicing of ``nodes[i:j]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.ir.core import Value
from lamina.support.errors import LaminaError

from .arch import DTYPES, MAC_KINDS, Chip
from .dialect import CommandOp, dtype_name, shape4

__all__ = [
    "MAX_GROUP",
    "Local",
    "Node",
    "Plan",
    "candidate_secs",
    "group_cycles",
    "local_values",
    "pack",
    "plan_segment",
    "propagate",
    "split_dim",
]

#: the most command ops one group may hold (bounds the dynamic programme)
MAX_GROUP = 24
#: how many feasible slicings of a group the cost model compares
SECS_TRIED = 2
DIMS = "nchw"

Range = tuple[int, int]
Parts = list[list[Range]]  # per dim, one range per part


@dataclass
class Node:
    """A command op as the planner sees it: its record class and fields, the full 4-d shape of each
    tensor field, the values feeding its inputs, its work and compute dtype."""

    op: CommandOp
    index: int
    fields: dict[str, Any]
    shapes: dict[str, tuple[int, int, int, int]]
    inputs: dict[str, Value]
    out: Value
    work: int
    kind: str
    dtype: str
    #: the regions its inputs need for an output region (slice_command's, remembered: the dynamic
    #: programme asks for the same regions of the same op in every group it tries)
    memo: dict[Any, dict[str, Any]] = field(default_factory=dict)

    def needs(self, region: tuple[tuple[int, int], ...]) -> dict[str, Any]:
        """The region of every tensor field the command reads to compute ``region`` of its output."""
        got = self.memo.get(region)
        if got is None:
            from .slicing import slice_command

            got = slice_command(self.op.command, self.fields, self.shapes, region)[1]
            self.memo[region] = got
        return got

    @classmethod
    def of(cls, op: CommandOp, index: int) -> Node:
        from .simulator import TIU_TABLE

        vals = op.tensor_values()
        cmd = op.local_command()
        return cls(
            op=op,
            index=index,
            fields=op.fields(),
            shapes={n: shape4(v.type) for n, v in vals.items()},
            inputs={n: v for n, v in vals.items() if n != "output"},
            out=op.results[0],
            work=int(TIU_TABLE.lookup(op.command).work(cmd)),
            kind=op.command.KIND,
            dtype=cmd.compute_dtype,
        )


def split_dim(size: int, parts: int, align: int = 1) -> list[Range]:
    """``size`` split into ``parts`` contiguous near-equal ranges, each but the last a multiple of
    ``align`` (fewer parts when the alignment leaves no more)."""
    parts = max(1, min(parts, size))
    step = -(-size // parts)
    if align > 1:
        step = -(-step // align) * align
    out = []
    start = 0
    while start < size:
        out.append((start, min(size, start + step)))
        start += step
    return out


def _full(shape: Sequence[int]) -> Parts:
    return [[(0, int(d))] for d in shape]


def propagate(
    nodes: Sequence[Node], secs: Sequence[int], chip: Chip, escapes: Iterable[Value] = ()
) -> dict[Value, Parts] | None:
    """Every value's parts (per dim, one range per slice part) when ``nodes`` (in order, the last the
    sink) compute the sink's output in ``secs`` slices; values in ``escapes`` (stored to DDR) are
    widened to cover their whole tensor. None when a slice would be empty or a command cannot be
    split along a sliced dim."""
    try:
        return _propagate(nodes, secs, chip, escapes)
    except LaminaError:
        return None


def _propagate(
    nodes: Sequence[Node], secs: Sequence[int], chip: Chip, escapes: Iterable[Value]
) -> dict[Value, Parts] | None:
    from .slicing import split_step

    sink = nodes[-1]
    s4 = sink.shapes["output"]
    sink_parts = []
    for d in range(4):
        step = 1 if secs[d] == 1 else split_step(sink.op.command, sink.fields, sink.shapes, d)
        if step == 0:
            return None  # the sink cannot be split along this dim
        sink_parts.append(split_dim(s4[d], secs[d], math.lcm(step, chip.lanes) if d == 1 else step))
    parts: dict[Value, Parts] = {sink.out: sink_parts}
    if any(len(parts[sink.out][d]) != secs[d] for d in range(4)):
        return None
    stored = set(escapes)
    for node in reversed(nodes):
        p = parts.get(node.out)
        if p is None:
            return None  # not the sink and nothing in the group reads it
        full = node.shapes["output"]
        if node.out in stored:
            p = [_cover(p[d], full[d]) for d in range(4)]
            parts[node.out] = p
        need: dict[str, list[list[Range]]] = {n: [[] for _ in range(4)] for n in node.inputs}
        base_region = tuple((0, full[d]) for d in range(4))
        regions = node.needs(base_region)
        for d in range(4):
            if len(p[d]) == 1 and p[d][0] == (0, full[d]):
                for n in node.inputs:
                    need[n][d] = [regions[n][d]]
                continue
            for r in p[d]:
                region = tuple(r if k == d else (0, full[k]) for k in range(4))
                regs = node.needs(region)
                for n in node.inputs:
                    need[n][d].append(regs[n][d])
        for n, v in node.inputs.items():
            got = need[n]
            prev = parts.get(v)
            if prev is None:
                parts[v] = got
            else:
                parts[v] = [_union(prev[d], got[d]) for d in range(4)]
    for p in parts.values():
        if any(b <= a for dim in p for a, b in dim):
            return None
    return parts


def _union(a: list[Range], b: list[Range]) -> list[Range]:
    """Part-wise union of two part lists of one dim (a list of one range broadcasts)."""
    if len(a) == 1 and len(b) > 1:
        a = a * len(b)
    if len(b) == 1 and len(a) > 1:
        b = b * len(a)
    return [(min(x[0], y[0]), max(x[1], y[1])) for x, y in zip(a, b)]


def _cover(p: list[Range], size: int) -> list[Range]:
    """Parts widened so that together they cover ``[0, size)`` (a stored value is written whole)."""
    out = []
    for k, (a, b) in enumerate(p):
        if k == 0:
            a = 0
        if k == len(p) - 1:
            b = size
        elif b < p[k + 1][0]:
            b = p[k + 1][0]
        out.append((a, b))
    return out


# ---- local memory ---------------------------------------------------------------------------------


@dataclass
class Local:
    """A value's buffer in LMEM: bytes per lane of one buffer, how many buffers, the span of body
    positions it lives over (``None``: the whole group), and whether its load happens once."""

    value: Value
    bytes: int
    buffers: int
    live: tuple[int, int] | None
    once: bool = False
    load: bool = False
    store: bool = False
    addr: int = -1
    #: placed from the top of LMEM down (weights: apart from the activations, which go bottom up)
    high: bool = False


def _extent(p: Parts) -> tuple[int, int, int, int]:
    return tuple(max(b - a for a, b in dim) for dim in p)  # type: ignore[return-value]


def _same_everywhere(p: Parts) -> bool:
    return all(len(set(dim)) == 1 for dim in p)


def local_values(
    nodes: Sequence[Node], parts: dict[Value, Parts], escapes: Iterable[Value], chip: Chip, slices: int
) -> list[Local]:
    """The LMEM buffers of a group (see :class:`Local`), in first-use order."""
    stored = set(escapes)
    produced = {n.out: k for k, n in enumerate(nodes)}
    last_use: dict[Value, int] = {}
    order: list[Value] = []
    for k, n in enumerate(nodes):
        for v in n.inputs.values():
            last_use[v] = k
            if v not in order and v not in produced:
                order.append(v)
        order.append(n.out)
    out = []
    for v in order:
        p = parts[v]
        e = _extent(p)
        nbytes = chip.tensor_bytes_per_lane(*e, dtype_name(v.type))
        if v not in produced:  # loaded from DDR
            once = slices == 1 or _same_everywhere(p)
            out.append(Local(v, nbytes, 1 if once else 2, None, once=once, load=True))
        elif v in stored:
            out.append(Local(v, nbytes, 1 if slices == 1 else 2, None, store=True))
        else:
            out.append(Local(v, nbytes, 1, (produced[v], last_use.get(v, produced[v]))))
    return out


def pack(
    locals_: list[Local],
    chip: Chip,
    conflicts: Sequence[Sequence[int]] = (),
    reserved: Sequence[tuple[int, int]] = (),
    fixed: Sequence[int] = (),
    skip: Sequence[int] = (),
) -> int | None:
    """Place the buffers in one lane's LMEM (sets ``addr``); returns the bytes used, None when they do
    not fit. Whole-group buffers are stacked first (largest first); intermediates then go, largest
    first, to the lowest gap free over their life. With ``conflicts`` (per command, the indices of the
    locals it touches), a gap position whose banks meet another operand's of the same command is taken
    only when no conflict-free position fits; when avoiding conflicts leaves a buffer no room, the
    buffers are placed again without (what fits, fits). ``reserved`` byte spans are taken for the
    whole group; the locals of indices ``fixed`` keep the ``addr`` they have; those of ``skip`` are
    left out (placed by the caller later)."""
    keep = {i: locals_[i].addr for i in fixed}
    if conflicts:
        used = _pack(locals_, chip, conflicts, reserved, keep, set(skip))
        if used is not None:
            return used
    return _pack(locals_, chip, (), reserved, keep, set(skip))


def _pack(
    locals_: list[Local],
    chip: Chip,
    conflicts: Sequence[Sequence[int]],
    reserved: Sequence[tuple[int, int]],
    keep: dict[int, int],
    skip: set[int],
) -> int | None:
    eu = chip.eu_bytes
    cap = chip.lmem_bytes_per_lane
    sizes = [_align(loc.bytes, eu) * loc.buffers for loc in locals_]
    whole = sorted((i for i, loc in enumerate(locals_) if loc.live is None), key=lambda i: -sizes[i])
    inter = sorted((i for i, loc in enumerate(locals_) if loc.live is not None), key=lambda i: -sizes[i])
    partners: dict[int, set[int]] = {}
    for c in conflicts:
        for a in c:
            partners.setdefault(a, set()).update(b for b in c if b != a)
    bank = chip.bank_bytes

    def banks(addr: int, size: int) -> set[int]:
        return set(range(addr // bank, (addr + max(size, 1) - 1) // bank + 1))

    placed: list[tuple[int, int, tuple[int, int] | None, int]] = [(a, e, None, -1) for a, e in reserved]
    for i, a in keep.items():
        placed.append((a, a + sizes[i], locals_[i].live, i))
    top = max((a + sizes[i] for i, a in keep.items()), default=0)
    for i in whole + inter:
        if i in keep or i in skip:
            continue
        loc, size = locals_[i], sizes[i]
        live = loc.live
        busy = sorted(
            (a, e)
            for a, e, lv, _ in placed
            if live is None or lv is None or (lv[0] <= live[1] and live[0] <= lv[1])
        )
        gaps: list[tuple[int, int]] = []  # free [start, end) spans
        at = 0
        for a, e in busy:
            if a > at:
                gaps.append((at, a))
            at = max(at, e)
        gaps.append((at, cap))
        fits = [(a, e) for a, e in gaps if e - a >= size]
        if not fits:
            return None
        if loc.high:
            fits = [((e - size) // eu * eu, e) for a, e in reversed(fits) if (e - size) // eu * eu >= a]
            if not fits:
                return None
            fits = [(a, a + size) for a, _ in fits]
        choice = fits[0][0]
        mine_partners = partners.get(i)
        if mine_partners:
            taken = [banks(a, e - a) for a, e, _, j in placed if j in mine_partners]
            found = False
            for a, e in fits:
                starts = [a] + [b * bank for b in range(-(-a // bank), (e - size) // bank + 1)]
                for s0 in starts:
                    if s0 + size > e:
                        continue
                    mb = banks(s0, size)
                    if not any(mb & t for t in taken):
                        choice, found = s0, True
                        break
                if found:
                    break
        loc.addr = choice
        placed.append((choice, choice + size, live, i))
        top = max(top, choice + size)
    return top


def highest_gap(busy: Sequence[tuple[int, int]], size: int, cap: int, eu: int) -> int | None:
    """The highest EU-aligned address where ``size`` bytes fit between the ``busy`` spans below
    ``cap``, or None."""
    spans = sorted(busy)
    edges = [(0, 0), *spans, (cap, cap)]
    best = None
    at = 0
    gaps = []
    for a, e in spans:
        if a > at:
            gaps.append((at, a))
        at = max(at, e)
    gaps.append((at, cap))
    for a, e in reversed(gaps):
        s = (e - size) // eu * eu
        if s >= a:
            best = s
            break
    del edges
    return best


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def conflict_sets(nodes: Sequence[Node], locals_: Sequence[Local]) -> list[list[int]]:
    """Per command, the indices (into ``locals_``) of the buffers it streams (reads and writes; its
    per-channel parameters never conflict: :data:`lamina.targets.npu.simulator.PARAMETER_FIELDS`)."""
    from .simulator import PARAMETER_FIELDS

    idx = {loc.value: k for k, loc in enumerate(locals_)}
    return [
        [
            idx[v]
            for name, v in (*n.inputs.items(), ("output", n.out))
            if v in idx and name not in PARAMETER_FIELDS
        ]
        for n in nodes
    ]


# ---- the cost model -------------------------------------------------------------------------------


def _lens(p: Parts) -> list[np.ndarray]:
    return [np.array([b - a for a, b in dim], dtype=np.int64) for dim in p]


def _grid(p: Parts, secs: Sequence[int]) -> np.ndarray:
    """Elements of the value's region in each slice, over the slice grid (n, c, h, w order)."""
    lens = [[b - a for a, b in dim] for dim in p]
    if all(s == 1 for s in secs):
        return np.array([math.prod(x[0] for x in lens)], dtype=np.int64)
    g = np.ones(1, dtype=np.int64)
    for x, s in zip(lens, secs):
        v = np.array(x * s if len(x) == 1 else x, dtype=np.int64)
        g = np.multiply.outer(g, v).reshape(-1)
    return g


def _stored_grid(p: Parts, secs: Sequence[int]) -> np.ndarray:
    """Elements each slice stores of a value (the part no earlier slice stored)."""
    news = []
    for dim, s in zip(p, secs):
        dim = dim * s if len(dim) == 1 and s > 1 else dim
        prev = 0
        new = []
        for k, (a, b) in enumerate(dim):
            lo = a if k == 0 else max(a, prev)
            new.append(max(0, b - lo) if (len(dim) > 1 or k == 0) else 0)
            prev = max(prev, b)
        if len(set(dim)) == 1 and len(dim) > 1:  # the same range each part: stored once
            new = [dim[0][1] - dim[0][0]] + [0] * (len(dim) - 1)
        news.append(np.array(new, dtype=np.int64))
    g = (
        news[0].reshape(-1, 1, 1, 1)
        * news[1].reshape(1, -1, 1, 1)
        * news[2].reshape(1, 1, -1, 1)
        * news[3].reshape(1, 1, 1, -1)
    )
    return g.reshape(-1)


def engine_cycles(
    nodes: Sequence[Node],
    parts: dict[Value, Parts],
    locals_: Sequence[Local],
    secs: Sequence[int],
    chip: Chip,
) -> tuple[float, float]:
    """The TIU's and the GDMA's busy cycles in the group (what :func:`group_cycles` schedules)."""
    prologue, load, store, comp = _work_per_slice(nodes, parts, locals_, secs, chip)
    return float(comp.sum()), float(prologue + load.sum() + store.sum())


def _work_per_slice(
    nodes: Sequence[Node],
    parts: dict[Value, Parts],
    locals_: Sequence[Local],
    secs: Sequence[int],
    chip: Chip,
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Transfer cycles of the prologue, of each slice's loads and stores, TIU cycles of each slice."""
    nslices = math.prod(secs)
    isz = {loc.value: DTYPES[dtype_name(loc.value.type)].itemsize for loc in locals_}
    bw = chip.gdma_ddr_bytes_per_cycle
    prologue = 0.0
    load = np.zeros(nslices, dtype=np.float64)
    store = np.zeros(nslices, dtype=np.float64)
    for loc in locals_:
        p = parts[loc.value]
        if loc.load:
            if loc.once:
                prologue += math.ceil(int(_grid(p, [1, 1, 1, 1])[0]) * isz[loc.value] / bw)
            else:
                load += np.ceil(_grid(p, secs) * isz[loc.value] / bw)
        if loc.store:
            store += np.ceil(_stored_grid(p, secs) * isz[loc.value] / bw)
    comp = np.zeros(nslices, dtype=np.float64)
    for n in nodes:
        full = math.prod(n.shapes["output"])
        frac = _grid(parts[n.out], secs) / max(full, 1)
        rate = chip.tiu_rate(n.kind, n.dtype)
        comp += chip.tiu_latency_cycles + np.ceil(n.work * frac / rate)
    return prologue, load, store, comp


def group_cycles(
    nodes: Sequence[Node],
    parts: dict[Value, Parts],
    locals_: Sequence[Local],
    secs: Sequence[int],
    chip: Chip,
) -> int:
    """Estimated cycles of the group's pipeline (see the module docstring): GDMA moves pipelined
    (the engine busy for the transfers, data there ``gdma_latency_cycles`` later), TIU commands one
    after the other, each slice's work its share of the op's."""
    nslices = math.prod(secs)
    lat = float(chip.gdma_latency_cycles)
    prologue, load, store, comp = _work_per_slice(nodes, parts, locals_, secs, chip)
    # the pipeline: GDMA per timestep loads slice t, then stores t - 2; TIU computes t - 1
    gdma, tiu = prologue, 0.0
    load_done = np.zeros(nslices)
    comp_end = np.zeros(nslices)
    store_done = np.zeros(nslices)
    for t in range(nslices + 2):
        if t < nslices:
            gdma = max(gdma, comp_end[t - 2] if t >= 2 else 0.0) + load[t]
            load_done[t] = gdma + lat
        if 1 <= t <= nslices:
            s = t - 1
            start = max(
                tiu, load_done[s], store_done[s - 2] if s >= 2 else 0.0, prologue + lat if s == 0 else 0.0
            )
            tiu = start + comp[s]
            comp_end[s] = tiu
        if t >= 2:
            s = t - 2
            gdma = max(gdma, comp_end[s]) + store[s]
            store_done[s] = gdma + lat
    return int(max(gdma + lat, tiu))


# ---- choosing the slicing -------------------------------------------------------------------------


def candidate_secs(shape: Sequence[int], chip: Chip, limit: int = 512) -> list[tuple[int, int, int, int]]:
    """Slicings of an output of ``shape`` to try, fewest slices first: n (the batch), then one more dim
    — h, else c (in lane multiples), else w — as TPU-MLIR's layer groups slice n and h first."""
    n, c, h, w = (int(d) for d in shape)
    steps = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)

    def counts(size: int, align: int = 1) -> list[int]:  # the part counts split_dim really makes
        return sorted({len(split_dim(size, k, align)) for k in steps})

    ns = counts(n)
    hs = counts(h)
    cs = counts(c, chip.lanes)
    ws = counts(w)
    out: set[tuple[int, int, int, int]] = set()
    for a in ns:
        out |= {(a, 1, b, 1) for b in hs}
        out |= {(a, b, 1, 1) for b in cs}
        out |= {(a, 1, 1, b) for b in ws}
        # two dims: rows and columns, rows and channels (when one alone does not fit)
        out |= {(a, 1, b, d) for b in hs[-4:] for d in ws[1:]}
        out |= {(a, b, d, 1) for b in cs[1:] for d in hs[-4:]}
    return sorted((s for s in out if math.prod(s) <= limit), key=lambda s: (math.prod(s), s[3], s[1], s[0]))


@dataclass
class Plan:
    """A group's decisions: its nodes, slicing, parts, buffers, LMEM bytes and estimated cycles."""

    nodes: list[Node]
    secs: tuple[int, int, int, int]
    parts: dict[Value, Parts]
    locals: list[Local]
    lmem_bytes: int
    cycles: int
    escapes: list[Value] = field(default_factory=list)


def plan_group(
    nodes: Sequence[Node], escapes: Sequence[Value], chip: Chip, tries: int = SECS_TRIED
) -> Plan | None:
    """The cheapest feasible slicing of ``nodes`` among the first ``tries`` feasible candidates."""
    best: Plan | None = None
    found = 0
    cands = candidate_secs(nodes[-1].shapes["output"], chip)
    # the most finely sliced candidates the ops can take first: when none fits, no slicing does
    probes = 0
    fits = False
    for secs in reversed(cands):
        parts = propagate(nodes, secs, chip, escapes)
        if parts is None:
            continue
        probes += 1
        if pack(local_values(nodes, parts, escapes, chip, math.prod(secs)), chip) is not None:
            fits = True
            break
        if probes == 3:
            break
    if not fits:
        return None
    for secs in cands:
        parts = propagate(nodes, secs, chip, escapes)
        if parts is None:
            continue
        locs = local_values(nodes, parts, escapes, chip, math.prod(secs))
        used = pack(locs, chip)
        if used is None:
            continue
        cyc = group_cycles(nodes, parts, locs, secs, chip)
        if best is None or cyc < best.cycles:
            best = Plan(list(nodes), secs, parts, locs, used, cyc, list(escapes))  # type: ignore[arg-type]
        found += 1
        if found >= tries:
            break
    return best


def escaping(nodes: Sequence[Node]) -> list[Value]:
    """Values the group's ops produce that something outside the group reads (stored to DDR)."""
    inside = {id(n.op) for n in nodes}
    return [n.out for n in nodes if any(id(u) not in inside for u in n.out.users)]


def valid_group(nodes: Sequence[Node]) -> bool:
    """Single sink: every op but the last feeds one of the group's later ops."""
    later: set[int] = set()
    for k in range(len(nodes) - 1, -1, -1):
        n = nodes[k]
        if k < len(nodes) - 1 and id(n.out) not in later:
            return False
        later |= {id(v) for v in n.inputs.values()}
    return True


def plan_segment(nodes: Sequence[Node], chip: Chip, grouping: bool = True) -> list[Plan | Node]:
    """The groups of one segment (consecutive command ops), in order; a node no slicing fits in LMEM
    comes back alone, as the :class:`Node` itself (it runs on the host)."""
    m = len(nodes)
    if not grouping:
        out: list[Plan | Node] = []
        for n in nodes:
            p = plan_group([n], escaping([n]), chip)
            out.append(p if p is not None else n)
        return out
    best = [0.0] + [float("inf")] * m
    choice: list[Any] = [None] * (m + 1)
    for j in range(1, m + 1):
        # single-sink groups ending at j - 1, grown backwards
        for i in range(j - 1, max(-1, j - 1 - MAX_GROUP), -1):
            group = list(nodes[i:j])
            if not valid_group(group):
                break
            p = plan_group(group, escaping(group), chip)
            if p is None:
                if len(group) == 1:
                    cost = best[i] + 0.0
                    if cost < best[j]:
                        best[j], choice[j] = cost, (i, nodes[i])
                break
            cost = best[i] + p.cycles
            if cost < best[j]:
                best[j], choice[j] = cost, (i, p)
    res: list[Plan | Node] = []
    j = m
    while j > 0:
        i, p = choice[j]
        res.append(p)
        j = i
    res.reverse()
    return res


def is_mac(kind: str) -> bool:
    return kind in MAC_KINDS

"""The passes that plan a layer group's local work, each writing its decisions as attributes:

* ``npu-slice`` — the **slices**: from the group's slicing (``secs``), backward slice propagation
  (:func:`lamina.targets.npu.planner.propagate`: conv/pool halos, stored values widened to their
  whole tensor) gives every value its region per slice, written on its producer (the load or the
  command) as ``npu.slices = {n = array<i64: start, stop, ...>, c = ..., h = ..., w = ...}``;
* ``npu-schedule`` — the **timesteps** of the 3-stage software pipeline (load slice ``t`` / compute
  ``t - 1`` / store ``t - 2``): each load's stage (``npu.stage = 0``) and whether it happens once, in
  the prologue (``npu.once``: its region is the same in every slice, as an h-sliced group's
  weights), each command's (``1``) and store's (``2``), the buffers of each value (``npu.buffers``: 2
  for what the GDMA fills or drains while the TIU works on the other slice), the group's
  ``npu.timesteps``;
* ``npu-lmem-alloc`` — **local memory**: every buffer placed in a lane's LMEM, address x time
  (:func:`lamina.targets.npu.planner.pack`: EU-aligned, avoiding a command's operands sharing a bank
  where a placement allows), as ``npu.lmem = array<i64: address, bytes per buffer, buffers>``; the
  group's ``npu.lmem_bytes``. Across the groups of one command buffer (address x time, a group's
  index its time): a group's weights go as high in LMEM as they fit and, where the buffers of the
  groups in between leave them room and an earlier group's GDMA has time to spare (its estimated TIU
  time beyond its own transfers), are loaded by that earlier group while it computes:
  ``npu.prefetch = k`` on the load means the group ``k`` before issues it.
"""

from __future__ import annotations

import math
from typing import Any

from lamina.dialects.func.ops import FuncOp
from lamina.ir.attributes import BoolAttr, DenseArrayAttr, DictionaryAttr, IntegerAttr
from lamina.ir.core import Operation, Value
from lamina.ir.traits import ConstantLike
from lamina.ir.types import i64
from lamina.passes import Option, Pass, Statistic, register_pass

from ..arch import Chip
from ..dialect import CopyOp, GroupOp, ReshapeOp, WeightOp
from ..planner import (
    DIMS,
    Local,
    Parts,
    conflict_sets,
    engine_cycles,
    highest_gap,
    local_values,
    pack,
    propagate,
)
from .layer_group import chip_of, group_nodes

__all__ = ["LmemAlloc", "Schedule", "Slice", "group_locals", "read_parts"]


def _groups(module: Operation) -> list[GroupOp]:
    return list(module.walk_ops(GroupOp))


def _producer(v: Value) -> Operation:
    d = v.defining_op()
    assert d is not None
    return d


def write_parts(op: Operation, p: Parts) -> None:
    op.set_attr(
        "npu.slices",
        DictionaryAttr({DIMS[d]: DenseArrayAttr(i64, [x for r in p[d] for x in r]) for d in range(4)}),
    )


def read_parts(op: Operation) -> Parts | None:
    a = op.get_attr("npu.slices")
    if not isinstance(a, DictionaryAttr):
        return None
    out: Parts = []
    for d in DIMS:
        v = list(a[d].values)  # type: ignore[attr-defined]
        out.append([(int(v[k]), int(v[k + 1])) for k in range(0, len(v), 2)])
    return out


def slice_group(g: GroupOp, chip: Chip) -> bool:
    nodes, stored, loads = group_nodes(g)
    secs = tuple(g.secs or (1, 1, 1, 1))
    parts = propagate(nodes, secs, chip, stored)
    if parts is None:
        g.emit_error(f"the slicing {list(secs)} leaves a slice empty")
        return False
    for ld in loads:
        write_parts(ld, parts[ld.results[0]])
    for n in nodes:
        write_parts(n.op, parts[n.out])
    return True


def group_locals(g: GroupOp, chip: Chip) -> tuple[list[Any], list[Value], list[Local], dict[Value, Parts]]:
    """A sliced group's nodes, stored values, buffers (from the ``npu.slices`` attributes) and parts."""
    nodes, stored, loads = group_nodes(g)
    parts: dict[Value, Parts] = {}
    for op in [*loads, *(n.op for n in nodes)]:
        p = read_parts(op)
        if p is None:
            raise ValueError(f"'{op.name}' in a group has no npu.slices (run npu-slice first)")
        parts[op.results[0]] = p
    secs = tuple(g.secs or (1, 1, 1, 1))
    locs = local_values(nodes, parts, stored, chip, math.prod(secs))
    return nodes, stored, locs, parts


@register_pass
class Slice(Pass):
    name = "npu-slice"
    summary = "Every value of a layer group gets its region per slice (backward propagation, halos)"
    display_name = "SlicePass"
    op_name = "builtin.module"

    chip = Option(str, "lnpu", "The chip: a shipped name (lnpu, lnpu-edge) or a chip JSON file")

    def run_on_operation(self, op: Operation) -> Any:
        chip = chip_of(self.chip, op)
        if chip is None or not all(slice_group(g, chip) for g in _groups(op)):
            self.signal_failure()


@register_pass
class Schedule(Pass):
    name = "npu-schedule"
    summary = "Timesteps of each group's 3-stage pipeline: prologue loads, stages, double buffers"
    display_name = "SchedulePass"
    op_name = "builtin.module"

    chip = Option(str, "lnpu", "The chip: a shipped name (lnpu, lnpu-edge) or a chip JSON file")
    num_double = Statistic("num-double-buffered", "Values double-buffered")

    def run_on_operation(self, op: Operation) -> Any:
        chip = chip_of(self.chip, op)
        if chip is None:
            self.signal_failure()
            return
        for g in _groups(op):
            try:
                nodes, _stored, locs, _ = group_locals(g, chip)
            except ValueError as e:
                g.emit_error(str(e))
                self.signal_failure()
                return
            for loc in locs:
                p = _producer(loc.value)
                p.set_attr("npu.buffers", IntegerAttr(loc.buffers, i64))
                if loc.load:
                    p.set_attr("npu.stage", IntegerAttr(0, i64))
                    p.set_attr("npu.once", BoolAttr(loc.once))
                self.num_double += loc.buffers == 2
            for n in nodes:
                n.op.set_attr("npu.stage", IntegerAttr(1, i64))
            for o in g.block.ops:
                if o.name == "npu.Store":
                    o.set_attr("npu.stage", IntegerAttr(2, i64))
            g.set_attr("npu.timesteps", IntegerAttr(math.prod(g.secs or (1, 1, 1, 1)) + 2, i64))


def _weight_loads(g: GroupOp, locs: list[Local]) -> list[int]:
    """Indices of the group's loads of weights (``npu.Weight``) loaded once: what can be prefetched."""
    src = dict(zip(g.block.args, g.inputs))
    out = []
    for i, loc in enumerate(locs):
        d = loc.value.defining_op()
        if loc.load and loc.once and d is not None:
            w = src.get(d.operands[0])
            if w is not None and isinstance(w.defining_op(), WeightOp):
                out.append(i)
    return out


#: how many groups ahead a group's weights may be loaded
MAX_AHEAD = 8


def _runs(func: Operation) -> list[list[GroupOp]]:
    """The groups of each NPU command buffer, in order (copies and reshapes do not use LMEM and do
    not break a run; a host op does)."""
    runs: list[list[GroupOp]] = [[]]
    for op in func.regions[0].blocks[0].ops:
        if isinstance(op, GroupOp):
            runs[-1].append(op)
        elif isinstance(op, (CopyOp, ReshapeOp)) or (op.has_trait(ConstantLike) and not op.operands):
            continue
        elif runs[-1]:
            runs.append([])
    return [r for r in runs if r]


class _Group:
    def __init__(self, g: GroupOp, chip: Chip) -> None:
        self.g = g
        self.nodes, _stored, self.locs, parts = group_locals(g, chip)
        self.conf = conflict_sets(self.nodes, self.locs)
        self.wts = _weight_loads(g, self.locs)
        secs = tuple(g.secs or (1, 1, 1, 1))
        tiu, gdma = engine_cycles(self.nodes, parts, self.locs, secs, chip)
        self.idle_gdma = max(0.0, tiu - gdma)  # GDMA time free while the TIU computes this group
        self.own: list[tuple[int, int]] = []  # the LMEM spans of its buffers but the prefetched ones
        self.issued_by: dict[int, int] = {}  # weight local index -> index (in the run) of the loading group
        self.used = 0


def _span(loc: Local, chip: Chip) -> tuple[int, int]:
    eu = chip.eu_bytes
    return loc.addr, loc.addr + (-(-loc.bytes // eu) * eu) * loc.buffers


def _place_run(run: list[_Group], chip: Chip, joint: set[int]) -> int | None:
    """Place a run's buffers; the index of a group whose weights found no room (to pack whole), or
    None. Each group's buffers but its weights are packed bottom up; then, group by group, each weight
    goes as high as it fits and is loaded as early as LMEM and the GDMA's idle time allow: by the
    latest earlier group (at most :data:`MAX_AHEAD` before) with GDMA time to spare whose buffers,
    and those of every group until its own, leave it room — else by its own group."""
    cap, eu = chip.lmem_bytes_per_lane, chip.eu_bytes
    bw = chip.gdma_ddr_bytes_per_cycle
    for k, it in enumerate(run):
        for loc in it.locs:
            loc.addr, loc.high = -1, False
        it.issued_by = {}
        if k in joint:
            for i in it.wts:
                it.locs[i].high = True
            used = pack(it.locs, chip, it.conf)
            if used is None:
                raise _NoRoom(it.g)
            it.issued_by = {i: k for i in it.wts}
            it.own = [_span(loc, chip) for loc in it.locs]
        else:
            used = pack(it.locs, chip, it.conf, skip=it.wts)
            if used is None:
                raise _NoRoom(it.g)
            it.own = [_span(loc, chip) for i, loc in enumerate(it.locs) if i not in it.wts]
        it.used = used
    budget = [it.idle_gdma for it in run]
    placed: list[tuple[int, int, int, int]] = []  # start, end, first group, last group
    for k, it in enumerate(run):
        if k in joint:
            continue
        for i in it.wts:
            loc = it.locs[i]
            size = (-(-loc.bytes // eu) * eu) * loc.buffers
            cost = loc.bytes * chip.lanes / bw
            done = False
            for first in [*range(k - 1, max(-1, k - 1 - MAX_AHEAD), -1), k]:
                if first < k and budget[first] < cost:
                    continue
                busy = [s for j in range(first, k + 1) for s in run[j].own]
                busy += [(a, e) for a, e, f, t in placed if f <= k and first <= t]
                at = highest_gap(busy, size, cap, eu)
                if at is None:
                    continue
                loc.addr = at
                placed.append((at, at + size, first, k))
                it.issued_by[i] = first
                if first < k:
                    budget[first] -= cost
                done = True
                break
            if not done:
                return k
    return None


class _NoRoom(Exception):
    def __init__(self, g: GroupOp) -> None:
        self.group = g


def allocate(func: Operation, chip: Chip) -> GroupOp | None:
    """Place every group's buffers (see :class:`LmemAlloc`); the group that does not fit, if any."""
    for groups in _runs(func):
        try:
            run = [_Group(g, chip) for g in groups]
        except ValueError:
            raise
        joint: set[int] = set()
        try:
            while (k := _place_run(run, chip, joint)) is not None:
                joint.add(k)
        except _NoRoom as e:
            return e.group
        eu = chip.eu_bytes
        for k, it in enumerate(run):
            for i, loc in enumerate(it.locs):
                p = _producer(loc.value)
                p.set_attr("npu.lmem", DenseArrayAttr(i64, [loc.addr, -(-loc.bytes // eu) * eu, loc.buffers]))
                if i in it.issued_by and it.issued_by[i] < k:
                    # loaded by the group `k - issued_by` before this one, while that group computes
                    p.set_attr("npu.prefetch", IntegerAttr(k - it.issued_by[i], i64))
            # the bytes of a lane its buffers take (weights placed high make the top address no measure)
            it.g.set_attr(
                "npu.lmem_bytes", IntegerAttr(sum(e - a for a, e in (_span(x, chip) for x in it.locs)), i64)
            )
    return None


@register_pass
class LmemAlloc(Pass):
    name = "npu-lmem-alloc"
    summary = "Place every local buffer in LMEM (address x time, EU-aligned, avoiding bank conflicts)"
    display_name = "LmemAllocPass"
    op_name = "builtin.module"

    chip = Option(str, "lnpu", "The chip: a shipped name (lnpu, lnpu-edge) or a chip JSON file")
    num_prefetch = Statistic("num-prefetched", "Groups whose weights load while the previous group runs")

    def run_on_operation(self, op: Operation) -> Any:
        chip = chip_of(self.chip, op)
        if chip is None:
            self.signal_failure()
            return
        for f in op.walk_ops(FuncOp):
            if not f.regions or not f.regions[0].blocks:
                continue
            try:
                bad = allocate(f, chip)
            except ValueError as e:
                f.emit_error(str(e))
                self.signal_failure()
                return
            if bad is not None:
                bad.emit_error(
                    f"the group's buffers do not fit the {chip.lmem_bytes_per_lane} bytes of a lane's LMEM"
                )
                self.signal_failure()
                return
            self.num_prefetch += sum(
                1 for g in f.walk_ops(GroupOp) for o in g.block.ops if o.get_attr("npu.prefetch") is not None
            )

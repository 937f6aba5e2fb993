"""``npu-layer-group``: runs of NPU commands become layer groups (``npu.Group``), each computing in
local memory in the slicing the planner chose (:func:`lamina.targets.npu.planner.plan_segment`: an
interval dynamic programme over cut points priced by the cycle model).

Weights move to the top of the function (constants, never in the way of a group). A **segment** is a
run of consecutive command ops; each is cut into groups. A group's body loads every value it reads
from outside (``npu.Load``, first use order), holds its commands, stores every value read outside it
(``npu.Store``) and yields the stored values; the group op takes the sink's location and records its
slicing (``secs``) and estimated cycles (``npu.cycles``). With ``disable=true`` every command is a group
of its own (through DDR), so what grouping gains can be measured. A command that fits LMEM in no
slicing stays outside any group: it runs on the host CPU.
"""

from __future__ import annotations

from typing import Any

from lamina.dialects.func.ops import FuncOp
from lamina.ir.attributes import IntegerAttr
from lamina.ir.core import Block, Operation, Region, Value
from lamina.ir.location import FusedLoc
from lamina.ir.traits import ConstantLike
from lamina.ir.types import i64
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.support.errors import LaminaError

from ..arch import Chip, load_chip
from ..dialect import CommandOp, GroupOp, LoadOp, StoreOp, YieldOp
from ..planner import Node, Plan, plan_segment

__all__ = ["LayerGroup", "form_groups", "group_nodes", "segments"]


def _funcs(module: Operation) -> list[Operation]:
    return [o for o in module.walk_ops(FuncOp) if o.regions and o.regions[0].blocks]


def _constant(op: Operation) -> bool:
    return op.has_trait(ConstantLike) and not op.operands


def hoist_constants(block: Block) -> None:
    """Constants without operands to the top of the block, keeping their order."""
    first = next((o for o in block.ops if not _constant(o)), None)
    if first is None:
        return
    for op in list(block.ops):
        if _constant(op) and not op.is_before_in_block(first):
            op.move_before(first)


def segments(block: Block) -> list[list[CommandOp]]:
    """Runs of consecutive command ops (constants hoisted out of the way)."""
    out: list[list[CommandOp]] = []
    cur: list[CommandOp] = []
    for op in block.ops:
        if isinstance(op, CommandOp):
            cur.append(op)
            continue
        if _constant(op):
            continue
        if cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def build_group(plan: Plan) -> GroupOp:
    """Replace the plan's ops by one ``npu.Group`` (see the module docstring)."""
    ops = [n.op for n in plan.nodes]
    inside = {id(o) for o in ops}
    inputs: list[Value] = []
    for op in ops:
        for v in op.operands:
            d = v.defining_op()
            if (d is None or id(d) not in inside) and v not in inputs:
                inputs.append(v)
    outs = list(plan.escapes)
    sink = ops[-1]
    # the group's results are named by the values it stores (per-layer dumps find them by name)
    locs = [v.defining_op().location for v in outs]  # type: ignore[union-attr]
    loc = locs[0] if len(locs) == 1 else FusedLoc(locs)
    g = GroupOp.build(inputs=inputs, outputs=[v.type for v in outs], secs=plan.secs, body=Region(), loc=loc)
    g.set_attr("npu.cycles", IntegerAttr(int(plan.cycles), i64))
    ops[0].parent.insert_before(ops[0], g)  # type: ignore[union-attr]
    body = Block([v.type for v in inputs])
    g.regions[0].add_block(body)
    from lamina.ir.core import IRMapping

    mapping = IRMapping()
    for v, arg in zip(inputs, body.args):
        users = [u for u in v.users if id(u) in inside]
        loc = users[0].location if users else sink.location
        load = LoadOp.build(input=arg, output=v.type, loc=loc)
        body.append(load)
        mapping.map(v, load.results[0])
    for op in ops:
        body.append(op.clone(mapping))
    stores = []
    for v in outs:
        st = StoreOp.build(input=mapping.lookup(v), output=v.type, loc=v.defining_op().location)  # type: ignore[union-attr]
        body.append(st)
        stores.append(st.results[0])
    body.append(YieldOp.build(values=stores, loc=loc))
    for v, r in zip(outs, g.results):
        v.replace_uses_with_if(r, lambda use: id(use.owner) not in inside)
    for op in reversed(ops):
        op.erase()
    return g


def form_groups(module: Operation, chip: Chip, grouping: bool = True) -> dict[str, int]:
    """Group every function of ``module``; returns counts of groups, grouped commands and commands
    left for the host."""
    stats = {"groups": 0, "grouped": 0, "host": 0}
    for func in _funcs(module):
        block = func.regions[0].blocks[0]
        hoist_constants(block)
        for seg in segments(block):
            nodes = [Node.of(op, k) for k, op in enumerate(seg)]
            for p in plan_segment(nodes, chip, grouping):
                if isinstance(p, Node):
                    stats["host"] += 1
                    continue
                build_group(p)
                stats["groups"] += 1
                stats["grouped"] += len(p.nodes)
    return stats


def group_nodes(g: GroupOp) -> tuple[list[Node], list[Value], list[LoadOp]]:
    """A group's body as the planner sees it: its command nodes (in order), the values it stores and
    its loads."""
    nodes: list[Node] = []
    loads: list[LoadOp] = []
    stored: list[Value] = []
    for op in g.block.ops:
        if isinstance(op, CommandOp):
            nodes.append(Node.of(op, len(nodes)))
        elif isinstance(op, LoadOp):
            loads.append(op)
        elif isinstance(op, StoreOp):
            stored.append(op.operands[0])
    return nodes, stored, loads


def chip_of(option: str, op: Operation) -> Chip | None:
    """The chip named by a pass option (emits the error on ``op`` when it cannot be loaded)."""
    try:
        return load_chip(option)
    except LaminaError as e:
        op.emit_error(str(e))
        return None


@register_pass
class LayerGroup(Pass):
    name = "npu-layer-group"
    summary = "Group NPU commands into layer groups computing in local memory, sliced to fit (interval DP)"
    display_name = "LayerGroupPass"
    op_name = "builtin.module"

    chip = Option(str, "lnpu", "The chip: a shipped name (lnpu, lnpu-edge) or a chip JSON file")
    disable = Option(bool, False, "Every command a group of its own (through DDR)")

    num_groups = Statistic("num-groups", "Layer groups formed")
    num_grouped = Statistic("num-grouped", "Commands in groups")
    num_host = Statistic("num-host", "Commands that fit LMEM in no slicing (left for the host)")

    def run_on_operation(self, op: Operation) -> Any:
        chip = chip_of(self.chip, op)
        if chip is None:
            self.signal_failure()
            return
        stats = form_groups(op, chip, not self.disable)
        self.num_groups += stats["groups"]
        self.num_grouped += stats["grouped"]
        self.num_host += stats["host"]

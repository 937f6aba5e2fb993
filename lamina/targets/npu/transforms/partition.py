"""``npu-partition``: the function split into NPU and CPU subnets, with as few switches as the data
allows.

After ``convert-tpu-to-npu`` the ops without an NPU form (host ops) sit where the original order put
them. Each switch between NPU work and host work ends a command buffer: the NPU drains, the host
runs, a new buffer starts. This pass moves every host op as early as its operands allow — right
after the last op producing one of them — so that host ops that do not depend on NPU results (an
attention mask's arithmetic, repeated in every layer of a transformer) gather at the front, then
numbers the subnets in order: ``npu.subnet = k`` on every op doing work (``npu.Copy``, command ops;
the layer groups made later inherit their ops' subnet) and the kind of each as ``npu.subnets =
["npu", "cpu", ...]`` on the function. Reshapes and constants stay where they are (they do no
work).
"""

from __future__ import annotations

from typing import Any

from lamina.dialects.func.ops import FuncOp
from lamina.ir.attributes import ArrayAttr, IntegerAttr, StringAttr
from lamina.ir.core import Block, Operation
from lamina.ir.traits import ConstantLike, ReturnLike
from lamina.ir.types import i64
from lamina.passes import Pass, Statistic, register_pass

from ..dialect import CommandOp, CopyOp, GroupOp, ReshapeOp

__all__ = ["Partition", "is_host_op", "partition"]


def is_host_op(op: Operation) -> bool:
    """Whether ``op`` runs on the host: anything doing work that is not NPU work."""
    if op.has_trait(ReturnLike) or (op.has_trait(ConstantLike) and not op.operands):
        return False
    return not isinstance(op, (CommandOp, CopyOp, GroupOp, ReshapeOp))


def _hoist(block: Block) -> int:
    """Move every host op that reads no NPU result right after the last producer of its operands (a
    host op, a constant or the start); returns how many moved. A host op reading an NPU result stays:
    moved up, it could only cut a run of NPU work that might have been one layer group."""
    moved = 0
    for op in list(block.ops):
        if not is_host_op(op):
            continue
        anchor = None
        for v in op.operands:
            d = v.defining_op()
            if d is not None and d.parent is block and (anchor is None or anchor.is_before_in_block(d)):
                anchor = d
        if any(_npu_result(v, block) for v in op.operands):
            continue
        prev = _prev(op)
        if anchor is None or _constant(anchor):
            first = next(
                o for o in block.ops if not (o.has_trait(ConstantLike) and not o.operands) or o is op
            )
            if first is not op:
                op.move_before(first)
                moved += 1
        elif prev is not anchor and anchor.is_before_in_block(op):
            op.move_after(anchor)
            moved += 1
    return moved


def _npu_result(v: Any, block: Block) -> bool:
    """Whether ``v`` is (a reshape of) a value NPU work produces."""
    from .address import root_of

    d = root_of(v).defining_op()
    return d is not None and d.parent is block and not is_host_op(d) and not _constant(d)


def _constant(op: Operation) -> bool:
    return op.has_trait(ConstantLike) and not op.operands


def _prev(op: Operation) -> Operation | None:
    block = op.parent
    assert block is not None
    ops = block.ops
    i = ops.index(op)
    return ops[i - 1] if i > 0 else None


def partition(func: Operation) -> list[str]:
    """Hoist the host ops and number the subnets (see the module docstring); their kinds in order."""
    from .layer_group import hoist_constants

    block = func.regions[0].blocks[0]
    hoist_constants(block)  # constants first: a host op moved to the front must find its constants
    _hoist(block)
    kinds: list[str] = []
    for op in block.ops:
        if (
            op.has_trait(ReturnLike)
            or (op.has_trait(ConstantLike) and not op.operands)
            or isinstance(op, ReshapeOp)
        ):
            continue
        kind = "cpu" if is_host_op(op) else "npu"
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
        op.set_attr("npu.subnet", IntegerAttr(len(kinds) - 1, i64))
    func.set_attr("npu.subnets", ArrayAttr([StringAttr(k) for k in kinds]))
    return kinds


@register_pass
class Partition(Pass):
    name = "npu-partition"
    summary = "Split into NPU and CPU subnets, host ops moved as early as their operands allow"
    display_name = "PartitionPass"
    op_name = "builtin.module"

    num_npu = Statistic("num-npu-subnets", "NPU subnets")
    num_cpu = Statistic("num-cpu-subnets", "CPU subnets")

    def run_on_operation(self, op: Operation) -> Any:
        for f in op.walk_ops(FuncOp):
            if f.regions and f.regions[0].blocks:
                kinds = partition(f)
                self.num_npu += kinds.count("npu")
                self.num_cpu += kinds.count("cpu")

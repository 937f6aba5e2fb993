"""``top-dce``: erase ``top`` ops (and weights) whose results are unused, innermost first, in one
backward sweep per block (TPU-MLIR leaves this to canonicalize; this is the cheap standalone form)."""

from __future__ import annotations

from typing import Any

from lamina.ir.core import Block, Operation
from lamina.passes import Pass, Statistic, register_pass

_KEEP = frozenset({"top.Input", "top.Yield"})


def _dead(op: Operation) -> bool:
    if not op.name.startswith("top.") or op.name in _KEEP:
        return False
    return not any(r.uses for r in op.results)


def _sweep(block: Block) -> int:
    n = 0
    op = block.last_op
    while op is not None:
        prev = op.prev_op
        for region in op.regions:
            for b in region.blocks:
                n += _sweep(b)
        if _dead(op):
            op.erase()
            n += 1
        op = prev
    return n


def top_dce(root: Operation) -> int:
    """Erase the unused ``top`` ops nested in ``root``; returns how many."""
    return sum(_sweep(b) for region in root.regions for b in region.blocks)


@register_pass
class TopDCE(Pass):
    name = "top-dce"
    summary = "Erase top ops and weights whose results are unused"
    display_name = "TopDCEPass"

    num_erased = Statistic("num-erased", "Number of ops erased")

    def run_on_operation(self, op: Operation) -> Any:
        self.num_erased += top_dce(op)

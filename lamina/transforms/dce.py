"""``dce``: erase ops whose results are unused and that have no memory effects (iteratively,
through chains of dead ops). MLIR has no pass of this name; it is the dead-op part of its region
simplification, on its own."""

from __future__ import annotations

from lamina.ir.core import Operation
from lamina.passes import Pass, Statistic, register_pass
from lamina.rewrite.greedy import is_trivially_dead


def dead_code_elimination(root: Operation) -> int:
    """Erase trivially dead ops nested in ``root`` until none is left; returns how many."""
    work: list[Operation] = []
    for r in root.regions:
        for b in r.blocks:
            for op in b:
                work.extend(op.walk_ops())
    in_work = set(work)
    erased = 0
    while work:
        op = work.pop()
        if op not in in_work:  # erased with an enclosing op
            continue
        in_work.discard(op)
        if op.parent is None or not is_trivially_dead(op):
            continue
        producers = [o.value.defining_op() for o in op.operand_uses]
        # Ops nested in ``op`` go with it: forget them.
        for nested in op.walk_ops():
            if nested is not op and nested in in_work:
                in_work.discard(nested)
        op.erase()
        erased += 1
        for p in producers:
            if p is not None and p.parent is not None and p not in in_work:
                in_work.add(p)
                work.append(p)
    return erased


@register_pass
class DCE(Pass):
    name = "dce"
    summary = "Erase operations without uses and without side effects"

    num_erased = Statistic("num-erased", "Number of operations erased")

    def run_on_operation(self, op: Operation) -> None:
        self.num_erased += dead_code_elimination(op)

"""``top-canonicalize``: the ``top`` canonicalization patterns (fusions, identities, merges,
subgraph recognition) and constant folding, applied greedily, then unused ops erased."""

from __future__ import annotations

from typing import Any

from lamina.ir.context import lookup_dialect
from lamina.ir.core import Operation
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.rewrite.greedy import apply_patterns_greedily

from .patterns import all_patterns


def top_op_classes() -> list[type[Operation]]:
    """The ops of the ``top`` dialect, in its order (from the dialect registry)."""
    top = lookup_dialect("top")  # registered when any top op module is imported, as here
    return list(top.ops.values()) if top is not None else []


def canonicalize_top(
    op: Operation, *, fold: bool = True, max_iterations: int = 10, stats: dict[str, int] | None = None
) -> bool:
    """Apply every ``top`` pattern greedily to the ops nested in ``op``; True if it converged."""
    return apply_patterns_greedily(
        op,
        all_patterns(top_op_classes(), fold=fold),
        max_iterations=max_iterations,
        top_down=True,
        stats=stats,
    )


@register_pass
class TopCanonicalize(Pass):
    name = "top-canonicalize"
    summary = "Fuse, simplify and fold top ops (BN/Relu into Conv, GELU, LayerNorm, SiLU, Attention, ...)"
    display_name = "TopCanonicalizePass"

    max_iterations = Option(int, 10, "Max. iterations of the greedy driver")
    fold = Option(bool, True, "Fold ops whose operands are constants into top.Weight")

    num_rewrites = Statistic("num-rewrites", "Number of pattern rewrites")

    def run_on_operation(self, op: Operation) -> Any:
        stats: dict[str, int] = {}
        if not canonicalize_top(op, fold=self.fold, max_iterations=self.max_iterations, stats=stats):
            op.emit_warning(f"top-canonicalize did not converge after {self.max_iterations} iterations")
        self.num_rewrites += stats.get("rewrites", 0)

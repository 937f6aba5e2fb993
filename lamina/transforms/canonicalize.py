"""``canonicalize``: every op's canonicalization patterns plus folding, applied greedily."""

from __future__ import annotations

from typing import Any

from lamina.ir.core import Operation
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.rewrite.greedy import GreedyRewriteDriver
from lamina.rewrite.pattern import FrozenPatternSet, RewritePattern


def collect_canonicalization_patterns(op_classes: Any) -> list[RewritePattern]:
    """The canonicalization patterns of ``op_classes`` (each class once)."""
    out: list[RewritePattern] = []
    seen: set[type] = set()
    for cls in op_classes:
        if cls in seen:
            continue
        seen.add(cls)
        getter = getattr(cls, "get_canonicalization_patterns", None)
        if getter is None:
            continue
        for p in getter() or ():
            out.append(p() if isinstance(p, type) else p)
    return out


@register_pass
class Canonicalizer(Pass):
    name = "canonicalize"
    summary = "Canonicalize operations"

    max_iterations = Option(int, 10, "Max. iterations between applying patterns / simplifying regions")
    max_num_rewrites = Option(int, -1, "Max. number of pattern rewrites within an iteration")
    region_simplify = Option(
        str,
        "normal",
        "Perform control flow optimizations to the region tree",
        choices=("disabled", "normal", "aggressive", "true", "false"),
    )
    top_down = Option(bool, True, "Seed the worklist in general top-down order")
    test_convergence = Option(bool, False, "Test only: Fail pass on non-convergence to detect cyclic pattern")
    disable_patterns = Option(
        list[str], [], "Labels of patterns that should be filtered out during application"
    )
    enable_patterns = Option(
        list[str],
        [],
        "Labels of patterns that should be used during application, all other patterns are filtered out",
    )

    num_rewrites = Statistic("num-rewrites", "Number of pattern rewrites and folds")

    def _patterns(self, op: Operation) -> FrozenPatternSet:
        classes: dict[type, None] = {}
        if self.context is not None:
            for d in self.context.dialects.values():
                for cls in d.ops.values():
                    classes[cls] = None
        for o in op.walk_ops():
            classes.setdefault(type(o), None)
        pats = collect_canonicalization_patterns(classes)
        if self.enable_patterns:
            keep = set(self.enable_patterns)
            pats = [p for p in pats if _label(p) in keep]
        if self.disable_patterns:
            drop = set(self.disable_patterns)
            pats = [p for p in pats if _label(p) not in drop]
        return FrozenPatternSet(pats)

    def run_on_operation(self, op: Operation) -> None:
        driver = GreedyRewriteDriver(
            self._patterns(op),
            max_iterations=self.max_iterations,
            max_rewrites=self.max_num_rewrites,
            fold=True,
            region_simplify=self.region_simplify not in ("disabled", "false"),
            top_down=self.top_down,
        )
        converged = driver.simplify(op)
        self.num_rewrites += driver.stats["rewrites"] + driver.stats["folds"]
        if not converged:
            msg = f"greedy pattern rewriter failed to converge after {self.max_iterations} iterations"
            if self.test_convergence:
                op.emit_error(f"canonicalizer failed to converge: {msg}")
                self.signal_failure()
            else:
                op.emit_warning(f"canonicalization is best effort: {msg}")


def _label(p: RewritePattern) -> str:
    return getattr(p, "debug_name", type(p).__name__)

"""Pass instrumentation: IR printing, timing and statistics reports (MLIR's formats)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from lamina.ir.core import Operation
    from lamina.passes.manager import OpPassManager
    from lamina.passes.pass_ import Pass

RULE = "===" + "-" * 73 + "==="


def _banner(title: str) -> str:
    return f"{RULE}\n{title:^79}".rstrip() + f"\n{RULE}\n"


def print_ir(op: Operation, generic: bool = False) -> str:
    from lamina.ir.printer import print_operation

    return print_operation(op, generic=generic)


class IRPrinting:
    """Configuration of ``--mlir-print-ir-*``."""

    __slots__ = (
        "after",
        "after_all",
        "after_change",
        "after_failure",
        "before",
        "before_all",
        "generic",
        "module_scope",
        "stream",
    )

    def __init__(
        self,
        before: list[str] | None = None,
        after: list[str] | None = None,
        before_all: bool = False,
        after_all: bool = False,
        after_change: bool = False,
        after_failure: bool = False,
        stream: TextIO | None = None,
        generic: bool = False,
        module_scope: bool = False,
    ) -> None:
        self.before = set(before or ())
        self.after = set(after or ())
        self.before_all = before_all
        self.after_all = after_all
        self.after_change = after_change
        self.after_failure = after_failure
        self.stream = stream
        self.generic = generic
        self.module_scope = module_scope

    def _out(self) -> TextIO:
        return self.stream if self.stream is not None else sys.stderr

    def wants_before(self, p: Pass) -> bool:
        return self.before_all or p.name in self.before

    def wants_after(self, p: Pass) -> bool:
        return self.after_all or p.name in self.after

    def _target(self, op: Operation) -> Operation:
        if self.module_scope:
            while True:
                parent = op.parent_op()
                if parent is None:
                    break
                op = parent
        return op

    def fingerprint(self, op: Operation) -> str:
        return print_ir(self._target(op), generic=True)

    def dump(self, when: str, p: Pass, op: Operation) -> None:
        out = self._out()
        out.write(f"// -----// IR Dump {when} {p.display_name} ({p.name}) //----- //\n")
        out.write(print_ir(self._target(op), self.generic).rstrip("\n") + "\n\n")
        out.flush()


class TimingNode:
    """Accumulated wall time of one pass or nested pipeline in the pass-manager tree."""

    __slots__ = ("children", "name", "seconds")

    def __init__(self, name: str) -> None:
        self.name = name
        self.seconds = 0.0
        self.children: list[TimingNode] = []


def timing_report(
    entries: list[TimingNode], total: float | None = None, extra: list[tuple[str, float]] | None = None
) -> str:
    """MLIR's ``-mlir-timing`` report (wall time only). ``extra`` entries (``Parser``, ``Output``)
    are listed before the pass entries; ``total`` defaults to the sum of the top-level entries,
    otherwise the unaccounted time is reported as ``Rest``."""
    extra = list(extra or [])
    accounted = sum(s for _, s in extra) + sum(e.seconds for e in entries)
    if total is None or total < accounted:
        total = accounted
    rest = total - accounted
    lines = [_banner("... Execution time report ...").rstrip("\n")]
    lines.append(f"  Total Execution Time: {total:.4f} seconds")
    lines.append("")
    lines.append("  ----Wall Time----  ----Name----")

    def pct(s: float) -> float:
        return 100.0 * s / total if total > 0 else 0.0

    def row(name: str, s: float, depth: int) -> None:
        lines.append(f"  {s:8.4f} ({pct(s):5.1f}%)  {'  ' * depth}{name}")

    for name, s in extra:
        row(name, s, 0)

    def rec(node: TimingNode, depth: int) -> None:
        row(node.name, node.seconds, depth)
        for c in node.children:
            rec(c, depth + 1)

    for e in entries:
        rec(e, 0)
    if rest > 0 or extra:
        row("Rest", rest, 0)
    row("Total", total, 0)
    return "\n".join(lines) + "\n"


def statistics_report(pm: OpPassManager) -> str:
    """MLIR's ``-mlir-pass-statistics`` report (pipeline display). An item of a pipeline is a pass or
    a nested pass manager (told apart without importing :mod:`lamina.passes.manager`, which imports
    this module)."""
    from lamina.passes.pass_ import Pass

    lines = [_banner("... Pass statistics report ...").rstrip("\n")]

    def rec(mgr: OpPassManager, depth: int) -> None:
        for item in mgr.items:
            if not isinstance(item, Pass):
                lines.append(f"{'  ' * depth}'{item.anchor_name}' Pipeline")
                rec(item, depth + 1)
                continue
            lines.append(f"{'  ' * depth}{item.display_name}")
            stats: list[tuple[str, int, str]] = []
            declared = {s.name: s.description for s in item._statistics.values()}
            for k, v in item.statistics.items():
                stats.append((k, v, declared.get(k, "")))
            if not stats:
                continue
            width = max(len(str(v)) for _, v, _ in stats)
            for k, v, desc in stats:
                suffix = f" - {desc}" if desc else ""
                lines.append(f"{'  ' * (depth + 1)}(S) {v:>{width}} {k}{suffix}")

    rec(pm, 0)
    return "\n".join(lines) + "\n"

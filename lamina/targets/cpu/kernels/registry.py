"""The registry of the CPU target's kernel templates: :data:`TEMPLATES`, :func:`select` (the matching
template of highest priority), :func:`plan_kernel` (the best template whose ``plan`` succeeds) and
:func:`code_key` (what a kernel's code depends on, before it is emitted: :mod:`.codekey`).
See :mod:`lamina.targets.cpu.kernels`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .abi import Isa, KernelPlan, Template
from .codekey import code_key

__all__ = ["TEMPLATES", "Choice", "by_name", "candidates", "code_key", "plan_kernel", "register", "select"]

#: every registered template (any order: :func:`select` sorts by priority)
TEMPLATES: list[Template] = []
_PACKAGE = __name__.rsplit(".", 1)[0]
_seen_modules: set[str] = set()
_seen_count = -1


def _sync() -> None:
    """Register the ``TEMPLATES`` of every imported module of the kernels package not seen yet."""
    import sys

    global _seen_count
    if len(sys.modules) == _seen_count:
        return
    _seen_count = len(sys.modules)
    for name, m in list(sys.modules.items()):
        if name.startswith(_PACKAGE + ".") and name not in _seen_modules and m is not None:
            ts = getattr(m, "TEMPLATES", None)
            if isinstance(ts, list) and m is not sys.modules[__name__]:
                _seen_modules.add(name)
                for t in ts:
                    register(t)


def register(t: Template) -> Template:
    """Add ``t`` to :data:`TEMPLATES` (a second template of the same name replaces the first)."""
    TEMPLATES[:] = [x for x in TEMPLATES if x.name != t.name]
    TEMPLATES.append(t)
    return t


def candidates(op: Any, isa: Isa) -> list[Template]:
    """The templates matching ``op`` for ``isa``, best first (priority, then registration order).
    A template whose ``matches`` raises does not match."""
    _sync()
    out = []
    for i, t in enumerate(TEMPLATES):
        try:
            ok = t.matches(op, isa)
        except Exception:  # a template's bug must not stop the model compiling
            ok = False
        if ok:
            out.append((-t.priority, i, t))
    return [t for _, _, t in sorted(out, key=lambda x: (x[0], x[1]))]


def select(op: Any, isa: Isa) -> Template:
    """The highest-priority template matching ``op`` (the reference template matches any op)."""
    c = candidates(op, isa)
    assert c, f"no template matches {op.name} (the reference template matches every op)"
    return c[0]


def by_name(name: str) -> Template:
    _sync()
    for t in TEMPLATES:
        if t.name == name:
            return t
    raise KeyError(name)


@dataclass
class Choice:
    """The template that planned an op, its plan, and the better templates skipped (name, why)."""

    template: Template
    plan: KernelPlan
    skipped: list[tuple[str, str]] = field(default_factory=list)


def plan_kernel(
    op: Any, symbol: str, isa: Isa, only: str | None = None, among: list[Template] | None = None
) -> Choice:
    """Plan ``op`` with the best template whose ``plan`` succeeds (``only``: that template first;
    ``among``: these candidates, best first, instead of every matching one)."""
    cands = list(among) if among is not None else candidates(op, isa)
    if only is not None:
        cands = sorted(cands, key=lambda t: t.name != only)
    skipped: list[tuple[str, str]] = []
    for t in cands:
        try:
            return Choice(t, t.plan(op, symbol, isa), skipped)
        except Exception as e:
            skipped.append((t.name, f"{type(e).__name__}: {e}"))
    raise AssertionError(f"no template planned {op.name}: {skipped}")

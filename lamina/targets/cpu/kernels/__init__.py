"""The CPU target's kernel templates (:mod:`.abi`: the contract) and how one is chosen for an op.

:data:`TEMPLATES` lists every template; a module of templates appends its instances on import (the
fast templates register with one import line below). :func:`select` returns the matching template
of the highest priority; the generic ones (priority 0, :mod:`.generic`, :mod:`.generic_conv`) run
every op they match in all modes, and the reference template (priority -100, :mod:`.generic_ref`)
matches every op: it calls the op's ``execute`` from the compiled model. :func:`plan_kernel` plans
the op with the selected template, and when a template raises while planning, skips it for the next
one (reported in :attr:`Choice.skipped`) — no op fails to compile because a template lacks a case.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .abi import Isa, KernelPlan, Template

__all__ = [
    "TEMPLATES",
    "Choice",
    "Isa",
    "KernelPlan",
    "Template",
    "by_name",
    "candidates",
    "plan_kernel",
    "select",
]

#: every registered template (any order: :func:`select` sorts by priority)
TEMPLATES: list[Template] = []


def register(t: Template) -> Template:
    """Add ``t`` to :data:`TEMPLATES` (a second template of the same name replaces the first)."""
    TEMPLATES[:] = [x for x in TEMPLATES if x.name != t.name]
    TEMPLATES.append(t)
    return t


def candidates(op: Any, isa: Isa) -> list[Template]:
    """The templates matching ``op`` for ``isa``, best first (priority, then registration order).
    A template whose ``matches`` raises does not match."""
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


def plan_kernel(op: Any, symbol: str, isa: Isa, only: str | None = None) -> Choice:
    """Plan ``op`` with the best template whose ``plan`` succeeds (``only``: that template first)."""
    cands = candidates(op, isa)
    if only is not None:
        cands = sorted(cands, key=lambda t: t.name != only)
    skipped: list[tuple[str, str]] = []
    for t in cands:
        try:
            return Choice(t, t.plan(op, symbol, isa), skipped)
        except Exception as e:
            skipped.append((t.name, f"{type(e).__name__}: {e}"))
    raise AssertionError(f"no template planned {op.name}: {skipped}")


# The templates. Generic ones first; fast templates add one import line each below.
from . import (
    generic,  # noqa: F401
    generic_conv,  # noqa: F401
    generic_ref,  # noqa: F401
)

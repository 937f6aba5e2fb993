"""The pass registry: pipeline names to pass classes (filled at import time by ``@register_pass``)."""

from __future__ import annotations

import importlib
from typing import TypeVar

from lamina.passes.pass_ import Pass

P = TypeVar("P", bound=type[Pass])

_PASSES: dict[str, type[Pass]] = {}
#: Modules that register passes when imported (loaded on the first lookup).
_PASS_MODULES: list[str] = ["lamina.transforms"]
_loaded = False


def register_pass(cls: P) -> P:
    """Register a pass class under its ``name`` (usable as a decorator)."""
    if not cls.name:
        raise ValueError(f"pass class {cls.__name__} has no 'name'")
    _PASSES[cls.name] = cls
    return cls


def register_pass_module(module: str) -> None:
    """Say that importing ``module`` registers passes (imported lazily on the first lookup)."""
    global _loaded
    if module not in _PASS_MODULES:
        _PASS_MODULES.append(module)
        _loaded = False


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for m in list(_PASS_MODULES):
        try:
            importlib.import_module(m)
        except ModuleNotFoundError as e:  # a module still being written
            if e.name != m:
                raise


def get_pass(name: str) -> type[Pass] | None:
    if name not in _PASSES:
        _load()
    return _PASSES.get(name)


def list_passes() -> list[tuple[str, str, list[tuple[str, str, str]]]]:
    """``(name, summary, [(option, type, help), ...])`` of every registered pass, sorted by name."""
    _load()
    out = []
    for name in sorted(_PASSES):
        cls = _PASSES[name]
        opts = [(o.name, o.type_name, o.help) for o in sorted(cls.options(), key=lambda o: o.name)]
        out.append((name, cls.summary, opts))
    return out


def format_pass_list() -> str:
    """The ``--list-passes`` text."""
    lines = ["Available passes:"]
    for name, summary, opts in list_passes():
        lines.append(f"  --{name:<30} - {summary}")
        for oname, otype, ohelp in opts:
            lines.append(f"      --{oname}=<{otype}>".ljust(38) + f" - {ohelp}")
    return "\n".join(lines)

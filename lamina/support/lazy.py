"""Importing a heavy module on first use, so that a command that never needs it never pays for it
(``lamina-opt`` on a module without dense data never imports numpy)."""

from __future__ import annotations

import importlib
from typing import Any


def lazy_import(name: str, namespace: dict[str, Any], alias: str) -> Any:
    """A stand-in for ``import <name> as <alias>`` in a module whose globals are ``namespace``: the
    first attribute read imports the module and rebinds ``alias`` to it, so later reads cost nothing."""

    class _Lazy:
        __slots__ = ()

        def __getattr__(self, attr: str) -> Any:
            mod = importlib.import_module(name)
            namespace[alias] = mod
            return getattr(mod, attr)

        def __repr__(self) -> str:
            return f"<lazy module {name!r}>"

    return _Lazy()

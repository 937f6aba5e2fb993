"""Dialects, the dialect registry, and the Context.

A :class:`Dialect` groups ops, types and attributes under a namespace and may provide parsers for
its types/attributes and a constant materializer. Dialects register *themselves* when their module
is imported; :func:`register_dialect_module` records where to import a dialect from, so a Context
can load it on demand (when the parser meets ``arith.addi``, say) without the core importing the
upper floors of the house.

A :class:`Context` holds the loaded dialects, whether unregistered ops are allowed, the diagnostic
engine and the resource (weight blob) manager. ``with ctx:`` makes its engine the active one.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from lamina.ir.attributes import ResourceManager
from lamina.ir.diagnostics import DiagnosticEngine, Handler, print_to_stderr, using_engine

if TYPE_CHECKING:
    from lamina.ir.core import Operation


class Dialect:
    """A namespace of ops, types and attributes."""

    def __init__(
        self,
        name: str,
        ops: Iterable[type[Operation]] = (),
        types: Iterable[type] = (),
        attributes: Iterable[type] = (),
        materialize_constant: Callable[..., Any] | None = None,
        description: str = "",
    ) -> None:
        self.name = name
        self.ops: dict[str, type[Operation]] = {}
        self.types: dict[str, type] = {}
        self.attributes: dict[str, type] = {}
        self.materialize_constant = materialize_constant
        self.description = description
        for op in ops:
            self.add_op(op)
        for t in types:
            self.types[t.mnemonic] = t  # type: ignore[attr-defined]
        for a in attributes:
            self.attributes[a.mnemonic] = a  # type: ignore[attr-defined]

    def add_op(self, op: type[Operation]) -> None:
        if not op.name.startswith(self.name + "."):
            raise ValueError(f"op '{op.name}' does not belong to dialect '{self.name}'")
        self.ops[op.name] = op

    def __repr__(self) -> str:
        return f"<Dialect {self.name}: {len(self.ops)} ops>"


# ---- registries (the only global mutable state: filled at import time) ---------------------------

_DIALECTS: dict[str, Dialect] = {}
_DIALECT_MODULES: dict[str, str] = {"builtin": "lamina.ir.builtin"}


def register_dialect(dialect: Dialect) -> Dialect:
    _DIALECTS[dialect.name] = dialect
    return dialect


def register_dialect_module(name: str, module: str) -> None:
    """Say where dialect ``name`` is defined, so that contexts can load it lazily."""
    _DIALECT_MODULES[name] = module


def known_dialects() -> list[str]:
    return sorted(set(_DIALECT_MODULES) | set(_DIALECTS))


def lookup_dialect(name: str) -> Dialect | None:
    d = _DIALECTS.get(name)
    if d is None and name in _DIALECT_MODULES:
        importlib.import_module(_DIALECT_MODULES[name])
        d = _DIALECTS.get(name)
    return d


class Context:
    """Loaded dialects, diagnostics and resources for one compilation."""

    __slots__ = ("dialects", "allow_unregistered_dialects", "diagnostics", "resources", "_ops", "_token")

    def __init__(
        self,
        allow_unregistered_dialects: bool = False,
        load_all: bool = True,
        handler: Handler | None = print_to_stderr,
    ) -> None:
        """``load_all=False`` loads a known dialect only on first use by name (an op, type or
        attribute of it met by the parser): start-up stays fast for tools like ``lamina-opt``."""
        self.dialects: dict[str, Dialect] = {}
        self.allow_unregistered_dialects = allow_unregistered_dialects
        self.diagnostics = DiagnosticEngine(handler)
        self.resources = ResourceManager()
        self._ops: dict[str, type[Operation] | None] = {}
        self._token: list[Any] = []
        self.load_dialect("builtin")
        if load_all:
            self.load_all_available()

    def load_dialect(self, name: str | Dialect) -> Dialect:
        d = name if isinstance(name, Dialect) else lookup_dialect(name)
        if d is None:
            raise KeyError(f"unknown dialect '{name}'")
        self.dialects[d.name] = d
        self._ops.clear()
        return d

    def load_all_available(self) -> None:
        """Load every dialect that has been registered or whose module is known."""
        for name in known_dialects():
            if name not in self.dialects:
                self.load_dialect(name)

    def get_dialect(self, name: str) -> Dialect | None:
        """The dialect ``name``, loading it on first use if its module is known."""
        d = self.dialects.get(name)
        if d is None and (name in _DIALECT_MODULES or name in _DIALECTS):
            d = self.load_dialect(name)
        return d

    def get_op_class(self, name: str) -> type[Operation] | None:
        """The class of a registered op, or None if its dialect is not loaded/has no such op."""
        try:
            return self._ops[name]
        except KeyError:
            pass
        dot = name.find(".")
        d = self.get_dialect(name[:dot]) if dot > 0 else None
        cls = d.ops.get(name) if d is not None else None
        self._ops[name] = cls
        return cls

    def is_registered_dialect(self, name: str) -> bool:
        return self.get_dialect(name) is not None

    # ``with ctx:`` makes this context's diagnostic engine the active one.
    def __enter__(self) -> Context:
        cm = using_engine(self.diagnostics)
        cm.__enter__()
        self._token.append(cm)
        return self

    def __exit__(self, *exc: Any) -> None:
        self._token.pop().__exit__(*exc)

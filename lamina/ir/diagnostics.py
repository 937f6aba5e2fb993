"""Diagnostics: errors, warnings and notes with locations, printed as MLIR prints them.

Diagnostics are *collected* by a :class:`DiagnosticEngine` (each :class:`~lamina.ir.context.Context`
owns one); handlers decide what happens to them (print to stderr, collect for a test, check against
``expected-error`` comments). Code that finds a problem calls :func:`emit_error` (or
``op.emit_error``), which reports to the engine of the active context.

Op verifiers and other checkers raise :class:`VerifyError`; the verifier turns it into a located
diagnostic. When no engine is active, emitting an error raises :class:`DiagnosticError` so that a
library caller never loses an error silently.

A diagnostic about an op (``op.emit_error``, the verifier) is located where the op was written in
the ``.mlir`` it was parsed from when its own ``loc(...)`` names somewhere else (an ONNX node), with
a note at that location (:func:`emit_at_op`, :class:`SourceText`).
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import sys
from bisect import bisect_right
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TypeAlias

from lamina.ir.location import (
    CallSiteLoc,
    FileLineColLoc,
    Location,
    UnknownLoc,
)
from lamina.ir.naming import location_name, location_names

if TYPE_CHECKING:
    from lamina.ir.core import Operation

ERROR = "error"
WARNING = "warning"
NOTE = "note"
REMARK = "remark"


class Diagnostic:
    """One diagnostic with optional attached notes."""

    __slots__ = ("severity", "location", "message", "notes", "source_line")

    def __init__(self, severity: str, location: Location | None, message: str) -> None:
        self.severity = severity
        self.location = location if location is not None else UnknownLoc()
        self.message = message
        self.notes: list[Diagnostic] = []
        self.source_line: str | None = None  # filled by handlers that know the source text

    def attach_note(self, message: str, location: Location | None = None) -> Diagnostic:
        note = Diagnostic(NOTE, location if location is not None else self.location, message)
        self.notes.append(note)
        return note

    def __str__(self) -> str:
        lines = [f"{format_location(self.location)}: {self.severity}: {self.message}"]
        if self.source_line is not None:
            flc = self.location.file_line_col()
            if flc is not None and flc.col >= 1:
                lines.append(self.source_line)
                lines.append(" " * (flc.col - 1) + "^")
        for n in self.notes:
            lines.append(str(n))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<Diagnostic {self}>"


def format_location(loc: Location) -> str:
    """How a location prefixes a diagnostic: ``file:line:col`` when there is one, else a name."""
    flc = loc.file_line_col()
    if flc is not None:
        return f"{flc.filename}:{flc.line}:{flc.col}"
    name = location_name(loc)
    if name is not None:
        return f'"{name}"'
    if isinstance(loc, CallSiteLoc):
        return format_location(loc.callee)
    if isinstance(loc, FileLineColLoc):  # pragma: no cover - handled above
        return f"{loc.filename}:{loc.line}:{loc.col}"
    return "<unknown>:0"


class DiagnosticError(Exception):
    """Raised when an error is emitted and no diagnostic engine is active to collect it."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(str(diagnostic))
        self.diagnostic = diagnostic


class VerifyError(Exception):
    """Raised by op verifiers; the verifier reports it as an error located at the op."""

    def __init__(self, message: str, notes: list[tuple[str, Location | None]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.notes = notes or []


Handler = Callable[[Diagnostic], None]


def print_to_stderr(diag: Diagnostic) -> None:
    print(str(diag), file=sys.stderr)


class DiagnosticEngine:
    """Routes diagnostics to the innermost handler and counts errors."""

    __slots__ = ("_handlers", "error_count")

    def __init__(self, handler: Handler | None = print_to_stderr) -> None:
        self._handlers: list[Handler] = [handler] if handler else []
        self.error_count = 0

    def emit(self, diag: Diagnostic) -> Diagnostic:
        if diag.severity == ERROR:
            self.error_count += 1
        if self._handlers:
            self._handlers[-1](diag)
        elif diag.severity == ERROR:
            raise DiagnosticError(diag)
        return diag

    def push_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def pop_handler(self) -> None:
        self._handlers.pop()

    @contextlib.contextmanager
    def handler(self, handler: Handler) -> Iterator[None]:
        self.push_handler(handler)
        try:
            yield
        finally:
            self.pop_handler()

    @contextlib.contextmanager
    def capture(self) -> Iterator[list[Diagnostic]]:
        """Collect every diagnostic emitted inside the block into a list (for tests)."""
        got: list[Diagnostic] = []
        with self.handler(got.append):
            yield got


# The engine of the active context (see Context.__enter__). Not a global registry of state: it is
# scoped by ``with context:`` and restored on exit.
_active_engine: contextvars.ContextVar[DiagnosticEngine | None] = contextvars.ContextVar(
    "lamina_diagnostic_engine", default=None
)


def active_engine() -> DiagnosticEngine | None:
    return _active_engine.get()


@contextlib.contextmanager
def using_engine(engine: DiagnosticEngine) -> Iterator[DiagnosticEngine]:
    token = _active_engine.set(engine)
    try:
        yield engine
    finally:
        _active_engine.reset(token)


Notes: TypeAlias = "list[tuple[str, Location | None]] | None"


def emit(severity: str, location: Location | None, message: str, notes: Notes = None) -> Diagnostic:
    """Report a diagnostic (with its notes, attached before any handler sees it)."""
    diag = Diagnostic(severity, location, message)
    for text, loc in notes or ():
        diag.attach_note(text, loc)
    return _dispatch(diag)


def _dispatch(diag: Diagnostic) -> Diagnostic:
    severity = diag.severity
    engine = _active_engine.get()
    if engine is None:
        if severity == ERROR:
            raise DiagnosticError(diag)
        print_to_stderr(diag)
        return diag
    return engine.emit(diag)


class SourceText:
    """The text a module was parsed from, to report ops at the line the user wrote them on.

    The parser records, on each op written with an explicit ``loc(...)``, the offset of the op in
    the text (``Operation._parsed_at``), and on the module it returns this object
    (``Operation._source``); positions are turned into ``file:line:col`` only when a diagnostic
    needs one. A ``{-# dialect_resources #-}`` section (weights as hex) is not kept.
    """

    __slots__ = ("filename", "text", "line_offset", "_newlines")

    def __init__(self, filename: str, text: str, line_offset: int = 0) -> None:
        cut = text.find("\n{-#")
        self.filename = filename
        self.text = text if cut < 0 else text[: cut + 1]
        self.line_offset = line_offset
        self._newlines: list[int] | None = None

    def position(self, pos: int) -> tuple[FileLineColLoc, str] | None:
        """``file:line:col`` of an offset (columns count UTF-8 bytes, as MLIR's) and its line."""
        s = self.text
        if not 0 <= pos < len(s):
            return None
        if self._newlines is None:
            self._newlines = [m.start() for m in re.finditer("\n", s)]
        nl = self._newlines
        i = bisect_right(nl, pos - 1)
        start = nl[i - 1] + 1 if i else 0
        end = nl[i] if i < len(nl) else len(s)
        col = len(s[start:pos].encode("utf-8")) + 1
        return FileLineColLoc(self.filename, i + 1 + self.line_offset, col), s[start:end]


def parse_position(op: Operation) -> tuple[FileLineColLoc, str] | None:
    """Where in the parsed text ``op`` was written (and that line), if its location says otherwise.

    None for ops built in memory, ops whose location already is that position, and ops no longer
    inside the module they were parsed into.
    """
    pos = getattr(op, "_parsed_at", None)
    if pos is None:
        return None
    root = op
    while (
        root.parent is not None and root.parent.parent is not None and root.parent.parent.parent is not None
    ):
        root = root.parent.parent.parent
    source = getattr(root, "_source", None)
    return source.position(pos) if source is not None else None


def diagnostic_location(op: Operation) -> Location:
    """Where to report something about ``op``: the line it was parsed from, else its location."""
    where = parse_position(op)
    return where[0] if where is not None else op.location


def _origin(loc: Location) -> str:
    """The note naming where an op comes from (its own location, e.g. an ONNX node)."""
    names = location_names(loc)
    if names:
        return "the op comes from " + ", ".join(f"'{n}'" for n in names)
    return "the op comes from here"


def emit_at_op(severity: str, op: Operation, message: str, notes: Notes = None) -> Diagnostic:
    """Report a diagnostic about ``op``.

    An op parsed from a ``.mlir`` whose ``loc(...)`` names somewhere else (a module written by
    ``model_transform`` locates each op at its ONNX node, ``loc("conv1"("m.onnx":0:0))``) is
    reported at the line and column of the file the user gave, with that line and a caret, and a
    note at the op's own location names where it comes from. Other ops are reported at their
    location, as MLIR does.
    """
    where = parse_position(op)
    if where is None or where[0] is op.location:
        return emit(severity, op.location, message, notes)
    diag = Diagnostic(severity, where[0], message)
    diag.source_line = where[1]
    if not isinstance(op.location, UnknownLoc):
        diag.attach_note(_origin(op.location), op.location)
    for text, loc in notes or ():
        diag.attach_note(text, loc)
    return _dispatch(diag)


def emit_error(location: Location | None, message: str, notes: Notes = None) -> Diagnostic:
    return emit(ERROR, location, message, notes)


def emit_warning(location: Location | None, message: str, notes: Notes = None) -> Diagnostic:
    return emit(WARNING, location, message, notes)


def emit_remark(location: Location | None, message: str) -> Diagnostic:
    return emit(REMARK, location, message)


def op_error_message(op: Operation, message: str) -> str:
    """MLIR's prefix for op errors: ``'arith.addi' op <message>``."""
    return f"'{op.name}' op {message}"

"""Diagnostic handlers that know the source text (MLIR's SourceMgrDiagnostic*Handler).

* :class:`SourceDiagnosticPrinter` prints each diagnostic as MLIR does: ``file:line:col: error: msg``,
  then the source line and a caret under the column.
* :class:`DiagnosticVerifier` implements ``--verify-diagnostics``: it reads ``// expected-error
  @+1 {{...}}`` (also ``-warning``, ``-note``, ``-remark``; ``@-N``, ``@+N``, ``@above``,
  ``@below``, ``@unknown``) from the source, checks that each is produced (the message must contain
  the text) and that nothing else is.
"""

from __future__ import annotations

import re
import sys
from typing import TextIO

from lamina.ir.diagnostics import Diagnostic, format_location


class SourceBuffer:
    """One source text with its name and the line number of its first line."""

    __slots__ = ("name", "lines", "first_line")

    def __init__(self, name: str, text: str, first_line: int = 1) -> None:
        self.name = name
        self.lines = text.split("\n")
        self.first_line = first_line

    def line(self, lineno: int) -> str | None:
        i = lineno - self.first_line
        if 0 <= i < len(self.lines):
            return self.lines[i]
        return None


def render(diag: Diagnostic, sources: dict[str, SourceBuffer], caret_len: int = 1) -> str:
    """The text MLIR prints for ``diag`` and its notes (source line and caret when known)."""
    out = [f"{format_location(diag.location)}: {diag.severity}: {diag.message}"]
    flc = diag.location.file_line_col()
    src = diag.source_line
    if src is None and flc is not None and flc.filename in sources:
        src = sources[flc.filename].line(flc.line)
    if src is not None and flc is not None and flc.col >= 1:
        out.append(src)
        out.append(" " * (flc.col - 1) + "^" + "~" * max(0, caret_len - 1))
    for note in diag.notes:
        out.append(render(note, sources))
    return "\n".join(out)


class SourceDiagnosticPrinter:
    """A handler printing diagnostics with source context to a stream."""

    def __init__(self, sources: dict[str, SourceBuffer] | None = None, stream: TextIO | None = None) -> None:
        self.sources = sources if sources is not None else {}
        self.stream = stream

    def add_source(self, buf: SourceBuffer) -> None:
        self.sources[buf.name] = buf

    def __call__(self, diag: Diagnostic) -> None:
        print(render(diag, self.sources), file=self.stream or sys.stderr)


_EXPECTED = re.compile(
    r"expected-(error|warning|note|remark)(-re)?\s*(@(?:[+-]\d+|above|below|unknown))?\s*\{\{(.*?)\}\}"
)


class _Expected:
    __slots__ = ("severity", "line", "text", "regex", "found", "src_line", "col", "length", "unknown")

    def __init__(
        self,
        severity: str,
        line: int,
        text: str,
        regex: bool,
        src_line: int,
        col: int,
        length: int,
        unknown: bool,
    ) -> None:
        self.severity = severity
        self.line = line
        self.text = text
        self.regex = re.compile(_mlir_regex(text)) if regex else None
        self.found = False
        self.src_line = src_line
        self.col = col
        self.length = length
        self.unknown = unknown

    def matches(self, message: str) -> bool:
        if self.regex is not None:
            return self.regex.search(message) is not None
        return self.text in message


def _mlir_regex(text: str) -> str:
    """``expected-error-re``: ``{{...}}`` inside the text are regexes, the rest is literal."""
    parts = re.split(r"(\{\{.*?\}\})", text)
    return "".join(p[2:-2] if p.startswith("{{") else re.escape(p) for p in parts)


class DiagnosticVerifier:
    """Collects diagnostics and checks them against ``expected-*`` comments in one buffer."""

    def __init__(self, buf: SourceBuffer, stream: TextIO | None = None) -> None:
        self.buf = buf
        self.stream = stream
        self.expected: list[_Expected] = []
        self.unexpected: list[Diagnostic] = []
        self.errors: list[str] = []
        for i, line in enumerate(buf.lines):
            lineno = buf.first_line + i
            for m in _EXPECTED.finditer(line):
                sev, is_re, where, text = m.groups()
                unknown = False
                target = lineno
                if where:
                    w = where[1:]
                    if w == "unknown":
                        unknown = True
                    elif w == "above":
                        target = lineno - 1
                    elif w == "below":
                        target = lineno + 1
                    else:
                        target = lineno + int(w)
                self.expected.append(
                    _Expected(sev, target, text, bool(is_re), lineno, m.start() + 1, len(text), unknown)
                )

    def __call__(self, diag: Diagnostic) -> None:
        self._check(diag)
        for n in diag.notes:
            self._check(n)

    def _check(self, diag: Diagnostic) -> None:
        flc = diag.location.file_line_col()
        in_buf = flc is not None and flc.filename == self.buf.name
        for e in self.expected:
            if e.found or e.severity != diag.severity:
                continue
            if e.unknown:
                if in_buf:
                    continue
            elif not in_buf or flc is None or flc.line != e.line:
                continue
            if e.matches(diag.message):
                e.found = True
                return
        self.unexpected.append(diag)

    def finish(self) -> bool:
        """Report mismatches (as MLIR words them); True if everything matched."""
        ok = True
        sources = {self.buf.name: self.buf}
        for d in self.unexpected:
            ok = False
            shown = Diagnostic("error", d.location, f"unexpected {d.severity}: {d.message}")
            print(render(shown, sources), file=self.stream or sys.stderr)
        for e in self.expected:
            if not e.found:
                ok = False
                from lamina.ir.location import FileLineColLoc

                d = Diagnostic(
                    "error",
                    FileLineColLoc(self.buf.name, e.src_line, e.col),
                    f'expected {e.severity} "{e.text}" was not produced',
                )
                print(render(d, sources, caret_len=e.length), file=self.stream or sys.stderr)
        return ok

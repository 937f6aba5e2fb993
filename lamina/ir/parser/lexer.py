"""The parser's lexical layer: the text, positions and diagnostics, and tokens read in place.

MLIR's ``Lexer`` and ``Parser`` base: there are no token objects, the parser works directly on the
string with a position index and precompiled regular expressions. :class:`Lexer` also holds the
state the other layers share (caches, aliases, SSA scopes), so each layer (types, attributes,
locations, ops) is a subclass adding the methods of its part of the grammar.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any, Protocol, cast

from lamina.ir.attributes import Attribute, StringAttr
from lamina.ir.context import Context
from lamina.ir.diagnostics import Diagnostic
from lamina.ir.location import FileLineColLoc, Location
from lamina.ir.types import FloatType, IndexType, IntegerType, NoneType, ShapedType, Type

MAX_DEPTH = 120


class _AlwaysMatches(Protocol):
    """A pattern that matches everywhere (possibly the empty string): ``match`` never gives None."""

    def match(self, string: str, pos: int = 0, endpos: int = ...) -> re.Match[str]: ...


#: Whitespace and comments (maybe none).
_WS = cast(_AlwaysMatches, re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*"))
_DIALECT_NS = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_DIALECT_MNEMONIC = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SIMPLE_STRING = re.compile(r'"([^"\\\n]*)"')
_INT = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+)")
_NUMBER = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?)?)")
_ALIAS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT_TYPE = re.compile(r"(s|u)?i([0-9]+)\Z")

_SIMPLE_TYPES: dict[str, Type] = {"index": IndexType(), "none": NoneType()}
for _n in FloatType.NAMES:
    _SIMPLE_TYPES[_n] = FloatType(_n)


def _file_line_col(
    filename: str,
    line: int,
    col: int,
    _table: dict = FileLineColLoc._instances,
    _new: Any = object.__new__,
    _set: Any = object.__setattr__,
) -> FileLineColLoc:
    """``FileLineColLoc(filename, line, col)`` for the parser's int line/col: the same uniqued
    object, built without the generic constructor's normalisation (every op of a file gets one,
    so this is on the hot path)."""
    key = (filename, line, col)
    loc = _table.get(key)
    if loc is None:
        loc = _new(FileLineColLoc)
        _set(loc, "filename", filename)
        _set(loc, "line", line)
        _set(loc, "col", col)
        _table[key] = loc
    return loc


def _string_attr(
    value: str,
    _table: dict = StringAttr._instances,
    _new: Any = object.__new__,
    _set: Any = object.__setattr__,
) -> StringAttr:
    """``StringAttr(value)`` (untyped), built like :func:`_file_line_col` (op names, tensor names:
    most ops of a model carry a string of their own)."""
    key = (value, None)
    a = _table.get(key)
    if a is None:
        a = _new(StringAttr)
        _set(a, "value", value)
        _set(a, "type", None)
        _table[key] = a
    return a


def _int(text: str) -> int:
    """The value of an integer literal (decimal or ``0x`` hex, maybe negative) of any length.

    ``int()`` refuses decimal strings longer than ``sys.get_int_max_str_digits()`` (4300); MLIR
    accepts literals as wide as their type (up to i16777215), so long ones are converted in halves."""
    if "x" in text:
        return int(text, 16)
    if len(text) <= 4000:
        return int(text)
    neg = text.startswith("-")
    digits = text[1:] if neg else text
    half = len(digits) // 2
    v = _int(digits[:-half]) * 10**half + _int(digits[-half:])
    return -v if neg else v


def _int_fits(v: int, t: Type) -> bool:
    """Whether literal ``v`` is in range of integer or index type ``t`` (signless integers take
    signed or unsigned values, as in MLIR; index is 64 bits)."""
    w = t.width if isinstance(t, IntegerType) else 64
    sign = t.signedness if isinstance(t, IntegerType) else ""
    if sign == "u":
        return 0 <= v < (1 << w)
    if sign == "s":
        return -(1 << (w - 1)) <= v < (1 << (w - 1))
    return -(1 << (w - 1)) <= v < (1 << w) if w > 1 else v in (0, 1, -1)


class ParseError(Exception):
    """A located parse error (internal; reported as a diagnostic by :func:`parse_module`)."""

    def __init__(self, pos: int, message: str, notes: Sequence[tuple[int, str]] = ()) -> None:
        super().__init__(message)
        self.pos = pos
        self.message = message
        self.notes = list(notes)


def _unescape(body: str) -> str:
    if "\\" not in body:
        return body
    out = bytearray()
    i = 0
    n = len(body)
    while i < n:
        c = body[i]
        if c == "\\" and i + 1 < n:
            nx = body[i + 1]
            if nx in '\\"':
                out.append(ord(nx))
                i += 2
                continue
            if nx == "n":
                out.append(10)
                i += 2
                continue
            if nx == "t":
                out.append(9)
                i += 2
                continue
            h = body[i + 1 : i + 3]
            if len(h) == 2 and all(ch in "0123456789abcdefABCDEF" for ch in h):
                out.append(int(h, 16))
                i += 3
                continue
            raise ValueError("unknown escape in string literal")
        out.extend(c.encode("utf-8"))
        i += 1
    return out.decode("utf-8", errors="surrogateescape")


# --------------------------------------------------------------------------------------------
# The parser


class Lexer:
    """The text being parsed, the position in it, located errors and the lexical ``parse_*``
    helpers of MLIR's ``OpAsmParser`` (punctuation, keywords, strings, integers, floats)."""

    def __init__(self, text: str, ctx: Context, filename: str = "<stdin>", line_offset: int = 0) -> None:
        self.s = text
        self.n = len(text)
        self.pos = 0
        self.ctx = ctx
        self.filename = filename
        self.line_offset = line_offset
        self._nl: list[int] | None = None
        self._last_line = (0, 0)  # (a line's start, its 0-based number): ops come in order
        self._ascii = text.isascii()  # columns are then character offsets
        self.type_aliases: dict[str, Type] = {}
        self.attr_aliases: dict[str, Attribute] = {}
        self._loc_fixups: list[list[Any]] = []
        self._pending_loc: list[Any] | None = None
        self._type_cache: dict[str, Type] = dict(_SIMPLE_TYPES)
        self._ftype_cache: dict[str, tuple[tuple[Type, ...], tuple[Type, ...]]] = {}
        self._dict_cache: dict[str, dict[str, Attribute]] = {}
        self._loc_cache: dict[str, Location] = {}
        self._attr_cache: dict[str, Attribute] = {}
        self.depth = 0
        self._allow_unreg = ctx.allow_unregistered_dialects
        self._resource_handles: dict[str, Any] = {}
        #: The type of the first ``dense_resource`` use of each key (checked against weight files).
        self._resource_types: dict[str, ShapedType] = {}

    # ---- positions and errors -----------------------------------------------------------------

    def _newlines(self) -> list[int]:
        if self._nl is None:
            self._nl = [m.start() for m in re.finditer("\n", self.s)]
        return self._nl

    def line_col(self, pos: int) -> tuple[int, int, int]:
        """(line, col, line start) of a position; columns count UTF-8 bytes like MLIR."""
        s = self.s
        last_start, last_i = self._last_line
        if pos >= last_start:  # the usual case: count the newlines since the last position asked
            i = last_i + s.count("\n", last_start, pos)
            nl = s.rfind("\n", last_start, pos)
            start = last_start if nl < 0 else nl + 1
            self._last_line = (start, i)
        else:
            lines = self._newlines()
            i = bisect_right(lines, pos - 1)
            start = lines[i - 1] + 1 if i else 0
        if self._ascii:
            return i + 1, pos - start + 1, start
        prefix = s[start:pos]
        col = len(prefix) + 1 if prefix.isascii() else len(prefix.encode("utf-8")) + 1
        return i + 1, col, start

    def location_at(self, pos: int) -> FileLineColLoc:
        line, col, _ = self.line_col(pos)
        return _file_line_col(self.filename, line + self.line_offset, col)

    def source_line(self, pos: int) -> str:
        _, _, start = self.line_col(pos)
        end = self.s.find("\n", start)
        return self.s[start : end if end >= 0 else self.n]

    def error(
        self, message: str, pos: int | None = None, notes: Sequence[tuple[int, str]] = ()
    ) -> ParseError:
        return ParseError(self.pos if pos is None else pos, message, notes)

    def emit_error(self, message: str, pos: int | None = None) -> ParseError:
        """Raise a located parse error (custom hooks: ``raise parser.emit_error(...)`` or call)."""
        raise self.error(message, pos)

    def make_diagnostic(self, e: ParseError) -> Diagnostic:
        d = Diagnostic("error", self.location_at(e.pos), e.message)
        d.source_line = self.source_line(e.pos)
        for p, m in e.notes:
            note = d.attach_note(m, self.location_at(p))
            note.source_line = self.source_line(p)
        return d

    # ---- lexing helpers -----------------------------------------------------------------------

    def skip(self) -> None:
        self.pos = _WS.match(self.s, self.pos).end()

    def peek(self) -> str:
        self.pos = _WS.match(self.s, self.pos).end()
        return self.s[self.pos : self.pos + 1]

    def at_end(self) -> bool:
        return self.peek() == ""

    def parse_optional(self, tok: str) -> bool:
        """Consume punctuation ``tok`` if it comes next (the position is unchanged otherwise, so
        that errors point just after the previous token, as MLIR's do)."""
        pos = _WS.match(self.s, self.pos).end()
        if self.s.startswith(tok, pos):
            self.pos = pos + len(tok)
            return True
        return False

    def expect(self, tok: str, what: str | None = None) -> None:
        if not self.parse_optional(tok):
            raise self.error(f"expected '{tok}'" + (f" {what}" if what else ""))

    # MLIR OpAsmParser-style punctuation helpers.
    def parse_lparen(self) -> None:
        self.expect("(")

    def parse_rparen(self) -> None:
        self.expect(")")

    def parse_comma(self) -> None:
        self.expect(",")

    def parse_colon(self) -> None:
        self.expect(":")

    def parse_equal(self) -> None:
        self.expect("=")

    def parse_arrow(self) -> None:
        self.expect("->")

    def parse_optional_comma(self) -> bool:
        return self.parse_optional(",")

    def parse_optional_arrow(self) -> bool:
        return self.parse_optional("->")

    def parse_optional_lparen(self) -> bool:
        return self.parse_optional("(")

    def parse_optional_rparen(self) -> bool:
        return self.parse_optional(")")

    def parse_optional_colon(self) -> bool:
        return self.parse_optional(":")

    def parse_optional_equal(self) -> bool:
        return self.parse_optional("=")

    def parse_optional_keyword(self, keyword: str | Sequence[str] | None = None) -> str | None:
        pos = _WS.match(self.s, self.pos).end()
        m = _KEYWORD.match(self.s, pos)
        if m is None:
            return None
        kw = m.group()
        if keyword is not None and (kw != keyword if isinstance(keyword, str) else kw not in keyword):
            return None
        self.pos = m.end()
        return kw

    def parse_keyword(self, keyword: str | None = None) -> str:
        kw = self.parse_optional_keyword(keyword)
        if kw is None:
            raise self.error(f"expected '{keyword}'" if keyword else "expected keyword")
        return kw

    def parse_string(self) -> str:
        self.skip()
        s = self.s
        pos = self.pos
        if s.startswith('"', pos):
            m = _SIMPLE_STRING.match(s, pos)
            if m is not None:
                self.pos = m.end()
                return m.group(1)
            m = _STRING.match(s, pos)
            if m is not None:
                self.pos = m.end()
                try:
                    return _unescape(m.group(1))
                except ValueError:
                    raise self.error("unknown escape in string literal", pos) from None
            end = s.find("\n", pos)
            raise self.error("expected '\"' in string literal", end if end >= 0 else self.n)
        raise self.error("expected string")

    def parse_optional_string(self) -> str | None:
        if self.peek() == '"':
            return self.parse_string()
        return None

    def parse_symbol_name(self) -> str:
        r = self.parse_optional_symbol_name()
        if r is None:
            raise self.error("expected valid '@'-identifier for symbol name")
        return r

    def parse_optional_symbol_name(self) -> str | None:
        if self.peek() != "@":
            return None
        self.pos += 1
        if self.s.startswith('"', self.pos):
            return self.parse_string()
        m = _BARE_ID.match(self.s, self.pos)
        if m is None:
            raise self.error("expected valid '@'-identifier for symbol name")
        self.pos = m.end()
        return m.group()

    def parse_integer(self) -> int:
        self.skip()
        m = _INT.match(self.s, self.pos)
        if m is None:
            raise self.error("expected integer value")
        self.pos = m.end()
        t = m.group()
        return _int(t)

    def parse_optional_integer(self) -> int | None:
        self.skip()
        m = _INT.match(self.s, self.pos)
        if m is None:
            return None
        self.pos = m.end()
        t = m.group()
        return _int(t)

    def parse_float(self) -> float:
        self.skip()
        m = _NUMBER.match(self.s, self.pos)
        if m is None:
            raise self.error("expected floating point literal")
        self.pos = m.end()
        t = m.group()
        if "x" in t:
            raise self.error("unexpected hexadecimal float literal", m.start())
        return float(t)

    def _enter(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise self.error(f"nesting is too deep (more than {MAX_DEPTH} levels)")

    def _dialect_name(self, pos: int, what: str) -> tuple[str, str]:
        """``dialect.mnemonic`` of a dialect type or attribute at ``pos`` (mnemonic may be empty)."""
        s = self.s
        m = _DIALECT_NS.match(s, pos)
        if m is None:
            raise self.error(f"expected dialect namespace of a {what}", pos)
        self.pos = m.end()
        mnemonic = ""
        if s.startswith(".", self.pos):
            m2 = _DIALECT_MNEMONIC.match(s, self.pos + 1)
            if m2 is None:
                raise self.error(f"expected dialect {what} mnemonic")
            mnemonic = m2.group()
            self.pos = m2.end()
        return m.group(), mnemonic

    def _skip_balanced(self) -> None:
        """Skip a ``<...>`` dialect body, balancing brackets and skipping strings."""
        s = self.s
        n = self.n
        pos = self.pos
        stack: list[str] = []
        pairs = {"<": ">", "(": ")", "[": "]", "{": "}"}
        while pos < n:
            c = s[pos]
            if c == '"':
                m = _STRING.match(s, pos)
                if m is None:
                    raise self.error("expected '\"' in string literal", pos)
                pos = m.end()
                continue
            if c == "-" and s.startswith("->", pos):
                pos += 2
                continue
            if c in pairs:
                stack.append(pairs[c])
                if len(stack) > MAX_DEPTH:
                    raise self.error("nesting is too deep", pos)
            elif c in ">)]}":
                if not stack or stack[-1] != c:
                    if c == ">" and stack and stack[-1] != ">":
                        pos += 1  # e.g. '>=' inside parentheses
                        continue
                    raise self.error(f"unbalanced '{c}' character in pretty dialect name", pos)
                stack.pop()
                if not stack:
                    self.pos = pos + 1
                    return
            pos += 1
        raise self.error("unbalanced '<' character in pretty dialect name", self.pos)

    def _scan_verbatim(self, start: int) -> str:
        """Text of ``keyword<...>`` (or ``keyword[...]<...>``) kept as is."""
        s = self.s
        m = _IDENT.match(s, start)
        assert m is not None
        self.pos = m.end()
        if s.startswith("[", self.pos):
            e = s.find("]", self.pos)
            if e < 0:
                raise self.error("expected ']'")
            self.pos = e + 1
        if s.startswith("<", self.pos):
            self._skip_balanced()
        return s[start : self.pos]

"""The textual IR parser: MLIR's generic form, custom forms (through op hooks and declarative
assembly formats), aliases, locations and resources.

Entry points: :func:`parse_module`, :func:`parse_type`, :func:`parse_attribute`. The class
:class:`Parser` is also what custom op ``parse(cls, parser)`` hooks receive; its methods mirror MLIR's
``OpAsmParser`` (``parse_operand``, ``parse_type``, ``parse_region``, ``resolve_operands``...).

The parser works directly on the string with a position index and precompiled regular expressions
(no token objects). Types, function types, attribute dictionaries and locations are memoised by
their exact text within one parse (they are uniqued and immutable, so this is safe). Errors raise an
internal :class:`ParseError` that :func:`parse_module` turns into one located diagnostic (MLIR style:
``file:line:col: error: ...`` with the source line and a caret); no input produces a Python
traceback, a hang or a RecursionError.
"""

from __future__ import annotations

import gc
import json
import os
import re
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

from lamina.ir.attributes import (
    ArrayAttr,
    Attribute,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DenseResourceElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    OpaqueAttr,
    ResourceBlob,
    ResourceError,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    element_type_to_dtype,
)
from lamina.ir.context import Context
from lamina.ir.core import Block, Operation, Region, UnregisteredOp, Value
from lamina.ir.diagnostics import Diagnostic, SourceText
from lamina.ir.floatfmt import bits_to_float
from lamina.ir.location import (
    CallSiteLoc,
    FileLineColLoc,
    Location,
    NameLoc,
    UnknownLoc,
    fuse,
)
from lamina.ir.types import (
    DYNAMIC,
    FloatType,
    FunctionType,
    IndexType,
    IntegerType,
    MemRefType,
    NoneType,
    OpaqueType,
    RankedTensorType,
    ShapedType,
    TupleType,
    Type,
    UnrankedTensorType,
    VectorType,
)

__all__ = [
    "Argument",
    "ParseError",
    "Parser",
    "UnresolvedOperand",
    "parse_attribute",
    "parse_module",
    "parse_type",
]

MAX_DEPTH = 120
WEIGHT_FILE_ATTR = "lamina.weight_file"

_WS = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*")
_DIALECT_NS = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_DIALECT_MNEMONIC = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_SUFFIX_ID = re.compile(r"(?:[0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)")
_VALUE_USE = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)(?:#([0-9]+))?")
_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_SIMPLE_STRING = re.compile(r'"([^"\\\n]*)"')
_INT = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+)")
_NUMBER = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?)?)")
_SIMPLE_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:<[A-Za-z0-9_?*]*>)?")
_INT_TYPE = re.compile(r"(s|u)?i([0-9]+)\Z")
#: One dimension and its ``x``; MLIR lexes them as tokens, so whitespace may surround both.
_DIM_X = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*([0-9]+|\?|\[[0-9]+\])(?:[ \t\r\n]+|//[^\n]*)*x")
_DIM_LIST = re.compile(r"(?:(?:[0-9]+|\?)x)*")
_OPERANDS = re.compile(r"\(([%#A-Za-z0-9_$.\-, ]*)\)")
#: ``loc`` and its ``(`` with whitespace between (MLIR lexes them as two tokens).
_LOC_KW = re.compile(r"loc(?:[ \t\r\n]+|//[^\n]*)+(?=\()")
_LOC_ALIAS = re.compile(r"loc\(#([A-Za-z0-9_$.\-]+)\)")
_LOC_SIMPLE = re.compile(r'loc\(("[^"\\\n]*"(?::[0-9]+:[0-9]+)?)\)')
_SIMPLE_DICT = re.compile(r'\{(?:[^{}"\n]|"(?:[^"\\\n]|\\.)*")*\}')
_ESCAPE = re.compile(r"\\(?:([0-9a-fA-F]{2})|(.))", re.S)
_ALIAS_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_$.\-]*")
_RESULT_DEF = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)(?::([0-9]+))?")
_RESULT_COUNT = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*:(?:[ \t\r\n]+|//[^\n]*)*([0-9]+)")
_FAST_RESULT = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)(?::([0-9]+))? = ")
_UNKNOWN = UnknownLoc()
_DICT_TEXT = r'\{[^{}"\n]*(?:"[^"\\\n]*"[^{}"\n]*)*\}'
_OP_LINE = re.compile(
    r'(?:%([A-Za-z_$.\-][A-Za-z0-9_$.\-]*|[0-9]+) = )?"([^"\\\n]+)"\(([^()\n]*)\)'
    r"(?: <(" + _DICT_TEXT + r")>)?(?: (" + _DICT_TEXT + r"))? : ([^\n]*)"
)
_TRAILING_LOC_ALIAS = re.compile(r" loc\(#([A-Za-z0-9_$.\-]+)\)\Z")
_DICT_ENTRY = re.compile(
    r'([A-Za-z_][A-Za-z0-9_$.]*)(?: = ("[^"\\\n]*"|[A-Za-z0-9_@.\-]+(?: : [A-Za-z0-9_]+)?'
    r"|array<[A-Za-z0-9_]+(?:: [0-9a-z., +\-]*)?>))?(?:, |\}\Z)"
)
# An attribute value whose text alone determines it (memoised by text within one parse).
_SIMPLE_VALUE = re.compile(
    r'(?:"[^"\\\n]*"|[A-Za-z0-9_@.\-]+(?: : [A-Za-z0-9_]+)?|array<[A-Za-z0-9_]+(?:: [0-9a-z., +\-]*)?>)(?=[,}\]])'
)
_ALIAS_LOC_LINE = re.compile(r'#([A-Za-z_][A-Za-z0-9_$.\-]*) = loc\(("[^"\\\n]*"(:[0-9]+:[0-9]+)?)\)')

_FLOAT_NAMES = frozenset(FloatType.NAMES)
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


def _name_loc(
    name: str,
    _table: dict = NameLoc._instances,
    _new: Any = object.__new__,
    _set: Any = object.__setattr__,
) -> NameLoc:
    """``NameLoc(name)`` without a child, built like :func:`_file_line_col` (the location aliases
    at the end of a model printed with debuginfo: one per tensor)."""
    key = (name, None)
    loc = _table.get(key)
    if loc is None:
        loc = _new(NameLoc)
        _set(loc, "name", name)
        _set(loc, "child", None)
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


class UnresolvedOperand:
    """An SSA use read by a custom parser, resolved later with a type."""

    __slots__ = ("name", "number", "pos")

    def __init__(self, name: str, number: int, pos: int) -> None:
        self.name = name
        self.number = number
        self.pos = pos

    def __repr__(self) -> str:
        return f"%{self.name}" + (f"#{self.number}" if self.number else "")


class Argument:
    """A region argument read by a custom parser: ``%name: type {attrs} loc(...)``."""

    __slots__ = ("attrs", "location", "name", "pending", "pos", "type")

    def __init__(
        self,
        name: str,
        pos: int,
        type: Type | None,
        attrs: dict[str, Attribute] | None,
        location: Location | None,
    ) -> None:
        self.pending: list[Any] | None = None
        self.name = name
        self.pos = pos
        self.type = type
        self.attrs = attrs
        self.location = location


class _ForwardRef(Value):
    """Placeholder for a value used before its definition."""

    __slots__ = ("pos",)

    def __init__(self, type: Type, pos: int) -> None:
        super().__init__(type)
        self.pos = pos


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
# --------------------------------------------------------------------------------------------


class _Scope:
    """SSA names of one isolated-from-above region tree."""

    __slots__ = ("def_pos", "forward", "frames", "values")

    def __init__(self) -> None:
        self.values: dict[str, tuple[Value, ...]] = {}
        self.def_pos: dict[str, int] = {}
        self.forward: dict[str, dict[int, _ForwardRef]] = {}
        self.frames: list[list[str]] = [[]]


class Parser:
    """Parses MLIR text. Custom op hooks use the ``parse_*`` / ``resolve_*`` methods."""

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
        self._scope = _Scope()
        self._scopes: list[_Scope] = []
        self._blocks: list[dict[str, tuple[Block, int, bool]]] = []
        self.depth = 0
        self._allow_unreg = ctx.allow_unregistered_dialects
        self._resource_handles: dict[str, Any] = {}
        #: The type of the first ``dense_resource`` use of each key (checked against weight files).
        self._resource_types: dict[str, ShapedType] = {}
        self._op_classes: dict[str, Any] = {}
        self._parent_ops: list[Operation | None] = [None]
        self._pending_op_name = ""
        self.result_count = 0

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

    # ---- types --------------------------------------------------------------------------------

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

    def parse_type(self) -> Type:
        s = self.s
        pos = _WS.match(s, self.pos).end()
        self.pos = pos
        m = _SIMPLE_TYPE.match(s, pos)
        if m is not None:
            t = self._type_cache.get(m.group())
            if t is not None:
                self.pos = m.end()
                return t
        t = self._parse_type_slow()
        if m is not None and self.pos == m.end():
            self._type_cache[m.group()] = t
        return t

    def parse_optional_type(self) -> Type | None:
        c = self.peek()
        if c in ("!", "("):
            return self.parse_type()
        m = _KEYWORD.match(self.s, self.pos)
        if m is None:
            return None
        kw = m.group()
        if (
            kw in _SIMPLE_TYPES
            or kw in ("tensor", "vector", "memref", "tuple", "complex")
            or _INT_TYPE.match(kw)
        ):
            return self.parse_type()
        return None

    def parse_colon_type(self) -> Type:
        self.expect(":")
        return self.parse_type()

    def parse_type_list(self) -> list[Type]:
        ts = [self.parse_type()]
        while self.parse_optional(","):
            ts.append(self.parse_type())
        return ts

    def parse_colon_type_list(self) -> list[Type]:
        self.expect(":")
        return self.parse_type_list()

    def parse_optional_colon_type_list(self) -> list[Type]:
        if self.parse_optional(":"):
            return self.parse_type_list()
        return []

    def parse_optional_arrow_type_list(self) -> list[Type]:
        if not self.parse_optional("->"):
            return []
        return self._parse_result_types()

    def _parse_result_types(self) -> list[Type]:
        if self.peek() == "(":
            save = self.pos
            self.pos += 1
            if self.parse_optional(")"):
                return []
            ts = self.parse_type_list()
            if self.parse_optional(")"):
                if len(ts) == 1 and self.peek() == "-" and self.s.startswith("->", self.pos):
                    # "(a) -> b" is a function type result
                    self.pos = save
                    return [self.parse_type()]
                return ts
            self.pos = save
            return [self.parse_type()]
        return [self.parse_type()]

    def parse_function_type(self) -> FunctionType:
        ins, outs = self._parse_function_type_parts()
        return FunctionType(ins, outs)

    def _parse_function_type_parts(self) -> tuple[tuple[Type, ...], tuple[Type, ...]]:
        self.expect("(", "in function type")
        ins: list[Type] = []
        if not self.parse_optional(")"):
            ins = self.parse_type_list()
            self.expect(")", "in function type")
        self.expect("->", "in function type")
        outs = self._parse_result_types()
        return tuple(ins), tuple(outs)

    def _parse_type_slow(self) -> Type:
        self._enter()
        try:
            return self._parse_type_inner()
        finally:
            self.depth -= 1

    def _parse_type_inner(self) -> Type:
        s = self.s
        pos = self.pos
        c = s[pos : pos + 1]
        if c == "(":
            ins, outs = self._parse_function_type_parts()
            return FunctionType(ins, outs)
        if c == "!":
            return self._parse_dialect_type()
        m = _KEYWORD.match(s, pos)
        if m is None:
            raise self.error("expected non-function type")
        kw = m.group()
        mi = _INT_TYPE.match(kw)
        if mi is not None:
            self.pos = m.end()
            w = _int(mi.group(2))
            if w == 0 or w > 16777215:
                raise self.error("invalid integer width", pos)
            return IntegerType(w, mi.group(1) or "")
        t = _SIMPLE_TYPES.get(kw)
        if t is not None:
            self.pos = m.end()
            return t
        # Keywords may swallow '.' (bare ids); shaped types need their own lexing.
        m2 = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(s, pos)
        assert m2 is not None
        kw = m2.group()
        self.pos = m2.end()
        if kw in ("tensor", "vector", "memref"):
            return self._parse_shaped(kw, pos)
        if kw == "tuple":
            self.expect("<")
            if self.parse_optional(">"):
                return TupleType(())
            ts = self.parse_type_list()
            self.expect(">", "in tuple type")
            return TupleType(ts)
        if kw == "complex":
            self.expect("<")
            et = self.parse_type()
            self.expect(">", "in complex type")
            return OpaqueType("", f"complex<{et}>")
        raise self.error("expected non-function type", pos)

    def _parse_shaped(self, kw: str, start: int) -> Type:
        s = self.s
        if not self.parse_optional("<"):
            raise self.error(f"expected '<' in {kw} type")
        pos = _WS.match(s, self.pos).end()
        if kw == "tensor" and s.startswith("*", pos):
            self.pos = pos + 1
            self.expect("x")
            et = self.parse_type()
            self.expect(">")
            return UnrankedTensorType(et)
        shape: list[int] = []
        scalable: list[str] | None = None  # the dims' text, when a vector has a scalable one
        while True:
            m = _DIM_X.match(s, self.pos)
            if m is None:
                break
            d = m.group(1)
            if d[0] == "[":
                if kw != "vector":
                    raise self.error("scalable dimensions are only valid in vector types", self.pos)
                scalable = [str(x) for x in shape]
            elif d != "?" and (len(d) > 19 or int(d) >= 1 << 63):  # MLIR's dimensions are int64
                raise self.error("invalid dimension", self.pos)
            if scalable is not None:
                scalable.append(d)
            else:
                shape.append(DYNAMIC if d == "?" else int(d))
            self.pos = m.end()
        et_pos = self.pos
        et = self.parse_type()
        if scalable is not None:  # scalable vectors are not modelled: kept as text
            self.expect(">", "in vector type")
            return OpaqueType("", f"vector<{'x'.join(scalable)}x{et}>")
        if kw == "tensor":
            if isinstance(et, (FunctionType, TupleType)) or (
                isinstance(et, ShapedType) and not isinstance(et, OpaqueType)
            ):
                raise self.error("invalid tensor element type", et_pos)
            enc = None
            if self.parse_optional(","):
                enc = self.parse_attribute()
            self.expect(">", "in tensor type")
            return RankedTensorType(shape, et, enc)
        if kw == "vector":
            if DYNAMIC in shape:
                raise self.error("vector types must have static shape", start)
            if 0 in shape:
                raise self.error("vector types must have positive constant sizes but got 0", start)
            self.expect(">", "in vector type")
            return VectorType(shape, et)
        layout = None
        space = None
        if self.parse_optional(","):
            a = self.parse_attribute()
            if isinstance(a, IntegerAttr):
                space = a
            else:
                layout = a
                if self.parse_optional(","):
                    space = self.parse_attribute()
        self.expect(">", "in memref type")
        return MemRefType(shape, et, layout, space)

    def _parse_dialect_type(self) -> Type:
        s = self.s
        start = self.pos
        self.pos += 1
        m = _ALIAS_NAME.match(s, self.pos)
        if m is None:
            raise self.error("expected type alias or dialect type name")
        name = m.group()
        dot = name.find(".")
        if dot < 0 and not s.startswith("<", m.end()):
            t = self.type_aliases.get(name)
            if t is None:
                raise self.error(f"undefined symbol alias id '{name}'", start)
            self.pos = m.end()
            return t
        dialect, mnemonic = self._dialect_name(self.pos, "type")
        d = self.ctx.get_dialect(dialect)
        if d is not None and mnemonic in d.types:
            cls = d.types[mnemonic]
            return cls.parse_body(self)
        if d is not None and d.types:
            raise self.error(f"unknown type '{mnemonic}' in dialect '{dialect}'", start)
        if not self._allow_unreg and d is None:
            raise self.error(
                f"dialect '{dialect}' is unknown (unregistered dialect types need -allow-unregistered-dialect)",
                start,
            )
        body_start = self.pos
        if s.startswith("<", self.pos):
            self._skip_balanced()
        body = s[body_start : self.pos]
        data = (mnemonic + body) if mnemonic else body
        return OpaqueType(dialect, data)

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
        m = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(s, start)
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

    # ---- attributes ----------------------------------------------------------------------------

    def parse_attribute(self, type: Type | None = None) -> Attribute:
        self._enter()
        try:
            return self._parse_attribute(type)
        finally:
            self.depth -= 1

    def parse_optional_attribute(self) -> Attribute | None:
        c = self.peek()
        if not c or c in ")]},>=:":
            return None
        if c == "%" or c == "^":
            return None
        return self.parse_attribute()

    def _parse_attribute(self, type: Type | None) -> Attribute:
        s = self.s
        pos = _WS.match(s, self.pos).end()
        self.pos = pos
        c = s[pos : pos + 1]
        if c == '"':
            v = self.parse_string()
            if self.parse_optional(":"):
                return StringAttr(v, self.parse_type())
            return StringAttr(v)
        if c == "[":
            self.pos += 1
            if self.parse_optional("]"):
                return ArrayAttr(())
            elems = [self.parse_attribute()]
            while self.parse_optional(","):
                elems.append(self.parse_attribute())
            self.expect("]", "in attribute list")
            return ArrayAttr(elems)
        if c == "{":
            return DictionaryAttr(self._parse_dict_entries())
        if c == "@":
            root = self.parse_symbol_name()
            nested = []
            while self.s.startswith("::", self.pos):
                self.pos += 2
                nested.append(self.parse_symbol_name())
            return SymbolRefAttr(root, nested)
        if c == "#":
            return self._parse_hash_attribute()
        if c == "-" or c.isdigit():
            return self._parse_number_attr(type)
        if c == "(" or c == "!":
            return TypeAttr(self.parse_type())
        m = _KEYWORD.match(s, pos)
        if m is None:
            if not c:
                raise self.error("expected attribute value")
            raise self.error("expected attribute value")
        kw = m.group()
        if kw == "true" or kw == "false":
            self.pos = m.end()
            v = kw == "true"
            if self.parse_optional(":"):
                t = self.parse_type()
                return IntegerAttr(1 if v else 0, t)
            return BoolAttr(v)
        if kw == "unit":
            self.pos = m.end()
            return UnitAttr()
        kw2 = re.compile(r"[A-Za-z_][A-Za-z0-9_]*").match(s, pos).group()  # type: ignore[union-attr]
        if kw2 == "dense":
            self.pos = pos + 5
            return self._parse_dense()
        if kw2 == "dense_resource":
            self.pos = pos + len(kw2)
            return self._parse_dense_resource()
        if kw2 == "array":
            self.pos = pos + 5
            return self._parse_dense_array()
        if kw2 == "loc":
            self.pos = pos + 3
            return self.parse_location_body(allow_forward=False)
        if kw2 in ("affine_map", "affine_set", "strided", "distinct", "sparse", "opaque", "dense_array"):
            text = self._scan_verbatim(pos)
            if kw2 in ("sparse", "opaque") and self.parse_optional(":"):
                tpos = self.pos
                self.parse_type()
                text += " : " + s[tpos : self.pos].strip()
            return OpaqueAttr("", text)
        t = self.parse_optional_type()
        if t is not None:
            return TypeAttr(t)
        raise self.error("expected attribute value", pos)

    def _parse_hash_attribute(self) -> Attribute:
        s = self.s
        start = self.pos
        m = _ALIAS_NAME.match(s, start + 1)
        if m is None:
            raise self.error("expected attribute alias or dialect attribute name")
        name = m.group()
        if "." not in name and not s.startswith("<", m.end()):
            a = self.attr_aliases.get(name)
            if a is None:
                raise self.error(f"undefined symbol alias id '{name}'", start)
            self.pos = m.end()
            return a
        dialect, mnemonic = self._dialect_name(start + 1, "attribute")
        d = self.ctx.get_dialect(dialect)
        if d is not None and mnemonic in d.attributes:
            return d.attributes[mnemonic].parse_body(self)
        if d is None and not self._allow_unreg:
            raise self.error(
                f"dialect '{dialect}' is unknown (unregistered dialect attributes need -allow-unregistered-dialect)",
                start,
            )
        body_start = self.pos
        if s.startswith("<", self.pos):
            self._skip_balanced()
        body = s[body_start : self.pos]
        return OpaqueAttr(dialect, (mnemonic + body) if mnemonic else body)

    def _parse_number_attr(self, type: Type | None) -> Attribute:
        s = self.s
        start = self.pos
        m = _NUMBER.match(s, start)
        if m is None and s.startswith("-", start):  # `- 1`: MLIR's '-' is a token of its own
            m = _NUMBER.match(s, _WS.match(s, start + 1).end())
            if m is not None and m.group().startswith("-"):
                m = None
        if m is None:
            raise self.error("expected attribute value")
        text = m.group() if s.startswith(m.group(), start) else "-" + m.group()
        self.pos = m.end()
        t = type
        if self.parse_optional(":"):
            t = self.parse_type()
        is_hex = "x" in text
        is_float = not is_hex and ("." in text or "e" in text or "E" in text)
        if t is None:
            t = FloatType("f64") if is_float else IntegerType(64)
        if isinstance(t, FloatType):
            if is_hex:
                neg = text.startswith("-")
                bits = int(text.lstrip("-"), 16)
                try:
                    v = bits_to_float(bits, t.name)
                except KeyError:
                    raise self.error(f"hexadecimal float constant not supported for {t}", start) from None
                return FloatAttr(-v if neg else v, t)
            return FloatAttr(float(text), t)
        if is_float:
            raise self.error("floating point value not valid for specified type", start)
        if not isinstance(t, (IntegerType, IndexType)):
            raise self.error("integer literal not valid for specified type", start)
        v = _int(text)
        if not _int_fits(v, t):
            raise self.error("integer constant out of range for attribute", start)
        return IntegerAttr(v, t)

    def _parse_dict_entries(self) -> dict[str, Attribute]:
        self.expect("{")
        out: dict[str, Attribute] = {}
        if self.parse_optional("}"):
            return out
        s = self.s
        cache = self._attr_cache
        while True:
            npos = self.pos
            if s.startswith(" ", npos) or s.startswith("\n", npos) or s.startswith("/", npos):
                npos = _WS.match(s, npos).end()
            if s.startswith('"', npos):
                self.pos = npos
                name = self.parse_string()
                if not name:
                    raise self.error("expected valid attribute name", npos)
            else:
                m = _BARE_ID.match(s, npos)
                if m is None:
                    # MLIR points just after the previous token
                    raise self.error("expected attribute name", len(s[:npos].rstrip(" \t\r\n")))
                name = m.group()
                self.pos = m.end()
            if name in out:
                raise self.error(f"duplicate key '{name}' in dictionary attribute", npos)
            vpos = self.pos
            if s.startswith(" = ", vpos):
                vpos += 3
                vm = _SIMPLE_VALUE.match(s, vpos)
                if vm is not None:
                    vt = vm.group()
                    a = cache.get(vt)
                    if a is None:
                        self.pos = vpos
                        a = self.parse_attribute()
                        if self.pos == vm.end():
                            cache[vt] = a
                    else:
                        self.pos = vm.end()
                    out[name] = a
                else:
                    self.pos = vpos
                    out[name] = self.parse_attribute()
            elif self.parse_optional("="):
                out[name] = self.parse_attribute()
            else:
                out[name] = UnitAttr()
            pos = self.pos
            if s.startswith(", ", pos):
                self.pos = pos + 2
                continue
            if s.startswith("}", pos):
                self.pos = pos + 1
                return out
            if self.parse_optional("}"):
                return out
            if not self.parse_optional(","):
                raise self.error("expected ',' or '}' in attribute dictionary")

    def parse_optional_attr_dict(self) -> dict[str, Attribute]:
        if self.peek() != "{":
            return {}
        return self._parse_attr_dict_cached()

    def parse_optional_attr_dict_with_keyword(self) -> dict[str, Attribute]:
        if self.parse_optional_keyword("attributes") is None:
            return {}
        return self._parse_attr_dict_cached()

    def _parse_attr_dict_cached(self) -> dict[str, Attribute]:
        s = self.s
        pos = self.pos
        m = _SIMPLE_DICT.match(s, pos, min(self.n, pos + 4096))
        if m is not None:
            key = m.group()
            d = self._dict_cache.get(key)
            if d is not None:
                self.pos = m.end()
                return dict(d)
        self._enter()
        try:
            d = self._parse_dict_entries()
        finally:
            self.depth -= 1
        if m is not None and self.pos == m.end():
            self._dict_cache[m.group()] = d
            return dict(d)
        return d

    def _parse_dense_array(self) -> Attribute:
        self.expect("<")
        t = self.parse_type()
        if not isinstance(t, (IntegerType, FloatType)):
            raise self.error("expected integer or float type in dense array")
        if self.parse_optional(">"):
            return DenseArrayAttr(t, ())
        self.expect(":")
        vals: list[Any] = []
        while True:
            self.skip()
            if isinstance(t, IntegerType) and t.width == 1:
                kw = self.parse_optional_keyword(("true", "false"))
                if kw is None:
                    vals.append(self.parse_integer() != 0)
                else:
                    vals.append(kw == "true")
            elif isinstance(t, FloatType):
                m = _NUMBER.match(self.s, self.pos)
                if m is None:
                    raise self.error("expected floating point literal")
                self.pos = m.end()
                tx = m.group()
                if "x" in tx:
                    vals.append(bits_to_float(int(tx.lstrip("-"), 16), t.name))
                else:
                    vals.append(float(tx))
            else:
                v = self.parse_integer()
                if not _int_fits(v, t):
                    raise self.error("integer constant out of range")
                vals.append(v)
            if self.parse_optional(">"):
                break
            self.expect(",", "in dense array")
        return DenseArrayAttr(t, vals)

    def _parse_dense_resource(self) -> Attribute:
        self.expect("<")
        self.skip()
        if self.s.startswith('"', self.pos):
            key = self.parse_string()
        else:
            m = _ALIAS_NAME.match(self.s, self.pos)
            if m is None:
                raise self.error("expected resource handle")
            key = m.group()
            self.pos = m.end()
        self.expect(">")
        self.expect(":")
        tpos = self.pos
        t = self.parse_type()
        if not isinstance(t, ShapedType) or not t.has_static_shape:
            raise self.error("expected a shaped type with static shape", tpos)
        h = self.ctx.resources.get_or_create(key)
        self._resource_handles[key] = h
        self._resource_types.setdefault(key, t)
        return DenseResourceElementsAttr(t, h)

    def _parse_dense(self) -> Attribute:
        s = self.s
        self.expect("<")
        start = _WS.match(s, self.pos).end()
        self.pos = start
        c = s[start : start + 1]
        kind = "empty"
        body = ""
        if c == ">":
            self.pos += 1
        elif c == '"':
            kind = "hex"
            body = self.parse_string()
            self.expect(">")
        elif c == "[":
            end = s.find(">", start)
            if end < 0:
                raise self.error("expected '>' to close dense elements")
            body = s[start:end]
            if '"' in body or "(" in body:
                raise self.error("string and complex dense elements are not supported", start)
            kind = "list"
            self.pos = end + 1
        else:
            m = re.compile(
                r"-?(?:0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?)?|inf|nan)|true|false"
            ).match(s, start)
            if m is None:
                raise self.error("expected dense elements literal", start)
            body = m.group()
            kind = "splat"
            self.pos = m.end()
            self.expect(">")
        self.expect(":", "after dense elements literal")
        tpos = _WS.match(s, self.pos).end()
        t = self.parse_type()
        if not isinstance(t, (RankedTensorType, VectorType)) or not t.has_static_shape:
            raise self.error("elements literal type must be a static shaped tensor or vector", tpos)
        et = t.element_type
        try:
            dt = element_type_to_dtype(et)
        except ValueError:
            raise self.error(f"unsupported dense element type '{et}'", tpos) from None
        numel = t.num_elements
        try:
            if kind == "empty":
                if numel != 0:
                    raise self.error(
                        f"inferred shape of elements literal ([0]) does not match type ([{numel}])", start
                    )
                return DenseElementsAttr(t, np.zeros(t.shape, dtype=dt))
            if kind == "hex":
                return self._dense_from_hex(t, body, dt, start)
            if kind == "splat":
                arr = self._dense_values([body], et, dt, start)
                return DenseElementsAttr(t, arr.reshape(()))
            return self._dense_from_list(t, body, et, dt, start)
        except ParseError:
            raise
        except (ValueError, OverflowError, TypeError) as e:
            raise self.error(f"invalid dense elements: {e}", start) from None

    def _dense_from_hex(self, t: ShapedType, body: str, dt: np.dtype, pos: int) -> Attribute:
        if not body.startswith("0x"):
            raise self.error("expected hex string in dense elements", pos)
        try:
            raw = bytes.fromhex(body[2:])
        except ValueError:
            raise self.error("invalid hex in dense elements", pos) from None
        numel = t.num_elements
        et = t.element_type
        if isinstance(et, IntegerType) and et.width == 1:
            bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8), bitorder="little")
            if len(raw) == 1 and numel > 8:
                return DenseElementsAttr(t, np.asarray(raw[0] != 0))
            if bits.size < numel:
                raise self.error("elements hex data size is invalid for provided type", pos)
            return DenseElementsAttr(t, bits[:numel].astype(np.bool_).reshape(t.shape))
        if len(raw) == dt.itemsize and numel != 1:
            return DenseElementsAttr(t, np.frombuffer(raw, dtype=dt).reshape(()))
        if len(raw) != dt.itemsize * numel:
            raise self.error("elements hex data size is invalid for provided type", pos)
        return DenseElementsAttr(t, np.frombuffer(raw, dtype=dt).reshape(t.shape))

    def _dense_values(self, toks: list[str], et: Type, dt: np.dtype, pos: int) -> np.ndarray:
        if isinstance(et, IntegerType) and et.width == 1:
            out = np.empty(len(toks), dtype=np.bool_)
            for i, tk in enumerate(toks):
                if tk == "true" or tk == "1":
                    out[i] = True
                elif tk == "false" or tk == "0":
                    out[i] = False
                else:
                    raise self.error("expected i1 elements to be 'true' or 'false'", pos)
            return out
        if isinstance(et, FloatType):
            try:
                arr = np.array(toks).astype(np.float64)
            except ValueError:
                vals = []
                for tk in toks:
                    if "x" in tk:
                        neg = tk.startswith("-")
                        v = bits_to_float(int(tk.lstrip("-"), 16), et.name)
                        vals.append(-v if neg else v)
                    elif tk in ("true", "false"):
                        raise self.error("expected floating point elements", pos) from None
                    else:
                        vals.append(float(tk))
                return np.array(vals, dtype=np.float64).astype(dt)
            with np.errstate(over="ignore"):
                return arr.astype(dt)
        try:
            arr = np.array(toks).astype(np.int64)
            if not all(("." not in tk and "e" not in tk) for tk in toks[:1]):
                raise ValueError
            if arr.dtype != dt:
                info = np.iinfo(dt)
                lo = -(1 << (et.width - 1)) if isinstance(et, IntegerType) and et.width < 64 else info.min
                if arr.size and (arr.min() < min(lo, info.min) or arr.max() > info.max):
                    raise self.error("integer constant out of range for type", pos)
                arr = arr.astype(dt)
            return arr
        except (ValueError, OverflowError):
            vals = []
            for tk in toks:
                if "." in tk or ("e" in tk.lower() and "x" not in tk):
                    raise self.error("expected integer elements, but parsed floating-point", pos) from None
                v = _int(tk)
                if not _int_fits(v, et):
                    raise self.error("integer constant out of range for type", pos) from None
                vals.append(v)
            w = dt.itemsize * 8
            vals = [v & ((1 << w) - 1) for v in vals]
            return (
                np.array(vals, dtype=np.uint64 if w == 64 else np.int64).astype(np.dtype(f"uint{w}")).view(dt)
            )

    def _dense_from_list(self, t: ShapedType, body: str, et: Type, dt: np.dtype, pos: int) -> Attribute:
        depth = len(body) - len(body.lstrip("[ \t\n"))
        depth = body[:depth].count("[")
        flat = body.replace("[", " ").replace("]", " ")
        toks = [x.strip() for x in flat.split(",")]
        toks = [x for x in toks if x]
        numel = t.num_elements
        shape = tuple(t.shape)
        if depth != len(shape) or len(toks) != numel:
            raise self.error(
                f"inferred shape of elements literal ([{len(toks)}]) does not match type ([{', '.join(map(str, shape))}])",
                pos,
            )
        arr = self._dense_values(toks, et, dt, pos)
        return DenseElementsAttr(t, arr.reshape(shape))

    # ---- locations -----------------------------------------------------------------------------

    def parse_location_body(self, allow_forward: bool, owner: Any = None) -> Location:
        """After ``loc``: parse ``(...)``. ``#alias`` references to aliases defined later are
        resolved at the end of the parse when ``allow_forward`` (op and argument locations)."""
        self.expect("(", "in location")
        self.skip()
        s = self.s
        if s.startswith("#", self.pos):
            start = self.pos
            m = _ALIAS_NAME.match(s, self.pos + 1)
            if m is None:
                raise self.error("expected location alias")
            name = m.group()
            self.pos = m.end()
            self.expect(")", "in location")
            a = self.attr_aliases.get(name)
            if a is None:
                if "." in name or s.startswith("<", m.end()):
                    raise self.error(f"expected location attribute, but got#{name}", self.pos - 1)
                if allow_forward:
                    entry = [owner, name, start]
                    self._loc_fixups.append(entry)
                    if owner is None:
                        self._pending_loc = entry
                    return UnknownLoc()
                raise self.error(f"undefined symbol alias id '{name}'", start)
            if not isinstance(a, Location):
                raise self.error(f"expected location attribute, but got#{name}", start)
            return a
        loc = self._parse_loc_inner()
        self.expect(")", "in location")
        return loc

    def _parse_loc_inner(self) -> Location:
        self._enter()
        try:
            return self._parse_loc_inner2()
        finally:
            self.depth -= 1

    def _parse_loc_inner2(self) -> Location:
        s = self.s
        self.skip()
        pos = self.pos
        c = s[pos : pos + 1]
        if c == "#":
            m = _ALIAS_NAME.match(s, pos + 1)
            if m is None:
                raise self.error("expected location alias")
            a = self.attr_aliases.get(m.group())
            if not isinstance(a, Location):
                raise self.error(f"expected location attribute, but got#{m.group()}", pos)
            self.pos = m.end()
            return a
        if c == '"':
            name = self.parse_string()
            if self.parse_optional(":"):
                line = self.parse_integer()
                self.expect(":", "in FileLineColLoc")
                col = self.parse_integer()
                if self.parse_optional_keyword("to") is not None:
                    # FileLineColRange: the range end is not modelled (kept as the start).
                    if self.parse_optional(":"):
                        self.parse_integer()
                    else:
                        self.parse_integer()
                        if self.parse_optional(":"):
                            self.parse_integer()
                return FileLineColLoc(name, line, col)
            if self.parse_optional("("):
                child = self._parse_loc_inner()
                self.expect(")", "after child location")
                return NameLoc(name, child)
            return NameLoc(name)
        kw = self.parse_optional_keyword()
        if kw == "unknown":
            return UnknownLoc()
        if kw == "fused":
            meta = None
            if self.parse_optional("<"):
                meta = self.parse_attribute()
                self.expect(">", "after fused location metadata")
            self.expect("[", "in fused location")
            locs: list[Location] = []
            if not self.parse_optional("]"):
                locs.append(self._parse_loc_inner())
                while self.parse_optional(","):
                    locs.append(self._parse_loc_inner())
                self.expect("]", "in fused location")
            return fuse(locs, meta)
        if kw == "callsite":
            self.expect("(", "in callsite location")
            callee = self._parse_loc_inner()
            self.parse_keyword("at")
            caller = self._parse_loc_inner()
            self.expect(")", "in callsite location")
            return CallSiteLoc(callee, caller)
        raise self.error("expected location instance", pos)

    def parse_optional_location(self, owner: Any = None) -> Location | None:
        s = self.s
        pos = _WS.match(s, self.pos).end()
        if not s.startswith("loc(", pos):
            self.pos = pos
            if _LOC_KW.match(s, pos) is None:
                return None
            self.pos = pos + 3
            return self.parse_location_body(True, owner)
        m = _LOC_ALIAS.match(s, pos)
        if m is not None:
            a = self.attr_aliases.get(m.group(1))
            if isinstance(a, Location):
                self.pos = m.end()
                return a
        m = _LOC_SIMPLE.match(s, pos)
        if m is not None:
            key = m.group(1)
            loc = self._loc_cache.get(key)
            if loc is None:
                self.pos = pos + 3
                loc = self.parse_location_body(True, owner)
                self._loc_cache[key] = loc
            self.pos = m.end()
            return loc
        self.pos = pos + 3
        return self.parse_location_body(True, owner)

    # ---- SSA values --------------------------------------------------------------------------

    def parse_operand(self) -> UnresolvedOperand:
        r = self.parse_optional_operand()
        if r is None:
            raise self.error("expected SSA operand")
        return r

    def parse_optional_operand(self) -> UnresolvedOperand | None:
        pos = _WS.match(self.s, self.pos).end()
        m = _VALUE_USE.match(self.s, pos)
        if m is None:
            return None
        self.pos = m.end()
        return UnresolvedOperand(m.group(1), _int(m.group(2)) if m.group(2) else 0, pos)

    def parse_operand_list(
        self, delimiter: str | None = None, allow_empty: bool = True
    ) -> list[UnresolvedOperand]:
        """``%a, %b`` optionally inside ``()`` / ``[]`` (``delimiter`` = "paren" / "square")."""
        close = None
        if delimiter == "paren":
            self.expect("(")
            close = ")"
        elif delimiter == "square":
            self.expect("[")
            close = "]"
        out: list[UnresolvedOperand] = []
        if close is not None and self.parse_optional(close):
            return out
        first = self.parse_optional_operand()
        if first is not None:
            out.append(first)
            while self.parse_optional(","):
                out.append(self.parse_operand())
        elif not allow_empty:
            raise self.error("expected SSA operand")
        if close is not None:
            self.expect(close, "to end operand list")
        return out

    def resolve_operand(self, u: UnresolvedOperand, type: Type) -> Value:
        return self._resolve(u.name, u.number, type, u.pos)

    def resolve_operands(
        self, us: Sequence[UnresolvedOperand], types: Sequence[Type], pos: int | None = None
    ) -> list[Value]:
        if len(us) != len(types):
            raise self.error(f"{len(us)} operands present, but expected {len(types)}", pos)
        return [self._resolve(u.name, u.number, t, u.pos) for u, t in zip(us, types)]

    def _resolve(self, name: str, number: int, type: Type, pos: int) -> Value:
        sc = self._scope
        vals = sc.values.get(name)
        if vals is not None:
            if number >= len(vals):
                raise self.error("reference to invalid result number", pos)
            v = vals[number]
            if v.type is not type:
                raise self.error(
                    f"use of value '%{name}' expects different type than prior uses: '{type}' vs '{v.type}'",
                    pos,
                    [(sc.def_pos.get(name, pos), "prior use here")],
                )
            return v
        fw = sc.forward.get(name)
        if fw is None:
            fw = sc.forward[name] = {}
        ref = fw.get(number)
        if ref is None:
            ref = fw[number] = _ForwardRef(type, pos)
        elif ref.type is not type:
            raise self.error(
                f"use of value '%{name}' expects different type than prior uses: '{type}' vs '{ref.type}'",
                pos,
                [(ref.pos, "prior use here")],
            )
        return ref

    def _define(self, name: str, values: tuple[Value, ...], pos: int) -> None:
        sc = self._scope
        if name in sc.values:
            raise self.error(
                f"redefinition of SSA value '%{name}'", pos, [(sc.def_pos[name], "previously defined here")]
            )
        sc.values[name] = values
        sc.def_pos[name] = pos
        sc.frames[-1].append(name)
        if sc.forward:
            fw = sc.forward.pop(name, None)
            if fw is not None:
                for num, ref in fw.items():
                    if num >= len(values):
                        raise self.error("reference to invalid result number", ref.pos)
                    v = values[num]
                    if v.type is not ref.type:
                        raise self.error(
                            f"use of value '%{name}' expects different type than prior uses: '{ref.type}' vs '{v.type}'",
                            ref.pos,
                            [(pos, "prior use here")],
                        )
                    ref.replace_all_uses_with(v)

    def _push_isolated(self) -> None:
        self._scopes.append(self._scope)
        self._scope = _Scope()

    def _pop_isolated(self) -> None:
        sc = self._scope
        if sc.forward:
            first = min(ref.pos for fw in sc.forward.values() for ref in fw.values())
            raise self.error("use of undeclared SSA value name", first)
        self._scope = self._scopes.pop()

    # ---- blocks and regions -------------------------------------------------------------------

    def _block_ref(self, name: str, pos: int) -> Block:
        table = self._blocks[-1] if self._blocks else None
        if table is None:
            raise self.error("successor reference outside of a region", pos)
        e = table.get(name)
        if e is None:
            b = Block()
            table[name] = (b, pos, False)
            return b
        return e[0]

    def parse_successor(self) -> Block:
        pos = _WS.match(self.s, self.pos).end()
        self.pos = pos
        m = re.compile(r"\^([A-Za-z0-9_$.\-]+)").match(self.s, pos)
        if m is None:
            raise self.error("expected block name")
        self.pos = m.end()
        return self._block_ref(m.group(1), pos)

    def parse_optional_successor(self) -> Block | None:
        if self.peek() != "^":
            return None
        return self.parse_successor()

    def parse_successor_and_use_list(self) -> tuple[Block, list[Value]]:
        b = self.parse_successor()
        vals: list[Value] = []
        if self.parse_optional("("):
            us = self.parse_operand_list()
            ts = self.parse_colon_type_list()
            self.expect(")")
            vals = self.resolve_operands(us, ts)
        return b, vals

    def parse_argument(self, allow_type: bool = True, allow_attrs: bool = False) -> Argument:
        pos = _WS.match(self.s, self.pos).end()
        self.pos = pos
        m = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)").match(self.s, pos)
        if m is None:
            raise self.error("expected SSA identifier")
        self.pos = m.end()
        t = None
        if allow_type:
            self.expect(":")
            t = self.parse_type()
        attrs = None
        if allow_attrs and self.peek() == "{":
            attrs = self._parse_attr_dict_cached()
        self._pending_loc = None
        loc = self.parse_optional_location()
        arg = Argument(m.group(1), pos, t, attrs, loc)
        arg.pending = self._pending_loc
        self._pending_loc = None
        return arg

    def parse_optional_argument(self, allow_type: bool = True, allow_attrs: bool = False) -> Argument | None:
        if self.peek() != "%":
            return None
        return self.parse_argument(allow_type, allow_attrs)

    def parse_argument_list(
        self, delimiter: str = "paren", allow_type: bool = True, allow_attrs: bool = False
    ) -> list[Argument]:
        close = ")" if delimiter == "paren" else "]"
        self.expect("(" if delimiter == "paren" else "[")
        out: list[Argument] = []
        if self.parse_optional(close):
            return out
        out.append(self.parse_argument(allow_type, allow_attrs))
        while self.parse_optional(","):
            out.append(self.parse_argument(allow_type, allow_attrs))
        self.expect(close)
        return out

    def parse_region(
        self, arguments: Sequence[Argument] | None = None, isolated: bool | None = None
    ) -> Region:
        """A ``{ ... }`` region; ``arguments`` become the entry block's arguments (custom forms).
        ``isolated`` defaults to whether the op being parsed is IsolatedFromAbove."""
        if isolated is None:
            isolated = getattr(self, "_cur_isolated", False)
        region = Region()
        self._parse_region_into(region, arguments, isolated)
        return region

    def parse_optional_region(
        self, arguments: Sequence[Argument] | None = None, isolated: bool | None = None
    ) -> Region | None:
        if self.peek() != "{":
            return None
        return self.parse_region(arguments, isolated)

    def _parse_region_into(
        self, region: Region, arguments: Sequence[Argument] | None, isolated: bool
    ) -> None:
        self.expect("{")
        self._enter()
        if isolated:
            self._push_isolated()
        sc = self._scope
        sc.frames.append([])
        self._blocks.append({})
        try:
            self._parse_region_body(region, arguments)
        finally:
            self.depth -= 1
        table = self._blocks.pop()
        for _name, (_b, pos, defined) in table.items():
            if not defined:
                raise self.error("reference to an undefined block", pos)
        for name in sc.frames.pop():
            sc.values.pop(name, None)
            sc.def_pos.pop(name, None)
        if isolated:
            self._pop_isolated()

    def _parse_region_body(self, region: Region, arguments: Sequence[Argument] | None) -> None:
        s = self.s
        c = self.peek()
        if c == "}":
            self.pos += 1
            if arguments:
                b = Block()
                self._add_args(b, arguments)
                region.add_block(b)
            return
        if arguments is not None:
            b = Block()
            self._add_args(b, arguments)
            region.add_block(b)
            if c == "^":
                raise self.error("invalid block name in region with named arguments")
            self._parse_block_ops(b)
        elif c != "^":
            b = Block()
            region.add_block(b)
            self._parse_block_ops(b)
        while True:
            c = self.peek()
            if c == "}":
                self.pos += 1
                return
            if c != "^":
                if not c:
                    raise self.error("expected '}' to end region")
                raise self.error("expected block name or '}'")
            b = self._parse_block_header()
            region.add_block(b)
            self._parse_block_ops(b)
            _ = s

    def _add_args(self, b: Block, arguments: Sequence[Argument]) -> None:
        for a in arguments:
            if a.type is None:
                raise self.error("expected type for region argument", a.pos)
            arg = b.add_argument(a.type, a.location if a.location is not None else self.location_at(a.pos))
            self._define(a.name, (arg,), a.pos)
            if a.pending is not None:
                a.pending[0] = arg

    def _parse_block_header(self) -> Block:
        s = self.s
        pos = self.pos
        m = re.compile(r"\^([A-Za-z0-9_$.\-]+)").match(s, pos)
        if m is None:
            raise self.error("expected block name")
        name = m.group(1)
        self.pos = m.end()
        table = self._blocks[-1]
        e = table.get(name)
        if e is not None and e[2]:
            raise self.error(f"redefinition of block '^{name}'", pos)
        b = e[0] if e is not None else Block()
        table[name] = (b, pos, True)
        if self.parse_optional("(") and not self.parse_optional(")"):
            while True:
                a = self.parse_argument(True, False)
                assert a.type is not None
                arg = b.add_argument(
                    a.type, a.location if a.location is not None else self.location_at(a.pos)
                )
                if a.pending is not None:
                    a.pending[0] = arg
                self._define(a.name, (arg,), a.pos)
                if self.parse_optional(")"):
                    break
                self.expect(",", "in block argument list")
        self.expect(":", "after block name")
        return b

    def _parse_block_ops(self, block: Block) -> None:
        s = self.s
        ws = _WS
        fast = _OP_LINE.match
        fast_op = self._fast_op
        while True:
            pos = ws.match(s, self.pos).end()
            self.pos = pos
            c = s[pos : pos + 1]
            if c == "}" or c == "^" or not c:
                return
            m = fast(s, pos)
            op = None
            if m is not None:
                op = fast_op(m)
            if op is None:
                self.pos = pos
                op = self._parse_operation()
            block.append(op)

    def _fast_op(self, m: re.Match) -> Operation | None:
        """The common one-line generic op: ``%r = "name"(%a, %b) <{...}> {...} : (...) -> t loc(#x)``.
        Returns None (having consumed nothing) when anything needs the general path."""
        res_name, name, operand_text, props_text, attrs_text, ftext = m.groups()
        loc_alias = None
        if ftext.endswith(")"):
            i = ftext.rfind(" loc(")
            if i >= 0:
                lm = _TRAILING_LOC_ALIAS.match(ftext, i)
                if lm is None:
                    return None
                loc_alias = lm.group(1)
                loc_pos = m.start(6) + i + 6
                ftext = ftext[:i]
        try:
            cls = self._op_classes[name]
        except KeyError:
            return None
        sc = self._scope
        values = sc.values
        operand_names = operand_text.split(", ") if operand_text else ()
        ft = self._ftype_cache.get(ftext)
        if ft is None:
            return None
        in_types, out_types = ft
        if len(in_types) != len(operand_names):
            return None
        operands = []
        for nm, t in zip(operand_names, in_types):
            vals = values.get(nm[1:])
            if vals is None or len(vals) != 1 or vals[0].type is not t:
                return None
            operands.append(vals[0])
        if res_name is not None:
            if res_name in values or len(out_types) != 1:
                return None
        elif out_types:
            return None
        props: dict[str, Attribute]
        if props_text is not None:
            d = self._dict_cache.get(props_text)
            if d is None:
                d = self._fast_dict(props_text, m.start(4))
                if d is None:
                    return None
                self._dict_cache[props_text] = d
            props = dict(d)
        else:
            props = {}
        attrs: dict[str, Attribute]
        if attrs_text is not None:
            d = self._dict_cache.get(attrs_text)
            if d is None:
                d = self._fast_dict(attrs_text, m.start(5))
                if d is None:
                    return None
                if len(attrs_text) < 200 and len(self._dict_cache) < 100000:
                    self._dict_cache[attrs_text] = d
                attrs = dict(d)
            else:
                attrs = dict(d)
            if cls.op_def is not None:
                pn = cls.op_def.prop_names
                for k in [k for k in attrs if k in pn]:
                    props[k] = attrs.pop(k)
        else:
            attrs = {}
        op = cls.create(operands, out_types, props, attrs, (), (), _UNKNOWN, name=name)
        if loc_alias is not None:
            op._parsed_at = m.start(2) - 1  # where the op is written (see SourceText)
            a = self.attr_aliases.get(loc_alias)
            if isinstance(a, Location):
                op.location = a
            elif a is None:
                self._loc_fixups.append([op, loc_alias, loc_pos])
                op.location = _UNKNOWN
            else:
                raise self.error(f"expected location attribute, but got#{loc_alias}", loc_pos)
        else:
            op.location = self.location_at(m.start(2) - 1)
        if res_name is not None:
            values[res_name] = op.results
            sc.def_pos[res_name] = m.start()
            sc.frames[-1].append(res_name)
            if sc.forward:
                fw = sc.forward.pop(res_name, None)
                if fw is not None:
                    sc.forward[res_name] = fw
                    del values[res_name]
                    self._define(res_name, op.results, m.start())
        self.pos = m.end()
        return op

    def _fast_dict(self, text: str, start: int) -> dict[str, Attribute] | None:
        """Parse ``{a = v, ...}`` whose values are simple (strings, numbers, keywords, dense
        arrays); None when the general parser is needed."""
        out: dict[str, Attribute] = {}
        if text == "{}":
            return out
        cache = self._attr_cache
        pos = 1
        n = len(text)
        entry = _DICT_ENTRY.match
        while pos < n:
            em = entry(text, pos)
            if em is None:
                return None
            key, value = em.group(1), em.group(2)
            if key in out:
                return None
            if value is None:
                out[key] = UnitAttr()
            else:
                a = cache.get(value)
                if a is None:
                    if value[0] == '"':
                        a = _string_attr(value[1:-1])
                    else:
                        self.pos = start + em.start(2)
                        a = self.parse_attribute()
                        if self.pos != start + em.end(2):
                            return None
                    cache[value] = a
                out[key] = a
            pos = em.end()
        return out

    # ---- operations -------------------------------------------------------------------------------

    def _op_class(self, name: str, pos: int) -> Any:
        try:
            return self._op_classes[name]
        except KeyError:
            pass
        cls = self.ctx.get_op_class(name)
        if cls is None:
            dot = name.find(".")
            dialect = name[:dot] if dot > 0 else ""
            if dialect and self.ctx.get_dialect(dialect) is not None and not self._allow_unreg:
                raise self.error(
                    f"unregistered operation '{name}' found in dialect ('{dialect}') that does not allow unknown operations",
                    max(0, pos - len(name) - 2),
                )
            if not self._allow_unreg:
                raise self.error(
                    "operation being parsed with an unregistered dialect. If this is intended, please use "
                    "-allow-unregistered-dialect with the MLIR tool used",
                    pos,
                )
            cls = UnregisteredOp
        self._op_classes[name] = cls
        return cls

    def _parse_result_defs(self) -> list[tuple[str, int, int]]:
        s = self.s
        defs: list[tuple[str, int, int]] = []
        while True:
            pos = _WS.match(s, self.pos).end()
            m = _RESULT_DEF.match(s, pos)
            if m is None:
                raise self.error("expected SSA identifier", pos)
            count = m.group(2)
            end = m.end()
            if count is None:
                mc = _RESULT_COUNT.match(s, end)  # `%0 : 2` (MLIR allows whitespace around ':')
                if mc is not None:
                    count, end = mc.group(1), mc.end()
            n = _int(count) if count else 1
            if count is not None and not 0 < n < 1 << 64:
                raise self.error("expected named operation to have at least 1 result", pos)
            defs.append((m.group(1), n, pos))
            self.pos = end
            if not self.parse_optional(","):
                break
        self.expect("=", "after SSA name")
        return defs

    def _parse_operation(self) -> Operation:
        s = self.s
        op_start = self.pos
        defs = None
        if s.startswith("%", op_start):
            m = _FAST_RESULT.match(s, op_start)
            if m is not None:
                defs = [(m.group(1), _int(m.group(2)) if m.group(2) else 1, op_start)]
                if not 0 < defs[0][1] < 1 << 64:
                    raise self.error("expected named operation to have at least 1 result", op_start)
                self.pos = m.end()
            else:
                defs = self._parse_result_defs()
                self.skip()
        name_pos = self.pos
        c = s[name_pos : name_pos + 1]
        if c == '"':
            op = self._parse_generic_op(defs, name_pos)
        elif (c.isascii() and c.isalpha()) or c == "_":
            op = self._parse_custom_op(defs, name_pos)
        elif not c:
            raise self.error("expected operation name in quotes")
        else:
            if c in "$`~&|\\?" or ord(c) > 127 or (ord(c) < 32 and c not in "\t\r\n"):
                raise self.error("unexpected character")
            raise self.error("expected operation name in quotes")
        if defs is not None:
            res = op.results
            if len(defs) == 1:
                nm, n, p = defs[0]
                if n != len(res):
                    raise self.error(
                        f"operation defines {len(res)} results but was provided {n} to bind", op_start
                    )
                self._define(nm, res, p)
            else:
                total = sum(n for _, n, _ in defs)
                if total != len(res):
                    raise self.error(
                        f"operation defines {len(res)} results but was provided {total} to bind", op_start
                    )
                i = 0
                for nm, n, p in defs:
                    self._define(nm, res[i : i + n], p)
                    i += n
        return op

    def _parse_generic_op(self, defs: list[tuple[str, int, int]] | None, name_pos: int) -> Operation:
        s = self.s
        m = _SIMPLE_STRING.match(s, name_pos)
        if m is None:
            self.pos = name_pos
            name = self.parse_string()
        else:
            name = m.group(1)
            self.pos = m.end()
        if not name:
            raise self.error("empty operation name is invalid", name_pos)
        try:
            cls = self._op_classes[name]
        except KeyError:
            cls = self._op_class(name, self.pos)
        # operands
        pos = self.pos
        operands: list[Value] = []
        operands_u: list[tuple[str, int, int]] | None = None
        m = _OPERANDS.match(s, pos)
        if m is not None:
            body = m.group(1)
            if body:
                operands_u = []
                base = pos + 1
                off = 0
                for part in body.split(","):
                    stripped = part.strip()
                    um = _VALUE_USE.fullmatch(stripped)
                    p = base + off + (len(part) - len(part.lstrip()))
                    if um is None:
                        self.pos = p
                        raise self.error(
                            "invalid SSA name" if stripped.startswith("%") else "expected SSA operand"
                        )
                    g2 = um.group(2)
                    operands_u.append((um.group(1), _int(g2) if g2 else 0, p))
                    off += len(part) + 1
            pos = m.end()
        else:
            self.expect("(", "to start operand list")
            us = self.parse_operand_list()
            if not self.parse_optional(")"):
                raise self.error("expected ')' to end operand list")
            operands_u = [(u.name, u.number, u.pos) for u in us]
            pos = self.pos
        # successors
        succs: list[Block] = []
        if not s.startswith("[", pos) and s.startswith(("[", " ", "\n", "\t", "\r", "/"), pos):
            ws_end = _WS.match(s, pos).end()  # MLIR allows whitespace before the successor list
            if s.startswith("[", ws_end):
                pos = ws_end
        if s.startswith("[", pos):
            self.pos = pos + 1
            succs.append(self.parse_successor())
            while self.parse_optional(","):
                succs.append(self.parse_successor())
            self.expect("]", "to end successor list")
            pos = self.pos
        props: dict[str, Attribute] = {}
        attrs: dict[str, Attribute] = {}
        if not s.startswith(" ", pos) or s.startswith("  ", pos):
            pos = _WS.match(s, pos).end()
        else:
            pos += 1
        if s.startswith("<", pos):
            self.pos = _WS.match(s, pos + 1).end()
            if not s.startswith("{", self.pos):
                raise self.error("expected '{' to start properties")
            props = self._parse_attr_dict_cached()
            if not self.parse_optional(">"):
                raise self.error("expected '>' to close properties")
            pos = self.pos
            if s.startswith(" ", pos) and not s.startswith("  ", pos):
                pos += 1
            else:
                pos = _WS.match(s, pos).end()
        regions: list[Region] = []
        if s.startswith("(", pos):
            self.pos = pos + 1
            isolated = _is_isolated(cls)
            self._parent_ops.append(_FakeParent(cls, name))
            try:
                while True:
                    r = Region()
                    self._parse_region_into(r, None, isolated)
                    regions.append(r)
                    if not self.parse_optional(","):
                        break
            finally:
                self._parent_ops.pop()
            self.expect(")", "to end region list")
            pos = _WS.match(s, self.pos).end()
        if s.startswith("{", pos):
            self.pos = pos
            attrs = self._parse_attr_dict_cached()
            pos = self.pos
            if s.startswith(" ", pos) and not s.startswith("  ", pos):
                pos += 1
            else:
                pos = _WS.match(s, pos).end()
        if not s.startswith(":", pos):
            self.pos = pos
            raise self.error("expected ':' followed by operation type")
        fpos = pos + 2 if s.startswith(": ", pos) else _WS.match(s, pos + 1).end()
        eol = s.find("\n", fpos)
        if eol < 0:
            eol = self.n
        li = s.find(" loc(", fpos, eol)
        key = s[fpos:li] if li >= 0 else s[fpos:eol].rstrip()
        ft = self._ftype_cache.get(key)
        if ft is not None:
            self.pos = fpos + len(key)
        else:
            self.pos = fpos
            ty = self.parse_type()
            if not isinstance(ty, FunctionType):
                raise self.error("expected function type", fpos)
            ft = (ty.inputs, ty.results)
            if s[fpos : self.pos] == key:
                self._ftype_cache[key] = ft
        in_types, out_types = ft
        if operands_u is not None:
            if len(in_types) != len(operands_u):
                raise self.error(
                    f"expected {len(operands_u)} operand type{'s' if len(operands_u) != 1 else ''} but had {len(in_types)}",
                    fpos,
                )
            values = self._scope.values
            resolve = self._resolve
            for (nm, num, p), t in zip(operands_u, in_types):
                vals = values.get(nm)
                if vals is not None and num < len(vals) and vals[num].type is t:
                    operands.append(vals[num])
                else:
                    operands.append(resolve(nm, num, t, p))
        elif in_types:
            raise self.error(f"expected 0 operand types but had {len(in_types)}", fpos)
        if attrs and cls.op_def is not None:
            pn = cls.op_def.prop_names
            for k in [k for k in attrs if k in pn]:
                props[k] = attrs.pop(k)
        op = cls.create(operands, out_types, props, attrs, regions, succs, _UNKNOWN, name=name)
        self._parse_op_location(op, name_pos)
        return op

    def _parse_op_location(self, op: Operation, name_pos: int) -> None:
        s = self.s
        pos = self.pos
        if s.startswith(" loc(", pos):
            pos += 1
        else:
            pos = _WS.match(s, pos).end()
            if not s.startswith("loc(", pos) and _LOC_KW.match(s, pos) is None:
                self.pos = pos
                op.location = self.location_at(name_pos)
                return
        op._parsed_at = name_pos  # the op names its own location: remember where it is written
        m = _LOC_ALIAS.match(s, pos)
        if m is not None:
            name = m.group(1)
            if "." in name:
                raise self.error(f"expected location attribute, but got#{name}", m.end() - 1)
            a = self.attr_aliases.get(name)
            if isinstance(a, Location):
                op.location = a
            elif a is None:
                self._loc_fixups.append([op, name, pos + 4])
                op.location = _UNKNOWN
            else:
                raise self.error(f"expected location attribute, but got#{name}", pos + 4)
            self.pos = m.end()
            return
        self.pos = pos
        self._pending_loc = None
        loc = self.parse_optional_location(None)
        if self._pending_loc is not None:
            self._pending_loc[0] = op
            self._pending_loc = None
        op.location = loc if loc is not None else self.location_at(name_pos)

    def _parse_custom_op(self, defs: list[tuple[str, int, int]] | None, name_pos: int) -> Operation:
        s = self.s
        m = _BARE_ID.match(s, name_pos)
        if m is None:
            raise self.error("expected operation name", name_pos)
        name = m.group()
        self.pos = m.end()
        cls = None
        candidates = [name] if "." in name else []
        if "." not in name:
            parent = self._parent_ops[-1]
            from lamina.ir.printer import _default_dialect

            dd = _default_dialect(parent)
            if dd:
                candidates.append(dd + "." + name)
            candidates.append("builtin." + name)
        else:
            candidates.append("builtin." + name)
        for cand in candidates:
            c = self.ctx.get_op_class(cand)
            if c is not None:
                cls = c
                break
        if cls is None or not cls.has_custom_assembly:
            dot = name.find(".")
            if dot > 0 and self.ctx.get_dialect(name[:dot]) is None and not self._allow_unreg:
                raise self.error(
                    "operation being parsed with an unregistered dialect. If this is intended, please use "
                    "-allow-unregistered-dialect with the MLIR tool used",
                    self.pos,
                )
            raise self.error(f"custom op '{name}' is unknown", name_pos)
        self.result_count = sum(n for _, n, _ in defs) if defs else 0
        saved_iso = getattr(self, "_cur_isolated", False)
        self._cur_isolated = _is_isolated(cls)
        self._parent_ops.append(_FakeParent(cls, cls.name))
        self._op_start = name_pos
        try:
            hooks = _hooks(cls)
            if "parse" in hooks:
                op = cls.parse(self)
            elif getattr(cls, "assembly_format", None):
                from lamina.ir.assembly_format import get_format

                op = get_format(cls).parse(self, cls)
            else:
                op = cls.parse(self)
        finally:
            self._parent_ops.pop()
            self._cur_isolated = saved_iso
        if not isinstance(op, Operation):
            raise self.error(f"custom parser of '{cls.name}' did not return an operation", name_pos)
        self._parse_op_location(op, name_pos)
        return op

    def create_op(
        self,
        cls: Any,
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        properties: dict[str, Attribute] | None = None,
        attributes: dict[str, Attribute] | None = None,
        regions: Sequence[Region] = (),
        successors: Sequence[Block] = (),
    ) -> Operation:
        """Create the op a custom parser read (the location is set by the parser afterwards)."""
        return cls.create(
            list(operands),
            list(result_types),
            properties or {},
            attributes or {},
            list(regions),
            list(successors),
        )

    # ---- top level -------------------------------------------------------------------------------

    def _parse_alias_def(self) -> None:
        s = self.s
        start = self.pos
        sigil = s[start]
        m = _ALIAS_NAME.match(s, start + 1)
        if m is None:
            raise self.error("expected alias name", start + 1)
        name = m.group()
        self.pos = m.end()
        if "." in name:
            raise self.error("expected alias name without '.'", start + 1)
        self.expect("=", "in alias definition")
        if sigil == "!":
            if name in self.type_aliases:
                raise self.error(f"redefinition of type alias id '{name}'", start)
            self.type_aliases[name] = self.parse_type()
        else:
            if name in self.attr_aliases:
                raise self.error(f"redefinition of attribute alias id '{name}'", start)
            self.attr_aliases[name] = self.parse_attribute()

    def _parse_file_metadata(self) -> None:
        self.expect("{-#")
        while True:
            if self.parse_optional("#-}"):
                return
            kw = self.parse_keyword()
            self.expect(":")
            self.expect("{")
            if kw == "dialect_resources" or kw == "external_resources":
                while not self.parse_optional("}"):
                    dialect_pos = self.pos
                    m = _ALIAS_NAME.match(self.s, _WS.match(self.s, self.pos).end())
                    if m is None:
                        raise self.error("expected dialect name in resource section")
                    dialect = m.group()
                    self.pos = m.end()
                    self.expect(":")
                    self.expect("{")
                    while not self.parse_optional("}"):
                        self.skip()
                        kpos = self.pos
                        if self.s.startswith('"', kpos):
                            key = self.parse_string()
                        else:
                            km = _ALIAS_NAME.match(self.s, kpos)
                            if km is None:
                                raise self.error("expected resource key")
                            key = km.group()
                            self.pos = km.end()
                        self.expect(":")
                        self.skip()
                        vpos = self.pos
                        if self.s.startswith('"', vpos):
                            end = self.s.find('"', vpos + 1)
                            if end < 0:
                                raise self.error("expected '\"' in string literal", vpos)
                            text = self.s[vpos + 1 : end]
                            self.pos = end + 1
                            if kw == "dialect_resources" and dialect == "builtin":
                                self._define_blob(key, text, vpos)
                        else:
                            self.parse_attribute()
                        if not self.parse_optional(","):
                            self.expect("}", "in resource section")
                            break
                    if not self.parse_optional(","):
                        self.expect("}", "in resource section")
                        break
                    _ = dialect_pos
            else:
                depth = 1
                while depth:
                    c = self.s[self.pos : self.pos + 1]
                    if not c:
                        raise self.error("unterminated file metadata section")
                    if c == "{":
                        depth += 1
                    elif c == "}":
                        depth -= 1
                    self.pos += 1
            self.parse_optional(",")

    def _define_blob(self, key: str, text: str, pos: int) -> None:
        if not text.startswith("0x") or len(text) < 10:
            raise self.error("expected hex string blob for resource", pos)
        try:
            align = int.from_bytes(bytes.fromhex(text[2:10]), "little")
            data = bytes.fromhex(text[10:])
        except ValueError:
            raise self.error("malformed hex string blob for resource", pos) from None
        h = self.ctx.resources.get_or_create(key)
        h.blob = ResourceBlob(data, align or 1)

    def parse_top_level(self) -> Operation:
        ops: list[Operation] = []
        top = Block()
        self._blocks.append({})
        while True:
            c = self.peek()
            if not c:
                break
            if c == "#":
                m = _ALIAS_LOC_LINE.match(self.s, self.pos)
                if m is not None:
                    name = m.group(1)
                    if name in self.attr_aliases:
                        raise self.error(f"redefinition of attribute alias id '{name}'")
                    key = m.group(2)
                    loc = self._loc_cache.get(key)
                    if loc is None and m.group(3) is None and "\\" not in key:
                        loc = self._loc_cache[key] = _name_loc(key[1:-1])
                    if loc is None:
                        self.pos = m.start(2) - 1
                        loc = self.parse_location_body(False)
                        self._loc_cache[key] = loc
                    self.attr_aliases[name] = loc
                    self.pos = m.end()
                    continue
            if c == "#" or c == "!":
                m = re.compile(r"[#!][A-Za-z_][A-Za-z0-9_$.\-]*\s*=").match(self.s, self.pos)
                if m is not None:
                    self._parse_alias_def()
                    continue
            if self.s.startswith("{-#", self.pos):
                self._parse_file_metadata()
                continue
            op = self._parse_operation()
            top.append(op)
            ops.append(op)
        table = self._blocks.pop()
        for _name, (_b, pos, defined) in table.items():
            if not defined:
                raise self.error("reference to an undefined block", pos)
        if self._scope.forward:
            self._pop_isolated_top()
        self._apply_loc_fixups()
        from lamina.ir.builtin import ModuleOp

        if len(ops) == 1 and isinstance(ops[0], ModuleOp):
            module = ops[0]
            module.detach()
        else:
            module = ModuleOp.new(loc=FileLineColLoc(self.filename, self.line_offset, 0))
            for op in ops:
                op.detach()
                module.body.append(op)
        module._source = SourceText(self.filename, self.s, self.line_offset)
        return module

    def _pop_isolated_top(self) -> None:
        sc = self._scope
        first = min(ref.pos for fw in sc.forward.values() for ref in fw.values())
        raise self.error("use of undeclared SSA value name", first)

    def _apply_loc_fixups(self) -> None:
        for owner, name, pos in self._loc_fixups:
            a = self.attr_aliases.get(name)
            if a is None:
                raise self.error("operation location alias was never defined", pos)
            if not isinstance(a, Location):
                raise self.error(f"expected location attribute, but got#{name}", pos)
            if owner is not None:
                owner.location = a
        self._loc_fixups = []


class _FakeParent:
    """Stands for the op being parsed by a custom hook when resolving default dialects."""

    __slots__ = ("cls", "name")

    def __init__(self, cls: Any, name: str) -> None:
        self.cls = cls
        self.name = name

    def __getattr__(self, item: str) -> Any:
        return getattr(self.cls, item)


def _is_isolated(cls: Any) -> bool:
    from lamina.ir.traits import IsolatedFromAbove

    return IsolatedFromAbove in getattr(cls, "traits", ())


def _hooks(cls: type) -> set[str]:
    from lamina.ir.printer import _own_hooks

    return _own_hooks(cls)


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


def _report(ctx: Context, p: Parser, e: ParseError) -> None:
    ctx.diagnostics.emit(p.make_diagnostic(e))


def parse_module(text: str, ctx: Context, filename: str = "<stdin>", line_offset: int = 0) -> Any:
    """Parse a module (top-level ops are wrapped in one as ``mlir-opt`` does).

    Errors are reported as located diagnostics to ``ctx.diagnostics``; returns None on error.
    """
    p = Parser(text, ctx, filename, line_offset)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the IR is a large graph of small objects: collections would cost ~30%
    try:
        module = p.parse_top_level()
        _load_external_weights(module, ctx, p, filename)
        return module
    except ParseError as e:
        _report(ctx, p, e)
    except RecursionError:
        _report(ctx, p, ParseError(p.pos, "nesting is too deep"))
    except Exception as e:  # a bug in a custom parser hook must not escape as a traceback
        _report(ctx, p, ParseError(p.pos, f"internal error while parsing: {type(e).__name__}: {e}"))
    finally:
        if gc_was_enabled:
            gc.enable()
    return None


def _load_external_weights(module: Operation, ctx: Context, p: Parser, filename: str) -> None:
    """Attach the blobs of the ``.npz`` named by ``lamina.weight_file`` (loaded lazily), after
    checking the file and each blob's dtype and element count (from its ``.npy`` header) against
    the type of the ``dense_resource`` that uses it."""
    wf = module.attributes.get(WEIGHT_FILE_ATTR)
    if wf is None:
        return
    start = max(p.s.find(WEIGHT_FILE_ATTR), 0)
    if not isinstance(wf, StringAttr):
        raise ParseError(start, f"'{WEIGHT_FILE_ATTR}' must be a string")
    path = wf.value
    if not os.path.isabs(path) and filename and not filename.startswith("<"):
        path = os.path.join(os.path.dirname(os.path.abspath(filename)), path)
    name = wf.value
    if not os.path.exists(path):
        raise ParseError(start, f"weight file '{name}' not found (looked for '{path}')")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ParseError(start, f"cannot read weight file '{name}': {e.strerror or e}") from None
    if magic not in (b"PK\x03\x04", b"PK\x05\x06"):
        raise ParseError(start, f"weight file '{name}' is not an .npz file (it is not a zip archive)")
    try:
        npz = np.load(path, allow_pickle=False)
        keys = set(npz.files)
    except Exception as e:
        raise ParseError(start, f"weight file '{name}' is not a valid .npz file: {e}") from None
    align: dict[str, int] = {}
    if "__lamina_resource_alignments__" in keys:
        try:
            align = json.loads(bytes(npz["__lamina_resource_alignments__"]).decode())
        except ValueError:
            align = {}
    for key, h in p._resource_handles.items():
        if h.blob is not None:
            continue
        if key not in keys:
            raise ParseError(start, f"resource '{key}' not found in weight file '{name}'")
        expected = p._resource_types[key]
        try:
            found = _npz_member_header(npz, key)
        except Exception as e:
            raise ParseError(start, f"weight file '{name}': cannot read '{key}': {e}") from None
        problem = _blob_mismatch(found[0], found[1], expected)
        if problem:
            raise ParseError(start, f"weight file '{name}': '{key}' {problem}")
        h.blob = ResourceBlob(None, int(align.get(key, 16)), _npz_loader(npz, key, name, expected))
    del module.attributes[WEIGHT_FILE_ATTR]


def _npz_member_header(npz: Any, key: str) -> tuple[np.dtype, tuple[int, ...]]:
    """dtype and shape of one array of an open ``.npz`` from its ``.npy`` header (no data read)."""
    with npz.zip.open(key + ".npy") as f:
        fmt = np.lib.format
        major, _ = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, _, dtype = read(f)
    return dtype, shape


def _blob_mismatch(dtype: np.dtype, shape: tuple[int, ...], t: ShapedType) -> str:
    """Why an array of ``dtype``/``shape`` cannot hold a ``t`` (empty when it can).

    A blob may also be raw bytes (uint8, as written for byte blobs), an opaque ``V<n>`` dtype of the
    right item size (how numpy stores bf16/f8 arrays) or the unsigned integer of the element's width
    (how ``model_deploy`` writes f16/bf16 weights: their bit patterns) holding exactly the type's
    bytes."""
    want = element_type_to_dtype(t.element_type)
    n = 1
    for d in shape:
        n *= d
    if dtype == want:
        if n != t.num_elements:
            return f"has shape {tuple(shape)} ({n} elements), expected {t.num_elements} elements for '{t}'"
        return ""
    raw = dtype == np.uint8 or (dtype.kind in "Vu" and dtype.itemsize == want.itemsize)
    if raw and n * dtype.itemsize == t.num_elements * want.itemsize:
        return ""
    return f"has dtype {dtype} and shape {tuple(shape)}, expected dtype {want} ({t.num_elements} elements) for '{t}'"


def _npz_loader(npz: Any, key: str, name: str, t: ShapedType) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        try:
            a = npz[key]
        except Exception as e:
            raise ResourceError(f"weight file '{name}': cannot read '{key}': {e}") from None
        problem = _blob_mismatch(a.dtype, a.shape, t)
        if problem:  # the file changed since it was parsed
            raise ResourceError(f"weight file '{name}': '{key}' {problem}")
        return a

    return load


def _parse_fragment(text: str, ctx: Context, fn: Callable[[Parser], Any]) -> Any:
    p = Parser(text, ctx, "<string>")
    try:
        r = fn(p)
        if not p.at_end():
            raise p.error("unexpected trailing text")
        return r
    except ParseError as e:
        _report(ctx, p, e)
    except RecursionError:
        _report(ctx, p, ParseError(p.pos, "nesting is too deep"))
    except Exception as e:
        _report(ctx, p, ParseError(p.pos, f"internal error while parsing: {type(e).__name__}: {e}"))
    return None


def parse_type(text: str, ctx: Context) -> Type | None:
    """Parse one type; None (with a diagnostic) on error."""
    return _parse_fragment(text, ctx, lambda p: p.parse_type())


def parse_attribute(text: str, ctx: Context) -> Attribute | None:
    """Parse one attribute; None (with a diagnostic) on error."""
    return _parse_fragment(text, ctx, lambda p: p.parse_attribute())

"""Parsing locations (``loc(...)``): file/line/col, names, call sites, fused locations and
``#alias`` references, which may be defined after their use (resolved at the end of the parse)."""

from __future__ import annotations

import re
from typing import Any

from lamina.ir.location import CallSiteLoc, FileLineColLoc, Location, NameLoc, UnknownLoc, fuse
from lamina.ir.parser.attributes import AttributeParser
from lamina.ir.parser.lexer import _ALIAS_NAME, _WS

#: ``loc`` and its ``(`` with whitespace between (MLIR lexes them as two tokens).
_LOC_KW = re.compile(r"loc(?:[ \t\r\n]+|//[^\n]*)+(?=\()")
_LOC_ALIAS = re.compile(r"loc\(#([A-Za-z0-9_$.\-]+)\)")
_LOC_SIMPLE = re.compile(r'loc\(("[^"\\\n]*"(?::[0-9]+:[0-9]+)?)\)')
_UNKNOWN = UnknownLoc()


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


class LocationParser(AttributeParser):
    """``parse_optional_location`` and the ``loc(...)`` grammar."""

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

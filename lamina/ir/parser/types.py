"""Parsing builtin and dialect types (MLIR's ``TypeParser.cpp``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from lamina.ir.attributes import Attribute, IntegerAttr
from lamina.ir.parser.lexer import _ALIAS_NAME, _IDENT, _INT_TYPE, _KEYWORD, _SIMPLE_TYPES, _WS, Lexer, _int
from lamina.ir.types import (
    DYNAMIC,
    FunctionType,
    IntegerType,
    MemRefType,
    OpaqueType,
    RankedTensorType,
    ShapedType,
    TupleType,
    Type,
    UnrankedTensorType,
    VectorType,
)

_SIMPLE_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:<[A-Za-z0-9_?*]*>)?")
_DIM_X = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*([0-9]+|\?|\[[0-9]+\])(?:[ \t\r\n]+|//[^\n]*)*x")


class TypeParser(Lexer):
    """``parse_type`` and friends; types are memoised by their exact text within one parse."""

    if TYPE_CHECKING:

        def parse_attribute(self, type: Type | None = None) -> Attribute: ...

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
        m2 = _IDENT.match(s, pos)
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
        layout: Attribute | None = None
        space: Attribute | None = None
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
            cls: Any = d.types[mnemonic]  # a DialectType subclass
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

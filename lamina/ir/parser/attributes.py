"""Parsing attributes (MLIR's ``AttributeParser.cpp``): builtin attributes, attribute
dictionaries, dense elements and arrays, ``dense_resource`` handles and the file's
``{-# dialect_resources ... #-}`` section (the blobs behind them)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

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
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
    element_type_to_dtype,
)
from lamina.ir.floatfmt import bits_to_float
from lamina.ir.location import Location
from lamina.ir.parser.lexer import (
    _ALIAS_NAME,
    _BARE_ID,
    _IDENT,
    _KEYWORD,
    _NUMBER,
    _WS,
    ParseError,
    _int,
    _int_fits,
    _string_attr,
)
from lamina.ir.parser.types import TypeParser
from lamina.ir.types import FloatType, IndexType, IntegerType, RankedTensorType, ShapedType, Type, VectorType
from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

_SIMPLE_DICT = re.compile(r'\{(?:[^{}"\n]|"(?:[^"\\\n]|\\.)*")*\}')
_DICT_ENTRY = re.compile(
    r'([A-Za-z_][A-Za-z0-9_$.]*)(?: = ("[^"\\\n]*"|[A-Za-z0-9_@.\-]+(?: : [A-Za-z0-9_]+)?'
    r"|array<[A-Za-z0-9_]+(?:: [0-9a-z., +\-]*)?>))?(?:, |\}\Z)"
)
# An attribute value whose text alone determines it (memoised by text within one parse).
_SIMPLE_VALUE = re.compile(
    r'(?:"[^"\\\n]*"|[A-Za-z0-9_@.\-]+(?: : [A-Za-z0-9_]+)?|array<[A-Za-z0-9_]+(?:: [0-9a-z., +\-]*)?>)(?=[,}\]])'
)
_DENSE_SPLAT = re.compile(r"-?(?:0x[0-9a-fA-F]+|[0-9]+(?:\.[0-9]*(?:[eE][+-]?[0-9]+)?)?|inf|nan)|true|false")


class AttributeParser(TypeParser):
    """``parse_attribute`` and friends; attribute dictionaries and simple values are memoised by
    their exact text within one parse."""

    if TYPE_CHECKING:

        def parse_location_body(self, allow_forward: bool, owner: Any = None) -> Location: ...

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
            truth = kw == "true"
            if self.parse_optional(":"):
                t = self.parse_type()
                return IntegerAttr(1 if truth else 0, t)
            return BoolAttr(truth)
        if kw == "unit":
            self.pos = m.end()
            return UnitAttr()
        kw2 = _IDENT.match(s, pos).group()  # type: ignore[union-attr]
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
        ty = self.parse_optional_type()
        if ty is not None:
            return TypeAttr(ty)
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
            attr_cls: Any = d.attributes[mnemonic]  # a dialect attribute class
            return attr_cls.parse_body(self)
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
        """An attribute dictionary, memoised by its text within one parse. A dictionary on one
        line whose entries are simple (``key = value`` with a string, number, keyword or dense
        array value) is read entry by entry with values memoised by their text, so the unique
        dictionaries of a model (each op's name) cost little; anything else takes
        :meth:`_parse_dict_entries`."""
        s = self.s
        pos = self.pos
        m = _SIMPLE_DICT.match(s, pos, min(self.n, pos + 4096))
        self._enter()
        try:
            if m is not None:
                key = m.group()
                d = self._dict_cache.get(key)
                if d is None:
                    d = self._fast_dict(key, pos)
                    if d is not None:
                        self._dict_cache[key] = d
                if d is not None:
                    self.pos = m.end()
                    return dict(d)
                self.pos = pos
            d = self._parse_dict_entries()
        finally:
            self.depth -= 1
        if m is not None and self.pos == m.end():
            self._dict_cache[m.group()] = d
            return dict(d)
        return d

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
            m = _DENSE_SPLAT.match(s, start)
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
            ivals: list[int] = []
            for tk in toks:
                if "." in tk or ("e" in tk.lower() and "x" not in tk):
                    raise self.error("expected integer elements, but parsed floating-point", pos) from None
                v = _int(tk)
                if not _int_fits(v, et):
                    raise self.error("integer constant out of range for type", pos) from None
                ivals.append(v)
            w = dt.itemsize * 8
            ivals = [v & ((1 << w) - 1) for v in ivals]
            return (
                np.array(ivals, dtype=np.uint64 if w == 64 else np.int64)
                .astype(np.dtype(f"uint{w}"))
                .view(dt)
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

    # ---- the resource section ---------------------------------------------------------------

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

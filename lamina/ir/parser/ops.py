"""Parsing operations, blocks and regions (MLIR's ``Parser.cpp`` ``OperationParser``): SSA
names and their scopes, the generic op form, custom forms (op ``parse`` hooks and declarative
assembly formats), successors, aliases and the top level of a file."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, cast

from lamina.ir.attributes import Attribute
from lamina.ir.context import Context
from lamina.ir.core import Block, Operation, Region, UnregisteredOp, Value
from lamina.ir.diagnostics import SourceText
from lamina.ir.location import FileLineColLoc, Location
from lamina.ir.parser.lexer import _ALIAS_NAME, _BARE_ID, _SIMPLE_STRING, _WS, _int
from lamina.ir.parser.locations import _LOC_ALIAS, _LOC_KW, _UNKNOWN, LocationParser, _name_loc
from lamina.ir.types import FunctionType, Type

_VALUE_USE = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)(?:#([0-9]+))?")
_OPERANDS = re.compile(r"\(([%#A-Za-z0-9_$.\-, ]*)\)")
_RESULT_DEF = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)(?::([0-9]+))?")
_RESULT_COUNT = re.compile(r"(?:[ \t\r\n]+|//[^\n]*)*:(?:[ \t\r\n]+|//[^\n]*)*([0-9]+)")
_FAST_RESULT = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)(?::([0-9]+))? = ")
_SSA_NAME = r"%(?:[0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)"
_FLAT_DICT = r'\{[^{}"\n]*(?:"[^"\\\n]*"[^{}"\n]*)*\}'
#: A generic op on one line in the printer's spacing, without successors or regions, up to its
#: type: name, operand list of plain uses (``%a, %b``), properties, attributes.
_GENERIC_LINE = re.compile(
    r'"([^"\\\n]+)"\(((?:'
    + _SSA_NAME
    + "(?:, "
    + _SSA_NAME
    + r")*)?)\)(?: <("
    + _FLAT_DICT
    + r")>)?(?: ("
    + _FLAT_DICT
    + r"))? : ([^\n]*)"
)
_ALIAS_LOC_LINE = re.compile(r'#([A-Za-z_][A-Za-z0-9_$.\-]*) = loc\(("[^"\\\n]*"(:[0-9]+:[0-9]+)?)\)')
_BLOCK_NAME = re.compile(r"\^([A-Za-z0-9_$.\-]+)")
_ARG_NAME = re.compile(r"%([0-9]+|[A-Za-z_$.\-][A-Za-z0-9_$.\-]*)")
_ALIAS_DEF = re.compile(r"[#!][A-Za-z_][A-Za-z0-9_$.\-]*\s*=")


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


class _Scope:
    """SSA names of one isolated-from-above region tree."""

    __slots__ = ("def_pos", "forward", "frames", "values")

    def __init__(self) -> None:
        self.values: dict[str, tuple[Value, ...]] = {}
        self.def_pos: dict[str, int] = {}
        self.forward: dict[str, dict[int, _ForwardRef]] = {}
        self.frames: list[list[str]] = [[]]


class Parser(LocationParser):
    """Parses MLIR text. Custom op hooks use the ``parse_*`` / ``resolve_*`` methods."""

    def __init__(self, text: str, ctx: Context, filename: str = "<stdin>", line_offset: int = 0) -> None:
        super().__init__(text, ctx, filename, line_offset)
        self._scope = _Scope()
        self._scopes: list[_Scope] = []
        self._blocks: list[dict[str, tuple[Block, int, bool]]] = []
        self._op_classes: dict[str, Any] = {}
        self._parent_ops: list[Any] = [None]  # Operation, _FakeParent or None
        self._pending_op_name = ""
        self.result_count = 0

    # ---- SSA values ------------------------------------------------------------------------

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
        m = _BLOCK_NAME.match(self.s, pos)
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
        m = _ARG_NAME.match(self.s, pos)
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
        m = _BLOCK_NAME.match(s, pos)
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
        parse_operation = self._parse_operation
        append = block.append
        while True:
            pos = ws.match(s, self.pos).end()
            self.pos = pos
            c = s[pos : pos + 1]
            if c == "}" or c == "^" or not c:
                return
            append(parse_operation())

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
                rname, count = m.groups()
                n = _int(count) if count else 1
                if not 0 < n < 1 << 64:
                    raise self.error("expected named operation to have at least 1 result", op_start)
                defs = [(rname, n, op_start)]
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
                sc = self._scope
                if sc.forward or nm in sc.values:
                    self._define(nm, res, p)
                else:  # what _define does for a new name with no forward uses
                    sc.values[nm] = res
                    sc.def_pos[nm] = p
                    sc.frames[-1].append(nm)
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
        """``"name"(operands) [successors] <{properties}> (regions) {attributes} : type loc(...)``.

        The usual op of a model is one line in the printer's spacing, without successors or
        regions and with flat dictionaries: :data:`_GENERIC_LINE` then finds every part in one
        match and the parts are read where it found them. Any other text is lexed part by part.
        Either way the parts go through the same code: operand uses, the attribute dictionaries
        (:meth:`_parse_attr_dict_cached`), the function type (memoised by its text), operand
        resolution, op creation and its location."""
        s = self.s
        operands: list[Value] = []
        operands_u: list[tuple[str, int, int]] | None = None
        line_uses: list[str] | None = None  # the plain uses of a one-line op (`%a`), positions on demand
        loc_alias: str | None = None  # a one-line op's `loc(#alias)` and where `loc(` is written
        loc_pos = 0
        succs: Sequence[Block] = ()
        regions: Sequence[Region] = ()
        props: dict[str, Attribute]
        attrs: dict[str, Attribute]
        line = _GENERIC_LINE.match(s, name_pos)
        if line is not None:
            name, body, ptext, atext, ftext = line.groups()
            try:
                cls = self._op_classes[name]
            except KeyError:
                cls = self._op_class(name, line.end(1) + 1)
            if body:  # `%a, %b`: a use's position follows from the lengths before it (on demand)
                line_uses = body.split(", ")
            if ptext is None:
                props = {}
            else:
                d = self._dict_cache.get(ptext)
                props = dict(d) if d is not None else self._attr_dict_at(ptext, line.start(3))
            if atext is None:
                attrs = {}
            else:
                d = self._dict_cache.get(atext)
                attrs = dict(d) if d is not None else self._attr_dict_at(atext, line.start(4))
            fpos = line.start(5)
            if ftext.endswith(")") and (i := ftext.rfind(" loc(")) >= 0:
                lm = _LOC_ALIAS.fullmatch(ftext, i + 1)
                if lm is not None and "." not in lm.group(1):
                    loc_alias, loc_pos = lm.group(1), fpos + i + 1
                key = ftext[:i]
            else:
                key = ftext.rstrip()
        else:
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
            m = _OPERANDS.match(s, pos)
            if m is not None:
                body = m.group(1)
                if body:
                    operands_u = self._operand_uses(body, pos + 1)
                pos = m.end()
            else:
                self.expect("(", "to start operand list")
                us = self.parse_operand_list()
                if not self.parse_optional(")"):
                    raise self.error("expected ')' to end operand list")
                operands_u = [(u.name, u.number, u.pos) for u in us]
                pos = self.pos
            # successors
            succs = []
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
            if not s.startswith(" ", pos) or s.startswith("  ", pos):
                pos = _WS.match(s, pos).end()
            else:
                pos += 1
            props = {}
            attrs = {}
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
            if s.startswith("(", pos):
                self.pos = pos + 1
                regions = []
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
        if line_uses is not None:
            if len(in_types) != len(line_uses):
                raise self.error(
                    f"expected {len(line_uses)} operand type{'s' if len(line_uses) != 1 else ''} but had {len(in_types)}",
                    fpos,
                )
            values = self._scope.values
            for j, (use, t) in enumerate(zip(line_uses, in_types)):
                vals = values.get(use[1:])
                if vals is not None and vals[0].type is t:
                    operands.append(vals[0])
                else:
                    p = line.start(2) + sum(len(u) + 2 for u in line_uses[:j])  # type: ignore[union-attr]
                    operands.append(self._resolve(use[1:], 0, t, p))
        elif operands_u is not None:
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
        if loc_alias is None or self.pos != loc_pos - 1:  # not just the type, then `loc(#alias)`
            self._parse_op_location(op, name_pos)
            return op
        op._parsed_at = name_pos  # the op names its own location: remember where it is written
        a = self.attr_aliases.get(loc_alias)
        if isinstance(a, Location):
            op.location = a
        elif a is None:
            self._loc_fixups.append([op, loc_alias, loc_pos + 4])
            op.location = _UNKNOWN
        else:
            raise self.error(f"expected location attribute, but got#{loc_alias}", loc_pos + 4)
        self.pos = line.end()  # type: ignore[union-attr]
        return op

    def _operand_uses(self, body: str, base: int) -> list[tuple[str, int, int]]:
        """The uses in the text of an operand list ``body`` starting at ``base``: (name, result
        number, position) each."""
        out: list[tuple[str, int, int]] = []
        off = 0
        for part in body.split(","):
            stripped = part.strip()
            um = _VALUE_USE.fullmatch(stripped)
            p = base + off + (len(part) - len(part.lstrip()))
            if um is None:
                self.pos = p
                raise self.error("invalid SSA name" if stripped.startswith("%") else "expected SSA operand")
            g2 = um.group(2)
            out.append((um.group(1), _int(g2) if g2 else 0, p))
            off += len(part) + 1
        return out

    def _attr_dict_at(self, text: str, pos: int) -> dict[str, Attribute]:
        """The attribute dictionary ``text`` found at ``pos``, not memoised yet (a copy of the one
        it memoises)."""
        d = self._fast_dict(text, pos)
        if d is None:
            self.pos = pos
            return self._parse_attr_dict_cached()
        self._dict_cache[text] = d
        return dict(d)

    def _parse_op_location(self, op: Operation, name_pos: int) -> None:
        """The op's ``loc(...)``, or the position of its name when it has none."""
        s = self.s
        pos = self.pos
        if s.startswith(" loc(", pos):
            pos += 1
        elif s.startswith("\n", pos):  # the usual op without one: the line ends
            op.location = self.location_at(name_pos)
            return
        else:
            pos = _WS.match(s, pos).end()
            if not s.startswith("loc", pos) or (
                not s.startswith("loc(", pos) and _LOC_KW.match(s, pos) is None
            ):
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
                op = cast(Any, cls).parse(self)
            elif getattr(cls, "assembly_format", None):
                from lamina.ir.assembly_format import get_format

                op = get_format(cls).parse(self, cls)
            else:
                op = cast(Any, cls).parse(self)
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
                m = _ALIAS_DEF.match(self.s, self.pos)
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

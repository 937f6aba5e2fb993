"""Declarative assembly formats (a subset of MLIR's ``assemblyFormat``).

An op declares ``assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"``; this module
compiles the string once per op class into a :class:`Format` whose ``print(op, printer)`` and
``parse(parser, cls)`` invert each other. Supported directives:

* ``$name`` — an operand (single, optional or variadic: a comma list), a property (printed as an
  attribute), a region, or a successor;
* `` `literal` `` — punctuation or a keyword;
* ``attr-dict`` / ``attr-dict-with-keyword`` — the properties and attributes not printed elsewhere;
* ``type($x)`` / ``type(operands)`` / ``type(results)`` and ``functional-type(operands, results)``;
* ``operands`` / ``results`` (in ``type``), ``regions``, ``successors``;
* optional groups ``( ... $anchor^ ... )?`` printed when the anchor is present.

Types not given by a ``type`` directive are inferred from the ``SameOperandsAndResultType`` trait
(all operand and result types equal to the one that is given). Spacing follows MLIR's generated
printers (no space before ``,`` ``)`` ``]`` ``>``, none after ``(`` ``[`` ``<``).
"""

from __future__ import annotations

import re
from typing import Any

from lamina.ir.attributes import DenseArrayAttr
from lamina.ir.core import Operation
from lamina.ir.opdef import OPERAND_SEGMENTS, OPTIONAL, RESULT_SEGMENTS, SINGLE, VARIADIC
from lamina.ir.types import IntegerType

__all__ = ["Format", "FormatError", "get_format"]

_TOKEN = re.compile(
    r"\s*(?:(`[^`]*`)|(\$[A-Za-z_][A-Za-z0-9_]*)|(attr-dict-with-keyword|attr-dict|functional-type|type|"
    r"operands|results|regions|successors)|(\()|(\))|(\?)|(\^)|(,))"
)


class FormatError(Exception):
    """The assembly format string of an op class is malformed."""


class _Elem:
    __slots__ = ("anchor", "args", "children", "is_anchor", "kind", "value")

    def __init__(self, kind: str, value: Any = None, args: list[Any] | None = None) -> None:
        self.kind = kind  # literal, var, attr-dict, attr-dict-kw, type, ftype, optional
        self.value = value
        self.args = args or []
        self.anchor: _Elem | None = None
        self.children: list[_Elem] = []
        self.is_anchor = False


def _tokens(fmt: str) -> list[str]:
    out = []
    pos = 0
    fmt = fmt.rstrip()
    while pos < len(fmt):
        m = _TOKEN.match(fmt, pos)
        if m is None or m.end() == pos:
            raise FormatError(f"bad assembly format near {fmt[pos : pos + 20]!r}")
        out.append(m.group().strip())
        pos = m.end()
    return out


class Format:
    """A compiled declarative format of one op class."""

    def __init__(self, cls: type, fmt: str) -> None:
        self.cls = cls
        od = cls.op_def  # type: ignore[attr-defined]
        self.operands = {f.name: f for f in od.operands}
        self.results = {f.name: f for f in od.results}
        self.props = {p.name: p for p in od.props}
        self.prop_fields: dict[str, Any] = {}
        for klass in cls.__mro__:
            for k, v in vars(klass).items():
                if type(v).__name__ == "PropDef":
                    self.prop_fields.setdefault(k, v)
        self.regions = {r.name: r for r in od.regions}
        self.successors = {s.name: s for s in od.successors}
        self.od = od
        toks = _tokens(fmt)
        self.elems, rest = self._parse_elems(toks, 0, top=True)
        if rest != len(toks):
            raise FormatError(f"{cls.__name__}: unbalanced parentheses in assembly format")
        self.printed_props: set[str] = set()
        self._collect_printed(self.elems)

    # ---- compile ------------------------------------------------------------------------

    def _var(self, name: str) -> _Elem:
        if name in self.operands:
            return _Elem("var", ("operand", self.operands[name]))
        if name in self.results:
            return _Elem("var", ("result", self.results[name]))
        if name in self.props:
            return _Elem("var", ("prop", self.props[name]))
        if name in self.prop_fields:
            return _Elem("var", ("prop", self.prop_fields[name]))
        if name in self.regions:
            return _Elem("var", ("region", self.regions[name]))
        if name in self.successors:
            return _Elem("var", ("successor", self.successors[name]))
        raise FormatError(f"{self.cls.__name__}: unknown variable '${name}' in assembly format")

    def _parse_elems(self, toks: list[str], i: int, top: bool) -> tuple[list[_Elem], int]:
        elems: list[_Elem] = []
        while i < len(toks):
            t = toks[i]
            if t == ")":
                if top:
                    raise FormatError("unbalanced ')' in assembly format")
                return elems, i
            if t.startswith("`"):
                elems.append(_Elem("literal", t[1:-1]))
                i += 1
            elif t.startswith("$"):
                elems.append(self._var(t[1:]))
                i += 1
            elif t in ("attr-dict", "attr-dict-with-keyword"):
                elems.append(_Elem("attr-dict-kw" if t.endswith("keyword") else "attr-dict"))
                i += 1
            elif t in ("type", "functional-type"):
                if i + 1 >= len(toks) or toks[i + 1] != "(":
                    raise FormatError(f"expected '(' after {t}")
                args: list[Any] = []
                j = i + 2
                while toks[j] != ")":
                    a = toks[j]
                    if a == ",":
                        j += 1
                        continue
                    args.append(a if a in ("operands", "results") else self._var(a[1:]))
                    j += 1
                elems.append(_Elem("type" if t == "type" else "ftype", None, args))
                i = j + 1
            elif t in ("regions", "successors"):
                elems.append(_Elem(t))
                i += 1
            elif t == "(":
                children, j = self._parse_elems(toks, i + 1, top=False)
                if j + 1 >= len(toks) or toks[j + 1] != "?":
                    raise FormatError("expected ')?' after optional group")
                g = _Elem("optional")
                g.children = children
                g.anchor = self._find_anchor(children) or (children[0] if children else None)
                elems.append(g)
                i = j + 2
            elif t == "^":
                if not elems:
                    raise FormatError("'^' must follow an element")
                elems[-1].is_anchor = True
                i += 1
            elif t == ",":
                i += 1
            else:
                raise FormatError(f"unexpected '{t}' in assembly format")
        return elems, i

    def _find_anchor(self, elems: list[_Elem]) -> _Elem | None:
        for e in elems:
            if e.is_anchor:
                return e
        return None

    def _collect_printed(self, elems: list[_Elem]) -> None:
        for e in elems:
            if e.kind == "var" and e.value[0] == "prop":
                self.printed_props.add(e.value[1].name)
            elif e.kind == "optional":
                self._collect_printed(e.children)

    # ---- print --------------------------------------------------------------------------

    def print(self, op: Operation, p: Any) -> None:
        state = [True, False]  # should_emit_space, last_was_punctuation
        self._print_elems(self.elems, op, p, state)

    def _present(self, e: _Elem, op: Operation) -> bool:
        if e.kind == "literal":
            return True
        if e.kind == "var":
            kind, f = e.value
            if kind == "operand":
                return bool(self._operand_values(op, f))
            if kind == "prop":
                return op.properties.get(f.name) is not None
            if kind == "region":
                return bool(op.regions[f.index].blocks)
            if kind == "result":
                return bool(self._result_values(op, f))
            return True
        if e.kind == "type" and e.args:
            a = e.args[0]
            if isinstance(a, _Elem):
                return self._present(a, op)
        return True

    def _operand_values(self, op: Operation, f: Any) -> list:
        lo, hi = self.od.operand_range(op, f.index)
        return [o.value for o in op.operand_uses[lo:hi]]

    def _result_values(self, op: Operation, f: Any) -> list:
        lo, hi = self.od.result_range(op, f.index)
        return list(op.results[lo:hi])

    def _space(self, p: Any, state: list[bool]) -> None:
        if state[0]:
            p.write(" ")
        state[0] = True
        state[1] = False

    def _print_elems(self, elems: list[_Elem], op: Operation, p: Any, state: list[bool]) -> None:
        for e in elems:
            k = e.kind
            if k == "literal":
                v = e.value
                if state[0] and _space_before(v, state[1]):
                    p.write(" ")
                p.write(v)
                state[0] = len(v) != 1 or v[0] not in "<({["
                state[1] = bool(v) and v[0] != "_" and not v[0].isalpha()
            elif k == "optional":
                if e.anchor is not None and self._present(e.anchor, op):
                    self._print_elems(e.children, op, p, state)
            elif k == "attr-dict" or k == "attr-dict-kw":
                merged = {
                    n: a
                    for n, a in op.properties.items()
                    if n not in self.printed_props and n not in (OPERAND_SEGMENTS, RESULT_SEGMENTS)
                }
                merged.update(op.attributes)
                if k == "attr-dict":
                    p.print_optional_attr_dict(merged)
                else:
                    p.print_optional_attr_dict_with_keyword(merged)
                state[0] = True
                state[1] = False
            elif k == "var":
                kind, f = e.value
                if kind == "operand":
                    vals = self._operand_values(op, f)
                    if not vals and f.kind != SINGLE:
                        continue
                    self._space(p, state)
                    p.print_operands(vals)
                elif kind == "prop":
                    a = op.properties.get(f.name)
                    if a is None:
                        continue
                    self._space(p, state)
                    p.print_attribute(a)
                elif kind == "region":
                    self._space(p, state)
                    p.print_region(op.regions[f.index])
                elif kind == "successor":
                    self._space(p, state)
                    succ = op.successors
                    if f.variadic:
                        for j, b in enumerate(succ[f.index :]):
                            if j:
                                p.write(", ")
                            p.print_successor(b)
                    else:
                        p.print_successor(succ[f.index])
                else:
                    raise FormatError("results cannot be printed directly; use type($result)")
            elif k == "type":
                types = self._types_of(e.args, op)
                if not types and any(isinstance(a, _Elem) and a.value[1].kind != SINGLE for a in e.args):
                    continue
                self._space(p, state)
                p.print_types(types)
            elif k == "ftype":
                ins = self._types_of(e.args[:1], op)
                outs = self._types_of(e.args[1:], op)
                self._space(p, state)
                p.print_function_type(ins, outs)
            elif k == "regions":
                for j, r in enumerate(op.regions):
                    if j:
                        p.write(",")
                    self._space(p, state)
                    p.print_region(r)
            elif k == "successors":
                self._space(p, state)
                for j, b in enumerate(op.successors):
                    if j:
                        p.write(", ")
                    p.print_successor(b)

    def _types_of(self, args: list[Any], op: Operation) -> list:
        out: list = []
        for a in args:
            if a == "operands":
                out.extend(op.operand_types)
            elif a == "results":
                out.extend(op.result_types)
            elif isinstance(a, _Elem):
                kind, f = a.value
                if kind == "operand":
                    out.extend(v.type for v in self._operand_values(op, f))
                elif kind == "result":
                    out.extend(r.type for r in self._result_values(op, f))
        return out

    # ---- parse --------------------------------------------------------------------------

    def parse(self, parser: Any, cls: type) -> Operation:
        st = _ParseState()
        self._parse_elems_into(self.elems, parser, st)
        return self._build(parser, cls, st)

    def _parse_elems_into(self, elems: list[_Elem], parser: Any, st: _ParseState) -> None:
        for e in elems:
            k = e.kind
            if k == "literal":
                self._parse_literal(e.value, parser)
            elif k == "optional":
                first = e.children[0] if e.children else None
                if first is None:
                    continue
                if self._parse_optional_first(first, parser, st):
                    self._parse_elems_into(e.children[1:], parser, st)
            elif k == "attr-dict":
                st.attrs.update(parser.parse_optional_attr_dict())
            elif k == "attr-dict-kw":
                st.attrs.update(parser.parse_optional_attr_dict_with_keyword())
            elif k == "var":
                self._parse_var(e, parser, st, optional=False)
            elif k == "type":
                self._parse_types(e.args, parser, st)
            elif k == "ftype":
                ft = parser.parse_function_type()
                self._assign_types(e.args[:1], list(ft.inputs), st)
                self._assign_types(e.args[1:], list(ft.results), st)
            elif k == "regions":
                st.regions_all.append(parser.parse_region())
                while parser.parse_optional(","):
                    st.regions_all.append(parser.parse_region())
            elif k == "successors":
                st.succ_all.append(parser.parse_successor())
                while parser.parse_optional(","):
                    st.succ_all.append(parser.parse_successor())

    def _parse_literal(self, v: str, parser: Any) -> None:
        if v and (v[0].isalpha() or v[0] == "_"):
            parser.parse_keyword(v)
        else:
            parser.expect(v)

    def _parse_optional_first(self, e: _Elem, parser: Any, st: _ParseState) -> bool:
        if e.kind == "literal":
            v = e.value
            if v and (v[0].isalpha() or v[0] == "_"):
                return parser.parse_optional_keyword(v) is not None
            return parser.parse_optional(v)
        if e.kind == "var":
            return self._parse_var(e, parser, st, optional=True)
        if e.kind == "attr-dict":
            st.attrs.update(parser.parse_optional_attr_dict())
            return True
        raise FormatError("optional group must start with a literal or a variable")

    def _parse_var(self, e: _Elem, parser: Any, st: _ParseState, optional: bool) -> bool:
        kind, f = e.value
        if kind == "operand":
            if f.kind == SINGLE and not optional:
                st.operands[f.name] = [parser.parse_operand()]
                return True
            us = parser.parse_operand_list()
            if f.kind == OPTIONAL and len(us) > 1:
                raise parser.error(f"expected at most one operand for '{f.name}'")
            st.operands[f.name] = us
            return bool(us)
        if kind == "prop":
            if optional:
                a = parser.parse_optional_attribute()
                if a is None:
                    return False
            else:
                a = parser.parse_attribute()
            st.props[f.name] = a
            return True
        if kind == "region":
            if optional:
                r = parser.parse_optional_region()
                if r is None:
                    return False
            else:
                r = parser.parse_region()
            st.regions[f.name] = r
            return True
        if kind == "successor":
            if optional:
                b = parser.parse_optional_successor()
                if b is None:
                    return False
                bs = [b]
            else:
                bs = [parser.parse_successor()]
            if f.variadic:
                while parser.parse_optional(","):
                    bs.append(parser.parse_successor())
            st.successors[f.name] = bs
            return True
        raise FormatError("results cannot be parsed directly")

    def _parse_types(self, args: list[Any], parser: Any, st: _ParseState) -> None:
        variable = len(args) != 1 or not isinstance(args[0], _Elem) or args[0].value[1].kind != SINGLE
        if variable:
            t = parser.parse_optional_type()
            types = [] if t is None else [t]
            if t is not None:
                while parser.parse_optional(","):
                    types.append(parser.parse_type())
        else:
            types = [parser.parse_type()]
        self._assign_types(args, types, st)

    def _assign_types(self, args: list[Any], types: list, st: _ParseState) -> None:
        for a in args:
            if a == "operands":
                st.all_operand_types = types
            elif a == "results":
                st.all_result_types = types
            elif isinstance(a, _Elem):
                kind, f = a.value
                if kind == "operand":
                    n = len(st.operands.get(f.name, [])) if f.kind != SINGLE else 1
                    st.operand_types[f.name] = types[:n] if len(args) > 1 else types
                    if len(args) > 1:
                        types = types[n:]
                elif kind == "result":
                    st.result_types[f.name] = types if f.kind != SINGLE or len(args) == 1 else types[:1]
                    if len(args) > 1:
                        types = types[1:]

    def _build(self, parser: Any, cls: type, st: _ParseState) -> Operation:
        from lamina.ir.traits import SameOperandsAndResultType

        od = self.od
        known = None
        for given in list(st.operand_types.values()) + list(st.result_types.values()):
            if given:
                known = given[0]
                break
        same = SameOperandsAndResultType in getattr(cls, "traits", ())
        operands = []
        segs = []
        flat_us = [u for f in od.operands for u in st.operands.get(f.name, [])]
        for f in od.operands:
            us = st.operands.get(f.name, [])
            segs.append(len(us))
            if st.all_operand_types is not None:
                continue
            ts = st.operand_types.get(f.name)
            if not us:
                ts = []
            elif ts is None or len(ts) != len(us):
                if same and known is not None:
                    ts = [known] * len(us)
                else:
                    raise parser.error(f"type of operand '{f.name}' is not given by the assembly format")
            operands.extend(parser.resolve_operands(us, ts))
        if st.all_operand_types is not None:
            operands = parser.resolve_operands(flat_us, st.all_operand_types)
        result_types: list = []
        rsegs = []
        if st.all_result_types is not None:
            result_types = list(st.all_result_types)
        else:
            for f in od.results:
                ts = st.result_types.get(f.name)
                if ts is None:
                    if same and known is not None and f.kind == SINGLE:
                        ts = [known]
                    elif f.kind == VARIADIC or f.kind == OPTIONAL:
                        ts = []
                    else:
                        raise parser.error(f"type of result '{f.name}' is not given by the assembly format")
                rsegs.append(len(ts))
                result_types.extend(ts)
        props = dict(st.props)
        attrs = dict(st.attrs)
        for name in [n for n in attrs if n in od.prop_names]:
            props[name] = attrs.pop(name)
        if od.operand_segmented:
            props[OPERAND_SEGMENTS] = DenseArrayAttr(IntegerType(32), segs)
        if od.result_segmented and rsegs:
            props[RESULT_SEGMENTS] = DenseArrayAttr(IntegerType(32), rsegs)
        regions = [st.regions[r.name] for r in od.regions if r.name in st.regions] or st.regions_all
        if len(regions) < len(od.regions):
            from lamina.ir.core import Region

            regions = regions + [Region() for _ in range(len(od.regions) - len(regions))]
        succs = [b for s in od.successors for b in st.successors.get(s.name, [])] or st.succ_all
        return parser.create_op(cls, operands, result_types, props, attrs, regions, succs)


class _ParseState:
    __slots__ = (
        "all_operand_types",
        "all_result_types",
        "attrs",
        "operand_types",
        "operands",
        "props",
        "regions",
        "regions_all",
        "result_types",
        "succ_all",
        "successors",
    )

    def __init__(self) -> None:
        self.operands: dict[str, list] = {}
        self.operand_types: dict[str, list] = {}
        self.result_types: dict[str, list] = {}
        self.props: dict[str, Any] = {}
        self.attrs: dict[str, Any] = {}
        self.regions: dict[str, Any] = {}
        self.successors: dict[str, list] = {}
        self.all_operand_types: list | None = None
        self.all_result_types: list | None = None
        self.regions_all: list = []
        self.succ_all: list = []


def _space_before(value: str, last_was_punctuation: bool) -> bool:
    if len(value) != 1 and value != "->":
        return True
    if last_was_punctuation:
        return value[0] not in ">)}],"
    return value[0] not in "<>(){}[],"


_FORMATS: dict[type, Format] = {}


def get_format(cls: type) -> Format:
    """The compiled format of an op class (compiled once, on first use)."""
    f = _FORMATS.get(cls)
    if f is None:
        fmt = getattr(cls, "assembly_format", None)
        if not fmt:
            raise FormatError(f"{cls.__name__} has no assembly_format")
        f = _FORMATS[cls] = Format(cls, fmt)
    return f

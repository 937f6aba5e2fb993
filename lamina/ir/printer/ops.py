"""The op printer: value numbering, location aliases, the generic and custom op forms, the
resource section and external resources (see :mod:`lamina.ir.printer`)."""

from __future__ import annotations

import base64
import gc
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, cast

from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

from lamina.ir import external_resources
from lamina.ir.attributes import (
    ArrayAttr,
    Attribute,
    DenseElementsAttr,
    DenseResourceElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    OpaqueAttr,
    ResourceHandle,
    StringAttr,
    UnitAttr,
)
from lamina.ir.core import Block, BlockArgument, Operation, Region, Value
from lamina.ir.floatfmt import format_float
from lamina.ir.location import (
    CallSiteLoc,
    FileLineColLoc,
    FusedLoc,
    Location,
    NameLoc,
    UnknownLoc,
)
from lamina.ir.printer.text import (
    _KEY_CACHE,
    _MAYBE_SPECIAL,
    _builtin_alias_name,
    _float_type_name,
    _int_text,
    _is_special,
    attribute_text,
    dict_body_text,
    function_type_text,
    location_body,
    quote_identifier,
    quote_string,
    symbol_text,
)
from lamina.ir.types import (
    FunctionType,
    IntegerType,
    Type,
)

WEIGHT_FILE_ATTR = external_resources.DEFAULT_ATTR


class _AliasInfo:
    __slots__ = ("children", "deferrable", "depth", "name", "order")

    def __init__(self, deferrable: bool, order: int) -> None:
        self.depth = 0
        self.deferrable = deferrable
        self.children: list[_AliasInfo] = []
        self.order = order
        self.name = "loc"


_DEFAULT_DIALECTS = {"func.func": "func"}

#: A scope of used SSA names: (names defined in this region, enclosing scope).
_NameScope = tuple[set[str], Any]
_HINT_OK = re.compile(r"[A-Za-z_$.\-][A-Za-z0-9_$.\-]*\Z")
_ASM_NAME_HOOKS: dict[type, Any] = {}


def _asm_name_hook(cls: type) -> Any:
    """The op class's ``get_asm_result_names`` (OpAsmOpInterface-like result name hints) or None."""
    try:
        return _ASM_NAME_HOOKS[cls]
    except KeyError:
        h = _ASM_NAME_HOOKS[cls] = getattr(cls, "get_asm_result_names", None)
        return h


def _name_used(name: str, scope: Any) -> bool:
    while scope is not None:
        if name in scope[0]:
            return True
        scope = scope[1]
    return False


def _sanitize_name(name: str) -> str:
    """MLIR's ``sanitizeIdentifier``: keep alphanumerics and ``$._-``, spaces become ``_``, other
    bytes their hex value; a leading digit gets a ``_`` prefix."""
    out = []
    for b in name.encode("utf-8"):
        c = chr(b)
        if c.isascii() and (c.isalnum() or c in "$._-"):
            out.append(c)
        elif c == " ":
            out.append("_")
        else:
            out.append(format(b, "X"))
    s = "".join(out)
    return "_" + s if name[:1].isdigit() else s


def _default_dialect(op: Operation | None) -> str:
    """The dialect whose prefix ops directly inside ``op``'s regions may omit (OpAsmOpInterface)."""
    if op is None:
        return ""
    dd = getattr(op, "default_dialect", None)
    if isinstance(dd, str):
        return dd
    return _DEFAULT_DIALECTS.get(op.name, "")


class Printer:
    """Prints operations; the object passed to custom op ``print`` hooks."""

    def __init__(
        self,
        *,
        generic: bool = False,
        debuginfo: bool = False,
        resources: str = "inline",
        external_weights: str | None = None,
    ) -> None:
        self.generic = generic
        self.debuginfo = debuginfo
        self.resources_mode = resources
        self.external_weights = external_weights
        self.out: list[str] = []
        self.indent = ""
        self.names: dict[Value, str] = {}
        self.block_names: dict[Block, tuple[str, int]] = {}
        self.aliases: dict[Attribute, str] = {}
        self._alias_info: dict[Attribute, _AliasInfo] = {}
        self.used_resources: dict[ResourceHandle, None] = {}
        self.collecting = False
        self._sig_cache: dict[tuple, str] = {}
        self._dict_cache: dict[tuple, str] = {}
        self._name_cache: dict[str, str] = {}
        self._item_cache: dict[tuple, str] = {}

    # ---- public entry points ------------------------------------------------------------

    def print_op_to_string(self, op: Operation) -> str:
        """One op (and its regions) in this printer's form, without alias definitions."""
        scope = op
        from lamina.ir.traits import IsolatedFromAbove

        while True:
            p = scope.parent_op()
            if p is None or IsolatedFromAbove in type(scope).traits:
                break
            scope = p
        self._number(scope)
        self.out = []
        self._print_op(op)
        return "".join(self.out)

    def print_top_level(self, op: Operation) -> str:
        self._number(op)
        self._collect_aliases(op)
        added_attr = False
        if self.resources_mode == "external" and self.external_weights:
            added_attr = self._prepare_external(op)
        try:
            self.out = []
            self._print_op(op)
        finally:
            if added_attr:
                op.attributes.pop(WEIGHT_FILE_ATTR, None)
        body = "".join(self.out)
        top, bottom = self._alias_defs()
        text = top + body + "\n" + bottom
        if self.resources_mode == "inline" and self.used_resources:
            text += "\n" + self._resource_section()
        elif self.resources_mode == "external" and self.used_resources and self.external_weights:
            self._write_external()
        return text

    # ---- numbering ----------------------------------------------------------------------

    def _number(self, op: Operation) -> None:
        if not self.generic:
            self._number_custom(op)
            return
        names = self.names
        bnames = self.block_names
        generic = self.generic
        vid = 0
        aid = 0
        if op.results:
            self._number_results(op, 0)
            vid = 1
        stack: list[tuple[Region, int, int]] = [(r, vid, aid) for r in op.regions]
        while stack:
            region, v0, a0 = stack.pop()
            if not generic:
                vid, aid = v0, a0
            blocks = region.blocks
            for bid, block in enumerate(blocks):
                bnames[block] = ("^bb" + str(bid), bid)
                if block.args:
                    if block is blocks[0]:
                        for a in block.args:
                            names[a] = "%arg" + str(aid)
                            aid += 1
                    else:
                        for a in block.args:
                            names[a] = "%" + str(vid)
                            vid += 1
                o = block._first
                while o is not None:
                    res = o.results
                    if res:
                        base = "%" + str(vid)
                        vid += 1
                        if len(res) == 1:
                            names[res[0]] = base
                        else:
                            for i, r in enumerate(res):
                                names[r] = base + "#" + str(i)
                    o = o.next_op
            for block in blocks:
                o = block._first
                while o is not None:
                    if o.regions:
                        for reg in o.regions:
                            stack.append((reg, vid, aid))
                    o = o.next_op

    def _number_custom(self, op: Operation) -> None:
        """MLIR's ``SSANameState`` for the custom form: result name hints from ops'
        ``get_asm_result_names`` (OpAsmOpInterface), uniqued with ``_N`` suffixes from a conflict
        counter; used names are scoped by region (a nested region sees its ancestors' names), and a
        nested region starts from the value, argument and conflict counters its parent ended with."""
        names = self.names
        bnames = self.block_names
        hint_of = _asm_name_hook
        top_scope: _NameScope = (set(), None)
        # The regions of the top op are queued before the op itself is numbered (as MLIR does).
        stack: list[tuple[Region, int, int, int, _NameScope]] = [(r, 0, 0, 0, top_scope) for r in op.regions]
        self._conflict_id = 0
        if op.results:
            self._name_results(op, hint_of(type(op)), 0, top_scope)
        while stack:
            region, vid, aid, cid, parent = stack.pop()
            self._conflict_id = cid
            scope: _NameScope = (set(), parent)
            blocks = region.blocks
            for bid, block in enumerate(blocks):
                bnames[block] = ("^bb" + str(bid), bid)
                if block.args:
                    if block is blocks[0]:
                        for a in block.args:
                            names[a] = "%" + self._unique_name("arg" + str(aid), scope)
                            aid += 1
                    else:
                        for a in block.args:
                            names[a] = "%" + str(vid)
                            vid += 1
                o = block._first
                while o is not None:
                    if o.results:
                        vid = self._name_results(o, hint_of(type(o)), vid, scope)
                    o = o.next_op
            cid = self._conflict_id
            for block in blocks:
                o = block._first
                while o is not None:
                    if o.regions:
                        for r in o.regions:
                            stack.append((r, vid, aid, cid, scope))
                    o = o.next_op

    def _name_results(self, op: Operation, hook: Any, vid: int, scope: _NameScope) -> int:
        hint = None
        if hook is not None:
            hints = hook(op)
            hint = hints[0] if hints else None
        if hint:
            base = "%" + self._unique_name(hint, scope)
        else:
            base = "%" + str(vid)
            vid += 1
        res = op.results
        if len(res) == 1:
            self.names[res[0]] = base
        else:
            for i, r in enumerate(res):
                self.names[r] = base + "#" + str(i)
        return vid

    def _unique_name(self, name: str, scope: _NameScope) -> str:
        """MLIR's ``uniqueValueName``: sanitize, then probe ``name_<N>`` with the conflict counter."""
        if not _HINT_OK.match(name):
            name = _sanitize_name(name)
        if _name_used(name, scope):
            while True:
                cand = name + "_" + str(self._conflict_id)
                self._conflict_id += 1
                if not _name_used(cand, scope):
                    name = cand
                    break
        scope[0].add(name)
        return name

    def _number_results(self, op: Operation, vid: int) -> None:
        res = op.results
        if not res:
            return
        base = "%" + str(vid)
        if len(res) == 1:
            self.names[res[0]] = base
        else:
            for i, r in enumerate(res):
                self.names[r] = base + "#" + str(i)

    def value_name(self, v: Value) -> str:
        n = self.names.get(v)
        if n is None:
            return "<<UNKNOWN SSA VALUE>>"
        return n

    # ---- alias collection (MLIR's AliasInitializer) -------------------------------------------

    def _visit_loc(self, loc: Attribute, deferrable: bool) -> _AliasInfo | None:
        info = self._alias_info.get(loc)
        if info is not None:
            if not deferrable and info.deferrable:
                self._mark_non_deferrable(info)
            return info
        if not isinstance(loc, Location):
            # Non-location metadata: visit nested locations, no alias of its own.
            if isinstance(loc, (ArrayAttr, DictionaryAttr)):
                self._visit_attr(loc, deferrable)
            return None
        info = _AliasInfo(deferrable, len(self._alias_info))
        self._alias_info[loc] = info
        depth = 0
        children: list[Any] = []
        if isinstance(loc, NameLoc):
            if loc.child is not None:
                children.append(loc.child)
        elif isinstance(loc, FusedLoc):
            if loc.metadata is not None:
                children.append(loc.metadata)
            children.extend(loc.locations)
        elif isinstance(loc, CallSiteLoc):
            children.append(loc.callee)
            children.append(loc.caller)
        for c in children:
            ci = self._visit_loc(c, deferrable)
            d = ci.depth + 1 if ci is not None else 1
            if d > depth:
                depth = d
            if ci is not None:
                info.children.append(ci)
        info.depth = depth
        return info

    def _mark_non_deferrable(self, info: _AliasInfo) -> None:
        if not info.deferrable:
            return
        info.deferrable = False
        for c in info.children:
            self._mark_non_deferrable(c)

    def _visit_attr(self, a: Attribute, deferrable: bool = False) -> None:
        if isinstance(a, Location):
            self._visit_loc(a, deferrable)
        elif isinstance(a, OpaqueAttr):
            name = _builtin_alias_name(a)
            if name is not None:
                info = self._alias_info.get(a)
                if info is None:
                    info = self._alias_info[a] = _AliasInfo(deferrable, len(self._alias_info))
                    info.name = name
                elif not deferrable and info.deferrable:
                    self._mark_non_deferrable(info)
        elif isinstance(a, ArrayAttr):
            if _is_special(a):
                for x in a.elements:
                    self._visit_attr(x, deferrable)
        elif isinstance(a, DictionaryAttr) and _is_special(a):
            for x in a._dict.values():
                self._visit_attr(x, deferrable)

    def _collect_aliases(self, op: Operation) -> None:
        saved = self.out
        self.out = []
        self.collecting = True
        try:
            self._collect_op(op)
        finally:
            self.collecting = False
            self.out = saved
        items = self._alias_info.items()
        if all(i.depth == 0 and i.name == "loc" for i in self._alias_info.values()):
            infos = list(items)  # already in first-use order: the usual all-simple-locations case
        else:
            infos = sorted(items, key=lambda kv: (kv[1].depth, kv[1].name, kv[1].order))
        counts: dict[str, int] = {}
        aliases = self.aliases
        self._alias_order = []
        for attr, info in infos:
            n = counts.get(info.name, 0)
            counts[info.name] = n + 1
            text = "#" + info.name + (str(n) if n else "")
            aliases[attr] = text
            self._alias_order.append((attr, info))

    def _collect_op(self, op: Operation) -> None:
        if self.debuginfo:
            self._visit_loc(op.location, True)
        if not self.generic and type(op).has_custom_assembly:
            self._call_custom_print(op)
            return
        for r in op.regions:
            self._collect_region(r, True, True)
        self._collect_attrs(op)

    def _collect_region(self, region: Region, entry_args: bool, terminators: bool) -> None:
        special = _MAYBE_SPECIAL
        first = True
        dbg = self.debuginfo
        generic = self.generic
        info_map = self._alias_info
        for block in region.blocks:
            if (entry_args or not first) and dbg:
                for a in block.args:
                    self._visit_loc(a.location, False)
            first = False
            o = block._first
            while o is not None:
                nxt = o.next_op
                if nxt is None and not terminators:
                    from lamina.ir.traits import IsTerminator

                    if IsTerminator in type(o).traits:
                        break
                if o.regions or not (generic or not type(o).has_custom_assembly):
                    self._collect_op(o)
                else:
                    if dbg:
                        loc = o.location
                        if loc not in info_map:
                            tl = type(loc)
                            if (
                                tl is FileLineColLoc
                                or tl is UnknownLoc
                                or (tl is NameLoc and cast(NameLoc, loc).child is None)
                            ):
                                info_map[loc] = _AliasInfo(True, len(info_map))
                            else:
                                self._visit_loc(loc, True)
                    # Only attributes that may hold aliasable parts need a visit (most ops: none).
                    attrs = o.attributes
                    if (attrs and not special.isdisjoint(map(type, attrs.values()))) or (
                        o.op_def is not None and not special.isdisjoint(map(type, o.properties.values()))
                    ):
                        self._collect_attrs(o)
                o = nxt

    def _collect_attrs(self, op: Operation) -> None:
        attrs = op.attributes
        if op.op_def is not None:
            props = op.properties
            found = any(type(v) in _MAYBE_SPECIAL for v in props.values()) or any(
                type(v) in _MAYBE_SPECIAL for v in attrs.values()
            )
            if not found:
                return
            merged = dict(props)
            merged.update(attrs)
        else:
            if not attrs or not any(type(v) in _MAYBE_SPECIAL for v in attrs.values()):
                return
            merged = attrs
        for k in sorted(merged):
            v = merged[k]
            if _is_special(v):
                self._visit_attr(v)

    def _alias_defs(self) -> tuple[str, str]:
        top: list[str] = []
        bottom: list[str] = []
        aliases = self.aliases
        for attr, info in getattr(self, "_alias_order", ()):
            tl = type(attr)
            if tl is NameLoc and attr.child is None:  # the common case: one per tensor of a model
                line = aliases[attr] + " = loc(" + quote_string(attr.name) + ")\n"
            elif tl is FileLineColLoc or tl is UnknownLoc:
                line = aliases[attr] + " = " + str(attr) + "\n"
            elif isinstance(attr, Location):
                line = aliases[attr] + " = loc(" + location_body(attr, aliases) + ")\n"
            else:
                line = aliases[attr] + " = " + str(attr) + "\n"
            (bottom if info.deferrable else top).append(line)
        return "".join(top), "".join(bottom)

    # ---- resources ----------------------------------------------------------------------

    def _resource_section(self) -> str:
        lines = ["{-#\n  dialect_resources: {\n    builtin: {\n"]
        entries = []
        for h in self.used_resources:
            if h.blob is None:
                continue
            blob = h.blob
            data = blob.as_bytes()
            entries.append(
                "      "
                + quote_identifier(h.key)
                + ': "0x'
                + int(blob.alignment).to_bytes(4, "little").hex().upper()
                + base64.b16encode(data).decode("ascii")
                + '"'
            )
        if not entries:
            return ""
        lines.append(",\n".join(entries))
        lines.append("\n    }\n  }\n#-}\n")
        return "".join(lines)

    def _prepare_external(self, op: Operation) -> bool:
        # Find the resources the module uses (the dry run saw none of them: walk attributes).
        handles: dict[ResourceHandle, None] = {}

        def scan(a: Attribute) -> None:
            if isinstance(a, DenseResourceElementsAttr):
                handles[a.handle] = None
            elif isinstance(a, ArrayAttr):
                for x in a.elements:
                    scan(x)
            elif isinstance(a, DictionaryAttr):
                for x in a._dict.values():
                    scan(x)

        o: Operation
        v: Attribute
        for o in op.walk_ops():
            for v in o.properties.values():
                if _is_special(v):
                    scan(v)
            for v in o.attributes.values():
                if _is_special(v):
                    scan(v)
        if not handles:
            return False
        path = self.external_weights
        assert path is not None
        rec = os.path.basename(path) if os.path.isabs(path) else path
        op.attributes[WEIGHT_FILE_ATTR] = StringAttr(rec)
        return True

    def _write_external(self) -> None:
        """Write the used blobs through the registered external-resource provider (the ``.npz``
        weight file: :mod:`lamina.support.weights`)."""
        path = self.external_weights
        assert path is not None
        blobs = {h.key: h.blob.data for h in self.used_resources if h.blob is not None}
        alignments = {h.key: int(h.blob.alignment) for h in self.used_resources if h.blob is not None}
        external_resources.provider(external_resources.DEFAULT_ATTR).save(path, blobs, alignments)

    # ---- low-level output ---------------------------------------------------------------------

    def write(self, text: str) -> None:
        self.out.append(text)

    print = write

    def print_new_line(self) -> None:
        self.out.append("\n" + self.indent)

    def increase_indent(self) -> None:
        self.indent += "  "

    def decrease_indent(self) -> None:
        self.indent = self.indent[:-2]

    # ---- OpAsmPrinter-style API for custom hooks -------------------------------------------

    def print_operand(self, v: Value) -> None:
        self.out.append(self.value_name(v))

    def print_operands(self, values: Iterable[Value]) -> None:
        self.out.append(", ".join([self.value_name(v) for v in values]))

    def print_type(self, t: Type) -> None:
        self.out.append(str(t))

    def print_types(self, ts: Iterable[Type]) -> None:
        self.out.append(", ".join([str(t) for t in ts]))

    def print_attribute(self, a: Attribute) -> None:
        if self.collecting:
            self._visit_attr(a)
        self.out.append(attribute_text(a, False, self))

    def print_attribute_without_type(self, a: Attribute) -> None:
        if isinstance(a, IntegerAttr):
            t = a.type
            if isinstance(t, IntegerType) and t.width == 1 and not t.signedness:
                self.out.append("true" if a.value else "false")
            else:
                self.out.append(_int_text(a.value, t))
        elif isinstance(a, FloatAttr):
            self.out.append(format_float(a.value, _float_type_name(a.type)))
        elif isinstance(a, (DenseElementsAttr, DenseResourceElementsAttr)):
            s = attribute_text(a, False, self)
            self.out.append(s[: s.rindex(" : ")])
        else:
            self.print_attribute(a)

    def print_string(self, s: str) -> None:
        self.out.append(quote_string(s))

    def print_symbol_name(self, name: str) -> None:
        self.out.append(symbol_text(name))

    def print_keyword_or_string(self, s: str) -> None:
        self.out.append(quote_identifier(s))

    def print_optional_attr_dict(self, attrs: dict[str, Attribute], elided: Iterable[str] = ()) -> None:
        items = [(k, attrs[k]) for k in sorted(attrs) if k not in elided]
        if not items:
            return
        if self.collecting:
            for _, v in items:
                self._visit_attr(v)
        self.out.append(" {" + dict_body_text(items, self) + "}")

    def print_optional_attr_dict_with_keyword(
        self, attrs: dict[str, Attribute], elided: Iterable[str] = ()
    ) -> None:
        items = [(k, attrs[k]) for k in sorted(attrs) if k not in elided]
        if not items:
            return
        if self.collecting:
            for _, v in items:
                self._visit_attr(v)
        self.out.append(" attributes {" + dict_body_text(items, self) + "}")

    def print_successor(self, block: Block) -> None:
        self.out.append(self.block_names.get(block, ("^INVALIDBLOCK", 0))[0])

    def print_successor_and_use_list(self, block: Block, operands: Sequence[Value]) -> None:
        self.print_successor(block)
        if operands:
            self.out.append(
                "("
                + ", ".join([self.value_name(v) for v in operands])
                + " : "
                + ", ".join([str(v.type) for v in operands])
                + ")"
            )

    def print_function_type(self, inputs: Sequence[Type], results: Sequence[Type]) -> None:
        self.out.append(function_type_text(inputs, results))

    def print_arrow_type_list(self, results: Sequence[Type]) -> None:
        """`` -> t`` / `` -> (a, b)`` (nothing when empty), as in function signatures."""
        if not results:
            return
        if len(results) == 1 and not isinstance(results[0], FunctionType):
            self.out.append(" -> " + str(results[0]))
        else:
            self.out.append(" -> (" + ", ".join(str(t) for t in results) + ")")

    def print_region_argument(
        self,
        arg: BlockArgument,
        attrs: dict[str, Attribute] | DictionaryAttr | None = None,
        omit_type: bool = False,
    ) -> None:
        s = self.value_name(arg)
        if not omit_type:
            s += ": " + str(arg.type)
        self.out.append(s)
        if attrs:
            items = list(attrs.items()) if not isinstance(attrs, DictionaryAttr) else list(attrs.items_)
            items.sort(key=lambda kv: kv[0])
            self.out.append(" {" + dict_body_text(items, self) + "}")
        if self.debuginfo:
            if self.collecting:
                self._visit_loc(arg.location, False)
            self.out.append(" loc(" + location_body(arg.location, self.aliases) + ")")

    def print_optional_location(self, loc: Location) -> None:
        if self.debuginfo:
            self.out.append(" " + self.location_text(loc))

    def location_text(self, loc: Location) -> str:
        a = self.aliases.get(loc)
        if a is not None:
            return "loc(" + a + ")"
        return "loc(" + location_body(loc, self.aliases) + ")"

    def print_region(
        self,
        region: Region,
        print_entry_block_args: bool = True,
        print_block_terminators: bool = True,
        print_empty_block: bool = False,
    ) -> None:
        if self.collecting:
            self._collect_region(region, print_entry_block_args, print_block_terminators)
            self.out.append("{}")
            return
        self._print_region(region, print_entry_block_args, print_block_terminators, print_empty_block)

    def print_operation(self, op: Operation) -> None:
        """Print a nested op on its own line (for ops printing their body themselves)."""
        self.out.append("\n")
        self._print_op(op)

    # ---- special attributes ------------------------------------------------------------------

    def _special_attr_text(self, a: Attribute) -> str:
        if isinstance(a, Location):
            al = self.aliases.get(a)
            if al is not None:
                return al
            return "loc(" + location_body(a, self.aliases) + ")"
        if isinstance(a, DenseResourceElementsAttr):
            self.used_resources[a.handle] = None
            return str(a)
        if isinstance(a, OpaqueAttr):
            return self.aliases.get(a) or str(a)
        if isinstance(a, ArrayAttr):
            return "[" + ", ".join([attribute_text(x, True, self) for x in a.elements]) + "]"
        if isinstance(a, DictionaryAttr):
            return "{" + dict_body_text(a.items_, self) + "}"
        return str(a)

    # ---- ops ---------------------------------------------------------------------------------

    def _print_region(self, region: Region, entry_args: bool, terminators: bool, empty_block: bool) -> None:
        out = self.out
        out.append("{\n")
        blocks = region.blocks
        if blocks:
            entry = blocks[0]
            header = (empty_block and entry._first is None) or (entry_args and bool(entry.args))
            self._print_block(entry, header, terminators, True)
            for b in blocks[1:]:
                self._print_block(b, True, True, False)
        out.append(self.indent + "}")

    def _print_block(self, block: Block, header: bool, terminators: bool, is_entry: bool) -> None:
        out = self.out
        ind = self.indent
        if header:
            s = ind + self.block_names[block][0]
            if block.args:
                parts = []
                dbg = self.debuginfo
                for a in block.args:
                    p = self.names[a] + ": " + str(a.type)
                    if dbg:
                        p += " loc(" + location_body(a.location, self.aliases) + ")"
                    parts.append(p)
                s += "(" + ", ".join(parts) + ")"
            s += ":"
            if not is_entry:
                preds = block.uses
                if not preds:
                    s += "  // no predecessors"
                elif len(preds) == 1:
                    s += "  // pred: " + self.block_names[cast(Block, next(iter(preds)).owner.parent)][0]
                else:
                    infos = [
                        self.block_names[u.owner.parent] for u in preds if u.owner.parent in self.block_names
                    ]
                    infos.sort(key=lambda x: x[1])
                    s += "  // " + str(len(infos)) + " preds: " + ", ".join(i[0] for i in infos)
            out.append(s + "\n")
        inner = ind + "  "
        self.indent = inner
        generic = self.generic
        line = self._op_line
        try:
            o = block._first
            while o is not None:
                nxt = o.next_op
                if nxt is None and not terminators:
                    from lamina.ir.traits import IsTerminator

                    if IsTerminator in type(o).traits:
                        break
                if o.regions or o._successors or not (generic or not type(o).has_custom_assembly):
                    self._print_op(o)
                    out.append("\n")
                else:
                    out.append(line(o, inner))
                o = nxt
        finally:
            self.indent = ind

    def _print_op(self, op: Operation) -> None:
        if self.collecting:
            self._collect_op(op)
            return
        out = self.out
        out.append(self.indent)
        res = op.results
        if res:
            n0 = self.names.get(res[0])
            if n0 is None:
                n0 = "<<UNKNOWN SSA VALUE>>"
            elif len(res) > 1:
                n0 = n0[: n0.index("#")] + ":" + str(len(res))
            out.append(n0 + " = ")
        if not self.generic and type(op).has_custom_assembly:
            self._call_custom_print(op)
        else:
            self._print_generic_body(op)
        if self.debuginfo:
            a = self.aliases.get(op.location)
            if a is not None:
                out.append(" loc(" + a + ")")
            else:
                out.append(" " + self.location_text(op.location))

    def _op_line(self, op: Operation, ind: str) -> str:
        """One region-less generic op as a full line (the hot path of printing)."""
        names = self.names
        res = op.results
        if res:
            n0 = names.get(res[0])
            if n0 is None:
                n0 = "<<UNKNOWN SSA VALUE>>"
            elif len(res) > 1:
                n0 = n0[: n0.index("#")] + ":" + str(len(res))
            head = ind + n0 + " = "
        else:
            head = ind
        name = op.name
        qn = self._name_cache.get(name)
        if qn is None:
            qn = self._name_cache[name] = quote_string(name)
        ops = op._operands
        if ops:
            try:
                operands = "(" + ", ".join([names[o.value] for o in ops]) + ")"
            except KeyError:
                operands = "(" + ", ".join([self.value_name(o.value) for o in ops]) + ")"
            key = (tuple([o.value.type for o in ops]), tuple([r.type for r in res]))
        else:
            operands = "()"
            key = ((), tuple([r.type for r in res]))
        props = op.properties
        ptext = " <{" + self._dict_text(props) + "}>" if props else ""
        attrs = op.attributes
        atext = " {" + self._dict_text(attrs) + "}" if attrs else ""
        sig = self._sig_cache.get(key)
        if sig is None:
            sig = self._sig_cache[key] = " : " + function_type_text(*key)
        if self.debuginfo:
            loc = op.location
            a = self.aliases.get(loc)
            tail = " loc(" + a + ")\n" if a is not None else " " + self.location_text(loc) + "\n"
        else:
            tail = "\n"
        return f"{head}{qn}{operands}{ptext}{atext}{sig}{tail}"

    def _call_custom_print(self, op: Operation) -> None:
        name = op.name
        dd = _default_dialect(op.parent_op())
        if name.startswith("builtin.") and name.count(".") == 1:
            name = name[8:]
        elif dd and name.startswith(dd + ".") and name.count(".") == 1:
            name = name[len(dd) + 1 :]
        self.out.append(name)
        fmt = getattr(type(op), "assembly_format", None)
        if "print" in _own_hooks(type(op)):
            op.print(self)  # type: ignore[attr-defined]
        elif fmt:
            from lamina.ir.assembly_format import get_format

            get_format(type(op)).print(op, self)
        else:
            op.print(self)  # type: ignore[attr-defined]

    def _print_generic_body(self, op: Operation) -> None:
        out = self.out
        name = op.name
        qn = self._name_cache.get(name)
        if qn is None:
            qn = self._name_cache[name] = quote_string(name)
        names = self.names
        ops = op._operands
        if ops:
            try:
                out.append(qn + "(" + ", ".join([names[o.value] for o in ops]) + ")")
            except KeyError:
                out.append(qn + "(" + ", ".join([self.value_name(o.value) for o in ops]) + ")")
        else:
            out.append(qn + "()")
        if op._successors:
            out.append(
                "["
                + ", ".join([self.block_names.get(s.block, ("^INVALIDBLOCK", 0))[0] for s in op._successors])
                + "]"
            )
        props = op.properties
        if props:
            out.append(" <{" + self._dict_text(props) + "}>")
        if op.regions:
            out.append(" (")
            first = True
            for r in op.regions:
                if not first:
                    out.append(", ")
                first = False
                self._print_region(r, True, True, True)
            out.append(")")
        attrs = op.attributes
        if attrs:
            out.append(" {" + self._dict_text(attrs) + "}")
        res = op.results
        key = (tuple([o.value.type for o in ops]), tuple([r.type for r in res])) if (res or ops) else ()
        sig = self._sig_cache.get(key)
        if sig is None:
            sig = self._sig_cache[key] = " : " + (function_type_text(*key) if key else "() -> ()")
        out.append(sig)

    def _dict_text(self, d: dict[str, Attribute]) -> str:
        key = tuple(d.items())
        cache = self._dict_cache
        s = cache.get(key)
        if s is not None:
            return s
        icache = self._item_cache
        parts = []
        special = False
        for k in sorted(d) if len(d) > 1 else d:
            v = d[k]
            ik = (k, v)
            t = icache.get(ik)
            if t is None:
                if type(v) in _MAYBE_SPECIAL and _is_special(v):
                    special = True
                    t = dict_body_text(((k, v),), self)
                else:
                    qk = _KEY_CACHE.get(k)
                    if qk is None:
                        qk = _KEY_CACHE[k] = quote_identifier(k)
                    t = qk if type(v) is UnitAttr else qk + " = " + str(v)
                    icache[ik] = t
            parts.append(t)
        s = ", ".join(parts)
        if not special and len(cache) < 200000:
            cache[key] = s
        return s


def _own_hooks(cls: type) -> set[str]:
    hooks = set()
    for klass in cls.__mro__:
        if klass.__name__ in ("Op", "Operation", "object"):
            break
        if "print" in klass.__dict__:
            hooks.add("print")
        if "parse" in klass.__dict__:
            hooks.add("parse")
    return hooks


def print_operation(
    op: Operation,
    *,
    generic: bool = False,
    debuginfo: bool = False,
    resources: str = "inline",
    external_weights: str | None = None,
) -> str:
    """A whole op as ``mlir-opt`` prints it (alias definitions and resources included).

    ``resources``: ``"inline"`` prints the ``{-# dialect_resources #-}`` section, ``"none"`` omits
    it, ``"external"`` writes the blobs to ``external_weights`` (an ``.npz``) and records its name
    as the module attribute ``lamina.weight_file``.
    """
    p = Printer(generic=generic, debuginfo=debuginfo, resources=resources, external_weights=external_weights)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # printing allocates many small objects; collections would walk the whole IR
    try:
        return p.print_top_level(op)
    finally:
        if gc_was_enabled:
            gc.enable()

"""The textual IR printer: MLIR's generic and custom forms, byte-identical to ``mlir-opt-22``.

Entry points:

* :func:`print_operation` prints a whole op (normally a ``builtin.module``) with the ``#loc``
  alias definitions (top: those that cannot be deferred; bottom: op locations), and the
  ``{-# dialect_resources ... #-}`` section, exactly as ``mlir-opt`` does.
* :func:`print_attribute_or_type` is the context-free text of a type or attribute (cached on the
  object by ``str()``).
* :class:`Printer` is also the object custom op ``print(self, printer)`` hooks write to; its methods
  mirror MLIR's ``OpAsmPrinter`` (``print_operand``, ``print_type``, ``print_region``, ...).

Value numbering follows MLIR's ``SSANameState``: regions are numbered from a LIFO stack; in the
generic form one counter runs through the whole op, in the custom form a nested region starts from
the counters its parent region ended with. Alias collection follows MLIR's ``AliasInitializer``: a
dry run of the printer visits locations in print order (op location first, then regions, then the
op's attributes), aliases are sorted by nesting depth and numbered ``#loc``, ``#loc1``, ...
"""

from __future__ import annotations

import base64
import gc
import os
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

from lamina.ir import external_resources
from lamina.ir.attributes import (
    ArrayAttr,
    Attribute,
    DenseArrayAttr,
    DenseElementsAttr,
    DenseResourceElementsAttr,
    DialectAttribute,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    OpaqueAttr,
    ResourceHandle,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
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
from lamina.ir.types import (
    DYNAMIC,
    DialectType,
    FloatType,
    FunctionType,
    IndexType,
    IntegerType,
    MemRefType,
    NoneType,
    OpaqueType,
    RankedTensorType,
    TupleType,
    Type,
    UnrankedTensorType,
    VectorType,
)

if TYPE_CHECKING:
    pass

__all__ = [
    "HEX_THRESHOLD",
    "Printer",
    "escape_string",
    "print_attribute_or_type",
    "print_operation",
    "quote_identifier",
    "symbol_text",
]

#: Dense elements with more elements than this print as a hex string (mlir-opt's default).
HEX_THRESHOLD = 100
WEIGHT_FILE_ATTR = external_resources.DEFAULT_ATTR

_BARE_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*\Z")
_PLAIN = re.compile(r"[ !#-\[\]-~]*\Z")  # printable ASCII except '"' and '\'


# --------------------------------------------------------------------------------------------
# Strings and identifiers
# --------------------------------------------------------------------------------------------


def escape_string(s: str) -> str:
    """MLIR's ``printEscapedString`` body (no quotes): UTF-8 bytes, non-printables as ``\\XX``."""
    if _PLAIN.match(s):
        return s
    out = []
    for b in s.encode("utf-8", "surrogateescape"):
        if b == 0x5C:
            out.append("\\\\")
        elif 0x20 <= b < 0x7F and b != 0x22:
            out.append(chr(b))
        else:
            out.append(f"\\{b:02X}")
    return "".join(out)


def quote_string(s: str) -> str:
    return '"' + escape_string(s) + '"'


def quote_identifier(name: str) -> str:
    """A name bare when it is a valid bare identifier, else quoted (attribute names, symbols)."""
    if _BARE_ID.match(name):
        return name
    return '"' + escape_string(name) + '"'


def symbol_text(name: str) -> str:
    return "@" + quote_identifier(name)


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------


def _dims(shape: Sequence[int]) -> str:
    return "".join(("?" if d == DYNAMIC else str(d)) + "x" for d in shape)


def _type_text(t: Type) -> str:
    if isinstance(t, IntegerType):
        return ("" if not t.signedness else t.signedness + "") + "i" + str(t.width)
    if isinstance(t, FloatType):
        return t.name
    if isinstance(t, RankedTensorType):
        s = "tensor<" + _dims(t.shape_) + str(t.element_type)
        if t.encoding is not None:
            s += ", " + str(t.encoding)
        return s + ">"
    if isinstance(t, IndexType):
        return "index"
    if isinstance(t, FunctionType):
        return function_type_text(t.inputs, t.results)
    if isinstance(t, UnrankedTensorType):
        return "tensor<*x" + str(t.element_type) + ">"
    if isinstance(t, VectorType):
        return "vector<" + _dims(t.shape_) + str(t.element_type) + ">"
    if isinstance(t, MemRefType):
        s = "memref<" + _dims(t.shape_) + str(t.element_type)
        if t.layout is not None:
            s += ", " + str(t.layout)
        if t.memory_space is not None:
            s += ", " + attribute_text(t.memory_space, elide_type=True)
        return s + ">"
    if isinstance(t, TupleType):
        return "tuple<" + ", ".join(str(x) for x in t.types) + ">"
    if isinstance(t, NoneType):
        return "none"
    if isinstance(t, DialectType):
        return "!" + t.dialect + "." + t.mnemonic + t.print_body()
    if isinstance(t, OpaqueType):
        return _opaque_text("!", t.dialect, t.data)
    raise TypeError(f"cannot print type {type(t).__name__}")


def _opaque_text(sigil: str, dialect: str, data: str) -> str:
    if not dialect:  # builtin construct kept verbatim (affine_map<...>, complex<f32>, ...)
        return data
    if not data or data[0] == "<":
        return sigil + dialect + data
    return sigil + dialect + "." + data


def function_type_text(inputs: Sequence[Type], results: Sequence[Type]) -> str:
    s = "(" + ", ".join([str(t) for t in inputs]) + ") -> "
    if len(results) == 1 and not isinstance(results[0], FunctionType):
        return s + str(results[0])
    return s + "(" + ", ".join([str(t) for t in results]) + ")"


# --------------------------------------------------------------------------------------------
# Attributes
# --------------------------------------------------------------------------------------------


def _int_text(value: int, t: Type) -> str:
    if isinstance(t, IntegerType):
        w = t.width
        if t.signedness == "u":
            value &= (1 << w) - 1
        else:
            value &= (1 << w) - 1
            if value >= 1 << (w - 1):
                value -= 1 << w
    return _decimal(value)


def _decimal(v: int) -> str:
    """``str(v)`` also beyond Python's int-to-str digit limit (values of very wide integer types)."""
    if v.bit_length() < 13000:  # < 4300 digits
        return str(v)
    if v < 0:
        return "-" + _decimal(-v)
    half = int(v.bit_length() * 0.30103) // 2
    hi, lo = divmod(v, 10**half)
    return _decimal(hi) + _decimal(lo).zfill(half)


def _float_type_name(t: Type) -> str:
    return t.name if isinstance(t, FloatType) else "f64"


def attribute_text(a: Attribute, elide_type: bool = False, printer: Printer | None = None) -> str:
    """Text of an attribute. ``elide_type``: MLIR's ``AttrTypeElision::May`` (array elements)."""
    if elide_type:
        if isinstance(a, IntegerAttr):
            t = a.type
            if isinstance(t, IntegerType) and t.width == 64 and not t.signedness:
                return _int_text(a.value, t)
        elif isinstance(a, FloatAttr) and isinstance(a.type, FloatType) and a.type.name == "f64":
            t = format_float(a.value, "f64")
            return t if "0x" not in t else t + " : f64"  # hex is never elided (it would read as int)
    if printer is not None and _is_special(a):
        return printer._special_attr_text(a)
    return str(a)


def _attr_text(a: Attribute) -> str:
    if isinstance(a, IntegerAttr):
        t = a.type
        if isinstance(t, IntegerType) and t.width == 1 and not t.signedness:
            return "true" if a.value else "false"
        return _int_text(a.value, t) + " : " + str(t)
    if isinstance(a, StringAttr):
        return quote_string(a.value) if a.type is None else quote_string(a.value) + " : " + str(a.type)
    if isinstance(a, FloatAttr):
        return format_float(a.value, _float_type_name(a.type)) + " : " + str(a.type)
    if isinstance(a, ArrayAttr):
        return "[" + ", ".join([attribute_text(x, True) for x in a.elements]) + "]"
    if isinstance(a, DictionaryAttr):
        return "{" + dict_body_text(a.items_) + "}"
    if isinstance(a, DenseArrayAttr):
        return dense_array_text(a)
    if isinstance(a, TypeAttr):
        return str(a.value)
    if isinstance(a, SymbolRefAttr):
        return "::".join(symbol_text(n) for n in (a.root, *a.nested))
    if isinstance(a, UnitAttr):
        return "unit"
    if isinstance(a, DenseElementsAttr):
        return dense_elements_text(a)
    if isinstance(a, DenseResourceElementsAttr):
        return "dense_resource<" + quote_identifier(a.handle.key) + "> : " + str(a.type)
    if isinstance(a, Location):
        return "loc(" + location_body(a, None) + ")"
    if isinstance(a, DialectAttribute):
        return "#" + a.dialect + "." + a.mnemonic + a.print_body()
    if isinstance(a, OpaqueAttr):
        return _opaque_text("#", a.dialect, a.data)
    raise TypeError(f"cannot print attribute {type(a).__name__}")


def dict_body_text(items: Iterable[tuple[str, Attribute]], printer: Printer | None = None) -> str:
    parts = []
    for k, v in items:
        if isinstance(v, UnitAttr):
            parts.append(quote_identifier(k))
        else:
            parts.append(quote_identifier(k) + " = " + attribute_text(v, False, printer))
    return ", ".join(parts)


def dense_array_text(a: DenseArrayAttr) -> str:
    t = a.element_type
    if not a.values:
        return "array<" + str(t) + ">"
    if isinstance(t, FloatType):
        body = ", ".join(format_float(v, t.name) for v in a.values)
    elif isinstance(t, IntegerType) and t.width == 1:
        body = ", ".join("true" if v else "false" for v in a.values)
    else:
        body = ", ".join(_int_text(v, t) for v in a.values)
    return "array<" + str(t) + ": " + body + ">"


def _element_strs(flat: np.ndarray, et: Type) -> list[str]:
    if isinstance(et, FloatType):
        name = et.name
        return [format_float(v, name) for v in flat.astype(np.float64).tolist()]
    if isinstance(et, IntegerType) and et.width == 1:
        return ["true" if v else "false" for v in flat.tolist()]
    if isinstance(et, IntegerType) and et.width not in (8, 16, 32, 64):
        return [_int_text(v, et) for v in flat.tolist()]
    return [str(v) for v in flat.tolist()]


def dense_hex(arr: np.ndarray, et: Type) -> str:
    if isinstance(et, IntegerType) and et.width == 1:
        data = np.packbits(np.ascontiguousarray(arr, dtype=np.bool_).reshape(-1), bitorder="little")
        return "0x" + data.tobytes().hex().upper()
    a = np.ascontiguousarray(arr)
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    return "0x" + a.tobytes().hex().upper()


def dense_elements_text(a: DenseElementsAttr) -> str:
    t = a.type
    et = t.element_type
    data = a.raw
    if a.is_splat:
        body = _element_strs(data.reshape(1), et)[0]
    elif data.size == 0:
        body = ""
    elif data.size > HEX_THRESHOLD:
        body = '"' + dense_hex(data, et) + '"'
    else:
        strs = _element_strs(data.reshape(-1), et)
        shape = data.shape
        if not shape:
            body = strs[0]
        else:
            body = _nest(strs, shape)
    return "dense<" + body + "> : " + str(t)


def _nest(strs: list[str], shape: tuple[int, ...]) -> str:
    if len(shape) == 1:
        return "[" + ", ".join(strs) + "]"
    step = len(strs) // shape[0] if shape[0] else 0
    return "[" + ", ".join(_nest(strs[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])) + "]"


def location_body(loc: Location, aliases: dict[Attribute, str] | None) -> str:
    """The text inside ``loc(...)``; nested locations use ``aliases`` when they have one."""
    if isinstance(loc, NameLoc):
        s = quote_string(loc.name)
        if loc.child is not None:
            s += "(" + _child_loc(loc.child, aliases) + ")"
        return s
    if isinstance(loc, FileLineColLoc):
        return quote_string(loc.filename) + ":" + str(loc.line) + ":" + str(loc.col)
    if isinstance(loc, UnknownLoc):
        return "unknown"
    if isinstance(loc, FusedLoc):
        s = "fused"
        if loc.metadata is not None:
            m = loc.metadata
            if isinstance(m, Location):
                s += "<" + _child_loc(m, aliases) + ">"
            else:
                s += "<" + str(m) + ">"
        return s + "[" + ", ".join(_child_loc(x, aliases) for x in loc.locations) + "]"
    if isinstance(loc, CallSiteLoc):
        return "callsite(" + _child_loc(loc.callee, aliases) + " at " + _child_loc(loc.caller, aliases) + ")"
    raise TypeError(f"cannot print location {type(loc).__name__}")


def _child_loc(loc: Location, aliases: dict[Attribute, str] | None) -> str:
    if aliases is not None:
        a = aliases.get(loc)
        if a is not None:
            return a
    return location_body(loc, aliases)


def print_attribute_or_type(x: Any) -> str:
    """Context-free text of a type or attribute (what ``str(x)`` returns)."""
    if isinstance(x, Type):
        return _type_text(x)
    return _attr_text(x)


# Attributes whose printing depends on the module being printed (aliases, resources).
_MAYBE_SPECIAL = frozenset(
    {
        ArrayAttr,
        DictionaryAttr,
        OpaqueAttr,
        DenseResourceElementsAttr,
        FileLineColLoc,
        NameLoc,
        UnknownLoc,
        FusedLoc,
        CallSiteLoc,
    }
)
_SPECIAL_CACHE: dict[int, bool] = {}
_KEY_CACHE: dict[str, str] = {}


def _builtin_alias_name(a: Attribute) -> str | None:
    """Alias prefix mlir-opt gives builtin attributes kept verbatim (affine maps and sets)."""
    if isinstance(a, OpaqueAttr) and not a.dialect:
        if a.data.startswith("affine_map<"):
            return "map"
        if a.data.startswith("affine_set<"):
            return "set"
    return None


def _is_special(a: Attribute) -> bool:
    if isinstance(a, (Location, DenseResourceElementsAttr)):
        return True
    if isinstance(a, OpaqueAttr):
        return _builtin_alias_name(a) is not None
    if isinstance(a, (ArrayAttr, DictionaryAttr)):
        k = id(a)
        r = _SPECIAL_CACHE.get(k)
        if r is None:
            vals = a.elements if isinstance(a, ArrayAttr) else a._dict.values()
            r = any(_is_special(v) for v in vals)
            _SPECIAL_CACHE[k] = r
        return r
    return False


# --------------------------------------------------------------------------------------------
# The printer
# --------------------------------------------------------------------------------------------


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
                        for r in o.regions:
                            stack.append((r, vid, aid))
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
                                or (tl is NameLoc and loc.child is None)
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
                    s += "  // pred: " + self.block_names[next(iter(preds)).owner.parent][0]
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

"""Text of types, attributes and locations (MLIR's ``AsmPrinter`` for them), apart from the op
printer: every function here is context-free except where a :class:`~lamina.ir.printer.Printer`
is passed in for the attributes whose text depends on the module (aliases, resources)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

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
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
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


class _SpecialPrinter(Protocol):
    """What the attribute text needs from the op printer (alias and resource names)."""

    def _special_attr_text(self, a: Attribute) -> str: ...


#: Dense elements with more elements than this print as a hex string (mlir-opt's default).
HEX_THRESHOLD = 100

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


def attribute_text(a: Attribute, elide_type: bool = False, printer: _SpecialPrinter | None = None) -> str:
    """Text of an attribute. ``elide_type``: MLIR's ``AttrTypeElision::May`` (array elements)."""
    if elide_type:
        if isinstance(a, IntegerAttr):
            t = a.type
            if isinstance(t, IntegerType) and t.width == 64 and not t.signedness:
                return _int_text(a.value, t)
        elif isinstance(a, FloatAttr) and isinstance(a.type, FloatType) and a.type.name == "f64":
            ft = format_float(a.value, "f64")
            return ft if "0x" not in ft else ft + " : f64"  # hex is never elided (it would read as int)
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


def dict_body_text(items: Iterable[tuple[str, Attribute]], printer: _SpecialPrinter | None = None) -> str:
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

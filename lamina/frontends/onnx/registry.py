"""What the ONNX importer and its converters share, below both: the converter table
(:data:`CONVERTERS`, :func:`register`), the node view a converter receives (:class:`Node`), the
exception a converter raises for what it cannot express (:class:`Unsupported`) and ONNX's element
types (:func:`onnx_elem_type`).

It lives apart from :mod:`.importer` so that :mod:`.converters` can fill the table without importing
the importer, which imports the converters (no import cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lamina.ir.core import Value
from lamina.ir.location import Location
from lamina.ir.types import FloatType, IntegerType, Type, f32

if TYPE_CHECKING:
    from .importer import GraphConverter


class Unsupported(Exception):
    """Raised by a converter for a node it cannot express (an attribute value, a dtype, ...)."""


# ---- element types ----------------------------------------------------------------------------

_ELEM: dict[int, Type] = {
    1: f32,
    2: IntegerType(8, "u"),
    3: IntegerType(8),
    4: IntegerType(16, "u"),
    5: IntegerType(16),
    6: IntegerType(32),
    7: IntegerType(64),
    9: IntegerType(1),
    10: FloatType("f16"),
    11: FloatType("f64"),
    12: IntegerType(32, "u"),
    13: IntegerType(64, "u"),
    16: FloatType("bf16"),
    17: FloatType("f8E4M3FN"),
    18: FloatType("f8E4M3FNUZ"),
    19: FloatType("f8E5M2"),
    20: FloatType("f8E5M2FNUZ"),
    21: IntegerType(4, "u"),
    22: IntegerType(4),
}
_ELEM_NAMES = {
    8: "STRING",
    14: "COMPLEX64",
    15: "COMPLEX128",
    23: "FLOAT4E2M1",
    24: "FLOAT8E8M0",
    25: "UINT2",
    26: "INT2",
}


def onnx_elem_type(code: int) -> Type:
    t = _ELEM.get(code)
    if t is None:
        raise Unsupported(f"tensors of element type {_ELEM_NAMES.get(code, code)} are not supported")
    return t


# ---- node view handed to converters ------------------------------------------------------------


class Node:
    """One ONNX node as converters see it: input values (``None`` for absent optional inputs),
    attributes as Python values (tensors as arrays, graphs as GraphProtos), output names."""

    __slots__ = (
        "attrs",
        "domain",
        "input_names",
        "inputs",
        "loc",
        "name",
        "op_type",
        "opset",
        "outputs",
        "proto",
    )

    def __init__(
        self, proto: Any, inputs: list[Value | None], attrs: dict[str, Any], opset: int, loc: Location
    ) -> None:
        self.proto = proto
        self.op_type: str = proto.op_type
        self.domain: str = proto.domain
        self.name: str = proto.name
        self.inputs = inputs
        self.input_names: list[str] = list(proto.input)
        self.outputs: list[str] = list(proto.output)
        self.attrs = attrs
        self.opset = opset
        self.loc = loc

    def input(self, i: int) -> Value | None:
        return self.inputs[i] if i < len(self.inputs) else None

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def __repr__(self) -> str:
        return f"<{self.op_type} node '{self.name}'>"


# ---- the converter table ---------------------------------------------------------------------

Converter = Callable[["GraphConverter", Node], Sequence["Value | None"]]
CONVERTERS: dict[str, Converter] = {}


def register(*op_types: str) -> Callable[[Converter], Converter]:
    """Register a converter for ONNX op types (``"Relu"``, or ``"com.microsoft::Foo"`` for other domains)."""

    def deco(fn: Converter) -> Converter:
        for t in op_types:
            CONVERTERS[t] = fn
        return fn

    return deco

"""Parser (lamina/ir/parser/types.py): builtin and dialect types."""

from __future__ import annotations

import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.attributes import (
    OpaqueAttr,
)
from lamina.ir.context import Context
from lamina.ir.parser import parse_module, parse_type
from lamina.ir.printer import print_operation
from lamina.ir.types import OpaqueType


def ctx(unregistered: bool = True) -> Context:
    return Context(allow_unregistered_dialects=unregistered, handler=None)


def parse_errors(text: str, unregistered: bool = True, filename: str = "t.mlir") -> list[str]:
    c = ctx(unregistered)
    with c.diagnostics.capture() as diags:
        m = parse_module(text, c, filename=filename)
    assert m is None
    return [str(d) for d in diags]


@pytest.mark.parametrize(
    "text",
    [
        "i1",
        "i4",
        "si8",
        "ui8",
        "i128",
        "index",
        "none",
        "f16",
        "bf16",
        "f32",
        "f64",
        "f8E4M3FN",
        "tf32",
        "tensor<?x3xf32>",
        "tensor<*xf32>",
        "tensor<f32>",
        "tensor<0xf32>",
        "vector<4xf32>",
        "memref<4x?xf32>",
        "memref<2xf32, 1>",
        "tuple<>",
        "tuple<i32, tensor<2xf32>>",
        "(i32) -> f32",
        "() -> ()",
        "(i32, f32) -> (f32, i32)",
        "((i32) -> i32) -> i32",
        "() -> ((i32) -> i32)",
        '!foo.bar<"x", 3>',
        "!foo.simple",
        '!foo<"opaque body">',
        "!foo.bar<a<b, c>>",
        "tensor<4xf32, #foo.enc<1>>",
        "vector<4x[8]xf32>",
        "complex<f32>",
        "!quant.uniform<i8:f32, 5.000000e-02:-3>",
    ],
)
def test_type_roundtrip(text):
    t = parse_type(text, ctx())
    assert t is not None
    assert str(t) == text


def test_opaque_type_fields():
    t = parse_type('!foo.bar<"x", 3>', ctx())
    assert isinstance(t, OpaqueType) and t.dialect == "foo" and t.data == 'bar<"x", 3>'


def test_unregistered_type_attr_kept_verbatim():
    src = '"foo.types"() {a = !foo<"opaque body">, b = !foo.bar<a<b, c>>, c = #foo.y<[1, 2]>, e = !foo.t<"q\\"uote">} : () -> ()\n'
    m = parse_module(src, ctx())
    out = print_operation(m, generic=True)
    assert (
        '{a = !foo<"opaque body">, b = !foo.bar<a<b, c>>, c = #foo.y<[1, 2]>, e = !foo.t<"q\\"uote">}' in out
    )
    assert isinstance(m.body.first_op.attributes["c"], OpaqueAttr)

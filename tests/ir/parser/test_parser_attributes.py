"""Parser (lamina/ir/parser/attributes.py): attributes, aliases, dense data,
integers as wide as their type, and the dialect_resources section."""

from __future__ import annotations

import numpy as np
import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.attributes import (
    DenseElementsAttr,
    DenseResourceElementsAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
)
from lamina.ir.context import Context
from lamina.ir.parser import parse_attribute, parse_module, parse_type
from lamina.ir.printer import print_operation
from lamina.ir.types import FloatType, IntegerType, RankedTensorType, f32, i32

Z = "0" * 5000  # longer than Python's int/str conversion limit (4300 digits)


def ctx(unregistered: bool = True) -> Context:
    return Context(allow_unregistered_dialects=unregistered, handler=None)


def parse_errors(text: str, unregistered: bool = True, filename: str = "t.mlir") -> list[str]:
    c = ctx(unregistered)
    with c.diagnostics.capture() as diags:
        m = parse_module(text, c, filename=filename)
    assert m is None
    return [str(d) for d in diags]


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("1", "1 : i64"),
        ("-5 : i32", "-5 : i32"),
        ("0x1F : i32", "31 : i32"),
        ("true", "true"),
        ("0 : i1", "false"),
        ("1.5", "1.500000e+00 : f64"),
        ("2.0 : f16", "2.000000e+00 : f16"),
        ("0x7FC00000 : f32", "0x7FC00000 : f32"),
        ("unit", "unit"),
        ('"a\\22b\\0A"', '"a\\22b\\0A"'),
        ('"with \\"quotes\\""', '"with \\22quotes\\22"'),
        ("[1, 2 : i32, [true]]", "[1, 2 : i32, [true]]"),
        ("array<i64: 1, 2>", "array<i64: 1, 2>"),
        ("array<f32: 1.0, 2.5>", "array<f32: 1.000000e+00, 2.500000e+00>"),
        ("array<i1: true, false>", "array<i1: true, false>"),
        ("array<i8>", "array<i8>"),
        ('{z = 1, a = unit, "q k" = 2}', '{a, "q k" = 2 : i64, z = 1 : i64}'),
        ("@foo::@bar", "@foo::@bar"),
        ('@"quoted sym"', '@"quoted sym"'),
        ("i32", "i32"),
        ("(i32) -> i32", "(i32) -> i32"),
        ("dense<1.0> : tensor<4xf32>", "dense<1.000000e+00> : tensor<4xf32>"),
        ("dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>", "dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>"),
        ("dense<[0x7FC00000, 1.0]> : tensor<2xf32>", "dense<[0x7FC00000, 1.000000e+00]> : tensor<2xf32>"),
        ("dense<[true, false]> : tensor<2xi1>", "dense<[true, false]> : tensor<2xi1>"),
        ("dense<[1, 255]> : tensor<2xui8>", "dense<[1, 255]> : tensor<2xui8>"),
        ("dense<[-1, 2]> : tensor<2xsi8>", "dense<[-1, 2]> : tensor<2xsi8>"),
        ("dense<> : tensor<0xf32>", "dense<> : tensor<0xf32>"),
        ("dense<[1, 2]> : vector<2xindex>", "dense<[1, 2]> : vector<2xindex>"),
        ('dense<"0x0100000002000000"> : tensor<2xi32>', "dense<[1, 2]> : tensor<2xi32>"),
        ('#foo.baz<"x", 1>', '#foo.baz<"x", 1>'),
        ('#foo<"opaque">', '#foo<"opaque">'),
        ("affine_map<(d0, d1) -> (d1, d0 + 1)>", "affine_map<(d0, d1) -> (d1, d0 + 1)>"),
        ("#arith.overflow<nsw>", "#arith.overflow<nsw>"),
        ('loc("a"("f":1:2))', 'loc("a"("f":1:2))'),
        ('loc(fused<"m">["a", "b"])', 'loc(fused<"m">["a", "b"])'),
        ('loc(callsite("a" at "b":1:1))', 'loc(callsite("a" at "b":1:1))'),
    ],
)
def test_attribute_parse_print(text, printed):
    a = parse_attribute(text, ctx())
    assert a is not None, text
    assert str(a) == printed


def test_dense_values_and_splat():
    a = parse_attribute("dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>", ctx())
    assert isinstance(a, DenseElementsAttr) and not a.is_splat
    np.testing.assert_array_equal(a.to_numpy(), [[1, 2, 3], [4, 5, 6]])
    s = parse_attribute("dense<7> : tensor<1000xi32>", ctx())
    assert s.is_splat and s.splat_value == 7 and str(s) == "dense<7> : tensor<1000xi32>"
    big = DenseElementsAttr(RankedTensorType([300], f32), np.arange(300, dtype=np.float32))
    back = parse_attribute(str(big), ctx())
    assert back == big and str(back).startswith('dense<"0x')


def test_type_and_attribute_aliases():
    src = (
        "!mytype = tensor<4xf32>\n#myattr = {a = 1 : i32}\n"
        "func.func @f(%a: !mytype) -> !mytype attributes {x = #myattr} {\n  return %a : !mytype\n}\n"
    )
    m = parse_module(src, ctx())
    text = print_operation(m)
    assert "func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> attributes {x = {a = 1 : i32}} {" in text


RES_SRC = (
    '"foo.a"() {r = dense_resource<blob1> : tensor<3xi32>} : () -> ()\n'
    "{-#\n  dialect_resources: {\n    builtin: {\n"
    '      blob1: "0x04000000010000000200000003000000",\n      unused: "0x0400000001000000"\n'
    "    }\n  }\n#-}\n"
)


def test_resources_parse_and_print():
    c = ctx()
    m = parse_module(RES_SRC, c)
    a = m.body.first_op.attributes["r"]
    assert isinstance(a, DenseResourceElementsAttr)
    np.testing.assert_array_equal(a.to_numpy(), [1, 2, 3])
    assert a.handle.blob.alignment == 4
    text = print_operation(m, generic=True)
    assert text.endswith(
        '\n\n{-#\n  dialect_resources: {\n    builtin: {\n      blob1: "0x04000000010000000200000003000000"\n'
        "    }\n  }\n#-}\n"
    )
    assert print_operation(parse_module(text, ctx()), generic=True) == text


@pytest.mark.parametrize(
    "src, expected",
    [
        (
            f'"foo.a"() {{x = 1{Z} : i32}} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            f'"foo.a"() {{x = -1{Z}}} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            f'"foo.a"() {{x = 1{Z} : index}} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            f'"foo.a"() {{x = dense<[1{Z}]> : tensor<1xi32>}} : () -> ()\n',
            "t.mlir:1:22: error: integer constant out of range for type",
        ),
        (
            '"foo.a"() {x = dense<[99999999999999999999999]> : tensor<1xi32>} : () -> ()\n',
            "t.mlir:1:22: error: integer constant out of range for type",
        ),
        (
            f'"foo.a"() {{x = array<i32: 1{Z}>}} : () -> ()\n',
            "t.mlir:1:5028: error: integer constant out of range",
        ),
        (f'"foo.a"() : () -> tensor<1{Z}xf32>\n', "t.mlir:1:26: error: invalid dimension"),
        (f'"foo.a"() : () -> i1{Z}\n', "t.mlir:1:19: error: invalid integer width"),
        (
            f'%0:1{Z} = "foo.a"() : () -> i32\n',
            "t.mlir:1:1: error: expected named operation to have at least 1 result",
        ),
        (
            f'%0:2 = "foo.a"() : () -> (i32, i32)\n"foo.b"(%0#1{Z}) : (i32) -> ()\n',
            "t.mlir:2:9: error: reference to invalid result number",
        ),
    ],
    ids=[
        "attr-i32",
        "attr-i64",
        "attr-index",
        "dense",
        "dense-wraps",
        "array",
        "dim",
        "width",
        "count",
        "result-number",
    ],
)
def test_huge_integer_literals_are_located_errors(src, expected):
    errs = parse_errors(src)
    assert len(errs) == 1
    assert errs[0].split("\n")[0] == expected


def test_integer_literals_as_wide_as_their_type_roundtrip():
    src = f'"foo.a"() {{x = 1{Z} : i20000, y = -1{Z} : i20000}} : () -> ()'
    m = parse_module(src, ctx())
    assert m is not None
    assert m.body.first_op.attributes["x"].value == 10**5000
    assert print_operation(m, generic=True) == f'"builtin.module"() ({{\n  {src}\n}}) : () -> ()\n'


def test_float_attr_values_exact():
    a = parse_attribute("0.1 : f32", ctx())
    assert isinstance(a, FloatAttr) and a.type is FloatType("f32")
    assert a.value == float(np.float32(0.1))
    assert parse_attribute("-0.0", ctx()).value.hex() == "-0x0.0p+0"
    i = parse_attribute("255 : ui8", ctx())
    assert isinstance(i, IntegerAttr) and i.type is IntegerType(8, "u") and i.value == 255
    assert parse_attribute('"x"', ctx()) is StringAttr("x")
    assert parse_type("i32", ctx()) is i32

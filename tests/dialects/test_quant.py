"""The quant dialect's types print and parse exactly as mlir-opt-22 spells them."""

from __future__ import annotations

import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.dialects.quant import (
    AnyQuantizedType,
    CalibratedQuantizedType,
    UniformQuantizedPerAxisType,
    UniformQuantizedType,
)
from lamina.ir.context import Context
from lamina.ir.parser import parse_module, parse_type
from lamina.ir.printer import print_operation
from lamina.ir.types import FloatType, RankedTensorType, f32

# (input as written, what mlir-opt-22 prints) — from mlir-opt-22 on the same input.
CASES = [
    ("!quant.uniform<i8:f32, 0.05:-3>", "!quant.uniform<i8:f32, 5.000000e-02:-3>"),
    ("!quant.uniform<i8:f32:0, {0.1,0.2}>", "!quant.uniform<i8:f32:0, {1.000000e-01,2.000000e-01}>"),
    ("!quant.calibrated<f32<-2.0:3.5>>", "!quant.calibrated<f32<-2.000000e+00:3.500000e+00>>"),
    ("!quant.uniform<i8:f32, 1.0>", "!quant.uniform<i8:f32, 1.000000e+00>"),
    ("!quant.uniform<u8:f32, 0.1:128>", "!quant.uniform<u8:f32, 1.000000e-01:128>"),
    ("!quant.uniform<i8<-127:127>:f32, 0.5>", "!quant.uniform<i8<-127:127>:f32, 5.000000e-01>"),
    (
        "!quant.uniform<i8:f32:1, {0.1:1, 0.2:-2, 3.0e-5}>",
        "!quant.uniform<i8:f32:1, {1.000000e-01:1,2.000000e-01:-2,3.000000e-05}>",
    ),
    ("!quant.any<i8:f32>", "!quant.any<i8:f32>"),
    (
        "tensor<4x!quant.uniform<i8:f32, 0.0078431372549019607:-1>>",
        "tensor<4x!quant.uniform<i8:f32, 0.0078431372549019607:-1>>",
    ),
    ("!quant.uniform<i4:f16, 2.5e-1>", "!quant.uniform<i4:f16, 2.500000e-01>"),
    ("!quant.uniform<i8:f32, 3.14159265358979:0>", "!quant.uniform<i8:f32, 3.14159265358979>"),
]


def _ctx() -> Context:
    return Context(allow_unregistered_dialects=False, handler=None)


@pytest.mark.parametrize(("src", "printed"), CASES)
def test_quant_type_text(src, printed):
    t = parse_type(src, _ctx())
    assert t is not None
    assert str(t) == printed
    assert parse_type(printed, _ctx()) is t


def test_quant_type_fields():
    t = parse_type("!quant.uniform<i8:f32, 0.05:-3>", _ctx())
    assert isinstance(t, UniformQuantizedType)
    assert (t.storage_width, t.signed, t.expressed_type, t.zero_point) == (8, True, f32, -3)
    assert t.scale == 0.05 and (t.storage_min, t.storage_max) == (-128, 127)
    pa = parse_type("!quant.uniform<u8:f32:1, {0.1:1, 0.2}>", _ctx())
    assert isinstance(pa, UniformQuantizedPerAxisType)
    assert pa.axis == 1 and pa.zero_points == (1, 0) and not pa.signed
    assert isinstance(parse_type("!quant.calibrated<f32<-1.0:1.0>>", _ctx()), CalibratedQuantizedType)
    assert isinstance(parse_type("!quant.any<i8:f32>", _ctx()), AnyQuantizedType)


def test_quant_types_built_in_python():
    t = UniformQuantizedType(8, True, FloatType("f32"), 0.5, 1)
    assert str(t) == "!quant.uniform<i8:f32, 5.000000e-01:1>"
    assert t is UniformQuantizedType(8, True, FloatType("f32"), 0.5, 1)
    assert str(RankedTensorType([2], t)) == "tensor<2x!quant.uniform<i8:f32, 5.000000e-01:1>>"
    assert str(UniformQuantizedPerAxisType(8, True, f32, [0.5, 0.25], [0, 3], 0)) == (
        "!quant.uniform<i8:f32:0, {5.000000e-01,2.500000e-01:3}>"
    )


def test_quant_in_module_roundtrip():
    src = "func.func @q(%a: !quant.uniform<i8:f32, 0.05:-3>) {\n  return\n}\n"
    m = parse_module(src, _ctx())
    text = print_operation(m)
    assert "func.func @q(%arg0: !quant.uniform<i8:f32, 5.000000e-02:-3>) {" in text
    assert print_operation(parse_module(text, _ctx())) == text


@pytest.mark.parametrize(
    ("src", "msg"),
    [
        ("!quant.uniform<x8:f32, 1.0>", "illegal storage type prefix"),
        ("!quant.uniform<i8<-300:0>:f32, 1.0>", "illegal storage min and storage max"),
        ("!quant.uniform<i8:i32, 1.0>", "expressed type must be a floating point type"),
        ("!quant.bogus<i8>", "unknown type 'bogus' in dialect 'quant'"),
    ],
)
def test_quant_errors(src, msg):
    c = _ctx()
    with c.diagnostics.capture() as diags:
        assert parse_type(src, c) is None
    assert msg in diags[0].message

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
from lamina.ir.types import FloatType, IntegerType, RankedTensorType, f32

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
        ("!quant.uniform<i8<-300:0>:f32, 1.0>", "illegal storage type minimum: -300"),
        ("!quant.uniform<i8:i32, 1.0>", "expressed type must be a floating point type"),
        ("!quant.bogus<i8>", "unknown type 'bogus' in dialect 'quant'"),
        # mlir-opt-22's words for the same inputs (what its verifyInvariants rejects)
        (
            "!quant.uniform<i8:f32, 0.0:1>",
            "scale 0.000000e+00 out of expressed type range [1.401298e-45, 3.402823e+38]",
        ),
        ("!quant.uniform<i8:f32, -1.0>", "scale -1.000000e+00 out of expressed type range"),
        ("!quant.uniform<i8:f32, 1.0e39>", "scale 1.000000e+39 out of expressed type range"),
        (
            "!quant.uniform<i8:f16, 1.0e10>",
            "scale 1.000000e+10 out of expressed type range [5.960464e-08, 6.550400e+04]",
        ),
        ("!quant.uniform<i8:bf16, 1.0e-50>", "out of expressed type range [9.183550e-41, 3.389531e+38]"),
        ("!quant.uniform<i8:f32, 0x7FF0000000000000:1>", "scale INF out of expressed type range"),
        # mlir-opt-22 lets a NaN scale through (NaN compares false); Lamina does not
        ("!quant.uniform<i8:f32, 0x7FF8000000000000:1>", "illegal scale: nan"),
        ("!quant.uniform<i8:f32:0, {1.0, 0.0}>", "scale 0.000000e+00 out of expressed type range"),
        ("!quant.uniform<i8:f32:0, {1.0,0x7FF0000000000000}>", "scale INF out of expressed type range"),
        ("!quant.uniform<i8:f32:-1, {1.0}>", "illegal quantized dimension: -1"),
        ("!quant.uniform<i8<10:-10>:f32, 1.0>", "illegal storage min and storage max: (10:-10)"),
        ("!quant.uniform<u8<-1:10>:f32, 1.0>", "illegal storage type minimum: -1"),
        ("!quant.uniform<i8<-10:200>:f32, 1.0>", "illegal storage type maximum: 200"),
        ("!quant.uniform<i64:f32, 1.0>", "illegal storage type size: 64"),
        ("!quant.uniform<i0:f32, 1.0>", "illegal storage type size: 0"),
        ("!quant.any<i8<5:1>:f32>", "illegal storage min and storage max: (5:1)"),
        ("!quant.any<i8:i32>", "expressed type must be a floating point type"),
        ("!quant.calibrated<f32<5.0:1.0>>", "illegal min and max: (5.000000e+00:1.000000e+00)"),
    ],
)
def test_quant_errors(src, msg):
    c = _ctx()
    with c.diagnostics.capture() as diags:
        assert parse_type(src, c) is None
    assert msg in diags[0].message
    assert "internal error" not in diags[0].message


def test_quant_hex_scale_is_f64_bits_as_in_mlir():
    assert parse_type("!quant.uniform<i8:f32, 0x3FF0000000000000>", _ctx()).scale == 1.0


def test_zero_point_outside_storage_range_is_accepted_as_in_mlir():
    t = parse_type("!quant.uniform<i8:f32, 1.0:300>", _ctx())
    assert t is not None and t.zero_point == 300


nan, inf = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("build", "msg"),
    [
        (lambda: UniformQuantizedType(8, True, f32, 0.0), "scale 0.000000e+00 out of expressed type range"),
        (lambda: UniformQuantizedType(8, True, f32, nan), "illegal scale: nan"),
        (lambda: UniformQuantizedType(8, True, f32, inf), "scale INF out of expressed type range"),
        (lambda: UniformQuantizedType(8, True, f32, -inf), "scale -INF out of expressed type range"),
        (
            lambda: UniformQuantizedType(8, True, f32, 1.0, 0, 5, 1),
            "illegal storage min and storage max: (5:1)",
        ),
        (lambda: UniformQuantizedType(8, True, f32, 1.0, 0, -129), "illegal storage type minimum: -129"),
        (lambda: UniformQuantizedType(40, True, f32, 1.0), "illegal storage type size: 40"),
        (
            lambda: UniformQuantizedType(8, True, IntegerType(32), 1.0),
            "expressed type must be a floating point",
        ),
        (lambda: UniformQuantizedPerAxisType(8, True, f32, [1.0, 0.0], [0, 0], 0), "scale 0.000000e+00 out"),
        (lambda: UniformQuantizedPerAxisType(8, True, f32, [nan], [0], 0), "illegal scale: nan"),
        (
            lambda: UniformQuantizedPerAxisType(8, True, f32, [1.0], [0, 0], 0),
            "illegal number of scales and zeroPoints: 1, 2",
        ),
        (
            lambda: UniformQuantizedPerAxisType(8, True, f32, [1.0], [0], -1),
            "illegal quantized dimension: -1",
        ),
        (lambda: CalibratedQuantizedType(f32, 2.0, 1.0), "illegal min and max"),
        (lambda: CalibratedQuantizedType(f32, nan, 1.0), "illegal min and max"),
        (lambda: AnyQuantizedType(8, True, f32, 3, 2), "illegal storage min and storage max: (3:2)"),
    ],
)
def test_invalid_quant_types_are_not_built_from_python(build, msg):
    with pytest.raises(ValueError) as e:
        build()
    assert msg in str(e.value)


def test_per_axis_type_checks_the_shape_around_it():
    pa = UniformQuantizedPerAxisType(8, True, f32, [0.1, 0.2], [0, 0], 1)
    assert pa.shaped_type_error((4, 2)) is None
    assert pa.shaped_type_error((4, -1)) is None
    assert pa.shaped_type_error((4, 3)) == "quantized dimension size does not match number of scales"
    assert pa.shaped_type_error((4,)) == "quantized dimension must be less than tensor rank"
    assert UniformQuantizedType(8, True, f32, 0.5).shaped_type_error(()) is None

"""Printer (lamina/ir/printer/text.py): the text of types, attributes and dense
elements — each expected string is what mlir-opt-22 prints for the same IR."""

from __future__ import annotations

import math

import numpy as np
import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.attributes import (
    ArrayAttr,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
from lamina.ir.floatfmt import bits_to_float, format_float
from lamina.ir.location import CallSiteLoc, FileLineColLoc, FusedLoc, NameLoc, UnknownLoc
from lamina.ir.printer import print_attribute_or_type
from lamina.ir.types import (
    DYNAMIC,
    FloatType,
    FunctionType,
    IndexType,
    IntegerType,
    MemRefType,
    NoneType,
    RankedTensorType,
    TupleType,
    UnrankedTensorType,
    VectorType,
    f32,
    i1,
    i8,
    i32,
    i64,
)


@pytest.mark.parametrize(
    ("t", "text"),
    [
        (i32, "i32"),
        (IntegerType(8, "s"), "si8"),
        (IntegerType(8, "u"), "ui8"),
        (IntegerType(128), "i128"),
        (IndexType(), "index"),
        (NoneType(), "none"),
        (FloatType("bf16"), "bf16"),
        (FloatType("f8E4M3FN"), "f8E4M3FN"),
        (RankedTensorType([DYNAMIC, 3], f32), "tensor<?x3xf32>"),
        (RankedTensorType([], f32), "tensor<f32>"),
        (RankedTensorType([0], f32), "tensor<0xf32>"),
        (UnrankedTensorType(f32), "tensor<*xf32>"),
        (VectorType([4], f32), "vector<4xf32>"),
        (VectorType([], f32), "vector<f32>"),
        (MemRefType([4, DYNAMIC], f32), "memref<4x?xf32>"),
        (MemRefType([2], f32, None, IntegerAttr(1, i64)), "memref<2xf32, 1>"),
        (TupleType([]), "tuple<>"),
        (TupleType([i32, f32]), "tuple<i32, f32>"),
        (FunctionType([i32], [f32]), "(i32) -> f32"),
        (FunctionType([i32, f32], []), "(i32, f32) -> ()"),
        (FunctionType([], [f32, f32]), "() -> (f32, f32)"),
        (FunctionType([FunctionType([i32], [i32])], [i32]), "((i32) -> i32) -> i32"),
        (FunctionType([], [FunctionType([i32], [i32])]), "() -> ((i32) -> i32)"),
        (RankedTensorType([4], f32, StringAttr("enc")), 'tensor<4xf32, "enc">'),
    ],
)
def test_type_text(t, text):
    assert print_attribute_or_type(t) == text
    assert str(t) == text


@pytest.mark.parametrize(
    ("a", "text"),
    [
        (IntegerAttr(1, i64), "1 : i64"),
        (IntegerAttr(-5, i32), "-5 : i32"),
        (IntegerAttr(7, IndexType()), "7 : index"),
        (BoolAttr(True), "true"),
        (IntegerAttr(0, i1), "false"),
        (IntegerAttr(255, IntegerType(8, "u")), "255 : ui8"),
        (IntegerAttr(-128, IntegerType(8, "s")), "-128 : si8"),
        (IntegerAttr((1 << 128) - 1, IntegerType(128)), "-1 : i128"),
        (IntegerAttr(2**64 - 1, IntegerType(64, "u")), "18446744073709551615 : ui64"),
        (FloatAttr(1.5, FloatType("f64")), "1.500000e+00 : f64"),
        (FloatAttr(2.0, FloatType("f16")), "2.000000e+00 : f16"),
        (FloatAttr(math.nan, f32), "0x7FC00000 : f32"),
        (FloatAttr(math.inf, FloatType("f64")), "0x7FF0000000000000 : f64"),
        (FloatAttr(1.015625, f32), "1.015625 : f32"),
        (FloatAttr(0.1, FloatType("bf16")), "1.000980e-01 : bf16"),
        (StringAttr("plain"), '"plain"'),
        (StringAttr('with "quotes" and \\ backslash'), '"with \\22quotes\\22 and \\\\ backslash"'),
        (StringAttr("line\nbreak\ttab"), '"line\\0Abreak\\09tab"'),
        (StringAttr("nonascii: \u00e9"), '"nonascii: \\C3\\A9"'),
        (UnitAttr(), "unit"),
        (ArrayAttr([]), "[]"),
        (ArrayAttr([IntegerAttr(1, i64), IntegerAttr(1, i32), StringAttr("x")]), '[1, 1 : i32, "x"]'),
        (ArrayAttr([FloatAttr(1.5, FloatType("f64"))]), "[1.500000e+00]"),
        (DenseArrayAttr(i64, [1, 2]), "array<i64: 1, 2>"),
        (DenseArrayAttr(i64, []), "array<i64>"),
        (DenseArrayAttr(f32, [1.0, 2.5]), "array<f32: 1.000000e+00, 2.500000e+00>"),
        (DenseArrayAttr(i1, [True, False]), "array<i1: true, false>"),
        (DictionaryAttr({"zeta": IntegerAttr(1, i64), "alpha": UnitAttr()}), "{alpha, zeta = 1 : i64}"),
        (
            DictionaryAttr({"a-b": IntegerAttr(1, i64), "a.b": IntegerAttr(2, i64)}),
            '{"a-b" = 1 : i64, a.b = 2 : i64}',
        ),
        (DictionaryAttr({}), "{}"),
        (TypeAttr(FunctionType([i32], [i32])), "(i32) -> i32"),
        (SymbolRefAttr("foo"), "@foo"),
        (SymbolRefAttr("foo", ["bar", "baz"]), "@foo::@bar::@baz"),
        (SymbolRefAttr("quoted sym"), '@"quoted sym"'),
        (SymbolRefAttr("sym$dollar"), "@sym$dollar"),
        (UnknownLoc(), "loc(unknown)"),
        (FileLineColLoc("f.mlir", 3, 5), 'loc("f.mlir":3:5)'),
        (NameLoc("conv1"), 'loc("conv1")'),
        (NameLoc("n", FileLineColLoc("f", 1, 2)), 'loc("n"("f":1:2))'),
        (FusedLoc([NameLoc("a"), NameLoc("b")]), 'loc(fused["a", "b"])'),
        (FusedLoc([NameLoc("a")], StringAttr("meta")), 'loc(fused<"meta">["a"])'),
        (CallSiteLoc(NameLoc("a"), NameLoc("b")), 'loc(callsite("a" at "b"))'),
    ],
)
def test_attribute_text(a, text):
    assert print_attribute_or_type(a) == text


@pytest.mark.parametrize(
    ("t", "bits", "text"),
    [
        ("f64", 0x0000000000000000, "0.000000e+00"),
        ("f32", 0x80000000, "-0.000000e+00"),
        ("f16", 0x2E66, "9.997550e-02"),
        ("bf16", 0x3DCD, "1.000980e-01"),
        ("f64", 0x3FD3333333333333, "3.000000e-01"),
        ("bf16", 0x3F82, "1.015630e+00"),
        ("f16", 0x3C10, "1.015630e+00"),
        ("f32", 0x3F9E063A, "1.23456502"),
        ("f32", 0x7F800000, "0x7F800000"),
        ("f8E4M3FN", 0x42, "2.500000e+00"),
    ],
)
def test_float_format_matches_mlir(t, bits, text):
    assert format_float(bits_to_float(bits, t), t) == text


def test_dense_elements():
    t = RankedTensorType([4], f32)
    assert str(DenseElementsAttr(t, np.float32(1.0))) == "dense<1.000000e+00> : tensor<4xf32>"
    t2 = RankedTensorType([2, 3], IntegerType(64))
    a = DenseElementsAttr(t2, np.arange(1, 7).reshape(2, 3))
    assert str(a) == "dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>"
    b = DenseElementsAttr(RankedTensorType([3], i1), np.array([True, False, True]))
    assert str(b) == "dense<[true, false, true]> : tensor<3xi1>"
    e = DenseElementsAttr(RankedTensorType([0], f32), np.zeros(0, np.float32))
    assert str(e) == "dense<> : tensor<0xf32>"
    s8 = DenseElementsAttr(RankedTensorType([3], i8), np.array([1, -1, 127], np.int8))
    assert str(s8) == "dense<[1, -1, 127]> : tensor<3xi8>"


def test_dense_hex_threshold():
    t100 = RankedTensorType([100], i32)
    assert str(DenseElementsAttr(t100, np.arange(100, dtype=np.int32))).startswith("dense<[0, 1, 2")
    t101 = RankedTensorType([101], i32)
    text = str(DenseElementsAttr(t101, np.arange(101, dtype=np.int32)))
    assert text.startswith('dense<"0x00000000010000000200000003000000')
    assert text.endswith('64000000"> : tensor<101xi32>')
    bits = np.array([i % 3 == 0 for i in range(101)])
    assert str(DenseElementsAttr(RankedTensorType([101], i1), bits)) == (
        'dense<"0x49922449922449922449922409"> : tensor<101xi1>'
    )

"""Builtin types refuse to be built invalid (what MLIR's type verifiers reject)."""

from __future__ import annotations

import pytest

from lamina.ir.context import Context
from lamina.ir.parser import parse_type
from lamina.ir.types import DYNAMIC, MemRefType, RankedTensorType, VectorType, f32


@pytest.mark.parametrize(
    ("build", "msg"),
    [
        # what the ONNX importer once wrote for a dim it mis-computed
        (
            lambda: RankedTensorType([1, 3, -5, 32], f32),
            "invalid tensor dimension size -5 in tensor<1x3x-5x32xf32> (a dimension is >= 0, or DYNAMIC",
        ),
        (lambda: RankedTensorType([-2], f32), "invalid tensor dimension size -2"),
        (lambda: MemRefType([4, -7], f32), "invalid memref dimension size -7 in memref<4x-7xf32>"),
        (
            lambda: VectorType([0], f32),
            "invalid vector dimension size 0 in vector<0xf32> (a dimension is a positive",
        ),
        (lambda: VectorType([DYNAMIC], f32), "invalid vector dimension size -1"),
    ],
)
def test_negative_dims_are_rejected_at_construction(build, msg):
    with pytest.raises(ValueError) as e:
        build()
    assert msg in str(e.value)


def test_dynamic_and_zero_dims_are_valid():
    assert str(RankedTensorType([1, DYNAMIC, 0], f32)) == "tensor<1x?x0xf32>"
    assert str(MemRefType([DYNAMIC], f32)) == "memref<?xf32>"


def test_zero_sized_vector_is_a_located_parse_error_as_in_mlir():
    ctx = Context(handler=None)
    with ctx.diagnostics.capture() as diags:
        assert parse_type("vector<0xf32>", ctx) is None
    assert diags[0].message == "vector types must have positive constant sizes but got 0"

"""The one "constant value of a Value" helper (lamina/ir/constants.py): by the ConstantLike trait,
whatever the dialect."""

from __future__ import annotations

import numpy as np

import lamina.dialects.top  # noqa: F401
from lamina.dialects.arith import AddIOp, ConstantOp
from lamina.dialects.top.io import WeightOp
from lamina.ir.attributes import (
    DenseResourceElementsAttr,
    IntegerAttr,
    ResourceBlob,
    ResourceHandle,
)
from lamina.ir.constants import constant_array, constant_value, is_constant, value_constant
from lamina.ir.types import RankedTensorType, f32, i32


def test_constants_of_any_dialect() -> None:
    t = RankedTensorType([2], f32)
    handle = ResourceHandle("w", ResourceBlob(np.array([1.0, 2.0], np.float32)))
    w = WeightOp.build(output=t, value=DenseResourceElementsAttr(t, handle))
    assert is_constant(w.results[0])
    np.testing.assert_array_equal(constant_array(w.results[0]), [1.0, 2.0])
    assert value_constant(w.results[0]) is w.properties["value"]
    c = ConstantOp.build(value=IntegerAttr(3, i32))
    assert constant_value(c) == IntegerAttr(3, i32) and is_constant(c.results[0])
    assert constant_array(c.results[0]) is None  # a scalar attribute, not a tensor
    add = AddIOp.build(lhs=c.results[0], rhs=c.results[0], result=i32)
    assert not is_constant(add.results[0]) and value_constant(add.results[0]) is None


def test_a_resource_without_data_is_no_constant_array() -> None:
    t = RankedTensorType([2], f32)
    w = WeightOp.build(output=t, value=DenseResourceElementsAttr(t, ResourceHandle("gone", None)))
    assert is_constant(w.results[0]) and constant_array(w.results[0]) is None

"""Traits and interfaces: op traits (with implied traits), op interfaces by inheritance, and
external models attached after the fact to op, type and attribute classes."""

from __future__ import annotations

import pytest

from lamina.dialects.func import FuncOp, ReturnOp
from lamina.ir.attributes import FloatAttr, IntegerAttr, StringAttr
from lamina.ir.builtin import ModuleOp
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import Op, operand, result_def
from lamina.ir.traits import (
    CallableOpInterface,
    InferTypeOpInterface,
    Interface,
    IsTerminator,
    NoMemoryEffect,
    Pure,
    Speculatable,
    SymbolOpInterface,
    is_pure,
)
from lamina.ir.types import FloatType, IntegerType, f32, i8, i32


class DoubleOp(Op):
    name = "lam_traits.double"
    traits = (Pure(),)
    input = operand()
    output = result_def()


class BitwidthTypeInterface(Interface):
    """A type interface: how many bits one value of the type occupies."""

    __slots__ = ()

    def bitwidth_of(self) -> int:
        raise NotImplementedError


class DescribeAttrInterface(Interface):
    """An attribute interface: a human description."""

    __slots__ = ()

    def describe(self) -> str:
        raise NotImplementedError


def test_pure_implies_no_memory_effect_and_speculatable() -> None:
    assert DoubleOp.has_trait(Pure)
    assert DoubleOp.has_trait(NoMemoryEffect) and DoubleOp.has_trait(Speculatable)
    assert ReturnOp.has_trait(IsTerminator) and not DoubleOp.has_trait(IsTerminator)


def test_op_interfaces_by_inheritance() -> None:
    f = FuncOp.new("f", [i32], [i32])
    assert SymbolOpInterface.get(f) is f and f.symbol_name() == "f"
    assert CallableOpInterface.get(f) is f and list(f.argument_types()) == [i32]
    m = ModuleOp.new([f])
    assert SymbolOpInterface.get(m) is m and m.symbol_name() is None
    assert InferTypeOpInterface.get(f) is None


def test_external_model_on_op_class() -> None:
    class InferDouble:
        def infer_result_types(self, op: DoubleOp) -> list:
            return [op.input.type]

    InferTypeOpInterface.attach(DoubleOp, InferDouble())
    try:
        f = FuncOp.new("g", [f32], [f32])
        op = DoubleOp.build(input=f.entry_block.args[0], output=f32)
        iface = InferTypeOpInterface.get(op)
        assert iface is not None and iface.infer_result_types() == [f32]
        assert is_pure(op)
    finally:
        InferTypeOpInterface._external.pop(DoubleOp)


def test_type_and_attribute_interfaces() -> None:
    class IntBits:
        def bitwidth_of(self, t: IntegerType) -> int:
            return t.width

    class FloatBits:
        def bitwidth_of(self, t: FloatType) -> int:
            return t.width

    class Describe:
        def describe(self, a: IntegerAttr) -> str:
            return f"{a.value} as {a.type}"

    BitwidthTypeInterface.attach(IntegerType, IntBits())
    BitwidthTypeInterface.attach(FloatType, FloatBits())
    DescribeAttrInterface.attach(IntegerAttr, Describe())
    assert BitwidthTypeInterface.get(i8).bitwidth_of() == 8
    assert BitwidthTypeInterface.get(f32).bitwidth_of() == 32
    assert DescribeAttrInterface.get(IntegerAttr(3, i32)).describe() == "3 as i32"
    assert DescribeAttrInterface.get(FloatAttr(1.0, f32)) is None
    assert not DescribeAttrInterface.implemented_by(StringAttr("x"))


def test_trait_verifier_raises_verify_error() -> None:
    f = FuncOp.new("h", [], [])
    r1, r2 = ReturnOp.build(), ReturnOp.build()
    f.entry_block.append(r1)
    f.entry_block.append(r2)
    with pytest.raises(VerifyError, match="must be the last operation"):
        IsTerminator().verify(r1)
    IsTerminator().verify(r2)

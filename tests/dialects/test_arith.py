"""Tests of the arith dialect: builders, verifiers, folders, canonicalization, execution."""

from __future__ import annotations

import numpy as np
import pytest

import lamina.dialects.arith as arith
from lamina.dialects.arith import (
    AddFOp,
    AddIOp,
    AndIOp,
    BitcastOp,
    CmpFOp,
    CmpIOp,
    ConstantOp,
    DivFOp,
    DivSIOp,
    DivUIOp,
    ExtFOp,
    ExtSIOp,
    ExtUIOp,
    FastMathFlagsAttr,
    FPToSIOp,
    IndexCastOp,
    IntegerOverflowFlagsAttr,
    MaxNumFOp,
    MulFOp,
    MulIOp,
    NegFOp,
    OrIOp,
    RemSIOp,
    SelectOp,
    ShLIOp,
    ShRSIOp,
    ShRUIOp,
    SIToFPOp,
    SubFOp,
    SubIOp,
    TruncFOp,
    TruncIOp,
    XOrIOp,
)
from lamina.dialects.func import FuncOp, ReturnOp
from lamina.ir.attributes import BoolAttr, DenseElementsAttr, FloatAttr, IntegerAttr
from lamina.ir.builder import Builder
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.core import Value
from lamina.ir.traits import ConstantLike, ExecutableOpInterface, Pure
from lamina.ir.types import IndexType, IntegerType, f16, f32, f64, i1, i8, i32, i64, tensor
from lamina.ir.verifier import verify

index = IndexType()
ui8 = IntegerType(8, "u")


@pytest.fixture
def ctx() -> Context:
    c = Context(load_all=False, handler=None)
    for d in ("func", "arith", "cf"):
        c.load_dialect(d)
    return c


def func_with_args(*types) -> tuple[FuncOp, Builder, list[Value]]:
    f = FuncOp.new("f", list(types), [])
    return f, Builder.at_end(f.entry_block), list(f.entry_block.args)


def verify_errors(ctx: Context, cls, in_types, out_types, props=None) -> list[str]:
    """Messages from verifying ``cls.create(args, out_types, props)`` inside a function whose
    arguments have ``in_types``."""
    f, b, args = func_with_args(*in_types)
    b.insert(cls.create(args, list(out_types), dict(props or {})))
    b.create(ReturnOp)
    with ctx.diagnostics.capture() as got:
        verify(ModuleOp.new([f]), ctx)
    return [d.message for d in got]


def val(t) -> Value:
    """A free-standing value of type t (an argument of a throwaway function)."""
    return FuncOp.new("tmp", [t], []).entry_block.args[0]


def ia(v: int, t=i32) -> IntegerAttr:
    return IntegerAttr(v, t)


# --------------------------------------------------------------------------------------------
# Registration, properties, builders
# --------------------------------------------------------------------------------------------


def test_dialect_registered_with_materializer() -> None:
    assert "arith.addi" in arith.ARITH.ops and "arith.cmpf" in arith.ARITH.ops
    c = arith.ARITH.materialize_constant(ia(5), i32, None)
    assert isinstance(c, ConstantOp) and c.parent is None and c.properties["value"] is ia(5)
    assert arith.materialize_constant(FloatAttr(1.0, f32), i32) is None


def test_default_properties_are_stored_like_mlir() -> None:
    x = val(i32)
    add = AddIOp.build(lhs=x, rhs=x)
    assert add.properties["overflowFlags"] is IntegerOverflowFlagsAttr()
    assert str(add.properties["overflowFlags"]) == "#arith.overflow<none>"
    # generic creation (what the parser does) fills the defaults too
    add2 = AddIOp.create([x, x], [i32])
    assert str(add2.properties["overflowFlags"]) == "#arith.overflow<none>"
    y = val(f32)
    addf = AddFOp.new(y, y)
    assert str(addf.properties["fastmath"]) == "#arith.fastmath<none>"
    assert str(FastMathFlagsAttr("fast")) == "#arith.fastmath<fast>"
    assert str(FastMathFlagsAttr(["ninf", "nnan"])) == "#arith.fastmath<nnan,ninf>"
    assert str(IntegerOverflowFlagsAttr(["nuw", "nsw"])) == "#arith.overflow<nsw, nuw>"
    assert DivSIOp.build(lhs=x, rhs=x).properties == {}


def test_builders_infer_result_types() -> None:
    x = val(tensor([4], i32))
    assert AddIOp.new(x, x).result.type is x.type
    cmp = CmpIOp.new("slt", x, x)
    assert cmp.result.type is tensor([4], i1)
    assert cmp.properties["predicate"] is IntegerAttr(2, i64)
    assert cmp.predicate_name == "slt"
    assert CmpFOp.new("olt", val(f32), val(f32)).properties["predicate"] is IntegerAttr(4, i64)
    c = ConstantOp.new(3, i32)
    assert c.result.type is i32 and c.properties["value"] is ia(3)
    assert ConstantOp.new(True).result.type is i1
    assert ExtSIOp.new(val(i32), i64).result.type is i64


def test_traits() -> None:
    assert ConstantOp.has_trait(ConstantLike) and ConstantOp.has_trait(Pure)
    assert AddIOp.has_trait(Pure) and not DivSIOp.has_trait(Pure)
    assert ExecutableOpInterface.get(AddIOp.new(val(i32), val(i32))) is not None


# --------------------------------------------------------------------------------------------
# Verifiers
# --------------------------------------------------------------------------------------------


def test_valid_ops_verify(ctx: Context) -> None:
    f, b, (x, y, c, fx) = func_with_args(i32, i32, i1, f32)
    b.create(ConstantOp, value=ia(1))
    b.create(AddIOp, lhs=x, rhs=y)
    b.create(CmpIOp, predicate="sge", lhs=x, rhs=y)
    b.create(CmpFOp, predicate="une", lhs=fx, rhs=fx)
    b.create(SelectOp, condition=c, true_value=x, false_value=y)
    b.create(IndexCastOp, in_=x, out=index)
    b.create(ExtSIOp, in_=x, out=i64)
    b.create(TruncIOp, in_=x, out=i8)
    b.create(SIToFPOp, in_=x, out=f32)
    b.create(FPToSIOp, in_=fx, out=i32)
    b.create(ExtFOp, in_=fx, out=f64)
    b.create(TruncFOp, in_=fx, out=f16)
    b.create(BitcastOp, in_=fx, out=i32)
    b.create(NegFOp, operand=fx)
    b.create(ReturnOp)
    with ctx.diagnostics.capture() as got:
        assert verify(ModuleOp.new([f]), ctx), [d.message for d in got]


@pytest.mark.parametrize(
    ("cls", "src", "dst"),
    [(ExtSIOp, i32, IntegerType(16)), (TruncIOp, i32, i64), (ExtFOp, f32, f16), (BitcastOp, f32, i64),
     (IndexCastOp, i32, i64), (ExtUIOp, i32, i32)],
)  # fmt: skip
def test_cast_incompatible(ctx: Context, cls, src, dst) -> None:
    assert verify_errors(ctx, cls, [src], [dst]) == [
        f"'{cls.name}' op operand type '{src}' and result type '{dst}' are cast incompatible"
    ]


def test_constant_verifier(ctx: Context) -> None:
    assert verify_errors(ctx, ConstantOp, [], [i32], {"value": ia(1, i64)}) == [
        "'arith.constant' op failed to verify that all of {value, result} have same type"
    ]
    t = tensor([4], i32)
    assert verify_errors(ctx, ConstantOp, [], [t], {"value": DenseElementsAttr(t, 1)}) == []
    assert verify_errors(ctx, ConstantOp, [], [tensor([3], i32)], {"value": DenseElementsAttr(t, 1)}) == [
        "'arith.constant' op failed to verify that all of {value, result} have same type"
    ]


def test_cmp_and_select_verifiers(ctx: Context) -> None:
    p1 = {"predicate": ia(1, i64)}
    assert verify_errors(ctx, CmpIOp, [i32, i32], [i32], p1) == [
        "'arith.cmpi' op result #0 must be bool-like, but got 'i32'"
    ]
    bad = verify_errors(ctx, CmpIOp, [i32, i32], [i1], {"predicate": ia(12, i64)})
    assert bad[0].startswith("'arith.cmpi' op attribute 'predicate' failed to satisfy")
    assert verify_errors(ctx, CmpIOp, [i32, i64], [i1], p1) == [
        "'arith.cmpi' op requires all operands to have the same type"
    ]
    assert verify_errors(ctx, SelectOp, [i32, i32, i32], [i32]) == [
        "'arith.select' op operand #0 must be bool-like, but got 'i32'"
    ]
    t = tensor([4], i32)
    assert verify_errors(ctx, SelectOp, [tensor([2], i1), t, t], [t]) == [
        "'arith.select' op failed to verify that condition is signless i1 or has matching shape"
    ]
    assert verify_errors(ctx, SelectOp, [i1, t, t], [t]) == []
    assert verify_errors(ctx, SelectOp, [i1, t, tensor([5], i32)], [t]) == [
        "'arith.select' op failed to verify that all of {true_value, false_value, result} have same type"
    ]


def test_binary_type_errors(ctx: Context) -> None:
    assert verify_errors(ctx, AddIOp, [i32, i64], [i32]) == [
        "'arith.addi' op requires the same type for all operands and results"
    ]
    assert verify_errors(ctx, AddIOp, [f32, f32], [f32]) == [
        "'arith.addi' op operand #0 must be signless-integer-like, but got 'f32'"
    ]
    assert verify_errors(ctx, AddFOp, [i32, i32], [i32]) == [
        "'arith.addf' op operand #0 must be floating-point-like, but got 'i32'"
    ]


# --------------------------------------------------------------------------------------------
# Constant folding
# --------------------------------------------------------------------------------------------


def fold(cls, *consts, result=None, **kw):
    """Fold a fresh op of class ``cls`` whose operands are all constant."""
    types = [c.type for c in consts]
    args = [val(t) for t in types]
    if cls in (CmpIOp, CmpFOp):
        op = cls.new(kw["predicate"], *args)
    else:
        op = cls.create(args, [result or types[-1]])
    return op.fold(list(consts))


@pytest.mark.parametrize(
    ("cls", "a", "b", "expected"),
    [
        (AddIOp, 2**31 - 1, 1, -(2**31)),
        (SubIOp, -(2**31), 1, 2**31 - 1),
        (MulIOp, 65536, 65536, 0),
        (DivSIOp, -7, 2, -3),
        (DivUIOp, -1, 2, 2**31 - 1),
        (RemSIOp, -7, 2, -1),
        (AndIOp, 12, 10, 8),
        (OrIOp, 12, 10, 14),
        (XOrIOp, 12, 10, 6),
        (ShLIOp, 1, 31, -(2**31)),
        (ShRSIOp, -8, 1, -4),
        (ShRUIOp, -8, 28, 15),
        (arith.MaxSIOp, -1, 1, 1),
        (arith.MaxUIOp, -1, 1, -1),
        (arith.MinUIOp, -1, 1, 1),
        (arith.CeilDivSIOp, 7, 2, 4),
        (arith.FloorDivSIOp, -7, 2, -4),
        (arith.CeilDivUIOp, 7, 2, 4),
        (arith.RemUIOp, 7, 4, 3),
    ],
)
def test_integer_folds_wrap_at_width(cls, a, b, expected) -> None:
    assert fold(cls, ia(a), ia(b)) == [ia(expected)]


def test_integer_folds_that_must_not_fold() -> None:
    assert fold(DivSIOp, ia(1), ia(0)) is None
    assert fold(DivSIOp, ia(-(2**31)), ia(-1)) is None
    assert fold(ShLIOp, ia(1), ia(32)) is None


def test_i8_and_unsigned_and_i1_folds() -> None:
    assert fold(AddIOp, ia(127, i8), ia(1, i8)) == [ia(-128, i8)]
    assert fold(AddIOp, ia(255, ui8), ia(1, ui8)) == [ia(0, ui8)]
    assert fold(XOrIOp, BoolAttr(True), BoolAttr(True)) == [BoolAttr(False)]
    assert fold(AddIOp, ia(2**63 - 1, i64), ia(1, i64)) == [ia(-(2**63), i64)]


def test_cmp_folds() -> None:
    assert fold(CmpIOp, ia(-1), ia(1), predicate="slt") == [BoolAttr(True)]
    assert fold(CmpIOp, ia(-1), ia(1), predicate="ult") == [BoolAttr(False)]
    assert fold(CmpIOp, ia(3), ia(3), predicate="uge") == [BoolAttr(True)]
    nan = FloatAttr(float("nan"), f32)
    one = FloatAttr(1.0, f32)
    assert fold(CmpFOp, nan, one, predicate="olt") == [BoolAttr(False)]
    assert fold(CmpFOp, nan, one, predicate="ult") == [BoolAttr(True)]
    assert fold(CmpFOp, one, one, predicate="oeq") == [BoolAttr(True)]
    assert fold(CmpFOp, nan, one, predicate="uno") == [BoolAttr(True)]


def test_float_folds_round_to_type() -> None:
    a, b = FloatAttr(1.0, f32), FloatAttr(3.0, f32)
    (r,) = fold(DivFOp, a, b)
    assert r.type is f32 and r.value == float(np.float32(1.0) / np.float32(3.0))
    assert fold(AddFOp, FloatAttr(1.5, f64), FloatAttr(2.25, f64)) == [FloatAttr(3.75, f64)]
    assert fold(MulFOp, FloatAttr(65504.0, f16), FloatAttr(2.0, f16))[0].value == float("inf")
    assert fold(MaxNumFOp, FloatAttr(float("nan"), f32), FloatAttr(2.0, f32)) == [FloatAttr(2.0, f32)]
    assert fold(NegFOp, FloatAttr(2.0, f32)) == [FloatAttr(-2.0, f32)]


def test_dense_folds_splat_and_elementwise() -> None:
    t = tensor([4], i8)
    d = DenseElementsAttr(t, np.array([100, 27, -128, 5], np.int8))
    (r,) = fold(AddIOp, d, DenseElementsAttr(t, 100))
    assert isinstance(r, DenseElementsAttr) and r.type is t
    np.testing.assert_array_equal(r.to_numpy(), np.array([-56, 127, -28, 105], np.int8))
    (s,) = fold(MulIOp, DenseElementsAttr(t, 3), DenseElementsAttr(t, 5))
    assert s.is_splat and s.splat_value == 15
    ft = tensor([2, 2], f32)
    (q,) = fold(SubFOp, DenseElementsAttr(ft, np.arange(4, dtype=np.float32)), DenseElementsAttr(ft, 1.0))
    np.testing.assert_array_equal(q.to_numpy(), np.array([[-1, 0], [1, 2]], np.float32))


def test_cast_folds() -> None:
    assert fold(ExtSIOp, ia(-3), result=i64) == [ia(-3, i64)]
    assert fold(ExtUIOp, ia(-3), result=i64) == [ia(2**32 - 3, i64)]
    assert fold(TruncIOp, ia(300), result=i8) == [ia(44, i8)]
    assert fold(IndexCastOp, ia(-1), result=index) == [IntegerAttr(-1, index)]
    assert fold(SIToFPOp, ia(-3), result=f32) == [FloatAttr(-3.0, f32)]
    assert fold(arith.UIToFPOp, ia(-1, i8), result=f32) == [FloatAttr(255.0, f32)]
    assert fold(FPToSIOp, FloatAttr(-2.7, f32), result=i32) == [ia(-2)]
    assert fold(FPToSIOp, FloatAttr(1e10, f32), result=i32) is None
    assert fold(ExtFOp, FloatAttr(0.1, f32), result=f64) == [FloatAttr(float(np.float32(0.1)), f64)]
    assert fold(TruncFOp, FloatAttr(0.1, f64), result=f16) == [FloatAttr(0.1, f16)]
    assert fold(BitcastOp, FloatAttr(1.0, f32), result=i32) == [ia(0x3F800000)]
    assert fold(BitcastOp, ia(0x3F800000), result=f32) == [FloatAttr(1.0, f32)]
    t = tensor([3], i32)
    (r,) = fold(SIToFPOp, DenseElementsAttr(t, np.array([1, -2, 3], np.int32)), result=tensor([3], f32))
    np.testing.assert_array_equal(r.to_numpy(), np.array([1, -2, 3], np.float32))


# --------------------------------------------------------------------------------------------
# Identity folds
# --------------------------------------------------------------------------------------------


def test_identity_folds() -> None:
    x, y = val(i32), val(i32)
    zero, one, ones = ia(0), ia(1), ia(-1)
    assert AddIOp.new(x, y).fold([None, zero]) == [x]
    assert AddIOp.new(x, y).fold([zero, None]) == [y]
    assert MulIOp.new(x, y).fold([None, one]) == [x]
    assert MulIOp.new(x, y).fold([None, zero]) == [zero]
    assert SubIOp.new(x, x).fold([None, None]) == [zero]
    assert SubIOp.new(x, y).fold([None, zero]) == [x]
    assert AndIOp.new(x, y).fold([None, ones]) == [x]
    assert AndIOp.new(x, x).fold([None, None]) == [x]
    assert OrIOp.new(x, y).fold([None, zero]) == [x]
    assert XOrIOp.new(x, x).fold([None, None]) == [zero]
    assert ShLIOp.new(x, y).fold([None, zero]) == [x]
    assert DivSIOp.new(x, y).fold([None, one]) == [x]
    assert AddIOp.new(x, y).fold([None, None]) is None
    # cmpi of equal operands
    assert CmpIOp.new("eq", x, x).fold([None, None]) == [BoolAttr(True)]
    assert CmpIOp.new("slt", x, x).fold([None, None]) == [BoolAttr(False)]
    # x - x on tensors folds to a splat zero
    t = tensor([2, 3], i32)
    xt = val(t)
    (z,) = SubIOp.new(xt, xt).fold([None, None])
    assert isinstance(z, DenseElementsAttr) and z.is_splat and z.splat_value == 0
    # floats: x + -0.0, x * 1.0, but not x + 0.0
    fx = val(f32)
    assert AddFOp.new(fx, fx).fold([None, FloatAttr(-0.0, f32)]) == [fx]
    assert AddFOp.new(fx, fx).fold([None, FloatAttr(0.0, f32)]) is None
    assert SubFOp.new(fx, fx).fold([None, FloatAttr(0.0, f32)]) == [fx]
    assert MulFOp.new(fx, fx).fold([None, FloatAttr(1.0, f32)]) == [fx]


def test_select_and_cast_chain_folds() -> None:
    c, a, b = val(i1), val(i32), val(i32)
    assert SelectOp.new(c, a, b).fold([BoolAttr(True), None, None]) == [a]
    assert SelectOp.new(c, a, b).fold([BoolAttr(False), None, None]) == [b]
    assert SelectOp.new(c, a, a).fold([None, None, None]) == [a]
    t_, f_ = val(i1), val(i1)
    assert SelectOp.new(c, t_, f_).fold([None, BoolAttr(True), BoolAttr(False)]) == [c]
    x = val(i32)
    ext = ExtSIOp.new(x, i64)
    assert TruncIOp.new(ext.result, i32).fold([None]) == [x]
    ic = IndexCastOp.new(x, index)
    assert IndexCastOp.new(ic.result, i32).fold([None]) == [x]
    n = NegFOp.new(val(f32))
    assert NegFOp.new(n.result).fold([None]) == [n.operand]
    assert ConstantOp.new(5, i32).fold([]) == [ia(5)]


# --------------------------------------------------------------------------------------------
# Canonicalization (through the greedy driver)
# --------------------------------------------------------------------------------------------


def _canonicalize(m: ModuleOp) -> None:
    greedy = pytest.importorskip("lamina.rewrite.greedy")
    pats = [p for cls in arith.ARITH.ops.values() for p in cls.get_canonicalization_patterns()]
    greedy.apply_patterns_greedily(m, pats)


def test_canonicalize_reassociates_constants(ctx: Context) -> None:
    f = FuncOp.new("f", [i32], [i32])
    b = Builder.at_end(f.entry_block)
    x = f.entry_block.args[0]
    c1 = b.create(ConstantOp, value=ia(3)).result
    c2 = b.create(ConstantOp, value=ia(4)).result
    a1 = b.create(AddIOp, lhs=x, rhs=c1).result
    a2 = b.create(AddIOp, lhs=a1, rhs=c2).result
    s = b.create(SubIOp, lhs=a2, rhs=c1).result
    m1 = b.create(MulIOp, lhs=s, rhs=c2).result
    m2 = b.create(MulIOp, lhs=m1, rhs=c1).result
    b.create(ReturnOp, operands_=[m2])
    m = ModuleOp.new([f])
    _canonicalize(m)
    assert verify(m, ctx)
    ops = [op.name for op in f.entry_block]
    assert ops.count("arith.addi") == 1 and ops.count("arith.muli") == 1 and "arith.subi" not in ops
    consts = sorted(op.properties["value"].value for op in f.entry_block if isinstance(op, ConstantOp))
    assert consts == [4, 12]  # x + (3 + 4 - 3), then * (4 * 3)


def test_canonicalize_not_of_cmpi(ctx: Context) -> None:
    f = FuncOp.new("f", [i32, i32], [i1])
    b = Builder.at_end(f.entry_block)
    x, y = f.entry_block.args
    c = b.create(CmpIOp, predicate="slt", lhs=x, rhs=y).result
    t = b.create(ConstantOp, value=BoolAttr(True)).result
    n = b.create(XOrIOp, lhs=c, rhs=t).result
    b.create(ReturnOp, operands_=[n])
    m = ModuleOp.new([f])
    _canonicalize(m)
    cmps = [op for op in f.entry_block if isinstance(op, CmpIOp)]
    assert [c.predicate_name for c in cmps] == ["sge"]
    assert verify(m, ctx)


def test_canonicalize_ext_of_ext(ctx: Context) -> None:
    f = FuncOp.new("f", [i8], [i64])
    b = Builder.at_end(f.entry_block)
    (x,) = f.entry_block.args
    e1 = b.create(ExtSIOp, in_=x, out=i32).result
    e2 = b.create(ExtSIOp, in_=e1, out=i64).result
    b.create(ReturnOp, operands_=[e2])
    m = ModuleOp.new([f])
    _canonicalize(m)
    exts = [op for op in f.entry_block if isinstance(op, ExtSIOp)]
    assert len(exts) == 1 and exts[0].operands[0] is x and exts[0].result.type is i64


# --------------------------------------------------------------------------------------------
# Execution
# --------------------------------------------------------------------------------------------


def test_execute_scalars_and_tensors() -> None:
    x = val(i32)
    (r,) = AddIOp.new(x, x).execute([np.int32(2**31 - 1), np.int32(5)])
    assert r == np.int32(-(2**31) + 4) and r.dtype == np.int32
    t = tensor([3], f32)
    xt = val(t)
    (q,) = MulFOp.new(xt, xt).execute([np.array([1, 2, 3], np.float32), np.array([2, 2, 2], np.float32)])
    np.testing.assert_array_equal(q, np.array([2, 4, 6], np.float32))
    assert q.dtype == np.float32
    (c,) = CmpIOp.new("ult", x, x).execute([np.int32(-1), np.int32(1)])
    assert c == np.bool_(False)
    (s,) = SelectOp.new(val(i1), x, x).execute([np.bool_(True), np.int32(7), np.int32(9)])
    assert s == 7
    (e,) = ExtUIOp.new(val(i8), i32).execute([np.int8(-1)])
    assert e == 255
    (k,) = ConstantOp.new(DenseElementsAttr(tensor([2], i32), 4)).execute([])
    np.testing.assert_array_equal(k, [4, 4])
    with pytest.raises(ArithmeticError):
        DivSIOp.new(x, x).execute([np.int32(1), np.int32(0)])


# --------------------------------------------------------------------------------------------
# Generic form round trip (the text is mlir-opt-22 --mlir-print-op-generic output)
# --------------------------------------------------------------------------------------------

_MLIR_GENERIC = """"builtin.module"() ({
  "func.func"() <{function_type = (i32, i32, f32, f32, i1, index, tensor<4xi32>) -> (), sym_name = "f"}> ({
  ^bb0(%arg0: i32, %arg1: i32, %arg2: f32, %arg3: f32, %arg4: i1, %arg5: index, %arg6: tensor<4xi32>):
    %0 = "arith.constant"() <{value = 1 : i32}> : () -> i32
    %1 = "arith.addi"(%arg0, %arg1) <{overflowFlags = #arith.overflow<nsw>}> : (i32, i32) -> i32
    %2 = "arith.subi"(%arg0, %arg1) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32
    %3 = "arith.muli"(%arg0, %arg1) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32
    %4 = "arith.divsi"(%arg0, %arg1) : (i32, i32) -> i32
    %5 = "arith.divui"(%arg0, %arg1) : (i32, i32) -> i32
    %6 = "arith.remsi"(%arg0, %arg1) : (i32, i32) -> i32
    %7 = "arith.andi"(%arg0, %arg1) : (i32, i32) -> i32
    %8 = "arith.ori"(%arg0, %arg1) : (i32, i32) -> i32
    %9 = "arith.xori"(%arg0, %arg1) : (i32, i32) -> i32
    %10 = "arith.shli"(%arg0, %arg1) <{overflowFlags = #arith.overflow<none>}> : (i32, i32) -> i32
    %11 = "arith.shrsi"(%arg0, %arg1) : (i32, i32) -> i32
    %12 = "arith.addf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %13 = "arith.subf"(%arg2, %arg3) <{fastmath = #arith.fastmath<fast>}> : (f32, f32) -> f32
    %14 = "arith.mulf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %15 = "arith.divf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %16 = "arith.negf"(%arg2) <{fastmath = #arith.fastmath<none>}> : (f32) -> f32
    %17 = "arith.maxnumf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %18 = "arith.minnumf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %19 = "arith.cmpi"(%arg0, %arg1) <{predicate = 2 : i64}> : (i32, i32) -> i1
    %20 = "arith.cmpf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>, predicate = 4 : i64}> : (f32, f32) -> i1
    %21 = "arith.select"(%arg4, %arg0, %arg1) : (i1, i32, i32) -> i32
    %22 = "arith.index_cast"(%arg0) : (i32) -> index
    %23 = "arith.extsi"(%arg0) : (i32) -> i64
    %24 = "arith.extui"(%arg0) : (i32) -> i64
    %25 = "arith.trunci"(%arg0) <{overflowFlags = #arith.overflow<none>}> : (i32) -> i8
    %26 = "arith.sitofp"(%arg0) : (i32) -> f32
    %27 = "arith.fptosi"(%arg2) : (f32) -> i32
    %28 = "arith.extf"(%arg2) : (f32) -> f64
    %29 = "arith.truncf"(%arg2) : (f32) -> f16
    %30 = "arith.bitcast"(%arg2) : (f32) -> i32
    %31 = "arith.constant"() <{value = dense<1> : tensor<4xi32>}> : () -> tensor<4xi32>
    %32 = "arith.addi"(%arg6, %31) <{overflowFlags = #arith.overflow<none>}> : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
    %33 = "arith.constant"() <{value = 1.500000e+00 : f32}> : () -> f32
    %34 = "arith.constant"() <{value = true}> : () -> i1
    %35 = "arith.trunci"(%arg0) <{overflowFlags = #arith.overflow<nuw>}> : (i32) -> i8
    %36 = "arith.remui"(%arg0, %arg1) : (i32, i32) -> i32
    %37 = "arith.shrui"(%arg0, %arg1) : (i32, i32) -> i32
    %38 = "arith.remf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %39 = "arith.maximumf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %40 = "arith.minimumf"(%arg2, %arg3) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
    %41 = "arith.maxsi"(%arg0, %arg1) : (i32, i32) -> i32
    %42 = "arith.minsi"(%arg0, %arg1) : (i32, i32) -> i32
    %43 = "arith.maxui"(%arg0, %arg1) : (i32, i32) -> i32
    %44 = "arith.minui"(%arg0, %arg1) : (i32, i32) -> i32
    %45 = "arith.uitofp"(%arg0) : (i32) -> f32
    %46 = "arith.fptoui"(%arg2) : (f32) -> i32
    %47 = "arith.index_castui"(%arg0) : (i32) -> index
    %48 = "arith.ceildivsi"(%arg0, %arg1) : (i32, i32) -> i32
    %49 = "arith.floordivsi"(%arg0, %arg1) : (i32, i32) -> i32
    %50 = "arith.ceildivui"(%arg0, %arg1) : (i32, i32) -> i32
    "cf.assert"(%arg4) <{msg = "boom"}> : (i1) -> ()
    "cf.cond_br"(%arg4, %arg0)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i32) -> ()
  ^bb1(%51: i32):  // pred: ^bb0
    "cf.br"()[^bb2] : () -> ()
  ^bb2:  // 2 preds: ^bb0, ^bb1
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()
"""


def test_generic_form_round_trips_like_mlir_opt(ctx: Context) -> None:
    parser = pytest.importorskip("lamina.ir.parser")
    printer = pytest.importorskip("lamina.ir.printer")
    with ctx.diagnostics.capture() as got:
        m = parser.parse_module(_MLIR_GENERIC, ctx)
        assert m is not None, [str(d) for d in got]
        assert verify(m, ctx), [str(d) for d in got]
    assert printer.print_operation(m, generic=True) == _MLIR_GENERIC


def test_parsed_ops_without_default_properties_get_them(ctx: Context) -> None:
    parser = pytest.importorskip("lamina.ir.parser")
    text = """"func.func"() <{function_type = (i32, f32) -> (), sym_name = "f"}> ({
^bb0(%a: i32, %x: f32):
  %0 = "arith.addi"(%a, %a) : (i32, i32) -> i32
  %1 = "arith.addf"(%x, %x) : (f32, f32) -> f32
  "func.return"() : () -> ()
}) : () -> ()"""
    m = parser.parse_module(text, ctx)
    ops = [op for op in m.walk_ops() if op.name.startswith("arith.")]
    assert str(ops[0].properties["overflowFlags"]) == "#arith.overflow<none>"
    assert str(ops[1].properties["fastmath"]) == "#arith.fastmath<none>"

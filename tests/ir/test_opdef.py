"""Tests of declarative op definitions (lamina.ir.opdef): accessors, builder, segment sizes,
constraint errors, traits."""

from __future__ import annotations

import numpy as np
import pytest

from lamina.ir.attributes import (
    ArrayAttr,
    BoolAttr,
    DenseArrayAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TypeAttr,
    UnitAttr,
)
from lamina.ir.constraints import (
    AnyFloat,
    AnyOf,
    BoolProp,
    ElementsAttrC,
    F64ArrayAttr,
    F64Attr,
    I64ArrayAttr,
    I64Attr,
    SignlessIntegerLike,
    StrArrayAttr,
    StrAttr,
    StrEnum,
    TypeAttrC,
)
from lamina.ir.core import Block, IRError, Region
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import (
    Op,
    declared_ops,
    operand,
    opt_operand,
    opt_prop,
    prop,
    region,
    result_def,
    successor,
    var_operand,
    var_result,
    var_successor,
    verify_op_def,
    verify_traits,
)
from lamina.ir.traits import HasParent, IsTerminator, NoMemoryEffect, Pure, SameOperandsAndResultType
from lamina.ir.types import f32, f64, i32, i64


class SimpleOp(Op):
    name = "tst.simple"
    traits = (Pure(), SameOperandsAndResultType())
    lhs = operand(SignlessIntegerLike)
    rhs = operand(SignlessIntegerLike)
    out = result_def(SignlessIntegerLike)
    label = opt_prop(StringAttr)
    count = prop(IntegerAttr, default=IntegerAttr(0, i64))


class VarOp(Op):
    name = "tst.var"
    first = operand()
    rest = var_operand(AnyFloat)
    results_ = var_result()


class SegOp(Op):
    name = "tst.seg"
    a = var_operand()
    b = opt_operand()
    c = operand()
    x = var_result()
    y = var_result()


class RegionOp(Op):
    name = "tst.region"
    body = region(single_block=True)
    more = region()


class BranchyOp(Op):
    name = "tst.br"
    traits = (IsTerminator(), HasParent("tst.region"))
    dest = successor()
    others = var_successor()


class SimpleSucc(Op):
    name = "tst.succ"
    dest = successor()


class OptOp(Op):
    name = "tst.opt"
    a = operand()
    b = opt_operand()


class RenamedPropOp(Op):
    name = "tst.renamed"
    flags = prop(UnitAttr, name="flagAttr", optional=True)
    needed = prop(StringAttr)


def args(*types):
    return Block(list(types)).args


def test_accessors_and_builder() -> None:
    x, y = args(i32, i32)
    op = SimpleOp.build(lhs=x, rhs=y, out=i32, label=StringAttr("hi"))
    assert op.lhs is x and op.rhs is y and op.out is op.results[0]
    assert op.label is StringAttr("hi")
    assert op.count is IntegerAttr(0, i64)  # default when absent
    assert "count" not in op.properties
    op.count = 5  # setter converts Python values
    assert op.properties["count"] is IntegerAttr(5, i64)
    op.label = None
    assert "label" not in op.properties
    verify_op_def(op)
    verify_traits(op)
    assert SimpleOp.has_trait(Pure) and SimpleOp.has_trait(NoMemoryEffect)


def test_builder_errors() -> None:
    (x,) = args(i32)
    with pytest.raises(IRError, match="missing operand 'rhs'"):
        SimpleOp.build(lhs=x, out=i32)
    with pytest.raises(IRError, match="missing result type 'out'"):
        SimpleOp.build(lhs=x, rhs=x)
    with pytest.raises(IRError, match="unknown builder argument"):
        SimpleOp.build(lhs=x, rhs=x, out=i32, bogus=1)


def test_constraint_and_count_errors() -> None:
    x, f = args(i32, f32)
    with pytest.raises(VerifyError, match="operand #1 must be signless-integer-like, but got 'f32'"):
        verify_op_def(SimpleOp.create([x, f], [i32]))
    with pytest.raises(VerifyError, match=r"^expected 2 operands, but found 1$"):
        verify_op_def(SimpleOp.create([x], [i32]))
    with pytest.raises(VerifyError, match=r"^requires one result$"):
        verify_op_def(SimpleOp.create([x, x], []))
    with pytest.raises(VerifyError, match=r"^requires one result$"):
        verify_op_def(SimpleOp.create([x, x], [i32, i32]))
    with pytest.raises(VerifyError, match=r"^requires zero regions$"):
        verify_op_def(SimpleOp.create([x, x], [i32], regions=1))
    with pytest.raises(VerifyError, match="result #0 must be signless-integer-like, but got 'f32'"):
        verify_op_def(SimpleOp.create([x, x], [f32]))
    with pytest.raises(VerifyError, match="attribute 'label' failed to satisfy constraint"):
        verify_op_def(SimpleOp.create([x, x], [i32], {"label": UnitAttr()}))
    with pytest.raises(VerifyError, match="requires the same type for all operands and results"):
        verify_traits(SimpleOp.create([x, x], [i64]))


def test_single_variadic_group() -> None:
    x, f1, f2 = args(i32, f32, f32)
    op = VarOp.build(first=x, rest=[f1, f2], results_=[i32, f32])
    assert op.first is x and op.rest == [f1, f2] and op.results_ == list(op.results)
    assert "operandSegmentSizes" not in op.properties
    verify_op_def(op)
    with pytest.raises(VerifyError, match="expected 1 or more operands, but found 0"):
        verify_op_def(VarOp.create([], []))
    with pytest.raises(VerifyError, match="operand #2 must be floating-point"):
        verify_op_def(VarOp.create([x, f1, x], []))


def test_segment_sizes() -> None:
    a1, a2, b, c = args(i32, i32, f32, i64)
    op = SegOp.build(a=[a1, a2], b=b, c=c, x=[i32], y=[f32, f32])
    assert op.properties["operandSegmentSizes"] is DenseArrayAttr.i32([2, 1, 1])
    assert op.properties["resultSegmentSizes"] is DenseArrayAttr.i32([1, 2])
    assert op.a == [a1, a2] and op.b is b and op.c is c
    assert op.x == [op.results[0]] and op.y == list(op.results[1:])
    verify_op_def(op)
    no_b = SegOp.build(a=[], c=c, x=[], y=[])
    assert no_b.b is None and no_b.a == [] and no_b.c is c
    assert no_b.properties["operandSegmentSizes"] is DenseArrayAttr.i32([0, 0, 1])
    verify_op_def(no_b)
    bad = SegOp.create(
        [a1, c],
        [],
        {
            "operandSegmentSizes": DenseArrayAttr.i32([1, 0, 0]),
            "resultSegmentSizes": DenseArrayAttr.i32([0, 0]),
        },
    )
    with pytest.raises(VerifyError, match=r"operand count \(2\) does not match with the total size \(1\)"):
        verify_op_def(bad)
    bad2 = SegOp.create(
        [a1, c],
        [],
        {
            "operandSegmentSizes": DenseArrayAttr.i32([0, 2, 0]),
            "resultSegmentSizes": DenseArrayAttr.i32([0, 0]),
        },
    )
    with pytest.raises(VerifyError, match="invalid size"):
        verify_op_def(bad2)
    missing = SegOp.create([c], [])  # like MLIR: a missing segment property counts as all zeros
    with pytest.raises(VerifyError, match=r"operand count \(1\) does not match with the total size \(0\)"):
        verify_op_def(missing)
    short = SegOp.create([c], [], {"operandSegmentSizes": DenseArrayAttr.i32([1])})
    with pytest.raises(VerifyError, match="'operandSegmentSizes' must be an array<i32> of 3 elements"):
        verify_op_def(short)


def test_regions_and_successors() -> None:
    r = RegionOp.build()
    assert isinstance(r.body, Region) and isinstance(r.more, Region) and len(r.regions) == 2
    verify_op_def(r)
    r.body.add_block()
    r.body.add_block()
    with pytest.raises(
        VerifyError, match=r"region #0 \('body'\) failed to verify constraint: region with 1 blocks"
    ):
        verify_op_def(r)
    with pytest.raises(VerifyError, match=r"^expected 2 regions$"):
        verify_op_def(RegionOp.create(regions=1))
    d, e = Block(), Block()
    br = BranchyOp.build(dest=d, others=[e, d])
    assert br.dest is d and br.others == [e, d] and br.successors == [d, e, d]
    verify_op_def(br)
    with pytest.raises(IRError, match="missing successor"):
        BranchyOp.build()
    with pytest.raises(VerifyError, match=r"^requires 1 successor but found 0$"):
        verify_op_def(SimpleSucc.create())
    with pytest.raises(VerifyError, match=r"^requires at least 1 successors but found 0$"):
        verify_op_def(BranchyOp.create())
    with pytest.raises(VerifyError, match=r"expects parent op 'tst.region'"):
        verify_traits(br)
    blk = Block()
    RegionOp.build(body=Region(blocks=[blk]))
    blk.append(br)
    verify_traits(br)


def test_optional_operand_counts() -> None:
    x, y, z = args(i32, i32, i32)
    assert OptOp.build(a=x).b is None and OptOp.build(a=x, b=y).b is y
    verify_op_def(OptOp.create([x]))
    with pytest.raises(VerifyError, match=r"^expected 1 or more operands, but found 0$"):
        verify_op_def(OptOp.create([]))
    with pytest.raises(
        VerifyError, match=r"^operand group starting at #1 requires 0 or 1 element, but found 2$"
    ):
        verify_op_def(OptOp.create([x, y, z]))


def test_property_name_override_and_required() -> None:
    op = RenamedPropOp.build(flagAttr=UnitAttr(), needed=StringAttr("x"))
    assert op.properties == {"flagAttr": UnitAttr(), "needed": StringAttr("x")}
    assert op.flags is UnitAttr() and "flagAttr" in RenamedPropOp.op_def.prop_names
    with pytest.raises(VerifyError, match="requires attribute 'needed'"):
        verify_op_def(RenamedPropOp.create())
    op.set_attr("flagAttr", UnitAttr())
    assert "flagAttr" not in op.attributes


def test_reserved_field_names_rejected() -> None:
    with pytest.raises(TypeError, match="reserved"):
        type("Bad", (Op,), {"name": "tst.bad", "results": var_result()})


def test_declared_ops_and_custom_assembly_flag() -> None:
    assert set(declared_ops([SimpleOp, VarOp, Op, 3, "x"])) == {SimpleOp, VarOp}
    assert not SimpleOp.has_custom_assembly

    class Fmt(Op):
        name = "tst.fmt"
        assembly_format = "attr-dict"

    assert Fmt.has_custom_assembly


# ---- typed accessors: a property reads as its constraint's Python value --------------------------


class KindsOp(Op):
    name = "tst.kinds"
    group = prop(I64Attr, default=IntegerAttr(1, i64))
    alpha = prop(F64Attr, optional=True)
    mode = prop(StrEnum("a", "b"), default=StringAttr("a"))
    label = prop(StrAttr, optional=True)
    pads = prop(I64ArrayAttr, optional=True)
    scales = prop(F64ArrayAttr, optional=True)
    flag = prop(BoolProp, default=BoolAttr(False))
    names = prop(StrArrayAttr, optional=True)
    value = prop(ElementsAttrC, optional=True)
    ty = prop(TypeAttrC, optional=True)
    either = prop(AnyOf(I64Attr, I64ArrayAttr), optional=True)


def test_typed_accessors_read_python_values() -> None:
    op = KindsOp.build()
    assert op.group == 1 and type(op.group) is int  # the declared default
    assert op.mode == "a" and op.flag is False
    assert op.alpha is None and op.pads is None and op.value is None  # absent, no default
    op.group, op.alpha, op.mode, op.label = 3, 2, "b", "x"
    op.pads, op.scales, op.flag, op.names = [1, 2], (0.5,), True, ["u", "v"]
    op.value, op.ty, op.either = np.arange(3, dtype=np.int64), f32, [4, 5]
    p = op.properties
    assert p["group"] is IntegerAttr(3, i64) and p["alpha"] is FloatAttr(2.0, f64)
    assert p["mode"] is StringAttr("b") and p["flag"] is BoolAttr(True)
    assert p["pads"] is DenseArrayAttr(i64, [1, 2]) and p["scales"] is DenseArrayAttr(f64, [0.5])
    assert p["names"] is ArrayAttr([StringAttr("u"), StringAttr("v")]) and p["ty"] is TypeAttr(f32)
    assert (op.group, op.alpha, op.mode, op.label) == (3, 2.0, "b", "x") and type(op.alpha) is float
    assert (op.pads, op.scales, op.flag, op.names) == ((1, 2), (0.5,), True, ("u", "v"))
    assert op.value.tolist() == [0, 1, 2] and op.ty is f32
    op.either = IntegerAttr(7, i64)  # an attribute is stored as it is
    assert op.either == 7
    op.either = None
    assert "either" not in p
    verify_op_def(op)


def test_builder_converts_python_values_per_kind() -> None:
    op = KindsOp.build(group=2, alpha=1, flag=1, pads=(3,), mode="b")
    assert op.properties["alpha"] is FloatAttr(1.0, f64)  # an int given for an f64 property
    assert op.properties["flag"] is BoolAttr(True)  # 1 given for a bool property
    assert (op.group, op.alpha, op.flag, op.pads, op.mode) == (2, 1.0, True, (3,), "b")
    verify_op_def(op)


def test_bool_props_read_files_of_earlier_versions() -> None:
    props = {"flag": IntegerAttr(1, i64), "group": IntegerAttr(1, i64)}
    op = KindsOp.create(properties=props)
    assert op.properties["flag"] is BoolAttr(True) and op.flag is True
    assert props["flag"] is IntegerAttr(1, i64)  # the caller's dict is left alone
    assert KindsOp.create(properties={"flag": IntegerAttr(0, i64)}).flag is False
    bad = KindsOp.create(properties={"flag": IntegerAttr(2, i64)})  # not a boolean: left to the verifier
    with pytest.raises(VerifyError, match=r"attribute 'flag' failed to satisfy constraint: bool attribute"):
        verify_op_def(bad)
    assert KindsOp.op_def.upgrades == (KindsOp.flag,)


def test_bool_props_print_and_parse_as_true_false() -> None:
    import lamina.dialects.func
    import lamina.dialects.top  # noqa: F401 - registers the dialects the text uses
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module

    text = """
    func.func @f(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
      %p = "top.AvgPool"(%x) <{ceil_mode = 1 : i64, count_include_pad = false, kernel_shape = array<i64: 2, 2>}> : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
      return %p : tensor<1x2x2x2xf32>
    }"""
    m = parse_module(text, Context())
    found: list = []
    m.walk(lambda op: found.append(op) if op.name == "top.AvgPool" else None)
    pool = found[0]
    assert pool.ceil_mode is True and pool.count_include_pad is False
    assert "ceil_mode = true, count_include_pad = false" in str(m)


def test_top_attr_agrees_with_the_typed_accessor() -> None:
    """``op.attr("name")`` (the top ops' reader) and ``op.name`` give the same value for every
    declared property, set or defaulted: one convention, so call sites may use either."""
    import lamina.dialects.top as top

    for cls in top.ALL_OPS:
        op = cls.create()
        for p in cls.op_def.props:
            a, b = op.attr(p.name), getattr(op, p.name)
            assert type(a) is type(b) and a == b, (cls.name, p.name, a, b)

"""Tests of the cf dialect: builders, segment sizes, BranchOpInterface, verification,
canonicalization."""

from __future__ import annotations

import pytest

from lamina.dialects.arith import AddIOp, ConstantOp
from lamina.dialects.cf import CF, AssertOp, BranchOp, CondBranchOp
from lamina.dialects.func import FuncOp, ReturnOp
from lamina.ir.attributes import BoolAttr, DenseArrayAttr, StringAttr
from lamina.ir.builder import Builder
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.traits import BranchOpInterface, IsTerminator
from lamina.ir.types import f32, i1, i32
from lamina.ir.verifier import verify


@pytest.fixture
def ctx() -> Context:
    c = Context(load_all=False, handler=None)
    for d in ("func", "arith", "cf"):
        c.load_dialect(d)
    return c


def errors(m, ctx: Context) -> list[str]:
    with ctx.diagnostics.capture() as got:
        verify(m, ctx)
    return [d.message for d in got]


def branchy(ctx: Context):
    f = FuncOp.new("f", [i1, i32], [i32])
    b = Builder.at_end(f.entry_block)
    c, x = f.entry_block.args
    r = f.regions[0]
    t = b.create_block(r, [i32], move_insertion_point=False)
    e = b.create_block(r, [], move_insertion_point=False)
    cb = b.create(CondBranchOp, condition=c, true_dest=t, true_dest_operands=[x], false_dest=e)
    with b.at(t):
        b.create(ReturnOp, operands_=[t.args[0]])
    with b.at(e):
        b.create(ReturnOp, operands_=[x])
    return f, cb, t, e


def test_registered() -> None:
    assert set(CF.ops) == {"cf.br", "cf.cond_br", "cf.switch", "cf.assert"}
    assert BranchOp.has_trait(IsTerminator) and CondBranchOp.has_trait(IsTerminator)
    assert not AssertOp.has_trait(IsTerminator)


def test_cond_br_segments_and_successor_operands(ctx: Context) -> None:
    f, cb, t, e = branchy(ctx)
    assert cb.properties["operandSegmentSizes"] is DenseArrayAttr.i32([1, 1, 0])
    assert cb.true_dest is t and cb.false_dest is e
    assert cb.true_dest_operands == [f.entry_block.args[1]] and cb.false_dest_operands == []
    iface = BranchOpInterface.get(cb)
    assert list(iface.successor_operands(0)) == [f.entry_block.args[1]]
    assert list(iface.successor_operands(1)) == []
    assert errors(ModuleOp.new([f]), ctx) == []


def test_successor_mismatches(ctx: Context) -> None:
    f, _cb, t, e = branchy(ctx)
    m = ModuleOp.new([f])
    e.add_argument(f32)
    assert errors(m, ctx) == ["branch has 0 operands for successor #1, but target block has 1"]
    t.args[0].type = f32
    msgs = errors(m, ctx)
    assert "type mismatch for bb argument #0 of successor #0" in msgs
    assert "branch has 0 operands for successor #1, but target block has 1" in msgs


def test_cond_br_condition_must_be_i1(ctx: Context) -> None:
    f = FuncOp.new("f", [i32], [])
    b = Builder.at_end(f.entry_block)
    (x,) = f.entry_block.args
    nxt = b.create_block(f.regions[0], [], move_insertion_point=False)
    b.insert(
        CondBranchOp.create(
            [x], [], {"operandSegmentSizes": DenseArrayAttr.i32([1, 0, 0])}, successors=[nxt, nxt]
        )
    )
    with b.at(nxt):
        b.create(ReturnOp)
    assert errors(ModuleOp.new([f]), ctx) == [
        "'cf.cond_br' op operand #0 must be 1-bit signless integer, but got 'i32'"
    ]


def test_bad_segment_sizes(ctx: Context) -> None:
    f = FuncOp.new("f", [i1], [])
    b = Builder.at_end(f.entry_block)
    (c,) = f.entry_block.args
    nxt = b.create_block(f.regions[0], [], move_insertion_point=False)
    b.insert(
        CondBranchOp.create(
            [c], [], {"operandSegmentSizes": DenseArrayAttr.i32([1, 1, 0])}, successors=[nxt, nxt]
        )
    )
    with b.at(nxt):
        b.create(ReturnOp)
    msgs = errors(ModuleOp.new([f]), ctx)
    assert msgs and "operandSegmentSizes" in msgs[0]


def test_assert_requires_msg(ctx: Context) -> None:
    f = FuncOp.new("f", [i1], [])
    b = Builder.at_end(f.entry_block)
    (c,) = f.entry_block.args
    b.insert(AssertOp.create([c], []))
    b.create(AssertOp, arg=c, msg=StringAttr("ok"))
    b.create(ReturnOp)
    assert errors(ModuleOp.new([f]), ctx) == ["'cf.assert' op requires attribute 'msg'"]


def test_assert_execute() -> None:
    f = FuncOp.new("f", [i1], [])
    a = AssertOp.new(f.entry_block.args[0], "boom")
    assert a.execute([True]) == []
    with pytest.raises(AssertionError, match="boom"):
        a.execute([False])


def _canon(m: ModuleOp) -> None:
    greedy = pytest.importorskip("lamina.rewrite.greedy")
    pats = [p for cls in CF.ops.values() for p in cls.get_canonicalization_patterns()]
    greedy.apply_patterns_greedily(m, pats)


def test_constant_cond_br_becomes_br(ctx: Context) -> None:
    f = FuncOp.new("f", [i32], [i32])
    b = Builder.at_end(f.entry_block)
    (x,) = f.entry_block.args
    r = f.regions[0]
    t = b.create_block(r, [i32], move_insertion_point=False)
    e = b.create_block(r, [], move_insertion_point=False)
    c = b.create(ConstantOp, value=BoolAttr(False)).result
    b.create(CondBranchOp, condition=c, true_dest=t, true_dest_operands=[x], false_dest=e)
    with b.at(t):
        b.create(ReturnOp, operands_=[t.args[0]])
    with b.at(e):
        y = b.create(AddIOp, lhs=x, rhs=x).result
        b.create(ReturnOp, operands_=[y])
    m = ModuleOp.new([f])
    _canon(m)
    assert not any(isinstance(op, CondBranchOp) for op in f.walk_ops())
    assert errors(m, ctx) == []


def test_cond_br_to_same_successor(ctx: Context) -> None:
    f = FuncOp.new("f", [i1, i32], [i32])
    b = Builder.at_end(f.entry_block)
    c, x = f.entry_block.args
    t = b.create_block(f.regions[0], [i32], move_insertion_point=False)
    b.create(
        CondBranchOp, condition=c, true_dest=t, true_dest_operands=[x], false_dest=t, false_dest_operands=[x]
    )
    with b.at(t):
        b.create(ReturnOp, operands_=[t.args[0]])
    m = ModuleOp.new([f])
    _canon(m)
    assert not any(isinstance(op, CondBranchOp) for op in f.walk_ops())
    assert errors(m, ctx) == []


def test_br_to_single_predecessor_block_merges(ctx: Context) -> None:
    f = FuncOp.new("f", [i32], [i32])
    b = Builder.at_end(f.entry_block)
    (x,) = f.entry_block.args
    nxt = b.create_block(f.regions[0], [i32], move_insertion_point=False)
    b.create(BranchOp, dest=nxt, dest_operands=[x])
    with b.at(nxt):
        y = b.create(AddIOp, lhs=nxt.args[0], rhs=nxt.args[0]).result
        b.create(ReturnOp, operands_=[y])
    m = ModuleOp.new([f])
    _canon(m)
    assert len(f.regions[0].blocks) == 1
    assert [op.name for op in f.entry_block] == ["arith.addi", "func.return"]
    assert f.entry_block.first_op.operands == [x, x]
    assert errors(m, ctx) == []


def test_assert_true_is_erased(ctx: Context) -> None:
    f = FuncOp.new("f", [], [])
    b = Builder.at_end(f.entry_block)
    c = b.create(ConstantOp, value=BoolAttr(True)).result
    b.create(AssertOp, arg=c, msg=StringAttr("never"))
    b.create(ReturnOp)
    m = ModuleOp.new([f])
    _canon(m)
    assert not any(isinstance(op, AssertOp) for op in f.walk_ops())

"""Tests of lamina.ir.builder."""

from __future__ import annotations

import pytest

from lamina.dialects.arith import AddIOp, ConstantOp, MulIOp
from lamina.dialects.func import FuncOp, ReturnOp
from lamina.ir.attributes import IntegerAttr
from lamina.ir.builder import Builder, InsertionPoint
from lamina.ir.core import Block, IRError, Region
from lamina.ir.location import FileLineColLoc, NameLoc, UnknownLoc
from lamina.ir.types import f32, i32


def names(block: Block) -> list[str]:
    return [op.name for op in block]


def test_create_appends_in_order_with_default_loc() -> None:
    f = FuncOp.new("f", [i32], [i32])
    loc = FileLineColLoc("b.mlir", 3, 4)
    b = Builder.at_end(f.entry_block, loc=loc)
    x = f.entry_block.args[0]
    c = b.create(ConstantOp, value=IntegerAttr(1, i32))
    a = b.create(AddIOp, lhs=x, rhs=c.result)
    r = b.create(ReturnOp, operands_=[a.result], loc=NameLoc("ret"))
    assert names(f.entry_block) == ["arith.constant", "arith.addi", "func.return"]
    assert c.location is loc and a.location is loc and r.location is NameLoc("ret")
    assert a.parent is f.entry_block and a.lhs is x and a.rhs is c.result


def test_insertion_points() -> None:
    f = FuncOp.new("f", [i32], [])
    blk = f.entry_block
    x = blk.args[0]
    b = Builder.at_end(blk)
    ret = b.create(ReturnOp)
    # before the terminator: successive creates keep program order
    b.set_insertion_point(InsertionPoint.before_terminator(blk))
    a1 = b.create(AddIOp, lhs=x, rhs=x)
    a2 = b.create(MulIOp, lhs=a1.result, rhs=x)
    assert list(blk) == [a1, a2, ret]
    # at start
    b.set_insertion_point_to_start(blk)
    c = b.create(ConstantOp, value=IntegerAttr(7, i32))
    assert blk.first_op is c
    # after an op
    b.set_insertion_point_after(a1)
    m = b.create(MulIOp, lhs=x, rhs=x)
    assert list(blk) == [c, a1, m, a2, ret]
    # before an op
    b.set_insertion_point_before(c)
    first = b.create(AddIOp, lhs=x, rhs=x)
    assert blk.first_op is first
    assert blk.index_of(ret) == len(blk) - 1


def test_at_context_manager_restores() -> None:
    f = FuncOp.new("f", [i32], [])
    blk = f.entry_block
    x = blk.args[0]
    b = Builder.at_end(blk)
    ret = b.create(ReturnOp)
    loc = NameLoc("inner")
    with b.at(ret, loc=loc) as bb:
        assert bb is b
        a = b.create(AddIOp, lhs=x, rhs=x)
    assert a.next_op is ret and a.location is loc
    assert b.loc is UnknownLoc() and b.ip.anchor is None
    with b.at(InsertionPoint.at_start(blk)):
        c = b.create(ConstantOp, value=IntegerAttr(0, i32))
    assert blk.first_op is c
    with b.at_loc(NameLoc("n")):
        assert b.loc is NameLoc("n")
    assert b.loc is UnknownLoc()


def test_create_block_and_detached_builder() -> None:
    r = Region()
    b = Builder()
    blk = b.create_block(r, [i32, f32])
    assert r.blocks == [blk] and blk.arg_types == [i32, f32] and b.block is blk
    first = b.create_block(r, [], insert_before=blk, move_insertion_point=False)
    assert r.blocks == [first, blk] and b.block is blk
    # a builder with no insertion point leaves ops detached
    free = Builder().create(AddIOp, lhs=blk.args[0], rhs=blk.args[0])
    assert free.parent is None


def test_insertion_point_errors() -> None:
    f = FuncOp.new("f", [i32], [])
    other = Block()
    op = AddIOp.build(lhs=f.entry_block.args[0], rhs=f.entry_block.args[0])
    with pytest.raises(IRError):
        InsertionPoint.before(op)  # detached
    f.entry_block.append(op)
    with pytest.raises(IRError):
        InsertionPoint(other, op)
    b = Builder.at_end(f.entry_block)
    with pytest.raises(IRError):
        b.insert(op)  # already in a block


def test_clone_through_builder() -> None:
    f = FuncOp.new("f", [i32], [])
    x = f.entry_block.args[0]
    b = Builder.at_end(f.entry_block)
    a = b.create(AddIOp, lhs=x, rhs=x)
    c = b.clone(a)
    assert c is not a and c.parent is f.entry_block and c.operands == [x, x]

"""Tests of the core IR API: creation, insertion, moving, erasing, RAUW, cloning, walking, parent
links, type/attribute interning, locations and diagnostics."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from lamina.dialects.arith import AddIOp, ConstantOp, MulIOp
from lamina.dialects.cf import BranchOp
from lamina.dialects.func import FuncOp, ReturnOp
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
    attr_from_python,
)
from lamina.ir.builtin import ModuleOp
from lamina.ir.core import (
    Block,
    BlockArgument,
    IRError,
    IRMapping,
    OpResult,
    Region,
    UnregisteredOp,
    WalkResult,
)
from lamina.ir.diagnostics import (
    Diagnostic,
    DiagnosticEngine,
    DiagnosticError,
    emit_error,
    format_location,
    using_engine,
)
from lamina.ir.location import CallSiteLoc, FileLineColLoc, FusedLoc, NameLoc, UnknownLoc
from lamina.ir.types import (
    DYNAMIC,
    FloatType,
    FunctionType,
    IndexType,
    IntegerType,
    RankedTensorType,
    UnrankedTensorType,
    f32,
    i1,
    i32,
    i64,
    tensor,
)


def chain(n: int = 3):
    """f(x) with n adds in a chain, then return."""
    f = FuncOp.new("f", [i32], [i32])
    blk = f.entry_block
    x = blk.args[0]
    ops = []
    v = x
    for _ in range(n):
        op = blk.append(AddIOp.build(lhs=v, rhs=x))
        ops.append(op)
        v = op.result
    ret = blk.append(ReturnOp.build(operands_=[v]))
    return f, blk, x, ops, ret


# --------------------------------------------------------------------------------------------
# Values, uses, operations
# --------------------------------------------------------------------------------------------


def test_create_results_and_uses() -> None:
    _f, blk, x, ops, _ret = chain(2)
    a, b = ops
    assert isinstance(a.result, OpResult) and a.result.op is a and a.result.index == 0
    assert isinstance(x, BlockArgument) and x.owner is blk and x.parent_block() is blk
    assert a.result.defining_op() is a and x.defining_op() is None
    assert x.use_count == 3 and x.users == [a, b]
    assert a.result.has_one_use and a.result.users == [b]
    assert b.operand_uses[0].owner is b and b.operand_uses[0].index == 0
    assert a.num_operands == 2 and a.operand_types == [i32, i32] and a.result_types == [i32]


def test_single_result_accessor_errors() -> None:
    ret = ReturnOp.build()
    with pytest.raises(IRError):
        _ = ret.result


def test_set_operand_updates_use_lists() -> None:
    _f, _blk, x, (a, b), _ret = chain(2)
    b.set_operand(0, x)
    assert not a.result.has_uses and x.use_count == 4
    b.set_operands([a.result])
    assert a.result.users == [b] and b.operands == [a.result]


def test_rauw_and_conditional_replace() -> None:
    _f, _blk, x, (a, b, c), ret = chain(3)
    a.result.replace_all_uses_with(x)
    assert not a.result.has_uses and b.operands == [x, x]
    c.result.replace_uses_with_if(b.result, lambda use: use.owner is ret)
    assert ret.operands == [b.result]
    b.replace_all_uses_with([x])
    assert c.operands == [x, x] and ret.operands == [x]
    with pytest.raises(IRError):
        c.replace_all_uses_with([x, x])


def test_parent_links_and_structure() -> None:
    f, blk, _x, (a, b), ret = chain(2)
    m = ModuleOp.new([f])
    assert a.parent is blk and a.parent_region is f.regions[0] and a.parent_op() is f
    assert list(a.ancestors()) == [f, m] and a.parent_of_type(ModuleOp) is m
    assert m.is_ancestor(a) and f.is_ancestor(f) and not a.is_ancestor(f)
    assert blk.parent_op() is f and f.regions[0].parent is f
    assert f.regions[0].is_ancestor_of(a) and not m.regions[0].is_ancestor_of(m)
    assert a.next_op is b and b.prev_op is a and blk.first_op is a and blk.last_op is ret
    assert blk.terminator is ret and len(blk) == 3 and a.dialect_name == "arith"


def test_insert_move_and_order() -> None:
    _f, blk, x, (a, b, c), ret = chain(3)
    assert a.is_before_in_block(c) and not c.is_before_in_block(a)
    c.move_before(a)
    assert list(blk) == [c, a, b, ret]
    assert c.is_before_in_block(a) and blk.index_of(ret) == 3
    c.move_after(b)
    assert list(blk) == [a, b, c, ret]
    assert b.is_before_in_block(c)
    new = MulIOp.build(lhs=x, rhs=x)
    blk.insert_after(a, new)
    assert list(blk) == [a, new, b, c, ret] and new.is_before_in_block(b)
    with pytest.raises(IRError):
        blk.append(new)  # already in a block
    blk2 = Block()
    with pytest.raises(IRError):
        blk2.insert_before(a, MulIOp.build(lhs=x, rhs=x))  # anchor not in blk2
    assert list(blk.reversed()) == [ret, c, b, new, a]


def test_is_before_in_block_requires_same_block() -> None:
    _f, _blk, x, (a,), _ret = chain(1)
    with pytest.raises(IRError):
        a.is_before_in_block(MulIOp.build(lhs=x, rhs=x))


def test_erase_refuses_used_results_then_succeeds() -> None:
    _f, blk, x, (a, b), ret = chain(2)
    with pytest.raises(IRError, match="still has 1 use"):
        a.erase()
    b.set_operand(0, x)
    a.erase()
    assert a.parent is None and list(blk) == [b, ret] and x.users == [b]


def test_erase_op_with_region_drops_nested_uses() -> None:
    f, _blk, x, _ops, _ret = chain(2)
    m = ModuleOp.new([f])
    f.erase()
    assert len(m.body) == 0 and not x.has_uses


def test_detach_and_reinsert() -> None:
    _f, blk, x, (a, b), ret = chain(2)
    b.detach()
    assert b.parent is None and list(blk) == [a, ret] and b.operands == [a.result, x]
    blk.insert_before(ret, b)
    assert list(blk) == [a, b, ret]


def test_walk_orders_skip_and_interrupt() -> None:
    f, _blk, _x, (_a, _b), _ret = chain(2)
    m = ModuleOp.new([f])
    post: list[str] = []
    m.walk(lambda op: post.append(op.name))
    assert post == ["arith.addi", "arith.addi", "func.return", "func.func", "builtin.module"]
    pre: list[str] = []
    m.walk(lambda op: pre.append(op.name), order="pre")
    assert pre == ["builtin.module", "func.func", "arith.addi", "arith.addi", "func.return"]
    seen: list[str] = []

    def skip_funcs(op):
        seen.append(op.name)
        return WalkResult.SKIP if isinstance(op, FuncOp) else None

    m.walk(skip_funcs, order="pre")
    assert seen == ["builtin.module", "func.func"]
    count = []

    def stop(op):
        count.append(op)
        return WalkResult.INTERRUPT if isinstance(op, AddIOp) else None

    assert m.walk(stop) is WalkResult.INTERRUPT and len(count) == 1
    assert [o.name for o in m.walk_ops(AddIOp)] == ["arith.addi", "arith.addi"]


def test_walk_allows_erasing_in_post_order() -> None:
    f, blk, x, _ops, ret = chain(3)
    ret.set_operands([x])

    def erase_adds(op):
        if isinstance(op, AddIOp) and not op.has_uses():
            op.erase()

    for _ in range(3):
        f.walk(erase_adds)
    assert [o.name for o in blk] == ["func.return"]


def test_clone_with_mapping_and_regions() -> None:
    f, blk, x, (a, _b), _ret = chain(2)
    m = ModuleOp.new([f])
    g = f.clone()
    assert g is not f and g.regions[0].blocks[0] is not blk
    gblk = g.regions[0].blocks[0]
    ga, gb, gret = list(gblk)
    assert ga.operands == [gblk.args[0], gblk.args[0]] and gb.operands == [ga.result, gblk.args[0]]
    assert gret.operands == [gb.result] and g.properties == f.properties and g.parent is None
    assert x.use_count == 3  # the original is untouched
    mp = IRMapping()
    y = Block([i32]).args[0]
    mp.map(x, y)
    a2 = a.clone(mp)
    assert a2.operands == [y, y] and mp.lookup(a.result) is a2.result and mp.ops[a] is a2
    _ = m


def test_clone_multi_block_region_remaps_forward_references() -> None:
    f = FuncOp.new("f", [i32], [i32])
    r = f.regions[0]
    entry = f.entry_block
    exit_ = r.add_block(Block([i32]))
    entry.append(BranchOp.build(dest=exit_, dest_operands=[entry.args[0]]))
    exit_.append(ReturnOp.build(operands_=[exit_.args[0]]))
    g = f.clone()
    ge, gx = g.regions[0].blocks
    assert ge.first_op.successors == [gx] and ge.first_op.operands == [ge.args[0]]
    assert gx.first_op.operands == [gx.args[0]] and next(iter(gx.uses)).owner is ge.first_op


def test_unregistered_op_keeps_name_and_clones() -> None:
    u = UnregisteredOp.create([], [i32], attributes={"k": UnitAttr()}, name="foo.bar", regions=1)
    assert u.name == "foo.bar" and u.op_def is None and len(u.regions) == 1
    c = u.clone()
    assert c.name == "foo.bar" and c.attributes == {"k": UnitAttr()} and c.result_types == [i32]


def test_attributes_and_properties_access() -> None:
    f, *_ = chain(1)
    assert f.get_attr("sym_name") is StringAttr("f")
    f.set_attr("sym_visibility", StringAttr("private"))  # declared property
    assert f.properties["sym_visibility"] is StringAttr("private")
    f.set_attr("my.tag", UnitAttr())  # discardable
    assert f.attributes["my.tag"] is UnitAttr() and f.get_attr("my.tag") is UnitAttr()


# --------------------------------------------------------------------------------------------
# Blocks and regions
# --------------------------------------------------------------------------------------------


def test_block_arguments() -> None:
    b = Block([i32, f32])
    a = b.insert_argument(1, i64)
    assert [x.index for x in b.args] == [0, 1, 2] and b.arg_types == [i32, i64, f32] and a.index == 1
    b.erase_argument(0)
    assert b.arg_types == [i64, f32] and [x.index for x in b.args] == [0, 1]
    b.append(AddIOp.build(lhs=b.args[0], rhs=b.args[0]))
    with pytest.raises(IRError):
        b.erase_argument(0)


def test_block_split_and_erase() -> None:
    f, blk, _x, (a, b, c), ret = chain(3)
    new = blk.split_before(b)
    assert list(blk) == [a] and list(new) == [b, c, ret]
    assert f.regions[0].blocks == [blk, new] and new.parent is f.regions[0]
    assert b.parent is new and b.is_before_in_block(ret)
    blk.append(BranchOp.build(dest=new))
    with pytest.raises(IRError):
        new.erase()  # still a successor
    assert new.predecessors == [blk.last_op] and blk.successors == [new]


def test_region_helpers() -> None:
    r = Region()
    b1 = r.add_block()
    b2 = Block()
    r.insert_block_after(b1, b2)
    b0 = Block()
    r.insert_block_before(b1, b0)
    assert r.blocks == [b0, b1, b2] and r.entry is b0
    with pytest.raises(IRError):
        _ = r.block
    with pytest.raises(IRError):
        r.add_block(b1)
    other = Region()
    other.take_body(r)
    assert r.is_empty and other.blocks == [b0, b1, b2] and b1.parent is other


def test_region_cannot_be_attached_twice() -> None:
    r = Region()
    ModuleOp.create(regions=[r])
    with pytest.raises(IRError):
        ModuleOp.create(regions=[r])


# --------------------------------------------------------------------------------------------
# Types and attributes
# --------------------------------------------------------------------------------------------


def test_types_are_interned() -> None:
    assert IntegerType(32) is i32 and IntegerType(8, "u") is not IntegerType(8)
    assert FloatType("f32") is f32 and IndexType() is IndexType()
    t = RankedTensorType([2, DYNAMIC], f32)
    assert t is tensor((2, -1), f32) and t.shape == (2, -1) and not t.has_static_shape
    assert FunctionType([i32], [f32]) is FunctionType((i32,), (f32,))
    assert UnrankedTensorType(f32) is UnrankedTensorType(f32)
    assert tensor([2, 3], f32).num_elements == 6 and tensor([2, 3], f32).rank == 2
    with pytest.raises(ValueError):
        FloatType("f33")
    with pytest.raises(AttributeError):
        i32.width = 4  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(tensor([2], i32))) is tensor([2], i32)


def test_attributes_are_interned_and_normalised() -> None:
    assert IntegerAttr(3, i32) is IntegerAttr(3, i32) and IntegerAttr(3, i32) is not IntegerAttr(3, i64)
    assert BoolAttr(True) is IntegerAttr(5, i1) and BoolAttr(False).value == 0
    assert FloatAttr(0.0, f32) is not FloatAttr(-0.0, f32)
    assert FloatAttr(0.1, f32).value == float(np.float32(0.1))
    assert DictionaryAttr({"b": UnitAttr(), "a": UnitAttr()}).keys() == {"a", "b"}
    assert list(DictionaryAttr({"b": UnitAttr(), "a": UnitAttr()})) == ["a", "b"]
    assert DictionaryAttr({"b": UnitAttr(), "a": UnitAttr()}) is DictionaryAttr(
        [("a", UnitAttr()), ("b", UnitAttr())]
    )
    assert ArrayAttr([StringAttr("x")]) is ArrayAttr((StringAttr("x"),))
    assert DenseArrayAttr.i32([1, 2]) is DenseArrayAttr(i32, (1, 2)) and len(DenseArrayAttr.i64([1])) == 1
    assert SymbolRefAttr("a", ["b"]).leaf == "b" and SymbolRefAttr("a").is_flat
    assert TypeAttr(i32).value is i32
    assert attr_from_python({"k": [1, 2.0, "s", True]}) is DictionaryAttr(
        {
            "k": ArrayAttr(
                [IntegerAttr(1, i64), FloatAttr(2.0, FloatType("f64")), StringAttr("s"), BoolAttr(True)]
            )
        }
    )


def test_dense_elements() -> None:
    t = tensor([2, 2], f32)
    a = DenseElementsAttr(t, np.arange(4, dtype=np.float32))
    b = DenseElementsAttr(t, np.arange(4, dtype=np.float32).reshape(2, 2))
    assert a == b and hash(a) == hash(b) and a.to_numpy().shape == (2, 2)
    assert not a.to_numpy().flags.writeable
    s = DenseElementsAttr(t, 1.5)
    assert s.is_splat and s.splat_value == 1.5 and s.to_numpy().shape == (2, 2)
    assert s != a
    with pytest.raises(ValueError):
        DenseElementsAttr(t, np.zeros(3, np.float32))


# --------------------------------------------------------------------------------------------
# Locations and diagnostics
# --------------------------------------------------------------------------------------------


def test_locations() -> None:
    flc = FileLineColLoc("a.mlir", 3, 7)
    assert flc is FileLineColLoc("a.mlir", 3, 7)
    assert NameLoc("n", flc).file_line_col() is flc and NameLoc("n").file_line_col() is None
    assert NameLoc("n", UnknownLoc()) is NameLoc("n")
    assert FusedLoc([NameLoc("x"), flc]).file_line_col() is flc
    assert CallSiteLoc(NameLoc("callee", flc), FileLineColLoc("b.mlir", 1, 1)).file_line_col() is not None
    assert format_location(flc) == "a.mlir:3:7" and format_location(NameLoc("n")) == '"n"'
    assert format_location(UnknownLoc()) == "<unknown>:0"


def test_diagnostics_engine_capture_and_notes() -> None:
    eng = DiagnosticEngine(handler=None)
    with using_engine(eng), eng.capture() as got:
        d = emit_error(FileLineColLoc("a.mlir", 1, 2), "bad", [("here", FileLineColLoc("a.mlir", 3, 4))])
    assert got == [d] and eng.error_count == 1
    assert str(d) == "a.mlir:1:2: error: bad\na.mlir:3:4: note: here"
    with pytest.raises(DiagnosticError):
        emit_error(UnknownLoc(), "nobody listens")
    f = FuncOp.new("f", [], [], loc=NameLoc("fn"))
    with using_engine(eng), eng.capture() as got:
        f.emit_error("oops")
        f.emit_warning("hmm")
    assert [str(x) for x in got] == [
        "\"fn\": error: 'func.func' op oops",
        "\"fn\": warning: 'func.func' op hmm",
    ]
    assert isinstance(got[0], Diagnostic)


def test_constant_op_helpers_roundtrip_values() -> None:
    c = ConstantOp.new(IntegerAttr(-1, i32))
    assert c.result.type is i32 and c.constant_value() is IntegerAttr(-1, i32)


def test_clone_remaps_nested_uses_of_later_blocks() -> None:
    # entry -> B -> A; A (listed before B) holds an op whose region uses a value defined in B.
    f = FuncOp.new("f", [i32], [])
    r = f.regions[0]
    entry = f.entry_block
    a_blk = r.add_block()
    b_blk = r.add_block()
    entry.append(BranchOp.build(dest=b_blk))
    v = b_blk.append(AddIOp.build(lhs=entry.args[0], rhs=entry.args[0]))
    b_blk.append(BranchOp.build(dest=a_blk))
    holder = a_blk.append(UnregisteredOp.create([], [], regions=1, name="test.holder"))
    inner = holder.regions[0].add_block()
    inner.append(UnregisteredOp.create([v.result], [], name="test.use"))
    a_blk.append(ReturnOp.build())
    g = f.clone()
    _, ga, gb = g.regions[0].blocks
    gv = gb.first_op
    guse = ga.first_op.regions[0].blocks[0].first_op
    assert guse.operands == [gv.result]
    assert v.result.users == [inner.first_op]

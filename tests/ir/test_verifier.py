"""Tests of lamina.ir.verifier: structure, terminators, dominance, isolation, symbols, calls,
registration, branches, op definitions and speed."""

from __future__ import annotations

import itertools

import pytest

from lamina.dialects.arith import AddIOp, CmpIOp, ConstantOp, MulIOp
from lamina.dialects.cf import BranchOp, CondBranchOp
from lamina.dialects.func import CallOp, FuncOp, ReturnOp
from lamina.ir import dominance
from lamina.ir.attributes import IntegerAttr, StringAttr, SymbolRefAttr
from lamina.ir.builder import Builder
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.core import Block, Operation, Region, UnregisteredOp
from lamina.ir.diagnostics import DiagnosticError
from lamina.ir.location import FileLineColLoc
from lamina.ir.opdef import Op, operand, result_def
from lamina.ir.traits import InferTypeOpInterface
from lamina.ir.types import DYNAMIC, UnrankedTensorType, f32, i1, i32, i64, tensor
from lamina.ir.verifier import verify


def L(line: int, col: int = 1) -> FileLineColLoc:
    return FileLineColLoc("t.mlir", line, col)


def make_ctx(allow_unregistered: bool = False) -> Context:
    ctx = Context(allow_unregistered_dialects=allow_unregistered, load_all=False, handler=None)
    for d in ("func", "arith", "cf"):
        ctx.load_dialect(d)
    return ctx


@pytest.fixture
def ctx() -> Context:
    return make_ctx()


def run(op: Operation, ctx: Context) -> tuple[bool, list]:
    with ctx.diagnostics.capture() as got:
        ok = verify(op, ctx)
    return ok, got


def messages(diags: list) -> list[str]:
    return [d.message for d in diags]


def unreg(name: str, operands=(), results=(), regions=0, loc=None) -> UnregisteredOp:
    return UnregisteredOp.create(operands, results, regions=regions, location=loc, name=name)


def simple_func(name: str = "f", inputs=(i32, i32), results=(i32,)) -> tuple[FuncOp, Builder]:
    f = FuncOp.new(name, list(inputs), list(results), loc=L(1))
    return f, Builder.at_end(f.entry_block)


# --------------------------------------------------------------------------------------------
# Valid IR
# --------------------------------------------------------------------------------------------


def test_valid_function_verifies(ctx: Context) -> None:
    f, b = simple_func()
    x, y = f.entry_block.args
    s = b.create(AddIOp, lhs=x, rhs=y, loc=L(2))
    p = b.create(MulIOp, lhs=s.result, rhs=y, loc=L(3))
    b.create(ReturnOp, operands_=[p.result], loc=L(4))
    m = ModuleOp.new([f])
    ok, diags = run(m, ctx)
    assert ok and diags == []


def test_valid_diamond_cfg_and_loop(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32, i1))
    x, c = f.entry_block.args
    r = f.regions[0]
    bb1 = b.create_block(r, [i32], move_insertion_point=False)
    bb2 = b.create_block(r, [], move_insertion_point=False)
    exit_ = b.create_block(r, [i32], move_insertion_point=False)
    b.create(CondBranchOp, condition=c, true_dest=bb1, true_dest_operands=[x], false_dest=bb2)
    with b.at(bb1):
        y = b.create(AddIOp, lhs=bb1.args[0], rhs=x).result
        b.create(
            CondBranchOp,
            condition=c,
            true_dest=bb1,
            true_dest_operands=[y],
            false_dest=exit_,
            false_dest_operands=[y],
        )
    with b.at(bb2):
        b.create(BranchOp, dest=exit_, dest_operands=[x])
    with b.at(exit_):
        b.create(ReturnOp, operands_=[exit_.args[0]])
    ok, diags = run(ModuleOp.new([f]), ctx)
    assert ok, messages(diags)


# --------------------------------------------------------------------------------------------
# Op definitions and traits
# --------------------------------------------------------------------------------------------


def test_same_type_trait_error(ctx: Context) -> None:
    f, b = simple_func()
    x, _ = f.entry_block.args
    bad = AddIOp.create([x, x], [i64], location=L(2, 8))
    b.insert(bad)
    b.create(ReturnOp, operands_=[x])
    ok, diags = run(ModuleOp.new([f]), ctx)
    assert not ok
    assert messages(diags) == ["'arith.addi' op requires the same type for all operands and results"]
    assert diags[0].location is L(2, 8)


def test_operand_constraint_error(ctx: Context) -> None:
    f, b = simple_func(inputs=(f32,), results=())
    (x,) = f.entry_block.args
    b.insert(AddIOp.create([x, x], [f32], location=L(2)))
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["'arith.addi' op operand #0 must be signless-integer-like, but got 'f32'"]


def test_missing_required_property(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,), results=())
    (x,) = f.entry_block.args
    b.insert(CmpIOp.create([x, x], [i1], location=L(2)))
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["'arith.cmpi' op requires attribute 'predicate'"]


def test_every_error_is_reported(ctx: Context) -> None:
    f, b = simple_func()
    x, _ = f.entry_block.args
    b.insert(AddIOp.create([x, x], [i64], location=L(2)))
    b.insert(AddIOp.create([x, x], [f32], location=L(3)))
    b.create(ReturnOp, operands_=[x])
    ok, diags = run(ModuleOp.new([f]), ctx)
    assert not ok
    assert [d.location for d in diags] == [L(2), L(3)]


def test_op_verifier_error_and_crash_are_located(ctx: Context) -> None:
    f, b = simple_func(results=(f32,))
    x, _ = f.entry_block.args
    b.create(ReturnOp, operands_=[x], loc=L(5))
    ok, diags = run(ModuleOp.new([f]), ctx)
    assert not ok
    assert "doesn't match function result type" in diags[0].message
    assert diags[0].location is L(5)


def test_constant_type_mismatch(ctx: Context) -> None:
    f, b = simple_func(inputs=(), results=())
    b.insert(ConstantOp.create([], [i32], {"value": IntegerAttr(1, i64)}, location=L(2)))
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == [
        "'arith.constant' op failed to verify that all of {value, result} have same type"
    ]


# --------------------------------------------------------------------------------------------
# Blocks and terminators
# --------------------------------------------------------------------------------------------


def test_block_without_terminator(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,), results=())
    (x,) = f.entry_block.args
    b.create(AddIOp, lhs=x, rhs=x, loc=L(2, 8))
    ok, diags = run(ModuleOp.new([f]), ctx)
    assert not ok
    assert len(diags) == 1
    assert diags[0].message.startswith("block with no terminator, has ")
    assert diags[0].location is L(2, 8)


def test_empty_block_needs_terminator(ctx: Context) -> None:
    f = FuncOp.new("f", [], [], loc=L(1))
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["empty block: expect at least a terminator"]
    assert diags[0].location is L(1)


def test_terminator_must_be_last(ctx: Context) -> None:
    f, b = simple_func(inputs=(), results=())
    b.create(ReturnOp, loc=L(2))
    b.create(ReturnOp, loc=L(3))
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["'func.return' op must be the last operation in the parent block"]
    assert diags[0].location is L(2)


def test_module_needs_no_terminator_but_single_block(ctx: Context) -> None:
    m = ModuleOp.new([], loc=L(1))
    assert run(m, ctx)[0]
    m.regions[0].add_block()
    _ok, diags = run(m, ctx)
    assert messages(diags)[0] == "'builtin.module' op expects region #0 to have 0 or 1 blocks"


def test_unregistered_op_regions_need_no_terminator() -> None:
    ctx = make_ctx(allow_unregistered=True)
    f, b = simple_func(inputs=(), results=())
    u = b.insert(unreg("test.region", regions=1))
    u.regions[0].add_block()
    b.create(ReturnOp)
    assert run(ModuleOp.new([f]), ctx)[0]


# --------------------------------------------------------------------------------------------
# Dominance
# --------------------------------------------------------------------------------------------


def test_use_before_def_in_same_block(ctx: Context) -> None:
    f, b = simple_func()
    x, _ = f.entry_block.args
    first = b.create(AddIOp, lhs=x, rhs=x, loc=L(2, 8))
    second = b.create(AddIOp, lhs=x, rhs=x, loc=L(3, 8))
    first.set_operand(0, second.result)
    b.create(ReturnOp, operands_=[first.result])
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]
    d = diags[0]
    assert d.location is L(2, 8)
    assert [(n.message, n.location) for n in d.notes] == [
        ("operand defined here (op in the same block)", L(3, 8))
    ]


def test_dominance_after_moving_ops(ctx: Context) -> None:
    f, b = simple_func()
    x, _ = f.entry_block.args
    a = b.create(AddIOp, lhs=x, rhs=x)
    c = b.create(AddIOp, lhs=a.result, rhs=x)
    ret = b.create(ReturnOp, operands_=[c.result])
    m = ModuleOp.new([f])
    assert run(m, ctx)[0]
    a.move_before(ret)  # now defined after its use
    _ok, diags = run(m, ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]
    a.move_before(c)
    assert run(m, ctx)[0]


def _diamond(ctx: Context):
    f, b = simple_func(inputs=(i32, i1))
    x, c = f.entry_block.args
    r = f.regions[0]
    bb1 = b.create_block(r, [], move_insertion_point=False)
    bb2 = b.create_block(r, [], move_insertion_point=False)
    bb3 = b.create_block(r, [], move_insertion_point=False)
    b.create(CondBranchOp, condition=c, true_dest=bb1, false_dest=bb2)
    with b.at(bb1):
        y = b.create(AddIOp, lhs=x, rhs=x, loc=L(11, 8)).result
        b.create(BranchOp, dest=bb3)
    with b.at(bb2):
        b.create(BranchOp, dest=bb3)
    return f, b, bb3, y


def test_cross_block_dominance(ctx: Context) -> None:
    f, b, bb3, y = _diamond(ctx)
    with b.at(bb3):
        b.create(ReturnOp, operands_=[y], loc=L(16, 3))
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]
    assert diags[0].location is L(16, 3)
    assert [(n.message, n.location) for n in diags[0].notes] == [
        ("operand defined here (op in the same region)", L(11, 8))
    ]


def test_dominating_block_value_is_fine(ctx: Context) -> None:
    f, b, bb3, _y = _diamond(ctx)
    x = f.entry_block.args[0]
    with b.at(bb3):
        z = b.create(AddIOp, lhs=x, rhs=x).result  # x: entry block arg, dominates everything
        b.create(ReturnOp, operands_=[z])
    assert run(ModuleOp.new([f]), ctx)[0]


def test_block_argument_does_not_dominate(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32, i1))
    x, c = f.entry_block.args
    r = f.regions[0]
    bb1 = b.create_block(r, [i32], move_insertion_point=False)
    bb2 = b.create_block(r, [], move_insertion_point=False)
    b.create(CondBranchOp, condition=c, true_dest=bb1, true_dest_operands=[x], false_dest=bb2)
    with b.at(bb1):
        b.create(ReturnOp, operands_=[bb1.args[0]])
    with b.at(bb2):
        b.create(ReturnOp, operands_=[bb1.args[0]], loc=L(9))
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]
    assert diags[0].notes[0].message == "operand defined as a block argument (block #1 in the same region)"
    assert diags[0].notes[0].location is L(1)


def test_unreachable_blocks_follow_mlir(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,))
    (x,) = f.entry_block.args
    r = f.regions[0]
    dead = b.create_block(r, [], move_insertion_point=False)
    dead2 = b.create_block(r, [], move_insertion_point=False)
    b.create(ReturnOp, operands_=[x])
    with b.at(dead):
        v = b.create(AddIOp, lhs=x, rhs=x).result
        b.create(BranchOp, dest=dead2)
    with b.at(dead2):
        # A use in an unreachable block is dominated by anything.
        b.create(ReturnOp, operands_=[v])
    assert run(ModuleOp.new([f]), ctx)[0]


def test_value_from_unreachable_block_does_not_dominate_reachable_use(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,))
    (x,) = f.entry_block.args
    r = f.regions[0]
    reach = b.create_block(r, [], move_insertion_point=False)
    dead = b.create_block(r, [], move_insertion_point=False)
    b.create(BranchOp, dest=reach)
    with b.at(dead):
        v = b.create(AddIOp, lhs=x, rhs=x).result
        b.create(BranchOp, dest=reach)
    with b.at(reach):
        b.create(ReturnOp, operands_=[v])
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]


def test_nested_region_uses() -> None:
    ctx = make_ctx(allow_unregistered=True)
    f, b = simple_func()
    x, _ = f.entry_block.args
    outer = b.insert(unreg("test.foo", regions=1, loc=L(2)))
    later = b.create(AddIOp, lhs=x, rhs=x, loc=L(5, 8))
    b.create(ReturnOp, operands_=[later.result])
    inner_block = outer.regions[0].add_block()
    # x (entry arg) dominates nested uses; `later` (defined after the op) does not.
    inner_block.append(unreg("test.ok", [x]))
    inner_block.append(unreg("test.bar", [later.result], loc=L(3, 5)))
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]
    assert diags[0].location is L(3, 5)
    assert diags[0].notes[0].message == "operand defined here (op in a parent region)"
    assert diags[0].notes[0].location is L(5, 8)


def test_value_from_child_region_used_outside() -> None:
    ctx = make_ctx(allow_unregistered=True)
    f, b = simple_func()
    x, _ = f.entry_block.args
    outer = b.insert(unreg("test.foo", regions=1))
    inner = outer.regions[0].add_block()
    v = inner.append(AddIOp.build(lhs=x, rhs=x, loc=L(3)))
    b.create(ReturnOp, operands_=[v.result])
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]
    assert diags[0].notes[0].message == "operand defined here (op in a child region)"


def test_graph_region_of_unregistered_op_allows_forward_uses() -> None:
    ctx = make_ctx(allow_unregistered=True)
    f, b = simple_func(inputs=(), results=())
    outer = b.insert(unreg("test.graph", regions=1))
    blk = outer.regions[0].add_block()
    user = blk.append(unreg("test.use", [], []))
    d = blk.append(unreg("test.def", [], [i32]))
    user.set_operands([d.results[0]])
    b.create(ReturnOp)
    assert run(ModuleOp.new([f]), ctx)[0]


def test_isolated_from_above() -> None:
    ctx = make_ctx(allow_unregistered=True)
    f, b = simple_func(inputs=(i32,), results=())
    (x,) = f.entry_block.args
    inner_mod = b.insert(ModuleOp.new([], loc=L(2)))
    inner_mod.body.append(unreg("test.use", [x], loc=L(3)))
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["'test.use' op using value defined outside the region"]
    assert [(n.message, n.location) for n in diags[0].notes] == [
        ("required by region isolation constraints", L(2))
    ]


# --------------------------------------------------------------------------------------------
# Branches
# --------------------------------------------------------------------------------------------


def test_successor_operand_count_and_types(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,), results=())
    (x,) = f.entry_block.args
    r = f.regions[0]
    bb1 = b.create_block(r, [], move_insertion_point=False)
    b.create(BranchOp, dest=bb1, dest_operands=[x], loc=L(2, 3))
    with b.at(bb1):
        b.create(ReturnOp)
    m = ModuleOp.new([f])
    _ok, diags = run(m, ctx)
    assert messages(diags) == ["branch has 1 operands for successor #0, but target block has 0"]
    assert diags[0].location is L(2, 3)
    bb1.add_argument(f32)
    _ok, diags = run(m, ctx)
    assert messages(diags) == ["type mismatch for bb argument #0 of successor #0"]
    bb1.args[0].type = i32
    assert run(m, ctx)[0]


def test_branch_to_other_region_is_rejected() -> None:
    ctx = make_ctx(allow_unregistered=True)
    f, b = simple_func(inputs=(), results=())
    outer = b.insert(unreg("test.foo", regions=1))
    other = outer.regions[0].add_block()
    b.create(BranchOp, dest=other)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert "'cf.br' op branching to block of a different region" in messages(diags)


# --------------------------------------------------------------------------------------------
# Symbols and calls
# --------------------------------------------------------------------------------------------


def _void(name: str, loc=None, inputs=()) -> FuncOp:
    f = FuncOp.new(name, list(inputs), [], loc=loc)
    f.entry_block.append(ReturnOp.build())
    return f


def test_symbol_redefinition(ctx: Context) -> None:
    m = ModuleOp.new([_void("f", L(1)), _void("f", L(4))])
    _ok, diags = run(m, ctx)
    assert messages(diags) == ["redefinition of symbol named 'f'"]
    assert diags[0].location is L(4)
    assert [(n.message, n.location) for n in diags[0].notes] == [
        ("see existing symbol definition here", L(1))
    ]


def test_symbol_visibility_must_be_known(ctx: Context) -> None:
    f = _void("f", L(1))
    f.properties["sym_visibility"] = StringAttr("secret")
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == [
        '\'func.func\' op visibility expected to be one of ["public", "private", "nested"], but got "secret"'
    ]


def test_call_to_missing_function(ctx: Context) -> None:
    f, b = simple_func(inputs=(), results=())
    b.create(CallOp, callee=SymbolRefAttr("nope"), loc=L(3))
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["'func.call' op 'nope' does not reference a valid function"]


def test_call_signature_mismatches(ctx: Context) -> None:
    g = _void("g", inputs=[i32])
    f, b = simple_func(inputs=(f32,), results=())
    (x,) = f.entry_block.args
    b.create(CallOp, callee=SymbolRefAttr("g"), loc=L(2))
    b.create(CallOp, callee=SymbolRefAttr("g"), operands_=[x], loc=L(3))
    b.create(CallOp, callee=SymbolRefAttr("f"), operands_=[x], results_=[i32], loc=L(4))
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([g, f]), ctx)
    assert messages(diags) == [
        "'func.call' op incorrect number of operands for callee",
        "'func.call' op operand type mismatch: expected operand type 'i32', but provided 'f32' for operand number 0",
        "'func.call' op incorrect number of results for callee",
    ]


def test_valid_call_and_nested_symbol_reference(ctx: Context) -> None:
    inner = ModuleOp.new([_void("g", inputs=[i32])], sym_name="inner")
    f, b = simple_func(inputs=(i32,), results=())
    b.create(CallOp, callee=SymbolRefAttr("g"), operands_=[f.entry_block.args[0]])
    b.create(ReturnOp)
    m = ModuleOp.new([inner, _void("g", inputs=[i32]), f])
    assert run(m, ctx)[0]
    # A nested reference resolves through the inner module.
    call = f.entry_block.first_op
    call.properties["callee"] = SymbolRefAttr("inner", ["g"])
    assert run(m, ctx)[0]
    call.properties["callee"] = SymbolRefAttr("inner", ["h"])
    _ok, diags = run(m, ctx)
    assert messages(diags) == ["'func.call' op 'inner::@h' does not reference a valid function"]


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------


def test_unregistered_op_in_registered_dialect() -> None:
    ctx = make_ctx(allow_unregistered=True)
    f, b = simple_func(inputs=(), results=())
    b.insert(unreg("arith.foo", loc=L(2)))
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == [
        "unregistered operation 'arith.foo' found in dialect ('arith') that does not allow unknown operations"
    ]


def test_unregistered_dialect_requires_permission(ctx: Context) -> None:
    f, b = simple_func(inputs=(), results=())
    b.insert(unreg("test.foo", loc=L(2)))
    b.create(ReturnOp)
    m = ModuleOp.new([f])
    _ok, diags = run(m, ctx)
    assert len(diags) == 1 and diags[0].message.startswith("'test.foo' op created with unregistered dialect")
    assert run(m, make_ctx(allow_unregistered=True))[0]


# --------------------------------------------------------------------------------------------
# Structure, engines, speed
# --------------------------------------------------------------------------------------------


def test_structural_link_errors(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,), results=())
    (x,) = f.entry_block.args
    a = b.create(AddIOp, lhs=x, rhs=x)
    b.create(ReturnOp)
    a.results[0].index = 3  # corrupt
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert "'arith.addi' op result #0 is not owned by this operation" in messages(diags)


def test_detached_operand_is_reported(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,), results=())
    (x,) = f.entry_block.args
    floating = AddIOp.build(lhs=x, rhs=x)
    b.create(AddIOp, lhs=floating.result, rhs=x)
    b.create(ReturnOp)
    _ok, diags = run(ModuleOp.new([f]), ctx)
    assert messages(diags) == ["operation's operand is unlinked"]


def test_verify_without_context_uses_active_engine_or_raises() -> None:
    f, b = simple_func(inputs=(), results=())
    b.insert(unreg("arith.foo", loc=L(2)))
    b.create(ReturnOp)
    m = ModuleOp.new([f])
    with pytest.raises(DiagnosticError):
        verify(m)
    ctx = make_ctx()
    with ctx, ctx.diagnostics.capture() as got:
        assert not verify(m)
    assert len(got) == 1


def test_verify_nested_op_checks_outer_dominance(ctx: Context) -> None:
    f, b = simple_func(inputs=(i32,), results=())
    (x,) = f.entry_block.args
    a = b.create(AddIOp, lhs=x, rhs=x)
    c = b.create(AddIOp, lhs=a.result, rhs=x)
    b.create(ReturnOp)
    assert run(c, ctx)[0]
    c.move_before(a)
    _ok, diags = run(c, ctx)
    assert messages(diags) == ["operand #0 does not dominate this use"]


def _big_module(n: int) -> ModuleOp:
    f = FuncOp.new("f", [i32, i32], [i32])
    b = Builder.at_end(f.entry_block)
    vals = list(f.entry_block.args)
    for i in range(n - 1):
        vals.append(b.create(AddIOp if i % 2 else MulIOp, lhs=vals[-1], rhs=vals[-2]).result)
    b.create(ReturnOp, operands_=[vals[-1]])
    return ModuleOp.new([f])


def test_verify_20000_ops(ctx: Context) -> None:
    # Its speed is measured by benchmarks/ir_parse_print.py, not asserted here.
    assert verify(_big_module(20000), ctx)


def test_verify_is_linear_with_many_blocks(ctx: Context, monkeypatch: pytest.MonkeyPatch) -> None:
    # A chain of 2,000 blocks: one dominator tree for the region (O(1) queries), not one per use.
    f = FuncOp.new("f", [i32], [i32])
    r = f.regions[0]
    blocks = [f.entry_block] + [r.add_block(Block([i32])) for _ in range(2000)]
    x = f.entry_block.args[0]
    for cur, nxt in itertools.pairwise(blocks):
        v = cur.append(AddIOp.build(lhs=x, rhs=cur.args[0]))
        cur.append(BranchOp.build(dest=nxt, dest_operands=[v.result]))
    blocks[-1].append(ReturnOp.build(operands_=[x]))
    built: list[object] = []
    init = dominance.DominanceInfo.__init__

    def counting_init(self: dominance.DominanceInfo, region: object) -> None:
        built.append(region)
        init(self, region)

    monkeypatch.setattr(dominance.DominanceInfo, "__init__", counting_init)
    assert verify(ModuleOp.new([f]), ctx)
    assert built == [r]


def test_region_parent_link(ctx: Context) -> None:
    f, _ = simple_func(inputs=(), results=())
    f.entry_block.append(ReturnOp.build())
    stray = Region()
    f.regions.append(stray)
    ok, diags = run(ModuleOp.new([f]), ctx)
    assert not ok
    assert "'func.func' op region's parent link does not point to the op" in messages(diags)


# --------------------------------------------------------------------------------------------
# Parsed IR (diagnostics as mlir-opt-22 reports them for the same text)
# --------------------------------------------------------------------------------------------

_PARSED_CASES = [
    (
        """func.func @f(%a: i32) -> i32 {
  %0 = "arith.addi"(%1, %a) : (i32, i32) -> i32
  %1 = "arith.addi"(%a, %a) : (i32, i32) -> i32
  return %0 : i32
}""",
        [
            (
                "2:8",
                "operand #0 does not dominate this use",
                [("3:8", "operand defined here (op in the same block)")],
            )
        ],
    ),
    (
        """func.func @g(%a: i32, %c: i1) -> i32 {
  "cf.cond_br"(%c)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
^bb1:
  %x = "arith.addi"(%a, %a) : (i32, i32) -> i32
  "cf.br"()[^bb3] : () -> ()
^bb2:
  "cf.br"()[^bb3] : () -> ()
^bb3:
  return %x : i32
}""",
        [
            (
                "9:3",
                "operand #0 does not dominate this use",
                [("4:8", "operand defined here (op in the same region)")],
            )
        ],
    ),
    (
        """func.func @k(%a: i32) {
  %0 = "arith.addi"(%a, %a) : (i32, i32) -> i64
  return
}""",
        [("2:8", "'arith.addi' op requires the same type for all operands and results", [])],
    ),
    (
        """func.func @f() {
  return
}
func.func @f() {
  return
}""",
        [("4:1", "redefinition of symbol named 'f'", [("1:1", "see existing symbol definition here")])],
    ),
    (
        """func.func @k6(%a: i32) {
  func.call @k6(%a) : (i32) -> ()
  return
}
func.func @k7(%a: f32) {
  func.call @k6(%a) : (f32) -> ()
  func.call @nope() : () -> ()
  return
}""",
        [
            (
                "6:3",
                "'func.call' op operand type mismatch: expected operand type 'i32', but provided 'f32' for operand number 0",
                [],
            ),
            ("7:3", "'func.call' op 'nope' does not reference a valid function", []),
        ],
    ),
    (
        """func.func @f(%a: i32) {
  "cf.br"(%a)[^bb1] : (i32) -> ()
^bb1:
  return
}""",
        [("2:3", "branch has 1 operands for successor #0, but target block has 0", [])],
    ),
    (
        """func.func @f(%a: i32) {
  "func.return"() : () -> ()
  "func.return"() : () -> ()
}""",
        [("2:3", "'func.return' op must be the last operation in the parent block", [])],
    ),
]


@pytest.mark.parametrize(("text", "expected"), _PARSED_CASES)
def test_parsed_ir_diagnostics_match_mlir(text: str, expected: list) -> None:
    parser = pytest.importorskip("lamina.ir.parser")
    ctx = make_ctx()
    with ctx.diagnostics.capture() as got:
        m = parser.parse_module(text, ctx, filename="t.mlir")
        assert m is not None, [str(d) for d in got]
        assert not verify(m, ctx)

    def where(loc) -> str:
        flc = loc.file_line_col()
        return f"{flc.line}:{flc.col}"

    actual = [(where(d.location), d.message, [(where(n.location), n.message) for n in d.notes]) for d in got]
    assert actual == expected


def test_parsed_valid_generic_arith_and_cf() -> None:
    parser = pytest.importorskip("lamina.ir.parser")
    ctx = make_ctx()
    text = """func.func @f(%a: i32, %c: i1) -> i32 {
  %0 = "arith.constant"() <{value = 1 : i32}> : () -> i32
  %1 = "arith.addi"(%a, %0) <{overflowFlags = #arith.overflow<nsw>}> : (i32, i32) -> i32
  "cf.cond_br"(%c, %1)[^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i32) -> ()
^bb1(%x: i32):
  return %x : i32
^bb2:
  return %0 : i32
}"""
    with ctx.diagnostics.capture() as got:
        m = parser.parse_module(text, ctx)
        assert m is not None and verify(m, ctx), [str(d) for d in got]


def test_symbol_parent_must_be_symbol_table(ctx: Context) -> None:
    outer = FuncOp.new("outer", [], [], loc=L(1))
    inner = FuncOp.new("inner", [], [], loc=L(2))
    inner.entry_block.append(ReturnOp.build())
    outer.entry_block.append(inner)
    outer.entry_block.append(ReturnOp.build())
    _ok, diags = run(ModuleOp.new([outer]), ctx)
    assert messages(diags) == ["'func.func' op symbol's parent must have the SymbolTable trait"]
    assert diags[0].location is L(2)


# --------------------------------------------------------------------------------------------
# Errors in a parsed module point into the .mlir the user gave, even when its ops carry locations
# of somewhere else (model_transform writes each op's ONNX node: loc("conv1"("m.onnx":0:0))).

_DEBUGINFO = """#loc1 = loc("m.onnx":0:0)
module {
  func.func @f(%x: i32 loc("x"(#loc1))) -> f32 {
    %0 = "arith.addi"(%x, %x) : (i32, i32) -> i64 loc(#loc2)
    %1 = "arith.muli"(%x, %x) : (i32, i32) -> i64 loc("mul"("m.onnx":0:0))
    %2 = arith.subi %x, %x : i32 loc(#loc2)
    return %2 : i32 loc(#loc3)
  } loc(#loc1)
} loc(#loc1)
#loc2 = loc("add"(#loc1))
#loc3 = loc(fused["ret", "out"])
"""


def _parse_and_verify(text: str, filename: str = "bad.mlir", line_offset: int = 0) -> tuple[Operation, list]:
    from lamina.ir.parser import parse_module

    ctx = make_ctx()
    module = parse_module(text, ctx, filename=filename, line_offset=line_offset)
    assert module is not None
    ok, got = run(module, ctx)
    assert not ok
    return module, got


def test_errors_point_at_the_mlir_line_and_note_the_op_origin() -> None:
    _, got = _parse_and_verify(_DEBUGINFO)
    where = [(str(d.location), d.source_line, d.message.split(" op ")[0]) for d in got]
    assert where == [
        # the one-line generic form (parser fast path), an inline loc(...), a custom op's loc
        (
            'loc("bad.mlir":4:10)',
            '    %0 = "arith.addi"(%x, %x) : (i32, i32) -> i64 loc(#loc2)',
            "'arith.addi'",
        ),
        (
            'loc("bad.mlir":5:10)',
            '    %1 = "arith.muli"(%x, %x) : (i32, i32) -> i64 loc("mul"("m.onnx":0:0))',
            "'arith.muli'",
        ),
        (
            'loc("bad.mlir":7:5)',
            "    return %2 : i32 loc(#loc3)",
            "type of return operand 0 ('i32') doesn't match function result type ('f32') in function @f",
        ),
    ]
    notes = [[(str(n.location), n.message) for n in d.notes] for d in got]
    assert notes[0] == [('loc("add"("m.onnx":0:0))', "the op comes from 'add'")]
    assert notes[1] == [('loc("mul"("m.onnx":0:0))', "the op comes from 'mul'")]
    assert notes[2] == [('loc(fused["ret", "out"])', "the op comes from 'ret', 'out'")]
    text = str(got[0])
    assert text.startswith("bad.mlir:4:10: error: 'arith.addi' op requires the same type")
    assert '\n    %0 = "arith.addi"' in text and "\n         ^\n" in text
    assert text.endswith("m.onnx:0:0: note: the op comes from 'add'")


def test_source_positions_change_neither_printing_nor_op_locations() -> None:
    from lamina.ir.parser import parse_module
    from lamina.ir.printer import print_operation

    ctx = make_ctx()
    valid = _DEBUGINFO.replace("i64", "i32").replace("-> f32", "-> i32")
    module = parse_module(valid, ctx, filename="ok.mlir")
    assert verify(module, ctx)
    again = parse_module(print_operation(module, debuginfo=True), make_ctx(), filename="again.mlir")
    assert print_operation(again, debuginfo=True) == print_operation(module, debuginfo=True)
    add = next(op for op in module.walk_ops() if op.name == "arith.addi")
    assert str(add.location) == 'loc("add"("m.onnx":0:0))'


def test_split_input_file_chunks_report_their_own_lines() -> None:
    _, got = _parse_and_verify(_DEBUGINFO, line_offset=20)
    assert str(got[0].location) == 'loc("bad.mlir":24:10)'


def test_ops_without_parse_position_report_as_before() -> None:
    # an op without loc(...) is located where it is written already: no note
    _, got = _parse_and_verify(
        'func.func @f(%x: i32) {\n  %0 = "arith.addi"(%x, %x) : (i32, i32) -> i64\n  return\n}\n'
    )
    assert str(got[0].location) == 'loc("bad.mlir":2:8)' and got[0].notes == []
    # an op built in memory has only its own location
    f, b = simple_func(results=())
    x = f.entry_block.args[0]
    f.entry_block.append(AddIOp.create([x, x], [i64], location=L(9)))
    b.create(ReturnOp)
    ok, got = run(f, make_ctx())
    assert not ok and got[0].location is L(9) and got[0].notes == []
    # an op moved out of the module it was parsed into no longer knows its text
    module, _ = _parse_and_verify(_DEBUGINFO)
    add = next(op for op in module.walk_ops() if op.name == "arith.addi")
    clone = add.clone()
    ok, got = run(clone, make_ctx())
    assert got[0].location is add.location


def test_the_parsed_text_kept_for_diagnostics_excludes_resource_blobs() -> None:
    text = (
        _DEBUGINFO
        + '{-#\n  dialect_resources: {\n    builtin: {\n      w: "0x0400000000000000"\n    }\n  }\n#-}\n'
    )
    module, got = _parse_and_verify(text)
    assert "dialect_resources" not in module._source.text
    assert str(got[0].location) == 'loc("bad.mlir":4:10)'


def test_runner_reports_the_mlir_line(tmp_path, capsys) -> None:
    import numpy as np

    from lamina.tools.runner import main

    bad = tmp_path / "bad.mlir"
    bad.write_text(
        '#loc1 = loc("m.onnx":0:0)\n'
        "module {\n"
        '  func.func @main(%arg0: tensor<1x4xf32> loc("in"(#loc1))) -> tensor<1x4xf32> {\n'
        '    %0 = "top.Input"(%arg0) : (tensor<1x4xf32>) -> tensor<1x4xf32> loc(#loc2)\n'
        '    %1 = "top.Permute"(%0) <{order = array<i64: 0, 1, 7>}> : (tensor<1x4xf32>) -> tensor<1x4xf32> loc(#loc3)\n'
        "    return %1 : tensor<1x4xf32> loc(#loc1)\n"
        "  } loc(#loc1)\n"
        "} loc(#loc1)\n"
        '#loc2 = loc("in"(#loc1))\n'
        '#loc3 = loc("perm"(#loc1))\n'
    )
    np.savez(tmp_path / "in.npz", **{"in": np.ones((1, 4), np.float32)})
    rc = main(
        ["--model", str(bad), "--input", str(tmp_path / "in.npz"), "--output", str(tmp_path / "out.npz")]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert f"{bad}:5:10: error: 'top.Permute' op order [0, 1, 7] is not a permutation of 2 dims" in err
    assert "m.onnx:0:0: note: the op comes from 'perm'" in err
    assert not (tmp_path / "out.npz").exists()


# --------------------------------------------------------------------------------------------
# InferTypeOpInterface: declared result types must match the inferred ones (MLIR's check), so an
# op whose result type was hand-edited fails verification instead of executing to a wrong shape.


class _TransposeLike(Op, InferTypeOpInterface):
    name = "tst.transpose2d"
    input = operand()
    output = result_def()

    def infer_result_types(self):
        t = self.input.type
        return [t.with_shape(t.shape[::-1])]


@pytest.mark.parametrize(
    ("declared", "ok"),
    [
        (tensor([4, 2], f32), True),
        (tensor([DYNAMIC, 2], f32), True),  # a dynamic dim is compatible with any
        (UnrankedTensorType(f32), True),
        (tensor([2, 4], f32), False),
        (tensor([4, 2, 1], f32), False),
        (tensor([4, 2], i32), False),
    ],
)
def test_inferred_result_types_must_be_compatible(declared, ok: bool) -> None:
    f = FuncOp.new("f", [tensor([2, 4], f32)], [], loc=L(1))
    b = Builder.at_end(f.entry_block)
    b.create(_TransposeLike, input=f.entry_block.args[0], output=declared, loc=L(2, 3))
    b.create(ReturnOp)
    got_ok, got = run(f, make_ctx())
    assert got_ok == ok
    if not ok:
        assert messages(got) == [
            "'tst.transpose2d' op inferred type(s) 'tensor<4x2xf32>' are incompatible with return type(s) of "
            f"operation '{declared}'"
        ]
        assert got[0].location is L(2, 3)


def test_an_op_may_decide_what_is_compatible() -> None:
    class Exact(_TransposeLike):
        name = "tst.transpose2d_exact"

        @staticmethod
        def is_compatible_return_types(inferred, declared) -> bool:
            return list(inferred) == list(declared)

    f = FuncOp.new("f", [tensor([2, 4], f32)], [], loc=L(1))
    b = Builder.at_end(f.entry_block)
    b.create(Exact, input=f.entry_block.args[0], output=tensor([DYNAMIC, 2], f32))
    b.create(ReturnOp)
    ok, got = run(f, make_ctx())
    assert not ok and "inferred type(s) 'tensor<4x2xf32>' are incompatible" in got[0].message


def test_a_non_terminator_with_successors_is_one_error() -> None:
    # (mlir-opt-22 rejects this when parsing: "successors in non-terminator")
    _, got = _parse_and_verify(
        'func.func @f(%x: i32) {\n  %0 = "arith.addi"(%x, %x)[^bb1] : (i32, i32) -> i32\n^bb1:\n  return\n}\n'
    )
    assert messages(got) == ["'arith.addi' op requires 0 successors but found 1"]


def test_symbol_redefinition_points_at_the_mlir_lines() -> None:
    _, got = _parse_and_verify(
        '#l = loc("m.onnx":0:0)\nmodule {\n  func.func private @g() loc(#l)\n  func.func private @g() loc(#l)\n}\n'
    )
    assert [(str(d.location), d.message) for d in got] == [
        ('loc("bad.mlir":4:3)', "redefinition of symbol named 'g'")
    ]
    assert str(got[0].notes[0].location) == 'loc("bad.mlir":3:3)'

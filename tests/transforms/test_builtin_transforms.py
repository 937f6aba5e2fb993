"""cse, dce, symbol-dce, inline and canonicalize as passes."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rewrite"))

import lam_test_dialect as lt

from lamina.dialects.func.ops import CallOp, FuncOp, ReturnOp
from lamina.ir.attributes import ArrayAttr, StringAttr, SymbolRefAttr, UnitAttr
from lamina.ir.builtin import ModuleOp
from lamina.ir.core import Block
from lamina.ir.location import CallSiteLoc, FileLineColLoc
from lamina.passes import PassManager
from lamina.transforms import cse, dead_code_elimination

i32 = lt.i32


def run(pipeline: str, m: ModuleOp) -> bool:
    ctx = lt.make_context()
    with ctx.diagnostics.capture() as diags:
        ok = PassManager.parse(pipeline, ctx).run(m)
    errors = [d for d in diags if d.severity == "error"]
    assert ok == (not errors), [str(d) for d in diags]
    return ok


def names(block: Block) -> list[str]:
    return [op.name for op in block]


def fn(name: str, n_args: int = 1, vis: str | None = None) -> FuncOp:
    return FuncOp.new(name, [i32] * n_args, [i32], visibility=vis)


# ---- cse ---------------------------------------------------------------------------------------


def test_cse_pure_ops_only():
    f = fn("f")
    b = f.entry_block
    x = b.args[0]
    a1 = lt.add(b, x, x)
    a2 = lt.add(b, x, x)
    e1 = lt.effect(b, x, results=1)
    e2 = lt.effect(b, x, results=1)
    s = lt.add(b, a1, a2)
    t = lt.effect(b, s, e1.results[0], e2.results[0], results=1)
    b.append(ReturnOp.build(operands_=[t.results[0]]))
    assert cse(f) == (1, 0)
    assert names(b).count("lam_test.add") == 2
    assert names(b).count("lam_test.effect") == 3
    adds = [op for op in b if op.name == "lam_test.add"]
    assert adds[1].operand(0) is adds[1].operand(1) is adds[0].results[0]


def test_cse_attributes_and_types_matter():
    f = fn("f")
    b = f.entry_block
    c1 = lt.const(b, 1)
    c2 = lt.const(b, 1)
    c3 = lt.const(b, 2)
    c4 = lt.const(b, 1, lt.i64)
    lt.effect(b, c1, c2, c3, c4)
    b.append(ReturnOp.build(operands_=[b.args[0]]))
    n_cse, _ = cse(f)
    assert n_cse == 1
    assert names(b).count("lam_test.const") == 3


def test_cse_nested_regions_see_outer_ops_but_not_across_isolation():
    f = fn("f")
    b = f.entry_block
    x = b.args[0]
    outer = lt.neg(b, x)
    w = b.append(lt.WrapOp.build(args=[], outs=[i32]))
    inner = w.regions[0].add_block()
    dup = lt.neg(inner, x)
    inner.append(lt.YieldOp.build(args=[dup]))
    lt.effect(b, outer, w.results[0])
    b.append(ReturnOp.build(operands_=[x]))
    assert cse(f)[0] == 1
    assert names(inner) == ["lam_test.yield"]
    assert inner.last_op.operand(0) is outer
    # An op in the nested region is not visible after the region.
    f2 = fn("g")
    b2 = f2.entry_block
    w2 = b2.append(lt.WrapOp.build(args=[], outs=[i32]))
    inner2 = w2.regions[0].add_block()
    n_in = lt.neg(inner2, b2.args[0])
    inner2.append(lt.YieldOp.build(args=[n_in]))
    n_out = lt.neg(b2, b2.args[0])
    lt.effect(b2, w2.results[0], n_out)
    b2.append(ReturnOp.build(operands_=[b2.args[0]]))
    assert cse(f2)[0] == 0


def test_cse_follows_dominance_in_cfg():
    f = fn("f")
    region = f.regions[0]
    entry = f.entry_block
    x = entry.args[0]
    left, right, join = Block(), Block(), Block()
    for blk in (left, right, join):
        region.add_block(blk)
    top = lt.neg(entry, x)
    entry.append(lt.EffectOp.create([], [], successors=[left, right]))
    l_dup = lt.neg(left, x)  # dominated by entry: CSE'd with top
    left.append(lt.EffectOp.create([l_dup], [], successors=[join]))
    r_new = lt.add(right, x, x)
    right.append(lt.EffectOp.create([r_new], [], successors=[join]))
    j_add = lt.add(join, x, x)  # right does not dominate join: kept
    join.append(ReturnOp.build(operands_=[lt.add(join, j_add, top)]))
    n, _ = cse(f)
    assert n == 1
    assert names(left) == ["lam_test.effect"]
    assert left.last_op.operand(0) is top
    assert names(join).count("lam_test.add") == 2


def test_cse_pass_statistics_and_dead_ops():
    m = ModuleOp.new([fn("f")])
    b = m.body.first_op.entry_block
    x = b.args[0]
    lt.neg(b, x)  # dead
    a = lt.add(b, x, x)
    a2 = lt.add(b, x, x)
    b.append(ReturnOp.build(operands_=[lt.add(b, a, a2)]))
    ctx = lt.make_context()
    pm = PassManager.parse("builtin.module(func.func(cse))", ctx)
    assert pm.run(m)
    p = pm.items[0].items[0]
    assert p.statistics == {"num-cse'd": 1, "num-dce'd": 1}
    assert names(b) == ["lam_test.add", "lam_test.add", "func.return"]


# ---- dce ---------------------------------------------------------------------------------------


def test_dce_removes_dead_chains_keeps_effects():
    f = fn("f")
    b = f.entry_block
    x = b.args[0]
    lt.neg(b, lt.neg(b, lt.add(b, x, lt.const(b, 1))))
    lt.effect(b, x)
    b.append(ReturnOp.build(operands_=[x]))
    assert dead_code_elimination(f) == 4
    assert names(b) == ["lam_test.effect", "func.return"]
    m = ModuleOp.new([f])
    assert run("builtin.module(dce)", m)


# ---- symbol-dce -------------------------------------------------------------------------------


def _call(b: Block, callee: str, args) -> CallOp:
    return b.append(CallOp.build(callee=SymbolRefAttr(callee), operands_=list(args), results_=[i32]))


def _ret(f: FuncOp, v=None) -> None:
    f.entry_block.append(ReturnOp.build(operands_=[v if v is not None else f.entry_block.args[0]]))


def test_symbol_dce():
    main = fn("main")
    used = fn("used", vis="private")
    dead = fn("dead", vis="private")
    dead2 = fn("dead_callee", vis="private")
    nested_pub = fn("nested_pub", vis="nested")
    r = _call(main.entry_block, "used", [main.entry_block.args[0]])
    _ret(main, r.results[0])
    _ret(used)
    d = _call(dead.entry_block, "dead_callee", [dead.entry_block.args[0]])
    _ret(dead, d.results[0])
    _ret(dead2)
    _ret(nested_pub)
    m = ModuleOp.new([main, used, dead, dead2, nested_pub])
    assert run("builtin.module(symbol-dce)", m)
    assert [op.properties["sym_name"].value for op in m.body] == ["main", "used", "nested_pub"]


def test_symbol_dce_reference_in_attribute_and_nested_module():
    main = fn("main")
    main.attributes["refs"] = ArrayAttr([SymbolRefAttr("by_attr"), SymbolRefAttr("inner", ["f"])])
    _ret(main)
    by_attr = fn("by_attr", vis="private")
    _ret(by_attr)
    inner_f = fn("f")
    _ret(inner_f)
    inner_g = fn("g")
    _ret(inner_g)
    inner = ModuleOp.new([inner_f, inner_g], sym_name="inner")
    inner.properties["sym_visibility"] = StringAttr("private")
    m = ModuleOp.new([main, by_attr, inner])
    assert run("builtin.module(symbol-dce)", m)
    assert [op.properties["sym_name"].value for op in m.body] == ["main", "by_attr", "inner"]
    # The private nested module hides its public symbols: only the referenced one survives.
    assert [op.properties["sym_name"].value for op in inner.body] == ["f"]


def test_symbol_dce_requires_symbol_table():
    f = fn("f")
    _ret(f)
    ctx = lt.make_context()
    with ctx.diagnostics.capture() as diags:
        assert not PassManager.parse("symbol-dce", ctx).run(f)
    assert "does not define a symbol table" in diags[0].message


# ---- inline ------------------------------------------------------------------------------------


def test_inline_single_block_and_erase_dead_private():
    callee = fn("add1", vis="private")
    cb = callee.entry_block
    s = cb.append(
        lt.AddOp.build(lhs=cb.args[0], rhs=lt.const(cb, 1), out=i32, loc=FileLineColLoc("in", 2, 3))
    )
    _ret(callee, s.results[0])
    unused = fn("unused", vis="private")
    _ret(unused)
    main = fn("main")
    mb = main.entry_block
    c1 = _call(mb, "add1", [mb.args[0]])
    c1.location = FileLineColLoc("in", 9, 5)
    c2 = _call(mb, "add1", [c1.results[0]])
    _ret(main, c2.results[0])
    m = ModuleOp.new([callee, unused, main])
    assert run("builtin.module(inline{default-pipeline=})", m)
    assert [op.properties["sym_name"].value for op in m.body] == ["main"]
    assert names(mb) == ["lam_test.const", "lam_test.add", "lam_test.const", "lam_test.add", "func.return"]
    first_add = list(mb)[1]
    assert first_add.operand(0) is mb.args[0]
    assert first_add.location is CallSiteLoc(FileLineColLoc("in", 2, 3), FileLineColLoc("in", 9, 5))
    assert mb.last_op.operand(0) is list(mb)[3].results[0]


def test_inline_runs_default_pipeline():
    callee = fn("add1", vis="private")
    cb = callee.entry_block
    _ret(callee, lt.add(cb, cb.args[0], lt.const(cb, 1)))
    main = fn("main")
    mb = main.entry_block
    c1 = _call(mb, "add1", [mb.args[0]])
    c2 = _call(mb, "add1", [c1.results[0]])
    _ret(main, c2.results[0])
    m = ModuleOp.new([callee, main])
    assert run("builtin.module(inline)", m)
    # canonicalize after inlining: the constants are deduplicated and hoisted.
    assert names(mb) == ["lam_test.const", "lam_test.add", "lam_test.add", "func.return"]


def test_inline_skips_recursion_no_inline_and_declarations():
    rec = fn("rec")
    r = _call(rec.entry_block, "rec", [rec.entry_block.args[0]])
    _ret(rec, r.results[0])
    decl = FuncOp.new("decl", [i32], [i32], visibility="private", declaration=True)
    noinl = fn("noinl", vis="private")
    noinl.properties["no_inline"] = UnitAttr()
    _ret(noinl)
    main = fn("main")
    mb = main.entry_block
    a = _call(mb, "rec", [mb.args[0]])
    bb = _call(mb, "decl", [a.results[0]])
    c = _call(mb, "noinl", [bb.results[0]])
    _ret(main, c.results[0])
    m = ModuleOp.new([rec, decl, noinl, main])
    assert run("builtin.module(inline)", m)
    assert names(mb) == ["func.call", "func.call", "func.call", "func.return"]
    assert [op.properties["sym_name"].value for op in m.body] == ["rec", "decl", "noinl", "main"]


# ---- canonicalize --------------------------------------------------------------------------


def test_canonicalize_pass_folds_and_applies_op_patterns():
    f = fn("f")
    b = f.entry_block
    x = b.args[0]
    v = lt.neg(b, lt.neg(b, lt.add(b, x, lt.add(b, lt.const(b, 0), lt.const(b, 0)))))
    _ret(f, v)
    m = ModuleOp.new([f])
    assert run("builtin.module(func.func(canonicalize))", m)
    assert names(b) == ["func.return"]
    assert b.last_op.operand(0) is x


def test_canonicalize_non_convergence():
    f = fn("f")
    b = f.entry_block
    b.append(lt.FlipOp.build(args=[]))
    _ret(f)
    m = ModuleOp.new([f])
    ctx = lt.make_context()
    with ctx.diagnostics.capture() as diags:
        assert PassManager.parse("builtin.module(canonicalize{max-iterations=2})", ctx).run(m)
    assert [d.severity for d in diags] == ["warning"]
    assert "failed to converge after 2 iterations" in diags[0].message
    with ctx.diagnostics.capture() as diags:
        assert not PassManager.parse(
            "builtin.module(canonicalize{max-iterations=2 test-convergence=true})", ctx
        ).run(m)
    assert [d.severity for d in diags] == ["error"]


def test_canonicalize_erases_unreachable_blocks():
    f = fn("f")
    dead = Block()
    f.regions[0].add_block(dead)
    lt.effect(dead, f.entry_block.args[0])
    dead.append(ReturnOp.build(operands_=[f.entry_block.args[0]]))
    _ret(f)
    m = ModuleOp.new([f])
    assert run("builtin.module(canonicalize)", m)
    assert len(f.regions[0].blocks) == 1
    m2_f = fn("g")
    dead2 = Block()
    m2_f.regions[0].add_block(dead2)
    dead2.append(ReturnOp.build(operands_=[m2_f.entry_block.args[0]]))
    _ret(m2_f)
    m2 = ModuleOp.new([m2_f])
    assert run("builtin.module(canonicalize{region-simplify=disabled})", m2)
    assert len(m2_f.regions[0].blocks) == 2

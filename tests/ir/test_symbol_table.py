"""Tests of lamina.ir.symbol_table."""

from __future__ import annotations

import pytest

from lamina.dialects.func import CallOp, FuncOp, ReturnOp
from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, SymbolRefAttr
from lamina.ir.builtin import ModuleOp
from lamina.ir.core import IRError
from lamina.ir.diagnostics import VerifyError
from lamina.ir.location import FileLineColLoc
from lamina.ir.symbol_table import (
    SymbolTable,
    SymbolTableCollection,
    get_symbol_name,
    get_symbol_visibility,
    lookup_symbol,
    lookup_symbol_in,
    nearest_symbol_table,
    replace_all_symbol_uses,
    set_symbol_visibility,
    symbol_uses,
    verify_symbol_table,
)
from lamina.ir.types import i32


def fn(name: str, loc=None) -> FuncOp:
    f = FuncOp.new(name, [], [], loc=loc)
    f.entry_block.append(ReturnOp.build())
    return f


def caller(name: str, callee: SymbolRefAttr) -> FuncOp:
    f = FuncOp.new(name, [], [])
    f.entry_block.append(CallOp.build(callee=callee))
    f.entry_block.append(ReturnOp.build())
    return f


def test_lookup_insert_erase() -> None:
    a, b = fn("a"), fn("b")
    m = ModuleOp.new([a, b])
    st = SymbolTable(m)
    assert st.lookup("a") is a and st.lookup(StringAttr("b")) is b and st.lookup("c") is None
    assert "a" in st and len(st) == 2
    c = fn("a")
    name = st.insert(c)
    assert name == "a_0" and get_symbol_name(c) == "a_0" and c.parent is m.body
    assert st.lookup("a_0") is c
    st.erase(b)
    assert st.lookup("b") is None and b.parent is None
    assert [get_symbol_name(o) for o in m.body] == ["a", "a_0"]


def test_insert_before_terminator_and_anchor() -> None:
    m = ModuleOp.new([fn("x")])
    st = SymbolTable(m)
    y = fn("y")
    st.insert(y, before=m.body.first_op)
    assert [get_symbol_name(o) for o in m.body] == ["y", "x"]


def test_not_a_symbol_table() -> None:
    with pytest.raises(IRError):
        SymbolTable(fn("f"))


def test_rename_updates_uses() -> None:
    target = fn("old")
    user = caller("user", SymbolRefAttr("old"))
    user.attributes["refs"] = ArrayAttr(
        [SymbolRefAttr("old"), DictionaryAttr({"k": SymbolRefAttr("old", ["x"])})]
    )
    m = ModuleOp.new([target, user])
    st = SymbolTable(m)
    st.rename("old", "new")
    assert get_symbol_name(target) == "new" and st.lookup("new") is target and st.lookup("old") is None
    call = user.entry_block.first_op
    assert call.properties["callee"] is SymbolRefAttr("new")
    refs = user.attributes["refs"]
    assert refs[0] is SymbolRefAttr("new") and refs[1]["k"] is SymbolRefAttr("new", ["x"])
    with pytest.raises(IRError):
        st.rename("new", "user")


def test_nested_lookup() -> None:
    leaf = fn("leaf")
    inner = ModuleOp.new([leaf], sym_name="inner")
    top = ModuleOp.new([inner, fn("f")])
    call_site = caller("g", SymbolRefAttr("inner", ["leaf"]))
    top.body.append(call_site)
    assert lookup_symbol(top, SymbolRefAttr("inner", ["leaf"])) is leaf
    assert lookup_symbol(call_site.entry_block.first_op, SymbolRefAttr("inner", ["leaf"])) is leaf
    assert lookup_symbol(leaf, "leaf") is leaf  # nearest table is `inner`
    assert lookup_symbol(leaf, "f") is None
    assert lookup_symbol_in(top, "inner") is inner
    assert lookup_symbol_in(top, SymbolRefAttr("f", ["x"])) is None  # f is not a symbol table
    assert nearest_symbol_table(leaf) is inner and nearest_symbol_table(top) is top
    coll = SymbolTableCollection()
    assert coll.lookup_nearest(call_site, SymbolRefAttr("inner", ["leaf"])) is leaf
    assert coll.lookup_in(top, "missing") is None


def test_symbol_uses_recurses_into_attributes_but_not_nested_tables() -> None:
    inner = ModuleOp.new([caller("hidden", SymbolRefAttr("zz"))], sym_name="inner")
    inner.attributes["on_table"] = SymbolRefAttr("visible")
    user = caller("user", SymbolRefAttr("a"))
    user.attributes["meta"] = DictionaryAttr({"x": ArrayAttr([SymbolRefAttr("b")])})
    m = ModuleOp.new([inner, user, fn("a")])
    uses = symbol_uses(m)
    roots = sorted(u.ref.root for u in uses)
    assert roots == ["a", "b", "visible"]
    assert {u.user.name for u in uses} == {"func.call", "func.func", "builtin.module"}


def test_replace_all_symbol_uses() -> None:
    user = caller("user", SymbolRefAttr("a"))
    m = ModuleOp.new([user])
    replace_all_symbol_uses("a", "b", m)
    assert user.entry_block.first_op.properties["callee"] is SymbolRefAttr("b")


def test_visibility() -> None:
    f = fn("f")
    assert get_symbol_visibility(f) == "public"
    set_symbol_visibility(f, "private")
    assert get_symbol_visibility(f) == "private" and f.properties["sym_visibility"] is StringAttr("private")
    set_symbol_visibility(f, "nested")
    assert get_symbol_visibility(f) == "nested"
    set_symbol_visibility(f, "public")
    assert "sym_visibility" not in f.properties
    with pytest.raises(ValueError):
        set_symbol_visibility(f, "global")


def test_verify_symbol_table_reports_duplicate_with_note() -> None:
    l1, l2 = FileLineColLoc("a.mlir", 1, 1), FileLineColLoc("a.mlir", 5, 1)
    m = ModuleOp.new([fn("f", l1), fn("f", l2)])
    with pytest.raises(VerifyError) as ei:
        verify_symbol_table(m)
    e = ei.value
    assert e.message == "redefinition of symbol named 'f'"
    assert e.notes == [("see existing symbol definition here", l1)]
    assert e.location is l2 and e.op_prefix is False
    verify_symbol_table(ModuleOp.new([fn("f"), fn("g")]))


def test_symbol_table_needs_one_block() -> None:
    m = ModuleOp.new([])
    m.regions[0].add_block()
    with pytest.raises(VerifyError, match="must have exactly one block"):
        verify_symbol_table(m)


def test_unnamed_ops_are_ignored() -> None:
    m = ModuleOp.new([ModuleOp.new([]), fn("f")])
    assert list(SymbolTable(m)) == ["f"]
    _ = i32

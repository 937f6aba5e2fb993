"""Textual pipeline parsing, options and the pass registry."""

from __future__ import annotations

import pytest

from lamina.ir.context import Context
from lamina.passes import (
    OpPassManager,
    Option,
    Pass,
    PassManager,
    PipelineError,
    Statistic,
    format_pass_list,
    get_pass,
    list_passes,
    register_pass,
)
from lamina.passes.pipeline import parse_pipeline_text


@register_pass
class OptionsPass(Pass):
    name = "lam-options"
    summary = "A pass with options of every kind"
    count = Option(int, 3, "an int")
    flag = Option(bool, False, "a bool")
    label = Option(str, "x", "a string")
    sizes = Option(list[int], [], "a list")
    mode = Option(str, "normal", "a choice", choices=("off", "normal", "aggressive"))
    hits = Statistic("hits", "Number of hits")

    def run_on_operation(self, op):
        self.hits += 1


@register_pass
class FuncOnlyPass(Pass):
    name = "lam-func-only"
    op_name = "func.func"
    summary = "Anchored on func.func"

    def run_on_operation(self, op):
        pass


def ctx() -> Context:
    return Context(load_all=False, handler=None)


def test_builtin_passes_registered():
    names = [n for n, _, _ in list_passes()]
    for n in ("canonicalize", "cse", "dce", "symbol-dce", "inline"):
        assert n in names
        assert get_pass(n) is not None
    text = format_pass_list()
    assert "--canonicalize" in text and "max-iterations" in text


def test_parse_nested_pipeline_structure():
    pm = PassManager.parse("builtin.module(func.func(canonicalize,cse),symbol-dce)", ctx())
    assert pm.anchor == "builtin.module"
    assert isinstance(pm.items[0], OpPassManager)
    assert pm.items[0].anchor == "func.func"
    assert [p.name for p in pm.items[0].items] == ["canonicalize", "cse"]
    assert pm.items[1].name == "symbol-dce"
    assert pm.pipeline_str().startswith("builtin.module(func.func(canonicalize{")
    assert pm.pipeline_str().endswith(",cse),symbol-dce)")


def test_parse_any_and_bare():
    pm = PassManager.parse("builtin.module(any(cse))", ctx())
    assert pm.items[0].anchor == "any"
    bare = PassManager.parse("canonicalize, cse", ctx())
    assert bare.anchor is None
    assert [p.name for p in bare.items] == ["canonicalize", "cse"]
    assert bare.pipeline_str("builtin.module").startswith("builtin.module(canonicalize{")


def test_options_parsed():
    pm = PassManager.parse("lam-options{count=7 flag sizes=1,2,3 label={a b} mode=aggressive}", ctx())
    p = pm.items[0]
    assert (
        p.count == 7
        and p.flag is True
        and p.sizes == [1, 2, 3]
        and p.label == "a b"
        and p.mode == "aggressive"
    )
    assert p.option_string() == "count=7 flag=true label={a b} mode=aggressive sizes=1,2,3"
    q = PassManager.parse("lam-options{flag=false}", ctx()).items[0]
    assert q.flag is False and q.count == 3 and q.sizes == []
    c = PassManager.parse("canonicalize{max-iterations=4 top-down=false}", ctx()).items[0]
    assert c.max_iterations == 4 and c.top_down is False


def test_option_defaults_per_instance():
    a, b = OptionsPass(), OptionsPass(count=9)
    assert a.count == 3 and b.count == 9
    a.sizes.append(5)
    assert OptionsPass().sizes == []


def _error(text: str) -> tuple[PipelineError, list]:
    c = ctx()
    with c.diagnostics.capture() as diags, pytest.raises(PipelineError) as ei:
        PassManager.parse(text, c)
    return ei.value, diags


def test_unknown_pass_column():
    e, diags = _error("builtin.module(func.func(canonicalize,bogus-pass))")
    assert "'bogus-pass' does not refer to a registered pass" in e.message
    assert e.column == 39
    assert len(diags) == 1 and diags[0].severity == "error"
    text = str(diags[0])
    assert "MLIR Textual PassPipeline Parser:1:39" in text
    assert "builtin.module(func.func(canonicalize,bogus-pass))" in text


def test_unbalanced_parens():
    e, _ = _error("builtin.module(func.func(canonicalize,cse)")
    assert "unbalanced parentheses" in e.message
    assert e.column == 15
    e, _ = _error("builtin.module(func.func(cse)))")
    assert "extra closing ')'" in e.message
    assert e.column == 31


def test_bad_options():
    e, _diags = _error("builtin.module(canonicalize{max-iterations=abc})")
    assert "failed to add `canonicalize` with options `max-iterations=abc`" in e.message
    assert "not a valid integer" in e.message
    assert e.column == 29
    e, _ = _error("canonicalize{bogus=1}")
    assert "no such option bogus" in e.message
    e, _ = _error("lam-options{mode=wild}")
    assert "not one of" in e.message
    e, _ = _error("canonicalize{max-iterations=3")
    assert "missing closing '}'" in e.message


def test_anchor_mismatch_is_an_error():
    e, _ = _error("builtin.module(lam-func-only)")
    assert "did you intend to nest" in e.message
    PassManager.parse("builtin.module(func.func(lam-func-only))", ctx())


def test_empty_element():
    e, _ = _error("builtin.module(func.func(cse),)")
    assert e.column == 31


def test_parse_text_tree():
    els = parse_pipeline_text("a{x=1}(b,c(d)) , e")
    assert [e.name for e in els] == ["a", "e"]
    assert els[0].options == "x=1"
    assert [e.name for e in els[0].nested] == ["b", "c"]
    assert els[0].nested[1].nested[0].name == "d"

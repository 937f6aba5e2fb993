"""Parser (lamina/ir/parser/ops.py): modules, forward references, custom forms and
MLIR-style located errors (message, line:col, source line and caret)."""

from __future__ import annotations

import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation


def ctx(unregistered: bool = True) -> Context:
    return Context(allow_unregistered_dialects=unregistered, handler=None)


def parse_errors(text: str, unregistered: bool = True, filename: str = "t.mlir") -> list[str]:
    c = ctx(unregistered)
    with c.diagnostics.capture() as diags:
        m = parse_module(text, c, filename=filename)
    assert m is None
    return [str(d) for d in diags]


def test_forward_references_across_blocks():
    src = (
        '"foo.f"() ({\n'
        '  "foo.br"()[^bb2] : () -> ()\n'
        "^bb1:\n"
        '  "foo.use"(%v) : (i32) -> ()\n'
        '  "foo.ret"() : () -> ()\n'
        "^bb2:\n"
        '  %v = "foo.def"() : () -> i32\n'
        '  "foo.br"()[^bb1] : () -> ()\n'
        "}) : () -> ()\n"
    )
    m = parse_module(src, ctx())
    assert m is not None
    f = m.body.first_op
    use = f.regions[0].blocks[1].first_op
    d = f.regions[0].blocks[2].first_op
    assert use.operand(0) is d.results[0]
    text = print_operation(m, generic=True)
    assert print_operation(parse_module(text, ctx()), generic=True) == text


def test_error_undefined_value_with_caret():
    errs = parse_errors('func.func @f() {\n  "foo.use"(%undefined) : (i32) -> ()\n  return\n}\n')
    assert errs == [
        't.mlir:2:13: error: use of undeclared SSA value name\n  "foo.use"(%undefined) : (i32) -> ()\n            ^'
    ]


def test_error_redefinition_with_note():
    errs = parse_errors(
        'func.func @f() {\n  %0 = "foo.a"() : () -> i32\n  %0 = "foo.b"() : () -> i32\n  return\n}\n'
    )
    assert errs == [
        "t.mlir:3:3: error: redefinition of SSA value '%0'\n  %0 = \"foo.b\"() : () -> i32\n  ^\n"
        't.mlir:2:3: note: previously defined here\n  %0 = "foo.a"() : () -> i32\n  ^'
    ]


def test_error_type_mismatch_between_use_and_def():
    errs = parse_errors(
        'func.func @f() {\n  %0 = "foo.a"() : () -> i32\n  "foo.b"(%0) : (i64) -> ()\n  return\n}\n'
    )
    assert errs[0].startswith(
        "t.mlir:3:11: error: use of value '%0' expects different type than prior uses: 'i64' vs 'i32'\n"
        '  "foo.b"(%0) : (i64) -> ()\n          ^\n'
        "t.mlir:2:3: note: prior use here"
    )


def test_error_type_mismatch_custom_form():
    errs = parse_errors("func.func @f(%a: i32, %b: i64) -> i32 {\n  return %b : i32\n}\n")
    assert errs[0].startswith(
        "t.mlir:2:10: error: use of value '%b' expects different type than prior uses: 'i32' vs 'i64'"
    )


def test_error_unregistered_dialect_strict():
    errs = parse_errors('func.func @f() {\n  "foo.a"() : () -> ()\n  return\n}\n', unregistered=False)
    assert errs == [
        "t.mlir:2:10: error: operation being parsed with an unregistered dialect. If this is intended, please use "
        '-allow-unregistered-dialect with the MLIR tool used\n  "foo.a"() : () -> ()\n         ^'
    ]


def test_error_unknown_op_in_registered_dialect():
    errs = parse_errors('"func.bogus"() : () -> ()\n', unregistered=False)
    assert errs[0].startswith(
        "t.mlir:1:1: error: unregistered operation 'func.bogus' found in dialect ('func') that does not allow "
        "unknown operations"
    )


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ('"foo.a"() {s = "abc} : () -> ()\n', "t.mlir:1:32: error: expected '\"' in string literal"),
        ('  %0 = "foo.x"( : () -> i32\n', "t.mlir:1:16: error: expected ')' to end operand list"),
        ('"foo.p"() <{m = 1} ({\n}) : () -> ()\n', "t.mlir:1:19: error: expected '>' to close properties"),
        ('"foo.a"() {a = 1 : () -> ()\n', "t.mlir:1:16: error: integer literal not valid for specified type"),
        (
            '"foo.a"() : () -> i32 loc(#foo.customloc)\n',
            "t.mlir:1:41: error: expected location attribute, but got#foo.customloc",
        ),
        ('"foo.a"() : () -> tensor<tuple<i32>>\n', "t.mlir:1:26: error: invalid tensor element type"),
        (
            '"foo.a"() {x = 3 : i1} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            '"foo.a"() : () -> () loc(#nope)\n',
            "t.mlir:1:26: error: operation location alias was never defined",
        ),
        ("$\n", "t.mlir:1:1: error: unexpected character"),
        ('"foo.a"(', "t.mlir:1:9: error: expected ')' to end operand list"),
        ('"foo.r"() ({\n', "t.mlir:2:1: error: expected '}' to end region"),
        ('"foo.a"() {"" = 7} : () -> ()\n', "t.mlir:1:12: error: expected valid attribute name"),
        (
            '%0:2 = "foo.a"() : () -> i32\n',
            "t.mlir:1:1: error: operation defines 1 results but was provided 2 to bind",
        ),
        ('"foo.b"()[^bb9] : () -> ()\n', "t.mlir:1:11: error: reference to an undefined block"),
    ],
)
def test_error_messages(src, expected):
    errs = parse_errors(src)
    assert len(errs) == 1
    assert errs[0].split("\n")[0] == expected


def test_deep_nesting_is_reported_not_recursion_error():
    deep = "[" * 5000 + "]" * 5000
    errs = parse_errors(f'"foo.a"() {{x = {deep}}} : () -> ()\n')
    assert "nesting is too deep" in errs[0]
    regions = '"foo.r"() ({\n' * 400 + "}) : () -> ()\n" * 400
    errs = parse_errors(regions)
    assert "nesting is too deep" in errs[0]


def test_custom_op_parse_in_default_dialect():
    m = parse_module(
        "func.func @f(%a: i32) -> i32 {\n  %0 = call @f(%a) : (i32) -> i32\n  return %0 : i32\n}\n", ctx()
    )
    body = m.body.first_op.regions[0].blocks[0]
    assert [op.name for op in body] == ["func.call", "func.return"]

"""Parser (lamina/ir/parser/locations.py): location forms, aliases defined after use,
default locations and line offsets."""

from __future__ import annotations

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.location import FileLineColLoc, FusedLoc, NameLoc, UnknownLoc
from lamina.ir.parser import parse_attribute, parse_module


def ctx(unregistered: bool = True) -> Context:
    return Context(allow_unregistered_dialects=unregistered, handler=None)


def parse_errors(text: str, unregistered: bool = True, filename: str = "t.mlir") -> list[str]:
    c = ctx(unregistered)
    with c.diagnostics.capture() as diags:
        m = parse_module(text, c, filename=filename)
    assert m is None
    return [str(d) for d in diags]


def test_location_forms():
    c = ctx()
    assert parse_attribute("loc(unknown)", c) is UnknownLoc()
    assert parse_attribute('loc(fused["only"])', c) is NameLoc("only")
    assert parse_attribute("loc(fused[])", c) is UnknownLoc()
    f = parse_attribute('loc(fused["file":3:5, "other":1:1])', c)
    assert isinstance(f, FusedLoc) and f.locations == (
        FileLineColLoc("file", 3, 5),
        FileLineColLoc("other", 1, 1),
    )


def test_implicit_module_and_default_locations():
    m = parse_module('"foo.a"() : () -> ()\n  "foo.b"() : () -> ()\n', ctx(), filename="x.mlir")
    assert isinstance(m, ModuleOp)
    assert m.location is FileLineColLoc("x.mlir", 0, 0)
    a, b = m.body.ops
    assert a.location is FileLineColLoc("x.mlir", 1, 1)
    assert b.location is FileLineColLoc("x.mlir", 2, 3)


def test_line_offset_shifts_reported_lines():
    m = parse_module('"foo.a"() : () -> ()\n', ctx(), filename="x.mlir", line_offset=10)
    assert m.body.first_op.location is FileLineColLoc("x.mlir", 11, 1)
    errs = parse_errors('"foo.a"() : () -> ()\n"foo.b"(%x) : (i32) -> ()\n', filename="x.mlir")
    assert errs[0].startswith("x.mlir:2:9: error: use of undeclared SSA value name")


def test_location_aliases_defined_after_use():
    src = '"foo.x"() : () -> () loc(#loc_alias)\n#loc_alias = loc("aliased.mlir":7:7)\n'
    m = parse_module(src, ctx())
    assert m.body.first_op.location is FileLineColLoc("aliased.mlir", 7, 7)

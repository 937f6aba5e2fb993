"""The one reading of tensor names from locations (lamina/ir/naming.py)."""

from __future__ import annotations

from lamina.dialects.arith import ConstantOp
from lamina.ir.attributes import IntegerAttr
from lamina.ir.location import FileLineColLoc, FusedLoc, NameLoc, UnknownLoc
from lamina.ir.naming import location_name, location_names, result_names
from lamina.ir.types import i32


def test_location_names() -> None:
    f = FileLineColLoc("m.onnx", 0, 0)
    assert location_names(NameLoc("conv1", f)) == ["conv1"]
    assert location_names(FusedLoc([NameLoc("a"), f, NameLoc("b")])) == ["a", "b"]
    assert location_names(f) == [] and location_names(UnknownLoc()) == [] and location_names(None) == []
    assert location_name(FusedLoc([f, NameLoc("a"), NameLoc("b")])) == "a"
    assert location_name(NameLoc("x")) == "x"
    assert location_name(f) is None and location_name(None) is None


def test_result_names_from_the_location_else_made_up() -> None:
    op = ConstantOp.build(value=IntegerAttr(1, i32), loc=NameLoc("one"))
    assert result_names(op) == ["one"]
    anon = ConstantOp.build(value=IntegerAttr(1, i32))
    (name,) = result_names(anon)
    assert name.startswith("arith.constant_")


def test_the_interpreter_and_diagnostics_use_it() -> None:
    from lamina.execution import interpreter
    from lamina.ir import diagnostics

    assert interpreter.result_names is result_names
    assert diagnostics.format_location(FusedLoc([UnknownLoc(), NameLoc("t")])) == '"t"'

"""Custom assembly of arith and cf: printing and parsing the forms mlir-opt-22 prints by default,
SSA result-name hints (``get_asm_result_names``) and their uniquing."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import lamina.dialects  # noqa: F401
from lamina.dialects.arith import AddIOp, CmpIOp, ConstantOp, ExtSIOp, FastMathFlagsAttr, MulFOp, SelectOp
from lamina.dialects.cf import BranchOp, CondBranchOp
from lamina.dialects.func import FuncOp, ReturnOp
from lamina.ir.attributes import DenseElementsAttr, FloatAttr, IntegerAttr
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.core import Block
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation
from lamina.ir.types import FloatType, IndexType, IntegerType, RankedTensorType

i1, i32, i64, f32 = IntegerType(1), IntegerType(32), IntegerType(64), FloatType("f32")

# Text exactly as mlir-opt-22 prints it (custom form).
ARITH = """module {
  func.func @f(%arg0: i32, %arg1: i32, %arg2: f32, %arg3: f32, %arg4: tensor<2xi1>, %arg5: tensor<2xf32>) -> i32 {
    %c3_i32 = arith.constant 3 : i32
    %c3_i32_0 = arith.constant 3 : i32
    %c-7_i64 = arith.constant -7 : i64
    %c0 = arith.constant 0 : index
    %c-1 = arith.constant -1 : index
    %true = arith.constant true
    %false = arith.constant false
    %cst = arith.constant 1.500000e+00 : f32
    %cst_1 = arith.constant dense<1.000000e+00> : tensor<2xf32>
    %c3_i32_2 = arith.constant {foo} 3 : i32
    %0 = arith.addi %arg0, %arg1 overflow<nsw, nuw> : i32
    %1 = arith.subi %arg0, %c3_i32 overflow<nuw> : i32
    %2 = arith.divsi %arg0, %arg1 exact : i32
    %3 = arith.mulf %arg2, %arg3 fastmath<fast> : f32
    %4 = arith.subf %arg2, %arg3 fastmath<nnan,ninf> : f32
    %5 = arith.negf %arg2 : f32
    %6 = arith.cmpi slt, %arg0, %arg1 : i32
    %7 = arith.cmpf ueq, %arg2, %arg3 fastmath<fast> : f32
    %8 = arith.cmpf oeq, %arg5, %cst_1 : tensor<2xf32>
    %9 = arith.select %6, %arg0, %arg1 : i32
    %10 = arith.select %arg4, %arg5, %cst_1 : tensor<2xi1>, tensor<2xf32>
    %11 = arith.extsi %arg0 : i32 to i64
    %12 = arith.trunci %11 overflow<nsw> : i64 to i16
    %13 = arith.index_cast %arg0 : i32 to index
    %14 = arith.bitcast %arg2 : f32 to i32
    %15 = arith.extf %arg2 : f32 to f64
    %16 = arith.truncf %15 downward fastmath<nnan> : f64 to f32
    %17 = arith.addi %arg0, %arg1 {foo = 1 : i32} : i32
    return %0 : i32
  }
}
"""

CF = """module {
  func.func @g(%arg0: i1, %arg1: i32) -> i32 {
    cf.assert %arg0, "with \\22quote\\22" {bar = 1 : i32}
    cf.cond_br %arg0, ^bb1(%arg1 : i32), ^bb2
  ^bb1(%0: i32):  // pred: ^bb0
    %c1_i32 = arith.constant 1 : i32
    %1 = arith.addi %0, %c1_i32 : i32
    cf.br ^bb3(%1, %0 : i32, i32)
  ^bb2:  // pred: ^bb0
    %c1_i32_0 = arith.constant 1 : i32
    %true = arith.constant true
    cf.cond_br %true, ^bb3(%c1_i32_0, %c1_i32_0 : i32, i32), ^bb3(%arg1, %arg1 : i32, i32) {attr}
  ^bb3(%2: i32, %3: i32):  // 3 preds: ^bb1, ^bb2, ^bb2
    cf.br ^bb4
  ^bb4:  // pred: ^bb3
    return %2 : i32
  }
}
"""

# Name scoping: a nested region sees its ancestors' names and resumes their conflict counter;
# sibling regions do not see each other's names.
NESTED = """module {
  func.func @n(%arg0: i32) -> i32 {
    %c1_i32 = arith.constant 1 : i32
    %c1_i32_0 = arith.constant 1 : i32
    %0 = "test.region"() ({
      %c1_i32_2 = arith.constant 1 : i32
      %2 = arith.addi %c1_i32_2, %arg0 : i32
      "test.yield"(%2) : (i32) -> ()
    }, {
    ^bb0(%arg1: i32):
      %c1_i32_2 = arith.constant 1 : i32
      %c1_i32_3 = arith.constant 1 : i32
      "test.yield"(%c1_i32_2) : (i32) -> ()
    }) : () -> i32
    %c1_i32_1 = arith.constant 1 : i32
    %1:2 = "test.two"() : () -> (i32, i32)
    return %0 : i32
  }
  func.func @h() -> index {
    %c0 = arith.constant 0 : index
    %c0_0 = arith.constant 0 : index
    return %c0 : index
  }
}
"""


def _ctx(unregistered: bool = False) -> Context:
    return Context(handler=None, allow_unregistered_dialects=unregistered)


def _roundtrip(text: str, unregistered: bool = False) -> str:
    ctx = _ctx(unregistered)
    with ctx.diagnostics.capture() as diags:
        m = parse_module(text, ctx)
    assert m is not None, [str(d) for d in diags]
    return print_operation(m)


@pytest.mark.parametrize("text", [ARITH, CF])
def test_custom_form_round_trips_verbatim(text):
    assert _roundtrip(text) == text


def test_name_scoping_and_uniquing():
    assert _roundtrip(NESTED, unregistered=True) == NESTED


def test_generic_form_keeps_plain_numbering():
    ctx = _ctx()
    m = parse_module(ARITH, ctx)
    g = print_operation(m, generic=True)
    assert '%0 = "arith.constant"() <{value = 3 : i32}> : () -> i32' in g
    assert "%c3_i32" not in g and "%cst" not in g
    assert '"arith.addi"(%arg0, %arg1) <{overflowFlags = #arith.overflow<nsw, nuw>}>' in g
    assert '"arith.divsi"(%arg0, %arg1) <{isExact}>' in g
    assert '"arith.cmpi"(%arg0, %arg1) <{predicate = 2 : i64}>' in g
    assert '"arith.truncf"(%25) <{fastmath = #arith.fastmath<nnan>, roundingmode = 1 : i32}>' in g
    # ... and the generic text parses back to the same custom text.
    assert print_operation(parse_module(g, _ctx())) == ARITH


def test_constant_name_hints():
    cases = [
        (IntegerAttr(3, i32), "c3_i32"),
        (IntegerAttr(255, IntegerType(8)), "c-1_i8"),
        (IntegerAttr(-5, IndexType()), "c-5"),
        (IntegerAttr(1, i1), "true"),
        (IntegerAttr(0, i1), "false"),
        (FloatAttr(1.0, f32), "cst"),
        (DenseElementsAttr(RankedTensorType([2], i32), np.array([1, 2], np.int32)), "cst"),
    ]
    for value, name in cases:
        assert ConstantOp.build(value=value).get_asm_result_names() == [name]


def test_built_ir_prints_like_mlir_opt():
    fn = FuncOp.new("b", [i1, i32, f32], [i32])
    entry = fn.entry_block
    c, a, x = entry.args
    exit_ = Block([i32])
    fn.regions[0].add_block(exit_)
    k = ConstantOp.new(7, i32)
    k2 = ConstantOp.new(7, i32)
    add = AddIOp.new(a, k.results[0])
    cmp = CmpIOp.new("sge", add.results[0], k2.results[0])
    sel = SelectOp.new(cmp.results[0], a, add.results[0])
    mul = MulFOp.build(lhs=x, rhs=x, fastmath=FastMathFlagsAttr(["nnan", "nsz"]))
    ext = ExtSIOp.new(a, i64)
    br = CondBranchOp.new(c, exit_, [sel.results[0]], exit_, [a])
    for op in (k, k2, add, cmp, sel, mul, ext, br):
        entry.append(op)
    exit_.append(ReturnOp.create([exit_.args[0]], [], {}, {}, [], []))
    text = print_operation(ModuleOp.new([fn]))
    assert text == (
        "module {\n"
        "  func.func @b(%arg0: i1, %arg1: i32, %arg2: f32) -> i32 {\n"
        "    %c7_i32 = arith.constant 7 : i32\n"
        "    %c7_i32_0 = arith.constant 7 : i32\n"
        "    %0 = arith.addi %arg1, %c7_i32 : i32\n"
        "    %1 = arith.cmpi sge, %0, %c7_i32_0 : i32\n"
        "    %2 = arith.select %1, %arg1, %0 : i32\n"
        "    %3 = arith.mulf %arg2, %arg2 fastmath<nnan,nsz> : f32\n"
        "    %4 = arith.extsi %arg1 : i32 to i64\n"
        "    cf.cond_br %arg0, ^bb1(%2 : i32), ^bb1(%arg1 : i32)\n"
        "  ^bb1(%5: i32):  // 2 preds: ^bb0, ^bb0\n"
        "    return %5 : i32\n"
        "  }\n"
        "}\n"
    )
    assert _roundtrip(text) == text
    br2 = BranchOp.new(exit_, [a])
    assert br2.successors[0] is exit_


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("%0 = arith.cmpi foo, %a, %b : i32", "expected string or keyword containing one of the following"),
        ("%0 = arith.addi %a, %b overflow<foo> : i32", "IntegerOverflowFlags to be one of: none, nsw, nuw"),
        ("%0 = arith.addf %a, %b fastmath<bad> : i32", "FastMathFlags to be one of"),
        ("%0 = arith.extsi %a : i32 i64", "expected 'to'"),
        ("%0 = arith.addi %a, %b : f32", "expects different type than prior uses"),
        ('%0 = arith.constant "s"', "expected a typed attribute"),
        ("cf.br ^bb9", "undefined block"),
    ],
)
def test_bad_custom_syntax_gives_located_diagnostic(body, message):
    ctx = _ctx()
    text = "func.func @r(%a: i32, %b: i32) {\n  " + body + "\n  return\n}\n"
    with ctx.diagnostics.capture() as diags:
        assert parse_module(text, ctx) is None
    assert len(diags) >= 1
    assert message in diags[0].message
    assert diags[0].location.file_line_col().line == 2


def test_predicate_as_string_and_inherent_attr_in_dict():
    text = (
        "func.func @r(%a: i32, %b: i32) {\n"
        '  %0 = arith.cmpi "ule", %a, %b : i32\n'
        "  %1 = arith.addi %a, %b {overflowFlags = #arith.overflow<nsw>} : i32\n"
        "  return\n}\n"
    )
    out = _roundtrip(text)
    assert "arith.cmpi ule, %arg0, %arg1 : i32" in out
    assert "arith.addi %arg0, %arg1 overflow<nsw> : i32" in out


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs mlir-opt-22")
@pytest.mark.parametrize("text", [ARITH, CF, NESTED])
@pytest.mark.parametrize("flags", [[], ["--mlir-print-debuginfo"]])
def test_matches_mlir_opt(text, flags):
    ref = subprocess.run(
        ["mlir-opt-22", "--allow-unregistered-dialect", *flags],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    ctx = _ctx(unregistered=True)
    m = parse_module(text, ctx)
    assert print_operation(m, debuginfo=bool(flags)) + "\n" == ref

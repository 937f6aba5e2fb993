"""``cf.switch``: builder, successor operands, verifier (MLIR's messages), where it branches at run
time, and a loop built on it run by the interpreter (text parity with mlir-opt-22 is
tests/filecheck/interop/cf-switch.mlir)."""

from __future__ import annotations

import numpy as np
import pytest

from lamina.dialects.cf import SwitchOp
from lamina.dialects.func import FuncOp, ReturnOp
from lamina.execution import Interpreter
from lamina.ir.builder import Builder
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.traits import BranchOpInterface, IsTerminator
from lamina.ir.types import IntegerType, i32
from lamina.ir.verifier import verify

i8 = IntegerType(8)


def switch_func(flag_type=i32, values=(5, -1)):
    """f(flag, x) switches to a block per case (the first passes x on), default returns x."""
    f = FuncOp.new("f", [flag_type, i32], [i32])
    b = Builder.at_end(f.entry_block)
    flag, x = f.entry_block.args
    r = f.regions[0]
    default = b.create_block(r, [i32], move_insertion_point=False)
    blocks = [
        b.create_block(r, [i32] if i == 0 else [], move_insertion_point=False) for i in range(len(values))
    ]
    cases = [(v, blk, [x] if i == 0 else []) for i, (v, blk) in enumerate(zip(values, blocks))]
    sw = SwitchOp.new(flag, default, [x], cases)
    b.insert(sw)
    for blk in (default, *blocks):
        with b.at(blk):
            b.create(ReturnOp, operands_=[blk.args[0] if blk.args else x])
    return f, sw, default, blocks


def test_builder_segments_and_successor_operands() -> None:
    f, sw, default, blocks = switch_func()
    assert sw.has_trait(IsTerminator) and BranchOpInterface.get(sw) is sw
    x = f.entry_block.args[1]
    assert list(sw.properties["case_operand_segments"]) == [1, 0]
    assert list(sw.properties["operandSegmentSizes"]) == [1, 1, 1]
    assert sw.case_value_list() == [5, -1]
    assert sw.successors == [default, *blocks]
    assert list(sw.successor_operands(0)) == [x] and list(sw.successor_operands(1)) == [x]
    assert list(sw.successor_operands(2)) == []
    ctx = Context(handler=None)
    assert verify(ModuleOp.new([f]), ctx)


def test_execute_branch_compares_bits_of_the_flag_width() -> None:
    _, sw, _, _ = switch_func(i8, (5, -1))
    assert sw.execute_branch([np.int8(5), "d", "c"]) == (1, ["c"])
    assert sw.execute_branch([np.int8(-1), "d", "c"]) == (2, [])
    assert sw.execute_branch([np.uint8(255), "d", "c"]) == (2, [])  # 255 and -1 are one i8 value
    assert sw.execute_branch([np.int8(6), "d", "c"]) == (0, ["d"])


def test_verifier_messages_are_mlirs() -> None:
    text = """
    func.func @a(%flag: i32) {
      "cf.switch"(%flag)[^bb1, ^bb1] <{case_operand_segments = array<i32: 0>, case_values = dense<[1]> : vector<1xi64>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (i32) -> ()
    ^bb1:
      return
    }
    func.func @b(%flag: i32) {
      "cf.switch"(%flag)[^bb1, ^bb1, ^bb1] <{case_operand_segments = array<i32: 0, 0>, case_values = dense<[1]> : vector<1xi32>, operandSegmentSizes = array<i32: 1, 0, 0>}> : (i32) -> ()
    ^bb1:
      return
    }
    func.func @c(%flag: i32, %x: i32) {
      cf.switch %flag : i32, [
        default: ^bb1,
        3: ^bb1(%x : i32)
      ]
    ^bb1:
      return
    }
    """
    ctx = Context(handler=None)
    m = parse_module(text, ctx, filename="bad.mlir")
    with ctx.diagnostics.capture() as got:
        assert not verify(m, ctx)
    msgs = [d.message for d in got]
    assert "'flag' type ('i32') should match case value type ('i64')" in msgs[0]
    if len(msgs) > 1:  # the verifier may stop at the first function that fails
        assert any(
            "number of case values (1) should match number of case destinations (2)" in m for m in msgs
        )


LOOP = """
// Collatz: the number of steps from n down to 1, switching on n % 2
func.func @main(%n: i64) -> i64 {
  %c0 = arith.constant 0 : i64
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %c3 = arith.constant 3 : i64
  cf.br ^loop(%n, %c0 : i64, i64)
^loop(%x: i64, %k: i64):
  %done = arith.cmpi ule, %x, %c1 : i64
  cf.cond_br %done, ^exit, ^step
^step:
  %r = arith.remui %x, %c2 : i64
  %k2 = arith.addi %k, %c1 : i64
  cf.switch %r : i64, [
    default: ^odd,
    0: ^even(%x : i64)
  ]
^even(%e: i64):
  %h = arith.shrui %e, %c1 : i64
  cf.br ^loop(%h, %k2 : i64, i64)
^odd:
  %t = arith.muli %x, %c3 : i64
  %t1 = arith.addi %t, %c1 : i64
  cf.br ^loop(%t1, %k2 : i64, i64)
^exit:
  return %k : i64
}
"""


def collatz(n: int) -> int:
    k = 0
    while n > 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        k += 1
    return k


@pytest.mark.parametrize("n", [1, 2, 6, 7, 27])
def test_switch_loop_runs(n: int) -> None:
    ctx = Context(handler=None)
    m = parse_module(LOOP, ctx, filename="collatz.mlir")
    assert verify(m, ctx)
    assert Interpreter(m).run([np.int64(n)])["output_0"] == collatz(n)

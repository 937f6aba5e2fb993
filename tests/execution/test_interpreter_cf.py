"""The interpreter on functions of several blocks: ``cf`` branches with block arguments, ``func.call``
(recursion included), ``func.call_indirect`` and ``arith`` — loops written as MLIR text, parsed and
run, results exact."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest

import lamina.dialects  # noqa: F401  (registers func, cf, arith)
from lamina.execution import ExecutionError, Interpreter
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.verifier import verify

PROGRAMS = """
// sum of 1..n
func.func @main(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  cf.br ^loop(%c1, %c0 : i32, i32)
^loop(%i: i32, %acc: i32):
  %done = arith.cmpi sgt, %i, %n : i32
  cf.cond_br %done, ^exit(%acc : i32), ^body
^body:
  %acc2 = arith.addi %acc, %i : i32
  %i2 = arith.addi %i, %c1 : i32
  cf.br ^loop(%i2, %acc2 : i32, i32)
^exit(%r: i32):
  return %r : i32
}

// n! (wraps at 64 bits past 20!)
func.func @factorial(%n: i64) -> i64 {
  %c1 = arith.constant 1 : i64
  cf.br ^loop(%n, %c1 : i64, i64)
^loop(%k: i64, %acc: i64):
  %more = arith.cmpi sgt, %k, %c1 : i64
  cf.cond_br %more, ^body, ^exit
^body:
  %acc2 = arith.muli %acc, %k : i64
  %k2 = arith.subi %k, %c1 : i64
  cf.br ^loop(%k2, %acc2 : i64, i64)
^exit:
  return %acc : i64
}

// Euclid's gcd on unsigned remainders; the block arguments swap on every turn
func.func @gcd(%a: i32, %b: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  cf.br ^loop(%a, %b : i32, i32)
^loop(%x: i32, %y: i32):
  %stop = arith.cmpi eq, %y, %c0 : i32
  cf.cond_br %stop, ^exit, ^body
^body:
  %r = arith.remui %x, %y : i32
  cf.br ^loop(%y, %r : i32, i32)
^exit:
  return %x : i32
}

// Fibonacci by recursive calls
func.func @fib(%n: i64) -> i64 {
  %c1 = arith.constant 1 : i64
  %c2 = arith.constant 2 : i64
  %small = arith.cmpi slt, %n, %c2 : i64
  cf.cond_br %small, ^base, ^rec
^base:
  return %n : i64
^rec:
  %a = arith.subi %n, %c1 : i64
  %b = arith.subi %n, %c2 : i64
  %fa = func.call @fib(%a) : (i64) -> i64
  %fb = func.call @fib(%b) : (i64) -> i64
  %s = arith.addi %fa, %fb : i64
  return %s : i64
}

// Fibonacci by a loop whose block arguments are permuted (parallel assignment)
func.func @fib_loop(%n: index) -> (index, i64) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %z = arith.constant 0 : i64
  %o = arith.constant 1 : i64
  cf.br ^loop(%c0, %z, %o : index, i64, i64)
^loop(%i: index, %a: i64, %b: i64):
  %go = arith.cmpi ult, %i, %n : index
  cf.cond_br %go, ^body, ^exit(%i, %a : index, i64)
^body:
  %s = arith.addi %a, %b : i64
  %i2 = arith.addi %i, %c1 : index
  cf.br ^loop(%i2, %b, %s : index, i64, i64)
^exit(%k: index, %r: i64):
  return %k, %r : index, i64
}

// Calls a multi-block function from a single-block one; an f32 Newton iteration for sqrt
func.func @twice_sum(%n: i32) -> i32 {
  %s = func.call @main(%n) : (i32) -> i32
  %d = arith.addi %s, %s : i32
  return %d : i32
}

func.func @sqrt(%x: f32) -> f32 {
  %half = arith.constant 0.5 : f32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c20 = arith.constant 20 : i32
  cf.br ^loop(%c0, %x : i32, f32)
^loop(%i: i32, %g: f32):
  %go = arith.cmpi slt, %i, %c20 : i32
  cf.cond_br %go, ^body, ^exit
^body:
  %q = arith.divf %x, %g : f32
  %t = arith.addf %g, %q : f32
  %g2 = arith.mulf %t, %half : f32
  %i2 = arith.addi %i, %c1 : i32
  cf.br ^loop(%i2, %g2 : i32, f32)
^exit:
  return %g : f32
}

// Calls through function values: fib by func.constant + func.call_indirect, and a function
// that applies whichever function it is given twice
func.func @apply_twice(%f: (i64) -> i64, %x: i64) -> i64 {
  %y = func.call_indirect %f(%x) : (i64) -> i64
  %z = func.call_indirect %f(%y) : (i64) -> i64
  return %z : i64
}

func.func @indirect(%n: i64) -> i64 {
  %f = func.constant @fib : (i64) -> i64
  %r = func.call @apply_twice(%f, %n) : ((i64) -> i64, i64) -> i64
  return %r : i64
}

// Divides by zero on the fifth turn; asserts on the way
func.func @faulty(%n: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c5 = arith.constant 5 : i32
  cf.br ^loop(%c0 : i32)
^loop(%i: i32):
  %ok = arith.cmpi slt, %i, %n : i32
  cf.assert %ok, "ran past n"
  %d = arith.subi %c5, %i : i32
  %q = arith.divsi %c1, %d : i32
  %i2 = arith.addi %i, %c1 : i32
  cf.br ^loop(%i2 : i32)
}
"""


@pytest.fixture(scope="module")
def module():
    ctx = Context(handler=None)
    m = parse_module(PROGRAMS, ctx, filename="loops.mlir")
    assert m is not None and verify(m, ctx)
    return m


@pytest.mark.parametrize("n", [0, 1, 2, 10, 100])
def test_sum_loop(module, n: int) -> None:
    interp = Interpreter(module)
    assert interp.input_names == ["input_0"] and interp.output_names == ["output_0"]
    out = interp.run({"input_0": np.int32(n)})
    expected = n * (n + 1) // 2
    assert out == {"output_0": expected} and out["output_0"].dtype == np.int32
    assert interp.run([np.int32(n)])["output_0"] == expected


@pytest.mark.parametrize("n", [0, 1, 5, 20, 21, 30])
def test_factorial_wraps_at_64_bits(module, n: int) -> None:
    (r,) = Interpreter(module, "factorial").call([np.int64(n)])
    expected = math.factorial(n) % 2**64
    assert int(r) == (expected - 2**64 if expected >= 2**63 else expected)


@pytest.mark.parametrize(("a", "b"), [(48, 18), (17, 5), (0, 9), (9, 0), (2**31 - 1, 2**30), (-2, 6)])
def test_gcd(module, a: int, b: int) -> None:
    (r,) = Interpreter(module, "gcd").call([np.int32(a), np.int32(b)])
    ua, ub = a % 2**32, b % 2**32  # remui: the unsigned values
    assert int(r) % 2**32 == math.gcd(ua, ub)


def test_recursive_call(module) -> None:
    fib = Interpreter(module, "fib")
    assert [int(fib.call([np.int64(i)])[0]) for i in range(16)] == [
        0, 1, 1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610,
    ]  # fmt: skip


def test_indirect_calls_of_function_values(module) -> None:
    interp = Interpreter(module, "indirect")
    assert int(interp.run([np.int64(6)])["output_0"]) == 21  # fib(fib(6)) = fib(8)
    assert interp.callee(interp.func) is interp  # one compiled interpreter per function


def test_permuted_block_arguments_and_two_results(module) -> None:
    interp = Interpreter(module, "fib_loop")
    assert interp.output_names == ["output_0", "output_1"]
    out = interp.run([np.int64(90)])
    assert out["output_0"] == 90 and out["output_1"] == 2880067194370816120  # fib(90)
    assert out["output_0"].dtype == np.int64  # index values are int64


def test_call_from_a_single_block_function(module) -> None:
    interp = Interpreter(module, "twice_sum")
    assert interp._cfg is None  # the flat plan of a single-block function
    assert interp.run([np.int32(10)])["output_0"] == 110


def test_float_loop(module) -> None:
    (r,) = Interpreter(module, "sqrt").call([np.float32(2.0)])
    assert r.dtype == np.float32 and r == np.float32(np.sqrt(np.float32(2.0)))


def test_dump_all_keeps_the_last_values(module) -> None:
    out = Interpreter(module).run([np.int32(4)], dump_all=True)
    assert out["output_0"] == 10
    assert sorted(int(v) for v in out.values() if v.dtype == np.int32) == [0, 1, 5, 10, 10]


def test_errors_name_the_op_and_line(module) -> None:
    interp = Interpreter(module, "faulty")
    with pytest.raises(
        ExecutionError, match=r"'arith.divsi' op at loops.mlir:\d+:\d+ failed: ArithmeticError"
    ):
        interp.run([np.int32(10)])
    with pytest.raises(ExecutionError, match=r"'cf.assert' op at loops.mlir:\d+:\d+ failed.*ran past n"):
        interp.run([np.int32(3)])
    with pytest.raises(ExecutionError, match="profile runs functions of one block only"):
        interp.profile([np.int32(3)])


def test_unknown_function_name(module) -> None:
    with pytest.raises(ExecutionError, match="no function @nope"):
        Interpreter(module, "nope")


def test_a_block_without_a_return_or_branch_is_refused() -> None:
    text = """
    func.func @main(%c: i1) -> i32 {
      %a = arith.constant 1 : i32
      cf.cond_br %c, ^t, ^f
    ^t:
      return %a : i32
    ^f:
      %b = arith.addi %a, %a : i32
    }
    """
    m = parse_module(text, Context(handler=None), filename="bad.mlir")
    if m is None:
        pytest.skip("the parser refuses a block without a terminator")
    with pytest.raises(ExecutionError, match="expected a return or a branch"):
        Interpreter(m)


def test_interpreter_knows_no_dialect() -> None:
    """Floor 2: lamina/execution imports no dialect and names no op."""
    root = Path(__file__).resolve().parents[2] / "lamina" / "execution"
    for path in root.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                assert not (node.module or "").startswith("lamina.dialects"), path
            elif isinstance(node, ast.Import):
                assert not any(a.name.startswith("lamina.dialects") for a in node.names), path
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not node.value.startswith(("top.", "tpu.", "func.", "cf.", "arith.")), (
                    path,
                    node.value,
                )

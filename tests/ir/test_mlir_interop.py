"""Interop with upstream MLIR: what Lamina prints, mlir-opt-22 accepts and re-prints identically;
what mlir-opt-22 prints, Lamina parses and re-prints byte-identically."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation

MLIR_OPT = shutil.which("mlir-opt-22")
pytestmark = pytest.mark.skipif(MLIR_OPT is None, reason="mlir-opt-22 is not installed")

FUNC_SRC = """module @m attributes {foo.attr = 42 : i64, a.b = "x"} {
  func.func @pub(%a: i32, %b: i32) -> i32 {
    %0 = "foo.add"(%a, %b) {k = [1, 2.5, "s"]} : (i32, i32) -> i32
    return %0 : i32
  }
  func.func private @decl(i32, f32) -> (i32, f32)
  func.func @argattrs(%x: i32 {foo.bar = 1 : i32, foo.noalias}, %y: f32) -> (i32 {res.attr = "r"}, f32) attributes {some.attr = unit} {
    return %x, %y : i32, f32
  }
  func.func @caller(%x: i32, %y: f32) -> (i32, f32) {
    %0:2 = call @argattrs(%x, %y) : (i32, f32) -> (i32, f32)
    %1 = func.call @pub(%0#0, %0#0) : (i32, i32) -> i32
    return %1, %0#1 : i32, f32
  }
  func.func @noargs() {
    return
  }
}
"""

UNREG_SRC = """func.func @unreg(%a: i32 loc("argfile.mlir":10:20), %b: f32) {
  %0 = "foo.bar"(%a, %b) : (i32, f32) -> i32 loc("name")
  %1:2 = "foo.multi"(%0) : (i32) -> (i32, f32) loc(fused["a", "b":1:2])
  "foo.props"(%1#0) <{z = 1 : i32, a = "s", m = unit}> {zz = 2 : i64, aa = [1, 2], mm, l = loc("q":3:3)} : (i32) -> () loc(callsite("c" at "d":4:4))
  %2:3 = "foo.region"(%1#1) ({
  ^bb0(%x: i32 loc("blk":5:5)):
    "foo.inner"(%x) {d = dense<[1.0, 2.0]> : tensor<2xf32>, s = dense<7> : tensor<1000xi32>} : (i32) -> ()
    "foo.br"()[^bb1] : () -> ()
  ^bb1:
    "foo.term"() : () -> () loc("n"("f":1:1))
  }, {
    "foo.other"() {t = !foo.ty<"x">, u = #foo.attr<[1, {a = 2}]>, q = !quant.uniform<i8:f32, 0.05:-3>} : () -> ()
  }) {attr = 1 : i32} : (f32) -> (i1, i1, i1)
  "foo.succ"(%a)[^bb1, ^bb2] {k = 0 : i32} : (i32) -> ()
^bb1:
  "foo.ret"(%2#2, %2#0) : (i1, i1) -> ()
^bb2:
  "foo.ret"() : () -> ()
}
"foo.res"() {r = dense_resource<blob1> : tensor<3xi32>} : () -> ()
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x04000000010000000200000003000000"
    }
  }
#-}
"""

ARITH_CF_SRC = """func.func @cf(%c: i1, %a: i32, %b: i32) -> i32 {
  cf.cond_br %c, ^bb1(%a : i32), ^bb2
^bb1(%x: i32):
  cf.br ^bb3(%x, %a : i32, i32)
^bb2:
  %s = arith.addi %a, %b : i32
  cf.br ^bb3(%s, %b : i32, i32)
^bb3(%p: i32, %q: i32):
  %r = arith.addi %p, %q : i32
  %k = arith.constant 7 : i32
  %f = arith.constant dense<[1.5, 2.0]> : tensor<2xf32>
  %m = arith.muli %r, %k : i32
  return %m : i32
}
"""


def mlir_opt(text: str, *flags: str) -> str:
    r = subprocess.run(
        [MLIR_OPT, "--allow-unregistered-dialect", *flags, "-"], input=text, capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def lamina_roundtrip(text: str, generic: bool, debuginfo: bool) -> str:
    ctx = Context(allow_unregistered_dialects=True, handler=None)
    with ctx.diagnostics.capture() as diags:
        m = parse_module(text, ctx, filename="-")
    assert m is not None, "\n".join(str(d) for d in diags)
    return print_operation(m, generic=generic, debuginfo=debuginfo)


MODES = [
    (True, True, ("--mlir-print-op-generic", "--mlir-print-debuginfo")),
    (True, False, ("--mlir-print-op-generic",)),
    (False, True, ("--mlir-print-debuginfo",)),
    (False, False, ()),
]


@pytest.mark.parametrize("src", [FUNC_SRC, UNREG_SRC], ids=["func", "unregistered"])
@pytest.mark.parametrize(
    ("generic", "debuginfo", "flags"), MODES, ids=["generic-dbg", "generic", "custom-dbg", "custom"]
)
def test_lamina_parses_and_reprints_mlir_opt_output(src, generic, debuginfo, flags):
    ref = mlir_opt(src, *flags)
    assert lamina_roundtrip(ref, generic, debuginfo) + "\n" == ref


@pytest.mark.parametrize("src", [FUNC_SRC, UNREG_SRC], ids=["func", "unregistered"])
@pytest.mark.parametrize(
    ("generic", "debuginfo", "flags"), MODES, ids=["generic-dbg", "generic", "custom-dbg", "custom"]
)
def test_mlir_opt_accepts_and_reprints_lamina_output(src, generic, debuginfo, flags):
    ctx = Context(allow_unregistered_dialects=True, handler=None)
    m = parse_module(src, ctx, filename="-")
    assert m is not None
    ours = print_operation(m, generic=generic, debuginfo=debuginfo)
    assert mlir_opt(ours, *flags) == ours + "\n"


@pytest.mark.parametrize(("generic", "debuginfo", "flags"), MODES[:2], ids=["generic-dbg", "generic"])
def test_arith_cf_generic_from_mlir_opt(generic, debuginfo, flags):
    ref = mlir_opt(ARITH_CF_SRC, *flags)
    assert lamina_roundtrip(ref, generic, debuginfo) + "\n" == ref

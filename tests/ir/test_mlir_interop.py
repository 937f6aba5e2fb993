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


# ---- hand-written generic forms: whitespace, newlines and comments wherever MLIR's grammar allows

HAND_WRITTEN = {
    "successor-list-after-space": """func.func @f(%c: i1, %y: i32) {
  "cf.cond_br"(%c, %y) [^bb1, ^bb2] <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (i1, i32) -> ()
^bb1(%a: i32):
  return
^bb2:
  return
}
""",
    "spaces-between-every-token": """"builtin.module" ( ) ( {
  %0 = "foo.a" ( ) : ( ) -> i32
  %1:2 = "foo.b" ( %0 , %0 ) <{ p = 1 : i32 }> { a = 2 : i64 } : ( i32 , i32 ) -> ( i32 , f32 )
  %2 : 2 = "foo.b" ( %0 , %0 ) < { p = 1 : i32 } > : ( i32 , i32 ) -> ( i32 , f32 )
  %3 , %4 = "foo.b" ( %1#0 , %2#1 ) : ( i32 , f32 ) -> ( i32 , f32 )
  "foo.c" ( %1#0 ) { b } : ( i32 ) -> ( )
  "foo.p"() <{a = 1 : i32}>{b = 2 : i32}: () -> ()
} ) : ( ) -> ( )
""",
    "newlines-and-comments": """"builtin.module"() ({
 "foo.r"() ({
  %0 = "foo.a"   // the op
    (
    )
    {a = 1 : i32}   // its attributes
    :
    (
    )
    ->
    i32
  "foo.b"(%0) // trailing
    [^bb1] : (i32) -> ()
  // a full-line comment
^bb1 :
  "foo.t"() : () -> ()
 }) : () -> ()
}) : () -> () // end
""",
    "spaces-inside-types": """"builtin.module"() ({
  %0 = "foo.a"() : () -> tensor< 1 x 2 x f32 >
  %1 = "foo.a"() : () -> tensor<4x ? x f32>
  %2 = "foo.a"() : () -> tensor <4 xf32>
  %3 = "foo.a"() : () -> vector< 4 x f32 >
  %4 = "foo.a"() : () -> memref< ? x 4 x f32 >
  %5 = "foo.a"() : () -> tensor< * x f32 >
  %6 = "foo.a"() : () -> tuple< i32 , f32 >
  %7 = "foo.a"() : () -> complex< f32 >
  %8 = "foo.a"() : () -> tensor<2xf32 , "enc">
  %9 = "foo.a"() : () -> vector<[4] x f32>
  "foo.u"(%0) : (tensor<1x2xf32>) -> ((i32) -> (i32))
}) : () -> ()
""",
    "spaces-inside-locations": """"builtin.module"() ({
  %0 = "foo.a"() : () -> i32 loc( "x" )
  %1 = "foo.a"() : () -> i32 loc ("f.mlir" : 1 : 2)
  %2 = "foo.a"() : () -> i32 loc(fused [ "a" , "b" ])
  %3 = "foo.a"() : () -> i32 loc( callsite( "c" at "d" : 1 : 2 ) )
  %4 = "foo.a"() : () -> i32 loc("n" ( "q" ))
  "foo.r"() ({
  ^bb0 (%x : i32 loc ("q") , %y : f32 loc( "r" : 3 : 4 )):
    "foo.t"() : () -> ()
  }) : () -> () loc(#loc1)
}) : () -> () loc("top")
#loc1 = loc( "y" : 5 : 6 )
""",
    "spaces-inside-attributes": """"builtin.module"() ({
  %0 = "foo.a"() {a = [ 1 , 2 ], b = { c = 1 , d } , e = dense< [ 1.0 , 2.0 ] > : tensor< 2 x f32 >, f = array< i32 : 1 , 2 >} : () -> !foo.t<"x">
  "foo.b"() {a = - 1 : i32, b = 5:i8, c = [ ], d = { }, e = array<i32>, f = dense< > : tensor<0xf32>, g = "x" : i32, h = "y"} : () -> ()
  "foo.c"() {x = #foo.attr< 1 >, y = #foo<"z">, t = (i32, f32) -> i64, u = complex<f32>} : () -> ()
}) : () -> ()
""",
    "regions-and-successors": """"builtin.module"() ({
  "foo.r"() ( {
    "foo.s"() [ ^bb1 ] : () -> ()
  ^bb1:
    "foo.s"()[ ^bb2 , ^bb1 ] : () -> ()
  ^bb2:
    "foo.t"() : () -> ()
  } , {
    "foo.t"() : () -> ()
  } ) { a = 1 } : () -> ()
}) : () -> ()
""",
    "wide-integer-literals": '"foo.x"() {a = 1'
    + "0" * 5000
    + " : i20000, b = -1"
    + "0" * 5000
    + " : i20000} : () -> ()\n",
}


@pytest.mark.parametrize("src", HAND_WRITTEN.values(), ids=HAND_WRITTEN.keys())
@pytest.mark.parametrize(
    ("generic", "debuginfo", "flags"), MODES, ids=["generic-dbg", "generic", "custom-dbg", "custom"]
)
def test_hand_written_text_reads_as_mlir_opt_reads_it(src, generic, debuginfo, flags):
    """mlir-opt-22 and Lamina both accept the hand-written text and print it byte-identically."""
    ctx = Context(allow_unregistered_dialects=True, handler=None)
    with ctx.diagnostics.capture() as diags:
        m = parse_module(src, ctx, filename="<stdin>")  # mlir-opt's name for its input
    assert m is not None, "\n".join(str(d) for d in diags)
    assert print_operation(m, generic=generic, debuginfo=debuginfo) + "\n" == mlir_opt(src, *flags)


def mlir_opt_error(text: str) -> str:
    r = subprocess.run(
        [MLIR_OPT, "--allow-unregistered-dialect", "-"], input=text, capture_output=True, text=True
    )
    assert r.returncode != 0, f"mlir-opt-22 accepted:\n{text}"
    return r.stderr.splitlines()[0]


def lamina_error(text: str) -> str:
    ctx = Context(allow_unregistered_dialects=True, handler=None)
    with ctx.diagnostics.capture() as diags:
        m = parse_module(text, ctx, filename="<stdin>")
    assert m is None, f"Lamina accepted:\n{text}"
    return str(diags[0]).splitlines()[0]


Z = "0" * 5000  # a literal beyond Python's int/str conversion limit (4300 digits)

# (text, error) pairs both report identically: line:col and message
REJECTED_SAME = {
    "int-attr-too-large": (
        f'"foo.x"() {{a = 1{Z} : i32}} : () -> ()',
        "1:16: error: integer constant out of range for attribute",
    ),
    "int-attr-too-large-i64": (
        f'"foo.x"() {{a = 1{Z}}} : () -> ()',
        "1:16: error: integer constant out of range for attribute",
    ),
    "int-attr-too-large-index": (
        f'"foo.x"() {{a = 1{Z} : index}} : () -> ()',
        "1:16: error: integer constant out of range for attribute",
    ),
    "int-attr-out-of-range": (
        '"foo.x"() {a = 4294967296 : i32} : () -> ()',
        "1:16: error: integer constant out of range for attribute",
    ),
    "dense-splat-too-large": (
        f'"foo.x"() {{a = dense<1{Z}> : tensor<2xi64>}} : () -> ()',
        "1:22: error: integer constant out of range for type",
    ),
    "array-too-large": (
        f'"foo.x"() {{a = array<i32: 1{Z}>}} : () -> ()',
        "1:5028: error: integer constant out of range",
    ),
    "array-out-of-range": (
        '"foo.x"() {a = array<i32: 5000000000>} : () -> ()',
        "1:37: error: integer constant out of range",
    ),
    "dim-too-large": (f'"foo.x"() : () -> tensor<1{Z}xf32>', "1:26: error: invalid dimension"),
    "dim-over-int64": ('"foo.x"() : () -> tensor<9223372036854775808xf32>', "1:26: error: invalid dimension"),
    "width-too-large": (f'"foo.x"() : () -> i1{Z}', "1:19: error: invalid integer width"),
    "result-count-too-large": (
        f'%0:1{Z} = "foo.x"() : () -> (i32, i32)',
        "error: expected named operation to have at least 1 result",
    ),
    "trailing-comma-in-attr-dict": ('"foo.b"() {a = 1, } : () -> ()', "1:18: error: expected attribute name"),
    "trailing-comma-in-array": ('"foo.b"() {a = [1, 2, ]} : () -> ()', "error: expected attribute value"),
    "trailing-comma-in-operands": (
        '%0 = "foo.a"() : () -> i32\n"foo.b"(%0, ) : (i32) -> ()',
        "error: expected SSA operand",
    ),
    "trailing-comma-in-types": ('"foo.b"() : (i32, ) -> ()', "error: expected non-function type"),
    "two-attr-dicts": (
        '"foo.a"() {a = 1 : i32} {b = 2} : () -> ()',
        "error: expected ':' followed by operation type",
    ),
    "space-in-ssa-name": (
        '%0 = "foo.a"() : () -> i32\n"foo.b"(% 0) : (i32) -> ()',
        "2:9: error: invalid SSA name",
    ),
    "space-in-block-name": ('"foo.r"() ({\n^ bb1:\n  "foo.t"() : () -> ()\n}) : () -> ()', "2:1: error:"),
    "space-before-dialect-type-body": ('"foo.a"() : () -> !foo.t < "x" >', "error:"),
    "dense-out-of-range": (
        '"foo.x"() {a = dense<[99999999999999999999999]> : tensor<1xi32>} : () -> ()',
        "error: integer constant out of range for type",
    ),
    "dense-too-large": (
        f'"foo.x"() {{a = dense<[1{Z}]> : tensor<1xi32>}} : () -> ()',
        "error: integer constant out of range for type",
    ),
}


@pytest.mark.parametrize(("src", "error"), REJECTED_SAME.values(), ids=REJECTED_SAME.keys())
def test_rejected_by_both(src, error):
    """Both reject; the message (and, where given, line:col) is mlir-opt-22's."""
    theirs, ours = mlir_opt_error(src), lamina_error(src)
    assert error in theirs, theirs
    if error.startswith(tuple("0123456789")) and error.endswith(":"):
        assert ours.startswith("<stdin>:" + error.split(":")[0] + ":"), ours  # same line
    elif error.startswith(tuple("0123456789")):
        assert ours == "<stdin>:" + error, ours
    else:
        assert error in ours, ours

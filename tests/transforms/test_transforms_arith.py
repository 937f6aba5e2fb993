"""canonicalize/cse on arith IR (custom form in and out), compared with what mlir-opt-22 prints."""

from __future__ import annotations

import shutil
import subprocess

import pytest

INPUT = """
func.func @f(%a: i32) -> i32 {
  %x = arith.addi %a, %a : i32
  %c = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %0 = arith.addi %c, %c : i32
  %1 = arith.muli %x, %0 : i32
  %3 = arith.constant 1 : i32
  %2 = arith.addi %1, %3 : i32
  %4 = arith.subi %2, %2 : i32
  %5 = arith.addi %4, %2 : i32
  return %5 : i32
}
"""

# mlir-opt-22 --canonicalize
EXPECTED = """module {
  func.func @f(%arg0: i32) -> i32 {
    %c2_i32 = arith.constant 2 : i32
    %c1_i32 = arith.constant 1 : i32
    %0 = arith.addi %arg0, %arg0 : i32
    %1 = arith.muli %0, %c2_i32 : i32
    %2 = arith.addi %1, %c1_i32 : i32
    return %2 : i32
  }
}
"""


def _setup():
    import lamina.dialects  # noqa: F401
    from lamina.ir import parser, printer
    from lamina.ir.context import Context

    ctx = Context(handler=None)
    with ctx.diagnostics.capture() as diags:
        m = parser.parse_module(INPUT, ctx)
    assert m is not None, [str(d) for d in diags]
    return ctx, m, printer


def test_canonicalize_matches_mlir_opt():
    from lamina.passes import PassManager

    ctx, m, printer = _setup()
    assert PassManager.parse("builtin.module(canonicalize)", ctx).run(m)
    assert printer.print_operation(m) == EXPECTED


def test_cse_then_canonicalize_is_stable():
    from lamina.passes import PassManager

    ctx, m, printer = _setup()
    assert PassManager.parse("builtin.module(func.func(cse,canonicalize),cse)", ctx).run(m)
    assert printer.print_operation(m) == EXPECTED


@pytest.mark.skipif(shutil.which("mlir-opt-22") is None, reason="needs mlir-opt-22")
@pytest.mark.parametrize(
    "pipeline",
    [
        "builtin.module(canonicalize)",
        "builtin.module(cse)",
        "builtin.module(func.func(cse,canonicalize),cse)",
    ],
)
def test_pipelines_match_live_mlir_opt(pipeline):
    from lamina.passes import PassManager

    ctx, m, printer = _setup()
    assert PassManager.parse(pipeline, ctx).run(m)
    ref = subprocess.run(
        ["mlir-opt-22", f"--pass-pipeline={pipeline}"],
        input=INPUT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printer.print_operation(m) + "\n" == ref

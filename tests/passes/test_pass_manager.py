"""Running pass managers: nesting, failures, instrumentation, reproducers."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "rewrite"))

import lam_test_dialect as lt

from lamina.dialects.func.ops import FuncOp, ReturnOp
from lamina.ir.builtin import ModuleOp
from lamina.ir.location import FileLineColLoc
from lamina.passes import OpPassManager, Pass, PassManager, Statistic, register_pass

VISITED: list[str] = []


@register_pass
class RecordPass(Pass):
    name = "lam-record"
    summary = "Records the ops it runs on"
    runs = Statistic("runs", "Number of runs")

    def run_on_operation(self, op):
        sym = op.properties.get("sym_name")
        VISITED.append(f"{op.name}:{sym.value if sym is not None else ''}")
        self.runs += 1


@register_pass
class ExplodePass(Pass):
    name = "lam-explode"
    summary = "Raises"

    def run_on_operation(self, op):
        raise ZeroDivisionError("boom")


@register_pass
class FailPass(Pass):
    name = "lam-fail"
    summary = "Signals failure"

    def run_on_operation(self, op):
        op.emit_error("lam-fail was here")
        self.signal_failure()


@register_pass
class BreakIRPass(Pass):
    name = "lam-break-ir"
    summary = "Makes the IR invalid (a return with the wrong operand count)"

    def run_on_operation(self, op):
        for f in op.walk_ops(FuncOp):
            term = f.entry_block.last_op
            term.set_operands([])


def module(*names: str) -> ModuleOp:
    funcs = []
    for i, n in enumerate(names):
        f = FuncOp.new(n, [lt.i32], [lt.i32], loc=FileLineColLoc("in.mlir", i + 1, 1))
        b = f.entry_block
        x = b.args[0]
        s = lt.add(b, x, lt.add(b, lt.const(b, 1), lt.const(b, 2)))
        b.append(ReturnOp.build(operands_=[s]))
        funcs.append(f)
    return ModuleOp.new(funcs, loc=FileLineColLoc("in.mlir", 1, 1))


def test_nested_pipeline_visits_each_func():
    VISITED.clear()
    ctx = lt.make_context()
    m = module("a", "b")
    pm = PassManager.parse("builtin.module(func.func(lam-record),lam-record)", ctx)
    assert pm.run(m)
    assert VISITED == ["func.func:a", "func.func:b", "builtin.module:"]


def test_any_anchor_and_nest_api():
    VISITED.clear()
    ctx = lt.make_context()
    m = module("a")
    pm = PassManager(ctx)
    pm.nest("any").add(RecordPass)
    assert pm.run(m)
    assert VISITED == ["func.func:a"]
    assert pm.pipeline_str() == "builtin.module(any(lam-record))"


def test_wrong_root_op():
    ctx = lt.make_context()
    f = module("a").body.first_op
    pm = PassManager.parse("builtin.module(cse)", ctx)
    with ctx.diagnostics.capture() as diags:
        assert not pm.run(f)
    assert "can't run 'builtin.module' pass manager on 'func.func' op" in diags[0].message


def test_bare_pipeline_runs_on_any_root():
    VISITED.clear()
    ctx = lt.make_context()
    f = module("a").body.first_op
    assert PassManager.parse("lam-record", ctx).run(f)
    assert VISITED == ["func.func:a"]


def test_exception_becomes_diagnostic():
    ctx = lt.make_context()
    m = module("a")
    pm = PassManager.parse("builtin.module(func.func(lam-explode))", ctx)
    with ctx.diagnostics.capture() as diags:
        assert pm.run(m) is False
    assert len(diags) == 1
    d = diags[0]
    assert d.severity == "error"
    assert "pass 'ExplodePass' (lam-explode) raised ZeroDivisionError: boom" in d.message
    assert "in.mlir:1:1" in str(d)
    assert "Traceback" not in str(d)


def test_exception_traceback_in_debug_mode():
    ctx = lt.make_context()
    pm = PassManager.parse("lam-explode", ctx)
    pm.debug = True
    with ctx.diagnostics.capture() as diags:
        assert not pm.run(module("a"))
    assert "Traceback" in str(diags[0])


def test_signal_failure_stops_pipeline():
    VISITED.clear()
    ctx = lt.make_context()
    pm = PassManager.parse("builtin.module(lam-fail,lam-record)", ctx)
    with ctx.diagnostics.capture() as diags:
        assert not pm.run(module("a"))
    assert VISITED == []
    assert [d.message for d in diags] == ["'builtin.module' op lam-fail was here"]


def test_crash_reproducer(tmp_path):
    pytest.importorskip("lamina.ir.printer")
    ctx = lt.make_context()
    m = module("f", "g")
    path = tmp_path / "repro.mlir"
    pm = PassManager.parse("builtin.module(func.func(cse,lam-explode))", ctx)
    pm.enable_crash_reproducer(str(path))
    with ctx.diagnostics.capture() as diags:
        assert pm.run(m) is False
    text = path.read_text()
    # The input IR of the run, then MLIR's reproducer footer.
    assert ("lam_test.add" in text and '"f"' in text) or "@f" in text
    assert text.rstrip().endswith("#-}")
    assert "{-#\n  external_resources: {\n    mlir_reproducer: {\n" in text
    assert 'pipeline: "builtin.module(func.func(cse,lam-explode))",' in text
    assert "disable_threading: true," in text and "verify_each: true" in text
    errors = [
        d for d in diags if d.message == "Failures have been detected while processing an MLIR pass pipeline"
    ]
    assert len(errors) == 1
    note = errors[0].notes[0].message
    assert note == (
        f"Pipeline failed while executing [`ExplodePass` on 'func.func' operation: @f]: "
        f"reproducer generated at `{path}`"
    )
    assert str(errors[0]).startswith("in.mlir:1:1: error:")


def test_reproducer_has_input_not_output(tmp_path):
    pytest.importorskip("lamina.ir.printer")
    ctx = lt.make_context()
    m = module("f")
    path = tmp_path / "r.mlir"
    pm = PassManager.parse("builtin.module(func.func(canonicalize),lam-fail)", ctx)
    pm.enable_crash_reproducer(str(path))
    with ctx.diagnostics.capture():
        assert not pm.run(m)
    text = path.read_text()
    assert "value = 2" in text  # the un-canonicalized input
    assert "value = 3" not in text


def test_verifier_failure_names_pass():
    pytest.importorskip("lamina.ir.verifier")
    ctx = lt.make_context()
    pm = PassManager.parse("builtin.module(lam-break-ir)", ctx)
    with ctx.diagnostics.capture() as diags:
        assert not pm.run(module("a"))
    errs = [d for d in diags if d.severity == "error"]
    assert errs
    assert any(
        "verification failed after running pass 'BreakIRPass' (lam-break-ir)" in n.message
        for d in errs
        for n in d.notes
    )
    pm2 = PassManager.parse("builtin.module(lam-break-ir)", ctx)
    pm2.enable_verifier(False)
    assert pm2.run(module("a"))


def test_ir_printing_after_all():
    pytest.importorskip("lamina.ir.printer")
    ctx = lt.make_context()
    out = io.StringIO()
    pm = PassManager.parse("builtin.module(func.func(canonicalize,cse),symbol-dce)", ctx)
    pm.enable_ir_printing(after_all=True, stream=out)
    assert pm.run(module("a"))
    text = out.getvalue()
    headers = [line for line in text.splitlines() if line.startswith("// -----//")]
    assert headers == [
        "// -----// IR Dump After Canonicalizer (canonicalize) //----- //",
        "// -----// IR Dump After CSE (cse) //----- //",
        "// -----// IR Dump After SymbolDCE (symbol-dce) //----- //",
    ]
    assert text.endswith("\n\n")


def test_ir_printing_before_and_after_change():
    pytest.importorskip("lamina.ir.printer")
    ctx = lt.make_context()
    out = io.StringIO()
    pm = PassManager.parse("builtin.module(func.func(canonicalize,cse))", ctx)
    pm.enable_ir_printing(before=["cse"], after_all=True, after_change=True, stream=out)
    assert pm.run(module("a"))
    headers = [line for line in out.getvalue().splitlines() if line.startswith("// -----//")]
    # canonicalize changed the IR, cse did not.
    assert headers == [
        "// -----// IR Dump After Canonicalizer (canonicalize) //----- //",
        "// -----// IR Dump Before CSE (cse) //----- //",
    ]


def test_ir_printing_after_failure():
    pytest.importorskip("lamina.ir.printer")
    ctx = lt.make_context()
    out = io.StringIO()
    pm = PassManager.parse("builtin.module(lam-fail)", ctx)
    pm.enable_ir_printing(after_failure=True, stream=out)
    with ctx.diagnostics.capture():
        pm.run(module("a"))
    assert "// -----// IR Dump After FailPass Failed (lam-fail) //----- //" in out.getvalue()


def test_timing_report():
    ctx = lt.make_context()
    pm = PassManager.parse("builtin.module(func.func(canonicalize,cse),symbol-dce)", ctx)
    pm.enable_timing()
    assert pm.run(module("a", "b"))
    rep = pm.timing_report()
    lines = rep.splitlines()
    assert lines[0] == "===" + "-" * 73 + "==="
    assert lines[1].strip() == "... Execution time report ..."
    assert lines[3].startswith("  Total Execution Time: ") and lines[3].endswith(" seconds")
    assert "  ----Wall Time----  ----Name----" in lines
    names = [line[21:] for line in lines[6:]]
    assert names == ["'func.func' Pipeline", "  Canonicalizer", "  CSE", "SymbolDCE", "Total"]
    assert lines[-1].startswith("  ") and "(100.0%)  Total" in lines[-1]
    rep2 = pm.timing_report(total=10.0, extra=[("Parser", 1.0)])
    assert "Parser" in rep2 and "Rest" in rep2 and "Total Execution Time: 10.0000 seconds" in rep2


def test_statistics_report():
    ctx = lt.make_context()
    m = module("a", "b")
    pm = PassManager.parse("builtin.module(func.func(cse,lam-record))", ctx)
    pm.enable_statistics()
    assert pm.run(m)
    rep = pm.statistics_report()
    assert "... Pass statistics report ..." in rep
    assert "'func.func' Pipeline\n  CSE\n    (S) 0 num-cse'd - Number of operations CSE'd" in rep
    assert "  RecordPass\n    (S) 2 runs - Number of runs" in rep


def test_op_pass_manager_add_rejects_mismatch():
    from lamina.passes import PipelineError
    from lamina.transforms.cse import CSE

    pm = OpPassManager("func.func")
    pm.add(CSE())

    class Only(Pass):
        name = "only"
        op_name = "builtin.module"

    with pytest.raises(PipelineError):
        pm.add(Only())

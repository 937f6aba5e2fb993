"""Pass managers: nested pipelines of passes, run with instrumentation.

``PassManager(ctx)`` is anchored on ``builtin.module``; ``pm.nest("func.func")`` returns a nested
:class:`OpPassManager` whose passes run on every ``func.func`` directly nested in the anchor's
regions (as MLIR does). ``PassManager.parse(text, ctx)`` builds one from MLIR's textual syntax.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import TYPE_CHECKING, Any, TextIO

from lamina.ir.diagnostics import Diagnostic, DiagnosticEngine, active_engine, emit, emit_error
from lamina.ir.location import FileLineColLoc
from lamina.passes.instrumentation import IRPrinting, TimingNode, print_ir, statistics_report, timing_report
from lamina.passes.pass_ import Pass, PassOptionError
from lamina.passes.pipeline import PipelineElement, PipelineError, parse_pipeline_text
from lamina.passes.registry import get_pass

if TYPE_CHECKING:
    from lamina.ir.context import Context
    from lamina.ir.core import Operation

ANY = "any"


class OpPassManager:
    """A list of passes and nested pass managers anchored on one op name (or ``any``)."""

    def __init__(self, anchor: str | None = ANY) -> None:
        #: The op name the pipeline runs on; ``any`` for op-agnostic, None for "whatever the root is".
        self.anchor = anchor
        self.items: list[Pass | OpPassManager] = []

    @property
    def anchor_name(self) -> str:
        return self.anchor if self.anchor is not None else ANY

    def add(self, p: Pass | type[Pass]) -> OpPassManager:
        """Add a pass (instance, or class to instantiate with default options)."""
        if isinstance(p, type):
            p = p()
        if p.op_name is not None and self.anchor not in (None, ANY) and p.op_name != self.anchor:
            raise PipelineError(
                f"can't add pass '{p.name}' restricted to '{p.op_name}' on a pass manager intended to run "
                f"on '{self.anchor}', did you intend to nest?"
            )
        self.items.append(p)
        return self

    add_pass = add

    def nest(self, anchor: str) -> OpPassManager:
        """A nested pass manager running on each ``anchor`` op directly nested in this one's op."""
        sub = OpPassManager(anchor)
        self.items.append(sub)
        return sub

    def passes(self) -> list[Pass]:
        """Every pass, in pipeline order (nested ones included)."""
        out: list[Pass] = []
        for it in self.items:
            if isinstance(it, OpPassManager):
                out.extend(it.passes())
            else:
                out.append(it)
        return out

    def pipeline_str(self, root: str | None = None) -> str:
        """The textual pipeline (with every pass option, as MLIR prints reproducers)."""
        inner = ",".join(it.pipeline_str() for it in self.items)
        anchor = self.anchor if self.anchor is not None else root
        return f"{anchor}({inner})" if anchor is not None else inner

    def __str__(self) -> str:
        return self.pipeline_str()

    # ---- building from text ----------------------------------------------------------------

    def add_pipeline(self, text: str) -> None:
        """Append the passes of a textual pipeline (relative to this manager's anchor)."""
        elems = parse_pipeline_text(text)
        self._add_elements(elems, text)

    def _add_elements(self, elems: list[PipelineElement], text: str) -> None:
        for el in elems:
            if el.nested is not None:
                if el.options is not None:
                    raise PipelineError(
                        f"options are not allowed on the op pipeline '{el.name}'", text, el.column
                    )
                sub = self.nest(el.name)
                sub._add_elements(el.nested, text)
                continue
            cls = get_pass(el.name)
            if cls is None:
                raise PipelineError(
                    f"'{el.name}' does not refer to a registered pass or pass pipeline", text, el.column
                )
            try:
                p = cls.from_option_string(el.options) if el.options is not None else cls()
            except PassOptionError as e:
                col = el.options_column or el.column
                raise PipelineError(
                    f"failed to add `{el.name}` with options `{el.options}`: {e}", text, col
                ) from None
            try:
                self.add(p)
            except PipelineError as e:
                raise PipelineError(e.message, text, el.column) from None


class _RunState:
    __slots__ = ("exception", "failed_at")

    def __init__(self) -> None:
        self.failed_at: list[tuple[Pass, Operation]] = []
        self.exception: BaseException | None = None


class PassManager(OpPassManager):
    """The top-level pass manager, with instrumentation."""

    def __init__(self, ctx: Context | None = None, anchor: str | None = "builtin.module") -> None:
        super().__init__(anchor)
        self.context = ctx
        self.verify_each = True
        self._ir_printing: IRPrinting | None = None
        self._timing = False
        self._timing_nodes: dict[int, TimingNode] = {}
        self._timing_total = 0.0
        self._statistics = False
        self._reproducer: str | None = None
        self.debug = bool(os.environ.get("LAMINA_DEBUG"))

    # ---- construction -------------------------------------------------------------------

    @classmethod
    def parse(cls, pipeline: str, ctx: Context | None = None) -> PassManager:
        """Build a pass manager from MLIR's textual pipeline syntax.

        ``op(...)`` with a single top-level op-anchored element anchors the manager on ``op``; a bare
        list of passes is anchored on whatever op the manager is run on. Errors report a diagnostic
        naming the pipeline and column and raise :class:`PipelineError`."""
        try:
            elems = parse_pipeline_text(pipeline)
            if len(elems) == 1 and elems[0].nested is not None and elems[0].options is None:
                pm = cls(ctx, anchor=elems[0].name)
                pm._add_elements(elems[0].nested, pipeline)
            else:
                pm = cls(ctx, anchor=None)
                pm._add_elements(elems, pipeline)
        except PipelineError as e:
            if not e.pipeline:
                e.pipeline = pipeline
            _report_pipeline_error(e, ctx)
            raise
        return pm

    # ---- instrumentation ----------------------------------------------------------------

    def enable_ir_printing(
        self,
        before: list[str] | None = None,
        after: list[str] | None = None,
        before_all: bool = False,
        after_all: bool = False,
        after_change: bool = False,
        stream: TextIO | None = None,
        generic: bool = False,
        after_failure: bool = False,
        module_scope: bool = False,
    ) -> None:
        """Print the IR before/after the named passes (pipeline names) or all of them, as
        ``--mlir-print-ir-before/after[-all|-change|-failure]`` do (to ``stream``, default stderr)."""
        self._ir_printing = IRPrinting(
            before, after, before_all, after_all, after_change, after_failure, stream, generic, module_scope
        )

    def enable_timing(self, enable: bool = True) -> None:
        self._timing = enable

    def enable_verifier(self, enable: bool = True) -> None:
        self.verify_each = enable

    def enable_statistics(self, enable: bool = True) -> None:
        self._statistics = enable

    def enable_crash_reproducer(self, path: str | None) -> None:
        """On a failure (an exception or a failed pass), write the input IR of the run and the
        pipeline to ``path`` as an MLIR reproducer and report where it is."""
        self._reproducer = path

    def timing_report(self, total: float | None = None, extra: list[tuple[str, float]] | None = None) -> str:
        """The ``-mlir-timing`` report of every run so far (``extra``: e.g. ``[("Parser", s)]``)."""
        return timing_report(self._timing_tree(self), total, extra)

    def statistics_report(self) -> str:
        return statistics_report(self)

    def _timing_tree(self, mgr: OpPassManager) -> list[TimingNode]:
        out: list[TimingNode] = []
        for it in mgr.items:
            node = self._timing_nodes.get(id(it))
            if node is None:
                node = TimingNode(
                    f"'{it.anchor_name}' Pipeline" if isinstance(it, OpPassManager) else it.display_name
                )
            if isinstance(it, OpPassManager):
                node.children = self._timing_tree(it)
            out.append(node)
        return out

    # ---- running ------------------------------------------------------------------------

    def run(self, op: Operation) -> bool:
        """Run the pipeline on ``op``. Returns False if a pass failed or verification failed; the
        diagnostics go to the context's engine (or the active one)."""
        if self.context is not None:
            with self.context:
                return self._run(op)
        return self._run(op)

    def _run(self, op: Operation) -> bool:
        if self.anchor not in (None, ANY) and op.name != self.anchor:
            emit_error(
                op.location,
                f"can't run '{self.anchor}' pass manager on '{op.name}' op",
            )
            return False
        snapshot = None
        if self._reproducer:
            from lamina.ir.core import IRMapping

            snapshot = op.clone(IRMapping())
        state = _RunState()
        t0 = time.perf_counter()
        try:
            ok = self._run_pipeline(self, op, state)
        finally:
            self._timing_total += time.perf_counter() - t0
        if not ok and self._reproducer and snapshot is not None:
            self._write_reproducer(op, snapshot, state)
        if snapshot is not None:
            snapshot.drop_all_references()
        return ok

    def _run_pipeline(self, mgr: OpPassManager, op: Operation, state: _RunState) -> bool:
        for it in mgr.items:
            if isinstance(it, OpPassManager):
                t0 = time.perf_counter() if self._timing else 0.0
                anchor = it.anchor
                ok = True
                for region in op.regions:
                    for block in region.blocks:
                        for child in list(block):
                            if (anchor in (None, ANY) or child.name == anchor) and not self._run_pipeline(
                                it, child, state
                            ):
                                ok = False
                                break
                        if not ok:
                            break
                    if not ok:
                        break
                if self._timing:
                    self._time(it, time.perf_counter() - t0)
                if not ok:
                    return False
            elif not self._run_pass(it, op, state):
                return False
        return True

    def _time(self, item: Any, seconds: float) -> None:
        node = self._timing_nodes.get(id(item))
        if node is None:
            name = f"'{item.anchor_name}' Pipeline" if isinstance(item, OpPassManager) else item.display_name
            node = self._timing_nodes[id(item)] = TimingNode(name)
        node.seconds += seconds

    def _run_pass(self, p: Pass, op: Operation, state: _RunState) -> bool:
        if not p.can_schedule_on(op):
            emit_error(
                op.location,
                f"'{op.name}' op: pass '{p.name}' is anchored on '{p.op_name}' and cannot run on this op",
            )
            state.failed_at.append((p, op))
            return False
        printing = self._ir_printing
        if printing is not None and printing.wants_before(p):
            printing.dump("Before", p, op)
        before_fp = None
        if printing is not None and printing.after_change and printing.wants_after(p):
            before_fp = printing.fingerprint(op)
        p._failed = False
        p._op = op
        p.context = self.context
        t0 = time.perf_counter()
        failed = False
        try:
            r = p.run_on_operation(op)
            failed = p._failed or r is False
        except Exception as e:  # a crashing pass becomes a diagnostic, never a traceback
            failed = True
            state.exception = e
            self._report_exception(p, op, e)
        finally:
            if self._timing:
                self._time(p, time.perf_counter() - t0)
            p._op = None
        if printing is not None:
            if failed:
                if printing.after_failure or printing.wants_after(p):
                    printing.dump("After", _Failed(p), op)  # type: ignore[arg-type]
            elif printing.wants_after(p) and (before_fp is None or printing.fingerprint(op) != before_fp):
                printing.dump("After", p, op)
        if not failed and self.verify_each and not self._verify(p, op):
            failed = True
        if failed:
            state.failed_at.append((p, op))
        return not failed

    def _verify(self, p: Pass, op: Operation) -> bool:
        try:
            from lamina.ir.verifier import verify
        except ImportError:  # verifier not available yet
            return True
        engine = active_engine()
        if engine is None:
            return bool(verify(op))
        got: list[Diagnostic] = []
        with engine.handler(got.append):
            ok = verify(op)
        first = True
        for d in got:
            if d.severity == "error" and first:
                d.attach_note(
                    f"verification failed after running pass '{p.display_name}' ({p.name})", op.location
                )
                first = False
            _reemit(engine, d)
        return bool(ok) and not any(d.severity == "error" for d in got)

    def _report_exception(self, p: Pass, op: Operation, e: BaseException) -> None:
        notes = []
        if self.debug:
            notes.append(
                ("".join(traceback.format_exception(type(e), e, e.__traceback__)).rstrip(), op.location)
            )
        emit(
            "error",
            op.location,
            f"'{op.name}' op: pass '{p.display_name}' ({p.name}) raised {type(e).__name__}: {e}",
            notes,
        )

    def _write_reproducer(self, root: Operation, snapshot: Operation, state: _RunState) -> None:
        path = self._reproducer
        assert path is not None
        pipeline = self.pipeline_str(root.name)
        footer_body = (
            "  external_resources: {\n"
            "    mlir_reproducer: {\n"
            f'      pipeline: "{pipeline}",\n'
            "      disable_threading: true,\n"
            f"      verify_each: {'true' if self.verify_each else 'false'}\n"
            "    }\n"
            "  }\n"
        )
        try:
            text = print_ir(snapshot).rstrip("\n")
        except Exception as e:  # printer missing or broken: still say what happened
            text = f"// could not print the input IR: {type(e).__name__}: {e}"
        if text.endswith("#-}"):
            # Merge into the existing file-metadata block (dialect_resources).
            head = text[: -len("#-}")].rstrip("\n")
            text = head + ",\n" + footer_body + "#-}\n"
        else:
            text = text + "\n\n{-#\n" + footer_body + "#-}\n"
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError as e:
            emit_error(root.location, f"could not write the crash reproducer to '{path}': {e}")
            return
        where = ", ".join(_describe(p, o) for p, o in state.failed_at) or f"`{pipeline}`"
        emit_error(
            root.location,
            "Failures have been detected while processing an MLIR pass pipeline",
            [(f"Pipeline failed while executing [{where}]: reproducer generated at `{path}`", root.location)],
        )


class _Failed:
    """A view of a pass whose IR dump header reads ``After X Failed (x)``."""

    def __init__(self, p: Pass) -> None:
        self.display_name = f"{p.display_name} Failed"
        self.name = p.name


def _describe(p: Pass, op: Operation) -> str:
    s = f"`{p.display_name}` on '{op.name}' operation"
    sym = op.properties.get("sym_name") if hasattr(op, "properties") else None
    if sym is not None and hasattr(sym, "value"):
        s += f": @{sym.value}"
    return s


def _reemit(engine: DiagnosticEngine, d: Diagnostic) -> None:
    """Pass a diagnostic captured by a temporary handler on to the engine's current handler
    (it was already counted when first emitted)."""
    handlers = engine._handlers
    if handlers:
        handlers[-1](d)
    elif d.severity == "error":
        from lamina.ir.diagnostics import DiagnosticError

        raise DiagnosticError(d)


def _report_pipeline_error(e: PipelineError, ctx: Context | None) -> None:
    loc = FileLineColLoc("MLIR Textual PassPipeline Parser", 1, max(e.column, 1))
    msg = f"{e.message}\n{e.pipeline}\n{' ' * max(e.column - 1, 0)}^"
    engine = ctx.diagnostics if ctx is not None else active_engine()
    d = Diagnostic("error", loc, msg)
    if engine is not None:
        engine.emit(d)
    else:
        print(str(d), file=sys.stderr)

"""``lamina-opt``: parse, verify, transform and print IR, like ``mlir-opt``.

    lamina-opt in.mlir --pass-pipeline='builtin.module(canonicalize,cse)' -o out.mlir
    lamina-opt in.mlir --canonicalize --cse              # registered passes as flags
    lamina-opt --split-input-file --verify-diagnostics invalid.mlir

Exit status: 0 on success, 1 on any error diagnostic (or an unmet ``expected-*`` with
``--verify-diagnostics``), 2 on bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lamina.ir.source_diagnostics import DiagnosticVerifier, SourceBuffer, SourceDiagnosticPrinter
from lamina.support.errors import ToolError
from lamina.support.paths import check_outputs
from lamina.tools.common import atomic_write, internal_error_guard, read_text_input

if TYPE_CHECKING:
    from lamina.ir.context import Context

SPLIT_MARKER = "// -----"

#: Set when lamina-opt runs as a command (not through ``main(argv)`` from Python): like clang's
#: ``-disable-free``, the IR is kept alive and the process ends without tearing it down, and the
#: parsed IR is frozen out of the cyclic garbage collector's sight. Both cost seconds on large
#: modules and buy nothing in a process about to exit.
_command_mode = False
_retained: list[object] = []


def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lamina-opt",
        description="Lamina modular optimizer driver: parse, verify, run a pass pipeline, print.",
        epilog="Registered passes may also be given as flags: --canonicalize, --cse, "
        "--canonicalize=max-iterations=4 (see --list-passes).",
    )
    p.add_argument("input", nargs="?", default="-", help="input file ('-' or omitted: stdin)")
    p.add_argument("-o", dest="output", default="-", help="output file (default: stdout)")
    p.add_argument(
        "--pass-pipeline", default=None, help="textual pass pipeline, e.g. 'builtin.module(canonicalize,cse)'"
    )
    p.add_argument(
        "--split-input-file",
        action="store_const",
        const=SPLIT_MARKER,
        default=None,
        help=f"split the input into chunks at lines '{SPLIT_MARKER}' (or --split-input-file=MARKER) "
        "and process each independently",
    )
    p.add_argument("--split-input-marker", dest="split_input_file", help=argparse.SUPPRESS)
    p.add_argument(
        "--verify-diagnostics", action="store_true", help="check diagnostics against expected-* comments"
    )
    p.add_argument("--mlir-print-op-generic", action="store_true", help="print the generic op form")
    p.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
    p.add_argument(
        "--allow-unregistered-dialect", action="store_true", help="allow ops of unregistered dialects"
    )
    p.add_argument(
        "--print-ir-after-all",
        "--mlir-print-ir-after-all",
        action="store_true",
        dest="after_all",
        help="print IR after each pass",
    )
    p.add_argument(
        "--print-ir-before-all",
        "--mlir-print-ir-before-all",
        action="store_true",
        dest="before_all",
        help="print IR before each pass",
    )
    p.add_argument(
        "--print-ir-after",
        "--mlir-print-ir-after",
        action="append",
        default=[],
        dest="after",
        metavar="PASS",
        help="print IR after the named pass",
    )
    p.add_argument(
        "--print-ir-before",
        "--mlir-print-ir-before",
        action="append",
        default=[],
        dest="before",
        metavar="PASS",
        help="print IR before the named pass",
    )
    p.add_argument(
        "--print-ir-after-change",
        "--mlir-print-ir-after-change",
        action="store_true",
        dest="after_change",
        help="only print IR after a pass if it changed",
    )
    p.add_argument(
        "--timing", "--mlir-timing", action="store_true", dest="timing", help="print a per-pass timing report"
    )
    p.add_argument(
        "--mlir-pass-statistics", action="store_true", dest="statistics", help="print pass statistics"
    )
    p.add_argument(
        "--verify-each",
        default="true",
        choices=["true", "false", "1", "0"],
        help="run the verifier after each pass (default: true)",
    )
    p.add_argument(
        "--mlir-pass-pipeline-crash-reproducer",
        "--crash-reproducer",
        dest="reproducer",
        default=None,
        metavar="FILE",
        help="on a pass failure or crash, write the failing input and pipeline to FILE",
    )
    p.add_argument(
        "--external-weights",
        default=None,
        metavar="FILE.npz",
        help="write dense_resource blobs to FILE.npz instead of inline",
    )
    p.add_argument("--list-passes", action="store_true", help="list registered passes and exit")
    return p


def _split_pass_flags(argv: list[str]) -> tuple[list[str], list[str]]:
    """Pull ``--<registered-pass>[=options]`` flags out of argv, in order."""
    # lamina-opt's own options are not looked up as passes (that would import every pass module).
    own = set(_build_parser()._option_string_actions) | {"--split-input-file"}
    rest, passes = [], []
    for a in argv:
        if a.startswith("--") and len(a) > 2 and a.partition("=")[0] not in own:
            from lamina.passes.registry import get_pass

            name, _, opts = a[2:].partition("=")
            try:
                cls = get_pass(name)
            except Exception:
                cls = None
            if cls is not None:
                passes.append(f"{name}{{{opts}}}" if opts else name)
                continue
        rest.append(a)
    return rest, passes


def split_chunks(text: str, marker: str) -> list[tuple[str, int]]:
    """Split at lines that start with ``marker``; each chunk keeps its first line number."""
    chunks: list[tuple[str, int]] = []
    cur: list[str] = []
    start = 1
    for i, line in enumerate(text.split("\n"), start=1):
        if line.strip().startswith(marker) and line.strip()[len(marker) :].strip() == "":
            chunks.append(("\n".join(cur), start))
            cur = []
            start = i + 1
        else:
            cur.append(line)
    chunks.append(("\n".join(cur), start))
    return chunks


def _unknown_passes(args: argparse.Namespace) -> str | None:
    """A message for ``--print-ir-after/before`` naming no registered pass (None when all exist)."""
    from lamina.passes import get_pass

    for flag, names in (("--print-ir-after", args.after), ("--print-ir-before", args.before)):
        for name in (n.strip() for v in names for n in v.split(",")):
            if not name or get_pass(name) is None:
                return f"{flag}: no pass named '{name}' is registered (see --list-passes)"
    return None


def _external_weights_path(args: argparse.Namespace) -> str | None:
    """``--external-weights``; a bare file name lives next to the output file."""
    external = args.external_weights
    if external and not os.path.dirname(external) and args.output != "-":
        external = os.path.join(os.path.dirname(os.path.abspath(args.output)), external)
    return external


def _list_passes() -> str:
    from lamina.passes.registry import format_pass_list

    return format_pass_list()


def run(argv: Sequence[str] | None = None) -> int:
    import lamina.dialects
    import lamina.targets  # noqa: F401 - and the targets' dialects and passes
    from lamina.ir.context import Context

    argv = list(sys.argv[1:] if argv is None else argv)
    argv, pass_flags = _split_pass_flags(argv)
    # mlir-opt spells a custom marker --split-input-file=MARKER (a bare flag takes no value).
    argv = [
        x
        for a in argv
        for x in (
            ("--split-input-marker", a.split("=", 1)[1]) if a.startswith("--split-input-file=") else (a,)
        )
    ]
    args = _build_parser().parse_args(argv)
    if args.list_passes:
        print(_list_passes())
        return 0
    if args.pass_pipeline and pass_flags:
        print(
            "lamina-opt: error: --pass-pipeline cannot be combined with pass flags "
            f"({', '.join('--' + p for p in pass_flags)})",
            file=sys.stderr,
        )
        return 2
    pipeline = args.pass_pipeline
    if pipeline is None and pass_flags:
        pipeline = "builtin.module(" + ",".join(pass_flags) + ")"
    unknown = _unknown_passes(args)
    if unknown:
        print(f"lamina-opt: error: {unknown}", file=sys.stderr)
        return 2
    if args.external_weights and args.split_input_file:
        print(
            "lamina-opt: error: --external-weights cannot be combined with --split-input-file "
            "(every chunk would write the same weight file)",
            file=sys.stderr,
        )
        return 2
    args.external_weights = _external_weights_path(args)
    try:
        check_outputs(
            [("the input", None if args.input == "-" else args.input)],
            [
                ("-o", None if args.output == "-" else args.output),
                ("--external-weights", args.external_weights),
                ("the crash reproducer", args.reproducer),
            ],
        )
    except ToolError as e:
        print(f"lamina-opt: error: {e}", file=sys.stderr)
        return 1

    text, filename = read_text_input(args.input, "lamina-opt")
    if text is None:
        return 1
    chunks = split_chunks(text, args.split_input_file) if args.split_input_file else [(text, 1)]

    # Like mlir-opt: each chunk prints as the op, a newline and a blank line; chunks that failed
    # print nothing; chunks are separated by the split marker.
    outputs: list[str] = []
    ok = True
    for chunk, first_line in chunks:
        buf = SourceBuffer(filename, chunk, first_line)
        handler = (
            DiagnosticVerifier(buf) if args.verify_diagnostics else SourceDiagnosticPrinter({filename: buf})
        )
        ctx = Context(
            allow_unregistered_dialects=args.allow_unregistered_dialect, load_all=False, handler=handler
        )
        with ctx:
            out = _process(ctx, chunk, filename, first_line, pipeline, args)
        outputs.append("" if out is None else out.rstrip("\n") + "\n\n")
        if args.verify_diagnostics:
            ok = handler.finish() and ok  # type: ignore[union-attr]
        elif ctx.diagnostics.error_count:
            ok = False
    result = (SPLIT_MARKER + "\n").join(outputs)
    if args.output == "-":
        sys.stdout.write(result)
    elif ok:
        atomic_write(args.output, result)
    return 0 if ok else 1


def _process(
    ctx: Context, chunk: str, filename: str, first_line: int, pipeline: str | None, args: argparse.Namespace
) -> str | None:
    """Parse, verify, transform and print one chunk; None when it produced errors."""
    from lamina.ir.parser import parse_module
    from lamina.ir.printer import print_operation
    from lamina.ir.verifier import verify
    from lamina.passes import PassManager, PipelineError

    t0 = time.perf_counter()
    module = parse_module(chunk, ctx, filename=filename, line_offset=first_line - 1)
    t_parse = time.perf_counter() - t0
    if _command_mode:
        import gc

        _retained.append(module)
        gc.freeze()
    if module is None or not verify(module, ctx):
        return None
    pm = None
    if pipeline:
        ctx.load_all_available()  # passes may create ops of any dialect and collect their patterns
        try:
            pm = PassManager.parse(pipeline, ctx)
        except PipelineError:
            return None
        pm.enable_verifier(args.verify_each in ("true", "1"))
        if args.after_all or args.before_all or args.after or args.before:
            pm.enable_ir_printing(
                before=args.before or None,
                after=args.after or None,
                before_all=args.before_all,
                after_all=args.after_all,
                after_change=args.after_change,
                stream=sys.stderr,
                generic=args.mlir_print_op_generic,
            )
        if args.timing:
            pm.enable_timing()
        if args.statistics:
            pm.enable_statistics()
        if args.reproducer:
            pm.enable_crash_reproducer(args.reproducer)
        success = pm.run(module)
        if args.statistics:
            sys.stderr.write(pm.statistics_report())
        if not success:
            return None
    if ctx.diagnostics.error_count:
        return None
    external = args.external_weights
    t1 = time.perf_counter()
    text = print_operation(
        module,
        generic=args.mlir_print_op_generic,
        debuginfo=args.mlir_print_debuginfo,
        resources="external" if external else "inline",
        external_weights=external,
    )
    t_print = time.perf_counter() - t1
    if args.timing:
        extra = [("Parser", t_parse), ("Output", t_print)]
        if pm is not None:
            sys.stderr.write(pm.timing_report(extra=extra))
        else:
            from lamina.passes.instrumentation import timing_report

            sys.stderr.write(timing_report([], extra=extra))
    return text


def main(argv: Sequence[str] | None = None) -> int:
    """Run lamina-opt; without ``argv`` (as the command), exit the process when done."""
    global _command_mode
    if argv is not None:
        return internal_error_guard("lamina-opt", lambda: run(argv))
    _command_mode = True
    rc = internal_error_guard("lamina-opt", lambda: run(None))
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:
        rc = rc or 1
    os._exit(rc)


if __name__ == "__main__":
    sys.exit(main())

"""IR parse/print benchmark (issue 2): Lamina vs xDSL vs mlir-opt-22.

Generates a 20,000-op generic-form module shaped like a conv net (``"top.Conv"``, ``"top.Relu"``,
``"top.Add"``, ``"top.MaxPool"`` and ``"top.Weight"`` ops with properties, attributes, tensor types and
``loc("name")`` locations printed with ``--mlir-print-debuginfo``), then measures (best of N, in CPU seconds — see :func:`best_of`):

* Lamina: ``parse_module`` and ``print_operation(generic=True, debuginfo=True)``;
* xDSL: its ``Parser`` (unregistered ops allowed) and ``Printer`` on the same text;
* ``mlir-opt-22`` CPU time on the same file minus its start-up time (an empty module);
* a module holding 100 MB of ``dense_resource`` weights: Lamina parse and print throughput.

Usage: ``python benchmarks/ir_parse_print.py [--ops 20000] [--repeat 3] [--write-results]``.
``--write-results`` replaces the ``## IR parse/print (issue 2)`` section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import datetime
import io
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from lamina.ir.attributes import DenseArrayAttr, IntegerAttr, StringAttr, dense_resource
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.core import UnregisteredOp
from lamina.ir.location import NameLoc
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation
from lamina.ir.types import f32, i64, tensor

HEADING = "## IR parse/print (issue 2)"


def build_convnet(n_ops: int, dialect: str = "top") -> ModuleOp:
    """A chain of conv blocks: weight, weight, conv, relu (+ add / maxpool now and then), as
    unregistered ops named ``<dialect>.Conv`` etc."""
    m = ModuleOp.new()
    body = m.body
    ch, hw = 64, 56
    act_t = tensor([1, ch, hw, hw], f32)
    inp = UnregisteredOp.create(
        [], [act_t], {}, {"name": StringAttr("input")}, name=f"{dialect}.Input", location=NameLoc("input")
    )
    body.append(inp)
    x = inp.results[0]
    skip = x
    k33 = DenseArrayAttr(i64, [3, 3])
    s11 = DenseArrayAttr(i64, [1, 1])
    p1 = DenseArrayAttr(i64, [1, 1, 1, 1])
    w_t = tensor([ch, ch, 3, 3], f32)
    b_t = tensor([ch], f32)
    count = 1
    i = 0
    while count < n_ops:
        i += 1
        w = UnregisteredOp.create([], [w_t], {}, {}, name=f"{dialect}.Weight", location=NameLoc(f"conv{i}_w"))
        b = UnregisteredOp.create([], [b_t], {}, {}, name=f"{dialect}.Weight", location=NameLoc(f"conv{i}_b"))
        conv = UnregisteredOp.create(
            [x, w.results[0], b.results[0]],
            [act_t],
            {"kernel_shape": k33, "strides": s11, "pads": p1, "group": IntegerAttr(1, i64)},
            {"do_relu": IntegerAttr(0, i64), "name": StringAttr(f"conv{i}")},
            name=f"{dialect}.Conv",
            location=NameLoc(f"conv{i}"),
        )
        relu = UnregisteredOp.create(
            [conv.results[0]],
            [act_t],
            {},
            {"name": StringAttr(f"relu{i}")},
            name=f"{dialect}.Relu",
            location=NameLoc(f"relu{i}"),
        )
        for op in (w, b, conv, relu):
            body.append(op)
        x = relu.results[0]
        count += 4
        if i % 2 == 0 and count < n_ops:
            add = UnregisteredOp.create(
                [x, skip],
                [act_t],
                {},
                {"name": StringAttr(f"add{i}")},
                name=f"{dialect}.Add",
                location=NameLoc(f"add{i}"),
            )
            body.append(add)
            x = skip = add.results[0]
            count += 1
    return m


def _cpu_seconds() -> float:
    """CPU time of this process and of its finished children (user + system)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def best_of(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Best-of-``repeat`` CPU seconds (this process plus any child it runs).

    All three contenders run single-threaded, so CPU time is their work; wall time on this shared
    virtual machine also counts time stolen by other guests and varies up to 2x between runs."""
    best = float("inf")
    result = None
    for _ in range(repeat):
        t0 = _cpu_seconds()
        result = fn()
        best = min(best, _cpu_seconds() - t0)
    return best, result


def count_ops(m: ModuleOp) -> int:
    return sum(1 for _ in m.walk_ops()) - 1


def bench_xdsl(text: str, repeat: int) -> tuple[float | None, float | None, str]:
    try:
        from xdsl.context import Context as XContext
        from xdsl.parser import Parser as XParser
        from xdsl.printer import Printer as XPrinter
    except ImportError:
        try:
            from xdsl.ir import MLContext as XContext  # type: ignore[no-redef]
            from xdsl.parser import Parser as XParser
            from xdsl.printer import Printer as XPrinter
        except ImportError:
            return None, None, "xDSL not installed"
    try:
        from xdsl.dialects.builtin import Builtin

        def parse() -> Any:
            xctx = XContext(allow_unregistered=True)
            xctx.load_dialect(Builtin)
            return XParser(xctx, text).parse_module()

        tp, mod = best_of(parse, repeat)

        def prn() -> str:
            buf = io.StringIO()
            XPrinter(stream=buf, print_generic_format=True).print_op(mod)
            return buf.getvalue()

        tr, _ = best_of(prn, repeat)
        return tp, tr, ""
    except Exception as e:
        return None, None, f"xDSL failed: {type(e).__name__}: {str(e)[:120]}"


def bench_mlir_opt(path: str, repeat: int) -> tuple[float | None, float | None]:
    exe = shutil.which("mlir-opt-22")
    if exe is None:
        return None, None
    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write("module {\n}\n")
        empty = f.name

    def run(p: str) -> None:
        subprocess.run(
            [
                exe,
                "--allow-unregistered-dialect",
                "--mlir-print-op-generic",
                "--mlir-print-debuginfo",
                p,
                "-o",
                os.devnull,
            ],
            check=True,
        )

    t_empty, _ = best_of(lambda: run(empty), repeat)
    t_full, _ = best_of(lambda: run(path), repeat)
    os.unlink(empty)
    return t_full, t_empty


def bench_resources(mb: int, repeat: int) -> dict[str, float]:
    ctx = Context(allow_unregistered_dialects=True)
    n = mb * 1024 * 1024 // 4
    arr = np.arange(n, dtype=np.float32)
    attr = dense_resource(ctx.resources, "weights", arr)
    m = ModuleOp.new()
    m.body.append(UnregisteredOp.create([], [attr.type], {"value": attr}, {}, name="top.Weight"))
    t_print, text = best_of(lambda: print_operation(m, generic=True), repeat)

    def parse() -> Any:
        c2 = Context(allow_unregistered_dialects=True)
        return parse_module(text, c2)

    t_parse, m2 = best_of(parse, repeat)
    out = m2.body.first_op.properties["value"].to_numpy()
    assert out.shape == arr.shape and out[-1] == arr[-1]
    return {"mb": mb, "print_s": t_print, "parse_s": t_parse, "text_mb": len(text) / 1e6}


def machine() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs (nproc), {cpu}, Python {platform.python_version()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--resource-mb", type=int, default=100)
    ap.add_argument("--no-xdsl", action="store_true")
    ap.add_argument("--write-results", action="store_true")
    args = ap.parse_args(argv)

    module = build_convnet(args.ops)
    text = print_operation(module, generic=True, debuginfo=True)
    n_ops = count_ops(module)

    def lparse() -> Any:
        ctx = Context(allow_unregistered_dialects=True)
        m = parse_module(text, ctx, filename="bench.mlir")
        assert m is not None
        return m

    t_parse, parsed = best_of(lparse, args.repeat)
    t_print, again = best_of(lambda: print_operation(parsed, generic=True, debuginfo=True), args.repeat)
    assert again == text, "Lamina round trip is not byte-identical"
    t_print_nodbg, _ = best_of(lambda: print_operation(parsed, generic=True), args.repeat)

    rows: list[tuple[str, str, str, str]] = []
    rows.append(
        (
            "Lamina, debuginfo locations",
            f"{n_ops / t_parse:,.0f}",
            f"{n_ops / t_print:,.0f}",
            f"{t_parse:.3f} / {t_print:.3f}",
        )
    )
    notes = [
        f"Lamina print of the debuginfo-parsed module without debuginfo: {n_ops / t_print_nodbg:,.0f} ops/s."
    ]

    with tempfile.NamedTemporaryFile("w", suffix=".mlir", delete=False) as f:
        f.write(text)
        path = f.name
    xp = xr = None
    # xDSL cannot parse `loc(#alias)` references to aliases defined at the end of the file (what
    # mlir-opt prints with --mlir-print-debuginfo), so both are also measured on the same module
    # printed without locations.
    plain = print_operation(parsed, generic=True)

    def lparse_plain() -> Any:
        m = parse_module(plain, Context(allow_unregistered_dialects=True), filename="bench.mlir")
        assert m is not None
        return m

    tp2, parsed2 = best_of(lparse_plain, args.repeat)
    tr2, again2 = best_of(lambda: print_operation(parsed2, generic=True), args.repeat)
    assert again2 == plain
    rows.append(
        ("Lamina, no locations", f"{n_ops / tp2:,.0f}", f"{n_ops / tr2:,.0f}", f"{tp2:.3f} / {tr2:.3f}")
    )
    if not args.no_xdsl:
        xp, xr, msg = bench_xdsl(plain, max(1, min(args.repeat, 2)))
        if msg:
            notes.append(msg)
        if xp is not None and xr is not None:
            rows.append(
                ("xDSL, no locations", f"{n_ops / xp:,.0f}", f"{n_ops / xr:,.0f}", f"{xp:.3f} / {xr:.3f}")
            )
            notes.append(
                "xDSL does not parse `loc(#alias)` references to aliases defined after use (mlir-opt's "
                "--mlir-print-debuginfo output), so it is measured on the module printed without locations."
            )
    full, empty = bench_mlir_opt(path, args.repeat)
    if full is not None and empty is not None:
        net = max(full - empty, 1e-6)
        rows.append(
            (
                "mlir-opt-22 (parse+verify+print, minus start-up)",
                f"{n_ops / net:,.0f} (round trip)",
                "",
                f"{full:.3f} total, {empty:.3f} start-up",
            )
        )
    os.unlink(path)
    res = bench_resources(args.resource_mb, max(1, min(args.repeat, 2)))

    lines = [
        f"Module: {n_ops:,} generic-form ops ({len(text) / 1e6:.1f} MB of text, debuginfo locations).",
        "Times are CPU seconds (user + system of the process, or of the mlir-opt-22 child), best of "
        f"{args.repeat}: all three run single-threaded, and wall time on this shared virtual machine "
        "also counts time stolen by other guests (it varied up to 2x between runs).",
        "",
        "| implementation | parse ops/s | print ops/s | parse / print seconds |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append("| " + " | ".join(r) + " |")
    if xp is not None and xr is not None:
        lines.append("")
        lines.append(
            f"Lamina vs xDSL (same text, no locations): parse {xp / tp2:.1f}x faster, print {xr / tr2:.1f}x faster."
        )
    if full is not None and empty is not None:
        lines.append(
            f"mlir-opt-22 round trip (parse+verify+print) is {(t_parse + t_print) / max(full - empty, 1e-6):.1f}x "
            "faster than Lamina parse+print."
        )
    lines.append("")
    lines.append(
        f"dense_resource weights: {res['mb']} MB blob ({res['text_mb']:.0f} MB of hex text): "
        f"print {res['mb'] / res['print_s']:.0f} MB/s ({res['print_s']:.2f} s), "
        f"parse {res['mb'] / res['parse_s']:.0f} MB/s ({res['parse_s']:.2f} s)."
    )
    lines.extend(["", *notes])
    table = "\n".join(lines)
    print(table)
    if args.write_results:
        write_results(
            table,
            " ".join(["python", "benchmarks/ir_parse_print.py", *(argv or sys.argv[1:])]).replace(
                " --write-results", ""
            ),
        )
    return 0


def write_results(table: str, command: str) -> None:
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "RESULTS.md")
    section = (
        f"{HEADING}\n\n"
        f"Command: `{command}`  \n"
        f"Machine: {machine()}  \n"
        f"Date: {datetime.date.today().isoformat()}\n\n"
        f"{table}\n"
    )
    text = "# Benchmark results\n"
    if os.path.exists(path):
        with open(path) as f:
            text = f.read()
    pat = re.compile(re.escape(HEADING) + r"\n.*?(?=\n## |\Z)", re.S)
    if pat.search(text):
        text = pat.sub(section.rstrip("\n"), text)
    else:
        text = text.rstrip("\n") + "\n\n" + section
    with open(path, "w") as f:
        f.write(text.rstrip("\n") + "\n")


if __name__ == "__main__":
    sys.exit(main())

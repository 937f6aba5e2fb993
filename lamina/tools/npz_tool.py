"""``npz_tool``: TPU-MLIR's tensor-file tool.

    npz_tool compare a.npz b.npz [--tolerance 0.99,0.99] [--excepts n1,n2] [--mask MASK.npz|NAME]
        [-v|-vv] [--html report.html]
    npz_tool dump a.npz [name ...]

``compare`` prints one line per tensor present in both files (in ``a``'s order) with its verdict
(EQUAL / CLOSE / SIMILAR pass; NOT_SIMILAR / MISMATCH fail) and metrics, then a summary line.
Exit status: 0 when every compared tensor passes, 1 when any fails or nothing could be compared,
2 for bad usage or unreadable files. ``--html`` writes a self-contained page (inline SVG, no scripts)
plotting cosine and euclidean similarity along the network, with the table. ``--mask`` (an
attention mask ``[batch, seq]``: an npz holding it, or the name of a tensor of ``a``, e.g. the
model input ``attention_mask`` in a dump) compares each tensor with an axis of the mask's sequence
length after its batch axis over the positions where the mask is nonzero (padded positions carry
meaningless values); the tool says the mask was applied and each such tensor's note says so.
"""

from __future__ import annotations

import argparse
import html
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lamina.compare import (
    CLOSE,
    MISMATCH,
    CompareReport,
    TensorResult,
    compare_sets,
    format_db,
    parse_tolerance,
)
from lamina.frontends.model_io import load_npz
from lamina.frontends.preprocess import parse_names
from lamina.support.errors import ToolError
from lamina.support.paths import check_outputs
from lamina.tools.common import atomic_write, internal_error_guard

TOOL = "npz_tool"


# ---- text report -------------------------------------------------------------------------------------


def _fmt(v: float | None, nd: int = 6) -> str:
    if v is None:
        return "-"
    if math.isinf(v) or math.isnan(v):
        return str(v)
    return f"{v:.{nd}f}"


def result_line(r: TensorResult, width: int) -> str:
    status = "PASSED" if r.passed else "FAILED"
    shape = "x".join(map(str, r.shape_a)) or "scalar"
    line = f"[{r.name:<{width}}] {r.verdict:>11} [{status}]  {shape} {r.dtype_a}"
    if r.verdict == CLOSE:
        line += f"  close order {r.close_order}"
    elif r.cosine is not None:
        line += f"  cosine {_fmt(r.cosine)}, euclidean {_fmt(r.euclid)}, sqnr {format_db(r.sqnr)}"
    if r.verdict == MISMATCH:
        line += f"  shape {list(r.shape_a)} vs {list(r.shape_b)}"
    if r.note and r.verdict != MISMATCH:
        line += f"  ({r.note})"
    return line


def print_report(report: CompareReport, verbose: int, out=None) -> None:
    out = out or sys.stdout
    for k in report.unknown_excepts:
        print(
            f"warning: --excepts '{k}' names no tensor of '{report.name_a}' or '{report.name_b}'",
            file=sys.stderr,
        )
    width = min(48, max((len(r.name) for r in report.results), default=8))
    for r in report.results:
        if verbose >= 1 or not r.passed:
            print(result_line(r, width), file=out)
            if verbose >= 2 and r.max_abs_diff is not None:
                print(f"    max |a-b| = {r.max_abs_diff:.6g}, dtypes {r.dtype_a} / {r.dtype_b}", file=out)
    if verbose >= 2:
        for k in report.only_a:
            print(f"  only in {report.name_a}: {k}", file=out)
        for k in report.only_b:
            print(f"  only in {report.name_b}: {k}", file=out)
        for k in report.excepted:
            print(f"  skipped (--excepts): {k}", file=out)
    print(report.summary(), file=out)
    if report.failed:
        names = ", ".join(r.name for r in report.failed[:20])
        more = f" and {len(report.failed) - 20} more" if len(report.failed) > 20 else ""
        print(f"npz compare FAILED: {names}{more}", file=out)
    elif not report.results:
        print("npz compare FAILED: the files have no tensor in common", file=out)
    else:
        print("npz compare PASSED", file=out)


# ---- HTML report -------------------------------------------------------------------------------------

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px;color:#222}
h1{font-size:20px;margin:0 0 4px} .meta{color:#555;font-size:13px;margin-bottom:16px}
.summary{padding:8px 12px;border-radius:6px;margin:12px 0;font-size:14px}
.ok{background:#e7f6ea;border:1px solid #8cc79a} .bad{background:#fdecea;border:1px solid #e0a19a}
table{border-collapse:collapse;font-size:12px;margin-top:16px} th,td{border:1px solid #ddd;padding:3px 8px}
th{background:#f4f4f4;text-align:left} td.n{text-align:right;font-variant-numeric:tabular-nums}
tr.fail td{background:#fdecea} .v-EQUAL,.v-CLOSE,.v-SIMILAR{color:#1b7f3b} .v-NOT_SIMILAR,.v-MISMATCH{color:#b3261e}
svg text{font-family:inherit}
"""


def _y(v: float, lo: float, top: float, h: float) -> float:
    v = min(1.0, max(lo, v))
    return top + (1.0 - v) / (1.0 - lo) * h


def render_svg(report: CompareReport, width: int = 960, height: int = 320) -> str:
    """An inline SVG line chart of cosine (blue) and euclidean (orange) similarity per tensor."""
    res = report.results
    n = len(res)
    left, right, top, bottom = 56, 16, 16, 48
    pw, ph = width - left - right, height - top - bottom
    sims = [r.similarity() for r in res]
    lows = [min(c, e) for c, e in sims] + [report.tolerance[0], report.tolerance[1]]
    lo = min(lows, default=0.9)
    lo = max(-1.0, min(0.9, math.floor((lo - 0.005) * 100) / 100))
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="per-layer similarity">',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="#fff" stroke="#ccc"/>',
    ]
    for i in range(5):
        v = lo + (1.0 - lo) * i / 4
        y = _y(v, lo, top, ph)
        parts.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" stroke="#eee"/>')
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{v:.3f}</text>')

    def xpos(i: int) -> float:
        return left + (pw / 2 if n <= 1 else pw * i / (n - 1))

    for tol, color in ((report.tolerance[0], "#1f77b4"), (report.tolerance[1], "#ff7f0e")):
        y = _y(tol, lo, top, ph)
        parts.append(
            f'<line class="tolerance" x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" '
            f'stroke="{color}" stroke-dasharray="4 3" stroke-opacity="0.6"/>'
        )
    for k, color, label in ((0, "#1f77b4", "cosine"), (1, "#ff7f0e", "euclidean")):
        pts = " ".join(f"{xpos(i):.1f},{_y(s[k], lo, top, ph):.1f}" for i, s in enumerate(sims))
        if n > 1:
            parts.append(
                f'<polyline class="{label}" fill="none" stroke="{color}" stroke-width="1.5" points="{pts}"/>'
            )
        for i, (s, r) in enumerate(zip(sims, res)):
            fill = color if r.passed else "#d62728"
            rad = 2.5 if r.passed else 4
            parts.append(
                f'<circle cx="{xpos(i):.1f}" cy="{_y(s[k], lo, top, ph):.1f}" r="{rad}" fill="{fill}">'
                f"<title>{html.escape(r.name)}: {label} {_fmt(s[k])} ({r.verdict})</title></circle>"
            )
    parts.append(
        f'<text x="{left + pw / 2}" y="{height - 12}" font-size="12" text-anchor="middle">'
        f"tensors in network order (1 … {n})</text>"
    )
    lx = left + 8
    for color, label in (("#1f77b4", "cosine"), ("#ff7f0e", "euclidean"), ("#d62728", "failed")):
        parts.append(f'<rect x="{lx}" y="{top + 6}" width="10" height="10" fill="{color}"/>')
        parts.append(f'<text x="{lx + 14}" y="{top + 15}" font-size="11">{label}</text>')
        lx += 90
    parts.append("</svg>")
    return "\n".join(parts)


def render_html(report: CompareReport, title: str = "Lamina tensor comparison") -> str:
    """A static, self-contained HTML page: summary, the similarity chart and the per-tensor table."""
    e = html.escape
    ok = report.passed
    rows = []
    for i, r in enumerate(report.results, 1):
        cos, euc = r.similarity()
        rows.append(
            f'<tr class="{"pass" if r.passed else "fail"}"><td class="n">{i}</td><td>{e(r.name)}</td>'
            f'<td class="v-{r.verdict}">{r.verdict}</td><td>{e("x".join(map(str, r.shape_a)) or "scalar")}</td>'
            f'<td>{e(r.dtype_a)}</td><td class="n">{_fmt(cos)}</td><td class="n">{_fmt(euc)}</td>'
            f'<td class="n">{e(format_db(r.sqnr))}</td><td class="n">{_fmt(r.max_abs_diff, 6) if r.max_abs_diff is not None else "-"}</td>'
            f"<td>{e(r.note)}</td></tr>"
        )
    extra = ""
    if report.only_a or report.only_b or report.excepted:
        extra = (
            f'<p class="meta">{len(report.only_a)} tensor(s) only in {e(report.name_a)}, '
            f"{len(report.only_b)} only in {e(report.name_b)}, {len(report.excepted)} skipped by --excepts.</p>"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n"
        f"<h1>{e(title)}</h1>\n"
        f'<div class="meta">{e(report.name_a)} vs {e(report.name_b)}</div>\n'
        f'<div class="summary {"ok" if ok else "bad"}">{"PASSED" if ok else "FAILED"}: {e(report.summary())}</div>\n'
        f"{extra}{render_svg(report)}\n"
        "<table>\n<thead><tr><th>#</th><th>tensor</th><th>verdict</th><th>shape</th><th>dtype</th>"
        "<th>cosine</th><th>euclidean</th><th>SQNR</th><th>max |a-b|</th><th>note</th></tr></thead>\n<tbody>\n"
        + "\n".join(rows)
        + "\n</tbody>\n</table>\n</body>\n</html>\n"
    )


# ---- commands -----------------------------------------------------------------------------------------


def compare_files(
    a: str,
    b: str,
    tolerance: tuple[float, float],
    excepts: Sequence[str] = (),
    mask: str | None = None,
    log: Any = None,
) -> CompareReport:
    """Compare two npz files; ``mask``: an npz holding the attention mask (its only array, or
    ``attention_mask``) or the name of a tensor of ``a`` — tensors with axes of the mask's sequence
    length are compared over the positions where it is nonzero."""
    xa, xb = load_npz(a, "npz file"), load_npz(b, "npz file")
    select = None
    if mask is not None:
        keep, where = _load_mask(mask, xa, a)
        select = _mask_select(keep)
        if log is not None:
            log(
                f"mask applied: {where} {list(keep.shape)}, {int(keep.sum())} of {keep.size} position(s) "
                "kept; tensors with an axis of its sequence length are compared over the kept positions"
            )
    return compare_sets(xa, xb, tolerance, excepts, name_a=a, name_b=b, select=select)


def _load_mask(mask: str, arrays: Mapping[str, np.ndarray], a: str) -> tuple[np.ndarray, str]:
    """The kept positions ``[B, S]`` (mask != 0) from ``--mask`` (an npz file or a tensor name of ``a``)."""
    import os

    if mask.endswith(".npz") or os.path.isfile(mask):
        m = load_npz(mask, "--mask file")
        if len(m) == 1:
            key = next(iter(m))
        elif "attention_mask" in m:
            key = "attention_mask"
        else:
            raise ToolError(
                f"--mask file '{mask}' holds {len(m)} arrays ({', '.join(list(m)[:6])}); "
                "give one array or one named 'attention_mask'"
            )
        arr, where = m[key], f"'{key}' of '{mask}'"
    elif mask in arrays:
        arr, where = arrays[mask], f"'{mask}' of '{a}'"
    else:
        raise ToolError(f"--mask '{mask}' is neither an npz file nor a tensor of '{a}'")
    arr = np.asarray(arr)
    if arr.ndim == 1:
        arr = arr[None]
    if arr.ndim != 2 or arr.dtype.kind not in "biuf":
        raise ToolError(f"--mask {where}: expected a [batch, seq] mask, got {list(arr.shape)} {arr.dtype}")
    return arr != 0, where


def _mask_select(keep: np.ndarray) -> Callable[[str, np.ndarray], np.ndarray | None]:
    from lamina.quant.masking import kept_flat, shape_spec

    def select(name: str, x: np.ndarray) -> np.ndarray | None:
        spec = shape_spec(x.shape, keep)
        if spec is None or keep.all() or not keep.any():
            return None
        return kept_flat(x, spec, keep)

    return select


def run_compare(args: argparse.Namespace) -> int:
    try:
        check_outputs([("input", args.a), ("input", args.b)], [("--html", args.html)])
    except ToolError as e:
        print(f"{TOOL}: error: {e}", file=sys.stderr)
        return 1
    try:
        tol = parse_tolerance(args.tolerance)
        report = compare_files(args.a, args.b, tol, parse_names(args.excepts), args.mask, print)
    except (ToolError, ValueError) as e:
        print(f"{TOOL}: error: {e}", file=sys.stderr)
        return 2
    print_report(report, args.verbose)
    if args.html:
        try:
            atomic_write(args.html, render_html(report))
        except OSError as e:
            print(f"{TOOL}: error: cannot write '{args.html}': {e.strerror or e}", file=sys.stderr)
            return 2
        print(f"wrote {args.html}")
    return 0 if report.passed else 1


def run_dump(args: argparse.Namespace) -> int:
    try:
        arrays = load_npz(args.file, "npz file")
    except ToolError as e:
        print(f"{TOOL}: error: {e}", file=sys.stderr)
        return 2
    names = args.names or list(arrays)
    for n in names:
        if n not in arrays:
            print(f"{TOOL}: error: '{args.file}' has no tensor '{n}'", file=sys.stderr)
            return 2
        a = arrays[n]
        stats = ""
        if a.size and a.dtype.kind in "biuf":
            f = a.astype(np.float64)
            stats = f"  min {f.min():.6g} max {f.max():.6g} mean {f.mean():.6g}"
        print(f"{n}: {list(a.shape)} {a.dtype}{stats}")
        if args.names:
            print(np.array2string(a, threshold=64))
    return 0


def build_parser(prog: str = TOOL) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Compare and inspect .npz tensor files (TPU-MLIR's npz_tool)."
    )
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compare", help="compare two npz files tensor by tensor")
    add_compare_arguments(c)
    d = sub.add_parser("dump", help="list the tensors of an npz file (and print the named ones)")
    d.add_argument("file")
    d.add_argument("names", nargs="*")
    return p


def add_compare_arguments(c: argparse.ArgumentParser) -> None:
    c.add_argument("a", help="first npz (the signal for SQNR; its order is the network order)")
    c.add_argument("b", help="second npz")
    c.add_argument(
        "--tolerance", default="0.99,0.99", help="minimum cosine,euclidean similarity (default 0.99,0.99)"
    )
    c.add_argument("--excepts", default="", help="comma-separated tensor names not to compare")
    c.add_argument(
        "--mask",
        default=None,
        metavar="MASK.npz|NAME",
        help="attention mask (an npz, or a tensor of the first file): tensors with an axis of its "
        "sequence length are compared over the positions where it is nonzero",
    )
    c.add_argument("-v", "--verbose", action="count", default=0, help="-v: every tensor; -vv: details")
    c.add_argument("--html", default=None, metavar="REPORT.html", help="write a static HTML report")


def main(argv: Sequence[str] | None = None) -> int:
    def body() -> int:
        args = build_parser().parse_args(argv)
        return run_compare(args) if args.cmd == "compare" else run_dump(args)

    return internal_error_guard(TOOL, body)


def compare_main(argv: Sequence[str] | None = None) -> int:
    """``lamina compare a.npz b.npz ...`` (npz_tool compare without the sub-command word)."""
    p = argparse.ArgumentParser(prog="lamina compare", description="Compare two npz files tensor by tensor.")
    add_compare_arguments(p)
    return internal_error_guard("lamina compare", lambda: run_compare(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

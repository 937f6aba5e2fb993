#!/usr/bin/env python
"""Conformance runner: the ONNX backend node suite through Lamina's importer and interpreter.

For every test directory of ``onnx/backend/test/data/node`` (shipped in the onnx==1.22.0 wheel):
import ``model.onnx`` into ``top``, run it with the reference interpreter on
``test_data_set_0/input_*.pb`` and compare with ``output_*.pb`` (rtol 1e-3, atol 1e-5, NaNs equal).

Each test is classified as

* ``passed``;
* ``unsupported``: the importer rejected an op type, an attribute value or a data type
  (sequence/optional/string tensors);
* ``failed``: with a category — ``import`` (import error other than unsupported), ``execute``
  (the interpreter raised), ``timeout``, ``shape``, ``dtype``, ``mismatch`` (values), ``outputs``
  (wrong number of outputs).

Usage::

    python benchmarks/onnx_node_suite.py [-k REGEX] [--limit N] [--timeout S] [--api]
        [--json report.json] [--md report.md] [-v]

``--api`` runs each test as a user would, through ``lamina.api.load(model).run(inputs)``.

Prints a summary by op; the JSON/markdown reports hold counts by op type and failure category and
each failing test with its message.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import re
import signal
import sys
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

RTOL, ATOL = 1e-3, 1e-5


def node_test_dir() -> str:
    import onnx

    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")


def list_tests(pattern: str | None = None) -> list[str]:
    d = node_test_dir()
    names = sorted(n for n in os.listdir(d) if os.path.isdir(os.path.join(d, n)))
    if pattern:
        rx = re.compile(pattern)
        names = [n for n in names if rx.search(n)]
    return names


@dataclass
class Result:
    test: str
    op: str
    status: str  # passed | failed | unsupported
    category: str = ""
    message: str = ""
    seconds: float = 0.0
    unsupported_ops: list[str] = field(default_factory=list)


class _Timeout(Exception):
    pass


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    if seconds <= 0 or not hasattr(signal, "SIGALRM"):
        yield
        return

    def handler(signum: int, frame: Any) -> None:
        raise _Timeout(f"exceeded {seconds:g} s")

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


_SCHEMA_KEYS: list[tuple[str, str]] | None = None


def op_of_test(name: str) -> str:
    """The ONNX op type a test is about (longest schema name matching the test name)."""
    global _SCHEMA_KEYS
    if _SCHEMA_KEYS is None:
        import onnx.defs

        names = {s.name for s in onnx.defs.get_all_schemas_with_history() if s.domain in ("", "ai.onnx")}
        _SCHEMA_KEYS = sorted(((n.lower(), n) for n in names), key=lambda kv: -len(kv[0]))
    key = name.removeprefix("test_").replace("_", "").lower()
    for low, orig in _SCHEMA_KEYS:
        if key.startswith(low):
            return orig
    return name.removeprefix("test_").split("_")[0]


def _load_tensor(path: str) -> np.ndarray:
    import onnx
    from onnx import numpy_helper

    t = onnx.TensorProto()
    with open(path, "rb") as f:
        t.ParseFromString(f.read())
    arr = numpy_helper.to_array(t)
    if arr.dtype.name in ("int4", "uint4"):
        arr = arr.astype(np.int8 if arr.dtype.name == "int4" else np.uint8)
    return arr


def _compare(expected: np.ndarray, got: Any) -> tuple[str, str] | None:
    if got is None:
        return "outputs", "output missing"
    got = np.asarray(got)
    if expected.shape != got.shape:
        return "shape", f"shape {got.shape} != expected {expected.shape}"
    ek, gk = expected.dtype, got.dtype
    if ek != gk:
        return "dtype", f"dtype {gk} != expected {ek}"
    if ek.kind in "biuUSO":
        if not np.array_equal(expected, got):
            n = int(np.sum(expected != got))
            return "mismatch", f"{n}/{expected.size} elements differ"
        return None
    e = expected.astype(np.float64)
    g = got.astype(np.float64)
    ok = np.isclose(g, e, rtol=RTOL, atol=ATOL, equal_nan=True)
    if not ok.all():
        bad = int((~ok).sum())
        err = np.nanmax(np.abs(np.where(ok, 0, g - e)))
        return "mismatch", f"{bad}/{e.size} elements differ (max abs err {err:.3g})"
    return None


def run_test(name: str, timeout: float = 30.0, via_api: bool = False) -> Result:
    """Run one test: through the importer and interpreter, or with ``via_api`` as a user would through
    the public API (``lamina.api.load(model).run(inputs)``, inputs exactly as ``numpy_helper`` gives
    them, int4 included)."""
    import onnx

    from lamina.execution import ExecutionError, Interpreter
    from lamina.frontends.onnx import OnnxImportError, import_onnx
    from lamina.ir.context import Context

    d = os.path.join(node_test_dir(), name)
    op = op_of_test(name) + ("_expanded" if "_expanded" in name else "")
    t0 = time.perf_counter()
    res = Result(name, op, "failed")
    try:
        with time_limit(timeout):
            model = onnx.load(os.path.join(d, "model.onnx"))
            init = {i.name for i in model.graph.initializer}
            real = [i for i in model.graph.input if i.name not in init]
            if any(not i.type.HasField("tensor_type") for i in list(real) + list(model.graph.output)):
                res.status, res.category, res.message = (
                    "unsupported",
                    "types",
                    "sequence/optional/map inputs or outputs",
                )
                return res
            if any(i.type.tensor_type.elem_type == 8 for i in list(real) + list(model.graph.output)):
                res.status, res.category, res.message = "unsupported", "types", "string tensors"
                return res
            if via_api:
                return _run_via_api(res, d)
            ctx = Context(handler=None)
            try:
                module = import_onnx(model, ctx, filename=os.path.join(name, "model.onnx"))
            except OnnxImportError as e:
                if e.kind == "unsupported":
                    res.status, res.category = "unsupported", "op"
                    res.unsupported_ops = sorted(e.unsupported)
                else:
                    res.category = "import"
                res.message = str(e)
                return res
            ds = os.path.join(d, "test_data_set_0")
            inputs = [
                _load_tensor(p) for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=_pb_index)
            ]
            expected = [
                _load_tensor(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=_pb_index)
            ]
            interp = Interpreter(module)
            with np.errstate(all="ignore"):
                outs = interp.run(inputs)
            _check_outputs(res, interp.output_names, [outs[n] for n in interp.output_names], expected)
    except _Timeout as e:
        res.category, res.message = "timeout", str(e)
    except ExecutionError as e:
        res.category, res.message = "execute", str(e)
    except Exception as e:  # a bug in Lamina: keep the tail of the traceback
        tb = traceback.extract_tb(e.__traceback__)[-1]
        res.category = "crash"
        res.message = f"{type(e).__name__}: {e} ({os.path.basename(tb.filename)}:{tb.lineno})"
    finally:
        res.seconds = time.perf_counter() - t0
    return res


def _run_via_api(res: Result, d: str) -> Result:
    import onnx
    from onnx import numpy_helper

    import lamina.api as lm

    try:
        model = lm.load(os.path.join(d, "model.onnx"))
    except lm.LaminaError as e:
        msg = str(e)
        unsupported = "unsupported" in msg or "not supported" in msg
        res.status, res.category = ("unsupported", "op") if unsupported else ("failed", "import")
        res.message = msg
        return res
    ds = os.path.join(d, "test_data_set_0")
    inputs = []
    for p in sorted(glob.glob(os.path.join(ds, "input_*.pb")), key=_pb_index):
        t = onnx.TensorProto()
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
        inputs.append(numpy_helper.to_array(t))
    expected = [_load_tensor(p) for p in sorted(glob.glob(os.path.join(ds, "output_*.pb")), key=_pb_index)]
    try:
        with np.errstate(all="ignore"):
            outs = model.run(inputs)
    except lm.LaminaError as e:
        res.category, res.message = "execute", str(e)
        return res
    return _check_outputs(res, model.output_names, [outs.get(n) for n in model.output_names], expected)


def _check_outputs(res: Result, names: list[str], got: list[Any], expected: list[Any]) -> Result:
    """``res`` passed when every output matches, else failed naming the first that does not."""
    if len(got) != len(expected):
        res.category, res.message = "outputs", f"{len(got)} outputs, expected {len(expected)}"
        return res
    for name, e, g in zip(names, expected, got):
        bad = _compare(e, g)
        if bad is not None:
            res.category, res.message = bad[0], f"output {name}: {bad[1]}"
            return res
    res.status = "passed"
    return res


def _pb_index(p: str) -> int:
    m = re.search(r"_(\d+)\.pb$", p)
    return int(m.group(1)) if m else 0


def run_suite(
    names: Iterable[str], timeout: float = 30.0, verbose: bool = False, via_api: bool = False
) -> list[Result]:
    out = []
    for n in names:
        r = run_test(n, timeout, via_api)
        out.append(r)
        if verbose:
            extra = (
                f" [{r.category}] {r.message.splitlines()[0] if r.message else ''}"
                if r.status != "passed"
                else ""
            )
            print(f"{r.status:11s} {n}{extra[:200]}", flush=True)
    return out


def summarize(results: list[Result]) -> dict[str, Any]:
    counts = Counter(r.status for r in results)
    by_op: dict[str, Counter] = defaultdict(Counter)
    cats: Counter = Counter()
    unsupported_ops: Counter = Counter()
    for r in results:
        by_op[r.op][r.status] += 1
        if r.status == "failed":
            cats[r.category] += 1
        for o in r.unsupported_ops:
            unsupported_ops[o] += 1
    return {
        "total": len(results),
        "passed": counts["passed"],
        "failed": counts["failed"],
        "unsupported": counts["unsupported"],
        "failure_categories": dict(cats.most_common()),
        "unsupported_op_types": dict(unsupported_ops.most_common()),
        "by_op": {k: dict(v) for k, v in sorted(by_op.items())},
        "seconds": round(sum(r.seconds for r in results), 2),
    }


def markdown(summary: dict[str, Any], results: list[Result]) -> str:
    lines = [
        "# ONNX backend node suite (onnx 1.22.0) through Lamina",
        "",
        f"**{summary['passed']} passed**, {summary['failed']} failed, {summary['unsupported']} unsupported "
        f"of {summary['total']} ({summary['seconds']} s).",
        "",
        "## Failure categories",
        "",
        *[f"- {k}: {v}" for k, v in summary["failure_categories"].items()],
        "",
        "## Unsupported op types (tests affected)",
        "",
        ", ".join(f"{k} ({v})" for k, v in summary["unsupported_op_types"].items()) or "none",
        "",
        "## By op",
        "",
        "| op | passed | failed | unsupported |",
        "|---|---|---|---|",
        *[
            f"| {k} | {v.get('passed', 0)} | {v.get('failed', 0)} | {v.get('unsupported', 0)} |"
            for k, v in summary["by_op"].items()
        ],
        "",
        "## Failures",
        "",
        *[
            f"- `{r.test}` [{r.category}] {r.message.splitlines()[0][:200] if r.message else ''}"
            for r in results
            if r.status == "failed"
        ],
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", "--filter", help="regex selecting test names")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--timeout", type=float, default=30.0, help="per-test time limit (s)")
    ap.add_argument("--json", help="write the JSON report here")
    ap.add_argument("--md", help="write the markdown report here")
    ap.add_argument("--floor", type=int, default=0, help="exit 1 if fewer tests pass")
    ap.add_argument("--api", action="store_true", help="run each test through lamina.api.load(...).run(...)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    names = list_tests(a.filter)
    if a.limit:
        names = names[: a.limit]
    results = run_suite(names, a.timeout, a.verbose, a.api)
    s = summarize(results)
    print(
        f"passed {s['passed']} / failed {s['failed']} / unsupported {s['unsupported']} of {s['total']} "
        f"in {s['seconds']} s"
    )
    print("failure categories:", ", ".join(f"{k}={v}" for k, v in s["failure_categories"].items()) or "none")
    top = list(s["unsupported_op_types"].items())[:25]
    print("top unsupported op types:", ", ".join(f"{k}({v})" for k, v in top) or "none")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": s, "results": [asdict(r) for r in results]}, f, indent=1)
    if a.md:
        with open(a.md, "w") as f:
            f.write(markdown(s, results))
    return 1 if s["passed"] < a.floor else 0


if __name__ == "__main__":
    sys.exit(main())

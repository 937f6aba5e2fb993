"""The profile format every target writes (``model_runner --model M.lamina --profile trace.json``).

A target's runtime or simulator records what it executed as :class:`CommandRecord`\\ s — engine,
name, group, start and end cycle, MACs, DDR bytes — and :func:`write_profile` turns them into two
files, written atomically:

* ``trace.json``: a Chrome trace (the JSON object format of Chrome's trace event format, which
  Perfetto and ``chrome://tracing`` open). One process for the model; one track (thread) per engine,
  in order of first use, with one complete event (``"ph": "X"``) per command, and above them a
  ``groups`` track with one event per layer group (or subnet) spanning its commands. Times are in
  microseconds (``ts``/``dur``) at the given clock; every event's ``args`` carry the exact cycles.
* ``trace.summary.json`` (beside it: ``.json`` becomes ``.summary.json``): :func:`summarize`'s numbers
  — ``total_cycles``, ``time_us``, ``mac_utilization`` (MACs / (peak MACs per cycle * total cycles)),
  ``ddr_bytes``, busy cycles per engine, and per group: its ops, commands, cycles, busy cycles per
  engine (``tiu``, ``gdma`` on an NPU), MACs and DDR bytes.

A CPU target uses the same records with a 1 GHz "clock" of nanoseconds and one engine per thread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lamina.support.fileio import atomic_write

__all__ = ["CommandRecord", "chrome_trace", "describe", "summarize", "summary_path", "write_profile"]

#: The process id of the model in the trace, and the thread id of the groups track.
PID = 1
GROUPS_TID = 0


@dataclass(frozen=True)
class CommandRecord:
    """One executed command: on ``engine`` (``tiu``, ``gdma``, ``cpu0``...), of layer group or subnet
    ``group``, from cycle ``start`` to ``end`` (exclusive); ``op`` names the layer it computes (empty
    for pure data movement), ``macs`` its multiply-accumulates, ``ddr_bytes`` what it moved to or from
    DDR."""

    engine: str
    name: str
    group: str
    start: int
    end: int
    op: str = ""
    macs: int = 0
    ddr_bytes: int = 0

    def __post_init__(self) -> None:
        if not self.engine or not self.group:
            raise ValueError(f"command {self.name!r}: engine and group must be non-empty")
        if not 0 <= self.start <= self.end:
            raise ValueError(
                f"command {self.name!r}: expected 0 <= start <= end, got {self.start}, {self.end}"
            )
        if self.macs < 0 or self.ddr_bytes < 0:
            raise ValueError(f"command {self.name!r}: negative MACs or DDR bytes")


def _busy(intervals: list[tuple[int, int]]) -> int:
    """Cycles covered by the union of ``[start, end)`` intervals."""
    total, cur_s, cur_e = 0, -1, -1
    for s, e in sorted(intervals):
        if s > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + cur_e - cur_s


def _ordered(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def summarize(
    records: Sequence[CommandRecord], clock_hz: float, peak_macs_per_cycle: float
) -> dict[str, Any]:
    """The summary of a run: totals over the records, then one entry per group in order of first
    appearance. Cycles count from 0 (the start of the inference) to the last command's end."""
    if clock_hz <= 0 or peak_macs_per_cycle < 0:
        raise ValueError(
            f"expected clock_hz > 0 and peak_macs_per_cycle >= 0, got {clock_hz}, {peak_macs_per_cycle}"
        )
    total = max((r.end for r in records), default=0)
    macs = sum(r.macs for r in records)
    engines = _ordered(r.engine for r in records)
    groups = []
    by_group: dict[str, list[CommandRecord]] = {}
    for r in records:
        by_group.setdefault(r.group, []).append(r)
    for g, rs in by_group.items():
        start, end = min(r.start for r in rs), max(r.end for r in rs)
        groups.append(
            {
                "name": g,
                "ops": _ordered(r.op for r in rs if r.op),
                "commands": len(rs),
                "start_cycle": start,
                "end_cycle": end,
                "cycles": end - start,
                "busy_cycles": {
                    e: _busy([(r.start, r.end) for r in rs if r.engine == e])
                    for e in engines
                    if any(r.engine == e for r in rs)
                },
                "macs": sum(r.macs for r in rs),
                "ddr_bytes": sum(r.ddr_bytes for r in rs),
            }
        )
    peak = peak_macs_per_cycle * total
    return {
        "total_cycles": total,
        "time_us": total / clock_hz * 1e6,
        "clock_hz": clock_hz,
        "macs": macs,
        "peak_macs_per_cycle": peak_macs_per_cycle,
        "mac_utilization": macs / peak if peak > 0 else 0.0,
        "ddr_bytes": sum(r.ddr_bytes for r in records),
        "commands": len(records),
        "busy_cycles": {e: _busy([(r.start, r.end) for r in records if r.engine == e]) for e in engines},
        "groups": groups,
    }


def chrome_trace(
    records: Sequence[CommandRecord], clock_hz: float, process_name: str = "lamina"
) -> dict[str, Any]:
    """The records as a Chrome trace (JSON object format): metadata events naming the process and
    one thread per engine, a ``groups`` track, and one ``X`` event per command."""
    if clock_hz <= 0:
        raise ValueError(f"expected clock_hz > 0, got {clock_hz}")
    us = 1e6 / clock_hz
    engines = _ordered(r.engine for r in records)
    tids = {e: i + 1 for i, e in enumerate(engines)}
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": PID, "tid": GROUPS_TID, "name": "process_name", "args": {"name": process_name}},
        {"ph": "M", "pid": PID, "tid": GROUPS_TID, "name": "thread_name", "args": {"name": "groups"}},
        {"ph": "M", "pid": PID, "tid": GROUPS_TID, "name": "thread_sort_index", "args": {"sort_index": 0}},
    ]
    for engine, tid in tids.items():
        events.append({"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": engine}})
        events.append(
            {"ph": "M", "pid": PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}}
        )
    spans: dict[str, list[int]] = {}
    for r in records:
        span = spans.setdefault(r.group, [r.start, r.end])
        span[0], span[1] = min(span[0], r.start), max(span[1], r.end)
    for g, (g_start, g_end) in spans.items():
        events.append(
            {
                "ph": "X",
                "pid": PID,
                "tid": GROUPS_TID,
                "name": g,
                "cat": "group",
                "ts": g_start * us,
                "dur": (g_end - g_start) * us,
                "args": {"start_cycle": g_start, "end_cycle": g_end},
            }
        )
    for r in records:
        args: dict[str, Any] = {"group": r.group, "start_cycle": r.start, "end_cycle": r.end}
        if r.op:
            args["op"] = r.op
        if r.macs:
            args["macs"] = r.macs
        if r.ddr_bytes:
            args["ddr_bytes"] = r.ddr_bytes
        events.append(
            {
                "ph": "X",
                "pid": PID,
                "tid": tids[r.engine],
                "name": r.name,
                "cat": r.group,
                "ts": r.start * us,
                "dur": (r.end - r.start) * us,
                "args": args,
            }
        )
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": {"clock_hz": clock_hz}}


def describe(summary: Mapping[str, Any]) -> str:
    """One line of a summary for a person: time, cycles, MAC utilization (and over the model's MACs
    counted once, where the target recomputes some), DDR traffic."""
    parts = [f"{float(summary['time_us']):.1f} us ({int(summary['total_cycles'])} cycles)"]
    if summary.get("macs"):
        util = f"MAC utilization {100 * float(summary['mac_utilization']):.1f} %"
        model = summary.get("model_mac_utilization")
        if model is not None and abs(float(model) - float(summary["mac_utilization"])) > 5e-4:
            util += f" ({100 * float(model):.1f} % of the model's MACs)"
        parts.append(util)
    if summary.get("ddr_bytes"):
        parts.append(f"DDR {int(summary['ddr_bytes']) / 1e6:.2f} MB")
    return ", ".join(parts)


def summary_path(trace_path: str) -> str:
    """Where the summary of ``trace_path`` goes: ``trace.json`` → ``trace.summary.json``."""
    root, ext = os.path.splitext(trace_path)
    return (root if ext == ".json" else trace_path) + ".summary.json"


def write_profile(
    trace_path: str,
    records: Sequence[CommandRecord],
    clock_hz: float,
    peak_macs_per_cycle: float,
    process_name: str = "lamina",
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Write the Chrome trace to ``trace_path`` and the summary beside it (:func:`summary_path`),
    each atomically; return the summary. ``extra`` (the chip, the model...) is added to the summary's
    top level and to the trace's ``otherData``."""
    summary = summarize(records, clock_hz, peak_macs_per_cycle)
    trace = chrome_trace(records, clock_hz, process_name)
    if extra:
        clash = sorted(set(extra) & set(summary))
        if clash:
            raise ValueError(f"extra profile fields clash with the summary's: {', '.join(clash)}")
        summary.update(extra)
        trace["otherData"].update(extra)
    atomic_write(trace_path, json.dumps(trace, separators=(",", ":"), allow_nan=False))
    atomic_write(summary_path(trace_path), json.dumps(summary, indent=1, allow_nan=False) + "\n")
    return summary

"""The profile format (lamina/targets/profile.py): the Chrome trace follows the trace event format
(every event has ``ph``/``pid``/``tid``/``name``, complete events ``ts``/``dur`` in microseconds) and
the summary's numbers add up (busy cycles as the union of a track's commands, utilization, DDR)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.targets.profile import (
    CommandRecord,
    chrome_trace,
    describe,
    summarize,
    summary_path,
    write_profile,
)

CLOCK = 1e9  # 1 GHz: one cycle is 1 ns


def records() -> list[CommandRecord]:
    return [
        CommandRecord("gdma", "load x", "group0", 0, 100, ddr_bytes=4096),
        CommandRecord("tiu", "conv", "group0", 100, 400, op="conv1", macs=64 * 300),
        CommandRecord("gdma", "load x+1", "group0", 120, 200, ddr_bytes=4096),
        CommandRecord("tiu", "relu", "group0", 400, 450, op="relu1"),
        CommandRecord("gdma", "store y", "group0", 450, 500, ddr_bytes=2048),
        CommandRecord("tiu", "add", "group1", 500, 600, op="add2", macs=0),
        CommandRecord("gdma", "store z", "group1", 600, 650, ddr_bytes=1024),
    ]


def test_summary() -> None:
    s = summarize(records(), CLOCK, peak_macs_per_cycle=64)
    assert s["total_cycles"] == 650 and s["time_us"] == pytest.approx(0.65)
    assert s["macs"] == 64 * 300 and s["mac_utilization"] == pytest.approx(300 / 650)
    assert s["ddr_bytes"] == 4096 * 2 + 2048 + 1024 and s["commands"] == 7
    assert s["busy_cycles"] == {"gdma": 100 + 80 + 50 + 50, "tiu": 300 + 50 + 100}
    g0, g1 = s["groups"]
    assert g0["name"] == "group0" and g0["ops"] == ["conv1", "relu1"] and g0["commands"] == 5
    assert (g0["start_cycle"], g0["end_cycle"], g0["cycles"]) == (0, 500, 500)
    assert g0["busy_cycles"] == {"gdma": 230, "tiu": 350} and g0["ddr_bytes"] == 10240
    assert g1["busy_cycles"] == {"tiu": 100, "gdma": 50} and g1["macs"] == 0
    empty = summarize([], CLOCK, 64)
    assert empty["total_cycles"] == 0 and empty["mac_utilization"] == 0.0 and empty["groups"] == []


def check_trace_event_format(trace: dict) -> None:
    """Chrome's trace event format (JSON object form), as Perfetto reads it."""
    assert isinstance(trace["traceEvents"], list)
    for ev in trace["traceEvents"]:
        assert ev["ph"] in ("X", "M"), ev
        assert isinstance(ev["pid"], int) and isinstance(ev["tid"], int) and isinstance(ev["name"], str)
        if ev["ph"] == "X":
            assert isinstance(ev["ts"], (int, float)) and ev["ts"] >= 0
            assert isinstance(ev["dur"], (int, float)) and ev["dur"] >= 0
            assert isinstance(ev.get("args", {}), dict)
        else:
            assert ev["name"] in ("process_name", "thread_name", "thread_sort_index") and "args" in ev


def test_chrome_trace() -> None:
    t = chrome_trace(records(), CLOCK, "net on lnpu")
    check_trace_event_format(t)
    meta = [e for e in t["traceEvents"] if e["ph"] == "M"]
    assert {"name": "net on lnpu"} in [e["args"] for e in meta if e["name"] == "process_name"]
    tracks = {e["args"]["name"]: e["tid"] for e in meta if e["name"] == "thread_name"}
    assert list(tracks) == ["groups", "gdma", "tiu"]  # groups first, then engines in order of use
    xs = [e for e in t["traceEvents"] if e["ph"] == "X"]
    groups = [e for e in xs if e["tid"] == tracks["groups"]]
    assert [(g["name"], g["ts"], g["dur"]) for g in groups] == [
        ("group0", 0.0, pytest.approx(0.5)),
        ("group1", pytest.approx(0.5), pytest.approx(0.15)),
    ]
    conv = next(e for e in xs if e["name"] == "conv")
    assert conv["tid"] == tracks["tiu"] and conv["cat"] == "group0"
    assert conv["ts"] == pytest.approx(0.1) and conv["dur"] == pytest.approx(0.3)
    assert conv["args"] == {
        "group": "group0",
        "start_cycle": 100,
        "end_cycle": 400,
        "op": "conv1",
        "macs": 19200,
    }
    assert len(xs) == 2 + len(records())


def test_write_profile(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    s = write_profile(str(trace), records(), CLOCK, 64, "net", extra={"chip": "lnpu"})
    assert summary_path(str(trace)) == str(tmp_path / "trace.summary.json")
    loaded = json.loads((tmp_path / "trace.summary.json").read_text())
    assert loaded == s and loaded["chip"] == "lnpu"
    for key in ("total_cycles", "time_us", "mac_utilization", "ddr_bytes", "groups"):
        assert key in loaded
    t = json.loads(trace.read_text())
    check_trace_event_format(t)
    assert t["otherData"] == {"clock_hz": CLOCK, "chip": "lnpu"}
    assert sorted(os.listdir(tmp_path)) == ["trace.json", "trace.summary.json"]  # no temporaries left
    assert summary_path("out/prof") == "out/prof.summary.json"
    with pytest.raises(ValueError, match="clash"):
        write_profile(str(trace), records(), CLOCK, 64, extra={"ddr_bytes": 1})


def test_bad_records() -> None:
    with pytest.raises(ValueError, match="start <= end"):
        CommandRecord("tiu", "conv", "g", 10, 5)
    with pytest.raises(ValueError, match="non-empty"):
        CommandRecord("", "conv", "g", 0, 5)
    with pytest.raises(ValueError, match="negative"):
        CommandRecord("tiu", "conv", "g", 0, 5, macs=-1)
    with pytest.raises(ValueError, match="clock_hz"):
        summarize(records(), 0, 64)


intervals = st.lists(
    st.tuples(
        st.sampled_from(["tiu", "gdma"]),
        st.sampled_from(["g0", "g1", "g2"]),
        st.integers(0, 200),
        st.integers(0, 50),
    ),
    max_size=30,
)


@settings(max_examples=100)
@given(spec=intervals)
def test_busy_cycles_are_the_union(spec: list[tuple[str, str, int, int]]) -> None:
    """Busy cycles per engine equal the number of cycles some command of that engine covers."""
    rs = [CommandRecord(e, f"c{i}", g, s, s + d, macs=d) for i, (e, g, s, d) in enumerate(spec)]
    summary = summarize(rs, CLOCK, 1)
    for engine, busy in summary["busy_cycles"].items():
        covered = {c for r in rs if r.engine == engine for c in range(r.start, r.end)}
        assert busy == len(covered)
    for g in summary["groups"]:
        for engine, busy in g["busy_cycles"].items():
            covered = {
                c for r in rs if r.engine == engine and r.group == g["name"] for c in range(r.start, r.end)
            }
            assert busy == len(covered) <= g["cycles"]
    assert summary["total_cycles"] == max((r.end for r in rs), default=0)
    check_trace_event_format(json.loads(json.dumps(chrome_trace(rs, CLOCK))))


def test_describe_says_the_numbers_once() -> None:
    s = {"time_us": 229.933, "total_cycles": 229933, "macs": 10, "mac_utilization": 0.5518,
         "model_mac_utilization": 0.4816, "ddr_bytes": 13228672}  # fmt: skip
    assert describe(s) == (
        "229.9 us (229933 cycles), MAC utilization 55.2 % (48.2 % of the model's MACs), DDR 13.23 MB"
    )
    # no MACs (a copy-only model), no DDR (a CPU target), the model's MACs the same: not said
    assert (
        describe({"time_us": 1.0, "total_cycles": 1000, "macs": 0, "mac_utilization": 0.0})
        == "1.0 us (1000 cycles)"
    )
    same = {**s, "model_mac_utilization": 0.5518, "ddr_bytes": 0}
    assert describe(same) == "229.9 us (229933 cycles), MAC utilization 55.2 %"

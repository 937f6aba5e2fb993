"""Chip descriptions (lamina/targets/npu/arch.py): the shipped chips carry the issue's figures, a
user's file loads, every bad field is one LaminaError naming the file and the key; LMEM layout math."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lamina.support.errors import LaminaError
from lamina.targets.npu.arch import DTYPES, TIU_KINDS, load_chip, shipped_chips


def test_shipped_chips() -> None:
    assert shipped_chips() == ("lnpu", "lnpu-edge")


def test_lnpu_figures() -> None:
    c = load_chip("lnpu")
    assert (c.lanes, c.lmem_bytes_per_lane, c.lmem_banks, c.eu_bytes) == (64, 256 * 1024, 16, 64)
    assert c.clock_hz == 10**9
    tops = lambda kind, dt: 2 * c.tiu_ops_per_cycle[kind][dt] * c.clock_hz / 1e12  # noqa: E731
    assert tops("conv", "int8") == pytest.approx(32, rel=0.05)
    assert tops("conv", "f16") == tops("conv", "bf16") == pytest.approx(16, rel=0.05)
    assert tops("conv", "f32") == pytest.approx(2, rel=0.05)
    assert c.gdma_ddr_bytes_per_cycle * c.clock_hz / 1e9 == 64
    assert c.peak_macs_per_cycle == 16384


def test_int16_rates() -> None:
    """``lnpu`` computes in int16 at half its int8 rates (the chip file's ``int16`` entries);
    ``lnpu-edge`` has no int16, and its 16-bit integers keep the int8 rule (the rate divided by
    the element size outside the MAC kinds)."""
    c, e = load_chip("lnpu"), load_chip("lnpu-edge")
    assert "int16" in c.dtypes and "int16" not in e.dtypes
    for kind in TIU_KINDS:
        assert c.tiu_rate(kind, "int16") * 2 == c.tiu_rate(kind, "int8"), kind
        assert c.tiu_rate(kind, "uint16") == c.tiu_rate(kind, "int16")
    assert e.tiu_rate("matmul", "int16") == e.tiu_rate("matmul", "int8")
    assert e.tiu_rate("lut", "int16") * 2 == e.tiu_rate("lut", "int8")
    assert (c.compute_dtype("int16"), c.compute_dtype("uint8"), c.compute_dtype("int32")) == (
        "int16",
        "int8",
        "int8",
    )
    assert c.compute_dtype("bf16") == "bf16"


def test_lnpu_edge_figures() -> None:
    c = load_chip("lnpu-edge")
    assert (c.lanes, c.lmem_bytes_per_lane) == (8, 64 * 1024)
    assert c.dtypes == ("int8", "bf16")
    with pytest.raises(LaminaError, match="does not compute in f32"):
        c.tiu_rate("conv", "f32")


def _data(name: str = "lnpu") -> dict:
    return json.loads((Path(__file__).parents[3] / f"lamina/targets/npu/chips/{name}.json").read_text())


def test_user_file(tmp_path: Path) -> None:
    d = _data()
    d["name"] = "mine"
    d["lanes"] = 32
    p = tmp_path / "mine.json"
    p.write_text(json.dumps(d))
    c = load_chip(str(p))
    assert (c.name, c.lanes) == ("mine", 32)
    assert load_chip(p) == c


BAD = [
    ("lanes", 0, "lanes"),
    ("lanes", "64", "lanes"),
    ("lanes", True, "lanes"),
    ("lmem_bytes_per_lane", -1, "lmem_bytes_per_lane"),
    ("lmem_banks", 7, "lmem_banks"),
    ("eu_bytes", 48, "eu_bytes"),
    ("eu_bytes", 32768, "eu_bytes"),
    ("clock_hz", 1.5e9, "clock_hz"),
    ("tiu_latency_cycles", -3, "tiu_latency_cycles"),
    ("gdma_latency_cycles", None, "gdma_latency_cycles"),
    ("gdma_ddr_bytes_per_cycle", 0, "gdma_ddr_bytes_per_cycle"),
    ("gdma_lmem_bytes_per_cycle", float("inf"), "gdma_lmem_bytes_per_cycle"),
    ("ddr_bytes", 0, "ddr_bytes"),
    ("name", "", "name"),
    ("description", 3, "description"),
    ("dtypes", [], "dtypes"),
    ("dtypes", ["int4"], "dtypes"),
    ("dtypes", ["int8", "int8"], "dtypes"),
    ("dtypes", ["int16", "f32"], "dtypes"),  # int16 forms are INT8 forms: int8 too
    ("tiu_ops_per_cycle", [], "tiu_ops_per_cycle"),
]


@pytest.mark.parametrize(("key", "value", "named"), BAD)
def test_bad_field(tmp_path: Path, key: str, value: object, named: str) -> None:
    d = _data()
    d[key] = value
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(d))
    with pytest.raises(LaminaError, match=rf"bad\.json: key '{named}'"):
        load_chip(str(p))


def _write(tmp_path: Path, d: object) -> str:
    p = tmp_path / "c.json"
    p.write_text(json.dumps(d))
    return str(p)


def test_missing_and_unknown_keys(tmp_path: Path) -> None:
    for key in _data():
        d = _data()
        del d[key]
        with pytest.raises(LaminaError, match=f"c.json: missing key '{key}'"):
            load_chip(_write(tmp_path, d))
    d = _data()
    d["lane"] = 3
    with pytest.raises(LaminaError, match="unknown key 'lane'"):
        load_chip(_write(tmp_path, d))


def test_bad_throughput_table(tmp_path: Path) -> None:
    for kind in TIU_KINDS:
        d = _data()
        del d["tiu_ops_per_cycle"][kind]
        with pytest.raises(LaminaError, match=f"'tiu_ops_per_cycle.{kind}'"):
            load_chip(_write(tmp_path, d))
    d = _data()
    del d["tiu_ops_per_cycle"]["conv"]["bf16"]
    with pytest.raises(LaminaError, match=re.escape("'tiu_ops_per_cycle.conv': expected one rate for each")):
        load_chip(_write(tmp_path, d))
    d = _data()
    d["tiu_ops_per_cycle"]["pool"]["f32"] = -1
    with pytest.raises(
        LaminaError, match=re.escape("'tiu_ops_per_cycle.pool.f32': expected a positive number")
    ):
        load_chip(_write(tmp_path, d))
    d = _data()
    d["tiu_ops_per_cycle"]["fft"] = {"int8": 1}
    with pytest.raises(LaminaError, match=re.escape("'tiu_ops_per_cycle.fft': unknown TIU kind")):
        load_chip(_write(tmp_path, d))


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(LaminaError, match=re.escape("nope.json: no such chip file, and not a shipped chip")):
        load_chip(str(tmp_path / "nope.json"))
    with pytest.raises(LaminaError, match="no such chip file"):
        load_chip("lnpu-ultra")
    p = tmp_path / "c.json"
    p.write_text('{"name": "x",\n  "lanes": }')
    with pytest.raises(LaminaError, match=r"c\.json:2:\d+: invalid JSON"):
        load_chip(str(p))
    p.write_text("[1, 2]")
    with pytest.raises(LaminaError, match="expected a JSON object"):
        load_chip(str(p))
    p.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(LaminaError, match="cannot read chip file"):
        load_chip(str(p))


def test_layout_examples() -> None:
    c = load_chip("lnpu")
    assert c.channels_per_lane(64) == 1
    assert c.channels_per_lane(65) == 2
    assert c.channels_per_lane(64, lane=1) == 2
    assert c.plane_bytes(3, 3, "int8") == 64  # 9 bytes rounded up to the EU width
    assert c.plane_bytes(8, 8, "f32") == 256
    assert c.lmem_strides(2, 130, 5, 5, "int8") == (3 * 64, 64, 5, 1)
    assert c.tensor_bytes_per_lane(2, 130, 5, 5, "int8") == 2 * 3 * 64
    assert c.tensor_bytes_per_lane(1, 64, 56, 56, "bf16") == 56 * 56 * 2
    assert c.bank_bytes == 16384
    assert c.bank_of(0) == 0 and c.bank_of(16383) == 0 and c.bank_of(16384) == 1
    assert list(c.banks_of(16000, 1000)) == [0, 1]
    with pytest.raises(LaminaError, match="LMEM address"):
        c.bank_of(c.lmem_bytes_per_lane)


@given(
    n=st.integers(1, 4),
    c=st.integers(1, 300),
    h=st.integers(1, 40),
    w=st.integers(1, 40),
    dtype=st.sampled_from(sorted(DTYPES)),
    lane=st.integers(0, 63),
)
def test_layout_properties(n: int, c: int, h: int, w: int, dtype: str, lane: int) -> None:
    chip = load_chip("lnpu")
    isz = DTYPES[dtype].itemsize
    plane = chip.plane_bytes(h, w, dtype)
    assert plane % chip.eu_bytes == 0 and h * w * isz <= plane < h * w * isz + chip.eu_bytes
    groups = chip.channels_per_lane(c, lane)
    assert (groups - 1) * chip.lanes < lane + c <= groups * chip.lanes
    sn, sc, sh, sw = chip.lmem_strides(n, c, h, w, dtype, lane)
    # The last element of the tensor in a lane ends exactly at its per-lane size, minus plane padding.
    last = ((n - 1) * sn + (groups - 1) * sc + (h - 1) * sh + (w - 1) * sw + 1) * isz
    size = chip.tensor_bytes_per_lane(n, c, h, w, dtype, lane)
    assert size - plane < last <= size

"""Chip descriptions of the virtual NPU, as data, and the local-memory (LMEM) layout they imply.

A chip is a JSON file (shipped ones in ``chips/``: ``lnpu``, ``lnpu-edge``; a user's with
``--chip_config FILE``) read into a frozen :class:`Chip` by :func:`load_chip`, which checks every
field and names the file and the key of the first bad one. The fields are documented in
``docs/npu-isa.md`` ("Chips").

**LMEM layout.** LMEM is ``lanes`` memories of ``lmem_bytes_per_lane`` bytes each, split into
``lmem_banks`` equal banks. An ``(n, c, h, w)`` tensor puts channel ``c`` on lane ``c % lanes`` (from
a start lane, see :class:`lamina.targets.npu.isa.Tensor`), so each lane holds ``ceil(C / lanes)``
channels; within a lane a tensor is ``n`` batches of those channels, each channel an ``h * w``
plane whose size is rounded up to the EU width (``eu_bytes``), so every plane starts on an EU
boundary. The helpers here compute that layout's strides and sizes; the simulator's views
(``simulator.py``) read and write tensors through them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any

import ml_dtypes
import numpy as np

from lamina.support.errors import LaminaError

__all__ = [
    "COMPUTE_DTYPES",
    "DTYPES",
    "TIU_KINDS",
    "Chip",
    "load_chip",
    "shipped_chips",
]

#: Storage dtypes of NPU tensors: name → numpy dtype (``bf16`` is ml_dtypes' bfloat16).
DTYPES: Mapping[str, np.dtype] = MappingProxyType(
    {
        "int8": np.dtype(np.int8),
        "uint8": np.dtype(np.uint8),
        "int16": np.dtype(np.int16),
        "uint16": np.dtype(np.uint16),
        "int32": np.dtype(np.int32),
        "uint32": np.dtype(np.uint32),
        "f16": np.dtype(np.float16),
        "bf16": np.dtype(ml_dtypes.bfloat16),
        "f32": np.dtype(np.float32),
    }
)

#: Compute dtypes a chip may support; the TIU throughput table is keyed by them. ``int16`` (16-bit
#: integer operands: the int16 integer forms — ``docs/tpu.md`` "Optional integer forms" — and
#: their 65536-entry tables) needs ``int8``; a chip without it computes no int16 form, and the
#: integer tensors it has of other widths compute at the ``int8`` rate (element-wise kinds divided
#: by the element size in bytes).
COMPUTE_DTYPES = ("int8", "int16", "f16", "bf16", "f32")

#: TIU command kinds, each with its own throughput (``docs/npu-isa.md``).
TIU_KINDS = ("conv", "depthwise", "matmul", "elementwise", "pool", "lut", "cast", "permute", "reduce")

#: Kinds whose work is counted in multiply-accumulates (the MAC utilization's numerator).
MAC_KINDS = frozenset({"conv", "depthwise", "matmul"})

_CHIP_DIR = "chips"


@dataclass(frozen=True)
class Chip:
    """One NPU: its lanes and LMEM, its engines' speeds and its DDR (see ``docs/npu-isa.md``).

    ``tiu_ops_per_cycle[kind][dtype]`` is the TIU's throughput for a command kind in a compute dtype
    (MACs per cycle for conv, depthwise and matmul; element operations per cycle for the others).
    """

    name: str
    description: str
    lanes: int
    lmem_bytes_per_lane: int
    lmem_banks: int
    eu_bytes: int
    clock_hz: int
    dtypes: tuple[str, ...]
    tiu_ops_per_cycle: Mapping[str, Mapping[str, float]]
    tiu_latency_cycles: int
    gdma_ddr_bytes_per_cycle: float
    gdma_lmem_bytes_per_cycle: float
    gdma_latency_cycles: int
    ddr_bytes: int
    ddr_burst_bytes: int = 64

    # -- LMEM layout ----------------------------------------------------------------------------------

    @property
    def bank_bytes(self) -> int:
        """Bytes of one LMEM bank (in each lane)."""
        return self.lmem_bytes_per_lane // self.lmem_banks

    @property
    def lmem_bytes(self) -> int:
        """Bytes of LMEM over all lanes."""
        return self.lanes * self.lmem_bytes_per_lane

    def channels_per_lane(self, c: int, lane: int = 0) -> int:
        """Channel groups a ``c``-channel tensor starting at ``lane`` occupies: ``ceil((lane + c) /
        lanes)`` (each lane holds at most that many of its channels)."""
        return -(-(lane + c) // self.lanes)

    def plane_bytes(self, h: int, w: int, dtype: str) -> int:
        """Bytes of one channel's ``h * w`` plane in a lane, rounded up to the EU width."""
        return _align(h * w * DTYPES[dtype].itemsize, self.eu_bytes)

    def lmem_strides(self, n: int, c: int, h: int, w: int, dtype: str, lane: int = 0) -> tuple[int, ...]:
        """Element strides ``(n, c, h, w)`` of a tensor in the aligned LMEM layout (the ``c`` stride is
        between channels ``k`` and ``k + lanes``, which share a lane)."""
        plane = self.plane_bytes(h, w, dtype) // DTYPES[dtype].itemsize
        return (self.channels_per_lane(c, lane) * plane, plane, w, 1)

    def tensor_bytes_per_lane(self, n: int, c: int, h: int, w: int, dtype: str, lane: int = 0) -> int:
        """Bytes per lane an ``(n, c, h, w)`` tensor takes in the aligned LMEM layout."""
        return n * self.channels_per_lane(c, lane) * self.plane_bytes(h, w, dtype)

    def bank_of(self, addr: int) -> int:
        """The bank of an LMEM address (a byte offset within a lane)."""
        if not 0 <= addr < self.lmem_bytes_per_lane:
            raise LaminaError(
                f"chip {self.name}: LMEM address {addr} outside 0..{self.lmem_bytes_per_lane - 1}"
            )
        return addr // self.bank_bytes

    def banks_of(self, addr: int, size: int) -> range:
        """The banks the bytes ``[addr, addr + size)`` of a lane touch (``size >= 1``)."""
        return range(self.bank_of(addr), self.bank_of(addr + max(size, 1) - 1) + 1)

    # -- speeds ---------------------------------------------------------------------------------------

    def tiu_rate(self, kind: str, dtype: str) -> float:
        """Ops per cycle of TIU command ``kind`` computing in storage dtype ``dtype``.

        16-bit integers use the ``int16`` entry where the chip computes in ``int16``; other integer
        dtypes (and 16-bit ones on a chip without ``int16``) the ``int8`` entry, which for kinds
        other than conv/depthwise/matmul (whose operands are then 8-bit) a wider integer divides by
        its size in bytes.
        """
        dt = DTYPES.get(dtype)
        if dt is None or kind not in self.tiu_ops_per_cycle:
            raise LaminaError(f"chip {self.name}: no TIU rate for {kind!r} in {dtype!r}")
        row = self.tiu_ops_per_cycle[kind]
        if dt.kind in "iu" and dt.itemsize == 2 and "int16" in row:
            return row["int16"]
        key = "int8" if dt.kind in "iu" else dtype
        rate = row.get(key)
        if rate is None:
            raise LaminaError(
                f"chip {self.name} does not compute in {dtype} (it supports {', '.join(self.dtypes)})"
            )
        if dt.kind in "iu" and kind not in MAC_KINDS:
            rate /= dt.itemsize
        return rate

    def compute_dtype(self, dtype: str) -> str:
        """The compute dtype (:data:`COMPUTE_DTYPES`) a tensor of storage dtype ``dtype`` needs the
        chip to have: 16-bit integers ``int16``, other integers ``int8``, floats themselves."""
        dt = DTYPES[dtype]
        if dt.kind in "iu":
            return "int16" if dt.itemsize == 2 else "int8"
        return dtype

    def tiu_cycles(self, kind: str, dtype: str, ops: int) -> int:
        """Cycles of one TIU command doing ``ops`` operations: startup latency + ops / throughput."""
        return self.tiu_latency_cycles + math.ceil(ops / self.tiu_rate(kind, dtype))

    def gdma_cycles(self, nbytes: int, ddr: bool) -> int:
        """Cycles of one GDMA move of ``nbytes``: latency + bytes / bandwidth (DDR's when either side
        is in DDR, LMEM-to-LMEM's otherwise)."""
        return self.gdma_latency_cycles + self.gdma_transfer_cycles(nbytes, ddr)

    def gdma_transfer_cycles(self, nbytes: int, ddr: bool) -> int:
        """Cycles the GDMA engine is busy moving ``nbytes`` (at least one): bytes / bandwidth. Moves
        are pipelined: the engine starts the next one when this transfer ends; each completes
        ``gdma_latency_cycles`` after it was issued plus its transfer."""
        bw = self.gdma_ddr_bytes_per_cycle if ddr else self.gdma_lmem_bytes_per_cycle
        return max(1, math.ceil(nbytes / bw))

    @property
    def peak_macs_per_cycle(self) -> float:
        """The best MAC rate of the chip (INT8 conv when supported): the MAC utilization's peak."""
        return max(self.tiu_ops_per_cycle["conv"].values())


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


# -- loading --------------------------------------------------------------------------------------------

_INT_FIELDS = (
    "lanes",
    "lmem_bytes_per_lane",
    "lmem_banks",
    "eu_bytes",
    "clock_hz",
    "tiu_latency_cycles",
    "gdma_latency_cycles",
    "ddr_bytes",
)
_FLOAT_FIELDS = ("gdma_ddr_bytes_per_cycle", "gdma_lmem_bytes_per_cycle")
#: keys a chip file may leave out (their defaults)
_OPTIONAL_FIELDS = {"ddr_burst_bytes": 64}
_FIELDS = (
    "name",
    "description",
    "dtypes",
    "tiu_ops_per_cycle",
    *_INT_FIELDS,
    *_FLOAT_FIELDS,
    *_OPTIONAL_FIELDS,
)


def shipped_chips() -> tuple[str, ...]:
    """Names of the chips shipped with Lamina (``lamina/targets/npu/chips/*.json``)."""
    folder = resources.files(__package__).joinpath(_CHIP_DIR)
    return tuple(sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json")))


def load_chip(name_or_path: str | Path) -> Chip:
    """The chip of a shipped name (``lnpu``, ``lnpu-edge``) or of a user's JSON file.

    Raises :class:`LaminaError` naming the file and the key on anything wrong: unreadable file,
    bad JSON, a missing, unknown or ill-typed key, inconsistent LMEM geometry, a throughput table
    that misses a kind or a supported dtype.
    """
    text_name = str(name_or_path)
    if isinstance(name_or_path, str) and name_or_path in shipped_chips():
        res = resources.files(__package__).joinpath(_CHIP_DIR).joinpath(f"{name_or_path}.json")
        return _parse(res.read_text(encoding="utf-8"), f"<shipped chip {name_or_path}>")
    path = Path(name_or_path)
    if not path.is_file():
        raise LaminaError(
            f"{text_name}: no such chip file, and not a shipped chip ({', '.join(shipped_chips())})"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LaminaError(f"{text_name}: cannot read chip file: {e}") from None
    return _parse(text, text_name)


def _parse(text: str, where: str) -> Chip:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise LaminaError(f"{where}:{e.lineno}:{e.colno}: invalid JSON: {e.msg}") from None
    if not isinstance(data, dict):
        raise LaminaError(f"{where}: expected a JSON object of chip fields")

    def bad(key: str, expected: str) -> LaminaError:
        return LaminaError(f"{where}: key {key!r}: expected {expected}, got {data.get(key)!r}")

    for key in _FIELDS:
        if key not in data and key not in _OPTIONAL_FIELDS:
            raise LaminaError(f"{where}: missing key {key!r}")
    data = {**_OPTIONAL_FIELDS, **data}
    burst = data["ddr_burst_bytes"]
    if not isinstance(burst, int) or isinstance(burst, bool) or burst < 1 or burst & (burst - 1):
        raise LaminaError(f"{where}: key 'ddr_burst_bytes': expected a power of two, got {burst!r}")
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise LaminaError(f"{where}: unknown key {unknown[0]!r} (expected: {', '.join(_FIELDS)})")
    for key in ("name", "description"):
        if not isinstance(data[key], str) or (key == "name" and not data[key].strip()):
            raise bad(key, "a non-empty string" if key == "name" else "a string")
    for key in _INT_FIELDS:
        v = data[key]
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if "latency" in key else 1):
            raise bad(key, "a non-negative integer" if "latency" in key else "a positive integer")
    for key in _FLOAT_FIELDS:
        if not _positive_number(data[key]):
            raise bad(key, "a positive number")
    if data["eu_bytes"] & (data["eu_bytes"] - 1):
        raise bad("eu_bytes", "a power of two")
    if data["lmem_bytes_per_lane"] % data["lmem_banks"]:
        raise bad("lmem_banks", f"a divisor of lmem_bytes_per_lane ({data['lmem_bytes_per_lane']})")
    if (data["lmem_bytes_per_lane"] // data["lmem_banks"]) % data["eu_bytes"]:
        raise bad("eu_bytes", "a divisor of the bank size (lmem_bytes_per_lane / lmem_banks)")
    dtypes = data["dtypes"]
    if (
        not isinstance(dtypes, list)
        or not dtypes
        or any(d not in COMPUTE_DTYPES for d in dtypes)
        or len(set(dtypes)) != len(dtypes)
    ):
        raise bad("dtypes", f"a non-empty list of distinct dtypes among {', '.join(COMPUTE_DTYPES)}")
    if "int16" in dtypes and "int8" not in dtypes:
        raise bad("dtypes", "int8 with int16 (the int16 forms are integer forms of INT8 models)")
    table = data["tiu_ops_per_cycle"]
    if not isinstance(table, dict):
        raise bad("tiu_ops_per_cycle", "an object {kind: {dtype: ops per cycle}}")
    frozen: dict[str, Mapping[str, float]] = {}
    for kind in TIU_KINDS:
        key = f"tiu_ops_per_cycle.{kind}"
        row = table.get(kind)
        if not isinstance(row, dict):
            raise LaminaError(f"{where}: key {key!r}: expected an object {{dtype: ops per cycle}}")
        if set(row) != set(dtypes):
            raise LaminaError(
                f"{where}: key {key!r}: expected one rate for each of the chip's dtypes "
                f"({', '.join(dtypes)}), got {', '.join(row) or 'none'}"
            )
        for dt, rate in row.items():
            if not _positive_number(rate):
                raise LaminaError(f"{where}: key '{key}.{dt}': expected a positive number, got {rate!r}")
        frozen[kind] = MappingProxyType({dt: float(row[dt]) for dt in dtypes})
    extra = sorted(set(table) - set(TIU_KINDS))
    if extra:
        raise LaminaError(
            f"{where}: key 'tiu_ops_per_cycle.{extra[0]}': unknown TIU kind (expected: {', '.join(TIU_KINDS)})"
        )
    fields: dict[str, Any] = {k: data[k] for k in (*_INT_FIELDS, *_OPTIONAL_FIELDS)}
    fields.update({k: float(data[k]) for k in _FLOAT_FIELDS})
    return Chip(
        name=data["name"],
        description=data["description"],
        dtypes=tuple(dtypes),
        tiu_ops_per_cycle=MappingProxyType(frozen),
        **fields,
    )


def _positive_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0

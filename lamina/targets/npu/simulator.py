"""The virtual NPU simulator: machine state, tensor views, GDMA execution, TIU dispatch and the
cycle model.

* :class:`Machine` — LMEM as a ``(lanes, lmem_bytes_per_lane)`` uint8 array and DDR as a flat uint8
  array; :meth:`Machine.read` / :meth:`Machine.write` move a :class:`~lamina.targets.npu.isa.Tensor`
  between those bytes and a logical NCHW numpy array with one strided view and one fancy index over
  the channel → (lane, group) map (never a Python loop per element or per lane).
* :class:`TiuTable` — what each TIU command class computes: ``register(cls, execute, work)``;
  ``execute(cmd, inputs)`` gets the command and its input operands as NCHW arrays (by field name)
  and returns the output array; ``work(cmd)`` its operation count (MACs for conv, depthwise and
  matmul). :data:`TIU_TABLE` is the default table, holding every TIU command class's kernel
  (:mod:`~lamina.targets.npu.kernels`, computing through ``tiu.py``).
* :func:`run` — executes a command list on a machine. The TIU and the GDMA each run their own
  commands in order, in parallel: a command starts when its engine is free and, if it waits, when
  the other engine's command of that id has finished; it lasts the chip's cycles for it (TIU:
  latency + ops / throughput; GDMA: latency + bytes / bandwidth). Commands take effect in order of
  their start cycle (ties: the earlier in the list), which any correctly synchronized program makes
  equivalent to the hardware. Each command's start and end are returned as :class:`CommandRecord`\\ s
  (the profile's input).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from lamina.support.errors import LaminaError

from .arch import DTYPES, MAC_KINDS, Chip
from .isa import PARAMETER_FIELDS, Command, Engine, GdmaCommand, Move, Space, Tensor, TiuCommand
from .kernels import KERNELS

__all__ = [
    "TIU_TABLE",
    "CommandRecord",
    "Machine",
    "RunResult",
    "TiuKernel",
    "TiuTable",
    "register_tiu",
    "run",
]


class Machine:
    """The NPU's memories. ``ddr_bytes`` (default: the chip's) sizes DDR; numpy allocates it lazily,
    so only the pages a program touches cost memory."""

    def __init__(self, chip: Chip, ddr_bytes: int | None = None) -> None:
        size = chip.ddr_bytes if ddr_bytes is None else ddr_bytes
        if not 0 < size <= chip.ddr_bytes:
            raise LaminaError(f"chip {chip.name}: DDR of {size} bytes (the chip has {chip.ddr_bytes})")
        self.chip = chip
        self.lmem = np.zeros((chip.lanes, chip.lmem_bytes_per_lane), np.uint8)
        self.ddr = np.zeros(size, np.uint8)

    # -- views ----------------------------------------------------------------------------------------

    def _check(self, t: Tensor, extent: int, limit: int, what: str) -> None:
        itemsize = DTYPES[t.dtype].itemsize
        if t.addr % itemsize:
            raise LaminaError(f"{what} address {t.addr} is not aligned to its {t.dtype} elements")
        if t.addr + extent > limit:
            raise LaminaError(
                f"{what} tensor {t.shape} {t.dtype} at {t.addr} ends at byte {t.addr + extent}, past the "
                f"{limit} bytes of {what}"
            )

    def _ddr_view(self, t: Tensor) -> np.ndarray:
        isz = DTYPES[t.dtype].itemsize
        extent = (sum(s * (d - 1) for s, d in zip(t.strides, t.shape)) + 1) * isz
        self._check(t, extent, self.ddr.size, "DDR")
        return np.ndarray(
            t.shape, DTYPES[t.dtype], buffer=self.ddr, offset=t.addr, strides=[s * isz for s in t.strides]
        )

    def _lmem_view(self, t: Tensor) -> np.ndarray:
        """A ``(lanes, N, groups, H, W)`` view of the tensor's bytes in every lane: channel ``ci`` is
        lane ``(t.lane + ci) % lanes`` of group ``(t.lane + ci) // lanes``."""
        chip = self.chip
        if t.lane >= chip.lanes:
            raise LaminaError(f"LMEM tensor starts at lane {t.lane}; the chip has {chip.lanes}")
        n, c, h, w = t.shape
        sn, sc, sh, sw = t.strides
        groups = chip.channels_per_lane(c, t.lane)
        isz = DTYPES[t.dtype].itemsize
        self._check(t, lmem_extent(chip, t), chip.lmem_bytes_per_lane, "LMEM")
        return np.ndarray(
            (chip.lanes, n, groups, h, w),
            DTYPES[t.dtype],
            buffer=self.lmem,
            offset=t.addr,
            strides=(chip.lmem_bytes_per_lane, sn * isz, sc * isz, sh * isz, sw * isz),
        )

    def _runs(self, t: Tensor) -> list[tuple[int, int, int, int]]:
        """The tensor's channels group by group: ``(group, first lane, last lane + 1, first
        channel)`` — each a run of lanes one strided copy moves."""
        lanes, c = self.chip.lanes, t.shape[1]
        out, ci = [], 0
        while ci < c:
            slot = t.lane + ci
            lo = slot % lanes
            hi = min(lanes, lo + c - ci)
            out.append((slot // lanes, lo, hi, ci))
            ci += hi - lo
        return out

    def read(self, t: Tensor) -> np.ndarray:
        """A copy of tensor ``t`` as an ``(n, c, h, w)`` array of its dtype."""
        if t.space is Space.DDR:
            return self._ddr_view(t).copy()
        view = self._lmem_view(t)
        out = np.empty(t.shape, DTYPES[t.dtype])
        for g, lo, hi, ci in self._runs(t):
            out[:, ci : ci + hi - lo] = view[lo:hi, :, g].transpose(1, 0, 2, 3)
        return out

    def write(self, t: Tensor, value: np.ndarray) -> None:
        """Store ``value`` (exactly ``t``'s shape and dtype) into tensor ``t``'s elements."""
        dt = DTYPES[t.dtype]
        if value.shape != t.shape or value.dtype != dt:
            raise LaminaError(
                f"cannot store a {value.shape} {value.dtype} array into a {t.shape} {t.dtype} tensor"
            )
        if t.space is Space.DDR:
            self._ddr_view(t)[...] = value
            return
        view = self._lmem_view(t)
        for g, lo, hi, ci in self._runs(t):
            view[lo:hi, :, g] = value[:, ci : ci + hi - lo].transpose(1, 0, 2, 3)


def lmem_extent(chip: Chip, t: Tensor) -> int:
    """Bytes from an LMEM tensor's address to the end of its last element, in any of its lanes."""
    n, c, h, w = t.shape
    sn, sc, sh, sw = t.strides
    groups = chip.channels_per_lane(c, t.lane)
    return (sn * (n - 1) + sc * (groups - 1) + sh * (h - 1) + sw * (w - 1) + 1) * DTYPES[t.dtype].itemsize


def bank_conflict(chip: Chip, cmd: TiuCommand) -> bool:
    """Whether two distinct streamed LMEM operands of a TIU command (its data inputs and its output)
    share a bank: a bank serves one access per cycle, so the command then runs its operations at
    half rate. An operand given twice (``a + a``, an in-place output) is one access stream, not a
    conflict; per-channel parameters (bias, requantization factors) and LUT tables
    (:data:`PARAMETER_FIELDS`) are read once per channel into the lane and never conflict."""
    spans = [
        chip.banks_of(t.addr, lmem_extent(chip, t))
        for t in dict.fromkeys(
            t for n, t in cmd.tensors().items() if t.space is Space.LMEM and n not in PARAMETER_FIELDS
        )
    ]
    return any(a.start < b.stop and b.start < a.stop for i, a in enumerate(spans) for b in spans[i + 1 :])


# -- TIU dispatch ------------------------------------------------------------------------------------------

TiuExecute = Callable[[TiuCommand, Mapping[str, np.ndarray]], np.ndarray]
TiuWork = Callable[[TiuCommand], int]


@dataclass(frozen=True)
class TiuKernel:
    """What a TIU command class computes (``execute``) and how much work it counts (``work``)."""

    execute: TiuExecute
    work: TiuWork


def _output_elements(cmd: TiuCommand) -> int:
    return cmd.output.elements


class TiuTable:
    """TIU command class → :class:`TiuKernel`."""

    def __init__(self) -> None:
        self._kernels: dict[type[TiuCommand], TiuKernel] = {}

    def register(
        self,
        cls: type[TiuCommand],
        execute: TiuExecute,
        work: TiuWork | None = None,
        *,
        replace: bool = False,
    ) -> None:
        """Make ``execute`` compute ``cls``'s commands; ``work`` (default: output elements) counts
        their operations for the cycle model. Registering a class twice needs ``replace=True``."""
        if not (isinstance(cls, type) and issubclass(cls, TiuCommand)):
            raise TypeError(f"{cls!r} is not a TIU command class")
        if cls in self._kernels and not replace:
            raise ValueError(f"a TIU kernel for {cls.__name__} is already registered")
        self._kernels[cls] = TiuKernel(execute, work or _output_elements)

    def lookup(self, cls: type[TiuCommand]) -> TiuKernel:
        kernel = self._kernels.get(cls)
        if kernel is None:
            raise LaminaError(f"the simulator has no TIU kernel for {cls.__name__} commands")
        return kernel

    def __contains__(self, cls: object) -> bool:
        return cls in self._kernels


#: The simulator's default table: every TIU command class's kernel (``kernels.py``, which computes
#: through ``tiu.py``).
TIU_TABLE = TiuTable()
register_tiu = TIU_TABLE.register
for _cls, (_execute, _work) in KERNELS.items():
    register_tiu(_cls, _execute, _work)


# -- the cycle model ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CommandRecord:
    """One executed command: its engine (``"tiu"``/``"gdma"``), name (the command class), layer
    group, start and end cycles, MACs (conv, depthwise and matmul work; 0 otherwise), DDR bytes read
    plus written, its index in the command list, and whether its LMEM operands shared a bank."""

    engine: str
    name: str
    group: int
    start: int
    end: int
    macs: int
    ddr_bytes: int
    index: int
    bank_conflict: bool = False


@dataclass
class RunResult:
    """What :func:`run` returns: every command's record (in order of start), the total cycles and
    each engine's busy cycles."""

    records: list[CommandRecord] = field(default_factory=list)
    total_cycles: int = 0
    busy: dict[str, int] = field(default_factory=lambda: {"tiu": 0, "gdma": 0})


def ddr_burst_bytes(chip: Chip, t: Tensor) -> int:
    """The DDR bytes a move of tensor ``t`` in DDR costs: DDR is read and written in bursts of
    ``ddr_burst_bytes``, so each contiguous run of its elements costs whole bursts (a contiguous
    tensor its size rounded up to a burst; a column of a matrix one burst per element). A dim of
    stride 0 (a broadcast) repeats elements the engine already holds: it costs nothing more."""
    isz = DTYPES[t.dtype].itemsize
    dims = [(d, s) for d, s in zip(t.shape, t.strides) if d > 1 and s > 0]
    run, expect = 1, 1
    for d, s in reversed(dims):
        if s != expect:
            break
        run *= d
        expect *= d
    runs = math.prod(d for d, _ in dims) // run
    burst = chip.ddr_burst_bytes
    return runs * (-(-(run * isz) // burst) * burst)


def _gdma(machine: Machine | None, cmd: GdmaCommand, chip: Chip) -> tuple[int, int]:
    """Execute a GDMA command (only time it without a machine): (transfer cycles, DDR bytes). The
    transfer moves the DDR side's bursts (both sides' for DDR to DDR) at DDR bandwidth, or the
    bytes at LMEM bandwidth between two LMEM tensors."""
    if not isinstance(cmd, Move):
        raise LaminaError(f"the simulator has no GDMA engine for {type(cmd).__name__} commands")
    if machine is not None:
        machine.write(cmd.dst, machine.read(cmd.src))
    ddr = sum(ddr_burst_bytes(chip, t) for t in (cmd.src, cmd.dst) if t.space is Space.DDR)
    return chip.gdma_transfer_cycles(ddr if ddr else cmd.src.nbytes, ddr > 0), ddr


def _tiu(machine: Machine | None, cmd: TiuCommand, table: TiuTable, chip: Chip) -> tuple[int, int, bool]:
    """Execute a TIU command (only time it without a machine): (cycles, MACs, bank conflict)."""
    kernel = table.lookup(type(cmd))
    for name, t in cmd.tensors().items():
        if t.space is not Space.LMEM:
            raise LaminaError(
                f"TIU {type(cmd).__name__}: operand {name!r} is in DDR (TIU operands live in LMEM)"
            )
    if machine is not None:
        inputs = {name: machine.read(t) for name, t in cmd.inputs.items()}
        result = np.asarray(kernel.execute(cmd, inputs))
        machine.write(cmd.output, result)
    work = int(kernel.work(cmd))
    conflict = bank_conflict(chip, cmd)
    cycles = chip.tiu_cycles(cmd.KIND, cmd.compute_dtype, work)
    if conflict:  # the operations run at half rate; the start-up latency is paid once
        cycles = 2 * cycles - chip.tiu_latency_cycles
    return cycles, work if cmd.KIND in MAC_KINDS else 0, conflict


def run(
    machine: Machine | None, cmds: Sequence[Command], table: TiuTable | None = None, chip: Chip | None = None
) -> RunResult:
    """Execute ``cmds`` on ``machine``, counting cycles (see the module docstring); with no machine
    (give the ``chip``), only count them: the same schedule, no data.

    Each engine's commands must be numbered 1, 2, ... in list order, and a ``wait`` must name an
    id the other engine has; a program whose waits form a cycle is a deadlock. Both are reported as
    one :class:`LaminaError` naming the command.
    """
    table = TIU_TABLE if table is None else table
    if machine is not None:
        chip = machine.chip
    if chip is None:
        raise ValueError("run: give a machine or a chip")
    queues: dict[Engine, list[tuple[int, Command]]] = {Engine.TIU: [], Engine.GDMA: []}
    for i, cmd in enumerate(cmds):
        q = queues[cmd.ENGINE]
        if cmd.id != len(q) + 1:
            raise LaminaError(
                f"command {i} ({type(cmd).__name__}): id {cmd.id}, expected {len(q) + 1} "
                f"(the {cmd.ENGINE.value} engine numbers its commands 1, 2, ... in order)"
            )
        q.append((i, cmd))
    other = {Engine.TIU: Engine.GDMA, Engine.GDMA: Engine.TIU}
    for engine, q in queues.items():
        for i, cmd in q:
            if cmd.wait > len(queues[other[engine]]):
                raise LaminaError(
                    f"command {i} ({type(cmd).__name__}): waits for {other[engine].value} id {cmd.wait}, "
                    f"which does not exist"
                )
    end_of: dict[Engine, list[int]] = {Engine.TIU: [], Engine.GDMA: []}  # end cycle by id - 1
    free = {Engine.TIU: 0, Engine.GDMA: 0}
    pos = {Engine.TIU: 0, Engine.GDMA: 0}
    result = RunResult()
    while pos[Engine.TIU] < len(queues[Engine.TIU]) or pos[Engine.GDMA] < len(queues[Engine.GDMA]):
        ready: list[tuple[int, int, Engine]] = []
        for engine in (Engine.TIU, Engine.GDMA):
            if pos[engine] == len(queues[engine]):
                continue
            i, cmd = queues[engine][pos[engine]]
            done = end_of[other[engine]]
            if cmd.wait > len(done):
                continue  # the awaited command has not run yet
            start = max(free[engine], done[cmd.wait - 1] if cmd.wait else 0)
            ready.append((start, i, engine))
        if not ready:
            stuck = [queues[e][pos[e]] for e in (Engine.TIU, Engine.GDMA) if pos[e] < len(queues[e])]
            raise LaminaError(
                "deadlock: "
                + "; ".join(f"command {i} ({type(c).__name__}) waits for id {c.wait}" for i, c in stuck)
            )
        start, i, engine = min(ready)
        cmd = queues[engine][pos[engine]][1]
        try:
            if isinstance(cmd, TiuCommand):
                cycles, macs, conflict = _tiu(machine, cmd, table, chip)
                ddr, latency = 0, 0
            else:
                assert isinstance(cmd, GdmaCommand)
                cycles, ddr = _gdma(machine, cmd, chip)
                macs, conflict, latency = 0, False, chip.gdma_latency_cycles
        except LaminaError as e:
            raise LaminaError(f"command {i} ({type(cmd).__name__}): {e}") from None
        # a GDMA move is issued at `start`, its data moves after the latency, and the engine issues
        # the next move when this one's transfer is done (moves are pipelined); the record is the
        # transfer, the command's end what waits see
        end = start + latency + cycles
        end_of[engine].append(end)
        free[engine] = start + cycles
        pos[engine] += 1
        result.busy[engine.value] += cycles
        result.records.append(
            CommandRecord(
                engine.value, type(cmd).__name__, cmd.group, start + latency, end, macs, ddr, i, conflict
            )
        )
    result.total_cycles = max((r.end for r in result.records), default=0)
    return result


def time_commands(chip: Chip, cmds: Sequence[Command], table: TiuTable | None = None) -> tuple[int, int]:
    """The cycles and MACs of a command list on ``chip`` (:func:`run` without data)."""
    res = run(None, cmds, table, chip)
    return res.total_cycles, total_macs(res.records)


def total_macs(records: Sequence[CommandRecord]) -> int:
    """MACs over a run's records."""
    return sum(r.macs for r in records)


def mac_utilization(result: RunResult, chip: Chip) -> float:
    """Simulated MACs / (the chip's peak MACs per cycle * total cycles)."""
    if not result.total_cycles:
        return 0.0
    return total_macs(result.records) / (chip.peak_macs_per_cycle * result.total_cycles)

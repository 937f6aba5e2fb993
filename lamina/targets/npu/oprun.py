"""One ``tpu`` op as one TIU command on a simulated machine: the op-by-op path of the tests and the
benchmarks (and, later, of ``--disable_layer_group``'s reference).

:func:`run_op` lowers the op (:func:`~lamina.targets.npu.records.lower_op`), places every tensor
field of its record in LMEM at non-overlapping addresses (each from a bank boundary when they fit,
else packed at EU alignment), in the chip's aligned lane layout; writes the op's input values and
the record's params there — directly, or from DDR through GDMA ``Move`` loads (``through_ddr``),
then stores the result back — encodes and decodes the command list (the binary round trip), runs
it with :func:`~lamina.targets.npu.simulator.run` and reads the output back as the op's N-d
result. Nothing here computes: the simulator's kernels do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lamina.ir.core import Operation
from lamina.support.errors import LaminaError

from . import isa
from .arch import DTYPES, Chip
from .records import Lowered, lower_op, operand_value, value_dtype
from .simulator import Machine, RunResult, run

__all__ = ["OpRun", "place", "run_lowered", "run_op"]


@dataclass
class OpRun:
    """What :func:`run_op` returns: the op's result (N-d, its dtype), the executed commands (as
    decoded from their buffer) and the simulator's records and cycles."""

    output: np.ndarray
    commands: list[isa.Command]
    result: RunResult
    lowered: Lowered


def _dtype_name(a: np.ndarray) -> str:
    for name, d in DTYPES.items():
        if a.dtype == d:
            return name
    raise LaminaError(f"no NPU dtype for {a.dtype}")


def place(chip: Chip, tensors: Mapping[str, tuple[tuple[int, int, int, int], str]]) -> dict[str, isa.Tensor]:
    """LMEM descriptors for ``tensors`` (name → (4-d shape, dtype)), in order, at non-overlapping
    addresses of every lane: each from a bank boundary when all fit that way (no bank conflict
    between them), else packed at EU alignment; a LaminaError when they do not fit."""
    sizes = {n: chip.tensor_bytes_per_lane(*shape, dtype) for n, (shape, dtype) in tensors.items()}

    def layout(align: int) -> dict[str, int] | None:
        addrs, cur = {}, 0
        for n, size in sizes.items():
            cur = -(-cur // align) * align
            addrs[n] = cur
            cur += max(size, 1)
        return addrs if cur <= chip.lmem_bytes_per_lane else None

    addrs = layout(chip.bank_bytes) or layout(chip.eu_bytes)
    if addrs is None:
        need = sum(-(-s // chip.eu_bytes) * chip.eu_bytes for s in sizes.values())
        raise LaminaError(
            f"the command's tensors need {need} bytes per lane; chip {chip.name} has {chip.lmem_bytes_per_lane}"
        )
    return {
        n: isa.Tensor(isa.Space.LMEM, addrs[n], shape, chip.lmem_strides(*shape, dtype), dtype)  # type: ignore[arg-type]
        for n, (shape, dtype) in tensors.items()
    }


def run_lowered(
    op: Operation,
    lowered: Lowered,
    inputs: Sequence[Any],
    chip: Chip,
    *,
    machine: Machine | None = None,
    through_ddr: bool = False,
) -> OpRun:
    """Run ``lowered`` (``op``'s command) on ``inputs`` (the op's operand values, as the
    interpreter passes them) — see the module docstring."""
    fields = lowered.cls.TENSORS
    specs: dict[str, tuple[tuple[int, int, int, int], str]] = {}
    values: dict[str, np.ndarray] = {}
    for name in fields:
        if name in lowered.operands:
            o = lowered.operands[name]
            v = operand_value(op, o)
            size = int(np.prod(getattr(v.type, "shape", ()), dtype=np.int64))
            if int(np.prod(o.shape, dtype=np.int64)) != size:
                raise LaminaError(
                    f"{op.name}: the {name} view {o.shape} is not a reshape of its {size}-element value"
                )
            specs[name] = (o.shape, value_dtype(v))
            if name != "output":
                a = inputs[o.value]
                if a is None:
                    raise LaminaError(f"{op.name}: operand {o.value} ({name}) has no value")
                values[name] = np.ascontiguousarray(np.asarray(a)).reshape(o.shape)
        elif name in lowered.params:
            a = lowered.params[name]
            specs[name] = (a.shape, _dtype_name(a))  # type: ignore[assignment]
            values[name] = a
    lmem = place(chip, specs)
    m = machine or Machine(chip, 1 << 26)
    cmds: list[isa.Command] = []
    if through_ddr:
        addr = 0
        ddr: dict[str, isa.Tensor] = {}
        for name, (shape, dtype) in specs.items():
            ddr[name] = isa.Tensor.ddr(addr, shape, dtype)
            addr += -(-ddr[name].nbytes // 64) * 64
        if addr > m.ddr.size:
            raise LaminaError(f"the command's tensors need {addr} bytes of DDR; the machine has {m.ddr.size}")
        for name, a in values.items():
            m.write(ddr[name], a)
            cmds.append(isa.Move(id=len(cmds) + 1, src=ddr[name], dst=lmem[name]))
        cmds.append(_command(lowered, lmem, id=1, wait=len(cmds)))
        cmds.append(isa.Move(id=len(cmds), wait=1, src=lmem["output"], dst=ddr["output"]))
        out_t = ddr["output"]
    else:
        for name, a in values.items():
            m.write(lmem[name], a)
        cmds.append(_command(lowered, lmem, id=1))
        out_t = lmem["output"]
    decoded = isa.decode(isa.encode(cmds))
    res = run(m, decoded)
    out = m.read(out_t)
    shape = getattr(op.results[0].type, "shape", out.shape)
    return OpRun(out.reshape(tuple(shape)), decoded, res, lowered)


def _command(lowered: Lowered, tensors: Mapping[str, isa.Tensor], **head: int) -> isa.TiuCommand:
    present = {n: t for n, t in tensors.items() if n in lowered.operands or n in lowered.params}
    return lowered.cls(**lowered.fields, **present, **head)  # type: ignore[arg-type]


def run_op(
    op: Operation,
    inputs: Sequence[Any],
    chip: Chip,
    *,
    machine: Machine | None = None,
    through_ddr: bool = False,
) -> OpRun:
    """``op`` (a ``tpu`` op) as its TIU command on ``inputs``; a LaminaError when it has no
    command (it runs on the host) or its tensors do not fit the chip's LMEM."""
    return run_lowered(op, lower_op(op), inputs, chip, machine=machine, through_ddr=through_ddr)

"""Running a compiled NPU model: the simulator for the NPU subnets, the reference interpreter for the
CPU subnets, one DDR shared by both.

:func:`load_npu_model` reads what the container holds (the chip — as compiled, from the file's
metadata; a user's ``chip_config`` must describe the same chip —, the weights, each NPU subnet's
decoded command buffer, each CPU subnet's module) once; :meth:`NpuModel.run` then writes the inputs
at their DDR addresses, runs the subnets in order — the simulator executing each command buffer
bit-exactly and counting cycles, the interpreter running each CPU subnet on the tensors it reads from
DDR and writing its results back — and reads the outputs (float32; an integer output is dequantized
with its descriptor's scale). The profile's records are the NPU commands (engines ``tiu``, ``gdma``,
cycles continuing from one NPU subnet to the next; CPU subnets take no NPU cycles and are listed in
the summary's ``cpu_subnets`` with their host wall time).
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from lamina.support.errors import LaminaError

from ..base import CompiledModel, _numpy_dtype
from ..container import Model
from ..profile import CommandRecord
from . import isa
from .arch import Chip, _parse, load_chip

__all__ = ["NpuModel", "load_npu_model"]


def _chip_of(model: Model, path: str, chip_config: str | None) -> Chip:
    meta = model.metadata.get("chip_config")
    if isinstance(meta, dict):
        chip = _parse(json.dumps(meta), f"'{path}' (its chip description)")
    else:
        chip = load_chip(model.chip)
    if chip_config is not None:
        user = load_chip(chip_config)
        if user != chip:
            raise LaminaError(
                f"'{path}' was compiled for chip '{chip.name}'; --chip_config '{chip_config}' describes "
                f"another chip ('{user.name}')"
            )
    if chip.name != model.chip:
        raise LaminaError(f"'{path}': the header names chip '{model.chip}', its description '{chip.name}'")
    return chip


class NpuModel(CompiledModel):
    """A compiled NPU model (see the module docstring)."""

    def __init__(self, model: Model, path: str, chip: Chip) -> None:
        super().__init__(model, path)
        self.arch = chip
        self.clock_hz = float(chip.clock_hz)
        self.peak_macs_per_cycle = float(chip.peak_macs_per_cycle)
        meta = model.metadata
        try:
            ddr = meta["ddr"]
            self.tensors: dict[str, dict[str, Any]] = meta["tensors"]
            self.layers: dict[str, Any] = meta.get("layers", {})
            self.groups: list[dict[str, Any]] = meta.get("groups", [])
            self.ddr_size = int(ddr["activation_base"]) + int(ddr["activation_bytes"])
        except (KeyError, TypeError, ValueError) as e:
            raise LaminaError(f"'{path}': not an NPU model file: its metadata lacks {e}") from None
        weights = next((s for s in model.sections if s.kind == "weights"), None)
        self.weights = bytes(weights.data) if weights is not None else b""
        if len(self.weights) > self.ddr_size:
            raise LaminaError(f"'{path}': {len(self.weights)} bytes of weights exceed its DDR layout")
        self.subnets: list[tuple[Any, Any]] = []
        for sn in model.subnets:
            sec = model.section(sn.section)
            if sn.kind == "npu":
                cmds = isa.decode(sec.data, f"'{path}': section '{sn.section}'")
                self.subnets.append((sn, cmds))
            elif sn.kind == "cpu":
                self.subnets.append((sn, _parse_subnet(sec.text(), f"{path}:{sn.section}")))
            else:
                raise LaminaError(f"'{path}': subnet '{sn.name}' of kind '{sn.kind}' (expected npu or cpu)")
            for name in (*sn.inputs, *sn.outputs):
                if name not in self.tensors:
                    raise LaminaError(
                        f"'{path}': subnet '{sn.name}' names tensor '{name}' without a descriptor"
                    )
        self.machine: Any = None

    def _machine(self) -> Any:
        from .simulator import Machine

        if self.machine is None:
            m = Machine(self.arch, max(self.ddr_size, 64))
            w = np.frombuffer(self.weights, np.uint8)
            m.ddr[: w.size] = w
            self.machine = m
        return self.machine

    # -- DDR tensors --------------------------------------------------------------------------------

    def _view(self, name: str, desc: Any = None) -> np.ndarray:
        """The DDR bytes of a tensor as an array: a subnet tensor by name, or a model input or output
        by its descriptor."""
        d = (
            self.tensors[name]
            if desc is None
            else {"dtype": desc.dtype, "shape": list(desc.shape), "address": desc.address}
        )
        m = self._machine()
        dt = np.dtype(_numpy_dtype(d["dtype"]))
        n = int(np.prod(d["shape"])) if d["shape"] else 1
        a = int(d["address"])
        if a < 0 or a + n * dt.itemsize > m.ddr.size:
            raise LaminaError(f"'{self.path}': tensor '{name}' lies outside the model's DDR")
        return m.ddr[a : a + n * dt.itemsize].view(dt).reshape(d["shape"])

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        from .simulator import run

        for t in self.model.inputs:
            v = self._view(t.name, t)
            v[...] = np.asarray(feeds[t.name]).astype(v.dtype, copy=False)
        records: list[CommandRecord] = []
        cpu: list[dict[str, Any]] = []
        base = 0
        for sn, code in self.subnets:
            if sn.kind == "npu":
                try:
                    res = run(self._machine(), code)
                except LaminaError as e:
                    raise LaminaError(f"'{self.path}': subnet '{sn.name}': {e}") from None
                layers = self.layers.get(sn.name, {})
                names = layers.get("names", [])
                of = layers.get("of_command", [])
                for r in res.records:
                    op = names[of[r.index]] if r.index < len(of) and of[r.index] < len(names) else ""
                    g = self.groups[r.group]["name"] if r.group < len(self.groups) else f"group{r.group}"
                    records.append(
                        CommandRecord(
                            r.engine, r.name, g, base + r.start, base + r.end, op, r.macs, r.ddr_bytes
                        )
                    )
                base += res.total_cycles
            else:
                t0 = time.perf_counter()
                outs = _run_subnet(
                    code, {n: self._view(n).copy() for n in sn.inputs}, f"{self.path}:{sn.name}"
                )
                for n in sn.outputs:
                    v = self._view(n)
                    v[...] = np.asarray(outs[n]).astype(v.dtype, copy=False).reshape(v.shape)
                cpu.append({"name": sn.name, "wall_us": (time.perf_counter() - t0) * 1e6, "at_cycle": base})
        self.last_records = records
        self._cpu = cpu
        out: dict[str, np.ndarray] = {}
        for t in self.model.outputs:
            a = self._view(t.name, t).copy()
            if a.dtype.kind in "iu" and (t.scale != 1.0 or t.zero_point != 0):
                a = ((a.astype(np.float64) - t.zero_point) * t.scale).astype(np.float32)
            elif a.dtype == np.float16 or a.dtype.kind == "V" or str(a.dtype) == "bfloat16":
                a = a.astype(np.float32)  # as the interpreter's outputs: f16/bf16 widened, f64 kept
            out[t.name] = a
        return out

    def profile_extra(self) -> dict[str, Any]:
        total = max((r.end for r in self.last_records or ()), default=0)
        useful = int(self.model.metadata.get("model_macs", 0))
        peak = self.peak_macs_per_cycle * total
        return {
            **super().profile_extra(),
            "cpu_subnets": list(getattr(self, "_cpu", [])),
            "ddr_bytes_weights": len(self.weights),
            # the model's MACs counted once: `macs` may count halos recomputed by sliced groups
            "model_macs": useful,
            "model_mac_utilization": useful / peak if peak > 0 else 0.0,
        }


def _parse_subnet(text: str, where: str) -> Any:
    import lamina.dialects
    import lamina.targets  # noqa: F401
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module

    ctx = Context()
    diags: list[Any] = []
    with ctx.diagnostics.handler(diags.append):
        module = parse_module(text, ctx, where)
    if module is None:
        raise LaminaError(
            f"'{where}': the CPU subnet does not parse: " + "; ".join(str(d) for d in diags[:3])
        )
    from lamina.execution import Interpreter

    return Interpreter(module)


def _run_subnet(interp: Any, inputs: dict[str, np.ndarray], where: str) -> dict[str, np.ndarray]:
    from lamina.execution import ExecutionError

    try:
        return dict(interp.run(inputs))
    except ExecutionError as e:
        raise LaminaError(f"'{where}': the CPU subnet failed: {e}") from None


def load_npu_model(model: Model, path: str, chip_config: str | None = None) -> NpuModel:
    """The model of a ``.lamina`` file of target ``npu``, ready to run on the simulator."""
    return NpuModel(model, path, _chip_of(model, path, chip_config))

"""Code generation: a fully planned ``npu`` module (groups sliced, scheduled, LMEM allocated, DDR
addresses assigned) to command buffers and the ``.lamina`` model.

**Subnets.** The function's ops run in order, split into subnets: consecutive NPU work (layer
groups, GDMA copies, reshapes — which are only new shapes of the same DDR bytes) form an NPU subnet,
one command buffer; consecutive ops without an NPU form (and commands that fit LMEM in no slicing)
form a CPU subnet, which the runtime runs on the host with the reference interpreter, as IR text,
reading its inputs from DDR and writing its outputs back.

**A group's commands** follow its schedule (``npu-schedule``): for timestep ``t`` the GDMA loads
slice ``t``'s per-slice values (with slice 0, in first-use order, the values loaded once) and stores
slice ``t - 2``'s stored values while the TIU computes slice ``t - 1``, command by command, each
record's fields those of its slice (:func:`lamina.targets.npu.slicing.slice_command`: the pads of
a slice with halos...). After its last slice loads, a group issues the loads later groups'
weights it prefetches (``npu.prefetch``). Each command waits for the other engine's last command it
depends on: a TIU command for the loads it reads (and the store that last read the buffer it
writes), a store for the command that computed it, a load for the computation that last read the
buffer it fills; the first load a group issues for itself waits for the previous group's last TIU
command (its buffers are reused). A copy is its GDMA moves (none for a view, none for the inputs
stored in place). DDR descriptors carry a view's strides. Every command carries its group's number
(the profile groups them); the metadata names the layer each command computes.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.ir.core import Operation, Value
from lamina.ir.naming import result_names
from lamina.ir.traits import ConstantLike, ReturnLike
from lamina.ir.types import RankedTensorType
from lamina.support.errors import LaminaError

from . import isa
from .arch import DTYPES, Chip
from .dialect import (
    CommandOp,
    CopyOp,
    GroupOp,
    LoadOp,
    ReshapeOp,
    StoreOp,
    WeightOp,
    dtype_name,
    np_dtype,
    shape4,
)
from .isa import Engine, Move, Space, Tensor
from .planner import Parts
from .transforms.address import nbytes, root_of, used_values
from .transforms.local import read_parts

__all__ = ["Program", "Subnet", "generate"]


@dataclass
class Subnet:
    """One subnet: ``kind`` ``npu`` (``commands``) or ``cpu`` (``ops``, run on the host); the values it
    reads and writes; per command the layer it computes."""

    name: str
    kind: str
    ops: list[Operation] = field(default_factory=list)
    commands: list[isa.Command] = field(default_factory=list)
    layers: list[str] = field(default_factory=list)
    inputs: list[Value] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)


@dataclass
class Program:
    """What code generation produced: the subnets in order, the weight bytes, the groups (name, its
    layers, its slicing), and the DDR layout."""

    subnets: list[Subnet]
    weights: bytes
    groups: list[dict[str, Any]]
    weight_bytes: int
    activation_base: int
    activation_bytes: int


def _attr_ints(op: Operation, name: str) -> list[int]:
    a = op.get_attr(name)
    if a is None:
        raise LaminaError(f"'{op.name}' at {op.location} has no {name} (run the NPU pipeline first)")
    return [int(x) for x in a.values]  # type: ignore[attr-defined]


def _ddr(v: Value, func: Operation) -> int:
    """The DDR address of a value (through aliases)."""
    r = root_of(v)
    d = r.defining_op()
    if d is None:
        return _attr_ints(func, "npu.arg_ddr")[r.index]  # type: ignore[attr-defined]
    return _attr_ints(d, "npu.ddr")[r.index if not isinstance(d, WeightOp) else 0]  # type: ignore[attr-defined]


def _contig(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _strides(v: Value) -> tuple[int, ...] | None:
    """The element strides of a value that is a view of another's buffer (``npu.strides``), else None."""
    r = root_of(v)
    d = r.defining_op()
    a = d.get_attr("npu.strides") if d is not None else None
    if a is None:
        return None
    entry = a.get(str(r.index))  # type: ignore[attr-defined]
    return None if entry is None else tuple(int(x) for x in entry.values)


def _ddr_tensor(
    addr: int,
    full: tuple[int, int, int, int],
    region: Any,
    dtype: str,
    strides: tuple[int, ...] | None = None,
) -> Tensor:
    st = strides if strides is not None else _contig(full)
    isz = DTYPES[dtype].itemsize
    off = sum(r[0] * s for r, s in zip(region, st))
    return Tensor(Space.DDR, addr + off * isz, tuple(b - a for a, b in region), st, dtype)  # type: ignore[arg-type]


class _Emitter:
    """Commands of one subnet in issue order, numbered per engine."""

    def __init__(self) -> None:
        self.cmds: list[isa.Command] = []
        self.layers: list[str] = []
        self.count = {Engine.TIU: 0, Engine.GDMA: 0}

    def emit(self, cls: type[isa.Command], layer: str, wait: int, group: int, **fields: Any) -> int:
        eng = cls.ENGINE
        self.count[eng] += 1
        cid = self.count[eng]
        self.cmds.append(cls(id=cid, wait=wait, group=group, **fields))  # type: ignore[call-arg]
        self.layers.append(layer)
        return cid

    @property
    def last_tiu(self) -> int:
        return self.count[Engine.TIU]


def _name(v: Value, names: dict[Value, str]) -> str:
    return names.get(root_of(v), names.get(v, ""))


class _GroupCode:
    """The commands of one layer group (see the module docstring)."""

    def __init__(
        self, g: GroupOp, gid: int, chip: Chip, func: Operation, em: _Emitter, names: dict[Value, str]
    ) -> None:
        self.g, self.gid, self.chip, self.func, self.em, self.names = g, gid, chip, func, em, names
        self.secs = tuple(g.secs or (1, 1, 1, 1))
        self.parts: dict[Value, Parts] = {}
        self.lmem: dict[Value, tuple[int, int, int]] = {}
        self.extent: dict[Value, tuple[int, int, int, int]] = {}
        self.loads: list[LoadOp] = []
        self.nodes: list[CommandOp] = []
        self.stores: list[StoreOp] = []
        self.arg_of: dict[Value, Value] = dict(zip(g.block.args, g.inputs))
        self.loaded_at: dict[tuple[Value, int], int] = {}
        for op in g.block.ops:
            if isinstance(op, LoadOp):
                self.loads.append(op)
            elif isinstance(op, CommandOp):
                self.nodes.append(op)
            elif isinstance(op, StoreOp):
                self.stores.append(op)
                continue
            else:
                continue
            v = op.results[0]
            p = read_parts(op)
            if p is None:
                raise LaminaError(f"'{op.name}' at {op.location} has no npu.slices (run npu-slice)")
            self.parts[v] = p
            a = _attr_ints(op, "npu.lmem")
            self.lmem[v] = (a[0], a[1], a[2])
            self.extent[v] = tuple(max(b - a for a, b in dim) for dim in p)  # type: ignore[assignment]

    # -- descriptors --------------------------------------------------------------------------------

    def region(self, v: Value, idx: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
        p = self.parts[v]
        return tuple(p[d][idx[d] if len(p[d]) > 1 else 0] for d in range(4))

    def local(self, v: Value, s: int, region: Any, within: Any) -> Tensor:
        """The LMEM descriptor of ``region`` of value ``v`` in slice ``s`` whose buffer holds ``within``."""
        addr, size, buffers = self.lmem[v]
        dt = dtype_name(v.type)
        ext = self.extent[v]
        st = self.chip.lmem_strides(*ext, dt)
        isz = DTYPES[dt].itemsize
        off = [r[0] - w[0] for r, w in zip(region, within)]
        base = addr + (s % buffers) * size
        lanes = self.chip.lanes
        byte = (off[0] * st[0] + (off[1] // lanes) * st[1] + off[2] * st[2] + off[3] * st[3]) * isz
        shape = tuple(b - a for a, b in region)
        return Tensor(Space.LMEM, base + byte, shape, st, dt, off[1] % lanes)  # type: ignore[arg-type]

    # -- the commands -------------------------------------------------------------------------------

    def emit_prefetch(self, ld: LoadOp) -> None:
        """Issue one of this group's loads now, inside an earlier group's GDMA stream (``npu-lmem-alloc``
        placed it where no group until this one has a buffer; the GDMA's order keeps it after every
        earlier command that could still read that LMEM)."""
        self.loaded_at[(ld.results[0], -1)] = self._load(ld, 0, (0, 0, 0, 0), 0)

    def emit(self, issues: Sequence[tuple[_GroupCode, LoadOp]] = ()) -> None:
        """The group's commands (see the module docstring); the loads of later groups it ``issues``
        go after its last slice loads."""
        from .slicing import slice_command

        em, gid = self.em, self.gid
        grid = list(itertools.product(*(range(s) for s in self.secs)))
        nslices = len(grid)
        barrier = em.last_tiu
        first = [True]

        def gdma_wait(w: int) -> int:
            if first[0]:
                first[0] = False
                return max(w, barrier)
            return w

        loaded_at = self.loaded_at  # (value, slice) -> GDMA id; slice -1: loaded once
        once = {ld.results[0] for ld in self.loads if _flag(ld, "npu.once")}
        pre = {v for (v, s_), _ in loaded_at.items() if s_ == -1}  # issued by an earlier group already
        tiu_last: dict[int, int] = {}
        tiu_of: dict[tuple[Value, int], int] = {}
        store_at: dict[tuple[Value, int], int] = {}
        stored_vals = {st.operands[0] for st in self.stores}
        for t in range(nslices + 2):
            if t < nslices:
                # in first-use order; what is loaded once comes with slice 0's loads
                for ld in self.loads:
                    v = ld.results[0]
                    if v in pre or (v in once and t > 0):
                        continue
                    if v in once:
                        loaded_at[(v, -1)] = self._load(ld, 0, grid[0], gdma_wait(0))
                        continue
                    w = tiu_last.get(t - 2, 0)
                    loaded_at[(v, t)] = self._load(ld, t, grid[t], gdma_wait(w))
                if t == nslices - 1:
                    for code, ld in issues:
                        code.emit_prefetch(ld)
            if 1 <= t <= nslices:
                s = t - 1
                idx = grid[s]
                for op in self.nodes:
                    out = op.results[0]
                    region = self.region(out, idx)
                    fields, regions = slice_command(
                        op.command,
                        op.fields(),
                        {n: shape4(x.type) for n, x in op.tensor_values().items()},
                        region,
                    )
                    tensors = {"output": self.local(out, s, region, region)}
                    wait = 0
                    for name, x in op.tensor_values().items():
                        if name == "output":
                            continue
                        tensors[name] = self.local(x, s, regions[name], self.region(x, idx))
                        wait = max(wait, loaded_at.get((x, s), loaded_at.get((x, -1), 0)))
                    if out in stored_vals and self.lmem[out][2] == 2 and s >= 2:
                        wait = max(wait, store_at.get((out, s - 2), 0))
                    cmd_fields = {**fields, **tensors}
                    cid = em.emit(
                        op.command, _name(out, self.names) or str(op.location), wait, gid, **cmd_fields
                    )
                    tiu_of[(out, s)] = cid
                    tiu_last[s] = cid
            if t >= 2:
                s = t - 2
                for st in self.stores:
                    sv = st.operands[0]
                    cid = self._store(st, sv, s, grid, tiu_of[(sv, s)])
                    if cid:
                        store_at[(sv, s)] = cid

    def _load(self, ld: LoadOp, s: int, idx: tuple[int, ...], wait: int) -> int:
        v = ld.results[0]
        src = self.arg_of[ld.operands[0]]
        region = self.region(v, idx)
        dt = dtype_name(v.type)
        ddr = _ddr_tensor(_ddr(src, self.func), shape4(v.type), region, dt, _strides(src))
        dst = self.local(v, s, region, region)
        return self.em.emit(Move, _name(src, self.names), wait, self.gid, src=ddr, dst=dst)

    def _store(self, st: StoreOp, v: Value, s: int, grid: list[tuple[int, ...]], wait: int) -> int:
        idx = grid[s]
        p = self.parts[v]
        new = []
        for d in range(4):
            dim = p[d]
            k = idx[d] if len(dim) > 1 else 0
            a, b = dim[k]
            if len(dim) == 1:
                if idx[d] != 0:
                    return 0  # stored by the first slice along this dim
                new.append((a, b))
                continue
            lo = a if k == 0 else max(a, dim[k - 1][1])
            if lo >= b:
                return 0
            new.append((lo, b))
        region = tuple(new)
        held = self.region(v, idx)
        dt = dtype_name(v.type)
        res = st.results[0]
        yield_op = self.g.block.last_op
        out_index = next(i for i, x in enumerate(yield_op.operands) if x is res)  # type: ignore[union-attr]
        dst_val = self.g.results[out_index]
        ddr = _ddr_tensor(_ddr(dst_val, self.func), shape4(v.type), region, dt, _strides(dst_val))
        src = self.local(v, s, region, held)
        return self.em.emit(Move, _name(dst_val, self.names), wait, self.gid, src=src, dst=ddr)


def _flag(op: Operation, name: str) -> bool:
    a = op.get_attr(name)
    return a is not None and bool(a.value)  # type: ignore[attr-defined]


def _copy_code(op: CopyOp, gid: int, func: Operation, em: _Emitter, names: dict[Value, str]) -> None:
    """The GDMA moves of a copy in DDR, but for the inputs written in place and for a copy that is a
    view (``npu-address-assign``)."""
    if _flag(op, "npu.view"):
        return
    done = op.get_attr("npu.in_place")
    skip = {int(i) for i in done.values} if done is not None else set()  # type: ignore[attr-defined]
    out = op.results[0]
    dt = dtype_name(out.type)
    isz = DTYPES[dt].itemsize
    out_addr = _ddr(out, func)
    for inp, so, shape, ss, do, ds in op.move_list():
        if inp in skip:
            continue
        src_v = op.inputs[inp]
        src = Tensor(Space.DDR, _ddr(src_v, func) + so * isz, shape, ss, dt)  # type: ignore[arg-type]
        dst = Tensor(Space.DDR, out_addr + do * isz, shape, ds, dt)  # type: ignore[arg-type]
        em.emit(Move, _name(out, names), 0, gid, src=src, dst=dst)


def value_names(func: Operation) -> dict[Value, str]:
    """A unique name for every value the subnets exchange: location names, the function's argument
    names; repeats get ``_1``, ``_2``..."""
    from lamina.execution.interpreter import io_names

    names: dict[Value, str] = {}
    used: set[str] = set()

    def add(v: Value, n: str) -> None:
        base, k = n or "t", 0
        while n in used or not n:
            k += 1
            n = f"{base}_{k}"
        used.add(n)
        names[v] = n

    ins, outs = io_names(func)
    block = func.regions[0].blocks[0]
    for a, n in zip(block.args, ins):
        add(a, n)
    ret = block.last_op
    if ret is not None and ret.has_trait(ReturnLike):  # a model output's buffer: the model's name for it
        for v, n in zip(ret.operands, outs):
            r = root_of(v)
            if r not in names:
                add(r, n)
    for op in func.regions[0].blocks[0].ops:
        if not op.results or isinstance(op, WeightOp):
            continue
        for r, n in zip(op.results, result_names(op)):
            if r not in names:
                add(r, n)
        if isinstance(op, GroupOp):  # the values computed inside, by the layers they are
            for inner in op.block.ops:
                if isinstance(inner, CommandOp):
                    for r, n in zip(inner.results, result_names(inner)):
                        names.setdefault(r, n)
    return names


def _is_npu_work(op: Operation) -> bool:
    return isinstance(op, (GroupOp, CopyOp))


def generate(module: Operation, chip: Chip) -> Program:
    """The subnets and commands of a planned module's main function."""
    from lamina.execution.interpreter import find_main

    func = find_main(module)
    block = func.regions[0].blocks[0]
    names = value_names(func)
    subnets: list[Subnet] = []
    weights = bytearray()
    for op in block.ops:
        if isinstance(op, WeightOp):
            a = _attr_ints(op, "npu.ddr")[0]
            raw = np.ascontiguousarray(op.array()).tobytes()
            if len(weights) < a:
                weights.extend(bytes(a - len(weights)))
            weights[a : a + len(raw)] = raw
            continue
        if (op.has_trait(ConstantLike) and not op.operands) or isinstance(op, ReshapeOp):
            continue
        if op.has_trait(ReturnLike):
            break
        kind = "npu" if _is_npu_work(op) else "cpu"
        if not subnets or subnets[-1].kind != kind:
            subnets.append(Subnet(f"{kind}{len(subnets)}", kind))
        subnets[-1].ops.append(op)
    groups: list[dict[str, Any]] = []
    gid = 0
    for sn in subnets:
        if sn.kind != "npu":
            continue
        em = _Emitter()
        ids: dict[int, int] = {}
        for op in sn.ops:
            ids[id(op)] = gid
            gid += 1
        codes = [
            _GroupCode(op, ids[id(op)], chip, func, em, names) for op in sn.ops if isinstance(op, GroupOp)
        ]
        # the loads each group issues for later groups (their weights, loaded while it computes)
        issues: list[list[tuple[_GroupCode, LoadOp]]] = [[] for _ in codes]
        for r, code in enumerate(codes):
            for ld in code.loads:
                d = ld.get_attr("npu.prefetch")
                if d is not None and 0 < int(d.value) <= r:  # type: ignore[attr-defined]
                    issues[r - int(d.value)].append((code, ld))  # type: ignore[attr-defined]
        by_op = {id(c.g): (r, c) for r, c in enumerate(codes)}
        for op in sn.ops:
            if isinstance(op, GroupOp):
                r, code = by_op[id(op)]
                code.emit(issues[r])
                layers = [names.get(o.results[0], "") for o in op.block.ops if isinstance(o, CommandOp)]
                groups.append(
                    {
                        "name": f"group{ids[id(op)]}",
                        "kind": "group",
                        "ops": layers,
                        "secs": list(op.secs or (1, 1, 1, 1)),
                    }
                )
            else:
                assert isinstance(op, CopyOp)
                _copy_code(op, ids[id(op)], func, em, names)
                groups.append(
                    {
                        "name": f"copy{ids[id(op)]}",
                        "kind": "copy",
                        "ops": [names.get(op.results[0], "")],
                        "secs": [1, 1, 1, 1],
                    }
                )
        sn.commands, sn.layers = em.cmds, em.layers
    if gid > 0xFFFF:
        raise LaminaError(f"{gid} groups: more than a command's 16-bit group field numbers")
    _subnet_io(subnets, block)
    return Program(
        subnets,
        bytes(weights),
        groups,
        int(module.get_attr("npu.weight_bytes").value),  # type: ignore[union-attr]
        int(module.get_attr("npu.activation_base").value),  # type: ignore[union-attr]
        int(module.get_attr("npu.activation_bytes").value),  # type: ignore[union-attr]
    )


def _subnet_io(subnets: list[Subnet], block: Any) -> None:
    """Each subnet's inputs (values it reads that something before it produced, or the function's
    arguments) and outputs (values it produces that a later subnet or the function's result reads),
    through reshape aliases, constants excepted."""
    owner: dict[int, int] = {}  # id(op) -> subnet index
    made: dict[Value, int] = {}
    for k, sn in enumerate(subnets):
        for op in sn.ops:
            owner[id(op)] = k
            for r in op.results:
                made[r] = k
    ret = block.last_op
    returned = {root_of(v) for v in ret.operands} if ret is not None else set()
    for k, sn in enumerate(subnets):
        ins: list[Value] = []
        outs: list[Value] = []
        for op in sn.ops:
            for v in used_values(op):
                src = root_of(v)
                d = src.defining_op()
                if d is not None and (d.has_trait(ConstantLike) and not d.operands):
                    continue
                if made.get(src) != k and src not in ins and nbytes(src.type):
                    ins.append(src)
            for res in op.results:
                if nbytes(res.type) and (
                    res in returned or any(owner.get(id(u), -1) != k for u in _readers(res))
                ):
                    outs.append(res)
        sn.inputs, sn.outputs = ins, outs


def _readers(v: Value) -> list[Operation]:
    """Ops reading ``v`` or a reshape alias of it (not the reshapes themselves)."""
    out = []
    stack = [v]
    while stack:
        x = stack.pop()
        for u in x.users:
            if isinstance(u, ReshapeOp):
                stack.append(u.results[0])
            else:
                out.append(u)
    return out


def tensor_desc(v: Value, func: Operation, name: str) -> dict[str, Any]:
    """The metadata of a tensor in DDR: its address, shape, storage dtype, scale and zero point."""
    from lamina.dialects.tpu.families.common import is_quant
    from lamina.dialects.tpu.quantize import qparams

    t = v.type
    scale, zp = 1.0, 0
    if is_quant(t):
        sc, z, axis, _, _ = qparams(t)
        if axis is None:
            scale, zp = float(sc), int(z)
    assert isinstance(t, RankedTensorType)
    return {
        "name": name,
        "address": _ddr(v, func),
        "shape": [int(d) for d in t.shape],
        "dtype": np.dtype(np_dtype(t)).name,
        "scale": scale,
        "zero_point": zp,
    }


def commands_count(cmds: list[isa.Command]) -> dict[str, int]:
    return {
        "tiu": sum(1 for c in cmds if c.ENGINE is Engine.TIU),
        "gdma": sum(1 for c in cmds if c.ENGINE is Engine.GDMA),
    }

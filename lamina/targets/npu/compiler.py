"""The NPU compiler: a lowered ``tpu`` module to a ``.lamina`` model for one chip.

The passes (each visible with ``lamina-opt --print-ir-after-all``, each FileCheck-tested):

1. ``convert-tpu-to-npu`` — TIU commands with weights reordered to the hardware layout, reshapes,
   GDMA copies; what has no NPU form stays for the host (:mod:`.conversion`);
2. ``npu-partition`` — NPU and CPU subnets, host ops moved as early as their operands allow
   (:mod:`.transforms.partition`);
3. ``npu-layer-group`` — layer groups chosen by an interval DP priced by the cycle model, sliced to
   fit LMEM (:mod:`.transforms.layer_group`, :mod:`.planner`);
4. ``npu-slice``, ``npu-schedule``, ``npu-lmem-alloc`` — each group's regions per slice, its 3-stage
   pipeline, its LMEM buffers (:mod:`.transforms.local`);
5. ``npu-address-assign`` — DDR addresses with liveness-based reuse (:mod:`.transforms.address`);

then code generation (:mod:`.codegen`: command buffers per NPU subnet, CPU subnets as IR text) and
the container (:func:`build_model`). :func:`compile_module` is what ``model_deploy --processor lnpu``
runs; :func:`pipeline` is the pass pipeline it runs.
"""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import fields
from typing import Any

from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, TypeAttr
from lamina.ir.constants import holds_constant
from lamina.ir.core import IRMapping, Operation, Value
from lamina.ir.traits import ConstantLike
from lamina.ir.types import FunctionType
from lamina.support.errors import ToolError

from ..base import CompileOptions, CompileResult
from ..container import Model, Section, SubnetDesc, TensorDesc
from . import isa
from .arch import Chip
from .codegen import Program, Subnet, commands_count, generate, tensor_desc, value_names
from .dialect import CommandOp, CopyOp, GroupOp, ReshapeOp

__all__ = ["build_model", "compile_module", "pipeline", "run_pipeline"]


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' if any(c in s for c in ' ,{}="/\\') else s


def pipeline(chip: str, disable_layer_group: bool = False) -> str:
    """The NPU pass pipeline for ``chip`` (a shipped name or a chip JSON file)."""
    c = f"chip={_quote(chip)}"
    lg = f"{c} disable=true" if disable_layer_group else c
    return (
        f"builtin.module(convert-tpu-to-npu{{{c}}},npu-partition,npu-layer-group{{{lg}}},npu-slice{{{c}}},"
        f"npu-schedule{{{c}}},npu-lmem-alloc{{{c}}},npu-address-assign)"
    )


def run_pipeline(module: Any, chip_arg: str, disable_layer_group: bool = False, ctx: Any = None) -> Any:
    """Run :func:`pipeline` on a clone of the ``tpu`` module; the planned ``npu`` module."""
    import lamina.dialects.tpu  # noqa: F401
    from lamina.ir.context import Context
    from lamina.passes import PassManager

    from . import (
        dialect,  # noqa: F401  (registers the npu dialect)
        passes,  # noqa: F401  (registers its passes)
    )

    work = module.clone()
    ctx = ctx or getattr(module, "context", None) or Context()
    diags: list[Any] = []
    with ctx.diagnostics.handler(diags.append), ctx:
        pm = PassManager.parse(pipeline(chip_arg, disable_layer_group), ctx)
        if not pm.run(work):
            raise ToolError("compiling for the NPU failed:\n" + "\n".join(str(d) for d in diags))
    return work


def compile_module(
    module: Any, chip: Chip, options: CompileOptions, chip_config: str | None = None
) -> CompileResult:
    """Compile a ``tpu`` module (left untouched) for ``chip``: the container, where each layer runs
    and what ``model_deploy`` prints about it."""
    t0 = time.perf_counter()
    planned = run_pipeline(module, chip_config or chip.name, options.disable_layer_group)
    t_passes = time.perf_counter() - t0
    program = generate(planned, chip)
    model, placement = build_model(planned, program, chip, options)
    model.metadata["compile_seconds"] = round(time.perf_counter() - t0, 3)
    report = _report(program, placement, chip, model, t_passes)
    return CompileResult(model, placement, report)


# ---- the container --------------------------------------------------------------------------------


def _main(module: Any) -> Operation:
    from lamina.execution.interpreter import find_main

    return find_main(module)


def _cpu_module(sn: Subnet, names: dict[Value, str]) -> str:
    """The subnet's ops as a module of their own (``func.func @main`` from its inputs to its
    outputs, with the constants they read), printed with its weights inline."""
    from lamina.dialects.func.ops import FuncOp, ReturnOp
    from lamina.ir.builtin import ModuleOp
    from lamina.ir.printer import print_operation

    from .transforms.address import used_values

    func = FuncOp.new("main", [v.type for v in sn.inputs], [], loc=sn.ops[0].location)
    entry = func.entry_block
    mapping = IRMapping()
    for v, a in zip(sn.inputs, entry.args):
        mapping.map(v, a)
    done: set[int] = set()

    def need(v: Value) -> None:
        """Clone into the subnet what ``v`` needs that it does not hold: a constant it reads, a
        reshape of one of its inputs (the subnet's inputs are the buffers, reshapes are views)."""
        if v in mapping.values:
            return
        d = v.defining_op()
        if d is None or id(d) in done or not (isinstance(d, ReshapeOp) or _plumbing(d)):
            return
        for o in d.operands:
            need(o)
        entry.append(d.clone(mapping))
        done.add(id(d))

    for op in sn.ops:
        for o in used_values(op):
            need(o)
        new = op.clone(mapping)
        for key in [k for k in new.attributes if k.startswith("npu.")]:
            del new.attributes[key]
        entry.append(new)
    outs = [mapping.lookup(v) for v in sn.outputs]
    entry.append(ReturnOp.create(outs, [], {}, {}, 0, (), sn.ops[-1].location))
    func.properties["function_type"] = TypeAttr(
        FunctionType([v.type for v in sn.inputs], [v.type for v in outs])
    )
    key = "onnx.name"
    func.properties["arg_attrs"] = ArrayAttr([DictionaryAttr({key: StringAttr(names[v])}) for v in sn.inputs])
    func.properties["res_attrs"] = ArrayAttr(
        [DictionaryAttr({key: StringAttr(names[v])}) for v in sn.outputs]
    )
    m = ModuleOp.new([func], loc=sn.ops[0].location)
    return print_operation(m, debuginfo=True)


def _plumbing(op: Operation) -> bool:
    """A constant or the absent operand (``top.None``): model plumbing a subnet clones, no layer."""
    return holds_constant(op) or (op.has_trait(ConstantLike) and not op.operands)


def _layers(func: Operation, names: dict[Value, str]) -> dict[str, str]:
    """Every layer (named result) of the planned function → where it runs, in network order."""
    out: dict[str, str] = {}
    for op in func.regions[0].blocks[0].ops:
        if _plumbing(op):
            continue
        if isinstance(op, GroupOp):
            for o in op.block.ops:
                if isinstance(o, CommandOp):
                    out[names.get(o.results[0]) or _loc_name(o)] = "npu"
            continue
        if isinstance(op, (CopyOp, ReshapeOp)):  # a layer by its own name, not the buffer's
            out[_loc_name(op)] = "npu"
            continue
        if not op.results or op.name == "func.return":
            continue
        out[_loc_name(op)] = "cpu"
    return out


def _loc_name(op: Operation) -> str:
    from lamina.ir.naming import result_names

    return result_names(op)[0] if op.results else op.name


def build_model(
    planned: Any, program: Program, chip: Chip, options: CompileOptions
) -> tuple[Model, dict[str, str]]:
    """The ``.lamina`` contents of a planned module and its program; and the layers' placement."""
    from lamina.execution.interpreter import io_names

    func = _main(planned)
    names = value_names(func)
    block = func.regions[0].blocks[0]
    ins_names, outs_names = io_names(func)
    ret = block.last_op
    assert ret is not None

    def desc(v: Value, name: str) -> TensorDesc:
        d = tensor_desc(v, func, name)
        return TensorDesc(
            name, tuple(d["shape"]), d["dtype"], d["scale"], d["zero_point"], max(d["address"], 0)
        )

    inputs = [desc(a, n) for a, n in zip(block.args, ins_names)]
    outputs = [desc(v, n) for v, n in zip(ret.operands, outs_names)]
    sections: list[Section] = [Section("weights", "weights", program.weights, align=4096)]
    subnets: list[SubnetDesc] = []
    tensors: dict[str, dict[str, Any]] = {}
    layers_meta: dict[str, list[str]] = {}
    for sn in program.subnets:
        for v in (*sn.inputs, *sn.outputs):
            tensors[names[v]] = tensor_desc(v, func, names[v])
        if sn.kind == "npu":
            sec = f"commands/{sn.name}"
            sections.append(Section("commands", sec, isa.encode(sn.commands)))
            layer_table = list(dict.fromkeys(sn.layers))
            index = {n: i for i, n in enumerate(layer_table)}
            layers_meta[sn.name] = {"names": layer_table, "of_command": [index[n] for n in sn.layers]}  # type: ignore[assignment]
            counts = commands_count(sn.commands)
        else:
            sec = f"cpu/{sn.name}"
            sections.append(Section("cpu_subnet", sec, _cpu_module(sn, names).encode("utf-8")))
            counts = {}
        subnets.append(
            SubnetDesc(
                sn.name,
                sn.kind,
                sec,
                tuple(names[v] for v in sn.inputs),
                tuple(names[v] for v in sn.outputs),
                counts,
            )
        )
    for t, v in zip(inputs, block.args):
        tensors.setdefault(t.name, tensor_desc(v, func, t.name))
    for t, v in zip(outputs, ret.operands):
        tensors.setdefault(t.name, tensor_desc(v, func, t.name))
    metadata = {
        "model_macs": model_macs(func),
        "lamina_version": lamina_version(),
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "mode": options.mode,
        "layer_group": not options.disable_layer_group,
        "chip_config": _chip_json(chip),
        "ddr": {
            "weight_bytes": program.weight_bytes,
            "activation_base": program.activation_base,
            "activation_bytes": program.activation_bytes,
        },
        "tensors": tensors,
        "groups": program.groups,
        "layers": layers_meta,
    }
    model = Model(
        target="npu",
        chip=chip.name,
        name=options.name,
        inputs=inputs,
        outputs=outputs,
        subnets=subnets,
        activation_bytes=program.activation_bytes,
        sections=sections,
        metadata=metadata,
    )
    need = program.activation_base + program.activation_bytes
    if need > chip.ddr_bytes:
        raise ToolError(f"the model needs {need} bytes of DDR; the chip {chip.name} has {chip.ddr_bytes}")
    return model, _layers(func, names)


def model_macs(func: Operation) -> int:
    """The multiply-accumulates of the model's layers that run on the NPU, each counted once (a
    sliced group may execute more: halos and channels recomputed per slice)."""
    from .simulator import TIU_TABLE

    total = 0
    for g in func.walk_ops(GroupOp):
        for op in g.block.ops:
            if isinstance(op, CommandOp) and op.command.KIND in ("conv", "depthwise", "matmul"):
                total += int(TIU_TABLE.lookup(op.command).work(op.local_command()))
    return total


def lamina_version() -> str:
    """The installed Lamina's version (``unknown`` when run from a checkout that is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lamina")
    except PackageNotFoundError:
        return "unknown"


def _chip_json(chip: Chip) -> dict[str, Any]:
    d = {f.name: getattr(chip, f.name) for f in fields(chip)}
    d["dtypes"] = list(chip.dtypes)
    d["tiu_ops_per_cycle"] = {k: dict(v) for k, v in chip.tiu_ops_per_cycle.items()}
    return json.loads(json.dumps(d))


def _report(
    program: Program, placement: dict[str, str], chip: Chip, model: Model, t_passes: float
) -> list[str]:
    npu = [k for k, v in placement.items() if v == "npu"]
    cpu = [k for k, v in placement.items() if v == "cpu"]
    n_groups = sum(1 for g in program.groups if g["kind"] == "group")
    n_copies = sum(1 for g in program.groups if g["kind"] == "copy")
    cmds = {"tiu": 0, "gdma": 0}
    for sn in program.subnets:
        for k, v in commands_count(sn.commands).items():
            cmds[k] += v
    lines = [
        f"{len(npu)} layer{'s' * (len(npu) != 1)} on the NPU in {n_groups} layer group{'s' * (n_groups != 1)} "
        f"and {n_copies} GDMA cop{'ies' if n_copies != 1 else 'y'} "
        f"({cmds['tiu']} TIU and {cmds['gdma']} GDMA commands), {len(cpu)} on the host CPU"
        + (": " + ", ".join(cpu[:8]) + (f" and {len(cpu) - 8} more" if len(cpu) > 8 else "") if cpu else ""),
        f"subnets: {', '.join(f'{s.name} ({s.kind})' for s in model.subnets)}; DDR: "
        f"{program.weight_bytes} bytes of weights, {program.activation_bytes} of activations",
    ]
    est = estimate(program, chip)
    if est is not None:
        cycles, macs = est
        useful = int(model.metadata.get("model_macs", macs))
        util = useful / (chip.peak_macs_per_cycle * cycles) if cycles else 0.0
        redo = (
            f"; {100 * (macs / useful - 1):.0f} % more MACs executed: halos recomputed"
            if useful and macs > useful * 1.005
            else ""
        )
        lines.append(
            f"estimated latency {cycles / chip.clock_hz * 1e6:.1f} us ({cycles} cycles at "
            f"{chip.clock_hz / 1e9:g} GHz), MAC utilization {100 * util:.1f} % of the model's MACs (NPU subnets{redo})"
        )
    lines.append(f"compiled in {t_passes:.2f} s of passes")
    return lines


def estimate(program: Program, chip: Chip) -> tuple[int, int] | None:
    """The cycles (over the NPU subnets, CPU subnets taking none) and MACs of the program, from the
    simulator's cycle model without data."""
    from .simulator import time_commands

    total, macs = 0, 0
    for sn in program.subnets:
        if sn.kind != "npu" or not sn.commands:
            continue
        cyc, m = time_commands(chip, sn.commands)
        total += cyc
        macs += m
    return total, macs

"""The CPU compiler: a lowered ``tpu`` module to a ``.lamina`` model of native code for one CPU.

1. ``convert-tpu-to-cpu`` and ``cpu-arena-alloc`` (:mod:`.lowering`) on a clone of the module: the
   kernel level (``cpu.kernel`` ops, :mod:`.dialect`);
2. code generation (:mod:`.codegen`): each kernel's LLVM function by its template, the packed
   weights, the entry points;
3. LLVM (:mod:`.jit`): each module optimized at O3 and emitted as machine code for the CPU name
   and feature string (the host's by default), on worker threads while codegen emits the next;
4. the container: target ``cpu``, chip the CPU name; sections ``weights`` (packed), ``object``
   (the machine code: one object per module, :mod:`.objects`), ``llvm_ir`` (the modules before
   optimization, recompiled when loaded on a CPU lacking a recorded feature), ``cpu_subnet``
   ``reference`` (the ops run by the reference
   executor, one function ``@k<index>`` per kernel); ``metadata["cpu"]`` the triple, features,
   arena and scratch sizes, where each output is read; ``metadata["kernels"]`` each kernel's
   template, layer, buffers and counts.
"""

from __future__ import annotations

import datetime
import time
from collections import Counter
from typing import Any

import numpy as np

from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, TypeAttr
from lamina.ir.constants import constant_array, value_constant
from lamina.ir.core import IRMapping, Operation
from lamina.ir.types import FunctionType, RankedTensorType

from ..base import CompileOptions, CompileResult
from ..container import Model, Section, SubnetDesc, TensorDesc
from .cache import default_cache
from .codegen import Program, generate
from .dialect import KernelOp, YieldOp
from .jit import CpuSpec, ModuleCompiler, host_spec
from .kernels.generic_ref import tensor_operands
from .lowering import assign_arena, convert_function, np_dtype
from .objects import pack_ir, pack_objects

__all__ = ["compile_module", "lower_to_kernels"]


def _main(module: Any) -> Operation:
    from lamina.execution.interpreter import find_main

    return find_main(module)


def lower_to_kernels(
    module: Any, spec: CpuSpec, exact: bool = False
) -> tuple[Any, dict[str, Any], dict[str, int]]:
    """A clone of the ``tpu`` module at the kernel level (converted, arena assigned), the plans by
    symbol, and the conversion's counts. ``exact``: an INT8 model (its ops no float GEMM feeds
    computed bit for bit)."""
    work = module.clone()
    func = _main(work)
    plans: dict[str, Any] = {}
    stats = convert_function(func, spec.isa, plans, exact=exact)
    assign_arena(func)
    return work, plans, stats


def compile_module(module: Any, options: CompileOptions, spec: CpuSpec | None = None) -> CompileResult:
    """Compile a ``tpu`` module (left untouched) for ``spec`` (default: this CPU)."""
    from lamina.execution.interpreter import io_names

    spec = spec or host_spec()
    t0 = time.perf_counter()
    work, plans, stats = lower_to_kernels(module, spec, exact=options.mode == "INT8")
    func = _main(work)
    t1 = time.perf_counter()
    cache = default_cache()
    with ModuleCompiler(spec, cache) as llvm_jobs:
        program = generate(func, spec.isa, plans, spec.triple, sink=llvm_jobs.submit)
        t2 = time.perf_counter()
        objs = llvm_jobs.finish()
    t3 = time.perf_counter()
    block = func.regions[0].blocks[0]
    ret = block.last_op
    assert ret is not None
    in_names, out_names = io_names(func)
    inputs = [_desc(a.type, n) for a, n in zip(block.args, in_names)]
    outputs = [_desc(v.type, n) for v, n in zip(ret.operands, out_names)]
    # where each output's bytes are after a run
    nin = len(block.args)
    extra_weights: list[np.ndarray] = []
    outputs_from: list[list[Any]] = []
    seen: dict[int, int] = {}
    wbytes = len(program.weights)
    for j, v in enumerate(ret.operands):
        d = v.defining_op()
        if d is None:
            outputs_from.append(["io", v.index])  # type: ignore[attr-defined]
        elif id(v) in seen:
            outputs_from.append(["io", seen[id(v)]])
        elif value_constant(v) is not None:
            arr = np.asarray(constant_array(v)).astype(np_dtype(v.type))
            pad = (-wbytes) % 64
            extra_weights.append(np.zeros(pad, np.uint8))
            outputs_from.append(["weights", wbytes + pad])
            extra_weights.append(np.frombuffer(arr.tobytes(), np.uint8))
            wbytes += pad + arr.nbytes
        else:
            outputs_from.append(["io", nin + j])
        seen.setdefault(id(v), nin + j)
    weights = program.weights + b"".join(a.tobytes() for a in extra_weights)
    sections = [
        Section("weights", "weights", weights, align=4096),
        Section("object", "object", pack_objects(objs)),
        Section("llvm_ir", "llvm_ir", pack_ir(program.modules).encode("utf-8")),
    ]
    reference_meta: dict[str, Any] = {}
    if program.reference:
        text, reference_meta = _reference_module(program, func)
        sections.append(Section("cpu_subnet", "reference", text.encode("utf-8")))
    kernels_json = [k.to_json() for k in program.kernels]
    metadata: dict[str, Any] = {
        "lamina_version": _version(),
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "mode": options.mode,
        "threads": options.threads,
        "cpu": {
            "triple": spec.triple,
            "features": spec.features,
            "vector_bytes": spec.isa.vector_bytes,
            "arena_bytes": program.arena_bytes,
            "scratch_bytes": program.scratch_bytes,
            "outputs_from": outputs_from,
        },
        "kernels": kernels_json,
        "reference": reference_meta,
        "model_macs": sum(k.macs for k in program.kernels),
    }
    model = Model(
        target="cpu",
        chip=spec.cpu,
        name=options.name,
        inputs=inputs,
        outputs=outputs,
        subnets=[
            SubnetDesc(
                "main",
                "cpu",
                "object",
                tuple(in_names),
                tuple(out_names),
                {"kernels": sum(1 for k in program.kernels if not k.alias)},
            )
        ],
        activation_bytes=program.arena_bytes,
        sections=sections,
        metadata=metadata,
    )
    total = time.perf_counter() - t0
    metadata["compile_seconds"] = round(total, 3)
    placement = {k.layer: "cpu" for k in program.kernels}
    report = _report(program, stats, spec, (t1 - t0, t2 - t1, t3 - t2, total), model, llvm_jobs)
    return CompileResult(model, placement, report)


def _desc(t: Any, name: str) -> TensorDesc:
    from lamina.dialects.tpu.families.common import is_quant
    from lamina.dialects.tpu.quantize import qparams

    scale, zp = 1.0, 0
    if is_quant(t):
        sc, z, axis, _, _ = qparams(t)
        if axis is None:
            scale, zp = float(sc), int(z)
    assert isinstance(t, RankedTensorType)
    dt = np_dtype(t)
    return TensorDesc(
        name, tuple(int(d) for d in t.shape), "bfloat16" if dt.name == "bfloat16" else dt.name, scale, zp, 0
    )


def _reference_module(program: Program, func: Operation) -> tuple[str, dict[str, Any]]:
    """The ops left to the reference executor as a module: one ``func.func @k<index>`` per kernel,
    from its tensor operands (in the op's operand order) to its results, with the constants it reads."""
    from lamina.dialects.func.ops import FuncOp, ReturnOp
    from lamina.ir.builtin import ModuleOp
    from lamina.ir.printer import print_operation

    funcs = []
    meta: dict[str, Any] = {}
    for idx, k in program.reference.items():
        assert isinstance(k, KernelOp)
        op = k.computes()[0]
        arg_idx = tensor_operands(op)
        ins = [op.operands[i] for i in arg_idx]
        f = FuncOp.new(f"k{idx}", [v.type for v in ins], [], loc=op.location)
        entry = f.entry_block
        mapping = IRMapping()
        for v, a in zip(ins, entry.args):
            if v not in mapping.values:
                mapping.map(v, a)
        # the kernel's whole region: the constants, the op, any ops fused after it
        yielded = []
        for o in k.block.ops:
            if isinstance(o, YieldOp):
                yielded = [mapping.lookup(v) for v in o.operands]
                break
            entry.append(o.clone(mapping))
        outs = [v for v in yielded if isinstance(v.type, RankedTensorType)]
        entry.append(ReturnOp.create(outs, [], {}, {}, 0, (), op.location))
        f.properties["function_type"] = TypeAttr(FunctionType([v.type for v in ins], [v.type for v in outs]))
        key = "onnx.name"
        f.properties["arg_attrs"] = ArrayAttr(
            [DictionaryAttr({key: StringAttr(f"in{i}")}) for i in range(len(ins))]
        )
        funcs.append(f)
        bufs = [(_dtype_name(v.type), [int(d) for d in v.type.shape]) for v in ins]
        bufs += [
            (_dtype_name(r.type), [int(d) for d in r.type.shape])
            for r in op.results
            if isinstance(r.type, RankedTensorType)
        ]
        meta[str(idx)] = {"function": f"k{idx}", "inputs": len(ins), "buffers": bufs, "op": op.name}
    m = ModuleOp.new(funcs, loc=func.location)
    return print_operation(m, debuginfo=True), meta


def _dtype_name(t: Any) -> str:
    dt = np_dtype(t)
    return "bfloat16" if dt.name == "bfloat16" else dt.name


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lamina")
    except PackageNotFoundError:
        return "unknown"


def _report(
    program: Program,
    stats: dict[str, int],
    spec: CpuSpec,
    times: tuple[float, ...],
    model: Model,
    llvm_jobs: ModuleCompiler,
) -> list[str]:
    lower, gen, llvm_s, total = times
    nmod = len(llvm_jobs.texts)
    threads = f"{llvm_jobs.jobs} thread" + ("s" if llvm_jobs.jobs > 1 else "")
    cache = llvm_jobs.cache
    cached = (
        f"; {llvm_jobs.hits} of {nmod} modules' machine code from the cache {cache.root}"
        if cache is not None and llvm_jobs.hits
        else ""
    )
    kernels = [k for k in program.kernels if not k.alias]
    by_t = Counter(k.template for k in kernels)
    lines = [
        f"compiled for {spec.cpu} ({spec.isa.vector_bytes * 8}-bit vectors) in {total:.2f} s "
        f"(kernel level {lower:.2f} s, codegen {gen:.2f} s, LLVM {llvm_s:.2f} s after it: "
        f"{nmod} modules, {llvm_jobs.cpu_seconds:.2f} CPU s on {threads}{cached})",
        f"{len(kernels)} kernels ({stats['fused']} ops fused, {stats['aliases']} reshapes as views): "
        + ", ".join(f"{t} {n}" for t, n in by_t.most_common()),
        f"activation arena {program.arena_bytes} bytes, scratch {program.scratch_bytes} bytes per thread, "
        f"weights {model.bytes_of('weights')} bytes, object code {model.bytes_of('object')} bytes",
    ]
    refs = [k for k in kernels if k.template == "reference"]
    if refs:
        ops = Counter(k.ops[0] for k in refs)
        lines.append(
            f"run by the reference executor ({len(refs)}): "
            + ", ".join(f"{o} x{n}" for o, n in ops.most_common())
            + " — layers "
            + ", ".join(k.layer for k in refs[:8])
            + (" ..." if len(refs) > 8 else "")
        )
    else:
        lines.append("run by the reference executor: none")
    skipped = [(k.layer, s) for k in program.kernels for s in k.skipped]
    for layer, (name, why) in skipped[:5]:
        lines.append(f"template {name} skipped on {layer}: {why}")
    return lines

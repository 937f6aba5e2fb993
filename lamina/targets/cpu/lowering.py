"""From ``tpu`` to the ``cpu`` kernel level: the two passes of the CPU target (both registered for
pipelines and ``lamina-opt``, both FileCheck-tested in ``tests/filecheck/cpu``).

1. ``convert-tpu-to-cpu{isa=host}`` — every ``tpu`` op of the main function becomes a ``cpu.kernel``
   whose region holds it (with the constants it reads): the template is the best one matching the op
   for the ISA (:func:`lamina.targets.cpu.kernels.select`), planned right away so that a template
   failing to plan is skipped (the next one takes the op); the kernel's ``cpu.weights`` are its
   packed weights' keys. **Fusion**: when the producer's template says it ``fuses(op, consumer)`` — a
   following activation, requant or cast reading the producer's single-use result, or an add of
   it and a tensor already computed when the producer's kernel runs (a residual: a model input or
   an earlier kernel's result, which becomes an input of the fused kernel) — the consumer moves
   into the producer's kernel, which then writes the consumer's result (the hook through which the
   fast GEMM templates take a relu, a residual add or a requant epilogue). A reshape of a tensor
   computed in the arena is an alias kernel (``cpu.alias``: the same bytes, no code); a reshape of a
   model input or into a model output is a copy.
2. ``cpu-arena-alloc`` — one activation arena: each kernel result that is not a model input/output
   gets a 64-byte aligned offset (``cpu.offsets``), reusing the bytes of tensors whose last reader
   has run (liveness over the kernel order; an alias extends its root's life); model inputs and
   outputs live in the caller's buffers (``cpu.io``: their slot, inputs then outputs). The function
   gets ``cpu.arena_bytes``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.ir.attributes import ArrayAttr, BoolAttr, DenseArrayAttr, IntegerAttr, StringAttr
from lamina.ir.constants import holds_constant, value_constant
from lamina.ir.core import Block, Operation, Region, Value
from lamina.ir.traits import ConstantLike, NotALayer, ReturnLike
from lamina.ir.types import RankedTensorType, i64
from lamina.passes import Option, Pass, Statistic, register_pass

from .dialect import KernelOp, YieldOp
from .kernels import Choice, candidates, plan_kernel
from .kernels.abi import Isa
from .kernels.generic_ir import np_dtype

__all__ = [
    "ALIGN",
    "ArenaAlloc",
    "ConvertTpuToCpu",
    "assign_arena",
    "convert_function",
    "is_plumbing",
    "nbytes",
    "np_dtype",
]

ALIGN = 64


def nbytes(t: Any) -> int:
    return int(np.prod(t.shape, dtype=np.int64)) * np_dtype(t).itemsize


def is_plumbing(op: Operation) -> bool:
    """A constant or the absent operand: read by kernels, never a kernel itself."""
    return holds_constant(op) or (op.has_trait(ConstantLike) and not op.operands)


def _main_block(func: Operation) -> Block:
    return func.regions[0].blocks[0]


def _tensor(v: Value) -> bool:
    return isinstance(v.type, RankedTensorType)


#: plans made by the conversion, by kernel symbol (the compiler passes its own dict; lamina-opt a new one)
Plans = dict[str, Choice]


#: ``tpu`` ops whose float forms are GEMMs — what an INT8 model's outputs may differ by (the same
#: list as :data:`lamina.flows.deploy.FLOAT_GEMMS`, which the deploy check reads)
FLOAT_GEMMS = frozenset({"tpu.Conv", "tpu.Deconv", "tpu.MatMul", "tpu.Gemm", "tpu.Attention", "tpu.Einsum"})


def exact_ops(block: Block) -> set[int]:
    """The ops of an INT8 model that must compute bit for bit as ``execute``: those no float GEMM
    feeds (what the deploy flow checks bit for bit downstream of them)."""
    from lamina.ir.types import FloatType

    tainted: set[int] = set()
    exact: set[int] = set()

    def float_gemm(o: Operation) -> bool:
        t = o.results[0].type if o.results else None
        return o.name in FLOAT_GEMMS and isinstance(getattr(t, "element_type", None), FloatType)

    for op in block.ops:
        nested: list[Operation] = list(op.walk_ops())
        gemm = any(float_gemm(o) for o in nested)
        if gemm or any(id(v) in tainted for v in op.operands):
            tainted.update(id(r) for r in op.results)
        else:
            exact.add(id(op))
    return exact


def is_exact(template: Any, op: Operation) -> bool:
    """Whether ``template`` computes ``op`` bit for bit as its ``execute`` (a template says so with
    ``exact_for(op)`` or an ``exact`` attribute; default: exact)."""
    f = getattr(template, "exact_for", None)
    return bool(f(op)) if f is not None else bool(getattr(template, "exact", True))


def convert_function(
    func: Operation, isa: Isa, plans: Plans | None = None, exact: bool = False
) -> dict[str, int]:
    """Wrap every op of ``func``'s body in a ``cpu.kernel`` (see the module docstring). With
    ``exact`` (an INT8 model), an op no float GEMM feeds gets a template computing it bit for bit
    (the reference executor where the best template's float arithmetic differs from numpy's).
    Returns counts (kernels, fused ops, aliases, reference kernels)."""
    plans = {} if plans is None else plans
    block = _main_block(func)
    ret = block.last_op
    returned = {id(v) for v in (ret.operands if ret is not None and ret.has_trait(ReturnLike) else [])}
    must_be_exact = exact_ops(block) if exact else set()
    stats = {"kernels": 0, "fused": 0, "aliases": 0, "reference": 0}
    index = 0
    for op in list(block.ops):  # top.Input: the argument itself (first: a fused add may read one)
        if op is not ret and op.has_trait(NotALayer) and len(op.operands) == 1 and len(op.results) == 1:
            op.results[0].replace_all_uses_with(op.operands[0])
            op.erase()
    for op in list(block.ops):
        if op.parent is not block or op is ret or is_plumbing(op) or isinstance(op, KernelOp):
            continue
        cands = candidates(op, isa)
        if id(op) in must_be_exact:
            cands = [t for t in cands if is_exact(t, op)]
        only = None
        for t in cands:
            if getattr(t, "alias", False):
                src = op.operands[0]
                if src.defining_op() is None or any(id(r) in returned for r in op.results):
                    continue  # a model input or output: a copy, not a view
            only = t.name
            break
        symbol = f"k{index}_{_symbol_part(op)}"
        choice = plan_kernel(op, symbol, isa, only=only, among=cands)
        if getattr(choice.template, "alias", False) and only != choice.template.name:
            choice = plan_kernel(
                op, symbol, isa, only=next(t.name for t in cands if not getattr(t, "alias", False))
            )
        fused = _fusable(choice.template, op, returned)
        if fused:  # the template plans again, told how many consumers it computes (cpu.fused)
            op.set_attr("cpu.fused", IntegerAttr(len(fused), i64))
            try:
                choice = Choice(choice.template, choice.template.plan(op, symbol, isa), choice.skipped)
            except Exception:
                del op.attributes["cpu.fused"]
                fused = []
        kernel = _wrap(op, fused, choice, symbol)
        plans[symbol] = choice
        index += 1
        stats["kernels"] += 1
        stats["fused"] += len(fused)
        if getattr(choice.template, "alias", False):
            kernel.set_attr("cpu.alias", BoolAttr(True))
            stats["aliases"] += 1
        if choice.template.name == "reference":
            stats["reference"] += 1
    # constants no longer read at the top level (each kernel holds its own)
    for op in reversed(list(block.ops)):
        if is_plumbing(op) and not op.has_uses():
            op.erase()
    return stats


def _symbol_part(op: Operation) -> str:
    short = op.name.split(".", 1)[-1]
    return "".join(c if c.isalnum() else "_" for c in short).lower()


def _fusable(template: Any, op: Operation, returned: set[int]) -> list[Operation]:
    """The consumers the template fuses into ``op``'s kernel (the epilogue hook: a template defines
    ``fuses(op, consumer) -> bool``); each reads the previous one's single-use result, plus
    constants or tensors computed before ``op``'s kernel runs (:func:`_ready`: a residual). The
    template then plans ``op`` again with ``cpu.fused`` (how many consumers) set on it, and finds
    them with :func:`~.kernels.generic_ir.fused_consumers`."""
    fuses = getattr(template, "fuses", None)
    if fuses is None:
        return []
    chain: list[Operation] = []
    cur = op
    while len(cur.results) == 1:
        r = cur.results[0]
        users = r.users
        if len(users) != 1 or id(r) in returned or len(r.uses) != 1:
            break
        u = users[0]
        if u.parent is not cur.parent or is_plumbing(u) or u.has_trait(ReturnLike) or u.regions:
            break
        if any(v is not r and not _ready(v, op) for v in u.operands):
            break
        try:
            ok = bool(fuses(op, u))
        except Exception:  # a template's bug must not stop the model compiling
            ok = False
        if not ok:
            break
        chain.append(u)
        cur = u
    return chain


def _ready(v: Value, op: Operation) -> bool:
    """Whether a fused consumer's other operand ``v`` is there when ``op``'s kernel runs: a constant
    (or no tensor), a model input, or the result of a kernel already placed (the conversion goes in
    block order, so every kernel before ``op`` is one and nothing after it is yet). Such a tensor
    becomes an input of the fused kernel, which keeps it alive (``cpu-arena-alloc``) until the kernel
    has run — a residual add's second operand, for instance."""
    if value_constant(v) is not None or not _tensor(v):
        return True
    d = v.defining_op()
    if d is None:
        return v.owner is op.parent
    return isinstance(d, KernelOp) and d.parent is op.parent


def _wrap(op: Operation, fused: list[Operation], choice: Choice, symbol: str) -> KernelOp:
    """``op`` (and the fused consumers after it) moved into a new ``cpu.kernel``."""
    ops = [op, *fused]
    inside = {id(o) for o in ops}
    inputs: list[Value] = []
    consts: list[Value] = []
    for o in ops:
        for v in o.operands:
            d = v.defining_op()
            if d is not None and id(d) in inside:
                continue
            if d is not None and is_plumbing(d):
                if v not in consts:
                    consts.append(v)
            elif v not in inputs:
                inputs.append(v)
    outs = list(ops[-1].results)
    if len(ops) == 1:
        outs = list(op.results)
    kernel = KernelOp.build(
        inputs=inputs,
        outputs=[v.type for v in outs],
        template=StringAttr(choice.template.name),
        symbol=StringAttr(symbol),
        body=Region(),
        loc=ops[-1].location if fused else op.location,
    )
    if choice.plan.weights:
        kernel.set_attr("cpu.weights", ArrayAttr([StringAttr(k) for k in choice.plan.weights]))
    parent = op.parent
    assert parent is not None
    parent.insert_before(op, kernel)
    body = Block([v.type for v in inputs])
    kernel.regions[0].add_block(body)
    for c in consts:
        d = c.defining_op()
        assert d is not None
        new = d.clone()
        body.append(new)
        for o in ops:
            for i, v in enumerate(o.operands):
                if v is c:
                    o.set_operand(i, new.results[c.index])  # type: ignore[attr-defined]
    for v, r in zip(outs, kernel.results):
        v.replace_all_uses_with(r)
    for o in ops:
        o.detach()
        for i, v in enumerate(o.operands):
            if v in inputs:
                o.set_operand(i, body.args[inputs.index(v)])
        body.append(o)
    body.append(YieldOp.build(values=outs, loc=ops[-1].location))
    return kernel


# ---- the arena ---------------------------------------------------------------------------------------


def assign_arena(func: Operation) -> int:
    """Offsets in one activation arena for the kernels' results (see the module docstring); returns
    the arena's size in bytes."""
    block = _main_block(func)
    ret = block.last_op
    kernels = [o for o in block.ops if isinstance(o, KernelOp)]
    io: dict[int, int] = {}
    nin = len(block.args)
    for i, a in enumerate(block.args):
        io[id(a)] = i
    if ret is not None and ret.has_trait(ReturnLike):
        for j, v in enumerate(ret.operands):
            io.setdefault(id(v), nin + j)
    root: dict[int, Value] = {}

    def root_of(v: Value) -> Value:
        return root.get(id(v), v)

    for k in kernels:
        if k.get_attr("cpu.alias") is not None and k.inputs:
            for r in k.results:
                root[id(r)] = root_of(k.inputs[0])
    last: dict[int, int] = {}
    for i, k in enumerate(kernels):
        for v in k.inputs:
            last[id(root_of(v))] = i
        for r in k.results:
            rr = root_of(r)
            last[id(rr)] = max(last.get(id(rr), i), i)
    free: list[tuple[int, int]] = []  # (offset, size), sorted by offset
    live: dict[int, tuple[int, int, int]] = {}  # root id -> (offset, size, last use)
    offset_of: dict[int, int] = {}
    top = 0

    def release(upto: int) -> None:
        for key in [k for k, (_, _, lu) in live.items() if lu < upto]:
            off, size, _ = live.pop(key)
            free.append((off, size))
        free.sort()
        merged: list[tuple[int, int]] = []
        for off, size in free:
            if merged and merged[-1][0] + merged[-1][1] == off:
                merged[-1] = (merged[-1][0], merged[-1][1] + size)
            else:
                merged.append((off, size))
        free[:] = merged

    for i, k in enumerate(kernels):
        release(i)
        offs, slots = [], []
        for r in k.results:
            slot = io.get(id(r), -1)
            rr = root_of(r)
            if slot >= 0 or not _tensor(r):
                offs.append(-1)
                slots.append(slot)
                continue
            if rr is not r:  # an alias: its root's bytes
                offs.append(offset_of.get(id(rr), -1))
                slots.append(io.get(id(rr), -1))
                continue
            size = max(ALIGN, (nbytes(r.type) + ALIGN - 1) // ALIGN * ALIGN)
            at = next((j for j, (_, s) in enumerate(free) if s >= size), None)
            if at is None:
                if free and free[-1][0] + free[-1][1] == top:  # grow the last free block
                    off = free.pop()[0]
                    top = off + size
                else:
                    off, top = top, top + size
            else:
                off, s = free.pop(at)
                if s > size:
                    free.insert(at, (off + size, s - size))
            live[id(r)] = (off, size, last.get(id(r), i))
            offset_of[id(r)] = off
            offs.append(off)
            slots.append(-1)
        k.set_attr("cpu.offsets", DenseArrayAttr(i64, offs))
        if any(s >= 0 for s in slots):
            k.set_attr("cpu.io", DenseArrayAttr(i64, slots))
    func.set_attr("cpu.arena_bytes", IntegerAttr(top, i64))
    return top


# ---- the passes --------------------------------------------------------------------------------------


def _funcs(op: Operation) -> list[Operation]:
    from lamina.dialects.func.ops import FuncOp

    return [o for o in op.walk_ops(FuncOp) if o.regions and o.regions[0].blocks]


@register_pass
class ConvertTpuToCpu(Pass):
    name = "convert-tpu-to-cpu"
    summary = "Every tpu op as a cpu.kernel of the best template for the ISA (fusing epilogues)"
    display_name = "ConvertTpuToCpuPass"
    op_name = "builtin.module"

    isa = Option(str, "host", "The ISA: host, avx512, avx2 or sse (the host narrowed)")
    exact = Option(bool, False, "INT8: ops no float GEMM feeds computed bit for bit as execute")

    kernels = Statistic("kernels", "Kernels planned")
    fused = Statistic("fused", "Ops fused into their producer's kernel")
    reference = Statistic("reference", "Kernels run by the reference executor")

    def __init__(self, plans: Plans | None = None, **options: Any) -> None:
        super().__init__(**options)
        self.plans = plans

    def run_on_operation(self, op: Operation) -> Any:
        from .jit import spec_for

        isa = spec_for(self.isa).isa
        for f in _funcs(op):
            s = convert_function(f, isa, self.plans, exact=self.exact)
            self.kernels += s["kernels"]
            self.fused += s["fused"]
            self.reference += s["reference"]


@register_pass
class ArenaAlloc(Pass):
    name = "cpu-arena-alloc"
    summary = "One activation arena: kernel results at offsets reused by liveness"
    display_name = "ArenaAllocPass"
    op_name = "builtin.module"

    arena_bytes = Statistic("arena-bytes", "Bytes of the activation arena")

    def run_on_operation(self, op: Operation) -> Any:
        for f in _funcs(op):
            self.arena_bytes += assign_arena(f)

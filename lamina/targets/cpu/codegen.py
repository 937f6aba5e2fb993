"""Code generation for the kernel level: every ``cpu.kernel`` emitted by its template, the weights
packed into one section, and the whole-model entry points.

``void @model_run(i8* arena, i8* weights, i8** io, i64 tid, i64 nthreads)`` goes over every kernel
in order, each with its buffer pointers (arena + offset, weights + offset, ``io[slot]`` for a model
input/output, the scratch region at the arena's end), and runs the parts ``(part, nparts=nthreads)``
of it that it claims (``@lamina_parts``): its own part ``tid`` first, then any part no thread has
claimed yet — a thread that comes late (woken late, preempted by another process) finds its parts
done by the others instead of holding them up. Kernels are grouped in segments: a kernel that reads
what a kernel of its segment writes, or writes what such a kernel reads or writes, starts the next
one, and no thread claims a part of it before every part of the previous segment is done (a count
per segment: ``@lamina_wait`` spins briefly, then sleeps on it with ``futex``; the thread finishing
the segment wakes the sleepers). The run ends at a barrier of all the threads (an atomic counter
and generation, the same spin then sleep), where the last to arrive resets the claims and counts.
``@model_run_prof`` is the same with ``i64* times`` as a sixth argument: each thread stores
``clock_gettime(CLOCK_MONOTONIC)`` nanoseconds before and after each kernel (the parts it ran of it)
at ``times[2 * (tid * kernels + k)]`` (the profile).

Each template emits into a module of its own, compiled on its own (:class:`~.jit.ModuleCompiler`:
``sink`` hands each module over as soon as it is emitted, so LLVM runs beside the emission).
A kernel whose code key (:func:`~.kernels.codekey.code_key`, known from its template, op, plan and
ISA before emission) is an earlier kernel's calls that kernel's function: it is not emitted at all.
The others are emitted, and one whose IR (its name elided) is an earlier one's shares that function
too. A template whose ``emit`` raises is replaced by the next matching one (reported)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import llvmlite.ir as ir
import numpy as np

from lamina.ir.constants import constant_array, value_constant
from lamina.ir.core import Operation, Value
from lamina.ir.naming import result_names
from lamina.ir.types import RankedTensorType

from .dialect import KernelOp
from .kernels import Choice, plan_kernel
from .kernels.abi import Isa
from .kernels.codekey import code_key
from .kernels.generic_ir import I8P, I32, I64, VOID, const
from .kernels.generic_ref import HOST_CALLBACK, HOST_TYPE
from .lowering import ALIGN, Plans, np_dtype

__all__ = ["KernelInfo", "Program", "generate"]

#: the futex syscall's number by architecture (Linux); elsewhere the barrier sleeps with sched_yield
FUTEX_SYSCALL = {"x86_64": 202, "aarch64": 98, "riscv64": 98}
FUTEX_WAIT_PRIVATE, FUTEX_WAKE_PRIVATE = 128, 129
SPIN = 4000


@dataclass
class KernelInfo:
    """One kernel as the runtime and the profile see it."""

    index: int
    symbol: str
    template: str
    layer: str
    ops: list[str]
    buffers: list[tuple[str, int]]  # (arena|weights|io|scratch|null, offset or slot)
    barrier: bool
    macs: int = 0
    bytes: int = 0
    scratch_bytes: int = 0
    alias: bool = False
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: the LLVM function called (another kernel's when their code is the same)
    function: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "symbol": self.symbol,
            "template": self.template,
            "layer": self.layer,
            "ops": self.ops,
            "buffers": [list(b) for b in self.buffers],
            "barrier": self.barrier,
            "macs": self.macs,
            "bytes": self.bytes,
            "scratch_bytes": self.scratch_bytes,
            "alias": self.alias,
            "skipped": [list(s) for s in self.skipped],
            "function": self.function or self.symbol,
        }


@dataclass
class Program:
    kernels: list[KernelInfo]
    weights: bytes
    arena_bytes: int
    scratch_bytes: int
    modules: list[str]
    reference: dict[int, Operation]  # kernel index -> its kernel op (run by the interpreter)


class _Weights:
    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.size = 0
        self.keys: dict[Any, int] = {}

    def add(self, a: np.ndarray, key: Any = None) -> int:
        if key is not None and key in self.keys:
            return self.keys[key]
        pad = (-self.size) % ALIGN
        if pad:
            self.chunks.append(b"\0" * pad)
            self.size += pad
        off = self.size
        raw = np.ascontiguousarray(a).tobytes()
        self.chunks.append(raw)
        self.size += len(raw)
        if key is not None:
            self.keys[key] = off
        return off

    def data(self) -> bytes:
        return b"".join(self.chunks)


def _resolve(kernel: KernelOp, op: Operation, spec: tuple[str, Any], plan: Any) -> tuple[str, Any]:
    """What a plan's buffer entry names: ``("value", v)``, ``("const", array)`` or
    ``("weight", key)``/``("scratch", None)``."""
    kind, key = spec
    if kind in ("weight", "scratch"):
        return kind, key
    if kind == "in":
        if isinstance(key, Value):
            v = key
        elif isinstance(key, int):
            v = op.operands[key]
        else:
            v = getattr(op, key)
        return ("const", v) if value_constant(v) is not None else ("value", v)
    if kind == "out":
        if isinstance(key, Value):
            v = key
        elif isinstance(key, int):
            v = op.results[key]
        else:
            v = getattr(op, key)
        return "value", v
    raise ValueError(f"unknown buffer kind {kind!r}")


def generate(
    func: Operation,
    isa: Isa,
    plans: Plans,
    triple: str = "x86_64-unknown-linux-gnu",
    check_keys: bool = False,
    sink: Callable[[str], Any] | None = None,
) -> Program:
    """Emit the kernels of a converted, arena-assigned function and its entry points for ``triple``
    (the barrier's futex call and spin hint depend on it). ``check_keys`` (the tests): emit the
    kernels whose code key is an earlier one's too, and fail unless their IR is that kernel's.
    ``sink``: called with each module's text as it is added to ``Program.modules``."""
    block = func.regions[0].blocks[0]
    kernels = [o for o in block.ops if isinstance(o, KernelOp)]
    ret = block.last_op
    assert ret is not None
    arena = int(func.get_attr("cpu.arena_bytes").value)  # type: ignore[union-attr]
    nin = len(block.args)
    # where each function-level value lives
    loc: dict[int, tuple[str, int]] = {}
    for i, a in enumerate(block.args):
        loc[id(a)] = ("io", i)
    for k in kernels:
        offs, slots = _locations(k)
        for r, off, s in zip(k.results, offs, slots):
            loc[id(r)] = ("io", int(s)) if s >= 0 else ("arena", int(off)) if off >= 0 else ("null", 0)
    for j, v in enumerate(ret.operands):
        loc.setdefault(id(v), ("io", nin + j))
    weights = _Weights()
    infos: list[KernelInfo] = []
    modules: list[str] = []

    def add_module(text: str) -> None:
        modules.append(text)
        if sink is not None:
            sink(text)

    reference: dict[int, Operation] = {}
    scratch = 0
    same_code: dict[str, str] = {}  # a kernel's IR with its name elided -> the function emitted for it
    by_key: dict[Any, str] = {}  # a code key -> the function emitted for it
    text_of: dict[str, str] = {}  # (check_keys) a function -> its IR with its name elided
    for idx, k in enumerate(kernels):
        symbol = str(k.symbol)
        inner = k.computes()
        op = inner[0]
        choice: Choice | None = plans.get(symbol)
        if choice is None or choice.template.name != str(k.template):
            choice = plan_kernel(op, symbol, isa, only=str(k.template))
        alias = k.get_attr("cpu.alias") is not None
        mod_text = None
        shared = None
        key: Any = None
        while not alias:
            key = code_key(choice.template, op, choice.plan, isa)
            shared = by_key.get(key)
            if shared is not None and not check_keys:
                break  # the code is an earlier kernel's: not emitted
            try:
                m = ir.Module(symbol)
                choice.template.emit(m, choice.plan, op, isa)
                mod_text = str(m)
                break
            except Exception as e:
                skipped = [*choice.skipped, (choice.template.name, f"emit: {type(e).__name__}: {e}")]
                nxt = plan_kernel(op, symbol, isa)
                tried = {s[0] for s in skipped}
                while nxt.template.name in tried:
                    from .kernels import candidates

                    rest = [t for t in candidates(op, isa) if t.name not in tried]
                    nxt = plan_kernel(op, symbol, isa, only=rest[0].name)
                nxt.skipped = skipped + nxt.skipped
                choice = nxt
                k.properties["template"] = type(k.properties["template"])(choice.template.name)  # type: ignore[call-arg]
        function = symbol
        if mod_text is not None:
            text = mod_text.replace(f'"{symbol}"', '"@kernel"')
            if shared is not None:  # check_keys: the key said the code is ``shared``'s
                if text_of[shared] != text:
                    raise AssertionError(
                        f"{symbol} ({choice.template.name}): the code key of {shared}, other code"
                    )
                function = shared
            else:
                function = same_code.setdefault(text, symbol)
                if function == symbol:
                    add_module(mod_text)
                    if check_keys:
                        text_of[symbol] = text
            by_key.setdefault(key, function)
        elif shared is not None:
            function = shared
        # the buffers, resolved against the kernel's operands/results
        arg_of = {id(a): v for a, v in zip(k.block.args, k.inputs)}
        yielded = {id(v): r for v, r in zip(k.block.last_op.operands, k.results)}  # type: ignore[union-attr]
        bufs: list[tuple[str, int]] = []
        for n, spec in enumerate(choice.plan.buffers):
            try:
                kind, what = _resolve(k, op, spec, choice.plan)
            except (IndexError, AttributeError) as e:
                raise AssertionError(
                    f"{symbol} ({choice.template.name}, {op.name}): bad buffer {spec}: {e}"
                ) from None
            if kind == "weight":
                bufs.append(("weights", weights.add(choice.plan.weights[what], (symbol, what))))
            elif kind == "scratch":
                bufs.append(("scratch", 0))
            elif kind == "const":
                arr = constant_array(what)
                if arr is None:
                    bufs.append(("null", 0))
                else:
                    arr = np.asarray(arr).astype(np_dtype(what.type), copy=False)
                    bufs.append(("weights", weights.add(arr, (symbol, "const", n))))
            else:
                v = what
                if not isinstance(v.type, RankedTensorType):
                    bufs.append(("null", 0))
                    continue
                outer: Value | None = arg_of.get(id(v))
                if outer is None and any(v is i for i in k.inputs):
                    outer = v  # a plan made before the kernel existed names the outer tensor
                if outer is None:
                    outer = yielded.get(id(v))
                    if outer is None and spec[0] == "out" and isinstance(spec[1], int):
                        outer = k.results[spec[1]]  # a fused epilogue writes the kernel's result
                if outer is None:
                    raise AssertionError(f"{symbol}: buffer {spec} is neither an operand nor a result")
                bufs.append(loc[id(outer)])
        scratch = max(scratch, (choice.plan.scratch_bytes + ALIGN - 1) // ALIGN * ALIGN)
        names = result_names(op) if op.results else [op.name]
        info = KernelInfo(
            idx,
            symbol,
            choice.template.name,
            result_names(inner[-1])[0] if inner[-1].results else names[0],
            [o.name for o in inner],
            bufs,
            False,
            int(choice.plan.macs),
            int(choice.plan.bytes),
            int(choice.plan.scratch_bytes),
            alias,
            list(choice.skipped),
            function,
        )
        infos.append(info)
        if choice.template.name == "reference":
            reference[idx] = k
    _barriers(infos, kernels)
    scratch_base = (arena + ALIGN - 1) // ALIGN * ALIGN
    add_module(_entry_module(infos, scratch_base, profile=False, triple=triple))
    add_module(_entry_module(infos, scratch_base, profile=True, define_globals=False, triple=triple))
    return Program(infos, weights.data(), scratch_base, scratch, modules, reference)


def _barriers(infos: list[KernelInfo], kernels: list[KernelOp]) -> None:
    """Mark the kernels before which the threads must meet: one that reads what a kernel since the
    last barrier writes, or writes what such a kernel reads or writes (byte ranges in the arena and
    the IO buffers; scratch is shared by every kernel), and around every reference kernel."""
    from .lowering import nbytes

    def ranges(k: KernelOp, info: KernelInfo, outputs: bool) -> list[tuple[str, int, int]]:
        out = []
        n_out = len(k.results)
        values = list(k.results) if outputs else list(k.inputs)
        del n_out
        for (space, off), v in zip(_value_buffers(info, k, outputs), values):
            if space in ("arena", "io") and isinstance(v.type, RankedTensorType):
                out.append((space, off, off + nbytes(v.type)))
        if outputs and info.scratch_bytes:
            out.append(("scratch", 0, 1))
        return out

    written: list[tuple[str, int, int]] = []
    touched: list[tuple[str, int, int]] = []
    for info, k in zip(infos, kernels):
        if info.alias:
            continue
        reads = ranges(k, info, False)
        writes = ranges(k, info, True)

        def hits(a: list[tuple[str, int, int]], b: list[tuple[str, int, int]]) -> bool:
            return any(x[0] == y[0] and x[1] < y[2] and y[1] < x[2] for x in a for y in b)

        ref = info.template == "reference"
        dependent = (
            ref or hits(reads, written) or hits(writes, touched) or (touched and touched[-1][0] == "ref")
        )
        if (written or touched) and dependent:
            info.barrier = True
            written, touched = [], []
        written += writes
        touched += reads + writes
        if ref:
            touched.append(("ref", 0, 1))


def _locations(k: KernelOp) -> tuple[list[int], list[int]]:
    """A kernel's results' arena offsets and IO slots (-1: none), from ``cpu-arena-alloc``."""
    offs = [int(v) for v in getattr(k.get_attr("cpu.offsets"), "values", [])]
    ioa = k.get_attr("cpu.io")
    slots = [int(v) for v in getattr(ioa, "values", [])] if ioa is not None else [-1] * len(offs)
    return offs, slots


def _value_buffers(info: KernelInfo, k: KernelOp, outputs: bool) -> list[tuple[str, int]]:
    """The locations of a kernel's inputs or results (from the arena/io attributes)."""
    if outputs:
        offs, slots = _locations(k)
        return [("io", int(s)) if s >= 0 else ("arena", int(o)) for o, s in zip(offs, slots)]
    out = []
    for v in k.inputs:
        d = v.defining_op()
        if d is None:
            out.append(("io", v.index))  # type: ignore[attr-defined]
        elif isinstance(d, KernelOp):
            locs = _value_buffers(info, d, True)
            out.append(locs[v.index])  # type: ignore[attr-defined]
        else:
            out.append(("null", 0))
    return out


# ---- the entry points ---------------------------------------------------------------------------------


def _segments(infos: list[KernelInfo]) -> tuple[list[int], list[int]]:
    """Each kernel's segment (the kernels between two barriers; -1 for an alias) and each
    segment's number of kernels."""
    seg_of, counts = [], [0]
    for info in infos:
        if info.alias:
            seg_of.append(-1)
            continue
        if info.barrier and counts[-1]:
            counts.append(0)
        seg_of.append(len(counts) - 1)
        counts[-1] += 1
    return seg_of, counts


def _entry_module(
    infos: list[KernelInfo],
    scratch_base: int,
    profile: bool,
    define_globals: bool = True,
    triple: str = "x86_64-unknown-linux-gnu",
) -> str:
    m = ir.Module("model_prof" if profile else "model")
    kty = ir.FunctionType(VOID, [I8P.as_pointer(), I64, I64])
    args = [I8P, I8P, I8P.as_pointer(), I64, I64] + ([I64.as_pointer()] if profile else [])
    fn = ir.Function(m, ir.FunctionType(VOID, args), "model_run_prof" if profile else "model_run")
    arena, weights, io, tid, nthreads = fn.args[:5]
    seg_of, counts = _segments(infos)
    claims = _global(m, "lamina_claims", ir.ArrayType(I64, max(len(infos), 1)), define_globals)
    done = _global(m, "lamina_done", ir.ArrayType(I32, len(counts)), define_globals)
    sleepers = _global(m, "lamina_wait_sleepers", I32, define_globals)
    barrier = _barrier_function(m, define_globals, triple, reset=[claims, done])
    parts, wait = _sharing_functions(m, define_globals, triple, sleepers)
    host = ir.GlobalVariable(m, HOST_TYPE.as_pointer(), HOST_CALLBACK)
    if define_globals:
        host.initializer = ir.Constant(HOST_TYPE.as_pointer(), None)
    else:
        host.linkage = "external"
    clock = _clock_function(m) if profile else None
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    nmax = max([len(i.buffers) for i in infos] + [1])
    arr = b.alloca(ir.ArrayType(I8P, nmax), name="bufs")
    arrp = b.bitcast(arr, I8P.as_pointer())
    scratch = b.gep(arena, [const(scratch_base)])
    decl: dict[str, ir.Function] = {}
    nk = len(infos)
    i0 = ir.Constant(I32, 0)

    def done_at(s: int) -> Any:
        return b.gep(done, [i0, ir.Constant(I32, s)])

    for info in infos:
        if info.alias:
            continue
        s = seg_of[info.index]
        if info.barrier and s > 0:
            # the previous segment's parts all done (by whichever threads ran them)
            b.call(wait, [nthreads, done_at(s - 1), b.trunc(b.mul(nthreads, const(counts[s - 1])), I32)])
        for j, (space, off) in enumerate(info.buffers):
            if space == "arena":
                p = b.gep(arena, [const(off)])
            elif space == "weights":
                p = b.gep(weights, [const(off)])
            elif space == "io":
                p = b.load(b.gep(io, [const(off)]))
            elif space == "scratch":
                p = scratch
            else:
                p = ir.Constant(I8P, None)
            b.store(p, b.gep(arrp, [const(j)]))
        f = decl.get(info.function)
        if f is None:
            f = decl[info.function] = ir.Function(m, kty, info.function)
            f.attributes.add("noinline")
        call = [
            f,
            arrp,
            tid,
            nthreads,
            b.gep(claims, [i0, ir.Constant(I32, info.index)]),
            done_at(s),
            b.trunc(b.mul(nthreads, const(counts[s])), I32),
        ]
        if profile:
            assert clock is not None
            times = fn.args[5]
            slot = b.mul(b.add(b.mul(tid, const(nk)), const(info.index)), const(2))
            b.store(b.call(clock, []), b.gep(times, [slot]))
            b.call(parts, call)
            b.store(b.call(clock, []), b.gep(times, [b.add(slot, const(1))]))
        else:
            b.call(parts, call)
    b.call(barrier, [nthreads])  # every thread is done before the caller reads the outputs
    b.ret_void()
    return str(m)


def _global(m: ir.Module, name: str, ty: ir.Type, define: bool) -> ir.GlobalVariable:
    g = ir.GlobalVariable(m, ty, name)
    if define:
        g.initializer = ir.Constant(ty, None)
        g.align = 64
    else:
        g.linkage = "external"
    return g


def _futex(triple: str) -> tuple[int | None, bool]:
    """The futex syscall's number on ``triple`` (None: none) and whether it is x86 (``pause``)."""
    arch = triple.split("-", 1)[0]
    return (FUTEX_SYSCALL.get(arch) if "linux" in triple else None), arch in ("x86_64", "i686", "i386")


def _decl(m: ir.Module, name: str, ty: ir.FunctionType) -> ir.Function:
    """The module's function ``name``, declared with ``ty`` unless it is already."""
    f = m.globals.get(name)
    return f if isinstance(f, ir.Function) else ir.Function(m, ty, name)


SYSCALL_TY = ir.FunctionType(I64, [I64], var_arg=True)


def wake_sleepers(b: ir.IRBuilder, triple: str, word: Any, sleepers: Any) -> None:
    """``futex``-wake every thread sleeping on ``word`` — the syscall only when ``sleepers`` counts
    one (or one about to sleep: seq_cst, as :func:`await_word` counts itself): none where the threads
    meet within the spin. Nothing without futex (the waiters ``sched_yield``)."""
    futex, _ = _futex(triple)
    if futex is None:
        return
    syscall = _decl(b.module, "syscall", SYSCALL_TY)
    asleep = b.icmp_unsigned("!=", b.load_atomic(sleepers, "seq_cst", 4), ir.Constant(I32, 0))
    with b.if_then(asleep):
        wake = [const(futex), b.bitcast(word, I8P), const(FUTEX_WAKE_PRIVATE), ir.Constant(I32, 0x7FFFFFFF)]
        b.call(syscall, wake)


def await_word(
    b: ir.IRBuilder,
    triple: str,
    word: Any,
    sleepers: Any,
    ready: Callable[[Any], Any],
    done: ir.Block,
    spins: int = SPIN,
) -> None:
    """From the current block, branch to ``done`` once ``ready(value of the i32 word)`` holds: spin
    ``spins`` ``pause``s, then sleep — count this thread in ``sleepers``, look again (seq_cst on both
    sides: the thread that moves the word sees the count raised, or this load sees the new value),
    ``futex``-wait while the word still holds the value seen (it returns at once if it moved
    since), and look again; without futex, ``sched_yield`` between looks."""
    futex, x86 = _futex(triple)
    m, fn = b.module, b.block.function
    pre = b.block
    spin, spin_more = fn.append_basic_block("spin"), fn.append_basic_block("spin_more")
    sleep, look = fn.append_basic_block("sleep"), fn.append_basic_block("look")
    b.branch(spin)
    b.position_at_end(spin)
    i = b.phi(I64)
    i.add_incoming(const(0), pre)
    b.cbranch(ready(b.load_atomic(word, "acquire", 4)), done, spin_more)
    b.position_at_end(spin_more)
    if x86:
        b.call(_decl(m, "llvm.x86.sse2.pause", ir.FunctionType(VOID, [])), [])
    nxt = b.add(i, const(1))
    i.add_incoming(nxt, spin_more)
    b.cbranch(b.icmp_signed("<", nxt, const(spins)), spin, sleep)
    b.position_at_end(sleep)
    if futex is not None:
        syscall = _decl(m, "syscall", SYSCALL_TY)
        b.atomic_rmw("add", sleepers, ir.Constant(I32, 1), "seq_cst")
        v = b.load_atomic(word, "seq_cst", 4)
        with b.if_then(b.not_(ready(v))):
            b.call(
                syscall,
                [const(futex), b.bitcast(word, I8P), const(FUTEX_WAIT_PRIVATE), v, ir.Constant(I8P, None)],
            )
        b.atomic_rmw("sub", sleepers, ir.Constant(I32, 1), "seq_cst")
    else:
        b.call(_decl(m, "sched_yield", ir.FunctionType(I32, [])), [])
    b.branch(look)
    b.position_at_end(look)
    b.cbranch(ready(b.load_atomic(word, "acquire", 4)), done, sleep)


def _sharing_functions(
    m: ir.Module, define: bool, triple: str, sleepers: ir.GlobalVariable
) -> tuple[ir.Function, ir.Function]:
    """``void @lamina_parts(kernel, bufs, tid, n, i64* claims, i32* done, i32 total)``: run the
    parts of one kernel this thread claims — its own part ``tid`` first, then any other part no
    thread has claimed yet (``claims``: a bit per part below 64, set by the thread that runs it;
    parts from 64 up are their own thread's) —, adding one to the segment's ``done`` count per
    part (the ``futex`` wake when it reaches ``total`` and a thread sleeps). One thread calls the
    kernel's part 0 of 1 directly. ``void @lamina_wait(n, i32* done, i32 total)``: return once
    ``done`` reaches ``total`` (spin ``SPIN`` pauses, then sleep on the word)."""
    kty = ir.FunctionType(VOID, [I8P.as_pointer(), I64, I64])
    pty = ir.FunctionType(
        VOID, [kty.as_pointer(), I8P.as_pointer(), I64, I64, I64.as_pointer(), I32.as_pointer(), I32]
    )
    parts = ir.Function(m, pty, "lamina_parts")
    wait = ir.Function(m, ir.FunctionType(VOID, [I64, I32.as_pointer(), I32]), "lamina_wait")
    for f in (parts, wait):
        f.attributes.add("noinline")
    if not define:
        return parts, wait
    ctz = ir.Function(m, ir.FunctionType(I64, [I64, ir.IntType(1)]), "llvm.cttz.i64")

    # lamina_parts
    kfn, bufs, tid, n, claims, done, total = parts.args
    b = ir.IRBuilder(parts.append_basic_block("entry"))
    alone = parts.append_basic_block("alone")
    shared = parts.append_basic_block("shared")
    b.cbranch(b.icmp_signed("<=", n, const(1)), alone, shared)
    b.position_at_end(alone)
    b.call(kfn, [bufs, tid, n])
    b.ret_void()

    def finished() -> None:
        now = b.add(b.atomic_rmw("add", done, ir.Constant(I32, 1), "seq_cst"), ir.Constant(I32, 1))
        with b.if_then(b.icmp_unsigned("==", now, total)):
            wake_sleepers(b, triple, done, sleepers)

    b.position_at_end(shared)
    full = b.select(
        b.icmp_signed("<", n, const(64)), b.sub(b.shl(const(1), n), const(1)), ir.Constant(I64, -1)
    )
    owned = b.icmp_signed(">=", tid, const(64))
    with b.if_else(owned) as (mine, claimable):
        with mine:  # parts from 64 up: never claimed by another thread
            b.call(kfn, [bufs, tid, n])
            finished()
        with claimable:
            bit = b.shl(const(1), tid)
            old = b.atomic_rmw("or", claims, bit, "acq_rel")
            with b.if_then(b.icmp_unsigned("==", b.and_(old, bit), const(0))):
                b.call(kfn, [bufs, tid, n])
                finished()
    steal = parts.append_basic_block("steal")
    take = parts.append_basic_block("take")
    out = parts.append_basic_block("out")
    b.branch(steal)
    b.position_at_end(steal)
    free = b.and_(b.xor(b.load_atomic(claims, "monotonic", 8), const(-1)), full)
    b.cbranch(b.icmp_unsigned("==", free, const(0)), out, take)
    b.position_at_end(take)
    p = b.call(ctz, [free, ir.Constant(ir.IntType(1), 1)])
    bit = b.shl(const(1), p)
    old = b.atomic_rmw("or", claims, bit, "acq_rel")
    with b.if_then(b.icmp_unsigned("==", b.and_(old, bit), const(0))):
        b.call(kfn, [bufs, p, n])
        finished()
    b.branch(steal)
    b.position_at_end(out)
    b.ret_void()

    # lamina_wait
    n, word, total = wait.args
    b = ir.IRBuilder(wait.append_basic_block("entry"))
    ret = wait.append_basic_block("ret")
    spin = wait.append_basic_block("wait")
    b.cbranch(b.icmp_signed("<=", n, const(1)), ret, spin)
    b.position_at_end(spin)
    await_word(b, triple, word, sleepers, lambda v: b.icmp_unsigned(">=", v, total), ret)
    b.position_at_end(ret)
    b.ret_void()
    return parts, wait


def _barrier_function(
    m: ir.Module,
    define: bool,
    triple: str = "x86_64-unknown-linux-gnu",
    reset: Sequence[ir.GlobalVariable] = (),
) -> ir.Function:
    """``void @lamina_barrier(i64 nthreads)``: count arrivals; the last one resets the count and
    zeroes the ``reset`` globals (the run's part claims and segment counts), bumps the generation
    and wakes the sleepers (the ``futex`` call only when one sleeps, counted in
    ``lamina_barrier_sleepers``: no syscall where the threads meet within the spin); the others
    spin ``SPIN`` times, then ``futex``-wait on the generation."""
    fty = ir.FunctionType(VOID, [I64])
    fn = ir.Function(m, fty, "lamina_barrier")
    fn.attributes.add("noinline")
    count = ir.GlobalVariable(m, I32, "lamina_barrier_count")
    gen = ir.GlobalVariable(m, I32, "lamina_barrier_gen")
    sleepers = ir.GlobalVariable(m, I32, "lamina_barrier_sleepers")
    if not define:
        count.linkage = gen.linkage = sleepers.linkage = "external"
        return fn
    for g in (count, gen, sleepers):
        g.initializer = ir.Constant(I32, 0)
        g.align = 64
    (n,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    one = b.icmp_signed("<=", n, const(1))
    alone = fn.append_basic_block("alone")
    work = fn.append_basic_block("work")
    b.cbranch(one, alone, work)
    b.position_at_end(alone)
    b.ret_void()
    b.position_at_end(work)
    g0 = b.load_atomic(gen, "acquire", 4)
    arrived = b.add(b.atomic_rmw("add", count, ir.Constant(I32, 1), "acq_rel"), ir.Constant(I32, 1))
    last = b.icmp_signed("==", b.sext(arrived, I64), n)
    wake = fn.append_basic_block("wake")
    wait = fn.append_basic_block("wait")
    b.cbranch(last, wake, wait)
    b.position_at_end(wake)
    for g in reset:
        _zero(b, g)
    b.store_atomic(ir.Constant(I32, 0), count, "release", 4)
    b.atomic_rmw("add", gen, ir.Constant(I32, 1), "seq_cst")
    wake_sleepers(b, triple, gen, sleepers)
    b.ret_void()
    b.position_at_end(wait)
    done = fn.append_basic_block("done")
    await_word(b, triple, gen, sleepers, lambda v: b.icmp_unsigned("!=", v, g0), done)
    b.position_at_end(done)
    b.ret_void()
    return fn


def _zero(b: ir.IRBuilder, g: ir.GlobalVariable) -> None:
    """Store zeros over the global ``g`` (an integer or an array of integers), word by word in a
    loop (monotonic atomic stores: other threads read these words with atomics)."""
    ty = g.value_type
    ety, count = (ty.element, ty.count) if isinstance(ty, ir.ArrayType) else (ty, 1)
    width = ety.width // 8
    fn = b.block.function
    pre = b.block
    body = fn.append_basic_block("zero")
    after = fn.append_basic_block("zeroed")
    b.branch(body)
    b.position_at_end(body)
    i = b.phi(I32)
    i.add_incoming(ir.Constant(I32, 0), pre)
    p = b.gep(g, [ir.Constant(I32, 0), i]) if isinstance(ty, ir.ArrayType) else g
    b.store_atomic(ir.Constant(ety, 0), p, "monotonic", width)
    nxt = b.add(i, ir.Constant(I32, 1))
    i.add_incoming(nxt, body)
    b.cbranch(b.icmp_unsigned("<", nxt, ir.Constant(I32, count)), body, after)
    b.position_at_end(after)


def _clock_function(m: ir.Module) -> ir.Function:
    """``i64 @lamina_now()``: CLOCK_MONOTONIC in nanoseconds."""
    ts = ir.LiteralStructType([I64, I64])
    real = ir.Function(m, ir.FunctionType(I32, [I64, ts.as_pointer()]), "clock_gettime")
    fn = ir.Function(m, ir.FunctionType(I64, []), "lamina_now")
    fn.linkage = "internal"
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    t = b.alloca(ts)
    b.call(real, [const(1), t])
    sec = b.load(b.gep(t, [ir.Constant(I32, 0), ir.Constant(I32, 0)]))
    nsec = b.load(b.gep(t, [ir.Constant(I32, 0), ir.Constant(I32, 1)]))
    b.ret(b.add(b.mul(sec, const(1_000_000_000)), nsec))
    return fn

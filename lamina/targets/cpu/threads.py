"""The CPU runtime's persistent thread pool: ``n - 1`` worker threads plus the caller, each running a
compiled entry point ``entry(arena, weights, io, tid, n[, times])`` with its own ``tid``.

The pool is native code (a small LLVM module compiled once per process for the host, :func:`native`):
each worker is a Python thread that enters ``lamina_pool_worker`` once (ctypes releases the GIL) and
stays there, waiting for the next run on a generation word — ``IDLE_SPIN`` ``pause``s after each
run (back-to-back runs find it awake: waking a sleeping thread took ~35 µs of every MobileNetV2 run
on this 2-core VM when the pool woke Python threads on a condition variable), then asleep in
``futex(FUTEX_WAIT)`` — never an unbounded spin (spinning pools collapsed on these machines when
another process held a core). The caller (``lamina_pool_run``) publishes the run, bumps the
generation, ``futex``-wakes the workers only when one sleeps, runs ``tid`` 0 itself and waits (spin,
then sleep) until every worker has returned. Threads of one run synchronize inside the compiled
code (its barriers, :mod:`.codegen`)."""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any

import llvmlite.ir as ir

from .codegen import await_word, wake_sleepers

__all__ = ["IDLE_SPIN", "Pool", "native"]

#: ``pause``s a worker spins after a run (and the caller while it waits for the workers) before
#: sleeping: ~0.1 ms on Zen 4
IDLE_SPIN = 4000

# the control block: byte offsets (the caller's futex word on a cache line of its own)
GEN, CLOSED, SLEEPERS, FN, ARENA, WEIGHTS, IO, NTHREADS, TIMES = 0, 4, 8, 16, 24, 32, 40, 48, 56
LEFT, CALLER_SLEEPS = 64, 68
CTL_BYTES = 128

I8, I32, I64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
I8P = I8.as_pointer()
VOID = ir.VoidType()


def pool_module(triple: str) -> str:
    """The pool's LLVM IR for ``triple``: ``lamina_pool_worker(ctl, tid)``, ``lamina_pool_run(ctl)``
    and ``lamina_pool_close(ctl)``."""
    m = ir.Module("lamina_pool")
    m.triple = triple
    entry_ty = ir.FunctionType(VOID, [I8P, I8P, I8P.as_pointer(), I64, I64])
    prof_ty = ir.FunctionType(VOID, [I8P, I8P, I8P.as_pointer(), I64, I64, I64.as_pointer()])

    def c64(v: int) -> ir.Constant:
        return ir.Constant(I64, v)

    def c32(v: int) -> ir.Constant:
        return ir.Constant(I32, v)

    def field(b: ir.IRBuilder, ctl: Any, off: int, ty: ir.Type) -> Any:
        return b.bitcast(b.gep(ctl, [c64(off)]), ty.as_pointer())

    def spin_then_sleep(fn: ir.Function, b: ir.IRBuilder, ready: Any, sleeper: Any, word: Any) -> None:
        """Wait until ``ready(v)`` holds for a fresh load ``v`` of the i32 ``word``
        (:func:`.codegen.await_word`: ``IDLE_SPIN`` pauses, then asleep on ``word`` counted in the
        i32 ``sleeper``); leaves ``b`` after the wait."""
        done = fn.append_basic_block("ready")
        await_word(b, triple, word, sleeper, ready, done, IDLE_SPIN)
        b.position_at_end(done)

    def call_entry(b: ir.IRBuilder, ctl: Any, tid: Any) -> None:
        fp = b.load(field(b, ctl, FN, I64))
        arena = b.inttoptr(b.load(field(b, ctl, ARENA, I64)), I8P)
        weights = b.inttoptr(b.load(field(b, ctl, WEIGHTS, I64)), I8P)
        io = b.inttoptr(b.load(field(b, ctl, IO, I64)), I8P.as_pointer())
        n = b.load(field(b, ctl, NTHREADS, I64))
        times = b.load(field(b, ctl, TIMES, I64))
        with b.if_else(b.icmp_unsigned("==", times, c64(0))) as (plain, prof):
            with plain:
                b.call(b.inttoptr(fp, entry_ty.as_pointer()), [arena, weights, io, tid, n])
            with prof:
                b.call(
                    b.inttoptr(fp, prof_ty.as_pointer()),
                    [arena, weights, io, tid, n, b.inttoptr(times, I64.as_pointer())],
                )

    # void lamina_pool_worker(i8* ctl, i64 tid): run every posted run until closed
    fn = ir.Function(m, ir.FunctionType(VOID, [I8P, I64]), "lamina_pool_worker")
    ctl, tid = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    gen = field(b, ctl, GEN, I32)
    start = b.block
    loop = fn.append_basic_block("loop")
    b.branch(loop)
    b.position_at_end(loop)
    seen = b.phi(I32)
    seen.add_incoming(c32(0), start)
    spin_then_sleep(fn, b, lambda v: b.icmp_unsigned("!=", v, seen), field(b, ctl, SLEEPERS, I32), gen)
    now = b.load_atomic(gen, "acquire", 4)
    closed = b.load_atomic(field(b, ctl, CLOSED, I32), "acquire", 4)
    run = fn.append_basic_block("run")
    out = fn.append_basic_block("closed")
    b.cbranch(b.icmp_unsigned("!=", closed, c32(0)), out, run)
    b.position_at_end(out)
    b.ret_void()
    b.position_at_end(run)
    call_entry(b, ctl, tid)
    left = field(b, ctl, LEFT, I32)
    was = b.atomic_rmw("sub", left, c32(1), "seq_cst")
    with b.if_then(b.icmp_unsigned("==", was, c32(1))):  # the last worker: wake the caller if asleep
        wake_sleepers(b, triple, left, field(b, ctl, CALLER_SLEEPS, I32))
    seen.add_incoming(now, b.block)
    b.branch(loop)

    # void lamina_pool_run(i8* ctl): post the run, run tid 0, wait for the workers
    fn = ir.Function(m, ir.FunctionType(VOID, [I8P]), "lamina_pool_run")
    (ctl,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    gen = field(b, ctl, GEN, I32)
    left = field(b, ctl, LEFT, I32)
    n = b.load(field(b, ctl, NTHREADS, I64))
    b.store_atomic(b.trunc(b.sub(n, c64(1)), I32), left, "release", 4)
    b.atomic_rmw("add", gen, c32(1), "seq_cst")
    wake_sleepers(b, triple, gen, field(b, ctl, SLEEPERS, I32))
    call_entry(b, ctl, c64(0))
    caller_sleeps = field(b, ctl, CALLER_SLEEPS, I32)
    spin_then_sleep(fn, b, lambda v: b.icmp_unsigned("==", v, c32(0)), caller_sleeps, left)
    b.ret_void()

    # void lamina_pool_close(i8* ctl): the workers return
    fn = ir.Function(m, ir.FunctionType(VOID, [I8P]), "lamina_pool_close")
    (ctl,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.store_atomic(c32(1), field(b, ctl, CLOSED, I32), "release", 4)
    b.atomic_rmw("add", field(b, ctl, GEN, I32), c32(1), "seq_cst")
    wake_sleepers(b, triple, field(b, ctl, GEN, I32), field(b, ctl, SLEEPERS, I32))
    b.ret_void()
    return str(m)


_WORKER = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64)
_CTL = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_native: tuple[Any, ...] | None = None
_native_lock = threading.Lock()


def native() -> tuple[Any, Any, Any]:
    """The pool's functions ``(worker, run, close)`` compiled for this process's CPU (once)."""
    global _native
    with _native_lock:
        if _native is None:
            from .jit import LoadedCode, compile_ir, host_spec

            spec = host_spec()
            obj, _ = compile_ir(pool_module(spec.triple), spec)
            code = LoadedCode(obj, spec)
            _native = (
                code,
                _WORKER(code.function("lamina_pool_worker")),
                _CTL(code.function("lamina_pool_run")),
                _CTL(code.function("lamina_pool_close")),
            )
        return _native[1], _native[2], _native[3]


class Pool:
    """``Pool(n).run(entry, arena, weights, io, times)`` calls the compiled function at address
    ``entry`` as ``entry(arena, weights, io, tid, n)`` — with ``times`` (not None) as a sixth
    argument — for ``tid`` in ``range(n)`` at once (``tid`` 0 on the calling thread) and returns
    when all have returned."""

    def __init__(self, n: int) -> None:
        if n < 1:
            raise ValueError(f"a pool needs at least one thread, got {n}")
        self.n = n
        worker, self._run, self._close = native()
        self._buf = ctypes.create_string_buffer(CTL_BYTES + 64)
        self.ctl = ctypes.addressof(self._buf) + (-ctypes.addressof(self._buf)) % 64
        self._set(NTHREADS, n)
        self._closed = False
        self._run_lock = threading.Lock()
        self._threads = []
        for tid in range(1, n):
            # the thread keeps the control block alive until its worker has returned
            t = threading.Thread(
                target=_work, args=(worker, self._buf, self.ctl, tid), daemon=True, name=f"lamina-cpu-{tid}"
            )
            t.start()
            self._threads.append(t)

    def _set(self, off: int, value: int) -> None:
        ctypes.c_int64.from_address(self.ctl + off).value = value

    def run(self, entry: int, arena: int, weights: int, io: int, times: int | None = None) -> None:
        with self._run_lock:
            if self._closed:
                raise RuntimeError("the pool is closed")
            for off, v in ((FN, entry), (ARENA, arena), (WEIGHTS, weights), (IO, io), (TIMES, times or 0)):
                self._set(off, v)
            self._run(self.ctl)

    def close(self) -> None:
        with self._run_lock:
            if not self._closed:
                self._closed = True
                self._close(self.ctl)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # interpreter shutdown
            self.close()


def _work(worker: Any, buf: Any, ctl: int, tid: int) -> None:
    del buf  # referenced by the thread's arguments while it runs
    worker(ctl, tid)

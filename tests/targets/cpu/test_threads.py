"""The native thread pool (``lamina/targets/cpu/threads.py``): every ``tid`` runs once per run, with
the arguments posted, through runs back to back (workers still spinning) and after pauses (workers
asleep in ``futex``), the profile entry's sixth argument; idle workers sleep (no CPU time); closing
ends the workers."""

from __future__ import annotations

import time
from typing import Any

import llvmlite.ir as ir
import numpy as np
import pytest

from lamina.targets.cpu.jit import LoadedCode, compile_ir, host_spec
from lamina.targets.cpu.threads import Pool

I8, I64 = ir.IntType(8), ir.IntType(64)
I8P = I8.as_pointer()


@pytest.fixture(scope="module")
def entries() -> Any:
    """``count(arena, weights, io, tid, n)``: ``arena[tid] += 1``, ``arena[8 + tid] = n``,
    ``arena[16 + tid] = weights[0]``; ``count_prof``: the same and ``times[tid] = 100 + tid``."""
    m = ir.Module("t")
    for name, prof in (("count", False), ("count_prof", True)):
        args = [I8P, I8P, I8P.as_pointer(), I64, I64] + ([I64.as_pointer()] if prof else [])
        fn = ir.Function(m, ir.FunctionType(ir.VoidType(), args), name)
        arena, weights, _io, tid, n = fn.args[:5]
        b = ir.IRBuilder(fn.append_basic_block("e"))
        a = b.bitcast(arena, I64.as_pointer())
        slot = b.gep(a, [tid])
        b.store(b.add(b.load(slot), ir.Constant(I64, 1)), slot)
        b.store(n, b.gep(a, [b.add(tid, ir.Constant(I64, 8))]))
        b.store(b.load(b.bitcast(weights, I64.as_pointer())), b.gep(a, [b.add(tid, ir.Constant(I64, 16))]))
        if prof:
            b.store(b.add(tid, ir.Constant(I64, 100)), b.gep(fn.args[5], [tid]))
        b.ret_void()
    spec = host_spec()
    obj, _ = compile_ir(str(m), spec)
    code = LoadedCode(obj, spec)
    return code, code.function("count"), code.function("count_prof")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_every_thread_runs_once_per_run(entries: Any, n: int) -> None:
    _, count, count_prof = entries
    pool = Pool(n)
    arena = np.zeros(24, np.int64)
    w = np.array([12345], np.int64)
    runs = 0
    for i in range(300):
        pool.run(count, arena.ctypes.data, w.ctypes.data, 0)
        runs += 1
        if i % 50 == 49:
            time.sleep(0.003)  # past the idle spin: the workers sleep and are woken
    assert arena[:n].tolist() == [runs] * n and not arena[n:8].any()
    assert arena[8 : 8 + n].tolist() == [n] * n and arena[16 : 16 + n].tolist() == [12345] * n
    times = np.zeros(n, np.int64)
    pool.run(count_prof, arena.ctypes.data, w.ctypes.data, 0, times.ctypes.data)
    assert times.tolist() == [100 + t for t in range(n)] and arena[:n].tolist() == [runs + 1] * n
    pool.close()
    for t in pool._threads:
        t.join(timeout=5)
        assert not t.is_alive()
    with pytest.raises(RuntimeError, match="closed"):
        pool.run(count, arena.ctypes.data, w.ctypes.data, 0)


def test_idle_workers_sleep(entries: Any) -> None:
    """After a run the workers spin ~0.1 ms, then sleep: over 0.3 s idle each worker thread spends
    far less than 0.3 s of CPU (a spinning worker would spend all of it). The workers' own CPU
    clocks, not the process's: other threads of the test process (an earlier test's onnxruntime
    pool) do not count."""
    _, count, _ = entries
    pool = Pool(3)
    arena = np.zeros(24, np.int64)
    pool.run(count, arena.ctypes.data, arena.ctypes.data, 0)
    time.sleep(0.05)
    clocks = [time.pthread_getcpuclockid(t.ident) for t in pool._threads if t.ident is not None]
    assert len(clocks) == 2  # three threads: the caller and two workers
    c0 = [time.clock_gettime(c) for c in clocks]
    time.sleep(0.3)
    assert all(time.clock_gettime(c) - t0 < 0.05 for c, t0 in zip(clocks, c0))
    pool.close()


def test_bad_size() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        Pool(0)


def test_closed_pool_threads_exit_when_dropped(entries: Any) -> None:
    _, count, _ = entries
    pool = Pool(2)
    arena = np.zeros(24, np.int64)
    pool.run(count, arena.ctypes.data, arena.ctypes.data, 0)
    threads = list(pool._threads)
    del pool
    for t in threads:
        t.join(timeout=5)
        assert not t.is_alive()


@pytest.mark.parametrize(
    "triple", ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "x86_64-apple-darwin"]
)
def test_pool_module_per_host(triple: str) -> None:
    """The pool's module verifies in LLVM for every host kind: ``futex`` through ``syscall`` on
    Linux, ``sched_yield`` between looks elsewhere, ``pause`` in the spin on x86 only."""
    import llvmlite.binding as llvm

    from lamina.targets.cpu.threads import pool_module

    text = pool_module(triple)
    llvm.parse_assembly(text).verify()
    linux = "linux" in triple
    assert ('@"syscall"' in text) == linux
    assert ('@"sched_yield"' in text) == (not linux)
    assert ("llvm.x86.sse2.pause" in text) == triple.startswith("x86_64")

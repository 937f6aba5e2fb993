"""The parallel LLVM step (``lamina/targets/cpu/jit.py``, :class:`ModuleCompiler`): one object per
module, the same bytes for any number of threads and any submission order (a module's object is
its text's alone) and the same as compiling it alone on the calling thread; every function defined
in exactly one object, the calls between objects resolved when loaded together (MCJIT); invalid IR
anywhere is one error and nothing hangs; the heavy LLVM calls bypass llvmlite's process-wide lock
(else the threads would run one at a time); ``LAMINA_LLVM_JOBS``; and a whole model compiled on 1
and 3 threads gives the same file sections and the same bits."""

from __future__ import annotations

import ctypes
import threading
from pathlib import Path

import llvmlite.ir as ir
import numpy as np
import pytest

from lamina.support.errors import LaminaError
from lamina.targets.cpu import jit

I64 = ir.IntType(64)


def _leaf(name: str, k: int) -> str:
    """``i64 name(i64 x)``: a loop of ``k`` rounds (work for O3)."""
    m = ir.Module(name)
    f = ir.Function(m, ir.FunctionType(I64, [I64]), name)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    acc = f.args[0]
    for j in range(k):
        acc = b.add(b.mul(acc, ir.Constant(I64, j + 3)), ir.Constant(I64, j))
    b.ret(acc)
    return str(m)


def _caller(leaves: list[str]) -> str:
    """``i64 entry(i64 x)``: the sum of every leaf of ``x`` (calls into the other objects)."""
    m = ir.Module("entry")
    f = ir.Function(m, ir.FunctionType(I64, [I64]), "entry")
    b = ir.IRBuilder(f.append_basic_block("entry"))
    acc = ir.Constant(I64, 0)
    for name in leaves:
        g = ir.Function(m, ir.FunctionType(I64, [I64]), name)
        acc = b.add(acc, b.call(g, [f.args[0]]))
    b.ret(acc)
    return str(m)


NAMES = [f"leaf{i}" for i in range(7)]
TEXTS = [_leaf(n, 4 + 3 * i) for i, n in enumerate(NAMES)] + [_caller(NAMES)]


def _want(x: int) -> int:
    total = 0
    for i in range(len(NAMES)):
        acc = x
        for j in range(4 + 3 * i):
            acc = (acc * (j + 3) + j) & (2**64 - 1)
        total = (total + acc) & (2**64 - 1)
    return total - 2**64 if total >= 2**63 else total


def _defined(obj: bytes) -> set[str]:
    return jit.object_symbols(obj)[0]


@pytest.mark.parametrize("jobs", [1, 2, 3, 16])
def test_same_objects_for_any_jobs_and_each_function_once(jobs: int) -> None:
    spec = jit.host_spec()
    alone = [jit.compile_ir(t, spec)[0] for t in TEXTS]
    objs = jit.compile_modules(TEXTS, spec, jobs=jobs)
    assert objs == alone
    defined = [_defined(o) for o in objs]
    assert [d for d in defined] == [{n} for n in NAMES] + [{"entry"}]
    code = jit.LoadedCode(objs, spec)
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(code.function("entry"))
    for x in (0, 1, -5, 123456789):
        assert fn(x) == _want(x)


def test_submission_order_does_not_change_an_object() -> None:
    spec = jit.host_spec()
    fwd = jit.compile_modules(TEXTS, spec, jobs=2)
    rev = jit.compile_modules(TEXTS[::-1], spec, jobs=2)
    assert rev == fwd[::-1]


def test_a_call_into_an_object_not_loaded_is_an_error() -> None:
    spec = jit.host_spec()
    objs = jit.compile_modules(TEXTS, spec, jobs=2)
    with pytest.raises(LaminaError, match="the object code needs 'leaf0', defined nowhere"):
        jit.LoadedCode(objs[1:], spec)
    with pytest.raises(LaminaError, match="objects 0 and 1 both define 'leaf0'"):
        jit.LoadedCode([objs[0], *objs], spec)


def test_invalid_ir_is_one_error_and_the_threads_end() -> None:
    spec = jit.host_spec()
    bad = TEXTS[2].replace("ret i64", "ret i32")
    before = threading.active_count()
    for jobs in (1, 3):
        with pytest.raises(LaminaError, match="LLVM IR is invalid"):
            jit.compile_modules([*TEXTS[:2], bad, *TEXTS[3:]], spec, jobs=jobs)
    with pytest.raises(LaminaError, match="LLVM IR is invalid"):
        jit.compile_modules(["this is not LLVM IR"], spec, jobs=2)
    assert threading.active_count() == before


def test_a_caller_failing_before_finish_stops_the_threads() -> None:
    before = threading.active_count()
    with (
        pytest.raises(RuntimeError, match="emission failed"),
        jit.ModuleCompiler(jit.host_spec(), jobs=3) as mc,
    ):
        for t in TEXTS:
            mc.submit(t)
        raise RuntimeError("emission failed")
    assert threading.active_count() == before
    with pytest.raises(RuntimeError, match="finished"):
        mc.submit(TEXTS[0])


def test_the_heavy_calls_bypass_llvmlites_lock() -> None:
    """llvmlite wraps every C call in one process-wide lock; the pass pipeline and the machine
    code emission must reach the C functions themselves, or the threads compile one at a time."""
    from llvmlite.binding import ffi

    for name in ("LLVMPY_RunNewModulePassManager", "LLVMPY_TargetMachineEmitToMemory"):
        raw = jit._unlocked(name)
        assert isinstance(raw, ctypes._CFuncPtr), f"{name}: llvmlite's locking wrapper, not the C function"
        assert raw is not getattr(ffi.lib, name)


def test_jobs_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.delenv("LAMINA_LLVM_JOBS", raising=False)
    assert jit.compile_jobs() == len(os.sched_getaffinity(0))
    monkeypatch.setenv("LAMINA_LLVM_JOBS", "3")
    assert jit.compile_jobs() == 3 and jit.ModuleCompiler(jit.host_spec()).jobs == 3
    for bad in ("0", "-1", "two", "1.5"):
        monkeypatch.setenv("LAMINA_LLVM_JOBS", bad)
        with pytest.raises(LaminaError, match="LAMINA_LLVM_JOBS must be a positive integer"):
            jit.compile_jobs()


def test_a_model_on_one_and_three_threads(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The runtime tests' small INT8 model: the same sections (objects, modules) compiled with
    ``LAMINA_LLVM_JOBS`` 1 and 3, one object per module, each function defined once, the same bits
    as the ``tpu`` interpreter."""
    from test_runtime import TOP

    import lamina.runtime as rt
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.quant.deploy import deploy_module, run_tpu_module
    from lamina.targets.base import CompileOptions
    from lamina.targets.container import write_model
    from lamina.targets.cpu import target
    from lamina.targets.cpu.objects import unpack_ir, unpack_objects

    monkeypatch.setenv("LAMINA_CACHE", "off")
    tpu = deploy_module(parse_module(TOP, Context()), "INT8")
    x = {"x": np.random.default_rng(0).uniform(-2, 2, (1, 4, 8, 8)).astype(np.float32)}
    want = next(iter(run_tpu_module(tpu, x).values()))
    sections = []
    for jobs in ("1", "3"):
        monkeypatch.setenv("LAMINA_LLVM_JOBS", jobs)
        res = target().compile(tpu, CompileOptions(name="small", mode="INT8"))
        assert ("on 1 thread)" if jobs == "1" else f"on {jobs} threads)") in res.report[0]
        sections.append({s.name: bytes(s.data) for s in res.model.sections})
        write_model(tmp_path / f"j{jobs}.lamina", res.model)
        out = next(iter(rt.load(tmp_path / f"j{jobs}.lamina", threads=2).run(x).values()))
        assert out.tobytes() == np.asarray(want).tobytes()
    assert sections[0] == sections[1]
    objs = unpack_objects(sections[0]["object"])
    mods = unpack_ir(sections[0]["llvm_ir"].decode())
    assert len(objs) == len(mods) >= 3
    every = [n for o in objs for n in _defined(o)]
    assert len(every) == len(set(every))  # each function, each global in one object
    assert {"model_run", "model_run_prof", "lamina_barrier", "lamina_host"} <= set(every)

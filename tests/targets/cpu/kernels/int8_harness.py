"""A tiny JIT harness for the INT8 kernel tests and benchmark: plan + emit one template into a fresh
llvmlite module, compile it for the host (host CPU name and features, codegen at O3; with
``ir_passes`` also LLVM's O3 IR pipeline first — the templates' IR needs none, the code is as fast
without, and the tests run both ways), call the kernel through ctypes with numpy buffers for every
part of ``nparts``."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Sequence
from typing import Any

import llvmlite.binding as llvm
import numpy as np
from llvmlite import ir

from lamina.targets.cpu.kernels.abi import Isa, KernelPlan, Template

_INIT = False
_KEEP: list[Any] = []


def _init() -> None:
    global _INIT
    if not _INIT:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        _INIT = True


def host_isa() -> Isa:
    _init()
    feats = {f[1:] for f in llvm.get_host_cpu_features().flatten().split(",") if f.startswith("+")}
    vb = 64 if "avx512f" in feats else 32 if "avx2" in feats else 16
    return Isa(vb, frozenset(feats))


#: canary bytes either side of a kernel's output in :meth:`Compiled.__call__`
GUARD = 64


class Compiled:
    def __init__(self, template: Template, op: Any, isa: Isa, symbol: str = "k", ir_passes: bool = False):
        _init()
        t0 = time.perf_counter()
        self.plan: KernelPlan = template.plan(op, symbol, isa)
        mod = ir.Module(name="m")
        template.emit(mod, self.plan, op, isa)
        t1 = time.perf_counter()
        self.ir_text = str(mod)
        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
        )
        m = llvm.parse_assembly(self.ir_text)
        m.verify()
        if ir_passes:
            pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(speed_level=3))
            pb.getModulePassManager().run(m, pb)
        self.ee = llvm.create_mcjit_compiler(m, tm)
        self.ee.finalize_object()
        self.compile_ms = (time.perf_counter() - t0) * 1e3
        self.emit_ms = (t1 - t0) * 1e3
        addr = self.ee.get_function_address(symbol)
        self.fn = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64, ctypes.c_int64)(
            addr
        )
        self.weights = {k: _aligned(v) for k, v in self.plan.weights.items()}
        _KEEP.append(self.ee)

    def buffers(
        self,
        ins: list[np.ndarray],
        outs: list[np.ndarray],
        nparts: int,
        others: Sequence[tuple[Any, np.ndarray]] = (),
    ) -> tuple[Any, list[Any]]:
        """The buffer pointers of the plan: ``("in", i)`` is ``ins[i]``, ``("in", value)`` (a fused
        consumer's other operand) the array paired with ``value`` in ``others``."""
        keep: list[Any] = []
        ptrs = []
        for kind, key in self.plan.buffers:
            if kind == "in":
                # an operand by index, or a fused consumer's other operand (a Value): ``others``
                a = np.ascontiguousarray(
                    ins[key] if isinstance(key, int) else next(v for k, v in others if k is key)
                )
            elif kind == "out":
                a = outs[key]
            elif kind == "weight":
                a = self.weights[key]
            else:
                # stale bytes, not zeros: a kernel reads only scratch it wrote (the runtime's
                # scratch holds the previous kernel's data)
                a = _aligned(np.full(max(1, self.plan.scratch_bytes * nparts), 0xA7, np.uint8))
            keep.append(a)
            ptrs.append(a.ctypes.data)
        arr = (ctypes.c_void_p * len(ptrs))(*ptrs)
        keep.append(arr)
        return arr, keep

    def __call__(
        self,
        ins: list[np.ndarray],
        out_shape: tuple[int, ...],
        out_dtype: Any,
        nparts: int = 1,
        others: Sequence[tuple[Any, np.ndarray]] = (),
    ) -> np.ndarray:
        """Run on ``nparts`` parts into a fresh output with 64 canary bytes on either side: a write
        outside the output fails (LLVM once lowered a one-lane masked byte store to a 4-byte move)."""
        n = int(np.prod(out_shape)) * np.dtype(out_dtype).itemsize
        raw = _aligned(np.full(n + 2 * GUARD, 0x5A, np.uint8))
        out = raw[GUARD : GUARD + n].view(out_dtype).reshape(out_shape)
        arr, keep = self.buffers(ins, [out], nparts, others)
        for p in range(nparts):
            self.fn(arr, p, nparts)
        del keep
        assert np.all(raw[:GUARD] == 0x5A) and np.all(raw[GUARD + n :] == 0x5A), (
            f"{self.plan.symbol}: a write outside the output (nparts={nparts})"
        )
        return out

    def expect(
        self,
        ins: list[np.ndarray],
        ref: np.ndarray,
        nparts: Sequence[int] = (1, 2, 3),
        others: Sequence[tuple[Any, np.ndarray]] = (),
    ) -> None:
        """Run on each of ``nparts`` parts and require ``ref`` bit for bit (the first differing
        element and the count in the message)."""
        for n in nparts:
            y = self(ins, ref.shape, ref.dtype, n, others)
            if not np.array_equal(y, ref):
                bad = np.argwhere(y != ref)
                raise AssertionError(
                    f"nparts={n}: {len(bad)}/{y.size} differ, first at {bad[0].tolist()}: "
                    f"{y[tuple(bad[0])]} != {ref[tuple(bad[0])]}"
                )


def _aligned(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    raw = np.zeros(a.nbytes + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    out = raw[off : off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out

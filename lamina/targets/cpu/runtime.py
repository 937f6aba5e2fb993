"""Running a compiled CPU model: the file's machine code (its objects, :mod:`.objects`) loaded into
the process (recompiled from its LLVM IR when this CPU lacks a feature the code was compiled for), one activation arena, the weights
read in place from the mapped file, a persistent thread pool (:mod:`.threads`) whose threads all
call the entry point ``model_run`` with their index, and the host callback through which the kernels
left to the reference executor run their ``tpu`` op's ``execute`` on views of the arena.

:meth:`CpuModel.run` (through :meth:`~lamina.targets.base.CompiledModel.run`) feeds the inputs,
runs, and returns the outputs dequantized to float32 as the NPU target does; with a profile it calls
``model_run_prof`` and turns each thread's kernel timestamps into the shared profile's records (one
engine per thread, one slice per kernel named by its layer, nanoseconds on a 1 GHz clock)."""

from __future__ import annotations

import ctypes
import threading
import time
from typing import Any

import numpy as np

from lamina.support.errors import LaminaError

from ..base import CompiledModel, _numpy_dtype
from ..container import Model
from ..profile import CommandRecord
from .cache import default_cache
from .jit import CpuSpec, LoadedCode, compile_modules, host_spec
from .objects import unpack_ir, unpack_objects

__all__ = ["CpuModel", "load_cpu_model"]

HOST = ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.POINTER(ctypes.c_void_p))
ALIGN = 64


def _aligned(n: int) -> np.ndarray:
    raw = np.zeros(n + ALIGN, np.uint8)
    off = (-raw.ctypes.data) % ALIGN
    return raw[off : off + n]


def _view(addr: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    n = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if n == 0:
        return np.zeros(shape, dtype)
    buf = (ctypes.c_uint8 * n).from_address(addr)
    return np.ctypeslib.as_array(buf).view(dtype).reshape(shape)


class CpuModel(CompiledModel):
    """A compiled CPU model (see the module docstring)."""

    clock_hz = 1e9
    #: seconds :func:`load_cpu_model` took (recompiling included)
    load_seconds: float = 0.0

    def __init__(self, model: Model, path: str, threads: int = 1) -> None:
        super().__init__(model, path)
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise LaminaError(f"threads must be a positive integer, got {threads!r}")
        self.threads = threads
        meta = model.metadata
        try:
            cpu = meta["cpu"]
            self.recorded = CpuSpec(str(cpu["triple"]), model.chip, str(cpu["features"]))
            self.kernels: list[dict[str, Any]] = list(meta["kernels"])
            self.arena_bytes = int(cpu["arena_bytes"])
            self.scratch_bytes = int(cpu["scratch_bytes"])
            self.outputs_from: list[list[Any]] = list(cpu["outputs_from"])
            refs = dict(meta.get("reference", {}))
        except (KeyError, TypeError, ValueError) as e:
            raise LaminaError(f"'{path}': not a CPU model file: its metadata lacks {e}") from None
        self.host = host_spec()
        missing = sorted(self.recorded.enabled - self.host.enabled)
        self.missing_features = missing
        self.recompiled = bool(missing) or self.recorded.triple != self.host.triple
        obj_sec = self._section("object")
        if self.recompiled:
            ir_sec = self._section("llvm_ir")
            try:
                text = ir_sec.text()
            except UnicodeDecodeError:
                raise LaminaError(f"'{path}': section 'llvm_ir' is not UTF-8") from None
            try:
                objs = compile_modules(unpack_ir(text), self.host, default_cache())  # loaded again: no LLVM
            except LaminaError as e:
                raise LaminaError(f"'{path}': recompiling its LLVM IR for this CPU failed: {e}") from None
            self.code = LoadedCode(objs, self.host)
        else:
            try:
                self.code = LoadedCode(unpack_objects(obj_sec.data), self.recorded)
            except LaminaError as e:
                raise LaminaError(f"'{path}': section '{obj_sec.name}': {e}") from None
        try:
            self._entry = self.code.function("model_run")
            self._entry_prof = self.code.function("model_run_prof")
            host_slot = self.code.global_address("lamina_host")
        except LaminaError as e:
            raise LaminaError(f"'{path}': {e}") from None
        wsec = next((s for s in model.sections if s.kind == "weights"), None)
        w = (
            np.frombuffer(wsec.data, np.uint8)
            if wsec is not None and wsec.size
            else np.zeros(ALIGN, np.uint8)
        )
        self._weights = w
        self._weights_addr = w.ctypes.data
        self._arena = _aligned(self.arena_bytes + threads * self.scratch_bytes + ALIGN)
        self._lock = threading.Lock()
        # the reference kernels: each one's function in the cpu_subnet section
        self._ref: dict[int, tuple[Any, list[tuple[np.dtype, tuple[int, ...]]], int]] = {}
        if refs:
            interp_of = self._reference_module(path)
            for key, r in refs.items():
                views = [(np.dtype(_numpy_dtype(d)), tuple(s)) for d, s in r["buffers"]]
                self._ref[int(key)] = (interp_of(r["function"]), views, int(r["inputs"]))
        self._host_errors: list[BaseException] = []
        self._host_cb = HOST(self._host)
        ctypes.c_void_p.from_address(host_slot).value = ctypes.cast(self._host_cb, ctypes.c_void_p).value
        from .threads import Pool

        self._pool = Pool(threads)

    def _section(self, kind: str) -> Any:
        s = next((s for s in self.model.sections if s.kind == kind), None)
        if s is None:
            raise LaminaError(f"'{self.path}': not a CPU model file: it has no '{kind}' section")
        return s

    def _reference_module(self, path: str) -> Any:
        import lamina.dialects
        import lamina.targets  # noqa: F401
        from lamina.execution import Interpreter
        from lamina.ir.context import Context
        from lamina.ir.parser import parse_module

        sec = next((s for s in self.model.sections if s.kind == "cpu_subnet"), None)
        if sec is None:
            raise LaminaError(f"'{path}': reference kernels without a 'cpu_subnet' section")
        ctx = Context()
        diags: list[Any] = []
        with ctx.diagnostics.handler(diags.append):
            module = parse_module(sec.text(), ctx, f"{path}:{sec.name}")
        if module is None:
            raise LaminaError(
                f"'{path}': section '{sec.name}' does not parse: " + "; ".join(str(d) for d in diags[:3])
            )
        self._ref_module = module
        return lambda name: Interpreter(module, name)

    # -- the host callback: a reference kernel ------------------------------------------------------

    def _host(self, index: int, bufs: Any) -> None:
        try:
            interp, views, nin = self._ref[int(index)]
            arrays = [_view(int(bufs[i] or 0), dt, shape) for i, (dt, shape) in enumerate(views)]
            outs = interp.call([a.copy() for a in arrays[:nin]])
            for dst, v in zip(arrays[nin:], outs):
                dst[...] = np.asarray(v).astype(dst.dtype, copy=False).reshape(dst.shape)
        except BaseException as e:
            self._host_errors.append(e)

    # -- running --------------------------------------------------------------------------------------

    def _run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        with self._lock:
            return self._run_locked(feeds, profile=self._profiling)

    _profiling = False

    def run(self, inputs: Any, profile: Any = None) -> dict[str, np.ndarray]:
        self._profiling = profile is not None
        try:
            return super().run(inputs, profile)
        finally:
            self._profiling = False

    def _run_locked(self, feeds: dict[str, np.ndarray], profile: bool) -> dict[str, np.ndarray]:
        ins = [
            np.ascontiguousarray(np.asarray(feeds[t.name]).astype(_numpy_dtype(t.dtype), copy=False))
            for t in self.model.inputs
        ]
        outs = [np.empty(tuple(t.shape), _numpy_dtype(t.dtype)) for t in self.model.outputs]
        keep = [*ins, *outs]
        ptrs = (ctypes.c_void_p * max(len(keep), 1))(*[a.ctypes.data if a.size else None for a in keep])
        arena, weights, io = self._arena.ctypes.data, self._weights_addr, ctypes.addressof(ptrs)
        n = self.threads
        self._host_errors = []
        nk = len(self.kernels)
        times = np.zeros(max(2 * n * nk, 1), np.int64) if profile else None
        if profile:
            assert times is not None
            self._pool.run(self._entry_prof, arena, weights, io, times.ctypes.data)
        else:
            self._pool.run(self._entry, arena, weights, io)
        if self._host_errors:
            e = self._host_errors[0]
            raise LaminaError(f"'{self.path}': a kernel run by the reference executor failed: {e}") from e
        nin = len(ins)
        for j, (space, where) in enumerate(self.outputs_from):
            if space == "io" and where != nin + j:
                outs[j][...] = keep[where].reshape(outs[j].shape)
            elif space == "weights":
                d = outs[j]
                d[...] = self._weights[where : where + d.nbytes].view(d.dtype).reshape(d.shape)
        if profile:
            assert times is not None
            self.last_records = self._records(times)
        result: dict[str, np.ndarray] = {}
        for t, a in zip(self.model.outputs, outs):
            if a.dtype.kind in "iu" and (t.scale != 1.0 or t.zero_point != 0):
                a = ((a.astype(np.float64) - t.zero_point) * t.scale).astype(np.float32)
            elif a.dtype == np.float16 or a.dtype.kind == "V" or str(a.dtype) == "bfloat16":
                a = a.astype(np.float32)
            result[t.name] = a
        return result

    def _records(self, times: np.ndarray) -> list[CommandRecord]:
        nk = len(self.kernels)
        t = times.reshape(self.threads, nk, 2)
        live = [
            (tid, k) for tid in range(self.threads) for k in range(nk) if not self.kernels[k].get("alias")
        ]
        base = min((int(t[tid, k, 0]) for tid, k in live), default=0)
        recs = []
        for tid, k in live:
            info = self.kernels[k]
            s, e = int(t[tid, k, 0]) - base, int(t[tid, k, 1]) - base
            recs.append(
                CommandRecord(
                    f"cpu{tid}",
                    info["template"],
                    info["layer"] or info["symbol"],
                    max(s, 0),
                    max(e, s, 0),
                    info["layer"],
                    int(info.get("macs", 0)) if tid == 0 else 0,
                    int(info.get("bytes", 0)) if tid == 0 else 0,
                )
            )
        return recs

    def profile_extra(self) -> dict[str, Any]:
        return {
            **super().profile_extra(),
            "threads": self.threads,
            "kernels": len(self.kernels),
            "recompiled": self.recompiled,
        }


def load_cpu_model(model: Model, path: str, threads: int = 1) -> CpuModel:
    """The model of a ``.lamina`` file of target ``cpu``, ready to run with ``threads`` threads."""
    t0 = time.perf_counter()
    m = CpuModel(model, path, threads)
    m.load_seconds = time.perf_counter() - t0
    return m

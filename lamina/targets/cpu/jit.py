"""LLVM through llvmlite: the CPU to compile for (:class:`CpuSpec`: LLVM CPU name, feature string,
the :class:`~.kernels.abi.Isa` the templates see), optimizing and emitting machine code for it, and
loading machine code into the process (:class:`LoadedCode`, MCJIT).

A model's modules (one per emitted kernel, and the entry points) are compiled each on its own by
:class:`ModuleCompiler` — one object per module, on :func:`compile_jobs` worker threads, while the
caller may still be emitting the next modules: LLVM runs with the GIL released and without
llvmlite's process-wide lock (each module in an LLVM context of its own, each thread its own
target machine), so on two cores two modules are optimized at once. The entry point calls the
kernels by symbol; MCJIT (or the C linker, ``--export_lib``) resolves the calls across the objects.

Machine code is always made for a named CPU and its feature string (the host's by default) at opt
level 3 — never the generic x86-64 CPU with 512-bit vectors, whose vector FMAs become library calls.
A narrower ISA (``Isa(32, ...)``: AVX2) is the host CPU with the wider features switched off.
:func:`run_kernel` is the harness the kernel tests use: one template's function compiled alone and
called on numpy buffers."""

from __future__ import annotations

import ctypes
import functools
import heapq
import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import llvmlite.binding as llvm
import numpy as np

from lamina.support.errors import LaminaError

from .kernels.abi import Isa

__all__ = [
    "CpuSpec",
    "LoadedCode",
    "ModuleCompiler",
    "compile_ir",
    "compile_jobs",
    "compile_modules",
    "host_spec",
    "narrowed",
    "optimize",
    "run_kernel",
    "spec_for",
    "target_machine",
]

_init_lock = threading.Lock()
_initialized = False


def _init() -> None:
    global _initialized
    with _init_lock:
        if not _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            _initialized = True


@dataclass(frozen=True)
class CpuSpec:
    """What code is compiled for: the target triple, the LLVM CPU name and feature string
    (``+avx2,-avx512f,...``)."""

    triple: str
    cpu: str
    features: str

    @property
    def enabled(self) -> frozenset[str]:
        return frozenset(f[1:] for f in self.features.split(",") if f.startswith("+"))

    @property
    def isa(self) -> Isa:
        """The :class:`Isa` the templates are given for this CPU."""
        on = self.enabled
        vb = 64 if "avx512f" in on else 32 if "avx2" in on or "avx" in on else 16
        return Isa(vb, on)


def host_spec() -> CpuSpec:
    """The CPU this process runs on."""
    _init()
    return CpuSpec(
        llvm.get_process_triple(), llvm.get_host_cpu_name(), llvm.get_host_cpu_features().flatten()
    )


#: features switched off to narrow the host to a vector width
_WIDE = {
    32: ("avx512",),
    16: ("avx512", "avx", "fma", "f16c", "vaes", "vpclmulqdq", "gfni"),
}


def narrowed(spec: CpuSpec, vector_bytes: int) -> CpuSpec:
    """``spec`` with every feature wider than ``vector_bytes`` switched off (64: unchanged)."""
    if vector_bytes >= 64:
        return spec
    prefixes = _WIDE[32 if vector_bytes >= 32 else 16]
    out = []
    for f in spec.features.split(","):
        name = f[1:]
        if f.startswith("+") and any(name.startswith(p) for p in prefixes):
            f = "-" + name
        out.append(f)
    return CpuSpec(spec.triple, spec.cpu, ",".join(out))


def spec_for(isa: str | Isa | None) -> CpuSpec:
    """The spec of ``isa``: None/``host`` → the host; ``avx2`` / ``sse`` or an :class:`Isa` → the
    host narrowed to its vector width."""
    host = host_spec()
    if isa is None or isa == "host":
        return host
    if isinstance(isa, Isa):
        return narrowed(host, isa.vector_bytes)
    widths = {"avx512": 64, "avx2": 32, "sse": 16}
    if isa not in widths:
        raise LaminaError(f"unknown ISA '{isa}' (expected host, {', '.join(widths)})")
    return narrowed(host, widths[isa])


#: the target machine's settings (machine code at opt level 3, position-independent)
CODEGEN = {"opt": 3, "reloc": "pic", "codemodel": "default"}
#: the IR pipeline :func:`optimize` runs (LLVM's O3, the loop and SLP vectorizers on)
PIPELINE = {"speed_level": 3, "loop_vectorization": True, "slp_vectorization": True}


def target_machine(spec: CpuSpec) -> Any:
    _init()
    try:
        target = llvm.Target.from_triple(spec.triple)
    except RuntimeError as e:
        raise LaminaError(f"LLVM has no target for triple '{spec.triple}': {e}") from None
    return target.create_target_machine(cpu=spec.cpu, features=spec.features, **CODEGEN)


def _unlocked(name: str) -> Any:
    """llvmlite's C function ``name`` without the process-wide lock llvmlite puts around every call
    (there to guard LLVM's global context). Only for calls on objects of one thread: a module in its
    own context, that thread's target machine and pass builder. ctypes releases the GIL during it."""
    from llvmlite.binding import ffi

    f = getattr(ffi.lib, name)
    return getattr(f, "_cfn", f)


def optimize(mod: Any, tm: Any, unlocked: bool = False) -> None:
    """The O3 pipeline (loop vectorizer included) on a parsed module (:data:`PIPELINE`).
    ``unlocked``: without llvmlite's lock (a module in a context of its own, ``tm`` this thread's)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=PIPELINE["speed_level"])
    pto.loop_vectorization = PIPELINE["loop_vectorization"]
    pto.slp_vectorization = PIPELINE["slp_vectorization"]
    pb = llvm.create_pass_builder(tm, pto)  # one per module: its analysis caches die with it
    mpm = pb.getModulePassManager()
    if unlocked:
        _unlocked("LLVMPY_RunNewModulePassManager")(mpm, mod, pb)
    else:
        mpm.run(mod, pb)


def emit_object(mod: Any, tm: Any, unlocked: bool = False) -> bytes:
    """The machine code of an optimized module (``tm.emit_object``; ``unlocked`` as :func:`optimize`)."""
    if not unlocked:
        return bytes(tm.emit_object(mod))
    from llvmlite.binding import ffi

    with ffi.OutputString() as err:
        mb = _unlocked("LLVMPY_TargetMachineEmitToMemory")(tm, mod, 1, err)
        if not mb:
            raise LaminaError(f"LLVM could not emit machine code: {err}")
    try:
        return ctypes.string_at(ffi.lib.LLVMPY_GetBufferStart(mb), ffi.lib.LLVMPY_GetBufferSize(mb))
    finally:
        ffi.lib.LLVMPY_DisposeMemoryBuffer(mb)


def compile_ir(ir_text: str | Sequence[str], spec: CpuSpec) -> tuple[bytes, str]:
    """LLVM IR (one module's text, or several linked into one) → (machine code for ``spec``, the
    linked IR before optimization), on the calling thread: one kernel (:func:`run_kernel`), the
    thread pool's module. A model's modules go through :class:`ModuleCompiler`."""
    _init()
    texts = [ir_text] if isinstance(ir_text, str) else list(ir_text)
    tm = target_machine(spec)
    try:
        mod = llvm.parse_assembly(texts[0])
        for t in texts[1:]:
            mod.link_in(llvm.parse_assembly(t))
        mod.triple = spec.triple
        mod.data_layout = str(tm.target_data)
        mod.verify()
    except RuntimeError as e:
        raise LaminaError(f"the LLVM IR is invalid: {e}") from None
    linked = str(mod)
    optimize(mod, tm)
    return emit_object(mod, tm), linked


def compile_jobs() -> int:
    """The threads LLVM may use: ``$LAMINA_LLVM_JOBS`` (a positive integer) if set, else the CPUs this
    process may run on (``os.sched_getaffinity``)."""
    env = os.environ.get("LAMINA_LLVM_JOBS", "").strip()
    if env:
        if not env.isdigit() or int(env) < 1:
            raise LaminaError(f"LAMINA_LLVM_JOBS must be a positive integer, got {env!r}")
        return int(env)
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


class ModuleCompiler:
    """Compile LLVM modules to one object each, for ``spec``, on ``jobs`` threads (default
    :func:`compile_jobs`): while the caller is still submitting (emitting the next modules: its
    core is busy), ``jobs - 1`` threads compile them; :meth:`finish` makes the caller the last of
    the jobs until every module is compiled, and returns the objects in submission order. The
    pending module with the most IR goes first (the last ones balance the threads). ``jobs=1``
    compiles everything on the calling thread in :meth:`finish`.

    ``cache`` (:class:`~.cache.LlvmCache`): each module's object is looked up by the hash of its
    text and the CPU and settings (:func:`object_key`) and stored when compiled; a hit is byte for
    byte what compiling gives (a module's object depends on its text alone). Invalid IR: a
    :class:`LaminaError` from :meth:`finish`, nothing of it stored.

    After :meth:`finish`: :attr:`cpu_seconds` the threads' CPU time in LLVM and the cache,
    :attr:`hits` the modules taken from the cache. Use as a context manager (or call
    :meth:`close`) so that the threads stop when the caller fails before :meth:`finish`."""

    def __init__(self, spec: CpuSpec, cache: Any = None, jobs: int | None = None) -> None:
        _init()
        self.spec = spec
        self.cache = cache
        self.jobs = jobs if jobs is not None else compile_jobs()
        if self.jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {self.jobs}")
        self.layout = str(target_machine(spec).target_data)
        self.texts: list[str] = []
        self._objs: list[bytes | None] = []
        self._errors: dict[int, BaseException] = {}
        self._pending: list[tuple[int, int]] = []  # (-IR size, index): a heap
        self._cv = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._idle = 0
        self._closed = False
        self.cpu_seconds = 0.0
        self.hits = 0
        self._wrote = False

    def submit(self, text: str) -> int:
        """Queue one module's text; returns its index."""
        with self._cv:
            if self._closed:
                raise RuntimeError("the module compiler is finished")
            i = len(self.texts)
            self.texts.append(text)
            self._objs.append(None)
            heapq.heappush(self._pending, (-len(text), i))
            if self.jobs > 1:
                if self._idle == 0 and len(self._threads) < self.jobs - 1:
                    t = threading.Thread(
                        target=self._worker, daemon=True, name=f"lamina-llvm-{len(self._threads)}"
                    )
                    self._threads.append(t)
                    t.start()
                self._cv.notify()
        return i

    def finish(self) -> list[bytes]:
        """Wait for every module; their objects in submission order."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()
        self._worker()  # the caller is the last of the jobs
        for t in self._threads:
            t.join()
        if self._wrote:
            self.cache.prune()
        if self._errors:
            e = self._errors[min(self._errors)]
            raise e.with_traceback(None)
        out = [o for o in self._objs if o is not None]
        assert len(out) == len(self.texts)
        return out

    def close(self) -> None:
        """Stop: the pending modules are dropped, the threads end after their current module."""
        with self._cv:
            self._closed = True
            self._pending.clear()
            self._cv.notify_all()
        for t in self._threads:
            t.join()

    def __enter__(self) -> ModuleCompiler:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _worker(self) -> None:
        tm = target_machine(self.spec)  # this thread's
        t0 = time.thread_time()
        while True:
            with self._cv:
                while not self._pending and not self._closed:
                    self._idle += 1
                    self._cv.wait()
                    self._idle -= 1
                if not self._pending:
                    break
                _, i = heapq.heappop(self._pending)
                text = self.texts[i]
            try:
                obj = self._one(text, tm)
            except BaseException as e:  # re-raised by finish
                with self._cv:
                    self._errors[i] = e
                    self._pending.clear()
                break
            self._objs[i] = obj
        with self._cv:
            self.cpu_seconds += time.thread_time() - t0

    def _one(self, text: str, tm: Any) -> bytes:
        okey = None
        if self.cache is not None:
            okey = object_key(self.cache, [text], self.spec, self.layout)
            hit = _cached(self.cache, okey)
            if hit is not None:
                with self._cv:
                    self.hits += 1
                    self.cache.hits += 1
                return hit
        ctx = llvm.create_context()
        try:
            try:
                mod = llvm.parse_assembly(text, context=ctx)
                mod.triple = self.spec.triple
                mod.data_layout = self.layout
                mod.verify()
            except RuntimeError as e:
                raise LaminaError(f"the LLVM IR is invalid: {e}") from None
            try:
                optimize(mod, tm, unlocked=True)
                obj = emit_object(mod, tm, unlocked=True)
            finally:
                mod.close()
        finally:
            ctx.close()
        if self.cache is not None and okey is not None:
            self.cache.put(okey, "obj", obj)
            self._wrote = True
        return obj


def compile_modules(
    texts: Sequence[str], spec: CpuSpec, cache: Any = None, jobs: int | None = None
) -> list[bytes]:
    """Each module's object (:class:`ModuleCompiler`), in order."""
    with ModuleCompiler(spec, cache, jobs) as mc:
        for t in texts:
            mc.submit(t)
        return mc.finish()


def object_key(cache: Any, texts: Sequence[str], spec: CpuSpec, layout: str) -> str:
    """The cache key of the machine code of ``texts`` linked in this order, for ``spec``: the
    triple, CPU name and features, the data layout, :data:`PIPELINE` and :data:`CODEGEN`, the hash
    of this file and each module's text (the toolchain is in every key,
    :meth:`~.cache.LlvmCache.key`)."""
    import hashlib

    ctx = [
        spec.triple,
        spec.cpu,
        spec.features,
        layout,
        repr(sorted(PIPELINE.items())),
        repr(sorted(CODEGEN.items())),
        _source_digest(),
    ]
    digests = b"".join(hashlib.sha256(t.encode("utf-8")).digest() for t in texts)
    return cache.key("obj", ctx, len(texts).to_bytes(8, "little") + digests)


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
    """The hash of this file: any change to how IR is optimized or emitted makes other keys."""
    import hashlib

    with open(__file__, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _cached(cache: Any, okey: str) -> bytes | None:
    """The cached machine code, or None (absent, or an entry that is not a well-formed object)."""
    entry = cache.get(okey, "obj")
    if entry is None:
        return None
    try:
        check_object(entry)
    except LaminaError:
        cache.drop(okey, "obj")
        return None
    return entry


def check_object(obj: bytes) -> None:
    """Refuse bytes that are not a well-formed 64-bit little-endian ELF relocatable object (its
    header and every section inside the bytes) before LLVM's loader sees them: it does not check."""
    import struct

    if len(obj) < 64 or obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise LaminaError("not a 64-bit little-endian ELF object")
    (e_type,) = struct.unpack_from("<H", obj, 16)
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", obj, 0x3A)
    if e_type != 1 or shentsize != 64 or shoff + shnum * shentsize > len(obj):
        raise LaminaError("the ELF header's section table lies outside the object")
    for i in range(shnum):
        (sh_type,) = struct.unpack_from("<I", obj, shoff + i * 64 + 4)
        off, size = struct.unpack_from("<QQ", obj, shoff + i * 64 + 24)
        if sh_type != 8 and off + size > len(obj):  # SHT_NOBITS takes no bytes
            raise LaminaError(f"ELF section {i} lies outside the object")


def object_symbols(obj: bytes) -> tuple[set[str], set[str]]:
    """The global symbols an ELF object (checked by :func:`check_object`) defines, and those it
    needs from elsewhere (undefined, not weak)."""
    import struct

    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    (shnum,) = struct.unpack_from("<H", obj, 0x3C)
    secs = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + 64 * i) for i in range(shnum)]
    defined: set[str] = set()
    needed: set[str] = set()
    for sec in secs:
        if sec[1] != 2:  # SHT_SYMTAB
            continue
        if sec[6] >= shnum:
            raise LaminaError("the ELF symbol table's string table is not a section")
        str_off, str_size = secs[sec[6]][4], secs[sec[6]][5]
        for k in range(1, sec[5] // 24):
            name, info, _, shndx, _, _ = struct.unpack_from("<IBBHQQ", obj, sec[4] + 24 * k)
            bind = info >> 4
            if bind not in (1, 2) or not name:  # STB_GLOBAL, STB_WEAK
                continue
            if name >= str_size:
                raise LaminaError("an ELF symbol's name lies outside its string table")
            raw = obj[str_off + name : str_off + str_size]
            label = raw[: raw.find(b"\0") if b"\0" in raw else len(raw)].decode("utf-8", "replace")
            if shndx != 0:
                defined.add(label)
            elif bind == 1:
                needed.add(label)
    return defined, needed


class LoadedCode:
    """Machine code (one object, or several whose symbols refer to each other) loaded into this
    process (MCJIT), with its functions' addresses by name."""

    def __init__(self, obj: bytes | Sequence[bytes], spec: CpuSpec) -> None:
        _init()
        objs = [bytes(obj)] if isinstance(obj, (bytes, bytearray, memoryview)) else [bytes(o) for o in obj]
        for i, o in enumerate(objs):
            try:
                check_object(o)
            except LaminaError as e:
                raise LaminaError(f"object {i} of {len(objs)}: {e}" if len(objs) > 1 else str(e)) from None
        where: dict[str, int] = {}
        needed: set[str] = set()
        for i, o in enumerate(objs):
            d, n = object_symbols(o)
            needed |= n
            for name in d:
                if where.setdefault(name, i) != i:
                    raise LaminaError(f"objects {where[name]} and {i} both define '{name}'")
        self.tm = target_machine(spec)
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)  # the process's symbols too
        missing = sorted(n for n in needed - where.keys() if not llvm.address_of_symbol(n))
        if missing:  # MCJIT would leave the calls to address 0
            raise LaminaError(
                f"the object code needs {', '.join(repr(m) for m in missing[:5])}, defined nowhere"
            )
        try:
            for o in objs:
                self.ee.add_object_file(llvm.ObjectFileRef.from_data(o))
            self.ee.finalize_object()
        except RuntimeError as e:
            raise LaminaError(f"the object code does not load: {e}") from None

    def function(self, name: str) -> int:
        a = int(self.ee.get_function_address(name))
        if not a:
            raise LaminaError(f"the object code has no function '{name}'")
        return a

    def global_address(self, name: str) -> int:
        a = int(self.ee.get_global_value_address(name))
        if not a:
            raise LaminaError(f"the object code has no global '{name}'")
        return a


KERNEL_CTYPE = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64, ctypes.c_int64)


def run_kernel(
    template: Any,
    op: Any,
    buffers: dict[Any, np.ndarray],
    isa: Isa | None = None,
    nparts: int = 1,
    symbol: str = "k0_test",
) -> Any:
    """Plan and emit one template's kernel for ``op`` alone, compile it for ``isa`` (default: the
    host) and call it for every part in turn. ``buffers`` maps each ``("in", i)`` / ``("out", i)``
    entry of the plan to a numpy array (outputs are written in place); weights and scratch are
    allocated here. Returns the plan."""
    import llvmlite.ir as ir

    spec = spec_for(isa) if isa is not None else host_spec()
    the_isa = isa or spec.isa
    plan = template.plan(op, symbol, the_isa)
    module = ir.Module(symbol)
    template.emit(module, plan, op, the_isa)
    obj, _ = compile_ir(str(module), spec)
    code = LoadedCode(obj, spec)
    fn = KERNEL_CTYPE(code.function(plan.symbol))
    keep: list[np.ndarray] = []
    ptrs = []
    for kind, key in plan.buffers:
        if kind == "weight":
            a = np.ascontiguousarray(plan.weights[key])
        elif kind == "scratch":
            a = np.zeros(max(plan.scratch_bytes, 1) * nparts, np.uint8)
        else:
            a = buffers[(kind, key)]
            assert a.flags.c_contiguous
        keep.append(a)
        ptrs.append(a.ctypes.data)
    arr = (ctypes.c_void_p * max(len(ptrs), 1))(*ptrs)
    for p in range(nparts):
        fn(arr, p, nparts)
    return plan

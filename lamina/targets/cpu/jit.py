"""LLVM through llvmlite: the CPU to compile for (:class:`CpuSpec`: LLVM CPU name, feature string,
the :class:`~.kernels.abi.Isa` the templates see), optimizing and emitting machine code for it, and
loading machine code into the process (:class:`LoadedCode`, MCJIT).

Machine code is always made for a named CPU and its feature string (the host's by default) at opt
level 3 — never the generic x86-64 CPU with 512-bit vectors, whose vector FMAs become library calls.
A narrower ISA (``Isa(32, ...)``: AVX2) is the host CPU with the wider features switched off.
:func:`run_kernel` is the harness the kernel tests use: one template's function compiled alone and
called on numpy buffers."""

from __future__ import annotations

import ctypes
import functools
import threading
import zlib
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
    "compile_ir",
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


def optimize(mod: Any, tm: Any) -> None:
    """The O3 pipeline (loop vectorizer included) on a parsed module (:data:`PIPELINE`)."""
    pto = llvm.create_pipeline_tuning_options(speed_level=PIPELINE["speed_level"])
    pto.loop_vectorization = PIPELINE["loop_vectorization"]
    pto.slp_vectorization = PIPELINE["slp_vectorization"]
    pb = llvm.create_pass_builder(tm, pto)
    pb.getModulePassManager().run(mod, pb)


def compile_ir(ir_text: str | Sequence[str], spec: CpuSpec, cache: Any = None) -> tuple[bytes, str]:
    """LLVM IR (one module's text, or several linked into one) → (machine code for ``spec``, the
    linked IR before optimization: what a file keeps to recompile for another CPU).

    ``cache`` (:class:`~.cache.LlvmCache`): the result is looked up by the hash of every module's
    text and the CPU and settings (:func:`object_key`), and stored there when compiled. Only IR
    that compiled is stored, so a hit is what compiling would give, byte for byte."""
    _init()
    texts = [ir_text] if isinstance(ir_text, str) else list(ir_text)
    tm = target_machine(spec)
    okey = None
    if cache is not None:
        okey = object_key(cache, texts, spec, str(tm.target_data))
        hit = _cached(cache, okey)
        if hit is not None:
            return hit
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
    obj = tm.emit_object(mod)
    if cache is not None and okey is not None:
        text = zlib.compress(linked.encode("utf-8"), 1)
        cache.put(okey, "obj", len(obj).to_bytes(8, "little") + obj + text)
        cache.prune()
    return obj, linked


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


def _cached(cache: Any, okey: str) -> tuple[bytes, str] | None:
    """The cached (machine code, linked IR), or None (absent, or an entry that does not check)."""
    entry = cache.get(okey, "obj")
    if entry is None:
        return None
    try:
        n = int.from_bytes(entry[:8], "little")
        if n > len(entry) - 8:
            raise LaminaError("truncated")
        obj, linked = entry[8 : 8 + n], zlib.decompress(entry[8 + n :]).decode("utf-8")
        check_object(obj)
    except (LaminaError, UnicodeDecodeError, zlib.error):
        cache.drop(okey, "obj")
        return None
    cache.hits += 1
    return obj, linked


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


class LoadedCode:
    """Machine code loaded into this process (MCJIT), with its functions' addresses by name."""

    def __init__(self, obj: bytes, spec: CpuSpec) -> None:
        _init()
        check_object(bytes(obj))
        self.tm = target_machine(spec)
        self.ee = llvm.create_mcjit_compiler(llvm.parse_assembly(""), self.tm)
        try:
            self.ee.add_object_file(llvm.ObjectFileRef.from_data(bytes(obj)))
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

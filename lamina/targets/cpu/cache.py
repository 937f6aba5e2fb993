"""A disk cache of the CPU compiler's LLVM step, across processes: each LLVM module's machine code
by the hash of its text (:class:`~.jit.ModuleCompiler`). Deploying the same model again — the same
kernels: same layers, same calibration, same CPU — skips LLVM (ResNet-50 INT8: ~7 of its ~11 CPU
seconds); a model sharing some kernels with one compiled before skips them; anything else compiles
as before.

An entry's key is a SHA-256 of everything its output depends on: this format's version, llvmlite's
version and LLVM's, the llvmlite library file (path, size and modification time), the target
triple, CPU name and feature string, the data layout, the optimization settings
(:data:`~.jit.PIPELINE`, :data:`~.jit.CODEGEN`, and the hash of ``jit.py`` itself) and the
module's text. Only IR that compiled is stored, so a hit is byte for byte what compiling gives
(a module's object depends on its text alone). An entry holds a magic, the
SHA-256 of its payload and the payload; one that does not check (truncated, corrupt, unreadable,
not an ELF object) is removed and ignored: the module is compiled again. Writes are atomic (a
temporary file renamed); a cache that cannot be written (read-only, full) is skipped silently. The
directory is pruned to :data:`LIMIT_BYTES`, least recently used first, after a compile that wrote.

Where: ``$LAMINA_CACHE_DIR/cpu-llvm``, else ``$XDG_CACHE_HOME/lamina/cpu-llvm`` or
``~/.cache/lamina/cpu-llvm`` (none without a home directory); ``LAMINA_CACHE=off`` (or ``0``,
``no``, ``false``) switches it off. The compiler (:mod:`.compiler`) and the runtime recompiling a
file for a CPU lacking one of its recorded features (:mod:`.runtime`) use it."""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from collections.abc import Iterable

__all__ = ["LIMIT_BYTES", "LlvmCache", "default_cache"]

MAGIC = b"LMCC0002"  # 0002: an entry is one module's object (0001: a linked model's, with its IR)
#: the cache's size bound; the oldest entries (by modification time) are removed past it
LIMIT_BYTES = 512 << 20
#: temporary files of an interrupted write older than this (seconds) are removed by pruning
STALE_TMP_SECONDS = 3600


def _toolchain() -> bytes:
    """llvmlite's and LLVM's versions and the library file's identity."""
    import llvmlite
    import llvmlite.binding as llvm
    from llvmlite.binding import ffi

    parts = [llvmlite.__version__, ".".join(map(str, llvm.llvm_version_info))]
    try:
        path = str(ffi.lib._name)
        st = os.stat(path)
        parts += [path, str(st.st_size), str(st.st_mtime_ns)]
    except (AttributeError, OSError):
        parts.append("unknown-library")
    return "\0".join(parts).encode()


class LlvmCache:
    """The cache in directory ``root`` (created when first written)."""

    def __init__(self, root: str, limit_bytes: int = LIMIT_BYTES) -> None:
        self.root = root
        self.limit_bytes = limit_bytes
        #: lookups answered from the cache (counted by the caller, once the entry checked)
        self.hits = 0
        self._tool = _toolchain()

    def key(self, kind: str, context: Iterable[str], data: bytes) -> str:
        """The hex SHA-256 key of an entry of ``kind`` (``obj``) made from ``data`` in ``context``
        (the CPU, the settings: strings)."""
        h = hashlib.sha256()
        for part in (MAGIC, kind.encode(), self._tool, *(c.encode() for c in context)):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        h.update(data)
        return h.hexdigest()

    def _path(self, key: str, kind: str) -> str:
        return os.path.join(self.root, key[:2], f"{key}.{kind}")

    def get(self, key: str, kind: str) -> bytes | None:
        """The payload stored under ``key``, or None (absent, or an entry that does not check,
        removed)."""
        path = self._path(key, kind)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except OSError:
            return None
        payload = raw[len(MAGIC) + 32 :]
        if (
            raw[: len(MAGIC)] != MAGIC
            or hashlib.sha256(payload).digest() != raw[len(MAGIC) : len(MAGIC) + 32]
        ):
            self.drop(key, kind)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: pruned last
        return payload

    def drop(self, key: str, kind: str) -> None:
        """Remove an entry (one whose payload does not check)."""
        with contextlib.suppress(OSError):
            os.unlink(self._path(key, kind))

    def put(self, key: str, kind: str, payload: bytes) -> None:
        from lamina.support.fileio import atomic_write

        path = self._path(key, kind)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            atomic_write(path, MAGIC + hashlib.sha256(payload).digest() + payload)
        except OSError:
            pass

    def prune(self) -> None:
        """Remove the oldest entries past :attr:`limit_bytes`, and stale temporary files."""
        entries: list[tuple[float, int, str]] = []
        now = time.time()
        try:
            subdirs = list(os.scandir(self.root))
        except OSError:
            return
        for d in subdirs:
            if not d.is_dir(follow_symlinks=False):
                continue
            try:
                files = list(os.scandir(d.path))
            except OSError:
                continue
            for f in files:
                try:
                    st = f.stat(follow_symlinks=False)
                except OSError:
                    continue
                if f.name.startswith(".lamina-"):
                    if now - st.st_mtime > STALE_TMP_SECONDS:
                        with contextlib.suppress(OSError):
                            os.unlink(f.path)
                    continue
                entries.append((st.st_mtime, st.st_size, f.path))
        total = sum(e[1] for e in entries)
        for _, size, path in sorted(entries):
            if total <= self.limit_bytes:
                break
            with contextlib.suppress(OSError):
                os.unlink(path)
            total -= size


def default_cache() -> LlvmCache | None:
    """The cache the compiler uses (see the module), or None where ``LAMINA_CACHE`` switches it
    off."""
    if os.environ.get("LAMINA_CACHE", "").strip().lower() in ("0", "off", "no", "false"):
        return None
    base = os.environ.get("LAMINA_CACHE_DIR")
    if not base:
        xdg = os.environ.get("XDG_CACHE_HOME")
        if not xdg:
            home = os.path.expanduser("~")
            if not os.path.isabs(home):  # no home directory: no cache (never one in the current directory)
                return None
            xdg = os.path.join(home, ".cache")
        base = os.path.join(xdg, "lamina")
    return LlvmCache(os.path.join(os.path.abspath(base), "cpu-llvm"))

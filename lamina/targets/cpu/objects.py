"""The code sections of a CPU ``.lamina`` file: ``object`` holds a list of machine-code objects and
``llvm_ir`` the list of LLVM modules they were compiled from (one per emitted kernel, and the entry
points: :class:`~.jit.ModuleCompiler` compiles each on its own, in parallel).

Layout 2 (written since stop 22; ``docs/lamina-file.md``):

* ``object``: a 16-byte head — magic ``LMCPUOBJ``, the layout's version (u32, 2), the object count
  ``n`` (u32, 1 to :data:`MAX_OBJECTS`) — then ``n`` entries of (offset, size) (u64 each, from the
  section's start), then the objects, each 16-byte aligned, in entry order, zero bytes between.
* ``llvm_ir`` (UTF-8 text): the line ``; lamina llvm_ir 2: <n> modules``, then per module the line
  ``; module <i>: <bytes> bytes`` and that many bytes of the module's text.

Layout 1 (files written before): ``object`` one ELF object, ``llvm_ir`` one linked module's text.
Both are read. Anything else — a truncated list, entries out of bounds or overlapping, another
version, a count of zero — is one :class:`LaminaError` saying what is wrong (the caller names the
file and section); each object's ELF structure is checked when it is loaded
(:func:`~.jit.check_object`). The container's SHA-256 of each section already catches corruption."""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence

from lamina.support.errors import LaminaError

__all__ = ["LAYOUT", "MAX_OBJECTS", "pack_ir", "pack_objects", "unpack_ir", "unpack_objects"]

MAGIC = b"LMCPUOBJ"
#: the layout written
LAYOUT = 2
MAX_OBJECTS = 1 << 16
_HEAD = struct.Struct("<8sII")
_ENTRY = struct.Struct("<QQ")
_ALIGN = 16
_ELF = b"\x7fELF"


def pack_objects(objs: Sequence[bytes]) -> bytes:
    """The ``object`` section of these objects (layout 2)."""
    if not 1 <= len(objs) <= MAX_OBJECTS:
        raise ValueError(f"an object list holds 1 to {MAX_OBJECTS} objects, got {len(objs)}")
    off = _HEAD.size + _ENTRY.size * len(objs)
    entries, chunks = [], []
    for o in objs:
        pad = (-off) % _ALIGN
        chunks.append(b"\0" * pad + bytes(o))
        off += pad
        entries.append(_ENTRY.pack(off, len(o)))
        off += len(o)
    return _HEAD.pack(MAGIC, LAYOUT, len(objs)) + b"".join(entries) + b"".join(chunks)


def unpack_objects(data: bytes | memoryview) -> list[bytes]:
    """The objects of an ``object`` section (layout 2, or layout 1's single ELF object)."""
    raw = bytes(data)
    if raw[:4] == _ELF:
        return [raw]  # layout 1
    if len(raw) < _HEAD.size or raw[:8] != MAGIC:
        raise LaminaError("neither an ELF object nor a list of them (magic 'LMCPUOBJ')")
    _, version, n = _HEAD.unpack_from(raw)
    if version != LAYOUT:
        raise LaminaError(f"object list layout {version}; this Lamina reads layouts 1 and {LAYOUT}")
    if not 1 <= n <= MAX_OBJECTS:
        raise LaminaError(f"object list of {n} objects (expected 1 to {MAX_OBJECTS})")
    table_end = _HEAD.size + _ENTRY.size * n
    if table_end > len(raw):
        raise LaminaError(
            f"object list truncated: its table of {n} entries ends at byte {table_end}, past {len(raw)}"
        )
    out = []
    end = table_end
    for i in range(n):
        off, size = _ENTRY.unpack_from(raw, _HEAD.size + _ENTRY.size * i)
        if off < end or off + size > len(raw) or off % _ALIGN:
            raise LaminaError(
                f"object {i} of {n}: bytes {off}..{off + size} lie outside the list "
                f"(after byte {end}, {_ALIGN}-aligned, up to {len(raw)})"
            )
        if raw[end:off].strip(b"\0"):
            raise LaminaError(f"object {i} of {n}: non-zero bytes before it")
        out.append(raw[off : off + size])
        end = off + size
    if end != len(raw):
        raise LaminaError(f"object list: {len(raw) - end} bytes after its last object")
    return out


_IR_HEAD = re.compile(r"; lamina llvm_ir (\d+): (\d+) modules\n")
_IR_MODULE = re.compile(rb"; module (\d+): (\d+) bytes\n")


def pack_ir(texts: Sequence[str]) -> str:
    """The ``llvm_ir`` section of these modules (layout 2)."""
    parts = [f"; lamina llvm_ir {LAYOUT}: {len(texts)} modules\n"]
    for i, t in enumerate(texts):
        parts.append(f"; module {i}: {len(t.encode('utf-8'))} bytes\n")
        parts.append(t)
    return "".join(parts)


def unpack_ir(text: str) -> list[str]:
    """The modules of an ``llvm_ir`` section (layout 2, or layout 1's single linked module)."""
    if not text.startswith("; lamina llvm_ir "):
        return [text]  # layout 1
    m = _IR_HEAD.match(text)
    if m is None:
        raise LaminaError("its first line is not '; lamina llvm_ir <layout>: <n> modules'")
    version, n = int(m.group(1)), int(m.group(2))
    if version != LAYOUT:
        raise LaminaError(f"LLVM IR list layout {version}; this Lamina reads layouts 1 and {LAYOUT}")
    if not 1 <= n <= MAX_OBJECTS:
        raise LaminaError(f"LLVM IR list of {n} modules (expected 1 to {MAX_OBJECTS})")
    raw = text.encode("utf-8")
    pos = m.end()
    out = []
    for i in range(n):
        mm = _IR_MODULE.match(raw, pos)
        if mm is None or int(mm.group(1)) != i:
            raise LaminaError(f"module {i} of {n}: expected '; module {i}: <bytes> bytes' at byte {pos}")
        size = int(mm.group(2))
        if mm.end() + size > len(raw):
            raise LaminaError(
                f"module {i} of {n} truncated: {size} bytes from byte {mm.end()}, past {len(raw)}"
            )
        try:
            out.append(raw[mm.end() : mm.end() + size].decode("utf-8"))
        except UnicodeDecodeError:
            raise LaminaError(f"module {i} of {n}: its size splits a UTF-8 character") from None
        pos = mm.end() + size
    if pos != len(raw):
        raise LaminaError(f"LLVM IR list: {len(raw) - pos} bytes after its last module")
    return out

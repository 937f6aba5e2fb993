"""The ``.lamina`` model file: one binary container for every target (the virtual NPUs' command
buffers, the CPU target's object code), written by ``model_deploy --model`` and read by the runtime,
``model_runner`` and ``model_tool --info``.

The layout (``docs/lamina-file.md``, readable with :mod:`struct` alone) is a fixed 128-byte header, a
table of 128-byte section entries (kind, alignment, offset, size, sha256, name) and the sections,
each aligned. Two sections are JSON and always present: ``io`` (the model's name, its input and output
tensors, its subnets, its activation memory) and ``metadata`` (free: compile options, Lamina version).
The others are bytes the container does not interpret: ``weights``, ``commands`` (one subnet's
command buffers), ``cpu_subnet`` (IR text), ``object`` (machine code), ``llvm_ir`` (text).

:func:`write_model` writes atomically; :func:`read_model` maps the file and checks everything before
returning — magic, version, the header's own hash, every bound, overlap and gap, every section's
sha256, the section kinds and every field of the IO descriptors — so that any truncated, corrupted or
foreign file is one :class:`~lamina.support.errors.LaminaError` naming the file, the byte offset or
section, and what was expected. Sections come back as :class:`memoryview` slices of the mapping: a
large weight section is never copied.
"""

from __future__ import annotations

import hashlib
import json
import math
import mmap
import os
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lamina.support.errors import LaminaError
from lamina.support.fileio import atomic_output
from lamina.support.paths import check_input_file

__all__ = [
    "DTYPES",
    "FORMAT_VERSION",
    "MAGIC",
    "SECTION_KINDS",
    "Model",
    "Section",
    "SubnetDesc",
    "TensorDesc",
    "read_model",
    "write_model",
]

#: The first 8 bytes (PNG's trick: a non-ASCII byte, CR LF, ^Z and LF catch text-mode transfers).
MAGIC = b"\x89LAMINA\n"
#: (major, minor). A reader refuses another major and a newer minor.
FORMAT_VERSION = (1, 0)

#: ``<8s H H I I I 16s 32s Q 16s 32s``: magic, major, minor, header size, section count, flags, target
#: kind, chip, file size, reserved, sha256 of the header's first 96 bytes and the section table.
HEADER = struct.Struct("<8sHHIII16s32sQ16s32s")
#: ``<I I Q Q 32s 72s``: kind, alignment, offset, size, sha256, name.
ENTRY = struct.Struct("<IIQQ32s72s")
assert HEADER.size == 128 and ENTRY.size == 128
HASHED_HEADER = 96  # the header bytes the header hash covers (all but the hash itself)

#: Section kind code → name.
SECTION_KINDS: dict[int, str] = {
    1: "io",
    2: "metadata",
    3: "weights",
    4: "commands",
    5: "cpu_subnet",
    6: "object",
    7: "llvm_ir",
}
_KIND_CODES = {v: k for k, v in SECTION_KINDS.items()}
#: Sections a subnet's code may live in, and the kinds that are UTF-8 text.
CODE_KINDS = ("commands", "cpu_subnet", "object", "llvm_ir")
TEXT_KINDS = ("io", "metadata", "cpu_subnet", "llvm_ir")
#: The element types an IO descriptor may name (numpy's spelling, as TPU-MLIR's ``model_tool``).
DTYPES = (
    "float32",
    "float16",
    "bfloat16",
    "float64",
    "int8",
    "uint8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "bool",
)
DEFAULT_ALIGN = 64
MAX_ALIGN = 1 << 16
MAX_SECTIONS = 4096
NAME_BYTES = ENTRY.size - 56
TARGET_BYTES, CHIP_BYTES = 16, 32


@dataclass(frozen=True)
class TensorDesc:
    """One input or output of a model: what the runtime feeds or returns, and where it lives.
    ``scale``/``zero_point`` quantize it (``real = scale * (q - zero_point)``; 1.0 and 0 for floats);
    ``address`` is its offset in the target's activation memory."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scale: float = 1.0
    zero_point: int = 0
    address: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "shape": list(self.shape),
            "dtype": self.dtype,
            "scale": self.scale,
            "zero_point": self.zero_point,
            "address": self.address,
        }


@dataclass(frozen=True)
class SubnetDesc:
    """One subnet, in execution order: ``kind`` says what runs it (``npu``, ``cpu``, ...),
    ``section`` names the section holding its code, ``inputs``/``outputs`` the tensors it reads and
    writes, and ``commands`` counts its commands per engine (``{"tiu": 120, "gdma": 340}``)."""

    name: str
    kind: str
    section: str
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    commands: Mapping[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "section": self.section,
            "inputs": list(self.inputs),
            "outputs": list(self.outputs),
            "commands": dict(self.commands),
        }


@dataclass(frozen=True)
class Section:
    """A section of bytes the container does not interpret. ``data`` is ``bytes`` when written and a
    read-only :class:`memoryview` of the mapped file when read."""

    kind: str
    name: str
    data: bytes | bytearray | memoryview
    align: int = DEFAULT_ALIGN

    @property
    def size(self) -> int:
        return memoryview(self.data).nbytes

    def text(self) -> str:
        """The section as UTF-8 text (``cpu_subnet``, ``llvm_ir``; checked when read)."""
        return bytes(self.data).decode("utf-8")


@dataclass
class Model:
    """Everything a ``.lamina`` file holds. ``sections`` are the binary ones (never ``io`` or
    ``metadata``: those are ``inputs``/``outputs``/``subnets``/``activation_bytes`` and ``metadata``)."""

    target: str
    chip: str
    name: str
    inputs: list[TensorDesc]
    outputs: list[TensorDesc]
    subnets: list[SubnetDesc] = field(default_factory=list)
    activation_bytes: int = 0
    sections: list[Section] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    version: tuple[int, int] = FORMAT_VERSION

    def section(self, name: str) -> Section:
        """The section named ``name`` (KeyError when there is none)."""
        for s in self.sections:
            if s.name == name:
                return s
        raise KeyError(name)

    def bytes_of(self, *kinds: str) -> int:
        """The total size of the sections of these kinds."""
        return sum(s.size for s in self.sections if s.kind in kinds)

    def io_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "inputs": [t.to_json() for t in self.inputs],
            "outputs": [t.to_json() for t in self.outputs],
            "subnets": [s.to_json() for s in self.subnets],
            "activation_bytes": self.activation_bytes,
        }


# ---- writing ---------------------------------------------------------------------------------------


def _fixed(text: str, size: int, what: str) -> bytes:
    raw = text.encode("utf-8")
    if not raw or len(raw) > size or b"\0" in raw:
        raise ValueError(f"{what} {text!r}: expected 1 to {size} UTF-8 bytes without NUL")
    return raw.ljust(size, b"\0")


def _align_up(n: int, a: int) -> int:
    return (n + a - 1) // a * a


def encode_model(model: Model) -> list[bytes | memoryview]:
    """The file's bytes as a list of chunks (header and table, then each section after its zero
    padding). Checks the model as :func:`read_model` would, so that nothing unreadable is written."""
    try:
        _check_io(model.io_json(), "<model being written>", {s.name: s.kind for s in model.sections})
    except LaminaError as e:
        raise ValueError(str(e)) from None
    _json_ok(model.metadata, "metadata")
    for s in model.sections:
        if s.kind in ("io", "metadata"):
            raise ValueError(f"section '{s.name}': '{s.kind}' is written from the model's fields")
    sections = [
        Section("io", "io", _dumps(model.io_json())),
        Section("metadata", "metadata", _dumps(model.metadata)),
        *model.sections,
    ]
    names: set[str] = set()
    for s in sections:
        if s.kind not in _KIND_CODES:
            raise ValueError(f"section '{s.name}': unknown kind {s.kind!r}")
        if s.name in names:
            raise ValueError(f"two sections are named '{s.name}'")
        if s.align <= 0 or s.align & (s.align - 1) or s.align > MAX_ALIGN:
            raise ValueError(f"section '{s.name}': alignment {s.align} is not a power of two <= {MAX_ALIGN}")
        names.add(s.name)
    header_size = HEADER.size + ENTRY.size * len(sections)
    entries: list[bytes] = []
    chunks: list[bytes | memoryview] = []
    offset = header_size
    for s in sections:
        start = _align_up(offset, s.align)
        view = memoryview(s.data).cast("B")
        chunks.append(b"\0" * (start - offset))
        chunks.append(view)
        entries.append(
            ENTRY.pack(
                _KIND_CODES[s.kind],
                s.align,
                start,
                view.nbytes,
                hashlib.sha256(view).digest(),
                _fixed(s.name, NAME_BYTES, "section name"),
            )
        )
        offset = start + view.nbytes
    head = HEADER.pack(
        MAGIC,
        *model.version,
        header_size,
        len(sections),
        0,
        _fixed(model.target, TARGET_BYTES, "target kind"),
        _fixed(model.chip, CHIP_BYTES, "chip name"),
        offset,
        b"\0" * 16,
        b"\0" * 32,
    )
    table = b"".join(entries)
    digest = hashlib.sha256(head[:HASHED_HEADER] + table).digest()
    return [head[:HASHED_HEADER] + digest + table, *chunks]


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, allow_nan=False).encode("utf-8")


def _json_ok(obj: Any, what: str) -> None:
    try:
        json.dumps(obj, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{what} is not JSON: {e}") from None


def write_model(path: str | os.PathLike[str], model: Model) -> None:
    """Write ``model`` to ``path`` atomically (a temporary file renamed into place: a failure leaves
    no partial file). A model :func:`read_model` would refuse raises ``ValueError`` (a bug of the
    writer's caller, not of the user)."""
    chunks = encode_model(model)
    with atomic_output(os.fspath(path), suffix=".lamina") as tmp, open(tmp, "wb") as f:
        for c in chunks:
            f.write(c)


# ---- reading ---------------------------------------------------------------------------------------


class _Reader:
    """The checks of :func:`read_model`, each failing with one message naming the file."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, what: str) -> LaminaError:
        return LaminaError(f"'{self.path}': not a valid .lamina model file: {what}")


def _cstr(raw: bytes, what: str, r: _Reader, at: int) -> str:
    text, _, pad = raw.partition(b"\0")
    if pad.strip(b"\0"):
        raise r.fail(f"{what} at byte {at}: bytes after its terminating NUL are not zero")
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError:
        raise r.fail(f"{what} at byte {at}: not UTF-8") from None
    if not s:
        raise r.fail(f"{what} at byte {at}: empty")
    return s


def read_model(path: str | os.PathLike[str]) -> Model:
    """Read and check a ``.lamina`` file (see the module docstring for what is checked). Sections are
    memoryviews of a read-only mapping of the file, which stays open while any of them is alive."""
    p = os.fspath(path)
    check_input_file(p, "model file")
    r = _Reader(p)
    try:
        with open(p, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size < HEADER.size:
                raise r.fail(f"truncated: {size} bytes, the header alone needs {HEADER.size}")
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError as e:
        raise LaminaError(f"cannot read '{p}': {e.strerror or e}") from None
    return _parse(memoryview(mm), r)


def _parse(mv: memoryview, r: _Reader) -> Model:
    size = mv.nbytes
    magic, major, minor, header_size, count, flags, target, chip, file_size, reserved, digest = (
        HEADER.unpack_from(mv, 0)
    )
    if magic != MAGIC:
        raise r.fail(f"bad magic {bytes(magic)!r} at byte 0 (expected {MAGIC!r})")
    if major != FORMAT_VERSION[0] or minor > FORMAT_VERSION[1]:
        raise r.fail(
            f"format version {major}.{minor} at byte 8; this Lamina reads "
            f"{FORMAT_VERSION[0]}.0 to {FORMAT_VERSION[0]}.{FORMAT_VERSION[1]}"
        )
    if not 2 <= count <= MAX_SECTIONS:
        raise r.fail(f"section count {count} at byte 16 (expected 2 to {MAX_SECTIONS})")
    if header_size != HEADER.size + ENTRY.size * count:
        raise r.fail(
            f"header size {header_size} at byte 12 (expected {HEADER.size + ENTRY.size * count} "
            f"for {count} sections)"
        )
    if file_size != size:
        what = "truncated" if size < file_size else "trailing bytes"
        raise r.fail(f"{what}: the header (byte 72) says {file_size} bytes, the file has {size}")
    if header_size > size:
        raise r.fail(f"truncated: the section table ends at byte {header_size}, the file has {size}")
    table = mv[HEADER.size : header_size]
    if hashlib.sha256(bytes(mv[:HASHED_HEADER]) + table).digest() != digest:
        raise r.fail(f"the header or section table (bytes 0 to {header_size}) is corrupted: sha256 mismatch")
    if flags != 0 or reserved.strip(b"\0"):
        raise r.fail("reserved header fields (bytes 20 and 80) are not zero")
    target_s = _cstr(target, "target kind", r, 24)
    chip_s = _cstr(chip, "chip name", r, 40)

    sections: list[tuple[str, str, int, int, int]] = []  # kind, name, align, offset, size
    names: set[str] = set()
    for i in range(count):
        at = HEADER.size + i * ENTRY.size
        code, align, offset, length, sha, raw_name = ENTRY.unpack_from(mv, at)
        name = _cstr(raw_name, f"section {i}'s name", r, at + 56)
        where = f"section {i} '{name}' (table entry at byte {at})"
        if code not in SECTION_KINDS:
            raise r.fail(f"{where}: unknown section kind {code}")
        if name in names:
            raise r.fail(f"{where}: a second section of this name")
        names.add(name)
        if align == 0 or align & (align - 1) or align > MAX_ALIGN:
            raise r.fail(f"{where}: alignment {align} is not a power of two <= {MAX_ALIGN}")
        if offset < header_size or offset + length > size:
            raise r.fail(
                f"{where}: bytes {offset} to {offset + length} lie outside the data area "
                f"(bytes {header_size} to {size})"
            )
        if offset % align:
            raise r.fail(f"{where}: offset {offset} is not a multiple of its alignment {align}")
        if hashlib.sha256(mv[offset : offset + length]).digest() != sha:
            raise r.fail(f"{where}: bytes {offset} to {offset + length} are corrupted: sha256 mismatch")
        sections.append((SECTION_KINDS[code], name, align, offset, length))

    # Sections may not overlap, and the padding between them must be zero: every byte is checked.
    end, last = header_size, "the section table"
    for _kind, name, _, offset, length in sorted(sections, key=lambda s: (s[3], s[4])):
        if offset < end:
            raise r.fail(f"section '{name}' (bytes {offset} to {offset + length}) overlaps {last}")
        if bytes(mv[end:offset]).strip(b"\0"):
            raise r.fail(f"padding bytes {end} to {offset} before section '{name}' are not zero")
        end, last = offset + length, f"section '{name}'"
    if bytes(mv[end:size]).strip(b"\0"):
        raise r.fail(f"padding bytes {end} to {size} after {last} are not zero")

    by_kind: dict[str, list[tuple[str, str, int, int, int]]] = {}
    for s in sections:
        by_kind.setdefault(s[0], []).append(s)
    for kind in ("io", "metadata"):
        found = by_kind.get(kind, [])
        if len(found) != 1:
            raise r.fail(f"{len(found)} sections of kind '{kind}' (expected exactly one)")
    texts: dict[str, str] = {}
    for kind, name, _, offset, length in sections:
        if kind in TEXT_KINDS:
            try:
                texts[name] = bytes(mv[offset : offset + length]).decode("utf-8")
            except UnicodeDecodeError as e:
                raise r.fail(f"section '{name}': byte {offset + e.start} is not UTF-8") from None
    io = _load_json(texts[by_kind["io"][0][1]], "io", r)
    meta = _load_json(texts[by_kind["metadata"][0][1]], "metadata", r)
    if not isinstance(meta, dict):
        raise r.fail("section 'metadata': expected a JSON object")
    binary = [
        Section(kind, name, mv[offset : offset + length].toreadonly(), align)
        for kind, name, align, offset, length in sections
        if kind not in ("io", "metadata")
    ]
    inputs, outputs, subnets, activation = _check_io(io, r.path, {s.name: s.kind for s in binary})
    return Model(
        target=target_s,
        chip=chip_s,
        name=io["name"],
        inputs=inputs,
        outputs=outputs,
        subnets=subnets,
        activation_bytes=activation,
        sections=binary,
        metadata=meta,
        version=(major, minor),
    )


def _load_json(text: str, section: str, r: _Reader) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise r.fail(f"section '{section}': not JSON: {e}") from None


# ---- the IO descriptors ----------------------------------------------------------------------------


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _check_io(
    io: Any, path: str, code_sections: Mapping[str, str]
) -> tuple[list[TensorDesc], list[TensorDesc], list[SubnetDesc], int]:
    """Check the ``io`` section's JSON field by field; return its descriptors. A bad field is one
    error naming it (``outputs[1].scale: expected a positive finite number, got -1``)."""

    def bad(where: str, expected: str, got: Any) -> LaminaError:
        shown = json.dumps(got)[:80] if _json_safe(got) else repr(got)[:80]
        return LaminaError(
            f"'{path}': not a valid .lamina model file: section 'io': {where}: expected {expected}, got {shown}"
        )

    def obj(v: Any, where: str, keys: Sequence[str]) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise bad(where, "a JSON object", v)
        missing = [k for k in keys if k not in v]
        if missing:
            raise bad(where, f"the field '{missing[0]}'", sorted(v))
        extra = sorted(set(v) - set(keys))
        if extra:
            raise bad(where, f"only the fields {', '.join(keys)}", extra)
        return v

    def name(v: Any, where: str) -> str:
        if not isinstance(v, str) or not v:
            raise bad(where, "a non-empty string", v)
        return v

    def count(v: Any, where: str) -> int:
        if not _is_int(v) or v < 0:
            raise bad(where, "a non-negative integer", v)
        return int(v)

    def str_list(v: Any, where: str) -> tuple[str, ...]:
        if not isinstance(v, list):
            raise bad(where, "a list of names", v)
        return tuple(name(x, f"{where}[{i}]") for i, x in enumerate(v))

    def tensor(v: Any, where: str) -> TensorDesc:
        d = obj(v, where, ("name", "shape", "dtype", "scale", "zero_point", "address"))
        shape = d["shape"]
        if not isinstance(shape, list) or not all(_is_int(x) and x >= 0 for x in shape):
            raise bad(f"{where}.shape", "a list of non-negative integers", shape)
        if d["dtype"] not in DTYPES:
            raise bad(f"{where}.dtype", f"one of {', '.join(DTYPES)}", d["dtype"])
        scale = d["scale"]
        if (
            not isinstance(scale, (int, float))
            or isinstance(scale, bool)
            or not math.isfinite(scale)
            or scale <= 0
        ):
            raise bad(f"{where}.scale", "a positive finite number", scale)
        if not _is_int(d["zero_point"]):
            raise bad(f"{where}.zero_point", "an integer", d["zero_point"])
        return TensorDesc(
            name(d["name"], f"{where}.name"),
            tuple(shape),
            d["dtype"],
            float(scale),
            d["zero_point"],
            count(d["address"], f"{where}.address"),
        )

    d = obj(io, "the top level", ("name", "inputs", "outputs", "subnets", "activation_bytes"))
    name(d["name"], "name")
    lists = {}
    for key in ("inputs", "outputs", "subnets"):
        if not isinstance(d[key], list):
            raise bad(key, "a list", d[key])
        lists[key] = d[key]
    inputs = [tensor(v, f"inputs[{i}]") for i, v in enumerate(lists["inputs"])]
    outputs = [tensor(v, f"outputs[{i}]") for i, v in enumerate(lists["outputs"])]
    for key, ts in (("inputs", inputs), ("outputs", outputs)):
        seen: set[str] = set()
        for i, t in enumerate(ts):
            if t.name in seen:
                raise bad(f"{key}[{i}].name", "a name not used before in the same list", t.name)
            seen.add(t.name)
    subnets = []
    subnet_names: set[str] = set()
    for i, v in enumerate(lists["subnets"]):
        where = f"subnets[{i}]"
        s = obj(v, where, ("name", "kind", "section", "inputs", "outputs", "commands"))
        sname = name(s["name"], f"{where}.name")
        if sname in subnet_names:
            raise bad(f"{where}.name", "a subnet name not used before", sname)
        subnet_names.add(sname)
        section = name(s["section"], f"{where}.section")
        if code_sections.get(section) not in CODE_KINDS:
            raise bad(f"{where}.section", f"the name of a section of kind {', '.join(CODE_KINDS)}", section)
        cmds = s["commands"]
        if not isinstance(cmds, dict):
            raise bad(f"{where}.commands", "an object of engine: count", cmds)
        subnets.append(
            SubnetDesc(
                sname,
                name(s["kind"], f"{where}.kind"),
                section,
                str_list(s["inputs"], f"{where}.inputs"),
                str_list(s["outputs"], f"{where}.outputs"),
                {name(k, f"{where}.commands"): count(n, f"{where}.commands.{k}") for k, n in cmds.items()},
            )
        )
    return inputs, outputs, subnets, count(d["activation_bytes"], "activation_bytes")


def _json_safe(v: Any) -> bool:
    try:
        json.dumps(v, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False

"""The CPU file's code sections (``lamina/targets/cpu/objects.py``): a list of objects and a list of
LLVM modules round-trip; layout 1 (one ELF object, one linked module: files written before) is
still read; a truncated list, entries out of bounds, overlapping or misaligned, trailing or stray
bytes, another layout version, a count of zero are each one clear error; and through a whole file:
a model written with layout 1 sections still loads and gives the same bits, a truncated or corrupt
object list in a file whose hashes check is refused naming the section."""

from __future__ import annotations

import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from lamina.support.errors import LaminaError
from lamina.targets.cpu.objects import pack_ir, pack_objects, unpack_ir, unpack_objects

ELF = b"\x7fELF" + bytes(60)


def test_objects_round_trip() -> None:
    objs = [ELF + b"a", ELF + bytes(range(37)), ELF]
    data = pack_objects(objs)
    assert data[:8] == b"LMCPUOBJ" and struct.unpack_from("<II", data, 8) == (2, 3)
    assert unpack_objects(data) == objs
    assert unpack_objects(memoryview(data)) == objs
    assert unpack_objects(pack_objects([ELF])) == [ELF]
    for off, _ in struct.iter_unpack("<QQ", data[16 : 16 + 48]):
        assert off % 16 == 0


def test_layout_1_is_one_object() -> None:
    assert unpack_objects(ELF + b"xyz") == [ELF + b"xyz"]


def _table(data: bytes, i: int, off: int, size: int) -> bytes:
    raw = bytearray(data)
    struct.pack_into("<QQ", raw, 16 + 16 * i, off, size)
    return bytes(raw)


def test_bad_object_lists() -> None:
    data = pack_objects([ELF + b"a", ELF + b"bc"])
    (o0, _), (o1, s1) = struct.iter_unpack("<QQ", data[16:48])
    cases = {
        "neither an ELF object": b"junk" + data[4:],
        "layout 3; this Lamina reads layouts 1 and 2": data[:8] + struct.pack("<I", 3) + data[12:],
        "list of 0 objects": data[:12] + struct.pack("<I", 0) + data[16:],
        "list of 100000 objects": data[:12] + struct.pack("<I", 100000) + data[16:],
        "table of 20 entries": data[:12] + struct.pack("<I", 20) + data[16:],
        "truncated: its table": data[:40],
        "object 1 of 2: bytes": data[:-1],  # the last object cut short
        "1 bytes after its last object": data + b"\0",
        "lie outside": _table(data, 1, o0, s1),  # overlaps object 0
        "16-aligned": _table(data, 1, o1 + 1, s1 - 1),
        "non-zero bytes before it": data[: o1 - 1] + b"\1" + data[o1:],
    }
    for what, bad in cases.items():
        with pytest.raises(LaminaError, match=what):
            unpack_objects(bad)
    with pytest.raises(LaminaError, match="neither"):
        unpack_objects(b"")
    with pytest.raises(ValueError):
        pack_objects([])


def test_ir_round_trip_and_layout_1() -> None:
    texts = ['; ModuleID = "a"\ndefine void @a() {\n  ret void\n}\n', "; é — non-ASCII\n", ""]
    assert unpack_ir(pack_ir(texts)) == texts
    old = '; ModuleID = "linked"\ntarget triple = "x86_64-unknown-linux-gnu"\n'
    assert unpack_ir(old) == [old]


def test_bad_ir_lists() -> None:
    good = pack_ir(["abc\n", "déf\n"])
    cases = {
        "its first line": "; lamina llvm_ir two modules\n",
        "layout 7": good.replace("llvm_ir 2:", "llvm_ir 7:", 1),
        "list of 0 modules": "; lamina llvm_ir 2: 0 modules\n",
        "module 1 of 2 truncated": good[:-2],
        "module 1 of 2: expected": good.replace("; module 1:", "; module 5:"),
        "bytes after its last module": good + "x",
        "splits a UTF-8 character": good.replace("; module 1: 5 bytes", "; module 1: 2 bytes").replace(
            "déf\n", "dé"
        ),
    }
    for what, bad in cases.items():
        with pytest.raises(LaminaError, match=what):
            unpack_ir(bad)


# ---- through a whole file --------------------------------------------------------------------------


def test_file_with_layout_1_sections_still_loads(small: tuple, tmp_path: Path) -> None:
    """A file as Lamina wrote it before layout 2 (one linked object, one linked module) loads and
    runs: the same bits as the file written now."""
    from test_runtime import _with_section

    import lamina.runtime as rt
    from lamina.targets.container import write_model
    from lamina.targets.cpu import jit

    res, x, path = small
    texts = unpack_ir(bytes(res.model.section("llvm_ir").data).decode())
    obj, linked = jit.compile_ir(texts, jit.host_spec())  # layout 1: the modules linked into one
    old = _with_section(_with_section(res.model, "object", obj), "llvm_ir", linked.encode())
    p = tmp_path / "old.lamina"
    write_model(p, old)
    m = rt.load(p)
    assert not m.recompiled
    assert next(iter(m.run(x).values())).tobytes() == next(iter(rt.load(path).run(x).values())).tobytes()
    # and its llvm_ir recompiled on a CPU lacking a recorded feature (one module)
    if "amx-tile" not in jit.host_spec().enabled:
        import json

        meta = json.loads(json.dumps(old.metadata))
        meta["cpu"]["features"] += ",+amx-tile"
        p2 = tmp_path / "old-recompiled.lamina"
        write_model(p2, replace(old, metadata=meta))
        m2 = rt.load(p2)
        assert m2.recompiled
        assert next(iter(m2.run(x).values())).tobytes() == next(iter(m.run(x).values())).tobytes()


def test_file_with_a_bad_object_list_is_refused(small: tuple, tmp_path: Path) -> None:
    from test_runtime import _with_section

    import lamina.runtime as rt
    from lamina.targets.container import write_model

    res, _, _ = small
    data = bytes(res.model.section("object").data)
    assert len(unpack_objects(data)) >= 3  # the kernels' modules and the two entries
    for what, bad in (
        ("object list truncated", data[:20]),
        ("object list: 16 bytes after its last object", data + bytes(16)),
        ("object 1 of", _with_elf_broken(data, 1)),
    ):
        p = tmp_path / "bad.lamina"
        write_model(p, _with_section(res.model, "object", bad))
        with pytest.raises(LaminaError, match=rf"bad.lamina': section 'object': {what}"):
            rt.load(p)


def _with_elf_broken(data: bytes, i: int) -> bytes:
    """The object list with object ``i``'s ELF section table pointing past the object."""
    objs = unpack_objects(data)
    o = bytearray(objs[i])
    struct.pack_into("<Q", o, 0x28, len(o) + 4096)
    objs[i] = bytes(o)
    return pack_objects(objs)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple:
    """The runtime tests' small INT8 model compiled and written."""
    from test_runtime import TOP

    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.quant.deploy import deploy_module
    from lamina.targets.base import CompileOptions
    from lamina.targets.container import write_model
    from lamina.targets.cpu import target

    tpu = deploy_module(parse_module(TOP, Context()), "INT8")
    res = target().compile(tpu, CompileOptions(name="small", mode="INT8"))
    path = tmp_path_factory.mktemp("objects") / "small.lamina"
    write_model(path, res.model)
    x = {"x": np.random.default_rng(0).uniform(-2, 2, (1, 4, 8, 8)).astype(np.float32)}
    return res, x, path

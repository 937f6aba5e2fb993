"""The ``.lamina`` container (lamina/targets/container.py): round trips, the documented byte layout
read with ``struct`` alone, and every corruption — truncation at every boundary, a flipped byte in
every region, wrong magic and version, overlapping and out-of-range sections, bad IO descriptors —
refused with one LaminaError naming the file, never a traceback."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.support.errors import LaminaError
from lamina.targets.container import (
    DTYPES,
    ENTRY,
    HEADER,
    MAGIC,
    Model,
    Section,
    SubnetDesc,
    TensorDesc,
    read_model,
    write_model,
)


def sample_model() -> Model:
    weights = np.arange(1000, dtype=np.float32).tobytes()
    return Model(
        target="npu",
        chip="lnpu",
        name="net",
        inputs=[TensorDesc("x", (1, 3, 8, 8), "int8", 0.0125, 3, 0)],
        outputs=[TensorDesc("y", (1, 10), "float32", address=4096)],
        subnets=[
            SubnetDesc("npu0", "npu", "commands/npu0", ("x",), ("t",), {"tiu": 3, "gdma": 5}),
            SubnetDesc("cpu1", "cpu", "cpu/nms", ("t",), ("y",)),
        ],
        activation_bytes=8192,
        sections=[
            Section("weights", "weights", weights, align=4096),
            Section("commands", "commands/npu0", bytes(range(256)) * 3),
            Section("cpu_subnet", "cpu/nms", b"func.func @nms() { return }\n"),
        ],
        metadata={"lamina_version": "0.1", "created": "2026-12-01T06:00:00Z", "options": {"opt": 2}},
    )


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    p = tmp_path / "m.lamina"
    write_model(p, sample_model())
    return p


def test_round_trip(model_file: Path) -> None:
    m = read_model(model_file)
    ref = sample_model()
    assert (m.target, m.chip, m.name, m.version) == ("npu", "lnpu", "net", (1, 0))
    assert m.inputs == ref.inputs and m.outputs == ref.outputs and m.subnets == ref.subnets
    assert m.activation_bytes == 8192 and m.metadata == ref.metadata
    assert [(s.kind, s.name, s.align) for s in m.sections] == [
        (s.kind, s.name, s.align) for s in ref.sections
    ]
    for a, b in zip(m.sections, ref.sections, strict=True):
        assert bytes(a.data) == bytes(b.data)
    assert m.section("cpu/nms").text().startswith("func.func")
    assert list(m.subnets[0].commands) == ["tiu", "gdma"]  # engine order is kept


def test_sections_are_views_of_the_mapping(model_file: Path) -> None:
    w = read_model(model_file).section("weights")
    assert isinstance(w.data, memoryview) and w.data.readonly
    assert np.array_equal(np.frombuffer(w.data, np.float32), np.arange(1000, dtype=np.float32))
    # No copy: the view's buffer is the file mapping, one object for every section.
    m = read_model(model_file)
    assert m.section("weights").data.obj is m.section("commands/npu0").data.obj


def test_layout_readable_with_struct(model_file: Path) -> None:
    """docs/lamina-file.md's layout, read the way a third party would."""
    raw = model_file.read_bytes()
    magic, major, minor, hsize, count, flags, target, chip, fsize, _res, digest = struct.unpack_from(
        "<8sHHIII16s32sQ16s32s", raw, 0
    )
    assert (magic, major, minor, flags) == (MAGIC, 1, 0, 0) and fsize == len(raw)
    assert target.rstrip(b"\0") == b"npu" and chip.rstrip(b"\0") == b"lnpu"
    assert hsize == 128 + 128 * count
    assert hashlib.sha256(raw[:96] + raw[128:hsize]).digest() == digest
    kinds = {}
    for i in range(count):
        kind, align, off, size, sha, name = struct.unpack_from("<IIQQ32s72s", raw, 128 + 128 * i)
        assert off % align == 0 and hashlib.sha256(raw[off : off + size]).digest() == sha
        kinds[name.rstrip(b"\0").decode()] = (kind, raw[off : off + size])
    assert kinds["io"][0] == 1 and kinds["metadata"][0] == 2 and kinds["weights"][0] == 3
    io = json.loads(kinds["io"][1])
    assert io["inputs"][0] == {
        "name": "x",
        "shape": [1, 3, 8, 8],
        "dtype": "int8",
        "scale": 0.0125,
        "zero_point": 3,
        "address": 0,
    }
    assert io["subnets"][1]["section"] == "cpu/nms" and io["activation_bytes"] == 8192


def test_write_is_atomic_and_checks_the_model(tmp_path: Path) -> None:
    p = tmp_path / "m.lamina"
    bad = sample_model()
    bad.subnets[0] = SubnetDesc("npu0", "npu", "no-such-section")
    with pytest.raises(ValueError, match="no-such-section"):
        write_model(p, bad)
    bad = sample_model()
    bad.sections.append(Section("weights", "weights", b"again"))
    with pytest.raises(ValueError, match="two sections"):
        write_model(p, bad)
    bad = sample_model()
    bad.metadata["x"] = float("nan")
    with pytest.raises(ValueError, match="metadata"):
        write_model(p, bad)
    assert os.listdir(tmp_path) == []  # nothing written, no temporary left


names = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=20)


@st.composite
def models(draw: st.DrawFn) -> Model:
    sec_names = draw(st.lists(names.filter(lambda n: n not in ("io", "metadata")), unique=True, max_size=5))
    sections = [
        Section(
            draw(st.sampled_from(["weights", "commands", "cpu_subnet", "object", "llvm_ir"])),
            n,
            draw(st.binary(max_size=300)),
            draw(st.sampled_from([1, 8, 64, 4096])),
        )
        for n in sec_names
    ]
    for i, s in enumerate(sections):  # text kinds hold UTF-8
        if s.kind in ("cpu_subnet", "llvm_ir"):
            sections[i] = Section(s.kind, s.name, bytes(s.data).hex().encode(), s.align)
    code = [s.name for s in sections if s.kind != "weights"]
    tensors = st.builds(
        TensorDesc,
        names,
        st.lists(st.integers(0, 1 << 20), max_size=5).map(tuple),
        st.sampled_from(DTYPES),
        st.floats(1e-30, 1e30),
        st.integers(-(1 << 40), 1 << 40),
        st.integers(0, 1 << 50),
    )
    subnets = [
        SubnetDesc(
            f"s{i}",
            draw(st.sampled_from(["npu", "cpu"])),
            c,
            tuple(draw(st.lists(names, max_size=3))),
            tuple(draw(st.lists(names, max_size=3))),
            draw(st.dictionaries(names, st.integers(0, 1 << 40), max_size=3)),
        )
        for i, c in enumerate(code)
    ]
    return Model(
        target=draw(st.sampled_from(["npu", "cpu"])),
        chip=draw(st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=32)),
        name=draw(names),
        inputs=draw(st.lists(tensors, max_size=3, unique_by=lambda t: t.name)),
        outputs=draw(st.lists(tensors, max_size=3, unique_by=lambda t: t.name)),
        subnets=subnets,
        activation_bytes=draw(st.integers(0, 1 << 60)),
        sections=sections,
        metadata=draw(st.dictionaries(names, st.one_of(st.integers(), st.text(), st.booleans()), max_size=4)),
    )


@settings(max_examples=60)
@given(m=models())
def test_round_trip_property(tmp_path_factory: pytest.TempPathFactory, m: Model) -> None:
    p = tmp_path_factory.mktemp("rt") / "m.lamina"
    write_model(p, m)
    r = read_model(p)
    assert (r.target, r.chip, r.name, r.activation_bytes) == (m.target, m.chip, m.name, m.activation_bytes)
    assert (r.inputs, r.outputs, r.subnets, r.metadata) == (m.inputs, m.outputs, m.subnets, m.metadata)
    assert [(s.kind, s.name, s.align, bytes(s.data)) for s in r.sections] == [
        (s.kind, s.name, s.align, bytes(s.data)) for s in m.sections
    ]


# ---- corruption -------------------------------------------------------------------------------------


def refused(path: Path, *fragments: str) -> str:
    with pytest.raises(LaminaError) as e:
        read_model(path)
    msg = str(e.value)
    assert str(path) in msg and "\n" not in msg, msg
    for f in fragments:
        assert f in msg, msg
    return msg


def boundaries(raw: bytes) -> list[int]:
    count = struct.unpack_from("<I", raw, 16)[0]
    cuts = {0, 8, 72, 96, 128, 128 + 128 * count, len(raw) - 1}
    for i in range(count):
        _, _, off, size, _, _ = ENTRY.unpack_from(raw, 128 + 128 * i)
        cuts |= {off, off + size // 2, off + size}
    return sorted(c for c in cuts if c < len(raw))


def test_truncated_at_every_boundary(model_file: Path, tmp_path: Path) -> None:
    raw = model_file.read_bytes()
    bad = tmp_path / "t.lamina"
    for cut in boundaries(raw):
        bad.write_bytes(raw[:cut])
        refused(bad, "truncated")


def test_trailing_bytes(model_file: Path, tmp_path: Path) -> None:
    bad = tmp_path / "t.lamina"
    bad.write_bytes(model_file.read_bytes() + b"\0")
    refused(bad, "trailing bytes")


def regions(raw: bytes) -> dict[str, tuple[int, int]]:
    """Every region of the file: header fields, table entries, each section, each padding gap."""
    count = struct.unpack_from("<I", raw, 16)[0]
    out = {"header": (0, 128), **{f"entry {i}": (128 + 128 * i, 256 + 128 * i) for i in range(count)}}
    spans = sorted(ENTRY.unpack_from(raw, 128 + 128 * i)[2:4] for i in range(count))
    end = 128 + 128 * count
    for off, size in spans:
        if off > end:
            out[f"padding {end}"] = (end, off)
        out[f"section at {off}"] = (off, off + size)
        end = off + size
    return {k: v for k, v in out.items() if v[1] > v[0]}


def test_flipped_byte_anywhere(model_file: Path, tmp_path: Path) -> None:
    """One flipped bit in every region (first, middle and last byte) is caught, whatever it hits."""
    raw = model_file.read_bytes()
    bad = tmp_path / "f.lamina"
    for what, (a, b) in regions(raw).items():
        for at in {a, (a + b) // 2, b - 1}:
            data = bytearray(raw)
            data[at] ^= 0x10
            bad.write_bytes(data)
            msg = refused(bad)
            assert "not a valid .lamina model file" in msg, (what, at, msg)


def test_flipped_byte_in_each_section_named(model_file: Path, tmp_path: Path) -> None:
    raw = model_file.read_bytes()
    bad = tmp_path / "f.lamina"
    for i in range(struct.unpack_from("<I", raw, 16)[0]):
        _, _, off, size, _, name = ENTRY.unpack_from(raw, 128 + 128 * i)
        data = bytearray(raw)
        data[off + size // 2] ^= 1
        bad.write_bytes(data)
        label = name.rstrip(b"\0").decode()
        refused(bad, f"'{label}'", "sha256 mismatch", f"bytes {off} to {off + size}")


def rewrite(raw: bytes, entries: dict[int, tuple] | None = None, **header: object) -> bytes:
    """``raw`` with header fields or table entries replaced and the header hash recomputed: a file
    whose checksums are right but whose content is wrong (a buggy or hostile writer)."""
    fields = list(HEADER.unpack_from(raw, 0))
    names = ["magic", "major", "minor", "header_size", "count", "flags", "target", "chip", "file_size"]
    for k, v in header.items():
        fields[names.index(k)] = v
    data = bytearray(raw)
    HEADER.pack_into(data, 0, *fields)
    for i, e in (entries or {}).items():
        ENTRY.pack_into(data, 128 + 128 * i, *e)
    count = struct.unpack_from("<I", raw, 16)[0]
    data[96:128] = hashlib.sha256(bytes(data[:96]) + bytes(data[128 : 128 + 128 * count])).digest()
    return bytes(data)


def entry(raw: bytes, i: int) -> list:
    return list(ENTRY.unpack_from(raw, 128 + 128 * i))


def test_wrong_magic_and_version(model_file: Path, tmp_path: Path) -> None:
    raw = model_file.read_bytes()
    bad = tmp_path / "v.lamina"
    bad.write_bytes(rewrite(raw, magic=b"\x7fELF\x02\x01\x01\0"))
    refused(bad, "bad magic", "byte 0")
    bad.write_bytes(rewrite(raw, major=2))
    refused(bad, "format version 2.0", "reads 1.0")
    bad.write_bytes(rewrite(raw, minor=7))
    refused(bad, "format version 1.7")
    bad.write_bytes(b"PK\x03\x04" + b"\0" * 200)  # an .npz given by mistake
    refused(bad, "bad magic")
    bad.write_bytes(b"")
    refused(bad, "truncated: 0 bytes")


def test_bad_table(model_file: Path, tmp_path: Path) -> None:
    raw = model_file.read_bytes()
    bad = tmp_path / "s.lamina"
    e2, e3 = entry(raw, 2), entry(raw, 3)  # weights, commands
    cases = [
        ({3: [e3[0], *e2[1:5], e3[5]]}, "overlaps"),  # commands placed on the weights
        ({3: [*e3[:2], e3[2], len(raw), *e3[4:]]}, "outside the data area"),
        ({3: [*e3[:2], 64, *e3[3:]]}, "outside the data area"),  # inside the header
        ({3: [99, *e3[1:]]}, "unknown section kind 99"),
        ({3: [e3[0], 3, *e3[2:]]}, "alignment 3"),
        ({3: [e3[0], 4096, *e3[2:]]}, "not a multiple of its alignment"),
        ({3: [*e3[:5], e2[5]]}, "a second section of this name"),
        ({3: [*e3[:5], b"\0" * 72]}, "name at byte"),
        ({3: [*e3[:5], b"a\0b" + b"\0" * 69]}, "after its terminating NUL"),
        ({2: [2, *e2[1:]]}, "2 sections of kind 'metadata'"),
    ]
    for entries, fragment in cases:
        bad.write_bytes(rewrite(raw, entries))
        refused(bad, fragment)
    count = struct.unpack_from("<I", raw, 16)[0]
    bad.write_bytes(rewrite(raw, count=count + 1))
    refused(bad, "header size")
    bad.write_bytes(rewrite(raw, count=1, header_size=256))
    refused(bad, "section count 1")
    bad.write_bytes(rewrite(raw, flags=1))
    refused(bad, "reserved header fields")
    bad.write_bytes(rewrite(raw, chip=b"\xff" * 32))
    refused(bad, "chip name at byte 40: not UTF-8")


def with_io(raw: bytes, io: object) -> bytes:
    """``raw`` with its io section replaced: the old one zeroed, the new one appended at the end, its
    entry and the hashes updated."""
    e = entry(raw, 0)
    assert e[0] == 1
    data = io if isinstance(io, bytes) else json.dumps(io).encode()
    off = (len(raw) + 63) // 64 * 64
    body = bytearray(raw + b"\0" * (off - len(raw)) + data)
    body[e[2] : e[2] + e[3]] = bytes(e[3])
    return rewrite(
        bytes(body), {0: [1, 64, off, len(data), hashlib.sha256(data).digest(), e[5]]}, file_size=len(body)
    )


def test_bad_io_descriptors(model_file: Path, tmp_path: Path) -> None:
    raw = model_file.read_bytes()
    io = json.loads(bytes(memoryview(raw)[entry(raw, 0)[2] :][: entry(raw, 0)[3]]))
    bad = tmp_path / "io.lamina"

    def case(mutate, *fragments: str) -> None:
        d = json.loads(json.dumps(io))
        mutate(d)
        bad.write_bytes(with_io(raw, d))
        refused(bad, "section 'io'", *fragments)

    case(lambda d: d["inputs"][0].update(dtype="complex64"), "inputs[0].dtype", "complex64")
    case(lambda d: d["inputs"][0].update(shape=[1, -3]), "inputs[0].shape")
    case(lambda d: d["inputs"][0].update(shape="1x3"), "inputs[0].shape")
    case(lambda d: d["outputs"][0].update(scale=0), "outputs[0].scale")
    case(lambda d: d["outputs"][0].update(scale=True), "outputs[0].scale")
    case(lambda d: d["outputs"][0].update(zero_point=0.5), "outputs[0].zero_point")
    case(lambda d: d["outputs"][0].update(address=-1), "outputs[0].address")
    case(lambda d: d["outputs"][0].pop("name"), "outputs[0]", "'name'")
    case(lambda d: d["outputs"][0].update(extra=1), "outputs[0]", "only the fields")
    case(lambda d: d["outputs"].append(d["outputs"][0]), "outputs[1].name")
    case(lambda d: d.update(activation_bytes="big"), "activation_bytes")
    case(lambda d: d.update(inputs={}), "inputs", "a list")
    case(lambda d: d["subnets"][0].update(section="weights"), "subnets[0].section")
    case(lambda d: d["subnets"][0].update(commands={"tiu": -1}), "subnets[0].commands.tiu")
    case(lambda d: d["subnets"][1].update(name="npu0"), "subnets[1].name")
    case(lambda d: d["subnets"][0].update(inputs=[3]), "subnets[0].inputs[0]")
    bad.write_bytes(with_io(raw, b"{not json"))
    refused(bad, "section 'io': not JSON")
    bad.write_bytes(with_io(raw, b"[" * 100000))
    refused(bad, "section 'io': not JSON")
    bad.write_bytes(with_io(raw, b'"\xff"'))
    refused(bad, "not UTF-8")
    bad.write_bytes(with_io(raw, []))
    refused(bad, "the top level", "a JSON object")


def test_not_a_regular_file(tmp_path: Path) -> None:
    with pytest.raises(LaminaError, match="does not exist"):
        read_model(tmp_path / "missing.lamina")
    with pytest.raises(LaminaError):
        read_model(tmp_path)


def test_docs_reader_snippet(
    model_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/lamina-file.md's "Reading a file with struct alone" runs on a file Lamina wrote."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "lamina-file.md").read_text()
    snippet = doc.split("## Reading a file with `struct` alone")[1].split("```python\n")[1].split("```")[0]
    monkeypatch.chdir(model_file.parent)
    exec(compile(snippet, "lamina-file.md", "exec"), {})
    assert capsys.readouterr().out == "lnpu [('x', [1, 3, 8, 8], 'int8')]\n"


@settings(max_examples=150)
@given(data=st.data())
def test_fuzz_never_a_traceback(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject) -> None:
    """Random damage — bytes flipped, cut or inserted anywhere, or header and table fields set to
    arbitrary values with the header hash recomputed (a hostile writer) — is a LaminaError or,
    when the damage happens to leave a valid file, a model; never another exception."""
    d = tmp_path_factory.mktemp("fuzz")
    good = write_sample_file(d / "good.lamina").read_bytes()
    raw = bytearray(good)
    how = data.draw(st.sampled_from(["flip", "cut", "insert", "fields"]))
    if how == "flip":
        for at in data.draw(st.lists(st.integers(0, len(raw) - 1), min_size=1, max_size=4)):
            raw[at] ^= data.draw(st.integers(1, 255))
    elif how == "cut":
        at = data.draw(st.integers(0, len(raw) - 1))
        del raw[at : at + data.draw(st.integers(1, 300))]
    elif how == "insert":
        at = data.draw(st.integers(0, len(raw)))
        raw[at:at] = data.draw(st.binary(min_size=1, max_size=64))
    else:
        count = struct.unpack_from("<I", good, 16)[0]
        header = {
            k: data.draw(st.integers(0, (1 << bits) - 1))
            for k, bits in (
                ("major", 16),
                ("minor", 16),
                ("header_size", 32),
                ("count", 32),
                ("file_size", 64),
            )
            if data.draw(st.booleans())
        }
        entries = {}
        for i in data.draw(st.lists(st.integers(0, count - 1), max_size=3)):
            e = entry(good, i)
            j = data.draw(st.integers(0, 3))
            e[j] = data.draw(st.integers(0, (1 << (32 if j < 2 else 64)) - 1))
            entries[i] = e
        raw = bytearray(rewrite(good, entries, **header))
    bad = d / "bad.lamina"
    bad.write_bytes(bytes(raw))
    try:
        read_model(bad)
    except LaminaError as e:
        assert str(bad) in str(e) and "\n" not in str(e)


def write_sample_file(path: Path) -> Path:
    write_model(path, sample_model())
    return path

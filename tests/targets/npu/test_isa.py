"""The ISA (lamina/targets/npu/isa.py): every command's record encodes and decodes exactly, the layouts
in docs/npu-isa.md are the code's, and a corrupt or truncated buffer is one LaminaError."""

from __future__ import annotations

import re
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.support.errors import LaminaError
from lamina.targets.npu import isa
from lamina.targets.npu.arch import DTYPES
from lamina.targets.npu.isa import COMMANDS, Command, Move, Space, Tensor, decode, encode, record_layout
from lamina.targets.npu.kernels import WORK_RULES
from lamina.targets.npu.slicing import SLICE_RULES

ROOT = Path(__file__).parents[3]

U32 = st.integers(0, 2**32 - 1)


@st.composite
def tensors(draw: st.DrawFn, shape: tuple[int, ...] | None = None, dtype: str | None = None) -> Tensor:
    return Tensor(
        space=draw(st.sampled_from(Space)),
        addr=draw(st.integers(0, 2**64 - 1)),
        shape=shape or tuple(draw(st.integers(1, 2**32 - 1)) for _ in range(4)),  # type: ignore[arg-type]
        strides=tuple(draw(st.integers(0, 2**31 - 1)) for _ in range(4)),  # type: ignore[arg-type]
        dtype=dtype or draw(st.sampled_from(sorted(DTYPES))),
        lane=draw(st.integers(0, 2**16 - 1)),
    )


def _scalar(cls: type[Command], name: str, code: str) -> st.SearchStrategy:
    if name in cls.ENUMS:
        return st.sampled_from(cls.ENUMS[name])
    return {
        "H": st.integers(0, 2**16 - 1),
        "I": U32,
        "i": st.integers(-(2**31), 2**31 - 1),
        "B": st.integers(0, 255),
        "?": st.booleans(),
        "d": st.floats(allow_nan=False),
        "4B": st.tuples(*[st.integers(0, 255)] * 4),
        "4d": st.tuples(*[st.floats(allow_nan=False)] * 4),
        "24s": st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=24),
    }[code]


@st.composite
def commands(draw: st.DrawFn) -> Command:
    cls = draw(st.sampled_from(sorted(COMMANDS.values(), key=lambda c: c.OPCODE)))
    kw: dict[str, object] = {"id": draw(U32), "wait": draw(U32), "group": draw(st.integers(0, 2**16 - 1))}
    if cls is Move:
        src = draw(tensors())
        kw["src"] = src
        kw["dst"] = draw(tensors(shape=src.shape, dtype=src.dtype))
    else:
        for name in cls.TENSORS:
            optional = name in cls.OPTIONAL and draw(st.booleans())
            kw[name] = None if optional else draw(tensors())
    for name, code in cls.SCALARS:
        kw[name] = draw(_scalar(cls, name, code))
    return cls(**kw)  # type: ignore[arg-type]


@settings(max_examples=300)
@given(st.lists(commands(), max_size=12))
def test_round_trip(cmds: list[Command]) -> None:
    buf = encode(cmds)
    assert decode(buf) == cmds
    assert encode(decode(buf)) == buf
    assert len(buf) == 24 + sum(type(c).record_size() for c in cmds)


def test_records_are_fixed_size_and_aligned() -> None:
    t = Tensor.ddr(0, (1, 1, 1, 1), "int8")
    for cls in COMMANDS.values():
        assert cls.record_size() % 8 == 0
        tensors_ = {n: t for n in cls.TENSORS}
        extra = {"fn": "Sigmoid"} if cls is isa.Active else {}
        one = encode([cls(**tensors_, **extra)])  # type: ignore[arg-type]
        assert len(one) == 24 + cls.record_size()
    assert len(set(COMMANDS)) == len(COMMANDS) == 16


def test_encode_errors() -> None:
    t = Tensor.ddr(0, (1, 1, 1, 1), "int8")
    with pytest.raises(LaminaError, match=r"command 0 \(Conv\): a field is out of range"):
        encode([isa.Conv(input=t, weight=t, output=t, kh=70000)])
    with pytest.raises(LaminaError, match="operand 'input' is required"):
        encode([isa.Pool(input=None, output=t)])  # type: ignore[arg-type]
    with pytest.raises(LaminaError, match="one shape and dtype"):
        Move(src=t, dst=Tensor.ddr(0, (1, 1, 1, 2), "int8"))
    with pytest.raises(LaminaError, match="dims must be >= 1"):
        Tensor.ddr(0, (1, 0, 1, 1), "int8")
    with pytest.raises(LaminaError, match="printable ASCII name of at most 24"):
        encode([isa.Active(input=t, output=t, fn="x" * 25)])
    assert Tensor(1, 0, [1, 2, 3, 4], np.array([24, 12, 4, 1]), "f32") == Tensor.ddr(0, (1, 2, 3, 4), "f32")  # type: ignore[arg-type]
    with pytest.raises(LaminaError, match="unknown memory space 2"):
        Tensor(2, 0, (1, 1, 1, 1), (1, 1, 1, 1), "int8")  # type: ignore[arg-type]
    with pytest.raises(LaminaError, match="unknown dtype"):
        Tensor.ddr(0, (1, 1, 1, 1), "int4")


def _sample() -> bytes:
    t = Tensor(Space.LMEM, 64, (1, 3, 4, 4), (64, 64, 4, 1), "int8")
    d = Tensor.ddr(0, (1, 3, 4, 4), "int8")
    return encode(
        [
            Move(id=1, src=d, dst=t),
            isa.Pool(id=1, wait=1, input=t, output=t, mode=isa.PoolMode.AVG, kh=2, kw=2),
            Move(id=2, wait=1, src=t, dst=d),
        ]
    )


def _with_payload(buf: bytes, payload: bytes, count: int | None = None) -> bytes:
    """``buf``'s header over a new payload, with a valid size and CRC (so deeper checks run)."""
    magic, version, res, n, _, _, res2 = struct.unpack_from("<4sHHIIII", buf)
    header = struct.pack(
        "<4sHHIIII",
        magic,
        version,
        res,
        n if count is None else count,
        len(payload),
        zlib.crc32(payload),
        res2,
    )
    return header + payload


def test_corrupt_buffers() -> None:
    buf = _sample()
    assert len(decode(buf)) == 3
    cases = {
        "truncated: 10 bytes": buf[:10],
        "bad magic": b"XXXX" + buf[4:],
        "format version 9 is not supported": buf[:4] + struct.pack("<H", 9) + buf[6:],
        "(truncated)": buf[:-1],
        "the buffer holds": buf + b"\0",
        "CRC-32 mismatch": buf[:40] + bytes([buf[40] ^ 1]) + buf[41:],
    }
    payload = buf[24:]
    cases["record 0 at byte 24: unknown opcode 0x7f"] = _with_payload(buf, b"\x7f" + payload[1:])
    cases["record 0 at byte 24: Move record of 96 bytes"] = _with_payload(
        buf, payload[:2] + struct.pack("<H", 96) + payload[4:]
    )
    cases[f"record 3 at byte {len(buf)}: truncated"] = _with_payload(buf, payload, count=4)
    cases["bytes after the last of 2 records"] = _with_payload(buf, payload, count=2)
    bad_dtype = bytearray(payload)
    bad_dtype[16 + 40] = 99  # the dtype byte of the first tensor of record 0
    cases["operand 'src': invalid dtype code 99"] = _with_payload(buf, bytes(bad_dtype))
    zero_dim = bytearray(payload)
    zero_dim[16 + 12 : 16 + 16] = b"\0\0\0\0"  # the first tensor's c
    cases["operand 'src': NPU tensor: dims must be >= 1"] = _with_payload(buf, bytes(zero_dim))
    missing = bytearray(payload)
    missing[16 + 40] = 0
    cases["Move operand 'src' is missing"] = _with_payload(buf, bytes(missing))
    bad_enum = bytearray(payload)
    pool_off = isa.Move.record_size()
    mode_off = dict((n, o) for o, n, _ in record_layout(isa.Pool))["mode"]
    bad_enum[pool_off + mode_off] = 7
    cases["field 'mode': invalid value 7"] = _with_payload(buf, bytes(bad_enum))
    for expected, bad in cases.items():
        with pytest.raises(LaminaError, match=re.escape(expected)):
            decode(bad, source="m.lamina")


def test_active_names() -> None:
    t = Tensor(Space.LMEM, 0, (1, 2, 3, 4), (12, 12, 4, 1), "bf16")
    cmd = isa.Active(id=1, input=t, output=t, fn="LeakyRelu", params=(0.01, 0.0, 0.0, 0.0))
    buf = encode([cmd])
    assert decode(buf) == [cmd]
    fn_off = dict((n, o) for o, n, _ in record_layout(isa.Active))["fn"]
    bad = bytearray(buf[24:])
    bad[fn_off + 2] = 0xFF
    with pytest.raises(LaminaError, match="field 'fn': not an ASCII name"):
        decode(_with_payload(buf, bytes(bad)))
    bad[fn_off + 2] = 0  # a NUL inside the name
    with pytest.raises(LaminaError, match="field 'fn': not an ASCII name"):
        decode(_with_payload(buf, bytes(bad)))


@given(st.data())
def test_any_truncation_or_flip_is_one_error(data: st.DataObject) -> None:
    buf = _sample()
    if data.draw(st.booleans()):
        bad = buf[: data.draw(st.integers(0, len(buf) - 1))]
    else:
        i = data.draw(st.integers(0, len(buf) - 1))
        bad = buf[:i] + bytes([buf[i] ^ data.draw(st.integers(1, 255))]) + buf[i + 1 :]
    with pytest.raises(LaminaError, match=r"^m\.lamina: "):
        decode(bad, source="m.lamina")


def test_doc_tables_match_the_code() -> None:
    """docs/npu-isa.md lists each opcode's record: the offsets, fields and codes of the code."""
    doc = (ROOT / "docs/npu-isa.md").read_text()
    for cls in COMMANDS.values():
        m = re.search(
            rf"^### `{cls.__name__}` — opcode 0x{cls.OPCODE:02x}, {cls.record_size()} bytes$", doc, re.M
        )
        assert m, f"docs/npu-isa.md has no heading for {cls.__name__}"
        table = doc[m.end() :].split("\n### ", 1)[0]
        rows = re.findall(r"^\| (\d+) \| `(\w+)` \| `([^`]+)` \|", table, re.M)
        assert [(int(o), n, c) for o, n, c in rows] == record_layout(cls), cls.__name__


#: What each scalar field means, for the tables of docs/npu-isa.md (:func:`opcode_tables`).
MEANINGS: dict[str | tuple[str, str], str] = {
    "kh": "kernel height",
    "kw": "kernel width",
    "stride_h": "vertical stride",
    "stride_w": "horizontal stride",
    "pad_top": "rows of padding above (explicit: a slice carries its own)",
    "pad_bottom": "rows of padding below",
    "pad_left": "columns of padding left",
    "pad_right": "columns of padding right",
    "dilation_h": "vertical dilation",
    "dilation_w": "horizontal dilation",
    "groups": "convolution groups",
    "input_zp": "input zero point (also the padding value of integer inputs)",
    "weight_zp": "weight zero point",
    "output_zp": "output zero point",
    "multiplier": "requant multiplier when `quant` is absent",
    "rshift": "requant shift: factor `multiplier * 2^-(31 + rshift)`",
    "out_min": "integer result's lower bound (saturation with ReLU folded in)",
    "out_max": "integer result's upper bound (saturation, ReLU limit folded in)",
    "do_relu": "float modes: clamp below at 0 (0/1)",
    "relu_limit": "float modes: upper clamp with `do_relu` (negative: none)",
    "right_transpose": "`right` is stored `(N, K)`",
    "left_zp": "left zero point",
    "right_zp": "right zero point when `quant` is absent",
    "a_zp": "`a` zero point",
    "b_zp": "`b` zero point",
    "a_multiplier": "`a`'s multiplier when `quant` is absent",
    "b_multiplier": "`b`'s multiplier when `quant` is absent",
    "count_include_pad": "average divides by the window including explicit padding (0/1)",
    "ceil_extra_h": "end rows a ceil-mode window adds (padded, never counted)",
    "ceil_extra_w": "end columns a ceil-mode window adds (padded, never counted)",
    "scale": "quantization scale (f64, as the type's) when `quant` is absent",
    "zero_point": "quantization zero point when `quant` is absent",
    "order": "permutation of (n, c, h, w)",
    "axes": "bit i set: reduce dim i of (n, c, h, w)",
    "fn": "the activation's name, ASCII, zero padded",
    "params": "its properties in declaration order (a string property: the index of its value)",
    "quant_axis": "the dim of (n, c, h, w) the `quant` tensor's channels run along (0..3)",
    ("Softmax", "axis"): "the dim of (n, c, h, w) the softmax runs along",
    "log": "log-softmax (0/1)",
    ("LayerNorm", "axis"): "the first normalized dim: dims `axis..3` of (n, c, h, w) are normalized",
    "epsilon": "added to the variance",
    ("Attention", "scale"): "the factor of `query key^T`",
}


def opcode_tables() -> str:
    """The "Opcodes" section of docs/npu-isa.md, from the code (``python tests/targets/npu/test_isa.py``
    prints it after a change to a record)."""
    import inspect

    out = []
    for cls in sorted(COMMANDS.values(), key=lambda c: c.OPCODE):
        kind = getattr(cls, "KIND", "gdma")
        doc = " ".join((inspect.getdoc(cls) or "").split()).replace("``", "`")
        out += [
            f"### `{cls.__name__}` — opcode 0x{cls.OPCODE:02x}, {cls.record_size()} bytes",
            "",
            f"{cls.ENGINE.value.upper()}, kind `{kind}`. {doc}",
            "",
        ]
        if cls in WORK_RULES:
            out += [f"*Work:* {WORK_RULES[cls]}. *Slicing:* {SLICE_RULES[cls]}.", ""]
        out += [
            "| offset | field | code | meaning |",
            "|---|---|---|---|",
        ]
        for off, name, code in record_layout(cls):
            if code == "T":
                meaning = "tensor descriptor" + (
                    " (optional: all zeros when absent)" if name in cls.OPTIONAL else ""
                )
            elif name in cls.ENUMS:
                meaning = ", ".join(f"{m.value} {m.name.lower()}" for m in cls.ENUMS[name])
            else:
                meaning = MEANINGS.get((cls.__name__, name)) or MEANINGS[name]
            out.append(f"| {off} | `{name}` | `{code}` | {meaning} |")
        out.append("")
    return "\n".join(out)


def test_doc_opcode_section_is_generated() -> None:
    doc = (ROOT / "docs/npu-isa.md").read_text()
    assert doc.endswith("## Opcodes\n\n" + opcode_tables()), "run python tests/targets/npu/test_isa.py"


if __name__ == "__main__":
    print(opcode_tables())

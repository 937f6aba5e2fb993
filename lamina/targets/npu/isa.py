"""The virtual NPU's instruction set: TIU (compute) and GDMA (data movement) commands, and their
binary encoding as fixed-size little-endian records in a versioned command buffer.

Every command is a frozen dataclass. Its record is, in order (``docs/npu-isa.md`` has every layout):

* the **head** (16 bytes): ``opcode u16, size u16, id u32, wait u32, group u16, reserved u16`` —
  ``id`` numbers the commands of one engine from 1 in issue order, ``wait`` is the id of the *other*
  engine's command that must have finished before this one starts (0: none), ``group`` the layer
  group the command belongs to (for the profile);
* its **tensor operands** (44 bytes each, :class:`Tensor`; an absent optional operand is all zeros);
* its **scalar fields** (``struct`` codes: each field's annotation names its own — ``U16``, ``I32``,
  ``F64``, ... — and :func:`_record` derives the class's ``SCALARS`` from the dataclass fields),
  then zero padding to a multiple of 8 bytes.

:func:`encode` writes a buffer (a 24-byte header: magic ``LNPC``, version, record count, payload
size, CRC-32 of the payload) and :func:`decode` reads it back, exactly; anything inconsistent in a
buffer is one :class:`LaminaError` naming the record and its byte offset.

The numerics of TIU commands live in ``tiu.py`` (pure numpy); the simulator (``simulator.py``)
dispatches each TIU command class to the function registered for it.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import struct
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, get_origin, get_type_hints

from lamina.support.errors import LaminaError

from .arch import DTYPES

__all__ = [
    "ACTIVE_CHOICES",
    "COMMANDS",
    "F64",
    "I32",
    "U8",
    "U16",
    "U32",
    "Active",
    "Attention",
    "FORMAT_VERSION",
    "MAGIC",
    "PARAMETER_FIELDS",
    "Command",
    "Conv",
    "Depthwise",
    "Eltwise",
    "EltwiseOp",
    "Engine",
    "GdmaCommand",
    "LayerNorm",
    "Lut",
    "Lut16",
    "MatMul",
    "Move",
    "Permute",
    "Pool",
    "PoolMode",
    "Reduce",
    "ReduceMode",
    "Requant",
    "Cast",
    "RoundMode",
    "Softmax",
    "Space",
    "Tensor",
    "TiuCommand",
    "decode",
    "encode",
]

MAGIC = b"LNPC"
FORMAT_VERSION = 2
_HEADER = struct.Struct("<4sHHIIII")  # magic, version, reserved, count, payload bytes, crc32, reserved
_HEAD = struct.Struct("<HHIIHH")  # opcode, size, id, wait, group, reserved
_TENSOR = struct.Struct("<QIIIIiiiiBBH")  # addr, n c h w, strides n c h w, dtype, space, lane

#: dtype code in a record → dtype name (0: no tensor).
DTYPE_CODES: dict[int, str] = {i + 1: name for i, name in enumerate(DTYPES)}
_CODE_OF = {name: code for code, name in DTYPE_CODES.items()}


class Engine(enum.Enum):
    TIU = "tiu"
    GDMA = "gdma"


class Space(enum.IntEnum):
    """Where a tensor lives: LMEM (lane layout, address within a lane) or DDR (flat byte address)."""

    LMEM = 0
    DDR = 1


class EltwiseOp(enum.IntEnum):
    ADD = 0
    SUB = 1
    MUL = 2
    MAX = 3
    MIN = 4
    DIV = 5


class PoolMode(enum.IntEnum):
    MAX = 0
    AVG = 1


class ReduceMode(enum.IntEnum):
    SUM = 0
    MEAN = 1
    MAX = 2
    MIN = 3
    PROD = 4
    L1 = 5
    L2 = 6


class RoundMode(enum.IntEnum):
    HALF_AWAY_FROM_ZERO = 0
    HALF_TO_EVEN = 1


@dataclass(frozen=True)
class Tensor:
    """A tensor operand: where it lives, its logical ``(n, c, h, w)`` shape, its element strides and
    dtype.

    In DDR, element ``(n, c, h, w)`` is at byte ``addr + (n*sn + c*sc + h*sh + w*sw) * itemsize``.
    In LMEM, channel ``c`` is on lane ``(lane + c) % lanes`` at byte ``addr + (n*sn + ((lane + c) //
    lanes)*sc + h*sh + w*sw) * itemsize`` of that lane (``sc`` strides between channel groups
    sharing a lane). Strides are non-negative (0 broadcasts); every dim is at least 1.
    """

    space: Space
    addr: int
    shape: tuple[int, int, int, int]
    strides: tuple[int, int, int, int]
    dtype: str
    lane: int = 0

    def __post_init__(self) -> None:
        # Lists and numpy integers in, plain tuples of ints kept: equal descriptors compare equal.
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "strides", tuple(int(s) for s in self.strides))
        if self.space not in (0, 1):
            raise LaminaError(f"NPU tensor: unknown memory space {self.space!r}")
        object.__setattr__(self, "space", Space(self.space))
        if len(self.shape) != 4 or len(self.strides) != 4:
            raise LaminaError(f"NPU tensor: expected 4 dims and 4 strides, got {self.shape} {self.strides}")
        if self.dtype not in DTYPES:
            raise LaminaError(f"NPU tensor: unknown dtype {self.dtype!r}")
        if min(self.shape) < 1 or min(self.strides) < 0 or self.addr < 0 or self.lane < 0:
            raise LaminaError(
                f"NPU tensor: dims must be >= 1, strides, address and lane >= 0; got shape {self.shape}, "
                f"strides {self.strides}, addr {self.addr}, lane {self.lane}"
            )

    @property
    def elements(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's elements (not of its footprint)."""
        return self.elements * DTYPES[self.dtype].itemsize

    @classmethod
    def ddr(cls, addr: int, shape: Sequence[int], dtype: str) -> Tensor:
        """A contiguous NCHW tensor in DDR."""
        n, c, h, w = shape
        return cls(Space.DDR, addr, (n, c, h, w), (c * h * w, h * w, w, 1), dtype)


# -- commands --------------------------------------------------------------------------------------------


# -- scalar field types: each annotation says the field's struct code ------------------------------------

#: an unsigned byte (``B``)
U8 = Annotated[int, "B"]
#: an unsigned 16-bit integer (``H``)
U16 = Annotated[int, "H"]
#: an unsigned 32-bit integer (``I``)
U32 = Annotated[int, "I"]
#: a signed 32-bit integer (``i``)
I32 = Annotated[int, "i"]
#: an IEEE double (``d``)
F64 = Annotated[float, "d"]
#: four unsigned bytes (``4B``): a permutation of (n, c, h, w)
Order4 = Annotated[tuple[int, int, int, int], "4B"]
#: four doubles (``4d``)
F64x4 = Annotated[tuple[float, float, float, float], "4d"]
#: an ASCII name of at most 24 bytes, zero padded (``24s``)
Name24 = Annotated[str, "24s"]

#: the values of an ``Active`` command's string properties, by (activation, property): such a
#: property travels in ``params`` as the index of its value here
ACTIVE_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {("GELU", "approximate"): ("none", "tanh")}

#: the head's fields (every command has them; they are not part of the scalar fields)
_HEAD_FIELDS = frozenset({"id", "wait", "group"})


def _struct_code(cls: type, name: str, t: Any) -> tuple[str, type[enum.IntEnum] | None]:
    """The struct code of a scalar field's annotation (and its enum class, for an enum field)."""
    if get_origin(t) is Annotated:
        return str(t.__metadata__[0]), None
    if t is bool:
        return "?", None
    if isinstance(t, type) and issubclass(t, enum.IntEnum):
        return "B", t
    raise TypeError(
        f"{cls.__name__}.{name}: a record field is annotated with a struct type (U8, U16, U32, I32, "
        f"F64, bool, an IntEnum, Order4, F64x4, Name24) or Tensor, not {t!r}"
    )


def _record(cls: type[Command]) -> type[Command]:
    """Derive a command class's record from its dataclass fields, in declaration order: the fields
    annotated ``Tensor`` (``Tensor | None``: optional) are its ``TENSORS`` (``output`` last), every
    other field but the head's is a scalar whose struct code its annotation names (``SCALARS``;
    ``ENUMS`` for IntEnum fields)."""
    hints = get_type_hints(cls, include_extras=True)
    tensors: list[str] = []
    optional: set[str] = set()
    scalars: list[tuple[str, str]] = []
    enums: dict[str, type[enum.IntEnum]] = {}
    for f in dataclasses.fields(cls):
        if f.name in _HEAD_FIELDS:
            continue
        t = hints[f.name]
        if t is Tensor or t == (Tensor | None):
            tensors.append(f.name)
            if t is not Tensor:
                optional.add(f.name)
            continue
        code, enum_cls = _struct_code(cls, f.name, t)
        scalars.append((f.name, code))
        if enum_cls is not None:
            enums[f.name] = enum_cls
    if "output" in tensors:
        tensors.remove("output")
        tensors.append("output")
    cls.TENSORS = tuple(tensors)
    cls.OPTIONAL = frozenset(optional)
    cls.SCALARS = tuple(scalars)
    cls.ENUMS = enums
    return cls


@dataclass(frozen=True, kw_only=True)
class Command:
    """Fields every command has: its id on its engine, the other engine's id it waits for, its
    layer group. Subclasses declare ``OPCODE`` and ``ENGINE`` and their fields; :func:`_record`
    derives the record from the fields (``TENSORS``: the tensor operands in record order, names in
    ``OPTIONAL`` may be None; ``SCALARS``: (field, struct code) in record order; ``ENUMS``)."""

    id: int = 0
    wait: int = 0
    group: int = 0

    OPCODE: ClassVar[int]
    ENGINE: ClassVar[Engine]
    TENSORS: ClassVar[tuple[str, ...]] = ()
    OPTIONAL: ClassVar[frozenset[str]] = frozenset()
    SCALARS: ClassVar[tuple[tuple[str, str], ...]] = ()
    ENUMS: ClassVar[dict[str, type[enum.IntEnum]]] = {}

    @classmethod
    def scalar_struct(cls) -> struct.Struct:
        return struct.Struct("<" + "".join(code for _, code in cls.SCALARS))

    @classmethod
    def record_size(cls) -> int:
        """Bytes of this opcode's record (head, tensors, scalars, padding to 8)."""
        raw = _HEAD.size + _TENSOR.size * len(cls.TENSORS) + cls.scalar_struct().size
        return -(-raw // 8) * 8

    def tensors(self) -> dict[str, Tensor]:
        """The present tensor operands by field name."""
        return {n: t for n in self.TENSORS if (t := getattr(self, n)) is not None}


#: tensor fields that hold a command's per-channel parameters or tables, not data
PARAMETER_FIELDS = frozenset({"bias", "quant", "table"})
#: integer dtypes by width in bytes
_INT_WIDTH = {"int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4}


@dataclass(frozen=True, kw_only=True)
class TiuCommand(Command):
    """A compute command: reads its input tensors from LMEM and writes ``output``.

    ``KIND`` selects the chip's throughput row; ``INPUTS`` are the operands passed to the TIU
    function (all of ``TENSORS`` but ``output``)."""

    ENGINE: ClassVar[Engine] = Engine.TIU
    KIND: ClassVar[str]
    output: Tensor

    @property
    def inputs(self) -> dict[str, Tensor]:
        return {n: t for n, t in self.tensors().items() if n != "output"}

    @property
    def compute_dtype(self) -> str:
        """The dtype the command computes in: its first input's; of an integer command, the widest
        integer among its data operands and its output (per-channel parameters and tables aside):
        an 8-bit sum written as int16 (``wide_sum``) or an int16 requantization computes in 16 bits."""
        first = getattr(self, self.TENSORS[0]).dtype
        if first not in _INT_WIDTH:
            return first
        widest = first
        for name, t in self.tensors().items():
            if name not in PARAMETER_FIELDS and _INT_WIDTH.get(t.dtype, 0) > _INT_WIDTH[widest]:
                widest = t.dtype
        return widest


@dataclass(frozen=True, kw_only=True)
class GdmaCommand(Command):
    ENGINE: ClassVar[Engine] = Engine.GDMA


@_record
@dataclass(frozen=True, kw_only=True)
class Conv(TiuCommand):
    """Convolution. ``weight``: ``(1, Cout, Cin/groups, kh*kw)`` — output channels across lanes;
    ``bias``: ``(1, Cout, 1, 1)`` int32 (the float dtype in float modes); ``quant``:
    ``(1, Cout, 1, 2)`` int32 ``[multiplier, rshift]`` per output channel (absent: the scalar
    ``multiplier``/``rshift``)."""

    OPCODE: ClassVar[int] = 0x01
    KIND: ClassVar[str] = "conv"
    input: Tensor
    weight: Tensor
    bias: Tensor | None = None
    quant: Tensor | None = None
    output: Tensor
    kh: U16 = 1
    kw: U16 = 1
    stride_h: U16 = 1
    stride_w: U16 = 1
    pad_top: U16 = 0
    pad_bottom: U16 = 0
    pad_left: U16 = 0
    pad_right: U16 = 0
    dilation_h: U16 = 1
    dilation_w: U16 = 1
    groups: U32 = 1
    input_zp: I32 = 0
    weight_zp: I32 = 0
    output_zp: I32 = 0
    multiplier: I32 = 1
    rshift: I32 = 0
    out_min: I32 = -128
    out_max: I32 = 127
    do_relu: bool = False
    relu_limit: F64 = -1.0


@_record
@dataclass(frozen=True, kw_only=True)
class Depthwise(Conv):
    """Depthwise convolution (``groups`` = channels): the Conv record under its own opcode and
    throughput; ``weight`` is ``(1, C, 1, kh*kw)``."""

    OPCODE: ClassVar[int] = 0x02
    KIND: ClassVar[str] = "depthwise"


@_record
@dataclass(frozen=True, kw_only=True)
class MatMul(TiuCommand):
    """Batched matrix product. ``left``: ``(B, M, 1, K)`` — rows across lanes; ``right``:
    ``(B or 1, K, 1, N)`` (``(B or 1, N, 1, K)`` when ``right_transpose``); ``bias``: ``(1, N, 1, 1)``;
    ``quant``: ``(1, N, 1, 3)`` int32 ``[multiplier, rshift, right_zp]`` per output column (absent:
    the scalar fields); ``output``: ``(B, M, 1, N)``."""

    OPCODE: ClassVar[int] = 0x03
    KIND: ClassVar[str] = "matmul"
    left: Tensor
    right: Tensor
    bias: Tensor | None = None
    quant: Tensor | None = None
    output: Tensor
    right_transpose: bool = False
    left_zp: I32 = 0
    right_zp: I32 = 0
    output_zp: I32 = 0
    multiplier: I32 = 1
    rshift: I32 = 0
    out_min: I32 = -128
    out_max: I32 = 127
    do_relu: bool = False
    relu_limit: F64 = -1.0


@_record
@dataclass(frozen=True, kw_only=True)
class Eltwise(TiuCommand):
    """Binary element-wise op ``a (op) b`` with requantization (the tpu.Add/Sub/Mul contract; max,
    min and div in float modes). ``a`` and ``b`` broadcast to ``output``'s shape over dims where
    they are 1. ``quant``: ``(1, C, 1, 3)`` int32 ``[a_multiplier, b_multiplier, rshift]`` per
    channel, channel ``j`` applying to index ``j`` of dim ``quant_axis`` of the output (absent: the
    scalar fields). ``mul`` requantizes the product ``(a - a_zp) * (b - b_zp)`` with
    ``a_multiplier`` and ``rshift`` (per channel: ``quant`` columns 0 and 2, column 1 unused, 0)."""

    OPCODE: ClassVar[int] = 0x04
    KIND: ClassVar[str] = "elementwise"
    a: Tensor
    b: Tensor
    quant: Tensor | None = None
    output: Tensor
    op: EltwiseOp = EltwiseOp.ADD
    a_zp: I32 = 0
    b_zp: I32 = 0
    output_zp: I32 = 0
    a_multiplier: I32 = 1
    b_multiplier: I32 = 1
    rshift: I32 = 0
    out_min: I32 = -128
    out_max: I32 = 127
    do_relu: bool = False
    relu_limit: F64 = -1.0
    quant_axis: U8 = 1


@_record
@dataclass(frozen=True, kw_only=True)
class Requant(TiuCommand):
    """``y = sat(output_zp + rdiv((x - input_zp) * multiplier, 2^(31 + rshift)))`` (tpu.Requant);
    ``quant``: ``(1, C, 1, 2)`` int32 ``[multiplier, rshift]`` per channel of dim ``quant_axis``."""

    OPCODE: ClassVar[int] = 0x05
    KIND: ClassVar[str] = "elementwise"
    input: Tensor
    quant: Tensor | None = None
    output: Tensor
    input_zp: I32 = 0
    output_zp: I32 = 0
    multiplier: I32 = 1
    rshift: I32 = 0
    out_min: I32 = -128
    out_max: I32 = 127
    quant_axis: U8 = 1


@_record
@dataclass(frozen=True, kw_only=True)
class Pool(TiuCommand):
    """Max or average pooling over ``kh x kw`` windows with explicit pads (the tpu pool contract;
    average uses ``multiplier``/``rshift``; ``ceil_extra_h``/``_w`` are the end rows/columns a
    ceil-mode window adds, padded but never counted)."""

    OPCODE: ClassVar[int] = 0x06
    KIND: ClassVar[str] = "pool"
    input: Tensor
    output: Tensor
    mode: PoolMode = PoolMode.MAX
    kh: U16 = 1
    kw: U16 = 1
    stride_h: U16 = 1
    stride_w: U16 = 1
    pad_top: U16 = 0
    pad_bottom: U16 = 0
    pad_left: U16 = 0
    pad_right: U16 = 0
    dilation_h: U16 = 1
    dilation_w: U16 = 1
    count_include_pad: bool = False
    ceil_extra_h: U16 = 0
    ceil_extra_w: U16 = 0
    input_zp: I32 = 0
    output_zp: I32 = 0
    multiplier: I32 = 1
    rshift: I32 = 0
    out_min: I32 = -128
    out_max: I32 = 127
    do_relu: bool = False
    relu_limit: F64 = -1.0


@_record
@dataclass(frozen=True, kw_only=True)
class Lut(TiuCommand):
    """Table look-up (tpu.Lut): ``y = table[x - base]`` for 8-bit ``x``, ``base`` -128 for int8 and
    0 for uint8; ``table``: ``(1, 1, 1, 256)`` of the output dtype."""

    OPCODE: ClassVar[int] = 0x07
    KIND: ClassVar[str] = "lut"
    input: Tensor
    table: Tensor
    output: Tensor


@_record
@dataclass(frozen=True, kw_only=True)
class Lut16(TiuCommand):
    """Table look-up over a 16-bit input (tpu.Lut16, the ``lut16`` form): ``y = table[x + 32768]``
    for int16 ``x``; ``table``: ``(1, 1, 1, 65536)`` of the output dtype (8-bit, or int16), read
    whole (64 or 128 KiB of LMEM). The chip computes it in ``int16`` (its ``lut`` rate)."""

    OPCODE: ClassVar[int] = 0x0F
    KIND: ClassVar[str] = "lut"
    input: Tensor
    table: Tensor
    output: Tensor


@_record
@dataclass(frozen=True, kw_only=True)
class Cast(TiuCommand):
    """Conversion between the input's and the output's dtype (tpu.Cast): quantize ``round(x /
    scale) + zero_point`` saturated to ``[out_min, out_max]``, dequantize ``(x - zero_point) *
    scale``, or float to float. ``quant`` (per-channel, for per-axis types): ``(1, C, 1, 3)`` int32
    ``[scale bits 0..31, scale bits 32..63, zero_point]`` per channel of dim ``quant_axis`` — the
    f64 scale's IEEE bits as two little-endian words (``quant[..., :2].view(float64)``); absent:
    the scalar fields."""

    OPCODE: ClassVar[int] = 0x08
    KIND: ClassVar[str] = "cast"
    input: Tensor
    quant: Tensor | None = None
    output: Tensor
    scale: F64 = 1.0
    zero_point: I32 = 0
    out_min: I32 = -128
    out_max: I32 = 127
    round_mode: RoundMode = RoundMode.HALF_AWAY_FROM_ZERO
    quant_axis: U8 = 1


@_record
@dataclass(frozen=True, kw_only=True)
class Permute(TiuCommand):
    """``output = transpose(input, order)`` over the four NCHW dims (output dim ``i`` is input dim
    ``order[i]``)."""

    OPCODE: ClassVar[int] = 0x09
    KIND: ClassVar[str] = "permute"
    input: Tensor
    output: Tensor
    order: Order4 = (0, 1, 2, 3)


@_record
@dataclass(frozen=True, kw_only=True)
class Reduce(TiuCommand):
    """Reduction over the NCHW dims set in ``axes`` (bit ``i`` = dim ``i``), the output keeping
    them as 1 (tpu.Reduce; integer modes requantize with ``multiplier``/``rshift``)."""

    OPCODE: ClassVar[int] = 0x0A
    KIND: ClassVar[str] = "reduce"
    input: Tensor
    output: Tensor
    mode: ReduceMode = ReduceMode.SUM
    axes: U8 = 0
    input_zp: I32 = 0
    output_zp: I32 = 0
    multiplier: I32 = 1
    rshift: I32 = 0
    out_min: I32 = -128
    out_max: I32 = 127


@_record
@dataclass(frozen=True, kw_only=True)
class Active(TiuCommand):
    """A float activation in the output's float dtype (the ``tpu`` unary op in a float mode):
    ``fn`` is the ``top`` unary op's short name (``Sigmoid``, ``GELU``, ``LeakyRelu``, ...) and
    ``params`` its properties in their declaration order (numbers as they are; a string property
    as the index of its value among the ones it takes, GELU's ``approximate``: 0 none, 1 tanh;
    unused ones 0) — INT8 activations are ``Lut`` commands."""

    OPCODE: ClassVar[int] = 0x0B
    KIND: ClassVar[str] = "lut"
    input: Tensor
    output: Tensor
    fn: Name24
    params: F64x4 = (0.0, 0.0, 0.0, 0.0)


@_record
@dataclass(frozen=True, kw_only=True)
class Softmax(TiuCommand):
    """Softmax (``log``: log-softmax) of a float tensor along dim ``axis`` of (n, c, h, w), in the
    output's float dtype: the ``top`` reference in float32, rounded once (tpu.Softmax in a float
    mode)."""

    OPCODE: ClassVar[int] = 0x0C
    KIND: ClassVar[str] = "elementwise"
    input: Tensor
    output: Tensor
    axis: U8 = 3
    log: bool = False


@_record
@dataclass(frozen=True, kw_only=True)
class LayerNorm(TiuCommand):
    """Layer normalization of a float tensor over dims ``axis..3`` of (n, c, h, w), scaled by
    ``gamma`` and shifted by ``beta`` (each optional; the input's shape with 1 in dims before
    ``axis``), in the output's float dtype: the ``top`` reference in float32, rounded once
    (tpu.LayerNorm in a float mode, without its mean / rstd results)."""

    OPCODE: ClassVar[int] = 0x0D
    KIND: ClassVar[str] = "elementwise"
    input: Tensor
    gamma: Tensor | None = None
    beta: Tensor | None = None
    output: Tensor
    axis: U8 = 3
    epsilon: F64 = 1e-5


@_record
@dataclass(frozen=True, kw_only=True)
class Attention(TiuCommand):
    """Scaled dot-product attention of float tensors, ``softmax(scale * query key^T + mask) value``
    per batch and head: ``query`` ``(B, H, M, D)``, ``key`` ``(B, H, N, D)``, ``value``
    ``(B, H, N, Dv)``, ``mask`` (optional, additive) ``(B or 1, H or 1, M or 1, N)``, ``output``
    ``(B, H, M, Dv)``; the ``top`` reference in float32, rounded once (tpu.Attention in a float
    mode, 4-d, no cache, causal mask or softcap)."""

    OPCODE: ClassVar[int] = 0x0E
    KIND: ClassVar[str] = "matmul"
    query: Tensor
    key: Tensor
    value: Tensor
    mask: Tensor | None = None
    output: Tensor
    scale: F64 = 1.0


@_record
@dataclass(frozen=True, kw_only=True)
class Move(GdmaCommand):
    """Copy ``src`` to ``dst`` element by element (same shape and dtype; either side in DDR or
    LMEM, each with its own strides and start lane): DDR→LMEM loads, LMEM→DDR stores, LMEM→LMEM
    moves between lanes, DDR→DDR copies."""

    OPCODE: ClassVar[int] = 0x80
    src: Tensor
    dst: Tensor

    def __post_init__(self) -> None:
        if self.src.shape != self.dst.shape or self.src.dtype != self.dst.dtype:
            raise LaminaError(
                f"GDMA move: src {self.src.shape} {self.src.dtype} and dst {self.dst.shape} "
                f"{self.dst.dtype} must have one shape and dtype"
            )


#: Every command class by opcode.
COMMANDS: dict[int, type[Command]] = {
    c.OPCODE: c
    for c in (
        Conv,
        Depthwise,
        MatMul,
        Eltwise,
        Requant,
        Pool,
        Lut,
        Cast,
        Permute,
        Reduce,
        Active,
        Softmax,
        LayerNorm,
        Attention,
        Lut16,
        Move,
    )
}


# -- encoding ------------------------------------------------------------------------------------------


def _pack_tensor(t: Tensor | None) -> bytes:
    if t is None:
        return bytes(_TENSOR.size)
    return _TENSOR.pack(t.addr, *t.shape, *t.strides, _CODE_OF[t.dtype], int(t.space), t.lane)


def _encode_one(cmd: Command) -> bytes:
    cls = type(cmd)
    parts = [_HEAD.pack(cls.OPCODE, cls.record_size(), cmd.id, cmd.wait, cmd.group, 0)]
    for name in cls.TENSORS:
        t = getattr(cmd, name)
        if t is None and name not in cls.OPTIONAL:
            raise LaminaError(f"{cls.__name__}: operand {name!r} is required")
        parts.append(_pack_tensor(t))
    values: list[object] = []
    for name, code in cls.SCALARS:
        v = getattr(cmd, name)
        if code.endswith("s"):
            v = _name_bytes(v, int(code[:-1]), name)
        values.extend(v if _is_array(code) else [v])
    parts.append(cls.scalar_struct().pack(*values))
    raw = b"".join(parts)
    return raw + bytes(cls.record_size() - len(raw))


def encode(cmds: Iterable[Command]) -> bytes:
    """A command buffer holding ``cmds`` in order (header + one fixed-size record per command)."""
    records = []
    for i, cmd in enumerate(cmds):
        try:
            records.append(_encode_one(cmd))
        except struct.error as e:
            raise LaminaError(f"command {i} ({type(cmd).__name__}): a field is out of range: {e}") from None
    payload = b"".join(records)
    return (
        _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(records), len(payload), zlib.crc32(payload), 0) + payload
    )


def decode(buf: bytes | bytearray | memoryview, source: str = "command buffer") -> list[Command]:
    """The commands of a buffer written by :func:`encode`.

    Raises one :class:`LaminaError` (prefixed by ``source``) on a short or corrupt buffer: bad
    magic, unsupported version, truncated payload, CRC mismatch, unknown opcode, wrong record size,
    an invalid dtype, space, enum or shape.
    """
    mv = memoryview(buf).cast("B")
    if len(mv) < _HEADER.size:
        raise LaminaError(f"{source}: truncated: {len(mv)} bytes, the header alone is {_HEADER.size}")
    magic, version, reserved, count, size, crc, reserved2 = _HEADER.unpack_from(mv, 0)
    if magic != MAGIC:
        raise LaminaError(f"{source}: bad magic {bytes(magic)!r} (expected {MAGIC!r})")
    if version != FORMAT_VERSION:
        raise LaminaError(
            f"{source}: format version {version} is not supported (this Lamina reads {FORMAT_VERSION})"
        )
    if reserved or reserved2:
        raise LaminaError(f"{source}: reserved header fields are not zero")
    if len(mv) != _HEADER.size + size:
        raise LaminaError(
            f"{source}: the header announces {size} payload bytes, the buffer holds {len(mv) - _HEADER.size}"
            + (" (truncated)" if len(mv) < _HEADER.size + size else "")
        )
    payload = mv[_HEADER.size :]
    if zlib.crc32(payload) != crc:
        raise LaminaError(f"{source}: CRC-32 mismatch: the payload is corrupt")
    cmds: list[Command] = []
    off = 0
    for i in range(count):
        where = f"{source}: record {i} at byte {_HEADER.size + off}"
        if off + _HEAD.size > size:
            raise LaminaError(f"{where}: truncated (header announces {count} records)")
        opcode, rsize, cid, wait, group, reserved = _HEAD.unpack_from(payload, off)
        cls = COMMANDS.get(opcode)
        if cls is None:
            raise LaminaError(f"{where}: unknown opcode 0x{opcode:02x}")
        if reserved:
            raise LaminaError(f"{where}: reserved head field is {reserved}, not 0")
        if rsize != cls.record_size() or off + rsize > size:
            raise LaminaError(
                f"{where}: {cls.__name__} record of {rsize} bytes, expected {cls.record_size()}"
            )
        cmds.append(_decode_one(cls, payload[off : off + rsize], cid, wait, group, where))
        off += rsize
    if off != size:
        raise LaminaError(f"{source}: {size - off} bytes after the last of {count} records")
    return cmds


def _decode_one(cls: type[Command], rec: memoryview, cid: int, wait: int, group: int, where: str) -> Command:
    kwargs: dict[str, object] = {"id": cid, "wait": wait, "group": group}
    off = _HEAD.size
    for name in cls.TENSORS:
        addr, n, c, h, w, sn, sc, sh, sw, code, space, lane = _TENSOR.unpack_from(rec, off)
        off += _TENSOR.size
        if code == 0:
            if name not in cls.OPTIONAL:
                raise LaminaError(f"{where}: {cls.__name__} operand {name!r} is missing")
            kwargs[name] = None
            continue
        if code not in DTYPE_CODES or space not in (0, 1):
            raise LaminaError(f"{where}: operand {name!r}: invalid dtype code {code} or space {space}")
        try:
            kwargs[name] = Tensor(Space(space), addr, (n, c, h, w), (sn, sc, sh, sw), DTYPE_CODES[code], lane)
        except LaminaError as e:
            raise LaminaError(f"{where}: operand {name!r}: {e}") from None
    values = iter(cls.scalar_struct().unpack_from(rec, off))
    for name, code in cls.SCALARS:
        v: Any = tuple(next(values) for _ in range(int(code[:-1]))) if _is_array(code) else next(values)
        if code.endswith("s"):
            text = v.rstrip(b"\0")
            if not all(32 <= b < 127 for b in text):
                raise LaminaError(f"{where}: field {name!r}: not an ASCII name: {bytes(v)!r}")
            v = text.decode("ascii")
        if name in cls.ENUMS:
            try:
                v = cls.ENUMS[name](v)
            except ValueError:
                raise LaminaError(f"{where}: field {name!r}: invalid value {v}") from None
        kwargs[name] = v
    try:
        return cls(**kwargs)  # type: ignore[arg-type]
    except LaminaError as e:
        raise LaminaError(f"{where}: {e}") from None


def _is_array(code: str) -> bool:
    """A struct code of several values (``4B``, ``4d``), not one (``B``) or a string (``24s``)."""
    return code[0].isdigit() and not code.endswith("s")


def _name_bytes(v: object, size: int, name: str) -> bytes:
    """A name field's bytes: ASCII, at most ``size`` (zero padded by struct)."""
    if not isinstance(v, str) or not v.isascii() or not v.isprintable() or len(v) > size:
        raise LaminaError(
            f"field {name!r}: expected a printable ASCII name of at most {size} characters, got {v!r}"
        )
    return v.encode("ascii")


def record_layout(cls: type[Command]) -> list[tuple[int, str, str]]:
    """``(offset, field, struct code)`` of each field of an opcode's record after the head (tensor
    operands as ``T`` — the 44-byte :class:`Tensor` descriptor): the tables of ``docs/npu-isa.md``."""
    rows = []
    off = _HEAD.size
    for name in cls.TENSORS:
        rows.append((off, name, "T"))
        off += _TENSOR.size
    for name, code in cls.SCALARS:
        rows.append((off, name, code))
        off += struct.calcsize("<" + code)
    return rows


def fields_of(cmd: Command) -> dict[str, object]:
    """A command's fields by name (``dataclasses.asdict`` without recursing into tensors)."""
    return {f.name: getattr(cmd, f.name) for f in dataclasses.fields(cmd)}

"""The ``quant`` dialect's types, spelled as MLIR spells them.

* ``!quant.uniform<i8:f32, 5.000000e-02:-3>`` — :class:`UniformQuantizedType` (per tensor);
* ``!quant.uniform<i8:f32:0, {1.000000e-01,2.000000e-01:3}>`` — :class:`UniformQuantizedPerAxisType`;
* ``!quant.calibrated<f32<-2.000000e+00:3.500000e+00>>`` — :class:`CalibratedQuantizedType`;
* ``!quant.any<i8:f32>`` — :class:`AnyQuantizedType`.

The storage type prints as ``iN`` (signed) or ``uN`` (unsigned) followed by ``<min:max>`` when the
storage range is narrower than the type's full range; scales print like MLIR's f64 attributes and a
zero point of 0 is omitted.

The types check what MLIR's ``verifyInvariants`` checks, in its words, both when parsed (a located
error) and when built from Python (``ValueError``): storage width 1..32, storage min/max inside the
storage type and ordered, every scale inside the expressed type's range (smallest subnormal to
largest finite: a scale of 0, a negative or an infinite one is rejected; a NaN scale, which
mlir-opt-22 lets through, too), a non-negative quantized dimension with one zero point per scale,
and calibrated ``min <= max``. Like MLIR, a zero point outside the storage range is accepted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import ml_dtypes

from lamina.ir.context import Dialect, register_dialect
from lamina.ir.floatfmt import bits_to_float, float_dtypes, format_float
from lamina.ir.types import DYNAMIC, DialectType, FloatType, IntegerType, Type

__all__ = [
    "AnyQuantizedType",
    "CalibratedQuantizedType",
    "QUANT",
    "QuantizedType",
    "UniformQuantizedPerAxisType",
    "UniformQuantizedType",
]


def _full_range(width: int, signed: bool) -> tuple[int, int]:
    if signed:
        return -(1 << (width - 1)), (1 << (width - 1)) - 1
    return 0, (1 << width) - 1


def _fmt(v: float) -> str:
    return format_float(float(v), "f64")


def _e(v: float) -> str:
    """A double as LLVM's ``raw_ostream`` prints it in MLIR's messages (``%e``, ``INF``)."""
    return ("-INF" if v < 0 else "INF") if math.isinf(v) else f"{v:e}"


def storage_error(width: int, signed: bool, lo: int, hi: int) -> str | None:
    """What is wrong with a storage type and its min/max (MLIR's words), or None."""
    if not 0 < width <= 32:
        return f"illegal storage type size: {width}"
    full_lo, full_hi = _full_range(width, signed)
    if lo < full_lo:
        return f"illegal storage type minimum: {lo}"
    if hi > full_hi:
        return f"illegal storage type maximum: {hi}"
    if lo > hi:
        return f"illegal storage min and storage max: ({lo}:{hi})"
    return None


def scale_error(scale: float, expressed_type: Type) -> str | None:
    """What is wrong with a scale for the expressed type (MLIR's words), or None."""
    if math.isnan(scale):
        return f"illegal scale: {scale}"
    dt = float_dtypes().get(getattr(expressed_type, "name", ""))
    if dt is None:  # no numpy model of this float type: at least positive and finite
        lo, hi = math.ulp(0.0), 1.7976931348623157e308
    else:
        info = ml_dtypes.finfo(dt)
        lo, hi = float(info.smallest_subnormal), float(info.max)
    if scale < lo or scale > hi:
        return f"scale {_e(scale)} out of expressed type range [{_e(lo)}, {_e(hi)}]"
    return None


def _expressed_error(expressed_type: Any) -> str | None:
    if not isinstance(expressed_type, FloatType):
        return f"expressed type must be a floating point type, not {expressed_type}"
    return None


def _check(*errors: str | None) -> None:
    for e in errors:
        if e is not None:
            raise ValueError(e)


class QuantizedType(DialectType):
    """Base of quantized types: an integer storage type with a (signed) range."""

    __slots__ = ()
    dialect = "quant"

    storage_width: int
    signed: bool
    storage_min: int
    storage_max: int
    expressed_type: Type

    @property
    def storage_type(self) -> IntegerType:
        return IntegerType(self.storage_width)

    def _storage_text(self) -> str:
        s = ("i" if self.signed else "u") + str(self.storage_width)
        if (self.storage_min, self.storage_max) != _full_range(self.storage_width, self.signed):
            s += "<" + str(self.storage_min) + ":" + str(self.storage_max) + ">"
        return s

    @staticmethod
    def _parse_storage(parser: Any) -> tuple[int, bool, int, int]:
        pos = parser.pos
        kw = parser.parse_keyword()
        if len(kw) < 2 or kw[0] not in "iu" or not kw[1:].isdigit():
            raise parser.error("illegal storage type prefix", pos)
        width = int(kw[1:])
        signed = kw[0] == "i"
        if not 0 < width <= 32:
            raise parser.error(f"illegal storage type size: {width}", pos)
        lo, hi = _full_range(width, signed)
        if parser.parse_optional("<"):
            parser.skip()
            mpos = parser.pos
            lo = parser.parse_integer()
            parser.expect(":")
            parser.skip()
            hpos = parser.pos
            hi = parser.parse_integer()
            parser.expect(">")
            err = storage_error(width, signed, lo, hi)
            if err is not None:
                raise parser.error(err, hpos if "maximum" in err else mpos)
        return width, signed, lo, hi


class UniformQuantizedType(QuantizedType):
    """``!quant.uniform<i8:f32, scale:zero_point>``."""

    __slots__ = (
        "expressed_type",
        "scale",
        "signed",
        "storage_max",
        "storage_min",
        "storage_width",
        "zero_point",
    )
    mnemonic = "uniform"
    scale: float
    zero_point: int

    @classmethod
    def _key(
        cls,
        storage_width: int,
        signed: bool,
        expressed_type: Type,
        scale: float,
        zero_point: int = 0,
        storage_min: int | None = None,
        storage_max: int | None = None,
    ) -> tuple:
        lo, hi = _full_range(int(storage_width), bool(signed))
        lo = lo if storage_min is None else int(storage_min)
        hi = hi if storage_max is None else int(storage_max)
        _check(
            storage_error(int(storage_width), bool(signed), lo, hi),
            _expressed_error(expressed_type),
            scale_error(float(scale), expressed_type),
        )
        return (
            int(storage_width),
            bool(signed),
            expressed_type,
            float(scale).hex(),
            int(zero_point),
            lo,
            hi,
        )

    def _init(self, w: int, signed: bool, et: Type, scale: str, zp: int, lo: int, hi: int) -> None:
        self._set(
            storage_width=w,
            signed=signed,
            expressed_type=et,
            scale=float.fromhex(scale),
            zero_point=zp,
            storage_min=lo,
            storage_max=hi,
        )

    def _params(self) -> tuple:
        return (
            self.storage_width,
            self.signed,
            self.expressed_type,
            self.scale,
            self.zero_point,
            self.storage_min,
            self.storage_max,
        )

    def print_body(self) -> str:
        s = "<" + self._storage_text() + ":" + str(self.expressed_type) + ", " + _fmt(self.scale)
        if self.zero_point != 0:
            s += ":" + str(self.zero_point)
        return s + ">"

    @classmethod
    def parse_body(cls, parser: Any) -> Type:
        parser.expect("<")
        w, signed, lo, hi = cls._parse_storage(parser)
        parser.expect(":")
        epos = parser.pos
        et = parser.parse_type()
        if not isinstance(et, FloatType):
            raise parser.error("expressed type must be a floating point type", epos)
        axis = None
        apos = parser.pos
        if parser.parse_optional(":"):
            parser.skip()
            apos = parser.pos
            axis = parser.parse_integer()
        parser.expect(",")
        if axis is not None or parser.peek() == "{":
            if axis is None:
                raise parser.error("per-axis quantization needs a quantized dimension")
            parser.expect("{")
            if axis < 0:
                raise parser.error(f"illegal quantized dimension: {axis}", apos)
            scales: list[float] = []
            zps: list[int] = []
            while True:
                scales.append(cls._parse_scale(parser, et))
                zps.append(parser.parse_integer() if parser.parse_optional(":") else 0)
                if parser.parse_optional("}"):
                    break
                parser.expect(",")
            parser.expect(">")
            return UniformQuantizedPerAxisType(w, signed, et, scales, zps, axis, lo, hi)
        scale = cls._parse_scale(parser, et)
        zp = parser.parse_integer() if parser.parse_optional(":") else 0
        parser.expect(">")
        return UniformQuantizedType(w, signed, et, scale, zp, lo, hi)

    @staticmethod
    def _parse_scale(parser: Any, expressed_type: Type) -> float:
        parser.skip()
        pos = parser.pos
        if parser.s.startswith("0x", pos):  # MLIR reads a hexadecimal scale as f64 bits
            bits = parser.parse_integer()
            if bits >> 64:
                raise parser.error("hexadecimal float constant out of range for type", pos)
            scale = bits_to_float(bits, "f64")
        else:
            scale = parser.parse_float()
        err = scale_error(scale, expressed_type)
        if err is not None:
            raise parser.error(err, pos)
        return scale


class UniformQuantizedPerAxisType(QuantizedType):
    """``!quant.uniform<i8:f32:axis, {s0:zp0,s1:zp1}>``."""

    __slots__ = (
        "axis",
        "expressed_type",
        "scales",
        "signed",
        "storage_max",
        "storage_min",
        "storage_width",
        "zero_points",
    )
    mnemonic = "uniform"
    axis: int
    scales: tuple[float, ...]
    zero_points: tuple[int, ...]

    @classmethod
    def _key(
        cls,
        storage_width: int,
        signed: bool,
        expressed_type: Type,
        scales: Iterable[float],
        zero_points: Iterable[int],
        axis: int,
        storage_min: int | None = None,
        storage_max: int | None = None,
    ) -> tuple:
        lo, hi = _full_range(int(storage_width), bool(signed))
        lo = lo if storage_min is None else int(storage_min)
        hi = hi if storage_max is None else int(storage_max)
        scales = tuple(float(s) for s in scales)
        zero_points = tuple(int(z) for z in zero_points)
        _check(storage_error(int(storage_width), bool(signed), lo, hi), _expressed_error(expressed_type))
        if len(scales) != len(zero_points):
            raise ValueError(f"illegal number of scales and zeroPoints: {len(scales)}, {len(zero_points)}")
        if int(axis) < 0:
            raise ValueError(f"illegal quantized dimension: {int(axis)}")
        _check(*(scale_error(x, expressed_type) for x in scales))
        return (
            int(storage_width),
            bool(signed),
            expressed_type,
            tuple(x.hex() for x in scales),
            zero_points,
            int(axis),
            lo,
            hi,
        )

    def _init(
        self, w: int, signed: bool, et: Type, scales: tuple, zps: tuple, axis: int, lo: int, hi: int
    ) -> None:
        self._set(
            storage_width=w,
            signed=signed,
            expressed_type=et,
            scales=tuple(float.fromhex(s) for s in scales),
            zero_points=zps,
            axis=axis,
            storage_min=lo,
            storage_max=hi,
        )

    def _params(self) -> tuple:
        return (
            self.storage_width,
            self.signed,
            self.expressed_type,
            self.scales,
            self.zero_points,
            self.axis,
            self.storage_min,
            self.storage_max,
        )

    def print_body(self) -> str:
        parts = []
        for s, z in zip(self.scales, self.zero_points):
            parts.append(_fmt(s) + (":" + str(z) if z != 0 else ""))
        return (
            "<"
            + self._storage_text()
            + ":"
            + str(self.expressed_type)
            + ":"
            + str(self.axis)
            + ", {"
            + ",".join(parts)
            + "}>"
        )

    parse_body = UniformQuantizedType.parse_body

    def shaped_type_error(self, shape: tuple[int, ...]) -> str | None:
        """MLIR's per-axis checks of a quantized tensor (``verifyPerAxisQuantization``)."""
        if self.axis >= len(shape):
            return "quantized dimension must be less than tensor rank"
        if shape[self.axis] != DYNAMIC and shape[self.axis] != len(self.scales):
            return "quantized dimension size does not match number of scales"
        return None


class CalibratedQuantizedType(QuantizedType):
    """``!quant.calibrated<f32<min:max>>``."""

    __slots__ = ("expressed_type", "max", "min")
    min: float
    max: float
    mnemonic = "calibrated"

    @classmethod
    def _key(cls, expressed_type: Type, min: float, max: float) -> tuple:
        _check(_expressed_error(expressed_type))
        if not float(min) <= float(max):
            raise ValueError(f"illegal min and max: ({_e(float(min))}:{_e(float(max))})")
        return (expressed_type, float(min).hex(), float(max).hex())

    def _init(self, et: Type, lo: str, hi: str) -> None:
        self._set(expressed_type=et, min=float.fromhex(lo), max=float.fromhex(hi))

    def _params(self) -> tuple:
        return (self.expressed_type, self.min, self.max)

    def print_body(self) -> str:
        return "<" + str(self.expressed_type) + "<" + _fmt(self.min) + ":" + _fmt(self.max) + ">>"

    @classmethod
    def parse_body(cls, parser: Any) -> Type:
        parser.expect("<")
        epos = parser.pos
        et = parser.parse_type()
        if not isinstance(et, FloatType):
            raise parser.error("expressed type must be a floating point type", epos)
        parser.expect("<")
        parser.skip()
        pos = parser.pos
        lo = parser.parse_float()
        parser.expect(":")
        hi = parser.parse_float()
        parser.expect(">")
        parser.expect(">")
        if not lo <= hi:
            raise parser.error(f"illegal min and max: ({_e(lo)}:{_e(hi)})", pos)
        return CalibratedQuantizedType(et, lo, hi)


class AnyQuantizedType(QuantizedType):
    """``!quant.any<i8:f32>`` (the expressed type is optional)."""

    __slots__ = ("expressed_type", "signed", "storage_max", "storage_min", "storage_width")
    mnemonic = "any"

    @classmethod
    def _key(
        cls,
        storage_width: int,
        signed: bool,
        expressed_type: Type | None = None,
        storage_min: int | None = None,
        storage_max: int | None = None,
    ) -> tuple:
        lo, hi = _full_range(int(storage_width), bool(signed))
        lo = lo if storage_min is None else int(storage_min)
        hi = hi if storage_max is None else int(storage_max)
        _check(storage_error(int(storage_width), bool(signed), lo, hi))
        if expressed_type is not None:
            _check(_expressed_error(expressed_type))
        return (int(storage_width), bool(signed), expressed_type, lo, hi)

    def _init(self, w: int, signed: bool, et: Type | None, lo: int, hi: int) -> None:
        self._set(storage_width=w, signed=signed, expressed_type=et, storage_min=lo, storage_max=hi)

    def _params(self) -> tuple:
        return (self.storage_width, self.signed, self.expressed_type, self.storage_min, self.storage_max)

    def print_body(self) -> str:
        s = "<" + self._storage_text()
        if self.expressed_type is not None:
            s += ":" + str(self.expressed_type)
        return s + ">"

    @classmethod
    def parse_body(cls, parser: Any) -> Type:
        parser.expect("<")
        w, signed, lo, hi = cls._parse_storage(parser)
        et = None
        if parser.parse_optional(":"):
            parser.skip()
            epos = parser.pos
            et = parser.parse_type()
            if not isinstance(et, FloatType):
                raise parser.error("expressed type must be a floating point type", epos)
        parser.expect(">")
        return AnyQuantizedType(w, signed, et, lo, hi)


QUANT = register_dialect(
    Dialect(
        "quant",
        types=[UniformQuantizedType, CalibratedQuantizedType, AnyQuantizedType],
        description="Quantized types (uniform per-tensor and per-axis, calibrated, any).",
    )
)

"""The ``quant`` dialect's types, spelled as MLIR spells them.

* ``!quant.uniform<i8:f32, 5.000000e-02:-3>`` — :class:`UniformQuantizedType` (per tensor);
* ``!quant.uniform<i8:f32:0, {1.000000e-01,2.000000e-01:3}>`` — :class:`UniformQuantizedPerAxisType`;
* ``!quant.calibrated<f32<-2.000000e+00:3.500000e+00>>`` — :class:`CalibratedQuantizedType`;
* ``!quant.any<i8:f32>`` — :class:`AnyQuantizedType`.

The storage type prints as ``iN`` (signed) or ``uN`` (unsigned) followed by ``<min:max>`` when the
storage range is narrower than the type's full range; scales print like MLIR's f64 attributes and a
zero point of 0 is omitted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lamina.ir.context import Dialect, register_dialect
from lamina.ir.floatfmt import format_float
from lamina.ir.types import DialectType, FloatType, IntegerType, Type

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


class QuantizedType(DialectType):
    """Base of quantized types: an integer storage type with a (signed) range."""

    __slots__ = ()
    dialect = "quant"

    storage_width: int
    signed: bool
    storage_min: int
    storage_max: int

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
        if width == 0 or width > 32:
            raise parser.error(f"illegal storage type size: {width}", pos)
        lo, hi = _full_range(width, signed)
        if parser.parse_optional("<"):
            mpos = parser.pos
            lo2 = parser.parse_integer()
            parser.expect(":")
            hi2 = parser.parse_integer()
            parser.expect(">")
            if lo2 < lo or hi2 > hi or lo2 > hi2:
                raise parser.error("illegal storage min and storage max", mpos)
            lo, hi = lo2, hi2
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
        return (
            int(storage_width),
            bool(signed),
            expressed_type,
            float(scale).hex(),
            int(zero_point),
            lo if storage_min is None else int(storage_min),
            hi if storage_max is None else int(storage_max),
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
        if parser.parse_optional(":"):
            axis = parser.parse_integer()
        parser.expect(",")
        if axis is not None or parser.peek() == "{":
            if axis is None:
                raise parser.error("per-axis quantization needs a quantized dimension")
            parser.expect("{")
            scales: list[float] = []
            zps: list[int] = []
            while True:
                scales.append(parser.parse_float())
                zps.append(parser.parse_integer() if parser.parse_optional(":") else 0)
                if parser.parse_optional("}"):
                    break
                parser.expect(",")
            parser.expect(">")
            return UniformQuantizedPerAxisType(w, signed, et, scales, zps, axis, lo, hi)
        scale = parser.parse_float()
        zp = parser.parse_integer() if parser.parse_optional(":") else 0
        parser.expect(">")
        return UniformQuantizedType(w, signed, et, scale, zp, lo, hi)


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
        return (
            int(storage_width),
            bool(signed),
            expressed_type,
            tuple(float(s).hex() for s in scales),
            tuple(int(z) for z in zero_points),
            int(axis),
            lo if storage_min is None else int(storage_min),
            hi if storage_max is None else int(storage_max),
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


class CalibratedQuantizedType(QuantizedType):
    """``!quant.calibrated<f32<min:max>>``."""

    __slots__ = ("expressed_type", "max", "min")
    mnemonic = "calibrated"

    @classmethod
    def _key(cls, expressed_type: Type, min: float, max: float) -> tuple:
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
        lo = parser.parse_float()
        parser.expect(":")
        hi = parser.parse_float()
        parser.expect(">")
        parser.expect(">")
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
        return (
            int(storage_width),
            bool(signed),
            expressed_type,
            lo if storage_min is None else int(storage_min),
            hi if storage_max is None else int(storage_max),
        )

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
            et = parser.parse_type()
        parser.expect(">")
        return AnyQuantizedType(w, signed, et, lo, hi)


QUANT = register_dialect(
    Dialect(
        "quant",
        types=[UniformQuantizedType, CalibratedQuantizedType, AnyQuantizedType],
        description="Quantized types (uniform per-tensor and per-axis, calibrated, any).",
    )
)

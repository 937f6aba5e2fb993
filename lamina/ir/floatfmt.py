"""Floating-point text exactly as MLIR prints it (``APFloat::toString`` and MLIR's printer rule).

MLIR prints a float attribute value in scientific form with 6 significant digits
(``1.000000e+00``) when that text parses back to the same value; otherwise in APFloat's "natural"
shortest form (``0.0078431372549019607``) when it has a decimal point; otherwise as the hex bit
pattern (``0x7FC00000``, always used for NaN and infinities).

APFloat's digit generation is reproduced exactly, including its quirk of truncating (not rounding)
low digits before the final round-half-up, so that the text matches ``mlir-opt`` byte for byte.
"""

from __future__ import annotations

import functools
import struct
from typing import TYPE_CHECKING

from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

# name -> (exponent bits, explicit mantissa bits, bias, kind, precision incl. implicit bit)
_SEM: dict[str, tuple[int, int, int, str, int]] = {
    "f16": (5, 10, 15, "ieee", 11),
    "bf16": (8, 7, 127, "ieee", 8),
    "f32": (8, 23, 127, "ieee", 24),
    "f64": (11, 52, 1023, "ieee", 53),
    "f8E5M2": (5, 2, 15, "ieee", 3),
    "f8E4M3FN": (4, 3, 7, "fn", 4),
    "tf32": (8, 10, 127, "ieee", 11),
}
_WIDTH = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64, "f8E5M2": 8, "f8E4M3FN": 8, "tf32": 19}


@functools.cache
def float_dtypes() -> dict[str, np.dtype]:
    """The numpy dtype of each MLIR float type name that has one (numpy and ml_dtypes are imported on
    first use: printing IR without floats never needs them)."""
    import ml_dtypes

    return {
        "f16": np.dtype(np.float16),
        "bf16": np.dtype(ml_dtypes.bfloat16),
        "f32": np.dtype(np.float32),
        "f64": np.dtype(np.float64),
        "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
        "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
        "f8E4M3FNUZ": np.dtype(ml_dtypes.float8_e4m3fnuz),
        "f8E5M2FNUZ": np.dtype(ml_dtypes.float8_e5m2fnuz),
        "f8E4M3B11FNUZ": np.dtype(ml_dtypes.float8_e4m3b11fnuz),
    }


def _uint(bits: int) -> type:
    return getattr(np, f"uint{bits}")


def float_bits(value: float, type_name: str) -> int | None:
    """The bit pattern of ``value`` rounded to the float type (None if not representable here)."""
    if type_name == "f64":
        return struct.unpack("<Q", struct.pack("<d", value))[0]
    dt = float_dtypes().get(type_name)
    if dt is None:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.asarray(value, dtype=np.float64).astype(dt)
    return int(arr.reshape(1).view(_uint(dt.itemsize * 8))[0])


def bits_to_float(bits: int, type_name: str) -> float:
    if type_name == "f64":
        return struct.unpack("<d", struct.pack("<Q", bits))[0]
    dt = float_dtypes()[type_name]
    return float(np.array([bits], dtype=_uint(dt.itemsize * 8)).view(dt)[0])


def hex_text(bits: int, type_name: str, width: int) -> str:
    return "0x" + format(bits, "X").rjust((width + 3) // 4, "0")


def _round_sig(num: int, e: int, n: int) -> tuple[str, int]:
    """APFloat digit generation of ``num * 10**e`` with precision ``n``: (digits, exp10 of last)."""
    if num == 0:
        return "0", 0
    bits = num.bit_length()
    req = (n * 196 + 58) // 59
    if bits > req:
        t = (bits - req) * 59 // 196
        if t:
            num //= 10**t
            e += t
    digits = str(num)
    stripped = digits.rstrip("0")
    e += len(digits) - len(stripped)
    digits = stripped
    if len(digits) > n:
        drop = len(digits) - n
        keep, first = digits[:n], digits[n]
        e += drop
        if first >= "5":
            keep = str(int(keep) + 1)
            if len(keep) > n:
                keep = keep[:-1]
                e += 1
        digits = keep.rstrip("0") or "0"
        e += len(keep) - len(digits)
    return digits, e


def _exact(value: float) -> tuple[int, int]:
    """|value| as ``N * 10**e`` exactly, N built APFloat-style (odd significand times 5**k)."""
    num, den = abs(value).as_integer_ratio()
    if den == 1:
        return num, 0
    k = den.bit_length() - 1
    return num * 5**k, -k


def _sci6(num: int, e: int, neg: bool) -> str:
    digits, exp = _round_sig(num, e, 6)
    e10 = exp + len(digits) - 1
    mant = digits[0] + "." + digits[1:].ljust(6, "0")
    return ("-" if neg else "") + mant + "e" + ("+" if e10 >= 0 else "-") + f"{abs(e10):02d}"


def _natural(num: int, e: int, neg: bool, prec: int) -> str:
    p = 2 + prec * 59 // 196
    digits, exp = _round_sig(num, e, p)
    n = len(digits)
    s = "-" if neg else ""
    if num == 0:
        return s + "0.0E+0"
    if exp >= 0:
        scientific = exp > 3 or n + exp > p
    else:
        msd = exp + n - 1
        scientific = False if msd >= 0 else (-msd > 3)
    if scientific:
        e10 = exp + n - 1
        return s + digits[0] + "." + (digits[1:] or "0") + "E" + ("+" if e10 >= 0 else "-") + str(abs(e10))
    if exp >= 0:
        return s + digits + "0" * exp
    if exp + n > 0:
        k = exp + n
        return s + digits[:k] + "." + digits[k:]
    return s + "0." + "0" * (-(exp + n)) + digits


def _parses_back(text: str, type_name: str, bits: int) -> bool:
    return float_bits(float(text), type_name) == bits


def format_float(value: float, type_name: str) -> str:
    """MLIR's text for a float attribute value of the given float type name (``f32``...)."""
    width = _WIDTH.get(type_name)
    if width is None:
        dt = float_dtypes().get(type_name)
        width = dt.itemsize * 8 if dt is not None else 64
    bits = float_bits(value, type_name)
    if value != value or value in (float("inf"), float("-inf")):
        return hex_text(bits if bits is not None else 0, type_name, width)
    prec = _SEM[type_name][4] if type_name in _SEM else 53
    neg = value < 0 or (value == 0 and str(value).startswith("-"))
    num, e = _exact(value)
    s = _sci6(num, e, neg)
    if bits is None or _parses_back(s, type_name, bits):
        return s
    s = _natural(num, e, neg, prec)
    if "." in s:
        return s
    return hex_text(bits, type_name, width)

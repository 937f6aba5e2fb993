"""The tpu integer contract against independent integer references (pure Python / int64 math)."""

from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.dialects.quant import UniformQuantizedType
from lamina.dialects.tpu.quantize import (
    build_lut,
    dequantize,
    lut_index,
    quantize,
    quantize_multiplier,
    requantize,
    round_float,
)
from lamina.ir.types import FloatType, RankedTensorType, f32


def ref_round_half_away(fr: Fraction) -> int:
    """Exact rational rounding, ties away from zero."""
    n = abs(fr)
    q = int(n + Fraction(1, 2))  # floor(n + 1/2) for n >= 0
    return q if fr >= 0 else -q


def ref_requant(acc: int, m: int, rshift: int, zp: int, lo: int, hi: int) -> int:
    v = ref_round_half_away(Fraction(acc * m, 2 ** (31 + rshift))) + zp
    return max(lo, min(hi, v))


@settings(max_examples=400, deadline=None)
@given(
    acc=st.integers(-(2**31), 2**31 - 1),
    real=st.floats(1e-6, 4.0, allow_nan=False),
    zp=st.integers(-20, 20),
)
def test_requant_matches_exact_rational_rounding(acc: int, real: float, zp: int) -> None:
    m, s = quantize_multiplier(real)
    got = int(requantize(np.array([acc], np.int32), m, s, zp, -128, 127)[0])
    assert got == ref_requant(acc, m, s, zp, -128, 127)


@settings(max_examples=200, deadline=None)
@given(real=st.floats(1e-12, 1e6, allow_nan=False))
def test_quantize_multiplier_is_close_and_normalized(real: float) -> None:
    m, s = quantize_multiplier(real)
    assert 0 <= m < 2**31
    if 31 + s < 62:
        assert m >= 2**30
        assert abs(m / 2 ** (31 + s) - real) <= real * 2**-30
    assert 1 <= 31 + s <= 62


def test_requant_ties_round_away_from_zero() -> None:
    m, s = 1 << 30, 0  # multiplier 0.5
    accs = np.array([1, -1, 3, -3, 2, -2], np.int32)
    assert requantize(accs, m, s, 0, -128, 127).tolist() == [1, -1, 2, -2, 1, -1]


def test_requant_saturates_and_per_channel() -> None:
    acc = np.array([[400, 400], [-400, -401]], np.int32)
    m = np.array([1 << 30, 1 << 29])
    s = np.array([0, 0])
    y = requantize(acc, m, s, 0, -128, 127, axis=1)
    assert y.tolist() == [[127, 100], [-128, -100]]


def test_quantize_dequantize_round_trip() -> None:
    t = UniformQuantizedType(8, True, f32, 0.1, -3)
    x = np.array([0.05, -0.05, 0.15, 100.0, -100.0, 0.0], np.float32)
    q = quantize(x, t)
    # 0.05/0.1 = 0.5 rounds away to 1 (float64 of the float32 value 0.05 is slightly above 0.05)
    assert q.dtype == np.int8
    assert q.tolist() == [
        ref_round_half_away(Fraction(float(np.float32(0.05))) / Fraction(0.1)) - 3,
        ref_round_half_away(Fraction(float(np.float32(-0.05))) / Fraction(0.1)) - 3,
        ref_round_half_away(Fraction(float(np.float32(0.15))) / Fraction(0.1)) - 3,
        127,
        -128,
        -3,
    ]
    d = dequantize(q, t)
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, ((q.astype(np.int64) + 3) * 0.1).astype(np.float32))


@pytest.mark.parametrize("name,dt", [("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_round_float_is_round_to_nearest_even(name: str, dt: type) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(np.float32) * 100
    y = round_float(x, RankedTensorType([1000], FloatType(name)))
    assert y.dtype == np.dtype(dt)
    np.testing.assert_array_equal(y.view(np.uint16), x.astype(dt).view(np.uint16))
    # bf16 ties: 1 + 2**-8 is halfway between 1 and 1 + 2**-7 -> even (1.0)
    if name == "bf16":
        tie = np.array([1 + 2**-8, 1 + 3 * 2**-8], np.float32)
        assert round_float(tie, RankedTensorType([2], FloatType("bf16"))).astype(np.float32).tolist() == [
            1.0,
            1 + 2**-6,
        ]


def test_lut_entries_follow_the_definition() -> None:
    it = UniformQuantizedType(8, True, f32, 0.05, 0)
    ot = UniformQuantizedType(8, False, f32, 1 / 255, 0)
    table = build_lut(lambda x: 1 / (1 + np.exp(-x)), it, ot)
    assert table.shape == (256,) and table.dtype == np.uint8
    for i in (0, 1, 127, 128, 200, 255):
        v = i - 128
        y = 1 / (1 + np.exp(-(v * 0.05)))
        assert int(table[i]) == max(0, min(255, ref_round_half_away(Fraction(y) / Fraction(1 / 255))))


def test_a_16_bit_lut_has_an_entry_per_int16_value() -> None:
    it = UniformQuantizedType(16, True, f32, 0.001, 0)
    ot = UniformQuantizedType(16, True, f32, 0.002, 0, -11000, 11000)
    table = build_lut(np.tanh, it, ot)
    assert table.shape == (65536,) and table.dtype == np.int16
    for i in (0, 1, 32767, 32768, 40000, 65535):
        v = i - 32768
        y = math.tanh(v * 0.001)
        assert int(table[i]) == max(-11000, min(11000, ref_round_half_away(Fraction(y) / Fraction(0.002))))
    assert lut_index(np.array([-32768, 0, 32767], np.int16), True, 16).tolist() == [0, 32768, 65535]


def test_quantize_keeps_0d_arrays_arrays() -> None:
    """A scalar constant quantized at lowering must stay an array (a numpy scalar has no buffer for
    the weights file: model_deploy failed writing MiniLM's attention-mask constants)."""
    from lamina.dialects.quant import UniformQuantizedType
    from lamina.ir.types import f32

    q = quantize(np.array(-1.0e4, np.float32), UniformQuantizedType(8, True, f32, 10000 / 127, 0))
    assert isinstance(q, np.ndarray) and q.shape == () and q.dtype == np.int8 and int(q) == -127


def test_round_half_away_is_the_formula_bit_for_bit() -> None:
    """``round_half_away`` (computed in one buffer) gives the bits of ``sign(x) * floor(|x| + 0.5)``:
    ties away from zero, the signs of zeros, infinities and NaNs, 0-d and n-d inputs."""
    from lamina.dialects.tpu.quantize import round_half_away

    rng = np.random.default_rng(7)
    x = np.concatenate(
        [
            [0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 0.49999999999999994, -0.3, np.inf, -np.inf, np.nan, -np.nan],
            rng.standard_normal(1000) * 300,
            np.round(rng.standard_normal(100) * 50) + 0.5,
        ]
    )
    for a in (x, x.reshape(-1, 2)[:, 1], x[3:4].reshape(()), np.float32(2.5)):
        a64 = np.asarray(a, np.float64)
        want = np.sign(a64) * np.floor(np.abs(a64) + 0.5)
        got = round_half_away(a)
        assert np.asarray(got).shape == np.asarray(want).shape
        assert np.asarray(got).tobytes() == np.asarray(want).tobytes()

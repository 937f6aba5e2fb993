"""The fast exact accumulations (lamina/targets/npu/fast.py) against the int64 statement of the sums,
on inputs built to need many float32 chunks: extreme storage values, long reductions, zero points,
groups, depthwise filters; and the int32 wrap the contract applies afterwards."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.targets.npu import fast, tiu


def ref_conv_int64(
    x: np.ndarray, w: np.ndarray, group: int, s: list[int], d: list[int], p: list[int]
) -> np.ndarray:
    """Grouped 2-d convolution of centred int64 arrays by shift-and-add over the kernel taps;
    ``p`` is (top, left, bottom, right)."""
    x = np.pad(x, [(0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])])
    kh, kw = w.shape[2:]
    oh = (x.shape[2] - (kh - 1) * d[0] - 1) // s[0] + 1
    ow = (x.shape[3] - (kw - 1) * d[1] - 1) // s[1] + 1
    n, m, cg = x.shape[0], w.shape[0], w.shape[1]
    mg = m // group
    y = np.zeros((n, m, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            xs = x[
                :,
                :,
                i * d[0] : i * d[0] + s[0] * (oh - 1) + 1 : s[0],
                j * d[1] : j * d[1] + s[1] * (ow - 1) + 1 : s[1],
            ]
            for g in range(group):
                y[:, g * mg : (g + 1) * mg] += np.einsum(
                    "nchw,mc->nmhw", xs[:, g * cg : (g + 1) * cg], w[g * mg : (g + 1) * mg, :, i, j]
                )
    return y


def _extreme(rng: np.random.Generator, shape: tuple[int, ...], lo: int, hi: int) -> np.ndarray:
    """Storage integers mostly at the ends of their range (the largest products)."""
    a = rng.choice(np.array([lo, hi, lo + 1, hi - 1, 0]), size=shape, p=[0.4, 0.4, 0.05, 0.05, 0.1])
    return a.astype(np.int8 if lo < 0 else np.uint8)


def test_chunk_size() -> None:
    assert fast.chunk_size(4608, 128, 127) == (1 << 24) // (128 * 127)
    assert fast.chunk_size(10, 255, 255) == 10  # short reductions are one chunk
    assert fast.chunk_size(7, 0, 127) == 7  # all-zero operand
    assert fast.chunk_size(5, 1e12, 1e12) == 1


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 2),
    st.sampled_from([1, 2]),
    st.integers(1, 40),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(1, 2),
    st.integers(1, 2),
    st.integers(0, 2),
    st.booleans(),
    st.integers(-128, 127),
    st.integers(0, 2**31),
)
def test_conv_accumulate_is_exact(
    n: int, g: int, cg: int, mg: int, k: int, s: int, d: int, p: int, unsigned: bool, zp: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    size = max((k - 1) * d + 1, 3)
    x = _extreme(rng, (n, g * cg, size, size + 1), 0 if unsigned else -128, 255 if unsigned else 127)
    w = _extreme(rng, (g * mg, cg, k, k), -128, 127)
    w_zp = int(rng.integers(-128, 128)) if seed % 3 == 0 else 0
    got = fast.conv_accumulate(
        x, w, x_zp=zp, w_zp=w_zp, stride=[s, s], dilation=[d, d], pad=[p, p, p, p], group=g
    )
    assert got is not None and got.dtype in (np.int32, np.int64)
    want = ref_conv_int64(x.astype(np.int64) - zp, w.astype(np.int64) - w_zp, g, [s, s], [d, d], [p] * 4)
    np.testing.assert_array_equal(got, want)


def test_long_reductions_need_many_chunks_and_stay_exact() -> None:
    """K = 2048 * 9 taps of 383 * 128 products: ~55 chunks, sums far past 2**24."""
    rng = np.random.default_rng(3)
    x = np.full((1, 2048, 3, 3), 255, np.uint8)
    x[0, ::7] = 0
    w = np.full((2, 2048, 3, 3), -128, np.int8)
    w[1] = rng.integers(-128, 128, (2048, 3, 3)).astype(np.int8)
    assert fast.chunk_size(2048 * 9, 383, 128) < 2048 * 9 // 50
    got = fast.conv_accumulate(x, w, x_zp=-128, w_zp=0, stride=[1, 1], dilation=[1, 1], pad=[1] * 4, group=1)
    want = ref_conv_int64(x.astype(np.int64) + 128, w.astype(np.int64), 1, [1, 1], [1, 1], [1] * 4)
    assert np.abs(want).max() > 2**29  # 32 times what float32 holds exactly
    np.testing.assert_array_equal(got, want)


def test_depthwise_taps_past_the_float32_bound_take_the_float64_path() -> None:
    x = np.full((1, 2, 24, 24), 255, np.uint8)
    w = np.full((2, 1, 20, 20), -128, np.int8)  # 400 taps of 383 * 128: past 2**24
    assert (
        fast.conv_accumulate(x, w, x_zp=-128, w_zp=0, stride=[1, 1], dilation=[1, 1], pad=[0] * 4, group=2)
        is None
    )
    small = np.full((2, 1, 3, 3), -128, np.int8)
    got = fast.conv_accumulate(
        x, small, x_zp=-128, w_zp=0, stride=[2, 1], dilation=[1, 2], pad=[1, 0, 2, 1], group=2
    )
    want = ref_conv_int64(x.astype(np.int64) + 128, small.astype(np.int64), 2, [2, 1], [1, 2], [1, 0, 2, 1])
    np.testing.assert_array_equal(got, want)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 5), st.integers(1, 3000), st.integers(1, 6), st.booleans(), st.booleans(), st.integers(0, 2**31)
)  # fmt: skip
def test_matmul_accumulate_is_exact(m: int, k: int, n: int, batched: bool, per_col: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = _extreme(rng, ((2, m, k) if batched else (m, k)), 0, 255)
    b = _extreme(rng, (k, n), -128, 127)
    b_zp: object = rng.integers(-128, 128, n) if per_col else int(rng.integers(-128, 128))
    got = fast.matmul_accumulate(a, b, a_zp=-100, b_zp=b_zp)
    want = np.matmul(a.astype(np.int64) + 100, b.astype(np.int64) - np.asarray(b_zp, np.int64))
    np.testing.assert_array_equal(got, want)


def test_tiu_conv_wraps_the_exact_sum() -> None:
    """tiu.conv through the fast path: the exact sum wrapped to int32, then requantized."""
    x = np.full((1, 8192, 3, 3), 127, np.int8)
    w = np.full((1, 8192, 3, 3), 127, np.int8)
    p = {"x_zp": -128, "w_zp": 0, "stride": [1, 1], "dilation": [1, 1], "pad": [0] * 4, "group": 1,
         "multiplier": [1 << 30], "rshift": [-1], "out_zp": 0, "out_min": -(2**31), "out_max": 2**31 - 1,
         "out_dtype": "i32"}  # fmt: skip
    exact = 255 * 127 * 8192 * 9
    assert exact > 2**31
    y = tiu.conv(x, w, None, **p)
    assert int(y.reshape(-1)[0]) == int(np.int64(exact).astype(np.int32))


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.booleans(),
    st.integers(-3, 20),
    st.integers(-128, 127),
    st.sampled_from([(-128, 127), (0, 255), (-32768, 32767), (-5, 9)]),
)
def test_requantize_in_place_is_the_contract(
    seed: int, per_channel: bool, shift: int, zp: int, lims: tuple[int, int]
) -> None:
    from lamina.dialects.tpu.quantize import requantize

    rng = np.random.default_rng(seed)
    acc = rng.integers(-(2**31), 2**31, (2, 5, 3, 4), dtype=np.int64).astype(np.int32)
    acc[0, 0, 0, :2] = [-(2**31), 2**31 - 1]
    n = 5 if per_channel else 1
    mult = rng.integers(0, 2**31, n, dtype=np.int64)
    rsh = np.clip(shift + rng.integers(-2, 3, n), -30, 31)
    lo, hi = lims
    want = requantize(acc, mult if per_channel else int(mult[0]), rsh if per_channel else int(rsh[0]), zp, lo, hi,
                      axis=1 if per_channel else None)  # fmt: skip
    got = fast.requantize(acc, mult, rsh, zp, lo, hi, 1, np.dtype(np.int64))
    np.testing.assert_array_equal(got, want)
    # a transposed (non-contiguous) accumulator gives a C-contiguous result
    t = fast.requantize(acc.transpose(0, 2, 3, 1), mult, rsh, zp, lo, hi, 3, np.dtype(np.int64))
    assert t.flags.c_contiguous
    np.testing.assert_array_equal(t, want.transpose(0, 2, 3, 1))


def test_add_bias_wraps_as_the_contract() -> None:
    from lamina.dialects.tpu.quantize import wrap_int32

    acc = np.array([[2**31 - 1, -(2**31), 5]], np.int32)
    bias = np.array([1, -1, -7], np.int32)
    want = wrap_int32(acc.astype(np.int64) + bias.astype(np.int64))
    np.testing.assert_array_equal(fast.add_bias(acc, bias, 1), want)
    np.testing.assert_array_equal(fast.add_bias(acc.astype(np.int64), bias.astype(np.int64) + 2**32, 1), want)

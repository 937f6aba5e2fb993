"""The exact INT8 Winograd F(4x4, 3x3) conv (``lamina/targets/cpu/kernels/winograd_int8.py``): each
kernel, compiled for the host (and narrower ISAs: AVX2 without VNNI, 16-byte vectors, 512-bit
without VNNI, 256-bit VNNI) and called through ctypes for 1, 2 and 3 parts (``int8_harness``:
canaries around the output), equals ``tpu.Conv``'s ``execute`` **bit for bit** — random channel
counts (odd: a channel pair half empty), heights and widths (tails of tiles and of vectors), pads 0/1
on each side, batches, int8 symmetric / asymmetric and uint8 inputs, per-channel and per-tensor
multipliers, bias (int32 wrap), ReLU and ReLU6 limits, extreme inputs; fused ``tpu.Lut`` and
residual ``tpu.Add`` (+ Lut) epilogues; weights at the int16 limits of ``W'`` and sums at the
``2**25`` bound of the output transform (the template declines past it); the template the compiler
selects. The numpy model of the arithmetic is checked against the direct sum too."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled, host_isa
from test_gemm_int8 import ISA_IDS, ISAS, SETTINGS, _act, _inputs, _mults, conv_op, with_lut
from test_gemm_int8_epilogue import check_fused, with_residual
from tpu_cases import arr, dense, op, per_axis, q8, t

from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.winograd_int8 import (
    ATI,
    BOUND,
    BT,
    GI,
    INV9,
    WinogradInt8,
    _geometry,
    exact_bound,
    winograd_weights,
)

HOST = host_isa()
FORCED = WinogradInt8(force=True)


def check(
    o: Any, x: np.ndarray, isa: Isa, nparts: tuple[int, ...] = (1, 2, 3), ir_passes: bool = False
) -> Compiled:
    assert FORCED.matches(o, isa)
    ref = o.execute(_inputs(o, x))[0]
    c = Compiled(FORCED, o, isa, ir_passes=ir_passes)
    c.expect([x], ref, nparts)
    return c


@st.composite
def cases(draw: Any, cmax: int = 37) -> tuple[Any, np.ndarray]:
    cin = draw(st.integers(1, cmax))
    cout = draw(st.integers(1, cmax))
    pads = [draw(st.integers(0, 1)) for _ in range(4)]
    hw = (draw(st.integers(3, 23)), draw(st.integers(3, 37)))
    n = draw(st.integers(1, 2))
    mode = draw(st.sampled_from(["sym", "asym", "asym+", "u8"]))
    relu = draw(st.sampled_from(["none", "relu", "limit"]))
    per_channel = draw(st.booleans())
    bias = draw(st.sampled_from(["none", "small", "huge"]))
    fill = draw(st.sampled_from(["rand", "rand", "min", "max", "minmax"]))
    wfill = draw(st.sampled_from(["rand", "rand", "min", "max"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    o = conv_op(
        rng, n, cin, hw, cout, (3, 3), (1, 1), (1, 1), pads, 1, mode, relu, per_channel, bias, wfill,
        big=fill != "rand",
    )  # fmt: skip
    signed = mode != "u8"
    if fill == "minmax":  # the extremes in a random pattern: |B^T d B| near its bound
        lo, hi = (-128, 127) if signed else (0, 255)
        x = np.where(rng.random((n, cin, *hw)) < 0.5, lo, hi).astype(np.int8 if signed else np.uint8)
    else:
        x = _act(rng, (n, cin, *hw), signed, fill)
    return o, x


@SETTINGS
@given(case=cases(), ir_passes=st.booleans())
def test_bit_exact(case: tuple[Any, np.ndarray], ir_passes: bool) -> None:
    check(*case, HOST, ir_passes=ir_passes)


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1 : len(ISAS)])
def test_narrower_isas(isa: Isa) -> None:
    """Each narrower ISA on a few shapes (odd channels, tails of tiles and vectors, pads)."""
    rng = np.random.default_rng(5)
    for cin, cout, hw, pads, mode, relu in (
        (17, 19, (13, 21), [1, 0, 0, 1], "asym", "relu"),
        (16, 8, (9, 9), [1, 1, 1, 1], "u8", "none"),
        (5, 16, (6, 17), [0, 1, 1, 0], "sym", "limit"),
    ):
        o = conv_op(rng, 1, cin, hw, cout, (3, 3), (1, 1), (1, 1), pads, 1, mode, relu, True, "small")
        check(o, _act(rng, (1, cin, *hw), mode != "u8", "rand"), isa, (1, 2))


@pytest.mark.parametrize("lut_signed,relu", [(True, "none"), (False, "relu")])
def test_fused_lut(lut_signed: bool, relu: str) -> None:
    rng = np.random.default_rng(11)
    o = conv_op(rng, 1, 18, (11, 15), 20, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "asym", relu, True, "small")
    prod, lut = with_lut(o, rng, lut_signed)
    x = _act(rng, (1, 18, 11, 15), True, "rand")
    ref = lut.execute([prod.execute(_inputs(prod, x))[0]])[0]
    c = Compiled(FORCED, prod, HOST)
    assert ("weight", "lut") in c.plan.buffers
    for n in (1, 2):
        np.testing.assert_array_equal(c([x], ref.shape, ref.dtype, n), ref)


@st.composite
def residual_cases(draw: Any) -> tuple[Any, ...]:
    """A 3x3 stride-1 conv with a fused residual add (and maybe a Lut after it)."""
    hw = (draw(st.integers(3, 15)), draw(st.integers(3, 29)))
    cin, cout = draw(st.integers(2, 24)), draw(st.integers(1, 24))
    mode = draw(st.sampled_from(["sym", "asym", "u8"]))
    relu = draw(st.sampled_from(["none", "none", "relu", "limit"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    pads = [draw(st.integers(0, 1)) for _ in range(4)]
    o = conv_op(rng, draw(st.integers(1, 2)), cin, hw, cout, (3, 3), (1, 1), (1, 1), pads, 1, mode, relu,
                True, draw(st.sampled_from(["none", "small", "huge"])))  # fmt: skip
    res_signed = draw(st.booleans())
    zp_res = draw(st.sampled_from([0, -3, 7] if res_signed else [0, 100]))
    out_signed = draw(st.booleans())
    zp_out = draw(st.sampled_from([0, 5, -20] if out_signed else [0, 40]))
    if draw(st.booleans()):  # as calibration gives them: the int32 and float fast forms
        mults = (int(rng.integers(2**28, 2**31)), int(rng.integers(2**28, 2**31)))
        rshift = draw(st.integers(-2, 2))
    else:  # any: small shifts (ties), large factors (the i64 form)
        mults = (int(rng.integers(0, 2**31)), int(rng.integers(0, 2**31)))
        rshift = draw(st.integers(-25, 12))
    lut = draw(st.sampled_from([None, "signed", "unsigned"]))
    conv, add, lut_op = with_residual(
        o, rng, res_signed, zp_res, (out_signed, zp_out), mults, rshift, draw(st.booleans()), lut
    )
    x = _act(rng, tuple(conv.operands[0].type.shape), mode != "u8", "rand")
    r = _act(rng, tuple(conv.results[0].type.shape), res_signed, "rand")
    return conv, add, lut_op, x, r


@SETTINGS
@given(case=residual_cases())
def test_residual_bit_exact(case: tuple[Any, ...]) -> None:
    conv, add, lut, x, r = case
    check_fused(FORCED, conv, add, lut, x, r, HOST, (1, 2, 3))


def conv3(w: np.ndarray, x_signed: bool, zp: int, hw: tuple[int, int], mult: float = 1e-6) -> Any:
    """A 3x3 stride-1 pad-1 ``tpu.Conv`` of the given int8 weights (any value in [-128, 127])."""
    cout, cin = w.shape[:2]
    pairs = _mults(np.random.default_rng(0), cout, mult, 2 * mult)
    attrs = [
        arr("strides", [1, 1]),
        arr("pads", [1] * 4),
        arr("multiplier", pairs[0]),
        arr("rshift", pairs[1]),
    ]
    return op(
        "tpu.Conv",
        [
            t((1, cin, *hw), q8(x_signed, 0.05, zp)),
            ("const", dense(w), t(w.shape, per_axis([0.01] * cout, 0, weight=False)), t(w.shape, "i8")),
            None,
        ],
        t((1, cout, *hw), q8(True, 0.02, 0)),
        ", ".join(attrs),
    )


def test_int16_limits_and_the_bound() -> None:
    """Weights of -128 (``|W'| = 144 * 128``, its largest) with inputs at their extremes give sums
    just below ``2**25`` (exact), or above it: the template declines, int8-conv runs the op."""
    rng = np.random.default_rng(1)
    cin = 114  # 255 * 128 * 9 * 114 = 33.49e6 < 2**25 = 33.55e6
    w = np.full((16, cin, 3, 3), -128, np.int8)
    w[1::2, :, 1, 1] = 127  # mixed signs in half the channels
    o = conv3(w, False, 0, (9, 10))
    q = _geometry(o)[1]  # type: ignore[index]
    assert exact_bound(q, 16).max() < BOUND and exact_bound(q, 16).max() > 0.99 * BOUND
    assert np.abs(winograd_weights(w)).max() == 144 * 128
    assert FORCED.matches(o, HOST)
    for fill in ("max", "min"):
        check(o, _act(rng, (1, cin, 9, 10), False, fill), HOST, (1, 2))
    x = np.where(rng.random((1, cin, 9, 10)) < 0.5, 0, 255).astype(np.uint8)
    check(o, x, HOST, (1,))
    # one more channel: past the bound (and an int8 input of zero point 127: max|d| = 255 too)
    w2 = np.full((16, cin + 1, 3, 3), -128, np.int8)
    assert not FORCED.matches(conv3(w2, False, 0, (9, 10)), HOST)
    assert not FORCED.matches(conv3(w2, True, 127, (9, 10)), HOST)
    assert select(conv3(w2, False, 0, (9, 10)), HOST).name != "winograd_int8"
    # a single channel over it declines the whole op
    w3 = rng.integers(-20, 20, (16, cin + 1, 3, 3)).astype(np.int8)
    w3[5] = -128
    assert not FORCED.matches(conv3(w3, False, 0, (9, 10)), HOST)
    w3[5, 0] = 0
    assert FORCED.matches(conv3(w3, False, 0, (9, 10)), HOST)


def test_numpy_model() -> None:
    """The transforms' integer identities: ``A'^T [(G' g G'^T) . (B^T d B)] A' = 576 Y`` and the
    recovery ``(Z * 9**-1 mod 2**32) >> 6 = Y`` (wrapping int32) for sums near ``2**25``."""
    rng = np.random.default_rng(0)
    for c, lo, hi in ((8, -128, 127), (64, -255, 255), (3, 0, 255)):
        w = rng.integers(-128, 128, (4, c, 3, 3))
        d = rng.integers(lo, hi + 1, (c, 6, 6))
        ref = np.array([[[np.sum(w[n] * d[:, i : i + 3, j : j + 3]) for j in range(4)] for i in range(4)]
                        for n in range(4)])  # fmt: skip
        wp = np.einsum("ak,nckl,bl->abnc", GI, w, GI)
        xp = np.einsum("ak,ckl,bl->abc", BT, d, BT)
        z = np.einsum("ia,abn,jb->nij", ATI, np.einsum("abnc,abc->abn", wp, xp), ATI)
        assert np.array_equal(z, 576 * ref)
        zz = (z & 0xFFFFFFFF) * INV9 & 0xFFFFFFFF
        y = np.where(zz >= 2**31, zz - 2**32, zz) >> 6
        assert np.array_equal(y, ref)


def test_selected_for_resnet_layers() -> None:
    """The compiler's choice: ResNet's 3x3 stride-1 layers from 14x14 on (realistic weights); not
    7x7 maps, strided or dilated convs, 1x1 convs."""
    rng = np.random.default_rng(2)
    for cin, hw, want in ((64, 56, True), (128, 28, True), (256, 14, True), (512, 7, False)):
        w = np.clip(rng.normal(0, 20, (cin, cin, 3, 3)), -127, 127).astype(np.int8)
        o = conv3(w, False, 0, (hw, hw))
        assert (select(o, HOST).name == "winograd_int8") == want, (cin, hw)
    # below the measured sizes: 32 channels, 12x12 (9 tiles); forced it runs them
    for cin, hw in ((32, 28), (64, 12)):
        o = conv3(np.clip(rng.normal(0, 20, (cin, cin, 3, 3)), -127, 127).astype(np.int8), False, 0, (hw, hw))
        assert not WinogradInt8().matches(o, HOST) and FORCED.matches(o, HOST)
    o = conv_op(rng, 1, 32, (16, 16), 32, (3, 3), (2, 2), (1, 1), [1] * 4, 1, "sym", "relu", True, "small")
    assert not FORCED.matches(o, HOST)
    o = conv_op(rng, 1, 32, (16, 16), 32, (3, 3), (1, 1), (2, 2), [2] * 4, 1, "sym", "relu", True, "small")
    assert not FORCED.matches(o, HOST)
    o = conv_op(rng, 1, 32, (16, 16), 32, (1, 1), (1, 1), (1, 1), [0] * 4, 1, "sym", "relu", True, "small")
    assert not FORCED.matches(o, HOST)


def test_code_key_shared() -> None:
    """Convs of one shape and quantization scalars share one function (their weights, bias and
    multipliers are buffers)."""
    rng = np.random.default_rng(4)
    a, b = (conv_op(rng, 1, 20, (12, 12), 24, (3, 3), (1, 1), (1, 1), [1] * 4, 1, "sym", "relu", True, "small")
            for _ in range(2))  # fmt: skip
    pa, pb = FORCED.plan(a, "a", HOST), FORCED.plan(b, "b", HOST)
    assert FORCED.code_key(a, pa, HOST) == FORCED.code_key(b, pb, HOST)
    assert not np.array_equal(pa.weights["w"], pb.weights["w"])


def test_large_blocks() -> None:
    """Blocks of many vectors (the 4 x 6 register tile on 16 lanes), several blocks, a partial last
    one, 2 and 3 parts (blocks split; panels split on one block)."""
    from lamina.targets.cpu.kernels.winograd_int8 import _layout

    rng = np.random.default_rng(8)
    for hw, cout in (((58, 61), 24), ((23, 70), 13)):
        o = conv_op(
            rng, 1, 19, hw, cout, (3, 3), (1, 1), (1, 1), [1, 1, 1, 1], 1, "asym", "relu", True, "small"
        )
        lay = _layout(_geometry(o)[0], HOST)  # type: ignore[index]
        if HOST.vector_bytes == 64 and HOST.has("avx512vnni"):
            assert (lay["mr"], lay["nv"]) == (4, 6) and lay["nvec"] >= 6, lay
        check(o, _act(rng, (1, 19, *hw), True, "rand"), HOST, (1, 2, 3))


@pytest.mark.parametrize("hw", [(56, 56), (26, 82), (41, 89)])
def test_partial_last_block(hw: tuple[int, int]) -> None:
    """A last block of fewer vectors than the others, whose GEMM runs only the register tiles that
    hold them (on AVX-512 VNNI: 56x56 blocks of 8 and 5 vectors, the remainder tile skipped; 26x82
    on 8 lanes, 16 and 3 vectors: one tile of the six; 41x89, 13 and 3: one of three), on 1-4 parts
    (blocks split, or every block's panels)."""
    from lamina.targets.cpu.kernels.winograd_int8 import _layout

    rng = np.random.default_rng(hw[0])
    o = conv_op(rng, 1, 19, hw, 13, (3, 3), (1, 1), (1, 1), [1, 1, 1, 1], 1, "asym", "relu", True, "small")
    lay = _layout(_geometry(o)[0], HOST)  # type: ignore[index]
    last = -(-((lay["th"] - (lay["nblk"] - 1) * lay["r"]) * lay["tw"]) // lay["nl"])
    if HOST.vector_bytes == 64 and HOST.has("avx512vnni"):
        assert lay["nblk"] == 2 and last <= lay["nv"] < lay["nvec"], lay
    check(o, _act(rng, (1, 19, *hw), True, "rand"), HOST, (1, 2, 3, 4))


@pytest.mark.parametrize("zp", [1, 100, 200, 255])
def test_uint8_zero_points(zp: int) -> None:
    """uint8 inputs of any zero point (``d = q - zp`` from ``-255`` to ``255``; padding reads zp),
    random and extreme inputs, per-channel multipliers, bias; with a fused Lut for one of them."""
    rng = np.random.default_rng(zp)
    w = rng.integers(-60, 61, (21, 17, 3, 3)).astype(np.int8)
    for hw, fill in (((13, 22), "rand"), ((9, 11), "min"), ((10, 17), "max")):
        o = conv3(w, False, zp, hw, mult=3e-5)
        assert FORCED.matches(o, HOST)
        check(o, _act(rng, (1, 17, *hw), False, fill), HOST, (1, 2, 3))
    prod, lut = with_lut(conv3(w, False, zp, (12, 20), mult=3e-5), rng, False)
    x = _act(rng, (1, 17, 12, 20), False, "rand")
    ref = lut.execute([prod.execute(_inputs(prod, x))[0]])[0]
    np.testing.assert_array_equal(Compiled(FORCED, prod, HOST)([x], ref.shape, ref.dtype, 2), ref)

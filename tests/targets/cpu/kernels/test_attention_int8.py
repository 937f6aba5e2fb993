"""The CPU target's integer Attention and Softmax templates
(``lamina/targets/cpu/kernels/attention_int8.py``): each kernel, compiled with llvmlite and called
through ctypes (``int8_harness``) for every part of ``nparts`` in 1, 2, 3, equals the ``tpu`` op's
``execute`` **bit for bit** — over random shapes (B, H, Sq, Sk, D, including ``Sk`` past one int32
key chunk and ``D`` not a multiple of 4 or of the vector), masks of every broadcast shape the
lowering admits, signed / unsigned storage and zero points of each operand, the padding mask's
unshifted factor, extreme values — with the host's ISA and narrower ones forced (AVX2 without VNNI,
16-byte vectors, 512-bit without VNNI). Hypothesis examples are derandomized."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled, host_isa
from tpu_cases import arr, build, op, q8, t

from lamina.dialects.tpu.quantize import quantize_multiplier, round_half_away, softmax_exp_table
from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.attention_int8 import Int8Attention, Int8Softmax

HOST = host_isa()
ISAS = [
    HOST,
    Isa(32, frozenset({"fma", "avx2"})),
    Isa(16),
    Isa(64, frozenset({"avx512f", "avx512bw", "avx512dq"})),
]
ISA_IDS = ["host", "avx2", "v16", "avx512-novnni"]
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
MASKS = ["none", "b11k", "k", "bhqk", "qk", "1h1k"]


def _factor(real: float) -> list[int]:
    """The lowering's ``[multiplier, total shift]`` (``[rha(real), 0]`` from ``2**30``)."""
    if real >= 2.0**30:
        return [int(round_half_away(np.float64(real))), 0]
    m, rs = quantize_multiplier(real)
    return [m, 31 + rs]


def _storage(rng: np.random.Generator, shape: tuple[int, ...], signed: bool, spread: int = 256) -> np.ndarray:
    lo = -128 if signed else 0
    centre = rng.integers(lo, lo + 256 - spread + 1)
    return rng.integers(centre, centre + spread, shape).astype(np.int8 if signed else np.uint8)


def attention(
    rng: np.random.Generator,
    dims: tuple[int, int, int, int, int],
    mask: str,
    signs: tuple[bool, bool, bool, bool, bool],
    zps: tuple[int, int, int, int, int],
    scales: tuple[float, float, float, float, float],
    spread: int = 256,
) -> tuple[Any, list[Any]]:
    """A ``tpu.Attention`` in its integer form (the factors as the lowering computes them) and
    storage values for its operands."""
    b, h, sq, sk, d = dims
    s_q, s_k, s_v, s_o, s_m = scales
    types = [q8(sg, s, z) for sg, s, z in zip(signs, scales, zps)]
    qt, kt, vt_, ot, mt = types[0], types[1], types[2], types[3], types[4]
    shapes = {
        "b11k": (b, 1, 1, sk),
        "k": (sk,),
        "bhqk": (b, h, sq, sk),
        "qk": (sq, sk),
        "1h1k": (1, h, 1, sk),
    }
    attrs = [
        arr("qk_factor", _factor(d**-0.5 * s_q * s_k * 1024)),
        arr("out_factor", [int(round_half_away(np.float64(2.0**16 * s_v / s_o)))]),
    ]
    operands: list[Any] = [t((b, h, sq, d), qt), t((b, h, sk, d), kt), t((b, h, sk, d), vt_)]
    values: list[Any] = [
        _storage(rng, (b, h, sq, d), signs[0], spread),
        _storage(rng, (b, h, sk, d), signs[1], spread),
        _storage(rng, (b, h, sk, d), signs[2], spread),
    ]
    if mask == "none":
        operands.append(None)
        values.append(None)
    else:
        operands.append(t(shapes[mask], mt))
        attrs.append(arr("mask_factor", _factor(s_m * 1024)))
        values.append(_storage(rng, shapes[mask], signs[4]))
    operands += [None, None, None]
    values += [None, None, None]
    o = build("tpu.Attention", operands, [t((b, h, sq, d), ot), "none", "none", "none"], ", ".join(attrs))
    return o, values


def check(tpl: Any, o: Any, values: list[Any], isa: Isa, nparts: tuple[int, ...] = (1, 2, 3)) -> None:
    assert tpl.matches(o, isa)
    ref = o.execute(values)[0]
    c = Compiled(tpl, o, isa)
    ins = [v for v in values if v is not None]
    c.expect(ins, ref, nparts)


@st.composite
def attention_cases(draw: Any) -> tuple[Any, list[Any]]:
    dims = (
        draw(st.integers(1, 2)),
        draw(st.integers(1, 3)),
        draw(st.integers(1, 11)),
        draw(st.integers(1, 40)),
        draw(st.integers(1, 40)),
    )
    mask = draw(st.sampled_from(MASKS))
    signs = tuple(draw(st.booleans()) for _ in range(5))
    zps = tuple(draw(st.integers(-128, 127)) if sg else draw(st.integers(0, 255)) for sg in signs)
    if not draw(st.booleans()):
        zps = (0, 0, 0, 0, 0) if signs[3] else (0, 0, 0, 128, 0)
    # the mask's scale: 3.9e6 is a -1e9 padding mask's (its factor unshifted)
    scales = (
        *(math.exp(draw(st.floats(-6.0, 0.0))) for _ in range(4)),
        draw(st.sampled_from([0.05, 1.0, 78.74, 3.9e6])),
    )
    spread = draw(st.sampled_from([256, 16, 3]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    return attention(rng, dims, mask, signs, zps, scales, spread)  # type: ignore[arg-type]


@pytest.mark.parametrize("isa", ISAS, ids=ISA_IDS)
@SETTINGS
@given(case=attention_cases())
def test_attention_matches_execute(isa: Isa, case: Any) -> None:
    o, values = case
    check(Int8Attention(), o, values, isa)


@pytest.mark.parametrize("isa", ISAS[:3], ids=ISA_IDS[:3])
@pytest.mark.parametrize(
    ("dims", "mask"),
    [
        ((1, 12, 64, 64, 32), "b11k"),  # MiniLM's
        ((1, 2, 9, 300, 5), "qk"),  # two int32 key chunks
        ((1, 1, 3, 2, 2**15), "none"),  # |acc| up to 255 * 255 * 2**15, near 2**31
        ((3, 1, 17, 16, 64), "bhqk"),  # fewer than 8 heads: rows split in blocks
    ],
)
def test_attention_edge_shapes(isa: Isa, dims: tuple[int, ...], mask: str) -> None:
    rng = np.random.default_rng(7)
    o, values = attention(rng, dims, mask, (True, False, True, True, True), (3, 130, -5, 2, 0),  # type: ignore[arg-type]
                          (0.05, 0.04, 0.03, 0.02, 78.74))  # fmt: skip
    check(Int8Attention(), o, values, isa, nparts=(1, 3))


@pytest.mark.parametrize("isa", ISAS[:3], ids=ISA_IDS[:3])
@pytest.mark.parametrize("fill", [-128, 127, 255, 0])
def test_attention_extreme_values(isa: Isa, fill: int) -> None:
    """Every operand at one extreme of its storage against the opposite zero point (the largest
    products), and a key of -128 (i8) whose unsigned form is 0."""
    signed = fill < 128 and fill != 0
    rng = np.random.default_rng(1)
    zp = 127 if fill == -128 else -128 if signed else (0 if fill == 255 else 255)
    o, values = attention(rng, (1, 2, 5, 37, 67), "k", (signed,) * 5, (zp, zp, zp, 0, 0),  # type: ignore[arg-type]
                          (0.3, 0.3, 0.5, 0.01, 1.0))  # fmt: skip
    for v in values[:3]:
        v[...] = fill
    check(Int8Attention(), o, values, isa, nparts=(1, 2))


def test_attention_refuses_unbounded_logits() -> None:
    """A product factor that would take the logits past int64 differences (the reference executor
    runs such an op)."""
    rng = np.random.default_rng(0)
    o, _ = attention(rng, (1, 1, 2, 2, 8), "none", (True,) * 5, (0,) * 5, (1e6, 1e6, 0.1, 0.1, 1.0))  # type: ignore[arg-type]
    assert not Int8Attention().matches(o, HOST)
    o, _ = attention(rng, (1, 1, 2, 2, 8), "k", (True,) * 5, (0,) * 5, (0.1, 0.1, 0.1, 0.1, 1.0))  # type: ignore[arg-type]
    assert Int8Attention().matches(o, HOST)
    assert select(o, HOST).name == "int8-attention"


def test_float_attention_is_not_taken() -> None:
    o = build(
        "tpu.Attention",
        [t((1, 1, 2, 4), "f32")] * 3 + [None] * 4,
        [t((1, 1, 2, 4), "f32"), "none", "none", "none"],
    )
    assert not Int8Attention().matches(o, HOST)


# ---- Softmax --------------------------------------------------------------------------------------


def softmax(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    axis: int,
    signs: tuple[bool, bool],
    zps: tuple[int, int],
    scales: tuple[float, float],
) -> tuple[Any, np.ndarray]:
    table = softmax_exp_table(scales[0])
    factor = int(round_half_away(np.float64(2.0**16 / scales[1])))
    attrs = f"axis = {axis} : i64, {arr('exp_table', table)}, {arr('out_factor', [factor])}"
    o = op(
        "tpu.Softmax",
        [t(shape, q8(signs[0], scales[0], zps[0]))],
        t(shape, q8(signs[1], scales[1], zps[1])),
        attrs,
    )
    return o, _storage(rng, shape, signs[0])


@st.composite
def softmax_cases(draw: Any) -> tuple[Any, np.ndarray]:
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.integers(1, 9)) for _ in range(rank))
    if draw(st.booleans()):
        shape = (*shape[:-1], draw(st.integers(10, 300)))
    axis = draw(st.integers(-rank, rank - 1))
    signs = (draw(st.booleans()), draw(st.booleans()))
    zps = (draw(st.integers(-128, 127)) if signs[0] else draw(st.integers(0, 255)),
           -128 if signs[1] else draw(st.sampled_from([0, 3])))  # fmt: skip
    scales = (math.exp(draw(st.floats(-7.0, 1.0))), draw(st.sampled_from([1 / 256, 1 / 255, 0.003, 0.0002])))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    return softmax(rng, shape, axis, signs, zps, scales)


@pytest.mark.parametrize("isa", ISAS, ids=ISA_IDS)
@SETTINGS
@given(case=softmax_cases())
def test_softmax_matches_execute(isa: Isa, case: Any) -> None:
    o, x = case
    check(Int8Softmax(), o, [x], isa)


def test_float_and_log_softmax_are_not_taken() -> None:
    f = op("tpu.Softmax", [t((2, 3), "f32")], t((2, 3), "f32"), "axis = 1 : i64, log = false")
    assert not Int8Softmax().matches(f, HOST)
    rng = np.random.default_rng(0)
    o, _ = softmax(rng, (2, 3), 1, (True, True), (0, -128), (0.1, 1 / 256))
    assert Int8Softmax().matches(o, HOST) and select(o, HOST).name == "int8-softmax"

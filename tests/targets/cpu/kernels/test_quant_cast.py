"""The f32 -> 8-bit quantizing ``tpu.Cast`` without a division (``lamina/targets/cpu/kernels/
quant_cast.py``, ``cast-quantize-f32``): compiled for the host, AVX2 and 16-byte ISAs and called for
every part of ``nparts``, it equals ``execute`` **bit for bit** (64 canary bytes around the output) —
on random values, exact ties ``(k + 1/2) * s`` and their f32 neighbours, NaN, infinities, huge,
tiny and subnormal values, signed and unsigned, symmetric and asymmetric types, sizes with tails."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled
from test_gemm_int8 import HOST, ISA_IDS, ISAS
from tpu_cases import op, q8, t

from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.quant_cast import QuantizeF32


def _cast(shape: tuple[int, ...], signed: bool, scale: float, zp: int) -> Any:
    return op("tpu.Cast", [t(shape, "f32")], t(shape, q8(signed, scale, zp)))


def _values(rng: np.random.Generator, n: int, scale: float) -> np.ndarray:
    k = rng.integers(-300, 300, n).astype(np.float64)
    ties = ((k + 0.5) * scale).astype(np.float32)
    near = np.nextafter(ties, np.float32(np.inf) * rng.choice([-1, 1], n)).astype(np.float32)
    rand = (rng.standard_normal(n) * 100 * scale).astype(np.float32)
    odd = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, -1e-45, 0.0, -0.0], np.float32)
    v = np.concatenate([ties, near, rand, np.resize(odd, n)])
    return rng.permutation(v).astype(np.float32)


@pytest.mark.parametrize("isa", ISAS[:3], ids=ISA_IDS[:3])
@pytest.mark.parametrize(
    "n,signed,scale,zp",
    [
        (4 * 1000, True, 0.0173, 0),
        (4 * 37, False, 0.0078125, 0),  # a power of two: every tie exact
        (4 * 5 + 3, True, 0.31, -7),
        (4 * 257 + 1, False, 1.7e-3, 100),
        (4, True, 3.0, 5),
        # 49 / 2**e: x * (1 / s) misses half the exact ties (x / s = k + 1/2): the division's lanes
        (4 * 300, True, 49 / 1024, 3),
        (4 * 301 + 2, False, 49 / 64, 0),
    ],
)
def test_bit_exact(isa: Isa, n: int, signed: bool, scale: float, zp: int) -> None:
    rng = np.random.default_rng(n)
    x = _values(rng, n // 4, scale)[:n]
    x = np.resize(x, n).reshape(1, -1)
    o = _cast(x.shape, signed, scale, zp)
    tpl = QuantizeF32()
    assert tpl.matches(o, isa)
    ref = o.execute([x])[0]
    c = Compiled(tpl, o, isa)
    for parts in (1, 2, 3):
        np.testing.assert_array_equal(c([x], ref.shape, ref.dtype, parts), ref)


def test_ties_need_the_division() -> None:
    """The scale of the tie cases above: the product alone rounds some exact ties the other way (so
    the cases check the division's lanes)."""
    from lamina.dialects.tpu.quantize import round_half_away

    s = 49 / 1024
    x = ((np.arange(-200, 200) + 0.5) * s).astype(np.float32).astype(np.float64)
    assert np.any(round_half_away(x / s) != round_half_away(x * (1.0 / s)))


def test_taken_for_a_per_tensor_f32_cast_only() -> None:
    o = _cast((1, 3, 8, 8), False, 0.02, 0)
    assert select(o, HOST).name == "cast-quantize-f32"
    per_axis = op("tpu.Cast", [t((2, 3), "f32")], t((2, 3), "!quant.uniform<i8:f32:1, {0.1, 0.2, 0.3}>"))
    assert not QuantizeF32().matches(per_axis, HOST)
    f16 = op("tpu.Cast", [t((2, 3), "f16")], t((2, 3), q8(True, 0.1)))
    assert not QuantizeF32().matches(f16, HOST)
    deq = op("tpu.Cast", [t((2, 3), q8(True, 0.1))], t((2, 3), "f32"))
    assert not QuantizeF32().matches(deq, HOST)

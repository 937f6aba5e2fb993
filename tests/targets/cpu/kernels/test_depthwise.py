"""The depthwise templates (``lamina/targets/cpu/kernels/depthwise.py``) against each op's
``execute``. INT8 (:class:`Int8DepthwiseFast`): **bit for bit** over random depthwise convs
(:func:`test_gemm_int8.conv_cases`: kernel 1-5, strides 1-3 — W stride 3 is refused and stays with
``int8-depthwise`` —, dilations, pads, 1-d and 2-d, symmetric / asymmetric / uint8 inputs,
per-channel and per-tensor requant, relu and limits, extreme values, wrapping bias), plus
MobileNetV2's shapes, on the host ISA and the narrower ones of ``test_gemm_int8.ISAS``, on 1, 2 and
3 parts. Hypothesis examples are derandomized."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled
from test_gemm_f32 import ISAS as ISAS_F32
from test_gemm_f32 import Compiled as F32Compiled
from test_gemm_f32 import _empty
from test_gemm_f32 import conv_op as f32_conv_op
from test_gemm_int8 import HOST, ISA_IDS, ISAS, SETTINGS, _act, _inputs, check, conv_cases, conv_op, with_lut

from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.depthwise import DepthwiseF32Direct, Int8DepthwiseFast
from lamina.targets.cpu.kernels.gemm_int8 import Int8Depthwise
from lamina.targets.cpu.lowering import np_dtype


def no_stray_writes(tpl: Any, o: Any, x: np.ndarray, isa: Isa, nparts: int = 2) -> None:
    """The kernel writes nothing outside its output (64 canary bytes either side stay as they were)."""
    ys = tuple(o.results[0].type.shape)
    dt = np_dtype(o.results[0].type)
    n = int(np.prod(ys)) * np.dtype(dt).itemsize
    raw = np.full(n + 128, 0x5A, np.uint8)
    out = raw[64 : 64 + n].view(dt).reshape(ys)
    c = Compiled(tpl, o, isa)
    arr, keep = c.buffers([x], [out], nparts)
    for p in range(nparts):
        c.fn(arr, p, nparts)
    assert np.all(raw[:64] == 0x5A) and np.all(raw[64 + n :] == 0x5A), "a write outside the output"
    del keep


def _check_int8(o: Any, x: np.ndarray, isa: Isa, nparts: tuple[int, ...] = (1, 2, 3)) -> None:
    if o.attr("strides") is not None and list(o.attr("strides"))[-1] > 2:
        assert not Int8DepthwiseFast().matches(o, isa) and Int8Depthwise().matches(o, isa)
        return
    assert Int8DepthwiseFast().matches(o, isa)
    check(Int8DepthwiseFast(), o, x, isa, nparts=nparts)
    no_stray_writes(Int8DepthwiseFast(), o, x, isa)


@SETTINGS
@given(case=conv_cases(depthwise=True))
def test_int8_depthwise_bit_exact(case: tuple[Any, np.ndarray]) -> None:
    _check_int8(*case, HOST)


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=conv_cases(depthwise=True))
def test_int8_depthwise_narrower_isa(isa: Isa, case: tuple[Any, np.ndarray]) -> None:
    _check_int8(*case, isa, nparts=(1, 2))


@pytest.mark.parametrize(
    "c,hw,k,s",
    [
        (32, 112, 3, 1),
        (96, 112, 3, 2),
        (144, 56, 3, 2),
        (192, 28, 3, 1),
        (576, 14, 3, 2),
        (960, 7, 3, 1),
        (40, 9, 5, 1),
    ],
)
def test_int8_depthwise_mobilenet_shapes(c: int, hw: int, k: int, s: int) -> None:
    rng = np.random.default_rng(c + hw)
    p = k // 2
    o = conv_op(rng, 1, c, (hw, hw), c, (k, k), (s, s), (1, 1), [p] * 4, c, "asym", "limit", True, "small")
    assert select(o, HOST).name == Int8DepthwiseFast.name
    _check_int8(o, _act(rng, (1, c, hw, hw), True, "rand"), HOST, nparts=(1, 2))


# ---- F32 ------------------------------------------------------------------------------------------


@st.composite
def f32_depthwise(draw: Any) -> dict[str, Any]:
    c = draw(st.integers(2, 12))
    k = (draw(st.integers(1, 5)), draw(st.integers(1, 5)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = tuple(draw(st.integers(0, k[i % 2])) for i in range(4))
    hw = (draw(st.integers(1, 20)), draw(st.integers(1, 45)))
    for i in range(2):
        assume(hw[i] + pads[i] + pads[i + 2] >= (k[i] - 1) * d[i] + 1)
    return dict(
        xs=(draw(st.integers(1, 2)), c, *hw),
        k=k,
        s=s,
        d=d,
        pads=pads,
        bias=draw(st.booleans()),
        relu=draw(st.sampled_from(["", "relu", "limit"])),
        vb=draw(st.sampled_from([64, 32, 16])),
        nparts=draw(st.integers(1, 3)),
        seed=draw(st.integers(0, 2**31)),
    )


def check_f32(xs: tuple[int, ...], k: Any, s: Any, d: Any, pads: Any, bias: bool, relu: str, vb: int,
              nparts: int, seed: int) -> None:  # fmt: skip
    """The direct F32 kernel within 1e-5 of the largest output of ``execute`` (every output written:
    the buffer starts as NaN)."""
    rng = np.random.default_rng(seed)
    o, ins, ys = f32_conv_op(rng, xs, xs[1], k, s, d, list(pads), xs[1], "f32", bias, relu)
    assert DepthwiseF32Direct().matches(o, ISAS_F32[vb])
    y = _empty(ys, "f32")
    F32Compiled(DepthwiseF32Direct(), o, ISAS_F32[vb])({"input": ins[0], "output": y}, nparts)
    ref = np.asarray(o.execute(ins)[0])
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-5 * max(1.0, float(np.abs(ref).max())))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(p=f32_depthwise())
def test_f32_depthwise_matches_execute(p: dict[str, Any]) -> None:
    check_f32(**p)


@pytest.mark.parametrize(
    "c,hw,k,s",
    [(32, 112, 3, 1), (96, 112, 3, 2), (144, 56, 3, 2), (576, 14, 3, 2), (960, 7, 3, 1), (8, 9, 5, 1)],
)
def test_f32_depthwise_mobilenet_shapes(c: int, hw: int, k: int, s: int) -> None:
    check_f32((1, c, hw, hw), (k, k), (s, s), (1, 1), (k // 2,) * 4, True, "limit", 64, 2, c)
    rng = np.random.default_rng(0)
    o, _ins, _ = f32_conv_op(rng, (1, c, hw, hw), c, (k, k), (s, s), (1, 1), [k // 2] * 4, c, "f32", True, "")
    assert select(o, HOST).name == DepthwiseF32Direct.name


@pytest.mark.parametrize("hw", [9, 40], ids=["tiles", "rows"])
@pytest.mark.parametrize("isa", [HOST, ISAS[1]], ids=["host", "avx2"])
def test_int8_depthwise_fused_lut(hw: int, isa: Isa) -> None:
    """A fused ``tpu.Lut``: the kernel writes ``Lut(conv(x))`` (both epilogue forms)."""
    rng = np.random.default_rng(13)
    for out_mode, lut_signed, big in (("none", True, False), ("relu", False, False), ("none", False, True)):
        o = conv_op(
            rng,
            1,
            16,
            (hw, hw),
            16,
            (3, 3),
            (1, 1),
            (1, 1),
            [1] * 4,
            16,
            "sym",
            out_mode,
            True,
            "small",
            big=big,
        )
        x = _act(rng, (1, 16, hw, hw), True, "rand")
        prod, lut = with_lut(o, rng, lut_signed)
        assert Int8DepthwiseFast().matches(prod, isa)  # with_lut checked the fusion hook
        ref = lut.execute([prod.execute(_inputs(prod, x))[0]])[0]
        c = Compiled(Int8DepthwiseFast(), prod, isa)
        assert ("weight", "lut") in c.plan.buffers
        for n in (1, 2):
            np.testing.assert_array_equal(c([x], ref.shape, ref.dtype, n), ref)

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
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled
from test_gemm_int8 import HOST, ISA_IDS, ISAS, SETTINGS, _act, check, conv_cases, conv_op

from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.depthwise import Int8DepthwiseFast
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

"""The CPU target's fast ``tpu.Permute`` (``lamina/targets/cpu/kernels/permute.py``): over random
shapes and permutations that keep at least the last axis in place, 8-bit quantized, f32 and bf16
storage, every part of ``nparts`` in 1, 2, 3, the kernel's output equals the op's ``execute``
bit for bit; permutations that move the last axis (or none) are left to the generic template."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled, host_isa
from tpu_cases import arr, op, q8, t

from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.permute import FastPermute

HOST = host_isa()
ELEMS = {"i8": (q8(True, 0.1, 3), np.int8), "u8": (q8(False, 0.1, 3), np.uint8), "f32": ("f32", np.float32),
         "bf16": ("bf16", ml_dtypes.bfloat16)}  # fmt: skip


def permute(shape: tuple[int, ...], order: list[int], elem: str) -> Any:
    et, _ = ELEMS[elem]
    out = tuple(shape[a] for a in order)
    return op("tpu.Permute", [t(shape, et)], t(out, et), arr("order", order))


@st.composite
def cases(draw: Any) -> tuple[Any, np.ndarray]:
    rank = draw(st.integers(2, 5))
    shape = tuple(draw(st.integers(1, 6)) for _ in range(rank))
    keep = draw(st.integers(1, rank - 1))
    head = list(draw(st.permutations(range(rank - keep))))
    order = head + list(range(rank - keep, rank))
    elem = draw(st.sampled_from(sorted(ELEMS)))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    dt = ELEMS[elem][1]
    x = (
        rng.integers(0, 255, shape).astype(dt)
        if elem in ("i8", "u8")
        else rng.standard_normal(shape).astype(dt)
    )
    return permute(shape, order, elem), x


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_permute_matches_execute(case: Any) -> None:
    o, x = case
    if [int(a) for a in o.attr("order")] == list(range(x.ndim)):
        assert not FastPermute().matches(o, HOST)
        return
    assert FastPermute().matches(o, HOST)
    ref = o.execute([x])[0]
    c = Compiled(FastPermute(), o, HOST)
    for n in (1, 2, 3):
        y = c([x], ref.shape, ref.dtype, n)
        assert np.array_equal(y.view(np.uint8), np.ascontiguousarray(ref).view(np.uint8)), n


def test_heads_split_and_merge_are_taken() -> None:
    for shape in ((1, 64, 12, 32), (1, 12, 64, 32)):  # (B, S, H, D) -> (B, H, S, D) and back
        assert select(permute(shape, [0, 2, 1, 3], "i8"), HOST).name == "permute"


@pytest.mark.parametrize("order", [[0, 1, 3, 2], [0, 1, 2, 3], [3, 2, 1, 0]])
def test_moving_the_last_axis_is_left_to_the_generic_template(order: list[int]) -> None:
    assert not FastPermute().matches(permute((2, 3, 4, 5), order, "i8"), HOST)

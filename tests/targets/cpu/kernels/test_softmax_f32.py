"""The vectorized F32 softmax (lamina/targets/cpu/kernels/softmax_f32.py) against ``tpu.Softmax``'s
``execute``: random shapes and axes (the *across* schedule for an inner axis, *along* for the last),
values with -inf, +inf and NaN among them, on 1 and 3 parts, on the host, an AVX2 ``Isa(32)`` and
16-byte vectors, NaN canaries after the output. Tolerance: ``1e-6`` relative to the largest result
plus ``1e-5`` of each (sums in another order, ``exp`` within 2 ulp); NaN exactly where ``execute``
has it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
from tpu_cases import op, t

from lamina.targets.cpu.jit import host_spec, run_kernel
from lamina.targets.cpu.kernels import candidates
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.softmax_f32 import SoftmaxF32

TEMPLATE = SoftmaxF32()
ISAS = [None, Isa(32, frozenset({"avx2", "fma"})), Isa(16)]


def softmax(shape: tuple[int, ...], axis: int, log: bool = False, ft: str = "f32") -> Any:
    return op("tpu.Softmax", [t(shape, ft)], t(shape, ft), f"axis = {axis} : i64, log = {str(log).lower()}")


def _check(o: Any, x: np.ndarray, isa: Isa | None, nparts: int) -> None:
    want = np.asarray(o.execute([x.copy()])[0], np.float32)
    canary = 16
    buf = np.full(want.size + canary, np.nan, np.float32)
    buf[want.size :] = 12345.0
    got = buf[: want.size].reshape(want.shape)
    run_kernel(TEMPLATE, o, {("in", 0): np.ascontiguousarray(x), ("out", 0): got}, isa=isa, nparts=nparts)
    assert (buf[want.size :] == 12345.0).all(), "wrote past the output"
    nan = np.isnan(want)
    assert (np.isnan(got) == nan).all(), "NaN where execute has none (or the reverse)"
    scale = float(np.abs(want[~nan]).max()) if (~nan).any() else 1.0
    err = np.abs(got[~nan] - want[~nan])
    assert (err <= 1e-6 * scale + 1e-5 * np.abs(want[~nan])).all(), f"worst {err.max()}"


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_softmax_f32_is_execute(data: Any) -> None:
    rank = data.draw(st.integers(1, 4))
    shape = tuple(data.draw(st.integers(1, 9)) for _ in range(rank))
    if data.draw(st.booleans()):  # a long axis or a long inner run
        i = data.draw(st.integers(0, rank - 1))
        shape = (*shape[:i], data.draw(st.integers(10, 150)), *shape[i + 1 :])
    axis = data.draw(st.integers(-rank, rank - 1))
    o = softmax(shape, axis)
    isa = data.draw(st.sampled_from(ISAS))
    assert TEMPLATE.matches(o, isa or host_spec().isa)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = (rng.standard_normal(shape) * data.draw(st.sampled_from([1.0, 10.0, 60.0]))).astype(np.float32)
    if data.draw(st.booleans()):  # specials: -inf (weighs nothing), +inf and NaN
        flat = x.reshape(-1)
        for v in (-np.inf, np.inf, np.nan):
            k = rng.integers(0, flat.size, rng.integers(0, 3))
            flat[k] = v
    _check(o, x, isa, data.draw(st.sampled_from([1, 3])))


def test_softmax_f32_yolo_box_distribution() -> None:
    """The detector head's softmax (1, 16, 4, 8400) along 16: several chunks and a masked last one."""
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((1, 16, 4, 8400)) * 5).astype(np.float32)
    _check(softmax((1, 16, 4, 8400), 1), x, None, 2)


def test_softmax_f32_rows_all_minus_inf_are_nan() -> None:
    x = np.full((3, 20), -np.inf, np.float32)
    x[1, 3] = 2.0
    _check(softmax((3, 20), -1), x, None, 1)
    _check(softmax((20, 3), 0), np.ascontiguousarray(x.T), None, 1)


def test_softmax_f32_is_chosen_for_f32_only_and_not_log() -> None:
    isa = host_spec().isa
    assert candidates(softmax((2, 16, 5), 1), isa)[0].name == "softmax_f32"
    assert not TEMPLATE.matches(softmax((2, 16, 5), 1, log=True), isa)
    assert not TEMPLATE.matches(softmax((2, 16, 5), 1, ft="bf16"), isa)
    assert not TEMPLATE.exact  # an INT8 model's exact path keeps generic.softmax


def test_softmax_f32_exp_over_the_whole_float_range() -> None:
    """A column holding +inf counts its maximum as 0, so ``exp`` sees the values themselves: 88.5
    (finite in float32, over Cephes' clamp at 88.38), 88.8 (overflows: NaN after the division as
    in numpy), -95 (a subnormal exp)."""
    col = np.array([np.inf, 88.5, 88.8, -95.0, 1.0, -np.inf, 0.5, 3.0], np.float32)
    x = np.ascontiguousarray(np.stack([col, col[::-1]], 1).reshape(8, 2, 1) * np.ones((8, 2, 16), np.float32))
    _check(softmax((8, 2, 16), 0), x, None, 1)
    _check(softmax((2, 16, 8), -1), np.ascontiguousarray(x.transpose(1, 2, 0)), None, 1)

"""The vectorized pooling template (``lamina/targets/cpu/kernels/pool.py``) against each op's
``execute``: random ``tpu.MaxPool`` / ``tpu.AvgPool`` in F32 and INT8 (int8 / uint8 storage, zero
points, the contract's requantization), 1-d and 2-d, kernel 1-5, strides 1-3 (W stride 3 and global
pools, one output per plane, are ``generic.pool``'s), dilations, pads, ceil mode, ``count_include_pad``,
planes up to 40 wide, compiled for the host, AVX2 width and 16-byte vectors, on 1 and 3 parts.
INT8 and F32 max: bit for bit; F32 average: within 1e-5 of the largest output (sums in another
order). Hypothesis examples are derandomized."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_depthwise import no_stray_writes
from tpu_cases import arr, build, fl, op, q8, storage, t

from lamina.dialects.tpu.quantize import quantize_multiplier
from lamina.execution.kernels.geometry import pool_output_size
from lamina.targets.cpu.jit import run_kernel, spec_for
from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.pool import PoolF32Int8
from lamina.targets.cpu.lowering import np_dtype

ISAS = {"host": None, "avx2": spec_for("avx2").isa, "v16": spec_for("sse").isa}
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@st.composite
def pools(draw: Any) -> tuple[Any, np.ndarray]:
    nd = draw(st.sampled_from([2, 2, 2, 1]))
    kind = draw(st.sampled_from(["max", "avg"]))
    mode = draw(st.sampled_from(["i8", "u8", "f32"]))
    int_avg = kind == "avg" and mode != "f32"
    k = tuple(draw(st.integers(1, 5)) for _ in range(nd))
    s = tuple(draw(st.sampled_from([1, 1, 2, 2, 3])) for _ in range(nd))
    d = (1,) * nd if int_avg else tuple(draw(st.sampled_from([1, 1, 2])) for _ in range(nd))
    pads = [draw(st.integers(0, k[i % nd] - 1)) for i in range(2 * nd)]
    sp = tuple(draw(st.integers(1, 40)) for _ in range(nd))
    ceil = draw(st.booleans()) and not int_avg
    for i in range(nd):
        assume(sp[i] + pads[i] + pads[i + nd] >= (k[i] - 1) * d[i] + 1)
    out_sp, _ = pool_output_size(list(sp), (list(k), list(s), list(d), list(pads)), ceil)
    for i in range(nd):  # every window holds an input element (execute's -inf otherwise)
        for o_ in range(out_sp[i]):
            assume(any(0 <= o_ * s[i] - pads[i] + j * d[i] < sp[i] for j in range(k[i])))
    attrs = [arr("kernel_shape", k), arr("strides", s), arr("pads", pads), arr("dilations", d)]
    if ceil:
        attrs.append("ceil_mode = true")
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    n, c = draw(st.integers(1, 2)), draw(st.integers(1, 5))
    xs, ys = (n, c, *sp), (n, c, *out_sp)
    signed = mode == "i8"
    if mode == "f32":
        x, elem = fl(rng, xs, "f32"), "f32"
    else:
        x = storage(rng, xs, signed)
        extreme = draw(st.sampled_from(["random", "random", "low", "high"]))
        if extreme != "random":
            x[...] = (-128 if signed else 0) if extreme == "low" else (127 if signed else 255)
        zp = draw(st.integers(-20, 20)) if signed else draw(st.integers(0, 255))
        elem = q8(signed, 0.05, zp)
    if kind == "max":
        o = build("tpu.MaxPool", [t(xs, elem)], [t(ys, elem), "none"], ", ".join(attrs))
        return o, x
    if draw(st.booleans()) or (int_avg and any(pads)):
        attrs.append("count_include_pad = true")
    out_e = elem
    if int_avg:
        s_out = float(np.exp(rng.uniform(np.log(0.005), np.log(0.2))))
        mu, r = quantize_multiplier(0.05 / (s_out * math.prod(k)))
        attrs += [arr("multiplier", [mu]), arr("rshift", [r])]
        out_signed = draw(st.booleans())
        out_e = q8(out_signed, s_out, draw(st.integers(-10, 10)) if out_signed else draw(st.integers(0, 255)))
    return op("tpu.AvgPool", [t(xs, elem)], t(ys, out_e), ", ".join(attrs)), x


def _run(o: Any, x: np.ndarray, isa: Any, nparts: int) -> np.ndarray:
    y = np.zeros(tuple(o.results[0].type.shape), np_dtype(o.results[0].type))
    run_kernel(PoolF32Int8(), o, {("in", 0): np.ascontiguousarray(x), ("out", 0): y}, isa=isa, nparts=nparts)
    return y


@pytest.mark.parametrize("isa", list(ISAS), ids=list(ISAS))
@SETTINGS
@given(case=pools(), nparts=st.sampled_from([1, 3]))
def test_pool_matches_execute(isa: str, case: tuple[Any, np.ndarray], nparts: int) -> None:
    o, x = case
    the_isa = ISAS[isa] or spec_for(None).isa
    sw = list(o.attr("strides"))[-1]
    if sw > 2 or math.prod(o.results[0].type.shape[2:]) == 1:  # generic.pool's: W stride 3, global pools
        assert not PoolF32Int8().matches(o, the_isa)
        return
    assert PoolF32Int8().matches(o, the_isa), str(o)
    assert select(o, the_isa).name == "pool"
    want = np.asarray(o.execute([x])[0])
    got = _run(o, x, ISAS[isa], nparts)
    no_stray_writes(PoolF32Int8(), o, x, the_isa)
    if got.dtype.kind in "iu" or o.name == "tpu.MaxPool":
        np.testing.assert_array_equal(got, want, err_msg=str(o))
    else:
        tol = 1e-5 * max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(got, want, rtol=0, atol=tol, err_msg=str(o))


@pytest.mark.parametrize(
    "shape,k,s,p,kind",
    [
        ((1, 64, 112, 112), 3, 2, 1, "max"),  # ResNet's stem pool
        ((1, 32, 20, 20), 5, 1, 2, "max"),  # YOLO SPPF
        ((1, 16, 14, 14), 3, 1, 1, "avg"),  # a padded average
    ],
)
@pytest.mark.parametrize("mode", ["f32", "i8"])
def test_model_pools(shape: tuple[int, ...], k: int, s: int, p: int, kind: str, mode: str) -> None:
    rng = np.random.default_rng(0)
    elem = "f32" if mode == "f32" else q8(True, 0.05, 3)
    oh = (shape[2] + 2 * p - k) // s + 1
    ys = (*shape[:2], oh, oh)
    attrs = [arr("kernel_shape", [k, k]), arr("strides", [s, s]), arr("pads", [p] * 4)]
    x = fl(rng, shape, "f32") if mode == "f32" else storage(rng, shape, True)
    if kind == "max":
        o = build("tpu.MaxPool", [t(shape, elem)], [t(ys, elem), "none"], ", ".join(attrs))
    else:
        out_e = elem
        if mode != "f32":
            mu, r = quantize_multiplier(0.05 / (0.01 * k * k))
            attrs += [arr("multiplier", [mu]), arr("rshift", [r])]
            out_e = q8(True, 0.01, -2)
        o = op("tpu.AvgPool", [t(shape, elem)], t(ys, out_e), ", ".join(attrs))
    want = np.asarray(o.execute([x])[0])
    for nparts in (1, 2):
        got = _run(o, x, None, nparts)
        if mode == "f32" and kind == "avg":
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * float(np.max(np.abs(want))))
        else:
            np.testing.assert_array_equal(got, want)


# ---- the F32 global mean ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "xs,axes,keep",
    [
        ((1, 1280, 7, 7), [2, 3], True),  # MobileNetV2's global average
        ((2, 512, 7, 7), [-2, -1], False),
        ((1, 3, 100), [2], True),  # runs of full vector groups and a tail
        ((3, 5, 17), [1, 2], False),
        ((1, 64, 80, 80), [2, 3], True),
    ],
)
@pytest.mark.parametrize("isa", list(ISAS), ids=list(ISAS))
def test_global_mean_f32(xs: tuple[int, ...], axes: list[int], keep: bool, isa: str) -> None:
    from lamina.targets.cpu.kernels.pool import GlobalMeanF32

    nd = len(xs)
    red = {a % nd for a in axes}
    out = (
        tuple(1 if i in red else d for i, d in enumerate(xs))
        if keep
        else tuple(d for i, d in enumerate(xs) if i not in red)
    )
    ax = ("const", f"dense<[{', '.join(str(a) for a in axes)}]>", f"tensor<{len(axes)}xi64>")
    o = op(
        "tpu.Reduce",
        [t(xs, "f32"), ax],
        t(out, "f32"),
        f'mode = "ReduceMean", keepdims = {str(keep).lower()}',
    )
    the_isa = ISAS[isa] or spec_for(None).isa
    assert GlobalMeanF32().matches(o, the_isa) and not GlobalMeanF32().exact
    x = fl(np.random.default_rng(len(xs)), xs, "f32") + 0.5
    want = np.asarray(o.execute([x, np.array(axes, np.int64)])[0])
    for nparts in (1, 3):
        y = np.full(out, np.nan, np.float32)
        run_kernel(GlobalMeanF32(), o, {("in", 0): x, ("out", 0): y}, isa=ISAS[isa], nparts=nparts)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_global_mean_f32_refuses_other_reductions() -> None:
    from lamina.targets.cpu.kernels.pool import GlobalMeanF32

    isa = spec_for(None).isa
    ax = ("const", "dense<[1]>", "tensor<1xi64>")
    inner = op(
        "tpu.Reduce", [t((2, 3, 4), "f32"), ax], t((2, 4), "f32"), 'mode = "ReduceMean", keepdims = false'
    )
    summ = op("tpu.Reduce", [t((2, 3, 4), "f32"), ("const", "dense<[2]>", "tensor<1xi64>")], t((2, 3), "f32"),
              'mode = "ReduceSum", keepdims = false')  # fmt: skip
    assert not GlobalMeanF32().matches(inner, isa) and not GlobalMeanF32().matches(summ, isa)

"""The Winograd F(2x2, 3x3) F32 conv (lamina/targets/cpu/kernels/winograd_f32.py) against
``tpu.Conv``'s ``execute``: random shapes (odd and even output sizes, several blocks, partial tile
rows and vectors), pads 0 or 1 on each side, bias, ReLU and ReLU limit, batches, on 1 and 3 parts, on
the host, an AVX2 ``Isa(32)`` and 16-byte vectors, NaN in the output buffer beforehand (a pixel no
part writes fails) and canaries after it. Fused epilogues (SiLU, residual add + ReLU) through the
compiler against the interpreter. Tolerance: ``1e-4`` of the output's scale (the transforms' sums
round differently from the direct sum)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from test_lowering import _fused_ops, block_model, compile_and_run, silu_model
from tpu_cases import arr, dense, fl, op, t

from lamina.targets.cpu.jit import host_spec, run_kernel
from lamina.targets.cpu.kernels import candidates
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.winograd_f32 import WinogradF32, winograd_weights

TEMPLATE = WinogradF32()
ISAS = [None, Isa(32, frozenset({"avx2", "fma"})), Isa(16)]


def conv(
    rng: np.random.Generator, xs: tuple[int, ...], cout: int, pads: list[int], bias: bool, relu: str
) -> tuple[Any, list[Any]]:
    ws = (cout, xs[1], 3, 3)
    w = fl(rng, ws, "f32")
    b = fl(rng, (cout,), "f32") if bias else None
    attrs = [arr("strides", [1, 1]), arr("pads", pads)]
    if relu:
        attrs.append("do_relu = true")
    if relu == "limit":
        attrs.append("relu_limit = 0.75")
    ys = (xs[0], cout, xs[2] + pads[0] + pads[2] - 2, xs[3] + pads[1] + pads[3] - 2)
    operands: list[Any] = [
        t(xs, "f32"),
        ("const", dense(w), t(ws, "f32")),
        ("const", dense(b), t((cout,), "f32")) if b is not None else None,
    ]
    return op("tpu.Conv", operands, t(ys, "f32"), ", ".join(attrs)), [w, b]


def _check(o: Any, wb: list[Any], x: np.ndarray, isa: Isa | None, nparts: int) -> None:
    want = np.asarray(o.execute([x, *wb])[0], np.float32)
    buf = np.full(want.size + 32, np.nan, np.float32)
    buf[want.size :] = 777.0
    got = buf[: want.size].reshape(want.shape)
    run_kernel(TEMPLATE, o, {("in", "input"): x, ("out", "output"): got}, isa=isa, nparts=nparts)
    assert (buf[want.size :] == 777.0).all(), "wrote past the output"
    scale = max(float(np.abs(want).max()), 1e-30)
    err = np.abs(got - want)
    assert not np.isnan(got).any(), f"{int(np.isnan(got).sum())} pixels not written"
    assert err.max() <= 1e-4 * scale, f"worst {err.max()} of scale {scale}"


def test_weight_transform_is_g_g_gt() -> None:
    w = np.random.default_rng(0).standard_normal((3, 2, 3, 3)).astype(np.float32)
    g = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    u = winograd_weights(w)
    assert u.shape == (16, 3, 2)
    for o in range(3):
        for i in range(2):
            assert np.allclose(u[:, o, i].reshape(4, 4), g @ w[o, i] @ g.T, atol=1e-6)


@settings(max_examples=50, deadline=None)
@given(data=st.data())
def test_winograd_f32_is_execute(data: Any) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    n = data.draw(st.integers(1, 2))
    cin = data.draw(st.integers(1, 12))
    cout = data.draw(st.integers(1, 20))
    h, w = data.draw(st.integers(2, 23)), data.draw(st.integers(2, 45))
    pads = [data.draw(st.integers(0, 1)) for _ in range(4)]
    if h + pads[0] + pads[2] < 4 or w + pads[1] + pads[3] < 4:
        return  # fewer than 2 output rows / columns: refused (and not worth a Winograd tile)
    o, wb = conv(
        rng,
        (n, cin, h, w),
        cout,
        pads,
        data.draw(st.booleans()),
        data.draw(st.sampled_from(["", "relu", "limit"])),
    )
    x = fl(rng, (n, cin, h, w), "f32")
    _check(o, wb, x, data.draw(st.sampled_from(ISAS)), data.draw(st.sampled_from([1, 2, 3])))


@pytest.mark.parametrize("isa", [None, Isa(32, frozenset({"avx2", "fma"}))])
def test_winograd_f32_many_blocks_and_channels(isa: Isa | None) -> None:
    """YOLO-head-like: 80x80 output (40 tiles a row), several tile-row blocks, 40 channels."""
    rng = np.random.default_rng(3)
    o, wb = conv(rng, (1, 40, 80, 80), 21, [1, 1, 1, 1], True, "")
    _check(o, wb, fl(rng, (1, 40, 80, 80), "f32"), isa, 2)


def test_winograd_f32_is_chosen_where_it_wins() -> None:
    isa = host_spec().isa
    rng = np.random.default_rng(0)
    big, _ = conv(rng, (1, 64, 40, 40), 64, [1, 1, 1, 1], False, "")
    assert candidates(big, isa)[0].name == "winograd_f32"
    few, _ = conv(rng, (1, 8, 40, 40), 16, [1, 1, 1, 1], False, "")  # 8 input channels: conv_f32's
    assert candidates(few, isa)[0].name == "conv_f32"
    wide, _ = conv(rng, (1, 1024, 14, 14), 16, [1, 1, 1, 1], False, "")  # V fits only 2 tile rows
    assert not TEMPLATE.matches(wide, isa)
    strided = op(
        "tpu.Conv",
        [
            t((1, 64, 20, 20), "f32"),
            ("const", dense(np.ones((64, 64, 3, 3), np.float32)), t((64, 64, 3, 3), "f32")),
            None,
        ],
        t((1, 64, 10, 10), "f32"),
        f"{arr('strides', [2, 2])}, {arr('pads', [1, 1, 1, 1])}",
    )
    assert not TEMPLATE.matches(strided, isa)


@pytest.mark.parametrize("isa", ["host", "avx2"])
def test_winograd_f32_fused_silu_and_residual(isa: str, tmp_path: Any) -> None:
    """A SiLU and a residual add + ReLU in the epilogue, compiled and run against the interpreter."""
    text = silu_model(np.random.default_rng(5), 32, 11, 40, 3)
    got, want, kernels = compile_and_run(text, "F32", isa, tmp_path, 2)
    assert np.abs(got - want).max() <= 1e-4 * float(np.abs(want).max())
    assert _fused_ops(kernels) == [["tpu.Conv", "tpu.SiLU"]] * 2
    assert kernels[0]["template"] == "winograd_f32"
    text = block_model(np.random.default_rng(6), 32, 12, 32, 1, False, False, "relu")
    got, want, kernels = compile_and_run(text, "F32", isa, tmp_path, 1)
    assert np.abs(got - want).max() <= 1e-4 * float(np.abs(want).max())
    assert _fused_ops(kernels) == [["tpu.Conv", "tpu.Add", "tpu.Relu"]]
    assert {k["template"] for k in kernels if k["ops"][0] == "tpu.Conv"} == {"winograd_f32"}


@pytest.mark.parametrize("nparts", [2, 3])
def test_winograd_f32_one_block_parts_split_panels(nparts: int) -> None:
    """ResNet-like 14x14: one block of tile rows, fewer (image, block) pairs than parts: the parts
    split its panels of output channels (and the last, partial panel)."""
    rng = np.random.default_rng(5)
    o, wb = conv(rng, (1, 24, 14, 14), 45, [1, 1, 1, 1], True, "relu")
    _check(o, wb, fl(rng, (1, 24, 14, 14), "f32"), None, nparts)

"""Integer (quantized-model), signal-processing and miscellaneous ``top`` ops against onnxruntime on
random inputs (the node suite covers their corner cases)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from lamina.execution import Interpreter  # noqa: E402
from lamina.frontends.onnx import import_onnx  # noqa: E402
from lamina.frontends.onnx.testing import run_onnxruntime, single_node_model  # noqa: E402

RNG = np.random.default_rng(11)


def _compare(op_type, inputs, attrs=None, feeds=(), n_outputs=1, opset=18, exact=False):  # type: ignore[no-untyped-def]
    init = [k for k in inputs if k not in feeds and inputs[k] is not None]
    model = single_node_model(op_type, inputs, attrs, n_outputs=n_outputs, initializers=init, opset=opset)
    fd = {k: inputs[k] for k in feeds}
    try:
        ref = run_onnxruntime(model, fd)
    except Exception as e:  # an op this onnxruntime build does not implement
        pytest.skip(f"onnxruntime cannot run {op_type}: {str(e)[:80]}")
    got = Interpreter(import_onnx(model)).run(fd)
    for k, r in ref.items():
        assert got[k].shape == r.shape and got[k].dtype == r.dtype, (k, got[k].shape, r.shape)
        if exact:
            np.testing.assert_array_equal(got[k], r)
        else:
            np.testing.assert_allclose(got[k], r, rtol=1e-4, atol=1e-4)


def test_matmul_integer() -> None:
    a = RNG.integers(0, 255, (3, 5, 7)).astype(np.uint8)
    b = RNG.integers(0, 255, (7, 4)).astype(np.uint8)
    _compare(
        "MatMulInteger", {"a": a, "b": b, "az": np.uint8(12), "bz": np.uint8(130)}, feeds=("a",), exact=True
    )


def test_conv_integer_per_channel_zero_points() -> None:
    x = RNG.integers(0, 255, (1, 3, 8, 8)).astype(np.uint8)
    w = RNG.integers(0, 255, (4, 3, 3, 3)).astype(np.uint8)
    _compare(
        "ConvInteger",
        {"x": x, "w": w, "xz": np.uint8(100), "wz": np.uint8(128)},
        {"pads": [1, 1, 1, 1], "strides": [2, 1]},
        feeds=("x",),
        exact=True,
    )


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_qlinear_matmul(dtype: type) -> None:
    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (2, 4, 6)).astype(dtype)
    b = RNG.integers(info.min, info.max, (6, 5)).astype(dtype)
    zp = dtype(3)
    ins = {
        "a": a,
        "sa": np.float32(0.02),
        "za": zp,
        "b": b,
        "sb": np.float32(0.03),
        "zb": zp,
        "sy": np.float32(0.5),
        "zy": zp,
    }
    _compare("QLinearMatMul", ins, feeds=("a",), exact=True)


def test_qlinear_conv_per_channel() -> None:
    """7-bit weights (as quantizers emit with reduce_range): with full-range int8 weights,
    onnxruntime's u8s8 AVX2 kernel saturates its int16 pair sums and differs from the ONNX
    reference (which Lamina matches exactly)."""
    x = RNG.integers(0, 255, (1, 4, 7, 7)).astype(np.uint8)
    w = RNG.integers(-63, 63, (6, 4, 3, 3)).astype(np.int8)
    ins = {
        "x": x,
        "sx": np.float32(0.01),
        "zx": np.uint8(120),
        "w": w,
        "sw": RNG.uniform(0.001, 0.01, 6).astype(np.float32),
        "zw": np.zeros(6, np.int8),
        "sy": np.float32(0.2),
        "zy": np.uint8(100),
        "b": RNG.integers(-500, 500, 6).astype(np.int32),
    }
    _compare("QLinearConv", ins, {"pads": [1, 1, 1, 1]}, feeds=("x",), exact=True)


def test_dynamic_quantize_linear() -> None:
    x = RNG.standard_normal((3, 17)).astype(np.float32)
    _compare("DynamicQuantizeLinear", {"x": x}, n_outputs=3, feeds=("x",), exact=True)


@pytest.mark.parametrize(("inverse", "onesided"), [(0, 0), (0, 1), (1, 0)])
def test_dft(inverse: int, onesided: int) -> None:
    x = RNG.standard_normal((2, 16, 1 if onesided else 2)).astype(np.float32)
    _compare("DFT", {"x": x}, {"inverse": inverse, "onesided": onesided, "axis": 1}, feeds=("x",), opset=17)


def test_stft_with_hann_window() -> None:
    x = RNG.standard_normal((1, 64, 1)).astype(np.float32)
    n = 16
    win = (np.sin(np.pi * np.arange(n) / n) ** 2).astype(np.float32)
    _compare(
        "STFT",
        {"x": x, "step": np.array(8, np.int64), "win": win, "len": np.array(n, np.int64)},
        {"onesided": 1},
        feeds=("x",),
        opset=17,
    )


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op: str, periodic: int) -> None:
    _compare(op, {"n": np.array(10, np.int64)}, {"periodic": periodic}, opset=17)


def test_unique_unsorted_with_axis() -> None:
    x = np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4], [1, 0, 0]], np.float32)
    _compare("Unique", {"x": x}, {"axis": 0, "sorted": 0}, n_outputs=4, feeds=("x",), opset=11, exact=True)


def test_col2im() -> None:
    x = RNG.standard_normal((1, 2 * 4, 12)).astype(np.float32)  # C=2, block 2x2, 3x4 blocks
    ins = {"x": x, "img": np.array([4, 5], np.int64), "blk": np.array([2, 2], np.int64)}
    _compare("Col2Im", ins, feeds=("x",))


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(align: int) -> None:
    theta = RNG.standard_normal((2, 2, 3)).astype(np.float32)
    ins = {"theta": theta, "size": np.array([2, 3, 5, 6], np.int64)}
    _compare("AffineGrid", ins, {"align_corners": align}, feeds=("theta",), opset=20)


def test_det() -> None:
    x = RNG.standard_normal((3, 4, 4)).astype(np.float32)
    _compare("Det", {"x": x}, feeds=("x",))


@pytest.mark.parametrize("mask_shape", [None, (5,), (1, 1, 1, 5), (3, 5), (1, 2, 3, 5)])
def test_attention_causal_mask_broadcasts(mask_shape: tuple[int, ...] | None) -> None:
    """``is_causal`` with a mask of any form the spec allows ("broadcastable to (B, H, Sq, Skv)":
    onnxruntime takes only masks whose rank is 2-4 and whose Sq axis is full, and the ONNX reference
    fails on the others too): the (Sq, Skv) causal bias, aligned upper-left, plus the mask, against a
    numpy softmax. Tolerance 1e-5 relative (float32 sums in another order)."""
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)))
    inputs = {"q": q, "k": k, "v": v}
    if mask_shape is not None:
        inputs["m"] = rng.standard_normal(mask_shape).astype(np.float32)
    model = single_node_model("Attention", inputs, {"is_causal": 1}, opset=23)
    got = Interpreter(import_onnx(model)).run(inputs)
    bias = np.where(np.triu(np.ones((3, 5), bool), 1), -np.inf, 0.0)
    if mask_shape is not None:
        bias = bias + inputs["m"]
    s = q @ k.transpose(0, 1, 3, 2) / 2.0 + bias
    p = np.exp(s - s.max(-1, keepdims=True))
    want = (p / p.sum(-1, keepdims=True)) @ v
    np.testing.assert_allclose(next(iter(got.values())), want, rtol=1e-5, atol=1e-6)

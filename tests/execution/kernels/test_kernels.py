"""The fast kernels of :mod:`lamina.execution.kernels` equal their contracts (the ``top`` ops'
``execute``) on random shapes, strides, pads, dilations, groups and auto_pad modes.

Tolerances (float32): convolution rtol 1e-4, atol 1e-4 x sqrt(taps) (the GEMM sums in another order);
pooling exact; LayerNorm and Softmax rtol 1e-5, atol 1e-6."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")

from lamina.dialects.top.base import F, I
from lamina.dialects.top.nn import ConvOp, LayerNormOp, MaxPoolOp, SoftmaxOp
from lamina.execution.kernels.geometry import (
    conv_output_size,
    conv_pads,
    pool_output_size,
    window_geometry,
)
from lamina.frontends.onnx import import_onnx
from lamina.frontends.onnx.testing import single_node_model

AUTO_PADS = ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"]


def _op(
    cls: type, op_type: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any], n_outputs: int = 1
) -> Any:
    """The ``cls`` op of a one-node ONNX model whose inputs are all graph inputs."""
    module = import_onnx(single_node_model(op_type, inputs, attrs, n_outputs=n_outputs))
    return next(module.walk_ops(cls))


@st.composite
def conv_cases(draw: Any) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    nd = draw(st.sampled_from([1, 2, 2, 2, 3]))
    kind = draw(st.sampled_from(["dense", "depthwise", "grouped"]))
    g = 1 if kind == "dense" else draw(st.integers(2, 4))
    cg = 1 if kind == "depthwise" else draw(st.integers(1, 3))
    mg = 1 if kind == "depthwise" else draw(st.integers(1, 3))
    k = [draw(st.integers(1, 3)) for _ in range(nd)]
    s = [draw(st.integers(1, 3)) for _ in range(nd)]
    d = [draw(st.integers(1, 2)) for _ in range(nd)]
    p = [draw(st.integers(0, 2)) for _ in range(2 * nd)]
    auto = draw(st.sampled_from(AUTO_PADS))
    sp = [(k[i] - 1) * d[i] + 1 + draw(st.integers(0, 6 if nd < 3 else 2)) for i in range(nd)]
    n = draw(st.integers(1, 2))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    x = rng.standard_normal((n, g * cg, *sp)).astype(np.float32)
    w = rng.standard_normal((g * mg, cg, *k)).astype(np.float32)
    b = rng.standard_normal(g * mg).astype(np.float32)
    attrs: dict[str, Any] = {"kernel_shape": k, "strides": s, "dilations": d, "group": g}
    if auto == "NOTSET":
        attrs["pads"] = p
    else:
        attrs["auto_pad"] = auto
    return {"x": x, "w": w, "b": b}, attrs


@settings(max_examples=120, deadline=None)
@given(case=conv_cases(), bias=st.booleans(), relu=st.sampled_from([0, 1, 6]))
def test_conv_kernel_equals_contract(case: tuple, bias: bool, relu: int) -> None:
    ins, attrs = case
    if not bias:
        ins = {"x": ins["x"], "w": ins["w"]}
    op = _op(ConvOp, "Conv", ins, attrs)
    if relu:
        op.properties["do_relu"] = I(1)
        op.properties["relu_limit"] = F(float(relu) if relu > 1 else -1.0)
    args = [ins["x"], ins["w"], ins.get("b")]
    want = op.execute(args)[0]
    step = op.executor()
    taps = int(np.prod(ins["w"].shape[1:]))
    for _ in range(2):  # the second run reuses the cached plan and scratch buffers
        got = step(args)[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.sqrt(taps))
    assert op.infer_shapes()[0].shape == want.shape  # shape inference agrees with the contract


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_max_pool_kernel_equals_contract(data: Any) -> None:
    nd = data.draw(st.sampled_from([1, 2, 2, 3]))
    k = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    s = [data.draw(st.integers(1, 3)) for _ in range(nd)]
    d = [data.draw(st.integers(1, 2)) for _ in range(nd)]
    p = [data.draw(st.integers(0, (k[i % nd] - 1) * d[i % nd] // 2)) for i in range(2 * nd)]
    auto = data.draw(st.sampled_from(AUTO_PADS))
    ceil = data.draw(st.integers(0, 1))
    sp = [(k[i] - 1) * d[i] + 1 + data.draw(st.integers(0, 5)) for i in range(nd)]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = rng.standard_normal((2, 3, *sp)).astype(np.float32)
    attrs: dict[str, Any] = {"kernel_shape": k, "strides": s, "dilations": d, "ceil_mode": ceil}
    if auto == "NOTSET":
        attrs["pads"] = p
    else:
        attrs["auto_pad"] = auto
    op = _op(MaxPoolOp, "MaxPool", {"x": x}, attrs)
    want = op.execute([x])[0]
    step = op.executor()
    for _ in range(2):
        got = step([x])[0]
        np.testing.assert_array_equal(got, want)
    assert op.infer_shapes()[0].shape == want.shape


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    axis_pick=st.integers(0, 3),
    seed=st.integers(0, 2**31),
    bias=st.booleans(),
)
def test_layer_norm_kernel_equals_contract(shape: list[int], axis_pick: int, seed: int, bias: bool) -> None:
    rng = np.random.default_rng(seed)
    axis = axis_pick % len(shape) - (len(shape) if axis_pick % 2 else 0)
    x = rng.standard_normal(shape).astype(np.float32) * 3 + 1
    norm_shape = shape[axis:]
    w = rng.standard_normal(norm_shape).astype(np.float32)
    ins = {"x": x, "w": w}
    if bias:
        ins["b"] = rng.standard_normal(norm_shape).astype(np.float32)
    op = _op(LayerNormOp, "LayerNormalization", ins, {"axis": axis}, n_outputs=1)
    args = [x, w, ins.get("b")]
    want = op.execute(args)[0]
    got = op.executor()(args)[0]
    np.testing.assert_array_equal(got, want)  # bit for bit: the NPU's LayerNorm is held to both


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    axis_pick=st.integers(0, 7),
    seed=st.integers(0, 2**31),
)
def test_softmax_inplace_kernel_equals_contract(shape: list[int], axis_pick: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    axis = axis_pick % len(shape) - (len(shape) if axis_pick >= 4 else 0)
    x = (rng.standard_normal(shape) * 5).astype(np.float32)
    op = _op(SoftmaxOp, "Softmax", {"x": x}, {"axis": axis})
    want = op.execute([x.copy()])[0]
    buf = x.copy()
    got = op.inplace_executor(0)([buf])[0]
    assert got is buf  # computed into its input
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# ---- geometry ----------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(
    in_sz=st.integers(1, 40),
    k=st.integers(1, 7),
    s=st.integers(1, 4),
    d=st.integers(1, 3),
    auto=st.sampled_from(["SAME_UPPER", "SAME_LOWER"]),
)
def test_same_padding_gives_ceil_of_input_over_stride(in_sz: int, k: int, s: int, d: int, auto: str) -> None:
    geo = window_geometry([in_sz], [k], [s], [d], None, auto)
    lo, hi = geo[3]
    assert abs(lo - hi) <= 1 and (lo <= hi if auto == "SAME_UPPER" else lo >= hi)
    if (k - 1) * d + 1 <= in_sz + lo + hi:
        assert conv_output_size([in_sz], geo) == [-(-in_sz // s)]


@settings(max_examples=300, deadline=None)
@given(
    in_sz=st.integers(1, 40),
    k=st.integers(1, 5),
    s=st.integers(1, 4),
    d=st.integers(1, 2),
    p=st.tuples(st.integers(0, 2), st.integers(0, 2)),
)
def test_pool_sizes_floor_and_ceil(in_sz: int, k: int, s: int, d: int, p: tuple[int, int]) -> None:
    ek = (k - 1) * d + 1
    if ek > in_sz + sum(p) or max(p) >= ek:  # the window must fit; pads smaller than the window
        return
    geo = window_geometry([in_sz], [k], [s], [d], list(p), "NOTSET")
    (floor,), (extra,) = pool_output_size([in_sz], geo, False)
    (ceil,), (cextra,) = pool_output_size([in_sz], geo, True)
    assert floor == conv_output_size([in_sz], geo)[0] and extra == 0
    assert floor <= ceil <= floor + 1
    assert (ceil - 1) * s < in_sz + p[0]  # the last window starts inside the input or its begin pad
    assert (ceil - 1) * s + ek == in_sz + sum(p) + cextra or cextra == 0


def test_valid_and_notset_pads() -> None:
    assert conv_pads("VALID", [5, 5], [3, 3], [1, 1], [1, 1], [1, 1, 1, 1]) == [0, 0, 0, 0]
    assert conv_pads("NOTSET", [5, 5], [3, 3], [1, 1], [1, 1], None) == [0, 0, 0, 0]
    assert conv_pads("NOTSET", [5, 5], [3, 3], [1, 1], [1, 1], (1, 2, 3, 4)) == [1, 2, 3, 4]
    assert conv_pads("SAME_UPPER", [5], [4], [1], [1], None) == [1, 2]
    assert conv_pads("SAME_LOWER", [5], [4], [1], [1], None) == [2, 1]

"""The interpreter's speed machinery keeps the reference semantics: convolution fast paths (1x1,
im2col with one strided copy, depthwise phase planes), the MaxPool tap loop, in-place execution of
single consumers, constants materialized at plan time, and import-time folding of shape chains."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from lamina.execution import Interpreter  # noqa: E402
from lamina.frontends.onnx import import_onnx  # noqa: E402
from lamina.frontends.onnx.testing import run_onnxruntime, single_node_model  # noqa: E402
from lamina.ir.types import RankedTensorType  # noqa: E402

CONV_CASES = [
    # (C, M, H, W, k, strides, pads, dilations, group)
    (8, 16, 9, 9, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),  # 1x1: GEMM on the input
    (8, 16, 9, 9, (1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),  # strided 1x1
    (8, 16, 9, 11, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),  # im2col
    (3, 8, 15, 13, (7, 5), (2, 3), (3, 2, 1, 0), (1, 1), 1),  # asymmetric pads, strides
    (4, 6, 12, 12, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),  # dilated
    (16, 16, 10, 10, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 16),  # depthwise
    (16, 16, 11, 9, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 16),  # depthwise, stride 2, odd sizes
    (12, 12, 13, 10, (5, 3), (2, 1), (2, 0, 1, 1), (1, 2), 12),  # depthwise, mixed
    (8, 12, 9, 9, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),  # grouped: generic path
]


@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_fast_paths_match_onnxruntime(case: tuple, bias: bool) -> None:
    c, m, h, w, k, s, p, d, g = case
    rng = np.random.default_rng(sum(case[:4]))
    x = rng.standard_normal((2, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((m, c // g, *k)).astype(np.float32)
    ins = {"x": x, "w": wt}
    if bias:
        ins["b"] = rng.standard_normal(m).astype(np.float32)
    attrs = {"kernel_shape": list(k), "strides": list(s), "pads": list(p), "dilations": list(d), "group": g}
    model = single_node_model("Conv", ins, attrs, initializers=[n for n in ins if n != "x"])
    interp = Interpreter(import_onnx(model))
    ref = run_onnxruntime(model, {"x": x})["y0"]
    for _ in range(2):  # the second run reuses the cached geometry and scratch buffers
        got = interp.run({"x": x})["y0"]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    # a different input of the same shape: no stale state from the scratch buffers
    x2 = rng.standard_normal(x.shape).astype(np.float32)
    np.testing.assert_allclose(
        interp.run({"x": x2})["y0"], run_onnxruntime(model, {"x": x2})["y0"], rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
        {"kernel_shape": [2, 3], "dilations": [2, 1]},
        {"kernel_shape": [5, 5], "strides": [1, 1], "pads": [2, 2, 2, 2]},
    ],
)
def test_maxpool_tap_loop_matches_onnxruntime(attrs: dict) -> None:
    x = np.random.default_rng(0).standard_normal((1, 3, 10, 11)).astype(np.float32)
    model = single_node_model("MaxPool", {"x": x}, attrs)
    got = Interpreter(import_onnx(model)).run({"x": x})["y0"]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})["y0"])


def _branchy_model() -> onnx.ModelProto:
    """conv -> relu -> (add with x) -> sigmoid; the relu output is also a graph output, and the
    conv output feeds two consumers: none of those may be overwritten in place."""
    rng = np.random.default_rng(4)
    w = numpy_helper.from_array(rng.standard_normal((3, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Neg", ["c"], ["n"], name="neg"),  # second use of c
        helper.make_node("Add", ["r", "n"], ["a"], name="add"),  # r is also an output
        helper.make_node("Sigmoid", ["a"], ["s"], name="sig"),  # a: single use, fresh
        helper.make_node("Mul", ["s", "x"], ["y"], name="mul"),
    ]
    vi = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 3, 6, 6]) for n in ("x", "r", "y")]
    g = helper.make_graph(nodes, "g", [vi[0]], vi[1:], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_in_place_steps_keep_results_and_weights_intact() -> None:
    model = _branchy_model()
    interp = Interpreter(import_onnx(model))
    replaced = [s[4].name for s, f in zip(interp.plan, interp.fast_plan) if s[0] is not f[0]]
    assert "top.Sigmoid" in replaced  # its input 'a' is fresh and used once
    assert "top.Relu" not in replaced  # 'c' has two uses
    x = np.random.default_rng(5).standard_normal((1, 3, 6, 6)).astype(np.float32)
    ref = run_onnxruntime(model, {"x": x})
    x_copy = x.copy()
    weights = {s: v.copy() for s, v in interp._consts if isinstance(v, np.ndarray)}
    for _ in range(3):
        fast = interp.run({"x": x})
        for k in ("r", "y"):
            np.testing.assert_allclose(fast[k], ref[k], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(x, x_copy)  # inputs are never written
    for s, v in interp._consts:
        if s in weights:
            np.testing.assert_array_equal(v, weights[s])
    dumped = interp.run({"x": x}, dump_all=True)
    np.testing.assert_allclose(dumped["y"], fast["y"], rtol=1e-6)
    np.testing.assert_allclose(dumped["c"], -dumped["n"], rtol=1e-6)


def test_profile_reports_op_types() -> None:
    interp = Interpreter(import_onnx(_branchy_model()))
    prof = interp.profile({"x": np.ones((1, 3, 6, 6), np.float32)})
    names = {n for n, _, _ in prof}
    assert {"top.Conv", "top.Relu", "top.Sigmoid"} <= names
    assert all(t >= 0 and n >= 1 for _, t, n in prof)


def test_shape_chain_is_folded_at_import() -> None:
    """Shape -> Gather -> Add -> Div -> Slice (how torch exports ``chunk``) gets static types."""
    nodes = [
        helper.make_node("Shape", ["x"], ["shp"]),
        helper.make_node("Gather", ["shp", "one"], ["dim"], axis=0),
        helper.make_node("Add", ["dim", "one"], ["d1"]),
        helper.make_node("Div", ["d1", "two"], ["half"]),
        helper.make_node("Slice", ["x", "zero", "half", "one"], ["y"]),
    ]
    inits = [
        numpy_helper.from_array(np.array([1], np.int64), "one"),
        numpy_helper.from_array(np.array([2], np.int64), "two"),
        numpy_helper.from_array(np.array([0], np.int64), "zero"),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 5, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    module = import_onnx(m, shape_inference=False)
    sl = next(op for op in module.walk_ops() if op.name == "top.Slice")
    assert isinstance(sl.results[0].type, RankedTensorType) and sl.results[0].type.shape == (1, 3, 3)
    x = np.arange(15, dtype=np.float32).reshape(1, 5, 3)
    np.testing.assert_array_equal(Interpreter(module).run([x])["y"], x[:, :3])


def test_non_constant_slice_bounds_stay_dynamic() -> None:
    """Slice ends computed from a runtime input must not be guessed from zeros."""
    nodes = [helper.make_node("Slice", ["x", "starts", "ends"], ["y"])]
    g = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
            helper.make_tensor_value_info("ends", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([1], np.int64), "starts")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    module = import_onnx(m, shape_inference=False)
    sl = next(op for op in module.walk_ops() if op.name == "top.Slice")
    t = sl.results[0].type
    assert not (isinstance(t, RankedTensorType) and t.has_static_shape)
    out = Interpreter(module).run([np.arange(6, dtype=np.float32), np.array([4], np.int64)])["y"]
    np.testing.assert_array_equal(out, [1, 2, 3])

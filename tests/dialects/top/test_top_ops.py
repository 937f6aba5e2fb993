"""Per-op checks of the ``top`` dialect: reference execution against onnxruntime on small random
inputs (rtol 1e-4 / atol 1e-5 for float32 unless stated), and shape inference against the shapes the
execution produces."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lamina.dialects.top import ALL_OPS, TOP
from lamina.dialects.top.base import I, TopOp
from lamina.execution import Interpreter
from lamina.frontends.onnx import import_onnx
from lamina.frontends.onnx.testing import run_onnxruntime, single_node_model
from lamina.ir.context import Context
from lamina.ir.types import RankedTensorType, UnrankedTensorType

ort = pytest.importorskip("onnxruntime")

rng = np.random.default_rng(0)


def f32(*shape: int) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def pos(*shape: int) -> np.ndarray:
    return (rng.random(shape) + 0.5).astype(np.float32)


def i64(values: Any) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


# (id, op_type, inputs, attrs, initializers, n_outputs, opset, tolerance)
CASES: list[tuple[str, str, dict, dict, tuple, int, int, float]] = [
    ("relu", "Relu", {"x": f32(2, 3, 4)}, {}, (), 1, 18, 1e-5),
    ("sigmoid", "Sigmoid", {"x": f32(3, 5)}, {}, (), 1, 18, 1e-5),
    ("tanh", "Tanh", {"x": f32(3, 5)}, {}, (), 1, 18, 1e-5),
    ("erf", "Erf", {"x": f32(4, 6) * 2}, {}, (), 1, 18, 1e-5),
    ("gelu_tanh", "Gelu", {"x": f32(4, 6)}, {"approximate": "tanh"}, (), 1, 20, 1e-5),
    ("leakyrelu", "LeakyRelu", {"x": f32(4, 6)}, {"alpha": 0.2}, (), 1, 18, 1e-5),
    ("hardswish", "HardSwish", {"x": f32(4, 6) * 4}, {}, (), 1, 18, 1e-5),
    ("add_broadcast", "Add", {"a": f32(2, 3, 4), "b": f32(4)}, {}, (), 1, 18, 1e-6),
    ("sub", "Sub", {"a": f32(2, 3), "b": f32(2, 1)}, {}, (), 1, 18, 1e-6),
    ("div", "Div", {"a": f32(2, 3), "b": pos(3)}, {}, (), 1, 18, 1e-6),
    ("div_int", "Div", {"a": i64([[-7, 7], [9, -9]]), "b": i64([2, 4])}, {}, (), 1, 18, 0),
    ("pow", "Pow", {"a": pos(3, 4), "b": f32(4)}, {}, (), 1, 18, 1e-5),
    ("mod_int", "Mod", {"a": i64([-7, 7, 9, -9]), "b": i64([2, -4, 4, 5])}, {}, (), 1, 18, 0),
    ("where", "Where", {"c": rng.random((3, 4)) > 0.5, "a": f32(3, 4), "b": f32(4)}, {}, (), 1, 18, 0),
    ("greater", "Greater", {"a": f32(3, 4), "b": f32(3, 1)}, {}, (), 1, 18, 0),
    (
        "clip",
        "Clip",
        {"x": f32(3, 4), "lo": np.float32(-0.5), "hi": np.float32(0.5)},
        {},
        ("lo", "hi"),
        1,
        18,
        0,
    ),
    ("cast_f_to_i", "Cast", {"x": f32(3, 4) * 10}, {"to": 6}, (), 1, 18, 0),
    ("matmul_batched", "MatMul", {"a": f32(2, 3, 4, 5), "b": f32(5, 6)}, {}, (), 1, 18, 1e-5),
    (
        "gemm",
        "Gemm",
        {"a": f32(4, 3), "b": f32(5, 4), "c": f32(5)},
        {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0},
        ("b", "c"),
        1,
        18,
        1e-5,
    ),
    (
        "conv_pads_strides",
        "Conv",
        {"x": f32(1, 3, 9, 9), "w": f32(4, 3, 3, 3), "b": f32(4)},
        {"pads": [1, 1, 1, 1], "strides": [2, 2]},
        ("w", "b"),
        1,
        18,
        1e-4,
    ),
    (
        "conv_group_dilation",
        "Conv",
        {"x": f32(2, 4, 8, 8), "w": f32(6, 2, 3, 3)},
        {"group": 2, "dilations": [2, 2]},
        ("w",),
        1,
        18,
        1e-4,
    ),
    (
        "conv_depthwise_same",
        "Conv",
        {"x": f32(1, 4, 7, 7), "w": f32(4, 1, 3, 3)},
        {"group": 4, "auto_pad": "SAME_UPPER"},
        ("w",),
        1,
        18,
        1e-4,
    ),
    ("conv1d", "Conv", {"x": f32(1, 2, 10), "w": f32(3, 2, 4)}, {"pads": [1, 2]}, ("w",), 1, 18, 1e-4),
    (
        "convtranspose",
        "ConvTranspose",
        {"x": f32(1, 2, 4, 4), "w": f32(2, 3, 3, 3)},
        {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]},
        ("w",),
        1,
        18,
        1e-4,
    ),
    (
        "maxpool_ceil",
        "MaxPool",
        {"x": f32(1, 2, 7, 7)},
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
        (),
        1,
        18,
        0,
    ),
    (
        "avgpool_pads",
        "AveragePool",
        {"x": f32(1, 2, 6, 6)},
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0},
        (),
        1,
        18,
        1e-5,
    ),
    ("globalavgpool", "GlobalAveragePool", {"x": f32(2, 3, 5, 5)}, {}, (), 1, 18, 1e-5),
    (
        "batchnorm",
        "BatchNormalization",
        {"x": f32(2, 3, 4, 4), "s": pos(3), "b": f32(3), "m": f32(3), "v": pos(3)},
        {},
        ("s", "b", "m", "v"),
        1,
        15,
        1e-4,
    ),
    (
        "layernorm",
        "LayerNormalization",
        {"x": f32(2, 5, 8), "s": f32(8), "b": f32(8)},
        {"axis": -1},
        ("s", "b"),
        1,
        18,
        1e-4,
    ),
    (
        "instancenorm",
        "InstanceNormalization",
        {"x": f32(2, 3, 4, 4), "s": f32(3), "b": f32(3)},
        {},
        ("s", "b"),
        1,
        18,
        1e-4,
    ),
    ("softmax", "Softmax", {"x": f32(3, 7)}, {"axis": -1}, (), 1, 18, 1e-5),
    ("logsoftmax_opset11", "LogSoftmax", {"x": f32(2, 3, 4)}, {"axis": 1}, (), 1, 11, 1e-5),
    ("reshape", "Reshape", {"x": f32(2, 3, 4), "s": i64([0, -1])}, {}, ("s",), 1, 18, 0),
    ("transpose", "Transpose", {"x": f32(2, 3, 4)}, {"perm": [2, 0, 1]}, (), 1, 18, 0),
    ("concat", "Concat", {"a": f32(2, 3), "b": f32(2, 5)}, {"axis": 1}, (), 1, 18, 0),
    ("split", "Split", {"x": f32(6, 2), "s": i64([1, 5])}, {"axis": 0}, ("s",), 2, 18, 0),
    (
        "slice_neg_step",
        "Slice",
        {"x": f32(5, 6), "st": i64([4, 1]), "en": i64([0, 5]), "ax": i64([0, 1]), "sp": i64([-2, 2])},
        {},
        ("st", "en", "ax", "sp"),
        1,
        18,
        0,
    ),
    ("gather_neg", "Gather", {"x": f32(5, 4), "i": i64([[0, -1], [2, 3]])}, {"axis": 0}, ("i",), 1, 18, 0),
    (
        "gather_elements",
        "GatherElements",
        {"x": f32(3, 4), "i": i64([[0, 1, 2, 0], [2, 2, 1, 0]])},
        {"axis": 0},
        ("i",),
        1,
        18,
        0,
    ),
    ("scatter_nd", "ScatterND", {"x": f32(4, 3), "i": i64([[1], [3]]), "u": f32(2, 3)}, {}, ("i",), 1, 18, 0),
    ("reduce_mean", "ReduceMean", {"x": f32(2, 3, 4), "a": i64([1])}, {"keepdims": 0}, ("a",), 1, 18, 1e-5),
    ("reduce_sum_all", "ReduceSum", {"x": f32(2, 3, 4)}, {}, (), 1, 18, 1e-5),
    ("reduce_l2_opset13", "ReduceL2", {"x": f32(2, 3, 4)}, {"axes": [0, 2]}, (), 1, 13, 1e-5),
    ("argmax", "ArgMax", {"x": f32(3, 5)}, {"axis": 1, "keepdims": 0}, (), 1, 18, 0),
    ("topk", "TopK", {"x": f32(3, 6), "k": i64([2])}, {"axis": 1}, ("k",), 2, 18, 0),
    (
        "cumsum_excl_rev",
        "CumSum",
        {"x": f32(3, 4), "a": i64(1)},
        {"exclusive": 1, "reverse": 1},
        ("a",),
        1,
        18,
        1e-5,
    ),
    ("pad_reflect", "Pad", {"x": f32(3, 4), "p": i64([1, 2, 1, 2])}, {"mode": "reflect"}, ("p",), 1, 18, 0),
    ("expand", "Expand", {"x": f32(3, 1), "s": i64([2, 3, 4])}, {}, ("s",), 1, 18, 0),
    ("tile", "Tile", {"x": f32(2, 3), "r": i64([2, 2])}, {}, ("r",), 1, 18, 0),
    (
        "einsum",
        "Einsum",
        {"a": f32(2, 3, 4), "b": f32(2, 4, 5)},
        {"equation": "bij,bjk->bik"},
        (),
        1,
        18,
        1e-5,
    ),
    (
        "resize_linear",
        "Resize",
        {"x": f32(1, 2, 4, 4), "r": None, "s": np.array([1, 1, 2, 1.5], np.float32)},
        {"mode": "linear"},
        ("s",),
        1,
        18,
        1e-5,
    ),
    (
        "resize_nearest_sizes",
        "Resize",
        {"x": f32(1, 1, 3, 5), "r": None, "s": None, "z": i64([1, 1, 7, 4])},
        {"mode": "nearest"},
        ("z",),
        1,
        18,
        0,
    ),
    ("depthtospace", "DepthToSpace", {"x": f32(1, 8, 2, 3)}, {"blocksize": 2, "mode": "CRD"}, (), 1, 18, 0),
    (
        "range",
        "Range",
        {"a": np.array(1, np.float32), "b": np.array(4, np.float32), "c": np.array(0.5, np.float32)},
        {},
        ("a", "b", "c"),
        1,
        18,
        1e-6,
    ),
]


def _run_both(
    op_type: str, inputs: dict, attrs: dict, inits: tuple, n_out: int, opset: int
) -> tuple[Any, list, list]:
    model = single_node_model(op_type, inputs, attrs, n_out, opset, inits)
    feeds = {k: v for k, v in inputs.items() if v is not None and k not in inits}
    ref = run_onnxruntime(model, feeds)
    module = import_onnx(model, Context(handler=None))
    got = Interpreter(module).run(feeds)
    names = [f"y{i}" for i in range(n_out)]
    return module, [ref[n] for n in names], [got[n] for n in names]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_execution_matches_onnxruntime(case: tuple) -> None:
    _, op_type, inputs, attrs, inits, n_out, opset, tol = case
    _, ref, got = _run_both(op_type, inputs, attrs, inits, n_out, opset)
    for r, g in zip(ref, got):
        assert g.shape == r.shape
        assert g.dtype == r.dtype
        if tol == 0:
            np.testing.assert_array_equal(g, r)
        else:
            np.testing.assert_allclose(g, r, rtol=max(tol, 1e-6), atol=tol)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_shape_inference_matches_execution(case: tuple) -> None:
    """Each op's own ``infer_shapes`` (not the ONNX-inferred types) gives the executed shapes."""
    _, op_type, inputs, attrs, inits, n_out, opset, _ = case
    module, _, got = _run_both(op_type, inputs, attrs, inits, n_out, opset)
    ops = [
        op
        for op in module.walk_ops()
        if isinstance(op, TopOp) and op.name not in ("top.Input", "top.Weight", "top.None")
    ]
    last = ops[-1]
    types = last.infer_shapes()
    for t, g in zip(types, got):
        assert isinstance(t, RankedTensorType | UnrankedTensorType)
        if isinstance(t, RankedTensorType):
            assert tuple(t.shape) == g.shape, f"{last.name}: inferred {t} for {g.shape}"


def test_dialect_registers_every_op_with_tpu_mlir_names() -> None:
    assert len(ALL_OPS) == len(TOP.ops) >= 120
    for name in (
        "top.Conv",
        "top.MatMul",
        "top.Add",
        "top.Relu",
        "top.Reshape",
        "top.Permute",
        "top.Concat",
        "top.Weight",
        "top.Input",
        "top.None",
        "top.Interp",
        "top.Deconv",
        "top.Reduce",
        "top.If",
    ):
        assert name in TOP.ops
    for cls in ALL_OPS:
        assert issubclass(cls, TopOp)
        assert cls.name.startswith("top.")


def test_flops() -> None:
    x, w = f32(1, 3, 8, 8), f32(4, 3, 3, 3)
    module = import_onnx(
        single_node_model("Conv", {"x": x, "w": w}, {"pads": [1, 1, 1, 1]}, 1, 18, ("w",)),
        Context(handler=None),
    )
    conv = next(op for op in module.walk_ops() if op.name == "top.Conv")
    assert conv.flops() == 2 * 3 * 3 * 3 * 4 * 8 * 8
    mm = import_onnx(single_node_model("MatMul", {"a": f32(2, 5), "b": f32(5, 7)}), Context(handler=None))
    op = next(o for o in mm.walk_ops() if o.name == "top.MatMul")
    assert op.flops() == 2 * 5 * 2 * 7


def test_verifier_errors() -> None:
    from lamina.ir.diagnostics import VerifyError

    module = import_onnx(
        single_node_model("Transpose", {"x": f32(2, 3)}, {"perm": [1, 0]}), Context(handler=None)
    )
    op = next(o for o in module.walk_ops() if o.name == "top.Permute")
    op.properties["order"] = type(op.properties["order"])(op.properties["order"].element_type, [0, 0])
    with pytest.raises(VerifyError, match="not a permutation"):
        op.verify_()
    module = import_onnx(
        single_node_model("Conv", {"x": f32(1, 4, 5, 5), "w": f32(2, 4, 3, 3)}, {}, 1, 18, ("w",)),
        Context(handler=None),
    )
    conv = next(o for o in module.walk_ops() if o.name == "top.Conv")
    conv.properties["group"] = I(2)
    with pytest.raises(VerifyError, match="input channels"):
        conv.verify_()


def test_weight_holds_array_by_reference() -> None:
    w = f32(4, 3, 3, 3)
    model = single_node_model("Conv", {"x": f32(1, 3, 5, 5), "w": w}, {}, 1, 18, ("w",))
    ctx = Context(handler=None)
    module = import_onnx(model, ctx)
    weight = next(o for o in module.walk_ops() if o.name == "top.Weight")
    a1 = weight.execute([])[0]
    a2 = weight.execute([])[0]
    assert np.shares_memory(a1, a2)  # no copy per execution
    np.testing.assert_array_equal(a1, w)
    assert weight.properties["value"].handle is ctx.resources.get(weight.properties["value"].handle.key)


def test_printer_roundtrip_if_available() -> None:
    printer = pytest.importorskip("lamina.ir.printer")
    module = import_onnx(single_node_model("Relu", {"x": f32(2, 3)}), Context(handler=None))
    text = printer.print_operation(module)
    assert '"top.Relu"' in text or "top.Relu" in text


def test_where_branches_compare_by_expressed_type() -> None:
    """After import-calibration-table one branch of a Where may be calibrated and the other a plain
    f32 constant: the same element type; f32 against i32 is still an error."""
    from lamina.ir.parser import parse_module

    text = """
func.func @main(%c: tensor<4xi1>, %x: tensor<4x!quant.calibrated<f32<-1.0:1.0>>>) -> tensor<4xf32> {
  %k = "top.Weight"() <{value = dense<0.5> : tensor<4xELEM>}> : () -> tensor<4xELEM>
  %w = "top.Where"(%c, %x, %k) : (tensor<4xi1>, tensor<4x!quant.calibrated<f32<-1.0:1.0>>>, tensor<4xELEM>) -> tensor<4xf32>
  return %w : tensor<4xf32>
}
"""
    from lamina.ir.verifier import verify

    for elem, ok in (("f32", True), ("i32", False)):
        diags: list[str] = []
        ctx = Context(handler=lambda d: diags.append(str(d)))  # noqa: B023
        src = text.replace("ELEM", elem).replace("dense<0.5>", "dense<0.5>" if ok else "dense<1>")
        m = parse_module(src, ctx)
        assert m is not None
        assert verify(m, ctx) is ok, diags
        assert ok or any("both branches must have the same element type" in d for d in diags)

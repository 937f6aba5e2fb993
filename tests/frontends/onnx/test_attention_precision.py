"""ONNX Attention's ``softmax_precision`` (an ONNX element-type code) is stored on ``top.Attention`` as
the element type it names, so that the dialect needs nothing of the ONNX front end; the ``i64`` code
that older files hold is still read and runs the same."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from lamina.frontends.model_io import run_top_module  # noqa: E402
from lamina.frontends.onnx import import_onnx  # noqa: E402
from lamina.ir.context import Context  # noqa: E402
from lamina.ir.parser import parse_module  # noqa: E402
from lamina.ir.printer import print_operation  # noqa: E402
from lamina.ir.verifier import verify  # noqa: E402


def _model(precision: int | None) -> object:
    shape = [1, 2, 3, 4]
    attrs = {} if precision is None else {"softmax_precision": precision}
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"], name="att", **attrs)
    ins = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shape) for n in "qkv"]
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)
    graph = helper.make_graph([node], "att", ins, [out])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def test_softmax_precision_is_an_element_type_and_old_files_still_run() -> None:
    rng = np.random.default_rng(0)
    feeds = {n: rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for n in "qkv"}
    plain = run_top_module(import_onnx(_model(None), Context()), feeds)["y"]
    module = import_onnx(_model(TensorProto.DOUBLE), Context())
    text = print_operation(module)
    assert "softmax_precision = f64" in text
    np.testing.assert_allclose(run_top_module(module, feeds)["y"], plain, rtol=1e-5, atol=1e-6)
    old_text = text.replace("softmax_precision = f64", "softmax_precision = 11 : i64")
    assert old_text != text
    ctx = Context()
    old = parse_module(old_text, ctx)
    assert old is not None and verify(old, ctx)
    np.testing.assert_array_equal(run_top_module(old, feeds)["y"], run_top_module(module, feeds)["y"])

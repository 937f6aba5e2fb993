"""Numerics of the ``top`` passes and patterns (lamina/dialects/top/transforms).

Every function of every FileCheck test in ``tests/filecheck/top`` is run with the interpreter on
small random inputs before and after the pass pipeline of that file; outputs must agree within
float32 tolerance: ``|a - b| <= 1e-5 + 1e-5 * |b|`` (measured max abs error below 5e-6 except the
BN fold, whose recomputed weights round differently: ~1e-6 on these sizes). An end-to-end test
imports an ONNX model with Conv+BN+Relu, a decomposed LayerNorm, a decomposed GELU, a
Shape->Gather->Concat->Reshape chain, SiLU and attention, runs
``builtin.module(func.func(top-const-fold,canonicalize,top-shape-infer))`` and checks the fusions
happened and the outputs match the unoptimized module (cosine >= 0.99999, max abs err <= 1e-4)
and onnxruntime.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lamina.dialects.top  # noqa: F401
from lamina.execution import Interpreter
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.context import Context
from lamina.ir.core import Operation
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation
from lamina.ir.types import DYNAMIC, RankedTensorType
from lamina.ir.verifier import verify
from lamina.passes import PassManager

FILECHECK_DIR = Path(__file__).resolve().parents[2] / "filecheck" / "top"
RTOL = 1e-5
ATOL = 1e-5

#: Functions whose results are not deterministic (training-mode Dropout).
NONDETERMINISTIC = {"not_identities"}
#: Functions whose tensors are larger than any memory (huge-tensors.mlir: checked not to allocate).
TOO_LARGE_TO_RUN = {"huge"}


def _pipelines(text: str) -> list[str]:
    """The pass pipelines of the file's RUN lines, except those expected to fail (``RUN: not``)."""
    runs = [line for line in text.splitlines() if "RUN:" in line and "RUN: not " not in line]
    return sorted({p for line in runs for p in re.findall(r"--pass-pipeline='([^']*)'", line)})


def _inputs(func: Operation, rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for a in func.regions[0].blocks[0].args:
        t = a.type
        assert isinstance(t, RankedTensorType)
        shape = [3 if d == DYNAMIC else d for d in t.shape]
        dt = element_type_to_dtype(t.element_type)
        if dt.kind == "f":
            out.append(rng.standard_normal(shape).astype(dt))
        elif dt.kind == "b":
            out.append(rng.random(shape) > 0.5)
        else:
            out.append(rng.integers(0, 3, shape).astype(dt))
    return out


def _funcs(module: Operation) -> dict[str, Operation]:
    return {op.properties["sym_name"].value: op for op in module.walk_ops() if op.name == "func.func"}


def _run(func: Operation, inputs: list[np.ndarray]) -> list[np.ndarray]:
    interp = Interpreter(func)
    res = interp.run(inputs)
    return [res[n] for n in interp.output_names]


CASES = [
    (p.name, pipe)
    for p in sorted(FILECHECK_DIR.glob("*.mlir"))
    for pipe in _pipelines(p.read_text())
    if "{input-shapes" not in pipe
]


@pytest.mark.parametrize(("filename", "pipeline"), CASES, ids=[f"{f}:{p}" for f, p in CASES])
def test_filecheck_cases_keep_numerics(filename: str, pipeline: str) -> None:
    text = (FILECHECK_DIR / filename).read_text()
    text = text.replace("// -----", "")
    ctx = Context(handler=None)
    before = parse_module(text, ctx, filename)
    after = parse_module(text, ctx, filename)
    assert before is not None and after is not None
    pm = PassManager.parse(pipeline, ctx)
    assert pm.run(after)
    assert verify(after, ctx)
    rng = np.random.default_rng(0)
    fb, fa = _funcs(before), _funcs(after)
    checked = 0
    for name, f in fb.items():
        if name in NONDETERMINISTIC or name in TOO_LARGE_TO_RUN:
            continue
        ins = _inputs(f, rng)
        ref = _run(f, ins)
        got = _run(fa[name], ins)
        for r, g in zip(ref, got):
            r, g = np.asarray(r), np.asarray(g)
            assert r.shape == g.shape, name
            if r.dtype.kind == "f":
                np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL, err_msg=f"{filename}:{name}")
            else:
                np.testing.assert_array_equal(g, r, err_msg=f"{filename}:{name}")
        checked += 1
    assert checked > 0


# ---- direct checks of the rewrites ---------------------------------------------------------------


def _module(text: str) -> tuple[Context, Operation]:
    ctx = Context(handler=None)
    m = parse_module(text, ctx)
    assert m is not None
    return ctx, m


def _ops(m: Operation) -> list[str]:
    return [o.name for o in m.walk_ops() if o.name.startswith("top.")]


def test_bn_fold_numerics_random_weights() -> None:
    """BN folded into a grouped, biased, strided Conv with random statistics (tolerance 1e-5)."""
    rng = np.random.default_rng(1)
    from lamina.dialects.top.io import WeightOp
    from lamina.ir.attributes import DenseElementsAttr

    text = """
    func.func @main(%a: tensor<2x4x9x9xf32>) -> tensor<2x6x5x5xf32> {
      %x = "top.Input"(%a) : (tensor<2x4x9x9xf32>) -> tensor<2x4x9x9xf32>
      %w = "top.Weight"() <{value = dense<0.0> : tensor<6x2x3x3xf32>}> : () -> tensor<6x2x3x3xf32>
      %b = "top.Weight"() <{value = dense<0.0> : tensor<6xf32>}> : () -> tensor<6xf32>
      %c = "top.Conv"(%x, %w, %b) <{group = 2 : i64, strides = array<i64: 2, 2>, pads = array<i64: 1, 1, 1, 1>}> : (tensor<2x4x9x9xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x5x5xf32>
      %g = "top.Weight"() <{value = dense<0.0> : tensor<6xf32>}> : () -> tensor<6xf32>
      %be = "top.Weight"() <{value = dense<0.0> : tensor<6xf32>}> : () -> tensor<6xf32>
      %mu = "top.Weight"() <{value = dense<0.0> : tensor<6xf32>}> : () -> tensor<6xf32>
      %va = "top.Weight"() <{value = dense<0.0> : tensor<6xf32>}> : () -> tensor<6xf32>
      %y = "top.BatchNorm"(%c, %g, %be, %mu, %va) <{epsilon = 1.0e-3 : f64}> : (tensor<2x6x5x5xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>, tensor<6xf32>) -> tensor<2x6x5x5xf32>
      %r = "top.Relu"(%y) : (tensor<2x6x5x5xf32>) -> tensor<2x6x5x5xf32>
      return %r : tensor<2x6x5x5xf32>
    }
    """
    ctx, m = _module(text)
    ws = [o for o in m.walk_ops() if isinstance(o, WeightOp)]
    vals = [
        rng.standard_normal((6, 2, 3, 3)),
        rng.standard_normal(6),
        rng.random(6) + 0.5,
        rng.standard_normal(6),
        rng.standard_normal(6),
        rng.random(6) + 0.1,
    ]
    for op, v in zip(ws, vals):
        op.properties["value"] = DenseElementsAttr(op.results[0].type, v.astype(np.float32))
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    ref = _run(m, [x])[0]
    assert PassManager.parse("builtin.module(func.func(canonicalize))", ctx).run(m)
    assert _ops(m).count("top.Conv") == 1 and "top.BatchNorm" not in _ops(m) and "top.Relu" not in _ops(m)
    got = _run(m, [x])[0]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_relu6_limit_executes() -> None:
    """relu_limit on Conv and MatMul clamps at the limit (exact)."""
    text = """
    func.func @main(%a: tensor<4x3xf32>) -> tensor<4x2xf32> {
      %x = "top.Input"(%a) : (tensor<4x3xf32>) -> tensor<4x3xf32>
      %w = "top.Weight"() <{value = dense<[[10.0, -1.0], [10.0, 2.0], [0.0, 3.0]]> : tensor<3x2xf32>}> : () -> tensor<3x2xf32>
      %n = "top.None"() : () -> none
      %m = "top.MatMul"(%x, %w, %n) : (tensor<4x3xf32>, tensor<3x2xf32>, none) -> tensor<4x2xf32>
      %lo = "top.Weight"() <{value = dense<0.0> : tensor<f32>}> : () -> tensor<f32>
      %hi = "top.Weight"() <{value = dense<6.0> : tensor<f32>}> : () -> tensor<f32>
      %r = "top.Clip"(%m, %lo, %hi) : (tensor<4x2xf32>, tensor<f32>, tensor<f32>) -> tensor<4x2xf32>
      return %r : tensor<4x2xf32>
    }
    """
    ctx, m = _module(text)
    x = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    ref = _run(m, [x])[0]
    assert PassManager.parse("builtin.module(func.func(top-canonicalize))", ctx).run(m)
    assert "top.Clip" not in _ops(m)
    got = _run(m, [x])[0]
    np.testing.assert_array_equal(got, ref)
    assert got.max() <= 6.0 and got.min() >= 0.0


def test_const_fold_uses_context_resources_and_unique_keys() -> None:
    text = """
    func.func @main() -> (tensor<2xf32>, tensor<2xf32>) {
      %a = "top.Weight"() <{value = dense<[1.0, 2.0]> : tensor<2xf32>}> : () -> tensor<2xf32>
      %0 = "top.Relu"(%a) : (tensor<2xf32>) -> tensor<2xf32>
      %1 = "top.Neg"(%a) : (tensor<2xf32>) -> tensor<2xf32>
      %2 = "top.Relu"(%1) : (tensor<2xf32>) -> tensor<2xf32>
      return %0, %2 : tensor<2xf32>, tensor<2xf32>
    }
    """
    ctx, m = _module(text)
    assert PassManager.parse("builtin.module(func.func(top-const-fold))", ctx).run(m)
    assert _ops(m) == ["top.Weight", "top.Weight"]
    keys = [o.properties["value"].handle.key for o in m.walk_ops() if o.name == "top.Weight"]
    assert len(set(keys)) == 2
    assert all(ctx.resources.get(k) is not None for k in keys)
    out = _run(m, [])
    np.testing.assert_array_equal(out[0], [1.0, 2.0])
    np.testing.assert_array_equal(out[1], [0.0, 0.0])
    # the printed module round-trips through the parser
    text2 = print_operation(m)
    ctx2 = Context(handler=None)
    m2 = parse_module(text2, ctx2)
    assert m2 is not None
    np.testing.assert_array_equal(_run(m2, [])[0], [1.0, 2.0])


def test_dce_and_shape_infer_pass() -> None:
    text = """
    func.func @main(%a: tensor<2x3xf32>) -> tensor<*xf32> {
      %x = "top.Input"(%a) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %dead = "top.Exp"(%x) : (tensor<2x3xf32>) -> tensor<2x3xf32>
      %w = "top.Weight"() <{value = dense<1.0> : tensor<3xf32>}> : () -> tensor<3xf32>
      %y = "top.Add"(%x, %w) : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<*xf32>
      return %y : tensor<*xf32>
    }
    """
    ctx, m = _module(text)
    assert PassManager.parse("builtin.module(dce,func.func(top-shape-infer))", ctx).run(m)
    assert "top.Exp" not in _ops(m)
    add = next(o for o in m.walk_ops() if o.name == "top.Add")
    assert str(add.results[0].type) == "tensor<2x3xf32>"
    f = next(o for o in m.walk_ops() if o.name == "func.func")
    assert str(f.properties["function_type"].value) == "(tensor<2x3xf32>) -> tensor<2x3xf32>"


# ---- end to end: an ONNX model -------------------------------------------------------------------


def _e2e_model() -> Any:
    onnx = pytest.importorskip("onnx")
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(3)

    def init(name: str, a: Any) -> Any:
        return numpy_helper.from_array(np.asarray(a), name)

    f32 = np.float32
    inits = [
        init("W", (rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(f32)),
        init("Wb", rng.standard_normal(8).astype(f32)),
        init("bn_s", (rng.random(8) + 0.5).astype(f32)),
        init("bn_b", rng.standard_normal(8).astype(f32)),
        init("bn_m", rng.standard_normal(8).astype(f32)),
        init("bn_v", (rng.random(8) + 0.2).astype(f32)),
        init("idx0", np.array([0], np.int64)),
        init("c8", np.array([8], np.int64)),
        init("cm1", np.array([-1], np.int64)),
        init("ax", np.array([-1], np.int64)),
        init("two", np.array(2.0, f32)),
        init("eps", np.array(1e-5, f32)),
        init("ln_g", (rng.random(64) + 0.5).astype(f32)),
        init("ln_b", rng.standard_normal(64).astype(f32)),
        init("sqrt2", np.array(np.sqrt(2.0), f32)),
        init("one", np.array(1.0, f32)),
        init("half", np.array(0.5, f32)),
        init("Wq", (rng.standard_normal((64, 16)) * 0.2).astype(f32)),
        init("Wk", (rng.standard_normal((64, 16)) * 0.2).astype(f32)),
        init("Wv", (rng.standard_normal((64, 16)) * 0.2).astype(f32)),
        init("scale", np.array(4.0, f32)),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W", "Wb"], ["conv"], pads=[1, 1, 1, 1], name="conv"),
        n("BatchNormalization", ["conv", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn"),
        n("Relu", ["bn"], ["relu"], name="relu"),
        # Shape -> Gather -> Concat -> Reshape: (N, 8, 8, 8) -> (N, 8, 64)
        n("Shape", ["relu"], ["shp"], name="shape"),
        n("Gather", ["shp", "idx0"], ["n"], axis=0, name="gather"),
        n("Concat", ["n", "c8", "cm1"], ["tgt"], axis=0, name="concat"),
        n("Reshape", ["relu", "tgt"], ["seq"], name="reshape"),
        # decomposed LayerNorm over the last axis
        n("ReduceMean", ["seq", "ax"], ["mean"], name="ln_mean"),
        n("Sub", ["seq", "mean"], ["d"], name="ln_sub"),
        n("Pow", ["d", "two"], ["d2"], name="ln_pow"),
        n("ReduceMean", ["d2", "ax"], ["var"], name="ln_var"),
        n("Add", ["var", "eps"], ["ve"], name="ln_add_eps"),
        n("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
        n("Div", ["d", "sd"], ["nrm"], name="ln_div"),
        n("Mul", ["nrm", "ln_g"], ["lnw"], name="ln_mul"),
        n("Add", ["lnw", "ln_b"], ["ln"], name="ln"),
        # decomposed GELU (erf form)
        n("Div", ["ln", "sqrt2"], ["g0"], name="gelu_div"),
        n("Erf", ["g0"], ["g1"], name="gelu_erf"),
        n("Add", ["g1", "one"], ["g2"], name="gelu_add"),
        n("Mul", ["ln", "g2"], ["g3"], name="gelu_mul"),
        n("Mul", ["g3", "half"], ["gelu"], name="gelu"),
        # SiLU
        n("Sigmoid", ["gelu"], ["sg"], name="sig"),
        n("Mul", ["gelu", "sg"], ["silu"], name="silu"),
        # single-head attention
        n("MatMul", ["silu", "Wq"], ["q"], name="q"),
        n("MatMul", ["silu", "Wk"], ["k"], name="k"),
        n("MatMul", ["silu", "Wv"], ["v"], name="v"),
        n("Transpose", ["k"], ["kt"], perm=[0, 2, 1], name="kt"),
        n("MatMul", ["q", "kt"], ["qk"], name="qk"),
        n("Div", ["qk", "scale"], ["qks"], name="qk_scale"),
        n("Softmax", ["qks"], ["p"], axis=-1, name="softmax"),
        n("MatMul", ["p", "v"], ["y"], name="attn"),
    ]
    graph = helper.make_graph(
        nodes,
        "e2e",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 8
    return model


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(a64 @ b64 / (np.linalg.norm(a64) * np.linalg.norm(b64)))


def test_end_to_end_onnx_pipeline() -> None:
    from lamina.frontends.onnx import import_onnx

    model = _e2e_model()
    ctx = Context(handler=None)
    ref_mod = import_onnx(model, ctx)
    opt_mod = import_onnx(model, ctx)
    pm = PassManager.parse("builtin.module(func.func(top-const-fold,canonicalize,top-shape-infer))", ctx)
    assert pm.run(opt_mod)
    assert verify(opt_mod, ctx)
    ops = _ops(opt_mod)
    for gone in (
        "top.BatchNorm",
        "top.Relu",
        "top.Shape",
        "top.Gather",
        "top.Concat",
        "top.Reduce",
        "top.Erf",
        "top.Sqrt",
        "top.Sigmoid",
        "top.Softmax",
        "top.Permute",
    ):
        assert gone not in ops, (gone, ops)
    assert ops.count("top.Conv") == 1
    assert ops.count("top.LayerNorm") == 1
    assert ops.count("top.GELU") == 1
    assert ops.count("top.SiLU") == 1
    assert ops.count("top.Attention") == 1
    conv = next(o for o in opt_mod.walk_ops() if o.name == "top.Conv")
    assert conv.attr("do_relu") == 1  # type: ignore[attr-defined]
    compute = [o for o in ops if o not in ("top.Weight", "top.None", "top.Input")]
    assert len(compute) <= 10, compute

    x = np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)
    ref = Interpreter(ref_mod).run([x])["y"]
    got = Interpreter(opt_mod).run([x])["y"]
    assert got.shape == ref.shape == (2, 8, 16)
    err = float(np.abs(got - ref).max())
    assert _cosine(got, ref) >= 0.99999
    assert err <= 1e-4, err

    try:
        from lamina.frontends.onnx.testing import run_onnxruntime

        ort_out = run_onnxruntime(model, {"x": x})["y"]
    except ImportError:
        return
    assert _cosine(got, ort_out) >= 0.99999
    assert float(np.abs(got - ort_out).max()) <= 1e-4


def test_const_fold_keeps_scalar_shape() -> None:
    """A 0-d result folds to a 0-d weight (not a 1-element vector)."""
    ctx, m = _module("""
    func.func @main() -> tensor<f32> {
      %a = "top.Weight"() <{value = dense<-2.0> : tensor<f32>}> : () -> tensor<f32>
      %0 = "top.Abs"(%a) : (tensor<f32>) -> tensor<f32>
      return %0 : tensor<f32>
    }
    """)
    assert PassManager.parse("builtin.module(func.func(top-const-fold))", ctx).run(m)
    w = next(o for o in m.walk_ops() if o.name == "top.Weight")
    assert str(w.results[0].type) == "tensor<f32>"
    assert verify(m, ctx)
    assert _run(m, [])[0] == 2.0

"""The generic templates against each ``tpu`` op's ``execute``: random ops of every kind the NPU tests
draw (:mod:`tpu_cases`: INT8 symmetric, asymmetric and per-channel, F32, F16, BF16; convs over
shapes, strides, pads, groups and dilations), each planned and emitted alone by the best generic template
(the fast templates, priority 10 and up, have their own tests), compiled for the host and for an AVX2 ``Isa(32)``, and run on 1 and 3 parts.
INT8 results equal ``execute`` bit for bit; float results within 1e-4 relative (f32) or 2 units
in the last place of the result type (f16/bf16: f32 sums in another order than numpy's)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
from tpu_cases import STRATEGIES, Case

from lamina.ir.types import RankedTensorType
from lamina.targets.cpu.jit import host_spec, run_kernel, spec_for
from lamina.targets.cpu.kernels import by_name, candidates
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.lowering import np_dtype

COMPILED = [
    "Conv",
    "MatMul",
    "Eltwise",
    "Requant",
    "Cast",
    "Lut",
    "Active",
    "Pool",
    "Permute",
    "Reduce",
    "Softmax",
    "LayerNorm",
    "Attention",
]


def _run(case: Case, isa: Isa | None, nparts: int) -> tuple[str, list[np.ndarray], list[np.ndarray]]:
    op = case.op
    the_isa = isa or host_spec().isa
    tmpl = next(t for t in candidates(op, the_isa) if t.priority < 10)
    want = [np.asarray(w) for w in op.execute(case.inputs)]
    bufs: dict[Any, np.ndarray] = {}
    for i, v in enumerate(case.inputs):
        if v is not None:
            bufs[("in", i)] = np.ascontiguousarray(
                np.asarray(v).astype(np_dtype(op.operands[i].type), copy=False)
            )
    outs = []
    for j, r in enumerate(op.results):
        if isinstance(r.type, RankedTensorType):
            a = np.zeros(tuple(r.type.shape), np_dtype(r.type))
            bufs[("out", j)] = a
            outs.append(a)
    if tmpl.name != "reference":
        run_kernel(tmpl, op, bufs, isa=isa, nparts=nparts)
    return tmpl.name, outs, want


def _close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.shape == want.shape, what
    if got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float64), np.asarray(want).astype(np.float64)
    if got.dtype == np.float32 or got.dtype == np.float64:
        tol = 1e-4 * max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
    else:
        eps = 2.0**-7 if got.dtype == ml_dtypes.bfloat16 else 2.0**-10
        tol = 2 * eps * max(1.0, float(np.max(np.abs(w))) if w.size else 1.0)
    np.testing.assert_allclose(g, w, rtol=0, atol=tol, err_msg=what)


@pytest.mark.parametrize("kind", COMPILED)
@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_generic_template_matches_execute(kind: str, data: Any) -> None:
    case = data.draw(STRATEGIES[kind])
    nparts = data.draw(st.sampled_from([1, 3]))
    isa = data.draw(st.sampled_from([None, spec_for("avx2").isa]))
    if kind == "Reduce" and by_name("generic.reduce")._split(case.op) is None:
        # reduced axes that do not coalesce into one strided run (e.g. axes 0 and 2 of three): the
        # generic reduction does not take them, the reference executor does (its callback from the
        # compiled model is tested in test_runtime.py; this harness calls kernels alone)
        the_isa = isa or host_spec().isa
        assert next(t for t in candidates(case.op, the_isa) if t.priority < 10).name == "reference"
        return
    name, got, want = _run(case, isa, nparts)
    assert name != "reference", f"{case.op.name} runs through the reference executor"
    for g, w in zip(got, want):
        _close(g, w, f"{name} on {case.op}")


# ---- the ops the NPU strategies do not draw: Compare, Where, Gather with computed indices ----------


@st.composite
def host_cases(draw: Any) -> Case:
    from tpu_cases import fl, op, t

    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["compare", "where", "gather"]))
    shp = tuple(draw(st.integers(1, 4)) for _ in range(draw(st.integers(1, 3))))
    if kind == "compare":
        mode = draw(
            st.sampled_from(["Equal", "NotEqual", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And"])
        )
        et = draw(st.sampled_from(["f32", "i64", "i32"]))
        rhs = shp[-1:] if draw(st.booleans()) else shp
        if et == "f32":
            a, b = fl(rng, shp, "f32").round(), fl(rng, rhs, "f32").round()
        else:
            dt = np.int64 if et == "i64" else np.int32
            a, b = rng.integers(-2, 3, shp).astype(dt), rng.integers(-2, 3, rhs).astype(dt)
        o = op("tpu.Compare", [t(shp, et), t(rhs, et)], t(shp, "i1"), f'mode = "{mode}"')
        return Case(o, [a, b], "Compare")
    if kind == "where":
        c = rng.integers(0, 2, shp).astype(bool)
        ft = draw(st.sampled_from(["f32", "bf16", "f16"]))
        x, y = fl(rng, shp, ft), fl(rng, shp[-1:], ft)
        o = op("tpu.Where", [t(shp, "i1"), t(shp, ft), t(shp[-1:], ft)], t(shp, ft))
        return Case(o, [c, x, y], "Where")
    ax = draw(st.integers(0, len(shp) - 1))
    ishape = tuple(draw(st.integers(1, 3)) for _ in range(draw(st.integers(0, 2))))
    idx = rng.integers(-shp[ax], shp[ax], ishape).astype(np.int64)
    out = shp[:ax] + ishape + shp[ax + 1 :]
    o = op("tpu.Gather", [t(shp, "f32"), t(ishape, "i64")], t(out, "f32"), f"axis = {ax} : i64")
    return Case(o, [fl(rng, shp, "f32"), idx], "Gather")


@settings(max_examples=12, deadline=None)
@given(case=host_cases(), nparts=st.sampled_from([1, 2]))
def test_host_op_templates_match_execute(case: Case, nparts: int) -> None:
    name, got, want = _run(case, None, nparts)
    assert name != "reference", f"{case.op.name} runs through the reference executor"
    for g, w in zip(got, want):
        _close(g, w, f"{name} on {case.op}")


@pytest.mark.parametrize(
    ("name", "operands", "attrs", "shape"),
    [
        ("tpu.Reduce", "axes", 'keepdims = 1 : i64, mode = "ReduceMean"', (3, 5, 37)),
        ("tpu.Reduce", "axes", 'keepdims = 0 : i64, mode = "ReduceL2"', (2, 129, 3)),
        ("tpu.Reduce", "axes", 'keepdims = 1 : i64, mode = "ReduceSum"', (4, 300)),
        ("tpu.LayerNorm", "gamma", "axis = -1 : i64, epsilon = 1.0e-5 : f64", (2, 7, 384)),
        ("tpu.LayerNorm", "gamma", "axis = 1 : i64, epsilon = 1.0e-5 : f64", (2, 5, 3)),
    ],
)
def test_float_sums_are_bit_exact(name: str, operands: str, attrs: str, shape: tuple[int, ...]) -> None:
    """The float sums of reductions (``ordered_sum``'s tree) and layer norm (numpy's pairwise mean)
    in the reference's order: f32 results equal ``execute`` bit for bit."""
    from tpu_cases import build, dense, t

    rng = np.random.default_rng(1)
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    if name == "tpu.Reduce":
        axes = np.array(
            [1] if len(shape) == 3 and "L2" in attrs else [len(shape) - 1] if len(shape) == 2 else [1, 2]
        )
        keep = "keepdims = 1" in attrs
        out = (
            tuple(1 if i in axes else d for i, d in enumerate(shape))
            if keep
            else tuple(d for i, d in enumerate(shape) if i not in axes)
        )
        o = build(
            name, [t(shape, "f32"), ("const", dense(axes), t((len(axes),), "i64"))], [t(out, "f32")], attrs
        )
        ins = [x, axes]
    else:
        ax = 1 if "axis = 1" in attrs else len(shape) - 1
        g = rng.standard_normal(shape[ax:]).astype(np.float32)
        o = build(
            name,
            [t(shape, "f32"), ("const", dense(g), t(shape[ax:], "f32")), None],
            [t(shape, "f32"), "none", "none"],
            attrs,
        )
        ins = [x, g, None]
    tname, got, want = _run(Case(o, ins, name), None, 2)
    assert tname != "reference"
    assert got[0].tobytes() == np.asarray(want[0]).astype(np.float32).tobytes(), tname


def test_integer_to_float_cast() -> None:
    from tpu_cases import op, t

    x = np.array([[-(2**40) - 1, -3, 0, 7, 2**53 + 1]], np.int64)
    o = op("tpu.Cast", [t((1, 5), "i64")], t((1, 5), "f32"))
    name, got, want = _run(Case(o, [x], "Cast"), None, 1)
    assert name == "generic.cast" and got[0].tobytes() == np.asarray(want[0]).tobytes()


# ---- the int16 forms (lut16, wide_input): MatMul with int16 input or result, casts to int16 ------


def _int16_ffn_ops() -> list[Any]:
    """The tpu ops of ``x → LayerNorm (one outlier channel) → MatMul → GELU → MatMul`` lowered with
    ``int-forms=default,lut16,wide_input``: a cast to int16, MatMuls of int16 input / result."""
    from lamina.dialects.tpu.transforms import convert_top_to_tpu
    from lamina.ir.attributes import DenseElementsAttr, IntegerAttr
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.ir.types import i64

    rng = np.random.default_rng(3)

    def cal(shape: str, lo: float, hi: float) -> str:
        return f"tensor<{shape}x!quant.calibrated<f32<{lo}:{hi}>>>"

    def dense(a: np.ndarray) -> str:
        return f"dense<{a.tolist()}> : tensor<{'x'.join(map(str, a.shape))}xf32>"

    g = np.ones(24, np.float32)
    g[5] = 40.0
    w1 = rng.normal(0, 0.3, (24, 40)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (40, 8)).astype(np.float32)
    a, n, h, e, o = (
        cal("3x24", -3.0, 3.0),
        cal("3x24", -120.0, 120.0),
        cal("3x40", -8.0, 8.0),
        cal("3x40", -0.17, 8.0),
        cal("3x8", -9.0, 9.0),
    )
    text = f"""func.func @main(%x: {a}) -> {o} {{
  %in = "top.Input"(%x) : ({a}) -> {a} loc("x")
  %g = "top.Weight"() <{{value = {dense(g)}}}> : () -> tensor<24xf32>
  %w1 = "top.Weight"() <{{value = {dense(w1)}}}> : () -> tensor<24x40xf32>
  %w2 = "top.Weight"() <{{value = {dense(w2)}}}> : () -> tensor<40x8xf32>
  %nn = "top.None"() : () -> none
  %l, %m, %r = "top.LayerNorm"(%in, %g, %nn) <{{axis = -1 : i64, epsilon = 1.0e-05 : f64}}> : ({a}, tensor<24xf32>, none) -> ({n}, none, none) loc("ln")
  %f1 = "top.MatMul"(%l, %w1, %nn) : ({n}, tensor<24x40xf32>, none) -> {h} loc("fc1")
  %y = "top.GELU"(%f1) : ({h}) -> {e} loc("gelu")
  %z = "top.MatMul"(%y, %w2, %nn) : ({e}, tensor<40x8xf32>, none) -> {o} loc("fc2")
  return %z : {o}
}}
"""
    m = parse_module(text, Context())
    ln = next(op for op in m.walk_ops() if op.name == "top.LayerNorm")
    th = np.full(24, 3.0, np.float32)
    th[5] = 120.0
    ln.attributes["lamina.channel_th"] = DenseElementsAttr.from_numpy(th)
    ln.attributes["lamina.channel_axis"] = IntegerAttr(1, i64)
    assert convert_top_to_tpu(m, "INT8", int_forms="default,lut16,wide_input")[0]
    return [op for op in m.walk_ops() if op.name in ("tpu.MatMul", "tpu.Cast") and "i16" in str(op)]


def test_int16_forms_on_the_generic_templates() -> None:
    from lamina.dialects.tpu.quantize import qparams

    ops = _int16_ffn_ops()
    assert sorted(op.name for op in ops) == ["tpu.Cast", "tpu.MatMul", "tpu.MatMul"]
    rng = np.random.default_rng(4)
    for op in ops:
        ins: list[Any] = []
        for v in op.operands:
            d = v.defining_op()
            if not isinstance(v.type, RankedTensorType):
                ins.append(None)
            elif d is not None and d.name in ("tpu.Weight", "top.Weight"):
                ins.append(np.asarray(d.properties["value"].to_numpy()))
            elif "quant.uniform" in str(v.type):
                lo, hi = qparams(v.type)[3:]
                ins.append(rng.integers(lo, hi + 1, tuple(v.type.shape)).astype(np_dtype(v.type)))
            else:
                ins.append((rng.standard_normal(tuple(v.type.shape)) * 50).astype(np.float32))
        for nparts in (1, 2):
            name, got, want = _run(Case(op, ins, op.name), None, nparts)
            assert name != "reference", f"{op.name} runs through the reference executor"
            np.testing.assert_array_equal(got[0], np.asarray(want[0]), err_msg=f"{name} on {op}")


def test_int16_sum_on_the_generic_templates() -> None:
    """The ``wide_sum`` form's Add (int8 inputs, an int16 result read by a float LayerNorm; per
    tensor and per channel) on ``generic.int_ew``, bit for bit."""
    from lamina.dialects.tpu.quantize import qparams
    from lamina.dialects.tpu.transforms import convert_top_to_tpu
    from lamina.ir.attributes import DenseElementsAttr, IntegerAttr
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.ir.types import i64

    rng = np.random.default_rng(5)
    for per_channel in (False, True):
        cal = "tensor<3x8x!quant.calibrated<f32<{0}:{1}>>>"
        a, s, o = cal.format(-3.0, 3.0), cal.format(-9.0, 9.0), cal.format(-4.0, 4.0)
        text = f"""func.func @main(%x: {a}, %y: {a}) -> {o} {{
  %xi = "top.Input"(%x) : ({a}) -> {a} loc("x")
  %yi = "top.Input"(%y) : ({a}) -> {a} loc("y")
  %g = "top.Weight"() <{{value = dense<1.0> : tensor<8xf32>}}> : () -> tensor<8xf32>
  %nn = "top.None"() : () -> none
  %s = "top.Add"(%xi, %yi) : ({a}, {a}) -> {s} loc("sum")
  %l, %m, %r = "top.LayerNorm"(%s, %g, %nn) <{{axis = -1 : i64, epsilon = 1.0e-05 : f64}}> : ({s}, tensor<8xf32>, none) -> ({o}, none, none) loc("ln")
  return %l : {o}
}}
"""
        mod = parse_module(text, Context())
        if per_channel:
            add = next(op for op in mod.walk_ops() if op.name == "top.Add")
            th = np.linspace(1.0, 9.0, 8).astype(np.float32)
            add.attributes["lamina.channel_th"] = DenseElementsAttr.from_numpy(th)
            add.attributes["lamina.channel_axis"] = IntegerAttr(1, i64)
        assert convert_top_to_tpu(mod, "INT8")[0]
        op = next(op for op in mod.walk_ops() if op.name == "tpu.Add")
        assert "i16" in str(op.results[0].type) and ("f32:1," in str(op.results[0].type)) == per_channel
        ins = []
        for v in op.operands:
            lo, hi = qparams(v.type)[3:]
            ins.append(rng.integers(lo, hi + 1, tuple(v.type.shape)).astype(np_dtype(v.type)))
        for nparts in (1, 2):
            name, got, want = _run(Case(op, ins, op.name), None, nparts)
            assert name == "generic.int_ew"
            np.testing.assert_array_equal(got[0], np.asarray(want[0]), err_msg=f"{name} on {op}")


def test_per_channel_mul_on_the_generic_templates() -> None:
    """``tpu.Mul`` with a per-axis result (4-d, axis 1: one multiplier and shift per channel; one
    operand per channel, the other per tensor or per channel, or a scalar constant) on
    ``generic.int_ew``, bit for bit."""
    from tpu_cases import arr, op, t

    from lamina.dialects.tpu.quantize import quantize_multiplier

    rng = np.random.default_rng(7)
    c = 6

    def pa(scales: Any) -> str:
        return f"!quant.uniform<i8:f32:1, {{{', '.join(repr(float(s)) for s in scales)}}}>"

    for other in ("per_tensor", "per_axis"):
        sa = rng.uniform(0.01, 0.5, c)
        sb = rng.uniform(0.01, 0.5, c) if other == "per_axis" else np.full(c, 0.03)
        so = rng.uniform(0.01, 0.5, c)
        mults = [quantize_multiplier(float(sa[i] * sb[i] / so[i])) for i in range(c)]
        shape = (2, c, 3, 5)
        tb = pa(sb) if other == "per_axis" else "!quant.uniform<i8:f32, 0.03>"
        o = op(
            "tpu.Mul",
            [t(shape, pa(sa)), t(shape, tb)],
            t(shape, pa(so)),
            ", ".join([arr("multiplier", [m for m, _ in mults]), arr("rshift", [s for _, s in mults])]),
        )
        ins = [rng.integers(-128, 128, shape).astype(np.int8) for _ in range(2)]
        for isa, nparts in ((None, 1), (Isa(32, frozenset({"avx2", "fma"})), 3)):
            name, got, want = _run(Case(o, ins, "Eltwise"), isa, nparts)
            assert name == "generic.int_ew"
            np.testing.assert_array_equal(got[0], np.asarray(want[0]), err_msg=other)

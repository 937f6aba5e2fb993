"""The tpu ops as classes of their own sharing the top ops' definitions, the per-family lowering
patterns, the target capabilities and the in-memory qtable of convert-top-to-tpu."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lamina.dialects  # noqa: F401  (registers the dialects)
from lamina.dialects.top import ALL_OPS, TopOp
from lamina.dialects.tpu import REFERENCE, Capability, TargetCapabilities
from lamina.dialects.tpu.families.common import ModeOp, TpuOp
from lamina.dialects.tpu.ops import ALL_TPU_OPS, DERIVED, FAMILY_LOWERINGS, lowering_roots, tpu_class
from lamina.dialects.tpu.transforms import ConvertTopToTpu, convert_top_to_tpu
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation as print_op
from lamina.ir.traits import NotALayer

#: a Conv and an Add, calibrated (as in test_ops.py)
CONV = """
func.func @main(%x: tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x3x5x5xf32> {
  %in = "top.Input"(%x) : (tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %w = "top.Weight"() <{value = dense<[[[[0.5, -0.25, 0.1], [0.3, 0.2, -0.7], [0.05, 0.9, -0.4]], [[0.15, -0.35, 0.6], [-0.8, 0.45, 0.25], [0.33, -0.12, 0.07]]], [[[0.2, 0.2, 0.2], [0.2, 0.2, 0.2], [0.2, 0.2, 0.2]], [[-0.1, -0.1, -0.1], [-0.1, -0.1, -0.1], [-0.1, -0.1, -0.1]]], [[[1.0, 0.0, -1.0], [0.5, 0.0, -0.5], [0.25, 0.0, -0.25]], [[0.0, 0.0, 0.0], [0.0, 0.01, 0.0], [0.0, 0.0, 0.0]]]]> : tensor<3x2x3x3xf32>}> : () -> tensor<3x2x3x3xf32>
  %b = "top.Weight"() <{value = dense<[0.1, -0.2, 0.3]> : tensor<3xf32>}> : () -> tensor<3xf32>
  %c = "top.Conv"(%in, %w, %b) <{pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x2x5x5x!quant.calibrated<f32<-2.0:2.0>>>, tensor<3x2x3x3xf32>, tensor<3xf32>) -> tensor<1x3x5x5x!quant.calibrated<f32<-3.0:3.0>>> loc("conv")
  %in2 = "top.Weight"() <{value = dense<0.3> : tensor<1x3x5x5xf32>}> : () -> tensor<1x3x5x5xf32>
  %m = "top.Add"(%c, %in2) : (tensor<1x3x5x5x!quant.calibrated<f32<-3.0:3.0>>>, tensor<1x3x5x5xf32>) -> tensor<1x3x5x5x!quant.calibrated<f32<-4.0:4.0>>> loc("add")
  return %m : tensor<1x3x5x5x!quant.calibrated<f32<-4.0:4.0>>>
}
"""

#: what the lowering ran in INT8 before targets declared it (the former ``INT8_OPS`` list)
FORMER_INT8_OPS = {
    "top.Conv", "top.MatMul", "top.Add", "top.Sub", "top.Mul", "top.MaxPool", "top.AvgPool",
    "top.Reduce", "top.Concat", "top.Reshape", "top.Flatten", "top.Squeeze", "top.Unsqueeze",
    "top.Permute", "top.Slice", "top.Split", "top.Interp", "top.Tile", "top.Expand",
    "top.DepthToSpace", "top.SpaceToDepth",
}  # fmt: skip


def _parse(text: str) -> object:
    m = parse_module(text, Context())
    assert m is not None
    return m


def test_no_tpu_op_is_a_top_op() -> None:
    top_classes = (*ALL_OPS, TopOp)
    for cls in ALL_TPU_OPS:
        assert issubclass(cls, TpuOp), cls.name
        assert not issubclass(cls, top_classes), cls.name
    m = _parse(CONV)
    assert convert_top_to_tpu(m, "INT8")[0]  # type: ignore[arg-type]
    for op in m.walk_ops():  # type: ignore[attr-defined]
        if op.dialect_name == "tpu":
            assert not isinstance(op, top_classes), op.name


def test_declaration_shared_with_top() -> None:
    """Same operands, results, regions, properties (order, constraints, defaults) as the top op;
    the INT8 forms add multiplier/rshift only (Softmax and LayerNorm: their own integer
    constants). Descriptors are the tpu class's own."""
    for top_cls in ALL_OPS:
        cls = DERIVED.get(top_cls.name)
        if cls is None or not issubclass(cls, ModeOp):
            continue
        t, d = top_cls.op_def, cls.op_def
        assert [(f.name, f.kind) for f in t.operands] == [(f.name, f.kind) for f in d.operands]
        assert [(f.name, f.kind) for f in t.results] == [(f.name, f.kind) for f in d.results]
        assert [r.name for r in t.regions] == [r.name for r in d.regions]
        tp = [(p.name, p.default, p.optional, p.constraint) for p in t.props]
        dp = [(p.name, p.default, p.optional, p.constraint) for p in d.props]
        assert dp[: len(tp)] == tp, cls.name
        extra = [p[0] for p in dp[len(tp) :]]
        assert extra in (
            [],
            ["multiplier", "rshift"],
            ["exp_table", "out_factor"],
            ["in_weight", "eps_q", "multiplier", "shift", "bias_q"],
            ["qk_factor", "mask_factor", "out_factor"],
        ), cls.name
        assert all(f.owner is d for f in d.operands)
        assert cls.top_class is top_cls


def test_every_layer_has_a_tpu_op_and_one_pattern() -> None:
    for top_cls in ALL_OPS:
        assert (tpu_class(top_cls.name) is None) == top_cls.has_trait(NotALayer), top_cls.name
    roots = [root.name for _, root, _ in lowering_roots()]
    assert len(roots) == len(set(roots)) == len(DERIVED)
    for fam in FAMILY_LOWERINGS:
        assert fam.roots and all(isinstance(r, type) and issubclass(r, TopOp) for r in fam.roots)


def test_reference_capabilities_are_the_former_int8_set() -> None:
    # plus the optional integer forms (Gather, Softmax, LayerNorm, Attention; chosen by int-forms)
    optional = {"top.Gather", "top.Softmax", "top.LayerNorm", "top.Attention"}
    assert REFERENCE.ops("INT8", "native") == FORMER_INT8_OPS | optional
    lut = REFERENCE.ops("INT8", "lut")
    assert {"top.Relu", "top.Sigmoid", "top.SiLU", "top.GELU", "top.HardSwish"} <= lut
    assert not lut & FORMER_INT8_OPS
    assert REFERENCE.float_modes == ("F32", "F16", "BF16")
    for name in ("top.Softmax", "top.Conv", "top.LayerNorm"):
        for mode in REFERENCE.float_modes:
            assert REFERENCE.supports(name, mode)
    assert not REFERENCE.supports("top.Hardmax", "INT8")
    assert REFERENCE.supports("top.Conv", "int8", "i8") and not REFERENCE.supports("top.Conv", "INT8", "i4")
    assert (
        REFERENCE.cost("top.Conv", "INT8")
        < REFERENCE.cost("top.Conv", "F16")
        < REFERENCE.cost("top.Conv", "F32")
    )
    assert REFERENCE.cost("top.Hardmax", "INT8") is None
    assert REFERENCE.form("top.Relu", "INT8") == "lut"


def _op_names(m: object) -> list[str]:
    return [o.name for o in m.walk_ops()]  # type: ignore[attr-defined]


def test_a_target_without_int8_conv_runs_it_in_float() -> None:
    """The lowering consults the target: Conv in F32 with casts around it, Add still INT8."""
    caps = TargetCapabilities(
        "no-int8-conv",
        [Capability(frozenset({"top.Add"}), "INT8", ("i8", "u8")), Capability(None, "F32", ("f32",))],
    )
    m = _parse(CONV)
    ok, stats = convert_top_to_tpu(m, "INT8", capabilities=caps)  # type: ignore[arg-type]
    assert ok and stats["int8"] == 1 and stats["float"] == 1
    conv = next(o for o in m.walk_ops() if o.name == "tpu.Conv")  # type: ignore[attr-defined]
    assert str(conv.results[0].type) == "tensor<1x3x5x5xf32>"
    assert "tpu.Cast" in _op_names(m)
    ref = _parse(CONV)
    assert convert_top_to_tpu(ref, "INT8")[1]["int8"] == 2  # type: ignore[arg-type]


def test_a_float_mode_the_target_lacks_falls_back_to_f32() -> None:
    caps = TargetCapabilities("f32-only", [Capability(None, "F32", ("f32",))])
    m = _parse(CONV)
    ok, _ = convert_top_to_tpu(m, "F16", capabilities=caps)  # type: ignore[arg-type]
    assert ok
    assert "f16" not in print_op(m)  # type: ignore[arg-type]
    ref = _parse(CONV)
    convert_top_to_tpu(ref, "F16")  # type: ignore[arg-type]
    assert "f16" in print_op(ref)  # type: ignore[arg-type]


def _run_pass(m: object, ctx: Context, **kw: object) -> None:
    from lamina.passes import PassManager

    pm = PassManager(ctx)
    p = ConvertTopToTpu(**{k: v for k, v in kw.items() if k in ("mode", "qtable")})
    if "qtable_entries" in kw:
        p.qtable_entries = kw["qtable_entries"]  # type: ignore[assignment]
    pm.add(p)
    pm.run(m)


def test_qtable_entries_replace_the_file(tmp_path: Path) -> None:
    """In-memory entries give the same module as the qtable file, and win over it."""
    qt = tmp_path / "q.qtable"
    qt.write_text("conv F32\n")
    texts = []
    for kw in (
        {"qtable": str(qt)},
        {"qtable_entries": {"conv": "F32"}},
        {"qtable": "/nonexistent", "qtable_entries": {"conv": "F32"}},
    ):
        ctx = Context()
        m = parse_module(CONV, ctx)
        _run_pass(m, ctx, mode="INT8", **kw)
        texts.append(print_op(m))  # type: ignore[arg-type]
    assert texts[0] == texts[1] == texts[2]
    assert "tensor<1x3x5x5xf32>" in texts[0]  # conv in F32 per the table
    ctx = Context()
    plain = parse_module(CONV, ctx)
    _run_pass(plain, ctx, mode="INT8")
    assert print_op(plain) != texts[0]  # type: ignore[arg-type]


def test_quantized_forms_execute_like_before() -> None:
    """A smoke check across families on the lowered CONV model: executes, int8 storage out."""
    from lamina.execution.interpreter import Interpreter

    m = _parse(CONV)
    assert convert_top_to_tpu(m, "INT8")[0]  # type: ignore[arg-type]
    x = np.linspace(-2, 2, 50, dtype=np.float32).reshape(1, 2, 5, 5)
    out = Interpreter(m).run([x])  # type: ignore[arg-type]
    (y,) = out.values()
    assert np.asarray(y).shape == (1, 3, 5, 5)


@pytest.mark.parametrize("name", ["tpu.Conv", "tpu.Add", "tpu.Relu", "tpu.Cast", "tpu.Lut"])
def test_registered_by_name(name: str) -> None:
    assert any(c.name == name for c in ALL_TPU_OPS)


def test_concat_inputs_are_requantized_in_their_own_shape() -> None:
    """A Concat's inputs are brought to the result's element type, each keeping its shape (the
    requant of a 1x2 input is 1x2, not the 1x5 of the concatenation)."""
    from lamina.ir.verifier import verify

    cal = "!quant.calibrated<f32<-{0}:{0}>>"
    a_t, b_t, r_t = (f"tensor<1x{c}x{cal.format(t)}>" for c, t in ((2, 1.0), (3, 1.5), (5, 1.5)))
    m = _parse(
        f"""
func.func @main(%a: {a_t}, %b: {b_t}) -> {r_t} {{
  %x = "top.Input"(%a) : ({a_t}) -> {a_t} loc("a")
  %y = "top.Input"(%b) : ({b_t}) -> {b_t} loc("b")
  %c = "top.Concat"(%x, %y) <{{axis = 1 : i64}}> : ({a_t}, {b_t}) -> {r_t} loc("c")
  return %c : {r_t}
}}
"""
    )
    assert convert_top_to_tpu(m, "INT8")[0]  # type: ignore[arg-type]
    requants = [op for op in m.walk_ops() if op.name == "tpu.Requant"]  # type: ignore[attr-defined]
    assert requants
    for op in requants:
        assert op.operands[0].type.shape == op.results[0].type.shape == (1, 2)
    verify(m)  # type: ignore[arg-type]


#: a Mul by a constant whose top.Weight names its model's grid (a quantized TFLite constant)
MUL_CONST = """
func.func @main(%x: tensor<1x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4xf32> {
  %in = "top.Input"(%x) : (tensor<1x4x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %g = "top.Weight"() <{value = dense<[0.5, 1.0, 1.5, 2.55]> : tensor<4xf32>}> RANGE : () -> tensor<4xf32> loc("g")
  %m = "top.Mul"(%in, %g) : (tensor<1x4x!quant.calibrated<f32<-2.0:2.0>>>, tensor<4xf32>) -> tensor<1x4x!quant.calibrated<f32<-5.0:5.0>>> loc("mul")
  return %m : tensor<1x4x!quant.calibrated<f32<-5.0:5.0>>>
}
"""


@pytest.mark.parametrize("keep_grid", [False, True])
def test_a_constant_operand_keeps_the_grid_its_weight_names(keep_grid: bool) -> None:
    """``lamina.quant_range = [lo, hi]`` on a constant operand's ``top.Weight``: the constant is
    quantized with that range's scale and zero point (asymmetric), its values kept; without it,
    symmetric ``max|w| / 127``."""
    from lamina.dialects.tpu.lowering.pattern import QUANT_RANGE_ATTR

    rng = "{" + QUANT_RANGE_ATTR + " = [0.0, 2.55]}" if keep_grid else ""
    m = _parse(MUL_CONST.replace("RANGE", rng))
    assert convert_top_to_tpu(m, "INT8")[0]  # type: ignore[arg-type]
    w = next(op for op in m.walk_ops() if op.name == "tpu.Weight")  # type: ignore[attr-defined]
    e = w.results[0].type.element_type
    if keep_grid:  # [0, 2.55]: scale 0.01, zero point -128, the values 50, 100, 150, 255 steps up
        assert (e.scale, e.zero_point) == (pytest.approx(0.01), -128)
        q = np.asarray(w.properties["value"].to_numpy()).astype(int) + 128
        assert list(q) == [50, 100, 150, 255]
    else:
        assert (e.scale, e.zero_point) == (pytest.approx(2.55 / 127), 0)

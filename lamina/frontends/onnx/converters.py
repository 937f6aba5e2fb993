"""The ONNX → ``top`` converter table: one small function (or one :func:`simple` line) per ONNX op type.

A converter receives the :class:`~.importer.GraphConverter` and a :class:`~.registry.Node` (input
values, attributes as Python values, output names) and returns one value per node output. Opset
differences (attributes that later became inputs, 2-D coerced softmax, ...) are normalized here so
that each ``top`` op has one meaning.

Adding an op: declare it in ``lamina/dialects/top/`` and add ``simple("OnnxType", TopOpClass)`` or a
``@register("OnnxType")`` function here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from lamina.dialects.top import base as B  # noqa: N812
from lamina.dialects.top import control as C  # noqa: N812
from lamina.dialects.top import elementwise as E  # noqa: N812
from lamina.dialects.top import nn as N  # noqa: N812
from lamina.dialects.top import reduce as R  # noqa: N812
from lamina.dialects.top import tensor as T  # noqa: N812
from lamina.ir.attributes import Attribute, DenseElementsAttr, TypeAttr
from lamina.ir.core import Value
from lamina.ir.types import NoneType, RankedTensorType, Type, UnrankedTensorType, f32, i1

from .registry import CONVERTERS, Node, Unsupported, onnx_elem_type, register

if TYPE_CHECKING:
    from .importer import GraphConverter

Values = Sequence["Value | None"]


# ---- property conversion ------------------------------------------------------------------------


def to_prop(cls: type, name: str, value: Any) -> Attribute | None:
    """An ONNX attribute value as the property ``cls.<name>`` declares."""
    pd = getattr(cls, name, None)
    c = getattr(pd, "constraint", None)
    if value is None:
        return None
    if c is B.I64ArrayAttr:
        return B.Ints(value)
    if c is B.F64ArrayAttr:
        return B.Floats(value)
    if c is B.I64Attr:
        return B.I(value)
    if c is B.BoolProp:  # an ONNX int flag (0/1) read as a boolean
        return B.BoolAttr(bool(value))
    if c is B.F64Attr:
        return B.F(value)
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        from lamina.ir.attributes import ArrayAttr

        return ArrayAttr([B.S(v) for v in value])
    if c is B.ElementsAttrC and isinstance(value, np.ndarray):
        return DenseElementsAttr.from_numpy(value)
    if isinstance(value, str):
        return B.S(value)
    if isinstance(value, bool | int):
        return B.I(value)
    if isinstance(value, float):
        return B.F(value)
    if isinstance(value, np.ndarray):
        return DenseElementsAttr.from_numpy(value)
    if isinstance(value, list) and all(isinstance(v, int) for v in value):
        return B.Ints(value)
    if isinstance(value, list):
        return B.Floats(value)
    raise Unsupported(f"cannot express attribute '{name}' = {value!r}")


def _props(cls: type, node: Node, rename: dict[str, str] | None = None, **fixed: Any) -> dict[str, Attribute]:
    names = cls.op_def.prop_names
    out: dict[str, Attribute] = {}
    for k, v in node.attrs.items():
        k2 = (rename or {}).get(k, k)
        if k2 in names:
            a = to_prop(cls, k2, v)
            if a is not None:
                out[k2] = a
    for k, v in fixed.items():
        a = to_prop(cls, k, v) if not isinstance(v, Attribute) else v
        if a is not None:
            out[k] = a
    return out


def _operands(cls: type, node: Node) -> list[Value | None]:
    od = cls.op_def
    if any(f.kind != "single" for f in od.operands):
        return list(node.inputs)
    n = len(od.operands)
    ins = list(node.inputs[:n])
    return ins + [None] * (n - len(ins))


def emit(
    cv: GraphConverter,
    cls: type,
    node: Node,
    operands: Sequence[Value | None] | None = None,
    result_types: Sequence[Type] | None = None,
    names: Sequence[str] | None = None,
    rename: dict[str, str] | None = None,
    **fixed: Any,
) -> list[Value | None]:
    ops = _operands(cls, node) if operands is None else list(operands)
    op = cv.emit(cls, ops, node, _props(cls, node, rename, **fixed), result_types, names)
    return [None if isinstance(r.type, NoneType) else r for r in op.results]


def simple(onnx_type: str, cls: type, rename: dict[str, str] | None = None, **fixed: Any) -> None:
    """Register a 1:1 converter: inputs → operands, attributes → properties of the same name."""

    def conv(cv: GraphConverter, node: Node) -> Values:
        return emit(cv, cls, node, rename=rename, **fixed)

    CONVERTERS[onnx_type] = conv


def _ty(cv: GraphConverter, node: Node, i: int = 0, elem: Type | None = None) -> Type:
    """The ONNX-inferred type of output ``i`` (element type overridden by ``elem``)."""
    t = cv.value_types.get(node.outputs[i]) if i < len(node.outputs) else None
    if t is None:
        return UnrankedTensorType(elem or f32)
    if elem is not None:
        return t.with_element_type(elem) if isinstance(t, RankedTensorType) else UnrankedTensorType(elem)
    return t


def _weight_i64(cv: GraphConverter, node: Node, values: Sequence[int], what: str) -> Value:
    return cv.weight(np.asarray(values, dtype=np.int64), f"{node.outputs[0] or node.name}_{what}")


# ---- elementwise ------------------------------------------------------------------------------

for _onnx, _cls in [
    ("Relu", E.ReluOp),
    ("Sigmoid", E.SigmoidOp),
    ("Tanh", E.TanhOp),
    ("Exp", E.ExpOp),
    ("Log", E.LogOp),
    ("Abs", E.AbsOp),
    ("Neg", E.NegOp),
    ("Sqrt", E.SqrtOp),
    ("Reciprocal", E.ReciprocalOp),
    ("Floor", E.FloorOp),
    ("Ceil", E.CeilOp),
    ("Round", E.RoundOp),
    ("Sign", E.SignOp),
    ("Sin", E.SinOp),
    ("Cos", E.CosOp),
    ("Tan", E.TanOp),
    ("Asin", E.ArcsinOp),
    ("Acos", E.ArccosOp),
    ("Atan", E.ArctanOp),
    ("Sinh", E.SinhOp),
    ("Cosh", E.CoshOp),
    ("Asinh", E.ArcsinhOp),
    ("Acosh", E.ArccoshOp),
    ("Atanh", E.ArctanhOp),
    ("Erf", E.ErfOp),
    ("Softplus", E.SoftplusOp),
    ("Softsign", E.SoftsignOp),
    ("Mish", E.MishOp),
    ("HardSwish", E.HardSwishOp),
    ("Not", E.NotOp),
    ("BitwiseNot", E.BitwiseNotOp),
    ("IsNaN", E.IsNaNOp),
    ("LeakyRelu", E.LeakyReluOp),
    ("Elu", E.EluOp),
    ("Selu", E.SeluOp),
    ("Celu", E.CeluOp),
    ("HardSigmoid", E.HardSigmoidOp),
    ("ThresholdedRelu", E.ThresholdedReluOp),
    ("Shrink", E.ShrinkOp),
    ("Gelu", E.GELUOp),
    ("Swish", E.SiLUOp),
    ("IsInf", E.IsInfOp),
    ("Sub", E.SubOp),
    ("Div", E.DivOp),
    ("Pow", E.PowOp),
    ("Mod", E.ModOp),
    ("BitShift", E.BitShiftOp),
    ("PRelu", E.PReluOp),
    ("Where", E.WhereOp),
    ("Add", E.AddOp),
    ("Mul", E.MulOp),
    ("Sum", E.AddOp),
    ("Max", E.MaxOp),
    ("Min", E.MinOp),
    ("Mean", E.MeanOp),
    ("MatMul", N.MatMulOp),
    ("Gemm", N.GemmOp),
    ("Einsum", N.EinsumOp),
    ("InstanceNormalization", N.InstanceNormOp),
    ("LRN", N.LRNOp),
    ("LpNormalization", N.LpNormOp),
    ("MeanVarianceNormalization", N.MeanVarianceNormOp),
    ("Gather", T.GatherOp),
    ("GatherElements", T.GatherElementsOp),
    ("GatherND", T.GatherNDOp),
    ("ScatterElements", T.ScatterElementsOp),
    ("Scatter", T.ScatterElementsOp),
    ("ScatterND", T.ScatterNDOp),
    ("Range", T.RangeOp),
    ("Trilu", T.TriluOp),
    ("DepthToSpace", T.DepthToSpaceOp),
    ("SpaceToDepth", T.SpaceToDepthOp),
    ("NonZero", T.NonZeroOp),
    ("OneHot", T.OneHotOp),
    ("Compress", T.CompressOp),
    ("Tile", T.TileOp),
    ("Expand", T.ExpandOp),
    ("Size", T.SizeOp),
    ("Shape", T.ShapeOp),
    ("Flatten", T.FlattenOp),
    ("ReverseSequence", T.ReverseSequenceOp),
    ("CumSum", R.CumSumOp),
    ("CumProd", R.CumProdOp),
]:
    simple(_onnx, _cls)

simple("Transpose", T.PermuteOp, rename={"perm": "order"})
simple("Concat", T.ConcatOp)
simple("ConvTranspose", N.DeconvOp)
simple("LpPool", N.LpPoolOp)
for _onnx, _mode in [
    ("Equal", "Equal"),
    ("Greater", "Greater"),
    ("GreaterOrEqual", "GreaterOrEqual"),
    ("Less", "Less"),
    ("LessOrEqual", "LessOrEqual"),
    ("And", "And"),
    ("Or", "Or"),
    ("Xor", "Xor"),
]:
    simple(_onnx, E.CompareOp, mode=_mode)
for _onnx, _mode in [("BitwiseAnd", "And"), ("BitwiseOr", "Or"), ("BitwiseXor", "Xor")]:
    simple(_onnx, E.BitwiseOp, mode=_mode)
simple("ArgMax", R.ArgOp, mode="ArgMax")
simple("ArgMin", R.ArgOp, mode="ArgMin")


@register("Identity")
def _identity(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, E.IdentityOp, node)


@register("Constant")
def _constant(cv: GraphConverter, node: Node) -> Values:
    a = node.attrs
    if "value" in a:
        arr = a["value"]
    elif "value_float" in a:
        arr = np.array(a["value_float"], np.float32)
    elif "value_floats" in a:
        arr = np.array(a["value_floats"], np.float32)
    elif "value_int" in a:
        arr = np.array(a["value_int"], np.int64)
    elif "value_ints" in a:
        arr = np.array(a["value_ints"], np.int64)
    else:
        raise Unsupported(f"Constant with attribute(s) {sorted(a)} is not supported")
    return [cv.weight(arr, node.outputs[0])]


@register("Cast")
def _cast(cv: GraphConverter, node: Node) -> Values:
    elem = onnx_elem_type(node.attrs["to"])
    return emit(cv, E.CastOp, node, [node.inputs[0]], result_types=[_ty(cv, node, 0, elem)])


@register("CastLike")
def _castlike(cv: GraphConverter, node: Node) -> Values:
    elem = B.elem_of(node.inputs[1])
    return emit(cv, E.CastOp, node, [node.inputs[0]], result_types=[_ty(cv, node, 0, elem)])


@register("Clip")
def _clip(cv: GraphConverter, node: Node) -> Values:
    if node.opset < 11:
        lo = node.attrs.get("min", -3.4028234663852886e38)
        hi = node.attrs.get("max", 3.4028234663852886e38)
        ops = [
            node.inputs[0],
            cv.weight(np.array(lo, np.float32), node.outputs[0] + "_min"),
            cv.weight(np.array(hi, np.float32), node.outputs[0] + "_max"),
        ]
        return emit(cv, E.ClipOp, node, ops)
    return emit(cv, E.ClipOp, node)


@register("Dropout")
def _dropout(cv: GraphConverter, node: Node) -> Values:
    ops = _operands(E.DropoutOp, node) if node.opset >= 12 else [node.inputs[0], None, None]
    return emit(cv, E.DropoutOp, node, ops)


# ---- tensor ------------------------------------------------------------------------------------


@register("Reshape")
def _reshape(cv: GraphConverter, node: Node) -> Values:
    if node.opset < 5:
        return emit(
            cv, T.ReshapeOp, node, [node.inputs[0], _weight_i64(cv, node, node.attrs["shape"], "shape")]
        )
    return emit(cv, T.ReshapeOp, node)


def _axes_operand(cv: GraphConverter, node: Node, since: int, idx: int = 1) -> Value | None:
    """The axes as an operand: the input (opset ≥ ``since``) or the old attribute as a weight."""
    if node.opset >= since:
        return node.input(idx)
    axes = node.attrs.get("axes")
    return None if axes is None else _weight_i64(cv, node, axes, "axes")


@register("Squeeze")
def _squeeze(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, T.SqueezeOp, node, [node.inputs[0], _axes_operand(cv, node, 13)])


@register("Unsqueeze")
def _unsqueeze(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, T.UnsqueezeOp, node, [node.inputs[0], _axes_operand(cv, node, 13)])


@register("Slice")
def _slice(cv: GraphConverter, node: Node) -> Values:
    if node.opset < 10:
        a = node.attrs
        ops = [
            node.inputs[0],
            _weight_i64(cv, node, a["starts"], "starts"),
            _weight_i64(cv, node, a["ends"], "ends"),
            _weight_i64(cv, node, a["axes"], "axes") if "axes" in a else None,
            None,
        ]
        return emit(cv, T.SliceOp, node, ops)
    return emit(cv, T.SliceOp, node)


@register("Split")
def _split(cv: GraphConverter, node: Node) -> Values:
    split = (
        node.input(1)
        if node.opset >= 13
        else (_weight_i64(cv, node, node.attrs["split"], "split") if "split" in node.attrs else None)
    )
    n = len(node.outputs)
    return emit(
        cv,
        T.SplitOp,
        node,
        [node.inputs[0], split],
        result_types=[_ty(cv, node, i) for i in range(n)],
        num_outputs=None,
    )


@register("ConstantOfShape")
def _cos(cv: GraphConverter, node: Node) -> Values:
    v = node.attrs.get("value")
    if v is None:
        v = np.zeros((1,), np.float32)
    elem = B.type_of_array(np.asarray(v)).element_type
    return emit(
        cv,
        T.ConstantOfShapeOp,
        node,
        [node.inputs[0]],
        result_types=[_ty(cv, node, 0, elem)],
        value=DenseElementsAttr.from_numpy(np.asarray(v).reshape(-1)),
    )


@register("EyeLike")
def _eyelike(cv: GraphConverter, node: Node) -> Values:
    dt = node.attrs.get("dtype")
    elem = onnx_elem_type(dt) if dt is not None else B.elem_of(node.inputs[0])
    return emit(cv, T.EyeLikeOp, node, [node.inputs[0]], result_types=[_ty(cv, node, 0, elem)])


@register("Pad")
def _pad(cv: GraphConverter, node: Node) -> Values:
    if node.opset < 11:
        a = node.attrs
        pads = _weight_i64(cv, node, a.get("pads", a.get("paddings", [])), "pads")
        val = cv.weight(np.array(a.get("value", 0.0), np.float32), node.outputs[0] + "_value")
        return emit(cv, T.PadOp, node, [node.inputs[0], pads, val, None])
    return emit(cv, T.PadOp, node)


@register("TopK")
def _topk(cv: GraphConverter, node: Node) -> Values:
    k = node.input(1) if node.opset >= 10 else _weight_i64(cv, node, [node.attrs["k"]], "k")
    return emit(cv, T.TopKOp, node, [node.inputs[0], k])


# ---- reductions --------------------------------------------------------------------------------

_REDUCE_AXES_INPUT_SINCE = {"ReduceSum": 13}
for _m in R._MODES:

    def _mk(mode: str) -> Any:
        def conv(cv: GraphConverter, node: Node) -> Values:
            axes = _axes_operand(cv, node, _REDUCE_AXES_INPUT_SINCE.get(mode, 18))
            return emit(cv, R.ReduceOp, node, [node.inputs[0], axes], mode=mode)

        return conv

    CONVERTERS[_m] = _mk(_m)


@register("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool")
def _global_pool(cv: GraphConverter, node: Node) -> Values:
    rank = len(B.shape_of(node.inputs[0]) or ())
    if not rank:
        raise Unsupported("input rank must be known")
    if node.op_type == "GlobalLpPool":
        raise Unsupported("GlobalLpPool is not supported")
    mode = "ReduceMean" if node.op_type == "GlobalAveragePool" else "ReduceMax"
    axes = _weight_i64(cv, node, list(range(2, rank)), "axes")
    return emit(cv, R.ReduceOp, node, [node.inputs[0], axes], mode=mode, keepdims=1)


# ---- nn ----------------------------------------------------------------------------------------


@register("Conv")
def _conv(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, N.ConvOp, node)


@register("MaxPool")
def _maxpool(cv: GraphConverter, node: Node) -> Values:
    names = list(node.outputs) + [""] * (2 - len(node.outputs))
    return emit(cv, N.MaxPoolOp, node, [node.inputs[0]], names=names)


@register("AveragePool")
def _avgpool(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, N.AvgPoolOp, node, [node.inputs[0]])


@register("BatchNormalization")
def _bn(cv: GraphConverter, node: Node) -> Values:
    if len([o for o in node.outputs if o]) > 1 or node.attrs.get("training_mode"):
        raise Unsupported("training-mode BatchNormalization is not supported")
    return emit(cv, N.BatchNormOp, node)


@register("LayerNormalization")
def _ln(cv: GraphConverter, node: Node) -> Values:
    names = list(node.outputs) + [""] * (3 - len(node.outputs))
    return emit(cv, N.LayerNormOp, node, names=names)


@register("GroupNormalization")
def _gn(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, N.GroupNormOp, node)


@register("RMSNormalization")
def _rms(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, N.RMSNormOp, node)


def _softmax_like(cv: GraphConverter, node: Node, cls: type, **fixed: Any) -> Values:
    if node.opset >= 13:
        return emit(cv, cls, node, **fixed)
    # opsets < 13: coerce to 2-D at ``axis`` (default 1), softmax over the second dim, reshape back
    x = node.inputs[0]
    axis = node.attrs.get("axis", 1)
    shape = B.shape_of(x)
    if shape is None:
        raise Unsupported("opset < 13 softmax needs a ranked input")
    tmp = node.outputs[0] + "_2d"
    fl = cv.emit(
        T.FlattenOp, [x], None, {"axis": B.I(axis)}, [UnrankedTensorType(B.elem_of(x))], [tmp]
    ).results[0]
    fixed = {k: v for k, v in fixed.items()}
    sm = cv.emit(
        cls,
        [fl],
        None,
        {"axis": B.I(1), **{k: to_prop(cls, k, v) for k, v in fixed.items()}},
        [fl.type],
        [tmp + "_sm"],
    ).results[0]
    shp = cv.emit(
        T.ShapeOp,
        [x],
        None,
        {},
        [RankedTensorType([len(shape)], B.i64 if hasattr(B, "i64") else _i64())],
        [tmp + "_shape"],
    ).results[0]
    return [cv.emit(T.ReshapeOp, [sm, shp], node, {}, [_ty(cv, node)]).results[0]]


def _i64() -> Type:
    from lamina.ir.types import i64

    return i64


@register("Softmax")
def _softmax(cv: GraphConverter, node: Node) -> Values:
    return _softmax_like(cv, node, N.SoftmaxOp)


@register("LogSoftmax")
def _logsoftmax(cv: GraphConverter, node: Node) -> Values:
    return _softmax_like(cv, node, N.SoftmaxOp, log=1)


@register("Hardmax")
def _hardmax(cv: GraphConverter, node: Node) -> Values:
    return _softmax_like(cv, node, N.HardmaxOp)


# ---- control flow ------------------------------------------------------------------------------


@register("If")
def _if(cv: GraphConverter, node: Node) -> Values:
    then_r = cv.subgraph(node.attrs["then_branch"])
    else_r = cv.subgraph(node.attrs["else_branch"])
    types = [_ty(cv, node, i) for i in range(len(node.outputs))]
    op = cv.emit(C.IfOp, [node.inputs[0]], node, {}, types, regions=[then_r, else_r])
    return list(op.results)


@register("Loop")
def _loop(cv: GraphConverter, node: Node) -> Values:
    carried = node.inputs[2:]
    from lamina.ir.types import i64

    arg_types = [RankedTensorType([], i64), RankedTensorType([], i1)] + [
        v.type for v in carried if v is not None
    ]
    body = cv.subgraph(node.attrs["body"], arg_types)
    types = [_ty(cv, node, i) for i in range(len(node.outputs))]
    op = cv.emit(C.LoopOp, [node.input(0), node.input(1), *carried], node, {}, types, regions=[body])
    return list(op.results)


@register("Scan")
def _scan(cv: GraphConverter, node: Node) -> Values:
    if node.opset < 9:
        raise Unsupported("Scan before opset 9 (with sequence_lens) is not supported")
    body = cv.subgraph(node.attrs["body"])
    types = [_ty(cv, node, i) for i in range(len(node.outputs))]
    props = _props(C.ScanOp, node)
    op = cv.emit(C.ScanOp, list(node.inputs), node, props, types, regions=[body])
    return list(op.results)


_ = (Any, f32)


# ---- extra: resize, attention, quantization, losses --------------------------------------------

from lamina.dialects.top import extra as X  # noqa: E402, N812

simple("NegativeLogLikelihoodLoss", X.NLLLossOp)
simple("RotaryEmbedding", X.RotaryEmbeddingOp)


def _padded_names(node: Node, n: int) -> list[str]:
    return list(node.outputs) + [""] * (n - len(node.outputs))


@register("SoftmaxCrossEntropyLoss")
def _sce(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, X.SoftmaxCrossEntropyLossOp, node, names=_padded_names(node, 2))


@register("Attention")
def _attention(cv: GraphConverter, node: Node) -> Values:
    fixed: dict[str, Any] = {}
    sp = node.attrs.get("softmax_precision")
    if sp is not None:  # an ONNX element type code: stored as the element type it names
        fixed["softmax_precision"] = TypeAttr(onnx_elem_type(int(sp)))
    return emit(cv, X.AttentionOp, node, names=_padded_names(node, 4), **fixed)


@register("Resize")
def _resize(cv: GraphConverter, node: Node) -> Values:
    if node.attrs.get("antialias"):
        raise Unsupported("antialiased Resize is not supported")
    if node.opset < 11:
        return emit(
            cv,
            X.InterpOp,
            node,
            [node.inputs[0], None, node.inputs[1], None],
            coordinate_transformation_mode="asymmetric",
            nearest_mode="floor",
        )
    return emit(cv, X.InterpOp, node)


@register("Upsample")
def _upsample(cv: GraphConverter, node: Node) -> Values:
    mode = node.attrs.get("mode", "nearest")
    mode = "linear" if mode in ("linear", "bilinear") else mode
    if node.opset < 9:
        scales = cv.weight(np.asarray(node.attrs["scales"], np.float32), node.outputs[0] + "_scales")
    else:
        scales = node.inputs[1]
    return emit(
        cv,
        X.InterpOp,
        node,
        [node.inputs[0], None, scales, None],
        mode=mode,
        coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )


_QRANGE = {(4, "s"): (-8, 7), (4, ""): (-8, 7), (4, "u"): (0, 15)}


@register("QuantizeLinear")
def _quantize(cv: GraphConverter, node: Node) -> Values:
    zp = node.input(2)
    if zp is not None:
        elem = B.elem_of(zp)
    elif node.attrs.get("output_dtype"):
        elem = onnx_elem_type(node.attrs["output_dtype"])
    else:
        from lamina.ir.types import IntegerType

        elem = IntegerType(8, "u")
    rng = _QRANGE.get((getattr(elem, "width", 0), getattr(elem, "signedness", "")))
    extra = {"qmin": rng[0], "qmax": rng[1]} if rng else {}
    return emit(cv, X.QuantizeLinearOp, node, result_types=[_ty(cv, node, 0, elem)], **extra)


@register("DequantizeLinear")
def _dequantize(cv: GraphConverter, node: Node) -> Values:
    od = node.attrs.get("output_dtype")
    elem = onnx_elem_type(od) if od else B.elem_of(node.inputs[1])
    return emit(cv, X.DequantizeLinearOp, node, result_types=[_ty(cv, node, 0, elem)])


@register("LSTM", "GRU", "RNN")
def _rnn(cv: GraphConverter, node: Node) -> Values:
    cls = {"LSTM": X.LSTMOp, "GRU": X.GRUOp, "RNN": X.RNNOp}[node.op_type]
    n = len(cls.op_def.results)
    return emit(cv, cls, node, names=_padded_names(node, n))


# ---- detection: NonMaxSuppression, GridSample, RoiAlign -----------------------------------------

from lamina.dialects.top import detection as D  # noqa: E402, N812

simple("NonMaxSuppression", D.NmsOp)
simple("RoiAlign", D.RoiAlignOp)

_GRID_MODES = {
    "bilinear": "linear",
    "bicubic": "cubic",
    "linear": "linear",
    "cubic": "cubic",
    "nearest": "nearest",
}


@register("GridSample")
def _grid_sample(cv: GraphConverter, node: Node) -> Values:
    mode = node.attrs.get("mode", "linear" if node.opset >= 20 else "bilinear")
    if mode not in _GRID_MODES:
        raise Unsupported(f"GridSample mode '{mode}' is not supported")
    return emit(cv, D.GridSampleOp, node, mode=_GRID_MODES[mode])


# ---- integer ops of quantized models ----------------------------------------------------------

from lamina.dialects.top import integer as Q  # noqa: E402, N812

simple("MatMulInteger", Q.MatMulIntegerOp)
simple("ConvInteger", Q.ConvIntegerOp)
simple("QLinearMatMul", Q.QLinearMatMulOp)
simple("QLinearConv", Q.QLinearConvOp)


@register("DynamicQuantizeLinear")
def _dyn_quant(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, Q.DynamicQuantizeLinearOp, node, names=_padded_names(node, 3))


# ---- signal processing ----------------------------------------------------------------------------

from lamina.dialects.top import signal as SG  # noqa: E402, N812


@register("DFT")
def _dft(cv: GraphConverter, node: Node) -> Values:
    if node.opset >= 20:
        ax_v = node.input(2)
        c = cv.const(ax_v) if ax_v is not None else None
        if c is not None:
            return emit(cv, SG.DFTOp, node, [node.inputs[0], node.input(1), None], axis=int(c.reshape(-1)[0]))
        return emit(cv, SG.DFTOp, node, [node.inputs[0], node.input(1), ax_v], axis=-2)
    return emit(cv, SG.DFTOp, node, [node.inputs[0], node.input(1), None], axis=node.attrs.get("axis", 1))


simple("STFT", SG.STFTOp)


def _window(mode: str) -> Any:
    def conv(cv: GraphConverter, node: Node) -> Values:
        elem = onnx_elem_type(node.attrs.get("output_datatype", 1))
        return emit(
            cv,
            SG.WindowOp,
            node,
            [node.inputs[0]],
            result_types=[_ty(cv, node, 0, elem)],
            mode=mode,
            periodic=node.attrs.get("periodic", 1),
        )

    return conv


for _onnx, _mode in [("HannWindow", "hann"), ("HammingWindow", "hamming"), ("BlackmanWindow", "blackman")]:
    CONVERTERS[_onnx] = _window(_mode)


@register("MelWeightMatrix")
def _mel(cv: GraphConverter, node: Node) -> Values:
    elem = onnx_elem_type(node.attrs.get("output_datatype", 1))
    return emit(cv, SG.MelWeightMatrixOp, node, result_types=[_ty(cv, node, 0, elem)])


# ---- misc: Unique, CenterCropPad, Col2Im, AffineGrid, MaxUnpool, BitCast, Det -------------------

from lamina.dialects.top import misc as MI  # noqa: E402, N812

simple("CenterCropPad", MI.CenterCropPadOp)
simple("Col2Im", MI.Col2ImOp)
simple("AffineGrid", MI.AffineGridOp)
simple("MaxUnpool", MI.MaxUnpoolOp)
simple("Det", MI.DetOp)


@register("Unique")
def _unique(cv: GraphConverter, node: Node) -> Values:
    return emit(cv, MI.UniqueOp, node, names=_padded_names(node, 4))


@register("BitCast")
def _bitcast(cv: GraphConverter, node: Node) -> Values:
    elem = onnx_elem_type(node.attrs["to"])
    return emit(cv, MI.BitCastOp, node, [node.inputs[0]], result_types=[_ty(cv, node, 0, elem)])

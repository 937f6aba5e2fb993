"""TFLite operator → ``top`` converters, registered by op name in :data:`.registry.CONVERTERS`.

A converter receives the :class:`~.importer.TfliteConverter` and the :class:`~.reader.Operator`
(tensor indices, the options table) and binds each output tensor with ``cv.bind(index, value, nchw)``.
Layout-sensitive ops (convolutions, pools, resizes, depth/space) read their input in NCHW and bind
their output in NCHW; layout-free ops (elementwise, concatenation, padding, reductions, softmax over
channels) work in the layout their input already has (see :func:`_use_nchw`), everything else in
TFLite's own layout. Adding an op: a ``@register("NAME")`` function here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np

from lamina.dialects.top import elementwise as E  # noqa: N812
from lamina.dialects.top import extra as X  # noqa: N812
from lamina.dialects.top import nn as N  # noqa: N812
from lamina.dialects.top import reduce as R  # noqa: N812
from lamina.dialects.top import tensor as T  # noqa: N812
from lamina.ir.core import Value
from lamina.ir.types import RankedTensorType

from .quantization import is_quantized
from .registry import (
    CONVERTERS,
    TO_NCHW,
    Invalid,
    Unsupported,
    element_type,
    register,
    tensor_type,
    value_dtype,
)

if TYPE_CHECKING:
    from .importer import TfliteConverter
    from .reader import Operator

Cv: TypeAlias = "TfliteConverter"

_INT64_MAX = np.iinfo(np.int64).max
_INT64_MIN = np.iinfo(np.int64).min


# ---- helpers -----------------------------------------------------------------------------------


def _opt(op: Operator, getter: str, default: Any = 0) -> Any:
    o = op.options
    return default if o is None else getattr(o, getter)()


def _rank(cv: Cv, i: int) -> int:
    return len(cv.tensor(i).shape)


def _act_name(cv: Cv, o: int, nchw: bool, act: int) -> str:
    """The name of the op computing output ``o`` before its fused activation (if any). In a
    quantized model it carries ``o``'s quantization: TFLite's kernels requantize to the output's
    scale and zero point, then clamp to the activation's range."""
    name = cv.out_name(o, nchw) + ("_preact" if act else "")
    cv.tag(name, o)
    return name


def _activation(cv: Cv, v: Value, act: int, o: int, nchw: bool) -> None:
    """Apply a fused activation (``ActivationFunctionType``) and bind output ``o``."""
    name = cv.out_name(o, nchw)
    if act == 1:
        v = cv.emit(E.ReluOp, [v], name)
    elif act in (2, 3):
        lo, hi = (-1.0, 1.0) if act == 2 else (0.0, 6.0)
        v = _clip(cv, v, lo, hi, name)
    elif act == 4:
        v = cv.emit(E.TanhOp, [v], name)
    elif act != 0:
        raise Unsupported(f"fused activation {act} (SIGN_BIT) is not supported")
    cv.bind(o, v, nchw)


def _clip(cv: Cv, v: Value, lo: float, hi: float, name: str) -> Value:
    return cv.emit(
        E.ClipOp,
        [
            v,
            cv.weight(np.array(lo, np.float32), name + "_min"),
            cv.weight(np.array(hi, np.float32), name + "_max"),
        ],
        name,
    )


def _const_rank(cv: Cv, i: int) -> int | None:
    """The rank of tensor ``i`` if it is a constant, else None."""
    c = cv.const(i)
    return None if c is None else c.ndim


def _use_nchw(cv: Cv, ins: Sequence[int]) -> bool:
    """Whether a layout-free op on tensors ``ins`` works in NCHW: one of its activation inputs
    already exists in NCHW, every activation input is rank 4 and every constant at most rank 4."""
    acts = [i for i in ins if i >= 0 and cv.const(i) is None]
    if not acts or not any(cv.has_nchw(i) for i in acts):
        return False
    if any(_rank(cv, i) != 4 for i in acts):
        return False
    return all((_const_rank(cv, i) or 0) <= 4 for i in ins if i >= 0)


def _same_pads(in_hw: Sequence[int], k: Sequence[int], s: Sequence[int], d: Sequence[int]) -> list[int]:
    """ONNX pads ``[h0, w0, h1, w1]`` of TFLite's SAME padding (the odd pixel at the end)."""
    begin, end = [], []
    for n, kk, ss, dd in zip(in_hw, k, s, d):
        out = -(-n // ss)
        total = max((out - 1) * ss + (kk - 1) * dd + 1 - n, 0)
        begin.append(total // 2)
        end.append(total - total // 2)
    return begin + end


def _pads(op: Operator, cv: Cv, k: Sequence[int], s: Sequence[int], d: Sequence[int]) -> list[int]:
    padding = _opt(op, "Padding")
    if padding == 1:  # VALID
        return [0, 0, 0, 0]
    shape = cv.tensor(op.inputs[0]).shape
    if len(shape) != 4:
        raise Invalid(f"input must be rank 4 (NHWC), got shape {list(shape)}")
    return _same_pads(shape[1:3], k, s, d)


def _bias(cv: Cv, op: Operator, k: int) -> Value | None:
    if len(op.inputs) <= k or op.inputs[k] < 0:
        return None
    c = cv.const(op.inputs[k])
    if c is None:
        raise Unsupported("a non-constant bias is not supported")
    return cv.weight(c.astype(np.float32), cv.name(op.inputs[k]))


# ---- convolutions and pools ----------------------------------------------------------------


@register("CONV_2D", "DEPTHWISE_CONV_2D")
def _conv(cv: Cv, op: Operator) -> None:
    w = cv.need_const(op, 1, "filter").astype(np.float32)
    if w.ndim != 4:
        raise Invalid(f"filter must be rank 4, got shape {list(w.shape)}")
    cin = cv.tensor(op.inputs[0]).shape[3]
    if op.op == "CONV_2D":
        filt, group = w.transpose(0, 3, 1, 2), cin // max(w.shape[3], 1)  # OHWI → OIHW
    else:
        filt, group = w.transpose(3, 0, 1, 2), cin  # 1HW(C·M) → (C·M)1HW
    k = list(filt.shape[2:])
    s = [_opt(op, "StrideH", 1), _opt(op, "StrideW", 1)]
    d = [_opt(op, "DilationHFactor", 1), _opt(op, "DilationWFactor", 1)]
    o, act = op.outputs[0], _opt(op, "FusedActivationFunction")
    v = cv.emit(
        N.ConvOp,
        [
            cv.get_nchw(op.inputs[0]),
            cv.weight(np.ascontiguousarray(filt), cv.name(op.inputs[1]) + "_oihw"),
            _bias(cv, op, 2),
        ],
        _act_name(cv, o, True, act),
        {"kernel_shape": k, "strides": s, "dilations": d, "pads": _pads(op, cv, k, s, d), "group": group},
    )
    _activation(cv, v, act, o, True)


@register("TRANSPOSE_CONV")
def _transpose_conv(cv: Cv, op: Operator) -> None:
    out_shape = [int(x) for x in cv.need_const(op, 0, "output shape")]
    s = [_opt(op, "StrideH", 1), _opt(op, "StrideW", 1)]
    act = _opt(op, "FusedActivationFunction")
    _deconv(cv, op, op.inputs[2], 1, 3, out_shape, _opt(op, "Padding") == 0, s, act)


@register("Convolution2DTransposeBias")
def _conv2d_transpose_bias(cv: Cv, op: Operator) -> None:
    """MediaPipe's custom transposed convolution with bias: inputs (input, weights OHWI, bias),
    options a ``TfLiteTransposeConvParams`` struct (int32 padding: 1 SAME, 2 VALID; stride_width;
    stride_height)."""
    if len(op.custom_options) < 12:
        raise Invalid(f"custom options hold {len(op.custom_options)} bytes, 12 expected")
    padding, sw, sh = (int(v) for v in np.frombuffer(op.custom_options[:12], "<i4"))
    if padding not in (1, 2) or sw < 1 or sh < 1:
        raise Invalid(f"padding {padding} and strides ({sh}, {sw}) are not valid")
    out_shape = list(cv.tensor(op.outputs[0]).shape)
    _deconv(cv, op, op.inputs[0], 1, 2, out_shape, padding == 1, [sh, sw], 0)


def _deconv(
    cv: Cv, op: Operator, x: int, wi: int, bi: int, out_shape: list[int], same: bool, s: list[int], act: int
) -> None:
    """A transposed convolution of tensor ``x`` with the OHWI filter ``op.inputs[wi]`` and bias
    ``op.inputs[bi]`` giving ``out_shape`` (NHWC): TFLite's padding is the forward convolution's
    from ``out_shape`` to the input; what it leaves over is ONNX's ``output_padding``."""
    w = cv.need_const(op, wi, "filter").astype(np.float32)
    if w.ndim != 4 or len(out_shape) != 4:
        raise Invalid(f"filter {list(w.shape)} and output shape {out_shape} must be rank 4")
    k = [w.shape[1], w.shape[2]]
    ins = cv.tensor(x).shape
    pads = _same_pads(out_shape[1:3], k, s, [1, 1]) if same else [0, 0, 0, 0]
    outpad = [out_shape[1 + i] - ((ins[1 + i] - 1) * s[i] + k[i] - pads[i] - pads[2 + i]) for i in range(2)]
    if any(p < 0 or p >= s[i] for i, p in enumerate(outpad)):
        raise Invalid(f"output shape {out_shape} does not fit the input shape {list(ins)}")
    o = op.outputs[0]
    filt = np.ascontiguousarray(w.transpose(3, 0, 1, 2))  # IOHW
    v = cv.emit(
        N.DeconvOp,
        [cv.get_nchw(x), cv.weight(filt, cv.name(op.inputs[wi]) + "_iohw"), _bias(cv, op, bi)],
        _act_name(cv, o, True, act),
        {"kernel_shape": k, "strides": s, "pads": pads, "output_padding": outpad},
    )
    _activation(cv, v, act, o, True)


@register("AVERAGE_POOL_2D", "MAX_POOL_2D")
def _pool(cv: Cv, op: Operator) -> None:
    k = [_opt(op, "FilterHeight", 1), _opt(op, "FilterWidth", 1)]
    s = [_opt(op, "StrideH", 1), _opt(op, "StrideW", 1)]
    props: dict[str, Any] = {"kernel_shape": k, "strides": s, "pads": _pads(op, cv, k, s, [1, 1])}
    o, act = op.outputs[0], _opt(op, "FusedActivationFunction")
    name = _act_name(cv, o, True, act)
    x = cv.get_nchw(op.inputs[0])
    if op.op == "AVERAGE_POOL_2D":
        v = cv.emit(N.AvgPoolOp, [x], name, {**props, "count_include_pad": 0})
    else:
        mp = cv.emit_op(N.MaxPoolOp, [x], name, props)
        v = mp.results[0]
    _activation(cv, v, act, o, True)


@register("L2_POOL_2D")
def _l2_pool(cv: Cv, op: Operator) -> None:
    """``sqrt(mean(x²))`` over each window's elements inside the input (TFLite's count)."""
    k = [_opt(op, "FilterHeight", 1), _opt(op, "FilterWidth", 1)]
    s = [_opt(op, "StrideH", 1), _opt(op, "StrideW", 1)]
    props: dict[str, Any] = {"kernel_shape": k, "strides": s, "pads": _pads(op, cv, k, s, [1, 1])}
    o, act = op.outputs[0], _opt(op, "FusedActivationFunction")
    name = _act_name(cv, o, True, act)
    x = cv.get_nchw(op.inputs[0])
    sq = cv.emit(E.MulOp, [x, x], name + "_square")
    mean = cv.emit(N.AvgPoolOp, [sq], name + "_mean", {**props, "count_include_pad": 0})
    _activation(cv, cv.emit(E.SqrtOp, [mean], name), act, o, True)


# ---- matmul ------------------------------------------------------------------------------------


@register("FULLY_CONNECTED")
def _fc(cv: Cv, op: Operator) -> None:
    if _opt(op, "WeightsFormat") != 0:
        raise Unsupported("shuffled weights are not supported")
    w = cv.need_const(op, 1, "weights").astype(np.float32)  # [N, K]
    x, o = op.inputs[0], op.outputs[0]
    act = _opt(op, "FusedActivationFunction")
    xs = cv.tensor(x).shape
    kdim = w.shape[1]
    v = cv.get(x)
    if not _opt(op, "KeepNumDims", False) and len(xs) != 2:
        v = cv.reshape(v, [-1, kdim], cv.name(o) + "_flat")
        cv.tag(cv.name(o) + "_flat", x)
    wt = cv.weight(np.ascontiguousarray(w.T), cv.name(op.inputs[1]) + "_kn")
    v = cv.emit(N.MatMulOp, [v, wt, _bias(cv, op, 2)], _act_name(cv, o, False, act))
    out_shape = list(cv.tensor(o).shape)
    if out_shape and list(getattr(v.type, "shape", out_shape)) != out_shape:
        v = cv.reshape(v, out_shape, cv.name(o) + "_reshape")
        cv.tag(cv.name(o) + "_reshape", o)
    _activation(cv, v, act, o, False)


@register("BATCH_MATMUL")
def _batch_matmul(cv: Cv, op: Operator) -> None:
    vals = []
    for k, adj in ((0, _opt(op, "AdjX", False)), (1, _opt(op, "AdjY", False))):
        i = op.inputs[k]
        v = cv.get(i)
        if adj:
            r = _rank(cv, i)
            v = cv.permute(v, [*list(range(r - 2)), r - 1, r - 2], cv.name(i) + "_adj")
            cv.tag(cv.name(i) + "_adj", i)
        vals.append(v)
    cv.bind(op.outputs[0], cv.emit(N.MatMulOp, [vals[0], vals[1], None], cv.name(op.outputs[0])))


# ---- elementwise -------------------------------------------------------------------------------

_UNARY = {
    "RELU": E.ReluOp,
    "LOGISTIC": E.SigmoidOp,
    "TANH": E.TanhOp,
    "HARD_SWISH": E.HardSwishOp,
    "EXP": E.ExpOp,
    "LOG": E.LogOp,
    "SQRT": E.SqrtOp,
    "ABS": E.AbsOp,
    "NEG": E.NegOp,
    "FLOOR": E.FloorOp,
    "CEIL": E.CeilOp,
    "SIN": E.SinOp,
    "COS": E.CosOp,
    "ELU": E.EluOp,
    "SIGN": E.SignOp,
}


def _unary(cv: Cv, op: Operator) -> tuple[Value, int, bool]:
    x = op.inputs[0]
    nchw = cv.has_nchw(x)
    return (cv.get_nchw(x) if nchw else cv.get(x)), op.outputs[0], nchw


def _simple_unary(cls: type) -> Any:
    def conv(cv: Cv, op: Operator) -> None:
        v, o, nchw = _unary(cv, op)
        cv.bind(o, cv.emit(cls, [v], cv.out_name(o, nchw)), nchw)

    return conv


for _name, _cls in _UNARY.items():
    CONVERTERS[_name] = _simple_unary(_cls)


@register("RELU6", "RELU_N1_TO_1", "RELU_0_TO_1")
def _relu_n(cv: Cv, op: Operator) -> None:
    v, o, nchw = _unary(cv, op)
    lo, hi = {"RELU6": (0.0, 6.0), "RELU_N1_TO_1": (-1.0, 1.0), "RELU_0_TO_1": (0.0, 1.0)}[op.op]
    cv.bind(o, _clip(cv, v, lo, hi, cv.out_name(o, nchw)), nchw)


@register("LEAKY_RELU")
def _leaky(cv: Cv, op: Operator) -> None:
    v, o, nchw = _unary(cv, op)
    cv.bind(
        o, cv.emit(E.LeakyReluOp, [v], cv.out_name(o, nchw), {"alpha": float(_opt(op, "Alpha", 0.2))}), nchw
    )


@register("GELU")
def _gelu(cv: Cv, op: Operator) -> None:
    v, o, nchw = _unary(cv, op)
    approx = "tanh" if _opt(op, "Approximate", False) else "none"
    cv.bind(o, cv.emit(E.GELUOp, [v], cv.out_name(o, nchw), {"approximate": approx}), nchw)


@register("RSQRT")
def _rsqrt(cv: Cv, op: Operator) -> None:
    v, o, nchw = _unary(cv, op)
    s = cv.emit(E.SqrtOp, [v], cv.out_name(o, nchw) + "_sqrt")
    cv.bind(o, cv.emit(E.ReciprocalOp, [s], cv.out_name(o, nchw)), nchw)


@register("SQUARE")
def _square(cv: Cv, op: Operator) -> None:
    v, o, nchw = _unary(cv, op)
    cv.bind(o, cv.emit(E.MulOp, [v, v], cv.out_name(o, nchw)), nchw)


_BINARY = {
    "ADD": E.AddOp,
    "SUB": E.SubOp,
    "MUL": E.MulOp,
    "DIV": E.DivOp,
    "MAXIMUM": E.MaxOp,
    "MINIMUM": E.MinOp,
    "POW": E.PowOp,
    "PRELU": E.PReluOp,
    "SQUARED_DIFFERENCE": E.SubOp,
}


def _binary(cv: Cv, op: Operator) -> None:
    nchw = _use_nchw(cv, op.inputs[:2])
    a, b = (cv.get_as(i, nchw) for i in op.inputs[:2])
    o, act = op.outputs[0], _opt(op, "FusedActivationFunction")
    name = _act_name(cv, o, nchw, act)
    if op.op == "SQUARED_DIFFERENCE":
        d = cv.emit(E.SubOp, [a, b], name + "_diff")
        v = cv.emit(E.MulOp, [d, d], name)
    else:
        v = cv.emit(_BINARY[op.op], [a, b], name)
    _activation(cv, v, act, o, nchw)


for _name in _BINARY:
    CONVERTERS[_name] = _binary


_COMPARE = {
    "LESS": "Less",
    "LESS_EQUAL": "LessOrEqual",
    "GREATER": "Greater",
    "GREATER_EQUAL": "GreaterOrEqual",
    "EQUAL": "Equal",
    "NOT_EQUAL": "NotEqual",
    "LOGICAL_AND": "And",
    "LOGICAL_OR": "Or",
}


@register(*_COMPARE)
def _compare(cv: Cv, op: Operator) -> None:
    """Comparisons and logic (``top.Compare``, a bool result); quantized operands compare their real
    values, as TFLite's kernels do after rescaling."""
    nchw = _use_nchw(cv, op.inputs[:2])
    a, b = (cv.get_as(i, nchw) for i in op.inputs[:2])
    o = op.outputs[0]
    cv.bind(o, cv.emit(E.CompareOp, [a, b], cv.out_name(o, nchw), {"mode": _COMPARE[op.op]}), nchw)


@register("LOGICAL_NOT")
def _not(cv: Cv, op: Operator) -> None:
    v, o, nchw = _unary(cv, op)
    cv.bind(o, cv.emit(E.NotOp, [v], cv.out_name(o, nchw)), nchw)


@register("SELECT", "SELECT_V2")
def _select(cv: Cv, op: Operator) -> None:
    """``cond ? x : y`` (SELECT_V2 broadcasts; SELECT's rank-1 condition picks rows)."""
    c, x, y = op.inputs[:3]
    cond = cv.get(c)
    if op.op == "SELECT" and _rank(cv, c) == 1 and _rank(cv, x) > 1:
        cond = cv.reshape(cond, [cv.tensor(c).shape[0]] + [1] * (_rank(cv, x) - 1), cv.name(c) + "_rows")
    o = op.outputs[0]
    cv.bind(o, cv.emit(E.WhereOp, [cond, cv.get(x), cv.get(y)], cv.name(o)))


@register("ADD_N")
def _add_n(cv: Cv, op: Operator) -> None:
    nchw = _use_nchw(cv, op.inputs)
    cv.bind(
        op.outputs[0],
        cv.emit(E.AddOp, [cv.get_as(i, nchw) for i in op.inputs], cv.out_name(op.outputs[0], nchw)),
        nchw,
    )


@register("CAST", "DEQUANTIZE")
def _cast(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    if op.op == "DEQUANTIZE" and is_quantized(cv.tensor(x)):
        # a quantized activation's value in top is already its real value: the float tensor is it
        cv.values[o] = dict(cv.values.get(x) or {"tfl": cv.get(x)})
        return
    tx, to = cv.tensor(x), cv.tensor(o)
    if is_quantized(tx) or is_quantized(to):
        # CAST converts stored integers: a quantized input's integers are its value quantized, a
        # quantized output's real value its integers dequantized
        v = cv.get(x)
        if is_quantized(tx):
            v = cv.quantize(v, tx, cv.name(o) + "_input_integers")
        v = cv.emit(
            E.CastOp, [v], cv.name(o) + ("_integers" if is_quantized(to) else ""), result_type=tensor_type(to)
        )
        cv.bind(o, cv.dequantize(v, to, cv.name(o)) if is_quantized(to) else v)
        return
    cv.bind(o, cv.emit(E.CastOp, [cv.get(x)], cv.name(o), result_type=tensor_type(to)))


@register("QUANTIZE")
def _quantize(cv: Cv, op: Operator) -> None:
    """Float → quantized, or quantized → quantized with other parameters (a requantization): in the
    float ``top`` model, rounding to the output's grid, ``DequantizeLinear(QuantizeLinear(x))``
    (the integers located ``<output>_quantized``, the real values ``<output>``)."""
    x, o = op.inputs[0], op.outputs[0]
    t = cv.tensor(o)
    if not is_quantized(t):
        raise Unsupported(f"QUANTIZE to {t.dtype} without a scale is not supported")
    nchw = cv.has_nchw(x) and _rank(cv, x) == 4
    v = cv.get_nchw(x) if nchw else cv.get(x)
    assert t.quant is not None
    axis = TO_NCHW.index(t.quant.axis) if nchw and t.quant.scale.size > 1 else None
    name = cv.out_name(o, nchw)
    q = cv.quantize(v, t, name + "_quantized", axis)
    cv.bind(o, cv.dequantize(q, t, name, axis), nchw)


# ---- normalisation -----------------------------------------------------------------------------


@register("SOFTMAX", "LOG_SOFTMAX")
def _softmax(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    nchw = cv.has_nchw(x) and _rank(cv, x) == 4
    v = cv.get_nchw(x) if nchw else cv.get(x)
    beta = float(_opt(op, "Beta", 1.0)) if op.op == "SOFTMAX" else 1.0
    name = cv.out_name(o, nchw)
    if beta != 1.0:
        v = cv.emit(E.MulOp, [v, cv.weight(np.array(beta, np.float32), name + "_beta")], name + "_scaled")
    axis = 1 if nchw else -1
    cv.bind(o, cv.emit(N.SoftmaxOp, [v], name, {"axis": axis, "log": op.op == "LOG_SOFTMAX"}), nchw)


@register("L2_NORMALIZATION")
def _l2norm(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    nchw = cv.has_nchw(x) and _rank(cv, x) == 4
    v = cv.get_nchw(x) if nchw else cv.get(x)
    act = _opt(op, "FusedActivationFunction")
    n = cv.emit(N.LpNormOp, [v], _act_name(cv, o, nchw, act), {"axis": 1 if nchw else -1, "p": 2})
    _activation(cv, n, act, o, nchw)


# ---- reductions --------------------------------------------------------------------------------

_REDUCE = {
    "MEAN": "ReduceMean",
    "SUM": "ReduceSum",
    "REDUCE_MAX": "ReduceMax",
    "REDUCE_MIN": "ReduceMin",
    "REDUCE_PROD": "ReduceProd",
}


@register(*_REDUCE)
def _reduce(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    r = _rank(cv, x)
    axes = sorted({int(a) % r for a in np.atleast_1d(cv.need_const(op, 1, "axes"))}) if r else []
    keep = bool(_opt(op, "KeepDims", False))
    nchw_in = cv.has_nchw(x) and r == 4
    if nchw_in:
        left = [d for d in TO_NCHW if d not in axes]
        if not keep and left != sorted(left):
            nchw_in = False
    v = cv.get_nchw(x) if nchw_in else cv.get(x)
    ax = [TO_NCHW.index(a) for a in axes] if nchw_in else axes
    nchw_out = nchw_in and keep
    out = cv.emit(
        R.ReduceOp,
        [v, cv.i64(ax, cv.out_name(o, nchw_out) + "_axes")],
        cv.out_name(o, nchw_out),
        {"mode": _REDUCE[op.op], "keepdims": int(keep)},
    )
    cv.bind(o, out, nchw_out)


@register("ARG_MAX", "ARG_MIN")
def _arg(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    axis = int(np.atleast_1d(cv.need_const(op, 1, "axis"))[0]) % _rank(cv, x)
    mode = "ArgMax" if op.op == "ARG_MAX" else "ArgMin"
    v = cv.emit(R.ArgOp, [cv.get(x)], cv.name(o) + "_i64", {"axis": axis, "keepdims": 0, "mode": mode})
    cv.bind(o, cv.emit(E.CastOp, [v], cv.name(o), result_type=tensor_type(cv.tensor(o))))


# ---- shapes ------------------------------------------------------------------------------------


def _out_shape(cv: Cv, op: Operator) -> list[int]:
    shape = list(cv.tensor(op.outputs[0]).shape)
    given = cv.const(op.inputs[1]) if len(op.inputs) > 1 else None
    if not all(d > 0 for d in shape) and given is not None:
        shape = [int(d) for d in np.atleast_1d(given)]
    return shape


@register("RESHAPE", "SQUEEZE", "EXPAND_DIMS")
def _reshape(cv: Cv, op: Operator) -> None:
    o = op.outputs[0]
    cv.bind(o, cv.reshape(cv.get(op.inputs[0]), _out_shape(cv, op), cv.name(o)))


@register("TRANSPOSE")
def _transpose(cv: Cv, op: Operator) -> None:
    perm = [int(p) for p in cv.need_const(op, 1, "permutation")]
    cv.bind(op.outputs[0], cv.permute(cv.get(op.inputs[0]), perm, cv.name(op.outputs[0])))


@register("CONCATENATION")
def _concat(cv: Cv, op: Operator) -> None:
    o, act = op.outputs[0], _opt(op, "FusedActivationFunction")
    r = _rank(cv, o)
    axis = int(_opt(op, "Axis")) % max(r, 1)
    nchw = _use_nchw(cv, op.inputs) and all(_const_rank(cv, i) in (None, 4) for i in op.inputs)
    vals = [cv.get_as(i, nchw) for i in op.inputs]
    v = cv.emit(
        T.ConcatOp, vals, _act_name(cv, o, nchw, act), {"axis": TO_NCHW.index(axis) if nchw else axis}
    )
    _activation(cv, v, act, o, nchw)


@register("PAD", "PADV2", "MIRROR_PAD")
def _pad(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    p = np.asarray(cv.need_const(op, 1, "paddings"), np.int64).reshape(-1, 2)
    nchw = cv.has_nchw(x) and _rank(cv, x) == 4
    if nchw:
        p = p[list(TO_NCHW)]
    name = cv.out_name(o, nchw)
    v = cv.get_nchw(x) if nchw else cv.get(x)
    if op.op == "MIRROR_PAD" and _opt(op, "Mode") == 1:  # SYMMETRIC: the edge is repeated
        cv.bind(o, _symmetric_pad(cv, v, p, name, o), nchw)
        return
    mode = "reflect" if op.op == "MIRROR_PAD" else "constant"
    value = None
    if op.op == "PADV2" and len(op.inputs) > 2:
        value = cv.weight(
            np.asarray(cv.need_const(op, 2, "constant value"), np.float32).reshape(()), name + "_value"
        )
    pads = cv.i64(list(p[:, 0]) + list(p[:, 1]), name + "_pads")
    cv.bind(o, cv.emit(T.PadOp, [v, pads, value, None], name, {"mode": mode}), nchw)


def _symmetric_pad(cv: Cv, v: Value, p: np.ndarray, name: str, o: int) -> Value:
    """MIRROR_PAD's SYMMETRIC mode (``abc`` padded by 2 → ``ba abc cb``), which ``top.Pad`` has no
    mode for: per padded axis, the reversed edge slices concatenated around the tensor."""
    shape = list(getattr(v.type, "shape", ()))
    axes = [a for a in range(len(p)) if p[a, 0] or p[a, 1]]
    for k, a in enumerate(axes):
        n, (before, after) = shape[a], (int(p[a, 0]), int(p[a, 1]))
        if before > n or after > n:
            raise Invalid(f"SYMMETRIC paddings {[before, after]} exceed the dimension {a} of size {n}")
        step = f"{name}_axis{a}" if k < len(axes) - 1 else name
        parts = []
        if before:  # x[before-1 :: -1]
            parts.append(_rev_slice(cv, v, a, before - 1, _INT64_MIN, f"{step}_before", o))
        parts.append(v)
        if after:  # x[n-1 : n-1-after : -1]
            end = n - 1 - after if n - 1 - after >= 0 else _INT64_MIN
            parts.append(_rev_slice(cv, v, a, n - 1, end, f"{step}_after", o))
        v = cv.emit(T.ConcatOp, parts, step, {"axis": a})
        cv.tag(step, o)
        shape[a] = n + before + after
    return v


def _rev_slice(cv: Cv, v: Value, axis: int, start: int, end: int, name: str, o: int) -> Value:
    ops = [
        v,
        cv.i64([start], name + "_starts"),
        cv.i64([end], name + "_ends"),
        cv.i64([axis], name + "_axes"),
        cv.i64([-1], name + "_steps"),
    ]
    cv.tag(name, o)
    return cv.emit(T.SliceOp, ops, name)


@register("SLICE")
def _slice(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    shape = cv.tensor(x).shape
    begin = [int(b) for b in cv.need_const(op, 1, "begin")]
    size = [int(s) for s in cv.need_const(op, 2, "size")]
    end = [shape[i] if s == -1 else b + s for i, (b, s) in enumerate(zip(begin, size))]
    _emit_slice(cv, cv.get(x), begin, end, [1] * len(begin), cv.name(o), o)


def _emit_slice(cv: Cv, v: Value, b: list[int], e: list[int], s: list[int], name: str, o: int) -> None:
    ops = [
        v,
        cv.i64(b, name + "_starts"),
        cv.i64(e, name + "_ends"),
        cv.i64(list(range(len(b))), name + "_axes"),
        cv.i64(s, name + "_steps"),
    ]
    out_shape = list(cv.tensor(o).shape)
    sl_name = name if _slice_shape_ok(cv, ops, out_shape) else name + "_slice"
    sl = cv.emit(T.SliceOp, ops, sl_name)
    cv.tag(sl_name, o)
    if list(getattr(sl.type, "shape", [])) != out_shape:
        sl = cv.reshape(sl, out_shape, name)
    cv.bind(o, sl)


def _slice_shape_ok(cv: Cv, ops: list[Value], out_shape: list[int]) -> bool:
    """Whether the slice alone gives the output's shape (no reshape after it: it takes the name)."""
    from lamina.ir.constants import constant_array

    b, e, s = (constant_array(ops[k]) for k in (1, 2, 4))
    shape = getattr(ops[0].type, "shape", ())
    dims = [len(range(*slice(int(bb), int(ee), int(ss)).indices(d))) for bb, ee, ss, d in zip(b, e, s, shape)]
    return dims == out_shape


@register("STRIDED_SLICE")
def _strided_slice(cv: Cv, op: Operator) -> None:
    """TensorFlow's strided slice: the spec (begin, end, strides and the masks, one entry per spec
    position) is expanded to one ``(begin, end, stride)`` per input dimension — an ellipsis spans the
    dimensions the spec does not name, a new-axis entry names no input dimension — then sliced on
    every dimension and reshaped to the output's shape (which inserts the new axes and drops the
    shrunk ones)."""
    x, o = op.inputs[0], op.outputs[0]
    shape = cv.tensor(x).shape
    begin = [int(v) for v in np.atleast_1d(cv.need_const(op, 1, "begin"))]
    end = [int(v) for v in np.atleast_1d(cv.need_const(op, 2, "end"))]
    strides = [int(v) for v in np.atleast_1d(cv.need_const(op, 3, "strides"))]
    if not len(begin) == len(end) == len(strides):
        raise Invalid(f"begin, end and strides have {len(begin)}, {len(end)} and {len(strides)} entries")
    if any(st == 0 for st in strides):
        raise Invalid("a stride is 0")
    if _opt(op, "Offset", False):  # end is relative to begin
        end = [b + e for b, e in zip(begin, end)]
    bm, em, sm = _opt(op, "BeginMask"), _opt(op, "EndMask"), _opt(op, "ShrinkAxisMask")
    ellipsis, new_axis = _opt(op, "EllipsisMask"), _opt(op, "NewAxisMask")
    n, rank = len(begin), len(shape)
    first_ellipsis = next((i for i in range(n) if ellipsis >> i & 1), None)
    if first_ellipsis is not None and ellipsis >> (first_ellipsis + 1):
        raise Invalid("more than one ellipsis in the ellipsis mask")
    dense: list[tuple[int, int, int]] = []  # per input dimension
    i = 0
    spec = list(range(n)) if first_ellipsis is not None else [*range(n), -1]  # -1: implicit ellipsis
    for k in spec:
        if k == -1 or ellipsis >> k & 1:
            named_after = sum(1 for j in range(k + 1, n) if not (new_axis >> j & 1)) if k >= 0 else 0
            while i < rank - named_after:
                dense.append((0, _INT64_MAX, 1))
                i += 1
            continue
        if new_axis >> k & 1:
            continue
        if i >= rank:
            raise Invalid(f"the slice names {i + 1} dimensions of a rank-{rank} input")
        st = strides[k]
        b = 0 if st > 0 else -1
        e = _INT64_MAX if st > 0 else _INT64_MIN
        b = b if bm >> k & 1 else begin[k]
        e = e if em >> k & 1 else end[k]
        if sm >> k & 1:
            b = begin[k] + shape[i] if begin[k] < 0 else begin[k]
            b, e, st = b, b + 1, 1
        dense.append((b, e, st))
        i += 1
    bs, es, ss = (list(c) for c in zip(*dense)) if dense else ([], [], [])
    _emit_slice(cv, cv.get(x), bs, es, ss, cv.name(o), o)


@register("GATHER")
def _gather(cv: Cv, op: Operator) -> None:
    if _opt(op, "BatchDims"):
        raise Unsupported("GATHER with batch_dims is not supported")
    x, o = op.inputs[0], op.outputs[0]
    axis = int(_opt(op, "Axis")) % max(_rank(cv, x), 1)
    cv.bind(o, cv.emit(T.GatherOp, [cv.get(x), cv.get(op.inputs[1])], cv.name(o), {"axis": axis}))


@register("PACK")
def _pack(cv: Cv, op: Operator) -> None:
    o = op.outputs[0]
    axis = int(_opt(op, "Axis")) % _rank(cv, o)
    shape = list(cv.tensor(op.inputs[0]).shape)
    one = [*shape[:axis], 1, *shape[axis:]]
    vals = []
    for i in op.inputs:
        name = cv.name(i) + f"_{cv.name(o)}_expand"
        vals.append(cv.reshape(cv.get(i), one, name))
        cv.tag(name, i)
    cv.bind(o, cv.emit(T.ConcatOp, vals, cv.name(o), {"axis": axis}))


def _split(cv: Cv, op: Operator, x: int, axis: int, sizes: list[int], squeeze: bool = False) -> None:
    """Split tensor ``x`` along ``axis`` into ``sizes``; with ``squeeze`` (UNPACK) each part loses
    the axis. The split op is located at its outputs' names (``<output>_split`` before UNPACK's
    reshapes)."""
    outs = op.outputs
    in_shape = list(cv.tensor(x).shape)
    et = element_type(value_dtype(cv.tensor(x)))
    types = [RankedTensorType([*in_shape[:axis], n, *in_shape[axis + 1 :]], et) for n in sizes]
    names = [cv.name(t) + ("_split" if squeeze else "") for t in outs]
    for n, t in zip(names, outs):
        cv.tag(n, t)
    sizes_w = cv.i64(sizes, names[0] + "_sizes")
    sp = cv.emit_op(T.SplitOp, [cv.get(x), sizes_w], names, {"axis": axis}, types)
    for t, r in zip(outs, sp.results):
        cv.bind(t, cv.reshape(r, list(cv.tensor(t).shape), cv.name(t)) if squeeze else r)


@register("UNPACK")
def _unpack(cv: Cv, op: Operator) -> None:
    x = op.inputs[0]
    axis = int(_opt(op, "Axis")) % _rank(cv, x)
    _split(cv, op, x, axis, [1] * len(op.outputs), squeeze=True)


@register("SPLIT", "SPLIT_V")
def _split_op(cv: Cv, op: Operator) -> None:
    if op.op == "SPLIT":
        axis_i, x = 0, op.inputs[1]
        r = _rank(cv, x)
        axis = int(np.atleast_1d(cv.need_const(op, axis_i, "axis"))[0]) % r
        n = len(op.outputs)
        sizes = [cv.tensor(x).shape[axis] // n] * n
    else:
        x = op.inputs[0]
        r = _rank(cv, x)
        axis = int(np.atleast_1d(cv.need_const(op, 2, "axis"))[0]) % r
        sizes = [int(cv.tensor(t).shape[axis]) for t in op.outputs]
    _split(cv, op, x, axis, sizes)


# ---- space ---------------------------------------------------------------------------------------


@register("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")
def _d2s(cv: Cv, op: Operator) -> None:
    o = op.outputs[0]
    cls = T.DepthToSpaceOp if op.op == "DEPTH_TO_SPACE" else T.SpaceToDepthOp
    props: dict[str, Any] = {"blocksize": int(_opt(op, "BlockSize", 2))}
    if cls is T.DepthToSpaceOp:
        props["mode"] = "DCR"
    cv.bind(o, cv.emit(cls, [cv.get_nchw(op.inputs[0])], cv.out_name(o, True), props), True)


@register("RESIZE_BILINEAR", "RESIZE_NEAREST_NEIGHBOR")
def _resize(cv: Cv, op: Operator) -> None:
    x, o = op.inputs[0], op.outputs[0]
    hw = [int(v) for v in cv.need_const(op, 1, "size")]
    n, _, _, c = cv.tensor(x).shape
    align, half = bool(_opt(op, "AlignCorners", False)), bool(_opt(op, "HalfPixelCenters", False))
    name = cv.out_name(o, True)
    if op.op == "RESIZE_BILINEAR":
        props = {
            "mode": "linear",
            "coordinate_transformation_mode": "align_corners"
            if align
            else "half_pixel"
            if half
            else "asymmetric",
        }
    else:
        props = {
            "mode": "nearest",
            "coordinate_transformation_mode": "align_corners"
            if align
            else "half_pixel"
            if half
            else "asymmetric",
            "nearest_mode": "round_prefer_ceil" if align or half else "floor",
        }
    sizes = cv.i64([n, c, *hw], name + "_sizes")
    cv.bind(o, cv.emit(X.InterpOp, [cv.get_nchw(x), None, None, sizes], name, props), True)


@register("DENSIFY")
def _densify(cv: Cv, op: Operator) -> None:
    """Sparse constants are decoded at import (:func:`.reader.densify`, folded before conversion):
    this runs only for a DENSIFY whose input has no sparse buffer."""
    raise Unsupported(
        f"DENSIFY of '{cv.name(op.inputs[0])}', which is not a sparse constant, is not supported"
    )


# ---- control flow ----------------------------------------------------------------------------------


def _check_same_shapes(cv: Cv, op: Operator, shapes: list[tuple[int, ...]], what: str) -> None:
    outs = [tuple(cv.tensor(o).shape) for o in op.outputs]
    if [tuple(s) for s in shapes] != outs:
        raise Unsupported(
            f"{what} {[list(s) for s in shapes]} differ from the outputs' {[list(s) for s in outs]}"
        )


@register("WHILE")
def _while(cv: Cv, op: Operator) -> None:
    """``top.Loop`` without a trip count: the cond subgraph runs once on the initial values (in the
    enclosing block), and in the body region after the body subgraph, on its results; the loop
    variables keep their shapes (TFLite's static-shape WHILE)."""
    from lamina.dialects.top.control import LoopOp
    from lamina.dialects.top.io import YieldOp
    from lamina.ir.core import Block, Region
    from lamina.ir.types import i1, i64

    cond_k, body_k = int(_opt(op, "CondSubgraphIndex")), int(_opt(op, "BodySubgraphIndex"))
    if len(op.inputs) != len(op.outputs):
        raise Invalid(f"has {len(op.inputs)} loop variables but {len(op.outputs)} outputs")
    _check_same_shapes(cv, op, [cv.tensor(i).shape for i in op.inputs], "loop variables of shapes")
    init = [cv.get(i) for i in op.inputs]
    (c0,) = cv.inline(cond_k, init, cv.block)
    types = [v.type for v in init]
    locs = [cv.loc(cv.name(o) + "_loop_var") for o in op.outputs]
    body = Block(
        [RankedTensorType([], i64), RankedTensorType([], i1), *types],
        [cv.loc("iteration"), cv.loc("cond"), *locs],
    )
    new = cv.inline(body_k, list(body.args[2:]), body)
    if [v.type for v in new] != types:
        raise Unsupported(
            "the body changes the loop variables' types "
            f"({', '.join(map(str, types))} -> {', '.join(str(v.type) for v in new)})"
        )
    (c1,) = cv.inline(cond_k, new, body)
    body.append(YieldOp.create([c1, *new], [], {}, {}, 0, (), cv.file_loc))
    names = [cv.name(o) for o in op.outputs]
    loop = cv.emit_op(LoopOp, [None, c0, *init], names, {}, types, regions=[Region(blocks=[body])])
    for o, r in zip(op.outputs, loop.results):
        cv.bind(o, r)


@register("IF")
def _if(cv: Cv, op: Operator) -> None:
    """``top.If`` on input 0; each branch subgraph is a region reading the other inputs."""
    from lamina.dialects.top.control import IfOp
    from lamina.dialects.top.io import YieldOp
    from lamina.ir.core import Block, Region

    args = [cv.get(i) for i in op.inputs[1:]]
    regions, results = [], []
    for k in (int(_opt(op, "ThenSubgraphIndex")), int(_opt(op, "ElseSubgraphIndex"))):
        block = Block()
        outs = cv.inline(k, args, block)
        if len(outs) != len(op.outputs):
            raise Invalid(f"subgraph {k} gives {len(outs)} outputs, the IF has {len(op.outputs)}")
        block.append(YieldOp.create(outs, [], {}, {}, 0, (), cv.file_loc))
        regions.append(Region(blocks=[block]))
        results.append([v.type for v in outs])
    if results[0] != results[1]:
        raise Unsupported(f"the branches give different types ({results[0]} and {results[1]})")
    names = [cv.name(o) for o in op.outputs]
    node = cv.emit_op(IfOp, [cv.get(op.inputs[0])], names, {}, results[0], regions=regions)
    for o, r in zip(op.outputs, node.results):
        cv.bind(o, r)

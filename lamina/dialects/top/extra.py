"""Less common ``top`` ops: resize (``top.Interp``), attention, rotary embedding, quantization,
losses, grid sampling and sequence models."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from lamina.ir.attributes import dtype_to_element_type
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import NoneType, Type, none

from .base import (
    DYNAMIC,
    AnyTensor,
    AnyTensorOrNone,
    BoolAttr,
    BoolProp,
    F,
    F64ArrayAttr,
    F64Attr,
    I,
    I64ArrayAttr,
    I64Attr,
    S,
    StrArrayAttr,
    StrEnum,
    TopOp,
    TypeAttrC,
    elem_of,
    known_values,
    norm_axis,
    result_dtype,
    shape_of,
    tensor_of,
)
from .elementwise import cast_array

# ---- resize ------------------------------------------------------------------------------------


def _src_coords(
    mode: str, out_len: int, in_len: int, scale: float, roi: tuple[float, float] | None
) -> np.ndarray:
    x = np.arange(out_len, dtype=np.float64)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adj = out_len / (scale * in_len)
        center = in_len / 2
        offset = center * (1 - adj)
        return offset + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(x)
    if mode == "align_corners":
        resized = in_len * scale
        return x * (in_len - 1) / (resized - 1) if out_len > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        s, e = roi if roi is not None else (0.0, 1.0)
        if out_len > 1:
            return s * (in_len - 1) + x * (e - s) * (in_len - 1) / (out_len - 1)
        return np.full_like(x, 0.5 * (s + e) * (in_len - 1))
    raise ValueError(f"unknown coordinate_transformation_mode '{mode}'")


def _cubic_weights(t: np.ndarray, a: float) -> np.ndarray:
    """Weights of taps at offsets -1, 0, 1, 2 for fractional positions ``t``."""

    def k(d: np.ndarray) -> np.ndarray:
        d = np.abs(d)
        return np.where(
            d <= 1,
            ((a + 2) * d - (a + 3)) * d * d + 1,
            np.where(d < 2, ((a * d - 5 * a) * d + 8 * a) * d - 4 * a, 0.0),
        )

    return np.stack([k(t + 1), k(t), k(1 - t), k(2 - t)], axis=-1)


def _interp_matrix(
    op: TopOp, in_len: int, out_len: int, scale: float, roi: tuple[float, float] | None
) -> tuple[np.ndarray, np.ndarray]:
    """(out_len x in_len) interpolation matrix along one axis, and the mask of out-of-range rows."""
    ctm = op.attr("coordinate_transformation_mode")
    mode = op.attr("mode")
    x = _src_coords(ctm, out_len, in_len, scale, roi)
    oob = (x < 0) | (x > in_len - 1) if ctm == "tf_crop_and_resize" else np.zeros(out_len, bool)
    m = np.zeros((out_len, in_len), dtype=np.float64)
    rows = np.arange(out_len)
    if mode == "nearest":
        nm = op.attr("nearest_mode")
        if nm == "round_prefer_floor":
            idx = np.ceil(x - 0.5)
        elif nm == "round_prefer_ceil":
            idx = np.floor(x + 0.5)
        elif nm == "floor":
            idx = np.floor(x)
        else:
            idx = np.ceil(x)
        idx = np.clip(idx, 0, in_len - 1).astype(np.int64)
        m[rows, idx] = 1.0
    elif mode == "linear":
        xc = np.clip(x, 0, in_len - 1)
        lo = np.floor(xc).astype(np.int64)
        hi = np.minimum(lo + 1, in_len - 1)
        t = xc - lo
        np.add.at(m, (rows, lo), 1 - t)
        np.add.at(m, (rows, hi), t)
    else:  # cubic
        base = np.floor(x).astype(np.int64)
        t = x - base
        w = _cubic_weights(t, op.attr("cubic_coeff_a"))
        taps = base[:, None] + np.arange(-1, 3)[None, :]
        if op.attr("exclude_outside"):
            inside = (taps >= 0) & (taps < in_len)
            w = np.where(inside, w, 0.0)
            w = w / np.maximum(w.sum(axis=1, keepdims=True), 1e-12)
        taps = np.clip(taps, 0, in_len - 1)
        np.add.at(m, (np.repeat(rows, 4), taps.reshape(-1)), w.reshape(-1))
    return m, oob


class InterpOp(TopOp):
    """ONNX Resize / Upsample: nearest, (multi)linear or cubic interpolation along any axes,
    applied separably as one small matrix product per resized axis."""

    name = "top.Interp"
    shape_operands = ("scales", "sizes")
    input = operand(AnyTensor)
    roi = operand(AnyTensorOrNone)
    scales = operand(AnyTensorOrNone)
    sizes = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    mode = prop(StrEnum("nearest", "linear", "cubic"), default=S("nearest"))
    coordinate_transformation_mode = prop(
        StrEnum(
            "half_pixel",
            "half_pixel_symmetric",
            "pytorch_half_pixel",
            "align_corners",
            "asymmetric",
            "tf_crop_and_resize",
        ),
        default=S("half_pixel"),
    )
    nearest_mode = prop(
        StrEnum("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"), default=S("round_prefer_floor")
    )
    cubic_coeff_a = prop(F64Attr, default=F(-0.75))
    exclude_outside = prop(BoolProp, default=BoolAttr(False))
    extrapolation_value = prop(F64Attr, default=F(0.0))
    axes = prop(I64ArrayAttr, optional=True)
    keep_aspect_ratio_policy = prop(StrEnum("stretch", "not_larger", "not_smaller"), default=S("stretch"))

    def infer_shapes(self) -> list[Type]:
        xs, vals = shape_of(self.input), known_values(self.scales, self.sizes)
        if xs is None or vals is None or DYNAMIC in xs:
            return self.unranked_results()
        scales, sizes = vals
        r = len(xs)
        axes = [norm_axis(a, r) for a in (self.axes or range(r))]
        in_sh = [xs[a] for a in axes]
        if sizes is not None and sizes.size:
            sz = [int(v) for v in sizes.reshape(-1)]
            pol = self.keep_aspect_ratio_policy
            if pol != "stretch":
                ratios = [sz[i] / in_sh[i] for i in range(len(axes))]
                s = min(ratios) if pol == "not_larger" else max(ratios)
                sz = [int(np.floor(s * d + 0.5)) for d in in_sh]
        elif scales is not None:
            sc = [float(v) for v in scales.reshape(-1)]
            sz = [int(np.floor(in_sh[i] * sc[i])) for i in range(len(axes))]
        else:
            return self.unranked_results()
        out = list(xs)
        for a, n in zip(axes, sz):
            out[a] = n
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, roi, scales, sizes = inputs
        r = x.ndim
        axes = [norm_axis(a, r) for a in (self.axes or range(r))]
        in_sh = [x.shape[a] for a in axes]
        if sizes is not None and np.asarray(sizes).size:
            sz = [int(v) for v in np.asarray(sizes).reshape(-1)]
            pol = self.keep_aspect_ratio_policy
            if pol != "stretch":
                ratios = [sz[i] / in_sh[i] for i in range(len(axes))]
                s = min(ratios) if pol == "not_larger" else max(ratios)
                sc = [s] * len(axes)
                sz = [int(np.floor(s * d + 0.5)) for d in in_sh]
            else:
                sc = [sz[i] / in_sh[i] for i in range(len(axes))]
        else:
            sc = [float(v) for v in np.asarray(scales).reshape(-1)]
            sz = [int(np.floor(in_sh[i] * sc[i])) for i in range(len(axes))]
        roi_v = (
            np.asarray(roi, dtype=np.float64).reshape(-1)
            if roi is not None and np.asarray(roi).size
            else None
        )
        y = x.astype(np.float64) if x.dtype.kind in "iu" else x
        oob_all = np.zeros([1] * r, bool)
        for i, a in enumerate(axes):
            if (
                sz[i] == in_sh[i]
                and sc[i] == 1.0
                and self.coordinate_transformation_mode != "tf_crop_and_resize"
            ):
                continue
            rr = None
            if roi_v is not None:
                n = len(axes)
                rr = (float(roi_v[i]), float(roi_v[i + n]))
            mtx, oob = _interp_matrix(self, in_sh[i], sz[i], sc[i], rr)
            y = np.moveaxis(
                np.tensordot(
                    mtx.astype(y.dtype if y.dtype.kind == "f" else np.float64), np.moveaxis(y, a, 0), axes=1
                ),
                0,
                a,
            )
            if oob.any():
                shp = [1] * r
                shp[a] = sz[i]
                oob_all = oob_all | oob.reshape(shp)
        if oob_all.any():
            y = np.where(oob_all, self.extrapolation_value, y)
        if x.dtype.kind in "iu":
            y = np.clip(np.round(y), np.iinfo(x.dtype).min, np.iinfo(x.dtype).max)
        return [np.ascontiguousarray(y.astype(x.dtype))]


# ---- attention -----------------------------------------------------------------------------------


def _softmax_last(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return e / s


#: ONNX's TensorProto codes of the float types ``softmax_precision`` may name, for the ``i64`` form
_ONNX_FLOAT_CODES = {1: np.float32, 10: np.float16, 11: np.float64, 16: ml_dtypes.bfloat16}


def _softmax_dtype(precision: Any) -> np.dtype:
    """The numpy dtype of a ``softmax_precision``: an element type, or an ONNX code (older files)."""
    if isinstance(precision, Type):
        from lamina.ir.attributes import element_type_to_dtype

        return element_type_to_dtype(precision)
    return np.dtype(_ONNX_FLOAT_CODES[int(precision)])


class AttentionOp(TopOp):
    """Scaled dot-product attention (ONNX Attention, opset 23+): 3-d (B, S, H*D) or 4-d inputs,
    KV cache, boolean/additive masks, causal masking, GQA, softcap."""

    name = "top.Attention"
    query = operand(AnyTensor)
    key = operand(AnyTensor)
    value = operand(AnyTensor)
    attn_mask = operand(AnyTensorOrNone)
    past_key = operand(AnyTensorOrNone)
    past_value = operand(AnyTensorOrNone)
    nonpad_kv_seqlen = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    present_key = result_def(AnyTensorOrNone)
    present_value = result_def(AnyTensorOrNone)
    qk_matmul_output = result_def(AnyTensorOrNone)
    is_causal = prop(BoolProp, default=BoolAttr(False))
    q_num_heads = prop(I64Attr, optional=True)
    kv_num_heads = prop(I64Attr, optional=True)
    qk_matmul_output_mode = prop(I64Attr, default=I(0))
    scale = prop(F64Attr, optional=True)
    softcap = prop(F64Attr, default=F(0.0))
    #: the element type the softmax runs in (ONNX's ``softmax_precision``); an ``i64`` ONNX
    #: TensorProto code in files written before it was a type (still read)
    softmax_precision = prop(TypeAttrC | I64Attr, optional=True)

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        q, k, v, mask, past_k, past_v, nonpad = inputs
        dt = q.dtype
        three_d = q.ndim == 3
        b = q.shape[0]
        if three_d:
            qh, kvh = self.q_num_heads, self.kv_num_heads
            q = q.reshape(b, q.shape[1], qh, -1).transpose(0, 2, 1, 3)
            k = k.reshape(b, k.shape[1], kvh, -1).transpose(0, 2, 1, 3)
            v = v.reshape(b, v.shape[1], kvh, -1).transpose(0, 2, 1, 3)
        scale = self.scale
        if scale is None:
            scale = 1.0 / np.sqrt(q.shape[3])
        if past_k is not None:
            k = np.concatenate((past_k, k), axis=2)
        if past_v is not None:
            v = np.concatenate((past_v, v), axis=2)
        present_k, present_v = k, v
        sq, skv = q.shape[2], k.shape[2]
        bias = np.zeros((sq, skv), dtype=dt)
        if mask is not None:
            pad = skv - mask.shape[-1]
            if pad > 0:
                mask = np.pad(
                    mask,
                    [(0, 0)] * (mask.ndim - 1) + [(0, pad)],
                    constant_values=False if mask.dtype == np.bool_ else -np.inf,
                )
            if mask.dtype == np.bool_:
                mask = np.where(mask, 0, -np.inf).astype(dt)
        past_len = past_k.shape[2] if past_k is not None else 0
        if self.is_causal:
            # the causal bias is (Sq, Skv); a mask of any rank broadcasts onto it (the spec's
            # "broadcastable to (B, H, Sq, Skv)": a rank-1 or (B, 1, 1, Skv) padding mask too)
            tri = np.triu(np.ones((sq, skv - past_len), dtype=bool), k=1)
            causal = np.zeros((sq, skv), dtype=dt)
            causal[:, past_len:] = np.where(tri, -np.inf, 0)
            bias = causal if mask is None else np.asarray(mask, dtype=dt) + causal
        elif mask is not None:
            bias = bias + mask
        if nonpad is not None:
            bias = bias.reshape((1,) * (4 - bias.ndim) + bias.shape)
            pm = np.arange(skv) < np.asarray(nonpad)[:, None]
            bias = bias + np.where(pm, 0, -np.inf).reshape(b, 1, 1, skv)
        hq, hk = q.shape[1], k.shape[1]
        if hq != hk and hq % hk == 0:
            k = np.repeat(k, hq // hk, axis=1)
            v = np.repeat(v, hq // hk, axis=1)
        s = np.sqrt(scale)
        qk = np.matmul(q * dt.type(s), np.swapaxes(k, -1, -2) * dt.type(s))
        cap = self.softcap
        if cap and cap > 0:
            qk = np.tanh(qk / dt.type(cap)) * dt.type(cap)
        mode = self.qk_matmul_output_mode
        qk_b = qk + bias
        qk_out = qk_b if mode == 2 else qk
        sp = self.softmax_precision
        if sp is not None:
            qk_b = qk_b.astype(_softmax_dtype(sp))
        probs = _softmax_last(qk_b)
        if mode == 3:
            qk_out = probs
        y = np.matmul(probs, v).astype(dt)
        if three_d:
            y = y.transpose(0, 2, 1, 3).reshape(b, y.shape[2], -1)
        outs = [y, present_k, present_v, qk_out.astype(dt)]
        return [None if isinstance(r.type, NoneType) else o for r, o in zip(self.results, outs)]

    def infer_shapes(self) -> list[Type]:
        return [r.type for r in self.results]


class RotaryEmbeddingOp(TopOp):
    name = "top.RotaryEmbedding"
    input = operand(AnyTensor)
    cos_cache = operand(AnyTensor)
    sin_cache = operand(AnyTensor)
    position_ids = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    interleaved = prop(BoolProp, default=BoolAttr(False))
    rotary_embedding_dim = prop(I64Attr, default=I(0))
    num_heads = prop(I64Attr, default=I(0))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, cos, sin, pos = inputs
        orig = x.shape
        if x.ndim == 4:
            x = x.transpose(0, 2, 1, 3)
        b, s = x.shape[:2]
        if x.ndim == 3:
            x = x.reshape(b, s, self.num_heads, -1)
        d = self.rotary_embedding_dim or x.shape[3]
        xr, xn = x[..., :d], x[..., d:]
        if pos is not None:
            cos, sin = cos[pos], sin[pos]
        cos, sin = cos[:, :, None, :], sin[:, :, None, :]
        if self.interleaved:
            x1, x2 = xr[..., 0::2], xr[..., 1::2]
        else:
            x1, x2 = np.split(xr, 2, axis=-1)
        real = cos * x1 - sin * x2
        imag = sin * x1 + cos * x2
        if self.interleaved:
            xr = np.stack([real, imag], axis=-1).reshape(xr.shape)
        else:
            xr = np.concatenate([real, imag], axis=-1)
        out = np.concatenate([xr, xn], axis=-1)
        out = out.reshape(orig) if len(orig) == 3 else out.transpose(0, 2, 1, 3)
        return [out.astype(inputs[0].dtype)]


# ---- quantization --------------------------------------------------------------------------------


def _q_param(v: np.ndarray, shape: tuple[int, ...], axis: int, block: int) -> np.ndarray:
    if v.ndim == 0 or v.size == 1:
        return v.reshape(())
    ax = norm_axis(axis, len(shape))
    if block:
        v = np.repeat(v, block, axis=ax)
        sl = [slice(None)] * v.ndim
        sl[ax] = slice(0, shape[ax])
        return v[tuple(sl)]
    out = [1] * len(shape)
    out[ax] = v.size
    return v.reshape(out)


_INT_RANGE = {
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint16): (0, 65535),
    np.dtype(np.int16): (-32768, 32767),
    np.dtype(np.int32): (-(2**31), 2**31 - 1),
}


class QuantizeLinearOp(TopOp):
    """y = saturate(round_half_even(x / scale) + zero_point) in the result's element type."""

    name = "top.QuantizeLinear"
    input = operand(AnyTensor)
    scale = operand(AnyTensor)
    zero_point = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(1))
    block_size = prop(I64Attr, default=I(0))
    saturate = prop(BoolProp, default=BoolAttr(True))
    #: integer range of the result when narrower than its storage type (i4: -8..7, ui4: 0..15)
    qmin = prop(I64Attr, optional=True)
    qmax = prop(I64Attr, optional=True)

    def infer_shapes(self) -> list[Type]:
        return [
            self.input.type.with_element_type(self.output.type.element_type)
            if shape_of(self.input) is not None
            else self.output.type
        ]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, sc, zp = inputs
        dt = result_dtype(self)
        ax, bs = self.axis, self.block_size
        scale = _q_param(np.asarray(sc), x.shape, ax, bs).astype(np.float32)
        y = x.astype(np.float32) / scale
        if dt.kind == "f":
            if zp is not None:
                y = y + _q_param(np.asarray(zp), x.shape, ax, bs).astype(np.float32)
            return [cast_array(y, dt, bool(self.saturate))]
        y = np.rint(y)
        if zp is not None:
            y = y + _q_param(np.asarray(zp), x.shape, ax, bs).astype(np.float32)
        lo, hi = _INT_RANGE.get(dt, (None, None))
        if self.qmin is not None:
            lo, hi = self.qmin, self.qmax
        return [np.clip(y, lo, hi).astype(dt)]


class DequantizeLinearOp(TopOp):
    """y = (x - zero_point) * scale."""

    name = "top.DequantizeLinear"
    input = operand(AnyTensor)
    scale = operand(AnyTensor)
    zero_point = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(1))
    block_size = prop(I64Attr, default=I(0))

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        return [tensor_of(xs, dtype_to_element_type(result_dtype(self)))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, sc, zp = inputs
        ax, bs = self.axis, self.block_size
        xf = x.astype(np.float32)
        if zp is not None and x.dtype.kind in "iu":
            xf = xf - _q_param(np.asarray(zp), x.shape, ax, bs).astype(np.float32)
        y = xf * _q_param(np.asarray(sc), x.shape, ax, bs).astype(np.float32)
        return [y.astype(result_dtype(self))]


# ---- losses --------------------------------------------------------------------------------------


def _nll(
    x: np.ndarray, target: np.ndarray, weight: np.ndarray | None, reduction: str, ignore: int | None
) -> np.ndarray:
    c = x.shape[1]
    t = target.astype(np.int64)
    valid = np.ones(t.shape, bool) if ignore is None else (t != ignore)
    tc = np.clip(t, 0, c - 1)
    picked = np.take_along_axis(x, tc[:, None], axis=1)[:, 0]
    loss = np.where(valid, -picked, 0).astype(x.dtype)
    if weight is not None:
        w = np.where(valid, np.take(weight, tc), 0).astype(x.dtype)
        loss = loss * w
        if reduction == "mean":
            return np.asarray(loss.sum() / w.sum(), dtype=x.dtype)
    if reduction == "mean":
        if ignore is not None:
            return np.asarray(loss.sum() / valid.sum(), dtype=x.dtype)
        return np.asarray(np.mean(loss), dtype=x.dtype)
    if reduction == "sum":
        return np.asarray(np.sum(loss), dtype=x.dtype)
    return loss


class NLLLossOp(TopOp):
    name = "top.NLLLoss"
    input = operand(AnyTensor)
    target = operand(AnyTensor)
    weight = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    reduction = prop(StrEnum("none", "sum", "mean"), default=S("mean"))
    ignore_index = prop(I64Attr, optional=True)

    def infer_shapes(self) -> list[Type]:
        t = shape_of(self.target) if self.reduction == "none" else ()
        return [tensor_of(t, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, t, w = inputs
        return [_nll(x, t, w, self.reduction, self.ignore_index)]


class SoftmaxCrossEntropyLossOp(TopOp):
    name = "top.SoftmaxCrossEntropyLoss"
    scores = operand(AnyTensor)
    labels = operand(AnyTensor)
    weights = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    log_prob = result_def(AnyTensorOrNone)
    reduction = prop(StrEnum("none", "sum", "mean"), default=S("mean"))
    ignore_index = prop(I64Attr, optional=True)

    def infer_shapes(self) -> list[Type]:
        t = shape_of(self.labels) if self.reduction == "none" else ()
        lp = (
            none
            if isinstance(self.results[1].type, NoneType)
            else tensor_of(shape_of(self.scores), elem_of(self.scores))
        )
        return [tensor_of(t, elem_of(self.scores)), lp]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, t, w = inputs
        m = np.max(x, axis=1, keepdims=True)
        e = x - m
        lp = (e - np.log(np.sum(np.exp(e), axis=1, keepdims=True))).astype(x.dtype)
        loss = _nll(lp, t, w, self.reduction, self.ignore_index)
        return [loss, None if isinstance(self.results[1].type, NoneType) else lp]


# ---- recurrent networks --------------------------------------------------------------------------


def _act(name: str, alpha: float | None, beta: float | None) -> Any:
    n = name.lower()
    if n == "sigmoid":
        return lambda x: 1.0 / (1.0 + np.exp(-x))
    if n == "tanh":
        return np.tanh
    if n == "relu":
        return lambda x: np.maximum(x, 0)
    if n == "hardsigmoid":
        a, b = alpha if alpha is not None else 0.2, beta if beta is not None else 0.5
        return lambda x: np.clip(a * x + b, 0, 1)
    if n == "leakyrelu":
        a = alpha if alpha is not None else 0.01
        return lambda x: np.where(x >= 0, x, a * x)
    if n == "softsign":
        return lambda x: x / (1 + np.abs(x))
    if n == "softplus":
        return lambda x: np.logaddexp(0, x)
    if n == "affine":
        a, b = alpha if alpha is not None else 1.0, beta if beta is not None else 0.0
        return lambda x: a * x + b
    if n == "scaledtanh":
        a, b = alpha if alpha is not None else 1.0, beta if beta is not None else 1.0
        return lambda x: a * np.tanh(b * x)
    if n == "elu":
        a = alpha if alpha is not None else 1.0
        return lambda x: np.where(x >= 0, x, a * np.expm1(x))
    raise ValueError(f"unsupported RNN activation '{name}'")


class _RNNBase(TopOp):
    """Shared driver of ``top.LSTM`` / ``top.GRU`` / ``top.RNN`` (ONNX semantics, both layouts,
    directions, sequence lengths, clipping); the cell is the subclass's ``_step``."""

    direction = prop(StrEnum("forward", "reverse", "bidirectional"), default=S("forward"))
    hidden_size = prop(I64Attr)
    layout = prop(I64Attr, default=I(0))
    clip = prop(F64Attr, optional=True)
    activations = prop(StrArrayAttr, optional=True)
    activation_alpha = prop(F64ArrayAttr, optional=True)
    activation_beta = prop(F64ArrayAttr, optional=True)
    n_gates = 1
    default_acts: tuple[str, ...] = ("Tanh",)

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)  # type: ignore[attr-defined]
        if xs is None or len(xs) != 3:
            return self.unranked_results()
        layout = self.layout
        seq, batch = (xs[1], xs[0]) if layout else (xs[0], xs[1])
        hs = self.hidden_size
        dirs = 2 if self.direction == "bidirectional" else 1
        y = [batch, seq, dirs, hs] if layout else [seq, dirs, batch, hs]
        state = [batch, dirs, hs] if layout else [dirs, batch, hs]
        elem = elem_of(self.input)  # type: ignore[attr-defined]
        shapes = [y, state, state][: len(self.results)]
        return [
            r.type if isinstance(r.type, NoneType) else tensor_of(s, elem)
            for r, s in zip(self.results, shapes)
        ]

    def _acts(self, d: int) -> list[Any]:
        names = list(self.activations or self.default_acts * 2)
        k = len(self.default_acts)
        al = list(self.activation_alpha or [])
        be = list(self.activation_beta or [])
        return [
            _act(
                names[d * k + j],
                al[d * k + j] if d * k + j < len(al) else None,
                be[d * k + j] if d * k + j < len(be) else None,
            )
            for j in range(k)
        ]

    def _run(
        self, x: np.ndarray, w: np.ndarray, r: np.ndarray, b: Any, lens: Any, h0: Any, c0: Any, p: Any
    ) -> list[Any]:
        if self.layout:
            x = x.transpose(1, 0, 2)
            h0 = h0.transpose(1, 0, 2) if h0 is not None else None
            c0 = c0.transpose(1, 0, 2) if c0 is not None else None
        seq, batch = x.shape[:2]
        hs = self.hidden_size
        dirs = 2 if self.direction == "bidirectional" else 1
        dt = x.dtype
        y = np.zeros((seq, dirs, batch, hs), dtype=dt)
        yh = np.zeros((dirs, batch, hs), dtype=dt)
        yc = np.zeros((dirs, batch, hs), dtype=dt)
        lens_v = np.asarray(lens).astype(np.int64) if lens is not None else np.full(batch, seq)
        clip = self.clip
        for d in range(dirs):
            reverse = self.direction == "reverse" or d == 1
            acts = self._acts(d)
            wb = b[d] if b is not None else np.zeros(2 * self.n_gates * hs, dt)
            h = h0[d] if h0 is not None else np.zeros((batch, hs), dt)
            c = c0[d] if c0 is not None else np.zeros((batch, hs), dt)
            xw = x @ w[d].T + wb[: self.n_gates * hs]  # (seq, batch, G*hs): input projection for all steps
            for step in range(seq):
                t = seq - 1 - step if reverse else step
                if reverse:  # per-sequence reversal within each batch entry's length
                    idx = lens_v - 1 - step
                    active = idx >= 0
                    xt = xw[np.clip(idx, 0, seq - 1), np.arange(batch)]
                else:
                    active = t < lens_v
                    xt = xw[t]
                h_new, c_new = self._step(
                    xt, h, c, r[d], wb[self.n_gates * hs :], p[d] if p is not None else None, acts, clip, hs
                )
                if lens is None:  # every sequence is full length: no masking
                    h, c = h_new, c_new
                    y[t, d] = h_new
                    continue
                m = active[:, None]
                h = np.where(m, h_new, h)
                c = np.where(m, c_new, c)
                if reverse:
                    tt = np.clip(lens_v - 1 - step, 0, seq - 1)
                    y[tt[active], d, np.arange(batch)[active]] = h_new[active]
                else:
                    y[t, d] = np.where(m, h_new, 0)
            yh[d], yc[d] = h, c
        if self.layout:
            y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
        outs = [y, yh, yc][: len(self.results)]
        return [None if isinstance(rr.type, NoneType) else o.astype(dt) for rr, o in zip(self.results, outs)]

    def _step(
        self, xt: Any, h: Any, c: Any, r: Any, rb: Any, p: Any, acts: Any, clip: Any, hs: int
    ) -> tuple[Any, Any]:
        raise NotImplementedError


def _clip(v: np.ndarray, clip: float | None) -> np.ndarray:
    return np.clip(v, -clip, clip) if clip is not None else v


class LSTMOp(_RNNBase):
    name = "top.LSTM"
    input = operand(AnyTensor)
    W = operand(AnyTensor)
    R = operand(AnyTensor)
    B = operand(AnyTensorOrNone)
    sequence_lens = operand(AnyTensorOrNone)
    initial_h = operand(AnyTensorOrNone)
    initial_c = operand(AnyTensorOrNone)
    P = operand(AnyTensorOrNone)
    Y = result_def(AnyTensorOrNone)
    Y_h = result_def(AnyTensorOrNone)
    Y_c = result_def(AnyTensorOrNone)
    input_forget = prop(BoolProp, default=BoolAttr(False))
    n_gates = 4
    default_acts = ("Sigmoid", "Tanh", "Tanh")

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, r, b, lens, h0, c0, p = inputs
        return self._run(x, w, r, b, lens, h0, c0, p)

    def _step(
        self, xt: Any, h: Any, c: Any, r: Any, rb: Any, p: Any, acts: Any, clip: Any, hs: int
    ) -> tuple[Any, Any]:
        f, g, hh = acts
        gates = xt + h @ r.T + rb
        i_, o_, f_, c_ = (gates[:, k * hs : (k + 1) * hs] for k in range(4))
        if p is not None:
            pi, po, pf = p[:hs], p[hs : 2 * hs], p[2 * hs :]
            i_ = i_ + pi * c
            f_ = f_ + pf * c
        i_ = f(_clip(i_, clip))
        f_ = f(_clip(f_, clip))
        if self.input_forget:
            f_ = 1 - i_
        c_new = f_ * c + i_ * g(_clip(c_, clip))
        if p is not None:
            o_ = o_ + po * c_new
        o_ = f(_clip(o_, clip))
        return o_ * hh(c_new), c_new


class GRUOp(_RNNBase):
    name = "top.GRU"
    input = operand(AnyTensor)
    W = operand(AnyTensor)
    R = operand(AnyTensor)
    B = operand(AnyTensorOrNone)
    sequence_lens = operand(AnyTensorOrNone)
    initial_h = operand(AnyTensorOrNone)
    Y = result_def(AnyTensorOrNone)
    Y_h = result_def(AnyTensorOrNone)
    linear_before_reset = prop(BoolProp, default=BoolAttr(False))
    n_gates = 3
    default_acts = ("Sigmoid", "Tanh")

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, r, b, lens, h0 = inputs
        return self._run(x, w, r, b, lens, h0, None, None)

    def _step(
        self, xt: Any, h: Any, c: Any, r: Any, rb: Any, p: Any, acts: Any, clip: Any, hs: int
    ) -> tuple[Any, Any]:
        f, g = acts
        xz, xr, xh = (xt[:, k * hs : (k + 1) * hs] for k in range(3))
        if self.linear_before_reset:  # one recurrent GEMM for the three gates
            hr = h @ r.T
            hr += rb
            z = f(_clip(xz + hr[:, :hs], clip))
            rt = f(_clip(xr + hr[:, hs : 2 * hs], clip))
            ht = g(_clip(xh + rt * hr[:, 2 * hs :], clip))
            return (1 - z) * ht + z * h, c
        rz, rr, rh = (r[k * hs : (k + 1) * hs] for k in range(3))
        bz, br, bh = (rb[k * hs : (k + 1) * hs] for k in range(3))
        z = f(_clip(xz + h @ rz.T + bz, clip))
        rt = f(_clip(xr + h @ rr.T + br, clip))
        if self.linear_before_reset:
            ht = g(_clip(xh + rt * (h @ rh.T + bh), clip))
        else:
            ht = g(_clip(xh + (rt * h) @ rh.T + bh, clip))
        return (1 - z) * ht + z * h, c


class RNNOp(_RNNBase):
    name = "top.RNN"
    input = operand(AnyTensor)
    W = operand(AnyTensor)
    R = operand(AnyTensor)
    B = operand(AnyTensorOrNone)
    sequence_lens = operand(AnyTensorOrNone)
    initial_h = operand(AnyTensorOrNone)
    Y = result_def(AnyTensorOrNone)
    Y_h = result_def(AnyTensorOrNone)
    n_gates = 1
    default_acts = ("Tanh",)

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, r, b, lens, h0 = inputs
        return self._run(x, w, r, b, lens, h0, None, None)

    def _step(
        self, xt: Any, h: Any, c: Any, r: Any, rb: Any, p: Any, acts: Any, clip: Any, hs: int
    ) -> tuple[Any, Any]:
        return acts[0](_clip(xt + h @ r.T + rb, clip)), c


EXTRA_OPS: list[type[TopOp]] = [
    LSTMOp,
    GRUOp,
    RNNOp,
    InterpOp,
    AttentionOp,
    RotaryEmbeddingOp,
    QuantizeLinearOp,
    DequantizeLinearOp,
    NLLLossOp,
    SoftmaxCrossEntropyLossOp,
]

_ = ml_dtypes

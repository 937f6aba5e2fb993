"""Integer (quantized-model) ``top`` ops with ONNX semantics: ``top.MatMulInteger``,
``top.ConvInteger``, ``top.QLinearMatMul``, ``top.QLinearConv`` and ``top.DynamicQuantizeLinear``.

Integer products are accumulated exactly (int64 GEMM, or float64 convolution whose sums of
products of 8-bit values stay far below 2**53) and returned as int32; requantization rounds half to
even and saturates to the output type.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.execution.kernels.conv import conv_generic
from lamina.execution.kernels.geometry import conv_output_size
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import IntegerType, Type, f32, i32

from .base import (
    AnyTensor,
    AnyTensorOrNone,
    I,
    I64ArrayAttr,
    I64Attr,
    S,
    TopOp,
    broadcast_shapes,
    elem_of,
    num_elements,
    shape_of,
    tensor_of,
)
from .nn import _AUTO_PAD, ConvOp


def _sub_zp(a: np.ndarray, zp: Any, axis_len: int | None = None, axis: int = -1) -> np.ndarray:
    """``a - zp`` in int64; a 1-D ``zp`` of ``axis_len`` elements applies along ``axis``."""
    r = a.astype(np.int64)
    if zp is None:
        return r
    z = np.asarray(zp).astype(np.int64)
    if z.ndim == 1 and z.size > 1 and axis_len is not None and z.size == axis_len:
        shape = [1] * r.ndim
        shape[axis] = z.size
        z = z.reshape(shape)
    return r - z


def _matmul_shape(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> list[int] | None:
    """numpy matmul result shape (None when unknown)."""
    if a is None or b is None or not a or not b:
        return None
    a1 = [1, *a] if len(a) == 1 else list(a)
    b1 = [*b, 1] if len(b) == 1 else list(b)
    out = [*(broadcast_shapes(tuple(a1[:-2]), tuple(b1[:-2])) or ()), a1[-2], b1[-1]]
    if len(a) == 1:
        out.pop(-2)
    if len(b) == 1:
        out.pop(-1)
    return out


def _saturate(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(np.rint(v), info.min, info.max).astype(dtype)


def _conv_i64(op: TopOp, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Exact integer convolution of zero-point-corrected ``x`` and ``w`` (properties of ``op``
    as ``top.Conv`` names them)."""
    geo = ConvOp.geometry(op, x.shape, w.shape)  # type: ignore[arg-type]
    y = conv_generic(x.astype(np.float64), w.astype(np.float64), None, geo, op.attr("group"), False)
    return np.rint(y).astype(np.int64)


class _ConvProps(TopOp):
    kernel_shape = prop(I64ArrayAttr, optional=True)
    strides = prop(I64ArrayAttr, optional=True)
    pads = prop(I64ArrayAttr, optional=True)
    dilations = prop(I64ArrayAttr, optional=True)
    group = prop(I64Attr, default=I(1))
    auto_pad = prop(_AUTO_PAD, default=S("NOTSET"))

    def _conv_shape(self, x: Any, w: Any, elem: Type) -> list[Type]:
        xs, ws = shape_of(x), shape_of(w)
        if xs is None or ws is None or min(xs[2:], default=0) < 0 or min(ws) < 0:
            return [tensor_of(None, elem)]
        out = conv_output_size(xs[2:], ConvOp.geometry(self, xs, ws))  # type: ignore[arg-type]
        return [tensor_of([xs[0], ws[0], *out], elem)]

    def flops(self) -> int:
        ws = shape_of(self.operands[3] if self.name == "top.QLinearConv" else self.operands[1])
        return 2 * int(np.prod(ws[1:])) * num_elements(self.results[0].type) if ws else 0


class MatMulIntegerOp(TopOp):
    """(A - a_zero_point) @ (B - b_zero_point) in int32 (per-row / per-column zero points)."""

    name = "top.MatMulInteger"
    A = operand(AnyTensor)
    B = operand(AnyTensor)
    a_zero_point = operand(AnyTensorOrNone)
    b_zero_point = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    fresh_results = True

    def infer_shapes(self) -> list[Type]:
        return [tensor_of(_matmul_shape(shape_of(self.A), shape_of(self.B)), i32)]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        a, b, az, bz = inputs
        aa = _sub_zp(a, az, a.shape[-2] if a.ndim >= 2 else None, -2 if a.ndim >= 2 else -1)
        bb = _sub_zp(b, bz, b.shape[-1], -1)
        return [np.matmul(aa, bb).astype(np.int32)]


class ConvIntegerOp(_ConvProps):
    """Convolution of (x - x_zero_point) and (w - w_zero_point) (per output channel), int32."""

    name = "top.ConvInteger"
    x = operand(AnyTensor)
    w = operand(AnyTensor)
    x_zero_point = operand(AnyTensorOrNone)
    w_zero_point = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    fresh_results = True

    def infer_shapes(self) -> list[Type]:
        return self._conv_shape(self.x, self.w, i32)

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, xz, wz = inputs
        return [_conv_i64(self, _sub_zp(x, xz), _sub_zp(w, wz, w.shape[0], 0)).astype(np.int32)]


class QLinearMatMulOp(TopOp):
    """Quantized matmul: saturate(rint((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)."""

    name = "top.QLinearMatMul"
    a = operand(AnyTensor)
    a_scale = operand(AnyTensor)
    a_zero_point = operand(AnyTensorOrNone)
    b = operand(AnyTensor)
    b_scale = operand(AnyTensor)
    b_zero_point = operand(AnyTensorOrNone)
    y_scale = operand(AnyTensor)
    y_zero_point = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    fresh_results = True

    def infer_shapes(self) -> list[Type]:
        zy = elem_of(self.y_zero_point)
        elem = zy if isinstance(zy, IntegerType) else elem_of(self.a)
        return [tensor_of(_matmul_shape(shape_of(self.a), shape_of(self.b)), elem)]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        a, sa, za, b, sb, zb, sy, zy = inputs
        acc = np.matmul(
            _sub_zp(a, za, a.shape[-2] if a.ndim >= 2 else None, -2),
            _sub_zp(b, zb, b.shape[-1], -1),
        )
        sa = np.asarray(sa, np.float32)
        sb = np.asarray(sb, np.float32)
        if sa.ndim == 1 and sa.size > 1:
            sa = sa.reshape(-1, 1)
        scale = (sa * sb / np.asarray(sy, np.float32)).astype(np.float32)
        d = acc * scale
        dtype = np.asarray(zy).dtype if zy is not None else a.dtype
        if zy is not None:
            d = d + np.asarray(zy).astype(np.float32)
        return [_saturate(d, dtype)]

    def flops(self) -> int:
        a = shape_of(self.a)
        return 2 * (a[-1] if a else 0) * num_elements(self.output.type)


class QLinearConvOp(_ConvProps):
    """Quantized convolution with int32 bias and per-tensor or per-channel weight scales."""

    name = "top.QLinearConv"
    x = operand(AnyTensor)
    x_scale = operand(AnyTensor)
    x_zero_point = operand(AnyTensorOrNone)
    w = operand(AnyTensor)
    w_scale = operand(AnyTensor)
    w_zero_point = operand(AnyTensorOrNone)
    y_scale = operand(AnyTensor)
    y_zero_point = operand(AnyTensorOrNone)
    B = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    fresh_results = True

    def infer_shapes(self) -> list[Type]:
        zy = elem_of(self.y_zero_point)
        return self._conv_shape(self.x, self.w, zy if isinstance(zy, IntegerType) else elem_of(self.x))

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, sx, zx, w, sw, zw, sy, zy, b = inputs
        acc = _conv_i64(self, _sub_zp(x, zx), _sub_zp(w, zw, w.shape[0], 0))
        nd = x.ndim - 2
        if b is not None:
            acc = acc + np.asarray(b).astype(np.int64).reshape((1, -1) + (1,) * nd)
        sw = np.asarray(sw, np.float32)
        if sw.size > 1:
            sw = sw.reshape((1, -1) + (1,) * nd)
        r = acc.astype(np.int32) * (np.float32(sx) * sw / np.float32(sy))
        dtype = np.asarray(zy).dtype if zy is not None else x.dtype
        if zy is not None:
            r = r + np.asarray(zy).astype(np.float32)
        return [_saturate(r, dtype)]


class DynamicQuantizeLinearOp(TopOp):
    """uint8 quantization with scale and zero point computed from the data's range."""

    name = "top.DynamicQuantizeLinear"
    x = operand(AnyTensor)
    y = result_def(AnyTensor)
    y_scale = result_def(AnyTensor)
    y_zero_point = result_def(AnyTensor)
    fresh_results = True

    def infer_shapes(self) -> list[Type]:
        u8 = IntegerType(8, "u")
        return [tensor_of(shape_of(self.x), u8), tensor_of([], f32), tensor_of([], u8)]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = np.asarray(inputs[0], np.float32)
        mx = np.float32(max(0.0, float(x.max()) if x.size else 0.0))
        mn = np.float32(min(0.0, float(x.min()) if x.size else 0.0))
        scale = np.float32(1.0 if mx == mn else (mx - mn)) / np.float32(255)
        zp = np.rint(np.clip(np.float32(0) - mn / scale, 0, 255))
        y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
        return [y, np.array(scale, np.float32), np.array(zp, np.uint8)]

    def flops(self) -> int:
        return 4 * num_elements(self.x.type)


INTEGER_OPS: list[type[TopOp]] = [
    MatMulIntegerOp,
    ConvIntegerOp,
    QLinearMatMulOp,
    QLinearConvOp,
    DynamicQuantizeLinearOp,
]

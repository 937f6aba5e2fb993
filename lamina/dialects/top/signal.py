"""Signal-processing ``top`` ops for speech front ends, with ONNX semantics: ``top.DFT``,
``top.STFT``, ``top.Window`` (Hann / Hamming / Blackman) and ``top.MelWeightMatrix``.

Complex tensors are real tensors with a trailing dimension of 2 (real, imaginary), as in ONNX.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.ir.attributes import dtype_to_element_type
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import DYNAMIC, Type

from .base import (
    AnyTensor,
    AnyTensorOrNone,
    BoolAttr,
    BoolProp,
    I,
    I64Attr,
    S,
    StrEnum,
    TopOp,
    const_value,
    elem_of,
    is_none,
    known_values,
    norm_axis,
    result_dtype,
    shape_of,
    tensor_of,
)


def _to_complex(x: np.ndarray) -> np.ndarray:
    """(..., 1) real or (..., 2) complex-as-real to a complex array without the last dim."""
    if x.shape[-1] == 1:
        return x[..., 0].astype(np.complex128)
    return x[..., 0].astype(np.float64) + 1j * x[..., 1].astype(np.float64)


def _to_real(c: np.ndarray) -> np.ndarray:
    return np.stack([c.real, c.imag], axis=-1)


def _scalar_int(v: Any, default: int | None = None) -> int | None:
    if v is None:
        return default
    a = np.asarray(v).reshape(-1)
    return int(a[0]) if a.size else default


class DFTOp(TopOp):
    """Discrete Fourier transform along ``axis`` (forward/inverse, one-sided real transforms)."""

    name = "top.DFT"
    input = operand(AnyTensor)
    dft_length = operand(AnyTensorOrNone)
    axis_value = operand(AnyTensorOrNone)  # opset 20: the axis as a (possibly runtime) tensor
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(1))
    inverse = prop(BoolProp, default=BoolAttr(False))
    onesided = prop(BoolProp, default=BoolAttr(False))
    shape_operands = ("dft_length", "axis_value")

    def infer_shapes(self) -> list[Type]:
        xs, vals = shape_of(self.input), known_values(self.dft_length, self.axis_value)
        if xs is None or vals is None or DYNAMIC in xs:
            return self.unranked_results()
        n, axv = vals
        ax = norm_axis(_scalar_int(axv, self.axis), len(xs))  # type: ignore[arg-type]
        inverse, onesided = bool(self.inverse), bool(self.onesided)
        length = _scalar_int(n)
        if length is None:
            length = 2 * (xs[ax] - 1) if inverse and onesided else xs[ax]
        out = list(xs[:-1])
        out[ax] = length // 2 + 1 if onesided and not inverse else length
        return [tensor_of([*out, 1 if inverse and onesided else 2], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, n, axv = inputs
        ax = norm_axis(_scalar_int(axv, self.axis), x.ndim)  # type: ignore[arg-type]
        inverse, onesided = bool(self.inverse), bool(self.onesided)
        length = _scalar_int(n)
        if length is None:
            length = 2 * (x.shape[ax] - 1) if inverse and onesided else x.shape[ax]
        c = _to_complex(x)
        if inverse:
            r = (
                np.fft.irfft(c, n=length, axis=ax)[..., None]
                if onesided
                else _to_real(np.fft.ifft(c, length, ax))
            )
        else:
            r = np.fft.fft(c, n=length, axis=ax)
            if onesided:
                r = np.take(r, np.arange(length // 2 + 1), axis=ax)
            r = _to_real(r)
        return [np.ascontiguousarray(r.astype(x.dtype))]

    flops_per_element = 0  # data movement: no arithmetic


class STFTOp(TopOp):
    """Short-time Fourier transform of (batch, length, 1|2) signals: frames of ``frame_length``
    every ``frame_step`` samples, optionally windowed; (batch, frames, bins, 2)."""

    name = "top.STFT"
    signal = operand(AnyTensor)
    frame_step = operand(AnyTensor)
    window = operand(AnyTensorOrNone)
    frame_length = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    onesided = prop(BoolProp, default=BoolAttr(True))
    shape_operands = ("frame_step", "frame_length")

    def infer_shapes(self) -> list[Type]:
        xs, vals = shape_of(self.signal), known_values(self.frame_step, self.frame_length)
        ws = None if is_none(self.window) else shape_of(self.window)
        if xs is None or vals is None or DYNAMIC in xs or (ws is None and not is_none(self.window)):
            return self.unranked_results()
        step = _scalar_int(vals[0])
        length = _scalar_int(vals[1], ws[0] if ws is not None else xs[-2])
        frames = 1 + (xs[1] - length) // step  # type: ignore[operator]
        bins = length // 2 + 1 if self.onesided else length  # type: ignore[operator]
        return [tensor_of([xs[0], frames, bins, 2], elem_of(self.signal))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, step, window, flen = inputs
        step = _scalar_int(step)
        length = _scalar_int(flen, window.shape[0] if window is not None else x.shape[-2])
        frames = 1 + (x.shape[1] - length) // step
        c = _to_complex(x)  # (B, L)
        idx = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
        fr = c[:, idx]  # (B, frames, length)
        if window is not None:
            fr = fr * window.astype(np.float64)
        r = np.fft.fft(fr, n=length, axis=-1)
        if self.onesided:
            r = r[..., : length // 2 + 1]
        return [np.ascontiguousarray(_to_real(r).astype(x.dtype))]

    flops_per_element = 0  # data movement: no arithmetic


class WindowOp(TopOp):
    """Hann, Hamming or Blackman window of ``size`` samples (periodic or symmetric)."""

    name = "top.Window"
    size = operand(AnyTensor)
    output = result_def(AnyTensor)
    mode = prop(StrEnum("hann", "hamming", "blackman"))
    periodic = prop(BoolProp, default=BoolAttr(True))
    shape_operands = ("size",)

    def infer_shapes(self) -> list[Type]:
        n = const_value(self.size)
        if n is None:
            return self.unranked_results()
        return [tensor_of([_scalar_int(n)], dtype_to_element_type(result_dtype(self)))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        n = _scalar_int(inputs[0])
        assert n is not None
        denom = n if self.periodic else n - 1
        k = np.arange(n, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = 2 * np.pi * k / denom
        mode = self.mode
        if mode == "hann":
            w = np.sin(np.pi * k / denom) ** 2
        elif mode == "hamming":
            a = 25.0 / 46.0
            w = a - (1 - a) * np.cos(t)
        else:
            w = 0.42 - 0.5 * np.cos(t) + 0.08 * np.cos(2 * t)
        return [w.astype(result_dtype(self))]


class MelWeightMatrixOp(TopOp):
    """(dft_length // 2 + 1, num_mel_bins) triangular mel filter bank, as ONNX defines it."""

    name = "top.MelWeightMatrix"
    num_mel_bins = operand(AnyTensor)
    dft_length = operand(AnyTensor)
    sample_rate = operand(AnyTensor)
    lower_edge_hertz = operand(AnyTensor)
    upper_edge_hertz = operand(AnyTensor)
    output = result_def(AnyTensor)
    shape_operands = ("num_mel_bins", "dft_length")

    def infer_shapes(self) -> list[Type]:
        vals = known_values(self.num_mel_bins, self.dft_length)
        if vals is None:
            return self.unranked_results()
        nmel, dft = (_scalar_int(v) for v in vals)
        return [tensor_of([dft // 2 + 1, nmel], dtype_to_element_type(result_dtype(self)))]  # type: ignore[operator]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        nmel, dft, rate = (_scalar_int(v) for v in inputs[:3])
        assert nmel is not None and dft is not None and rate is not None
        lo, hi = (float(np.asarray(v).reshape(-1)[0]) for v in inputs[3:])
        nspec = dft // 2 + 1
        lo_mel = 2595 * np.log10(1 + lo / 700)
        hi_mel = 2595 * np.log10(1 + hi / 700)
        bins = np.arange(nmel + 2) * ((hi_mel - lo_mel) / (nmel + 2)) + lo_mel
        hz = 700 * (np.power(10, bins / 2595) - 1)
        fb = (((dft + 1) * hz) // rate).astype(np.int64)
        out = np.zeros((nspec, nmel))
        j = np.arange(nspec)[:, None]
        left, center, right = fb[None, :-2], fb[None, 1:-1], fb[None, 2:]
        with np.errstate(divide="ignore", invalid="ignore"):
            up = np.where((j >= left) & (j <= center), (j - left) / np.maximum(center - left, 1), 0.0)
            down = np.where((j >= center) & (j < right), (right - j) / np.maximum(right - center, 1), 0.0)
        # rising edge (with the single-point case center == left giving 1 at the center), then the
        # falling edge overwrites from the center on, as the reference loops do
        out = np.where(center == left, np.where(j == center, 1.0, 0.0), up)
        out = np.where((right - center > 0) & (j >= center) & (j < right), down, out)
        return [out.astype(result_dtype(self))]


SIGNAL_OPS: list[type[TopOp]] = [DFTOp, STFTOp, WindowOp, MelWeightMatrixOp]

_ = S

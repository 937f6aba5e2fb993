"""Neural-network ``top`` ops: MatMul/Gemm, Conv/Deconv, pools, normalizations (BatchNorm,
InstanceNorm, LayerNorm, GroupNorm, RMSNorm, LRN, ...), Softmax, Einsum.

Each op's ``execute`` is its contract: a short numpy statement of the semantics. The fast forms the
interpreter runs (im2col convolution into reused buffers, the MaxPool tap loop, float32 LayerNorm,
in-place Softmax) live in :mod:`lamina.execution.kernels` and are returned by ``executor()``;
window geometry comes from :mod:`lamina.execution.kernels.geometry`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.execution.kernels.conv import conv_kernel
from lamina.execution.kernels.geometry import Geometry, conv_output_size, pool_output_size, window_geometry
from lamina.execution.kernels.norm import layer_norm_kernel, softmax_inplace_kernel
from lamina.execution.kernels.pool import max_pool_kernel
from lamina.execution.kernels.windows import window_sum, windows
from lamina.ir.attributes import dtype_to_element_type, element_type_to_dtype
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import DYNAMIC, NoneType, Type, f32, i64

from .base import (
    AnyTensor,
    AnyTensorOrNone,
    BoolAttr,
    BoolProp,
    F,
    F64Attr,
    I,
    I64ArrayAttr,
    I64Attr,
    S,
    StrAttr,
    StrEnum,
    TopOp,
    broadcast_shapes,
    check_axis,
    elem_of,
    is_none,
    norm_axis,
    num_elements,
    shape_of,
    tensor_of,
)

_AUTO_PAD = StrEnum("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


# ---- matmul -----------------------------------------------------------------------------------


class MatMulOp(TopOp):
    """numpy ``matmul`` semantics (batched, broadcast), optional bias added to the output."""

    name = "top.MatMul"
    fresh_results = True
    input = operand(AnyTensor)
    right = operand(AnyTensor)
    bias = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    do_relu = prop(BoolProp, default=BoolAttr(False))
    #: with ``do_relu``: clamp to ``relu_limit`` as well when it is positive (ReLU6 and Clip(0, n))
    relu_limit = prop(F64Attr, default=F(-1.0))

    def infer_shapes(self) -> list[Type]:
        a, b = shape_of(self.input), shape_of(self.right)
        if a is None or b is None:
            return [tensor_of(None, elem_of(self.input))]
        a1, b1 = list(a), list(b)
        if len(a1) == 1:
            a1 = [1, *a1]
        if len(b1) == 1:
            b1 = [*b1, 1]
        if a1[-1] != b1[-2] and DYNAMIC not in (a1[-1], b1[-2]):
            raise VerifyError(f"contracting dimensions differ: {list(a)} x {list(b)}")
        from .base import broadcast_shapes

        batch = broadcast_shapes(tuple(a1[:-2]), tuple(b1[:-2])) or ()
        out = [*batch, a1[-2], b1[-1]]
        if len(a) == 1:
            out.pop(-2)
        if len(b) == 1:
            out.pop(-1)
        return [tensor_of(out, elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        a, b, bias = inputs
        y = np.matmul(a, b)
        if bias is not None:
            y += bias
        if self.do_relu:
            np.maximum(y, 0, out=y)
            if self.relu_limit > 0:
                np.minimum(y, y.dtype.type(self.relu_limit), out=y)
        return [y]

    def flops(self) -> int:
        a = shape_of(self.input)
        k = a[-1] if a else 0
        return 2 * k * num_elements(self.output.type)


class GemmOp(TopOp):
    """alpha * op(A) @ op(B) + beta * C."""

    name = "top.Gemm"
    fresh_results = True
    input = operand(AnyTensor)
    right = operand(AnyTensor)
    bias = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    alpha = prop(F64Attr, default=F(1.0))
    beta = prop(F64Attr, default=F(1.0))
    transA = prop(BoolProp, default=BoolAttr(False))  # noqa: N815 - ONNX attribute names
    transB = prop(BoolProp, default=BoolAttr(False))  # noqa: N815

    def infer_shapes(self) -> list[Type]:
        a, b = shape_of(self.input), shape_of(self.right)
        if a is None or b is None or len(a) != 2 or len(b) != 2:
            return self.unranked_results()
        (m, ka), (kb, n) = a[::-1] if self.transA else a, b[::-1] if self.transB else b
        if ka != kb and DYNAMIC not in (ka, kb):
            raise VerifyError(f"contracting dimensions differ: {list(a)} x {list(b)}")
        return [tensor_of([m, n], elem_of(self.input))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        a, b, c = inputs
        if self.transA:
            a = a.T
        if self.transB:
            b = b.T
        y = a @ b
        al = self.alpha
        if al != 1.0:
            y *= y.dtype.type(al)
        if c is not None:
            be = self.beta
            y += c * c.dtype.type(be) if be != 1.0 else c
        return [y]

    def flops(self) -> int:
        a = shape_of(self.input)
        return 2 * (a[0] if self.transA and a else a[-1] if a else 0) * num_elements(self.output.type)


class EinsumOp(TopOp):
    name = "top.Einsum"
    from lamina.ir.opdef import var_operand as _vo

    inputs = _vo(AnyTensor)
    output = result_def(AnyTensor)
    equation = prop(StrAttr)

    def infer_shapes(self) -> list[Type]:
        shapes = [shape_of(v) for v in self.inputs]
        if any(s is None for s in shapes):
            return self.unranked_results()
        eq = self.equation.replace(" ", "")
        lhs, arrow, rhs = eq.partition("->")
        dims: dict[str, int] = {}
        ell: tuple[int, ...] = ()
        for term, s in zip(lhs.split(","), shapes):
            pre, dots, post = term.partition("...")
            n_ell = len(s) - len(pre) - len(post) if dots else 0
            if dots:
                ell = broadcast_shapes(ell, tuple(s[len(pre) : len(pre) + n_ell])) or ()
            for letter, d in zip(pre + post, [*s[: len(pre)], *s[len(pre) + n_ell :]]):
                if dims.get(letter, 1) in (1, DYNAMIC):
                    dims[letter] = d
        if not arrow:
            letters = [c for c in lhs if c.isalpha()]
            rhs = ("..." if "..." in lhs else "") + "".join(
                sorted(c for c in set(letters) if letters.count(c) == 1)
            )
        pre, dots, post = rhs.partition("...")
        out = [*(dims[c] for c in pre), *(ell if dots else ()), *(dims[c] for c in post)]
        dt = np.result_type(*(element_type_to_dtype(elem_of(v)) for v in self.inputs))
        return [tensor_of(out, dtype_to_element_type(dt))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        eq = self.equation.replace(" ", "")
        return [np.asarray(np.einsum(eq, *inputs, optimize=len(inputs) > 2))]


# ---- convolution ------------------------------------------------------------------------------


def check_window(op: TopOp, nd: int, k: Sequence[int] | None) -> None:
    """Check a conv/pool window's attributes for ``nd`` spatial dims: list lengths, strides and
    dilations >= 1, pads >= 0, kernel sizes >= 1. Raises VerifyError saying what is wrong."""
    lengths = {"kernel_shape": nd, "strides": nd, "dilations": nd, "pads": 2 * nd}
    for name, n in lengths.items():
        v = op.attr(name)
        if v is not None and len(v) != n:
            raise VerifyError(
                f"'{name}' has {len(v)} values {list(v)} but the input has {nd} spatial dims (expected {n})"
            )
    for name, low in (("strides", 1), ("dilations", 1), ("pads", 0)):
        v = op.attr(name)
        if v is not None and any(x < low for x in v):
            raise VerifyError(f"'{name}' {list(v)} must all be >= {low}")
    if k is not None and any(x < 1 for x in k):
        raise VerifyError(f"kernel shape {list(k)} must all be >= 1")


def check_window_fits(op: TopOp, in_sp: Sequence[int], k: Sequence[int]) -> None:
    """Shape inference's check (not the verifier's: a branch not taken may not fit): the dilated
    kernel is no larger than the padded input."""
    nd = len(k)
    if len(in_sp) != nd:
        raise VerifyError(
            f"'kernel_shape' {list(k)} has {nd} values but the input of rank {len(in_sp) + 2} has "
            f"{len(in_sp)} spatial dims"
        )
    if DYNAMIC in in_sp or op.attr("auto_pad") not in ("NOTSET", "VALID"):
        return
    d = list(op.attr("dilations") or [1] * nd)
    p = list(op.attr("pads") or [0] * (2 * nd)) if op.attr("auto_pad") == "NOTSET" else [0] * (2 * nd)
    for i in range(nd):
        ek = (k[i] - 1) * d[i] + 1
        if ek > in_sp[i] + p[i] + p[i + nd]:
            raise VerifyError(
                f"kernel size {ek} (kernel {k[i]}, dilation {d[i]}) exceeds the padded input size "
                f"{in_sp[i] + p[i] + p[i + nd]} of spatial dim {i}"
            )


class ConvOp(TopOp):
    """N-d convolution (NCHW), groups, dilations, explicit or automatic padding."""

    name = "top.Conv"
    input = operand(AnyTensor)
    filter = operand(AnyTensor)
    bias = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    kernel_shape = prop(I64ArrayAttr, optional=True)
    strides = prop(I64ArrayAttr, optional=True)
    pads = prop(I64ArrayAttr, optional=True)
    dilations = prop(I64ArrayAttr, optional=True)
    group = prop(I64Attr, default=I(1))
    auto_pad = prop(_AUTO_PAD, default=S("NOTSET"))
    do_relu = prop(BoolProp, default=BoolAttr(False))
    #: with ``do_relu``: clamp to ``relu_limit`` as well when it is positive (ReLU6 and Clip(0, n))
    relu_limit = prop(F64Attr, default=F(-1.0))

    def verify_(self) -> None:
        xs, ws = shape_of(self.input), shape_of(self.filter)
        if xs is not None and ws is not None:
            if len(xs) != len(ws):
                raise VerifyError(f"input rank {len(xs)} and filter rank {len(ws)} differ")
            g = self.group
            if g < 1:
                raise VerifyError(f"group {g} must be >= 1")
            if xs[1] >= 0 and ws[1] >= 0 and xs[1] != ws[1] * g:
                raise VerifyError(f"input channels {xs[1]} != filter channels {ws[1]} x group {g}")
        if ws is not None and len(ws) >= 2:
            k = self.kernel_shape
            if k is not None and len(k) == len(ws) - 2 and DYNAMIC not in ws and list(k) != list(ws[2:]):
                raise VerifyError(
                    f"'kernel_shape' {list(k)} differs from the filter's spatial dims {list(ws[2:])}"
                )
            check_window(self, len(ws) - 2, list(k) if k is not None else ws[2:])

    def geometry(self, x_shape: Sequence[int], w_shape: Sequence[int]) -> Geometry:
        """Kernel, strides, dilations and explicit pads for these input and filter shapes."""
        return window_geometry(
            x_shape[2:],
            self.kernel_shape or w_shape[2:],
            self.strides,
            self.dilations,
            self.pads,
            self.auto_pad,
        )

    def infer_shapes(self) -> list[Type]:
        xs, ws = shape_of(self.input), shape_of(self.filter)
        if xs is None or ws is None or DYNAMIC in xs[2:] or DYNAMIC in ws:
            return [
                tensor_of(
                    None if xs is None else [xs[0], ws[0] if ws else DYNAMIC] + [DYNAMIC] * (len(xs) - 2),
                    elem_of(self.input),
                )
            ]
        geo = self.geometry(xs, ws)
        check_window_fits(self, xs[2:], geo[0])
        return [tensor_of([xs[0], ws[0], *conv_output_size(xs[2:], geo)], elem_of(self.input))]

    fresh_results = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        """Zero-pad, view the windows, contract each group's windows with its filters."""
        x, w, b = inputs
        k, s, d, p = self.geometry(x.shape, w.shape)
        nd, g, m = len(k), self.group, w.shape[0]
        xp = np.pad(x, [(0, 0), (0, 0)] + [(p[i], p[i + nd]) for i in range(nd)])
        win = windows(xp, k, s, d)  # (N, C, *out, *k)
        cg, mg = x.shape[1] // g, m // g
        taps = ([1, *range(2 + nd, 2 + 2 * nd)], [1, *range(2, 2 + nd)])  # (channel, kernel) axes
        per_group = [  # each (N, *out, M/G)
            np.tensordot(win[:, i * cg : (i + 1) * cg], w[i * mg : (i + 1) * mg], taps) for i in range(g)
        ]
        y = np.moveaxis(np.concatenate(per_group, axis=-1), -1, 1).astype(np.result_type(x, w), copy=False)
        if b is not None:
            y = y + b.reshape((1, m) + (1,) * nd).astype(y.dtype, copy=False)
        if self.do_relu:
            y = np.maximum(y, 0)
            if self.relu_limit > 0:
                y = np.minimum(y, y.dtype.type(self.relu_limit))
        return [np.ascontiguousarray(y)]

    def executor(self) -> Any:
        """The fast kernel (:func:`lamina.execution.kernels.conv.conv_kernel`)."""
        return conv_kernel(
            self.kernel_shape,
            self.strides,
            self.dilations,
            self.pads,
            self.auto_pad,
            self.group,
            bool(self.do_relu),
            self.relu_limit,
        )

    def flops(self) -> int:
        ws = shape_of(self.filter)
        if not ws:
            return 0
        return 2 * int(np.prod(ws[1:])) * num_elements(self.output.type)


class DeconvOp(TopOp):
    """Transposed convolution (ONNX ConvTranspose)."""

    name = "top.Deconv"
    fresh_results = True
    input = operand(AnyTensor)
    filter = operand(AnyTensor)
    bias = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    kernel_shape = prop(I64ArrayAttr, optional=True)
    strides = prop(I64ArrayAttr, optional=True)
    pads = prop(I64ArrayAttr, optional=True)
    dilations = prop(I64ArrayAttr, optional=True)
    output_padding = prop(I64ArrayAttr, optional=True)
    output_shape = prop(I64ArrayAttr, optional=True)
    group = prop(I64Attr, default=I(1))
    auto_pad = prop(_AUTO_PAD, default=S("NOTSET"))

    def infer_shapes(self) -> list[Type]:
        xs, ws = shape_of(self.input), shape_of(self.filter)
        if xs is None or ws is None or DYNAMIC in xs or DYNAMIC in ws:
            return self.unranked_results()
        nd = len(xs) - 2
        k = list(self.kernel_shape or ws[2:])
        s = list(self.strides or [1] * nd)
        d = list(self.dilations or [1] * nd)
        op_ = list(self.output_padding or [0] * nd)
        full = [s[i] * (xs[2 + i] - 1) + op_[i] + (k[i] - 1) * d[i] + 1 for i in range(nd)]
        out_shape = self.output_shape
        if out_shape is not None:
            sp = list(out_shape)[-nd:]
        elif self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            sp = [xs[2 + i] * s[i] for i in range(nd)]
        else:
            p = list(self.pads or [0] * (2 * nd))
            sp = [full[i] - p[i] - p[i + nd] for i in range(nd)]
        dts = [element_type_to_dtype(elem_of(v)) for v in self.operands if not is_none(v)]
        return [tensor_of([xs[0], ws[1] * self.group, *sp], dtype_to_element_type(np.result_type(*dts)))]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, b = inputs
        nd = x.ndim - 2
        k = list(self.kernel_shape or w.shape[2:])
        s = list(self.strides or [1] * nd)
        d = list(self.dilations or [1] * nd)
        op_ = list(self.output_padding or [0] * nd)
        g = self.group
        n, c = x.shape[:2]
        mg = w.shape[1]
        isp = x.shape[2:]
        full = [s[i] * (isp[i] - 1) + op_[i] + (k[i] - 1) * d[i] + 1 for i in range(nd)]
        y = np.zeros((n, mg * g, *full), dtype=np.result_type(x, w))
        cg = c // g
        for gi in range(g):
            xg = x[:, gi * cg : (gi + 1) * cg]
            wg = w[gi * cg : (gi + 1) * cg]  # (cg, mg, *k)
            cols = np.tensordot(xg, wg, axes=((1,), (0,)))  # (N, *I, mg, *k)
            cols = np.moveaxis(cols, 1 + nd, 1)  # (N, mg, *I, *k)
            for idx in np.ndindex(*k):
                dst = (
                    slice(None),
                    slice(gi * mg, (gi + 1) * mg),
                    *[slice(idx[i] * d[i], idx[i] * d[i] + (isp[i] - 1) * s[i] + 1, s[i]) for i in range(nd)],
                )
                y[dst] += cols[(slice(None), slice(None), *[slice(None)] * nd, *idx)]
        out_shape = self.output_shape
        auto = self.auto_pad
        if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
            target = list(out_shape)[-nd:] if out_shape is not None else [isp[i] * s[i] for i in range(nd)]
            total = [full[i] - target[i] for i in range(nd)]
            if auto == "SAME_UPPER":
                begin = [t // 2 for t in total]
            else:
                begin = [t - t // 2 for t in total]
            pads = begin + [total[i] - begin[i] for i in range(nd)]
        else:
            pads = list(self.pads or [0] * (2 * nd))
        if min(pads) < 0:  # output_shape larger than the natural size: grow with zeros
            y = np.pad(y, [(0, 0), (0, 0)] + [(max(-pads[i], 0), max(-pads[i + nd], 0)) for i in range(nd)])
            full = list(y.shape[2:])
            pads = [max(p, 0) for p in pads]
        sl = (slice(None), slice(None), *[slice(pads[i], full[i] - pads[i + nd]) for i in range(nd)])
        y = y[sl]
        if b is not None:
            y = y + b.reshape((1, -1) + (1,) * nd)
        return [np.ascontiguousarray(y)]

    def flops(self) -> int:
        ws = shape_of(self.filter)
        xs = shape_of(self.input)
        if not ws or not xs or DYNAMIC in xs:
            return 0
        return 2 * int(np.prod(ws)) * int(np.prod(xs)) // max(xs[1], 1)


# ---- pooling ----------------------------------------------------------------------------------


class _PoolBase(TopOp):
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    kernel_shape = prop(I64ArrayAttr)
    strides = prop(I64ArrayAttr, optional=True)
    pads = prop(I64ArrayAttr, optional=True)
    dilations = prop(I64ArrayAttr, optional=True)
    ceil_mode = prop(BoolProp, default=BoolAttr(False))
    auto_pad = prop(_AUTO_PAD, default=S("NOTSET"))

    def _geometry(
        self, x_shape: Sequence[int]
    ) -> tuple[list[int], list[int], list[int], list[int], list[int]]:
        """kernel, strides, dilations, pads (explicit), extra end padding for ceil mode, output sizes."""
        geo = window_geometry(
            x_shape[2:],
            self.kernel_shape,
            self.strides,
            self.dilations,
            self.pads,
            self.auto_pad,
        )
        out, extra = pool_output_size(x_shape[2:], geo, bool(self.ceil_mode))
        return (*geo, extra + out)

    def verify_(self) -> None:
        k = list(self.kernel_shape)
        check_window(self, len(k), k)

    def infer_shapes(self) -> list[Type]:
        xs = shape_of(self.input)
        if xs is not None:
            check_window_fits(self, xs[2:], list(self.kernel_shape))
        if xs is None or DYNAMIC in xs[2:]:
            return [r.type for r in self.results]
        k, *_, eo = self._geometry(xs)
        nd = len(k)
        t = tensor_of([xs[0], xs[1], *eo[nd:]], elem_of(self.input))
        return [t] + (
            [tensor_of(t.shape, i64)]
            if len(self.results) > 1 and not isinstance(self.results[1].type, NoneType)
            else [r.type for r in self.results[1:]]
        )


class MaxPoolOp(_PoolBase):
    name = "top.MaxPool"
    indices = result_def(AnyTensorOrNone)
    storage_order = prop(I64Attr, default=I(0))

    fresh_results = True

    def executor(self) -> Any:
        """Without the indices result, the fast kernel
        (:func:`lamina.execution.kernels.pool.max_pool_kernel`); with indices, :meth:`execute`."""
        if not isinstance(self.results[1].type, NoneType):
            return self.execute
        return max_pool_kernel(
            self.kernel_shape,
            self.strides,
            self.dilations,
            self.pads,
            self.auto_pad,
            bool(self.ceil_mode),
        )

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        k, s, d, p, eo = self._geometry(x.shape)
        nd = len(k)
        lo = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        xp = np.pad(x, [(0, 0), (0, 0)] + [(p[i], p[i + nd] + eo[i]) for i in range(nd)], constant_values=lo)
        win = windows(xp, k, s, d)
        osz = eo[nd:]
        win = win[(slice(None), slice(None), *[slice(0, o) for o in osz])]
        flat = win.reshape(*win.shape[: 2 + nd], -1)
        y = flat.max(axis=-1)
        if isinstance(self.results[1].type, NoneType):
            return [y, None]
        am = flat.argmax(axis=-1)
        kidx = np.unravel_index(am, k)
        sp = x.shape[2:]
        coords = []
        for i in range(nd):
            o = np.arange(osz[i]).reshape([1, 1] + [-1 if j == i else 1 for j in range(nd)])
            coords.append(o * s[i] - p[i] + kidx[i] * d[i])
        nc = np.arange(x.shape[0] * x.shape[1]).reshape(x.shape[0], x.shape[1], *([1] * nd))
        if self.storage_order and nd == 2:
            lin = coords[0] + coords[1] * sp[0]
        else:
            lin = np.zeros_like(coords[0])
            for i in range(nd):
                lin = lin * sp[i] + coords[i]
        idx = nc * int(np.prod(sp)) + lin
        return [y, idx.astype(np.int64)]


class AvgPoolOp(_PoolBase):
    name = "top.AvgPool"
    fresh_results = True
    count_include_pad = prop(BoolProp, default=BoolAttr(False))

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        k, s, d, p, eo = self._geometry(x.shape)
        nd = len(k)
        width = [(0, 0), (0, 0)] + [(p[i], p[i + nd] + eo[i]) for i in range(nd)]
        xp = np.pad(x, width)
        osz = eo[nd:]
        win = windows(xp, k, s, d)[(slice(None), slice(None), *[slice(0, o) for o in osz])]
        axes = tuple(range(2 + nd, 2 + 2 * nd))
        tot = window_sum(win, nd, np.float64 if x.dtype == np.float16 else x.dtype)
        # divisor: window elements that are real (or explicit padding when count_include_pad)
        mask = np.zeros((1, 1, *x.shape[2:]), dtype=np.float32) + 1
        mw = [(0, 0), (0, 0)] + [(p[i], p[i + nd]) for i in range(nd)]
        mask = np.pad(mask, mw, constant_values=1.0 if self.count_include_pad else 0.0)
        mask = np.pad(mask, [(0, 0), (0, 0)] + [(0, eo[i]) for i in range(nd)])
        cnt = windows(mask, k, s, d)[(slice(None), slice(None), *[slice(0, o) for o in osz])].sum(axis=axes)
        return [(tot / np.maximum(cnt, 1)).astype(x.dtype)]


class LpPoolOp(_PoolBase):
    name = "top.LpPool"
    p = prop(I64Attr, default=I(2))

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        k, s, d, pads, eo = self._geometry(x.shape)
        nd = len(k)
        xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + nd] + eo[i]) for i in range(nd)])
        osz = eo[nd:]
        win = windows(xp, k, s, d)[(slice(None), slice(None), *[slice(0, o) for o in osz])]
        pw = self.p
        r = np.sum(np.abs(win) ** pw, axis=tuple(range(2 + nd, 2 + 2 * nd))) ** (1.0 / pw)
        return [r.astype(x.dtype)]


# ---- normalization ----------------------------------------------------------------------------


def _bshape(c_axis_len: int, rank: int, axis: int = 1) -> tuple[int, ...]:
    return tuple(c_axis_len if i == axis else 1 for i in range(rank))


class BatchNormOp(TopOp):
    """Inference batch normalization: (x - mean) / sqrt(var + eps) * gamma + beta over axis 1."""

    name = "top.BatchNorm"
    fresh_results = True
    input = operand(AnyTensor)
    gamma = operand(AnyTensor)
    beta = operand(AnyTensor)
    mean = operand(AnyTensor)
    variance = operand(AnyTensor)
    output = result_def(AnyTensor)
    epsilon = prop(F64Attr, default=F(1e-5))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, g, b, m, v = inputs
        shp = _bshape(x.shape[1], x.ndim) if x.ndim > 1 else (-1,)
        inv = (g / np.sqrt(v + v.dtype.type(self.epsilon))).astype(x.dtype)
        return [(x * inv.reshape(shp) + (b - m * inv).astype(x.dtype).reshape(shp)).astype(x.dtype)]

    flops_per_element = 2


def _normalize(x: np.ndarray, axes: tuple[int, ...], eps: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    xf = x.astype(np.float32) if x.dtype != np.float64 else x
    mean = xf.mean(axis=axes, keepdims=True)
    diff = xf - mean
    var = np.mean(diff * diff, axis=axes, keepdims=True)
    inv = 1.0 / np.sqrt(var + eps)
    return diff * inv, mean, inv


class InstanceNormOp(TopOp):
    name = "top.InstanceNorm"
    fresh_results = True
    input = operand(AnyTensor)
    weight = operand(AnyTensor)
    bias = operand(AnyTensor)
    output = result_def(AnyTensor)
    epsilon = prop(F64Attr, default=F(1e-5))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, b = inputs
        y, _, _ = _normalize(x, tuple(range(2, x.ndim)), self.epsilon)
        shp = _bshape(x.shape[1], x.ndim)
        return [(y * w.reshape(shp) + b.reshape(shp)).astype(x.dtype)]

    flops_per_element = 5


class LayerNormOp(TopOp):
    """Normalize over dims ``axis..rank``; optional Mean and InvStdDev results."""

    name = "top.LayerNorm"
    input = operand(AnyTensor)
    weight = operand(AnyTensor)
    bias = operand(AnyTensorOrNone)
    output = result_def(AnyTensor)
    mean = result_def(AnyTensorOrNone)
    rstd = result_def(AnyTensorOrNone)
    axis = prop(I64Attr, default=I(-1))
    epsilon = prop(F64Attr, default=F(1e-5))
    stash_type = prop(I64Attr, default=I(1))

    fresh_results = True

    def infer_shapes(self) -> list[Type]:
        check_axis(self, self.input)
        xs = shape_of(self.input)
        if xs is None:
            return self.unranked_results()
        ax = norm_axis(self.axis, len(xs))
        stats = tensor_of([*xs[:ax], *[1] * (len(xs) - ax)], f32)
        return [tensor_of(xs, elem_of(self.input)), stats, stats]

    def executor(self) -> Any:
        """With only the normalized output wanted, the float32 kernel
        (:func:`lamina.execution.kernels.norm.layer_norm_kernel`)."""
        if not (isinstance(self.mean.type, NoneType) and isinstance(self.rstd.type, NoneType)):
            return self.execute
        return layer_norm_kernel(self.axis, self.epsilon, self.execute)

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, b = inputs
        ax = norm_axis(self.axis, x.ndim)
        y, mean, inv = _normalize(x, tuple(range(ax, x.ndim)), self.epsilon)
        y = y * w
        if b is not None:
            y = y + b
        return [y.astype(x.dtype), mean.astype(np.float32), inv.astype(np.float32)]

    flops_per_element = 5


class GroupNormOp(TopOp):
    name = "top.GroupNorm"
    fresh_results = True
    input = operand(AnyTensor)
    weight = operand(AnyTensor)
    bias = operand(AnyTensor)
    output = result_def(AnyTensor)
    num_groups = prop(I64Attr)
    epsilon = prop(F64Attr, default=F(1e-5))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w, b = inputs
        g = self.num_groups
        n, c = x.shape[:2]
        xr = x.reshape(n, g, -1)
        y, _, _ = _normalize(xr, (2,), self.epsilon)
        y = y.reshape(x.shape)
        if w.size == g and g != c:  # opset 18: per-group scale/bias
            w = np.repeat(w, c // g)
            b = np.repeat(b, c // g)
        shp = _bshape(c, x.ndim)
        return [(y * w.reshape(shp) + b.reshape(shp)).astype(x.dtype)]

    flops_per_element = 5


class RMSNormOp(TopOp):
    name = "top.RMSNorm"
    fresh_results = True
    input = operand(AnyTensor)
    weight = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(-1))
    epsilon = prop(F64Attr, default=F(1e-5))
    stash_type = prop(I64Attr, default=I(1))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x, w = inputs
        ax = norm_axis(self.axis, x.ndim)
        xf = x.astype(np.float32) if x.dtype != np.float64 else x
        ms = np.mean(xf * xf, axis=tuple(range(ax, x.ndim)), keepdims=True)
        return [(xf / np.sqrt(ms + self.epsilon) * w).astype(x.dtype)]

    flops_per_element = 4


class LRNOp(TopOp):
    name = "top.LRN"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    size = prop(I64Attr)
    alpha = prop(F64Attr, default=F(1e-4))
    beta = prop(F64Attr, default=F(0.75))
    bias = prop(F64Attr, default=F(1.0))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        n = self.size
        c = x.shape[1]
        sq = np.square(x.astype(np.float64))
        lo, hi = (n - 1) // 2, n - 1 - (n - 1) // 2
        pad = np.pad(sq, [(0, 0), (lo, hi)] + [(0, 0)] * (x.ndim - 2))
        cs = np.concatenate([np.zeros_like(pad[:, :1]), np.cumsum(pad, axis=1)], axis=1)
        ssum = cs[:, n : n + c] - cs[:, :c]
        r = x / (self.bias + self.alpha / n * ssum) ** self.beta
        return [r.astype(x.dtype)]


class LpNormOp(TopOp):
    name = "top.LpNorm"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(-1))
    p = prop(I64Attr, default=I(2))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        ax = norm_axis(self.axis, x.ndim)
        if self.p == 1:
            nrm = np.sum(np.abs(x), axis=ax, keepdims=True)
        else:
            nrm = np.sqrt(np.sum(x * x, axis=ax, keepdims=True))
        with np.errstate(divide="ignore", invalid="ignore"):
            return [np.where(nrm == 0, 0, x / nrm).astype(x.dtype)]


class MeanVarianceNormOp(TopOp):
    name = "top.MeanVarianceNorm"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    axes = prop(I64ArrayAttr, optional=True)

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        axes = tuple(self.axes or (0, 2, 3))
        mean = x.mean(axis=axes, keepdims=True)
        std = np.sqrt(np.mean(np.square(x - mean), axis=axes, keepdims=True))
        return [((x - mean) / (std + 1e-9)).astype(x.dtype)]


class SoftmaxOp(TopOp):
    """softmax (or log-softmax with ``log``) along ``axis``."""

    name = "top.Softmax"
    fresh_results = True
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(-1))
    log = prop(BoolProp, default=BoolAttr(False))

    result_like_input = True

    def infer_shapes(self) -> list[Type]:
        check_axis(self, self.input)
        return [self.input.type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        ax = norm_axis(self.axis, x.ndim)
        m = np.max(x, axis=ax, keepdims=True)
        m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
        e = x - m
        if self.log:
            return [(e - np.log(np.sum(np.exp(e), axis=ax, keepdims=True))).astype(x.dtype)]
        np.exp(e, out=e)
        e /= np.sum(e, axis=ax, keepdims=True)
        return [e]

    def inplace_executor(self, operand_index: int) -> Any:
        """The in-place kernel (:func:`lamina.execution.kernels.norm.softmax_inplace_kernel`)."""
        if self.log:
            return None
        return softmax_inplace_kernel(self.axis, self.execute)

    flops_per_element = 5


class HardmaxOp(TopOp):
    name = "top.Hardmax"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    axis = prop(I64Attr, default=I(-1))

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        x = inputs[0]
        ax = norm_axis(self.axis, x.ndim)
        idx = np.expand_dims(np.argmax(x, axis=ax), ax)
        out = np.zeros_like(x)
        np.put_along_axis(out, idx, 1, axis=ax)
        return [out]


NN_OPS: list[type[TopOp]] = [
    MatMulOp,
    GemmOp,
    EinsumOp,
    ConvOp,
    DeconvOp,
    MaxPoolOp,
    AvgPoolOp,
    LpPoolOp,
    BatchNormOp,
    InstanceNormOp,
    LayerNormOp,
    GroupNormOp,
    RMSNormOp,
    LRNOp,
    LpNormOp,
    MeanVarianceNormOp,
    SoftmaxOp,
    HardmaxOp,
]

_ = (math, StrAttr)

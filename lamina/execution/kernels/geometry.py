"""The one place that computes convolution and pooling geometry (ONNX conventions).

Shape inference, the ``top`` contracts (``execute``), the fast kernels and the integer kernels all
read their window geometry from here, so that a change of convention (auto_pad, ceil_mode) is made
once. Pure integer arithmetic on shapes: no arrays.

A window over ``nd`` spatial dims is described by its kernel sizes ``k``, strides ``s``, dilations
``d`` and pads ``p`` (``nd`` begin values then ``nd`` end values, ONNX order).
"""

from __future__ import annotations

from collections.abc import Sequence

Geometry = tuple[list[int], list[int], list[int], list[int]]
"""kernel sizes, strides, dilations, pads (begins then ends)."""


def effective_kernel(k: int, d: int) -> int:
    """Extent of a kernel of size ``k`` with dilation ``d``."""
    return (k - 1) * d + 1


def conv_pads(
    auto_pad: str,
    in_sp: Sequence[int],
    k: Sequence[int],
    s: Sequence[int],
    d: Sequence[int],
    pads: Sequence[int] | None,
) -> list[int]:
    """Explicit pads (begins then ends) for ``auto_pad`` NOTSET (``pads``, zeros if absent), VALID
    (zeros) or SAME_UPPER / SAME_LOWER (output size ceil(in / stride), the odd pad at the end for
    SAME_UPPER, at the beginning for SAME_LOWER)."""
    nd = len(in_sp)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nd):
            out = -(-in_sp[i] // s[i])
            total = max((out - 1) * s[i] + effective_kernel(k[i], d[i]) - in_sp[i], 0)
            lo = total // 2 if auto_pad == "SAME_UPPER" else total - total // 2
            begin.append(lo)
            end.append(total - lo)
        return begin + end
    if auto_pad == "VALID" or pads is None:
        return [0] * (2 * nd)
    return list(pads)


def window_geometry(
    in_sp: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str = "NOTSET",
) -> Geometry:
    """Kernel, strides, dilations and explicit pads of a window over spatial sizes ``in_sp``
    (absent strides and dilations are ones)."""
    nd = len(kernel)
    k = list(kernel)
    s = list(strides or [1] * nd)
    d = list(dilations or [1] * nd)
    return k, s, d, conv_pads(auto_pad, in_sp, k, s, d, pads)


def conv_output_size(in_sp: Sequence[int], geo: Geometry) -> list[int]:
    """Spatial output sizes of a convolution (floor mode)."""
    k, s, d, p = geo
    nd = len(k)
    return [(in_sp[i] + p[i] + p[i + nd] - effective_kernel(k[i], d[i])) // s[i] + 1 for i in range(nd)]


def pool_output_size(in_sp: Sequence[int], geo: Geometry, ceil_mode: bool) -> tuple[list[int], list[int]]:
    """Spatial output sizes of a pooling window and the extra end padding ceil mode needs so that
    the last window fits (zeros in floor mode). In ceil mode the last window must start inside the
    input or its begin pad."""
    k, s, d, p = geo
    nd = len(k)
    extra, out = [], []
    for i in range(nd):
        ek = effective_kernel(k[i], d[i])
        span = in_sp[i] + p[i] + p[i + nd] - ek
        if ceil_mode:
            o = -(-span // s[i]) + 1
            if (o - 1) * s[i] >= in_sp[i] + p[i]:
                o -= 1
        else:
            o = span // s[i] + 1
        out.append(o)
        extra.append(max((o - 1) * s[i] + ek - (in_sp[i] + p[i] + p[i + nd]), 0))
    return out, extra


__all__ = [
    "Geometry",
    "conv_output_size",
    "conv_pads",
    "effective_kernel",
    "pool_output_size",
    "window_geometry",
]

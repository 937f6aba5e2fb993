"""Every other ``tpu`` op: the ``top`` op's definition in float mode only (F32/F16/BF16: operands
widened to f32, the ``top`` reference, results rounded to their element type), lowered by
:class:`FloatLowering`."""

from __future__ import annotations

from lamina.dialects.top.base import TopOp

from ..lowering.pattern import FamilyLowering
from .common import ModeOp, declare


def declare_float(top_cls: type[TopOp]) -> type[ModeOp]:
    """The float-mode ``tpu`` op of ``top_cls``."""
    return declare(top_cls, None, __name__)


class FloatLowering(FamilyLowering):
    """top.X → tpu.X in the op's float mode (no integer form: INT8 ops run in F32 with casts)."""

"""Model boundary ops: ``top.Input``, ``top.Weight``, ``top.None`` and the region terminator ``top.Yield``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from lamina.ir.core import Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import operand, prop, result_def, var_operand
from lamina.ir.traits import (
    ConstantLike,
    IsTerminator,
    MemoryEffectOpInterface,
    NotALayer,
    Pure,
    ReturnLike,
)
from lamina.ir.types import NoneType, RankedTensorType, ShapedType, Type, none

from .base import (
    AnyTensor,
    BoolAttr,
    BoolProp,
    ElementsAttrC,
    F,
    F64ArrayAttr,
    F64Attr,
    I,
    I64ArrayAttr,
    I64Attr,
    S,
    StrEnum,
    TopOp,
)


class InputOp(TopOp, MemoryEffectOpInterface):
    """A model input (the function argument it wraps), with TPU-MLIR's preprocessing description:
    ``x' = (pixel - mean) * scale`` per channel after resizing to ``resize_dims``. Execution is the
    identity: preprocessing is applied by the tools before the interpreter runs.

    Not ``Pure``: it reads the model's input, an effect, so dead-code elimination, ``canonicalize``
    and CSE keep it even when nothing uses the input (a model keeps its signature)."""

    name = "top.Input"
    traits = (NotALayer(),)

    def memory_effects(self) -> Sequence[tuple[str, Value | None]]:
        return [("read", self.input)]

    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    mean = prop(F64ArrayAttr, optional=True)
    scale = prop(F64ArrayAttr, optional=True)
    pixel_format = prop(StrEnum("rgb", "bgr", "gray", "rgba", "gbrg", "grbg", "bggr", "rggb"), optional=True)
    channel_format = prop(StrEnum("nchw", "nhwc", "none"), optional=True)
    resize_dims = prop(I64ArrayAttr, optional=True)
    keep_aspect_ratio = prop(BoolProp, default=BoolAttr(False))
    keep_ratio_mode = prop(StrEnum("letterbox", "short_side_scale"), default=S("letterbox"))
    pad_value = prop(I64Attr, default=I(0))
    pad_type = prop(StrEnum("center", "normal"), default=S("center"))

    def verify_(self) -> None:
        if self.input.type is not self.output.type:
            raise VerifyError("result type must equal the input type")
        t = self.output.type
        for key in ("mean", "scale"):
            v = self.attr(key)
            if v is not None and isinstance(t, ShapedType) and t.has_rank and t.rank >= 2:
                fmt = self.channel_format or "nchw"
                c = t.shape[1] if fmt == "nchw" else t.shape[-1]
                if c > 0 and len(v) not in (1, c):
                    raise VerifyError(f"'{key}' has {len(v)} values but the input has {c} channels")
        rd = self.resize_dims
        if rd is not None and (len(rd) != 2 or min(rd) <= 0):
            raise VerifyError("'resize_dims' must be two positive integers (height, width)")

    result_like_input = True

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [inputs[0]]

    flops_per_element = 0  # data movement: no arithmetic


class WeightOp(TopOp):
    """A constant tensor. ``value`` is a ``dense_resource`` (the array held by reference, printed
    in the resource section or kept in an external weight file) or a small ``dense`` literal."""

    name = "top.Weight"
    traits = (Pure(), ConstantLike(), NotALayer())
    output = result_def(AnyTensor)
    value = prop(ElementsAttrC)

    def verify_(self) -> None:
        v = self.properties["value"]
        if v.type is not self.output.type:
            raise VerifyError(f"value type '{v.type}' does not match result type '{self.output.type}'")

    def infer_shapes(self) -> list[Type]:
        return [self.properties["value"].type]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [self.properties["value"].to_numpy()]

    def constant_value(self) -> Any:
        return self.properties["value"]

    flops_per_element = 0  # data movement: no arithmetic


class NoneOp(TopOp):
    """The absent optional operand (``none`` typed)."""

    name = "top.None"
    traits = (Pure(), NotALayer())
    output = result_def(NoneType)

    def infer_shapes(self) -> list[Type]:
        return [none]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [None]

    flops_per_element = 0  # data movement: no arithmetic


class YieldOp(TopOp):
    """Terminates the regions of ``top.If`` / ``top.Loop`` / ``top.Scan``: the region's results."""

    name = "top.Yield"
    traits = (Pure(), IsTerminator(), ReturnLike(), NotALayer())
    operands_ = var_operand()

    def infer_shapes(self) -> list[Type]:
        return []

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return []

    flops_per_element = 0  # data movement: no arithmetic


def weight_array(op: WeightOp) -> np.ndarray:
    return op.properties["value"].to_numpy()


def scalar_f64(v: float) -> Any:
    return F(v)


__all__ = ["InputOp", "NoneOp", "RankedTensorType", "WeightOp", "YieldOp", "weight_array"]

_ = F64Attr

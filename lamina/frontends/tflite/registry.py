"""What the TFLite importer and its converters share, below both: the converter table
(:data:`CONVERTERS`, :func:`register`), the exceptions a converter raises (:class:`Unsupported`,
:class:`Invalid`), the layout permutations and tensor types. It lives apart from the importer so that
:mod:`.converters` fills the table without importing the importer (no import cycle)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from lamina.ir.types import RankedTensorType, Type

if TYPE_CHECKING:
    from .importer import TfliteConverter
    from .reader import Operator, Tensor

#: NHWC → NCHW and back
TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)


class Unsupported(Exception):
    """Raised by a converter for an operator it cannot express (an option value, a dtype, ...)."""


class Invalid(Exception):
    """An operator whose tensors or options are wrong (shapes, missing constants, ...)."""


def element_type(dt: np.dtype) -> Type:
    from lamina.ir.attributes import dtype_to_element_type

    return dtype_to_element_type(dt)


def tensor_type(t: Tensor) -> RankedTensorType:
    """The type of a TFLite tensor as TFLite holds it, in TFLite's shape."""
    return RankedTensorType(list(t.shape), element_type(t.dtype))


def value_dtype(t: Tensor) -> np.dtype:
    """The dtype of a TFLite tensor's value in the ``top`` model: float32 for quantized integers
    (``top`` holds their real values), else the tensor's own."""
    from .quantization import is_quantized

    return np.dtype(np.float32) if is_quantized(t) else t.dtype


Converter = Callable[["TfliteConverter", "Operator"], Any]
#: TFLite op name (``"CONV_2D"``, or a custom op's code) → converter binding the op's outputs
CONVERTERS: dict[str, Converter] = {}


def register(*names: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for n in names:
            CONVERTERS[n] = fn
        return fn

    return deco

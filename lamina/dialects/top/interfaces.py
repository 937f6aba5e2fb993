"""Interfaces of the ``top`` dialect: shape inference and FLOP counting.

(Reference execution uses the core :class:`~lamina.ir.traits.ExecutableOpInterface`.)
"""

from __future__ import annotations

from collections.abc import Sequence

from lamina.ir.traits import Interface
from lamina.ir.types import Type


class InferShapeInterface(Interface):
    """Ops that compute their result types from their operands' types (and constant operands)."""

    __slots__ = ()

    def infer_shapes(self) -> Sequence[Type]:
        raise NotImplementedError


class FlopsInterface(Interface):
    """Ops that know how many floating-point operations one execution costs."""

    __slots__ = ()

    def flops(self) -> int:
        raise NotImplementedError

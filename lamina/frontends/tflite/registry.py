"""The TFLite converter table (:data:`CONVERTERS`, :func:`register`) and :class:`Unsupported`, apart
from the importer so that :mod:`.converters` fills the table without an import cycle."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .importer import TfliteConverter
    from .reader import Operator


class Unsupported(Exception):
    """Raised by a converter for an operator it cannot express (an option value, a dtype, ...)."""


Converter = Callable[["TfliteConverter", "Operator"], Any]
#: TFLite op name (``"CONV_2D"``, or a custom op's code) → converter binding the op's outputs
CONVERTERS: dict[str, Converter] = {}


def register(*names: str) -> Callable[[Converter], Converter]:
    def deco(fn: Converter) -> Converter:
        for n in names:
            CONVERTERS[n] = fn
        return fn

    return deco

"""The tensor names of ops, read from their locations.

A model's tensors are named by the locations of the ops producing them (``loc("conv1_out")``, or
a fused location holding one name per result): the front ends put the framework's tensor names
there, and the interpreter's dumps, calibration tables, quantization tables and per-layer
comparison key tensors by them. This module is the one place that reads those names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lamina.ir.location import FusedLoc, Location, NameLoc

if TYPE_CHECKING:
    from lamina.ir.core import Operation


def location_names(loc: Location | None) -> list[str]:
    """The tensor names a location gives, in result order: its own name, or the names in a fused
    location (none for other locations)."""
    if isinstance(loc, NameLoc):
        return [loc.name]
    if isinstance(loc, FusedLoc):
        return [sub.name for sub in loc.locations if isinstance(sub, NameLoc)]
    return []


def location_name(loc: Location | None) -> str | None:
    """The first tensor name of a location (see :func:`location_names`), or None."""
    if isinstance(loc, NameLoc):
        return loc.name
    if isinstance(loc, FusedLoc):
        for sub in loc.locations:
            if isinstance(sub, NameLoc):
                return sub.name
    return None


def result_names(op: Operation) -> list[str]:
    """A name for every result of ``op`` (from its location; suffixed ``_<i>`` where missing)."""
    names = location_names(op.location)
    n = len(op.results)
    if len(names) == n:
        return names
    base = names[0] if names else f"{op.name}_{id(op):x}"
    if n == 1:
        return [base]
    return [names[i] if i < len(names) else f"{base}_{i}" for i in range(n)]


__all__ = ["location_name", "location_names", "result_names"]

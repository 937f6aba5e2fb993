"""Target capabilities: which (op, mode, dtype) combinations a target runs natively, and at what
relative cost.

A target declares its capabilities as a :class:`TargetCapabilities` of :class:`Capability`
entries. ``convert-top-to-tpu`` consults it: an op whose mode is INT8 is lowered to its family's
integer form only where the target supports the op in INT8 (otherwise in F32 with casts around
it); an op in a float mode the target does not run natively falls back to F32. The mixed-precision
search (:mod:`lamina.quant.search`) takes its float modes from it. :data:`REFERENCE` is the
reference ``tpu`` target — the bit-exact interpreter — and supports exactly what the lowering
produced before targets existed.

Costs are hints, relative, per output element (lower is cheaper); the reference target's are the
ratio of bytes an element occupies (INT8 1, F16/BF16 2, F32 4), not measurements.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

#: every op (for :attr:`Capability.ops`)
ANY_OP = None


@dataclass(frozen=True)
class Capability:
    """One supported combination.

    * ``ops``: the ``top`` op names it covers (``None``: every op);
    * ``mode``: ``F32``, ``F16``, ``BF16`` or ``INT8``;
    * ``dtypes``: the element types the op's quantized / float operands are stored in
      (``("i8", "u8")`` for INT8, ``"i16"`` added where the target takes the ``lut16`` form's int16
      MatMul result and 65536-entry activation table; the mode's float type otherwise);
    * ``form``: how it runs — ``"native"`` (the family's own form) or ``"lut"`` (a 256-entry table,
      for elementwise activations);
    * ``cost``: relative cost per output element.
    """

    ops: frozenset[str] | None
    mode: str
    dtypes: tuple[str, ...]
    form: str = "native"
    cost: float = 1.0

    def covers(self, op_name: str, mode: str, dtype: str | None) -> bool:
        return (
            self.mode == mode
            and (self.ops is None or op_name in self.ops)
            and (dtype is None or dtype in self.dtypes)
        )


class TargetCapabilities:
    """What a target runs natively: a list of :class:`Capability` entries, the first that covers a
    query answering it."""

    def __init__(
        self,
        name: str,
        entries: Iterable[Capability],
        conv_channel_scales: bool = False,
        default_int_forms: Iterable[str] | None = None,
    ) -> None:
        self.name = name
        self.entries = tuple(entries)
        #: whether the target runs 4-d (convolutional) activations with per-channel scales along
        #: axis 1 (``docs/tpu.md`` "Per-channel activations"); without it those stay per-tensor
        self.conv_channel_scales = conv_channel_scales
        #: the optional integer forms ``--int_forms default`` means on this target (None: the
        #: lowering's :data:`~.lowering.state.DEFAULT_INT_FORMS`) — a target that runs a form
        #: correctly but slowly leaves it out of its defaults, and a user can still ask for it
        self.default_int_forms = None if default_int_forms is None else frozenset(default_int_forms)

    def replace(self, **changes: Any) -> TargetCapabilities:
        """A copy with the given constructor arguments changed."""
        args: dict[str, Any] = {
            "name": self.name,
            "entries": self.entries,
            "conv_channel_scales": self.conv_channel_scales,
            "default_int_forms": self.default_int_forms,
        }
        args.update(changes)
        return TargetCapabilities(**args)

    def with_conv_channel_scales(self, on: bool) -> TargetCapabilities:
        """The same entries with :attr:`conv_channel_scales` set to ``on``."""
        return self.replace(conv_channel_scales=on)

    def _find(self, op_name: str, mode: str, dtype: str | None = None) -> Capability | None:
        for c in self.entries:
            if c.covers(op_name, mode.upper(), dtype):
                return c
        return None

    def supports(self, op_name: str, mode: str, dtype: str | None = None) -> bool:
        """Whether the target runs ``op_name`` (a ``top`` op name) natively in ``mode`` (with
        operands of element type ``dtype``, any when None)."""
        return self._find(op_name, mode, dtype) is not None

    def form(self, op_name: str, mode: str) -> str | None:
        """How the target runs ``op_name`` in ``mode`` (``"native"``, ``"lut"``), None if it does not."""
        c = self._find(op_name, mode)
        return None if c is None else c.form

    def cost(self, op_name: str, mode: str, dtype: str | None = None) -> float | None:
        """The cost hint of ``op_name`` in ``mode`` (None where unsupported)."""
        c = self._find(op_name, mode, dtype)
        return None if c is None else c.cost

    def wide_input_cost(self, op_name: str) -> float:
        """The cost of ``op_name`` in INT8 with an int16 operand relative to int8 operands (its
        ``i16`` entry's cost over its ``i8`` entry's; 1 where either is missing): a target whose
        int16 products run at a lower rate (the CPU's ``vpdpwssd``: half the MACs of ``vpdpbusd``)
        lists ``i16`` in an entry of its own, before the others."""
        c16, c8 = self.cost(op_name, "INT8", "i16"), self.cost(op_name, "INT8", "i8")
        return 1.0 if c16 is None or c8 is None or c8 <= 0 else c16 / c8

    def ops(self, mode: str, form: str | None = None) -> frozenset[str]:
        """The op names listed for ``mode`` (and ``form``); entries for every op are not listed."""
        out: set[str] = set()
        for c in self.entries:
            if c.mode == mode.upper() and c.ops is not None and (form is None or c.form == form):
                out |= c.ops
        return frozenset(out)

    @property
    def float_modes(self) -> tuple[str, ...]:
        """The float modes in which the target runs every op, in declaration order."""
        return tuple(dict.fromkeys(c.mode for c in self.entries if c.ops is None and c.mode != "INT8"))

    @property
    def fallback_mode(self) -> str:
        """The float mode of an op the target cannot run as asked (no INT8 form, or not in the
        requested float mode): F32 where the target runs every op in F32 (or lists no float mode),
        else its first float mode (an INT8/BF16 chip: BF16)."""
        modes = self.float_modes
        return "F32" if "F32" in modes or not modes else modes[0]

    def __repr__(self) -> str:
        return f"TargetCapabilities({self.name!r}, {len(self.entries)} entries)"


def without_dtype(caps: TargetCapabilities, dtype: str) -> TargetCapabilities:
    """``caps`` with ``dtype`` removed from every entry (an entry left with none dropped): a
    target that does not take the forms needing it (``i16``: the int16 forms)."""
    entries = []
    for c in caps.entries:
        kept = tuple(d for d in c.dtypes if d != dtype)
        if kept:
            entries.append(Capability(c.ops, c.mode, kept, c.form, c.cost))
    return caps.replace(entries=entries)


def _reference() -> TargetCapabilities:
    from .families.activation import LutLowering
    from .ops import FAMILY_LOWERINGS

    native = frozenset(r.name for fam in FAMILY_LOWERINGS if fam is not LutLowering for r in fam.roots)
    int8 = ("i8", "u8", "i16")
    return TargetCapabilities(
        "tpu",
        [
            Capability(native, "INT8", int8, "native", 1.0),
            Capability(frozenset(r.name for r in LutLowering.roots), "INT8", int8, "lut", 1.0),
            Capability(ANY_OP, "F32", ("f32",), "native", 4.0),
            Capability(ANY_OP, "F16", ("f16",), "native", 2.0),
            Capability(ANY_OP, "BF16", ("bf16",), "native", 2.0),
        ],
        conv_channel_scales=True,
    )


#: The reference ``tpu`` target: every integer form the dialect's families have — INT8 for Conv, MatMul, Add, Sub, Mul, MaxPool, AvgPool, Reduce,
#: Concat and the data-movement ops (integer forms; each family may still decline an op whose
#: attributes its form does not cover, e.g. AvgPool with ``ceil_mode``), INT8 by LUT for the
#: elementwise activations, and every op in F32, F16 and BF16; 4-d activations may carry
#: per-channel scales (:attr:`TargetCapabilities.conv_channel_scales`).
REFERENCE = _reference()

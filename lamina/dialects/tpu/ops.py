"""The ``tpu`` ops. Quantization is explicit in the types; each op's ``execute`` is the bit-exact
reference (see ``docs/tpu.md`` and :mod:`.quantize`).

Every ``top`` op (but the model plumbing: Input, Weight, None, Yield) has a ``tpu`` counterpart of
the same name (``top.Softmax`` → ``tpu.Softmax``): a class of its own (:class:`TpuOp`, not a
``top`` class) sharing the ``top`` op's definition — operands, results, properties, verifier,
shape rule (:func:`~.families.common.declare`) — whose execution is the *float mode*:
float16/bfloat16 operands are widened to float32, the ``top`` reference computes in float32, and
float results are rounded to their element type (f16/bf16 round to nearest even).

The ops with an INT8 form execute in integer arithmetic when their operands are quantized
(``!quant.uniform`` element types); they live by family in :mod:`.families`, each with its lowering
pattern: Conv, MatMul (:mod:`~.families.conv`), Add, Sub, Mul (:mod:`~.families.binary`), MaxPool,
AvgPool (:mod:`~.families.pool`), Reduce mean/max/min (:mod:`~.families.reduce`), Concat and the
data-movement ops (Reshape, Flatten, Squeeze, Unsqueeze, Permute, Slice, Split, Interp nearest,
Tile, Expand, DepthToSpace, SpaceToDepth; :mod:`~.families.movement`). Plus the dialect's own ops:
``tpu.Cast`` (quantize / dequantize / float rounding), ``tpu.Requant`` (integer rescale between
two quantized types), ``tpu.Lut`` (256-entry table, the INT8 form of the activations) and
``tpu.Weight`` (a constant of a quantized type whose value holds the storage integers). Which of
these forms a target runs natively is its :mod:`.capabilities`.
"""

from __future__ import annotations

from lamina.dialects.top import ALL_OPS, TopOp
from lamina.dialects.top import elementwise as top_ew
from lamina.ir.traits import NotALayer

from .families.activation import Lut16Op, LutLowering, LutOp, lut_table_attr
from .families.attention import AttentionLowering, AttentionOp
from .families.binary import AddOp, ArithmeticLowering, MulOp, SubOp
from .families.common import ModeOp, TpuOp, is_quant
from .families.conv import ConvMatMulLowering, ConvOp, MatMulOp
from .families.float_mode import FloatLowering, declare_float
from .families.movement import MOVE_OPS, MOVE_TPU_OPS, ConcatOp, MoveLowering
from .families.normalize import LayerNormOp, NormLowering, SoftmaxOp
from .families.plumbing import CastOp, PlumbingOp, QuantCast, RequantOp, WeightOp, make_requant, storage_of
from .families.pool import AvgPoolOp, MaxPoolOp, PoolLowering
from .families.reduce import ReduceLowering, ReduceOp
from .lowering.pattern import FamilyLowering

_FAMILY_OPS: dict[str, type[ModeOp]] = {
    c.top_class.name: c  # type: ignore[union-attr]
    for c in (
        ConvOp,
        MatMulOp,
        AddOp,
        SubOp,
        MulOp,
        MaxPoolOp,
        AvgPoolOp,
        ReduceOp,
        ConcatOp,
        SoftmaxOp,
        LayerNormOp,
        AttentionOp,
    )
}
_FAMILY_OPS.update(MOVE_TPU_OPS)

#: top op name → its tpu op class
DERIVED: dict[str, type[TpuOp]] = {}
for _cls in ALL_OPS:
    if _cls.has_trait(NotALayer):
        continue
    DERIVED[_cls.name] = _FAMILY_OPS.get(_cls.name) or declare_float(_cls)

# top.Cast lowers to the own tpu.Cast (which carries its semantics), not to a declared class.
DERIVED[top_ew.CastOp.name] = CastOp

OWN_OPS: list[type[TpuOp]] = [CastOp, RequantOp, LutOp, Lut16Op, WeightOp]
ALL_TPU_OPS: list[type[TpuOp]] = [*OWN_OPS, *(c for c in DERIVED.values() if c not in OWN_OPS)]

#: the lowering patterns, one per op family (the float one takes every op no family claims)
FAMILY_LOWERINGS = (
    ConvMatMulLowering,
    ArithmeticLowering,
    PoolLowering,
    ReduceLowering,
    MoveLowering,
    NormLowering,
    AttentionLowering,
    LutLowering,
)


def tpu_class(top_name: str) -> type[TpuOp] | None:
    """The tpu op class for a top op name."""
    return DERIVED.get(top_name)


def lowering_roots() -> list[tuple[type[FamilyLowering], type[TopOp], type[TpuOp]]]:
    """``(pattern class, top op class, tpu op class)`` for every top op with a tpu counterpart:
    its family's pattern, else :class:`FloatLowering`."""
    claimed: dict[str, type[FamilyLowering]] = {}
    for fam in FAMILY_LOWERINGS:
        for root in fam.roots:
            claimed.setdefault(root.name, fam)
    out: list[tuple[type[FamilyLowering], type[TopOp], type[TpuOp]]] = []
    for c in ALL_OPS:
        t = DERIVED.get(c.name)
        if t is not None:
            out.append((claimed.get(c.name, FloatLowering), c, t))
    return out


__all__ = [
    "ALL_TPU_OPS",
    "DERIVED",
    "FAMILY_LOWERINGS",
    "MOVE_OPS",
    "OWN_OPS",
    "AddOp",
    "AvgPoolOp",
    "CastOp",
    "ConcatOp",
    "ConvOp",
    "LutOp",
    "Lut16Op",
    "MatMulOp",
    "MaxPoolOp",
    "ModeOp",
    "MulOp",
    "PlumbingOp",
    "QuantCast",
    "ReduceOp",
    "RequantOp",
    "SubOp",
    "TpuOp",
    "WeightOp",
    "is_quant",
    "lowering_roots",
    "lut_table_attr",
    "make_requant",
    "storage_of",
    "tpu_class",
]

"""Canonicalization patterns of the ``top`` dialect (TPU-MLIR's Top canonicalizers), by family.

Importing this package registers, for every ``top`` op class, the patterns rooted at it
(:func:`~lamina.ir.core.register_canonicalization`: what the class's ``get_canonicalization_patterns``
returns), so the generic ``canonicalize`` pass runs them;
``top-canonicalize`` runs the same set with constant folding. The registry is derived from the
patterns themselves: each declares its root op class (``root``, or ``roots`` for one pattern
rooted at several ops), and :data:`FAMILIES` lists the family modules.

Families (the label of each pattern is its class name, usable in ``canonicalize{disable-patterns=...}``):

* constant folding: :class:`~..const_fold.ConstantFoldPattern` on every foldable op;
* :mod:`.conv`: BatchNorm into Conv (:class:`FuseBatchNormIntoConv`);
* :mod:`.activation`: Relu and Clip(0, n) / ReLU6 into Conv and MatMul as ``do_relu`` /
  ``relu_limit`` (:class:`FuseReluIntoProducer`, :class:`FuseClipIntoProducer`), a Relu of a relu'd
  value dropped;
* :mod:`.matmul`: Gemm to MatMul (:class:`GemmToMatMul`, so that Relu fuses into it), a constant
  bias Add into the MatMul (:class:`FuseBiasIntoMatMul`);
* :mod:`.shape`: identities (Identity, inference Dropout, Reshape/Squeeze/Unsqueeze/Flatten/Expand
  to the same type, identity Permute, Cast to the same type) and merges (consecutive reshapes,
  consecutive Permutes composed, a Reshape whose computed shape is static takes it as a constant);
* recognition of decomposed subgraphs: :mod:`.gelu` (GELU in erf and tanh forms, SiLU),
  :mod:`.norm` (LayerNorm), :mod:`.attention` (scaled-dot-product attention).

Fused ops take the location of the last op of the matched subgraph, whose tensor they produce, so
per-layer comparison by tensor name keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import ModuleType

from lamina.ir.core import Operation, register_canonicalization
from lamina.rewrite.pattern import RewritePattern, root_name

from ..const_fold import ConstantFoldPattern, foldable
from . import activation, attention, conv, gelu, matmul, norm, shape
from .activation import FuseClipIntoProducer, FuseReluIntoProducer
from .attention import FuseAttention
from .common import TopPattern, erase_dead, pattern_roots
from .conv import FuseBatchNormIntoConv
from .gelu import FuseGELU, FuseSiLU
from .matmul import FuseBiasIntoMatMul, GemmToMatMul
from .norm import FuseLayerNorm
from .shape import (
    MergePermutes,
    MergeReshapes,
    RemoveIdentityLike,
    RemoveInferenceDropout,
    ReshapeConstantShape,
)

#: The pattern families, each a module with a ``PATTERNS`` tuple. Where several patterns share a
#: root and a benefit, the driver tries them in this order (then in each family's order).
FAMILIES: tuple[ModuleType, ...] = (conv, activation, matmul, shape, gelu, norm, attention)

_REGISTRY: dict[str, list[Callable[[], RewritePattern]]] | None = None


def _factory(cls: type[TopPattern], root: type[Operation]) -> Callable[[], RewritePattern]:
    if cls.roots:
        return lambda: cls(root)
    return cls


def registry() -> dict[str, list[Callable[[], RewritePattern]]]:
    """Root op name -> factories of the patterns rooted there (built once, from the patterns'
    declared roots)."""
    global _REGISTRY
    if _REGISTRY is None:
        reg: dict[str, list[Callable[[], RewritePattern]]] = {}
        for family in FAMILIES:
            for cls in family.PATTERNS:
                for root in pattern_roots(cls):
                    reg.setdefault(root_name(root) or "", []).append(_factory(cls, root))
        _REGISTRY = reg
    return _REGISTRY


def canonicalization_patterns(op_class: type[Operation], *, fold: bool = True) -> list[RewritePattern]:
    """Fresh instances of the patterns rooted at ``op_class`` (constant folding included when
    ``fold`` and the op is :func:`~..const_fold.foldable`)."""
    name = op_class.name
    out: list[RewritePattern] = [f() for f in registry().get(name, ())]
    if fold and foldable(op_class):
        out.append(ConstantFoldPattern(name))
    return out


def all_patterns(op_classes: Iterable[type[Operation]], *, fold: bool = True) -> list[RewritePattern]:
    """The patterns rooted at each of ``op_classes``, in that order."""
    out: list[RewritePattern] = []
    for c in op_classes:
        out.extend(canonicalization_patterns(c, fold=fold))
    return out


def _register_all() -> None:
    from functools import partial

    from lamina.dialects.top import ALL_OPS

    for op_class in ALL_OPS:
        register_canonicalization(op_class, *registry().get(op_class.name, ()))
        if foldable(op_class):
            register_canonicalization(op_class, partial(ConstantFoldPattern, op_class.name))


_register_all()

__all__ = [
    "FAMILIES",
    "FuseAttention",
    "FuseBatchNormIntoConv",
    "FuseBiasIntoMatMul",
    "FuseClipIntoProducer",
    "FuseGELU",
    "FuseLayerNorm",
    "FuseReluIntoProducer",
    "FuseSiLU",
    "GemmToMatMul",
    "MergePermutes",
    "MergeReshapes",
    "RemoveIdentityLike",
    "RemoveInferenceDropout",
    "ReshapeConstantShape",
    "TopPattern",
    "all_patterns",
    "canonicalization_patterns",
    "erase_dead",
    "registry",
]

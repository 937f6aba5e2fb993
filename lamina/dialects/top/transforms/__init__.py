"""Passes and patterns of the ``top`` dialect.

* ``top-shape-infer`` (:mod:`.shape_infer`): re-infer result types, update function signatures, verify.
* ``top-const-fold`` (:mod:`.const_fold`): evaluate all-constant subgraphs into ``top.Weight``.
* ``top-canonicalize`` (:mod:`.canonicalize`): the canonicalization patterns of :mod:`.patterns`
  (also what the generic ``canonicalize`` runs on ``top`` ops) with constant folding.

Unused ``top`` ops and weights are erased by the generic ``dce`` (``top.Input`` reads the model's
input, an effect, so it stays). Importing this package registers the passes (the ``top`` dialect registers it with the pass registry).
"""

from .canonicalize import TopCanonicalize, canonicalize_top
from .const_fold import ConstantFoldPattern, TopConstFold, const_fold
from .patterns import all_patterns, canonicalization_patterns
from .shape_infer import TopShapeInfer, infer_shapes

__all__ = [
    "ConstantFoldPattern",
    "TopCanonicalize",
    "TopConstFold",
    "TopShapeInfer",
    "all_patterns",
    "canonicalization_patterns",
    "canonicalize_top",
    "const_fold",
    "infer_shapes",
]

"""Shared machinery of the ``top`` dialect: the :class:`TopOp` base class, attribute constraints
and constructors, and type helpers.

Every ``top`` op is one :class:`TopOp` subclass holding, in one place, its declaration (operands,
results, properties with constraints and defaults), ``verify_``, ``infer_shapes``, ``execute``
(numpy reference semantics) and ``flops``.

Conventions:

* ONNX inputs are operands. Absent optional inputs are the result of a ``top.None`` op (type
  ``none``), as TPU-MLIR does, so every declared operand is always present.
* Absent optional results have type ``none`` and execute to ``None``.
* ONNX attributes are properties of the same name: ints are ``i64`` integers, floats ``f64``
  floats, int/float lists ``array<i64: ...>`` / ``array<f64: ...>``, strings string attributes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from lamina.ir.attributes import (  # noqa: F401 - BoolAttr re-exported for the op modules
    ArrayAttr,
    Attribute,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DenseResourceElementsAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    TypeAttr,
    dtype_to_element_type,
    element_type_to_dtype,
)
from lamina.ir.constants import constant_array
from lamina.ir.constraints import (  # noqa: F401 - re-exported for the op modules
    BoolProp,
    ElementsAttrC,
    F64ArrayAttr,
    F64Attr,
    I64ArrayAttr,
    I64Attr,
    IsInstance,
    StrArrayAttr,
    StrAttr,
    StrEnum,
    TypeAttrC,
)
from lamina.ir.core import OpTraits, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import Op
from lamina.ir.traits import ExecutableOpInterface, NotALayer, Pure
from lamina.ir.types import (
    DYNAMIC,
    FloatType,
    NoneType,
    RankedTensorType,
    ShapedType,
    Type,
    UnrankedTensorType,
    f32,
    f64,
    i1,
    i64,
)

from .interfaces import FlopsInterface, InferShapeInterface

# ---- constraints --------------------------------------------------------------------------

AnyTensor = IsInstance(RankedTensorType, UnrankedTensorType, description="tensor of any type values")
AnyTensorOrNone = IsInstance(
    RankedTensorType, UnrankedTensorType, NoneType, description="tensor of any type values or none type"
)
# The attribute kinds (I64Attr, F64Attr, BoolProp, StrAttr, StrEnum, I64ArrayAttr, F64ArrayAttr,
# StrArrayAttr, TypeAttrC, ElementsAttrC) live in lamina.ir.constraints, imported above: each says
# how its property reads in Python (``op.group`` is an int, ``op.do_relu`` a bool).


# ---- attribute constructors ------------------------------------------------------------------


def I(v: int) -> IntegerAttr:  # noqa: E743, N802
    return IntegerAttr(int(v), i64)


def F(v: float) -> FloatAttr:  # noqa: N802
    return FloatAttr(float(v), f64)


def S(v: str) -> StringAttr:  # noqa: N802
    return StringAttr(v)


def Ints(v: Sequence[int]) -> DenseArrayAttr:  # noqa: N802
    return DenseArrayAttr(i64, [int(x) for x in v])


def Floats(v: Sequence[float]) -> DenseArrayAttr:  # noqa: N802
    return DenseArrayAttr(f64, [float(x) for x in v])


def to_python(a: Attribute | None) -> Any:
    """The Python value of a property (int, float, str, tuple, ndarray, Type or None)."""
    if a is None:
        return None
    if isinstance(a, IntegerAttr):
        return bool(a.value) if a.type is i1 else a.value
    if isinstance(a, FloatAttr):
        return a.value
    if isinstance(a, StringAttr):
        return a.value
    if isinstance(a, DenseArrayAttr):
        return a.values
    if isinstance(a, ArrayAttr):
        return tuple(to_python(x) for x in a)
    if isinstance(a, TypeAttr):
        return a.value
    if isinstance(a, (DenseResourceElementsAttr, DenseElementsAttr)):
        return a.to_numpy()
    return a


# ---- type helpers ----------------------------------------------------------------------------


def tensor_of(shape: Sequence[int] | None, elem: Type) -> Type:
    return UnrankedTensorType(elem) if shape is None else RankedTensorType(shape, elem)


def type_of_array(a: np.ndarray) -> RankedTensorType:
    return RankedTensorType(a.shape, dtype_to_element_type(a.dtype))


def shape_of(v: Value | Type) -> tuple[int, ...] | None:
    t = v if isinstance(v, Type) else v.type
    if isinstance(t, ShapedType) and t.has_rank:
        return t.shape
    return None


def elem_of(v: Value | Type) -> Type:
    t = v if isinstance(v, Type) else v.type
    return t.element_type if isinstance(t, ShapedType) else t


def is_none(v: Value) -> bool:
    return isinstance(v.type, NoneType)


#: Import-time folding of small constant computations (Shape -> Gather -> Add -> Div -> Slice chains).
_FOLD_MAX_ELEMENTS = 4096
_FOLD_MAX_DEPTH = 48


def const_value(v: Value, _depth: int = 0) -> np.ndarray | None:
    """The value of ``v`` if it is known at compile time: a constant (:func:`constant_array`), the
    ``top.Shape`` of a statically shaped value, or a small computation on such values, else None."""
    op = v.defining_op()
    if op is None:
        return None
    c = constant_array(v)
    if c is not None:
        return c
    if op.name == "top.Shape":  # the shape of a statically shaped value is a constant
        s = shape_of(op.operands[0])
        if s is not None and DYNAMIC not in s:
            return op.execute([np.empty(s, dtype=np.bool_)])[0]
        return None
    if (
        _depth >= _FOLD_MAX_DEPTH
        or not isinstance(op, TopOp)
        or not op.operands  # no inputs: None, or a random source
        or op.regions
        or NotALayer in op.traits  # model plumbing: an input's value is not known here
    ):
        return None
    ins: list[Any] = []
    for o in op.operands:
        if isinstance(o.type, NoneType):
            ins.append(None)
            continue
        c = const_value(o, _depth + 1)
        if c is None or c.size > _FOLD_MAX_ELEMENTS:
            return None
        ins.append(c)
    try:
        with np.errstate(all="ignore"):
            outs = op.execute(ins)
    except Exception:
        return None
    out = outs[getattr(v, "index", 0)]
    if out is None:
        return None
    out = np.asarray(out)
    return out if out.size <= _FOLD_MAX_ELEMENTS else None


def known_values(*vs: Value) -> list[np.ndarray | None] | None:
    """The compile-time values of ``vs`` (None for ``none`` operands), or None if one is unknown."""
    out: list[np.ndarray | None] = []
    for v in vs:
        if isinstance(v.type, NoneType):
            out.append(None)
            continue
        c = const_value(v)
        if c is None:
            return None
        out.append(c)
    return out


def broadcast_shapes(*shapes: tuple[int, ...] | None) -> tuple[int, ...] | None:
    """Multidirectional (numpy) broadcasting with dynamic dims; None if any rank is unknown."""
    if any(s is None for s in shapes):
        return None
    rank = max((len(s) for s in shapes), default=0)  # type: ignore[arg-type]
    out = []
    for i in range(rank):
        d = 1
        for s in shapes:
            j = i - (rank - len(s))  # type: ignore[arg-type]
            if j < 0:
                continue
            x = s[j]  # type: ignore[index]
            if x == 1:
                continue
            if x == DYNAMIC:
                d = DYNAMIC if d == 1 else d
            elif d in (1, DYNAMIC):
                d = x
            elif d != x:
                raise VerifyError(
                    f"operand shapes {' and '.join(str(list(s)) for s in shapes)} are not broadcastable"
                )  # type: ignore[arg-type]
        out.append(d)
    return tuple(out)


def num_elements(t: Type) -> int:
    if isinstance(t, ShapedType) and t.has_static_shape:
        return math.prod(t.shape)
    return 0


def check_axis(op: Any, operand: Value | Type, name: str = "axis") -> None:
    """Raise VerifyError if ``op``'s ``name`` attribute is outside ``[-rank, rank)`` of ``operand``
    (nothing to check while its rank is unknown)."""
    shape = shape_of(operand)
    axis = op.attr(name)
    if shape is None or axis is None:
        return
    r = len(shape)
    if not -r <= axis < max(r, 1):
        raise VerifyError(
            f"{name} {axis} is out of range for an input of rank {r} (expected {-r} to {r - 1})"
        )


def norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


class TopOp(Op, ExecutableOpInterface, InferShapeInterface, FlopsInterface):
    """Base of ``top`` ops: pure, executable, shape-inferable, FLOP-countable."""

    traits: ClassVar[OpTraits] = (Pure(),)
    #: Result shapes depend on operand *values* that are not constants (NonZero, Range, ...).
    data_dependent: ClassVar[bool] = False
    #: FLOPs per output element (used by the default :meth:`flops`).
    flops_per_element: ClassVar[int] = 1
    #: Operands whose *values* (not just shapes) determine the result shapes: the op's
    #: :meth:`infer_shapes` gives ranked types only when they are compile-time constants.
    shape_operands: ClassVar[tuple[str, ...]] = ()
    #: The single result has exactly the type of the ``input`` operand (normalizations, activations).
    result_like_input: ClassVar[bool] = False
    #: The results are a function of the operands and properties, so constant folding may evaluate
    #: the op (False for a random op, as training-mode Dropout).
    deterministic: ClassVar[bool] = True

    # ---- properties as Python values -------------------------------------------------------

    def attr(self, name: str) -> Any:
        """A property as a Python value, or its declared default."""
        a = self.properties.get(name)
        if a is None:
            pd = getattr(type(self), name, None)
            a = getattr(pd, "default", None)
        return to_python(a)

    # ---- execution -------------------------------------------------------------------------

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        raise NotImplementedError(f"'{self.name}' has no reference execution")

    def executor(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        """A callable equivalent to :meth:`execute`, made once per op by the interpreter's plan.

        Hot ops override this to read their properties once and keep per-shape geometry and
        scratch buffers in the closure; their :meth:`execute` is then ``self.executor()(inputs)``."""
        return self.execute

    def inplace_executor(self, operand_index: int) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
        """A callable computing the result *into* ``inputs[operand_index]`` (same shape and dtype as
        the result), or None if the op cannot. The interpreter uses it only when that input is a
        freshly computed array nobody else sees (its only use is this op, it is not dumped)."""
        return None

    #: ``execute`` always returns newly allocated arrays (never an input, a view of one, or a
    #: weight), so the interpreter may let a single consumer overwrite them in place.
    fresh_results: ClassVar[bool] = False

    # ---- shape inference -------------------------------------------------------------------

    def unranked_results(self) -> list[Type]:
        """Unranked types of the results' element types (``none`` results stay ``none``)."""
        return [
            r.type if isinstance(r.type, NoneType) else UnrankedTensorType(elem_of(r)) for r in self.results
        ]

    def infer_shapes(self) -> list[Type]:
        """Default: the type of ``input`` for ops declaring ``result_like_input``; otherwise unranked
        results (data-dependent ops, ops with regions: their shapes are known at run time). Every
        other op overrides this with a closed-form rule: shape inference never executes an op, so it
        costs nothing and stays exact on tensors of any size."""
        if self.result_like_input:
            return [self.input.type]  # type: ignore[attr-defined]
        return self.unranked_results()

    # ---- cost ------------------------------------------------------------------------------

    def flops(self) -> int:
        if not self.flops_per_element:
            return 0
        return self.flops_per_element * sum(num_elements(r.type) for r in self.results)


def result_dtype(op: TopOp, i: int = 0) -> np.dtype:
    """The numpy dtype of result ``i`` (f32 when unknown)."""
    e = elem_of(op.results[i])
    try:
        return element_type_to_dtype(e)
    except ValueError:
        return np.dtype(np.float32)


def is_float_type(t: Type) -> bool:
    return isinstance(elem_of(t), FloatType)


__all__ = [
    "DYNAMIC",
    "AnyTensor",
    "AnyTensorOrNone",
    "F",
    "F64ArrayAttr",
    "F64Attr",
    "Floats",
    "I",
    "I64ArrayAttr",
    "I64Attr",
    "Ints",
    "S",
    "StrAttr",
    "StrEnum",
    "TopOp",
    "broadcast_shapes",
    "const_value",
    "elem_of",
    "f32",
    "is_none",
    "shape_of",
    "tensor_of",
    "to_python",
    "type_of_array",
]

"""What every ``tpu`` op shares: the :class:`TpuOp` base, the common definition through which a
``tpu`` op takes its declaration from a ``top`` op (:func:`declare`), float-mode execution
(:class:`ModeOp`) and the small integer helpers of the families' INT8 forms.

A ``tpu`` op is a class of its own: ``isinstance(tpu_op, top.ConvOp)`` is False. What it shares
with its ``top`` op — operands, results, properties (fresh field descriptors of the same
constraints and defaults), verifier, shape rule, assembly format, reference semantics — is
copied from the ``top`` class's definition when the ``tpu`` class is made, not inherited, so a
change to a ``top`` op's declaration shows in its ``tpu`` op and nothing else ties the two classes.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from lamina.dialects.quant import UniformQuantizedPerAxisType, UniformQuantizedType
from lamina.dialects.top.base import I64ArrayAttr, TopOp, elem_of
from lamina.dialects.top.interfaces import FlopsInterface, InferShapeInterface
from lamina.ir.opdef import Op, OperandDef, PropDef, RegionDef, ResultDef, SuccessorDef, prop
from lamina.ir.traits import ExecutableOpInterface, Pure
from lamina.ir.types import Type

from ..quantize import qparams, round_float, round_half_away, storage_dtype, wrap_int32, zero_point_of


def is_quant(t: Type) -> bool:
    """Whether ``t`` (or its element type) is a uniform quantized type (calibrated types are not)."""
    return isinstance(elem_of(t), (UniformQuantizedType, UniformQuantizedPerAxisType))


def widen(x: Any) -> Any:
    """f16/bf16 arrays → float32 (exact); anything else unchanged."""
    if isinstance(x, np.ndarray) and x.dtype.kind == "f" and x.dtype.itemsize == 2:
        return x.astype(np.float32)
    if isinstance(x, np.ndarray) and x.dtype.kind == "V":  # bfloat16 is a void-kind dtype
        return x.astype(np.float32)
    if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":
        return x.astype(np.float32)
    return x


class TpuOp(Op, ExecutableOpInterface, InferShapeInterface, FlopsInterface):
    """Base of every ``tpu`` op: pure, executable, shape-inferable, FLOP-countable. The generic
    tensor-op machinery (properties as Python values, the default shape rule and FLOP count) is the
    ``top`` dialect's, shared by reference rather than by subclassing :class:`TopOp`."""

    traits = (Pure(),)
    data_dependent: ClassVar[bool] = False
    flops_per_element: ClassVar[int] = 1
    shape_operands: ClassVar[tuple[str, ...]] = ()
    result_like_input: ClassVar[bool] = False
    fresh_results: ClassVar[bool] = False

    attr = TopOp.attr
    execute = TopOp.execute
    executor = TopOp.executor
    inplace_executor = TopOp.inplace_executor
    infer_shapes = TopOp.infer_shapes
    flops = TopOp.flops

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        """None: ``tpu-canonicalize`` runs the tpu patterns (the generic ``canonicalize`` folds
        nothing in the ``tpu`` dialect, as before)."""
        return ()


class ModeOp(TpuOp):
    """A ``tpu`` op declared from a ``top`` op (:func:`declare`): float-mode execution (widen to
    f32, run the ``top`` reference, round to the result types) unless the op's
    :meth:`int_executor` applies (some operand is quantized)."""

    #: the ``top`` class whose definition this op shares
    top_class: ClassVar[type[TopOp] | None] = None
    fresh_results = False

    def _top_fn(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        tc = self.top_class
        assert tc is not None
        if tc.executor is TopOp.executor:
            return lambda ins: tc.execute(self, ins)  # type: ignore[arg-type]
        return tc.executor(self)  # type: ignore[arg-type]

    def int_executor(self) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
        return None

    def executor(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        if any(is_quant(v.type) for v in self.operands):
            fn = self.int_executor()
            if fn is None:
                raise NotImplementedError(f"'{self.name}' has no integer execution")
            return fn
        base = self._top_fn()
        rtypes = [r.type for r in self.results]

        def run(ins: Sequence[Any]) -> list[Any]:
            outs = base([widen(x) for x in ins])
            return [
                o if o is None or not isinstance(o, np.ndarray) else round_float(o, t)
                for o, t in zip(outs, rtypes)
            ]

        return run

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        # Never through self.executor(): the top executors call self.execute as their fallback.
        if any(is_quant(v.type) for v in self.operands):
            return list(self.executor()(inputs))
        tc = self.top_class
        assert tc is not None
        outs = tc.execute(self, [widen(x) for x in inputs])  # type: ignore[arg-type]
        return [
            o if o is None or not isinstance(o, np.ndarray) else round_float(o, r.type)
            for o, r in zip(outs, self.results)
        ]

    def inplace_executor(self, operand_index: int) -> Callable[[Sequence[Any]], Sequence[Any]] | None:
        return None

    def execute_regions(self, inputs: Sequence[Any], runners: Any) -> list[Any]:
        tc = self.top_class
        return tc.execute_regions(self, inputs, runners)  # type: ignore[union-attr]


# ---- the common definition -----------------------------------------------------------------------

#: class-dict entries that are per class (made by ``Op.__init_subclass__``) or Python's own
_PER_CLASS = frozenset({"op_def", "traits", "trait_list", "has_custom_assembly", "name"})


def _fresh_field(v: Any) -> Any:
    """A new descriptor of the same declaration (each op class owns its descriptors)."""
    if isinstance(v, OperandDef):
        return OperandDef(v.kind, v.constraint)
    if isinstance(v, ResultDef):
        return ResultDef(v.kind, v.constraint)
    if isinstance(v, PropDef):
        return PropDef(v.constraint, v.default, v.optional, v.name)
    if isinstance(v, RegionDef):
        return RegionDef(v.variadic, v.single_block)
    if isinstance(v, SuccessorDef):
        return SuccessorDef(v.variadic)
    return v


def _rebound(fn: Any, cells: list[Any]) -> Any:
    """``fn`` with its ``__class__`` cell (zero-argument ``super()``) replaced by a fresh cell that
    will hold the new class."""
    code = getattr(fn, "__code__", None)
    if code is None or "__class__" not in code.co_freevars:
        return fn
    closure = list(fn.__closure__ or ())
    cell = types.CellType()
    closure[code.co_freevars.index("__class__")] = cell
    cells.append(cell)
    new = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, tuple(closure))
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__dict__.update(fn.__dict__)
    new.__doc__, new.__qualname__ = fn.__doc__, fn.__qualname__
    return new


def _shared(v: Any, cells: list[Any]) -> Any:
    if isinstance(v, classmethod):
        return classmethod(_rebound(v.__func__, cells))
    if isinstance(v, staticmethod):
        return v
    if isinstance(v, types.FunctionType):
        return _rebound(v, cells)
    return _fresh_field(v)


def declaration(top_cls: type[TopOp], base: type = ModeOp) -> tuple[dict[str, Any], list[Any]]:
    """The definition of ``top_cls`` (its own class dict and those of its bases up to
    :class:`TopOp`) as a namespace for a new class on ``base``: what ``base`` defines itself wins,
    as the ``tpu`` op's own behaviour (float mode, integer form) must. Also returns the cells to
    point at the new class."""
    mro = top_cls.__mro__
    chain = mro[: mro.index(TopOp)]
    # traits are per class (a tpu op's are Pure only), not copied
    own = {"get_canonicalization_patterns"} | (set(vars(ModeOp)) if issubclass(base, ModeOp) else set())
    cells: list[Any] = []
    ns: dict[str, Any] = {}
    for klass in reversed(chain):
        for k, v in vars(klass).items():
            if (k.startswith("__") and k.endswith("__")) or k in _PER_CLASS or k in own:
                continue
            ns[k] = _shared(v, cells)
    return ns, cells


def declare(top_cls: type[TopOp], body: dict[str, Any] | None = None, module: str = __name__) -> type[ModeOp]:
    """The ``tpu`` op of ``top_cls``: a :class:`ModeOp` named ``tpu.<Name>`` holding the ``top``
    op's definition (:func:`declaration`) plus ``body`` (the integer form, extra properties)."""
    short = top_cls.name.split(".", 1)[1]
    ns, cells = declaration(top_cls)
    ns.update(
        {
            "name": "tpu." + short,
            "top_class": top_cls,
            "__doc__": f"``{top_cls.name}`` in the tpu dialect (float mode: compute in f32, round results).",
            "__module__": module,
            "__qualname__": top_cls.__name__,
        }
    )
    if getattr(top_cls, "execute_regions", None) is None:
        ns["execute_regions"] = None
    ns.update(body or {})
    cls = type(top_cls.__name__, (ModeOp,), ns)
    for cell in cells:
        cell.cell_contents = cls
    return cls  # type: ignore[return-value]


# ---- shared integer helpers ---------------------------------------------------------------------


def quant_props() -> dict[str, Any]:
    """Fresh ``multiplier`` / ``rshift`` declarations for a family's class body."""
    return {"multiplier": prop(I64ArrayAttr, optional=True), "rshift": prop(I64ArrayAttr, optional=True)}


def zp(t: Type) -> int:
    return zero_point_of(t)


def channel_axis(t: Type) -> int | None:
    """The channel axis of a per-axis quantized type, else None."""
    return qparams(t)[2] if is_quant(t) else None


def result_channel_axis(out_t: Type, in_ts: list[Type]) -> int | None:
    """The channel axis an elementwise op's requantization runs along: the result's, else the first
    per-axis operand's (counted in the result's rank, operands broadcasting from the right)."""
    axis = channel_axis(out_t)
    if axis is None:
        nd = len(out_t.shape)  # type: ignore[attr-defined]
        for t in in_ts:
            a = channel_axis(t)
            if a is not None:
                return a + nd - len(t.shape)  # type: ignore[attr-defined]
    return axis


def along(a: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A 1-d per-channel array shaped to broadcast along ``axis`` of an ``ndim``-d tensor."""
    shape = [1] * ndim
    shape[axis] = -1
    return a.reshape(shape)


def bounds(t: Type) -> tuple[int, int]:
    e = elem_of(t)
    return e.storage_min, e.storage_max  # type: ignore[attr-defined]


def store(y: np.ndarray, t: Type) -> np.ndarray:
    return y.astype(storage_dtype(elem_of(t)))  # type: ignore[arg-type]


def centered(x: np.ndarray, t: Type) -> np.ndarray:
    """storage - zero_point as float64 (exact: |values| < 2**17)."""
    return np.asarray(x, dtype=np.float64) - float(zp(t))


def acc_int32(acc_f64: np.ndarray) -> np.ndarray:
    """An exactly integer-valued float64 accumulator as the int32 register (two's-complement wrap)."""
    return wrap_int32(np.rint(acc_f64).astype(np.int64))


def relu_clamp(y: np.ndarray, op: Any, out_t: Type) -> np.ndarray:
    """``do_relu``: clamp below at the output zero point; ``relu_limit > 0``: also above at
    ``zp + round_half_away(relu_limit / scale)``."""
    if not op.attr("do_relu"):
        return y
    z = zp(out_t)
    y = np.maximum(y, z)
    limit = op.attr("relu_limit")
    if limit is not None and limit > 0:
        scale = float(qparams(out_t)[0])
        y = np.minimum(y, z + int(round_half_away(np.float64(limit / scale))))
    return y


def mult_props(op: Any) -> tuple[np.ndarray, np.ndarray]:
    m = np.asarray(op.attr("multiplier"), dtype=np.int64)
    s = np.asarray(op.attr("rshift"), dtype=np.int64)
    return m, s

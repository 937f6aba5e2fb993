"""The ``npu`` dialect: the virtual NPU's level of Lamina's IR.

* **Command ops** — one per TIU command of the ISA (:mod:`.isa`), made from the command's record:
  ``npu.Conv``, ``npu.Depthwise``, ``npu.MatMul``, ``npu.Eltwise``, ``npu.Requant``, ``npu.Pool``,
  ``npu.Lut``, ``npu.Active``, ``npu.Cast``, ``npu.Permute``, ``npu.Reduce``, ... Their operands are
  the record's tensor fields (4-d ``(n, c, h, w)`` tensors; constants such as weights in the hardware
  layout the record reads), their result its ``output``, their properties its scalar fields (enums
  by name). ``execute`` runs the simulator's TIU kernel for the record on the operand values — the
  very function the simulator runs, so this level is executable and bit-exact with the ``tpu`` op
  it came from.
* ``npu.Weight`` — a constant in DDR, in the layout its command reads.
* ``npu.Reshape`` — a new shape of the same bytes (free in DDR, where tensors are row-major).
* ``npu.Copy`` — a GDMA data movement in DDR (Concat, Slice, Split, Permute, Tile, upsampling...):
  strided moves from its inputs into its result.
* ``npu.Group`` — a layer group: a region holding ``npu.Load`` (DDR → LMEM), command ops computing
  in LMEM, ``npu.Store`` (LMEM → DDR) and ``npu.Yield`` (the stored values, the group's results).
  The passes write their decisions as attributes: the group's slicing (``secs``), each op's slices
  (``npu.slices``), pipeline stage (``npu.stage``), LMEM address (``npu.lmem``), DDR addresses
  (``npu.ddr``).

Ops of other dialects (``tpu`` ops without an NPU form) may sit beside these: they run on the host
CPU as CPU subnets. Every op here executes on the reference interpreter with whole-tensor semantics
(a group runs its body once on whole tensors), so any stage of the NPU pipeline can be run and
compared with the ``tpu`` module it came from.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
import typing
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

import numpy as np

from lamina.dialects.quant import QuantizedType, UniformQuantizedPerAxisType
from lamina.dialects.tpu.quantize import storage_dtype
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.constraints import (
    BoolProp,
    ElementsAttrC,
    F64ArrayAttr,
    F64Attr,
    I64ArrayAttr,
    I64Attr,
    StrAttr,
)
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import (
    Op,
    operand,
    opt_operand,
    prop,
    region,
    result_def,
    var_operand,
    var_result,
)
from lamina.ir.traits import (
    ConstantLike,
    ExecutableOpInterface,
    IsTerminator,
    NotALayer,
    Pure,
    ReturnLike,
)
from lamina.ir.types import RankedTensorType, ShapedType, Type
from lamina.ir.verifier import verify_body_signature
from lamina.support.errors import LaminaError

from . import isa
from .isa import Space, Tensor, TiuCommand

__all__ = [
    "COMMAND_OPS",
    "NPU",
    "CommandOp",
    "CopyOp",
    "GroupOp",
    "LoadOp",
    "ReshapeOp",
    "StoreOp",
    "WeightOp",
    "YieldOp",
    "command_op",
    "dtype_name",
    "np_dtype",
]


def np_dtype(t: Type) -> np.dtype:
    """The numpy dtype holding a tensor type's elements (a quantized type's storage integers)."""
    e = t.element_type if isinstance(t, ShapedType) else t
    if isinstance(e, QuantizedType):
        return storage_dtype(e)
    return element_type_to_dtype(e)


@functools.lru_cache(maxsize=4096)
def dtype_name(t: Type) -> str:
    """The NPU dtype name (:data:`lamina.targets.npu.arch.DTYPES`) of a tensor type's elements."""
    from .arch import DTYPES

    dt = np_dtype(t)
    for k, v in DTYPES.items():
        if v == dt:
            return k
    raise LaminaError(f"element type of '{t}' is not an NPU dtype ({', '.join(DTYPES)})")


def reshaped_type(t: Type, shape: Sequence[int]) -> RankedTensorType | None:
    """``t`` with ``shape`` (same elements): a per-axis quantized element type's axis moves to the dim
    of the new shape that is the old axis (same size, same elements before it); None when no dim is."""
    e = t.element_type  # type: ignore[attr-defined]
    if isinstance(e, UniformQuantizedPerAxisType):
        old = tuple(int(d) for d in t.shape)  # type: ignore[attr-defined]
        before = math.prod(old[: e.axis])
        axis = next(
            (j for j in range(len(shape)) if int(shape[j]) == old[e.axis] and math.prod(shape[:j]) == before),
            None,
        )
        if axis is None:
            return None
        e = UniformQuantizedPerAxisType(
            e.storage_width,
            e.signed,
            e.expressed_type,
            e.scales,
            e.zero_points,
            axis,
            e.storage_min,
            e.storage_max,
        )
    return RankedTensorType(tuple(int(d) for d in shape), e)


def shape4(t: Type) -> tuple[int, int, int, int]:
    s = tuple(int(d) for d in t.shape)  # type: ignore[attr-defined]
    if len(s) != 4:
        raise LaminaError(f"NPU command operand of type '{t}' is not 4-d")
    return s  # type: ignore[return-value]


def contiguous_strides(shape: Sequence[int]) -> tuple[int, ...]:
    out = []
    acc = 1
    for d in reversed(shape):
        out.append(acc)
        acc *= int(d)
    return tuple(reversed(out))


# ---- command ops ----------------------------------------------------------------------------------


class CommandOp(Op, ExecutableOpInterface):
    """A TIU command as an op (see the module docstring). ``command`` is the ISA record class."""

    traits = (Pure(),)
    command: ClassVar[type[TiuCommand]]
    #: scalar field name → (its Python type, the enum class for enum fields)
    scalar_fields: ClassVar[dict[str, tuple[Any, type[enum.IntEnum] | None]]] = {}

    def fields(self) -> dict[str, Any]:
        """The record's scalar fields as the ISA dataclass takes them (enums as members, tuples as
        tuples)."""
        out: dict[str, Any] = {}
        for name, (py, en) in self.scalar_fields.items():
            v = getattr(self, name)
            if v is None:
                continue
            if en is not None:
                v = en[v] if isinstance(v, str) else en(v)
            elif py is tuple:
                v = tuple(v)
            out[name] = v
        return out

    def tensor_values(self) -> dict[str, Any]:
        """Record tensor field → the op value feeding it (``output``: the result); absent optional
        operands are left out."""
        out: dict[str, Any] = {}
        for name in self.command.TENSORS:
            v = self.results[0] if name == "output" else getattr(self, name)
            if v is not None:
                out[name] = v
        return out

    def to_command(self, tensors: dict[str, Tensor], **head: int) -> TiuCommand:
        """The ISA record of this op with the given tensor descriptors (by field name) and head
        fields (``id``, ``wait``, ``group``); ``fields`` overridden per slice by the caller."""
        return self.command(**self.fields(), **tensors, **head)  # type: ignore[arg-type]

    def local_command(self, fields: dict[str, Any] | None = None) -> TiuCommand:
        """The record on contiguous LMEM descriptors of the operands' shapes (what ``execute`` runs)."""
        tensors = {}
        for name, v in self.tensor_values().items():
            s = shape4(v.type)
            tensors[name] = Tensor(Space.LMEM, 0, s, contiguous_strides(s), dtype_name(v.type))  # type: ignore[arg-type]
        f = self.fields() if fields is None else fields
        return self.command(**f, **tensors)  # type: ignore[arg-type]

    def verify_(self) -> None:
        for name, v in self.tensor_values().items():
            t = v.type
            if not isinstance(t, RankedTensorType) or len(t.shape) != 4:
                raise VerifyError(f"operand '{name}' must be a 4-d ranked tensor, got '{t}'")
            try:
                dtype_name(t)
            except LaminaError as e:
                raise VerifyError(str(e)) from None
        try:
            self.local_command()
        except (LaminaError, TypeError, ValueError, KeyError) as e:
            raise VerifyError(f"not a valid {self.command.__name__} record: {e}") from None

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        from .simulator import TIU_TABLE

        cmd = self.local_command()
        names = [n for n in self.command.TENSORS if n != "output" and getattr(self, n) is not None]
        arrays = {n: np.asarray(a) for n, a in zip(names, inputs)}
        out = np.asarray(TIU_TABLE.lookup(self.command).execute(cmd, arrays))
        return [out.astype(np_dtype(self.results[0].type), copy=False).reshape(shape4(self.results[0].type))]


def _python_type(hint: Any) -> tuple[Any, type[enum.IntEnum] | None]:
    if isinstance(hint, type) and issubclass(hint, enum.IntEnum):
        return int, hint
    origin = typing.get_origin(hint)
    if origin is tuple:
        return tuple, None
    return hint, None


def _constraint(py: Any, en: Any, hint: Any) -> Any:
    if en is not None:
        return StrAttr
    if py is bool:
        return BoolProp
    if py is int:
        return I64Attr
    if py is float:
        return F64Attr
    if py is str:
        return StrAttr
    if py is tuple:
        args = typing.get_args(hint)
        return F64ArrayAttr if args and args[0] is float else I64ArrayAttr
    raise TypeError(f"no property constraint for a field of type {hint!r}")


def _default_attr(c: Any, v: Any, en: Any) -> Any:
    if en is not None:
        return c.from_python(en(v).name)
    return c.from_python(tuple(v) if isinstance(v, tuple) else v)


def command_op(cls: type[TiuCommand]) -> type[CommandOp]:
    """The op class of an ISA TIU command class: operands = its tensor fields but ``output`` (the
    optional ones optional), result ``output``, one property per scalar field (defaults as the
    record's)."""
    hints = typing.get_type_hints(cls)
    ns: dict[str, Any] = {
        "name": "npu." + cls.__name__,
        "command": cls,
        "__doc__": f"The TIU ``{cls.__name__}`` command (opcode 0x{cls.OPCODE:02x}): {(cls.__doc__ or '').strip()}",
        "__module__": __name__,
        "__qualname__": cls.__name__ + "Op",
    }
    for name in cls.TENSORS:
        if name == "output":
            continue
        ns[name] = opt_operand() if name in cls.OPTIONAL else operand()
    ns["output"] = result_def()
    scalars: dict[str, tuple[Any, type[enum.IntEnum] | None]] = {}
    head = {f.name for f in dataclasses.fields(isa.Command)}
    for f in dataclasses.fields(cls):
        if f.name in head or f.name in cls.TENSORS:
            continue
        hint = hints[f.name]
        py, en = _python_type(hint)
        c = _constraint(py, en, hint)
        scalars[f.name] = (py, en)
        if f.default is not dataclasses.MISSING:
            ns[f.name] = prop(c, default=_default_attr(c, f.default, en))
        else:
            ns[f.name] = prop(c)
    ns["scalar_fields"] = scalars
    return type(cls.__name__ + "Op", (CommandOp,), ns)


#: TIU command class → its op class
COMMAND_OPS: dict[type[TiuCommand], type[CommandOp]] = {
    c: command_op(c) for c in isa.COMMANDS.values() if isinstance(c, type) and issubclass(c, TiuCommand)
}


# ---- data in DDR ----------------------------------------------------------------------------------


class WeightOp(Op, ExecutableOpInterface):
    """A constant in DDR, in the layout of the command that reads it (``value``: its elements, of the
    result's storage type)."""

    name = "npu.Weight"
    traits = (Pure(), ConstantLike(), NotALayer())
    output = result_def()
    value = prop(ElementsAttrC)

    def array(self) -> np.ndarray:
        """The constant's elements, as the result's storage dtype."""
        a = self.properties["value"].to_numpy()  # type: ignore[attr-defined]
        return np.asarray(a).astype(np_dtype(self.output.type), copy=False)

    def verify_(self) -> None:
        v = self.properties["value"].type  # type: ignore[attr-defined]
        r = self.output.type
        if not isinstance(v, ShapedType) or not isinstance(r, ShapedType) or tuple(v.shape) != tuple(r.shape):
            raise VerifyError(f"value type '{v}' does not match result type '{r}'")
        if np_dtype(v) != np_dtype(r):
            raise VerifyError(f"value elements '{v}' are not the storage of '{r}'")

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [self.array()]

    def constant_value(self) -> Any:
        return self.properties["value"]


class ReshapeOp(Op, ExecutableOpInterface):
    """The same elements in another shape (row-major): free for a tensor in DDR."""

    name = "npu.Reshape"
    traits = (Pure(),)
    input = operand()
    output = result_def()

    def verify_(self) -> None:
        a, b = self.input.type, self.output.type
        if not (isinstance(a, RankedTensorType) and isinstance(b, RankedTensorType)):
            raise VerifyError("operand and result must be ranked tensors")
        if a.num_elements != b.num_elements or reshaped_type(a, b.shape) is not b:
            raise VerifyError(f"'{a}' and '{b}' differ in element count or type")

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [np.asarray(inputs[0]).reshape(self.output.type.shape)]  # type: ignore[attr-defined]


#: the integers one move of ``npu.Copy`` takes: input, src offset, shape (4), src strides (4),
#: dst offset, dst strides (4) — offsets and strides in elements
MOVE_FIELDS = 15


class CopyOp(Op, ExecutableOpInterface):
    """A data movement in DDR by GDMA: ``moves`` (:data:`MOVE_FIELDS` integers each) copy a strided
    4-d view of one input into a strided view of the result; together they write every element of
    the result once."""

    name = "npu.Copy"
    traits = (Pure(),)
    inputs = var_operand()
    output = result_def()
    moves = prop(I64ArrayAttr)

    def move_list(self) -> list[tuple[int, int, tuple[int, ...], tuple[int, ...], int, tuple[int, ...]]]:
        m = list(self.moves)
        out = []
        for i in range(0, len(m), MOVE_FIELDS):
            r = m[i : i + MOVE_FIELDS]
            out.append((r[0], r[1], tuple(r[2:6]), tuple(r[6:10]), r[10], tuple(r[11:15])))
        return out

    def verify_(self) -> None:
        if len(self.moves) % MOVE_FIELDS:
            raise VerifyError(f"moves must be {MOVE_FIELDS} integers each, got {len(self.moves)}")
        out_t = self.output.type
        if not isinstance(out_t, RankedTensorType):
            raise VerifyError("result must be a ranked tensor")
        total = 0
        for k, (i, so, shape, ss, do, ds) in enumerate(self.move_list()):
            if not 0 <= i < len(self.inputs):
                raise VerifyError(f"move {k} reads input {i}; the op has {len(self.inputs)}")
            n_in = self.inputs[i].type.num_elements  # type: ignore[attr-defined]
            if min(shape) < 1 or min(ss) < 0 or min(ds) < 0 or so < 0 or do < 0:
                raise VerifyError(f"move {k}: dims must be >= 1, offsets and strides >= 0")
            if so + sum(s * (d - 1) for s, d in zip(ss, shape)) >= n_in:
                raise VerifyError(f"move {k} reads past input {i}'s {n_in} elements")
            if do + sum(s * (d - 1) for s, d in zip(ds, shape)) >= out_t.num_elements:
                raise VerifyError(f"move {k} writes past the result's {out_t.num_elements} elements")
            total += int(np.prod(shape))
        if total != out_t.num_elements:
            raise VerifyError(f"the moves write {total} elements; the result has {out_t.num_elements}")

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        out_t = self.output.type
        out = np.empty(out_t.num_elements, np_dtype(out_t))  # type: ignore[attr-defined]
        flats = [np.ascontiguousarray(a).reshape(-1) for a in inputs]
        for i, so, shape, ss, do, ds in self.move_list():
            src = flats[i]
            isz = src.itemsize
            sv = np.lib.stride_tricks.as_strided(src[so:], shape, [s * isz for s in ss], writeable=False)
            dv = np.lib.stride_tricks.as_strided(out[do:], shape, [s * out.itemsize for s in ds])
            dv[...] = sv
        return [out.reshape(out_t.shape)]  # type: ignore[attr-defined]


# ---- layer groups ---------------------------------------------------------------------------------


class GroupOp(Op):
    """A layer group: its body (one block whose arguments are the group's operands, in DDR) loads,
    computes in LMEM and stores; the yielded values are its results. ``secs``: how many slices
    along n, c, h, w the group computes its output in (set by ``npu-layer-group``)."""

    name = "npu.Group"
    inputs = var_operand()
    outputs = var_result()
    body = region(single_block=True)
    secs = prop(I64ArrayAttr, optional=True)

    def verify_(self) -> None:
        verify_body_signature(self, self.inputs, YieldOp, "group")
        if self.secs is not None and (len(self.secs) != 4 or min(self.secs) < 1):
            raise VerifyError(f"secs must be 4 positive slice counts (n, c, h, w), got {list(self.secs)}")

    def execute_regions(
        self, inputs: Sequence[Any], regions: Sequence[Callable[..., list[Any]]]
    ) -> list[Any]:
        return regions[0](list(inputs))

    @property
    def block(self) -> Any:
        return self.regions[0].blocks[0]


class LoadOp(Op, ExecutableOpInterface):
    """DDR → LMEM (GDMA): the value, slice by slice, into local memory."""

    name = "npu.Load"
    traits = (Pure(),)
    input = operand()
    output = result_def()

    def verify_(self) -> None:
        if self.input.type is not self.output.type:
            raise VerifyError("a load keeps its value's type")

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [inputs[0]]


class StoreOp(Op, ExecutableOpInterface):
    """LMEM → DDR (GDMA): a value computed in the group, slice by slice, out to DDR."""

    name = "npu.Store"
    traits = (Pure(),)
    input = operand()
    output = result_def()

    def verify_(self) -> None:
        if self.input.type is not self.output.type:
            raise VerifyError("a store keeps its value's type")

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return [inputs[0]]


class YieldOp(Op, ExecutableOpInterface):
    """Ends a group's body: the stored values, its results."""

    name = "npu.Yield"
    traits = (Pure(), IsTerminator(), ReturnLike(), NotALayer())
    values = var_operand()

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return []


def _ops() -> list[type[Op]]:
    return [*COMMAND_OPS.values(), WeightOp, ReshapeOp, CopyOp, GroupOp, LoadOp, StoreOp, YieldOp]


NPU = register_dialect(
    Dialect("npu", _ops(), description="The virtual NPU: TIU commands, layer groups, DDR data.")
)

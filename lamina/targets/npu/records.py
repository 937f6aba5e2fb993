"""A ``tpu`` op → the one ISA TIU command that computes it: the record class, its scalar fields, which
op value feeds each tensor field (and the 4-d ``(n, c, h, w)`` view the command sees it as), and
the compile-time constants that fill the others (weights, biases, per-channel quant tensors, LUT
tables) in the record's layout.

The parameters come from :func:`lamina.targets.npu.tiu.command_for` (zero points, requant factors,
saturation bounds with ReLU folded in — the one reading of an op's integer form); this module
chooses the views and lays the parameters out as records.

**Views.** An activation's view is a *pure reshape* of the op's row-major N-d value: dims merged or
split only where adjacent, 1s added — no data moves. Canonical views: a rank-4 value as is; rank
3 ``(B, M, K)`` → ``(B, M, 1, K)``; rank 2 ``(M, K)`` → ``(1, M, 1, K)``; rank 1 ``(K,)`` →
``(1, 1, 1, K)``; a scalar ``(1, 1, 1, 1)`` (consistent with a matmul's ``(B, M, 1, N)`` output).
Conv and pool inputs of rank 3 ``(N, C, L)`` are ``(N, C, 1, L)``. Higher ranks merge adjacent
dims where the command allows it (every operand full in all of them or broadcast in all of them,
the per-channel axis, a softmax axis, reduced dims and normalized dims kept apart) and place the
groups as the canonical view of that many dims; more than four groups is no command. Broadcast
operands are viewed with 1 in their broadcast dims (the ISA broadcasts where a dim is 1).

**Per-channel parameters** run along one dim of the view, which the record's ``quant_axis`` names
(Eltwise, Requant, Cast): transformers' per-channel activations along the last axis are ``w`` of
the ``(B, M, 1, K)`` view (``quant_axis`` 3), a CNN's channels ``c`` (1).

Anything without a form (rank > 4 after merging, an n-input Add with n > 2, a 3-d conv, dynamic
axes, per-axis zero points, a used LayerNorm statistic, a dtype the NPU lacks...) is one
:class:`LaminaError` naming the op: it runs on the host CPU.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lamina.dialects.top.base import elem_of
from lamina.dialects.tpu.families.common import is_quant
from lamina.dialects.tpu.quantize import qparams, storage_dtype
from lamina.execution.kernels.geometry import pool_output_size, window_geometry
from lamina.ir.attributes import element_type_to_dtype
from lamina.ir.constants import is_constant
from lamina.ir.core import Operation, Value
from lamina.ir.types import FloatType, IntegerType, NoneType, Type
from lamina.support.errors import LaminaError

from . import isa, tiu
from .arch import DTYPES

__all__ = [
    "Lowered",
    "Operand",
    "Shape4",
    "build_command",
    "canonical_view",
    "lower_op",
    "operand_value",
    "value_dtype",
]

Shape4 = tuple[int, int, int, int]


@dataclass(frozen=True)
class Operand:
    """A tensor field of the record fed by an op value: ``value`` is an index into
    ``op.operands``, or -1 for ``op.results[0]``; ``shape`` the 4-d ``(n, c, h, w)`` view the
    command sees it as (a pure reshape of the value)."""

    value: int
    shape: Shape4


@dataclass(frozen=True)
class Lowered:
    """The TIU command of a ``tpu`` op: its record class, its scalar fields (every one of the
    class's, by dataclass field name), the tensor fields fed by op values (``output`` included)
    and the tensor fields filled by compile-time constants (4-d arrays in the record's layout and
    dtype: reordered conv weight ``(1, Cout, Cin/g, kh*kw)``, bias ``(1, C, 1, 1)``, quant
    tensors, LUT table ``(1, 1, 1, 256)``, constant operands in their views)."""

    cls: type[isa.TiuCommand]
    fields: dict[str, Any]
    operands: dict[str, Operand]
    params: dict[str, np.ndarray]


# ---- values, dtypes, constants ----------------------------------------------------------------------


def _no_form(op: Operation, why: str) -> LaminaError:
    return LaminaError(f"'{op.name}' at {op.location} has no TIU command ({why}): it runs on the host CPU")


def _numpy_dtype(t: Type) -> np.dtype | None:
    e = elem_of(t)
    try:
        if is_quant(t):
            return storage_dtype(e)  # type: ignore[arg-type]
        if isinstance(e, (FloatType, IntegerType)):
            return element_type_to_dtype(e)
    except (ValueError, TypeError):
        return None
    return None


def value_dtype(v: Value) -> str:
    """The ISA dtype (``int8``, ``bf16``, ...) of a value's elements — a quantized value's storage
    integers; a LaminaError for a type the NPU has no dtype for."""
    dt = _numpy_dtype(v.type)
    for name, d in DTYPES.items():
        if dt is not None and d == dt:
            return name
    raise LaminaError(f"element type {elem_of(v.type)} has no NPU dtype")


def operand_value(op: Operation, operand: Operand) -> Value:
    """The op value an :class:`Operand` names."""
    return op.results[0] if operand.value == -1 else op.operands[operand.value]


def _shape(op: Operation, v: Value) -> tuple[int, ...]:
    shape = getattr(v.type, "shape", None)
    if shape is None or any(not isinstance(d, int) or d < 0 for d in shape):
        raise _no_form(op, f"a value of type {v.type} has no static shape")
    return tuple(int(d) for d in shape)


def _constant(v: Value) -> np.ndarray | None:
    """The value a ConstantLike op produces, as the interpreter sees it (storage integers of a
    quantized weight), else None."""
    if not is_constant(v):
        return None
    d = v.defining_op()
    assert d is not None
    return np.asarray(d.execute([])[0])  # type: ignore[attr-defined]


# ---- views ---------------------------------------------------------------------------------------------

#: where each dim of a value of rank r goes in the canonical 4-d view
_POS: dict[int, tuple[int, ...]] = {0: (), 1: (3,), 2: (1, 3), 3: (0, 1, 3), 4: (0, 1, 2, 3)}


def _place(dims: Sequence[int]) -> Shape4:
    v = [1, 1, 1, 1]
    for d, p in zip(dims, _POS[len(dims)]):
        v[p] = int(d)
    return (v[0], v[1], v[2], v[3])


def canonical_view(shape: Sequence[int]) -> Shape4:
    """The canonical 4-d view of a value of rank at most 4 (see the module docstring)."""
    if len(shape) > 4:
        raise ValueError(f"a rank-{len(shape)} value has no canonical 4-d view")
    return _place(shape)


Groups = list[tuple[int, int]]


def _merge(
    out: Sequence[int], ins: Sequence[Sequence[int]], joins: Callable[[int, int], bool] = lambda a, i: True
) -> Groups:
    """Groups ``[a, b)`` of adjacent dims of a rank-r value: rank <= 4 keeps every dim; above, a
    dim joins the current group when ``joins(a, i)`` and every operand (aligned to rank r) is
    full in all the group's dims or broadcast (1) in all of them (dims of size 1 go with anything)."""
    r = len(out)
    if r <= 4:
        return [(i, i + 1) for i in range(r)]

    def state(s: Sequence[int], i: int) -> str | None:
        return None if out[i] == 1 else ("full" if s[i] == out[i] else "bcast")

    groups: Groups = []
    start = 0
    states: list[str | None] = [state(s, 0) for s in ins]
    for i in range(1, r):
        ok = joins(start, i)
        new = list(states)
        if ok:
            for k, s in enumerate(ins):
                st = state(s, i)
                if st is not None:
                    if new[k] is None:
                        new[k] = st
                    elif new[k] != st:
                        ok = False
        if ok:
            states = new
            continue
        groups.append((start, i))
        start = i
        states = [state(s, i) for s in ins]
    groups.append((start, r))
    return groups


def _view(op: Operation, shape: Sequence[int], groups: Groups) -> Shape4:
    if len(groups) > 4:
        raise _no_form(op, f"its rank-{len(shape)} values do not merge into 4 dims")
    return _place([math.prod(shape[a:b]) for a, b in groups])


def _pos(groups: Groups, dim: int) -> int:
    """The view dim a dim of the N-d value lands in."""
    g = next(j for j, (a, b) in enumerate(groups) if a <= dim < b)
    return _POS[len(groups)][g]


def _aligned(shape: Sequence[int], rank: int) -> tuple[int, ...]:
    return (1,) * (rank - len(shape)) + tuple(shape)


def _strip_ones(shape: Sequence[int]) -> tuple[int, ...]:
    s = tuple(shape)
    while s and s[0] == 1:
        s = s[1:]
    return s


# ---- building a Lowered --------------------------------------------------------------------------------


class _Builder:
    """Collects one command's fields, operands and params."""

    def __init__(self, op: Operation, cls: type[isa.TiuCommand]) -> None:
        self.op = op
        self.cls = cls
        self.fields: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if any(f.name == n for n, _ in cls.SCALARS):
                self.fields[f.name] = f.default
        self.operands: dict[str, Operand] = {}
        self.params: dict[str, np.ndarray] = {}

    def set(self, **fields: Any) -> None:
        for k, v in fields.items():
            if k not in self.fields:
                raise AssertionError(f"{self.cls.__name__} has no field {k!r}")
            self.fields[k] = v

    def tensor(self, name: str, index: int, view: Shape4, dtype_of: Value | None = None) -> None:
        """Field ``name`` fed by operand ``index`` (-1: the result), viewed as ``view``; a constant
        operand becomes a param of that shape instead."""
        op = self.op
        v = op.results[0] if index == -1 else op.operands[index]
        value_dtype(v)  # a dtype the NPU has
        arr = _constant(v) if index >= 0 else None
        if arr is not None:
            self.param(name, np.broadcast_to(arr, _shape(op, v)).reshape(view))
        else:
            self.operands[name] = Operand(index, view)

    def param(self, name: str, arr: np.ndarray) -> None:
        a = np.ascontiguousarray(arr)
        if len(a.shape) != 4 or not any(a.dtype == d for d in DTYPES.values()):
            raise _no_form(self.op, f"constant {name} {a.shape} {a.dtype} has no NPU layout")
        self.params[name] = a

    def quant(self, columns: Sequence[Any]) -> None:
        """The ``(1, C, 1, k)`` int32 per-channel quant tensor of ``k`` columns of C values."""
        cols = [np.asarray(c, np.int64).reshape(-1) for c in columns]
        c = max(x.size for x in cols)
        q = np.stack([np.broadcast_to(x, (c,)) for x in cols], axis=1)
        if np.any(q > np.iinfo(np.int32).max) or np.any(q < np.iinfo(np.int32).min):
            raise _no_form(self.op, "a per-channel parameter does not fit int32")
        self.params["quant"] = q.astype(np.int32).reshape(1, c, 1, len(cols))

    def done(self) -> Lowered:
        return Lowered(self.cls, self.fields, self.operands, self.params)


def _scalar_or_quant(b: _Builder, names: Sequence[str], columns: Sequence[Any]) -> None:
    """Per-tensor parameters as the scalar fields ``names``; if any has more than one value, all
    as the columns of the quant tensor."""
    arrays = [np.asarray(c, np.int64).reshape(-1) for c in columns]
    if all(a.size == 1 for a in arrays):
        b.set(**{n: int(a[0]) for n, a in zip(names, arrays)})
    else:
        b.quant(arrays)


def _int_out(b: _Builder, p: Mapping[str, Any]) -> None:
    b.set(output_zp=int(p["out_zp"]), out_min=int(p["out_min"]), out_max=int(p["out_max"]))


# ---- conv, pool ----------------------------------------------------------------------------------------


def _spatial(op: Operation) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The 4-d views of a conv / pool input and output: rank 4 as is, rank 3 (N, C, L) as
    (N, C, 1, L)."""
    xs, ys = _shape(op, op.operands[0]), _shape(op, op.results[0])
    if len(xs) == 4:
        return xs, ys
    if len(xs) == 3:
        return (xs[0], xs[1], 1, xs[2]), (ys[0], ys[1], 1, ys[2])
    raise _no_form(op, f"a {len(xs) - 2}-d window (the TIU's are 2-d)")


def _hw(values: Sequence[int], rank: int, fill: int) -> tuple[int, int]:
    """(h, w) of a window property of a 2-d (h, w) or 1-d (w) op."""
    return (int(values[0]), int(values[1])) if rank == 4 else (fill, int(values[0]))


def _pads(pad: Sequence[int], rank: int) -> dict[str, int]:
    if rank == 4:
        return {"pad_top": pad[0], "pad_left": pad[1], "pad_bottom": pad[2], "pad_right": pad[3]}
    return {"pad_top": 0, "pad_left": pad[0], "pad_bottom": 0, "pad_right": pad[1]}


def _conv(op: Any) -> Lowered:
    name, p = tiu.command_for(op)
    x4, y4 = _spatial(op)
    rank = len(_shape(op, op.operands[0]))
    ws = _shape(op, op.filter)
    cout, cin_g, taps = ws[0], ws[1], math.prod(ws[2:])
    kh, kw = _hw(ws[2:], rank, 1)
    g = int(op.attr("group"))
    depthwise = name == "depthwise" or (name == "conv_f" and g == x4[1] == cout and cin_g == 1)
    b = _Builder(op, isa.Depthwise if depthwise else isa.Conv)
    sh, sw = _hw(p["stride"], rank, 1)
    dh, dw = _hw(p["dilation"], rank, 1)
    b.set(
        kh=kh,
        kw=kw,
        stride_h=sh,
        stride_w=sw,
        dilation_h=dh,
        dilation_w=dw,
        groups=g,
        **_pads(p["pad"], rank),
    )
    b.tensor("input", 0, (x4[0], x4[1], x4[2], x4[3]))
    b.tensor("weight", 1, (1, cout, cin_g, taps))
    if not isinstance(op.bias.type, NoneType):
        b.tensor("bias", 2, (1, cout, 1, 1))
    b.tensor("output", -1, (y4[0], y4[1], y4[2], y4[3]))
    if name == "conv_f":
        b.set(do_relu=bool(p["relu"]), relu_limit=float(p["relu_limit"]))
    else:
        b.set(input_zp=int(p["x_zp"]), weight_zp=int(p["w_zp"]))
        _scalar_or_quant(b, ("multiplier", "rshift"), (p["multiplier"], p["rshift"]))
        _int_out(b, p)
    return b.done()


def _pool(op: Any) -> Lowered:
    name, p = tiu.command_for(op)
    x4, y4 = _spatial(op)
    xs = _shape(op, op.operands[0])
    rank = len(xs)
    geo = window_geometry(
        xs[2:],
        op.attr("kernel_shape"),
        op.attr("strides"),
        op.attr("dilations"),
        op.attr("pads"),
        op.attr("auto_pad"),
    )
    k, s, d, pad = geo
    _, extra = pool_output_size(xs[2:], geo, bool(op.attr("ceil_mode")))
    b = _Builder(op, isa.Pool)
    kh, kw = _hw(k, rank, 1)
    sh, sw = _hw(s, rank, 1)
    dh, dw = _hw(d, rank, 1)
    eh, ew = _hw(extra, rank, 0)
    b.set(kh=kh, kw=kw, stride_h=sh, stride_w=sw, dilation_h=dh, dilation_w=dw, **_pads(pad, rank))
    b.set(ceil_extra_h=eh, ceil_extra_w=ew)
    b.tensor("input", 0, (x4[0], x4[1], x4[2], x4[3]))
    b.tensor("output", -1, (y4[0], y4[1], y4[2], y4[3]))
    if name == "max_pool":
        b.set(mode=isa.PoolMode.MAX)
    else:
        b.set(mode=isa.PoolMode.AVG, count_include_pad=bool(op.attr("count_include_pad")))
        if name == "avg_pool":
            if eh or ew:
                raise _no_form(op, "an INT8 AvgPool with ceil-mode windows")
            b.set(input_zp=int(p["x_zp"]), multiplier=int(p["multiplier"]), rshift=int(p["rshift"]))
            _int_out(b, p)
    return b.done()


# ---- matmul --------------------------------------------------------------------------------------------


def _matmul(op: Any) -> Lowered:
    name, p = tiu.command_for(op)
    a_s, b_s = _shape(op, op.input), _shape(op, op.right)
    a2 = (1, *a_s) if len(a_s) == 1 else a_s
    b2 = (*b_s, 1) if len(b_s) == 1 else b_s
    m, k, n = a2[-2], a2[-1], b2[-1]
    batch = tuple(int(x) for x in np.broadcast_shapes(a2[:-2], b2[:-2]))
    bsz = math.prod(batch)
    if _aligned(a2[:-2], len(batch)) != batch:
        raise _no_form(op, f"a MatMul whose left operand {list(a_s)} broadcasts over the batch")
    rb = math.prod(b2[:-2])
    if rb != 1 and _aligned(b2[:-2], len(batch)) != batch:
        raise _no_form(op, f"a MatMul whose right operand {list(b_s)} broadcasts over part of the batch")
    b = _Builder(op, isa.MatMul)
    b.tensor("left", 0, (bsz, m, 1, k))
    b.tensor("right", 1, (rb, k, 1, n))
    b.tensor("output", -1, (bsz, m, 1, n))
    if not isinstance(op.bias.type, NoneType):
        bias_s = _shape(op, op.bias)
        if math.prod(bias_s) == n and (not bias_s or bias_s[-1] == n):
            b.tensor("bias", 2, (1, n, 1, 1))
        else:
            arr = _constant(op.bias)
            if arr is None or arr.size != 1:
                raise _no_form(op, f"a MatMul bias {list(bias_s)} that is not one value per column")
            b.param("bias", np.broadcast_to(arr.reshape(1, 1, 1, 1), (1, n, 1, 1)))
    if name == "matmul_f":
        b.set(do_relu=bool(p["relu"]), relu_limit=float(p["relu_limit"]))
    else:
        b.set(left_zp=int(p["a_zp"]))
        _scalar_or_quant(b, ("multiplier", "rshift", "right_zp"), (p["multiplier"], p["rshift"], p["b_zp"]))
        _int_out(b, p)
    return b.done()


# ---- element-wise ----------------------------------------------------------------------------------------

_ELTWISE_OPS = {
    "add": isa.EltwiseOp.ADD,
    "sub": isa.EltwiseOp.SUB,
    "mul": isa.EltwiseOp.MUL,
    "max": isa.EltwiseOp.MAX,
    "min": isa.EltwiseOp.MIN,
    "div": isa.EltwiseOp.DIV,
}


def _separate(axis: int | None) -> Callable[[int, int], bool]:
    """Merging that keeps ``axis`` a group of its own."""
    if axis is None:
        return lambda a, i: True
    return lambda a, i: axis not in (a, i) and not a <= axis < i


def _eltwise(op: Any) -> Lowered:
    name, p = tiu.command_for(op)
    if len(op.operands) != 2:
        raise _no_form(op, f"an element-wise op of {len(op.operands)} inputs (the TIU's take two)")
    out = _shape(op, op.results[0])
    ins = [_aligned(_shape(op, v), len(out)) for v in op.operands]
    axis = p.get("channel_axis", -1)
    axis = None if axis is None or axis < 0 else int(axis)
    groups = _merge(out, ins, _separate(axis))
    b = _Builder(op, isa.Eltwise)
    b.set(op=_ELTWISE_OPS[name.removesuffix("_f")])
    for field, i in (("a", 0), ("b", 1)):
        b.tensor(field, i, _view(op, ins[i], groups))
    b.tensor("output", -1, _view(op, out, groups))
    if name in ("add", "sub"):
        ms = np.asarray(p["multipliers"], np.int64).reshape(2, -1)
        b.set(a_zp=int(p["x_zps"][0]), b_zp=int(p["x_zps"][1]))
        if axis is not None:
            b.set(quant_axis=_pos(groups, axis))
        _scalar_or_quant(b, ("a_multiplier", "b_multiplier", "rshift"), (ms[0], ms[1], p["rshift"]))
        _int_out(b, p)
    elif name == "mul":
        b.set(a_zp=int(p["a_zp"]), b_zp=int(p["b_zp"]))
        if axis is not None:
            b.set(quant_axis=_pos(groups, axis))
        m = np.asarray(p["multiplier"], np.int64).reshape(-1)
        _scalar_or_quant(b, ("a_multiplier", "b_multiplier", "rshift"), (m, np.zeros_like(m), p["rshift"]))
        if "quant" not in b.params:
            b.set(b_multiplier=1)
        _int_out(b, p)
    return b.done()


def _requant(op: Any) -> Lowered:
    _, p = tiu.command_for(op)
    shape = _shape(op, op.results[0])
    axis = None if p["channel_axis"] < 0 else int(p["channel_axis"])
    groups = _merge(shape, [shape], _separate(axis))
    b = _Builder(op, isa.Requant)
    b.tensor("input", 0, _view(op, shape, groups))
    b.tensor("output", -1, _view(op, shape, groups))
    b.set(input_zp=int(p["x_zp"]))
    if axis is not None:
        b.set(quant_axis=_pos(groups, axis))
    _scalar_or_quant(b, ("multiplier", "rshift"), (p["multiplier"], p["rshift"]))
    _int_out(b, p)
    return b.done()


def _cast(op: Any) -> Lowered:
    name, p = tiu.command_for(op)
    shape = _shape(op, op.results[0])
    axis = p.get("channel_axis", -1)
    axis = None if axis < 0 else int(axis)
    groups = _merge(shape, [shape], _separate(axis))
    b = _Builder(op, isa.Cast)
    b.tensor("input", 0, _view(op, shape, groups))
    b.tensor("output", -1, _view(op, shape, groups))
    if name == "cast_float":
        return b.done()
    if axis is not None:
        b.set(quant_axis=_pos(groups, axis))
    scale = np.asarray(p["scale"], np.float64).reshape(-1)
    zp = np.asarray(p["zp"], np.int64).reshape(-1)
    if scale.size == 1 and zp.size == 1:
        b.set(scale=float(scale[0]), zero_point=int(zp[0]))
    else:
        c = max(scale.size, zp.size)
        words = np.ascontiguousarray(np.broadcast_to(scale, (c,))).view(np.int32).reshape(c, 2)
        b.quant([words[:, 0], words[:, 1], np.broadcast_to(zp, (c,))])
    if name == "cast_quantize":
        b.set(out_min=int(p["out_min"]), out_max=int(p["out_max"]))
    else:
        lo, hi = qparams(op.input.type)[3:5]
        b.set(out_min=int(lo), out_max=int(hi))
    return b.done()


def _unary_view(op: Any) -> Shape4:
    shape = _shape(op, op.results[0])
    return _view(op, shape, _merge(shape, [shape]))


def _lut(op: Any) -> Lowered:
    tiu.command_for(op)
    b = _Builder(op, isa.Lut)
    view = _unary_view(op)
    b.tensor("input", 0, view)
    b.tensor("output", -1, view)
    table = np.asarray(op.properties["table"].to_numpy()).astype(storage_dtype(elem_of(op.results[0].type)))  # type: ignore[arg-type]
    b.param("table", table.reshape(1, 1, 1, 256))
    return b.done()


def _lut16(op: Any) -> Lowered:
    tiu.command_for(op)
    b = _Builder(op, isa.Lut16)
    view = _unary_view(op)
    b.tensor("input", 0, view)
    b.tensor("output", -1, view)
    table = np.asarray(op.properties["table"].to_numpy()).astype(storage_dtype(elem_of(op.results[0].type)))  # type: ignore[arg-type]
    b.param("table", table.reshape(1, 1, 1, 65536))
    return b.done()


def active_params(op: Operation, fn: str, props: Mapping[str, Any]) -> tuple[float, float, float, float]:
    """An activation's properties as an ``Active`` record's four ``params`` (declaration order;
    string properties as indices into :data:`isa.ACTIVE_CHOICES`)."""
    vals: list[float] = []
    for pname, v in props.items():
        choices = isa.ACTIVE_CHOICES.get((fn, pname))
        if choices is not None:
            if v not in choices:
                raise _no_form(op, f"{fn} {pname} = {v!r} (the TIU knows {', '.join(choices)})")
            vals.append(float(choices.index(v)))
        elif isinstance(v, (bool, int, float, np.integer, np.floating)):
            vals.append(float(v))
        else:
            raise _no_form(op, f"{fn}'s property {pname} = {v!r} is not a number")
    if len(vals) > 4:
        raise _no_form(op, f"{fn} has {len(vals)} properties (an Active record carries 4)")
    vals += [0.0] * (4 - len(vals))
    return (vals[0], vals[1], vals[2], vals[3])


def _active(op: Any) -> Lowered:
    _, p = tiu.command_for(op)
    b = _Builder(op, isa.Active)
    view = _unary_view(op)
    b.tensor("input", 0, view)
    b.tensor("output", -1, view)
    b.set(fn=p["fn"], params=active_params(op, p["fn"], p["params"]))
    return b.done()


# ---- permute, reduce, softmax, layer norm, attention ------------------------------------------------------


def _permute(op: Any) -> Lowered:
    _, p = tiu.command_for(op)
    xs = _shape(op, op.operands[0])
    perm = [int(a) for a in p["order"]]
    r = len(xs)
    if r <= 4:
        groups_in: Groups = [(i, i + 1) for i in range(r)]
        gperm = perm
    else:
        # runs of input dims that stay adjacent and in order in the output are one group
        runs: list[list[int]] = []
        for d in perm:
            if runs and runs[-1][-1] + 1 == d:
                runs[-1].append(d)
            else:
                runs.append([d])
        starts = sorted(run[0] for run in runs)
        groups_in = [(a, a + len(next(run for run in runs if run[0] == a))) for a in starts]
        gperm = [starts.index(run[0]) for run in runs]
    if len(groups_in) > 4:
        raise _no_form(op, f"a permutation of rank {r} that does not merge into 4 dims")
    pos = _POS[len(groups_in)]
    order = [0, 1, 2, 3]
    for i, j in enumerate(gperm):
        order[pos[i]] = pos[j]
    b = _Builder(op, isa.Permute)
    b.tensor("input", 0, _view(op, xs, groups_in))
    out4 = _place([math.prod(xs[groups_in[j][0] : groups_in[j][1]]) for j in gperm])
    b.tensor("output", -1, out4)
    b.set(order=(order[0], order[1], order[2], order[3]))
    return b.done()


_REDUCE_MODES = {
    "reduce_mean": isa.ReduceMode.MEAN,
    "reduce_mean_f": isa.ReduceMode.MEAN,
    "reduce_sum_f": isa.ReduceMode.SUM,
    "reduce_max": isa.ReduceMode.MAX,
    "reduce_min": isa.ReduceMode.MIN,
}


def _reduce(op: Any) -> Lowered:
    name, p = tiu.command_for(op)
    xs = _shape(op, op.operands[0])
    axes = {int(a) for a in p["axes"]}
    groups = _merge(xs, [xs], lambda a, i: (a in axes) == (i in axes))
    view = _view(op, xs, groups)
    red = {_pos(groups, a) for a in axes}
    out = tuple(1 if i in red else d for i, d in enumerate(view))
    if not red or len(xs) == 0:
        raise _no_form(op, "a Reduce over no dims")
    b = _Builder(op, isa.Reduce)
    b.tensor("input", 0, view)
    b.tensor("output", -1, (out[0], out[1], out[2], out[3]))
    b.set(mode=_REDUCE_MODES[name], axes=sum(1 << i for i in red))
    if name == "reduce_mean":
        b.set(input_zp=int(p["x_zp"]), multiplier=int(p["multiplier"]), rshift=int(p["rshift"]))
        _int_out(b, p)
    return b.done()


def _softmax(op: Any) -> Lowered:
    _, p = tiu.command_for(op)
    shape = _shape(op, op.results[0])
    if not shape:
        raise _no_form(op, "a softmax of a scalar")
    axis = int(p["axis"])
    groups = _merge(shape, [shape], _separate(axis))
    b = _Builder(op, isa.Softmax)
    view = _view(op, shape, groups)
    b.tensor("input", 0, view)
    b.tensor("output", -1, view)
    b.set(axis=_pos(groups, axis), log=bool(p["log"]))
    return b.done()


def _layer_norm(op: Any) -> Lowered:
    _, p = tiu.command_for(op)
    xs = _shape(op, op.operands[0])
    axis = int(p["axis"])
    if not 0 <= axis < len(xs):
        raise _no_form(op, f"a LayerNorm axis {axis} of a rank-{len(xs)} value")
    if len(xs) <= 4:
        groups: Groups = [(i, i + 1) for i in range(len(xs))]
    else:  # the leading dims as one, the normalized ones as one
        groups = [(0, axis), (axis, len(xs))] if axis else [(0, len(xs))]
    view = _view(op, xs, groups)
    ax4 = _pos(groups, axis)
    b = _Builder(op, isa.LayerNorm)
    b.tensor("input", 0, view)
    b.tensor("output", -1, view)
    b.set(axis=ax4, epsilon=float(p["epsilon"]))
    affine = (1,) * ax4 + view[ax4:]
    norm = xs[axis:]
    for field, v in (("gamma", op.operands[1]), ("beta", op.operands[2])):
        if isinstance(v.type, NoneType):
            continue
        vs = _shape(op, v)
        if _strip_ones(vs) == _strip_ones(norm):  # the normalized shape, give or take leading 1s
            b.tensor(field, 1 if field == "gamma" else 2, (affine[0], affine[1], affine[2], affine[3]))
            continue
        arr = _constant(v)
        if arr is None or np.broadcast_shapes(arr.shape, norm) != norm:
            raise _no_form(
                op, f"a LayerNorm {field} {list(vs)} that is not the normalized shape {list(norm)}"
            )
        b.param(field, np.broadcast_to(arr, norm).reshape(affine))
    return b.done()


def _attention(op: Any) -> Lowered:
    _, p = tiu.command_for(op)
    q, k, v = (_shape(op, x) for x in op.operands[:3])
    b = _Builder(op, isa.Attention)
    b.tensor("query", 0, (q[0], q[1], q[2], q[3]))
    b.tensor("key", 1, (k[0], k[1], k[2], k[3]))
    b.tensor("value", 2, (v[0], v[1], v[2], v[3]))
    if not isinstance(op.operands[3].type, NoneType):
        ms = _aligned(_shape(op, op.operands[3]), 4)
        full = (q[0], q[1], q[2], k[2])
        if any(d not in (1, f) for d, f in zip(ms, full)):
            raise _no_form(op, f"an attention mask {list(ms)} that does not broadcast to {list(full)}")
        b.tensor("mask", 3, (ms[0], ms[1], ms[2], ms[3]))
    ys = _shape(op, op.results[0])
    b.tensor("output", -1, (ys[0], ys[1], ys[2], ys[3]))
    b.set(scale=float(p["scale"]))
    return b.done()


_LOWER: dict[str, Callable[[Any], Lowered]] = {
    "tpu.Conv": _conv,
    "tpu.MatMul": _matmul,
    "tpu.Add": _eltwise,
    "tpu.Sub": _eltwise,
    "tpu.Mul": _eltwise,
    "tpu.Max": _eltwise,
    "tpu.Min": _eltwise,
    "tpu.Div": _eltwise,
    "tpu.MaxPool": _pool,
    "tpu.AvgPool": _pool,
    "tpu.Reduce": _reduce,
    "tpu.Cast": _cast,
    "tpu.Requant": _requant,
    "tpu.Lut": _lut,
    "tpu.Lut16": _lut16,
    "tpu.Permute": _permute,
    "tpu.Softmax": _softmax,
    "tpu.LayerNorm": _layer_norm,
    "tpu.Attention": _attention,
}
for _name in tiu.ACTIVATIONS:
    _LOWER["tpu." + _name] = _active


def lower_op(op: Operation) -> Lowered:
    """The TIU command that computes ``op`` (a ``tpu`` op); a :class:`LaminaError` naming the op
    when there is none (it then runs on the host CPU)."""
    fn = _LOWER.get(op.name)
    if fn is None:
        raise _no_form(op, "the TIU has no form of this op")
    try:
        return fn(op)
    except LaminaError as e:
        msg = str(e)
        if op.name in msg:
            raise
        raise _no_form(op, msg) from None


def build_command(lowered: Lowered, tensors: Mapping[str, isa.Tensor], **head: int) -> isa.TiuCommand:
    """The record of ``lowered`` with its tensor fields placed at ``tensors`` (every field of
    ``operands`` and ``params``) and head fields ``head`` (``id``, ``wait``, ``group``)."""
    names = set(lowered.operands) | set(lowered.params)
    if set(tensors) != names:
        raise LaminaError(
            f"{lowered.cls.__name__}: tensors for {sorted(tensors)}, the command has {sorted(names)}"
        )
    return lowered.cls(**lowered.fields, **tensors, **head)  # type: ignore[arg-type]

"""Per-channel planning: which activations get per-axis quantized types.

A value whose producer carries ``lamina.channel_th`` (outlier channels, from the table's
``#channel_th``) gets ``!quant.uniform<i8:f32:axis, {th_c / 127, ...}>`` when its producer and
every user can carry per-channel scales: a MatMul with a constant weight (output channels = the
weight's columns; an input with per-channel scales along K is folded into the weight,
``W'[k, n] = W[k, n] * s_x[k]``, then quantized per column), Add/Sub (one multiplier per input and
channel), float ops and function results (casts). A Concat whose inputs' scales differ gets a
per-axis result of its own at lowering (:mod:`..families.concat`), not planned here.

Rank-4 (convolutional) values along axis 1, on targets that take them (``conv4``): producers a
Conv with a constant filter (its requant is per output channel anyway), Add/Sub, a Mul of two
operands (one multiplier per channel) and float ops; users a Conv reading it as its input (the
scales folded into the filter along its input-channel axis), Add/Sub and Mul whose result is
per-channel on the same axis, float ops; any other INT8 user reads it through a per-channel
``tpu.Requant`` to its per-tensor type (every family's ``qin``), kept only when at least one user
takes the scales.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from lamina.dialects.quant import CalibratedQuantizedType, UniformQuantizedPerAxisType
from lamina.dialects.top import elementwise as top_ew
from lamina.dialects.top import nn as top_nn
from lamina.ir.core import Operation, Value
from lamina.ir.types import RankedTensorType, Type

from .policy import elem

_ADD_SUB = (top_ew.AddOp, top_ew.SubOp)


def plan_per_axis(
    root: Operation,
    int8_op: Callable[[Operation], bool],
    float_op: Callable[[Operation], bool],
    const_matrix: Callable[[Value], bool],
    channel_op: Callable[[Operation, str], bool] = lambda op, role: False,
    conv4: bool = False,
    const_filter: Callable[[Value], bool] = lambda v: False,
) -> dict[Value, Type]:
    """The values that get per-channel quantized types: those with ``lamina.channel_th`` whose
    producer can produce and whose every user can consume per-channel scales along the axis
    (Add/Sub users only when their own result is per-channel), to a fixed point. ``int8_op``: the op
    lowers in INT8 mode; ``float_op``: it surely runs in float; ``const_matrix``: the value is a
    constant 2-d float matrix; ``channel_op(op, "out" | "in")``: the op's integer form produces /
    reads (as its first operand) per-channel scales along the last axis; ``conv4``: rank-4 values
    along axis 1 are planned (see the module doc), ``const_filter``: the value is a constant float
    Conv filter."""
    # the pass package imports this module: read its attribute names once it is loaded
    from ..transforms.import_calibration import CHANNEL_AXIS_ATTR, CHANNEL_TH_ATTR

    cand: dict[Value, tuple[int, RankedTensorType]] = {}
    for op in root.walk_ops():
        th = op.attributes.get(CHANNEL_TH_ATTR)
        ax = op.attributes.get(CHANNEL_AXIS_ATTR)
        if th is None or ax is None or not op.results or op.dialect_name != "top":
            continue
        v = op.results[0]
        e, t = elem(v.type), v.type
        if not (isinstance(e, CalibratedQuantizedType) and isinstance(t, RankedTensorType)):
            continue
        axis = int(ax.value)
        nd = len(t.shape)
        arr = np.asarray(th.to_numpy(), np.float64).reshape(-1)
        if not (0 <= axis < nd) or t.shape[axis] != arr.size:
            continue
        conv_axis = nd == 4 and axis == 1
        if nd == 4 and not (conv4 and conv_axis):
            continue
        # a MatMul or Add kept in float (a qtable's) casts its result per channel like any float op
        if conv_axis:
            ok = _conv4_producer(op, int8_op, const_filter) or float_op(op)
        elif isinstance(op, top_nn.MatMulOp):
            ok = (
                int8_op(op) and const_matrix(op.operands[1]) and axis == nd - 1 and not op.attr("do_relu")
            ) or float_op(op)
        elif isinstance(op, _ADD_SUB):
            ok = (int8_op(op) and len(op.operands) <= 2) or float_op(op)
        elif channel_op(op, "out"):
            ok = axis == nd - 1
        else:
            ok = float_op(op)
        if not ok:
            continue
        scales = np.where(arr > 0, arr, 1e-6) / 127.0
        qt = UniformQuantizedPerAxisType(
            8, True, e.expressed_type, [float(x) for x in scales], [0] * arr.size, axis, -128, 127
        )
        cand[v] = (axis, RankedTensorType(t.shape, qt))

    def carries4(u: Operation, idx: int, v: Value) -> bool:
        """A rank-4 user that takes the per-channel scales (rather than a requant)."""
        if isinstance(u, top_nn.ConvOp) and int8_op(u):
            return idx == 0 and const_filter(u.operands[1])
        # a Conv kept in float (a qtable's) reads it through a per-channel cast like any float op
        if isinstance(u, (*_ADD_SUB, top_ew.MulOp)) and int8_op(u):
            r = u.results[0]
            return r in cand and cand[r][0] == 1 and len(r.type.shape) == 4  # type: ignore[attr-defined]
        return float_op(u)

    def user_ok(u: Operation, idx: int, v: Value, axis: int) -> bool:
        nd = len(v.type.shape)  # type: ignore[attr-defined]
        if nd == 4:  # any other user through a requant to per-tensor
            return True
        if isinstance(u, top_nn.MatMulOp):
            if idx == 0 and int8_op(u) and const_matrix(u.operands[1]) and axis == nd - 1:
                return True
        elif idx == 0 and axis == nd - 1 and channel_op(u, "in"):
            return True
        elif isinstance(u, _ADD_SUB) and int8_op(u):
            r = u.results[0]
            if r in cand and cand[r][0] == axis + len(r.type.shape) - nd:  # type: ignore[attr-defined]
                return True
        return float_op(u)

    changed = True
    while changed:
        changed = False
        for v in list(cand):
            axis = cand[v][0]
            if not all(user_ok(u.owner, u.index, v, axis) for u in v.uses) or (
                len(v.type.shape) == 4  # type: ignore[attr-defined]
                and not any(carries4(u.owner, u.index, v) for u in v.uses)
            ):
                del cand[v]
                changed = True
    return {v: t for v, (_, t) in cand.items()}


def _conv4_producer(
    op: Operation,
    int8_op: Callable[[Operation], bool],
    const_filter: Callable[[Value], bool],
) -> bool:
    """Whether ``op``'s integer form produces a rank-4 result per channel along axis 1."""
    if not int8_op(op):
        return False
    if isinstance(op, top_nn.ConvOp):
        lim = op.attr("relu_limit")
        return const_filter(op.operands[1]) and not (op.attr("do_relu") and lim is not None and lim > 0)
    if isinstance(op, _ADD_SUB):
        return len(op.operands) <= 2
    if isinstance(op, top_ew.MulOp):
        return len(op.operands) == 2
    return False

"""``npu-address-assign``: every tensor in DDR gets its address.

DDR holds two regions: the **weights** (every ``npu.Weight``, in order, 64-byte aligned, from address
0) and, from the next 4 KiB boundary, the **activations**: the model's inputs, every group's,
copy's and host op's results. An ``npu.Reshape`` is the same bytes as its operand (an alias).
Activations reuse memory by liveness: a buffer lives from its producer to its last reader (through
aliases); inputs from the start, outputs to the end; buffers are placed largest first at the lowest
64-byte-aligned address free over their whole life.

Written down as ``npu.ddr = array<i64: address per result>`` on each op (-1 for a result that is not
a tensor in DDR), ``npu.arg_ddr`` on the function (its arguments), and ``npu.weight_bytes``,
``npu.activation_base``, ``npu.activation_bytes`` on the module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.func.ops import FuncOp
from lamina.ir.attributes import DenseArrayAttr, IntegerAttr
from lamina.ir.core import Operation, Value
from lamina.ir.traits import ConstantLike, ReturnLike
from lamina.ir.types import RankedTensorType, i64
from lamina.passes import Pass, Statistic, register_pass

from ..dialect import ReshapeOp, WeightOp, np_dtype

__all__ = ["ALIGN", "AddressAssign", "assign_addresses", "nbytes", "root_of"]

#: alignment of every tensor in DDR
ALIGN = 64
#: where the activation region starts: the next multiple of this after the weights
REGION_ALIGN = 4096


def _align(x: int, to: int) -> int:
    return -(-x // to) * to


def nbytes(t: Any) -> int:
    """Bytes of a static tensor type's elements (0 for anything else)."""
    if not isinstance(t, RankedTensorType) or not t.has_static_shape:
        return 0
    try:
        return int(t.num_elements) * np.dtype(np_dtype(t)).itemsize
    except Exception:
        return 0


def root_of(v: Value) -> Value:
    """The value whose bytes ``v`` is (through ``npu.Reshape`` aliases)."""
    d = v.defining_op()
    while isinstance(d, ReshapeOp):
        v = d.operands[0]
        d = v.defining_op()
    return v


def assign_addresses(func: Operation) -> dict[str, int]:
    """Assign the function's DDR addresses (see the module docstring); returns the regions' sizes."""
    block = func.regions[0].blocks[0]
    ops = list(block.ops)
    w = 0
    for op in ops:
        if isinstance(op, WeightOp):
            w = _align(w, ALIGN)
            op.set_attr("npu.ddr", DenseArrayAttr(i64, [w]))
            w += nbytes(op.results[0].type)
    base = _align(w, REGION_ALIGN)
    end = len(ops) + 1
    live: dict[Value, list[int]] = {}
    order: list[Value] = []
    for a in block.args:
        if nbytes(a.type):
            live[a] = [-1, -1]
            order.append(a)
    for k, op in enumerate(ops):
        for v in op.operands:
            r = root_of(v)
            if r in live:
                live[r][1] = max(live[r][1], end if op.has_trait(ReturnLike) else k)
        if isinstance(op, (WeightOp, ReshapeOp)) or (op.has_trait(ConstantLike) and not op.operands):
            continue
        for r in op.results:
            if nbytes(r.type):
                live[r] = [k, k]
                order.append(r)
    # largest first, lowest free address over the whole life
    placed: list[tuple[int, int, int, int]] = []  # start, stop, first, last
    addr: dict[Value, int] = {}
    for v in sorted(order, key=lambda x: (-nbytes(x.type), order.index(x))):
        size = _align(nbytes(v.type), ALIGN)
        a0, a1 = live[v]
        busy = sorted((s, e) for s, e, first, last in placed if first <= a1 and a0 <= last)
        at = 0
        for s, e in busy:
            if at + size <= s:
                break
            at = max(at, _align(e, ALIGN))
        addr[v] = at
        placed.append((at, at + size, a0, a1))
    act = max((e for _, e, _, _ in placed), default=0)

    def ddr(v: Value) -> int:
        r = root_of(v)
        if isinstance(r.defining_op(), WeightOp):
            return int(r.defining_op().get_attr("npu.ddr").values[0])  # type: ignore[union-attr]
        return base + addr[r] if r in addr else -1

    func.set_attr("npu.arg_ddr", DenseArrayAttr(i64, [ddr(a) for a in block.args]))
    for op in ops:
        if isinstance(op, WeightOp) or not op.results:
            continue
        if op.has_trait(ConstantLike) and not op.operands:
            continue
        op.set_attr("npu.ddr", DenseArrayAttr(i64, [ddr(r) for r in op.results]))
    return {"weight_bytes": w, "activation_base": base, "activation_bytes": act}


@register_pass
class AddressAssign(Pass):
    name = "npu-address-assign"
    summary = "DDR addresses: weights, then activations reusing memory by liveness"
    display_name = "AddressAssignPass"
    op_name = "builtin.module"

    weight_bytes = Statistic("weight-bytes", "Bytes of weights in DDR")
    activation_bytes = Statistic("activation-bytes", "Bytes of activation memory in DDR")

    def run_on_operation(self, op: Operation) -> Any:
        funcs = [o for o in op.walk_ops(FuncOp) if o.regions and o.regions[0].blocks]
        for f in funcs:
            sizes = assign_addresses(f)
            self.weight_bytes += sizes["weight_bytes"]
            self.activation_bytes += sizes["activation_bytes"]
            for k, v in sizes.items():
                op.set_attr(f"npu.{k}", IntegerAttr(v, i64))

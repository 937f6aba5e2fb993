"""``npu-address-assign``: every tensor in DDR gets its address.

DDR holds two regions: the **weights** (every ``npu.Weight``, in order, 64-byte aligned, from address
0) and, from the next 4 KiB boundary, the **activations**: the model's inputs, every group's,
copy's and host op's results. An ``npu.Reshape`` is the same bytes as its operand (an alias).
Activations reuse memory by liveness: a buffer lives from its producer to its last reader (through
aliases); inputs from the start, outputs to the end; buffers are placed largest first at the lowest
64-byte-aligned address free over their whole life.

Copies that need not move anything (:func:`find_views`: a split's parts read where they are, a
concatenation's inputs stored in place by their groups) make **views**: a value that is a strided
part of another's buffer, which then lives as long as every view of it.

Written down as ``npu.ddr = array<i64: address per result>`` on each op (-1 for a result that is not
a tensor in DDR; a view's address is that of its first element), ``npu.strides = {"<result>" =
array<i64: element strides>}`` for the results that are views, ``npu.view = true`` on a copy that
is one and ``npu.in_place = array<i64: input indices>`` on a copy whose inputs are written in place,
``npu.arg_ddr`` on the function (its arguments), and ``npu.weight_bytes``, ``npu.activation_base``,
``npu.activation_bytes`` on the module.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lamina.dialects.func.ops import FuncOp
from lamina.ir.attributes import BoolAttr, DenseArrayAttr, DictionaryAttr, IntegerAttr
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


def _contiguous(shape: tuple[int, ...]) -> tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


View = tuple[Value, int, tuple[int, ...]]  # root, element offset, element strides (one per dim)


def find_views(ops: list[Operation]) -> tuple[dict[Value, View], dict[int, list[int]], set[int]]:
    """The copies that need not move anything, as TPU-MLIR's layer groups write a concatenation's
    inputs in place and read a split's parts where they are:

    * a copy whose result is a strided view of its one input (Split, Slice, a permutation...) and
      whose readers are all layer groups (which load through any strides) is **a view**: no move;
    * an input of a copy (Concat) that a layer group stores, that only layer groups and this copy
      read, and whose elements form a strided view of the copy's result, is **written in place**:
      the group stores it there, and the copy moves the other inputs only.

    Returns the views (value → its root buffer, element offset, strides), the in-place inputs of each
    copy (by ``id``) and the copies that are views."""
    from ..dialect import CopyOp, GroupOp
    from ..moves import _affine, copy_map

    returned: set[Value] = set()
    for op in ops:
        if op.has_trait(ReturnLike):
            returned = {root_of(v) for v in op.operands}
    views: dict[Value, View] = {}
    in_place: dict[int, list[int]] = {}
    elided: set[int] = set()
    for op in ops:
        if not isinstance(op, CopyOp):
            continue
        out = op.results[0]
        shapes = [tuple(int(d) for d in v.type.shape) for v in op.inputs]  # type: ignore[attr-defined]
        oshape = tuple(int(d) for d in out.type.shape)  # type: ignore[attr-defined]
        m = copy_map(op.move_list(), shapes, math.prod(oshape))
        if (
            len(op.inputs) == 1
            and out not in returned
            and root_of(op.inputs[0]) not in views
            and out.users
            and all(isinstance(u, GroupOp) for u in out.users)
        ):
            a = _affine(m.reshape(oshape)) if m.size else None
            if a is not None:
                views[out] = (root_of(op.inputs[0]), a[0], a[1])
                elided.add(id(op))
                continue
        bases = np.cumsum([0] + [math.prod(s) for s in shapes])
        done = []
        for i, x in enumerate(op.inputs):
            d = x.defining_op()
            if (
                list(op.inputs).count(x) != 1
                or x in returned
                or x in views
                or not isinstance(d, GroupOp)
                or any(not (u is op or isinstance(u, GroupOp)) for u in x.users)
            ):
                continue
            sel = (m >= bases[i]) & (m < bases[i + 1])
            if int(sel.sum()) != math.prod(shapes[i]):
                continue  # some element is written twice (a broadcast, an upsampling): not a placement
            pos = np.full(math.prod(shapes[i]), -1, dtype=np.int64)
            pos[m[sel] - bases[i]] = np.nonzero(sel)[0]
            if np.any(pos < 0):
                continue
            a = _affine(pos.reshape(shapes[i]))
            if a is not None:
                views[x] = (out, a[0], a[1])
                done.append(i)
        if done:
            in_place[id(op)] = done
    return views, in_place, elided


def used_values(op: Operation) -> list[Value]:
    """The values ``op`` reads: its operands, and those its regions read from outside it (an If's
    branches read the function's values directly)."""
    out = list(op.operands)
    if op.regions:
        for inner in op.walk_ops(Operation):
            if inner is op:
                continue
            for v in inner.operands:
                d = v.defining_op()
                # defined inside: by an op within `op`, or a block argument of a block within it
                where = d if d is not None else v.owner.parent_op()  # type: ignore[union-attr]
                if (where is None or not op.is_ancestor(where)) and v not in out:
                    out.append(v)
    return out


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
    views, in_place, elided = find_views(ops)

    def buffer_of(v: Value) -> Value:
        """The buffer holding ``v``'s bytes: through reshapes and views, to a value of its own."""
        r = root_of(v)
        while r in views:
            r = root_of(views[r][0])
        return r

    end = len(ops) + 1
    live: dict[Value, list[int]] = {}
    order: list[Value] = []

    def touch(v: Value, k: int) -> None:
        b = buffer_of(v)
        if b in live:
            live[b][0] = min(live[b][0], k)
            live[b][1] = max(live[b][1], k)

    for a in block.args:
        if nbytes(a.type):
            live[a] = [-1, -1]
            order.append(a)
    for k, op in enumerate(ops):
        if isinstance(op, (WeightOp, ReshapeOp)) or (op.has_trait(ConstantLike) and not op.operands):
            continue
        for r in op.results:
            if nbytes(r.type) and buffer_of(r) is r:
                live[r] = [k, k]
                order.append(r)
    for k, op in enumerate(ops):
        for v in used_values(op):  # an If's branches read the function's values too
            touch(v, end if op.has_trait(ReturnLike) else k)
        for r in op.results:
            if r in views:  # a group writing in place: its buffer lives from here
                touch(r, k)
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
        d = r.defining_op()
        if isinstance(d, WeightOp):
            return int(d.get_attr("npu.ddr").values[0])  # type: ignore[union-attr]
        if r in views:
            src, off, _ = views[r]
            return ddr(src) + off * np.dtype(np_dtype(r.type)).itemsize
        return base + addr[r] if r in addr else -1

    func.set_attr("npu.arg_ddr", DenseArrayAttr(i64, [ddr(a) for a in block.args]))
    for op in ops:
        if isinstance(op, WeightOp) or not op.results:
            continue
        if op.has_trait(ConstantLike) and not op.operands:
            continue
        op.set_attr("npu.ddr", DenseArrayAttr(i64, [ddr(r) for r in op.results]))
        strided = {
            str(i): DenseArrayAttr(i64, list(views[r][2])) for i, r in enumerate(op.results) if r in views
        }
        if strided:
            op.set_attr("npu.strides", DictionaryAttr(strided))
        if id(op) in elided:
            op.set_attr("npu.view", BoolAttr(True))
        if id(op) in in_place:
            op.set_attr("npu.in_place", DenseArrayAttr(i64, in_place[id(op)]))
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

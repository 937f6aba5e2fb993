"""``convert-tpu-to-npu``: the ``tpu`` level to the NPU's (``npu`` dialect).

Every op of the function is converted where the NPU has a form for it, one rule per kind:

* an op with a TIU command (:func:`lamina.targets.npu.records.lower_op`) becomes that command's op
  (``npu.Conv``, ``npu.Eltwise``, ...) on 4-d views of its values, ``npu.Reshape`` between a value's
  own shape and the view (free in DDR; chains fold), and its constants become ``npu.Weight`` ops
  **reordered to the hardware layout** the record reads (conv filters ``(1, Cout, Cin/g, kh*kw)``,
  biases and per-channel requantization parameters as small tensors, LUT tables);
* a pure reshape (Reshape, Flatten, Squeeze, Unsqueeze) becomes ``npu.Reshape``;
* a data-movement op (Slice, Concat, Split, Permute, Tile, Expand, nearest Interp, DepthToSpace,
  SpaceToDepth) becomes ``npu.Copy``: GDMA moves found from the op's own reference
  (:mod:`lamina.targets.npu.moves`);
* ``top.Input`` (a marker of the model's inputs) goes;
* anything else — no TIU form, a dtype the chip does not compute in, regions (If/Loop) — stays as it
  is and will run on the host CPU (a CPU subnet, ``npu-partition`` says which).

The result executes on the reference interpreter exactly as the ``tpu`` module did (bit for bit:
each command op runs the simulator's TIU kernel, tested against the ``tpu`` ops).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.func.ops import FuncOp
from lamina.dialects.top.base import const_value, is_none
from lamina.dialects.top.transforms.utils import WeightFactory
from lamina.ir.attributes import DenseArrayAttr, dtype_to_element_type
from lamina.ir.builder import Builder
from lamina.ir.constants import holds_constant
from lamina.ir.core import Operation, Value
from lamina.ir.location import Location
from lamina.ir.naming import result_names
from lamina.ir.traits import ConstantLike
from lamina.ir.types import RankedTensorType, ShapedType, i64
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.support.errors import LaminaError

from .arch import Chip, load_chip
from .dialect import COMMAND_OPS, CopyOp, ReshapeOp, WeightOp, dtype_name, reshaped_type
from .moves import index_map, moves_of

__all__ = ["ConvertTpuToNpu", "convert_tpu_to_npu", "MOVEMENT", "RESHAPES"]

#: tpu ops that only change a shape (free in DDR)
RESHAPES = ("tpu.Reshape", "tpu.Flatten", "tpu.Squeeze", "tpu.Unsqueeze")
#: tpu ops that move data (GDMA moves in DDR)
MOVEMENT = (
    "tpu.Slice",
    "tpu.Concat",
    "tpu.Split",
    "tpu.Permute",
    "tpu.Tile",
    "tpu.Expand",
    "tpu.Interp",
    "tpu.DepthToSpace",
    "tpu.SpaceToDepth",
)


class _Converter:
    def __init__(self, func: Operation, chip: Chip, resources: Any) -> None:
        self.func = func
        self.chip = chip
        self.weights = WeightFactory(func.parent_op() or func, resources)
        self.stats = {"commands": 0, "moves": 0, "host": 0}
        self.host: list[tuple[str, str]] = []  # (op name, why) of ops left for the host
        self.views: dict[tuple[Value, tuple[int, ...]], Value] = {}

    # -- helpers ------------------------------------------------------------------------------------

    def reshape(self, b: Builder, v: Value, shape: tuple[int, ...], loc: Location) -> Value:
        t = v.type
        if tuple(t.shape) == tuple(shape):  # type: ignore[attr-defined]
            return v
        key = (v, tuple(shape))
        if key in self.views:
            return self.views[key]
        nt = reshaped_type(t, shape)
        if nt is None:
            raise LaminaError(f"'{t}' has no view of shape {list(shape)} keeping its per-channel axis")
        d = v.defining_op()
        at = Builder.after(d) if d is not None else Builder.at_start(v.owner)  # type: ignore[arg-type]
        r = at.insert(ReshapeOp.build(input=v, output=nt, loc=loc)).results[0]
        self.views[key] = r
        return r

    def weight(self, b: Builder, array: np.ndarray, hint: str, loc: Location) -> Value:
        a = np.ascontiguousarray(array)
        et = dtype_to_element_type(a.dtype)
        attr = self.weights.attr(a, hint, et)
        return b.insert(WeightOp.build(output=attr.type, value=attr, loc=loc)).results[0]

    def computes(self, op: Operation) -> bool:
        """Whether the chip computes in every dtype the op's values have (storage dtypes)."""
        for v in (*op.operands, *op.results):
            if not isinstance(v.type, ShapedType) or is_none(v):
                continue
            d = v.defining_op()
            if d is not None and d.has_trait(ConstantLike):
                continue
            try:
                name = dtype_name(v.type)
            except LaminaError:
                return False
            if self.chip.compute_dtype(name) not in self.chip.dtypes:
                return False
        return True

    # -- the rules ----------------------------------------------------------------------------------

    def convert(self) -> None:
        block = self.func.regions[0].blocks[0]
        for op in list(block.ops):
            if op.name == "top.Input":
                op.results[0].replace_all_uses_with(op.operands[0])
                op.erase()
                continue
            if op.name in RESHAPES:
                self._reshape(op)
            elif op.name in MOVEMENT and self._copy(op):
                pass
            elif op.dialect_name == "tpu" and not op.has_trait(ConstantLike) and op.results:
                self._command(op)

    def _reshape(self, op: Operation) -> None:
        r = op.results[0]
        if not (isinstance(r.type, RankedTensorType) and r.type.has_static_shape):
            self.host.append((op.name, "a dynamic shape"))
            return
        b = Builder.before(op)
        v = self.reshape(b, op.operands[0], tuple(r.type.shape), op.location)
        r.replace_all_uses_with(v)
        op.erase()

    def _copy(self, op: Operation) -> bool:
        tc = getattr(op, "top_class", None)
        data = list(op.operands) if op.name == "tpu.Concat" else [op.operands[0]]
        rest = [] if op.name == "tpu.Concat" else list(op.operands[1:])
        if tc is None or any(
            not isinstance(v.type, RankedTensorType) or not v.type.has_static_shape for v in data
        ):
            return False
        consts = [None if is_none(v) else const_value(v) for v in rest]
        if any(c is None and not is_none(v) for c, v in zip(consts, rest)):
            return False
        if any(isinstance(r.type, RankedTensorType) and not r.type.has_static_shape for r in op.results):
            return False

        def run(arrays: list[np.ndarray]) -> Any:
            return tc.execute(op, [*arrays, *consts])

        shapes = [tuple(v.type.shape) for v in data]  # type: ignore[attr-defined]
        maps = index_map(run, shapes)
        if maps is None:
            return False
        plans = []
        for r, m in zip(op.results, maps):
            if not isinstance(r.type, RankedTensorType):
                continue
            mv = moves_of(m.reshape(r.type.shape), shapes)
            if mv is None:
                return False
            plans.append((r, mv))
        b = Builder.before(op)
        names = result_names(op)
        for r, mv in plans:
            used = sorted({m[0] for m in mv})
            remap = {old: new for new, old in enumerate(used)}
            flat: list[int] = []
            for i, so, sh, ss, do, ds in mv:
                flat += [remap[i], so, *sh, *ss, do, *ds]
            loc = op.location if len(op.results) == 1 else _named(op, names[r.index])
            new = b.insert(
                CopyOp.build(
                    inputs=[data[i] for i in used], output=r.type, moves=DenseArrayAttr(i64, flat), loc=loc
                )
            )
            r.replace_all_uses_with(new.results[0])
        op.erase()
        self.stats["moves"] += 1
        return True

    def _command(self, op: Operation) -> None:
        from .records import lower_op

        try:
            low = lower_op(op)
        except LaminaError as e:
            self.host.append((op.name, str(e)))
            self.stats["host"] += 1
            return
        if not self.computes(op):
            self.host.append((op.name, f"the chip {self.chip.name} does not compute in its dtype"))
            self.stats["host"] += 1
            return
        cls = COMMAND_OPS[low.cls]
        res = op.results[0]
        out_shape = low.operands["output"].shape
        out_t = reshaped_type(res.type, out_shape)
        if out_t is None or any(
            reshaped_type(op.operands[od.value].type, od.shape) is None
            for n, od in low.operands.items()
            if n != "output"
        ):
            self.host.append((op.name, "a per-channel axis its command's view does not keep"))
            self.stats["host"] += 1
            return
        b = Builder.before(op)
        kwargs: dict[str, Any] = {}
        for name, od in low.operands.items():
            if name == "output":
                continue
            kwargs[name] = self.reshape(b, op.operands[od.value], tuple(od.shape), op.location)
        base = result_names(op)[0] if op.results else "w"
        for name, arr in low.params.items():
            kwargs[name] = self.weight(b, np.asarray(arr), f"{base}_{name}", op.location)
        for k, v in low.fields.items():
            kwargs[k] = v.name if hasattr(v, "name") and not isinstance(v, (int, float, str, tuple)) else v
        new = b.insert(cls.build(output=out_t, loc=op.location, **_fields(cls, kwargs)))
        res.replace_all_uses_with(self.reshape(b, new.results[0], tuple(res.type.shape), op.location))  # type: ignore[attr-defined]
        op.erase()
        self.stats["commands"] += 1


def _fields(cls: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """Enum members by name (the op's property spelling)."""
    out = {}
    for k, v in kwargs.items():
        spec = cls.scalar_fields.get(k)
        if spec is not None and spec[1] is not None and not isinstance(v, str):
            v = spec[1](v).name
        out[k] = v
    return out


def _named(op: Operation, name: str) -> Location:
    from lamina.ir.location import NameLoc

    inner: Location | None = op.location
    if isinstance(inner, NameLoc):
        inner = inner.child
    return NameLoc(name, inner)


def _fold_reshapes(func: Operation) -> None:
    """``Reshape(Reshape(x))`` → ``Reshape(x)``; a reshape to its operand's type → its operand; dead
    reshapes, weights and constants removed."""
    block = func.regions[0].blocks[0]
    changed = True
    while changed:
        changed = False
        for op in list(block.ops):
            if isinstance(op, ReshapeOp):
                src = op.operands[0]
                d = src.defining_op()
                if isinstance(d, ReshapeOp):
                    op.set_operand(0, d.operands[0])
                    src = op.operands[0]
                    changed = True
                if src.type is op.results[0].type:
                    op.results[0].replace_all_uses_with(src)
                    op.erase()
                    changed = True
                    continue
            if (
                op.results
                and not any(r.has_uses for r in op.results)
                and (isinstance(op, (ReshapeOp, WeightOp)) or holds_constant(op))
            ):
                op.erase()
                changed = True


def _fuse_copies(func: Operation) -> int:
    """A copy reading another copy's result reads that copy's inputs directly, where the composed
    movement is still a short list of moves (a split's part concatenated moves once, not twice);
    returns how many copies were rewritten. The first copy goes when nothing else reads it."""
    from .moves import copy_map

    block = func.regions[0].blocks[0]
    fused = 0
    for op in list(block.ops):
        if not isinstance(op, CopyOp) or not any(isinstance(v.defining_op(), CopyOp) for v in op.inputs):
            continue
        out = op.results[0]
        shapes = [tuple(int(d) for d in v.type.shape) for v in op.inputs]  # type: ignore[attr-defined]
        m = copy_map(op.move_list(), shapes, out.type.num_elements)  # type: ignore[attr-defined]
        bases = np.cumsum([0] + [int(np.prod(s)) for s in shapes])
        # every output element as (source value, flat index in it), through the inner copies
        srcs: list[Value] = []
        which = np.empty(m.size, dtype=np.int64)
        flat = np.empty(m.size, dtype=np.int64)
        owner = np.searchsorted(bases, m, side="right") - 1

        def source(w: Value, srcs: list[Value] = srcs) -> int:
            if w not in srcs:
                srcs.append(w)
            return srcs.index(w)

        for i, v in enumerate(op.inputs):
            sel = owner == i
            d = v.defining_op()
            if isinstance(d, CopyOp):
                ishapes = [tuple(int(x) for x in w.type.shape) for w in d.inputs]  # type: ignore[attr-defined]
                inner = copy_map(d.move_list(), ishapes, v.type.num_elements)  # type: ignore[attr-defined]
                ib = np.cumsum([0] + [int(np.prod(s)) for s in ishapes])
                got = inner[m[sel] - bases[i]]
                iown = np.searchsorted(ib, got, side="right") - 1
                idx = np.array([source(w) for w in d.inputs], dtype=np.int64)
                which[sel] = idx[iown]
                flat[sel] = got - ib[iown]
            else:
                which[sel] = source(v)
                flat[sel] = m[sel] - bases[i]
        sshapes = [tuple(int(d) for d in v.type.shape) for v in srcs]  # type: ignore[attr-defined]
        sb = np.cumsum([0] + [int(np.prod(s)) for s in sshapes])
        composed = (sb[which] + flat).reshape(out.type.shape)  # type: ignore[attr-defined]
        mv = moves_of(composed, sshapes)
        if mv is None:
            continue
        moves: list[int] = []
        for i, so, sh, ss, do, ds in mv:
            moves += [i, so, *sh, *ss, do, *ds]
        new = Builder.before(op).insert(
            CopyOp.build(inputs=srcs, output=out.type, moves=DenseArrayAttr(i64, moves), loc=op.location)
        )
        out.replace_all_uses_with(new.results[0])
        olds = [v.defining_op() for v in op.inputs]
        op.erase()
        for d in olds:
            if isinstance(d, CopyOp) and d.parent is not None and not d.results[0].has_uses:
                d.erase()
        fused += 1
    return fused


def convert_tpu_to_npu(module: Operation, chip: Chip, resources: Any = None) -> dict[str, Any]:
    """Convert every function of ``module`` in place; returns statistics and the ops left for the host
    (``host``: ``(op name, why)`` pairs)."""
    stats: dict[str, Any] = {"commands": 0, "moves": 0, "host": 0, "host_ops": []}
    funcs = list(module.walk_ops(FuncOp))
    for func in funcs:
        if not func.regions or not func.regions[0].blocks:
            continue
        c = _Converter(func, chip, resources)
        c.convert()
        _fold_reshapes(func)
        _fuse_copies(func)
        for k in ("commands", "moves", "host"):
            stats[k] += c.stats[k]
        stats["host_ops"] += c.host
    return stats


@register_pass
class ConvertTpuToNpu(Pass):
    name = "convert-tpu-to-npu"
    summary = (
        "Lower tpu ops to NPU commands (weights reordered to the hardware layout), reshapes and GDMA copies"
    )
    display_name = "ConvertTpuToNpuPass"
    op_name = "builtin.module"

    chip = Option(str, "lnpu", "The chip: a shipped name (lnpu, lnpu-edge) or a chip JSON file")

    num_commands = Statistic("num-commands", "Ops lowered to TIU commands")
    num_moves = Statistic("num-moves", "Ops lowered to GDMA copies")
    num_host = Statistic("num-host", "Ops left for the host CPU")

    def run_on_operation(self, op: Operation) -> Any:
        try:
            chip = load_chip(self.chip)
        except LaminaError as e:
            op.emit_error(str(e))
            self.signal_failure()
            return
        mgr = self.context.resources if self.context is not None else None
        stats = convert_tpu_to_npu(op, chip, mgr)
        self.num_commands += stats["commands"]
        self.num_moves += stats["moves"]
        self.num_host += stats["host"]

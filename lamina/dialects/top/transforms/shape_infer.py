"""``top-shape-infer``: re-run every ``top`` op's ``infer_shapes`` and update the result types
(TPU-MLIR's ``--shape-infer``), then the enclosing functions' signatures; verify afterwards.

Types are propagated in program order, so a changed input shape (``input-shapes=1x3x32x32``)
flows through the whole function. An op whose inference gives an unranked result keeps its
current type; where no operand type changed, inferred dynamic dims do not overwrite known static
ones (inference only refines types then).

Inside regions (``top.If`` branches, loop bodies) an op whose inference fails is not an error: a
branch that is not taken for the given input shapes may not fit them (onnxruntime runs such models),
so the op's results become unranked there and the interpreter runs the branch on real shapes."""

from __future__ import annotations

from typing import Any

from lamina.ir.core import Block, Operation, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.naming import location_name
from lamina.ir.types import DYNAMIC, FunctionType, RankedTensorType, ShapedType, Type, UnrankedTensorType
from lamina.passes import Option, Pass, Statistic, register_pass


def _parse_shape(text: str) -> tuple[int, ...]:
    text = text.strip()
    if text in ("", "scalar"):
        return ()
    return tuple(DYNAMIC if d in ("?", "-1") else int(d) for d in text.split("x"))


def _refine(old: Type, new: Type, operands_changed: bool) -> Type:
    """The type to give a result whose current type is ``old`` and inferred type ``new``."""
    if not isinstance(new, ShapedType) or not new.has_rank:
        return old if isinstance(old, ShapedType) and old.has_rank else new
    if operands_changed or not isinstance(old, RankedTensorType) or not isinstance(new, RankedTensorType):
        return new
    if old.rank != new.rank or old.element_type is not new.element_type:
        return new
    dims = [o if (n == DYNAMIC and o != DYNAMIC) else n for o, n in zip(old.shape, new.shape)]
    if any(o != n for o, n in zip(old.shape, dims) if o != DYNAMIC and n != DYNAMIC):
        return new
    return RankedTensorType(dims, new.element_type, new.encoding)


class ShapeInference:
    """Walks ops in program order updating result types; records what changed."""

    def __init__(self) -> None:
        self.changed: set[Value] = set()
        self.num_updated = 0
        self.failed = False
        #: results made unranked inside regions because their inference failed
        self.unranked: set[Value] = set()

    def run_block(self, block: Block, in_region: bool = False) -> None:
        for op in list(block):
            for region in op.regions:
                for b in region.blocks:
                    self.run_block(b, in_region=True)
            self.run_op(op, in_region)

    def run_op(self, op: Operation, in_region: bool = False) -> None:
        infer = getattr(op, "infer_shapes", None)
        if infer is None or not op.results:
            return
        try:
            new_types = list(infer())
        except Exception as e:  # an op's failing inference code is a diagnostic, not a crash
            if in_region:
                self._unrank(op)
                return
            what = (
                ""
                if isinstance(e, (VerifyError, ValueError, IndexError, TypeError))
                else f"{type(e).__name__}: "
            )
            name = location_name(op.location)
            op.emit_error(f"shape inference failed{f' for tensor {name!r}' if name else ''}: {what}{e}")
            self.failed = True
            return
        if len(new_types) != len(op.results):
            return
        operands_changed = any(v in self.changed for v in op.operands)
        # in a region, results of an op reading a value left unranked there follow it (their old
        # static types were derived from shapes that could not be right)
        follow = in_region and any(v in self.unranked for v in op.operands)
        for r, t in zip(op.results, new_types):
            nt = _refine(r.type, t, operands_changed)
            if follow and isinstance(t, ShapedType) and not t.has_rank and isinstance(r.type, ShapedType):
                nt = UnrankedTensorType(r.type.element_type)
                self.unranked.add(r)
            if nt is not r.type:
                r.type = nt
                self.changed.add(r)
                self.num_updated += 1

    def _unrank(self, op: Operation) -> None:
        """Give ``op``'s tensor results unranked types (their shapes are known only at run time)."""
        for r in op.results:
            if isinstance(r.type, ShapedType) and r.type.has_rank:
                r.type = UnrankedTensorType(r.type.element_type)
                self.changed.add(r)
                self.unranked.add(r)
                self.num_updated += 1


def _set_input_shapes(func: Operation, shapes: list[tuple[int, ...]], inf: ShapeInference) -> bool:
    body = func.regions[0].blocks[0] if func.regions and func.regions[0].blocks else None
    if body is None:
        return True
    args = body.args
    if len(shapes) != len(args):
        func.emit_error(f"input-shapes gives {len(shapes)} shapes but the function has {len(args)} inputs")
        return False
    for a, s in zip(args, shapes):
        if not isinstance(a.type, ShapedType):
            continue
        nt = RankedTensorType(s, a.type.element_type)
        if nt is not a.type:
            a.type = nt
            inf.changed.add(a)
    return True


def update_function_type(func: Operation) -> None:
    """Make a ``func.func``'s ``function_type`` match its entry block arguments and return operands."""
    from lamina.ir.attributes import TypeAttr

    if not func.regions or not func.regions[0].blocks:
        return
    entry = func.regions[0].blocks[0]
    ret = None
    for b in func.regions[0].blocks:
        last = b.last_op
        if last is not None and last.name == "func.return":
            ret = last
            break
    old = func.properties.get("function_type")
    if not isinstance(old, TypeAttr) or not isinstance(old.value, FunctionType):
        return
    ins = [a.type for a in entry.args]
    outs = [v.type for v in ret.operands] if ret is not None else list(old.value.results)
    ft = FunctionType(ins, outs)
    if ft is not old.value:
        func.properties["function_type"] = TypeAttr(ft)


def infer_shapes(op: Operation, input_shapes: list[tuple[int, ...]] | None = None) -> ShapeInference:
    """Run shape inference on every function in (or being) ``op``."""
    inf = ShapeInference()
    funcs = [op] if op.name == "func.func" else [o for o in op.walk_ops() if o.name == "func.func"]
    if not funcs:
        for region in op.regions:
            for b in region.blocks:
                inf.run_block(b)
        return inf
    for f in funcs:
        if input_shapes and not _set_input_shapes(f, input_shapes, inf):
            inf.failed = True
            continue
        for region in f.regions:
            for b in region.blocks:
                inf.run_block(b)
        update_function_type(f)
    return inf


def _shapes_conflict(declared: Type, inferred: Type) -> bool:
    """Whether two tensor types cannot describe one tensor: ranks or static dims differ."""
    if not (isinstance(declared, ShapedType) and isinstance(inferred, ShapedType)):
        return False
    if not (declared.has_rank and inferred.has_rank):
        return False
    if declared.rank != inferred.rank:
        return True
    return any(a != b for a, b in zip(declared.shape, inferred.shape) if a != DYNAMIC and b != DYNAMIC)


def check_result_types(module: Operation) -> bool:
    """Check that every ``top`` op outside regions declares result shapes its operands give (an
    op edited by hand in a ``.mlir``: a wrong axis, a wrong result type), as MLIR's verifier does
    for ops with inferred return types. Emits one located error per op; returns whether all agree.
    Ops inside regions are left alone: an untaken ``If`` branch may not fit the input shapes."""
    ok = True
    for op in module.walk_ops():
        infer = getattr(op, "infer_shapes", None)
        if infer is None or not op.results or not op.name.startswith("top.") or _in_region_op(op):
            continue
        try:
            inferred = list(infer())
        except Exception as e:
            op.emit_error(f"its operands do not fit it: {e}")
            ok = False
            continue
        for i, (r, t) in enumerate(zip(op.results, inferred)):
            if _shapes_conflict(r.type, t):
                op.emit_error(f"result #{i} is declared {r.type} but its operands give {t}")
                ok = False
                break
    return ok


def _in_region_op(op: Operation) -> bool:
    """Whether ``op`` is nested in a region of an op other than a function or module."""
    p = op.parent_op()
    while p is not None and p.name not in ("func.func", "builtin.module"):
        if p.name.startswith("top."):
            return True
        p = p.parent_op()
    return False


@register_pass
class TopShapeInfer(Pass):
    name = "top-shape-infer"
    summary = "Re-infer the result types of top ops (after input shapes or ops changed) and verify"
    display_name = "ShapeInferPass"

    input_shapes = Option(
        list[str], [], "New shapes of the function inputs (e.g. 1x3x224x224,1x10); empty: keep them"
    )
    verify_after = Option(bool, True, "Verify the operation after inference", name="verify")

    num_updated = Statistic("num-updated", "Number of result types changed")

    def run_on_operation(self, op: Operation) -> Any:
        try:
            shapes = [_parse_shape(s) for s in self.input_shapes] if self.input_shapes else None
        except ValueError:
            op.emit_error(
                f"top-shape-infer: bad input-shapes '{','.join(self.input_shapes)}' (expected e.g. 1x3x224x224)"
            )
            self.signal_failure()
            return
        inf = infer_shapes(op, shapes)
        self.num_updated += inf.num_updated
        if inf.failed:
            self.signal_failure()
            return
        if self.verify_after:
            from lamina.ir.verifier import verify

            if not verify(op, self.context):
                self.signal_failure()

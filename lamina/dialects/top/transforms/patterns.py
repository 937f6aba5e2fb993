"""Canonicalization patterns of the ``top`` dialect (TPU-MLIR's Top canonicalizers).

Every ``top`` op class returns the patterns rooted at it from ``get_canonicalization_patterns``
(see :meth:`TopOp.get_canonicalization_patterns`), so the generic ``canonicalize`` pass runs them;
``top-canonicalize`` runs the same set with constant folding.

Families (the label of each pattern is its class name, usable in ``canonicalize{disable-patterns=...}``):

* constant folding: :class:`~.const_fold.ConstantFoldPattern` on every op;
* fusion into the producer: BatchNorm into Conv (:class:`FuseBatchNormIntoConv`), Relu and
  Clip(0, n) / ReLU6 into Conv and MatMul as ``do_relu`` / ``relu_limit``
  (:class:`FuseReluIntoProducer`, :class:`FuseClipIntoProducer`), Gemm to MatMul
  (:class:`GemmToMatMul`, so that Relu fuses into it);
* identities: Identity, inference Dropout, Reshape/Squeeze/Unsqueeze/Flatten to the same type,
  identity Permute, Cast to the same type, Relu of a relu'd value;
* merges: consecutive reshapes, consecutive Permutes (composed), Reshape with a computed shape
  and a static result (the shape becomes a constant);
* recognition of decomposed subgraphs: GELU (erf and tanh forms), LayerNorm, SiLU and
  scaled-dot-product attention.

Fused ops take the location of the last op of the matched subgraph, whose tensor they produce, so
per-layer comparison by tensor name keeps working.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from lamina.ir.attributes import BoolAttr, element_type_to_dtype
from lamina.ir.core import IRMapping, Operation, Value
from lamina.ir.types import RankedTensorType, i1, none
from lamina.rewrite.pattern import PatternRewriter, RewritePattern

from .const_fold import NOT_FOLDABLE, ConstantFoldPattern
from .utils import (
    FactoryCache,
    create_weight,
    def_op,
    derived_loc,
    is_none_value,
    is_scalar,
    loc_name,
    scalar_of,
    single_use,
    static_shape,
    weight_of,
)

# ---- helpers ----------------------------------------------------------------------------------


def _prop(op: Operation, name: str) -> Any:
    return op.attr(name)  # type: ignore[attr-defined]


def erase_dead(rewriter: PatternRewriter, ops: Iterable[Operation | None]) -> None:
    """Erase ``ops`` (in order) and, transitively, the ``top`` producers they leave unused."""
    work = [o for o in ops if o is not None]
    seen: set[int] = set()
    while work:
        op = work.pop(0)
        if id(op) in seen or op.parent is None:
            continue
        if (
            any(r.uses for r in op.results)
            or op.name in ("top.Input", "top.Yield")
            or not op.name.startswith("top.")
        ):
            continue
        seen.add(id(op))
        producers = [v.defining_op() for v in op.operands]
        rewriter.erase_op(op)
        work.extend(p for p in producers if p is not None)


def _none(rewriter: PatternRewriter, loc: Any) -> Value:
    from lamina.dialects.top.io import NoneOp

    return rewriter.create(NoneOp, output=none, loc=loc).results[0]


def _clone_with(
    rewriter: PatternRewriter,
    op: Operation,
    operands: dict[int, Value],
    loc: Any,
    props: dict[str, Any] | None = None,
) -> Operation:
    """Insert a copy of ``op`` with some operands and properties replaced and location ``loc``."""
    new = op.clone(IRMapping())
    for i, v in operands.items():
        new.set_operand(i, v)
    if props:
        new.properties.update(props)
    new.location = loc
    return rewriter.insert(new)


def _ordered(op: Operation) -> list[tuple[Value, Value]]:
    """Both orders of a commutative binary op's operands (none for a variadic Add/Mul/... with
    other than two operands, as an ONNX Sum of one or three tensors)."""
    if len(op.operands) != 2:
        return []
    a, b = op.operands[0], op.operands[1]
    return [(a, b), (b, a)]


def _same_type_result(op: Operation, v: Value) -> bool:
    return op.results[0].type is v.type


class TopPattern(RewritePattern):
    """A pattern that may create weights (one factory per module)."""

    def __init__(self) -> None:
        self.factories = FactoryCache()


# ---- fusion into producers --------------------------------------------------------------------


class FuseBatchNormIntoConv(TopPattern):
    """``BatchNorm(Conv(x, W, b))`` -> ``Conv(x, W * s, (b - mean) * s + beta)``, ``s = gamma / sqrt(var + eps)``
    (per output channel, computed in float64)."""

    root = "top.BatchNorm"
    benefit = 5

    def match_and_rewrite(self, bn: Operation, rewriter: PatternRewriter) -> bool:
        conv = def_op(bn.operands[0], "top.Conv")
        if conv is None or not single_use(conv.results[0]) or _prop(conv, "do_relu"):
            return False
        w = weight_of(conv.operands[1])
        b_val = conv.operands[2]
        bias = None if is_none_value(b_val) else weight_of(b_val)
        if w is None or w.dtype.kind != "f" or (bias is None and not is_none_value(b_val)):
            return False
        params = [weight_of(v) for v in bn.operands[1:]]
        m = w.shape[0]
        if any(p is None or p.size != m for p in params):
            return False
        gamma, beta, mean, var = (np.asarray(p, dtype=np.float64).reshape(m) for p in params)  # type: ignore[arg-type]
        scale = gamma / np.sqrt(var + _prop(bn, "epsilon"))
        new_w = (w.astype(np.float64) * scale.reshape((m,) + (1,) * (w.ndim - 1))).astype(w.dtype)
        b0 = np.zeros(m) if bias is None else bias.astype(np.float64).reshape(m)
        new_b = ((b0 - mean) * scale + beta).astype(w.dtype)
        rewriter.set_insertion_point(conv)
        f = self.factories.for_op(bn)
        base = loc_name(bn.location) or "bn"
        wv = create_weight(rewriter, f, new_w, base + "_filter", conv.operands[1].defining_op().location)
        bv = create_weight(rewriter, f, new_b, base + "_bias", bn.location)
        new = _clone_with(rewriter, conv, {1: wv, 2: bv}, bn.location)
        if not _same_type_result(bn, new.results[0]):
            new.results[0].type = bn.results[0].type
        rewriter.replace_op(bn, new)
        erase_dead(rewriter, [conv])
        return True


_RELU_PRODUCERS = ("top.Conv", "top.MatMul")


def _relu_fusable(v: Value) -> Operation | None:
    p = v.defining_op()
    if p is None or p.name not in _RELU_PRODUCERS or not single_use(v):
        return None
    if v.type is not p.results[0].type:
        return None
    return p


class FuseReluIntoProducer(RewritePattern):
    """``Relu(Conv|MatMul(...))`` -> ``Conv|MatMul(...){do_relu = 1}``; ``Relu`` of a value that is
    already relu'd (``do_relu`` set, or another Relu) is dropped."""

    root = "top.Relu"
    benefit = 4

    def match_and_rewrite(self, relu: Operation, rewriter: PatternRewriter) -> bool:

        x = relu.operands[0]
        p = x.defining_op()
        if (
            p is not None
            and x.type is relu.results[0].type
            and (p.name == "top.Relu" or (p.name in _RELU_PRODUCERS and _prop(p, "do_relu")))
        ):
            rewriter.replace_op(relu, [x])
            return True
        p = _relu_fusable(x)
        if p is None or x.type is not relu.results[0].type:
            return False
        loc = relu.location

        def update() -> None:
            p.properties["do_relu"] = BoolAttr(True)
            p.location = loc

        rewriter.modify_op_in_place(p, update)
        rewriter.replace_op(relu, [x])
        return True


class FuseClipIntoProducer(RewritePattern):
    """``Clip(Conv|MatMul(...), 0, n)`` -> ``do_relu = 1, relu_limit = n`` (ReLU6 is n = 6);
    ``Clip(y, 0, none)`` is a Relu."""

    root = "top.Clip"
    benefit = 4

    def match_and_rewrite(self, clip: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.base import F

        x, lo, hi = clip.operands
        if is_none_value(lo) or not is_scalar(lo, 0.0):
            return False
        limit = -1.0
        if not is_none_value(hi):
            h = scalar_of(hi)
            if h is None or h <= 0:
                return False
            limit = h
        if x.type is not clip.results[0].type:
            return False
        p = _relu_fusable(x)
        if p is None:
            return False
        old_limit = _prop(p, "relu_limit")
        if _prop(p, "do_relu") and old_limit is not None and old_limit > 0:
            limit = min(limit, old_limit) if limit > 0 else old_limit
        loc = clip.location

        def update() -> None:
            p.properties["do_relu"] = BoolAttr(True)
            if limit > 0:
                p.properties["relu_limit"] = F(limit)
            p.location = loc

        rewriter.modify_op_in_place(p, update)
        rewriter.replace_op(clip, [x])
        return True


class GemmToMatMul(TopPattern):
    """``Gemm(A, B, C)`` (no transA, constant B when transposed or scaled, constant C when
    scaled) -> ``MatMul(A, alpha * op(B), beta * C)``: MatMul is what Relu fuses into."""

    root = "top.Gemm"
    benefit = 3

    def match_and_rewrite(self, gemm: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.nn import MatMulOp

        a, b, c = gemm.operands
        if _prop(gemm, "transA"):
            return False
        alpha, beta, trans_b = _prop(gemm, "alpha"), _prop(gemm, "beta"), bool(_prop(gemm, "transB"))
        bw = weight_of(b)
        if (trans_b or alpha != 1.0) and (bw is None or bw.dtype.kind != "f"):
            return False
        cw = None if is_none_value(c) else weight_of(c)
        if beta != 1.0 and not is_none_value(c) and (cw is None or cw.dtype.kind != "f"):
            return False
        rewriter.set_insertion_point(gemm)
        f = self.factories.for_op(gemm)
        base = loc_name(gemm.location) or "gemm"
        right = b
        if trans_b or alpha != 1.0:
            arr = bw.T if trans_b else bw  # type: ignore[union-attr]
            if alpha != 1.0:
                arr = arr * arr.dtype.type(alpha)
            right = create_weight(
                rewriter, f, np.ascontiguousarray(arr), base + "_weight", b.defining_op().location
            )
        bias = c
        if beta != 1.0 and cw is not None:
            bias = create_weight(
                rewriter, f, cw * cw.dtype.type(beta), base + "_bias", c.defining_op().location
            )
        rewriter.replace_op_with_new_op(
            gemm, MatMulOp, input=a, right=right, bias=bias, output=gemm.results[0].type
        )
        return True


class FuseBiasIntoMatMul(TopPattern):
    """``Add(MatMul(x, W), b)`` with a constant ``b`` varying along the last axis only (shape
    ``[N]`` or ``[1, ..., 1, N]``) and the MatMul's result used once -> ``MatMul(x, W, b)`` (an
    existing bias is summed with ``b``). The fused op takes the Add's location (its tensor name):
    one op, one rounding of the output when quantized, like TPU-MLIR's MatMul with bias."""

    root = "top.Add"
    benefit = 4

    def match_and_rewrite(self, add: Operation, rewriter: PatternRewriter) -> bool:
        if len(add.operands) != 2:
            return False
        for mm_v, b_v in _ordered(add):
            mm = mm_v.defining_op()
            if mm is None or mm.name != "top.MatMul" or not single_use(mm_v) or _prop(mm, "do_relu"):
                continue
            if not _same_type_result(add, mm_v):
                continue
            b = weight_of(b_v)
            out = static_shape(mm_v)
            if b is None or b.dtype.kind != "f" or out is None or not out:
                continue
            n = out[-1]
            if b.size != n or (b.ndim and b.shape[-1] != n) or b.ndim > len(out):
                continue
            bias = b.reshape(n).astype(np.float32)
            old = mm.operands[2]
            if not is_none_value(old):
                ob = weight_of(old)
                if ob is None or ob.size != n:
                    continue
                bias = bias + ob.reshape(n).astype(np.float32)
            rewriter.set_insertion_point(mm)
            f = self.factories.for_op(mm)
            name = loc_name(add.location) or "matmul"
            bv = create_weight(rewriter, f, bias, name + "_bias", b_v.defining_op().location)

            def update(mm: Operation = mm, bv: Value = bv, loc: Any = add.location) -> None:
                mm.set_operand(2, bv)
                mm.location = loc

            rewriter.modify_op_in_place(mm, update)
            rewriter.replace_op(add, [mm_v])
            erase_dead(rewriter, [old.defining_op(), b_v.defining_op()])
            return True
        return False


# ---- identities -------------------------------------------------------------------------------


class RemoveIdentityLike(RewritePattern):
    """An op whose result is its input (same type): Identity, Reshape/Squeeze/Unsqueeze/Flatten/
    Expand to the same static shape, Cast to the same type, Permute by the identity order."""

    benefit = 2

    def __init__(self, root: str) -> None:
        self.root = root  # type: ignore[misc]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        x = op.operands[0]
        if x.type is not op.results[0].type:
            return False
        name = op.name
        if name == "top.Permute":
            order = _prop(op, "order")
            rank = len(x.type.shape) if isinstance(x.type, RankedTensorType) else None
            if (
                rank is None
                or (order is None and rank > 1)
                or (order is not None and list(order) != list(range(rank)))
            ):
                return False
        elif name != "top.Identity" and name != "top.Cast" and static_shape(x) is None:
            return False
        producers = [o.defining_op() for o in op.operands[1:]]
        rewriter.replace_op(op, [x])
        erase_dead(rewriter, producers)
        return True


class RemoveInferenceDropout(RewritePattern):
    """``Dropout`` in inference mode (no or a false ``training_mode``) with its mask unused."""

    root = "top.Dropout"
    benefit = 2

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        x, _ratio, training = op.operands
        if not is_none_value(training):
            t = weight_of(training)
            if t is None or bool(np.any(t)):
                return False
        if len(op.results) > 1 and op.results[1].uses:
            return False
        if x.type is not op.results[0].type:
            return False
        rewriter.replace_all_uses_with(op.results[0], x)
        rewriter.erase_op(op)
        return True


# ---- merges -----------------------------------------------------------------------------------

_RESHAPE_LIKE = ("top.Reshape", "top.Squeeze", "top.Unsqueeze", "top.Flatten")


class MergeReshapes(TopPattern):
    """``reshape(reshape(x))`` -> ``Reshape(x, <static result shape>)`` for any two of Reshape,
    Squeeze, Unsqueeze and Flatten, when the outer result is statically shaped."""

    benefit = 3

    def __init__(self, root: str) -> None:
        super().__init__()
        self.root = root  # type: ignore[misc]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.tensor import ReshapeOp

        inner = op.operands[0].defining_op()
        if inner is None or inner.name not in _RESHAPE_LIKE:
            return False
        shape = static_shape(op.results[0])
        if shape is None:
            return False
        x = inner.operands[0]
        rewriter.set_insertion_point(op)
        shape_v = None
        if op.name == "top.Reshape":
            cur = weight_of(op.operands[1])
            if cur is not None and tuple(int(d) for d in cur.reshape(-1)) == shape:
                shape_v = op.operands[1]
        if shape_v is None:
            f = self.factories.for_op(op)
            shape_v = create_weight(
                rewriter,
                f,
                np.asarray(shape, dtype=np.int64),
                (loc_name(op.location) or "reshape") + "_shape",
                op.location,
            )
        if x.type is op.results[0].type:
            rewriter.replace_op(op, [x])
        else:
            rewriter.replace_op_with_new_op(op, ReshapeOp, input=x, shape=shape_v, output=op.results[0].type)
        erase_dead(rewriter, [inner])
        return True


class ReshapeConstantShape(TopPattern):
    """A ``Reshape`` with a statically shaped result whose shape operand is computed (a
    ``Shape -> Gather -> Concat`` chain, ...) takes the shape as a constant; the chain dies."""

    root = "top.Reshape"
    benefit = 2

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        sv = op.operands[1]
        if weight_of(sv) is not None:
            return False
        shape = static_shape(op.results[0])
        if shape is None:
            return False
        rewriter.set_insertion_point(op)
        f = self.factories.for_op(op)
        nv = create_weight(
            rewriter,
            f,
            np.asarray(shape, dtype=np.int64),
            (loc_name(op.location) or "reshape") + "_shape",
            op.location,
        )
        old = sv.defining_op()
        rewriter.modify_op_in_place(op, lambda: op.set_operand(1, nv))
        erase_dead(rewriter, [old])
        return True


class MergePermutes(RewritePattern):
    """``Permute(Permute(x, p1), p2)`` -> ``Permute(x, p1[p2])`` (or ``x`` when that is the identity)."""

    root = "top.Permute"
    benefit = 3

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.base import Ints
        from lamina.dialects.top.tensor import PermuteOp

        inner = def_op(op.operands[0], "top.Permute")
        if inner is None:
            return False
        x = inner.operands[0]
        if not isinstance(x.type, RankedTensorType):
            return False
        rank = len(x.type.shape)
        p1 = inner._perm(rank)  # type: ignore[attr-defined]
        p2 = op._perm(rank)  # type: ignore[attr-defined]
        order = [p1[i] for i in p2]
        if order == list(range(rank)) and x.type is op.results[0].type:
            rewriter.replace_op(op, [x])
        else:
            rewriter.replace_op_with_new_op(
                op, PermuteOp, input=x, order=Ints(order), output=op.results[0].type
            )
        erase_dead(rewriter, [inner])
        return True


# ---- recognition of decomposed subgraphs ------------------------------------------------------

_SQRT2 = math.sqrt(2.0)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _scaled_input(v: Value, factor: float, inverse_op: str = "top.Div") -> Value | None:
    """``x`` if ``v`` is ``x * factor`` (Mul by the scalar, either side) or ``x / (1 / factor)``."""
    p = v.defining_op()
    if p is None or not single_use(v):
        return None
    if p.name == "top.Mul":
        for a, b in _ordered(p):
            if is_scalar(b, factor, 1e-4):
                return a
    elif p.name == inverse_op and is_scalar(p.operands[1], 1.0 / factor, 1e-4):
        return p.operands[0]
    return None


def _cube_of(v: Value) -> Value | None:
    """``x`` if ``v`` is ``Pow(x, 3)``, ``x * (x * x)`` or ``(x * x) * x``."""
    p = v.defining_op()
    if p is None or not single_use(v):
        return None
    if p.name == "top.Pow" and is_scalar(p.operands[1], 3.0):
        return p.operands[0]
    if p.name == "top.Mul":
        for a, b in _ordered(p):
            q = def_op(b, "top.Mul")
            if q is not None and single_use(b) and q.operands[0] is a and q.operands[1] is a:
                return a
    return None


def _gelu_branch(v: Value) -> tuple[Value, str, list[Operation]] | None:
    """``(x, approximate, ops)`` if ``v`` is ``1 + erf(x / sqrt 2)`` or
    ``1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))`` (single-use intermediates ``ops``)."""
    add = def_op(v, "top.Add")
    if add is None or not single_use(v):
        return None
    for g, one in _ordered(add):
        if not is_scalar(one, 1.0):
            continue
        gop = g.defining_op()
        if gop is None or not single_use(g):
            continue
        if gop.name == "top.Erf":
            x = _scaled_input(gop.operands[0], 1.0 / _SQRT2)
            if x is not None:
                return x, "none", [add, gop, gop.operands[0].defining_op()]  # type: ignore[list-item]
        elif gop.name == "top.Tanh":
            inner = _scaled_input(gop.operands[0], _SQRT_2_OVER_PI)
            s = def_op(inner, "top.Add") if inner is not None else None
            if s is None or not single_use(inner):  # type: ignore[arg-type]
                continue
            for x, m in _ordered(s):
                cube = _scaled_input(m, 0.044715)
                if cube is not None and _cube_of(cube) is x:
                    ops = [add, gop, gop.operands[0].defining_op(), s, m.defining_op(), cube.defining_op()]
                    return x, "tanh", ops  # type: ignore[return-value]
    return None


class FuseGELU(RewritePattern):
    """Decomposed GELU -> ``top.GELU``: ``x * 0.5 * (1 + erf(x / sqrt 2))`` (any association of the
    three factors; ``x * 0.7071`` for the division) and the tanh form
    ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`` (``approximate = "tanh"``)."""

    root = "top.Mul"
    benefit = 6

    def _match(self, out: Operation) -> tuple[Value, str, list[Operation]] | None:
        for p, q in _ordered(out):
            # (x * branch) * 0.5
            if is_scalar(q, 0.5):
                m = def_op(p, "top.Mul")
                if m is not None and single_use(p):
                    for u, w in _ordered(m):
                        g = _gelu_branch(w)
                        if g is not None and g[0] is u:
                            return g[0], g[1], [m, *g[2]]
            g = _gelu_branch(q)
            if g is not None:
                # (x * 0.5) * branch
                h = def_op(p, "top.Mul")
                if h is not None and single_use(p):
                    for u, c in _ordered(h):
                        if u is g[0] and is_scalar(c, 0.5):
                            return g[0], g[1], [h, *g[2]]
            # x * (branch * 0.5)
            h = def_op(q, "top.Mul")
            if h is not None and single_use(q):
                for w, c in _ordered(h):
                    if is_scalar(c, 0.5):
                        g = _gelu_branch(w)
                        if g is not None and g[0] is p:
                            return g[0], g[1], [h, *g[2]]
        return None

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.base import S
        from lamina.dialects.top.elementwise import GELUOp

        m = self._match(op)
        if m is None:
            return False
        x, approx, ops = m
        if x.type is not op.results[0].type:
            return False
        rewriter.set_insertion_point(op)
        kw: dict[str, Any] = {"approximate": S(approx)} if approx != "none" else {}
        new = rewriter.create(GELUOp, input=x, output=x.type, loc=op.location, **kw)
        rewriter.replace_op(op, new)
        erase_dead(rewriter, ops)
        return True


class FuseSiLU(RewritePattern):
    """``x * sigmoid(x)`` -> ``top.SiLU``; ``x * sigmoid(a * x)`` -> ``top.SiLU{alpha = a}``."""

    root = "top.Mul"
    benefit = 5

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.base import F
        from lamina.dialects.top.elementwise import SiLUOp

        for x, s in _ordered(op):
            sig = def_op(s, "top.Sigmoid")
            if sig is None or not single_use(s):
                continue
            t = sig.operands[0]
            alpha = 1.0
            extra: Operation | None = None
            if t is not x:
                mul = def_op(t, "top.Mul")
                if mul is None or not single_use(t):
                    continue
                for a, c in _ordered(mul):
                    sc = scalar_of(c)
                    if a is x and sc is not None:
                        alpha, extra = sc, mul
                        break
                if extra is None:
                    continue
            if x.type is not op.results[0].type:
                return False
            rewriter.set_insertion_point(op)
            kw: dict[str, Any] = {} if alpha == 1.0 else {"alpha": F(alpha)}
            new = rewriter.create(SiLUOp, input=x, output=x.type, loc=op.location, **kw)
            rewriter.replace_op(op, new)
            erase_dead(rewriter, [sig, extra])
            return True
        return False


def _reduce_mean_axes(v: Value) -> tuple[Operation, Value, tuple[int, ...]] | None:
    """``(op, input, axes)`` of a keepdims ``ReduceMean``."""
    r = def_op(v, "top.Reduce")
    if r is None or _prop(r, "mode") != "ReduceMean" or not _prop(r, "keepdims"):
        return None
    x = r.operands[0]
    if not isinstance(x.type, RankedTensorType):
        return None
    rank = len(x.type.shape)
    ax = weight_of(r.operands[1]) if not is_none_value(r.operands[1]) else None
    if ax is None:
        return None
    axes = tuple(sorted(int(a) + rank if a < 0 else int(a) for a in ax.reshape(-1)))
    return r, x, axes


def _layernorm_core(v: Value) -> dict[str, Any] | None:
    """``(x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)`` over trailing axes."""
    n = v.defining_op()
    if n is None:
        return None
    ops: list[Operation] = [n]
    if n.name == "top.Div":
        d, sd = n.operands
    elif n.name == "top.Mul":
        d, rec = n.operands
        rop = def_op(rec, "top.Reciprocal")
        if rop is None or not single_use(rec):
            return None
        sd = rop.operands[0]
        ops.append(rop)
    else:
        return None
    sq = def_op(sd, "top.Sqrt")
    if sq is None or not single_use(sd):
        return None
    ve = def_op(sq.operands[0], "top.Add")
    if ve is None or not single_use(sq.operands[0]):
        return None
    eps = None
    var = None
    for a, b in _ordered(ve):
        e = scalar_of(b)
        if e is not None and weight_of(b) is not None and weight_of(b).size == 1:  # type: ignore[union-attr]
            eps, var = e, a
            break
    if var is None or eps is None:
        return None
    rv = _reduce_mean_axes(var)
    if rv is None or not single_use(var):
        return None
    p = rv[1]
    pop = p.defining_op()
    if pop is None or not single_use(p):
        return None
    if pop.name == "top.Pow" and is_scalar(pop.operands[1], 2.0) and pop.operands[0] is d:
        pass
    elif not (pop.name == "top.Mul" and pop.operands[0] is d and pop.operands[1] is d):
        return None
    sub = def_op(d, "top.Sub")
    if sub is None or {u.owner for u in d.uses} != {pop, n}:
        return None
    x, mean = sub.operands
    rm = _reduce_mean_axes(mean)
    if rm is None or rm[1] is not x or not single_use(mean) or rm[2] != rv[2]:
        return None
    t = x.type
    assert isinstance(t, RankedTensorType)
    rank = len(t.shape)
    axes = rv[2]
    if not axes or axes != tuple(range(axes[0], rank)):
        return None
    ops += [sq, ve, rv[0], pop, sub, rm[0]]
    return {"x": x, "axis": axes[0], "eps": eps, "ops": ops}


def _layernorm_match(op: Operation) -> dict[str, Any] | None:
    """The whole LayerNorm ending at ``op`` (core, then ``* gamma``, then ``+ beta``)."""
    beta = gamma = None
    cur = op
    extra: list[Operation] = []
    if cur.name == "top.Add":
        for a, b in _ordered(cur):
            if weight_of(b) is not None and a.defining_op() is not None and single_use(a):
                beta, nxt = b, a.defining_op()
                break
        else:
            return None
        extra.append(cur)
        cur = nxt  # type: ignore[assignment]
    if cur.name == "top.Mul":
        for a, b in _ordered(cur):
            if weight_of(b) is not None and single_use(a):
                core = _layernorm_core(a)
                if core is not None:
                    gamma = b
                    extra.append(cur)
                    core["gamma"], core["beta"] = gamma, beta
                    core["ops"] = extra + core["ops"]
                    return core
    if beta is not None:
        return None  # + beta without * gamma: not handled
    core = _layernorm_core(cur.results[0])
    if core is None:
        return None
    core["gamma"], core["beta"] = None, None
    return core


class FuseLayerNorm(TopPattern):
    """``ReduceMean / Sub / Pow / ReduceMean / Add eps / Sqrt / Div [/ Mul gamma [/ Add beta]]``
    over trailing axes -> ``top.LayerNorm``."""

    benefit = 6

    def __init__(self, root: str) -> None:
        super().__init__()
        self.root = root  # type: ignore[misc]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.base import F, I
        from lamina.dialects.top.nn import LayerNormOp

        m = _layernorm_match(op)
        if m is None:
            return False
        # A larger match ends at the single user (the affine Mul / Add): let that one fuse.
        r = op.results[0]
        if single_use(r):
            user = next(iter(r.uses)).owner
            if user.name in ("top.Mul", "top.Add") and _layernorm_match(user) is not None:
                return False
        x = m["x"]
        if x.type is not op.results[0].type:
            return False
        rewriter.set_insertion_point(op)
        gamma = m["gamma"]
        if gamma is None:
            xs = static_shape(x)
            ns = xs[m["axis"] :] if xs is not None else (1,)
            try:
                dt = element_type_to_dtype(x.type.element_type)  # type: ignore[union-attr]
            except ValueError:
                return False
            if dt.kind != "f":
                return False
            f = self.factories.for_op(op)
            gamma = create_weight(
                rewriter, f, np.ones(ns, dtype=dt), (loc_name(op.location) or "ln") + "_weight", op.location
            )
        beta = m["beta"] if m["beta"] is not None else _none(rewriter, op.location)
        new = rewriter.create(
            LayerNormOp,
            input=x,
            weight=gamma,
            bias=beta,
            output=x.type,
            mean=none,
            rstd=none,
            axis=I(m["axis"]),
            epsilon=F(m["eps"]),
            loc=op.location,
        )
        rewriter.replace_op(op, [new.results[0]])
        erase_dead(rewriter, m["ops"][1:] if m["ops"] and m["ops"][0] is op else m["ops"])
        return True


class FuseAttention(TopPattern):
    """``MatMul(Softmax(MatMul(Q, Permute(K)) / scale [+ mask]), V)`` -> ``top.Attention``
    (3-d inputs as one head, 4-d as (batch, heads, seq, dim)); ``* c`` for ``/ scale`` too.
    A boolean mask applied as ``Where(mask, scores, fill)`` becomes the additive mask
    ``Where(mask, 0, fill)`` (computed on the small mask tensor)."""

    root = "top.MatMul"
    benefit = 6

    def match_and_rewrite(self, out: Operation, rewriter: PatternRewriter) -> bool:
        from lamina.dialects.top.base import F, I
        from lamina.dialects.top.extra import AttentionOp
        from lamina.dialects.top.tensor import PermuteOp

        probs, v = out.operands[0], out.operands[1]
        if not is_none_value(out.operands[2]) or _prop(out, "do_relu"):
            return False
        sm = def_op(probs, "top.Softmax")
        if sm is None or not single_use(probs) or _prop(sm, "log"):
            return False
        s = sm.operands[0]
        st = s.type
        if not isinstance(st, RankedTensorType) or len(st.shape) not in (3, 4):
            return False
        rank = len(st.shape)
        if _prop(sm, "axis") not in (-1, rank - 1) or not single_use(s):
            return False
        ops: list[Operation] = [sm]
        mask = None
        cur = s
        where = def_op(cur, "top.Where")
        where_mask = None
        if where is not None:
            # Where(cond, scores, fill): an additive mask Where(cond, 0, fill), so that fully
            # masked rows stay uniform as in the original (fill is a large negative or -inf)
            cond, sc, fill = where.operands
            fv = scalar_of(fill)
            ct = cond.type
            if (
                fv is None
                or not single_use(sc)
                or sc.type is not cur.type
                or not isinstance(ct, RankedTensorType)
                or ct.element_type is not i1
                or len(ct.shape) > rank
                or (rank == 3 and len(ct.shape) > 2)
            ):
                return False
            where_mask = (cond, fill)
            ops.append(where)
            cur = sc
        add = def_op(cur, "top.Add") if where_mask is None else None
        if add is not None:
            for a, b in _ordered(add):
                producer = a.defining_op()
                if (
                    producer is not None
                    and producer.name in ("top.Div", "top.Mul", "top.MatMul")
                    and single_use(a)
                    and a.type is cur.type
                ):
                    mask, cur = b, a
                    break
            if mask is None:
                return False
            ops.append(add)
        scale = 1.0
        sop = cur.defining_op()
        if sop is not None and sop.name in ("top.Div", "top.Mul"):
            if not single_use(cur):
                return False
            c = scalar_of(sop.operands[1])
            qk = sop.operands[0]
            if c is None and sop.name == "top.Mul":
                c, qk = scalar_of(sop.operands[0]), sop.operands[1]
            if c is None or c == 0:
                return False
            scale = 1.0 / c if sop.name == "top.Div" else c
            ops.append(sop)
            cur = qk
        mm = def_op(cur, "top.MatMul")
        if mm is None or not single_use(cur) or not is_none_value(mm.operands[2]) or _prop(mm, "do_relu"):
            return False
        ops.append(mm)
        q, kt = mm.operands[0], mm.operands[1]
        for t in (q, kt, v, out.results[0]):
            if not isinstance(t.type, RankedTensorType) or len(t.type.shape) != rank:
                return False
        qs, ks, vs = q.type.shape, kt.type.shape, v.type.shape  # type: ignore[union-attr]
        if not (qs[:-2] == ks[:-2] == vs[:-2]):
            return False
        if mask is not None:
            mt = mask.type
            if not isinstance(mt, RankedTensorType) or (
                rank == 3 and len(mt.shape) > 2 and any(d != 1 for d in mt.shape[:-2])
            ):
                return False
            if rank == 3 and len(mt.shape) > 2:
                return False
        swap = [*range(rank - 2), rank - 1, rank - 2]
        kop = def_op(kt, "top.Permute")
        rewriter.set_insertion_point(out)
        if kop is not None and kop._perm(rank) == swap and single_use(kt):  # type: ignore[attr-defined]
            key = kop.operands[0]
            ops.append(kop)
        else:
            kshape = list(ks)
            kshape[-1], kshape[-2] = kshape[-2], kshape[-1]
            from lamina.dialects.top.base import Ints

            key = rewriter.create(
                PermuteOp,
                input=kt,
                order=Ints(swap),
                output=RankedTensorType(kshape, kt.type.element_type),  # type: ignore[union-attr]
                # K itself, not the K^T named at kt: a name of its own.
                loc=derived_loc(
                    kt.defining_op().location if kt.defining_op() is not None else out.location, "key"
                ),
            ).results[0]
        nv = _none(rewriter, out.location)
        if where_mask is not None:
            from lamina.dialects.top.elementwise import WhereOp

            cond, fill = where_mask
            et = st.element_type
            f = self.factories.for_op(out)
            zero = create_weight(
                rewriter,
                f,
                np.zeros((), dtype=element_type_to_dtype(et)),
                (loc_name(out.location) or "attention") + "_mask_zero",
                out.location,
                et,
            )
            mask = rewriter.create(
                WhereOp,
                cond=cond,
                tbrn=zero,
                fbrn=fill,
                output=RankedTensorType(cond.type.shape, et),  # type: ignore[union-attr]
                loc=derived_loc(where.location, "additive_mask"),  # type: ignore[union-attr]
            ).results[0]
        kw: dict[str, Any] = {"scale": F(scale)}
        if rank == 3:
            kw["q_num_heads"] = I(1)
            kw["kv_num_heads"] = I(1)
        new = rewriter.create(
            AttentionOp,
            query=q,
            key=key,
            value=v,
            attn_mask=mask if mask is not None else nv,
            past_key=nv,
            past_value=nv,
            nonpad_kv_seqlen=nv,
            output=out.results[0].type,
            present_key=none,
            present_value=none,
            qk_matmul_output=none,
            loc=out.location,
            **kw,
        )
        rewriter.replace_op(out, [new.results[0]])
        erase_dead(rewriter, ops)
        return True


# ---- the registry -----------------------------------------------------------------------------


def _build() -> dict[str, list[type[RewritePattern] | Any]]:
    reg: dict[str, list[Any]] = {}

    def add(name: str, factory: Any) -> None:
        reg.setdefault(name, []).append(factory)

    add("top.BatchNorm", FuseBatchNormIntoConv)
    add("top.Relu", FuseReluIntoProducer)
    add("top.Clip", FuseClipIntoProducer)
    add("top.Gemm", GemmToMatMul)
    add("top.Add", FuseBiasIntoMatMul)
    for n in (
        "top.Identity",
        "top.Reshape",
        "top.Squeeze",
        "top.Unsqueeze",
        "top.Flatten",
        "top.Expand",
        "top.Cast",
        "top.Permute",
    ):
        add(n, lambda n=n: RemoveIdentityLike(n))
    add("top.Dropout", RemoveInferenceDropout)
    for n in _RESHAPE_LIKE:
        add(n, lambda n=n: MergeReshapes(n))
    add("top.Reshape", ReshapeConstantShape)
    add("top.Permute", MergePermutes)
    add("top.Mul", FuseGELU)
    add("top.Mul", FuseSiLU)
    for n in ("top.Add", "top.Mul", "top.Div"):
        add(n, lambda n=n: FuseLayerNorm(n))
    add("top.MatMul", FuseAttention)
    return reg


_REGISTRY: dict[str, list[Any]] | None = None


def canonicalization_patterns(op_name: str, *, fold: bool = True) -> list[RewritePattern]:
    """Fresh instances of the patterns rooted at ``op_name`` (constant folding included when
    ``fold``)."""
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _build()
    out: list[RewritePattern] = [f() for f in _REGISTRY.get(op_name, ())]
    if fold and op_name not in NOT_FOLDABLE:
        out.append(ConstantFoldPattern(op_name))
    return out


def all_patterns(op_names: Sequence[str], *, fold: bool = True) -> list[RewritePattern]:
    out: list[RewritePattern] = []
    for n in op_names:
        out.extend(canonicalization_patterns(n, fold=fold))
    return out

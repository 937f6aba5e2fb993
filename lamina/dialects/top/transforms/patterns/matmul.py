"""Gemm and bias into MatMul: Gemm becomes a MatMul (so that Relu fuses into it), a constant Add
along the last axis becomes its bias."""

from __future__ import annotations

from typing import Any

import numpy as np

from lamina.dialects.top.elementwise import AddOp
from lamina.dialects.top.nn import GemmOp, MatMulOp
from lamina.ir.constants import constant_array
from lamina.ir.core import Operation, Value
from lamina.ir.naming import location_name
from lamina.rewrite.pattern import PatternRewriter

from ..utils import create_weight, is_none_value, producer, single_use, static_shape
from .common import TopPattern, erase_dead, ordered, prop, same_type_result


class GemmToMatMul(TopPattern):
    """``Gemm(A, B, C)`` (no transA, constant B when transposed or scaled, constant C when
    scaled) -> ``MatMul(A, alpha * op(B), beta * C)``: MatMul is what Relu fuses into."""

    root = GemmOp
    benefit = 3

    def match_and_rewrite(self, gemm: GemmOp, rewriter: PatternRewriter) -> bool:  # type: ignore[override]
        a, b, c = gemm.input, gemm.right, gemm.bias
        if prop(gemm, "transA"):
            return False
        alpha, beta, trans_b = prop(gemm, "alpha"), prop(gemm, "beta"), bool(prop(gemm, "transB"))
        bw = constant_array(b)
        if (trans_b or alpha != 1.0) and (bw is None or bw.dtype.kind != "f"):
            return False
        cw = None if is_none_value(c) else constant_array(c)
        if beta != 1.0 and not is_none_value(c) and (cw is None or cw.dtype.kind != "f"):
            return False
        rewriter.set_insertion_point(gemm)
        f = self.factories.for_op(gemm)
        base = location_name(gemm.location) or "gemm"
        right = b
        if trans_b or alpha != 1.0:
            arr = bw.T if trans_b else bw  # type: ignore[union-attr]
            if alpha != 1.0:
                arr = arr * arr.dtype.type(alpha)
            right = create_weight(
                rewriter,
                f,
                np.ascontiguousarray(arr),
                base + "_weight",
                b.defining_op().location,  # type: ignore[union-attr]
            )
        bias = c
        if beta != 1.0 and cw is not None:
            bias = create_weight(
                rewriter,
                f,
                cw * cw.dtype.type(beta),
                base + "_bias",
                c.defining_op().location,  # type: ignore[union-attr]
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

    root = AddOp
    benefit = 4

    def match_and_rewrite(self, add: Operation, rewriter: PatternRewriter) -> bool:
        if len(add.operands) != 2:
            return False
        for mm_v, b_v in ordered(add):
            mm = producer(mm_v, MatMulOp)
            if mm is None or not single_use(mm_v) or prop(mm, "do_relu"):
                continue
            if not same_type_result(add, mm_v):
                continue
            b = constant_array(b_v)
            out = static_shape(mm_v)
            if b is None or b.dtype.kind != "f" or out is None or not out:
                continue
            n = out[-1]
            if b.size != n or (b.ndim and b.shape[-1] != n) or b.ndim > len(out):
                continue
            bias = b.reshape(n).astype(np.float32)
            old = mm.bias
            if not is_none_value(old):
                ob = constant_array(old)
                if ob is None or ob.size != n:
                    continue
                bias = bias + ob.reshape(n).astype(np.float32)
            rewriter.set_insertion_point(mm)
            f = self.factories.for_op(mm)
            name = location_name(add.location) or "matmul"
            bv = create_weight(rewriter, f, bias, name + "_bias", b_v.defining_op().location)  # type: ignore[union-attr]

            def update(mm: MatMulOp = mm, bv: Value = bv, loc: Any = add.location) -> None:
                mm.set_operand(MatMulOp.bias.index, bv)
                mm.location = loc

            rewriter.modify_op_in_place(mm, update)
            rewriter.replace_op(add, [mm_v])
            erase_dead(rewriter, [old.defining_op(), b_v.defining_op()])
            return True
        return False


PATTERNS = (GemmToMatMul, FuseBiasIntoMatMul)

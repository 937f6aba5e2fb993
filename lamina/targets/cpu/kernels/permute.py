"""A copying ``tpu.Permute`` for the CPU target, for any element type (float, quantized, integer): when
the permutation keeps a run of innermost elements contiguous in both the input and the result (a
transformer's ``(B, S, H, D) -> (B, H, S, D)`` head split and merge keep ``D``), each run is one
``llvm.memcpy`` of a constant size (LLVM expands it into vector moves), the runs split between the
parts. ``generic.gather`` — an index table per element — remains for the permutations that move
single elements (and for runs shorter than :data:`MIN_RUN_BYTES`). Bit for bit ``execute``: it moves
bytes."""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from .abi import Isa, KernelPlan, Template
from .gemm_f32 import I64, PTR, Fn, static_shape
from .generic_ir import coalesce, contiguous_strides, np_dtype

__all__ = ["MIN_RUN_BYTES", "PermuteCopy"]

#: the shortest contiguous run (bytes) this template copies; shorter ones are the gather's
MIN_RUN_BYTES = 16


def _runs(op: Any) -> tuple[list[int], list[list[int]], int] | None:
    """(the coalesced result dims, [input strides, result strides] in elements over them, element
    bytes) when the innermost coalesced dim is contiguous in both, else None."""
    xs, ys = static_shape(op.operands[0].type), static_shape(op.results[0].type)
    if xs is None or ys is None or not xs:
        return None
    order = op.attr("order")
    perm = list(order) if order is not None else list(range(len(xs) - 1, -1, -1))
    if sorted(perm) != list(range(len(xs))) or [xs[p] for p in perm] != list(ys):
        return None
    ist = contiguous_strides(xs)
    dims, strides = coalesce(ys, [[ist[p] for p in perm], contiguous_strides(ys)])
    if strides[0][-1] != 1 or strides[1][-1] != 1:
        return None
    return dims, strides, np_dtype(op.operands[0].type).itemsize


class PermuteCopy(Template):
    name = "permute_copy"
    priority = 10
    exact = True  # moves bytes

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Permute" or len(op.results) != 1:
            return False
        if np_dtype(op.operands[0].type) != np_dtype(op.results[0].type):
            return False
        r = _runs(op)
        return r is not None and r[0][-1] * r[2] >= MIN_RUN_BYTES

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        n = math.prod(static_shape(op.results[0].type) or ())
        return KernelPlan(
            symbol, [("in", 0), ("out", 0)], bytes=2 * n * np_dtype(op.results[0].type).itemsize
        )

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = _runs(op)
        assert r is not None
        dims, (ist, ost), esz = r
        fn = Fn(module, plan.symbol)
        b = fn.b
        src, dst = fn.buf(0), fn.buf(1)
        i8 = ir.IntType(8)
        memcpy = fn.intrinsic("llvm.memcpy.p0.p0.i64", ir.VoidType(), [PTR, PTR, I64, ir.IntType(1)])
        run = dims[-1] * esz
        rows = math.prod(dims[:-1])
        lo, hi = fn.share(rows)

        def row(rw: ir.Value, _c: Any) -> None:
            rem: Any = rw
            so: Any = 0
            do: Any = 0
            for d in range(len(dims) - 2, -1, -1):
                c = b.urem(rem, fn.c(dims[d])) if d > 0 else rem
                if d > 0:
                    rem = fn.udiv(rem, dims[d])
                so = fn.add(so, fn.mul(c, ist[d] * esz))
                do = fn.add(do, fn.mul(c, ost[d] * esz))
            s = fn.at(src, so, i8)
            t = fn.at(dst, do, i8)
            b.call(memcpy, [t, s, ir.Constant(I64, run), ir.Constant(ir.IntType(1), 0)])

        fn.loop(lo, hi, row)
        fn.ret()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [PermuteCopy()]

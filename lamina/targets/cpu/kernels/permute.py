"""A fast ``tpu.Permute`` for the permutations that keep the last axis in place (a transformer's
head split / merge, ``(B, S, H, D) <-> (B, H, S, D)``), any storage type: the trailing axes the
permutation leaves in place are one contiguous run in both tensors, copied with one ``memcpy`` of a
constant size (LLVM inlines it as vector moves); the output's runs are split between the parts. The
generic template (``generic.gather``: one index load per element) remains for the others."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from llvmlite import ir

from .abi import Isa, KernelPlan, Template
from .gemm_int8 import I1, I8, I64, Gen
from .generic import _np, _same_storage, _shape

__all__ = ["TEMPLATES", "FastPermute"]


def _plan(op: Any) -> tuple[list[int], list[int], int, int] | None:
    """(the output's outer dims, their strides in the input in elements, the run in elements, the
    element size) of a Permute this template runs, else None."""
    if op.name != "tpu.Permute" or len(op.operands) != 1 or len(op.results) != 1:
        return None
    if not _same_storage(op):
        return None
    shape = _shape(op.operands[0].type)
    order = [int(a) for a in (op.attr("order") or [])]
    rank = len(shape)
    if sorted(order) != list(range(rank)) or rank == 0 or math.prod(shape) == 0:
        return None
    k = 0
    while k < rank and order[rank - 1 - k] == rank - 1 - k:
        k += 1
    if k == 0 or k == rank:
        return None  # the last axis moves (generic), or nothing moves (a copy: generic)
    strides = [math.prod(shape[a + 1 :]) for a in range(rank)]
    outer = [shape[order[a]] for a in range(rank - k)]
    ostr = [strides[order[a]] for a in range(rank - k)]
    return outer, ostr, math.prod(shape[rank - k :]), int(_np(op.operands[0].type).itemsize)


class FastPermute(Template):
    name = "permute"
    priority = 10

    def matches(self, op: Any, isa: Isa) -> bool:
        return _plan(op) is not None

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        r = _plan(op)
        assert r is not None
        outer, _, run, size = r
        return KernelPlan(symbol, [("in", 0), ("out", 0)], bytes=2 * math.prod(outer) * run * size)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        r = _plan(op)
        assert r is not None
        outer, ostr, run, size = r
        gen = Gen(module, plan.symbol, len(plan.buffers), isa)
        b, c = gen.b, gen.c
        src, dst = gen.bufs
        nbytes = run * size
        f = gen.intrinsic("llvm.memcpy.p0.p0.i64", ir.VoidType(), [I8.as_pointer(), I8.as_pointer(), I64, I1])
        lo, hi = gen.part_range(int(np.prod(outer)))

        def row(fi: Any, _: list[Any]) -> None:
            rem = fi
            off = c(0)
            for a in range(len(outer) - 1, -1, -1):
                ia = b.urem(rem, c(outer[a])) if a else rem
                rem = b.udiv(rem, c(outer[a]))
                off = b.add(off, b.mul(ia, c(ostr[a] * size)))
            s = b.gep(src, [off])
            d = b.gep(dst, [b.mul(fi, c(nbytes))])
            b.call(f, [d, s, c(nbytes), ir.Constant(I1, 0)])

        gen.loop(lo, hi, row)
        b.ret_void()


TEMPLATES: list[Template] = [FastPermute()]

"""Data movement as copies of contiguous runs for the CPU target, any element type (float,
quantized, integer), bit for bit ``execute`` (it moves bytes).

**RunCopy** (``run_copy``, priority 9): a data-movement op of one tensor operand (``tpu.Split``,
``tpu.Slice`` with unit steps along the inner axes, ...) whose element table — computed at compile
time as :class:`.generic.Gather` computes it, by running the op's reference on element indices — is,
per result, runs of consecutive source elements of one length ``L`` (the gcd of the runs' lengths)
of at least :data:`MIN_RUN_BYTES`: the runs' source offsets are a table in the weights (one entry
per run instead of one per element) and each run is a loop of 64-byte vector moves plus one
inlined constant-size ``memcpy`` of the rest. Runs longer than :data:`PIECE_BYTES` are copied in
pieces so that the parts (threads), which split the (run, piece) units, share a single long run
too. ``generic.gather`` (an element at a time through its table) remains for the rest, and
``permute_copy`` keeps the permutes. (A ``tpu.Concat`` stays ``generic.concat``'s: its per-input
loops are vectorized by LLVM and measured as fast as run copies — memory-bound either way.)"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir

from .abi import Isa, KernelPlan, Template
from .gemm_f32 import I64, PTR, Fn, Int, static_shape
from .generic import RESHAPES, Gather
from .generic_ir import np_dtype

__all__ = ["MIN_RUN_BYTES", "PIECE_BYTES", "RunCopy"]

#: the shortest run (bytes) these templates copy; shorter ones stay with the element-wise kernels
MIN_RUN_BYTES = 16
#: runs longer than this are copied in pieces of about this size (units the parts share)
PIECE_BYTES = 32 * 1024
#: bytes one move of the copy loop takes (a 512-bit vector; LLVM splits it on narrower ISAs)
VEC_BYTES = 64


def _copy_runs(
    fn: Fn,
    src: ir.Value,
    dst: ir.Value,
    nruns: int,
    run_bytes: int,
    offsets: Callable[[ir.Value], tuple[Int, Int]],
) -> None:
    """Copy ``nruns`` runs of ``run_bytes`` bytes; ``offsets(r)`` gives run ``r``'s (source,
    destination) byte offsets. The (run, piece) units are split between the parts."""
    b = fn.b
    i8 = ir.IntType(8)
    memcpy = fn.intrinsic("llvm.memcpy.p0.p0.i64", ir.VoidType(), [PTR, PTR, I64, ir.IntType(1)])
    pieces = max(1, -(-run_bytes // PIECE_BYTES))
    piece = -(-run_bytes // pieces)
    piece = min(run_bytes, -(-piece // 64) * 64)
    pieces = -(-run_bytes // piece)
    last = run_bytes - (pieces - 1) * piece
    lo, hi = fn.share(nruns * pieces)

    vt = ir.VectorType(i8, VEC_BYTES)

    def copy(so: Int, do: Int, size: int) -> None:
        """A vector loop of ``VEC_BYTES`` moves, then one constant-size ``memcpy`` (inlined) of the
        rest: the C library's ``memcpy`` of a long run measured slower than this loop."""
        d0, s0 = fn.at(dst, do, i8), fn.at(src, so, i8)
        nvec = size // VEC_BYTES

        def mv(k: ir.Value, _c: Any) -> None:
            off = fn.mul(k, VEC_BYTES)
            v = b.load(fn.at(s0, off, i8), typ=vt, align=1)
            b.store(v, fn.at(d0, off, i8), align=1)

        if nvec:
            fn.loop(0, nvec, mv)
        rest = size - nvec * VEC_BYTES
        if rest:
            at = nvec * VEC_BYTES
            b.call(
                memcpy,
                [fn.at(d0, at, i8), fn.at(s0, at, i8), ir.Constant(I64, rest), ir.Constant(ir.IntType(1), 0)],
            )

    def unit(u: ir.Value, _c: Any) -> None:
        r = fn.udiv(u, pieces) if pieces > 1 else u
        so, do = offsets(r)  # type: ignore[arg-type]
        if pieces == 1:
            copy(so, do, run_bytes)
            return
        p = b.urem(u, fn.c(pieces))
        off = fn.mul(p, piece)
        so, do = fn.add(so, off), fn.add(do, off)
        if last == piece:
            copy(so, do, piece)
        else:
            fn.when(
                b.icmp_unsigned("<", p, fn.c(pieces - 1)),
                lambda: copy(so, do, piece),
                lambda: copy(so, do, last),
            )

    fn.loop(lo, hi, unit)


def _run_length(t: np.ndarray) -> int:
    """The gcd of the lengths of the runs of consecutive values of a flat index table."""
    if t.size <= 1:
        return int(t.size)
    starts = np.flatnonzero(np.diff(t) != 1) + 1
    bounds = np.concatenate(([0], starts, [t.size]))
    return int(np.gcd.reduce(np.diff(bounds)))


class RunCopy(Template):
    name = "run_copy"
    priority = 9  # below permute_copy (a permute's runs without a table)
    exact = True  # moves bytes

    def _runs(self, op: Any) -> list[tuple[int, np.ndarray]] | None:
        """Per result: (run length in elements, the runs' source offsets in elements)."""
        if op.name in RESHAPES:
            return None
        tables = Gather()._tables(op)
        if tables is None:
            return None
        out = []
        for t in tables:
            flat = t.reshape(-1).astype(np.int64)
            n = _run_length(flat)
            out.append((n, flat[::n].copy() if n else flat[:0].copy()))
        return out

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name in RESHAPES or op.name == "tpu.Permute" or not Gather().matches(op, isa):
            return False
        if len([v for v in op.operands if static_shape(v.type) is not None]) < 1:
            return False
        try:
            runs = self._runs(op)
        except Exception:
            return False
        esz = np_dtype(op.operands[0].type).itemsize
        return runs is not None and all(n * esz >= MIN_RUN_BYTES for n, offs in runs if offs.size)

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        runs = self._runs(op)
        assert runs is not None
        bufs: list[tuple[str, Any]] = [("in", 0)]
        weights = {}
        for j, (_n, offs) in enumerate(runs):
            weights[f"r{j}"] = offs
            bufs.append(("weight", f"r{j}"))
        bufs += [("out", j) for j in range(len(op.results))]
        nb = (
            sum(math.prod(static_shape(r.type) or ()) for r in op.results)
            * np_dtype(op.operands[0].type).itemsize
        )
        return KernelPlan(symbol, bufs, weights, bytes=2 * nb)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        fn = Fn(module, plan.symbol)
        esz = np_dtype(op.operands[0].type).itemsize
        nt = len(op.results)
        src = fn.buf(0)
        for j in range(nt):
            offs = plan.weights[f"r{j}"]
            if not offs.size:
                continue
            n = math.prod(static_shape(op.results[j].type) or ()) // offs.size
            tab, dst = fn.buf(1 + j), fn.buf(1 + nt + j)
            run = n * esz

            def offsets(r: ir.Value, tab: ir.Value = tab, run: int = run) -> tuple[Int, Int]:
                so = fn.mul(fn.load(fn.at(tab, r, I64), I64), esz)
                return so, fn.mul(r, run)

            _copy_runs(fn, src, dst, int(offs.size), run, offsets)
        fn.ret()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [RunCopy()]

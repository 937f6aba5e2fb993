"""Generic compiled templates for the float normalizations: ``tpu.Softmax`` (and log-softmax) along
any axis and ``tpu.LayerNorm`` over the trailing dims (without its mean / inv-std results), in F32,
F16 and BF16 (computed in f32, f64 for f64 tensors, as the float mode). One row — the ``n``
elements normalized together, ``stride`` apart — per step, the rows split between the parts:
softmax subtracts the row's max (0 when it is not finite), exponentiates, divides by the sum;
layer norm takes the mean, the mean square of the differences, ``1 / sqrt(var + eps)``, then the
scale and bias (constants packed as f32 rows)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from lamina.ir.constants import constant_array, value_constant
from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .generic import _is_float, _np, _shape, _static
from .generic_ir import (
    F32,
    F64,
    I64,
    Kernel,
    compute_float,
    const,
    fconst,
    intrinsic,
    libm,
    load_float,
    storage_type,
    store_float,
)

__all__ = ["LayerNorm", "Softmax"]


def _rows(shape: list[int], axis: int) -> tuple[int, int, int]:
    """(outer, n, inner) of a tensor normalized along ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1 :])


def _reduce(k: Kernel, n: int, init: Any, step: Any) -> Any:
    """``acc = init; for i in range(n): acc = step(i, acc)``; the final value."""
    b = k.b
    pre = b.block
    cond = b.append_basic_block("red.cond")
    body = b.append_basic_block("red.body")
    end = b.append_basic_block("red.end")
    b.branch(cond)
    b.position_at_end(cond)
    i = b.phi(I64)
    acc = b.phi(init.type)
    i.add_incoming(const(0), pre)
    acc.add_incoming(init, pre)
    b.cbranch(b.icmp_signed("<", i, const(n)), body, end)
    b.position_at_end(body)
    nv = step(i, acc)
    i.add_incoming(b.add(i, const(1)), b.block)
    acc.add_incoming(nv, b.block)
    b.branch(cond)
    b.position_at_end(end)
    return acc


class Softmax(Template):
    name = "generic.softmax"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.Softmax":
            return False
        x, r = op.operands[0].type, op.results[0].type
        return _static(x) and _static(r) and _is_float(x) and _is_float(r) and len(x.shape) > 0

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        n = int(np.prod(_shape(op.operands[0].type)))
        return KernelPlan(symbol, [("in", 0), ("out", 0)], bytes=2 * n * _np(op.operands[0].type).itemsize)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        shape = _shape(op.operands[0].type)
        axis = int(op.attr("axis")) % len(shape)
        outer, n, inner = _rows(shape, axis)
        x_dt, o_dt = _np(op.operands[0].type), _np(op.results[0].type)
        ct = compute_float(x_dt)
        log = bool(op.attr("log"))
        k = Kernel(module, plan.symbol)
        b = k.b
        x = k.buf(0, storage_type(x_dt))
        out = k.buf(1, storage_type(o_dt))
        exp = libm(module, "exp" if ct == F64 else "expf", ct)
        lo, hi = k.share(outer * inner)
        with k.loop(lo, hi, "row") as row:
            base = b.add(b.mul(b.udiv(row, const(inner)), const(n * inner)), b.urem(row, const(inner)))
            xr, orow = b.gep(x, [base]), b.gep(out, [base])

            def at(p: Any, i: Any) -> Any:
                return b.gep(p, [b.mul(i, const(inner))])

            mx = _reduce(
                k,
                n,
                fconst(-math.inf, ct),
                lambda i, a: b.call(
                    intrinsic(module, "llvm.maximum", ct, 2), [a, load_float(b, at(xr, i), x_dt, ct)]
                ),
            )
            finite = b.fcmp_ordered(
                "one", b.call(intrinsic(module, "llvm.fabs", ct), [mx]), fconst(math.inf, ct)
            )
            mx = b.select(finite, mx, fconst(0.0, ct))
            total = _reduce(
                k,
                n,
                fconst(0.0, ct),
                lambda i, a: b.fadd(a, b.call(exp, [b.fsub(load_float(b, at(xr, i), x_dt, ct), mx)])),
            )
            if log:
                lt = b.call(libm(module, "log" if ct == F64 else "logf", ct), [total])
            with k.loop(0, n, "i") as i:
                e = b.fsub(load_float(b, at(xr, i), x_dt, ct), mx)
                y = b.fsub(e, lt) if log else b.fdiv(b.call(exp, [e]), total)
                store_float(b, y, at(orow, i), o_dt)
        k.finish()


class LayerNorm(Template):
    name = "generic.layernorm"

    def matches(self, op: Any, isa: Isa) -> bool:
        if op.name != "tpu.LayerNorm":
            return False
        x, r = op.operands[0].type, op.results[0].type
        if not (_static(x) and _static(r) and _is_float(x) and _is_float(r)) or not x.shape:
            return False
        _, n, _ = self._geo(op)
        for v in op.operands[1:]:
            computed = isinstance(v.type, RankedTensorType) and value_constant(v) is None
            if computed and not (_static(v.type) and _is_float(v.type) and int(np.prod(_shape(v.type))) == n):
                return False
        return all(
            _static(t.type) and _is_float(t.type)
            for t in op.results[1:]
            if isinstance(t.type, RankedTensorType)
        )

    def _geo(self, op: Any) -> tuple[int, int, list[int]]:
        shape = _shape(op.operands[0].type)
        axis = int(op.attr("axis")) % len(shape)
        return math.prod(shape[:axis]), math.prod(shape[axis:]), shape[axis:]

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        rows, n, trail = self._geo(op)
        weights: dict[str, np.ndarray] = {}
        bufs: list[tuple[str, Any]] = [("in", 0)]
        for idx, key in ((1, "w"), (2, "b")):
            v = op.operands[idx]
            if not isinstance(v.type, RankedTensorType):
                continue
            if value_constant(v) is not None:
                a = np.asarray(constant_array(v)).astype(np.float32)
                weights[key] = np.ascontiguousarray(np.broadcast_to(a, trail).reshape(-1))
                bufs.append(("weight", key))
            else:
                bufs.append(("in", idx))
        bufs += [("out", j) for j, r in enumerate(op.results) if isinstance(r.type, RankedTensorType)]
        return KernelPlan(symbol, bufs, weights, bytes=2 * rows * n * _np(op.operands[0].type).itemsize)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        rows, n, _ = self._geo(op)
        x_dt = _np(op.operands[0].type)
        ct = compute_float(x_dt)
        eps = float(op.attr("epsilon"))
        k = Kernel(module, plan.symbol)
        b = k.b
        ptr: dict[Any, tuple[Any, Any]] = {}
        for j, (kind, key) in enumerate(plan.buffers):
            if kind == "weight":
                ptr[key] = (k.buf(j, F32), np.dtype(np.float32))
            elif kind == "in" and key > 0:
                dt = _np(op.operands[key].type)
                ptr["w" if key == 1 else "b"] = (k.buf(j, storage_type(dt)), dt)
            elif kind == "out":
                dt = _np(op.results[key].type)
                ptr[("out", key)] = (k.buf(j, storage_type(dt)), dt)
        x = k.buf(0, storage_type(x_dt))
        out, o_dt = ptr[("out", 0)]
        lo, hi = k.share(rows)
        with k.loop(lo, hi, "row") as row:
            xr, orow = b.gep(x, [b.mul(row, const(n))]), b.gep(out, [b.mul(row, const(n))])
            s = _reduce(
                k, n, fconst(0.0, ct), lambda i, a: b.fadd(a, load_float(b, b.gep(xr, [i]), x_dt, ct))
            )
            mean = b.fdiv(s, fconst(n, ct))

            def sq(i: Any, a: Any) -> Any:
                d = b.fsub(load_float(b, b.gep(xr, [i]), x_dt, ct), mean)
                return b.fadd(a, b.fmul(d, d))

            var = b.fdiv(_reduce(k, n, fconst(0.0, ct), sq), fconst(n, ct))
            inv = b.fdiv(
                fconst(1.0, ct), b.call(intrinsic(module, "llvm.sqrt", ct), [b.fadd(var, fconst(eps, ct))])
            )
            for j, v in ((1, mean), (2, inv)):
                if ("out", j) in ptr:
                    p, dt = ptr[("out", j)]
                    store_float(b, b.fptrunc(v, F32) if v.type == F64 else v, b.gep(p, [row]), dt)
            with k.loop(0, n, "i") as i:
                y = b.fmul(b.fsub(load_float(b, b.gep(xr, [i]), x_dt, ct), mean), inv)
                if "w" in ptr:
                    p, dt = ptr["w"]
                    y = b.fmul(y, load_float(b, b.gep(p, [i]), dt, ct))
                if "b" in ptr:
                    p, dt = ptr["b"]
                    y = b.fadd(y, load_float(b, b.gep(p, [i]), dt, ct))
                store_float(b, y, b.gep(orow, [i]), o_dt)
        k.finish()


#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [Softmax(), LayerNorm()]

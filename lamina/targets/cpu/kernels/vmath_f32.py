"""Inline f32 math without a library call: ``exp`` (Cephes' ``expf``), ``erf`` (Abramowitz & Stegun
7.1.26) and the erf GELU. One emitter for a scalar ``f32`` (the generic elementwise kernels', which
the loop vectorizer can widen — a C library ``expf`` it cannot) and an f32 vector (the fast float
templates', a whole vector at a time): the same formulas, constants and operation order lane by lane.
Each takes the IR builder, the module (for the intrinsics' declarations) and the value."""

from __future__ import annotations

import math
from typing import Any

from llvmlite import ir

from .irconst import splat

__all__ = ["htree", "vexp", "verf", "vgelu"]

F32 = ir.FloatType()
I32 = ir.IntType(32)


def _k(x: float, t: ir.Type) -> ir.Constant:
    """The constant ``x`` of type ``t`` (an f32, or every lane of an f32 vector: made once,
    :mod:`.irconst`)."""
    if isinstance(t, ir.VectorType):
        return splat(F32, float(x), t.count)
    return ir.Constant(t, float(x))


def _intrinsic(m: ir.Module, name: str, t: ir.Type, nargs: int = 1) -> ir.Function:
    """``llvm.<name>`` overloaded on ``t`` (``.f32`` / ``.v16f32``), declared once per module."""
    name = f"{name}.v{t.count}f32" if isinstance(t, ir.VectorType) else f"{name}.f32"
    g = m.globals.get(name)
    if g is None:
        g = ir.Function(m, ir.FunctionType(t, [t] * nargs), name)
    return g  # type: ignore[no-any-return]


def vexp(b: ir.IRBuilder, m: ir.Module, x: ir.Value, zero_below: bool = False) -> ir.Value:
    """``exp(x)``: ``x`` clamped to [-87.33654, 88.37626], ``n = rint(x log2 e)``, ``r = x - n ln 2``
    in two parts, a degree-7 polynomial, times ``2**n`` built in the exponent bits (within 2 ulp of
    ``expf`` in range). ``zero_below``: 0 below the range (``exp(-inf) = 0``, for a softmax) instead
    of the clamp's ``exp(-87.34)``."""
    t = x.type
    lo, hi = _k(-87.33654, t), _k(88.3762626647949, t)
    under = b.fcmp_ordered("<", x, lo)
    xc = b.select(under, lo, x)
    xc = b.select(b.fcmp_ordered(">", xc, hi), hi, xc)
    n = b.call(_intrinsic(m, "llvm.rint", t), [b.fmul(xc, _k(1.44269504088896341, t))])
    r = b.fsub(b.fsub(xc, b.fmul(n, _k(0.693359375, t))), b.fmul(n, _k(-2.12194440e-4, t)))
    p = _k(1.9875691500e-4, t)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = b.fadd(b.fmul(p, r), _k(c, t))
    y = b.fadd(b.fadd(b.fmul(p, b.fmul(r, r)), r), _k(1.0, t))
    it = ir.VectorType(I32, t.count) if isinstance(t, ir.VectorType) else I32
    bits = b.shl(b.add(b.fptosi(n, it), _int(127, it)), _int(23, it))
    res = b.fmul(y, b.bitcast(bits, t))
    return b.select(under, _k(0.0, t), res) if zero_below else res


def _int(v: int, t: ir.Type) -> ir.Constant:
    return ir.Constant(t, [v] * t.count) if isinstance(t, ir.VectorType) else ir.Constant(t, v)


def verf(b: ir.IRBuilder, m: ir.Module, z: ir.Value) -> ir.Value:
    """``erf(z)``: ``1 - t (a1 + t (a2 + ...)) exp(-z^2)``, ``t = 1 / (1 + p|z|)``, with ``z``'s sign
    (absolute error <= 1.5e-7 plus f32 rounding)."""
    vt = z.type
    az = b.call(_intrinsic(m, "llvm.fabs", vt), [z])
    t = b.fdiv(_k(1.0, vt), b.fadd(_k(1.0, vt), b.fmul(_k(0.3275911, vt), az)))
    p = _k(1.061405429, vt)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        p = b.fadd(b.fmul(p, t), _k(c, vt))
    e = vexp(b, m, b.fneg(b.fmul(az, az)))
    y = b.fsub(_k(1.0, vt), b.fmul(b.fmul(p, t), e))
    return b.call(_intrinsic(m, "llvm.copysign", vt, 2), [y, z])


def vgelu(b: ir.IRBuilder, m: ir.Module, x: ir.Value) -> ir.Value:
    """``0.5 x (1 + erf(x / sqrt 2))`` (``tpu.GELU``, ``approximate = "none"``)."""
    t = x.type
    half = b.fmul(_k(0.5, t), x)
    er = verf(b, m, b.fmul(x, _k(1.0 / math.sqrt(2.0), t)))
    return b.fmul(half, b.fadd(_k(1.0, t), er))


def htree(b: ir.IRBuilder, v: ir.Value, op: Any) -> ir.Value:
    """The lanes of vector ``v`` combined by halving (``op(lo, hi)`` combines two half vectors),
    the result as a scalar."""
    n = v.type.count
    while n > 1:
        h = n // 2
        lo = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, h), list(range(h))))
        hi = b.shuffle_vector(v, v, ir.Constant(ir.VectorType(I32, h), list(range(h, n))))
        v = op(lo, hi)
        n = h
    return b.extract_element(v, ir.Constant(I32, 0))

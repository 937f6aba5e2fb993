"""Inline f32 vector math for the fast float templates (no library call, so a whole vector at a time):
``exp`` (Cephes' ``expf``), ``erf`` (Abramowitz & Stegun 7.1.26) and the erf GELU — the same
formulas, constants and operation order as the generic elementwise kernels' scalar ones
(:func:`.generic._exp_f32`, :func:`.generic._erf_f32`, :func:`.generic._gelu`), lane by lane. Each
takes the IR builder, the module (for the intrinsics' declarations) and an f32 vector."""

from __future__ import annotations

import math

from llvmlite import ir

from .irconst import splat

__all__ = ["vexp", "verf", "vgelu"]

F32 = ir.FloatType()
I32 = ir.IntType(32)


def _k(x: float, n: int) -> ir.Constant:
    return splat(F32, float(x), n)


def _intrinsic(m: ir.Module, name: str, vt: ir.Type, nargs: int = 1) -> ir.Function:
    g = m.globals.get(name)
    if g is None:
        g = ir.Function(m, ir.FunctionType(vt, [vt] * nargs), name)
    return g  # type: ignore[no-any-return]


def vexp(b: ir.IRBuilder, m: ir.Module, x: ir.Value, zero_below: bool = False) -> ir.Value:
    """``exp(x)``: ``x`` clamped to [-87.33654, 88.37626], ``n = rint(x log2 e)``, ``r = x - n ln 2``
    in two parts, a degree-7 polynomial, times ``2**n`` built in the exponent bits (within 2 ulp of
    ``expf`` in range). ``zero_below``: 0 below the range (``exp(-inf) = 0``, for a softmax) instead
    of the clamp's ``exp(-87.34)``."""
    vt = x.type
    n_l = vt.count
    lo, hi = _k(-87.33654, n_l), _k(88.3762626647949, n_l)
    under = b.fcmp_ordered("<", x, lo)
    xc = b.select(under, lo, x)
    xc = b.select(b.fcmp_ordered(">", xc, hi), hi, xc)
    n = b.call(_intrinsic(m, f"llvm.rint.v{n_l}f32", vt), [b.fmul(xc, _k(1.44269504088896341, n_l))])
    r = b.fsub(b.fsub(xc, b.fmul(n, _k(0.693359375, n_l))), b.fmul(n, _k(-2.12194440e-4, n_l)))
    p = _k(1.9875691500e-4, n_l)
    for c in (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1):
        p = b.fadd(b.fmul(p, r), _k(c, n_l))
    y = b.fadd(b.fadd(b.fmul(p, b.fmul(r, r)), r), _k(1.0, n_l))
    it = ir.VectorType(I32, n_l)
    bits = b.shl(b.add(b.fptosi(n, it), ir.Constant(it, [127] * n_l)), ir.Constant(it, [23] * n_l))
    res = b.fmul(y, b.bitcast(bits, vt))
    return b.select(under, _k(0.0, n_l), res) if zero_below else res


def verf(b: ir.IRBuilder, m: ir.Module, z: ir.Value) -> ir.Value:
    """``erf(z)``: ``1 - t (a1 + t (a2 + ...)) exp(-z^2)``, ``t = 1 / (1 + p|z|)``, with ``z``'s sign
    (absolute error <= 1.5e-7 plus f32 rounding)."""
    vt = z.type
    n_l = vt.count
    az = b.call(_intrinsic(m, f"llvm.fabs.v{n_l}f32", vt), [z])
    t = b.fdiv(_k(1.0, n_l), b.fadd(_k(1.0, n_l), b.fmul(_k(0.3275911, n_l), az)))
    p = _k(1.061405429, n_l)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        p = b.fadd(b.fmul(p, t), _k(c, n_l))
    e = vexp(b, m, b.fneg(b.fmul(az, az)))
    y = b.fsub(_k(1.0, n_l), b.fmul(b.fmul(p, t), e))
    return b.call(_intrinsic(m, f"llvm.copysign.v{n_l}f32", vt, 2), [y, z])


def vgelu(b: ir.IRBuilder, m: ir.Module, x: ir.Value) -> ir.Value:
    """``0.5 x (1 + erf(x / sqrt 2))`` (``tpu.GELU``, ``approximate = "none"``)."""
    n_l = x.type.count
    half = b.fmul(_k(0.5, n_l), x)
    er = verf(b, m, b.fmul(x, _k(1.0 / math.sqrt(2.0), n_l)))
    return b.fmul(half, b.fadd(_k(1.0, n_l), er))

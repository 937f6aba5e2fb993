"""The inline f32 vector math (lamina/targets/cpu/kernels/vmath_f32.py) and the GELU it lets the F32
MatMul fuse (gemm_f32.MatMulF32.fuses):

* ``vexp`` within 2 ulp of numpy's ``exp`` over [-87, 88], 0 below with ``zero_below`` (``-inf``
  included), NaN propagated; ``vgelu`` within ``3e-7 |x| + 1e-37`` of ``0.5 x (1 + erf(x/sqrt 2))``
  (``math.erf``) over [-30, 30] — on AVX-512, AVX2 and 16-byte vectors, and on scalars (the
  generic elementwise kernels' Sigmoid / SiLU / GELU);
* a compiled F32 model MatMul -> GELU -> MatMul (ragged sizes: column tails, a row tail) against
  the ``tpu`` interpreter within 1e-4 relative, with the GELU inside the first matmul's kernel."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llvmlite import ir

import lamina.dialects
import lamina.runtime as rt
import lamina.targets  # noqa: F401
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.quant.deploy import deploy_module, run_tpu_module
from lamina.targets.base import CompileOptions
from lamina.targets.container import write_model
from lamina.targets.cpu import target
from lamina.targets.cpu.jit import run_kernel
from lamina.targets.cpu.kernels.abi import Isa, KernelPlan, Template
from lamina.targets.cpu.kernels.gemm_f32 import Fn
from lamina.targets.cpu.kernels.vmath_f32 import vexp, vgelu

ISAS = [None, Isa(32, frozenset({"avx2", "fma"})), Isa(16)]


class _Apply(Template):
    """A test kernel: ``out[i] = f(x[i])`` over ``n`` f32 (a multiple of the vector)."""

    name = "test.vmath"

    def __init__(self, f: Any, n: int, scalar: bool = False) -> None:
        self.f, self.n, self.scalar = f, n, scalar

    def matches(self, op: Any, isa: Isa) -> bool:
        return True

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        return KernelPlan(symbol, [("in", 0), ("out", 0)])

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        ln = 1 if self.scalar else isa.vector_bytes // 4
        fn = Fn(module, plan.symbol)
        x, y = fn.buf(0), fn.buf(1)

        def body(i: ir.Value, _c: Any) -> None:
            off = fn.mul(i, ln)
            if self.scalar:  # the generic elementwise kernels' form: one f32 at a time
                fn.b.store(self.f(fn, fn.b.load(fn.at(x, off), typ=ir.FloatType())), fn.at(y, off))
            else:
                fn.vstore(self.f(fn, fn.vload(fn.at(x, off), ln)), fn.at(y, off))

        fn.loop(0, self.n // ln, body)
        fn.ret()


def _apply(f: Any, x: np.ndarray, isa: Isa | str | None) -> np.ndarray:
    y = np.zeros_like(x)
    t = _Apply(f, x.size, scalar=isa == "scalar")
    run_kernel(t, None, {("in", 0): x, ("out", 0): y}, isa=None if isa == "scalar" else isa)
    return y


@pytest.mark.parametrize("isa", [*ISAS, "scalar"], ids=["host", "avx2", "sse", "scalar"])
def test_vexp_and_vgelu(isa: Isa | str | None) -> None:
    x = np.concatenate([np.linspace(-87, 88, 4000, dtype=np.float32), np.float32([-np.inf, -100, np.nan, 0])])
    x = np.ascontiguousarray(np.resize(x, 4016))  # a multiple of 16 lanes
    e = _apply(lambda fn, v: vexp(fn.b, fn.m, v, zero_below=True), x, isa)
    ref = np.exp(x.astype(np.float64))
    ok = np.isfinite(x) & (x > -87)
    assert np.all(np.abs(e[ok] - ref[ok]) <= 2 * np.spacing(ref[ok].astype(np.float32)))
    assert np.all(e[x <= -88] == 0) and np.isnan(e[np.isnan(x)]).all()
    z = np.ascontiguousarray(np.linspace(-30, 30, 4800, dtype=np.float32))
    g = _apply(lambda fn, v: vgelu(fn.b, fn.m, v), z, isa)
    want = np.array([0.5 * float(v) * (1 + math.erf(float(v) / math.sqrt(2))) for v in z])
    assert np.all(np.abs(g - want) <= 3e-7 * np.abs(z) + 1e-37)


TOP = """
func.func @main(%x: tensor<1x13x40xf32>) -> tensor<1x13x24xf32> {
  %in = "top.Input"(%x) : (tensor<1x13x40xf32>) -> tensor<1x13x40xf32> loc("x")
  %w1 = "top.Weight"() <{value = dense<W1> : tensor<40x72xf32>}> : () -> tensor<40x72xf32>
  %b1 = "top.Weight"() <{value = dense<B1> : tensor<72xf32>}> : () -> tensor<72xf32>
  %m = "top.MatMul"(%in, %w1, %b1) : (tensor<1x13x40xf32>, tensor<40x72xf32>, tensor<72xf32>) -> tensor<1x13x72xf32> loc("m")
  %h = "top.GELU"(%m) : (tensor<1x13x72xf32>) -> tensor<1x13x72xf32> loc("h")
  %w2 = "top.Weight"() <{value = dense<W2> : tensor<72x24xf32>}> : () -> tensor<72x24xf32>
  %none = "top.None"() : () -> none
  %o = "top.MatMul"(%h, %w2, %none) : (tensor<1x13x72xf32>, tensor<72x24xf32>, none) -> tensor<1x13x24xf32> loc("o")
  return %o : tensor<1x13x24xf32>
}
"""


def _dense(a: np.ndarray) -> str:
    def text(x: np.ndarray) -> str:
        return repr(float(x)) if x.ndim == 0 else "[" + ", ".join(text(y) for y in x) + "]"

    return text(np.asarray(a, np.float64))


@pytest.mark.parametrize("isa", ["host", "avx2"])
def test_matmul_gelu_fused_model_matches_the_interpreter(isa: str, tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    src = TOP
    for key, shape in (("W1", (40, 72)), ("B1", (72,)), ("W2", (72, 24))):
        src = src.replace(key, _dense((rng.standard_normal(shape) * 0.3).astype(np.float32)))
    tpu = deploy_module(parse_module(src, Context()), "F32")
    x = {"x": (rng.standard_normal((1, 13, 40)) * 2).astype(np.float32)}
    want = next(iter(run_tpu_module(tpu, x).values()))
    res = target(isa=isa).compile(tpu, CompileOptions(name="ffn", mode="F32"))
    kernels = res.model.metadata["kernels"]
    assert [k["template"] for k in kernels if not k["alias"]] == ["matmul_f32", "matmul_f32"]
    path = tmp_path / "ffn.lamina"
    write_model(path, res.model)
    got = next(iter(rt.load(path).run(x).values()))
    tol = 1e-4 * float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=0, atol=tol)

"""The CPU target's int16 templates (``lamina/targets/cpu/kernels/gemm_int16.py``): the int16 x int8
MatMul (the ``lut16`` / ``wide_input`` forms: int8 or uint8 input with an int16 result, int16 input
with an int8 or int16 result) and ``tpu.Lut16``, compiled for the host with llvmlite and called
through ctypes (``int8_harness``: canary bytes around the output) for every part of ``nparts``,
equal to the ``tpu`` op's ``execute`` **bit for bit** — over random shapes, zero points, per-column
and per-tensor requantization, relu, extreme values (int32 accumulations that wrap) — with the
host's ISA and narrower ones forced (AVX2 width without VNNI, 16-byte vectors, 512-bit without
VNNI, 256-bit VNNI). Hypothesis examples are derandomized."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled, host_isa
from tpu_cases import arr, dense, op, per_axis, q8, t

from lamina.dialects.tpu.quantize import quantize_multiplier
from lamina.ir.constants import constant_array
from lamina.targets.cpu.kernels import candidates
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.gemm_int8 import Int8MatMul, vnni
from lamina.targets.cpu.kernels.gemm_int16 import Int16MatMul, Lut16, vnni16

HOST = host_isa()
ISAS = [
    HOST,
    Isa(32, frozenset({"fma", "avx2"})),
    Isa(16),
    Isa(64, frozenset({"avx512f", "avx512bw"})),
]
if HOST.has("avx512vnni") and HOST.has("avx512vl"):
    ISAS.append(Isa(32, frozenset({"avxvnni", "fma", "avx2"})))
ISA_IDS = ["host", "avx2", "v16", "avx512-novnni", "avxvnni"][: len(ISAS)]
SETTINGS = settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


def q16(scale: float, limit: int | None = None) -> str:
    rng = "i16" if limit is None else f"i16<-{limit}:{limit}>"
    return f"!quant.uniform<{rng}:f32, {float(scale)!r}>"


def _mults(rng: np.random.Generator, n: int, lo: float, hi: float) -> tuple[list[int], list[int]]:
    pairs = [quantize_multiplier(float(r)) for r in np.exp(rng.uniform(np.log(lo), np.log(hi), n))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def matmul16(
    rng: np.random.Generator,
    ashape: tuple[int, ...],
    n: int,
    kind: str,
    per_channel: bool,
    bias: str,
    relu: bool = False,
    wfill: str = "rand",
    per_axis_out: bool = False,
    big: bool = False,
) -> Any:
    """A ``tpu.MatMul`` of ``kind``: ``i8>i16`` / ``asym>i16`` / ``u8>i16`` (8-bit input, int16
    result: ``lut16``'s MatMul), ``i16>i8`` / ``i16>i16`` (int16 input: ``wide_input``, or a
    ``Lut16``'s int16 result read by the next MatMul)."""
    k = ashape[-1]
    src, dst = kind.split(">")
    in_t = {
        "i8": q8(True, 0.05),
        "asym": q8(True, 0.05, 37),
        "u8": q8(False, 0.05, 3),
        "i16": q16(1e-4, 11008),
    }[src]
    if wfill == "rand":
        w = rng.integers(-127, 128, (k, n)).astype(np.int8)
    else:
        w = np.full((k, n), -128 if wfill == "min" else 127, np.int8)
    operands: list[Any] = [
        t(ashape, in_t),
        ("const", dense(w), t((k, n), per_axis([0.01] * n, 1)), t((k, n), "i8")),
        None,
    ]
    if bias != "none":
        lim = 2**31 - 1 if bias == "huge" else 50000
        operands[2] = ("const", dense(rng.integers(-lim, lim, (n,)).astype(np.int32)), t((n,), "i32"))
    mm, r = _mults(rng, n if per_channel or per_axis_out else 1, 1e-9 if big else 1e-4, 0.9 if big else 0.5)
    attrs = [arr("multiplier", mm), arr("rshift", r)]
    if relu:
        attrs.append("do_relu = true")
    oshape = (*ashape[:-1], n)
    if per_axis_out:
        out_t = per_axis([0.02 + 0.001 * i for i in range(n)], len(oshape) - 1, weight=False)
    elif dst == "i16":
        out_t = q16(2e-4)
    else:
        out_t = q8(True, 0.02, 0 if relu else -3)
    return op("tpu.MatMul", operands, t(oshape, out_t), ", ".join(attrs))


def _act(rng: np.random.Generator, o: Any, fill: str) -> np.ndarray:
    from lamina.dialects.tpu.quantize import qparams, storage_dtype

    ty = o.operands[0].type
    lo, hi = qparams(ty)[3:]
    shape = tuple(ty.shape)
    if fill in ("min", "max"):
        return np.full(shape, lo if fill == "min" else hi).astype(storage_dtype(ty.element_type))
    return rng.integers(lo, hi + 1, shape).astype(storage_dtype(ty.element_type))


def check(o: Any, x: np.ndarray, isa: Isa, tpl: Any = None, nparts: tuple[int, ...] = (1, 2, 3)) -> None:
    tpl = tpl or Int16MatMul()
    assert tpl.matches(o, isa)
    ins = [x] + [constant_array(v) if str(v.type) != "none" else None for v in o.operands[1:]]
    ref = o.execute(ins)[0]
    c = Compiled(tpl, o, isa)
    c.expect([x], ref, nparts)


@st.composite
def cases(draw: Any) -> tuple[Any, np.ndarray]:
    rank = draw(st.integers(2, 3))
    ashape = (
        *tuple(draw(st.integers(1, 3)) for _ in range(rank - 2)),
        draw(st.integers(1, 20)),
        draw(st.integers(1, 150)),
    )
    n = draw(st.integers(1, 80))
    kind = draw(st.sampled_from(["i8>i16", "asym>i16", "u8>i16", "i16>i8", "i16>i16"]))
    fill = draw(st.sampled_from(["rand", "rand", "min", "max"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    o = matmul16(
        rng, ashape, n, kind, draw(st.booleans()), draw(st.sampled_from(["none", "small", "huge"])),
        draw(st.booleans()), draw(st.sampled_from(["rand", "min", "max"])),
        kind.endswith("i8") and draw(st.booleans()), big=fill != "rand",
    )  # fmt: skip
    return o, _act(rng, o, fill)


@SETTINGS
@given(case=cases())
def test_int16_matmul_bit_exact(case: tuple[Any, np.ndarray]) -> None:
    check(*case, HOST)


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_int16_matmul_narrower_isa(isa: Isa, case: tuple[Any, np.ndarray]) -> None:
    check(*case, isa, nparts=(1, 3))


def test_int16_matmul_ffn_shapes_and_wrap() -> None:
    """MiniLM's FFN shapes (128 x 384 x 1536 into int16, 128 x 1536 x 384 from int16) and an
    accumulation that wraps (K = 70000 of 32767 x 127)."""
    rng = np.random.default_rng(1)
    o = matmul16(rng, (128, 384), 1536, "i8>i16", True, "small")
    check(o, _act(rng, o, "rand"), HOST, nparts=(1, 2))
    o = matmul16(rng, (1, 128, 1536), 384, "i16>i8", True, "small")
    check(o, _act(rng, o, "rand"), HOST, nparts=(1, 2))
    o = matmul16(rng, (3, 70000), 17, "i16>i16", True, "huge", wfill="max", big=True)
    x = np.full((3, 70000), 11008, np.int16)
    check(o, x, HOST, nparts=(1, 2))


def test_selection_and_what_it_refuses() -> None:
    rng = np.random.default_rng(0)
    o16 = matmul16(rng, (4, 8), 5, "i8>i16", True, "small")
    assert candidates(o16, HOST)[0].name == "int16-matmul" and not Int8MatMul().matches(o16, HOST)
    # a pure int8 MatMul stays on the int8 GEMM
    o8 = op(
        "tpu.MatMul",
        [
            t((4, 8), q8(True, 0.05)),
            ("const", dense(np.ones((8, 5), np.int8)), t((8, 5), per_axis([0.01] * 5, 1)), t((8, 5), "i8")),
            None,
        ],
        t((4, 5), q8(True, 0.1)),
        ", ".join([arr("multiplier", [1 << 30]), arr("rshift", [3])]),
    )
    assert not Int16MatMul().matches(o8, HOST) and candidates(o8, HOST)[0].name == "int8-matmul"
    # activation x activation (no constant weight): the generic path
    aa = op(
        "tpu.MatMul",
        [t((2, 8), q16(1e-3)), t((8, 4), q8(True, 0.05)), None],
        t((2, 4), q16(1e-3)),
        ", ".join([arr("multiplier", [1 << 30]), arr("rshift", [3])]),
    )
    assert not Int16MatMul().matches(aa, HOST)


def test_vnni_only_where_present() -> None:
    from llvmlite import ir

    rng = np.random.default_rng(0)
    o = matmul16(rng, (4, 40), 20, "i16>i16", True, "small")
    for isa in ISAS:
        tpl = Int16MatMul()
        plan = tpl.plan(o, "k", isa)
        mod = ir.Module("m")
        tpl.emit(mod, plan, o, isa)
        assert ("vpdpwssd" in str(mod)) == vnni16(isa), isa
    # an 8-bit input runs on bytes (vpdpbusd) where VNNI is, on int16 pairs elsewhere
    o = matmul16(rng, (4, 40), 20, "asym>i16", True, "small")
    for isa in ISAS:
        tpl = Int16MatMul()
        plan = tpl.plan(o, "k", isa)
        mod = ir.Module("m")
        tpl.emit(mod, plan, o, isa)
        assert ("vpdpbusd" in str(mod)) == vnni(isa) and "vpdpwssd" not in str(mod), isa


# ---- Lut16 -------------------------------------------------------------------------------------


def lut16_op(rng: np.random.Generator, shape: tuple[int, ...], out: str) -> Any:
    lo, hi = {"i8": (-128, 127), "u8": (0, 255), "i16": (-11008, 11008)}[out]
    table = rng.integers(lo, hi + 1, 65536)
    out_t = {"i8": q8(True, 0.05, -3), "u8": q8(False, 0.05, 7), "i16": q16(1e-3, 11008)}[out]
    return op(
        "tpu.Lut16", [t(shape, q16(2e-4))], t(shape, out_t), f"table = {dense(table)} : tensor<65536xi32>"
    )


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(
    shape=st.lists(st.integers(1, 40), min_size=1, max_size=3).map(tuple),
    out=st.sampled_from(["i8", "u8", "i16"]),
    seed=st.integers(0, 2**31),
    isa=st.sampled_from(ISAS),
)
def test_lut16_bit_exact(shape: tuple[int, ...], out: str, seed: int, isa: Isa) -> None:
    rng = np.random.default_rng(seed)
    o = lut16_op(rng, shape, out)
    x = rng.integers(-32768, 32768, shape).astype(np.int16)
    x.reshape(-1)[:2] = [-32768, 32767][: x.size]  # both ends of the table
    check(o, x, isa, Lut16(), nparts=(1, 3))

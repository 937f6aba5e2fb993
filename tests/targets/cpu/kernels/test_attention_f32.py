"""The fast F32 attention template (lamina/targets/cpu/kernels/attention_f32.py) against
``tpu.Attention``'s ``execute``: random 3-d and 4-d shapes (query rows not a multiple of the row
block, key counts not a multiple of the vector, head sizes across vector tails), every mask form the
lowering produces (none, ``(B,1,1,Skv)``, ``(Skv,)``, ``(Sq,Skv)``, full), causal, an explicit
scale, grouped heads; on AVX-512, an AVX2 ``Isa(32)`` and 16-byte ``Isa(16)`` vectors, on 1 and 3
parts; F32, and BF16/F16 against ``execute`` on the operands widened to f32. Tolerance:
``|got - ref| <= 1e-4 * max(1, max|ref|)`` (sums in another order), plus one unit in the last place
of a 2-byte result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
from tpu_cases import FLOATS, build, fl, t

from lamina.targets.cpu.jit import host_spec, run_kernel
from lamina.targets.cpu.kernels import candidates
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.attention_f32 import AttentionF32

ISAS = [None, Isa(32, frozenset({"avx2", "fma", "f16c"})), Isa(16)]
TEMPLATE = AttentionF32()


def attention(
    b: int, hq: int, hk: int, sq: int, skv: int, d: int, dv: int, mask: str, three_d: bool, causal: bool,
    scale: float | None, rng: np.random.Generator, ft: str = "f32",
) -> tuple[Any, list[Any]]:  # fmt: skip
    if three_d:
        q_s, k_s, v_s, o_s = (b, sq, hq * d), (b, skv, hk * d), (b, skv, hk * dv), (b, sq, hq * dv)
    else:
        q_s, k_s, v_s, o_s = (b, hq, sq, d), (b, hk, skv, d), (b, hk, skv, dv), (b, hq, sq, dv)
    m_s = {"none": None, "b11n": (b, 1, 1, skv), "n": (skv,), "mn": (sq, skv), "full": (b, hq, sq, skv)}[mask]
    ins: list[Any] = [fl(rng, s, ft) for s in (q_s, k_s, v_s)]
    if m_s is None:
        ins.append(None)
    else:
        m = (rng.standard_normal(m_s) * 2).astype(np.float32)
        m[rng.random(m_s) < 0.2] = -1e4  # padding positions, as BERT's mask
        ins.append(m.astype(FLOATS[ft]))
    attrs = []
    if scale is not None:
        attrs.append(f"scale = {scale!r} : f64")
    if three_d:
        attrs += [f"q_num_heads = {hq} : i64", f"kv_num_heads = {hk} : i64"]
    if causal:
        attrs.append("is_causal = true")
    operands = [t(q_s, ft), t(k_s, ft), t(v_s, ft), t(m_s, ft) if m_s else None, None, None, None]
    o = build("tpu.Attention", operands, [t(o_s, ft), "none", "none", "none"], ", ".join(attrs))
    return o, [*ins, None, None, None]


def _converts(ft: str, isa: Isa) -> bool:
    """Whether the template takes operands of ``ft`` on ``isa`` (2-byte floats: where the CPU
    converts them in vectors)."""
    if ft == "bf16":
        return isa.has("avx512bf16") and isa.vector_bytes >= 64
    if ft == "f16":
        return isa.has("f16c") and isa.vector_bytes >= 32
    return True


def _check(o: Any, ins: list[Any], isa: Isa | None, nparts: int) -> None:
    """The kernel against ``execute``; for 2-byte operands against ``execute`` on the operands
    widened to f32 (the kernel computes in f32; ``execute`` rounds every step to the 2-byte type),
    within 1e-4 plus one unit in the last place of the result type."""
    assert TEMPLATE.matches(o, isa or host_spec().isa)
    dt = ins[0].dtype
    if dt == np.float32:
        want = np.asarray(o.execute(ins)[0])
    else:
        wide = [None if v is None else np.asarray(v, np.float32) for v in ins]
        want = np.asarray(o.execute(wide)[0], np.float32)
    bufs = {("in", i): np.ascontiguousarray(v) for i, v in enumerate(ins[:4]) if v is not None}
    got = np.full(want.shape, np.nan, np.float32).astype(dt)
    bufs[("out", 0)] = got
    run_kernel(TEMPLATE, o, bufs, isa=isa, nparts=nparts)
    ulp = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0**-10}.get(np.dtype(dt), 2.0**-7)
    tol = 1e-4 * max(1.0, float(np.abs(want).max())) + ulp * np.abs(want)
    assert np.all(np.abs(got.astype(np.float32) - want) <= tol), np.abs(got.astype(np.float32) - want).max()


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_attention_f32_matches_execute(data: Any) -> None:
    b, hk = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3))
    hq = hk * data.draw(st.sampled_from([1, 1, 2]))
    sq, skv = data.draw(st.integers(1, 21)), data.draw(st.integers(1, 40))
    d, dv = data.draw(st.integers(1, 40)), data.draw(st.integers(1, 70))
    mask = data.draw(st.sampled_from(["none", "b11n", "n", "mn", "full"]))
    three_d = data.draw(st.booleans())
    # causal rows with a visible key each; the causal bias broadcasts with a mask of any form
    causal = data.draw(st.booleans()) and sq <= skv
    scale = data.draw(st.sampled_from([None, 0.375]))
    ft = data.draw(st.sampled_from(["f32", "f32", "bf16", "f16"]))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    o, ins = attention(b, hq, hk, sq, skv, d, dv, mask, three_d, causal, scale, rng, ft)
    isa = data.draw(st.sampled_from(ISAS))
    if not _converts(ft, isa or host_spec().isa):
        assert not TEMPLATE.matches(o, isa or host_spec().isa)  # the generic template's
        return
    _check(o, ins, isa, data.draw(st.sampled_from([1, 3])))


@pytest.mark.parametrize("isa", ISAS, ids=["host", "avx2", "sse"])
@pytest.mark.parametrize("shape", [(12, 64, 64, 32, 32), (12, 128, 128, 64, 64), (2, 5, 77, 48, 20)])
def test_attention_f32_model_shapes(isa: Isa | None, shape: tuple[int, ...]) -> None:
    """MiniLM's (12 heads, 64 tokens, 32 per head) and BERT-base's (128 tokens, 64 per head) attention
    with their ``(B, 1, 1, S)`` padding mask, and a ragged one."""
    h, sq, skv, d, dv = shape
    o, ins = attention(1, h, h, sq, skv, d, dv, "b11n", False, False, None, np.random.default_rng(0))
    _check(o, ins, isa, 2)


def test_attention_f32_fully_masked_row_is_nan_as_execute() -> None:
    """A row whose every key is masked with -inf: ``execute`` divides 0 by 0; so does the kernel."""
    o, ins = attention(1, 1, 1, 3, 5, 4, 4, "mn", False, False, None, np.random.default_rng(1))
    ins[3] = np.zeros((3, 5), np.float32)
    ins[3][1] = -np.inf
    want = np.asarray(o.execute(ins)[0])
    got = np.zeros_like(want)
    bufs = {("in", i): np.ascontiguousarray(v) for i, v in enumerate(ins[:4])}
    bufs[("out", 0)] = got
    run_kernel(TEMPLATE, o, bufs, nparts=1)
    assert np.isnan(want[0, 0, 1]).all() and np.isnan(got[0, 0, 1]).all()
    np.testing.assert_allclose(got[0, 0, [0, 2]], want[0, 0, [0, 2]], rtol=0, atol=1e-5)


def test_attention_f32_is_chosen_for_float_attention() -> None:
    """The fast template takes F32, BF16 and F16 attention; mixed element types, a KV cache or
    extra results stay with the generic one."""
    rng = np.random.default_rng(2)
    isa = host_spec().isa
    for ft in ("f32", "bf16", "f16"):
        o, _ = attention(1, 2, 2, 4, 4, 8, 8, "b11n", False, False, None, rng, ft=ft)
        want = "attention_f32" if _converts(ft, isa) else "generic.attention"
        assert candidates(o, isa)[0].name == want
        if ft != "f32":  # no 2-byte conversions in 16-byte vectors: the generic template's
            assert candidates(o, Isa(16, isa.features))[0].name == "generic.attention"
    mixed = build(
        "tpu.Attention",
        [t((1, 2, 4, 8), "f32"), t((1, 2, 4, 8), "bf16"), t((1, 2, 4, 8), "f32"), None, None, None, None],
        [t((1, 2, 4, 8), "f32"), "none", "none", "none"],
    )
    assert not TEMPLATE.matches(mixed, isa)


def test_attention_f32_same_bits_on_any_part_count() -> None:
    """Each unit's result does not depend on which part computes it (a model's outputs are the same
    bits on any thread count)."""
    o, ins = attention(1, 3, 3, 19, 23, 16, 24, "b11n", True, False, None, np.random.default_rng(3))
    runs = []
    for nparts in (1, 2, 5):
        bufs = {("in", i): np.ascontiguousarray(v) for i, v in enumerate(ins[:4])}
        bufs[("out", 0)] = got = np.full((1, 19, 72), np.nan, np.float32)
        run_kernel(TEMPLATE, o, bufs, nparts=nparts)
        runs.append(got.tobytes())
    assert runs[0] == runs[1] == runs[2]

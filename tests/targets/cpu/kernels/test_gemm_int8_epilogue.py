"""The fused epilogues of the CPU target's INT8 conv templates (``lamina/targets/cpu/kernels/gemm_int8.py``):
the requantization (the int32 magnitude forms taken when every shift is at least 32, the i64 one
otherwise), a residual ``tpu.Add`` of the conv's result and another tensor (the int32 split-multiplier
form where its bounds allow, the i64 one otherwise) and a ``tpu.Lut`` after it — each kernel compiled
for the host (and narrower ISAs) and called through ctypes for 1, 2 and 3 parts equals the ops'
``execute`` chained, **bit for bit**, with canaries around the output. Random shapes, operand orders,
signedness, zero points, multipliers and shifts (ties included: shifts small enough that
``2**(S-1)`` is hit), relu bounds."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled, host_isa
from test_gemm_int8 import ISA_IDS, ISAS, SETTINGS, _act, _inputs, conv_op
from tpu_cases import arr, dense, q8

from lamina.ir.attributes import IntegerAttr
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation
from lamina.ir.types import i64
from lamina.targets.cpu.kernels.abi import Isa, Template
from lamina.targets.cpu.kernels.gemm_int8 import Int8Conv, Int8ConvChannels, fast_isa, residual_add

HOST = host_isa()


def _module_text(o: Any) -> str:
    m = o
    while m.parent_op() is not None:
        m = m.parent_op()
    return print_operation(m)


def with_residual(
    o: Any,
    rng: np.random.Generator,
    res_signed: bool,
    zp_res: int,
    out: tuple[bool, int],
    mults: tuple[int, int],
    rshift: int,
    swap: bool,
    lut: str | None,
) -> tuple[Any, Any, Any]:
    """``o``'s module (a conv) with ``tpu.Add(conv, r)`` (``r`` a new function argument of the conv's
    shape, quantized ``res_signed`` / ``zp_res``; ``swap``: ``Add(r, conv)``; the add's result
    ``out = (signed, zero point)``, multipliers ``mults`` (conv's, residual's) and ``rshift``) and,
    with ``lut`` (``"signed"`` / ``"unsigned"``), a random ``tpu.Lut`` after the add; ``cpu.fused``
    set on the reparsed conv as the compiler sets it. Returns (conv, add, lut or None)."""
    text = _module_text(o)
    ret = next(line for line in text.splitlines() if line.strip().startswith("return "))
    name, ty = ret.strip()[len("return ") :].split(" : ")
    shape = ty[len("tensor<") :].rsplit("x!quant", 1)[0]
    rty = f"tensor<{shape}x{q8(res_signed, 0.03, zp_res)}>"
    aty = f"tensor<{shape}x{q8(out[0], 0.05, out[1])}>"
    ops = [name, "%res"] if not swap else ["%res", name]
    tys = [ty, rty] if not swap else [rty, ty]
    m = [mults[0], mults[1]] if not swap else [mults[1], mults[0]]
    add = (
        f'    %add = "tpu.Add"({", ".join(ops)}) <{{{arr("multiplier", m)}, {arr("rshift", [rshift])}}}> '
        f": ({', '.join(tys)}) -> {aty}\n"
    )
    fin, fty = "%add", aty
    if lut is not None:
        ls = lut == "signed"
        fty = f"tensor<{shape}x{q8(ls, 0.03, 2 if ls else 0)}>"
        table = rng.integers(-128, 128, 256) if ls else rng.integers(0, 256, 256)
        tt = f"tensor<256x{'i8' if ls else 'ui8'}>"
        add += f'    %lut = "tpu.Lut"(%add) <{{table = {dense(table)} : {tt}}}> : ({aty}) -> {fty}\n'
        fin = "%lut"
    head = next(line for line in text.splitlines() if "func.func @main(" in line)
    new_head = head.replace("(%arg0: ", f"(%res: {rty}, %arg0: ").replace(f"-> {ty} {{", f"-> {fty} {{")
    text = text.replace(head, new_head).replace(ret, add + f"    return {fin} : {fty}")
    mod = parse_module(text, Context())
    assert mod is not None
    conv = next(x for x in mod.walk_ops() if x.name == "tpu.Conv")  # type: ignore[attr-defined]
    add_op = next(x for x in mod.walk_ops() if x.name == "tpu.Add")  # type: ignore[attr-defined]
    lut_op = next((x for x in mod.walk_ops() if x.name == "tpu.Lut"), None)  # type: ignore[attr-defined]
    assert Int8Conv().fuses(conv, add_op)
    if lut_op is not None:
        assert Int8Conv().fuses(conv, lut_op)
    conv.set_attr("cpu.fused", IntegerAttr(2 if lut_op is not None else 1, i64))
    assert residual_add(conv) is not None
    return conv, add_op, lut_op


def check_fused(
    tpl: Template,
    conv: Any,
    add: Any,
    lut: Any,
    x: np.ndarray,
    r: np.ndarray,
    isa: Isa,
    nparts: tuple[int, ...],
) -> Compiled:
    """The fused kernel's result equals ``lut(add(conv(x), r))`` (the ops' ``execute``) bit for bit."""
    assert tpl.matches(conv, isa)
    y = conv.execute(_inputs(conv, x))[0]
    first = add.operands[0] is conv.results[0]
    ins = [y, r] if first else [r, y]
    res = add.operands[1 if first else 0]
    ref = add.execute(ins)[0]
    if lut is not None:
        ref = lut.execute([ref])[0]
    c = Compiled(tpl, conv, isa)
    c.expect([x], ref, nparts, [(res, r)])
    return c


@st.composite
def residual_cases(draw: Any, channels: bool = False) -> tuple[Any, ...]:
    """A conv (1x1 or 3x3, stride 1 or 2, padded or not) with a fused residual add and maybe a Lut."""
    k = draw(st.sampled_from([1, 1, 3]))
    s = draw(st.sampled_from([1, 1, 2]))
    p = draw(st.integers(0, k // 2))
    hw = (draw(st.integers(k, 13)), draw(st.integers(k, 21)))
    cin = draw(st.integers(2, 20))
    cout = 16 * draw(st.integers(1, 2)) if channels else draw(st.integers(1, 20))
    mode = draw(st.sampled_from(["sym", "asym", "u8"]))
    relu = draw(st.sampled_from(["none", "none", "relu", "limit"]))
    seed = draw(st.integers(0, 2**31))
    rng = np.random.default_rng(seed)
    big = draw(st.booleans())
    o = conv_op(
        rng, draw(st.integers(1, 2)), cin, hw, cout, (k, k), (s, s), (1, 1), [p] * 4, 1, mode, relu, True,
        draw(st.sampled_from(["none", "small", "huge"])), big=big,
    )  # fmt: skip
    res_signed = draw(st.booleans())
    zp_res = draw(st.sampled_from([0, 0, -3, 7] if res_signed else [0, 0, 100]))
    out_signed = draw(st.booleans())
    zp_out = draw(st.sampled_from([0, 0, 5, -20] if out_signed else [0, 0, 40]))
    # the add's factors: as calibration gives them (near 2**30, rshift 0..2), or random (any size and
    # shift: small shifts make exact ties, large factors leave the int32 form for the i64 one)
    if draw(st.booleans()):
        mults = (int(rng.integers(2**28, 2**31)), int(rng.integers(2**28, 2**31)))
        rshift = draw(st.integers(-2, 2))
    else:
        mults = (int(rng.integers(0, 2**31)), int(rng.integers(0, 2**31)))
        rshift = draw(st.integers(-25, 12))
    form = draw(st.sampled_from(["as drawn", "small", "ties"]))
    if form == "small":
        mults = (mults[0] >> 20, mults[1] >> 18)
    elif form == "ties":  # multiples of 2**(S-3): exact halves are common
        rshift = draw(st.integers(-14, 0))
        # (below 2**31: a multiplier is a positive int32)
        mults = (int(rng.integers(0, 8)) << (28 + rshift), int(rng.integers(0, 8)) << (28 + rshift))
    lut = draw(st.sampled_from([None, "signed", "unsigned"]))
    conv, add, lut_op = with_residual(
        o, rng, res_signed, zp_res, (out_signed, zp_out), mults, rshift, draw(st.booleans()), lut
    )
    xshape = tuple(conv.operands[0].type.shape)
    fill = "rand" if not big else draw(st.sampled_from(["rand", "min", "max"]))
    x = _act(rng, xshape, mode != "u8", fill)
    r = _act(
        rng,
        tuple(conv.results[0].type.shape),
        res_signed,
        draw(st.sampled_from(["rand", "rand", "min", "max"])),
    )
    return conv, add, lut_op, x, r


@SETTINGS
@given(case=residual_cases())
def test_residual_bit_exact(case: tuple[Any, ...]) -> None:
    conv, add, lut, x, r = case
    check_fused(Int8Conv(), conv, add, lut, x, r, HOST, (1, 2, 3))


def test_residual_forms_taken() -> None:
    """Calibration-like factors take the int32 form (8 constants in ``ra``, then the fast form's 8),
    a shift of 6 the i64 one (per-channel tables); both exact."""
    rng = np.random.default_rng(3)
    for rshift, size in ((0, 16), (-25, 3 * 16)):
        o = conv_op(rng, 1, 8, (5, 9), 16, (1, 1), (1, 1), (1, 1), [0] * 4, 1, "sym", "none", True, "small")
        conv, add, lut = with_residual(
            o, rng, True, 0, (True, 0), (1 << 30, 3 << 28), rshift, False, "unsigned"
        )
        x, r = _act(rng, (1, 8, 5, 9), True, "rand"), _act(rng, (1, 16, 5, 9), True, "rand")
        for tpl in (Int8Conv(), Int8ConvChannels(force=True)):
            c = check_fused(tpl, conv, add, lut, x, r, HOST, (1, 2))
            assert c.plan.weights["ra"].size == size


@SETTINGS
@given(case=residual_cases(channels=True))
def test_residual_channel_lanes_bit_exact(case: tuple[Any, ...]) -> None:
    conv, add, lut, x, r = case
    check_fused(Int8ConvChannels(force=True), conv, add, lut, x, r, HOST, (1, 2, 3))


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@SETTINGS
@given(case=residual_cases())
def test_residual_narrower_isa(isa: Isa, case: tuple[Any, ...]) -> None:
    conv, add, lut, x, r = case
    check_fused(Int8Conv(), conv, add, lut, x, r, isa, (1, 2))


def _conv_out_info(lo: int, hi: int, zp: int, signed: bool) -> Any:
    """The QuantInfo a residual form reads: the conv's output bounds, zero point and signedness."""
    from lamina.targets.cpu.kernels.gemm_int8 import QuantInfo

    z = np.zeros(1, np.int64)
    return QuantInfo(True, 0, lo, hi, zp, z, z, np.zeros(1, np.int8), None, signed)


def _contract_add(y: np.ndarray, r: np.ndarray, ra: Any, m1: int, m2: int, s: int) -> np.ndarray:
    from lamina.dialects.tpu.quantize import rounding_rshift

    t = (y.astype(np.int64) - ra.zp_conv) * m1 + (r.astype(np.int64) - ra.zp_res) * m2
    return np.clip(rounding_rshift(t, s) + ra.zp_out, ra.lo, ra.hi)


@pytest.mark.parametrize("seed", range(6))
def test_residual32_formula_over_every_byte_pair(seed: int) -> None:
    """:func:`residual32`'s split form (emulated in numpy: the int32 sums, the floor shifts, the tie
    correction) equals the contract's i64 add for every pair of bytes, where it applies; ties are
    frequent with the small shifts drawn here."""
    from lamina.targets.cpu.kernels.gemm_int8 import residual32

    rng = np.random.default_rng(seed)
    taken = 0
    for _ in range(20):
        y_signed, r_signed = bool(rng.integers(2)), bool(rng.integers(2))
        zp_y = int(rng.integers(-20, 20)) if y_signed else int(rng.integers(0, 40))
        zp_r = int(rng.integers(-20, 20)) if r_signed else int(rng.integers(0, 40))
        zp_o = int(rng.integers(-20, 20))
        s = int(rng.integers(17, 40))
        if rng.integers(2):  # multiples of 2**(S-3): exact halves (ties) are common
            s = int(rng.integers(17, 32))
            m1, m2 = (int(v) << (s - 3) for v in rng.integers(0, 16, 2))
        else:
            m1, m2 = (int(v) for v in rng.integers(0, 2**31, 2) >> rng.integers(0, 24, 2))
        c = 1
        from lamina.targets.cpu.kernels.gemm_int8 import ResidualAdd

        ra = ResidualAdd(0, zp_y, zp_r, r_signed, -128, 127, zp_o, True, ((m1,) * c, (m2,) * c, (s,) * c))
        lo, hi = (-128, 127) if y_signed else (0, 255)
        q = _conv_out_info(lo, hi, zp_y, y_signed)
        r32 = residual32(ra, q)
        if r32 is None:
            continue
        taken += 1
        kh, kl, mh, ml, bq, sh = r32
        y = np.arange(lo, hi + 1, dtype=np.int64)[:, None]
        r = (
            np.arange(-128, 128, dtype=np.int64)[None, :]
            if r_signed
            else np.arange(256, dtype=np.int64)[None, :]
        )

        def halves(v: int) -> tuple[int, int]:
            v &= 0xFFFFFFFF
            lo16, hi16 = v & 0xFFFF, v >> 16
            return lo16 - (lo16 >= 2**15) * 2**16, hi16 - (hi16 >= 2**15) * 2**16

        mh1, mh2 = halves(mh)
        ml1, ml2 = halves(ml)
        t_hi = y * mh1 + r * mh2 + kh
        t_lo = y * ml1 + r * ml2 + kl
        assert np.abs(t_hi).max() < 2**31 and np.abs(t_lo).max() < 2**31
        qq = t_hi + (t_lo >> 16)
        tie = (qq < bq) & ((t_lo & 0xFFFF) == 0)
        got = np.clip((qq - tie) >> sh, -128, 127)
        want = _contract_add(y, r, ra, m1, m2, s)
        np.testing.assert_array_equal(got, want)
    assert taken >= 5


# ---- the float fast forms (Gen.fast_requant / Gen.fast_residual) on adversarial values ----------

FAST_ISAS = [i for i in (HOST, Isa(32, HOST.features)) if fast_isa(i)]


def _fast_kernel(isa: Isa, body: Any) -> Any:
    """A kernel ``k(bufs)`` over ``bufs[0]``'s ``bufs[5][0]`` vectors: ``body(gen, i)`` emits one
    vector's work (byte offsets ``i * 4 * nl`` of int32 arrays)."""
    import ctypes

    import llvmlite.binding as llvm
    from llvmlite import ir

    from lamina.targets.cpu.kernels.gemm_int8 import I64, Gen

    mod = ir.Module(name="fast")
    gen = Gen(mod, "k", 6, isa)
    b = gen.b
    nvec = b.load(b.bitcast(gen.bufs[5], I64.as_pointer()))
    gen.loop(0, nvec, lambda i, _: body(gen, i) and None)
    b.ret_void()
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3
    )
    m = llvm.parse_assembly(str(mod))
    m.verify()
    ee = llvm.create_mcjit_compiler(m, tm)
    ee.finalize_object()
    fn = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int64, ctypes.c_int64)(
        ee.get_function_address("k")
    )

    def run(*arrays: np.ndarray, nvec: int) -> None:
        keep = [np.ascontiguousarray(a) for a in arrays] + [np.asarray([nvec], np.int64)]
        ptrs = (ctypes.c_void_p * 6)(*[a.ctypes.data for a in keep])
        fn(ptrs, 0, 1)
        keep.append(ee)

    return run


def _tie_accs(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(acc, m, S)`` per lane: a third random, a third within a few units of a tie ``acc * m /
    2**S = k + 1/2``, a third exact ties (power-of-two multipliers) — and some at the int32 ends."""
    s = rng.integers(20, 63, n)
    m = rng.integers(0, 2**31, n) >> rng.integers(0, 12, n)
    k = rng.integers(-300, 300, n)
    acc = rng.integers(-(2**31), 2**31, n) >> rng.integers(0, 31, n)
    near = np.arange(n) % 3 == 1
    with np.errstate(all="ignore"):
        t = np.round((k + 0.5) * np.exp2(s.astype(np.float64)) / np.maximum(m, 1)) + rng.integers(-3, 4, n)
    acc = np.where(near & (np.abs(t) < 2**31 - 1), t, acc)
    tie = np.arange(n) % 3 == 2
    a = rng.integers(0, 20, n)
    m = np.where(tie, np.left_shift(1, np.minimum(s - 1 - a, 30)), m)
    acc = np.where(tie, (2 * k + 1) * np.left_shift(1, np.maximum(s - 1 - np.minimum(s - 1 - a, 30), 0)), acc)
    acc = np.where(np.abs(acc) < 2**31, acc, 0)
    acc[::97] = -(2**31)
    acc[1::97] = 2**31 - 1
    return acc.astype(np.int32), m.astype(np.int32), s.astype(np.int32)


@pytest.mark.parametrize("isa", FAST_ISAS, ids=[f"v{i.vector_bytes}" for i in FAST_ISAS])
@pytest.mark.parametrize("seed", range(4))
def test_fast_requant_certain_lanes_exact(isa: Isa, seed: int) -> None:
    """Every lane :meth:`Gen.fast_requant` calls certain is the contract's requant (any multiplier,
    shift, zero point and clamp), on random, near-tie, exact-tie and extreme accumulators; exact
    ties are never certain; random ones rarely uncertain."""
    from lamina.dialects.tpu.quantize import rounding_rshift
    from lamina.targets.cpu.kernels.gemm_int8 import I32, QuantInfo, fast_requant, vt

    rng = np.random.default_rng(seed)
    for zp, lo, hi in ((0, -128, 127), (5, 5, 127), (-20, -128, 100), (40, 0, 255), (255, 0, 255)):
        q = QuantInfo(
            True, 0, lo, hi, zp, np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros(1, np.int8), None
        )
        form = fast_requant(q)
        assert form is not None

        def body(gen: Any, i: Any, form: Any = form, q: Any = q) -> None:
            nl = gen.nl
            off = gen.b.mul(i, gen.c(4 * nl))
            acc, m, s = (gen.load(gen.bufs[j], off, vt(I32, nl)) for j in range(3))
            y, unc = gen.fast_requant(acc, m, s, q, form)
            gen.store(gen.b.fptosi(y, vt(I32, nl)), gen.bufs[3], off)  # y: integral floats
            gen.store(gen.b.zext(unc, vt(I32, nl)), gen.bufs[4], off)

        run = _fast_kernel(isa, body)
        n = 3 * 4096
        acc, m, s = _tie_accs(rng, n)
        y = np.zeros(n, np.int32)
        unc = np.zeros(n, np.int32)
        run(acc, m, s, y, unc, nvec=n // lanes_of(isa))
        want = np.clip(zp + rounding_rshift(acc.astype(np.int64) * m, s.astype(np.int64)), lo, hi)
        ok = unc == 0
        np.testing.assert_array_equal(y[ok], want[ok])
        s64 = s.astype(np.int64)
        exact_tie = np.mod(acc.astype(np.int64) * m, np.left_shift(1, s64)) == np.left_shift(1, s64 - 1)
        assert exact_tie.sum() > n // 10
        # (a tie far beyond the clamp saturates whichever way it rounds)
        inside = (want > lo) & (want < hi)
        assert not np.any(ok & exact_tie & inside), "an exact tie called certain"
        rand = np.arange(n) % 3 == 0
        assert (rand & inside).sum() > 200 and np.mean(unc[rand & inside]) < 0.01


def lanes_of(isa: Isa) -> int:
    return max(4, isa.vector_bytes // 4)


@pytest.mark.parametrize("isa", FAST_ISAS, ids=[f"v{i.vector_bytes}" for i in FAST_ISAS])
@pytest.mark.parametrize("seed", range(6))
def test_fast_residual_certain_lanes_exact_over_every_byte_pair(isa: Isa, seed: int) -> None:
    """Every lane :meth:`Gen.fast_residual` calls certain is the contract's add, over every pair of
    bytes, for calibration-like, random and tie-heavy (multiples of ``2**(S-3)``) factors."""
    from lamina.targets.cpu.kernels.gemm_int8 import I8, I32, ResidualAdd, fast_residual_form, vt

    rng = np.random.default_rng(100 + seed)
    taken = 0
    for trial in range(12):
        y_signed, r_signed = bool(rng.integers(2)), bool(rng.integers(2))
        zp_y = int(rng.integers(-20, 20)) if y_signed else int(rng.integers(0, 40))
        zp_r = int(rng.integers(-20, 20)) if r_signed else int(rng.integers(0, 40))
        zp_o = int(rng.integers(-20, 20))
        kind = trial % 3
        if kind == 0:  # as calibration gives them
            s = 31 + int(rng.integers(-2, 3))
            m1, m2 = (int(v) for v in rng.integers(2**28, 2**31, 2))
        elif kind == 1:
            s = int(rng.integers(17, 48))
            m1, m2 = (int(v) for v in rng.integers(0, 2**31, 2) >> rng.integers(0, 24, 2))
        else:  # exact halves common
            s = int(rng.integers(17, 32))
            m1, m2 = (int(v) << (s - 3) for v in rng.integers(0, 16, 2))
        ra = ResidualAdd(0, zp_y, zp_r, r_signed, -128, 127, zp_o, True, ((m1,), (m2,), (s,)))
        lo, hi = (-128, 127) if y_signed else (0, 255)
        q = _conv_out_info(lo, hi, zp_y, y_signed)
        f2 = fast_residual_form(ra, q)  # (tie-heavy factors included: the kernels keep them exact)
        if f2 is None:
            continue
        taken += 1
        form, g1, g2, cc = f2
        fl = np.asarray([g1, g2, cc], np.float32).view(np.int32)
        table = np.asarray([0] * 8 + [*fl, form.f, form.mask, 0, 0, 0], np.int64).astype(np.int32)

        def body(gen: Any, i: Any, ra: Any = ra, q: Any = q) -> None:
            nl = gen.nl
            b = gen.b
            gen.res = (gen.bufs[1], gen.bufs[4], ra)
            off = b.mul(i, gen.c(4 * nl))
            y = gen.load(gen.bufs[0], off, vt(I32, nl))
            r = gen.load(gen.bufs[1], b.mul(i, gen.c(nl)), vt(I8, nl))
            z, unc = gen.fast_residual(y, r, q, gen.res_fast_consts(nl))
            gen.store(
                b.or_(b.zext(z, vt(I32, nl)), b.shl(b.zext(unc, vt(I32, nl)), gen.cv([8] * nl))),
                gen.bufs[2],
                off,
            )

        run = _fast_kernel(isa, body)
        yy, rr = np.meshgrid(
            np.arange(lo, hi + 1), np.arange(-128, 128) if r_signed else np.arange(256), indexing="ij"
        )
        yy, rr = yy.reshape(-1), rr.reshape(-1)
        out = np.zeros(yy.size, np.int32)
        run(yy.astype(np.int32), rr.astype(np.int8 if r_signed else np.uint8), out, np.zeros(1, np.int32),
            table, nvec=yy.size // lanes_of(isa))  # fmt: skip
        z = (out & 0xFF).astype(np.uint8).view(np.int8)
        ok = (out >> 8) == 0
        want = _contract_add(yy, rr, ra, m1, m2, s)
        np.testing.assert_array_equal(z[ok], want[ok])
        if kind == 0:
            assert np.mean(~ok) < 0.01
    assert taken >= 6


def test_fast_forms_taken_where_ties_are_rare() -> None:
    """Calibration-like factors take the fast forms; power-of-two scale ratios (exact ties on every
    other value: each would take the exact path) keep the int32 forms."""
    from lamina.targets.cpu.kernels.gemm_int8 import fast_requant, fast_residual

    rng = np.random.default_rng(5)
    o = conv_op(rng, 1, 8, (5, 9), 16, (1, 1), (1, 1), (1, 1), [0] * 4, 1, "sym", "none", True, "small")
    for mults, taken in (((1234567891, 987654321), True), ((1 << 30, 3 << 28), False)):
        conv, _, _ = with_residual(o, rng, True, 0, (True, 0), mults, 0, False, None)
        q = Int8Conv()._geo(conv)[1]  # type: ignore[index]
        assert (fast_residual(residual_add(conv), q) is not None) == taken  # type: ignore[arg-type]
        assert fast_requant(q) is not None
        q.mult[:] = 1 << 30
        q.shift[:] = 31
        assert fast_requant(q) is None


def test_fast_factors_table_where_the_fast_forms_run() -> None:
    """Both conv templates' plans carry the requant's float factors ``fl(m) * 2**-S`` (the
    ``fm`` weight, :func:`fast_factors`) exactly where the fused add takes the fast forms, equal to
    the float32 product the kernel computed before; the fused results stay bit-exact."""
    from lamina.targets.cpu.kernels.gemm_int8 import Int8ConvChannels, fast_factors

    rng = np.random.default_rng(9)
    o = conv_op(rng, 1, 8, (5, 9), 16, (1, 1), (1, 1), (1, 1), [0] * 4, 1, "sym", "none", True, "small")
    x = _act(rng, tuple(o.operands[0].type.shape), True, "rand")
    for mults, taken in (((1234567891, 987654321), True), ((1 << 30, 3 << 28), False)):
        conv, add, _ = with_residual(o, rng, True, 0, (True, 0), mults, 0, False, None)
        q = Int8Conv()._geo(conv)[1]  # type: ignore[index]
        fm = fast_factors(conv, q, 16)
        assert (fm is not None) == taken
        r = _act(rng, tuple(conv.results[0].type.shape), True, "rand")
        for tpl in (Int8Conv(), Int8ConvChannels(force=True)):
            c = check_fused(tpl, conv, add, None, x, r, HOST, (1, 2))
            assert (("weight", "fm") in c.plan.buffers) == taken
        if fm is not None:
            want = np.float32(q.mult.astype(np.float32)) * np.exp2(-q.shift).astype(np.float32)
            np.testing.assert_array_equal(fm.view(np.float32)[:16], want.astype(np.float32))


@st.composite
def pointwise_cases(draw: Any) -> tuple[Any, ...]:
    """A 1x1 conv (stride 1 or 2: no unused columns, a channel's registers of a tile are one run of
    its plane) over one or many channel tiles, with a fused Lut after a residual add or after the
    conv, a position count with a tail (the position tiles outer, the channel tiles inner, the parts
    splitting rows or channel tiles)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    s = draw(st.sampled_from([1, 1, 2]))
    hw = (draw(st.integers(1, 11)), draw(st.integers(1, 23)))
    cin = draw(st.sampled_from([4, 7, 16, 64, 132]))
    cout = draw(st.integers(1, 40))
    mode = draw(st.sampled_from(["sym", "asym", "u8"]))
    relu = draw(st.sampled_from(["none", "relu"]))
    o = conv_op(rng, draw(st.integers(1, 2)), cin, hw, cout, (1, 1), (s, s), (1, 1), [0] * 4, 1, mode, relu,
                True, "small")  # fmt: skip
    x = _act(rng, tuple(o.operands[0].type.shape), mode != "u8", "rand")
    lut = draw(st.sampled_from(["signed", "unsigned"]))
    if not draw(st.booleans()):
        from test_gemm_int8 import with_lut

        prod, lut_op = with_lut(o, rng, lut == "signed")
        return prod, None, lut_op, x, None
    mults = (int(rng.integers(2**28, 2**31)), int(rng.integers(2**28, 2**31)))
    conv, add, lut_op = with_residual(
        o, rng, True, 0, (True, 0), mults, draw(st.integers(-1, 2)), draw(st.booleans()), lut
    )
    r = _act(rng, tuple(conv.results[0].type.shape), True, "rand")
    return conv, add, lut_op, x, r


@SETTINGS
@given(case=pointwise_cases())
def test_pointwise_with_lut_bit_exact(case: tuple[Any, ...]) -> None:
    """1x1 convs with a fused Lut (after a residual add or not) are bit-exact for 1, 2 and 3 parts,
    on the host and on AVX2."""
    conv, add, lut, x, r = case
    for isa in (HOST, ISAS[1]):
        if add is not None:
            check_fused(Int8Conv(), conv, add, lut, x, r, isa, (1, 2, 3))
        else:
            ref = lut.execute([conv.execute(_inputs(conv, x))[0]])[0]
            c = Compiled(Int8Conv(), conv, isa)
            for n in (1, 2, 3):
                np.testing.assert_array_equal(c([x], ref.shape, ref.dtype, n), ref)


@pytest.mark.parametrize("isa", [HOST, Isa(32, HOST.features)], ids=["host", "v32"])
@pytest.mark.parametrize(
    "lo,hi", [(-128, 127), (0, 255), (-128, 100), (5, 127), (0, 127), (-20, 255), (3, 200)]
)
@pytest.mark.parametrize("above_lo", [False, True])
def test_sat8_is_the_clamp(isa: Isa, lo: int, hi: int, above_lo: bool) -> None:
    """:meth:`Gen.sat8` (the saturating truncations where the upper bound is a byte's) is
    ``clamp(y, lo, hi)`` as bytes over random and extreme int32 lanes (``above_lo``: lanes at or
    above ``lo``, as its callers promise)."""
    from lamina.targets.cpu.kernels.gemm_int8 import I32, vt

    def body(gen: Any, i: Any) -> None:
        nl = gen.nl
        off = gen.b.mul(i, gen.c(4 * nl))
        y = gen.load(gen.bufs[0], off, vt(I32, nl))
        gen.store(gen.b.sext(gen.sat8(y, lo, hi, above_lo), vt(I32, nl)), gen.bufs[1], off)

    run = _fast_kernel(isa, body)
    rng = np.random.default_rng((lo + 128) * 1000 + hi)
    n = 4096
    y = (rng.integers(-(2**31), 2**31, n) >> rng.integers(0, 31, n)).astype(np.int64)
    y[:600] = np.arange(-300, 300)
    y[600:604] = [-(2**31), 2**31 - 1, 2**16 + 5, -(2**16) + 7]
    if above_lo:
        y = np.maximum(y, lo)
    out = np.zeros(n, np.int32)
    run(y.astype(np.int32), out, np.zeros(1, np.int32), np.zeros(1, np.int32), np.zeros(1, np.int32),
        nvec=n // lanes_of(isa))  # fmt: skip
    want = np.clip(y, lo, hi).astype(np.int64)
    got = out.astype(np.int64) & 0xFF
    np.testing.assert_array_equal(got, want & 0xFF)

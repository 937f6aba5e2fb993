"""The optional integer forms of the INT8 lowering (``convert-top-to-tpu{int-forms=...}``): the
integer Softmax and LayerNorm contracts (``lamina.dialects.tpu.quantize``) against a float reference
and against a second implementation in Python integers written from ``docs/tpu.md``; Gather of a
constant table against the float Gather followed by its cast; the option's parsing; the lowering
choosing each form only when enabled."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import lamina.dialects  # noqa: F401  (registers the dialects)
from lamina.dialects.tpu.families.normalize import layer_norm_constants
from lamina.dialects.tpu.lowering.state import DEFAULT_INT_FORMS, INT_FORMS, parse_int_forms
from lamina.dialects.tpu.quantize import int_layer_norm, int_softmax, softmax_exp_table
from lamina.dialects.tpu.transforms import convert_top_to_tpu
from lamina.execution import Interpreter
from lamina.ir.context import Context
from lamina.ir.parser import parse_module

# ---- Softmax ------------------------------------------------------------------------------------


def _softmax_py(row: list[int], s_in: float, s_out: float, zp_out: int, lo: int, hi: int) -> list[int]:
    """docs/tpu.md's integer Softmax, one row, Python integers."""
    table = [math.floor(math.exp(-s_in * d) * 2**15 + 0.5) for d in range(256)]
    a = math.floor(2**16 / s_out + 0.5)
    m = max(row)
    e = [table[m - v] for v in row]
    den = sum(e) * 2**16
    return [min(hi, max(lo, zp_out + (2 * x * a + den) // (2 * den))) for x in e]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    s_in=st.floats(0.005, 0.5),
    n=st.integers(1, 70),
    signed=st.booleans(),
    out_u8=st.booleans(),
)
def test_int_softmax_matches_python_ints_and_float(
    seed: int, s_in: float, n: int, signed: bool, out_u8: bool
) -> None:
    rng = np.random.default_rng(seed)
    lo_in = -128 if signed else 0
    q = rng.integers(lo_in, lo_in + 256, size=(3, n))
    # output: uint8 scale 1/255 zp 0, or int8 scale 1/256 zp -128 (TFLite's)
    s_out, zp_out, lo, hi = (1 / 255, 0, 0, 255) if out_u8 else (1 / 256, -128, -128, 127)
    table = softmax_exp_table(s_in)
    factor = math.floor(2**16 / s_out + 0.5)
    y = int_softmax(q, 1, table, factor, zp_out, lo, hi)
    for r in range(3):
        assert y[r].tolist() == _softmax_py(q[r].tolist(), s_in, s_out, zp_out, lo, hi)
    # the float reference: softmax of the dequantized input, quantized; within 1 step
    x = q * s_in
    p = np.exp(x - x.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    ref = np.clip(np.floor(p / s_out + 0.5) + zp_out, lo, hi)
    assert np.max(np.abs(y - ref)) <= 1


# ---- LayerNorm ----------------------------------------------------------------------------------


def _rdiv(a: int, b: int) -> int:
    q = (abs(a) + b // 2) // b
    return q if a >= 0 else -q


def _layer_norm_py(
    row: list[int], zp_in: int, c: dict[str, np.ndarray], zp_out: int, lo: int, hi: int
) -> list[int]:
    """docs/tpu.md's integer LayerNorm, one row, Python integers."""
    w = [int(v) for v in c["in_weight"]]
    eps = int(c["eps_q"][0])
    x = [_rdiv((v - zp_in) * wi, 2**16) for v, wi in zip(row, w)]
    n = len(x)
    mu = _rdiv(sum(x), n)
    d = [v - mu for v in x]
    v = max(1, sum(t * t for t in d) + eps)
    h = max(0, -(-(v.bit_length() - 30) // 2))
    vr = max(1, _rdiv(v, 4**h))
    r = math.isqrt(2**62 // vr)
    out = []
    for ch, dc in enumerate(d):
        z = _rdiv(dc * r, 2 ** (11 + h))
        acc = z * int(c["multiplier"][ch]) + int(c["bias_q"][ch])
        out.append(min(hi, max(lo, zp_out + _rdiv(acc, 2 ** int(c["shift"][ch])))))
    return out


@settings(max_examples=50, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    n=st.integers(2, 96),
    per_channel=st.booleans(),
    asym=st.booleans(),
    eps=st.sampled_from([1e-12, 1e-5, 1e-3]),
)
def test_int_layer_norm_matches_python_ints_and_float(
    seed: int, n: int, per_channel: bool, asym: bool, eps: float
) -> None:
    rng = np.random.default_rng(seed)
    rows = 4
    if per_channel:  # outlier channels: scales up to 200x apart, zero point 0
        s_in = 0.01 * np.exp(rng.uniform(0, math.log(200), n))
        zp_in = 0
    else:
        s_in = np.full(n, rng.uniform(0.005, 0.2))
        zp_in = int(rng.integers(-40, 40)) if asym else 0
    q = np.clip(rng.normal(0, 40, size=(rows, n)).round() + zp_in, -128, 127).astype(np.int64)
    gamma = rng.normal(1.0, 0.5, n)
    beta = rng.normal(0.0, 0.5, n)
    x = (q - zp_in) * s_in
    mu = x.mean(axis=1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=1, keepdims=True)
    yf = (x - mu) / np.sqrt(var + eps) * gamma + beta
    th = np.abs(yf).max(axis=0) + 1e-3 if per_channel else np.full(n, np.abs(yf).max() + 1e-3)
    s_out = th / 127.0
    c = layer_norm_constants(s_in, eps, gamma, beta, s_out)
    assert c is not None
    y = int_layer_norm(
        q, zp_in, c["in_weight"], int(c["eps_q"][0]), c["multiplier"], c["shift"], c["bias_q"], 0, -128, 127
    )
    for r in range(rows):
        assert y[r].tolist() == _layer_norm_py(q[r].tolist(), zp_in, c, 0, -128, 127)
    ref = np.clip(np.sign(yf / s_out) * np.floor(np.abs(yf / s_out) + 0.5), -128, 127)
    # the error bound: one output step (the reference itself rounds; the integer path's error is
    # ~2**-16 of the normalized value, the reciprocal square root's precision), one more on rows of
    # under 8 channels, where the mean's rounding to the grid (half a unit) is a visible share of
    # the row's spread (docs/tpu.md; seed 10821170, n=2, per-channel: 2 steps)
    assert np.max(np.abs(y - ref)) <= (1 if n >= 8 else 2)


def test_layer_norm_constants_refuse_what_does_not_fit() -> None:
    g = np.ones(8)
    assert layer_norm_constants(np.full(8, 0.1), 1e-5, g, g, np.full(8, 0.1)) is not None
    spread = np.array([1e-6] + [1.0] * 7)  # scales 10**6 apart: no common grid within 2**24
    assert layer_norm_constants(spread, 1e-5, g, g, np.full(8, 0.1)) is None
    big = np.ones(5000)
    assert layer_norm_constants(np.full(5000, 0.1), 1e-5, big, big, np.full(5000, 0.1)) is None


# ---- the option -----------------------------------------------------------------------------------


def test_parse_int_forms() -> None:
    assert parse_int_forms("default") == frozenset(DEFAULT_INT_FORMS)
    assert parse_int_forms("all") == frozenset(INT_FORMS)
    assert parse_int_forms("none") == frozenset()
    assert parse_int_forms("lut,softmax") == {"lut", "softmax"}
    assert parse_int_forms("default+layernorm") == {*DEFAULT_INT_FORMS, "layernorm"}
    with pytest.raises(ValueError, match="unknown integer form 'gelu'"):
        parse_int_forms("lut,gelu")


# ---- lowering -------------------------------------------------------------------------------------

CAL = "!quant.calibrated<f32<{lo}:{hi}>>"


def _t(shape: str, lo: float, hi: float) -> str:
    return f"tensor<{shape}x" + CAL.format(lo=lo, hi=hi) + ">"


def _module(body: str, args: str, ret: str, ret_t: str) -> object:
    text = f"func.func @main({args}) -> {ret_t} {{\n{body}\n  return {ret} : {ret_t}\n}}\n"
    m = parse_module(text, Context())
    assert m is not None
    return m


def _softmax_ln_model() -> tuple[object, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    g = rng.normal(1, 0.3, 16).astype(np.float32)
    b = rng.normal(0, 0.3, 16).astype(np.float32)
    a = _t("2x16", -4.0, 4.0)
    body = f"""
  %in = "top.Input"(%x) : ({a}) -> {a} loc("x")
  %s = "top.Softmax"(%in) <{{axis = 1 : i64}}> : ({a}) -> {_t("2x16", 0.0, 1.0)} loc("sm")
  %g = "top.Weight"() <{{value = dense<{g.tolist()}> : tensor<16xf32>}}> : () -> tensor<16xf32>
  %b = "top.Weight"() <{{value = dense<{b.tolist()}> : tensor<16xf32>}}> : () -> tensor<16xf32>
  %n, %mean, %rstd = "top.LayerNorm"(%in, %g, %b) <{{axis = -1 : i64, epsilon = 1.0e-05 : f64}}> : ({a}, tensor<16xf32>, tensor<16xf32>) -> ({_t("2x16", -6.0, 6.0)}, none, none) loc("ln")
  %o = "top.Add"(%n, %s) : ({_t("2x16", -6.0, 6.0)}, {_t("2x16", 0.0, 1.0)}) -> {_t("2x16", -7.0, 7.0)} loc("add")"""
    return _module(body, f"%x: {a}", "%o", _t("2x16", -7.0, 7.0)), g, b


def _names(m: object) -> dict[str, str]:
    """tpu op name → 'int' or 'float' (by its first operand's type)."""
    out = {}
    for op in m.walk_ops():  # type: ignore[attr-defined]
        if op.name in ("tpu.Softmax", "tpu.LayerNorm", "tpu.Gather", "tpu.Lut", "tpu.Sigmoid"):
            out[op.name] = "int" if "quant.uniform" in str(op.operands[0].type) else "float"
    return out


@pytest.mark.parametrize(
    "forms, want",
    [
        ("none", {"tpu.Softmax": "float", "tpu.LayerNorm": "float"}),
        ("default", {"tpu.Softmax": "int", "tpu.LayerNorm": "float"}),
        ("layernorm", {"tpu.Softmax": "float", "tpu.LayerNorm": "int"}),
        ("all", {"tpu.Softmax": "int", "tpu.LayerNorm": "int"}),
    ],
)
def test_the_lowering_chooses_the_enabled_forms(forms: str, want: dict[str, str]) -> None:
    m, _, _ = _softmax_ln_model()
    assert convert_top_to_tpu(m, "INT8", int_forms=forms)[0]  # type: ignore[arg-type]
    assert _names(m) == want


def test_integer_softmax_and_layer_norm_execute_close_to_float() -> None:
    x = np.random.default_rng(1).uniform(-4, 4, (2, 16)).astype(np.float32)
    outs = {}
    for forms in ("none", "all"):
        m, _, _ = _softmax_ln_model()
        assert convert_top_to_tpu(m, "INT8", int_forms=forms)[0]  # type: ignore[arg-type]
        outs[forms] = np.asarray(next(iter(Interpreter(m).run([x]).values())), np.float64)  # type: ignore[arg-type]
    # the result's step is 14/255: the integer forms stay within two steps of float-between-casts
    assert np.max(np.abs(outs["all"] - outs["none"])) <= 2 * 14 / 255 + 1e-6


def test_gather_of_a_constant_table_is_the_float_gather_and_its_cast() -> None:
    rng = np.random.default_rng(2)
    table = rng.normal(0, 1, (10, 6)).astype(np.float32)
    body = f"""
  %ids = "top.Input"(%i) : (tensor<2x3xi64>) -> tensor<2x3xi64> loc("ids")
  %w = "top.Weight"() <{{value = dense<{table.tolist()}> : tensor<10x6xf32>}}> : () -> tensor<10x6xf32>
  %e = "top.Gather"(%w, %ids) <{{axis = 0 : i64}}> : (tensor<10x6xf32>, tensor<2x3xi64>) -> {_t("2x3x6", -2.5, 2.5)} loc("emb")
  %s = "top.Sigmoid"(%e) : ({_t("2x3x6", -2.5, 2.5)}) -> {_t("2x3x6", 0.0, 1.0)} loc("sig")"""
    ids = np.array([[0, 9, 3], [4, -1, 9]], np.int64)
    outs = {}
    for forms in ("lut", "lut,gather"):
        m = _module(body, "%i: tensor<2x3xi64>", "%s", _t("2x3x6", 0.0, 1.0))
        assert convert_top_to_tpu(m, "INT8", int_forms=forms)[0]  # type: ignore[arg-type]
        assert _names(m)["tpu.Gather"] == ("int" if "gather" in forms else "float")
        outs[forms] = next(iter(Interpreter(m).run([ids]).values()))  # type: ignore[arg-type]
        casts = sum(op.name == "tpu.Cast" for op in m.walk_ops())  # type: ignore[attr-defined]
        assert casts == (1 if "gather" in forms else 2)  # the Gather result's cast is gone
    np.testing.assert_array_equal(outs["lut"], outs["lut,gather"])


# ---- Attention ------------------------------------------------------------------------------------


def _attention_py(q, k, v, mask, zps, qk, mf, a, zp_out):  # type: ignore[no-untyped-def]
    """docs/tpu.md's integer Attention for one (batch, head): lists of rows, Python integers."""
    hi_t = [math.floor(2**15 * math.exp(-128 * i / 1024) + 0.5) for i in range(128)]
    lo_t = [math.floor(2**15 * math.exp(-j / 1024) + 0.5) for j in range(128)]
    zq, zk, zv, zm = zps
    out = []
    for i, qr in enumerate(q):
        logits = []
        for j, kr in enumerate(k):
            acc = sum((x - zq) * (y - zk) for x, y in zip(qr, kr))
            lg = _rdiv(acc * qk[0], 2 ** qk[1])
            if mask is not None:
                lg += _rdiv((mask[i][j] - zm) * mf[0], 2 ** mf[1])
            logits.append(lg)
        mx = max(logits)
        e = []
        for lg in logits:
            d = mx - lg
            e.append(_rdiv(hi_t[d >> 7] * lo_t[d & 127], 2**15) if d < 2**14 else 0)
        den = sum(e) * 2**16
        row = []
        for c in range(len(v[0])):
            num = sum(ej * (v[j][c] - zv) for j, ej in enumerate(e))
            row.append(min(127, max(-128, zp_out + _rdiv(num * a, den))))
        out.append(row)
    return out


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31 - 1),
    sq=st.integers(1, 9),
    sk=st.integers(1, 12),
    d=st.integers(1, 16),
    masked=st.booleans(),
)
def test_int_attention_matches_python_ints_and_float(
    seed: int, sq: int, sk: int, d: int, masked: bool
) -> None:
    from lamina.dialects.tpu.quantize import int_attention, quantize_multiplier

    rng = np.random.default_rng(seed)
    s_q, s_k, s_v = (float(x) for x in rng.uniform(0.01, 0.08, 3))
    s_m = 10000.0 / 127
    zq, zk, zv = (int(x) for x in rng.integers(-20, 20, 3))
    q = rng.integers(-128, 128, (1, 2, sq, d))
    k = rng.integers(-128, 128, (1, 2, sk, d))
    v = rng.integers(-128, 128, (1, 2, sk, d))
    mask = None
    if masked:  # an additive padding mask: 0 or -10000 (quantized -127), the first key always kept
        keep = rng.random(sk) < 0.7
        keep[0] = True
        mask = np.where(keep, 0, -127).reshape(1, 1, 1, sk)
    alpha = 1 / math.sqrt(d)
    m, rs = quantize_multiplier(alpha * s_q * s_k * 1024)
    qk = (m, 31 + rs)
    mm, mrs = quantize_multiplier(s_m * 1024)
    mf = (mm, 31 + mrs)
    s_out = 0.02
    a = math.floor(s_v / s_out * 2**16 + 0.5)
    y = int_attention(q, k, v, mask, (zq, zk, zv, 0), qk, mf, a, 0, -128, 127)
    for h in range(2):
        mk = None if mask is None else np.broadcast_to(mask[0, 0], (sq, sk)).tolist()
        want = _attention_py(
            q[0, h].tolist(), k[0, h].tolist(), v[0, h].tolist(), mk, (zq, zk, zv, 0), qk, mf, a, 0
        )
        assert y[0, h].tolist() == want
    # the float reference: softmax attention of the dequantized inputs, quantized; within one step
    qf, kf, vf = (q - zq) * s_q, (k - zk) * s_k, (v - zv) * s_v
    lg = qf @ np.swapaxes(kf, -1, -2) * alpha
    if mask is not None:
        lg = lg + mask * s_m
    p = np.exp(lg - lg.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    ref = np.clip(np.floor(p @ vf / s_out + 0.5), -128, 127)
    assert np.max(np.abs(y - ref)) <= 1


def test_attention_lowers_to_its_integer_form_when_enabled() -> None:
    q_t, m_t, o_t = _t("1x2x4x8", -3.0, 3.0), _t("1x1x1x4", -10000.0, 0.0), _t("1x2x4x8", -3.0, 3.0)
    body = f"""
  %qi = "top.Input"(%q) : ({q_t}) -> {q_t} loc("q")
  %ki = "top.Input"(%k) : ({q_t}) -> {q_t} loc("k")
  %vi = "top.Input"(%v) : ({q_t}) -> {q_t} loc("v")
  %mi = "top.Input"(%m) : ({m_t}) -> {m_t} loc("m")
  %n = "top.None"() : () -> none
  %o:4 = "top.Attention"(%qi, %ki, %vi, %mi, %n, %n, %n) <{{scale = 0.35355339 : f64}}> : ({q_t}, {q_t}, {q_t}, {m_t}, none, none, none) -> ({o_t}, none, none, none) loc("att")"""
    rng = np.random.default_rng(3)
    ins = [rng.uniform(-3, 3, (1, 2, 4, 8)).astype(np.float32) for _ in range(3)]
    ins.append(np.array([0, 0, -10000, 0], np.float32).reshape(1, 1, 1, 4))
    outs = {}
    for forms in ("lut,gather,softmax", "default"):
        m = _module(body, f"%q: {q_t}, %k: {q_t}, %v: {q_t}, %m: {m_t}", "%o#0", o_t)
        assert convert_top_to_tpu(m, "INT8", int_forms=forms)[0]  # type: ignore[arg-type]
        att = next(op for op in m.walk_ops() if op.name == "tpu.Attention")  # type: ignore[attr-defined]
        assert ("quant.uniform" in str(att.operands[0].type)) == (forms == "default")  # on by default
        outs[forms] = next(iter(Interpreter(m).run(ins).values()))  # type: ignore[arg-type]
    # within two output steps (6/255) of float attention between casts
    assert np.max(np.abs(outs["lut,gather,softmax"] - outs["default"])) <= 2 * 6 / 255 + 1e-6


# ---- lut16 / wide_input -------------------------------------------------------------------------


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def _ffn_model(
    k: int = 1536, fc2: bool = True, out_th: float = 9.0
) -> tuple[object, np.ndarray, np.ndarray, np.ndarray]:
    """x (4x16) → MatMul (16xk, bias) → GELU → MatMul (kx4, calibrated ``[-out_th, out_th]``): a
    transformer FFN (without the second MatMul when not ``fc2``: the GELU is the result)."""
    rng = np.random.default_rng(4)
    w = rng.normal(0, 0.2, (16, k)).astype(np.float32)
    b = rng.normal(0, 0.3, k).astype(np.float32)
    w2 = rng.normal(0, 0.05, (k, 4)).astype(np.float32)
    a, h, g, o = (
        _t("4x16", -3.0, 3.0),
        _t(f"4x{k}", -8.0, 8.0),
        _t(f"4x{k}", -0.17, 8.0),
        _t("4x4", -out_th, out_th),
    )
    body = f"""
  %in = "top.Input"(%x) : ({a}) -> {a} loc("x")
  %w = "top.Weight"() <{{value = dense<{w.tolist()}> : tensor<16x{k}xf32>}}> : () -> tensor<16x{k}xf32>
  %b = "top.Weight"() <{{value = dense<{b.tolist()}> : tensor<{k}xf32>}}> : () -> tensor<{k}xf32>
  %w2 = "top.Weight"() <{{value = dense<{w2.tolist()}> : tensor<{k}x4xf32>}}> : () -> tensor<{k}x4xf32>
  %n = "top.None"() : () -> none
  %m = "top.MatMul"(%in, %w, %b) : ({a}, tensor<16x{k}xf32>, tensor<{k}xf32>) -> {h} loc("fc1")
  %y = "top.GELU"(%m) : ({h}) -> {g} loc("gelu")
  %z = "top.MatMul"(%y, %w2, %n) : ({g}, tensor<{k}x4xf32>, none) -> {o} loc("fc2")"""
    if not fc2:
        return _module(body.rsplit("\n", 1)[0], f"%x: {a}", "%y", g), w, b, w2
    return _module(body, f"%x: {a}", "%z", o), w, b, w2


def _by_name(m: object) -> dict[str, object]:
    from lamina.ir.naming import location_name

    return {location_name(op.location): op for op in m.walk_ops() if op.name.startswith("tpu.")}  # type: ignore[attr-defined]


def test_lut16_takes_the_matmul_result_on_an_int16_grid() -> None:
    from lamina.dialects.tpu.quantize import dequantize, qparams

    m, _w, b, _w2 = _ffn_model()
    assert convert_top_to_tpu(m, "INT8")[0]  # type: ignore[arg-type]  (lut16 on by default)
    ops = _by_name(m)
    fc1, gelu = ops["fc1"], ops["gelu"]
    assert gelu.name == "tpu.Lut16"  # type: ignore[attr-defined]
    s16, _, _, lo, hi = qparams(fc1.results[0].type)  # type: ignore[attr-defined]
    assert (lo, hi) == (-32768, 32767) and math.isclose(float(s16), 8.0 / 32767)
    # the result a MatMul reads: int16 with L = (2**31 - 1) // (127 * K) levels (no int32 overflow)
    so, _, _, lo, hi = qparams(gelu.results[0].type)  # type: ignore[attr-defined]
    lv = (2**31 - 1) // (127 * 1536)
    assert (lo, hi) == (-lv, lv) and math.isclose(float(so), 8.0 / lv)
    # the table is the definition, entry by entry
    tab = np.asarray(gelu.properties["table"].to_numpy())  # type: ignore[attr-defined]
    v = np.array([-32768, -1000, 0, 77, 5000, 32767])
    want = np.clip(
        np.floor(np.abs(_gelu(v * float(s16)) / float(so)) + 0.5) * np.sign(_gelu(v * float(s16))), lo, hi
    )
    assert tab[v + 32768].tolist() == want.astype(int).tolist()
    # executed: the GELU of the exact integer MatMul (int8 input, int8 weights) within half an
    # output step plus the input's roundings (int16 result, int32 bias), |GELU'| <= 1.13
    x = np.random.default_rng(5).uniform(-3, 3, (4, 16)).astype(np.float32)
    cast = ops["x_i8"]
    xq = np.asarray(cast.execute([x])[0])  # type: ignore[attr-defined]
    wq_op = fc1.operands[1].defining_op()  # type: ignore[attr-defined]
    wq = dequantize(np.asarray(wq_op.properties["value"].to_numpy()), wq_op.results[0].type).astype(
        np.float64
    )
    r = dequantize(xq, cast.results[0].type).astype(np.float64) @ wq + b
    y16 = np.asarray(
        fc1.execute(
            [
                xq,
                np.asarray(wq_op.properties["value"].to_numpy()),
                np.asarray(fc1.operands[2].defining_op().properties["value"].to_numpy()),
            ]
        )[0]
    )  # type: ignore[attr-defined]
    g = dequantize(np.asarray(gelu.execute([y16])[0]), gelu.results[0].type)  # type: ignore[attr-defined]
    assert np.max(np.abs(r)) < 8.0  # within the calibrated range: no clipping
    s_xw = float(qparams(cast.results[0].type)[0]) * float(np.max(qparams(wq_op.results[0].type)[0]))  # type: ignore[attr-defined]
    assert np.max(np.abs(g - _gelu(r))) <= float(so) / 2 + 1.13 * (float(s16) + s_xw) / 2 + 1e-5


def test_lut16_is_closer_to_float_than_the_8_bit_lut() -> None:
    x = np.random.default_rng(6).uniform(-3, 3, (4, 16)).astype(np.float32)
    m, w, b, _w2 = _ffn_model(fc2=False)
    ref = _gelu(x.astype(np.float64) @ w + b)
    err = {}
    for forms in ("lut,gather,softmax,attention", "default"):
        m, *_ = _ffn_model(fc2=False)
        assert convert_top_to_tpu(m, "INT8", int_forms=forms)[0]  # type: ignore[arg-type]
        got = np.asarray(next(iter(Interpreter(m).run([x]).values())), np.float64)  # type: ignore[arg-type]
        err[forms] = float(np.sqrt(np.mean((got - ref) ** 2)))
    assert err["default"] < 0.7 * err["lut,gather,softmax,attention"], err  # lut16 on by default


def _costly_i16() -> object:
    """The reference target whose MatMul with an int16 operand costs twice an int8 one (as the
    CPU's: ``vpdpwssd`` does half the MACs of ``vpdpbusd``)."""
    from lamina.dialects.tpu.capabilities import REFERENCE, Capability

    i16 = Capability(frozenset({"top.MatMul"}), "INT8", ("i16",), "native", 2.0)
    return REFERENCE.replace(entries=(i16, *REFERENCE.entries))


def _lut16_gain(m_w2: np.ndarray, out_th: float) -> float:
    """docs/tpu.md's gain of the FFN's GELU int16 result: the GELU's 8-bit step (its range
    ``[-0.17, 8]``, one-sided: a zero point, 255 steps) squared times each fc2 column's sum of
    squared weights over fc2's own step (``out_th / 127``) squared, averaged over the columns."""
    s8 = (8.0 + 0.17) / 255.0
    return float(np.mean(s8**2 * np.sum(m_w2.astype(np.float64) ** 2, axis=0) / (out_th / 127.0) ** 2))


@pytest.mark.parametrize("margin", [0.9, 1.1])
def test_lut16_takes_the_int16_result_where_it_pays_for_its_cost(margin: float) -> None:
    """On a target whose int16 MatMul input costs twice (``_costly_i16``), the GELU gets its
    int16 result only where the gain is at least ``WIDE_GAIN`` times the extra cost (1): fc2's
    range set so that the gain is 0.9 or 1.1 times that; the pre-GELU MatMul's int16 result and
    the ``tpu.Lut16`` stay either way. The reference target (no extra cost) takes it always."""
    from lamina.dialects.tpu.lowering.state import WIDE_GAIN

    _, _, _, w2 = _ffn_model()
    th = math.sqrt(_lut16_gain(w2, 1.0) / (WIDE_GAIN * margin))  # the out_th giving that gain
    assert math.isclose(_lut16_gain(w2, th), WIDE_GAIN * margin)
    for caps, wide in ((_costly_i16(), margin > 1), (None, True)):
        m, *_ = _ffn_model(out_th=th)
        ok, stats = convert_top_to_tpu(m, "INT8", **({} if caps is None else {"capabilities": caps}))  # type: ignore[arg-type]
        assert ok
        ops = _by_name(m)
        assert ops["gelu"].name == "tpu.Lut16"  # type: ignore[attr-defined]
        assert ops["fc1"].results[0].type.element_type.storage_width == 16  # type: ignore[attr-defined]
        e = ops["gelu"].results[0].type.element_type  # type: ignore[attr-defined]
        assert e.storage_width == (16 if wide else 8), (caps, margin, e)
        assert ops["fc2"].operands[0].type is ops["gelu"].results[0].type  # type: ignore[attr-defined]
        assert stats["narrow_lut16"] == (0 if wide else 1)


def test_lut16_narrow_result_is_the_8_bit_table_of_the_int16_input() -> None:
    """The GELU's 8-bit result on a costly-int16 target is ``tpu.Lut16``'s table into the GELU's
    own 8-bit type: the same entries as the reference target's int16 table, requantized."""
    m, *_ = _ffn_model()
    assert convert_top_to_tpu(m, "INT8", capabilities=_costly_i16())[0]  # type: ignore[arg-type]
    gelu = _by_name(m)["gelu"]
    tab = np.asarray(gelu.properties["table"].to_numpy())  # type: ignore[attr-defined]
    assert tab.shape == (65536,) and tab.dtype == np.int8
    assert "i16" not in str(gelu.results[0].type)  # type: ignore[attr-defined]


def test_a_target_without_i16_keeps_the_8_bit_forms() -> None:
    from lamina.dialects.tpu.capabilities import REFERENCE, Capability, TargetCapabilities

    int8_only = TargetCapabilities(
        "int8-only",
        [
            Capability(c.ops, c.mode, ("i8", "u8") if c.mode == "INT8" else c.dtypes, c.form, c.cost)
            for c in REFERENCE.entries
        ],
    )
    m, *_ = _ffn_model()
    assert convert_top_to_tpu(m, "INT8", int_forms="all", capabilities=int8_only)[0]  # type: ignore[arg-type]
    names = {op.name for op in m.walk_ops()}  # type: ignore[attr-defined]
    assert "tpu.Lut" in names and "tpu.Lut16" not in names
    assert "i16" not in str(m)


def _per_channel_model() -> tuple[object, np.ndarray, np.ndarray]:
    """x → LayerNorm (float, one channel 50x the others) → MatMul: the MatMul's input per channel."""
    from lamina.ir.attributes import DenseElementsAttr, IntegerAttr
    from lamina.ir.types import i64

    rng = np.random.default_rng(7)
    gam = np.ones(16, np.float32)
    gam[3] = 50.0
    w = rng.normal(0, 0.3, (16, 8)).astype(np.float32)
    a, n, o = _t("4x16", -3.0, 3.0), _t("4x16", -150.0, 150.0), _t("4x8", -40.0, 40.0)
    body = f"""
  %in = "top.Input"(%x) : ({a}) -> {a} loc("x")
  %g = "top.Weight"() <{{value = dense<{gam.tolist()}> : tensor<16xf32>}}> : () -> tensor<16xf32>
  %bb = "top.Weight"() <{{value = dense<0.0> : tensor<16xf32>}}> : () -> tensor<16xf32>
  %w = "top.Weight"() <{{value = dense<{w.tolist()}> : tensor<16x8xf32>}}> : () -> tensor<16x8xf32>
  %nn = "top.None"() : () -> none
  %l, %mean, %rstd = "top.LayerNorm"(%in, %g, %bb) <{{axis = -1 : i64, epsilon = 1.0e-05 : f64}}> : ({a}, tensor<16xf32>, tensor<16xf32>) -> ({n}, none, none) loc("ln")
  %z = "top.MatMul"(%l, %w, %nn) : ({n}, tensor<16x8xf32>, none) -> {o} loc("fc")"""
    m = _module(body, f"%x: {a}", "%z", o)
    th = np.full(16, 3.0, np.float32)
    th[3] = 150.0
    ln = next(op for op in m.walk_ops() if op.name == "top.LayerNorm")  # type: ignore[attr-defined]
    ln.attributes["lamina.channel_th"] = DenseElementsAttr.from_numpy(th)
    ln.attributes["lamina.channel_axis"] = IntegerAttr(1, i64)
    return m, gam, w


def test_wide_input_takes_a_per_channel_input_on_one_int16_grid() -> None:
    from lamina.dialects.tpu.quantize import qparams

    x = np.random.default_rng(8).normal(0, 1, (4, 16)).astype(np.float32)
    mu, sd = x.mean(-1, keepdims=True), x.std(-1, keepdims=True)
    m, gam, w = _per_channel_model()
    ref = ((x - mu) / np.sqrt(sd**2 + 1e-5) * gam).astype(np.float64) @ w
    err = {}
    for forms in ("lut,gather,softmax,attention", "default"):
        m, *_ = _per_channel_model()
        assert convert_top_to_tpu(m, "INT8", int_forms=forms)[0]  # type: ignore[arg-type]
        fc = _by_name(m)["fc"]
        _, _, axis, lo, hi = qparams(fc.operands[0].type)  # type: ignore[attr-defined]
        if forms != "default":
            assert axis == 1  # per channel, scales folded into the weight rows
        else:
            # one int16 grid: scale 150 / 32767, the LayerNorm's float result quantized to it directly
            s, _, axis, lo, hi = qparams(fc.operands[0].type)  # type: ignore[attr-defined]
            assert axis is None and (lo, hi) == (-32767, 32767) and math.isclose(float(s), 150.0 / 32767)
            cast = fc.operands[0].defining_op()  # type: ignore[attr-defined]
            assert cast.name == "tpu.Cast" and "f32" in str(cast.operands[0].type)
            wq = np.asarray(fc.operands[1].defining_op().properties["value"].to_numpy())  # type: ignore[attr-defined]
            sw = np.abs(w).max(0) / 127
            assert (
                wq.tolist()
                == np.clip(np.sign(w) * np.floor(np.abs(w / sw) + 0.5), -127, 127).astype(int).tolist()
            )
        got = np.asarray(next(iter(Interpreter(m).run([x]).values())), np.float64)  # type: ignore[arg-type]
        err[forms] = float(np.sqrt(np.mean((got - ref) ** 2)))
    assert err["default"] < err["lut,gather,softmax,attention"], err  # wide_input on by default


def _residual_model() -> object:
    """a + b → LayerNorm (F32 by default) and a + b → MatMul: the first sum's only user runs in
    float, the second's is an INT8 MatMul."""
    a = _t("2x8", -3.0, 3.0)
    s, n, o = _t("2x8", -6.0, 6.0), _t("2x8", -4.0, 4.0), _t("2x8", -9.0, 9.0)
    w = np.random.default_rng(9).normal(0, 0.5, (8, 8)).astype(np.float32)
    body = f"""
  %ai = "top.Input"(%a) : ({a}) -> {a} loc("a")
  %bi = "top.Input"(%b) : ({a}) -> {a} loc("b")
  %g = "top.Weight"() <{{value = dense<1.0> : tensor<8xf32>}}> : () -> tensor<8xf32>
  %w = "top.Weight"() <{{value = dense<{w.tolist()}> : tensor<8x8xf32>}}> : () -> tensor<8x8xf32>
  %nn = "top.None"() : () -> none
  %s1 = "top.Add"(%ai, %bi) : ({a}, {a}) -> {s} loc("sum1")
  %l, %mean, %rstd = "top.LayerNorm"(%s1, %g, %nn) <{{axis = -1 : i64, epsilon = 1.0e-05 : f64}}> : ({s}, tensor<8xf32>, none) -> ({n}, none, none) loc("ln")
  %s2 = "top.Add"(%ai, %bi) : ({a}, {a}) -> {s} loc("sum2")
  %m = "top.MatMul"(%s2, %w, %nn) : ({s}, tensor<8x8xf32>, none) -> {o} loc("fc")
  %o = "top.Add"(%l, %m) : ({n}, {o}) -> {o} loc("out")"""
    return _module(body, f"%a: {a}, %b: {a}", "%o", o)


def test_wide_sum_gives_an_add_read_in_float_an_int16_result() -> None:
    from lamina.dialects.tpu.quantize import qparams

    rng = np.random.default_rng(10)
    a, b = (rng.uniform(-3, 3, (2, 8)).astype(np.float32) for _ in range(2))
    for forms in ("lut,gather,softmax,attention", "default"):
        m = _residual_model()
        assert convert_top_to_tpu(m, "INT8", int_forms=forms)[0]  # type: ignore[arg-type]
        ops = _by_name(m)
        s1, _, _, lo, hi = qparams(ops["sum1"].results[0].type)  # type: ignore[attr-defined]
        if forms == "default":  # the LayerNorm's input: int16, scale 6 / 32767
            assert (lo, hi) == (-32768, 32767) and math.isclose(float(s1), 6.0 / 32767)
        else:
            assert (lo, hi) == (-128, 127)
        assert qparams(ops["sum2"].results[0].type)[3:] == (-128, 127)  # an INT8 MatMul reads it
        # the int16 sum is the exact sum of the int8 inputs within half its step
        qa, qb = (np.asarray(ops[n].execute([x])[0]) for n, x in (("a_i8", a), ("b_i8", b)))  # type: ignore[attr-defined]
        got = np.asarray(ops["sum1"].execute([qa, qb])[0], np.float64) * float(s1)  # type: ignore[attr-defined]
        exact = qa * float(qparams(ops["a_i8"].results[0].type)[0]) + qb * float(
            qparams(ops["b_i8"].results[0].type)[0]
        )  # type: ignore[attr-defined]
        assert np.max(np.abs(got - exact)) <= float(s1) / 2 + 1e-9


@pytest.mark.parametrize(("shape", "wide"), [("2x8", True), ("1x4x3x5", False)])
def test_wide_sum_is_for_rank_3_or_less(shape: str, wide: bool) -> None:
    """A returned sum of rank <= 3 gets the int16 type; a 4-d (convolutional) one keeps 8 bits
    (on PP-OCRv4 the int16 form lost accuracy, docs/tpu.md)."""
    from lamina.dialects.tpu.quantize import qparams

    a, s = _t(shape, -3.0, 3.0), _t(shape, -6.0, 6.0)
    body = f"""
  %ai = "top.Input"(%a) : ({a}) -> {a} loc("a")
  %bi = "top.Input"(%b) : ({a}) -> {a} loc("b")
  %s = "top.Add"(%ai, %bi) : ({a}, {a}) -> {s} loc("sum")"""
    m = _module(body, f"%a: {a}, %b: {a}", "%s", s)
    assert convert_top_to_tpu(m, "INT8")[0]  # type: ignore[arg-type]
    lo, hi = qparams(_by_name(m)["sum"].results[0].type)[3:]  # type: ignore[attr-defined]
    assert (lo, hi) == ((-32768, 32767) if wide else (-128, 127))

"""Random ``tpu`` ops and operand values for the NPU tests: the IR builders (an op of given operand and
result types, each operand a function argument, a ``top.None`` or a ``top.Weight`` constant) and
hypothesis strategies drawing one op of every TIU command's kinds — INT8 symmetric, asymmetric and
per-channel (along channels and along the last axis), F32, F16 and BF16 — with values for its
operands (:func:`cases`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st

import lamina.dialects.tpu  # noqa: F401  (registers the dialects)
from lamina.dialects.tpu.quantize import build_lut, quantize_multiplier
from lamina.execution.kernels.geometry import pool_output_size
from lamina.ir.context import Context
from lamina.ir.core import Operation
from lamina.ir.parser import parse_module
from lamina.ir.types import RankedTensorType

FLOATS = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


# ---- building ops ----------------------------------------------------------------------------------


def build(name: str, operands: list[Any], results: list[str], attrs: str = "") -> Operation:
    """A ``tpu`` op ``name`` of ``operands`` — a type string (a function argument), None (a
    ``top.None``) or ``("const", value_text, type)`` (a ``top.Weight``; ``tpu.Weight`` when the
    type is quantized and a 4th element gives the storage type) — with result types ``results``
    (the first returned)."""
    args, defs, names, types = [], [], [], []
    for i, o in enumerate(operands):
        if o is None:
            defs.append(f'  %n{i} = "top.None"() : () -> none')
            names.append(f"%n{i}")
            types.append("none")
        elif isinstance(o, tuple):
            kind = "tpu.Weight" if len(o) > 3 else "top.Weight"
            vt = o[3] if len(o) > 3 else o[2]
            defs.append(f'  %c{i} = "{kind}"() <{{value = {o[1]} : {vt}}}> : () -> {o[2]}')
            names.append(f"%c{i}")
            types.append(o[2])
        else:
            args.append(f"%a{i}: {o}")
            names.append(f"%a{i}")
            types.append(o)
    at = f" <{{{attrs}}}>" if attrs else ""
    res = results[0] if len(results) == 1 else f"({', '.join(results)})"
    lhs = "%r" if len(results) == 1 else f"%r:{len(results)}"
    ret = "%r" if len(results) == 1 else "%r#0"
    text = (
        f"func.func @main({', '.join(args)}) -> {results[0]} {{\n"
        + "".join(d + "\n" for d in defs)
        + f'  {lhs} = "{name}"({", ".join(names)}){at} : ({", ".join(types)}) -> {res}\n'
        + f"  return {ret} : {results[0]}\n}}\n"
    )
    m = parse_module(text, Context())
    assert m is not None
    return next(o for o in m.walk_ops() if o.name == name)  # type: ignore[attr-defined]


def op(name: str, operands: list[Any], result: str, attrs: str = "") -> Operation:
    """:func:`build` with one result."""
    return build(name, operands, [result], attrs)


def shape_text(s: tuple[int, ...]) -> str:
    return "x".join(str(d) for d in s)


def q8(signed: bool, scale: float, zp: int = 0) -> str:
    return f"!quant.uniform<{'i8' if signed else 'u8'}:f32, {float(scale)!r}:{zp}>"


def per_axis(scales: list[float], axis: int, weight: bool = True) -> str:
    rng = "i8<-127:127>" if weight else "i8"
    return f"!quant.uniform<{rng}:f32:{axis}, {{{', '.join(repr(float(s)) for s in scales)}}}>"


def q16(scale: float, lim: int | None = None) -> str:
    """A symmetric int16 type (``i16<-lim:lim>`` with ``lim``: the int16 forms' MatMul inputs)."""
    st_ = "i16" if lim is None else f"i16<-{lim}:{lim}>"
    return f"!quant.uniform<{st_}:f32, {float(scale)!r}>"


def storage16(rng: np.random.Generator, shape: tuple[int, ...], lim: int = 32768) -> np.ndarray:
    """int16 storage values in ``[-lim, lim)`` (``lim`` 32768: the whole range), extremes included."""
    x = rng.integers(-lim, lim, shape).astype(np.int16)
    if x.size:
        x.reshape(-1)[0] = -lim if lim == 32768 else -lim + 1
    return x


def t(shape: tuple[int, ...], elem: str) -> str:
    return f"tensor<{shape_text(shape)}x{elem}>" if shape else f"tensor<{elem}>"


def arr(name: str, values: Any) -> str:
    return f"{name} = array<i64: {', '.join(str(int(v)) for v in values)}>"


def storage(rng: np.random.Generator, shape: tuple[int, ...], signed: bool) -> np.ndarray:
    lo, hi = (-128, 128) if signed else (0, 256)
    return rng.integers(lo, hi, shape).astype(np.int8 if signed else np.uint8)


def mults(rng: np.random.Generator, n: int, lo: float = 1e-4, hi: float = 0.5) -> tuple[list[int], list[int]]:
    pairs = [quantize_multiplier(float(r)) for r in np.exp(rng.uniform(np.log(lo), np.log(hi), n))]
    return [p[0] for p in pairs], [p[1] for p in pairs]


def bits(a: np.ndarray) -> np.ndarray:
    """An array's bits, comparable with ``assert_array_equal`` (bfloat16 as uint16)."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint16) if a.dtype.kind == "V" else a


def fl(rng: np.random.Generator, shape: tuple[int, ...], ft: str) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32).astype(FLOATS[ft])


def dense(a: np.ndarray) -> str:
    """A ``dense<...>`` literal of an integer or float array (floats printed exactly)."""

    def text(x: np.ndarray) -> str:
        if x.ndim == 0:
            return str(int(x)) if a.dtype.kind in "iu" else repr(float(x))
        return "[" + ", ".join(text(y) for y in x) + "]"

    return f"dense<{text(np.asarray(a) if a.dtype.kind in 'iu' else np.asarray(a, np.float64))}>"


@dataclass
class Case:
    """A tpu op, values for its operands, the record class it lowers to, and whether its
    ``execute`` sums in the order of its interpreter kernel (float convolutions do not: the
    command equals the kernel bit for bit and ``execute`` within rounding)."""

    op: Operation
    inputs: list[Any]
    cls: str
    exact_execute: bool = True
    notes: dict[str, Any] = field(default_factory=dict)


# ---- conv ----------------------------------------------------------------------------------------------


@st.composite
def conv_cases(draw: Any) -> Case:
    rank = draw(st.sampled_from([4, 4, 3]))
    depthwise = draw(st.booleans())
    g = draw(st.integers(1, 3))
    cin = g if depthwise else g * draw(st.integers(1, 3))
    cout = g if depthwise else g * draw(st.integers(1, 3))
    nd = rank - 2
    k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    d = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    pads = [draw(st.integers(0, k[i % nd] - 1)) for i in range(2 * nd)]
    sp = tuple(draw(st.integers(1, 7)) for _ in range(nd))
    for i in range(nd):
        assume(sp[i] + pads[i] + pads[i + nd] >= (k[i] - 1) * d[i] + 1)
    n = draw(st.integers(1, 2))
    mode = draw(st.sampled_from(["sym", "asym", "u8", "f32", "f16", "bf16"]))
    bias = draw(st.booleans())
    relu = draw(st.sampled_from(["none", "relu", "limit"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    xs, ws = (n, cin, *sp), (cout, cin // g, *k)
    out_sp = tuple((sp[i] + pads[i] + pads[i + nd] - (k[i] - 1) * d[i] - 1) // s[i] + 1 for i in range(nd))
    attrs = [arr("strides", s), arr("dilations", d), arr("pads", pads), f"group = {g} : i64"]
    if relu != "none":
        attrs.append("do_relu = true")
    if relu == "limit":
        attrs.append("relu_limit = 1.5")
    if mode in FLOATS:
        ft = mode
        w = fl(rng, ws, ft)
        operands: list[Any] = [t(xs, ft), ("const", dense(w.astype(np.float32)), t(ws, ft)), None]
        ins: list[Any] = [fl(rng, xs, ft), w, None]
        if bias:
            bv = fl(rng, (cout,), ft)
            operands[2] = ("const", dense(bv.astype(np.float32)), t((cout,), ft))
            ins[2] = bv
        o = op("tpu.Conv", operands, t((n, cout, *out_sp), ft), ", ".join(attrs))
        return Case(o, ins, "Depthwise" if g == cin == cout else "Conv", exact_execute=False)
    signed = mode != "u8"
    zp = draw(st.integers(-20, 20)) if mode == "asym" else 0
    w_scales = list(rng.uniform(0.001, 0.05, cout))
    w = rng.integers(-127, 128, ws).astype(np.int8)
    w_t = t(ws, per_axis(w_scales, 0))
    operands = [t(xs, q8(signed, 0.05, zp)), ("const", dense(w), w_t, t(ws, "i8")), None]
    ins = [storage(rng, xs, signed), w, None]
    if bias:
        bv = rng.integers(-5000, 5000, (cout,)).astype(np.int32)
        operands[2] = ("const", dense(bv), t((cout,), "i32"))
        ins[2] = bv
    m, r = mults(rng, cout if draw(st.booleans()) else 1)
    attrs += [arr("multiplier", m), arr("rshift", r)]
    out_signed = relu == "none" or draw(st.booleans())
    out_t = t((n, cout, *out_sp), q8(out_signed, 0.02, 3 if out_signed else 0))
    o = op("tpu.Conv", operands, out_t, ", ".join(attrs))
    return Case(o, ins, "Depthwise" if g == cin == cout else "Conv")


# ---- matmul --------------------------------------------------------------------------------------------


@st.composite
def matmul_cases(draw: Any, wide: str | None = None) -> Case:
    """A MatMul; ``wide`` ``"in"`` / ``"out"``: always an int16 left operand / result."""
    m, k, n = draw(st.integers(1, 5)), draw(st.integers(1, 9)), draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["weight", "act", "vec"] if wide is None else ["weight", "vec"]))
    mode = draw(st.sampled_from(["sym", "asym", "f32", "f16", "bf16"] if wide is None else ["sym"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    batch = draw(st.sampled_from([(), (2,), (2, 3)]))
    if kind == "weight":
        a_s, b_s = (*batch, m, k), (k, n)
    elif kind == "act":
        a_s, b_s = (*batch, m, k), (*batch, k, n)
    else:
        a_s, b_s = (k,), (k, n)
    out_s = (*batch, m, n) if kind != "vec" else (n,)
    bias = kind != "act" and draw(st.booleans())
    relu = draw(st.sampled_from(["", "do_relu = true", "do_relu = true, relu_limit = 1.25"]))
    if mode in FLOATS:
        ft = mode
        bv = fl(rng, b_s, ft)
        right: Any = ("const", dense(bv.astype(np.float32)), t(b_s, ft)) if kind != "act" else t(b_s, ft)
        operands: list[Any] = [t(a_s, ft), right, None]
        ins: list[Any] = [fl(rng, a_s, ft), bv, None]
        if bias:
            bb = fl(rng, (n,), ft)
            operands[2] = ("const", dense(bb.astype(np.float32)), t((n,), ft))
            ins[2] = bb
        return Case(op("tpu.MatMul", operands, t(out_s, ft), relu), ins, "MatMul")
    zp = -7 if mode == "asym" else 0
    if kind == "act":
        b_t = t(b_s, q8(True, 0.03, 5 if mode == "asym" else 0))
        bv = storage(rng, b_s, True)
        right = b_t
        mu, r = mults(rng, 1)
    else:
        cols = list(rng.uniform(0.001, 0.05, n))
        bv = rng.integers(-127, 128, b_s).astype(np.int8)
        right = ("const", dense(bv), t(b_s, per_axis(cols, 1)), t(b_s, "i8"))
        mu, r = mults(rng, n if draw(st.booleans()) else 1)
    if wide is None:
        wide = draw(st.sampled_from(["", "", "in", "out"])) if kind != "act" else ""
    if wide == "in":  # wide_input: an int16 left operand on i16<-L:L>
        lim = min(32767, (2**31 - 1) // (127 * k))
        operands = [t(a_s, q16(0.0004, lim)), right, None]
        ins = [storage16(rng, a_s, lim), bv, None]
    else:
        operands = [t(a_s, q8(True, 0.04, zp)), right, None]
        ins = [storage(rng, a_s, True), bv, None]
    if bias:
        bb = rng.integers(-3000, 3000, (n,)).astype(np.int32)
        operands[2] = ("const", dense(bb), t((n,), "i32"))
        ins[2] = bb
    attrs = ", ".join(a for a in (arr("multiplier", mu), arr("rshift", r), relu) if a)
    out_signed = not relu or draw(st.booleans())
    out_e = q16(0.0003) if wide == "out" else q8(out_signed, 0.1)  # lut16: the int16 pre-activation
    return Case(op("tpu.MatMul", operands, t(out_s, out_e), attrs), ins, "MatMul", notes={"wide": wide})


# ---- element-wise ----------------------------------------------------------------------------------------


def _bcast(draw: Any, out: tuple[int, ...]) -> tuple[int, ...]:
    """A shape broadcasting to ``out``: some dims 1, maybe fewer dims."""
    s = tuple(1 if draw(st.booleans()) else d for d in out)
    return s[draw(st.integers(0, len(out))) :]


@st.composite
def eltwise_cases(draw: Any, names: tuple[str, ...] | None = None, mode: str | None = None) -> Case:
    """An element-wise op (of ``names``; in ``mode`` — ``sym``, ``asym``, ``per_channel``,
    ``wide``, a float type — where given)."""
    all_names = ["tpu.Add", "tpu.Sub", "tpu.Mul", "tpu.Max", "tpu.Min", "tpu.Div"]
    name = draw(st.sampled_from(list(names) if names else all_names))
    rank = draw(st.integers(1, 5))
    out = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    b_s = _bcast(draw, out)
    a_s = out if draw(st.integers(0, 3)) else _bcast(draw, out)
    assume(tuple(np.broadcast_shapes(a_s, b_s)) == out)
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    const_b = draw(st.booleans())
    modes = ["f32", "f16", "bf16"] + (
        ["sym", "asym", "per_channel"] if name in ("tpu.Add", "tpu.Sub") else []
    )
    modes += ["sym", "asym", "per_channel"] if name == "tpu.Mul" else []
    modes += ["wide"] if name in ("tpu.Add", "tpu.Sub") else []
    mode = draw(st.sampled_from(modes)) if mode is None else mode
    if mode in FLOATS:
        ft = mode
        bv = fl(rng, b_s, ft)
        if name == "tpu.Div":
            bv.reshape(-1)[0] = 0  # x / 0 as IEEE says
        b_op: Any = ("const", dense(bv.astype(np.float32)), t(b_s, ft)) if const_b else t(b_s, ft)
        o = op(name, [t(a_s, ft), b_op], t(out, ft))
        return Case(o, [fl(rng, a_s, ft), bv], "Eltwise")
    if mode == "per_channel":
        # a per-axis result along the last axis (transformers) or axis 1; inputs full or per-tensor
        axis = draw(st.sampled_from([rank - 1, min(1, rank - 1)]))
        a_s = out
        c = out[axis]
        s_out = rng.uniform(0.01, 0.5, c)
        s_a = rng.uniform(0.01, 0.5, c)
        s_b = float(rng.uniform(0.01, 0.3))
        b_s = tuple(1 if i != axis and draw(st.booleans()) else d for i, d in enumerate(out))
        wide = draw(st.booleans()) and name != "tpu.Mul"  # wide_sum: an int16 per-axis result
        if wide:
            s_out = s_out * 127 / 32767
        out_q = per_axis(list(s_out), axis, weight=False).replace("<i8:", "<i16:" if wide else "<i8:")
        if name == "tpu.Mul":  # one multiplier per channel: s_a[c] * s_b[c] / s_out[c]
            b_per = draw(st.booleans())
            s_bc = rng.uniform(0.01, 0.3, c) if b_per else np.full(c, s_b)
            b_s = tuple(d if i == axis or not draw(st.booleans()) else 1 for i, d in enumerate(out))
            if b_per:
                b_s = tuple(d if i == axis else b for i, (d, b) in enumerate(zip(out, b_s)))
            pairs = [quantize_multiplier(float(x)) for x in s_a * s_bc / s_out]
            attrs = f"{arr('multiplier', [p[0] for p in pairs])}, {arr('rshift', [p[1] for p in pairs])}"
            b_t = t(b_s, per_axis(list(s_bc), axis, weight=False) if b_per else q8(True, s_b))
            o = op(name, [t(a_s, per_axis(list(s_a), axis, weight=False)), b_t], t(out, out_q), attrs)
            ins = [storage(rng, a_s, True), storage(rng, b_s, True)]
            return Case(o, ins, "Eltwise", notes={"axis": axis})
        ratios = np.stack([s_a / s_out, np.full(c, s_b) / s_out])
        rs = np.array([quantize_multiplier(float(v))[1] for v in ratios.max(axis=0)])
        ms = np.floor(ratios * np.exp2(31.0 + rs) + 0.5).astype(np.int64)
        attrs = f"{arr('multiplier', ms.reshape(-1))}, {arr('rshift', rs)}"
        o = op(
            name,
            [t(a_s, per_axis(list(s_a), axis, weight=False)), t(b_s, q8(True, s_b))],
            t(out, out_q),
            attrs,
        )
        return Case(o, [storage(rng, a_s, True), storage(rng, b_s, True)], "Eltwise", notes={"axis": axis})
    zps = [int(v) for v in rng.integers(-10, 10, 2)] if mode == "asym" else [0, 0]
    scales = list(rng.uniform(0.01, 0.2, 2))
    s_out = float(rng.uniform(0.02, 0.3)) * (127 / 32767 if mode == "wide" else 1.0)
    if name == "tpu.Mul":
        mu, r = quantize_multiplier(scales[0] * scales[1] / s_out)
        attrs = f"{arr('multiplier', [mu])}, {arr('rshift', [r])}"
    else:
        ratios = [sc / s_out for sc in scales]
        _, rs = quantize_multiplier(max(ratios))
        ms = [round(x * 2.0 ** (31 + rs)) for x in ratios]
        attrs = f"{arr('multiplier', ms)}, {arr('rshift', [rs])}"
    bv = storage(rng, b_s, True)
    b_t = t(b_s, q8(True, scales[1], zps[1]))
    b_op = ("const", dense(bv), b_t, t(b_s, "i8")) if const_b else b_t
    out_e = q16(s_out) if mode == "wide" else q8(True, s_out, 2)  # wide_sum: an int16 result
    o = op(name, [t(a_s, q8(True, scales[0], zps[0])), b_op], t(out, out_e), attrs)
    return Case(o, [storage(rng, a_s, True), bv], "Eltwise")


# ---- requant, casts, lut, activations ------------------------------------------------------------------


@st.composite
def requant_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 5))
    shp = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    per = draw(st.booleans())
    if per:
        axis = draw(st.integers(0, rank - 1))
        c = shp[axis]
        in_t = t(shp, per_axis(list(rng.uniform(0.01, 0.5, c)), axis, weight=False))
        mu, r = mults(rng, c, 0.05, 20.0)
        attrs = f"{arr('multiplier', mu)}, {arr('rshift', r)}"
        si = True
    else:
        si = draw(st.booleans())
        in_t = t(shp, q8(si, 0.1, -4 if si else 0))
        mu, r = mults(rng, 1, 0.05, 20.0)
        attrs = f"multiplier = {mu[0]} : i64, rshift = {r[0]} : i64"
    so = draw(st.booleans())
    out_e = q16(0.0004, 11008) if draw(st.integers(0, 3)) == 0 else q8(so, 0.07, 6 if so else 0)
    o = op("tpu.Requant", [in_t], t(shp, out_e), attrs)
    return Case(o, [storage(rng, shp, si)], "Requant")


@st.composite
def cast_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 5))
    shp = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    ft = draw(st.sampled_from(sorted(FLOATS)))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    kind = draw(st.sampled_from(["quantize", "dequantize", "float"]))
    if kind == "float":
        other = draw(st.sampled_from(sorted(FLOATS)))
        return Case(op("tpu.Cast", [t(shp, ft)], t(shp, other)), [fl(rng, shp, ft) * 100], "Cast")
    if draw(st.booleans()):
        axis = draw(st.integers(0, rank - 1))
        q = per_axis(list(rng.uniform(0.005, 0.2, shp[axis])), axis, weight=False)
    elif draw(st.integers(0, 3)) == 0:  # the int16 forms' casts
        q = q16(float(rng.uniform(0.0001, 0.002)), draw(st.sampled_from([None, 11008])))
    else:
        signed = draw(st.booleans())
        q = q8(signed, float(rng.uniform(0.005, 0.2)), int(rng.integers(-20, 20)) if signed else 0)
    if "i16" in q:
        if kind == "quantize":
            x = (rng.standard_normal(shp) * 30).astype(np.float32).astype(FLOATS[ft])
            return Case(op("tpu.Cast", [t(shp, ft)], t(shp, q)), [x], "Cast")
        return Case(op("tpu.Cast", [t(shp, q)], t(shp, ft)), [storage16(rng, shp)], "Cast")
    if kind == "quantize":
        x = (rng.standard_normal(shp) * 3).astype(np.float32).astype(FLOATS[ft])
        x.reshape(-1)[:1] = np.float32(np.nan)
        return Case(op("tpu.Cast", [t(shp, ft)], t(shp, q)), [x], "Cast")
    signed = "u8" not in q
    return Case(op("tpu.Cast", [t(shp, q)], t(shp, ft)), [storage(rng, shp, signed)], "Cast")


@st.composite
def lut_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 5))
    shp = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    si, so = draw(st.booleans()), draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    in_t, out_t = RankedTensorType(shp, _qtype(si, 0.1)), RankedTensorType(shp, _qtype(so, 0.05))
    table = build_lut(np.tanh, in_t, out_t)
    tt = f"tensor<256x{'i8' if so else 'ui8'}>"
    o = op("tpu.Lut", [t(shp, q8(si, 0.1))], t(shp, q8(so, 0.05)), f"table = {dense(table)} : {tt}")
    return Case(o, [storage(rng, shp, si)], "Lut")


@st.composite
def lut16_cases(draw: Any) -> Case:
    """``tpu.Lut16``: an int16 input, an 8-bit result or an int16 one on ``i16<-L:L>`` (the
    ``lut16`` form's GELU feeding a MatMul)."""
    from lamina.dialects.quant import UniformQuantizedType
    from lamina.ir.types import f32

    rank = draw(st.integers(1, 5))
    shp = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    out = draw(st.sampled_from(["i8", "u8", "i16"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    in_t = RankedTensorType(shp, UniformQuantizedType(16, True, f32, 0.0003, 0))
    if out == "i16":
        out_q, out_text, tt = (
            UniformQuantizedType(16, True, f32, 0.0009, 0, -11008, 11008),
            q16(0.0009, 11008),
            "i16",
        )
    else:
        out_q, out_text, tt = _qtype(out == "i8", 0.05), q8(out == "i8", 0.05), "i8" if out == "i8" else "ui8"
    table = build_lut(np.tanh, in_t, RankedTensorType(shp, out_q))
    o = op(
        "tpu.Lut16", [t(shp, q16(0.0003))], t(shp, out_text), f"table = {dense(table)} : tensor<65536x{tt}>"
    )
    return Case(o, [storage16(rng, shp)], "Lut16")


def _qtype(signed: bool, scale: float) -> Any:
    from lamina.dialects.quant import UniformQuantizedType
    from lamina.ir.types import f32

    return UniformQuantizedType(8, signed, f32, scale, 0, -128 if signed else 0, 127 if signed else 255)


#: activations with their properties as attribute text
ACTIVE = [
    ("Sigmoid", ""),
    ("SiLU", ""),
    ("GELU", ""),
    ("GELU", 'approximate = "tanh"'),
    ("Tanh", ""),
    ("Relu", ""),
    ("LeakyRelu", "alpha = 0.125 : f64"),
    ("HardSigmoid", "alpha = 0.25 : f64, beta = 0.375 : f64"),
    ("HardSwish", ""),
    ("Elu", ""),
    ("Exp", ""),
    ("Abs", ""),
]


@st.composite
def active_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 5))
    shp = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    ft = draw(st.sampled_from(sorted(FLOATS)))
    fn, attrs = draw(st.sampled_from(ACTIVE))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    o = op("tpu." + fn, [t(shp, ft)], t(shp, ft), attrs)
    return Case(o, [fl(rng, shp, ft) * 3], "Active")


# ---- pool, permute, reduce ------------------------------------------------------------------------------


@st.composite
def pool_cases(draw: Any) -> Case:
    rank = draw(st.sampled_from([4, 4, 3]))
    nd = rank - 2
    kind = draw(st.sampled_from(["max", "avg"]))
    mode = draw(st.sampled_from(["sym", "u8", "f32", "f16", "bf16"]))
    k = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    int_avg = kind == "avg" and mode not in FLOATS
    d = tuple(draw(st.integers(1, 2)) for _ in range(nd)) if kind == "max" else (1,) * nd
    pads = [draw(st.integers(0, k[i % nd] - 1)) for i in range(2 * nd)]
    sp = tuple(draw(st.integers(1, 8)) for _ in range(nd))
    ceil = draw(st.booleans()) and not int_avg
    for i in range(nd):
        assume(sp[i] + pads[i] + pads[i + nd] >= (k[i] - 1) * d[i] + 1)
    geo = (list(k), list(s), list(d), list(pads))
    out_sp, _ = pool_output_size(list(sp), geo, ceil)
    # every window holds an input element (one wholly in padding is -inf in the reference)
    for i in range(nd):
        for o_ in range(out_sp[i]):
            assume(any(0 <= o_ * s[i] - pads[i] + j * d[i] < sp[i] for j in range(k[i])))
    attrs = [arr("kernel_shape", k), arr("strides", s), arr("pads", pads), arr("dilations", d)]
    if ceil:
        attrs.append("ceil_mode = true")
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    c, n = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    xs, ys = (n, c, *sp), (n, c, *out_sp)
    if mode in FLOATS:
        x, elem, out_e = fl(rng, xs, mode), mode, mode
    else:
        x, elem = storage(rng, xs, mode == "sym"), q8(mode == "sym", 0.1, 0)
        out_e = elem
    if kind == "max":
        o = build("tpu.MaxPool", [t(xs, elem)], [t(ys, out_e), "none"], ", ".join(attrs))
        return Case(o, [x], "Pool")
    if draw(st.booleans()):
        attrs.append("count_include_pad = true")
    if int_avg:
        if "count_include_pad = true" not in attrs and any(pads):
            attrs.append("count_include_pad = true")
        mu, r = quantize_multiplier(0.1 / (0.08 * math.prod(k)))
        attrs += [arr("multiplier", [mu]), arr("rshift", [r])]
        out_e = q8(True, 0.08, 1)
    return Case(op("tpu.AvgPool", [t(xs, elem)], t(ys, out_e), ", ".join(attrs)), [x], "Pool")


@st.composite
def permute_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 6))
    xs = tuple(draw(st.integers(1, 3)) for _ in range(rank))
    perm = draw(st.permutations(list(range(rank))))
    if rank > 4:  # keep some runs so the permutation merges into 4 groups
        perm = list(range(rank - 4)) + [rank - 4 + p for p in draw(st.permutations([0, 1, 2, 3]))]
    elem = draw(st.sampled_from(["bf16", "f32", q8(True, 0.1)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    x = storage(rng, xs, True) if "quant" in elem else fl(rng, xs, elem)
    out = tuple(xs[p] for p in perm)
    o = op("tpu.Permute", [t(xs, elem)], t(out, elem), arr("order", perm))
    return Case(o, [x], "Permute")


@st.composite
def reduce_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 5))
    xs = tuple(draw(st.integers(1, 4)) for _ in range(rank))
    axes = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1)))
    keep = draw(st.booleans())
    out = (
        tuple(1 if i in axes else d for i, d in enumerate(xs))
        if keep
        else tuple(d for i, d in enumerate(xs) if i not in axes)
    )
    mode_dt = draw(
        st.sampled_from(
            [("ReduceMean", "int8"), ("ReduceMax", "int8"), ("ReduceMin", "int8")]
            + [(m, f) for m in ("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin") for f in FLOATS]
        )
    )
    mode, dt = mode_dt
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    ax = ("const", f"dense<[{', '.join(str(a) for a in axes)}]>", f"tensor<{len(axes)}xi64>")
    attrs = f'mode = "{mode}", keepdims = {str(keep).lower()}'
    if dt == "int8":
        x_e = q8(True, 0.1, -5)
        out_e = x_e
        if mode == "ReduceMean":
            nel = math.prod(xs[a] for a in axes)
            mu, r = quantize_multiplier(0.1 / (0.05 * nel))
            out_e = q8(True, 0.05, 2)
            attrs += f", {arr('multiplier', [mu])}, {arr('rshift', [r])}"
        x = storage(rng, xs, True)
    else:
        x_e = out_e = dt
        x = fl(rng, xs, dt)
    o = op("tpu.Reduce", [t(xs, x_e), ax], t(out, out_e), attrs)
    return Case(o, [x, np.array(axes, np.int64)], "Reduce")


# ---- softmax, layer norm, attention ---------------------------------------------------------------------


@st.composite
def softmax_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 5))
    xs = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    axis = draw(st.integers(-rank, rank - 1))
    ft = draw(st.sampled_from(sorted(FLOATS)))
    log = draw(st.booleans())
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    o = op("tpu.Softmax", [t(xs, ft)], t(xs, ft), f"axis = {axis} : i64, log = {str(log).lower()}")
    return Case(o, [fl(rng, xs, ft) * 4], "Softmax")


@st.composite
def layer_norm_cases(draw: Any) -> Case:
    rank = draw(st.integers(1, 5))
    xs = tuple(draw(st.integers(1, 5)) for _ in range(rank))
    axis = draw(st.integers(0, rank - 1))
    ft = draw(st.sampled_from(sorted(FLOATS)))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    norm = xs[axis:]
    gamma = fl(rng, norm, ft)
    const = draw(st.booleans())
    g_op: Any = ("const", dense(gamma.astype(np.float32)), t(norm, ft)) if const else t(norm, ft)
    beta = fl(rng, norm, ft) if draw(st.booleans()) else None
    b_op: Any = None if beta is None else ("const", dense(beta.astype(np.float32)), t(norm, ft))
    stats = t(xs[:axis] + (1,) * len(norm), ft) if draw(st.booleans()) else "none"
    o = build(
        "tpu.LayerNorm",
        [t(xs, ft), g_op, b_op],
        [t(xs, ft), stats, stats],
        f"axis = {axis - rank if draw(st.booleans()) else axis} : i64, epsilon = 1.0e-3 : f64",
    )
    return Case(o, [fl(rng, xs, ft) * 3 + 1, gamma, beta], "LayerNorm")


@st.composite
def attention_cases(draw: Any) -> Case:
    b, h, m = (draw(st.integers(1, 3)) for _ in range(3))
    n, d, dv = (draw(st.integers(1, 5)) for _ in range(3))
    ft = draw(st.sampled_from(["f32", "bf16", "f16"]))
    mask = draw(st.sampled_from([None, (b, 1, 1, n), (n,), (b, h, m, n), (m, n)]))
    rng = np.random.default_rng(draw(st.integers(0, 2**31)))
    q_s, k_s, v_s, o_s = (b, h, m, d), (b, h, n, d), (b, h, n, dv), (b, h, m, dv)
    operands: list[Any] = [
        t(q_s, ft),
        t(k_s, ft),
        t(v_s, ft),
        t(mask, ft) if mask else None,
        None,
        None,
        None,
    ]
    ins: list[Any] = [fl(rng, s, ft) for s in (q_s, k_s, v_s)] + [
        fl(rng, mask, ft) if mask else None,
        None,
        None,
        None,
    ]
    attrs = "scale = 0.375 : f64" if draw(st.booleans()) else ""
    o = build("tpu.Attention", operands, [t(o_s, ft), "none", "none", "none"], attrs)
    return Case(o, ins, "Attention")


#: every command kind's strategy, by record class name
STRATEGIES = {
    "Conv": conv_cases(),
    "MatMul": matmul_cases(),
    "Eltwise": eltwise_cases(),
    "Requant": requant_cases(),
    "Cast": cast_cases(),
    "Lut": lut_cases(),
    "Lut16": lut16_cases(),
    "Active": active_cases(),
    "Pool": pool_cases(),
    "Permute": permute_cases(),
    "Reduce": reduce_cases(),
    "Softmax": softmax_cases(),
    "LayerNorm": layer_norm_cases(),
    "Attention": attention_cases(),
}


def cases() -> st.SearchStrategy[Case]:
    """One random op of any TIU command kind."""
    return st.one_of(*STRATEGIES.values())

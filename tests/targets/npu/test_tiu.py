"""The TIU commands against the ``tpu`` ops they implement: random operands and parameters, each
command bit for bit equal to the op's ``execute`` (INT8 and float modes alike: the float commands
round once, as the ops do); commands on slices (H/W windows with halos, channel ranges, batch and
row ranges) equal the same region of the whole op's result."""

from __future__ import annotations

import inspect
import itertools
import math
import os
import sys
from typing import Any

import numpy as np
import pytest
import tpu_cases as tc
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import lamina.api as api
import lamina.dialects.tpu  # noqa: F401  (registers the dialects)
from lamina.dialects.tpu.quantize import quantize_multiplier
from lamina.dialects.tpu.transforms import convert_top_to_tpu, import_calibration
from lamina.execution.kernels.geometry import pool_output_size
from lamina.ir.context import Context
from lamina.ir.core import Operation
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation
from lamina.support.errors import LaminaError
from lamina.targets.npu import tiu

# ---- building tpu ops (tpu_cases.py) ------------------------------------------------------------------

_op, _shape, _q8, _per_axis, _t, _arr = tc.op, tc.shape_text, tc.q8, tc.per_axis, tc.t, tc.arr
_storage, _mults, _bits, _fl, FLOATS = tc.storage, tc.mults, tc.bits, tc.fl, tc.FLOATS


def _check(op: Operation, inputs: list[Any], exact: bool = True) -> np.ndarray:
    """The TIU command equals the op bit for bit (dtype included) as the interpreter runs it
    (``executor``) and as ``execute`` states it; ``exact=False`` (float conv: the reference's
    ``execute`` sums in another order than its kernel) holds it to ``execute`` within cosine
    0.99999 instead."""
    got = tiu.execute_op(op, inputs)
    refs = [np.asarray(op.executor()(inputs)[0])]  # type: ignore[attr-defined]
    ref = np.asarray(op.execute(inputs)[0])  # type: ignore[attr-defined]
    if exact:
        refs.append(ref)
    else:
        a, b = got.astype(np.float64).ravel(), ref.astype(np.float64).ravel()
        den = np.linalg.norm(a) * np.linalg.norm(b)
        assert den == 0 or float(a @ b) / den >= 0.99999
    for r in refs:
        assert got.dtype == r.dtype and got.shape == r.shape, (got.dtype, r.dtype, got.shape, r.shape)
        np.testing.assert_array_equal(_bits(got), _bits(r))
    return got


# ---- conv -----------------------------------------------------------------------------------------


def _conv_case(draw: Any, depthwise: bool) -> dict[str, Any]:
    g = draw(st.integers(1, 3))
    cin = g if depthwise else g * draw(st.integers(1, 3))
    cout = g if depthwise else g * draw(st.integers(1, 3))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    s = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = [draw(st.integers(0, k[i % 2] - 1)) for i in range(4)]
    hw = (draw(st.integers(1, 8)), draw(st.integers(1, 8)))
    for i in range(2):
        assume(hw[i] + pads[i] + pads[i + 2] >= (k[i] - 1) * d[i] + 1)
    return {
        "n": draw(st.integers(1, 2)),
        "g": g,
        "cin": cin,
        "cout": cout,
        "k": k,
        "d": d,
        "s": s,
        "pads": pads,
        "hw": hw,
        "signed": draw(st.booleans()),
        "out_signed": draw(st.booleans()),
        "zp": draw(st.integers(-20, 20)),
        "bias": draw(st.sampled_from(["none", "small", "huge"])),
        "relu": draw(st.sampled_from(["none", "relu", "limit"])),
        "seed": draw(st.integers(0, 2**31)),
    }


def _conv_op(c: dict[str, Any]) -> tuple[Operation, list[Any]]:
    rng = np.random.default_rng(c["seed"])
    xs = (c["n"], c["cin"], *c["hw"])
    ws = (c["cout"], c["cin"] // c["g"], *c["k"])
    zp = c["zp"] if c["signed"] else 0
    x_t = _t(xs, _q8(c["signed"], 0.05, zp))
    w_t = _t(ws, _per_axis(list(rng.uniform(0.001, 0.05, c["cout"])), 0))
    out_signed = c["out_signed"] or c["relu"] == "none"
    o_zp = 3 if out_signed else 0
    attrs = [
        _arr("strides", c["s"]),
        _arr("dilations", c["d"]),
        _arr("pads", c["pads"]),
        f"group = {c['g']} : i64",
    ]
    m, r = _mults(rng, c["cout"])
    attrs += [_arr("multiplier", m), _arr("rshift", r)]
    if c["relu"] != "none":
        attrs.append("do_relu = true")
    if c["relu"] == "limit":
        attrs.append("relu_limit = 2.5")
    x = _storage(rng, xs, c["signed"])
    w = rng.integers(-127, 128, ws).astype(np.int8)
    bias: Any = None
    b_t: Any = None
    if c["bias"] != "none":
        lim = 2**31 - 1 if c["bias"] == "huge" else 5000
        bias = rng.integers(-lim, lim, (c["cout"],)).astype(np.int32)
        b_t = _t((c["cout"],), "i32")
    # the result shape: the op's own shape rule
    out_shape = [c["n"], c["cout"]] + [
        (c["hw"][i] + c["pads"][i] + c["pads"][i + 2] - (c["k"][i] - 1) * c["d"][i] - 1) // c["s"][i] + 1
        for i in range(2)
    ]
    out_t = _t(tuple(out_shape), _q8(out_signed, 0.02, o_zp))
    op = _op("tpu.Conv", [x_t, w_t, b_t], out_t, ", ".join(attrs))
    return op, [x, w, bias]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_conv_is_bit_exact(data: Any) -> None:
    c = _conv_case(data.draw, False)
    op, ins = _conv_op(c)
    name, _ = tiu.command_for(op)
    assert name == ("depthwise" if c["g"] == c["cin"] == c["cout"] else "conv")
    _check(op, ins)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_depthwise_is_bit_exact(data: Any) -> None:
    op, ins = _conv_op(_conv_case(data.draw, True))
    assert tiu.command_for(op)[0] == "depthwise"
    _check(op, ins)


def test_conv_accumulator_wraps_to_int32() -> None:
    """A bias near the int32 limit overflows the register: the command wraps as the op does."""
    op, (x, w, _) = _conv_op(
        {"n": 1, "g": 1, "cin": 2, "cout": 2, "k": (1, 1), "d": (1, 1), "s": (1, 1), "pads": [0] * 4,
         "hw": (2, 2), "signed": True, "out_signed": True, "zp": 0, "bias": "huge", "relu": "none", "seed": 1}
    )  # fmt: skip
    x = np.full_like(x, 127)
    w = np.full_like(w, 127)
    bias = np.array([2**31 - 1, -(2**31)], np.int32)
    _check(op, [x, w, bias])


# ---- matmul ----------------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 9),
    st.integers(1, 5),
    st.sampled_from(["weight", "act"]),
    st.booleans(),
    st.sampled_from(["none", "relu", "limit"]),
    st.integers(0, 2**31),
)
def test_matmul_is_bit_exact(m: int, k: int, n: int, kind: str, signed: bool, relu: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    attrs = []
    a_s: tuple[int, ...]
    b_s: tuple[int, ...]
    if kind == "weight":  # per-column weight scales and requant, bias
        a_s, b_s = (2, m, k), (k, n)
        b_t = _t(b_s, _per_axis(list(rng.uniform(0.001, 0.05, n)), 1))
        b = rng.integers(-127, 128, b_s).astype(np.int8)
        mu, r = _mults(rng, n)
        bias: Any = rng.integers(-3000, 3000, (n,)).astype(np.int32)
        bias_t: Any = _t((n,), "i32")
    else:  # activation x activation: batched, broadcast, one factor
        a_s, b_s = (2, 3, m, k), (3, k, n)
        b_t = _t(b_s, _q8(True, 0.03, 5))
        b = _storage(rng, b_s, True)
        mu, r = _mults(rng, 1)
        bias, bias_t = None, None
    attrs += [_arr("multiplier", mu), _arr("rshift", r)]
    if relu != "none":
        attrs.append("do_relu = true")
    if relu == "limit" and kind == "act":
        attrs.append("relu_limit = 1.5")
    zp = -7 if signed else 0
    a = _storage(rng, a_s, signed)
    out_s = (*np.broadcast_shapes(a_s[:-2], b_s[:-2]), m, n)
    out_signed = relu == "none"
    op = _op(
        "tpu.MatMul",
        [_t(a_s, _q8(signed, 0.04, zp)), b_t, bias_t],
        _t(out_s, _q8(out_signed, 0.1)),
        ", ".join(attrs),
    )
    assert tiu.command_for(op)[0] == "matmul"
    _check(op, [a, b, bias])


# ---- elementwise ---------------------------------------------------------------------------------


@settings(max_examples=50, deadline=None)
@given(st.sampled_from(["tpu.Add", "tpu.Sub"]), st.integers(2, 3), st.booleans(), st.integers(0, 2**31))
def test_add_sub_per_tensor_are_bit_exact(name: str, n_in: int, bcast: bool, seed: int) -> None:
    if name == "tpu.Sub":
        n_in = 2
    rng = np.random.default_rng(seed)
    out_s = (2, 3, 4, 5)
    shapes = [out_s] + [(1, 3, 1, 1) if bcast and i == 1 else out_s for i in range(1, n_in)]
    scales = list(rng.uniform(0.01, 0.2, n_in))
    zps = [int(v) for v in rng.integers(-10, 10, n_in)]
    s_out = float(rng.uniform(0.02, 0.3))
    ratios = [sc / s_out for sc in scales]
    _, rs = quantize_multiplier(max(ratios))
    ms = [round(r * 2.0 ** (31 + rs)) for r in ratios]
    types = [_t(s, _q8(True, sc, z)) for s, sc, z in zip(shapes, scales, zps)]
    op = _op(name, types, _t(out_s, _q8(True, s_out, 2)), f"{_arr('multiplier', ms)}, {_arr('rshift', [rs])}")
    _check(op, [_storage(rng, s, True) for s in shapes])


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**31))
def test_add_per_channel_is_bit_exact(c: int, seed: int) -> None:
    """A per-axis result (outlier channels along the last axis): one shift per channel and one
    multiplier per input and channel."""
    rng = np.random.default_rng(seed)
    out_s = (2, 4, c)
    s_out = rng.uniform(0.01, 0.5, c)
    s_a, s_b = rng.uniform(0.01, 0.5, c), float(rng.uniform(0.01, 0.3))
    r = np.stack([s_a / s_out, np.full(c, s_b) / s_out])
    rs = np.array([quantize_multiplier(float(v))[1] for v in r.max(axis=0)])
    ms = np.floor(r * np.exp2(31.0 + rs) + 0.5).astype(np.int64)
    a_t = _t(out_s, _per_axis(list(s_a), 2, weight=False))
    b_t = _t(out_s, _q8(True, s_b, 0))
    op = _op(
        "tpu.Add",
        [a_t, b_t],
        _t(out_s, _per_axis(list(s_out), 2, weight=False)),
        f"{_arr('multiplier', ms.reshape(-1))}, {_arr('rshift', rs)}",
    )
    name, params = tiu.command_for(op)
    assert name == "add" and params["channel_axis"] == (2 if c > 1 else -1)
    _check(op, [_storage(rng, out_s, True), _storage(rng, out_s, True)])


@settings(max_examples=40, deadline=None)
@given(st.booleans(), st.booleans(), st.integers(0, 2**31))
def test_mul_is_bit_exact(sa: bool, sb: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shp = (1, 3, 4, 4)
    mu, r = _mults(rng, 1, 1e-3, 0.9)
    op = _op(
        "tpu.Mul",
        [_t(shp, _q8(sa, 0.05, 4 if sa else 0)), _t((1, 3, 1, 1), _q8(sb, 0.1))],
        _t(shp, _q8(True, 0.07, -3)),
        f"{_arr('multiplier', mu)}, {_arr('rshift', r)}",
    )
    _check(op, [_storage(rng, shp, sa), _storage(rng, (1, 3, 1, 1), sb)])


@pytest.mark.parametrize("ft", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", ["tpu.Add", "tpu.Sub", "tpu.Mul"])
def test_float_elementwise_rounds_once(name: str, ft: str) -> None:
    rng = np.random.default_rng(4)
    shp = (2, 3, 4)
    op = _op(name, [_t(shp, ft), _t((1, 3, 1), ft)], _t(shp, ft))
    assert tiu.command_for(op)[0] == name.split(".")[1].lower() + "_f"
    _check(op, [_fl(rng, shp, ft), _fl(rng, (1, 3, 1), ft)])


# ---- pooling -------------------------------------------------------------------------------------


@st.composite
def _pool_geo(draw: Any, dilate: bool) -> dict[str, Any]:
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2))) if dilate else (1, 1)
    pads = [draw(st.integers(0, k[i % 2] - 1)) for i in range(4)]
    hw = (draw(st.integers(1, 9)), draw(st.integers(1, 9)))
    for i in range(2):
        assume(hw[i] + pads[i] + pads[i + 2] >= (k[i] - 1) * d[i] + 1)
    return {
        "k": k,
        "s": s,
        "d": d,
        "pads": pads,
        "hw": hw,
        "ceil": draw(st.booleans()),
        "seed": draw(st.integers(0, 2**31)),
    }


def _pool_out(g: dict[str, Any]) -> tuple[int, ...]:
    geo = (list(g["k"]), list(g["s"]), list(g["d"]), list(g["pads"]))
    out, _ = pool_output_size(list(g["hw"]), geo, g["ceil"])
    return tuple(out)


def _windows_touch_input(g: dict[str, Any]) -> bool:
    """Whether every pooling window holds an input element (one wholly in padding is -inf in the
    reference, which has no integer value)."""
    out = _pool_out(g)
    return all(
        any(0 <= o * g["s"][i] - g["pads"][i] + t * g["d"][i] < g["hw"][i] for t in range(g["k"][i]))
        for i in range(2)
        for o in range(out[i])
    )


def _pool_attrs(g: dict[str, Any]) -> str:
    a = [
        _arr("kernel_shape", g["k"]),
        _arr("strides", g["s"]),
        _arr("pads", g["pads"]),
        _arr("dilations", g["d"]),
    ]
    if g["ceil"]:
        a.append("ceil_mode = true")
    return ", ".join(a)


@settings(max_examples=60, deadline=None)
@given(_pool_geo(True), st.sampled_from(["i8", "u8", "f32", "f16", "bf16"]))
def test_max_pool_is_bit_exact(g: dict[str, Any], dt: str) -> None:
    assume(_windows_touch_input(g))
    rng = np.random.default_rng(g["seed"])
    xs = (2, 3, *g["hw"])
    elem = dt if dt in FLOATS else _q8(dt == "i8", 0.1)
    x = _fl(rng, xs, dt) if dt in FLOATS else _storage(rng, xs, dt == "i8")
    op = _op("tpu.MaxPool", [_t(xs, elem)], _t((2, 3, *_pool_out(g)), elem), _pool_attrs(g))
    op2 = _op_with_none_indices(op)
    _check(op2, [x])


def _op_with_none_indices(op: Operation) -> Operation:
    """MaxPool has a second (indices) result: rebuild it with a ``none`` one."""
    t_in, t_out = str(op.operands[0].type), str(op.results[0].type)
    attrs = print_operation(op).split("<{", 1)[1].split("}>", 1)[0]
    text = (
        f"func.func @main(%a: {t_in}) -> {t_out} {{\n"
        f'  %r, %i = "tpu.MaxPool"(%a) <{{{attrs}}}> : ({t_in}) -> ({t_out}, none)\n'
        f"  return %r : {t_out}\n}}\n"
    )
    m = parse_module(text, Context())
    assert m is not None
    return next(o for o in m.walk_ops() if o.name == "tpu.MaxPool")  # type: ignore[attr-defined]


@settings(max_examples=50, deadline=None)
@given(_pool_geo(False), st.booleans(), st.integers(-5, 5))
def test_avg_pool_int8_is_bit_exact(g: dict[str, Any], signed: bool, zp: int) -> None:
    g = {**g, "ceil": False}
    rng = np.random.default_rng(g["seed"])
    xs = (1, 4, *g["hw"])
    zp = zp if signed else 0
    mu, r = _mults(rng, 1, 0.01, 1.0)
    attrs = _pool_attrs(g) + f", count_include_pad = true, {_arr('multiplier', mu)}, {_arr('rshift', r)}"
    op = _op(
        "tpu.AvgPool", [_t(xs, _q8(signed, 0.1, zp))], _t((1, 4, *_pool_out(g)), _q8(True, 0.08, 1)), attrs
    )
    _check(op, [_storage(rng, xs, signed)])


@settings(max_examples=50, deadline=None)
@given(_pool_geo(False), st.booleans(), st.sampled_from(["f32", "f16", "bf16"]))
def test_avg_pool_float_is_bit_exact(g: dict[str, Any], include: bool, ft: str) -> None:
    rng = np.random.default_rng(g["seed"])
    xs = (1, 3, *g["hw"])
    attrs = _pool_attrs(g) + (", count_include_pad = true" if include else "")
    op = _op("tpu.AvgPool", [_t(xs, ft)], _t((1, 3, *_pool_out(g)), ft), attrs)
    assert tiu.command_for(op)[0] == "avg_pool_f"
    _check(op, [_fl(rng, xs, ft)])


# ---- LUT, requant, casts, permute, reduce ------------------------------------------------------------


@pytest.mark.parametrize("signed_in,signed_out", [(True, True), (True, False), (False, True), (False, False)])
def test_lut_is_bit_exact(signed_in: bool, signed_out: bool) -> None:
    rng = np.random.default_rng(5)
    table = _storage(rng, (256,), signed_out)
    tt = f"tensor<256x{'i8' if signed_out else 'ui8'}>"
    vals = ", ".join(str(int(v)) for v in table)
    op = _op(
        "tpu.Lut",
        [_t((2, 8, 16), _q8(signed_in, 0.1))],
        _t((2, 8, 16), _q8(signed_out, 0.05)),
        f"table = dense<[{vals}]> : {tt}",
    )
    _check(op, [_storage(rng, (2, 8, 16), signed_in)])


@settings(max_examples=40, deadline=None)
@given(st.booleans(), st.booleans(), st.booleans(), st.integers(0, 2**31))
def test_requant_is_bit_exact(per_channel: bool, si: bool, so: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    shp = (2, 5, 3)
    if per_channel:  # per-axis input (channel axis 1) to a per-tensor type
        in_t = _t(shp, _per_axis(list(rng.uniform(0.01, 0.5, 5)), 1, weight=False))
        mu, r = _mults(rng, 5, 0.05, 20.0)
        si = True
    else:
        in_t = _t(shp, _q8(si, 0.1, -4 if si else 0))
        mu, r = _mults(rng, 1, 0.05, 20.0)
        mu, r = mu[0], r[0]  # type: ignore[assignment]
    attrs = (
        f"{_arr('multiplier', mu)}, {_arr('rshift', r)}"
        if per_channel
        else f"multiplier = {mu} : i64, rshift = {r} : i64"
    )
    op = _op("tpu.Requant", [in_t], _t(shp, _q8(so, 0.07, 6 if so else 0)), attrs)
    _check(op, [_storage(rng, shp, si)])


@pytest.mark.parametrize("ft", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_casts_are_bit_exact(ft: str, per_axis: bool) -> None:
    rng = np.random.default_rng(6)
    shp = (2, 4, 3)
    q = _per_axis([0.01, 0.02, 0.05, 0.1], 1, weight=False) if per_axis else _q8(True, 0.013, 7)
    x = (rng.standard_normal(shp) * 2).astype(np.float32).astype(FLOATS[ft])
    x.reshape(-1)[:3] = np.array([np.nan, np.inf, -np.inf], np.float32).astype(FLOATS[ft])
    qz = _op("tpu.Cast", [_t(shp, ft)], _t(shp, q))
    assert tiu.command_for(qz)[0] == "cast_quantize"
    xq = _check(qz, [x])
    dq = _op("tpu.Cast", [_t(shp, q)], _t(shp, ft))
    assert tiu.command_for(dq)[0] == "cast_dequantize"
    _check(dq, [xq])
    if not per_axis:
        u = _op("tpu.Cast", [_t(shp, ft)], _t(shp, _q8(False, 0.02)))
        _check(u, [x])
    for other in FLOATS:
        if other != ft:
            ff = _op("tpu.Cast", [_t(shp, ft)], _t(shp, other))
            assert tiu.command_for(ff)[0] == "cast_float"
            _check(ff, [x])


@pytest.mark.parametrize("order", [[0, 2, 3, 1], [3, 2, 1, 0], None])
def test_permute_moves_storage(order: list[int] | None) -> None:
    rng = np.random.default_rng(7)
    xs = (2, 3, 4, 5)
    perm = order or [3, 2, 1, 0]
    out = tuple(xs[i] for i in perm)
    attrs = _arr("order", order) if order else ""
    op = _op("tpu.Permute", [_t(xs, _q8(True, 0.1))], _t(out, _q8(True, 0.1)), attrs)
    _check(op, [_storage(rng, xs, True)])
    opf = _op("tpu.Permute", [_t(xs, "bf16")], _t(out, "bf16"), attrs)
    _check(opf, [_fl(rng, xs, "bf16")])


@pytest.mark.parametrize("mode", ["ReduceMean", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("axes,keep", [([2, 3], True), ([1], False), ([-1], True)])
def test_reduce_int8_is_bit_exact(mode: str, axes: list[int], keep: bool) -> None:
    rng = np.random.default_rng(8)
    xs = (2, 3, 4, 5)
    norm = sorted(a % 4 for a in axes)
    out = (
        tuple(1 if i in norm else d for i, d in enumerate(xs))
        if keep
        else tuple(d for i, d in enumerate(xs) if i not in norm)
    )
    ax = ("const", f"dense<[{', '.join(map(str, axes))}]>", f"tensor<{len(axes)}xi64>")
    x_t = _q8(True, 0.1, -5)
    if mode == "ReduceMean":
        nel = math.prod(xs[a] for a in norm)
        mu, r = quantize_multiplier(0.1 / (0.05 * nel))
        out_e = _q8(True, 0.05, 2)
        attrs = f'mode = "{mode}", keepdims = {str(keep).lower()}, {_arr("multiplier", [mu])}, {_arr("rshift", [r])}'
    else:
        out_e = x_t
        attrs = f'mode = "{mode}", keepdims = {str(keep).lower()}'
    op = _op("tpu.Reduce", [_t(xs, x_t), ax], _t(out, out_e), attrs)
    _check(op, [_storage(rng, xs, True), np.array(axes, np.int64)])


@pytest.mark.parametrize("ft", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("mode", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
def test_reduce_float_is_bit_exact(mode: str, ft: str) -> None:
    rng = np.random.default_rng(9)
    xs = (2, 3, 4, 5)
    ax = ("const", "dense<[1, 3]>", "tensor<2xi64>")
    op = _op("tpu.Reduce", [_t(xs, ft), ax], _t((2, 1, 4, 1), ft), f'mode = "{mode}"')
    _check(op, [_fl(rng, xs, ft), np.array([1, 3], np.int64)])


# Random normal inputs leave the domain of sqrt/log/acos…: NaN there is the contract, not a problem.
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("ft", ["f32", "f16", "bf16"])
def test_float_activations_round_once(ft: str) -> None:
    """Every ``top`` unary op in a float mode (default properties) as an ``active_f`` command."""
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((2, 3, 7)) * 3).astype(np.float32).astype(FLOATS[ft])
    ran = []
    for short in tiu.ACTIVATIONS:
        try:
            op = _op("tpu." + short, [_t((2, 3, 7), ft)], _t((2, 3, 7), ft))
            op.executor()([x])  # type: ignore[attr-defined]
        except Exception:  # a required property, or no float semantics (Not): not this test's
            continue
        name, params = tiu.command_for(op)
        assert name == "active_f" and params["fn"] == short
        _check(op, [x])
        ran.append(short)
    assert {"Relu", "Sigmoid", "SiLU", "GELU", "Tanh", "Exp", "LeakyRelu", "HardSwish"} <= set(ran), ran
    lrelu = _op("tpu.LeakyRelu", [_t((2, 3, 7), ft)], _t((2, 3, 7), ft), "alpha = 0.25")
    assert tiu.command_for(lrelu)[1]["params"] == {"alpha": 0.25}
    _check(lrelu, [x])


# ---- float-only commands: max, min, div, softmax, layer norm, attention ---------------------------------


@pytest.mark.parametrize("ft", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("name", ["tpu.Max", "tpu.Min", "tpu.Div"])
def test_float_max_min_div_round_once(name: str, ft: str) -> None:
    rng = np.random.default_rng(12)
    shp = (2, 3, 4)
    op = _op(name, [_t(shp, ft), _t((1, 3, 1), ft)], _t(shp, ft))
    assert tiu.command_for(op)[0] == name.split(".")[1].lower() + "_f"
    b = _fl(rng, (1, 3, 1), ft)
    b.reshape(-1)[0] = 0  # x / 0
    _check(op, [_fl(rng, shp, ft), b])


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 5), min_size=1, max_size=4),
    st.integers(0, 7),
    st.booleans(),
    st.sampled_from(["f32", "f16", "bf16"]),
    st.integers(0, 2**31),
)
def test_softmax_rounds_once(shape: list[int], axis: int, log: bool, ft: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ax = axis % len(shape) - (len(shape) if axis % 2 else 0)  # negative axes too
    t = _t(tuple(shape), ft)
    op = _op("tpu.Softmax", [t], t, f"axis = {ax} : i64, log = {str(log).lower()}")
    name, p = tiu.command_for(op)
    assert name == "softmax_f" and p["axis"] == ax % len(shape)
    _check(op, [_fl(rng, tuple(shape), ft) * 4])


def _layer_norm_op(shape: tuple[int, ...], axis: int, ft: str, bias: bool, stats: bool) -> Operation:
    norm = shape[axis:]
    st_t = _t(shape[:axis] + (1,) * len(norm), ft) if stats else "none"
    x_t, w_t, y_t = _t(shape, ft), _t(norm, ft), _t(shape, ft)
    b_t = w_t if bias else "none"
    b_def = "" if bias else '  %nb = "top.None"() : () -> none\n'
    b_arg = "%b" if bias else "%nb"
    text = (
        f"func.func @main(%x: {x_t}, %w: {w_t}{', %b: ' + b_t if bias else ''}) -> {y_t} {{\n{b_def}"
        f'  %y:3 = "tpu.LayerNorm"(%x, %w, {b_arg}) <{{axis = {axis} : i64, epsilon = 1.0e-3 : f64}}> : '
        f"({x_t}, {w_t}, {b_t}) -> ({y_t}, {st_t}, {st_t})\n  return %y#0 : {y_t}\n}}\n"
    )
    m = parse_module(text, Context())
    assert m is not None
    return next(o for o in m.walk_ops() if o.name == "tpu.LayerNorm")  # type: ignore[attr-defined]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.integers(1, 6), min_size=1, max_size=4),
    st.integers(0, 3),
    st.booleans(),
    st.booleans(),
    st.sampled_from(["f32", "f16", "bf16"]),
    st.integers(0, 2**31),
)
def test_layer_norm_rounds_once(
    shape: list[int], axis: int, bias: bool, stats: bool, ft: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    shp = tuple(shape)
    ax = axis % len(shp)
    op = _layer_norm_op(shp, ax, ft, bias, stats)
    assert tiu.command_for(op) == ("layer_norm_f", {"axis": ax, "epsilon": 1e-3, "out_dtype": ft})
    ins = [_fl(rng, shp, ft) * 3 + 1, _fl(rng, shp[ax:], ft)] + ([_fl(rng, shp[ax:], ft)] if bias else [None])
    got = tiu.execute_op(op, ins)
    ref = np.asarray(op.execute(ins)[0])  # type: ignore[attr-defined]
    np.testing.assert_array_equal(_bits(got), _bits(ref))
    np.testing.assert_array_equal(_bits(got), _bits(np.asarray(op.executor()(ins)[0])))  # type: ignore[attr-defined]


def test_layer_norm_with_used_statistics_has_no_command() -> None:
    x_t, w_t, s_t = "tensor<2x3x4xf32>", "tensor<4xf32>", "tensor<2x3x1xf32>"
    text = (
        f"func.func @main(%x: {x_t}, %w: {w_t}) -> {s_t} {{\n"
        '  %nb = "top.None"() : () -> none\n'
        f'  %y:3 = "tpu.LayerNorm"(%x, %w, %nb) : ({x_t}, {w_t}, none) -> ({x_t}, {s_t}, {s_t})\n'
        f"  return %y#1 : {s_t}\n}}\n"
    )
    m = parse_module(text, Context())
    assert m is not None
    used = next(o for o in m.walk_ops() if o.name == "tpu.LayerNorm")  # type: ignore[attr-defined]
    with pytest.raises(LaminaError, match="mean or rstd result is used"):
        tiu.command_for(used)


def _attention_op(b: int, h: int, m: int, n: int, d: int, dv: int, ft: str, mask: tuple[int, ...] | None,
                  attrs: str = "scale = 0.3 : f64") -> Operation:  # fmt: skip
    q_t, k_t, v_t, o_t = (_t(s, ft) for s in ((b, h, m, d), (b, h, n, d), (b, h, n, dv), (b, h, m, dv)))
    m_t = _t(mask, ft) if mask else "none"
    text = (
        f"func.func @main(%q: {q_t}, %k: {k_t}, %v: {v_t}{', %m: ' + m_t if mask else ''}) -> {o_t} {{\n"
        + ('  %m = "top.None"() : () -> none\n' if not mask else "")
        + '  %n = "top.None"() : () -> none\n'
        f'  %y:4 = "tpu.Attention"(%q, %k, %v, %m, %n, %n, %n) <{{{attrs}}}> : '
        f"({q_t}, {k_t}, {v_t}, {m_t}, none, none, none) -> ({o_t}, none, none, none)\n"
        f"  return %y#0 : {o_t}\n}}\n"
    )
    mod = parse_module(text, Context())
    assert mod is not None
    return next(o for o in mod.walk_ops() if o.name == "tpu.Attention")  # type: ignore[attr-defined]


@settings(max_examples=25, deadline=None)
@given(
    st.integers(1, 2), st.integers(1, 3), st.integers(1, 5), st.integers(1, 6), st.integers(1, 4),
    st.integers(1, 4), st.sampled_from(["none", "keys", "full"]), st.sampled_from(["f32", "bf16"]),
    st.integers(0, 2**31),
)  # fmt: skip
def test_attention_rounds_once(
    b: int, h: int, m: int, n: int, d: int, dv: int, mask: str, ft: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    ms = {"none": None, "keys": (b, 1, 1, n), "full": (b, h, m, n)}[mask]
    op = _attention_op(b, h, m, n, d, dv, ft, ms)
    assert tiu.command_for(op) == ("attention_f", {"scale": 0.3, "out_dtype": ft})
    ins = [_fl(rng, s, ft) for s in ((b, h, m, d), (b, h, n, d), (b, h, n, dv))]
    ins += [_fl(rng, ms, ft) if ms else None, None, None, None]
    _check(op, ins)
    no_scale = _attention_op(1, 1, 2, 3, 4, 2, "f32", None, "is_causal = false")
    assert tiu.command_for(no_scale)[1]["scale"] == 0.5
    for attrs, why in (("is_causal = true", "causal"), ("softcap = 2.0 : f64", "softcap")):
        with pytest.raises(LaminaError, match=why):
            tiu.command_for(_attention_op(1, 1, 2, 3, 4, 2, "f32", None, attrs))


# ---- float conv and matmul ----------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(st.data(), st.sampled_from(["f32", "f16", "bf16"]))
def test_float_conv_rounds_once(data: Any, ft: str) -> None:
    c = _conv_case(data.draw, data.draw(st.booleans()))
    rng = np.random.default_rng(c["seed"])
    xs = (c["n"], c["cin"], *c["hw"])
    ws = (c["cout"], c["cin"] // c["g"], *c["k"])
    out_s = [c["n"], c["cout"]] + [
        (c["hw"][i] + c["pads"][i] + c["pads"][i + 2] - (c["k"][i] - 1) * c["d"][i] - 1) // c["s"][i] + 1
        for i in range(2)
    ]
    attrs = [
        _arr("strides", c["s"]),
        _arr("dilations", c["d"]),
        _arr("pads", c["pads"]),
        f"group = {c['g']} : i64",
    ]
    if c["relu"] != "none":
        attrs.append("do_relu = true")
    if c["relu"] == "limit":
        attrs.append("relu_limit = 0.5")
    has_b = c["bias"] != "none"
    op = _op(
        "tpu.Conv",
        [_t(xs, ft), _t(ws, ft), _t((c["cout"],), ft) if has_b else None],
        _t(tuple(out_s), ft),
        ", ".join(attrs),
    )
    assert tiu.command_for(op)[0] == "conv_f"
    _check(
        op, [_fl(rng, xs, ft), _fl(rng, ws, ft), _fl(rng, (c["cout"],), ft) if has_b else None], exact=False
    )


@pytest.mark.parametrize("ft", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("relu", ["", "do_relu = true", "do_relu = true, relu_limit = 0.75"])
def test_float_matmul_rounds_once(ft: str, relu: str) -> None:
    rng = np.random.default_rng(10)
    op = _op("tpu.MatMul", [_t((2, 5, 7), ft), _t((7, 3), ft), _t((3,), ft)], _t((2, 5, 3), ft), relu)
    _check(op, [_fl(rng, (2, 5, 7), ft), _fl(rng, (7, 3), ft), _fl(rng, (3,), ft)])


# ---- slices -----------------------------------------------------------------------------------------


def _sliced_conv(
    op: Operation, ins: list[Any], name: str, p: dict[str, Any], axis: int, lo: int, hi: int
) -> np.ndarray:
    """The conv command on output positions ``[lo, hi)`` of spatial ``axis`` (0: H, 1: W), from the
    input window :func:`tiu.window_slice` gives, with the slice's own pads."""
    x = ins[0]
    nd = 2
    k = ins[1].shape[2 + axis]
    a, b, pl, ph = tiu.window_slice(
        lo, hi, x.shape[2 + axis], k, p["stride"][axis], p["dilation"][axis], p["pad"][axis]
    )
    idx: list[Any] = [slice(None)] * 4
    idx[2 + axis] = slice(a, b)
    pad = list(p["pad"])
    pad[axis], pad[axis + nd] = pl, ph
    return tiu.FUNCTIONS[name](x[tuple(idx)], *ins[1:], **{**p, "pad": pad})


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_conv_on_spatial_slices_with_halos_equals_the_whole(data: Any) -> None:
    c = _conv_case(data.draw, data.draw(st.booleans()))
    op, ins = _conv_op(c)
    name, p = tiu.command_for(op)
    whole = tiu.FUNCTIONS[name](*ins, **p)
    axis = data.draw(st.integers(0, 1))
    size = whole.shape[2 + axis]
    cuts = sorted({0, size, *data.draw(st.lists(st.integers(1, max(size - 1, 1)), max_size=3))})
    parts = [_sliced_conv(op, ins, name, p, axis, lo, hi) for lo, hi in itertools.pairwise(cuts) if lo < hi]
    np.testing.assert_array_equal(np.concatenate(parts, axis=2 + axis), whole)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_conv_on_channel_and_batch_slices_equals_the_whole(data: Any) -> None:
    c = _conv_case(data.draw, data.draw(st.booleans()))
    op, (x, w, b) = _conv_op(c)
    name, p = tiu.command_for(op)
    whole = tiu.FUNCTIONS[name](x, w, b, **p)
    g = p.get("group", x.shape[1])
    mg, cg = w.shape[0] // g, x.shape[1] // g
    # output channels by whole groups: the group's input channels, filters and per-channel params
    parts = []
    for i in range(g):
        q = {
            **p,
            "multiplier": p["multiplier"][i * mg : (i + 1) * mg],
            "rshift": p["rshift"][i * mg : (i + 1) * mg],
        }
        if "group" in q:
            q["group"] = 1
        bb = None if b is None else b[i * mg : (i + 1) * mg]
        parts.append(tiu.FUNCTIONS[name](x[:, i * cg : (i + 1) * cg], w[i * mg : (i + 1) * mg], bb, **q))
    np.testing.assert_array_equal(np.concatenate(parts, axis=1), whole)
    # within a group of a plain conv: any range of output channels
    if name == "conv" and g == 1 and w.shape[0] > 1:
        cut = data.draw(st.integers(1, w.shape[0] - 1))
        q = {**p, "multiplier": p["multiplier"][cut:], "rshift": p["rshift"][cut:]}
        part = tiu.conv(x, w[cut:], None if b is None else b[cut:], **q)
        np.testing.assert_array_equal(part, whole[:, cut:])
    for n in range(x.shape[0]):
        np.testing.assert_array_equal(tiu.FUNCTIONS[name](x[n : n + 1], w, b, **p), whole[n : n + 1])


@settings(max_examples=40, deadline=None)
@given(_pool_geo(True), st.data())
def test_pools_on_spatial_slices_equal_the_whole(g: dict[str, Any], data: Any) -> None:
    assume(_windows_touch_input(g))
    rng = np.random.default_rng(g["seed"])
    xs = (1, 2, *g["hw"])
    x = _storage(rng, xs, True)
    op = _op_with_none_indices(
        _op(
            "tpu.MaxPool", [_t(xs, _q8(True, 0.1))], _t((1, 2, *_pool_out(g)), _q8(True, 0.1)), _pool_attrs(g)
        )
    )
    _, p = tiu.command_for(op)
    whole = tiu.max_pool(x, **p)
    axis = data.draw(st.integers(0, 1))
    size = whole.shape[2 + axis]
    cut = data.draw(st.integers(0, size))
    parts = []
    for lo, hi in ((0, cut), (cut, size)):
        if lo == hi:
            continue
        a, b, pl, ph = tiu.window_slice(
            lo, hi, xs[2 + axis], p["kernel"][axis], p["stride"][axis], p["dilation"][axis], p["pad"][axis]
        )
        idx: list[Any] = [slice(None)] * 4
        idx[2 + axis] = slice(a, b)
        pad = list(p["pad"])
        pad[axis], pad[axis + 2] = pl, ph
        parts.append(tiu.max_pool(x[tuple(idx)], **{**p, "pad": pad}))
    np.testing.assert_array_equal(np.concatenate(parts, axis=2 + axis), whole)
    # avg pool: the explicit pads of a slice count as the whole op's do (count_include_pad)
    if all(v == 1 for v in g["d"]) and not g["ceil"]:
        mu, r = _mults(rng, 1, 0.01, 1.0)
        q = {"x_zp": 3, "kernel": g["k"], "stride": g["s"], "pad": g["pads"], "multiplier": mu[0], "rshift": r[0],
             "out_zp": 0, "out_min": -128, "out_max": 127, "out_dtype": "i8"}  # fmt: skip
        whole = tiu.avg_pool(x, **q)
        a, b, pl, ph = tiu.window_slice(0, 1, xs[2], g["k"][0], g["s"][0], 1, g["pads"][0])
        pad = [pl, g["pads"][1], ph, g["pads"][3]]
        np.testing.assert_array_equal(tiu.avg_pool(x[:, :, a:b], **{**q, "pad": pad}), whole[:, :, :1])


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 9), st.data())
def test_matmul_on_row_slices_equals_the_whole(m: int, data: Any) -> None:
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    a = _storage(rng, (m, 6), True)
    b = rng.integers(-127, 128, (6, 4)).astype(np.int8)
    bias = rng.integers(-500, 500, (4,)).astype(np.int32)
    mu, r = _mults(rng, 4)
    p: dict[str, Any] = {
        "a_zp": 2,
        "b_zp": 0,
        "multiplier": mu,
        "rshift": r,
        "out_zp": 0,
        "out_min": -128,
        "out_max": 127,
        "out_dtype": "i8",
    }
    whole = tiu.matmul(a, b, bias, **p)
    cut = data.draw(st.integers(1, m - 1))
    np.testing.assert_array_equal(
        np.concatenate([tiu.matmul(a[:cut], b, bias, **p), tiu.matmul(a[cut:], b, bias, **p)]), whole
    )
    # and column slices: the per-column parameters with them
    q = {**p, "multiplier": mu[1:3], "rshift": r[1:3]}
    np.testing.assert_array_equal(tiu.matmul(a, b[:, 1:3], bias[1:3], **q), whole[:, 1:3])


# ---- the command table, work counts, ops without a command ---------------------------------------------


def test_the_command_table_is_the_functions_keywords() -> None:
    assert set(tiu.COMMANDS) == set(tiu.FUNCTIONS) == set(tiu.WORK_UNIT)
    for name, fn in tiu.FUNCTIONS.items():
        kw = [p.name for p in inspect.signature(fn).parameters.values() if p.kind is p.KEYWORD_ONLY]
        assert kw == [f.name for f in tiu.COMMANDS[name]], name
    # every command_for result names the fields exactly
    c = {"n": 1, "g": 1, "cin": 2, "cout": 3, "k": (3, 3), "d": (1, 1), "s": (1, 1), "pads": [1] * 4,
         "hw": (4, 4), "signed": True, "out_signed": True, "zp": 0, "bias": "small", "relu": "none", "seed": 0}  # fmt: skip
    op, _ = _conv_op(c)
    name, params = tiu.command_for(op)
    assert list(params) == [f.name for f in tiu.COMMANDS[name]]


def test_work_counts() -> None:
    c = {"n": 2, "g": 1, "cin": 4, "cout": 6, "k": (3, 3), "d": (1, 1), "s": (1, 1), "pads": [1] * 4,
         "hw": (5, 5), "signed": True, "out_signed": True, "zp": 0, "bias": "small", "relu": "none", "seed": 0}  # fmt: skip
    op, ins = _conv_op(c)
    out = tiu.execute_op(op, ins)
    macs = tiu.work("conv", [x.shape for x in ins if x is not None], out.shape, {})
    assert macs * 2 == op.flops() == 2 * 6 * 5 * 5 * 2 * 4 * 9  # type: ignore[attr-defined]
    assert tiu.WORK_UNIT["conv"] == "mac" and tiu.WORK_UNIT["add"] == "elem"
    assert tiu.work("matmul", [(8, 16), (16, 4)], (8, 4), {}) == 8 * 4 * 16
    assert tiu.work("max_pool", [(1, 2, 8, 8)], (1, 2, 4, 4), {"kernel": [2, 2]}) == 32 * 4
    assert tiu.work("add", [(4,), (4,), (4,)], (4,), {}) == 8
    assert tiu.work("reduce_mean", [(2, 3, 4)], (2, 1, 1), {}) == 24
    assert tiu.work("lut", [(2, 3)], (2, 3), {}) == 6
    assert tiu.work("softmax_f", [(2, 3)], (2, 3), {}) == 6 * tiu.SOFTMAX_PASSES == 30
    assert tiu.work("layer_norm_f", [(2, 3), (3,), (3,)], (2, 3), {}) == 6 * 7
    assert tiu.work("layer_norm_f", [(2, 3)], (2, 3), {}) == 6 * 5
    assert tiu.work(
        "attention_f", [(2, 4, 5, 8), (2, 4, 7, 8), (2, 4, 7, 3)], (2, 4, 5, 3), {}
    ) == 2 * 4 * 5 * 7 * (8 + 3)
    assert tiu.WORK_UNIT["attention_f"] == "mac" and tiu.WORK_UNIT["div_f"] == "elem"
    with pytest.raises(ValueError, match="unknown TIU command"):
        tiu.work("nope", [], (1,), {})


def test_window_slice() -> None:
    # 3x3, stride 1, pad 1 on 8 rows: output rows 2..5 need input rows 1..6, no pads
    assert tiu.window_slice(2, 5, 8, 3, 1, 1, 1) == (1, 6, 0, 0)
    assert tiu.window_slice(0, 2, 8, 3, 1, 1, 1) == (0, 3, 1, 0)
    assert tiu.window_slice(6, 8, 8, 3, 1, 1, 1) == (5, 8, 0, 1)
    # stride 2, dilation 2: output 1..3 reads rows 2-4+... (kernel extent 5)
    assert tiu.window_slice(1, 3, 9, 3, 2, 2, 0) == (2, 9, 0, 0)


def test_ops_without_a_command_are_named() -> None:
    op = _op("tpu.Hardmax", [_t((2, 3), "f32")], _t((2, 3), "f32"), "axis = 1 : i64")
    with pytest.raises(LaminaError, match=r"tpu\.Hardmax.*no TIU command"):
        tiu.command_for(op)
    with pytest.raises(ValueError, match="unknown TIU dtype"):
        tiu.cast_float(np.zeros(2, np.float32), out_dtype="f64")
    with pytest.raises(ValueError, match="depthwise filter"):
        tiu.depthwise(np.zeros((1, 2, 3, 3), np.int8), np.zeros((3, 1, 1, 1), np.int8), None, x_zp=0, w_zp=0,
                      stride=[1, 1], dilation=[1, 1], pad=[0] * 4, multiplier=[1 << 30] * 3, rshift=[0] * 3,
                      out_zp=0, out_min=-128, out_max=127, out_dtype="i8")  # fmt: skip


# ---- lowered models: every op with a command, on the values the interpreter computes ---------------


def _lowered(name: str, mode: str) -> tuple[Any, list[np.ndarray]]:
    """Zoo model ``name`` (small) through model_transform, run_calibration (max) and
    convert-top-to-tpu for the ``lnpu`` chip's capabilities (what ``model_deploy --processor lnpu``
    lowers)."""
    from lamina.targets.npu.arch import load_chip
    from lamina.targets.npu.processor import capabilities_of

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "models"))
    import zoo

    path = zoo.export(name, "small")
    samples = zoo.inputs(name, "small")
    model = api.transform(path, model_name=name)
    m = model.module
    if mode == "INT8":
        table = api.calibrate(model.mlir, samples=samples, calibration_method="max", tune_num=0)
        assert import_calibration(m, table) > 5
    ok, _ = convert_top_to_tpu(m, mode, capabilities=capabilities_of(load_chip("lnpu")))
    assert ok
    return m, samples[0]


#: what stays on the host CPU in each lowered zoo model: pure reshapes (no data moves in row-major
#: order: aliases, not commands), Split / Concat / Slice / nearest Interp (data movement: GDMA's),
#: the embedding Gather and the attention mask's Compare / Where (int64 and bool values), YOLO's
#: float64 output and the Div by its float64 constant
HOST_OPS = {
    ("resnet18", "INT8"): {"tpu.Flatten"},
    ("resnet18", "BF16"): {"tpu.Flatten"},
    ("mobilenetv2", "INT8"): set(),
    ("mobilenetv2", "BF16"): set(),
    ("yolo", "INT8"): {
        "tpu.Split",
        "tpu.Concat",
        "tpu.Interp",
        "tpu.Reshape",
        "tpu.Slice",
        "tpu.Div",
        "tpu.Cast",
    },
    ("yolo", "BF16"): {"tpu.Split", "tpu.Concat", "tpu.Interp", "tpu.Reshape", "tpu.Slice", "tpu.Cast"},
    ("bert", "INT8"): {"tpu.Gather", "tpu.Compare", "tpu.Reshape", "tpu.Where"},
    ("bert", "BF16"): {"tpu.Gather", "tpu.Compare", "tpu.Reshape", "tpu.Where"},
}


@pytest.mark.parametrize("name", ["resnet18", "mobilenetv2", "yolo", "bert"])
@pytest.mark.parametrize("mode", ["INT8", "BF16"])
def test_lowered_models_run_bit_exact_through_tiu_commands(
    name: str, mode: str, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each tpu op of a lowered zoo model that has a TIU command gives, on the operand values the
    interpreter computed, exactly the interpreter's result — as the N-d TIU function
    (``tiu.execute_op``) and as its ISA record run by the simulator (``records.lower_op``, placed
    in LMEM, loaded and stored through DDR, encoded and decoded); the ops without one are exactly
    :data:`HOST_OPS`."""
    from lamina.targets.npu import oprun, records
    from lamina.targets.npu.arch import load_chip

    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    chip = load_chip("lnpu")
    m, sample = _lowered(name, mode)
    fn = next(o for o in m.walk_ops() if o.name == "func.func")
    vals: dict[Any, Any] = dict(zip(fn.regions[0].blocks[0].args, sample))
    done: dict[str, int] = {}
    without: set[str] = set()
    for op in fn.regions[0].blocks[0]:
        if op.name == "func.return":
            break
        ins = [vals.get(v) for v in op.operands]
        outs = op.executor()(ins)
        vals.update(zip(op.results, outs))
        if op.dialect_name != "tpu" or op.name == "tpu.Weight":
            continue
        try:
            cmd, _ = tiu.command_for(op)
        except LaminaError:
            without.add(op.name)
            with pytest.raises(LaminaError, match="host CPU"):
                records.lower_op(op)
            continue
        want = _bits(np.asarray(outs[0]))
        got = tiu.execute_op(op, ins)
        np.testing.assert_array_equal(_bits(got), want, err_msg=f"{op.name} {op.location}")
        run = oprun.run_op(op, ins, chip, through_ddr=len(done) % 2 == 0)
        assert run.output.dtype == np.asarray(outs[0]).dtype, op.name
        np.testing.assert_array_equal(_bits(run.output), want, err_msg=f"{op.name} {op.location} (record)")
        done[cmd] = done.get(cmd, 0) + 1
    assert done, without
    assert without == HOST_OPS[name, mode], without


def test_ops_outside_the_commands_forms_are_named() -> None:
    """Forms the TIU lacks give one LaminaError naming the op (the op then runs on the host)."""
    x8 = _t((1, 2, 6, 6), _q8(True, 0.1))
    with_idx = _op("tpu.MaxPool", [x8], _t((1, 2, 3, 3), _q8(True, 0.1)), _pool_attrs(
        {"k": (2, 2), "s": (2, 2), "d": (1, 1), "pads": [0] * 4, "ceil": False}))  # fmt: skip
    assert tiu.command_for(_op_with_none_indices(with_idx))[0] == "max_pool"
    dil = _op("tpu.AvgPool", [_t((1, 2, 6, 6), "f32")], _t((1, 2, 4, 4), "f32"),
              "kernel_shape = array<i64: 2, 2>, dilations = array<i64: 2, 2>")  # fmt: skip
    with pytest.raises(LaminaError, match=r"tpu\.AvgPool.*dilations.*host CPU"):
        tiu.command_for(dil)
    ax = ("const", "dense<[1]>", "tensor<1xi64>")
    prod = _op("tpu.Reduce", [_t((2, 3), "f32"), ax], _t((2, 1), "f32"), 'mode = "ReduceProd"')
    with pytest.raises(LaminaError, match="ReduceProd in a float mode"):
        tiu.command_for(prod)
    f64 = _op("tpu.Add", [_t((2, 3), "f64"), _t((2, 3), "f64")], _t((2, 3), "f64"))
    with pytest.raises(LaminaError, match="f64 is not a TIU dtype"):
        tiu.command_for(f64)
    with pytest.raises(ValueError, match="unknown activation"):
        tiu.active_f(np.zeros(2, np.float32), fn="Nope", params={}, out_dtype="f32")


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 8), st.data())
def test_per_channel_commands_on_channel_slices_equal_the_whole(c: int, data: Any) -> None:
    """Requant and per-channel add on a channel range, with that range of their parameters."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x, y = _storage(rng, (2, c, 3), True), _storage(rng, (2, c, 3), True)
    mu, r = _mults(rng, c, 0.05, 4.0)
    q: dict[str, Any] = {"x_zp": 0, "multiplier": mu, "rshift": r, "channel_axis": 1, "out_zp": 1, "out_min": -128,
         "out_max": 127, "out_dtype": "i8"}  # fmt: skip
    whole = tiu.requant(x, **q)
    cut = data.draw(st.integers(1, c - 1))
    part = tiu.requant(x[:, cut:], **{**q, "multiplier": mu[cut:], "rshift": r[cut:]})
    np.testing.assert_array_equal(part, whole[:, cut:])
    ms = np.array([mu, mu[::-1]])
    a: dict[str, Any] = {"x_zps": [0, 0], "multipliers": ms, "rshift": r, "channel_axis": 1, "out_zp": 0, "out_min": -128,
         "out_max": 127, "out_dtype": "i8"}  # fmt: skip
    whole = tiu.add([x, y], **a)
    part = tiu.add([x[:, :cut], y[:, :cut]], **{**a, "multipliers": ms[:, :cut], "rshift": r[:cut]})
    np.testing.assert_array_equal(part, whole[:, :cut])

"""What each TIU record computes: a command and its input operands as 4-d ``(n, c, h, w)`` arrays
(by field name, as the simulator reads them from LMEM) → its 4-d output, and the command's work
count for the cycle model.

Every kernel unpacks its record — the weight ``(1, Cout, Cin/g, kh*kw)`` back to a filter,
per-channel ``quant`` tensors to multiplier / shift / zero-point arrays, pads and strides to lists
— and calls the :mod:`~lamina.targets.npu.tiu` function of the command: the arithmetic is never
restated here (``tiu.py`` and :mod:`lamina.dialects.tpu.quantize` are the one source of the integer
semantics; float commands run the ``top`` references). :data:`KERNELS` maps every TIU command
class to ``(execute, work)``; ``simulator.py`` registers them in its default table on import.

A record that does not make sense (shapes that do not fit together, a float command asked for an
integer-only mode, a quant tensor of the wrong size) is one :class:`LaminaError` naming the
command, never a numpy exception.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from lamina.support.errors import LaminaError

from . import isa, tiu
from .arch import DTYPES

__all__ = ["KERNELS", "WORK_RULES", "execute", "work"]

Inputs = Mapping[str, np.ndarray]
Execute = Callable[[Any, Inputs], np.ndarray]
Work = Callable[[Any], int]

#: ISA dtype names → the tiu functions' dtype names
_TIU_DTYPE = {
    "int8": "i8",
    "uint8": "u8",
    "int16": "i16",
    "int32": "i32",
    "f16": "f16",
    "bf16": "bf16",
    "f32": "f32",
}


def _bad(cmd: isa.TiuCommand, why: str) -> LaminaError:
    return LaminaError(f"TIU {type(cmd).__name__}: {why}")


def _out_dtype(cmd: isa.TiuCommand) -> str:
    name = _TIU_DTYPE.get(cmd.output.dtype)
    if name is None:
        raise _bad(cmd, f"no kernel writes {cmd.output.dtype} results")
    return name


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or a.dtype.name == "bfloat16"


def _col(q: np.ndarray, i: int) -> np.ndarray:
    """Column ``i`` of a ``(1, C, 1, k)`` per-channel quant tensor, as int64 (C,)."""
    return np.asarray(q[0, :, 0, i], np.int64)


def _quant(cmd: isa.TiuCommand, ins: Inputs, width: int, channels: int) -> np.ndarray | None:
    q = ins.get("quant")
    if q is None:
        return None
    if q.shape != (1, channels, 1, width) or q.dtype != np.int32:
        raise _bad(cmd, f"quant tensor {q.shape} {q.dtype}, expected (1, {channels}, 1, {width}) int32")
    return q


def _axis(cmd: Any, shape: tuple[int, ...]) -> int:
    ax = int(cmd.quant_axis)
    if not 0 <= ax < 4:
        raise _bad(cmd, f"quant_axis {ax} is not a dim of (n, c, h, w)")
    return ax


def _no_float_relu(cmd: Any) -> None:
    if cmd.do_relu:
        raise _bad(cmd, "do_relu on a float command of this kind has no kernel")


def _checked(fn: Execute) -> Execute:
    """Numpy's complaints about an inconsistent record (shapes that do not broadcast or reshape)
    as one LaminaError naming the command."""

    @functools.wraps(fn)
    def run(cmd: Any, ins: Inputs) -> np.ndarray:
        try:
            return fn(cmd, ins)
        except (ValueError, IndexError, TypeError, KeyError, ZeroDivisionError, OverflowError) as e:
            raise _bad(
                cmd, f"inconsistent operands ({', '.join(f'{k} {v.shape}' for k, v in ins.items())}): {e}"
            ) from None

    return run


# ---- conv, depthwise, matmul ----------------------------------------------------------------------


def _window(cmd: Any) -> dict[str, Any]:
    """A conv / pool record's stride, dilation and pads, the window checked against the operands:
    sizes and steps at least 1, and the output's ``h, w`` those the window gives."""
    for name in ("kh", "kw", "stride_h", "stride_w", "dilation_h", "dilation_w"):
        if getattr(cmd, name) < 1:
            raise _bad(cmd, f"{name} is {getattr(cmd, name)}; window sizes and steps are at least 1")
    extra = (getattr(cmd, "ceil_extra_h", 0), getattr(cmd, "ceil_extra_w", 0))
    for i, (k, s, d, lo, hi, e) in enumerate(
        (
            (cmd.kh, cmd.stride_h, cmd.dilation_h, cmd.pad_top, cmd.pad_bottom, extra[0]),
            (cmd.kw, cmd.stride_w, cmd.dilation_w, cmd.pad_left, cmd.pad_right, extra[1]),
        )
    ):
        span = cmd.input.shape[2 + i] + lo + hi + e - ((k - 1) * d + 1)
        want = span // s + 1 if span >= 0 else 0
        if cmd.output.shape[2 + i] != want:
            raise _bad(
                cmd,
                f"an input {'hw'[i]} of {cmd.input.shape[2 + i]} with this window gives {want} outputs, "
                f"the output has {cmd.output.shape[2 + i]}",
            )
    return {
        "stride": [int(cmd.stride_h), int(cmd.stride_w)],
        "dilation": [int(cmd.dilation_h), int(cmd.dilation_w)],
        "pad": [int(cmd.pad_top), int(cmd.pad_left), int(cmd.pad_bottom), int(cmd.pad_right)],
    }


def _requant_fields(cmd: Any, q: np.ndarray | None) -> dict[str, Any]:
    mult: Any
    shift: Any
    if q is not None:
        mult, shift = _col(q, 0), _col(q, 1)
    else:
        mult, shift = [int(cmd.multiplier)], [int(cmd.rshift)]
    return {
        "multiplier": mult,
        "rshift": shift,
        "out_zp": int(cmd.output_zp),
        "out_min": int(cmd.out_min),
        "out_max": int(cmd.out_max),
        "out_dtype": _out_dtype(cmd),
    }


@_checked
def _conv(cmd: isa.Conv, ins: Inputs) -> np.ndarray:
    x, w4 = ins["input"], ins["weight"]
    _, cout, cin_g, taps = w4.shape
    if w4.shape[0] != 1 or taps != cmd.kh * cmd.kw:
        raise _bad(
            cmd, f"weight {w4.shape} is not (1, Cout, Cin/groups, kh*kw) for a {cmd.kh}x{cmd.kw} kernel"
        )
    groups = int(cmd.groups)
    if groups < 1 or x.shape[1] != cin_g * groups or cout % groups:
        raise _bad(cmd, f"input {x.shape} and weight {w4.shape} do not fit {groups} groups")
    w = w4.reshape(cout, cin_g, cmd.kh, cmd.kw)
    b = ins.get("bias")
    if b is not None:
        if b.shape != (1, cout, 1, 1):
            raise _bad(cmd, f"bias {b.shape}, expected (1, {cout}, 1, 1)")
        b = b.reshape(cout)
    geo = _window(cmd)
    if _is_float(x):
        return tiu.conv_f(
            x,
            w,
            b,
            **geo,
            group=groups,
            relu=bool(cmd.do_relu),
            relu_limit=float(cmd.relu_limit) if cmd.do_relu else -1.0,
            out_dtype=_out_dtype(cmd),
        )
    q = _quant(cmd, ins, 2, cout)
    zps: dict[str, Any] = {"x_zp": int(cmd.input_zp), "w_zp": int(cmd.weight_zp)}
    if isinstance(cmd, isa.Depthwise):
        if not (groups == x.shape[1] == cout and cin_g == 1):
            raise _bad(
                cmd,
                f"a depthwise filter is (1, C, 1, kh*kw) with groups = C, got {w4.shape}, groups {groups}",
            )
        return tiu.depthwise(x, w, b, **zps, **geo, **_requant_fields(cmd, q))
    return tiu.conv(x, w, b, **zps, **geo, group=groups, **_requant_fields(cmd, q))


def _conv_work(cmd: isa.Conv) -> int:
    _, _, cin_g, taps = cmd.weight.shape
    return cmd.output.elements * cin_g * taps


@_checked
def _matmul(cmd: isa.MatMul, ins: Inputs) -> np.ndarray:
    left, right = ins["left"], ins["right"]
    if left.shape[2] != 1 or right.shape[2] != 1:
        raise _bad(cmd, f"left {left.shape} and right {right.shape} are (B, M, 1, K) and (B or 1, K, 1, N)")
    a = left[:, :, 0, :]
    b = right[:, :, 0, :]
    if cmd.right_transpose:
        b = np.swapaxes(b, 1, 2)
    bb, k, n = b.shape
    if k != a.shape[2] or bb not in (1, a.shape[0]):
        raise _bad(cmd, f"left {left.shape} and right {right.shape} do not multiply")
    if bb == 1:
        b = b[0]
    bias = ins.get("bias")
    if bias is not None:
        if bias.shape != (1, n, 1, 1):
            raise _bad(cmd, f"bias {bias.shape}, expected (1, {n}, 1, 1)")
        bias = bias.reshape(n)
    if _is_float(a):
        y = tiu.matmul_f(
            a,
            b,
            bias,
            relu=bool(cmd.do_relu),
            relu_limit=float(cmd.relu_limit) if cmd.do_relu else -1.0,
            out_dtype=_out_dtype(cmd),
        )
    else:
        q = _quant(cmd, ins, 3, n)
        b_zp: Any = _col(q, 2) if q is not None else int(cmd.right_zp)
        y = tiu.matmul(a, b, bias, a_zp=int(cmd.left_zp), b_zp=b_zp, **_requant_fields(cmd, q))
    return y.reshape(y.shape[0], y.shape[1], 1, y.shape[2])


def _matmul_work(cmd: isa.MatMul) -> int:
    return cmd.output.elements * cmd.left.shape[3]


# ---- element-wise ------------------------------------------------------------------------------------

_FLOAT_ELTWISE: dict[isa.EltwiseOp, Callable[[np.ndarray, np.ndarray, str], np.ndarray]] = {
    isa.EltwiseOp.ADD: lambda a, b, dt: tiu.add_f([a, b], out_dtype=dt),
    isa.EltwiseOp.SUB: lambda a, b, dt: tiu.sub_f(a, b, out_dtype=dt),
    isa.EltwiseOp.MUL: lambda a, b, dt: tiu.mul_f([a, b], out_dtype=dt),
    isa.EltwiseOp.MAX: lambda a, b, dt: tiu.max_f([a, b], out_dtype=dt),
    isa.EltwiseOp.MIN: lambda a, b, dt: tiu.min_f([a, b], out_dtype=dt),
    isa.EltwiseOp.DIV: lambda a, b, dt: tiu.div_f(a, b, out_dtype=dt),
}


@_checked
def _eltwise(cmd: isa.Eltwise, ins: Inputs) -> np.ndarray:
    a, b = ins["a"], ins["b"]
    out = cmd.output.shape
    if np.broadcast_shapes(a.shape, b.shape, out) != out:
        raise _bad(cmd, f"a {a.shape} and b {b.shape} do not broadcast to the output {out}")
    if _is_float(a):
        _no_float_relu(cmd)
        y = _FLOAT_ELTWISE[cmd.op](a, b, _out_dtype(cmd))
    elif cmd.op == isa.EltwiseOp.MUL:
        ax = _axis(cmd, out)
        q = _quant(cmd, ins, 3, out[ax])
        y = tiu.mul(
            a,
            b,
            a_zp=int(cmd.a_zp),
            b_zp=int(cmd.b_zp),
            multiplier=_col(q, 0) if q is not None else [int(cmd.a_multiplier)],
            rshift=_col(q, 2) if q is not None else [int(cmd.rshift)],
            channel_axis=ax if q is not None else -1,
            out_zp=int(cmd.output_zp),
            out_min=int(cmd.out_min),
            out_max=int(cmd.out_max),
            out_dtype=_out_dtype(cmd),
        )
    elif cmd.op in (isa.EltwiseOp.ADD, isa.EltwiseOp.SUB):
        ax = _axis(cmd, out)
        q = _quant(cmd, ins, 3, out[ax])
        if q is not None:
            ms: Any = np.stack([_col(q, 0), _col(q, 1)])
            shift: Any = _col(q, 2)
        else:
            ms, shift = [[int(cmd.a_multiplier)], [int(cmd.b_multiplier)]], [int(cmd.rshift)]
        p = {
            "x_zps": [int(cmd.a_zp), int(cmd.b_zp)],
            "multipliers": ms,
            "rshift": shift,
            "channel_axis": ax if q is not None else -1,
            "out_zp": int(cmd.output_zp),
            "out_min": int(cmd.out_min),
            "out_max": int(cmd.out_max),
            "out_dtype": _out_dtype(cmd),
        }
        y = tiu.add([a, b], **p) if cmd.op == isa.EltwiseOp.ADD else tiu.sub(a, b, **p)
    else:
        raise _bad(cmd, f"{cmd.op.name.lower()} runs in float modes only")
    return np.broadcast_to(y, out) if y.shape != out else y


@_checked
def _requant(cmd: isa.Requant, ins: Inputs) -> np.ndarray:
    x = ins["input"]
    ax = _axis(cmd, x.shape)
    q = _quant(cmd, ins, 2, x.shape[ax])
    p = _requant_fields(cmd, q)
    return tiu.requant(x, x_zp=int(cmd.input_zp), channel_axis=ax if q is not None else -1, **p)


@_checked
def _lut(cmd: isa.Lut, ins: Inputs) -> np.ndarray:
    table = ins["table"]
    if table.shape != (1, 1, 1, 256) or table.dtype != DTYPES[cmd.output.dtype]:
        raise _bad(cmd, f"table {table.shape} {table.dtype}, expected (1, 1, 1, 256) {cmd.output.dtype}")
    x = ins["input"]
    if x.dtype not in (np.int8, np.uint8):
        raise _bad(cmd, f"the input is {cmd.input.dtype}; a table look-up reads 8-bit integers")
    return tiu.lut(x, table.reshape(256))


@_checked
def _lut16(cmd: isa.Lut16, ins: Inputs) -> np.ndarray:
    table = ins["table"]
    if table.shape != (1, 1, 1, 65536) or table.dtype != DTYPES[cmd.output.dtype]:
        raise _bad(cmd, f"table {table.shape} {table.dtype}, expected (1, 1, 1, 65536) {cmd.output.dtype}")
    x = ins["input"]
    if x.dtype != np.int16:
        raise _bad(cmd, f"the input is {cmd.input.dtype}; a 16-bit table look-up reads int16")
    return tiu.lut16(x, table.reshape(65536))


@_checked
def _cast(cmd: isa.Cast, ins: Inputs) -> np.ndarray:
    x = ins["input"]
    src_f, dst_f = _is_float(x), cmd.output.dtype in ("f16", "bf16", "f32")
    if src_f and dst_f:
        return tiu.cast_float(x, out_dtype=_out_dtype(cmd))
    if src_f == dst_f:
        raise _bad(cmd, "an integer to integer conversion is a Requant")
    if cmd.round_mode != isa.RoundMode.HALF_AWAY_FROM_ZERO:
        raise _bad(cmd, "only round half away from zero (the tpu contract) has a kernel")
    ax = _axis(cmd, x.shape)
    q = _quant(cmd, ins, 3, x.shape[ax])
    if q is not None:
        words = np.ascontiguousarray(q[0, :, 0, :2])
        scale: Any = words.view(np.float64).reshape(-1)
        zp: Any = _col(q, 2)
        channel_axis = ax
    else:
        scale, zp, channel_axis = float(cmd.scale), int(cmd.zero_point), -1
    if src_f:
        return tiu.cast_quantize(
            x,
            scale=scale,
            zp=zp,
            channel_axis=channel_axis,
            out_min=int(cmd.out_min),
            out_max=int(cmd.out_max),
            out_dtype=_out_dtype(cmd),
        )
    return tiu.cast_dequantize(x, scale=scale, zp=zp, channel_axis=channel_axis, out_dtype=_out_dtype(cmd))


# ---- pooling, reductions, data movement --------------------------------------------------------------


@_checked
def _pool(cmd: isa.Pool, ins: Inputs) -> np.ndarray:
    x = ins["input"]
    kernel = [int(cmd.kh), int(cmd.kw)]
    geo = _window(cmd)
    extra = [int(cmd.ceil_extra_h), int(cmd.ceil_extra_w)]
    if cmd.mode == isa.PoolMode.MAX:
        if _is_float(x):
            _no_float_relu(cmd)
        pt, pl, pb, pr = geo["pad"]
        return tiu.max_pool(
            x,
            kernel=kernel,
            stride=geo["stride"],
            dilation=geo["dilation"],
            pad=[pt, pl, pb + extra[0], pr + extra[1]],
        )
    if geo["dilation"] != [1, 1]:
        raise _bad(cmd, "average pooling has no dilation")
    if _is_float(x):
        _no_float_relu(cmd)
        return tiu.avg_pool_f(
            x,
            kernel=kernel,
            stride=geo["stride"],
            pad=geo["pad"],
            count_include_pad=bool(cmd.count_include_pad),
            ceil_extra=extra,
            out_dtype=_out_dtype(cmd),
        )
    if any(extra):
        raise _bad(cmd, "integer average pooling has no ceil-mode windows")
    return tiu.avg_pool(
        x,
        x_zp=int(cmd.input_zp),
        kernel=kernel,
        stride=geo["stride"],
        pad=geo["pad"],
        multiplier=int(cmd.multiplier),
        rshift=int(cmd.rshift),
        out_zp=int(cmd.output_zp),
        out_min=int(cmd.out_min),
        out_max=int(cmd.out_max),
        out_dtype=_out_dtype(cmd),
    )


def _pool_work(cmd: isa.Pool) -> int:
    return cmd.output.elements * cmd.kh * cmd.kw


@_checked
def _permute(cmd: isa.Permute, ins: Inputs) -> np.ndarray:
    if sorted(cmd.order) != [0, 1, 2, 3]:
        raise _bad(cmd, f"order {cmd.order} is not a permutation of (n, c, h, w)")
    return tiu.permute(ins["input"], order=list(cmd.order))


def reduce_axes(axes: int) -> tuple[int, ...]:
    """The dims of (n, c, h, w) a Reduce's ``axes`` bit mask names."""
    return tuple(i for i in range(4) if axes >> i & 1)


@_checked
def _reduce(cmd: isa.Reduce, ins: Inputs) -> np.ndarray:
    x = ins["input"]
    if not 0 < cmd.axes < 16:
        raise _bad(cmd, f"axes mask {cmd.axes} names no dims, or dims past (n, c, h, w)")
    axes = reduce_axes(int(cmd.axes))
    mode = cmd.mode
    if mode in (isa.ReduceMode.MAX, isa.ReduceMode.MIN):
        fn = tiu.reduce_max if mode == isa.ReduceMode.MAX else tiu.reduce_min
        return fn(x, axes=axes, keepdims=True)
    if _is_float(x):
        if mode == isa.ReduceMode.SUM:
            return tiu.reduce_sum_f(x, axes=axes, keepdims=True, out_dtype=_out_dtype(cmd))
        if mode == isa.ReduceMode.MEAN:
            return tiu.reduce_mean_f(x, axes=axes, keepdims=True, out_dtype=_out_dtype(cmd))
    elif mode == isa.ReduceMode.MEAN:
        return tiu.reduce_mean(
            x,
            axes=axes,
            keepdims=True,
            x_zp=int(cmd.input_zp),
            multiplier=int(cmd.multiplier),
            rshift=int(cmd.rshift),
            out_zp=int(cmd.output_zp),
            out_min=int(cmd.out_min),
            out_max=int(cmd.out_max),
            out_dtype=_out_dtype(cmd),
        )
    kind = "float" if _is_float(x) else "integer"
    raise _bad(cmd, f"reduce {mode.name.lower()} has no {kind} kernel")


def _reduce_work(cmd: isa.Reduce) -> int:
    return cmd.input.elements


# ---- float activations, softmax, layer norm, attention ------------------------------------------------


def active_params(fn: str, params: tuple[float, ...]) -> dict[str, Any]:
    """An ``Active`` record's ``params`` as the activation's properties by name (declaration
    order; string properties decoded through :data:`isa.ACTIVE_CHOICES`)."""
    cls = tiu.ACTIVATIONS.get(fn)
    if cls is None:
        raise LaminaError(f"TIU Active: unknown activation {fn!r}")
    props = cls.op_def.props
    if len(props) > len(params):
        raise LaminaError(f"TIU Active: {fn} has {len(props)} properties, a record carries {len(params)}")
    out: dict[str, Any] = {}
    for p, v in zip(props, params):
        choices = isa.ACTIVE_CHOICES.get((fn, p.name))
        if choices is not None:
            i = int(v)
            if i != v or not 0 <= i < len(choices):
                raise LaminaError(f"TIU Active: {fn}.{p.name} index {v} outside 0..{len(choices) - 1}")
            out[p.name] = choices[i]
        elif isinstance(p.default, int) and not isinstance(p.default, bool):
            out[p.name] = int(v)
        else:
            out[p.name] = float(v)
    return out


@_checked
def _active(cmd: isa.Active, ins: Inputs) -> np.ndarray:
    x = ins["input"]
    if not _is_float(x):
        raise _bad(cmd, "an integer activation is a Lut")
    return tiu.active_f(x, fn=cmd.fn, params=active_params(cmd.fn, cmd.params), out_dtype=_out_dtype(cmd))


@_checked
def _softmax(cmd: isa.Softmax, ins: Inputs) -> np.ndarray:
    x = ins["input"]
    if not _is_float(x) or cmd.axis > 3:
        raise _bad(cmd, f"softmax of a {cmd.input.dtype} tensor along dim {cmd.axis}")
    return tiu.softmax_f(x, axis=int(cmd.axis), log=bool(cmd.log), out_dtype=_out_dtype(cmd))


@_checked
def _layer_norm(cmd: isa.LayerNorm, ins: Inputs) -> np.ndarray:
    x = ins["input"]
    if not _is_float(x) or cmd.axis > 3:
        raise _bad(cmd, f"layer norm of a {cmd.input.dtype} tensor from dim {cmd.axis}")
    want = (1,) * int(cmd.axis) + x.shape[cmd.axis :]
    for name in ("gamma", "beta"):
        t = ins.get(name)
        if t is not None and t.shape != want:
            raise _bad(cmd, f"{name} {t.shape}, expected {want}")
    return tiu.layer_norm_f(
        x,
        ins.get("gamma"),
        ins.get("beta"),
        axis=int(cmd.axis),
        epsilon=float(cmd.epsilon),
        out_dtype=_out_dtype(cmd),
    )


def _layer_norm_work(cmd: isa.LayerNorm) -> int:
    return cmd.output.elements * (tiu.LAYER_NORM_PASSES + (cmd.gamma is not None) + (cmd.beta is not None))


@_checked
def _attention(cmd: isa.Attention, ins: Inputs) -> np.ndarray:
    q, k, v = ins["query"], ins["key"], ins["value"]
    mask = ins.get("mask")
    b, h, m, d = q.shape
    if k.shape[:2] != (b, h) or k.shape[3] != d or v.shape[:3] != k.shape[:3]:
        raise _bad(cmd, f"query {q.shape}, key {k.shape}, value {v.shape} do not fit (B, H, M|N, D|Dv)")
    if mask is not None and np.broadcast_shapes(mask.shape, (b, h, m, k.shape[2])) != (b, h, m, k.shape[2]):
        raise _bad(cmd, f"mask {mask.shape} does not broadcast to {(b, h, m, k.shape[2])}")
    if not _is_float(q):
        raise _bad(cmd, "attention runs in float modes only")
    return tiu.attention_f(q, k, v, mask, scale=float(cmd.scale), out_dtype=_out_dtype(cmd))


def _attention_work(cmd: isa.Attention) -> int:
    n = cmd.key.shape[2]
    return cmd.query.elements * n + cmd.output.elements * n


def _elements(cmd: isa.TiuCommand) -> int:
    return cmd.output.elements


#: every TIU command class → (execute, work)
KERNELS: dict[type[isa.TiuCommand], tuple[Execute, Work]] = {
    isa.Conv: (_conv, _conv_work),
    isa.Depthwise: (_conv, _conv_work),
    isa.MatMul: (_matmul, _matmul_work),
    isa.Eltwise: (_eltwise, _elements),
    isa.Requant: (_requant, _elements),
    isa.Pool: (_pool, _pool_work),
    isa.Lut: (_lut, _elements),
    isa.Lut16: (_lut16, _elements),
    isa.Cast: (_cast, _elements),
    isa.Permute: (_permute, _elements),
    isa.Reduce: (_reduce, _reduce_work),
    isa.Active: (_active, _elements),
    isa.Softmax: (_softmax, lambda cmd: cmd.output.elements * tiu.SOFTMAX_PASSES),
    isa.LayerNorm: (_layer_norm, _layer_norm_work),
    isa.Attention: (_attention, _attention_work),
}

#: each command's work count in words (docs/npu-isa.md's tables)
WORK_RULES: dict[type[isa.TiuCommand], str] = {
    isa.Conv: "MACs: output elements * `Cin/groups * kh * kw`",
    isa.Depthwise: "MACs: output elements * `kh * kw`",
    isa.MatMul: "MACs: output elements * `K`",
    isa.Eltwise: "output elements",
    isa.Requant: "output elements",
    isa.Pool: "output elements * `kh * kw`",
    isa.Lut: "output elements",
    isa.Lut16: "output elements",
    isa.Cast: "output elements",
    isa.Permute: "output elements",
    isa.Reduce: "input elements",
    isa.Active: "output elements",
    isa.Softmax: f"{tiu.SOFTMAX_PASSES} * output elements (max, subtract, exp, sum, divide)",
    isa.LayerNorm: (
        f"({tiu.LAYER_NORM_PASSES} + one each for `gamma`, `beta`) * output elements (mean, subtract, "
        "square, mean, rsqrt and scale, then the affine passes)"
    ),
    isa.Attention: "MACs: `B * H * M * N * (D + Dv)` (its two products)",
}


def execute(cmd: isa.TiuCommand, inputs: Inputs) -> np.ndarray:
    """The output of TIU command ``cmd`` on its input operands (4-d arrays by field name)."""
    ent = KERNELS.get(type(cmd))
    if ent is None:
        raise LaminaError(f"no TIU kernel for {type(cmd).__name__} commands")
    return ent[0](cmd, inputs)


def work(cmd: isa.TiuCommand) -> int:
    """The work count of TIU command ``cmd`` (MACs for conv, depthwise, matmul and attention;
    element operations otherwise; :data:`WORK_RULES`)."""
    ent = KERNELS.get(type(cmd))
    if ent is None:
        raise LaminaError(f"no TIU kernel for {type(cmd).__name__} commands")
    return int(ent[1](cmd))


assert set(WORK_RULES) == set(KERNELS)

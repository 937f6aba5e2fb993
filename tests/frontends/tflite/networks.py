"""The small whole networks of the TFLite tests and of ``benchmarks/tflite_frontend.py``, written
as flatbuffers by :mod:`builder` with seeded random weights."""

from __future__ import annotations

import numpy as np
from builder import ModelBuilder

RNG = np.random.default_rng(1)


def rnd(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def conv(
    m: ModelBuilder, x: int, cin: int, cout: int, hw: int, name: str, act: int = 3, k: int = 3, s: int = 1
) -> int:
    w, b = m.const(name + "_w", rnd(cout, k, k, cin) * 0.3), m.const(name + "_b", rnd(cout) * 0.1)
    opts = {"Padding": 0, "StrideH": s, "StrideW": s, "FusedActivationFunction": act}
    return m.op("CONV_2D", [x, w, b], [1, -(-hw // s), -(-hw // s), cout], name, ("Conv2DOptions", opts))


def mobilenet_like() -> bytes:
    """conv/s2 → depthwise (fp16 weights) → 1x1 conv → residual add → mean → FC → softmax."""
    m = ModelBuilder()
    x = m.input("image", [1, 16, 16, 3])
    c1 = conv(m, x, 3, 8, 16, "stem", s=2)
    wh = m.const("dw_w_fp16", (rnd(1, 3, 3, 8) * 0.3).astype(np.float16))
    wd = m.op("DEQUANTIZE", [wh], [1, 3, 3, 8], "dw_w")
    dw = m.op(
        "DEPTHWISE_CONV_2D",
        [c1, wd, m.const("dw_b", rnd(8) * 0.1)],
        [1, 8, 8, 8],
        "dw",
        (
            "DepthwiseConv2DOptions",
            {"Padding": 0, "StrideH": 1, "StrideW": 1, "DepthMultiplier": 1, "FusedActivationFunction": 3},
        ),
    )
    pw = conv(m, dw, 8, 8, 8, "pw", act=0, k=1)
    add = m.op("ADD", [pw, c1], [1, 8, 8, 8], "residual", ("AddOptions", {"FusedActivationFunction": 1}))
    pool = m.op(
        "MEAN",
        [add, m.const("hw", np.array([1, 2], np.int32))],
        [1, 8],
        "pool",
        ("ReducerOptions", {"KeepDims": False}),
    )
    fc = m.op(
        "FULLY_CONNECTED", [pool, m.const("fc_w", rnd(5, 8)), m.const("fc_b", rnd(5))], [1, 5], "logits"
    )
    m.output(m.op("SOFTMAX", [fc], [1, 5], "probs", ("SoftmaxOptions", {"Beta": 1.0})))
    return m.build()


def transformer_block(seq: int = 6, d: int = 16, heads: int = 2) -> bytes:
    """One pre-norm encoder block: layer norm from MEAN/SQUARED_DIFFERENCE/RSQRT, Q/K/V by
    FULLY_CONNECTED (keep_num_dims), heads by RESHAPE/TRANSPOSE, BATCH_MATMUL, SOFTMAX, GELU MLP,
    residual ADDs."""
    return transformer_block_model(seq, d, heads).build()


def reseed(seed: int) -> None:
    """Restart the weights' random stream (a network's weights then do not depend on what was built
    before it in the process)."""
    global RNG
    RNG = np.random.default_rng(seed)


def transformer_block_model(
    seq: int = 6, d: int = 16, heads: int = 2, seed: int | None = None
) -> ModelBuilder:
    """:func:`transformer_block` before serialization (``seed``: its own weights)."""
    if seed is not None:
        reseed(seed)
    m = ModelBuilder()
    dh = d // heads
    x = m.input("tokens", [1, seq, d])

    def i32(name: str, v: list[int]) -> int:
        return m.const(name, np.array(v, np.int32))

    def fc(name: str, a: int, n_in: int, n_out: int, act: int = 0) -> int:
        w, b = m.const(name + "_w", rnd(n_out, n_in) * 0.3), m.const(name + "_b", rnd(n_out) * 0.1)
        opts = ("FullyConnectedOptions", {"KeepNumDims": True, "FusedActivationFunction": act})
        return m.op("FULLY_CONNECTED", [a, w, b], [1, seq, n_out], name, opts)

    def norm(name: str, a: int) -> int:
        red = ("ReducerOptions", {"KeepDims": True})
        mu = m.op("MEAN", [a, i32(name + "_ax", [-1])], [1, seq, 1], name + "_mean", red)
        var = m.op(
            "MEAN",
            [m.op("SQUARED_DIFFERENCE", [a, mu], [1, seq, d], name + "_sq"), i32(name + "_ax2", [-1])],
            [1, seq, 1],
            name + "_var",
            red,
        )
        eps = m.op(
            "ADD", [var, m.const(name + "_eps", np.array(1e-5, np.float32))], [1, seq, 1], name + "_veps"
        )
        inv = m.op("RSQRT", [eps], [1, seq, 1], name + "_inv")
        centered = m.op("SUB", [a, mu], [1, seq, d], name + "_c")
        scaled = m.op("MUL", [centered, inv], [1, seq, d], name + "_n")
        return m.op("MUL", [scaled, m.const(name + "_g", rnd(d))], [1, seq, d], name)

    def heads_of(name: str, a: int) -> int:
        r = m.op("RESHAPE", [a, i32(name + "_s", [seq, heads, dh])], [seq, heads, dh], name + "_r")
        return m.op("TRANSPOSE", [r, i32(name + "_p", [1, 0, 2])], [heads, seq, dh], name + "_h")

    h = norm("ln1", x)
    q, k, v = (heads_of(n, fc(n, h, d, d)) for n in ("q", "k", "v"))
    qs = m.op("MUL", [q, m.const("scale", np.array(dh**-0.5, np.float32))], [heads, seq, dh], "q_scaled")
    s = m.op("BATCH_MATMUL", [qs, k], [heads, seq, seq], "scores", ("BatchMatMulOptions", {"AdjY": True}))
    p = m.op("SOFTMAX", [s], [heads, seq, seq], "attn", ("SoftmaxOptions", {"Beta": 1.0}))
    ctx = m.op("BATCH_MATMUL", [p, v], [heads, seq, dh], "ctx")
    merged = m.op("TRANSPOSE", [ctx, i32("ctx_p", [1, 0, 2])], [seq, heads, dh], "ctx_t")
    flat = m.op("RESHAPE", [merged, i32("ctx_s", [1, seq, d])], [1, seq, d], "ctx_flat")
    r1 = m.op("ADD", [x, fc("proj", flat, d, d)], [1, seq, d], "res1")
    mlp = m.op(
        "GELU",
        [fc("up", norm("ln2", r1), d, 2 * d)],
        [1, seq, 2 * d],
        "gelu",
        ("GeluOptions", {"Approximate": True}),
    )
    m.output(m.op("ADD", [r1, fc("down", mlp, 2 * d, d)], [1, seq, d], "out"))
    return m


def mobilenet_v2_model(hw: int = 32, seed: int = 2) -> ModelBuilder:
    """A MobileNetV2/V3-style CNN in float (to be quantized by :mod:`quantizer`): stem conv/s2 ReLU6,
    inverted residual blocks (1x1 expand ReLU6, 3x3 depthwise ReLU6, 1x1 linear projection, residual
    ADD), a HARD_SWISH head conv, global AVERAGE_POOL_2D, FULLY_CONNECTED logits, SOFTMAX."""
    reseed(seed)
    m = ModelBuilder()
    x = m.input("image", [1, hw, hw, 3])
    h = hw // 2
    x = conv(m, x, 3, 16, hw, "stem", act=3, s=2)

    def dw(x: int, c: int, hw: int, name: str, s: int = 1) -> int:
        w, b = m.const(name + "_w", rnd(1, 3, 3, c) * 0.3), m.const(name + "_b", rnd(c) * 0.1)
        opts = {"Padding": 0, "StrideH": s, "StrideW": s, "DepthMultiplier": 1, "FusedActivationFunction": 3}
        out = -(-hw // s)
        return m.op("DEPTHWISE_CONV_2D", [x, w, b], [1, out, out, c], name, ("DepthwiseConv2DOptions", opts))

    def block(x: int, cin: int, cout: int, hw: int, name: str, expand: int, s: int = 1) -> tuple[int, int]:
        y = conv(m, x, cin, cin * expand, hw, name + "_expand", act=3, k=1) if expand > 1 else x
        y = dw(y, cin * expand, hw, name + "_dw", s)
        out = -(-hw // s)
        y = conv(m, y, cin * expand, cout, out, name + "_project", act=0, k=1)
        if s == 1 and cin == cout:
            y = m.op("ADD", [x, y], [1, out, out, cout], name + "_add")
        return y, out

    x, h = block(x, 16, 8, h, "block1", 1)
    x, h = block(x, 8, 16, h, "block2", 4, s=2)
    x, h = block(x, 16, 16, h, "block3", 3)
    x = conv(m, x, 16, 32, h, "head", act=0, k=1)
    x = m.op("HARD_SWISH", [x], [1, h, h, 32], "head_hswish")
    opts = {"Padding": 1, "StrideH": 1, "StrideW": 1, "FilterHeight": h, "FilterWidth": h}
    x = m.op("AVERAGE_POOL_2D", [x], [1, 1, 1, 32], "pool", ("Pool2DOptions", opts))
    x = m.op("RESHAPE", [x, m.const("flat_shape", np.array([1, 32], np.int32))], [1, 32], "flat")
    fc = m.op(
        "FULLY_CONNECTED",
        [x, m.const("fc_w", rnd(10, 32) * 0.3), m.const("fc_b", rnd(10))],
        [1, 10],
        "logits",
    )
    m.output(m.op("SOFTMAX", [fc], [1, 10], "probs", ("SoftmaxOptions", {"Beta": 1.0})))
    return m


def calibration_samples(
    name: str, shape: tuple[int, ...], n: int = 8, seed: int = 5
) -> list[dict[str, np.ndarray]]:
    """Seeded random samples for quantizing a network (and its test input: sample 0 is not among
    them, see :func:`test_input`)."""
    rng = np.random.default_rng(seed)
    return [{name: rng.standard_normal(shape).astype(np.float32)} for _ in range(n)]


def test_input(name: str, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
    return {name: np.random.default_rng(11).standard_normal(shape).astype(np.float32)}


def mobilenet_v2_int8(io: str = "float") -> tuple[bytes, ModelBuilder]:
    """:func:`mobilenet_v2_model` quantized to full integer (``io``: float inputs and outputs
    through QUANTIZE/DEQUANTIZE, or int8 ones); the bytes and the quantized builder."""
    from quantizer import quantize_model

    q = quantize_model(mobilenet_v2_model(), calibration_samples("image", (1, 32, 32, 3)), io=io)
    return q.build(), q


def transformer_block_int8(io: str = "float") -> tuple[bytes, ModelBuilder]:
    """:func:`transformer_block_model` quantized to full integer (FULLY_CONNECTED per channel)."""
    from quantizer import quantize_model

    samples = calibration_samples("tokens", (1, 6, 16))
    q = quantize_model(transformer_block_model(seed=3), samples, io=io, per_channel_fc=True)
    return q.build(), q

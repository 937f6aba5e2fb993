"""Tiny ONNX encoders with an attention mask, for the masking tests (tests/quant/test_masking.py,
tests/tools/test_calibrate.py): token ids and a mask ``[1, S]`` int64, an embedding, one
self-attention layer of 2 heads whose scores the mask reaches in one of several ways, a residual, and
mean pooling over the mask. Outputs ``hidden`` ``[1, S, H]`` and ``pooled`` ``[1, H]``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

S, H, HEADS, V = 8, 16, 2, 50
PAD = 0


def encoder(
    path: Path, kind: str = "additive", pad_value: float = 0.0, seed: int = 0, probs: bool = False
) -> str:
    """``kind``: ``additive`` (BERT: ``scores + (1 - mask) * -10000``), ``where`` (``Where(mask,
    scores, -1e9)``), ``padding`` (PyTorch's key_padding_mask: 1 marks padding, ``scores + mask *
    -10000``) or ``nomask`` (the second input is added to the embeddings, it masks nothing).
    ``pad_value``: added to the PAD token's embedding (huge values at padded positions). ``probs``:
    the attention probabilities are an output too (``probs`` ``[1, 2, S, S]``), which keeps the
    import from fusing the attention into one ``top.Attention`` (the scores, the masked scores and
    the softmax stay tensors)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    dh = H // HEADS
    emb = rng.standard_normal((V, H)).astype(np.float32)
    emb[PAD] += np.float32(pad_value)

    def w(name: str, shape: tuple[int, ...], scale: float = 0.3) -> Any:
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    def const(name: str, v: Any, dtype: Any = np.float32) -> Any:
        return numpy_helper.from_array(np.asarray(v, dtype), name)

    inits = [numpy_helper.from_array(emb, "E"), w("Wq", (H, H)), w("Wk", (H, H)), w("Wv", (H, H)),
             const("shape4", [1, S, HEADS, dh], np.int64), const("shape3", [1, S, H], np.int64),
             const("one", 1.0), const("neg", -10000.0), const("ninf", -1e9), const("scale", 1 / np.sqrt(dh)),
             const("ax12", [1, 2], np.int64), const("axm1", [-1], np.int64), const("ax1", [1], np.int64)]  # fmt: skip
    n = helper.make_node
    nodes = [
        n("Gather", ["E", "ids"], ["x"], name="embed"),
        n("Cast", ["mask"], ["m"], to=TensorProto.FLOAT, name="mask_cast"),
    ]
    for t in ("q", "k", "v"):
        nodes.append(n("MatMul", ["x", f"W{t}"], [f"{t}0"], name=f"{t}_proj"))
        nodes.append(n("Reshape", [f"{t}0", "shape4"], [f"{t}1"], name=f"{t}_split"))
    nodes += [
        n("Transpose", ["q1"], ["q"], perm=[0, 2, 1, 3], name="q_t"),
        n("Transpose", ["k1"], ["kT"], perm=[0, 2, 3, 1], name="k_t"),
        n("Transpose", ["v1"], ["v"], perm=[0, 2, 1, 3], name="v_t"),
        n("MatMul", ["q", "kT"], ["s0"], name="qk"),
        n("Mul", ["s0", "scale"], ["scores"], name="scale_scores"),
    ]
    if kind == "additive":
        nodes += [
            n("Sub", ["one", "m"], ["inv"], name="mask_inv"),
            n("Mul", ["inv", "neg"], ["bias"], name="mask_bias"),
            n("Unsqueeze", ["bias", "ax12"], ["bias4"], name="mask_bias4"),
            n("Add", ["scores", "bias4"], ["masked"], name="apply_mask"),
        ]
    elif kind == "padding":
        nodes += [
            n("Mul", ["m", "neg"], ["bias"], name="mask_bias"),
            n("Unsqueeze", ["bias", "ax12"], ["bias4"], name="mask_bias4"),
            n("Add", ["scores", "bias4"], ["masked"], name="apply_mask"),
        ]
    elif kind == "where":
        nodes += [
            n("Cast", ["mask"], ["mb"], to=TensorProto.BOOL, name="mask_bool"),
            n("Unsqueeze", ["mb", "ax12"], ["mb4"], name="mask_bool4"),
            n("Where", ["mb4", "scores", "ninf"], ["masked"], name="apply_mask"),
        ]
    elif kind == "nomask":
        nodes += [n("Identity", ["scores"], ["masked"], name="no_mask")]
    else:
        raise ValueError(kind)
    nodes += [
        n("Softmax", ["masked"], ["p"], axis=-1, name="softmax"),
        n("MatMul", ["p", "v"], ["c0"], name="pv"),
        n("Transpose", ["c0"], ["c1"], perm=[0, 2, 1, 3], name="c_t"),
        n("Reshape", ["c1", "shape3"], ["c"], name="c_merge"),
        n("Add", ["c", "x"], ["h0"], name="residual"),
    ]
    if kind == "nomask":
        nodes += [
            n("Unsqueeze", ["m", "axm1"], ["mm"], name="m3"),
            n("Add", ["h0", "mm"], ["hidden"], name="add_m"),
        ]
        nodes += [n("ReduceMean", ["hidden"], ["pooled"], axes=[1], keepdims=0, name="pool")]
    else:
        keep = "m" if kind != "padding" else "keepf"
        if kind == "padding":
            nodes.append(n("Sub", ["one", "m"], ["keepf"], name="keep_of_pad"))
        nodes += [
            n("Identity", ["h0"], ["hidden"], name="hidden_out"),
            n("Unsqueeze", [keep, "axm1"], ["mm"], name="m3"),
            n("Mul", ["hidden", "mm"], ["hm"], name="pool_mul"),
            n("ReduceSum", ["hm", "ax1"], ["hs"], keepdims=0, name="pool_sum"),
            n("ReduceSum", ["mm", "ax1"], ["ms"], keepdims=0, name="pool_count"),
            n("Div", ["hs", "ms"], ["pooled"], name="pool_div"),
        ]
    g = helper.make_graph(
        nodes, f"enc_{kind}",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, S]),
         helper.make_tensor_value_info("mask", TensorProto.INT64, [1, S])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, S, H]),
         helper.make_tensor_value_info("pooled", TensorProto.FLOAT, [1, H])]
        + ([helper.make_tensor_value_info("p", TensorProto.FLOAT, [1, HEADS, S, S])] if probs else []),
        initializer=inits,
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    p = str(path)
    onnx.save(m, p)
    return p


def samples(n: int, seed: int = 1, padding: bool = False) -> list[dict[str, np.ndarray]]:
    """``n`` samples of 3..S real tokens, the rest PAD; ``mask`` 1 on the real tokens (with
    ``padding``: 1 on the padded ones, PyTorch's key_padding_mask)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        k = int(rng.integers(3, S)) if i % 4 else S  # every fourth sample fills the sequence
        ids = np.full((1, S), PAD, np.int64)
        ids[0, :k] = rng.integers(1, V, k)
        mask = np.zeros((1, S), np.int64)
        mask[0, :k] = 1
        out.append({"ids": ids, "mask": 1 - mask if padding else mask})
    return out

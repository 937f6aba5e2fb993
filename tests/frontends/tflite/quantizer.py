"""Full-integer quantization of the tests' float models, as TensorFlow's post-training quantization
does it (no TensorFlow: the ranges come from LiteRT running the float model):

* activations: int8, asymmetric, scale and zero point from the range observed on the calibration
  samples (widened to contain 0); ops whose int8 kernels require it keep their input's parameters
  (pools, reshapes, slices, ...) or get TFLite's fixed output parameters (LOGISTIC, SOFTMAX, TANH,
  LOG_SOFTMAX, L2_NORMALIZATION);
* weights of CONV_2D, DEPTHWISE_CONV_2D and TRANSPOSE_CONV: int8, symmetric, one scale per output
  channel (``max |w| / 127``); FULLY_CONNECTED's per tensor (``per_channel_fc`` for per channel);
  biases int32 with scale ``input scale * weight scale``; other float constants int8 per tensor;
* inputs and outputs: int8 (``io="int8"``: the model is fed integers), or float with a QUANTIZE
  after each input and a DEQUANTIZE before each output (``io="float"``).

    q = quantize_model(m, [{"x": x0}, {"x": x1}], io="int8")
    buf = q.build()
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
from builder import _TYPE, ModelBuilder

INT8 = _TYPE[np.dtype(np.int8)]
INT32 = _TYPE[np.dtype(np.int32)]
FLOAT = _TYPE[np.dtype(np.float32)]

#: ops whose int8 kernels need the output quantized as the (first data) input
SAME_AS_INPUT = {
    "MAX_POOL_2D": 0,
    "AVERAGE_POOL_2D": 0,
    "RESHAPE": 0,
    "SQUEEZE": 0,
    "EXPAND_DIMS": 0,
    "TRANSPOSE": 0,
    "PAD": 0,
    "PADV2": 0,
    "MIRROR_PAD": 0,
    "SLICE": 0,
    "STRIDED_SLICE": 0,
    "GATHER": 0,
    "SPACE_TO_DEPTH": 0,
    "DEPTH_TO_SPACE": 0,
    "RESIZE_BILINEAR": 0,
    "RESIZE_NEAREST_NEIGHBOR": 0,
    "SPLIT": 1,
    "SPLIT_V": 0,
    "UNPACK": 0,
    "PACK": 0,
    "REDUCE_MAX": 0,
    "REDUCE_MIN": 0,
    "MAXIMUM": 0,
    "MINIMUM": 0,
}
#: ops whose int8 kernels compare or copy the stored integers of all their inputs and their output,
#: which must then share one quantization (the output's observed range; QUANTIZE ops requantize the
#: activation inputs to it, constants are quantized with it): PADV2's padding value, SELECT's
#: two branches, too
SHARED = {"MAXIMUM", "MINIMUM", "CONCATENATION", "PADV2", "SELECT", "SELECT_V2"}
#: TFLite's fixed output quantization of some int8 kernels: (scale, zero point)
FIXED_OUTPUT = {
    "LOGISTIC": (1 / 256, -128),
    "SOFTMAX": (1 / 256, -128),
    "TANH": (1 / 128, 0),
    "LOG_SOFTMAX": (16 / 256, 127),
    "L2_NORMALIZATION": (1 / 128, 0),
}
#: weight input index and output-channel axis of the ops with per-channel weights
WEIGHTS = {
    "CONV_2D": (1, 0),
    "DEPTHWISE_CONV_2D": (1, 3),
    "TRANSPOSE_CONV": (1, 0),
    "FULLY_CONNECTED": (1, 0),
}
BIAS = {"CONV_2D": 2, "DEPTHWISE_CONV_2D": 2, "TRANSPOSE_CONV": 3, "FULLY_CONNECTED": 2}


def asymmetric(lo: float, hi: float) -> tuple[float, int]:
    """TFLite's int8 activation parameters of a range (widened to contain 0)."""
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    if hi - lo < 1e-8:
        hi = lo + 1e-3
    scale = (hi - lo) / 255
    zp = int(np.clip(np.round(-128 - lo / scale), -128, 127))
    return float(np.float32(scale)), zp


def quantize_array(a: np.ndarray, scale: Any, zp: Any, axis: int = 0, dtype: Any = np.int8) -> np.ndarray:
    info = np.iinfo(dtype)
    s, z = np.asarray(scale, np.float64), np.asarray(zp, np.float64)
    if s.size > 1:
        shape = [1] * a.ndim
        shape[axis] = -1
        s, z = s.reshape(shape), z.reshape(shape) if z.size > 1 else z
    q = np.floor(a.astype(np.float64) / s + 0.5) + z
    return np.clip(q, info.min, info.max).astype(dtype)


def dequantize_array(q: np.ndarray, scale: float, zp: int) -> np.ndarray:
    return ((q.astype(np.float64) - zp) * scale).astype(np.float32)


def observed_ranges(buf: bytes, samples: list[dict[str, np.ndarray]]) -> dict[int, tuple[float, float]]:
    """Every float tensor's (min, max) over LiteRT's runs of the float model ``buf``."""
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(
        model_content=buf,
        experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        experimental_preserve_all_tensors=True,
    )
    it.allocate_tensors()
    by_name = {d["name"]: d["index"] for d in it.get_input_details()}
    out: dict[int, tuple[float, float]] = {}
    for feeds in samples:
        for k, v in feeds.items():
            it.set_tensor(by_name[k], v)
        it.invoke()
        for d in it.get_tensor_details():
            try:
                a = np.asarray(it.get_tensor(d["index"]))
            except ValueError:
                continue
            if a.dtype != np.float32 or a.size == 0:
                continue
            lo, hi = float(a.min()), float(a.max())
            if d["index"] in out:
                lo, hi = min(lo, out[d["index"]][0]), max(hi, out[d["index"]][1])
            out[d["index"]] = (lo, hi)
    return out


def quantize_model(
    m: ModelBuilder, samples: list[dict[str, np.ndarray]], io: str = "int8", per_channel_fc: bool = False
) -> ModelBuilder:
    """The full-integer version of float model ``m`` (see the module doc)."""
    ranges = observed_ranges(m.build(), samples)
    q = copy.deepcopy(m)
    t = q.tensors
    data: dict[int, np.ndarray] = {}
    for i, ten in enumerate(t):
        if ten["buffer"] and ten["type"] == FLOAT:
            raw = m.buffers[ten["buffer"]]
            data[i] = np.frombuffer(raw, np.float32).reshape(ten["shape"])
    params: dict[int, tuple[float, int]] = {}

    def act(i: int) -> tuple[float, int]:
        if i not in params:
            params[i] = asymmetric(*ranges.get(i, (0.0, 1.0)))
        return params[i]

    def set_const(i: int, qa: np.ndarray, quant: Any, code: int) -> None:
        q.buffers.append(qa.tobytes())
        t[i] = {**t[i], "type": code, "buffer": len(q.buffers) - 1, "quant": quant}

    done: set[int] = set()
    new_ops = []
    for opname, ins, outs, opts, copts in q.ops:
        ins = list(ins)
        if opname in SHARED:
            target = act(ins[0]) if opname in ("MAXIMUM", "MINIMUM", "PADV2") else act(outs[0])
            for k, i in enumerate(ins):
                if i in data and i not in done:
                    set_const(i, quantize_array(data[i], *target), (*target, 0), INT8)
                    params[i] = target
                    done.add(i)
                elif i >= 0 and t[i]["type"] == FLOAT and act(i) != target:  # requantize
                    r = q.tensor(t[i]["name"] + f"_requantized_{len(new_ops)}", t[i]["shape"], np.int8)
                    t[r]["quant"] = (*target, 0)
                    params[r] = target
                    new_ops.append(("QUANTIZE", [i], [r], None, b""))
                    ins[k] = r
            for o in outs:
                params[o] = target
        new_ops.append((opname, ins, outs, opts, copts))
        w_in, axis = WEIGHTS.get(opname, (None, 0))
        if w_in is not None and ins[w_in] in data and ins[w_in] not in done:
            w = data[ins[w_in]]
            x = ins[2] if opname == "TRANSPOSE_CONV" else ins[0]
            s_x = act(x)[0]
            if opname == "FULLY_CONNECTED" and not per_channel_fc:
                ws = np.full(1, max(float(np.abs(w).max()), 1e-8) / 127, np.float32)
                wq = quantize_array(w, ws[0], 0)
            else:
                red = tuple(a for a in range(w.ndim) if a != axis)
                ws = (np.maximum(np.abs(w).max(axis=red), 1e-8) / 127).astype(np.float32)
                wq = quantize_array(w, ws, 0, axis)
            set_const(ins[w_in], wq, (ws, np.zeros(ws.size, np.int64), axis), INT8)
            done.add(ins[w_in])
            b_in = BIAS[opname]
            if b_in < len(ins) and ins[b_in] in data and ins[b_in] not in done:
                bs = (s_x * ws.astype(np.float64)).astype(np.float32)
                bq = quantize_array(data[ins[b_in]], bs if bs.size > 1 else bs[0], 0, 0, np.int32)
                set_const(ins[b_in], bq, (bs, np.zeros(bs.size, np.int64), 0), INT32)
                done.add(ins[b_in])
        for i in ins:
            if i in data and i not in done:  # another float constant: int8 per tensor
                s, z = asymmetric(float(data[i].min()), float(data[i].max()))
                set_const(i, quantize_array(data[i], s, z), (s, z, 0), INT8)
                params[i] = (s, z)
                done.add(i)
        for o in outs:
            if t[o]["type"] != FLOAT:
                continue
            if opname in SAME_AS_INPUT:
                params[o] = act(ins[SAME_AS_INPUT[opname]])
            elif opname in FIXED_OUTPUT:
                params[o] = FIXED_OUTPUT[opname]
            else:
                act(o)
    q.ops = new_ops
    for i, ten in enumerate(t):
        if ten["type"] == FLOAT and not ten["buffer"]:
            s, z = act(i)
            t[i] = {**ten, "type": INT8, "quant": (s, z, 0)}
    if io == "float":
        _float_io(q, m)
    return q


def _float_io(q: ModelBuilder, m: ModelBuilder) -> None:
    """Float inputs and outputs around the int8 model: ``QUANTIZE`` after each input, ``DEQUANTIZE``
    before each output (the float tensors keep the original names)."""
    ops = []
    for k, i in enumerate(q.inputs):
        qt = q.tensors[i]
        f = q.tensor(qt["name"], qt["shape"])
        qt["name"] += "_int8"
        ops.append(("QUANTIZE", [f], [i], None, b""))
        q.inputs[k] = f
    outs = []
    for o in q.outputs:
        qt = q.tensors[o]
        f = q.tensor(qt["name"], qt["shape"])
        qt["name"] += "_int8"
        q.ops.append(("DEQUANTIZE", [o], [f], None, b""))
        outs.append(f)
    q.ops[:0] = ops
    q.outputs = outs


def int8_feeds(q: ModelBuilder, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Float feeds quantized to the int8 inputs of ``q`` (float inputs are passed as they are)."""
    out = {}
    for i in q.inputs:
        ten = q.tensors[i]
        name = ten["name"]
        if ten["type"] == INT8:
            s, z, _ = ten["quant"]
            out[name] = quantize_array(feeds[name], s, z)
        else:
            out[name] = feeds[name]
    return out

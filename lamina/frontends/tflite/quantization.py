"""TFLite's quantization in Lamina: the real range a quantized tensor covers, the calibration table
derived from a model's own quantization parameters, and LiteRT's tensors dequantized for comparison.

A full-integer TFLite model stores its activations as int8 (or uint8, or int16) with a scale and a
zero point each: ``real = scale * (q - zero_point)``. Lamina imports it to a float ``top`` model (every
activation is its real value; weights and biases dequantized) and remembers, for every ``top`` value
that stands for a quantized TFLite tensor, the range that tensor's integers cover::

    lo = scale * (qmin - zero_point)        hi = scale * (qmax - zero_point)

(``qmin, qmax`` the storage range: -128..127 for int8). :func:`calibration_table` writes those ranges
as a TPU-MLIR calibration table (``threshold = max(-lo, hi)``, ``min = lo``, ``max = hi``), keyed by
the values' location names (``<tensor>``, ``<tensor>_nchw`` for the NCHW copy of an NHWC tensor, the
pre-activation value of an op with a fused activation, ...). Deployed with
``model_deploy --quantize INT8 --asymmetric``, ``import-calibration-table`` gives each tensor
``lo = min(min, 0)``, ``hi = max(max, 0)`` and the lowering the int8 type of scale
``(hi - lo) / 255`` and zero point ``-128 - lo / scale``: exactly TFLite's scale and zero point (a
uint8 tensor becomes int8 with its zero point minus 128, the same real values). Values TFLite never
quantizes — the inner steps of one TFLite op that Lamina writes as several ``top`` ops (RSQRT's square
root, SQUARED_DIFFERENCE's difference, SOFTMAX's scaled logits) — get no entry, so the lowering keeps
them in float between the quantized tensors, as LiteRT's kernels compute them. Symmetric INT8 (no
``--asymmetric``) reads the same table with thresholds: it runs, but on grids up to twice as coarse
as the model's for tensors whose range is not symmetric about 0.

Values are written with every digit (``CalibrationTable.exact``), so the scales read back are the
model's float32 scales exactly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from lamina.dialects.tpu.tables import CalibrationTable

    from .reader import Tensor, TfliteModel

#: the attribute of a ``top.Weight`` holding a quantized constant's real range ``[lo, hi]`` (the INT8
#: lowering quantizes the constant on that grid; :func:`lamina.dialects.tpu.lowering.pattern.constant_qtype`)
QUANT_RANGE_ATTR = "lamina.quant_range"

#: the storage types of quantized activations, with their integer range
QUANT_RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(np.int8): (-128, 127),
    np.dtype(np.uint8): (0, 255),
    np.dtype(np.int16): (-32768, 32767),
}


def is_quantized(t: Tensor) -> bool:
    """Whether ``t`` holds quantized integers (int8/uint8/int16 with a scale)."""
    return t.quant is not None and t.dtype in QUANT_RANGES and t.quant.scale.size > 0


def real_range(t: Tensor) -> tuple[float, float] | None:
    """The real values ``[lo, hi]`` a per-tensor quantized tensor's integers cover (float64, exact
    products of the float32 scale); None for a float tensor, or one quantized per channel."""
    if not is_quantized(t):
        return None
    q = t.quant
    assert q is not None
    if q.scale.size != 1 or q.zero_point.size > 1:
        return None
    s = float(q.scale.reshape(-1)[0])
    zp = int(q.zero_point.reshape(-1)[0]) if q.zero_point.size else 0
    if not (np.isfinite(s) and s > 0):
        return None
    qmin, qmax = QUANT_RANGES[t.dtype]
    return s * (qmin - zp), s * (qmax - zp)


def dequantize_array(t: Tensor, a: np.ndarray) -> np.ndarray:
    """``a``, the integers of quantized tensor ``t``, as their float32 real values (per-tensor or
    per-channel along the quantized dimension)."""
    q = t.quant
    assert q is not None

    def along(v: np.ndarray) -> np.ndarray:
        if v.size > 1 and a.ndim:
            shape = [1] * a.ndim
            shape[q.axis] = -1
            return v.reshape(shape)
        return v.reshape(())

    zp = q.zero_point.astype(np.float64) if q.zero_point.size else np.zeros(1)
    real = (a.astype(np.float64) - along(zp)) * along(q.scale.astype(np.float64))
    return real.astype(np.float32)


def quantize_array(t: Tensor, real: np.ndarray) -> np.ndarray:
    """Real values as the integers of quantized tensor ``t`` (TFLite's QUANTIZE: round half away
    from zero, add the zero point, saturate)."""
    q = t.quant
    assert q is not None
    lo, hi = QUANT_RANGES[t.dtype]

    def along(v: np.ndarray) -> np.ndarray:
        if v.size > 1 and real.ndim:
            shape = [1] * real.ndim
            shape[q.axis] = -1
            return v.reshape(shape)
        return v.reshape(())

    zp = q.zero_point.astype(np.float64) if q.zero_point.size else np.zeros(1)
    v = np.asarray(real, np.float64) / along(q.scale.astype(np.float64))
    r = np.sign(v) * np.floor(np.abs(v) + 0.5) + along(zp)
    return np.clip(np.nan_to_num(r), lo, hi).astype(t.dtype)


def dequantized_dumps(
    model: TfliteModel, dumps: Mapping[str, np.ndarray], keep: Iterable[str] = ()
) -> dict[str, np.ndarray]:
    """LiteRT's tensors of a quantized model as the imported ``top`` model holds them: every
    quantized tensor as its real values, except those in ``keep`` (the model's outputs, which both
    return in the model's own integer type)."""
    tensors = {t.name: t for t in model.tensors}
    kept = set(keep)
    out: dict[str, np.ndarray] = {}
    for k, v in dumps.items():
        t = tensors.get(k)
        if t is not None and k not in kept and is_quantized(t) and np.asarray(v).dtype.kind in "iu":
            out[k] = dequantize_array(t, np.asarray(v))
        else:
            out[k] = v
    return out


def calibration_table(
    module: Any, ranges: Mapping[str, tuple[float, float]], source: str
) -> CalibrationTable | None:
    """The calibration table of a quantized model's ``top`` module (after any optimization: the names
    are read from the module itself), from ``ranges`` (location name → real range, recorded by the
    importer), in network order; None when no float value of the module has a range."""
    from lamina.dialects.tpu.tables import CalibrationTable, TensorStats
    from lamina.ir.constants import holds_constant
    from lamina.ir.naming import result_names
    from lamina.ir.types import FloatType, ShapedType

    table = CalibrationTable(
        comments=[
            f"# derived from the quantization parameters of '{source}' (no calibration run)",
            "# min/max are the real range of each tensor's integers; deploy with --asymmetric to "
            "reproduce the model's zero points",
        ],
        exact=True,
    )
    top_level = [
        op
        for f in module.walk_ops()
        if f.name == "func.func" and f.regions and f.regions[0].blocks
        for op in f.regions[0].blocks[0].ops
    ]
    for op in top_level:  # not inside WHILE/IF regions, which INT8 keeps in float
        if op.dialect_name != "top" or holds_constant(op):
            continue
        for r, name in zip(op.results, result_names(op)):
            rng = ranges.get(name)
            t = r.type
            if rng is None or name in table.thresholds:
                continue
            if not (isinstance(t, ShapedType) and isinstance(t.element_type, FloatType)):
                continue
            lo, hi = rng
            table.thresholds[name] = TensorStats(max(-lo, hi), lo, hi)
    return table if table.thresholds else None

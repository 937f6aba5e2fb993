"""The ``tpu`` dialect: quantized and mode-specific (F32/F16/BF16/INT8) ops whose quantization is
explicit in their types, with bit-exact integer reference execution (the contract every backend
matches: ``docs/tpu.md``).

* :mod:`.quantize` — the arithmetic (requantization by multiplier + right shift, rounding, LUTs);
* :mod:`.ops` — the ops (a ``tpu`` op for every ``top`` op, INT8 forms, ``tpu.Cast``,
  ``tpu.Requant``, ``tpu.Lut``, ``tpu.Weight``);
* :mod:`.transforms` — ``import-calibration-table``, ``convert-top-to-tpu``, ``tpu-canonicalize``;
* :mod:`.runtime` — dequantizing interpreter outputs by the module's types.
"""

from __future__ import annotations

from lamina.ir.context import Dialect, register_dialect
from lamina.passes.registry import register_pass_module

from .ops import ALL_TPU_OPS, INT8_OPS, CastOp, LutOp, RequantOp, TpuOp, WeightOp, tpu_class

TPU = register_dialect(
    Dialect("tpu", ALL_TPU_OPS, description="Quantized / mode-specific ops with bit-exact semantics.")
)

register_pass_module("lamina.dialects.tpu.transforms")

__all__ = [
    "ALL_TPU_OPS",
    "INT8_OPS",
    "TPU",
    "CastOp",
    "LutOp",
    "RequantOp",
    "TpuOp",
    "WeightOp",
    "tpu_class",
]

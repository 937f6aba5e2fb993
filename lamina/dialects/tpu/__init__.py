"""The ``tpu`` dialect: quantized and mode-specific (F32/F16/BF16/INT8) ops whose quantization is
explicit in their types, with bit-exact integer reference execution (the contract every backend
matches: ``docs/tpu.md``).

* :mod:`.quantize` — the arithmetic (requantization by multiplier + right shift, rounding, LUTs);
* :mod:`.ops` — the op registry (a ``tpu`` op for every ``top`` op, ``tpu.Cast``,
  ``tpu.Requant``, ``tpu.Lut``, ``tpu.Weight``); the ops live by family in :mod:`.families`, each
  family with its INT8 form and its lowering pattern;
* :mod:`.capabilities` — what a target runs natively (:data:`~.capabilities.REFERENCE`: this
  dialect's reference target);
* :mod:`.lowering` — the lowering's units: quantized-type policy, per-channel planning, state;
* :mod:`.transforms` — ``import-calibration-table``, ``convert-top-to-tpu``, ``tpu-canonicalize``;
* :mod:`.tables` — the calibration-table and qtable formats.
"""

from __future__ import annotations

from lamina.ir.context import Dialect, register_dialect
from lamina.passes.registry import register_pass_module

from .capabilities import REFERENCE, Capability, TargetCapabilities
from .ops import ALL_TPU_OPS, CastOp, LutOp, RequantOp, TpuOp, WeightOp, tpu_class

TPU = register_dialect(
    Dialect("tpu", ALL_TPU_OPS, description="Quantized / mode-specific ops with bit-exact semantics.")
)

register_pass_module("lamina.dialects.tpu.transforms")

__all__ = [
    "ALL_TPU_OPS",
    "REFERENCE",
    "TPU",
    "Capability",
    "CastOp",
    "LutOp",
    "RequantOp",
    "TargetCapabilities",
    "TpuOp",
    "WeightOp",
    "tpu_class",
]

"""The ``top`` dialect: hardware-independent tensor ops (TPU-MLIR's Top dialect), each with its
definition, verifier, shape inference, numpy reference execution and FLOP count in one place.

Modules by family: :mod:`.io` (Input, Weight, None, Yield), :mod:`.elementwise`, :mod:`.nn`,
:mod:`.tensor`, :mod:`.reduce`, :mod:`.control`, :mod:`.extra` (resize, attention, sequence models,
quantization ...), :mod:`.detection` (NonMaxSuppression, GridSample, RoiAlign), :mod:`.integer`
(integer ops of quantized models), :mod:`.signal` (DFT, STFT, windows, mel filter banks) and
:mod:`.misc` (Unique, CenterCropPad, Col2Im, AffineGrid, MaxUnpool, BitCast, Det).
"""

from __future__ import annotations

from lamina.ir.context import Dialect, register_dialect
from lamina.ir.core import register_canonicalization_module
from lamina.passes.registry import register_pass_module

from .base import TopOp
from .control import CONTROL_OPS
from .detection import DETECTION_OPS
from .elementwise import ELEMENTWISE_OPS
from .extra import EXTRA_OPS
from .integer import INTEGER_OPS
from .interfaces import FlopsInterface, InferShapeInterface
from .io import InputOp, NoneOp, WeightOp, YieldOp
from .misc import MISC_OPS
from .nn import NN_OPS
from .reduce import REDUCE_OPS
from .signal import SIGNAL_OPS
from .tensor import TENSOR_OPS

ALL_OPS: list[type[TopOp]] = [
    InputOp,
    WeightOp,
    NoneOp,
    YieldOp,
    *ELEMENTWISE_OPS,
    *TENSOR_OPS,
    *REDUCE_OPS,
    *NN_OPS,
    *CONTROL_OPS,
    *EXTRA_OPS,
    *DETECTION_OPS,
    *INTEGER_OPS,
    *SIGNAL_OPS,
    *MISC_OPS,
]

TOP = register_dialect(Dialect("top", ALL_OPS, description="Hardware-independent tensor ops (TPU-MLIR Top)."))

# The top passes (top-shape-infer, top-const-fold, top-canonicalize) load on first lookup.
register_pass_module("lamina.dialects.top.transforms")


# The canonicalization patterns (transforms/patterns/, a floor above the ops) register themselves for
# their root op classes when an op is first asked for its patterns.
register_canonicalization_module("top", "lamina.dialects.top.transforms.patterns")

__all__ = [
    "ALL_OPS",
    "TOP",
    "FlopsInterface",
    "InferShapeInterface",
    "InputOp",
    "NoneOp",
    "TopOp",
    "WeightOp",
    "YieldOp",
]

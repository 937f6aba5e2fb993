"""The CPU as a ``model_deploy`` target: what it runs natively (:attr:`CpuTarget.capabilities`, the
reference ``tpu`` target's: every op in every mode, INT8 in the families' integer forms, the int16
forms ``lut16`` / ``wide_input`` / ``wide_sum`` — its int16 x int8 GEMM and ``tpu.Lut16`` templates,
:mod:`.kernels.gemm_int16` — and 4-d activations with per-channel scales along axis 1) and
compiling a ``tpu`` module into a ``.lamina`` file of native code
(:func:`lamina.targets.cpu.compiler.compile_module`)."""

from __future__ import annotations

from typing import Any

from lamina.dialects.tpu.capabilities import REFERENCE, Capability, TargetCapabilities
from lamina.dialects.tpu.lowering.state import DEFAULT_INT_FORMS

from ..base import CompileOptions, CompileResult, Target

__all__ = ["CpuTarget"]

#: the reference target's capabilities (see the module doc), but ``wide_input`` is not among the
#: CPU's default integer forms: its int16 inputs halve a MatMul's rate (``vpdpwssd`` does half the
#: MACs of ``vpdpbusd``) — MiniLM INT8 0.74x of onnxruntime without it, 0.97x with it, for hidden
#: states 0.99405 instead of 0.99515 at 128 padded tokens (benchmarks/RESULTS.md); ``--int_forms
#: default,wide_input`` takes it. For the same reason a MatMul with an int16 operand costs 2 (its
#: own ``i16`` entry, first): the ``lut16`` form then gives an activation read by a MatMul its int16
#: result only in the layers where the accuracy gain pays for it (``Lowering.wide_result``; BERT
#: INT8 0.88x -> 0.72x of onnxruntime, MiniLM kept on int16 in five of six layers)
CAPABILITIES = TargetCapabilities(
    REFERENCE.name,
    (Capability(frozenset({"top.MatMul"}), "INT8", ("i16",), "native", 2.0), *REFERENCE.entries),
    conv_channel_scales=True,
    default_int_forms=[f for f in DEFAULT_INT_FORMS if f != "wide_input"],
)


class CpuTarget(Target):
    """The host CPU (or ``isa``: the host narrowed to ``avx2``/``sse``) as a ``--processor``."""

    kind = "cpu"

    def __init__(self, processor: str = "cpu", isa: str | None = None) -> None:
        self.processor = processor
        self.isa = isa

    @property
    def capabilities(self) -> TargetCapabilities:
        return CAPABILITIES

    def float_cosine(self, mode: str) -> float:
        """0.99999 (as every target) but 0.9999 in F16/BF16: the CPU's float kernels sum in their
        own order (numpy's BLAS sums in another), and rounding every layer's f32 result to a
        2-byte float turns a last-bit difference at a rounding boundary into one unit of the
        2-byte float's; through MiniLM's six layers in BF16 that leaves a cosine of 0.999985."""
        return 0.9999 if mode in ("F16", "BF16") else super().float_cosine(mode)

    def compile(self, module: Any, options: CompileOptions) -> CompileResult:
        from .compiler import compile_module
        from .jit import spec_for

        isa = options.extra.get("isa", self.isa)
        return compile_module(module, options, spec_for(isa))

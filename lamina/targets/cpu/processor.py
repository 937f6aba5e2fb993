"""The CPU as a ``model_deploy`` target: what it runs natively (:attr:`CpuTarget.capabilities`, the
reference ``tpu`` target's: every op in every mode, INT8 in the families' integer forms, but
4-d activations with per-tensor scales (its INT8 conv and elementwise kernels take per-channel
scales along the last axis only), and not the int16 MatMul forms ``lut16`` / ``wide_input``: its
generic templates run their int16 MatMuls bit for bit but ten times slower than its INT8 GEMM, and
``tpu.Lut16`` on the reference executor, so it keeps the 8-bit forms there until it has an int16
GEMM; it takes ``wide_sum``, whose int16 Add/Sub runs on the same generic elementwise template as
its int8 one) and
compiling a ``tpu`` module into a ``.lamina`` file of native code
(:func:`lamina.targets.cpu.compiler.compile_module`)."""

from __future__ import annotations

from typing import Any

from lamina.dialects.tpu.capabilities import REFERENCE, Capability, TargetCapabilities, without_dtype

from ..base import CompileOptions, CompileResult, Target

__all__ = ["CpuTarget"]

#: the reference target's capabilities with ``i16`` for Add/Sub only, 4-d activations per tensor
#: (see the module doc)
CAPABILITIES = TargetCapabilities(
    REFERENCE.name,
    [
        Capability(frozenset({"top.Add", "top.Sub"}), "INT8", ("i8", "u8", "i16"), "native", 1.0),
        *without_dtype(REFERENCE, "i16").entries,
    ],
    conv_channel_scales=False,
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

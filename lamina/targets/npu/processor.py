"""The NPU as a ``model_deploy`` target: what a chip runs natively (:attr:`NpuTarget.capabilities`,
from the chip's dtypes) and compiling a ``tpu`` module into a ``.lamina`` file
(:func:`lamina.targets.npu.compiler.compile_module`)."""

from __future__ import annotations

from typing import Any

from lamina.dialects.tpu.capabilities import ANY_OP, REFERENCE, Capability, TargetCapabilities
from lamina.support.errors import LaminaError, ToolError

from ..base import CompileOptions, CompileResult, Target
from .arch import Chip, load_chip

__all__ = ["NpuTarget", "capabilities_of"]

#: chip compute dtype → quantization mode, and the storage dtype names a Capability lists
_MODES = {
    "int8": ("INT8", ("i8", "u8")),
    "f32": ("F32", ("f32",)),
    "f16": ("F16", ("f16",)),
    "bf16": ("BF16", ("bf16",)),
}


#: ops whose integer form (``int-forms``: softmax, layernorm, attention) the TIU has no command for,
#: while it runs them in float: the NPU keeps them in its float mode (on the TIU, between casts)
#: rather than taking the integer form to the host CPU
_FLOAT_ON_TIU = frozenset({"top.Softmax", "top.LayerNorm", "top.Attention"})


def capabilities_of(chip: Chip) -> TargetCapabilities:
    """What ``chip`` runs natively: with ``int8``, the integer forms of the ``tpu`` families and the
    LUT activations (as the reference interpreter, but Softmax, LayerNorm and Attention, which the
    TIU runs in float only) — on ``i16`` operands too (the int16 forms ``lut16``, ``wide_input``,
    ``wide_sum``: int16 MatMul inputs and results, ``Lut16`` tables, int16 sums) where the chip
    computes in ``int16``; each float dtype it computes in, every op in that mode. 4-d activations
    may carry per-channel scales along axis 1 on every chip (``conv_channel_scales``: the TIU's
    Conv requantizes per output channel, and its Eltwise, Requant and Cast records take per-channel
    parameters along any dim). Costs are cycles per element relative to INT8 (the conv
    throughput ratio; a MatMul with an int16 operand: also its int8 / int16 MatMul rate ratio, so
    that ``lut16`` gives an activation its int16 result only where it pays — ``docs/tpu.md``)."""
    entries: list[Capability] = []
    base = chip.tiu_ops_per_cycle["conv"].get("int8") or max(chip.tiu_ops_per_cycle["conv"].values())
    for dt in chip.dtypes:
        if dt == "int16":
            continue  # a dtype of the INT8 entries below
        mode, names = _MODES[dt]
        cost = base / chip.tiu_ops_per_cycle["conv"][dt]
        if mode == "INT8":
            if "int16" in chip.dtypes:
                names = (*names, "i16")
                # a MatMul with an int16 operand at the chip's int16 MatMul rate (its own entry,
                # first): the ``lut16`` form weighs it per layer against its accuracy gain
                mm = chip.tiu_ops_per_cycle["matmul"]
                entries.append(
                    Capability(
                        frozenset({"top.MatMul"}), "INT8", ("i16",), "native", cost * mm["int8"] / mm["int16"]
                    )
                )
            for c in REFERENCE.entries:
                if c.mode == "INT8":
                    ops = None if c.ops is None else c.ops - _FLOAT_ON_TIU
                    entries.append(Capability(ops, "INT8", names, c.form, cost))
        else:
            entries.append(Capability(ANY_OP, mode, names, "native", cost))
    return TargetCapabilities(chip.name, entries, conv_channel_scales=True)


class NpuTarget(Target):
    """A virtual NPU chip as a ``--processor``."""

    kind = "npu"

    def __init__(self, processor: str, chip_config: str | None = None) -> None:
        try:
            self.chip: Chip = load_chip(chip_config if chip_config else processor)
        except LaminaError as e:
            raise ToolError(str(e)) from None
        self.processor = processor
        self.chip_config = chip_config
        self._caps = capabilities_of(self.chip)

    @property
    def capabilities(self) -> TargetCapabilities:
        return self._caps

    @property
    def modes(self) -> tuple[str, ...]:
        return tuple(_MODES[d][0] for d in ("f32", "f16", "bf16", "int8") if d in self.chip.dtypes)

    def compile(self, module: Any, options: CompileOptions) -> CompileResult:
        from .compiler import compile_module

        return compile_module(module, self.chip, options, chip_config=self.chip_config)

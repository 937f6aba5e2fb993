"""The CPU target's capabilities: the reference's entries, but ``i16`` (the int16 forms) for Add/Sub
only (``wide_sum``; not ``lut16`` / ``wide_input``), and 4-d activations per tensor."""

from __future__ import annotations

from lamina.dialects.tpu import REFERENCE
from lamina.dialects.tpu.capabilities import without_dtype
from lamina.targets.cpu.processor import CpuTarget


def test_cpu_takes_int16_sums_but_not_int16_matmuls() -> None:
    caps = CpuTarget().capabilities
    assert REFERENCE.supports("top.MatMul", "INT8", "i16")
    assert not caps.supports("top.MatMul", "INT8", "i16")
    assert not caps.supports("top.GELU", "INT8", "i16")
    assert caps.supports("top.Add", "INT8", "i16") and caps.supports("top.Sub", "INT8", "i16")
    assert caps.supports("top.Conv", "INT8", "i8")


def test_cpu_keeps_4d_activations_per_tensor() -> None:
    assert REFERENCE.conv_channel_scales and not CpuTarget().capabilities.conv_channel_scales


def test_without_dtype_keeps_the_conv_channel_scales_flag() -> None:
    assert without_dtype(REFERENCE, "i16").conv_channel_scales == REFERENCE.conv_channel_scales

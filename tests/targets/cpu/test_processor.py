"""The CPU target's capabilities: the reference's entries, 4-d activations per tensor."""

from __future__ import annotations

from lamina.dialects.tpu import REFERENCE
from lamina.targets.cpu.processor import CpuTarget


def test_cpu_takes_the_reference_forms_but_not_per_channel_4d_activations() -> None:
    caps = CpuTarget().capabilities
    assert caps.entries == REFERENCE.entries
    assert REFERENCE.conv_channel_scales and not caps.conv_channel_scales

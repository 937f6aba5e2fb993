"""The CPU target's capabilities: the reference's — every integer form, the int16 ones (``lut16``,
``wide_input``, ``wide_sum``: its int16 GEMM and ``tpu.Lut16`` templates) and per-channel 4-d
activations included — with ``wide_input`` left out of its default integer forms."""

from __future__ import annotations

from lamina.dialects.tpu import REFERENCE
from lamina.dialects.tpu.capabilities import without_dtype
from lamina.targets.cpu.processor import CpuTarget


def test_cpu_takes_the_int16_forms() -> None:
    caps = CpuTarget().capabilities
    for name in ("top.MatMul", "top.GELU", "top.Add", "top.Sub"):
        assert caps.supports(name, "INT8", "i16"), name
    assert caps.form("top.GELU", "INT8") == "lut"
    assert caps.supports("top.Conv", "INT8", "i8")
    assert [(c.ops, c.mode, c.dtypes, c.form) for c in caps.entries[1:]] == [
        (c.ops, c.mode, c.dtypes, c.form) for c in REFERENCE.entries
    ]


def test_cpu_int16_matmul_input_costs_twice_an_int8_one() -> None:
    """The CPU's int16 x int8 products (``vpdpwssd``) do half the MACs of ``vpdpbusd``: its
    ``i16`` MatMul entry costs 2 (the ``lut16`` form's int16 results are then taken per layer,
    ``Lowering.wide_result``); other ops and the reference target: no extra cost."""
    caps = CpuTarget().capabilities
    assert caps.wide_input_cost("top.MatMul") == 2.0
    assert caps.cost("top.MatMul", "INT8", "i8") == caps.cost("top.Conv", "INT8", "i8") == 1.0
    assert caps.wide_input_cost("top.Add") == 1.0
    assert REFERENCE.wide_input_cost("top.MatMul") == 1.0
    assert without_dtype(caps, "i16").wide_input_cost("top.MatMul") == 1.0


def test_cpu_takes_per_channel_4d_activations() -> None:
    assert REFERENCE.conv_channel_scales and CpuTarget().capabilities.conv_channel_scales


def test_without_dtype_keeps_the_conv_channel_scales_flag() -> None:
    assert without_dtype(REFERENCE, "i16").conv_channel_scales == REFERENCE.conv_channel_scales


def test_cpu_default_int_forms_leave_out_wide_input() -> None:
    """``--int_forms default`` on the CPU: the lowering's defaults but ``wide_input`` (slow here);
    ``default,wide_input`` asks for it; the reference target keeps the lowering's defaults."""
    from lamina.dialects.tpu.lowering.state import DEFAULT_INT_FORMS, parse_int_forms

    caps = CpuTarget().capabilities
    assert caps.default_int_forms == frozenset(DEFAULT_INT_FORMS) - {"wide_input"}
    assert parse_int_forms("default", caps.default_int_forms) == caps.default_int_forms
    assert "wide_input" in parse_int_forms("default,wide_input", caps.default_int_forms)
    assert REFERENCE.default_int_forms is None
    assert caps.with_conv_channel_scales(False).default_int_forms == caps.default_int_forms
    assert without_dtype(caps, "i16").default_int_forms == caps.default_int_forms

"""The CPU target's kernel templates (:mod:`.abi`: the contract) and how one is chosen for an op.

:data:`TEMPLATES` lists every template; a module of templates appends its instances on import (the
fast templates register with one import line below). :func:`select` returns the matching template
of the highest priority; the generic ones (priority 0, :mod:`.generic`, :mod:`.generic_conv`) run
every op they match in all modes, and the reference template (priority -100, :mod:`.generic_ref`)
matches every op: it calls the op's ``execute`` from the compiled model. :func:`plan_kernel` plans
the op with the selected template, and when a template raises while planning, skips it for the next
one (reported in :attr:`Choice.skipped`) — no op fails to compile because a template lacks a case.

A module of templates defines ``TEMPLATES: list[Template]`` (and imports nothing from this package
but its siblings: :mod:`.abi`, :mod:`.generic_ir`...); importing it below registers them. A fast
template module registers with one import line at the end of this file.
"""

from __future__ import annotations

from . import registry
from .abi import Isa, KernelPlan, Template
from .registry import TEMPLATES, Choice, by_name, candidates, plan_kernel, register, select

__all__ = [
    "TEMPLATES",
    "Choice",
    "Isa",
    "KernelPlan",
    "Template",
    "by_name",
    "candidates",
    "plan_kernel",
    "register",
    "select",
]

# The templates: the generic ones, then the fast ones (one import line each, anywhere in this
# file: the registry takes the TEMPLATES of every imported module of this package).
from . import (  # noqa: F401
    attention_f32,  # (the fused F32 attention)
    attention_int8,  # (the integer Attention and Softmax forms)
    conv_f32,  # (the register-tiled float conv, depthwise and matmul)
    conv_int8_stem,  # (INT8 convs of few input channels as an im2col GEMM: the stems)
    copy_runs,  # (Split, Slice... as copies of contiguous runs)
    depthwise,  # (depthwise convs: INT8 per-plane schedule)
    gemm_int8,
    gemm_int16,  # (int16 x int8 MatMul: the lut16 / wide_input forms; tpu.Lut16)
    generic,
    generic_conv,
    generic_norm,
    generic_ref,
    permute,  # (a Permute keeping inner runs: memcpy per run)
    pool,  # (vectorized max/avg pooling, F32 and INT8)
    quant_cast,  # (the f32 -> 8-bit per-tensor quantizing Cast without a division)
    softmax_f32,  # (the vectorized F32 softmax along any axis)
    winograd_f32,  # (F32 3x3 stride-1 convs as Winograd F(2x2, 3x3))
    winograd_int8,  # (INT8 3x3 stride-1 convs as exact Winograd F(4x4, 3x3))
)

for _t in conv_f32.f32_templates():
    register(_t)

registry._sync()  # the templates imported so far (later imports register on the next lookup)

"""The contract between the CPU target's compiler and its kernel templates.

A kernel template turns one ``tpu`` op (with static shapes) into one LLVM function of the uniform
signature ``void @name(i8** bufs, i64 part, i64 nparts)``: ``bufs`` are the pointers the kernel's
:attr:`KernelPlan.buffers` list, in that order; the kernel does the ``part``-th of ``nparts`` equal
shares of its work (threads call it with their index; ``nparts == 1`` for one thread) and returns.
Every share writes disjoint output bytes; no kernel synchronizes. Scratch (``scratch_bytes``) is per
part: the compiler passes a region of ``nparts * scratch_bytes`` bytes and the kernel uses its
``part``-th slice. Weights are packed at compile time by :meth:`Template.pack` into the layout the
kernel reads (64-byte aligned in the weight section)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Isa:
    """What the code may use: vector width in bytes (64: AVX-512, 32: AVX2, 16: SSE/generic) and
    extensions ('avx512vnni', 'avx512bf16', 'avxvnni', 'fma', 'amx-int8', ...), from the CPU
    the model is compiled for."""

    vector_bytes: int
    features: frozenset[str] = frozenset()

    def has(self, feature: str) -> bool:
        return feature in self.features


@dataclass
class KernelPlan:
    """How one op runs: the LLVM function's name, its buffers (names of the op's operands/results or
    of packed weights, in call order: ``("in", name)``, ``("weight", key)``, ``("out", name)``,
    ``("scratch", None)``), the packed weight arrays by key, per-part scratch bytes, and counts for the
    profile (``macs``, ``bytes``)."""

    symbol: str
    buffers: list[tuple[str, Any]]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    scratch_bytes: int = 0
    macs: int = 0
    bytes: int = 0


class Template(ABC):
    """One kernel template. ``matches(op, isa)`` says whether it can run ``op`` (a lowered ``tpu`` op
    whose operand/result types are static); ``plan(op, symbol, isa)`` returns the :class:`KernelPlan`
    (packing its weights); ``emit(module, plan, op, isa)`` adds ``@plan.symbol`` to the llvmlite
    ``ir.Module``. ``priority``: the highest-priority matching template wins (generic ones 0, fast
    ones 10)."""

    name: str = "template"
    priority: int = 0
    #: False (declared in the template's own class): ``emit`` reads the op's constants and the
    #: plan's weights for their types and shapes only, never their values, so same-shaped kernels
    #: of other weights share one function (:mod:`.codekey`)
    code_reads_constants: bool = True

    @abstractmethod
    def matches(self, op: Any, isa: Isa) -> bool: ...

    @abstractmethod
    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan: ...

    @abstractmethod
    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None: ...

    def code_key(self, op: Any, plan: KernelPlan, isa: Isa) -> Any:
        """A hashable key of what ``emit`` makes of ``op`` and ``plan`` beyond the plan's structure
        (which :func:`.codekey.code_key` adds): kernels of equal keys get one function. Read only
        where the template's own class defines it (a subclass re-declares it: it may emit other
        code than its parent). None (this default): the compiler's default key applies — the op's
        kernel region and the plan's weights by content (:mod:`.codekey`)."""
        return None

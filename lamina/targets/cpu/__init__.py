"""The CPU target: ``tpu`` modules compiled to native code through LLVM (llvmlite).

Levels: ``tpu`` → the ``cpu`` kernel level (:mod:`.dialect`: one ``cpu.kernel`` per planned kernel,
its template, symbol, packed weights and arena offsets; passes in :mod:`.lowering`) → LLVM IR
(:mod:`.codegen`: each kernel by its template, :mod:`.kernels`; one entry point for the model) →
machine code for the host CPU (:mod:`.jit`) in a ``.lamina`` file (:mod:`.compiler`), run by
:mod:`.runtime` with a persistent thread pool (:mod:`.threads`). See ``docs/cpu.md``.

As a target package (:mod:`lamina.targets.base`): ``PROCESSORS`` is ``("cpu",)``, ``target()`` gives
the :class:`~.processor.CpuTarget`, ``load()`` loads a compiled file (``threads=N``, default 1).
"""

from __future__ import annotations

from typing import Any

#: the ``--processor`` names this target compiles for
PROCESSORS: tuple[str, ...] = ("cpu",)


def target(processor: str = "cpu", isa: str | None = None) -> Any:
    """The CPU target (``isa``: None/``host``, or the host narrowed to ``avx2`` / ``sse``)."""
    from .processor import CpuTarget

    return CpuTarget(processor, isa)


def load(model: Any, path: str, threads: int = 1) -> Any:
    """A compiled CPU model, ready to run with ``threads`` threads."""
    from .runtime import load_cpu_model

    return load_cpu_model(model, path, threads)

"""The CPU target's passes, registered for pipelines and ``lamina-opt`` (imported on the first lookup
of a pass name): ``convert-tpu-to-cpu``, ``cpu-arena-alloc`` (see :mod:`lamina.targets.cpu.lowering`)."""

from __future__ import annotations

from . import dialect, lowering  # noqa: F401

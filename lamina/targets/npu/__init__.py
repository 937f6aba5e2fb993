"""The virtual NPU target: chip descriptions (:mod:`.arch`), the ISA (:mod:`.isa`), the TIU arithmetic
(:mod:`.tiu`), the simulator (:mod:`.simulator`), and the compiler from ``tpu`` to command buffers
with its runtime (:mod:`.target`).

As a target package (:mod:`lamina.targets.base`): ``PROCESSORS`` are the shipped chips, ``target()``
gives the :class:`~.target.NpuTarget` of a chip (or of a user's ``chip_config`` file), ``load()`` runs a
compiled ``.lamina`` model on the simulator.
"""

from __future__ import annotations

from typing import Any

from .arch import shipped_chips

#: the ``--processor`` names this target compiles for: the shipped chips
PROCESSORS: tuple[str, ...] = shipped_chips()


def target(processor: str, chip_config: str | None = None) -> Any:
    """The NPU target for a shipped chip, or for the chip described by ``chip_config``."""
    from .processor import NpuTarget

    return NpuTarget(processor, chip_config)


def load(model: Any, path: str, chip_config: str | None = None) -> Any:
    """A compiled NPU model, ready to run on the simulator."""
    from .runtime import load_npu_model

    return load_npu_model(model, path, chip_config)

"""Lamina's targets (floor 6): one package per target, plus what they share — the plug-in interface
(:mod:`lamina.targets.base`), the ``.lamina`` model file (:mod:`lamina.targets.container`) and the
profile format (:mod:`lamina.targets.profile`). Importing this package makes the targets' dialects
and passes loadable by name (each on first use)."""

from lamina.ir.context import register_dialect_module
from lamina.passes.registry import register_pass_module

register_dialect_module("npu", "lamina.targets.npu.dialect")
register_dialect_module("cpu", "lamina.targets.cpu.dialect")
register_pass_module("lamina.targets.npu.passes")
register_pass_module("lamina.targets.cpu.passes")

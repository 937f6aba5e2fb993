"""Passes and pass managers (MLIR's pass infrastructure).

* :class:`Pass` with :class:`Option` s and :class:`Statistic` s; :func:`register_pass`.
* :class:`PassManager` (``PassManager.parse("builtin.module(func.func(cse))", ctx)``), nested
  :class:`OpPassManager` s, IR printing, timing, statistics, verification after each pass and crash
  reproducers.
"""

from lamina.passes.manager import ANY, OpPassManager, PassManager
from lamina.passes.pass_ import Option, Pass, PassOptionError, Statistic
from lamina.passes.pipeline import PipelineError
from lamina.passes.registry import (
    format_pass_list,
    get_pass,
    list_passes,
    register_pass,
    register_pass_module,
)

__all__ = [
    "ANY",
    "OpPassManager",
    "Option",
    "Pass",
    "PassManager",
    "PassOptionError",
    "PipelineError",
    "Statistic",
    "format_pass_list",
    "get_pass",
    "list_passes",
    "register_pass",
    "register_pass_module",
]

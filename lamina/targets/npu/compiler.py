"""The NPU compiler: a ``tpu`` module to a ``.lamina`` model (being built: issue 10)."""

from __future__ import annotations

from typing import Any

from lamina.support.errors import ToolError

from ..base import CompileOptions, CompileResult
from .arch import Chip


def compile_module(
    module: Any, chip: Chip, options: CompileOptions, chip_config: str | None = None
) -> CompileResult:
    raise ToolError(f"compiling for the NPU ({chip.name}) is not built yet")

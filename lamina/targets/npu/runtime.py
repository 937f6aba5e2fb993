"""Running a compiled NPU model on the simulator (being built: issue 10)."""

from __future__ import annotations

from typing import Any

from lamina.support.errors import LaminaError


def load_npu_model(model: Any, path: str, chip_config: str | None = None) -> Any:
    raise LaminaError(f"'{path}': running NPU models is not built yet")

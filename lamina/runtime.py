"""Run compiled models: ``.lamina`` files written by ``model_deploy --model M.lamina`` (or
``M.bmodel``) for any target.

    import lamina.runtime as rt

    m = rt.load("resnet18_int8.lamina")          # checks the whole file first
    m.input_names, m.output_names                # the model's tensors, in order
    outs = m.run({"input": x})                   # outputs by name, dequantized to float32
    outs = m.run([x])                            # (or the arrays in input order, or one array)
    outs = m.run({"input": x}, profile="trace.json")   # + a Chrome trace and trace.summary.json
    m.last_profile["mac_utilization"]

A truncated, corrupted or foreign file, an option the model's target does not take, inputs of the
wrong shape or a profile path that is the model file itself raise
:class:`~lamina.support.errors.LaminaError` naming the file, the option or the input.
"""

from __future__ import annotations

import os
from typing import Any

from lamina.support.errors import LaminaError
from lamina.targets.base import CompiledModel, is_model_file, load_model_file

__all__ = ["CompiledModel", "LaminaError", "is_model_file", "load"]


def load(path: str | os.PathLike[str], **options: Any) -> CompiledModel:
    """The compiled model in ``path`` (a ``.lamina`` file, whatever its extension), loaded by its
    target's runtime. ``options`` go to the target: ``threads=N`` for the CPU target; ``chip_config``
    (a chip JSON file) for an NPU model compiled for a user's chip."""
    if not isinstance(path, (str, os.PathLike)):
        raise LaminaError(f"load: expected a path (str or os.PathLike), got {type(path).__name__}")
    return load_model_file(path, **options)

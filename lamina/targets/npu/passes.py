"""The NPU's passes, registered for pipelines and ``lamina-opt`` (imported on the first lookup of a
pass name): ``convert-tpu-to-npu``, ``npu-partition``, ``npu-layer-group``, ``npu-slice``, ``npu-schedule``,
``npu-lmem-alloc``, ``npu-address-assign`` (see :mod:`lamina.targets.npu.compiler`)."""

from __future__ import annotations

from . import conversion, dialect  # noqa: F401
from .transforms import address, layer_group, local, partition  # noqa: F401

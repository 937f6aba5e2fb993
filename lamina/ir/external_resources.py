"""External resource files: where ``dense_resource`` blobs live when they are not in the text.

Like MLIR's resource handlers, the IR does not know the file format: a provider registered under a
module attribute name reads the blobs a parsed module asks for from the file that attribute names,
and writes them when the printer is asked for external resources. The one provider today is the
``.npz`` weight file (:mod:`lamina.support.weights`, under ``lamina.weight_file``), registered
below; a target with its own weight format registers another.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from lamina.ir.attributes import (
    ResourceBlob,
    ResourceError,
    ResourceHandle,
    StringAttr,
    element_type_to_dtype,
)
from lamina.ir.core import Operation
from lamina.ir.types import ShapedType
from lamina.support.weights import NPZ_WEIGHTS, WEIGHT_FILE_ATTR

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "DEFAULT_ATTR",
    "ExternalResources",
    "load_external_resources",
    "provider",
    "register_external_resources",
]


class ExternalResources(Protocol):
    """A file format holding resource blobs. Problems are ``ValueError`` with the user's message."""

    def load(
        self, path: str, name: str, wanted: Mapping[str, tuple[np.dtype, int, str]]
    ) -> dict[str, tuple[int, Callable[[], np.ndarray]]]:
        """Check that ``path`` (written ``name`` in the module) has a blob for each key of
        ``wanted`` (numpy dtype, element count, type text); each key's alignment and lazy loader."""
        ...

    def save(self, path: str, blobs: Mapping[str, Any], alignments: Mapping[str, int]) -> None:
        """Write ``blobs`` (arrays or bytes) with their alignments to ``path``."""
        ...


_PROVIDERS: dict[str, ExternalResources] = {}

#: The attribute the printer records the external file under (``print_operation(resources="external")``).
DEFAULT_ATTR = WEIGHT_FILE_ATTR


def register_external_resources(attr: str, provider: ExternalResources) -> None:
    """Read and write blobs through ``provider`` for modules carrying the attribute ``attr``."""
    _PROVIDERS[attr] = provider


def provider(attr: str = DEFAULT_ATTR) -> ExternalResources:
    return _PROVIDERS[attr]


def load_external_resources(
    module: Operation, filename: str, handles: Mapping[str, ResourceHandle], types: Mapping[str, ShapedType]
) -> tuple[str, str] | None:
    """Attach the blobs of ``handles`` still without one from the file a registered attribute of
    ``module`` names (relative paths against ``filename``'s directory), then drop the attribute.

    Returns None, or ``(attribute, message)`` for a problem (the caller locates it)."""
    for attr, prov in _PROVIDERS.items():
        wf = module.attributes.get(attr)
        if wf is None:
            continue
        if not isinstance(wf, StringAttr):
            return attr, f"'{attr}' must be a string"
        path = wf.value
        if not os.path.isabs(path) and filename and not filename.startswith("<"):
            path = os.path.join(os.path.dirname(os.path.abspath(filename)), path)
        missing = {k: h for k, h in handles.items() if h.blob is None}
        wanted = {}
        for key in missing:
            t = types[key]
            wanted[key] = (element_type_to_dtype(t.element_type), t.num_elements, str(t))
        try:
            blobs = prov.load(path, wf.value, wanted)
        except ValueError as e:
            return attr, str(e)
        for key, h in missing.items():
            align, load = blobs[key]
            h.blob = ResourceBlob(None, align, _resource_errors(load))
        del module.attributes[attr]
    return None


def _resource_errors(load: Callable[[], np.ndarray]) -> Callable[[], np.ndarray]:
    """``load``, its problems raised as :class:`ResourceError` (what a blob's user catches)."""

    def checked() -> np.ndarray:
        try:
            return load()
        except ValueError as e:
            raise ResourceError(str(e)) from None

    return checked


register_external_resources(WEIGHT_FILE_ATTR, NPZ_WEIGHTS)

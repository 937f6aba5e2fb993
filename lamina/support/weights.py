"""The external weight file: the ``.npz`` a ``.mlir`` names with the module attribute
``lamina.weight_file`` to hold the blobs of its ``dense_resource`` attributes.

A file format, so it lives here and not in ``lamina/ir`` (which knows only MLIR text): the IR reads
and writes such files through its external-resource hook (:mod:`lamina.ir.external_resources`),
where :data:`NPZ_WEIGHTS` is registered under :data:`WEIGHT_FILE_ATTR`. Nothing here knows IR
types: a blob is checked against the numpy dtype, element count and type text it is asked for.

Every check reads only the ``.npy`` headers (the file's dtype and shape against the attribute's
type); the data is read when a blob is first used, and checked again then (the file may have changed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from lamina.support.fileio import save_npz
from lamina.support.lazy import lazy_import

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy_import("numpy", globals(), "np")

#: The module attribute naming the weight file (resolved against the ``.mlir``'s directory).
WEIGHT_FILE_ATTR = "lamina.weight_file"
#: The member holding each blob's alignment (JSON, as uint8 bytes).
RESOURCE_META_KEY = "__lamina_resource_alignments__"

#: What a blob must hold: the numpy dtype of its element type, its element count, and the type's
#: text (for messages).
Wanted = tuple["np.dtype", int, str]


class NpzWeights:
    """Reads and writes the ``.npz`` weight file; errors are ``ValueError`` with the message the
    user sees (the parser locates it at the ``lamina.weight_file`` attribute)."""

    def load(
        self, path: str, name: str, wanted: Mapping[str, Wanted]
    ) -> dict[str, tuple[int, Callable[[], np.ndarray]]]:
        """Open ``path`` (written ``name`` in the module) and check, for each key of ``wanted``, that
        the file has a blob that can hold it; returns each key's alignment and lazy loader."""
        if not os.path.exists(path):
            raise ValueError(f"weight file '{name}' not found (looked for '{path}')")
        try:
            with open(path, "rb") as f:
                magic = f.read(4)
        except OSError as e:
            raise ValueError(f"cannot read weight file '{name}': {e.strerror or e}") from None
        if magic not in (b"PK\x03\x04", b"PK\x05\x06"):
            raise ValueError(f"weight file '{name}' is not an .npz file (it is not a zip archive)")
        try:
            npz = np.load(path, allow_pickle=False)
            keys = set(npz.files)
        except Exception as e:
            raise ValueError(f"weight file '{name}' is not a valid .npz file: {e}") from None
        align: dict[str, int] = {}
        if RESOURCE_META_KEY in keys:
            try:
                align = json.loads(bytes(npz[RESOURCE_META_KEY]).decode())
            except ValueError:
                align = {}
        out: dict[str, tuple[int, Callable[[], np.ndarray]]] = {}
        for key, want in wanted.items():
            if key not in keys:
                raise ValueError(f"resource '{key}' not found in weight file '{name}'")
            try:
                found = _member_header(npz, key)
            except Exception as e:
                raise ValueError(f"weight file '{name}': cannot read '{key}': {e}") from None
            problem = blob_mismatch(found[0], found[1], want)
            if problem:
                raise ValueError(f"weight file '{name}': '{key}' {problem}")
            out[key] = (int(align.get(key, 16)), _loader(npz, key, name, want))
        return out

    def save(self, path: str, blobs: Mapping[str, Any], alignments: Mapping[str, int]) -> None:
        """Write ``blobs`` (arrays, or raw bytes kept as uint8) and their alignments to ``path``
        atomically."""
        arrays: dict[str, np.ndarray] = {}
        for key, d in blobs.items():
            if isinstance(d, np.ndarray):
                arrays[key] = d
            else:
                arrays[key] = np.frombuffer(bytes(d) if not isinstance(d, bytes) else d, dtype=np.uint8)
        meta = json.dumps(dict(alignments))
        arrays[RESOURCE_META_KEY] = np.frombuffer(meta.encode(), dtype=np.uint8)
        save_npz(path, arrays)


#: The provider registered for :data:`WEIGHT_FILE_ATTR`.
NPZ_WEIGHTS = NpzWeights()


def _member_header(npz: Any, key: str) -> tuple[np.dtype, tuple[int, ...]]:
    """dtype and shape of one array of an open ``.npz`` from its ``.npy`` header (no data read)."""
    with npz.zip.open(key + ".npy") as f:
        fmt = np.lib.format
        major, _ = fmt.read_magic(f)
        read = fmt.read_array_header_1_0 if major == 1 else fmt.read_array_header_2_0
        shape, _, dtype = read(f)
    return dtype, shape


def blob_mismatch(dtype: np.dtype, shape: tuple[int, ...], wanted: Wanted) -> str:
    """Why an array of ``dtype``/``shape`` cannot hold what ``wanted`` describes (empty when it can).

    A blob may also be raw bytes (uint8, as written for byte blobs), an opaque ``V<n>`` dtype of the
    right item size (how numpy stores bf16/f8 arrays) or the unsigned integer of the element's width
    (how ``model_deploy`` writes f16/bf16 weights: their bit patterns) holding exactly the type's
    bytes."""
    want, count, type_text = wanted
    n = 1
    for d in shape:
        n *= d
    if dtype == want:
        if n != count:
            return f"has shape {tuple(shape)} ({n} elements), expected {count} elements for '{type_text}'"
        return ""
    raw = dtype == np.uint8 or (dtype.kind in "Vu" and dtype.itemsize == want.itemsize)
    if raw and n * dtype.itemsize == count * want.itemsize:
        return ""
    return f"has dtype {dtype} and shape {tuple(shape)}, expected dtype {want} ({count} elements) for '{type_text}'"


def _loader(npz: Any, key: str, name: str, wanted: Wanted) -> Callable[[], np.ndarray]:
    def load() -> np.ndarray:
        try:
            a = npz[key]
        except Exception as e:
            raise ValueError(f"weight file '{name}': cannot read '{key}': {e}") from None
        problem = blob_mismatch(a.dtype, a.shape, wanted)
        if problem:  # the file changed since it was parsed
            raise ValueError(f"weight file '{name}': '{key}' {problem}")
        return a

    return load

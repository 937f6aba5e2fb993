"""Calibration samples: ``--dataset DIR`` / ``--data_list FILE`` / ``--input_num N`` as TPU-MLIR reads them.

A sample is one of
- an image (jpg, jpeg, png, bmp, ...) for a single-input model, preprocessed with the ``top.Input``
  op's attributes (mean, scale, pixel_format, resize_dims, ...) by :mod:`lamina.frontends.preprocess`;
- an ``.npz`` holding every input by name (a single array feeds a single-input model);
- an ``.npy`` for a single-input model;
- in a data list, one line per sample with comma-separated files (image or ``.npy``), one per input.

``--dataset DIR`` takes the directory's files with those extensions, sorted by name; ``--data_list``
takes the lines of a text file (relative paths are relative to the list's directory); ``--input_num``
keeps the first N (0: all). Every problem raises :class:`DatasetError` with a message naming the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
DATA_EXTS = (*IMAGE_EXTS, ".npz", ".npy")


class DatasetError(Exception):
    """A missing or unreadable dataset, or a sample that does not fit the model."""


def list_samples(dataset: str | None = None, data_list: str | None = None, input_num: int = 0) -> list[str]:
    """The sample entries (file paths, or comma-separated paths for multi-input models)."""
    if dataset is None and data_list is None:
        raise DatasetError("no calibration data: give --dataset DIR or --data_list FILE")
    entries: list[str] = []
    if data_list is not None:
        if not os.path.isfile(data_list):
            raise DatasetError(f"data list '{data_list}' does not exist")
        base = os.path.dirname(os.path.abspath(data_list))
        with open(data_list, "rb") as fb:
            raw = fb.read()
        try:
            if b"\0" in raw:
                raise UnicodeDecodeError("utf-8", raw, raw.index(b"\0"), raw.index(b"\0") + 1, "NUL byte")
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            line_no = raw[: e.start].count(b"\n") + 1
            raise DatasetError(
                f"data list '{data_list}' is not a text file (byte 0x{raw[e.start]:02x} on line {line_no}); "
                "expected one sample path per line"
            ) from None
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = [p.strip() for p in line.split(",")]
            parts = [p if os.path.isabs(p) else os.path.join(base, p) for p in parts]
            entries.append(",".join(parts))
        if not entries:
            raise DatasetError(f"data list '{data_list}' lists no samples")
    else:
        assert dataset is not None
        if not os.path.exists(dataset):
            raise DatasetError(f"dataset '{dataset}' does not exist")
        if not os.path.isdir(dataset):
            raise DatasetError(f"dataset '{dataset}' is not a directory")
        names = sorted(
            n
            for n in os.listdir(dataset)
            if os.path.splitext(n)[1].lower() in DATA_EXTS and os.path.isfile(os.path.join(dataset, n))
        )
        if not names:
            raise DatasetError(
                f"dataset '{dataset}' has no images (jpg, png, ...) or .npz/.npy files to calibrate with"
            )
        entries = [os.path.join(dataset, n) for n in names]
    if input_num < 0:
        raise DatasetError(f"--input_num must be >= 0, got {input_num}")
    if input_num:
        entries = entries[:input_num]
    return entries


@dataclass
class SampleLoader:
    """Turns sample entries into input dicts checked against a model's signature."""

    input_names: list[str]
    input_shapes: list[tuple[int, ...] | None]
    input_dtypes: list[np.dtype]
    configs: list[Any] = field(default_factory=list)  # PreprocessConfig per input

    @classmethod
    def for_module(cls, module: Any) -> SampleLoader:
        from lamina.frontends.model_io import input_ops, module_signature
        from lamina.frontends.preprocess import PreprocessConfig

        sig = module_signature(module)
        cfgs = [PreprocessConfig.from_input_op(op) for op in input_ops(module)]
        return cls(list(sig.input_names), list(sig.input_shapes), list(sig.input_dtypes), cfgs)

    def _image(self, path: str, i: int) -> np.ndarray:
        from lamina.frontends.preprocess import PreprocessConfig, preprocess_image, read_image
        from lamina.support.errors import ToolError

        shape = self.input_shapes[i]
        if shape is None:
            raise DatasetError(
                f"input '{self.input_names[i]}' has no static shape; cannot feed image '{path}'"
            )
        cfg = self.configs[i] if i < len(self.configs) else PreprocessConfig()
        try:
            return preprocess_image(read_image(path, cfg.pixel_format, "calibration sample"), cfg, shape)
        except ToolError as e:
            raise DatasetError(f"{path}: {e}") from None

    def _array_file(self, path: str) -> dict[str, np.ndarray]:
        from lamina.frontends.model_io import load_npz
        from lamina.support.errors import ToolError

        try:
            return load_npz(path, "calibration sample")
        except ToolError as e:
            raise DatasetError(str(e)) from None

    def load(self, entry: str) -> dict[str, np.ndarray]:
        files = [p for p in entry.split(",") if p]
        n_in = len(self.input_names)
        arrays: dict[str, np.ndarray] = {}
        if len(files) == 1 and files[0].lower().endswith(".npz"):
            arrays = self._array_file(files[0])
            if n_in == 1 and len(arrays) == 1 and self.input_names[0] not in arrays:
                arrays = {self.input_names[0]: next(iter(arrays.values()))}
        else:
            if len(files) != n_in:
                raise DatasetError(
                    f"sample '{entry}' gives {len(files)} file(s) but the model has {n_in} input(s) "
                    f"({', '.join(self.input_names)}); use one .npz per sample or one file per input"
                )
            for i, (f, name) in enumerate(zip(files, self.input_names)):
                if not os.path.exists(f):
                    raise DatasetError(f"calibration sample '{f}' does not exist")
                ext = os.path.splitext(f)[1].lower()
                if ext in IMAGE_EXTS:
                    arrays[name] = self._image(f, i)
                elif ext in (".npy", ".npz"):
                    arrays[name] = next(iter(self._array_file(f).values()))
                else:
                    raise DatasetError(f"calibration sample '{f}' is not an image, .npy or .npz file")
        return self.check(arrays, entry)

    def check(self, arrays: dict[str, np.ndarray], source: str) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        missing = [n for n in self.input_names if n not in arrays]
        if missing:
            raise DatasetError(
                f"{source}: missing input(s) {', '.join(repr(m) for m in missing)} "
                f"(it has {', '.join(repr(k) for k in arrays) or 'nothing'})"
            )
        for name, shape, dt in zip(self.input_names, self.input_shapes, self.input_dtypes):
            a = np.asarray(arrays[name])
            if shape is not None and tuple(a.shape) != tuple(shape):
                if a.size == int(np.prod(shape)) and a.ndim + 1 == len(shape) and shape[0] == 1:
                    a = a.reshape(shape)  # a sample without its batch dimension
                else:
                    raise DatasetError(
                        f"{source}: input '{name}' has shape {list(a.shape)} but the model expects {list(shape)}"
                    )
            a = a.astype(dt, copy=False)
            if a.size and a.dtype.kind == "f" and not np.isfinite(a).any():
                kinds = "NaN" if np.isnan(a).all() else "inf" if np.isinf(a).all() else "NaN/inf"
                raise DatasetError(
                    f"{source}: input '{name}' is {kinds} everywhere ({a.size} values): a calibration sample "
                    "must hold real data (its statistics would give meaningless 1e-5 thresholds)"
                )
            out[name] = a
        return out

    def iterate(self, entries: Sequence[str]) -> Iterator[dict[str, np.ndarray]]:
        for e in entries:
            yield self.load(e)

"""Test inputs for the tools: flag parsing (``--input_shapes [[1,3,224,224]]``, ``--mean 0,0,0``) and
TPU-MLIR-style image preprocessing.

An image (jpg/png/bmp/..., decoded with Pillow) becomes a model input as TPU-MLIR's preprocess does:

1. convert to ``pixel_format`` (``rgb``, ``bgr``, ``gray``, ``rgba``);
2. resize to ``resize_dims`` (default: the input's own height and width) with bilinear interpolation
   (half-pixel centres, as OpenCV's ``INTER_LINEAR``); with ``keep_aspect_ratio`` scale by the smaller
   ratio and pad with ``pad_value`` (centred for ``pad_type=center``, bottom/right for ``normal``);
3. centre-crop to the input's height and width;
4. ``x = (x - mean) * scale`` per channel;
5. lay out as ``channel_format`` (``nchw`` or ``nhwc``) and repeat over the batch dimension.

``.npy``/``.npz`` test inputs are taken as already preprocessed (as TPU-MLIR does).
"""

from __future__ import annotations

import ast
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lamina.frontends.model_io import Signature, check_inputs, load_npz
from lamina.support.errors import ToolError
from lamina.support.paths import check_input_file

IMAGE_EXTS = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm")
PIXEL_FORMATS = ("rgb", "bgr", "gray", "rgba")
CHANNEL_FORMATS = ("nchw", "nhwc", "none")


# ---- flag parsing -----------------------------------------------------------------------------------


def parse_shapes(text: str) -> list[list[int]]:
    """``[[1,3,224,224],[1,10]]`` (or one shape ``[1,3,224,224]``) → a list of shapes."""
    try:
        v = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        raise ToolError(
            f"--input_shapes: cannot parse '{text}'; expected a list of shapes like [[1,3,224,224],[1,10]]"
        ) from None
    if isinstance(v, (list, tuple)) and all(isinstance(x, int) for x in v):
        v = [v]
    if not isinstance(v, (list, tuple)) or not all(
        isinstance(s, (list, tuple)) and all(isinstance(d, int) and not isinstance(d, bool) for d in s)
        for s in v
    ):
        raise ToolError(
            f"--input_shapes: '{text}' is not a list of integer lists; expected like [[1,3,224,224],[1,10]]"
        )
    for s in v:
        if any(d <= 0 for d in s):
            raise ToolError(f"--input_shapes: dimensions must be positive, got {list(s)}")
    return [list(s) for s in v]


def parse_floats(text: str | None, flag: str) -> list[float] | None:
    """``0.1,0.2,0.3`` or ``[0.1,0.2,0.3]`` → floats (None when not given)."""
    if text is None:
        return None
    s = str(text).strip().strip("[]()")
    try:
        vals = [float(p) for p in s.split(",") if p.strip()]
    except ValueError:
        vals = []
    if not vals or not all(math.isfinite(v) for v in vals):
        raise ToolError(
            f"{flag}: expected comma-separated numbers like 0.5,0.5,0.5 (finite, not nan or inf), got '{text}'"
        )
    return vals


def parse_ints(text: str | None, flag: str) -> list[int] | None:
    if text is None:
        return None
    s = str(text).strip().strip("[]()")
    try:
        vals = [int(p) for p in s.split(",") if p.strip()]
    except ValueError:
        vals = []
    if not vals:
        raise ToolError(f"{flag}: expected comma-separated integers like 256,256, got '{text}'")
    return vals


def parse_names(text: str | None) -> list[str]:
    if not text:
        return []
    return [p.strip() for p in str(text).split(",") if p.strip()]


_DTYPES = {
    "float32": np.float32,
    "f32": np.float32,
    "float": np.float32,
    "float16": np.float16,
    "float64": np.float64,
    "int32": np.int32,
    "int64": np.int64,
    "int8": np.int8,
    "uint8": np.uint8,
    "int16": np.int16,
    "bool": np.bool_,
}


def parse_dtypes(text: str | None) -> list[np.dtype]:
    out = []
    for n in parse_names(text):
        dt = _DTYPES.get(n.lower())
        if dt is None:
            raise ToolError(
                f"--input_types: unknown type '{n}' (expected one of {', '.join(sorted(_DTYPES))})"
            )
        out.append(np.dtype(dt))
    return out


# ---- preprocessing -----------------------------------------------------------------------------------


@dataclass
class PreprocessConfig:
    mean: list[float] | None = None
    scale: list[float] | None = None
    pixel_format: str = "bgr"
    channel_format: str = "nchw"
    resize_dims: list[int] | None = None
    keep_aspect_ratio: bool = False
    pad_value: int = 0
    pad_type: str = "center"

    def validate(self) -> None:
        if self.pixel_format not in PIXEL_FORMATS:
            raise ToolError(
                f"--pixel_format must be one of {', '.join(PIXEL_FORMATS)}, got '{self.pixel_format}'"
            )
        if self.channel_format not in CHANNEL_FORMATS:
            raise ToolError(
                f"--channel_format must be one of {', '.join(CHANNEL_FORMATS)}, got '{self.channel_format}'"
            )
        if self.resize_dims is not None and (len(self.resize_dims) != 2 or min(self.resize_dims) <= 0):
            raise ToolError(f"--resize_dims expects two positive integers 'h,w', got {self.resize_dims}")
        for flag, v in (("--mean", self.mean), ("--scale", self.scale)):
            if v is not None and (len(v) == 0 or not all(math.isfinite(float(x)) for x in v)):
                raise ToolError(
                    f"{flag} must be finite numbers (one per channel, or one for all), got {list(v)}"
                )
        if self.pad_type not in ("center", "normal"):
            raise ToolError(f"pad_type must be 'center' or 'normal', got '{self.pad_type}'")

    @classmethod
    def from_input_op(cls, op: Any) -> PreprocessConfig:
        """The preprocessing described by a ``top.Input`` op's attributes."""
        if op is None:
            return cls()
        a = op.attr
        return cls(
            mean=list(a("mean")) if a("mean") is not None else None,
            scale=list(a("scale")) if a("scale") is not None else None,
            pixel_format=a("pixel_format") or "bgr",
            channel_format=a("channel_format") or "nchw",
            resize_dims=list(a("resize_dims")) if a("resize_dims") is not None else None,
            keep_aspect_ratio=bool(a("keep_aspect_ratio") or 0),
            pad_value=int(a("pad_value") or 0),
            pad_type=a("pad_type") or "center",
        )

    def apply_to_input_op(self, op: Any) -> None:
        """Record this preprocessing on a ``top.Input`` op (as TPU-MLIR does)."""
        from lamina.dialects.top.base import BoolAttr, Floats, I, Ints, S

        p = op.properties
        if self.mean is not None:
            p["mean"] = Floats(self.mean)
        if self.scale is not None:
            p["scale"] = Floats(self.scale)
        p["pixel_format"] = S(self.pixel_format)
        p["channel_format"] = S(self.channel_format)
        if self.resize_dims is not None:
            p["resize_dims"] = Ints(self.resize_dims)
        if self.keep_aspect_ratio:
            p["keep_aspect_ratio"] = BoolAttr(True)
        if self.pad_value:
            p["pad_value"] = I(self.pad_value)
        if self.pad_type != "center":
            p["pad_type"] = S(self.pad_type)


def resize_bilinear(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """Resize an ``HxWxC`` float image with half-pixel-centre bilinear interpolation (no loops)."""
    ih, iw = img.shape[:2]
    if (ih, iw) == (h, w):
        return img.astype(np.float32, copy=False)

    def axis(n_in: int, n_out: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        src = (np.arange(n_out, dtype=np.float64) + 0.5) * (n_in / n_out) - 0.5
        src = np.clip(src, 0.0, n_in - 1)
        lo = np.floor(src).astype(np.int64)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, (src - lo).astype(np.float32)

    y0, y1, fy = axis(ih, h)
    x0, x1, fx = axis(iw, w)
    x = img.astype(np.float32, copy=False)
    top = x[y0] * (1 - fy)[:, None, None] + x[y1] * fy[:, None, None]
    return top[:, x0] * (1 - fx)[None, :, None] + top[:, x1] * fx[None, :, None]


def read_image(path: str, pixel_format: str, what: str = "test input") -> np.ndarray:
    """Decode an image file into an ``HxWxC`` uint8 array in ``pixel_format`` channel order; errors
    name the file as ``what`` (a test input, a calibration sample)."""
    try:
        from PIL import Image
    except ImportError:
        raise ToolError(f"reading the image '{path}' needs Pillow: pip install pillow") from None
    check_input_file(path, what)
    try:
        with Image.open(path) as im:
            mode = {"gray": "L", "rgba": "RGBA"}.get(pixel_format, "RGB")
            arr = np.asarray(im.convert(mode))
    except Exception as e:
        raise ToolError(f"{what} '{path}' is not a readable image: {e}") from None
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if pixel_format == "bgr":
        arr = arr[:, :, ::-1]
    return arr


def preprocess_image(img: np.ndarray, cfg: PreprocessConfig, shape: Sequence[int]) -> np.ndarray:
    """Turn an ``HxWxC`` image (already in ``cfg.pixel_format`` order) into a float32 input of ``shape``."""
    cfg.validate()
    if len(shape) != 4:
        raise ToolError(f"an image can only feed a 4-D input, but the input has shape {list(shape)}")
    nhwc = cfg.channel_format == "nhwc"
    n, c, h, w = (shape[0], shape[3], shape[1], shape[2]) if nhwc else tuple(shape)
    if img.ndim == 2:
        img = img[:, :, None]
    if img.shape[2] != c:
        if c == 1:
            img = img.astype(np.float32).mean(axis=2, keepdims=True)
        elif img.shape[2] == 1:
            img = np.repeat(img, c, axis=2)
        else:
            raise ToolError(
                f"the image has {img.shape[2]} channels ({cfg.pixel_format}) but the input has {c}; "
                f"check --pixel_format"
            )
    rh, rw = cfg.resize_dims or (h, w)
    x = img.astype(np.float32)
    if cfg.keep_aspect_ratio:
        ih, iw = x.shape[:2]
        r = min(rh / ih, rw / iw)
        nh, nw = max(1, round(ih * r)), max(1, round(iw * r))
        resized = resize_bilinear(x, nh, nw)
        x = np.full((rh, rw, c), float(cfg.pad_value), np.float32)
        top, left = ((rh - nh) // 2, (rw - nw) // 2) if cfg.pad_type == "center" else (0, 0)
        x[top : top + nh, left : left + nw] = resized
    else:
        x = resize_bilinear(x, rh, rw)
    if rh < h or rw < w:
        raise ToolError(f"--resize_dims {[rh, rw]} is smaller than the input's height and width {[h, w]}")
    top, left = (rh - h) // 2, (rw - w) // 2
    x = x[top : top + h, left : left + w]
    mean = np.asarray(cfg.mean if cfg.mean is not None else [0.0], np.float32)
    scale = np.asarray(cfg.scale if cfg.scale is not None else [1.0], np.float32)
    for v, flag in ((mean, "--mean"), (scale, "--scale")):
        if v.size not in (1, c):
            raise ToolError(f"{flag} has {v.size} values but the input has {c} channels")
    x = (x - mean) * scale
    if not nhwc:
        x = x.transpose(2, 0, 1)
    return np.ascontiguousarray(np.broadcast_to(x[None], (n, *x.shape)), dtype=np.float32)


def check_test_input_files(test_input: str) -> list[str]:
    """The files of ``--test_input`` (one ``.npz``, or comma-separated images/``.npy``), each checked
    to be a regular file of a supported type, before any work."""
    files = parse_names(test_input)
    if not files:
        raise ToolError("--test_input is empty")
    for f in files:
        ext = os.path.splitext(f)[1].lower()
        if ext == ".npz" and len(files) > 1:
            raise ToolError(f"test input '{f}': an .npz must be the only --test_input file")
        if ext not in (".npz", ".npy", *IMAGE_EXTS):
            raise ToolError(
                f"test input '{f}': unsupported file type '{ext or '(none)'}' (expected .npz, .npy or an image)"
            )
        check_input_file(f, "test input")
    return files


def load_test_inputs(
    test_input: str,
    sig: Signature,
    configs: Sequence[PreprocessConfig],
    input_dtypes: Sequence[np.dtype] = (),
) -> dict[str, np.ndarray]:
    """``--test_input``: one ``.npz`` for all inputs, or comma-separated files (image/``.npy``), one per
    input in order. Returns the inputs keyed by input name, checked against the signature."""
    files = check_test_input_files(test_input)
    if len(files) == 1 and files[0].endswith(".npz"):
        arrays = load_npz(files[0], "test input")
        source = files[0]
    else:
        if len(files) != len(sig.input_names):
            raise ToolError(
                f"--test_input gives {len(files)} file(s) but the model has {len(sig.input_names)} input(s) "
                f"({', '.join(sig.input_names)}); give one file per input or one .npz"
            )
        arrays = {}
        for i, (f, name) in enumerate(zip(files, sig.input_names)):
            ext = os.path.splitext(f)[1].lower()
            if ext == ".npy":
                arrays[name] = next(iter(load_npz(f, "test input").values()))
            elif ext in IMAGE_EXTS:
                shape = sig.input_shapes[i]
                if shape is None:
                    raise ToolError(
                        f"input '{name}' has no static shape; give --input_shapes to feed an image"
                    )
                cfg = configs[i] if i < len(configs) else PreprocessConfig()
                arrays[name] = preprocess_image(read_image(f, cfg.pixel_format), cfg, shape)
        source = ",".join(files)
    if input_dtypes:
        for name, dt in zip(sig.input_names, input_dtypes):
            if name in arrays:
                arrays[name] = np.asarray(arrays[name]).astype(dt)
    return check_inputs(arrays, sig, f"test input '{source}'")

"""Real calibration and test data for the quantization benchmark, all shipped inside PyPI wheels
(nothing is downloaded at run time):

* natural images: scikit-image's sample images (astronaut, chelsea, coffee, rocket, cat, hubble deep
  field, immunohistochemistry, retina, colorwheel, logo, and the grey ones camera, moon, clock, coins,
  brick, grass, gravel, text, page, cell replicated to RGB), as random crops (scale 0.3-1.0 of the
  shorter side, any position), random horizontal flips and bilinear resizes to the model's input size,
  then ImageNet normalisation (``(x/255 - mean) / std``, NCHW float32);
* handwritten digits: scikit-learn's ``load_digits`` (1,797 8x8 images, 0-16 grey levels);
* text: English sentences from the docstrings of Python's standard library, word-tokenised and hashed
  into a BERT-style vocabulary (``[CLS] ... [SEP]`` then padding with ``attention_mask`` 0);
* text pages (for text detectors): those sentences drawn with Pillow's built-in scalable font
  (``ImageFont.load_default(size)``) as lines of varied size, colour and angle over crops of the
  sample images (:func:`text_pages`).

Calibration and test sets never share a crop: they are drawn from separate random streams (``split``),
and the text sets from disjoint sentence ranges. Every function is deterministic for a given seed.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

COLOR_IMAGES = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "cat",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "colorwheel",
    "logo",
)
GREY_IMAGES = ("camera", "moon", "clock", "coins", "brick", "grass", "gravel", "text", "page", "cell")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
_SPLIT_SEED = {"calibration": 1000, "test": 2000}

_images_cache: list[np.ndarray] | None = None


def sample_images() -> list[np.ndarray]:
    """scikit-image's sample images as ``HxWx3`` uint8 RGB arrays (grey ones replicated)."""
    global _images_cache
    if _images_cache is None:
        import skimage.data as d

        out: list[np.ndarray] = []
        for name in COLOR_IMAGES + GREY_IMAGES:
            a = np.asarray(getattr(d, name)())
            if a.dtype == bool:
                a = a.astype(np.uint8) * 255
            if a.ndim == 2:
                a = np.repeat(a[:, :, None], 3, axis=2)
            out.append(np.ascontiguousarray(a[:, :, :3].astype(np.uint8)))
        _images_cache = out
    return _images_cache


def _resize_bilinear(img: np.ndarray, h: int, w: int) -> np.ndarray:
    """Half-pixel-centre bilinear resize of an ``HxWxC`` float image."""
    ih, iw = img.shape[:2]
    ys = np.clip((np.arange(h) + 0.5) * ih / h - 0.5, 0, ih - 1)
    xs = np.clip((np.arange(w) + 0.5) * iw / w - 0.5, 0, iw - 1)
    y0, x0 = np.floor(ys).astype(int), np.floor(xs).astype(int)
    y1, x1 = np.minimum(y0 + 1, ih - 1), np.minimum(x0 + 1, iw - 1)
    fy, fx = (ys - y0)[:, None, None], (xs - x0)[None, :, None]
    top = img[y0][:, x0] * (1 - fx) + img[y0][:, x1] * fx
    bot = img[y1][:, x0] * (1 - fx) + img[y1][:, x1] * fx
    return top * (1 - fy) + bot * fy


def image_crops(n: int, size: int, split: str = "calibration", seed: int = 0) -> np.ndarray:
    """``n`` random crops/flips of the sample images resized to ``size x size``: ``[n, size, size, 3]``
    float32 in [0, 255]. ``split`` ("calibration" or "test") selects an independent random stream."""
    rng = np.random.default_rng(_SPLIT_SEED[split] + seed)
    imgs = sample_images()
    out = np.empty((n, size, size, 3), np.float32)
    for i in range(n):
        img = imgs[(i + (7 if split == "test" else 0)) % len(imgs)]
        h, w = img.shape[:2]
        side = int(min(h, w) * rng.uniform(0.3, 1.0))
        y, x = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        crop = img[y : y + side, x : x + side].astype(np.float32)
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        out[i] = _resize_bilinear(crop, size, size)
    return out


def imagenet_inputs(n: int, size: int, split: str = "calibration", seed: int = 0) -> np.ndarray:
    """Crops normalised as torchvision's ImageNet models expect: ``[n, 3, size, size]`` float32."""
    x = image_crops(n, size, split, seed) / 255.0
    x = (x - np.asarray(IMAGENET_MEAN, np.float32)) / np.asarray(IMAGENET_STD, np.float32)
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2).astype(np.float32))


def yolo_inputs(n: int, size: int, split: str = "calibration", seed: int = 0) -> np.ndarray:
    """Crops scaled as YOLO expects (RGB, ``x / 255``): ``[n, 3, size, size]`` float32."""
    x = image_crops(n, size, split, seed) / 255.0
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2).astype(np.float32))


def digits(
    test_fraction: float = 0.25, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's digits split into (x_train, y_train, x_test, y_test); images ``[N, 1, 8, 8]``
    float32 scaled to [0, 1], labels int64. The split is stratified and fixed by ``seed``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    ds = load_digits()
    x = (ds.images.astype(np.float32) / 16.0)[:, None, :, :]
    y = ds.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=test_fraction, random_state=seed, stratify=y)
    return xtr, ytr, xte, yte


# ---- text ----------------------------------------------------------------------------------------------

_TEXT_MODULES = ("json", "csv", "argparse", "logging", "collections", "email", "http", "unittest",
                 "subprocess", "pathlib", "datetime", "decimal", "fractions", "textwrap", "tarfile",
                 "zipfile", "sqlite3", "calendar", "statistics", "random", "heapq", "shutil")  # fmt: skip


def sentences() -> list[str]:
    """English sentences from standard-library docstrings (deterministic, a few thousand)."""
    import importlib
    import inspect

    out: list[str] = []
    for name in _TEXT_MODULES:
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        docs = [inspect.getdoc(mod) or ""]
        for attr in sorted(dir(mod)):
            obj = getattr(mod, attr, None)
            if attr.startswith("_") or obj is None:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                docs.append(inspect.getdoc(obj) or "")
        for doc in docs:
            for s in re.split(r"(?<=[.!?])\s+", " ".join(doc.split())):
                if 5 <= len(s.split()) <= 60:
                    out.append(s)
    return out


def tokenize(text: str, vocab: int) -> list[int]:
    """Lower-cased words and punctuation hashed (crc32) into ids ``[3, vocab)``; 1=[CLS], 2=[SEP]."""
    return [
        3 + zlib.crc32(t.encode()) % (vocab - 3) for t in re.findall(r"[a-z0-9]+|[^\sa-z0-9]", text.lower())
    ]


def bert_inputs(
    n: int, batch: int, seq: int, vocab: int, split: str = "calibration"
) -> list[list[np.ndarray]]:
    """``n`` samples of ``[input_ids, attention_mask]`` (each ``[batch, seq]`` int64) from real
    sentences; calibration and test use disjoint halves of the sentences."""
    sents = sentences()
    half = len(sents) // 2
    pool = sents[:half] if split == "calibration" else sents[half:]
    rng = np.random.default_rng(_SPLIT_SEED[split])
    order = rng.permutation(len(pool))
    out: list[list[np.ndarray]] = []
    k = 0
    for _ in range(n):
        ids = np.zeros((batch, seq), np.int64)
        mask = np.zeros((batch, seq), np.int64)
        for b in range(batch):
            toks = [*[1, *tokenize(pool[order[k % len(pool)]], vocab)][: seq - 1], 2]
            k += 1
            ids[b, : len(toks)] = toks
            mask[b, : len(toks)] = 1
        out.append([ids, mask])
    return out


def sentence_batches(n: int, batch: int, split: str = "calibration") -> list[list[str]]:
    """``n`` batches of ``batch`` raw sentences (for models with their own tokenizer, e.g. MiniLM's
    WordPiece); the same disjoint halves and random order as :func:`bert_inputs`."""
    sents = sentences()
    half = len(sents) // 2
    pool = sents[:half] if split == "calibration" else sents[half:]
    order = np.random.default_rng(_SPLIT_SEED[split]).permutation(len(pool))
    return [[pool[order[(i * batch + b) % len(pool)]] for b in range(batch)] for i in range(n)]


# ---- text pages (text detectors) ------------------------------------------------------------------


def text_page(rng: np.random.Generator, height: int = 384, width: int = 768) -> np.ndarray:
    """One synthetic text page: a sample-image crop (dimmed or lightened at random, so that text
    contrasts) with up to 14 lines of docstring text down the page of sizes 12-44 px, random colours (dark on light or
    light on dark), angles within +-8 degrees and positions; ``[height, width, 3]`` uint8 RGB."""
    from PIL import Image, ImageDraw, ImageFont

    imgs = sample_images()
    img = imgs[int(rng.integers(len(imgs)))]
    h, w = img.shape[:2]
    ch = int(min(h, w * height / width) * rng.uniform(0.4, 1.0))
    cw = min(int(ch * width / height), w)
    y, x = int(rng.integers(0, h - ch + 1)), int(rng.integers(0, w - cw + 1))
    bg = _resize_bilinear(img[y : y + ch, x : x + cw].astype(np.float32), height, width)
    light = rng.random() < 0.6  # light background, dark text (else the reverse)
    k = rng.uniform(0.3, 0.6)
    bg = bg * k + (255.0 * (1 - k) if light else 0.0)
    page = Image.fromarray(np.clip(bg, 0, 255).astype(np.uint8), "RGB")
    sents = sentences()
    cursor = int(rng.integers(0, height // 8))  # lines go down the page, a few overlapping
    for _ in range(int(rng.integers(4, 15))):
        if cursor >= height:
            break
        size = int(rng.integers(12, 45))
        font = ImageFont.load_default(size)
        text = sents[int(rng.integers(len(sents)))][: int(rng.integers(8, 60))]
        lo, hi = (0, 90) if light else (170, 256)
        colour = tuple(int(c) for c in rng.integers(lo, hi, 3))
        box = font.getbbox(text)
        tw, th = max(box[2] - box[0], 1), max(box[3] - box[1], 1)
        layer = Image.new("L", (tw + 4, th + 4), 0)
        ImageDraw.Draw(layer).text((2 - box[0], 2 - box[1]), text, fill=255, font=font)
        layer = layer.rotate(float(rng.uniform(-8, 8)), expand=True, resample=Image.BILINEAR)
        px = int(rng.integers(-layer.width // 4, max(width - layer.width * 3 // 4, 1)))
        py = cursor
        cursor += int(layer.height * rng.uniform(0.6, 1.3))
        page.paste(Image.new("RGB", layer.size, colour), (px, py), layer)
    return np.asarray(page)


def text_pages(
    n: int, split: str = "calibration", height: int = 384, width: int = 768, seed: int = 0
) -> np.ndarray:
    """``n`` synthetic text pages (:func:`text_page`) preprocessed as PP-OCR's detector expects
    (RGB, ``(x/255 - 0.5) / 0.5``): ``[n, 3, height, width]`` float32. ``split`` ("calibration" or
    "test") selects an independent random stream, so the sets never share a page."""
    rng = np.random.default_rng(_SPLIT_SEED[split] + 31 + seed)
    out = np.empty((n, 3, height, width), np.float32)
    for i in range(n):
        x = text_page(rng, height, width).astype(np.float32) / 255.0
        out[i] = ((x - 0.5) / 0.5).transpose(2, 0, 1)
    return out


def stack(samples: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """Concatenate per-sample input lists along the batch axis (for onnxruntime calibration)."""
    return [np.concatenate([s[i] for s in samples]) for i in range(len(samples[0]))]

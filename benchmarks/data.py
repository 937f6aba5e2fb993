"""Real calibration and test data for the quantization benchmark, all shipped inside PyPI wheels
(nothing is downloaded at run time):

* natural images: scikit-image's sample images (astronaut, chelsea, coffee, rocket, cat, hubble deep
  field, immunohistochemistry, retina, colorwheel, logo, and the grey ones camera, moon, clock, coins,
  brick, grass, gravel, text, page, cell replicated to RGB), as random crops (scale 0.3-1.0 of the
  shorter side, any position), random horizontal flips and bilinear resizes to the model's input size,
  then ImageNet normalisation (``(x/255 - mean) / std``, NCHW float32);
* handwritten digits: scikit-learn's ``load_digits`` (1,797 8x8 images, 0-16 grey levels);
* text: English sentences from the docstrings of Python's standard library, word-tokenised and hashed
  into a BERT-style vocabulary (``[CLS] ... [SEP]`` then padding with ``attention_mask`` 0).

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


def stack(samples: Sequence[Sequence[np.ndarray]]) -> list[np.ndarray]:
    """Concatenate per-sample input lists along the batch axis (for onnxruntime calibration)."""
    return [np.concatenate([s[i] for s in samples]) for i in range(len(samples[0]))]

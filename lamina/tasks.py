"""Task-level comparison of a deployed model's outputs with the float reference's
(``model_deploy --task cls|det|seg|ocr|embed``): what a user of the model reads, not only raw cosine.

Each check turns both output sets into the task's answer and compares the answers; its **score** is
one figure in ``[0, 1]`` (1: the same answer), printed with the details beside the cosine lines and
checked against ``--task_tolerance`` when given:

* ``cls`` — classification logits or probabilities ``[B, K]`` (any trailing ``1`` dims): the top-1
  class per sample and the top-5 overlap. Score: the fraction of samples whose top-1 class agrees.
* ``det`` — an anchor-free YOLO head (YOLOv8/YOLO11 layout) ``[B, 4 + classes, N]`` (or
  ``[B, N, 4 + classes]``): boxes ``cx, cy, w, h`` then per-class scores. Candidates scoring at least
  ``threshold`` (default 0.25) go through class-aware non-maximum suppression (IoU 0.45, at most
  300 boxes); the deployed detections are matched greedily to the reference's, best score first, by
  the highest IoU >= 0.5 with the same class. Score: F1 of the matching, ``2 * matched /
  (reference + deployed)`` (1 when both find nothing); with the mean IoU of the matched boxes.
* ``seg`` — a segmentation map ``[B, C, H, W]``: with ``C > 1`` the arg-max class per pixel, score the
  mean IoU over the classes either map uses; with ``C == 1`` a binary mask — probabilities (every value
  in ``[0, 1]``) at ``threshold`` (default 0.5), logits at 0 — score its IoU.
* ``ocr`` — a text detector's probability map ``[B, 1, H, W]`` (DB heads): the text mask at
  ``threshold`` (default 0.3, the usual DB binarisation) and its text regions (8-connected components
  of at least :data:`MIN_REGION` pixels) matched by mask IoU >= 0.5. Score: the mask IoU.
* ``embed`` — embeddings ``[..., D]``: the cosine of each vector (each row of ``[B, D]``, each token of
  ``[B, S, D]``). Score: the worst cosine.

Only numpy; every function takes plain arrays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_THRESHOLD",
    "MIN_REGION",
    "TASKS",
    "TaskError",
    "TaskReport",
    "boxes_iou",
    "decode_yolo",
    "label_regions",
    "nms",
    "task_check",
    "task_outputs",
]

TASKS = ("cls", "det", "seg", "ocr", "embed")
#: each task's default threshold (det: candidate score; seg: probability; ocr: DB binarisation)
DEFAULT_THRESHOLD = {"det": 0.25, "seg": 0.5, "ocr": 0.3}
#: ocr: text regions smaller than this many pixels are noise, not text
MIN_REGION = 10
NMS_IOU = 0.45
MATCH_IOU = 0.5
MAX_DETECTIONS = 300


class TaskError(ValueError):
    """The outputs do not fit the task (no output of the task's shape, an unknown task...)."""


@dataclass(frozen=True)
class TaskReport:
    """One output's task check: ``score`` in [0, 1] and a one-line ``summary`` of the details."""

    task: str
    output: str
    score: float
    summary: str

    def line(self) -> str:
        return f"task {self.task} [{self.output}]: {self.summary}"


# ---- classification ----------------------------------------------------------------------------


def _rows(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    return a.reshape(1, -1) if a.ndim <= 1 else a.reshape(a.shape[0], -1)


def _fits_cls(a: np.ndarray) -> bool:
    return a.size > 1 and (a.ndim <= 1 or int(np.prod(a.shape[1:])) > 1) and all(d == 1 for d in a.shape[2:])


def _cls(name: str, got: np.ndarray, ref: np.ndarray) -> TaskReport:
    g, r = _rows(got), _rows(ref)
    k = min(5, r.shape[1])
    top1 = np.argmax(g, axis=1) == np.argmax(r, axis=1)
    # top-k by value, ties broken by index (stable): the same rule for both sets
    gk = np.argsort(-g, axis=1, kind="stable")[:, :k]
    rk = np.argsort(-r, axis=1, kind="stable")[:, :k]
    overlap = np.mean([len(set(a) & set(b)) for a, b in zip(gk.tolist(), rk.tolist())])
    n = len(top1)
    cls = f" (class {int(np.argmax(r[0]))})" if n == 1 else ""
    summary = f"top-1 agrees on {int(top1.sum())}/{n} sample(s){cls}, top-{k} overlap {overlap:.2f}/{k}"
    return TaskReport("cls", name, float(top1.mean()), summary)


# ---- detection ---------------------------------------------------------------------------------


def boxes_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of ``a`` ``[n, 4]`` with every box of ``b`` ``[m, 4]`` (``x1, y1, x2, y2``)."""
    a = np.asarray(a, np.float64).reshape(-1, 4)
    b = np.asarray(b, np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0, None), axis=2)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0, None), axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float = NMS_IOU) -> np.ndarray:
    """Class-aware greedy non-maximum suppression: indices kept, best score first (ties by index)."""
    order = np.argsort(-np.asarray(scores, np.float64), kind="stable")
    keep: list[int] = []
    alive = np.ones(len(order), bool)
    for pos, i in enumerate(order):
        if not alive[pos]:
            continue
        keep.append(int(i))
        if len(keep) >= MAX_DETECTIONS:
            break
        rest = order[pos + 1 :]
        same = classes[rest] == classes[i]
        over = boxes_iou(boxes[i : i + 1], boxes[rest])[0] > iou
        alive[pos + 1 :] &= ~(same & over)
    return np.asarray(keep, np.int64)


def decode_yolo(out: np.ndarray, threshold: float) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Per image of an anchor-free YOLO output, the detections after NMS: ``(boxes [n, 4] as
    x1, y1, x2, y2, scores [n], classes [n])``."""
    a = np.asarray(out, np.float64)
    if a.ndim != 3:
        raise TaskError(f"a detection head is [batch, 4 + classes, boxes]; got {list(a.shape)}")
    if a.shape[1] < a.shape[2]:  # channels first: [B, 4 + nc, N]
        a = a.transpose(0, 2, 1)
    if a.shape[2] < 5:
        raise TaskError(
            f"a detection head has 4 box values and at least one class score; got {list(out.shape)}"
        )
    dets = []
    for img in a:
        cls_scores = img[:, 4:]
        classes = np.argmax(cls_scores, axis=1)
        scores = cls_scores[np.arange(len(img)), classes]
        sel = np.nonzero(scores >= threshold)[0]
        cx, cy, w, h = (img[sel, i] for i in range(4))
        boxes = np.stack([cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2], axis=1)
        keep = nms(boxes, scores[sel], classes[sel])
        dets.append((boxes[keep], scores[sel][keep], classes[sel][keep]))
    return dets


def _match(ref: tuple[np.ndarray, ...], got: tuple[np.ndarray, ...]) -> list[float]:
    """IoUs of the reference detections matched to deployed ones (greedy, best reference score first:
    the unmatched deployed box of the same class with the highest IoU >= :data:`MATCH_IOU`)."""
    rb, rs, rc = ref
    gb, _gs, gc = got
    if not len(rb) or not len(gb):
        return []
    ious = boxes_iou(rb, gb)
    ious[rc[:, None] != gc[None, :]] = 0.0
    used = np.zeros(len(gb), bool)
    matched = []
    for i in np.argsort(-rs, kind="stable"):
        cand = np.where(used, 0.0, ious[i])
        j = int(np.argmax(cand))
        if cand[j] >= MATCH_IOU:
            used[j] = True
            matched.append(float(cand[j]))
    return matched


def _det(name: str, got: np.ndarray, ref: np.ndarray, threshold: float) -> TaskReport:
    r_dets, g_dets = decode_yolo(ref, threshold), decode_yolo(got, threshold)
    n_ref = sum(len(d[0]) for d in r_dets)
    n_got = sum(len(d[0]) for d in g_dets)
    ious = [iou for r, g in zip(r_dets, g_dets) for iou in _match(r, g)]
    m = len(ious)
    score = 1.0 if n_ref == n_got == 0 else 2 * m / (n_ref + n_got)
    mean = f", mean IoU {np.mean(ious):.3f}" if ious else ""
    summary = (
        f"{n_ref} reference detection(s) (score >= {threshold:g}, NMS {NMS_IOU:g}), {m} matched "
        f"(same class, IoU >= {MATCH_IOU:g}){mean}, {n_ref - m} missed, {n_got - m} extra; F1 {score:.4f}"
    )
    return TaskReport("det", name, score, summary)


# ---- segmentation and text detection -------------------------------------------------------------


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.count_nonzero(a | b)
    return 1.0 if union == 0 else np.count_nonzero(a & b) / union


def _binary(a: np.ndarray, threshold: float | None, default: float) -> tuple[np.ndarray, float]:
    """A one-channel map as a mask: probabilities at ``threshold`` (``default``), logits at 0."""
    is_prob = bool(np.all((a >= 0) & (a <= 1)))
    t = threshold if threshold is not None else (default if is_prob else 0.0)
    return a > t, t


def _seg(name: str, got: np.ndarray, ref: np.ndarray, threshold: float | None) -> TaskReport:
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if r.shape[1] == 1:
        rm, t = _binary(r, threshold, DEFAULT_THRESHOLD["seg"])
        gm = g > t
        iou = _iou(gm, rm)
        return TaskReport("seg", name, iou, f"mask IoU {iou:.4f} at {t:g} ({int(rm.sum())} reference pixels)")
    ga, ra = np.argmax(g, axis=1), np.argmax(r, axis=1)
    classes = np.union1d(np.unique(ga), np.unique(ra))
    ious = [_iou(ga == c, ra == c) for c in classes]
    miou = float(np.mean(ious))
    acc = float(np.mean(ga == ra))
    return TaskReport(
        "seg", name, miou, f"mean IoU {miou:.4f} over {len(classes)} class(es), pixel agreement {acc:.4f}"
    )


def label_regions(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """8-connected components of a 2-d boolean mask: labels (0 background, 1..n) and n. Pointer
    jumping over a union of neighbours: each pass takes the smallest label among a pixel's
    neighbours and then follows labels to their roots, so it converges in O(log diameter) passes."""
    m = np.asarray(mask, bool)
    h, w = m.shape
    idx = np.arange(1, h * w + 1, dtype=np.int64).reshape(h, w)
    big = np.int64(h * w + 1)
    lab = np.where(m, idx, big)
    while True:
        p = np.pad(lab, 1, constant_values=big)
        nb = lab.copy()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dy or dx:
                    np.minimum(nb, p[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w], out=nb)
        jumped = np.where(m, nb, big)
        while True:  # pointer jumping: label L names pixel L - 1; take that pixel's label
            flat = np.concatenate([[big], jumped.ravel(), [big]])
            nxt = np.minimum(np.where(m, flat[jumped], big), jumped)
            if np.array_equal(nxt, jumped):
                break
            jumped = nxt
        if np.array_equal(jumped, lab):
            break
        lab = jumped
    roots = np.unique(lab[m])
    out = np.zeros((h, w), np.int64)
    out[m] = np.searchsorted(roots, lab[m]) + 1
    return out, len(roots)


def _regions(mask: np.ndarray) -> list[np.ndarray]:
    lab, n = label_regions(mask)
    counts = np.bincount(lab.ravel(), minlength=n + 1)
    return [lab == i for i in range(1, n + 1) if counts[i] >= MIN_REGION]


def _ocr(name: str, got: np.ndarray, ref: np.ndarray, threshold: float | None) -> TaskReport:
    t = DEFAULT_THRESHOLD["ocr"] if threshold is None else threshold
    g, r = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if r.ndim != 4 or r.shape[1] != 1:
        raise TaskError(f"a text detector's map is [batch, 1, H, W]; got {list(r.shape)}")
    gm, rm = g > t, r > t
    iou = _iou(gm, rm)
    n_ref = n_got = matched = 0
    for gi, ri in zip(gm[:, 0], rm[:, 0]):
        rr, gr = _regions(ri), _regions(gi)
        n_ref, n_got = n_ref + len(rr), n_got + len(gr)
        used = [False] * len(gr)
        for a in rr:
            best, bj = 0.0, -1
            for j, b in enumerate(gr):
                if not used[j] and (v := _iou(a, b)) > best:
                    best, bj = v, j
            if best >= MATCH_IOU:
                used[bj] = True
                matched += 1
    summary = (
        f"text mask IoU {iou:.4f} at {t:g} ({int(rm.sum())} reference pixels); text regions: {n_ref} "
        f"reference, {matched} matched (IoU >= {MATCH_IOU:g}), {n_got - matched} extra"
    )
    return TaskReport("ocr", name, iou, summary)


# ---- embeddings --------------------------------------------------------------------------------


def _embed(name: str, got: np.ndarray, ref: np.ndarray) -> TaskReport:
    g = np.asarray(got, np.float64).reshape(-1, got.shape[-1] if got.ndim else 1)
    r = np.asarray(ref, np.float64).reshape(-1, ref.shape[-1] if ref.ndim else 1)
    num = np.sum(g * r, axis=1)
    den = np.linalg.norm(g, axis=1) * np.linalg.norm(r, axis=1)
    cos = np.where(den > 0, num / np.where(den > 0, den, 1), np.where(num == 0, 1.0, 0.0))
    what = "vector(s)" if ref.ndim <= 2 else "token vector(s)"
    summary = f"{len(cos)} {what} of {r.shape[1]}: min cosine {cos.min():.6f}, mean {cos.mean():.6f}"
    return TaskReport("embed", name, float(cos.min()), summary)


# ---- the check ---------------------------------------------------------------------------------


def _fits(task: str, a: np.ndarray) -> bool:
    if task == "cls":
        return _fits_cls(a)
    if task == "det":
        return a.ndim == 3 and max(a.shape[1], a.shape[2]) > 4 and min(a.shape[1], a.shape[2]) >= 5
    if task == "seg":
        return a.ndim == 4
    if task == "ocr":
        return a.ndim == 4 and a.shape[1] == 1
    return a.ndim >= 1 and a.size > 0


SHAPES = {
    "cls": "[batch, classes]",
    "det": "[batch, 4 + classes, boxes]",
    "seg": "[batch, classes, H, W]",
    "ocr": "[batch, 1, H, W]",
    "embed": "[..., dim]",
}


def task_outputs(
    task: str, reference: Mapping[str, np.ndarray], names: Sequence[str] | None = None
) -> list[str]:
    """The outputs of ``reference`` the ``task`` checks: ``names``, or every output of the task's
    shape. Raises :class:`TaskError` for an unknown task, a missing name, or no output that fits."""
    if task not in TASKS:
        raise TaskError(f"unknown task '{task}' (expected one of {', '.join(TASKS)})")
    if names:
        missing = [n for n in names if n not in reference]
        if missing:
            raise TaskError(f"no output named {', '.join(missing)} (outputs: {', '.join(reference)})")
        for n in names:
            if not _fits(task, np.asarray(reference[n])):
                shape = list(np.shape(reference[n]))
                raise TaskError(f"--task {task} needs an output of shape {SHAPES[task]}; {n} is {shape}")
        return list(names)
    chosen = [n for n in reference if _fits(task, np.asarray(reference[n]))]
    if not chosen:
        shapes = ", ".join(f"{n} {list(np.shape(reference[n]))}" for n in reference) or "none"
        raise TaskError(f"--task {task} needs an output of shape {SHAPES[task]}; the outputs are: {shapes}")
    return chosen


def task_check(
    task: str,
    outputs: Mapping[str, np.ndarray],
    reference: Mapping[str, np.ndarray],
    threshold: float | None = None,
    names: Sequence[str] | None = None,
) -> list[TaskReport]:
    """The ``task``'s check of ``outputs`` against ``reference`` on :func:`task_outputs`' outputs."""
    out = []
    for n in task_outputs(task, reference, names):
        if n not in outputs:
            raise TaskError(f"output {n} of the reference is not among the outputs checked")
        got, ref = np.asarray(outputs[n]), np.asarray(reference[n])
        if got.shape != ref.shape:
            raise TaskError(f"output {n}: shape {list(got.shape)} against the reference's {list(ref.shape)}")
        if task == "cls":
            out.append(_cls(n, got, ref))
        elif task == "det":
            out.append(_det(n, got, ref, DEFAULT_THRESHOLD["det"] if threshold is None else threshold))
        elif task == "seg":
            out.append(_seg(n, got, ref, threshold))
        elif task == "ocr":
            out.append(_ocr(n, got, ref, threshold))
        else:
            out.append(_embed(n, got, ref))
    return out

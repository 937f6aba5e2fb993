"""The task checks (lamina/tasks.py) on hand-made outputs whose answers are known: classes, YOLO
detections (decoding, NMS, matching), segmentation and text masks, text regions, embeddings; and
the errors for outputs that do not fit."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.tasks import TaskError, boxes_iou, decode_yolo, label_regions, nms, task_check, task_outputs


def test_cls_top1_and_top5() -> None:
    ref = np.array([[0.1, 0.9, 0.3, 0.2, 0.0, 0.5, 0.4], [1.0, 0.0, 0.2, 0.3, 0.4, 0.5, 0.6]])
    same = ref + 0.01
    (r,) = task_check("cls", {"p": same}, {"p": ref})
    assert r.score == 1.0 and r.summary == "top-1 agrees on 2/2 sample(s), top-5 overlap 5.00/5"
    swapped = ref.copy()
    swapped[1, [0, 6]] = swapped[1, [6, 0]]  # sample 1's top class moves; its top-5 still holds both
    (r,) = task_check("cls", {"p": swapped}, {"p": ref})
    assert r.score == 0.5 and "top-1 agrees on 1/2" in r.summary and "5.00/5" in r.summary
    (r,) = task_check("cls", {"p": ref[:1, :, None, None]}, {"p": ref[:1, :, None, None]})
    assert r.summary.startswith("top-1 agrees on 1/1 sample(s) (class 1)")


def _yolo(
    boxes: list[tuple[float, float, float, float, int, float]], n: int = 40, classes: int = 3
) -> np.ndarray:
    """A [1, 4 + classes, n] head holding the given (cx, cy, w, h, class, score) candidates."""
    out = np.zeros((1, 4 + classes, n), np.float32)
    for i, (cx, cy, w, h, c, s) in enumerate(boxes):
        out[0, :4, i] = (cx, cy, w, h)
        out[0, 4 + c, i] = s
    return out


def test_det_decode_nms_and_match() -> None:
    ref = _yolo([(10, 10, 8, 8, 0, 0.9), (11, 10, 8, 8, 0, 0.8), (11, 10, 8, 8, 1, 0.7), (40, 40, 10, 6, 2, 0.6),
                 (60, 60, 4, 4, 1, 0.1)])  # fmt: skip
    ((b, s, c),) = decode_yolo(ref, 0.25)
    # the second class-0 box overlaps the first (IoU 0.78 > 0.45): suppressed; class 1 is kept; 0.1 < 0.25
    assert s.tolist() == pytest.approx([0.9, 0.7, 0.6]) and c.tolist() == [0, 1, 2]
    assert b[0].tolist() == [6, 6, 14, 14]
    got = _yolo(
        [(10.5, 10, 8, 8, 0, 0.85), (11, 10, 8, 8, 2, 0.7), (41, 40, 10, 6, 2, 0.6), (80, 80, 5, 5, 0, 0.5)]
    )
    (r,) = task_check("det", {"y": got}, {"y": ref})
    # class 0 matches; the class-1 box finds only a class-2 one (no match); the far box is extra
    assert r.summary.startswith("3 reference detection(s) (score >= 0.25, NMS 0.45), 2 matched")
    assert "1 missed, 2 extra" in r.summary and r.score == pytest.approx(2 * 2 / (3 + 4))
    # [B, N, 4 + classes] reads the same; nothing in either scores 1
    (t,) = task_check("det", {"y": got.transpose(0, 2, 1)}, {"y": ref.transpose(0, 2, 1)})
    assert t.score == r.score
    empty = np.zeros_like(ref)
    assert task_check("det", {"y": empty}, {"y": empty})[0].score == 1.0
    assert task_check("det", {"y": got}, {"y": ref}, threshold=0.95)[0].score == 1.0


def test_boxes_iou_and_nms() -> None:
    a = np.array([[0, 0, 2, 2], [1, 1, 3, 3], [5, 5, 5, 5]], float)
    iou = boxes_iou(a, a)
    assert iou[0, 1] == pytest.approx(1 / 7) and iou[0, 0] == 1 and iou[2, 2] == 0  # an empty box
    keep = nms(np.array([[0, 0, 2, 2], [0, 0, 2, 2.1], [0, 0, 2, 2]], float), np.array([0.5, 0.9, 0.8]),
               np.array([0, 0, 1]))  # fmt: skip
    assert keep.tolist() == [1, 2]


def test_seg_binary_and_classes() -> None:
    ref = np.zeros((1, 1, 4, 4), np.float32)
    ref[0, 0, :2, :2] = 0.9
    got = ref.copy()
    got[0, 0, 0, 0] = 0.2  # 3 of 4 pixels
    (r,) = task_check("seg", {"m": got}, {"m": ref})
    assert r.score == 0.75 and r.summary == "mask IoU 0.7500 at 0.5 (4 reference pixels)"
    (r,) = task_check("seg", {"m": got * 10 - 5}, {"m": ref * 10 - 5})  # logits: threshold 0
    assert r.summary.startswith("mask IoU 0.7500 at 0 ")
    logits = np.zeros((1, 3, 2, 2))
    logits[0, 1, 0, :] = 1  # row 0: class 1, row 1: class 0
    other = logits.copy()
    other[0, 2, 1, 1] = 5  # one pixel becomes class 2
    (r,) = task_check("seg", {"m": other}, {"m": logits})
    # class 0: 1/2, class 1: 1, class 2: 0 → mean 0.5
    assert r.score == pytest.approx(0.5) and "over 3 class(es), pixel agreement 0.7500" in r.summary


def test_ocr_mask_and_regions() -> None:
    ref = np.zeros((1, 1, 20, 40), np.float32)
    ref[0, 0, 2:6, 2:30] = 0.8  # two text lines
    ref[0, 0, 10:14, 5:20] = 0.7
    ref[0, 0, 18, 38] = 0.9  # a speck: not a region
    got = ref.copy()
    got[0, 0, 10:14, 5:20] = 0.2  # the second line lost
    (r,) = task_check("ocr", {"p": got}, {"p": ref})
    assert r.score == pytest.approx(113 / 173)
    assert "text regions: 2 reference, 1 matched (IoU >= 0.5), 0 extra" in r.summary
    with pytest.raises(TaskError, match=r"\[batch, 1, H, W\]"):
        task_check("ocr", {"p": np.zeros((1, 2, 3, 3))}, {"p": np.zeros((1, 2, 3, 3))}, names=["p"])


def _bfs_count(m: np.ndarray) -> int:
    seen = np.zeros_like(m)
    n = 0
    for y, x in zip(*np.nonzero(m)):
        if seen[y, x]:
            continue
        n += 1
        q = deque([(y, x)])
        seen[y, x] = True
        while q:
            a, b = q.popleft()
            for c in range(a - 1, a + 2):
                for d in range(b - 1, b + 2):
                    if 0 <= c < m.shape[0] and 0 <= d < m.shape[1] and m[c, d] and not seen[c, d]:
                        seen[c, d] = True
                        q.append((c, d))
    return n


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 24), st.integers(1, 24), st.floats(0.05, 0.9), st.integers(0, 2**31 - 1))
def test_label_regions_is_8_connectivity(h: int, w: int, p: float, seed: int) -> None:
    m = np.random.default_rng(seed).random((h, w)) < p
    lab, n = label_regions(m)
    assert n == _bfs_count(m) and lab.max(initial=0) == n and np.all((lab > 0) == m)
    # neighbours share their label
    pad = np.pad(lab, 1)
    for dy, dx in ((0, 1), (1, 0), (1, 1), (1, -1)):
        nb = pad[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w]
        assert np.all((nb == 0) | (lab == 0) | (nb == lab))


def test_embed_rows_and_tokens() -> None:
    ref = np.array([[1.0, 0.0], [0.0, 2.0]])
    got = np.array([[1.0, 1.0], [0.0, 3.0]])
    (r,) = task_check("embed", {"e": got}, {"e": ref})
    assert r.score == pytest.approx(2**-0.5) and r.summary.startswith("2 vector(s) of 2: min cosine 0.707107")
    (r,) = task_check("embed", {"e": got[None]}, {"e": ref[None]})
    assert "2 token vector(s) of 2" in r.summary


def test_outputs_that_do_not_fit() -> None:
    ref = {"logits": np.zeros((1, 10)), "boxes": np.zeros((1, 6, 50))}
    assert task_outputs("cls", ref) == ["logits"] and task_outputs("det", ref) == ["boxes"]
    with pytest.raises(TaskError, match=r"--task seg needs an output of shape \[batch, classes, H, W\]; "
                       r"the outputs are: logits \[1, 10\], boxes \[1, 6, 50\]"):  # fmt: skip
        task_outputs("seg", ref)
    with pytest.raises(TaskError, match="unknown task 'pose'"):
        task_outputs("pose", ref)
    with pytest.raises(TaskError, match="no output named nope"):
        task_outputs("cls", ref, ["nope"])
    with pytest.raises(TaskError, match=r"shape \[1, 11\] against the reference's \[1, 10\]"):
        task_check("cls", {"logits": np.zeros((1, 11))}, ref)

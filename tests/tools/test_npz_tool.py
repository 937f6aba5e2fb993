"""npz_tool compare: metrics against hand-computed values, verdicts, exit codes, the HTML report."""

from __future__ import annotations

import math
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from lamina.compare import (
    CLOSE,
    EQUAL,
    MISMATCH,
    NOT_SIMILAR,
    SIMILAR,
    compare_sets,
    compare_tensors,
    cosine_similarity,
    euclidean_similarity,
    parse_tolerance,
    sqnr,
)
from lamina.tools.npz_tool import main, render_html


def test_metrics_hand_computed() -> None:
    a = np.array([1.0, 2.0, 3.0], np.float32)
    b = np.array([1.0, 2.0, 4.0], np.float32)
    # a.b = 1 + 4 + 12 = 17; |a| = sqrt(14); |b| = sqrt(21)
    assert cosine_similarity(a, b) == pytest.approx(17 / math.sqrt(14 * 21), abs=1e-12)
    # |a-b| = 1; (a+b)/2 = [1, 2, 3.5] -> norm sqrt(1 + 4 + 12.25)
    assert euclidean_similarity(a, b) == pytest.approx(1 - 1 / math.sqrt(17.25), abs=1e-12)
    # SQNR: noise = [0, 0, -1], mean -1/3 -> var sum = 2*(1/9) + (2/3)^2 = 6/9; signal var sum = 2
    assert sqnr(a, b) == pytest.approx(10 * math.log10(2 / (6 / 9)), abs=1e-9)
    assert cosine_similarity(np.zeros(3), np.zeros(3)) == 1.0
    assert cosine_similarity(np.zeros(3), np.ones(3)) == 0.0
    assert euclidean_similarity(np.array([1.0, -1.0]), np.array([-1.0, 1.0])) == 0.0
    assert sqnr(a, a + 1) == math.inf  # a constant offset is zero-mean noise free


def test_verdicts() -> None:
    a = np.linspace(-1, 1, 1000, dtype=np.float32).reshape(10, 100)
    assert compare_tensors("t", a, a.copy()).verdict == EQUAL
    r = compare_tensors("t", a, a * (1 + 1e-5))
    assert r.verdict == CLOSE and r.close_order is not None and r.close_order >= 3
    noisy = a + np.random.default_rng(0).standard_normal(a.shape).astype(np.float32) * 1e-3
    r = compare_tensors("t", a, noisy)
    assert r.verdict == SIMILAR and r.passed and r.cosine > 0.99 and r.euclid > 0.99
    r = compare_tensors("t", a, -a)
    assert r.verdict == NOT_SIMILAR and not r.passed
    assert r.cosine == pytest.approx(-1.0)
    r = compare_tensors("t", a, a[:5])
    assert r.verdict == MISMATCH and not r.passed
    r = compare_tensors("t", a, a.reshape(100, 10))
    assert r.verdict == EQUAL and "flattened" in r.note
    nan = np.array([1.0, np.nan])
    assert compare_tensors("t", nan, nan.copy()).verdict == EQUAL
    assert compare_tensors("i", np.array([1, 2, 3]), np.array([1, 2, 3])).verdict == EQUAL
    assert compare_tensors("b", np.array([True]), np.array([False])).verdict == NOT_SIMILAR


def test_ml_dtypes_compare_as_numbers() -> None:
    """bfloat16/float8/int4 tensors (what F16/BF16 deployments and ONNX's numpy_helper give) are
    measured by value, not declared NOT_SIMILAR as opaque data."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    a = np.linspace(0, 1, 100).astype(ml_dtypes.bfloat16)
    b = (a.astype(np.float32) + 0.001).astype(ml_dtypes.bfloat16)
    r = compare_tensors("t", a, b)
    assert r.verdict == SIMILAR and r.cosine > 0.9999
    assert compare_tensors("q", np.arange(4).astype(ml_dtypes.int4), np.arange(4)).verdict == EQUAL


def test_compare_sets_order_excepts_and_tolerance() -> None:
    a = {"z": np.ones(3), "a": np.ones(3), "only_a": np.ones(1)}
    b = {"a": np.ones(3) * 2, "z": np.ones(3), "only_b": np.ones(1)}
    rep = compare_sets(a, b, (0.99, 0.99))
    assert [r.name for r in rep.results] == ["z", "a"]
    assert rep.only_a == ["only_a"] and rep.only_b == ["only_b"]
    assert [r.name for r in rep.failed] == ["a"]  # cosine 1 but euclidean 1 - sqrt(3)/sqrt(6.75) < 0.99
    rep = compare_sets(a, b, (0.99, 0.99), excepts=["a"])
    assert rep.passed and rep.excepted == ["a"]
    assert compare_sets(a, b, (0.99, 0.3)).passed  # euclidean 0.333 > 0.3
    assert parse_tolerance("0.9,0.8") == (0.9, 0.8)
    with pytest.raises(ValueError):
        parse_tolerance("0.9")


def _files(tmp_path: Path) -> tuple[str, str]:
    rng = np.random.default_rng(0)
    layers = {f"layer{i}": rng.standard_normal((2, 16)).astype(np.float32) for i in range(6)}
    other = {k: v + rng.standard_normal(v.shape).astype(np.float32) * 1e-3 for k, v in layers.items()}
    other["layer0"] = layers["layer0"].copy()
    np.savez(tmp_path / "a.npz", **layers)
    np.savez(tmp_path / "b.npz", **other)
    return str(tmp_path / "a.npz"), str(tmp_path / "b.npz")


def test_cli_pass_fail_and_verbosity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _files(tmp_path)
    assert main(["compare", a, b]) == 0
    out = capsys.readouterr().out
    assert "6 compared, 6 passed (1 equal" in out and "npz compare PASSED" in out
    assert "[layer1" not in out  # passing tensors only with -v
    assert main(["compare", a, b, "-v"]) == 0
    out = capsys.readouterr().out
    assert "[layer0" in out and "EQUAL [PASSED]" in out and "cosine 0.99" in out
    assert main(["compare", a, b, "--tolerance", "0.999999999,0.999999999"]) == 1
    out = capsys.readouterr().out
    assert "NOT_SIMILAR [FAILED]" in out and "npz compare FAILED: layer1" in out
    assert (
        main(
            [
                "compare",
                a,
                b,
                "--tolerance",
                "0.999999999,0.999999999",
                "--excepts",
                "layer1,layer2,layer3,layer4,layer5",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["compare", a, b, "-vv"]) == 0
    assert "max |a-b|" in capsys.readouterr().out


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, _ = _files(tmp_path)
    assert main(["compare", a, str(tmp_path / "missing.npz")]) == 2
    assert "missing.npz' does not exist" in capsys.readouterr().err
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04garbage")
    assert main(["compare", a, str(tmp_path / "bad.npz")]) == 2
    assert "bad.npz' cannot be read" in capsys.readouterr().err
    assert main(["compare", a, a, "--tolerance", "x,y"]) == 2
    np.savez(tmp_path / "c.npz", other=np.ones(2))
    assert main(["compare", a, str(tmp_path / "c.npz")]) == 1
    assert "no tensor in common" in capsys.readouterr().out
    assert main(["compare"]) == 2
    assert "Traceback" not in capsys.readouterr().err


class _Checker(HTMLParser):
    VOID = {"meta", "br", "img", "input", "link", "hr", "rect", "line", "circle", "polyline", "path"}

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.tags: dict[str, int] = {}
        self.errors: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1
        if tag in ("script", "iframe") or any(k in ("src", "href") for k, _ in attrs):
            self.errors.append(f"external or scripted content: <{tag}>")
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags[tag] = self.tags.get(tag, 0) + 1

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"unbalanced </{tag}> (open: {self.stack[-3:]})")
        else:
            self.stack.pop()


def test_html_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _files(tmp_path)
    html = tmp_path / "report.html"
    assert main(["compare", a, b, "--html", str(html), "--tolerance", "0.99,0.99"]) == 0
    text = html.read_text()
    assert text.startswith("<!DOCTYPE html>")
    c = _Checker()
    c.feed(text)
    assert not c.errors and not c.stack, (c.errors, c.stack)
    assert c.tags["svg"] == 1 and c.tags["polyline"] == 2 and c.tags["circle"] == 12  # 6 layers x 2 series
    assert c.tags["tr"] == 7  # header + 6 rows
    assert (
        "layer5" in text
        and "PASSED" in text
        and "http" not in text.replace('xmlns="http://www.w3.org/2000/svg"', "")
    )
    # a failing comparison is marked
    rep = compare_sets({"x<&>": np.ones(3)}, {"x<&>": -np.ones(3)})
    page = render_html(rep)
    assert "FAILED" in page and "x&lt;&amp;&gt;" in page and 'class="fail"' in page
    c = _Checker()
    c.feed(page)
    assert not c.errors and not c.stack


def test_lamina_verb_entry_points(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lamina.tools.npz_tool import compare_main
    from lamina.tools.runner import run_main
    from lamina.tools.transform import transform_main

    a, b = _files(tmp_path)
    assert compare_main([a, b, "-v"]) == 0
    assert "npz compare PASSED" in capsys.readouterr().out
    assert compare_main([a, str(tmp_path / "nope.npz")]) == 2
    for fn in (compare_main, run_main, transform_main, main):
        assert fn(["--help"]) == 0
    assert "usage: lamina transform" in capsys.readouterr().out
    assert transform_main([]) == 2
    assert "the following arguments are required: --model_def" in capsys.readouterr().err


def test_an_all_nan_difference_warns_nothing() -> None:
    """NaN against a number everywhere (a broken model's output): NOT_SIMILAR, max |diff| NaN, and no
    RuntimeWarning reaches the user (np.nanmax of an all-NaN array warns)."""
    import warnings

    a = np.full(4, np.nan, np.float32)
    b = np.arange(4, dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = compare_tensors("t", a, b, (0.99, 0.99))
    assert r.verdict == NOT_SIMILAR and math.isnan(r.max_abs_diff)


def _padded_pair(tmp_path: Path) -> tuple[str, str, np.ndarray]:
    """a and b equal at the 3 real positions of 8, different at the padded ones; a pooled vector
    equal in both; the mask in a as well (a dump holds the model inputs)."""
    rng = np.random.default_rng(0)
    mask = np.array([[1, 1, 1, 0, 0, 0, 0, 0]], np.int64)
    h = rng.standard_normal((1, 8, 16)).astype(np.float32)
    h2 = h.copy()
    h2[:, 3:] = rng.standard_normal((1, 5, 16)) * 30
    pooled = rng.standard_normal((1, 16)).astype(np.float32)
    a, b = tmp_path / "a.npz", tmp_path / "b.npz"
    np.savez(a, attention_mask=mask, hidden=h, pooled=pooled)
    np.savez(b, attention_mask=mask, hidden=h2, pooled=pooled + 1e-3)
    return str(a), str(b), mask


def test_compare_mask(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, mask = _padded_pair(tmp_path)
    assert main(["compare", a, b]) == 1  # the padded positions differ
    assert "hidden" in capsys.readouterr().out
    np.savez(tmp_path / "mask.npz", m=mask)
    for how in (str(tmp_path / "mask.npz"), "attention_mask"):
        assert main(["compare", a, b, "--mask", how, "-v"]) == 0
        out = capsys.readouterr().out
        assert "mask applied:" in out and "3 of 8 position(s) kept" in out
        line = next(ln for ln in out.splitlines() if ln.startswith("[hidden"))
        assert "over kept positions (48 of 128)" in line  # 3 positions x 16 channels
        pooled = next(ln for ln in out.splitlines() if ln.startswith("[pooled"))
        assert "kept" not in pooled  # no sequence axis: compared whole
    # the table keeps TPU-MLIR's columns
    assert "npz compare PASSED" in out


def test_compare_mask_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b, _ = _padded_pair(tmp_path)
    assert main(["compare", a, b, "--mask", "nope"]) == 2
    assert "--mask 'nope' is neither an npz file nor a tensor of" in capsys.readouterr().err
    assert main(["compare", a, b, "--mask", "hidden"]) == 2
    assert "expected a [batch, seq] mask, got [1, 8, 16]" in capsys.readouterr().err
    np.savez(tmp_path / "two.npz", x=np.ones((1, 8)), y=np.ones((1, 8)))
    assert main(["compare", a, b, "--mask", str(tmp_path / "two.npz")]) == 2
    assert "holds 2 arrays (x, y)" in capsys.readouterr().err

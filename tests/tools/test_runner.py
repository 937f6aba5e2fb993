"""model_runner in process: .mlir on Lamina, .onnx on onnxruntime or Lamina, errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lamina.tools.runner import main
from lamina.tools.transform import main as transform_main


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


@pytest.fixture
def conv_mlir(tmp_path: Path, conv_model: str) -> str:
    mlir = tmp_path / "conv.mlir"
    assert (
        transform_main(["--model_def", conv_model, "--input_shapes", "[[1,3,8,8]]", "--mlir", str(mlir)]) == 0
    )
    return str(mlir)


@pytest.fixture
def x_npz(tmp_path: Path) -> str:
    p = tmp_path / "x.npz"
    np.savez(p, x=np.random.default_rng(3).standard_normal((1, 3, 8, 8)).astype(np.float32))
    return str(p)


def test_runner_mlir_and_onnx_agree(tmp_path: Path, conv_model: str, conv_mlir: str, x_npz: str) -> None:
    assert main(["--input", x_npz, "--model", conv_mlir, "--output", str(tmp_path / "a.npz")]) == 0
    assert main(["--input", x_npz, "--model", conv_model, "--output", str(tmp_path / "b.npz")]) == 0
    assert (
        main(
            [
                "--input",
                x_npz,
                "--model",
                conv_model,
                "--output",
                str(tmp_path / "c.npz"),
                "--engine",
                "lamina",
            ]
        )
        == 0
    )
    a, b, c = (_npz(tmp_path / f) for f in ("a.npz", "b.npz", "c.npz"))
    assert list(a) == ["y"] and list(b) == ["y"] and list(c) == ["y"]
    np.testing.assert_allclose(a["y"], b["y"], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(c["y"], b["y"], rtol=1e-4, atol=1e-5)


def test_runner_dump_all_tensors(tmp_path: Path, conv_model: str, conv_mlir: str, x_npz: str) -> None:
    assert (
        main(
            [
                "--input",
                x_npz,
                "--model",
                conv_mlir,
                "--output",
                str(tmp_path / "a.npz"),
                "--dump_all_tensors",
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "--input",
                x_npz,
                "--model",
                conv_model,
                "--output",
                str(tmp_path / "b.npz"),
                "--dump_all_tensors",
            ]
        )
        == 0
    )
    a, b = _npz(tmp_path / "a.npz"), _npz(tmp_path / "b.npz")
    assert [k for k in a if k in ("c", "r", "y")] == ["c", "r", "y"]  # network order
    assert {"c", "r", "y"} <= set(b)
    for k in ("c", "r", "y"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-4, atol=1e-5)


def test_runner_single_npy_input(tmp_path: Path, conv_mlir: str) -> None:
    np.save(tmp_path / "anything.npy", np.zeros((1, 3, 8, 8), np.float64))  # converted to f32
    assert (
        main(
            [
                "--input",
                str(tmp_path / "anything.npy"),
                "--model",
                conv_mlir,
                "--output",
                str(tmp_path / "o.npz"),
            ]
        )
        == 0
    )
    assert _npz(tmp_path / "o.npz")["y"].dtype == np.float32


def test_runner_errors(
    tmp_path: Path, conv_mlir: str, x_npz: str, capsys: pytest.CaptureFixture[str]
) -> None:
    out = str(tmp_path / "o.npz")
    assert main(["--input", x_npz, "--model", str(tmp_path / "none.mlir"), "--output", out]) == 1
    assert "none.mlir' does not exist" in capsys.readouterr().err
    np.savez(tmp_path / "wrong.npz", z=np.zeros(3), w=np.zeros(3))
    assert main(["--input", str(tmp_path / "wrong.npz"), "--model", conv_mlir, "--output", out]) == 1
    err = capsys.readouterr().err
    assert "wrong.npz" in err and "missing input(s) 'x'" in err
    np.savez(tmp_path / "shape.npz", x=np.zeros((2, 3, 8, 8), np.float32))
    assert main(["--input", str(tmp_path / "shape.npz"), "--model", conv_mlir, "--output", out]) == 1
    assert "input 'x' has shape [2, 3, 8, 8] but the model expects [1, 3, 8, 8]" in capsys.readouterr().err
    bad = tmp_path / "bad.mlir"
    bad.write_text("module { func.func @main( }")
    assert main(["--input", x_npz, "--model", str(bad), "--output", out]) == 1
    err = capsys.readouterr().err
    assert "cannot parse model" in err and "bad.mlir:1:" in err
    # weights file gone
    (tmp_path / "conv_top_weights.npz").unlink()
    assert main(["--input", x_npz, "--model", conv_mlir, "--output", out]) == 1
    assert "conv_top_weights.npz" in capsys.readouterr().err
    assert not Path(out).exists()
    assert main(["--input", x_npz]) == 2  # usage
    assert "Traceback" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # the declared result no longer matches what the op computes
        ("pads = array<i64: 1, 1, 1, 1>", "pads = array<i64: 2, 2, 2, 2>", "result #0 is declared"),
        # an attribute the operands cannot take (a raw numpy AxisError at run time before)
        ('"top.Relu"(%3) :', '"top.Softmax"(%3) <{axis = 7 : i64}> :', "axis 7 is out of range"),
    ],
    ids=["result-type", "axis"],
)
def test_hand_edited_mlir_is_reported_at_its_line(
    tmp_path: Path,
    conv_mlir: str,
    x_npz: str,
    capsys: pytest.CaptureFixture[str],
    old: str,
    new: str,
    message: str,
) -> None:
    """An op edited by hand is checked against what its operands give before anything runs, and the
    error points at the line of the .mlir the user edited (not at the ONNX node it came from)."""
    text = Path(conv_mlir).read_text()
    assert old in text
    edited = Path(conv_mlir).with_name("edited.mlir")
    edited.write_text(text.replace(old, new))
    line = next(i for i, s in enumerate(edited.read_text().splitlines(), 1) if new in s)
    assert main(["--model", str(edited), "--input", x_npz, "--output", str(tmp_path / "o.npz")]) == 1
    err = capsys.readouterr().err
    assert f"edited.mlir:{line}:" in err and message in err, err
    assert not (tmp_path / "o.npz").exists()

"""model_transform in process: files, keys, exit codes, messages."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import lamina.frontends.model_io as model_io_mod
from lamina.tools.transform import main


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def _x(tmp_path: Path, shape=(1, 3, 8, 8), name: str = "x") -> str:
    p = tmp_path / "in.npz"
    np.savez(p, **{name: np.random.default_rng(1).standard_normal(shape).astype(np.float32)})
    return str(p)


def test_transform_conv_with_npz_input(
    tmp_path: Path, conv_model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    mlir = tmp_path / "conv.mlir"
    rc = main(
        [
            "--model_name",
            "conv",
            "--model_def",
            conv_model,
            "--input_shapes",
            "[[1,3,8,8]]",
            "--test_input",
            _x(tmp_path),
            "--test_result",
            str(tmp_path / "conv_top_outputs.npz"),
            "--mlir",
            str(mlir),
        ]
    )
    out, err = capsys.readouterr()
    assert rc == 0, err
    for f in (
        "conv.mlir",
        "conv_top_weights.npz",
        "conv_in_f32.npz",
        "conv_ref_outputs.npz",
        "conv_top_outputs.npz",
    ):
        assert (tmp_path / f).is_file(), f
    text = mlir.read_text()
    assert 'lamina.weight_file = "conv_top_weights.npz"' in text
    assert '"top.Conv"' in text and 'loc("c"' in text
    ref = _npz(tmp_path / "conv_ref_outputs.npz")
    top = _npz(tmp_path / "conv_top_outputs.npz")
    assert {"c", "r", "y"} <= set(ref) and {"c", "r", "y"} <= set(top)
    assert "W" not in top and "B" not in top  # weights are not dumped
    assert list(_npz(tmp_path / "conv_in_f32.npz")) == ["x"]
    np.testing.assert_allclose(top["y"], ref["y"], rtol=1e-4, atol=1e-5)
    # the equivalent command line of every step
    assert "# model_transform --model_name conv" in out
    assert "# model_runner --input" in out and "--dump_all_tensors" in out
    assert "# npz_tool compare" in out
    assert "3 compared, 3 passed" in out
    # no temporary files left behind
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".lamina-")]


def test_transform_without_test_input_writes_only_the_mlir(tmp_path: Path, conv_model: str) -> None:
    rc = main(["--model_def", conv_model, "--input_shapes", "[1,3,8,8]", "--mlir", str(tmp_path / "m.mlir")])
    assert rc == 0
    names = sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".mlir", ".npz"))
    assert names == ["conv_top_weights.npz", "m.mlir"]  # model name defaults to the file stem


def test_transform_image_input_with_preprocessing(tmp_path: Path, conv_model: str) -> None:
    Image = pytest.importorskip("PIL.Image")
    rgb = np.random.default_rng(2).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(rgb).save(tmp_path / "img.png")
    rc = main(
        [
            "--model_name",
            "conv",
            "--model_def",
            conv_model,
            "--input_shapes",
            "[[1,3,8,8]]",
            "--mean",
            "1,2,3",
            "--scale",
            "0.5,0.25,2",
            "--pixel_format",
            "rgb",
            "--test_input",
            str(tmp_path / "img.png"),
            "--mlir",
            str(tmp_path / "conv.mlir"),
        ]
    )
    assert rc == 0
    x = _npz(tmp_path / "conv_in_f32.npz")["x"]
    want = ((rgb.astype(np.float32) - [1, 2, 3]) * [0.5, 0.25, 2]).transpose(2, 0, 1)[None]
    np.testing.assert_allclose(x, want, rtol=1e-6)
    text = (tmp_path / "conv.mlir").read_text()
    assert "mean = array<f64: 1.0, 2.0, 3.0>" in text or "mean = array<f64: 1.000000e+00" in text
    assert 'pixel_format = "rgb"' in text
    # the default test_result name
    assert (tmp_path / "conv_top_outputs.npz").is_file()


def test_transform_two_inputs_npy_files_and_output_names(tmp_path: Path, two_input: str) -> None:
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", a * 2)
    rc = main(
        [
            "--model_name",
            "two",
            "--model_def",
            two_input,
            "--mlir",
            str(tmp_path / "two.mlir"),
            "--test_input",
            f"{tmp_path / 'a.npy'},{tmp_path / 'b.npy'}",
        ]
    )
    assert rc == 0
    top = _npz(tmp_path / "two_top_outputs.npz")
    np.testing.assert_array_equal(top["s"], a * 3)
    np.testing.assert_array_equal(top["m"], a * 3 * a)
    assert set(_npz(tmp_path / "two_in_f32.npz")) == {"a", "b"}
    rc = main(
        [
            "--model_name",
            "two_s",
            "--model_def",
            two_input,
            "--mlir",
            str(tmp_path / "two_s.mlir"),
            "--output_names",
            "s",
        ]
    )
    assert rc == 0
    assert '-> (tensor<1x4xf32> {onnx.name = "s"})' in (tmp_path / "two_s.mlir").read_text()


def test_transform_fails_naming_the_layers_outside_tolerance(
    tmp_path: Path, conv_model: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = model_io_mod.run_top_module

    def perturbed(module, inputs, dump_all=False):
        res = real(module, inputs, dump_all)
        res["r"] = -res["r"] + 1.0
        return res

    monkeypatch.setattr(model_io_mod, "run_top_module", perturbed)
    args = [
        "--model_def",
        conv_model,
        "--input_shapes",
        "[[1,3,8,8]]",
        "--test_input",
        _x(tmp_path),
        "--mlir",
        str(tmp_path / "conv.mlir"),
    ]
    assert main(args) == 1
    out, err = capsys.readouterr()
    assert "'r' (NOT_SIMILAR)" in err and "outside tolerance 0.99,0.99" in err
    assert "[r" in out and "FAILED" in out
    assert main([*args, "--excepts", "r"]) == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input_shapes", "[[1,3,8"], "--input_shapes: cannot parse '[[1,3,8'"),
        (["--input_shapes", "[[1,3,8,8],[1,2]]"], "gives 2 shape(s) but the model has 1 input(s)"),
        (["--input_shapes", "[[1,3,9,8]]"], "static shape"),
        (["--tolerance", "0.9"], "--tolerance expects two numbers"),
        (["--mean", "a,b"], "--mean: expected comma-separated numbers"),
        (
            ["--input_shapes", "[[1,3,8,8]]", "--mean", "1,2"],
            "'mean' has 2 values but the input has 3 channels",
        ),
    ],
)
def test_transform_bad_flags(
    tmp_path: Path, conv_model: str, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    rc = main(["--model_def", conv_model, "--mlir", str(tmp_path / "m.mlir"), *args])
    err = capsys.readouterr().err
    assert rc != 0
    assert message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "m.mlir").exists()


def test_transform_unsupported_op_lists_every_node(
    tmp_path: Path, unsupported: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["--model_def", unsupported, "--mlir", str(tmp_path / "bad.mlir")])
    err = capsys.readouterr().err
    assert rc == 1
    assert "com.example::FancyOp" in err and "'fancy_1'" in err and "'fancy_2'" in err
    assert err.count("error:") == 1
    assert not (tmp_path / "bad.mlir").exists()


def test_transform_missing_and_corrupt_models(
    tmp_path: Path, conv_model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--model_def", str(tmp_path / "nope.onnx")]) == 1
    assert "nope.onnx' does not exist" in capsys.readouterr().err
    data = Path(conv_model).read_bytes()
    bad = tmp_path / "trunc.onnx"
    bad.write_bytes(data[: len(data) // 2])
    assert main(["--model_def", str(bad), "--mlir", str(tmp_path / "t.mlir")]) == 1
    err = capsys.readouterr().err
    assert "trunc.onnx" in err and "Traceback" not in err
    assert main(["--model_def", conv_model, "--mlir", str(tmp_path / "no_dir" / "m.mlir")]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_transform_bad_test_inputs(
    tmp_path: Path, conv_model: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["--model_def", conv_model, "--input_shapes", "[[1,3,8,8]]", "--mlir", str(tmp_path / "m.mlir")]
    np.savez(tmp_path / "two.npz", a=np.zeros((1, 3, 8, 8), np.float32), b=np.zeros(1, np.float32))
    assert main([*base, "--test_input", str(tmp_path / "two.npz")]) == 1
    err = capsys.readouterr().err
    assert "two.npz" in err and "missing input(s) 'x'" in err and "'a', 'b'" in err
    np.savez(tmp_path / "shape.npz", x=np.zeros((1, 3, 4, 4), np.float32))
    assert main([*base, "--test_input", str(tmp_path / "shape.npz")]) == 1
    err = capsys.readouterr().err
    assert "shape.npz" in err and "[1, 3, 4, 4] but the model expects [1, 3, 8, 8]" in err
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    assert main([*base, "--test_input", str(tmp_path / "junk.npz")]) == 1
    assert "junk.npz' cannot be read" in capsys.readouterr().err
    assert main([*base, "--test_input", str(tmp_path / "x.txt")]) == 1
    assert "unsupported file type '.txt'" in capsys.readouterr().err

"""``run_calibration``: the command on a tiny model, TPU-MLIR's flags, and clear errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lamina.dialects.tpu.tables import read_calibration_table
from lamina.tools.calibrate import calibrate_main, main


@pytest.fixture(scope="module")
def tiny_mlir(tmp_path_factory: pytest.TempPathFactory) -> str:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import lamina.api as lm

    d = tmp_path_factory.mktemp("cal")
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["y"], name="relu"),
    ]
    g = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 16, 16])],
        initializer=[numpy_helper.from_array(w, "W")],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(d / "tiny.onnx"))
    res = lm.transform(
        str(d / "tiny.onnx"),
        mean=[127.5] * 3,
        scale=[1 / 64] * 3,
        pixel_format="rgb",
        mlir=str(d / "tiny.mlir"),
    )
    return str(res.mlir)


def _npz_dataset(d: Path, n: int, shape: tuple[int, ...] = (1, 3, 16, 16)) -> Path:
    d.mkdir()
    rng = np.random.default_rng(1)
    for i in range(n):
        np.savez(d / f"s{i:02d}.npz", x=rng.standard_normal(shape).astype(np.float32))
    return d


def test_npz_dataset(tiny_mlir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = _npz_dataset(tmp_path / "ds", 5)
    out = tmp_path / "tiny_cali_table"
    rc = main([tiny_mlir, "--dataset", str(ds), "--input_num", "4", "--tune_num", "2", "-o", str(out), "-q"])
    assert rc == 0, capsys.readouterr().err
    t = read_calibration_table(str(out))
    assert list(t.thresholds) == ["x", "y"]  # the conv's ReLU is fused: one tensor per op result
    assert t.sample_num == 4 and t.tune_num == 2 and t.histogram_bin_num == 2048
    assert "calibrated with kl on 4 sample(s)" in capsys.readouterr().err


def test_images_and_methods(tiny_mlir: str, tmp_path: Path) -> None:
    from PIL import Image

    d = tmp_path / "imgs"
    d.mkdir()
    rng = np.random.default_rng(2)
    for i in range(3):
        Image.fromarray(rng.integers(0, 255, (20, 24, 3), dtype=np.uint8)).save(d / f"{i}.png")
    (d / "notes.txt").write_text("ignored")
    for method in ("max", "use_mse", "percentile9999", "aciq_gauss", "aciq_laplace"):
        out = tmp_path / f"t_{method}"
        flag = "--cali_method" if method.startswith("use_") else "--calibration_method"
        assert (
            main([tiny_mlir, "--dataset", str(d), flag, method, "--tune_num", "0", "-o", str(out), "-q"]) == 0
        )
        t = read_calibration_table(str(out))
        assert t.sample_num == 3 and t.tune_num is None
        # preprocessed with the top.Input attributes: (pixel - 127.5) / 64 lies in [-2, 2]
        assert t["x"].min >= -2.0 and t["x"].max <= 2.0


def test_data_list(tiny_mlir: str, tmp_path: Path) -> None:
    d = tmp_path / "npy"
    d.mkdir()
    rng = np.random.default_rng(3)
    for i in range(2):
        np.save(d / f"{i}.npy", rng.standard_normal((1, 3, 16, 16)).astype(np.float32))
    lst = tmp_path / "list.txt"
    lst.write_text("npy/0.npy\n\nnpy/1.npy\n")
    out = tmp_path / "t"
    assert calibrate_main([tiny_mlir, "--data_list", str(lst), "--tune_num", "1", "-o", str(out), "-q"]) == 0
    assert read_calibration_table(str(out)).sample_num == 2


@pytest.mark.parametrize(
    ("args", "msg"),
    [
        (["--dataset", "{tmp}/missing"], "dataset '{tmp}/missing' does not exist"),
        (["--dataset", "{tmp}/empty"], "has no images"),
        (["--data_list", "{tmp}/nolist.txt"], "data list '{tmp}/nolist.txt' does not exist"),
        (
            ["--dataset", "{tmp}/bad_shape"],
            "input 'x' has shape [1, 3, 8, 8] but the model expects [1, 3, 16, 16]",
        ),
        (["--dataset", "{tmp}/bad_name"], "missing input(s) 'x'"),
        (["--dataset", "{tmp}/corrupt"], "cannot be read"),
        (["--dataset", "{tmp}/empty", "--data_list", "{tmp}/l"], "either --dataset or --data_list"),
        ([], "no calibration data"),
        (
            ["--dataset", "{tmp}/empty", "--outlier_ratio", "-1"],
            "--outlier_ratio must be a finite number >= 0",
        ),
        (["--dataset", "{tmp}/empty", "--asym_tail", "nan"], "--asym_tail must be a finite number >= 0"),
        (
            ["--dataset", "{tmp}/empty", "--conv_outlier_ratio", "inf"],
            "--conv_outlier_ratio must be a finite number >= 0",
        ),
    ],
)
def test_bad_inputs(
    tiny_mlir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], msg: str
) -> None:
    (tmp_path / "empty").mkdir()
    _npz_dataset(tmp_path / "bad_shape", 1, (1, 3, 8, 8))
    (tmp_path / "bad_name").mkdir()
    np.savez(tmp_path / "bad_name" / "a.npz", x=np.zeros((1, 3, 16, 16), np.float32), z=np.zeros(1))
    np.savez(tmp_path / "bad_name" / "b.npz", q=np.zeros((1, 3, 16, 16), np.float32), z=np.zeros(1))
    (tmp_path / "corrupt").mkdir()
    (tmp_path / "corrupt" / "a.npz").write_bytes(b"not a zip")
    out = tmp_path / "table"
    argv = [tiny_mlir, *(a.format(tmp=tmp_path) for a in args), "-o", str(out), "-q"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert msg.format(tmp=tmp_path) in err, err
    assert err.startswith("run_calibration: error: ") and "Traceback" not in err
    assert not out.exists()  # never a half-written table


def test_bad_model_and_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = _npz_dataset(tmp_path / "ds", 1)
    assert main([str(tmp_path / "nope.mlir"), "--dataset", str(ds), "-o", str(tmp_path / "t")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["m.mlir", "--dataset", str(ds)]) == 2  # -o is required
    assert main(["m.mlir", "-o", "t", "--calibration_method", "entropy"]) == 2
    assert "invalid method 'entropy'" in capsys.readouterr().err
    assert main(["m.mlir", "-o", str(tmp_path / "nodir" / "t"), "--dataset", str(ds)]) == 1
    assert "directory" in capsys.readouterr().err


def test_multi_input_npz_and_list(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    import lamina.api as lm

    nodes = [
        helper.make_node("Add", ["a", "b"], ["s"], name="add"),
        helper.make_node("Mul", ["s", "a"], ["m"], name="mul"),
    ]
    g = helper.make_graph(
        nodes,
        "two",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4]),
        ],
        [helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 4])],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "two.onnx"))
    mlir = str(lm.transform(str(tmp_path / "two.onnx"), mlir=str(tmp_path / "two.mlir")).mlir)
    ds = tmp_path / "ds"
    ds.mkdir()
    a = np.array([[1, -2, 3, 0.5]], np.float32)
    b = np.array([[0.5, 0.5, -8, 1]], np.float32)
    np.savez(ds / "0.npz", a=a, b=b)
    out = tmp_path / "t"
    assert main([mlir, "--dataset", str(ds), "--calibration_method", "max", "-o", str(out), "-q"]) == 0
    t = read_calibration_table(str(out))
    assert t["a"].threshold == pytest.approx(3.0) and t["b"].threshold == pytest.approx(8.0)
    assert t["s"].threshold == pytest.approx(5.0) and t["m"].threshold == pytest.approx(15.0)
    # a data list: one line per sample, one .npy per input
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    lst = tmp_path / "list.txt"
    lst.write_text("a.npy,b.npy\n")
    assert main([mlir, "--data_list", str(lst), "--calibration_method", "max", "-o", str(out), "-q"]) == 0
    assert read_calibration_table(str(out))["m"].threshold == pytest.approx(15.0)
    lst.write_text("a.npy\n")
    assert main([mlir, "--data_list", str(lst), "-o", str(out), "-q"]) == 1


def test_search_qtable(tiny_mlir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--search search_qtable: calibrates, then writes a qtable (TPU-MLIR format) and the refined
    table; an unreachable target fails with exit 1, flags without --search are rejected (exit 2)."""
    from lamina.dialects.tpu.tables import read_calibration_table, read_qtable

    ds = _npz_dataset(tmp_path / "ds", 6)
    table, qtable = tmp_path / "t", tmp_path / "q"
    args = [tiny_mlir, "--dataset", str(ds), "--tune_num", "0", "-o", str(table), "-q"]
    rc = main([*args, "--search", "search_qtable", "--expected_cos", "0.9", "--quantize_table", str(qtable)])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "layers in float" in err and f"wrote {qtable}" in err
    modes = read_qtable(str(qtable))
    assert all(m in ("F32", "F16", "BF16", "INT8") for m in modes.values())
    assert len(read_calibration_table(str(table))) > 0
    rc = main([*args, "--search", "search_qtable", "--expected_cos", "1.0", "--max_float_layers", "0",
               "--quantize_table", str(qtable)])  # fmt: skip
    assert rc == 1 and "not reached" in capsys.readouterr().err
    assert main([*args, "--quantize_table", str(qtable)]) == 2
    assert main([*args, "--search", "search_qtable"]) == 2


def test_search_qtable_task_objective(
    tiny_mlir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--task seg --expected_task: the search scores the arg-max map beside the cosine and says
    both; --fp_type is the floated layers' mode; the task flags are checked before calibrating."""
    from lamina.dialects.tpu.tables import read_qtable

    ds = _npz_dataset(tmp_path / "ds", 6)
    table, qtable = tmp_path / "t", tmp_path / "q"
    args = [tiny_mlir, "--dataset", str(ds), "--tune_num", "0", "-o", str(table), "-q", "--search", "search_qtable",
            "--quantize_table", str(qtable)]  # fmt: skip
    rc = main([*args, "--expected_cos", "0.9", "--task", "seg", "--expected_task", "0.5", "--fp_type", "F16"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "all-INT8 cosine" in err and ", task seg " in err and "(expected 0.9, task seg 0.5)" in err
    assert "layers in float (F16, " in err
    assert all(m in ("F16", "F32") for m in read_qtable(str(qtable)).values())
    # unreachable: exit 1, naming the task target and the limit
    rc = main([*args, "--task", "seg", "--expected_task", "1.0", "--max_float_layers", "0"])
    err = capsys.readouterr().err
    assert rc == 1 and "expected cosine 0.99 and task seg score 1.0 not reached" in err, err
    assert "--max_float_layers raises the limit" in err
    # usage: the flags go together, and need --search
    assert main([*args, "--task", "seg"]) == 2
    assert main([*args, "--expected_task", "0.9"]) == 2
    assert main([*args[:7], "--task", "seg", "--expected_task", "0.9"]) == 2
    assert main([*args, "--task", "seg", "--expected_task", "1.5"]) == 1
    assert "--expected_task must be a score in (0, 1]" in capsys.readouterr().err
    assert main([*args, "--task", "det", "--expected_task", "0.9"]) == 1
    assert "needs an output of shape" in capsys.readouterr().err


@pytest.fixture(scope="module")
def masked_mlir(tmp_path_factory: pytest.TempPathFactory) -> str:
    pytest.importorskip("onnx")
    import sys

    import lamina.api as lm

    sys.path.insert(0, str(Path(__file__).parents[1] / "quant"))
    import masked_models as mm

    d = tmp_path_factory.mktemp("calmask")
    path = mm.encoder(d / "enc.onnx", "additive", pad_value=1000.0)
    return str(lm.transform(path, model_name="enc", mlir=str(d / "enc.mlir")).mlir)


def _masked_dataset(d: Path) -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).parents[1] / "quant"))
    import masked_models as mm

    d.mkdir()
    for i, s in enumerate(mm.samples(6)):
        np.savez(d / f"s{i}.npz", **s)
    return d


def test_mask_input(masked_mlir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = _masked_dataset(tmp_path / "ds")
    out = tmp_path / "auto_cali_table"
    assert main([masked_mlir, "--dataset", str(ds), "--tune_num", "0", "-o", str(out), "-q"]) == 0
    err = capsys.readouterr().err
    assert "detected mask input 'mask' [1, 8]" in err and "statistics over the kept positions" in err
    # the PAD embedding (1000 larger) is left out of the embedding's statistics
    assert read_calibration_table(str(out)).thresholds["x"].threshold < 10
    given = tmp_path / "given_cali_table"
    assert (
        main(
            [
                masked_mlir,
                "--dataset",
                str(ds),
                "--tune_num",
                "0",
                "--mask_input",
                "mask",
                "-o",
                str(given),
                "-q",
            ]
        )
        == 0
    )
    assert "given mask input 'mask'" in capsys.readouterr().err
    off = tmp_path / "off_cali_table"
    assert (
        main(
            [
                masked_mlir,
                "--dataset",
                str(ds),
                "--tune_num",
                "0",
                "--mask_input",
                "none",
                "-o",
                str(off),
                "-q",
            ]
        )
        == 0
    )
    assert "no attention mask (--mask_input none): statistics over every position" in capsys.readouterr().err
    assert read_calibration_table(str(off)).thresholds["x"].threshold > 900


def test_mask_input_bad_names(masked_mlir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = _masked_dataset(tmp_path / "ds")
    out = tmp_path / "t"
    assert main([masked_mlir, "--dataset", str(ds), "--mask_input", "nope", "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert "error: --mask_input 'nope' is not an input of the model (inputs: ids, mask)" in err
    assert main([masked_mlir, "--dataset", str(ds), "--mask_input", "ids", "-o", str(out), "-q"]) == 1
    assert "--mask_input 'ids' is not an attention mask" in capsys.readouterr().err
    assert not out.exists()


def test_no_mask_found(tiny_mlir: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ds = _npz_dataset(tmp_path / "ds", 2)
    assert main([tiny_mlir, "--dataset", str(ds), "--tune_num", "0", "-o", str(tmp_path / "t"), "-q"]) == 0
    assert "no attention-mask input found: statistics over every position" in capsys.readouterr().err

"""model_deploy: flag validation (every invalid combination is one message, exit 2), the pipeline it
runs, and (when the tpu lowering is registered) the files written and the comparison verdict."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from lamina.flows import deploy as dep
from lamina.flows.deploy import DEFAULT_TOLERANCE
from lamina.quant.deploy import deploy_pipeline
from lamina.tools.deploy import deploy_main, main
from lamina.tools.transform import main as transform_main


@pytest.fixture
def top(tmp_path: Path, conv_model: str) -> dict[str, str]:
    """model_transform of the conv/relu/add model: the .mlir, its input and its top outputs."""
    x = tmp_path / "in.npz"
    np.savez(x, x=np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32))
    mlir = tmp_path / "conv.mlir"
    rc = transform_main(
        [
            "--model_def",
            conv_model,
            "--input_shapes",
            "[[1,3,8,8]]",
            "--test_input",
            str(x),
            "--mlir",
            str(mlir),
        ]
    )
    assert rc == 0
    return {
        "mlir": str(mlir),
        "input": str(tmp_path / "conv_in_f32.npz"),
        "ref": str(tmp_path / "conv_top_outputs.npz"),
        "dir": str(tmp_path),
    }


def _table(path: Path, names: dict[str, float]) -> str:
    lines = ["# genetated time: test", "###", "# op_name threshold min max"]
    lines += [f"{n} {t} {-t} {t}" for n, t in names.items()]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _err(capsys: pytest.CaptureFixture[str]) -> str:
    return capsys.readouterr().err


# ---- validation --------------------------------------------------------------------------------------


def test_int8_needs_calibration_table(top: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--mlir", top["mlir"], "--quantize", "INT8", "--model", f"{top['dir']}/m.bmodel"])
    assert rc == 2
    assert "--quantize INT8 needs --calibration_table" in _err(capsys)


def test_asymmetric_needs_int8(top: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--mlir", top["mlir"], "--quantize", "F16", "--asymmetric", "--model", f"{top['dir']}/m"])
    assert rc == 2
    assert "--asymmetric applies to --quantize INT8 only, not F16" in _err(capsys)


def test_int_forms_is_checked(top: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["--mlir", top["mlir"], "--quantize", "F16", "--int_forms", "all", "--model", f"{top['dir']}/m"]
    )
    assert rc == 2
    assert "--int_forms applies to --quantize INT8 only, not F16" in _err(capsys)
    table = _table(Path(top["dir"]) / "t", {"x": 1.0})
    rc = main(["--mlir", top["mlir"], "--quantize", "INT8", "--calibration_table", table,
               "--int_forms", "lut,gelu", "--model", f"{top['dir']}/m"])  # fmt: skip
    assert rc == 2
    assert "--int_forms: unknown integer form 'gelu'" in _err(capsys)


def test_unknown_processor_and_mode(top: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--mlir", top["mlir"], "--quantize", "F32", "--processor", "bm1684x", "--model", "m"])
    assert rc == 2
    err = _err(capsys)
    assert "--processor 'bm1684x' is not supported" in err and "cpu, lnpu, lnpu-edge" in err
    assert main(["--mlir", top["mlir"], "--quantize", "INT4", "--model", "m"]) == 2
    assert "--quantize must be one of F32, F16, BF16, INT8" in _err(capsys)


def test_compare_flags_need_test_input(top: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    base = ["--mlir", top["mlir"], "--quantize", "F32", "--model", f"{top['dir']}/m"]
    assert main([*base, "--test_reference", top["ref"]]) == 2
    assert "--test_reference needs --test_input" in _err(capsys)
    assert main([*base, "--compare_all"]) == 2
    assert "--compare_all needs --test_input" in _err(capsys)
    assert main([*base, "--test_input", top["input"], "--tolerance", "0.9,0.9"]) == 2
    assert "--tolerance needs --test_reference" in _err(capsys)
    assert (
        main([*base, "--test_input", top["input"], "--test_reference", top["ref"], "--tolerance", "2,1"]) == 2
    )
    assert "at most 1.0" in _err(capsys)


def test_missing_files(top: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--mlir", top["dir"] + "/nope.mlir", "--quantize", "F32", "--model", "m"]) == 2
    assert "--mlir" in _err(capsys) and "does not exist" in capsys.readouterr().err + "does not exist"
    assert main(["--mlir", top["mlir"], "--quantize", "F32", "--model", "/no/such/dir/m"]) == 2
    assert "directory '/no/such/dir' does not exist" in _err(capsys)


def test_qtable_unknown_op_and_bad_mode(
    tmp_path: Path, top: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    q = tmp_path / "q"
    q.write_text("# op_name mode\nc F16\nnot_an_op F32\n")
    rc = main(
        [
            "--mlir",
            top["mlir"],
            "--quantize",
            "F32",
            "--quantize_table",
            str(q),
            "--model",
            str(tmp_path / "m"),
        ]
    )
    assert rc == 2
    err = _err(capsys)
    assert f"{q}: error: 1 op(s) not in the model: 'not_an_op'" in err
    q.write_text("c INT4\n")
    assert main(["--mlir", top["mlir"], "--quantize", "F32", "--quantize_table", str(q), "--model", "m"]) == 2
    assert "INT4 cannot be lowered yet" in _err(capsys)
    q.write_text("c FOO\n")
    assert main(["--mlir", top["mlir"], "--quantize", "F32", "--quantize_table", str(q), "--model", "m"]) == 2
    assert f"{q}:1:" in _err(capsys)


def test_calibration_table_must_be_used(
    tmp_path: Path, top: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    t = _table(tmp_path / "t", {"x": 3.0, "c": 4.0, "r": 4.0, "y": 8.0})
    rc = main(
        ["--mlir", top["mlir"], "--quantize", "F16", "--calibration_table", t, "--model", str(tmp_path / "m")]
    )
    assert rc == 2
    assert "--calibration_table is not used by --quantize F16" in _err(capsys)
    q = tmp_path / "q"
    q.write_text("c INT8\n")
    rc = main(
        [
            "--mlir",
            top["mlir"],
            "--quantize",
            "F16",
            "--quantize_table",
            str(q),
            "--model",
            str(tmp_path / "m"),
        ]
    )
    assert rc == 2
    assert "puts 1 op(s) in INT8 (e.g. 'c'): that needs --calibration_table" in _err(capsys)


def test_pipeline_and_defaults() -> None:
    p = deploy_pipeline("INT8", True, "/t/cali table", "/t/q")
    assert p.startswith('builtin.module(import-calibration-table{file="/t/cali table" asymmetric=true},')
    assert "convert-top-to-tpu{mode=INT8 asymmetric=true qtable=/t/q}" in p
    assert "int-forms" not in p
    assert "convert-top-to-tpu{mode=INT8 asymmetric=false int-forms=all}" in deploy_pipeline(
        "INT8", False, None, None, "all"
    )
    assert deploy_pipeline("F16", False, None, None).startswith(
        "builtin.module(convert-top-to-tpu{mode=F16 asymmetric=false},"
    )
    assert DEFAULT_TOLERANCE == {
        "INT8": (0.9, 0.8),
        "F16": (0.99, 0.9),
        "BF16": (0.99, 0.9),
        "F32": (0.99, 0.99),
    }
    o = dep.DeployOptions(mlir="a.mlir", quantize="BF16", model="out/r18.bmodel")
    assert o.prefix == "out/r18" and o.effective_tolerance == (0.99, 0.9)
    assert dep.DeployOptions(mlir="a", quantize="F32", model="r18.v2").prefix == "r18.v2"


def test_lamina_deploy_verb_usage(capsys: pytest.CaptureFixture[str]) -> None:
    assert deploy_main(["--quantize", "F32"]) == 2
    assert "lamina deploy" in _err(capsys)


# ---- lowering (needs the tpu dialect's convert-top-to-tpu) ---------------------------------------------


@pytest.mark.parametrize("mode", ["F32", "F16", "BF16"])
def test_float_modes_write_and_pass(
    tmp_path: Path, top: dict[str, str], mode: str, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / f"conv_{mode.lower()}"
    rc = main(
        [
            "--mlir",
            top["mlir"],
            "--quantize",
            mode,
            "--test_input",
            top["input"],
            "--test_reference",
            top["ref"],
            "--model",
            f"{prefix}.bmodel",
        ]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "npz compare PASSED" in out.out
    text = Path(f"{prefix}_tpu.mlir").read_text()
    assert "tpu." in text
    with np.load(f"{prefix}_tpu_outputs.npz") as z:
        assert z["y"].dtype == np.float32 and z["y"].shape == (1, 4, 8, 8)


def test_int8_with_table_and_first_diverging(
    tmp_path: Path, top: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    from lamina.frontends.model_io import load_npz, parse_mlir_file
    from lamina.quant.calibration import calibrate

    module, _ = parse_mlir_file(top["mlir"])
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(8)]
    table = str(tmp_path / "cali")
    calibrate(module, samples, method="max").table.write(table)
    prefix = str(tmp_path / "conv_int8")
    args = ["--mlir", top["mlir"], "--quantize", "INT8", "--calibration_table", table,
            "--test_input", top["input"], "--test_reference", top["ref"], "--model", prefix]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    outs = load_npz(prefix + "_tpu_outputs.npz")
    assert outs["y"].dtype == np.float32
    # The written _tpu.mlir, re-read by model_runner (the command model_deploy prints), gives the
    # same outputs bit for bit (a re-parsed module must resolve every op to the same class).
    from lamina.tools.runner import main as runner_main

    rerun = str(tmp_path / "rerun.npz")
    assert runner_main(["--input", top["input"], "--model", prefix + "_tpu.mlir", "--output", rerun]) == 0
    assert np.array_equal(load_npz(rerun)["y"], outs["y"])
    assert main([*args, "--asymmetric", "--compare_all"]) == 0, capsys.readouterr().err
    assert len(load_npz(prefix + "_tpu_outputs.npz")) >= 3  # every tensor
    capsys.readouterr()
    assert main([*args, "--tolerance", "0.999999,0.999999"]) == 1
    err = _err(capsys)
    assert "outside tolerance 0.999999,0.999999; first diverging layers: " in err


def test_int8_per_channel_transformer_block_writes_and_rereads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A residual block with an outlier channel and a scalar constant: run_calibration writes
    #channel_th, model_deploy writes per-axis types and a 0-d INT8 constant into its files, and
    model_runner re-reads them to the same outputs."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    from lamina.frontends.model_io import load_npz
    from lamina.tools.calibrate import main as calibrate_main
    from lamina.tools.runner import main as runner_main

    rng = np.random.default_rng(0)
    w = (rng.standard_normal((16, 16)) * 0.2).astype(np.float32)
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"], name="fc"),
        helper.make_node("Add", ["m", "B"], ["fc_out"], name="fc_bias"),
        helper.make_node("Add", ["fc_out", "x"], ["res"], name="res"),
        helper.make_node("LayerNormalization", ["res", "G", "Z"], ["ln"], name="ln", axis=-1),
        helper.make_node("Mul", ["ln", "S"], ["y"], name="scale"),
    ]
    inits = [
        numpy_helper.from_array(w, "W"),
        numpy_helper.from_array(np.full(16, 0.1, np.float32), "B"),
        numpy_helper.from_array(np.ones(16, np.float32), "G"),
        numpy_helper.from_array(np.zeros(16, np.float32), "Z"),
        numpy_helper.from_array(np.array(0.5, np.float32), "S"),
    ]
    g = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits,
    )  # fmt: skip
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(tmp_path / "block.onnx"))

    def sample() -> np.ndarray:
        x = rng.standard_normal((1, 4, 16)).astype(np.float32)
        x[..., 3] *= 100.0  # the outlier channel
        return x

    np.savez(tmp_path / "in.npz", x=sample())
    mlir = str(tmp_path / "block.mlir")
    assert transform_main(["--model_def", str(tmp_path / "block.onnx"), "--test_input",
                           str(tmp_path / "in.npz"), "--mlir", mlir]) == 0  # fmt: skip
    (tmp_path / "cal").mkdir()
    for i in range(8):
        np.savez(tmp_path / "cal" / f"s{i}.npz", x=sample())
    table = str(tmp_path / "cali")
    capsys.readouterr()
    assert calibrate_main([mlir, "--dataset", str(tmp_path / "cal"), "--calibration_method", "max",
                           "-o", table, "-q"]) == 0  # fmt: skip
    assert "with outlier channels (#channel_th)" in capsys.readouterr().err
    assert "#channel_th res 2 " in Path(table).read_text()
    prefix = str(tmp_path / "block_int8")
    args = ["--mlir", mlir, "--quantize", "INT8", "--calibration_table", table, "--test_input",
            str(tmp_path / "block_in_f32.npz"), "--test_reference", str(tmp_path / "block_top_outputs.npz"),
            "--model", prefix]  # fmt: skip
    assert main(args) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    # the summary line: res carries per-channel activations (fc reads the outlier input x on one
    # int16 grid: the wide_input form); the LayerNorm runs in F32
    assert "(INT8, " in out and "ops INT8 (1 with per-channel activations), 1 op F32, " in out, out
    text = Path(prefix + "_tpu.mlir").read_text()
    assert "!quant.uniform<i8:f32:2, {" in text and "!quant.uniform<i16<-32767:32767>:f32, " in text
    rerun = str(tmp_path / "rerun.npz")
    assert runner_main(["--input", str(tmp_path / "block_in_f32.npz"), "--model", prefix + "_tpu.mlir",
                        "--output", rerun]) == 0  # fmt: skip
    assert np.array_equal(load_npz(rerun)["y"], load_npz(prefix + "_tpu_outputs.npz")["y"])


# ---- --task ----------------------------------------------------------------------------------------


def test_task_checks_and_their_errors(
    tmp_path: Path, top: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``--task``: one line per output beside the cosine lines; a score under ``--task_tolerance``
    fails (exit 1); a task no output fits is one error before any file is written; the task's flags
    without it, or without the test sets, are usage errors (exit 2)."""
    base = [
        "--mlir",
        top["mlir"],
        "--quantize",
        "F16",
        "--test_input",
        top["input"],
        "--test_reference",
        top["ref"],
    ]
    assert main([*base, "--model", str(tmp_path / "a.bmodel"), "--task", "seg"]) == 0
    out = capsys.readouterr().out
    assert re.search(
        r"^task seg \[y\]: mean IoU 1\.0000 over [1-4] class\(es\), pixel agreement 1\.0000$", out, re.M
    )
    assert "--task seg --model" in out  # the command line says it
    assert (
        main([*base, "--model", str(tmp_path / "b.bmodel"), "--task", "embed", "--task_tolerance", "1"]) == 1
    )
    cap = capsys.readouterr()
    line = r"^task embed \[y\]: 32 token vector\(s\) of 8: min cosine [01]\.\d{6}, .* \[FAILED\]$"
    assert re.search(line, cap.out, re.M)
    assert re.search(r"model_deploy: error: task embed score under --task_tolerance 1: y 0\.9{4,}\d", cap.err)
    before = set(Path(top["dir"]).iterdir())
    assert main([*base, "--model", str(tmp_path / "c.bmodel"), "--task", "det"]) == 1
    assert (
        "--task det needs an output of shape [batch, 4 + classes, boxes]; the outputs are: y [1, 4, 8, 8]"
        in _err(capsys)
    )
    assert set(Path(top["dir"]).iterdir()) == before  # nothing written (c_tpu.mlir, ...)
    for extra, msg in (
        (["--task", "pose"], "--task must be one of cls, det, seg, ocr, embed, got 'pose'"),
        (["--task_threshold", "0.4"], "--task_threshold needs --task"),
        (["--task", "seg", "--task_tolerance", "1.5"], "--task_tolerance is a score in [0, 1], got 1.5"),
    ):
        assert main([*base, "--model", str(tmp_path / "d.bmodel"), *extra]) == 2
        assert msg in _err(capsys)
    no_ref = ["--mlir", top["mlir"], "--quantize", "F16", "--test_input", top["input"], "--task", "cls"]
    assert main([*no_ref, "--model", str(tmp_path / "e.bmodel")]) == 2
    assert "--task needs --test_input and --test_reference" in _err(capsys)


def test_task_through_the_api(top: dict[str, str]) -> None:
    import lamina.api as api
    from lamina.support.errors import LaminaError

    res = api.deploy(top["mlir"], "F32", test_input=top["input"], test_reference=top["ref"], task="embed",
                     task_tolerance=0.999)  # fmt: skip
    (r,) = res.result.task_reports
    assert res.passed and r.task == "embed" and r.output == "y" and r.score > 0.999999
    with pytest.raises(LaminaError, match="task_threshold must be a finite number"):
        api.deploy(top["mlir"], "F32", test_input=top["input"], test_reference=top["ref"], task="det",
                   task_threshold="0.3")  # fmt: skip


def test_mask_input_compares_kept_positions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A padded test input: the hidden states are compared over the real tokens (the padded ones,
    whose PAD embedding is 1000 larger, are clipped by mask-aware calibration); --mask_input none
    compares them all and fails."""
    pytest.importorskip("onnx")
    import sys

    import lamina.api as lm
    from lamina.frontends.model_io import run_top_module

    sys.path.insert(0, str(Path(__file__).parents[1] / "quant"))
    import masked_models as mm

    onnx_path = mm.encoder(tmp_path / "enc.onnx", "additive", pad_value=1000.0)
    mlir = str(lm.transform(onnx_path, model_name="enc", mlir=str(tmp_path / "enc.mlir")).mlir)
    samples = mm.samples(8)
    lm.calibrate(mlir, samples=samples, tune_num=0, calibration_table=str(tmp_path / "t"))
    s = samples[1]  # 3..7 real tokens of 8
    np.savez(tmp_path / "in.npz", **s)
    np.savez(tmp_path / "ref.npz", **run_top_module(lm.load(mlir).module, s))
    args = ["--mlir", mlir, "--quantize", "INT8", "--calibration_table", str(tmp_path / "t"),
            "--test_input", str(tmp_path / "in.npz"), "--test_reference", str(tmp_path / "ref.npz"),
            "--tolerance", "0.99,0.9", "--debug"]  # fmt: skip
    assert main([*args, "--model", str(tmp_path / "m")]) == 0
    out = capsys.readouterr().out
    n = int(s["mask"].sum())
    assert f"# compared over the {n} of 8 position(s) kept by mask input 'mask'" in out
    assert f"over kept positions ({n * mm.H} of {8 * mm.H})" in out
    assert main([*args, "--mask_input", "none", "--model", str(tmp_path / "m2")]) == 1
    assert "over kept positions" not in capsys.readouterr().out
    assert main([*args, "--mask_input", "nope", "--model", str(tmp_path / "m3")]) == 2
    assert "'nope' is not an input of the model (inputs: ids, mask)" in capsys.readouterr().err

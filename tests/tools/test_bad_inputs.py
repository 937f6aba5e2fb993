"""Bad input to every command: one clear message naming the file or flag, exit 1 (2 for usage), no
traceback, no "internal error", every file in the directory byte-identical and nothing new written.

Each case runs a command in process (its ``main(argv)``) in a copy of a small workspace: a 1x3x8x8
conv model, its top .mlir and weights from model_transform, test inputs and outputs, a calibration
table, and some bad files (empty, binary garbage, a FIFO (made in each copy), a directory, a symlink to the model).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from conftest import conv_relu_add_model  # tests/tools/conftest.py (this directory is on sys.path)

from lamina.tools import calibrate, deploy, main, model_tool, npz_tool, opt, runner, transform

SHAPES = ["--input_shapes", "[[1,3,8,8]]"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnx")
    d = tmp_path_factory.mktemp("ws")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        conv_relu_add_model(d / "m.onnx")
        rng = np.random.default_rng(0)
        np.savez("in.npz", x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
        np.savez("shape.npz", x=np.zeros((1, 3, 4, 4), np.float32))
        np.savez("named.npz", a=np.zeros((1, 3, 8, 8), np.float32), b=np.zeros(1, np.float32))
        np.save("in.npy", np.zeros((1, 3, 8, 8), np.float32))
        os.mkdir("ds")
        for i in range(2):
            np.savez(f"ds/{i}.npz", x=rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
        assert (
            transform.main(["--model_def", "m.onnx", *SHAPES, "--test_input", "in.npz", "--mlir", "m.mlir"])
            == 0
        )
        assert (
            calibrate.main(["m.mlir", "--dataset", "ds", "-o", "m_cali_table", "-q", "--tune_num", "0"]) == 0
        )
        shutil.copy("m_top_outputs.npz", "o_tpu_outputs.npz")
        assert deploy.main([*F32, "--model", "m"]) == 0  # m_tpu.mlir: an already deployed module
        _npu_files()
        Path("empty").write_bytes(b"")
        Path("garbage.bin").write_bytes(bytes(range(256)) * 4)
        Path("garbage.jpg").write_bytes(bytes(range(256)))
        Path("garbage.npz").write_bytes(b"PK\x03\x04 not really a zip")
        Path("list.bin").write_bytes(b"\x00\xff\xfe binary \x00")
        Path("nofunc.mlir").write_text("module {\n}\n")
        os.mkdir("adir")
        os.mkdir("imgs")
        shutil.copy("garbage.jpg", "imgs/a.jpg")
        os.symlink("m.onnx", "link.onnx")
        _tflite_files()
    finally:
        os.chdir(cwd)
    return d


def _npu_files() -> None:
    """``n.bmodel`` (the conv model compiled for lnpu, a ``.lamina`` file), half of it, chip files: a
    good one (``chip.json``), invalid JSON, an unknown key; ``o_model_outputs.npz`` (what a deploy
    to ``o.bmodel`` would write its compiled model's outputs to)."""
    import json

    assert deploy.main([*F32, "--processor", "lnpu", "--model", "n.bmodel"]) == 0
    raw = Path("n.bmodel").read_bytes()
    Path("trunc.bmodel").write_bytes(raw[: len(raw) // 2])
    lnpu = Path(deploy.__file__).parents[1] / "targets" / "npu" / "chips" / "lnpu.json"
    chip = {**json.loads(lnpu.read_text()), "name": "mychip"}
    Path("chip.json").write_text(json.dumps(chip))
    Path("badjson.json").write_text('{"name": "x",\n  "lanes": 8,,\n}\n')
    Path("badkey.json").write_text(json.dumps({**chip, "warp_drive": 1}))
    shutil.copy("m_top_outputs.npz", "o_model_outputs.npz")


def _tflite_files() -> None:
    """``t.tflite`` (y = relu(x + c), x [1, 4]), ``q.tflite`` (the same in full integer) and broken
    ones, written by the TFLite tests' flatbuffer builder."""
    import importlib.util

    pytest.importorskip("tflite")
    path = Path(__file__).parents[1] / "frontends" / "tflite" / "builder.py"
    spec = importlib.util.spec_from_file_location("lamina_tests_tflite_builder", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def model(quantized: bool = False, version: int = 3, buffer: int | None = None) -> bytes:
        m = mod.ModelBuilder()
        m.version = version
        q = (0.02, -3, 0) if quantized else None
        dt = np.int8 if quantized else np.float32
        x = m.input("x", [1, 4], dt, quant=q)
        c = m.const("c", np.array([1, -2, 3, -4], dt), quant=q)
        if buffer is not None:
            m.tensors[c]["buffer"] = buffer
        a = m.op("ADD", [x, c], [1, 4], "a", out_dtype=dt, out_quant=q)
        m.output(m.op("RELU", [a], [1, 4], "y", out_dtype=dt, out_quant=q))
        return m.build()

    Path("t.tflite").write_bytes(model())
    Path("q.tflite").write_bytes(model(quantized=True))
    Path("v2.tflite").write_bytes(model(version=2))
    Path("buf.tflite").write_bytes(model(buffer=99))
    Path("trunc.tflite").write_bytes(model()[:100])
    Path("junk.tflite").write_bytes(bytes(range(256)))
    np.savez("tin.npz", x=np.zeros((1, 4), np.float32))
    np.savez("qin.npz", x=np.zeros((1, 4), np.int8))


def _snapshot(d: Path) -> dict[str, str]:
    out = {}
    for p in sorted(d.rglob("*")):
        rel = str(p.relative_to(d))
        if p.is_symlink():
            out[rel] = "link:" + os.readlink(p)
        elif p.is_file():
            out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[rel] = "dir" if p.is_dir() else "special"
    return out


Tool = Callable[[list[str]], int]
T, R, N, C, D, OPT = transform.main, runner.main, npz_tool.main, calibrate.main, deploy.main, opt.main
MT = model_tool.main
F32 = ["--mlir", "m.mlir", "--quantize", "F32"]
NPU = [*F32, "--processor", "lnpu"]
RUN_N = ["--input", "m_in_f32.npz", "--model", "n.bmodel"]

# (id, command, argv, exit status, fragments the message must contain). "{d}" is the workspace.
CASES: list[tuple[str, Tool, list[str], int, list[str]]] = [
    # ---- outputs that are an input, an input's weight file or another output
    ("transform-mlir-is-model", T, ["--model_def", "m.onnx", "--mlir", "m.onnx"], 1, ["--mlir 'm.onnx'", "--model_def"]),
    ("transform-dot-slash", T, ["--model_def", "m.onnx", "--mlir", "./m.onnx"], 1, ["refusing to overwrite"]),
    ("transform-absolute", T, ["--model_def", "m.onnx", "--mlir", "{d}/m.onnx"], 1, ["refusing to overwrite"]),
    ("transform-symlink", T, ["--model_def", "m.onnx", "--mlir", "link.onnx"], 1, ["refusing to overwrite"]),
    ("transform-dotdot", T, ["--model_def", "m.onnx", "--mlir", "adir/../m.onnx"], 1, ["refusing to overwrite"]),
    ("transform-result-is-input", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "in.npz", "--test_result", "in.npz", "--mlir", "o.mlir"], 1, ["--test_result 'in.npz'", "--test_input"]),
    ("transform-result-is-mlir", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "in.npz", "--test_result", "o.mlir", "--mlir", "o.mlir"], 1, ["--test_result 'o.mlir'", "--mlir"]),
    ("transform-result-is-ref", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "in.npz", "--test_result", "o_ref_outputs.npz", "--mlir", "o.mlir", "--model_name", "o"], 1, ["onnxruntime reference"]),
    ("transform-result-is-in-f32", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "in.npz", "--test_result", "o_in_f32.npz", "--mlir", "o.mlir", "--model_name", "o"], 1, ["preprocessed inputs"]),
    ("transform-result-is-weights", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "in.npz", "--test_result", "o_top_weights.npz", "--mlir", "o.mlir", "--model_name", "o"], 1, ["weight file"]),
    ("runner-output-is-input", R, ["--input", "in.npz", "--model", "m.mlir", "--output", "in.npz"], 1, ["--output 'in.npz'", "--input"]),
    ("runner-output-is-model", R, ["--input", "in.npz", "--model", "m.onnx", "--output", "m.onnx"], 1, ["--model"]),
    ("runner-output-is-weights", R, ["--input", "in.npz", "--model", "m.mlir", "--output", "m_top_weights.npz"], 1, ["weight file of --model 'm.mlir'"]),
    ("compare-html-is-input", N, ["compare", "in.npz", "m_in_f32.npz", "--html", "m_in_f32.npz"], 1, ["--html", "refusing to overwrite"]),
    ("calibrate-o-is-model", C, ["m.mlir", "--dataset", "ds", "-o", "m.mlir"], 1, ["-o 'm.mlir'", "refusing"]),
    ("calibrate-o-is-weights", C, ["m.mlir", "--dataset", "ds", "-o", "m_top_weights.npz"], 1, ["weight file of the model"]),
    ("calibrate-o-is-qtable", C, ["m.mlir", "--dataset", "ds", "-o", "q", "--search", "search_qtable", "--quantize_table", "q"], 1, ["--quantize_table 'q'", "-o 'q'"]),
    ("opt-weights-is-input", OPT, ["m.mlir", "--external-weights", "m.mlir"], 1, ["--external-weights", "refusing"]),
    ("opt-weights-is-output", OPT, ["m.mlir", "-o", "out.mlir", "--external-weights", "out.mlir"], 1, ["two outputs"]),
    ("opt-o-is-input-weights", OPT, ["m.mlir", "-o", "m_top_weights.npz"], 1, ["weight file of the input"]),
    ("opt-o-is-input", OPT, ["m.mlir", "-o", "./m.mlir"], 1, ["refusing to overwrite"]),
    ("opt-weights-split", OPT, ["m.mlir", "--split-input-file", "--external-weights", "w.npz"], 2, ["--split-input-file"]),
    ("deploy-false-pass", D, [*F32, "--test_input", "m_in_f32.npz", "--test_reference", "o_tpu_outputs.npz", "--model", "o"], 1, ["--test_reference 'o_tpu_outputs.npz'"]),
    ("deploy-outputs-is-test-input", D, [*F32, "--test_input", "o_tpu_outputs.npz", "--model", "o.bmodel"], 1, ["--test_input"]),
    ("deploy-model-is-mlir", D, [*F32, "--model", "m.mlir"], 1, ["--model 'm.mlir'", "--mlir"]),
    ("deploy-tpu-mlir", D, ["--mlir", "m_tpu.mlir", "--quantize", "F32", "--model", "o2"], 1, ["already lowered to tpu"]),
    ("deploy-model-is-weights", D, [*F32, "--model", "m_top_weights.npz"], 1, ["weight file of --mlir"]),
    ("deploy-model-is-table", D, ["--mlir", "m.mlir", "--quantize", "INT8", "--calibration_table", "m_cali_table", "--model", "m_cali_table"], 1, ["--calibration_table"]),
    # ---- validate first: nothing is written when an input is bad
    ("transform-missing-test-input", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "nope.npz", "--mlir", "o.mlir"], 1, ["nope.npz", "does not exist"]),
    ("transform-test-input-shape", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "shape.npz", "--mlir", "o.mlir"], 1, ["shape.npz", "[1, 3, 4, 4]"]),
    ("transform-test-input-names", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "named.npz", "--mlir", "o.mlir"], 1, ["named.npz", "missing input(s) 'x'"]),
    ("transform-test-input-count", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "in.npy,in.npy", "--mlir", "o.mlir"], 1, ["2 file(s)", "1 input(s)"]),
    ("transform-bad-image", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "garbage.jpg", "--mlir", "o.mlir"], 1, ["garbage.jpg", "not a readable image"]),
    ("transform-test-input-fifo", T, ["--model_def", "m.onnx", *SHAPES, "--test_input", "fifo", "--mlir", "o.mlir"], 1, ["fifo"]),
    ("deploy-tolerance-5", D, [*F32, "--test_input", "m_in_f32.npz", "--test_reference", "m_top_outputs.npz", "--tolerance", "5,0.5", "--model", "o"], 2, ["--tolerance"]),
    ("deploy-corrupt-reference", D, [*F32, "--test_input", "m_in_f32.npz", "--test_reference", "garbage.npz", "--model", "o"], 1, ["--test_reference 'garbage.npz'"]),
    ("deploy-input-shape", D, [*F32, "--test_input", "shape.npz", "--model", "o"], 1, ["--test_input 'shape.npz'", "[1, 3, 4, 4]"]),
    ("deploy-empty-module", D, ["--mlir", "nofunc.mlir", "--quantize", "F32", "--model", "o"], 1, ["nofunc.mlir", "func.func @main"]),
    ("calibrate-qtable-nodir", C, ["m.mlir", "--dataset", "ds", "-o", "t", "--search", "search_qtable", "--quantize_table", "nodir/q"], 1, ["nodir", "does not exist"]),
    ("calibrate-o-nodir", C, ["m.mlir", "--dataset", "ds", "-o", "nodir/t"], 1, ["nodir", "does not exist"]),
    ("calibrate-expected-cos", C, ["m.mlir", "--dataset", "ds", "-o", "t", "--search", "search_qtable", "--quantize_table", "q", "--expected_cos", "5"], 1, ["--expected_cos"]),
    ("calibrate-bins-huge", C, ["m.mlir", "--dataset", "ds", "-o", "t", "--histogram_bin_num", "99999999999"], 1, ["--histogram_bin_num"]),
    ("calibrate-input-num-negative", C, ["m.mlir", "--dataset", "ds", "-o", "t", "--input_num", "-3"], 1, ["--input_num"]),
    ("calibrate-onnx-model", C, ["m.onnx", "--dataset", "ds", "-o", "t"], 1, ["m.onnx", "ONNX model"]),
    ("calibrate-binary-data-list", C, ["m.mlir", "--data_list", "list.bin", "-o", "t"], 1, ["list.bin", "not a text file"]),
    ("calibrate-bad-image", C, ["m.mlir", "--dataset", "imgs", "-o", "t", "-q"], 1, ["calibration sample", "a.jpg"]),
    # ---- inputs that are not regular files
    ("transform-model-dir", T, ["--model_def", "adir/"], 1, ["'adir/' is a directory"]),
    ("transform-model-fifo", T, ["--model_def", "fifo"], 1, ["'fifo' is a FIFO"]),
    ("runner-input-device", R, ["--input", "/dev/zero", "--model", "m.mlir", "--output", "o.npz"], 1, ["'/dev/zero' is a device"]),
    ("runner-model-fifo", R, ["--input", "in.npz", "--model", "fifo", "--output", "o.npz"], 1, ["'fifo' is a FIFO"]),
    ("runner-model-dir", R, ["--input", "in.npz", "--model", "adir", "--output", "o.npz"], 1, ["'adir' is a directory"]),
    ("compare-fifo", N, ["compare", "in.npz", "fifo"], 2, ["'fifo' is a FIFO"]),
    ("opt-fifo", OPT, ["fifo"], 1, ["'fifo' is a FIFO"]),
    ("opt-dir", OPT, ["adir"], 1, ["'adir' is a directory"]),
    ("calibrate-model-fifo", C, ["fifo", "--dataset", "ds", "-o", "t"], 1, ["'fifo' is a FIFO"]),
    # ---- once internal errors
    ("runner-no-func", R, ["--input", "in.npz", "--model", "nofunc.mlir", "--output", "o.npz"], 1, ["nofunc.mlir", "func.func @main"]),
    ("runner-empty-model", R, ["--input", "in.npz", "--model", "empty", "--output", "o.npz"], 1, ["'empty'", "func.func @main"]),
    ("opt-o-nodir", OPT, ["m.mlir", "-o", "nodir/x.mlir"], 1, ["nodir", "does not exist"]),
    ("example-workdir-is-file", main.main, ["example", "--workdir", "empty"], 1, ["--workdir", "not a directory"]),
    # ---- accepted but invalid
    ("transform-mean-nan", T, ["--model_def", "m.onnx", *SHAPES, "--mean", "nan", "--mlir", "o.mlir"], 1, ["--mean"]),
    ("transform-scale-inf", T, ["--model_def", "m.onnx", *SHAPES, "--scale", "inf", "--mlir", "o.mlir"], 1, ["--scale"]),
    ("transform-mean-empty", T, ["--model_def", "m.onnx", *SHAPES, "--mean", "", "--mlir", "o.mlir"], 1, ["--mean"]),
    ("transform-mlir-empty", T, ["--model_def", "m.onnx", "--mlir", ""], 1, ["--mlir is empty"]),
    ("transform-shapes-empty", T, ["--model_def", "m.onnx", "--input_shapes", "", "--mlir", "o.mlir"], 1, ["--input_shapes"]),
    ("transform-tolerance-nan", T, ["--model_def", "m.onnx", "--tolerance", "nan,0.9", "--mlir", "o.mlir"], 1, ["--tolerance"]),
    ("runner-output-empty", R, ["--input", "in.npz", "--model", "m.mlir", "--output", ""], 1, ["--output is empty"]),
    ("deploy-model-empty", D, [*F32, "--model", ""], 1, ["--model is empty"]),
    ("opt-print-after-unknown", OPT, ["m.mlir", "--print-ir-after=nosuchpass"], 2, ["nosuchpass", "--list-passes"]),
    # ---- NPU targets: chip files, flags for an NPU only, compiled models
    ("deploy-chip-config-missing", D, [*NPU, "--chip_config", "nope.json", "--model", "o"], 2, ["--chip_config 'nope.json' does not exist"]),
    ("deploy-chip-config-dir", D, [*NPU, "--chip_config", "adir", "--model", "o"], 2, ["--chip_config 'adir' is not a file"]),
    ("deploy-chip-config-fifo", D, [*NPU, "--chip_config", "fifo", "--model", "o"], 2, ["--chip_config 'fifo' is not a file"]),
    ("deploy-chip-config-json", D, [*NPU, "--chip_config", "badjson.json", "--model", "o"], 1, ["badjson.json:2:14: invalid JSON"]),
    ("deploy-chip-config-key", D, [*NPU, "--chip_config", "badkey.json", "--model", "o"], 1, ["badkey.json: unknown key 'warp_drive'"]),
    ("deploy-chip-config-binary", D, [*NPU, "--chip_config", "garbage.bin", "--model", "o"], 1, ["garbage.bin: cannot read chip file"]),
    ("deploy-chip-config-empty", D, [*NPU, "--chip_config", "", "--model", "o"], 1, ["--chip_config is empty"]),
    ("deploy-chip-config-cpu", D, [*F32, "--processor", "cpu", "--chip_config", "chip.json", "--model", "o"], 2, ["--chip_config describes an NPU chip; --processor cpu is not an NPU"]),
    ("deploy-disable-layer-group-cpu", D, [*F32, "--disable_layer_group", "--model", "o"], 2, ["--disable_layer_group applies to an NPU processor, not cpu"]),
    ("deploy-edge-f16", D, ["--mlir", "m.mlir", "--quantize", "F16", "--processor", "lnpu-edge", "--model", "o"], 2, ["--processor lnpu-edge does not run F16 models (it runs BF16, INT8)"]),
    ("deploy-edge-f32", D, [*F32, "--processor", "lnpu-edge", "--model", "o"], 2, ["--processor lnpu-edge does not run F32 models"]),
    ("deploy-npu-model-is-mlir", D, [*NPU, "--model", "./m.mlir"], 1, ["--model './m.mlir' is the same file as --mlir 'm.mlir'"]),
    ("deploy-npu-model-is-chip", D, [*NPU, "--chip_config", "chip.json", "--model", "{d}/chip.json"], 1, ["is the same file as --chip_config 'chip.json'"]),
    ("deploy-npu-model-is-test-input", D, [*NPU, "--test_input", "m_in_f32.npz", "--model", "adir/../m_in_f32.npz"], 1, ["is the same file as --test_input"]),
    ("deploy-npu-compiled-is-test-input", D, [*NPU, "--test_input", "n.bmodel", "--model", "./n.bmodel"], 1, ["the compiled model './n.bmodel' is the same file as --test_input"]),
    ("deploy-npu-outputs-is-reference", D, [*NPU, "--test_input", "m_in_f32.npz", "--test_reference", "o_model_outputs.npz", "--model", "o.bmodel"], 1, ["the compiled model's outputs 'o_model_outputs.npz' is the same file as --test_reference"]),
    ("deploy-mlir-is-compiled", D, ["--mlir", "n.bmodel", "--quantize", "F32", "--processor", "lnpu", "--model", "o"], 1, ["'n.bmodel' is not a UTF-8 text .mlir file"]),
    ("runner-npu-dump-all", R, [*RUN_N, "--output", "o.npz", "--dump_all_tensors"], 1, ["--dump_all_tensors does not apply to a compiled model ('n.bmodel' gives its outputs)"]),
    ("runner-npu-out-fixed", R, [*RUN_N, "--output", "o.npz", "--out_fixed"], 1, ["--out_fixed does not apply to a compiled model"]),
    ("runner-npu-engine", R, [*RUN_N, "--output", "o.npz", "--engine", "lamina"], 1, ["--engine does not apply to a compiled model"]),
    ("runner-npu-input-shape", R, ["--input", "shape.npz", "--model", "n.bmodel", "--output", "o.npz"], 1, ["input 'x' has shape [1, 3, 4, 4] but the model expects [1, 3, 8, 8]"]),
    ("runner-npu-truncated", R, ["--input", "m_in_f32.npz", "--model", "trunc.bmodel", "--output", "o.npz"], 1, ["'trunc.bmodel': not a valid .lamina model file: truncated"]),
    ("runner-profile-mlir", R, ["--input", "m_in_f32.npz", "--model", "m.mlir", "--output", "o.npz", "--profile", "t.json"], 1, ["--profile needs a compiled model (.lamina); 'm.mlir' is not one"]),
    ("runner-profile-is-model", R, [*RUN_N, "--output", "o.npz", "--profile", "./n.bmodel"], 1, ["--profile './n.bmodel' is the same file as --model 'n.bmodel'"]),
    ("runner-profile-is-input", R, [*RUN_N, "--output", "o.npz", "--profile", "{d}/m_in_f32.npz"], 1, ["is the same file as --input 'm_in_f32.npz'"]),
    ("runner-profile-summary-is-output", R, [*RUN_N, "--output", "t.summary.json", "--profile", "t.json"], 1, ["the profile summary 't.summary.json' is the same file as --output", "two outputs"]),
    ("runner-output-is-bmodel", R, [*RUN_N, "--output", "{d}/n.bmodel"], 1, ["is the same file as --model 'n.bmodel'"]),
    ("tool-info-mlir", MT, ["--info", "m.mlir"], 1, ["'m.mlir': not a valid .lamina model file: bad magic"]),
    ("tool-info-truncated", MT, ["--info", "trunc.bmodel"], 1, ["'trunc.bmodel': not a valid .lamina model file: truncated"]),
    ("info-truncated", main.main, ["info", "trunc.bmodel"], 1, ["lamina info: error: 'trunc.bmodel'", "truncated"]),
    # ---- TFLite models
    ("transform-tflite-junk", T, ["--model_def", "junk.tflite", "--mlir", "o.mlir"], 1, ["'junk.tflite' is not a TFLite model", "'TFL3'"]),
    ("transform-tflite-truncated", T, ["--model_def", "trunc.tflite", "--mlir", "o.mlir"], 1, ["'trunc.tflite' is a malformed TFLite flatbuffer"]),
    ("transform-tflite-version", T, ["--model_def", "v2.tflite", "--mlir", "o.mlir"], 1, ["'v2.tflite' has TFLite schema version 2", "reads version 3"]),
    ("transform-tflite-buffer", T, ["--model_def", "buf.tflite", "--mlir", "o.mlir"], 1, ["'buf.tflite'", "tensor 'c' refers to buffer 99"]),
    ("transform-tflite-shapes", T, ["--model_def", "t.tflite", "--input_shapes", "[[1,5]]", "--mlir", "o.mlir"], 1, ["[[1, 5]] differ from the model's [[1, 4]]"]),
    ("transform-tflite-test-input", T, ["--model_def", "t.tflite", "--test_input", "in.npz", "--mlir", "o.mlir"], 1, ["in.npz", "[1, 3, 8, 8]", "[1, 4]"]),
    ("transform-tflite-result-is-table", T, ["--model_def", "q.tflite", "--test_input", "qin.npz", "--test_result", "q_cali_table", "--mlir", "q.mlir"], 1, ["--test_result 'q_cali_table'", "derived calibration table"]),
    ("runner-tflite-junk", R, ["--input", "tin.npz", "--model", "junk.tflite", "--output", "o.npz"], 1, ["'junk.tflite' is not a TFLite model"]),
    ("runner-tflite-version", R, ["--input", "tin.npz", "--model", "v2.tflite", "--output", "o.npz"], 1, ["schema version 2"]),
    ("runner-tflite-input-shape", R, ["--input", "in.npz", "--model", "t.tflite", "--output", "o.npz"], 1, ["input 'x' has shape [1, 3, 8, 8]", "[1, 4]"]),
    ("runner-tflite-engine-ort", R, ["--input", "tin.npz", "--model", "t.tflite", "--output", "o.npz", "--engine", "onnxruntime"], 1, ["--engine onnxruntime cannot run the TFLite model 't.tflite'"]),
    ("runner-onnx-engine-litert", R, ["--input", "in.npz", "--model", "m.onnx", "--output", "o.npz", "--engine", "litert"], 1, ["--engine litert runs .tflite models"]),
    ("runner-tflite-out-fixed", R, ["--input", "qin.npz", "--model", "q.tflite", "--output", "o.npz", "--out_fixed"], 1, ["--out_fixed needs a quantized (tpu) model"]),
    ("runner-output-is-tflite", R, ["--input", "tin.npz", "--model", "t.tflite", "--output", "t.tflite"], 1, ["--output 't.tflite'", "--model"]),
    ("deploy-tflite-model", D, ["--mlir", "t.tflite", "--quantize", "F32", "--model", "o"], 1, ["'t.tflite' is a TFLite model", "the .mlir that model_transform writes"]),
    ("calibrate-tflite-model", C, ["q.tflite", "--dataset", "ds", "-o", "t"], 1, ["'q.tflite' is a TFLite model"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("tool", "argv", "rc", "fragments"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(
    tmp_path: Path,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tool: Tool,
    argv: list[str],
    rc: int,
    fragments: list[str],
) -> None:
    d = tmp_path / "ws"
    shutil.copytree(workspace, d, symlinks=True)
    os.mkfifo(d / "fifo")
    monkeypatch.chdir(d)
    before = _snapshot(d)
    argv = [a.replace("{d}", str(d)) for a in argv]
    assert tool(argv) == rc
    err = capsys.readouterr().err
    assert "Traceback" not in err and "internal error" not in err
    assert err.count("error:") == 1, err
    for f in fragments:
        assert f in err, err
    assert _snapshot(d) == before  # every file byte-identical, nothing new (no temp file either)


def test_excepts_naming_no_tensor_is_warned(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = str(workspace / "m_top_outputs.npz"), str(workspace / "m_ref_outputs.npz")
    assert npz_tool.main(["compare", a, b, "--excepts", "nosuch,r"]) == 0
    err = capsys.readouterr().err
    assert "--excepts 'nosuch' names no tensor" in err and "'r'" not in err


def test_numpy_warnings_do_not_leak(
    tmp_path: Path, workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Inputs near float32's limit overflow in the conv: inf in the outputs, no RuntimeWarning."""
    np.savez(tmp_path / "huge.npz", x=np.full((1, 3, 8, 8), 3e38, np.float32))
    argv = ["--input", str(tmp_path / "huge.npz"), "--model", str(workspace / "m.mlir")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert runner.main([*argv, "--output", str(tmp_path / "o.npz")]) == 0
    assert not [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert "Warning" not in capsys.readouterr().err

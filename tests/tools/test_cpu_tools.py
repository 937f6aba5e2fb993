"""The commands on the CPU target, in process (their ``main(argv)``): ``model_deploy --processor cpu
--model x.lamina`` compiles to native code (the file under that name, the ``tpu`` files beside it,
what it printed: compile time, kernels, what the reference executor runs, the check against the
interpreter); ``--model x`` without a compiled extension keeps writing only the ``tpu`` files;
``model_runner --model x.lamina [--profile t.json]`` runs the file; ``model_tool --info`` reads it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import conv_relu_add_model  # tests/tools/conftest.py (this directory is on sys.path)

from lamina.targets.container import read_model
from lamina.tools import calibrate, deploy, model_tool, runner, transform


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnx")
    d = tmp_path_factory.mktemp("cpu_tools")
    cwd = os.getcwd()
    os.chdir(d)
    try:
        conv_relu_add_model(d / "m.onnx")
        np.savez("in.npz", x=np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32))
        argv = ["--model_def", "m.onnx", "--input_shapes", "[[1,3,8,8]]", "--test_input", "in.npz"]
        assert transform.main([*argv, "--mlir", "m.mlir"]) == 0
        os.mkdir("ds")
        np.savez("ds/0.npz", x=np.load("m_in_f32.npz")["x"])
        assert (
            calibrate.main(["m.mlir", "--dataset", "ds", "-o", "m_cali_table", "-q", "--tune_num", "0"]) == 0
        )
    finally:
        os.chdir(cwd)
    return d


INT8 = ["--mlir", "m.mlir", "--quantize", "INT8", "--calibration_table", "m_cali_table"]
CHECK = ["--test_input", "m_in_f32.npz", "--test_reference", "m_top_outputs.npz"]


def _copy(ws: Path, tmp_path: Path) -> None:
    for f in ("m.mlir", "m_top_weights.npz", "m_cali_table", "m_in_f32.npz", "m_top_outputs.npz"):
        (tmp_path / f).write_bytes((ws / f).read_bytes())
    os.chdir(tmp_path)


@pytest.mark.parametrize("mode", ["INT8", "BF16", "F32"])
def test_model_deploy_and_runner_on_the_cpu(
    mode: str, ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _copy(ws, tmp_path)
    argv = INT8 if mode == "INT8" else ["--mlir", "m.mlir", "--quantize", mode]
    rc = deploy.main([*argv, "--processor", "cpu", *CHECK, "--model", "m.lamina"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "wrote m.lamina for cpu" in out and "compiled for " in out and " kernels (" in out
    assert "run by the reference executor: none" in out
    what = "bit-exact with the tpu interpreter" if mode == "INT8" else "within cosine 1.0000000 of the tpu"
    assert f"compiled model: {what}" in out or "compiled model: bit-exact" in out, out
    model = read_model("m.lamina")
    assert model.target == "cpu" and {"object", "llvm_ir", "weights"} <= {s.kind for s in model.sections}
    assert {"m_tpu.mlir", "m_tpu_outputs.npz", "m_model_outputs.npz"} <= {p.name for p in tmp_path.iterdir()}
    # model_runner on the file, with a profile: the same outputs as model_deploy's run
    assert (
        runner.main(
            ["--input", "m_in_f32.npz", "--model", "m.lamina", "--output", "o.npz", "--profile", "t.json"]
        )
        == 0
    )
    _, err = capsys.readouterr()
    assert "profile:" in err
    got, want = np.load("o.npz"), np.load("m_model_outputs.npz")
    for k in want.files:
        assert np.array_equal(got[k], want[k]), k
    s = json.loads(Path("t.summary.json").read_text())
    kernels = [k for k in model.metadata["kernels"] if not k["alias"]]
    assert s["commands"] == len(kernels) and s["target"] == "cpu"
    assert model_tool.main(["--info", "m.lamina"]) == 0
    assert "cpu" in capsys.readouterr().out
    # on two threads: the same bytes
    assert (
        runner.main(
            ["--input", "m_in_f32.npz", "--model", "m.lamina", "--output", "o2.npz", "--threads", "2"]
        )
        == 0
    )
    got2 = np.load("o2.npz")
    for k in want.files:
        assert np.array_equal(got2[k], want[k]), k


def test_runner_threads_only_for_a_compiled_cpu_model(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _copy(ws, tmp_path)
    base = ["--input", "m_in_f32.npz", "--output", "o.npz"]
    assert runner.main([*base, "--model", "m.mlir", "--threads", "2"]) == 1
    assert "--threads needs a compiled CPU model" in capsys.readouterr().err
    assert runner.main([*base, "--model", "m.mlir", "--threads", "0"]) == 1
    assert "--threads must be at least 1, got 0" in capsys.readouterr().err
    assert not (tmp_path / "o.npz").exists()


def test_model_deploy_cpu_without_a_compiled_file_runs_the_interpreter(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _copy(ws, tmp_path)
    rc = deploy.main([*INT8, "--processor", "cpu", *CHECK, "--model", "m"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "compiled for" not in out and not (tmp_path / "m.lamina").exists()
    assert (tmp_path / "m_tpu.mlir").exists()


def test_export_lib_is_a_c_library_giving_the_same_outputs(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--export_lib``: ``m.so`` and ``m.h``; the library called through ctypes (as a C program
    would: an aligned arena, the input then output buffers) gives the compiled model's outputs."""
    import ctypes
    import shutil

    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler/linker")
    monkeypatch.chdir(tmp_path)
    _copy(ws, tmp_path)
    rc = deploy.main([*INT8, "--processor", "cpu", *CHECK, "--model", "m.lamina", "--export_lib"])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "wrote m.so and m.h" in out
    header = Path("m.h").read_text()
    assert "void m_run(void *arena, void **io, int64_t tid, int64_t nthreads);" in header
    assert "input 'x': float [1 x 3 x 8 x 8]" in header
    lib = ctypes.CDLL(str(tmp_path / "m.so"))
    lib.m_arena_bytes.restype = ctypes.c_size_t
    lib.m_arena_bytes.argtypes = [ctypes.c_int64]
    lib.m_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64]
    assert not hasattr(lib, "model_run")  # only the two functions are exported
    n = lib.m_arena_bytes(1)
    raw = np.zeros(n + 64, np.uint8)
    arena = raw[(-raw.ctypes.data) % 64 :]
    x = np.ascontiguousarray(np.load("m_in_f32.npz")["x"], np.float32)
    want = np.load("m_model_outputs.npz")
    (key,) = want.files
    y = np.zeros(want[key].shape, np.float32)
    io = (ctypes.c_void_p * 2)(x.ctypes.data, y.ctypes.data)
    lib.m_run(arena.ctypes.data, ctypes.addressof(io), 0, 1)
    assert np.array_equal(y, want[key])


def test_export_lib_needs_a_compiled_cpu_model(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    _copy(ws, tmp_path)
    assert deploy.main([*INT8, "--processor", "cpu", "--model", "m", "--export_lib"]) == 2
    assert (
        "--export_lib applies to --processor cpu with --model naming the compiled file"
        in capsys.readouterr().err
    )

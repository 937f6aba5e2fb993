"""The commands on the NPU targets, in process (their ``main(argv)``): ``model_deploy --processor
lnpu|lnpu-edge [--chip_config F] [--disable_layer_group] --model x.bmodel`` (the compiled ``.lamina``
file under the name given, the ``tpu`` files beside it, the placement and the estimate printed),
``model_runner --model x.bmodel --profile t.json``, ``model_tool --info`` / ``lamina info`` on the
file; and the Python API's paths (``lamina.api.deploy(chip_config=Path)``, ``lamina.runtime.load``).
The bad inputs of these commands are in ``test_bad_inputs.py``."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import conv_relu_add_model  # tests/tools/conftest.py (this directory is on sys.path)

import lamina.api as api
import lamina.runtime as rt
from lamina.targets.container import MAGIC, read_model
from lamina.tools import calibrate, deploy, main, model_tool, runner, transform

CHIPS = Path(deploy.__file__).parents[1] / "targets" / "npu" / "chips"


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The conv/relu/add model (1x3x8x8) through model_transform and run_calibration, and a user's
    chip: the lnpu with 16 lanes of 16 KiB, named ``mychip``."""
    pytest.importorskip("onnx")
    d = tmp_path_factory.mktemp("npu_tools")
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
        chip = json.loads((CHIPS / "lnpu.json").read_text())
        chip.update(name="mychip", lanes=16, lmem_bytes_per_lane=16384, lmem_banks=8)
        Path("chip.json").write_text(json.dumps(chip))
    finally:
        os.chdir(cwd)
    return d


INT8 = ["--mlir", "m.mlir", "--quantize", "INT8", "--calibration_table", "m_cali_table"]
CHECK = ["--test_input", "m_in_f32.npz", "--test_reference", "m_top_outputs.npz"]


def _deploy(ws: Path, tmp_path: Path, argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Run model_deploy in a fresh copy of the workspace's inputs (tmp_path); its stdout."""
    for f in (
        "m.mlir",
        "m_top_weights.npz",
        "m_cali_table",
        "m_in_f32.npz",
        "m_top_outputs.npz",
        "chip.json",
    ):
        (tmp_path / f).write_bytes((ws / f).read_bytes())
    os.chdir(tmp_path)
    rc = deploy.main(argv)
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "error" not in err, err
    return out


def _files(d: Path) -> set[str]:
    return {p.name for p in d.iterdir()}


def _estimate(out: str) -> tuple[float, int, float]:
    m = re.search(
        r"estimated latency ([\d.]+) us \((\d+) cycles at [\d.]+ GHz\), MAC utilization ([\d.]+) %", out
    )
    assert m is not None, out
    return float(m.group(1)), int(m.group(2)), float(m.group(3))


def test_deploy_lnpu_writes_the_bmodel_and_checks_it(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    out = _deploy(ws, tmp_path, [*INT8, "--processor", "lnpu", *CHECK, "--model", "x.bmodel"], capsys)
    new = _files(tmp_path) - {
        "m.mlir",
        "m_top_weights.npz",
        "m_cali_table",
        "m_in_f32.npz",
        "m_top_outputs.npz",
        "chip.json",
    }
    assert new == {"x.bmodel", "x_tpu.mlir", "x_tpu_weights.npz", "x_tpu_outputs.npz", "x_model_outputs.npz"}
    assert (tmp_path / "x.bmodel").read_bytes()[: len(MAGIC)] == MAGIC  # a .lamina file, by its name
    model = read_model(tmp_path / "x.bmodel")
    assert (model.target, model.chip, model.name) == ("npu", "lnpu", "x")
    # the placement, the estimate and the check are printed
    assert "wrote x.bmodel for lnpu" in out
    assert re.search(r"5 layers on the NPU in \d+ layer groups? .*, 0 on the host CPU\n", out), out
    assert "subnets: npu0 (npu)" in out
    _, cycles, util = _estimate(out)
    assert cycles > 0 and 0 < util <= 100
    assert "compiled model: bit-exact with the tpu interpreter" in out
    assert "npz compare PASSED" in out
    tpu, compiled = np.load(tmp_path / "x_tpu_outputs.npz"), np.load(tmp_path / "x_model_outputs.npz")
    assert list(compiled) == ["y"]
    assert compiled["y"].tobytes() == tpu["y"].tobytes()


def test_deploy_edge_chip(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """lnpu-edge: no F32, so the f32 input is quantized and the output dequantized on the host."""
    monkeypatch.chdir(tmp_path)
    out = _deploy(ws, tmp_path, [*INT8, "--processor", "lnpu-edge", *CHECK, "--model", "e.bmodel"], capsys)
    assert read_model(tmp_path / "e.bmodel").chip == "lnpu-edge"
    assert "wrote e.bmodel for lnpu-edge" in out
    assert re.search(r"2 on the host CPU: x_i8, y_f32\n", out), out
    assert "subnets: cpu0 (cpu), npu1 (npu), cpu2 (cpu)" in out
    assert "at 0.8 GHz" in out and "compiled model: bit-exact with the tpu interpreter" in out


def test_deploy_user_chip(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """--chip_config: the file names the user's chip; the model carries its description, so it
    loads without the file; the file given again must describe the same chip."""
    monkeypatch.chdir(tmp_path)
    argv = [*INT8, "--processor", "lnpu", "--chip_config", "chip.json", *CHECK, "--model", "u.lamina"]
    out = _deploy(ws, tmp_path, argv, capsys)
    assert "--chip_config chip.json" in out and "compiled model: bit-exact" in out
    m = rt.load(tmp_path / "u.lamina")
    assert m.chip == "mychip"
    assert m.model.metadata["chip_config"]["lanes"] == 16
    x = dict(np.load(tmp_path / "m_in_f32.npz"))
    assert m.run(x)["y"].tobytes() == np.load(tmp_path / "u_model_outputs.npz")["y"].tobytes()
    assert rt.load(tmp_path / "u.lamina", chip_config=str(tmp_path / "chip.json")).chip == "mychip"
    with pytest.raises(api.LaminaError, match=r"was compiled for chip 'mychip'; --chip_config .* \('lnpu'\)"):
        rt.load(tmp_path / "u.lamina", chip_config=str(CHIPS / "lnpu.json"))


def test_deploy_disable_layer_group(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every op a group of its own, through DDR: more cycles estimated than with groups."""
    monkeypatch.chdir(tmp_path)
    grouped = _deploy(ws, tmp_path, [*INT8, "--processor", "lnpu", *CHECK, "--model", "g.bmodel"], capsys)
    alone = _deploy(
        ws,
        tmp_path,
        [*INT8, "--processor", "lnpu", "--disable_layer_group", *CHECK, "--model", "a.bmodel"],
        capsys,
    )
    assert "--disable_layer_group" in alone and "compiled model: bit-exact" in alone
    meta = read_model(tmp_path / "a.bmodel").metadata
    assert meta["layer_group"] is False
    groups = [g for g in meta["groups"] if g["kind"] == "group"]
    assert len(groups) >= 3 and all(len(g["ops"]) == 1 for g in groups)
    assert read_model(tmp_path / "g.bmodel").metadata["layer_group"] is True
    assert _estimate(alone)[1] > _estimate(grouped)[1]


@pytest.fixture(scope="module")
def bmodel(ws: Path) -> Path:
    """x.bmodel: the conv model in INT8 for lnpu, with its outputs (x_model_outputs.npz)."""
    cwd = os.getcwd()
    os.chdir(ws)
    try:
        assert (
            deploy.main([*INT8, "--processor", "lnpu", "--test_input", "m_in_f32.npz", "--model", "x.bmodel"])
            == 0
        )
    finally:
        os.chdir(cwd)
    return ws / "x.bmodel"


def test_runner_profile(bmodel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = bmodel.parent
    o, t = tmp_path / "o.npz", tmp_path / "t.json"
    argv = [
        "--input",
        str(ws / "m_in_f32.npz"),
        "--model",
        str(bmodel),
        "--output",
        str(o),
        "--profile",
        str(t),
    ]
    assert runner.main(argv) == 0
    err = capsys.readouterr().err
    assert "wrote 1 tensor(s)" in err
    assert _files(tmp_path) == {"o.npz", "t.json", "t.summary.json"}
    assert np.load(o)["y"].tobytes() == np.load(ws / "x_model_outputs.npz")["y"].tobytes()
    s = json.loads((tmp_path / "t.summary.json").read_text())
    meta = read_model(bmodel).metadata
    assert s["chip"] == "lnpu" and s["model"] == "x" and s["total_cycles"] > 0
    assert s["ddr_bytes"] >= meta["ddr"]["weight_bytes"] > 0
    assert [g["name"] for g in s["groups"]] == [g["name"] for g in meta["groups"]]
    # the summary's numbers, said once on stderr
    line = (f"model_runner: profile: {s['time_us']:.1f} us ({s['total_cycles']} cycles), MAC utilization "
            f"{100 * s['mac_utilization']:.1f} %")  # fmt: skip
    assert (
        line in err
        and f"DDR {s['ddr_bytes'] / 1e6:.2f} MB; wrote {t} and {tmp_path / 't.summary.json'}" in err
    )
    trace = json.loads(t.read_text())
    tracks = {
        e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert tracks == {"groups", "tiu", "gdma"}
    # `lamina run` is the same command
    assert main.main(["run", *argv[:5], str(tmp_path / "o2.npz")]) == 0
    assert np.load(tmp_path / "o2.npz")["y"].tobytes() == np.load(o)["y"].tobytes()


def test_model_tool_info(bmodel: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--info: chip, IO with the input's quantization, the subnet with its command counts, the memory
    split — the numbers of the file itself; ``lamina info`` prints the same."""
    model = read_model(bmodel)
    assert model_tool.main(["--info", str(bmodel)]) == 0
    info = capsys.readouterr().out
    assert main.main(["info", str(bmodel)]) == 0
    assert capsys.readouterr().out == info
    lines = info.splitlines()
    assert lines[:3] == ["lamina model version: 1.0", "target: npu", "chip: lnpu"]
    assert "net: [x]  static" in lines
    assert "input: x, [1, 3, 8, 8], float32, scale: 1, zero_point: 0" in lines
    assert "output: y, [1, 4, 8, 8], float32, scale: 1, zero_point: 0" in lines
    (sn,) = model.subnets
    cmds = sn.commands
    assert cmds["tiu"] > 0 and cmds["gdma"] > 0
    size = model.section(sn.section).size
    assert (
        f"subnet 0: [npu0] npu, section 'commands/npu0' ({size} bytes), commands: tiu {cmds['tiu']}, "
        f"gdma {cmds['gdma']}" in lines
    )
    assert any(re.fullmatch(r"    inputs: x; outputs: y\S*", x) for x in lines), info
    weight, instruct = model.bytes_of("weights"), model.bytes_of("commands", "cpu_subnet")
    runtime = model.activation_bytes
    assert weight > 0 and instruct == size and runtime > 0
    assert lines[-1] == (
        f"device mem size: {weight + instruct + runtime} (weight: {weight}, instruct: {instruct}, runtime: {runtime})"
    )
    assert model_tool.main(["--chip", str(bmodel)]) == 0
    assert capsys.readouterr().out == "lnpu\n"


def test_model_tool_info_edge_subnets(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model with CPU subnets: each listed in order with its section and no command counts."""
    monkeypatch.chdir(tmp_path)
    _deploy(ws, tmp_path, [*INT8, "--processor", "lnpu-edge", "--model", "e.bmodel"], capsys)
    assert model_tool.main(["--info", "e.bmodel"]) == 0
    info = capsys.readouterr().out
    assert "chip: lnpu-edge" in info and "subnet number: 3" in info
    assert re.search(
        r"subnet 0: \[cpu0\] cpu, section 'cpu/cpu0' \(\d+ bytes\), commands: -\n    inputs: x; outputs: x_i8",
        info,
    ), info
    assert re.search(
        r"subnet 1: \[npu1\] npu, section 'commands/npu1' \(\d+ bytes\), commands: tiu \d+, gdma \d+", info
    )
    assert re.search(r"subnet 2: \[cpu2\] cpu, section 'cpu/cpu2' \(\d+ bytes\), commands: -\n", info), info


def test_subnets_name_the_model_outputs(bmodel: Path) -> None:
    """docs/lamina-file.md: a subnet's ``outputs`` name the tensors it writes; the model's outputs are
    among them under the names the ``outputs`` descriptors give (as the example's ``logits``)."""
    model = read_model(bmodel)
    written = {t for s in model.subnets for t in s.outputs}
    read = {t for s in model.subnets for t in s.inputs}
    assert {t.name for t in model.inputs} <= read
    assert {t.name for t in model.outputs} <= written, (sorted(written), [t.name for t in model.outputs])


def test_api_paths(ws: Path, tmp_path: Path) -> None:
    """``lamina.api.deploy(chip_config=Path)``, ``output=Path``; ``lamina.runtime.load(Path)``."""
    model = api.load(ws / "m.mlir")
    x = dict(np.load(ws / "m_in_f32.npz"))
    res = api.deploy(
        model,
        "INT8",
        calibration_table=ws / "m_cali_table",
        processor="lnpu",
        chip_config=ws / "chip.json",
        test_input=x,
        output=tmp_path / "p.bmodel",
    )
    assert res.result.target_check == [] and res.result.exact_outputs == ["y"]
    assert res.compiled.chip == "mychip"
    m = rt.load(tmp_path / "p.bmodel")
    assert isinstance(m, rt.CompiledModel) and m.input_names == ["x"] and m.output_names == ["y"]
    assert m.run(x)["y"].tobytes() == res.result.model_outputs["y"].tobytes()
    for bad in (None, 5, b"p.bmodel", [str(tmp_path / "p.bmodel")]):
        with pytest.raises(api.LaminaError, match=r"load: expected a path \(str or os.PathLike\), got "):
            rt.load(bad)  # type: ignore[arg-type]
    with pytest.raises(api.LaminaError, match=r"m\.mlir': not a valid \.lamina model file"):
        rt.load(ws / "m.mlir")


def test_compiled_model_refuses_bad_inputs(bmodel: Path) -> None:
    m: Any = rt.load(bmodel)
    with pytest.raises(api.LaminaError, match=r"missing input\(s\) 'x'"):
        m.run({})
    with pytest.raises(
        api.LaminaError, match=r"input 'x' has shape \[1, 3, 4, 4\] but the model expects \[1, 3, 8, 8\]"
    ):
        m.run({"x": np.zeros((1, 3, 4, 4), np.float32)})

"""model_tool --info / --chip and ``lamina info``: TPU-MLIR's layout of a model's chip, IO, subnets and
memory; a bad file is one message and exit 1 (never a traceback); the docs list the command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lamina.targets.container import Model, Section, SubnetDesc, TensorDesc, write_model
from lamina.tools import main as lamina_main
from lamina.tools.model_tool import main

ROOT = Path(__file__).resolve().parents[2]


def write_sample(path: Path) -> Path:
    write_model(
        path,
        Model(
            target="npu",
            chip="lnpu",
            name="resnet18",
            inputs=[TensorDesc("input", (1, 3, 224, 224), "int8", 0.0187, 0)],
            outputs=[
                TensorDesc("logits", (1, 1000), "float32", address=4096),
                TensorDesc("boxes", (), "uint8", 0.5, 128),
            ],
            subnets=[
                SubnetDesc("npu0", "npu", "commands/npu0", ("input",), ("t",), {"tiu": 120, "gdma": 340}),
                SubnetDesc("nms", "cpu", "cpu/nms", ("t",), ("logits", "boxes")),
            ],
            activation_bytes=802816,
            sections=[
                Section("weights", "weights", bytes(11_689_512 // 1000)),
                Section("commands", "commands/npu0", bytes(120 * 64 + 340 * 32)),
                Section("cpu_subnet", "cpu/nms", b"func.func @nms() { return }\n"),
            ],
            metadata={"created": "2026-12-01 06:00:00", "lamina_version": "0.1.0"},
        ),
    )
    return path


EXPECTED = """\
lamina model version: 1.0
target: npu
chip: lnpu
create time: 2026-12-01 06:00:00
lamina version: 0.1.0
==========================================
net: [resnet18]  static
input: input, [1, 3, 224, 224], int8, scale: 0.0187, zero_point: 0
output: logits, [1, 1000], float32, scale: 1, zero_point: 0
output: boxes, [ ], uint8, scale: 0.5, zero_point: 128
------------
subnet number: 2
subnet 0: [npu0] npu, section 'commands/npu0' (18560 bytes), commands: tiu 120, gdma 340
    inputs: input; outputs: t
subnet 1: [nms] cpu, section 'cpu/nms' (28 bytes), commands: -
    inputs: t; outputs: logits, boxes

device mem size: 833093 (weight: 11689, instruct: 18588, runtime: 802816)
"""


def test_info(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = write_sample(tmp_path / "m.lamina")
    assert main(["--info", str(m)]) == 0
    assert capsys.readouterr().out == EXPECTED
    assert lamina_main.main(["info", str(m)]) == 0
    assert capsys.readouterr().out == EXPECTED
    assert main(["--chip", str(m)]) == 0
    assert capsys.readouterr().out == "lnpu\n"


def test_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    raw = write_sample(tmp_path / "m.lamina").read_bytes()
    bad = tmp_path / "bad.lamina"
    cases = {
        "truncated": raw[: len(raw) // 2],
        "corrupted": raw[:-5] + bytes([raw[-5] ^ 1]) + raw[-4:],
        "bad magic": b"NOTLAMINA" + raw[9:],
        "truncated: 0 bytes": b"",
    }
    for fragment, data in cases.items():
        bad.write_bytes(data)
        for argv in (["--info", str(bad)], ["--chip", str(bad)]):
            assert main(argv) == 1
            out, err = capsys.readouterr()
            assert out == "" and err.startswith("model_tool: error: ") and fragment in err, err
            assert err.count("\n") == 1 and str(bad) in err
        assert lamina_main.main(["info", str(bad)]) == 1
        assert capsys.readouterr().err.startswith("lamina info: error: ")
    for path, fragment in ((tmp_path / "missing.lamina", "does not exist"), (tmp_path, "is a directory")):
        assert main(["--info", str(path)]) == 1
        assert fragment in capsys.readouterr().err
    assert main(["--info", ""]) == 1
    assert "empty" in capsys.readouterr().err


def test_usage() -> None:
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["--info", "a", "--chip", "b"])
    assert e.value.code == 2


def test_command_entry_point(tmp_path: Path) -> None:
    """As installed: ``python -m lamina.tools.model_tool`` (the script entry names the same main)."""
    m = write_sample(tmp_path / "m.lamina")
    r = subprocess.run(
        [sys.executable, "-m", "lamina.tools.model_tool", "--info", str(m)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == 0 and r.stdout == EXPECTED, r.stderr
    assert 'model_tool = "lamina.tools.model_tool:main"' in (ROOT / "pyproject.toml").read_text()


def test_docs_list_the_command() -> None:
    assert "model_tool --info" in (ROOT / "README.md").read_text()
    tools = (ROOT / "docs" / "tools.md").read_text()
    assert "## `model_tool`" in tools and "model_tool --info" in tools

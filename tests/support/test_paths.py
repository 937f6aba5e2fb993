"""lamina.support.paths: one file under any spelling; inputs that are not regular files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lamina.support.errors import ToolError
from lamina.support.paths import check_input_file, check_outputs, same_file, weight_file_of


def test_same_file_spellings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "m.onnx").write_bytes(b"x")
    os.symlink("m.onnx", tmp_path / "link.onnx")
    monkeypatch.chdir(tmp_path)
    for other in ("./m.onnx", str(tmp_path / "m.onnx"), "link.onnx", "sub/../m.onnx"):
        assert same_file("m.onnx", other)
    assert same_file("new.npz", "./sub/../new.npz")  # neither exists: the resolved paths
    assert not same_file("m.onnx", "sub/m.onnx")


def test_check_outputs(tmp_path: Path) -> None:
    model = tmp_path / "m.mlir"
    model.write_text('module attributes {lamina.weight_file = "w.npz"} {\n}\n')
    assert weight_file_of(str(model)) == str(tmp_path / "w.npz")
    ins = [("--model", str(model))]
    check_outputs(ins, [("--output", str(tmp_path / "o.npz")), ("--html", None)])
    cases = [
        ([("--output", str(model))], "refusing to overwrite an input"),
        ([("--output", str(tmp_path / "w.npz"))], "the weight file of --model"),
        ([("-o", str(tmp_path / "a")), ("--q", str(tmp_path / "a"))], "two outputs cannot share one file"),
        ([("-o", str(tmp_path / "nodir" / "a"))], "does not exist"),
        ([("-o", str(tmp_path))], "it is a directory"),
        ([("-o", "")], "-o is empty"),
    ]
    for outs, msg in cases:
        with pytest.raises(ToolError, match=msg):
            check_outputs(ins, outs)


def test_check_input_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "f").write_text("x")
    check_input_file(str(tmp_path / "f"), "model")
    for path, msg in (
        (tmp_path / "fifo", "is a FIFO"),
        (tmp_path, "is a directory"),
        (tmp_path / "nope", "does not exist"),
        (Path("/dev/zero"), "is a device"),
    ):
        with pytest.raises(ToolError, match=f"model '{path}' {msg}"):
            check_input_file(str(path), "model")

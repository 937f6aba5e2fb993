"""model_runner on a module written in func/cf/arith: its @main runs like any model's, with scalar
arguments of the module's own types, bound by name or by position, results ``output_0``…"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lamina.tools.runner import main

LOOP = """
// gcd and the number of turns it took, by a cf loop
func.func @main(%a: i32, %b: i32) -> (i32, i64) {
  %c0 = arith.constant 0 : i32
  %z = arith.constant 0 : i64
  %one = arith.constant 1 : i64
  cf.br ^loop(%a, %b, %z : i32, i32, i64)
^loop(%x: i32, %y: i32, %n: i64):
  %stop = arith.cmpi eq, %y, %c0 : i32
  cf.cond_br %stop, ^exit, ^body
^body:
  %r = arith.remsi %x, %y : i32
  %n2 = arith.addi %n, %one : i64
  cf.br ^loop(%y, %r, %n2 : i32, i32, i64)
^exit:
  return %x, %n : i32, i64
}
"""

NAMED = """
func.func @main(%a: i32 {onnx.name = "count"}, %f: f32 loc("scale")) -> (f32 {onnx.name = "total"}) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant 0.0 : f32
  cf.br ^loop(%c0, %z : i32, f32)
^loop(%i: i32, %acc: f32):
  %go = arith.cmpi slt, %i, %a : i32
  cf.cond_br %go, ^body, ^exit
^body:
  %acc2 = arith.addf %acc, %f : f32
  %i2 = arith.addi %i, %c1 : i32
  cf.br ^loop(%i2, %acc2 : i32, f32)
^exit:
  return %acc : f32
}
"""


def _run(tmp_path: Path, text: str, **inputs: object) -> tuple[int, dict[str, np.ndarray]]:
    model, inp, out = tmp_path / "loop.mlir", tmp_path / "in.npz", tmp_path / "out.npz"
    model.write_text(text)
    np.savez(inp, **inputs)  # type: ignore[arg-type]
    rc = main(["--model", str(model), "--input", str(inp), "--output", str(out)])
    if rc != 0:
        return rc, {}
    with np.load(out) as z:
        return rc, {k: z[k] for k in z.files}


@pytest.mark.parametrize(
    "inputs",
    [
        {"a": np.int32(1071), "b": np.int32(462)},  # by position (the module names no argument)
        {"input_0": np.int32(1071), "input_1": np.int32(462)},  # by the positional names
        {"input_1": np.int32(462), "input_0": np.int64(1071)},  # by name, any order; cast to i32
    ],
)
def test_loop_module_runs_with_unnamed_arguments(tmp_path: Path, inputs: dict) -> None:
    rc, out = _run(tmp_path, LOOP, **inputs)
    assert rc == 0 and list(out) == ["output_0", "output_1"]
    assert out["output_0"] == 21 and out["output_0"].dtype == np.int32 and out["output_0"].shape == ()
    assert out["output_1"] == 3 and out["output_1"].dtype == np.int64


def test_named_arguments_and_results(tmp_path: Path) -> None:
    rc, out = _run(tmp_path, NAMED, count=np.int32(4), scale=np.float32(0.25))
    assert rc == 0 and list(out) == ["total"]
    assert out["total"] == np.float32(1.0) and out["total"].dtype == np.float32


def test_bad_inputs_are_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _ = _run(tmp_path, NAMED, amount=np.int32(4), scale=np.float32(0.25))
    assert rc == 1 and "missing input(s) 'count'" in capsys.readouterr().err
    rc, _ = _run(tmp_path, LOOP, a=np.int32(4))
    err = capsys.readouterr().err
    assert rc == 1 and "missing input(s) 'input_0', 'input_1'" in err and "(the file has 'a')" in err
    rc, _ = _run(tmp_path, LOOP, a=np.int32([4, 5]), b=np.int32(2))
    assert rc == 1 and "input 'input_0' has shape [2] but the model expects []" in capsys.readouterr().err
    rc, _ = _run(tmp_path, LOOP, a=np.int32(4), b=np.int32(0), c=np.int32(1))
    assert rc == 1 and "missing input(s)" in capsys.readouterr().err


def test_an_execution_error_names_the_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = LOOP.replace("arith.remsi %x, %y", "arith.remsi %x, %c0")  # remainder by zero
    rc, _ = _run(tmp_path, text, a=np.int32(4), b=np.int32(2))
    err = capsys.readouterr().err
    assert rc == 1 and "execution failed: 'arith.remsi' op at" in err and "loop.mlir:" in err

"""lamina-opt's start-up stays light: parsing and printing a module imports no ML framework, and a
dialect is imported only when the input uses it (measured in benchmarks/opt_startup.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

HEAVY = ("onnx", "onnxruntime", "tqdm", "torch", "scipy", "lamina.frontends", "lamina.transforms")

PROBE = """
import json, sys
from lamina.tools.opt import main
rc = main(sys.argv[1:])
prefixes = ("onnx", "tqdm", "torch", "scipy", "numpy", "ml_dtypes", "lamina.")
mods = sorted(m for m in sys.modules if m.startswith(prefixes))
print(json.dumps({"rc": rc, "modules": mods}), file=sys.stderr)
"""


def _imported(tmp_path: Path, text: str, *flags: str) -> set[str]:
    src = tmp_path / "in.mlir"
    src.write_text(text)
    r = subprocess.run(
        [sys.executable, "-c", PROBE, str(src), *flags, "-o", str(tmp_path / "out.mlir")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    report = json.loads(r.stderr.strip().splitlines()[-1])
    assert report["rc"] == 0, r.stderr
    return set(report["modules"])


def test_empty_module_imports_no_framework_and_no_dialect(tmp_path):
    mods = _imported(tmp_path, "module {\n}\n", "--allow-unregistered-dialect")
    assert not {m for m in mods if m.startswith(HEAVY)}
    assert not {m for m in mods if m.startswith("lamina.dialects.")}


def test_numpy_is_imported_only_for_dense_data_or_floats(tmp_path):
    # importing numpy is most of a bare start-up (benchmarks/opt_startup.py)
    text = '"builtin.module"() ({\n  %0 = "x.y"() {a = array<i64: 1, 2>, s = "t"} : () -> tensor<2xi32>\n}) : () -> ()\n'
    mods = _imported(tmp_path, text, "--allow-unregistered-dialect")
    assert not {m for m in mods if m.startswith(("numpy", "ml_dtypes"))}
    dense = text.replace('s = "t"', "d = dense<[1.5, 2.0]> : tensor<2xf32>")
    assert "numpy" in _imported(tmp_path, dense, "--allow-unregistered-dialect")


def test_a_dialect_is_imported_when_the_input_uses_it(tmp_path):
    text = "func.func @f(%a: i32) -> i32 {\n  %0 = arith.addi %a, %a : i32\n  return %0 : i32\n}\n"
    mods = _imported(tmp_path, text)
    assert {"lamina.dialects.func", "lamina.dialects.arith"} <= mods
    assert not {m for m in mods if m.startswith(HEAVY) or m.startswith("lamina.dialects.top")}

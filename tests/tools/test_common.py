"""The commands' guard: SIGTERM removes partly written outputs, like Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]

IDENTITY = """module {
  func.func @main(%arg0: tensor<1x4xf32>) -> tensor<1x4xf32> {
    return %arg0 : tensor<1x4xf32>
  }
}
"""

# model_runner whose npz writer stops after the first array (the temp file exists) and says so.
CHILD = """
import sys, time
import numpy as np
write_array = np.lib.format.write_array

def slow(fh, arr, **kw):
    write_array(fh, arr, **kw)
    open(sys.argv[1], "w").close()
    time.sleep(60)

np.lib.format.write_array = slow
from lamina.tools.runner import main
sys.exit(main(sys.argv[2:]))
"""


def test_sigterm_while_writing_leaves_no_temp_file(tmp_path: Path) -> None:
    (tmp_path / "m.mlir").write_text(IDENTITY)
    np.savez(tmp_path / "x.npz", x=np.ones((1, 4), np.float32))
    out, mark = tmp_path / "out", tmp_path / "writing"
    out.mkdir()
    argv = [
        "--input",
        str(tmp_path / "x.npz"),
        "--model",
        str(tmp_path / "m.mlir"),
        "--output",
        str(out / "o.npz"),
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(mark), *argv], env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 120
        while not mark.exists():
            assert p.poll() is None, p.communicate()[1]
            assert time.monotonic() < deadline, "the child never started writing"
            time.sleep(0.05)
        assert [f.name for f in out.iterdir() if f.name.startswith(".lamina-")]  # mid-write
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 143, err
    assert "model_runner: terminated" in err and "Traceback" not in err
    assert list(out.iterdir()) == []  # neither the output nor its temporary file

"""Runs the lit + FileCheck suite in tests/filecheck as part of the normal test command."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_lit_filecheck_suite() -> None:
    import lit  # noqa: F401 - a declared test dependency; fail loudly if it is missing

    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    jobs = str(max(1, min(4, os.cpu_count() or 1)))
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "from lit.main import main; main()",
            "-v",
            "-j",
            jobs,
            str(ROOT / "tests" / "filecheck"),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    tail = proc.stdout[-12000:] + proc.stderr[-4000:]
    assert proc.returncode == 0, f"lit reported failures:\n{tail}"
    assert "Passed" in proc.stdout, tail

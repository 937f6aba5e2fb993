"""lamina-opt end to end, in process: exit codes, outputs, and fuzzed input that must never crash."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lamina.tools.opt import main, split_chunks

EXAMPLE = Path(__file__).resolve().parents[2] / "lamina" / "examples" / "simple.mlir"
SEED_IR = EXAMPLE.read_text()


def run_opt(tmp_path: Path, text: str, *args: str) -> tuple[int, str, str]:
    src = tmp_path / "in.mlir"
    src.write_text(text)
    out = tmp_path / "out.mlir"
    if out.exists():
        out.unlink()
    rc = main([str(src), "-o", str(out), *args])
    return rc, (out.read_text() if out.exists() else ""), str(src)


def test_example_roundtrips_and_optimizes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = run_opt(
        tmp_path, SEED_IR, "--pass-pipeline=builtin.module(inline,func.func(canonicalize,cse),symbol-dce)"
    )
    assert rc == 0, capsys.readouterr().err
    assert "@scale" not in out and "@unused" not in out
    assert out.count("arith.mulf ") == 2  # x*2 and the CSE'd square
    assert "func.func @main" in out


def test_error_exit_code_and_no_partial_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, src = run_opt(tmp_path, 'func.func @f() {\n  "func.return"(%x) : (i32) -> ()\n}\n')
    err = capsys.readouterr().err
    assert rc == 1
    assert out == ""  # no half-written output file
    assert f"{src}:2:17: error: use of undeclared SSA value name" in err
    assert '  "func.return"(%x) : (i32) -> ()' in err  # the source line, then a caret
    assert "                ^" in err


def test_missing_input_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "nope.mlir")]) == 1
    assert "cannot read" in capsys.readouterr().err


def test_invalid_utf8_is_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    p = tmp_path / "bad.mlir"
    p.write_bytes(b'module {\n  "a.b"() : () -> ()\xff\n}\n')
    assert main([str(p)]) == 1
    assert f"{p}:2:21: error: invalid UTF-8" in capsys.readouterr().err


def test_pass_flags_and_pipeline_conflict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, _ = run_opt(tmp_path, SEED_IR, "--cse", "--pass-pipeline=builtin.module(cse)")
    assert rc == 2
    assert "cannot be combined" in capsys.readouterr().err


def test_split_chunks_keep_line_numbers() -> None:
    chunks = split_chunks("a\nb\n// -----\nc\n// -----\nd", "// -----")
    assert chunks == [("a\nb", 1), ("c", 4), ("d", 6)]


# ---- fuzzing: mutated IR text gives diagnostics and exit 1, never a traceback or a hang ----------

_TOKENS = [
    "(",
    ")",
    "{",
    "}",
    "<",
    ">",
    "[",
    "]",
    "%",
    "^",
    "@",
    '"',
    ":",
    ",",
    "=",
    "->",
    "#",
    "!",
    "loc(",
    "dense<",
    "0x",
    "tensor<",
    "?x",
    "{-#",
    "#-}",
    "\\",
    "\n",
    "1e400",
    "-",
    "i0",
    "f32",
    "array<i64:",
    "%0:2",
    "^bb0(",
    "// -----",
]


def _mutate(text: str, rnd: random.Random, n: int) -> str:
    s = list(text)
    for _ in range(n):
        op = rnd.randrange(4)
        pos = rnd.randrange(len(s) + 1)
        if op == 0 and s:
            del s[min(pos, len(s) - 1)]
        elif op == 1:
            s[pos:pos] = list(rnd.choice(_TOKENS))
        elif op == 2 and s:
            a = rnd.randrange(len(s))
            b = min(len(s), a + rnd.randrange(1, 40))
            del s[a:b]
        else:
            a = rnd.randrange(len(s))
            s[pos:pos] = s[a : a + rnd.randrange(1, 30)]
    return "".join(s)


class _Timeout(Exception):
    pass


def _alarm(signum: int, frame: object) -> None:
    raise _Timeout


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 8))
def test_fuzz_mutated_ir_never_crashes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], seed: int, n: int
) -> None:
    text = _mutate(SEED_IR, random.Random(seed), n)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        rc, _, _ = run_opt(tmp_path, text, "--canonicalize", "--cse")
    except _Timeout:
        pytest.fail(f"lamina-opt hung on mutated input (seed={seed}, n={n}):\n{text}")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    err = capsys.readouterr().err
    assert rc in (0, 1), f"rc={rc} on input (seed={seed}, n={n}):\n{text}\n---\n{err}"
    assert "Traceback" not in err and "internal error" not in err, f"{err}\n--- input:\n{text}"
    if rc == 1:
        assert "error:" in err

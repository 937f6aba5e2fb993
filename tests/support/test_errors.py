"""The user-facing errors live in one module: every import of ToolError, UsageError or LaminaError
in the code, the tests and the benchmarks comes from ``lamina.support.errors`` (``lamina.api`` gives
LaminaError to its users under the same name), and LaminaError is ToolError."""

from __future__ import annotations

import ast
from pathlib import Path

import lamina.api as lm
from lamina.support import errors

ROOT = Path(__file__).resolve().parents[2]
ERRORS = {"ToolError", "UsageError", "LaminaError"}


def test_errors_are_imported_from_their_module() -> None:
    bad = []
    for folder in ("lamina", "tests", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if not isinstance(node, ast.ImportFrom) or node.module in (
                    "lamina.support.errors",
                    "lamina.api",
                ):
                    continue
                names = ERRORS & {a.name for a in node.names}
                if names:
                    bad.append(
                        f"{path.relative_to(ROOT)}:{node.lineno}: {', '.join(sorted(names))} from {node.module}"
                    )
    assert not bad, "import the errors from lamina.support.errors:\n" + "\n".join(bad)


def test_one_error_class() -> None:
    assert lm.LaminaError is errors.LaminaError is errors.ToolError
    assert issubclass(errors.UsageError, errors.ToolError)

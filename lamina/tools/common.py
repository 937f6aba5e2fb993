"""Helpers shared by the command-line tools: input reading, atomic output, the error guard."""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable

from lamina.support.fileio import atomic_output, atomic_write

__all__ = ["DEBUG_ENV", "atomic_output", "atomic_write", "internal_error_guard", "read_text_input"]

DEBUG_ENV = "LAMINA_DEBUG"


def read_text_input(path: str, tool: str) -> tuple[str | None, str]:
    """Read a text file (or stdin for '-'); on failure print one clear message and return None."""
    if path == "-":
        data = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        name = path
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            print(f"{tool}: error: cannot read '{path}': {e.strerror or e}", file=sys.stderr)
            return None, name
    try:
        return data.decode("utf-8"), name
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        print(
            f"{name}:{line}:{col}: error: invalid UTF-8 byte 0x{data[e.start]:02x} in input", file=sys.stderr
        )
        return None, name


def internal_error_guard(tool: str, fn: Callable[[], int]) -> int:
    """Run a tool's body; an unexpected exception becomes one message (traceback with LAMINA_DEBUG=1)."""
    try:
        return fn()
    except KeyboardInterrupt:
        print(f"{tool}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    except RecursionError:
        print(f"{tool}: error: input nested too deeply", file=sys.stderr)
        return 1
    except Exception as e:
        if os.environ.get(DEBUG_ENV):
            traceback.print_exc()
        print(
            f"{tool}: internal error: {type(e).__name__}: {e}\n"
            f"(this is a bug in Lamina; rerun with {DEBUG_ENV}=1 for a traceback and report it)",
            file=sys.stderr,
        )
        return 3

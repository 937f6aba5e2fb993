"""Helpers shared by the command-line tools: input reading, atomic output, the error guard."""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from collections.abc import Callable

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


def atomic_write(path: str, text: str | bytes) -> None:
    """Write via a temporary file and rename, so a failure never leaves a half-written output."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".lamina-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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

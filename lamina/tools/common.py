"""Helpers shared by the command-line tools: input reading, atomic output, the error guard."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator

from lamina.support.errors import ToolError
from lamina.support.fileio import atomic_output, atomic_write
from lamina.support.paths import check_input_file

__all__ = [
    "DEBUG_ENV",
    "atomic_output",
    "atomic_write",
    "check_not_empty",
    "internal_error_guard",
    "read_text_input",
]

DEBUG_ENV = "LAMINA_DEBUG"
#: numpy's floating-point warnings ("overflow encountered in multiply", ...).
NUMPY_FP_WARNING = r"(overflow|invalid value|divide by zero|underflow) encountered"


def read_text_input(path: str, tool: str) -> tuple[str | None, str]:
    """Read a text file (or stdin for '-'); on failure print one clear message and return None."""
    if path == "-":
        data = sys.stdin.buffer.read()
        name = "<stdin>"
    else:
        name = path
        try:
            if os.path.exists(path):  # a FIFO would block, a device never end: refuse them first
                check_input_file(path, "input")
        except ToolError as e:
            print(f"{tool}: error: {e}", file=sys.stderr)
            return None, name
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


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that every ``atomic_output`` removes its temporary file."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated()


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the body runs, SIGTERM raises :class:`Terminated` (only the main thread gets signals)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def check_not_empty(*flags: tuple[str, str | None]) -> None:
    """Refuse a flag given as an empty string (``--mlir ''`` must not mean the default)."""
    for flag, value in flags:
        if value is not None and not value.strip():
            raise ToolError(f"{flag} is empty")


def internal_error_guard(tool: str, fn: Callable[[], int]) -> int:
    """Run a tool's body; an unexpected exception becomes one message (traceback with LAMINA_DEBUG=1).
    Ctrl-C exits 130 and SIGTERM 143 (128 + the signal), after removing partly written outputs.
    numpy's floating-point warnings are silenced: overflow and NaN show in the results the commands
    report (``npz_tool compare`` names NaN/inf tensors), not as warnings on stderr."""
    try:
        with sigterm_as_interrupt(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", NUMPY_FP_WARNING, RuntimeWarning)
            return fn()
    except Terminated:
        print(f"{tool}: terminated", file=sys.stderr)
        return 143
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

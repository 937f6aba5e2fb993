"""Checking the files a command reads and writes before it does any work.

* :func:`check_input_file`: an input must be an existing regular file (a FIFO would block forever, a
  device like ``/dev/zero`` never ends, a directory is not a model);
* :func:`check_outputs`: no output may be the same file as an input, as a file an input refers to
  (the weight file named by a ``.mlir``'s ``lamina.weight_file``), or as another output, whatever the
  spelling (``./m.onnx``, an absolute path, a symlink, ``dir/../m.onnx``); and each output's directory
  must exist.

Problems raise :class:`~lamina.support.errors.ToolError`.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterable, Sequence

from lamina.support.errors import ToolError

#: ``(label, path)``: the flag or role naming a file (``--mlir``, ``the test result``) and the path.
Named = tuple[str, "str | None"]

_WEIGHT_FILE = re.compile(rb'lamina\.weight_file\s*=\s*"((?:[^"\\\n]|\\.)*)"')


def same_file(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one file: :func:`os.path.samefile` when both exist, else the same
    resolved path (symlinks and ``..`` followed)."""
    try:
        if os.path.exists(a) and os.path.exists(b):
            return os.path.samefile(a, b)
    except OSError:
        pass
    return os.path.realpath(a) == os.path.realpath(b)


def check_input_file(path: str, what: str) -> None:
    """Refuse an input that does not exist or is not a regular file, naming it as ``what``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ToolError(f"{what} '{path}' does not exist") from None
    except OSError as e:
        raise ToolError(f"cannot read {what} '{path}': {e.strerror or e}") from None
    if stat.S_ISDIR(st.st_mode):
        raise ToolError(f"{what} '{path}' is a directory, not a file")
    if not stat.S_ISREG(st.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(st.st_mode)
            else "a device"
            if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode)
            else "not a regular file"
        )
        raise ToolError(f"{what} '{path}' is {kind}, not a regular file")


def weight_file_of(mlir: str) -> str | None:
    """The weight file a ``.mlir`` names with ``lamina.weight_file`` (resolved against its directory),
    or None (no such attribute, or the file cannot be read: its own reader reports that)."""
    try:
        if not os.path.isfile(mlir):
            return None
        with open(mlir, "rb") as f:
            m = _WEIGHT_FILE.search(f.read())
    except OSError:
        return None
    if m is None:
        return None
    name = m.group(1).decode("utf-8", "replace")
    return name if os.path.isabs(name) else os.path.join(os.path.dirname(os.path.abspath(mlir)), name)


def with_weight_files(inputs: Iterable[Named]) -> list[tuple[str, str]]:
    """``inputs`` plus, after each ``.mlir`` naming a weight file, that weight file."""
    out: list[tuple[str, str]] = []
    for label, path in inputs:
        if not path:
            continue
        out.append((label, path))
        w = weight_file_of(path) if path.endswith(".mlir") else None
        if w:
            out.append((f"the weight file of {label} '{path}'", w))
    return out


def check_output_dir(label: str, path: str) -> None:
    """The directory ``path`` goes in must exist, and ``path`` must not be a directory."""
    if not path.strip():
        raise ToolError(f"{label} is empty: expected a file name")
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise ToolError(f"cannot write {label} '{path}': directory '{d}' does not exist")
    if os.path.isdir(path):
        raise ToolError(f"cannot write {label} '{path}': it is a directory")


def check_outputs(inputs: Iterable[Named], outputs: Sequence[Named]) -> None:
    """Refuse, before any work, an output that is the same file as an input (or a weight file an
    input ``.mlir`` names) or as another output; and an output whose directory does not exist."""
    ins = with_weight_files(inputs)
    outs = [(label, path) for label, path in outputs if path is not None]
    for i, (label, path) in enumerate(outs):
        check_output_dir(label, path)
        for in_label, in_path in ins:
            if same_file(path, in_path):
                what = in_label if in_label.startswith("the weight file") else f"{in_label} '{in_path}'"
                raise ToolError(
                    f"{label} '{path}' is the same file as {what}: refusing to overwrite an input"
                )
        for other_label, other in outs[:i]:
            if same_file(path, other):
                raise ToolError(
                    f"{label} '{path}' is the same file as {other_label} '{other}': two outputs cannot "
                    "share one file"
                )

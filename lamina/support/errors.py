"""The user-facing errors of the commands, the flows and the API, in one place (every floor may raise
them; the commands print them as one line).

* :class:`ToolError` — a bad file, flag, argument or input: printed as ``<tool>: error: <message>``,
  exit status 1. ``lamina.api`` raises it under its API name, :data:`LaminaError`.
* :class:`UsageError` — an invalid flag or combination of flags, found before any work: exit status 2.
"""

from __future__ import annotations

__all__ = ["LaminaError", "ToolError", "UsageError"]


class ToolError(Exception):
    """A user-facing error (bad file, bad flag, mismatched input): printed as one message."""


class UsageError(ToolError):
    """An invalid flag or flag combination (exit status 2)."""


#: The name :mod:`lamina.api` gives :class:`ToolError` (the same class: ``except LaminaError`` catches
#: every user-facing error of the flows).
LaminaError = ToolError

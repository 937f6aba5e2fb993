"""The user-facing error of the commands and the API (``lamina.frontends.model_io`` re-exports it)."""

from __future__ import annotations


class ToolError(Exception):
    """A user-facing error (bad file, bad flag, mismatched input): printed as one message."""

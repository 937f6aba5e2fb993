"""Built-in examples used by ``lamina example`` and the tests."""

from pathlib import Path

EXAMPLES_DIR = Path(__file__).parent


def example_path(name: str) -> Path:
    return EXAMPLES_DIR / name

"""Dialects above the core. Importing this package makes every dialect loadable by name."""

from lamina.ir.context import register_dialect_module

DIALECTS = ("func", "arith", "cf", "quant", "top", "tpu")

for _name in DIALECTS:
    register_dialect_module(_name, f"lamina.dialects.{_name}")


def load_all() -> None:
    """Import every dialect module (registers them)."""
    import importlib

    for name in DIALECTS:
        importlib.import_module(f"lamina.dialects.{name}")

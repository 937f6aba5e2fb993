"""Dialects above the core. Importing this package makes every dialect loadable by name."""

from lamina.ir.context import register_dialect_module

for _name in ("func", "arith", "cf", "quant"):
    register_dialect_module(_name, f"lamina.dialects.{_name}")


def load_all() -> None:
    """Import every dialect module (registers them)."""
    import importlib

    for name in ("func", "arith", "cf", "quant"):
        try:
            importlib.import_module(f"lamina.dialects.{name}")
        except ModuleNotFoundError as e:  # a dialect still being written
            if e.name != f"lamina.dialects.{name}":
                raise

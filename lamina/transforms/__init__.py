"""Built-in transformation passes: canonicalize, cse, dce, symbol-dce, inline.

Importing this package registers them (the pass registry imports it on the first lookup)."""

from lamina.transforms.canonicalize import Canonicalizer, collect_canonicalization_patterns
from lamina.transforms.cse import CSE, cse
from lamina.transforms.dce import DCE, dead_code_elimination
from lamina.transforms.inline import Inliner, inline_call
from lamina.transforms.symbol_dce import SymbolDCE, symbol_dce

__all__ = [
    "CSE",
    "DCE",
    "Canonicalizer",
    "Inliner",
    "SymbolDCE",
    "collect_canonicalization_patterns",
    "cse",
    "dead_code_elimination",
    "inline_call",
    "symbol_dce",
]

"""The textual IR printer: MLIR's generic and custom forms, byte-identical to ``mlir-opt-22``.

Entry points:

* :func:`print_operation` prints a whole op (normally a ``builtin.module``) with the ``#loc``
  alias definitions (top: those that cannot be deferred; bottom: op locations), and the
  ``{-# dialect_resources ... #-}`` section, exactly as ``mlir-opt`` does.
* :func:`print_attribute_or_type` is the context-free text of a type or attribute (cached on the
  object by ``str()``).
* :class:`Printer` is also the object custom op ``print(self, printer)`` hooks write to; its methods
  mirror MLIR's ``OpAsmPrinter`` (``print_operand``, ``print_type``, ``print_region``, ...).

Value numbering follows MLIR's ``SSANameState``: regions are numbered from a LIFO stack; in the
generic form one counter runs through the whole op, in the custom form a nested region starts from
the counters its parent region ended with. Alias collection follows MLIR's ``AliasInitializer``: a
dry run of the printer visits locations in print order (op location first, then regions, then the
op's attributes), aliases are sorted by nesting depth and numbered ``#loc``, ``#loc1``, ...

The package: :mod:`.text` holds the text of types, attributes and locations, :mod:`.ops` the op
printer (:class:`Printer`, :func:`print_operation`).
"""

from lamina.ir.printer.ops import Printer, _default_dialect, _own_hooks, print_operation
from lamina.ir.printer.text import (
    HEX_THRESHOLD,
    escape_string,
    print_attribute_or_type,
    quote_identifier,
    symbol_text,
)

__all__ = [
    "HEX_THRESHOLD",
    "Printer",
    "_default_dialect",
    "_own_hooks",
    "escape_string",
    "print_attribute_or_type",
    "print_operation",
    "quote_identifier",
    "symbol_text",
]

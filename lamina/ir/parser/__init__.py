"""The textual IR parser: MLIR's generic form, custom forms (through op hooks and declarative
assembly formats), aliases, locations and resources.

Entry points: :func:`parse_module`, :func:`parse_type`, :func:`parse_attribute`. The class
:class:`Parser` is also what custom op ``parse(cls, parser)`` hooks receive; its methods mirror MLIR's
``OpAsmParser`` (``parse_operand``, ``parse_type``, ``parse_region``, ``resolve_operands``...).

The parser works directly on the string with a position index and precompiled regular expressions
(no token objects). Types, function types, attribute dictionaries and locations are memoised by
their exact text within one parse (they are uniqued and immutable, so this is safe). Errors raise an
internal :class:`ParseError` that :func:`parse_module` turns into one located diagnostic (MLIR style:
``file:line:col: error: ...`` with the source line and a caret); no input produces a Python
traceback, a hang or a RecursionError.

The grammar is split along MLIR's lines, one layer per module, each a subclass of the one below:
:mod:`.lexer` (text, positions, errors, tokens) → :mod:`.types` → :mod:`.attributes` (with dense
data and resources) → :mod:`.locations` → :mod:`.ops` (operations, blocks, regions, the top level).
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from lamina.ir.attributes import Attribute
from lamina.ir.context import Context
from lamina.ir.core import Operation
from lamina.ir.external_resources import load_external_resources
from lamina.ir.parser.lexer import ParseError
from lamina.ir.parser.ops import Argument, Parser, UnresolvedOperand
from lamina.ir.types import Type

__all__ = [
    "Argument",
    "ParseError",
    "Parser",
    "UnresolvedOperand",
    "parse_attribute",
    "parse_module",
    "parse_type",
]


def _report(ctx: Context, p: Parser, e: ParseError) -> None:
    ctx.diagnostics.emit(p.make_diagnostic(e))


def parse_module(text: str, ctx: Context, filename: str = "<stdin>", line_offset: int = 0) -> Any:
    """Parse a module (top-level ops are wrapped in one as ``mlir-opt`` does).

    Errors are reported as located diagnostics to ``ctx.diagnostics``; returns None on error.
    """
    p = Parser(text, ctx, filename, line_offset)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the IR is a large graph of small objects: collections would cost ~30%
    try:
        module = p.parse_top_level()
        _load_external_weights(module, p, filename)
        return module
    except ParseError as e:
        _report(ctx, p, e)
    except RecursionError:
        _report(ctx, p, ParseError(p.pos, "nesting is too deep"))
    except Exception as e:  # a bug in a custom parser hook must not escape as a traceback
        _report(ctx, p, ParseError(p.pos, f"internal error while parsing: {type(e).__name__}: {e}"))
    finally:
        if gc_was_enabled:
            gc.enable()
    return None


def _load_external_weights(module: Operation, p: Parser, filename: str) -> None:
    """Attach the blobs of an external resource file the module names (through the registered
    provider: :mod:`lamina.ir.external_resources`); a problem is located at the attribute."""
    problem = load_external_resources(module, filename, p._resource_handles, p._resource_types)
    if problem is not None:
        attr, message = problem
        raise ParseError(max(p.s.find(attr), 0), message)


def _parse_fragment(text: str, ctx: Context, fn: Callable[[Parser], Any]) -> Any:
    p = Parser(text, ctx, "<string>")
    try:
        r = fn(p)
        if not p.at_end():
            raise p.error("unexpected trailing text")
        return r
    except ParseError as e:
        _report(ctx, p, e)
    except RecursionError:
        _report(ctx, p, ParseError(p.pos, "nesting is too deep"))
    except Exception as e:
        _report(ctx, p, ParseError(p.pos, f"internal error while parsing: {type(e).__name__}: {e}"))
    return None


def parse_type(text: str, ctx: Context) -> Type | None:
    """Parse one type; None (with a diagnostic) on error."""
    return _parse_fragment(text, ctx, lambda p: p.parse_type())


def parse_attribute(text: str, ctx: Context) -> Attribute | None:
    """Parse one attribute; None (with a diagnostic) on error."""
    return _parse_fragment(text, ctx, lambda p: p.parse_attribute())

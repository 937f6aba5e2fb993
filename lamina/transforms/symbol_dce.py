"""``symbol-dce``: erase symbols that are not public and not referenced by anything live.

Liveness starts from every op of a symbol table that is not a symbol and from every public symbol
(when the table itself is visible from outside), and propagates through symbol references
(``@f``, ``@mod::@f``) found in properties and attributes, nested ones included. Symbol tables
nested in a live symbol are processed recursively; a private table hides its public symbols.
"""

from __future__ import annotations

from collections.abc import Iterator

from lamina.ir.attributes import ArrayAttr, Attribute, DictionaryAttr, StringAttr, SymbolRefAttr
from lamina.ir.core import Operation
from lamina.ir.symbol_table import SymbolTableTrait
from lamina.passes import Pass, Statistic, register_pass


def symbol_name(op: Operation) -> str | None:
    a = op.properties.get("sym_name")
    if a is None:
        a = op.attributes.get("sym_name")
    return a.value if isinstance(a, StringAttr) else None


def symbol_visibility(op: Operation) -> str:
    a = op.get_attr("sym_visibility")
    return a.value if isinstance(a, StringAttr) else "public"


def is_symbol_table(op: Operation) -> bool:
    return SymbolTableTrait in op.traits


def _refs_in_attr(a: Attribute) -> Iterator[SymbolRefAttr]:
    if isinstance(a, SymbolRefAttr):
        yield a
    elif isinstance(a, ArrayAttr):
        for x in a:
            yield from _refs_in_attr(x)
    elif isinstance(a, DictionaryAttr):
        for x in a.values():
            yield from _refs_in_attr(x)


def op_symbol_refs(op: Operation) -> Iterator[SymbolRefAttr]:
    """The symbol references in ``op``'s own properties and attributes."""
    for a in op.properties.values():
        yield from _refs_in_attr(a)
    for a in op.attributes.values():
        yield from _refs_in_attr(a)


def symbol_uses_in(op: Operation) -> Iterator[tuple[Operation, SymbolRefAttr]]:
    """``(user, ref)`` for ``op`` and every op nested in it that resolves references in the same
    symbol table as ``op`` (nested symbol tables' contents are excluded; the table ops themselves
    are included)."""
    stack = [op]
    while stack:
        o = stack.pop()
        for ref in op_symbol_refs(o):
            yield o, ref
        if o is not op and is_symbol_table(o):
            continue
        for r in o.regions:
            for b in r.blocks:
                stack.extend(b)


def _table_symbols(table: Operation) -> dict[str, Operation]:
    out: dict[str, Operation] = {}
    for r in table.regions:
        for b in r.blocks:
            for o in b:
                n = symbol_name(o)
                if n is not None and n not in out:
                    out[n] = o
    return out


def symbol_dce(table: Operation, hidden: bool = False, extra_live: set[str] | None = None) -> int:
    """Erase dead symbols in ``table`` (a symbol-table op) and, recursively, in its live nested
    tables; returns the number of erased symbols."""
    symbols = _table_symbols(table)
    live: set[Operation] = set()
    work: list[Operation] = []
    nested_live: dict[Operation, set[str]] = {}

    def mark(o: Operation) -> None:
        if o not in live:
            live.add(o)
            work.append(o)

    for r in table.regions:
        for b in r.blocks:
            for o in b:
                name = symbol_name(o)
                if name is None:
                    mark(o)
                elif not (hidden or symbol_visibility(o) == "private") or (extra_live and name in extra_live):
                    mark(o)  # not discardable
    while work:
        o = work.pop()
        for _user, ref in symbol_uses_in(o):
            # A reference made inside a nested table op's own region resolves there; we only see
            # the references on the table op itself and outside nested tables.
            target = symbols.get(ref.root)
            if target is None:
                continue
            mark(target)
            if ref.nested:
                nested_live.setdefault(target, set()).add(ref.nested[0])
    erased = 0
    for sym in list(symbols.values()):
        if sym not in live:
            sym.drop_all_references()
            sym.erase()
            erased += 1
    for o in list(live):
        if o.parent is not None and is_symbol_table(o) and o is not table:
            is_private = symbol_name(o) is not None and symbol_visibility(o) == "private"
            erased += symbol_dce(o, hidden or is_private, nested_live.get(o))
    return erased


@register_pass
class SymbolDCE(Pass):
    name = "symbol-dce"
    summary = "Eliminate dead symbols"

    num_dce = Statistic("num-dce'd", "Number of symbols DCE'd")

    def run_on_operation(self, op: Operation) -> bool | None:
        if not is_symbol_table(op):
            op.emit_error(" was scheduled to run under SymbolDCE, but does not define a symbol table")
            return False
        # The root table is visible from outside unless it is itself a private symbol.
        hidden = symbol_name(op) is not None and symbol_visibility(op) == "private" and op.parent is not None
        self.num_dce += symbol_dce(op, hidden)
        return None

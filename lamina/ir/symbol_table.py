"""Symbols and symbol tables (MLIR's ``SymbolTable``).

An op with the :class:`SymbolTableTrait` (MLIR's ``SymbolTable`` trait) (``builtin.module``) owns a single-block
region whose ops may define *symbols*: ops with a ``sym_name`` string attribute (``func.func``).
Symbols are referenced by :class:`~lamina.ir.attributes.SymbolRefAttr` (``@f``, or ``@m::@f`` to
reach into a nested table). Visibility (``sym_visibility``): ``public`` (the default) may be used
from anywhere, ``private`` only from within the parent table, ``nested`` from the parent table and
tables nested in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from lamina.ir.attributes import ArrayAttr, Attribute, DictionaryAttr, StringAttr, SymbolRefAttr
from lamina.ir.core import IRError, Operation
from lamina.ir.diagnostics import VerifyError, diagnostic_location
from lamina.ir.traits import Trait

SYM_NAME = "sym_name"
SYM_VISIBILITY = "sym_visibility"
VISIBILITIES = ("public", "private", "nested")


class SymbolTableTrait(Trait):
    """The op's region defines a symbol table: nested symbols have unique names (MLIR's
    ``OpTrait::SymbolTable``, defined beside the table as in MLIR's ``SymbolTable.h``)."""

    def verify(self, op: Operation) -> None:
        verify_symbol_table(op)

    def __repr__(self) -> str:
        return "SymbolTable"


# --------------------------------------------------------------------------------------------
# Symbol attributes of an op
# --------------------------------------------------------------------------------------------


def get_symbol_name(op: Operation) -> str | None:
    """The name of the symbol ``op`` defines, or None if it defines none."""
    a = op.properties.get(SYM_NAME)
    if a is None:
        a = op.attributes.get(SYM_NAME)
    return a.value if isinstance(a, StringAttr) else None


def set_symbol_name(op: Operation, name: str) -> None:
    op.set_attr(SYM_NAME, StringAttr(name))


def get_symbol_visibility(op: Operation) -> str:
    a = op.get_attr(SYM_VISIBILITY)
    return a.value if isinstance(a, StringAttr) else "public"


def set_symbol_visibility(op: Operation, visibility: str) -> None:
    if visibility not in VISIBILITIES:
        raise ValueError(f"bad symbol visibility {visibility!r}")
    if visibility == "public":
        op.properties.pop(SYM_VISIBILITY, None)
        op.attributes.pop(SYM_VISIBILITY, None)
    else:
        op.set_attr(SYM_VISIBILITY, StringAttr(visibility))


def is_symbol_table(op: Operation) -> bool:
    return SymbolTableTrait in op.traits


def nearest_symbol_table(op: Operation | None) -> Operation | None:
    """``op`` itself if it is a symbol table, else its closest ancestor that is one."""
    while op is not None and SymbolTableTrait not in op.traits:
        op = op.parent_op()
    return op


# --------------------------------------------------------------------------------------------
# SymbolTable
# --------------------------------------------------------------------------------------------


class SymbolTable:
    """The symbols directly nested in a symbol-table op, by name."""

    __slots__ = ("_symbols", "_uniquing_counter", "op")

    def __init__(self, op: Operation) -> None:
        if SymbolTableTrait not in op.traits:
            raise IRError(f"'{op.name}' op is not a symbol table")
        if len(op.regions) != 1 or len(op.regions[0].blocks) > 1:
            raise IRError("a symbol table op must have one region with at most one block")
        self.op = op
        self._symbols: dict[str, Operation] = {}
        self._uniquing_counter = 0
        for child in op.regions[0].ops():
            name = get_symbol_name(child)
            if name is not None:
                self._symbols.setdefault(name, child)

    @property
    def block(self) -> Any:
        r = self.op.regions[0]
        return r.blocks[0] if r.blocks else r.add_block()

    def lookup(self, name: str | StringAttr) -> Operation | None:
        if isinstance(name, StringAttr):
            name = name.value
        return self._symbols.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._symbols

    def __getitem__(self, name: str) -> Operation:
        return self._symbols[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._symbols)

    def __len__(self) -> int:
        return len(self._symbols)

    def symbols(self) -> list[Operation]:
        return list(self._symbols.values())

    def _unique_name(self, name: str) -> str:
        if name not in self._symbols:
            return name
        while True:
            cand = f"{name}_{self._uniquing_counter}"
            self._uniquing_counter += 1
            if cand not in self._symbols:
                return cand

    def insert(self, op: Operation, before: Operation | None = None) -> str:
        """Insert a symbol op (at the end of the body, before its terminator if it has one, or
        before ``before``); renames it ``name_N`` if the name is taken. Returns the final name."""
        name = get_symbol_name(op)
        if name is None:
            raise IRError(f"'{op.name}' op does not define a symbol")
        block = self.block
        if op.parent is None:
            anchor = before if before is not None else block.terminator
            block.insert_before(anchor, op)
        elif op.parent is not block:
            raise IRError("symbol op is already in another block")
        if self._symbols.get(name) is op:
            return name
        unique = self._unique_name(name)
        if unique != name:
            set_symbol_name(op, unique)
        self._symbols[unique] = op
        return unique

    def remove(self, op: Operation) -> None:
        """Forget the symbol and detach it from the body (uses are left alone)."""
        name = get_symbol_name(op)
        if name is not None and self._symbols.get(name) is op:
            del self._symbols[name]
        if op.parent is self.block:
            op.detach()

    def erase(self, op: Operation) -> None:
        self.remove(op)
        op.erase()

    def rename(self, op: Operation | str, new_name: str) -> None:
        """Rename a symbol and update every use of it nested in the symbol-table op."""
        if isinstance(op, str):
            found = self._symbols.get(op)
            if found is None:
                raise IRError(f"no symbol named '{op}'")
            op = found
        old = get_symbol_name(op)
        if old is None:
            raise IRError(f"'{op.name}' op does not define a symbol")
        if old == new_name:
            return
        if new_name in self._symbols:
            raise IRError(f"symbol '{new_name}' already exists")
        replace_all_symbol_uses(old, new_name, self.op)
        set_symbol_name(op, new_name)
        if self._symbols.get(old) is op:
            del self._symbols[old]
        self._symbols[new_name] = op

    def __repr__(self) -> str:
        return f"<SymbolTable of '{self.op.name}': {sorted(self._symbols)}>"


class SymbolTableCollection:
    """Caches one :class:`SymbolTable` per symbol-table op (for many lookups in one walk)."""

    __slots__ = ("_tables",)

    def __init__(self) -> None:
        self._tables: dict[Operation, SymbolTable] = {}

    def get(self, op: Operation) -> SymbolTable:
        t = self._tables.get(op)
        if t is None:
            t = self._tables[op] = SymbolTable(op)
        return t

    def lookup_in(self, table_op: Operation, ref: SymbolRefAttr | str) -> Operation | None:
        if isinstance(ref, str):
            ref = SymbolRefAttr(ref)
        try:
            found = self.get(table_op).lookup(ref.root)
            for name in ref.nested:
                if found is None or SymbolTableTrait not in found.traits:
                    return None
                found = self.get(found).lookup(name)
        except IRError:
            return None
        return found

    def lookup_nearest(self, from_op: Operation, ref: SymbolRefAttr | str) -> Operation | None:
        table = nearest_symbol_table(from_op)
        if table is None:
            return None
        return self.lookup_in(table, ref)

    def invalidate(self, op: Operation) -> None:
        self._tables.pop(op, None)


def lookup_symbol_in(table_op: Operation, ref: SymbolRefAttr | str) -> Operation | None:
    """Resolve ``ref`` inside the symbol table ``table_op`` (``@a::@b``: ``b`` inside ``a``)."""
    if isinstance(ref, str):
        ref = SymbolRefAttr(ref)
    if SymbolTableTrait not in table_op.traits:
        return None
    found = _lookup_direct(table_op, ref.root)
    for name in ref.nested:
        if found is None or SymbolTableTrait not in found.traits:
            return None
        found = _lookup_direct(found, name)
    return found


def _lookup_direct(table_op: Operation, name: str) -> Operation | None:
    if len(table_op.regions) != 1:
        return None
    for child in table_op.regions[0].ops():
        if get_symbol_name(child) == name:
            return child
    return None


def lookup_symbol(from_op: Operation, ref: SymbolRefAttr | str) -> Operation | None:
    """Resolve ``ref`` in the symbol table nearest to ``from_op`` (``from_op`` itself if it is one)."""
    table = nearest_symbol_table(from_op)
    return lookup_symbol_in(table, ref) if table is not None else None


# --------------------------------------------------------------------------------------------
# Uses
# --------------------------------------------------------------------------------------------


class SymbolUse:
    """One reference ``ref`` held by ``user`` in the attribute ``attr_name``."""

    __slots__ = ("attr_name", "ref", "user")

    def __init__(self, user: Operation, ref: SymbolRefAttr, attr_name: str) -> None:
        self.user = user
        self.ref = ref
        self.attr_name = attr_name

    def __repr__(self) -> str:
        return f"<SymbolUse of {self.ref.root!r} by '{self.user.name}'>"


def _refs_in(attr: Attribute) -> Iterator[SymbolRefAttr]:
    if isinstance(attr, SymbolRefAttr):
        yield attr
    elif isinstance(attr, ArrayAttr):
        for a in attr.elements:
            yield from _refs_in(a)
    elif isinstance(attr, DictionaryAttr):
        for a in attr.values():
            yield from _refs_in(a)


def _op_refs(op: Operation) -> Iterator[SymbolUse]:
    for d in (op.properties, op.attributes):
        for k, a in d.items():
            if isinstance(a, (SymbolRefAttr, ArrayAttr, DictionaryAttr)):
                for ref in _refs_in(a):
                    yield SymbolUse(op, ref, k)


def symbol_uses(op: Operation) -> list[SymbolUse]:
    """Every SymbolRefAttr held by ``op`` and the ops nested in it (inside ArrayAttr and
    DictionaryAttr too). Does not look inside nested symbol tables (their own attributes are
    included), except ``op`` itself when it is one."""
    out: list[SymbolUse] = list(_op_refs(op))
    stack = [op]
    while stack:
        cur = stack.pop()
        for region in cur.regions:
            for block in region.blocks:
                for child in block:
                    out.extend(_op_refs(child))
                    if child.regions and SymbolTableTrait not in child.traits:
                        stack.append(child)
    return out


def symbol_uses_of(name: str, op: Operation) -> list[SymbolUse]:
    """The uses (as a root reference) of the symbol ``name`` nested in ``op``."""
    return [u for u in symbol_uses(op) if u.ref.root == name]


def symbol_known_use_empty(name: str, op: Operation) -> bool:
    return not symbol_uses_of(name, op)


def _replace_in(attr: Attribute, fn: Callable[[SymbolRefAttr], SymbolRefAttr]) -> Attribute:
    if isinstance(attr, SymbolRefAttr):
        return fn(attr)
    if isinstance(attr, ArrayAttr):
        new = [_replace_in(a, fn) for a in attr.elements]
        return attr if all(a is b for a, b in zip(new, attr.elements)) else ArrayAttr(new)
    if isinstance(attr, DictionaryAttr):
        items = [(k, _replace_in(v, fn)) for k, v in attr.items()]
        return attr if all(v is attr[k] for k, v in items) else DictionaryAttr(items)
    return attr


def replace_all_symbol_uses(old: str, new: str, op: Operation) -> None:
    """Rewrite references whose root is ``@old`` into ``@new`` in ``op`` and the ops nested in it."""

    def fn(ref: SymbolRefAttr) -> SymbolRefAttr:
        return SymbolRefAttr(new, ref.nested) if ref.root == old else ref

    users = dict.fromkeys(u.user for u in symbol_uses(op) if u.ref.root == old)
    for user in users:
        for d in (user.properties, user.attributes):
            for k, a in list(d.items()):
                d[k] = _replace_in(a, fn)


# --------------------------------------------------------------------------------------------
# Verification
# --------------------------------------------------------------------------------------------


def _located(message: str, loc: Any, notes: list | None = None) -> VerifyError:
    """A VerifyError reported at ``loc`` without the ``'op' op`` prefix (the verifier reads these
    two extra fields)."""
    e = VerifyError(message, notes)
    e.location = loc  # type: ignore[attr-defined]
    e.op_prefix = False  # type: ignore[attr-defined]
    return e


def verify_symbol_table(op: Operation) -> None:
    """The SymbolTable trait's check: one region of at most one block, unique symbol names."""
    if len(op.regions) != 1:
        raise VerifyError("Operations with a 'SymbolTable' must have exactly one region")
    blocks = op.regions[0].blocks
    if len(blocks) > 1:
        raise VerifyError("Operations with a 'SymbolTable' must have exactly one block")
    seen: dict[str, Operation] = {}
    for child in op.regions[0].ops():
        name = get_symbol_name(child)
        if name is None:
            continue
        first = seen.setdefault(name, child)
        if first is not child:
            raise _located(
                f"redefinition of symbol named '{name}'",
                diagnostic_location(child),
                [("see existing symbol definition here", diagnostic_location(first))],
            )


def is_optional_symbol(op: Operation) -> bool:
    return bool(getattr(op, "optional_symbol", False)) or op.name == "builtin.module"


def verify_symbol(op: Operation) -> None:
    """Checks on a symbol-defining op (SymbolOpInterface): name, visibility, parent table."""
    a = op.get_attr(SYM_NAME)
    if not isinstance(a, StringAttr) and not (a is None and is_optional_symbol(op)):
        raise VerifyError(f"requires string attribute '{SYM_NAME}'")
    vis = op.get_attr(SYM_VISIBILITY)
    if vis is not None:
        if not isinstance(vis, StringAttr):
            raise VerifyError(
                f"requires visibility attribute '{SYM_VISIBILITY}' to be a string attribute, but got {vis}"
            )
        if vis.value not in VISIBILITIES:
            raise VerifyError(
                f'visibility expected to be one of ["public", "private", "nested"], but got "{vis.value}"'
            )
    parent = op.parent_op()
    if parent is not None and SymbolTableTrait not in parent.traits and a is not None:
        raise VerifyError("symbol's parent must have the SymbolTable trait")

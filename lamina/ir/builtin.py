"""The ``builtin`` dialect: ``builtin.module`` and ``builtin.unrealized_conversion_cast``."""

from __future__ import annotations

from collections.abc import Iterable

from lamina.ir.attributes import StringAttr
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.core import Block, Operation, Region
from lamina.ir.location import Location
from lamina.ir.opdef import Op, opt_prop, region, var_operand, var_result
from lamina.ir.traits import (
    IsolatedFromAbove,
    NoTerminator,
    SingleBlock,
    SymbolOpInterface,
    SymbolTable,
)


class ModuleOp(Op, SymbolOpInterface):
    """The top-level container: one block of ops, no terminator, a symbol table."""

    name = "builtin.module"
    traits = (IsolatedFromAbove(), NoTerminator(), SingleBlock(), SymbolTable())
    sym_name = opt_prop(StringAttr)
    sym_visibility = opt_prop(StringAttr)
    body_region = region(single_block=True)

    @classmethod
    def new(cls, ops: Iterable[Operation] = (), loc: Location | None = None, sym_name: str | None = None) -> ModuleOp:
        m = cls.build(loc=loc, sym_name=StringAttr(sym_name) if sym_name else None)
        b = m.regions[0].add_block()
        for op in ops:
            b.append(op)
        return m

    @property
    def body(self) -> Block:
        r: Region = self.regions[0]
        if not r.blocks:
            r.add_block()
        return r.blocks[0]

    def verify_(self) -> None:
        return None


class UnrealizedConversionCastOp(Op):
    """A cast between type systems, left by partial dialect conversion."""

    name = "builtin.unrealized_conversion_cast"
    inputs = var_operand()
    outputs = var_result()


BUILTIN = register_dialect(Dialect("builtin", [ModuleOp, UnrealizedConversionCastOp]))

"""The ``builtin`` dialect: ``builtin.module`` and ``builtin.unrealized_conversion_cast``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lamina.ir.attributes import StringAttr
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.core import Block, Operation, Region
from lamina.ir.location import Location
from lamina.ir.opdef import Op, opt_prop, region, var_operand, var_result
from lamina.ir.symbol_table import SymbolTableTrait
from lamina.ir.traits import (
    IsolatedFromAbove,
    NoTerminator,
    SingleBlock,
    SymbolOpInterface,
)


class ModuleOp(Op, SymbolOpInterface):
    """The top-level container: one block of ops, no terminator, a symbol table."""

    name = "builtin.module"
    traits = (IsolatedFromAbove(), NoTerminator(), SingleBlock(), SymbolTableTrait())
    sym_name = opt_prop(StringAttr)
    sym_visibility = opt_prop(StringAttr)
    body_region = region(single_block=True)

    @classmethod
    def new(
        cls, ops: Iterable[Operation] = (), loc: Location | None = None, sym_name: str | None = None
    ) -> ModuleOp:
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

    # ---- custom assembly: ``module @name attributes {...} {`` ... ``}``

    def print(self, printer: Any) -> None:
        name = self.properties.get("sym_name")
        if isinstance(name, StringAttr):
            printer.write(" ")
            printer.print_symbol_name(name.value)
        merged = {k: v for k, v in self.properties.items() if k != "sym_name" or v is not name}
        merged.update(self.attributes)
        printer.print_optional_attr_dict_with_keyword(merged)
        printer.write(" ")
        printer.print_region(self.regions[0], print_entry_block_args=False, print_block_terminators=False)

    @classmethod
    def parse(cls, parser: Any) -> ModuleOp:
        name = parser.parse_optional_symbol_name()
        attrs = parser.parse_optional_attr_dict_with_keyword()
        props: dict[str, Any] = {}
        if name is not None:
            props["sym_name"] = StringAttr(name)
        for k in [k for k in attrs if k in cls.op_def.prop_names]:
            props[k] = attrs.pop(k)
        region = parser.parse_region(arguments=None, isolated=True)
        if not region.blocks:
            region.add_block()
        return parser.create_op(cls, (), (), props, attrs, [region])

    def verify_(self) -> None:
        return None


class UnrealizedConversionCastOp(Op):
    """A cast between type systems, left by partial dialect conversion."""

    name = "builtin.unrealized_conversion_cast"
    inputs = var_operand()
    outputs = var_result()


BUILTIN = register_dialect(Dialect("builtin", [ModuleOp, UnrealizedConversionCastOp]))

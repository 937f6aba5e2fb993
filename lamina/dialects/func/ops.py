"""``func.func``, ``func.return`` and ``func.call``."""

from __future__ import annotations

from collections.abc import Sequence

from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, SymbolRefAttr, TypeAttr
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.core import Block, Region, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.location import Location
from lamina.ir.opdef import Op, opt_prop, prop, region, var_operand, var_result
from lamina.ir.traits import (
    AffineScope,
    AutomaticAllocationScope,
    CallableOpInterface,
    CallOpInterface,
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    Pure,
    ReturnLike,
    SymbolOpInterface,
)
from lamina.ir.types import FunctionType, Type


class FuncOp(Op, SymbolOpInterface, CallableOpInterface):
    """A function: a symbol with a ``function_type`` and a body region (empty for declarations)."""

    name = "func.func"
    traits = (IsolatedFromAbove(), AffineScope(), AutomaticAllocationScope())
    sym_name = prop(StringAttr)
    function_type = prop(TypeAttr)
    sym_visibility = opt_prop(StringAttr)
    arg_attrs = opt_prop(ArrayAttr)
    res_attrs = opt_prop(ArrayAttr)
    no_inline = opt_prop()
    body = region()

    @classmethod
    def new(
        cls,
        name: str,
        inputs: Sequence[Type],
        results: Sequence[Type],
        loc: Location | None = None,
        visibility: str | None = None,
        declaration: bool = False,
    ) -> FuncOp:
        """A function with an entry block whose arguments match ``inputs`` (none if a declaration)."""
        op = cls.build(
            loc=loc,
            sym_name=StringAttr(name),
            function_type=TypeAttr(FunctionType(inputs, results)),
            sym_visibility=StringAttr(visibility) if visibility else None,
        )
        if not declaration:
            op.regions[0].add_block(Block(inputs, [loc] * len(inputs) if loc is not None else None))
        return op

    @property
    def type(self) -> FunctionType:
        return self.properties["function_type"].value

    @property
    def entry_block(self) -> Block:
        return self.regions[0].blocks[0]

    @property
    def is_declaration(self) -> bool:
        return not self.regions[0].blocks

    @property
    def arguments(self) -> list[Value]:
        return list(self.entry_block.args)

    # CallableOpInterface
    def callable_region(self) -> Region:
        return self.regions[0]

    def argument_types(self) -> Sequence[Type]:
        return self.type.inputs

    def result_types_(self) -> Sequence[Type]:
        return self.type.results

    def verify_(self) -> None:
        ft = self.properties["function_type"].value
        if not isinstance(ft, FunctionType):
            raise VerifyError(f"requires a function type, got '{ft}'")
        for key, n in (("arg_attrs", len(ft.inputs)), ("res_attrs", len(ft.results))):
            a = self.properties.get(key)
            if a is not None:
                if len(a) != n or not all(isinstance(x, DictionaryAttr) for x in a):
                    raise VerifyError(f"expects '{key}' to be an array of {n} dictionaries")
        if self.is_declaration:
            if self.symbol_visibility() == "public":
                raise VerifyError("symbol declaration cannot have public visibility")
            return
        entry = self.entry_block
        if len(entry.args) != len(ft.inputs):
            raise VerifyError(
                f"entry block must have {len(ft.inputs)} arguments to match function signature"
            )
        for i, (a, t) in enumerate(zip(entry.args, ft.inputs)):
            if a.type is not t:
                raise VerifyError(
                    f"type of entry block argument #{i}({a.type}) must match the type of the "
                    f"corresponding argument in function signature({t})"
                )


class ReturnOp(Op):
    """Returns from a ``func.func``; operand types must match the function's results."""

    name = "func.return"
    traits = (Pure(), IsTerminator(), ReturnLike(), HasParent("func.func"))
    operands_ = var_operand()

    def verify_(self) -> None:
        fn = self.parent_op()
        if not isinstance(fn, FuncOp):
            return
        results = fn.type.results
        vals = self.operands
        if len(vals) != len(results):
            raise VerifyError(
                f"has {len(vals)} operands, but enclosing function (@{fn.symbol_name()}) returns {len(results)}"
            )
        for i, (v, t) in enumerate(zip(vals, results)):
            if v.type is not t:
                raise VerifyError(
                    f"type of return operand {i} ('{v.type}') doesn't match function result type ('{t}') "
                    f"in function @{fn.symbol_name()}"
                )


class CallOp(Op, CallOpInterface):
    """Calls a function by symbol."""

    name = "func.call"
    callee_ = prop(SymbolRefAttr, name="callee")
    arg_attrs = opt_prop(ArrayAttr)
    res_attrs = opt_prop(ArrayAttr)
    no_inline = opt_prop()
    operands_ = var_operand()
    results_ = var_result()

    def callee(self) -> SymbolRefAttr:
        return self.properties["callee"]

    def arg_operands(self) -> Sequence[Value]:
        return self.operands

    def verify_(self) -> None:
        # Signature checks need the symbol table; they run in the verifier's symbol-use phase.
        return None


FUNC = register_dialect(Dialect("func", [FuncOp, ReturnOp, CallOp]))

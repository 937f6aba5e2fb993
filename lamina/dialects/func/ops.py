"""``func.func``, ``func.return``, ``func.call``, and ``func.constant`` / ``func.call_indirect``
(a function as a value, and calling it)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, SymbolRefAttr, TypeAttr
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.core import Block, Region, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.location import Location
from lamina.ir.opdef import Op, operand, opt_prop, prop, region, result_def, var_operand, var_result
from lamina.ir.traits import (
    AffineScope,
    AutomaticAllocationScope,
    CallableOpInterface,
    CallOpInterface,
    ConstantLike,
    ExecutableOpInterface,
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
            if a is not None and (len(a) != n or not all(isinstance(x, DictionaryAttr) for x in a)):
                raise VerifyError(f"expects '{key}' to be an array of {n} dictionaries")
        if self.is_declaration:
            if self.symbol_visibility() == "public":
                raise VerifyError("symbol declaration cannot have public visibility")
            return
        entry = self.entry_block
        if len(entry.args) != len(ft.inputs):
            raise VerifyError(f"entry block must have {len(ft.inputs)} arguments to match function signature")
        for i, (a, t) in enumerate(zip(entry.args, ft.inputs)):
            if a.type is not t:
                raise VerifyError(
                    f"type of entry block argument #{i}('{a.type}') must match the type of the "
                    f"corresponding argument in function signature('{t}')"
                )

    # ---- custom assembly (``func.func [private] @name(%arg0: i32 {attrs}) -> (i32) attributes {...} {``)

    _ELIDED = ("sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs")

    def print(self, printer: Any) -> None:
        vis = self.properties.get("sym_visibility")
        if vis is not None:
            printer.write(" " + vis.value)
        printer.write(" ")
        printer.print_symbol_name(self.properties["sym_name"].value)
        ft = self.properties["function_type"].value
        arg_attrs = self.properties.get("arg_attrs")
        res_attrs = self.properties.get("res_attrs")
        body = self.regions[0]
        printer.write("(")
        for i, t in enumerate(ft.inputs):
            if i:
                printer.write(", ")
            attrs = arg_attrs[i] if arg_attrs is not None and i < len(arg_attrs) else None
            if body.blocks:
                printer.print_region_argument(body.blocks[0].args[i], attrs)
            else:
                printer.print_type(t)
                if attrs:
                    printer.print_optional_attr_dict(dict(attrs.items()))
        printer.write(")")
        results = ft.results
        if results:
            has_attrs = res_attrs is not None and any(len(a) for a in res_attrs)
            if len(results) == 1 and not has_attrs and not isinstance(results[0], FunctionType):
                printer.write(" -> ")
                printer.print_type(results[0])
            else:
                printer.write(" -> (")
                for i, t in enumerate(results):
                    if i:
                        printer.write(", ")
                    printer.print_type(t)
                    if res_attrs is not None and i < len(res_attrs) and len(res_attrs[i]):
                        printer.print_optional_attr_dict(dict(res_attrs[i].items()))
                printer.write(")")
        merged = {k: v for k, v in self.properties.items() if k not in self._ELIDED}
        merged.update(self.attributes)
        printer.print_optional_attr_dict_with_keyword(merged)
        if body.blocks:
            printer.write(" ")
            printer.print_region(body, print_entry_block_args=False, print_block_terminators=True)

    @classmethod
    def parse(cls, parser: Any) -> FuncOp:
        vis = parser.parse_optional_keyword(("private", "public", "nested"))
        name = parser.parse_symbol_name()
        parser.expect("(")
        args: list[Any] = []
        types: list[Type] = []
        arg_attrs: list[dict] = []
        named = None
        if not parser.parse_optional(")"):
            while True:
                if parser.peek() == "%":
                    if named is False:
                        raise parser.error("expected type instead of SSA identifier")
                    named = True
                    a = parser.parse_argument(allow_type=True, allow_attrs=True)
                    args.append(a)
                    types.append(a.type)
                    arg_attrs.append(a.attrs or {})
                else:
                    if named:
                        raise parser.error("expected SSA identifier")
                    named = False
                    types.append(parser.parse_type())
                    arg_attrs.append(parser.parse_optional_attr_dict())
                    parser.parse_optional_location()
                if parser.parse_optional(")"):
                    break
                parser.expect(",", "or ')' in argument list")
        results: list[Type] = []
        res_attrs: list[dict] = []
        if parser.parse_optional("->"):
            if parser.peek() == "(":
                parser.expect("(")
                if not parser.parse_optional(")"):
                    while True:
                        results.append(parser.parse_type())
                        res_attrs.append(parser.parse_optional_attr_dict())
                        if parser.parse_optional(")"):
                            break
                        parser.expect(",", "or ')' in result list")
            else:
                results.append(parser.parse_type())
                res_attrs.append({})
        attrs = parser.parse_optional_attr_dict_with_keyword()
        props: dict[str, Any] = {
            "sym_name": StringAttr(name),
            "function_type": TypeAttr(FunctionType(types, results)),
        }
        if vis is not None:
            props["sym_visibility"] = StringAttr(vis)
        if any(arg_attrs):
            props["arg_attrs"] = ArrayAttr([DictionaryAttr(d) for d in arg_attrs])
        if any(res_attrs):
            props["res_attrs"] = ArrayAttr([DictionaryAttr(d) for d in res_attrs])
        for k in [k for k in attrs if k in cls.op_def.prop_names]:
            props[k] = attrs.pop(k)
        region = parser.parse_optional_region(arguments=args, isolated=True)
        if region is None:
            if named:
                raise parser.error("expected '{' to begin a region")
            region = Region()
        return parser.create_op(cls, (), (), props, attrs, [region])


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
                e = VerifyError(
                    f"type of return operand {i} ('{v.type}') doesn't match function result type ('{t}') "
                    f"in function @{fn.symbol_name()}"
                )
                e.op_prefix = False  # type: ignore[attr-defined]  (MLIR's emitError, no 'op' prefix)
                raise e

    def print(self, printer: Any) -> None:
        ops = self.operands
        if ops:
            printer.write(" ")
            printer.print_operands(ops)
            printer.write(" : ")
            printer.print_types([v.type for v in ops])
        printer.print_optional_attr_dict(self.attributes)

    @classmethod
    def parse(cls, parser: Any) -> ReturnOp:
        us = parser.parse_operand_list()
        attrs = parser.parse_optional_attr_dict()
        vals = []
        if us:
            types = parser.parse_colon_type_list()
            vals = parser.resolve_operands(us, types)
        return parser.create_op(cls, vals, (), {}, attrs)


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

    def print(self, printer: Any) -> None:
        printer.write(" ")
        printer.print_attribute(self.properties["callee"])
        printer.write("(")
        printer.print_operands(self.operands)
        printer.write(")")
        merged = {k: v for k, v in self.properties.items() if k != "callee"}
        merged.update(self.attributes)
        printer.print_optional_attr_dict(merged)
        printer.write(" : ")
        printer.print_function_type([v.type for v in self.operands], [r.type for r in self.results])

    @classmethod
    def parse(cls, parser: Any) -> CallOp:
        callee = parser.parse_attribute()
        if not isinstance(callee, SymbolRefAttr):
            raise parser.error("expected symbol reference for the callee")
        us = parser.parse_operand_list("paren")
        attrs = parser.parse_optional_attr_dict()
        parser.expect(":")
        ft = parser.parse_function_type()
        vals = parser.resolve_operands(us, ft.inputs)
        props: dict[str, Any] = {"callee": callee}
        for k in [k for k in attrs if k in cls.op_def.prop_names]:
            props[k] = attrs.pop(k)
        return parser.create_op(cls, vals, ft.results, props, attrs)


class ConstantOp(Op, ExecutableOpInterface):
    """``func.constant @f : (i64) -> i64``: the function ``@f`` as a value of its function type.
    Executing it gives the function op itself, which ``func.call_indirect`` calls."""

    name = "func.constant"
    traits = (ConstantLike(), Pure())
    value = prop(SymbolRefAttr)
    result = result_def()

    def verify_(self) -> None:
        if not isinstance(self.results[0].type, FunctionType):
            raise VerifyError(f"result must be a function type, got '{self.results[0].type}'")

    def verify_symbol_uses(self, symbols: Any) -> None:
        """The symbol names a function of the result's type (MLIR's messages)."""
        ref = self.properties["value"]
        fn = symbols.lookup_nearest(self, ref)
        if fn is None or not isinstance(fn, FuncOp):
            raise VerifyError(f"reference to undefined function '{ref.root}'")
        if fn.type is not self.results[0].type:
            raise VerifyError("reference to function with mismatched type")

    def get_asm_result_names(self) -> list[str | None]:
        return ["f"]  # as MLIR names it

    def execute(self, inputs: Sequence[Any]) -> Sequence[Any]:
        from lamina.ir.symbol_table import lookup_symbol

        fn = lookup_symbol(self, self.properties["value"])
        if fn is None or CallableOpInterface.get(fn) is None:
            raise LookupError(f"{self.properties['value']} is not a function of the module")
        return [fn]

    # ``{attrs} @f : (i64) -> i64``
    def print(self, printer: Any) -> None:
        merged = {k: v for k, v in self.properties.items() if k != "value"}
        merged.update(self.attributes)
        printer.print_optional_attr_dict(merged)
        printer.write(" ")
        printer.print_attribute(self.properties["value"])
        printer.write(" : " + str(self.results[0].type))

    @classmethod
    def parse(cls, parser: Any) -> ConstantOp:
        attrs = parser.parse_optional_attr_dict()
        ref = parser.parse_attribute()
        if not isinstance(ref, SymbolRefAttr):
            raise parser.error("expected a symbol reference to a function")
        t = parser.parse_colon_type()
        props: dict[str, Any] = {"value": ref}
        for k in [k for k in attrs if k in cls.op_def.prop_names]:
            props[k] = attrs.pop(k)
        return parser.create_op(cls, (), [t], props, attrs)


class CallIndirectOp(Op, CallOpInterface):
    """``func.call_indirect %f(%a) : (i64) -> i64``: calls the function value ``%f``."""

    name = "func.call_indirect"
    callee_ = operand()
    callee_operands = var_operand()
    results_ = var_result()
    arg_attrs = opt_prop(ArrayAttr)
    res_attrs = opt_prop(ArrayAttr)

    def callee(self) -> Value:
        return self.operands[0]

    def arg_operands(self) -> Sequence[Value]:
        return self.operands[1:]

    def verify_(self) -> None:
        ft = self.operands[0].type
        if not isinstance(ft, FunctionType):
            raise VerifyError(f"callee must be of function type, got '{ft}'")
        if [v.type for v in self.operands[1:]] != list(ft.inputs):
            raise VerifyError("callee operand types must match the callee's input types")
        if [r.type for r in self.results] != list(ft.results):
            raise VerifyError("result types must match the callee's result types")

    # ``%f(%a, %b) {attrs} : (i64, i64) -> i64``
    def print(self, printer: Any) -> None:
        printer.write(" " + printer.value_name(self.operands[0]) + "(")
        printer.print_operands(self.operands[1:])
        printer.write(")")
        merged = dict(self.properties)
        merged.update(self.attributes)
        printer.print_optional_attr_dict(merged)
        printer.write(" : " + str(self.operands[0].type))

    @classmethod
    def parse(cls, parser: Any) -> CallIndirectOp:
        f = parser.parse_operand()
        us = parser.parse_operand_list("paren")
        attrs = parser.parse_optional_attr_dict()
        parser.expect(":")
        ft = parser.parse_function_type()
        vals = parser.resolve_operands([f, *us], [ft, *ft.inputs])
        props: dict[str, Any] = {}
        for k in [k for k in attrs if k in cls.op_def.prop_names]:
            props[k] = attrs.pop(k)
        return parser.create_op(cls, vals, ft.results, props, attrs)


FUNC = register_dialect(Dialect("func", [FuncOp, ReturnOp, CallOp, CallIndirectOp, ConstantOp]))

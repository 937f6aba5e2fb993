"""Dialect conversion: targets, type conversion, partial/full conversion and rollback."""

from __future__ import annotations

from lam_test_dialect import BarOp, FooOp, add, const, effect, i32, i64, make_context

from lamina.dialects.func.ops import FuncOp, ReturnOp
from lamina.ir.builtin import ModuleOp
from lamina.ir.location import FileLineColLoc
from lamina.ir.types import IntegerType
from lamina.rewrite import (
    ConversionPattern,
    ConversionTarget,
    TypeConverter,
    apply_full_conversion,
    apply_partial_conversion,
)


class FooToBar(ConversionPattern):
    root = FooOp

    def match_and_rewrite(self, op, operands, rewriter):
        if op.properties.get("tag") is not None:
            return False  # tagged foos are not convertible
        types = [self.type_converter.convert_type(t) if self.type_converter else t for t in op.result_types]
        new = rewriter.create(BarOp, args=operands, outs=types)
        rewriter.replace_op(op, new)
        return True


def build(tagged: bool = False) -> tuple[ModuleOp, FuncOp]:
    f = FuncOp.new("f", [i32], [i32])
    b = f.entry_block
    x = b.args[0]
    foo1 = b.append(FooOp.build(args=[x], outs=[i32], loc=FileLineColLoc("c.mlir", 2, 3)))
    kw = {"tag": "keep"} if tagged else {}
    foo2 = b.append(FooOp.build(args=[foo1.results[0]], outs=[i32], loc=FileLineColLoc("c.mlir", 3, 3), **kw))
    b.append(ReturnOp.build(operands_=[foo2.results[0]]))
    return ModuleOp.new([f]), f


def names(f: FuncOp) -> list[str]:
    return [op.name for op in f.entry_block]


def target() -> ConversionTarget:
    t = ConversionTarget()
    t.add_legal_dialect("func")
    t.add_legal_op(BarOp)
    t.add_illegal_op("lam_test.foo")
    return t


def test_partial_conversion_converts():
    m, f = build()
    assert apply_partial_conversion(m, target(), [FooToBar()])
    assert names(f) == ["lam_test.bar", "lam_test.bar", "func.return"]
    b = f.entry_block
    assert b.last_op.operand(0) is b.first_op.next_op.results[0]


def test_full_conversion_failure_reports_each_op_and_rolls_back():
    ctx = make_context()
    m, f = build(tagged=True)
    t = target()
    before = names(f)
    with ctx, ctx.diagnostics.capture() as diags:
        assert not apply_full_conversion(m, t, [FooToBar()])
    msgs = [str(d) for d in diags]
    assert msgs == [
        "c.mlir:3:3: error: failed to legalize operation 'lam_test.foo' that was explicitly marked illegal"
    ]
    # Rolled back: the first foo (convertible) is still there too.
    f = m.body.first_op
    assert names(f) == before
    assert all(op.parent is f.entry_block for op in f.entry_block)
    x = f.entry_block.args[0]
    assert [u.owner.name for u in x.uses] == ["lam_test.foo"]


def test_full_conversion_reports_unknown_ops():
    ctx = make_context()
    m, f = build()
    b = f.entry_block
    e = b.insert_before(b.last_op, effect(b).detach())
    e.location = FileLineColLoc("c.mlir", 9, 1)
    with ctx, ctx.diagnostics.capture() as diags:
        assert not apply_full_conversion(m, target(), [FooToBar()])
    assert [str(d) for d in diags] == ["c.mlir:9:1: error: failed to legalize operation 'lam_test.effect'"]
    f = m.body.first_op
    # Partial conversion leaves unknown ops alone.
    with ctx, ctx.diagnostics.capture() as diags:
        assert apply_partial_conversion(m, target(), [FooToBar()])
    assert diags == []
    assert names(f) == ["lam_test.bar", "lam_test.bar", "lam_test.effect", "func.return"]


def test_dynamic_legality_and_unknown_fallback():
    m, f = build()
    t = ConversionTarget()
    t.add_legal_dialect("func")
    t.add_dynamically_legal_op(FooOp, lambda op: op.num_operands == 0)
    t.mark_unknown_op_dynamically_legal(lambda op: True)
    assert t.legality(f.entry_block.first_op) is False
    assert apply_full_conversion(m, t, [FooToBar()])
    assert names(f) == ["lam_test.bar", "lam_test.bar", "func.return"]


def test_type_converter_rules_order_and_legality():
    tc = TypeConverter()
    tc.add_conversion(lambda t: t)
    tc.add_conversion(lambda t: i64 if t is i32 else None)
    assert tc.convert_type(i32) is i64
    assert tc.convert_type(IntegerType(8)) is IntegerType(8)
    assert not tc.is_legal(i32) and tc.is_legal(i64)
    tc.add_conversion(lambda t: False if t is IntegerType(16) else None)
    assert tc.convert_type(IntegerType(16)) is None


def _i32_to_i64() -> TypeConverter:
    tc = TypeConverter()
    tc.add_conversion(lambda t: t)
    tc.add_conversion(lambda t: i64 if t is i32 else None)
    return tc


def test_type_conversion_with_materializations():
    m, f = build()
    tc = _i32_to_i64()
    t = target()
    t.add_dynamically_legal_op(
        BarOp, lambda op: all(tc.is_legal(x) for x in [*op.operand_types, *op.result_types])
    )
    assert apply_partial_conversion(m, t, [FooToBar(tc)], tc)
    ops = list(f.entry_block)
    assert [o.name for o in ops] == [
        "builtin.unrealized_conversion_cast",  # arg i32 -> i64 for the first bar
        "lam_test.bar",
        "lam_test.bar",
        "builtin.unrealized_conversion_cast",  # i64 -> i32 for the return
        "func.return",
    ]
    assert ops[1].result_types == [i64] and ops[2].operand(0) is ops[1].results[0]
    assert ops[3].operand(0) is ops[2].results[0] and ops[3].result_types == [i32]


def test_original_sees_through_the_bridging_cast():
    """When foo1 becomes a bar of another type, foo2 sees a bridging cast as its operand until it
    is converted; ``original`` maps that cast back to foo1's replaced result."""
    m, f = build()
    foo1, foo2 = list(f.entry_block)[:2]
    r1 = foo1.results[0]
    tc = _i32_to_i64()
    seen: list[tuple[object, object]] = []

    class Record(FooToBar):
        def match_and_rewrite(self, op, operands, rewriter):
            if op is foo2:
                seen.append((op.operand(0), rewriter.original(op.operand(0))))
            return super().match_and_rewrite(op, operands, rewriter)

    t = target()
    t.add_dynamically_legal_op(
        BarOp, lambda op: all(tc.is_legal(x) for x in [*op.operand_types, *op.result_types])
    )
    assert apply_partial_conversion(m, t, [Record(tc)], tc)
    ((operand, original),) = seen
    assert operand is not r1 and original is r1


def test_full_conversion_unresolved_materialization():
    ctx = make_context()
    m, f = build()
    tc = _i32_to_i64()
    with ctx, ctx.diagnostics.capture() as diags:
        assert not apply_full_conversion(m, target(), [FooToBar(tc)], tc)
    msgs = [d.message for d in diags]
    assert any("failed to legalize unresolved materialization from ('i64') to ('i32')" in s for s in msgs)
    f = m.body.first_op
    assert names(f) == ["lam_test.foo", "lam_test.foo", "func.return"]


def test_signature_conversion_of_blocks():
    m, f = build()
    tc = _i32_to_i64()

    class FuncSig(ConversionPattern):
        root = FuncOp

        def match_and_rewrite(self, op, operands, rewriter):
            from lamina.ir.attributes import TypeAttr
            from lamina.ir.types import FunctionType

            ft = op.type
            new = FunctionType(tc.convert_types(ft.inputs), tc.convert_types(ft.results))
            rewriter.modify_op_in_place(op, lambda: op.properties.__setitem__("function_type", TypeAttr(new)))
            rewriter.convert_region_types(op.regions[0], tc)
            return True

    class Ret(ConversionPattern):
        root = ReturnOp

        def match_and_rewrite(self, op, operands, rewriter):
            rewriter.modify_op_in_place(op, lambda: op.set_operands(operands))
            return True

    t = ConversionTarget()
    t.add_dynamically_legal_op(FuncOp, lambda op: tc.is_signature_legal(op.type))
    t.add_dynamically_legal_op(ReturnOp, lambda op: all(tc.is_legal(x) for x in op.operand_types))
    t.add_dynamically_legal_op(BarOp, lambda op: tc.is_legal(op))
    t.add_illegal_op(FooOp)
    assert apply_full_conversion(m, t, [FooToBar(tc), FuncSig(), Ret()], tc)
    assert f.type.inputs == (i64,) or list(f.type.inputs) == [i64]
    assert names(f) == ["lam_test.bar", "lam_test.bar", "func.return"]
    assert f.entry_block.args[0].type is i64
    assert f.entry_block.last_op.operand(0).type is i64


def test_conversion_keeps_outer_values_and_unrelated_ops():
    m, f = build()
    b = f.entry_block
    c = const(b, 3)
    c.defining_op().move_before(b.first_op)
    ret = b.last_op
    add(b, c, c).defining_op().move_before(ret)
    t = target()
    t.add_legal_dialect("lam_test")
    t.add_illegal_op(FooOp)
    assert apply_partial_conversion(m, t, [FooToBar()])
    assert names(f) == ["lam_test.const", "lam_test.bar", "lam_test.bar", "lam_test.add", "func.return"]
    add_op = list(b)[3]
    assert add_op.operand(0) is b.first_op.results[0]

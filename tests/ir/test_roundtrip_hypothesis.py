"""Property tests: random well-formed modules print -> parse -> print byte-identically (generic and
custom, with and without debuginfo), and random mutations of valid text never raise."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.attributes import (
    ArrayAttr,
    BoolAttr,
    DenseArrayAttr,
    DenseElementsAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    TypeAttr,
    UnitAttr,
)
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.core import Block, Region, UnregisteredOp
from lamina.ir.location import CallSiteLoc, FileLineColLoc, NameLoc, UnknownLoc, fuse
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation
from lamina.ir.types import (
    FloatType,
    FunctionType,
    IndexType,
    IntegerType,
    RankedTensorType,
    TupleType,
    UnrankedTensorType,
    VectorType,
)

# Built, not filtered: a letter then up to five name characters (filters trip hypothesis's
# filter_too_much health check on a loaded machine).
names = st.builds(
    lambda head, tail: head + tail, st.sampled_from("abcxyz"), st.text(alphabet="abcxyz_09.", max_size=5)
)
scalar_types = st.sampled_from(
    [
        IntegerType(1),
        IntegerType(8),
        IntegerType(32),
        IntegerType(64),
        IntegerType(8, "u"),
        IntegerType(16, "s"),
        IndexType(),
        FloatType("f16"),
        FloatType("bf16"),
        FloatType("f32"),
        FloatType("f64"),
    ]
)


def _types() -> st.SearchStrategy:
    shaped = (
        st.builds(RankedTensorType, st.lists(st.sampled_from([1, 2, 3, -1]), max_size=3), scalar_types)
        | st.builds(UnrankedTensorType, scalar_types)
        | st.builds(VectorType, st.lists(st.integers(1, 4), min_size=1, max_size=2), scalar_types)
    )
    base = scalar_types | shaped
    return (
        base
        | st.builds(TupleType, st.lists(base, max_size=3))
        | st.builds(FunctionType, st.lists(base, max_size=2), st.lists(base, max_size=2))
    )


types = _types()

int_attrs = st.builds(
    lambda t, v: IntegerAttr(v % (1 << t.width) if t.signedness == "u" else v, t),
    st.sampled_from([IntegerType(8), IntegerType(32), IntegerType(64), IntegerType(8, "u")]),
    st.integers(-128, 127),
)
float_attrs = st.builds(
    FloatAttr,
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from([FloatType("f32"), FloatType("f64"), FloatType("f16"), FloatType("bf16")]),
)
leaf_attrs = st.one_of(
    int_attrs,
    float_attrs,
    st.builds(BoolAttr, st.booleans()),
    st.builds(StringAttr, st.text(max_size=8)),
    st.just(UnitAttr()),
    st.builds(TypeAttr, types),
    st.builds(SymbolRefAttr, names, st.lists(names, max_size=2)),
    st.builds(
        DenseArrayAttr,
        st.sampled_from([IntegerType(64), IntegerType(32)]),
        st.lists(st.integers(-9, 9), max_size=4),
    ),
    st.builds(
        lambda n: DenseElementsAttr(RankedTensorType([n], IntegerType(32)), np.arange(n, dtype=np.int32)),
        st.sampled_from([1, 3, 150]),
    ),
    st.builds(
        lambda v: DenseElementsAttr(RankedTensorType([2, 2], FloatType("f32")), np.float32(v)),
        st.floats(-4, 4, width=32),
    ),
)
attrs = st.recursive(
    leaf_attrs,
    lambda inner: (
        st.builds(ArrayAttr, st.lists(inner, max_size=3))
        | st.builds(DictionaryAttr, st.dictionaries(names, inner, max_size=3))
    ),
    max_leaves=6,
)
leaf_locs = st.one_of(
    st.just(UnknownLoc()),
    st.builds(FileLineColLoc, st.sampled_from(["a.mlir", "b.mlir"]), st.integers(1, 9), st.integers(1, 9)),
    st.builds(NameLoc, names),
)
locs = st.recursive(
    leaf_locs,
    lambda inner: (
        st.builds(NameLoc, names, inner)
        | st.builds(fuse, st.lists(inner, min_size=2, max_size=3, unique=True))
        | st.builds(CallSiteLoc, inner, inner)
    ),
    max_leaves=4,
)


@st.composite
def modules(draw: st.DrawFn) -> ModuleOp:
    m = ModuleOp.new(loc=draw(locs))
    counter = [0]

    def fill_block(block: Block, visible: list, depth: int, succ_pool: list[Block]) -> None:
        vals = list(visible) + list(block.args)
        for _ in range(draw(st.integers(1, 3))):
            counter[0] += 1
            operands = draw(st.lists(st.sampled_from(vals), max_size=3)) if vals else []
            rtypes = draw(st.lists(types, max_size=2))
            props = draw(st.dictionaries(names, attrs, max_size=2))
            at = draw(st.dictionaries(names, attrs, max_size=2))
            nreg = draw(st.integers(0, 2)) if depth < 2 else 0
            regions = []
            for _r in range(nreg):
                r = Region()
                nblocks = draw(st.integers(0, 3))
                blocks = [Block(draw(st.lists(types, max_size=2)), None) for _b in range(nblocks)]
                for b in blocks:
                    for a in b.args:
                        a.location = draw(locs)
                    r.add_block(b)
                for b in blocks:
                    fill_block(b, vals, depth + 1, blocks[1:])  # the entry block has no predecessors
                regions.append(r)
            op = UnregisteredOp.create(
                operands, rtypes, props, at, regions, [], draw(locs), name=f"t.op{counter[0] % 5}"
            )
            block.append(op)
            vals.extend(op.results)
        if succ_pool and draw(st.booleans()):
            succs = draw(st.lists(st.sampled_from(succ_pool), min_size=1, max_size=2))
            block.append(UnregisteredOp.create([], [], successors=succs, location=draw(locs), name="t.br"))

    fill_block(m.body, [], 0, [])
    return m


def _ctx() -> Context:
    return Context(allow_unregistered_dialects=True, handler=None)


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(modules(), st.booleans(), st.booleans())
def test_print_parse_print_identical(m, generic, debuginfo):
    text = print_operation(m, generic=generic, debuginfo=debuginfo)
    ctx = _ctx()
    with ctx.diagnostics.capture() as diags:
        m2 = parse_module(text, ctx, filename="h.mlir")
    assert m2 is not None, "\n".join(str(d) for d in diags) + "\n" + text
    assert print_operation(m2, generic=generic, debuginfo=debuginfo) == text
    verifier = pytest.importorskip("lamina.ir.verifier")
    with ctx.diagnostics.capture() as vdiags:
        ok = verifier.verify(m2, ctx)
    assert ok, "\n".join(str(d) for d in vdiags)


VALID = (
    '#loc1 = loc("x":1:2)\n'
    'module @m attributes {a.b = [1, 2.5, "s"]} {\n'
    '  func.func @f(%arg0: i32 loc("a"), %arg1: tensor<2xf32>) -> (i32, tensor<2xf32>) {\n'
    '    %0:2 = "foo.op"(%arg0, %arg1) <{p = array<i64: 1, 2>}> ({\n'
    "    ^bb0(%a: i32):\n"
    '      "foo.br"(%a)[^bb1] : (i32) -> ()\n'
    "    ^bb1:\n"
    '      "foo.t"() {l = #loc1, d = dense<[1.0, 2.0]> : tensor<2xf32>} : () -> ()\n'
    '    }) {x = {y = @s::@t}} : (i32, tensor<2xf32>) -> (i32, tensor<2xf32>) loc(fused["p", "q":3:4])\n'
    "    return %0#0, %0#1 : i32, tensor<2xf32>\n"
    "  }\n"
    "}\n"
    '{-#\n  dialect_resources: {\n    builtin: {\n      r: "0x0400000001000000"\n    }\n  }\n#-}\n'
)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_fuzz_mutations_never_raise(data):
    text = VALID
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["delete", "insert", "replace", "truncate", "duplicate"]))
        i = data.draw(st.integers(0, len(text)))
        if kind == "delete":
            j = data.draw(st.integers(i, min(len(text), i + 8)))
            text = text[:i] + text[j:]
        elif kind == "insert":
            text = (
                text[:i]
                + data.draw(st.sampled_from([*list('{}()[]<>"%^#!@:,=-0x\n \\$é'), "loc(", "dense<"]))
                + text[i:]
            )
        elif kind == "replace" and i < len(text):
            text = text[:i] + data.draw(st.sampled_from(list('{}()<>"%^#:,9a'))) + text[i + 1 :]
        elif kind == "truncate":
            text = text[:i]
        else:
            j = data.draw(st.integers(i, min(len(text), i + 20)))
            text = text[:j] + text[i:j] + text[j:]
    ctx = _ctx()
    with ctx.diagnostics.capture() as diags:
        m = parse_module(text, ctx, filename="fuzz.mlir")
    if m is None:
        assert diags and all(d.severity == "error" for d in diags)
        assert all("internal error" not in d.message for d in diags), str(diags[0])
    else:
        print_operation(m)
        print_operation(m, generic=True, debuginfo=True)

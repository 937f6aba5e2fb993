"""Parser: types, attributes, locations, aliases, resources, external weights, custom forms and
MLIR-style located errors (message, line:col, source line and caret)."""

from __future__ import annotations

import numpy as np
import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.attributes import (
    DenseElementsAttr,
    DenseResourceElementsAttr,
    FloatAttr,
    IntegerAttr,
    OpaqueAttr,
    StringAttr,
    dense_resource,
)
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.core import UnregisteredOp
from lamina.ir.location import FileLineColLoc, FusedLoc, NameLoc, UnknownLoc
from lamina.ir.parser import parse_attribute, parse_module, parse_type
from lamina.ir.printer import print_operation
from lamina.ir.types import FloatType, IntegerType, OpaqueType, RankedTensorType, f32, i32


def ctx(unregistered: bool = True) -> Context:
    return Context(allow_unregistered_dialects=unregistered, handler=None)


def parse_errors(text: str, unregistered: bool = True, filename: str = "t.mlir") -> list[str]:
    c = ctx(unregistered)
    with c.diagnostics.capture() as diags:
        m = parse_module(text, c, filename=filename)
    assert m is None
    return [str(d) for d in diags]


# ---- types and attributes ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "i1",
        "i4",
        "si8",
        "ui8",
        "i128",
        "index",
        "none",
        "f16",
        "bf16",
        "f32",
        "f64",
        "f8E4M3FN",
        "tf32",
        "tensor<?x3xf32>",
        "tensor<*xf32>",
        "tensor<f32>",
        "tensor<0xf32>",
        "vector<4xf32>",
        "memref<4x?xf32>",
        "memref<2xf32, 1>",
        "tuple<>",
        "tuple<i32, tensor<2xf32>>",
        "(i32) -> f32",
        "() -> ()",
        "(i32, f32) -> (f32, i32)",
        "((i32) -> i32) -> i32",
        "() -> ((i32) -> i32)",
        '!foo.bar<"x", 3>',
        "!foo.simple",
        '!foo<"opaque body">',
        "!foo.bar<a<b, c>>",
        "tensor<4xf32, #foo.enc<1>>",
        "vector<4x[8]xf32>",
        "complex<f32>",
        "!quant.uniform<i8:f32, 5.000000e-02:-3>",
    ],
)
def test_type_roundtrip(text):
    t = parse_type(text, ctx())
    assert t is not None
    assert str(t) == text


def test_opaque_type_fields():
    t = parse_type('!foo.bar<"x", 3>', ctx())
    assert isinstance(t, OpaqueType) and t.dialect == "foo" and t.data == 'bar<"x", 3>'


@pytest.mark.parametrize(
    ("text", "printed"),
    [
        ("1", "1 : i64"),
        ("-5 : i32", "-5 : i32"),
        ("0x1F : i32", "31 : i32"),
        ("true", "true"),
        ("0 : i1", "false"),
        ("1.5", "1.500000e+00 : f64"),
        ("2.0 : f16", "2.000000e+00 : f16"),
        ("0x7FC00000 : f32", "0x7FC00000 : f32"),
        ("unit", "unit"),
        ('"a\\22b\\0A"', '"a\\22b\\0A"'),
        ('"with \\"quotes\\""', '"with \\22quotes\\22"'),
        ("[1, 2 : i32, [true]]", "[1, 2 : i32, [true]]"),
        ("array<i64: 1, 2>", "array<i64: 1, 2>"),
        ("array<f32: 1.0, 2.5>", "array<f32: 1.000000e+00, 2.500000e+00>"),
        ("array<i1: true, false>", "array<i1: true, false>"),
        ("array<i8>", "array<i8>"),
        ('{z = 1, a = unit, "q k" = 2}', '{a, "q k" = 2 : i64, z = 1 : i64}'),
        ("@foo::@bar", "@foo::@bar"),
        ('@"quoted sym"', '@"quoted sym"'),
        ("i32", "i32"),
        ("(i32) -> i32", "(i32) -> i32"),
        ("dense<1.0> : tensor<4xf32>", "dense<1.000000e+00> : tensor<4xf32>"),
        ("dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>", "dense<[[1, 2], [3, 4]]> : tensor<2x2xi32>"),
        ("dense<[0x7FC00000, 1.0]> : tensor<2xf32>", "dense<[0x7FC00000, 1.000000e+00]> : tensor<2xf32>"),
        ("dense<[true, false]> : tensor<2xi1>", "dense<[true, false]> : tensor<2xi1>"),
        ("dense<[1, 255]> : tensor<2xui8>", "dense<[1, 255]> : tensor<2xui8>"),
        ("dense<[-1, 2]> : tensor<2xsi8>", "dense<[-1, 2]> : tensor<2xsi8>"),
        ("dense<> : tensor<0xf32>", "dense<> : tensor<0xf32>"),
        ("dense<[1, 2]> : vector<2xindex>", "dense<[1, 2]> : vector<2xindex>"),
        ('dense<"0x0100000002000000"> : tensor<2xi32>', "dense<[1, 2]> : tensor<2xi32>"),
        ('#foo.baz<"x", 1>', '#foo.baz<"x", 1>'),
        ('#foo<"opaque">', '#foo<"opaque">'),
        ("affine_map<(d0, d1) -> (d1, d0 + 1)>", "affine_map<(d0, d1) -> (d1, d0 + 1)>"),
        ("#arith.overflow<nsw>", "#arith.overflow<nsw>"),
        ('loc("a"("f":1:2))', 'loc("a"("f":1:2))'),
        ('loc(fused<"m">["a", "b"])', 'loc(fused<"m">["a", "b"])'),
        ('loc(callsite("a" at "b":1:1))', 'loc(callsite("a" at "b":1:1))'),
    ],
)
def test_attribute_parse_print(text, printed):
    a = parse_attribute(text, ctx())
    assert a is not None, text
    assert str(a) == printed


def test_dense_values_and_splat():
    a = parse_attribute("dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>", ctx())
    assert isinstance(a, DenseElementsAttr) and not a.is_splat
    np.testing.assert_array_equal(a.to_numpy(), [[1, 2, 3], [4, 5, 6]])
    s = parse_attribute("dense<7> : tensor<1000xi32>", ctx())
    assert s.is_splat and s.splat_value == 7 and str(s) == "dense<7> : tensor<1000xi32>"
    big = DenseElementsAttr(RankedTensorType([300], f32), np.arange(300, dtype=np.float32))
    back = parse_attribute(str(big), ctx())
    assert back == big and str(back).startswith('dense<"0x')


def test_location_forms():
    c = ctx()
    assert parse_attribute("loc(unknown)", c) is UnknownLoc()
    assert parse_attribute('loc(fused["only"])', c) is NameLoc("only")
    assert parse_attribute("loc(fused[])", c) is UnknownLoc()
    f = parse_attribute('loc(fused["file":3:5, "other":1:1])', c)
    assert isinstance(f, FusedLoc) and f.locations == (
        FileLineColLoc("file", 3, 5),
        FileLineColLoc("other", 1, 1),
    )


# ---- modules --------------------------------------------------------------------------------------


def test_implicit_module_and_default_locations():
    m = parse_module('"foo.a"() : () -> ()\n  "foo.b"() : () -> ()\n', ctx(), filename="x.mlir")
    assert isinstance(m, ModuleOp)
    assert m.location is FileLineColLoc("x.mlir", 0, 0)
    a, b = m.body.ops
    assert a.location is FileLineColLoc("x.mlir", 1, 1)
    assert b.location is FileLineColLoc("x.mlir", 2, 3)


def test_line_offset_shifts_reported_lines():
    m = parse_module('"foo.a"() : () -> ()\n', ctx(), filename="x.mlir", line_offset=10)
    assert m.body.first_op.location is FileLineColLoc("x.mlir", 11, 1)
    errs = parse_errors('"foo.a"() : () -> ()\n"foo.b"(%x) : (i32) -> ()\n', filename="x.mlir")
    assert errs[0].startswith("x.mlir:2:9: error: use of undeclared SSA value name")


def test_location_aliases_defined_after_use():
    src = '"foo.x"() : () -> () loc(#loc_alias)\n#loc_alias = loc("aliased.mlir":7:7)\n'
    m = parse_module(src, ctx())
    assert m.body.first_op.location is FileLineColLoc("aliased.mlir", 7, 7)


def test_type_and_attribute_aliases():
    src = (
        "!mytype = tensor<4xf32>\n#myattr = {a = 1 : i32}\n"
        "func.func @f(%a: !mytype) -> !mytype attributes {x = #myattr} {\n  return %a : !mytype\n}\n"
    )
    m = parse_module(src, ctx())
    text = print_operation(m)
    assert "func.func @f(%arg0: tensor<4xf32>) -> tensor<4xf32> attributes {x = {a = 1 : i32}} {" in text


def test_forward_references_across_blocks():
    src = (
        '"foo.f"() ({\n'
        '  "foo.br"()[^bb2] : () -> ()\n'
        "^bb1:\n"
        '  "foo.use"(%v) : (i32) -> ()\n'
        '  "foo.ret"() : () -> ()\n'
        "^bb2:\n"
        '  %v = "foo.def"() : () -> i32\n'
        '  "foo.br"()[^bb1] : () -> ()\n'
        "}) : () -> ()\n"
    )
    m = parse_module(src, ctx())
    assert m is not None
    f = m.body.first_op
    use = f.regions[0].blocks[1].first_op
    d = f.regions[0].blocks[2].first_op
    assert use.operand(0) is d.results[0]
    text = print_operation(m, generic=True)
    assert print_operation(parse_module(text, ctx()), generic=True) == text


def test_unregistered_type_attr_kept_verbatim():
    src = '"foo.types"() {a = !foo<"opaque body">, b = !foo.bar<a<b, c>>, c = #foo.y<[1, 2]>, e = !foo.t<"q\\"uote">} : () -> ()\n'
    m = parse_module(src, ctx())
    out = print_operation(m, generic=True)
    assert (
        '{a = !foo<"opaque body">, b = !foo.bar<a<b, c>>, c = #foo.y<[1, 2]>, e = !foo.t<"q\\"uote">}' in out
    )
    assert isinstance(m.body.first_op.attributes["c"], OpaqueAttr)


# ---- resources and external weights ----------------------------------------------------------


RES_SRC = (
    '"foo.a"() {r = dense_resource<blob1> : tensor<3xi32>} : () -> ()\n'
    "{-#\n  dialect_resources: {\n    builtin: {\n"
    '      blob1: "0x04000000010000000200000003000000",\n      unused: "0x0400000001000000"\n'
    "    }\n  }\n#-}\n"
)


def test_resources_parse_and_print():
    c = ctx()
    m = parse_module(RES_SRC, c)
    a = m.body.first_op.attributes["r"]
    assert isinstance(a, DenseResourceElementsAttr)
    np.testing.assert_array_equal(a.to_numpy(), [1, 2, 3])
    assert a.handle.blob.alignment == 4
    text = print_operation(m, generic=True)
    assert text.endswith(
        '\n\n{-#\n  dialect_resources: {\n    builtin: {\n      blob1: "0x04000000010000000200000003000000"\n'
        "    }\n  }\n#-}\n"
    )
    assert print_operation(parse_module(text, ctx()), generic=True) == text


def test_external_weights_roundtrip(tmp_path):
    c = ctx()
    w = np.arange(12, dtype=np.float32).reshape(3, 4)
    attr = dense_resource(c.resources, "w0", w)
    m = ModuleOp.new()
    m.body.append(UnregisteredOp.create([], [attr.type], {"value": attr}, {}, name="top.Weight"))
    text = print_operation(m, resources="external", external_weights=str(tmp_path / "w.npz"))
    assert 'module attributes {lamina.weight_file = "w.npz"} {' in text
    assert "{-#" not in text
    assert "lamina.weight_file" not in m.attributes
    (tmp_path / "m.mlir").write_text(text)
    c2 = ctx()
    m2 = parse_module(text, c2, filename=str(tmp_path / "m.mlir"))
    assert m2 is not None and "lamina.weight_file" not in m2.attributes
    a2 = m2.body.first_op.properties["value"]
    assert not a2.handle.blob.is_loaded  # loaded lazily
    np.testing.assert_array_equal(a2.to_numpy(), w)
    again = print_operation(m2, resources="external", external_weights=str(tmp_path / "w.npz"))
    assert again == text


def test_missing_weight_file_is_located_error(tmp_path):
    src = 'module attributes {lamina.weight_file = "nope.npz"} {\n}\n'
    errs = parse_errors(src, filename=str(tmp_path / "m.mlir"))
    assert len(errs) == 1
    assert ":1:20: error: weight file 'nope.npz' not found" in errs[0]


WEIGHT_SRC = """module attributes {lamina.weight_file = "w.npz"} {
  "foo.w"() {value = dense_resource<w0> : tensor<3x3xf32>} : () -> ()
}
"""


def _zip_with_bad_member(path):
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("w0.npy", b"garbage")


@pytest.mark.parametrize(
    "write, message",
    [
        (
            lambda p: p.write_bytes(bytes(range(256)) * 4),
            "weight file 'w.npz' is not an .npz file (it is not a zip archive)",
        ),
        (
            lambda p: np.savez(p, w0=np.ones((3, 3))),
            "weight file 'w.npz': 'w0' has dtype float64 and shape (3, 3), expected dtype float32 "
            "(9 elements) for 'tensor<3x3xf32>'",
        ),
        (
            lambda p: np.savez(p, w0=np.ones((3, 3), np.float16)),
            "weight file 'w.npz': 'w0' has dtype float16 and shape (3, 3), expected dtype float32",
        ),
        (
            lambda p: np.savez(p, w0=np.ones((4,), np.float32)),
            "weight file 'w.npz': 'w0' has shape (4,) (4 elements), expected 9 elements for 'tensor<3x3xf32>'",
        ),
        (
            lambda p: np.savez(p, w1=np.ones((3, 3), np.float32)),
            "resource 'w0' not found in weight file 'w.npz'",
        ),
        (_zip_with_bad_member, "weight file 'w.npz': cannot read 'w0': "),
    ],
    ids=["random-bytes", "float64", "float16", "element-count", "missing-key", "corrupt-member"],
)
def test_bad_weight_file_is_located_error(tmp_path, write, message):
    write(tmp_path / "w.npz")
    errs = parse_errors(WEIGHT_SRC, filename=str(tmp_path / "m.mlir"))
    assert len(errs) == 1
    assert f"m.mlir:1:20: error: {message}" in errs[0]


def test_weight_file_blob_with_truncated_data_raises_resource_error_when_loaded(tmp_path):
    import io
    import zipfile

    from lamina.ir.attributes import ResourceError

    buf = io.BytesIO()
    np.save(buf, np.ones((3, 3), np.float32))
    with zipfile.ZipFile(tmp_path / "w.npz", "w") as z:
        z.writestr("w0.npy", buf.getvalue()[:-8])  # the header is right, the data is short
    m = parse_module(WEIGHT_SRC, ctx(), filename=str(tmp_path / "m.mlir"))
    assert m is not None  # blobs load lazily
    with pytest.raises(ResourceError, match=r"weight file 'w\.npz': cannot read 'w0': "):
        m.body.first_op.attributes["value"].to_numpy()


def test_weight_file_blob_of_other_shape_same_count_and_raw_bytes_load(tmp_path):
    w = np.arange(9, dtype=np.float32)
    for stored in (w, w.view(np.uint8)):  # a flat array, or the raw bytes of a byte blob
        np.savez(tmp_path / "w.npz", w0=stored)
        m = parse_module(WEIGHT_SRC, ctx(), filename=str(tmp_path / "m.mlir"))
        assert m is not None
        np.testing.assert_array_equal(m.body.first_op.attributes["value"].to_numpy(), w.reshape(3, 3))


# ---- errors -------------------------------------------------------------------------------------


def test_error_undefined_value_with_caret():
    errs = parse_errors('func.func @f() {\n  "foo.use"(%undefined) : (i32) -> ()\n  return\n}\n')
    assert errs == [
        't.mlir:2:13: error: use of undeclared SSA value name\n  "foo.use"(%undefined) : (i32) -> ()\n            ^'
    ]


def test_error_redefinition_with_note():
    errs = parse_errors(
        'func.func @f() {\n  %0 = "foo.a"() : () -> i32\n  %0 = "foo.b"() : () -> i32\n  return\n}\n'
    )
    assert errs == [
        "t.mlir:3:3: error: redefinition of SSA value '%0'\n  %0 = \"foo.b\"() : () -> i32\n  ^\n"
        't.mlir:2:3: note: previously defined here\n  %0 = "foo.a"() : () -> i32\n  ^'
    ]


def test_error_type_mismatch_between_use_and_def():
    errs = parse_errors(
        'func.func @f() {\n  %0 = "foo.a"() : () -> i32\n  "foo.b"(%0) : (i64) -> ()\n  return\n}\n'
    )
    assert errs[0].startswith(
        "t.mlir:3:11: error: use of value '%0' expects different type than prior uses: 'i64' vs 'i32'\n"
        '  "foo.b"(%0) : (i64) -> ()\n          ^\n'
        "t.mlir:2:3: note: prior use here"
    )


def test_error_type_mismatch_custom_form():
    errs = parse_errors("func.func @f(%a: i32, %b: i64) -> i32 {\n  return %b : i32\n}\n")
    assert errs[0].startswith(
        "t.mlir:2:10: error: use of value '%b' expects different type than prior uses: 'i32' vs 'i64'"
    )


def test_error_unregistered_dialect_strict():
    errs = parse_errors('func.func @f() {\n  "foo.a"() : () -> ()\n  return\n}\n', unregistered=False)
    assert errs == [
        "t.mlir:2:10: error: operation being parsed with an unregistered dialect. If this is intended, please use "
        '-allow-unregistered-dialect with the MLIR tool used\n  "foo.a"() : () -> ()\n         ^'
    ]


def test_error_unknown_op_in_registered_dialect():
    errs = parse_errors('"func.bogus"() : () -> ()\n', unregistered=False)
    assert errs[0].startswith(
        "t.mlir:1:1: error: unregistered operation 'func.bogus' found in dialect ('func') that does not allow "
        "unknown operations"
    )


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ('"foo.a"() {s = "abc} : () -> ()\n', "t.mlir:1:32: error: expected '\"' in string literal"),
        ('  %0 = "foo.x"( : () -> i32\n', "t.mlir:1:16: error: expected ')' to end operand list"),
        ('"foo.p"() <{m = 1} ({\n}) : () -> ()\n', "t.mlir:1:19: error: expected '>' to close properties"),
        ('"foo.a"() {a = 1 : () -> ()\n', "t.mlir:1:16: error: integer literal not valid for specified type"),
        (
            '"foo.a"() : () -> i32 loc(#foo.customloc)\n',
            "t.mlir:1:41: error: expected location attribute, but got#foo.customloc",
        ),
        ('"foo.a"() : () -> tensor<tuple<i32>>\n', "t.mlir:1:26: error: invalid tensor element type"),
        (
            '"foo.a"() {x = 3 : i1} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            '"foo.a"() : () -> () loc(#nope)\n',
            "t.mlir:1:26: error: operation location alias was never defined",
        ),
        ("$\n", "t.mlir:1:1: error: unexpected character"),
        ('"foo.a"(', "t.mlir:1:9: error: expected ')' to end operand list"),
        ('"foo.r"() ({\n', "t.mlir:2:1: error: expected '}' to end region"),
        ('"foo.a"() {"" = 7} : () -> ()\n', "t.mlir:1:12: error: expected valid attribute name"),
        (
            '%0:2 = "foo.a"() : () -> i32\n',
            "t.mlir:1:1: error: operation defines 1 results but was provided 2 to bind",
        ),
        ('"foo.b"()[^bb9] : () -> ()\n', "t.mlir:1:11: error: reference to an undefined block"),
    ],
)
def test_error_messages(src, expected):
    errs = parse_errors(src)
    assert len(errs) == 1
    assert errs[0].split("\n")[0] == expected


Z = "0" * 5000  # longer than Python's int/str conversion limit (4300 digits)


@pytest.mark.parametrize(
    "src, expected",
    [
        (
            f'"foo.a"() {{x = 1{Z} : i32}} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            f'"foo.a"() {{x = -1{Z}}} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            f'"foo.a"() {{x = 1{Z} : index}} : () -> ()\n',
            "t.mlir:1:16: error: integer constant out of range for attribute",
        ),
        (
            f'"foo.a"() {{x = dense<[1{Z}]> : tensor<1xi32>}} : () -> ()\n',
            "t.mlir:1:22: error: integer constant out of range for type",
        ),
        (
            '"foo.a"() {x = dense<[99999999999999999999999]> : tensor<1xi32>} : () -> ()\n',
            "t.mlir:1:22: error: integer constant out of range for type",
        ),
        (
            f'"foo.a"() {{x = array<i32: 1{Z}>}} : () -> ()\n',
            "t.mlir:1:5028: error: integer constant out of range",
        ),
        (f'"foo.a"() : () -> tensor<1{Z}xf32>\n', "t.mlir:1:26: error: invalid dimension"),
        (f'"foo.a"() : () -> i1{Z}\n', "t.mlir:1:19: error: invalid integer width"),
        (
            f'%0:1{Z} = "foo.a"() : () -> i32\n',
            "t.mlir:1:1: error: expected named operation to have at least 1 result",
        ),
        (
            f'%0:2 = "foo.a"() : () -> (i32, i32)\n"foo.b"(%0#1{Z}) : (i32) -> ()\n',
            "t.mlir:2:9: error: reference to invalid result number",
        ),
    ],
    ids=[
        "attr-i32",
        "attr-i64",
        "attr-index",
        "dense",
        "dense-wraps",
        "array",
        "dim",
        "width",
        "count",
        "result-number",
    ],
)
def test_huge_integer_literals_are_located_errors(src, expected):
    errs = parse_errors(src)
    assert len(errs) == 1
    assert errs[0].split("\n")[0] == expected


def test_integer_literals_as_wide_as_their_type_roundtrip():
    src = f'"foo.a"() {{x = 1{Z} : i20000, y = -1{Z} : i20000}} : () -> ()'
    m = parse_module(src, ctx())
    assert m is not None
    assert m.body.first_op.attributes["x"].value == 10**5000
    assert print_operation(m, generic=True) == f'"builtin.module"() ({{\n  {src}\n}}) : () -> ()\n'


def test_deep_nesting_is_reported_not_recursion_error():
    deep = "[" * 5000 + "]" * 5000
    errs = parse_errors(f'"foo.a"() {{x = {deep}}} : () -> ()\n')
    assert "nesting is too deep" in errs[0]
    regions = '"foo.r"() ({\n' * 400 + "}) : () -> ()\n" * 400
    errs = parse_errors(regions)
    assert "nesting is too deep" in errs[0]


def test_custom_op_parse_in_default_dialect():
    m = parse_module(
        "func.func @f(%a: i32) -> i32 {\n  %0 = call @f(%a) : (i32) -> i32\n  return %0 : i32\n}\n", ctx()
    )
    body = m.body.first_op.regions[0].blocks[0]
    assert [op.name for op in body] == ["func.call", "func.return"]


def test_float_attr_values_exact():
    a = parse_attribute("0.1 : f32", ctx())
    assert isinstance(a, FloatAttr) and a.type is FloatType("f32")
    assert a.value == float(np.float32(0.1))
    assert parse_attribute("-0.0", ctx()).value.hex() == "-0x0.0p+0"
    i = parse_attribute("255 : ui8", ctx())
    assert isinstance(i, IntegerAttr) and i.type is IntegerType(8, "u") and i.value == 255
    assert parse_attribute('"x"', ctx()) is StringAttr("x")
    assert parse_type("i32", ctx()) is i32

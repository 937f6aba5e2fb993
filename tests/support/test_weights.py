"""The .npz weight file (lamina/support/weights.py) as the parser and printer use it
through lamina/ir/external_resources.py: round trip, located errors, lazy loading."""

from __future__ import annotations

import numpy as np
import pytest

import lamina.dialects  # noqa: F401 - registers the dialect modules
from lamina.ir.attributes import (
    dense_resource,
)
from lamina.ir.builtin import ModuleOp
from lamina.ir.context import Context
from lamina.ir.core import UnregisteredOp
from lamina.ir.parser import parse_module
from lamina.ir.printer import print_operation


def ctx(unregistered: bool = True) -> Context:
    return Context(allow_unregistered_dialects=unregistered, handler=None)


def parse_errors(text: str, unregistered: bool = True, filename: str = "t.mlir") -> list[str]:
    c = ctx(unregistered)
    with c.diagnostics.capture() as diags:
        m = parse_module(text, c, filename=filename)
    assert m is None
    return [str(d) for d in diags]


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

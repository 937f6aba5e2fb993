"""The external-resource hook (lamina/ir/external_resources.py): a provider registered under a
module attribute supplies the blobs of a parsed module, and its problems are located errors."""

from __future__ import annotations

import numpy as np

from lamina.ir import external_resources
from lamina.ir.context import Context
from lamina.ir.parser import parse_module

SRC = """module attributes {test.blobs = "mem"} {
  "foo.w"() {value = dense_resource<w0> : tensor<2xf32>} : () -> ()
}
"""


class _InMemory:
    def __init__(self, fail: str | None = None) -> None:
        self.fail = fail
        self.asked: list[tuple[str, str, dict]] = []

    def load(self, path, name, wanted):
        self.asked.append((path, name, dict(wanted)))
        if self.fail:
            raise ValueError(self.fail)
        return {k: (8, lambda: np.array([1.0, 2.0], np.float32)) for k in wanted}

    def save(self, path, blobs, alignments):
        raise AssertionError("not used")


def _parse(provider):
    external_resources.register_external_resources("test.blobs", provider)
    try:
        ctx = Context(allow_unregistered_dialects=True, handler=None)
        with ctx.diagnostics.capture() as diags:
            m = parse_module(SRC, ctx, filename="/d/t.mlir")
        return m, [str(d) for d in diags]
    finally:
        del external_resources._PROVIDERS["test.blobs"]


def test_registered_provider_supplies_blobs_and_the_attribute_goes():
    p = _InMemory()
    m, errs = _parse(p)
    assert m is not None, errs
    assert "test.blobs" not in m.attributes
    ((path, name, wanted),) = p.asked
    assert (path, name) == ("/d/mem", "mem")
    assert wanted["w0"][1:] == (2, "tensor<2xf32>")
    blob = m.body.first_op.attributes["value"].handle.blob
    assert blob.alignment == 8 and list(blob.data) == [1.0, 2.0]


def test_provider_problem_is_located_at_the_attribute():
    m, errs = _parse(_InMemory(fail="no such blob store"))
    assert m is None
    assert errs and errs[0].startswith("/d/t.mlir:1:20: error: no such blob store"), errs

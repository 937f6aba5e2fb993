"""The ONNX backend node suite (onnx==1.22.0 wheel) through the importer and interpreter.

A fixed subset runs in the default test run; the whole suite (a few seconds here) is ``slow``.
The floors only ever go up; raise them when more tests pass."""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

onnx = pytest.importorskip("onnx")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SUBSET_FLOOR = 385  # of the every-4th-test subset (442 tests)
FULL_FLOOR = 1562  # of 1,765


def _suite():
    spec = importlib.util.spec_from_file_location(
        "onnx_node_suite", os.path.join(ROOT, "benchmarks", "onnx_node_suite.py")
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("onnx_node_suite", mod)
    spec.loader.exec_module(mod)
    return mod


def _has_data(suite) -> bool:
    return os.path.isdir(suite.node_test_dir())


def test_node_suite_subset_floor() -> None:
    suite = _suite()
    if not _has_data(suite):
        pytest.skip("this onnx wheel does not ship the node test data (use onnx==1.22.0)")
    names = suite.list_tests()[::4]
    results = suite.run_suite(names, timeout=20)
    s = suite.summarize(results)
    crashes = [r for r in results if r.status == "failed" and r.category == "crash"]
    assert not crashes, [(r.test, r.message) for r in crashes[:5]]
    assert s["passed"] >= SUBSET_FLOOR, s


def test_single_test_classification() -> None:
    suite = _suite()
    if not _has_data(suite):
        pytest.skip("no node test data")
    assert suite.run_test("test_relu").status == "passed"
    r = suite.run_test("test_image_decoder_decode_jpeg_rgb")
    assert r.status == "unsupported"
    assert suite.op_of_test("test_reduce_sum_keepdims_example") == "ReduceSum"


@pytest.mark.slow
def test_node_suite_full_floor() -> None:
    suite = _suite()
    if not _has_data(suite):
        pytest.skip("no node test data")
    s = suite.summarize(suite.run_suite(suite.list_tests(), timeout=30))
    assert s["passed"] >= FULL_FLOOR, s

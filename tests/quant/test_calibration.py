"""Calibration: streaming histograms, threshold methods on known distributions, tuning, and the whole
calibration of a tiny model."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from lamina.quant.calibration import CalibrationError, ModelRunner, calibrate
from lamina.quant.histogram import TensorObserver
from lamina.quant.methods import (
    ACIQ_GAUSS,
    ACIQ_LAPLACE,
    METHODS,
    compute_threshold,
    kl_threshold,
    kl_threshold_index,
)
from lamina.quant.tune import _search, fake_quant


def _obs(x: np.ndarray, chunks: int = 1) -> TensorObserver:
    o = TensorObserver()
    for c in np.array_split(np.asarray(x, np.float32).ravel(), chunks):
        o.update(c)
    return o


# ---- histograms -----------------------------------------------------------------------------


def test_streaming_equals_one_shot() -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(100_000) * rng.uniform(0.1, 20, 100_000)).astype(np.float32)
    x[::7] = 0.0
    one, many = _obs(x), _obs(x, chunks=13)
    assert np.array_equal(one.hist, many.hist)
    assert (one.zeros, one.count, one.min, one.max) == (many.zeros, many.count, many.min, many.max)
    assert one.sum == pytest.approx(many.sum) and one.sumsq == pytest.approx(many.sumsq)
    merged = _obs(x[:50_000])
    merged.merge(_obs(x[50_000:]))
    assert np.array_equal(merged.hist, one.hist)


def test_statistics_and_linear_histogram() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal(200_000).astype(np.float32)
    x[:1000] = 0
    o = _obs(x, 4)
    assert o.min == x.min() and o.max == x.max() and o.absmax == np.abs(x).max()
    assert o.zeros == 1000 and o.count == x.size
    assert o.mean == pytest.approx(float(x.mean()), abs=1e-6)
    assert o.std == pytest.approx(float(x.std()), rel=1e-5)
    h = o.linear_histogram(2048)
    ref, _ = np.histogram(np.abs(x[x != 0]), bins=2048, range=(0, o.absmax))
    assert h.sum() == pytest.approx(ref.sum())
    # each log bin is < 0.8% wide: the proportional split moves little mass
    assert np.abs(h - ref).sum() / ref.sum() < 0.05
    assert np.abs(np.cumsum(h) - np.cumsum(ref)).max() / ref.sum() < 0.002


def test_nonfinite_and_empty() -> None:
    o = _obs(np.array([1.0, np.inf, -2.0, np.nan], np.float32))
    assert o.nonfinite == 2 and o.count == 2 and o.absmax == 2.0
    e = TensorObserver()
    e.update(np.zeros(0, np.float32))
    assert e.count == 0 and compute_threshold("kl", e) == pytest.approx(1e-5)
    z = _obs(np.zeros(100, np.float32))
    for m in METHODS:
        assert compute_threshold(m, z) == pytest.approx(1e-5)


# ---- methods --------------------------------------------------------------------------------


def test_max_and_percentile_of_uniform() -> None:
    x = np.random.default_rng(2).uniform(-3, 3, 1_000_000)
    o = _obs(x)
    assert compute_threshold("max", o) == pytest.approx(float(np.abs(x).max()), rel=1e-6)
    p = compute_threshold("percentile9999", o)
    assert p == pytest.approx(float(np.percentile(np.abs(x), 99.99)), rel=1e-3)
    assert p == pytest.approx(3 * 0.9999, rel=1e-3)


def test_percentile_counts_zeros() -> None:
    x = np.concatenate([np.zeros(999_000), np.linspace(1, 2, 1000)])
    # 99.99% of the elements: all the zeros and 90% of the rest
    assert _obs(x).percentile(99.99) == pytest.approx(1.9, abs=0.01)


def test_aciq_formulas() -> None:
    rng = np.random.default_rng(3)
    g = rng.normal(0.5, 2.0, 1_000_000)
    assert compute_threshold("aciq_gauss", _obs(g)) == pytest.approx(0.5 + ACIQ_GAUSS[8] * 2.0, rel=0.01)
    lap = rng.laplace(0.0, 1.0, 1_000_000)  # std = sqrt(2) b
    assert compute_threshold("aciq_laplace", _obs(lap)) == pytest.approx(ACIQ_LAPLACE[8] * 1.0, rel=0.01)
    # clamped to absmax
    small = rng.uniform(-1, 1, 1000)
    assert compute_threshold("aciq_laplace", _obs(small)) == pytest.approx(np.abs(small).max(), rel=1e-6)


def test_mse_octav() -> None:
    rng = np.random.default_rng(4)
    u = _obs(rng.uniform(-1, 1, 1_000_000))
    # |x| ~ U(0,1): the fixed point is 1 - eps with eps^2 ~ c, c = 1 / (12 * 127^2)
    assert compute_threshold("mse", u) == pytest.approx(1 - math.sqrt(1 / (12 * 127**2)), abs=0.002)
    g = _obs(rng.standard_normal(1_000_000))
    th = compute_threshold("mse", g)
    assert 3.5 < th < 4.4  # the 8-bit MSE-optimal clipping of N(0,1) is about 3.9 sigma

    # the OCTAV threshold is (close to) the argmin of the empirical MSE over a grid
    x = rng.standard_normal(200_000).astype(np.float32)
    grid = np.linspace(2.5, 4.5, 41)
    mses = [float(np.mean((fake_quant(x, t) - x) ** 2)) for t in grid]
    best = grid[int(np.argmin(mses))]
    assert abs(compute_threshold("mse", _obs(x)) - best) < 0.3


def test_kl_vectorized_matches_loop() -> None:
    def loop(h: np.ndarray, b: int = 128) -> int:
        best, best_i = np.inf, len(h)
        for i in range(b, len(h) + 1):
            p = h[:i].astype(np.float64).copy()
            p[i - 1] += h[i:].sum()
            nz = p != 0
            m = i // b
            q = np.zeros(i)
            for j in range(b):
                s, e = j * m, ((j + 1) * m if j < b - 1 else i)
                cnt = nz[s:e].sum()
                if cnt:
                    q[s:e] = np.where(nz[s:e], h[s:e].sum() / cnt, 0)
            pp, qq = p / p.sum(), q / q.sum()
            mask = pp > 0
            if np.any(qq[mask] == 0):
                continue
            kl = float(np.sum(pp[mask] * np.log(pp[mask] / qq[mask])))
            if kl < best:
                best, best_i = kl, i
        return best_i

    rng = np.random.default_rng(5)
    for x in (rng.laplace(0, 1, 100_000), rng.standard_normal(100_000), rng.exponential(1, 100_000)):
        h, _ = np.histogram(np.abs(x), bins=384, range=(0, np.abs(x).max()))
        assert kl_threshold_index(h, 128) == loop(h)


def test_kl_threshold_between_bounds() -> None:
    rng = np.random.default_rng(6)
    # a uniform bulk with a few far outliers: KL clips the outliers
    x = np.concatenate([rng.uniform(-1, 1, 1_000_000), [50.0, -40.0, 45.0]])
    th = compute_threshold("kl", _obs(x))
    assert 0.9 < th <= 50 * 128 / 2048 + 1e-6  # the smallest candidate: 128 of 2048 bins
    # a heavy tail: KL lies strictly between the bulk and the max
    lap = rng.laplace(0, 1, 1_000_000)
    th = compute_threshold("kl", _obs(lap))
    assert 5.0 < th < np.abs(lap).max()
    # a flat histogram keeps everything
    h = np.ones(2048)
    assert kl_threshold(h, 2.0) == pytest.approx(2.0)


def test_unknown_method() -> None:
    with pytest.raises(ValueError, match="unknown calibration method"):
        compute_threshold("entropy", _obs(np.ones(3)))


# ---- tuning ---------------------------------------------------------------------------------


def test_fake_quant() -> None:
    x = np.array([-2.0, -1.0, 0.003, 0.5, 1.0, 3.0], np.float32)
    y = fake_quant(x, 1.0)
    s = 1 / 127
    assert np.allclose(y, [-128 * s, -1.0, 0.0, round(0.5 / s) * s, 1.0, 1.0], atol=1e-7)
    assert y.dtype == np.float32
    # a scalar tensor (an If condition's operand, a loop counter) tunes too
    z = fake_quant(np.array(0.5, np.float32), 1.0)
    assert z.shape == () and z == np.float32(round(0.5 / s) * s)


def test_search_finds_minimum_in_range() -> None:
    calls: list[float] = []

    def score(t: float) -> float:
        calls.append(t)
        return (t - 3.3) ** 2

    best = _search(score, 2.0, 6.0, 8)
    assert 2.0 <= best <= 6.0 and abs(best - 3.3) <= 0.5
    assert len(calls) <= 10
    assert _search(lambda t: 1.0, 1.0, 2.0, 4) == 1.0  # ties keep the smaller threshold


# ---- whole models -----------------------------------------------------------------------------


def _tiny_model(tmp_path: Path) -> str:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import lamina.api as lm

    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(8).astype(np.float32) * 0.1
    w2 = rng.standard_normal((4, 8, 1, 1)).astype(np.float32) * 0.3
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Conv", ["r", "W2"], ["c2"], name="conv2"),
        helper.make_node("Sigmoid", ["c2"], ["y"], name="sig"),
    ]
    g = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        initializer=[
            numpy_helper.from_array(w, "W"),
            numpy_helper.from_array(b, "B"),
            numpy_helper.from_array(w2, "W2"),
        ],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "tiny.onnx"
    onnx.save(m, str(p))
    res = lm.transform(str(p), mlir=str(tmp_path / "tiny.mlir"))
    return str(res.mlir)


def _module(path: str):
    from lamina.frontends.model_io import parse_mlir_file

    return parse_mlir_file(path)[0]


def test_calibrate_tiny_model(tmp_path: Path) -> None:
    module = _module(_tiny_model(tmp_path))
    rng = np.random.default_rng(1)
    samples = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(6)]
    res = calibrate(module, samples, "max", tune_num=0)
    t = res.table
    names = list(t.thresholds)
    assert names[0] == "x" and "y" in names and "c2" in names
    dumps = [ModelRunner(module).run(s, keep_all=True) for s in samples]
    assert dumps[0] is not None
    # max == absmax of the tensor over every sample (check the input and the output)
    xs = np.stack([s["x"] for s in samples])
    assert t["x"].threshold == pytest.approx(float(np.abs(xs).max()), rel=1e-6)
    assert t["x"].min == pytest.approx(float(xs.min())) and t["x"].max == pytest.approx(float(xs.max()))
    assert t.sample_num == 6 and t.tune_num is None and t.histogram_bin_num == 2048
    for m in METHODS:
        r = calibrate(module, samples, m, tune_num=0).table
        for name, s in r.thresholds.items():
            assert 0 < s.threshold <= max(abs(s.min), abs(s.max)) + 1e-6, (m, name)


def test_calibrate_with_tune(tmp_path: Path) -> None:
    module = _module(_tiny_model(tmp_path))
    rng = np.random.default_rng(2)
    samples = [{"x": rng.laplace(0, 1, (1, 3, 8, 8)).astype(np.float32)} for _ in range(8)]
    res = calibrate(module, samples, "kl", tune_num=3)
    assert res.table.tune_num == 3
    for name, th in res.tuned.items():
        o = res.observers[name]
        assert res.initial_thresholds[name] <= th <= o.absmax + 1e-9


def test_calibrate_errors(tmp_path: Path) -> None:
    module = _module(_tiny_model(tmp_path))
    with pytest.raises(CalibrationError, match="no calibration samples"):
        calibrate(module, [], "kl")
    with pytest.raises(CalibrationError, match="unknown calibration method"):
        calibrate(module, [], "foo")
    with pytest.raises(CalibrationError, match="missing input"):
        calibrate(module, [{"nope": np.zeros((1, 3, 8, 8), np.float32)}], "kl")
    with pytest.raises(CalibrationError, match="execution failed"):
        calibrate(module, [{"x": np.zeros((1, 5, 8, 8), np.float32)}], "kl")


def test_tune_moves_a_bad_threshold_toward_lower_error(tmp_path: Path) -> None:
    from lamina.quant.calibration import collect_statistics
    from lamina.quant.tune import tune_thresholds

    module = _module(_tiny_model(tmp_path))
    runner = ModelRunner(module)
    rng = np.random.default_rng(3)
    samples = [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(4)]
    observers, envs, n = collect_statistics(runner, samples, keep=2)
    assert n == 4 and len(envs) == 2
    amax = {k: o.absmax for k, o in observers.items()}
    bad = {"x": 0.1 * amax["x"]}  # clips most of the input away
    tuned = tune_thresholds(runner, envs, bad, amax, steps=8)
    assert bad["x"] < tuned["x"] <= amax["x"]

    # the consumer (conv) output error is lower with the tuned threshold
    slot = next(s for s, name in runner.names.items() if name == "x")
    fn, ins, outs = next(
        (f, i, o) for f, i, o, _, op in runner.interp.plan if slot in i and op.name == "top.Conv"
    )

    def err(th: float) -> float:
        env = envs[0]
        y = fn([fake_quant(env[slot], th) if s == slot else env[s] for s in ins])[0]
        return float(np.sum((y - env[outs[0]]) ** 2))

    assert err(tuned["x"]) < err(bad["x"])


def test_outlier_channels_and_one_sided_tensors_are_marked() -> None:
    from lamina.dialects.tpu.tables import CalibrationTable, TensorStats
    from lamina.quant.calibration import mark_one_sided, mark_outlier_channels
    from lamina.quant.histogram import TensorObserver

    rng = np.random.default_rng(0)
    obs = {n: TensorObserver() for n in ("resid", "even", "conv", "conv4", "gelu", "sym")}
    for _ in range(3):
        r = rng.normal(0, 1, (1, 16, 32)).astype(np.float32)
        r[..., 7] *= 100  # one outlier channel
        obs["resid"].update(r)
        obs["even"].update(rng.normal(0, 1, (1, 16, 32)).astype(np.float32))
        obs["conv"].update(rng.normal(0, 1, (1, 32, 4, 4)).astype(np.float32))  # rank 4: axis 1
        c4 = rng.normal(0, 1, (1, 16, 4, 4)).astype(np.float32)
        c4[:, 3] *= 50  # one outlier channel of a conv activation
        obs["conv4"].update(c4)
        g = rng.normal(0, 2, (1, 16, 32))
        obs["gelu"].update((0.5 * g * (1 + np.tanh(0.8 * g))).astype(np.float32))  # min ~ -0.17
        obs["sym"].update(rng.normal(0, 1, (4, 8)).astype(np.float32))
    t = CalibrationTable()
    for n, o in obs.items():
        t.thresholds[n] = TensorStats(o.absmax, o.min, o.max)
    t.thresholds["conv4"] = TensorStats(0.5 * obs["conv4"].absmax, obs["conv4"].min, obs["conv4"].max)
    mark_outlier_channels(t, obs, 4.0)
    mark_one_sided(t, obs, 0.05)
    assert list(t.channel_thresholds) == ["resid", "conv4"]
    # rank 4: channels along axis 1, each capped at the tensor's (tuned) threshold
    axis4, ths4 = t.channel_thresholds["conv4"]
    c = obs["conv4"].channel_absmax
    assert axis4 == 1 and len(ths4) == 16 and obs["conv4"].channel_axis == 1
    assert ths4 == pytest.approx(np.minimum(c, 0.5 * obs["conv4"].absmax).tolist())
    assert max(ths4) == pytest.approx(0.5 * obs["conv4"].absmax) and min(ths4) < 0.1 * max(ths4)
    # a Conv/MatMul result is not listed (TPU-MLIR reads such an entry as "asymmetric input")
    t3 = CalibrationTable(thresholds=dict(t.thresholds))
    mark_one_sided(t3, obs, 0.05, skip=["gelu"])
    assert t3.asym_ops == []
    axis, ths = t.channel_thresholds["resid"]
    assert axis == 2 and len(ths) == 32 and max(ths) == pytest.approx(obs["resid"].absmax)
    assert obs["conv"].channel_axis == 1 and obs["conv"].channel_absmax.shape == (32,)  # no outlier
    assert t.asym_ops == ["gelu"]
    # both can be switched off
    t2 = CalibrationTable(thresholds=dict(t.thresholds))
    mark_outlier_channels(t2, obs, 0, 0)
    mark_one_sided(t2, obs, 0)
    assert not t2.channel_thresholds and not t2.asym_ops


# ---- samples and modules calibration cannot take -----------------------------------------------


def test_non_finite_samples(tmp_path: Path) -> None:
    module = _module(_tiny_model(tmp_path))
    nan = {"x": np.full((1, 3, 8, 8), np.nan, np.float32)}
    with pytest.raises(CalibrationError, match=r"tensor 'x' is NaN/inf everywhere in all 2 sample\(s\)"):
        calibrate(module, [nan, {"x": np.full((1, 3, 8, 8), np.inf, np.float32)}], "kl")
    rng = np.random.default_rng(3)
    part = rng.standard_normal((1, 3, 8, 8)).astype(np.float32)
    part[0, 0, 0, :3] = np.nan
    res = calibrate(module, [{"x": part}, {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}], "max")
    assert len(res.warnings) == 1 and "4 tensor(s) hold NaN/inf in the calibration samples" in res.warnings[0]
    assert "'x' (3 of 384 values)" in res.warnings[0] and "ignore those values" in res.warnings[0]
    assert res.table["x"].threshold == pytest.approx(float(np.nanmax(np.abs(part))), rel=0.5)


def test_tensor_nan_everywhere_is_named(tmp_path: Path) -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import lamina.api as lm

    one = numpy_helper.from_array(np.ones(1, np.float32), "one")
    nodes = [
        helper.make_node("Abs", ["x"], ["a"], name="abs"),
        helper.make_node("Add", ["a", "one"], ["b"], name="add"),
        helper.make_node("Neg", ["b"], ["n"], name="neg"),
        helper.make_node("Sqrt", ["n"], ["s"], name="sqrt"),  # sqrt of a negative: NaN everywhere
        helper.make_node("Add", ["x", "s"], ["y"], name="out"),
    ]
    g = helper.make_graph(
        nodes, "nan", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=[one],
    )  # fmt: skip
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(tmp_path / "nan.onnx"))
    mlir = lm.transform(str(tmp_path / "nan.onnx"), mlir=str(tmp_path / "nan.mlir")).mlir
    with pytest.raises(CalibrationError, match=r"tensor 's' is NaN/inf everywhere .*\(and 1 more: 'y'\)"):
        calibrate(_module(str(mlir)), [{"x": np.ones((1, 4), np.float32)}], "kl")


def test_run_calibration_rejects_nan_samples_and_deployed_modules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lamina.flows.transform import write_mlir
    from lamina.frontends.model_io import parse_mlir_file
    from lamina.quant.deploy import deploy_module
    from lamina.tools.calibrate import main

    mlir = _tiny_model(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    rng = np.random.default_rng(4)
    np.save(data / "a.npy", rng.standard_normal((1, 3, 8, 8)).astype(np.float32))
    np.save(data / "b.npy", np.full((1, 3, 8, 8), np.nan, np.float32))
    out = tmp_path / "table"
    assert main([mlir, "--dataset", str(data), "-q", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert f"{data / 'b.npy'}: input 'x' is NaN everywhere (192 values)" in err and not out.exists()
    # a deployed (tpu) module, and a module with no top ops
    module, ctx = parse_mlir_file(mlir)
    calib = calibrate(module, [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}], "max").table
    tpu = tmp_path / "tiny_tpu.mlir"
    write_mlir(
        deploy_module(module, "INT8", calibration_table=calib, ctx=ctx), str(tpu), str(tmp_path / "w.npz")
    )
    (data / "b.npy").unlink()
    assert main([str(tpu), "--dataset", str(data), "-q", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert (
        f"run_calibration: error: run_calibration expects a top-level .mlir from model_transform; '{tpu}' holds "
        "tpu ops (already deployed)" in err
    )
    plain = tmp_path / "plain.mlir"
    plain.write_text(
        "func.func @main(%x: tensor<1x3x8x8xf32>) -> tensor<1x3x8x8xf32> {\n  return %x : tensor<1x3x8x8xf32>\n}\n"
    )
    assert main([str(plain), "--dataset", str(data), "-q", "-o", str(out)]) == 1
    assert f"'{plain}' has no top ops (it holds func)" in capsys.readouterr().err
    assert not out.exists()


def test_a_constant_sharing_its_users_name_does_not_take_the_table_entry() -> None:
    """ONNX importers name a Reshape's shape constant (and an Attention's `none` operands) after the
    op: the computed tensor, not the constant, gets the table entry (it once had none, so its users
    could not run in INT8)."""
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module

    text = """
func.func @main(%x: tensor<2x8xf32>) -> tensor<4x4xf32> {
  %in = "top.Input"(%x) : (tensor<2x8xf32>) -> tensor<2x8xf32> loc("x")
  %s = "top.Weight"() <{value = dense<[4, 4]> : tensor<2xi64>}> : () -> tensor<2xi64> loc("r")
  %r = "top.Reshape"(%in, %s) : (tensor<2x8xf32>, tensor<2xi64>) -> tensor<4x4xf32> loc("r")
  %n = "top.None"() : () -> none loc("t")
  %t = "top.Relu"(%r) : (tensor<4x4xf32>) -> tensor<4x4xf32> loc("t")
  return %t : tensor<4x4xf32>
}
"""
    m = parse_module(text, Context())
    x = np.linspace(-2, 3, 16, dtype=np.float32).reshape(2, 8)
    name = ModelRunner(m).input_names[0]
    table = calibrate(m, [{name: x}], method="max", tune_num=0).table
    assert table.thresholds["r"].max == pytest.approx(3.0)
    assert table.thresholds["t"].min == 0.0 and table.thresholds["t"].max == pytest.approx(3.0)


def test_rank4_channels_only_along_a_real_channel_axis(monkeypatch: pytest.MonkeyPatch) -> None:
    """A transformer's ``[batch, tokens, heads, dim]`` tensor is observed over the kept tokens only:
    its axis 1 is a (masked) sequence axis, not channels, and its entry is dropped; so is one whose
    size differs from the model's tensor; a conv activation's stays."""
    from lamina.dialects.tpu import tables
    from lamina.dialects.tpu.tables import CalibrationTable, TensorStats
    from lamina.ir.types import RankedTensorType, f32
    from lamina.quant.calibration import _drop_sequence_channels
    from lamina.quant.masking import MaskInfo

    types = {
        "conv": RankedTensorType([1, 8, 4, 4], f32),
        "heads": RankedTensorType([1, 64, 12, 32], f32),
        "other": RankedTensorType([1, 16, 4, 4], f32),
        "seq3": RankedTensorType([1, 64, 8], f32),
    }
    monkeypatch.setattr(tables, "model_tensors", lambda module: types)
    t = CalibrationTable()
    for n in types:
        t.thresholds[n] = TensorStats(1.0, -1.0, 1.0)
    t.channel_thresholds = {
        "conv": (1, [1.0] * 8),
        "heads": (1, [1.0] * 14),
        "other": (1, [1.0] * 8),
        "seq3": (2, [1.0] * 8),
    }
    mask = MaskInfo.__new__(MaskInfo)
    mask.axes = {"heads": None, "seq3": None}  # type: ignore[dict-item]
    _drop_sequence_channels(None, t, mask)
    assert sorted(t.channel_thresholds) == ["conv", "seq3"]  # rank-3 entries are the last axis's

"""Thresholds for what a tensor's consumer reads (lamina.quant.consumers), on a small DB-style text
detector: a convolution backbone with an SE block, a transposed
convolution to a one-channel logit map, a bias Add and a Sigmoid read at 0.3."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from lamina.quant.calibration import calibrate
from lamina.quant.consumers import sigmoid_input_cap


def test_sigmoid_input_cap_is_where_u8_saturates() -> None:
    cap = sigmoid_input_cap(1.0)
    assert cap == pytest.approx(math.log(509.0))
    sig = lambda x: 1.0 / (1.0 + math.exp(-x))  # noqa: E731
    # beyond the cap every input gives code 255 (round half away: 254.5 -> 255), below -cap code 0
    assert sig(cap) * 255 == pytest.approx(254.5)
    assert sig(cap - 0.01) * 255 < 254.5 and sig(-cap + 0.01) * 255 > 0.5
    # a clipped probability map (scale 0.5 / 255): the finer low end decides
    q = 0.5 / 255
    assert sigmoid_input_cap(0.5) == pytest.approx(-math.log((q / 2) / (1 - q / 2)))


def _db_model(tmp_path: Path) -> str:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    import lamina.api as lm

    rng = np.random.default_rng(0)
    c = 8

    def w(*shape: int, s: float = 0.4) -> np.ndarray:
        return (rng.standard_normal(shape) * s).astype(np.float32)

    inits = {
        "W1": w(c, 3, 3, 3), "B1": w(c, s=0.1), "W2": w(c, 1, 3, 3), "B2": w(c, s=0.1),
        "Wse1": w(2, c, 1, 1), "Wse2": w(c, 2, 1, 1), "Wd": w(c, 1, 2, 2, s=1.5),
        "bias": np.array([[[[-4.0]]]], np.float32),
    }  # fmt: skip
    n = helper.make_node
    nodes = [
        n("Conv", ["x", "W1", "B1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        n("Relu", ["c1"], ["hs"]),
        n("Conv", ["hs", "W2", "B2"], ["c2"], pads=[1, 1, 1, 1], group=c),
        n("GlobalAveragePool", ["c2"], ["gap"]),  # an SE block: 1x8x1x1 tensors
        n("Conv", ["gap", "Wse1"], ["se1"]),
        n("Relu", ["se1"], ["se2"]),
        n("Conv", ["se2", "Wse2"], ["se3"]),
        n("HardSigmoid", ["se3"], ["se4"], alpha=0.2, beta=0.5),
        n("Mul", ["c2", "se4"], ["f"]),
        n("ConvTranspose", ["f", "Wd"], ["logit0"], strides=[2, 2]),
        n("Add", ["logit0", "bias"], ["logit"]),
        n("Sigmoid", ["logit"], ["prob"]),
    ]
    g = helper.make_graph(
        nodes,
        "db",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 32, 64])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 1, 32, 64])],
        initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    p = tmp_path / "db.onnx"
    onnx.save(m, str(p))
    return str(lm.transform(str(p), mlir=str(tmp_path / "db.mlir")).mlir)


def _pages(n: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Dark pages with a few bright horizontal bars ("text lines"), in [-1, 1]."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        x = rng.uniform(-1.0, -0.6, (1, 3, 32, 64)).astype(np.float32)
        for _ in range(int(rng.integers(2, 5))):
            y0, x0 = int(rng.integers(0, 28)), int(rng.integers(0, 40))
            x[:, :, y0 : y0 + int(rng.integers(2, 5)), x0 : x0 + int(rng.integers(8, 24))] = rng.uniform(
                0.5, 1.0
            )
        out.append({"x": x})
    return out


def test_db_head_thresholds_and_mask(tmp_path: Path) -> None:
    import lamina.api as lm
    from lamina.quant.deploy import deploy_module, run_tpu_module

    top = lm.load(_db_model(tmp_path))
    res = calibrate(top.module, _pages(8, 0), "kl", tune_num=0)
    t = res.table
    rules = [c for c in t.comments if "consumer rule" in c]
    assert t["prob"].threshold == pytest.approx(max(abs(t["prob"].min), t["prob"].max))
    cap = sigmoid_input_cap(t["prob"].threshold)
    assert t["logit"].threshold == pytest.approx(cap) and t["logit"].min >= -cap
    assert t["logit0"].threshold == pytest.approx(cap + 4.0)  # back through the bias Add
    assert len(rules) >= 2
    # the 1x8x1x1 SE tensors take their max (fewer than 1024 elements per sample)
    for name in ("gap", "se3"):
        st = t[name]
        assert st.threshold == pytest.approx(max(abs(st.min), abs(st.max)), rel=1e-6), name
    # end to end (KL clips these synthetic bars' input at half their level: the map is checked on a
    # max-calibrated table, which carries the Sigmoid cap as well)
    tm = calibrate(top.module, _pages(8, 0), "max", tune_num=0).table
    assert tm["logit"].threshold == pytest.approx(sigmoid_input_cap(tm["prob"].threshold))
    tpu = deploy_module(top.module, "INT8", calibration_table=tm, ctx=top.ctx)
    test = _pages(4, 1)
    ious = []
    for s in test:
        ref = top.run(s)["prob"]
        got = run_tpu_module(tpu, s)["prob"]
        a, b = ref > 0.3, got > 0.3
        ious.append((a & b).sum() / max((a | b).sum(), 1))
    assert min(ious) >= 0.85, ious  # measured 0.87-0.96 on these 4 pages

"""The NPU compiler end to end: ``tpu`` → npu passes → command buffers → ``.lamina`` → simulator,
bit-exact against the ``tpu`` interpreter in INT8 (and equal in float modes: the TIU computes as the
interpreter does). Small networks on chips whose LMEM is so small that the groups must slice along
each of n, c, h and w; ops without an NPU form running as CPU subnets; corrupt files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import lamina.api as api
from lamina.support.errors import LaminaError
from lamina.targets.container import read_model

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

LNPU = Path(__file__).resolve().parents[3] / "lamina" / "targets" / "npu" / "chips" / "lnpu.json"


def tiny_chip(
    tmp_path: Path, lanes: int = 4, lmem: int = 1024, banks: int = 4, eu: int = 32, **extra: Any
) -> str:
    """A chip of ``lanes`` x ``lmem`` bytes of LMEM (the lnpu's speeds), as a user's JSON file."""
    d = json.loads(LNPU.read_text())
    d.update(name=f"tiny{lanes}x{lmem}", description="test chip", lanes=lanes, lmem_bytes_per_lane=lmem)
    d.update(lmem_banks=banks, eu_bytes=eu, **extra)
    p = tmp_path / f"tiny{lanes}x{lmem}.json"
    p.write_text(json.dumps(d))
    return str(p)


def _model(
    tmp_path: Path, nodes: list[Any], inputs: list[Any], outputs: list[Any], inits: dict[str, np.ndarray]
) -> str:
    g = helper.make_graph(
        nodes, "g", inputs, outputs, initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()]
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return str(path)


def _f(shape: tuple[int, ...], seed: int, scale: float = 1.0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * scale).astype(np.float32)


def conv_net(tmp_path: Path, shape: tuple[int, int, int, int], cout: int, k: tuple[int, int] = (3, 3)) -> str:
    """x → Conv(k, pad same) → Relu → Conv(k) → + (1x1 Conv of x) → Relu → MaxPool 2x2 (where the
    size allows)."""
    _n, c, h, w = shape
    ph, pw = k[0] // 2, k[1] // 2
    inits = {
        "W1": _f((cout, c, *k), 1, 0.3),
        "B1": _f((cout,), 2, 0.1),
        "W2": _f((cout, cout, *k), 3, 0.2),
        "W3": _f((cout, c, 1, 1), 4, 0.3),
    }
    nodes = [
        helper.make_node("Conv", ["x", "W1", "B1"], ["c1"], name="c1", pads=[ph, pw, ph, pw]),
        helper.make_node("Relu", ["c1"], ["r1"], name="r1"),
        helper.make_node("Conv", ["r1", "W2"], ["c2"], name="c2", pads=[ph, pw, ph, pw]),
        helper.make_node("Conv", ["x", "W3"], ["c3"], name="c3"),
        helper.make_node("Add", ["c2", "c3"], ["s"], name="s"),
        helper.make_node("Relu", ["s"], ["y0"], name="y0"),
    ]
    out = "y0"
    if h >= 2 and w >= 2:
        nodes.append(
            helper.make_node("MaxPool", ["y0"], ["y"], name="y", kernel_shape=[2, 2], strides=[2, 2])
        )
        out = "y"
    return _model(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
        inits,
    )


def deploy(
    onnx_path: str, x: dict[str, np.ndarray], mode: str, tmp_path: Path, processor: str = "lnpu", **kw: Any
) -> Any:
    api.transform(onnx_path, mlir=str(tmp_path / "m.mlir"))
    m = api.load(tmp_path / "m.mlir")
    table = api.calibrate(m, samples=[x], calibration_method="max", tune_num=0) if mode == "INT8" else None
    res = api.deploy(
        m,
        mode,
        calibration_table=table,
        processor=processor,
        test_input=x,
        output=tmp_path / "m.lamina",
        **kw,
    )
    assert res.result.target_check == [], res.result.target_check
    assert res.compiled is not None
    return res


def secs_of(res: Any) -> list[list[int]]:
    return [g["secs"] for g in res.compiled.model.metadata["groups"] if g["kind"] == "group"]


@pytest.mark.parametrize(
    ("shape", "cout", "k", "dim"),
    [
        ((1, 4, 24, 24), 8, (3, 3), 2),  # h: the only dim big enough
        ((1, 4, 1, 512), 8, (1, 3), 3),  # w: a one-row image
        ((1, 64, 1, 1), 64, (1, 1), 1),  # c: 1x1 "images" of many channels (weights sliced with them)
        ((16, 8, 4, 4), 8, (3, 3), 0),  # n: a batch of small images
    ],
)
@pytest.mark.parametrize("mode", ["INT8", "BF16"])
def test_tiny_lmem_forces_slicing_along_each_dim(
    shape: tuple[int, int, int, int], cout: int, k: tuple[int, int], dim: int, mode: str, tmp_path: Path
) -> None:
    """A chip of 4 lanes x 1 KiB: the groups must slice, here along ``dim``; the simulator's outputs
    equal the tpu interpreter's bit for bit (checked by the deploy flow)."""
    chip = tiny_chip(tmp_path)
    path = conv_net(tmp_path, shape, cout, k)
    res = deploy(path, {"x": _f(shape, 0)}, mode, tmp_path, chip_config=chip)
    secs = secs_of(res)
    assert any(s[dim] > 1 for s in secs), secs
    assert all(v == "npu" for v in res.placement.values()), res.placement


def test_matmul_slices_rows_or_columns(tmp_path: Path) -> None:
    """A (1, 48, 64) x (64, 96) matmul with GELU: rows (c of the (B, M, 1, K) view) or columns (w)
    are sliced on a small chip; INT8 bit-exact."""
    chip = tiny_chip(tmp_path, lanes=4, lmem=2048)
    inits = {"W": _f((64, 96), 1, 0.2), "B": _f((96,), 2, 0.1)}
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"], name="m"),
        helper.make_node("Add", ["m", "B"], ["a"], name="a"),
        helper.make_node("Relu", ["a"], ["y"], name="y"),
    ]
    path = _model(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 48, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    res = deploy(path, {"x": _f((1, 48, 64), 0)}, "INT8", tmp_path, chip_config=chip)
    assert any(s[1] > 1 or s[3] > 1 for s in secs_of(res)), secs_of(res)


def test_ops_without_a_form_run_as_cpu_subnets(tmp_path: Path) -> None:
    """A Gather (no TIU form) between convolutions: the model splits into NPU, CPU and NPU subnets,
    the CPU one reading its input from DDR and writing its result back; outputs bit-exact."""
    idx = np.array([3, 0, 1], np.int64)
    inits = {"W1": _f((4, 4, 3, 3), 1, 0.3), "W2": _f((4, 4, 1, 1), 2, 0.3), "I": idx}
    nodes = [
        helper.make_node("Conv", ["x", "W1"], ["c1"], name="c1", pads=[1, 1, 1, 1]),
        helper.make_node("Gather", ["c1", "I"], ["g"], name="g", axis=1),
        helper.make_node("Conv", ["g", "W2"], ["y"], name="y"),
    ]
    inits["W2"] = _f((4, 3, 1, 1), 2, 0.3)
    path = _model(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    res = deploy(path, {"x": _f((1, 4, 8, 8), 0)}, "INT8", tmp_path)
    kinds = [s.kind for s in res.compiled.model.subnets]
    assert kinds == ["npu", "cpu", "npu"], kinds
    assert res.placement["g"] == "cpu" and res.placement["c1"] == "npu"
    info = read_model(tmp_path / "m.lamina")
    cpu = info.section(info.subnets[1].section).text()
    assert '"tpu.Gather"' in cpu and "func.func @main" in cpu


@pytest.mark.parametrize("mode", ["INT8", "BF16", "F32"])
def test_disable_layer_group_runs_every_op_through_ddr(mode: str, tmp_path: Path) -> None:
    path = conv_net(tmp_path, (1, 4, 12, 12), 8)
    x = {"x": _f((1, 4, 12, 12), 0)}
    grouped = deploy(path, x, mode, tmp_path)
    alone = deploy(path, x, mode, tmp_path, disable_layer_group=True)
    groups = [g for g in alone.compiled.model.metadata["groups"] if g["kind"] == "group"]
    assert all(len(g["ops"]) == 1 for g in groups)
    assert len(groups) > len([g for g in grouped.compiled.model.metadata["groups"] if g["kind"] == "group"])
    t_grouped = grouped.compiled
    t_grouped.run(x, profile=tmp_path / "a.json")
    alone.compiled.run(x, profile=tmp_path / "b.json")
    assert t_grouped.last_profile["ddr_bytes"] < alone.compiled.last_profile["ddr_bytes"]


def test_edge_chip_runs_int8_and_bf16_only(tmp_path: Path) -> None:
    path = conv_net(tmp_path, (1, 4, 12, 12), 8)
    x = {"x": _f((1, 4, 12, 12), 0)}
    res = deploy(path, x, "INT8", tmp_path, processor="lnpu-edge")
    assert res.compiled.chip == "lnpu-edge"
    deploy(path, x, "BF16", tmp_path, processor="lnpu-edge")
    with pytest.raises(LaminaError, match="lnpu-edge does not run F16"):
        deploy(path, x, "F16", tmp_path, processor="lnpu-edge")


def test_profile_and_runtime_api(tmp_path: Path) -> None:
    import lamina.runtime as rt

    path = conv_net(tmp_path, (1, 4, 16, 16), 8)
    x = {"x": _f((1, 4, 16, 16), 0)}
    res = deploy(path, x, "INT8", tmp_path, chip_config=tiny_chip(tmp_path))
    m = rt.load(tmp_path / "m.lamina")
    assert m.input_names == ["x"] and m.output_names == ["y"]
    out = m.run({"x": x["x"]}, profile=str(tmp_path / "trace.json"))
    np.testing.assert_array_equal(out["y"], res.outputs["y"])
    s = json.loads((tmp_path / "trace.summary.json").read_text())
    for key in ("total_cycles", "time_us", "mac_utilization", "ddr_bytes", "groups"):
        assert key in s
    assert 0 < s["mac_utilization"] <= 1
    assert s["groups"] and all(g["cycles"] > 0 and "busy_cycles" in g for g in s["groups"])
    macs = sum(g["macs"] for g in s["groups"])
    assert macs == s["macs"] > 0
    trace = json.loads((tmp_path / "trace.json").read_text())
    tracks = {
        e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"
    }
    assert {"groups", "tiu", "gdma"} <= tracks
    assert math.isclose(s["time_us"], s["total_cycles"] / s["clock_hz"] * 1e6)


def test_corrupt_command_buffer_is_one_error(tmp_path: Path) -> None:
    path = conv_net(tmp_path, (1, 4, 8, 8), 4)
    deploy(path, {"x": _f((1, 4, 8, 8), 0)}, "INT8", tmp_path)
    import lamina.runtime as rt

    raw = bytearray((tmp_path / "m.lamina").read_bytes())
    bad = tmp_path / "bad.lamina"
    bad.write_bytes(bytes(raw[: len(raw) // 2]))
    with pytest.raises(LaminaError, match="truncated"):
        rt.load(bad)
    raw[-10] ^= 0xFF
    bad.write_bytes(bytes(raw))
    with pytest.raises(LaminaError, match=r"not a valid \.lamina model file"):
        rt.load(bad)
    with pytest.raises(LaminaError, match="missing input"):
        rt.load(tmp_path / "m.lamina").run({})


def test_split_concat_upsample_in_place(tmp_path: Path) -> None:
    """A YOLO-style block: conv → Split → conv of one half → Concat of the other half, that conv and
    an upsampled branch. The copies fold into one (the concatenation reads the split's half and the
    upsampled conv where they are: one move each, not two), the conv stores its part of the
    concatenation in place, the split's other half is read by its conv where it is; bit-exact."""
    inits = {
        "W1": _f((8, 4, 3, 3), 1, 0.3),
        "W2": _f((4, 4, 3, 3), 2, 0.3),
        "W3": _f((4, 8, 1, 1), 3, 0.3),
        "S": np.array([4, 4], np.int64),
        "SC": np.array([1, 1, 2, 2], np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "W1"], ["c1"], name="c1", pads=[1, 1, 1, 1]),
        helper.make_node("Split", ["c1", "S"], ["a", "b"], name="split", axis=1),
        helper.make_node("Conv", ["b", "W2"], ["c2"], name="c2", pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c1"], ["p"], name="p", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "W3"], ["c3"], name="c3"),
        helper.make_node("Resize", ["c3", "", "SC"], ["up"], name="up", mode="nearest"),
        helper.make_node("Concat", ["a", "c2", "up"], ["y"], name="y", axis=1),
    ]
    path = _model(
        tmp_path,
        nodes,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )
    for mode in ("INT8", "BF16"):
        res = deploy(path, {"x": _f((1, 4, 8, 8), 0)}, mode, tmp_path)
        assert set(res.placement.values()) == {"npu"}, res.placement
    from lamina.targets.npu.compiler import run_pipeline
    from lamina.targets.npu.dialect import CopyOp, GroupOp

    copies = list(run_pipeline(res.module, "lnpu").walk_ops(CopyOp))
    views = [c for c in copies if c.get_attr("npu.view") is not None]
    (concat,) = [c for c in copies if c.get_attr("npu.view") is None]
    # the half a conv reads is a view; the concatenation reads c1's other half, the conv and the
    # upsampled conv's output; the conv it reads directly (each element once) stores in place
    assert len(views) == 1 and all(isinstance(u, GroupOp) for u in views[0].results[0].users)
    assert len(concat.inputs) == 3
    placed = [int(i) for i in concat.get_attr("npu.in_place").values]
    assert len(placed) == 1 and isinstance(concat.inputs[placed[0]].defining_op(), GroupOp)


@pytest.mark.parametrize("mode", ["F32", "INT8"])
def test_if_regions_run_on_the_host_with_the_values_they_read(mode: str, tmp_path: Path) -> None:
    """An If whose branches read the function's values directly (not as operands): its CPU subnet
    takes them as inputs, and DDR keeps them alive until it has run; both branches taken."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))
    import zoo

    model, (pos, neg) = zoo._if_model()
    path = tmp_path / "if.onnx"
    onnx.save(model, str(path))
    for x in (pos, neg):
        res = deploy(str(path), {"x": x}, mode, tmp_path)
        assert "cpu" in res.placement.values()
        assert [s.kind for s in res.compiled.model.subnets].count("cpu") >= 1

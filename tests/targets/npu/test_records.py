"""tpu op → ISA record (lamina/targets/npu/records.py), and every record executed by the simulator:
per command kind, random tpu ops (INT8 symmetric, asymmetric and per-channel — along channels and
along the last axis — and F32/F16/BF16) lowered to their command, operands and params placed in a
machine's LMEM, the command encoded and decoded, run, and its output equal bit for bit to the op's
``execute``. Also the views (pure reshapes, the canonical shapes), the params' layouts, and the
ops that stay on the host."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tpu_cases import (
    STRATEGIES,
    Case,
    arr,
    bits,
    build,
    dense,
    eltwise_cases,
    fl,
    matmul_cases,
    op,
    per_axis,
    q8,
    storage,
    t,
)

from lamina.support.errors import LaminaError
from lamina.targets.npu import isa, oprun, records
from lamina.targets.npu.arch import load_chip

LNPU = load_chip("lnpu")
EDGE = load_chip("lnpu-edge")


def _expressible(c: Case) -> records.Lowered | None:
    """The case's command, or None when its rank-5 values cannot merge into 4 dims (the one
    reason a drawn case may have none; anything else fails)."""
    try:
        return records.lower_op(c.op)
    except LaminaError as e:
        assert "merge into 4 dims" in str(e), e
        return None


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    x, y = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    den = np.linalg.norm(x) * np.linalg.norm(y)
    return 1.0 if den == 0 else float(x @ y) / den


def check_case(c: Case, through_ddr: bool = False) -> oprun.OpRun | None:
    low = _expressible(c)
    if low is None:
        return None
    assert low.cls.__name__ == c.cls, (low.cls.__name__, c.cls)
    for name, o in low.operands.items():  # every view is a pure reshape of its value
        v = records.operand_value(c.op, o)
        assert math.prod(o.shape) == math.prod(v.type.shape), (name, o.shape, v.type.shape)  # type: ignore[attr-defined]
    dtypes = {records.value_dtype(records.operand_value(c.op, o)) for o in low.operands.values()}
    chip = EDGE if dtypes <= {"int8", "uint8", "int32", "bf16"} and c.cls != "Attention" else LNPU
    got = oprun.run_lowered(c.op, low, c.inputs, chip, through_ddr=through_ddr)
    kernel = np.asarray(c.op.executor()(c.inputs)[0])  # type: ignore[attr-defined]
    contract = np.asarray(c.op.execute(c.inputs)[0])  # type: ignore[attr-defined]
    assert got.output.dtype == contract.dtype and got.output.shape == contract.shape
    np.testing.assert_array_equal(bits(got.output), bits(kernel))
    if c.exact_execute:
        np.testing.assert_array_equal(bits(got.output), bits(contract))
    else:  # float conv: the contract sums in another order than its kernel
        assert _cosine(got.output, contract) >= 0.99999
    (tiu_rec,) = [r for r in got.result.records if r.engine == "tiu"]
    assert tiu_rec.end > tiu_rec.start
    return got


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_every_command_is_bit_exact_through_the_machine(kind: str) -> None:
    ran: list[int] = []

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(STRATEGIES[kind], st.booleans())
    def run(c: Case, through_ddr: bool) -> None:
        if check_case(c, through_ddr) is not None:
            ran.append(1)

    run()
    assert len(ran) >= 10, f"only {len(ran)} {kind} cases had a command"


#: the commands of the int16 forms and of per-channel 4-d activations (issue 13), each drawn in
#: that form only: an int16 MatMul input (``wide_input``) or result (``lut16``'s pre-activation),
#: int16 sums (``wide_sum``, per tensor and per channel), per-channel Mul (one multiplier per
#: channel along axis 1 or the last axis)
FORMS = {
    "matmul_int16_input": (matmul_cases(wide="in"), "MatMul"),
    "matmul_int16_result": (matmul_cases(wide="out"), "MatMul"),
    "add_sub_int16_result": (eltwise_cases(names=("tpu.Add", "tpu.Sub"), mode="wide"), "Eltwise"),
    "add_sub_per_channel": (eltwise_cases(names=("tpu.Add", "tpu.Sub"), mode="per_channel"), "Eltwise"),
    "mul_per_channel": (eltwise_cases(names=("tpu.Mul",), mode="per_channel"), "Eltwise"),
}


def _wide(v: Any) -> bool:
    return getattr(getattr(v.type, "element_type", None), "storage_width", 8) == 16


@pytest.mark.parametrize("form", sorted(FORMS))
def test_int16_and_per_channel_commands_are_bit_exact(form: str) -> None:
    strategy, cls = FORMS[form]
    ran: list[int] = []

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(strategy, st.booleans())
    def run(c: Case, through_ddr: bool) -> None:
        assert c.cls == cls
        if "int16" in form:
            assert any(_wide(v) for v in (*c.op.operands, *c.op.results)), c.op
        got = check_case(c, through_ddr)
        if got is not None:
            ran.append(1)
            (cmd,) = [x for x in got.commands if isinstance(x, isa.TiuCommand)]
            if form.startswith("mul_"):
                n_ch = len(c.op.attr("multiplier"))  # type: ignore[attr-defined]
                assert (cmd.quant is not None) == (n_ch > 1)  # one multiplier per channel: the quant tensor
            if "int16" in form:
                assert cmd.compute_dtype == "int16"  # timed at the chip's int16 rate

    run()
    assert len(ran) >= 10, f"only {len(ran)} {form} cases had a command"


def test_int16_commands_take_the_chips_int16_rate() -> None:
    """``lnpu`` declares int16 MACs at half its int8 rate: the simulator times a MatMul of a
    (64, 512) x (512, 256) product on an int16 input twice as long (past the start-up latency) as
    the same one on an int8 input, and an int8 + int8 sum written as int16 (``wide_sum``) at the
    int16 element rate."""
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (512, 256)).astype(np.int8)
    wt = ("const", dense(w), t((512, 256), per_axis([0.01] * 256, 1)), t((512, 256), "i8"))
    attrs = f"{arr('multiplier', [1 << 30])}, {arr('rshift', [10])}"
    busy = {}
    for name, (elem, x) in {
        "int8": (q8(True, 0.1), storage(rng, (64, 512), True)),
        "int16": ("!quant.uniform<i16<-16000:16000>:f32, 0.0004>", rng.integers(-16000, 16000, (64, 512))),
    }.items():
        o = op("tpu.MatMul", [t((64, 512), elem), wt, None], t((64, 256), q8(True, 0.2)), attrs)
        ins = [np.asarray(x, np.int8 if name == "int8" else np.int16), w, None]
        got = oprun.run_lowered(o, records.lower_op(o), ins, LNPU)
        np.testing.assert_array_equal(got.output, o.execute(ins)[0])  # type: ignore[attr-defined]
        (rec,) = [r for r in got.result.records if r.engine == "tiu"]
        busy[name] = rec.end - rec.start - LNPU.tiu_latency_cycles
    macs = 64 * 256 * 512
    assert busy == {"int8": macs // 16384, "int16": macs // 8192}, busy
    sums = {}
    for out in ("!quant.uniform<i16:f32, 0.0001>", q8(True, 0.2)):
        x8 = t((64, 512), q8(True, 0.1))
        a = op(
            "tpu.Add",
            [x8, x8],
            t((64, 512), out),
            f"{arr('multiplier', [1 << 30, 1 << 30])}, {arr('rshift', [0])}",
        )
        ins = [storage(rng, (64, 512), True), storage(rng, (64, 512), True)]
        got = oprun.run_lowered(a, records.lower_op(a), ins, LNPU)
        np.testing.assert_array_equal(got.output, a.execute(ins)[0])  # type: ignore[attr-defined]
        (rec,) = [r for r in got.result.records if r.engine == "tiu"]
        sums["i16" in out] = rec.end - rec.start - LNPU.tiu_latency_cycles
    assert sums == {True: 64 * 512 // 2048, False: 64 * 512 // 4096}, sums
    assert "int16" not in EDGE.dtypes


# ---- views ---------------------------------------------------------------------------------------------


def _views(o: Any) -> dict[str, tuple[int, ...]]:
    low = records.lower_op(o)
    return {k: v.shape for k, v in low.operands.items()} | {k: a.shape for k, a in low.params.items()}


def test_canonical_views() -> None:
    assert [records.canonical_view(s) for s in [(), (7,), (3, 7), (2, 3, 7), (2, 3, 4, 5)]] == [
        (1, 1, 1, 1),
        (1, 1, 1, 7),
        (1, 3, 1, 7),
        (2, 3, 1, 7),
        (2, 3, 4, 5),
    ]
    with pytest.raises(ValueError, match="rank-5"):
        records.canonical_view((1, 2, 3, 4, 5))
    # matmul (..., M, K) x (K, N): left (B, M, 1, K), right (1, K, 1, N), output (B, M, 1, N)
    mm = op("tpu.MatMul", [t((2, 3, 5, 7), "f32"), t((7, 4), "f32"), None], t((2, 3, 5, 4), "f32"))
    assert _views(mm) == {"left": (6, 5, 1, 7), "right": (1, 7, 1, 4), "output": (6, 5, 1, 4)}
    bmm = op("tpu.MatMul", [t((2, 5, 7), "bf16"), t((2, 7, 4), "bf16"), None], t((2, 5, 4), "bf16"))
    assert _views(bmm)["right"] == (2, 7, 1, 4)
    vec = op("tpu.MatMul", [t((7,), "f32"), t((7, 4), "f32"), None], t((4,), "f32"))
    assert _views(vec) == {"left": (1, 1, 1, 7), "right": (1, 7, 1, 4), "output": (1, 1, 1, 4)}
    # element-wise: rank 2 (M, K) -> (1, M, 1, K); broadcast operands keep 1 where they broadcast
    add = op("tpu.Add", [t((3, 7), "f32"), t((7,), "f32")], t((3, 7), "f32"))
    assert _views(add) == {"a": (1, 3, 1, 7), "b": (1, 1, 1, 7), "output": (1, 3, 1, 7)}
    add4 = op("tpu.Mul", [t((2, 3, 4, 5), "f32"), t((1, 3, 1, 1), "f32")], t((2, 3, 4, 5), "f32"))
    assert _views(add4)["b"] == (1, 3, 1, 1)
    # rank 5: dims merged where every operand is full (or broadcast) in all of them
    add5 = op("tpu.Add", [t((2, 3, 4, 5, 6), "f32"), t((2, 3, 1, 1, 6), "f32")], t((2, 3, 4, 5, 6), "f32"))
    assert _views(add5) == {"a": (6, 20, 1, 6), "b": (6, 1, 1, 6), "output": (6, 20, 1, 6)}
    # conv / pool of rank 3 (N, C, L) -> (N, C, 1, L)
    c1 = op(
        "tpu.MaxPool",
        [t((2, 3, 9), "f32")],
        t((2, 3, 4), "f32"),
        arr("kernel_shape", [2]) + ", " + arr("strides", [2]),
    )
    assert _views(c1) == {"input": (2, 3, 1, 9), "output": (2, 3, 1, 4)}


def test_per_channel_parameters_run_along_quant_axis() -> None:
    """Transformers' per-channel activations run along the last axis: ``w`` of (B, M, 1, K)."""
    s = [0.01 * (i + 1) for i in range(4)]
    for shape, axis, want in (((2, 3, 4), 2, 3), ((3, 4), 1, 3), ((2, 4, 5, 5), 1, 1), ((4, 3), 0, 1)):
        shp = tuple(4 if i == axis else d for i, d in enumerate(shape))
        rq = op("tpu.Requant", [t(shp, per_axis(s, axis, weight=False))], t(shp, q8(True, 0.05)),
                f"{arr('multiplier', [1 << 30] * 4)}, {arr('rshift', [0, 1, 2, 3])}")  # fmt: skip
        low = records.lower_op(rq)
        assert low.fields["quant_axis"] == want, (shape, axis)
        assert low.operands["input"].shape[want] == 4
        np.testing.assert_array_equal(
            low.params["quant"], np.array([[1 << 30, i] for i in range(4)]).reshape(1, 4, 1, 2)
        )
        cast = op("tpu.Cast", [t(shp, "f32")], t(shp, per_axis(s, axis, weight=False)))
        lc = records.lower_op(cast)
        assert lc.fields["quant_axis"] == want
        q = lc.params["quant"]
        np.testing.assert_array_equal(np.ascontiguousarray(q[0, :, 0, :2]).view(np.float64).ravel(), s)
    per_tensor = records.lower_op(op("tpu.Requant", [t((2, 3), q8(True, 0.1))], t((2, 3), q8(True, 0.2)),
                                     "multiplier = 1073741824 : i64, rshift = 0 : i64"))  # fmt: skip
    assert "quant" not in per_tensor.params and per_tensor.fields["multiplier"] == 1 << 30


def test_params_layouts() -> None:
    rng = np.random.default_rng(0)
    w = rng.integers(-127, 128, (6, 2, 3, 3)).astype(np.int8)
    b = rng.integers(-99, 99, (6,)).astype(np.int32)
    conv = op(
        "tpu.Conv",
        [t((1, 4, 5, 5), q8(True, 0.1)), ("const", dense(w), t(w.shape, per_axis([0.01] * 6, 0)), t(w.shape, "i8")),
         ("const", dense(b), t((6,), "i32"))],
        t((1, 6, 3, 3), q8(True, 0.2)),
        f"group = 2 : i64, {arr('multiplier', [1 << 30] * 6)}, {arr('rshift', range(6))}",
    )  # fmt: skip
    low = records.lower_op(conv)
    assert (
        low.cls is isa.Conv and low.fields["groups"] == 2 and (low.fields["kh"], low.fields["kw"]) == (3, 3)
    )
    np.testing.assert_array_equal(low.params["weight"], w.reshape(1, 6, 2, 9))
    np.testing.assert_array_equal(low.params["bias"], b.reshape(1, 6, 1, 1))
    assert low.params["quant"].shape == (1, 6, 1, 2) and low.params["quant"].dtype == np.int32
    assert set(low.operands) == {"input", "output"}
    # a weight fed at run time is a pure reshape of the filter instead
    dyn = op("tpu.Conv", [t((1, 2, 5, 5), "f32"), t((3, 2, 3, 3), "f32"), None], t((1, 3, 3, 3), "f32"))
    assert records.lower_op(dyn).operands["weight"] == records.Operand(1, (1, 3, 2, 9))
    table = np.arange(256, dtype=np.int64) - 128
    lut = op(
        "tpu.Lut",
        [t((2, 3), q8(True, 0.1))],
        t((2, 3), q8(True, 0.1)),
        f"table = {dense(table)} : tensor<256xi8>",
    )
    np.testing.assert_array_equal(
        records.lower_op(lut).params["table"], table.astype(np.int8).reshape(1, 1, 1, 256)
    )
    gelu = records.lower_op(op("tpu.GELU", [t((4,), "bf16")], t((4,), "bf16"), 'approximate = "tanh"'))
    assert gelu.fields["fn"] == "GELU" and gelu.fields["params"] == (1.0, 0.0, 0.0, 0.0)
    ln = records.lower_op(build("tpu.LayerNorm", [t((2, 3, 4), "f32"), ("const", dense(fl(rng, (4,), "f32")), t((4,), "f32")), None],
                                [t((2, 3, 4), "f32"), "none", "none"], "axis = 2 : i64"))  # fmt: skip
    assert ln.fields["axis"] == 3 and ln.params["gamma"].shape == (1, 1, 1, 4) and "beta" not in ln.params
    # every scalar field of the record class is given
    for lw in (low, lut and records.lower_op(lut), gelu, ln):
        assert set(lw.fields) == {n for n, _ in lw.cls.SCALARS}


def test_build_command() -> None:
    low = records.lower_op(op("tpu.Add", [t((3, 7), "bf16"), t((3, 7), "bf16")], t((3, 7), "bf16")))
    ts = {n: isa.Tensor(isa.Space.LMEM, 0, o.shape, (7, 7, 7, 1), "bf16") for n, o in low.operands.items()}
    cmd = records.build_command(low, ts, id=3)
    assert isinstance(cmd, isa.Eltwise) and cmd.id == 3 and cmd.op == isa.EltwiseOp.ADD
    with pytest.raises(LaminaError, match="tensors for"):
        records.build_command(low, {"a": ts["a"]})


def test_ops_without_a_command_stay_on_the_host() -> None:
    def host(o: Any, why: str) -> None:
        with pytest.raises(
            LaminaError, match=rf"'{o.name}' at .*has no TIU command \(.*{why}.*\): it runs on the host CPU"
        ):
            records.lower_op(o)

    f = "f32"
    host(op("tpu.Add", [t((2, 3), f)] * 3, t((2, 3), f)), "of 3 inputs")
    host(
        op("tpu.Conv", [t((1, 2, 3, 3, 3), f), t((2, 2, 1, 1, 1), f), None], t((1, 2, 3, 3, 3), f)),
        "3-d window",
    )
    host(op("tpu.Reduce", [t((2, 3), f), t((1,), "i64")], t((2, 1), f), 'mode = "ReduceSum"'), "run time")
    zp = "!quant.uniform<i8:f32:1, {0.1:1, 0.2:2}>"
    host(op("tpu.Requant", [t((3, 2), zp)], t((3, 2), q8(True, 0.1)),
            f"{arr('multiplier', [1 << 30] * 2)}, {arr('rshift', [0, 0])}"), "zero points")  # fmt: skip
    # a cast carries per-channel zero points in its quant tensor
    rng = np.random.default_rng(2)
    check_case(Case(op("tpu.Cast", [t((3, 2), zp)], t((3, 2), f)), [storage(rng, (3, 2), True)], "Cast"))
    check_case(Case(op("tpu.Cast", [t((3, 2), f)], t((3, 2), zp)), [fl(rng, (3, 2), f) * 9], "Cast"))
    host(op("tpu.Reshape", [t((2, 3), f), ("const", "dense<[6]>", "tensor<1xi64>")], t((6,), f)), "no form")
    host(op("tpu.Add", [t((2, 3), "f64"), t((2, 3), "f64")], t((2, 3), "f64")), "f64")
    host(
        op("tpu.Add", [t((2, 3, 2, 3, 2, 3), f), t((2, 1, 2, 1, 2, 1), f)], t((2, 3, 2, 3, 2, 3), f)),
        "merge into 4 dims",
    )
    host(op("tpu.Mul", [t((2, 3), q8(True, 0.1))] * 3, t((2, 3), q8(True, 0.1)),
            f"{arr('multiplier', [1 << 30])}, {arr('rshift', [0])}"), "more than two")  # fmt: skip
    host(build("tpu.Attention", [t((1, 1, 2, 4), f)] * 3 + [None] * 4, [t((1, 1, 2, 4), f)] + ["none"] * 3,
               "is_causal = true"), "causal")  # fmt: skip


def test_edge_chip_refuses_float32_commands() -> None:
    """A float32 command on lnpu-edge (int8 and bf16 only) is one error naming the chip."""
    rng = np.random.default_rng(1)
    o = op("tpu.Add", [t((2, 3), "f32"), t((2, 3), "f32")], t((2, 3), "f32"))
    with pytest.raises(LaminaError, match="lnpu-edge does not compute in f32"):
        oprun.run_op(o, [fl(rng, (2, 3), "f32")] * 2, EDGE)
    i8 = op("tpu.Add", [t((2, 3), q8(True, 0.1))] * 2, t((2, 3), q8(True, 0.1)),
            f"{arr('multiplier', [1 << 30, 1 << 30])}, {arr('rshift', [0])}")  # fmt: skip
    got = oprun.run_op(i8, [storage(rng, (2, 3), True)] * 2, EDGE)
    assert got.output.dtype == np.int8


def test_tensors_that_do_not_fit_lmem_are_one_error() -> None:
    o = op("tpu.Add", [t((1, 8, 128, 128), "bf16")] * 2, t((1, 8, 128, 128), "bf16"))
    x = np.zeros((1, 8, 128, 128), np.float32).astype(fl(np.random.default_rng(0), (1,), "bf16").dtype)
    with pytest.raises(LaminaError, match="bytes per lane; chip lnpu-edge has 65536"):
        oprun.run_op(o, [x, x], EDGE)

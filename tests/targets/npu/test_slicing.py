"""The slicing rules (lamina/targets/npu/slicing.py): for random commands of every kind (lowered from
random tpu ops) and random regions of their outputs, the sliced command run on the regions of its
inputs and params the rules give equals that region of the whole command's output, bit for bit;
dims a command computes whole, misaligned group slices and regions outside the output are one
error each."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tpu_cases import STRATEGIES, Case, bits

from lamina.support.errors import LaminaError
from lamina.targets.npu import isa, kernels, records, slicing
from lamina.targets.npu.arch import DTYPES


def _dtype(a: np.ndarray) -> str:
    return next(n for n, d in DTYPES.items() if a.dtype == d)


def _command(cls: type[isa.TiuCommand], fields: dict[str, Any], arrays: dict[str, np.ndarray],
             out_shape: tuple[int, ...], out_dtype: str) -> isa.TiuCommand:  # fmt: skip
    """A command whose tensor descriptors have the arrays' shapes and dtypes (the kernels read
    shapes and dtypes from the record; addresses do not matter off the machine)."""
    ts = {n: isa.Tensor(isa.Space.LMEM, 0, a.shape, (1, 1, 1, 1), _dtype(a)) for n, a in arrays.items()}
    ts["output"] = isa.Tensor(isa.Space.LMEM, 0, out_shape, (1, 1, 1, 1), out_dtype)
    return cls(**fields, **ts)  # type: ignore[arg-type]


def _cut(a: np.ndarray, region: tuple[tuple[int, int], ...]) -> np.ndarray:
    return np.ascontiguousarray(a[tuple(slice(lo, hi) for lo, hi in region)])


@st.composite
def _region(draw: Any, cls: type[isa.TiuCommand], fields: dict[str, Any], shapes: dict[str, Any]) -> Any:
    out = []
    for dim, size in enumerate(shapes["output"]):
        step = slicing.split_step(cls, fields, shapes, dim)
        if step == 0 or size < 2 * step:
            out.append((0, size))
            continue
        cuts = size // step
        a = draw(st.integers(0, cuts - 1))
        b = draw(st.integers(a + 1, cuts))
        out.append((a * step, b * step if b < cuts else size))
    return tuple(out)


def check_slice(c: Case, data: Any) -> bool:
    try:
        low = records.lower_op(c.op)
    except LaminaError:
        return False  # rank-5 values that do not merge (test_records checks which)
    arrays = {n: np.ascontiguousarray(np.asarray(c.inputs[o.value])).reshape(o.shape)
              for n, o in low.operands.items() if n != "output"}  # fmt: skip
    arrays.update(low.params)
    out = low.operands["output"]
    out_dtype = records.value_dtype(records.operand_value(c.op, out))
    whole = kernels.execute(_command(low.cls, low.fields, arrays, out.shape, out_dtype), arrays)
    shapes = {n: a.shape for n, a in arrays.items()} | {"output": out.shape}
    region = data.draw(_region(low.cls, low.fields, shapes))
    try:
        fields, regions = slicing.slice_command(low.cls, low.fields, shapes, region)
    except LaminaError as e:
        assert "reads only padding" in str(e), e
        return False
    assert regions["output"] == region and set(regions) == set(shapes)
    part = {n: _cut(a, regions[n]) for n, a in arrays.items()}
    shape = tuple(b - a for a, b in region)
    got = kernels.execute(_command(low.cls, fields, part, shape, out_dtype), part)
    want = _cut(whole, region)
    blas = low.cls in (isa.Conv, isa.MatMul, isa.Attention) and out_dtype in ("f32", "f16", "bf16")
    if blas and region[1:] != tuple((0, d) for d in out.shape[1:]):
        # BLAS picks its kernel by shape (a one-column product is a GEMV, which sums in another
        # order): float GEMM slices other than batches hold the float contract, cosine 0.99999
        x, y = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
        den = np.linalg.norm(x) * np.linalg.norm(y)
        assert den == 0 or float(x @ y) / den >= 0.99999
        return True
    np.testing.assert_array_equal(bits(got), bits(want))
    return True


@pytest.mark.parametrize("kind", sorted(STRATEGIES))
def test_sliced_commands_compute_their_region(kind: str) -> None:
    ran: list[int] = []

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(STRATEGIES[kind], st.data())
    def run(c: Case, data: Any) -> None:
        if check_slice(c, data):
            ran.append(1)

    run()
    assert len(ran) >= 10, f"only {len(ran)} {kind} cases sliced"


def test_split_limits() -> None:
    conv = {"groups": 3, "kh": 1, "kw": 1, "stride_h": 1, "stride_w": 1, "dilation_h": 1, "dilation_w": 1,
            "pad_top": 0, "pad_bottom": 0, "pad_left": 0, "pad_right": 0}  # fmt: skip
    shapes = {"input": (1, 6, 4, 4), "weight": (1, 9, 2, 1), "output": (1, 9, 4, 4)}
    assert slicing.split_step(isa.Conv, conv, shapes, 1) == 3
    assert slicing.split_step(isa.Conv, {**conv, "groups": 1}, shapes, 1) == 1
    fields, regions = slicing.slice_command(isa.Conv, conv, shapes, ((0, 1), (3, 9), (1, 3), (0, 4)))
    assert fields["groups"] == 2 and regions["input"] == ((0, 1), (2, 6), (1, 3), (0, 4))
    with pytest.raises(LaminaError, match=r"output channels \[2, 9\) do not start and end on a group of 3"):
        slicing.slice_command(isa.Conv, conv, shapes, ((0, 1), (2, 9), (0, 4), (0, 4)))
    # input channels of an ungrouped conv are read whole
    _, regions = slicing.slice_command(isa.Conv, {**conv, "groups": 1}, {**shapes, "weight": (1, 9, 6, 1)},
                                       ((0, 1), (4, 5), (0, 4), (0, 4)))  # fmt: skip
    assert regions["input"][1] == (0, 6)
    assert not slicing.divisible(isa.Reduce, {"axes": 0b1010}, 1) and slicing.divisible(
        isa.Reduce, {"axes": 0b1010}, 2
    )
    assert not slicing.divisible(isa.Softmax, {"axis": 2}, 2) and slicing.divisible(
        isa.Softmax, {"axis": 2}, 3
    )
    assert [slicing.divisible(isa.LayerNorm, {"axis": 2}, d) for d in range(4)] == [True, True, False, False]
    assert [slicing.divisible(isa.MatMul, {}, d) for d in range(4)] == [True, True, False, True]
    with pytest.raises(LaminaError, match=r"dim h is computed whole"):
        slicing.slice_command(isa.Softmax, {"axis": 2, "log": False}, {"input": (1, 2, 3, 4), "output": (1, 2, 3, 4)},
                              ((0, 1), (0, 2), (0, 2), (0, 4)))  # fmt: skip
    with pytest.raises(LaminaError, match=r"dim w range \[0, 5\) is empty or outside"):
        slicing.slice_command(isa.Active, {}, {"input": (1, 2, 3, 4), "output": (1, 2, 3, 4)},
                              ((0, 1), (0, 2), (0, 3), (0, 5)))  # fmt: skip
    with pytest.raises(LaminaError, match="no slicing rule"):
        slicing.slice_command(isa.Move, {}, {"output": (1, 1, 1, 1)}, ((0, 1),) * 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dim 4"):
        slicing.divisible(isa.Active, {}, 4)


def test_every_command_has_a_slicing_rule_and_a_kernel() -> None:
    tiu_classes = {c for c in isa.COMMANDS.values() if issubclass(c, isa.TiuCommand)}
    assert set(slicing.SLICE_RULES) == tiu_classes == set(kernels.KERNELS) == set(kernels.WORK_RULES)


def test_pool_slices_keep_explicit_end_pads_apart_from_ceil_extras() -> None:
    """An average pool counting its explicit padding, in ceil mode: the last rows' slice carries
    the explicit end pad (counted) and ceil mode's extra row (never counted) apart."""
    fields = {
        "mode": isa.PoolMode.AVG, "kh": 3, "kw": 1, "stride_h": 2, "stride_w": 1, "pad_top": 1, "pad_bottom": 1,
        "pad_left": 0, "pad_right": 0, "dilation_h": 1, "dilation_w": 1, "count_include_pad": True,
        "ceil_extra_h": 1, "ceil_extra_w": 0, "input_zp": 0, "output_zp": 0, "multiplier": 1, "rshift": 0,
        "out_min": -128, "out_max": 127, "do_relu": False, "relu_limit": -1.0,
    }  # fmt: skip
    x = np.arange(1, 9, dtype=np.float32).reshape(1, 1, 8, 1)
    out_shape = (1, 1, 5, 1)  # ceil((8 + 2 - 3) / 2) + 1 = 5 windows, the last one past the end pad
    whole = kernels.execute(_command(isa.Pool, fields, {"input": x}, out_shape, "f32"), {"input": x})
    assert whole[0, 0, -1, 0] == np.float32(8 / 2)  # row 7 and the explicit pad counted, not the extra
    shapes = {"input": x.shape, "output": out_shape}
    f2, regions = slicing.slice_command(isa.Pool, fields, shapes, ((0, 1), (0, 1), (3, 5), (0, 1)))
    assert (f2["pad_top"], f2["pad_bottom"], f2["ceil_extra_h"]) == (0, 1, 1)
    part = _cut(x, regions["input"])
    got = kernels.execute(_command(isa.Pool, f2, {"input": part}, (1, 1, 2, 1), "f32"), {"input": part})
    np.testing.assert_array_equal(got, whole[:, :, 3:])

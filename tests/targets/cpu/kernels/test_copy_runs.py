"""The run-copying template (lamina/targets/cpu/kernels/copy_runs.py) against the ``tpu`` ops'
``execute``, bit for bit: random Split (any axis, uneven sizes) and Slice (unit and non-unit
steps, any axes) of f32, bf16 and int8 tensors, on 1 and 3 parts, on the host, an AVX2
``Isa(32)`` and 16-byte vectors, with canary bytes after each output; long runs (copied in
pieces shared by the parts) included; a Concat stays ``generic.concat``'s."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
from tpu_cases import build, dense, q8, t

from lamina.ir.constants import constant_array
from lamina.ir.types import RankedTensorType
from lamina.targets.cpu.jit import host_spec, run_kernel
from lamina.targets.cpu.kernels import candidates
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.copy_runs import PIECE_BYTES, RunCopy

ELEMS = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "i8": np.int8}
ISAS = [None, Isa(32, frozenset({"avx2", "fma"})), Isa(16)]
CANARY = 64


def _ty(et: str) -> str:
    return q8(True, 0.05) if et == "i8" else et


def _values(rng: np.random.Generator, shape: tuple[int, ...], et: str) -> np.ndarray:
    x = (rng.standard_normal(shape) * 50).astype(np.float32)
    return np.ascontiguousarray(x.astype(np.int8) if et == "i8" else x.astype(ELEMS[et]))


def _run(template: Any, o: Any, ins: list[np.ndarray], isa: Isa | None, nparts: int) -> None:
    it = iter(ins)
    args = [constant_array(v) if isinstance(v.type, RankedTensorType) and constant_array(v) is not None
            else (None if not isinstance(v.type, RankedTensorType) else next(it)) for v in o.operands]  # fmt: skip
    wants = [np.asarray(w) for w in o.execute(args)]
    dt = ins[0].dtype
    bufs, gots = {}, []
    for j, w in enumerate(wants):
        raw = np.full(w.size * dt.itemsize + CANARY, 0xA5, np.uint8)
        got = raw[: w.size * dt.itemsize].view(dt).reshape(w.shape)
        bufs[("out", j)] = got
        gots.append((raw, got, w))
    for i, x in enumerate(ins):
        bufs[("in", i)] = x
    run_kernel(template, o, bufs, isa=isa, nparts=nparts)
    for raw, got, w in gots:
        assert got.tobytes() == np.ascontiguousarray(w.astype(dt)).tobytes()
        assert (raw[got.nbytes :] == 0xA5).all(), "wrote past the output"


def _split(shape: tuple[int, ...], axis: int, sizes: list[int], et: str) -> Any:
    outs = [t(tuple(s if i == axis else d for i, d in enumerate(shape)), _ty(et)) for s in sizes]
    split = ("const", dense(np.array(sizes, np.int64)), t((len(sizes),), "i64"))
    return build("tpu.Split", [t(shape, _ty(et)), split], outs, f"axis = {axis} : i64")


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_run_copy_split_is_execute_bit_for_bit(data: Any) -> None:
    rank = data.draw(st.integers(1, 4))
    shape = [data.draw(st.integers(1, 6)) for _ in range(rank)]
    shape[-1] = data.draw(st.integers(4, 40))
    axis = data.draw(st.integers(0, rank - 1))
    sizes = [data.draw(st.integers(1, 4)) for _ in range(data.draw(st.integers(1, 3)))]
    shape[axis] = sum(sizes)
    et = data.draw(st.sampled_from(sorted(ELEMS)))
    o = _split(tuple(shape), axis, sizes, et)
    isa = data.draw(st.sampled_from(ISAS))
    if not RunCopy().matches(o, isa or host_spec().isa):
        return  # runs under MIN_RUN_BYTES: the gather's
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    _run(RunCopy(), o, [_values(rng, tuple(shape), et)], isa, data.draw(st.sampled_from([1, 3])))


def _slice(
    shape: tuple[int, ...], starts: list[int], ends: list[int], axes: list[int], steps: list[int], et: str
) -> Any:
    out = list(shape)
    for s, e, a, st_ in zip(starts, ends, axes, steps):
        out[a] = len(range(s, e, st_))
    consts = [
        ("const", dense(np.array(v, np.int64)), t((len(v),), "i64")) for v in (starts, ends, axes, steps)
    ]
    return build("tpu.Slice", [t(shape, _ty(et)), *consts], [t(tuple(out), _ty(et))])


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_run_copy_slice_is_execute_bit_for_bit(data: Any) -> None:
    rank = data.draw(st.integers(1, 4))
    shape = tuple(
        data.draw(st.integers(1, 7)) if i < rank - 1 else data.draw(st.integers(4, 40)) for i in range(rank)
    )
    axes = sorted(data.draw(st.sets(st.integers(0, rank - 1), min_size=1)))
    starts, ends, steps = [], [], []
    for a in axes:
        s = data.draw(st.integers(0, shape[a] - 1))
        starts.append(s)
        ends.append(data.draw(st.integers(s + 1, shape[a])))
        steps.append(data.draw(st.sampled_from([1, 1, 2])))
    et = data.draw(st.sampled_from(sorted(ELEMS)))
    o = _slice(shape, starts, ends, axes, steps, et)
    isa = data.draw(st.sampled_from(ISAS))
    if not RunCopy().matches(o, isa or host_spec().isa):
        return
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    _run(RunCopy(), o, [_values(rng, shape, et)], isa, data.draw(st.sampled_from([1, 3])))


def test_long_runs_are_copied_in_pieces_by_every_part() -> None:
    n = 3 * PIECE_BYTES // 4 + 5  # f32 elements: 3 pieces and a short last one per run
    rng = np.random.default_rng(1)
    o = _split((2, n), 1, [n // 2, n - n // 2], "f32")
    _run(RunCopy(), o, [_values(rng, (2, n), "f32")], None, 3)


def test_yolo_shapes_take_the_copies() -> None:
    isa = host_spec().isa
    split = _split((1, 32, 160, 160), 1, [16, 16], "f32")
    assert candidates(split, isa)[0].name == "run_copy"
    head = _slice((1, 4, 8400), [0], [2], [1], [1], "f32")
    assert candidates(head, isa)[0].name == "run_copy"
    cat = build("tpu.Concat", [t((1, 16, 8, 8), "f32")] * 3, [t((1, 48, 8, 8), "f32")], "axis = 1 : i64")
    assert candidates(cat, isa)[0].name == "generic.concat"
    every_other = _slice((4, 32), [0], [32], [1], [2], "f32")  # single elements: the gather's
    assert not RunCopy().matches(every_other, isa)

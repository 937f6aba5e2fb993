"""The simulator (lamina/targets/npu/simulator.py): tensor views against an index-arithmetic reference,
GDMA moves against numpy slicing, TIU dispatch through a registration table, and the two-engine
cycle model (overlap, waits, deadlocks) on hand-built command lists."""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.support.errors import LaminaError
from lamina.targets.npu.arch import DTYPES, Chip, load_chip
from lamina.targets.npu.isa import Cast, Eltwise, MatMul, Move, Pool, Space, Tensor, TiuCommand
from lamina.targets.npu.simulator import (
    TIU_TABLE,
    Machine,
    TiuTable,
    mac_utilization,
    run,
)

EDGE = load_chip("lnpu-edge")
LNPU = load_chip("lnpu")


def _machine(chip: Chip = EDGE, ddr: int = 1 << 20, seed: int = 0) -> Machine:
    m = Machine(chip, ddr)
    rng = np.random.default_rng(seed)
    m.lmem[...] = rng.integers(0, 256, m.lmem.shape, dtype=np.uint8)
    m.ddr[...] = rng.integers(0, 256, m.ddr.shape, dtype=np.uint8)
    return m


def _lmem(chip: Chip, addr: int, shape: tuple[int, int, int, int], dtype: str, lane: int = 0) -> Tensor:
    return Tensor(Space.LMEM, addr, shape, chip.lmem_strides(*shape, dtype, lane), dtype, lane)  # type: ignore[arg-type]


def _reference(m: Machine, t: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """(lane or 0, byte offset) of every element of ``t``, from the layout formula of docs/npu-isa.md."""
    n, c, h, w = np.indices(t.shape)
    isz = DTYPES[t.dtype].itemsize
    sn, sc, sh, sw = t.strides
    if t.space is Space.DDR:
        return np.zeros_like(n), t.addr + (n * sn + c * sc + h * sh + w * sw) * isz
    slot = t.lane + c
    lanes = m.chip.lanes
    return slot % lanes, t.addr + (n * sn + (slot // lanes) * sc + h * sh + w * sw) * isz


def _gather(m: Machine, t: Tensor) -> np.ndarray:
    lane, off = _reference(m, t)
    isz = DTYPES[t.dtype].itemsize
    mem = m.ddr[None, :] if t.space is Space.DDR else m.lmem
    raw = mem[lane[..., None], off[..., None] + np.arange(isz)]
    return raw.view(DTYPES[t.dtype]).reshape(t.shape)


@st.composite
def placed_tensors(draw: st.DrawFn, chip: Chip = EDGE, ddr: int = 1 << 20) -> Tensor:
    dtype = draw(st.sampled_from(sorted(DTYPES)))
    isz = DTYPES[dtype].itemsize
    n, c, h, w = (draw(st.integers(1, 6)) for _ in range(4))
    shape = (n, c, h, w)
    space = draw(st.sampled_from(Space))
    lane = draw(st.integers(0, chip.lanes - 1)) if space is Space.LMEM else 0
    if draw(st.booleans()):
        strides = (
            chip.lmem_strides(n, c, h, w, dtype, lane)
            if space is Space.LMEM
            else (shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1)
        )
    else:
        strides = tuple(draw(st.integers(0, 40)) for _ in range(4))
    groups = chip.channels_per_lane(shape[1], lane) if space is Space.LMEM else shape[1]
    extent = (sum(s * (d - 1) for s, d in zip(strides, (shape[0], groups, shape[2], shape[3]))) + 1) * isz
    limit = chip.lmem_bytes_per_lane if space is Space.LMEM else ddr
    addr = draw(st.integers(0, (limit - extent) // isz)) * isz
    return Tensor(space, addr, shape, strides, dtype, lane)  # type: ignore[arg-type]


@settings(max_examples=150)
@given(placed_tensors())
def test_read_matches_layout_formula(t: Tensor) -> None:
    m = _machine()
    np.testing.assert_array_equal(m.read(t).view(np.uint8), _gather(m, t).view(np.uint8))


@settings(max_examples=150)
@given(placed_tensors(), st.integers(0, 2**32 - 1))
def test_write_touches_exactly_the_tensor(t: Tensor, seed: int) -> None:
    lane, off = _reference(_machine(), t)
    isz = DTYPES[t.dtype].itemsize
    if len(set(zip(lane.ravel().tolist(), off.ravel().tolist()))) != t.elements:
        return  # overlapping strides alias elements: which write wins is unspecified
    m = _machine(seed=1)
    before_l, before_d = m.lmem.copy(), m.ddr.copy()
    value = (
        np.random.default_rng(seed).integers(0, 256, (*t.shape, isz), dtype=np.uint8).view(DTYPES[t.dtype])
    )
    value = value.reshape(t.shape)
    m.write(t, value)
    np.testing.assert_array_equal(m.read(t).view(np.uint8), value.view(np.uint8))
    touched = np.zeros(m.lmem.shape if t.space is Space.LMEM else (1, m.ddr.size), bool)
    touched[lane[..., None], off[..., None] + np.arange(isz)] = True
    after, before = (m.lmem, before_l) if t.space is Space.LMEM else (m.ddr[None], before_d[None])
    np.testing.assert_array_equal(after[~touched], before[~touched])
    other = m.ddr if t.space is Space.LMEM else m.lmem
    np.testing.assert_array_equal(other, before_d if t.space is Space.LMEM else before_l)


def test_gdma_load_store_round_trip_and_lane_shift() -> None:
    m = _machine(EDGE)
    x = np.random.default_rng(3).integers(-128, 128, (2, 19, 5, 7)).astype(np.int8)
    src = Tensor.ddr(1024, x.shape, "int8")
    m.write(src, x)
    a = _lmem(EDGE, 0, x.shape, "int8")
    b = _lmem(EDGE, 8192, x.shape, "int8", lane=5)  # lane-aware LMEM -> LMEM move
    out = Tensor.ddr(65536, x.shape, "int8")
    run(m, [Move(id=1, src=src, dst=a), Move(id=2, src=a, dst=b), Move(id=3, src=b, dst=out)])
    np.testing.assert_array_equal(m.read(out), x)
    # channel 0 of b is on lane 5, channel 3 on lane 0 of the next group
    plane = EDGE.plane_bytes(5, 7, "int8")
    np.testing.assert_array_equal(m.lmem[5, 8192 : 8192 + 35].view(np.int8).reshape(5, 7), x[0, 0])
    np.testing.assert_array_equal(
        m.lmem[0, 8192 + plane : 8192 + plane + 35].view(np.int8).reshape(5, 7), x[0, 3]
    )


def test_gdma_strided_slices_match_numpy() -> None:
    m = _machine(LNPU, ddr=1 << 22)
    x = np.random.default_rng(4).standard_normal((2, 70, 12, 10)).astype(np.float32)
    whole = Tensor.ddr(4096, x.shape, "f32")
    m.write(whole, x)
    n, c, h, w = x.shape
    strides = (c * h * w, h * w, w, 1)
    # An H slice with a halo (rows 3..8), a C slice (channels 60..69: lanes 60..63 then 0..5), a W step.
    cases = [
        ((slice(None), slice(None), slice(3, 9), slice(None)), 3 * w, (n, c, 6, w), strides),
        ((slice(None), slice(60, 70), slice(None), slice(None)), 60 * h * w, (n, 10, h, w), strides),
        (
            (slice(1, 2), slice(None), slice(None), slice(0, 10, 2)),
            c * h * w,
            (1, c, h, 5),
            (*strides[:3], 2),
        ),
    ]
    cmds = []
    for i, (_, offset, shape, st_) in enumerate(cases):
        src = Tensor(Space.DDR, 4096 + offset * 4, shape, st_, "f32")
        dst = _lmem(LNPU, 0x10000 * i, shape, "f32", lane=60 if i == 1 else 0)
        back = Tensor.ddr(1 << 21 | (i << 19), shape, "f32")
        cmds += [Move(id=2 * i + 1, src=src, dst=dst), Move(id=2 * i + 2, src=dst, dst=back)]
    run(m, cmds)
    for i, (index, _, shape, _) in enumerate(cases):
        np.testing.assert_array_equal(m.read(Tensor.ddr(1 << 21 | (i << 19), shape, "f32")), x[index])


def test_view_errors() -> None:
    m = Machine(EDGE, 4096)
    cases = [
        (Tensor.ddr(4000, (1, 1, 1, 100), "int8"), "ends at byte 4100, past the 4096 bytes of DDR"),
        (Tensor.ddr(2, (1, 1, 1, 1), "int32"), "not aligned"),
        (_lmem(EDGE, 65500, (1, 8, 1, 64), "int8"), "past the 65536 bytes of LMEM"),
        (Tensor(Space.LMEM, 0, (1, 1, 1, 1), (1, 1, 1, 1), "int8", lane=8), "starts at lane 8"),
    ]
    for t, msg in cases:
        with pytest.raises(LaminaError, match=msg):
            m.read(t)
    with pytest.raises(LaminaError, match="cannot store"):
        m.write(Tensor.ddr(0, (1, 1, 1, 2), "int8"), np.zeros((1, 1, 1, 2), np.int16))
    with pytest.raises(LaminaError, match="DDR of"):
        Machine(EDGE, EDGE.ddr_bytes + 1)


# -- TIU dispatch -----------------------------------------------------------------------------------------


def _add_i8(cmd: TiuCommand, ins: Mapping[str, np.ndarray]) -> np.ndarray:
    """A trivial saturating int8 add (the registration test's kernel; tiu.py has the real ones)."""
    return np.clip(ins["a"].astype(np.int16) + ins["b"], -128, 127).astype(np.int8)


def _matmul(cmd: TiuCommand, ins: Mapping[str, np.ndarray]) -> np.ndarray:
    left, right = ins["left"][:, :, 0, :], ins["right"][:, :, 0, :]  # (B, M, K), (B, K, N)
    return np.matmul(left, right)[:, :, None, :].astype(np.float32)


def _matmul_work(cmd: TiuCommand) -> int:
    assert isinstance(cmd, MatMul)
    b, m, _, k = cmd.left.shape
    return b * m * k * cmd.right.shape[3]


def test_registration_and_dispatch() -> None:
    table = TiuTable()
    table.register(Eltwise, _add_i8)
    assert Eltwise in table and Pool not in table
    with pytest.raises(ValueError, match="already registered"):
        table.register(Eltwise, _add_i8)
    table.register(Eltwise, _add_i8, replace=True)
    with pytest.raises(TypeError, match="not a TIU command class"):
        table.register(Move, _add_i8)  # type: ignore[arg-type]

    m = _machine(EDGE)
    shape = (1, 11, 3, 4)
    x = np.random.default_rng(5).integers(-128, 128, shape).astype(np.int8)
    y = np.random.default_rng(6).integers(-128, 128, shape).astype(np.int8)
    dx, dy, dz = (Tensor.ddr(i * 256, shape, "int8") for i in range(3))
    m.write(dx, x)
    m.write(dy, y)
    a, b, z = (_lmem(EDGE, i * EDGE.bank_bytes, shape, "int8") for i in range(3))  # one bank each
    cmds = [
        Move(id=1, src=dx, dst=a),
        Move(id=2, src=dy, dst=b),
        Eltwise(id=1, wait=2, a=a, b=b, output=z),
        Move(id=3, wait=1, src=z, dst=dz),
    ]
    res = run(m, cmds, table)
    np.testing.assert_array_equal(m.read(dz), np.clip(x.astype(int) + y, -128, 127))
    tiu = [r for r in res.records if r.engine == "tiu"]
    assert tiu[0].end - tiu[0].start == EDGE.tiu_cycles("elementwise", "int8", x.size)
    assert tiu[0].macs == 0 and not tiu[0].bank_conflict

    with pytest.raises(LaminaError, match=r"command 0 \(Pool\): the simulator has no TIU kernel for Pool"):
        run(m, [Pool(id=1, input=a, output=z)], table)
    with pytest.raises(LaminaError, match="operand 'a' is in DDR"):
        run(m, [Eltwise(id=1, a=dx, b=b, output=z)], table)
    # the default table holds kernels.py's kernels (test_npu_kernels.py); it is a TiuTable too
    assert isinstance(TIU_TABLE, TiuTable)


def test_kernel_result_must_match_the_output() -> None:
    table = TiuTable()
    table.register(Eltwise, lambda cmd, ins: ins["a"].astype(np.int32))
    t = _lmem(EDGE, 0, (1, 1, 1, 4), "int8")
    with pytest.raises(LaminaError, match="cannot store a"):
        run(_machine(), [Eltwise(id=1, a=t, b=t, output=t)], table)


# -- the cycle model --------------------------------------------------------------------------------------


def _load(i: int, nbytes: int, wait: int = 0, chip: Chip = EDGE) -> Move:
    shape = (1, 1, 1, nbytes)
    return Move(id=i, wait=wait, src=Tensor.ddr(0, shape, "int8"), dst=_lmem(chip, 0, shape, "int8"))


def _lmem_move(i: int, nbytes: int, wait: int = 0) -> Move:
    shape = (1, 1, 1, nbytes)
    return Move(id=i, wait=wait, src=_lmem(EDGE, 0, shape, "int8"), dst=_lmem(EDGE, 4096, shape, "int8"))


def _add(i: int, elements: int, wait: int = 0) -> Eltwise:
    t = _lmem(EDGE, 8192, (1, 1, 1, elements), "int8")
    return Eltwise(id=i, wait=wait, a=t, b=t, output=t)


def _table() -> TiuTable:
    table = TiuTable()
    table.register(Eltwise, _add_i8)
    return table


def test_engines_overlap_without_waits() -> None:
    """GDMA moves are pipelined: the engine issues the next when a transfer ends; each move's data is
    there the latency after its issue plus its transfer. The record is the transfer."""
    lat = EDGE.gdma_latency_cycles
    x = EDGE.gdma_transfer_cycles(1024, ddr=True)  # 1000 bytes are 16 bursts of 64
    t = EDGE.tiu_cycles("elementwise", "int8", 2000)
    res = run(_machine(), [_load(1, 1000), _add(1, 2000), _load(2, 1000)], _table())
    assert [(r.engine, r.start, r.end) for r in sorted(res.records, key=lambda r: r.index)] == [
        ("gdma", lat, lat + x),
        ("tiu", 0, t),
        ("gdma", lat + x, lat + 2 * x),
    ]
    assert res.total_cycles == max(lat + 2 * x, t)
    assert res.busy == {"tiu": t, "gdma": 2 * x}
    assert [r.ddr_bytes for r in res.records if r.engine == "gdma"] == [1024, 1024]
    assert EDGE.gdma_transfer_cycles(1000, ddr=False) < x
    lm = run(_machine(), [_lmem_move(1, 1000)])
    assert lm.total_cycles == EDGE.gdma_cycles(1000, ddr=False) and lm.records[0].ddr_bytes == 0


def test_strided_and_broadcast_moves_cost_whole_bursts() -> None:
    """DDR moves in bursts: a column of a matrix costs a burst per element; a broadcast (stride 0)
    reads its source once."""
    from lamina.targets.npu.simulator import ddr_burst_bytes

    burst = EDGE.ddr_burst_bytes
    row = Tensor(Space.DDR, 0, (1, 1, 1, 256), (256, 256, 256, 1), "int8")
    col = Tensor(Space.DDR, 0, (1, 1, 256, 1), (256, 256, 256, 1), "int8")
    bcast = Tensor(Space.DDR, 0, (1, 4, 1, 256), (256, 0, 256, 1), "int8")
    assert ddr_burst_bytes(EDGE, row) == 256
    assert ddr_burst_bytes(EDGE, col) == 256 * burst
    assert ddr_burst_bytes(EDGE, bcast) == 256


def test_waits_and_the_three_stage_pipeline() -> None:
    """load i+1 / compute i / store i-1: with waits, the pipeline's length is what the formula says."""
    lat = EDGE.gdma_latency_cycles
    x = EDGE.gdma_transfer_cycles(512, ddr=True)
    t = EDGE.tiu_cycles("elementwise", "int8", 512 * 8)
    cmds = [
        _load(1, 512),
        _load(2, 512),
        _add(1, 512 * 8, wait=1),
        _load(3, 512, wait=1),  # store of slice 0 after compute 0 (a DDR move either way)
        _add(2, 512 * 8, wait=2),
        _load(4, 512, wait=2),
    ]
    res = run(_machine(), cmds, _table())
    by_index = {r.index: r for r in res.records}
    assert by_index[2].start == lat + x  # compute 0 waits for load 0's data
    assert by_index[4].start == max(by_index[2].end, lat + 2 * x)  # compute 1: load 1 there, the TIU free
    # store 0 is issued after compute 0 (and load 1's issue); its transfer follows the latency
    assert by_index[3].start == max(2 * x, by_index[2].end) + lat
    assert by_index[5].start == max(by_index[3].end - lat, by_index[4].end) + lat
    assert res.total_cycles == by_index[5].end < 4 * (lat + x) + 2 * t  # the pipeline overlaps


def test_execution_follows_start_cycles_not_list_order() -> None:
    """A TIU command listed before the load it waits for still reads the loaded data."""
    m = _machine()
    x = np.arange(16, dtype=np.int8).reshape(1, 1, 1, 16)
    src, out = Tensor.ddr(0, x.shape, "int8"), Tensor.ddr(512, x.shape, "int8")
    a, z = _lmem(EDGE, 0, x.shape, "int8"), _lmem(EDGE, 1024, x.shape, "int8")
    m.write(src, x)
    cmds = [
        Eltwise(id=1, wait=1, a=a, b=a, output=z),
        Move(id=1, src=src, dst=a),
        Move(id=2, wait=1, src=z, dst=out),
    ]
    res = run(m, cmds, _table())
    np.testing.assert_array_equal(m.read(out), 2 * x)
    assert [r.index for r in res.records] == [1, 0, 2]


def test_bank_conflicts_halve_the_rate() -> None:
    """Two operands in one bank: the operations take twice as long; the same tensor twice does not."""
    table = _table()
    shape = (1, 8, 1, 1024)
    bank = EDGE.bank_bytes
    apart = [_lmem(EDGE, i * bank, shape, "int8") for i in range(3)]
    clash = [
        _lmem(EDGE, 0, shape, "int8"),
        _lmem(EDGE, 2048, shape, "int8"),
        _lmem(EDGE, 2 * bank, shape, "int8"),
    ]
    spill = _lmem(EDGE, bank - 512, shape, "int8")  # straddles banks 0 and 1
    base = EDGE.tiu_cycles("elementwise", "int8", 8 * 1024)
    slow = 2 * base - EDGE.tiu_latency_cycles
    cases = [
        (apart, base, False),
        ([apart[0], apart[0], apart[0]], base, False),  # a + a, in place
        (clash, slow, True),
        ([spill, apart[1], apart[2]], slow, True),
    ]
    for (a, b, z), cycles, conflict in cases:
        (r,) = run(_machine(), [Eltwise(id=1, a=a, b=b, output=z)], table).records
        assert (r.end - r.start, r.bank_conflict) == (cycles, conflict)


def test_bad_programs() -> None:
    table = _table()
    f32 = _lmem(EDGE, 0, (1, 1, 1, 8), "f32")
    table.register(Eltwise, lambda cmd, ins: ins["a"], replace=True)
    with pytest.raises(LaminaError, match=r"command 0 \(Eltwise\): chip lnpu-edge does not compute in f32"):
        run(_machine(), [Eltwise(id=1, a=f32, b=f32, output=f32)], table)
    with pytest.raises(LaminaError, match="deadlock"):
        run(_machine(), [_add(1, 8, wait=1), _load(1, 8, wait=1)], table)
    with pytest.raises(LaminaError, match=r"command 1 \(Move\): id 3, expected 2"):
        run(_machine(), [_load(1, 8), _load(3, 8)], table)
    with pytest.raises(LaminaError, match="waits for gdma id 2, which does not exist"):
        run(_machine(), [_load(1, 8), _add(1, 8, wait=2)], table)


def test_macs_and_utilization() -> None:
    table = TiuTable()
    table.register(MatMul, _matmul, _matmul_work)
    m = Machine(LNPU, 1 << 20)
    b, mm, k, n = 2, 64, 256, 64
    left = _lmem(LNPU, 0, (b, mm, 1, k), "f32")
    right = _lmem(LNPU, 0x8000, (b, k, 1, n), "f32")
    out = _lmem(LNPU, 0x10000, (b, mm, 1, n), "f32")
    rng = np.random.default_rng(7)
    lv, rv = (
        rng.standard_normal((b, mm, 1, k)).astype(np.float32),
        rng.standard_normal((b, k, 1, n)).astype(np.float32),
    )
    m.write(left, lv)
    m.write(right, rv)
    res = run(m, [MatMul(id=1, left=left, right=right, output=out)], table)
    np.testing.assert_allclose(
        m.read(out)[:, :, 0], np.matmul(lv[:, :, 0], rv[:, :, 0]), rtol=1e-5, atol=1e-5
    )
    macs = b * mm * k * n
    assert res.records[0].macs == macs
    cycles = LNPU.tiu_latency_cycles + math.ceil(macs / 1024)
    assert res.total_cycles == cycles
    assert mac_utilization(res, LNPU) == pytest.approx(macs / (16384 * cycles))


def test_cast_per_channel_scales_travel_as_f64_bits() -> None:
    """Cast's per-channel quant tensor holds each f64 scale as two int32 words (docs/npu-isa.md):
    loaded to LMEM and read back by a kernel, the scales are bit-identical."""
    c = 13
    scales = np.random.default_rng(9).uniform(1e-4, 1.0, c)
    zps = np.arange(c, dtype=np.int32) - 6
    words = np.concatenate([scales.view(np.int32).reshape(c, 2), zps[:, None]], axis=1)  # (C, 3)
    quant = words.reshape(1, c, 1, 3)
    m = _machine()
    src = Tensor.ddr(0, quant.shape, "int32")
    m.write(src, quant)
    q = _lmem(EDGE, 0, quant.shape, "int32")
    x, y = (
        _lmem(EDGE, EDGE.bank_bytes, (1, c, 2, 2), "bf16"),
        _lmem(EDGE, 2 * EDGE.bank_bytes, (1, c, 2, 2), "int8"),
    )
    seen: dict[str, np.ndarray] = {}

    def cast(cmd: TiuCommand, ins: Mapping[str, np.ndarray]) -> np.ndarray:
        p = np.ascontiguousarray(ins["quant"][0, :, 0])
        seen["scale"], seen["zp"] = p[:, :2].copy().view(np.float64)[:, 0], p[:, 2]
        return np.zeros(cmd.output.shape, np.int8)

    table = TiuTable()
    table.register(Cast, cast)
    run(m, [Move(id=1, src=src, dst=q), Cast(id=1, wait=1, input=x, quant=q, output=y)], table)
    np.testing.assert_array_equal(seen["scale"].view(np.uint64), scales.view(np.uint64))
    np.testing.assert_array_equal(seen["zp"], zps)

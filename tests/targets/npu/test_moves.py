"""Data movement as GDMA moves: the moves found from an op's reference rebuild its result exactly
(hypothesis over shapes), within four dims each, and ``npu.Copy`` executes them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lamina.targets.npu.moves import MAX_MOVES, index_map, moves_of


def _check(run: Any, shapes: list[tuple[int, ...]]) -> list[Any]:
    maps = index_map(run, shapes)
    assert maps is not None
    moves = moves_of(maps[0], shapes)
    assert moves is not None, "no move list found"
    assert len(moves) <= MAX_MOVES
    for _, _, shape, ss, _, ds in moves:
        assert len(shape) == len(ss) == len(ds) == 4
    # execute the moves on real data, as npu.Copy does
    rng = np.random.default_rng(0)
    xs = [rng.integers(-100, 100, s).astype(np.int8) for s in shapes]
    want = np.asarray(run([x.astype(np.float64) for x in xs])[0]).astype(np.int8)
    out = np.empty(want.size, np.int8)
    flats = [x.reshape(-1) for x in xs]
    for i, so, shape, ss, do, ds in moves:
        sv = np.lib.stride_tricks.as_strided(flats[i][so:], shape, ss, writeable=False)
        dv = np.lib.stride_tricks.as_strided(out[do:], shape, ds)
        dv[...] = sv
    np.testing.assert_array_equal(out.reshape(want.shape), want)
    return moves


shape4 = st.tuples(*(st.integers(1, 5) for _ in range(4)))


@settings(max_examples=40, deadline=None)
@given(shape4, st.permutations([0, 1, 2, 3]))
def test_permute_is_one_strided_move(s: tuple[int, ...], perm: list[int]) -> None:
    moves = _check(lambda a: [np.transpose(a[0], perm)], [s])
    assert len(moves) == 1


@settings(max_examples=40, deadline=None)
@given(shape4, st.data())
def test_slices_with_steps(s: tuple[int, ...], data: Any) -> None:
    sl = []
    for d in s:
        a = data.draw(st.integers(0, d - 1))
        b = data.draw(st.integers(a + 1, d))
        step = data.draw(st.integers(1, 3))
        sl.append(slice(a, b, step))
    moves = _check(lambda a: [a[0][tuple(sl)]], [s])
    assert len(moves) == 1


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 3), st.lists(st.integers(1, 4), min_size=1, max_size=4), shape4)
def test_concat_is_one_move_per_input(axis: int, sizes: list[int], s: tuple[int, ...]) -> None:
    shapes = [tuple(k if i == axis else d for i, d in enumerate(s)) for k in sizes]
    moves = _check(lambda a: [np.concatenate(a, axis=axis)], shapes)
    assert len(moves) <= len(shapes) * max(1, int(np.prod(s[:axis])))


def test_upsample_tile_broadcast_depth_to_space() -> None:
    x = (1, 3, 4, 5)
    up = _check(lambda a: [np.repeat(np.repeat(a[0], 2, axis=2), 2, axis=3)], [x])
    assert len(up) == 1  # a stride-0 view: (c*h, 2, w, 2)
    assert len(_check(lambda a: [np.tile(a[0], (1, 2, 1, 1))], [x])) == 1
    assert len(_check(lambda a: [np.broadcast_to(a[0], (2, 3, 4, 5))], [(1, 3, 1, 5)])) == 1

    def d2s(a: list[np.ndarray]) -> list[np.ndarray]:
        n, c, h, w = a[0].shape
        return [
            a[0].reshape(n, 2, 2, c // 4, h, w).transpose(0, 3, 4, 1, 5, 2).reshape(n, c // 4, h * 2, w * 2)
        ]

    assert len(_check(d2s, [(1, 8, 3, 3)])) == 1


def test_rank_five_is_unrolled_to_four_dims() -> None:
    moves = _check(lambda a: [np.transpose(a[0], (4, 3, 2, 1, 0))], [(2, 3, 2, 3, 2)])
    assert 1 < len(moves) <= 6


def test_what_is_not_a_movement_has_no_moves() -> None:
    assert index_map(lambda a: [a[0] * 0.5], [(2, 3)]) is None  # not indices
    # GDMA strides are not negative: a reversal is not a short list of moves, nor a random gather
    m = index_map(lambda a: [a[0][::-1, ::-1]], [(3, 7)])
    assert m is not None and moves_of(m[0], [(3, 7)]) is None
    perm = np.random.default_rng(1).permutation(64)
    m = index_map(lambda a: [a[0].reshape(-1)[perm]], [(64,)])
    assert m is not None and moves_of(m[0], [(64,)]) is None


@pytest.mark.parametrize("n", [1, 3])
def test_copy_op_executes_its_moves(n: int) -> None:
    import lamina.dialects
    from lamina.execution import Interpreter
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.ir.verifier import verify

    # concat of n (1x2) inputs along axis 0 into (n x 2)
    moves = []
    for i in range(n):
        moves += [i, 0, 1, 1, 1, 2, 0, 0, 0, 1, 2 * i, 0, 0, 0, 1]
    args = ", ".join(f"%a{i}: tensor<1x2xi8>" for i in range(n))
    ops = ", ".join(f"%a{i}" for i in range(n))
    types = ", ".join("tensor<1x2xi8>" for _ in range(n))
    text = f"""
func.func @main({args}) -> tensor<{n}x2xi8> {{
  %0 = "npu.Copy"({ops}) <{{moves = array<i64: {", ".join(map(str, moves))}>}}> : ({types}) -> tensor<{n}x2xi8>
  return %0 : tensor<{n}x2xi8>
}}"""
    import lamina.targets  # noqa: F401

    ctx = Context()
    m = parse_module(text, ctx)
    assert m is not None
    verify(m)
    xs = {f"input_{i}": np.array([[i, -i]], np.int8) for i in range(n)}
    out = Interpreter(m).run(xs)
    np.testing.assert_array_equal(next(iter(out.values())), np.array([[i, -i] for i in range(n)], np.int8))

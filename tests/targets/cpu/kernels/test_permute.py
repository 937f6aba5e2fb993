"""The copying Permute template (lamina/targets/cpu/kernels/permute.py) against ``tpu.Permute``'s
``execute``, bit for bit: random shapes and permutations of f32, bf16 and int8 tensors (the
permutations that move single elements are refused, for ``generic.gather``), on 1 and 3 parts, on
the host and an AVX2 ``Isa(32)``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
from tpu_cases import arr, build, q8, t

from lamina.targets.cpu.jit import host_spec, run_kernel
from lamina.targets.cpu.kernels import candidates
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.permute import MIN_RUN_BYTES, PermuteCopy

TEMPLATE = PermuteCopy()
ELEMS = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "i8": np.int8}


def permute(shape: tuple[int, ...], perm: list[int], et: str) -> Any:
    out = tuple(shape[p] for p in perm)
    ty = q8(True, 0.05) if et == "i8" else et
    return build("tpu.Permute", [t(shape, ty)], [t(out, ty)], arr("order", perm))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_permute_copy_is_execute_bit_for_bit(data: Any) -> None:
    rank = data.draw(st.integers(2, 5))
    shape = (*(data.draw(st.integers(1, 6)) for _ in range(rank - 1)), data.draw(st.integers(1, 40)))
    if data.draw(st.booleans()):  # the last axis stays last (a head split / merge)
        perm = [*data.draw(st.permutations(list(range(rank - 1)))), rank - 1]
    else:
        perm = list(data.draw(st.permutations(list(range(rank)))))
    et = data.draw(st.sampled_from(sorted(ELEMS)))
    o = permute(shape, list(perm), et)
    isa = data.draw(st.sampled_from([None, Isa(32, frozenset({"avx2", "fma"}))]))
    if not TEMPLATE.matches(o, isa or host_spec().isa):
        return  # an element-moving permutation (or short runs): the gather's (test_generic.py)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    x = (rng.standard_normal(shape) * 50).astype(np.float32)
    x = x.astype(np.int8) if et == "i8" else x.astype(ELEMS[et])
    want = np.asarray(o.execute([x])[0])
    got = np.zeros(want.shape, x.dtype)
    run_kernel(
        TEMPLATE,
        o,
        {("in", 0): np.ascontiguousarray(x), ("out", 0): got},
        isa=isa,
        nparts=data.draw(st.sampled_from([1, 3])),
    )
    assert got.tobytes() == np.ascontiguousarray(want.astype(x.dtype)).tobytes()


def test_permute_copy_takes_the_head_split_and_refuses_element_moves() -> None:
    isa = host_spec().isa
    heads = permute((1, 64, 12, 32), [0, 2, 1, 3], "f32")  # MiniLM's head split
    assert candidates(heads, isa)[0].name == "permute_copy"
    assert candidates(permute((4, 64), [1, 0], "f32"), isa)[0].name == "generic.gather"
    short = permute((3, 5, MIN_RUN_BYTES // 4 - 1), [1, 0, 2], "f32")
    assert not TEMPLATE.matches(short, isa)

"""The im2col INT8 conv of few input channels (``lamina/targets/cpu/kernels/conv_int8_stem.py``,
``int8-conv-im2col``): compiled for the host, AVX2 width without VNNI, 16-byte vectors (and the
other ISAs of ``test_gemm_int8``) and called for every part of ``nparts``, it equals the ``tpu``
op's ``execute`` **bit for bit**, with 64 canary bytes around the output — over random shapes,
strides, pads, dilations, 1-d and 2-d, input modes, relu / relu limit, per-channel and per-tensor
requant, extreme values, a fused ``tpu.Lut``. Hypothesis examples are derandomized."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "npu"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from int8_harness import Compiled
from test_gemm_int8 import HOST, ISA_IDS, ISAS, _act, _inputs, check, conv_op, draw_conv, with_lut

from lamina.targets.cpu.kernels import select
from lamina.targets.cpu.kernels.abi import Isa
from lamina.targets.cpu.kernels.conv_int8_stem import Int8ConvIm2col, col_order
from lamina.targets.cpu.kernels.gemm_int8 import Int8Conv, conv_geom

SETTINGS = settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))


@st.composite
def stem_cases(draw: Any) -> tuple[Any, np.ndarray]:
    """``conv_cases``' draws over the stem's ranges: few input channels, kernels up to 7, images
    up to 40 — the convs the im2col template takes."""
    nd = draw(st.sampled_from([2, 2, 2, 1]))
    cin = draw(st.sampled_from([1, 2, 3, 3, 5, 6]))
    cout = draw(st.integers(1, 40))
    k = tuple(draw(st.integers(1, 7)) for _ in range(nd))
    d = tuple(draw(st.integers(1, 2)) for _ in range(nd))
    s = tuple(draw(st.integers(1, 3)) for _ in range(nd))
    hw = tuple(draw(st.integers(1, 40)) for _ in range(nd))
    o, x = draw_conv(draw, nd, 1, cin, cout, k, d, s, hw)
    assume(Int8ConvIm2col().matches(o, HOST))
    return o, x


@SETTINGS
@given(case=stem_cases())
def test_im2col_bit_exact(case: tuple[Any, np.ndarray]) -> None:
    check(Int8ConvIm2col(), *case, HOST)


@pytest.mark.parametrize("isa", ISAS[1:], ids=ISA_IDS[1:])
@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=stem_cases())
def test_im2col_narrower_isa(isa: Isa, case: tuple[Any, np.ndarray]) -> None:
    check(Int8ConvIm2col(), *case, isa, nparts=(1, 3))


@pytest.mark.parametrize("isa", ISAS[:3], ids=ISA_IDS[:3])
def test_stems(isa: Isa) -> None:
    """ResNet's 7x7/2 and MobileNetV2's 3x3/2 over 3 channels (smaller images), several row blocks."""
    rng = np.random.default_rng(3)
    for cin, hw, cout, k, s, p, relu in ((3, 64, 64, 7, 2, 3, "relu"), (3, 48, 32, 3, 2, 1, "limit")):
        o = conv_op(
            rng, 1, cin, (hw, hw), cout, (k, k), (s, s), (1, 1), [p] * 4, 1, "asym", relu, True, "small"
        )
        check(Int8ConvIm2col(), o, _act(rng, (1, cin, hw, hw), True, "rand"), isa, nparts=(1, 2, 5))


def test_selected_where_it_pays() -> None:
    """The compiler takes it for the 3-channel stems, and keeps int8-conv where the channels fill the
    groups of four (or a depthwise / grouped conv)."""
    rng = np.random.default_rng(0)
    stem = conv_op(rng, 1, 3, (32, 32), 64, (7, 7), (2, 2), (1, 1), [3] * 4, 1, "u8", "relu", True, "small")
    assert select(stem, HOST).name == "int8-conv-im2col"
    for cin, g in ((16, 1), (8, 1), (6, 2)):
        o = conv_op(
            rng, 1, cin, (16, 16), 16, (3, 3), (1, 1), (1, 1), [1] * 4, g, "u8", "relu", True, "small"
        )
        assert not Int8ConvIm2col().matches(o, HOST)
    geo = conv_geom(stem)
    assert geo is not None
    ks = col_order(geo)
    assert len(ks) == 147 and sorted((c, t) for c, t, *_ in ks) == [
        (c, t) for c in range(3) for t in range(49)
    ]
    # 37 groups of four where int8-conv dots 49 (the channel padded to four per tap)
    assert Int8ConvIm2col.k4(geo) == 37 and Int8Conv().matches(stem, HOST)


@pytest.mark.parametrize("isa", ISAS[:2], ids=ISA_IDS[:2])
def test_fused_lut(isa: Isa) -> None:
    rng = np.random.default_rng(13)
    for out_mode, lut_signed in (("none", True), ("relu", False)):
        o = conv_op(
            rng, 1, 3, (21, 21), 24, (5, 5), (2, 2), (1, 1), [2] * 4, 1, "sym", out_mode, True, "small"
        )
        x = _act(rng, (1, 3, 21, 21), True, "rand")
        prod, lut = with_lut(o, rng, lut_signed)
        tpl = Int8ConvIm2col()
        assert tpl.matches(prod, isa)
        ref = lut.execute([prod.execute(_inputs(prod, x))[0]])[0]
        c = Compiled(tpl, prod, isa)
        assert ("weight", "lut") in c.plan.buffers
        for n in (1, 2):
            np.testing.assert_array_equal(c([x], ref.shape, ref.dtype, n), ref)


# ---- a fused tpu.MaxPool (ResNet's stem + 3x3/2 pool) ------------------------------------------------


def with_maxpool(o: Any, k: int, s: int, p: int, ceil: bool = False) -> tuple[Any, Any]:
    """``o``'s module with a ``tpu.MaxPool`` after ``o``, ``cpu.fused = 1`` set on the reparsed
    ``o`` as the compiler sets it (after checking the template accepts it): (conv, pool)."""
    from lamina.ir.attributes import IntegerAttr
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.ir.printer import print_operation
    from lamina.ir.types import i64

    m = o
    while m.parent_op() is not None:
        m = m.parent_op()
    text = print_operation(m)
    ret = next(line for line in text.splitlines() if line.strip().startswith("return "))
    name, ty = ret.strip()[len("return ") :].split(" : ")
    shape = [int(d) for d in ty[len("tensor<") :].split("x!quant", 1)[0].split("x")]
    elem = ty[len("tensor<") :].split("x", len(shape))[-1][:-1]
    h, w = shape[2:]
    rnd = (lambda a: -(-a // s)) if ceil else (lambda a: a // s)
    oh, ow = rnd(h + 2 * p - k) + 1, rnd(w + 2 * p - k) + 1
    ty2 = f"tensor<{shape[0]}x{shape[1]}x{oh}x{ow}x{elem}>"
    attrs = f"kernel_shape = array<i64: {k}, {k}>, pads = array<i64: {p}, {p}, {p}, {p}>, strides = array<i64: {s}, {s}>"
    if ceil:
        attrs += ", ceil_mode = true"
    pool = f'    %pool:2 = "tpu.MaxPool"({name}) <{{{attrs}}}> : ({ty}) -> ({ty2}, none)\n'
    text = text.replace(ret, pool + f"    return %pool#0 : {ty2}").replace(f"-> {ty} {{", f"-> {ty2} {{")
    mod = parse_module(text, Context())
    assert mod is not None
    conv = next(x for x in mod.walk_ops() if x.name == "tpu.Conv")  # type: ignore[attr-defined]
    pool_op = next(x for x in mod.walk_ops() if x.name == "tpu.MaxPool")  # type: ignore[attr-defined]
    assert Int8ConvIm2col().fuses(conv, pool_op)
    conv.set_attr("cpu.fused", IntegerAttr(1, i64))
    return conv, pool_op


@pytest.mark.parametrize("isa", ISAS[:3], ids=ISA_IDS[:3])
@pytest.mark.parametrize(
    "hw,k,s,p,pk,ps,pp,ceil,mode,relu",
    [
        ((64, 64), 7, 2, 3, 3, 2, 1, False, "asym", "relu"),  # ResNet's stem, several row blocks
        ((50, 64), 7, 2, 3, 3, 2, 1, False, "u8", "none"),  # signed result: the signed max
        ((32, 32), 3, 1, 1, 2, 2, 0, False, "sym", "relu"),
        ((100, 64), 7, 2, 3, 3, 1, 1, False, "sym", "relu"),  # a pending window over a whole ring
        ((40, 64), 5, 2, 2, 3, 1, 1, False, "asym+", "limit"),
        ((35, 32), 3, 1, 1, 3, 2, 0, True, "u8", "relu"),  # ceil mode: windows past the end
        ((18, 16), 5, 1, 2, 2, 3, 1, False, "sym", "none"),
    ],
)
def test_fused_maxpool(
    isa: Isa,
    hw: tuple[int, int],
    k: int,
    s: int,
    p: int,
    pk: int,
    ps: int,
    pp: int,
    ceil: bool,
    mode: str,
    relu: str,
) -> None:
    """The kernel writes ``MaxPool(conv(x))`` (the conv rows in a ring in the scratch, never in the
    output), bit for bit, for 1-4 parts (parts split the pool rows)."""
    rng = np.random.default_rng(hw[0] * k + pk)
    o = conv_op(rng, 1, 3, hw, 16, (k, k), (s, s), (1, 1), [p] * 4, 1, mode, relu, True, "small")
    conv, pool = with_maxpool(o, pk, ps, pp, ceil)
    assert conv.results[0].type.shape[3] % 16 == 0
    x = _act(rng, (1, 3, *hw), mode != "u8", "rand")
    ref = pool.execute([conv.execute(_inputs(conv, x))[0]])[0]
    c = Compiled(Int8ConvIm2col(), conv, isa)
    for n in (1, 2, 3, 4):
        np.testing.assert_array_equal(c([x], ref.shape, ref.dtype, n), ref)


def test_maxpool_fusion_refused() -> None:
    """Conv rows not a whole number of 16-lane registers, or a dilated pool: no fusion."""
    rng = np.random.default_rng(5)
    o = conv_op(rng, 1, 3, (30, 30), 16, (7, 7), (2, 2), (1, 1), [3] * 4, 1, "u8", "relu", True, "small")
    with pytest.raises(AssertionError):
        with_maxpool(o, 3, 2, 1)  # 15 columns

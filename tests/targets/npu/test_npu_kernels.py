"""The TIU records' kernels (lamina/targets/npu/kernels.py; named test_npu_kernels.py, as
tests/execution/kernels has a test_kernels.py): the simulator's default table holds one for every
TIU command class; a record that makes no sense is one LaminaError naming the command (never a
numpy exception) — on hand-made bad records, random records, and valid records with one field
changed; the work counts."""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tpu_cases import Case, cases

from lamina.support.errors import LaminaError
from lamina.targets.npu import isa, kernels, oprun, records
from lamina.targets.npu.arch import DTYPES, load_chip
from lamina.targets.npu.simulator import TIU_TABLE, Machine, run

EDGE = load_chip("lnpu-edge")
LNPU = load_chip("lnpu")


def _t(shape: tuple[int, int, int, int], dtype: str) -> isa.Tensor:
    return isa.Tensor(isa.Space.LMEM, 0, shape, (1, 1, 1, 1), dtype)


def _z(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    return np.zeros(shape, DTYPES[dtype])


def test_the_default_table_holds_every_tiu_command() -> None:
    for cls in isa.COMMANDS.values():
        if issubclass(cls, isa.TiuCommand):
            assert cls in TIU_TABLE, cls.__name__
            assert TIU_TABLE.lookup(cls).execute is kernels.KERNELS[cls][0]


def test_work_counts() -> None:
    x = _t((2, 8, 6, 6), "int8")
    conv = isa.Conv(input=x, weight=_t((1, 4, 8, 9), "int8"), output=_t((2, 4, 6, 6), "int8"), kh=3, kw=3)
    assert kernels.work(conv) == 2 * 4 * 6 * 6 * 8 * 9
    dw = isa.Depthwise(input=x, weight=_t((1, 8, 1, 9), "int8"), output=x, kh=3, kw=3, groups=8)
    assert kernels.work(dw) == x.elements * 9
    mm = isa.MatMul(
        left=_t((2, 5, 1, 7), "f32"), right=_t((1, 7, 1, 3), "f32"), output=_t((2, 5, 1, 3), "f32")
    )
    assert kernels.work(mm) == 2 * 5 * 3 * 7
    pool = isa.Pool(input=x, output=_t((2, 8, 3, 3), "int8"), kh=2, kw=2)
    assert kernels.work(pool) == 2 * 8 * 9 * 4
    red = isa.Reduce(input=x, output=_t((2, 8, 1, 1), "int8"), axes=0b1100)
    assert kernels.work(red) == x.elements
    ln = isa.LayerNorm(input=x, gamma=x, output=x)
    assert kernels.work(ln) == x.elements * 6
    att = isa.Attention(query=_t((1, 2, 3, 4), "f32"), key=_t((1, 2, 5, 4), "f32"), value=_t((1, 2, 5, 6), "f32"),
                        output=_t((1, 2, 3, 6), "f32"))  # fmt: skip
    assert kernels.work(att) == 1 * 2 * 3 * 5 * (4 + 6)
    assert kernels.work(isa.Softmax(input=x, output=x)) == 5 * x.elements
    with pytest.raises(LaminaError, match="no TIU kernel for Move"):
        kernels.work(isa.Move(src=x, dst=x))  # type: ignore[arg-type]


def _bad(cmd: isa.TiuCommand, ins: dict[str, np.ndarray], why: str) -> None:
    with pytest.raises(LaminaError, match=rf"TIU {type(cmd).__name__}: .*{why}"):
        kernels.execute(cmd, ins)


def test_bad_records_are_one_error() -> None:
    i8, f32 = "int8", "f32"
    x = _t((1, 4, 3, 3), i8)
    _bad(
        isa.Conv(input=x, weight=_t((1, 4, 4, 4), i8), output=x, kh=3, kw=3),
        {"input": _z(x.shape, i8), "weight": _z((1, 4, 4, 4), i8)},
        "kh\\*kw",
    )
    _bad(
        isa.Conv(input=x, weight=_t((1, 4, 3, 1), i8), output=x, groups=2),
        {"input": _z(x.shape, i8), "weight": _z((1, 4, 3, 1), i8)},
        "2 groups",
    )
    _bad(
        isa.Depthwise(input=x, weight=_t((1, 4, 4, 1), i8), output=x, groups=1),
        {"input": _z(x.shape, i8), "weight": _z((1, 4, 4, 1), i8)},
        "depthwise filter",
    )
    q = _z((1, 3, 1, 2), "int32")
    _bad(isa.Conv(input=x, weight=_t((1, 4, 4, 1), i8), quant=_t(q.shape, "int32"), output=x),
         {"input": _z(x.shape, i8), "weight": _z((1, 4, 4, 1), i8), "quant": q}, "quant tensor")  # fmt: skip
    e = isa.Eltwise(a=x, b=x, output=x, op=isa.EltwiseOp.MAX)
    _bad(e, {"a": _z(x.shape, i8), "b": _z(x.shape, i8)}, "max runs in float modes only")
    ef = isa.Eltwise(a=_t(x.shape, f32), b=_t(x.shape, f32), output=_t(x.shape, f32), do_relu=True)
    _bad(ef, {"a": _z(x.shape, f32), "b": _z(x.shape, f32)}, "do_relu")
    _bad(
        isa.Eltwise(a=x, b=x, output=x),
        {"a": _z(x.shape, i8), "b": _z((1, 3, 1, 1), i8)},
        "inconsistent operands",
    )
    _bad(
        isa.Eltwise(a=x, b=x, output=x, quant_axis=7),
        {"a": _z(x.shape, i8), "b": _z(x.shape, i8)},
        "quant_axis 7",
    )
    em = isa.Eltwise(a=x, b=x, quant=_t((1, 3, 1, 3), "int32"), output=x, op=isa.EltwiseOp.MUL)
    _bad(em, {"a": _z(x.shape, i8), "b": _z(x.shape, i8), "quant": _z((1, 3, 1, 3), "int32")}, "quant tensor")
    x16 = _t(x.shape, "int16")
    lut16 = isa.Lut16(input=x16, table=_t((1, 1, 1, 65536), i8), output=x)
    _bad(lut16, {"input": _z(x.shape, "int16"), "table": _z((1, 1, 1, 256), i8)}, "65536")
    lut8 = isa.Lut16(input=x, table=_t((1, 1, 1, 65536), i8), output=x)
    _bad(lut8, {"input": _z(x.shape, i8), "table": _z((1, 1, 1, 65536), i8)}, "reads int16")
    c = isa.Cast(input=x, output=_t(x.shape, "int32"))
    _bad(c, {"input": _z(x.shape, i8)}, "integer to integer")
    c2 = isa.Cast(input=_t(x.shape, f32), output=x, round_mode=isa.RoundMode.HALF_TO_EVEN)
    _bad(c2, {"input": _z(x.shape, f32)}, "half away")
    _bad(isa.Permute(input=x, output=x, order=(0, 1, 1, 3)), {"input": _z(x.shape, i8)}, "not a permutation")
    _bad(isa.Reduce(input=x, output=x, axes=0), {"input": _z(x.shape, i8)}, "names no dims")
    _bad(
        isa.Reduce(input=x, output=x, axes=1, mode=isa.ReduceMode.PROD),
        {"input": _z(x.shape, i8)},
        "no integer kernel",
    )
    _bad(
        isa.Lut(input=x, table=_t((1, 1, 1, 256), "int16"), output=x),
        {"input": _z(x.shape, i8), "table": _z((1, 1, 1, 256), "int16")},
        "table",
    )
    _bad(
        isa.Active(input=_t(x.shape, f32), output=_t(x.shape, f32), fn="Nope"),
        {"input": _z(x.shape, f32)},
        "unknown activation",
    )
    _bad(isa.Active(input=x, output=x, fn="Relu"), {"input": _z(x.shape, i8)}, "is a Lut")
    _bad(isa.Active(input=_t(x.shape, f32), output=_t(x.shape, f32), fn="GELU", params=(3.0, 0, 0, 0)),
         {"input": _z(x.shape, f32)}, "index 3.0")  # fmt: skip
    _bad(
        isa.Softmax(input=_t(x.shape, f32), output=_t(x.shape, f32), axis=4),
        {"input": _z(x.shape, f32)},
        "dim 4",
    )
    _bad(isa.LayerNorm(input=_t(x.shape, f32), gamma=_t((1, 1, 3, 3), f32), output=_t(x.shape, f32), axis=3),
         {"input": _z(x.shape, f32), "gamma": _z((1, 1, 3, 3), f32)}, "gamma")  # fmt: skip
    _bad(
        isa.Pool(input=x, output=_t((1, 4, 4, 3), i8), mode=isa.PoolMode.AVG, ceil_extra_h=1),
        {"input": _z(x.shape, i8)},
        "ceil-mode",
    )
    mm = isa.MatMul(left=_t((1, 2, 1, 3), i8), right=_t((1, 4, 1, 2), i8), output=_t((1, 2, 1, 2), i8))
    _bad(mm, {"left": _z((1, 2, 1, 3), i8), "right": _z((1, 4, 1, 2), i8)}, "do not multiply")
    att = isa.Attention(
        query=_t((1, 2, 3, 4), f32),
        key=_t((1, 2, 5, 3), f32),
        value=_t((1, 2, 5, 6), f32),
        output=_t((1, 2, 3, 6), f32),
    )
    _bad(
        att,
        {"query": _z((1, 2, 3, 4), f32), "key": _z((1, 2, 5, 3), f32), "value": _z((1, 2, 5, 6), f32)},
        "do not fit",
    )
    # inside the simulator: the same error, prefixed by the command's index
    m = Machine(EDGE, 1 << 16)
    lm = isa.Tensor(isa.Space.LMEM, 0, x.shape, EDGE.lmem_strides(*x.shape, i8), i8)
    with pytest.raises(
        LaminaError, match=r"command 0 \(Eltwise\): TIU Eltwise: max runs in float modes only"
    ):
        run(m, [isa.Eltwise(id=1, a=lm, b=lm, output=lm, op=isa.EltwiseOp.MAX)])


# ---- random records: a result or one LaminaError --------------------------------------------------------

_SMALL = st.integers(1, 4)


@st.composite
def _records(draw: Any) -> isa.TiuCommand:
    cls = draw(st.sampled_from([c for c in isa.COMMANDS.values() if issubclass(c, isa.TiuCommand)]))
    kw: dict[str, Any] = {"id": 1}
    for name in cls.TENSORS:
        if name in cls.OPTIONAL and draw(st.booleans()):
            kw[name] = None
            continue
        shape = tuple(draw(_SMALL) for _ in range(4))
        dtype = draw(st.sampled_from(["int8", "uint8", "int32", "bf16"]))
        addr = draw(st.integers(0, 8)) * 4096
        kw[name] = isa.Tensor(isa.Space.LMEM, addr, shape, EDGE.lmem_strides(*shape, dtype), dtype)  # type: ignore[arg-type]
    for name, code in cls.SCALARS:
        if name in cls.ENUMS:
            kw[name] = draw(st.sampled_from(cls.ENUMS[name]))
        elif code == "?":
            kw[name] = draw(st.booleans())
        elif code == "d":
            kw[name] = draw(st.sampled_from([-1.0, 0.0, 0.5, 1e-5, 3.0]))
        elif code == "4B":
            kw[name] = tuple(draw(st.permutations([0, 1, 2, 3]))) if draw(st.booleans()) else (0, 0, 1, 9)
        elif code == "4d":
            kw[name] = (draw(st.sampled_from([0.0, 1.0, 0.2])), 0.0, 0.0, 0.0)
        elif code == "24s":
            kw[name] = draw(st.sampled_from(["Relu", "GELU", "LeakyRelu", "Nope", "IsInf"]))
        elif name in ("kh", "kw", "stride_h", "stride_w", "dilation_h", "dilation_w", "groups"):
            kw[name] = draw(st.integers(0, 3))
        elif name.startswith("pad") or name.startswith("ceil") or name in ("axis", "quant_axis", "axes"):
            kw[name] = draw(st.integers(0, 5))
        elif name in ("multiplier", "a_multiplier", "b_multiplier"):
            kw[name] = draw(st.sampled_from([0, 1, 1 << 30, 2**31 - 1, -5]))
        elif name == "rshift":
            kw[name] = draw(st.sampled_from([-31, -1, 0, 5, 31, 40]))
        else:
            kw[name] = draw(st.integers(-130, 130))
    return cls(**kw)  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_records(), st.integers(0, 2**31))
def test_random_records_give_a_result_or_one_error(cmd: isa.TiuCommand, seed: int) -> None:
    """Whatever a decoded record says, the simulator computes it or says why in one LaminaError."""
    cmd = isa.decode(isa.encode([cmd]))[0]  # type: ignore[assignment]
    m = Machine(EDGE, 1 << 16)
    m.lmem[...] = np.random.default_rng(seed).integers(0, 256, m.lmem.shape, dtype=np.uint8)
    with np.errstate(all="ignore"), contextlib.suppress(LaminaError):
        run(m, [cmd])


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(cases(), st.data())
def test_valid_records_with_one_field_changed_give_a_result_or_one_error(c: Case, data: Any) -> None:
    """A valid command (lowered from a random op) with one scalar field set to another value, or one
    operand's view changed: the simulator computes something or says why in one LaminaError."""
    try:
        low = records.lower_op(c.op)
    except LaminaError:
        return
    names = [n for n, _ in low.cls.SCALARS]
    fields = dict(low.fields)
    operands = dict(low.operands)
    if names and data.draw(st.booleans()):
        name = data.draw(st.sampled_from(names))
        code = dict(low.cls.SCALARS)[name]
        if name in low.cls.ENUMS:
            fields[name] = data.draw(st.sampled_from(low.cls.ENUMS[name]))
        elif code == "?":
            fields[name] = not fields[name]
        elif code == "d":
            fields[name] = data.draw(st.sampled_from([-2.0, 0.0, 1e-30, 7.5, 1e30]))
        elif code in ("4B", "4d", "24s"):
            return
        else:
            lo = 0 if code in ("B", "H", "I") else -(2**31)
            fields[name] = data.draw(st.sampled_from([lo, 0, 1, 2, 3, 255, 2**15 - 1]))
    else:
        name = data.draw(st.sampled_from(sorted(operands)))
        o = operands[name]
        dim = data.draw(st.integers(0, 3))
        shape = list(o.shape)
        shape[dim] = max(1, shape[dim] + data.draw(st.sampled_from([-1, 1, 2])))
        operands[name] = records.Operand(o.value, tuple(shape))  # type: ignore[arg-type]
    bad = records.Lowered(low.cls, fields, operands, low.params)
    with np.errstate(all="ignore"), contextlib.suppress(LaminaError):
        oprun.run_lowered(c.op, bad, c.inputs, LNPU)

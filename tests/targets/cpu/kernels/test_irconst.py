"""The shared vector constants (``kernels/irconst.py``): the same object for the same element type
and lanes bit for bit, spelled as llvmlite spells a new ``ir.Constant``; ``0.0`` / ``-0.0``, other
types, other lane counts and other lanes are other constants."""

from __future__ import annotations

from llvmlite import ir

from lamina.targets.cpu.kernels.irconst import splat, vector

F32, F64, I32, I8 = ir.FloatType(), ir.DoubleType(), ir.IntType(32), ir.IntType(8)


def test_splat_is_shared_and_spelled_as_a_new_constant() -> None:
    for elem, x in ((F32, 1.5), (F32, -87.33654), (F64, 1e-300), (I32, 7), (I8, -128)):
        c = splat(elem, x, 16)
        assert splat(elem, x, 16) is c
        assert str(c) == str(ir.Constant(ir.VectorType(elem, 16), [x] * 16))
    assert str(splat(F32, -0.0, 4)) != str(splat(F32, 0.0, 4))
    assert splat(F32, 1.0, 8) is not splat(F32, 1.0, 16)
    assert splat(F32, 1.0, 8) is not splat(F64, 1.0, 8)
    assert str(splat(I32, 1, 4)) != str(splat(F32, 1.0, 4))


def test_vector_is_shared_and_spelled_as_a_new_constant() -> None:
    lanes = [0, 1, -1, 2**31 - 1, -(2**31)]
    c = vector(I32, lanes)
    assert vector(I32, list(lanes)) is c
    assert str(c) == str(ir.Constant(ir.VectorType(I32, 5), [ir.Constant(I32, v) for v in lanes]))
    assert vector(I32, [0, 1, -1, 2**31 - 1, 0]) is not c
    assert vector(ir.IntType(64), lanes) is not c

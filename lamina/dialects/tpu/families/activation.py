"""The activation family: elementwise ops of one input and one float result (every ``top`` unary
op: SiLU, GELU, HardSigmoid, HardSwish included), whose INT8 form is ``tpu.Lut`` — a 256-entry table
``quantize(fn(dequantize(v)))`` computed at lowering from the ``top`` op's own semantics — or, when
its input is a MatMul's / Conv's result on a 16-bit grid (the ``lut16`` integer form,
:meth:`..lowering.state.Lowering.wide_type`), ``tpu.Lut16``: the same table over the 65536 int16
input values."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.dialects.quant import QuantizedType
from lamina.dialects.top import ALL_OPS
from lamina.dialects.top import elementwise as top_ew
from lamina.dialects.top.base import AnyTensor, ElementsAttrC, StrAttr, TopOp, elem_of
from lamina.ir.attributes import DenseElementsAttr, StringAttr
from lamina.ir.core import Operation, Value
from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import operand, prop, result_def
from lamina.ir.types import ShapedType, Type
from lamina.rewrite.conversion import ConversionPatternRewriter

from ..lowering.pattern import FamilyLowering, NoInt8
from ..lowering.policy import elem, is_floatish
from ..quantize import build_lut, lut_index
from .common import store
from .plumbing import PlumbingOp


class LutOp(PlumbingOp):
    """``y = table[q - storage_base]`` for 8-bit quantized input (``storage_base`` -128 for int8,
    0 for uint8); ``table`` is 256 storage values of the result type, computed at lowering from
    ``fn`` (the activation it implements, for reading) as
    ``quantize(fn(dequantize(v)))`` in float64."""

    name = "tpu.Lut"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    table = prop(ElementsAttrC)
    fn = prop(StrAttr, optional=True)

    def verify_(self) -> None:
        it, ot = elem_of(self.input.type), elem_of(self.output.type)
        if not (isinstance(it, QuantizedType) and it.storage_width == 8):
            raise VerifyError("input must be an 8-bit quantized tensor")
        if not isinstance(ot, QuantizedType):
            raise VerifyError("result must be quantized")
        t = self.properties["table"].type
        if not isinstance(t, ShapedType) or t.shape != (256,):
            raise VerifyError("table must have 256 entries")

    def infer_shapes(self) -> list[Type]:
        return [self.output.type]

    def executor(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        table = np.asarray(self.properties["table"].to_numpy())
        out_t = self.output.type
        table = store(table, out_t)
        signed = bool(elem_of(self.input.type).signed)  # type: ignore[attr-defined]
        return lambda ins: [table[lut_index(ins[0], signed)]]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return list(self.executor()(inputs))


class Lut16Op(PlumbingOp):
    """``y = table[q + 32768]`` for int16 quantized input: ``table`` is 65536 storage values of the
    result type (8-bit, or int16 where a MatMul reads it), computed at lowering as ``quantize(fn(dequantize(v)))`` in float64 for
    every int16 ``v`` — ``tpu.Lut`` over a 16-bit input grid (the ``lut16`` form)."""

    name = "tpu.Lut16"
    input = operand(AnyTensor)
    output = result_def(AnyTensor)
    table = prop(ElementsAttrC)
    fn = prop(StrAttr, optional=True)

    def verify_(self) -> None:
        it, ot = elem_of(self.input.type), elem_of(self.output.type)
        if not (isinstance(it, QuantizedType) and it.storage_width == 16 and it.signed):
            raise VerifyError("input must be a signed 16-bit quantized tensor")
        if not isinstance(ot, QuantizedType):
            raise VerifyError("result must be quantized")
        t = self.properties["table"].type  # type: ignore[attr-defined]
        if not isinstance(t, ShapedType) or t.shape != (65536,):
            raise VerifyError("table must have 65536 entries")

    def infer_shapes(self) -> list[Type]:
        return [self.output.type]

    def executor(self) -> Callable[[Sequence[Any]], Sequence[Any]]:
        table = store(np.asarray(self.properties["table"].to_numpy()), self.output.type)  # type: ignore[attr-defined]
        return lambda ins: [table[lut_index(ins[0], True, 16)]]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return list(self.executor()(inputs))


def lut_table_attr(table: np.ndarray) -> DenseElementsAttr:
    return DenseElementsAttr.from_numpy(np.ascontiguousarray(table))


#: the top classes of the family: the unary elementwise ops (SiLU, GELU, HardSigmoid and
#: HardSwish included)
LUT_CLASSES: tuple[type[TopOp], ...] = tuple(c for c in ALL_OPS if issubclass(c, top_ew.UnaryOp))


def lutable(op: Operation) -> bool:
    """Whether ``op`` can be a LUT: an op of the family with one operand and one float result."""
    if len(op.operands) != 1 or len(op.results) != 1:
        return False
    if not isinstance(op, top_ew.UnaryOp):
        return False
    return is_floatish(op.results[0].type)


class LutLowering(FamilyLowering):
    """An activation → ``tpu.Lut`` between its input's and its result's 8-bit types, or
    ``tpu.Lut16`` when its input is on a 16-bit grid (a MatMul's / Conv's result that the lowering
    requantized to int16 for it: :meth:`..lowering.state.Lowering.wide_type`)."""

    roots = LUT_CLASSES

    def lower_int8(self, op: Operation, ins: list[Value], rw: ConversionPatternRewriter) -> bool:
        if not lutable(op) or "lut" not in self.s.int_forms:
            raise NoInt8
        x = self.qin(rw, op.operands[0], ins[0])
        width = elem(x.type).storage_width  # type: ignore[attr-defined]
        if width not in (8, 16):
            raise NoInt8
        out_t = self.qout(op.results[0])
        if width == 16:  # lut16: an int16 result too where a MatMul reads it (wide_result)
            out_t = self.s.wide_result(op.results[0]) or out_t
        top_op = op

        def fn(xf: np.ndarray) -> np.ndarray:
            return np.asarray(top_op.execute([xf.astype(np.float32)])[0], np.float64)  # type: ignore[attr-defined]

        table = build_lut(fn, x.type, out_t)
        new = rw.create(
            LutOp if width == 8 else Lut16Op,
            input=x,
            output=out_t,
            table=lut_table_attr(table),
            fn=StringAttr(op.name.split(".", 1)[1]),
            loc=op.location,
        )
        rw.replace_op(op, new.results)
        return True

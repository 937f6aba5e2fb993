"""The ``func`` dialect: functions, calls and returns."""

from lamina.dialects.func.ops import FUNC, CallIndirectOp, CallOp, ConstantOp, FuncOp, ReturnOp

__all__ = ["FUNC", "CallIndirectOp", "CallOp", "ConstantOp", "FuncOp", "ReturnOp"]

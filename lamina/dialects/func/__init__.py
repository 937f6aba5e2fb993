"""The ``func`` dialect: functions, calls and returns."""

from lamina.dialects.func.ops import FUNC, CallOp, FuncOp, ReturnOp

__all__ = ["FUNC", "CallOp", "FuncOp", "ReturnOp"]

"""The ``func`` dialect: functions, calls and returns."""

from lamina.dialects.func.ops import FUNC, CallIndirectOp, CallOp, ConstantOp, FuncOp, ReturnOp
from lamina.ir.core import register_canonicalization_module

__all__ = ["FUNC", "CallIndirectOp", "CallOp", "ConstantOp", "FuncOp", "ReturnOp"]

# The op classes' canonicalization patterns register themselves when first asked for.
register_canonicalization_module("func", "lamina.dialects.func.canonicalize")

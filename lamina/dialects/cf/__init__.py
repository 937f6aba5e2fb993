"""The ``cf`` dialect (see :mod:`lamina.dialects.cf.ops`)."""

from lamina.dialects.cf.ops import AssertOp, BranchOp, CondBranchOp, SwitchOp
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.core import register_canonicalization_module

CF = register_dialect(
    Dialect("cf", [BranchOp, CondBranchOp, SwitchOp, AssertOp], description="Unstructured control flow.")
)

__all__ = ["CF", "AssertOp", "BranchOp", "CondBranchOp", "SwitchOp"]

# The op classes' canonicalization patterns register themselves when first asked for.
register_canonicalization_module("cf", "lamina.dialects.cf.canonicalize")

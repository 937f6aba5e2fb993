"""The ``cpu`` dialect: the CPU target's kernel level of Lamina's IR.

* ``cpu.kernel`` — one planned kernel: a region holding the ``tpu`` op(s) it computes (the op, a
  fused epilogue such as a following ``tpu.Requant``, the constants they read), its operands the
  activations it reads, its results the ones it writes. Properties: ``template`` (the kernel
  template that emits it, :mod:`.kernels`), ``symbol`` (its LLVM function). The passes add their
  decisions as attributes: ``cpu.weights`` (the keys of its packed weights in the weight section),
  ``cpu.offsets`` (each result's byte offset in the activation arena, ``-1`` for a model input or
  output, which lives in the caller's buffer ``cpu.io``), ``cpu.alias`` (a view of its operand's
  bytes: no code), ``cpu.barrier`` (threads synchronize before it).
* ``cpu.yield`` — ends a kernel's region: the values it writes.

Every op here executes on the reference interpreter (a kernel runs its region), so the kernel level
is executable and compared with the ``tpu`` module it came from.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lamina.ir.constraints import StrAttr
from lamina.ir.context import Dialect, register_dialect
from lamina.ir.opdef import Op, prop, region, var_operand, var_result
from lamina.ir.traits import ExecutableOpInterface, IsTerminator, NotALayer, Pure, ReturnLike
from lamina.ir.verifier import verify_body_signature

__all__ = ["CPU", "KernelOp", "YieldOp"]


class KernelOp(Op, ExecutableOpInterface):
    """One kernel of the compiled model (see the module docstring)."""

    name = "cpu.kernel"
    inputs = var_operand()
    outputs = var_result()
    body = region(single_block=True)
    template = prop(StrAttr)
    symbol = prop(StrAttr)

    def verify_(self) -> None:
        verify_body_signature(self, self.inputs, YieldOp, "kernel")

    def execute_regions(
        self, inputs: Sequence[Any], regions: Sequence[Callable[..., list[Any]]]
    ) -> list[Any]:
        return regions[0](list(inputs))

    @property
    def block(self) -> Any:
        return self.regions[0].blocks[0]

    def computes(self) -> list[Any]:
        """The ops the kernel computes (its region's ops but constants and the yield), in order."""
        from lamina.ir.constants import holds_constant
        from lamina.ir.traits import ConstantLike

        return [
            o
            for o in self.block.ops
            if not isinstance(o, YieldOp)
            and not holds_constant(o)
            and not (o.has_trait(ConstantLike) and not o.operands)
        ]


class YieldOp(Op, ExecutableOpInterface):
    """Ends a kernel's body: the values it writes, its results."""

    name = "cpu.yield"
    traits = (Pure(), IsTerminator(), ReturnLike(), NotALayer())
    values = var_operand()

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        return []


CPU = register_dialect(
    Dialect("cpu", [KernelOp, YieldOp], description="The CPU target: planned kernels in one arena.")
)

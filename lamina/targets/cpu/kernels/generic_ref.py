"""The reference template: any ``tpu`` op, run by its ``execute`` from inside the compiled model.

Its kernel calls the host function the runtime installs in the module's global ``@lamina_host``
(``void (i64 kernel, i8** bufs)``, a ctypes callback) from part 0 only, with the kernel's index (the
number in its symbol ``k<index>_...``) and its buffers: the op's tensor operands that are not
constants, then its tensor results. The runtime runs the kernel's region (kept as IR text in the
file's ``cpu_subnet`` section) on the reference interpreter, reading and writing the arena. The
threads wait at the barrier after it. ``model_deploy`` lists the ops that run this way."""

from __future__ import annotations

from typing import Any

import llvmlite.ir as ir

from lamina.ir.constants import value_constant
from lamina.ir.types import RankedTensorType

from .abi import Isa, KernelPlan, Template
from .generic_ir import I8P, I64, VOID, Kernel, const

__all__ = ["HOST_CALLBACK", "ReferenceTemplate", "host_callback", "kernel_index", "tensor_operands"]

#: the global holding the host callback's address
HOST_CALLBACK = "lamina_host"
HOST_TYPE = ir.FunctionType(VOID, [I64, I8P.as_pointer()])


def kernel_index(symbol: str) -> int:
    """The kernel's index from its symbol ``k<index>_...``."""
    return int(symbol.split("_", 1)[0][1:])


def tensor_operands(op: Any) -> list[int]:
    """Indices of ``op``'s operands that are tensors computed at run time (not constants, not none)."""
    return [
        i
        for i, v in enumerate(op.operands)
        if isinstance(v.type, RankedTensorType) and value_constant(v) is None
    ]


def host_callback(module: ir.Module) -> ir.GlobalVariable:
    """``@lamina_host`` declared (or defined by the entry module) in ``module``."""
    g = module.globals.get(HOST_CALLBACK)
    if g is None:
        g = ir.GlobalVariable(module, HOST_TYPE.as_pointer(), HOST_CALLBACK)
        g.linkage = "external"
    return g  # type: ignore[no-any-return]


class ReferenceTemplate(Template):
    name = "reference"
    priority = -100

    def matches(self, op: Any, isa: Isa) -> bool:
        return True

    def plan(self, op: Any, symbol: str, isa: Isa) -> KernelPlan:
        kernel_index(symbol)
        bufs: list[tuple[str, Any]] = [("in", i) for i in tensor_operands(op)]
        bufs += [("out", i) for i, r in enumerate(op.results) if isinstance(r.type, RankedTensorType)]
        return KernelPlan(symbol, bufs)

    def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
        k = Kernel(module, plan.symbol)
        b = k.b
        g = host_callback(module)
        first = b.icmp_signed("==", k.part, const(0))
        with b.if_then(first):
            fn = b.load(g)
            b.call(fn, [const(kernel_index(plan.symbol)), k.bufs])
        k.finish()


REFERENCE = ReferenceTemplate()
#: this module's templates (registered by :mod:`lamina.targets.cpu.kernels`)
TEMPLATES: list[Template] = [REFERENCE]

"""Control flow with regions: ``top.If``, ``top.Loop``, ``top.Scan`` (ONNX If/Loop/Scan).

Regions have one block ending in ``top.Yield`` and may read values of the enclosing function
directly (they are not isolated from above). The interpreter hands each op one callable per
region, ``run(block_args) -> yielded values``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from lamina.ir.diagnostics import VerifyError
from lamina.ir.opdef import operand, prop, region, result_def, var_operand, var_result
from lamina.ir.types import IntegerType, ShapedType, Type

from .base import AnyTensor, AnyTensorOrNone, I, I64ArrayAttr, I64Attr, TopOp, result_dtype
from .io import YieldOp

Runner = Callable[[Sequence[Any]], list[Any]]


class _RegionOp(TopOp):
    def infer_shapes(self) -> list[Type]:
        return [r.type for r in self.results]

    def execute(self, inputs: Sequence[Any]) -> list[Any]:
        raise NotImplementedError(f"'{self.name}' executes through execute_regions")

    def _check_yield(self, idx: int, n: int) -> None:
        r = self.regions[idx]
        if not r.blocks:
            raise VerifyError(f"region #{idx} must not be empty")
        t = r.blocks[0].last_op
        if not isinstance(t, YieldOp):
            raise VerifyError(f"region #{idx} must end with 'top.Yield'")
        if t.num_operands != n:
            raise VerifyError(f"region #{idx} yields {t.num_operands} values, expected {n}")

    def flops(self) -> int:
        total = 0
        for r in self.regions:
            for op in r.ops():
                f = getattr(op, "flops", None)
                total += f() if f is not None else 0
        return total


class IfOp(_RegionOp):
    """Runs ``then_branch`` if ``cond`` else ``else_branch``; results are the branch's yield."""

    name = "top.If"
    cond = operand(AnyTensor)
    outputs = var_result()
    then_branch = region(single_block=True)
    else_branch = region(single_block=True)

    def verify_(self) -> None:
        t = self.cond.type
        if isinstance(t, ShapedType):
            if not (isinstance(t.element_type, IntegerType) and t.element_type.width == 1):
                raise VerifyError(f"condition must be a bool tensor, got '{t}'")
            if t.has_static_shape and t.num_elements != 1:
                raise VerifyError(f"condition must have one element, got '{t}'")
        self._check_yield(0, len(self.results))
        self._check_yield(1, len(self.results))

    def execute_regions(self, inputs: Sequence[Any], regions: Sequence[Runner]) -> list[Any]:
        c = bool(np.asarray(inputs[0]).reshape(-1)[0])
        return regions[0 if c else 1]([])


class LoopOp(_RegionOp):
    """ONNX Loop: body(iter, cond, *carried) yields (cond, *carried, *scan_outputs)."""

    name = "top.Loop"
    max_trip_count = operand(AnyTensorOrNone)
    cond = operand(AnyTensorOrNone)
    v_initial = var_operand()
    outputs = var_result()
    body = region(single_block=True)

    def verify_(self) -> None:
        n_carried = len(self.operands) - 2
        if len(self.results) < n_carried:
            raise VerifyError(f"has {len(self.results)} results but {n_carried} loop-carried values")
        self._check_yield(0, 1 + len(self.results))

    def execute_regions(self, inputs: Sequence[Any], regions: Sequence[Runner]) -> list[Any]:
        m, c = inputs[0], inputs[1]
        trip = int(np.asarray(m).reshape(-1)[0]) if m is not None else None
        cond = bool(np.asarray(c).reshape(-1)[0]) if c is not None else True
        v = list(inputs[2:])
        nv = len(v)
        scans: list[list[Any]] = [[] for _ in range(len(self.results) - nv)]
        i = 0
        body = regions[0]
        while (trip is None or i < trip) and cond:
            outs = body([np.array(i, dtype=np.int64), np.array(cond), *v])
            cond = bool(np.asarray(outs[0]).reshape(-1)[0])
            v = outs[1 : 1 + nv]
            for j, s in enumerate(outs[1 + nv :]):
                scans[j].append(s)
            i += 1
        res = list(v)
        for j, s in enumerate(scans):
            res.append(np.stack(s) if s else np.zeros((0,), dtype=result_dtype(self, nv + j)))
        return res


class ScanOp(_RegionOp):
    """ONNX Scan (opset ≥ 9): iterates ``body`` over slices of the scan inputs."""

    name = "top.Scan"
    inputs = var_operand()
    outputs = var_result()
    body = region(single_block=True)
    num_scan_inputs = prop(I64Attr)
    scan_input_axes = prop(I64ArrayAttr, optional=True)
    scan_input_directions = prop(I64ArrayAttr, optional=True)
    scan_output_axes = prop(I64ArrayAttr, optional=True)
    scan_output_directions = prop(I64ArrayAttr, optional=True)

    def verify_(self) -> None:
        ns = self.num_scan_inputs
        if not 1 <= ns <= len(self.operands):
            raise VerifyError(f"num_scan_inputs {ns} must be between 1 and the {len(self.operands)} inputs")
        nstate = len(self.operands) - ns
        if len(self.results) < nstate:
            raise VerifyError(f"has {len(self.results)} results but {nstate} state variables")
        body = self.regions[0].blocks[0] if self.regions and self.regions[0].blocks else None
        if body is not None and len(body.args) != len(self.operands):
            raise VerifyError(
                f"body takes {len(body.args)} arguments but the Scan has {len(self.operands)} inputs"
            )
        self._check_yield(0, len(self.results))

    def execute_regions(self, inputs: Sequence[Any], regions: Sequence[Runner]) -> list[Any]:
        ns = self.num_scan_inputs
        nstate = len(inputs) - ns
        state = list(inputs[:nstate])
        xs = list(inputs[nstate:])
        in_axes = list(self.scan_input_axes or [0] * ns)
        in_dirs = list(self.scan_input_directions or [0] * ns)
        xs = [np.moveaxis(x, a if a >= 0 else a + x.ndim, 0) for x, a in zip(xs, in_axes)]
        xs = [x[::-1] if d else x for x, d in zip(xs, in_dirs)]
        n = xs[0].shape[0] if xs else 0
        nout = len(self.results) - nstate
        scans: list[list[Any]] = [[] for _ in range(nout)]
        for t in range(n):
            outs = regions[0]([*state, *[x[t] for x in xs]])
            state = outs[:nstate]
            for j, s in enumerate(outs[nstate:]):
                scans[j].append(s)
        out_axes = list(self.scan_output_axes or [0] * nout)
        out_dirs = list(self.scan_output_directions or [0] * nout)
        res = list(state)
        for j, s in enumerate(scans):
            arr = (
                np.stack(s[::-1] if out_dirs[j] else s)
                if s
                else np.zeros((0,), result_dtype(self, nstate + j))
            )
            a = out_axes[j]
            res.append(np.moveaxis(arr, 0, a if a >= 0 else a + arr.ndim))
        return res


CONTROL_OPS: list[type[TopOp]] = [IfOp, LoopOp, ScanOp]
_ = (I, result_def)

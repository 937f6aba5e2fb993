"""The reference interpreter: executes any function of a module, at any level, on numpy values.

The module's ``func.func @main`` (or another function) is compiled once into an *execution plan*:
every SSA value gets an integer slot in one flat environment list, and each op becomes a step
``(fn, input slots, output slots, slots to free)``. Running is then a tight loop with no name
lookups; intermediates are released right after their last use unless every tensor is being dumped.
Ops with regions (``top.If``, ``top.Loop``, ``top.Scan``) get a callable per region that runs the
region's own plan in the same environment (so values captured from the enclosing graph are simply
read); the op's ``execute_regions(inputs, runners)`` decides which region runs how often.

A function (or region) of several blocks gets one plan per block; each block ends in a
``ReturnLike`` op or a branch (:class:`~lamina.ir.traits.BranchOpInterface`, whose
``execute_branch`` names the successor taken and the values of its block arguments), so
unstructured control flow (``cf.br``/``cf.cond_br`` loops) runs block by block. A call
(:class:`~lamina.ir.traits.CallOpInterface` with a symbol callee, ``func.call``) runs the callee,
compiled once per interpreter, in an environment of its own (recursion included). The interpreter
knows ops only through traits and interfaces (``ConstantLike``, ``NotALayer``, ``ReturnLike``,
``ExecutableOpInterface``, ...), never by name: it imports no dialect.

Speed: ops build their step function once (``op.executor()``: properties read once, per-shape
geometry and scratch buffers kept); ``top.Weight`` values are materialized at plan time into an
environment template instead of being re-read every run; and, when intermediates are not being
dumped, a single consumer of a freshly computed array (ReLU after a convolution, the residual Add,
the bias Add after a MatMul, ...) computes its result *into* that array (``inplace_executor``)
instead of allocating a new one. ``Interpreter.profile(inputs)`` reports the time per op type.

An :class:`Interpreter` keeps per-op scratch buffers (padded inputs, im2col matrices) between runs:
use one instance per thread.

Tensor names come from op locations: ``loc("conv1_out"(...))`` names the op's result, a fused
location of names names each result in order; function inputs/outputs are named by the ``onnx.name``
entries of ``arg_attrs``/``res_attrs``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from lamina.execution.memory import size_error
from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, SymbolRefAttr
from lamina.ir.constants import holds_constant
from lamina.ir.core import Block, Operation, Region, Value
from lamina.ir.diagnostics import diagnostic_location
from lamina.ir.location import FileLineColLoc, NameLoc
from lamina.ir.naming import location_names, result_names
from lamina.ir.symbol_table import lookup_symbol
from lamina.ir.traits import (
    BranchOpInterface,
    CallableOpInterface,
    CallOpInterface,
    ConstantLike,
    ExecutableOpInterface,
    ReturnLike,
    SymbolOpInterface,
)
from lamina.ir.types import NoneType

NAME_KEY = "onnx.name"


class ExecutionError(Exception):
    """An op failed while executing; the message names the op and its location."""

    def __init__(self, message: str, op: Operation | None = None) -> None:
        super().__init__(message)
        self.op = op


def _describe(op: Operation) -> str:
    """Where ``op`` is: the line of the ``.mlir`` it was parsed from (else its location's file), and
    the tensor names of its location."""
    loc = op.location
    flc = diagnostic_location(op).file_line_col()
    names = location_names(loc)
    where = f"{flc.filename}:{flc.line}:{flc.col}" if isinstance(flc, FileLineColLoc) else ""
    return ", ".join(x for x in (where, "/".join(f"'{n}'" for n in names)) if x)


def functions(module: Operation) -> list[Operation]:
    """The functions (ops implementing :class:`CallableOpInterface`, ``func.func``) directly in
    ``module``'s body, in order."""
    if not module.regions or not module.regions[0].blocks:
        return []
    return [op for op in module.regions[0].blocks[0] if CallableOpInterface.get(op) is not None]


def symbol_name(op: Operation) -> str | None:
    """The symbol ``op`` defines (``@main``), or None."""
    sym = SymbolOpInterface.get(op)
    return sym.symbol_name() if sym is not None else None


def find_main(module: Operation, name: str = "main") -> Operation:
    """The function to run: ``module`` itself if it is one, else its function ``@name``, else (for
    ``@main``) its first function."""
    if CallableOpInterface.get(module) is not None:
        return module
    funcs = functions(module)
    for f in funcs:
        if symbol_name(f) == name:
            return f
    if not funcs:
        raise ExecutionError("module has no func.func to execute")
    if name != "main":
        raise ExecutionError(f"module has no function @{name}")
    return funcs[0]


def _body(func: Operation) -> Region:
    region = CallableOpInterface.get(func).callable_region()
    if region is None or not region.blocks:
        raise ExecutionError(f"function @{symbol_name(func)} is a declaration without a body")
    return region


def _is_materialized(op: Operation) -> bool:
    """Whether ``op``'s results are computed once, at plan time: a constant (``ConstantLike``) or
    operand-free model plumbing (``NotALayer``: the absent operand)."""
    return not op.regions and (holds_constant(op) or (not op.operands and op.has_trait(ConstantLike)))


def _attr_names(func: Operation, key: str, n: int, prefix: str, values: Sequence[Value] = ()) -> list[str]:
    """The ``onnx.name`` entry of each of ``func``'s ``key`` (``arg_attrs``/``res_attrs``) entries,
    else the name of the value's location (a block argument's ``loc("x")``), else ``<prefix><i>``."""
    attrs = func.properties.get(key)
    out = []
    for i in range(n):
        name = None
        entry = attrs[i] if isinstance(attrs, ArrayAttr) and i < len(attrs) else None
        if isinstance(entry, DictionaryAttr):
            a = entry.get(NAME_KEY)
            if isinstance(a, StringAttr):
                name = a.value
        if name is None and i < len(values):
            loc = getattr(values[i], "location", None)
            name = loc.name if isinstance(loc, NameLoc) else None
        out.append(name or f"{prefix}{i}")
    return out


def io_names(func: Operation) -> tuple[list[str], list[str]]:
    """The names of ``func``'s inputs and outputs as the interpreter binds and returns them (see
    :func:`_attr_names`; unnamed ones are ``input_0``…, ``output_0``…)."""
    region = _body(func)
    entry = region.blocks[0]
    ret = entry.last_op
    if len(region.blocks) == 1 and ret is not None and ret.has_trait(ReturnLike):
        n_out = ret.num_operands
    else:
        n_out = len(CallableOpInterface.get(func).result_types_())
    inputs = _attr_names(func, "arg_attrs", len(entry.args), "input_", entry.args)
    return inputs, _attr_names(func, "res_attrs", n_out, "output_")


Step = tuple[
    Callable[[list[Any]], Sequence[Any]], tuple[int, ...], tuple[int, ...], tuple[int, ...], Operation
]


class _BlockPlan:
    """One block of a body with several blocks: its steps, then how it ends. A return has no
    ``branch`` and ``ins`` are the returned slots; a branch gets the values of ``ins`` (its operands)
    and names the successor ``i`` it takes, whose plan and block-argument slots are ``targets[i]``."""

    __slots__ = ("branch", "free", "ins", "plan", "targets", "term")

    def __init__(self, plan: list[Step], term: Operation) -> None:
        self.plan = plan
        # Nothing is freed (a block may run again), but an indexed run names the op that fails.
        self.free: list[tuple[int, ...]] = [() for _ in plan]
        self.term = term
        self.ins: tuple[int, ...] = ()
        self.branch: Callable[[list[Any]], tuple[int, Sequence[Any]]] | None = None
        self.targets: list[tuple[_BlockPlan, tuple[int, ...]]] = []


class Interpreter:
    """Compiles a function of a module (``@main`` by default, or a ``func.func`` given directly)
    once; :meth:`run` executes it on numpy inputs, :meth:`call` on values by position."""

    def __init__(
        self,
        module: Operation,
        function: str = "main",
        *,
        _callees: dict[Operation, Interpreter] | None = None,
    ) -> None:
        self.func = find_main(module, function)
        # The functions compiled for calls, shared by every callee (a recursive call finds its caller).
        self._callees: dict[Operation, Interpreter] = {} if _callees is None else _callees
        self._callees[self.func] = self
        self._env: list[Any] = []
        self._slots: dict[Value, int] = {}
        self._consts: list[tuple[int, Any]] = []
        region = _body(self.func)
        entry: Block = region.blocks[0]
        for a in entry.args:
            self._slot(a)
        self.input_names, self.output_names = io_names(self.func)
        self._arg_slots = [self._slots[a] for a in entry.args]
        #: one plan per block when the body has several blocks (None: the flat single-block plan)
        self._cfg: list[_BlockPlan] | None = None
        if len(region.blocks) == 1:
            ret = entry.last_op
            if ret is None or not ret.has_trait(ReturnLike):
                raise ExecutionError("function body must end with func.return")
            self.plan, self._names = self._compile_block(entry, top_level=True)
            self._ret_slots = [self._slots[v] for v in ret.operands]
            # Slots freed after their last use (top level only; outputs and dumps keep theirs).
            self._free = self._liveness(entry, ret)
            #: the plan used when intermediates are not dumped: same steps, some computed in place
            self.fast_plan = self._inplace_plan(self.plan, ret)
        else:
            self._cfg, self._names = self._compile_cfg(region, top_level=True)
            self.plan = [step for b in self._cfg for step in b.plan]
            self._ret_slots = []  # the results are the operands of the return reached
            self._free = [() for _ in self.plan]
            self.fast_plan = self.plan
        self.num_slots = len(self._slots)
        self._template: list[Any] = [None] * self.num_slots
        for s, v in self._consts:
            if isinstance(v, np.ndarray) and v.flags.writeable:
                v = v.view()
                v.flags.writeable = False  # shared by every run: nobody may write into it
            self._template[s] = v

    # ---- compilation ---------------------------------------------------------------------

    def _slot(self, v: Value) -> int:
        s = self._slots.get(v)
        if s is None:
            s = self._slots[v] = len(self._slots)
        return s

    def _compile_block(
        self, block: Block, top_level: bool = False
    ) -> tuple[list[Step], list[tuple[int, str]]]:
        """The steps of ``block``'s ops; its terminator (a return or a branch) is not a step."""
        plan: list[Step] = []
        names: list[tuple[int, str]] = []
        for a in block.args:
            self._slot(a)
        for op in block:
            if op.has_trait(ReturnLike) or op.successors:
                continue
            ins = tuple(self._slot(v) for v in op.operands)
            outs = tuple(self._slot(r) for r in op.results)
            if top_level:
                for s, n in zip(outs, result_names(op)):
                    names.append((s, n))
            if _is_materialized(op):  # computed once, at plan time
                try:
                    vals = self._op_fn(op)([])
                except Exception as e:
                    raise ExecutionError(
                        f"'{op.name}' op at {_describe(op)} failed: {type(e).__name__}: {e}", op
                    ) from e
                for s, v in zip(outs, vals):
                    self._consts.append((s, v))
                continue
            fn = self._op_fn(op)
            too_big = self._size_error(op)
            if too_big is not None:
                fn = _refuse(ExecutionError(too_big, op))
            plan.append((fn, ins, outs, (), op))
        return plan, names

    def _compile_cfg(
        self, region: Region, top_level: bool = False
    ) -> tuple[list[_BlockPlan], list[tuple[int, str]]]:
        """One :class:`_BlockPlan` per block of ``region`` (the entry block first), linked to the
        successors of each block's branch."""
        plans: dict[Block, _BlockPlan] = {}
        names: list[tuple[int, str]] = []
        for block in region.blocks:
            term = block.last_op
            if term is None or not (term.has_trait(ReturnLike) or term.successors):
                where = f"'{term.name}' op at {_describe(term)}" if term is not None else "an empty block"
                raise ExecutionError(
                    f"{where} cannot end a block that is run: expected a return or a branch", term
                )
            plan, block_names = self._compile_block(block, top_level)
            names.extend(block_names)
            plans[block] = _BlockPlan(plan, term)
        for bp in plans.values():
            term = bp.term
            bp.ins = tuple(self._slot(v) for v in term.operands)
            if term.has_trait(ReturnLike):
                continue
            br = BranchOpInterface.get(term)
            if br is None:
                raise ExecutionError(f"'{term.name}' op at {_describe(term)} cannot be executed", term)
            bp.branch = br.execute_branch
            bp.targets = [(plans[b], tuple(self._slot(a) for a in b.args)) for b in term.successors]
        return [plans[b] for b in region.blocks], names

    @staticmethod
    def _size_error(op: Operation) -> str | None:
        """Why ``op``'s results (of static types) cannot be allocated, checked before it runs."""
        for r, name in zip(op.results, result_names(op)):
            err = size_error(r.type, f"tensor '{name}'")
            if err is not None:
                return f"'{op.name}' op at {_describe(op)} cannot run: {err}"
        return None

    def _op_fn(self, op: Operation) -> Callable[[list[Any]], Sequence[Any]]:
        if op.regions:
            runners = [self._region_runner(r) for r in op.regions]
            exe = getattr(op, "execute_regions", None)
            if exe is None:
                raise ExecutionError(f"'{op.name}' op has regions but no execute_regions", op)

            def run_regions(ins: list[Any]) -> Sequence[Any]:
                return exe(ins, runners)  # type: ignore[no-any-return]

            return run_regions
        iface = ExecutableOpInterface.get(op)
        if iface is None:
            call = CallOpInterface.get(op)
            if call is not None:
                return self._call_fn(op, call)
            raise ExecutionError(f"'{op.name}' op at {_describe(op)} cannot be executed", op)
        make = getattr(op, "executor", None)
        return make() if make is not None else iface.execute

    def _call_fn(self, op: Operation, call: Any) -> Callable[[list[Any]], Sequence[Any]]:
        """The step of a call: to a symbol (``func.call``), the callee's compiled :meth:`call`; to a
        function value (``func.call_indirect``), a call of the function op that value holds."""
        ref = call.callee()
        if isinstance(ref, Value):
            operands = list(op.operands)
            at = next(i for i, v in enumerate(operands) if v is ref)
            args = [i for i, v in enumerate(operands) if i != at]

            def call_value(ins: list[Any]) -> Sequence[Any]:
                return self.callee(ins[at]).call([ins[i] for i in args])

            return call_value
        callee = lookup_symbol(op, ref) if isinstance(ref, SymbolRefAttr) else None
        if callee is None or CallableOpInterface.get(callee) is None:
            raise ExecutionError(
                f"'{op.name}' op at {_describe(op)} cannot be executed: it calls {ref}, which is not a "
                "function of the module",
                op,
            )
        return self.callee(callee).call

    def callee(self, func: Operation) -> Interpreter:
        """The interpreter of ``func``, a function of this module (compiled on first use, shared by
        every function this interpreter calls)."""
        interp = self._callees.get(func)
        if interp is None:
            if CallableOpInterface.get(func) is None:
                raise TypeError(f"cannot call a value that is not a function: {func!r}")
            interp = Interpreter(func, _callees=self._callees)
        return interp

    def _region_runner(self, region: Region) -> Callable[[Sequence[Any]], list[Any]]:
        if not region.blocks:
            return lambda args: []
        block = region.blocks[0]
        if len(region.blocks) > 1:
            cfg, _ = self._compile_cfg(region)
            entry_slots = [self._slots[a] for a in block.args]

            def run_blocks(args: Sequence[Any]) -> list[Any]:
                env = self._env
                for s, v in zip(entry_slots, args):
                    env[s] = v
                return self._run_cfg(cfg, env)

            return run_blocks
        plan, _ = self._compile_block(block)
        arg_slots = [self._slots[a] for a in block.args]
        term = block.last_op
        yield_slots = (
            [self._slot(v) for v in term.operands] if term is not None and term.has_trait(ReturnLike) else []
        )

        def run(args: Sequence[Any]) -> list[Any]:
            env = self._env
            for s, v in zip(arg_slots, args):
                env[s] = v
            self._exec(plan, env)
            return [env[s] for s in yield_slots]

        return run

    def _inplace_plan(self, plan: list[Step], ret: Operation) -> list[Step]:
        """``plan`` with in-place steps where an operand can be donated: it is the result of an op
        with ``fresh_results`` in this block, this op is its only use, it is not a function result,
        and it has exactly the (static) type of this op's single result."""
        returned = set(ret.operands)
        out: list[Step] = []
        for step in plan:
            fn, ins, outs, extra, op = step
            make = getattr(op, "inplace_executor", None)
            res_t = op.results[0].type if len(op.results) == 1 else None
            if make is None or res_t is None or not getattr(res_t, "has_static_shape", False):
                out.append(step)
                continue
            for i, v in enumerate(op.operands):
                prod = v.defining_op() if hasattr(v, "defining_op") else None
                if (
                    prod is None
                    or prod.parent is not op.parent
                    or not getattr(prod, "fresh_results", False)
                    or v.type is not res_t
                    or v in returned
                    or len(v.uses) != 1
                ):
                    continue
                fast = make(i)
                if fast is None:
                    continue
                step = (_guarded(fast, fn, i, res_t), ins, outs, extra, op)
                break
            out.append(step)
        return out

    def _liveness(self, entry: Block, ret: Operation) -> list[tuple[int, ...]]:
        last: dict[int, int] = {}
        keep = {self._slots[v] for v in ret.operands}
        for i, (_, _, _, _, op) in enumerate(self.plan):
            for v in op.operands:
                last[self._slots[v]] = i
            if op.regions:  # values captured by nested regions die with the region op
                inner: Operation
                for inner in op.walk_ops():
                    for v in inner.operands:
                        s = self._slots.get(v)
                        if s is not None:
                            last[s] = i
        free: list[list[int]] = [[] for _ in self.plan]
        for s, i in last.items():
            if s not in keep:
                free[i].append(s)
        return [tuple(f) for f in free]

    # ---- execution -----------------------------------------------------------------------

    def _exec(
        self,
        plan: list[Step],
        env: list[Any],
        free: list[tuple[int, ...]] | None = None,
        observer: Callable[[int, Any], None] | None = None,
    ) -> None:
        i = -1
        try:
            if observer is not None:
                for i, (fn, ins, outs, _, _) in enumerate(plan):
                    res = fn([env[s] for s in ins])
                    for s, v in zip(outs, res):
                        env[s] = v
                        observer(s, v)
                    if free is not None:
                        for s in free[i]:
                            env[s] = None
            elif free is None:
                for fn, ins, outs, _, _ in plan:
                    res = fn([env[s] for s in ins])
                    for s, v in zip(outs, res):
                        env[s] = v
            else:
                for i, (fn, ins, outs, _, _) in enumerate(plan):
                    res = fn([env[s] for s in ins])
                    for s, v in zip(outs, res):
                        env[s] = v
                    for s in free[i]:
                        env[s] = None
        except ExecutionError:
            raise
        except Exception as e:  # report which op failed, where
            op = self._find_failed(plan, env, i)
            where = f" at {_describe(op)}" if op is not None else ""
            name = op.name if op is not None else "?"
            raise ExecutionError(f"'{name}' op{where} failed: {type(e).__name__}: {e}", op) from e

    @staticmethod
    def _find_failed(plan: list[Step], env: list[Any], i: int) -> Operation | None:
        if 0 <= i < len(plan):
            return plan[i][4]
        # Without an index (fast loop): the first step whose outputs were not all produced.
        for _, _, outs, _, op in plan:
            if (
                any(env[s] is None for s in outs)
                and op.results
                and not all(isinstance(r.type, NoneType) for r in op.results)
            ):
                return op
        return None

    def _bind_inputs(self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray]) -> list[Any]:
        env: list[Any] = self._template.copy()
        if isinstance(inputs, Mapping):
            missing = [n for n in self.input_names if n not in inputs]
            if missing:
                raise ExecutionError(
                    f"missing input(s): {', '.join(missing)} (expected {', '.join(self.input_names)})"
                )
            vals = [inputs[n] for n in self.input_names]
        else:
            vals = list(inputs)
            if len(vals) != len(self._arg_slots):
                raise ExecutionError(f"expected {len(self._arg_slots)} inputs, got {len(vals)}")
        for s, v in zip(self._arg_slots, vals):
            env[s] = np.asarray(v)
        return env

    def _run(
        self, env: list[Any], observer: Callable[[int, Any], None] | None = None, keep_env: bool = False
    ) -> list[Any]:
        """Run the function in ``env`` (its arguments bound) and return its results in order: the
        fast plan (in place, freeing dead values) unless ``keep_env``."""
        if self._cfg is not None:
            return self._run_cfg(self._cfg, env, observer)
        if keep_env:
            self._exec(self.plan, env, None, observer)
        else:
            self._exec(self.fast_plan, env, self._free, observer)
        return [env[s] for s in self._ret_slots]

    def _run_cfg(
        self, cfg: list[_BlockPlan], env: list[Any], observer: Callable[[int, Any], None] | None = None
    ) -> list[Any]:
        """Run blocks from the entry block of ``cfg``, following the branches, until a return; its
        operands' values are the results."""
        bp = cfg[0]
        while True:
            self._exec(bp.plan, env, bp.free, observer)
            vals = [env[s] for s in bp.ins]
            if bp.branch is None:
                return vals
            try:
                i, args = bp.branch(vals)
                bp, slots = bp.targets[i]
            except Exception as e:
                term = bp.term
                raise ExecutionError(
                    f"'{term.name}' op at {_describe(term)} failed: {type(e).__name__}: {e}", term
                ) from e
            for s, v in zip(slots, list(args)):  # every argument read before any is written
                env[s] = v

    def call(self, args: Sequence[Any]) -> list[Any]:
        """Run the function on ``args`` (by position, as they are) and return its results in order.
        Re-entrant: a function may call itself."""
        env: list[Any] = self._template.copy()
        for s, v in zip(self._arg_slots, args):
            env[s] = v
        saved = self._env
        self._env = env  # region runners read the environment from here
        try:
            return self._run(env)
        finally:
            self._env = saved

    def profile(
        self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], runs: int = 2
    ) -> list[tuple[str, float, int]]:
        """Seconds spent per op type (best of ``runs`` runs of the fast plan) and the op count,
        most expensive first (single-block functions: a model's graph)."""
        import time

        if self._cfg is not None:
            raise ExecutionError("profile runs functions of one block only")
        best: dict[str, float] = {}
        counts: dict[str, int] = {}
        for r in range(runs):
            env = self._bind_inputs(inputs)
            self._env = env
            per: dict[str, float] = {}
            for i, (fn, ins, outs, _, op) in enumerate(self.fast_plan):
                t0 = time.perf_counter()
                res = fn([env[s] for s in ins])
                per[op.name] = per.get(op.name, 0.0) + time.perf_counter() - t0
                if r == 0:
                    counts[op.name] = counts.get(op.name, 0) + 1
                for s, v in zip(outs, res):
                    env[s] = v
                for s in self._free[i]:
                    env[s] = None
            for k, v in per.items():
                best[k] = min(best.get(k, v), v)
        self._env = []
        return sorted(((k, v, counts[k]) for k, v in best.items()), key=lambda t: -t[1])

    @property
    def slot_names(self) -> list[tuple[int, str]]:
        """``(slot, tensor name)`` for every named value, in network order (a name may repeat)."""
        return list(self._names)

    def execute(
        self,
        inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray],
        observer: Callable[[int, Any], None] | None = None,
        keep_env: bool = False,
    ) -> list[Any] | None:
        """Run once, calling ``observer(slot, value)`` as each value is produced (see
        :attr:`slot_names`). With ``keep_env`` nothing is freed or computed in place and the value of
        every slot is returned; otherwise the fast plan runs (in place, freeing dead values) and None
        is returned. Errors raise :class:`ExecutionError` naming the failing op."""
        env = self._bind_inputs(inputs)
        self._env = env  # region runners read the environment from here
        try:
            self._run(env, observer, keep_env)
        finally:
            self._env = []
        return env if keep_env else None

    def run(
        self, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], dump_all: bool = False
    ) -> dict[str, np.ndarray]:
        """Execute on ``inputs`` (by input name or position). Returns the outputs by ONNX output name;
        with ``dump_all``, every intermediate tensor by its location name as well."""
        env = self._bind_inputs(inputs)
        self._env = env
        try:
            results = self._run(env, keep_env=dump_all)
        finally:
            self._env = []
        out: dict[str, np.ndarray] = {}
        if dump_all:
            for s, n in self._names:
                v = env[s]
                if v is not None:
                    out[n] = v
        for v, n in zip(results, self.output_names):
            out[n] = v
        return out


def _refuse(error: ExecutionError) -> Callable[[list[Any]], Sequence[Any]]:
    """A step that raises ``error`` instead of running its op."""

    def step(ins: list[Any]) -> Sequence[Any]:
        raise error

    return step


def _guarded(
    fast: Callable[[list[Any]], Sequence[Any]],
    slow: Callable[[list[Any]], Sequence[Any]],
    i: int,
    res_t: Any,
) -> Callable[[list[Any]], Sequence[Any]]:
    """``fast`` (in place into input ``i``) when that input really is a writable array of the
    result's shape and dtype at run time, else ``slow``."""
    from lamina.ir.attributes import element_type_to_dtype

    shape = tuple(res_t.shape)
    try:
        dtype = element_type_to_dtype(res_t.element_type)
    except ValueError:
        return slow

    def step(ins: list[Any]) -> Sequence[Any]:
        a = ins[i]
        if type(a) is np.ndarray and a.shape == shape and a.dtype == dtype and a.flags.writeable:
            return fast(ins)
        return slow(ins)

    return step


def run_module(
    module: Operation, inputs: Mapping[str, np.ndarray] | Sequence[np.ndarray], dump_all: bool = False
) -> dict[str, np.ndarray]:
    """One-shot helper: compile ``module`` and run it."""
    return Interpreter(module).run(inputs, dump_all=dump_all)

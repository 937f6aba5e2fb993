"""``inline``: inline calls to callables defined in the same symbol table (MLIR's inliner).

The call graph is built over ops implementing CallableOpInterface; strongly connected components
are processed callees first. A call (CallOpInterface) with a flat symbol callee is inlined when the
callee has a body, neither the call nor the callee carries ``no_inline``, the callee is not in the
caller's SCC and not recursive itself, and the signature matches. A single-block callee ending in a ReturnLike
terminator is spliced before the call; a multi-block one is inlined as a CFG with ``cf.br`` to a
continuation block (when the cf dialect is available). Inlined ops get ``callsite(callee at call)``
locations. After inlining into a callable its ``default-pipeline`` (``canonicalize``) runs on it,
and private callables left without uses are erased.
"""

from __future__ import annotations

from typing import Any

from lamina.ir.core import Block, IRMapping, Operation, Region, Value
from lamina.ir.location import CallSiteLoc
from lamina.ir.traits import CallableOpInterface, CallOpInterface, ReturnLike
from lamina.passes import Option, Pass, Statistic, register_pass
from lamina.transforms.symbol_dce import is_symbol_table, symbol_name, symbol_uses_in, symbol_visibility


def _nearest_table(op: Operation) -> Operation | None:
    p = op.parent_op()
    while p is not None and not is_symbol_table(p):
        p = p.parent_op()
    return p


def _lookup(table: Operation, name: str, cache: dict[Operation, dict[str, Operation]]) -> Operation | None:
    syms = cache.get(table)
    if syms is None:
        syms = {}
        for r in table.regions:
            for b in r.blocks:
                for o in b:
                    n = symbol_name(o)
                    if n is not None:
                        syms.setdefault(n, o)
        cache[table] = syms
    return syms.get(name)


def _callable_region(op: Operation) -> Region | None:
    c = CallableOpInterface.get(op)
    if c is None:
        return None
    try:
        return c.callable_region()
    except NotImplementedError:
        return None


def _has_no_inline(op: Operation) -> bool:
    return op.get_attr("no_inline") is not None


def _tarjan(nodes: list[Operation], edges: dict[Operation, list[Operation]]) -> list[list[Operation]]:
    """SCCs in reverse topological order (callees before callers)."""
    index: dict[Operation, int] = {}
    low: dict[Operation, int] = {}
    on_stack: set[Operation] = set()
    stack: list[Operation] = []
    out: list[list[Operation]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work: list[tuple[Operation, int]] = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on_stack.add(v)
            succ = edges.get(v, [])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w is v:
                        break
                out.append(comp)
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[v])
    return out


def _remap_locations(op: Operation, call_loc: Any) -> None:
    for o in op.walk_ops():
        o.location = CallSiteLoc(o.location, call_loc)


def _branch_class() -> Any:
    try:
        from lamina.ir.context import lookup_dialect

        d = lookup_dialect("cf")
    except Exception:
        return None
    return d.ops.get("cf.br") if d is not None else None


def inline_call(call: Operation, callee: Operation) -> bool:
    """Inline ``callee``'s body at ``call``; returns False (changing nothing) if it cannot."""
    region = _callable_region(callee)
    if region is None or not region.blocks or call.parent is None:
        return False
    ci = CallOpInterface.get(call)
    args = list(ci.arg_operands()) if ci is not None else call.operands
    entry = region.blocks[0]
    if len(args) != len(entry.args) or any(a.type is not b.type for a, b in zip(args, entry.args)):
        return False
    # Every block must end in a terminator; returns must match the call's results.
    returns = []
    for b in region.blocks:
        t = b.last_op
        if t is None:
            return False
        if ReturnLike in t.traits:
            if len(t.operands) != len(call.results) or any(
                v.type is not r.type for v, r in zip(t.operands, call.results)
            ):
                return False
            returns.append(t)
    if not returns:
        return False
    call_loc = call.location
    if len(region.blocks) == 1:
        mapping = IRMapping()
        for a, v in zip(entry.args, args):
            mapping.map(a, v)
        block = call.parent
        term = entry.last_op
        for op in entry:
            if op is term:
                break
            new = op.clone(mapping)
            _remap_locations(new, call_loc)
            block.insert_before(call, new)
        results = [mapping.lookup(v) for v in term.operands]
        call.replace_all_uses_with(results)
        call.erase()
        return True
    br = _branch_class()
    if br is None:
        return False
    # Multi-block: split the caller block after the call; the continuation takes the results.
    block = call.parent
    parent_region = block.parent
    assert parent_region is not None
    nxt = call.next_op
    cont = block.split_before(nxt) if nxt is not None else _append_block_after(block)
    res_args = [cont.add_argument(r.type, call_loc) for r in call.results]
    mapping = IRMapping()
    tmp = Region()
    region.clone_into(tmp, mapping)
    new_blocks = list(tmp.blocks)
    tmp.blocks = []
    idx = parent_region.blocks.index(cont)
    for b in new_blocks:
        b.parent = parent_region
    parent_region.blocks[idx:idx] = new_blocks
    for b in new_blocks:
        for op in list(b):
            _remap_locations(op, call_loc)
        t = b.last_op
        if t is not None and ReturnLike in t.traits:
            vals = t.operands
            brop = br.create(vals, [], {}, {}, 0, [cont], t.location)
            b.insert_before(t, brop)
            t.erase()
    for r, a in zip(call.results, res_args):
        r.replace_all_uses_with(a)
    # Merge the inlined entry block into the call's block.
    first = new_blocks[0]
    for a, v in zip(first.args, args):
        a.replace_all_uses_with(v)
    call.erase()
    op = first.first_op
    while op is not None:
        n = op.next_op
        op.detach()
        block.append(op)
        op = n
    parent_region.blocks.remove(first)
    first.parent = None
    return True


def _append_block_after(block: Block) -> Block:
    new = Block()
    assert block.parent is not None
    block.parent.insert_block_after(block, new)
    return new


@register_pass
class Inliner(Pass):
    name = "inline"
    summary = "Inline function calls"

    default_pipeline = Option(
        str,
        "canonicalize",
        "The optimizer pipeline used for callables that do not have a dedicated optimizer pipeline",
    )
    max_iterations = Option(int, 4, "Maximum number of iterations when inlining within an SCC")

    num_inlined = Statistic("num-inlined-calls", "Number of inlined calls")
    num_erased = Statistic("num-erased-callables", "Number of dead callables erased")

    def run_on_operation(self, op: Operation) -> None:
        cache: dict[Operation, dict[str, Operation]] = {}
        callables = [o for o in op.walk_ops() if o is not op and _callable_region(o) is not None]
        callable_set = set(callables)

        def calls_in(c: Operation) -> list[tuple[Operation, Operation | None]]:
            out: list[tuple[Operation, Operation | None]] = []
            region = _callable_region(c)
            if region is None:
                return out
            for b in region.blocks:
                for o in b:
                    for n in o.walk_ops():
                        ci = CallOpInterface.get(n)
                        if ci is None:
                            continue
                        callee = ci.callee()
                        target = None
                        if not isinstance(callee, Value) and getattr(callee, "is_flat", False):
                            table = _nearest_table(n)
                            if table is not None:
                                target = _lookup(table, callee.root, cache)
                        out.append((n, target if target in callable_set else None))
            return out

        edges = {c: [t for _, t in calls_in(c) if t is not None] for c in callables}
        sccs = _tarjan(callables, edges)
        # Callables in a cycle (an SCC of several nodes, or a self-call) are never inlined.
        recursive: set[Operation] = set()
        for scc in sccs:
            if len(scc) > 1 or scc[0] in edges.get(scc[0], ()):
                recursive.update(scc)
        for scc in sccs:
            in_scc = set(scc)
            for node in scc:
                for _ in range(max(1, self.max_iterations)):
                    progress = False
                    for call, target in calls_in(node):
                        if target is None or target in in_scc or target in recursive or call.parent is None:
                            continue
                        if _has_no_inline(call) or _has_no_inline(target):
                            continue
                        if inline_call(call, target):
                            self.num_inlined += 1
                            progress = True
                    if not progress:
                        break
                if self.default_pipeline:
                    self._optimize(node)
        self._erase_dead_callables(op, callables)

    def _optimize(self, node: Operation) -> None:
        from lamina.passes.manager import PassManager

        pm = PassManager(self.context, anchor=None)
        pm.add_pipeline(self.default_pipeline)
        pm.enable_verifier(False)
        if not pm.run(node):
            self.signal_failure()

    def _erase_dead_callables(self, root: Operation, callables: list[Operation]) -> None:
        tables = {t for t in (_nearest_table(c) for c in callables) if t is not None}
        if is_symbol_table(root):
            tables.add(root)
        changed = True
        while changed:
            changed = False
            used: set[tuple[Operation, str]] = set()
            for t in tables:
                for _user, ref in symbol_uses_in(t):
                    used.add((t, ref.root))
            for c in callables:
                if c.parent is None or symbol_visibility(c) != "private":
                    continue
                t = _nearest_table(c)
                name = symbol_name(c)
                if t is None or name is None or (t, name) in used:
                    continue
                c.drop_all_references()
                c.erase()
                self.num_erased += 1
                changed = True

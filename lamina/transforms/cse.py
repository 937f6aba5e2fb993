"""``cse``: common sub-expression elimination (MLIR semantics).

Only ops without memory effects, regions or successors, that are not terminators, are
candidates. Two ops are equivalent when they have the same name, operands, result types,
properties and discardable attributes. Known ops are kept in scoped hash tables that follow
dominance (the dominator tree of :mod:`lamina.ir.dominance`, the verifier's): an op in a block is
visible in the blocks it dominates and in the regions nested below it, except across an op that is
IsolatedFromAbove (which starts a fresh table). Trivially dead ops met on the way are erased too.
"""

from __future__ import annotations

from lamina.ir.core import Block, Operation, Region
from lamina.ir.dominance import DominanceInfo
from lamina.ir.location import UnknownLoc
from lamina.ir.traits import IsolatedFromAbove, IsTerminator, NoMemoryEffect
from lamina.passes import Pass, Statistic, register_pass
from lamina.rewrite.greedy import is_trivially_dead


class ScopedTable:
    """A stack of dicts: lookups see every enclosing scope."""

    __slots__ = ("scopes",)

    def __init__(self) -> None:
        self.scopes: list[dict] = [{}]

    def push(self) -> None:
        self.scopes.append({})

    def pop(self) -> None:
        self.scopes.pop()

    def lookup(self, key: object) -> Operation | None:
        for s in reversed(self.scopes):
            v = s.get(key)
            if v is not None:
                return v
        return None

    def insert(self, key: object, op: Operation) -> None:
        self.scopes[-1][key] = op


def _cse_key(op: Operation) -> tuple | None:
    try:
        key = (
            op.name,
            tuple(o.value for o in op.operand_uses),
            tuple(r.type for r in op.results),
            tuple(sorted(op.properties.items(), key=lambda kv: kv[0])) if op.properties else (),
            tuple(sorted(op.attributes.items(), key=lambda kv: kv[0])) if op.attributes else (),
        )
        hash(key)
    except TypeError:
        return None
    return key


class _CSE:
    def __init__(self) -> None:
        self.to_erase: list[Operation] = []
        self.num_cse = 0
        self.num_dce = 0

    def simplify_region(self, table: ScopedTable, region: Region) -> None:
        if not region.blocks:
            return
        if len(region.blocks) == 1:
            table.push()
            self.simplify_block(table, region.blocks[0])
            table.pop()
            return
        dom = DominanceInfo(region)
        # Depth-first walk of the dominator tree with one scope per block.
        stack: list[tuple[Block, bool]] = [(region.blocks[0], False)]
        while stack:
            b, done = stack.pop()
            if done:
                table.pop()
                continue
            table.push()
            self.simplify_block(table, b)
            stack.append((b, True))
            for c in reversed(dom.children(b)):
                stack.append((c, False))

    def simplify_block(self, table: ScopedTable, block: Block) -> None:
        for op in block:
            if op.regions:
                if IsolatedFromAbove in op.traits:
                    nested = ScopedTable()
                    for r in op.regions:
                        self.simplify_region(nested, r)
                else:
                    for r in op.regions:
                        self.simplify_region(table, r)
            self.simplify_op(table, op)

    def simplify_op(self, table: ScopedTable, op: Operation) -> None:
        traits = op.traits
        if IsTerminator in traits:
            return
        if is_trivially_dead(op):
            self.to_erase.append(op)
            self.num_dce += 1
            return
        if op.regions or op._successors or NoMemoryEffect not in traits or not op.results:
            return
        key = _cse_key(op)
        if key is None:
            return
        existing = table.lookup(key)
        if existing is None:
            table.insert(key, op)
            return
        for old, new in zip(op.results, existing.results):
            old.replace_all_uses_with(new)
        if isinstance(existing.location, UnknownLoc) and not isinstance(op.location, UnknownLoc):
            existing.location = op.location
        self.to_erase.append(op)
        self.num_cse += 1


def cse(op: Operation) -> tuple[int, int]:
    """Run CSE on ``op``'s regions; returns ``(num_cse, num_dce)``."""
    c = _CSE()
    table = ScopedTable()
    for r in op.regions:
        c.simplify_region(table, r)
    for o in reversed(c.to_erase):
        if o.parent is not None and not o.has_uses():
            o.erase()
    return c.num_cse, c.num_dce


@register_pass
class CSE(Pass):
    name = "cse"
    summary = "Eliminate common sub-expressions"

    num_cse = Statistic("num-cse'd", "Number of operations CSE'd")
    num_dce = Statistic("num-dce'd", "Number of operations DCE'd")

    def run_on_operation(self, op: Operation) -> None:
        n_cse, n_dce = cse(op)
        self.num_cse += n_cse
        self.num_dce += n_dce

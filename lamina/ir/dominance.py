"""Dominance between blocks of a region (Cooper, Harvey & Kennedy's iterative algorithm).

:class:`DominanceInfo` for one region computes the immediate dominators of the blocks reachable from
the entry block and numbers the dominator tree (enter/exit times of a DFS), so that
``dominates(a, b)`` is O(1). As in LLVM and MLIR, an unreachable block is dominated by every block
and dominates no reachable block.

:func:`value_dominates` answers the question the verifier asks: is the value visible at (and
defined before) the given op, across blocks and nested regions.
"""

from __future__ import annotations

from lamina.ir.core import Block, BlockArgument, Operation, OpResult, Region, Value


class DominanceInfo:
    """Dominator tree of the blocks of one region."""

    __slots__ = ("_children", "_tin", "_tout", "idom", "reachable", "region")

    def __init__(self, region: Region) -> None:
        self.region = region
        blocks = region.blocks
        self.idom: dict[Block, Block] = {}
        self._tin: dict[Block, int] = {}
        self._tout: dict[Block, int] = {}
        self.reachable: set[Block] = set()
        self._children: dict[Block, list[Block]] = {}
        if not blocks:
            return
        entry = blocks[0]
        # Reverse post-order of the blocks reachable from the entry (iterative DFS).
        post: list[Block] = []
        seen = {entry}
        stack: list[tuple[Block, list[Block], int]] = [(entry, _succs(entry, region), 0)]
        while stack:
            b, succs, i = stack[-1]
            if i < len(succs):
                stack[-1] = (b, succs, i + 1)
                s = succs[i]
                if s not in seen:
                    seen.add(s)
                    stack.append((s, _succs(s, region), 0))
            else:
                stack.pop()
                post.append(b)
        self.reachable = seen
        po_num = {b: i for i, b in enumerate(post)}
        rpo = post[::-1]
        preds: dict[Block, list[Block]] = {b: [] for b in rpo}
        for b in rpo:
            for s in _succs(b, region):
                if s in preds:
                    preds[s].append(b)
        idom: dict[Block, Block] = {entry: entry}
        changed = True
        while changed:
            changed = False
            for b in rpo[1:]:
                new: Block | None = None
                for p in preds[b]:
                    if p not in idom:
                        continue
                    if new is None:
                        new = p
                        continue
                    # intersect(p, new)
                    f1, f2 = p, new
                    while f1 is not f2:
                        while po_num[f1] < po_num[f2]:
                            f1 = idom[f1]
                        while po_num[f2] < po_num[f1]:
                            f2 = idom[f2]
                    new = f1
                if new is not None and idom.get(b) is not new:
                    idom[b] = new
                    changed = True
        self.idom = idom
        # Number the dominator tree for O(1) queries.
        children: dict[Block, list[Block]] = {b: [] for b in rpo}
        for b, d in idom.items():  # (in reverse post-order: the order blocks got their idom)
            if b is not d:
                children[d].append(b)
        self._children = children
        t = 0
        tin, tout = self._tin, self._tout
        st: list[tuple[Block, int]] = [(entry, 0)]
        tin[entry] = t
        while st:
            b, i = st[-1]
            ch = children[b]
            if i < len(ch):
                st[-1] = (b, i + 1)
                c = ch[i]
                t += 1
                tin[c] = t
                st.append((c, 0))
            else:
                st.pop()
                t += 1
                tout[b] = t

    def is_reachable(self, b: Block) -> bool:
        return b in self.reachable

    def dominates(self, a: Block, b: Block) -> bool:
        """Whether block ``a`` dominates block ``b`` (both in this region)."""
        if a is b:
            return True
        tb = self._tin.get(b)
        if tb is None:  # b unreachable: dominated by anything
            return True
        ta = self._tin.get(a)
        if ta is None:  # a unreachable: dominates nothing reachable
            return False
        return ta <= tb and self._tout[b] <= self._tout[a]

    def properly_dominates(self, a: Block, b: Block) -> bool:
        return a is not b and self.dominates(a, b)

    def children(self, b: Block) -> list[Block]:
        """The blocks ``b`` immediately dominates, in reverse post-order (none if unreachable)."""
        return self._children.get(b, [])

    def immediate_dominator(self, b: Block) -> Block | None:
        d = self.idom.get(b)
        return None if d is None or d is b else d


def _succs(b: Block, region: Region) -> list[Block]:
    last = b._last
    if last is None or not last._successors:
        return []
    return [s.block for s in last._successors if s.block.parent is region]


class DominanceCache:
    """One :class:`DominanceInfo` per region, computed on demand."""

    __slots__ = ("_infos",)

    def __init__(self) -> None:
        self._infos: dict[Region, DominanceInfo] = {}

    def get(self, region: Region) -> DominanceInfo:
        info = self._infos.get(region)
        if info is None:
            info = self._infos[region] = DominanceInfo(region)
        return info

    def block_dominates(self, a: Block, b: Block) -> bool:
        if a is b:
            return True
        if a.parent is not b.parent or a.parent is None:
            return False
        return self.get(a.parent).dominates(a, b)

    def op_properly_dominates(self, a: Operation, b: Operation) -> bool:
        """``a`` properly dominates ``b``: ``b`` (or its ancestor in ``a``'s block's region) comes
        after ``a``."""
        region = a.parent_region
        if region is None:
            return False
        anc: Operation | None = b
        while anc is not None and anc.parent_region is not region:
            anc = anc.parent_op()
        if anc is None or anc is a:
            return False
        if anc.parent is a.parent:
            return a.is_before_in_block(anc)
        return self.block_dominates(a.parent, anc.parent)  # type: ignore[arg-type]

    def value_dominates(self, v: Value, user: Operation) -> bool:
        """Whether ``v`` is defined before its use by ``user`` on every path."""
        if isinstance(v, OpResult):
            return self.op_properly_dominates(v.op, user)
        assert isinstance(v, BlockArgument)
        block = v.block
        anc: Operation | None = user
        while anc is not None and anc.parent_region is not block.parent:
            anc = anc.parent_op()
        if anc is None:
            return False
        return self.block_dominates(block, anc.parent)  # type: ignore[arg-type]

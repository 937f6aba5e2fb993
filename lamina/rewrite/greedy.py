"""The greedy pattern rewrite driver (MLIR's ``applyPatternsGreedily``).

Each *iteration* seeds a worklist with every op nested in the root's regions (post-order, or
pre-order with ``top_down``), registering constants on the way with a per-iteration
:class:`OperationFolder` (identical constants of an isolated region are deduplicated and hoisted to
the start of its entry block). Then it pops ops until the worklist is empty:

1. an op that is trivially dead (no used results, no memory effects, not a terminator) is erased;
2. a non-constant op is folded: ``op.fold(constant_operands)`` may return attributes (materialized
   as constants by the op's dialect, before the op) or values, and the op's uses are replaced;
   commutative ops get their constant operands moved to the end (an in-place fold);
3. otherwise the patterns rooted at the op's name (and the any-op patterns) are tried by benefit.

Changed ops re-add their users and operands' defining ops (and their ancestors) to the worklist.
Iterations continue while something changed, up to ``max_iterations``. The cost of an iteration is
linear in the number of ops plus the work the rewrites cause.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from lamina.ir.attributes import Attribute
from lamina.ir.constants import constant_value
from lamina.ir.core import Block, Operation, Region, Value
from lamina.ir.diagnostics import emit
from lamina.ir.location import UnknownLoc
from lamina.ir.traits import (
    Commutative,
    ConstantLike,
    IsolatedFromAbove,
    IsTerminator,
    NoMemoryEffect,
)
from lamina.rewrite.pattern import FrozenPatternSet, PatternRewriter, RewritePattern, RewriterListener, freeze

_UNKNOWN = UnknownLoc()


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def would_be_trivially_dead(op: Operation) -> bool:
    """True if the op has no memory effects (recursively for its regions) and is not a terminator."""
    traits = op.traits
    if IsTerminator in traits or NoMemoryEffect not in traits:
        return False
    for region in op.regions:
        for b in region.blocks:
            for nested in b:
                if IsTerminator in nested.traits and not nested.regions:
                    continue
                if not would_be_trivially_dead(nested):
                    return False
    return True


def is_trivially_dead(op: Operation) -> bool:
    for r in op.results:
        if r.uses:
            return False
    return would_be_trivially_dead(op)


def insertion_region(block: Block | None) -> Region | None:
    """The region where constants for an op in ``block`` go: the nearest region whose parent op is
    isolated from above (or has no parent)."""
    region = block.parent if block is not None else None
    while region is not None:
        parent = region.parent
        if parent is None or IsolatedFromAbove in parent.traits or parent.parent is None:
            return region
        region = parent.parent.parent if parent.parent is not None else None
    return None


def _dialect_of(op: Operation) -> Any:
    from lamina.ir.context import lookup_dialect

    try:
        return lookup_dialect(op.dialect_name)
    except Exception:
        return None


def materialize_constant(op: Operation, value: Attribute, type: Any) -> Operation | None:
    """Ask ``op``'s dialect for a constant op producing ``value`` of ``type`` (detached or inserted)."""
    d = _dialect_of(op)
    fn = getattr(d, "materialize_constant", None) if d is not None else None
    if fn is None:
        return None
    return fn(value, type, op.location)


# --------------------------------------------------------------------------------------------
# the worklist
# --------------------------------------------------------------------------------------------


class Worklist:
    """A LIFO of ops with O(1) membership test and removal (removed slots become None)."""

    __slots__ = ("index", "items")

    def __init__(self) -> None:
        self.items: list[Operation | None] = []
        self.index: dict[Operation, int] = {}

    def push(self, op: Operation) -> None:
        if op in self.index:
            return
        self.index[op] = len(self.items)
        self.items.append(op)

    def pop(self) -> Operation | None:
        items = self.items
        while items:
            op = items.pop()
            if op is not None:
                del self.index[op]
                return op
        return None

    def remove(self, op: Operation) -> None:
        i = self.index.pop(op, None)
        if i is not None:
            self.items[i] = None

    def reverse(self) -> None:
        self.items.reverse()
        self.index = {op: i for i, op in enumerate(self.items) if op is not None}

    def clear(self) -> None:
        self.items.clear()
        self.index.clear()

    def __bool__(self) -> bool:
        return bool(self.index)

    def __len__(self) -> int:
        return len(self.index)


class OperationFolder:
    """Deduplicates constants per insertion region (MLIR's OperationFolder, as the greedy driver
    uses it while seeding the worklist)."""

    __slots__ = ("owned", "rewriter", "scopes")

    def __init__(self, rewriter: PatternRewriter) -> None:
        self.scopes: dict[Region | None, dict[tuple, Operation]] = {}
        self.owned: dict[Operation, tuple[Region | None, tuple]] = {}
        self.rewriter = rewriter

    def insert_known_constant(self, op: Operation, value: Attribute) -> bool:
        """Register ``op``; returns False if it was replaced by an identical earlier constant."""
        block = op.parent
        region = insertion_region(block)
        try:
            key = (op.dialect_name, value, op.results[0].type)
            hash(key)
        except TypeError:
            return True
        scope = self.scopes.setdefault(region, {})
        existing = scope.get(key)
        if existing is not None and existing is not op:
            self.rewriter.replace_op(op, existing.results)
            existing.location = _UNKNOWN  # it now stands for several source constants
            return False
        if region is not None and region.blocks:
            insert_block = region.blocks[0]
            if block is not insert_block or (
                insert_block.first_op is not op and op.prev_op not in self.owned
            ):
                op.detach()
                insert_block.prepend(op)
        scope[key] = op
        self.owned[op] = (region, key)
        return True

    def notify_removal(self, op: Operation) -> None:
        entry = self.owned.pop(op, None)
        if entry is not None:
            region, key = entry
            scope = self.scopes.get(region)
            if scope is not None and scope.get(key) is op:
                del scope[key]


# --------------------------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------------------------


class GreedyRewriteDriver(RewriterListener):
    """Applies patterns and folding to the ops nested in a root op's regions."""

    def __init__(
        self,
        patterns: FrozenPatternSet | Iterable[RewritePattern | type[RewritePattern]],
        max_iterations: int = 10,
        max_rewrites: int = -1,
        fold: bool = True,
        region_simplify: bool = False,
        top_down: bool = False,
    ) -> None:
        self.patterns = freeze(patterns)
        self.max_iterations = max_iterations
        self.max_rewrites = max_rewrites
        self.fold = fold
        self.region_simplify = region_simplify
        self.top_down = top_down
        self.worklist = Worklist()
        self.rewriter = PatternRewriter(self)
        self.folder = OperationFolder(self.rewriter)
        self.scope: Operation | None = None
        self.iterations = 0
        #: Counters: ``pops``, ``erased_dead``, ``folds``, ``rewrites``, ``pattern_attempts``.
        self.stats: dict[str, int] = {
            "pops": 0,
            "erased_dead": 0,
            "folds": 0,
            "rewrites": 0,
            "pattern_attempts": 0,
        }

    # ---- listener ---------------------------------------------------------------------

    def add_to_worklist(self, op: Operation) -> None:
        """Add ``op`` and its ancestors that are inside the scope."""
        scope = self.scope
        chain: list[Operation] = []
        cur: Operation | None = op
        while cur is not None:
            if cur is scope:
                for o in chain:
                    self.worklist.push(o)
                return
            chain.append(cur)
            cur = cur.parent_op()
        # Not (or no longer) inside the scope: ignore.

    def notify_op_inserted(self, op: Operation) -> None:
        self.add_to_worklist(op)

    def notify_op_modified(self, op: Operation) -> None:
        self.add_to_worklist(op)

    def notify_op_erased(self, op: Operation) -> None:
        for o in op.operand_uses:
            v = o.value
            if len(v.uses) <= 1:
                d = v.defining_op()
                if d is not None:
                    self.add_to_worklist(d)
        self.worklist.remove(op)
        self.folder.notify_removal(op)

    # ---- driving ----------------------------------------------------------------------

    def _collect(self, root: Operation) -> list[Operation]:
        """The ops nested in ``root`` in post-order (or pre-order when top-down)."""
        out: list[Operation] = []
        if self.top_down:
            stack: list[Operation] = []
            for region in reversed(root.regions):
                for block in reversed(region.blocks):
                    stack.extend(block.reversed())
            while stack:
                op = stack.pop()
                out.append(op)
                if op.regions:
                    for region in reversed(op.regions):
                        for block in reversed(region.blocks):
                            stack.extend(block.reversed())
            return out

        def post(op: Operation) -> None:
            for region in op.regions:
                for block in region.blocks:
                    for nested in block:
                        if nested.regions:
                            post(nested)
                        else:
                            out.append(nested)
            if op is not root:
                out.append(op)

        post(root)
        return out

    def simplify(self, root: Operation) -> bool:
        """Run to a fixpoint (or the iteration cap); returns True if it converged."""
        self.scope = root
        continue_rewrites = False
        self.iterations = 0
        while True:
            if self.max_iterations >= 0 and self.iterations >= self.max_iterations:
                break
            self.iterations += 1
            self.worklist.clear()
            self.folder = OperationFolder(self.rewriter)
            for op in self._collect(root):
                if op.parent is None:  # erased while registering constants
                    continue
                if ConstantLike in op.traits:
                    v = constant_value(op)
                    if v is not None and not self.folder.insert_known_constant(op, v):
                        continue
                self.worklist.push(op)
            if self.top_down:
                # Pops come from the end: reverse so that ops are processed in pre-order. Bottom-up
                # processes the post-order list from its end (users before their operands' producers).
                self.worklist.reverse()
            continue_rewrites = self._process()
            if self.region_simplify:
                continue_rewrites |= self._simplify_regions(root)
            if not continue_rewrites:
                break
        return not continue_rewrites

    def _process(self) -> bool:
        changed = False
        rewrites = 0
        wl = self.worklist
        stats = self.stats
        rewriter = self.rewriter
        max_rewrites = self.max_rewrites
        # A cycle of patterns that keep re-adding the same ops would never empty the worklist:
        # bound one iteration's work (generously) so that such input ends as "not converged".
        budget = 64 * len(wl) + 100_000
        while wl and (max_rewrites < 0 or rewrites < max_rewrites):
            budget -= 1
            if budget < 0:
                return True
            op = wl.pop()
            if op is None:
                break
            stats["pops"] += 1
            if is_trivially_dead(op):
                rewriter.erase_op(op)
                stats["erased_dead"] += 1
                changed = True
                continue
            if self.fold and ConstantLike not in op.traits and self._try_fold(op):
                stats["folds"] += 1
                changed = True
                continue
            pats = self.patterns.for_op(op.name)
            if pats:
                rewriter.block, rewriter.before = op.parent, op
                rewriter.loc = op.location
                rewriter.current_op = op
                for p in pats:
                    stats["pattern_attempts"] += 1
                    if p.match_and_rewrite(op, rewriter):
                        stats["rewrites"] += 1
                        rewrites += 1
                        changed = True
                        break
                rewriter.current_op = None
        return changed

    def _try_fold(self, op: Operation) -> bool:
        operands = op.operand_uses
        consts: list[Attribute | None] = (
            [constant_value(o.value.defining_op()) for o in operands] if operands else []
        )
        result = op.fold(consts)
        if result is None:
            return self._fold_commutative(op, consts)
        result = list(result) if not isinstance(result, (Attribute, Value)) else [result]
        if not result:
            # Modified in place.
            self.notify_op_modified(op)
            return True
        if len(result) != len(op.results):
            return False
        if all(r is res for r, res in zip(result, op.results)):
            return False  # folded to itself: nothing to do
        rewriter = self.rewriter
        replacements: list[Value] = []
        created: list[Operation] = []
        for r, res in zip(result, op.results):
            if isinstance(r, Value):
                replacements.append(r)
                continue
            c = materialize_constant(op, r, res.type)
            if c is None:
                for x in created:
                    rewriter.erase_op(x)
                return False
            if c.parent is None:
                rewriter.set_insertion_point(op)
                rewriter.insert(c)
            created.append(c)
            replacements.append(c.results[0])
        rewriter.replace_op(op, replacements)
        return True

    def _fold_commutative(self, op: Operation, consts: Sequence[Attribute | None]) -> bool:
        """Move constant operands of a commutative op to the end (MLIR's trait folder)."""
        if len(consts) < 2 or Commutative not in op.traits:
            return False
        non_const = [i for i, c in enumerate(consts) if c is None]
        const = [i for i, c in enumerate(consts) if c is not None]
        order = non_const + const
        if order == list(range(len(consts))):
            return False
        vals = op.operands
        for i, j in enumerate(order):
            op.operand_uses[i].set(vals[j])
        self.notify_op_modified(op)
        return True

    def _simplify_regions(self, root: Operation) -> bool:
        """Erase blocks unreachable from their region's entry block."""
        changed = False
        todo = [op for op in root.walk_ops() if any(len(r.blocks) > 1 for r in op.regions)]
        for op in todo:
            if op is not root and op.parent is None:
                continue
            for region in op.regions:
                if len(region.blocks) > 1 and erase_unreachable_blocks(region, self.rewriter):
                    changed = True
        return changed


def erase_unreachable_blocks(region: Region, rewriter: PatternRewriter | None = None) -> bool:
    """Erase the blocks of ``region`` not reachable from its entry block; True if any."""
    if len(region.blocks) <= 1:
        return False
    reachable: set[Block] = set()
    stack = [region.blocks[0]]
    while stack:
        b = stack.pop()
        if b in reachable:
            continue
        reachable.add(b)
        stack.extend(b.successors)
    dead = [b for b in region.blocks if b not in reachable]
    if not dead:
        return False
    for b in dead:
        for op in b.reversed():
            if rewriter is not None:
                rewriter._announce_erased(op)
            op.drop_all_references()
    for b in dead:
        for op in b:
            for r in op.results:
                r.uses.clear()
        for a in b.args:
            a.uses.clear()
        b.uses.clear()
        region.blocks.remove(b)
        b.parent = None
    return True


def apply_patterns_greedily(
    op: Operation,
    patterns: FrozenPatternSet | Iterable[RewritePattern | type[RewritePattern]],
    max_iterations: int = 10,
    max_rewrites: int = -1,
    fold: bool = True,
    region_simplify: bool = False,
    top_down: bool = False,
    report: str | None = None,
    stats: dict[str, int] | None = None,
) -> bool:
    """Apply ``patterns`` (and folding) to every op nested in ``op``'s regions until nothing changes.

    Returns True if it converged. When it did not, and ``report`` is ``"error"``/``"warning"``/
    ``"remark"``, a diagnostic ``greedy pattern rewriter failed to converge after N iterations`` is
    emitted at ``op``. ``stats``, if given, receives the driver's counters (pops, folds, ...)."""
    driver = GreedyRewriteDriver(patterns, max_iterations, max_rewrites, fold, region_simplify, top_down)
    converged = driver.simplify(op)
    if stats is not None:
        stats.update(driver.stats)
        stats["iterations"] = driver.iterations
    if not converged and report:
        emit(
            report,
            op.location,
            f"greedy pattern rewriter failed to converge after {max_iterations} iterations",
        )
    return converged


def apply_op_patterns(
    ops: Sequence[Operation],
    patterns: FrozenPatternSet | Iterable[RewritePattern | type[RewritePattern]],
    max_rewrites: int = -1,
) -> bool:
    """Apply patterns and folding to ``ops`` only (and ops the rewrites create/affect); no constant
    deduplication. Returns True if the worklist emptied."""
    driver = GreedyRewriteDriver(patterns, max_rewrites=max_rewrites)
    driver.scope = None
    for o in ops:
        driver.worklist.push(o)
    driver.worklist.reverse()
    driver.add_to_worklist = driver.worklist.push  # type: ignore[method-assign]
    driver._process()
    return not driver.worklist

"""Rewrite patterns and the pattern rewriter.

A :class:`RewritePattern` matches ops of one kind (``root``: an op class, an op name, or None for
any op) and rewrites them through a :class:`PatternRewriter`, which keeps use lists consistent and
tells its listener (the greedy driver, the conversion driver) what changed::

    class FoldDoubleNeg(RewritePattern):
        root = NegOp
        benefit = 2

        def match_and_rewrite(self, op, rewriter):
            inner = op.input.defining_op()
            if not isinstance(inner, NegOp):
                return False
            rewriter.replace_op(op, [inner.input])
            return True
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar, TypeVar

from lamina.ir.core import Block, IRError, IRMapping, Operation, Region, Value
from lamina.ir.location import Location

OpT = TypeVar("OpT", bound=Operation)


def root_name(root: Any) -> str | None:
    """The op name a pattern root denotes (a class's ``name`` or the string itself)."""
    if root is None:
        return None
    if isinstance(root, str):
        return root
    return getattr(root, "name", None) or None


class RewritePattern:
    """Base of rewrite patterns. ``match_and_rewrite`` returns True if it changed the IR
    (and must not change it otherwise)."""

    root: ClassVar[Any] = None
    benefit: ClassVar[int] = 1
    #: A label for debugging and filtering (defaults to the class name).
    label: ClassVar[str] = ""

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        raise NotImplementedError

    @property
    def root_name(self) -> str | None:
        return root_name(self.root)

    @property
    def debug_name(self) -> str:
        return self.label or type(self).__name__


class FunctionPattern(RewritePattern):
    """A pattern from a function ``fn(op, rewriter) -> bool``."""

    def __init__(
        self, fn: Callable[[Operation, PatternRewriter], bool], root: Any = None, benefit: int = 1
    ) -> None:
        self.fn = fn
        self.root = root  # type: ignore[misc]
        self.benefit = benefit  # type: ignore[misc]

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> bool:
        return bool(self.fn(op, rewriter))

    @property
    def debug_name(self) -> str:
        return getattr(self.fn, "__name__", "FunctionPattern")


def pattern(root: Any = None, benefit: int = 1) -> Callable[[Callable[..., bool]], FunctionPattern]:
    """Decorator: ``@pattern(AddOp)`` turns ``fn(op, rewriter) -> bool`` into a pattern."""

    def wrap(fn: Callable[..., bool]) -> FunctionPattern:
        return FunctionPattern(fn, root, benefit)

    return wrap


class FrozenPatternSet:
    """Patterns indexed by root op name, each list sorted by decreasing benefit (stable), with the
    any-op patterns merged in by benefit."""

    __slots__ = ("_any", "_by_name", "_cache", "patterns")

    def __init__(self, patterns: Iterable[RewritePattern | type[RewritePattern]] = ()) -> None:
        pats: list[RewritePattern] = [p() if isinstance(p, type) else p for p in patterns]
        self.patterns = pats
        self._by_name: dict[str, list[RewritePattern]] = {}
        self._any: list[RewritePattern] = []
        for p in pats:
            name = p.root_name
            if name is None:
                self._any.append(p)
            else:
                self._by_name.setdefault(name, []).append(p)
        for lst in self._by_name.values():
            lst.sort(key=lambda p: -p.benefit)
        self._any.sort(key=lambda p: -p.benefit)
        self._cache: dict[str, list[RewritePattern]] = {}

    def for_op(self, name: str) -> list[RewritePattern]:
        """The patterns that may match an op named ``name``, best first."""
        got = self._cache.get(name)
        if got is None:
            got = self._by_name.get(name, [])
            if self._any:
                got = sorted([*got, *self._any], key=lambda p: -p.benefit)
            self._cache[name] = got
        return got

    def __len__(self) -> int:
        return len(self.patterns)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.patterns)


def freeze(patterns: FrozenPatternSet | Iterable[RewritePattern | type[RewritePattern]]) -> FrozenPatternSet:
    return patterns if isinstance(patterns, FrozenPatternSet) else FrozenPatternSet(patterns)


class RewriterListener:
    """Callbacks a rewriter makes while changing the IR (all optional)."""

    def notify_op_inserted(self, op: Operation) -> None:
        pass

    def notify_op_modified(self, op: Operation) -> None:
        pass

    def notify_op_replaced(self, op: Operation, values: Sequence[Value]) -> None:
        pass

    def notify_op_erased(self, op: Operation) -> None:
        pass

    def notify_block_erased(self, block: Block) -> None:
        pass

    def notify_match_failure(self, op: Operation, reason: str) -> None:
        pass


class PatternRewriter:
    """Changes IR on behalf of patterns and notifies a :class:`RewriterListener`.

    The insertion point (``block``, ``before``) defaults to just before the op being rewritten;
    ``before`` None means the end of ``block``. Ops created without a location get ``loc``
    (the matched op's location while a pattern runs).
    """

    __slots__ = ("before", "block", "current_op", "listener", "loc")

    def __init__(self, listener: RewriterListener | None = None) -> None:
        self.listener = listener if listener is not None else RewriterListener()
        self.block: Block | None = None
        self.before: Operation | None = None
        self.loc: Location | None = None
        self.current_op: Operation | None = None

    # ---- insertion point ----------------------------------------------------------------

    def set_insertion_point(self, op: Operation) -> None:
        """Insert before ``op``."""
        if op.parent is None:
            raise IRError(f"cannot insert before '{op.name}': it is not in a block")
        self.block, self.before = op.parent, op

    set_insertion_point_before = set_insertion_point

    def set_insertion_point_after(self, op: Operation) -> None:
        if op.parent is None:
            raise IRError(f"cannot insert after '{op.name}': it is not in a block")
        self.block, self.before = op.parent, op.next_op

    def set_insertion_point_to_start(self, block: Block) -> None:
        self.block, self.before = block, block.first_op

    def set_insertion_point_to_end(self, block: Block) -> None:
        self.block, self.before = block, None

    def save_insertion_point(self) -> tuple[Block | None, Operation | None]:
        return (self.block, self.before)

    def restore_insertion_point(self, ip: tuple[Block | None, Operation | None]) -> None:
        self.block, self.before = ip

    # ---- creating ops -------------------------------------------------------------------

    def insert(self, op: OpT) -> OpT:
        """Insert a detached op at the insertion point (nested ops are announced too)."""
        if self.block is None:
            raise IRError("the rewriter has no insertion point")
        self.block.insert_before(self.before, op)
        self._announce_inserted(op)
        return op

    def _announce_inserted(self, op: Operation) -> None:
        listener = self.listener
        listener.notify_op_inserted(op)
        if op.regions:
            for region in op.regions:
                for b in region.blocks:
                    for nested in b:
                        self._announce_inserted(nested)

    def create(self, cls: type[OpT], *, loc: Location | None = None, **kwargs: Any) -> OpT:
        """Build ``cls`` with its keyword builder and insert it at the insertion point."""
        op = cls.build(loc=loc if loc is not None else self.loc, **kwargs)  # type: ignore[attr-defined]
        return self.insert(op)

    def clone(self, op: OpT, mapping: IRMapping | None = None) -> OpT:
        return self.insert(op.clone(mapping if mapping is not None else IRMapping()))

    # ---- replacing and erasing ----------------------------------------------------------

    def replace_op(self, op: Operation, new: Sequence[Value] | Operation) -> None:
        """Replace every use of ``op``'s results with ``new`` (values or an op's results) and erase it."""
        values = list(new.results) if isinstance(new, Operation) else list(new)
        if len(values) != len(op.results):
            raise IRError(
                f"cannot replace {len(op.results)} results of '{op.name}' with {len(values)} values"
            )
        self.listener.notify_op_replaced(op, values)
        for r, v in zip(op.results, values):
            if r is not v:
                self._replace_value(r, v)
        self.erase_op(op)

    def replace_op_with_new_op(self, op: Operation, cls: type[OpT], **kwargs: Any) -> OpT:
        """Create ``cls`` before ``op`` and replace ``op`` with it."""
        ip = self.save_insertion_point()
        self.set_insertion_point(op)
        kwargs.setdefault("loc", op.location)
        new = self.create(cls, **kwargs)
        self.restore_insertion_point(ip)
        self.replace_op(op, new)
        return new

    def _replace_value(self, old: Value, new: Value) -> None:
        listener = self.listener
        for use in list(old.uses):
            use.set(new)
            listener.notify_op_modified(use.owner)

    def replace_all_uses_with(self, old: Value | Operation, new: Value | Sequence[Value] | Operation) -> None:
        """Replace the uses of a value (or of every result of an op), notifying the users."""
        if isinstance(old, Operation):
            vals = list(new.results) if isinstance(new, Operation) else list(new)  # type: ignore[arg-type]
            for r, v in zip(old.results, vals):
                self._replace_value(r, v)
            return
        assert isinstance(new, Value)
        self._replace_value(old, new)

    def replace_uses_with_if(self, old: Value, new: Value, pred: Callable[[Any], bool]) -> None:
        for use in list(old.uses):
            if pred(use):
                use.set(new)
                self.listener.notify_op_modified(use.owner)

    def erase_op(self, op: Operation) -> None:
        """Erase an op whose results are unused (nested ops are announced erased, innermost first)."""
        for r in op.results:
            if r.uses:
                user = next(iter(r.uses)).owner
                raise IRError(
                    f"cannot erase '{op.name}' op at {op.location}: result #{r.index} still has "
                    f"{len(r.uses)} use(s), e.g. by '{user.name}'"
                )
        self._announce_erased(op)
        op.erase()

    def _announce_erased(self, op: Operation) -> None:
        if op.regions:
            for region in op.regions:
                for b in region.blocks:
                    for nested in b.reversed():
                        self._announce_erased(nested)
        self.listener.notify_op_erased(op)

    def erase_block(self, block: Block) -> None:
        for op in list(block.reversed()):
            self._announce_erased(op)
        self.listener.notify_block_erased(block)
        # Drop uses that come from outside the block first so that erase() can proceed.
        for op in block:
            for r in op.results:
                for use in list(r.uses):
                    if not _inside_block(use.owner, block):
                        raise IRError(f"cannot erase block: a result of '{op.name}' is used outside it")
        block.erase()

    # ---- in-place modification ----------------------------------------------------------

    def start_op_modification(self, op: Operation) -> None:
        pass

    def finalize_op_modification(self, op: Operation) -> None:
        self.listener.notify_op_modified(op)

    def cancel_op_modification(self, op: Operation) -> None:
        pass

    def modify_op_in_place(self, op: Operation, fn: Callable[[], Any] | None = None) -> None:
        """Run ``fn`` (which changes ``op``'s operands/attributes) and notify the listener."""
        self.start_op_modification(op)
        if fn is not None:
            fn()
        self.finalize_op_modification(op)

    # ---- blocks and regions -------------------------------------------------------------

    def inline_block_before(
        self,
        source: Block,
        dest: Operation | Block,
        args: Sequence[Value] = (),
        before: Operation | None = None,
    ) -> None:
        """Move every op of ``source`` before ``dest`` (an op, or the end/``before`` of a block),
        replacing ``source``'s arguments with ``args``; ``source`` is left empty and detached."""
        if len(args) != len(source.args):
            raise IRError(f"inline_block_before: {len(args)} values for {len(source.args)} block arguments")
        for a, v in zip(source.args, args):
            self._replace_value(a, v)
        if isinstance(dest, Operation):
            block, anchor = dest.parent, dest
            if block is None:
                raise IRError("inline_block_before: destination op is not in a block")
        else:
            block, anchor = dest, before
        op = source.first_op
        while op is not None:
            nxt = op.next_op
            op.detach()
            block.insert_before(anchor, op)
            self.listener.notify_op_inserted(op)
            op = nxt
        if source.parent is not None and not source.uses:
            source.parent.blocks.remove(source)
            source.parent = None

    def merge_blocks(self, source: Block, dest: Block, args: Sequence[Value] = ()) -> None:
        """Append ``source``'s ops to the end of ``dest``."""
        self.inline_block_before(source, dest, args)

    def inline_region_before(self, region: Region, dest_region: Region, before: Block | None = None) -> None:
        """Move every block of ``region`` into ``dest_region`` before ``before`` (None: at the end)."""
        blocks = list(region.blocks)
        region.blocks = []
        idx = dest_region.blocks.index(before) if before is not None else len(dest_region.blocks)
        for b in blocks:
            b.parent = dest_region
        dest_region.blocks[idx:idx] = blocks
        for b in blocks:
            for op in b:
                self._announce_inserted(op)

    def split_block(self, block: Block, before: Operation) -> Block:
        return block.split_before(before)

    # ---- misc ---------------------------------------------------------------------------

    def notify_match_failure(self, op: Operation, reason: str = "") -> bool:
        """Record why a pattern did not apply; returns False so patterns can ``return`` it."""
        self.listener.notify_match_failure(op, reason)
        return False


def _inside_block(op: Operation, block: Block) -> bool:
    b: Block | None = op.parent
    while b is not None:
        if b is block:
            return True
        parent = b.parent_op()
        b = parent.parent if parent is not None else None
    return False

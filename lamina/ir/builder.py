"""Building IR: insertion points and a builder that creates ops at them.

::

    b = Builder.at_end(func.entry_block)
    c = b.create(ConstantOp, value=IntegerAttr(1, i32), result=i32)
    with b.at(InsertionPoint.before(c)):
        b.create(...)

An :class:`InsertionPoint` names a block and the op before which new ops go (``None``: the end of
the block). A :class:`Builder` inserts ops there; each inserted op goes *after* the previously
inserted one, so a sequence of ``create`` calls keeps program order.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Any, TypeVar

from lamina.ir.core import Block, IRError, IRMapping, Operation, Region
from lamina.ir.location import Location, UnknownLoc
from lamina.ir.types import Type

OpT = TypeVar("OpT", bound=Operation)


class InsertionPoint:
    """A position in a block: before ``anchor``, or at the end when ``anchor`` is None."""

    __slots__ = ("anchor", "block")

    def __init__(self, block: Block, anchor: Operation | None = None) -> None:
        if anchor is not None and anchor.parent is not block:
            raise IRError("insertion point anchor is not in the given block")
        self.block = block
        self.anchor = anchor

    @classmethod
    def at_end(cls, block: Block) -> InsertionPoint:
        return cls(block, None)

    @classmethod
    def at_start(cls, block: Block) -> InsertionPoint:
        return cls(block, block.first_op)

    @classmethod
    def before(cls, op: Operation) -> InsertionPoint:
        if op.parent is None:
            raise IRError(f"cannot insert before '{op.name}': it is not in a block")
        return cls(op.parent, op)

    @classmethod
    def after(cls, op: Operation) -> InsertionPoint:
        if op.parent is None:
            raise IRError(f"cannot insert after '{op.name}': it is not in a block")
        return cls(op.parent, op.next_op)

    @classmethod
    def before_terminator(cls, block: Block) -> InsertionPoint:
        """Before the block's terminator (at the end if it has none)."""
        return cls(block, block.terminator)

    def insert(self, op: OpT) -> OpT:
        self.block.insert_before(self.anchor, op)
        return op

    def __repr__(self) -> str:
        where = "end" if self.anchor is None else f"before '{self.anchor.name}'"
        return f"<InsertionPoint {where} of {self.block!r}>"


class Builder:
    """Creates ops at an insertion point. ``loc`` is the location given to ops built without one."""

    __slots__ = ("ip", "loc")

    def __init__(self, ip: InsertionPoint | None = None, loc: Location | None = None) -> None:
        self.ip = ip
        self.loc: Location = loc if loc is not None else UnknownLoc()

    # ---- constructors ------------------------------------------------------------------

    @classmethod
    def at_end(cls, block: Block, loc: Location | None = None) -> Builder:
        return cls(InsertionPoint.at_end(block), loc)

    @classmethod
    def at_start(cls, block: Block, loc: Location | None = None) -> Builder:
        return cls(InsertionPoint.at_start(block), loc)

    @classmethod
    def before(cls, op: Operation, loc: Location | None = None) -> Builder:
        return cls(InsertionPoint.before(op), loc if loc is not None else op.location)

    @classmethod
    def after(cls, op: Operation, loc: Location | None = None) -> Builder:
        return cls(InsertionPoint.after(op), loc if loc is not None else op.location)

    # ---- insertion point -----------------------------------------------------------------

    def set_insertion_point(self, ip: InsertionPoint | None) -> None:
        self.ip = ip

    def set_insertion_point_to_end(self, block: Block) -> None:
        self.ip = InsertionPoint.at_end(block)

    def set_insertion_point_to_start(self, block: Block) -> None:
        self.ip = InsertionPoint.at_start(block)

    def set_insertion_point_before(self, op: Operation) -> None:
        self.ip = InsertionPoint.before(op)

    def set_insertion_point_after(self, op: Operation) -> None:
        self.ip = InsertionPoint.after(op)

    @property
    def block(self) -> Block | None:
        return self.ip.block if self.ip is not None else None

    @contextlib.contextmanager
    def at(self, ip: InsertionPoint | Block | Operation, loc: Location | None = None) -> Iterator[Builder]:
        """Temporarily move the insertion point (a Block means its end, an Operation before it)."""
        if isinstance(ip, Block):
            ip = InsertionPoint.at_end(ip)
        elif isinstance(ip, Operation):
            ip = InsertionPoint.before(ip)
        saved_ip, saved_loc = self.ip, self.loc
        self.ip = ip
        if loc is not None:
            self.loc = loc
        try:
            yield self
        finally:
            self.ip, self.loc = saved_ip, saved_loc

    @contextlib.contextmanager
    def at_loc(self, loc: Location) -> Iterator[Builder]:
        saved = self.loc
        self.loc = loc
        try:
            yield self
        finally:
            self.loc = saved

    # ---- creating ------------------------------------------------------------------------

    def insert(self, op: OpT) -> OpT:
        """Insert a detached op at the insertion point (a builder without one leaves it detached)."""
        if self.ip is not None:
            self.ip.insert(op)
        return op

    def create(self, op_class: type[OpT], *, loc: Location | None = None, **kwargs: Any) -> OpT:
        """``op_class.build(**kwargs)`` at the insertion point; ``loc`` defaults to ``self.loc``."""
        op = op_class.build(loc=loc if loc is not None else self.loc, **kwargs)  # type: ignore[attr-defined]
        return self.insert(op)

    def create_block(
        self,
        region: Region,
        arg_types: Sequence[Type] = (),
        arg_locs: Sequence[Location] | None = None,
        insert_before: Block | None = None,
        move_insertion_point: bool = True,
    ) -> Block:
        """Add a block to ``region`` (at the end, or before ``insert_before``) and, by default,
        move the insertion point to its end."""
        locs = list(arg_locs) if arg_locs is not None else [self.loc] * len(arg_types)
        block = Block(arg_types, locs)
        if insert_before is None:
            region.add_block(block)
        else:
            region.insert_block_before(insert_before, block)
        if move_insertion_point:
            self.ip = InsertionPoint.at_end(block)
        return block

    def clone(self, op: OpT, mapping: IRMapping | None = None) -> OpT:
        return self.insert(op.clone(mapping))

    def __repr__(self) -> str:
        return f"<Builder at {self.ip!r}>"

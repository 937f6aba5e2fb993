"""The IR's structure: SSA values with use lists, operations, blocks and regions.

* A :class:`Value` is an :class:`OpResult` or a :class:`BlockArgument`; ``value.uses`` holds the
  :class:`OpOperand` s that read it (an insertion-ordered dict used as an ordered set).
* An :class:`Operation` has operands, results, properties (inherent attributes, printed ``<{...}>``),
  discardable attributes (printed ``{...}``), regions, successors and a location. Registered ops are
  subclasses declared with :mod:`lamina.ir.opdef`; ops of unregistered dialects are
  :class:`UnregisteredOp`.
* A :class:`Block` holds its ops in an intrusive doubly linked list (O(1) insert and erase) and has
  arguments; a :class:`Region` holds a list of blocks.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypeVar

from lamina.ir.attributes import Attribute
from lamina.ir.diagnostics import Diagnostic, emit_at_op, op_error_message
from lamina.ir.location import Location, UnknownLoc
from lamina.ir.types import Type

if TYPE_CHECKING:
    from lamina.ir.traits import Trait

OpT = TypeVar("OpT", bound="Operation")


class IRError(Exception):
    """Misuse of the IR API (erasing a value that still has uses, inserting an attached op, ...)."""


# --------------------------------------------------------------------------------------------
# Values and uses
# --------------------------------------------------------------------------------------------


class Value:
    """An SSA value. ``uses`` is an ordered set (dict) of the operands that read it."""

    __slots__ = ("type", "uses")

    def __init__(self, type: Type) -> None:
        self.type = type
        self.uses: dict[OpOperand, None] = {}

    @property
    def owner(self) -> Operation | Block:
        raise NotImplementedError

    @property
    def has_uses(self) -> bool:
        return bool(self.uses)

    @property
    def has_one_use(self) -> bool:
        return len(self.uses) == 1

    @property
    def use_count(self) -> int:
        return len(self.uses)

    @property
    def users(self) -> list[Operation]:
        """The operations that use this value (each once, in use order)."""
        return list(dict.fromkeys(u.owner for u in self.uses))

    def replace_all_uses_with(self, new: Value) -> None:
        if new is self:
            return
        for use in list(self.uses):
            use.set(new)

    def replace_uses_with_if(self, new: Value, pred: Callable[[OpOperand], bool]) -> None:
        for use in list(self.uses):
            if pred(use):
                use.set(new)

    def defining_op(self) -> Operation | None:
        return None

    def parent_block(self) -> Block | None:
        raise NotImplementedError


class OpResult(Value):
    __slots__ = ("op", "index")

    def __init__(self, type: Type, op: Operation, index: int) -> None:
        self.type = type
        self.uses = {}
        self.op = op
        self.index = index

    @property
    def owner(self) -> Operation:
        return self.op

    def defining_op(self) -> Operation:
        return self.op

    def parent_block(self) -> Block | None:
        return self.op.parent

    def __repr__(self) -> str:
        return f"<OpResult #{self.index} of '{self.op.name}' : {self.type}>"


class BlockArgument(Value):
    __slots__ = ("block", "index", "location")

    def __init__(self, type: Type, block: Block, index: int, location: Location | None = None) -> None:
        self.type = type
        self.uses = {}
        self.block = block
        self.index = index
        self.location = location if location is not None else UnknownLoc()

    @property
    def owner(self) -> Block:
        return self.block

    def parent_block(self) -> Block:
        return self.block

    def __repr__(self) -> str:
        return f"<BlockArgument #{self.index} : {self.type}>"


class OpOperand:
    """The ``index``-th operand of ``owner``, reading ``value``."""

    __slots__ = ("owner", "index", "value")

    def __init__(self, owner: Operation, index: int, value: Value) -> None:
        self.owner = owner
        self.index = index
        self.value = value
        value.uses[self] = None

    def set(self, value: Value) -> None:
        del self.value.uses[self]
        self.value = value
        value.uses[self] = None

    def drop(self) -> None:
        self.value.uses.pop(self, None)


class BlockOperand:
    """The ``index``-th successor of ``owner``, naming ``block``."""

    __slots__ = ("owner", "index", "block")

    def __init__(self, owner: Operation, index: int, block: Block) -> None:
        self.owner = owner
        self.index = index
        self.block = block
        block.uses[self] = None

    def set(self, block: Block) -> None:
        del self.block.uses[self]
        self.block = block
        block.uses[self] = None

    def drop(self) -> None:
        self.block.uses.pop(self, None)


class IRMapping:
    """Value and block mapping used by clone and inlining."""

    __slots__ = ("values", "blocks", "ops")

    def __init__(self) -> None:
        self.values: dict[Value, Value] = {}
        self.blocks: dict[Block, Block] = {}
        self.ops: dict[Operation, Operation] = {}

    def map(self, old: Value, new: Value) -> None:
        self.values[old] = new

    def lookup(self, v: Value) -> Value:
        return self.values.get(v, v)

    def lookup_block(self, b: Block) -> Block:
        return self.blocks.get(b, b)


class WalkResult(enum.Enum):
    ADVANCE = 0
    SKIP = 1  # do not visit the regions of this op (pre-order only)
    INTERRUPT = 2


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------


#: An op class's ``traits``: declared as a tuple of trait instances, closed by the op definition
#: machinery into the frozenset of their classes. A base class that declares traits for its
#: subclasses annotates ``traits: ClassVar[OpTraits]`` so that subclasses may declare others.
OpTraits: TypeAlias = "frozenset[type[Trait]] | tuple[Trait, ...]"


class _OpMeta(type):
    """Gives every op class ``__slots__ = ()`` unless it declares its own, so ops stay light."""

    def __new__(mcs, name: str, bases: tuple, ns: dict[str, Any]) -> Any:
        ns.setdefault("__slots__", ())
        return super().__new__(mcs, name, bases, ns)


class Operation(metaclass=_OpMeta):
    """An operation. Registered ops subclass this through :mod:`lamina.ir.opdef`."""

    __slots__ = (
        "_operands",
        "results",
        "properties",
        "attributes",
        "regions",
        "_successors",
        "location",
        "parent",
        "prev_op",
        "next_op",
        "_order",
        # set by the parser only (see lamina.ir.diagnostics.SourceText); unset otherwise
        "_parsed_at",
        "_source",
    )

    name: ClassVar[str] = ""
    #: Trait classes this op has. An op class declares a tuple of trait instances; the op
    #: definition machinery replaces it with the frozenset of their classes (and implied ones).
    traits: ClassVar[OpTraits] = frozenset()
    #: The op definition (operand/result/property/region specs); None for unregistered ops.
    op_def: ClassVar[Any] = None
    #: Optional custom assembly (set by ops that declare a format or parse/print hooks).
    has_custom_assembly: ClassVar[bool] = False

    _operands: list[OpOperand]
    results: tuple[OpResult, ...]
    properties: dict[str, Attribute]
    attributes: dict[str, Attribute]
    regions: list[Region]
    _successors: list[BlockOperand]
    location: Location
    parent: Block | None
    prev_op: Operation | None
    next_op: Operation | None
    _order: int
    _parsed_at: int  # where the parser read the op (an offset in its SourceText)
    _source: Any  # the SourceText of a parsed module (lamina.ir.diagnostics), on its root op

    # ---- creation ----------------------------------------------------------------------

    @classmethod
    def create(
        cls: type[OpT],
        operands: Sequence[Value] = (),
        result_types: Sequence[Type] = (),
        properties: dict[str, Attribute] | None = None,
        attributes: dict[str, Attribute] | None = None,
        regions: Sequence[Region] | int = 0,
        successors: Sequence[Block] = (),
        location: Location | None = None,
        name: str | None = None,
    ) -> OpT:
        """Generic constructor (what the parser uses). ``regions`` may be a count of empty regions."""
        od = cls.op_def
        if od is not None and properties and od.upgrades:
            properties = od.upgrade(properties)
        op = object.__new__(cls)
        if name is not None and od is None:
            op.name = name  # type: ignore[misc]  # UnregisteredOp has a 'name' slot
        op._operands = [OpOperand(op, i, v) for i, v in enumerate(operands)] if operands else []
        op.results = tuple([OpResult(t, op, i) for i, t in enumerate(result_types)]) if result_types else ()
        op.properties = properties if properties is not None else {}
        op.attributes = attributes if attributes is not None else {}
        if not regions:
            op.regions = []
        elif isinstance(regions, int):
            op.regions = [Region(op) for _ in range(regions)]
        else:
            op.regions = list(regions)
            for r in op.regions:
                if r.parent is not None:
                    raise IRError("region is already attached to an operation")
                r.parent = op
        op._successors = [BlockOperand(op, i, b) for i, b in enumerate(successors)] if successors else []
        op.location = location if location is not None else UnknownLoc()
        op.parent = None
        op.prev_op = None
        op.next_op = None
        op._order = -1
        return op

    # ---- operands ----------------------------------------------------------------------

    @property
    def operands(self) -> list[Value]:
        return [o.value for o in self._operands]

    @property
    def operand_uses(self) -> list[OpOperand]:
        return self._operands

    @property
    def num_operands(self) -> int:
        return len(self._operands)

    def operand(self, i: int) -> Value:
        return self._operands[i].value

    def set_operand(self, i: int, value: Value) -> None:
        self._operands[i].set(value)

    def set_operands(self, values: Sequence[Value]) -> None:
        for o in self._operands:
            o.drop()
        self._operands = [OpOperand(self, i, v) for i, v in enumerate(values)]

    @property
    def operand_types(self) -> list[Type]:
        return [o.value.type for o in self._operands]

    # ---- results -----------------------------------------------------------------------

    @property
    def num_results(self) -> int:
        return len(self.results)

    @property
    def result(self) -> OpResult:
        """The single result (error if the op has not exactly one)."""
        if len(self.results) != 1:
            raise IRError(f"'{self.name}' has {len(self.results)} results, not one")
        return self.results[0]

    @property
    def result_types(self) -> list[Type]:
        return [r.type for r in self.results]

    def has_uses(self) -> bool:
        return any(r.uses for r in self.results)

    def replace_all_uses_with(self, values: Sequence[Value] | Operation) -> None:
        if isinstance(values, Operation):
            values = values.results
        if len(values) != len(self.results):
            raise IRError(
                f"cannot replace {len(self.results)} results of '{self.name}' with {len(values)} values"
            )
        for r, v in zip(self.results, values):
            r.replace_all_uses_with(v)

    # ---- successors --------------------------------------------------------------------

    @property
    def successors(self) -> list[Block]:
        return [s.block for s in self._successors]

    def set_successor(self, i: int, block: Block) -> None:
        self._successors[i].set(block)

    # ---- attributes --------------------------------------------------------------------

    def get_attr(self, name: str) -> Attribute | None:
        """An inherent property if there is one of that name, else a discardable attribute."""
        a = self.properties.get(name)
        return a if a is not None else self.attributes.get(name)

    def set_attr(self, name: str, value: Attribute) -> None:
        """Set an inherent property when the op declares one of that name, else an attribute."""
        od = self.op_def
        if od is not None and name in od.prop_names:
            self.properties[name] = value
        else:
            self.attributes[name] = value

    # ---- traits ------------------------------------------------------------------------

    @classmethod
    def has_trait(cls, trait: type) -> bool:
        return trait in cls.traits

    @property
    def dialect_name(self) -> str:
        return self.name.split(".", 1)[0]

    # ---- structure ---------------------------------------------------------------------

    @property
    def parent_region(self) -> Region | None:
        return self.parent.parent if self.parent is not None else None

    def parent_op(self) -> Operation | None:
        b = self.parent
        if b is None or b.parent is None:
            return None
        return b.parent.parent

    def ancestors(self) -> Iterator[Operation]:
        op = self.parent_op()
        while op is not None:
            yield op
            op = op.parent_op()

    def parent_of_type(self, cls: type[OpT]) -> OpT | None:
        for a in self.ancestors():
            if isinstance(a, cls):
                return a
        return None

    def is_ancestor(self, other: Operation) -> bool:
        """True if ``self`` is ``other`` or contains it."""
        op: Operation | None = other
        while op is not None:
            if op is self:
                return True
            op = op.parent_op()
        return False

    def is_before_in_block(self, other: Operation) -> bool:
        block = self.parent
        if block is None or other.parent is not block:
            raise IRError("ops are not in the same block")
        if not block._order_valid:
            block._renumber()
        return self._order < other._order

    def detach(self) -> Operation:
        """Unlink from the parent block (the op keeps its operands and uses)."""
        b = self.parent
        if b is not None:
            b._unlink(self)
        return self

    def move_before(self, other: Operation) -> None:
        self.detach()
        assert other.parent is not None
        other.parent.insert_before(other, self)

    def move_after(self, other: Operation) -> None:
        self.detach()
        assert other.parent is not None
        other.parent.insert_after(other, self)

    def drop_all_references(self) -> None:
        """Drop this op's operand and successor uses, and those of every op nested in it."""
        for o in self._operands:
            o.drop()
        for s in self._successors:
            s.drop()
        for r in self.regions:
            for b in r.blocks:
                for op in b:
                    op.drop_all_references()

    def erase(self) -> None:
        """Remove from the IR and destroy. Refuses while any result is still used."""
        for r in self.results:
            if r.uses:
                user = next(iter(r.uses)).owner
                raise IRError(
                    f"cannot erase '{self.name}' op at {self.location}: result #{r.index} still has "
                    f"{len(r.uses)} use(s), e.g. by '{user.name}' at {user.location}"
                )
        self.detach()
        self.drop_all_references()
        self._operands = []
        self._successors = []
        for reg in self.regions:
            for b in reg.blocks:
                for a in b.args:
                    a.uses.clear()
                for op in b:
                    for res in op.results:
                        res.uses.clear()

    # ---- traversal ---------------------------------------------------------------------

    def walk(
        self,
        fn: Callable[[Operation], WalkResult | None],
        order: str = "post",
    ) -> WalkResult:
        """Visit this op and every nested op. ``fn`` may return ``WalkResult.INTERRUPT`` to stop
        (or, in pre-order, ``WalkResult.SKIP`` to skip the op's regions). Erasing the visited op
        from ``fn`` is safe in post-order."""
        pre = order == "pre"
        if pre:
            r = fn(self)
            if r is WalkResult.INTERRUPT:
                return r
            if r is WalkResult.SKIP:
                return WalkResult.ADVANCE
        for region in self.regions:
            for block in list(region.blocks):
                op = block._first
                while op is not None:
                    nxt = op.next_op
                    if op.walk(fn, order) is WalkResult.INTERRUPT:
                        return WalkResult.INTERRUPT
                    op = nxt
        if not pre:
            r = fn(self)
            if r is WalkResult.INTERRUPT:
                return r
        return WalkResult.ADVANCE

    def walk_ops(self, cls: type[OpT] | None = None) -> Iterator[OpT]:
        """Pre-order iterator over this op and nested ops (optionally only instances of ``cls``).
        Do not erase ops while iterating; use :meth:`walk` for that."""
        stack: list[Operation] = [self]
        while stack:
            op = stack.pop()
            if cls is None or isinstance(op, cls):
                yield op  # type: ignore[misc]
            nested: list[Operation] = []
            for region in op.regions:
                for block in region.blocks:
                    nested.extend(block)
            stack.extend(reversed(nested))

    # ---- cloning -----------------------------------------------------------------------

    def clone(self: OpT, mapping: IRMapping | None = None, clone_regions: bool = True) -> OpT:
        """Deep copy; operands are remapped through ``mapping`` (values not in it are kept)."""
        if mapping is None:
            mapping = IRMapping()
        vals = mapping.values
        op = type(self).create(
            [vals.get(v, v) for v in self.operands],
            [r.type for r in self.results],
            dict(self.properties),
            dict(self.attributes),
            len(self.regions) if clone_regions else 0,
            [mapping.blocks.get(b, b) for b in self.successors],
            self.location,
            name=self.name if self.op_def is None else None,
        )
        for old, new in zip(self.results, op.results):
            vals[old] = new
        mapping.ops[self] = op
        if clone_regions:
            for src, dst in zip(self.regions, op.regions):
                src.clone_into(dst, mapping)
        return op

    # ---- diagnostics -------------------------------------------------------------------

    def emit_error(self, message: str, notes: list[tuple[str, Location | None]] | None = None) -> Diagnostic:
        return emit_at_op("error", self, op_error_message(self, message), notes)

    def emit_warning(
        self, message: str, notes: list[tuple[str, Location | None]] | None = None
    ) -> Diagnostic:
        return emit_at_op("warning", self, op_error_message(self, message), notes)

    def emit_remark(self, message: str) -> Diagnostic:
        return emit_at_op("remark", self, op_error_message(self, message))

    # ---- hooks overridden by op definitions ------------------------------------------

    def verify_(self) -> None:
        """Op-specific verification; raise :class:`~lamina.ir.diagnostics.VerifyError`."""

    def fold(self, operands: Sequence[Attribute | None]) -> Sequence[Attribute | Value] | None:
        """Fold given the constant values of the operands (None where not constant).

        Return None if the op does not fold, else one Attribute (a constant) or Value per result.
        """
        return None

    @classmethod
    def get_canonicalization_patterns(cls) -> Sequence[Any]:
        """Fresh instances of the patterns registered for this op class with
        :func:`register_canonicalization` (by its dialect's pattern module, loaded on first use:
        the op classes never import their patterns, which import them)."""
        dialect = getattr(cls, "name", None)
        if isinstance(dialect, str):
            module = _PATTERN_MODULES.pop(dialect.split(".", 1)[0], None)
            if module is not None:
                import importlib

                importlib.import_module(module)
        return [make() for make in _PATTERNS.get(cls, ())]

    # ---- misc --------------------------------------------------------------------------

    def __str__(self) -> str:
        from lamina.ir.printer import Printer

        return Printer().print_op_to_string(self)

    def __repr__(self) -> str:
        return f"<{self.name} op at {self.location}>"


class UnregisteredOp(Operation):
    """An op of a dialect that is not loaded (kept generically when unregistered ops are allowed)."""

    __slots__ = ("name",)


# --------------------------------------------------------------------------------------------
# Blocks and regions
# --------------------------------------------------------------------------------------------


class Block:
    """A list of operations (intrusive linked list) with arguments."""

    __slots__ = ("args", "_first", "_last", "parent", "uses", "_order_valid", "_len")

    def __init__(self, arg_types: Iterable[Type] = (), arg_locs: Iterable[Location] | None = None) -> None:
        locs = list(arg_locs) if arg_locs is not None else None
        self.args: list[BlockArgument] = [
            BlockArgument(t, self, i, locs[i] if locs else None) for i, t in enumerate(arg_types)
        ]
        self._first: Operation | None = None
        self._last: Operation | None = None
        self.parent: Region | None = None
        self.uses: dict[BlockOperand, None] = {}
        self._order_valid = True
        self._len = 0

    # ---- arguments ---------------------------------------------------------------------

    def add_argument(self, type: Type, location: Location | None = None) -> BlockArgument:
        a = BlockArgument(type, self, len(self.args), location)
        self.args.append(a)
        return a

    def insert_argument(self, index: int, type: Type, location: Location | None = None) -> BlockArgument:
        a = BlockArgument(type, self, index, location)
        self.args.insert(index, a)
        for i, x in enumerate(self.args):
            x.index = i
        return a

    def erase_argument(self, index: int) -> None:
        a = self.args[index]
        if a.uses:
            raise IRError(f"cannot erase block argument #{index}: it still has {len(a.uses)} use(s)")
        del self.args[index]
        for i, x in enumerate(self.args):
            x.index = i

    @property
    def arg_types(self) -> list[Type]:
        return [a.type for a in self.args]

    # ---- ops ---------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Operation]:
        op = self._first
        while op is not None:
            nxt = op.next_op
            yield op
            op = nxt

    def reversed(self) -> Iterator[Operation]:
        op = self._last
        while op is not None:
            prv = op.prev_op
            yield op
            op = prv

    @property
    def ops(self) -> list[Operation]:
        return list(self)

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return True

    @property
    def is_empty(self) -> bool:
        return self._first is None

    @property
    def first_op(self) -> Operation | None:
        return self._first

    @property
    def last_op(self) -> Operation | None:
        return self._last

    @property
    def terminator(self) -> Operation | None:
        """The last op if it has the IsTerminator trait."""
        from lamina.ir.traits import IsTerminator

        last = self._last
        if last is not None and IsTerminator in last.traits:
            return last
        return None

    def _check_free(self, op: Operation) -> None:
        if op.parent is not None:
            raise IRError(f"'{op.name}' op is already in a block; detach it first")

    def append(self, op: Operation) -> Operation:
        if op.parent is not None:
            self._check_free(op)
        op.parent = self
        last = self._last
        op.prev_op = last
        op.next_op = None
        if last is None:
            self._first = op
            op._order = 0
        else:
            last.next_op = op
            op._order = last._order + 1
        self._last = op
        self._len += 1
        return op

    def extend(self, ops: Iterable[Operation]) -> None:
        for op in ops:
            self.append(op)

    def insert_before(self, anchor: Operation | None, op: Operation) -> Operation:
        """Insert ``op`` before ``anchor`` (``None`` appends)."""
        if anchor is None:
            return self.append(op)
        self._check_free(op)
        if anchor.parent is not self:
            raise IRError("anchor op is not in this block")
        op.parent = self
        prev = anchor.prev_op
        op.prev_op = prev
        op.next_op = anchor
        anchor.prev_op = op
        if prev is None:
            self._first = op
        else:
            prev.next_op = op
        self._order_valid = False
        self._len += 1
        return op

    def insert_after(self, anchor: Operation, op: Operation) -> Operation:
        nxt = anchor.next_op
        if nxt is None:
            if anchor.parent is not self:
                raise IRError("anchor op is not in this block")
            return self.append(op)
        return self.insert_before(nxt, op)

    def prepend(self, op: Operation) -> Operation:
        return self.insert_before(self._first, op)

    def _unlink(self, op: Operation) -> None:
        prev, nxt = op.prev_op, op.next_op
        if prev is None:
            self._first = nxt
        else:
            prev.next_op = nxt
        if nxt is None:
            self._last = prev
        else:
            nxt.prev_op = prev
        op.parent = None
        op.prev_op = None
        op.next_op = None
        self._len -= 1

    def _renumber(self) -> None:
        i = 0
        op = self._first
        while op is not None:
            op._order = i
            i += 1
            op = op.next_op
        self._order_valid = True

    def index_of(self, op: Operation) -> int:
        if not self._order_valid:
            self._renumber()
        return op._order

    # ---- structure ---------------------------------------------------------------------

    def parent_op(self) -> Operation | None:
        return self.parent.parent if self.parent is not None else None

    @property
    def predecessors(self) -> list[Operation]:
        return [u.owner for u in self.uses]

    @property
    def successors(self) -> list[Block]:
        t = self._last
        return t.successors if t is not None else []

    def erase(self) -> None:
        """Remove the block and its ops from its region."""
        if self.uses:
            raise IRError("cannot erase a block that is still a successor of some op")
        for op in self.reversed():
            op.drop_all_references()
        for op in self.reversed():
            for r in op.results:
                r.uses.clear()
            op.detach()
        for a in self.args:
            if a.uses:
                raise IRError(f"cannot erase block: argument #{a.index} is still used outside it")
        if self.parent is not None:
            self.parent.blocks.remove(self)
            self.parent = None

    def split_before(self, op: Operation) -> Block:
        """Move ``op`` and every op after it into a new block inserted after this one."""
        new = Block()
        cur: Operation | None = op
        while cur is not None:
            nxt = cur.next_op
            cur.detach()
            new.append(cur)
            cur = nxt
        if self.parent is not None:
            self.parent.insert_block_after(self, new)
        return new

    def __repr__(self) -> str:
        return f"<Block with {len(self.args)} args, {self._len} ops>"


class Region:
    """A list of blocks owned by an operation."""

    __slots__ = ("blocks", "parent")

    def __init__(self, parent: Operation | None = None, blocks: Iterable[Block] = ()) -> None:
        self.parent = parent
        self.blocks: list[Block] = []
        for b in blocks:
            self.add_block(b)

    def add_block(self, block: Block | None = None) -> Block:
        block = block if block is not None else Block()
        if block.parent is not None:
            raise IRError("block is already in a region")
        block.parent = self
        self.blocks.append(block)
        return block

    def insert_block_after(self, anchor: Block, block: Block) -> Block:
        block.parent = self
        self.blocks.insert(self.blocks.index(anchor) + 1, block)
        return block

    def insert_block_before(self, anchor: Block, block: Block) -> Block:
        block.parent = self
        self.blocks.insert(self.blocks.index(anchor), block)
        return block

    @property
    def entry(self) -> Block:
        return self.blocks[0]

    @property
    def block(self) -> Block:
        """The single block of a single-block region."""
        if len(self.blocks) != 1:
            raise IRError(f"region has {len(self.blocks)} blocks, not one")
        return self.blocks[0]

    @property
    def is_empty(self) -> bool:
        return not self.blocks

    def ops(self) -> Iterator[Operation]:
        for b in self.blocks:
            yield from b

    def take_body(self, other: Region) -> None:
        """Move every block of ``other`` to the end of this region."""
        for b in other.blocks:
            b.parent = self
            self.blocks.append(b)
        other.blocks = []

    def clone_into(self, dest: Region, mapping: IRMapping) -> None:
        """Append clones of this region's blocks to ``dest``."""
        new_blocks = []
        for b in self.blocks:
            nb = Block()
            for a in b.args:
                mapping.values[a] = nb.add_argument(a.type, a.location)
            mapping.blocks[b] = nb
            new_blocks.append(nb)
        for b, nb in zip(self.blocks, new_blocks):
            for op in b:
                nb.append(op.clone(mapping))
            dest.add_block(nb)
        # Operands defined in a later block (loops, forward branches) were cloned after their
        # users: remap them now.
        if len(new_blocks) > 1:
            vals = mapping.values
            for nb in new_blocks:
                for top in nb:
                    # nested ops too: a region may use a value of a later (dominating) block
                    for op in top.walk_ops() if top.regions else (top,):
                        for o in op.operand_uses:
                            nv = vals.get(o.value)
                            if nv is not None and nv is not o.value:
                                o.set(nv)

    def is_ancestor_of(self, op: Operation) -> bool:
        r = op.parent_region
        while r is not None:
            if r is self:
                return True
            p = r.parent
            r = p.parent_region if p is not None else None
        return False


# ---- canonicalization patterns registered from outside the op classes ---------------------------

#: Op class -> factories of the canonicalization patterns rooted at it.
_PATTERNS: dict[type, list[Callable[[], Any]]] = {}
#: Dialect name -> the module that registers its patterns (imported on the first lookup).
_PATTERN_MODULES: dict[str, str] = {}


def register_canonicalization(op_class: type[Operation], *factories: Callable[[], Any]) -> None:
    """Make ``op_class.get_canonicalization_patterns()`` return ``f()`` for each factory (a pattern
    class, or a function building one), after those registered before."""
    _PATTERNS.setdefault(op_class, []).extend(factories)


def register_canonicalization_module(dialect: str, module: str) -> None:
    """Name the module whose import registers the canonicalization patterns of ``dialect``'s ops;
    it is imported when one of them is first asked for its patterns (as passes load by name), so
    loading a dialect does not load the rewriting machinery."""
    _PATTERN_MODULES[dialect] = module

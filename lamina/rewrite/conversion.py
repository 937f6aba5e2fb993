"""Dialect conversion: legalize ops against a :class:`ConversionTarget` with conversion patterns and
an optional :class:`TypeConverter`.

Conversion is transactional: it converts in place after taking a snapshot (a clone) of the root
op's regions, and on failure puts the snapshot back, so a failed conversion leaves the IR as it was
(the ops inside the root are then the snapshot's objects; the root op itself is kept). Ops are visited in
pre-order; an op that is not legal is given to the patterns rooted at its name (best benefit first)
with its operands already remapped/converted (the *adaptor*). Ops the patterns create are
legalized in turn. Where a converted value still has users that expect the old type, a
``builtin.unrealized_conversion_cast`` (or the type converter's materialization) bridges it; the
casts left unused are erased at the end.

* :func:`apply_partial_conversion`: ops that stay illegal *and were explicitly marked illegal* are
  errors; unknown ops are left alone.
* :func:`apply_full_conversion`: every op that is not legal afterwards is an error (one per op).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from lamina.ir.core import Block, IRMapping, Operation, Region, Value
from lamina.ir.diagnostics import emit_error
from lamina.ir.location import Location
from lamina.ir.types import Type
from lamina.rewrite.pattern import PatternRewriter, RewriterListener, root_name

LEGAL, ILLEGAL, DYNAMIC = "legal", "illegal", "dynamic"


def _name(x: Any) -> str:
    n = root_name(x)
    if n is None:
        raise TypeError(f"not an op class or name: {x!r}")
    return n


class ConversionTarget:
    """Which ops are legal after the conversion."""

    def __init__(self) -> None:
        self._ops: dict[str, tuple[str, Callable[[Operation], bool] | None]] = {}
        self._dialects: dict[str, tuple[str, Callable[[Operation], bool] | None]] = {}
        self._unknown: Callable[[Operation], bool] | None = None

    def add_legal_op(self, *ops: Any) -> None:
        for o in ops:
            self._ops[_name(o)] = (LEGAL, None)

    def add_illegal_op(self, *ops: Any) -> None:
        for o in ops:
            self._ops[_name(o)] = (ILLEGAL, None)

    def add_dynamically_legal_op(self, op: Any, fn: Callable[[Operation], bool]) -> None:
        self._ops[_name(op)] = (DYNAMIC, fn)

    def add_legal_dialect(self, *names: str) -> None:
        for n in names:
            self._dialects[n] = (LEGAL, None)

    def add_illegal_dialect(self, *names: str) -> None:
        for n in names:
            self._dialects[n] = (ILLEGAL, None)

    def add_dynamically_legal_dialect(self, name: str, fn: Callable[[Operation], bool]) -> None:
        self._dialects[name] = (DYNAMIC, fn)

    def mark_unknown_op_dynamically_legal(self, fn: Callable[[Operation], bool]) -> None:
        self._unknown = fn

    def _action(self, op: Operation) -> tuple[str, Callable[[Operation], bool] | None] | None:
        a = self._ops.get(op.name)
        if a is None:
            a = self._dialects.get(op.dialect_name)
        if a is None and self._unknown is not None:
            a = (DYNAMIC, self._unknown)
        return a

    def legality(self, op: Operation) -> bool | None:
        """True: legal; False: illegal (explicitly, or dynamically); None: unknown."""
        a = self._action(op)
        if a is None:
            return None
        kind, fn = a
        if kind == LEGAL:
            return True
        if kind == ILLEGAL:
            return False
        assert fn is not None
        return bool(fn(op))

    def is_legal(self, op: Operation) -> bool:
        return self.legality(op) is True

    def is_illegal(self, op: Operation) -> bool:
        return self.legality(op) is False


class TypeConverter:
    """Converts types; rules are tried last-added first. A rule returns a Type (converted), None
    (not handled: try the next rule) or False (the type cannot be converted)."""

    def __init__(self) -> None:
        self._rules: list[Callable[[Type], Any]] = []
        self._source_mats: list[Callable[..., Value | None]] = []
        self._target_mats: list[Callable[..., Value | None]] = []
        self._cache: dict[Type, Type | None] = {}

    def add_conversion(self, fn: Callable[[Type], Any]) -> None:
        self._rules.append(fn)
        self._cache.clear()

    def add_source_materialization(self, fn: Callable[..., Value | None]) -> None:
        """``fn(rewriter, type, inputs, loc) -> Value | None``: produce a value of the *old* type."""
        self._source_mats.append(fn)

    def add_target_materialization(self, fn: Callable[..., Value | None]) -> None:
        """``fn(rewriter, type, inputs, loc) -> Value | None``: produce a value of the *new* type."""
        self._target_mats.append(fn)

    def convert_type(self, t: Type) -> Type | None:
        try:
            return self._cache[t]
        except KeyError:
            pass
        out: Type | None = None
        for rule in reversed(self._rules):
            r = rule(t)
            if r is None:
                continue
            out = r if r is not False else None
            break
        self._cache[t] = out
        return out

    def convert_types(self, types: Iterable[Type]) -> list[Type] | None:
        out = []
        for t in types:
            c = self.convert_type(t)
            if c is None:
                return None
            out.append(c)
        return out

    def is_legal(self, t: Type | Operation) -> bool:
        """A type is legal if it converts to itself; an op if all its operand/result types are."""
        if isinstance(t, Operation):
            return all(self.is_legal(x) for x in [*t.operand_types, *t.result_types])
        return self.convert_type(t) is t

    def is_signature_legal(self, ft: Any) -> bool:
        return all(self.is_legal(x) for x in [*ft.inputs, *ft.results])

    def _materialize(
        self,
        mats: list[Callable[..., Value | None]],
        rewriter: PatternRewriter,
        t: Type,
        inputs: Sequence[Value],
        loc: Location,
    ) -> Value | None:
        for fn in reversed(mats):
            v = fn(rewriter, t, list(inputs), loc)
            if v is not None:
                return v
        return None

    def materialize_source(
        self, rewriter: PatternRewriter, t: Type, inputs: Sequence[Value], loc: Location
    ) -> Value | None:
        return self._materialize(self._source_mats, rewriter, t, inputs, loc)

    def materialize_target(
        self, rewriter: PatternRewriter, t: Type, inputs: Sequence[Value], loc: Location
    ) -> Value | None:
        return self._materialize(self._target_mats, rewriter, t, inputs, loc)


class ConversionPattern:
    """Base of conversion patterns: ``match_and_rewrite(op, operands, rewriter)`` where ``operands``
    are ``op``'s operands already remapped and converted to legal types (the adaptor)."""

    root: Any = None
    benefit: int = 1

    def __init__(self, type_converter: TypeConverter | None = None) -> None:
        self.type_converter = type_converter

    def match_and_rewrite(
        self, op: Operation, operands: list[Value], rewriter: ConversionPatternRewriter
    ) -> bool:
        raise NotImplementedError

    @property
    def root_name(self) -> str | None:
        return root_name(self.root)


class _Tracker(RewriterListener):
    def __init__(self) -> None:
        self.created: list[Operation] = []
        self.erased: set[Operation] = set()

    def notify_op_inserted(self, op: Operation) -> None:
        self.created.append(op)

    def notify_op_erased(self, op: Operation) -> None:
        self.erased.add(op)


class ConversionPatternRewriter(PatternRewriter):
    """The rewriter conversion patterns use. Replacing an op with values of converted types keeps
    unconverted users working through source materializations."""

    __slots__ = ("_mapping", "_materializations", "_originals", "_tracker", "type_converter")

    def __init__(self, type_converter: TypeConverter | None = None) -> None:
        tracker = _Tracker()
        super().__init__(tracker)
        self._tracker = tracker
        self.type_converter = type_converter
        #: Values standing in for a converted value (materialization results) -> that value.
        self._mapping: dict[Value, Value] = {}
        #: The casts the conversion created.
        self._materializations: list[Operation] = []
        #: Bridging casts (source materializations of replaced results) -> the result they stand for.
        self._originals: dict[Value, Value] = {}

    # ---- value mapping --------------------------------------------------------------------

    def lookup(self, v: Value) -> Value:
        seen = 0
        m = self._mapping
        while v in m and seen < 64:
            v = m[v]
            seen += 1
        return v

    def original(self, v: Value) -> Value:
        """The value an operand stood for before the conversion: when a replaced op's result changed
        type, its users are bridged through a cast, which is what they see as their operand until
        they are converted; this maps that cast back to the replaced result (MLIR's patterns see
        the original operands through ``op.getOperands()`` and the converted ones in the adaptor)."""
        return self._originals.get(v, v)

    def _cast(self, inputs: Sequence[Value], t: Type, loc: Location, source: bool) -> Value:
        tc = self.type_converter
        if tc is not None:
            v = (tc.materialize_source if source else tc.materialize_target)(self, t, inputs, loc)
            if v is not None:
                op = v.defining_op()
                if op is not None:
                    self._materializations.append(op)
                return v
        from lamina.ir.builtin import UnrealizedConversionCastOp

        cast = UnrealizedConversionCastOp.build(inputs=list(inputs), outputs=[t], loc=loc)
        self.insert(cast)
        self._materializations.append(cast)
        return cast.results[0]

    def remap_operand(self, v: Value, loc: Location) -> Value | None:
        """``v`` as the converted IR sees it, cast to its converted type if there is a converter."""
        nv = self.lookup(v)
        tc = self.type_converter
        if tc is None:
            return nv
        want = tc.convert_type(v.type)
        if want is None:
            return None
        if nv.type is want:
            return nv
        return self._cast([nv], want, loc, source=False)

    # ---- overrides ----------------------------------------------------------------------

    def replace_op(self, op: Operation, new: Sequence[Value] | Operation) -> None:
        values = list(new.results) if isinstance(new, Operation) else list(new)
        if len(values) != len(op.results):
            raise ValueError(
                f"cannot replace {len(op.results)} results of '{op.name}' with {len(values)} values"
            )
        self.listener.notify_op_replaced(op, values)
        for r, v in zip(op.results, values):
            if r is v or not r.uses:
                continue
            if v.type is r.type:
                self._replace_value(r, v)
                continue
            # Users still expect the old type: bridge with a source materialization.
            ip = self.save_insertion_point()
            self.set_insertion_point(op)
            c = self._cast([v], r.type, op.location, source=True)
            self.restore_insertion_point(ip)
            self._replace_value(r, c)
            self._mapping[c] = v
            self._originals[c] = self._originals.get(r, r)
        self.erase_op(op)

    def convert_region_types(self, region: Region, converter: TypeConverter | None = None) -> bool:
        """Convert the argument types of every block in ``region`` (users of the old arguments go
        through source materializations until they are converted)."""
        tc = converter or self.type_converter
        if tc is None:
            return True
        for block in region.blocks:
            new_types = tc.convert_types(block.arg_types)
            if new_types is None:
                return False
            self.apply_signature_conversion(block, new_types)
        return True

    def apply_signature_conversion(self, block: Block, new_types: Sequence[Type]) -> None:
        """Give ``block``'s arguments ``new_types`` (1:1)."""
        for a, t in zip(list(block.args), new_types):
            if a.type is t:
                continue
            old = a.type
            a.type = t
            if a.uses:
                ip = self.save_insertion_point()
                self.set_insertion_point_to_start(block)
                users = list(a.uses)
                c = self._cast([a], old, a.location, source=True)
                self.restore_insertion_point(ip)
                for u in users:
                    u.set(c)
                    self.listener.notify_op_modified(u.owner)
                self._mapping[c] = a


# --------------------------------------------------------------------------------------------
# the driver
# --------------------------------------------------------------------------------------------


class _Legalizer:
    def __init__(
        self,
        target: ConversionTarget,
        patterns: Iterable[ConversionPattern | type[ConversionPattern]],
        type_converter: TypeConverter | None,
        full: bool,
    ) -> None:
        self.target = target
        pats = [p(type_converter) if isinstance(p, type) else p for p in patterns]
        self.by_name: dict[str | None, list[ConversionPattern]] = {}
        for p in pats:
            self.by_name.setdefault(p.root_name, []).append(p)
        any_pats = self.by_name.pop(None, [])
        for k in list(self.by_name):
            self.by_name[k] = sorted([*self.by_name[k], *any_pats], key=lambda p: -p.benefit)
        self.any_pats = sorted(any_pats, key=lambda p: -p.benefit)
        self.full = full
        self.rewriter = ConversionPatternRewriter(type_converter)
        self.failures: list[tuple[Operation, bool]] = []

    def legalize(self, op: Operation, depth: int = 0) -> bool:
        legal = self.target.legality(op)
        if legal is True:
            return True
        if depth > 32:
            self.failures.append((op, legal is False))
            return False
        rw = self.rewriter
        tracker = rw._tracker
        for p in self.by_name.get(op.name, self.any_pats):
            rw.set_insertion_point(op)
            rw.loc = op.location
            rw.current_op = op
            operands = []
            ok = True
            for v in op.operands:
                nv = rw.remap_operand(v, op.location)
                if nv is None:
                    ok = False
                    break
                operands.append(nv)
            if not ok:
                continue
            start = len(tracker.created)
            if p.match_and_rewrite(op, operands, rw):
                created = tracker.created[start:]
                mats = set(rw._materializations)
                for c in created:
                    if c.parent is None or c in mats or c is op:
                        continue
                    self.legalize(c, depth + 1)
                if op.parent is not None and op not in tracker.erased:
                    # Updated in place: it must be legal now (or, in a partial conversion, at least
                    # not illegal).
                    now = self.target.legality(op)
                    if now is False or (now is None and self.full):
                        self.failures.append((op, now is False))
                        return False
                return True
        if legal is False or self.full:
            self.failures.append((op, legal is False))
        return False


def _preorder(root: Operation) -> list[Operation]:
    out: list[Operation] = []
    stack: list[Operation] = []
    for region in reversed(root.regions):
        for block in reversed(region.blocks):
            stack.extend(block.reversed())
    while stack:
        op = stack.pop()
        out.append(op)
        for region in reversed(op.regions):
            for block in reversed(region.blocks):
                stack.extend(block.reversed())
    return out


def _alive(op: Operation, root: Operation) -> bool:
    cur: Operation | None = op
    while cur is not None:
        if cur is root:
            return True
        if cur.parent is None:
            return False
        cur = cur.parent_op()
    return False


def _convert(
    op: Operation,
    target: ConversionTarget,
    patterns: Iterable[ConversionPattern | type[ConversionPattern]],
    type_converter: TypeConverter | None,
    full: bool,
) -> bool:
    # Convert in place, keeping a snapshot to restore on failure (so that on success references
    # to untouched ops stay valid; on failure the regions are restored from the snapshot).
    backup = op.clone(IRMapping())
    work = op
    lz = _Legalizer(target, patterns, type_converter, full)
    try:
        for o in _preorder(work):
            if not _alive(o, work) or o in lz.rewriter._tracker.erased:
                continue
            if o in lz.rewriter._materializations:
                continue
            lz.legalize(o)
        # Remove materializations nobody uses any more (innermost first).
        rw = lz.rewriter
        live_casts = []
        for c in reversed(rw._materializations):
            if c.parent is None or c in rw._tracker.erased:
                continue
            if not any(r.uses for r in c.results):
                rw.erase_op(c)
            else:
                live_casts.append(c)
        failures = [(o, explicit) for o, explicit in lz.failures if _alive(o, work)]
        errors: list[tuple[Location, str]] = []
        for o, explicit in failures:
            suffix = " that was explicitly marked illegal" if explicit else ""
            errors.append((o.location, f"failed to legalize operation '{o.name}'{suffix}"))
        if full:
            for c in live_casts:
                if target.legality(c) is True:
                    continue
                src = ", ".join(f"'{v.type}'" for v in c.operands)
                dst = ", ".join(f"'{t}'" for t in c.result_types)
                errors.append(
                    (
                        c.location,
                        f"failed to legalize unresolved materialization from ({src}) to ({dst}) "
                        "that remained live after conversion",
                    )
                )
        if errors:
            for loc, msg in errors:
                emit_error(loc, msg)
            _swap_regions(op, backup)
            return False
    except BaseException:
        _swap_regions(op, backup)
        raise
    _discard(backup)
    return True


def _discard(work: Operation) -> None:
    work.drop_all_references()


def _swap_regions(op: Operation, work: Operation) -> None:
    for orig, new in zip(op.regions, work.regions):
        for b in orig.blocks:
            for o in b:
                o.drop_all_references()
        for b in orig.blocks:
            for o in b:
                for r in o.results:
                    r.uses.clear()
            for a in b.args:
                a.uses.clear()
            b.uses.clear()
            b.parent = None
        orig.blocks = []
        orig.take_body(new)
    for o in work.operand_uses:
        o.drop()


def apply_partial_conversion(
    op: Operation,
    target: ConversionTarget,
    patterns: Iterable[ConversionPattern | type[ConversionPattern]],
    type_converter: TypeConverter | None = None,
) -> bool:
    """Legalize what can be legalized in ``op``'s regions; fail (changing nothing) only if an op
    explicitly marked illegal remains."""
    return _convert(op, target, patterns, type_converter, full=False)


def apply_full_conversion(
    op: Operation,
    target: ConversionTarget,
    patterns: Iterable[ConversionPattern | type[ConversionPattern]],
    type_converter: TypeConverter | None = None,
) -> bool:
    """Legalize every op in ``op``'s regions; on failure report each op that could not be
    legalized and leave the IR unchanged."""
    return _convert(op, target, patterns, type_converter, full=True)

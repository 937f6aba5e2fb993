"""The IR verifier.

:func:`verify` checks an op and everything nested in it and reports *every* problem it finds as a
located diagnostic (MLIR's wording), returning False if there was any:

* structure: parent links, result/argument owners, successors in the same region;
* registration: ops of registered dialects must be registered; unregistered dialects must be allowed;
* each op against its declaration (:func:`~lamina.ir.opdef.verify_op_def`), its traits and its own
  ``verify_`` (a raised :class:`~lamina.ir.diagnostics.VerifyError` becomes an error at the op);
* blocks end with a terminator unless the op has NoTerminator (or is unregistered); branch operands
  match the successor's block arguments (BranchOpInterface);
* SSA dominance inside a block (op order), across blocks (dominator tree of the region), and into
  nested regions; values used inside an IsolatedFromAbove op must be defined inside it;
* symbols: unique names (SymbolTable trait), symbol ops' attributes, and symbol uses of calls
  (the callee exists and the signature matches).

Regions of ``builtin.module`` and of unregistered ops are graph regions (as in MLIR): values defined
in them may be used anywhere in the region.

The verifier is linear in the size of the IR: op order within a block is compared through
``Block`` numbering; per-class facts (which traits carry checks, which interfaces an op has, the
op definition's counts and constraints) are computed once per op class.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from lamina.ir.attributes import SymbolRefAttr
from lamina.ir.constraints import AnyAttr, AnyType, Constraint
from lamina.ir.core import Block, BlockArgument, Operation, OpResult, Region, UnregisteredOp, Value
from lamina.ir.diagnostics import (
    Diagnostic,
    DiagnosticError,
    VerifyError,
    diagnostic_location,
    emit_at_op,
    emit_error,
    op_error_message,
    using_engine,
)
from lamina.ir.dominance import DominanceCache
from lamina.ir.location import Location
from lamina.ir.opdef import SINGLE, VARIADIC, verify_op_def
from lamina.ir.symbol_table import SymbolTableCollection, verify_symbol
from lamina.ir.traits import (
    BranchOpInterface,
    CallableOpInterface,
    CallOpInterface,
    InferTypeOpInterface,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SameOperandsAndResultShape,
    SameOperandsAndResultType,
    SameTypeOperands,
    SingleBlock,
    SymbolOpInterface,
    Trait,
)
from lamina.ir.types import is_compatible_type, shaped_type_error

if TYPE_CHECKING:
    from lamina.ir.context import Context

__all__ = ["verify", "verify_body_signature", "Verifier"]

_UNREGISTERED_DIALECT_MSG = (
    "created with unregistered dialect. If this is intended, please call allowUnregisteredDialects() on "
    "the MLIRContext, or use -allow-unregistered-dialect with the MLIR opt tool used"
)
_GRAPH_REGION_OPS = frozenset({"builtin.module"})
#: Traits whose check reads nothing but the operand and result types.
_TYPE_ONLY_TRAITS = frozenset({SameOperandsAndResultType, SameOperandsAndResultShape, SameTypeOperands})


def verify(op: Operation, ctx: Context | None = None) -> bool:
    """Verify ``op`` and all nested ops; report each problem as a located diagnostic.

    Diagnostics go to ``ctx.diagnostics`` when a context is given, else to the active engine (with
    no active engine the first error raises :class:`~lamina.ir.diagnostics.DiagnosticError`).
    Returns True when the IR is valid.
    """
    v = Verifier(ctx)
    if ctx is not None:
        with using_engine(ctx.diagnostics):
            v.run(op)
    else:
        v.run(op)
    return v.num_errors == 0


def verify_body_signature(op: Operation, inputs: Sequence[Value], terminator: type, what: str) -> None:
    """Check a region op whose body takes its operands and yields its results (a kernel, a layer
    group): the first region has a block whose arguments have ``inputs``' types and which ends with a
    ``terminator`` yielding ``op``'s result types; ``what`` names the op in the messages."""
    blocks = op.regions[0].blocks
    if not blocks:
        raise VerifyError("the body must have a block")
    b = blocks[0]
    if len(b.args) != len(inputs):
        raise VerifyError(f"the body takes {len(b.args)} arguments for {len(inputs)} operands")
    for a, v in zip(b.args, inputs):
        if a.type is not v.type:
            raise VerifyError(f"body argument type '{a.type}' differs from its operand's '{v.type}'")
    t = b.last_op
    if t is None or not isinstance(t, terminator):
        raise VerifyError(f"the body must end with '{terminator.name}'")  # type: ignore[attr-defined]
    if [v.type for v in t.operands] != [r.type for r in op.results]:
        raise VerifyError(f"the yielded types differ from the {what}'s result types")


def _memo(c: Constraint) -> Callable[[Any], bool] | None:
    """A memoised ``c.check`` for uniqued types (None when ``c`` accepts anything)."""
    if c is AnyType or c is AnyAttr:
        return None
    cache: dict[Any, bool] = {}
    check = c.check

    def chk(t: Any) -> bool:
        r = cache.get(t)
        if r is None:
            r = cache[t] = bool(check(t))
        return r

    return chk


class _ClassInfo:
    """Facts about one op class, computed once per verification."""

    __slots__ = (
        "all_trait_checks",
        "branch",
        "call",
        "fast",
        "graph",
        "infer",
        "is_terminator",
        "isolated",
        "n_operands",
        "n_regions",
        "n_results",
        "n_successors",
        "no_terminator",
        "operand_checks",
        "own_verify",
        "props",
        "registered",
        "result_checks",
        "sig_ok",
        "single_block_regions",
        "symbol",
        "symbol_uses_hook",
        "trait_checks",
        "type_trait_checks",
        "var_operand",
        "var_result",
    )

    def __init__(self, cls: type[Operation]) -> None:
        od = cls.op_def
        traits = cls.traits
        self.registered = od is not None and not issubclass(cls, UnregisteredOp)
        checked = [t for t in getattr(cls, "trait_list", ()) if type(t).verify is not Trait.verify]
        #: every trait check, in declaration order (the slow path)
        self.all_trait_checks: list[Callable[[Operation], None]] = [t.verify for t in checked]
        #: checks that depend only on operand/result types: memoised per type signature
        self.type_trait_checks = [t.verify for t in checked if type(t) in _TYPE_ONLY_TRAITS]
        self.trait_checks = [t.verify for t in checked if type(t) not in _TYPE_ONLY_TRAITS]
        self.sig_ok: dict[tuple, bool] = {}
        self.own_verify = cls.verify_ is not Operation.verify_
        self.is_terminator = IsTerminator in traits or not self.registered
        self.no_terminator = NoTerminator in traits or not self.registered
        self.isolated = IsolatedFromAbove in traits
        self.graph = not self.registered or cls.name in _GRAPH_REGION_OPS
        self.branch = _implements(cls, BranchOpInterface)
        self.call = _implements(cls, CallOpInterface)
        self.infer = _implements(cls, InferTypeOpInterface)
        self.symbol = _implements(cls, SymbolOpInterface)
        self.symbol_uses_hook = getattr(cls, "verify_symbol_uses", None) is not None
        self.fast = False
        if od is None:
            return
        # Fast op-definition check: exact when no group is segmented and at most one operand (and
        # one result) group is variadic and none is optional.
        self.fast = not od.operand_segmented and not od.result_segmented
        self.n_operands, self.operand_checks, self.var_operand = self._fields(od.operands)
        self.n_results, self.result_checks, self.var_result = self._fields(od.results)
        if self.operand_checks is None or self.result_checks is None:
            self.fast = False
        self.props = [
            (
                p.name,
                p.optional,
                None if p.constraint is AnyAttr or p.constraint is AnyType else p.constraint.check,
            )
            for p in od.props
        ]
        n_fixed = sum(1 for r in od.regions if not r.variadic)
        self.n_regions = (n_fixed, any(r.variadic for r in od.regions))
        self.single_block_regions = [r.index for r in od.regions if r.single_block and not r.variadic]
        ns_fixed = sum(1 for s in od.successors if not s.variadic)
        self.n_successors = (ns_fixed, any(s.variadic for s in od.successors))

    @staticmethod
    def _fields(fields: list) -> tuple[int, Any, int]:
        """(number of single fields, per-field memoised checks or None if not fast, index of the
        variadic field or -1)."""
        kinds = [f.kind for f in fields]
        n_var = kinds.count(VARIADIC)
        if n_var > 1 or any(k not in (SINGLE, VARIADIC) for k in kinds):
            return 0, None, -1
        return (
            len(kinds) - n_var,
            [_memo(f.constraint) for f in fields],
            (kinds.index(VARIADIC) if n_var else -1),
        )

    def fast_check(self, op: Operation) -> bool:
        """True when ``op`` certainly satisfies its op definition and its type-only traits (whose
        checks then need not run again)."""
        operands = op._operands
        types = [o.value.type for o in operands] + [r.type for r in op.results]
        sig = (len(operands), *types)
        ok = self.sig_ok.get(sig)
        if ok is None:
            ok = self._check_values(operands, self.n_operands, self.operand_checks, self.var_operand, True)
            ok = ok and self._check_values(
                op.results, self.n_results, self.result_checks, self.var_result, False
            )
            if ok:
                try:
                    for check in self.type_trait_checks:
                        check(op)
                except VerifyError:
                    ok = False
            ok = ok and not any(shaped_type_error(t) for t in types)
            if len(self.sig_ok) < 4096:
                self.sig_ok[sig] = ok
        if not ok:
            return False
        props = op.properties
        for name, optional, check in self.props:
            a = props.get(name)
            if a is None:
                if not optional:
                    return False
            elif check is not None and not check(a):
                return False
        nr = len(op.regions)
        n_fixed, has_var = self.n_regions
        if (nr < n_fixed) if has_var else (nr != n_fixed):
            return False
        for i in self.single_block_regions:
            if len(op.regions[i].blocks) > 1:
                return False
        ns = len(op._successors)
        ns_fixed, s_var = self.n_successors
        return not ((ns < ns_fixed) if s_var else (ns != ns_fixed))

    @staticmethod
    def _check_values(items: Any, n_single: int, checks: list, var: int, operands: bool) -> bool:
        n = len(items)
        if var < 0:
            if n != n_single:
                return False
            for item, chk in zip(items, checks):
                if chk is not None and not chk((item.value if operands else item).type):
                    return False
            return True
        if n < n_single:
            return False
        n_var = n - n_single
        i = 0
        for fi, chk in enumerate(checks):
            cnt = n_var if fi == var else 1
            if chk is not None:
                for k in range(i, i + cnt):
                    item = items[k]
                    if not chk((item.value if operands else item).type):
                        return False
            i += cnt
        return True


def _check_inferred_types(op: Operation) -> None:
    """InferTypeOpInterface: the declared result types must be compatible with the inferred ones
    (an op's ``is_compatible_return_types(inferred, declared)`` may decide; the default is
    :func:`~lamina.ir.types.is_compatible_type` on each pair), in MLIR's words."""
    inferred = list(InferTypeOpInterface.get(op).infer_result_types())
    declared = [r.type for r in op.results]
    decide = getattr(op, "is_compatible_return_types", None)
    if decide is not None:
        ok = decide(inferred, declared)
    else:
        ok = len(inferred) == len(declared) and all(map(is_compatible_type, inferred, declared))
    if not ok:
        raise VerifyError(
            "inferred type(s) "
            + ", ".join(f"'{t}'" for t in inferred)
            + " are incompatible with return type(s) of operation "
            + ", ".join(f"'{t}'" for t in declared)
        )


def _implements(cls: type, iface: type) -> bool:
    if issubclass(cls, iface):
        return True
    ext = getattr(iface, "_external", None)
    return ext is not None and any(c in ext for c in cls.__mro__)


class Verifier:
    """One verification run (use :func:`verify`)."""

    def __init__(self, ctx: Context | None = None) -> None:
        self.ctx = ctx
        self.num_errors = 0
        self.diagnostics: list[Diagnostic] = []
        self._classes: dict[type, _ClassInfo] = {}
        self._dom = DominanceCache()
        self._symbols = SymbolTableCollection()
        self._dialect_known: dict[str, bool] = {}

    # ---- reporting -------------------------------------------------------------------------

    def error(
        self,
        op: Operation | None,
        message: str,
        notes: list[tuple[str, Any]] | None = None,
        prefix: bool = True,
        loc: Location | None = None,
    ) -> None:
        """Report an error at ``op`` (``'name' op message``), or at ``loc`` without a prefix."""
        self.num_errors += 1
        if prefix and op is not None:
            message = op_error_message(op, message)
        if loc is None and op is not None:
            self.diagnostics.append(emit_at_op("error", op, message, notes))
        else:
            self.diagnostics.append(emit_error(loc, message, notes))

    def _report(self, op: Operation, e: VerifyError) -> None:
        loc = getattr(e, "location", None)
        self.error(op, e.message, e.notes, prefix=getattr(e, "op_prefix", True), loc=loc)

    def _info(self, cls: type) -> _ClassInfo:
        info = self._classes.get(cls)
        if info is None:
            info = self._classes[cls] = _ClassInfo(cls)
        return info

    # ---- driver --------------------------------------------------------------------------------

    def run(self, op: Operation) -> None:
        self.verify_op(op)
        if op.parent is None:
            return
        # A nested op: check that its operands are visible from where it is.
        self._check_operands_slow_all(op)

    def _check_operands_slow_all(self, op: Operation) -> None:
        for i, o in enumerate(op._operands):
            self._check_dominance_slow(op, i, o.value)

    def verify_op(self, op: Operation, info: _ClassInfo | None = None) -> None:
        if info is None:
            info = self._info(type(op))
        ok = True
        if not info.registered:
            ok = self._check_unregistered(op)
        else:
            if info.fast and info.fast_check(op):
                ok = self._run_checks(op, info, info.trait_checks)
            else:
                try:
                    if SingleBlock in op.traits:  # MLIR checks this trait before the declaration
                        SingleBlock().verify(op)
                    verify_op_def(op)
                except VerifyError as e:
                    self._report(op, e)
                    ok = False
                except Exception as e:  # a declaration check tripping over malformed IR
                    self.error(op, f"failed to verify: {type(e).__name__}: {e}")
                    ok = False
                if ok:  # before the op's own checks, which may rely on these types
                    ok = self._check_value_types(op)
                if ok:
                    ok = self._run_checks(op, info, info.all_trait_checks)
        if op.regions:
            if ok:
                self._verify_regions(op, info)
            else:  # as MLIR, the body of an op that failed is not verified (it would cascade)
                self._check_region_links(op)
        if ok and info.registered:
            if info.branch:
                self._check_branch(op)
            if info.symbol_uses_hook:
                try:
                    op.verify_symbol_uses(self._symbols)  # type: ignore[attr-defined]
                except VerifyError as e:
                    self._report(op, e)
            elif info.call:
                self._check_call(op)

    def _run_checks(self, op: Operation, info: _ClassInfo, trait_checks: list) -> bool:
        try:
            for check in trait_checks:
                check(op)
            if info.symbol:
                verify_symbol(op)
            if info.own_verify:
                op.verify_()
            if info.infer:
                _check_inferred_types(op)
        except VerifyError as e:
            self._report(op, e)
            return False
        except DiagnosticError:
            raise
        except Exception as e:  # an op verifier crashed on malformed IR: still a located error
            self.error(op, f"verifier failed: {type(e).__name__}: {e}")
            return False
        return True

    def _check_value_types(self, op: Operation) -> bool:
        """Element types that constrain the shape around them (a per-axis quantized type's axis
        and scale count): each bad type is reported once, at the op defining it or, for a block
        argument, at its users; an op using a bad value is not checked further."""
        for i, o in enumerate(op._operands):
            v = o.value
            err = shaped_type_error(v.type)
            if err is not None:
                if type(v) is BlockArgument:
                    self.error(op, f"operand #{i} type '{v.type}': {err}")
                return False
        for i, r in enumerate(op.results):
            err = shaped_type_error(r.type)
            if err is not None:
                self.error(op, f"result #{i} type '{r.type}': {err}")
                return False
        return True

    def _check_unregistered(self, op: Operation) -> bool:
        name = op.name
        dot = name.find(".")
        dialect = name[:dot] if dot > 0 else ""
        if dialect and self._dialect_registered(dialect):
            self.error(
                op,
                f"unregistered operation '{name}' found in dialect ('{dialect}') that does not allow unknown operations",
                prefix=False,
            )
            return False
        ctx = self.ctx
        if ctx is not None and not ctx.allow_unregistered_dialects:
            self.error(op, _UNREGISTERED_DIALECT_MSG)
            return False
        return True

    def _dialect_registered(self, name: str) -> bool:
        known = self._dialect_known.get(name)
        if known is None:
            if self.ctx is not None:
                known = name in self.ctx.dialects
            else:
                from lamina.ir.context import lookup_dialect

                try:
                    known = lookup_dialect(name) is not None
                except Exception:
                    known = False
            self._dialect_known[name] = known
        return known

    # ---- regions and blocks ----------------------------------------------------------------------

    def _check_region_links(self, op: Operation) -> None:
        for region in op.regions:
            if region.parent is not op:
                self.error(op, "region's parent link does not point to the op")

    def _verify_regions(self, op: Operation, info: _ClassInfo) -> None:
        self._check_region_links(op)
        for region in op.regions:
            blocks = region.blocks
            if not blocks:
                continue
            no_term_ok = len(blocks) == 1 and info.no_terminator
            for block in blocks:
                self._verify_block(op, region, block, no_term_ok, info.graph)

    def _verify_block(
        self, parent: Operation, region: Region, block: Block, no_term_ok: bool, graph: bool
    ) -> None:
        if block.parent is not region:
            self.error(parent, "block's parent link does not point to its region")
        for i, a in enumerate(block.args):
            if a.block is not block or a.index != i:
                self.error(None, "block argument not owned by block", prefix=False, loc=a.location)
        if block._first is None:
            if not no_term_ok:
                self.error(
                    None,
                    "empty block: expect at least a terminator",
                    prefix=False,
                    loc=diagnostic_location(parent),
                )
            return
        if not block._order_valid:
            block._renumber()
        classes = self._classes
        op: Operation | None = block._first
        prev: Operation | None = None
        order = -1
        misplaced = False
        while op is not None:
            if op.parent is not block or op.prev_op is not prev:
                self.error(op, "operation's parent/sibling links are inconsistent")
            if op._order <= order:  # stale numbering (links edited directly): renumber
                block._renumber()
            order = op._order
            info = classes.get(type(op))
            if info is None:
                info = self._info(type(op))
            for i, r in enumerate(op.results):
                if r.op is not op or r.index != i:
                    self.error(op, f"result #{i} is not owned by this operation")
            if op._successors and op.next_op is not None:
                # MLIR's one error for a branch in the middle of a block (not also the terminator
                # trait's, nor "block with no terminator" for the ops after it)
                self.error(
                    op, "operation with block successors must terminate its parent block", prefix=False
                )
                misplaced = True
            else:
                self.verify_op(op, info)
            # SSA dominance of the operands.
            for i, o in enumerate(op._operands):
                v = o.value
                if type(v) is OpResult:
                    d = v.op
                    if d.parent is block and (d._order < op._order or graph):
                        continue
                elif type(v) is BlockArgument and v.block is block:
                    continue
                n = self.num_errors
                self._check_dominance_slow(op, i, v)
                if self.num_errors != n:  # one dominance error per op, as MLIR
                    break
            if op._successors:
                for s in op._successors:
                    if s.block.parent is not region:
                        self.error(op, "branching to block of a different region")
                        break
            prev = op
            op = op.next_op
        last = block._last
        # a non-terminator with successors at the end already failed its successor count
        if (
            not no_term_ok
            and not misplaced
            and last is not None
            and not last._successors
            and not self._info(type(last)).is_terminator
        ):
            self.error(last, f"block with no terminator, has {_op_text(last)}", prefix=False)

    # ---- dominance -------------------------------------------------------------------------------

    def _check_dominance_slow(self, user: Operation, index: int, v: Value) -> None:
        if v is None:
            self.error(user, f"null operand found (operand #{index})", prefix=False)
            return
        def_op: Operation | None
        if type(v) is OpResult or isinstance(v, OpResult):
            def_op = v.op  # type: ignore[attr-defined]
            def_block = def_op.parent
        else:
            def_op = None
            def_block = v.block  # type: ignore[attr-defined]
        def_region = def_block.parent if def_block is not None else None
        if def_region is None or def_block is None:
            self.error(user, "operation's operand is unlinked", prefix=False)
            return
        # Walk up from the user to its ancestor in the defining region.
        anc = user
        blk = user.parent
        isolated: Operation | None = None
        while blk is not None and blk.parent is not def_region:
            region = blk.parent
            p = region.parent if region is not None else None
            if p is None:
                blk = None
                break
            if isolated is None and IsolatedFromAbove in p.traits:
                isolated = p
            anc = p
            blk = p.parent
        if isolated is not None and (blk is not None or not isolated.is_ancestor(def_region.parent)):  # type: ignore[arg-type]
            self.error(
                user,
                "using value defined outside the region",
                [("required by region isolation constraints", diagnostic_location(isolated))],
            )
            return
        if blk is None:
            self._dominance_error(user, index, v)
            return
        region_op = def_region.parent
        graph = region_op is not None and self._info(type(region_op)).graph
        if blk is def_block:
            if def_op is None or graph:
                return
            if not def_block._order_valid:
                def_block._renumber()
            if def_op._order < anc._order:
                return
        elif graph or self._dom.get(def_region).dominates(def_block, blk):
            return
        self._dominance_error(user, index, v)

    def _dominance_error(self, user: Operation, index: int, v: Value) -> None:
        block1 = user.parent
        region1 = block1.parent if block1 is not None else None
        if isinstance(v, OpResult):
            block2 = v.op.parent
            region2 = block2.parent if block2 is not None else None
            if block1 is block2:
                where = " (op in the same block)"
            elif region1 is region2:
                where = " (op in the same region)"
            elif _is_proper_ancestor(region2, region1):
                where = " (op in a parent region)"
            elif _is_proper_ancestor(region1, region2):
                where = " (op in a child region)"
            else:
                where = " (op is neither in a parent nor in a child region)"
            note: tuple[str, Location | None] = ("operand defined here" + where, diagnostic_location(v.op))
        else:
            assert isinstance(v, BlockArgument)
            block2 = v.block
            region2 = block2.parent
            parent_op = region2.parent if region2 is not None else None
            loc = diagnostic_location(parent_op) if parent_op is not None else None
            if region2 is None:
                note = (" (block without parent)", loc)
            else:
                idx = region2.blocks.index(block2)
                if region1 is region2:
                    where = " in the same region)"
                elif _is_proper_ancestor(region2, region1):
                    where = " in a parent region)"
                elif _is_proper_ancestor(region1, region2):
                    where = " in a child region)"
                else:
                    where = " neither in a parent nor in a child region)"
                note = (f"operand defined as a block argument (block #{idx}{where}", loc)
        self.error(user, f"operand #{index} does not dominate this use", [note], prefix=False)

    # ---- interfaces ------------------------------------------------------------------------------

    def _check_branch(self, op: Operation) -> None:
        iface = BranchOpInterface.get(op)
        for i, s in enumerate(op._successors):
            dest = s.block
            try:
                operands = list(iface.successor_operands(i))
            except Exception as e:
                self.error(op, f"cannot compute the operands of successor #{i}: {type(e).__name__}: {e}")
                return
            if len(operands) != len(dest.args):
                self.error(
                    op,
                    f"branch has {len(operands)} operands for successor #{i}, but target block has {len(dest.args)}",
                    prefix=False,
                )
                continue
            for j, (v, a) in enumerate(zip(operands, dest.args)):
                if v.type is not a.type:
                    self.error(op, f"type mismatch for bb argument #{j} of successor #{i}", prefix=False)
                    break

    def _check_call(self, op: Operation) -> None:
        iface = CallOpInterface.get(op)
        try:
            callee = iface.callee()
        except Exception:
            return
        if not isinstance(callee, SymbolRefAttr):
            return
        target = self._symbols.lookup_nearest(op, callee)
        fn = CallableOpInterface.get(target) if target is not None else None
        if fn is None:
            self.error(op, f"'{_ref_text(callee)}' does not reference a valid function")
            return
        try:
            inputs = list(fn.argument_types())
            results = list(fn.result_types_())
        except Exception:
            return
        args = list(iface.arg_operands())
        if len(inputs) != len(args):
            self.error(op, "incorrect number of operands for callee")
            return
        for i, (t, v) in enumerate(zip(inputs, args)):
            if v.type is not t:
                self.error(
                    op,
                    f"operand type mismatch: expected operand type '{t}', but provided '{v.type}' for operand number {i}",
                )
                return
        if len(results) != len(op.results):
            self.error(op, "incorrect number of results for callee")
            return
        for i, (t, r) in enumerate(zip(results, op.results)):
            if r.type is not t:
                self.error(
                    op,
                    f"result type mismatch at index {i}",
                    [
                        (
                            "      op result types: " + ", ".join(f"'{x}'" for x in op.result_types),
                            diagnostic_location(op),
                        ),
                        (
                            "function result types: " + ", ".join(f"'{x}'" for x in results),
                            diagnostic_location(op),
                        ),
                    ],
                )
                return


def _ref_text(ref: SymbolRefAttr) -> str:
    return "::".join([ref.root, *(f"@{n}" for n in ref.nested)])


def _is_proper_ancestor(a: Region | None, b: Region | None) -> bool:
    """Region ``a`` strictly contains region ``b``."""
    if a is None or b is None or a is b:
        return False
    r: Region | None = b
    while r is not None:
        p = r.parent
        blk = p.parent if p is not None else None
        r = blk.parent if blk is not None else None
        if r is a:
            return True
    return False


def _op_text(op: Operation) -> str:
    try:
        from lamina.ir.printer import Printer

        return Printer().print_op_to_string(op).strip()
    except Exception:
        return f"'{op.name}' op"

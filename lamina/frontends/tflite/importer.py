"""TFLite → ``top`` importer.

``import_tflite(path, ctx)`` returns a ``builtin.module`` holding ``func.func @main`` for subgraph 0:
its arguments are the model's inputs (each through a ``top.Input``), constant buffers become
``top.Weight`` ops (float16 or int8 weights behind a DEQUANTIZE are folded to float32 weights), every
operator becomes ``top`` ops through the converter table in :mod:`.converters`, and ``func.return``
returns the model's outputs. Inputs and outputs keep their TFLite names, shapes and NHWC layout.

**Layout.** TFLite is NHWC, ``top`` follows ONNX's NCHW. Each TFLite tensor may exist in two
layouts: as TFLite holds it, and (rank 4) in NCHW, made on demand by a ``top.Permute`` and cached, so
that layout-sensitive ops (convolutions, pools) read NCHW and layout-free ops (elementwise,
concatenation, padding, reductions) work in whichever layout their input already has: a
CONV→RELU→CONV chain has no permute between the convolutions. A tensor's value in TFLite's layout is
located at ``NameLoc(<tensor name>, FileLineColLoc(<model file>, 0, 0))``; its NCHW value at
``<tensor name>_nchw`` (:func:`lamina.frontends.tflite.runtime.tflite_layout_view` turns such dumps
back into TFLite's layout for per-layer comparison).

Problems are one :class:`~.reader.TfliteImportError`: a malformed file, every unsupported op at once
with the tensors it produces, or an operator that cannot be converted, naming its output tensor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lamina.execution.interpreter import NAME_KEY  # the key the interpreter names I/O by
from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, dense_resource
from lamina.ir.context import Context
from lamina.ir.core import Block, Operation, Region, Value
from lamina.ir.diagnostics import Diagnostic, VerifyError
from lamina.ir.location import FileLineColLoc, FusedLoc, Location, NameLoc
from lamina.ir.opdef import verify_op_def
from lamina.ir.types import FloatType, RankedTensorType, Type, UnrankedTensorType, f32

from .quantization import QUANT_RANGE_ATTR, dequantize_array, is_quantized, real_range
from .reader import Operator, Tensor, TfliteImportError, TfliteModel, densify, load_model, parse_model
from .registry import CONVERTERS, TO_NCHW, TO_NHWC, Invalid, Unsupported, element_type, tensor_type


class TfliteConverter:
    """Converts one subgraph of a :class:`TfliteModel` (subgraph 0, or a subgraph that control flow
    calls: :meth:`inline`) into ops appended to one block."""

    def __init__(self, model: TfliteModel, ctx: Context, parent: TfliteConverter | None = None) -> None:
        self.model = model
        self.ctx = ctx
        self.file_loc = FileLineColLoc(model.filename, 0, 0)
        self.block = Block()
        #: tensor index → {"tfl": value in TFLite's layout, "nchw": value in NCHW}
        self.values: dict[int, dict[str, Value]] = {}
        #: tensor index → its constant value, float32 for float constants (DEQUANTIZE folded)
        self.consts: dict[int, np.ndarray] = {}
        self._keys: set[str] = parent._keys if parent else set()  # weight names, unique in the module
        self._by_name = {t.name: t.index for t in model.tensors}
        #: location name → the quantized TFLite tensor whose scale and zero point the value carries
        #: (a full-integer model's calibration table is derived from it, :mod:`.quantization`)
        self.qsource: dict[str, int] = {}
        self.children: list[TfliteConverter] = []
        #: the subgraphs being converted, outermost first (a subgraph calling itself is refused)
        self.calling: tuple[int, ...] = parent.calling if parent else (0,)

    def inline(self, k: int, args: Sequence[Value], block: Block) -> list[Value]:
        """Convert subgraph ``k`` into ``block`` with ``args`` as its inputs (in TFLite's layout);
        returns its outputs. Problems inside it are one :class:`Invalid` or :class:`Unsupported`
        naming the subgraph's operator."""
        if k in self.calling:
            raise Unsupported(f"subgraph {k} calls itself (recursion is not supported)")
        sub = self.model.subgraph_model(k)
        if len(args) != len(sub.inputs):
            raise Invalid(f"subgraph {k} takes {len(sub.inputs)} inputs, given {len(args)}")
        child = TfliteConverter(sub, self.ctx, self)
        child.calling = (*self.calling, k)
        child.block = block
        self.children.append(child)
        for i, v in zip(sub.inputs, args):
            child.bind(i, v)
        child.fold_constants()
        errors = child.convert()
        if errors:
            msgs = "; ".join(m for _, m in errors)
            if all("not supported" in m for _, m in errors):
                raise Unsupported(f"in subgraph {k}: {msgs}")
            raise Invalid(f"in subgraph {k}: {msgs}")
        return [child.get(o) for o in sub.outputs]

    def all_qsources(self) -> list[tuple[str, Tensor]]:
        """Every (location name, quantized tensor) of this subgraph and the ones it inlined."""
        out = [(n, self.tensor(i)) for n, i in self.qsource.items()]
        for c in self.children:
            out.extend(c.all_qsources())
        return out

    # ---- tensors ---------------------------------------------------------------------------

    def tensor(self, i: int) -> Tensor:
        return self.model.tensors[i]

    def name(self, i: int) -> str:
        return self.model.tensors[i].name

    def const(self, i: int) -> np.ndarray | None:
        """The constant value of tensor ``i`` (None for activations and absent inputs); a quantized
        integer constant reads as its dequantized float32 value."""
        if i < 0:
            return None
        c = self.consts.get(i)
        t = self.model.tensors[i]
        if c is not None and t.quant is not None and c.dtype.kind in "iu":
            # int8 weights read directly (dynamic-range quantized models): their real value
            c = self.consts[i] = dequantize(t, c)
        return c

    def need_const(self, op: Operator, k: int, what: str) -> np.ndarray:
        c = self.const(op.inputs[k]) if k < len(op.inputs) else None
        if c is None:
            raise Unsupported(f"its {what} (input {k}) must be a constant")
        return c

    def has_nchw(self, i: int) -> bool:
        return "nchw" in self.values.get(i, {})

    def get(self, i: int) -> Value:
        """Tensor ``i`` in TFLite's layout."""
        vals = self.values.get(i)
        if vals is None:
            c = self.const(i)
            if c is None:
                raise Invalid(f"tensor '{self.name(i)}' is read before any operator produces it")
            v = self.weight(c, self.name(i))
            self._keep_grid(v, i)
            self.values[i] = {"tfl": v}
            return v
        tfl = vals.get("tfl")
        if tfl is None:
            tfl = vals["tfl"] = self.permute(vals["nchw"], TO_NHWC, self.name(i))
            self.tag(self.name(i), i)
        return tfl

    def get_nchw(self, i: int) -> Value:
        """Tensor ``i`` (rank 4) in NCHW."""
        vals = self.values.get(i, {})
        v = vals.get("nchw")
        if v is None:
            c = self.const(i)
            if c is not None and c.ndim == 4:
                v = self.weight(np.ascontiguousarray(c.transpose(TO_NCHW)), self.name(i) + "_nchw")
                self._keep_grid(v, i)
            else:
                v = self.permute(self.get(i), TO_NCHW, self.name(i) + "_nchw")
                self.tag(self.name(i) + "_nchw", i)
            self.values.setdefault(i, {})["nchw"] = v
        return v

    def get_as(self, i: int, nchw: bool) -> Value:
        """Tensor ``i`` in NCHW (``nchw``) or in TFLite's layout; a lower-rank constant is
        broadcast to rank 4 first, so that it still broadcasts against an NCHW tensor."""
        if not nchw:
            return self.get(i)
        c = self.const(i)
        if c is not None and c.ndim < 4:
            c4 = c.reshape((1,) * (4 - c.ndim) + c.shape)
            v = self.weight(np.ascontiguousarray(c4.transpose(TO_NCHW)), self.name(i) + "_nchw")
            self._keep_grid(v, i)
            return v
        return self.get_nchw(i)

    def _keep_grid(self, v: Value, i: int) -> None:
        """A quantized constant read as a tensor (an operand of ADD, MUL, CONCATENATION, ...) keeps
        its grid: the real range of its integers on its ``top.Weight``
        (``lamina.quant_range = [lo, hi]``), which the INT8 lowering quantizes it with, so that its
        values stay the model's (weights of convolutions and FULLY_CONNECTED are quantized per
        channel by the lowering instead)."""
        from lamina.ir.attributes import FloatAttr
        from lamina.ir.types import f64

        rng = real_range(self.tensor(i))
        op = v.defining_op()
        if rng is not None and op is not None:
            op.attributes[QUANT_RANGE_ATTR] = ArrayAttr([FloatAttr(rng[0], f64), FloatAttr(rng[1], f64)])

    def bind(self, i: int, v: Value, nchw: bool = False) -> None:
        self.values.setdefault(i, {})["nchw" if nchw else "tfl"] = v

    def out_name(self, i: int, nchw: bool) -> str:
        return self.name(i) + ("_nchw" if nchw else "")

    def tag(self, name: str, i: int) -> None:
        """The value located ``name`` carries the quantization of tensor ``i`` (a value TFLite's
        kernels hold in ``i``'s scale and zero point: a layout copy, a reshape, the result of an op
        before its fused activation clamps it). Values named ``<tensor>`` or ``<tensor>_nchw`` are
        tagged with their tensor without asking."""
        if i >= 0 and is_quantized(self.tensor(i)):
            self.qsource.setdefault(name, i)

    def _auto_tag(self, name: str) -> None:
        i = self._by_name.get(name)
        if i is None and name.endswith("_nchw"):
            i = self._by_name.get(name[: -len("_nchw")])
        if i is not None:
            self.tag(name, i)

    # ---- ops -------------------------------------------------------------------------------

    def loc(self, name: str | Sequence[str]) -> Location:
        """``NameLoc(name, FileLineColLoc(<model file>, 0, 0))``; several names (one per result of
        a multi-result op) are a ``FusedLoc`` of such locations."""
        if isinstance(name, str):
            return NameLoc(name, self.file_loc)
        return FusedLoc([NameLoc(n, self.file_loc) for n in name])

    def weight(self, array: np.ndarray, name: str) -> Value:
        """A ``top.Weight`` holding ``array`` (float constants as float32)."""
        from lamina.dialects.top.io import WeightOp
        from lamina.ir.attributes import dtype_to_element_type

        arr = np.asarray(array)
        if arr.dtype.kind == "f" and arr.dtype != np.float32:
            arr = arr.astype(np.float32)
        key = name
        n = 1
        while key in self._keys:
            key = f"{name}_{n}"
            n += 1
        self._keys.add(key)
        attr = dense_resource(self.ctx.resources, key, arr, dtype_to_element_type(arr.dtype))
        op = WeightOp.create([], [attr.type], {"value": attr}, {}, 0, (), self.loc(name))
        self.block.append(op)
        return op.results[0]

    def i64(self, values: Sequence[int], name: str) -> Value:
        return self.weight(np.asarray(list(values), dtype=np.int64), name)

    def emit_op(
        self,
        cls: type[Operation],
        operands: Sequence[Value | None],
        name: str | Sequence[str],
        props: Mapping[str, Any] | None = None,
        result_types: Sequence[Type] | None = None,
        regions: Sequence[Region] = (),
    ) -> Operation:
        """Create ``cls`` located at ``name`` (or one name per result), with ``regions``; result
        types from the op's own shape inference unless given."""
        from lamina.dialects.top.io import NoneOp
        from lamina.frontends.onnx.converters import to_prop  # Python values as top's properties
        from lamina.ir.types import none

        ops: list[Value] = []
        for v in operands:
            if v is None:
                nop = NoneOp.create([], [none], {}, {}, 0, (), self.loc("none"))
                self.block.append(nop)
                v = nop.results[0]
            ops.append(v)
        od = cls.op_def
        n_res = len(od.results) if result_types is None else len(result_types)
        types = list(result_types) if result_types is not None else [UnrankedTensorType(f32)] * n_res
        pr = {k: a for k, v in (props or {}).items() if (a := to_prop(cls, k, v)) is not None}
        op = cls.create(ops, types, pr, {}, list(regions), (), self.loc(name))
        self.block.append(op)
        for n in [name] if isinstance(name, str) else name:
            self._auto_tag(n)
        try:
            verify_op_def(op)
            op.verify_()
            if result_types is None:
                for r, t in zip(op.results, op.infer_shapes()):  # type: ignore[attr-defined]
                    r.type = t
        except VerifyError as e:
            raise Invalid(str(e)) from None
        return op

    def emit(
        self,
        cls: type[Operation],
        operands: Sequence[Value | None],
        name: str,
        props: Mapping[str, Any] | None = None,
        result_type: Type | None = None,
    ) -> Value:
        return self.emit_op(
            cls, operands, name, props, None if result_type is None else [result_type]
        ).results[0]

    def permute(self, v: Value, order: Sequence[int], name: str) -> Value:
        from lamina.dialects.top.tensor import PermuteOp

        return self.emit(PermuteOp, [v], name, {"order": list(order)})

    def _qparams(self, t: Tensor, name: str, axis: int) -> tuple[list[Value], dict[str, Any]]:
        """The scale and zero-point weights of quantized tensor ``t`` (``axis``: its quantized
        dimension in the layout of the value they apply to)."""
        q = t.quant
        assert q is not None
        per_channel = q.scale.size > 1
        scale = q.scale.astype(np.float32).reshape(-1 if per_channel else ())
        zp = (q.zero_point if q.zero_point.size else np.zeros(1, np.int64)).astype(t.dtype)
        zp = zp.reshape(-1) if per_channel and zp.size > 1 else np.full(scale.shape, zp.reshape(-1)[0])
        vals = [self.weight(scale, name + "_scale"), self.weight(zp, name + "_zero_point")]
        return vals, {"axis": axis if per_channel else 1}

    def dequantize(self, v: Value, t: Tensor, name: str, axis: int | None = None) -> Value:
        """The real values (float32) of ``v``, the integers of quantized tensor ``t``
        (``top.DequantizeLinear``, located ``name``)."""
        from lamina.dialects.top.extra import DequantizeLinearOp

        shape = list(getattr(v.type, "shape", t.shape))
        ops, props = self._qparams(t, name, t.quant.axis if axis is None else axis)  # type: ignore[union-attr]
        self.tag(name, t.index)
        return self.emit(DequantizeLinearOp, [v, *ops], name, props, RankedTensorType(shape, f32))

    def quantize(self, v: Value, t: Tensor, name: str, axis: int | None = None) -> Value:
        """``v`` (float32) as the integers of quantized tensor ``t`` (``top.QuantizeLinear``:
        round, add the zero point, saturate to ``t``'s type; located ``name``)."""
        from lamina.dialects.top.extra import QuantizeLinearOp

        shape = list(getattr(v.type, "shape", t.shape))
        ops, props = self._qparams(t, name, t.quant.axis if axis is None else axis)  # type: ignore[union-attr]
        return self.emit(
            QuantizeLinearOp, [v, *ops], name, props, RankedTensorType(shape, element_type(t.dtype))
        )

    def reshape(self, v: Value, shape: Sequence[int], name: str) -> Value:
        from lamina.dialects.top.tensor import ReshapeOp

        return self.emit(ReshapeOp, [v, self.i64(shape, name + "_shape")], name)

    # ---- the graph -------------------------------------------------------------------------

    def fold_constants(self) -> None:
        """Constant buffers, and DEQUANTIZE of constants (float16 or int8 weights), as float32."""
        for t in self.model.tensors:
            if t.data is not None and not t.sparse:
                self.consts[t.index] = t.data  # quantized ones are read through DEQUANTIZE
        for op in self.model.operators:  # in order: DENSIFY feeds DEQUANTIZE
            if not (op.inputs and op.inputs[0] >= 0 and op.outputs):
                continue
            src = self.tensor(op.inputs[0])
            if op.op == "DENSIFY" and src.sparsity is not None and src.data is not None:
                try:
                    self.consts[op.outputs[0]] = densify(src.shape, src.sparsity, src.data)
                except ValueError as e:
                    raise TfliteImportError(
                        f"'{self.model.filename}': DENSIFY '{self.name(op.outputs[0])}': sparse tensor "
                        f"'{src.name}': {e}",
                        "invalid",
                    ) from None
            elif op.op == "DEQUANTIZE" and op.inputs[0] in self.consts:
                self.consts[op.outputs[0]] = dequantize(src, self.consts[op.inputs[0]])

    def convert(self) -> list[tuple[str, str]]:
        """Convert every operator; returns ``(tensor name, message)`` for each that failed."""
        errors: list[tuple[str, str]] = []
        failed: set[int] = set()
        for op in self.model.operators:
            if op.outputs and all(o in self.consts for o in op.outputs):
                continue  # folded (DEQUANTIZE of a constant)
            if any(i in failed for i in op.inputs if i >= 0):
                failed.update(op.outputs)
                continue
            what = self.name(op.outputs[0]) if op.outputs else f"operator {op.index}"
            try:
                CONVERTERS[op.op](self, op)
            except (Unsupported, Invalid, TfliteImportError) as e:
                errors.append((what, f"{op.op} '{what}': {e}"))
                failed.update(op.outputs)
                continue
            missing = [self.name(o) for o in op.outputs if o not in self.values]
            if missing:
                errors.append((what, f"{op.op} '{what}': produced no value for {', '.join(missing)}"))
                failed.update(op.outputs)
        return errors


def dequantize(t: Tensor, data: np.ndarray | None = None) -> np.ndarray:
    """The float32 value of a constant tensor (``data``, by default its buffer): float16 widened,
    int8/uint8/int32 dequantized with its (per-tensor or per-channel) scale and zero point."""
    a = np.asarray(t.data if data is None else data)
    if a.dtype.kind == "f" or t.quant is None or t.quant.scale.size == 0:
        return a.astype(np.float32)
    return dequantize_array(t, a)


def _report(ctx: Context, loc: Location, msg: str) -> None:
    """Emit a located diagnostic to the context's handlers (counted only, when it has none)."""
    eng = ctx.diagnostics
    if eng._handlers:
        eng.emit(Diagnostic("error", loc, msg))
    else:
        eng.error_count += 1


def import_tflite(
    path_or_model: str | os.PathLike[str] | bytes | TfliteModel,
    ctx: Context,
    filename: str | None = None,
) -> Any:
    """Import subgraph 0 of a TFLite model (a path, the file's bytes or a parsed model) into a
    ``builtin.module``; raises :class:`TfliteImportError`."""
    return import_tflite_with_ranges(path_or_model, ctx, filename)[0]


def import_tflite_with_ranges(
    path_or_model: str | os.PathLike[str] | bytes | TfliteModel,
    ctx: Context,
    filename: str | None = None,
) -> tuple[Any, dict[str, tuple[float, float]]]:
    """:func:`import_tflite`, and the real range ``(lo, hi)`` of the TFLite quantization each value
    carries, by location name (empty for a float model; see :mod:`.quantization`)."""
    if isinstance(path_or_model, TfliteModel):
        model = path_or_model
    elif isinstance(path_or_model, (bytes, bytearray)):
        model = parse_model(bytes(path_or_model), filename or "<bytes>")
    else:
        model = load_model(path_or_model)
    return _import_model(model, ctx)


def _describe(model: TfliteModel, op: Operator, tensors: Sequence[Tensor]) -> str:
    """``out1, out2 (from in1, in2)``, and the subgraphs a control-flow op calls."""
    produced = [tensors[o].name for o in op.outputs]
    read = [tensors[i].name for i in op.inputs if i >= 0]
    desc = f"{', '.join(produced) or '-'} (from {', '.join(read) or '-'})"
    if op.calls:
        names = model.subgraph_names
        called = [f"{c} '{names[c]}'" if c < len(names) and names[c] else str(c) for c in op.calls]
        desc += f" calling subgraph {', '.join(called)}"
    return desc


#: what a refusal of control flow says about subgraphs
_SUBGRAPHS_NOTE = (
    "  (Lamina imports subgraph 0, the model's main subgraph, and the subgraphs WHILE and IF call "
    "as their regions; other operators calling subgraphs are not imported)"
)


def _import_model(model: TfliteModel, ctx: Context) -> tuple[Any, dict[str, tuple[float, float]]]:
    from lamina.dialects.func.ops import FuncOp, ReturnOp
    from lamina.dialects.top.io import InputOp
    from lamina.frontends.tflite import converters as _c  # noqa: F401
    from lamina.ir.attributes import TypeAttr
    from lamina.ir.builtin import ModuleOp
    from lamina.ir.types import FunctionType

    filename = model.filename
    file_loc = FileLineColLoc(filename, 0, 0)
    # 1. every unsupported op, at once
    unsupported: dict[str, list[str]] = {}
    calls = False
    every = [*model.operators, *(o for sg in model.subgraphs.values() for o in sg.operators)]
    tensors_of = {id(o): model.tensors for o in model.operators}
    for sg in model.subgraphs.values():
        tensors_of.update({id(o): sg.tensors for o in sg.operators})
    for top in every:
        if top.op not in CONVERTERS:
            calls = calls or bool(top.calls)
            desc = _describe(model, top, tensors_of[id(top)])
            unsupported.setdefault(("custom " if top.custom else "") + top.op, []).append(desc)
    if unsupported:
        lines = [
            f"  {k}: {'; '.join(v[:8])}{' ...' if len(v) > 8 else ''}" for k, v in sorted(unsupported.items())
        ]
        if calls:
            lines.append(_SUBGRAPHS_NOTE)
        msg = f"{len(unsupported)} unsupported TFLite op(s) in '{filename}':\n" + "\n".join(lines)
        _report(ctx, file_loc, msg)
        raise TfliteImportError(msg, "unsupported", unsupported)
    # 2. inputs: float32, plain integers, or quantized integers (full-integer models), each in
    # TFLite's own type; a quantized input is dequantized right after its top.Input
    cv = TfliteConverter(model, ctx)
    for i in model.inputs:
        t = model.tensors[i]
        if t.dtype.kind == "f" and t.dtype != np.float32:
            msg = (
                f"'{filename}': input '{t.name}' is {t.dtype}; Lamina imports float32, integer and "
                "quantized (int8, uint8, int16) inputs"
            )
            _report(ctx, NameLoc(t.name, file_loc), msg)
            raise TfliteImportError(msg, "unsupported")
    in_types = [tensor_type(model.tensors[i]) for i in model.inputs]
    func = FuncOp.new("main", in_types, [], loc=file_loc)
    entry = func.entry_block
    cv.block = entry
    for i, a in zip(model.inputs, entry.args):
        t = model.tensors[i]
        a.location = NameLoc(t.name, file_loc)
        inp = InputOp.create([a], [a.type], {}, {}, 0, (), NameLoc(t.name, file_loc))
        entry.append(inp)
        v: Value = inp.results[0]
        if is_quantized(t):
            v = cv.dequantize(v, t, t.name + "_dequantized")
        cv.bind(i, v)
    # 3. operators
    cv.fold_constants()
    errors = cv.convert()
    outs: list[Value] = []
    if not errors:
        for i in model.outputs:
            t = model.tensors[i]
            try:
                out = cv.get(i)
                if is_quantized(t) and not _is_integer(out):
                    # a quantized output is returned in TFLite's type, as LiteRT returns it
                    out = cv.quantize(out, t, t.name + "_quantized")
                outs.append(out)
            except (Invalid, Unsupported) as e:
                errors.append((t.name, f"model output: {e}"))
    if errors:
        for name, m in errors:
            _report(ctx, NameLoc(name, file_loc), m)
        msg = f"cannot import '{filename}':\n" + "\n".join(f"  {m}" for _, m in errors)
        kind = "unsupported" if all("not supported" in m for _, m in errors) else "invalid"
        raise TfliteImportError(msg, kind)
    entry.append(ReturnOp.create(outs, [], {}, {}, 0, (), file_loc))
    func.properties["function_type"] = TypeAttr(FunctionType(in_types, [v.type for v in outs]))
    func.properties["arg_attrs"] = ArrayAttr(
        [DictionaryAttr({NAME_KEY: StringAttr(model.tensors[i].name)}) for i in model.inputs]
    )
    func.properties["res_attrs"] = ArrayAttr(
        [DictionaryAttr({NAME_KEY: StringAttr(model.tensors[i].name)}) for i in model.outputs]
    )
    ranges: dict[str, tuple[float, float]] = {}
    for name, t in cv.all_qsources():
        r = real_range(t)
        if r is not None:
            ranges.setdefault(name, r)
    return ModuleOp.new([func], loc=file_loc), ranges


def _is_integer(v: Value) -> bool:
    e = getattr(v.type, "element_type", None)
    return e is not None and not isinstance(e, FloatType)


@dataclass
class TfliteImport:
    """An imported ``.tflite`` file: the ``top`` module, its context, the parsed model and, for a
    quantized model, the real range of each value's TFLite quantization by location name (what
    :func:`.quantization.calibration_table` writes)."""

    module: Any
    ctx: Context
    model: TfliteModel
    ranges: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def quantized(self) -> bool:
        """Whether the model has quantized activations (a full-integer model)."""
        return bool(self.ranges)


def load_tflite(path: str, input_shapes: Any = None, output_names: Sequence[str] = ()) -> TfliteImport:
    """Import a ``.tflite`` file into a ``top`` module (for the commands and the API); problems are
    one :class:`~lamina.support.errors.ToolError`. TFLite shapes are static: ``input_shapes``, when
    given, must be the model's own. ``output_names`` (TFLite tensor names) replace the model's
    outputs."""
    import dataclasses

    from lamina.support.errors import ToolError

    ctx = Context(handler=None)
    try:
        model = load_model(path)
        if input_shapes:
            given = list(input_shapes.values()) if isinstance(input_shapes, Mapping) else list(input_shapes)
            have = [list(model.tensors[i].shape) for i in model.inputs]
            if [list(s) for s in given] != have:
                raise TfliteImportError(
                    f"'{path}': input shapes {[list(s) for s in given]} differ from the model's {have} "
                    "(TFLite models have static shapes)",
                    "invalid",
                )
        if output_names:
            index = {t.name: t.index for t in model.tensors}
            unknown = [n for n in output_names if n not in index]
            if unknown:
                shown = ", ".join(f"'{t.name}'" for t in model.tensors[:5])
                raise TfliteImportError(
                    f"'{path}': --output_names {', '.join(repr(n) for n in unknown)}: no such tensor in the "
                    f"model (its tensors: {shown}{', ...' if len(model.tensors) > 5 else ''})",
                    "invalid",
                )
            model = dataclasses.replace(model, outputs=[index[n] for n in output_names])
        module, ranges = _import_model(model, ctx)
    except TfliteImportError as e:
        raise ToolError(str(e)) from None
    return TfliteImport(module, ctx, model, ranges)


def import_tflite_file(
    path: str, input_shapes: Any = None, output_names: Sequence[str] = ()
) -> tuple[Any, Context]:
    """:func:`load_tflite`'s module and context."""
    r = load_tflite(path, input_shapes, output_names)
    return r.module, r.ctx

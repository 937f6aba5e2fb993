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
from typing import Any

import numpy as np

from lamina.execution.interpreter import NAME_KEY  # the key the interpreter names I/O by
from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, dense_resource
from lamina.ir.context import Context
from lamina.ir.core import Block, Operation, Value
from lamina.ir.diagnostics import Diagnostic, VerifyError
from lamina.ir.location import FileLineColLoc, Location, NameLoc
from lamina.ir.opdef import verify_op_def
from lamina.ir.types import Type, UnrankedTensorType, f32

from .reader import Operator, Tensor, TfliteImportError, TfliteModel, densify, load_model, parse_model
from .registry import CONVERTERS, TO_NCHW, TO_NHWC, Invalid, Unsupported, tensor_type


class TfliteConverter:
    """Converts subgraph 0 of a :class:`TfliteModel` into ops appended to one block."""

    def __init__(self, model: TfliteModel, ctx: Context) -> None:
        self.model = model
        self.ctx = ctx
        self.file_loc = FileLineColLoc(model.filename, 0, 0)
        self.block = Block()
        #: tensor index → {"tfl": value in TFLite's layout, "nchw": value in NCHW}
        self.values: dict[int, dict[str, Value]] = {}
        #: tensor index → its constant value, float32 for float constants (DEQUANTIZE folded)
        self.consts: dict[int, np.ndarray] = {}
        self._keys: set[str] = set()

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
            self.values[i] = {"tfl": v}
            return v
        tfl = vals.get("tfl")
        if tfl is None:
            tfl = vals["tfl"] = self.permute(vals["nchw"], TO_NHWC, self.name(i))
        return tfl

    def get_nchw(self, i: int) -> Value:
        """Tensor ``i`` (rank 4) in NCHW."""
        vals = self.values.get(i, {})
        v = vals.get("nchw")
        if v is None:
            c = self.const(i)
            if c is not None and c.ndim == 4:
                v = self.weight(np.ascontiguousarray(c.transpose(TO_NCHW)), self.name(i) + "_nchw")
            else:
                v = self.permute(self.get(i), TO_NCHW, self.name(i) + "_nchw")
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
            return self.weight(np.ascontiguousarray(c4.transpose(TO_NCHW)), self.name(i) + "_nchw")
        return self.get_nchw(i)

    def bind(self, i: int, v: Value, nchw: bool = False) -> None:
        self.values.setdefault(i, {})["nchw" if nchw else "tfl"] = v

    def out_name(self, i: int, nchw: bool) -> str:
        return self.name(i) + ("_nchw" if nchw else "")

    # ---- ops -------------------------------------------------------------------------------

    def loc(self, name: str) -> Location:
        return NameLoc(name, self.file_loc)

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
        name: str,
        props: Mapping[str, Any] | None = None,
        result_types: Sequence[Type] | None = None,
    ) -> Operation:
        """Create ``cls``; result types from the op's own shape inference unless given."""
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
        op = cls.create(ops, types, pr, {}, 0, (), self.loc(name))
        self.block.append(op)
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
    if a.dtype.kind == "f":
        return a.astype(np.float32)
    if t.quant is None:
        return a.astype(np.float32)
    q = t.quant
    shape = [1] * a.ndim
    scale, zp = q.scale, q.zero_point
    if scale.size > 1 and a.ndim:
        shape[q.axis] = -1
    return ((a.astype(np.float32) - zp.astype(np.float32).reshape(shape)) * scale.reshape(shape)).astype(
        np.float32
    )


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
    if isinstance(path_or_model, TfliteModel):
        model = path_or_model
    elif isinstance(path_or_model, (bytes, bytearray)):
        model = parse_model(bytes(path_or_model), filename or "<bytes>")
    else:
        model = load_model(path_or_model)
    return _import_model(model, ctx)


def _import_model(model: TfliteModel, ctx: Context) -> Any:
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
    for top in model.operators:
        if top.op not in CONVERTERS:
            produced = [model.tensors[o].name for o in top.outputs]
            read = [model.tensors[i].name for i in top.inputs if i >= 0]
            desc = f"{', '.join(produced) or '-'} (from {', '.join(read) or '-'})"
            unsupported.setdefault(("custom " if top.custom else "") + top.op, []).append(desc)
    if unsupported:
        lines = [
            f"  {k}: {'; '.join(v[:8])}{' ...' if len(v) > 8 else ''}" for k, v in sorted(unsupported.items())
        ]
        msg = f"{len(unsupported)} unsupported TFLite op(s) in '{filename}':\n" + "\n".join(lines)
        _report(ctx, file_loc, msg)
        raise TfliteImportError(msg, "unsupported", unsupported)
    # 2. inputs
    cv = TfliteConverter(model, ctx)
    for i in model.inputs:
        t = model.tensors[i]
        if (t.dtype.kind == "f" and t.dtype != np.float32) or (t.quant is not None and t.dtype.kind in "iu"):
            msg = (
                f"'{filename}': input '{t.name}' is {t.dtype}"
                + (" quantized" if t.quant is not None else "")
                + "; Lamina imports float32 models and float models with float16 or int8 weights "
                "(full-integer models are not supported yet)"
            )
            _report(ctx, NameLoc(t.name, file_loc), msg)
            raise TfliteImportError(msg, "unsupported")
    in_types = [tensor_type(model.tensors[i]) for i in model.inputs]
    func = FuncOp.new("main", in_types, [], loc=file_loc)
    entry = func.entry_block
    cv.block = entry
    for i, a in zip(model.inputs, entry.args):
        name = model.tensors[i].name
        a.location = NameLoc(name, file_loc)
        inp = InputOp.create([a], [a.type], {}, {}, 0, (), NameLoc(name, file_loc))
        entry.append(inp)
        cv.bind(i, inp.results[0])
    # 3. operators
    cv.fold_constants()
    errors = cv.convert()
    outs: list[Value] = []
    if not errors:
        for i in model.outputs:
            try:
                outs.append(cv.get(i))
            except Invalid as e:
                errors.append((model.tensors[i].name, f"model output: {e}"))
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
    return ModuleOp.new([func], loc=file_loc)


def import_tflite_file(path: str, input_shapes: Any = None) -> tuple[Any, Context]:
    """Import a ``.tflite`` file into a ``top`` module (for the commands and the API); problems are
    one :class:`~lamina.support.errors.ToolError`. TFLite shapes are static: ``input_shapes``, when
    given, must be the model's own."""
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
        module = _import_model(model, ctx)
    except TfliteImportError as e:
        raise ToolError(str(e)) from None
    return module, ctx

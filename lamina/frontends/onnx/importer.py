"""ONNX → ``top`` importer.

``import_onnx(path_or_model, ...)`` returns a ``builtin.module`` holding ``func.func @main``: its
arguments are the model inputs (each through a ``top.Input``), initializers and ``Constant`` nodes
become ``top.Weight`` ops (``dense_resource`` blobs referencing the numpy arrays), every node
becomes ``top`` ops through the converter table in :mod:`.converters`, and ``func.return`` returns
the graph outputs. ``If``/``Loop``/``Scan`` subgraphs become regions that read outer values directly.

Every op is located at ``loc("<onnx output name>"("<model file>":0:0))`` (a fused location of those
for multi-output nodes), so diagnostics and tensor dumps use the names users see in Netron.

Problems are reported as located diagnostics and one :class:`OnnxImportError`: a malformed or
truncated file (or a device, FIFO or file over 2 GiB, refused before reading), *every* unsupported
op type at once with the nodes that use it, or what makes the model invalid, each once at its root
cause and naming the node or tensor (:func:`check_model` before anything is converted: IR version,
opsets, graph structure, node schemas; then each node's data, attributes and shapes as it is
converted). ONNX's own shape inference runs in a worker process (:mod:`.onnx_inference`).
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lamina.ir.attributes import ArrayAttr, DictionaryAttr, StringAttr, dense_resource
from lamina.ir.context import Context
from lamina.ir.core import Block, Operation, Region, Value
from lamina.ir.diagnostics import Diagnostic, VerifyError
from lamina.ir.location import FileLineColLoc, FusedLoc, Location, NameLoc
from lamina.ir.opdef import verify_op_def
from lamina.ir.types import (
    DYNAMIC,
    RankedTensorType,
    Type,
    UnrankedTensorType,
    f32,
    none,
)

from .registry import _ELEM, CONVERTERS, Node, Unsupported, onnx_elem_type, register  # noqa: F401

NAME_KEY = "onnx.name"


class OnnxImportError(Exception):
    """Import failed. ``kind`` is ``"malformed"``, ``"unsupported"`` or ``"invalid"``;
    ``unsupported`` maps each unsupported op type to the node names that use it."""

    def __init__(
        self,
        message: str,
        kind: str,
        unsupported: dict[str, list[str]] | None = None,
        diagnostics: Sequence[Diagnostic] = (),
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.unsupported = unsupported or {}
        self.diagnostics = list(diagnostics)


class Invalid(Exception):
    """Raised for a node or tensor that is wrong (bad attribute, data of the wrong length, ...)."""


def supported_opsets() -> range:
    """Opsets of the default ONNX domain Lamina imports: 1 up to the newest the installed onnx
    package defines (its shape inference and the node suite cover exactly those)."""
    from onnx import defs

    return range(1, defs.onnx_opset_version() + 1)


#: the largest file the protobuf format can hold
MAX_PROTOBUF_BYTES = 2**31


def onnx_type(tp: Any) -> Type | None:
    """The Lamina type of an ONNX TypeProto (None for non-tensor types: sequences, maps, optionals)."""
    if not tp.HasField("tensor_type"):
        return None
    tt = tp.tensor_type
    elem = onnx_elem_type(tt.elem_type) if tt.elem_type else f32
    if not tt.HasField("shape"):
        return UnrankedTensorType(elem)
    dims = [d.dim_value if d.HasField("dim_value") else DYNAMIC for d in tt.shape.dim]
    if any(d.HasField("dim_value") and d.dim_value < 0 for d in tt.shape.dim):
        # ONNX's own inference gives a window larger than its input a negative size
        raise Unsupported(f"negative dimension in shape {dims}")
    return RankedTensorType(dims, elem)


#: the typed TensorProto field holding each element type's data, and elements per field entry
_TYPED_FIELD = {
    1: ("float_data", 1),
    11: ("double_data", 1),
    7: ("int64_data", 1),
    12: ("uint64_data", 1),
    13: ("uint64_data", 1),
    21: ("int32_data", 2),
    22: ("int32_data", 2),
}


def check_tensor_data(tensor: Any, what: str | None = None) -> None:
    """Raise :class:`Invalid` if a TensorProto's dims are negative or its data (``raw_data`` or
    the typed field) does not hold exactly the elements its dims and element type need."""
    dims = list(tensor.dims)
    what = what or (f"tensor '{tensor.name}'" if tensor.name else "tensor")
    if any(d < 0 for d in dims):
        raise Invalid(f"{what} has negative dims {dims}")
    if tensor.data_type not in _ELEM or tensor.data_location == 1:
        return  # unsupported types are reported elsewhere; external data is checked once loaded
    count = int(np.prod(dims, dtype=np.int64)) if dims else 1
    elem = _ELEM[tensor.data_type]
    tname = _TENSOR_TYPE_NAMES.get(tensor.data_type, str(tensor.data_type))
    if tensor.HasField("raw_data"):
        width = elem.bitwidth
        need = (count * width + 7) // 8
        have = len(tensor.raw_data)
        if have != need:
            raise Invalid(f"{what} ({tname}, shape {dims}) needs {need} bytes of raw_data but has {have}")
        return
    field, per = _TYPED_FIELD.get(tensor.data_type, ("int32_data", 1))
    need = (count + per - 1) // per
    have = len(getattr(tensor, field))
    if have != need:
        raise Invalid(f"{what} ({tname}, shape {dims}) needs {need} values in {field} but has {have}")


_TENSOR_TYPE_NAMES = {
    1: "FLOAT",
    2: "UINT8",
    3: "INT8",
    4: "UINT16",
    5: "INT16",
    6: "INT32",
    7: "INT64",
    9: "BOOL",
    10: "FLOAT16",
    11: "DOUBLE",
    12: "UINT32",
    13: "UINT64",
    16: "BFLOAT16",
    17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ",
    21: "UINT4",
    22: "INT4",
}


def to_numpy(tensor: Any, what: str | None = None) -> np.ndarray:
    from onnx import numpy_helper

    if tensor.data_type == 8:
        raise Unsupported("string tensors are not supported")
    if any(d < 0 for d in tensor.dims):
        check_tensor_data(tensor, what)
    try:  # the data length is checked only when conversion fails (reading raw_data copies it)
        arr = numpy_helper.to_array(tensor)
    except Exception as e:
        check_tensor_data(tensor, what)
        raise Invalid(f"{what or 'tensor ' + repr(tensor.name)}: {e}") from None
    if arr.size != math.prod(tensor.dims):
        check_tensor_data(tensor, what)
    if arr.dtype.name in ("int4", "uint4"):
        arr = arr.astype(np.int8 if arr.dtype.name == "int4" else np.uint8)
    return arr


def _resource_key(name: str) -> str:
    key = re.sub(r"[^A-Za-z0-9_.]", "_", name) or "weight"
    return key if not key[0].isdigit() else "w" + key


# ---- node view handed to converters ------------------------------------------------------------


def attr_value(a: Any) -> Any:
    from onnx import AttributeProto as A

    t = a.type
    if t == A.INT:
        return int(a.i)
    if t == A.FLOAT:
        return float(a.f)
    if t == A.STRING:
        return a.s.decode("utf-8", "replace")
    if t == A.INTS:
        return [int(x) for x in a.ints]
    if t == A.FLOATS:
        return [float(x) for x in a.floats]
    if t == A.STRINGS:
        return [s.decode("utf-8", "replace") for s in a.strings]
    if t == A.TENSOR:
        return to_numpy(a.t, f"attribute '{a.name}'")
    if t == A.GRAPH:
        return a.g
    if t == A.GRAPHS:
        return list(a.graphs)
    if t == A.TYPE_PROTO:
        return a.tp
    raise Unsupported(f"attribute '{a.name}' of type {t} is not supported")


def _key(domain: str, op_type: str) -> str:
    return op_type if domain in ("", "ai.onnx") else f"{domain}::{op_type}"


# ---- the graph converter ---------------------------------------------------------------------


class GraphConverter:
    """Converts one ONNX graph (and its subgraphs) into ops appended to a block."""

    def __init__(
        self,
        ctx: Context,
        filename: str,
        opset: int,
        value_types: dict[str, Type],
        model_opsets: dict[str, int],
    ) -> None:
        self.ctx = ctx
        self.filename = filename
        self.file_loc = FileLineColLoc(filename, 0, 0)
        self.opset = opset
        self.model_opsets = model_opsets
        self.value_types = value_types
        self.scopes: list[dict[str, Value]] = [{}]
        self.block: Block = Block()
        self.errors: list[tuple[Location, str]] = []
        self._none: dict[Block, Value] = {}
        #: outputs of nodes that failed to convert (their users are skipped silently)
        self.failed: set[str] = set()
        #: ONNX element type codes of tensors, as the model declares or ONNX infers them
        self.elem_codes: dict[str, int] = {}

    # ---- values ----------------------------------------------------------------------------

    def lookup(self, name: str) -> Value | None:
        for scope in reversed(self.scopes):
            v = scope.get(name)
            if v is not None:
                return v
        return None

    def bind(self, name: str, v: Value) -> None:
        self.scopes[-1][name] = v

    def none(self) -> Value:
        v = self._none.get(self.block)
        if v is None:
            from lamina.dialects.top.io import NoneOp

            op = NoneOp.create([], [none], {}, {}, 0, (), NameLoc("none", self.file_loc))
            first = self.block.first_op
            self.block.insert_before(first, op) if first is not None else self.block.append(op)
            v = self._none[self.block] = op.results[0]
        return v

    def loc(self, names: Sequence[str]) -> Location:
        names = [n for n in names if n]
        if len(names) == 1:
            return NameLoc(names[0], self.file_loc)
        if not names:
            return self.file_loc
        return FusedLoc([NameLoc(n, self.file_loc) for n in names])

    def weight(self, array: np.ndarray, name: str, elem: Type | None = None) -> Value:
        """A ``top.Weight`` holding ``array`` by reference (no copy)."""
        from lamina.dialects.top.io import WeightOp
        from lamina.ir.attributes import dtype_to_element_type

        arr = np.asarray(array)
        et = elem or dtype_to_element_type(arr.dtype)
        attr = dense_resource(self.ctx.resources, _resource_key(name), arr, et)
        op = WeightOp.create([], [attr.type], {"value": attr}, {}, 0, (), NameLoc(name, self.file_loc))
        self.block.append(op)
        return op.results[0]

    def const(self, v: Value | None) -> np.ndarray | None:
        if v is None:
            return None
        from lamina.dialects.top.base import const_value

        return const_value(v)

    def emit(
        self,
        cls: type[Operation],
        operands: Sequence[Value | None],
        node: Node | None = None,
        props: Mapping[str, Any] | None = None,
        result_types: Sequence[Type] | None = None,
        names: Sequence[str] | None = None,
        regions: Sequence[Region] = (),
    ) -> Operation:
        """Create ``cls`` with ``operands`` (None → ``top.None``), properties and result types (by
        default the ONNX-inferred types of the node's outputs, refined by the op's shape inference)."""
        from lamina.ir.attributes import attr_from_python

        ops = [self.none() if v is None else v for v in operands]
        out_names = list(names) if names is not None else (node.outputs if node is not None else [])
        od = cls.op_def
        n_res = len(od.results) if all(r.kind == "single" for r in od.results) else len(out_names)
        if result_types is None:
            result_types = []
            for i in range(n_res):
                nm = out_names[i] if i < len(out_names) else ""
                if not nm:
                    result_types.append(none)
                else:
                    result_types.append(self.value_types.get(nm) or UnrankedTensorType(f32))
        pr = {k: attr_from_python(v) for k, v in (props or {}).items() if v is not None}
        loc = self.loc(out_names) if out_names else (node.loc if node is not None else self.file_loc)
        op = cls.create(ops, list(result_types), pr, {}, list(regions), (), loc)
        self.block.append(op)
        try:
            verify_op_def(op)
            op.verify_()
        except VerifyError as e:
            raise Invalid(str(e)) from None
        self._refine(op)
        return op

    def _refine(self, op: Operation) -> None:
        """Use the op's own shape inference where the ONNX types are not fully static. Outside
        subgraphs, operands the op cannot take are an error of the node (found here, it names the
        node; top-shape-infer would report it later without); inside (an ``If`` branch that is not
        taken for these input shapes) the types are left as they are."""
        infer = getattr(op, "infer_shapes", None)
        if infer is None:
            return
        static = all(
            (isinstance(r.type, RankedTensorType) and r.type.has_static_shape) or r.type is none
            for r in op.results
        )
        top_level = len(self.scopes) == 1
        if static and not top_level:
            return
        try:
            types = infer()
        except VerifyError as e:
            if top_level:
                raise Invalid(str(e)) from None
            return
        except Exception as e:
            if top_level:
                raise Invalid(f"shape inference failed: {type(e).__name__}: {e}") from None
            return
        if static:
            return
        for r, t in zip(op.results, types):
            if r.type is none:
                continue
            if isinstance(t, RankedTensorType) and (
                not isinstance(r.type, RankedTensorType)
                or (
                    t.rank == r.type.rank
                    and sum(d == DYNAMIC for d in t.shape) < sum(d == DYNAMIC for d in r.type.shape)
                )
            ):
                if (
                    isinstance(r.type, (RankedTensorType, UnrankedTensorType))
                    and r.type.element_type is not t.element_type
                ):
                    t = t.with_element_type(r.type.element_type)
                r.type = t

    # ---- graphs ----------------------------------------------------------------------------

    def convert_nodes(self, graph: Any) -> None:
        for init in graph.initializer:
            try:
                self.bind(init.name, self.weight(to_numpy(init, f"initializer '{init.name}'"), init.name))
            except Invalid as e:
                self.errors.append((NameLoc(init.name, self.file_loc), str(e)))
                self.failed.add(init.name)
            except Unsupported as e:
                self.errors.append((NameLoc(init.name, self.file_loc), f"initializer '{init.name}': {e}"))
                self.failed.add(init.name)
        for sp in getattr(graph, "sparse_initializer", ()):
            self.errors.append(
                (NameLoc(sp.values.name, self.file_loc), "sparse initializers are not supported")
            )
        for node in topological_order(graph):
            self.convert_node(node)

    def convert_node(self, proto: Any) -> None:
        loc = self.loc(list(proto.output) or [proto.name])
        key = _key(proto.domain, proto.op_type)
        where = _describe_node(proto)
        fn = CONVERTERS.get(key)
        if fn is None:
            self.errors.append((loc, f"unsupported op type '{key}'"))
            self.failed.update(proto.output)
            return
        inputs: list[Value | None] = []
        for name in proto.input:
            if not name:
                inputs.append(None)
                continue
            v = self.lookup(name)
            if v is None and name in self.failed:
                self.failed.update(proto.output)
                return
            if v is None:
                self.errors.append(
                    (loc, f"node '{proto.name}' ({proto.op_type}) reads undefined tensor '{name}'")
                )
                return
            inputs.append(v)
        try:
            opset = self.model_opsets.get(proto.domain or "", self.opset)
            check_input_types(proto, opset, self.elem_codes)
            attrs = {a.name: attr_value(a) for a in proto.attribute}
            node = Node(proto, inputs, attrs, opset, loc)
            outs = fn(self, node)
        except (Unsupported, Invalid) as e:
            self.errors.append((loc, f"{where}: {e}"))
            self.failed.update(proto.output)
            return
        except MemoryError as e:
            self.errors.append((loc, f"{where}: {e or 'out of memory'}"))
            self.failed.update(proto.output)
            return
        except Exception as e:
            self.errors.append((loc, f"{where} could not be converted: {type(e).__name__}: {e}"))
            self.failed.update(proto.output)
            return
        for name, v in zip(proto.output, outs):
            if name and v is not None:
                self.bind(name, v)

    def subgraph(self, graph: Any, arg_types: Sequence[Type] | None = None) -> Region:
        """Convert a subgraph into a single-block region ending in ``top.Yield``. Its inputs become
        block arguments; names of enclosing graphs stay visible."""
        from lamina.dialects.top.io import YieldOp

        types = []
        for i, inp in enumerate(graph.input):
            t = onnx_type(inp.type) if inp.type.HasField("tensor_type") else None
            if not isinstance(t, RankedTensorType):  # the type ONNX inferred, if any
                t = self.value_types.get(inp.name, t)
            if (
                arg_types is not None
                and i < len(arg_types)
                and (t is None or not isinstance(t, RankedTensorType))
            ):
                t = arg_types[i]
            types.append(t or UnrankedTensorType(f32))
        block = Block(types, [NameLoc(i.name, self.file_loc) for i in graph.input])
        saved = self.block
        self.block = block
        self.scopes.append({})
        try:
            for inp, a in zip(graph.input, block.args):
                self.bind(inp.name, a)
            self.convert_nodes(graph)
            outs = []
            for o in graph.output:
                v = self.lookup(o.name)
                if v is None:
                    self.errors.append(
                        (NameLoc(o.name, self.file_loc), f"subgraph output '{o.name}' is not produced")
                    )
                    v = self.none()
                outs.append(v)
            block.append(YieldOp.create(outs, [], {}, {}, 0, (), self.file_loc))
        finally:
            self.scopes.pop()
            self.block = saved
        return Region(blocks=[block])


# ---- model checks ------------------------------------------------------------------------------


#: attributes ONNX's own shape inference divides by (a 0 there kills the process with SIGFPE)
_POSITIVE_ATTRS = {
    "Attention": ("q_num_heads", "kv_num_heads"),
    "RotaryEmbedding": ("num_heads",),
    "GroupNormalization": ("num_groups",),
    "DepthToSpace": ("blocksize",),
    "SpaceToDepth": ("blocksize",),
}


def _schema(proto: Any, opset: int) -> Any:
    from onnx import defs

    try:
        return defs.get_schema(proto.op_type, opset, proto.domain or "")
    except Exception:  # ops without a schema (other domains, newer opsets): nothing to check against
        return None


def check_node_schema(proto: Any, opset: int) -> None:
    """Raise :class:`Invalid` if ``proto`` does not fit its op's ONNX schema: the number of inputs
    and outputs, required inputs left empty, required attributes missing, unknown attributes,
    attribute types, attributes that must be positive. Run before ONNX's shape inference, which
    may crash the process on such nodes."""
    from onnx import AttributeProto, defs

    schema = _schema(proto, opset)
    if schema is None:
        return
    op = proto.op_type
    single = defs.OpSchema.FormalParameterOption.Single
    for i, name in enumerate(proto.input):
        if not name and i < len(schema.inputs) and schema.inputs[i].option == single:
            raise Invalid(f"required input #{i} ('{schema.inputs[i].name}') of {op} is empty")
    for what, names, lo, hi in (
        ("inputs", proto.input, schema.min_input, schema.max_input),
        ("outputs", proto.output, schema.min_output, schema.max_output),
    ):
        n = len(names)
        while n and not names[n - 1]:  # trailing empty names are absent optional ones
            n -= 1
        if n < lo or len(names) > hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}" if hi < 2**31 - 1 else f"at least {lo}"
            raise Invalid(f"has {n if n < lo else len(names)} {what} but {op} takes {want}")
    given = {a.name for a in proto.attribute}
    for name, spec in schema.attributes.items():
        if spec.required and name not in given:
            raise Invalid(f"required attribute '{name}' of {op} is missing")
    for a in proto.attribute:
        if a.ref_attr_name:
            continue
        spec = schema.attributes.get(a.name)
        if spec is None:
            known = ", ".join(sorted(schema.attributes)) or "none"
            raise Invalid(f"{op} has no attribute '{a.name}' (its attributes: {known})")
        want = int(spec.type.value)
        if a.type != want:
            got = AttributeProto.AttributeType.Name(a.type) if a.type else "missing"
            raise Invalid(
                f"attribute '{a.name}' has type {got}, but {op} expects {AttributeProto.AttributeType.Name(want)}"
            )
        if a.name in _POSITIVE_ATTRS.get(op, ()) and a.i < 1:
            raise Invalid(f"attribute '{a.name}' is {a.i} but must be >= 1")


def _type_str(code: int) -> str | None:
    from onnx import TensorProto

    try:
        return f"tensor({TensorProto.DataType.Name(code).lower()})"
    except ValueError:  # not an element type (reported where the tensor is converted)
        return None


def check_input_types(proto: Any, opset: int, elem_codes: Mapping[str, int]) -> None:
    """Raise :class:`Invalid` if an input's element type (from ``elem_codes``) is outside its type
    constraint in the op's schema, or two inputs bind one type parameter to different types."""
    schema = _schema(proto, opset)
    if schema is None:
        return
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    params = list(schema.inputs)
    bound: dict[str, tuple[str, int]] = {}
    for i, name in enumerate(proto.input):
        code = elem_codes.get(name) if name else None
        if not code or not params:
            continue
        param = params[min(i, len(params) - 1)]
        if i >= len(params) and param.option != param.option.Variadic:
            continue
        got = _type_str(code)
        if got is None:
            continue
        want = allowed.get(param.type_str, {param.type_str})
        if not any(w.startswith("tensor(") for w in want):
            continue  # sequences, optionals: not checked
        if got not in want:
            raise Invalid(
                f"input #{i} ('{name}') is {got} but {proto.op_type} takes {', '.join(sorted(want))} there"
            )
        homogeneous = param.option != param.option.Variadic or param.is_homogeneous
        if param.type_str in allowed and homogeneous:
            first = bound.setdefault(param.type_str, (got, i))
            if first[0] != got:
                raise Invalid(
                    f"inputs #{first[1]} and #{i} must have the same type ({param.type_str}) but are "
                    f"{first[0]} and {got}"
                )


def _describe_node(n: Any) -> str:
    op = _key(n.domain, n.op_type) or "<no op_type>"
    if n.name:
        return f"node '{n.name}' ({op})"
    out = next((o for o in n.output if o), None)
    return f"unnamed {op} node" + (f" writing '{out}'" if out else "")


def opsets_of(model: Any) -> dict[str, int]:
    """The model's opset per domain (``ai.onnx`` counted as the default domain ``""``)."""
    return {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}


def _all_nodes(graph: Any) -> Any:
    """``(graph, node)`` for every node of ``graph`` and its subgraphs."""
    for n in graph.node:
        yield graph, n
        for sg in _subgraphs(n):
            yield from _all_nodes(sg)


def _subgraphs(n: Any) -> list[Any]:
    out = []
    for a in n.attribute:
        if a.type == 5:  # GRAPH
            out.append(a.g)
        elif a.type == 10:  # GRAPHS
            out.extend(a.graphs)
    return out


def _graph_reads(g: Any, defined: set[str] | None = None) -> set[str]:
    """Names a (sub)graph reads from enclosing graphs."""
    mine = {i.name for i in g.input} | {t.name for t in g.initializer} | (defined or set())
    for n in g.node:
        mine.update(o for o in n.output if o)
    reads: set[str] = set()
    for n in g.node:
        reads.update(i for i in n.input if i and i not in mine)
        for sg in _subgraphs(n):
            reads.update(x for x in _graph_reads(sg) if x not in mine)
    reads.update(o.name for o in g.output if o.name not in mine)
    return reads


def _node_inputs(n: Any) -> list[str]:
    """What a node reads: its inputs and what its subgraphs read from outside them."""
    names = [i for i in n.input if i]
    for sg in _subgraphs(n):
        names.extend(sorted(_graph_reads(sg)))
    return names


def topological_order(graph: Any) -> list[Any]:
    """The graph's nodes in an order where producers come before readers (the file's order where
    it is one already); nodes on a cycle come last, in file order."""
    import heapq

    nodes = list(graph.node)
    producer: dict[str, int] = {}
    for i, n in enumerate(nodes):
        for o in n.output:
            if o:
                producer.setdefault(o, i)
    deps = [
        {producer[x] for x in _node_inputs(n) if x in producer and producer[x] != i}
        for i, n in enumerate(nodes)
    ]
    if all(all(d < i for d in ds) for i, ds in enumerate(deps)):
        return nodes
    users: list[list[int]] = [[] for _ in nodes]
    for i, ds in enumerate(deps):
        for d in ds:
            users[d].append(i)
    waiting = [len(ds) for ds in deps]
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    done = set(order)
    return [nodes[i] for i in order] + [n for i, n in enumerate(nodes) if i not in done]


def check_graph(
    graph: Any, outer: frozenset[str] = frozenset(), where: str = "", need_outputs: bool = True
) -> list[tuple[list[str], str]]:
    """Structural errors of ``graph`` and its subgraphs as ``(tensor names to locate it at, message)``,
    each reported once at its root cause: a tensor no node produces (with every node that reads it;
    nodes downstream are not reported), a tensor two nodes produce, a cycle (its nodes), a node
    without op_type, a graph without outputs."""
    errors: list[tuple[list[str], str]] = []
    nodes = list(graph.node)
    produced: dict[str, str] = {}
    for i in graph.input:
        produced.setdefault(i.name, f"graph input '{i.name}'")
    for t in graph.initializer:
        produced.setdefault(t.name, f"initializer '{t.name}'")
    for n in nodes:
        outs = [o for o in n.output if o]
        if not n.op_type:
            errors.append((outs, f"{where}{_describe_node(n)} has an empty op_type"))
        for o in outs:
            if o not in produced:
                produced[o] = _describe_node(n)
            elif produced[o].startswith(("graph input", "initializer")):
                errors.append(
                    (outs, f"{where}tensor '{o}' is both {produced[o]} and written by {_describe_node(n)}")
                )
            else:
                errors.append(
                    (outs, f"{where}tensor '{o}' is written by both {produced[o]} and {_describe_node(n)}")
                )
    visible = outer | produced.keys()
    missing: dict[str, list[Any]] = {}
    for n in nodes:
        for x in n.input:
            if x and x not in visible and n not in missing.setdefault(x, []):
                missing[x].append(n)
        for sg in _subgraphs(n):
            sub_where = f"{where}subgraph '{sg.name}' of {_describe_node(n)}: "
            errors.extend(check_graph(sg, frozenset(visible), sub_where))
    for x, readers in missing.items():
        errors.append(
            (
                [o for o in readers[0].output if o],
                f"{where}undefined tensor '{x}' (no node, graph input or initializer produces it) is read "
                f"by {', '.join(_describe_node(r) for r in readers)}",
            )
        )
    for o in graph.output:
        if o.name not in visible:
            errors.append(([o.name], f"{where}graph output '{o.name}' is not produced by any node"))
    if not graph.output and not where and need_outputs:
        errors.append(([], "the graph has no outputs"))
    cycle = (
        [] if any("written by" in m for _, m in errors) else _cycle(nodes)
    )  # none without one producer each
    if cycle:
        text = " -> ".join(_describe_node(c) for c in [*cycle, cycle[0]])
        errors.append(([o for o in cycle[0].output if o], f"{where}the graph has a cycle: {text}"))
    return errors


def _cycle(nodes: list[Any]) -> list[Any]:
    """The nodes of one cycle (each producing an input of the next), or []."""
    producer = {o: n for n in nodes for o in n.output if o}
    order = {id(n): i for i, n in enumerate(nodes)}
    state: dict[int, int] = {}  # 1: on the current path, 2: done

    def deps(n: Any) -> list[Any]:
        return [producer[x] for x in _node_inputs(n) if x in producer]

    for start in nodes:
        if id(start) in state:
            continue
        path = [start]
        stack = [iter(deps(start))]
        state[id(start)] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                state[id(path.pop())] = 2
            elif state.get(id(nxt)) == 1:
                cyc = list(reversed(path[path.index(nxt) :]))  # each node produces an input of the next
                first = min(range(len(cyc)), key=lambda i: order[id(cyc[i])])
                return cyc[first:] + cyc[:first]
            elif id(nxt) not in state:
                state[id(nxt)] = 1
                path.append(nxt)
                stack.append(iter(deps(nxt)))
    return []


def check_model(model: Any, filename: str, ctx: Context | None = None, need_outputs: bool = True) -> None:
    """Raise :class:`OnnxImportError` for what makes a model unusable before any node is converted:
        an IR version newer than the installed onnx reads, a default-domain opset outside
    :func:`supported_opsets`, negative input dims, and the graph errors :func:`check_graph` finds
        (each also reported to ``ctx`` at the tensor it concerns)."""
    import onnx

    bad = _non_utf8_string(model)
    if bad:
        msg = f"{filename}: not a valid ONNX model: {bad} is not valid UTF-8"
        _report(ctx, FileLineColLoc(filename, 0, 0), msg, []) if ctx is not None else None
        raise OnnxImportError(msg, "malformed")
    errors: list[tuple[list[str], str]] = []
    if model.ir_version > onnx.IR_VERSION:
        errors.append(
            (
                [],
                f"ONNX IR version {model.ir_version} is newer than the installed onnx {onnx.__version__} "
                f"supports (IR version {onnx.IR_VERSION} at most)",
            )
        )
    opsets = supported_opsets()
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx") and o.version not in opsets:
            errors.append(
                (
                    [],
                    f"opset {o.version} of the default ONNX domain is not supported (Lamina supports "
                    f"opsets {opsets.start} to {opsets.stop - 1}, the newest the installed onnx "
                    f"{onnx.__version__} defines)",
                )
            )
    if "" not in opsets_of(model) and any(
        not n.domain or n.domain == "ai.onnx" for _, n in _all_nodes(model.graph)
    ):
        first = next(n for _, n in _all_nodes(model.graph) if not n.domain or n.domain == "ai.onnx")
        errors.append(
            (
                [],
                f"{_describe_node(first)} is an ONNX op but the model imports no opset of the default "
                "ONNX domain (opset_import)",
            )
        )
    inits = {t.name for t in model.graph.initializer}
    for i in model.graph.input:
        if i.name not in inits and i.type.HasField("tensor_type") and not i.type.tensor_type.elem_type:
            errors.append(([i.name], f"input '{i.name}' has no element type"))
        if i.type.HasField("tensor_type") and i.type.tensor_type.HasField("shape"):
            dims = i.type.tensor_type.shape.dim
            for k, d in enumerate(dims):
                if d.HasField("dim_value") and d.dim_value < 0:
                    shape = [x.dim_value if x.HasField("dim_value") else "?" for x in dims]
                    errors.append(
                        (
                            [i.name],
                            f"input '{i.name}' has negative dim {d.dim_value} at index {k} of its shape {shape}",
                        )
                    )
    if not errors:
        errors = check_graph(model.graph, need_outputs=need_outputs)
    if not errors:
        opsets = opsets_of(model)
        for _, n in _all_nodes(model.graph):
            try:
                check_node_schema(n, opsets.get(n.domain if n.domain != "ai.onnx" else "", 0))
            except Invalid as e:
                errors.append(([o for o in n.output if o], f"{_describe_node(n)}: {e}"))
    unique: dict[str, list[str]] = {}  # a subgraph shared by two attributes is reported once
    for names, m in errors:
        unique.setdefault(m, names)
    errors = [(names, m) for m, names in unique.items()]
    if errors:
        if ctx is not None:
            file_loc = FileLineColLoc(filename, 0, 0)
            for names, m in errors:
                loc = (
                    FusedLoc([NameLoc(n, file_loc) for n in names])
                    if len(names) > 1
                    else (NameLoc(names[0], file_loc) if names else file_loc)
                )
                _report(ctx, loc, m, [])
        raise OnnxImportError(_message(filename, [m for _, m in errors]), "invalid")


def _non_utf8_string(model: Any) -> str | None:
    """Where a name in ``model`` is not valid UTF-8 (protobuf then returns it as bytes), or None."""

    def graph(g: Any, where: str) -> str | None:
        if isinstance(g.name, bytes):
            return f"the name of {where}"
        for what, items in (("input", g.input), ("output", g.output), ("value_info", g.value_info)):
            for k, vi in enumerate(items):
                if isinstance(vi.name, bytes):
                    return f"the name of {what} #{k} of {where}"
        for k, t in enumerate(g.initializer):
            if isinstance(t.name, bytes):
                return f"the name of initializer #{k} of {where}"
        for k, n in enumerate(g.node):
            fields = [n.name, n.op_type, n.domain, *n.input, *n.output, *(a.name for a in n.attribute)]
            if any(isinstance(f, bytes) for f in fields):
                return f"a name in node #{k} of {where}"
            for sg in _subgraphs(n):
                found = graph(sg, f"a subgraph of node #{k} of {where}")
                if found:
                    return found
        return None

    if any(isinstance(o.domain, bytes) for o in model.opset_import):
        return "an opset_import domain"
    return graph(model.graph, "the graph")


def _message(filename: str, errors: Sequence[str]) -> str:
    if len(errors) == 1:
        return f"{filename}: {errors[0]}"
    return f"failed to import '{filename}':\n" + "\n".join(f"  {m}" for m in errors)


# ---- entry point -------------------------------------------------------------------------------


def _collect_op_types(graph: Any, out: dict[str, list[str]]) -> None:
    for n in graph.node:
        key = _key(n.domain, n.op_type)
        out.setdefault(key, []).append(n.name or (n.output[0] if n.output else "?"))
        for a in n.attribute:
            if a.type == 5:  # GRAPH
                _collect_op_types(a.g, out)
            elif a.type == 10:  # GRAPHS
                for g in a.graphs:
                    _collect_op_types(g, out)


def _collect_elem_codes(graph: Any, out: dict[str, int]) -> None:
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            out.setdefault(vi.name, vi.type.tensor_type.elem_type)
    for t in graph.initializer:
        out.setdefault(t.name, t.data_type)
    for n in graph.node:
        for sg in _subgraphs(n):
            _collect_elem_codes(sg, out)


def _collect_types(graph: Any, out: dict[str, Type]) -> None:
    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        try:
            t = onnx_type(vi.type)
        except Unsupported:
            t = None
        if t is not None:
            out.setdefault(vi.name, t)
    for n in graph.node:
        for a in n.attribute:
            if a.type == 5:
                _collect_types(a.g, out)
            elif a.type == 10:
                for g in a.graphs:
                    _collect_types(g, out)


def load_model(path: str | os.PathLike[str]) -> Any:
    """Load an ONNX model file; a malformed or truncated file raises :class:`OnnxImportError`."""
    import stat

    import onnx

    p = os.fspath(path)
    if not os.path.exists(p):
        raise OnnxImportError(f"{p}: no such file", "malformed")
    try:
        st = os.stat(p)
    except OSError as e:
        raise OnnxImportError(f"{p}: cannot read: {e.strerror}", "malformed") from None
    if stat.S_ISDIR(st.st_mode):
        raise OnnxImportError(f"{p}: is a directory, not an ONNX model file", "malformed")
    if not stat.S_ISREG(st.st_mode):
        raise OnnxImportError(
            f"{p}: not a regular file (a device, FIFO or socket); an ONNX model must be a file", "malformed"
        )
    if st.st_size > MAX_PROTOBUF_BYTES:
        raise OnnxImportError(
            f"{p}: the file has {st.st_size} bytes, more than the 2 GiB a protobuf ONNX model can hold "
            "(large weights belong in external data files)",
            "malformed",
        )
    try:
        with open(p, "rb") as f:
            data = f.read()
    except OSError as e:
        raise OnnxImportError(f"{p}: cannot read: {e.strerror}", "malformed") from None
    if not data:
        raise OnnxImportError(f"{p}: the file is empty, not an ONNX model", "malformed")
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception as e:
        raise OnnxImportError(
            f"{p}: not a valid ONNX model (the file is truncated or is not an ONNX protobuf: {e})",
            "malformed",
        ) from None
    if not model.HasField("graph") or not model.opset_import:
        raise OnnxImportError(
            f"{p}: not a valid ONNX model (no graph or no opset_import; truncated?)", "malformed"
        )
    if any(t.data_location == 1 for t in model.graph.initializer):  # external data
        from onnx.external_data_helper import load_external_data_for_model

        try:
            load_external_data_for_model(model, os.path.dirname(os.path.abspath(p)))
        except Exception as e:
            raise OnnxImportError(f"{p}: cannot load external weight data: {e}", "malformed") from None
    return model


def import_onnx(
    model: Any,
    ctx: Context | None = None,
    *,
    input_shapes: Sequence[Sequence[int]] | Mapping[str, Sequence[int]] | None = None,
    output_names: Sequence[str] | None = None,
    filename: str | None = None,
    shape_inference: bool = True,
) -> Any:
    """Import an ONNX model (a path or a ``ModelProto``) into a ``top`` module.

    ``input_shapes`` fixes the shapes of the inputs (in order, or by name) as TPU-MLIR's
    ``--input_shapes`` does; ``output_names`` selects other tensors as the outputs.
    Raises :class:`OnnxImportError` (after reporting located diagnostics to ``ctx``)."""
    import lamina.dialects.func
    import lamina.dialects.top  # noqa: F401
    from lamina.frontends.onnx import converters  # noqa: F401  (fills CONVERTERS)

    if ctx is None:
        ctx = Context(handler=None)
    if isinstance(model, (str, os.PathLike)):
        filename = filename or os.fspath(model)
        try:
            model = load_model(model)
        except OnnxImportError as e:
            ctx.diagnostics.emit(
                Diagnostic("error", FileLineColLoc(filename, 0, 0), str(e))
            ) if ctx.diagnostics._handlers else None
            raise
    try:
        filename = filename or (model.graph.name or "model") + ".onnx"
        return _import_model(model, ctx, input_shapes, output_names, filename, shape_inference)
    except UnicodeDecodeError as e:  # protobuf decodes string fields when they are read
        name = filename or "model"
        msg = f"{name}: not a valid ONNX model: a name or string is not valid UTF-8 ({e.reason} at byte {e.start})"
        _report(ctx, FileLineColLoc(name, 0, 0), msg, [])
        raise OnnxImportError(msg, "malformed") from None


def _import_model(
    model: Any,
    ctx: Context,
    input_shapes: Sequence[Sequence[int]] | Mapping[str, Sequence[int]] | None,
    output_names: Sequence[str] | None,
    filename: str,
    shape_inference: bool,
) -> Any:
    import onnx

    from lamina.dialects.func.ops import FuncOp, ReturnOp
    from lamina.dialects.top.io import InputOp
    from lamina.ir.builtin import ModuleOp

    check_model(model, filename, ctx, need_outputs=not output_names)
    graph = model.graph
    opsets = {o.domain: o.version for o in model.opset_import}
    opset = opsets.get("", opsets.get("ai.onnx", 0))

    # 1. every unsupported op type, at once
    used: dict[str, list[str]] = {}
    _collect_op_types(graph, used)
    from lamina.frontends.onnx import converters as _c  # noqa: F401

    unsupported = {k: v for k, v in used.items() if k not in CONVERTERS}
    file_loc = FileLineColLoc(filename, 0, 0)
    if unsupported:
        lines = [
            f"  {k}: {', '.join(repr(n) for n in names[:8])}{' ...' if len(names) > 8 else ''}"
            for k, names in sorted(unsupported.items())
        ]
        msg = f"{len(unsupported)} unsupported ONNX op type(s) in '{filename}':\n" + "\n".join(lines)
        notes = [
            (f"{k} is used by node '{names[0]}'", NameLoc(names[0], file_loc))
            for k, names in sorted(unsupported.items())
        ]
        _report(ctx, file_loc, msg, notes)
        raise OnnxImportError(msg, "unsupported", unsupported)

    # 2. input shapes, shape inference
    init_names = {t.name for t in graph.initializer}
    real_inputs = [i for i in graph.input if i.name not in init_names]
    if input_shapes is not None:
        copy = onnx.ModelProto()
        copy.CopyFrom(model)
        model = copy
        real_inputs = [i for i in model.graph.input if i.name not in init_names]
        model = _fix_input_shapes(model, real_inputs, input_shapes, filename)
        graph = model.graph
        real_inputs = [i for i in graph.input if i.name not in init_names]
    from .onnx_inference import onnx_shape_inference

    inferred = onnx_shape_inference(model) if shape_inference else None
    types_graph = inferred.graph if inferred is not None else graph  # has no initializers
    value_types: dict[str, Type] = {}
    _collect_types(types_graph, value_types)

    # 3. the function
    cv = GraphConverter(ctx, filename, opset, value_types, opsets)
    _collect_elem_codes(types_graph, cv.elem_codes)
    for t in graph.initializer:
        cv.elem_codes.setdefault(t.name, t.data_type)
    in_types: list[Type] = []
    for i in real_inputs:
        try:
            t = onnx_type(i.type)
            if t is None:
                raise Unsupported("only tensor inputs are supported")
        except Unsupported as e:
            cv.errors.append((NameLoc(i.name, file_loc), f"input '{i.name}': {e}"))
            cv.failed.add(i.name)  # its readers are not reported again
            t = None
        in_types.append(t or UnrankedTensorType(f32))
    out_list = list(output_names) if output_names else [o.name for o in graph.output]
    func = FuncOp.new("main", in_types, [], loc=file_loc)
    entry = func.entry_block
    cv.block = entry
    for i, a in zip(real_inputs, entry.args):
        a.location = NameLoc(i.name, file_loc)
        op = InputOp.create([a], [a.type], {}, {}, 0, (), NameLoc(i.name, file_loc))
        entry.append(op)
        if i.name not in cv.failed:
            cv.bind(i.name, op.results[0])
    cv.convert_nodes(graph)
    outs: list[Value] = []
    for name in out_list:
        v = cv.lookup(name)
        if v is None and name in cv.failed:
            continue
        if v is None:
            cv.errors.append((NameLoc(name, file_loc), f"graph output '{name}' is not produced by any node"))
            continue
        outs.append(v)
    if cv.errors:
        msg = _message(filename, [m for _, m in cv.errors])
        kind = (
            "unsupported"
            if all("not supported" in m or "unsupported" in m for _, m in cv.errors)
            else "invalid"
        )
        for loc, m in cv.errors:
            _report(ctx, loc, m, [])
        raise OnnxImportError(msg, kind)
    entry.append(ReturnOp.create(outs, [], {}, {}, 0, (), file_loc))
    from lamina.ir.attributes import TypeAttr
    from lamina.ir.types import FunctionType

    func.properties["function_type"] = TypeAttr(FunctionType(in_types, [v.type for v in outs]))
    func.properties["arg_attrs"] = ArrayAttr(
        [DictionaryAttr({NAME_KEY: StringAttr(i.name)}) for i in real_inputs]
    )
    func.properties["res_attrs"] = ArrayAttr([DictionaryAttr({NAME_KEY: StringAttr(n)}) for n in out_list])
    module = ModuleOp.new([func], loc=file_loc)
    return module


def _report(ctx: Context, loc: Location, msg: str, notes: list[tuple[str, Location | None]]) -> None:
    d = Diagnostic("error", loc, msg)
    for text, nloc in notes:
        d.attach_note(text, nloc)
    eng = ctx.diagnostics
    if eng._handlers:
        eng.emit(d)
    else:
        eng.error_count += 1


def _fix_input_shapes(model: Any, inputs: list[Any], shapes: Any, filename: str) -> Any:
    from lamina.execution.memory import size_error

    if isinstance(shapes, Mapping):
        pairs = [(i, shapes[i.name]) for i in inputs if i.name in shapes]
        unknown = set(shapes) - {i.name for i in inputs}
        if unknown:
            raise OnnxImportError(
                f"{filename}: --input_shapes names unknown input(s) {sorted(unknown)}", "invalid"
            )
    else:
        shapes = list(shapes)
        if len(shapes) != len(inputs):
            raise OnnxImportError(
                f"{filename}: --input_shapes gives {len(shapes)} shape(s) but the model has {len(inputs)} input(s)",
                "invalid",
            )
        pairs = list(zip(inputs, shapes))
    for inp, shape in pairs:
        if any(int(want) < 0 for want in shape):
            raise OnnxImportError(
                f"{filename}: --input_shapes gives {list(shape)} for input '{inp.name}': dims must not be "
                "negative",
                "invalid",
            )
        tt = inp.type.tensor_type
        old = list(tt.shape.dim) if tt.HasField("shape") else []
        if old and len(old) != len(shape):
            raise OnnxImportError(
                f"{filename}: --input_shapes gives rank {len(shape)} for input '{inp.name}' of rank {len(old)}",
                "invalid",
            )
        for d, want in zip(old, shape):
            if d.HasField("dim_value") and d.dim_value != want and d.dim_value > 0:
                raise OnnxImportError(
                    f"{filename}: --input_shapes gives {list(shape)} for input '{inp.name}' whose static shape "
                    f"is {[x.dim_value if x.HasField('dim_value') else '?' for x in old]}",
                    "invalid",
                )
        t = RankedTensorType([int(d) for d in shape], _ELEM.get(tt.elem_type, f32))
        too_big = size_error(t, f"input '{inp.name}'")
        if too_big is not None:
            raise OnnxImportError(f"{filename}: --input_shapes gives {list(shape)}: {too_big}", "invalid")
        tt.shape.ClearField("dim")
        for want in shape:
            tt.shape.dim.add().dim_value = int(want)
    return model

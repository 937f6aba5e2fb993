"""Reading a ``.tflite`` flatbuffer into plain Python values (:class:`TfliteModel`), checked before
anything is converted: the file identifier, the schema version, every tensor, buffer and operator
index, and each constant buffer's size against its tensor's shape and type.

The flatbuffer is read with the ``tflite`` package (the generated schema reader, pure Python); no
TensorFlow. Every problem is one :class:`TfliteImportError` naming the file and what is wrong, never
a traceback from the flatbuffer accessors (which index raw bytes and fail with ``IndexError`` or
``struct.error`` on a truncated file).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: the one schema version of the TFLite format in use since TF 1.x
SCHEMA_VERSION = 3


class TfliteImportError(Exception):
    """Import failed. ``kind`` is ``"malformed"``, ``"unsupported"`` or ``"invalid"``;
    ``unsupported`` maps each unsupported op to the tensors it produces."""

    def __init__(self, message: str, kind: str, unsupported: dict[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.unsupported = unsupported or {}


#: TFLite TensorType code → numpy dtype
DTYPES: dict[int, np.dtype] = {
    0: np.dtype(np.float32),
    1: np.dtype(np.float16),
    2: np.dtype(np.int32),
    3: np.dtype(np.uint8),
    4: np.dtype(np.int64),
    6: np.dtype(np.bool_),
    7: np.dtype(np.int16),
    9: np.dtype(np.int8),
    10: np.dtype(np.float64),
    15: np.dtype(np.uint32),
    16: np.dtype(np.uint16),
}


@dataclass
class Quant:
    """A tensor's affine quantization: ``real = scale * (q - zero_point)`` along ``axis``."""

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int


@dataclass
class Sparsity:
    """A sparse constant's layout (TFLite's ``SparsityParameters``): the order its dimensions are
    stored in (the tensor's dims, then its block dims), which dims are blocked, and per stored dim
    either a dense size or CSR segments and indices."""

    traversal_order: list[int]
    block_map: list[int]
    dims: list[
        tuple[int, int, np.ndarray, np.ndarray]
    ]  # (format 0 dense/1 CSR, dense size, segments, indices)


@dataclass
class Tensor:
    index: int
    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    data: np.ndarray | None  # the constant's value (None for activations)
    quant: Quant | None
    sparsity: Sparsity | None = None

    @property
    def sparse(self) -> bool:
        return self.sparsity is not None


@dataclass
class Operator:
    index: int
    op: str  # builtin name ("CONV_2D") or the custom code
    custom: bool
    inputs: list[int]  # -1 for an absent optional input
    outputs: list[int]
    options: Any  # the builtin options table, initialised to its class, or None
    custom_options: bytes = b""
    #: the subgraphs the operator calls (WHILE's cond and body, IF's branches, CALL_ONCE's init)
    calls: list[int] = field(default_factory=list)


@dataclass
class Subgraph:
    """One subgraph: its tensors (indices local to it), operators, inputs and outputs. The tensors
    of a subgraph other than 0 are named ``<subgraph name>/<tensor name>``."""

    index: int
    name: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]


@dataclass
class TfliteModel:
    filename: str
    tensors: list[Tensor]
    operators: list[Operator]
    inputs: list[int]
    outputs: list[int]
    description: str = ""
    raw: Any = field(default=None, repr=False)
    #: the name of every subgraph of the file (subgraph 0, the main one, is what is imported)
    subgraph_names: list[str] = field(default_factory=list)
    #: the other subgraphs that control flow (WHILE, IF) calls, directly or not, by index
    subgraphs: dict[int, Subgraph] = field(default_factory=dict)

    def subgraph_model(self, k: int) -> TfliteModel:
        """Subgraph ``k`` as a model of its own (sharing this model's subgraphs)."""
        sg = self.subgraphs[k]
        return TfliteModel(
            self.filename, sg.tensors, sg.operators, sg.inputs, sg.outputs, self.description, self.raw,
            self.subgraph_names, self.subgraphs,
        )  # fmt: skip

    def tensor_name(self, i: int) -> str:
        return self.tensors[i].name


class Options:
    """An operator's builtin options, read eagerly (so that a corrupt table fails inside the
    reader's checks, not in a converter): ``opts.StrideH()`` as on the generated class, ``kind`` the
    table's name (``"Conv2DOptions"``)."""

    __slots__ = ("kind", "values")

    def __init__(self, kind: str, values: dict[str, Any]) -> None:
        self.kind = kind
        self.values = values

    def __getattr__(self, name: str) -> Any:
        try:
            v = object.__getattribute__(self, "values")[name]
        except KeyError:
            raise AttributeError(f"{self.kind} has no field {name}") from None
        return lambda: v


#: the option fields naming a subgraph an operator calls (WhileOptions, IfOptions, CallOnceOptions,
#: CallOptions)
SUBGRAPH_FIELDS = (
    "CondSubgraphIndex",
    "BodySubgraphIndex",
    "ThenSubgraphIndex",
    "ElseSubgraphIndex",
    "InitSubgraphIndex",
    "Subgraph",
)


def _options(op: Any) -> Options | None:
    """The builtin options table of an operator, every field read (vectors as arrays)."""
    import tflite

    code = op.BuiltinOptionsType()
    if code == 0:
        return None
    names = {v: k for k, v in vars(tflite.BuiltinOptions).items() if isinstance(v, int)}
    kind = names.get(code, "")
    cls = getattr(tflite, kind, None)
    table = op.BuiltinOptions()
    if cls is None or table is None:
        return None
    o = cls()
    o.Init(table.Bytes, table.Pos)
    values: dict[str, Any] = {}
    for attr in dir(cls):
        if (
            attr.startswith("_")
            or attr == "Init"
            or attr.startswith("GetRootAs")
            or attr.endswith(("BufferHasIdentifier", "Length", "IsNone", "AsNumpy"))
        ):
            continue
        if hasattr(cls, attr + "AsNumpy"):
            values[attr] = (
                o.__getattribute__(attr + "AsNumpy")()
                if o.__getattribute__(attr + "Length")()
                else np.zeros(0, np.int32)
            )
        else:
            values[attr] = o.__getattribute__(attr)()
    return Options(kind, values)


def _index_vector(kind: int, table: Any) -> np.ndarray:
    """A ``SparseIndexVector`` union member (Int32/Uint16/Uint8 vector) as an int64 array."""
    import tflite

    if kind == 0 or table is None:
        return np.zeros(0, np.int64)
    cls = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}.get(kind)
    if cls is None:
        raise ValueError(f"sparse index vector type {kind}")
    v = cls()
    v.Init(table.Bytes, table.Pos)
    return np.asarray(v.ValuesAsNumpy() if v.ValuesLength() else [], np.int64)


def _sparsity(sp: Any) -> Sparsity | None:
    if sp is None:
        return None
    order = [int(v) for v in sp.TraversalOrderAsNumpy()] if sp.TraversalOrderLength() else []
    bmap = [int(v) for v in sp.BlockMapAsNumpy()] if sp.BlockMapLength() else []
    dims = []
    for k in range(sp.DimMetadataLength()):
        d = sp.DimMetadata(k)
        seg = _index_vector(d.ArraySegmentsType(), d.ArraySegments())
        idx = _index_vector(d.ArrayIndicesType(), d.ArrayIndices())
        dims.append((int(d.Format()), int(d.DenseSize()), seg, idx))
    return Sparsity(order, bmap, dims)


def densify(shape: tuple[int, ...], sp: Sparsity, values: np.ndarray) -> np.ndarray:
    """The dense value of a sparse constant (TFLite's ``FormatConverter::SparseToDense``): walk the
    stored dims in traversal order, dense dims by position and CSR dims by their segments, and put
    each stored value at its coordinates (block coordinates folded into their dims). Raises
    ``ValueError`` for metadata that does not describe ``shape``."""
    n = len(shape)
    order, bmap = sp.traversal_order or list(range(n)), sp.block_map
    if len(sp.dims) != len(order) or sorted(order) != list(range(len(order))) or len(order) != n + len(bmap):
        raise ValueError("traversal order, block map and dimension metadata do not match the shape")
    size = [0] * len(order)
    for level, dim in enumerate(order):
        dense = sp.dims[level][1]
        size[dim] = dense
    block = {d: size[n + j] for j, d in enumerate(bmap)}
    out = np.zeros(shape, values.dtype)
    coord = [0] * len(order)

    def walk(level: int, pos: int) -> None:
        if level == len(order):
            idx = tuple(
                coord[i] * block[i] + coord[n + bmap.index(i)] if i in block else coord[i] for i in range(n)
            )
            out[idx] = values[pos]
            return
        fmt, dense, seg, ind = sp.dims[level]
        if fmt == 0:
            for i in range(dense):
                coord[order[level]] = i
                walk(level + 1, pos * dense + i)
        else:
            for k in range(int(seg[pos]), int(seg[pos + 1])):
                coord[order[level]] = int(ind[k])
                walk(level + 1, k)

    try:
        walk(0, 0)
    except IndexError:
        raise ValueError("sparse indices or segments lie outside the tensor") from None
    return out


def _check_quant(q: Quant, shape: tuple[int, ...], name: str, bad: Any) -> None:
    """A tensor's quantization must fit it: per-channel scales along an existing dimension, one per
    index of it; one zero point, or one per scale."""
    n = q.scale.size
    if q.zero_point.size not in (0, 1, n):
        raise bad(f"tensor '{name}' has {n} scale(s) but {q.zero_point.size} zero points")
    if n > 1:
        if not 0 <= q.axis < len(shape):
            raise bad(
                f"tensor '{name}' (shape {list(shape)}) is quantized along dimension {q.axis}, which it has not"
            )
        if shape[q.axis] != n:
            raise bad(
                f"tensor '{name}' has {n} scales for its dimension {q.axis} of size {shape[q.axis]} "
                f"(shape {list(shape)})"
            )


def read_bytes(path: str | os.PathLike[str]) -> bytes:
    """The file's bytes; unreadable files and non-files are one error."""
    p = os.fspath(path)
    if not os.path.isfile(p):
        raise TfliteImportError(f"'{p}' is not a file", "malformed")
    try:
        with open(p, "rb") as f:
            return f.read()
    except OSError as e:
        raise TfliteImportError(f"cannot read '{p}': {e.strerror}", "malformed") from None


def parse_model(buf: bytes, filename: str) -> TfliteModel:
    """Read and check a TFLite flatbuffer; raises :class:`TfliteImportError`. Subgraph 0 is the
    model (TFLite's main subgraph, the one LiteRT invokes); the others are only the bodies that its
    control-flow operators call (:attr:`Operator.calls`, checked to be in range)."""
    if len(buf) < 8 or buf[4:8] != b"TFL3":
        raise TfliteImportError(
            f"'{filename}' is not a TFLite model (no 'TFL3' file identifier at byte 4)", "malformed"
        )
    try:
        return _parse(buf, filename)
    except TfliteImportError:
        raise
    except (IndexError, struct.error, ValueError, TypeError, UnicodeDecodeError, AttributeError) as e:
        raise TfliteImportError(
            f"'{filename}' is a malformed TFLite flatbuffer (truncated or corrupt: {type(e).__name__})",
            "malformed",
        ) from None


def _parse(buf: bytes, filename: str) -> TfliteModel:
    import tflite

    bad = lambda msg: TfliteImportError(f"'{filename}': {msg}", "invalid")  # noqa: E731
    m = tflite.Model.GetRootAsModel(buf, 0)
    if m.Version() != SCHEMA_VERSION:
        raise TfliteImportError(
            f"'{filename}' has TFLite schema version {m.Version()}; Lamina reads version {SCHEMA_VERSION}",
            "malformed",
        )
    nsub = m.SubgraphsLength()
    if nsub < 1:
        raise bad("the model has no subgraph")
    sub_names = []
    for k in range(nsub):
        g = m.Subgraphs(k)
        sub_names.append((g.Name() or b"").decode("utf-8", "replace") if g is not None else "")
    codes: list[tuple[str, bool]] = []
    for c in range(m.OperatorCodesLength()):
        oc = m.OperatorCodes(c)
        bc = max(oc.BuiltinCode(), oc.DeprecatedBuiltinCode())
        if bc == tflite.BuiltinOperator.CUSTOM:
            codes.append(((oc.CustomCode() or b"").decode("utf-8"), True))
        else:
            codes.append(
                (tflite.opcode2name(bc) if bc in tflite.BUILTIN_OPCODE2NAME else f"builtin {bc}", False)
            )
    main = _parse_subgraph(m, buf, 0, "", codes, nsub, filename, bad)
    # the subgraphs control flow calls, each once, its tensors named '<subgraph>/<tensor>'
    subgraphs: dict[int, Subgraph] = {}
    todo = [c for op in main.operators for c in op.calls]
    while todo:
        k = todo.pop(0)
        if k in subgraphs or k == 0:
            continue
        unique = sub_names[k] and sub_names.count(sub_names[k]) == 1
        sg = _parse_subgraph(
            m, buf, k, (sub_names[k] if unique else f"subgraph{k}") + "/", codes, nsub, filename, bad
        )
        subgraphs[k] = sg
        todo.extend(c for op in sg.operators for c in op.calls)
    desc = (m.Description() or b"").decode("utf-8", "replace")
    return TfliteModel(
        filename,
        main.tensors,
        main.operators,
        main.inputs,
        main.outputs,
        desc,
        m,
        sub_names,
        subgraphs,
    )


def _parse_subgraph(
    m: Any, buf: bytes, k: int, prefix: str, codes: list[tuple[str, bool]], nsub: int, filename: str, bad: Any
) -> Subgraph:
    """Subgraph ``k``: its tensors (names prefixed with ``prefix``), operators, inputs, outputs."""
    import tflite

    sg = m.Subgraphs(k)
    where = f"subgraph {k}"
    nbuf = m.BuffersLength()
    tensors: list[Tensor] = []
    seen: set[str] = set()
    for i in range(sg.TensorsLength()):
        t = sg.Tensors(i)
        name = prefix + ((t.Name() or b"").decode("utf-8") or f"tensor_{i}")
        if name in seen:  # names key the dumps: a repeated one gets its index
            name = f"{name}_{i}"
        seen.add(name)
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        if any(d < 0 for d in shape):
            raise bad(f"tensor '{name}' has a negative dimension in shape {list(shape)}")
        code = t.Type()
        dt = DTYPES.get(code)
        if dt is None:
            names = {v: n for n, v in vars(tflite.TensorType).items() if isinstance(v, int)}
            raise TfliteImportError(
                f"'{filename}': tensor '{name}' has element type {names.get(code, code)}, which Lamina "
                "does not support",
                "unsupported",
            )
        b = t.Buffer()
        if b < 0 or b >= max(nbuf, 1):
            raise bad(f"tensor '{name}' refers to buffer {b}, but the model has {nbuf} buffers")
        data = None
        sparsity = _sparsity(t.Sparsity())
        sparse = sparsity is not None
        if nbuf and b > 0:
            bf = m.Buffers(b)
            raw: bytes | None = None
            if bf.Offset() > 1:  # large models keep buffers after the flatbuffer
                off, size = bf.Offset(), bf.Size()
                if off + size > len(buf):
                    raise bad(f"buffer {b} of tensor '{name}' lies outside the file ({off}+{size} bytes)")
                raw = buf[off : off + size]
            elif bf.DataLength():
                raw = bf.DataAsNumpy().tobytes()
            if raw:
                count = int(np.prod(shape, dtype=np.int64)) if shape else 1
                need = count * dt.itemsize
                if not sparse and len(raw) != need:
                    raise bad(
                        f"buffer {b} of tensor '{name}' ({dt}, shape {list(shape)}) holds {len(raw)} "
                        f"bytes, {need} expected"
                    )
                arr = np.frombuffer(raw, dtype=dt)
                data = arr if sparse else arr.reshape(shape)
        q = t.Quantization()
        quant = None
        if q is not None and q.ScaleLength():
            zp = q.ZeroPointAsNumpy() if q.ZeroPointLength() else np.zeros(q.ScaleLength(), np.int64)
            quant = Quant(
                np.asarray(q.ScaleAsNumpy(), np.float32), np.asarray(zp, np.int64), q.QuantizedDimension()
            )
            _check_quant(quant, shape, name, bad)
        tensors.append(Tensor(i, name, shape, dt, data, quant, sparsity))
    n = len(tensors)

    def idx(v: int, what: str) -> int:
        if v < -1 or v >= n:
            raise bad(f"{what} refers to tensor {v}, but {where} has {n} tensors")
        return int(v)

    ops: list[Operator] = []
    for j in range(sg.OperatorsLength()):
        o = sg.Operators(j)
        ci = o.OpcodeIndex()
        at = f"operator {j}" + (f" of {where}" if k else "")
        if ci >= len(codes):
            raise bad(f"{at} refers to operator code {ci}, but the model has {len(codes)}")
        name, custom = codes[ci]
        ins = [idx(int(v), f"{at} ({name})") for v in (o.InputsAsNumpy() if o.InputsLength() else [])]
        outs = [idx(int(v), f"{at} ({name})") for v in (o.OutputsAsNumpy() if o.OutputsLength() else [])]
        copts = o.CustomOptionsAsNumpy().tobytes() if o.CustomOptionsLength() else b""
        opts = _options(o)
        calls = [int(opts.values[f]) for f in SUBGRAPH_FIELDS if opts is not None and f in opts.values]
        for c in calls:
            if not 0 <= c < nsub:
                raise bad(f"{at} ({name}) calls subgraph {c}, but the model has {nsub} subgraph(s)")
        ops.append(Operator(j, name, custom, ins, outs, opts, copts, calls))
    inputs = [idx(int(v), f"{where}'s inputs") for v in (sg.InputsAsNumpy() if sg.InputsLength() else [])]
    outputs = [idx(int(v), f"{where}'s outputs") for v in (sg.OutputsAsNumpy() if sg.OutputsLength() else [])]
    return Subgraph(
        k,
        prefix.rstrip("/") if k else (m.Subgraphs(0).Name() or b"").decode("utf-8", "replace"),
        tensors,
        ops,
        inputs,
        outputs,
    )


def load_model(path: str | os.PathLike[str]) -> TfliteModel:
    """Read and check a ``.tflite`` file."""
    return parse_model(read_bytes(path), os.fspath(path))

"""Writing small ``.tflite`` flatbuffers directly (no TensorFlow): single-op and small multi-op models
built with the ``flatbuffers`` builder and the ``tflite`` package's generated builder functions, for
the importer's tests (LiteRT's ``Interpreter`` runs them as the reference).

    m = ModelBuilder()
    x = m.input("x", [1, 8, 8, 3])
    w = m.const("w", np.ones((4, 3, 3, 3), np.float32))
    y = m.op("CONV_2D", [x, w, -1], [1, 8, 8, 4], "y", ("Conv2DOptions", {"Padding": 0, "StrideH": 1}))
    m.output(y)
    buf = m.build()
"""

from __future__ import annotations

from typing import Any

import flatbuffers
import numpy as np
import tflite

_TYPE = {
    np.dtype(np.float32): 0,
    np.dtype(np.float16): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.uint8): 3,
    np.dtype(np.int64): 4,
    np.dtype(np.bool_): 6,
    np.dtype(np.int16): 7,
    np.dtype(np.int8): 9,
}


class ModelBuilder:
    def __init__(self) -> None:
        self.tensors: list[dict[str, Any]] = []
        self.buffers: list[bytes] = [b""]  # buffer 0 is the empty sentinel
        self.ops: list[tuple[str, list[int], list[int], Any, bytes]] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self.version = 3
        self.name = "main"
        self.subgraphs: list[ModelBuilder] = []

    def tensor(
        self,
        name: str,
        shape: Any,
        dtype: Any = np.float32,
        data: Any = None,
        quant: Any = None,
        sparsity: Any = None,
    ) -> int:
        """A tensor; ``quant`` is ``(scale, zero_point, axis)``, ``sparsity`` ``(traversal_order,
        block_map, [(format, dense_size, segments, indices), ...])`` with ``data`` the stored values."""
        buf = 0
        if data is not None:
            self.buffers.append(np.ascontiguousarray(data, dtype=dtype).tobytes())
            buf = len(self.buffers) - 1
        self.tensors.append(
            {
                "name": name,
                "shape": list(shape),
                "type": _TYPE[np.dtype(dtype)],
                "buffer": buf,
                "quant": quant,
                "sparsity": sparsity,
            }
        )
        return len(self.tensors) - 1

    def input(self, name: str, shape: Any, dtype: Any = np.float32, quant: Any = None) -> int:
        t = self.tensor(name, shape, dtype, quant=quant)
        self.inputs.append(t)
        return t

    def const(self, name: str, data: Any, dtype: Any = None, quant: Any = None) -> int:
        a = np.asarray(data)
        return self.tensor(name, a.shape, dtype or a.dtype, a, quant)

    def sparse_const(self, name: str, dense: np.ndarray, block: int = 0) -> int:
        """A 2-D constant stored sparse: rows dense, columns CSR (zeros left out); with ``block``,
        columns in blocks of that size (a block is stored when any of it is non-zero)."""
        rows, cols = dense.shape
        b = block or 1
        segments, indices, values = [0], [], []
        for r in range(rows):
            for c in range(cols // b):
                chunk = dense[r, c * b : (c + 1) * b]
                if np.any(chunk):
                    indices.append(c)
                    values.extend(chunk)
            segments.append(len(indices))
        dims = [(0, rows, [], []), (1, cols // b, segments, indices)]
        order, bmap = [0, 1], []
        if block:
            dims.append((0, b, [], []))
            order, bmap = [0, 1, 2], [1]
        return self.tensor(
            name, dense.shape, dense.dtype, np.asarray(values, dense.dtype), sparsity=(order, bmap, dims)
        )

    def op(
        self,
        opname: str,
        inputs: list[int],
        out_shape: Any,
        out_name: str,
        options: Any = None,
        out_dtype: Any = np.float32,
        custom_options: bytes = b"",
        out_quant: Any = None,
    ) -> int:
        """Append one operator with one output; ``options`` is ``(OptionsTableName, {Field: value})``,
        ``out_quant`` the output's ``(scale, zero_point, axis)``."""
        out = self.tensor(out_name, out_shape, out_dtype, quant=out_quant)
        self.ops.append((opname, inputs, [out], options, custom_options))
        return out

    def output(self, *ts: int) -> None:
        self.outputs.extend(ts)

    # ---- serialisation ---------------------------------------------------------------------

    @staticmethod
    def _sparsity(b: Any, ivec: Any, sparsity: Any) -> int:
        order, bmap, dims = sparsity
        metas = []
        for fmt, dense, seg, ind in dims:
            vecs = []
            for vals in (seg, ind):
                v = ivec(tflite.Int32VectorStartValuesVector, list(vals))
                tflite.Int32VectorStart(b)
                tflite.Int32VectorAddValues(b, v)
                vecs.append(tflite.Int32VectorEnd(b))
            tflite.DimensionMetadataStart(b)
            tflite.DimensionMetadataAddFormat(b, fmt)
            tflite.DimensionMetadataAddDenseSize(b, dense)
            if fmt == 1:
                tflite.DimensionMetadataAddArraySegmentsType(b, tflite.SparseIndexVector.Int32Vector)
                tflite.DimensionMetadataAddArraySegments(b, vecs[0])
                tflite.DimensionMetadataAddArrayIndicesType(b, tflite.SparseIndexVector.Int32Vector)
                tflite.DimensionMetadataAddArrayIndices(b, vecs[1])
            metas.append(tflite.DimensionMetadataEnd(b))
        ov = ivec(tflite.SparsityParametersStartTraversalOrderVector, order)
        bv = ivec(tflite.SparsityParametersStartBlockMapVector, bmap)
        tflite.SparsityParametersStartDimMetadataVector(b, len(metas))
        for m in reversed(metas):
            b.PrependUOffsetTRelative(m)
        dv = b.EndVector()
        tflite.SparsityParametersStart(b)
        tflite.SparsityParametersAddTraversalOrder(b, ov)
        tflite.SparsityParametersAddBlockMap(b, bv)
        tflite.SparsityParametersAddDimMetadata(b, dv)
        return tflite.SparsityParametersEnd(b)

    def subgraph(self, name: str) -> ModelBuilder:
        """Another subgraph of this model (WHILE's cond and body, IF's branches), numbered in order
        from 1; it shares this model's buffers. Its ``input``/``output`` are the subgraph's."""
        sub = ModelBuilder()
        sub.buffers = self.buffers
        sub.name = name
        self.subgraphs.append(sub)
        return sub

    def build(self) -> bytes:
        b = flatbuffers.Builder(1024)

        def ivec(start: Any, vals: list[int]) -> int:
            start(b, len(vals))
            for v in reversed(vals):
                b.PrependInt32(v)
            return b.EndVector()

        def tvec(start: Any, items: list[int]) -> int:
            start(b, len(items))
            for it in reversed(items):
                b.PrependUOffsetTRelative(it)
            return b.EndVector()

        # buffers
        bufs = []
        for data in self.buffers:
            dv = b.CreateByteVector(data) if data else None
            tflite.BufferStart(b)
            if dv is not None:
                tflite.BufferAddData(b, dv)
            bufs.append(tflite.BufferEnd(b))
        # operator codes
        graphs = [self, *self.subgraphs]
        names: list[str] = []
        for g in graphs:
            for o in g.ops:
                if o[0] not in names:
                    names.append(o[0])
        codes = []
        for n in names:
            custom = not hasattr(tflite.BuiltinOperator, n)
            cc = b.CreateString(n) if custom else None
            code = tflite.BuiltinOperator.CUSTOM if custom else getattr(tflite.BuiltinOperator, n)
            tflite.OperatorCodeStart(b)
            tflite.OperatorCodeAddDeprecatedBuiltinCode(b, min(code, 127))
            tflite.OperatorCodeAddBuiltinCode(b, code)
            tflite.OperatorCodeAddVersion(b, 1)
            if cc is not None:
                tflite.OperatorCodeAddCustomCode(b, cc)
            codes.append(tflite.OperatorCodeEnd(b))
        sgs = [g._build_subgraph(b, ivec, tvec, names) for g in graphs]
        sgv = tvec(tflite.ModelStartSubgraphsVector, sgs)
        cdv = tvec(tflite.ModelStartOperatorCodesVector, codes)
        bv = tvec(tflite.ModelStartBuffersVector, bufs)
        desc = b.CreateString("lamina test model")
        tflite.ModelStart(b)
        tflite.ModelAddVersion(b, self.version)
        tflite.ModelAddOperatorCodes(b, cdv)
        tflite.ModelAddSubgraphs(b, sgv)
        tflite.ModelAddDescription(b, desc)
        tflite.ModelAddBuffers(b, bv)
        m = tflite.ModelEnd(b)
        b.Finish(m, file_identifier=b"TFL3")
        return bytes(b.Output())

    def _build_subgraph(self, b: Any, ivec: Any, tvec: Any, names: list[str]) -> int:
        # tensors
        tens = []
        for t in self.tensors:
            name = b.CreateString(t["name"])
            shape = ivec(tflite.TensorStartShapeVector, t["shape"])
            q = None
            if t["quant"] is not None:
                scale, zp, axis = t["quant"]
                scale = list(np.atleast_1d(scale).astype(np.float32))
                zp = list(np.atleast_1d(zp).astype(np.int64))
                tflite.QuantizationParametersStartScaleVector(b, len(scale))
                for s in reversed(scale):
                    b.PrependFloat32(float(s))
                sv = b.EndVector()
                tflite.QuantizationParametersStartZeroPointVector(b, len(zp))
                for z in reversed(zp):
                    b.PrependInt64(int(z))
                zv = b.EndVector()
                tflite.QuantizationParametersStart(b)
                tflite.QuantizationParametersAddScale(b, sv)
                tflite.QuantizationParametersAddZeroPoint(b, zv)
                tflite.QuantizationParametersAddQuantizedDimension(b, axis)
                q = tflite.QuantizationParametersEnd(b)
            sp = self._sparsity(b, ivec, t["sparsity"]) if t["sparsity"] is not None else None
            tflite.TensorStart(b)
            tflite.TensorAddShape(b, shape)
            if sp is not None:
                tflite.TensorAddSparsity(b, sp)
            tflite.TensorAddType(b, t["type"])
            tflite.TensorAddBuffer(b, t["buffer"])
            tflite.TensorAddName(b, name)
            if q is not None:
                tflite.TensorAddQuantization(b, q)
            tens.append(tflite.TensorEnd(b))
        # operators
        opers = []
        for opname, ins, outs, options, copts in self.ops:
            iv = ivec(tflite.OperatorStartInputsVector, ins)
            ov = ivec(tflite.OperatorStartOutputsVector, outs)
            opt = otype = None
            if options is not None:
                tname, fields = options
                vecs = {}
                for k, v in fields.items():
                    if isinstance(v, (list, tuple)):
                        vecs[k] = ivec(getattr(tflite, f"{tname}Start{k}Vector"), list(v))
                getattr(tflite, f"{tname}Start")(b)
                for k, v in fields.items():
                    getattr(tflite, f"{tname}Add{k}")(b, vecs.get(k, v))
                opt = getattr(tflite, f"{tname}End")(b)
                otype = getattr(tflite.BuiltinOptions, tname)
            cv = b.CreateByteVector(copts) if copts else None
            tflite.OperatorStart(b)
            tflite.OperatorAddOpcodeIndex(b, names.index(opname))
            tflite.OperatorAddInputs(b, iv)
            tflite.OperatorAddOutputs(b, ov)
            if opt is not None:
                tflite.OperatorAddBuiltinOptionsType(b, otype)
                tflite.OperatorAddBuiltinOptions(b, opt)
            if cv is not None:
                tflite.OperatorAddCustomOptions(b, cv)
            opers.append(tflite.OperatorEnd(b))

        tv = tvec(tflite.SubGraphStartTensorsVector, tens)
        ov = tvec(tflite.SubGraphStartOperatorsVector, opers)
        iv = ivec(tflite.SubGraphStartInputsVector, self.inputs)
        outv = ivec(tflite.SubGraphStartOutputsVector, self.outputs)
        sname = b.CreateString(self.name)
        tflite.SubGraphStart(b)
        tflite.SubGraphAddTensors(b, tv)
        tflite.SubGraphAddOperators(b, ov)
        tflite.SubGraphAddInputs(b, iv)
        tflite.SubGraphAddOutputs(b, outv)
        tflite.SubGraphAddName(b, sname)
        return tflite.SubGraphEnd(b)

"""What the generic templates share to emit LLVM IR with llvmlite: the kernel function of the ABI
(:class:`Kernel`: its buffers, its share of the work, loops), loading and storing every storage type
of the arena (f32, f64, f16, bf16 as 2-byte patterns rounded to nearest even, 8/16/32/64-bit
integers) and the integer arithmetic of the ``tpu`` contract (``rounding_rshift``: round half away
from zero; saturation), and the strided elementwise loop nest (:func:`emit_strided`) that every
elementwise, cast, requant, table and copy kernel is an instance of."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import llvmlite.ir as ir
import numpy as np

__all__ = [
    "F32",
    "F64",
    "I1",
    "I8",
    "I16",
    "I32",
    "I64",
    "Kernel",
    "coalesce",
    "const",
    "emit_strided",
    "fconst",
    "fused_consumers",
    "lut_of",
    "libm",
    "load_float",
    "np_dtype",
    "load_int",
    "rounding_rshift",
    "storage_type",
    "store_float",
    "store_int",
]

I1, I8, I16, I32, I64 = ir.IntType(1), ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
F16, F32, F64 = ir.HalfType(), ir.FloatType(), ir.DoubleType()
VOID = ir.VoidType()
I8P = I8.as_pointer()
KERNEL_TYPE = ir.FunctionType(VOID, [I8P.as_pointer(), I64, I64])


def const(v: int, t: ir.Type = I64) -> ir.Constant:
    return ir.Constant(t, int(v))


def fconst(v: float, t: ir.Type = F32) -> ir.Constant:
    return ir.Constant(t, float(v))


def dtype_name(dt: Any) -> str:
    d = np.dtype(dt)
    return "bfloat16" if d.name == "bfloat16" or (d.kind == "V" and d.itemsize == 2) else d.name


def storage_type(dt: Any) -> ir.Type:
    """The LLVM type of one element of numpy dtype ``dt`` in memory (bf16: i16 bit patterns)."""
    n = dtype_name(dt)
    if n == "float32":
        return F32
    if n == "float64":
        return F64
    if n == "float16":
        return F16
    if n in ("bfloat16", "int16", "uint16"):
        return I16
    if n in ("int8", "uint8", "bool"):
        return I8
    if n in ("int32", "uint32"):
        return I32
    if n in ("int64", "uint64"):
        return I64
    raise TypeError(f"no storage type for {n}")


def compute_float(dt: Any) -> ir.Type:
    """The float type a float-mode op computes in for storage ``dt`` (f64 stays f64, else f32)."""
    return F64 if dtype_name(dt) == "float64" else F32


def load_float(b: ir.IRBuilder, ptr: Any, dt: Any, to: ir.Type = F32) -> Any:
    """The element at ``ptr`` (of storage dtype ``dt``) as the float type ``to`` (exact widening)."""
    n = dtype_name(dt)
    v = b.load(ptr)
    if n == "bfloat16":
        f = b.bitcast(b.shl(b.zext(v, I32), const(16, I32)), F32)
    elif n == "float16":
        f = b.fpext(v, F32)
    elif n in ("float32", "float64"):
        f = v
    elif n.startswith("uint") or n == "bool":
        return b.uitofp(v, to)
    else:
        return b.sitofp(v, to)
    if f.type != to:
        f = b.fpext(f, to) if to == F64 else b.fptrunc(f, to)
    return f


def store_float(b: ir.IRBuilder, v: Any, ptr: Any, dt: Any) -> None:
    """Store the float ``v`` as storage dtype ``dt`` (f16/bf16: through f32, round to nearest even)."""
    n = dtype_name(dt)
    if n == "float64":
        b.store(v if v.type == F64 else b.fpext(v, F64), ptr)
        return
    if v.type == F64:
        v = b.fptrunc(v, F32)
    if n == "float32":
        b.store(v, ptr)
    elif n == "float16":
        b.store(b.fptrunc(v, F16), ptr)
    elif n == "bfloat16":
        bits = b.bitcast(v, I32)
        lsb = b.and_(b.lshr(bits, const(16, I32)), const(1, I32))
        rounded = b.lshr(b.add(b.add(bits, const(0x7FFF, I32)), lsb), const(16, I32))
        nan = b.fcmp_unordered("uno", v, v)
        quiet = b.or_(b.lshr(bits, const(16, I32)), const(0x40, I32))
        b.store(b.trunc(b.select(nan, quiet, rounded), I16), ptr)
    else:
        raise TypeError(f"store_float to {n}")


def load_int(b: ir.IRBuilder, ptr: Any, dt: Any) -> Any:
    """The integer element at ``ptr`` as i64 (sign- or zero-extended by ``dt``)."""
    n = dtype_name(dt)
    v = b.load(ptr)
    if v.type == I64:
        return v
    return b.zext(v, I64) if (n.startswith("uint") or n == "bool") else b.sext(v, I64)


def store_int(b: ir.IRBuilder, v: Any, ptr: Any, dt: Any) -> None:
    t = storage_type(dt)
    b.store(v if v.type == t else b.trunc(v, t), ptr)


def clamp_i64(b: ir.IRBuilder, v: Any, lo: int, hi: int) -> Any:
    v = b.select(b.icmp_signed("<", v, const(lo)), const(lo), v)
    return b.select(b.icmp_signed(">", v, const(hi)), const(hi), v)


def rounding_rshift(b: ir.IRBuilder, x: Any, shift: Any) -> Any:
    """``x / 2**shift`` rounded half away from zero (i64; ``shift`` in [1, 62]):
    ``(x + 2**(shift-1) - (x < 0)) >> shift`` — :func:`lamina.dialects.tpu.quantize.rounding_rshift`."""
    if isinstance(shift, int):
        shift = const(shift)
    half = b.shl(const(1), b.sub(shift, const(1)))
    neg = b.zext(b.icmp_signed("<", x, const(0)), I64)
    return b.ashr(b.sub(b.add(x, half), neg), shift)


def libm(module: ir.Module, name: str, t: ir.Type = F32, nargs: int = 1) -> ir.Function:
    """A C math function (``expf``, ``tanhf``, ``erff``...) declared in ``module``."""
    g = module.globals.get(name)
    if g is not None:
        return g  # type: ignore[no-any-return]
    return ir.Function(module, ir.FunctionType(t, [t] * nargs), name)


def intrinsic(module: ir.Module, name: str, t: ir.Type, nargs: int = 1) -> ir.Function:
    """An LLVM intrinsic (``llvm.fabs``, ``llvm.floor``, ``llvm.maxnum``...) of float type ``t``."""
    full = f"{name}.{'f64' if t == F64 else 'f32'}"
    g = module.globals.get(full)
    if g is not None:
        return g  # type: ignore[no-any-return]
    return ir.Function(module, ir.FunctionType(t, [t] * nargs), full)


class Kernel:
    """The LLVM function ``void @symbol(i8** bufs, i64 part, i64 nparts)`` being emitted."""

    def __init__(self, module: ir.Module, symbol: str) -> None:
        self.module = module
        self.fn = ir.Function(module, KERNEL_TYPE, symbol)
        self.fn.attributes.add("nounwind")
        self.fn.attributes.add("noinline")  # the entry calls each once: inlining them all is slow to compile
        self.bufs, self.part, self.nparts = self.fn.args
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))

    def buf(self, i: int, elem: ir.Type) -> Any:
        """Buffer ``i`` as a pointer to ``elem``."""
        b = self.b
        p = b.load(b.gep(self.bufs, [const(i)]))
        return b.bitcast(p, elem.as_pointer())

    def share(self, n: int | Any) -> tuple[Any, Any]:
        """``[lo, hi)``: this part's equal share of ``range(n)``."""
        b = self.b
        nn = const(n) if isinstance(n, int) else n
        lo = b.sdiv(b.mul(nn, self.part), self.nparts)
        hi = b.sdiv(b.mul(nn, b.add(self.part, const(1))), self.nparts)
        return lo, hi

    @contextmanager
    def loop(self, lo: Any, hi: Any, name: str = "i") -> Iterator[Any]:
        """``for i in range(lo, hi)``: the body is emitted inside the ``with``."""
        b = self.b
        lo = const(lo) if isinstance(lo, int) else lo
        hi = const(hi) if isinstance(hi, int) else hi
        pre = b.block
        cond = b.append_basic_block(f"{name}.cond")
        body = b.append_basic_block(f"{name}.body")
        end = b.append_basic_block(f"{name}.end")
        b.branch(cond)
        b.position_at_end(cond)
        i = b.phi(I64, name=name)
        i.add_incoming(lo, pre)
        b.cbranch(b.icmp_signed("<", i, hi), body, end)
        b.position_at_end(body)
        yield i
        nxt = b.add(i, const(1), name=f"{name}.next")
        i.add_incoming(nxt, b.block)
        b.branch(cond)
        b.position_at_end(end)

    def finish(self) -> None:
        self.b.ret_void()


def np_dtype(t: Any) -> np.dtype:
    """The numpy dtype of a tensor type's elements in memory (a quantized type's storage integers)."""
    from lamina.dialects.quant import QuantizedType
    from lamina.dialects.tpu.quantize import storage_dtype
    from lamina.ir.attributes import element_type_to_dtype

    e = t.element_type
    if isinstance(e, QuantizedType):
        return storage_dtype(e)
    return np.dtype(element_type_to_dtype(e))


def fused_consumers(op: Any) -> list[Any]:
    """The ops fused into ``op``'s kernel: ``cpu.fused`` (set by ``convert-tpu-to-cpu`` when the
    template's ``fuses`` accepted them) consumers along the chain of single users."""
    a = op.get_attr("cpu.fused")
    n = int(getattr(a, "value", 0)) if a is not None else 0
    out, cur = [], op
    for _ in range(n):
        users = cur.results[0].users
        if len(users) != 1:
            break
        cur = users[0]
        out.append(cur)
    return out


def lut_of(consumer: Any) -> tuple[np.ndarray, int, Any]:
    """A fused ``tpu.Lut``'s table (as its result's storage), its index base (128 for an int8
    input) and its result type."""
    from lamina.dialects.quant import QuantizedType
    from lamina.dialects.tpu.families.common import store

    out_t = consumer.results[0].type
    table = np.ascontiguousarray(store(np.asarray(consumer.properties["table"].to_numpy()), out_t))
    e = consumer.operands[0].type.element_type
    assert isinstance(e, QuantizedType)
    return table, 128 if e.signed else 0, out_t


# ---- strided elementwise loop nests -------------------------------------------------------------------


def coalesce(shape: Sequence[int], strides: Sequence[Sequence[int]]) -> tuple[list[int], list[list[int]]]:
    """Drop size-1 dims and merge adjacent dims along which every operand's strides are contiguous
    (``stride[i] == stride[i+1] * shape[i+1]``): the same loop nest with fewer, longer loops."""
    dims = [(int(n), [int(s[i]) for s in strides]) for i, n in enumerate(shape) if n != 1]
    if not dims:
        return [1], [[0] for _ in strides]
    out = [dims[0]]
    for n, st in dims[1:]:
        pn, pst = out[-1]
        if all(ps == s * n for ps, s in zip(pst, st)):
            out[-1] = (pn * n, st)
        else:
            out.append((n, st))
    return [d[0] for d in out], [[d[1][k] for d in out] for k in range(len(strides))]


def contiguous_strides(shape: Sequence[int]) -> list[int]:
    st, acc = [], 1
    for n in reversed(shape):
        st.append(acc)
        acc *= int(n)
    return st[::-1]


def broadcast_strides(in_shape: Sequence[int], out_shape: Sequence[int]) -> list[int]:
    """Element strides of a row-major ``in_shape`` read broadcast to ``out_shape`` (0 where it
    broadcasts; numpy's rules, leading dims added)."""
    pad = len(out_shape) - len(in_shape)
    full = [1] * pad + [int(d) for d in in_shape]
    st = contiguous_strides(full)
    return [0 if full[i] == 1 and out_shape[i] != 1 else st[i] for i in range(len(out_shape))]


def emit_strided(
    k: Kernel,
    shape: Sequence[int],
    operands: Sequence[tuple[Any, Sequence[int], int]],
    body: Callable[[ir.IRBuilder, list[Any]], None],
) -> None:
    """A loop nest over ``shape`` in which ``body(builder, ptrs)`` runs once per element with one
    element pointer per operand (``(base pointer, element strides over shape, element offset)``),
    the outermost loop split between the parts. Dims are coalesced first (:func:`coalesce`)."""
    b = k.b
    dims, strides = coalesce(shape, [list(s) for _, s, _ in operands])
    total = math.prod(dims)
    if total == 0:
        return
    inner = dims[-1]
    rows = total // inner
    if rows == 1:  # one row: split the inner loop
        lo, hi = k.share(inner)
        bases = [b.gep(p, [const(off)]) for p, _, off in operands]
        with k.loop(lo, hi, "j") as j:
            ptrs = [b.gep(base, [b.mul(j, const(st[-1]))]) for base, st in zip(bases, strides)]
            body(b, ptrs)
        return
    lo, hi = k.share(rows)
    with k.loop(lo, hi, "r") as r:
        # the row's coordinates over dims[:-1], innermost first
        offs = [const(off) for _, _, off in operands]
        rem = r
        for d in range(len(dims) - 2, -1, -1):
            n = dims[d]
            c = b.urem(rem, const(n)) if d > 0 else rem
            rem = b.udiv(rem, const(n)) if d > 0 else rem
            offs = [b.add(o, b.mul(c, const(st[d]))) if st[d] else o for o, st in zip(offs, strides)]
        bases = [b.gep(p, [o]) for (p, _, _), o in zip(operands, offs)]
        with k.loop(0, inner, "j") as j:
            ptrs = [
                b.gep(base, [b.mul(j, const(st[-1]))]) if st[-1] else base for base, st in zip(bases, strides)
            ]
            body(b, ptrs)

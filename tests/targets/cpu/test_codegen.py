"""Code keys (``kernels/codekey.py``, used by ``codegen.generate``): a kernel whose key is an earlier
kernel's calls that kernel's function without being emitted, so a key must never join two kernels
whose code differs. A model of near-duplicate layers — the same conv shape with other weights, other
calibrated ranges (so other requant multipliers and shifts: some total shifts under 32, some over),
with and without ReLU, with a fused residual add, two same-shaped depthwise convs — compiled in INT8
(symmetric and asymmetric) and F32 on the host ISA and AVX2: ``generate(check_keys=True)`` emits
every kernel anyway and fails if a kernel's IR is not the one of the function its key chose; the
compiled model's outputs equal the ``tpu`` interpreter's bit for bit in INT8, within 1e-5 of the
output's scale in F32."""

from __future__ import annotations

import platform
from typing import Any

import numpy as np
import pytest

import lamina.dialects
import lamina.runtime as rt
import lamina.targets
from lamina.ir.context import Context
from lamina.ir.parser import parse_module
from lamina.quant.deploy import deploy_module, run_tpu_module
from lamina.targets.base import CompileOptions
from lamina.targets.container import write_model
from lamina.targets.cpu import target
from lamina.targets.cpu.codegen import generate
from lamina.targets.cpu.compiler import _main, lower_to_kernels
from lamina.targets.cpu.jit import spec_for
from lamina.targets.cpu.kernels import by_name
from lamina.targets.cpu.kernels.abi import Isa, KernelPlan
from lamina.targets.cpu.kernels.registry import code_key

_ = (lamina.dialects, lamina.targets)


def _t(shape: tuple[int, ...], lo: float, hi: float) -> str:
    return f"tensor<{'x'.join(map(str, shape))}x!quant.calibrated<f32<{lo}:{hi}>>>"


def _dense(a: np.ndarray) -> str:
    body = np.array2string(a, separator=", ", threshold=10**9, floatmode="unique").replace("\n", "")
    return f"dense<{body}>"


def _weight(name: str, a: np.ndarray) -> str:
    ty = f"tensor<{'x'.join(map(str, a.shape))}xf32>"
    return f'  %{name} = "top.Weight"() <{{value = {_dense(a)} : {ty}}}> : () -> {ty}'


def near_duplicates(rng: np.random.Generator, c: int = 16, hw: int = 10) -> str:
    """``x -> c1 -> c2 -> c3 (+ c2) -> c4 -> c5 -> dw1 -> dw2``: c1, c2 the same conv form (no
    ReLU) with other weights and ranges; c3 the same shape without bias, fused with the residual
    add; c4, c5 the same form with ReLU; two depthwise 3x3 of one shape, one with a tiny output
    range (large requant factors: shifts under 32) and one with a wide one."""
    s = (1, c, hw, hw)
    ranges = {"x": (-2.0, 2.0), "c1": (-4.0, 4.0), "c2": (-0.002, 0.002), "c3": (-5.0, 5.0), "a": (-6.0, 6.0)}
    ranges |= {"c4": (0.0, 5.0), "c5": (0.0, 0.5), "d1": (-0.0001, 0.0001), "d2": (-40.0, 40.0)}
    T = {k: _t(s, *v) for k, v in ranges.items()}
    T["in"] = T["x"]
    lines = [
        f'  %in = "top.Input"(%x) : ({T["x"]}) -> {T["x"]} loc("x")',
        '  %none = "top.None"() : () -> none',
    ]
    wt = f"tensor<{c}x{c}x3x3xf32>"
    dwt = f"tensor<{c}x1x3x3xf32>"
    bt = f"tensor<{c}xf32>"
    pads = "pads = array<i64: 1, 1, 1, 1>"

    def conv(name: str, src: str, relu: bool, bias: bool, scale: float) -> None:
        lines.append(_weight(f"w_{name}", rng.normal(0, scale, (c, c, 3, 3)).astype(np.float32)))
        b = "%none"
        if bias:
            lines.append(_weight(f"b_{name}", rng.normal(0, 0.1, (c,)).astype(np.float32)))
            b = f"%b_{name}"
        attrs = pads + (", do_relu = true" if relu else "")
        bty = bt if bias else "none"
        lines.append(
            f'  %{name} = "top.Conv"(%{src}, %w_{name}, {b}) <{{{attrs}}}> : ({T[src]}, {wt}, {bty}) -> {T[name]} loc("{name}")'
        )

    def depthwise(name: str, src: str, scale: float) -> None:
        lines.append(_weight(f"w_{name}", rng.normal(0, scale, (c, 1, 3, 3)).astype(np.float32)))
        lines.append(
            f'  %{name} = "top.Conv"(%{src}, %w_{name}, %none) <{{group = {c} : i64, {pads}}}> : ({T[src]}, {dwt}, none) -> {T[name]} loc("{name}")'
        )

    conv("c1", "in", False, True, 0.2)
    conv("c2", "c1", False, True, 0.05)
    conv("c3", "c2", False, False, 0.1)
    lines.append(f'  %a = "top.Add"(%c3, %c2) : ({T["c3"]}, {T["c2"]}) -> {T["a"]} loc("a")')
    conv("c4", "a", True, True, 0.1)
    conv("c5", "c4", True, True, 0.02)
    depthwise("d1", "c5", 0.01)
    depthwise("d2", "d1", 0.5)
    lines.append(f"  return %d2 : {T['d2']}")
    return f"func.func @main(%x: {T['x']}) -> {T['d2']} {{\n" + "\n".join(lines) + "\n}\n"


@pytest.mark.parametrize(("mode", "asym"), [("INT8", False), ("INT8", True), ("F32", False)])
@pytest.mark.parametrize("isa", ["host", "avx2"])
def test_near_duplicate_layers(mode: str, asym: bool, isa: str, tmp_path: Any) -> None:
    text = near_duplicates(np.random.default_rng(3))
    tpu = deploy_module(parse_module(text, Context()), mode, asymmetric=asym)
    spec = spec_for(isa)
    work, plans, _ = lower_to_kernels(tpu, spec, exact=mode == "INT8")
    program = generate(_main(work), spec.isa, plans, spec.triple, check_keys=True)
    kernels = [k for k in program.kernels if not k.alias]
    functions = {k.function for k in kernels}
    assert len(program.modules) == len(functions) + 2  # one module per function, and the entries
    if mode == "F32":  # c1/c2 and c4/c5 differ only in weights and ranges: one function each
        assert len(functions) < len(kernels), [(k.layer, k.template, k.function) for k in kernels]
    x = {"x": np.random.default_rng(1).uniform(-2, 2, (1, 16, 10, 10)).astype(np.float32)}
    want = next(iter(run_tpu_module(tpu, x).values()))
    res = target(isa=isa).compile(tpu, CompileOptions(name="dup", mode=mode))
    path = tmp_path / "dup.lamina"
    write_model(path, res.model)
    got = next(iter(rt.load(path, threads=1).run(x).values()))
    if mode == "INT8":
        assert np.array_equal(got, want), f"max |d| {np.abs(got - want).max()}"
    else:
        assert np.abs(got - want).max() <= 1e-5 * float(np.abs(want).max())


def _conv_ops(weights: list[np.ndarray], mode: str) -> list[Any]:
    """The ``tpu.Conv`` ops of a chain of same-shaped convs of these weights, each in its kernel."""
    c = weights[0].shape[0]
    s = (1, c, 6, 6)
    lines = [
        f'  %in = "top.Input"(%x) : ({_t(s, -1.0, 1.0)}) -> {_t(s, -1.0, 1.0)}',
        '  %none = "top.None"() : () -> none',
    ]
    src = "in"
    for i, w in enumerate(weights):
        lines.append(_weight(f"w{i}", w))
        lines.append(
            f'  %c{i} = "top.Conv"(%{src}, %w{i}, %none) <{{pads = array<i64: 1, 1, 1, 1>}}> : ({_t(s, -1.0, 1.0)}, tensor<{c}x{c}x3x3xf32>, none) -> {_t(s, -1.0, 1.0)} loc("c{i}")'
        )
        src = f"c{i}"
    lines.append(f"  return %{src} : {_t(s, -1.0, 1.0)}")
    text = f"func.func @main(%x: {_t(s, -1.0, 1.0)}) -> {_t(s, -1.0, 1.0)} {{\n" + "\n".join(lines) + "\n}\n"
    tpu = deploy_module(parse_module(text, Context()), mode)
    work, plans, _ = lower_to_kernels(tpu, spec_for("host"), exact=mode == "INT8")
    from lamina.targets.cpu.dialect import KernelOp

    ks = [k for k in _main(work).regions[0].blocks[0].ops if isinstance(k, KernelOp)]
    return [(k.computes()[0], plans[str(k.symbol)]) for k in ks]


def test_keys_by_content_unless_declared() -> None:
    """The default key holds the weights by content: the generic conv (no declaration) gives two
    convs of other weights other keys, the same weights one key; ``conv_f32``
    (``code_reads_constants = False``) one key for both; a subclass that overrides ``emit`` without
    re-declaring gets the default again."""
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.2, (8, 8, 3, 3)).astype(np.float32)
    (a, pa), (b, pb), (c, pc) = _conv_ops([w, w * 0.5, w], "F32")
    isa = spec_for("host").isa
    fast = by_name("conv_f32")
    assert pa.template is fast
    keys = [code_key(fast, o, p.plan, isa) for o, p in ((a, pa), (b, pb), (c, pc))]
    assert keys[0] == keys[1] == keys[2]
    generic = by_name("generic.conv")
    gp = [generic.plan(o, f"g{i}", isa) for i, o in enumerate((a, b, c))]
    gk = [code_key(generic, o, p, isa) for o, p in zip((a, b, c), gp)]
    assert gk[0] != gk[1] and gk[0] == gk[2]

    class Other(type(fast)):  # type: ignore[misc]
        def emit(self, module: Any, plan: KernelPlan, op: Any, isa: Isa) -> None:
            super().emit(module, plan, op, isa)

    o = Other()
    assert code_key(o, a, pa.plan, isa) != code_key(o, b, pb.plan, isa)
    # another ISA, another key
    assert code_key(fast, a, pa.plan, Isa(32, isa.features)) != keys[0]


def residual_blocks(
    rng: np.random.Generator, res_ranges: tuple[float, float], c: int = 16, hw: int = 8
) -> str:
    """``x -> r1 -> (y1 = conv r1) + r1 -> r2 -> (y2 = conv r2) + r2``: two convs with a fused residual
    add, alike but for their weights and the residual's range (``res_ranges``: r1's and r2's)."""
    s = (1, c, hw, hw)
    ranges = {"x": (-2.0, 2.0), "r1": (-res_ranges[0], res_ranges[0]), "y1": (-3.0, 3.0), "a1": (-6.0, 6.0)}
    ranges |= {"r2": (-res_ranges[1], res_ranges[1]), "y2": (-3.0, 3.0), "a2": (-6.0, 6.0)}
    T = {k: _t(s, *v) for k, v in ranges.items()}
    T["in"] = T["x"]
    wt = f"tensor<{c}x{c}x3x3xf32>"
    lines = [
        f'  %in = "top.Input"(%x) : ({T["x"]}) -> {T["x"]} loc("x")',
        '  %none = "top.None"() : () -> none',
    ]

    def conv(name: str, src: str) -> None:
        lines.append(_weight(f"w_{name}", rng.normal(0, 0.1, (c, c, 3, 3)).astype(np.float32)))
        lines.append(
            f'  %{name} = "top.Conv"(%{src}, %w_{name}, %none) <{{pads = array<i64: 1, 1, 1, 1>}}> : ({T[src]}, {wt}, none) -> {T[name]} loc("{name}")'
        )

    conv("r1", "in")
    conv("y1", "r1")
    lines.append(f'  %a1 = "top.Add"(%y1, %r1) : ({T["y1"]}, {T["r1"]}) -> {T["a1"]} loc("a1")')
    conv("r2", "a1")
    conv("y2", "r2")
    lines.append(f'  %a2 = "top.Add"(%y2, %r2) : ({T["y2"]}, {T["r2"]}) -> {T["a2"]} loc("a2")')
    lines.append(f"  return %a2 : {T['a2']}")
    return f"func.func @main(%x: {T['x']}) -> {T['a2']} {{\n" + "\n".join(lines) + "\n}\n"


@pytest.mark.parametrize("isa", ["host", "avx2"])
def test_residual_scale_alone_shares_the_function(isa: str, tmp_path: Any) -> None:
    """Two fused residual convs whose residuals differ only in scale (the INT8 conv templates' own key
    holds what the code reads of it; the scales are in the ``ra`` buffer): one function, its IR
    checked against the second's (``check_keys``), and the outputs bit for bit the interpreter's."""
    text = residual_blocks(np.random.default_rng(5), (4.0, 4.4))
    tpu = deploy_module(parse_module(text, Context()), "INT8")
    spec = spec_for(isa)
    work, plans, _ = lower_to_kernels(tpu, spec, exact=True)
    program = generate(_main(work), spec.isa, plans, spec.triple, check_keys=True)
    fused = [k for k in program.kernels if k.layer in ("a1", "a2")]
    assert len(fused) == 2 and fused[0].template == fused[1].template
    assert fused[0].function == fused[1].function == fused[0].symbol, [(k.layer, k.function) for k in fused]
    from lamina.targets.cpu.dialect import KernelOp

    ops = {
        str(k.symbol): k.computes()[0]
        for k in _main(work).regions[0].blocks[0].ops
        if isinstance(k, KernelOp)
    }
    keys = [code_key(plans[k.symbol].template, ops[k.symbol], plans[k.symbol].plan, spec.isa) for k in fused]
    assert keys[0] == keys[1]  # not emitted twice
    x = {"x": np.random.default_rng(1).uniform(-2, 2, (1, 16, 8, 8)).astype(np.float32)}
    want = next(iter(run_tpu_module(tpu, x).values()))
    res = target(isa=isa).compile(tpu, CompileOptions(name="res", mode="INT8"))
    path = tmp_path / "res.lamina"
    write_model(path, res.model)
    got = next(iter(rt.load(path, threads=1).run(x).values()))
    assert np.array_equal(got, want), f"max |d| {np.abs(got - want).max()}"


# ---- the parts shared between the threads (codegen._entry_module) --------------------------------------


@pytest.fixture(scope="module")
def blocks_int8(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The residual blocks in INT8 (12x12 images), compiled for the host, and an input."""
    text = residual_blocks(np.random.default_rng(5), (4.0, 4.4), hw=12)
    tpu = deploy_module(parse_module(text, Context()), "INT8")
    res = target().compile(tpu, CompileOptions(name="blocks", mode="INT8"))
    path = tmp_path_factory.mktemp("share") / "blocks.lamina"
    write_model(path, res.model)
    x = np.random.default_rng(1).uniform(-2, 2, (1, 16, 12, 12)).astype(np.float32)
    return path, x


def _entry_runner(m: Any, x: np.ndarray) -> tuple[Any, np.ndarray]:
    """``call(tid)``: the compiled ``model_run`` of ``m`` as thread ``tid`` of ``m.threads`` on the
    input ``x`` (a ctypes call: the GIL released while it runs), and its output buffer (the stored
    integers)."""
    import ctypes

    from lamina.targets.cpu.runtime import _numpy_dtype

    xin = np.ascontiguousarray(x.astype(_numpy_dtype(m.model.inputs[0].dtype)))
    out = np.zeros(tuple(m.model.outputs[0].shape), _numpy_dtype(m.model.outputs[0].dtype))
    io = (ctypes.c_void_p * 2)(xin.ctypes.data, out.ctypes.data)
    fty = ctypes.CFUNCTYPE(
        None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64
    )
    entry = fty(m._entry)

    def call(tid: int, keep: Any = (xin, io)) -> None:
        entry(m._arena.ctypes.data, m._weights_addr, ctypes.addressof(keep[1]), tid, m.threads)

    return call, out


@pytest.mark.parametrize("n", [2, 3, 4])
def test_a_free_thread_runs_the_parts_of_a_late_one(blocks_int8: Any, n: int) -> None:
    """Every part of every kernel is run by whichever thread claims it first: one thread started
    alone writes every byte of the output (it then waits at the run's last barrier for the others,
    which find every part claimed) — the bits of all threads started together and of one thread,
    whichever thread comes first, run after run (the claims are reset at the end of each run)."""
    import threading
    import time

    path, x = blocks_int8
    m = rt.load(path, threads=n)
    call, out = _entry_runner(m, x)
    together = [threading.Thread(target=call, args=(t,), daemon=True) for t in range(n)]
    for t in together:
        t.start()
    for t in together:
        t.join(timeout=20)
    ref = out.copy()
    one = next(iter(rt.load(path, threads=1).run({"x": x}).values()))
    assert np.array_equal(next(iter(m.run({"x": x}).values())), one) and ref.any()
    for first in [0, n - 1, 1, 0]:
        out.view(np.uint8)[...] = ~ref.view(np.uint8)  # every byte differs until written
        ts = [threading.Thread(target=call, args=(t,), daemon=True) for t in range(n)]
        ts[first].start()
        deadline = time.monotonic() + 20
        while not np.array_equal(out, ref):
            assert time.monotonic() < deadline, f"thread {first} alone did not finish the run"
            time.sleep(0.005)
        assert ts[first].is_alive()  # at the last barrier, waiting for the others
        for t in range(n):
            if t != first:
                ts[t].start()
        for t in ts:
            t.join(timeout=20)
            assert not t.is_alive()
        assert np.array_equal(out, ref)
    assert np.array_equal(next(iter(m.run({"x": x}).values())), one)


def _counting_kernel() -> str:
    """``k_count(bufs, part, nparts)``: ``own = bufs[0]``, ``prev = bufs[1]`` (or null),
    ``bad = bufs[2]`` (i64 words). Waits a while (longer on some parts), then, when ``prev`` is
    given, checks that every part ``q < nparts`` of the previous kernel has run once more than
    this part (``prev[q] == own[part] + 1``, else ``bad += 1``), then ``own[part] += 1``."""
    import llvmlite.ir as ir

    i64, i8p = ir.IntType(64), ir.IntType(8).as_pointer()
    p64 = i64.as_pointer()
    m = ir.Module("kc")
    f = ir.Function(m, ir.FunctionType(ir.VoidType(), [i8p.as_pointer(), i64, i64]), "k_count")
    bufs, part, n = f.args
    b = ir.IRBuilder(f.append_basic_block("entry"))
    pause = ir.Function(m, ir.FunctionType(ir.VoidType(), []), "llvm.x86.sse2.pause")

    def c(v: int) -> ir.Constant:
        return ir.Constant(i64, v)

    def loop(stop: Any, body: Any) -> None:
        pre = b.block
        hdr, bod, out = (f.append_basic_block(s) for s in ("h", "b", "o"))
        b.branch(hdr)
        b.position_at_end(hdr)
        i = b.phi(i64)
        i.add_incoming(c(0), pre)
        b.cbranch(b.icmp_signed("<", i, stop), bod, out)
        b.position_at_end(bod)
        body(i)
        i.add_incoming(b.add(i, c(1)), b.block)
        b.branch(hdr)
        b.position_at_end(out)

    own, prev, bad = (b.bitcast(b.load(b.gep(bufs, [c(j)])), p64) for j in range(3))
    mine = b.load_atomic(b.gep(own, [part]), "monotonic", 8)
    loop(b.mul(c(300), b.add(b.urem(part, c(3)), c(1))), lambda i: b.call(pause, []))
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(prev, i64), c(0))):

        def check(q: Any) -> None:
            pv = b.load_atomic(b.gep(prev, [q]), "acquire", 8)
            with b.if_then(b.icmp_unsigned("!=", pv, b.add(mine, c(1)))):
                b.atomic_rmw("add", bad, c(1), "seq_cst")

        loop(n, check)
    b.atomic_rmw("add", b.gep(own, [part]), c(1), "seq_cst")
    b.ret_void()
    return str(m)


@pytest.fixture(scope="module")
def counting_entry() -> Any:
    """A model of four counting kernels in three segments — k0 | k1 (reads k0), k2 | k3 (reads
    k2) —, entry and kernels compiled for the host: ``(code, entry, kernels)``."""
    from lamina.targets.cpu.codegen import KernelInfo, _entry_module
    from lamina.targets.cpu.jit import LoadedCode, compile_ir, host_spec

    words = 128  # counts per kernel: parts of up to 128 threads
    prev = {1: 0, 3: 2}
    infos = []
    for k in range(4):
        bufs = [("arena", k * words * 8), ("arena", prev[k] * words * 8) if k in prev else ("null", 0)]
        bufs.append(("arena", 4 * words * 8))
        infos.append(KernelInfo(k, f"k{k}", "t", f"k{k}", [], bufs, k in prev, function="k_count"))
    spec = host_spec()
    obj, _ = compile_ir(
        [_entry_module(infos, 8 * (4 * words + 8), False, triple=spec.triple), _counting_kernel()], spec
    )
    code = LoadedCode(obj, spec)
    return code, code.function("model_run"), words


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="the kernel spins with x86 pause")
@pytest.mark.parametrize("n", [1, 2, 3, 4, 66])
def test_every_part_runs_once_after_the_segment_before(counting_entry: Any, n: int) -> None:
    """Run after run (back to back, and after the pool's workers fell asleep), on 1-4 threads and
    on 66 (parts from 64 up are their own thread's): every part ``p < n`` of every kernel ran
    exactly once per run, no other part ran, and no part of a kernel after a segment boundary ran
    before every part of the kernel before it had (the kernels check it themselves)."""
    import time

    from lamina.targets.cpu.threads import Pool

    _, entry, words = counting_entry
    arena = np.zeros(4 * words + 8, np.int64)
    pool = Pool(n)
    runs = 40 if n <= 4 else 3
    for r in range(runs):
        pool.run(entry, arena.ctypes.data, 0, 0)
        if r % 10 == 9:
            time.sleep(0.003)  # past the idle spin: the workers sleep
    pool.close()
    counts = arena[: 4 * words].reshape(4, words)
    assert (counts[:, :n] == runs).all(), counts[:, :n]
    assert not counts[:, n:].any() and arena[4 * words] == 0


@pytest.mark.parametrize(
    "triple", ["x86_64-unknown-linux-gnu", "aarch64-unknown-linux-gnu", "x86_64-apple-darwin"]
)
def test_wait_functions_per_host(triple: str) -> None:
    """The barrier, the part sharing and the segment wait verify in LLVM for every host kind:
    ``futex`` wait / wake through ``syscall`` on Linux (``pause`` in the spin on x86 only); elsewhere
    no syscall at all — the waiters ``sched_yield`` between looks."""
    import llvmlite.binding as llvm
    import llvmlite.ir as lir

    from lamina.targets.cpu.codegen import _barrier_function, _sharing_functions

    m = lir.Module("waits")
    m.triple = triple
    sleepers = lir.GlobalVariable(m, lir.IntType(32), "sleepers")
    sleepers.initializer = lir.Constant(lir.IntType(32), 0)
    _barrier_function(m, True, triple)
    _sharing_functions(m, True, triple, sleepers)
    text = str(m)
    llvm.parse_assembly(text).verify()
    linux = "linux" in triple
    assert ('@"syscall"' in text) == linux
    assert ('@"sched_yield"' in text) == (not linux)
    assert ("llvm.x86.sse2.pause" in text) == triple.startswith("x86_64")

#!/usr/bin/env python
"""Wall time of the NPU simulator on a full-size model run op by op, against onnxruntime FP32 on one
thread in the same process (issue 10's target: ResNet-18 INT8 within 20x of onnxruntime, BF16
within 40x; 0.25 s and 0.5 s on a fast 2-core machine).

The model (``tests/models/zoo.py``, full size) goes through model_transform, run_calibration (max,
for INT8) and convert-top-to-tpu; then every ``tpu`` op with a TIU command becomes its own little
program on one simulated machine — GDMA loads of its inputs and params from DDR into LMEM, the TIU
command, a GDMA store of its result to DDR (what ``--disable_layer_group`` will run: no layer
groups, every op alone through DDR) — and the ops without one (reshapes) run on the host on the
values in DDR. Weights are written to DDR once (model load, not timed). A run writes the input to
DDR, executes every program with ``simulator.run`` in order and reads the output back; the result
must equal the ``tpu`` interpreter's bit for bit (INT8 and BF16 alike).

Reported: the simulator's wall time per inference (best of ``--repeat``), the part spent in the TIU
kernels, onnxruntime FP32 with one thread, the ratio; the simulated cycles (op by op, no overlap
between ops) and MAC utilization on ``lnpu``. ``--threads N`` pins numpy's BLAS (default 1, as
onnxruntime's one thread).

Usage::

    python benchmarks/npu_simulator_speed.py [--model resnet18] [--modes INT8,BF16] [--repeat 5]
        [--threads 1] [--profile]
"""

from __future__ import annotations

import os
import sys

_THREADS = "1"
for i, a in enumerate(sys.argv):
    if a == "--threads" and i + 1 < len(sys.argv):
        _THREADS = sys.argv[i + 1]
for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ[_v] = _THREADS

import argparse  # noqa: E402
import collections  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import zoo  # noqa: E402
from interpreter_vs_onnxruntime import best_of, export_in_subprocess, machine  # noqa: E402

import lamina.api as api  # noqa: E402
from lamina.dialects.tpu.transforms import convert_top_to_tpu, import_calibration  # noqa: E402
from lamina.ir.constants import is_constant  # noqa: E402
from lamina.support.errors import LaminaError  # noqa: E402
from lamina.targets.npu import isa, oprun, records, simulator, slicing  # noqa: E402
from lamina.targets.npu.arch import DTYPES, load_chip  # noqa: E402


def lowered_module(path: str, name: str, mode: str) -> Any:
    model = api.transform(path, model_name=name)
    m = model.module
    if mode == "INT8":
        samples = zoo.inputs(name, "full")
        table = api.calibrate(model.mlir, samples=samples, calibration_method="max", tune_num=0)
        import_calibration(m, table)
    ok, _ = convert_top_to_tpu(m, mode)
    assert ok
    return m


class OpByOp:
    """A lowered function as one program per TIU op on one machine, host ops in between."""

    def __init__(self, module: Any, chip: Any) -> None:
        self.chip = chip
        self.fn = next(o for o in module.walk_ops() if o.name == "func.func")
        block = self.fn.regions[0].blocks[0]
        self.args = list(block.args)
        self.ddr_of: dict[Any, tuple[int, str]] = {}  # value -> (DDR address, NPU dtype)
        self.top = 0
        self.steps: list[tuple[str, Any, Any]] = []
        self.loads: list[tuple[isa.Tensor, np.ndarray]] = []
        self.split: collections.Counter[int] = collections.Counter()
        for v in self.args:
            self._alloc(v)
        for op in block:
            if op.name == "func.return":
                self.outputs = list(op.operands)
                break
            if op.dialect_name == "tpu" and op.name != "tpu.Weight" and not is_constant(op.results[0]):
                try:
                    low = records.lower_op(op)
                except LaminaError:
                    low = None
            else:
                low = None
            for r in op.results:
                if not is_constant(r):
                    self._alloc(r)
            if low is None:
                if not (is_constant(op.results[0]) if op.results else False):
                    self.steps.append(("host", op, None))
                continue
            self.steps.append(("tiu", op, self._program(op, low)))
        self.machine = simulator.Machine(chip, max(self.top, 1 << 20))
        for t, a in self.loads:
            self.machine.write(t, a)

    def _alloc(self, v: Any) -> None:
        try:
            dt = records.value_dtype(v)
            shape = tuple(v.type.shape)
        except (LaminaError, AttributeError):
            return
        self.ddr_of[v] = (self.top, dt)
        self.top += -(-int(np.prod(shape, dtype=np.int64)) * DTYPES[dt].itemsize // 64) * 64

    def _ddr(self, v: Any, shape: tuple[int, ...]) -> isa.Tensor:
        addr, dt = self.ddr_of[v]
        return isa.Tensor.ddr(addr, shape, dt)

    def _program(self, op: Any, low: records.Lowered) -> list[isa.Command]:
        """Loads, the command and the store of ``op``; when its tensors do not fit LMEM at once,
        the output is split along a dim the command allows (``slicing``) into as many pieces as
        it takes, each piece loading the regions of its inputs it reads."""
        specs: dict[str, Any] = {}
        src: dict[str, isa.Tensor] = {}
        for name in low.cls.TENSORS:
            if name in low.operands:
                o = low.operands[name]
                specs[name] = (o.shape, records.value_dtype(records.operand_value(op, o)))
                src[name] = self._ddr(records.operand_value(op, o), o.shape)
            elif name in low.params:
                a = low.params[name]
                specs[name] = (a.shape, next(n for n, d in DTYPES.items() if d == a.dtype))
                src[name] = isa.Tensor.ddr(self.top, a.shape, specs[name][1])
                self.top += -(-a.nbytes // 64) * 64
                self.loads.append((src[name], a))
        shapes = {n: sp[0] for n, sp in specs.items()}
        out_shape = shapes["output"]
        for pieces in range(1, 1 << 12):
            regions = _pieces(low, shapes, out_shape, pieces)
            if regions is None:
                continue
            plans = []
            try:
                for region in regions:
                    fields, reads = slicing.slice_command(low.cls, low.fields, shapes, region)
                    sub = {n: (tuple(b - a for a, b in reads[n]), specs[n][1]) for n in specs}
                    plans.append((fields, reads, oprun.place(self.chip, sub)))
            except LaminaError:
                continue
            break
        else:
            raise LaminaError(f"{op.name}: no split of its output fits LMEM")
        self.split[pieces] += 1
        cmds: list[isa.Command] = []
        gdma = 0
        for tiu_id, (fields, reads, lmem) in enumerate(plans, 1):
            for name in specs:
                if name != "output":
                    gdma += 1
                    cmds.append(isa.Move(id=gdma, src=_region(src[name], reads[name]), dst=lmem[name]))
            cmds.append(low.cls(**fields, **lmem, id=tiu_id, wait=gdma))  # type: ignore[arg-type]
            gdma += 1
            cmds.append(
                isa.Move(
                    id=gdma, wait=tiu_id, src=lmem["output"], dst=_region(src["output"], reads["output"])
                )
            )
        return isa.decode(isa.encode(cmds))

    def _read(self, v: Any, host: dict[Any, Any]) -> Any:
        if v in host:
            return host[v]
        if is_constant(v):
            return v.defining_op().execute([])[0]
        if v in self.ddr_of:
            return self.machine.read(self._ddr(v, _4d(v.type.shape))).reshape(v.type.shape)
        return None

    def run(self, inputs: list[np.ndarray], table: Any = None, stats: Any = None) -> list[Any]:
        host: dict[Any, Any] = {}
        for v, a in zip(self.args, inputs):
            if v in self.ddr_of:
                self.machine.write(self._ddr(v, _4d(a.shape)), np.ascontiguousarray(a).reshape(_4d(a.shape)))
            else:
                host[v] = a
        for kind, op, prog in self.steps:
            if kind == "tiu":
                res = simulator.run(self.machine, prog, table)
                if stats is not None:
                    stats["cycles"] += res.total_cycles
                    stats["macs"] += simulator.total_macs(res.records)
                continue
            t0 = time.perf_counter()
            outs = op.executor()([self._read(v, host) for v in op.operands])
            for r, o in zip(op.results, outs):
                if r in self.ddr_of and o is not None:
                    a = np.ascontiguousarray(o)
                    self.machine.write(self._ddr(r, _4d(a.shape)), a.reshape(_4d(a.shape)))
                else:
                    host[r] = o
            if stats is not None:
                stats["host_s"] += time.perf_counter() - t0
        return [self._read(v, host) for v in self.outputs]


def _region(t: isa.Tensor, region: Any) -> isa.Tensor:
    """The part of DDR tensor ``t`` in ``region`` (same strides)."""
    off = sum(a * st for (a, _), st in zip(region, t.strides))
    shape = tuple(b - a for a, b in region)
    return isa.Tensor(t.space, t.addr + off * DTYPES[t.dtype].itemsize, shape, t.strides, t.dtype)


def _pieces(low: records.Lowered, shapes: Any, out: Any, pieces: int) -> list[Any] | None:
    """``out`` split into ``pieces`` regions along the first dim (h, c, w, n) the command can split
    that many ways, or None."""
    if pieces == 1:
        return [tuple((0, d) for d in out)]
    for dim in (2, 1, 3, 0):
        step = slicing.split_step(low.cls, low.fields, shapes, dim)
        if step == 0 or out[dim] // step < pieces:
            continue
        units = out[dim] // step
        cuts = [round(i * units / pieces) * step for i in range(pieces)] + [out[dim]]
        regions = []
        for a, b in itertools.pairwise(cuts):
            r = [(0, d) for d in out]
            r[dim] = (a, b)
            regions.append(tuple(r))
        return regions
    return None


def _4d(shape: tuple[int, ...]) -> tuple[int, int, int, int]:
    n = int(np.prod(shape, dtype=np.int64))
    return (1, 1, 1, n)


def timed_table(times: dict[str, float]) -> simulator.TiuTable:
    """The default TIU kernels, each call's wall time added to ``times`` by command class."""
    table = simulator.TiuTable()
    from lamina.targets.npu.kernels import KERNELS

    for cls, (execute, work) in KERNELS.items():

        def run(cmd: Any, ins: Any, _ex: Any = execute, _n: str = cls.__name__) -> Any:
            t0 = time.perf_counter()
            y = _ex(cmd, ins)
            times[_n] += time.perf_counter() - t0
            return y

        table.register(cls, run, work)
    return table


def bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint16) if a.dtype.kind == "V" else a


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet18")
    ap.add_argument("--modes", default="INT8,BF16")
    ap.add_argument("--chip", default="lnpu")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--threads", default="1", help="numpy BLAS threads (default 1)")
    ap.add_argument("--profile", action="store_true", help="time per TIU command class")
    args = ap.parse_args()

    import onnxruntime as ort

    from lamina.execution import Interpreter

    mi = machine()
    print(
        f"# {mi['date']}  nproc={mi['nproc']}  cpu={mi['cpu']}  python {mi['python']}  numpy {mi['numpy']}  "
        f"onnxruntime {mi['onnxruntime']}  load avg {mi['load']}"
    )
    print(
        f"# onnxruntime FP32 1 thread; numpy BLAS threads {args.threads}; best of {args.repeat} after 1 warm-up"
    )
    path = export_in_subprocess(args.model)
    sample = zoo.inputs(args.model, "full")[0]
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    feeds = dict(zip([i.name for i in sess.get_inputs()], sample))
    t_ort = best_of(lambda: sess.run(None, feeds), 1, args.repeat)
    print(f"onnxruntime FP32 1 thread: {t_ort * 1e3:.1f} ms")
    chip = load_chip(args.chip)
    rows = []
    for mode in args.modes.split(","):
        t0 = time.perf_counter()
        m = lowered_module(path, args.model, mode)
        t_lower = time.perf_counter() - t0
        t0 = time.perf_counter()
        prog = OpByOp(m, chip)
        t_build = time.perf_counter() - t0
        ref_list = Interpreter(m).call(sample)
        stats: dict[str, Any] = collections.defaultdict(float)
        got = prog.run(sample, stats=stats)
        exact = all(np.array_equal(bits(np.asarray(g)), bits(np.asarray(r))) for g, r in zip(got, ref_list))
        t_sim = best_of(lambda p=prog: p.run(sample), 1, args.repeat)
        times: dict[str, float] = collections.defaultdict(float)
        table = timed_table(times)
        prog.run(sample, table)
        times.clear()
        prog.run(sample, table)
        t_tiu = sum(times.values())
        n_tiu = sum(1 for k, _, _ in prog.steps if k == "tiu")
        n_host = sum(1 for k, _, _ in prog.steps if k == "host")
        cycles = stats["cycles"]
        util = stats["macs"] / (chip.peak_macs_per_cycle * cycles) if cycles else 0.0
        ratio = t_sim / t_ort
        print(
            f"{args.model} {mode}: simulator {t_sim * 1e3:.1f} ms ({t_tiu * 1e3:.1f} ms in TIU kernels), "
            f"ratio {ratio:.1f}x onnxruntime; bit-exact vs interpreter: {exact}; {n_tiu} TIU ops, {n_host} host ops; "
            f"op-by-op {cycles / chip.clock_hz * 1e3:.3f} ms simulated on {chip.name} ({int(cycles)} cycles, MAC "
            f"utilization {util:.1%}); lowering {t_lower:.1f} s, programs {t_build:.1f} s; "
            f"ops split in pieces to fit LMEM: {dict(sorted(prog.split.items()))}",
            flush=True,
        )
        if args.profile:
            for k, v in sorted(times.items(), key=lambda kv: -kv[1]):
                print(f"    {k:10s} {v * 1e3:8.2f} ms")
        rows.append((mode, t_sim, t_tiu, ratio, exact))
    print()
    print(
        "| model | mode | onnxruntime FP32 1 thread (ms) | simulator (ms) | of which TIU kernels (ms) | ratio | target | bit-exact |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for mode, t_sim, t_tiu, ratio, exact in rows:
        tgt = 20 if mode == "INT8" else 40
        verdict = f"≤ {tgt}x {'✓' if ratio <= tgt else '✗'}"
        print(
            f"| {args.model} | {mode} | {t_ort * 1e3:.1f} | {t_sim * 1e3:.1f} | {t_tiu * 1e3:.1f} | {ratio:.1f}x | "
            f"{verdict} | {'yes' if exact else 'NO'} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Mixed-precision search speed: ``run_calibration --search search_qtable`` on a text-detector-sized model.

    python benchmarks/search_speed.py [--samples 24] [--search_num 10] [--expected_cos 0.99] \\
        [--workdir /tmp/lamina-search] [--small]

Builds a DB-style text detector in ONNX with ``onnx.helper`` (seeded weights, no download): a
PP-LCNetV3-like backbone (depthwise-separable blocks with learnable affine ``Mul``/``Add`` after each
convolution and activation, squeeze-excite blocks, residual ``Add``s), an RSE-FPN neck (1x1 and 3x3
convolutions with SE, top-down ``Resize`` + ``Add``, ``Concat`` of the four levels at 1/4) and a DB
head (``Conv``/``Relu``/``ConvTranspose`` x2 then ``Sigmoid``): about 700 ONNX nodes at 1x3x384x768,
the size of PP-OCRv4's detector. A few convolutions get one output channel 40x larger than the rest
(the outlier channels real detectors have; here three depthwise convolutions, whose channel stays
apart until the next pointwise one), so all-INT8 falls short of 0.99 and the search has work to do.

Then, in this process: ``model_transform`` (``lamina.api.transform``), ``--samples`` structured
samples (.npy: smooth backgrounds with dark text-like strokes) and the timed command
``run_calibration M.mlir --dataset DIR --input_num N --tune_num 0 --search search_qtable
--expected_cos C --search_num K --quantize_table Q -o T``; prints its stderr (progress included),
the wall time of calibration and of the search, and the result (layers floated, cosine).

``--small`` builds the reduced variant the tests use (:func:`build_detector` with ``small=True``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

#: the DB head's logits (before the sigmoid)
LOGIT_MEAN, LOGIT_STD = 0.0, 1.5


class _Graph:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.arrays: dict[str, np.ndarray] = {}
        self.convs: list[tuple[str, str, str, bool, int]] = []  # output, weight, bias, outlier, channel axis
        self.pooled: set[str] = set()
        self.n = 0

    def name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}_{self.n}"

    def const(self, a: np.ndarray) -> str:
        nm = self.name("w")
        self.arrays[nm] = np.asarray(a, np.float32)
        return nm

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        from onnx import helper

        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=f"/{out}/{op}", **attrs))
        return out

    def conv(
        self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, outlier: bool = False
    ) -> str:
        fan_in = cin // group * k * k
        w, b = (
            self.const(self.rng.standard_normal((cout, cin // group, k, k)) * np.sqrt(2.0 / fan_in)),
            self.const(np.zeros(cout)),
        )
        p = k // 2
        out = self.node(
            "Conv", [x, w, b], kernel_shape=[k, k], strides=[stride, stride], pads=[p, p, p, p], group=group
        )
        self.convs.append((out, w, b, outlier, 0))
        return out

    def pooled_conv(self, x: str, cin: int, cout: int) -> str:
        """A 1x1 convolution of a squeeze-excite block (on a pooled 1x1 map: left out of the LSUV)."""
        out = self.conv(x, cin, cout, 1)
        self.pooled.add(out)
        return out

    def conv_transpose(self, x: str, cin: int, cout: int) -> str:
        w, b = (
            self.const(self.rng.standard_normal((cin, cout, 2, 2)) * np.sqrt(2.0 / (cin * 4))),
            self.const(np.zeros(cout)),
        )
        out = self.node("ConvTranspose", [x, w, b], kernel_shape=[2, 2], strides=[2, 2])
        self.convs.append((out, w, b, False, 1))
        return out

    def normalize(self, x: np.ndarray, last_mean: float, last_std: float) -> None:
        """Data-dependent init (LSUV): scale every convolution, in order, to zero-mean unit-variance
        channels on the sample ``x`` (the last one, the text logits, to ``last_mean`` and ``last_std``),
        then give the outlier
        convolutions one channel 40x the others: activations stay in a realistic range."""
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper

        for i, (out, wn, bn, outlier, axis) in enumerate(self.convs):
            if i < len(self.convs) - 1 and out in self.pooled:
                continue  # squeeze-excite on a pooled 1x1 map: no statistics to use; keep the He init
            graph = helper.make_graph(
                self.nodes, "lsuv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                initializer=[numpy_helper.from_array(a, k) for k, a in self.arrays.items()],
            )  # fmt: skip
            m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
            m.ir_version = 8
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = 1
            y = ort.InferenceSession(m.SerializeToString(), opts).run(None, {"x": x})[0].astype(np.float64)
            mean, std = y.mean(axis=(0, 2, 3)), y.std(axis=(0, 2, 3)) + 1e-6
            last = i == len(self.convs) - 1
            target = last_std if last else 1.0
            w, b = self.arrays[wn].astype(np.float64), self.arrays[bn].astype(np.float64)
            shape = [1] * w.ndim
            shape[axis] = -1
            f = target / std
            w, b = w * f.reshape(shape), (b - mean) * f + (last_mean if last else 0.0)
            if outlier:
                idx = [slice(None)] * w.ndim
                idx[axis] = 0
                w[tuple(idx)] *= 40.0
                b[0] = b[0] * 40.0 + 40.0 * target
            self.arrays[wn], self.arrays[bn] = w.astype(np.float32), b.astype(np.float32)

    def affine(self, x: str, c: int) -> str:
        """PP-LCNetV3's learnable affine block: x * scale + bias."""
        s = self.const(1.0 + 0.1 * self.rng.standard_normal((1, c, 1, 1)))
        b = self.const(0.05 * self.rng.standard_normal((1, c, 1, 1)))
        return self.node("Add", [self.node("Mul", [x, s]), b])

    def se(self, x: str, c: int) -> str:
        r = max(4, c // 4)
        g = self.node("GlobalAveragePool", [x])
        h = self.node("Relu", [self.pooled_conv(g, c, r)])
        a = self.node("HardSigmoid", [self.pooled_conv(h, r, c)], alpha=1.0 / 6, beta=0.5)
        return self.node("Mul", [x, a])

    def conv_act(
        self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1, outlier: bool = False
    ) -> str:
        y = self.affine(self.conv(x, cin, cout, k, stride, group, outlier), cout)
        return self.affine(self.node("HardSwish", [y]), cout)


def build_detector(path: str, small: bool = False, seed: int = 0, shape: tuple[int, int] = (384, 768)) -> str:
    """Write the DB-style detector ONNX model to ``path`` and return it. ``small``: 3 blocks per stage
    fewer, narrower and a 64x128 input (for tests)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    g = _Graph(seed)
    h, w = (64, 128) if small else shape
    widths = (8, 16, 24, 32, 48) if small else (16, 24, 48, 96, 192)
    blocks = (1, 1, 1, 1) if small else (3, 8, 14, 8)
    outliers = {1, 3} if small else {5, 13, 21}  # depthwise convolutions with one 40x channel
    x = g.conv_act("x", 3, widths[0], 3, stride=2)
    c = widths[0]
    feats: list[tuple[str, int]] = []
    i = 0
    for stage, (n, cout) in enumerate(zip(blocks, widths[1:])):
        for j in range(n):
            stride = 2 if j == 0 else 1
            y = g.conv_act(x, c, c, 3, stride, group=c, outlier=i in outliers)
            if j % 2 == 1 or stage >= 2:
                y = g.se(y, c)
            y = g.conv_act(y, c, cout, 1)
            x = g.node("Add", [x, y]) if stride == 1 and c == cout else y
            c = cout
            i += 1
        feats.append((x, c))
    # RSE-FPN neck
    nc = 16 if small else 96
    ins = []
    for f, cf in feats:
        y = g.conv(f, cf, nc, 1)
        ins.append(g.node("Add", [y, g.se(y, nc)]))
    for k in range(len(ins) - 1, 0, -1):
        up = g.node("Resize", [ins[k], "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
        ins[k - 1] = g.node("Add", [ins[k - 1], up])
    outs = []
    for k, y in enumerate(ins):
        z = g.conv(y, nc, nc // 4, 3)
        z = g.node("Add", [z, g.se(z, nc // 4)])
        if k:
            scale = float(2**k)
            z = g.node("Resize", [z, "", g.const(np.array([1, 1, scale, scale], np.float32))], mode="nearest")
        outs.append(z)
    fuse = g.node("Concat", outs, axis=1)
    # DB head: probability map at full resolution
    hc = nc // 4
    y = g.node("Relu", [g.affine(g.conv(fuse, nc, hc, 3), hc)])
    y = g.conv_transpose(y, hc, hc)
    y = g.node("Relu", [g.affine(y, hc)])
    y = g.conv_transpose(y, hc, 1)
    g.nodes.append(helper.make_node("Sigmoid", [y], ["maps"], name="/head/Sigmoid"))
    rng = np.random.default_rng(seed + 1)
    g.normalize(_sample(rng, (h, w))[None], last_mean=LOGIT_MEAN, last_std=LOGIT_STD)
    graph = helper.make_graph(
        g.nodes, "db_detector", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, h, w])],
        [helper.make_tensor_value_info("maps", TensorProto.FLOAT, [1, 1, h, w])],
        initializer=[numpy_helper.from_array(a, k) for k, a in g.arrays.items()],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, path)
    return path


def _sample(rng: np.random.Generator, shape: tuple[int, int]) -> np.ndarray:
    """One structured sample (normalized, CHW): a smooth colour background with dark text-like strokes."""
    h, w = shape
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    img = np.empty((3, h, w), np.float32)
    for ch in range(3):
        fx, fy, ph = rng.uniform(0.5, 3), rng.uniform(0.5, 3), rng.uniform(0, 6.28)
        img[ch] = 0.5 + 0.3 * np.sin(fx * xx / w * 6.28 + fy * yy / h * 6.28 + ph)
    for _ in range(int(rng.integers(6, 16))):  # text lines: rows of dark strokes
        th, ln = int(rng.integers(max(2, h // 64), max(3, h // 16))), int(rng.integers(w // 20, w // 2))
        y0, x0 = int(rng.integers(0, h - th)), int(rng.integers(0, w - ln))
        strokes = rng.random(ln) < 0.45
        img[:, y0 : y0 + th, x0 : x0 + ln][:, :, strokes] *= 0.15
    img += rng.normal(0, 0.02, img.shape).astype(np.float32)
    return ((img - 0.5) / 0.25).astype(np.float32)


def make_samples(directory: str, n: int, shape: tuple[int, int], seed: int = 0) -> list[str]:
    """``n`` structured samples (.npy, 1x3xHxW) in ``directory``."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        p = os.path.join(directory, f"s{i:03d}.npy")
        np.save(p, _sample(rng, shape)[None])
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--samples", type=int, default=24)
    ap.add_argument("--search_num", type=int, default=10)
    ap.add_argument("--expected_cos", type=float, default=0.99)
    ap.add_argument("--workdir", default="/tmp/lamina-search")
    ap.add_argument("--small", action="store_true")
    args = ap.parse_args(argv)

    import onnx

    import lamina.api as lm
    from lamina.tools.calibrate import main as run_calibration

    os.makedirs(args.workdir, exist_ok=True)
    tag = "db_small" if args.small else "db"
    shape = (64, 128) if args.small else (384, 768)
    onnx_path = build_detector(os.path.join(args.workdir, f"{tag}.onnx"), small=args.small)
    n_nodes = len(onnx.load(onnx_path).graph.node)
    mlir = os.path.join(args.workdir, f"{tag}.mlir")
    lm.transform(onnx_path, model_name=tag, input_shapes=[[1, 3, *shape]], mlir=mlir)
    data = os.path.join(args.workdir, f"{tag}_samples{args.samples}")
    if not os.path.isdir(data) or len(os.listdir(data)) < args.samples:
        make_samples(data, args.samples, shape)
    table, qtable = (
        os.path.join(args.workdir, f"{tag}_cali_table"),
        os.path.join(args.workdir, f"{tag}_qtable"),
    )
    argv_cal = [mlir, "--dataset", data, "--input_num", str(args.samples), "--tune_num", "0", "-q",
                "--search", "search_qtable", "--expected_cos", str(args.expected_cos),
                "--search_num", str(args.search_num), "--quantize_table", qtable, "-o", table]  # fmt: skip
    print("# run_calibration " + " ".join(argv_cal))
    print(f"# {onnx_path}: {n_nodes} ONNX nodes, input 1x3x{shape[0]}x{shape[1]}")
    load0 = os.getloadavg()[0]
    err = io.StringIO()

    class Tee(io.TextIOBase):
        def write(self, s: str) -> int:
            err.write(s)
            sys.__stdout__.write(s)
            sys.__stdout__.flush()
            return len(s)

    t0 = time.perf_counter()
    with contextlib.redirect_stderr(Tee()):
        rc = run_calibration(argv_cal)
    wall = time.perf_counter() - t0
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    print(f"load average before/after: {load0:.2f} / {os.getloadavg()[0]:.2f}")
    print(f"exit status {rc}; wall {wall:.1f} s ({wall / 60:.2f} min) for calibration + search")
    return rc


if __name__ == "__main__":
    sys.exit(main())

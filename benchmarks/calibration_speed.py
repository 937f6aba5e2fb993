"""Calibration speed: ``run_calibration`` with ``kl`` + tune on a ResNet-18-shaped model (issue 4).

    python benchmarks/calibration_speed.py [--images 100] [--tune_num 5] [--workdir /tmp/lamina-calib]

Builds the zoo's ResNet-18 (224x224, ``tests/models/zoo.py``), runs ``model_transform`` on it with
ImageNet preprocessing, writes ``--images`` calibration images made from scikit-image's sample images
(random crops, flips and scales of astronaut, chelsea, coffee, rocket, ...; nothing is downloaded),
then times ``run_calibration M.mlir --dataset DIR --input_num N --tune_num K -o M_cali_table`` in this
process, with the phases (statistics, thresholds, tune) reported separately. The target: under 30 s
for 100 images with kl + tune on the 2-core machine.

    python benchmarks/calibration_speed.py --minilm128 [--repeat 3] [--tune_num 5]

times mask-aware calibration (issue 13) instead: all-MiniLM-L6-v2 padded to 128 tokens on 24
sentences, with the attention mask detected (statistics over the kept positions) and with
``mask_input="none"`` (every position), alternated in one process, best of ``--repeat``, phase by
phase, and their ratio.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "models"))

import numpy as np  # noqa: E402

SAMPLES = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "camera",
    "cat",
    "immunohistochemistry",
    "hubble_deep_field",
)


def make_images(directory: str, n: int, seed: int = 0) -> list[str]:
    """``n`` RGB images (jpg) from scikit-image's sample images: random crops, flips, scales."""
    from PIL import Image
    from skimage import data

    os.makedirs(directory, exist_ok=True)
    bases = []
    for name in SAMPLES:
        img = getattr(data, name)()
        if img.ndim == 2:
            img = np.stack([img] * 3, axis=-1)
        bases.append(np.ascontiguousarray(img[:, :, :3]).astype(np.uint8))
    rng = np.random.default_rng(seed)
    paths = []
    for i in range(n):
        img = bases[i % len(bases)]
        h, w = img.shape[:2]
        f = rng.uniform(0.5, 1.0)
        ch, cw = max(32, int(h * f)), max(32, int(w * f))
        y, x = rng.integers(0, h - ch + 1), rng.integers(0, w - cw + 1)
        crop = img[y : y + ch, x : x + cw]
        if rng.random() < 0.5:
            crop = crop[:, ::-1]
        p = os.path.join(directory, f"img{i:03d}.jpg")
        Image.fromarray(np.ascontiguousarray(crop)).resize((256, 256)).save(p, quality=92)
        paths.append(p)
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--tune_num", type=int, default=5)
    ap.add_argument("--method", default="kl")
    ap.add_argument("--workdir", default="/tmp/lamina-calib")
    ap.add_argument("--repeat", type=int, default=1, help="time the calibration this many times (best kept)")
    ap.add_argument("--minilm128", action="store_true", help="time mask-aware calibration on padded MiniLM")
    args = ap.parse_args(argv)
    if args.minilm128:
        return minilm128(args)

    import zoo

    import lamina.api as lm
    from lamina.flows.calibrate import calibrate_file

    os.makedirs(args.workdir, exist_ok=True)
    onnx_path = zoo.export("resnet18", "full")
    mlir = os.path.join(args.workdir, "resnet18.mlir")
    if not os.path.exists(mlir):
        lm.transform(
            onnx_path,
            model_name="resnet18",
            input_shapes=[[1, 3, 224, 224]],
            mean=[123.675, 116.28, 103.53],
            scale=[0.0171, 0.0175, 0.0174],
            pixel_format="rgb",
            resize_dims=[256, 256],
            mlir=mlir,
        )
    imgs = os.path.join(args.workdir, f"images{args.images}")
    if not os.path.isdir(imgs) or len(os.listdir(imgs)) < args.images:
        make_images(imgs, args.images)
    table = os.path.join(args.workdir, "resnet18_cali_table")
    cmd = (
        f"run_calibration {mlir} --dataset {imgs} --input_num {args.images} "
        f"--calibration_method {args.method} --tune_num {args.tune_num} -o {table}"
    )
    print(f"# {cmd}")
    best = None
    for _ in range(args.repeat):
        load0 = os.getloadavg()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        res = calibrate_file(
            mlir,
            dataset=imgs,
            input_num=args.images,
            method=args.method,
            tune_num=args.tune_num,
            calibration_table=table,
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if best is None or wall < best[0]:
            best = (wall, cpu, res.timings, load0, os.getloadavg()[0])
    assert best is not None
    wall, cpu, tm, la0, la1 = best
    n_t = len(res.table)
    changed = sum(1 for k, v in res.tuned.items() if v != res.initial_thresholds.get(k))
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, Python {platform.python_version()}"
    )
    print(f"load average before/after: {la0:.2f} / {la1:.2f}")
    print(
        f"{args.images} images, {n_t} tensors, method {args.method}, tune_num {args.tune_num} "
        f"({len(res.tuned)} tensors tuned, {changed} changed)"
    )
    print(
        f"wall {wall:.2f} s (cpu {cpu:.2f} s): statistics {tm.get('statistics', 0):.2f} s "
        f"({tm.get('statistics', 0) / args.images * 1000:.0f} ms/image incl. decode+preprocess), "
        f"thresholds {tm.get('thresholds', 0):.2f} s, tune {tm.get('tune', 0):.2f} s"
    )
    target = 30.0
    print(f"target < {target:.0f} s: {'PASS' if wall < target else 'FAIL'}")
    return 0


def minilm128(args: argparse.Namespace) -> int:
    """Mask-aware calibration against every-position calibration on padded MiniLM, same run."""
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    import data

    import lamina.api as lm
    from lamina.quant.calibration import calibrate
    from tests.models import minilm

    os.makedirs(args.workdir, exist_ok=True)
    mlir = os.path.join(args.workdir, "minilm128.mlir")
    lm.transform(
        minilm.export(1, 128, hidden=True), model_name="minilm128", input_shapes=[[1, 128]] * 2, mlir=mlir
    )
    module = lm.load(mlir).module
    names = ["input_ids", "attention_mask"]
    samples = [dict(zip(names, minilm.inputs(t, 128))) for t in data.sentence_batches(24, 1, "calibration")]
    best: dict[str, tuple[float, dict[str, float]]] = {}
    for _ in range(args.repeat):
        for mode in ("auto", "none"):
            t0 = time.perf_counter()
            res = calibrate(module, samples, method=args.method, tune_num=args.tune_num, mask_input=mode)
            wall = time.perf_counter() - t0
            if mode not in best or wall < best[mode][0]:
                best[mode] = (wall, res.timings)
    print(
        f"machine: {os.cpu_count()} CPUs, {platform.processor() or platform.machine()}, numpy {np.__version__}"
    )
    print(
        f"load average: {os.getloadavg()[0]:.2f}; 24 sentences padded to 128, {args.method}, tune_num {args.tune_num}"
    )
    for mode, (wall, tm) in best.items():
        what = "mask detected (kept positions)" if mode == "auto" else "mask_input none (every position)"
        print(
            f"{what:34s} wall {wall:6.2f} s: statistics {tm.get('statistics', 0):.2f} s, "
            f"thresholds {tm.get('thresholds', 0):.2f} s, tune {tm.get('tune', 0):.2f} s"
        )
    a, n = best["auto"], best["none"]
    print(
        f"ratio masked / every position: wall {a[0] / n[0]:.3f}, statistics "
        f"{a[1].get('statistics', 0) / max(n[1].get('statistics', 0), 1e-9):.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

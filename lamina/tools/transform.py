"""``model_transform`` / ``lamina transform``: ONNX → ``top`` .mlir, checked layer by layer.

    model_transform --model_name resnet --model_def resnet.onnx --input_shapes [[1,3,224,224]] \\
        --mean 123.675,116.28,103.53 --scale 0.0171,0.0175,0.0174 --pixel_format rgb \\
        --test_input dog.jpg --test_result resnet_top_outputs.npz --mlir resnet.mlir

Writes, next to ``--mlir`` (default ``<model_name>.mlir``):

* the ``top`` module (with locations, so tensor names survive) and its weight file
  ``<model_name>_top_weights.npz`` (the module records it as ``lamina.weight_file``);

and with ``--test_input``:

* ``<model_name>_in_f32.npz``: the preprocessed inputs, keyed by input name;
* ``<model_name>_ref_outputs.npz``: every tensor of the ONNX graph computed by onnxruntime;
* ``--test_result`` (default ``<model_name>_top_outputs.npz``): every tensor computed by Lamina's
  interpreter from the written .mlir;

then compares the last two tensor by tensor (``npz_tool compare``) and exits 1 naming the tensors
outside ``--tolerance``. Each step prints its equivalent command line. Exit status: 0 success,
1 any error or comparison failure, 2 bad usage.

The flow itself is :func:`lamina.flows.transform.transform`; this module parses the flags and prints.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from lamina.compare import parse_tolerance
from lamina.flows.transform import TransformOptions, transform
from lamina.frontends.preprocess import (
    parse_dtypes,
    parse_floats,
    parse_ints,
    parse_names,
    parse_shapes,
)
from lamina.support.errors import ToolError
from lamina.tools.common import check_not_empty, internal_error_guard

TOOL = "model_transform"


# ---- command line ----------------------------------------------------------------------------------------


def build_parser(prog: str = TOOL) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="Convert an ONNX model to a top-dialect .mlir and check it layer by layer against onnxruntime.",
    )
    p.add_argument("--model_name", default=None, help="model name (default: the model file's stem)")
    p.add_argument("--model_def", required=True, help="the ONNX model file")
    p.add_argument("--input_shapes", default=None, help="input shapes, like [[1,3,224,224],[1,10]]")
    p.add_argument(
        "--input_types", default=None, help="input types, like float32,int32 (default: the model's)"
    )
    p.add_argument("--output_names", default=None, help="comma-separated tensors to use as the outputs")
    p.add_argument("--mean", default=None, help="per-channel mean, like 123.675,116.28,103.53")
    p.add_argument("--scale", default=None, help="per-channel scale, like 0.0171,0.0175,0.0174")
    p.add_argument(
        "--pixel_format",
        default=None,
        choices=("rgb", "bgr", "gray", "rgba"),
        help="image channel order the model expects (default bgr)",
    )
    p.add_argument(
        "--channel_format", default=None, choices=("nchw", "nhwc", "none"), help="input layout (default nchw)"
    )
    p.add_argument(
        "--resize_dims", default=None, help="resize images to h,w before cropping (default: input h,w)"
    )
    p.add_argument(
        "--keep_aspect_ratio", action="store_true", help="resize keeping the aspect ratio, pad the rest"
    )
    p.add_argument("--pad_value", type=int, default=0, help="padding value with --keep_aspect_ratio")
    p.add_argument(
        "--test_input", default=None, help="test input: .npz, or one image/.npy per input (comma-separated)"
    )
    p.add_argument(
        "--test_result", default=None, help="where to save Lamina's tensors (default <name>_top_outputs.npz)"
    )
    p.add_argument(
        "--tolerance",
        default=None,
        help="minimum cosine,euclidean similarity (default 0.99,0.99; 0.90,0.80 for a full-integer "
        "TFLite model, compared with LiteRT's int8 execution)",
    )
    p.add_argument("--excepts", default=None, help="comma-separated tensor names not to compare")
    p.add_argument("--mlir", default=None, help="output .mlir (default <name>.mlir)")
    p.add_argument("--debug", action="store_true", help="print every compared tensor and step timings")
    return p


def options_from_args(a: argparse.Namespace) -> TransformOptions:
    check_not_empty(
        ("--model_name", a.model_name),
        ("--input_shapes", a.input_shapes),
        ("--input_types", a.input_types),
        ("--output_names", a.output_names),
        ("--test_input", a.test_input),
        ("--test_result", a.test_result),
        ("--excepts", a.excepts),
        ("--mlir", a.mlir),
    )
    try:
        tol = parse_tolerance(a.tolerance) if a.tolerance is not None else None
    except ValueError as e:
        raise ToolError(str(e)) from None
    return TransformOptions(
        model_def=a.model_def,
        model_name=a.model_name,
        input_shapes=parse_shapes(a.input_shapes) if a.input_shapes is not None else None,
        input_types=parse_dtypes(a.input_types),
        output_names=parse_names(a.output_names),
        mean=parse_floats(a.mean, "--mean"),
        scale=parse_floats(a.scale, "--scale"),
        pixel_format=a.pixel_format,
        channel_format=a.channel_format,
        resize_dims=parse_ints(a.resize_dims, "--resize_dims"),
        keep_aspect_ratio=a.keep_aspect_ratio,
        pad_value=a.pad_value,
        test_input=a.test_input,
        test_result=a.test_result,
        tolerance=tol,
        excepts=parse_names(a.excepts),
        mlir=a.mlir,
        debug=a.debug,
    )


def _run(a: argparse.Namespace, tool: str) -> int:
    from lamina.tools.npz_tool import print_report

    try:
        o = options_from_args(a)
        res = transform(o)
    except ToolError as e:
        print(f"{tool}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"{tool}: error: {e.strerror or e}: {getattr(e, 'filename', '') or ''}", file=sys.stderr)
        return 1
    if o.debug:
        print("# timings: " + ", ".join(f"{k} {v * 1000:.1f} ms" for k, v in res.timings.items()))
    if res.report is None:
        return 0
    print_report(res.report, 1 if o.debug else 0)
    if not res.report.passed:
        failed = res.report.failed
        if not res.report.results:
            print(
                f"{tool}: error: no tensor in common between {res.result_npz} and {res.ref_npz}",
                file=sys.stderr,
            )
        else:
            names = ", ".join(f"'{r.name}' ({r.verdict})" for r in failed[:20])
            more = f" and {len(failed) - 20} more" if len(failed) > 20 else ""
            print(
                f"{tool}: error: {len(failed)} tensor(s) outside tolerance "
                f"{res.report.tolerance[0]},{res.report.tolerance[1]}: {names}{more}",
                file=sys.stderr,
            )
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return internal_error_guard(TOOL, lambda: _run(build_parser().parse_args(argv), TOOL))


def transform_main(argv: Sequence[str] | None = None) -> int:
    """``lamina transform ...``"""
    return internal_error_guard(
        "lamina transform",
        lambda: _run(build_parser("lamina transform").parse_args(argv), "lamina transform"),
    )


if __name__ == "__main__":
    sys.exit(main())

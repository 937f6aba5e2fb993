"""``model_tool``: what a ``.lamina`` model file holds, as TPU-MLIR's ``model_tool`` shows a bmodel.

    model_tool --info M.lamina     # format version, target, chip, IO, subnets, memory
    model_tool --chip M.lamina     # the chip name alone
    lamina info M.lamina           # the same as --info

The file is read and checked whole (:func:`lamina.targets.container.read_model`): a truncated,
corrupted or foreign file is one message and exit status 1.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TextIO

from lamina.support.errors import ToolError
from lamina.targets.container import Model, TensorDesc, read_model
from lamina.tools.common import check_not_empty, internal_error_guard

TOOL = "model_tool"
RULE = "=" * 42

#: Section kinds counted as instructions (``weights`` are weights; activations are ``activation_bytes``).
INSTRUCTION_KINDS = ("commands", "cpu_subnet", "object", "llvm_ir")


def _number(v: float) -> str:
    return f"{v:g}"


def tensor_line(t: TensorDesc, output: bool) -> str:
    """``input: x, [1, 3, 224, 224], int8, scale: 0.0187, zero_point: 0`` (TPU-MLIR's spelling)."""
    kind = "output" if output else "input"
    shape = "[" + ", ".join(map(str, t.shape)) + "]" if t.shape else "[ ]"
    return f"{kind}: {t.name}, {shape}, {t.dtype}, scale: {_number(t.scale)}, zero_point: {t.zero_point}"


def print_info(model: Model, out: TextIO) -> None:
    """TPU-MLIR's ``--info`` layout: version, chip and creation time, the net's IO, its subnets, and
    the memory it needs split into weight, instruction and activation (runtime) bytes."""
    meta = model.metadata
    print(f"lamina model version: {model.version[0]}.{model.version[1]}", file=out)
    print(f"target: {model.target}", file=out)
    print(f"chip: {model.chip}", file=out)
    for key, label in (("created", "create time"), ("lamina_version", "lamina version")):
        if key in meta:
            print(f"{label}: {meta[key]}", file=out)
    print(RULE, file=out)
    print(f"net: [{model.name}]  static", file=out)
    for t in model.inputs:
        print(tensor_line(t, False), file=out)
    for t in model.outputs:
        print(tensor_line(t, True), file=out)
    print("------------", file=out)
    print(f"subnet number: {len(model.subnets)}", file=out)
    sizes = {s.name: s.size for s in model.sections}
    for i, s in enumerate(model.subnets):
        cmds = ", ".join(f"{e} {n}" for e, n in s.commands.items()) or "-"
        print(
            f"subnet {i}: [{s.name}] {s.kind}, section '{s.section}' ({sizes[s.section]} bytes), "
            f"commands: {cmds}",
            file=out,
        )
        if s.inputs or s.outputs:
            print(
                f"    inputs: {', '.join(s.inputs) or '-'}; outputs: {', '.join(s.outputs) or '-'}", file=out
            )
    print(file=out)
    weight = model.bytes_of("weights")
    instruct = model.bytes_of(*INSTRUCTION_KINDS)
    runtime = model.activation_bytes
    print(
        f"device mem size: {weight + instruct + runtime} "
        f"(weight: {weight}, instruct: {instruct}, runtime: {runtime})",
        file=out,
    )


def _read(path: str) -> Model:
    check_not_empty(("the model file", path))
    return read_model(path)


def info_main(argv: Sequence[str] | None = None) -> int:
    """``lamina info M.lamina``: ``model_tool --info``."""
    p = argparse.ArgumentParser(prog="lamina info", description="Show what a .lamina model file holds.")
    p.add_argument("model", help="the .lamina file")
    args = p.parse_args(argv)
    return _run(lambda: print_info(_read(args.model), sys.stdout), "lamina info")


def _run(fn: Callable[[], None], tool: str = TOOL) -> int:
    def body() -> int:
        try:
            fn()
        except ToolError as e:
            print(f"{tool}: error: {e}", file=sys.stderr)
            return 1
        return 0

    return internal_error_guard(tool, body)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=TOOL, description="Show what a .lamina model file holds.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--info", metavar="MODEL", help="show the model's chip, IO, subnets and memory")
    g.add_argument("--chip", metavar="MODEL", help="show the model's chip")
    args = p.parse_args(argv)
    if args.info is not None:
        return _run(lambda: print_info(_read(args.info), sys.stdout))
    return _run(lambda: print(_read(args.chip).chip))


if __name__ == "__main__":
    sys.exit(main())

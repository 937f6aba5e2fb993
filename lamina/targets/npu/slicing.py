"""Slicing rules of the TIU commands: for a region of a command's output, the fields of the command
that computes exactly that region and the region of every tensor field it reads — the layer-group
planner's backward slice propagation (conv and pool halos, whole reduction dims, per-channel
parameter slices).

A **region** is four ``(start, stop)`` pairs over ``(n, c, h, w)``. :func:`slice_command` takes a
record class, its scalar fields, the full 4-d shapes of all its tensor fields and an output region;
it returns the sliced command's fields (conv / pool pads of the slice, a grouped conv's group count)
and the region of every tensor field (``output`` included, as given). Running the sliced command on
those regions of its inputs gives exactly that region of the whole command's output
(``tests/targets/npu/test_slicing.py`` checks it bit for bit on random commands and regions).

:func:`divisible` says whether an output dim can be split at all (reduced dims, softmax and
layer-norm dims cannot: they are read whole) and :func:`split_step` the granularity a split must
respect (a grouped conv's channels split at group boundaries). Inputs read whole whatever the
region — a conv's input channels, a matmul's ``K``, attention keys — show as full ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lamina.support.errors import LaminaError

from . import isa
from .kernels import reduce_axes
from .tiu import window_slice

__all__ = ["SLICE_RULES", "Region", "divisible", "slice_command", "split_step"]

Region = tuple[tuple[int, int], ...]
Shape4 = tuple[int, int, int, int]
Fields = Mapping[str, Any]
Shapes = Mapping[str, Shape4]


def _whole(shape: Shape4) -> Region:
    return tuple((0, d) for d in shape)


def _bad(cls: type, why: str) -> LaminaError:
    return LaminaError(f"slicing {cls.__name__}: {why}")


def _fixed_dims(cls: type[isa.TiuCommand], fields: Fields, shapes: Shapes | None = None) -> set[int]:
    """Output dims a command must compute whole."""
    if cls is isa.Reduce:
        return set(reduce_axes(int(fields["axes"])))
    if cls is isa.Softmax:
        return {int(fields["axis"])}
    if cls is isa.LayerNorm:
        return set(range(int(fields["axis"]), 4))
    if cls is isa.MatMul:
        return {2}
    return set()


def divisible(cls: type[isa.TiuCommand], fields: Fields, dim: int) -> bool:
    """Whether the output of a ``cls`` command can be split along 4-d dim ``dim`` (0..3) into
    commands that each compute a part: not a Reduce's reduced dims, a Softmax's axis, a
    LayerNorm's normalized dims, nor a MatMul's ``h`` (always 1)."""
    if not 0 <= dim < 4:
        raise ValueError(f"dim {dim} is not one of (n, c, h, w)")
    return dim not in _fixed_dims(cls, fields)


def split_step(cls: type[isa.TiuCommand], fields: Fields, shapes: Shapes, dim: int) -> int:
    """The step slice boundaries along output dim ``dim`` must be multiples of: 0 when the dim
    cannot be split (:func:`divisible`), ``Cout / groups`` for the channels of a grouped (not
    depthwise) convolution, else 1."""
    if not divisible(cls, fields, dim):
        return 0
    if cls in (isa.Conv, isa.Depthwise) and dim == 1:
        groups = int(fields["groups"])
        return shapes["output"][1] // groups if groups > 1 else 1
    return 1


def _window(
    cls: type, lo: int, hi: int, size: int, k: int, s: int, d: int, pad_begin: int, axis: str
) -> tuple[tuple[int, int], int, int]:
    a, b, pl, ph = window_slice(lo, hi, size, k, s, d, pad_begin)
    if a >= b:
        raise _bad(cls, f"output {axis} [{lo}, {hi}) reads only padding (no input {axis} of its own)")
    return (a, b), pl, ph


def _conv(cls: type, f: Fields, shapes: Shapes, out: Region) -> tuple[dict[str, Any], dict[str, Region]]:
    _, cin, h, w = shapes["input"]
    cout = shapes["output"][1]
    groups = int(f["groups"])
    mg, cg = cout // groups, cin // groups
    (n0, n1), (c0, c1), (h0, h1), (w0, w1) = out
    if groups == 1:
        cin_r, g2 = (0, cin), 1
    else:
        if c0 % mg or c1 % mg:
            raise _bad(cls, f"output channels [{c0}, {c1}) do not start and end on a group of {mg}")
        cin_r, g2 = (c0 // mg * cg, c1 // mg * cg), (c1 - c0) // mg
    hr, pt, pb = _window(
        cls, h0, h1, h, int(f["kh"]), int(f["stride_h"]), int(f["dilation_h"]), int(f["pad_top"]), "rows"
    )
    wr, pl, pr = _window(
        cls, w0, w1, w, int(f["kw"]), int(f["stride_w"]), int(f["dilation_w"]), int(f["pad_left"]), "columns"
    )
    fields = {**f, "groups": g2, "pad_top": pt, "pad_bottom": pb, "pad_left": pl, "pad_right": pr}
    regions: dict[str, Region] = {"input": ((n0, n1), cin_r, hr, wr)}
    ws = shapes["weight"]
    regions["weight"] = ((0, 1), (c0, c1), (0, ws[2]), (0, ws[3]))
    for name in ("bias", "quant"):
        if name in shapes:
            regions[name] = ((0, 1), (c0, c1), (0, 1), (0, shapes[name][3]))
    return fields, regions


def _pool(cls: type, f: Fields, shapes: Shapes, out: Region) -> tuple[dict[str, Any], dict[str, Region]]:
    _, _, h, w = shapes["input"]
    (n0, n1), (c0, c1), (h0, h1), (w0, w1) = out
    hr, pt, ph = _window(
        cls, h0, h1, h, int(f["kh"]), int(f["stride_h"]), int(f["dilation_h"]), int(f["pad_top"]), "rows"
    )
    wr, pl, pw = _window(
        cls, w0, w1, w, int(f["kw"]), int(f["stride_w"]), int(f["dilation_w"]), int(f["pad_left"]), "columns"
    )
    # the rows past the input's end: the explicit end padding first, then ceil mode's extra
    pb, pr = min(ph, int(f["pad_bottom"])), min(pw, int(f["pad_right"]))
    fields = {
        **f,
        "pad_top": pt,
        "pad_bottom": pb,
        "ceil_extra_h": ph - pb,
        "pad_left": pl,
        "pad_right": pr,
        "ceil_extra_w": pw - pr,
    }
    return fields, {"input": ((n0, n1), (c0, c1), hr, wr)}


def _matmul(cls: type, f: Fields, shapes: Shapes, out: Region) -> tuple[dict[str, Any], dict[str, Region]]:
    (n0, n1), (c0, c1), _, (w0, w1) = out
    k = shapes["left"][3]
    rb = (n0, n1) if shapes["right"][0] > 1 else (0, 1)
    right = (rb, (w0, w1), (0, 1), (0, k)) if f["right_transpose"] else (rb, (0, k), (0, 1), (w0, w1))
    regions: dict[str, Region] = {"left": ((n0, n1), (c0, c1), (0, 1), (0, k)), "right": right}
    for name in ("bias", "quant"):
        if name in shapes:
            regions[name] = ((0, 1), (w0, w1), (0, 1), (0, shapes[name][3]))
    return dict(f), regions


def _like_output(shape: Shape4, out: Region) -> Region:
    """An operand broadcast to the output: the output's region, (0, 1) where it is 1."""
    return tuple((0, 1) if d == 1 else r for d, r in zip(shape, out))


def _quant_along(shapes: Shapes, out: Region, axis: int) -> Region:
    return ((0, 1), out[axis], (0, 1), (0, shapes["quant"][3]))


def _eltwise(cls: type, f: Fields, shapes: Shapes, out: Region) -> tuple[dict[str, Any], dict[str, Region]]:
    regions: dict[str, Region] = {}
    for name in cls.TENSORS:  # type: ignore[attr-defined]
        if name == "output" or name not in shapes:
            continue
        if name == "quant":
            regions[name] = _quant_along(shapes, out, int(f["quant_axis"]))
        elif name == "table":
            regions[name] = _whole(shapes[name])
        else:
            regions[name] = _like_output(shapes[name], out)
    return dict(f), regions


def _permute(cls: type, f: Fields, shapes: Shapes, out: Region) -> tuple[dict[str, Any], dict[str, Region]]:
    order = [int(o) for o in f["order"]]
    r: list[tuple[int, int]] = [(0, 1)] * 4
    for i, src in enumerate(order):
        r[src] = out[i]
    return dict(f), {"input": tuple(r)}


def _reduce(cls: type, f: Fields, shapes: Shapes, out: Region) -> tuple[dict[str, Any], dict[str, Region]]:
    axes = set(reduce_axes(int(f["axes"])))
    x = shapes["input"]
    return dict(f), {"input": tuple((0, x[i]) if i in axes else out[i] for i in range(4))}


def _layer_norm(
    cls: type, f: Fields, shapes: Shapes, out: Region
) -> tuple[dict[str, Any], dict[str, Region]]:
    axis = int(f["axis"])
    regions: dict[str, Region] = {"input": out}
    for name in ("gamma", "beta"):
        if name in shapes:
            regions[name] = tuple((0, 1) if i < axis else out[i] for i in range(4))
    return dict(f), regions


def _attention(cls: type, f: Fields, shapes: Shapes, out: Region) -> tuple[dict[str, Any], dict[str, Region]]:
    (n0, n1), (c0, c1), (h0, h1), (w0, w1) = out
    d, keys = shapes["query"][3], shapes["key"][2]
    regions: dict[str, Region] = {
        "query": ((n0, n1), (c0, c1), (h0, h1), (0, d)),
        "key": ((n0, n1), (c0, c1), (0, keys), (0, d)),
        "value": ((n0, n1), (c0, c1), (0, keys), (w0, w1)),
    }
    if "mask" in shapes:
        ms = shapes["mask"]
        regions["mask"] = _like_output(ms, ((n0, n1), (c0, c1), (h0, h1), (0, keys)))
    return dict(f), regions


_RULES: dict[
    type[isa.TiuCommand], Callable[[type, Fields, Shapes, Region], tuple[dict[str, Any], dict[str, Region]]]
] = {
    isa.Conv: _conv,
    isa.Depthwise: _conv,
    isa.MatMul: _matmul,
    isa.Eltwise: _eltwise,
    isa.Requant: _eltwise,
    isa.Cast: _eltwise,
    isa.Lut: _eltwise,
    isa.Lut16: _eltwise,
    isa.Active: _eltwise,
    isa.Pool: _pool,
    isa.Permute: _permute,
    isa.Reduce: _reduce,
    isa.Softmax: _eltwise,
    isa.LayerNorm: _layer_norm,
    isa.Attention: _attention,
}

#: each command's slicing rule in words (docs/npu-isa.md's tables)
SLICE_RULES: dict[type[isa.TiuCommand], str] = {
    isa.Conv: (
        "any n, h, w range (input rows/columns with the halo of `tiu.window_slice`, the slice's own pads); "
        "c: any range with `groups` 1 (input channels read whole), else whole groups (`groups` of the slice)"
    ),
    isa.Depthwise: "any range of n, c, h, w (input channels = output channels; h/w halos and pads as Conv)",
    isa.MatMul: "n (B), c (M rows), w (N columns, with `bias` / `quant` rows); `K` read whole",
    isa.Eltwise: "any range; `a`/`b` the same range, (0, 1) where they broadcast; `quant` along `quant_axis`",
    isa.Requant: "any range; `quant` along `quant_axis`",
    isa.Cast: "any range; `quant` along `quant_axis`",
    isa.Lut: "any range; the table whole",
    isa.Lut16: "any range; the table whole",
    isa.Active: "any range",
    isa.Pool: "any range; h/w halos, pads and ceil-mode extras of the slice (explicit end pads first)",
    isa.Permute: "any range; the input's dim `order[i]` takes the output's range of dim `i`",
    isa.Reduce: "kept dims any range; reduced dims whole (read whole, output 1)",
    isa.Softmax: "any range but `axis` (whole)",
    isa.LayerNorm: "dims before `axis` any range; dims `axis..3` whole; `gamma`/`beta` follow",
    isa.Attention: "n (B), c (H), h (M query rows), w (Dv); keys read whole",
}


def slice_command(
    cls: type[isa.TiuCommand], fields: Fields, shapes: Shapes, out: Region
) -> tuple[dict[str, Any], dict[str, Region]]:
    """The fields of the ``cls`` command computing exactly region ``out`` of its output, and the
    region of every tensor field it reads (plus ``output``: ``out``) — see the module docstring.
    ``shapes`` holds the full 4-d shape of every present tensor field. A LaminaError for a region
    outside the output, empty, or splitting a dim the command computes whole."""
    rule = _RULES.get(cls)
    if rule is None:
        raise _bad(cls, "no slicing rule (not a TIU command)")
    if "output" not in shapes:
        raise _bad(cls, "the output's shape is needed")
    full = shapes["output"]
    if len(out) != 4 or any(len(r) != 2 for r in out):
        raise _bad(cls, f"a region is 4 (start, stop) pairs over (n, c, h, w), got {out!r}")
    region = tuple((int(a), int(b)) for a, b in out)
    for i, ((a, b), d) in enumerate(zip(region, full)):
        if not 0 <= a < b <= d:
            raise _bad(cls, f"dim {'nchw'[i]} range [{a}, {b}) is empty or outside the output's {d}")
    for i in _fixed_dims(cls, fields):
        if region[i] != (0, full[i]):
            raise _bad(
                cls, f"dim {'nchw'[i]} is computed whole; got [{region[i][0]}, {region[i][1]}) of {full[i]}"
            )
    new_fields, regions = rule(cls, fields, shapes, region)
    regions["output"] = region
    return new_fields, regions

"""``model_deploy --export_lib``: a compiled CPU model as a C-ABI shared library and its header,
usable without Python where a system C compiler/linker (``cc``) is present.

``<prefix>.so`` holds the model's machine code (the objects of the file's ``object`` section), its packed weights
(embedded read-only, 4096-aligned) and two functions; ``<prefix>.h`` declares them and describes the
inputs and outputs::

    size_t <name>_arena_bytes(int64_t nthreads);          /* the activation arena's size */
    void   <name>_run(void *arena, void **io, int64_t tid, int64_t nthreads);

``arena``: 64-byte aligned, ``<name>_arena_bytes(nthreads)`` bytes, one per concurrent run; ``io``:
the model's input buffers then its output buffers (row-major, in the storage types the header
names: a quantized tensor as its integers, with its scale and zero point). One thread calls
``<name>_run(arena, io, 0, 1)``; ``n`` threads each call it with their ``tid`` at once (they share the kernels' parts
and wait for each other where the model's kernels depend on each other). A model with ops left to the reference executor (which needs Python) is
refused, naming them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from typing import Any

from lamina.support.errors import LaminaError, ToolError
from lamina.support.fileio import atomic_output

from .objects import unpack_objects

__all__ = ["export_library"]

_CTYPES = {
    "float32": "float",
    "float64": "double",
    "float16": "uint16_t /* IEEE half */",
    "bfloat16": "uint16_t /* bfloat16 */",
    "int8": "int8_t",
    "uint8": "uint8_t",
    "int16": "int16_t",
    "uint16": "uint16_t",
    "int32": "int32_t",
    "uint32": "uint32_t",
    "int64": "int64_t",
    "uint64": "uint64_t",
    "bool": "uint8_t /* bool */",
}


def c_name(name: str) -> str:
    """``name`` as a C identifier (other characters become ``_``; a leading digit gets ``m``)."""
    s = re.sub(r"[^0-9A-Za-z_]", "_", name) or "model"
    return "m" + s if s[0].isdigit() else s


def _header(model: Any, name: str) -> str:
    guard = f"LAMINA_{name.upper()}_H"
    lines = [
        f"/* {name}: a Lamina CPU model compiled for {model.chip} ({model.metadata['cpu']['triple']}). */",
        f"#ifndef {guard}",
        f"#define {guard}",
        "#include <stddef.h>",
        "#include <stdint.h>",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"#define {name.upper()}_NUM_INPUTS {len(model.inputs)}",
        f"#define {name.upper()}_NUM_OUTPUTS {len(model.outputs)}",
        "/* io[] holds the inputs, then the outputs, in this order: */",
    ]
    for kind, ts in (("input", model.inputs), ("output", model.outputs)):
        for t in ts:
            q = f", real = {t.scale!r} * (q - {t.zero_point})" if t.scale != 1.0 or t.zero_point != 0 else ""
            lines.append(
                f"/*   {kind} '{t.name}': {_CTYPES[t.dtype]} [{' x '.join(map(str, t.shape)) or 'scalar'}]{q} */"
            )
    lines += [
        "",
        "/* Bytes of the 64-byte aligned activation arena a run with nthreads threads needs. */",
        f"size_t {name}_arena_bytes(int64_t nthreads);",
        "/* Run the model: one thread (tid 0, nthreads 1), or nthreads threads at once, each its tid. */",
        f"void {name}_run(void *arena, void **io, int64_t tid, int64_t nthreads);",
        "",
        "#ifdef __cplusplus",
        "}",
        "#endif",
        f"#endif /* {guard} */",
        "",
    ]
    return "\n".join(lines)


def export_library(model: Any, prefix: str) -> tuple[str, str]:
    """Write ``<prefix>.so`` and ``<prefix>.h`` for a compiled CPU ``model`` (a
    :class:`~lamina.targets.container.Model`); returns their paths. A :class:`ToolError` when the
    model needs Python (reference kernels) or no C compiler is found."""
    refs = model.metadata.get("reference") or {}
    if refs:
        ops = sorted({r.get("op", "?") for r in refs.values()})
        raise ToolError(
            f"--export_lib: {len(refs)} kernel(s) run through the reference executor ({', '.join(ops)}), "
            "which needs Python; a C library cannot run them"
        )
    cc = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise ToolError("--export_lib needs a C compiler and linker (cc, gcc or clang) on PATH")
    name = c_name(model.name)
    cpu = model.metadata["cpu"]
    arena, scratch = int(cpu["arena_bytes"]), int(cpu["scratch_bytes"])
    obj = next(s for s in model.sections if s.kind == "object")
    try:
        objs = unpack_objects(obj.data)
    except LaminaError as e:
        raise ToolError(f"--export_lib: section '{obj.name}': {e}") from None
    wsec = next((s for s in model.sections if s.kind == "weights"), None)
    so_path, h_path = prefix + ".so", prefix + ".h"
    header = _header(model, name)
    with tempfile.TemporaryDirectory(prefix="lamina-lib-") as d:
        obj_paths = []
        for i, o in enumerate(objs):
            obj_paths.append(os.path.join(d, f"model{i}.o"))
            with open(obj_paths[-1], "wb") as f:
                f.write(o)
        wpath = os.path.join(d, "weights.bin")
        with open(wpath, "wb") as f:
            f.write(bytes(wsec.data) if wsec is not None and wsec.size else b"\0" * 64)
        with open(os.path.join(d, f"{name}.h"), "w", encoding="utf-8") as f:
            f.write(header)
        src = f"""#include "{name}.h"
extern void model_run(char *arena, const char *weights, char **io, int64_t tid, int64_t nthreads);
__asm__(".section .rodata\\n.balign 4096\\n.hidden lamina_weights_{name}\\n.globl lamina_weights_{name}\\n"
        "lamina_weights_{name}:\\n.incbin \\"{wpath}\\"\\n.previous\\n");
extern const char lamina_weights_{name}[];
size_t {name}_arena_bytes(int64_t nthreads) {{ return (size_t){arena} + (size_t)nthreads * {scratch} + 64; }}
void {name}_run(void *arena, void **io, int64_t tid, int64_t nthreads) {{
    model_run((char *)arena, lamina_weights_{name}, (char **)io, tid, nthreads);
}}
"""
        with open(os.path.join(d, "lib.c"), "w", encoding="utf-8") as f:
            f.write(src)
        vs = os.path.join(d, "exports.map")  # only the two functions leave the library
        with open(vs, "w", encoding="utf-8") as f:
            f.write(f"{{ global: {name}_arena_bytes; {name}_run; local: *; }};\n")
        with atomic_output(so_path, suffix=".so") as tmp:
            cmd = [
                cc,
                "-shared",
                "-fPIC",
                "-O2",
                "-o",
                tmp,
                os.path.join(d, "lib.c"),
                *obj_paths,
                f"-Wl,--version-script={vs}",
                "-lm",
            ]
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=d)
            if p.returncode != 0:
                raise ToolError(
                    f"--export_lib: {os.path.basename(cc)} failed: {(p.stderr or p.stdout).strip()[:2000]}"
                )
        with atomic_output(h_path, suffix=".h") as tmp, open(tmp, "w", encoding="utf-8") as f:
            f.write(header)
    return so_path, h_path

"""The disk cache of the CPU compiler's LLVM step (``lamina/targets/cpu/cache.py``, used by
``jit.ModuleCompiler``, one entry per module): a hit gives the bytes compiling gives; the key holds
the module's text, the CPU's features and the settings; entries that do not check (flipped byte,
truncated, another magic, not an ELF object) are removed and the module compiled again; invalid IR
is never stored; an unwritable cache is skipped; pruning keeps the size bound, least recently used first;
the environment switches it off or moves it; a whole compile of a small model through the
target reports the hit and writes the same file."""

from __future__ import annotations

import os
import time
from pathlib import Path

import llvmlite.ir as ir
import pytest

from lamina.support.errors import LaminaError
from lamina.targets.cpu import cache as cache_mod
from lamina.targets.cpu import jit
from lamina.targets.cpu.cache import MAGIC, LlvmCache, default_cache


def _module(name: str, k: int) -> str:
    """A module with one function ``name`` adding ``k`` to its argument, in a loop (so O3 has work)."""
    m = ir.Module(name)
    i64 = ir.IntType(64)
    f = ir.Function(m, ir.FunctionType(i64, [i64]), name)
    b = ir.IRBuilder(f.append_basic_block("entry"))
    acc = f.args[0]
    for j in range(4):
        acc = b.add(b.mul(acc, ir.Constant(i64, k + j)), ir.Constant(i64, j))
    b.ret(acc)
    return str(m)


TEXTS = [_module("f_a", 3), _module("f_b", 5)]


def _entries(c: LlvmCache) -> list[Path]:
    return sorted(p for p in Path(c.root).rglob("*.obj"))


def _compile(texts: list[str], spec: jit.CpuSpec, c: LlvmCache | None = None) -> list[bytes]:
    return jit.compile_modules(texts, spec, c, jobs=2)


def test_hit_is_the_compiled_bytes(tmp_path: Path) -> None:
    spec = jit.host_spec()
    c = LlvmCache(str(tmp_path / "c"))
    plain = _compile(TEXTS, spec)
    first = _compile(TEXTS, spec, c)
    assert c.hits == 0 and len(_entries(c)) == 2  # one per module
    second = _compile(TEXTS, spec, c)
    assert c.hits == 2
    assert first == second == plain
    code = jit.LoadedCode(second, spec)
    assert code.function("f_a") and code.function("f_b")
    # a module met before in another list: its entry
    third = _compile([TEXTS[1], _module("f_c", 7)], spec, c)
    assert c.hits == 3 and third[0] == plain[1] and len(_entries(c)) == 3


def test_key_holds_texts_order_and_features(tmp_path: Path) -> None:
    spec = jit.host_spec()
    c = LlvmCache(str(tmp_path / "c"))
    layout = str(jit.target_machine(spec).target_data)
    k = jit.object_key(c, TEXTS, spec, layout)
    assert k == jit.object_key(c, list(TEXTS), spec, layout)
    assert k != jit.object_key(c, TEXTS[::-1], spec, layout)
    assert k != jit.object_key(c, [TEXTS[0], TEXTS[1] + " "], spec, layout)
    assert k != jit.object_key(c, [TEXTS[0] + TEXTS[1]], spec, layout)
    other = jit.CpuSpec(spec.triple, spec.cpu, spec.features + ",-fake")
    assert k != jit.object_key(c, TEXTS, other, layout)
    assert k != jit.object_key(c, TEXTS, jit.CpuSpec(spec.triple, "generic", spec.features), layout)
    # a narrower ISA compiles to its own entries
    _compile(TEXTS, spec, c)
    _compile(TEXTS, jit.spec_for("sse"), c)
    assert c.hits == 0 and len(_entries(c)) == 4


def _corrupt_flip(p: Path) -> None:
    raw = bytearray(p.read_bytes())
    raw[-10] ^= 0xFF
    p.write_bytes(bytes(raw))


def _corrupt_truncate(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: len(MAGIC) + 40])


def _corrupt_magic(p: Path) -> None:
    p.write_bytes(b"XXXXXXXX" + p.read_bytes()[len(MAGIC) :])


@pytest.mark.parametrize("corrupt", [_corrupt_flip, _corrupt_truncate, _corrupt_magic])
def test_corrupt_entry_is_removed_and_compiled_again(tmp_path: Path, corrupt: object) -> None:
    spec = jit.host_spec()
    c = LlvmCache(str(tmp_path / "c"))
    want = _compile(TEXTS, spec, c)
    p = _entries(c)[0]
    corrupt(p)  # type: ignore[operator]
    assert _compile(TEXTS, spec, c) == want
    assert c.hits == 1  # the other module's entry
    assert len(_entries(c)) == 2  # written again, valid
    assert _compile(TEXTS, spec, c) == want and c.hits == 3


def test_entry_that_is_not_an_object_is_ignored(tmp_path: Path) -> None:
    spec = jit.host_spec()
    c = LlvmCache(str(tmp_path / "c"))
    key = jit.object_key(c, TEXTS[:1], spec, str(jit.target_machine(spec).target_data))
    junk = b"not an ELF object at all, but a payload whose digest checks"
    c.put(key, "obj", junk)
    c.put(key, "obj", junk)  # a rewrite is atomic
    assert c.get(key, "obj") is not None
    want = _compile(TEXTS[:1], spec)
    assert _compile(TEXTS[:1], spec, c) == want
    assert c.hits == 0
    c.put(key, "obj", want[0][:100])  # an ELF header whose sections lie past the entry
    assert _compile(TEXTS[:1], spec, c) == want and c.hits == 0


def test_invalid_ir_is_not_stored(tmp_path: Path) -> None:
    c = LlvmCache(str(tmp_path / "c"))
    bad = TEXTS[0].replace("ret i64", "ret i32")
    spec = jit.host_spec()
    with pytest.raises(LaminaError, match="LLVM IR is invalid"):
        jit.compile_modules([bad], spec, c, jobs=1)
    assert _entries(c) == []
    with pytest.raises(LaminaError, match="LLVM IR is invalid"):
        _compile([bad, TEXTS[1]], spec, c)
    bad_key = jit.object_key(c, [bad], spec, str(jit.target_machine(spec).target_data))
    assert c.get(bad_key, "obj") is None


def test_unwritable_cache_is_skipped(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache's directory would be")
    c = LlvmCache(str(blocker / "c"))
    spec = jit.host_spec()
    assert _compile(TEXTS, spec, c) == _compile(TEXTS, spec)
    assert _compile(TEXTS, spec, c) == _compile(TEXTS, spec) and c.hits == 0


def test_prune_keeps_the_bound_least_recently_used_first(tmp_path: Path) -> None:
    c = LlvmCache(str(tmp_path / "c"), limit_bytes=3000)
    keys = [c.key("obj", ["ctx"], bytes([i])) for i in range(4)]
    for i, k in enumerate(keys):
        c.put(k, "obj", bytes(1000))
        p = Path(c._path(k, "obj"))
        os.utime(p, (1000.0 + i, 1000.0 + i))
    assert c.get(keys[0], "obj") is not None  # used now: the newest
    stale = Path(c._path(keys[1], "obj")).parent / ".lamina-stale"
    stale.write_bytes(b"x")
    old = time.time() - cache_mod.STALE_TMP_SECONDS - 10
    os.utime(stale, (old, old))
    fresh = Path(c._path(keys[1], "obj")).parent / ".lamina-writing"
    fresh.write_bytes(b"x")
    c.prune()
    left = [k for k in keys if c.get(k, "obj") is not None]
    assert left == [keys[0], keys[3]]  # 2 x ~1040 bytes under 3000; keys 1 and 2 were the oldest
    assert not stale.exists() and fresh.exists()


def test_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path / "x"))
    monkeypatch.delenv("LAMINA_CACHE", raising=False)
    c = default_cache()
    assert c is not None and c.root == str(tmp_path / "x" / "cpu-llvm")
    for off in ("off", "0", "False", "no"):
        monkeypatch.setenv("LAMINA_CACHE", off)
        assert default_cache() is None
    monkeypatch.setenv("LAMINA_CACHE", "on")
    monkeypatch.delenv("LAMINA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    c = default_cache()
    assert c is not None and c.root == str(tmp_path / "xdg" / "lamina" / "cpu-llvm")


def test_compile_of_a_model_reports_the_hit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_runtime import TOP  # the small INT8 model of the runtime tests

    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.quant.deploy import deploy_module
    from lamina.targets.base import CompileOptions
    from lamina.targets.cpu import target

    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("LAMINA_CACHE", raising=False)
    tpu = deploy_module(parse_module(TOP, Context()), "INT8")
    opts = CompileOptions(name="small", mode="INT8")
    runs = [target().compile(tpu, opts) for _ in range(2)]
    assert "from the cache" not in runs[0].report[0]
    assert "machine code from the cache" in runs[1].report[0]
    monkeypatch.setenv("LAMINA_CACHE", "off")
    runs.append(target().compile(tpu, opts))
    assert "from the cache" not in runs[2].report[0]

    def sections(r: object) -> dict[str, bytes]:
        return {s.name: bytes(s.data) for s in r.model.sections}  # type: ignore[attr-defined]

    assert sections(runs[0]) == sections(runs[1]) == sections(runs[2])


def test_recompiling_a_file_for_this_cpu_reads_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json
    from dataclasses import replace

    import numpy as np
    from test_runtime import TOP

    import lamina.runtime as rt
    from lamina.ir.context import Context
    from lamina.ir.parser import parse_module
    from lamina.quant.deploy import deploy_module
    from lamina.targets.base import CompileOptions
    from lamina.targets.container import write_model
    from lamina.targets.cpu import target

    monkeypatch.setenv("LAMINA_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.delenv("LAMINA_CACHE", raising=False)
    if {"amx-tile", "amx-int8"} <= jit.host_spec().enabled:
        pytest.skip("this CPU has AMX: no recorded feature is missing")
    monkeypatch.setenv("LAMINA_CACHE", "off")  # the compile leaves nothing in the cache
    res = target().compile(
        deploy_module(parse_module(TOP, Context()), "INT8"), CompileOptions(name="small", mode="INT8")
    )
    monkeypatch.delenv("LAMINA_CACHE")
    meta = json.loads(json.dumps(res.model.metadata))
    meta["cpu"]["features"] += ",+amx-tile,+amx-int8"  # recorded features this CPU lacks
    p = tmp_path / "m.lamina"
    write_model(p, replace(res.model, metadata=meta))
    calls = []
    real = jit.optimize
    monkeypatch.setattr(jit, "optimize", lambda mod, tm, **kw: (calls.append(1), real(mod, tm, **kw)))
    x = {"x": np.random.default_rng(0).uniform(-2, 2, (1, 4, 8, 8)).astype(np.float32)}
    outs, optimized = [], []
    for _ in range(2):
        n = len(calls)
        m = rt.load(p)
        assert m.recompiled
        outs.append(next(iter(m.run(x).values())).tobytes())
        optimized.append(len(calls) - n)
    assert optimized[0] >= 1 and optimized[1] == 0  # the second load: from the cache
    assert outs[0] == outs[1]

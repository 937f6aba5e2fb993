"""The floors of docs/architecture.md, enforced: every import in ``lamina/`` (module-level and
function-local alike) goes to the same floor or below, and no two modules import each other, directly
or through others.

Each ``.py`` under ``lamina/`` is read with :mod:`ast`; every ``import x``, ``from x import y`` and
relative import is resolved to the module it names (``from lamina.ir import types`` is the module
``lamina.ir.types``; ``from lamina.ir import Operation`` is ``lamina.ir``). An import under
``if TYPE_CHECKING:`` does not count: it never runs. Two checks:

* **floors**: a module may import its own floor and the floors below it. Siblings on one floor
  (``dialects/tpu`` → ``dialects/top``) are allowed; within floor 2, ``lamina/execution`` may not import
  ``lamina/dialects`` (floor 3) any more than the rest of floor 2 may.
* **cycles**: the strongly connected components of the module graph; any component of more than one
  module is a cycle, reported with the imports that close it.

:data:`KNOWN` lists the accepted exceptions; the test fails when one of them no longer occurs, so
the list only shrinks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lamina"

#: Accepted exceptions: (importer, imported, why). An entry is an upward import (importer module →
#: imported module) or a cycle (the two modules of one import of it, importer first). The test fails
#: when an entry no longer occurs.
KNOWN: list[tuple[str, str, str]] = [
    # The IR core prints itself: ``str(type)`` and ``str(op)`` call the printer (a function-local
    # import), which is written against the core. One package, one floor; MLIR's Operation::print
    # lives in AsmPrinter.cpp the same way. A hook set by the printer would only hide the edge.
    ("lamina.ir.base", "lamina.ir.printer", "str() of a type or attribute"),
    ("lamina.ir.core", "lamina.ir.printer", "str() of an op"),
]

#: Package prefix → floor (docs/architecture.md). The longest matching prefix wins. ``lamina.flows``
#: is floor 7, below the commands and the API that are built on it.
FLOORS: dict[str, float] = {
    "lamina.support": 0,
    "lamina.compare": 0,
    "lamina.tasks": 0,
    "lamina.examples": 0,
    "lamina.ir": 1,
    "lamina.passes": 2,
    "lamina.rewrite": 2,
    "lamina.transforms": 2,
    "lamina.execution": 2,
    "lamina.dialects": 3,
    "lamina.frontends": 4,
    "lamina.quant": 5,
    "lamina.targets": 6,
    "lamina.flows": 7,
    "lamina.tools": 7.5,
    "lamina.api": 7.5,
    "lamina.runtime": 7.5,
}


@dataclass(frozen=True)
class Import:
    importer: str  # module name
    imported: str  # module name
    path: str  # file, relative to the repository
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _import_nodes(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, function bodies included, except those only run for type checkers."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The innermost existing module ``name`` or one of its parents names (None: not lamina's)."""
    while name and name.split(".")[0] == "lamina":
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    rel = str(path.relative_to(ROOT))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[Import] = []
    for node in _import_nodes(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                pkg = package.split(".")
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join(pkg + ([base] if base else []))
            # ``from pkg import sub`` imports the submodule ``pkg.sub`` when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        for t in targets:
            m = _resolve(t, modules)
            if m is not None and m != module:
                out.append(Import(module, m, rel, node.lineno))
    return out


def all_imports() -> list[Import]:
    modules = all_modules()
    out: list[Import] = []
    for name, path in modules.items():
        out.extend(imports_of(name, path, modules))
    return out


def floor_of(module: str) -> float:
    if module == "lamina":  # the package's own __init__ (empty)
        return 0
    best = ""
    for prefix in FLOORS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best):
            best = prefix
    if not best:
        raise KeyError(f"{module} has no floor: add its package to FLOORS (and docs/architecture.md)")
    return FLOORS[best]


def upward_imports(imports: list[Import]) -> list[Import]:
    return [i for i in imports if floor_of(i.imported) > floor_of(i.importer)]


def cycles(imports: list[Import]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative), sorted."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        graph.setdefault(i.importer, set()).add(i.imported)
        graph.setdefault(i.imported, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on_stack.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
            elif w not in index:
                index[w] = low[w] = counter
                counter += 1
                stack.append(w)
                on_stack.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on_stack:
                low[v] = min(low[v], index[w])
    return sorted(out)


def _matches(i: Import, importer: str, imported: str) -> bool:
    """``imported`` may name a package: any of its modules matches."""
    return i.importer == importer and (i.imported == imported or i.imported.startswith(imported + "."))


def _known(i: Import) -> bool:
    return any(_matches(i, a, b) for a, b, _ in KNOWN)


def _describe_cycle(comp: list[str], imports: list[Import]) -> str:
    inside = set(comp)
    first: dict[tuple[str, str], Import] = {}
    for i in imports:
        if i.importer in inside and i.imported in inside:
            first.setdefault((i.importer, i.imported), i)
    lines = [f"  {i.importer} -> {i.imported} ({i.where()})" for i in first.values()]
    return "cycle between " + ", ".join(comp) + ":\n" + "\n".join(lines)


# ---- the tests ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return all_imports()


def test_every_module_has_a_floor(imports: list[Import]) -> None:
    for name in all_modules():
        floor_of(name)


def test_no_upward_import(imports: list[Import]) -> None:
    bad = [i for i in upward_imports(imports) if not _known(i)]
    assert not bad, "imports of a higher floor (docs/architecture.md):\n" + "\n".join(
        f"  {i.where()}: {i.importer} (floor {floor_of(i.importer):g}) imports {i.imported} "
        f"(floor {floor_of(i.imported):g})"
        for i in bad
    )


def test_no_import_cycle(imports: list[Import]) -> None:
    bad = []
    for comp in cycles(imports):
        inside = set(comp)
        edges = [i for i in imports if i.importer in inside and i.imported in inside]
        # a cycle is known when removing the known imports breaks it
        rest = [i for i in edges if not _known(i)]
        if any(len(c) > 1 for c in cycles(rest)):
            bad.append(_describe_cycle(comp, imports))
    assert not bad, "import cycles:\n" + "\n".join(bad)


@pytest.mark.parametrize("importer,imported,owner", KNOWN)
def test_known_violations_still_occur(
    imports: list[Import], importer: str, imported: str, owner: str
) -> None:
    """A fixed violation must leave KNOWN, so that it cannot come back unnoticed."""
    edges = [i for i in imports if _matches(i, importer, imported)]
    assert edges, f"{importer} no longer imports {imported} (fixed by helper {owner}): remove it from KNOWN"
    upward = any(floor_of(i.imported) > floor_of(i.importer) for i in edges)
    in_cycle = any(i.importer in c and i.imported in c for c in cycles(imports) for i in edges)
    assert upward or in_cycle, (
        f"{importer} -> {imported} is neither upward nor part of a cycle any more: remove it from KNOWN"
    )


# ---- the checker itself ---------------------------------------------------------------------------------


def _fake_tree(tmp: Path, files: dict[str, str]) -> dict[str, Path]:
    for rel, text in files.items():
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return {".".join(Path(rel).with_suffix("").parts).removesuffix(".__init__"): tmp / rel for rel in files}


def test_checker_finds_local_relative_and_skips_type_checking(tmp_path: Path) -> None:
    files = {
        "lamina/__init__.py": "",
        "lamina/ir/__init__.py": "",
        "lamina/ir/core.py": (
            "from typing import TYPE_CHECKING\n"
            "if TYPE_CHECKING:\n    from lamina.dialects import top\n"
            "def f():\n    from ..dialects.top import ops\n"
        ),
        "lamina/dialects/__init__.py": "",
        "lamina/dialects/top/__init__.py": "from . import ops\n",
        "lamina/dialects/top/ops.py": "import lamina.ir.core\nfrom lamina.ir import core, Thing\n",
    }
    modules = _fake_tree(tmp_path, files)
    got = {
        (i.importer, i.imported, i.line)
        for name, path in modules.items()
        for i in _imports_rooted(name, path, modules, tmp_path)
    }
    assert got == {
        ("lamina.ir.core", "lamina.dialects.top.ops", 5),
        ("lamina.dialects.top", "lamina.dialects.top.ops", 1),
        ("lamina.dialects.top.ops", "lamina.ir.core", 1),
        ("lamina.dialects.top.ops", "lamina.ir.core", 2),
        ("lamina.dialects.top.ops", "lamina.ir", 2),
    }
    imps = [Import(a, b, "x", n) for a, b, n in got]
    assert [(i.importer, i.imported) for i in upward_imports(imps)] == [
        ("lamina.ir.core", "lamina.dialects.top.ops")
    ]
    assert cycles(imps) == [["lamina.dialects.top.ops", "lamina.ir.core"]]


def _imports_rooted(name: str, path: Path, modules: dict[str, Path], root: Path) -> list[Import]:
    global ROOT
    saved, ROOT = ROOT, root
    try:
        return imports_of(name, path, modules)
    finally:
        ROOT = saved

"""The ``top`` canonicalization patterns as a registry: each pattern declares its root op class(es)
and every op's ``get_canonicalization_patterns`` is derived from those declarations (the rewrites
themselves are FileCheck-tested in tests/filecheck/top and numerically in test_transforms.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import lamina.dialects.top as top
from lamina.dialects.top.elementwise import AddOp, DropoutOp, MulOp
from lamina.dialects.top.transforms.const_fold import ConstantFoldPattern, foldable
from lamina.dialects.top.transforms.patterns import FAMILIES, TopPattern, registry
from lamina.dialects.top.transforms.patterns.common import pattern_roots
from lamina.ir.traits import NotALayer

ROOT = Path(__file__).resolve().parents[3]


def _labels(op_class: type) -> list[str]:
    return [p.debug_name for p in op_class.get_canonicalization_patterns()]


def test_every_pattern_is_registered_at_each_declared_root_and_nowhere_else() -> None:
    declared: dict[str, set[str]] = {}
    for family in FAMILIES:
        assert family.PATTERNS, family.__name__
        for cls in family.PATTERNS:
            assert issubclass(cls, TopPattern)
            for root in pattern_roots(cls):
                assert root.name in top.TOP.ops, (cls.__name__, root)
                declared.setdefault(root.name, set()).add(cls.__name__)
    found = {
        name: {p.debug_name for p in cls.get_canonicalization_patterns()} - {"ConstantFoldPattern"}
        for name, cls in top.TOP.ops.items()
    }
    assert {k: v for k, v in found.items() if v} == declared
    for name, factories in registry().items():
        for f in factories:
            assert f().root_name == name


def test_patterns_sharing_a_root_keep_their_order() -> None:
    # Same benefit (FuseGELU, FuseLayerNorm): the driver tries them in registration order.
    assert _labels(MulOp) == ["FuseGELU", "FuseSiLU", "FuseLayerNorm", "ConstantFoldPattern"]
    assert _labels(AddOp) == ["FuseBiasIntoMatMul", "FuseLayerNorm", "ConstantFoldPattern"]
    assert _labels(top.TOP.ops["top.Reshape"]) == [
        "RemoveIdentityLike",
        "MergeReshapes",
        "ReshapeConstantShape",
        "ConstantFoldPattern",
    ]


def test_fresh_instances_per_call() -> None:
    a, b = MulOp.get_canonicalization_patterns(), MulOp.get_canonicalization_patterns()
    assert all(x is not y for x, y in zip(a, b))


def test_constant_folding_skips_plumbing_regions_and_random_ops() -> None:
    for name, cls in top.TOP.ops.items():
        folds = any(isinstance(p, ConstantFoldPattern) for p in cls.get_canonicalization_patterns())
        assert folds == foldable(cls), name
        if NotALayer in cls.traits or cls.op_def.regions or cls is DropoutOp:
            assert not folds, name
    assert foldable(AddOp)


def test_the_ops_do_not_import_their_transforms() -> None:
    """``top/base.py`` (and every op module) sits below ``top/transforms``: no import upward, so
    the patterns register themselves for their root op classes (``register_canonicalization``)."""
    for path in (ROOT / "lamina" / "dialects" / "top").glob("*.py"):
        if path.name == "__init__.py":  # the dialect package wires its transforms in
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                assert "transforms" not in module, f"{path.name}: from {module} import ..."

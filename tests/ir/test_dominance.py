"""The one dominator tree (lamina/ir/dominance.py), as the verifier and CSE walk it."""

from __future__ import annotations

import lamina.dialects.cf
import lamina.dialects.func  # noqa: F401
from lamina.ir.context import Context
from lamina.ir.dominance import DominanceInfo
from lamina.ir.parser import parse_module

DIAMOND = """
func.func @f(%c: i1) {
  "cf.cond_br"(%c)[^a, ^b] <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (i1) -> ()
^a:
  "cf.br"()[^join] : () -> ()
^b:
  "cf.br"()[^join] : () -> ()
^join:
  "cf.br"()[^exit] : () -> ()
^exit:
  return
^dead:
  return
}
"""


def test_children_in_reverse_post_order() -> None:
    m = parse_module(DIAMOND, Context())
    assert m is not None
    f = next(o for o in m.walk_ops() if o.name == "func.func")
    region = f.regions[0]
    entry, a, b, join, exit_, dead = region.blocks
    dom = DominanceInfo(region)
    # Reverse post-order of a depth-first walk taking successors in order: entry, b, a, join, exit.
    assert dom.children(entry) == [b, a, join]
    assert dom.children(join) == [exit_]
    assert dom.children(a) == [] and dom.children(dead) == []
    assert dom.immediate_dominator(join) is entry and dom.dominates(entry, exit_)
    assert not dom.is_reachable(dead)

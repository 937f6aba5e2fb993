"""Pattern rewriting: patterns, the rewriter, the greedy driver and dialect conversion."""

from lamina.ir.constants import constant_value
from lamina.rewrite.conversion import (
    ConversionPattern,
    ConversionPatternRewriter,
    ConversionTarget,
    TypeConverter,
    apply_full_conversion,
    apply_partial_conversion,
)
from lamina.rewrite.greedy import (
    GreedyRewriteDriver,
    OperationFolder,
    apply_op_patterns,
    apply_patterns_greedily,
    erase_unreachable_blocks,
    is_trivially_dead,
    would_be_trivially_dead,
)
from lamina.rewrite.pattern import (
    FrozenPatternSet,
    FunctionPattern,
    PatternRewriter,
    RewritePattern,
    RewriterListener,
    pattern,
)

__all__ = [
    "ConversionPattern",
    "ConversionPatternRewriter",
    "ConversionTarget",
    "FrozenPatternSet",
    "FunctionPattern",
    "GreedyRewriteDriver",
    "OperationFolder",
    "PatternRewriter",
    "RewritePattern",
    "RewriterListener",
    "TypeConverter",
    "apply_full_conversion",
    "apply_op_patterns",
    "apply_partial_conversion",
    "apply_patterns_greedily",
    "constant_value",
    "erase_unreachable_blocks",
    "is_trivially_dead",
    "pattern",
    "would_be_trivially_dead",
]

"""The textual pass pipeline syntax (MLIR's)::

    builtin.module(func.func(canonicalize{max-iterations=4},cse),symbol-dce)
    any(cse)
    canonicalize,cse                 # bare: anchored on whatever op the pipeline runs on

An element is a pass name with optional ``{options}``, or an op name followed by a parenthesised
nested pipeline. Errors raise :class:`PipelineError` carrying the 1-based column in the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class PipelineError(ValueError):
    """A malformed or unknown pipeline; ``column`` is 1-based in ``pipeline``."""

    def __init__(self, message: str, pipeline: str = "", column: int = 0) -> None:
        super().__init__(message)
        self.message = message
        self.pipeline = pipeline
        self.column = column

    def __str__(self) -> str:
        if not self.pipeline:
            return self.message
        return f"{self.message}\n{self.pipeline}\n{' ' * max(self.column - 1, 0)}^"


@dataclass
class PipelineElement:
    name: str
    column: int
    options: str | None = None  # text between the braces
    options_column: int = 0
    nested: list[PipelineElement] | None = None  # set for op-anchored nested pipelines
    children_column: int = 0
    extra: list = field(default_factory=list)


_SPECIAL = ",(){}"


def parse_pipeline_text(text: str) -> list[PipelineElement]:
    """Parse ``text`` into a tree of elements (no pass lookup)."""
    pos = 0
    n = len(text)

    def err(msg: str, at: int) -> PipelineError:
        return PipelineError(msg, text, at + 1)

    def skip_ws() -> None:
        nonlocal pos
        while pos < n and text[pos].isspace():
            pos += 1

    def parse_list(depth: int, open_at: int) -> list[PipelineElement]:
        nonlocal pos
        elems: list[PipelineElement] = []
        while True:
            skip_ws()
            start = pos
            while pos < n and text[pos] not in _SPECIAL and not text[pos].isspace():
                pos += 1
            name = text[start:pos]
            if not name:
                if pos >= n and depth > 0:
                    raise err("encountered unbalanced parentheses while parsing pipeline", open_at)
                if pos < n and text[pos] == ")" and depth == 0:
                    raise err(
                        "encountered extra closing ')' creating unbalanced parentheses while parsing pipeline",
                        pos,
                    )
                raise err("expected a pass or op name in pipeline", start)
            el = PipelineElement(name, start + 1)
            skip_ws()
            if pos < n and text[pos] == "{":
                brace = pos
                pos += 1
                d = 1
                quote = ""
                while pos < n:
                    ch = text[pos]
                    if quote:
                        if ch == quote:
                            quote = ""
                    elif ch in "\"'":
                        quote = ch
                    elif ch == "{":
                        d += 1
                    elif ch == "}":
                        d -= 1
                        if d == 0:
                            break
                    pos += 1
                if pos >= n:
                    raise err("missing closing '}' while processing pass options", brace)
                el.options = text[brace + 1 : pos]
                el.options_column = brace + 2
                pos += 1
                skip_ws()
            if pos < n and text[pos] == "(":
                paren = pos
                pos += 1
                el.children_column = pos + 1
                skip_ws()
                if pos < n and text[pos] == ")":
                    el.nested = []
                else:
                    el.nested = parse_list(depth + 1, paren)
                skip_ws()
                if pos >= n or text[pos] != ")":
                    raise err("encountered unbalanced parentheses while parsing pipeline", paren)
                pos += 1
                skip_ws()
            elems.append(el)
            if pos >= n:
                if depth > 0:
                    raise err("encountered unbalanced parentheses while parsing pipeline", open_at)
                return elems
            ch = text[pos]
            if ch == ",":
                pos += 1
                continue
            if ch == ")":
                if depth == 0:
                    raise err(
                        "encountered extra closing ')' creating unbalanced parentheses while parsing pipeline",
                        pos,
                    )
                return elems
            raise err(f"unexpected '{ch}' in pipeline", pos)

    if not text.strip():
        return []
    return parse_list(0, 0)

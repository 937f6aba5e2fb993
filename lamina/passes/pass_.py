"""The :class:`Pass` base class, pass options and statistics.

A pass is a class::

    @register_pass
    class CSE(Pass):
        name = "cse"                      # the pipeline argument
        op_name = None                    # anchor op name, None: any op
        summary = "Eliminate common sub-expressions"
        num_cse = Statistic("num-cse'd", "Number of operations CSE'd")
        max_depth = Option(int, 4, "How deep to look")   # ``cse{max-depth=8}``

        def run_on_operation(self, op):
            ...
            self.num_cse += 1
            if bad:
                self.signal_failure()

Options are parsed from the textual pipeline (``name{key=value other=1,2}``); the pipeline name
of an option defaults to its Python name with ``_`` replaced by ``-``.
"""

from __future__ import annotations

import typing
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from lamina.ir.context import Context
    from lamina.ir.core import Operation


class PassOptionError(ValueError):
    """A pass option that does not exist or whose value cannot be parsed."""


_TRUE = {"true", "1", "on", "yes", ""}
_FALSE = {"false", "0", "off", "no"}


def _parse_scalar(typ: Any, text: str, choices: Sequence[str] | None) -> Any:
    text = text.strip()
    if (len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'") or (
        len(text) >= 2 and text[0] == "{" and text[-1] == "}"
    ):
        text = text[1:-1]
    if typ is bool:
        low = text.lower()
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise PassOptionError(f"'{text}' is not a valid boolean (expected true or false)")
    if typ is int:
        try:
            return int(text, 0)
        except ValueError:
            raise PassOptionError(f"'{text}' is not a valid integer") from None
    if typ is float:
        try:
            return float(text)
        except ValueError:
            raise PassOptionError(f"'{text}' is not a valid number") from None
    if choices is not None and text not in choices:
        raise PassOptionError(f"'{text}' is not one of {', '.join(choices)}")
    return text


def _split_list(text: str) -> list[str]:
    """Split ``a,b,{c,d}`` on top-level commas."""
    out: list[str] = []
    depth = 0
    cur: list[str] = []
    quote = ""
    for ch in text:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if cur or out:
        out.append("".join(cur))
    return [s for s in (x.strip() for x in out) if s]


def _format_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(_format_value(x) for x in v)
    s = str(v)
    if any(c in s for c in " ,{}()") and not (s.startswith("{") and s.endswith("}")):
        return "{" + s + "}"
    return s


class Option:
    """A pass option: ``Option(int, 10, "help")``, ``Option(list[int], [], ...)``,
    ``Option(str, "normal", ..., choices=("disabled", "normal", "aggressive"))``."""

    __slots__ = ("attr", "choices", "default", "elem_type", "help", "is_list", "name", "type")

    def __init__(
        self,
        type: Any,
        default: Any = None,
        help: str = "",
        *,
        name: str = "",
        choices: Sequence[str] | None = None,
    ) -> None:
        self.type = type
        self.default = default
        self.help = help
        self.name = name
        self.attr = ""
        self.choices = tuple(choices) if choices is not None else None
        origin = typing.get_origin(type)
        self.is_list = type is list or origin in (list, tuple, Sequence)
        args = typing.get_args(type)
        self.elem_type = args[0] if (self.is_list and args) else (str if self.is_list else type)

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr
        if not self.name:
            self.name = attr.replace("_", "-")

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        try:
            return obj._option_values[self.attr]
        except KeyError:
            d = self.default
            return list(d) if isinstance(d, list) else d

    def __set__(self, obj: Any, value: Any) -> None:
        obj._option_values[self.attr] = value

    def parse(self, text: str) -> Any:
        """The value of ``text`` (as written in a pipeline) for this option."""
        if self.is_list:
            t = text.strip()
            if len(t) >= 2 and t[0] == "{" and t[-1] == "}":
                t = t[1:-1]
            return [_parse_scalar(self.elem_type, x, self.choices) for x in _split_list(t)]
        return _parse_scalar(self.type, text, self.choices)

    @property
    def type_name(self) -> str:
        if self.is_list:
            return f"list<{getattr(self.elem_type, '__name__', str(self.elem_type))}>"
        if self.choices:
            return "|".join(self.choices)
        return getattr(self.type, "__name__", str(self.type))


class Statistic:
    """A named counter of a pass (``self.num_x += 1``), reported by the statistics instrumentation."""

    __slots__ = ("attr", "description", "name")

    def __init__(self, name: str = "", description: str = "") -> None:
        self.name = name
        self.description = description
        self.attr = ""

    def __set_name__(self, owner: type, attr: str) -> None:
        self.attr = attr
        if not self.name:
            self.name = attr.replace("_", "-")

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        return obj.statistics.get(self.name, 0)

    def __set__(self, obj: Any, value: int) -> None:
        obj.statistics[self.name] = value


class Pass:
    """Base of passes. Subclasses set ``name``, ``op_name``, ``summary`` and implement
    :meth:`run_on_operation`; see the module docstring."""

    #: The pipeline argument (``canonicalize``).
    name: ClassVar[str] = ""
    #: The op this pass is anchored on (``func.func``), or None for any op.
    op_name: ClassVar[str | None] = None
    #: One-line description (``--list-passes``).
    summary: ClassVar[str] = ""
    #: The name shown in IR dumps and timing reports (MLIR's ``getName()``); defaults to the class name.
    display_name: ClassVar[str] = ""

    _options: ClassVar[dict[str, Option]] = {}
    _statistics: ClassVar[dict[str, Statistic]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        opts: dict[str, Option] = {}
        stats: dict[str, Statistic] = {}
        for klass in reversed(cls.__mro__):
            for v in vars(klass).values():
                if isinstance(v, Option):
                    opts[v.name] = v
                elif isinstance(v, Statistic):
                    stats[v.name] = v
        cls._options = opts
        cls._statistics = stats
        if not cls.__dict__.get("display_name"):
            cls.display_name = cls.__name__

    def __init__(self, **options: Any) -> None:
        self._option_values: dict[str, Any] = {}
        self.statistics: dict[str, int] = {s.name: 0 for s in self._statistics.values()}
        self.context: Context | None = None
        self._failed = False
        self._op: Operation | None = None
        for key, value in options.items():
            opt = self._options.get(key) or self._options.get(key.replace("_", "-"))
            if opt is None:
                raise PassOptionError(f"no such option {key}")
            if isinstance(value, str) and (opt.type is not str or opt.is_list):
                value = opt.parse(value)
            setattr(self, opt.attr, value)

    # ---- options -------------------------------------------------------------------------

    @classmethod
    def options(cls) -> list[Option]:
        return list(cls._options.values())

    @classmethod
    def from_option_string(cls, text: str) -> Pass:
        """Instantiate from the text between the braces of ``name{...}``."""
        p = cls()
        for key, value in split_option_string(text):
            opt = cls._options.get(key)
            if opt is None:
                raise PassOptionError(f"no such option {key}")
            if value is None:
                if opt.type is not bool:
                    raise PassOptionError(f"option {key} needs a value ({key}=...)")
                setattr(p, opt.attr, True)
            else:
                setattr(p, opt.attr, opt.parse(value))
        return p

    def option_string(self) -> str:
        """``key=value`` pairs of every option, sorted by name (as MLIR prints them)."""
        parts = []
        for o in sorted(self._options.values(), key=lambda o: o.name):
            v = getattr(self, o.attr)
            if o.is_list and not v:
                continue  # MLIR omits empty list options
            parts.append(f"{o.name}={_format_value(v)}")
        return " ".join(parts)

    def pipeline_str(self) -> str:
        opts = self.option_string()
        return f"{self.name}{{{opts}}}" if opts else self.name

    # ---- running -------------------------------------------------------------------------

    def run_on_operation(self, op: Operation) -> bool | None:
        """Transform ``op``. Return False (or call :meth:`signal_failure`) to fail."""
        raise NotImplementedError

    def can_schedule_on(self, op: Operation) -> bool:
        return self.op_name is None or op.name == self.op_name

    def signal_failure(self) -> None:
        self._failed = True

    def get_operation(self) -> Operation:
        assert self._op is not None, "the pass is not running"
        return self._op

    def __repr__(self) -> str:
        return f"<pass {self.pipeline_str()}>"


def split_option_string(text: str) -> list[tuple[str, str | None]]:
    """``a=1 b={x y} c`` -> ``[("a", "1"), ("b", "{x y}"), ("c", None)]``."""
    out: list[tuple[str, str | None]] = []
    i, n = 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        j = i
        while j < n and not text[j].isspace() and text[j] != "=":
            j += 1
        key = text[i:j]
        if j < n and text[j] == "=":
            j += 1
            k = j
            depth = 0
            quote = ""
            while k < n:
                ch = text[k]
                if quote:
                    if ch == quote:
                        quote = ""
                elif ch in "\"'":
                    quote = ch
                elif ch in "{([":
                    depth += 1
                elif ch in "})]":
                    depth -= 1
                elif ch.isspace() and depth == 0:
                    break
                k += 1
            out.append((key, text[j:k]))
            i = k
        else:
            out.append((key, None))
            i = j
    return out

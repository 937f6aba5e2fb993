"""Arith dialect attributes: ``#arith.overflow<...>`` and ``#arith.fastmath<...>``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar

from lamina.ir.attributes import DialectAttribute


class _FlagsAttr(DialectAttribute):
    """A set of named flags printed ``<none>``, ``<a, b>`` (in declaration order)."""

    __slots__ = ("flags",)
    dialect: ClassVar[str] = "arith"
    FLAGS: ClassVar[tuple[str, ...]] = ()
    flags: tuple[str, ...]

    @classmethod
    def _key(cls, flags: Iterable[str] | str = ()) -> tuple:
        if isinstance(flags, str):
            flags = [f.strip() for f in flags.split(",") if f.strip()]
        fs = set(flags) - {"none"}
        bad = fs - set(cls.FLAGS) - set(getattr(cls, "ALIASES", {}))
        if bad:
            raise ValueError(f"unknown {cls.mnemonic} flag(s): {', '.join(sorted(bad))}")
        for alias, expansion in getattr(cls, "ALIASES", {}).items():
            if alias in fs:
                fs.discard(alias)
                fs.update(expansion)
        return (tuple(f for f in cls.FLAGS if f in fs),)

    def _init(self, flags: tuple) -> None:
        self._set(flags=flags)

    def _params(self) -> tuple:
        return (self.flags,)

    def __contains__(self, flag: str) -> bool:
        return flag in self.flags

    @property
    def is_none(self) -> bool:
        return not self.flags

    def print_body(self) -> str:
        return "<" + (", ".join(self.flags) if self.flags else "none") + ">"

    @classmethod
    def parse_body(cls, body: Any) -> _FlagsAttr:
        """Parse what follows the mnemonic (``<nsw, nuw>``): from a string, or from a
        :class:`lamina.ir.parser.Parser` positioned after the mnemonic."""
        if isinstance(body, str):
            body = body.strip()
            if body.startswith("<") and body.endswith(">"):
                body = body[1:-1]
            return cls(body)
        p = body
        p.expect("<")
        start = getattr(p, "pos", None)
        flags = [p.parse_keyword()]
        while p.parse_optional_comma():
            flags.append(p.parse_keyword())
        p.expect(">")
        try:
            return cls(flags)
        except ValueError as e:
            raise p.error(str(e), start) from None


class IntegerOverflowFlagsAttr(_FlagsAttr):
    """``#arith.overflow<none|nsw|nuw|nsw, nuw>``."""

    __slots__ = ()
    mnemonic: ClassVar[str] = "overflow"
    FLAGS: ClassVar[tuple[str, ...]] = ("nsw", "nuw")


_FASTMATH = ("reassoc", "nnan", "ninf", "nsz", "arcp", "contract", "afn")


class FastMathFlagsAttr(_FlagsAttr):
    """``#arith.fastmath<none|reassoc,nnan,...|fast>`` (all seven flags print as ``fast``)."""

    __slots__ = ()
    mnemonic: ClassVar[str] = "fastmath"
    FLAGS: ClassVar[tuple[str, ...]] = _FASTMATH
    ALIASES: ClassVar[dict[str, tuple[str, ...]]] = {"fast": _FASTMATH}

    def print_body(self) -> str:
        if len(self.flags) == len(_FASTMATH):
            return "<fast>"
        return "<" + (",".join(self.flags) if self.flags else "none") + ">"


OVERFLOW_NONE = IntegerOverflowFlagsAttr()
FASTMATH_NONE = FastMathFlagsAttr()

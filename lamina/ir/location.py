"""Source locations (MLIR's LocationAttr family). Every operation carries one."""

from __future__ import annotations

from collections.abc import Iterable

from lamina.ir.attributes import Attribute


class Location(Attribute):
    __slots__ = ()

    def file_line_col(self) -> FileLineColLoc | None:
        """The first ``file:line:col`` location inside this one, used when reporting."""
        return None


class UnknownLoc(Location):
    """``loc(unknown)``."""

    __slots__ = ()

    def _init(self) -> None:
        pass

    def _params(self) -> tuple:
        return ()


class FileLineColLoc(Location):
    """``loc("file.mlir":3:7)``."""

    __slots__ = ("filename", "line", "col")
    filename: str
    line: int
    col: int

    @classmethod
    def _key(cls, filename: str, line: int = 0, col: int = 0) -> tuple:
        return (filename, int(line), int(col))

    def _init(self, filename: str, line: int, col: int) -> None:
        self._set(filename=filename, line=line, col=col)

    def _params(self) -> tuple:
        return (self.filename, self.line, self.col)

    def file_line_col(self) -> FileLineColLoc | None:
        return self


class NameLoc(Location):
    """``loc("conv1")`` or ``loc("conv1"(child))``."""

    __slots__ = ("name", "child")
    name: str
    child: Location | None

    @classmethod
    def _key(cls, name: str, child: Location | None = None) -> tuple:
        if child is not None and type(child) is UnknownLoc:
            child = None
        return (name, child)

    def _init(self, name: str, child: Location | None) -> None:
        self._set(name=name, child=child)

    def _params(self) -> tuple:
        return (self.name, self.child)

    def file_line_col(self) -> FileLineColLoc | None:
        return self.child.file_line_col() if self.child is not None else None


class FusedLoc(Location):
    """``loc(fused["a", "b"])`` or ``loc(fused<metadata>[...])``."""

    __slots__ = ("locations", "metadata")
    locations: tuple[Location, ...]
    metadata: Attribute | None

    @classmethod
    def _key(cls, locations: Iterable[Location], metadata: Attribute | None = None) -> tuple:
        return (tuple(locations), metadata)

    def _init(self, locations: tuple, metadata: Attribute | None) -> None:
        self._set(locations=locations, metadata=metadata)

    def _params(self) -> tuple:
        return (self.locations, self.metadata)

    def file_line_col(self) -> FileLineColLoc | None:
        for loc in self.locations:
            f = loc.file_line_col()
            if f is not None:
                return f
        return None


class CallSiteLoc(Location):
    """``loc(callsite("callee" at "caller"))``."""

    __slots__ = ("callee", "caller")
    callee: Location
    caller: Location

    @classmethod
    def _key(cls, callee: Location, caller: Location) -> tuple:
        return (callee, caller)

    def _init(self, callee: Location, caller: Location) -> None:
        self._set(callee=callee, caller=caller)

    def _params(self) -> tuple:
        return (self.callee, self.caller)

    def file_line_col(self) -> FileLineColLoc | None:
        return self.callee.file_line_col() or self.caller.file_line_col()


def fuse(locations: Iterable[Location], metadata: Attribute | None = None) -> Location:
    """Fuse locations as MLIR's ``FusedLoc::get`` does: drop unknowns, flatten, dedupe."""
    out: list[Location] = []
    for loc in locations:
        items = loc.locations if isinstance(loc, FusedLoc) and loc.metadata is None else (loc,)
        for x in items:
            if not isinstance(x, UnknownLoc) and x not in out:
                out.append(x)
    if not out:
        return UnknownLoc()
    if len(out) == 1 and metadata is None:
        return out[0]
    return FusedLoc(out, metadata)

"""How much memory a value needs, and whether it can be allocated at all.

The interpreter checks every result of static type before it runs an op, so that a model whose
tensors cannot fit fails with one clear message instead of a ``MemoryError`` deep in numpy; the
importer and the ``top`` dialect ask the same questions. Floor 2: types only, no dialect.
"""

from __future__ import annotations

import math
import os

from lamina.ir.types import ShapedType, Type


def static_nbytes(t: Type) -> int | None:
    """Bytes a value of type ``t`` occupies (None where the shape is not static)."""
    if not (isinstance(t, ShapedType) and t.has_static_shape):
        return None
    width = getattr(t.element_type, "bitwidth", 0) or 8
    return math.prod(t.shape) * max(width // 8, 1)


def memory_limit() -> int:
    """The largest tensor Lamina allocates: the machine's available memory (physical when the
    available amount cannot be read)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 1 << 40


def format_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n}"


def size_error(t: Type, what: str, limit: int | None = None) -> str | None:
    """Why a value of type ``t`` cannot be allocated (larger than ``limit``, by default
    :func:`memory_limit`), naming it ``what``; None when it fits or its size is not static."""
    n = static_nbytes(t)
    if n is None or n < (1 << 28):
        return None
    limit = memory_limit() if limit is None else limit
    if n <= limit:
        return None
    return (
        f"{what} of type {t} needs {format_bytes(n)}, more than the {format_bytes(limit)} of memory available"
    )

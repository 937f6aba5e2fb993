"""Writing output files atomically: a failure never leaves a half-written file behind."""

from __future__ import annotations

import contextlib
import os
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from typing import Any


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


@contextlib.contextmanager
def atomic_output(path: str, suffix: str = "") -> Iterator[str]:
    """Yield a temporary path next to ``path``; on success it is renamed over ``path`` with the
    permissions a plainly created file would get (mkstemp's are 0600), on failure it is removed."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    fd, tmp = tempfile.mkstemp(prefix=".lamina-", suffix=suffix, dir=d)
    os.close(fd)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write(path: str, data: str | bytes) -> None:
    """Write ``data`` (text is UTF-8 encoded) to ``path`` atomically."""
    with atomic_output(path) as tmp, open(tmp, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def save_npz(path: str, arrays: Mapping[str, Any]) -> None:
    """Write ``arrays`` as an uncompressed ``.npz`` atomically. Any key is allowed (numpy's
    ``savez(**kw)`` rejects a few, like ``file``)."""
    import numpy as np

    with (
        atomic_output(path, suffix=".npz") as tmp,
        zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as zf,
    ):
        for k, v in arrays.items():
            with zf.open(k + ".npy", "w", force_zip64=True) as fh:
                np.lib.format.write_array(fh, np.asanyarray(v), allow_pickle=False)

"""A user's files written whole or not at all, and a full disk said in one line."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Callable


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object], what: str) -> Path:
    """Write ``path`` whole or not at all; returns it.

    ``write(tmp)`` fills a temporary file beside ``path`` (``NAME.tmp``), which then replaces it, so a reader
    never sees half a file. On an ``OSError`` (a full or read-only disk) the temporary file is removed and one
    ``OSError`` is raised that names ``path`` and says ``what`` was not written and whether a file there from
    before is unchanged."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        write(tmp)
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        before = "the file there from before is unchanged" if path.exists() else "nothing is left there"
        raise OSError(e.errno, f"{e.strerror or e}; {what} was not written ({before})", str(path)) from e
    return path

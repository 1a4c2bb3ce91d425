"""Writing a file whole or not at all: the new content in a scratch file beside it, renamed over it.

`scratch_beside(path, data)` writes the scratch file (0644) and returns it, for a caller that
renames it only once something else has succeeded (an import renames its suite file into place
after the bench's transaction commits); `replace_file(path, data)` renames it at once.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


def scratch_beside(path: Path, data: bytes) -> Path:
    """`data` in a new file (0644, made O_EXCL by mkstemp) in `path`'s folder; removed on failure."""
    fd, scratch = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(scratch, 0o644)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise
    return Path(scratch)


def replace_file(path: Path, data: bytes) -> None:
    """`path` holds `data`, or what it held before: never a part of either."""
    scratch = scratch_beside(path, data)
    try:
        os.replace(scratch, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(scratch)
        raise

"""Which runs are still alive: every process that records runs holds a lock, and a run names it.

A process that opens the history takes an exclusive `flock` on a file of its own
(`<history folder>/owners/<owner id>.lock`) and keeps it until it closes the store or dies; the
kernel releases it then, whatever killed the process (kill -9 included). The recorder writes that
owner id into each run it starts. When any stiva command opens the history, the runs still
"running" whose owner's lock can be taken (or whose lock file is gone) belong to a process that
is gone: they become `interrupted`, keeping the output they had. Process ids are not used: a pid
is reused, and a container sees other pids.

Where `fcntl` is missing (Windows), no owner is ever judged gone.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


class Ownership:
    """This process's lock on its runs, held from `take()` to `release()`."""

    def __init__(self, history: Path):
        self.folder = history.parent / "owners"
        self.id = uuid.uuid4().hex
        self._fd: int | None = None

    def take(self) -> None:
        if fcntl is None:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._path(self.id), os.O_RDWR | os.O_CREAT, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a read-only folder: runs are still recorded, only not judged later
            return
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.unlink(self._path(self.id))
        except OSError:
            pass
        os.close(fd)  # closing drops the lock

    def is_gone(self, owner: str | None) -> bool:
        """Whether the process that owned `owner`'s runs has ended (None: a run from before owners)."""
        if owner is None:
            return True
        if owner == self.id or fcntl is None:
            return False
        path = self._path(owner)
        try:
            fd = os.open(path, os.O_RDWR)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # held: its process is alive
        try:
            os.unlink(path)
        except OSError:
            pass
        finally:
            os.close(fd)
        return True

    def _path(self, owner: str) -> Path:
        return self.folder / f"{owner}.lock"

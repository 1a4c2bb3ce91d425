"""What an SQLite error means for the user: a full disk, a read-only history, a damaged file.

SQLite reports these through its result codes, and some only indirectly: a write past the file
size limit (`ulimit -f`) or into a full tmpfs comes back as a generic I/O error, and a WAL
database in a read-only folder as "unable to open database file" (its `-shm` file cannot be made).
`classify(exc, path, doing)` looks at the code and, for those indirect cases, at the file system
itself (free space, the file size limit, whether the file and its folder can be opened for
writing), and returns the `StoreError` whose one line says what happened and what to do.
"""

from __future__ import annotations

import errno
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .errors import CorruptError, DiskFullError, HistoryFault, ReadOnlyError, StoreError

if TYPE_CHECKING:
    import logging

__all__ = ["HistoryFaultsHeldBack", "classify", "no_room", "not_writable"]

# SQLite's primary result codes (the low byte of an extended code)
SQLITE_PERM = 3
SQLITE_READONLY = 8
SQLITE_IOERR = 10
SQLITE_CORRUPT = 11
SQLITE_FULL = 13
SQLITE_CANTOPEN = 14
SQLITE_CONSTRAINT = 19
SQLITE_NOTADB = 26

SQLITE_MAGIC = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file

LOW_SPACE_BYTES = 1 << 20  # below this much free space a failed write is put down to a full disk
_DENIED = {errno.EROFS, errno.EACCES, errno.EPERM}


def classify(exc: sqlite3.Error, path: Path, doing: str) -> StoreError:
    """The StoreError for `exc`, met while `doing` (e.g. "writing") the history at `path`."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == SQLITE_CORRUPT or (primary == SQLITE_NOTADB and _has_sqlite_header(path)):
        return corrupt(path, exc)  # an SQLite file whose header or pages are damaged
    if primary in (SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_READONLY, SQLITE_PERM):
        room = no_room(path) if primary in (SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN) else None
        if primary == SQLITE_FULL or room:
            return disk_full(path, room or "no space is left on the device")
        denied = not_writable(path)
        if denied or primary == SQLITE_READONLY:
            return read_only(path, denied or "SQLite opened it read-only")
    if primary == SQLITE_CONSTRAINT or isinstance(exc, sqlite3.IntegrityError):
        return StoreError(f"history database constraint failed: {exc}")
    return StoreError(f"history database {doing} failed: {exc}")


def disk_full(path: Path, why: str) -> DiskFullError:
    return DiskFullError(
        f"the disk is full: the history database {path} cannot be written — {why}; what was written "
        "before is kept: free some space and run the same command again"
    )


def read_only(path: Path, why: str) -> ReadOnlyError:
    return ReadOnlyError(
        f"the history database {path} is read-only ({why}): Stiva can read it (stiva history) but not "
        f"record there — make {path.parent} writable, or set STIVA_HOME to a writable folder"
    )


def corrupt(path: Path, exc: BaseException) -> CorruptError:
    return CorruptError(
        f"the history database {path} is damaged (SQLite: {exc}). Recover what it holds with SQLite's own "
        f"tool: sqlite3 {path} .recover | sqlite3 {path}.recovered — then move the recovered file in its "
        "place, keeping the damaged one until you have checked the copy"
    )


def not_a_database(path: Path, exc: BaseException) -> StoreError:
    """A file SQLite cannot read as a database at all (no SQLite header): someone else's file, or
    a history whose first page was overwritten. `.recover` cannot read such a file either, which
    the line says, so that a user who looks for the promised recovery knows where they stand."""
    return StoreError(
        f"{path} is not a Stiva history database (SQLite says: {exc}; sqlite3 {path} .recover cannot read "
        "it either): move it away (Stiva then starts a new history) or point Stiva at another file — it "
        "was left untouched"
    )


def _has_sqlite_header(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def no_room(path: Path) -> str | None:
    """Why nothing more can be written beside `path`, when that is the case: a (nearly) full file
    system, or the process's file size limit reached by the database or its WAL."""
    try:
        if shutil.disk_usage(path.parent).free < LOW_SPACE_BYTES:
            return "no space is left on the device"
    except OSError:
        pass
    try:
        import resource
    except ImportError:  # pragma: no cover - Windows
        return None
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft == resource.RLIM_INFINITY:
        return None
    biggest = 32 * 1024  # the -shm file SQLite must make before it reads a WAL database
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        try:
            biggest = max(biggest, (path.parent / name).stat().st_size)
        except OSError:
            continue
    if biggest + 64 * 1024 >= soft:
        return f"the file size limit (ulimit -f, {soft} bytes) is reached"
    return None


def not_writable(path: Path) -> str | None:
    """Why the database file or its folder cannot be written, when that is the case. Tried for
    real (an open for writing, a scratch file), not read off the mode bits: root ignores those,
    and a read-only mount or an immutable file refuses even root."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno in _DENIED:
            return _why(exc, "the file")
    else:
        os.close(fd)
    try:
        with tempfile.TemporaryFile(dir=path.parent, prefix=".stiva-probe-"):
            pass
    except OSError as exc:
        if exc.errno in _DENIED:
            return _why(exc, "its folder")
    return None


def _why(exc: OSError, what: str) -> str:
    if exc.errno == errno.EROFS:
        return "a read-only file system"
    return f"{what} cannot be written: {os.strerror(exc.errno) if exc.errno is not None else exc}"


class HistoryFaultsHeldBack:
    """While a bench runs, the log lines of a history fault (each failed write of each run says
    it) are held back: the bench stops at the first one and says it in one line at the end.
    `close()` (or the end of a `with` block) lets them through again.

    `every_error`: hold back every history failure (any StoreError a log line carries), not only
    the faults: `stiva ask` says the history's trouble in one line of its own. `fault` and `error`
    keep the first fault and the first failure held back."""

    def __init__(self, *, every_error: bool = False):
        import logging

        self.kind: type[StoreError] = StoreError if every_error else HistoryFault
        self.fault: HistoryFault | None = None
        self.error: StoreError | None = None
        self._filter = self.keep  # one object: removeFilter finds it again
        self.handlers = [logging.lastResort, *logging.getLogger().handlers]
        for handler in self.handlers:
            if handler is not None:
                handler.addFilter(self._filter)

    def keep(self, record: logging.LogRecord) -> bool:
        values: list[object] = list(record.args) if isinstance(record.args, tuple) else [record.args]
        if record.exc_info:
            values.append(record.exc_info[1])
        found = next((value for value in values if isinstance(value, self.kind)), None)
        if found is None:
            return True
        if self.error is None:
            self.error = found
        if self.fault is None and isinstance(found, HistoryFault):
            self.fault = found
        return False

    def close(self) -> None:
        for handler in self.handlers:
            if handler is not None:
                handler.removeFilter(self._filter)

    def __enter__(self) -> "HistoryFaultsHeldBack":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""The store's errors. A leaf module: every other store module raises these, so they cannot
live in `db.py` (which imports the job modules); `db.py` re-exports them."""

from __future__ import annotations


class StoreError(Exception):
    """The history database cannot be opened, read or written (the message says why)."""


class NotFoundError(StoreError, LookupError):
    """No conversation, run or compare session with that id."""


class HistoryFault(StoreError):
    """The file itself cannot take writes: every later write would fail the same way, so a long
    command (a bench) stops and says so in one line instead of losing what it measures. Found by
    `faults.classify`; a store keeps the first one it met as `Store.fault`."""

    summary = "the history cannot be written"  # a few words, for a note beside what still works


class DiskFullError(HistoryFault):
    """No room left to write the history (a full disk, or the file size limit `ulimit -f`)."""

    summary = "the disk is full"


class ReadOnlyError(HistoryFault):
    """The history is on a read-only file system, or its file or folder cannot be written."""

    summary = "the history is read-only"


class CorruptError(HistoryFault):
    """A page inside the history database is damaged (SQLite: "database disk image is malformed")."""

    summary = "the history database is damaged"


class BenchBusyError(StoreError):
    """The bench is being run by another live process (`pid`): a second one would ask, and pay
    for, every item again."""

    def __init__(self, message: str, pid: int | None = None):
        super().__init__(message)
        self.pid = pid

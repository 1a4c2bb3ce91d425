"""The store's two errors. A leaf module: every other store module raises these, so they cannot
live in `db.py` (which imports the job modules); `db.py` re-exports them."""

from __future__ import annotations


class StoreError(Exception):
    """The history database cannot be opened, read or written (the message says why)."""


class NotFoundError(StoreError, LookupError):
    """No conversation, run or compare session with that id."""

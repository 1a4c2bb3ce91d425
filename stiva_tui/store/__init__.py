"""SQLite history of conversations, runs (with full traces) and compare sessions."""

from .db import NotFoundError, Store, StoreError

__all__ = ["Store", "StoreError", "NotFoundError"]

"""What the parts of `Store` (traces.py, conversations.py, compare.py, benches.py) call on it.

Each part is a mixin whose methods run on the `Store` (db.py), which defines everything declared
here. The declarations are for the type checker only: a part's methods are checked against the
Store's API without importing db.py (which imports the parts), and the Store's own definitions are
checked against them in turn.
"""

from __future__ import annotations

import sqlite3
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..core.trace import Trace
    from .owners import Ownership
    from .writer import Work

__all__ = ["Params", "StorePart"]

# The parameters of one SQL statement: positional (?) or named (:name).
Params = tuple[Any, ...] | dict[str, Any]


class StorePart:
    """The base of each part of `Store`: nothing at run time."""

    if TYPE_CHECKING:
        owner: Ownership

        def query(self, sql: str, params: Params = ()) -> list[sqlite3.Row]: ...

        def query_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None: ...

        def snapshot(self) -> AbstractContextManager[None]: ...

        def transaction(self) -> AbstractContextManager[sqlite3.Connection]: ...

        def write_later(self, work: Work) -> None: ...

        def get_trace(self, run_id: str) -> Trace: ...

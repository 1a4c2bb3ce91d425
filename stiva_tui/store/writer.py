"""Group commit: queued writes, written together in one transaction.

The engine's recorder hands every event's rows to `Store.write_later`. A commit costs far more
than the statements in it (a WAL write each), and a run brings a dozen events: written one by
one, they were the largest part of what `stiva serve` added to a request. Work queued on an
event loop waits up to `GATHER_S` for more, then one callback on that loop writes everything
queued, each piece in its own SAVEPOINT, and commits once. Where no loop runs (a worker thread,
a script) a piece is written at once.

A writer thread was tried first: it kept the disk off the loop, but its Python work took the
GIL from the loop in the middle of requests, and at 16 concurrent requests the server got slower.

Every read and direct write of the store writes what is queued first (`flush`), so callers see
their writes as if they had been made at once. A piece that fails is rolled back alone; its
error is kept for `take_error()` (the recorder raises it on its next event, which the engine
reports to the other subscribers). Errors nobody takes are logged when the store closes.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections import deque
from typing import Callable

from .errors import StoreError

log = logging.getLogger(__name__)

Work = Callable[[sqlite3.Connection], None]
GATHER_S = 0.05  # how long work queued on an event loop may wait for more before it is written


class Writer:
    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock):
        self._conn = conn
        self._lock = lock  # the store's: held while writing
        self._queue: deque[Work] = deque()
        self._guard = threading.Lock()  # the queue and the timer
        self._timer: asyncio.TimerHandle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None
        self._errors: deque[StoreError] = deque(maxlen=32)
        self._closed = False

    def put(self, work: Work) -> None:
        """Queue `work(connection)`: written within `GATHER_S` on this thread's event loop, or at
        once where none runs. Raises StoreError once the writer is closed."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._guard:
            if self._closed:
                raise StoreError("the history database is closed")
            self._queue.append(work)
            if loop is not None and (self._timer is None or self._timer_loop is not loop):
                self._timer = loop.call_later(GATHER_S, self.flush)
                self._timer_loop = loop
        if loop is None:
            self.flush()

    def flush(self) -> None:
        """Write everything queued, now, in this thread."""
        with self._lock:
            with self._guard:
                batch = list(self._queue)
                self._queue.clear()
                # A timer still due only finds an empty queue; cancelling it from another thread
                # would not be safe.
                self._timer = self._timer_loop = None
            if batch:
                self._write(batch)

    def take_error(self) -> StoreError | None:
        """The oldest write error not yet taken, if any."""
        with self._guard:
            return self._errors.popleft() if self._errors else None

    def close(self) -> None:
        """Write what is queued; later `put`s raise StoreError."""
        self.flush()
        with self._guard:
            self._closed = True
            for error in self._errors:
                log.warning("a history write failed and nobody heard of it: %s", error)
            self._errors.clear()

    def _write(self, batch: list[Work]) -> None:
        try:
            self._conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self._failed(StoreError(f"cannot write the history database: {exc}"), len(batch))
            return
        for work in batch:
            self._conn.execute("SAVEPOINT piece")
            try:
                work(self._conn)
            except Exception as exc:  # noqa: BLE001 - one piece's fault never costs the others
                self._conn.execute("ROLLBACK TO piece")
                self._failed(_as_store_error(exc))
            finally:
                self._conn.execute("RELEASE piece")
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:
            self._conn.execute("ROLLBACK")
            self._failed(StoreError(f"history database write failed: {exc}"), len(batch))

    def _failed(self, error: StoreError, pieces: int = 1) -> None:
        log.warning("history write failed (%d piece%s lost): %s", pieces, "" if pieces == 1 else "s", error)
        with self._guard:
            self._errors.append(error)


def _as_store_error(exc: Exception) -> StoreError:
    if isinstance(exc, StoreError):
        return exc
    if isinstance(exc, sqlite3.IntegrityError):
        return StoreError(f"history database constraint failed: {exc}")
    if isinstance(exc, sqlite3.Error):
        return StoreError(f"history database write failed: {exc}")
    return StoreError(f"history write failed: {type(exc).__name__}: {exc}")

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
When SQLite ends the whole transaction itself (it does after a full disk, an I/O error, a damaged
page), every piece of the batch is counted lost, not only the one that failed; the first full
disk, read-only file or damaged page stays in `fault`.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections import deque
from collections.abc import Callable

from .errors import HistoryFault, StoreError

log = logging.getLogger(__name__)

Work = Callable[[sqlite3.Connection], None]
GATHER_S = 0.05  # how long work queued on an event loop may wait for more before it is written


Classify = Callable[[sqlite3.Error, str], StoreError]


class Writer:
    def __init__(self, conn: sqlite3.Connection, lock: threading.RLock, *, classify: Classify | None = None):
        self._conn = conn
        self._classify = classify or (lambda exc, doing: StoreError(f"history database {doing} failed: {exc}"))
        self.fault: HistoryFault | None = None  # the first full disk, read-only file or damaged page
        self.lost = 0  # pieces of work that failed to be written, since the writer was made
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
            self._failed(self._classify(exc, "write"), len(batch))
            return
        for work in batch:
            try:
                self._conn.execute("SAVEPOINT piece")
                work(self._conn)
                self._conn.execute("RELEASE piece")
            except Exception as exc:  # noqa: BLE001 - one piece's fault never costs the others
                error = self._as_store_error(exc)
                if not self._conn.in_transaction:  # SQLite ended the whole batch: all of it is lost
                    self._failed(error, len(batch))
                    return
                try:
                    self._conn.execute("ROLLBACK TO piece")
                    self._conn.execute("RELEASE piece")
                except sqlite3.Error:
                    self._rollback()
                    self._failed(error, len(batch))
                    return
                self._failed(error)
        try:
            self._conn.execute("COMMIT")
        except sqlite3.Error as exc:  # a full disk often shows only here, when the WAL grows
            self._rollback()
            self._failed(self._classify(exc, "write"), len(batch))

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def _failed(self, error: StoreError, pieces: int = 1) -> None:
        log.warning("history write failed (%d piece%s lost): %s", pieces, "" if pieces == 1 else "s", error)
        with self._guard:
            self.lost += pieces
            self._errors.append(error)
            if isinstance(error, HistoryFault) and self.fault is None:
                self.fault = error

    def _as_store_error(self, exc: Exception) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        if isinstance(exc, sqlite3.Error):
            return self._classify(exc, "write")
        return StoreError(f"history write failed: {type(exc).__name__}: {exc}")

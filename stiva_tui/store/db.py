"""Stiva's history: one SQLite file (WAL) holding conversations, runs with their traces, and votes.

`Store` is what callers hold. It owns the connection (open, close, transactions, reads) and is
composed of one mixin per job, each in its own module:

    traces.py         get_trace, list_runs, get_workflow, delete_run
    conversations.py  create/rename/delete/list/get conversations, add_message
    compare.py        compare sessions, entries, votes, leaderboard
    benches.py        bench runs and their graded items (`stiva bench`, resumable)
    part.py           their base: what they call on the Store, declared for the type checker

Mixins rather than separate objects (`store.traces.get_trace`): callers keep one flat, short API
(`store.get_trace(run_id)`), every job shares the one connection and lock without passing them
around, and each module still holds one job. The engine writes through `Recorder` (recorder.py),
an event subscriber over the same `Store`; the file's shape and its upgrades live in schema.py.

Methods are synchronous and short, so the async engine, the TUI, the CLI and the server call them
directly from the event loop or from worker threads: one connection (`check_same_thread=False`),
every statement under one lock. The recorder's writes go through `write_later` (writer.py), which
gathers them into few commits; every read and direct write writes what is queued first, so what
was written is always what is read. Keys never reach the store (events hold none); as a second guard,
error texts pass through `redact()` before they are written.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..keys import redact
from . import schema
from .benches import Benches
from .compare import CompareSessions
from .conversations import Conversations
from .errors import CorruptError, HistoryFault, NotFoundError, StoreError
from .faults import classify
from .owners import Ownership
from .part import Params
from .traces import Traces
from .writer import Work, Writer

__all__ = ["Store", "StoreError", "NotFoundError", "HistoryFault", "redact"]


class Store(Traces, Conversations, CompareSessions, Benches):
    """SQLite-backed history. Open with `Store.open()`; use as a context manager or call `close()`.
    Every method raises StoreError (or its NotFoundError) and nothing else from SQLite.

    A full disk, a read-only history or a damaged file raise a `HistoryFault` (DiskFullError,
    ReadOnlyError, CorruptError: faults.py) whose one line says so; the first one met, by any
    read or write, queued or not, stays in `fault`, so that a long command (a bench) stops at
    once instead of measuring what it can no longer keep."""

    def __init__(self, conn: sqlite3.Connection, path: Path, *, read_only: HistoryFault | None = None):
        """Use `Store.open()`; this wraps an already validated and upgraded connection.
        `read_only`: the connection only reads, and every write raises this fault's kind."""
        self._conn = conn
        self.path = path
        self._lock = threading.RLock()
        self._closed = False
        self.read_only = read_only
        self._fault: HistoryFault | None = read_only
        self._writer = Writer(conn, self._lock, classify=lambda exc, doing: self._error(exc, doing))
        self.owner = Ownership(path)  # this process's claim on the runs it records
        if read_only is None:
            self.owner.take()

    # --- opening and closing ------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path | None = None, *, reads_only: bool = False) -> "Store":
        """Open (creating it and its folder if needed) the database at `path`, default
        `paths.database_file()`, upgrading it to the current schema. A foreign or newer file
        raises StoreError and is left untouched; a full disk, a read-only history or a damaged
        file raise their HistoryFault.

        `reads_only`: the caller only reads (`stiva history`). Where the history cannot be
        written (a full disk, a read-only folder) it is opened read-only instead of refused: its
        `read_only` (and `fault`) says why, and writes raise that. A damaged file is still refused."""
        path = _resolve(path)
        try:
            conn = sqlite3.connect(str(path), timeout=10.0, check_same_thread=False, isolation_level=None)
        except sqlite3.Error as exc:
            raise classify(exc, path, "opening") from exc
        try:
            schema.check_file(conn, path)  # read-only: nothing is written to a file we refuse
            _tighten(path)
            _configure(conn, path)
            schema.upgrade(conn, path)
        except HistoryFault as fault:
            conn.close()
            if not reads_only or isinstance(fault, CorruptError):
                raise
            return cls._open_read_only(path, fault)
        except BaseException:
            conn.close()
            raise
        store = cls(conn, path)
        try:
            store.interrupt_orphaned_runs()
        except HistoryFault as fault:
            if not reads_only or isinstance(fault, CorruptError):
                store.close()
                raise
            store._fault = fault  # the sweep waits for a writable history; reading goes on
        return store

    @classmethod
    def _open_read_only(cls, path: Path, fault: HistoryFault) -> "Store":
        """The history opened only to read it, where it cannot be written. SQLite reads a WAL
        database read-only when its -wal and -shm files are there (`mode=ro`); where they cannot
        be made (a read-only folder, a full disk), the file is read as it was last checkpointed
        (`immutable=1`: Stiva checkpoints whenever it closes the history)."""
        uri = path.resolve().as_uri()
        last: BaseException = fault
        for query in ("mode=ro", "mode=ro&immutable=1"):
            try:
                conn = sqlite3.connect(
                    f"{uri}?{query}", uri=True, timeout=10.0, check_same_thread=False, isolation_level=None
                )
            except sqlite3.Error as exc:
                last = exc
                continue
            try:
                version = schema.check_file(conn, path)
                conn.execute("PRAGMA query_only = ON")
            except (sqlite3.Error, StoreError) as exc:
                conn.close()
                if isinstance(exc, CorruptError):
                    raise
                last = exc
                continue
            if version != schema.SCHEMA_VERSION:
                conn.close()
                raise type(fault)(
                    f"{fault} (and it needs an upgrade to schema version {schema.SCHEMA_VERSION}, "
                    "which cannot be written either)"
                )
            conn.create_function("stiva_fold", 1, _fold, deterministic=True)
            return cls(conn, path, read_only=fault)
        raise fault from last

    def close(self) -> None:
        """Write what is queued, close the connection (checkpointing the WAL); later calls raise
        StoreError. Idempotent."""
        self._writer.close()
        self.owner.release()
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self.read_only is None:
                try:
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                except sqlite3.Error:
                    pass  # another connection still reads: its checkpoint will do
            self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def fault(self) -> HistoryFault | None:
        """The first full disk, read-only history or damaged page met since the store opened
        (by a read, a write, or a queued write), or None."""
        return self._fault or self._writer.fault

    @property
    def lost_writes(self) -> int:
        """How many queued writes failed since the store opened (each was logged, and its error
        kept for `take_write_error()`)."""
        return self._writer.lost

    @property
    def schema_version(self) -> int:
        """The database's `PRAGMA user_version`."""
        version: int = self.query("PRAGMA user_version")[0][0]
        return version

    # --- low level (for the store's own modules) ----------------------------------------------

    def write_later(self, work: Work) -> None:
        """Queue `work(connection)`: written in order, in one transaction with whatever else is
        queued (see writer.py). Raises StoreError at once only when the store is closed; a
        failure while writing is kept for `take_write_error()`."""
        self._check_open()
        self._check_writable()
        self._writer.put(work)

    def take_write_error(self) -> StoreError | None:
        """The oldest failure of a queued write not yet taken (None when there is none)."""
        return self._writer.take_error()

    def wait_for_writes(self) -> None:
        """Write what is queued now; return once it is on disk (or has failed)."""
        self._writer.flush()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's lock, after the queued writes (so that they are seen)."""
        with self._lock:
            self._check_open()
            if not self._conn.in_transaction:  # not inside a snapshot or a transaction already
                self._writer.flush()
            yield

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (BEGIN IMMEDIATE): committed when the block ends, rolled back when
        it raises. SQLite errors come out as StoreError (a HistoryFault for a full disk, a
        read-only history or a damaged page), the commit's included."""
        with self._locked():
            self._check_open()
            self._check_writable()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise self._error(exc, "write") from exc
            try:
                yield self._conn
            except sqlite3.Error as exc:
                self._rollback()
                raise self._error(exc, "write") from exc
            except BaseException:
                self._rollback()
                raise
            try:
                self._conn.execute("COMMIT")
            except sqlite3.Error as exc:  # a full disk often shows only here, when the WAL grows
                self._rollback()
                raise self._error(exc, "write") from exc

    @contextmanager
    def snapshot(self) -> Iterator[None]:
        """Reads inside the block see one state of the file, even while other connections write
        (a read transaction). Nests; must not contain a `transaction()`."""
        with self._locked():
            self._check_open()
            if self._conn.in_transaction:
                yield
                return
            try:
                self._conn.execute("BEGIN DEFERRED")
            except sqlite3.Error as exc:
                raise self._error(exc, "read") from exc
            try:
                yield
            finally:
                try:
                    self._conn.execute("COMMIT")  # a read-only transaction: nothing to undo
                except sqlite3.Error:
                    self._rollback()

    def query(self, sql: str, params: Params = ()) -> list[sqlite3.Row]:
        """Run one read; rows are `sqlite3.Row` (by name or index)."""
        with self._locked():
            self._check_open()
            cur = self._conn.cursor()
            cur.row_factory = sqlite3.Row
            try:
                return cur.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise self._error(exc, "read") from exc

    def query_one(self, sql: str, params: Params = ()) -> sqlite3.Row | None:
        """The first row of a read, or None."""
        rows = self.query(sql, params)
        return rows[0] if rows else None

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the history database is closed")

    def _check_writable(self) -> None:
        if self.read_only is not None:
            raise type(self.read_only)(str(self.read_only))

    def _error(self, exc: sqlite3.Error, doing: str) -> StoreError:
        """The StoreError for `exc`; the first HistoryFault is kept as `fault`."""
        error = classify(exc, self.path, doing)
        if isinstance(error, HistoryFault) and self._fault is None:
            self._fault = error
        return error

    def _rollback(self) -> None:
        """End the transaction, if SQLite has not already (it rolls back by itself after some
        errors, a full disk among them)."""
        if self._conn.in_transaction:
            try:
                self._conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass


# --- opening helpers ------------------------------------------------------------------------------


def _resolve(path: str | Path | None) -> Path:
    """The database's path, its folder made and both private: a file Stiva creates 0600 (SQLite
    gives the -wal and -shm files beside it its mode), a folder Stiva creates 0700, as the keys
    file is. Stiva's own data folder is made private even where an older Stiva left it open; a
    folder the caller named (`Store.open(path)`) keeps its mode."""
    from ..paths import database_file, private_dir, private_file

    own = path is None
    path = Path(database_file() if path is None else path).expanduser()
    try:
        private_dir(path.parent, tighten=own)
    except OSError as exc:
        raise StoreError(f"cannot create the folder for the history database {path.parent}: {exc}") from exc
    if path.exists() and not path.is_file():
        raise StoreError(f"the history database path {path} exists but is not a file")
    private_file(path)
    return path


def _tighten(path: Path) -> None:
    """A history an older Stiva made with the umask's mode (0644): 0600 now, with its -wal and
    -shm files. Only once the file is known to be a Stiva history: another file is left as it was."""
    from ..paths import private_mode

    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        private_mode(path.parent / name)


def _configure(conn: sqlite3.Connection, path: Path) -> None:
    """WAL, foreign keys, a busy timeout, and the case-folding function the search uses."""
    try:
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.execute("PRAGMA foreign_keys = ON")
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":  # e.g. a network file system: keep working, just slower
            conn.execute("PRAGMA journal_mode = DELETE")
        conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.Error as exc:
        error = classify(exc, path, "set-up")
        if type(error) is StoreError:
            error = StoreError(f"cannot set up the history database {path}: {exc}")
        raise error from exc
    conn.create_function("stiva_fold", 1, _fold, deterministic=True)


def _fold(value: Any) -> str | None:
    return value.casefold() if isinstance(value, str) else None

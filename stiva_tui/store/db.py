"""Stiva's history: one SQLite file (WAL) holding conversations, runs, their traces and votes.

`Store` is the only class. Its methods are synchronous and short, so the async engine, the TUI,
the CLI and the server call them directly from the event loop or from worker threads (one
connection, `check_same_thread=False`, every statement under one lock).

The schema version lives in `PRAGMA user_version`; `MIGRATIONS[i]` upgrades version i to i+1 and
runs at open, each step in one transaction. A file that is not a Stiva database, or one written by
a newer Stiva, raises `StoreError` and is never modified. Before an existing database is upgraded a
copy is kept beside it (`<name>.bak-v<old version>`).

Keys never reach the store (events hold none); as a second guard, error texts are passed through
`redact()` before they are written.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

from ..engine import events as ev

__all__ = ["Store", "StoreError", "NotFoundError", "MIGRATIONS", "SCHEMA_VERSION", "APPLICATION_ID", "redact"]

APPLICATION_ID = 0x53544956  # "STIV" in PRAGMA application_id marks a Stiva database


class StoreError(Exception):
    """The history database cannot be opened or written (the message says why)."""


class NotFoundError(StoreError, LookupError):
    """No conversation, run or compare session with that id."""


# --- schema ---------------------------------------------------------------------------------------

_V1 = f"""
PRAGMA application_id = {APPLICATION_ID};

CREATE TABLE conversations (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL DEFAULT 'chat' CHECK (kind IN ('chat', 'compare', 'api')),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
CREATE INDEX conversations_updated ON conversations (updated_at);

CREATE TABLE runs (
    id                 TEXT PRIMARY KEY,
    conversation_id    TEXT REFERENCES conversations (id) ON DELETE SET NULL,
    question           TEXT NOT NULL DEFAULT '',
    mode               TEXT NOT NULL DEFAULT 'conductor' CHECK (mode IN ('conductor', 'direct', 'moa')),
    system             TEXT NOT NULL DEFAULT 'conductor',
    conductor_backend  TEXT,
    conductor_model    TEXT,
    status             TEXT NOT NULL DEFAULT 'running'
                       CHECK (status IN ('running', 'finished', 'failed', 'cancelled')),
    answer             TEXT,
    error              TEXT,
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    latency_s          REAL NOT NULL DEFAULT 0,
    estimated          INTEGER NOT NULL DEFAULT 0,
    created_at         TEXT NOT NULL,
    finished_at        TEXT,
    source             TEXT NOT NULL DEFAULT 'tui' CHECK (source IN ('tui', 'cli', 'api'))
);
CREATE INDEX runs_conversation ON runs (conversation_id, created_at);
CREATE INDEX runs_created ON runs (created_at);

-- run_id is a loose reference: a front end may write the message before the run row exists.
CREATE TABLE messages (
    id               INTEGER PRIMARY KEY,
    conversation_id  TEXT NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    seq              INTEGER NOT NULL,
    role             TEXT NOT NULL,
    content          TEXT NOT NULL,
    run_id           TEXT,
    created_at       TEXT NOT NULL,
    UNIQUE (conversation_id, seq)
);
CREATE INDEX messages_run ON messages (run_id);

CREATE TABLE rounds (
    run_id             TEXT NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    round              INTEGER NOT NULL,
    reasoning          TEXT NOT NULL DEFAULT '',
    workflow           TEXT,
    keep_previous      INTEGER NOT NULL DEFAULT 0,
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    latency_s          REAL NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, round)
);

CREATE TABLE steps (
    run_id             TEXT NOT NULL,
    round              INTEGER NOT NULL,
    idx                INTEGER NOT NULL,
    model              TEXT,
    subtask            TEXT NOT NULL DEFAULT '',
    access             TEXT NOT NULL DEFAULT '[]',
    status             TEXT NOT NULL DEFAULT 'waiting'
                       CHECK (status IN ('waiting', 'running', 'finished', 'failed')),
    output             TEXT NOT NULL DEFAULT '',
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    estimated          INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    latency_s          REAL NOT NULL DEFAULT 0,
    attempts           INTEGER NOT NULL DEFAULT 0,
    attempt_log        TEXT NOT NULL DEFAULT '[]',
    error              TEXT,
    PRIMARY KEY (run_id, round, idx),
    FOREIGN KEY (run_id, round) REFERENCES rounds (run_id, round) ON DELETE CASCADE
);

CREATE TABLE compare_sessions (
    id               TEXT PRIMARY KEY,
    conversation_id  TEXT REFERENCES conversations (id) ON DELETE SET NULL,
    question         TEXT NOT NULL,
    created_at       TEXT NOT NULL
);

-- run_id is a loose reference for the same reason as messages.run_id.
CREATE TABLE compare_entries (
    session_id  TEXT NOT NULL REFERENCES compare_sessions (id) ON DELETE CASCADE,
    system      TEXT NOT NULL,
    run_id      TEXT,
    PRIMARY KEY (session_id, system)
);
CREATE INDEX compare_entries_run ON compare_entries (run_id);

CREATE TABLE votes (
    session_id  TEXT PRIMARY KEY REFERENCES compare_sessions (id) ON DELETE CASCADE,
    winner      TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
"""

MIGRATIONS: list[str] = [_V1]
"""MIGRATIONS[i] takes a database from user_version i to i + 1. Append, never edit."""

SCHEMA_VERSION = len(MIGRATIONS)

_TABLES_V1 = {"conversations", "runs", "messages", "rounds", "steps", "compare_sessions", "compare_entries", "votes"}


# --- helpers --------------------------------------------------------------------------------------

_SECRETS = [
    re.compile(r"(?i)(?P<keep>bearer\s+)[A-Za-z0-9._~+/=\-]{8,}"),
    re.compile(
        r"(?i)(?P<keep>(?:api[_-]?key|x-api-key|x-goog-api-key|authorization|token)[\"']?\s*[:=]\s*[\"']?)"
        r"[A-Za-z0-9._~+/\-]{8,}"
    ),
    re.compile(r"\b(?:sk|pk|rk|gsk|xai)-[A-Za-z0-9_\-]{12,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-]{20,}"),
]


def redact(text: str | None) -> str | None:
    """Mask anything shaped like a credential in an error text (a second guard; keys never get here)."""
    if not text:
        return text
    for pattern in _SECRETS:
        text = pattern.sub(lambda m: (m.groupdict().get("keep") or "") + "[redacted]", text)
    return text


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _split_sql(script: str) -> list[str]:
    """Split a migration script into statements (each is complete per sqlite3.complete_statement)."""
    statements: list[str] = []
    buf = ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                statements.append(buf.strip())
            buf = ""
    if buf.strip() and not all(l.strip().startswith("--") or not l.strip() for l in buf.splitlines()):
        raise StoreError(f"incomplete SQL in a migration step: {buf.strip()[:80]!r}")
    return statements


def _fold(value: Any) -> str | None:
    return value.casefold() if isinstance(value, str) else None


def _usage(obj: Any) -> tuple[int, int, bool]:
    usage = getattr(obj, "usage", None)
    if usage is None:
        return 0, 0, False
    return int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0), bool(getattr(usage, "estimated", False))


# --- the store ------------------------------------------------------------------------------------


class Store:
    """SQLite-backed history. Open with `Store.open()`; use as a context manager or call `close()`."""

    def __init__(self, conn: sqlite3.Connection, path: Path):
        """Use `Store.open()`; this wraps an already validated and migrated connection."""
        self._conn = conn
        self.path = path
        self._lock = threading.RLock()
        self._closed = False

    # --- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, path: str | Path | None = None) -> "Store":
        """Open (creating if needed) the database at `path` (default `paths.database_file()`)."""
        if path is None:
            from ..paths import database_file

            path = database_file()
        path = Path(path).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create the folder for the history database {path.parent}: {exc}") from exc
        if path.exists() and not path.is_file():
            raise StoreError(f"the history database path {path} exists but is not a file")
        try:
            conn = sqlite3.connect(
                str(path), timeout=10.0, check_same_thread=False, isolation_level=None
            )
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the history database {path}: {exc}") from exc
        try:
            cls._prepare(conn, path)
        except BaseException:
            conn.close()
            raise
        return cls(conn, path)

    @staticmethod
    def _prepare(conn: sqlite3.Connection, path: Path) -> None:
        """Validate the file, then switch on WAL and foreign keys and run pending upgrade steps."""
        # Read-only checks first: nothing is written to a file we refuse.
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            app_id = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {
                r[0]
                for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
                )
            }
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"{path} is not a Stiva history database (SQLite says: {exc}); "
                "move it away or point Stiva at another file — it was left untouched"
            ) from exc
        _check_identity(path, version, app_id, tables)
        try:
            conn.execute("PRAGMA busy_timeout = 10000")
            conn.execute("PRAGMA foreign_keys = ON")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":  # e.g. a network file system: keep working, just slower
                conn.execute("PRAGMA journal_mode = DELETE")
            conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot set up the history database {path}: {exc}") from exc
        conn.create_function("stiva_fold", 1, _fold, deterministic=True)
        if version < SCHEMA_VERSION:
            _migrate(conn, path, version)

    def close(self) -> None:
        """Close the connection (checkpointing the WAL); further calls raise StoreError."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass
            self._conn.close()

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The database's `PRAGMA user_version`."""
        return self._one("PRAGMA user_version")[0]

    # --- low level ----------------------------------------------------------------------------

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._check_open()
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise StoreError(f"cannot write the history database: {exc}") from exc
            try:
                yield self._conn
            except sqlite3.IntegrityError as exc:
                self._conn.execute("ROLLBACK")
                raise StoreError(f"history database constraint failed: {exc}") from exc
            except sqlite3.Error as exc:
                self._conn.execute("ROLLBACK")
                raise StoreError(f"history database write failed: {exc}") from exc
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            else:
                self._conn.execute("COMMIT")

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("the history database is closed")

    def _all(self, sql: str, params: tuple | dict = ()) -> list[sqlite3.Row]:
        with self._lock:
            self._check_open()
            cur = self._conn.cursor()
            cur.row_factory = sqlite3.Row
            try:
                return cur.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StoreError(f"history database read failed: {exc}") from exc

    def _one(self, sql: str, params: tuple | dict = ()) -> sqlite3.Row | None:
        rows = self._all(sql, params)
        return rows[0] if rows else None

    # --- conversations ------------------------------------------------------------------------

    def create_conversation(self, title: str, kind: str = "chat") -> str:
        """Create a conversation ('chat' | 'compare' | 'api') and return its id (a uuid)."""
        cid = str(uuid.uuid4())
        now = _now()
        with self._tx() as c:
            c.execute(
                "INSERT INTO conversations (id, title, kind, created_at, updated_at) VALUES (?, ?, ?, ?, ?)",
                (cid, title or "", kind, now, now),
            )
        return cid

    def rename_conversation(self, conversation_id: str, title: str) -> None:
        """Change a conversation's title."""
        with self._tx() as c:
            cur = c.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))
            if cur.rowcount == 0:
                raise NotFoundError(f"no conversation {conversation_id}")

    def delete_conversation(self, conversation_id: str) -> None:
        """Delete a conversation with its messages; its runs stay (unlinked) for the run history."""
        with self._tx() as c:
            c.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def add_message(self, conversation_id: str, role: str, content: str, run_id: str | None = None) -> int:
        """Append a message to a conversation; returns its sequence number (0-based)."""
        now = _now()
        with self._tx() as c:
            if c.execute("SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)).fetchone() is None:
                raise NotFoundError(f"no conversation {conversation_id}")
            seq = c.execute(
                "SELECT COALESCE(MAX(seq) + 1, 0) FROM messages WHERE conversation_id = ?", (conversation_id,)
            ).fetchone()[0]
            c.execute(
                "INSERT INTO messages (conversation_id, seq, role, content, run_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (conversation_id, seq, role, content, run_id, now),
            )
            c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))
        return seq

    def list_conversations(self, search: str | None = None, limit: int = 200) -> list[dict]:
        """Conversations newest first; `search` matches title, messages or run questions/answers (any case)."""
        params: list[Any] = []
        where = ""
        if search and search.strip():
            needle = search.strip().casefold()
            where = """
            WHERE instr(stiva_fold(c.title), ?) > 0
               OR EXISTS (SELECT 1 FROM messages m WHERE m.conversation_id = c.id
                          AND instr(stiva_fold(m.content), ?) > 0)
               OR EXISTS (SELECT 1 FROM runs r WHERE r.conversation_id = c.id
                          AND (instr(stiva_fold(r.question), ?) > 0
                               OR instr(stiva_fold(COALESCE(r.answer, '')), ?) > 0))
            """
            params += [needle] * 4
        rows = self._all(
            f"""
            SELECT c.id, c.title, c.kind, c.created_at, c.updated_at,
                   (SELECT COUNT(*) FROM messages m WHERE m.conversation_id = c.id) AS message_count,
                   (SELECT COUNT(*) FROM runs r WHERE r.conversation_id = c.id) AS run_count
            FROM conversations c {where}
            ORDER BY c.updated_at DESC, c.rowid DESC
            LIMIT ?
            """,
            (*params, int(limit)),
        )
        return [dict(r) for r in rows]

    def get_conversation(self, conversation_id: str) -> dict:
        """A conversation with its messages (in order) and the full trace of each of its runs."""
        row = self._one("SELECT id, title, kind, created_at, updated_at FROM conversations WHERE id = ?",
                        (conversation_id,))
        if row is None:
            raise NotFoundError(f"no conversation {conversation_id}")
        out = dict(row)
        out["messages"] = [
            dict(m)
            for m in self._all(
                "SELECT seq, role, content, run_id, created_at FROM messages"
                " WHERE conversation_id = ? ORDER BY seq",
                (conversation_id,),
            )
        ]
        run_ids = [
            r["id"]
            for r in self._all(
                "SELECT id FROM runs WHERE conversation_id = ? ORDER BY created_at, rowid", (conversation_id,)
            )
        ]
        out["runs"] = [self.get_trace(rid) for rid in run_ids]
        return out

    # --- runs ---------------------------------------------------------------------------------

    def begin_run(
        self,
        run_id: str,
        question: str,
        *,
        conversation_id: str | None = None,
        mode: str = "conductor",
        system: str = "conductor",
        source: str = "tui",
    ) -> None:
        """Write the run row (status 'running') before the first call, so the question survives a crash."""
        now = _now()
        with self._tx() as c:
            if conversation_id is not None and c.execute(
                "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone() is None:
                raise NotFoundError(f"no conversation {conversation_id}")
            c.execute(
                """
                INSERT INTO runs (id, conversation_id, question, mode, system, status, created_at, source)
                VALUES (?, ?, ?, ?, ?, 'running', ?, ?)
                ON CONFLICT (id) DO UPDATE SET
                    conversation_id = COALESCE(excluded.conversation_id, runs.conversation_id),
                    question = excluded.question,
                    mode = excluded.mode,
                    system = excluded.system,
                    source = excluded.source
                """,
                (run_id, conversation_id, question, mode, system, now, source),
            )
            if conversation_id is not None:
                c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))

    def record(self, event: ev.Event) -> None:
        """Apply one engine event to the rows (deltas are ignored; unknown runs are created)."""
        handler = _HANDLERS.get(type(event))
        if handler is None:
            return  # ConductorDelta, StepDelta and anything newer: nothing to write
        with self._tx() as c:
            handler(self, c, event)

    def save_partial_output(self, run_id: str, round: int, idx: int, text: str) -> None:
        """Keep the text a step streamed before it was cancelled (ignored for a finished step)."""
        with self._tx() as c:
            self._ensure_run(c, run_id)
            self._ensure_round(c, run_id, round)
            c.execute(
                "INSERT INTO steps (run_id, round, idx, status, output) VALUES (?, ?, ?, 'running', ?)"
                " ON CONFLICT (run_id, round, idx) DO UPDATE SET output = excluded.output"
                " WHERE steps.status != 'finished'",
                (run_id, round, idx, text),
            )

    def get_trace(self, run_id: str) -> dict:
        """The run's full trace as JSON-ready dict (the shape of `stiva ask --json` and exports)."""
        run = self._one("SELECT * FROM runs WHERE id = ?", (run_id,))
        if run is None:
            raise NotFoundError(f"no run {run_id}")
        rounds = self._all("SELECT * FROM rounds WHERE run_id = ? ORDER BY round", (run_id,))
        steps = self._all("SELECT * FROM steps WHERE run_id = ? ORDER BY round, idx", (run_id,))
        by_round: dict[int, list[dict]] = {}
        for s in steps:
            by_round.setdefault(s["round"], []).append(
                {
                    "index": s["idx"],
                    "model": s["model"],
                    "subtask": s["subtask"],
                    "access": json.loads(s["access"]),
                    "status": s["status"],
                    "output": s["output"],
                    "usage": {"prompt_tokens": s["prompt_tokens"], "completion_tokens": s["completion_tokens"]},
                    "cost_usd": s["cost_usd"],
                    "latency_s": s["latency_s"],
                    "attempts": s["attempts"],
                    "attempt_log": json.loads(s["attempt_log"]),
                    "error": s["error"],
                }
            )
        trace_rounds = []
        cond_in = cond_out = 0
        for r in rounds:
            cond_in += r["prompt_tokens"]
            cond_out += r["completion_tokens"]
            trace_rounds.append(
                {
                    "round": r["round"],
                    "reasoning": r["reasoning"],
                    "workflow": json.loads(r["workflow"]) if r["workflow"] is not None else None,
                    "keep_previous": bool(r["keep_previous"]),
                    "usage": {"prompt_tokens": r["prompt_tokens"], "completion_tokens": r["completion_tokens"]},
                    "latency_s": r["latency_s"],
                    "steps": by_round.get(r["round"], []),
                }
            )
        return {
            "run_id": run["id"],
            "conversation_id": run["conversation_id"],
            "question": run["question"],
            "answer": run["answer"],
            "status": run["status"],
            "mode": run["mode"],
            "system": run["system"],
            "source": run["source"],
            "conductor": {
                "backend": run["conductor_backend"],
                "model": run["conductor_model"],
                "usage": {"prompt_tokens": cond_in, "completion_tokens": cond_out},
            },
            "rounds": trace_rounds,
            "totals": {
                "prompt_tokens": run["prompt_tokens"],
                "completion_tokens": run["completion_tokens"],
                "cost_usd": run["cost_usd"],
                "latency_s": run["latency_s"],
                "estimated": bool(run["estimated"]),
            },
            "created_at": run["created_at"],
            "finished_at": run["finished_at"],
            "error": run["error"],
        }

    def get_workflow(self, run_id: str, round: int):
        """Rebuild the `Workflow` of one round (None if that round has none recorded)."""
        from ..conductor.workflow import workflow_from_lists

        row = self._one("SELECT workflow FROM rounds WHERE run_id = ? AND round = ?", (run_id, round))
        if row is None or row["workflow"] is None:
            return None
        lists = json.loads(row["workflow"])
        models = lists.get("model_id") or []
        return workflow_from_lists(
            lists, pool_size=max(models, default=0) + 1, max_steps=max(len(models), 1), allow_empty=True
        )

    def list_runs(self, limit: int = 100, source: str | None = None) -> list[dict]:
        """Run summaries (no steps) newest first, optionally only those from one source."""
        where, params = ("WHERE source = ?", [source]) if source else ("", [])
        rows = self._all(
            f"""
            SELECT id AS run_id, conversation_id, question, answer, status, mode, system, source,
                   conductor_backend, conductor_model, prompt_tokens, completion_tokens, cost_usd,
                   latency_s, estimated, error, created_at, finished_at
            FROM runs {where} ORDER BY created_at DESC, rowid DESC LIMIT ?
            """,
            (*params, int(limit)),
        )
        out = []
        for r in rows:
            d = dict(r)
            d["estimated"] = bool(d["estimated"])
            out.append(d)
        return out

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its rounds and steps."""
        with self._tx() as c:
            c.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    # --- event handlers (called inside a transaction) -----------------------------------------

    def _ensure_run(self, c: sqlite3.Connection, run_id: str, question: str = "", mode: str = "conductor") -> None:
        c.execute(
            "INSERT INTO runs (id, question, mode, system, status, created_at) VALUES (?, ?, ?, ?, 'running', ?)"
            " ON CONFLICT (id) DO NOTHING",
            (run_id, question, mode, mode, _now()),
        )

    def _ensure_round(self, c: sqlite3.Connection, run_id: str, round: int) -> None:
        c.execute(
            "INSERT INTO rounds (run_id, round) VALUES (?, ?) ON CONFLICT (run_id, round) DO NOTHING",
            (run_id, round),
        )

    def _on_run_started(self, c: sqlite3.Connection, e: ev.RunStarted) -> None:
        mode = e.mode if e.mode in ("conductor", "direct", "moa") else "conductor"
        self._ensure_run(c, e.run_id, e.question, mode)
        c.execute(
            """
            UPDATE runs SET
                conductor_backend = COALESCE(?, conductor_backend),
                conductor_model = COALESCE(?, conductor_model),
                mode = ?,
                question = CASE WHEN question = '' THEN ? ELSE question END
            WHERE id = ?
            """,
            (e.conductor_backend, e.conductor_model, mode, e.question, e.run_id),
        )

    def _on_round_started(self, c: sqlite3.Connection, e: ev.RoundStarted) -> None:
        self._ensure_run(c, e.run_id)
        self._ensure_round(c, e.run_id, e.round)

    def _on_workflow_ready(self, c: sqlite3.Connection, e: ev.WorkflowReady) -> None:
        self._ensure_run(c, e.run_id)
        p_in, p_out, _ = _usage(e)
        c.execute(
            """
            INSERT INTO rounds (run_id, round, reasoning, workflow, keep_previous, prompt_tokens,
                                completion_tokens, latency_s)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (run_id, round) DO UPDATE SET
                reasoning = excluded.reasoning, workflow = excluded.workflow,
                keep_previous = excluded.keep_previous, prompt_tokens = excluded.prompt_tokens,
                completion_tokens = excluded.completion_tokens, latency_s = excluded.latency_s
            """,
            (
                e.run_id,
                e.round,
                e.reasoning or "",
                json.dumps(e.workflow.to_lists(), ensure_ascii=False),
                int(bool(e.keep_previous)),
                p_in,
                p_out,
                float(e.latency_s or 0.0),
            ),
        )
        for i, step in enumerate(e.workflow.steps):
            c.execute(
                "INSERT INTO steps (run_id, round, idx, subtask, access, status) VALUES (?, ?, ?, ?, ?, 'waiting')"
                " ON CONFLICT (run_id, round, idx) DO UPDATE SET subtask = excluded.subtask, access = excluded.access",
                (e.run_id, e.round, i, step.subtask, json.dumps(list(step.access))),
            )

    def _on_step_started(self, c: sqlite3.Connection, e: ev.StepStarted) -> None:
        self._ensure_run(c, e.run_id)
        self._ensure_round(c, e.run_id, e.round)
        c.execute(
            """
            INSERT INTO steps (run_id, round, idx, model, subtask, access, status, attempts)
            VALUES (?, ?, ?, ?, ?, ?, 'running', ?)
            ON CONFLICT (run_id, round, idx) DO UPDATE SET
                model = excluded.model,
                subtask = CASE WHEN excluded.subtask != '' THEN excluded.subtask ELSE steps.subtask END,
                access = excluded.access,
                status = CASE WHEN steps.status = 'finished' THEN 'finished' ELSE 'running' END,
                attempts = MAX(steps.attempts, excluded.attempts)
            """,
            (e.run_id, e.round, e.index, e.model, e.subtask or "", json.dumps(list(e.access)), int(e.attempt)),
        )
        # A direct run's label names its model once the engine says which one it called.
        c.execute(
            "UPDATE runs SET system = 'direct:' || ? WHERE id = ? AND mode = 'direct' AND system = 'direct'",
            (e.model, e.run_id),
        )

    def _on_step_finished(self, c: sqlite3.Connection, e: ev.StepFinished) -> None:
        self._ensure_run(c, e.run_id)
        self._ensure_round(c, e.run_id, e.round)
        p_in, p_out, est = _usage(e)
        c.execute(
            """
            INSERT INTO steps (run_id, round, idx, model, status, output, prompt_tokens, completion_tokens,
                               estimated, cost_usd, latency_s, attempts)
            VALUES (?, ?, ?, ?, 'finished', ?, ?, ?, ?, ?, ?, ?)
            ON CONFLICT (run_id, round, idx) DO UPDATE SET
                model = excluded.model, status = 'finished', output = excluded.output,
                prompt_tokens = excluded.prompt_tokens, completion_tokens = excluded.completion_tokens,
                estimated = excluded.estimated, cost_usd = excluded.cost_usd, latency_s = excluded.latency_s,
                attempts = excluded.attempts, error = NULL
            """,
            (e.run_id, e.round, e.index, e.model, e.output, p_in, p_out, int(est),
             float(e.cost_usd or 0.0), float(e.latency_s or 0.0), int(e.attempts)),
        )

    def _on_step_failed(self, c: sqlite3.Connection, e: ev.StepFailed) -> None:
        self._ensure_run(c, e.run_id)
        self._ensure_round(c, e.run_id, e.round)
        c.execute(
            "INSERT INTO steps (run_id, round, idx, model, status) VALUES (?, ?, ?, ?, 'running')"
            " ON CONFLICT (run_id, round, idx) DO NOTHING",
            (e.run_id, e.round, e.index, e.model),
        )
        row = c.execute(
            "SELECT attempt_log, attempts, status FROM steps WHERE run_id = ? AND round = ? AND idx = ?",
            (e.run_id, e.round, e.index),
        ).fetchone()
        log = json.loads(row[0])
        error = redact(e.error) or ""
        entry = {"model": e.model, "error": error, "attempt": int(e.attempt)}
        if entry not in log:  # a replayed event adds nothing
            log.append(entry)
        gives_up = e.fallback is None and row[2] != "finished"
        c.execute(
            """
            UPDATE steps SET attempt_log = ?, attempts = MAX(attempts, ?),
                   status = CASE WHEN ? THEN 'failed' ELSE status END,
                   error = CASE WHEN ? THEN ? ELSE error END
            WHERE run_id = ? AND round = ? AND idx = ?
            """,
            (json.dumps(log, ensure_ascii=False), int(e.attempt), gives_up, gives_up, error,
             e.run_id, e.round, e.index),
        )

    def _on_run_ended(self, c: sqlite3.Connection, e: ev.Event) -> None:
        self._ensure_run(c, e.run_id)
        totals: ev.Totals = getattr(e, "totals", None) or ev.Totals()
        if isinstance(e, ev.RunFinished):
            status, answer, error = "finished", e.answer, None
        elif isinstance(e, ev.RunFailed):
            status, answer, error = "failed", None, redact(e.error)
        else:
            status, answer, error = "cancelled", None, None
        now = _now()
        c.execute(
            """
            UPDATE runs SET status = ?, answer = COALESCE(?, answer), error = ?,
                   prompt_tokens = ?, completion_tokens = ?, cost_usd = ?, latency_s = ?, estimated = ?,
                   finished_at = ?
            WHERE id = ?
            """,
            (status, answer, error, int(totals.prompt_tokens), int(totals.completion_tokens),
             float(totals.cost_usd), float(totals.latency_s), int(bool(totals.estimated)), now, e.run_id),
        )
        if status != "finished":
            # Steps still running when the run stopped did not finish; their partial output stays.
            c.execute(
                "UPDATE steps SET status = 'failed', error = COALESCE(error, ?) WHERE run_id = ? AND status = 'running'",
                (status, e.run_id),
            )
        c.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = (SELECT conversation_id FROM runs WHERE id = ?)",
            (now, e.run_id),
        )

    # --- compare sessions ---------------------------------------------------------------------

    def create_compare_session(self, question: str, conversation_id: str | None = None) -> str:
        """Start a side-by-side comparison of systems on one question; returns its id."""
        sid = str(uuid.uuid4())
        with self._tx() as c:
            if conversation_id is not None and c.execute(
                "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone() is None:
                raise NotFoundError(f"no conversation {conversation_id}")
            c.execute(
                "INSERT INTO compare_sessions (id, conversation_id, question, created_at) VALUES (?, ?, ?, ?)",
                (sid, conversation_id, question, _now()),
            )
        return sid

    def add_compare_entry(self, session_id: str, system: str, run_id: str | None) -> None:
        """Attach one system's run to a compare session (replaces that system's earlier entry)."""
        with self._tx() as c:
            if c.execute("SELECT 1 FROM compare_sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise NotFoundError(f"no compare session {session_id}")
            c.execute(
                "INSERT INTO compare_entries (session_id, system, run_id) VALUES (?, ?, ?)"
                " ON CONFLICT (session_id, system) DO UPDATE SET run_id = excluded.run_id",
                (session_id, system, run_id),
            )

    def record_vote(self, session_id: str, winner_system: str) -> None:
        """Record which system won a session (a session keeps only its latest vote)."""
        with self._tx() as c:
            if c.execute("SELECT 1 FROM compare_sessions WHERE id = ?", (session_id,)).fetchone() is None:
                raise NotFoundError(f"no compare session {session_id}")
            if c.execute(
                "SELECT 1 FROM compare_entries WHERE session_id = ? AND system = ?", (session_id, winner_system)
            ).fetchone() is None:
                raise StoreError(f"{winner_system!r} is not one of the systems compared in session {session_id}")
            c.execute(
                "INSERT INTO votes (session_id, winner, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET winner = excluded.winner, created_at = excluded.created_at",
                (session_id, winner_system, _now()),
            )

    def list_compare_sessions(self, limit: int = 200) -> list[dict]:
        """Compare sessions newest first, each with its systems and winner (or None)."""
        rows = self._all(
            """
            SELECT s.id, s.conversation_id, s.question, s.created_at, v.winner
            FROM compare_sessions s LEFT JOIN votes v ON v.session_id = s.id
            ORDER BY s.created_at DESC, s.rowid DESC LIMIT ?
            """,
            (int(limit),),
        )
        out = []
        for r in rows:
            d = dict(r)
            d["systems"] = [
                e["system"]
                for e in self._all(
                    "SELECT system FROM compare_entries WHERE session_id = ? ORDER BY rowid", (r["id"],)
                )
            ]
            out.append(d)
        return out

    def get_compare_session(self, session_id: str) -> dict:
        """A compare session with each entry's trace (None if its run is missing) and its vote."""
        row = self._one(
            """
            SELECT s.id, s.conversation_id, s.question, s.created_at, v.winner, v.created_at AS voted_at
            FROM compare_sessions s LEFT JOIN votes v ON v.session_id = s.id WHERE s.id = ?
            """,
            (session_id,),
        )
        if row is None:
            raise NotFoundError(f"no compare session {session_id}")
        out = dict(row)
        entries = []
        for e in self._all(
            "SELECT system, run_id FROM compare_entries WHERE session_id = ? ORDER BY rowid", (session_id,)
        ):
            trace = None
            if e["run_id"] is not None:
                try:
                    trace = self.get_trace(e["run_id"])
                except NotFoundError:
                    trace = None
            entries.append({"system": e["system"], "run_id": e["run_id"], "trace": trace})
        out["entries"] = entries
        out["votes"] = (
            [{"winner": row["winner"], "created_at": row["voted_at"]}] if row["winner"] is not None else []
        )
        return out

    def leaderboard(self) -> list[dict]:
        """Per system: sessions, votes (voted sessions), wins, win_rate (wins/votes), avg cost and latency.

        Averages are over the system's finished runs in compare sessions (None when there are none).
        Sorted by win rate, then wins, then name.
        """
        rows = self._all(
            """
            SELECT e.system AS system,
                   COUNT(DISTINCT e.session_id) AS sessions,
                   COUNT(DISTINCT v.session_id) AS votes,
                   COUNT(DISTINCT CASE WHEN v.winner = e.system THEN v.session_id END) AS wins,
                   AVG(CASE WHEN r.status = 'finished' THEN r.cost_usd END) AS avg_cost_usd,
                   AVG(CASE WHEN r.status = 'finished' THEN r.latency_s END) AS avg_latency_s
            FROM compare_entries e
            LEFT JOIN votes v ON v.session_id = e.session_id
            LEFT JOIN runs r ON r.id = e.run_id
            GROUP BY e.system
            """
        )
        out = []
        for r in rows:
            d = dict(r)
            d["win_rate"] = d["wins"] / d["votes"] if d["votes"] else 0.0
            out.append(d)
        out.sort(key=lambda d: (-d["win_rate"], -d["wins"], d["system"]))
        return out


_HANDLERS = {
    ev.RunStarted: Store._on_run_started,
    ev.RoundStarted: Store._on_round_started,
    ev.WorkflowReady: Store._on_workflow_ready,
    ev.StepStarted: Store._on_step_started,
    ev.StepFinished: Store._on_step_finished,
    ev.StepFailed: Store._on_step_failed,
    ev.RunFinished: Store._on_run_ended,
    ev.RunFailed: Store._on_run_ended,
    ev.RunCancelled: Store._on_run_ended,
}


# --- opening helpers ------------------------------------------------------------------------------


def _check_identity(path: Path, version: int, app_id: int, tables: set[str]) -> None:
    untouched = "it was left untouched"
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{path} was written by a newer Stiva (schema version {version}; this one knows up to "
            f"{SCHEMA_VERSION}). Upgrade Stiva or point it at another file — {untouched}"
        )
    if version == 0:
        if tables:
            raise StoreError(
                f"{path} is an SQLite database but not a Stiva history (it holds other tables: "
                f"{', '.join(sorted(tables)[:5])}); point Stiva at another file — {untouched}"
            )
        return
    if app_id != APPLICATION_ID:
        raise StoreError(
            f"{path} is an SQLite database but not a Stiva history (application id {app_id:#x}); "
            f"point Stiva at another file — {untouched}"
        )


def _migrate(conn: sqlite3.Connection, path: Path, version: int) -> None:
    if version > 0:
        backup = path.with_name(f"{path.name}.bak-v{version}")
        if not backup.exists():
            try:
                dest = sqlite3.connect(str(backup))
                with dest:
                    conn.backup(dest)
                dest.close()
            except sqlite3.Error as exc:
                raise StoreError(f"cannot back up {path} before upgrading it: {exc}") from exc
    while True:
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot upgrade the history database {path}: {exc}") from exc
        try:
            # Re-read under the write lock: another process may have upgraded it meanwhile.
            current = conn.execute("PRAGMA user_version").fetchone()[0]
            if current >= SCHEMA_VERSION:
                conn.execute("COMMIT")
                return
            for statement in _split_sql(MIGRATIONS[current]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {current + 1}")
            conn.execute("COMMIT")
        except BaseException as exc:
            conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise StoreError(
                    f"upgrading {path} from schema version {current} to {current + 1} failed: {exc}; "
                    "the file was left at its earlier version"
                ) from exc
            raise

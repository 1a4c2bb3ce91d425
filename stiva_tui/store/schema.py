"""The shape of the history file: its tables, their upgrade steps, and the checks made at open.

The schema version lives in `PRAGMA user_version`; `MIGRATIONS[i]` takes a database from version i
to i + 1. The list is history: steps are appended, never edited, and each runs in one transaction
(so a failed step leaves the file at its earlier version). Before an existing database is upgraded
a copy is kept beside it (`<name>.bak-v<old version>`). A file that is not a Stiva database, or
one written by a newer Stiva, is refused and never modified.

Timestamps are ISO-8601 UTC text with microseconds (`timestamp()`), so they sort as text.
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from ..paths import private_file
from .errors import HistoryFault, NotFoundError, StoreError
from .faults import SQLITE_NOTADB, classify, not_a_database
from .upgrade_8 import V8

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "check_file",
    "upgrade",
    "timestamp",
]

APPLICATION_ID = 0x53544956  # "STIV" in PRAGMA application_id marks a Stiva database


# --- V1: the first schema -------------------------------------------------------------------------

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


# --- V2: one vocabulary (core/words.py) in every CHECK, and why a run stopped ---------------------
#
# SQLite cannot change a CHECK in place, so conversations, runs and steps are rebuilt with SQLite's
# documented procedure ("Making Other Kinds Of Table Schema Changes"): new table, copy, drop the
# old, rename the new, recreate its indexes. `upgrade()` switches foreign keys off around the step
# (the pragma is a no-op inside a transaction, and with them on, dropping `conversations` would
# delete every message) and runs `PRAGMA foreign_key_check` before it commits. Rowids are copied so
# the order of rows created in the same microsecond stays as it was.
#
# Data: a step the old code marked failed only because its run stopped (error 'cancelled' or
# 'failed', the run's status) becomes 'cancelled', as do steps still waiting in a stopped run; a
# failed run gets its `failure` from its error's prefix (one per old failure path), a cancelled run
# gets 'cancelled'. runs.conductor_adapter and runs.conductor_reason are new and stay NULL for old runs.

_V2 = """
CREATE TABLE conversations_v2 (
    id          TEXT PRIMARY KEY,
    title       TEXT NOT NULL DEFAULT '',
    kind        TEXT NOT NULL DEFAULT 'chat'
                CHECK (kind IN ('chat', 'ask', 'compare', 'api', 'bench', 'train')),
    created_at  TEXT NOT NULL,
    updated_at  TEXT NOT NULL
);
INSERT INTO conversations_v2 (rowid, id, title, kind, created_at, updated_at)
    SELECT rowid, id, title, kind, created_at, updated_at FROM conversations;
DROP TABLE conversations;
ALTER TABLE conversations_v2 RENAME TO conversations;
CREATE INDEX conversations_updated ON conversations (updated_at);

CREATE TABLE runs_v2 (
    id                 TEXT PRIMARY KEY,
    conversation_id    TEXT REFERENCES conversations (id) ON DELETE SET NULL,
    question           TEXT NOT NULL DEFAULT '',
    mode               TEXT NOT NULL DEFAULT 'conductor'
                       CHECK (mode IN ('conductor', 'direct', 'moa', 'workflow')),
    system             TEXT NOT NULL DEFAULT 'conductor',
    conductor_backend  TEXT,
    conductor_model    TEXT,
    conductor_adapter  TEXT,
    conductor_reason   TEXT,
    status             TEXT NOT NULL DEFAULT 'running'
                       CHECK (status IN ('running', 'finished', 'failed', 'cancelled', 'interrupted')),
    failure            TEXT
                       CHECK (failure IS NULL OR failure IN ('budget', 'conductor', 'step', 'cancelled', 'internal')),
    answer             TEXT,
    error              TEXT,
    prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    completion_tokens  INTEGER NOT NULL DEFAULT 0,
    cost_usd           REAL NOT NULL DEFAULT 0,
    latency_s          REAL NOT NULL DEFAULT 0,
    estimated          INTEGER NOT NULL DEFAULT 0,
    created_at         TEXT NOT NULL,
    finished_at        TEXT,
    source             TEXT NOT NULL DEFAULT 'tui'
                       CHECK (source IN ('tui', 'cli', 'api', 'bench', 'train')),
    -- The process that records the run while it runs (see owners.py); NULL for older runs.
    owner              TEXT
);
INSERT INTO runs_v2 (rowid, id, conversation_id, question, mode, system, conductor_backend, conductor_model,
                     status, failure, answer, error, prompt_tokens, completion_tokens, cost_usd, latency_s,
                     estimated, created_at, finished_at, source)
    SELECT rowid, id, conversation_id, question, mode, system, conductor_backend, conductor_model,
           status,
           CASE
               WHEN status = 'cancelled' THEN 'cancelled'
               WHEN status != 'failed' THEN NULL
               WHEN substr(error, 1, 8) = 'stopped:' THEN 'budget'
               WHEN substr(error, 1, 10) = 'conductor:' THEN 'conductor'
               WHEN substr(error, 1, 5) = 'step ' THEN 'step'
               WHEN substr(error, 1, 14) = 'internal error' THEN 'internal'
           END,
           answer, error, prompt_tokens, completion_tokens, cost_usd, latency_s,
           estimated, created_at, finished_at, source
    FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v2 RENAME TO runs;
CREATE INDEX runs_conversation ON runs (conversation_id, created_at);
CREATE INDEX runs_created ON runs (created_at);
CREATE INDEX runs_running ON runs (owner) WHERE status = 'running';

CREATE TABLE steps_v2 (
    run_id             TEXT NOT NULL,
    round              INTEGER NOT NULL,
    idx                INTEGER NOT NULL,
    model              TEXT,
    subtask            TEXT NOT NULL DEFAULT '',
    access             TEXT NOT NULL DEFAULT '[]',
    status             TEXT NOT NULL DEFAULT 'waiting'
                       CHECK (status IN ('waiting', 'running', 'finished', 'failed', 'cancelled', 'interrupted')),
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
INSERT INTO steps_v2 (rowid, run_id, round, idx, model, subtask, access, status, output, prompt_tokens,
                      completion_tokens, estimated, cost_usd, latency_s, attempts, attempt_log, error)
    SELECT s.rowid, s.run_id, s.round, s.idx, s.model, s.subtask, s.access,
           CASE
               WHEN s.status = 'failed' AND s.error IN ('cancelled', 'failed') THEN 'cancelled'
               WHEN s.status = 'waiting' AND r.status IN ('failed', 'cancelled') THEN 'cancelled'
               ELSE s.status
           END,
           s.output, s.prompt_tokens, s.completion_tokens, s.estimated, s.cost_usd, s.latency_s,
           s.attempts, s.attempt_log,
           CASE WHEN s.status = 'failed' AND s.error IN ('cancelled', 'failed') THEN NULL ELSE s.error END
    FROM steps s LEFT JOIN runs r ON r.id = s.run_id;
DROP TABLE steps;
ALTER TABLE steps_v2 RENAME TO steps;
"""

# --- V3: benchmarks (`stiva bench`) ---------------------------------------------------------------
# A bench is keyed by what it measures (the suite's content, the systems, the config), so running
# the same command again continues it. Only finished items have a row: an item that was in flight
# when the process died has none and is asked again; an `error` row is asked again too.

_V3 = """
CREATE TABLE bench_runs (
    id           TEXT PRIMARY KEY,
    suite        TEXT NOT NULL,
    suite_hash   TEXT NOT NULL,
    systems      TEXT NOT NULL DEFAULT '[]',
    config_hash  TEXT NOT NULL DEFAULT '',
    items        INTEGER NOT NULL DEFAULT 0,
    status       TEXT NOT NULL DEFAULT 'running'
                 CHECK (status IN ('running', 'finished', 'stopped', 'interrupted')),
    stop_reason  TEXT,
    created_at   TEXT NOT NULL,
    updated_at   TEXT NOT NULL
);
CREATE INDEX bench_runs_updated ON bench_runs (updated_at);

CREATE TABLE bench_items (
    bench_id                 TEXT NOT NULL REFERENCES bench_runs (id) ON DELETE CASCADE,
    system                   TEXT NOT NULL,
    item_id                  TEXT NOT NULL,
    run_id                   TEXT,
    status                   TEXT NOT NULL CHECK (status IN ('graded', 'error')),
    correct                  INTEGER NOT NULL DEFAULT 0,
    answer                   TEXT NOT NULL DEFAULT '',
    extracted                TEXT NOT NULL DEFAULT '',
    error                    TEXT,
    prompt_tokens            INTEGER NOT NULL DEFAULT 0,
    completion_tokens        INTEGER NOT NULL DEFAULT 0,
    cost_usd                 REAL NOT NULL DEFAULT 0,
    latency_s                REAL NOT NULL DEFAULT 0,
    judge_prompt_tokens      INTEGER NOT NULL DEFAULT 0,
    judge_completion_tokens  INTEGER NOT NULL DEFAULT 0,
    judge_cost_usd           REAL NOT NULL DEFAULT 0,
    finished_at              TEXT NOT NULL,
    PRIMARY KEY (bench_id, system, item_id)
);
"""

# --- V4: who runs a bench ---------------------------------------------------------------------------
# The process that runs a bench, as for runs (owners.py): a bench whose process was killed
# (kill -9) is swept to `interrupted` when the history is next opened, instead of staying
# "running" until it is resumed.

_V4 = """
ALTER TABLE bench_runs ADD COLUMN owner TEXT;
CREATE INDEX bench_runs_running ON bench_runs (owner) WHERE status = 'running';
"""

# --- V5: one process per bench, and the time an item queued -------------------------------------
# `bench_runs.pid`: the process running the bench, so that a second `stiva bench` on the same
# bench refuses, naming it (whether it is alive is the owner's lock, owners.py; the pid is what the
# user can act on). `bench_items.queue_wait_s`: how long the item waited for a free slot of the
# bench's concurrency limiter before its first call (its `latency_s` counts from that call on).

_V5 = """
ALTER TABLE bench_runs ADD COLUMN pid INTEGER;
ALTER TABLE bench_items ADD COLUMN queue_wait_s REAL NOT NULL DEFAULT 0;
"""

# --- V6: the preference a plan was made under -----------------------------------------------------
# `rounds.preference`: the user's cost and latency preference (core/preference.py) the conductor was
# told for that round's plan ("cheap", "0.4"); NULL when none was stated, as for every older round.

_V6 = """
ALTER TABLE rounds ADD COLUMN preference TEXT;
"""

# --- V7: a vote can be a tie or "all wrong" ------------------------------------------------------
# `votes.kind` (core/words.py VoteKind): "winner" names the system whose answer won (as every
# earlier vote did); "tie" (all answers equally good) and "all_wrong" (none was right) name none,
# so `winner` becomes NULLable, which SQLite can only do by rebuilding the table (V2's procedure;
# nothing references `votes`). Training on votes (train/votes.py) reads a tie as no preference
# pair and "all wrong" as no chosen plan: neither yields a pair.

_V7 = """
CREATE TABLE votes_v7 (
    session_id  TEXT PRIMARY KEY REFERENCES compare_sessions (id) ON DELETE CASCADE,
    kind        TEXT NOT NULL DEFAULT 'winner' CHECK (kind IN ('winner', 'tie', 'all_wrong')),
    winner      TEXT,
    created_at  TEXT NOT NULL,
    CHECK ((kind = 'winner') = (winner IS NOT NULL))
);
INSERT INTO votes_v7 (rowid, session_id, kind, winner, created_at)
    SELECT rowid, session_id, 'winner', winner, created_at FROM votes;
DROP TABLE votes;
ALTER TABLE votes_v7 RENAME TO votes;
"""

# --- V8 and on: one module each (upgrade_8.py: branches of a run) ---------------------------------

MIGRATIONS: list[str] = [_V1, _V2, _V3, _V4, _V5, _V6, _V7, V8]
"""MIGRATIONS[i] takes a database from user_version i to i + 1. Append, never edit."""

SCHEMA_VERSION = len(MIGRATIONS)


def timestamp() -> str:
    """Now, as the store writes every time: ISO-8601 UTC with microseconds."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def row_exists(c: sqlite3.Connection, table: str, row_id: str) -> bool:
    """Whether `table` holds a row with that id (table names are the store's own, never input)."""
    return c.execute(f"SELECT 1 FROM {table} WHERE id = ?", (row_id,)).fetchone() is not None


def require_row(c: sqlite3.Connection, table: str, row_id: str, what: str) -> None:
    """NotFoundError ("no <what> <id>") unless `table` holds a row with that id."""
    if not row_exists(c, table, row_id):
        raise NotFoundError(f"no {what} {row_id}")


# --- opening --------------------------------------------------------------------------------------


def check_file(conn: sqlite3.Connection, path: Path) -> int:
    """Refuse a file that is not a Stiva history, or is newer than this Stiva; return its version.

    Only reads: a refused file is left exactly as it was (no WAL, no backup)."""
    try:
        version: int = conn.execute("PRAGMA user_version").fetchone()[0]
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        tables = {
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        }
    except sqlite3.DatabaseError as exc:
        fault = classify(exc, path, "read")
        if isinstance(fault, HistoryFault):  # a full disk, a read-only folder, a damaged page: not a foreign file
            raise fault from exc
        code = getattr(exc, "sqlite_errorcode", None)
        if isinstance(code, int) and code & 0xFF == SQLITE_NOTADB:
            raise not_a_database(path, exc) from exc
        raise StoreError(
            f"{path} is not a Stiva history database (SQLite says: {exc}); "
            "move it away or point Stiva at another file — it was left untouched"
        ) from exc
    _check_identity(path, version, app_id, tables)
    return version


def upgrade(conn: sqlite3.Connection, path: Path) -> None:
    """Run every pending upgrade step (backing the file up first when it already held data)."""
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    if version >= SCHEMA_VERSION:
        return
    if version > 0:
        _backup(conn, path, version)
    # Table rebuilds must not fire ON DELETE actions; the pragma only works outside a transaction.
    conn.execute("PRAGMA foreign_keys = OFF")
    try:
        while _upgrade_one_step(conn, path):
            pass
    finally:
        conn.execute("PRAGMA foreign_keys = ON")


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


def _backup(conn: sqlite3.Connection, path: Path, version: int) -> None:
    """Copy the database to `<name>.bak-v<version>` (an existing backup of that version is kept)."""
    backup = path.with_name(f"{path.name}.bak-v{version}")
    if backup.exists() and backup.stat().st_size > 0:  # an empty one is what a failed copy left
        return
    try:
        private_file(backup)  # it holds what the history holds: as private as the history
        dest = sqlite3.connect(str(backup))
        with dest:
            conn.backup(dest)
        dest.close()
    except sqlite3.Error as exc:
        fault = classify(exc, backup, "backup")
        if isinstance(fault, HistoryFault):
            raise fault from exc
        raise StoreError(f"cannot back up {path} before upgrading it: {exc}") from exc


def _upgrade_one_step(conn: sqlite3.Connection, path: Path) -> bool:
    """Apply the next step in its own transaction; False once the file is current."""
    try:
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        fault = classify(exc, path, "upgrade")
        if isinstance(fault, HistoryFault):
            raise fault from exc
        raise StoreError(f"cannot upgrade the history database {path}: {exc}") from exc
    # Re-read under the write lock: another process may have upgraded it meanwhile.
    current = conn.execute("PRAGMA user_version").fetchone()[0]
    try:
        if current >= SCHEMA_VERSION:
            conn.execute("COMMIT")
            return False
        for statement in _split_sql(MIGRATIONS[current]):
            conn.execute(statement)
        broken = conn.execute("PRAGMA foreign_key_check").fetchall()
        if broken:
            raise sqlite3.IntegrityError(f"foreign key check found {len(broken)} broken references: {broken[:3]}")
        conn.execute(f"PRAGMA user_version = {current + 1}")
        conn.execute("COMMIT")
        return True
    except BaseException as exc:
        if conn.in_transaction:  # SQLite may have rolled back already (a full disk at COMMIT)
            conn.execute("ROLLBACK")
        if isinstance(exc, sqlite3.Error):
            fault = classify(exc, path, "upgrade")
            if isinstance(fault, HistoryFault):
                raise fault from exc
            raise StoreError(
                f"upgrading {path} from schema version {current} to {current + 1} failed: {exc}; "
                "the file was left at its earlier version"
            ) from exc
        raise


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
    if buf.strip() and not all(not line.strip() or line.strip().startswith("--") for line in buf.splitlines()):
        raise StoreError(f"incomplete SQL in a migration step: {buf.strip()[:80]!r}")
    return statements

"""The SQLite history store, on real database files: opening, upgrades, reading traces back,
conversations, compare sessions, exports. How events become rows is in test_recorder.py."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import threading
from pathlib import Path

import pytest

from stiva_tui.core import events as ev
from stiva_tui.core import words
from stiva_tui.core.events import Totals, Usage
from stiva_tui.core.trace import Trace, TraceTotals
from stiva_tui.core.workflow import Step, Workflow
from stiva_tui.store import (
    CompareSession,
    CompareSummary,
    Conversation,
    ConversationSummary,
    LeaderboardRow,
    NotFoundError,
    Recorder,
    RunSummary,
    Store,
    StoreError,
    schema,
    writer,
)
from stiva_tui.store.export import conversation_json, conversation_markdown, totals_line, workflow_summary

RUN = "run-0001"
QUESTION = "What is 2 + 2? Explain."

WF1 = Workflow(
    steps=(
        Step(model=2, subtask="Outline an approach", access=()),
        Step(model=0, subtask="Solve using the outline", access=(0,)),
        Step(model=1, subtask="Check and give the final answer", access=(0, 1), access_all=True),
    )
)


def scripted_events(
    run_id: str = RUN,
    *,
    conversation_id: str | None = None,
    source: str = "tui",
    error_text: str = "HTTP 500 from provider",
) -> list[ev.Event]:
    """Two rounds: three steps (step 1 fails on model-a and falls back to model-b), then 'keep'."""
    return [
        ev.RunStarted(
            run_id,
            QUESTION,
            "conductor",
            conductor_backend="local",
            conductor_model="Qwen/Qwen2.5-7B",
            system="conductor",
            source=source,
            conversation_id=conversation_id,
        ),
        ev.RoundStarted(run_id, 1),
        ev.ConductorDelta(run_id, 1, "Let me split this"),
        ev.WorkflowReady(run_id, 1, WF1, "Split into outline, solve, check.", Usage(100, 50), 1.5, preference="cheap"),
        ev.StepStarted(run_id, 1, 0, "model-c", "Outline an approach", ()),
        ev.StepDelta(run_id, 1, 0, "Add the "),
        ev.StepFinished(run_id, 1, 0, "model-c", "Add the numbers.", Usage(10, 20), 0.001, 2.0, 1),
        ev.StepStarted(run_id, 1, 1, "model-a", "Solve using the outline", (0,)),
        ev.StepFailed(run_id, 1, 1, "model-a", error_text, 1, fallback="model-b"),
        ev.StepStarted(run_id, 1, 1, "model-b", "Solve using the outline", (0,), attempt=2),
        ev.StepFinished(run_id, 1, 1, "model-b", "4", Usage(30, 5), 0.002, 3.0, 2),
        ev.StepStarted(run_id, 1, 2, "model-b", "Check and give the final answer", (0, 1), writes_answer=True),
        ev.StepFinished(run_id, 1, 2, "model-b", "The answer is 4.", Usage(40, 10), 0.003, 1.0, 1),
        ev.RoundStarted(run_id, 2),
        ev.WorkflowReady(run_id, 2, Workflow(steps=()), "The answer stands.", Usage(200, 10), 0.5, keep_previous=True),
        ev.RunFinished(run_id, "The answer is 4.", Totals(380, 95, 0.006, 8.0)),
    ]


EXPECTED_ROUNDS = [
    {
        "round": 1,
        "reasoning": "Split into outline, solve, check.",
        "workflow": {
            "model_id": [2, 0, 1],
            "subtasks": ["Outline an approach", "Solve using the outline", "Check and give the final answer"],
            "access_list": [[], [0], "all"],
        },
        "keep_previous": False,
        "usage": {"prompt_tokens": 100, "completion_tokens": 50},
        "latency_s": 1.5,
        "preference": "cheap",
        "steps": [
            {
                "index": 0,
                "model": "model-c",
                "subtask": "Outline an approach",
                "access": [],
                "status": "finished",
                "output": "Add the numbers.",
                "usage": {"prompt_tokens": 10, "completion_tokens": 20},
                "cost_usd": 0.001,
                "latency_s": 2.0,
                "attempts": 1,
                "attempt_log": [],
                "error": None,
            },
            {
                "index": 1,
                "model": "model-b",
                "subtask": "Solve using the outline",
                "access": [0],
                "status": "finished",
                "output": "4",
                "usage": {"prompt_tokens": 30, "completion_tokens": 5},
                "cost_usd": 0.002,
                "latency_s": 3.0,
                "attempts": 2,
                "attempt_log": [{"model": "model-a", "error": "HTTP 500 from provider", "attempt": 1}],
                "error": None,
            },
            {
                "index": 2,
                "model": "model-b",
                "subtask": "Check and give the final answer",
                "access": [0, 1],
                "status": "finished",
                "output": "The answer is 4.",
                "usage": {"prompt_tokens": 40, "completion_tokens": 10},
                "cost_usd": 0.003,
                "latency_s": 1.0,
                "attempts": 1,
                "attempt_log": [],
                "error": None,
            },
        ],
    },
    {
        "round": 2,
        "reasoning": "The answer stands.",
        "workflow": {"model_id": [], "subtasks": [], "access_list": []},
        "keep_previous": True,
        "usage": {"prompt_tokens": 200, "completion_tokens": 10},
        "latency_s": 0.5,
        "preference": None,
        "steps": [],
    },
]


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "data" / "stiva.db"


@pytest.fixture
def store(db_path: Path):
    s = Store.open(db_path)
    yield s
    s.close()


def run_scripted(store: Store, run_id: str = RUN, **kw) -> None:
    recorder = Recorder(store)
    for event in scripted_events(run_id, **kw):
        recorder(event)


def start_run(store: Store, run_id: str, question: str = "q", **kw) -> None:
    recorder = Recorder(store)
    recorder(ev.RunStarted(run_id, question, kw.pop("mode", "conductor"), **kw))
    recorder.flush()


def make_sqlite(path: Path, *sql: str) -> None:
    conn = sqlite3.connect(path)
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()


def rounds_of(trace: Trace) -> list[dict]:
    return [r.model_dump() for r in trace.rounds]


# --- opening and schema ---------------------------------------------------------------------------


def test_open_creates_parents_sets_schema_version_and_wal(db_path: Path):
    assert not db_path.parent.exists()
    with Store.open(db_path) as s:
        assert s.schema_version == schema.SCHEMA_VERSION == 8
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 8
    assert conn.execute("PRAGMA application_id").fetchone()[0] == schema.APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert tables == {
        "conversations",
        "messages",
        "runs",
        "rounds",
        "steps",
        "compare_sessions",
        "compare_entries",
        "votes",
        "bench_runs",
        "bench_items",
    }  # no *_v2 left behind
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index' AND sql IS NOT NULL")}
    assert indexes == {
        "conversations_updated",
        "runs_conversation",
        "runs_created",
        "runs_running",
        "messages_run",
        "compare_entries_run",
        "bench_runs_updated",
        "bench_runs_running",
        "runs_fork_of",
    }
    conn.close()


def test_default_path_follows_stiva_home(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("STIVA_HOME", str(tmp_path / "home"))
    with Store.open() as s:
        assert s.path == tmp_path / "home" / "data" / "stiva.db"
    assert (tmp_path / "home" / "data" / "stiva.db").is_file()


def test_closed_store_raises(db_path: Path):
    s = Store.open(db_path)
    s.close()
    s.close()  # twice is fine
    assert s.closed
    with pytest.raises(StoreError, match="closed"):
        s.list_runs()
    with pytest.raises(StoreError, match="closed"):
        s.create_conversation("x")
    with pytest.raises(StoreError, match="closed"):
        s.get_conversation("x")


def test_empty_v0_database_is_migrated(tmp_path: Path):
    path = tmp_path / "old.db"
    make_sqlite(path, "CREATE TABLE t (x)", "DROP TABLE t", "PRAGMA user_version = 0")
    assert path.stat().st_size > 0
    with Store.open(path) as s:
        assert s.schema_version == schema.SCHEMA_VERSION
        cid = s.create_conversation("works")
        assert s.get_conversation(cid).title == "works"
    assert not list(tmp_path.glob("*.bak-*"))  # nothing to back up at version 0


def test_newer_database_is_refused_and_left_unchanged(tmp_path: Path):
    (tmp_path / "only").mkdir()
    path = tmp_path / "only" / "future.db"
    make_sqlite(
        path,
        "CREATE TABLE conversations (id TEXT)",
        "INSERT INTO conversations VALUES ('x')",
        "PRAGMA user_version = 999",
    )
    before = path.read_bytes()
    with pytest.raises(StoreError, match="newer Stiva"):
        Store.open(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == ["future.db"]  # no -wal, -shm or backup


def test_foreign_sqlite_database_is_refused(tmp_path: Path):
    path = tmp_path / "other.db"
    make_sqlite(path, "CREATE TABLE invoices (id INTEGER)", "INSERT INTO invoices VALUES (1)")
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a Stiva history"):
        Store.open(path)
    assert path.read_bytes() == before

    # A database that claims a schema version but lacks our application id is refused too.
    path2 = tmp_path / "other2.db"
    make_sqlite(path2, "CREATE TABLE x (y)", "PRAGMA user_version = 1")
    before2 = path2.read_bytes()
    with pytest.raises(StoreError, match="not a Stiva history"):
        Store.open(path2)
    assert path2.read_bytes() == before2


def test_non_sqlite_file_is_refused_and_left_unchanged(tmp_path: Path):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, definitely not SQLite\n" * 200)
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not a Stiva history database"):
        Store.open(path)
    assert path.read_bytes() == before


def test_upgrade_step_runs_at_open_and_keeps_a_backup(db_path: Path, monkeypatch):
    with Store.open(db_path) as s:
        run_scripted(s)
        trace = s.get_trace(RUN)
    current = schema.SCHEMA_VERSION
    step = "ALTER TABLE runs ADD COLUMN tag TEXT;\nCREATE TABLE extra (x INTEGER);\n"
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, step])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    with Store.open(db_path) as s:
        assert s.schema_version == current + 1
        assert s.get_trace(RUN) == trace
    conn = sqlite3.connect(db_path)
    assert "tag" in [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
    conn.close()
    backup = db_path.with_name(f"stiva.db.bak-v{current}")
    conn = sqlite3.connect(backup)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == current
    assert conn.execute("SELECT question FROM runs").fetchone()[0] == QUESTION
    conn.close()


def test_failed_upgrade_step_rolls_back(db_path: Path, monkeypatch):
    Store.open(db_path).close()
    current = schema.SCHEMA_VERSION
    bad = "CREATE TABLE half_done (x);\nSELECT * FROM no_such_table;\n"
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, bad])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", current + 1)
    with pytest.raises(StoreError, match=f"from schema version {current} to {current + 1} failed"):
        Store.open(db_path)
    monkeypatch.undo()
    with Store.open(db_path) as s:
        assert s.schema_version == current
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    conn.close()


# --- one vocabulary: the CHECK lists are exactly core/words.py ------------------------------------

# (table, column) -> the tuple of core/words.py its CHECK must hold
VOCABULARY = {
    ("conversations", "kind"): words.CONVERSATION_KINDS,
    ("runs", "mode"): words.RUN_MODES,
    ("runs", "status"): words.RUN_STATUSES,
    ("runs", "source"): words.SOURCES,
    ("runs", "failure"): words.FAILURE_REASONS,
    ("steps", "status"): words.STEP_STATUSES,
    ("votes", "kind"): words.VOTE_KINDS,
}


def check_list(conn: sqlite3.Connection, table: str, column: str) -> tuple[str, ...]:
    """The words of `column IN (...)` in the table's CREATE statement as SQLite keeps it."""
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()[0]
    found = re.findall(rf"\b{column}\s+IN\s*\(([^)]*)\)", sql)
    assert len(found) == 1, f"expected one CHECK list for {table}.{column}, found {found}"
    return tuple(re.findall(r"'([^']*)'", found[0]))


def test_check_constraints_hold_exactly_the_shared_vocabulary(store: Store, db_path: Path):
    conn = sqlite3.connect(db_path)
    for (table, column), expected in VOCABULARY.items():
        assert check_list(conn, table, column) == expected, f"{table}.{column} drifted from core/words.py"
    conn.close()


def test_check_constraints_accept_every_word_and_nothing_else(store: Store, db_path: Path):
    """The parsed lists are the constraints SQLite enforces: each word goes in, a stranger does not."""
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("INSERT INTO runs (id, created_at) VALUES ('r', 'now')")
    conn.execute("INSERT INTO rounds (run_id, round) VALUES ('r', 1)")
    inserts = {
        (
            "conversations",
            "kind",
        ): "INSERT INTO conversations (id, kind, created_at, updated_at) VALUES (?, ?, 'n', 'n')",
        ("runs", "mode"): "INSERT INTO runs (id, mode, created_at) VALUES (?, ?, 'n')",
        ("runs", "status"): "INSERT INTO runs (id, status, created_at) VALUES (?, ?, 'n')",
        ("runs", "source"): "INSERT INTO runs (id, source, created_at) VALUES (?, ?, 'n')",
        ("runs", "failure"): "INSERT INTO runs (id, failure, created_at) VALUES (?, ?, 'n')",
        ("steps", "status"): "INSERT INTO steps (run_id, round, idx, status) VALUES ('r', 1, ?, ?)",
    }
    for n, ((table, column), sql) in enumerate(inserts.items()):
        for i, word in enumerate(VOCABULARY[(table, column)]):
            conn.execute(sql, (f"{n}-{i}" if table != "steps" else 100 * n + i, word))
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            conn.execute(sql, (f"{n}-x" if table != "steps" else 999, "bogus"))
    conn.execute("INSERT INTO runs (id, failure, created_at) VALUES ('no-failure', NULL, 'n')")  # NULL allowed
    conn.close()


# --- the V1 -> V2 upgrade on a filled V1 file -----------------------------------------------------


def make_v1_database(path: Path) -> None:
    """A V1 file as the old Stiva left it: a chat with messages and runs (finished, failed four
    ways, cancelled with a step the old code marked failed/'cancelled'), a compare session, a vote."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.executescript(schema.MIGRATIONS[0])
    conn.execute("PRAGMA user_version = 1")
    conn.executescript(
        """
        BEGIN;
        INSERT INTO conversations VALUES ('c1', 'Old chat', 'chat', '2025-01-01T00:00:00', '2025-01-02T00:00:00');
        INSERT INTO conversations VALUES ('c2', 'Old api', 'api', '2025-01-01T00:00:01', '2025-01-01T00:00:01');
        INSERT INTO messages (conversation_id, seq, role, content, run_id, created_at) VALUES
            ('c1', 0, 'user', 'What is 2 + 2?', 'r-ok', '2025-01-01T00:00:00'),
            ('c1', 1, 'assistant', '4', 'r-ok', '2025-01-01T00:00:05');
        INSERT INTO runs (id, conversation_id, question, mode, system, conductor_backend, conductor_model,
                          status, answer, error, prompt_tokens, completion_tokens, cost_usd, latency_s,
                          estimated, created_at, finished_at, source) VALUES
            ('r-ok', 'c1', 'What is 2 + 2?', 'conductor', 'conductor', 'local', 'Qwen', 'finished', '4', NULL,
             30, 7, 0.01, 2.5, 0, '2025-01-01T00:00:01', '2025-01-01T00:00:04', 'tui'),
            ('r-budget', 'c1', 'q', 'conductor', 'conductor', NULL, NULL, 'failed', NULL,
             'stopped: budget of $0.01 reached', 0, 0, 0, 0, 0, '2025-01-01T00:00:02', NULL, 'tui'),
            ('r-cond', NULL, 'q', 'conductor', 'conductor', NULL, NULL, 'failed', NULL,
             'conductor: no workflow', 0, 0, 0, 0, 0, '2025-01-01T00:00:02', NULL, 'cli'),
            ('r-step', NULL, 'q', 'direct', 'direct:m', NULL, NULL, 'failed', NULL,
             'step 0 (round 1) failed: m: HTTP 500', 0, 0, 0, 0, 0, '2025-01-01T00:00:02', NULL, 'api'),
            ('r-bug', NULL, 'q', 'moa', 'moa', NULL, NULL, 'failed', NULL,
             'internal error: KeyError: x', 0, 0, 0, 0, 0, '2025-01-01T00:00:02', NULL, 'cli'),
            ('r-cancel', 'c1', 'long q', 'conductor', 'conductor', NULL, NULL, 'cancelled', NULL, NULL,
             5, 3, 0.0005, 1.25, 0, '2025-01-01T00:00:03', '2025-01-01T00:00:04', 'tui'),
            ('r-live', NULL, 'still going', 'conductor', 'conductor', NULL, NULL, 'running', NULL, NULL,
             0, 0, 0, 0, 0, '2025-01-01T00:00:09', NULL, 'tui');
        INSERT INTO rounds (run_id, round, reasoning, workflow, keep_previous, prompt_tokens, completion_tokens,
                            latency_s) VALUES
            ('r-ok', 1, 'plan', '{"model_id": [0, 1], "subtasks": ["a", "b"], "access_list": [[], [0]]}',
             0, 20, 5, 1.0),
            ('r-step', 1, '', NULL, 0, 0, 0, 0),
            ('r-cancel', 1, 'plan', '{"model_id": [0, 1], "subtasks": ["a", "b"], "access_list": [[], [0]]}',
             0, 5, 5, 0.2);
        INSERT INTO steps (run_id, round, idx, model, subtask, access, status, output, prompt_tokens,
                           completion_tokens, cost_usd, latency_s, attempts, attempt_log, error) VALUES
            ('r-ok', 1, 0, 'm0', 'a', '[]', 'finished', 'two and two', 5, 1, 0.001, 0.5, 2,
             '[{"model": "m9", "error": "HTTP 500", "attempt": 1}]', NULL),
            ('r-ok', 1, 1, 'm1', 'b', '[0]', 'finished', '4', 5, 1, 0.001, 0.5, 1, '[]', NULL),
            ('r-step', 1, 0, 'm', 'q', '[]', 'failed', '', 0, 0, 0, 0, 1,
             '[{"model": "m", "error": "HTTP 500", "attempt": 1}]', 'HTTP 500'),
            ('r-cancel', 1, 0, 'm0', 'a', '[]', 'failed', 'The partial te', 0, 0, 0, 0, 1, '[]', 'cancelled'),
            ('r-cancel', 1, 1, NULL, 'b', '[0]', 'waiting', '', 0, 0, 0, 0, 0, '[]', NULL);
        INSERT INTO compare_sessions VALUES ('s1', 'c1', 'What is 2 + 2?', '2025-01-01T00:00:06');
        INSERT INTO compare_entries VALUES ('s1', 'conductor', 'r-ok'), ('s1', 'direct:m', 'r-step');
        INSERT INTO votes VALUES ('s1', 'conductor', '2025-01-01T00:00:07');
        COMMIT;
        """
    )
    conn.close()


TABLES = ["conversations", "messages", "runs", "rounds", "steps", "compare_sessions", "compare_entries", "votes"]


def table_rows(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path)
    counts = {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}
    conn.close()
    return counts


def test_v1_database_upgrades_to_v2_keeping_every_row(tmp_path: Path):
    path = tmp_path / "stiva.db"
    make_v1_database(path)
    before = table_rows(path)
    assert before == {
        "conversations": 2,
        "messages": 2,
        "runs": 7,
        "rounds": 3,
        "steps": 5,
        "compare_sessions": 1,
        "compare_entries": 2,
        "votes": 1,
    }
    with Store.open(path) as s:
        # V2's rebuild, V3's bench tables, V4's bench owner, V5's pid and queue wait, V6's plan preference,
        # V7's vote kinds, V8's branches (none: every older run is one of its own)
        assert s.schema_version == 8
        assert all(not t.branches and t.fork is None for t in (s.get_trace(r.run_id) for r in s.list_runs()))
        ok = s.get_trace("r-ok")
        assert all(r.preference is None for r in ok.rounds)  # older plans were made under none
        assert (ok.status, ok.failure, ok.answer, ok.source) == ("finished", None, "4", "tui")
        assert ok.conductor.backend == "local" and ok.conductor.adapter is None
        assert ok.rounds[0].steps[0].attempt_log[0].model == "m9"
        # Rowids were copied: runs written in the same instant keep their order.
        assert [r.run_id for r in s.list_runs()] == [
            "r-live",
            "r-cancel",
            "r-bug",
            "r-step",
            "r-cond",
            "r-budget",
            "r-ok",
        ]
        failures = {r.run_id: (r.status, r.failure) for r in s.list_runs()}
        assert failures == {
            "r-ok": ("finished", None),
            "r-budget": ("failed", "budget"),
            "r-cond": ("failed", "conductor"),
            "r-step": ("failed", "step"),
            "r-bug": ("failed", "internal"),
            "r-cancel": ("cancelled", "cancelled"),
            "r-live": ("interrupted", None),  # a run of a process long gone (it has no owner)
        }
        cancelled = s.get_trace("r-cancel").rounds[0].steps
        assert [(st.status, st.output, st.error) for st in cancelled] == [
            ("cancelled", "The partial te", None),  # the old code's failed/'cancelled'
            ("cancelled", "", None),  # waiting in a stopped run
        ]
        step_failed = s.get_trace("r-step").rounds[0].steps[0]
        assert (step_failed.status, step_failed.error) == ("failed", "HTTP 500")  # a real failure stays
        conv = s.get_conversation("c1")
        assert [m.content for m in conv.messages] == ["What is 2 + 2?", "4"]
        assert [t.run_id for t in conv.runs] == ["r-ok", "r-budget", "r-cancel"]
        session = s.get_compare_session("s1")
        assert (session.winner, session.vote_kind) == ("conductor", "winner")
        assert [(e.system, e.trace.status if e.trace else None) for e in session.entries] == [
            ("conductor", "finished"),
            ("direct:m", "failed"),
        ]
    assert table_rows(path) == before
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    backup = tmp_path / "stiva.db.bak-v1"
    assert table_rows(backup) == before
    conn = sqlite3.connect(backup)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()


def test_foreign_keys_still_cascade_after_the_v2_rebuild(tmp_path: Path):
    path = tmp_path / "stiva.db"
    make_v1_database(path)
    with Store.open(path) as s:
        s.delete_run("r-ok")  # runs -> rounds -> steps
        s.delete_conversation("c1")  # conversations -> messages (cascade), runs and sessions (set null)
        assert s.get_trace("r-budget").conversation_id is None
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT COUNT(*) FROM rounds WHERE run_id = 'r-ok'").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM steps WHERE run_id = 'r-ok'").fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    assert conn.execute("SELECT conversation_id FROM runs WHERE id = 'r-cancel'").fetchone() == (None,)
    assert conn.execute("SELECT conversation_id FROM compare_sessions").fetchone() == (None,)
    assert conn.execute("SELECT COUNT(*) FROM steps WHERE run_id = 'r-cancel'").fetchone()[0] == 2
    conn.close()


def test_v2_upgrade_that_breaks_a_reference_is_rolled_back(tmp_path: Path, monkeypatch):
    """The foreign key check before commit catches a rebuild that lost a parent row."""
    path = tmp_path / "stiva.db"
    make_v1_database(path)
    lossy = schema.MIGRATIONS[1].replace("FROM runs;", "FROM runs WHERE id != 'r-ok';")
    assert lossy != schema.MIGRATIONS[1]
    monkeypatch.setattr(schema, "MIGRATIONS", [schema.MIGRATIONS[0], lossy])
    with pytest.raises(StoreError, match="from schema version 1 to 2 failed: foreign key check"):
        Store.open(path)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 7
    conn.close()


# --- reading runs ---------------------------------------------------------------------------------


def test_full_trace_is_typed_and_exact(store: Store):
    run_scripted(store)
    trace = store.get_trace(RUN)
    assert isinstance(trace, Trace)
    assert (trace.run_id, trace.question, trace.answer) == (RUN, QUESTION, "The answer is 4.")
    assert (trace.status, trace.failure, trace.mode, trace.system, trace.error) == (
        "finished",
        None,
        "conductor",
        "conductor",
        None,
    )
    assert trace.conductor.model_dump(include={"backend", "model", "usage"}) == {
        "backend": "local",
        "model": "Qwen/Qwen2.5-7B",
        "usage": {"prompt_tokens": 300, "completion_tokens": 60},
    }
    assert rounds_of(trace) == EXPECTED_ROUNDS
    assert trace.totals == TraceTotals(prompt_tokens=380, completion_tokens=95, cost_usd=0.006, latency_s=8.0)
    assert trace.created_at and trace.finished_at >= trace.created_at
    assert trace.step_count == 3
    assert trace.rounds[0].steps[1].first_model == "model-a" and trace.rounds[0].steps[1].on_fallback
    assert Trace.model_validate_json(trace.model_dump_json()) == trace  # JSON round trip


def test_get_workflow_rebuilds_each_round(store: Store):
    run_scripted(store)
    assert store.get_workflow(RUN, 1) == WF1
    assert store.get_workflow(RUN, 2) == Workflow(steps=())
    assert store.get_workflow(RUN, 3) is None
    recorder = Recorder(store)
    recorder(ev.RunStarted("d", "hi", "direct", system="direct:m"))
    recorder(ev.RoundStarted("d", 1))
    assert store.get_workflow("d", 1) is None  # a round without a plan


def test_list_runs_newest_first_and_by_source(store: Store):
    start_run(store, "a", "qa", source="tui")
    start_run(store, "b", "qb", source="api")
    start_run(store, "c", "qc", source="api")
    runs = store.list_runs(10)
    assert all(isinstance(r, RunSummary) for r in runs)
    assert [r.run_id for r in runs] == ["c", "b", "a"]
    assert [r.run_id for r in store.list_runs(10, source="api")] == ["c", "b"]
    assert [r.run_id for r in store.list_runs(1)] == ["c"]
    assert (runs[0].status, runs[0].question, runs[0].source, runs[0].estimated) == ("running", "qc", "api", False)


def test_delete_run_removes_rounds_and_steps(store: Store, db_path: Path):
    run_scripted(store)
    run_scripted(store, "keep-me")
    store.delete_run(RUN)
    store.delete_run(RUN)  # twice is fine
    with pytest.raises(NotFoundError):
        store.get_trace(RUN)
    assert [r.run_id for r in store.list_runs()] == ["keep-me"]
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == 3
    assert conn.execute("SELECT COUNT(*) FROM rounds").fetchone()[0] == 2
    conn.close()


def test_invalid_values_raise_store_error(store: Store):
    with pytest.raises(StoreError, match="constraint"):
        store.create_conversation("x", kind="bogus")  # type: ignore[arg-type]
    with pytest.raises(StoreError, match="constraint"):
        start_run(store, "r", "q", source="carrier-pigeon")
    with pytest.raises(NotFoundError):
        store.add_message("no-such-conversation", "user", "hi")
    with pytest.raises(NotFoundError):
        store.rename_conversation("no-such-conversation", "x")
    with pytest.raises(NotFoundError):
        store.get_trace("nope")
    with pytest.raises(NotFoundError):
        store.get_conversation("nope")
    with pytest.raises(NotFoundError):
        store.create_compare_session("q", conversation_id="nope")
    with pytest.raises(NotFoundError):
        store.get_compare_session("nope")
    assert store.list_runs() == [] and store.list_conversations() == []  # nothing half-written


# --- conversations --------------------------------------------------------------------------------


def test_conversation_with_messages_and_traces_survives_reopen(db_path: Path):
    with Store.open(db_path) as s:
        cid = s.create_conversation("Arithmetic")
        s.add_message(cid, "user", QUESTION, run_id=RUN)
        run_scripted(s, conversation_id=cid)
        assert s.add_message(cid, "assistant", "The answer is 4.", run_id=RUN) == 1
        before = s.get_conversation(cid)
        sid = s.create_compare_session(QUESTION, conversation_id=cid)
        s.add_compare_entry(sid, "conductor", RUN)
        s.record_vote(sid, "conductor")
        compare_before = s.get_compare_session(sid)
    assert not db_path.with_name("stiva.db-wal").exists() or db_path.with_name("stiva.db-wal").stat().st_size == 0
    with Store.open(db_path) as s:
        after = s.get_conversation(cid)
        assert isinstance(after, Conversation)
        assert after == before
        assert [(m.seq, m.role, m.run_id) for m in after.messages] == [(0, "user", RUN), (1, "assistant", RUN)]
        assert after.turns() == [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "The answer is 4."},
        ]
        assert rounds_of(after.runs[0]) == EXPECTED_ROUNDS
        assert after.runs[0].conversation_id == cid
        assert s.get_compare_session(sid) == compare_before
        listed = s.list_conversations()
        assert listed[0].id == cid and isinstance(listed[0], ConversationSummary)
        assert (listed[0].message_count, listed[0].run_count, listed[0].kind) == (2, 1, "chat")


def test_rename_and_delete_conversation(store: Store):
    cid = store.create_conversation("old name", kind="ask")
    store.add_message(cid, "user", "hi", run_id=RUN)
    run_scripted(store, conversation_id=cid)
    store.rename_conversation(cid, "new name")
    conv = store.get_conversation(cid)
    assert (conv.title, conv.kind) == ("new name", "ask")
    store.delete_conversation(cid)
    with pytest.raises(NotFoundError):
        store.get_conversation(cid)
    assert store.get_trace(RUN).conversation_id is None  # the run stays, unlinked


def test_rewinding_a_conversation_takes_out_a_question_and_every_later_turn(store: Store):
    cid = store.create_conversation("three turns")
    for n in range(3):
        run_scripted(store, f"run-{n}", conversation_id=cid)
        store.add_message(cid, "user", f"question {n}", run_id=f"run-{n}")
        store.add_message(cid, "assistant", f"answer {n}", run_id=f"run-{n}")
    assert store.rewind_conversation(cid, 1) == 4  # question 1, its answer, question 2, its answer
    conv = store.get_conversation(cid)
    assert [m.content for m in conv.messages] == ["question 0", "answer 0"]
    assert [r.run_id for r in conv.runs] == ["run-0"]
    assert store.get_trace("run-2").conversation_id is None  # the runs stay, unlinked
    assert store.add_message(cid, "user", "question 1, edited") == 2  # numbered on from what is left
    assert store.rewind_conversation(cid, 5) == 0  # not that many questions: nothing changes
    with pytest.raises(NotFoundError):
        store.rewind_conversation("no-such-conversation", 0)


def test_a_listed_conversation_carries_its_newest_runs_status(store: Store):
    cid = store.create_conversation("with a run")
    empty = store.create_conversation("without")
    run_scripted(store, "run-a", conversation_id=cid)
    listed = {c.id: c for c in store.list_conversations()}
    assert listed[cid].last_status == "finished" and listed[empty].last_status is None


def test_deleting_a_compare_session_keeps_its_runs(store: Store):
    run_scripted(store)
    sid = store.create_compare_session("Which?")
    store.add_compare_entry(sid, "conductor", RUN)
    store.record_vote(sid, "conductor")
    store.delete_compare_session(sid)
    assert store.list_compare_sessions() == [] and store.get_trace(RUN).run_id == RUN


def test_search_and_order(store: Store):
    paris = store.create_conversation("Paris trip")
    store.add_message(paris, "user", "What about the Eiffel Tower?")
    math = store.create_conversation("Math homework")
    store.add_message(math, "user", "Solve x^2 = 4, 100% sure")
    umlaut = store.create_conversation("ÄRGER mit dem Drucker")
    ids = lambda rows: [r.id for r in rows]  # noqa: E731
    assert ids(store.list_conversations()) == [umlaut, math, paris]
    store.add_message(paris, "assistant", "It is 330 m tall.")  # new activity moves it to the top
    assert ids(store.list_conversations()) == [paris, umlaut, math]
    assert ids(store.list_conversations(search="eiffel")) == [paris]
    assert ids(store.list_conversations(search="PARIS")) == [paris]
    assert ids(store.list_conversations(search="ärger")) == [umlaut]
    assert ids(store.list_conversations(search="100%")) == [math]
    assert ids(store.list_conversations(search="%")) == [math]  # no wildcard semantics
    assert ids(store.list_conversations(search="_")) == []
    assert ids(store.list_conversations(search="no such words")) == []
    assert ids(store.list_conversations(search="   ")) == [paris, umlaut, math]
    assert ids(store.list_conversations(limit=1)) == [paris]
    # Run questions count too (a run whose message the front end never wrote).
    start_run(store, "rq", "How far is the Moon?", conversation_id=math)
    assert ids(store.list_conversations(search="moon")) == [math]
    listed = {r.id: r for r in store.list_conversations()}
    assert (listed[paris].message_count, listed[math].run_count) == (2, 1)


# --- compare --------------------------------------------------------------------------------------


def _finished_run(store: Store, run_id: str, system: str, cost: float, latency: float, status: str = "finished"):
    recorder = Recorder(store)
    recorder(ev.RunStarted(run_id, "q", system.split(":")[0], system=system))
    if status == "finished":
        recorder(ev.RunFinished(run_id, "a", Totals(10, 10, cost, latency)))
    else:
        recorder(ev.RunFailed(run_id, "boom", Totals(10, 0, cost, latency), "internal"))


def test_leaderboard_math(store: Store):
    s1 = store.create_compare_session("q1")
    _finished_run(store, "c1", "conductor", 0.010, 10.0)
    _finished_run(store, "d1", "direct:gpt", 0.020, 4.0)
    store.add_compare_entry(s1, "conductor", "c1")
    store.add_compare_entry(s1, "direct:gpt", "d1")
    store.record_vote(s1, "direct:gpt")
    store.record_vote(s1, "conductor")  # changed mind: the latest vote counts

    s2 = store.create_compare_session("q2")
    _finished_run(store, "c2", "conductor", 0.030, 20.0)
    _finished_run(store, "d2", "direct:gpt", 0.040, 6.0)
    _finished_run(store, "m2", "moa", 0.100, 30.0)
    for system, rid in (("conductor", "c2"), ("direct:gpt", "d2"), ("moa", "m2")):
        store.add_compare_entry(s2, system, rid)
    store.record_vote(s2, "direct:gpt")

    s3 = store.create_compare_session("q3")  # never voted on
    _finished_run(store, "c3", "conductor", 0.050, 30.0, status="failed")  # not in the averages
    _finished_run(store, "m3", "moa", 0.300, 50.0)
    store.add_compare_entry(s3, "conductor", "c3")
    store.add_compare_entry(s3, "moa", "m3")

    with pytest.raises(StoreError, match="not one of the systems"):
        store.record_vote(s3, "direct:gpt")
    with pytest.raises(NotFoundError):
        store.record_vote("no-session", "conductor")
    with pytest.raises(NotFoundError):
        store.add_compare_entry("no-session", "conductor", None)

    board = store.leaderboard()
    assert all(isinstance(b, LeaderboardRow) for b in board)
    assert [b.system for b in board] == ["conductor", "direct:gpt", "moa"]
    by = {b.system: b for b in board}
    assert (by["conductor"].sessions, by["conductor"].votes, by["conductor"].wins) == (3, 2, 1)
    assert by["conductor"].win_rate == 0.5
    assert by["conductor"].avg_cost_usd == pytest.approx(0.020)
    assert by["conductor"].avg_latency_s == pytest.approx(15.0)
    assert (by["direct:gpt"].sessions, by["direct:gpt"].votes, by["direct:gpt"].wins) == (2, 2, 1)
    assert by["direct:gpt"].win_rate == 0.5
    assert by["direct:gpt"].avg_cost_usd == pytest.approx(0.030)
    assert by["direct:gpt"].avg_latency_s == pytest.approx(5.0)
    assert (by["moa"].sessions, by["moa"].votes, by["moa"].wins, by["moa"].win_rate) == (2, 1, 0, 0.0)
    assert by["moa"].avg_cost_usd == pytest.approx(0.200)
    assert by["moa"].avg_latency_s == pytest.approx(40.0)

    sessions = store.list_compare_sessions()
    assert all(isinstance(s, CompareSummary) for s in sessions)
    assert [s.id for s in sessions] == [s3, s2, s1]
    assert sessions[0].winner is None and sessions[1].winner == "direct:gpt"
    assert sessions[1].systems == ["conductor", "direct:gpt", "moa"]
    assert [s.id for s in store.list_compare_sessions(limit=2)] == [s3, s2]
    detail = store.get_compare_session(s1)
    assert isinstance(detail, CompareSession)
    assert detail.winner == "conductor" and detail.voted_at is not None
    assert [(e.system, e.run_id, e.trace.totals.cost_usd) for e in detail.entries] == [
        ("conductor", "c1", 0.010),
        ("direct:gpt", "d1", 0.020),
    ]


def test_a_vote_can_be_a_tie_or_all_wrong_and_old_calls_still_name_a_winner(store: Store):
    sid = store.create_compare_session("q")
    store.add_compare_entry(sid, "conductor", None)
    store.add_compare_entry(sid, "direct:m", None)
    store.record_vote(sid, "direct:m")  # the call as it was before vote kinds
    assert (store.get_compare_session(sid).winner, store.get_compare_session(sid).vote_kind) == ("direct:m", "winner")
    store.record_vote(sid, kind="tie")
    session = store.get_compare_session(sid)
    assert (session.winner, session.vote_kind) == (None, "tie") and session.voted_at is not None
    store.record_vote(sid, kind="all_wrong")
    assert store.list_compare_sessions()[0].vote_kind == "all_wrong"
    assert store.list_compare_sessions()[0].winner is None
    for bad in (dict(winner_system="conductor", kind="tie"), dict(kind="winner"), dict(kind="meh")):
        with pytest.raises(StoreError):
            store.record_vote(sid, **bad)
    assert store.get_compare_session(sid).vote_kind == "all_wrong"  # a refused vote changes nothing
    board = {row.system: row for row in store.leaderboard()}
    assert (board["conductor"].votes, board["conductor"].wins) == (1, 0)  # a vote no system won


def test_a_trained_adapter_has_its_own_row_beside_its_base(store: Store):
    """The same system name under two conductors: the configured one with its adapter and
    "conductor:base" without it, and older "conductor" runs from before the adapter."""
    recorder = Recorder(store)
    adapter = "/home/u/adapters/votes-1"
    for n, (system, with_adapter, winner) in enumerate(
        [("conductor", True, True), ("conductor", True, True), ("conductor", False, False)]
    ):
        sid = store.create_compare_session(f"q{n}")
        for name, rid, adapt in (
            (system, f"c{n}", adapter if with_adapter else None),
            ("conductor:base", f"b{n}", None),
        ):
            recorder(ev.RunStarted(rid, "q", "conductor", system=name, conductor_adapter=adapt))
            recorder(ev.RunFinished(rid, "a", Totals(10, 10, 0.01, 1.0)))
            store.add_compare_entry(sid, name, rid)
        store.record_vote(sid, system if winner else "conductor:base")
    board = {row.label: row for row in store.leaderboard()}
    assert set(board) == {"conductor + adapter votes-1", "conductor", "conductor:base"}
    trained, old, base = board["conductor + adapter votes-1"], board["conductor"], board["conductor:base"]
    assert (trained.sessions, trained.votes, trained.wins, trained.adapter) == (2, 2, 2, adapter)
    assert (old.sessions, old.wins, old.adapter) == (1, 0, None)
    assert (base.sessions, base.votes, base.wins) == (3, 3, 1)


def test_compare_entry_without_a_run_has_no_trace(store: Store):
    sid = store.create_compare_session("q")
    store.add_compare_entry(sid, "conductor", None)
    store.add_compare_entry(sid, "direct:m", "never-written")
    session = store.get_compare_session(sid)
    assert [(e.system, e.run_id, e.trace) for e in session.entries] == [
        ("conductor", None, None),
        ("direct:m", "never-written", None),
    ]
    assert (session.winner, session.voted_at) == (None, None)
    assert store.leaderboard()[0].avg_cost_usd is None


# --- exports and secrets --------------------------------------------------------------------------


def test_exports(store: Store):
    cid = store.create_conversation("Arithmetic")
    store.add_message(cid, "user", QUESTION, run_id=RUN)
    run_scripted(store, conversation_id=cid)
    store.add_message(cid, "assistant", "The answer is 4.", run_id=RUN)
    md = conversation_markdown(store, cid)
    assert md.startswith("# Arithmetic\n")
    assert "> What is 2 + 2? Explain." in md and md.count("What is 2 + 2?") == 1  # the question once
    assert "## Question 1\n" in md
    assert "The answer is 4." in md
    assert "- System: conductor (conductor: local `Qwen/Qwen2.5-7B`, 300 in / 60 out tokens)" in md
    assert "Round 1 (dag, 3 steps): model-c → model-b (fallback from model-a) → model-b" in md
    assert "Round 2: kept the previous answer" in md
    assert "Totals: 380 in / 95 out tokens · $0.006 · 8.0s" in md
    data = conversation_json(store, cid)
    assert (data["format"], data["version"], data["id"], data["title"]) == ("stiva-conversation", 1, cid, "Arithmetic")
    assert data["runs"][0]["rounds"] == EXPECTED_ROUNDS
    assert [m["content"] for m in data["messages"]] == [QUESTION, "The answer is 4."]
    assert json.loads(json.dumps(data)) == data
    assert Conversation.model_validate(
        {k: v for k, v in data.items() if k not in ("format", "version")}
    ) == store.get_conversation(cid)


def test_export_of_a_stopped_run_shows_its_partial_output(store: Store):
    cid = store.create_conversation("")
    recorder = Recorder(store)
    wf = Workflow(steps=(Step(0, "first", ()), Step(1, "second", (0,))))
    for event in [
        ev.RunStarted("x", "long question", "conductor", conversation_id=cid),
        ev.WorkflowReady("x", 1, wf, "plan", Usage(5, 5), 0.2),
        ev.StepStarted("x", 1, 0, "model-a", "first", ()),
        ev.StepDelta("x", 1, 0, "The partial te"),
        ev.RunFailed("x", "stopped: budget of $0.01 reached", Totals(5, 3, 0.0005, 1.25, estimated=True), "budget"),
    ]:
        recorder(event)
    md = conversation_markdown(store, cid)
    assert md.startswith("# Untitled conversation\n")
    assert "**Answer** — _run failed_: stopped: budget of $0.01 reached" in md
    assert "_Partial output:_\n\nThe partial te\n" in md
    assert "Round 1 (chain, 2 steps): model-a (cancelled) → ? (cancelled)" in md
    trace = store.get_trace("x")
    assert workflow_summary(trace) == ["Round 1 (chain, 2 steps): model-a (cancelled) → ? (cancelled)"]
    assert totals_line(trace.totals) == "~5 in / ~3 out tokens · $0.0005 · 1.2s"


def test_no_api_key_in_database_or_exports(db_path: Path, monkeypatch):
    key = "sk-stivaFAKE0123456789abcdefSECRET"
    monkeypatch.setenv("STIVA_TEST_PROVIDER_KEY", key)
    with Store.open(db_path) as s:
        cid = s.create_conversation("secret test")
        s.add_message(cid, "user", QUESTION, run_id=RUN)
        # An error text that echoes the request headers must not carry the key into the file.
        run_scripted(s, conversation_id=cid, error_text=f"401 Unauthorized (Authorization: Bearer {key})")
        Recorder(s)(ev.RunFailed("other", f"provider rejected api_key={key}"))
        md = conversation_markdown(s, cid)
        js = json.dumps(conversation_json(s, cid))
        traces = s.get_trace(RUN).model_dump_json() + s.get_trace("other").model_dump_json()
        raw_live = b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.is_file())
        assert "[redacted]" in s.get_trace(RUN).rounds[0].steps[1].attempt_log[0].error
        assert s.get_trace("other").error == "provider rejected api_key=[redacted]"
    raw = b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.is_file())
    for blob in (raw_live, raw):
        assert key.encode() not in blob
        assert b"stivaFAKE" not in blob
    for text in (md, js, traces):
        assert key not in text and "stivaFAKE" not in text


# --- threads --------------------------------------------------------------------------------------


def test_concurrent_writes_from_threads(db_path: Path):
    main = Store.open(db_path)
    second = Store.open(db_path)  # another connection on the same file, as a second process would
    recorders = {id(main): Recorder(main), id(second): Recorder(second)}  # each shared by its threads
    cid = main.create_conversation("busy")
    errors: list[BaseException] = []
    per_thread, threads = 15, 6

    def worker(t: int) -> None:
        s = main if t % 2 == 0 else second
        record = recorders[id(s)]
        try:
            for i in range(per_thread):
                rid = f"t{t}-r{i}"
                record(ev.RunStarted(rid, f"question {t}/{i}", "conductor", conversation_id=cid))
                s.add_message(cid, "user", f"question {t}/{i}", run_id=rid)
                record(ev.WorkflowReady(rid, 1, Workflow(steps=(Step(0, "do", ()),)), "", Usage(1, 1), 0.0))
                record(ev.StepStarted(rid, 1, 0, "m", "do", ()))
                record(ev.StepDelta(rid, 1, 0, "out "))
                record(ev.StepFinished(rid, 1, 0, "m", f"out {t}/{i}", Usage(2, 3), 0.5, 0.1, 1))
                record(ev.RunFinished(rid, f"out {t}/{i}", Totals(2, 3, 0.5, 0.1)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(60)
    assert errors == []
    second.wait_for_writes()  # the second "process" has written what it queued
    n = per_thread * threads
    runs = main.list_runs(limit=1000)
    assert len(runs) == n and all(r.status == "finished" for r in runs)
    conv = main.get_conversation(cid)
    assert [m.seq for m in conv.messages] == list(range(n))
    assert sorted(r.answer for r in conv.runs) == sorted(
        f"out {t}/{i}" for t in range(threads) for i in range(per_thread)
    )
    assert all(not r._streams for r in recorders.values())  # nothing left buffered
    second.close()
    main.close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("SELECT SUM(cost_usd) FROM steps").fetchone()[0] == pytest.approx(0.5 * n)
    conn.close()


# --- the writer thread ----------------------------------------------------------------------------


async def test_writes_queued_on_an_event_loop_share_one_commit(store: Store):
    """On an event loop the writes of many events gather into one transaction; a read writes
    what is queued first; a failing piece costs only itself."""
    statements: list[str] = []
    store._conn.set_trace_callback(statements.append)
    insert = (
        "INSERT INTO conversations (id, title, kind, created_at, updated_at)"
        " VALUES (?, '', ?, '2026-01-01', '2026-01-01')"
    )
    for i in range(50):
        store.write_later(lambda c, i=i: c.execute(insert, (f"c{i}", "chat")))
    store.write_later(lambda c: c.execute(insert, ("bad", "fax")))  # refused by the CHECK
    assert statements == []  # nothing written yet: it waits for more
    assert len(store.list_conversations(limit=100)) == 50  # a read writes what was queued first
    error = store.take_write_error()
    assert isinstance(error, StoreError) and "constraint" in str(error)
    assert store.take_write_error() is None
    assert statements.count("COMMIT") == 1  # 51 pieces of work, one transaction
    store.write_later(lambda c: c.execute(insert, ("later", "chat")))
    await asyncio.sleep(writer.GATHER_S * 3)  # ... or the loop writes it a moment later
    assert statements.count("COMMIT") == 2


def test_without_an_event_loop_a_write_is_made_at_once(store: Store, db_path: Path):
    store.write_later(
        lambda c: c.execute(
            "INSERT INTO conversations (id, title, kind, created_at, updated_at) VALUES ('now', '', 'chat', 'x', 'x')"
        )
    )
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT id FROM conversations").fetchall() == [("now",)]
    conn.close()


def test_closing_writes_what_was_queued(db_path: Path):
    store = Store.open(db_path)
    recorder = Recorder(store)
    recorder(ev.RunStarted("queued", "Still there after close?", "conductor"))
    store.close()
    with pytest.raises(StoreError, match="closed"):
        recorder(ev.RoundStarted("queued", 1))
    with Store.open(db_path) as again:
        assert again.get_trace("queued").question == "Still there after close?"

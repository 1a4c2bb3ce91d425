"""The SQLite history store, on real database files."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from stiva_tui.conductor.workflow import Step, Workflow
from stiva_tui.engine import events as ev
from stiva_tui.engine.events import Totals, Usage
from stiva_tui.store import NotFoundError, Store, StoreError
from stiva_tui.store import db as store_db
from stiva_tui.store.export import conversation_json, conversation_markdown

RUN = "run-0001"
QUESTION = "What is 2 + 2? Explain."

WF1 = Workflow(
    steps=(
        Step(model=2, subtask="Outline an approach", access=()),
        Step(model=0, subtask="Solve using the outline", access=(0,)),
        Step(model=1, subtask="Check and give the final answer", access=(0, 1), access_all=True),
    )
)


def scripted_events(run_id: str = RUN, *, error_text: str = "HTTP 500 from provider") -> list[ev.Event]:
    """Two rounds: three steps (step 1 fails on model-a and falls back to model-b), then 'keep'."""
    return [
        ev.RunStarted(run_id, QUESTION, "conductor", conductor_backend="local", conductor_model="Qwen/Qwen2.5-7B"),
        ev.RoundStarted(run_id, 1),
        ev.ConductorDelta(run_id, 1, "Let me split this"),
        ev.WorkflowReady(run_id, 1, WF1, "Split into outline, solve, check.", Usage(100, 50), 1.5),
        ev.StepStarted(run_id, 1, 0, "model-c", "Outline an approach", ()),
        ev.StepDelta(run_id, 1, 0, "Add the "),
        ev.StepFinished(run_id, 1, 0, "model-c", "Add the numbers.", Usage(10, 20), 0.001, 2.0, 1),
        ev.StepStarted(run_id, 1, 1, "model-a", "Solve using the outline", (0,)),
        ev.StepFailed(run_id, 1, 1, "model-a", error_text, 1, fallback="model-b"),
        ev.StepStarted(run_id, 1, 1, "model-b", "Solve using the outline", (0,), attempt=2),
        ev.StepFinished(run_id, 1, 1, "model-b", "4", Usage(30, 5), 0.002, 3.0, 2),
        ev.StepStarted(run_id, 1, 2, "model-b", "Check and give the final answer", (0, 1)),
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
        "steps": [
            {
                "index": 0, "model": "model-c", "subtask": "Outline an approach", "access": [],
                "status": "finished", "output": "Add the numbers.",
                "usage": {"prompt_tokens": 10, "completion_tokens": 20},
                "cost_usd": 0.001, "latency_s": 2.0, "attempts": 1, "attempt_log": [], "error": None,
            },
            {
                "index": 1, "model": "model-b", "subtask": "Solve using the outline", "access": [0],
                "status": "finished", "output": "4",
                "usage": {"prompt_tokens": 30, "completion_tokens": 5},
                "cost_usd": 0.002, "latency_s": 3.0, "attempts": 2,
                "attempt_log": [{"model": "model-a", "error": "HTTP 500 from provider", "attempt": 1}],
                "error": None,
            },
            {
                "index": 2, "model": "model-b", "subtask": "Check and give the final answer", "access": [0, 1],
                "status": "finished", "output": "The answer is 4.",
                "usage": {"prompt_tokens": 40, "completion_tokens": 10},
                "cost_usd": 0.003, "latency_s": 1.0, "attempts": 1, "attempt_log": [], "error": None,
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


def run_scripted(store: Store, run_id: str = RUN, conversation_id: str | None = None, **kw) -> None:
    store.begin_run(run_id, QUESTION, conversation_id=conversation_id)
    for event in scripted_events(run_id, **kw):
        store.record(event)


def make_sqlite(path: Path, *sql: str) -> None:
    conn = sqlite3.connect(path)
    for statement in sql:
        conn.execute(statement)
    conn.commit()
    conn.close()


# --- opening and schema ---------------------------------------------------------------------------


def test_open_creates_parents_sets_schema_version_and_wal(db_path: Path):
    assert not db_path.parent.exists()
    with Store.open(db_path) as s:
        assert s.schema_version == store_db.SCHEMA_VERSION == 1
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("PRAGMA application_id").fetchone()[0] == store_db.APPLICATION_ID
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"conversations", "messages", "runs", "rounds", "steps", "compare_sessions", "compare_entries",
            "votes"} <= tables
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
    with pytest.raises(StoreError, match="closed"):
        s.list_runs()


def test_empty_v0_database_is_migrated(tmp_path: Path):
    path = tmp_path / "old.db"
    make_sqlite(path, "CREATE TABLE t (x)", "DROP TABLE t", "PRAGMA user_version = 0")
    assert path.stat().st_size > 0
    with Store.open(path) as s:
        assert s.schema_version == 1
        cid = s.create_conversation("works")
        assert s.get_conversation(cid)["title"] == "works"
    assert not list(tmp_path.glob("*.bak-*"))  # nothing to back up at version 0


def test_newer_database_is_refused_and_left_unchanged(tmp_path: Path):
    (tmp_path / "only").mkdir()
    path = tmp_path / "only" / "future.db"
    make_sqlite(path, "CREATE TABLE conversations (id TEXT)", "INSERT INTO conversations VALUES ('x')",
                "PRAGMA user_version = 999")
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
    v2 = "ALTER TABLE runs ADD COLUMN tag TEXT;\nCREATE TABLE extra (x INTEGER);\n"
    monkeypatch.setattr(store_db, "MIGRATIONS", [*store_db.MIGRATIONS, v2])
    monkeypatch.setattr(store_db, "SCHEMA_VERSION", 2)
    with Store.open(db_path) as s:
        assert s.schema_version == 2
        assert s.get_trace(RUN) == trace
    conn = sqlite3.connect(db_path)
    assert "tag" in [r[1] for r in conn.execute("PRAGMA table_info(runs)")]
    conn.close()
    backup = db_path.with_name("stiva.db.bak-v1")
    conn = sqlite3.connect(backup)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    assert conn.execute("SELECT question FROM runs").fetchone()[0] == QUESTION
    conn.close()


def test_failed_upgrade_step_rolls_back(db_path: Path, monkeypatch):
    Store.open(db_path).close()
    bad = "CREATE TABLE half_done (x);\nSELECT * FROM no_such_table;\n"
    monkeypatch.setattr(store_db, "MIGRATIONS", [*store_db.MIGRATIONS, bad])
    monkeypatch.setattr(store_db, "SCHEMA_VERSION", 2)
    with pytest.raises(StoreError, match="from schema version 1 to 2 failed"):
        Store.open(db_path)
    monkeypatch.undo()
    with Store.open(db_path) as s:
        assert s.schema_version == 1
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE name = 'half_done'").fetchone()[0] == 0
    conn.close()


# --- runs and traces ------------------------------------------------------------------------------


def test_run_row_is_on_disk_right_after_begin_run(store: Store, db_path: Path):
    cid = store.create_conversation("q")
    store.begin_run(RUN, QUESTION, conversation_id=cid, source="cli")
    # A separate connection (as after a crash) already sees the committed row.
    conn = sqlite3.connect(db_path)
    row = conn.execute("SELECT question, status, mode, system, source, conversation_id FROM runs").fetchone()
    conn.close()
    assert row == (QUESTION, "running", "conductor", "conductor", "cli", cid)
    trace = store.get_trace(RUN)
    assert trace["status"] == "running" and trace["rounds"] == [] and trace["answer"] is None


def test_full_event_sequence_produces_exact_trace(store: Store):
    run_scripted(store)
    trace = store.get_trace(RUN)
    assert trace["run_id"] == RUN
    assert trace["question"] == QUESTION
    assert trace["answer"] == "The answer is 4."
    assert trace["status"] == "finished"
    assert trace["mode"] == "conductor"
    assert trace["system"] == "conductor"
    assert trace["error"] is None
    assert trace["conductor"] == {
        "backend": "local",
        "model": "Qwen/Qwen2.5-7B",
        "usage": {"prompt_tokens": 300, "completion_tokens": 60},
    }
    assert trace["rounds"] == EXPECTED_ROUNDS
    assert trace["totals"] == {
        "prompt_tokens": 380, "completion_tokens": 95, "cost_usd": 0.006, "latency_s": 8.0, "estimated": False,
    }
    assert trace["created_at"] and trace["finished_at"] >= trace["created_at"]
    json.dumps(trace)  # JSON-ready
    assert store.get_workflow(RUN, 1) == WF1
    assert store.get_workflow(RUN, 2) == Workflow(steps=())


def test_replaying_events_changes_nothing(store: Store):
    run_scripted(store)
    first = store.get_trace(RUN)
    for event in scripted_events():
        store.record(event)
    again = store.get_trace(RUN)
    first.pop("finished_at"), again.pop("finished_at")
    assert again == first


def test_events_for_unknown_run_create_it(store: Store):
    for event in scripted_events("run-without-begin"):
        store.record(event)
    trace = store.get_trace("run-without-begin")
    assert trace["question"] == QUESTION
    assert trace["status"] == "finished"
    assert trace["rounds"] == EXPECTED_ROUNDS
    # Even a stray step event for a run never announced is kept, not dropped.
    store.record(ev.StepStarted("stray", 1, 0, "model-a", "do it", ()))
    assert store.get_trace("stray")["rounds"][0]["steps"][0]["status"] == "running"


def test_direct_run_names_its_model(store: Store):
    store.begin_run("d1", "hi", mode="direct", system="direct")
    store.record(ev.StepStarted("d1", 1, 0, "openai/gpt-5", "hi", ()))
    store.record(ev.StepFinished("d1", 1, 0, "openai/gpt-5", "hello", Usage(3, 1, estimated=True), 0.0001, 0.4, 1))
    store.record(ev.RunFinished("d1", "hello", Totals(3, 1, 0.0001, 0.4, estimated=True)))
    trace = store.get_trace("d1")
    assert trace["system"] == "direct:openai/gpt-5"
    assert trace["rounds"][0]["workflow"] is None
    assert trace["rounds"][0]["steps"][0]["output"] == "hello"
    assert trace["totals"]["estimated"] is True


def test_step_failure_without_fallback_and_failed_run(store: Store):
    store.begin_run("f1", "q")
    store.record(ev.WorkflowReady("f1", 1, Workflow(steps=(Step(0, "only", ()),)), "r", Usage(1, 1), 0.1))
    store.record(ev.StepStarted("f1", 1, 0, "model-a", "only", ()))
    store.record(ev.StepFailed("f1", 1, 0, "model-a", "timeout", 1, fallback="model-b"))
    store.record(ev.StepStarted("f1", 1, 0, "model-b", "only", (), attempt=2))
    store.record(ev.StepFailed("f1", 1, 0, "model-b", "HTTP 429", 2, fallback=None))
    step = store.get_trace("f1")["rounds"][0]["steps"][0]
    assert step["status"] == "failed"
    assert step["error"] == "HTTP 429"
    assert step["attempts"] == 2
    assert step["attempt_log"] == [
        {"model": "model-a", "error": "timeout", "attempt": 1},
        {"model": "model-b", "error": "HTTP 429", "attempt": 2},
    ]
    store.record(ev.RunFailed("f1", "step 0 failed: HTTP 429", Totals(5, 0, 0.0, 2.5)))
    trace = store.get_trace("f1")
    assert (trace["status"], trace["error"], trace["answer"]) == ("failed", "step 0 failed: HTTP 429", None)
    assert trace["totals"]["latency_s"] == 2.5


def test_cancelled_run_keeps_partial_output(store: Store):
    wf = Workflow(steps=(Step(0, "first", ()), Step(1, "second", (0,))))
    store.begin_run("c1", "long question")
    store.record(ev.WorkflowReady("c1", 1, wf, "plan", Usage(5, 5), 0.2))
    store.record(ev.StepStarted("c1", 1, 0, "model-a", "first", ()))
    store.record(ev.StepDelta("c1", 1, 0, "The partial te"))
    store.save_partial_output("c1", 1, 0, "The partial te")
    store.record(ev.RunCancelled("c1", Totals(5, 3, 0.0005, 1.25)))
    trace = store.get_trace("c1")
    assert trace["status"] == "cancelled"
    assert trace["answer"] is None
    assert trace["totals"]["completion_tokens"] == 3
    s0, s1 = trace["rounds"][0]["steps"]
    assert (s0["status"], s0["output"], s0["error"]) == ("failed", "The partial te", "cancelled")
    assert (s1["status"], s1["output"]) == ("waiting", "")
    # The front end may save after the event too; a finished step's output is never overwritten.
    store.save_partial_output("c1", 1, 0, "The partial text")
    assert store.get_trace("c1")["rounds"][0]["steps"][0]["output"] == "The partial text"
    run_scripted(store)
    store.save_partial_output(RUN, 1, 2, "garbage")
    assert store.get_trace(RUN)["rounds"][0]["steps"][2]["output"] == "The answer is 4."


def test_list_runs_newest_first_and_by_source(store: Store):
    store.begin_run("a", "qa", source="tui")
    store.begin_run("b", "qb", source="api")
    store.begin_run("c", "qc", source="api")
    assert [r["run_id"] for r in store.list_runs(10)] == ["c", "b", "a"]
    assert [r["run_id"] for r in store.list_runs(10, source="api")] == ["c", "b"]
    assert [r["run_id"] for r in store.list_runs(1)] == ["c"]
    assert store.list_runs(10)[0]["status"] == "running"


def test_invalid_values_raise_store_error(store: Store):
    with pytest.raises(StoreError):
        store.create_conversation("x", kind="bogus")
    with pytest.raises(StoreError):
        store.begin_run("r", "q", source="carrier-pigeon")
    with pytest.raises(NotFoundError):
        store.begin_run("r", "q", conversation_id="no-such-conversation")
    with pytest.raises(NotFoundError):
        store.add_message("no-such-conversation", "user", "hi")
    with pytest.raises(NotFoundError):
        store.get_trace("nope")
    with pytest.raises(NotFoundError):
        store.get_conversation("nope")
    assert store.list_runs() == []  # nothing half-written


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
        assert after == before
        assert [m["role"] for m in after["messages"]] == ["user", "assistant"]
        assert [m["seq"] for m in after["messages"]] == [0, 1]
        assert after["runs"][0]["rounds"] == EXPECTED_ROUNDS
        assert s.get_compare_session(sid) == compare_before
        assert s.list_conversations()[0]["id"] == cid


def test_search_and_order(store: Store):
    paris = store.create_conversation("Paris trip")
    store.add_message(paris, "user", "What about the Eiffel Tower?")
    math = store.create_conversation("Math homework")
    store.add_message(math, "user", "Solve x^2 = 4, 100% sure")
    umlaut = store.create_conversation("ÄRGER mit dem Drucker")
    ids = lambda rows: [r["id"] for r in rows]  # noqa: E731
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
    store.begin_run("rq", "How far is the Moon?", conversation_id=math)
    assert ids(store.list_conversations(search="moon")) == [math]
    listed = {r["id"]: r for r in store.list_conversations()}
    assert (listed[paris]["message_count"], listed[math]["run_count"]) == (2, 1)


# --- compare --------------------------------------------------------------------------------------


def _finished_run(store: Store, run_id: str, system: str, cost: float, latency: float, status: str = "finished"):
    mode = system.split(":")[0]
    store.begin_run(run_id, "q", mode=mode, system=system)
    if status == "finished":
        store.record(ev.RunFinished(run_id, "a", Totals(10, 10, cost, latency)))
    else:
        store.record(ev.RunFailed(run_id, "boom", Totals(10, 0, cost, latency)))


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

    board = store.leaderboard()
    assert [b["system"] for b in board] == ["conductor", "direct:gpt", "moa"]
    by = {b["system"]: b for b in board}
    assert (by["conductor"]["sessions"], by["conductor"]["votes"], by["conductor"]["wins"]) == (3, 2, 1)
    assert by["conductor"]["win_rate"] == 0.5
    assert by["conductor"]["avg_cost_usd"] == pytest.approx(0.020)
    assert by["conductor"]["avg_latency_s"] == pytest.approx(15.0)
    assert (by["direct:gpt"]["sessions"], by["direct:gpt"]["votes"], by["direct:gpt"]["wins"]) == (2, 2, 1)
    assert by["direct:gpt"]["win_rate"] == 0.5
    assert by["direct:gpt"]["avg_cost_usd"] == pytest.approx(0.030)
    assert by["direct:gpt"]["avg_latency_s"] == pytest.approx(5.0)
    assert (by["moa"]["sessions"], by["moa"]["votes"], by["moa"]["wins"], by["moa"]["win_rate"]) == (2, 1, 0, 0.0)
    assert by["moa"]["avg_cost_usd"] == pytest.approx(0.200)
    assert by["moa"]["avg_latency_s"] == pytest.approx(40.0)

    sessions = store.list_compare_sessions()
    assert [s["id"] for s in sessions] == [s3, s2, s1]
    assert sessions[0]["winner"] is None and sessions[1]["winner"] == "direct:gpt"
    assert sessions[1]["systems"] == ["conductor", "direct:gpt", "moa"]
    detail = store.get_compare_session(s1)
    assert detail["winner"] == "conductor"
    assert [v["winner"] for v in detail["votes"]] == ["conductor"]
    assert [(e["system"], e["trace"]["totals"]["cost_usd"]) for e in detail["entries"]] == [
        ("conductor", 0.010), ("direct:gpt", 0.020)
    ]


# --- exports and secrets --------------------------------------------------------------------------


def test_exports(store: Store):
    cid = store.create_conversation("Arithmetic")
    store.add_message(cid, "user", QUESTION, run_id=RUN)
    run_scripted(store, conversation_id=cid)
    store.add_message(cid, "assistant", "The answer is 4.", run_id=RUN)
    md = conversation_markdown(store, cid)
    assert md.startswith("# Arithmetic\n")
    assert "> What is 2 + 2? Explain." in md
    assert "The answer is 4." in md
    assert "Round 1 (dag, 3 steps): model-c → model-b (fallback from model-a) → model-b" in md
    assert "Round 2: kept the previous answer" in md
    assert "Totals: 380 in / 95 out tokens · $0.0060 · 8.0 s" in md
    data = conversation_json(store, cid)
    assert data["format"] == "stiva-conversation"
    assert data["runs"][0]["rounds"] == EXPECTED_ROUNDS
    assert json.loads(json.dumps(data)) == data


def test_no_api_key_in_database_or_exports(db_path: Path, monkeypatch, tmp_path: Path):
    key = "sk-stivaFAKE0123456789abcdefSECRET"
    monkeypatch.setenv("STIVA_TEST_PROVIDER_KEY", key)
    with Store.open(db_path) as s:
        cid = s.create_conversation("secret test")
        s.add_message(cid, "user", QUESTION, run_id=RUN)
        # An error text that echoes the request headers must not carry the key into the file.
        run_scripted(s, conversation_id=cid, error_text=f"401 Unauthorized (Authorization: Bearer {key})")
        s.record(ev.RunFailed("other", f"provider rejected api_key={key}"))
        md = conversation_markdown(s, cid)
        js = json.dumps(conversation_json(s, cid))
        traces = json.dumps([s.get_trace(RUN), s.get_trace("other")])
        raw_live = b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.is_file())
        assert "[redacted]" in s.get_trace(RUN)["rounds"][0]["steps"][1]["attempt_log"][0]["error"]
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
    cid = main.create_conversation("busy")
    errors: list[BaseException] = []
    per_thread, threads = 15, 6

    def worker(t: int) -> None:
        s = main if t % 2 == 0 else second
        try:
            for i in range(per_thread):
                rid = f"t{t}-r{i}"
                s.begin_run(rid, f"question {t}/{i}", conversation_id=cid)
                s.add_message(cid, "user", f"question {t}/{i}", run_id=rid)
                s.record(ev.WorkflowReady(rid, 1, Workflow(steps=(Step(0, "do", ()),)), "", Usage(1, 1), 0.0))
                s.record(ev.StepStarted(rid, 1, 0, "m", "do", ()))
                s.record(ev.StepFinished(rid, 1, 0, "m", f"out {t}/{i}", Usage(2, 3), 0.5, 0.1, 1))
                s.record(ev.RunFinished(rid, f"out {t}/{i}", Totals(2, 3, 0.5, 0.1)))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join(60)
    assert errors == []
    n = per_thread * threads
    runs = main.list_runs(limit=1000)
    assert len(runs) == n and all(r["status"] == "finished" for r in runs)
    conv = main.get_conversation(cid)
    assert [m["seq"] for m in conv["messages"]] == list(range(n))
    assert sorted(r["answer"] for r in conv["runs"]) == sorted(f"out {t}/{i}" for t in range(threads)
                                                            for i in range(per_thread))
    second.close()
    main.close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("SELECT SUM(cost_usd) FROM steps").fetchone()[0] == pytest.approx(0.5 * n)
    conn.close()

"""The history's recorder: engine events in, rows out, on a real SQLite file.

Events are built by hand from core/events.py in the order the engine emits them. Time is faked by
replacing `monotonic` in the recorder module, so the once-a-second flush is tested without sleeps.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from stiva_tui.core import events as ev
from stiva_tui.core.events import Totals, Usage
from stiva_tui.core.trace import AttemptRecord
from stiva_tui.core.workflow import Step, Workflow
from stiva_tui.store import NotFoundError, Recorder, Store, StoreError
from stiva_tui.store import recorder as recorder_module

RUN = "run-1"

# Steps 0 and 1 run in parallel; step 2 reads both (fan-in) and writes the answer.
FAN_IN = Workflow(steps=(Step(0, "Draft one", ()), Step(1, "Draft two", ()), Step(2, "Merge", (0, 1))))


class Clock:
    """A stand-in for time.monotonic that moves only when told."""

    def __init__(self, now: float = 1000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch) -> Clock:
    fake = Clock()
    monkeypatch.setattr(recorder_module, "monotonic", fake)
    return fake


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "stiva.db"


@pytest.fixture
def store(db_path: Path):
    s = Store.open(db_path)
    yield s
    s.close()


@pytest.fixture
def recorder(store: Store, clock: Clock) -> Recorder:
    return Recorder(store)


def feed(recorder: Recorder, *events: ev.Event) -> None:
    for event in events:
        recorder(event)


def on_disk(store: Store, db_path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Read through a separate connection: what another process, or the next start, would see,
    once the store's writer thread has written what was queued (within milliseconds)."""
    store.wait_for_writes()
    conn = sqlite3.connect(db_path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def step_on_disk(store: Store, db_path: Path, index: int, run_id: str = RUN) -> tuple:
    rows = on_disk(
        store, db_path, "SELECT status, output FROM steps WHERE run_id = ? AND round = 1 AND idx = ?", (run_id, index)
    )
    return rows[0] if rows else None


def started(run_id: str = RUN, **kw) -> ev.RunStarted:
    question = kw.pop("question", "Write two drafts and merge them.")
    fields = dict(conductor_backend="local", conductor_model="Qwen/Qwen2.5-7B", system="conductor", source="tui")
    return ev.RunStarted(run_id, question, "conductor", **{**fields, **kw})


def planned(run_id: str = RUN) -> list[ev.Event]:
    return [
        ev.RoundStarted(run_id, 1),
        ev.ConductorDelta(run_id, 1, "Two drafts, "),
        ev.WorkflowReady(run_id, 1, FAN_IN, "Two drafts, then merge.", Usage(50, 20), 0.7),
    ]


# --- a finished run -------------------------------------------------------------------------------


def test_recorder_is_a_named_subscriber(store: Store):
    recorder = Recorder(store)
    assert recorder.name == "history"
    assert callable(recorder)
    recorder(ev.SubscriberFailed(RUN, "tui", "boom"))  # not the history's business: nothing written
    assert store.list_runs() == []


def test_run_row_is_on_disk_at_run_started(store: Store, recorder: Recorder, db_path: Path):
    cid = store.create_conversation("chat")
    before = store.get_conversation(cid).updated_at
    recorder(
        started(
            conversation_id=cid,
            system="conductor-mini",
            source="cli",
            conductor_reason="a GPU with 24 GB",
            conductor_adapter="grpo-v1",
        )
    )
    # Before any call is made, a separate connection (as after a crash) already sees the question.
    assert on_disk(
        store,
        db_path,
        "SELECT question, status, mode, system, source, conversation_id, conductor_backend,"
        " conductor_model, conductor_adapter, conductor_reason, failure FROM runs",
    ) == [
        (
            "Write two drafts and merge them.",
            "running",
            "conductor",
            "conductor-mini",
            "cli",
            cid,
            "local",
            "Qwen/Qwen2.5-7B",
            "grpo-v1",
            "a GPU with 24 GB",
            None,
        )
    ]
    assert store.get_conversation(cid).updated_at > before
    trace = store.get_trace(RUN)
    assert (trace.conductor.adapter, trace.conductor.reason) == ("grpo-v1", "a GPU with 24 GB")
    assert (trace.status, trace.rounds, trace.answer) == ("running", [], None)


def test_finished_run_writes_every_row(store: Store, recorder: Recorder, clock: Clock):
    feed(recorder, started(), *planned())
    feed(
        recorder,
        ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()),
        ev.StepStarted(RUN, 1, 1, "model-b", "Draft two", ()),
        ev.StepDelta(RUN, 1, 0, "Draft "),
        ev.StepDelta(RUN, 1, 1, "Other "),
        ev.StepFinished(RUN, 1, 1, "model-b", "Other draft.", Usage(20, 4), 0.002, 1.5, 1),
        ev.StepFinished(RUN, 1, 0, "model-a", "Draft one.", Usage(10, 3, estimated=True), 0.001, 2.0, 1),
        ev.StepStarted(RUN, 1, 2, "model-c", "Merge", (0, 1), writes_answer=True, final=True),
        ev.StepFinished(RUN, 1, 2, "model-c", "Merged.", Usage(40, 6), 0.004, 1.0, 1),
        ev.RunFinished(RUN, "Merged.", Totals(120, 33, 0.007, 4.8, estimated=True)),
    )
    trace = store.get_trace(RUN)
    assert (trace.status, trace.failure, trace.answer, trace.error) == ("finished", None, "Merged.", None)
    assert trace.totals.model_dump() == {
        "prompt_tokens": 120,
        "completion_tokens": 33,
        "cost_usd": 0.007,
        "latency_s": 4.8,
        "estimated": True,
    }
    (round_,) = trace.rounds
    assert (round_.reasoning, round_.usage.prompt_tokens, round_.latency_s, round_.shape()) == (
        "Two drafts, then merge.",
        50,
        0.7,
        "fan-in",
    )
    assert [(s.index, s.model, s.status, s.output, s.attempts, s.cost_usd) for s in round_.steps] == [
        (0, "model-a", "finished", "Draft one.", 1, 0.001),
        (1, "model-b", "finished", "Other draft.", 1, 0.002),
        (2, "model-c", "finished", "Merged.", 1, 0.004),
    ]
    assert round_.steps[2].access == [0, 1]
    assert recorder._streams == {} and recorder._plans == {}  # nothing kept in memory after the run


def test_replaying_events_changes_nothing(store: Store, recorder: Recorder):
    events = [
        started(),
        *planned(),
        ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()),
        ev.StepFailed(RUN, 1, 0, "model-a", "HTTP 500", 1, fallback="model-b"),
        ev.StepStarted(RUN, 1, 0, "model-b", "Draft one", (), attempt=2),
        ev.StepFinished(RUN, 1, 0, "model-b", "One.", Usage(1, 1), 0.0, 0.1, 2),
        ev.RunFinished(RUN, "One.", Totals(1, 1, 0.0, 0.2)),
    ]
    feed(recorder, *events)
    first = store.get_trace(RUN)
    feed(recorder, *events)
    again = store.get_trace(RUN)
    assert again.model_dump(exclude={"finished_at"}) == first.model_dump(exclude={"finished_at"})
    assert len(again.rounds[0].steps[0].attempt_log) == 1


def test_events_of_a_run_never_started_are_kept(store: Store, recorder: Recorder):
    """A recorder added mid-run (or a lost RunStarted) still keeps what it hears."""
    feed(recorder, ev.StepStarted("stray", 1, 0, "model-a", "do it", ()), ev.StepDelta("stray", 1, 0, "half"))
    assert store.get_trace("stray").rounds[0].steps[0].status == "running"
    recorder(ev.RunCancelled("stray"))
    trace = store.get_trace("stray")
    assert (trace.question, trace.status, trace.failure) == ("", "cancelled", "cancelled")
    assert (trace.rounds[0].steps[0].status, trace.rounds[0].steps[0].output) == ("cancelled", "half")


def test_direct_run_names_its_model(store: Store, recorder: Recorder):
    feed(
        recorder,
        ev.RunStarted("d1", "hi", "direct", system="direct", source="api"),
        ev.StepStarted("d1", 1, 0, "openai/gpt-5", "hi", ()),
        ev.StepFinished("d1", 1, 0, "openai/gpt-5", "hello", Usage(3, 1, estimated=True), 0.0001, 0.4, 1),
        ev.RunFinished("d1", "hello", Totals(3, 1, 0.0001, 0.4, estimated=True)),
    )
    trace = store.get_trace("d1")
    assert (trace.system, trace.mode, trace.source) == ("direct:openai/gpt-5", "direct", "api")
    assert trace.rounds[0].workflow is None and trace.rounds[0].shape() == "direct"
    assert trace.rounds[0].steps[0].output == "hello"
    assert trace.totals.estimated is True


# --- failed and cancelled runs --------------------------------------------------------------------


@pytest.mark.parametrize("reason", ["budget", "conductor", "step", "internal"])
def test_failed_run_stores_its_reason(store: Store, recorder: Recorder, reason: str):
    feed(recorder, started(), ev.RunFailed(RUN, f"it failed ({reason})", Totals(7, 0, 0.0, 0.3), reason))
    trace = store.get_trace(RUN)
    assert (trace.status, trace.failure, trace.error, trace.answer) == ("failed", reason, f"it failed ({reason})", None)
    assert store.list_runs()[0].failure == reason


def test_failed_step_fails_the_run_and_stops_the_others(store: Store, recorder: Recorder, db_path: Path):
    feed(
        recorder,
        started(),
        *planned(),
        ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()),
        ev.StepStarted(RUN, 1, 1, "model-b", "Draft two", ()),
        ev.StepDelta(RUN, 1, 0, "Half of draft "),
        ev.StepDelta(RUN, 1, 1, "Broken te"),
        ev.StepFailed(RUN, 1, 1, "model-b", "stream broke", 1, fallback=None),
        ev.RunFailed(RUN, "step 1 (round 1) failed: model-b: stream broke", Totals(30, 5, 0.001, 2.0), "step"),
    )
    trace = store.get_trace(RUN)
    assert (trace.status, trace.failure, trace.error) == (
        "failed",
        "step",
        "step 1 (round 1) failed: model-b: stream broke",
    )
    assert [(s.status, s.output, s.error) for s in trace.rounds[0].steps] == [
        ("cancelled", "Half of draft ", None),  # still running: stopped by the run, its text kept
        ("failed", "Broken te", "stream broke"),  # the step that failed keeps what it wrote
        ("cancelled", "", None),  # never started
    ]
    assert trace.rounds[0].steps[1].attempt_log == [AttemptRecord(model="model-b", error="stream broke", attempt=1)]
    assert trace.last_output() == "Broken te"
    assert recorder._streams == {}


def test_cancelled_run_keeps_partial_streamed_output(store: Store, recorder: Recorder, db_path: Path):
    feed(
        recorder,
        started(),
        *planned(),
        ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()),
        ev.StepStarted(RUN, 1, 1, "model-b", "Draft two", ()),
        ev.StepFinished(RUN, 1, 1, "model-b", "Second draft.", Usage(5, 5), 0.001, 0.5, 1),
        ev.StepDelta(RUN, 1, 0, "The partial "),
        ev.StepDelta(RUN, 1, 0, "te"),
    )
    assert step_on_disk(store, db_path, 0) == ("running", "")  # under a second: still only in memory
    recorder(ev.RunCancelled(RUN, Totals(55, 25, 0.0015, 1.25)))
    trace = store.get_trace(RUN)
    assert (trace.status, trace.failure, trace.answer, trace.error) == ("cancelled", "cancelled", None, None)
    assert (trace.totals.completion_tokens, trace.totals.latency_s) == (25, 1.25)
    assert [(s.status, s.output) for s in trace.rounds[0].steps] == [
        ("cancelled", "The partial te"),
        ("finished", "Second draft."),
        ("cancelled", ""),
    ]
    assert trace.partial_answer() == ""  # the answering step never started
    assert trace.last_output() == "Second draft."


def test_run_stopped_while_planning_keeps_the_conductor_text(store: Store, recorder: Recorder):
    feed(
        recorder,
        started(),
        ev.RoundStarted(RUN, 1),
        ev.ConductorDelta(RUN, 1, "First I will "),
        ev.ConductorDelta(RUN, 1, "split the task"),
        ev.RunCancelled(RUN),
    )
    (round_,) = store.get_trace(RUN).rounds
    assert (round_.reasoning, round_.workflow, round_.steps) == ("First I will split the task", None, [])
    assert recorder._plans == {}


def test_conductor_text_is_replaced_by_the_finished_plan(store: Store, recorder: Recorder):
    feed(recorder, started(), *planned(), ev.RunCancelled(RUN))
    assert store.get_trace(RUN).rounds[0].reasoning == "Two drafts, then merge."


# --- retries and fallbacks ------------------------------------------------------------------------


def test_step_retried_then_moved_to_a_fallback(store: Store, recorder: Recorder, clock: Clock, db_path: Path):
    feed(recorder, started(), *planned())
    feed(recorder, ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()))
    clock.now += 1.5
    recorder(ev.StepDelta(RUN, 1, 0, "garbled"))
    assert step_on_disk(store, db_path, 0) == ("running", "garbled")
    recorder(ev.StepFailed(RUN, 1, 0, "model-a", "stream broke", 1, fallback="model-a"))  # a retry
    recorder(ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", (), attempt=2))
    assert step_on_disk(store, db_path, 0) == ("running", "")  # the new attempt starts afresh
    recorder(ev.StepFailed(RUN, 1, 0, "model-a", "HTTP 503", 2, fallback="model-d"))
    recorder(ev.StepStarted(RUN, 1, 0, "model-d", "Draft one", (), attempt=3))
    recorder(ev.StepDelta(RUN, 1, 0, "Good "))
    recorder(ev.StepFinished(RUN, 1, 0, "model-d", "Good draft.", Usage(9, 3), 0.003, 4.5, 3))
    step = store.get_trace(RUN).rounds[0].steps[0]
    assert (step.model, step.status, step.output, step.attempts, step.error) == (
        "model-d",
        "finished",
        "Good draft.",
        3,
        None,
    )
    assert step.attempt_log == [
        AttemptRecord(model="model-a", error="stream broke", attempt=1),
        AttemptRecord(model="model-a", error="HTTP 503", attempt=2),
    ]
    assert (step.first_model, step.on_fallback) == ("model-a", True)


def test_step_that_fails_on_every_model(store: Store, recorder: Recorder):
    feed(
        recorder,
        started(),
        *planned(),
        ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()),
        ev.StepFailed(RUN, 1, 0, "model-a", "timeout", 1, fallback="model-b"),
        ev.StepStarted(RUN, 1, 0, "model-b", "Draft one", (), attempt=2),
        ev.StepFailed(RUN, 1, 0, "model-b", "HTTP 429", 2, fallback=None),
    )
    step = store.get_trace(RUN).rounds[0].steps[0]
    assert (step.status, step.error, step.attempts, step.model) == ("failed", "HTTP 429", 2, "model-b")
    assert [(a.model, a.error, a.attempt) for a in step.attempt_log] == [
        ("model-a", "timeout", 1),
        ("model-b", "HTTP 429", 2),
    ]


# --- streaming text reaches the disk about once a second -------------------------------------------


def test_streamed_text_is_written_at_most_once_a_second(
    store: Store, recorder: Recorder, clock: Clock, db_path: Path, monkeypatch
):
    feed(recorder, started(), *planned(), ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()))
    writes = []
    real = recorder_module._write_output
    monkeypatch.setattr(recorder_module, "_write_output", lambda c, *a: (writes.append(a[-1]), real(c, *a)))

    for _ in range(200):  # a burst of tokens within the same instant: not one write
        recorder(ev.StepDelta(RUN, 1, 0, "x"))
    assert writes == [] and step_on_disk(store, db_path, 0) == ("running", "")

    burst = "x" * 200
    # (seconds since the step started, delta, what the disk holds afterwards)
    timeline = [
        (0.4, "a", ""),
        (0.99, "b", ""),
        (1.0, "c", burst + "abc"),
        (1.5, "d", burst + "abc"),
        (1.99, "e", burst + "abc"),
        (2.0, "f", burst + "abcdef"),
        (9.0, "g", burst + "abcdefg"),
    ]
    start = clock.now
    for offset, text, expected in timeline:
        clock.now = start + offset
        recorder(ev.StepDelta(RUN, 1, 0, text))
        assert step_on_disk(store, db_path, 0) == ("running", expected), f"at +{offset}s"
    assert len(writes) == 3


def test_each_step_has_its_own_flush_clock(store: Store, recorder: Recorder, clock: Clock, db_path: Path):
    feed(recorder, started(), *planned(), ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()))
    clock.now += 0.8
    recorder(ev.StepStarted(RUN, 1, 1, "model-b", "Draft two", ()))
    clock.now += 0.3  # 1.1 s after step 0 started, 0.3 s after step 1
    feed(recorder, ev.StepDelta(RUN, 1, 0, "zero"), ev.StepDelta(RUN, 1, 1, "one"))
    assert (step_on_disk(store, db_path, 0), step_on_disk(store, db_path, 1)) == (("running", "zero"), ("running", ""))


def test_a_killed_process_loses_at_most_the_last_second(db_path: Path, clock: Clock):
    store = Store.open(db_path)
    recorder = Recorder(store)
    feed(recorder, started(), *planned(), ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()))
    for second in range(5):
        clock.now += 1.0
        recorder(ev.StepDelta(RUN, 1, 0, f"s{second} "))
    clock.now += 0.5
    recorder(ev.StepDelta(RUN, 1, 0, "lost"))
    store.close()  # the process dies here: no terminal event ever comes
    with Store.open(db_path) as reopened:  # the next stiva finds its owner gone
        trace = reopened.get_trace(RUN)
    assert trace.status == "interrupted"
    assert (trace.rounds[0].steps[0].status, trace.rounds[0].steps[0].output) == ("interrupted", "s0 s1 s2 s3 s4 ")


def test_a_run_whose_process_lives_stays_running(db_path: Path, clock: Clock):
    """The owner's lock tells a live process from a dead one (no pid involved)."""
    alive = Store.open(db_path)
    feed(Recorder(alive), started(), *planned(), ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()))
    alive.wait_for_writes()
    with Store.open(db_path) as other:  # another stiva, while the first still runs
        assert other.get_trace(RUN).status == "running"
        assert other.interrupt_orphaned_runs() == 0
    alive.close()
    with Store.open(db_path) as later:
        trace = later.get_trace(RUN)
        assert trace.status == "interrupted" and trace.finished_at is not None
        assert {s.status for s in trace.rounds[0].steps} == {"interrupted"}  # running and waiting ones


# --- faults ---------------------------------------------------------------------------------------


def test_closed_store_makes_the_recorder_raise(store: Store, recorder: Recorder, clock: Clock):
    feed(recorder, started(), *planned(), ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()))
    store.close()
    recorder(ev.StepDelta(RUN, 1, 0, "kept in memory"))  # not due yet: nothing to write, nothing to fail
    clock.now += 2
    with pytest.raises(StoreError, match="closed"):
        recorder(ev.StepDelta(RUN, 1, 0, " and due"))
    with pytest.raises(StoreError, match="closed"):
        recorder(ev.RunFinished(RUN, "a", Totals()))
    with pytest.raises(StoreError, match="closed"):
        recorder(started("another"))


def test_unknown_conversation_keeps_the_run_unlinked_and_says_so(store: Store, recorder: Recorder):
    raised = []
    for event in (started(conversation_id="gone-1", question="Still worth keeping?"), *planned(), ev.RunCancelled(RUN)):
        try:
            recorder(event)
        except StoreError as exc:  # said once, on an event after it was found, at the latest the last
            raised.append(exc)
    assert len(raised) == 1 and isinstance(raised[0], NotFoundError)
    assert str(raised[0]) == "no conversation gone-1: run run-1 is recorded without one"
    trace = store.get_trace(RUN)
    assert (trace.question, trace.conversation_id, trace.status, len(trace.rounds)) == (
        "Still worth keeping?",
        None,
        "cancelled",
        1,
    )


def test_invalid_words_are_refused(store: Store, recorder: Recorder):
    with pytest.raises(StoreError, match="constraint"):  # at once here, or when the writes are due
        recorder(ev.RunStarted(RUN, "q", "telepathy"))  # type: ignore[arg-type]
        recorder.flush()
    with pytest.raises(StoreError, match="constraint"):
        recorder(ev.RunStarted(RUN, "q", "conductor", source="fax"))  # type: ignore[arg-type]
        recorder.flush()
    assert store.list_runs() == []


def test_error_texts_with_secrets_are_redacted(store: Store, recorder: Recorder, db_path: Path):
    bearer = "sk-proj-AbCdEf0123456789SECRETSECRET"
    google = "AIzaSyD-0123456789abcdefghijklmnopq"
    feed(
        recorder,
        started(),
        *planned(),
        ev.StepStarted(RUN, 1, 0, "model-a", "Draft one", ()),
        ev.StepFailed(RUN, 1, 0, "model-a", f"401 (Authorization: Bearer {bearer})", 1, fallback=None),
        ev.RunFailed(RUN, f"step 0 failed: x-goog-api-key: {google}", Totals(), "step"),
    )
    trace = store.get_trace(RUN)
    assert trace.rounds[0].steps[0].error == "401 (Authorization: Bearer [redacted])"
    assert trace.rounds[0].steps[0].attempt_log[0].error == "401 (Authorization: Bearer [redacted])"
    assert trace.error == "step 0 failed: x-goog-api-key: [redacted]"
    store.close()
    raw = b"".join(p.read_bytes() for p in db_path.parent.iterdir() if p.is_file())
    assert bearer.encode() not in raw and google.encode() not in raw and b"SECRETSECRET" not in raw


# --- with the real engine -------------------------------------------------------------------------


class ScriptedWorker:
    """A worker that streams a fixed answer in pieces."""

    async def stream_chat(self, model, messages, *, max_tokens=None, temperature=None, stop=None):
        from stiva_tui.pool.types import TextDelta, UsageReport

        for piece in ("Hel", "lo", "."):
            yield TextDelta(piece)
        yield UsageReport(Usage(12, 3))


def engine_with(store: Store):
    from stiva_tui.engine.executor import Engine
    from stiva_tui.pool.types import PoolModel

    model = PoolModel(id="w1", provider="fake", model="w1", price_in=1.0, price_out=2.0)
    return Engine([model], ScriptedWorker(), subscribers=[Recorder(store)], source="cli")


async def test_engine_run_is_recorded(store: Store):
    cid = store.create_conversation("ask", kind="ask")
    result = await engine_with(store).run_direct("Say hello", "w1", conversation_id=cid)
    trace = store.get_trace(result.run_id)
    assert (trace.status, trace.answer, trace.system, trace.mode, trace.source, trace.conversation_id) == (
        "finished",
        "Hello.",
        "direct:w1",
        "direct",
        "cli",
        cid,
    )
    assert [(s.model, s.status, s.output) for s in trace.rounds[0].steps] == [("w1", "finished", "Hello.")]
    assert (trace.totals.prompt_tokens, trace.totals.completion_tokens) == (12, 3)


async def test_engine_isolates_a_failing_recorder(db_path: Path):
    store = Store.open(db_path)
    store.close()
    seen: list[ev.Event] = []
    result = await engine_with(store).run_direct("Say hello", "w1", emit=seen.append)
    assert (result.status, result.answer) == ("finished", "Hello.")
    notices = [e for e in seen if isinstance(e, ev.SubscriberFailed)]
    assert len(notices) == 1
    assert notices[0].subscriber == "history" and notices[0].error.startswith("StoreError: ")

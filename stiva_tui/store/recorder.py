"""The history's engine subscriber: `Recorder(store)` turns a run's events into rows.

    engine = Engine(models, worker, conductor=conductor, subscribers=[Recorder(store)])

Each event's rows are queued to the store's writer thread (`Store.write_later`) as the event
arrives, and written within milliseconds, batched with other runs' events into few commits: the
event loop of the app or the server never waits for the disk, and a run is on disk from its
`RunStarted` on (the question survives a crash). Streamed text (`StepDelta`) is held in memory
and written at most once per `flush_interval_s` per step, so a killed process loses about a
second of it; when a run fails or is cancelled, every unfinished
step keeps what it had streamed and is marked `cancelled`, and a round stopped while planning
keeps the conductor's text so far.

A write that failed raises its `StoreError` from the recorder's next call (a closed store at
once; a run's terminal event waits for its writes, so a run's failures are raised before the run
is over); the engine logs it, reports it to the other subscribers (`SubscriberFailed`) and goes on
with the run. A `RunStarted` naming an unknown conversation is stored unlinked, then reported
the same way (a `NotFoundError`), so nothing of the run is lost.
Replaying events changes nothing: every write is an idempotent upsert.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from time import monotonic
from typing import Any

from ..core import events as ev
from ..core.words import FailureReason, RunStatus
from .db import Store, redact
from .errors import NotFoundError, StoreError
from .schema import row_exists, timestamp

__all__ = ["Recorder"]

StepKey = tuple[str, int, int]  # run id, round, step index


@dataclass
class _Stream:
    """What one step has streamed since its attempt started, and when it was last written."""

    last_flush: float
    parts: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(self.parts)


class Recorder:
    """Writes every event of every run it is given into `store` (a subscriber: call it with an event)."""

    name = "history"

    def __init__(self, store: Store, *, flush_interval_s: float = 1.0, wait_at_end: bool = True):
        """`wait_at_end`: a run's terminal event waits for the run's writes and raises their
        failure (the app shows it); the server, which answers from the events, passes False so
        that no request waits for the disk (failures are logged)."""
        self.store = store
        self.flush_interval_s = flush_interval_s
        self.wait_at_end = wait_at_end
        # One recorder serves every run of an engine, and front ends run engines on worker threads.
        self._lock = threading.Lock()
        self._streams: dict[StepKey, _Stream] = {}
        self._plans: dict[tuple[str, int], list[str]] = {}  # conductor text of rounds still planning
        self._notices: deque[StoreError] = deque()  # found while writing; raised on the next event

    def __call__(self, event: ev.Event) -> None:
        """Record one event (deltas only in memory, until they are due). Raises the StoreError of
        a write that failed since the last call."""
        handler = _HANDLERS.get(type(event))
        if handler is not None:
            handler(self, event)
        if self.wait_at_end and isinstance(event, ev.TERMINAL_EVENTS):
            self.flush()  # a run's last write is checked before the run is over
        else:
            self._raise_failures()

    def flush(self) -> None:
        """Wait until every event recorded so far is on disk; raise the first write that failed."""
        self.store.wait_for_writes()
        self._raise_failures()

    def _raise_failures(self) -> None:
        error = self.store.take_write_error() or (self._notices.popleft() if self._notices else None)
        if error is not None:
            raise error

    # --- the run --------------------------------------------------------------------------------

    def _run_started(self, e: ev.RunStarted) -> None:
        owner = self.store.owner.id  # which process records it: alive or not, later (owners.py)

        def write(c: sqlite3.Connection) -> None:
            linked = e.conversation_id is not None and row_exists(c, "conversations", e.conversation_id)
            _upsert_run(c, e, e.conversation_id if linked else None, owner)
            if e.fork is not None:
                _link_branch(c, e.run_id, e.fork)
            if e.conversation_id is not None and not linked:  # kept, unlinked; said on the next event
                self._notices.append(
                    NotFoundError(f"no conversation {e.conversation_id}: run {e.run_id} is recorded without one")
                )

        self.store.write_later(write)

    def _run_ended(self, e: ev.RunFinished | ev.RunFailed | ev.RunCancelled) -> None:
        streams, plans = self._forget_run(e.run_id)
        status, failure = _outcome(e)

        def write(c: sqlite3.Connection) -> None:
            _ensure_run(c, e.run_id)
            if status != "finished":
                for (run_id, round_, index), stream in streams.items():
                    _write_output(c, run_id, round_, index, stream.text)
                for (run_id, round_), parts in plans.items():
                    _write_partial_plan(c, run_id, round_, "".join(parts))
                # Steps it never finished were stopped by the run, not failed by their model.
                c.execute(
                    "UPDATE steps SET status = 'cancelled' WHERE run_id = ? AND status IN ('running', 'waiting')",
                    (e.run_id,),
                )
            _finish_run(c, e, status, failure)

        self.store.write_later(write)

    def _forget_run(self, run_id: str) -> tuple[dict[StepKey, _Stream], dict[tuple[str, int], list[str]]]:
        """Take the run's buffered text out of memory."""
        with self._lock:
            streams = {k: self._streams.pop(k) for k in [k for k in self._streams if k[0] == run_id]}
            plans = {k: self._plans.pop(k) for k in [k for k in self._plans if k[0] == run_id]}
        return streams, plans

    # --- rounds ---------------------------------------------------------------------------------

    def _round_started(self, e: ev.RoundStarted) -> None:

        def write(c: sqlite3.Connection) -> None:
            _ensure_run(c, e.run_id)
            _ensure_round(c, e.run_id, e.round)

        self.store.write_later(write)

    def _conductor_delta(self, e: ev.ConductorDelta) -> None:
        # Kept in memory only: WorkflowReady brings the whole reasoning; this is for a run that stops first.
        with self._lock:
            self._plans.setdefault((e.run_id, e.round), []).append(e.text)

    def _workflow_ready(self, e: ev.WorkflowReady) -> None:
        with self._lock:
            self._plans.pop((e.run_id, e.round), None)

        def write(c: sqlite3.Connection) -> None:
            _ensure_run(c, e.run_id)
            _upsert_round(c, e)
            for i, step in enumerate(e.workflow.steps):
                c.execute(
                    "INSERT INTO steps (run_id, round, idx, subtask, access, status) VALUES (?, ?, ?, ?, ?, 'waiting')"
                    " ON CONFLICT (run_id, round, idx) DO UPDATE SET subtask = excluded.subtask,"
                    " access = excluded.access",
                    (e.run_id, e.round, i, step.subtask, json.dumps(list(step.access))),
                )

        self.store.write_later(write)

    # --- steps ----------------------------------------------------------------------------------

    def _step_started(self, e: ev.StepStarted) -> None:
        with self._lock:  # a retry or fallback streams its text afresh
            self._streams[(e.run_id, e.round, e.index)] = _Stream(last_flush=monotonic())

        def write(c: sqlite3.Connection) -> None:
            _ensure_run(c, e.run_id)
            _ensure_round(c, e.run_id, e.round)
            _upsert_started_step(c, e)
            # A direct run's label names its model once the engine says which one it called.
            c.execute(
                "UPDATE runs SET system = 'direct:' || ? WHERE id = ? AND mode = 'direct' AND system = 'direct'",
                (e.model, e.run_id),
            )

        self.store.write_later(write)

    def _step_delta(self, e: ev.StepDelta) -> None:
        due = self._buffer(e)
        if due is not None:

            def write(c: sqlite3.Connection) -> None:
                _write_output(c, e.run_id, e.round, e.index, due)

            self.store.write_later(write)

    def _buffer(self, e: ev.StepDelta) -> str | None:
        """Add the delta to its step's text; return the whole text when it is due to be written."""
        now = monotonic()
        with self._lock:
            stream = self._streams.setdefault((e.run_id, e.round, e.index), _Stream(last_flush=now))
            stream.parts.append(e.text)
            if now - stream.last_flush < self.flush_interval_s:
                return None
            stream.last_flush = now
            return stream.text

    def _step_finished(self, e: ev.StepFinished) -> None:
        with self._lock:
            self._streams.pop((e.run_id, e.round, e.index), None)

        def write(c: sqlite3.Connection) -> None:
            _ensure_run(c, e.run_id)
            _ensure_round(c, e.run_id, e.round)
            _upsert_finished_step(c, e)

        self.store.write_later(write)

    def _step_failed(self, e: ev.StepFailed) -> None:
        gives_up = e.fallback is None
        with self._lock:
            stream = self._streams.pop((e.run_id, e.round, e.index), None) if gives_up else None

        def write(c: sqlite3.Connection) -> None:
            _ensure_run(c, e.run_id)
            _ensure_round(c, e.run_id, e.round)
            _log_failed_attempt(c, e)
            if stream is not None:  # the step's last attempt: keep what it wrote before failing
                _write_output(c, e.run_id, e.round, e.index, stream.text)

        self.store.write_later(write)


# Each handler takes the event type it is filed under.
_HANDLERS: dict[type[ev.Event], Callable[[Recorder, Any], None]] = {
    ev.RunStarted: Recorder._run_started,
    ev.RoundStarted: Recorder._round_started,
    ev.ConductorDelta: Recorder._conductor_delta,
    ev.WorkflowReady: Recorder._workflow_ready,
    ev.StepStarted: Recorder._step_started,
    ev.StepDelta: Recorder._step_delta,
    ev.StepFinished: Recorder._step_finished,
    ev.StepFailed: Recorder._step_failed,
    ev.RunFinished: Recorder._run_ended,
    ev.RunFailed: Recorder._run_ended,
    ev.RunCancelled: Recorder._run_ended,
}  # SubscriberFailed and anything newer: nothing to write


# --- statements (each runs inside the caller's transaction) ---------------------------------------


def _upsert_run(c: sqlite3.Connection, e: ev.RunStarted, conversation_id: str | None, owner: str) -> None:
    now = timestamp()
    c.execute(
        """
        INSERT INTO runs (id, conversation_id, question, mode, system, source, conductor_backend,
                          conductor_model, conductor_adapter, conductor_reason, owner, status, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'running', ?)
        ON CONFLICT (id) DO UPDATE SET
            conversation_id = COALESCE(excluded.conversation_id, runs.conversation_id),
            question = excluded.question, mode = excluded.mode, system = excluded.system,
            source = excluded.source, conductor_backend = excluded.conductor_backend,
            conductor_model = excluded.conductor_model, conductor_adapter = excluded.conductor_adapter,
            conductor_reason = excluded.conductor_reason, owner = excluded.owner
        """,
        (
            e.run_id,
            conversation_id,
            e.question,
            e.mode,
            e.system or e.mode,
            e.source,
            e.conductor_backend,
            e.conductor_model,
            e.conductor_adapter,
            e.conductor_reason,
            owner,
            now,
        ),
    )
    if conversation_id is not None:
        c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (now, conversation_id))


def _link_branch(c: sqlite3.Connection, run_id: str, fork: ev.ForkOrigin) -> None:
    """A branch is kept under the run it forks (schema V8); the original's rows are not touched."""
    c.execute(
        "UPDATE runs SET fork_of = ?, fork_round = ?, fork_step = ?, branch = ? WHERE id = ?",
        (fork.run_id, fork.round, fork.index, fork.branch, run_id),
    )


def _ensure_run(c: sqlite3.Connection, run_id: str) -> None:
    """A run whose RunStarted never came (a subscriber added mid-run) is still kept."""
    c.execute(
        "INSERT INTO runs (id, status, created_at) VALUES (?, 'running', ?) ON CONFLICT (id) DO NOTHING",
        (run_id, timestamp()),
    )


def _ensure_round(c: sqlite3.Connection, run_id: str, round_: int) -> None:
    c.execute(
        "INSERT INTO rounds (run_id, round) VALUES (?, ?) ON CONFLICT (run_id, round) DO NOTHING", (run_id, round_)
    )


def _upsert_round(c: sqlite3.Connection, e: ev.WorkflowReady) -> None:
    c.execute(
        """
        INSERT INTO rounds (run_id, round, reasoning, workflow, keep_previous, prompt_tokens,
                            completion_tokens, latency_s, preference)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (run_id, round) DO UPDATE SET
            reasoning = excluded.reasoning, workflow = excluded.workflow,
            keep_previous = excluded.keep_previous, prompt_tokens = excluded.prompt_tokens,
            completion_tokens = excluded.completion_tokens, latency_s = excluded.latency_s,
            preference = excluded.preference
        """,
        (
            e.run_id,
            e.round,
            e.reasoning or "",
            json.dumps(e.workflow.to_lists(), ensure_ascii=False),
            int(bool(e.keep_previous)),
            e.usage.prompt_tokens,
            e.usage.completion_tokens,
            float(e.latency_s or 0.0),
            e.preference or None,
        ),
    )


def _upsert_started_step(c: sqlite3.Connection, e: ev.StepStarted) -> None:
    # A new attempt clears the text an earlier one left; a finished step is never reopened.
    c.execute(
        """
        INSERT INTO steps (run_id, round, idx, model, subtask, access, status, attempts)
        VALUES (?, ?, ?, ?, ?, ?, 'running', ?)
        ON CONFLICT (run_id, round, idx) DO UPDATE SET
            model = CASE WHEN steps.status = 'finished' THEN steps.model ELSE excluded.model END,
            subtask = CASE WHEN excluded.subtask != '' THEN excluded.subtask ELSE steps.subtask END,
            access = excluded.access,
            output = CASE WHEN steps.status = 'finished' THEN steps.output ELSE '' END,
            status = CASE WHEN steps.status = 'finished' THEN 'finished' ELSE 'running' END,
            attempts = MAX(steps.attempts, excluded.attempts)
        """,
        (e.run_id, e.round, e.index, e.model, e.subtask or "", json.dumps(list(e.access)), int(e.attempt)),
    )


def _upsert_finished_step(c: sqlite3.Connection, e: ev.StepFinished) -> None:
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
        (
            e.run_id,
            e.round,
            e.index,
            e.model,
            e.output,
            e.usage.prompt_tokens,
            e.usage.completion_tokens,
            int(e.usage.estimated),
            float(e.cost_usd or 0.0),
            float(e.latency_s or 0.0),
            int(e.attempts),
        ),
    )


def _log_failed_attempt(c: sqlite3.Connection, e: ev.StepFailed) -> None:
    """Append the attempt to the step's log; when nothing follows it, the step has failed."""
    c.execute(
        "INSERT INTO steps (run_id, round, idx, model, status) VALUES (?, ?, ?, ?, 'running')"
        " ON CONFLICT (run_id, round, idx) DO NOTHING",
        (e.run_id, e.round, e.index, e.model),
    )
    log_text, status = c.execute(
        "SELECT attempt_log, status FROM steps WHERE run_id = ? AND round = ? AND idx = ?",
        (e.run_id, e.round, e.index),
    ).fetchone()
    log = json.loads(log_text)
    error = redact(e.error) or ""
    entry = {"model": e.model, "error": error, "attempt": int(e.attempt)}
    if entry not in log:  # a replayed event adds nothing
        log.append(entry)
    gives_up = e.fallback is None and status != "finished"
    c.execute(
        """
        UPDATE steps SET attempt_log = ?, attempts = MAX(attempts, ?),
               status = CASE WHEN ? THEN 'failed' ELSE status END,
               error = CASE WHEN ? THEN ? ELSE error END
        WHERE run_id = ? AND round = ? AND idx = ?
        """,
        (json.dumps(log, ensure_ascii=False), int(e.attempt), gives_up, gives_up, error, e.run_id, e.round, e.index),
    )


def _write_output(c: sqlite3.Connection, run_id: str, round_: int, index: int, text: str) -> None:
    """Keep a step's streamed text so far (never over a finished step's output)."""
    _ensure_run(c, run_id)
    _ensure_round(c, run_id, round_)
    c.execute(
        "INSERT INTO steps (run_id, round, idx, status, output) VALUES (?, ?, ?, 'running', ?)"
        " ON CONFLICT (run_id, round, idx) DO UPDATE SET output = excluded.output"
        " WHERE steps.status != 'finished'",
        (run_id, round_, index, text),
    )


def _write_partial_plan(c: sqlite3.Connection, run_id: str, round_: int, text: str) -> None:
    """Keep the conductor's text of a round stopped while it was planning."""
    _ensure_round(c, run_id, round_)
    c.execute(
        "UPDATE rounds SET reasoning = ? WHERE run_id = ? AND round = ? AND workflow IS NULL AND reasoning = ''",
        (text, run_id, round_),
    )


def _outcome(e: ev.Event) -> tuple[RunStatus, FailureReason | None]:
    if isinstance(e, ev.RunFinished):
        return "finished", None
    if isinstance(e, ev.RunFailed):
        return "failed", e.reason
    return "cancelled", "cancelled"


def _finish_run(
    c: sqlite3.Connection,
    e: ev.RunFinished | ev.RunFailed | ev.RunCancelled,
    status: RunStatus,
    failure: FailureReason | None,
) -> None:
    totals = e.totals
    answer = e.answer if isinstance(e, ev.RunFinished) else None
    error = redact(e.error) if isinstance(e, ev.RunFailed) else None
    now = timestamp()
    c.execute(
        """
        UPDATE runs SET status = ?, failure = ?, answer = COALESCE(?, answer), error = ?,
               prompt_tokens = ?, completion_tokens = ?, cost_usd = ?, latency_s = ?, estimated = ?,
               finished_at = ?
        WHERE id = ?
        """,
        (
            status,
            failure,
            answer,
            error,
            int(totals.prompt_tokens),
            int(totals.completion_tokens),
            float(totals.cost_usd),
            float(totals.latency_s),
            int(bool(totals.estimated)),
            now,
            e.run_id,
        ),
    )
    c.execute(
        "UPDATE conversations SET updated_at = ? WHERE id = (SELECT conversation_id FROM runs WHERE id = ?)",
        (now, e.run_id),
    )

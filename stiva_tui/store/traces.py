"""Reading runs back: the full typed `Trace` of one run, run summaries, a round's workflow, and
deleting a run. Part of `Store` (see db.py); it reads through `Store.query`/`snapshot`."""

from __future__ import annotations

import json
import sqlite3
import statistics

from ..core.trace import (
    AttemptRecord,
    TokenUsage,
    Trace,
    TraceConductor,
    TraceFork,
    TraceRound,
    TraceStep,
    TraceTotals,
    TraceWorkflow,
)
from ..core.words import Source
from ..core.workflow import Workflow
from .errors import NotFoundError
from .part import StorePart
from .records import RunSummary
from .schema import timestamp

__all__ = ["Traces"]


class Traces(StorePart):
    """The run-reading part of `Store`."""

    def get_trace(self, run_id: str) -> Trace:
        """The run's full trace (rounds, steps, attempts, totals) as one consistent snapshot.
        Raises NotFoundError for an unknown run."""
        with self.snapshot():
            run = self.query_one("SELECT * FROM runs WHERE id = ?", (run_id,))
            if run is None:
                raise NotFoundError(f"no run {run_id}")
            rounds = self.query("SELECT * FROM rounds WHERE run_id = ? ORDER BY round", (run_id,))
            steps = self.query("SELECT * FROM steps WHERE run_id = ? ORDER BY round, idx", (run_id,))
            branches = [
                _trace(
                    b,
                    self.query("SELECT * FROM rounds WHERE run_id = ? ORDER BY round", (b["id"],)),
                    self.query("SELECT * FROM steps WHERE run_id = ? ORDER BY round, idx", (b["id"],)),
                )
                for b in self.query("SELECT * FROM runs WHERE fork_of = ? ORDER BY branch, rowid", (run_id,))
            ]
        return _trace(run, rounds, steps).model_copy(update={"branches": branches})

    def resolve_id(self, text: str) -> tuple[str, str]:
        """("run" | "conversation", the whole id) for a run id, a conversation id, or a unique
        prefix of either (4 characters or more: what a user copies from any listing). NotFoundError
        says why otherwise: nothing starts so, or several things do."""
        key = text.strip().lower()
        if len(key) < 4 or any(c not in "0123456789abcdef-" for c in key):
            raise NotFoundError(f"{text!r} is no run or conversation id (ids are hex; give 4 characters or more)")
        found: list[tuple[str, str]] = []
        for kind, table in (("run", "runs"), ("conversation", "conversations")):
            rows = self.query(
                f"SELECT id FROM {table} WHERE id >= ? AND id < ? ORDER BY id LIMIT 6", (key, key + "\U0010ffff")
            )
            found += [(kind, r["id"]) for r in rows]
        exact = [f for f in found if f[1] == key]
        if exact:
            return exact[0]
        if not found:
            raise NotFoundError(f"no run or conversation {text} in the history (stiva history lists them)")
        if len(found) > 1:
            raise NotFoundError(
                f"{text} is the start of several ids ({', '.join(i for _, i in found[:5])}…): give more characters"
            )
        return found[0]

    def list_runs(self, limit: int = 100, source: Source | None = None) -> list[RunSummary]:
        """Run summaries (no rounds or steps) newest first, optionally only those from one source.
        A run's branches are not listed: they are shown with it (`get_trace`)."""
        where, params = ("WHERE fork_of IS NULL AND source = ?", [source]) if source else ("WHERE fork_of IS NULL", [])
        rows = self.query(
            f"""
            SELECT id AS run_id, conversation_id, question, answer, status, failure, mode, system, source,
                   conductor_backend, conductor_model, conductor_adapter, prompt_tokens, completion_tokens,
                   cost_usd, latency_s, estimated, error, created_at, finished_at
            FROM runs {where} ORDER BY created_at DESC, rowid DESC LIMIT ?
            """,
            (*params, int(limit)),
        )
        return [RunSummary(**{**dict(r), "estimated": bool(r["estimated"])}) for r in rows]

    def interrupt_orphaned_runs(self) -> int:
        """Mark `interrupted` every run still "running" whose process is gone (see owners.py),
        with its unfinished steps; what they had written stays. Returns how many runs."""
        owners = [
            row[0]
            for row in self.query(
                "SELECT DISTINCT owner FROM runs WHERE status = 'running'"
                " UNION SELECT DISTINCT owner FROM bench_runs WHERE status = 'running'"
            )
        ]
        gone = [owner for owner in owners if self.owner.is_gone(owner)]
        if not gone:
            return 0
        marked = 0
        with self.transaction() as c:
            for owner in gone:
                # a bench of a killed process: interrupted, its graded items kept for the resume
                c.execute(
                    "UPDATE bench_runs SET status = 'interrupted', stop_reason = COALESCE(stop_reason, ?),"
                    " updated_at = ? WHERE status = 'running' AND owner IS ?",
                    ("the process running it was killed; run the same command again to continue", timestamp(), owner),
                )
                c.execute(
                    "UPDATE steps SET status = 'interrupted' WHERE status IN ('running', 'waiting') AND run_id IN"
                    " (SELECT id FROM runs WHERE status = 'running' AND owner IS ?)",
                    (owner,),
                )
                marked += c.execute(
                    "UPDATE runs SET status = 'interrupted', finished_at = COALESCE(finished_at, ?)"
                    " WHERE status = 'running' AND owner IS ?",
                    (timestamp(), owner),
                ).rowcount
        return marked

    def delete_run(self, run_id: str) -> None:
        """Delete a run with its rounds and steps (an unknown id is not an error)."""
        with self.transaction() as c:
            c.execute("DELETE FROM runs WHERE id = ?", (run_id,))

    def typical_latencies(self, recent: int = 2000) -> dict[str, float]:
        """Each model's median seconds a finished step took, over the history's `recent` latest
        steps: the "typical latency" the conductor is told with a preference."""
        rows = self.query(
            "SELECT model, latency_s FROM steps WHERE status = 'finished' AND model IS NOT NULL"
            " AND latency_s > 0 ORDER BY rowid DESC LIMIT ?",
            (recent,),
        )
        by_model: dict[str, list[float]] = {}
        for row in rows:
            by_model.setdefault(row["model"], []).append(float(row["latency_s"]))
        return {model: statistics.median(values) for model, values in by_model.items()}

    def get_workflow(self, run_id: str, round: int) -> Workflow | None:
        """The `Workflow` one round ran; None when the round has none recorded (a direct run, a
        round stopped while planning) or its stored lists no longer validate."""
        row = self.query_one("SELECT workflow FROM rounds WHERE run_id = ? AND round = ?", (run_id, round))
        if row is None or row["workflow"] is None:
            return None
        return TraceWorkflow(**json.loads(row["workflow"])).workflow()


# --- rows to a Trace ------------------------------------------------------------------------------


def _beyond_steps(run: sqlite3.Row, steps: list[sqlite3.Row], column: str) -> int:
    """Tokens of a conductor run that no step accounts for: its planning."""
    if run["mode"] != "conductor" or run[column] is None:
        return 0
    return max(0, int(run[column]) - sum(int(s[column] or 0) for s in steps))


def _trace(run: sqlite3.Row, rounds: list[sqlite3.Row], steps: list[sqlite3.Row]) -> Trace:
    by_round: dict[int, list[TraceStep]] = {}
    for s in steps:
        step = _trace_step(s)
        if step.status == "waiting" and run["status"] == "finished":  # never run: a gate ended its round
            step = step.model_copy(update={"status": "skipped"})
        by_round.setdefault(s["round"], []).append(step)
    trace_rounds = [_trace_round(r, by_round.get(r["round"], [])) for r in rounds]
    return Trace(
        run_id=run["id"],
        conversation_id=run["conversation_id"],
        question=run["question"],
        answer=run["answer"],
        status=run["status"],
        failure=run["failure"],
        mode=run["mode"],
        system=run["system"],
        source=run["source"],
        conductor=TraceConductor(
            backend=run["conductor_backend"],
            model=run["conductor_model"],
            adapter=run["conductor_adapter"],
            reason=run["conductor_reason"],
            # The conductor's tokens are those of its rounds, or, when a plan failed (its attempts
            # are paid for but make no round), what the run spent beyond its steps.
            usage=TokenUsage(
                prompt_tokens=max(
                    sum(r.usage.prompt_tokens for r in trace_rounds), _beyond_steps(run, steps, "prompt_tokens")
                ),
                completion_tokens=max(
                    sum(r.usage.completion_tokens for r in trace_rounds), _beyond_steps(run, steps, "completion_tokens")
                ),
            ),
        ),
        rounds=trace_rounds,
        totals=TraceTotals(
            prompt_tokens=run["prompt_tokens"],
            completion_tokens=run["completion_tokens"],
            cost_usd=run["cost_usd"],
            latency_s=run["latency_s"],
            estimated=bool(run["estimated"]),
        ),
        created_at=run["created_at"],
        finished_at=run["finished_at"],
        error=run["error"],
        fork=_trace_fork(run, steps),
    )


def _trace_fork(run: sqlite3.Row, steps: list[sqlite3.Row]) -> TraceFork | None:
    """Where a branch forks from (schema V8), with the model and subtask its forked step ran."""
    if run["fork_of"] is None:
        return None
    forked = next((s for s in steps if s["round"] == run["fork_round"] and s["idx"] == run["fork_step"]), None)
    return TraceFork(
        of=run["fork_of"],
        round=run["fork_round"] or 1,
        index=run["fork_step"] or 0,
        model=forked["model"] if forked is not None else None,
        subtask=forked["subtask"] if forked is not None else "",
        branch=run["branch"] or 1,
    )


def _trace_round(r: sqlite3.Row, steps: list[TraceStep]) -> TraceRound:
    return TraceRound(
        round=r["round"],
        reasoning=r["reasoning"],
        workflow=TraceWorkflow(**json.loads(r["workflow"])) if r["workflow"] is not None else None,
        keep_previous=bool(r["keep_previous"]),
        usage=TokenUsage(prompt_tokens=r["prompt_tokens"], completion_tokens=r["completion_tokens"]),
        latency_s=r["latency_s"],
        steps=steps,
        preference=r["preference"],
    )


def _trace_step(s: sqlite3.Row) -> TraceStep:
    return TraceStep(
        index=s["idx"],
        model=s["model"],
        subtask=s["subtask"],
        access=json.loads(s["access"]),
        status=s["status"],
        output=s["output"],
        usage=TokenUsage(prompt_tokens=s["prompt_tokens"], completion_tokens=s["completion_tokens"]),
        cost_usd=s["cost_usd"],
        latency_s=s["latency_s"],
        attempts=s["attempts"],
        attempt_log=[AttemptRecord(**entry) for entry in json.loads(s["attempt_log"])],
        error=s["error"],
    )

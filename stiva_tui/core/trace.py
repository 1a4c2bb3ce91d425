"""The trace of one run, typed: what the history keeps and every front end reads back.

`stiva ask --json`, the API's `stiva_trace`, the exports and a reopened conversation all use this
one type. The store builds it (`Store.get_trace`); `RunState.from_trace` draws it; `model_dump()`
gives the JSON shape of `stiva ask --json`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from .words import FailureReason, RunMode, RunStatus, Source, TraceStepStatus
from .workflow import Workflow, WorkflowParseError, workflow_from_lists


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)


class TokenUsage(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class AttemptRecord(_Record):
    """One failed attempt of a step: on which model, and why."""

    model: str
    error: str
    attempt: int


class TraceStep(_Record):
    index: int
    model: str | None = None
    subtask: str = ""
    access: list[int] = Field(default_factory=list)
    status: TraceStepStatus = "waiting"
    output: str = ""
    usage: TokenUsage = Field(default_factory=TokenUsage)
    cost_usd: float = 0.0
    latency_s: float = 0.0
    attempts: int = 0
    attempt_log: list[AttemptRecord] = Field(default_factory=list)
    error: str | None = None

    @property
    def first_model(self) -> str | None:
        """The model the conductor chose (before any fallback)."""
        return self.attempt_log[0].model if self.attempt_log else self.model

    @property
    def kept(self) -> bool:
        """In a branch: a step not run again, whose output is the original run's (no call, no
        cost; engine/fork.py records it with no attempt)."""
        return self.status == "finished" and self.attempts == 0

    @property
    def on_fallback(self) -> bool:
        return any(entry.model != self.model for entry in self.attempt_log)


class TraceWorkflow(_Record):
    """The round's plan in the paper's three lists."""

    model_id: list[int] = Field(default_factory=list)
    subtasks: list[str] = Field(default_factory=list)
    access_list: list[list[int] | str] = Field(default_factory=list)

    def workflow(self) -> Workflow | None:
        """The `Workflow` again (None when the stored lists no longer validate)."""
        try:
            return workflow_from_lists(
                self.model_dump(),
                pool_size=max(self.model_id, default=0) + 1,
                max_steps=max(len(self.model_id), 1),
                allow_empty=True,
            )
        except WorkflowParseError:
            return None


# Stiva's own note on a round's plan (one step for one model, the plan replaced or flagged by the
# guard, no plan written) closes the round's reasoning as "[Stiva: <note>]": engine.executor writes
# it, the runtime searches the history for it, and TraceRound.note reads it back.
NOTE_MARK = "[Stiva: "


def marked_note(note: str) -> str:
    """`note` as it closes a round's reasoning."""
    return f"{NOTE_MARK}{note}]"


class TraceRound(_Record):
    round: int
    reasoning: str = ""
    workflow: TraceWorkflow | None = None
    keep_previous: bool = False
    usage: TokenUsage = Field(default_factory=TokenUsage)
    latency_s: float = 0.0
    steps: list[TraceStep] = Field(default_factory=list)
    preference: str | None = None  # what the plan was made under ("cheap", "0.4"); None: none stated

    @property
    def note(self) -> str:
        """Stiva's note on this round's plan (`marked_note`), or "" where the plan ran as written."""
        _, mark, note = self.reasoning.rpartition(NOTE_MARK)
        return note.strip().removesuffix("]") if mark else ""

    def shape(self) -> str:
        """single, chain, parallel, fan-in, dag; "direct" for a round without a plan."""
        workflow = self.workflow.workflow() if self.workflow is not None else None
        return workflow.shape() if workflow is not None else ("direct" if self.workflow is None else "workflow")


class TraceConductor(_Record):
    """Who planned, and what it runs on (the last fields are filled where the front end knows)."""

    backend: str | None = None
    model: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    adapter: str | None = None
    reason: str | None = None
    quantization: str | None = None
    device: str | None = None
    grammar: bool | None = None
    memory_mb: float | None = None
    load_s: float | None = None


class TraceTotals(_Record):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    estimated: bool = False


class TraceFork(_Record):
    """Where a branch comes from: run `of`'s step `index` (0-based) of round `round`, run again on
    `model` (with `subtask`); `branch` numbers the run's branches from 1."""

    of: str
    round: int
    index: int
    model: str | None = None
    subtask: str = ""
    branch: int = 1


class Trace(_Record):
    run_id: str
    conversation_id: str | None = None
    question: str = ""
    answer: str | None = None
    status: RunStatus = "running"
    # Why a run did not finish (None when it finished or is still running).
    failure: FailureReason | None = None
    mode: RunMode = "conductor"
    system: str = "conductor"
    source: Source = "tui"
    conductor: TraceConductor = Field(default_factory=TraceConductor)
    rounds: list[TraceRound] = Field(default_factory=list)
    totals: TraceTotals = Field(default_factory=TraceTotals)
    created_at: str = ""
    finished_at: str | None = None
    error: str | None = None
    # A branch: where it forks from (None for a run of its own); a run: its branches, oldest first.
    fork: TraceFork | None = None
    branches: list["Trace"] = Field(default_factory=list)

    @property
    def step_count(self) -> int:
        return sum(len(r.steps) for r in self.rounds)

    def last_output(self) -> str:
        """The text of the last step that wrote any (what a stopped run had streamed)."""
        for round_ in reversed(self.rounds):
            for step in reversed(round_.steps):
                if step.output:
                    return step.output
        return ""

    def partial_answer(self) -> str:
        """The answer, or else what the answering step of the last round had written."""
        if self.answer is not None:
            return self.answer
        for round_ in reversed(self.rounds):
            if round_.steps:
                return round_.steps[-1].output
        return ""

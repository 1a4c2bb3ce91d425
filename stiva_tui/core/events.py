"""The event stream: the only interface between the engine and its front ends.

Every event is a small immutable dataclass carrying `run_id`. The engine hands each event to its
subscribers in order: the history's recorder is one, and the TUI, the CLI and the server are
others. A run's first event is `RunStarted` and its last is exactly one of `TERMINAL_EVENTS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .usage import Usage
from .words import FailureReason, RunMode, Source
from .workflow import Workflow

__all__ = ["Usage"]  # re-exported: front ends import everything event-shaped from here


@dataclass(frozen=True)
class Totals:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    estimated: bool = False
    # The part of the above that the conductor's planning took (failed attempts included).
    conductor_tokens: int = 0
    conductor_cost_usd: float = 0.0


@dataclass(frozen=True)
class Event:
    run_id: str


@dataclass(frozen=True)
class ForkOrigin:
    """Where a branch comes from: run `run_id`'s step `index` (0-based) of round `round`, run
    again on `model` with `subtask` (engine/fork.py). `branch` numbers the run's branches from 1."""

    run_id: str
    round: int
    index: int
    model: str
    subtask: str
    branch: int = 1


@dataclass(frozen=True)
class RunStarted(Event):
    question: str
    mode: RunMode
    conductor_backend: str | None = None
    conductor_model: str | None = None
    conductor_reason: str | None = None  # why this backend was chosen (auto selection)
    # What ran, as the history and compare mode name it: "conductor", "conductor-mini",
    # "direct:<model>", "moa", "workflow".
    system: str = ""
    source: Source = "cli"
    conversation_id: str | None = None
    conductor_adapter: str | None = None  # a LoRA adapter on the conductor's model
    fork: ForkOrigin | None = None  # a branch of a finished run (engine/fork.py); None for a new run


@dataclass(frozen=True)
class RoundStarted(Event):
    round: int  # 1-based


@dataclass(frozen=True)
class ConductorDelta(Event):
    round: int
    text: str


@dataclass(frozen=True)
class WorkflowReady(Event):
    round: int
    workflow: Workflow
    reasoning: str  # the conductor's text before the lists
    usage: Usage
    latency_s: float
    keep_previous: bool = False  # empty lists in a later round: the previous answer stands
    note: str = ""  # what Stiva changed about the plan, and why ("plan replaced by one step on ...")
    preference: str = ""  # the user's preference the plan was made under ("cheap"); "" for none


@dataclass(frozen=True)
class StepEstimate:
    """What one planned step is expected to cost, before any call (engine/estimate.py)."""

    index: int
    model: str
    prompt_tokens: int  # its prompt, counted (so as not to undercount), plus the expected outputs it reads
    completion_tokens: int  # the model's typical answer: the history's median, else a default
    cost_usd: float
    price_in: float = 0.0  # USD per 1M tokens, for a live cost while it streams
    price_out: float = 0.0
    source: str = "default"  # where completion_tokens come from: "history" | "default" | "max_tokens" | "none"


@dataclass(frozen=True)
class PlanEstimated(Event):
    """A round's plan priced before its workers run: each step's expected tokens and cost.
    `kept` steps run (all of them, unless the budget cut the plan to fit: the steps after are
    skipped, `StepSkipped`); `note` says what the budget did ("" when nothing)."""

    round: int
    steps: tuple[StepEstimate, ...]
    cost_usd: float  # the whole plan's expected cost
    budget_usd: float | None = None
    spent_usd: float = 0.0  # what the run had cost before this plan (its planning, earlier rounds)
    kept: int = 0
    note: str = ""


@dataclass(frozen=True)
class StepStarted(Event):
    round: int
    index: int
    model: str
    subtask: str
    access: tuple[int, ...]
    attempt: int = 1
    # The step whose output is its round's answer: the last step of the workflow. `final`: it is
    # also the run's answer for certain, since no later round can replace it.
    writes_answer: bool = False
    final: bool = False


@dataclass(frozen=True)
class StepDelta(Event):
    round: int
    index: int
    text: str


@dataclass(frozen=True)
class StepFinished(Event):
    round: int
    index: int
    model: str
    output: str
    usage: Usage
    cost_usd: float
    latency_s: float
    attempts: int
    # A vote's or a gate's count ("2 of 2 agree: 42", "disagree (42, 41): asking gpt-4o");
    # "" for a call.
    note: str = ""


@dataclass(frozen=True)
class StepSkipped(Event):
    """A step that never ran, and was never paid: an agreement gate before it ended the round."""

    round: int
    index: int
    model: str  # the model it would have run on
    reason: str


@dataclass(frozen=True)
class StepFailed(Event):
    round: int
    index: int
    model: str
    error: str
    attempt: int
    # The model the step moves to next (a fallback), or None when it gives up.
    fallback: str | None = None


@dataclass(frozen=True)
class RunFinished(Event):
    answer: str
    totals: Totals


@dataclass(frozen=True)
class RunFailed(Event):
    error: str
    totals: Totals = field(default_factory=Totals)
    reason: FailureReason = "internal"


@dataclass(frozen=True)
class SubscriberFailed(Event):
    """A subscriber (the history's recorder, a front end) raised on an event. The run goes on;
    the other subscribers hear of it once per subscriber and run."""

    subscriber: str
    error: str


@dataclass(frozen=True)
class RunCancelled(Event):
    totals: Totals = field(default_factory=Totals)


TERMINAL_EVENTS = (RunFinished, RunFailed, RunCancelled)

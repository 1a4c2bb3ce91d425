"""What a front end knows about one run, built from the engine's events (or a stored trace).

`RunState.apply(event)` folds one event in and returns the keys of what changed, so a widget can
redraw only those parts. Step text arrives in many small deltas: `StepState.append()` is O(1) and
the joined text is built only when asked for.

`RunState.live()` is the run's tokens and cost as they stand: what ended calls reported, plus, while
a plan or an answer streams, an estimate of what it has spent so far (marked `estimated`, and never
under the provider's count: core/usage.py). A cancelled step keeps that estimate as its spend.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import events as ev
from .trace import Trace
from .usage import estimate_text_tokens

# Keys returned by apply(): ("run",), ("plan", round), ("step", round, index)
Key = tuple[str | int, ...]


@dataclass
class Attempt:
    model: str
    error: str
    attempt: int
    fallback: str | None


@dataclass
class StepState:
    round: int
    index: int
    model: str = ""
    subtask: str = ""
    access: tuple[int, ...] = ()
    access_all: bool = False
    status: str = "waiting"  # waiting | running | finished | failed | cancelled | skipped
    note: str = ""  # a vote's or a gate's count; why a step was skipped
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    cost_usd: float = 0.0
    latency_s: float | None = None
    attempt: int = 1
    failures: list[Attempt] = field(default_factory=list)
    started_at: float | None = None
    writes_answer: bool = False  # the last step of its round's workflow
    # The plan's estimate before any call (PlanEstimated): None until the plan is priced.
    expected_cost: float | None = None
    expected_prompt: int = 0
    expected_completion: int = 0
    expected_source: str = ""
    price_in: float = 0.0  # USD per 1M tokens of the planned model, for the live cost
    price_out: float = 0.0
    _parts: list[str] = field(default_factory=list)
    _chars: int = 0
    _text: str | None = ""

    def append(self, text: str) -> None:
        self._parts.append(text)
        self._chars += len(text)
        self._text = None

    def reset_output(self, text: str = "") -> None:
        self._parts = [text] if text else []
        self._chars = len(text)
        self._text = text

    @property
    def output(self) -> str:
        if self._text is None:
            self._text = "".join(self._parts)
            self._parts = [self._text]
        return self._text

    @property
    def streamed_chars(self) -> int:
        return self._chars

    def live(self) -> tuple[int, int, float]:
        """(prompt, completion, cost) spent so far while the step streams: its prompt as the plan's
        estimate counted it, and its text so far; estimates, never under the provider's count."""
        completion = estimate_text_tokens(self.output) if self._text is not None else -(-self._chars // 3)
        prompt = self.expected_prompt
        return prompt, completion, (prompt * self.price_in + completion * self.price_out) / 1e6

    @property
    def first_model(self) -> str:
        return self.failures[0].model if self.failures else self.model

    @property
    def on_fallback(self) -> bool:
        return any(f.model != self.model for f in self.failures)


@dataclass
class RoundState:
    round: int
    reasoning: str = ""
    planning: bool = True
    keep_previous: bool = False
    note: str = ""  # Stiva's change to the plan (a garbled plan replaced, an instant plan)
    preference: str = ""  # the user's preference the plan was made under ("" for none)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float | None = None
    estimated: bool = False  # the planner's usage is an estimate (its stream closed before its count)
    expected_cost: float | None = None  # the plan's estimate before its calls (PlanEstimated)
    budget_note: str = ""  # what the budget did to the plan ("cut to 2 of 3 steps"), "" for nothing
    steps: list[StepState] = field(default_factory=list)
    _conductor_parts: list[str] = field(default_factory=list)

    @property
    def conductor_text(self) -> str:
        return self.reasoning if not self.planning else "".join(self._conductor_parts)


@dataclass
class RunState:
    question: str = ""
    run_id: str = ""
    status: str = "idle"  # idle, or a RunStatus: running | finished | failed | cancelled | interrupted
    mode: str = "conductor"
    system: str = ""
    conductor_backend: str | None = None
    conductor_model: str | None = None
    conductor_reason: str | None = None
    conductor_adapter: str | None = None
    answer: str = ""
    error: str = ""
    failure: str | None = None  # a FailureReason once the run failed or was cancelled
    # Subscribers that failed during the run (e.g. the history could not be written).
    warnings: list[str] = field(default_factory=list)
    rounds: list[RoundState] = field(default_factory=list)
    totals: ev.Totals | None = None
    started_at: float | None = None
    # The pool's model ids in the conductor's numbering: names a planned step before it starts.
    model_names: list[str] = field(default_factory=list)
    # Running sums, for the status bar while the run is still going.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    estimated: bool = False  # some of the sums above are estimates

    def live(self) -> tuple[int, int, float, bool]:
        """(prompt, completion, cost, estimated) as they stand: the ended calls' counts plus what
        every plan and answer still streaming has spent so far (estimated, so `estimated` is True).
        Once the run has ended, its totals."""
        prompt, completion, cost = self.prompt_tokens, self.completion_tokens, self.cost_usd
        estimated = self.estimated
        if self.totals is not None:
            return prompt, completion, cost, estimated
        for r in self.rounds:
            if r.planning and r._conductor_parts:
                completion += estimate_text_tokens(r.conductor_text)
                estimated = True
            for s in r.steps:
                if s.status == "running":
                    p, c, usd = s.live()
                    prompt, completion, cost, estimated = prompt + p, completion + c, cost + usd, True
        return prompt, completion, cost, estimated

    def round(self, number: int) -> RoundState:
        while len(self.rounds) < number:
            self.rounds.append(RoundState(len(self.rounds) + 1))
        return self.rounds[number - 1]

    def step(self, round_: int, index: int) -> StepState:
        steps = self.round(round_).steps
        while len(steps) <= index:
            steps.append(StepState(round_, len(steps)))
        return steps[index]

    def running_steps(self) -> list[StepState]:
        return [s for r in self.rounds for s in r.steps if s.status == "running"]

    def elapsed(self) -> float:
        if self.totals is not None:
            return self.totals.latency_s
        return time.monotonic() - self.started_at if self.started_at else 0.0

    # --- events --------------------------------------------------------------------------------

    def apply(self, event: ev.Event) -> list[Key]:
        """Fold one event in; return what changed."""
        handler = _HANDLERS.get(type(event))
        return handler(self, event) if handler else []

    def _run_started(self, e: ev.RunStarted) -> list[Key]:
        self.run_id, self.question, self.mode, self.system = e.run_id, e.question, e.mode, e.system
        self.conductor_backend, self.conductor_model = e.conductor_backend, e.conductor_model
        self.conductor_reason, self.conductor_adapter = e.conductor_reason, e.conductor_adapter
        self.status = "running"
        self.started_at = time.monotonic()
        return [("run",)]

    def _round_started(self, e: ev.RoundStarted) -> list[Key]:
        self.round(e.round)
        return [("round", e.round)]

    def _conductor_delta(self, e: ev.ConductorDelta) -> list[Key]:
        self.round(e.round)._conductor_parts.append(e.text)
        return [("plan", e.round)]

    def _workflow_ready(self, e: ev.WorkflowReady) -> list[Key]:
        r = self.round(e.round)
        r.planning = False
        r.reasoning = e.reasoning
        r.keep_previous = e.keep_previous
        r.note = e.note
        r.preference = e.preference
        r.prompt_tokens, r.completion_tokens = e.usage.prompt_tokens, e.usage.completion_tokens
        r.latency_s = e.latency_s
        r.estimated = e.usage.estimated
        self.prompt_tokens += e.usage.prompt_tokens
        self.completion_tokens += e.usage.completion_tokens
        self.estimated = self.estimated or e.usage.estimated
        keys: list[Key] = [("plan", e.round), ("run",)]
        for i, step in enumerate(e.workflow.steps):
            s = self.step(e.round, i)
            s.subtask, s.access, s.access_all = step.subtask, tuple(step.access), step.access_all
            if not s.model and 0 <= step.model < len(self.model_names):
                s.model = self.model_names[step.model]
            keys.append(("step", e.round, i))
        return keys

    def _plan_estimated(self, e: ev.PlanEstimated) -> list[Key]:
        r = self.round(e.round)
        r.expected_cost, r.budget_note = e.cost_usd, e.note
        keys: list[Key] = [("plan", e.round)]
        for estimate in e.steps:
            s = self.step(e.round, estimate.index)
            s.expected_cost, s.expected_source = estimate.cost_usd, estimate.source
            s.expected_prompt, s.expected_completion = estimate.prompt_tokens, estimate.completion_tokens
            s.price_in, s.price_out = estimate.price_in, estimate.price_out
            keys.append(("step", e.round, estimate.index))
        return keys

    def _step_started(self, e: ev.StepStarted) -> list[Key]:
        s = self.step(e.round, e.index)
        s.model, s.subtask, s.access, s.attempt = e.model, e.subtask, tuple(e.access), e.attempt
        s.writes_answer = e.writes_answer
        s.status = "running"
        s.started_at = s.started_at or time.monotonic()
        s.reset_output()  # a retry starts its output afresh
        return [("step", e.round, e.index)]

    def _step_delta(self, e: ev.StepDelta) -> list[Key]:
        self.step(e.round, e.index).append(e.text)
        return [("step", e.round, e.index)]

    def _step_finished(self, e: ev.StepFinished) -> list[Key]:
        s = self.step(e.round, e.index)
        s.model, s.status = e.model, "finished"
        s.reset_output(e.output)
        s.prompt_tokens, s.completion_tokens = e.usage.prompt_tokens, e.usage.completion_tokens
        s.estimated = e.usage.estimated
        s.cost_usd, s.latency_s, s.attempt = e.cost_usd, e.latency_s, e.attempts
        s.note = e.note
        self.estimated = self.estimated or e.usage.estimated
        self.prompt_tokens += e.usage.prompt_tokens
        self.completion_tokens += e.usage.completion_tokens
        self.cost_usd += e.cost_usd
        return [("step", e.round, e.index), ("run",)]

    def _step_skipped(self, e: ev.StepSkipped) -> list[Key]:
        s = self.step(e.round, e.index)
        s.status, s.note, s.model = "skipped", e.reason, e.model
        return [("step", e.round, e.index)]

    def _step_failed(self, e: ev.StepFailed) -> list[Key]:
        s = self.step(e.round, e.index)
        s.failures.append(Attempt(e.model, e.error, e.attempt, e.fallback))
        if e.fallback is None:
            s.status = "failed"
        return [("step", e.round, e.index)]

    def _run_ended(self, e: ev.RunFinished | ev.RunFailed | ev.RunCancelled) -> list[Key]:
        # A step stopped mid-answer keeps what it spent (the engine's totals count it too).
        for r in self.rounds:
            for s in r.steps:
                if s.status == "running" and self.status == "running":
                    s.prompt_tokens, s.completion_tokens, s.cost_usd = s.live()
                    s.estimated = True
        self.totals = e.totals
        # The engine's totals are the run's count: they hold what a stopped call spent.
        self.prompt_tokens, self.completion_tokens = e.totals.prompt_tokens, e.totals.completion_tokens
        self.cost_usd, self.estimated = e.totals.cost_usd, e.totals.estimated
        if isinstance(e, ev.RunFinished):
            self.status, self.answer = "finished", e.answer
        elif isinstance(e, ev.RunFailed):
            self.status, self.error, self.failure = "failed", e.error, e.reason
        else:
            self.status, self.failure = "cancelled", "cancelled"
        keys: list[Key] = [("run",)]
        for r in self.rounds:
            if r.planning and self.status != "finished":
                r.planning = False
                r.reasoning = "".join(r._conductor_parts)
                keys.append(("plan", r.round))
            for s in r.steps:
                if s.status in ("running", "waiting") and self.status != "finished":
                    s.status = "cancelled" if self.status == "cancelled" or s.status == "running" else s.status
                    keys.append(("step", s.round, s.index))
        return keys

    def _subscriber_failed(self, e: ev.SubscriberFailed) -> list[Key]:
        self.warnings.append(f"{e.subscriber}: {e.error}")
        return [("run",)]

    # --- a stored trace ------------------------------------------------------------------------

    @classmethod
    def from_trace(cls, trace: Trace) -> "RunState":
        """Rebuild the state of a stored run (finished, failed, cancelled or interrupted)."""
        c = trace.conductor
        state = cls(
            question=trace.question,
            run_id=trace.run_id,
            status=trace.status,
            mode=trace.mode,
            system=trace.system,
            conductor_backend=c.backend,
            conductor_model=c.model,
            conductor_reason=c.reason,
            conductor_adapter=c.adapter,
            answer=trace.answer or "",
            error=trace.error or "",
            failure=trace.failure,
        )
        if state.status == "running":  # a run this process never saw end: show it as stopped
            state.status = "interrupted"
        t = trace.totals
        state.totals = ev.Totals(t.prompt_tokens, t.completion_tokens, t.cost_usd, t.latency_s, t.estimated)
        state.prompt_tokens, state.completion_tokens = t.prompt_tokens, t.completion_tokens
        state.cost_usd, state.estimated = t.cost_usd, t.estimated
        for rd in trace.rounds:
            r = state.round(rd.round)
            r.planning = False
            r.reasoning = rd.reasoning
            r.keep_previous = rd.keep_previous
            r.preference = rd.preference or ""
            r.prompt_tokens, r.completion_tokens = rd.usage.prompt_tokens, rd.usage.completion_tokens
            r.latency_s = rd.latency_s
            lists = rd.workflow
            if lists is not None:
                for i, acc in enumerate(lists.access_list):
                    s = state.step(r.round, i)
                    s.access_all = isinstance(acc, str)
                    s.access = tuple(range(i)) if isinstance(acc, str) else tuple(acc)
                    s.subtask = lists.subtasks[i] if i < len(lists.subtasks) else ""
                    s.writes_answer = i == len(lists.access_list) - 1
            for sd in rd.steps:
                s = state.step(r.round, sd.index)
                s.model, s.subtask = sd.model or "", sd.subtask or s.subtask
                if not s.access_all:
                    s.access = tuple(sd.access)
                s.status = sd.status
                if s.status == "running" or (s.status == "waiting" and state.status != "finished"):
                    s.status = "interrupted" if state.status == "interrupted" else "cancelled"
                s.reset_output(sd.output)
                s.prompt_tokens, s.completion_tokens = sd.usage.prompt_tokens, sd.usage.completion_tokens
                s.cost_usd, s.latency_s = sd.cost_usd, sd.latency_s
                s.attempt = sd.attempts or 1
                log = sd.attempt_log
                for n, entry in enumerate(log):
                    following = log[n + 1].model if n + 1 < len(log) else (s.model if s.status == "finished" else None)
                    s.failures.append(Attempt(entry.model, entry.error, entry.attempt, following))
            if state.status == "finished":  # a planned step with no record of its own: a gate skipped it
                for s in r.steps:
                    if s.status == "waiting":
                        s.status = "skipped"
        return state


# Each handler takes the event type it is filed under.
_HANDLERS: dict[type[ev.Event], Callable[[RunState, Any], list[Key]]] = {
    ev.RunStarted: RunState._run_started,
    ev.RoundStarted: RunState._round_started,
    ev.ConductorDelta: RunState._conductor_delta,
    ev.WorkflowReady: RunState._workflow_ready,
    ev.PlanEstimated: RunState._plan_estimated,
    ev.StepStarted: RunState._step_started,
    ev.StepDelta: RunState._step_delta,
    ev.StepFinished: RunState._step_finished,
    ev.StepFailed: RunState._step_failed,
    ev.StepSkipped: RunState._step_skipped,
    ev.RunFinished: RunState._run_ended,
    ev.RunFailed: RunState._run_ended,
    ev.RunCancelled: RunState._run_ended,
    ev.SubscriberFailed: RunState._subscriber_failed,
}

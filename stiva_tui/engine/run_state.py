"""What a front end knows about one run, built from the engine's events (or a stored trace).

`RunState.apply(event)` folds one event in and returns the keys of what changed, so a widget can
redraw only those parts. Step text arrives in many small deltas: `StepState.append()` is O(1) and
the joined text is built only when asked for.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from . import events as ev

# Keys returned by apply(): ("run",), ("plan", round), ("step", round, index)
Key = tuple


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
    status: str = "waiting"  # waiting | running | finished | failed | cancelled
    prompt_tokens: int = 0
    completion_tokens: int = 0
    estimated: bool = False
    cost_usd: float = 0.0
    latency_s: float | None = None
    attempt: int = 1
    failures: list[Attempt] = field(default_factory=list)
    started_at: float | None = None
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
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float | None = None
    steps: list[StepState] = field(default_factory=list)
    _conductor_parts: list[str] = field(default_factory=list)

    @property
    def conductor_text(self) -> str:
        return self.reasoning if not self.planning else "".join(self._conductor_parts)


@dataclass
class RunState:
    question: str = ""
    run_id: str = ""
    status: str = "idle"  # idle | running | finished | failed | cancelled
    mode: str = "conductor"
    conductor_backend: str | None = None
    conductor_model: str | None = None
    conductor_reason: str | None = None
    answer: str = ""
    error: str = ""
    rounds: list[RoundState] = field(default_factory=list)
    totals: ev.Totals | None = None
    started_at: float | None = None
    # The pool's model ids in the conductor's numbering: names a planned step before it starts.
    model_names: list[str] = field(default_factory=list)
    # Running sums, for the status bar while the run is still going.
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0

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
        self.run_id, self.question, self.mode = e.run_id, e.question, e.mode
        self.conductor_backend, self.conductor_model = e.conductor_backend, e.conductor_model
        self.conductor_reason = e.conductor_reason
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
        r.prompt_tokens, r.completion_tokens = e.usage.prompt_tokens, e.usage.completion_tokens
        r.latency_s = e.latency_s
        self.prompt_tokens += e.usage.prompt_tokens
        self.completion_tokens += e.usage.completion_tokens
        keys: list[Key] = [("plan", e.round), ("run",)]
        for i, step in enumerate(e.workflow.steps):
            s = self.step(e.round, i)
            s.subtask, s.access, s.access_all = step.subtask, tuple(step.access), step.access_all
            if not s.model and 0 <= step.model < len(self.model_names):
                s.model = self.model_names[step.model]
            keys.append(("step", e.round, i))
        return keys

    def _step_started(self, e: ev.StepStarted) -> list[Key]:
        s = self.step(e.round, e.index)
        s.model, s.subtask, s.access, s.attempt = e.model, e.subtask, tuple(e.access), e.attempt
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
        self.prompt_tokens += e.usage.prompt_tokens
        self.completion_tokens += e.usage.completion_tokens
        self.cost_usd += e.cost_usd
        return [("step", e.round, e.index), ("run",)]

    def _step_failed(self, e: ev.StepFailed) -> list[Key]:
        s = self.step(e.round, e.index)
        s.failures.append(Attempt(e.model, e.error, e.attempt, e.fallback))
        if e.fallback is None:
            s.status = "failed"
        return [("step", e.round, e.index)]

    def _run_ended(self, e: ev.Event) -> list[Key]:
        self.totals = e.totals
        if isinstance(e, ev.RunFinished):
            self.status, self.answer = "finished", e.answer
        elif isinstance(e, ev.RunFailed):
            self.status, self.error = "failed", e.error
        else:
            self.status = "cancelled"
        keys: list[Key] = [("run",)]
        for r in self.rounds:
            if r.planning and self.status != "finished":
                r.planning = False
                r.reasoning = "".join(r._conductor_parts)
                keys.append(("plan", r.round))
            for s in r.steps:
                if s.status in ("running", "waiting") and self.status != "finished":
                    s.status = "cancelled" if self.status == "cancelled" else s.status
                    keys.append(("step", s.round, s.index))
        return keys

    # --- a stored trace ------------------------------------------------------------------------

    @classmethod
    def from_trace(cls, trace: dict[str, Any]) -> "RunState":
        """Rebuild the state of a finished (or cancelled) run from `Store.get_trace()`."""
        conductor = trace.get("conductor") or {}
        state = cls(question=trace.get("question") or "", run_id=trace.get("run_id") or "",
                    status=trace.get("status") or "finished", mode=trace.get("mode") or "conductor",
                    conductor_backend=conductor.get("backend"), conductor_model=conductor.get("model"),
                    answer=trace.get("answer") or "", error=trace.get("error") or "")
        if state.status == "running":  # a run the app never saw end (it died): show it as stopped
            state.status = "cancelled"
        totals = trace.get("totals") or {}
        state.totals = ev.Totals(totals.get("prompt_tokens", 0), totals.get("completion_tokens", 0),
                                 totals.get("cost_usd", 0.0), totals.get("latency_s", 0.0),
                                 bool(totals.get("estimated")))
        state.prompt_tokens = state.totals.prompt_tokens
        state.completion_tokens = state.totals.completion_tokens
        state.cost_usd = state.totals.cost_usd
        for rd in trace.get("rounds") or []:
            r = state.round(rd["round"])
            r.planning = False
            r.reasoning = rd.get("reasoning") or ""
            r.keep_previous = bool(rd.get("keep_previous"))
            usage = rd.get("usage") or {}
            r.prompt_tokens, r.completion_tokens = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
            r.latency_s = rd.get("latency_s")
            workflow = rd.get("workflow") or {}
            for i, acc in enumerate(workflow.get("access_list") or []):
                s = state.step(r.round, i)
                s.access_all = isinstance(acc, str)
                s.access = tuple(acc) if not s.access_all else ()
                s.subtask = (workflow.get("subtasks") or [""] * (i + 1))[i]
            for sd in rd.get("steps") or []:
                s = state.step(r.round, sd["index"])
                s.model, s.subtask = sd.get("model") or "", sd.get("subtask") or s.subtask
                if not s.access_all:
                    s.access = tuple(sd.get("access") or ())
                s.status = sd.get("status") or "finished"
                if s.status == "running" or (s.status == "waiting" and state.status == "cancelled"):
                    s.status = "cancelled"
                s.reset_output(sd.get("output") or "")
                usage = sd.get("usage") or {}
                s.prompt_tokens, s.completion_tokens = usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)
                s.cost_usd, s.latency_s = sd.get("cost_usd") or 0.0, sd.get("latency_s")
                s.attempt = sd.get("attempts") or 1
                log = sd.get("attempt_log") or []
                for n, entry in enumerate(log):
                    following = log[n + 1]["model"] if n + 1 < len(log) else (s.model if s.status == "finished" else None)
                    s.failures.append(Attempt(entry.get("model", ""), entry.get("error", ""),
                                              entry.get("attempt", n + 1), following))
        return state


_HANDLERS = {
    ev.RunStarted: RunState._run_started,
    ev.RoundStarted: RunState._round_started,
    ev.ConductorDelta: RunState._conductor_delta,
    ev.WorkflowReady: RunState._workflow_ready,
    ev.StepStarted: RunState._step_started,
    ev.StepDelta: RunState._step_delta,
    ev.StepFinished: RunState._step_finished,
    ev.StepFailed: RunState._step_failed,
    ev.RunFinished: RunState._run_ended,
    ev.RunFailed: RunState._run_ended,
    ev.RunCancelled: RunState._run_ended,
}

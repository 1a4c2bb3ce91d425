"""The executor: plans with the conductor and runs each workflow as a DAG of streaming calls.

    engine = Engine(models, worker, conductor=conductor, subscribers=[recorder])
    result = await engine.run(question, emit=print)

Every step starts as soon as each step in its access list has finished, so independent steps run
at the same time. A failing step is retried, then moved to a fallback model; the trace keeps every
attempt. A budget cap stops the run cleanly. Everything is reported as events (core/events.py)
to the engine's subscribers; cancelling the awaiting task cancels every running call and emits
`RunCancelled`. The executor writes nothing itself: the history is one subscriber among others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..conductor.base import (
    Conductor,
    ConductorError,
    Plan,
    PlanRequest,
    PreviousRound,
    WorkerInfo,
    is_simple_question,
)
from ..conductor.guard import degenerate
from ..conductor.prompt import worker_messages
from ..core import open_text
from ..core.answers import Final, Tally, final_answer, tally
from ..core.events import (
    ConductorDelta,
    Event,
    ForkOrigin,
    PlanEstimated,
    RoundStarted,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    StepDelta,
    StepFailed,
    StepFinished,
    StepSkipped,
    StepStarted,
    SubscriberFailed,
    Totals,
    WorkflowReady,
)
from ..core.preference import Preference
from ..core.trace import marked_note
from ..core.usage import Usage, estimate_prompt_tokens, estimate_text_tokens
from ..core.words import FailureReason, RunMode, Source
from ..core.workflow import AGREE, CALL, VOTE, Step, Workflow
from ..pool.types import PoolModel, ProviderError, StepInput, TextDelta, UsageReport, Worker, WorkerPrompt
from .baselines import direct_workflow, moa_workflow
from .estimate import estimate_plan, fit_budget
from .fallback import FallbackEvidence, choose_fallback
from .fork import KEPT_NOTE, ForkPlan

log = logging.getLogger(__name__)

# Anything that takes a run's events: the history's recorder, a front end's view, a queue.
Subscriber = Callable[[Event], None]
Emit = Subscriber

# How a round's note (WorkflowReady.note, and core.trace.marked_note's line of its reasoning) begins when
# the plan was replaced by one step on the fallback model, or flagged by the guard and run as written.
REPLACED_NOTE = "plan replaced by one step on"
FLAGGED_NOTE = "plan flagged by the guard, run as written"
# ... and when nothing was planned: a short question and a pool of one model.
ONE_MODEL_NOTE = "one model in the pool: one step"
# What a vote or a gate is recorded as running on: they call no model.
CONTROL_MODEL = {VOTE: "(vote)", AGREE: "(agreement)"}
# What an agreement gate's judge is asked, where open answers do not agree by text and
# `open_agreement = "judge"` (_open_agreement); and the round's note where a vote or a cascade gave
# way to one model because a live question's answers cannot be compared (_single_if_open).
AGREE_JUDGE_SUBTASK = "Do these answers agree in substance? (yes or no)"
OPEN_NOTE = "one model for an open question"
JUDGE_SUBTASK = (
    "The answers shown disagree, or give no short final answer to compare. Pick the best one and "
    "give it in full as your answer."
)


@dataclass(frozen=True)
class RunOptions:
    rounds: int = 1
    max_steps: int = 5
    budget_usd: float | None = None
    budget_tokens: int | None = None
    max_tokens: int | None = None  # per worker call
    deadline_s: float | None = None  # the longest one worker call may take, start to end
    temperature: float | None = None
    retries: int = 1  # extra tries of a step on its own model before a fallback
    fallbacks: tuple[str, ...] | None = None  # model ids; None: the other pool models; (): none
    max_fallbacks: int = 2
    stop: tuple[str, ...] = ()  # stop sequences for the last step of each round (the answer)
    # A pass-through's messages (an API request naming a pool model): sent unchanged to the
    # one step of a direct run, instead of a worker prompt. Not to a worker that builds its own
    # prompt (the embedded base model: `step_prompt`).
    messages: tuple[dict[str, Any], ...] | None = None
    # The user's cost and latency preference, told to the conductor (core/preference.py). It never
    # moves the hard caps above: max_steps bounds the plan, the budget bounds the run.
    preference: Preference | None = None
    # How votes and agreement gates read a step's final answer (core/answers.py): the question's
    # kind where it is known (a bench item's), else "auto".
    answer_kind: str = "auto"
    # A `choice` question's option texts in letter order, where known (a bench item's), read as its
    # grader reads them: only their letters count, and an answer that is an option's text is its letter.
    answer_options: tuple[str, ...] = ()
    # Who a tie or an agreement returns (core/answers.py's `tally`): pool model ids, best first (a
    # bench on recorded answers: by accuracy on their train half). Models not named rank after,
    # cheapest first, then by id: never by the order the plan lists its steps in.
    model_rank: tuple[str, ...] = ()
    # How a vote or a gate compares answers with no final answer (core/open_text.py): "text" (near-
    # identical text agrees, no call) or "judge" (beyond that, a short judge call on the cheapest
    # capable pool model, a step of its own on the tree).
    open_agreement: str = "text"
    # False: this question's answers cannot be compared under open_agreement (a live open question:
    # open_text.comparable); a plan or workflow with a vote or a gate runs one model instead, and the
    # round's note says why. The runtime decides it per question; the engine itself assumes True.
    answers_comparable: bool = True

    @property
    def known_kind(self) -> bool:
        """Whether the question's answers have a known kind (a bench item's), not `auto`."""
        return self.answer_kind != "auto"


AGREEMENT_DEADLINE_S = 5.0
"""The longest one vote's or gate's comparison of final answers (math-verify on two expressions) may
run, counted from when it starts on the comparison thread (`_compare_off_loop`), never while it
waits for that thread; past it the answers count as different."""
AGREEMENT_QUEUE_PATIENCE_S = 60.0
"""The longest a vote's or gate's comparison may wait for the comparison thread, behind other runs'
comparisons (a bench of 16 items at once, a server's many runs); past it the answers count as
different. Generous on purpose: short comparisons queued behind each other never reach it, so a
bench's verdicts do not depend on the load; only a thread held by a comparison that overran its own
deadline (it cannot be interrupted) can make the comparisons behind it wait this long."""

_T = TypeVar("_T")
_comparer: _ComparisonThread | None = None
_comparer_made = threading.Lock()


class _ComparisonThread:
    """One daemon thread that runs the jobs given to it in turn. A daemon, so that a comparison that
    never ends (one past the screen) never holds up the process's exit, as a ThreadPoolExecutor's
    worker, joined at exit, would."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
        threading.Thread(target=self._serve, name="stiva-compare", daemon=True).start()

    def submit(self, work: Callable[[], _T]) -> Future[_T]:
        future: Future[_T] = Future()
        self._jobs.put((future, work))
        return future

    def _serve(self) -> None:
        while True:
            future, work = self._jobs.get()
            if not future.set_running_or_notify_cancel():  # cancelled while queued: never run
                continue
            try:
                future.set_result(work())
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits for it
                future.set_exception(exc)


def _comparison_thread() -> _ComparisonThread:
    """The one thread, in this process, on which votes and gates compare answers: one comparison at
    a time, so none spends its deadline waiting for math-verify's lock (core/answers.py) while
    another run's comparison holds it. Made on first use."""
    global _comparer
    with _comparer_made:
        if _comparer is None:
            _comparer = _ComparisonThread()
        return _comparer


async def _compare_off_loop(work: Callable[[], _T]) -> _T | None:
    """`work()` on the comparison thread: its result; None where it waited past
    AGREEMENT_QUEUE_PATIENCE_S to start (it never runs), or ran past AGREEMENT_DEADLINE_S once
    started (it finishes on its own, unread: a thread cannot be interrupted). Its deadline counts
    from when the loop learns it started, so the loop's own load never shortens it."""
    loop = asyncio.get_running_loop()
    started: asyncio.Future[None] = loop.create_future()

    def mark_started() -> None:
        if not started.done():  # not given up on meanwhile
            started.set_result(None)

    def job() -> _T:
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it
            loop.call_soon_threadsafe(mark_started)
        return work()

    done = asyncio.wrap_future(_comparison_thread().submit(job))
    try:
        await asyncio.wait_for(started, AGREEMENT_QUEUE_PATIENCE_S)
        return await asyncio.wait_for(done, AGREEMENT_DEADLINE_S)
    except TimeoutError:
        return None
    finally:
        done.cancel()  # still queued (given up on, or the run cancelled): it never runs


@dataclass
class RunResult:
    run_id: str
    status: str  # finished | failed | cancelled
    answer: str = ""
    error: str = ""
    totals: Totals = field(default_factory=Totals)
    failure: FailureReason | None = None  # why it did not finish


class BudgetExceeded(Exception):
    pass


class StepError(Exception):
    """A step failed on its model, every retry and every fallback."""

    def __init__(self, round_: int, index: int, message: str):
        self.round = round_
        self.index = index  # 0-based, as in the plan; the message numbers steps from 1, as every view does
        super().__init__(f"step {index + 1} (round {round_}) failed: {message}")


class Engine:
    """Runs questions over `models` (the available pool, numbered as the conductor sees it).

    Every event of every run goes to each of `subscribers` in order, then to the run's own `emit`.
    A subscriber that raises is logged and reported once per run (`SubscriberFailed`) to the
    others; it never stops the run. `source` says which front end the runs come from.
    """

    def __init__(
        self,
        models: Sequence[PoolModel],
        worker: Worker,
        conductor: Conductor | None = None,
        *,
        subscribers: Sequence[Subscriber] = (),
        conductor_reason: str | None = None,
        source: Source = "cli",
        latencies: dict[str, float] | None = None,
        fallback: FallbackEvidence | None = None,
        guard_plans: bool | None = None,
        typical_outputs: dict[str, int] | None = None,
    ):
        self.models = list(models)
        self.worker = worker
        self.conductor = conductor
        self.subscribers = tuple(subscribers)
        self.conductor_reason = conductor_reason
        self.source: Source = source
        # Typical seconds a call per model id (the history's median), for models with none of their own.
        self.latencies = dict(latencies or {})
        # What chooses the model a plan that cannot run is replaced by (engine/fallback.py).
        self.fallback = fallback or FallbackEvidence()
        # Which plans the guard (conductor/guard.py) replaces: None, by the planner's kind (the
        # embedded planner's, whose plans are known to degenerate; any other planner's plan it
        # rejects is flagged in the note and runs as written); True, every plan it rejects (the
        # runtime says so for a planner with a plan replaced or flagged in its recent runs);
        # False, none, and it judges none.
        self.guard_plans = guard_plans
        # Typical answer tokens per model id (the history's median): a plan's estimate before its calls.
        self.typical_outputs = dict(typical_outputs or {})

    # --- public entry points -------------------------------------------------------------------

    async def run(
        self,
        question: str,
        *,
        emit: Emit | None = None,
        conversation: Sequence[dict[str, Any]] = (),
        options: RunOptions | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
        system: str = "conductor",
    ) -> RunResult:
        """Plan with the conductor and run every round. Never raises except CancelledError."""
        if self.conductor is None:
            raise ValueError("this engine has no conductor: use run_workflow, run_direct or run_moa")
        conductor = self.conductor
        run = _Run(self, question, emit, options or RunOptions(), run_id, conversation)

        async def body() -> str:
            run.emit(
                RunStarted(
                    run.id,
                    question,
                    "conductor",
                    conductor.backend,
                    conductor.model,
                    self.conductor_reason,
                    system=system,
                    source=self.source,
                    conversation_id=conversation_id,
                    conductor_adapter=getattr(conductor, "adapter", None),
                )
            )
            previous: PreviousRound | None = None
            answer = ""
            for round_ in range(1, run.options.rounds + 1):
                run.emit(RoundStarted(run.id, round_))
                plan = await self._plan(run, conductor, round_, previous, conversation)
                if plan.workflow.is_empty:
                    break
                workflow = run.priced(round_, plan.workflow, self.models)
                answer = await run.execute(round_, workflow, self.models, final=round_ == run.options.rounds)
                previous = PreviousRound(workflow, answer, tuple(self.models[s.model].id for s in workflow.steps))
            return answer

        return await run.guard(body)

    async def run_workflow(
        self,
        question: str,
        workflow: Workflow,
        models: Sequence[PoolModel],
        *,
        mode: RunMode = "workflow",
        system: str = "workflow",
        emit: Emit | None = None,
        conversation: Sequence[dict[str, Any]] = (),
        options: RunOptions | None = None,
        run_id: str | None = None,
        conversation_id: str | None = None,
    ) -> RunResult:
        """Run a given workflow without planning (one round); `models[i]` is the model of index i.
        Baselines and training rollouts run this way."""
        run = _Run(self, question, emit, options or RunOptions(), run_id, conversation)

        async def body() -> str:
            run.emit(
                RunStarted(run.id, question, mode, system=system, source=self.source, conversation_id=conversation_id)
            )
            run.emit(RoundStarted(run.id, 1))
            single = _single_if_open(run.options, workflow, models)
            if single is not None:
                run.emit(WorkflowReady(run.id, 1, single[0], marked_note(single[1]), Usage(), 0.0, note=single[1]))
                return await run.execute(1, run.priced(1, single[0], models), models, final=True)
            run.emit(WorkflowReady(run.id, 1, workflow, "", Usage(), 0.0))
            return await run.execute(1, run.priced(1, workflow, models), models, final=True)

        return await run.guard(body)

    async def run_fork(
        self,
        plan: ForkPlan,
        models: Sequence[PoolModel],
        *,
        branch: int = 1,
        emit: Emit | None = None,
        conversation: Sequence[dict[str, Any]] = (),
        options: RunOptions | None = None,
        run_id: str | None = None,
    ) -> RunResult:
        """Run a fork of a finished run (engine/fork.py): `models[i]` is step i's model. Only the
        forked step and the steps that read it are called; the others are reported kept. The
        branch is a run of its own (`RunStarted.fork` links it): its totals are what it added."""
        run = _Run(self, plan.question, emit, options or RunOptions(), run_id, conversation)
        origin = ForkOrigin(plan.run_id, plan.round, plan.index, plan.model, plan.subtask, branch)
        note = f"branch {branch} of run {plan.run_id[:8]}: step {plan.step_label} on {plan.model}"

        async def body() -> str:
            run.emit(
                RunStarted(run.id, plan.question, plan.mode, system=f"branch:{branch}", source=self.source, fork=origin)
            )
            run.emit(RoundStarted(run.id, plan.round))
            run.emit(WorkflowReady(run.id, plan.round, plan.workflow, marked_note(note), Usage(), 0.0, note=note))
            return await run.execute(plan.round, plan.workflow, models, final=True, kept=plan.kept)

        return await run.guard(body)

    async def run_direct(self, question: str, model_id: str, **kwargs: Any) -> RunResult:
        """The baseline of one call to one model, through the same executor and events."""
        return await self.run_workflow(
            question, direct_workflow(), [self.model(model_id)], mode="direct", system=f"direct:{model_id}", **kwargs
        )

    async def run_moa(
        self,
        question: str,
        proposers: Sequence[str],
        aggregator: str,
        layers: int = 2,
        samples: bool = False,
        **kwargs: Any,
    ) -> RunResult:
        """Mixture-of-Agents: `layers` layers of proposers (each later layer reads the one before),
        then one aggregator step that reads the last layer. `samples`: Self-MoA's numbered samples."""
        models = [*(self.model(m) for m in proposers), self.model(aggregator)]
        return await self.run_workflow(
            question,
            moa_workflow(len(proposers), layers, samples),
            models,
            mode="moa",
            system="self-moa" if samples else "moa",
            **kwargs,
        )

    def stream(self, method: str, *args: Any, **kwargs: Any) -> AsyncIterator[Event]:
        """Iterate a run's events: `async for event in engine.stream("run", question)`."""
        return events_of(lambda emit: getattr(self, method)(*args, emit=emit, **kwargs))

    def model(self, model_id: str) -> PoolModel:
        for model in self.models:
            if model.id == model_id:
                return model
        raise KeyError(f"unknown model {model_id!r}; available: {', '.join(m.id for m in self.models)}")

    def workers_info(self) -> list[WorkerInfo]:
        return [
            WorkerInfo(
                m.id,
                m.description,
                m.kind,
                m.price_in,
                m.price_out,
                m.latency_s if m.latency_s is not None else self.latencies.get(m.id),
            )
            for m in self.models
        ]

    # --- helpers -------------------------------------------------------------------------------

    async def _plan(
        self,
        run: "_Run",
        conductor: Conductor,
        round_: int,
        previous: PreviousRound | None,
        conversation: Sequence[dict[str, Any]],
    ) -> Plan:
        request = PlanRequest(
            question=run.question,
            workers=self.workers_info(),
            max_steps=run.options.max_steps,
            conversation=tuple(conversation),
            round=round_,
            previous=previous,
            preference=run.options.preference,
            single_model=not run.options.answers_comparable,
        )
        run.check_budget()
        if round_ == 1 and len(self.models) == 1 and is_simple_question(run.question):
            # Nothing to plan: one model, a short question, in a conversation or not (the worker of
            # a one-step plan reads the conversation itself). The plan is known without generating it.
            note = ONE_MODEL_NOTE
            plan = Plan(direct_workflow(), marked_note(note), "", Usage(), 0.0)
            run.emit(
                WorkflowReady(
                    run.id,
                    round_,
                    plan.workflow,
                    plan.reasoning,
                    plan.usage,
                    0.0,
                    note=note,
                    preference=str(request.preference or ""),
                )
            )
            return plan
        note = ""
        streamed: list[str] = []

        def delta(text: str) -> None:
            streamed.append(text)
            run.emit(ConductorDelta(run.id, round_, text))

        try:
            plan = await conductor.plan(request, delta)
        except asyncio.CancelledError:
            # Cancelled while planning: a remote planner's call so far is paid for all the same.
            if conductor.backend == "remote":
                from ..conductor.prompt import conductor_messages

                spent = Usage(
                    estimate_prompt_tokens(conductor_messages(request)), estimate_text_tokens("".join(streamed)), True
                )
                run.add_usage(spent, self._conductor_cost(conductor, spent), conductor=True)
            raise
        except ConductorError as exc:
            # No plan after the planner's tries: the question is still answered, in one step on the
            # fallback model (a later round keeps the answer it has). Failed attempts are paid
            # for: the budget, the totals and the bench see them.
            usage = exc.usage if exc.usage is not None else Usage()
            if usage.total_tokens:
                run.add_usage(usage, self._conductor_cost(conductor, usage), conductor=True)
            why = _planner_failure(exc, conductor)
            if round_ > 1:
                note = f"{why}: the previous answer stands"
                plan = Plan(Workflow(()), marked_note(note), "", usage)
            else:
                plan, note = self._replaced(run, Plan(Workflow(()), "", "", usage), why)
            log.info("run %s: %s", run.id, note)
        else:
            run.add_usage(plan.usage, self._conductor_cost(conductor, plan.usage), conductor=True)
            rejected: str | None = None
            if not plan.workflow.is_empty and self.guard_plans is not False:
                rejected = degenerate(plan.workflow, run.question, conversation)
            if rejected is not None and self._guards(conductor):
                # A garbled plan never reaches a worker: one direct step on the fallback model instead.
                plan, note = self._replaced(run, plan, rejected)
                log.info("run %s: %s", run.id, note)
            elif rejected is not None:
                # A planner not known to degenerate: its plan runs, and the note says the guard
                # rejected it (the runtime guards the planner's next runs: guard_plans).
                note = f"{FLAGGED_NOTE}: {rejected}"
                plan = replace(plan, reasoning=(plan.reasoning + "\n\n" if plan.reasoning else "") + marked_note(note))
                log.info("run %s: %s", run.id, note)
            single = _single_if_open(run.options, plan.workflow, self.models)
            if single is not None:
                reasoning = (plan.reasoning + "\n\n" if plan.reasoning else "") + marked_note(single[1])
                plan = replace(plan, workflow=single[0], reasoning=reasoning)
                note = f"{note}; {single[1]}" if note else single[1]
        run.emit(
            WorkflowReady(
                run.id,
                round_,
                plan.workflow,
                plan.reasoning,
                plan.usage,
                plan.latency_s,
                keep_previous=plan.workflow.is_empty,
                note=note,
                preference=str(request.preference or ""),
            )
        )
        return plan

    def _guards(self, conductor: Conductor) -> bool:
        """Whether the guard replaces the plans of `conductor` it rejects (see `guard_plans`)."""
        return conductor.backend == "embedded" if self.guard_plans is None else self.guard_plans

    def _replaced(self, run: "_Run", plan: Plan, why: str) -> tuple[Plan, str]:
        """`plan` replaced by one direct step on the fallback model, and the note that says why and
        which rule chose that model."""
        fallback = choose_fallback(self.models, run.question, self.fallback)
        note = f"{REPLACED_NOTE} {fallback.model}: {why}; {fallback.reason}"
        replaced = replace(
            plan,
            workflow=Workflow((Step(fallback.index, "Answer the question.", ()),)),
            reasoning=(plan.reasoning + "\n\n" if plan.reasoning else "") + marked_note(note),
        )
        return replaced, note

    def _conductor_cost(self, conductor: Conductor, usage: Usage) -> float:
        if conductor.backend != "remote":
            return 0.0  # local compute
        for model in self.models:
            if model.id == conductor.model:
                return model.cost(usage)
        return 0.0


def _usd(amount: float) -> str:
    """A dollar amount in a budget's note: four significant digits below a cent, as $0.001234."""
    return f"${amount:.4g}" if amount < 0.01 else f"${amount:.4f}"


def _planner_failure(exc: ConductorError, conductor: Conductor) -> str:
    """Why the planner gave no plan, in words about "the planner": "the planner wrote no valid plan
    after 2 tries: ..." (a remote conductor's message begins with its model's id)."""
    message = str(exc) or type(exc).__name__
    prefix = f"{conductor.model} "
    if message.startswith(prefix):
        return f"the planner {message[len(prefix) :]}"
    return f"the planner failed: {message}"


async def events_of(start: Callable[[Subscriber], Awaitable[Any]]) -> AsyncIterator[Event]:
    """The events of the run `start(emit)` begins, as an async iterator. An error raised by the
    run is raised here after its last event; leaving the loop early cancels the run."""
    queue: asyncio.Queue[Event | None] = asyncio.Queue()
    task = asyncio.ensure_future(start(queue.put_nowait))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    try:
        while (event := await queue.get()) is not None:
            yield event
        await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def cut_at_stop(text: str, stops: Sequence[str]) -> str:
    """`text` up to the first of `stops` (for providers that ignore the stop sequences sent)."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return text if cut < 0 else text[:cut]


def _closing(stream: AsyncIterator[Any]) -> contextlib.AbstractAsyncContextManager[object]:
    """Closes `stream` on the way out where it can be closed (an async generator). A Worker's
    stream_chat promises an AsyncIterator only, which need not have `aclose`."""
    if isinstance(stream, AsyncGenerator):
        return contextlib.aclosing(stream)
    return contextlib.nullcontext()


def _worth_another_try(exc: Exception) -> bool:
    """Only a stream that broke after text had arrived is tried again on the same model: the
    client already retried everything that failed before the first byte (429, 5xx, connect)."""
    return isinstance(exc, ProviderError) and exc.retryable and exc.partial


class _Run:
    """The state of one run: its events, totals, budget and step outputs."""

    def __init__(
        self,
        engine: Engine,
        question: str,
        emit: Emit | None,
        options: RunOptions,
        run_id: str | None,
        conversation: Sequence[dict[str, Any]],
    ):
        self.engine = engine
        self.question = question
        self.options = options
        self.id = run_id or uuid.uuid4().hex
        self.conversation = tuple(conversation)
        self.subscribers: list[Subscriber] = [*engine.subscribers, *([emit] if emit is not None else [])]
        self._failed: set[int] = set()  # subscribers already reported as failing in this run
        self.started = time.monotonic()
        self.usage = Usage()
        self.cost = 0.0
        self.conductor_usage = Usage()
        self.conductor_cost = 0.0

    def emit(self, event: Event) -> None:
        """Hand `event` to every subscriber; one that raises is logged, reported and skipped."""
        for subscriber in self.subscribers:
            try:
                subscriber(event)
            except Exception as exc:  # noqa: BLE001 - a subscriber never breaks the run
                self._subscriber_failed(subscriber, exc)

    def _subscriber_failed(self, subscriber: Subscriber, exc: Exception) -> None:
        name = getattr(subscriber, "name", None) or getattr(subscriber, "__qualname__", type(subscriber).__name__)
        log.warning("run %s: subscriber %s failed: %s: %s", self.id, name, type(exc).__name__, exc)
        if id(subscriber) in self._failed:
            return
        self._failed.add(id(subscriber))
        notice = SubscriberFailed(self.id, str(name), f"{type(exc).__name__}: {exc}")
        for other in self.subscribers:
            if other is not subscriber:
                with contextlib.suppress(Exception):
                    other(notice)

    def totals(self) -> Totals:
        return Totals(
            self.usage.prompt_tokens,
            self.usage.completion_tokens,
            round(self.cost, 10),
            round(time.monotonic() - self.started, 4),
            self.usage.estimated,
            self.conductor_usage.total_tokens,
            round(self.conductor_cost, 10),
        )

    def add_usage(self, usage: Usage, cost: float, *, conductor: bool = False) -> None:
        self.usage = self.usage + usage
        self.cost += cost
        if conductor:
            self.conductor_usage = self.conductor_usage + usage
            self.conductor_cost += cost

    def priced(self, round_: int, workflow: Workflow, models: Sequence[PoolModel]) -> Workflow:
        """Price `workflow` before its calls (`PlanEstimated`) and hold it to the budget: a plan
        whose estimate is over what the budget leaves is cut to the steps that fit (the rest are
        skipped, `StepSkipped`), or refused before any call when not even its first step fits."""
        estimates = estimate_plan(
            workflow,
            models,
            lambda i: step_prompt(
                self.engine.worker,
                models[workflow.steps[i].model],
                StepInput(self.question, workflow, i, dict.fromkeys(workflow.steps[i].access, ""), self.conversation),
                self.options.messages,
            ),
            self.engine.typical_outputs,
            self.options.max_tokens,
        )
        total = sum(e.cost_usd for e in estimates)
        budget = self.options.budget_usd
        kept = len(workflow.steps) if budget is None else fit_budget(workflow, estimates, budget - self.cost)
        note = ""
        if kept < len(workflow.steps):
            spent = f", after {_usd(self.cost)} spent planning" if self.cost else ""
            over = f"the plan's estimate of {_usd(total)} is over the budget of ${budget:g}{spent}"
            note = (
                f"{over}: cut to {kept} of {len(workflow.steps)} steps" if kept else f"{over}: refused before any call"
            )
        self.emit(PlanEstimated(self.id, round_, estimates, total, budget, round(self.cost, 10), kept, note))
        if not kept:
            raise BudgetExceeded(note)
        for index in range(kept, len(workflow.steps)):
            step = workflow.steps[index]
            who = CONTROL_MODEL.get(step.kind) or models[step.model].id
            self.emit(
                StepSkipped(
                    self.id, round_, index, who, f"not run: over the budget (est. {_usd(estimates[index].cost_usd)})"
                )
            )
        return workflow if kept == len(workflow.steps) else Workflow(workflow.steps[:kept])

    def check_budget(self, extra_tokens: int = 0, extra_cost: float = 0.0) -> None:
        o = self.options
        if o.budget_tokens is not None and self.usage.total_tokens + extra_tokens > o.budget_tokens:
            raise BudgetExceeded(
                f"token budget of {o.budget_tokens} reached ({self.usage.total_tokens + extra_tokens} used)"
            )
        if o.budget_usd is not None and self.cost + extra_cost > o.budget_usd:
            raise BudgetExceeded(f"budget of ${o.budget_usd:g} reached (${self.cost + extra_cost:.4f} spent)")

    async def guard(self, body: Callable[[], Any]) -> RunResult:
        """Run `body`, turning every outcome into exactly one terminal event."""
        try:
            answer = await body()
        except asyncio.CancelledError:
            totals = self.totals()
            self.emit(RunCancelled(self.id, totals))
            raise
        except BudgetExceeded as exc:
            return self._fail(f"stopped: {exc}", "budget")
        except StepError as exc:
            return self._fail(str(exc), "step")
        except ConductorError as exc:
            return self._fail(f"conductor: {exc}", "conductor")
        except Exception as exc:  # noqa: BLE001 - a bug must still end the run with one event
            log.exception("run %s failed on a bug", self.id)
            return self._fail(f"internal error: {type(exc).__name__}: {exc}", "internal")
        totals = self.totals()
        self.emit(RunFinished(self.id, answer, totals))
        return RunResult(self.id, "finished", answer=answer, totals=totals)

    def _fail(self, message: str, reason: FailureReason) -> RunResult:
        totals = self.totals()
        self.emit(RunFailed(self.id, message, totals, reason))
        return RunResult(self.id, "failed", error=message, totals=totals, failure=reason)

    # --- the DAG -------------------------------------------------------------------------------

    async def execute(
        self,
        round_: int,
        workflow: Workflow,
        models: Sequence[PoolModel],
        *,
        final: bool,
        kept: Mapping[int, str] | None = None,
    ) -> str:
        """Run every step as soon as its inputs are done; return the round's answer: the last
        step's output, or the agreed answer of a gate that ended the round (core/workflow.py).
        `final`: no later round can follow, so the last step's output is the run's answer for certain.

        A step after an agreement gate waits for it; a gate waits for every step before it (it
        ends a stage). Where a gate finds agreement, every later step is skipped: never run, never
        paid, reported as `StepSkipped`. `kept`: a fork's steps that are not run again, with
        their outputs (engine/fork.py): reported finished with no attempt and no cost."""
        outputs: dict[int, str] = {}
        done = [asyncio.Event() for _ in workflow.steps]
        stopped: list[tuple[int, str]] = []  # the gate that ended the round, if one did, and its count
        judged: list[int] = []  # votes of this round that called a judge: each one counts against max_steps

        async def run_step(index: int) -> None:
            step = workflow.steps[index]
            waits = set(step.access) | set(workflow.gates_before(index))
            if step.is_gate:
                waits |= set(range(index))
            for j in sorted(waits):
                await done[j].wait()
            if stopped:
                gate, count = stopped[0]
                who = CONTROL_MODEL.get(step.kind) or models[step.model].id
                self.emit(StepSkipped(self.id, round_, index, who, f"not run: step {gate + 1} found {count}"))
            elif kept is not None and index in kept:
                outputs[index] = self._kept(round_, index, models[step.model].id, kept[index])
            elif step.calls:
                outputs[index] = await self._run_step(round_, workflow, index, models, outputs, final)
            elif step.is_vote:
                outputs[index] = await self._vote(round_, workflow, index, models, outputs, final, judged)
            else:
                agreed = await self._gate(round_, workflow, index, outputs, models)
                outputs[index] = agreed[0] if agreed is not None else ""
                if agreed is not None:
                    stopped.append((index, agreed[1]))
            done[index].set()

        try:
            async with asyncio.TaskGroup() as group:
                for i in range(len(workflow.steps)):
                    group.create_task(run_step(i), name=f"step-{round_}-{i}")
        except BaseExceptionGroup as group_error:
            # Re-raise the first real failure (a step, the budget) rather than the group.
            for exc in group_error.exceptions:
                if isinstance(exc, (StepError, BudgetExceeded)):
                    raise exc from None
            raise group_error.exceptions[0] from None
        if stopped:
            return outputs[stopped[0][0]]
        return outputs[len(workflow.steps) - 1]

    def _kept(self, round_: int, index: int, model: str, output: str) -> str:
        """A fork's step that is not run again: its output stands, with no call and no cost."""
        self.emit(StepFinished(self.id, round_, index, model, output, Usage(), 0.0, 0.0, 0, note=KEPT_NOTE))
        return output

    async def _finals(
        self, workflow: Workflow, index: int, outputs: dict[int, str], models: Sequence[PoolModel]
    ) -> tuple[tuple[int, ...], list[Final | None], Tally]:
        """The steps step `index` reads, their final answers, and their count (a tie and the answer
        returned decided by the models' rank, never by the steps' order). Read and compared off the
        event loop (`_compare_off_loop`), within AGREEMENT_DEADLINE_S of the comparison's own time:
        past it, or past AGREEMENT_QUEUE_PATIENCE_S waiting to start, no answer counts (the gate
        continues)."""
        read = workflow.steps[index].access
        texts = [outputs.get(j, "") for j in read]
        ranks = [self._rank(models[workflow.steps[j].model]) for j in read]
        kind, options = self.options.answer_kind, self.options.answer_options

        def count() -> tuple[list[Final | None], Tally]:
            finals = [final_answer(text, kind, options=options) for text in texts]
            return finals, tally(finals, ranks)

        compared = await _compare_off_loop(count)
        if compared is None:
            unread: list[Final | None] = [None] * len(read)
            return read, unread, tally(unread, ranks)
        finals, counted = compared
        return read, finals, counted

    def _rank(self, model: PoolModel) -> tuple[int, float, str]:
        """A model's rank for ties and agreements: its place in `model_rank`, then price, then id."""
        named = self.options.model_rank
        place = named.index(model.id) if model.id in named else len(named)
        return place, model.price_in + model.price_out, model.id

    def _best_of(
        self, read: Sequence[int], workflow: Workflow, models: Sequence[PoolModel], outputs: dict[int, str]
    ) -> str:
        """The full answer returned where open answers agree: the best-ranked model's among them
        (`_rank`, as for final answers), so the order the models are listed in never decides it."""
        best = min(read, key=lambda j: (self._rank(models[workflow.steps[j].model]), outputs.get(j, "")))
        return outputs.get(best, "")

    def _control_finished(self, round_: int, index: int, kind: str, output: str, note: str) -> None:
        step_model = CONTROL_MODEL[kind]
        self.emit(StepFinished(self.id, round_, index, step_model, output, Usage(), 0.0, 0.0, 1, note=note))

    async def _gate(
        self, round_: int, workflow: Workflow, index: int, outputs: dict[int, str], models: Sequence[PoolModel]
    ) -> tuple[str, str] | None:
        """An agreement gate: (the agreed answer, its count) where every step it reads gives the
        same final answer (the answer is the best-ranked read step's full output), else None (the
        next stage runs)."""
        step = workflow.steps[index]
        self.emit(StepStarted(self.id, round_, index, CONTROL_MODEL[AGREE], step.subtask, step.access))
        read, finals, count = await self._finals(workflow, index, outputs, models)
        if count.unanimous and count.first is not None:
            note = count.line()
            self._control_finished(round_, index, AGREE, outputs[read[count.first]], note)
            return outputs[read[count.first]], note
        if count.readable < 2 and not self.options.known_kind:
            # open answers to a question of no known kind: compared by what they say (core/open_text.py);
            # a question of a known kind (a bench item) keeps "no final answer" as no agreement, so
            # that core/replayed.py replays it exactly
            return await self._open_agreement(round_, workflow, index, outputs, models)
        shown = ", ".join("?" if f is None else (f.key if len(f.key) <= 20 else f.key[:19] + "…") for f in finals)
        self._control_finished(round_, index, AGREE, "", f"disagree ({shown}): {_next_stage(workflow, index, models)}")
        return None

    async def _vote(
        self,
        round_: int,
        workflow: Workflow,
        index: int,
        models: Sequence[PoolModel],
        outputs: dict[int, str],
        final: bool,
        judged: list[int],
    ) -> str:
        """A vote: the majority final answer of the steps it reads (a tie to the best-ranked model);
        its output is the full answer of the best-ranked step that gave it. With fewer than two
        readable final answers (an open question), the step's model judges the answers instead: a
        call, counted against max_steps; where the limit has no room left, the best-ranked readable
        answer (else the best-ranked step's output) is taken without a call, and the tree says so."""
        step = workflow.steps[index]
        read, _, count = await self._finals(workflow, index, outputs, models)
        if count.readable >= 2 and count.first is not None:
            self.emit(StepStarted(self.id, round_, index, CONTROL_MODEL[VOTE], step.subtask, step.access))
            chosen = outputs[read[count.first]]
            self._control_finished(round_, index, VOTE, chosen, f"vote: {count.line()} (step {read[count.first] + 1})")
            return chosen
        open_winner = (
            await self._open_vote(round_, workflow, index, outputs, models) if not self.options.known_kind else None
        )
        if open_winner is not None:
            return open_winner
        if workflow.calls + len(judged) >= self.options.max_steps:
            self.emit(StepStarted(self.id, round_, index, CONTROL_MODEL[VOTE], step.subtask, step.access))
            best = (
                count.first
                if count.first is not None
                else min(range(len(read)), key=lambda i: self._rank(models[workflow.steps[read[i]].model]))
            )
            chosen = outputs.get(read[best], "")
            why = "the best-ranked readable answer" if count.first is not None else "the best-ranked answer"
            note = f"vote: no judge call, the step limit ({self.options.max_steps}) is reached: {why} (step {read[best] + 1})"
            self._control_finished(round_, index, VOTE, chosen, note)
            return chosen
        judged.append(index)
        judge = replace(step, subtask=JUDGE_SUBTASK, kind=CALL)
        judged_workflow = Workflow(tuple(judge if i == index else s for i, s in enumerate(workflow.steps)))
        return await self._run_step(round_, judged_workflow, index, models, outputs, final)

    # --- open answers (core/open_text.py) -------------------------------------------------------

    async def _open_agreement(
        self, round_: int, workflow: Workflow, index: int, outputs: dict[int, str], models: Sequence[PoolModel]
    ) -> tuple[str, str] | None:
        """A gate whose steps give fewer than two final answers: they agree where their text says the
        same thing (no call); else, with `open_agreement = "judge"`, where a short judge call on the
        cheapest capable pool model says so (the gate's step shows that call, its tokens and cost).
        Returns what `_gate` returns; the step is finished either way."""
        read = workflow.steps[index].access
        texts = [outputs.get(j, "") for j in read]
        verdict = await asyncio.to_thread(open_text.agree_all, texts)
        asking = _next_stage(workflow, index, models)
        if verdict.agree:
            chosen = self._best_of(read, workflow, models, outputs)
            note = f"{len(read)} of {len(read)} agree by text ({verdict.reason})"
            self._control_finished(round_, index, AGREE, chosen, note)
            return chosen, note
        judge = _judge_model(self.engine.models) if self.options.open_agreement == "judge" else None
        if judge is None:
            why = "" if self.options.open_agreement != "judge" else "; no pool model can judge"
            self._control_finished(round_, index, AGREE, "", f"{verdict.line()}{why}: {asking}")
            return None
        agreed, note, usage, cost, latency = await self._judge(round_, index, read, judge, texts)
        chosen = self._best_of(read, workflow, models, outputs) if agreed else ""
        note = "judge: they agree" if agreed else f"judge: they differ ({note}): {asking}"  # the step names its model
        self.emit(StepFinished(self.id, round_, index, judge.id, chosen, usage, cost, latency, 1, note=note))
        return (chosen, note) if agreed else None

    async def _judge(
        self, round_: int, index: int, access: tuple[int, ...], judge: PoolModel, texts: Sequence[str]
    ) -> tuple[bool, str, Usage, float, float]:
        """One judge call: (whether it says the answers agree, its verdict in a word, usage, cost,
        seconds). A failed call is a "no" (the next stage answers), and costs what it reported."""
        self.emit(StepStarted(self.id, round_, index, judge.id, AGREE_JUDGE_SUBTASK, access))
        self.check_budget()
        started = time.monotonic()
        try:
            text, usage = await self._call(round_, index, judge, judge_prompt(self.question, texts))
        except BudgetExceeded:
            raise
        except Exception as exc:  # noqa: BLE001 - a judge that fails is no agreement: the next stage runs
            message = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
            return False, f"the call failed: {message[:80]}", Usage(), 0.0, round(time.monotonic() - started, 4)
        cost = judge.cost(usage)
        self.add_usage(usage, cost)
        self.check_budget()
        said = judge_verdict(text)
        return said == "yes", said, usage, cost, round(time.monotonic() - started, 4)

    async def _open_vote(
        self, round_: int, workflow: Workflow, index: int, outputs: dict[int, str], models: Sequence[PoolModel]
    ) -> str | None:
        """A vote whose steps give fewer than two final answers: the answers that agree by text form
        groups; the largest, where it has two or more and no other is as large, wins with no call.
        None: no such group (the vote's model judges, as before)."""
        step = workflow.steps[index]
        read = step.access
        found = await asyncio.to_thread(open_text.groups, [outputs.get(j, "") for j in read])
        if not found or len(found[0]) < 2 or (len(found) > 1 and len(found[1]) == len(found[0])):
            return None
        winners = tuple(read[i] for i in found[0])
        chosen = self._best_of(winners, workflow, models, outputs)
        self.emit(StepStarted(self.id, round_, index, CONTROL_MODEL[VOTE], step.subtask, step.access))
        steps = ",".join(str(j + 1) for j in winners)
        note = f"vote: {len(winners)} of {len(read)} agree by text (steps {steps})"
        self._control_finished(round_, index, VOTE, chosen, note)
        return chosen

    def _candidates(self, step: Step, models: Sequence[PoolModel]) -> list[PoolModel]:
        """The step's own model, then its fallbacks (each model once)."""
        own = models[step.model]
        if self.options.fallbacks is not None:
            pool = {m.id: m for m in self.engine.models}
            extra = [pool[f] for f in self.options.fallbacks if f in pool and f != own.id]
        else:
            # Not the embedded CPU model: a slow 270M stand-in for a hosted model helps nobody,
            # unless the config names it as a fallback.
            extra = [m for m in self.engine.models if m.id != own.id and m.kind != "embedded"]
        return [own, *extra[: self.options.max_fallbacks]]

    async def _run_step(
        self,
        round_: int,
        workflow: Workflow,
        index: int,
        models: Sequence[PoolModel],
        outputs: dict[int, str],
        final: bool,
    ) -> str:
        step = workflow.steps[index]
        writes_answer = index == len(workflow.steps) - 1
        stop = self.options.stop if writes_answer else ()
        candidates = self._candidates(step, models)
        started = time.monotonic()
        attempt = 0
        for position, model in enumerate(candidates):
            tries_left = 1 + self.options.retries
            while True:
                tries_left -= 1
                attempt += 1
                self.check_budget()
                self.emit(
                    StepStarted(
                        self.id,
                        round_,
                        index,
                        model.id,
                        step.subtask,
                        step.access,
                        attempt,
                        writes_answer=writes_answer,
                        final=writes_answer and final,
                    )
                )
                try:
                    prompt = step_prompt(
                        self.engine.worker,
                        model,
                        StepInput(self.question, workflow, index, outputs, self.conversation),
                        self.options.messages,
                    )
                    text, usage = await self._call(round_, index, model, prompt, stop)
                except BudgetExceeded:
                    raise
                except Exception as exc:  # noqa: BLE001 - any worker fault is this attempt's failure
                    message = str(exc) if isinstance(exc, ProviderError) else f"{type(exc).__name__}: {exc}"
                    again = tries_left > 0 and _worth_another_try(exc)
                    following = (
                        model if again else (candidates[position + 1] if position + 1 < len(candidates) else None)
                    )
                    self.emit(
                        StepFailed(
                            self.id,
                            round_,
                            index,
                            model.id,
                            message,
                            attempt,
                            following.id if following is not None else None,
                        )
                    )
                    if following is None:
                        raise StepError(round_, index, f"{model.id}: {message}") from None
                    if again:
                        continue
                    break
                cost = model.cost(usage)
                self.add_usage(usage, cost)
                self.emit(
                    StepFinished(
                        self.id,
                        round_,
                        index,
                        model.id,
                        text,
                        usage,
                        cost,
                        round(time.monotonic() - started, 4),
                        attempt,
                    )
                )
                self.check_budget()
                return text
        raise StepError(round_, index, "no model to run it on")

    async def _call(
        self, round_: int, index: int, model: PoolModel, prompt: WorkerPrompt, stop: tuple[str, ...] = ()
    ) -> tuple[str, Usage]:
        parts: list[str] = []
        usage: Usage | None = None
        messages = prompt.messages
        max_tokens = self.options.max_tokens
        if prompt.max_tokens is not None:
            max_tokens = min(max_tokens or prompt.max_tokens, prompt.max_tokens)
        stops = list(dict.fromkeys((*prompt.stop, *stop)))
        stream = self.engine.worker.stream_chat(
            model, messages, max_tokens=max_tokens, temperature=self.options.temperature, stop=stops or None
        )
        limited = self.options.budget_tokens is not None or self.options.budget_usd is not None
        prompt_estimate = estimate_prompt_tokens(messages)
        chars = 0
        try:
            async with asyncio.timeout(self.options.deadline_s), _closing(stream):
                async for event in stream:
                    if isinstance(event, TextDelta):
                        parts.append(event.text)
                        chars += len(event.text)
                        self.emit(StepDelta(self.id, round_, index, event.text))
                        if limited:
                            out = -(-chars // 3)  # estimate_text_tokens of the text so far, without joining it
                            self.check_budget(prompt_estimate + out, model.cost(Usage(prompt_estimate, out)))
                    elif isinstance(event, UsageReport):
                        usage = event.usage
        except asyncio.CancelledError:
            # Cancelled mid-answer: the provider bills what it streamed, so the run's totals keep it.
            spent = usage or Usage(prompt_estimate, -(-chars // 3), True)
            self.add_usage(spent, model.cost(spent))
            raise
        except TimeoutError:
            raise ProviderError.past_deadline(model.provider, self.options.deadline_s, bool(parts)) from None
        text = "".join(parts)
        if usage is None:
            usage = Usage(prompt_estimate, estimate_text_tokens(text), True)
        text = cut_at_stop(text, tuple(stops))
        return (prompt.finish(text) if prompt.finish is not None else text), usage


# --- open answers: the judge, the answer agreed on, one model where answers cannot be compared ---

JUDGE_MAX_TOKENS = 8  # "yes" or "no", and room for a token of preamble
_JUDGE_CHARS = 6000  # of the question and of each answer shown to the judge: its cost stays small


def judge_prompt(question: str, texts: Sequence[str]) -> WorkerPrompt:
    """What an agreement gate's judge is sent: the question, the answers, and the yes/no question."""
    shown = "\n\n".join(f"<answer {i + 1}>\n{t[:_JUDGE_CHARS]}\n</answer {i + 1}>" for i, t in enumerate(texts))
    return WorkerPrompt(
        [
            {
                "role": "system",
                "content": "You compare answers to one question. Reply with one word: yes or no.",
            },
            {
                "role": "user",
                "content": f"<question>\n{question[:_JUDGE_CHARS]}\n</question>\n\n{shown}\n\nDo these answers agree "
                "in substance (the same conclusion, facts and advice, whatever their wording)? Reply yes or no.",
            },
        ],
        max_tokens=JUDGE_MAX_TOKENS,
    )


def judge_verdict(text: str) -> str:
    """The judge's reply as "yes", "no" or "unclear" (its first word, markdown and case aside)."""
    for word in text.split()[:4]:
        word = word.strip("*_`'\".,:;!()[]").casefold()
        if word in ("yes", "no"):
            return word
        if word:
            break
    return "unclear"


def _judge_model(pool: Sequence[PoolModel]) -> PoolModel | None:
    """The cheapest capable pool model (input price first: a judge reads much and writes a word),
    ties to the smaller id; never the embedded 270M base model, which cannot follow the question."""
    capable = [m for m in pool if m.kind != "embedded"]
    return min(capable, key=lambda m: (m.price_in, m.price_out, m.id)) if capable else None


def _next_stage(workflow: Workflow, index: int, models: Sequence[PoolModel]) -> str:
    """What runs where gate `index` finds no agreement: "asking A, B" (its next stage's models)."""
    following: list[str] = []
    for later in workflow.steps[index + 1 :]:
        if later.is_gate:
            break
        if later.calls and models[later.model].id not in following:
            following.append(models[later.model].id)
    return f"asking {', '.join(following)}" if following else "the next stage runs"


def _single_if_open(
    options: RunOptions, workflow: Workflow, models: Sequence[PoolModel]
) -> tuple[Workflow, str] | None:
    """Where the question's answers cannot be compared (`options.answers_comparable` is False) and
    `workflow` holds a vote or a gate: one step on the dearest model its calls name (ties to the
    smaller id), and the note that says why. None: the workflow runs as it is."""
    if options.answers_comparable or all(s.calls for s in workflow.steps):
        return None
    called = sorted({s.model for s in workflow.steps if s.calls})
    if not called:
        return None
    pick = min(called, key=lambda i: (-(models[i].price_in + models[i].price_out), models[i].id))
    note = f"{OPEN_NOTE}: {models[pick].id}, since {open_text.OPEN_REASON}"
    return Workflow((Step(pick, "Answer the question.", ()),)), note


def step_prompt(
    worker: Worker,
    model: PoolModel,
    step: StepInput,
    messages: Sequence[dict[str, Any]] | None = None,
) -> WorkerPrompt:
    """What `model` is sent for one step: the prompt its worker builds itself, where it builds
    one (the embedded base model's few-shot prompt: the `Worker` protocol's `prepare`); else a
    pass-through's `messages` for the one step of a one-step plan; else the chat prompt."""
    prepare = getattr(worker, "prepare", None)
    own: WorkerPrompt | None = prepare(model, step) if prepare is not None else None
    if own is not None:
        return own
    if messages is not None and len(step.workflow.steps) == 1:
        return WorkerPrompt([dict(m) for m in messages])
    outputs = dict(step.outputs)
    return WorkerPrompt(worker_messages(step.question, step.workflow, step.index, outputs, step.conversation))

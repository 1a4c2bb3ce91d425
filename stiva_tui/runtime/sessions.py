"""The session service: the one way a front end runs a question.

    outcome = await runtime.sessions.ask(Ask("What is 17*23?", source="cli"), emit=view.handle)
    async for event in runtime.sessions.stream(Ask(question, mode=DirectMode("gpt-4.1"))): ...

`ask` takes a question, a mode, a source and (optionally) the conversation to continue, and
gives the run's events. It keeps the conversation in the history — a new one of the source's
kind (chat, ask, api, ...) unless `conversation_id` continues one — so the chat screen, `stiva
ask`, the server, and next the benchmark and training, are thin adapters over it. Compare mode
starts a compare session here and runs each column as an `Ask` outside any conversation.
"""

from __future__ import annotations

import copy
import logging
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from ..core import open_text
from ..core.events import Event
from ..core.preference import PreferenceError, parse_preference
from ..core.words import KIND_OF_SOURCE, Source
from ..engine.baselines import default_moa_proposers
from ..engine.executor import Engine, RunOptions, RunResult, Subscriber, events_of
from ..engine.fork import ForkError, ForkPlan, plan_fork
from ..inference.progress import Progress
from ..pool.types import PoolModel
from .modes import PRESETS, ConductorMode, ConductorVariant, DirectMode, MoAMode, Mode, WorkflowMode, conductor_variant

if TYPE_CHECKING:
    from .root import Runtime

log = logging.getLogger(__name__)

# The front ends a person asks through: their questions have no known kind unless one is given.
LIVE_SOURCES: tuple[Source, ...] = ("tui", "cli", "api")


EMPTY_POOL = (
    "the pool has no available model: add a provider key (F5 in the app, or e.g. OPENAI_API_KEY), "
    "a [[models]] entry in the config, or set embedded_worker = true"
)


class AskError(Exception):
    """The question cannot run as asked (an unknown model or conversation, an empty pool); nothing
    was recorded. The message says what to do."""


@dataclass(frozen=True)
class Ask:
    question: str
    mode: Mode = field(default_factory=ConductorMode)
    source: Source = "cli"
    # Continue this conversation; None starts a new one (of the source's kind).
    conversation_id: str | None = None
    # Ask in place of the conversation's question number `replaces` (0-based): that question and
    # every later turn leave the conversation first (regenerate, edit-and-resend); their runs stay
    # in the run history, unlinked.
    replaces: int | None = None
    # Earlier turns given with the question (the API's messages), recorded before it.
    history: Sequence[dict[str, Any]] | None = None
    # Text the engine reads before the question (the API's system messages); not recorded twice.
    instructions: str = ""
    # False: a run outside any conversation (compare-mode columns).
    in_conversation: bool = True
    run_id: str | None = None
    # RunOptions fields that override the config and the preset (None values are ignored).
    options: dict[str, Any] = field(default_factory=dict)
    title: str | None = None


@dataclass
class Outcome:
    result: RunResult
    conversation_id: str | None
    warnings: list[str] = field(default_factory=list)  # the history could not be written, ...
    notes: list[str] = field(default_factory=list)  # what the user should know of the answer (offline limits)


@dataclass(frozen=True)
class Fork:
    """Run `run_id`'s step `step` (as the tree numbers it: "2", or "2.3" for round 2) again on
    `model`, with `subtask` instead of its own where given, and every step that reads it
    (engine/fork.py). `run_id` may be a unique start of the id, as `stiva history` takes them."""

    run_id: str
    step: str
    model: str
    subtask: str | None = None
    source: Source = "cli"
    branch_id: str | None = None  # the branch's run id; None: a new one
    # RunOptions fields that override the config (None values are ignored).
    options: dict[str, Any] = field(default_factory=dict)


@dataclass
class ForkOutcome:
    result: RunResult  # the branch's run: its totals are what the branch added
    plan: ForkPlan
    branch: int  # the run's branch number, from 1
    original: str  # the whole id of the run forked
    warnings: list[str] = field(default_factory=list)


@dataclass
class CompareStart:
    session_id: str | None  # None when the history could not record the session
    run_ids: dict[str, str]  # system -> the run id its column will use
    warning: str | None = None


class _Start(Protocol):
    """How a mode's run starts on an engine (Sessions._runner)."""

    def __call__(
        self,
        engine: Engine,
        question: str,
        *,
        emit: Subscriber | None,
        conversation: Sequence[dict[str, Any]],
        options: RunOptions,
        run_id: str,
        conversation_id: str | None,
    ) -> Awaitable[RunResult]: ...


OFFLINE_CODE_NOTE = (
    "the offline model (Gemma-3 270M) cannot write code: add a real model (F5 in the app, a provider's key, "
    "or a local server) for code questions"
)
_CODE = re.compile(
    r"```|\b(code|function|python|javascript|typescript|java|rust|golang|c\+\+|sql|regex|script|program|"
    r"implement|compile|debug|refactor|algorithm|def|class)\b",
    re.IGNORECASE,
)


def asks_for_code(question: str) -> bool:
    """Whether a question asks for code, by its words: a guess for a note, never a gate."""
    return bool(_CODE.search(question))


class Sessions:
    def __init__(self, runtime: "Runtime"):
        self.runtime = runtime
        # Conversations kept in memory when there is no history store.
        self._memory: dict[str, list[dict[str, Any]]] = {}

    # --- asking --------------------------------------------------------------------------------

    async def ask(self, ask: Ask, emit: Subscriber | None = None, progress: Progress | None = None) -> Outcome:
        """Run `ask` to its end: its events go to `emit` (and the history). Raises AskError for a
        request that cannot run and ConductorError when the conductor cannot load, before
        anything is recorded; once the run starts, every outcome is in `Outcome.result`."""
        start = self._runner(ask)
        options = self._options(ask)  # a bad option fails before the conversation is rewound
        if ask.replaces is not None and ask.in_conversation and ask.conversation_id:
            self._rewind(ask.conversation_id, ask.replaces)
        # A conversation to continue is read first: a wrong id fails before a model loads.
        earlier = self._turns(ask.conversation_id) if ask.in_conversation and ask.conversation_id else None
        conductor = None
        if isinstance(ask.mode, ConductorMode):
            variant = conductor_variant(ask.mode, self.runtime.config.conductor.router)
            conductor = await self.runtime.ensure_conductor(progress, variant)
            conductor = self._escalation(conductor, variant, ask.mode, progress)
        run_id = ask.run_id or uuid.uuid4().hex
        warnings: list[str] = []
        conversation_id, turns = self._open(ask, warnings, earlier)
        self._add(conversation_id, "user", ask.question, run_id, warnings)
        engine = self.runtime.engine(source=ask.source, conductor=conductor)
        question = f"{ask.instructions}\n\n{ask.question}" if ask.instructions else ask.question
        result = await start(
            engine,
            question,
            emit=emit,
            conversation=turns,
            options=options,
            run_id=run_id,
            conversation_id=conversation_id,
        )
        if result.status == "finished":
            self._add(conversation_id, "assistant", result.answer, run_id, warnings)
        return Outcome(result, conversation_id, warnings, self._offline_notes(ask.question))

    def _offline_notes(self, question: str) -> list[str]:
        """One line where only the embedded 270M answers and the question asks for code."""
        models = self.runtime.models
        if models and all(m.kind == "embedded" for m in models) and asks_for_code(question):
            return [OFFLINE_CODE_NOTE]
        return []

    def _escalation(
        self, conductor: Any, variant: ConductorVariant | None, mode: ConductorMode, progress: Progress | None
    ) -> Any:
        """conductor-mini's router hands low-chance questions to the configured conductor
        (`[conductor] router_escalate_below`), which loads on the first such question. Returns the
        conductor to run: for conductor-mini, a copy of the loaded router that escalates (the
        loaded one is shared with `router:DIR` systems of the same folder, which never escalate);
        else `conductor` itself."""
        cfg = self.runtime.config.conductor
        if (
            conductor.backend == "router"
            and mode.variant is None  # conductor-mini's router, not a router:DIR system
            and variant is not None
            and cfg.router_escalate_below > 0
            and cfg.backend != "router"
        ):
            escalating = copy.copy(conductor)  # the loaded router is shared, its settings are not
            escalating.escalate_below = cfg.router_escalate_below
            escalating.escalate = lambda: self.runtime.ensure_conductor(progress, None)
            return escalating
        return conductor

    def check(self, ask: Ask) -> None:
        """Raise AskError now if `ask` cannot run (a front end calls this before a slow load)."""
        self._runner(ask)
        self._options(ask)
        if ask.in_conversation and ask.conversation_id:
            self._turns(ask.conversation_id)

    def stream(self, ask: Ask, progress: Progress | None = None) -> AsyncIterator[Event]:
        """`ask`'s events as an async iterator; errors before the run are raised from it."""
        return events_of(lambda emit: self.ask(ask, emit=emit, progress=progress))

    def _runner(self, ask: Ask) -> _Start:
        """Check the mode against the pool and return how to start its run (raises AskError)."""
        mode = ask.mode
        if not self.runtime.models:
            raise AskError(EMPTY_POOL)
        if isinstance(mode, ConductorMode):
            if mode.preset is not None and mode.preset not in PRESETS:
                raise AskError(f"unknown conductor preset {mode.preset!r}: use {', '.join(PRESETS)}")
            return lambda engine, question, **kw: engine.run(question, system=mode.system, **kw)
        if isinstance(mode, DirectMode):
            self._model(mode.model)
            return lambda engine, question, **kw: engine.run_direct(question, mode.model, **kw)
        if isinstance(mode, MoAMode):
            proposers, aggregator, layers = self._moa(mode)
            return lambda engine, question, **kw: engine.run_moa(
                question, proposers, aggregator, layers, samples=mode.samples, **kw
            )
        if isinstance(mode, WorkflowMode):
            models = [self._model(m) for m in mode.models]
            return lambda engine, question, **kw: engine.run_workflow(
                question, mode.workflow, models, system=mode.system, **kw
            )
        raise AskError(f"unknown mode {mode!r}")

    def _model(self, model_id: str) -> PoolModel:
        model = self.runtime.pool.get(model_id)
        if model is None or not (model.enabled and model.available):
            known = ", ".join(m.id for m in self.runtime.models)
            why = f" ({model.reason})" if model is not None and model.reason else ""
            raise AskError(f"model {model_id!r} is not available{why}; available: {known}")
        return model

    def moa_parts(self, mode: MoAMode) -> tuple[list[str], str, int]:
        """(proposers, aggregator, layers) MoA runs with in `mode`; AskError when it cannot run."""
        return self._moa(mode)

    def _moa(self, mode: MoAMode) -> tuple[list[str], str, int]:
        """MoA's proposers, aggregator and layers: the mode's, else the [moa] config's, else defaults."""
        config = self.runtime.config.moa
        proposers = list(mode.proposers or config.proposers or default_moa_proposers(self.runtime.models))
        aggregator = mode.aggregator or config.aggregator or proposers[0]
        for model_id in (*proposers, aggregator):
            self._model(model_id)
        return proposers, aggregator, mode.layers or config.layers

    def _options(self, ask: Ask) -> RunOptions:
        options = self.runtime.run_options()
        if isinstance(ask.mode, ConductorMode) and ask.mode.preset is not None:
            preset = PRESETS[ask.mode.preset]
            options = replace(
                options, max_steps=preset.max_steps or options.max_steps, rounds=preset.rounds or options.rounds
            )
        if isinstance(ask.mode, DirectMode) or (
            isinstance(ask.mode, WorkflowMode) and ask.mode.name.startswith(("vote:", "cascade:"))
        ):
            # direct:MODEL means that model, in every front end: never another one instead; and a
            # vote or a cascade of named models counts those models' answers, never another's
            options = replace(options, max_fallbacks=0, fallbacks=())
        given = dict(ask.options)
        if given.get("preference") is not None:
            # a level or a number (PreferenceError, a ValueError, for anything else); "" or "none": none stated
            try:
                options = replace(options, preference=parse_preference(given.pop("preference")))
            except PreferenceError as exc:
                raise AskError(str(exc)) from None
        options = replace(options, **{k: v for k, v in given.items() if v is not None})
        if ask.source in LIVE_SOURCES:
            # a live question whose answers cannot be compared gets one model, never a vote or a
            # cascade (the bench runs its systems as named: docs/conductor.md, "Open questions")
            comparable = open_text.comparable(ask.question, options.answer_kind, options.open_agreement)
            options = replace(options, answers_comparable=comparable)
        return options

    # --- conversations -------------------------------------------------------------------------

    def _open(
        self, ask: Ask, warnings: list[str], earlier: list[dict[str, Any]] | None
    ) -> tuple[str | None, list[dict[str, Any]]]:
        """The conversation the question joins (created when new) and its turns so far."""
        if not ask.in_conversation:
            return None, _engine_turns(ask.history or ())
        store = self.runtime.store
        if ask.conversation_id is not None:
            return ask.conversation_id, earlier or []
        history = [dict(t) for t in ask.history or ()]
        title = ask.title or _title(ask.question)
        if store is None:
            conversation_id = uuid.uuid4().hex
            self._memory[conversation_id] = list(history)
            return conversation_id, _engine_turns(history)
        from ..store import StoreError

        try:  # queued: the run does not wait for the disk (a failure shows as the history's)
            conversation_id = store.start_conversation_later(
                title, KIND_OF_SOURCE[ask.source], [(t["role"], t["content"], None) for t in history]
            )
        except StoreError as exc:
            log.warning("the conversation could not be recorded: %s", exc)
            warnings.append(f"the history could not record this conversation: {exc}")
            return None, _engine_turns(history)
        return conversation_id, _engine_turns(history)

    def _turns(self, conversation_id: str) -> list[dict[str, Any]]:
        """The earlier turns of a conversation, as the engine reads them (raises AskError)."""
        store = self.runtime.store
        if store is None:
            if conversation_id not in self._memory:
                raise AskError(f"no conversation {conversation_id}")
            return _engine_turns(self._memory[conversation_id])
        from ..store import NotFoundError, StoreError

        try:
            conversation = store.get_conversation(conversation_id)
        except NotFoundError:
            raise AskError(f"no conversation {conversation_id} in the history") from None
        except StoreError as exc:
            raise AskError(f"cannot read conversation {conversation_id}: {exc}") from None
        answered = {m.run_id for m in conversation.messages if m.role == "assistant" and m.run_id}
        # A question whose run gave no answer (failed, cancelled) is left out of what follows.
        messages = [
            m for m in conversation.messages if not (m.role == "user" and m.run_id and m.run_id not in answered)
        ]
        return _engine_turns({"role": m.role, "content": m.content} for m in messages)

    def _rewind(self, conversation_id: str, question: int) -> None:
        """Take question `question` and every later turn out of the conversation (AskError when it
        cannot be read or written)."""
        store = self.runtime.store
        if store is None:
            turns = self._memory.get(conversation_id)
            if turns is None:
                raise AskError(f"no conversation {conversation_id}")
            asked = [i for i, t in enumerate(turns) if t["role"] == "user"]
            if 0 <= question < len(asked):
                del turns[asked[question] :]
            return
        from ..store import NotFoundError, StoreError

        try:
            store.rewind_conversation(conversation_id, question)
        except NotFoundError:
            raise AskError(f"no conversation {conversation_id} in the history") from None
        except StoreError as exc:
            raise AskError(f"cannot change conversation {conversation_id}: {exc}") from None

    def _add(self, conversation_id: str | None, role: str, content: str, run_id: str, warnings: list[str]) -> None:
        if conversation_id is None:
            return
        store = self.runtime.store
        if store is None:
            self._memory.setdefault(conversation_id, []).append({"role": role, "content": content})
            return
        from ..store import StoreError

        try:
            store.add_message_later(conversation_id, role, content, run_id)
        except StoreError as exc:
            log.warning("a message could not be recorded: %s", exc)
            warnings.append(f"the history could not record the {role} message: {exc}")

    # --- forks ---------------------------------------------------------------------------------

    def fork_plan(self, fork: Fork) -> tuple[Any, ForkPlan]:
        """(the original's trace, what the fork runs); AskError, one line, where it cannot run: no
        history, an unknown run or step, a step that cannot be forked, a model not available."""
        store = self.runtime.store
        if store is None:
            raise AskError("there is no history to fork a run from (the history is off)")
        if not self.runtime.models:
            raise AskError(EMPTY_POOL)
        from ..store import NotFoundError, StoreError

        try:
            kind, whole = store.resolve_id(fork.run_id)
            if kind != "run":
                raise AskError(f"{fork.run_id} is a conversation: fork one of its runs (stiva history show {whole})")
            trace = store.get_trace(whole)
        except NotFoundError as exc:
            raise AskError(str(exc)) from None
        except StoreError as exc:
            raise AskError(f"cannot read run {fork.run_id}: {exc}") from None
        try:
            plan = plan_fork(
                trace, fork.step, fork.model, available=[m.id for m in self.runtime.models], subtask=fork.subtask
            )
        except ForkError as exc:
            raise AskError(str(exc)) from None
        return trace, plan

    async def fork(self, fork: Fork, emit: Subscriber | None = None) -> ForkOutcome:
        """Run a fork of a finished run to its end: its events go to `emit` (and the history, as
        a branch under the original run, which is never written). Raises AskError before anything
        runs or is recorded; once the branch starts, every outcome is in `ForkOutcome.result`."""
        trace, plan = self.fork_plan(fork)
        options = self._options(Ask("", options=fork.options))
        warnings: list[str] = []
        root = trace if trace.fork is None else self._root(trace.fork.of)  # a branch forked again
        turns = self._turns_before(root.conversation_id, root.run_id, warnings)
        models = [
            self.runtime.pool.get(m) or PoolModel(id=m, provider="", model=m, available=False) for m in plan.models
        ]
        branch = max((b.fork.branch for b in root.branches if b.fork is not None), default=0) + 1
        engine = self.runtime.engine(source=fork.source)
        result = await engine.run_fork(
            plan,
            models,
            branch=branch,
            emit=emit,
            conversation=turns,
            options=options,
            run_id=fork.branch_id or uuid.uuid4().hex,
        )
        return ForkOutcome(result, plan, branch, root.run_id, warnings)

    def _root(self, run_id: str) -> Any:
        """The run a branch is kept under (AskError where the history cannot read it)."""
        from ..store import StoreError

        assert self.runtime.store is not None
        try:
            return self.runtime.store.get_trace(run_id)
        except StoreError as exc:
            raise AskError(f"cannot read run {run_id}, which the branch forks: {exc}") from None

    def _turns_before(self, conversation_id: str | None, run_id: str, warnings: list[str]) -> list[dict[str, Any]]:
        """The conversation's turns before run `run_id`'s question: what the run's steps read."""
        store = self.runtime.store
        if conversation_id is None or store is None:
            return []
        from ..store import StoreError

        try:
            conversation = store.get_conversation(conversation_id)
        except StoreError as exc:
            warnings.append(f"the conversation before the run could not be read ({exc}): the branch reads none")
            return []
        answered = {m.run_id for m in conversation.messages if m.role == "assistant" and m.run_id}
        before = []
        for m in conversation.messages:
            if m.run_id == run_id:
                break
            if not (m.role == "user" and m.run_id and m.run_id not in answered):
                before.append({"role": m.role, "content": m.content})
        return _engine_turns(before)

    def compare_branches(self, run_id: str, branch_ids: Sequence[str] | None = None) -> CompareStart:
        """A compare session of a run and its branches (their columns: the run's system, then
        `branch:N`), so that a vote between them is a preference pair like any other. None: every
        finished branch, the newest eight (compare votes on nine columns at most)."""
        store = self.runtime.store
        if store is None:
            return CompareStart(None, {}, "no history: the session is not saved")
        from ..store import StoreError

        try:
            trace = store.get_trace(run_id)
            finished = [b.run_id for b in trace.branches if b.status == "finished"]
            wanted = set(branch_ids if branch_ids is not None else finished[-8:])
            run_ids = {trace.system: trace.run_id}
            for b in trace.branches:
                if b.run_id in wanted:
                    run_ids[b.system] = b.run_id
            session_id = store.create_compare_session(trace.question)
            for system, entry in run_ids.items():
                store.add_compare_entry(session_id, system, entry)
        except StoreError as exc:
            return CompareStart(None, {}, f"the session is not saved: {exc}")
        return CompareStart(session_id, run_ids)

    # --- compare mode --------------------------------------------------------------------------

    def start_compare(self, question: str, systems: Sequence[str]) -> CompareStart:
        """Record a compare session of `systems` on `question`; each column then runs an `Ask`
        with its run id, outside any conversation. The session is optional: without a history
        (or when it cannot be written) the comparison still runs, unsaved."""
        run_ids = {system: uuid.uuid4().hex for system in systems}
        store = self.runtime.store
        if store is None:
            return CompareStart(None, run_ids, "no history: the session is not saved")
        from ..store import StoreError

        try:
            session_id = store.create_compare_session(question)
            for system, run_id in run_ids.items():
                store.add_compare_entry(session_id, system, run_id)
        except StoreError as exc:
            return CompareStart(None, run_ids, f"the session is not saved: {exc}")
        return CompareStart(session_id, run_ids)


def _engine_turns(turns: Any) -> list[dict[str, Any]]:
    """Earlier turns as the conductor and workers read them: user and assistant only."""
    return [{"role": t["role"], "content": t["content"]} for t in turns if t["role"] in ("user", "assistant")]


def _title(question: str) -> str:
    flat = " ".join(question.split())
    return flat if len(flat) <= 60 else flat[:59] + "…"


__all__ = ["Ask", "AskError", "CompareStart", "Fork", "ForkOutcome", "Outcome", "Sessions"]

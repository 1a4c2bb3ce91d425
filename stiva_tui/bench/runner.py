"""Running a bench: every (system, item) as one run of the session service, graded, stored.

    runner = BenchRunner(runtime, suite, systems, concurrency=8, budget_usd=2.0)
    outcome = await runner.run()          # progress through `on_progress(BenchProgress)`

Each item is asked through `Sessions.ask` (source "bench"), so it is a run like any other: the
same engine, recorded in the same history, openable in the workflow tree. The bench itself lives
in the history store (`Store.open_bench` ...), keyed by `bench_key` — the suite's content, the
systems and the config — so running the same command again continues where it stopped: graded
items are not asked again; items in flight at a kill, and items that ended in an error, are.

- Up to `concurrency` items run at once, across systems (interleaved, so a partial bench
  compares the systems on the same items). The pool's worker is wrapped in `LimitedWorker`: a
  429 slows that provider down instead of failing items.
- An item whose run fails (its calls kept failing, the conductor could not plan) is recorded as
  an error, never as a wrong answer.
- Code items run in the sandbox (`stiva_tui.sandbox`); where it has no isolation, `check()` refuses
  the bench before anything is asked, unless `unsafe_code` was passed (the report says so).
- `budget_usd` caps this invocation's spend, the judge's included: once reached, the items in
  flight are cancelled (asked again on resume) and the bench is marked stopped, saying why.
- One process per bench: a second `stiva bench` on a bench another live process runs refuses
  before asking anything (`BenchBusy`, naming that process's pid).
- An item's `latency_s` counts from its first call: the time it waited before, behind other
  items in the limiter (`LimitedWorker`: MoA's proposers, a window a 429 halved, the embedded
  model, which answers one call at a time), is its `queue_wait_s`, reported apart.
- A history that can no longer be written (a full disk, a read-only file, a damaged page: a
  `HistoryFault`, met by any write, the runs' own included) stops the bench at once, raising
  that fault: nothing more is asked that could not be kept. An item graded but not stored stays
  in `unsaved`, so the report still shows it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ..config import REPLAY_PROVIDER, SIM_PROVIDER
from ..core.usage import Usage
from ..evals.graders import grade_async, judge_prompt, parse_judge_reply
from ..evals.suite import Suite, SuiteItem, answer_kind, answer_options, question_text
from ..pool.types import TextDelta, UsageReport
from ..runtime.sessions import Ask, AskError
from ..runtime.systems import System, SystemNameError
from ..store.errors import BenchBusyError, HistoryFault
from ..store.records import BenchItemRecord
from .limiter import ItemClock, LimitedWorker, item_clock
from .systems import resolve_systems

log = logging.getLogger(__name__)


class BenchError(Exception):
    """The bench cannot run as asked (no history, an unknown judge, a system that cannot run)."""


class BenchBusy(BenchError):
    """Another live process runs this bench (the message names its pid)."""


# Config fields that change nothing about the answers: left out of the bench's key.
_NOT_MEASURED = {"theme", "keymap", "serve", "discovery", "sandbox"}
# Providers stiva serves itself on a free port (the simulated and replayed pools): their address
# changes with every process, so it is left out of the key, or a bench of them could never resume.
_OWN_SERVERS = {SIM_PROVIDER, REPLAY_PROVIDER}


def bench_key(suite: Suite, systems: Sequence[System], config, pool_ids: Sequence[str]) -> tuple[str, str]:
    """(bench id, config hash): what the bench measures, fingerprinted. The same suite content,
    systems and config (and the same available models) give the same id."""
    dump = config.model_dump(mode="json", exclude=_NOT_MEASURED)
    for provider in dump.get("providers") or []:
        if provider.get("name") in _OWN_SERVERS:  # the port of this process's own server: not what is measured
            provider.pop("base_url", None)
    config_json = json.dumps(dump, sort_keys=True)
    config_hash = hashlib.sha256((config_json + "\n" + ",".join(pool_ids)).encode()).hexdigest()[:16]
    key = "\n".join([suite.content_hash, ",".join(s.name for s in systems), config_hash])
    return hashlib.sha256(key.encode()).hexdigest()[:12], config_hash


@dataclass
class SystemProgress:
    system: str
    total: int
    done: int = 0
    correct: int = 0
    errors: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    judge_cost_usd: float = 0.0

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.done if self.done else None


@dataclass
class BenchProgress:
    """A snapshot for the live views (CLI and app)."""

    bench_id: str
    suite: str
    systems: dict[str, SystemProgress]
    started: float
    resumed: int = 0  # items found already graded
    asked: int = 0  # items finished by this invocation
    spent_usd: float = 0.0
    throttled: dict[str, int] = field(default_factory=dict)
    stopped: str | None = None
    stage: str | None = None  # what happens before the first item (a conductor loading)

    @property
    def done(self) -> int:
        return sum(s.done for s in self.systems.values())

    @property
    def total(self) -> int:
        return sum(s.total for s in self.systems.values())

    @property
    def eta_s(self) -> float | None:
        """Seconds left at this invocation's pace (None before its first item)."""
        if not self.asked:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.asked * max(0, self.total - self.done)


@dataclass
class BenchOutcome:
    bench_id: str
    status: str  # finished | stopped
    stop_reason: str | None
    records: list[BenchItemRecord]


ProgressCallback = Callable[[BenchProgress], None]


class BenchRunner:
    def __init__(
        self,
        runtime,
        suite: Suite,
        systems: Sequence[System],
        *,
        concurrency: int = 4,
        budget_usd: float | None = None,
        limit: int | None = None,
        fresh: bool = False,
        on_progress: ProgressCallback | None = None,
        unsafe_code: bool = False,
        answer_cache=None,
        ranked_on: Suite | None = None,
    ):
        """`ranked_on`: the suite whose train items rank a replay pool's models for ties and
        agreements, where `suite` is a part of it (`stiva bench --split test`): the whole suite, so
        the rank never reads the graded items' own results; default `suite`."""
        if runtime.store is None:
            raise BenchError("a bench needs the history store (it keeps the results and resumes from them)")
        self.runtime = runtime
        self.suite = suite
        self.items: list[SuiteItem] = list(suite.items[:limit] if limit else suite.items)
        try:
            self.systems = resolve_systems(systems, runtime.models, runtime.config.moa.aggregator)
        except SystemNameError as exc:
            raise BenchError(str(exc)) from None
        # what is asked; oracle and random are computed from the direct runs in the report
        self.run_systems = [s for s in self.systems if not s.derived]
        self.concurrency = max(1, concurrency)
        self.budget_usd = budget_usd
        self.fresh = fresh
        self.on_progress = on_progress
        self.sandbox = runtime.config.sandbox.settings(unsafe=unsafe_code)
        # How code items run, for the report: None when the suite has none.
        self.sandbox_line: str | None = None
        self.bench_id, self.config_hash = bench_key(suite, self.systems, runtime.config, [m.id for m in runtime.models])
        self.progress = BenchProgress(
            self.bench_id,
            suite.name,
            {s.name: SystemProgress(s.name, len(self.items)) for s in self.run_systems},
            time.monotonic(),
        )
        self._stop: str | None = None
        self._tasks: set[asyncio.Task] = set()
        self._limited: LimitedWorker | None = None
        # `--answer-cache` (pool/answer_cache.py): an AnswerCache, in front of the limiter, so a
        # reused answer takes no provider slot; it replays the recorded latency (true figures)
        self.answer_cache = answer_cache
        self.caching = None  # the CachingWorker while running, for its counts
        self.unsaved: list[BenchItemRecord] = []  # graded by this invocation, but the history failed
        # every item record known: found in the history at the start, then each one finished
        self.known: dict[tuple[str, str], BenchItemRecord] = {}
        # a replay of recorded answers that carry no latency (an import without one): the time an
        # item takes is the replay's own, not a model's, so none is recorded (the report says
        # "not recorded" rather than 0.0 s)
        self.untimed = _replays_without_latency(runtime.config)
        # who a vote's tie and a gate's agreement return: on recorded answers, the models by their
        # record on the suite's train half (core/replayed.py ranks them the same way); with --split
        # test, the whole suite's train half, never the test items' own grades
        self.model_rank = _recorded_rank(runtime, ranked_on if ranked_on is not None else suite)

    # --- checks before anything runs --------------------------------------------------------

    def check(self) -> None:
        """Raise BenchError for what would fail every item: a system that cannot run, a judge
        that is not in the pool. Nothing is asked or recorded."""
        sessions = self.runtime.sessions
        for system in self.run_systems:
            try:
                sessions.check(Ask("check", mode=system.mode, source="bench", in_conversation=False))
            except AskError as exc:
                raise BenchError(f"{system.name}: {exc}") from None
        if any(item.grader == "judge" for item in self.items):
            self._judge_model()
        code_items = sum(item.grader == "code" for item in self.items)
        if code_items:
            from ..sandbox import SandboxUnavailable, find_isolation

            try:
                self.sandbox_line = find_isolation(self.sandbox).describe(self.sandbox)
            except SandboxUnavailable as exc:
                raise BenchError(f"{code_items} code item{'s' if code_items > 1 else ''} refused: {exc}") from None

    def _judge_model(self):
        judge = self.runtime.config.bench.judge
        if not judge:
            raise BenchError('the suite has judge items: name the grading model in the config, [bench] judge = "MODEL"')
        model = self.runtime.pool.get(judge)
        if model is None or not (model.enabled and model.available):
            why = f" ({model.reason})" if model is not None and model.reason else ""
            raise BenchError(f"[bench] judge {judge!r} is not an available pool model{why}")
        return model

    # --- running --------------------------------------------------------------------------

    async def run(self) -> BenchOutcome:
        self.check()
        store = self.runtime.store
        try:
            store.open_bench(
                self.bench_id,
                suite=self.suite.name,
                suite_hash=self.suite.content_hash,
                systems=[s.name for s in self.systems],
                config_hash=self.config_hash,
                items=len(self.items),
                # --fresh redoes what this invocation will run, and forgets nothing else
                fresh=[item.id for item in self.items] if self.fresh else False,
            )
        except BenchBusyError as exc:
            raise BenchBusy(str(exc)) from None
        skip = store.items_to_skip(self.bench_id)
        ids = {item.id for item in self.items}
        for record in store.bench_items(self.bench_id):
            self.known[(record.system, record.item_id)] = record
            if record.status == "graded" and record.item_id in ids and record.system in self.progress.systems:
                self._count(record)
                self.progress.resumed += 1
        # conductors load once, before the first item (a bad adapter fails here, not per item)
        for system in self.run_systems:
            if system.conductor:
                await self.runtime.ensure_conductor(self._loading(system.name), system.mode.variant)
        self.progress.stage = None
        queue: asyncio.Queue = asyncio.Queue()
        for item in self.items:  # interleaved: every system on item 1, then on item 2, ...
            for system in self.run_systems:
                if (system.name, item.id) not in skip:
                    queue.put_nowait((system, item))
        self._limited = LimitedWorker(self.runtime.worker, self.concurrency)
        for model in self.runtime.models:  # one in-process model: one call at a time, the rest queue
            if model.kind == "embedded":  # (its wait is queue wait, not latency; in parallel threads
                window = self._limited.window(model.provider)  # on a few cores each call only slowed)
                window.limit = window.window = 1
        original = self.runtime.worker
        self.runtime.worker = self._limited
        if self.answer_cache is not None:
            from ..pool.answer_cache import CachingWorker

            self.caching = self.runtime.worker = CachingWorker(self._limited, self.answer_cache, replay_latency=True)
        self._emit()
        try:
            workers = [
                asyncio.create_task(self._work(queue), name=f"bench-{i}")
                for i in range(min(self.concurrency, queue.qsize()))
            ]
            self._tasks.update(workers)
            await asyncio.gather(*workers, return_exceptions=False)
        except BaseException as exc:  # ctrl+c, or a fault outside any item (the history failing)
            cancelled = isinstance(exc, asyncio.CancelledError)
            self._stop = self._stop or ("cancelled" if cancelled else f"error: {type(exc).__name__}: {exc}")
            await self._cancel_all()
            try:
                store.close_bench(self.bench_id, "stopped", self._stop)
            except Exception:  # noqa: BLE001 - the history may be what failed; the first error stands
                log.exception("could not mark bench %s stopped", self.bench_id)
            raise
        finally:
            self.runtime.worker = original
        status = "stopped" if self._stop else "finished"
        store.close_bench(self.bench_id, status, self._stop)
        self.progress.stopped = self._stop
        self._emit()
        return BenchOutcome(self.bench_id, status, self._stop, store.bench_items(self.bench_id))

    async def _cancel_all(self) -> None:
        current = asyncio.current_task()
        pending = [t for t in self._tasks if t is not current and not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    async def _work(self, queue: asyncio.Queue) -> None:
        while not self._stop:
            try:
                system, item = queue.get_nowait()
            except asyncio.QueueEmpty:
                return
            record = await self._one(system, item)
            if self._stop:  # the budget ran out while this one ran: it is asked again on resume
                return
            self._save(record)
            self._count(record)
            self.progress.asked += 1
            # what was paid: with the answer cache, only the calls that reached a provider
            self.progress.spent_usd = (
                self.caching.paid_usd
                if self.caching is not None
                else self.progress.spent_usd + record.cost_usd + record.judge_cost_usd
            )
            if self.budget_usd is not None and self.progress.spent_usd >= self.budget_usd:
                self._stop = f"budget: ${self.progress.spent_usd:.4f} spent of ${self.budget_usd:.4f}"
                self.progress.stopped = self._stop
                others = [t for t in self._tasks if t is not asyncio.current_task() and not t.done()]
                for task in others:
                    task.cancel()
            self._emit()

    def _save(self, record: BenchItemRecord) -> None:
        """Store the item; raise the history's fault (the item kept in `unsaved` when it could not
        be stored), so that nothing more is asked once the history cannot keep it."""
        store = self.runtime.store
        self.known[(record.system, record.item_id)] = record
        try:
            store.record_bench_item(self.bench_id, record)
        except HistoryFault:
            self.unsaved.append(record)
            self._count(record)
            raise
        if store.fault is not None:  # the run's own writes failed (its steps, its answer)
            self._count(record)
            raise store.fault

    async def _one(self, system: System, item: SuiteItem) -> BenchItemRecord:
        started = time.monotonic()
        ask = Ask(
            question_text(item),
            mode=system.mode,
            source="bench",
            in_conversation=False,
            options={
                "answer_kind": answer_kind(item),
                "answer_options": answer_options(item),
                "model_rank": self.model_rank,
                **system.options,
            },
            title=f"bench {self.suite.name} {item.id}",
        )
        clock = ItemClock()  # the time its calls queued behind other items (limiter.py)
        try:
            with item_clock(clock):
                outcome = await self.runtime.sessions.ask(ask)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the conductor could not load, an unknown model...
            return BenchItemRecord(
                system=system.name,
                item_id=item.id,
                status="error",
                error=f"{type(exc).__name__}: {exc}",
                queue_wait_s=round(clock.queued_s, 4),
                latency_s=max(0.0, time.monotonic() - started - clock.queued_s),
            )
        result = outcome.result
        totals = result.totals
        wall = totals.latency_s or (time.monotonic() - started)
        base = dict(
            system=system.name,
            item_id=item.id,
            run_id=result.run_id,
            answer=result.answer,
            prompt_tokens=totals.prompt_tokens,
            completion_tokens=totals.completion_tokens,
            cost_usd=totals.cost_usd,
            latency_s=0.0 if self.untimed else round(max(0.0, wall - clock.queued_s), 4),
            queue_wait_s=round(clock.queued_s, 4),
        )
        if result.status != "finished":
            return BenchItemRecord(status="error", error=result.error or (result.failure or result.status), **base)
        # A graded item's `error` is why a wrong answer is wrong (the grader's detail), for report.json.
        if item.grader == "judge":
            try:
                verdict, usage, cost = await self._judge(item, result.answer)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # noqa: BLE001 - the judge's own call failed: not the system's fault
                return BenchItemRecord(status="error", error=f"judge: {exc}", **base)
            return BenchItemRecord(
                status="graded",
                correct=verdict.correct,
                extracted=verdict.extracted,
                error=None if verdict.correct else (verdict.detail or "the judge said incorrect"),
                judge_prompt_tokens=usage.prompt_tokens,
                judge_completion_tokens=usage.completion_tokens,
                judge_cost_usd=cost,
                **base,
            )
        try:
            verdict = await grade_async(item, result.answer, sandbox=self.sandbox)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - a grader that broke: an error, asked again on resume
            return BenchItemRecord(status="error", error=f"grader: {type(exc).__name__}: {exc}", **base)
        return BenchItemRecord(
            status="graded",
            correct=verdict.correct,
            extracted=verdict.extracted,
            error=None if verdict.correct else verdict.detail,
            **base,
        )

    async def _judge(self, item: SuiteItem, answer: str):
        model = self._judge_model()
        parts: list[str] = []
        usage = Usage()
        stream = self.runtime.worker.stream_chat(
            model, judge_prompt(item, answer), temperature=0.0, max_tokens=self.runtime.config.bench.judge_max_tokens
        )
        async for event in stream:
            if isinstance(event, TextDelta):
                parts.append(event.text)
            elif isinstance(event, UsageReport):
                usage = event.usage
        return parse_judge_reply("".join(parts)), usage, model.cost(usage)

    def _loading(self, system: str):
        """A progress callback for a conductor's load (called from the loading thread)."""

        def progress(fraction: float | None, message: str) -> None:
            pct = f" {fraction:.0%}" if fraction is not None else ""
            self.progress.stage = f"{system}: {message}{pct}"
            self._emit()

        return progress

    def _count(self, record: BenchItemRecord) -> None:
        progress = self.progress.systems[record.system]
        progress.done += 1
        progress.correct += int(record.status == "graded" and record.correct)
        progress.errors += int(record.status == "error")
        progress.tokens += record.prompt_tokens + record.completion_tokens
        progress.cost_usd += record.cost_usd
        progress.judge_cost_usd += record.judge_cost_usd

    def _emit(self) -> None:
        if self._limited is not None:
            self.progress.throttled = self._limited.throttled()
        if self.on_progress is not None:
            try:
                self.on_progress(self.progress)
            except Exception:  # noqa: BLE001 - a broken view must not stop the bench
                log.exception("bench progress view failed")


def _replays_without_latency(config) -> bool:
    """Whether the pool is a replay (`--pool replay:ID`) whose recorded answers have no latency."""
    sim = getattr(config, "sim", None)
    if sim is None or not sim.replay:
        return False
    replayed = [m for m in config.models if m.provider == REPLAY_PROVIDER]
    return bool(replayed) and all(not m.latency_s for m in replayed)


def _recorded_rank(runtime, suite: Suite) -> tuple[str, ...]:
    """On a replay pool (`--pool replay:ID`), the pool's models ranked by their recorded answers on
    the suite's train items (all items where none is marked train): the most accurate first, the
    cheapest among equals, then by id (bench/replay.py's `recorded_rank`). Elsewhere, none."""
    sim = getattr(runtime.config, "sim", None)
    if sim is None or not sim.replay or runtime.store is None:
        return ()
    from ..sim.labels import REPLAY_PREFIX
    from ..sim.replay import ReplayError
    from .replay import read_recorded, recorded_rank

    try:
        recorded = read_recorded(runtime.store, sim.replay)
    except ReplayError:
        return ()
    rank = recorded_rank(recorded, {item.id for item in suite.items if item.meta.get("split") == "train"})
    return tuple(REPLAY_PREFIX + m for m in sorted(rank, key=lambda m: (rank[m], m)))

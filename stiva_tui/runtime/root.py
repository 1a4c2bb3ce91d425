"""The composition root: everything a front end needs, built from the config.

    runtime = await Runtime.create(config)              # pool built, store open, nothing loaded
    await runtime.ensure_conductor(progress)            # chooses and loads the conductor once
    outcome = await runtime.sessions.ask(Ask("..."))    # the one way questions are run
    await runtime.aclose()

The TUI, the CLI and the server (and next the benchmark and training) share this, so they run
questions the same way and record them in the same history.
"""

from __future__ import annotations

import asyncio
import logging
import statistics
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..conductor.base import Conductor, ConductorError
from ..config import REPLAY_PROVIDER, SIM_PROVIDER, ConductorConfig, Config, ConfigError, with_conductor_override
from ..core.events import Event, RunStarted, WorkflowReady
from ..core.preference import parse_preference
from ..core.trace import NOTE_MARK
from ..core.words import Source
from ..engine.executor import FLAGGED_NOTE, REPLACED_NOTE, Engine, RunOptions
from ..engine.fallback import FallbackEvidence, Predictor
from ..inference.progress import Progress, report
from ..pool.client import HttpWorker, PoolWorker
from ..pool.registry import Pool, build_pool, check_references
from ..pool.types import PoolModel
from .modes import ConductorVariant

if TYPE_CHECKING:
    from ..store import Store
    from .model_process import ModelProcess
    from .sessions import Sessions

log = logging.getLogger(__name__)


class StartupError(Exception):
    """Stiva could not start: the message says what to do."""


# The guard replaces the plans it rejects for a planner with a plan rejected in its last RECENT_RUNS
# runs (replaced, or flagged and run as written, or none written); the embedded planner's, always.
RECENT_RUNS = 20
_REJECTED = (REPLACED_NOTE, FLAGGED_NOTE)


class _RejectedPlans:
    """A subscriber: which runs of each planner (backend, model) had a plan rejected (replaced, or
    flagged by the guard), over each planner's last RECENT_RUNS runs in this process."""

    def __init__(self) -> None:
        self._runs: dict[tuple[str, str], deque[str]] = {}
        self._rejected: set[str] = set()

    def __call__(self, event: Event) -> None:
        if isinstance(event, RunStarted) and event.mode == "conductor":
            runs = self._runs.setdefault((event.conductor_backend or "", event.conductor_model or ""), deque())
            runs.append(event.run_id)
            while len(runs) > RECENT_RUNS:
                self._rejected.discard(runs.popleft())
        elif isinstance(event, WorkflowReady) and event.note.startswith(_REJECTED):
            self._rejected.add(event.run_id)

    def recently(self, backend: str, model: str) -> bool:
        return any(run_id in self._rejected for run_id in self._runs.get((backend, model), ()))


@dataclass
class _Loaded:
    conductor: Conductor
    reason: str
    # Chosen from what the pool offers (auto, unless it chose the local GPU model; remote): chosen
    # again when that changes (pool_refresh).
    from_pool: bool = False


def pool_change(before: Pool, after: Pool) -> str:
    """What changed in what the pool offers, in words ("a key for lab was added", "a local server
    went away"); "" when nothing did. A key replaced for a model that stays available counts too."""
    old = {m.id: m for m in before.available()}
    new = {m.id: m for m in after.available()}
    words: list[str] = []

    def said(text: str) -> None:
        if text not in words:
            words.append(text)

    for model in (m for i, m in new.items() if i not in old):
        was = before.get(model.id)
        if model.source == "discovered" or (was is not None and was.reason.startswith("unreachable")):
            said(f"a local server appeared at {model.base_url}")
        else:
            said(f"a key for {model.provider} was added")
    for model in (m for i, m in old.items() if i not in new):
        now = after.get(model.id)
        if now is None or now.source == "discovered" or now.reason.startswith("unreachable"):
            said(f"a local server went away at {model.base_url}")
        elif now.enabled:
            said(f"a key for {model.provider} was removed")
        else:
            said(f"{model.id} was disabled")
    for model in (m for i, m in new.items() if i in old):
        if (model.api_key, model.base_url) != (old[model.id].api_key, old[model.id].base_url):
            said(f"the key for {model.provider} was replaced")
    return "; ".join(words)


def discovery_news(before: Pool, after: Pool) -> list[str]:
    """What discovery changed from `before` to `after`, one line per local server, for a notice:
    "Ollama at URL appeared: ollama/llama3.2 joined the pool", "... went away: ... left the pool",
    "... now serves ... too", "... no longer serves ..."; and the line of each server newly left
    out (another user's: `discovery.LeftOut`)."""
    from ..pool.discovery import KNOWN_SERVERS

    labels = {kind.name: kind.label for kind in KNOWN_SERVERS}

    def served(pool: Pool) -> dict[str, tuple[str, list[str]]]:
        servers: dict[str, tuple[str, list[str]]] = {}
        for model in pool:
            if model.source == "discovered":
                servers.setdefault(model.base_url, (labels.get(model.provider, model.provider), []))[1].append(model.id)
        return servers

    old, new = served(before), served(after)
    news: list[str] = []
    for url in dict.fromkeys([*new, *old]):
        label = (new.get(url) or old[url])[0]
        was, now = old.get(url, (label, []))[1], new.get(url, (label, []))[1]
        added, removed = [i for i in now if i not in was], [i for i in was if i not in now]
        server = f"{label} at {url}"
        if not was:
            news.append(f"{server} appeared: {_some(added)} joined the pool")
        elif not now:
            news.append(f"{server} went away: {_some(removed)} left the pool")
        elif added or removed:
            said = ([f"now serves {_some(added)} too"] if added else []) + (
                [f"no longer serves {_some(removed)}"] if removed else []
            )
            news.append(f"{server} {' and '.join(said)}")
    return news + left_out_news(after, before.left_out)


def left_out_news(pool: Pool, known: Sequence[str] = ()) -> list[str]:
    """The lines of the local servers `pool` left out (another user's) that are not in `known`."""
    return [line[0].upper() + line[1:] for line in pool.left_out if line not in known]


def _some(ids: list[str], shown: int = 3) -> str:
    """ "a, b and c", or "a, b, c and 5 more" (a server may list 256 models)."""
    if len(ids) > shown:
        return f"{', '.join(ids[:shown])} and {len(ids) - shown} more"
    return ids[0] if len(ids) == 1 else f"{', '.join(ids[:-1])} and {ids[-1]}"


@dataclass
class Runtime:
    config: Config
    pool: Pool
    worker: PoolWorker
    store: "Store | None" = None
    conductor_override: str | None = None  # "BACKEND[:MODEL]" from the command line
    # The chosen (and loaded) conductors, by their conductor config as JSON.
    _conductors: dict[str, _Loaded] = field(default_factory=dict)
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    _sessions: "Sessions | None" = None
    # Models the config names that are known but not available now (no key, a server down).
    warnings: list[str] = field(default_factory=list)
    _latencies: dict[str, float] | None = None
    _outputs: dict[str, int] | None = None
    # The first rule of the fallback model (engine/fallback.py): a router's predicted chances.
    fallback_predictor: Predictor | None = None
    _accuracy: dict[str, tuple[int, int]] | None = None
    _rejected_plans: _RejectedPlans = field(default_factory=_RejectedPlans)
    _rejected_in_history: dict[tuple[str, str], bool] = field(default_factory=dict)
    discover: bool | None = None  # as given to create: pool_refresh discovers (or not) the same way
    # What changed in the pool when its conductors were last chosen again ("" before any change),
    # and how many times that happened: a conductor chosen from an older pool is not kept.
    pool_change: str = ""
    _pool_generation: int = 0
    # What discovery changed at each refresh, and local servers left out, in lines a front end
    # announces once (`take_pool_news`): the servers of another user left out at start are here first.
    pool_news: list[str] = field(default_factory=list)
    # Where the models Stiva loads itself run when not in this process (`model_process`).
    model_process: "ModelProcess | None" = None

    @classmethod
    async def create(
        cls,
        config: Config,
        *,
        conductor: str | None = None,
        with_store: bool = True,
        discover: bool | None = None,
        store_path: Any = None,
        model_process: "bool | ModelProcess" = False,
    ) -> "Runtime":
        """Build the pool (and discover local servers) and open the history; loads no model. A
        [sim] config must come with its server started (`stiva_tui.sim.pool.start_sim`, which the
        command line does): the simulated pool is a server of its own, above the runtime.
        `model_process`: the embedded model and a local conductor load and run in a process of
        their own (model_process.py; the app does this), not in this one; a `ModelProcess` given
        is that process, already started (the app starts it beside its first paint)."""
        if config.sim is not None and not any(p.name in (SIM_PROVIDER, REPLAY_PROVIDER) for p in config.providers):
            raise StartupError(
                "config: [sim] is set but the simulated pool is not running: start it with "
                "stiva_tui.sim.pool.start_sim(config) (the stiva command does)"
            )
        process, embedded = None, None
        if model_process:
            from . import model_process as hosting

            if not isinstance(model_process, bool):
                process = model_process
                embedded = hosting.HostedWorker(process)
            elif hosting.supported():
                # the warm `stiva ask` worker's models where one serves them: one copy per user
                process = hosting.shared_process()
                embedded = hosting.HostedWorker(process)
        # the embedded model's reason says where it runs (F4, `stiva models`)
        pool = await build_pool(config, discover=discover, embedded_process=process is not None)
        worker = PoolWorker(
            HttpWorker(
                timeout_s=config.workers.timeout_s,
                connect_timeout_s=config.workers.connect_timeout_s,
                retries=config.workers.retries,
                max_answer_bytes=config.workers.max_answer_kb * 1024,
            ),
            embedded=embedded,
        )
        worker.know_secrets(pool)
        store = None
        if with_store:
            from ..store import Store

            store = await asyncio.to_thread(Store.open, store_path)  # file I/O and upgrades off the loop
        runtime = cls(
            config=config,
            pool=pool,
            worker=worker,
            store=store,
            conductor_override=conductor,
            discover=discover,
            model_process=process,
            pool_news=left_out_news(pool),
        )
        try:
            cfg = runtime.conductor_config()  # a bad --conductor override fails here, before any run
        except StartupError:
            await runtime.aclose()
            raise
        errors, runtime.warnings = check_references(
            config, pool, cfg.backend, cfg.model, conductor_option=conductor, fallback_model=cfg.fallback_model
        )
        if errors:
            await runtime.aclose()
            raise StartupError(errors[0] if errors[0].startswith("--conductor") else f"config: {errors[0]}")
        if cfg.router and runtime.fallback_predictor is None:
            runtime.fallback_predictor = router_predictor(cfg.router)
        return runtime

    @property
    def sessions(self) -> "Sessions":
        """The session service: ask, compare; what every front end runs questions through."""
        if self._sessions is None:
            from .sessions import Sessions

            self._sessions = Sessions(self)
        return self._sessions

    @property
    def models(self) -> list[PoolModel]:
        """The available pool models, numbered as the conductor sees them."""
        return list(self.pool.available())

    # --- the conductor -------------------------------------------------------------------------

    def conductor_config(self, variant: ConductorVariant | None = None) -> ConductorConfig:
        """The [conductor] config with the command-line override, then `variant`, applied."""
        try:
            config = with_conductor_override(self.config.conductor, self.conductor_override)
        except ConfigError as exc:
            raise StartupError(str(exc)) from None
        if variant is not None:
            changes: dict[str, str | None] = {
                k: v
                for k, v in (("backend", variant.backend), ("model", variant.model), ("adapter", variant.adapter))
                if v is not None
            }
            if variant.base:
                changes["adapter"] = None
            config = config.model_copy(update=changes)
        return config

    @property
    def conductor(self) -> Conductor | None:
        """The configured conductor once chosen (it may still be loading)."""
        loaded = self._conductors.get(self.conductor_config().model_dump_json())
        return loaded.conductor if loaded else None

    @property
    def conductor_reason(self) -> str:
        loaded = self._conductors.get(self.conductor_config().model_dump_json())
        return loaded.reason if loaded else ""

    @property
    def conductor_ready(self) -> bool:
        conductor = self.conductor
        return conductor is not None and conductor.loaded

    async def ensure_conductor(
        self, progress: Progress | None = None, variant: ConductorVariant | None = None
    ) -> Conductor:
        """Choose and load (in a thread) the conductor of `variant` (None: the configured one),
        once; later calls return it at once, and calls during a load wait for it. Raises
        ConductorError when it cannot run."""
        cfg = self.conductor_config(variant)
        key = cfg.model_dump_json()
        async with self._lock:
            while (loaded := self._conductors.get(key)) is None:
                generation = self._pool_generation
                loaded = await self._choose_and_load(cfg, progress)
                if generation == self._pool_generation:  # else the pool changed meanwhile: choose again
                    self._conductors[key] = loaded
            return loaded.conductor

    def reason_for(self, conductor: Conductor) -> str:
        """Why `conductor` was chosen (auto selection), for display."""
        for loaded in self._conductors.values():
            if loaded.conductor is conductor:
                return loaded.reason
        return ""

    async def _choose_and_load(self, cfg: ConductorConfig, progress: Progress | None) -> _Loaded:
        from ..conductor.choose import fallback_conductor, select_conductor

        named = self.pool.get(cfg.model) if cfg.backend == "remote" and cfg.model else None
        if named is not None and not (named.enabled and named.available):  # its key removed, its server gone
            raise ConductorError(f"the remote conductor {cfg.model} is not available now ({named.reason})")
        conductor, reason = await asyncio.to_thread(
            select_conductor, cfg, self.models, self.worker, progress, self.config.workers.deadline_s
        )
        conductor = self._hosted(conductor, cfg)
        try:
            await conductor.load(progress)
        except ConductorError as exc:
            if cfg.backend != "auto" or conductor.backend != "local":
                raise
            # auto chose the GPU model and it would not load: a pool model plans, or the CPU model
            conductor, reason = fallback_conductor(
                cfg, self.models, self.worker, f"the local model failed to load ({exc})", self.config.workers.deadline_s
            )
            conductor = self._hosted(conductor, cfg)
            report(progress, None, reason)
            await conductor.load(progress)
        if self.model_process is not None and all(m.kind == "embedded" for m in self.models):
            # the pool is the embedded model alone (no key, no local server): it answers the first
            # question, and warms up now, behind the conductor's load, instead of during it
            self.model_process.warm_up()
        from_pool = cfg.backend == "remote" or (cfg.backend == "auto" and conductor.backend != "local")
        return _Loaded(conductor, reason, from_pool)

    def _hosted(self, conductor: Conductor, cfg: ConductorConfig) -> Conductor:
        """`conductor` itself, or (`model_process`, a model Stiva loads) its stand-in that loads
        and runs it in the model process."""
        if self.model_process is None or conductor.backend not in ("embedded", "local"):
            return conductor
        from .model_process import HostedConductor

        return HostedConductor(self.model_process, conductor, cfg)

    # --- runs ----------------------------------------------------------------------------------

    async def pool_refresh(self) -> str:
        """Rebuild the pool (a key added or removed, a local server come or gone); the next run
        uses it. When what the pool offers changed, the conductors chosen from it are forgotten, so
        the next `ensure_conductor` chooses again: a real planner replaces the embedded model as
        soon as there is one, and a planner whose key was removed plans no more. Returns what
        changed, in words ("" when nothing did); `pool_change` keeps it."""
        before = self.pool
        self.pool = await build_pool(
            self.config, discover=self.discover, embedded_process=self.model_process is not None
        )
        self.worker.know_secrets(self.pool)
        self.pool_news += discovery_news(before, self.pool)
        change = pool_change(before, self.pool)
        if change:
            self.pool_change = change
            self._pool_generation += 1
            self._conductors = {key: kept for key, kept in self._conductors.items() if not kept.from_pool}
        return change

    def take_pool_news(self) -> list[str]:
        """The lines of `pool_news` not yet taken: each is announced once."""
        news, self.pool_news = self.pool_news, []
        return news

    def engine(self, *, source: Source = "tui", conductor: Conductor | None = None) -> Engine:
        """An engine over the available pool whose runs the history records."""
        from ..store import Recorder

        # The server answers from the events: no request waits for the history's disk.
        subscribers: list[Any] = [Recorder(self.store, wait_at_end=source != "api")] if self.store is not None else []
        subscribers.append(self._rejected_plans)
        conductor = conductor or self.conductor
        reason = self.reason_for(conductor) if conductor is not None else None
        guard_plans = True if conductor is not None and self.plans_rejected_recently(conductor) else None
        return Engine(
            self.models,
            self.worker,
            conductor,
            subscribers=subscribers,
            conductor_reason=reason,
            source=source,
            latencies=self.typical_latencies(),
            typical_outputs=self.typical_outputs(),
            fallback=FallbackEvidence(
                predict=self.fallback_predictor,
                accuracy=self.bench_accuracy(),
                model=self.conductor_config().fallback_model,
            ),
            guard_plans=guard_plans,
        )

    def plans_rejected_recently(self, conductor: Conductor) -> bool:
        """Whether one of `conductor`'s plans was rejected in its last RECENT_RUNS runs: replaced
        (by the guard, or because it wrote no valid plan) or flagged by the guard and run as
        written; in this process, or in the history (read once per planner). The guard replaces
        the plans it rejects then, whatever the planner's kind."""
        key = (conductor.backend, conductor.model)
        if self._rejected_plans.recently(*key):
            return True
        if key not in self._rejected_in_history:
            self._rejected_in_history[key] = self._rejected_in_store(*key)
        return self._rejected_in_history[key]

    def _rejected_in_store(self, backend: str, model: str) -> bool:
        if self.store is None:
            return False
        try:
            row = self.store.query_one(
                "SELECT 1 FROM rounds WHERE run_id IN (SELECT id FROM runs WHERE mode = 'conductor'"
                " AND conductor_backend = ? AND conductor_model = ? ORDER BY created_at DESC LIMIT ?)"
                " AND (instr(reasoning, ?) > 0 OR instr(reasoning, ?) > 0) LIMIT 1",
                (backend, model, RECENT_RUNS, *(f"{NOTE_MARK}{note}" for note in _REJECTED)),
            )
        except Exception as exc:  # noqa: BLE001 - a damaged history: the planner's kind decides alone
            log.warning("rejected plans not read from the history: %s", exc)
            return False
        return row is not None

    def bench_accuracy(self) -> dict[str, tuple[int, int]]:
        """Each model's (correct, graded) over the graded `direct:MODEL` items of every bench in the
        history, read once: the fallback model's second rule (engine/fallback.py)."""
        if self._accuracy is None:
            self._accuracy = {}
            if self.store is not None:
                try:
                    rows = self.store.query(
                        "SELECT system, SUM(correct) AS correct, COUNT(*) AS graded FROM bench_items"
                        " WHERE status = 'graded' AND system LIKE 'direct:%' GROUP BY system"
                    )
                    self._accuracy = {
                        row["system"].removeprefix("direct:"): (int(row["correct"]), int(row["graded"])) for row in rows
                    }
                except Exception as exc:  # noqa: BLE001 - a damaged history: no recorded accuracy
                    log.warning("bench accuracy not read from the history: %s", exc)
        return self._accuracy

    def run_options(self, **overrides: Any) -> RunOptions:
        """Run options from the config; `overrides` that are not None win."""
        cfg = self.config
        conductor = self.conductor_config()
        options = RunOptions(
            rounds=conductor.rounds,
            max_steps=conductor.max_steps,
            budget_usd=cfg.budget.usd,
            budget_tokens=cfg.budget.tokens,
            max_tokens=cfg.workers.max_tokens,
            temperature=cfg.workers.temperature,
            fallbacks=None if cfg.workers.fallbacks is None else tuple(cfg.workers.fallbacks),
            retries=cfg.workers.retries,
            deadline_s=cfg.workers.deadline_s,
            preference=parse_preference(conductor.prefer),
            open_agreement=cfg.workflows.open_agreement,
        )
        return replace(options, **{k: v for k, v in overrides.items() if v is not None})

    def typical_outputs(self, recent: int = 2000) -> dict[str, int]:
        """Each model's median answer tokens over the history's `recent` latest finished steps,
        read once (a failing store gives none): what a plan's estimate expects a step to write."""
        if self._outputs is None:
            self._outputs = {}
            if self.store is not None:
                try:
                    rows = self.store.query(
                        "SELECT model, completion_tokens FROM steps WHERE status = 'finished'"
                        " AND model IS NOT NULL AND completion_tokens > 0 ORDER BY rowid DESC LIMIT ?",
                        (recent,),
                    )
                    by_model: dict[str, list[int]] = {}
                    for row in rows:
                        by_model.setdefault(row["model"], []).append(int(row["completion_tokens"]))
                    self._outputs = {m: int(statistics.median_high(v)) for m, v in by_model.items()}
                except Exception as exc:  # noqa: BLE001 - a damaged history: the default answer length
                    log.warning("typical answer lengths not read from the history: %s", exc)
        return self._outputs

    def typical_latencies(self) -> dict[str, float]:
        """Each model's median step time in the history, read once (a failing store gives none)."""
        if self._latencies is None:
            self._latencies = {}
            if self.store is not None:
                try:
                    self._latencies = self.store.typical_latencies()
                except Exception as exc:  # noqa: BLE001 - a damaged history: the prompt says "latency unknown"
                    log.warning("typical latencies not read from the history: %s", exc)
        return self._latencies

    @property
    def simulated(self) -> bool:
        """Whether the pool is the simulated (or a replayed) one: every figure from it says so."""
        return self.config.sim is not None

    async def aclose(self) -> None:
        try:
            await self.worker.aclose()
            if self.model_process is not None:
                await self.model_process.aclose()
        finally:
            if self.store is not None:
                self.store.close()


def router_predictor(folder: str) -> Callable[[str, Sequence[str]], dict[str, float] | None]:
    """The fallback's first rule from `[conductor] router`: the router's predicted chance for each
    pool model it was trained on (loaded on first use; None, so the next rule decides, when the
    router cannot be read)."""
    from ..conductor.router import RouterError, canonical, load_router

    loaded: list[Any] = []

    def predict(question: str, models: Sequence[str]) -> dict[str, float] | None:
        try:
            if not loaded:
                loaded.append(load_router(folder))
            chances = loaded[0].predict(question)
        except RouterError:
            return None
        return {model: chances[canonical(model)] for model in models if canonical(model) in chances}

    return predict

"""Everything a front end needs, built from the config: pool, worker, conductor, store, engine.

    runtime = await Runtime.create(config)             # pool built, store open, nothing loaded
    conductor = await runtime.ensure_conductor(progress)   # loads a local model (in a thread) once
    engine = runtime.engine(source="tui")
    ...
    await runtime.aclose()

The CLI, the TUI and the server share this, so they run questions the same way.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, Callable

from .conductor.base import ConductorError
from .config import Config
from .engine.executor import Engine, RunOptions
from .pool.client import HttpWorker, PoolWorker

Progress = Callable[[float | None, str], None]


class StartupError(Exception):
    """Stiva could not start: the message says what to do."""


@dataclass
class Runtime:
    config: Config
    pool: Any  # stiva_tui.pool.registry.Pool
    worker: PoolWorker
    store: Any = None  # stiva_tui.store.Store
    conductor: Any = None  # a Conductor, once chosen/loaded
    conductor_reason: str = ""
    conductor_override: str | None = None  # "BACKEND[:MODEL]" from the command line
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    @classmethod
    async def create(cls, config: Config, *, conductor: str | None = None, with_store: bool = True,
                     discover: bool | None = None, store_path: Any = None) -> "Runtime":
        from .pool.registry import build_pool

        pool = await build_pool(config, discover=discover)
        worker = PoolWorker(HttpWorker(timeout_s=config.workers.timeout_s,
                                       connect_timeout_s=config.workers.connect_timeout_s,
                                       retries=config.workers.retries))
        store = None
        if with_store:
            from .store import Store

            store = await asyncio.to_thread(Store.open, store_path)  # file I/O and upgrades off the loop
        return cls(config=config, pool=pool, worker=worker, store=store, conductor_override=conductor)

    @property
    def models(self) -> list:
        """The available pool models, numbered as the conductor sees them."""
        return list(self.pool.available())

    def conductor_config(self):
        """The [conductor] config with a command-line override (BACKEND[:MODEL]) applied."""
        from .config import ConfigError, with_conductor_override

        try:
            return with_conductor_override(self.config.conductor, self.conductor_override)
        except ConfigError as exc:
            raise StartupError(str(exc)) from None

    async def ensure_conductor(self, progress: Progress | None = None):
        """Choose (and load, in a thread) the conductor once; later calls return it at once."""
        async with self._lock:
            if self.conductor is None:
                from .conductor.select import select_conductor

                cfg = self.conductor_config()
                conductor, reason = await asyncio.to_thread(
                    select_conductor, cfg, self.models, self.worker, progress)
                if hasattr(conductor, "load") and not getattr(conductor, "loaded", True):
                    try:
                        await conductor.load(progress)  # the model loads in a thread; progress from there
                    except ConductorError as exc:
                        if cfg.backend != "auto" or getattr(conductor, "backend", "") != "local":
                            raise
                        # auto chose the GPU model and it would not load: keep working on the CPU
                        from .conductor.select import embedded_fallback

                        conductor, reason = embedded_fallback(cfg, f"the local model failed to load ({exc})")
                        if progress is not None:
                            progress(None, reason)
                        await conductor.load(progress)
                self.conductor, self.conductor_reason = conductor, reason
            return self.conductor

    async def pool_refresh(self) -> None:
        """Rebuild the pool (after a key was added or removed); the next run uses it."""
        from .pool.registry import build_pool

        self.pool = await build_pool(self.config)

    def engine(self, *, source: str = "tui", conductor: Any = None) -> Engine:
        return Engine(self.models, self.worker, conductor or self.conductor, store=self.store,
                      conductor_reason=self.conductor_reason, source=source)

    def run_options(self, **overrides: Any) -> RunOptions:
        cfg = self.config
        conductor = self.conductor_config()
        values = dict(
            rounds=conductor.rounds, max_steps=conductor.max_steps, budget_usd=cfg.budget.usd,
            budget_tokens=cfg.budget.tokens, max_tokens=cfg.workers.max_tokens,
            temperature=cfg.workers.temperature, fallbacks=tuple(cfg.workers.fallbacks),
            retries=cfg.workers.retries,
        )
        values.update({k: v for k, v in overrides.items() if v is not None})
        return RunOptions(**values)

    async def aclose(self) -> None:
        await self.worker.aclose()
        if self.store is not None:
            self.store.close()

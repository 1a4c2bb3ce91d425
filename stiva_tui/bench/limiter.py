"""A per-provider rate limiter for benches: a 429 slows that provider down; it does not fail items.

`LimitedWorker(worker, limit)` wraps the pool's worker (the `Worker` protocol). Each provider has
its own concurrency window: at most `window` calls to it at once, starting at `limit`. A call
that the provider refuses with 429 before any text arrived (the HTTP client has already retried
it, honouring Retry-After) halves that provider's window, waits (Retry-After, else an exponential
backoff) and is tried again, up to `max_waits` times; every `grow_after` calls that succeed widen
the window by one again (additive increase, multiplicative decrease, as TCP does). Other
providers are not slowed. A 429 after text had streamed is the engine's to handle (retry, then
fallback), since the text cannot be unsent.

Queue wait: an item's calls may wait here for a slot, behind the bench's other items (MoA's
proposers, a window a 429 halved). That wait is not the system's latency. The runner gives each
item an `ItemClock` (`item_clock(clock)`: a context variable, so every call of the item's run
sees it); the limiter adds to it the time during which the item had calls waiting for a slot and
none in flight, which is the time the item was queued. The runner reports it apart and takes it
off the item's latency, which so counts from the item's first call.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..pool.types import ChatEvent, PoolModel, ProviderError, TextDelta, WorkerWrapper

log = logging.getLogger(__name__)


class ItemClock:
    """How long one bench item was queued: the time during which it had calls waiting for a
    slot and none in flight (one event loop: no lock needed)."""

    def __init__(self):
        self.queued_s = 0.0
        self._waiting = 0
        self._active = 0
        self._since: float | None = None  # when the item last became blocked on the queue alone

    def waiting(self, delta: int) -> None:
        self._waiting += delta
        self._changed()

    def active(self, delta: int) -> None:
        self._active += delta
        self._changed()

    def _changed(self) -> None:
        blocked = self._waiting > 0 and self._active == 0
        now = time.monotonic()
        if blocked and self._since is None:
            self._since = now
        elif not blocked and self._since is not None:
            self.queued_s += now - self._since
            self._since = None


_ITEM_CLOCK: contextvars.ContextVar[ItemClock | None] = contextvars.ContextVar("stiva_bench_item_clock", default=None)


@contextmanager
def item_clock(clock: ItemClock):
    """Within the block (and every task started in it), the limiter counts queue waits on `clock`."""
    token = _ITEM_CLOCK.set(clock)
    try:
        yield clock
    finally:
        _ITEM_CLOCK.reset(token)


@dataclass
class _Window:
    limit: int
    window: int
    active: int = 0
    successes: int = 0
    throttled: int = 0  # 429s seen
    changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def acquire(self) -> None:
        async with self.changed:
            await self.changed.wait_for(lambda: self.active < self.window)
            self.active += 1

    async def release(self) -> None:
        async with self.changed:
            self.active -= 1
            self.changed.notify_all()

    async def resize(self, window: int) -> None:
        async with self.changed:
            self.window = max(1, min(self.limit, window))
            self.changed.notify_all()


class LimitedWorker(WorkerWrapper):
    """The `Worker` protocol, with a per-provider window that 429s shrink."""

    def __init__(
        self,
        worker: Any,
        limit: int = 8,
        *,
        max_waits: int = 8,
        base_wait_s: float = 1.0,
        max_wait_s: float = 60.0,
        grow_after: int = 10,
    ):
        self.worker = worker
        self.limit = max(1, limit)
        self.max_waits = max_waits
        self.base_wait_s = base_wait_s
        self.max_wait_s = max_wait_s
        self.grow_after = grow_after
        self._windows: dict[str, _Window] = {}

    def window(self, provider: str) -> _Window:
        found = self._windows.get(provider)
        if found is None:
            found = self._windows[provider] = _Window(self.limit, self.limit)
        return found

    def throttled(self) -> dict[str, int]:
        """429s seen so far, by provider (for the progress view)."""
        return {name: w.throttled for name, w in self._windows.items() if w.throttled}

    async def stream_chat(self, model: PoolModel, messages: Sequence[dict], **kwargs: Any) -> AsyncIterator[ChatEvent]:
        window = self.window(model.provider)
        clock = _ITEM_CLOCK.get()
        waits = 0
        while True:
            if clock is not None:
                clock.waiting(+1)
            try:
                await window.acquire()
            finally:
                if clock is not None:
                    clock.waiting(-1)
            if clock is not None:
                clock.active(+1)
            streamed = False
            retry_in: float | None = None
            try:
                stream = self.worker.stream_chat(model, messages, **kwargs)
                try:
                    async for event in stream:
                        if isinstance(event, TextDelta):
                            streamed = True
                        yield event
                finally:
                    await stream.aclose()
            except ProviderError as exc:
                if exc.status != 429 or streamed or waits >= self.max_waits:
                    raise
                window.throttled += 1
                window.successes = 0
                retry_in = min(exc.retry_after or self.base_wait_s * 2**waits, self.max_wait_s)
                waits += 1
            finally:
                if clock is not None:
                    clock.active(-1)
                await window.release()
            if retry_in is None:
                window.successes += 1
                if window.successes >= self.grow_after and window.window < window.limit:
                    window.successes = 0
                    await window.resize(window.window + 1)
                return
            await window.resize(window.window // 2)
            log.info("%s: 429, window %d, waiting %.1f s", model.provider, window.window, retry_in)
            await asyncio.sleep(retry_in)

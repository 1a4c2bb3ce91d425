"""Worker answers kept by (model, prompt, sampling): an answer already paid for is not paid twice.

    cache = AnswerCache.open()                     # answers.sqlite in the cache folder
    worker = CachingWorker(runtime.worker, cache)  # the `Worker` protocol, in front of the pool's
    ...
    worker.hits, worker.misses, worker.paid_usd, worker.saved_usd

`stiva train` uses it by default (`--no-answer-cache` turns it off), `stiva bench` with
`--answer-cache`: a plan that calls a model with a prompt it was already sent, under the same
sampling, gets the answer it got then, across runs, resumes and training runs.

- **Key:** sha256 of the JSON of [provider, base URL, the provider's model name, the messages,
  max_tokens, temperature, stop]. Another model, prompt or sampling is another answer. Calls
  sampled at a temperature above 0 are kept too: each prompt then has the one sample it got first
  (what training wants: the same plan is rewarded by the same answers).
- **Stored:** the text, the usage the provider reported and the call's latency. Only a call
  that finished is stored: one that failed, was cancelled or was cut short stores nothing.
- **A hit** yields the text as one `TextDelta` and the recorded usage, so a run's tokens and cost
  are the answer's own, as when it was paid: a bench's and a reward's figures do not change with
  the cache. What was not paid again is counted apart (`saved_usd`); `paid_usd` is what the calls
  that reached a provider cost. With `replay_latency` a hit also takes the recorded time, so that
  latency figures stay true (bench; training under a latency preference); without it a hit is
  instant.
- **At once:** a call whose key is in flight waits for that call and then gets its answer, so a
  GRPO group of identical plans pays once.
- **Not cached:** the embedded model and the simulated and replayed pools: they cost nothing,
  and the simulated pool's answers are exact by its seed already.
- **Faults:** a cache that cannot be opened or written (a read-only folder, a full disk, a
  damaged file) is one warning, and the calls go to the provider: the cache never fails a run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import REPLAY_PROVIDER, SIM_PROVIDER
from ..core.usage import Usage
from .types import ChatEvent, PoolModel, TextDelta, UsageReport, WorkerWrapper

log = logging.getLogger(__name__)

UNCACHED_PROVIDERS = frozenset({SIM_PROVIDER, REPLAY_PROVIDER})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    key                TEXT PRIMARY KEY,
    model              TEXT NOT NULL,
    text               TEXT NOT NULL,
    prompt_tokens      INTEGER NOT NULL,
    completion_tokens  INTEGER NOT NULL,
    estimated          INTEGER NOT NULL DEFAULT 0,
    latency_s          REAL NOT NULL,
    created_at         REAL NOT NULL
);
"""


@dataclass(frozen=True)
class CachedAnswer:
    text: str
    usage: Usage
    latency_s: float


def answer_key(
    model: PoolModel,
    messages: Sequence[dict],
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
    stop: Sequence[str] | None = None,
    extra_body: dict | None = None,
) -> str:
    """The cache key of one call (see the module's docstring)."""
    what = [
        model.provider,
        model.base_url.rstrip("/"),
        model.model,
        list(messages),
        max_tokens,
        temperature,
        list(stop) if stop else None,
        *([extra_body] if extra_body else []),  # absent: the keys of plain calls stay as they were
    ]
    return hashlib.sha256(json.dumps(what, ensure_ascii=False, sort_keys=True, default=str).encode()).hexdigest()


def cacheable(model: PoolModel) -> bool:
    return model.kind != "embedded" and model.provider not in UNCACHED_PROVIDERS


class AnswerCache:
    """The answers table in one SQLite file (safe from several threads; writes are serialised)."""

    def __init__(self, path: Path, connection: sqlite3.Connection | None):
        self.path = path
        self._db = connection
        self._lock = threading.Lock()
        self.failed: str | None = None  # why the cache is off (None: it works)

    @classmethod
    def open(cls, path: Path | None = None) -> "AnswerCache":
        """The cache at `path` (default: answers.sqlite in the cache folder). One that cannot be
        opened is an off cache: `failed` says why, and a warning is logged once."""
        if path is None:
            from ..paths import cache_dir

            path = cache_dir() / "answers.sqlite"
        cache = cls(path, None)
        try:
            from ..paths import private_dir, private_file, private_mode

            # the questions and answers it keeps are the user's: private, as the history is
            private_dir(path.parent)
            private_file(path)
            for part in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
                private_mode(part)
            db = sqlite3.connect(path, timeout=10, check_same_thread=False, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            cache._db = db
        except (OSError, sqlite3.Error) as exc:
            cache._off(f"cannot be opened: {exc}")
        return cache

    @property
    def enabled(self) -> bool:
        return self._db is not None

    def get(self, key: str) -> CachedAnswer | None:
        if self._db is None:
            return None
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT text, prompt_tokens, completion_tokens, estimated, latency_s FROM answers WHERE key = ?",
                    (key,),
                ).fetchone()
        except sqlite3.Error as exc:
            self._off(f"cannot be read: {exc}")
            return None
        if row is None:
            return None
        return CachedAnswer(row[0], Usage(int(row[1]), int(row[2]), bool(row[3])), float(row[4]))

    def put(self, key: str, model: PoolModel, answer: CachedAnswer) -> None:
        if self._db is None:
            return
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        key,
                        model.id,
                        answer.text,
                        answer.usage.prompt_tokens,
                        answer.usage.completion_tokens,
                        int(answer.usage.estimated),
                        answer.latency_s,
                        time.time(),
                    ),
                )
        except sqlite3.Error as exc:
            self._off(f"cannot be written: {exc}")

    def count(self) -> int:
        if self._db is None:
            return 0
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.close()
            self._db = None

    def _off(self, why: str) -> None:
        if self.failed is None:
            log.warning("the answer cache %s %s; calls go to the providers without it", self.path, why)
        self.failed = why
        if self._db is not None:
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None


class CachingWorker(WorkerWrapper):
    """The `Worker` protocol in front of another worker, with the answer cache (module docstring).
    `cache=None` caches nothing but still counts what the calls cost (`paid_usd`)."""

    def __init__(self, worker: Any, cache: AnswerCache | None, *, replay_latency: bool = False):
        self.worker = worker
        self.cache = cache
        self.replay_latency = replay_latency
        self.hits = 0
        self.misses = 0
        self.paid_usd = 0.0
        self.paid_tokens = 0
        self.saved_usd = 0.0
        self._in_flight: dict[str, asyncio.Future] = {}

    async def stream_chat(self, model: PoolModel, messages: Sequence[dict], **kwargs: Any) -> AsyncIterator[ChatEvent]:
        if self.cache is None or not self.cache.enabled or not cacheable(model):
            async for event in self._paid(model, messages, kwargs, None):
                yield event
            return
        key = answer_key(model, messages, **kwargs)
        while (pending := self._in_flight.get(key)) is not None:
            await asyncio.wait({pending})  # that call's end, however it ended (not its error)
        found = self.cache.get(key)
        if found is not None:
            self.hits += 1
            self.saved_usd += model.cost(found.usage)
            if self.replay_latency and found.latency_s > 0:
                await asyncio.sleep(found.latency_s)
            yield TextDelta(found.text)
            yield UsageReport(found.usage)
            return
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        self._in_flight[key] = done
        try:
            async for event in self._paid(model, messages, kwargs, key):
                yield event
        finally:  # stored or not, the waiters look again (a failed call: one of them asks)
            del self._in_flight[key]
            done.set_result(None)

    async def _paid(self, model: PoolModel, messages: Sequence[dict], kwargs: dict, key: str | None):
        """The call itself, counted in `paid_usd` (and stored under `key` once it finished)."""
        started = time.monotonic()
        parts: list[str] = []
        usage: Usage | None = None
        stream = self.worker.stream_chat(model, messages, **kwargs)
        try:
            async for event in stream:
                if isinstance(event, TextDelta):
                    parts.append(event.text)
                elif isinstance(event, UsageReport):
                    usage = event.usage
                    self.paid_usd += model.cost(usage)
                    self.paid_tokens += usage.total_tokens
                yield event
        finally:
            await stream.aclose()
        self.misses += 1
        if key is not None and usage is not None and self.cache is not None:
            self.cache.put(key, model, CachedAnswer("".join(parts), usage, time.monotonic() - started))

"""The embedded worker: Gemma-3 270M on the CPU, in process, always available offline.

`EmbeddedWorker` implements the `Worker` protocol for the pool model `local/gemma-3-270m`
(`embedded_pool_model()`; the model itself is defined once, in `inference.embedded`). It shares
the loaded model with the embedded conductor (one load per process), streams text as tokens arrive, reports exact token usage, and honours `max_tokens`,
`temperature` (0 = greedy), `stop` strings and cancellation (closing or cancelling the stream
stops generation at the next token).

torch/transformers are imported only when a chat starts.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence

from ..core.usage import Usage
from ..inference.embedded import EMBEDDED_DESCRIPTION, EMBEDDED_HF_ID, EMBEDDED_MODEL_ID
from .types import ChatEvent, PoolModel, ProviderError, TextDelta, UsageReport

DEFAULT_MAX_TOKENS = 256  # a cap for callers that set none (the engine's base prompt sets 48)


def embedded_pool_model() -> PoolModel:
    return PoolModel(
        id=EMBEDDED_MODEL_ID,
        provider="embedded",
        model=EMBEDDED_HF_ID,
        price_in=0.0,
        price_out=0.0,
        description=EMBEDDED_DESCRIPTION,
        kind="embedded",
        available=True,
        reason="in-process, CPU",
        source="embedded",
    )


class EmbeddedWorker:
    """Streams chat completions from the in-process Gemma-3 270M."""

    def __init__(self, progress=None, default_max_tokens: int = DEFAULT_MAX_TOKENS):
        self.progress = progress
        self.default_max_tokens = default_max_tokens
        self._loaded = None
        self._lock = threading.Lock()

    def _load_sync(self):
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    from ..inference.embedded import load_embedded

                    self._loaded = load_embedded(self.progress)
        return self._loaded

    async def load(self):
        if self._loaded is not None:
            return self._loaded
        return await asyncio.to_thread(self._load_sync)

    async def stream_chat(
        self,
        model: PoolModel,
        messages: Sequence[dict],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        stop: Sequence[str] | None = None,
    ) -> AsyncIterator[ChatEvent]:
        from ..inference.errors import ModelError
        from ..inference.generation import generate_sync, render_completion, shared_prefix_len

        try:
            loaded = await self.load()
        except ModelError as exc:
            raise ProviderError(str(exc), provider="embedded") from exc
        # A base model: the engine sends it a few-shot completion prompt (conductor.fewshot),
        # which is continued as plain text, never wrapped in chat turns.
        prompt = loaded.tokenizer(render_completion(messages), add_special_tokens=True)["input_ids"]
        # The first message (the few-shot examples) is the same on every call: its KV cache is
        # kept on the model, so only the case is prefilled.
        prefix_tokens = 0
        if len(messages) > 1:
            head = loaded.tokenizer(render_completion(messages[:1]), add_special_tokens=True)["input_ids"]
            prefix_tokens = shared_prefix_len(head, prompt)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue = asyncio.Queue()
        stop_event = threading.Event()
        done = object()

        def on_text(text: str) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, text)
            except RuntimeError:
                stop_event.set()

        def run():
            try:
                return generate_sync(
                    loaded,
                    prompt,
                    max_new_tokens=max_tokens or self.default_max_tokens,
                    temperature=float(temperature or 0.0),
                    stop_strings=list(stop or ()),
                    stop_event=stop_event,
                    on_text=on_text,
                    prefix_tokens=prefix_tokens,
                )
            finally:
                try:
                    loop.call_soon_threadsafe(queue.put_nowait, done)
                except RuntimeError:
                    pass

        future = loop.run_in_executor(None, run)
        try:
            while True:
                item = await queue.get()
                if item is done:
                    break
                yield TextDelta(item)
            try:
                result = await future
            except Exception as exc:  # noqa: BLE001
                raise ProviderError(f"generation failed: {type(exc).__name__}: {exc}", provider="embedded") from exc
            yield UsageReport(Usage(result.prompt_tokens, result.completion_tokens))
        finally:
            # Closed early (cancelled, or the consumer stopped reading): stop generating.
            stop_event.set()

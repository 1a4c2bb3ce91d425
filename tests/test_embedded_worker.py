"""The embedded worker: Gemma-3 270M in process, streaming, exact usage, stop strings, cancel."""

from __future__ import annotations

import asyncio

import pytest

from conftest_model import cancel_and_expect_idle, embedded_loaded, model_cache  # noqa: F401 - fixtures
from stiva_tui.pool.embedded import EmbeddedWorker, embedded_pool_model
from stiva_tui.pool.types import TextDelta, UsageReport

MESSAGES = [{"role": "user", "content": "Tell me a long story about a lighthouse keeper."}]


def test_pool_model_description():
    model = embedded_pool_model()
    assert model.id == "local/gemma-3-270m" and model.kind == "embedded"
    assert model.price_in == model.price_out == 0
    assert "offline" in model.description and "CPU" in model.description


async def _collect(worker, **kwargs):
    events = [e async for e in worker.stream_chat(embedded_pool_model(), MESSAGES, **kwargs)]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    usages = [e.usage for e in events if isinstance(e, UsageReport)]
    assert len(usages) == 1 and isinstance(events[-1], UsageReport)
    return "".join(deltas), deltas, usages[0]


@pytest.mark.model
async def test_streams_with_exact_usage(embedded_loaded):
    from stiva_tui.inference.generation import render_completion

    worker = EmbeddedWorker()
    text, deltas, usage = await _collect(worker, max_tokens=12, temperature=0)
    assert await worker.load() is embedded_loaded  # shared with the conductor
    assert len(deltas) >= 3
    # a base model: the messages are continued as plain text, never wrapped in chat turns
    expected = embedded_loaded.tokenizer(render_completion(MESSAGES), add_special_tokens=True)["input_ids"]
    assert usage.prompt_tokens == len(expected)
    assert 1 <= usage.completion_tokens <= 12 and not usage.estimated
    # greedy is deterministic; a stop string cuts the text exactly before it
    again, _, _ = await _collect(worker, max_tokens=12, temperature=0)
    assert again == text
    words = text.split()
    assert len(words) >= 3
    stop = " " + words[2]
    cut, _, usage2 = await _collect(worker, max_tokens=12, temperature=0, stop=[stop])
    assert cut == text[: text.index(stop)]
    assert usage2.completion_tokens < usage.completion_tokens
    # sampling works too
    sampled, _, usage3 = await _collect(worker, max_tokens=8, temperature=1.0)
    assert usage3.completion_tokens <= 8


@pytest.mark.model
async def test_closing_the_stream_stops_generation(embedded_loaded):
    worker = EmbeddedWorker()
    stream = worker.stream_chat(embedded_pool_model(), MESSAGES, max_tokens=2000)
    got = 0
    async for event in stream:
        got += 1
        if got == 2:
            break
    await stream.aclose()
    acquired = await asyncio.to_thread(embedded_loaded.lock.acquire, True, 10)
    assert acquired, "generation went on after the stream was closed"
    embedded_loaded.lock.release()


@pytest.mark.model
async def test_cancelling_the_consumer_stops_generation(embedded_loaded):
    worker = EmbeddedWorker()
    first = asyncio.Event()

    async def consume():
        async for _ in worker.stream_chat(embedded_pool_model(), MESSAGES, max_tokens=2000):
            first.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(first.wait(), 60)
    await cancel_and_expect_idle(task, embedded_loaded, "generation went on after the stream was cancelled")

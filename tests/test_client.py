"""The streaming chat client against a real local HTTP server speaking the OpenAI wire format."""

from __future__ import annotations

import asyncio
import time

import pytest
from conftest import pool_models

from stiva_tui.core.usage import Usage
from stiva_tui.pool.client import HttpWorker
from stiva_tui.pool.types import ProviderError, TextDelta, UsageReport
from tests.support.fakeprovider import Reply

MESSAGES = [{"role": "user", "content": "Say hello to the world"}]


async def collect(worker, model, **kwargs):
    return [event async for event in worker.stream_chat(model, MESSAGES, **kwargs)]


async def test_streams_text_and_reports_usage_from_the_stream(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply("hello big world", usage=(7, 3)))
    worker = HttpWorker()
    events = await collect(worker, model, max_tokens=50, temperature=0.2, stop=["\n\n"])
    await worker.aclose()
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello big world"
    assert sum(isinstance(e, TextDelta) for e in events) == 3  # streamed, not buffered
    assert events[-1] == UsageReport(Usage(7, 3))
    body = fake.requests[0].body
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 50 and body["temperature"] == 0.2 and body["stop"] == ["\n\n"]


async def test_usage_is_estimated_and_marked_when_the_provider_sends_none(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply("four words right here", usage=None))
    events = await collect(HttpWorker(), model)
    usage = events[-1].usage
    assert usage.estimated and usage.completion_tokens > 0 and usage.prompt_tokens > 0


async def test_sends_the_key_as_bearer_and_maps_401(fake):
    fake.api_key = "sk-test-123"
    (model,) = pool_models(fake, "m1")
    with pytest.raises(ProviderError) as info:
        await collect(HttpWorker(), model)
    assert info.value.status == 401 and not info.value.retryable
    assert "API key" in str(info.value)
    from dataclasses import replace

    events = await collect(HttpWorker(), replace(model, api_key="sk-test-123"))
    assert isinstance(events[-1], UsageReport)


async def test_429_is_retried_after_retry_after(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply(status=429, retry_after="0.3"), Reply("fine"))
    started = time.monotonic()
    events = await collect(HttpWorker(retries=2), model)
    assert time.monotonic() - started >= 0.3
    assert events[0] == TextDelta("fine") and len(fake.requests) == 2


async def test_500_is_retried_with_backoff_then_fails_with_the_provider_message(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply(status=500, error_message="upstream exploded"))
    with pytest.raises(ProviderError) as info:
        await collect(HttpWorker(retries=2, backoff_s=0.01), model)
    assert info.value.status == 500 and "upstream exploded" in str(info.value)
    assert len(fake.requests) == 3


async def test_400_is_not_retried(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply(status=400, error_message="bad request"))
    with pytest.raises(ProviderError):
        await collect(HttpWorker(retries=3, backoff_s=0.01), model)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("fault", ["cut", "malformed"])
async def test_a_broken_stream_after_text_raises_without_retrying(fake, fault):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply("a b c d e f", fault=fault))
    seen = []
    with pytest.raises(ProviderError) as info:
        async for event in HttpWorker(retries=3, backoff_s=0.01).stream_chat(model, MESSAGES):
            seen.append(event)
    assert info.value.retryable
    assert seen and all(isinstance(e, TextDelta) for e in seen)  # partial text came first
    assert len(fake.requests) == 1  # text already streamed: the executor retries the step


async def test_a_reply_without_streaming_is_accepted(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply("whole answer", fault="json", usage=(5, 2)))
    events = await collect(HttpWorker(), model)
    assert events == [TextDelta("whole answer"), UsageReport(Usage(5, 2))]


async def test_a_reply_without_streaming_is_read_whole_across_reads(fake):
    # A long answer from a server that ignores stream=True arrives in several reads: all of it
    # is the answer, not the first read's part (which is no JSON, and failed the call).
    (model,) = pool_models(fake, "m1")
    text = "word " * 20_000
    fake.script("m1", Reply(text, fault="json", usage=(5, 20_000), chunk_delay_s=0.2))
    events = await collect(HttpWorker(), model)
    assert events == [TextDelta(text), UsageReport(Usage(5, 20_000))]


async def test_a_reply_without_streaming_over_the_answer_cap_is_a_clear_error(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply("word " * 300_000, fault="json"))  # 1.5 MB of answer: over the 1 MiB default
    with pytest.raises(
        ProviderError, match=r"answer longer than the 1024 KiB cap \(\[workers\] max_answer_kb\)"
    ) as info:
        await collect(HttpWorker(retries=2), model)
    assert not info.value.retryable and len(fake.requests) == 1


async def test_a_hung_connection_times_out(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply(fault="hang"))
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        await collect(HttpWorker(timeout_s=0.4, retries=0), model)
    assert time.monotonic() - started < 3


async def test_connection_refused_is_a_provider_error():
    from stiva_tui.pool.types import PoolModel

    model = PoolModel(id="x", provider="nowhere", model="x", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ProviderError, match="connection failed"):
        await collect(HttpWorker(retries=1, backoff_s=0.01), model)


async def test_cancelling_the_consumer_closes_the_connection(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply("one two three four five six", chunk_delay_s=0.3))
    worker = HttpWorker()

    async def consume():
        async for _ in worker.stream_chat(model, MESSAGES):
            pass

    task = asyncio.create_task(consume())
    await asyncio.sleep(0.4)
    assert fake.active == 1
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await asyncio.to_thread(fake.wait_idle, 3.0)
    assert fake.disconnects >= 1
    await worker.aclose()


async def test_connections_are_reused_between_calls(fake):
    (model,) = pool_models(fake, "m1")
    fake.default("m1", Reply("same socket please"))
    worker = HttpWorker()
    for _ in range(5):
        await collect(worker, model)
    await worker.aclose()
    assert len(fake.requests) == 5 and fake.connections == 1


@pytest.mark.parametrize(
    "body, why",
    [
        ({"choices": [{"message": ["a"]}]}, "no chat completion"),
        ({"choices": []}, "no chat completion"),
        ({"object": "list", "data": []}, "no chat completion"),
        ({"choices": [{"message": {"role": "assistant", "content": ["a"]}}]}, "holds no text"),
        ([1, 2, 3], "not a JSON object"),
    ],
)
async def test_a_200_that_is_no_chat_completion_is_a_failed_call(fake, body, why):
    (model,) = pool_models(fake, "m1")
    fake.default("m1", Reply(body=body))
    worker = HttpWorker(retries=1, backoff_s=0.01)
    with pytest.raises(ProviderError, match=why) as info:
        await collect(worker, model)
    await worker.aclose()
    assert info.value.retryable and len(fake.requests) == 2  # retried like any failure, then given up


async def test_a_refusal_is_the_answer(fake):
    (model,) = pool_models(fake, "m1")
    fake.default(
        "m1",
        Reply(
            body={
                "choices": [{"message": {"role": "assistant", "content": None, "refusal": "I cannot help with that."}}]
            }
        ),
    )
    events = await collect(HttpWorker(), model)
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["I cannot help with that."]


async def test_a_long_chunk_is_read_whole_and_an_endless_line_fails_cleanly(fake):
    # aiohttp's own line limit is 128 KiB; providers can send a long answer as one chunk.
    from stiva_tui.pool.client import MAX_LINE_BYTES

    (model,) = pool_models(fake, "m1")
    long_piece = "x" * 1_000_000
    fake.script(
        "m1",
        Reply(chunks=[long_piece, " end"], usage=(3, 2)),
        Reply(chunks=["y" * (MAX_LINE_BYTES + 10)], usage=(3, 2)),
    )
    worker = HttpWorker(retries=0)
    events = await collect(worker, model)
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == long_piece + " end"
    with pytest.raises(ProviderError, match="connection failed"):
        await collect(worker, model)
    await worker.aclose()


async def test_an_answer_within_a_cap_above_the_line_bound_is_read_whole_both_ways(fake):
    # The 4 MiB bound holds one line (one chunk); the answer cap holds the whole answer. With a cap
    # above the line bound, a longer answer in many chunks is read, and so is the same answer sent
    # as one JSON object by a server that ignores stream=True.
    from stiva_tui.pool.client import MAX_LINE_BYTES

    (model,) = pool_models(fake, "m1")
    text = "z" * (MAX_LINE_BYTES + 2**20)
    fake.script(
        "m1",
        Reply(text, chunks=[text[i : i + 65536] for i in range(0, len(text), 65536)], usage=(1, 1)),
        Reply(text, fault="json", usage=(1, 1)),
    )
    worker = HttpWorker(retries=0, max_answer_bytes=len(text))
    for _ in range(2):
        events = await collect(worker, model)
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == text
        assert events[-1] == UsageReport(Usage(1, 1))
    await worker.aclose()


def test_a_worker_used_from_a_second_event_loop_gets_a_pool_of_its_own(fake):
    # `stiva train` and the sandbox run coroutines on loops of their own; a connection pool made
    # in one loop cannot serve another.
    (model,) = pool_models(fake, "m1")
    fake.default("m1", Reply("again"))
    worker = HttpWorker(retries=0)
    first = asyncio.run(collect(worker, model))
    second = asyncio.run(collect(worker, model))
    assert first == second and isinstance(second[-1], UsageReport)
    asyncio.run(worker.aclose())

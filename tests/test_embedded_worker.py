"""The embedded worker: Gemma-3 270M in process, streaming, exact usage, stop strings, cancel."""

from __future__ import annotations

import asyncio

import pytest

from stiva_tui.pool.embedded import EmbeddedWorker, embedded_pool_model
from stiva_tui.pool.types import TextDelta, UsageReport
from tests.conftest_model import cancel_and_expect_idle, embedded_loaded, model_cache  # noqa: F401 - fixtures

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
    async for _event in stream:
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


@pytest.mark.model
def test_a_static_prefix_is_prefilled_once_and_changes_nothing(embedded_loaded):
    """The few-shot examples' KV cache is kept on the model: the same greedy tokens as a full
    prefill, the prefix computed once for two cases, and a prefix the prompt does not start with
    is not used."""
    from stiva_tui.inference.generation import generate_sync, render_completion, shared_prefix_len
    from stiva_tui.pool.embedded import BASE_WORKER_PREFIX

    tok = embedded_loaded.tokenizer
    head = tok(BASE_WORKER_PREFIX, add_special_tokens=True)["input_ids"]
    embedded_loaded.extras.pop("prefix_kv", None)
    for question in ("What is the capital of France?", "How many legs does a spider have?"):
        messages = [
            {"role": "system", "content": BASE_WORKER_PREFIX},
            {"role": "user", "content": f"Question: {question}\nAnswer:"},
        ]
        prompt = tok(render_completion(messages), add_special_tokens=True)["input_ids"]
        n = shared_prefix_len(head, prompt)
        assert n == len(head)
        plain = generate_sync(embedded_loaded, prompt, max_new_tokens=10, stop_strings=["\n"])
        cached = generate_sync(embedded_loaded, prompt, max_new_tokens=10, stop_strings=["\n"], prefix_tokens=n)
        assert cached.token_ids == plain.token_ids and cached.text == plain.text
        assert cached.prompt_tokens == len(prompt)
    assert list(embedded_loaded.extras["prefix_kv"]) == [tuple(head)]
    assert shared_prefix_len(head, head[:-1] + [head[-1] + 1] + [5, 6]) == 0
    assert shared_prefix_len(head, head) == 0  # nothing left to generate from


@pytest.mark.model
def test_end_tokens_are_found_once(embedded_loaded):
    from stiva_tui.inference.generation import eos_token_ids

    embedded_loaded.extras.pop("eos_ids", None)
    ids = eos_token_ids(embedded_loaded)
    tok = embedded_loaded.tokenizer
    assert tok.eos_token_id in ids and tok.convert_tokens_to_ids("<end_of_turn>") in ids
    assert tok.unk_token_id not in ids  # Gemma has no <|im_end|>: not mistaken for its unknown id
    assert embedded_loaded.extras["eos_ids"] == tuple(ids)


@pytest.mark.model
async def test_the_warm_up_computes_the_examples_before_the_first_question(embedded_loaded):
    """The model process warms the worker up behind the conductor's load (runtime/root.py): the
    few-shot examples' KV cache is there before the first question, which then prefills its own
    case alone."""
    from stiva_tui.inference.generation import render_completion
    from stiva_tui.pool.embedded import BASE_WORKER_PREFIX

    embedded_loaded.extras.pop("prefix_kv", None)
    await EmbeddedWorker().warm_up()
    (prefix,) = embedded_loaded.extras["prefix_kv"]  # one static prefix computed: the examples
    examples = render_completion([{"role": "system", "content": BASE_WORKER_PREFIX}])
    assert list(prefix) == embedded_loaded.tokenizer(examples, add_special_tokens=True)["input_ids"]

"""The answer cache: a worker answer already paid for is not paid twice (issue: the paper's result in
miniature, point 4). Against the real scripted HTTP provider and a real SQLite file; the bench's
`--answer-cache` through the real `stiva` command."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest
from conftest import pool_models
from test_bench_runner import script_pool, write_config, write_suite

from stiva_tui.pool.answer_cache import AnswerCache, CachingWorker, answer_key, cacheable
from stiva_tui.pool.client import HttpWorker
from stiva_tui.pool.types import PoolModel, ProviderError, TextDelta, UsageReport
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply

QUESTION = [{"role": "user", "content": "What is 2 + 2?"}]


async def ask(worker, model, messages=QUESTION, **kwargs) -> tuple[str, object]:
    text, usage = [], None
    async for event in worker.stream_chat(model, messages, **kwargs):
        if isinstance(event, TextDelta):
            text.append(event.text)
        elif isinstance(event, UsageReport):
            usage = event.usage
    return "".join(text), usage


async def test_an_answer_already_paid_for_is_not_paid_twice_even_by_another_process(fake, tmp_path):
    fake.default("m", Reply("The answer is four, as ever.", usage=(7, 6)))
    (model,) = pool_models(fake, "m")
    path = tmp_path / "answers.sqlite"
    first = CachingWorker(HttpWorker(retries=0), AnswerCache.open(path))
    try:
        paid = await ask(first, model, temperature=0.0)
        again = await ask(first, model, temperature=0.0)
    finally:
        await first.aclose()
        first.cache.close()
    assert paid == again == ("The answer is four, as ever.", paid[1]) and paid[1].total_tokens == 13
    assert len(fake.requests_for("m")) == 1
    assert (first.hits, first.misses) == (1, 1)
    assert first.paid_usd == pytest.approx(model.cost(paid[1])) == pytest.approx(first.saved_usd)

    later = CachingWorker(HttpWorker(retries=0), AnswerCache.open(path))  # another run: a new cache object
    try:
        assert await ask(later, model, temperature=0.0) == paid
        assert len(fake.requests_for("m")) == 1 and later.paid_usd == 0.0
        # another sampling, another prompt or another model is another answer
        await ask(later, model, temperature=0.7)
        await ask(later, model, [{"role": "user", "content": "What is 3 + 3?"}], temperature=0.0)
        (other,) = pool_models(fake, "n")
        fake.default("n", Reply("Four."))
        await ask(later, other, temperature=0.0)
    finally:
        await later.aclose()
        later.cache.close()
    assert len(fake.requests_for("m")) == 3 and len(fake.requests_for("n")) == 1


async def test_identical_calls_at_once_are_paid_once(fake, tmp_path):
    fake.default("m", Reply("Four.", usage=(5, 1), latency_s=0.3))
    (model,) = pool_models(fake, "m")
    worker = CachingWorker(HttpWorker(retries=0), AnswerCache.open(tmp_path / "a.sqlite"))
    try:
        answers = await asyncio.gather(*(ask(worker, model) for _ in range(4)))
    finally:
        await worker.aclose()
    assert {a[0] for a in answers} == {"Four."}
    assert len(fake.requests_for("m")) == 1 and (worker.hits, worker.misses) == (3, 1)


async def test_a_failed_or_abandoned_call_stores_nothing_and_is_asked_again(fake, tmp_path):
    fake.script(
        "m", Reply(status=500, error_message="boom"), Reply("One two three four five."), Reply("Four, at last.")
    )
    (model,) = pool_models(fake, "m")
    worker = CachingWorker(HttpWorker(retries=0), AnswerCache.open(tmp_path / "a.sqlite"))
    try:
        with pytest.raises(ProviderError, match="boom"):
            await ask(worker, model)
        stream = worker.stream_chat(model, QUESTION)  # the caller stops after the first piece
        assert isinstance(await stream.__anext__(), TextDelta)
        await stream.aclose()
        assert worker.cache.count() == 0
        assert (await ask(worker, model))[0] == "Four, at last."
        assert (await ask(worker, model))[0] == "Four, at last."  # now stored
    finally:
        await worker.aclose()
    assert len(fake.requests_for("m")) == 3


@pytest.mark.parametrize("damage", ["parent is a file", "not a database"])
async def test_a_cache_that_cannot_be_opened_is_one_warning_and_every_call_still_goes_through(
    fake, tmp_path, damage, caplog
):
    fake.default("m", Reply("Four."))
    (model,) = pool_models(fake, "m")
    if damage == "parent is a file":
        (tmp_path / "blocker").write_text("x")
        path = tmp_path / "blocker" / "answers.sqlite"
    else:
        path = tmp_path / "answers.sqlite"
        path.write_bytes(b"this is no SQLite file, just bytes " * 200)
    with caplog.at_level(logging.WARNING, logger="stiva_tui.pool.answer_cache"):
        cache = AnswerCache.open(path)
        worker = CachingWorker(HttpWorker(retries=0), cache)
        try:
            for _ in range(3):
                assert (await ask(worker, model))[0] == "Four."
        finally:
            await worker.aclose()
    assert not cache.enabled and cache.failed
    assert len(fake.requests_for("m")) == 3
    warnings = [r for r in caplog.records if "answer cache" in r.getMessage()]
    assert len(warnings) == 1, warnings


def test_the_simulated_pool_and_the_embedded_model_are_not_cached():
    from stiva_tui.config import REPLAY_PROVIDER, SIM_PROVIDER

    hosted = PoolModel(id="m", provider="openai", model="m", base_url="https://api.example/v1")
    assert cacheable(hosted)
    for provider in (SIM_PROVIDER, REPLAY_PROVIDER):
        assert not cacheable(PoolModel(id="m", provider=provider, model="m"))
    assert not cacheable(PoolModel(id="e", provider="embedded", model="e", kind="embedded"))
    # the key tells sampling apart, and the base URL (the same name at another server)
    key = answer_key(hosted, QUESTION, temperature=0.0)
    assert key != answer_key(hosted, QUESTION, temperature=1.0)
    assert key != answer_key(hosted, QUESTION, temperature=0.0, max_tokens=10)
    assert key != answer_key(
        PoolModel(id="m", provider="openai", model="m", base_url="http://other/v1"), QUESTION, temperature=0.0
    )


def test_a_bench_with_answer_cache_asks_nothing_again_and_keeps_its_figures(fake, tmp_path, stiva_home):
    """`stiva bench --answer-cache`: the same bench redone (--fresh) costs nothing, with the same
    accuracy, tokens and cost, and says what it reused."""
    script_pool(fake)
    config = write_config(tmp_path / "c.toml", fake.base_url)
    suite = write_suite(tmp_path / "s.jsonl", 4)
    args = [
        "bench",
        str(suite),
        "--systems",
        "direct:right,direct:wrong",
        "--config",
        str(config),
        "--json",
        "--answer-cache",
    ]
    first = run_stiva(*args, home=stiva_home)
    assert first.returncode == 0, first.stderr
    asked = len(fake.requests)
    assert asked == 8
    second = run_stiva(*args, "--fresh", home=stiva_home)
    assert second.returncode == 0, second.stderr
    assert len(fake.requests) == asked  # nothing asked again
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert one["answer_cache"] == {"reused": 0, "asked": 8, "saved_usd": 0.0, "off": None}
    assert two["answer_cache"]["reused"] == 8 and two["answer_cache"]["asked"] == 0
    assert two["answer_cache"]["saved_usd"] == pytest.approx(4 * ((10 + 2 * 2) + (12 * 3 + 3 * 5)) / 1e6)
    keep = ("system", "n", "correct", "accuracy", "tokens_per_question", "cost_per_question")
    assert [{k: row[k] for k in keep} for row in one["systems"]] == [
        {k: row[k] for k in keep} for row in two["systems"]
    ]
    assert "answer cache: 8 answers reused ($0.00026 not paid again), 0 asked" in second.stderr
    # without the flag nothing is reused
    third = run_stiva(*args[:-1], "--fresh", home=stiva_home)
    assert third.returncode == 0, third.stderr
    assert len(fake.requests) == asked + 8 and "answer_cache" not in json.loads(third.stdout)


async def test_the_cache_of_questions_and_answers_is_private(fake, tmp_path):
    """It keeps the user's questions and the models' answers: 0600 in a 0700 folder, as the
    history; an older cache made readable by others is tightened when opened."""
    import os
    import stat

    fake.default("m", Reply("Four."))
    (model,) = pool_models(fake, "m")
    folder = tmp_path / "cache"
    worker = CachingWorker(HttpWorker(retries=0), AnswerCache.open(folder / "answers.sqlite"))
    try:
        await ask(worker, model, temperature=0.0)
    finally:
        await worker.aclose()
        worker.cache.close()
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    for path in folder.iterdir():
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600, path
    (folder / "answers.sqlite").chmod(0o644)
    AnswerCache.open(folder / "answers.sqlite").close()
    assert stat.S_IMODE(os.stat(folder / "answers.sqlite").st_mode) == 0o600

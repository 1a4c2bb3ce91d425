"""A hostile provider on 127.0.0.1 (the real fake OpenAI server): an answer without end, and usage
numbers that lie. One call's answer is capped ([workers] max_answer_kb), reading stops there and
what is stored stays bounded; usage that is negative, fractional or absurd is estimated instead."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import pool_models
from test_cli import write_config

from stiva_tui.core.usage import Usage, estimate_prompt_tokens, estimate_text_tokens
from stiva_tui.core.workflow import Step, Workflow
from stiva_tui.engine.executor import Engine, RunOptions
from stiva_tui.pool.client import HttpWorker
from stiva_tui.pool.types import ProviderError, TextDelta, UsageReport
from stiva_tui.store import Recorder, Store
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply

MESSAGES = [{"role": "user", "content": "Say hello to the world"}]
MAX_CALL_TOKENS = 10_000_000  # the most tokens one call may claim (core/usage.py)
PIECE = "x" * 4096
# 32 MiB of answer: far more than a client's buffers and the sockets' hold, so a client that
# stops reading is seen by the server (a write fails) before it has sent it all.
ENDLESS = [PIECE] * (32 * 2**20 // len(PIECE))
DEFAULT_CAP_ERROR = "answer longer than the 1024 KiB cap ([workers] max_answer_kb)"
SMALL_CAP_ERROR = "answer longer than the 8 KiB cap ([workers] max_answer_kb)"


async def collect(worker, model, seen: list | None = None):
    seen = [] if seen is None else seen
    async for event in worker.stream_chat(model, MESSAGES):
        seen.append(event)
    return seen


def streamed(events) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


# --- the answer cap ------------------------------------------------------------------------------


async def test_an_endless_stream_fails_at_the_default_cap_and_reading_stops(fake):
    (model,) = pool_models(fake, "m1")
    fake.default("m1", Reply(chunks=ENDLESS, usage=(1, 1)))
    worker = HttpWorker(retries=2, backoff_s=0.01)
    seen: list = []
    with pytest.raises(ProviderError) as info:
        await collect(worker, model, seen)
    await worker.aclose()
    assert DEFAULT_CAP_ERROR in str(info.value) and str(info.value).startswith("fake: ")
    assert not info.value.retryable and info.value.partial  # text came first; the same call again would too
    text = streamed(seen)
    assert 0 < len(text.encode()) <= 2**20
    assert len(fake.requests) == 1  # not retried
    # The client hung up at the cap: the server's writes failed before its 32 MiB were out.
    assert await _wait_idle(fake) and fake.disconnects >= 1


async def test_a_whole_json_reply_past_the_cap_fails_and_reading_stops(fake):
    (model,) = pool_models(fake, "m1")
    fake.default("m1", Reply("y" * (32 * 2**20), fault="json"))
    worker = HttpWorker(retries=2, backoff_s=0.01, max_answer_bytes=8 * 1024)
    seen: list = []
    with pytest.raises(ProviderError) as info:
        await collect(worker, model, seen)
    await worker.aclose()
    assert SMALL_CAP_ERROR in str(info.value) and not info.value.retryable
    assert seen == [] and len(fake.requests) == 1
    assert await _wait_idle(fake) and fake.disconnects >= 1


@pytest.mark.parametrize("fault", [None, "json"])
async def test_the_cap_counts_utf8_bytes_of_answer_text_exactly(fake, fault):
    # 8 KiB: 4096 two-byte characters pass, one more fails; the same whether streamed or whole.
    (model,) = pool_models(fake, "m1")
    at_cap = ["é" * 1024] * 4
    fake.script(
        "m1",
        Reply("".join(at_cap), chunks=at_cap, fault=fault, usage=(1, 1)),
        Reply("".join(at_cap) + "é", chunks=[*at_cap, "é"], fault=fault, usage=(1, 1)),
    )
    worker = HttpWorker(retries=0, max_answer_bytes=8 * 1024)
    events = await collect(worker, model)
    assert streamed(events) == "é" * 4096 and events[-1] == UsageReport(Usage(1, 1))
    seen: list = []
    with pytest.raises(ProviderError, match=r"8 KiB cap \(\[workers\] max_answer_kb\)"):
        await collect(worker, model, seen)
    await worker.aclose()
    assert len(streamed(seen).encode()) <= 8 * 1024  # never a byte over the cap reaches the caller


async def test_a_stream_event_made_of_endless_data_lines_is_bounded(fake):
    # SSE joins the data lines of one event until a blank line: a provider that never sends one
    # must not grow an event without bound (each line alone is within the 4 MiB line bound).
    from stiva_tui.pool.client import MAX_LINE_BYTES

    (model,) = pool_models(fake, "m1")
    line = "data: " + "z" * 65536 + "\n"
    lines = (MAX_LINE_BYTES // 65536) * 3
    worker = HttpWorker(retries=0)
    with pytest.raises(ProviderError, match="stream event over 4 MiB") as info:
        await _raw_stream(worker, model, (line * lines).encode())
    await worker.aclose()
    assert not info.value.retryable


async def test_a_run_on_an_endless_answer_fails_and_the_history_stays_small(fake, tmp_path):
    fake.default("w1", Reply(chunks=ENDLESS, usage=(1, 1)))
    (model,) = pool_models(fake, "w1")
    worker = HttpWorker(retries=0)
    db = tmp_path / "history.db"
    store = Store.open(db)
    try:
        engine = Engine([model], worker, subscribers=[Recorder(store)])
        result = await engine.run_direct("Q?", "w1", options=RunOptions(retries=2, fallbacks=()))
    finally:
        await worker.aclose()
        store.close()
    assert result.status == "failed" and DEFAULT_CAP_ERROR in result.error
    assert len(fake.requests_for("w1")) == 1  # the cap is not worth another try
    with sqlite3.connect(db) as c:
        output_bytes, status, error = c.execute(
            "SELECT length(CAST(output AS BLOB)), status, error FROM steps"
        ).fetchone()
        run_error, answer = c.execute("SELECT error, answer FROM runs").fetchone()
    assert status == "failed" and DEFAULT_CAP_ERROR in error and DEFAULT_CAP_ERROR in run_error
    assert 0 < output_bytes <= 2**20 and not answer  # the text up to the cap is kept, never more
    on_disk = sum(p.stat().st_size for p in tmp_path.glob("history.db*"))
    assert on_disk < 4 * 2**20


def test_the_config_cap_reaches_stiva_ask_and_its_history(fake, tmp_path, stiva_home):
    fake.default("w1", Reply(chunks=ENDLESS, usage=(1, 1)))
    config = write_config(tmp_path / "c.toml", fake.base_url).read_text()
    config = config.replace("[workers]\n", "[workers]\nmax_answer_kb = 8\n")
    (tmp_path / "c.toml").write_text(config)
    result = run_stiva(
        "ask", "Q?", "--config", str(tmp_path / "c.toml"), "--baseline", "direct:w1", "--json", home=stiva_home
    )
    assert result.returncode != 0
    assert SMALL_CAP_ERROR in result.stdout + result.stderr and "Traceback" not in result.stderr
    (db,) = Path(stiva_home).rglob("stiva.db")
    with sqlite3.connect(db) as c:
        (output_bytes,) = c.execute("SELECT length(CAST(output AS BLOB)) FROM steps").fetchone()
    assert output_bytes <= 8 * 1024


# --- usage that lies ------------------------------------------------------------------------------


LIES = [(-(10**12), -5), (10**13, 1), (MAX_CALL_TOKENS + 1, 3), (1.5, 2), (True, 3)]


@pytest.mark.parametrize("fault", [None, "json"])
@pytest.mark.parametrize("lie", LIES)
async def test_implausible_usage_is_estimated_and_said_to_be(fake, lie, fault):
    (model,) = pool_models(fake, "m1")
    text = "a few honest words " * 20
    fake.script("m1", Reply(text, fault=fault, usage=None), Reply(text, fault=fault, usage=lie))
    worker = HttpWorker(retries=0)
    unknown = (await collect(worker, model))[-1].usage
    lying = (await collect(worker, model))[-1].usage
    await worker.aclose()
    assert unknown.estimated and unknown.prompt_tokens > 0 and unknown.completion_tokens > 0
    assert lying == unknown  # the same estimate as a provider that sent none, marked estimated


async def test_usage_with_a_number_as_text_is_estimated(fake):
    (model,) = pool_models(fake, "m1")
    fake.default(
        "m1",
        Reply(
            body={
                "choices": [{"message": {"role": "assistant", "content": "hi"}}],
                "usage": {"prompt_tokens": "7", "completion_tokens": 3},
            }
        ),
    )
    worker = HttpWorker(retries=0)
    usage = (await collect(worker, model))[-1].usage
    await worker.aclose()
    assert usage.estimated and usage.prompt_tokens > 0


async def test_plausible_usage_is_kept_as_sent(fake):
    (model,) = pool_models(fake, "m1")
    fake.script("m1", Reply("ok", usage=(0, 0)), Reply("ok", usage=(MAX_CALL_TOKENS, 7)))
    worker = HttpWorker(retries=0)
    assert (await collect(worker, model))[-1].usage == Usage(0, 0)
    assert (await collect(worker, model))[-1].usage == Usage(MAX_CALL_TOKENS, 7)
    await worker.aclose()


@pytest.mark.parametrize("lie", [(-(10**12), -5), (10**13, 1)])
async def test_a_run_totals_and_costs_the_estimate_when_usage_lies(fake, lie):
    text = "a few honest words " * 20
    fake.script("w1", Reply(text, usage=None), Reply(text, usage=lie))
    models = pool_models(fake, "w1")
    worker = HttpWorker(retries=0)
    engine = Engine(models, worker)
    honest = await engine.run_direct("Q?", "w1")
    lying = await engine.run_direct("Q?", "w1")
    await worker.aclose()
    assert lying.status == "finished" and lying.answer == text
    t, h = lying.totals, honest.totals
    assert t.estimated and h.estimated
    assert (t.prompt_tokens, t.completion_tokens, t.cost_usd) == (h.prompt_tokens, h.completion_tokens, h.cost_usd)
    assert t.prompt_tokens > 0 and t.completion_tokens > 0 and t.cost_usd > 0


@pytest.mark.parametrize("budget", [{"budget_tokens": 400}, {"budget_usd": 0.0007}])
async def test_negative_usage_credits_no_budget(fake, budget):
    # Step 1's 800 characters are estimated at 267 tokens out (never under: core/usage.py), its
    # prompt at about 40 ($0.00057 at $1/$2 per 1M): within either budget. Step 2 reads them (300
    # tokens in): past it. A provider claiming -10^12 tokens for step 1 must not buy step 2 room.
    fake.default("w1", Reply("word " * 160, usage=(-(10**12), -5)))
    fake.default("w2", Reply("word " * 160, usage=None))
    models = pool_models(fake, "w1", "w2")
    worker = HttpWorker(retries=0)
    # answers of a token, as far as the plan's estimate knows: the plan is not cut before it runs
    engine = Engine(models, worker, typical_outputs={"w1": 1, "w2": 1})
    workflow = Workflow((Step(0, "first", ()), Step(1, "second", (0,))))
    result = await engine.run_workflow("Q?", workflow, models, options=RunOptions(**budget))
    await worker.aclose()
    assert result.status == "failed" and result.failure == "budget", result
    t = result.totals
    prompt = estimate_prompt_tokens(fake.requests_for("w1")[0].messages)
    assert (t.prompt_tokens, t.completion_tokens, t.estimated) == (prompt, estimate_text_tokens("word " * 160), True)
    assert t.cost_usd == pytest.approx((prompt + 2 * t.completion_tokens) / 1e6)


# --- helpers --------------------------------------------------------------------------------------


async def _wait_idle(fake) -> bool:
    return await asyncio.to_thread(fake.wait_idle, 20.0)


async def _raw_stream(worker: HttpWorker, model, body: bytes):
    """Stream `body` as an event stream from a server of its own on 127.0.0.1."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n"
        )
        try:
            writer.write(body)
            await writer.drain()
        except (ConnectionError, OSError):
            pass
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        return await collect(worker, replace(model, base_url=f"http://127.0.0.1:{port}/v1"))
    finally:
        server.close()

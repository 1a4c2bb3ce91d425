"""A planner stops when its plan is written (conductor/remote.py, core/workflow.py `plan_end`).

Against a real HTTP server on 127.0.0.1 speaking the OpenAI streaming wire: a planner that writes
its lists and then goes on writing is stopped (its stream closed, which the server sees) right
after the lists, and pays only for the plan; one that never writes its lists is cut at the plan's
token bound, without a repair retry, and the fallback model answers at once."""

from __future__ import annotations

import json

import pytest
from conftest import pool_models

from stiva_tui.conductor.base import ConductorError, PlanRequest, WorkerInfo
from stiva_tui.conductor.remote import PLAN_END, PLAN_TAIL_CHUNKS, RemoteConductor, plan_token_bound
from stiva_tui.core import events as ev
from stiva_tui.core.usage import estimate_prompt_tokens, estimate_text_tokens, estimate_tokens
from stiva_tui.core.workflow import parse_workflow, plan_end
from stiva_tui.engine.executor import Engine
from stiva_tui.engine.fallback import FallbackEvidence
from stiva_tui.pool.client import HttpWorker
from tests.support.fakeprovider import Reply

PLAN = (
    "Two drafts, then a judge.\n"
    "model_id = [1, 1, 2]\n"
    'subtasks = ["Write the function.", "Write it another way.", "Pick the better of step 0 and step 1."]\n'
    "access_list = [[], [], [0, 1]]"
)
GARBAGE = 3000  # chunks after the plan: at 1 ms each, 3 s of a server that never stops
# (its count at the end of such a stream: what a client that reads it all pays)


def pieces(text: str) -> list[str]:
    """`text` in small chunks, as a served model streams it (a few characters each)."""
    return [text[i : i + 3] for i in range(0, len(text), 3)]


def request(pool: int = 3, steps: int = 5) -> PlanRequest:
    return PlanRequest("Q?", [WorkerInfo(f"m{i}", "") for i in range(pool)], max_steps=steps)


# --- the completeness check ---------------------------------------------------------------------


def test_plan_end_is_the_end_of_the_last_list():
    text = PLAN + "\nmodel_id = [7] and more"
    end = plan_end(text, 3, 5)
    assert text[:end] == PLAN
    assert parse_workflow(text[:end], 3, 5) == parse_workflow(PLAN, 3, 5)
    # never before every list is written and valid
    assert all(plan_end(PLAN[:n], 3, 5) is None for n in range(len(PLAN)))
    assert plan_end(PLAN, 2, 5) is None  # model 2 is not in a pool of two: not a plan yet
    assert plan_end("<think>" + PLAN, 3, 5) is None  # a draft in an open think block
    assert plan_end("<think>x</think>" + PLAN, 3, 5) == len(PLAN) + 16
    as_json = json.dumps({"model_id": [0], "subtasks": ["Answer."], "access_list": [[]]})
    assert plan_end(as_json + "garbage", 1, 5) is not None


def test_plan_end_checks_only_past_since():
    assert plan_end(PLAN, 3, 5, since=len(PLAN) - 1) == len(PLAN)
    assert plan_end(PLAN, 3, 5, since=len(PLAN)) is None


def test_the_bound_is_what_a_plan_needs():
    assert 300 <= plan_token_bound(3, 5) <= 600
    assert plan_token_bound(3, 1) < plan_token_bound(3, 5) < plan_token_bound(3, 10)
    assert plan_token_bound(12, 5) > plan_token_bound(3, 5)  # two-digit model numbers
    # the bound is larger than the plan the prompt asks for, written out at its longest
    lists = 'model_id = [0, 1, 2, 0, 1]\nsubtasks = ["' + '", "'.join(["x" * 160] * 5) + '"]\n'
    lists += "access_list = [[], [0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]"
    assert estimate_tokens("I will split it. " * 30 + lists) < plan_token_bound(3, 5)


# --- against a real server ----------------------------------------------------------------------


async def test_the_planner_stops_reading_when_its_lists_are_complete(fake):
    fake.script("cond", Reply(chunks=pieces(PLAN) + [" la"] * GARBAGE, chunk_delay_s=0.001, usage=(500, 3100)))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    seen: list[str] = []
    plan = await RemoteConductor(models[0], worker).plan(request(), seen.append)
    await worker.aclose()
    assert plan.raw_text == PLAN and "".join(seen) == PLAN and plan.attempts == 1
    assert plan.workflow == parse_workflow(PLAN, 3, 5)
    assert fake.wait_idle(5.0)
    sent = fake.requests_for("cond")[0]
    assert fake.disconnects == 1, "the server never saw the client go"
    assert sent.sent < len(pieces(PLAN)) + 20, f"the server wrote {sent.sent} chunks"
    # only the plan is paid for (estimated: the server's count never came)
    assert plan.usage.estimated
    # never under what was read: the plan and the few chunks read after it for the server's count
    assert estimate_tokens(PLAN) <= plan.usage.completion_tokens <= estimate_text_tokens(PLAN) + PLAN_TAIL_CHUNKS + 2
    assert sent.body["max_tokens"] == plan_token_bound(3, 5)


async def test_a_plan_that_ends_the_reply_keeps_the_servers_count(fake):
    fake.script("cond", Reply(chunks=pieces(PLAN), usage=(321, 45)))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    plan = await RemoteConductor(models[0], worker).plan(request())
    await worker.aclose()
    assert plan.raw_text == PLAN
    assert (plan.usage.prompt_tokens, plan.usage.completion_tokens, plan.usage.estimated) == (321, 45, False)


async def test_the_engine_counts_only_the_plan_in_the_runs_usage(fake):
    fake.script("cond", Reply(chunks=pieces(PLAN) + [" la"] * GARBAGE, chunk_delay_s=0.001, usage=(500, 3100)))
    fake.default("w1", Reply("draft", usage=(10, 1)))
    fake.default("w2", Reply("the better one", usage=(10, 3)))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    result = await Engine(models, worker, RemoteConductor(models[0], worker)).run("Q?")
    await worker.aclose()
    assert result.status == "finished" and result.answer == "the better one"
    prompt = estimate_prompt_tokens(fake.requests_for("cond")[0].messages)
    assert result.totals.conductor_tokens <= prompt + estimate_text_tokens(PLAN) + PLAN_TAIL_CHUNKS + 2


async def test_a_planner_that_never_writes_its_lists_is_cut_at_the_bound(fake):
    fake.script("cond", Reply(chunks=["Let me think"] + [" and think"] * GARBAGE, chunk_delay_s=0.001))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    with pytest.raises(ConductorError, match="no complete plan within its bound") as caught:
        await RemoteConductor(models[0], worker).plan(request())
    await worker.aclose()
    bound = plan_token_bound(3, 5)
    assert len(fake.requests_for("cond")) == 1  # no repair retry after a cut
    assert fake.wait_idle(5.0) and fake.disconnects == 1
    assert fake.requests_for("cond")[0].sent < bound + 20
    assert caught.value.usage.completion_tokens <= estimate_text_tokens("Let me think" + " and think" * bound)


async def test_a_server_that_stops_at_max_tokens_without_lists_is_not_asked_again(fake):
    bound = plan_token_bound(3, 5)
    fake.script("cond", Reply(chunks=["Let me think"] + [" and think"] * 40, usage=(300, bound)))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    with pytest.raises(ConductorError, match="no complete plan within its bound") as caught:
        await RemoteConductor(models[0], worker).plan(request())
    await worker.aclose()
    assert len(fake.requests_for("cond")) == 1
    assert caught.value.usage.completion_tokens == bound


async def test_when_the_planner_is_cut_the_fallback_answers_at_once(fake):
    fake.script("cond", Reply(chunks=["Let me think"] + [" and think"] * GARBAGE, chunk_delay_s=0.001))
    fake.default("w1", Reply("cheap answer"))
    fake.default("w2", Reply("fallback answer"))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    engine = Engine(models, worker, RemoteConductor(models[0], worker), fallback=FallbackEvidence(model="w2"))
    events: list = []
    result = await engine.run("Q?", emit=events.append)
    await worker.aclose()
    assert result.status == "finished" and result.answer == "fallback answer"
    assert len(fake.requests_for("cond")) == 1 and not fake.requests_for("w1")
    ready = next(e for e in events if isinstance(e, ev.WorkflowReady))
    assert "no complete plan within its bound" in ready.note
    prompt = estimate_prompt_tokens(fake.requests_for("cond")[0].messages)
    cut = estimate_text_tokens("Let me think" + " and think" * plan_token_bound(3, 5))
    assert prompt < result.totals.conductor_tokens <= prompt + cut


async def test_a_reply_that_ends_short_of_a_plan_still_gets_its_repair(fake):
    fake.script("cond", Reply("I have no idea."), Reply(chunks=pieces(PLAN)))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    plan = await RemoteConductor(models[0], worker).plan(request())
    await worker.aclose()
    assert plan.attempts == 2 and plan.raw_text == PLAN


async def test_the_configured_reasoning_widens_the_bound(fake):
    """A planner that reasons at length gets room for it: [conductor] max_reasoning_tokens."""
    from stiva_tui.conductor.choose import select_conductor
    from stiva_tui.config import ConductorConfig

    fake.script("cond", Reply(chunks=pieces(PLAN)))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    config = ConductorConfig(backend="remote", model="cond", max_reasoning_tokens=2000)
    conductor, _ = select_conductor(config, models, worker)
    await conductor.plan(request())
    await worker.aclose()
    asked = fake.requests_for("cond")[0].body["max_tokens"]
    assert asked == plan_token_bound(3, 5, 2000) == plan_token_bound(3, 5, 0) + 2000


async def test_a_plan_that_ends_at_its_stop_sequence_gets_the_servers_count(fake):
    """The plain prompt asks for PLAN_END after the lists and sends it as a stop sequence: a
    server that holds to it ends the reply there and reports its usage, which is what is paid,
    however long the planner would have gone on writing."""
    tail = f"\n{PLAN_END}\nAnd now some more thoughts" + " la" * GARBAGE
    fake.script("cond", Reply(chunks=pieces(PLAN + tail), chunk_delay_s=0.001, usage=(633, 439), honor_stop=True))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    plan = await RemoteConductor(models[0], worker).plan(request())
    await worker.aclose()
    sent = fake.requests_for("cond")[0]
    assert sent.body["stop"] == [PLAN_END] and PLAN_END in sent.messages[-1]["content"]
    assert plan.raw_text == PLAN
    assert (plan.usage.prompt_tokens, plan.usage.completion_tokens, plan.usage.estimated) == (633, 439, False)
    assert fake.wait_idle(5.0) and fake.disconnects == 0  # the reply ended; nothing was cut off


async def test_where_the_count_never_comes_the_estimate_is_marked_and_not_under(fake):
    """A server that ignores the stop sequence and sends no usage: the plan's usage is an
    estimate, marked so, and at least the chat template's count of the prompt."""
    fake.script("cond", Reply(chunks=pieces(PLAN) + [" la"] * GARBAGE, chunk_delay_s=0.001, usage=None))
    models = pool_models(fake, "cond", "w1", "w2")
    worker = HttpWorker()
    plan = await RemoteConductor(models[0], worker).plan(request())
    await worker.aclose()
    messages = fake.requests_for("cond")[0].messages
    assert plan.usage.estimated
    chars = sum(len(m["content"]) for m in messages)
    assert plan.usage.prompt_tokens == estimate_prompt_tokens(messages) > chars / 3 + 4 * len(messages)

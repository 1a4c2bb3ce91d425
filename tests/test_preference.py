"""The cost and latency preference: parsed strictly, told to the conductor with each model's price
and latency, recorded with the plan, set from the config, the CLI, the API, the bench and the app,
and never moving the hard caps. Against real HTTP providers and a real SQLite history."""

from __future__ import annotations

import json
import math

import pytest

from stiva_tui.conductor.base import PlanRequest, WorkerInfo
from stiva_tui.conductor.prompt import compact_conductor_prompt, conductor_user_message
from stiva_tui.config import ConfigError, parse_config
from stiva_tui.core import events as ev
from stiva_tui.core.preference import LEVELS, PreferenceError, next_level, parse_preference
from stiva_tui.core.run_state import RunState
from stiva_tui.runtime import Ask, AskError, Runtime
from tests.support.fakeprovider import Reply

PLAN_TWO = 'Two drafts.\nmodel_id = [1, 2]\nsubtasks = ["Draft it.", "Check step 0."]\naccess_list = [[], [0]]'
PLAN_ONE = 'The cheap one will do.\nmodel_id = [1]\nsubtasks = ["Answer it."]\naccess_list = [[]]'


def config(fake, **conductor):
    models = [
        {"id": "cond", "provider": "lab", "model": "cond", "price_in": 0.5, "price_out": 1.0},
        {"id": "cheap", "provider": "lab", "model": "cheap", "price_in": 0.1, "price_out": 0.4, "latency_s": 0.3},
        {"id": "dear", "provider": "lab", "model": "dear", "price_in": 3.0, "price_out": 15.0},
    ]
    return parse_config(
        {
            "conductor": {"backend": "remote", "model": "cond", **conductor},
            "providers": [{"name": "lab", "base_url": fake.base_url}],
            "models": models,
            "workers": {"retries": 0},
            "discovery": {"enabled": False},
            "catalog": False,
        }
    )


# --- parsing ------------------------------------------------------------------------------------


def test_levels_numbers_and_nothing_parse_and_anything_else_is_a_clear_error():
    assert parse_preference("cheap") is LEVELS["cheap"] and parse_preference(" Best ") is LEVELS["best"]
    assert math.isclose(parse_preference("0.4").thrift, 0.4) and parse_preference(1).thrift == 1.0
    assert parse_preference(None) is None and parse_preference("") is None and parse_preference("none") is None
    assert LEVELS["cheap"].cost > LEVELS["balanced"].cost > LEVELS["best"].cost == 0
    assert LEVELS["fast"].latency > max(LEVELS[n].latency for n in ("best", "balanced", "cheap"))
    for bad in ("cheapest", "1.5", "-0.1", "nan", True):
        with pytest.raises(PreferenceError, match="best, balanced, cheap, fast|from 0 .best. to 1"):
            parse_preference(bad)
    # the app's toggle walks every level, then back to none
    seen, level = [], None
    for _ in range(5):
        level = next_level(level)
        seen.append(level)
    assert seen == ["best", "balanced", "cheap", "fast", None]


def test_the_reward_weighs_relative_cost_and_latency_by_the_preference():
    right_dear_slow = dict(base=1.0, relative_cost=1.0, relative_latency=1.0)
    right_cheap_quick = dict(base=1.0, relative_cost=0.03, relative_latency=0.1)
    wrong_cheap_quick = dict(base=0.5, relative_cost=0.03, relative_latency=0.1)
    right_cheap_slow = dict(base=1.0, relative_cost=0.03, relative_latency=1.0)
    right_dear_quick = dict(base=1.0, relative_cost=1.0, relative_latency=0.05)
    for level in LEVELS.values():  # under every level a right answer beats a wrong one
        assert level.reward(**right_dear_slow) > level.reward(**wrong_cheap_quick), level
    best, cheap, fast = LEVELS["best"], LEVELS["cheap"], LEVELS["fast"]
    assert best.reward(**right_dear_slow) == best.reward(**right_cheap_quick)  # best: only being right counts
    assert cheap.reward(**right_cheap_quick) > cheap.reward(**right_dear_slow)
    assert cheap.reward(**right_cheap_slow) > cheap.reward(**right_dear_quick)  # cheap ignores latency
    assert fast.reward(**right_dear_quick) > fast.reward(**right_cheap_slow)
    assert parse_preference("1").cost == LEVELS["cheap"].cost and parse_preference("0").cost == 0
    assert math.isclose(parse_preference("0.5").thrift, 0.5)


def test_a_bad_preference_in_the_config_is_a_config_error_naming_the_key(fake):
    with pytest.raises(ConfigError, match="prefer"):
        config(fake, prefer="cheapest")
    assert config(fake, prefer=0.25).conductor.prefer == 0.25


# --- the prompt ----------------------------------------------------------------------------------


def test_the_prompt_states_the_wish_and_each_models_price_and_latency_and_keeps_the_step_limit():
    workers = [
        WorkerInfo("cheap", "small", price_in=0.1, price_out=0.4, latency_s=0.3),
        WorkerInfo("dear", "large", price_in=3.0, price_out=15.0),
        WorkerInfo("gemma", "embedded", kind="embedded"),
    ]
    plain = PlanRequest("What is 2+2?", workers, max_steps=3)
    cheap = PlanRequest("What is 2+2?", workers, max_steps=3, preference=parse_preference("cheap"))
    text = conductor_user_message(cheap)
    assert "The user prefers the cheapest plan" in text
    assert "0: cheap - $0.1/$0.4, ~0.30 s a call" in text and "1: dear - $3/$15, latency unknown" in text
    assert "2: gemma - free (local)" in text
    assert "at most 3 steps" in text  # the hard cap is stated whatever the preference
    assert "prefers" not in conductor_user_message(plain)  # no preference: the prompt says nothing of cost
    compact = compact_conductor_prompt(cheap)
    assert (
        compact.endswith("Plan for prefer cheap, at most 3 steps:")
        and "1 dear (large, $3/$15, latency unknown)" in compact
    )
    assert "Prefer" not in compact_conductor_prompt(plain)
    assert "leaning to low cost" in conductor_user_message(
        PlanRequest("q", workers, preference=parse_preference("0.6"))
    )


def test_the_base_models_prompt_states_it_and_its_examples_show_it():
    from stiva_tui.conductor.fewshot import base_conductor_prompt

    workers = [
        WorkerInfo("gemma", "", kind="embedded"),
        WorkerInfo("mid", "", price_in=0.3, price_out=1.2),
        WorkerInfo("dear", "", price_in=3, price_out=15, latency_s=2.0),
        WorkerInfo("cheap", "", price_in=0.1, price_out=0.4, latency_s=0.2),
    ]

    def prompt(level):
        return base_conductor_prompt(PlanRequest("What is 2+2?", workers, preference=parse_preference(level)))

    assert (
        "The user prefers the most accurate answer, whatever it costs. Prices: 0 free (local), 1 $0.3/$1.2, "
        "2 $3/$15, 3 $0.1/$0.4." in prompt("best")
    )
    assert "prefers" not in prompt(None)
    # the worked examples' model: the first real one with no preference, else the one at the
    # preference's point of the price range (never the embedded model)
    examples = {
        level: prompt(level).split("What is 12 times 3?")[1].split("\n")[1]
        for level in (None, "best", "balanced", "cheap", "0.5")
    }
    assert examples == {
        None: "model_id = [1]",
        "best": "model_id = [2]",
        "balanced": "model_id = [1]",
        "cheap": "model_id = [3]",
        "0.5": "model_id = [1]",
    }
    # fast: by price (its cost weight) while a latency is unknown, the quickest once every one is known
    assert "Question: What is 12 times 3?\nmodel_id = [2]" in prompt("fast")
    workers[1] = WorkerInfo("mid", "", price_in=0.3, price_out=1.2, latency_s=0.1)
    assert "Question: What is 12 times 3?\nmodel_id = [1]" in prompt("fast")
    # a chain's second step is the neighbour in that order, never the dearest for a thrifty wish;
    # under `cheap` every example is one step (a second step is a second bill)
    chain = "Question: Write a short poem about the sea, then check that it rhymes.\nmodel_id = "
    assert chain + "[1, 3]" in prompt("balanced") and chain + "[2, 1]" in prompt("best")
    assert chain not in prompt("cheap") and chain in prompt("0.9")
    assert chain + "[1, 0]" in prompt(None)  # no preference: as before


# --- a run -----------------------------------------------------------------------------------------


async def test_a_questions_preference_reaches_the_conductor_and_is_kept_with_the_plan(fake):
    runtime = await Runtime.create(config(fake, prefer="balanced"), discover=False)
    try:
        fake.script("cond", Reply(PLAN_ONE), Reply(PLAN_ONE))
        fake.script("cheap", Reply("four"), Reply("four"))
        events: list = []
        outcome = await runtime.sessions.ask(Ask("What is 2+2?", options={"preference": "cheap"}), emit=events.append)
        assert outcome.result.status == "finished"
        prompt = json.dumps(fake.requests_for("cond")[0].messages)
        assert "The user prefers the cheapest plan" in prompt and "cheap - $0.1/$0.4, ~0.30 s a call" in prompt
        ready = next(e for e in events if isinstance(e, ev.WorkflowReady))
        assert ready.preference == "cheap"
        trace = runtime.store.get_trace(outcome.result.run_id)
        assert trace.rounds[0].preference == "cheap"
        assert RunState.from_trace(trace).rounds[0].preference == "cheap"  # a reopened chat shows it
        # no option: the config's default; "none": no preference stated at all
        await runtime.sessions.ask(Ask("Again?"))
        assert "balance of accuracy and cost" in json.dumps(fake.requests_for("cond")[1].messages)
        # the history now knows the cheap model's typical latency, measured
        assert "cheap" in runtime.store.typical_latencies()
    finally:
        await runtime.aclose()


async def test_a_bad_preference_is_refused_before_anything_is_recorded(fake):
    runtime = await Runtime.create(config(fake), discover=False)
    try:
        with pytest.raises(AskError, match="preference 'cheapest'"):
            await runtime.sessions.ask(Ask("What is 2+2?", options={"preference": "cheapest"}))
        assert runtime.store.list_conversations() == [] and fake.requests == []
    finally:
        await runtime.aclose()


async def test_the_budget_and_the_step_limit_stay_hard_whatever_the_preference(fake):
    runtime = await Runtime.create(config(fake, max_steps=1), discover=False)
    try:
        # "best" may want every model; the step limit (1) makes the two-step plan invalid, twice
        fake.script("cond", Reply(PLAN_TWO), Reply(PLAN_TWO))
        outcome = await runtime.sessions.ask(Ask("Prove it.", options={"preference": "best"}))
        assert "at most 1 step" in json.dumps(fake.requests_for("cond")[0].messages)
        # no valid plan: one step on the fallback model answers (engine/fallback.py), never two
        trace = runtime.store.get_trace(outcome.result.run_id)
        assert [s.model for s in trace.rounds[0].steps] == ["dear"] and not fake.requests_for("cheap")
        assert "the planner wrote no valid plan after 2 tries" in trace.rounds[0].reasoning
        # a tiny budget stops a "best" run once the conductor has spent it
        fake.script("cond", Reply(PLAN_ONE, usage=(1000, 200)))
        fake.script("cheap", Reply("done"))
        stopped = await runtime.sessions.ask(Ask("Prove it.", options={"preference": "best", "budget_usd": 1e-6}))
        assert stopped.result.status == "failed" and stopped.result.failure == "budget"
        assert not fake.requests_for("cheap")
    finally:
        await runtime.aclose()


# --- front ends ------------------------------------------------------------------------------------


def test_the_cli_refuses_a_bad_prefer_with_a_usage_error(capsys):
    from stiva_tui import cli

    assert cli.main(["--prefer", "cheapest", "models"]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "--prefer: preference 'cheapest'" in err and "Traceback" not in err
    args = cli.parse_args(["--prefer", "cheap", "ask", "hi"])
    assert args.prefer == "cheap" and cli.parse_args(["models"]).prefer is None


def test_bench_systems_take_a_preference_each_and_only_conductors_do():
    from stiva_tui.runtime.systems import SystemNameError, parse_systems

    systems = parse_systems(["conductor@cheap,conductor@best,conductor-mini@0.4"])
    assert [s.options["preference"] for s in systems] == ["cheap", "best", "0.4"]
    assert all(s.conductor for s in systems)
    with pytest.raises(SystemNameError, match="only a conductor system"):
        parse_systems(["moa@cheap"])
    with pytest.raises(SystemNameError, match="conductor@cheapest: preference"):
        parse_systems(["conductor@cheapest"])

"""The preference in the app: a toggle (ctrl+f) shown in the status bar that the next question's
plan is made under, and the tree's answer to "why this plan?": the preference, the conductor's
reason in one line, and what one call to the cheapest model and MoA would have cost (an estimate).
Against scripted providers over real HTTP."""

from __future__ import annotations

import json

import pytest

from stiva_tui.core import events as ev
from stiva_tui.core.run_state import RunState
from stiva_tui.engine.estimate import counterfactuals, reason_line
from stiva_tui.pool.types import PoolModel
from stiva_tui.tui import messages as msg
from stiva_tui.tui.app import StivaApp
from tests.support.fakeprovider import Reply
from tests.support.tui import ask, demo_events, labels, make_runtime, make_test_config, script_plan, wait_for
from tests.support.tui_screens import Host

SIZE = (140, 42)
POOL = [
    PoolModel("w1", "fake", "w1", price_in=1.0, price_out=2.0),
    PoolModel("w2", "fake", "w2", price_in=3.0, price_out=6.0),
    PoolModel("gemma", "embedded", "gemma", kind="embedded"),
]


def finished_demo(preference: str = "cheap") -> RunState:
    state = RunState(model_names=["cond", "w1", "w2"])
    for event in demo_events(finished=True):
        if isinstance(event, ev.WorkflowReady):
            event = ev.WorkflowReady(
                event.run_id,
                event.round,
                event.workflow,
                event.reasoning,
                event.usage,
                event.latency_s,
                preference=preference,
            )
        state.apply(event)
    return state


def test_the_counterfactual_is_priced_from_this_runs_own_tokens():
    state = finished_demo()
    # question: the smallest prompt of a step that read only the question (58); answer: the final step's 96
    cheapest, moa = counterfactuals(state, POOL, (["w1", "w2"], "w1", 2))
    assert cheapest.label == "w1 alone" and cheapest.cost_usd == pytest.approx((58 * 1 + 96 * 2) / 1e6)
    # layer 0: each proposer reads the question; layer 1: the question and both drafts; then the aggregator
    layer0 = (58 + 96 * 2) + (58 * 3 + 96 * 6)
    layer1 = (250 * 1 + 96 * 2) + (250 * 3 + 96 * 6)
    assert moa.label == "MoA 2×2"
    assert moa.cost_usd == pytest.approx((layer0 + layer1 + 250 * 1 + 96 * 2) / 1e6)
    assert counterfactuals(RunState(), POOL) == []  # nothing ran: nothing to compare
    # no model with a price: the first real one, in tokens (a price of 0 may be "unknown")
    (alone,) = counterfactuals(state, [PoolModel("free", "lab", "free"), POOL[2]])
    assert (alone.label, alone.cost_usd, alone.tokens) == ("free alone", 0.0, 58 + 96)
    assert (
        reason_line(
            "Let me think about how to split this question into subtasks, which models to use for each, "
            "and which step should see which answers. The cheap model knows arithmetic. Then check it."
        )
        == "The cheap model knows arithmetic."
    )  # its first sentence
    assert reason_line("[Stiva: one model in the pool: one step]") == ""


async def test_the_tree_says_the_preference_the_reason_and_what_else_would_have_cost():
    from stiva_tui.tui.widgets.workflow_tree import WorkflowTree

    tree = WorkflowTree(finished_demo("cheap"))
    tree.models, tree.moa = POOL, (["w1", "w2"], "w1", 2)
    async with Host(None, body=lambda: [tree]).run_test(size=SIZE) as pilot:
        await pilot.pause()
        text = labels(tree)
        (plan,) = [line for line in text if line.startswith("✓ Plan")]
        assert plan.startswith("✓ Plan  3 steps  prefer cheap"), plan
        (why,) = [line for line in text if line.startswith("why ")]
        assert why.startswith("why Two independent drafts, then a merge: the stdlib options from w1")
        assert why.endswith("…") and len(why) <= 4 + 100  # one line: the reasoning, shortened
        (estimate,) = [line for line in text if line.startswith("≈ instead")]
        assert estimate == "≈ instead  w1 alone $0.00025  MoA 2×2 $0.0032  estimated", estimate
    # with no pool known (a tree alone), no estimate is made up
    bare = WorkflowTree(finished_demo(""))
    async with Host(None, body=lambda: [bare]).run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert not any(line.startswith("≈") for line in labels(bare))
        assert not any("prefer" in line for line in labels(bare))


async def test_ctrl_o_sets_the_next_questions_preference_shown_in_the_status_bar(fake, stiva_home):
    config = make_test_config(fake, conductor={"backend": "remote", "model": "cond", "prefer": "best"})
    runtime = await make_runtime(config)
    seen: list[str] = []

    def hook(message) -> None:
        if isinstance(message, msg.RunEnded):
            seen.append(message.status)

    try:
        script_plan(fake)
        fake.default("w1", Reply("An outline."))
        fake.default("w2", Reply("Four."))
        app = StivaApp(config, runtime=runtime)
        async with app.run_test(size=SIZE, message_hook=hook) as pilot:
            screen = app.chat_screen
            bar = screen.status_bar.query_one("#status-prefer")
            await wait_for(pilot, lambda: screen.preference == "best", what="the config's preference")
            assert "prefer best" in str(bar.render()) and bar.display
            assert not screen.status_bar.query_one("#status-pool").display  # real models: no pool label
            await pilot.press("ctrl+f")
            await pilot.press("ctrl+f")  # best -> balanced -> cheap
            await pilot.pause()
            assert screen.preference == "cheap" and "prefer cheap" in str(bar.render())
            await ask(pilot, "What is 2+2?")
            await wait_for(pilot, lambda: bool(seen), what="the run to end")
            assert set(seen) == {"finished"}, (seen, screen.live.state.error)  # (seen as it bubbles up, too)
            prompt = json.dumps(fake.requests_for("cond")[0].messages)
            assert "The user prefers the cheapest plan" in prompt and "w2 - $3/$6" in prompt
            text = labels(screen.tree)
            assert any(line.startswith("✓ Plan  2 steps  prefer cheap") for line in text), text
            assert any(line.startswith("≈ instead  w1 alone $") for line in text), text
            # two more presses: fast, then no preference at all (hidden, and the prompt says nothing of cost)
            await pilot.press("ctrl+f", "ctrl+f")
            await pilot.pause()
            assert screen.preference is None and not bar.display
    finally:
        await runtime.aclose()


async def test_a_simulated_pool_is_labelled_in_the_status_bar(stiva_home):
    """`stiva --pool sim`: the status bar says SIMULATED POOL in the app, as every report does (a
    recorded pool's label is pool_label's, tested with the replay); a pool of real models shows no
    such label (the test above)."""
    from stiva_tui.config import parse_config
    from stiva_tui.sim.pool import pool_config, start_sim

    config = pool_config(parse_config({}), "sim")
    # a sim: model cannot plan, but nothing is asked here: a remote conductor loads nothing
    config = config.model_copy(
        update={"conductor": config.conductor.model_copy(update={"backend": "remote", "model": "sim:calc"})}
    )
    config, server = start_sim(config)
    try:
        runtime = await make_runtime(config, load_conductor=False)
        try:
            app = StivaApp(config, runtime=runtime)
            async with app.run_test(size=SIZE) as pilot:
                bar = app.chat_screen.status_bar.query_one("#status-pool")
                await wait_for(pilot, lambda: bar.display, what="the pool's label")
                assert str(bar.render()) == "SIMULATED POOL"
        finally:
            await runtime.aclose()
    finally:
        server.stop()

"""The fork in the app: r on a step of the tree, a model chosen in the dialog, the branch run
against scripted local providers (real HTTP on 127.0.0.1), then the run and its branch side by side
in compare mode, where a vote is stored as a preference pair."""

from __future__ import annotations

import os
import shutil
import time

import pytest
from textual.widgets import Input, OptionList

from stiva_tui.train.votes import read_votes
from stiva_tui.tui.app import StivaApp
from stiva_tui.tui.dialogs import ForkDialog
from stiva_tui.tui.screens.compare import CompareScreen
from tests.support.fakeprovider import Reply
from tests.support.tui import PLAN_TWO_STEPS, ask, labels, make_runtime, make_test_config, script_plan, wait_for

SIZE = (140, 42)
EXTRA = [{"id": "w3", "provider": "fake", "model": "w3", "price_in": 0.5, "price_out": 1.0, "description": "three"}]


def counts(fake) -> dict[str, int]:
    return {m: len(fake.requests_for(m)) for m in ("cond", "w1", "w2", "w3")}


async def test_r_on_a_step_forks_it_onto_the_model_picked_and_compare_shows_both_branches(fake):
    script_plan(fake)  # step 1 on w1 outlines, step 2 on w2 answers from it
    fake.script("w1", Reply("An outline.", usage=(11, 6)))
    fake.script("w2", Reply("The first answer.", usage=(40, 5)))
    config = make_test_config(fake, extra_models=EXTRA)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime)
    notes: list[str] = []
    try:
        async with app.run_test(size=SIZE) as pilot:
            chat = app.chat_screen
            await ask(pilot, "What is 2+2?")
            await wait_for(pilot, lambda: chat.live.state.status == "finished" and not chat.running, what="the run")
            original = chat.live.state.run_id
            before = counts(fake)
            # r on the plan line says to pick a step; on step 2 it opens the dialog
            chat.tree.focus()
            chat.tree.move_cursor(chat.tree.node_for(("plan", 1)))
            chat.tree.notify = lambda message, **kw: notes.append(message)
            await pilot.press("r")
            await pilot.pause()
            assert notes and "Select a step" in notes[-1] and not isinstance(app.screen, ForkDialog)
            chat.tree.move_cursor(chat.tree.node_for(("step", 1, 1)))
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ForkDialog), what="the fork dialog")
            dialog = app.screen
            options = dialog.query_one("#fork-models", OptionList)
            assert options.has_focus and dialog.chosen() != "w2"  # another model than the step's, first
            assert dialog.query_one("#fork-subtask", Input).value == "Answer using the outline"
            # pick w3: down until it is highlighted, then edit the subtask and run with enter
            for _ in range(len(dialog.models)):
                if dialog.chosen() == "w3":
                    break
                await pilot.press("down")
            assert dialog.chosen() == "w3"
            fake.script("w3", Reply("The branch's answer.", usage=(30, 3)))
            await pilot.press("tab")
            subtask = dialog.query_one("#fork-subtask", Input)
            subtask.value = "Answer in one line"
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), timeout=20, what="compare")
            screen = app.screen
            await wait_for(pilot, lambda: len(screen.columns) == 2, what="two columns")
            await pilot.pause(0.2)
            # only step 2 (on w3) was called: step 1 kept its output, the plan was not made again
            after = counts(fake)
            assert {m: after[m] - before[m] for m in after} == {"cond": 0, "w1": 0, "w2": 0, "w3": 1}
            assert "Answer in one line" in fake.requests_for("w3")[-1].user_text
            assert "An outline." in fake.requests_for("w3")[-1].user_text
            assert [c.system for c in screen.columns] == ["conductor", "branch:1"]
            trace = runtime.store.get_trace(original)
            (branch,) = trace.branches
            assert branch.answer == "The branch's answer." and trace.answer == "The first answer."
            assert branch.totals.cost_usd == (30 * 0.5 + 3 * 1.0) / 1e6
            shown = "\n".join(str(w.render()) for c in screen.columns for w in c.query("Static"))
            assert "The branch's answer." in shown and "The first answer." in shown
            assert "step 2 on w3" in shown
            # the tree behind shows the branch: step 1 kept, step 2 run on w3
            tree_text = "\n".join(labels(chat.tree))
            assert "kept: not run again" in tree_text and "w3" in tree_text
            assert chat.detail.key == ("step", 1, 0)  # the pane follows the branch's first step: kept
            assert "kept from the run: not called or paid again" in str(
                chat.detail.query_one("#detail-header").render()
            )
            # 2 votes for the branch: a preference pair like any compare vote
            await pilot.press("2")
            await pilot.pause()
            session = runtime.store.get_compare_session(screen.session_id)
            assert session.winner == "branch:1"
            (pair,) = read_votes(runtime.store).pairs
            assert pair.chosen.models == ("w1", "w3") and pair.rejected.models == ("w1", "w2")
            # back in the chat, the tree shows the branch: r on its step 2 forks it again (onto
            # w1), a second branch of the same run; compare shows the run and both branches
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is chat, what="back in the chat")
            chat.tree.focus()
            chat.tree.move_cursor(chat.tree.node_for(("step", 1, 1)))
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, ForkDialog), what="the fork dialog again")
            while app.screen.chosen() != "w1":
                await pilot.press("down")
            fake.script("w1", Reply("A third answer.", usage=(5, 5)))
            await pilot.press("enter")
            await wait_for(
                pilot,
                lambda: isinstance(app.screen, CompareScreen) and len(app.screen.columns) == 3,
                timeout=20,
                what="three columns",
            )
            assert [c.system for c in app.screen.columns] == ["conductor", "branch:1", "branch:2"]
            assert [b.answer for b in runtime.store.get_trace(original).branches] == [
                "The branch's answer.",
                "A third answer.",
            ]
    finally:
        await runtime.aclose()


async def test_esc_cancels_a_fork_and_the_run_stays_as_it_was(fake):
    script_plan(fake)
    fake.script("w1", Reply("An outline."))
    fake.script("w2", Reply("The first answer."))
    config = make_test_config(fake, extra_models=EXTRA)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime)
    try:
        async with app.run_test(size=SIZE) as pilot:
            chat = app.chat_screen
            await ask(pilot, "What is 2+2?")
            await wait_for(pilot, lambda: chat.live.state.status == "finished" and not chat.running, what="the run")
            original = runtime.store.get_trace(chat.live.state.run_id)
            fake.script("w3", Reply(" ".join(f"w{i}" for i in range(200)), chunk_delay_s=0.05))
            chat.fork(original.run_id, "1", "w3", "Outline it")
            await wait_for(pilot, lambda: chat.live.state.status == "running" and len(fake.requests_for("w3")) == 1)
            await pilot.press("escape")
            await wait_for(pilot, lambda: not chat.running, what="the fork to stop")
            runtime.store.wait_for_writes()
            trace = runtime.store.get_trace(original.run_id)
            assert trace.model_dump(exclude={"branches"}) == original.model_dump(exclude={"branches"})
            assert [b.status for b in trace.branches] == ["cancelled"]
            assert not isinstance(app.screen, CompareScreen)
    finally:
        await runtime.aclose()


def test_r_forks_in_the_tree_and_renames_in_the_history_without_a_clash_but_a_chat_key_would_clash():
    from stiva_tui.tui.bindings import all_bindings, check_keymap

    fork = all_bindings()["tree.fork"]
    assert fork.key == "r" and fork.tooltip
    assert check_keymap({"tree.fork": "r"}) is None  # the history's r is live only while it has the focus
    assert "new_chat" in check_keymap({"tree.fork": "ctrl+n"})  # the chat screen's own key: live with the tree


@pytest.mark.tmux
@pytest.mark.skipif(shutil.which("tmux") is None and not os.environ.get("CI"), reason="tmux is not installed")
def test_the_real_stiva_at_80x24_forks_a_step_with_r_and_shows_both_branches(fake, tmp_path, stiva_home):
    from tests.test_tui_tmux import Tmux, _stiva_command

    fake.script("cond", Reply(PLAN_TWO_STEPS))
    fake.script("w1", Reply("An outline.", usage=(20, 6)))
    fake.script("w2", Reply("The answer is forty-two.", usage=(50, 5)))
    tmux = Tmux(tmp_path)
    tmux.start(_stiva_command(fake, tmp_path, stiva_home), size=(80, 24))
    try:
        tmux.wait_for("Ask anything", "conductor:", timeout=30)
        tmux.send("What is the meaning of life?", literal=True)
        tmux.wait_for("What is the meaning of life?")
        time.sleep(0.3)
        tmux.send("C-j")
        tmux.wait_for("The answer is forty-two.", "✓ 2 w2", timeout=30)
        before = {m: len(fake.requests_for(m)) for m in ("cond", "w1", "w2")}
        tmux.send("Tab")  # from the prompt to the tree, whose cursor is on step 1
        tmux.wait_for("r Fork step")
        tmux.send("Down")
        time.sleep(0.3)
        tmux.send("r")
        tmux.wait_for("Fork step 2 (ran on w2)", "enter runs")
        tmux.send("Down")  # from cond, the first other model, to w1
        time.sleep(0.3)
        fake.script("w1", Reply("Forty-two, says w1.", usage=(30, 4)))
        tmux.send("Enter")
        screen = tmux.wait_for("branch:1", "Forty-two, says w1.", "The answer is forty-two.", timeout=30)
        assert "step 2 on w1 · added" in screen
        after = {m: len(fake.requests_for(m)) for m in ("cond", "w1", "w2")}
        assert {m: after[m] - before[m] for m in after} == {"cond": 0, "w1": 1, "w2": 0}
        tmux.send("2")
        tmux.wait_for("Marked branch:1")
        tmux.send("C-q")
        assert tmux.wait_exit(timeout=10), "stiva did not quit on ctrl+q"
    finally:
        tmux.kill()


def test_the_fork_dialog_at_80x24(snap_compare):
    """The dialog whole at the smallest terminal: what r does, every pool model (the step's own
    marked, another highlighted), the subtask to edit, and the keys."""
    from tests.support.tui_screens import Host

    models = ["conductor-7b", "gpt-4.1", "claude-sonnet-4", "qwen3-32b", "local/gemma-3-270m"]
    app = Host(lambda: ForkDialog("3", "qwen3-32b", models, "Check both drafts for mistakes and missing cases"))
    assert snap_compare(app, terminal_size=(80, 24))

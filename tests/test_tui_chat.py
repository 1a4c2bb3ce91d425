"""Pilot tests of the chat screen against scripted local providers (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from textual import events

from stiva_tui.tui.app import StivaApp
from stiva_tui.tui.widgets.answer import AnswerView
from tests.support.fakeprovider import Reply
from tests.support.tui import ask, labels, make_runtime, make_test_config, record_run, script_plan, wait_for

SIZE = (140, 42)


@pytest.fixture
async def setup(fake):
    """(fake, config, runtime); the runtime is closed after the test."""
    made = []

    async def build(load_conductor: bool = True, **config_overrides):
        config = make_test_config(fake, **config_overrides)
        runtime = await make_runtime(config, load_conductor=load_conductor)
        made.append(runtime)
        return config, runtime

    yield build
    for runtime in made:
        await runtime.aclose()


def finished(app, status="finished"):
    return lambda: app.chat_screen.live.state.status == status and not app.chat_screen.running


def messages(runtime, screen) -> list:
    """The stored messages of the conversation on screen."""
    if screen.conversation_id is None:
        return []
    return runtime.store.get_conversation(screen.conversation_id).messages


async def test_question_shows_live_tree_and_answer(fake, setup):
    script_plan(fake)
    fake.default("w1", Reply("An outline: add the numbers.", usage=(11, 6)))
    fake.default("w2", Reply("**4** is the answer.", usage=(40, 5)))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "What is 2+2?")
        await wait_for(pilot, finished(app), what="the run to finish")
        await pilot.pause(0.1)
        screen = app.chat_screen
        text = "\n".join(labels(screen.tree))
        assert "What is 2+2?" in text
        assert "Round 1" in text and "Plan  2 steps" in text
        assert "✓ 1 w1" in text and "11→6 tok" in text and "$0.000023" in text  # 11*1 + 6*2 per 1M
        assert "✓ 2 w2  ← 1" in text and "40→5 tok" in text
        assert "Outline the approach" in text
        answers = list(screen.query(AnswerView))
        assert answers[-1].text == "**4** is the answer."
        totals = str(screen.status_bar.query_one("#status-totals").render())
        assert "tok" in totals and "$0.0" in totals
        conductor = str(screen.status_bar.query_one("#status-conductor").render())
        assert "remote" in conductor and "cond" in conductor
        # The step pane follows the first step, and selecting another step shows its output.
        await wait_for(pilot, lambda: screen.detail.key is not None, what="the step pane")
        screen.tree.move_cursor(screen.tree.node_for(("step", 1, 1)))
        await wait_for(pilot, lambda: screen.detail.key == ("step", 1, 1), what="step 1 selected")
        assert screen.detail.text == "**4** is the answer."
        # Stored: a conversation with both turns, the run finished with its steps.
        conv = runtime.store.get_conversation(screen.conversation_id)
        assert [m.role for m in conv.messages] == ["user", "assistant"]
        assert conv.kind == "chat" and conv.runs[0].status == "finished" and conv.runs[0].source == "tui"
        assert [s.model for s in conv.runs[0].rounds[0].steps] == ["w1", "w2"]


async def test_step_streams_into_the_pane_while_running(fake, setup):
    script_plan(fake)
    # A wide window (about 4 s of streaming) so a loaded machine still catches the step running.
    words = " ".join(f"word{i}" for i in range(100))
    fake.default("w1", Reply(words, chunk_delay_s=0.04))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Stream please")
        screen = app.chat_screen
        await wait_for(
            pilot,
            lambda: (
                screen.detail.key == ("step", 1, 0)
                and "word10" in screen.detail.text
                and screen.live.state.step(1, 0).status == "running"
            ),
            what="the running step to stream",
        )
        assert any("⠋" in label or "~" in label for label in labels(screen.tree))  # running: spinner and live tokens
        await wait_for(pilot, finished(app), what="the run to finish")
        await pilot.pause(0.1)
        assert screen.detail._stream is None
        assert screen.detail.text == words


async def test_escape_cancels_and_the_run_stays_in_history(fake, setup):
    script_plan(fake)
    fake.default("w1", Reply(" ".join(["slow"] * 400), chunk_delay_s=0.02))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "A long one")
        screen = app.chat_screen
        await wait_for(
            pilot,
            lambda: (
                screen.live.state.rounds
                and screen.live.state.rounds[0].steps
                and screen.live.state.step(1, 0).streamed_chars > 20
            ),
            what="step 0 streaming",
        )
        await pilot.press("escape")
        await wait_for(pilot, finished(app, "cancelled"), what="the cancel")
        await pilot.pause(0.1)
        assert "cancelled" in "\n".join(labels(screen.tree))
        run_id = screen.live.state.run_id
        trace = runtime.store.get_trace(run_id)
        assert trace.status == "cancelled"
        partial = trace.rounds[0].steps[0].output
        assert partial.startswith("slow") and len(partial) < len(" ".join(["slow"] * 400))
        assert list(screen.query(AnswerView))[-1].has_class("-cancelled")
        # The app keeps working: a new question runs, in the same conversation.
        cid = screen.conversation_id
        assert cid is not None and trace.conversation_id == cid
        fake.default("w1", Reply("quick"))
        script_plan(fake)
        await ask(pilot, "Again")
        await wait_for(pilot, finished(app), what="the second run")
        assert screen.conversation_id == cid
        assert len(runtime.store.get_conversation(cid).runs) == 2


def _answers(screen) -> list[tuple[str, bool, str]]:
    """Each answer block shown: its header, whether it is marked cancelled, its Markdown."""
    from textual.widgets import Markdown

    return [(a._header, a.has_class("-cancelled"), a.query_one(Markdown).source) for a in screen.query(AnswerView)]


@pytest.mark.parametrize("when", ["planning", "mid-way"])
async def test_a_cancelled_turn_shows_as_cancelled_and_reopens_as_it_was(fake, setup, when):
    """Cancelled while the conductor plans, the plan is no finished plan of "0 steps"; cancelled
    mid-way, its steps are cancelled. Reopened from the history, the chat shows the cancelled
    block as it was shown live, under its question."""
    if when == "planning":
        script_plan(fake, chunk_delay_s=0.05)
    else:
        script_plan(fake)
        fake.default("w1", Reply(" ".join(["slow"] * 400), chunk_delay_s=0.02))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "A long one")
        screen = app.chat_screen
        state = screen.live.state
        if when == "planning":
            await wait_for(pilot, lambda: state.rounds and len(state.rounds[0].conductor_text) > 5, what="planning")
        else:
            await wait_for(
                pilot,
                lambda: state.rounds and state.rounds[0].steps and state.step(1, 0).streamed_chars > 20,
                what="step 0 streaming",
            )
        await pilot.press("escape")
        await wait_for(pilot, finished(app, "cancelled"), what="the cancel")
        await pilot.pause(0.1)
        live = _answers(screen)
        (header, cancelled, note) = live[-1]
        assert cancelled and note.startswith("_Cancelled.") and header.endswith(" · cancelled")
        assert "0 steps" not in header and "0 steps" not in "\n".join(labels(screen.tree))
        if when == "planning":
            assert header.startswith("Stiva · no plan · ")
        else:
            assert header.startswith("Stiva · 2 steps · ")
        live_tree = labels(screen.tree)
        cid = screen.conversation_id
        await pilot.press("ctrl+n")
        await pilot.pause(0.1)
        await screen.load_conversation(cid)
        await pilot.pause(0.1)
        assert screen.conversation.questions == ["A long one"]
        assert _answers(screen) == live
        # the plan's estimate before its calls is shown live, and not kept in the history
        assert labels(screen.tree)[:3] == [re.sub(r"  est \$\S+", "", line) for line in live_tree[:3]]


async def test_stream_cut_shows_failure_and_fallback_then_keeps_working(fake, setup):
    script_plan(fake)
    fake.script("w1", Reply("this stream will be cut off half way through", fault="cut"))
    fake.default("w2", Reply("fallback answer"))
    config, runtime = await setup(workers={"retries": 0, "fallbacks": ["w2"], "timeout_s": 10})
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Will it survive?")
        await wait_for(pilot, finished(app), what="the run to finish on the fallback")
        await pilot.pause(0.1)
        screen = app.chat_screen
        text = "\n".join(labels(screen.tree))
        assert "↻ fallback from w1" in text
        assert "✗ w1 attempt 1" in text and "→ w2" in text
        assert "✓ 1 w2" in text
        assert list(screen.query(AnswerView))[-1].text == "fallback answer"
        # Ask again: the app still works.
        script_plan(fake)
        fake.default("w1", Reply("fine now"))
        await ask(pilot, "And now?")
        await wait_for(pilot, lambda: len(messages(runtime, screen)) == 4, what="the second turn")


async def test_failed_run_is_shown_and_app_recovers(fake, setup):
    script_plan(fake)
    fake.script("w1", Reply(status=500, error_message="boom"))
    config, runtime = await setup(workers={"retries": 0, "fallbacks": ["w1"], "timeout_s": 10})
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Fail please")
        await wait_for(pilot, finished(app, "failed"), what="the failure")
        await pilot.pause(0.1)
        screen = app.chat_screen
        assert "✗ 1 w1" in "\n".join(labels(screen.tree))
        assert list(screen.query(AnswerView))[-1].has_class("-failed")
        assert [m.role for m in messages(runtime, screen)] == ["user"]  # no answer recorded


async def test_multi_turn_passes_the_conversation(fake, setup):
    script_plan(fake)
    fake.default("w1", Reply("outline"))
    fake.default("w2", Reply("Paris is the capital of France."))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "What is the capital of France?")
        await wait_for(pilot, finished(app), what="first turn")
        script_plan(fake)
        fake.default("w2", Reply("About 2.1 million people."))
        await ask(pilot, "How many people live there?")
        await wait_for(pilot, lambda: len(messages(runtime, app.chat_screen)) == 4, what="second turn")
        last_plan = fake.requests_for("cond")[-1]
        shown = json.dumps(last_plan.messages)
        assert "What is the capital of France?" in shown
        assert "Paris is the capital of France." in shown
        assert "How many people live there?" in shown
        cid = app.chat_screen.conversation_id
        conv = runtime.store.get_conversation(cid)
        assert [m.role for m in conv.messages] == ["user", "assistant", "user", "assistant"]
        assert len(conv.runs) == 2 and all(r.conversation_id == cid for r in conv.runs)


async def test_new_chat_and_reload_from_history(fake, setup):
    script_plan(fake)
    fake.default("w2", Reply("stored answer"))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Remember me")
        await wait_for(pilot, finished(app), what="the run")
        screen = app.chat_screen
        cid = screen.conversation_id
        await pilot.press("ctrl+n")
        await pilot.pause(0.1)
        assert screen.conversation_id is None and not list(screen.query(AnswerView))
        await screen.load_conversation(cid)
        await pilot.pause(0.1)
        assert screen.conversation_id == cid
        assert [a.text for a in screen.query(AnswerView)] == ["stored answer"]
        text = "\n".join(labels(screen.tree))
        assert "Remember me" in text and "✓ 1 w1" in text and "✓ 2 w2  ← 1" in text
        assert screen.live.state.status == "finished" and screen.tree.state is screen.live.state
        # A follow-up continues the reopened conversation, with its earlier turns.
        script_plan(fake)
        fake.default("w2", Reply("follow-up answer"))
        await ask(pilot, "And then?")
        await wait_for(pilot, lambda: len(messages(runtime, screen)) == 4, what="the follow-up")
        assert "stored answer" in json.dumps(fake.requests_for("cond")[-1].messages)


async def test_export_and_copy(fake, setup, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("STIVA_NO_SYSTEM_CLIPBOARD", "1")
    script_plan(fake)
    fake.default("w2", Reply("exported answer"))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    copied = []
    app.copy_to_clipboard = copied.append  # the OSC 52 fallback
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Export me")
        await wait_for(pilot, finished(app), what="the run")
        await pilot.pause(0.1)
        await pilot.press("f7")
        await pilot.pause(0.1)
        await pilot.press("f8")
        await pilot.pause(0.1)
        md = list(tmp_path.glob("stiva-export-me-*.md"))
        js = list(tmp_path.glob("stiva-export-me-*.json"))
        assert md and js
        assert "exported answer" in md[0].read_text()
        data = json.loads(js[0].read_text())
        assert data["runs"][0]["rounds"][0]["steps"][1]["output"] == "exported answer"
        await pilot.press("f9")
        assert copied == ["exported answer"]


async def test_question_before_the_conductor_loads_waits_and_says_so(fake, setup):
    script_plan(fake)
    config, runtime = await setup(load_conductor=False)
    gate = asyncio.Event()
    choose_and_load = runtime._choose_and_load

    async def slow_load(cfg, progress):  # the real remote conductor, once the gate opens
        progress(0.5, "loading the conductor")
        await gate.wait()
        return await choose_and_load(cfg, progress)

    runtime._choose_and_load = slow_load
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.chat_screen
        status = screen.status_bar
        await wait_for(
            pilot,
            lambda: (
                status.load_shown
                and getattr(status, "_cover_widget", None) is None
                and status.query_one("#status-progress").display
            ),
            what="the load progress",
        )
        assert status.load_fraction == 0.5 and status.load_message == "loading the conductor"
        assert "conductor: loading" in str(status.query_one("#status-conductor").render())
        await ask(pilot, "Early bird")
        await wait_for(
            pilot,
            lambda: "Waiting for the conductor" in str(list(screen.query(AnswerView))[-1].query_one("Markdown").source),
            what="the waiting note",
        )
        # Typing still works while it loads.
        screen.query_one("#prompt").insert("typing meanwhile")
        assert screen.query_one("#prompt").text == "typing meanwhile"
        gate.set()
        await wait_for(pilot, finished(app), what="the run after the load")
        assert not status.load_shown and not status.query_one("#status-progress").display
        assert status.conductor is not None and status.conductor.model == "cond"


async def test_start_up_and_a_question_as_typed_messages(fake):
    """The app builds its own runtime from the config: the whole start-up is in the message flow."""
    from stiva_tui.tui import messages as msg
    from stiva_tui.tui.widgets.prompt_input import PromptInput

    script_plan(fake)
    fake.default("w1", Reply("outline"))
    fake.default("w2", Reply("Four."))
    app = StivaApp(make_test_config(fake))
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, msg.ConductorReady) for m in seen), what="the conductor")
        await ask(pilot, "What is 2+2?")
        await wait_for(pilot, lambda: any(isinstance(m, msg.RunEnded) for m in seen), what="the end of the run")
        store = app.runtime.store
        conversation = store.get_conversation(app.chat_screen.conversation_id)
    kinds = (
        msg.RuntimeReady,
        msg.StartupFailed,
        msg.ConductorProgress,
        msg.ConductorReady,
        msg.ConductorFailed,
        PromptInput.Submitted,
        msg.RunEnded,
        msg.OpenCompare,
    )
    flow = list({id(m): m for m in seen if isinstance(m, kinds)}.values())  # a bubbling one is seen twice
    assert [type(m).__name__ for m in flow] == ["RuntimeReady", "ConductorReady", "Submitted", "RunEnded"]
    runtime_ready, conductor_ready, submitted, ended = flow
    assert runtime_ready.runtime is app.runtime
    assert (conductor_ready.backend, conductor_ready.model) == ("remote", "cond")
    assert "config" in conductor_ready.reason
    assert submitted.text == "What is 2+2?"
    assert ended.status == "finished" and ended.conversation_id == conversation.id
    assert ended.run_id == conversation.runs[0].run_id and conversation.runs[0].answer == "Four."
    assert app.runtime is None or app.runtime.store.closed  # the app closed the runtime it built


async def test_startup_failure_is_a_message_and_a_question_says_why(fake):
    from stiva_tui.tui import messages as msg

    app = StivaApp(make_test_config(fake), conductor="no-such-backend")
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, msg.StartupFailed) for m in seen), what="the failure")
        screen = app.chat_screen
        assert "cannot start" in str(screen.status_bar.query_one("#status-conductor").render())
        await ask(pilot, "Anyone there?")
        await wait_for(pilot, lambda: any(isinstance(m, msg.RunEnded) for m in seen), what="the refusal")
        answer = list(screen.query(AnswerView))[-1]
        assert answer.has_class("-failed") and "Cannot run" in answer.query_one("Markdown").source
    assert not any(isinstance(m, (msg.RuntimeReady, msg.ConductorReady)) for m in seen)
    assert [m.status for m in seen if isinstance(m, msg.RunEnded)][0] == "not run"


async def test_conductor_failure_is_a_message_and_the_app_stays_usable(fake, setup):
    from stiva_tui.tui import messages as msg

    # A local conductor on a machine without a CUDA GPU cannot run: it fails when it is chosen.
    config, runtime = await setup(load_conductor=False, conductor={"backend": "local", "model": "/nowhere/model"})
    app = StivaApp(config, runtime=runtime)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await wait_for(pilot, lambda: any(isinstance(m, msg.ConductorFailed) for m in seen), what="the failure")
        failed = next(m for m in seen if isinstance(m, msg.ConductorFailed))
        assert "the local conductor cannot run" in failed.error
        screen = app.chat_screen
        assert "conductor failed to load" in str(screen.status_bar.query_one("#status-conductor").render())
        await ask(pilot, "Plan this")
        await wait_for(pilot, lambda: any(isinstance(m, msg.RunEnded) for m in seen), what="the refusal")
        answer = list(screen.query(AnswerView))[-1]
        assert "the local conductor cannot run" in answer.query_one("Markdown").source
        await pilot.press("f4")  # the other screens open all the same
        await pilot.pause(0.1)
        from stiva_tui.tui.screens.pool import PoolScreen

        assert isinstance(app.screen, PoolScreen)


async def test_first_run_notice_with_only_the_embedded_model(setup_embedded_only):
    app = setup_embedded_only
    async with app.run_test(size=SIZE) as pilot:
        notice = app.chat_screen.query_one("#notice")
        await wait_for(pilot, lambda: notice.display, what="the notice")
        assert "No API keys found" in str(notice.render()) and "stiva config" in str(notice.render())
        await pilot.press("ctrl+g")  # it can be dismissed, for good
        await pilot.pause()
        assert not notice.display
        from stiva_tui.tui.state import load_state

        assert load_state()["first_run_notice_hidden"] is True


def test_stiva_config_creates_a_valid_commented_file_once_and_never_overwrites(tmp_path, stiva_home):
    from pathlib import Path

    from stiva_tui.config import load_config
    from tests.support.cli import run_stiva

    target = tmp_path / "conf" / "config.toml"
    first = run_stiva("config", "--config", str(target))
    assert first.returncode == 0 and first.stdout.strip() == str(target) and "created" in first.stderr
    from stiva_tui.config import Config

    assert load_config(target) == Config()  # every line commented out: the defaults, and valid
    target.write_text('theme = "mine"\n')
    again = run_stiva("config", "--config", str(target))
    assert again.returncode == 0 and target.read_text() == 'theme = "mine"\n' and "created" not in again.stderr
    default = run_stiva("config")
    assert default.returncode == 0 and Path(default.stdout.strip()).is_file()  # in STIVA_HOME


async def test_a_model_the_config_names_but_cannot_use_is_a_warning(stiva_home):
    from stiva_tui.config import parse_config
    from stiva_tui.runtime import Runtime

    config = parse_config({"discovery": {"enabled": False}, "workers": {"fallbacks": ["openai/gpt-5"]}})
    runtime = await Runtime.create(config, discover=False)

    async def no_load(progress=None):  # never load torch in this test
        raise RuntimeError("not loading the embedded model in tests")

    runtime.ensure_conductor = no_load
    app = StivaApp(config, runtime=runtime)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(
                pilot, lambda: any("openai/gpt-5" in n.message for n in app._notifications), what="the warning"
            )
            (note,) = [n for n in app._notifications if "openai/gpt-5" in n.message]
            assert "workers.fallbacks" in note.message and "no key" in note.message
            assert note.severity == "warning"
    finally:
        await runtime.aclose()


@pytest.fixture
async def setup_embedded_only():
    from stiva_tui.config import parse_config
    from stiva_tui.runtime import Runtime

    config = parse_config({"discovery": {"enabled": False}, "catalog": False})
    runtime = await Runtime.create(config, discover=False)

    async def no_load(progress=None):  # never load torch in this test
        raise RuntimeError("not loading the embedded model in tests")

    runtime.ensure_conductor = no_load
    yield StivaApp(config, runtime=runtime)
    await runtime.aclose()


# --- themes, keys, help, palette ------------------------------------------------------------------


async def test_themes_load_switch_and_are_remembered(fake, setup):
    from stiva_tui.tui.state import load_state

    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        assert {"stiva-dark", "stiva-light", "stiva-high-contrast"} <= set(app.available_themes)
        assert app.theme == "stiva-dark"
        app.theme = "stiva-light"
        await pilot.pause()
        assert app.theme_variables["background"].upper() == "#F7F7F4"
    assert load_state()["theme"] == "stiva-light"
    again = StivaApp(config, runtime=runtime)
    async with again.run_test(size=SIZE):
        assert again.theme == "stiva-light"
    # The config's theme wins over the remembered one.
    chosen = StivaApp(config.model_copy(update={"theme": "stiva-high-contrast"}), runtime=runtime)
    async with chosen.run_test(size=SIZE):
        assert chosen.theme == "stiva-high-contrast"


async def test_theme_picker_in_the_palette_lists_stiva_themes(fake, setup):
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        app.action_change_theme()
        await pilot.pause()
        await pilot.press(*"high-contrast")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.theme == "stiva-high-contrast"


async def test_keymap_remaps_send(fake, setup):
    script_plan(fake)
    config, runtime = await setup(keymap={"send": "ctrl+s", "help": "f12"})
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        prompt = app.chat_screen.query_one("#prompt")
        prompt.insert("remapped")
        await pilot.press("ctrl+j")  # no longer sends
        await pilot.pause(0.1)
        assert app.chat_screen.live.state.status == "idle"
        await pilot.press("ctrl+s")
        await wait_for(pilot, finished(app), what="the run sent with ctrl+s")
        await pilot.press("f12")
        await pilot.pause(0.1)
        from stiva_tui.tui.screens.help import HelpScreen

        assert isinstance(app.screen, HelpScreen)
        rows = [
            app.screen.query_one("DataTable").get_row_at(i) for i in range(app.screen.query_one("DataTable").row_count)
        ]
        send = next(r for r in rows if r[2] == "send")
        assert "ctrl+s" in send[0]
        # every hint says the live keys: the prompt's placeholder too
        placeholder = str(app.chat_screen.query_one("#prompt").placeholder)
        assert "ctrl+s sends" in placeholder and "ctrl+j" not in placeholder


async def test_the_compare_hint_follows_a_remapped_send(fake, setup):
    from textual.widgets import Static

    config, runtime = await setup(keymap={"compare.send": "ctrl+s"})
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        app.action_compare(None)
        await pilot.pause(0.2)
        hint = str(app.screen.query_one("#compare-hint", Static).render())
        assert hint.startswith("ctrl+s or alt+enter send") and "ctrl+j" not in hint


def test_a_keymap_id_no_binding_has_is_one_line_and_exit_2(tmp_path, stiva_home):
    import subprocess
    import sys
    from pathlib import Path

    config = tmp_path / "c.toml"
    config.write_text('[keymap]\nsned = "ctrl+s"\n')
    done = subprocess.run(
        [str(Path(sys.executable).parent / "stiva"), "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "no key binding has the id 'sned'" in done.stderr and "send" in done.stderr


async def test_help_lists_every_binding_and_question_mark_types_in_the_prompt(fake, setup):
    from stiva_tui.tui.screens.help import HelpScreen

    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")  # the prompt has focus: it types
        await pilot.pause()
        assert app.chat_screen.query_one("#prompt").text == "?"
        await pilot.press("f1")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("DataTable")
        ids = {table.get_row_at(i)[2] for i in range(table.row_count)}
        assert {
            "send",
            "cancel",
            "new_chat",
            "history",
            "export_markdown",
            "export_json",
            "copy_answer",
            "copy_step",
            "help",
            "compare",
            "pool",
            "keys",
            "leaderboard",
            "quit",
        } <= ids
        assert all(table.get_row_at(i)[3] for i in range(table.row_count))  # every one has a tooltip
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        # With the tree focused, `?` opens the help.
        app.chat_screen.tree.focus()
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)


async def test_help_lists_the_keys_of_the_screen_it_is_opened_from_with_nothing_cut(fake, setup):
    from textual.widgets import Static

    from stiva_tui.tui.screens.help import HelpScreen

    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f12")  # the bench screen
        await pilot.pause(0.1)
        await pilot.press("f1")
        await pilot.pause(0.1)
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("DataTable")
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert {"bench.open", "help", "quit"} <= {r[2] for r in rows}
        assert "bench screen" in str(app.screen.query_one("#help-title", Static).render())
        # the hint keeps its brackets: "[keymap]" is the config's table, not markup
        assert "[keymap]" in str(app.screen.query_one("#help-hint", Static).render())
        # a description longer than its column is folded over more lines, not cut
        from stiva_tui.tui.screens.help import DESCRIPTION_WIDTH

        long_rows = [key for key, row in zip(table.rows, rows) if len(str(row[3])) > DESCRIPTION_WIDTH]
        assert long_rows and all(table.rows[key].height > 1 for key in long_rows)


async def test_every_binding_has_an_id_and_tooltip():
    from stiva_tui.tui.screens.chat import ChatScreen
    from stiva_tui.tui.widgets.prompt_input import PromptInput

    for owner in (StivaApp, ChatScreen, PromptInput):
        for binding in owner.BINDINGS:
            assert binding.id and binding.tooltip, (owner.__name__, binding)


async def test_palette_offers_the_apps_commands(fake, setup):
    script_plan(fake)
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Before the new chat")
        await wait_for(pilot, finished(app), what="the run")
        await pilot.press("ctrl+p")
        await pilot.pause(0.1)
        await pilot.press(*"new chat")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.chat_screen.conversation_id is None, what="a new chat")
        assert not list(app.chat_screen.query(AnswerView))


async def test_history_reopens_a_compare_session_in_compare_mode(fake, setup):
    from stiva_tui.tui import messages as msg
    from stiva_tui.tui.screens.compare import CompareScreen
    from stiva_tui.tui.widgets.history import HistorySidebar

    config, runtime = await setup()
    store = runtime.store
    session = store.create_compare_session("Which is faster?")
    store.add_compare_entry(session, "w1", record_run(store, "Which is faster?", "w1 is", system="direct:w1"))
    app = StivaApp(config, runtime=runtime)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await pilot.press("f2")
        sidebar = app.chat_screen.query_one(HistorySidebar)
        await wait_for(
            pilot,
            lambda: sidebar.display and ("compare", session) in [(i.kind, i.id) for i in sidebar.items],
            what="the compare session listed",
        )
        await pilot.press("enter")  # from the search box to the list
        await pilot.press("enter")  # open the highlighted (newest) entry
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="compare mode")
        assert app.screen.session_id == session
        await wait_for(pilot, lambda: app.screen.columns and app.screen.columns[0].finished, what="the column")
        assert app.screen.columns[0].answer == "w1 is"
    assert [m.session_id for m in seen if isinstance(m, msg.OpenCompare)][0] == session


async def test_send_right_after_typing_keeps_every_character(fake, setup):
    # Keys arrive in one burst, as from a fast typist or tmux send-keys: ctrl+j must not overtake
    # the characters typed just before it.
    script_plan(fake)
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        prompt = app.chat_screen.query_one("#prompt")
        prompt.focus()
        await pilot.pause()
        for key in "17*23?":
            app.post_message(events.Key(key, key))
        app.post_message(events.Key("ctrl+j", None))
        await wait_for(pilot, finished(app), what="the run")
        assert app.chat_screen.live.state.question == "17*23?"


async def test_the_palettes_screenshot_works_without_a_downloads_folder_and_says_where(fake, setup, stiva_home):
    from stiva_tui import paths

    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.action_screenshot(filename="shot.svg")
        await pilot.pause()
        target = paths.data_dir() / "screenshots" / "shot.svg"  # no ~/Downloads in this home
        assert target.read_text().startswith("<svg")
        assert any(str(target) in str(n.message) for n in app._notifications)


async def test_compare_starts_from_the_chats_question(fake, setup):
    from textual.widgets import TextArea

    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        app.chat_screen.query_one("#prompt").insert("Which is faster, A or B?")
        await pilot.press("f3")
        await pilot.pause(0.2)
        assert app.screen.query_one("#compare-question", TextArea).text == "Which is faster, A or B?"


# --- the keyboard flow: prompt history, regenerate, edit-and-resend, enter_sends, the footer -------


def _questions(runtime, screen) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages(runtime, screen)]


async def test_up_and_down_in_an_empty_prompt_walk_the_earlier_questions(fake, setup):
    script_plan(fake)
    fake.default("w2", Reply("an answer"))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        for question in ("First question", "Second question"):
            script_plan(fake)
            await ask(pilot, question)
            await wait_for(pilot, finished(app), what=question)
        prompt = app.chat_screen.prompt
        prompt.focus()
        await pilot.press("up")
        assert prompt.text == "Second question"
        await pilot.press("up", "up")  # the oldest stays
        assert prompt.text == "First question"
        await pilot.press("down")
        assert prompt.text == "Second question"
        await pilot.press("down")
        assert prompt.text == ""
        await pilot.press("up", "!")  # a recalled question that is changed is the user's text:
        await pilot.press("up")  # the arrows move the cursor in it
        assert prompt.text == "Second question!"
        # A new chat still walks the session's questions.
        prompt.clear()
        await pilot.press("ctrl+n")
        await pilot.pause()
        await pilot.press("up")
        assert app.chat_screen.prompt.text == "Second question"


async def test_regenerate_asks_the_last_question_again_in_place_of_its_answer(fake, setup):
    script_plan(fake)
    fake.default("w2", Reply("a poor answer"))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await ask(pilot, "Name a colour")
        await wait_for(pilot, finished(app), what="the first answer")
        screen = app.chat_screen
        first_run = screen.live.state.run_id
        script_plan(fake)
        fake.default("w2", Reply("Blue."))
        await pilot.press("ctrl+r")
        await wait_for(
            pilot, lambda: _questions(runtime, screen)[-1:] == [("assistant", "Blue.")], what="the regenerated answer"
        )
        await wait_for(pilot, finished(app), what="the second run to end")
        assert _questions(runtime, screen) == [("user", "Name a colour"), ("assistant", "Blue.")]
        assert [a.text for a in screen.query(AnswerView)] == ["Blue."] and screen.conversation.questions == [
            "Name a colour"
        ]
        assert "a poor answer" not in json.dumps(fake.requests_for("cond")[-1].messages)
        assert runtime.store.get_trace(first_run).conversation_id is None  # kept in the run history
        from stiva_tui.tui import messages as msg

        ended = list({id(m): m for m in seen if isinstance(m, msg.RunEnded)}.values())
        assert [m.status for m in ended] == ["finished", "finished"]
        assert ended[0].conversation_id == ended[1].conversation_id == screen.conversation_id


async def test_edit_and_resend_replaces_a_question_and_every_later_turn(fake, setup):
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        for question, reply in (("Capital of Frnace?", "Unclear."), ("And its river?", "Unclear too.")):
            script_plan(fake)
            fake.default("w2", Reply(reply))
            await ask(pilot, question)
            await wait_for(pilot, finished(app), what=question)
        screen = app.chat_screen
        prompt = screen.prompt
        await pilot.press("ctrl+o")
        assert (prompt.editing, prompt.text) == (1, "And its river?")
        assert "Editing question 2" in str(prompt.border_title)
        await pilot.press("ctrl+o")  # again: the question before
        assert (prompt.editing, prompt.text) == (0, "Capital of Frnace?")
        assert screen.conversation.question(0).has_class("-editing")
        await pilot.press("escape")  # leaves, changing nothing
        assert (
            prompt.editing is None and prompt.text == "" and not screen.conversation.question(0).has_class("-editing")
        )
        await pilot.press("ctrl+o", "ctrl+o")
        prompt.load_text("Capital of France?")
        script_plan(fake)
        fake.default("w2", Reply("Paris."))
        await pilot.press("ctrl+j")
        await wait_for(
            pilot,
            lambda: _questions(runtime, screen)[-1:] == [("assistant", "Paris.")],
            what="the edited question's answer",
        )
        await wait_for(pilot, finished(app), what="the run to end")
        assert _questions(runtime, screen) == [("user", "Capital of France?"), ("assistant", "Paris.")]
        assert screen.conversation.questions == ["Capital of France?"]
        planner = json.dumps(fake.requests_for("cond")[-1].messages)
        assert "And its river?" not in planner and "Frnace" not in planner
        assert prompt.editing is None


async def test_enter_sends_when_the_config_says_so(fake, setup):
    from stiva_tui.tui.widgets.prompt_input import PromptInput

    script_plan(fake)
    config, runtime = await setup(enter_sends=True)
    app = StivaApp(config, runtime=runtime)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        prompt = app.chat_screen.prompt
        assert "enter sends, alt+enter adds a line" in str(prompt.placeholder)
        prompt.focus()
        await pilot.press(*"two", "alt+enter", *"lines")
        assert prompt.text == "two\nlines"
        await pilot.press("enter")
        await wait_for(pilot, finished(app), what="the run sent with enter")
        sent = [m.text for m in seen if isinstance(m, PromptInput.Submitted)]
        assert sent[:1] == ["two\nlines"]


async def test_enter_adds_a_line_by_default(fake, setup):
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        prompt = app.chat_screen.prompt
        prompt.focus()
        await pilot.press(*"one", "enter", *"two")
        assert prompt.text == "one\ntwo" and app.chat_screen.live.state.status == "idle"


async def test_the_footer_keeps_help_in_sight_at_80_columns(fake, setup):
    from textual.widgets._footer import FooterKey

    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)

    def shown_keys() -> list:
        return [k for k in app.screen.query(FooterKey) if k.region.width]

    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, shown_keys, what="the chat screen's footer")
        first = min(shown_keys(), key=lambda k: k.region.x)
        assert first.action == "help" and first.region.right <= 80
        app.action_bench()
        await wait_for(pilot, lambda: app.screen is not app.chat_screen and shown_keys(), what="the bench footer")
        assert min(shown_keys(), key=lambda k: k.region.x).action == "help"


async def test_ctrl_keys_stand_in_for_the_f_keys_terminals_take(fake, setup, monkeypatch):
    from stiva_tui.tui.screens.bench import BenchScreen

    monkeypatch.setenv("STIVA_NO_SYSTEM_CLIPBOARD", "1")
    script_plan(fake)
    fake.default("w2", Reply("step output"))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    copied: list = []
    app.copy_to_clipboard = copied.append
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Copy a step")
        await wait_for(pilot, finished(app), what="the run")
        await pilot.pause(0.1)
        app.chat_screen.tree.focus()
        await pilot.press("ctrl+t")  # f10
        assert copied and copied[-1]
        await pilot.press("ctrl+l")  # f12
        await wait_for(pilot, lambda: isinstance(app.screen, BenchScreen), what="the bench screen")


async def test_the_sidebar_renames_and_deletes_the_chat_on_screen(fake, setup):
    from textual.widgets import OptionList

    from stiva_tui.tui.dialogs import ConfirmDialog, TitleDialog
    from stiva_tui.tui.widgets.history import HistorySidebar

    script_plan(fake)
    fake.default("w2", Reply("kept"))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        await ask(pilot, "A chat to tidy up")
        await wait_for(pilot, finished(app), what="the run")
        screen = app.chat_screen
        cid, run_id = screen.conversation_id, screen.live.state.run_id
        await pilot.press("f2")
        await wait_for(pilot, lambda: screen.query(HistorySidebar), what="the sidebar")
        sidebar = screen.query_one(HistorySidebar)
        assert sidebar.items[0].source == "app" and sidebar.items[0].status == "finished"
        sidebar.query_one(OptionList).focus()
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, TitleDialog), what="the title dialog")
        await pilot.press(*"Tidy", "enter")  # the old title is selected: typing replaces it
        await wait_for(pilot, lambda: runtime.store.get_conversation(cid).title == "Tidy", what="the rename")
        await pilot.press("delete")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the confirmation")
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.conversation_id is None, what="a new chat in its place")
        assert runtime.store.list_conversations() == [] and runtime.store.get_trace(run_id).run_id == run_id
        assert not screen.conversation.questions and sidebar.items == []
        changes = {id(m): m for m in seen if isinstance(m, (HistorySidebar.Renamed, HistorySidebar.Deleted))}
        assert [type(m).__name__ for m in changes.values()] == ["Renamed", "Deleted"]  # one each, at every hop


async def test_the_palette_regenerates_the_last_answer(fake, setup):
    script_plan(fake)
    fake.default("w2", Reply("first try"))
    config, runtime = await setup()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Try twice")
        await wait_for(pilot, finished(app), what="the first run")
        script_plan(fake)
        fake.default("w2", Reply("second try"))
        await pilot.press("ctrl+p")
        await pilot.pause(0.1)
        await pilot.press(*"regenerate")
        await pilot.pause(0.5)
        await pilot.press("enter")
        screen = app.chat_screen
        await wait_for(
            pilot,
            lambda: _questions(runtime, screen) == [("user", "Try twice"), ("assistant", "second try")],
            what="the regenerated answer",
        )


async def test_help_lists_the_new_keys_with_their_ids(fake, setup):
    from stiva_tui.tui.screens.help import binding_rows

    config, runtime = await setup(keymap={"regenerate": "ctrl+b"})
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE):
        rows = {row[2]: row[0] for row in binding_rows(app, app.chat_screen)}
        assert rows["regenerate"] == "ctrl+b" and rows["edit_question"] == "ctrl+o"
        assert rows["copy_step"] == "f10, ctrl+t" and rows["bench"] == "f12, ctrl+l"
        assert rows["history.rename"] == "r" and rows["history.delete"] == "delete, d"  # before F2 too

"""Nothing a provider, a model or a local server sends reaches the terminal raw (issue 40, part 6).

A scripted provider (real HTTP on 127.0.0.1) answers with OSC 2 (retitle the terminal), OSC 52
(fill the clipboard), CSI (clear the screen), DCS, 8-bit C1 and bidi overrides, under a model id
that holds escapes too; the real app runs it. What the app would write to the terminal for the
whole screen is then read back: it holds none of those sequences, and the words around them are
still there. The same for a stored run reopened from the history, for compare mode, for the F4
pool screen, and for a widget that forgot to clean its text (the app's last line of defence).
"""

from __future__ import annotations

import re

import pytest
from rich.text import Text
from textual.widgets import Static

from stiva_tui.core import events as ev
from stiva_tui.core.terminal import printable, scrub
from stiva_tui.tui.app import StivaApp
from tests.support.fakeprovider import Reply
from tests.support.tui import ask, make_runtime, make_test_config, script_plan, wait_for

SIZE = (150, 46)
OSC_TITLE = "\x1b]2;owned title\x07"
OSC_CLIPBOARD = "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # base64 of "echo pwned"
HOSTILE_ANSWER = (
    f"Hello {OSC_TITLE}world {OSC_CLIPBOARD}and \x1b[2J\x1b[?1049lred\x1b[31m text"
    " \x1bP1$qm\x1b\\still \x9b2Jhere \u202eevil\u202c done"
)
HOSTILE_OUTLINE = "Outline \x1b]0;second title\x1b\\first, \x1b[1;1Hthen the rest."
HOSTILE_ID = "evil\x1b]2;pwned-by-id\x07model"
PAYLOADS = ("owned title", "ZWNobyBwd25lZA", "second title", "pwned-by-id", "1$qm", "2J", "1049")
# What Textual itself writes around the text: colours (SGR), cursor moves, and OSC 8 links.
OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;]*[mH]|\x1b\]8;[^\x07\x1b]*\x1b\\")
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _render(app):
    screen = app.screen
    return screen._compositor.render_update(full=True, screen_stack=app._background_screens)


def terminal_output(app) -> str:
    """What the app writes to the terminal to draw its whole screen now."""
    return _render(app).render_segments(app.console)


def screen_text(app) -> str:
    """The characters on screen, line by line (no styles)."""
    return "\n".join("".join(segment.text for segment in strip) for strip in _render(app).strips)


def assert_terminal_safe(app, *words: str) -> str:
    """The screen holds no control character and no sequence but Textual's own, none of the
    hostile payloads, and every one of `words`; returns the screen's text."""
    out = terminal_output(app)
    leftover = OWN_SEQUENCES.sub("", out)
    assert not RAW.search(leftover), f"raw control characters reach the terminal: {RAW.findall(leftover)[:10]!r}"
    text = screen_text(app)
    assert not RAW.search(text.replace("\n", ""))
    for payload in PAYLOADS:
        assert payload not in text, f"{payload!r} is shown"
    for word in words:
        assert word in text, f"{word!r} is not on screen:\n{text}"
    return text


def clean(text: str) -> bool:
    return not RAW.search(text.replace("\n", ""))


# --- the stripping function ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, shown",
    [
        (f"a{OSC_TITLE}b", "ab"),
        (f"a{OSC_CLIPBOARD}b", "ab"),
        ("a\x1b]52;c;ZWNobw==\x1b\\b", "ab"),  # OSC ended by ST
        ("a\x1b]2;unterminated", "a"),  # what a terminal would swallow goes
        ("a\x1b[2Jb\x1b[?1049lc\x1b[38;5;196md", "abcd"),
        ("a\x1bP1$qm\x1b\\b", "ab"),  # DCS
        ("a\x1b_apc\x1b\\b\x1b^pm\x1b\\c", "abc"),  # APC, PM
        ("a\x9b2Jb\x9d0;t\x9cc\x90dcs\x9cd", "abcd"),  # 8-bit CSI, OSC, DCS
        ("a\x1b(Bb\x1bcc\x1b7d", "abcd"),  # charset, reset, save cursor
        ("a\x07b\x08c\x00d\x7fe\x85f", "abcdef"),
        ("\u202eevil\u202c \u2066x\u2069", "evil x"),
        ("lines\nand\ttabs stay; naïve 日本語 🎉", "lines\nand\ttabs stay; naïve 日本語 🎉"),
        # invisible characters (issue 56): zero-width, soft hyphen, word joiner, BOM, LRM, variation
        # selector, tag characters, Hangul filler
        ("k\u200be\u200cy\u200d!\u2060", "key!"),
        ("k\u00ade\ufeffy\u200e\u200f", "key"),
        ("k\ufe0fe\U000e0041y\U000e007f\u3164", "key"),
    ],
)
def test_printable_strips_every_kind_of_sequence(raw, shown):
    assert printable(raw) == shown


def test_printable_stream_cut_anywhere_gives_what_printable_gives_the_whole():
    """Every way of cutting texts of escapes, strings left open, 8-bit controls and invisible
    characters into pieces: the pieces made printable one by one join into printable(whole)."""
    import random

    from stiva_tui.core.terminal import PrintableStream

    alphabet = ["a", " ", "\n", "\x1b", "[", "]", "\\", "\x07", "\x9c", "\x9b", "\x9d", "\x90", "P", "_", "^", "X"]
    alphabet += ["(", "B", "0", ";", "1", "m", "\u200b", "\u00ad", "\u202e", "\ufeff"]
    rng = random.Random(56)
    for _ in range(5000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(1, 6))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        stream = PrintableStream()
        assert "".join(stream.feed(p) for p in pieces) + stream.flush() == printable(text), repr(pieces)


@pytest.mark.parametrize(
    "hostile",
    [
        "\x1b[31mx\x1b]0;t\x07" * 80_000,  # a 1 MB line woven with escapes
        "\u200b" * 100_000,
        "\x1b" * 1_000_000,
        "\x1b[" + "1;" * 500_000,  # one CSI's parameters, never ended
        "\x1b]0;" + "x" * 1_000_000,  # an OSC never ended
        "\x9d" * 1_000_000,
    ],
)
def test_printable_stream_holds_back_at_most_a_sequence_start_on_hostile_text(hostile):
    """No more than the start of one escape sequence waits for the next piece, and the pieces
    join into what printable makes of the whole (tests/test_server_hostile_text.py shows the time
    such text costs does not hold up `stiva serve`)."""
    from stiva_tui.core.terminal import PrintableStream

    stream = PrintableStream()
    shown = [stream.feed(hostile[i : i + 65_536]) for i in range(0, len(hostile), 65_536)]
    assert len(stream._held) <= PrintableStream.HOLD
    assert "".join(shown) + stream.flush() == printable(hostile)


def test_printable_keeps_its_old_import():
    from stiva_tui.cli.view import printable as old

    assert old is printable


def test_scrub_cleans_events_and_traces_without_changing_them():
    from stiva_tui.core.trace import Trace

    event = ev.StepFailed("r", 1, 0, HOSTILE_ID, f"500: {OSC_CLIPBOARD}bad gateway", 1, "w\x1b[2J2")
    cleaned = scrub(event)
    assert (cleaned.model, cleaned.error, cleaned.fallback) == ("evilmodel", "500: bad gateway", "w2")
    assert event.model == HOSTILE_ID  # the caller's event is untouched
    plain = ev.StepDelta("r", 1, 0, "nothing to clean")
    assert scrub(plain) is plain  # nothing copied when nothing changes
    trace = Trace(run_id="r", question=f"q{OSC_TITLE}?", answer=HOSTILE_ANSWER)
    cleaned_trace = scrub(trace)
    assert cleaned_trace.question == "q?" and clean(cleaned_trace.answer)
    assert trace.question == f"q{OSC_TITLE}?"


# --- the app ---------------------------------------------------------------------------------------


@pytest.fixture
async def hostile_app(fake):
    """A chat app whose pool holds a model with escapes in its id, which writes the first step
    (its output holds escapes); w2 writes the hostile answer."""
    fake.script(
        "cond", Reply('Two steps.\nmodel_id = [3, 2]\nsubtasks = ["Outline", "Answer"]\naccess_list = [[], [0]]')
    )
    fake.default(HOSTILE_ID, Reply(HOSTILE_OUTLINE))
    fake.default("w2", Reply(HOSTILE_ANSWER))
    config = make_test_config(
        fake,
        extra_models=[
            {"id": HOSTILE_ID, "provider": "fake", "model": HOSTILE_ID, "description": f"described {OSC_TITLE}here"}
        ],
    )
    runtime = await make_runtime(config)
    yield config, runtime
    await runtime.aclose()


def _finished(app):
    return lambda: app.chat_screen.live.state.status == "finished" and not app.chat_screen.running


async def test_hostile_answer_and_model_id_reach_the_chat_clean(hostile_app, monkeypatch):
    monkeypatch.setenv("STIVA_NO_SYSTEM_CLIPBOARD", "1")
    config, runtime = hostile_app
    app = StivaApp(config, runtime=runtime, frozen=True)
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, f"Say hello{OSC_TITLE}")
        await wait_for(pilot, _finished(app), what="the run to finish")
        await pilot.pause(0.2)
        screen = app.chat_screen
        # The answer, the tree (the hostile id on step 1) and the step pane on step 1.
        await wait_for(pilot, lambda: screen.detail.key == ("step", 1, 0), what="the step pane on step 1")
        await pilot.pause(0.1)
        assert_terminal_safe(
            app,
            "Hello",
            "world",
            "red",
            "still",
            "here",
            "evil",
            "done",
            "evilmodel",
            "Outline",
            "first",
            "then the rest",
        )
        # The last step, and what the copy keys put on the clipboard.
        screen.tree.move_cursor(screen.tree.node_for(("step", 1, 1)))
        await wait_for(pilot, lambda: screen.detail.key == ("step", 1, 1), what="step 2 selected")
        await pilot.pause(0.1)
        assert_terminal_safe(app, "Hello", "done")
        assert clean(screen.detail.text) and "Hello world and red text still here evil done" in screen.detail.text
        screen.action_copy_step()
        assert clean(app.clipboard) and app.clipboard.startswith("Hello world")
        screen.action_copy_answer()
        assert clean(app.clipboard) and "done" in app.clipboard
        # The history holds the answer made printable: a provider's text is cleaned before the
        # pool's keys are masked in it (issue 56), so nothing stored can put a key back together.
        stored = runtime.store.get_conversation(screen.conversation_id)
        assert (
            stored.messages[-1].content == printable(HOSTILE_ANSWER) == "Hello world and red text still here evil done"
        )
        # Reopened from the history: the stored conversation and its tree.
        await screen.action_new_chat()
        await pilot.pause(0.1)
        await screen.load_conversation(stored.id)
        await pilot.pause(0.2)
        assert_terminal_safe(app, "Say hello", "Hello", "done", "evilmodel")


async def test_step_pane_shows_a_fast_steps_output(fake):
    """Found on the way (not an escape): a step that ended while the pane following it was being
    drawn stayed "Waiting for the first tokens…" on screen, although finished."""
    fake.script(
        "cond", Reply('Two steps.\nmodel_id = [1, 2]\nsubtasks = ["Outline", "Answer"]\naccess_list = [[], [0]]')
    )
    fake.default("w1", Reply("Outline first, then the rest."))
    fake.default("w2", Reply("Hello world"))
    config = make_test_config(fake)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime, frozen=True)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await ask(pilot, "Say hello")
            await wait_for(pilot, _finished(app), what="the run to finish")
            screen = app.chat_screen
            await wait_for(pilot, lambda: screen.detail.key == ("step", 1, 0), what="the pane on step 1")
            await pilot.pause(0.2)
            text = screen_text(app)
            assert "then the rest" in text and "Waiting for the first tokens" not in text
    finally:
        await runtime.aclose()


async def test_provider_error_body_and_notifications_are_clean(fake):
    """A provider's error body reaches the step pane and a notification printable, and its
    brackets as written: a lone "[" or a "[/]" used to end the app in a MarkupError."""
    script_plan(fake)
    fake.default(
        "w1", Reply("x", status=500, error_message=f"upstream {OSC_CLIPBOARD}exploded \x1b[2J now (token [ at 3) [/]")
    )
    fake.default("w2", Reply("fine"))
    config = make_test_config(fake, workers={"retries": 0, "timeout_s": 10, "connect_timeout_s": 2, "fallbacks": []})
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime, frozen=True)
    try:
        async with app.run_test(size=SIZE, notifications=True) as pilot:
            await ask(pilot, "Go")
            await wait_for(
                pilot,
                lambda: app.chat_screen.live.state.status in ("finished", "failed") and not app.chat_screen.running,
                what="the run to end",
            )
            screen = app.chat_screen
            screen.tree.move_cursor(screen.tree.node_for(("step", 1, 0)))
            await wait_for(pilot, lambda: screen.detail.key == ("step", 1, 0), what="step 1 selected")
            app.notify(f"provider said {OSC_TITLE}no [/b] [ x", title=f"t{OSC_CLIPBOARD}", severity="error")
            await pilot.pause(0.3)
            assert_terminal_safe(app, "exploded", "now (token [ at 3) [/]", "provider said no [/b] [ x")
    finally:
        await runtime.aclose()


async def test_widget_that_forgets_to_clean_still_draws_nothing_raw(fake):
    """The app's line filter: a widget given raw text (Rich Text, markup off) draws it without a
    single control character, in place, each line as wide as before."""
    config = make_test_config(fake)
    runtime = await make_runtime(config, load_conductor=False)
    app = StivaApp(config, runtime=runtime, frozen=True)
    try:
        async with app.run_test(size=SIZE) as pilot:
            raw = Static(Text(f"left {OSC_CLIPBOARD}| \x1b[2J\x9b5n\u202eright|"), markup=False, id="raw")
            await app.chat_screen.mount(raw)
            await pilot.pause(0.2)
            out = OWN_SEQUENCES.sub("", terminal_output(app))
            assert not RAW.search(out)
            line = next(line for line in screen_text(app).splitlines() if "left" in line)
            assert "right|" in line and len(line) == SIZE[0]
    finally:
        await runtime.aclose()


async def test_compare_answer_is_clean(hostile_app):
    from stiva_tui.tui.screens.compare import CompareScreen

    config, runtime = hostile_app
    app = StivaApp(config, runtime=runtime, frozen=True)
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(CompareScreen(runtime, systems=["w2", HOSTILE_ID]))
        await pilot.pause(0.1)
        screen = app.screen
        screen.query_one("#compare-question").text = "Hello?"
        await pilot.press("ctrl+j")
        await wait_for(
            pilot,
            lambda: len(screen.columns) == 2 and all(c.finished for c in screen.columns),
            what="both columns to finish",
        )
        await pilot.pause(0.2)
        assert_terminal_safe(app, "Hello", "done", "Outline", "then the rest", "evilmodel")


async def test_pool_screen_shows_a_hostile_discovered_name_clean(hostile_app):
    from dataclasses import replace

    from stiva_tui.pool.registry import Pool

    config, runtime = hostile_app
    # As a local server listed it before discovery checked names: the screen must still be safe.
    found = replace(
        runtime.pool["w1"],
        id=f"vllm/{HOSTILE_ID}",
        provider="vllm",
        model=HOSTILE_ID,
        base_url="http://127.0.0.1:8000/v1",
        source="discovered",
        reason="discovered at http://127.0.0.1:8000/v1",
        description=f"x{OSC_CLIPBOARD}y",
    )
    runtime.pool = Pool([*runtime.pool, found])
    app = StivaApp(config, runtime=runtime, frozen=True)
    async with app.run_test(size=(190, 46)) as pilot:
        await pilot.press("f4")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PoolScreen", what="the pool screen")
        await pilot.pause(0.2)
        text = assert_terminal_safe(app, "vllm/evilmodel", "discovered", "http://127.0.0.1:8000/v1", "xy")
        assert "described here" in text


# --- a real terminal ------------------------------------------------------------------------------


@pytest.mark.tmux
@pytest.mark.skipif(
    __import__("shutil").which("tmux") is None and not __import__("os").environ.get("CI"),
    reason="tmux is not installed (in CI this fails instead)",
)
def test_real_terminal_keeps_its_title_and_clipboard(fake, tmp_path, stiva_home):
    """The real `stiva` in tmux (which honours OSC 2 and, set so, OSC 52): a hostile answer leaves
    the pane's title and tmux's clipboard buffers as they were."""
    import time

    from test_tui_tmux import Tmux, _stiva_command

    from tests.support.tui import PLAN_TWO_STEPS

    fake.script("cond", Reply(PLAN_TWO_STEPS))
    fake.default("w1", Reply(f"Outline {OSC_TITLE}first."))
    fake.default("w2", Reply(HOSTILE_ANSWER))
    tmux = Tmux(tmp_path)
    tmux.start(_stiva_command(fake, tmp_path, stiva_home), size=(140, 42))
    try:
        tmux.run("set-option", "-g", "set-clipboard", "on")
        tmux.wait_for("Ask anything", "conductor:", timeout=30)
        title = tmux.run("display-message", "-p", "-t", tmux.session, "#{pane_title}")
        tmux.send("Say hello", literal=True)
        tmux.wait_for("Say hello")
        time.sleep(0.3)
        tmux.send("C-j")
        tmux.wait_for("evil", "done", timeout=30)
        time.sleep(0.5)  # every frame of the run drawn
        assert tmux.run("display-message", "-p", "-t", tmux.session, "#{pane_title}") == title
        assert tmux.run("list-buffers", check=False) == ""
        screen = tmux.wait_for("Hello world and red text still here", "evil done")
        assert "owned title" not in screen and "ZWNobyBwd25lZA" not in screen
        tmux.send("C-q")
        assert tmux.wait_exit(timeout=10), "stiva did not quit on ctrl+q"
    finally:
        tmux.kill()

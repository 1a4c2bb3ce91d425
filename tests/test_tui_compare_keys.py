"""Compare mode (F3) from the keyboard alone (issue 52, item 4): every control is reached and used
with keys (Textual's pilot `press`, no clicks) on the real app, against a scripted provider over
real HTTP and a real SQLite history.

What broke in the first hour: the box came prefilled with the last question and ctrl+a (the start
of the line, not "select all") spliced a new question into it; tab did not leave the box, so
conductor-mini could not be ticked; and after a run, text typed off the box fired bindings ("?"
opened help).
"""

from __future__ import annotations

import pytest
from textual.widgets import Button, SelectionList, TextArea

from stiva_tui.tui.app import StivaApp
from stiva_tui.tui.screens.compare import CompareScreen
from stiva_tui.tui.screens.help import HelpScreen
from stiva_tui.tui.screens.run_tree import RunTreeScreen
from tests.support.fakeprovider import Reply
from tests.support.tui import ask, make_runtime, make_test_config, script_plan, wait_for

SIZES = [(80, 24), (120, 40)]


@pytest.fixture
async def app(fake):
    """The app with one question asked in the chat (the one compare mode used to start from)."""
    script_plan(fake)
    fake.default("cond", Reply('model_id = [2]\nsubtasks = ["Answer"]\naccess_list = [[]]'))
    fake.default("w1", Reply("w1 says one"))
    fake.default("w2", Reply("w2 says two"))
    config = make_test_config(fake)
    runtime = await make_runtime(config)
    yield StivaApp(config, runtime=runtime)
    await runtime.aclose()


async def tab_to(pilot, found, keys: str = "tab", limit: int = 40):
    """Press `keys` until `found(focused)` holds; the focused widget."""
    for _ in range(limit):
        focused = pilot.app.focused
        if focused is not None and found(focused):
            return focused
        await pilot.press(keys)
    raise AssertionError(f"{keys} never reached the control; focus on {pilot.app.focused}")


def in_column(widget, number: int, cls: str) -> bool:
    column = widget.parent.parent if widget.parent is not None else None
    return isinstance(widget, Button) and widget.has_class(cls) and getattr(column, "number", None) == number


@pytest.mark.parametrize("size", SIZES)
async def test_every_compare_control_works_from_the_keyboard(app, size):
    async with app.run_test(size=size) as pilot:
        await ask(pilot, "Old question")
        await wait_for(pilot, lambda: not app.chat_screen.running, what="the chat's answer")
        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="compare mode")
        screen = app.screen
        box = screen.query_one("#compare-question", TextArea)
        picker = screen.query_one("#compare-systems", SelectionList)

        # the box starts empty (nothing to splice into) and up recalls the chat's question
        await pilot.pause()
        assert app.focused is box and box.text == ""
        await pilot.press("up")
        assert box.text == "Old question"
        await pilot.press("down")  # back to the empty box: a new question of its own
        await pilot.press("ctrl+a", *"Which is faster?")
        assert box.text == "Which is faster?"

        # tab reaches the systems; before any answer a key typed there goes to the question
        await pilot.press("tab")
        assert app.focused is picker
        await pilot.press("x")  # no answer to mark "all wrong" yet
        assert app.focused is box and box.text == "Which is faster?x"
        await pilot.press("backspace", "tab")
        # down and space tick conductor-mini; shift+tab comes back
        for _ in range(picker.option_count):  # down to it, wherever the list has it
            if picker.get_option_at_index(picker.highlighted or 0).value == "conductor-mini":
                break
            await pilot.press("down")
        await pilot.press("space")
        assert "conductor-mini" in picker.selected
        await pilot.press("shift+tab")
        assert app.focused is box
        await pilot.press("ctrl+j")
        await wait_for(
            pilot, lambda: len(screen.columns) == 4 and all(c.finished for c in screen.columns), what="the answers"
        )
        assert [c.system for c in screen.columns] == ["conductor", "conductor-mini", "w1", "w2"]
        assert box.text == "" and box.border_title == "Compared: Which is faster?"

        # votes by number, and by each column's button (tab to it, enter)
        await pilot.press("2")
        await pilot.pause()
        session = lambda: app.runtime.store.get_compare_session(screen.session_id)  # noqa: E731
        assert session().winner == "conductor-mini"
        await tab_to(pilot, lambda w: in_column(w, 3, "column-vote"))
        await pilot.press("enter")
        await pilot.pause()
        assert session().winner == "w1"

        # zoom one answer, tab steps through them, z shows every one again
        await pilot.press("z")
        assert screen.zoomed is screen.columns[2]
        await pilot.press("tab")
        assert screen.zoomed is screen.columns[3]
        await pilot.press("z")
        assert screen.zoomed is None

        # the Tree button (tab to it, enter) and ctrl+t open the conductor's tree; esc comes back
        await tab_to(pilot, lambda w: in_column(w, 1, "column-tree"), "shift+tab")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunTreeScreen), what="the tree")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="compare mode again")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, RunTreeScreen), what="the tree")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="compare mode again")

        # off the box, a new question typed goes into the box ("?" is no help key here)
        assert app.focused is not box
        await pilot.press(*"Why so?")
        await pilot.pause()
        assert app.screen is screen and not isinstance(app.screen, HelpScreen)
        assert box.text == "Why so?" and app.focused is box

        # esc leaves compare mode
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.chat_screen, what="the chat again")


async def test_a_question_typed_in_the_chat_comes_over_selected(app):
    """Not sent in the chat: carried to compare mode whole and selected, so ctrl+j sends it and a
    key typed replaces it (never spliced into it)."""
    async with app.run_test(size=(80, 24)) as pilot:
        app.chat_screen.prompt.focus()
        await pilot.press(*"Is A faster than B?")
        await pilot.press("f3")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="compare mode")
        await pilot.pause()
        box = app.screen.query_one("#compare-question", TextArea)
        assert box.text == "Is A faster than B?" and box.selected_text == box.text
        await pilot.press(*"New")
        assert box.text == "New"

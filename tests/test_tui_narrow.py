"""Every screen at 80x24 and 120x40, and keys that follow the keymap (issue 43, parts 4 and 6).

Pilot tests on the real app and screens: what a user reads on screen is taken from the screen
itself (its text as the terminal would show it), compare sessions and runs come from a real
SQLite history, and the remapped send goes to a scripted provider over real HTTP.
"""

from __future__ import annotations

import io
import re
import textwrap

import pytest
from rich.console import Console
from textual.widgets import Button, DataTable, Static
from textual.widgets._footer import FooterKey

from stiva_tui.core import events as ev
from stiva_tui.tui.app import StivaApp
from tests.support.cli import stiva
from tests.support.fakeprovider import Reply
from tests.support.tui import make_runtime, make_test_config, script_plan, wait_for
from tests.support.tui_screens import Host


def screen_text(app) -> str:
    """The screen as the terminal shows it, as plain text."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), record=True, color_system=None)
    console.print(app.screen._compositor.render_update(full=True, screen_stack=app._background_screens))
    return console.export_text()


def words(text: str) -> str:
    return " ".join(text.split())


# --- compare mode: many systems ------------------------------------------------------------------

CODE = "```python\ndef sum_digits(n: int) -> int:\n    return sum(int(d) for d in str(abs(n)))\n```"
SIX = {
    "conductor": (CODE, ev.Totals(812, 96, 0.00142, 3.21)),
    "moa": ("Paris, the capital.", ev.Totals(300, 40, 0.0009, 2.5)),
    "anthropic/claude-sonnet-4": ("Paris.", ev.Totals(24, 2, 0.000028, 0.48)),
    "openrouter/qwen/qwen3-235b-a22b": ("It is *Paris*.", ev.Totals(24, 9, 0.000207, 1.07)),
    "w1": ("Paris.", ev.Totals(24, 2, 0.000028, 0.48)),
    "w2": ("It is Paris.", ev.Totals(24, 2, 0.000028, 0.48)),
}


@pytest.fixture
def screens_runtime():
    from stiva_tui.pool.client import HttpWorker, PoolWorker
    from stiva_tui.runtime import Runtime
    from stiva_tui.store import Store
    from tests.test_tui_screens_snapshots import _config, _pool

    rt = Runtime(config=_config(), pool=_pool(), worker=PoolWorker(HttpWorker()), store=Store.open())
    yield rt
    rt.store.close()


def six_systems(runtime) -> str:
    from tests.test_tui_screens_snapshots import _compare_session

    return _compare_session(runtime.store, "Sum the digits of a number", winner=None, answers=SIX)


async def test_six_systems_at_120_columns_keep_their_buttons_whole(screens_runtime):
    from stiva_tui.tui.screens.compare import CompareScreen

    session = six_systems(screens_runtime)
    app = Host(lambda: CompareScreen(screens_runtime, session_id=session))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)
        columns = app.screen.columns
        assert len(columns) == 6
        for column in columns:
            inside = column.content_region
            buttons = list(column.query(Button))
            assert len(buttons) == (2 if column.has_tree else 1)
            for button in buttons:  # "Tree" was cut off at the column's edge
                assert inside.contains_region(button.region), (column.system, str(button.label), button.region)
                assert button.region.width >= len(str(button.label))


async def test_z_zooms_one_answer_to_the_screen_width_and_back(screens_runtime):
    from stiva_tui.tui.screens.compare import CompareScreen

    session = six_systems(screens_runtime)
    app = Host(lambda: CompareScreen(screens_runtime, session_id=session))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause(0.2)
        screen = app.screen
        assert "def sum_digits(n: int) -> int:" not in screen_text(app)  # clipped at 6 columns
        screen.columns[0].query_one(".column-body").focus()
        await pilot.press("z")
        await pilot.pause(0.2)
        assert [c.number for c in screen.columns if c.display] == [1]
        assert screen.columns[0].size.width > 100
        shown = screen_text(app)
        assert "def sum_digits(n: int) -> int:" in shown
        assert "return sum(int(d) for d in str(abs(n)))" in shown
        hint = str(screen.query_one("#compare-hint", Static).render())
        assert "answer 1 of 6" in hint and "z every answer" in hint
        await pilot.press("tab")  # the next answer, zoomed
        await pilot.pause(0.2)
        assert [c.number for c in screen.columns if c.display] == [2]
        await pilot.press("shift+tab", "shift+tab")
        await pilot.pause(0.2)
        assert [c.number for c in screen.columns if c.display] == [6]
        await pilot.press("3")  # votes still count while zoomed
        await pilot.pause(0.1)
        assert screen.verdict == ("winner", "anthropic/claude-sonnet-4")
        await pilot.press("z")
        await pilot.pause(0.2)
        assert all(c.display for c in screen.columns) and screen.zoomed is None


# --- keys follow the keymap ----------------------------------------------------------------------


@pytest.fixture
async def runtimes(fake):
    made = []

    async def build(**overrides):
        config = make_test_config(fake, **overrides)
        runtime = await make_runtime(config)
        made.append(runtime)
        return config, runtime

    yield build
    for runtime in made:
        await runtime.aclose()


async def test_a_remapped_send_sends_from_the_compare_system_list_and_the_hints_say_it(fake, runtimes):
    script_plan(fake)
    fake.default("w1", Reply("one"))
    fake.default("w2", Reply("two"))
    config, runtime = await runtimes(keymap={"send": "ctrl+s"})
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=(120, 40)) as pilot:
        app.action_compare(None)
        await wait_for(
            pilot,
            lambda: type(app.screen).__name__ == "CompareScreen" and app.screen.query("#compare-question"),
            what="compare mode",
        )
        await pilot.pause()
        screen = app.screen
        hint = str(screen.query_one("#compare-hint", Static).render())
        assert hint.startswith("ctrl+s or alt+enter send") and "ctrl+j" not in hint
        screen.query_one("#compare-question").insert("What is 2+2?")
        screen.query_one("#compare-systems").focus()
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: len(screen.columns) == 3, what="the compared answers")
        await wait_for(pilot, lambda: not screen.running, what="the answers to finish")
        footer = [k for k in screen.query(FooterKey) if k.action == "send"]
        assert footer and all(k.key_display != "^j" for k in footer)


def test_a_remap_onto_a_bound_key_is_refused_in_one_line(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text('[keymap]\nsend = "ctrl+q"\n')
    # a subprocess with a timeout: where the remap were accepted, the app would start and wait for keys
    done = stiva("--config", str(config), timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    line = done.stderr
    assert 'send = "ctrl+q"' in line and "ctrl+q is already the key of quit (Quit)" in line
    assert "Traceback" not in line


def test_conflicts_count_only_keys_live_at_the_same_time():
    from stiva_tui.tui.bindings import check_keymap

    assert check_keymap({"send": "ctrl+s"}) is None
    assert check_keymap({"quit": "ctrl+x", "send": "ctrl+q"}) is None  # quit moved out of the way
    assert check_keymap({"pool.reload": "d"}) is None  # d deletes in the history, not on the pool screen
    assert "new_chat" in check_keymap({"regenerate": "ctrl+n"})  # both on the chat screen
    assert "compare.tree" in check_keymap({"compare.send": "ctrl+t"})
    assert "command palette" in check_keymap({"send": "ctrl+p"})


def test_the_apps_own_keys_do_not_clash_so_an_empty_keymap_needs_no_check():
    """check_keymap skips an empty keymap (reading every binding imports every screen, which the
    first paint would wait for): that holds only while the defaults themselves never clash.
    Each binding "remapped" onto its own default key meets every other default."""
    from stiva_tui.tui.bindings import all_bindings, check_keymap

    bindings = all_bindings()
    assert len(bindings) > 20
    clashes = {binding_id for binding_id, binding in bindings.items() if check_keymap({binding_id: binding.key})}
    assert clashes == {"help", "help.close"}  # F1 opens the help and closes it: a toggle, on purpose
    assert check_keymap({}) is None


# --- F1 help at 80 and 120 columns ---------------------------------------------------------------


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_wraps_between_words_and_names_keys_as_typed(fake, runtimes, size):
    config, runtime = await runtimes()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=size) as pilot:
        await pilot.press("f1")
        await pilot.pause(0.3)
        table = app.screen.query_one(DataTable)
        column = list(table.columns.values())[3]
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        keys = {str(r[2]): words(str(r[0])) for r in rows}
        assert keys["help"] == "f1, ?" and not any("question_mark" in k for k in keys.values())
        # the box fits the screen, and "What it does" fits in what the box leaves it
        box = app.screen.query_one("Vertical")
        assert box.region.right <= size[0]
        used = sum(c.get_render_width(table) for c in table.columns.values())
        assert used <= table.content_region.width, (used, table.content_region.width)
        for row in rows:
            lines = str(row[3]).splitlines()
            assert all(len(line) <= column.width for line in lines), lines
        # the descriptions as the screen shows them, read down their column: every word whole
        lines = screen_text(app).splitlines()
        header = next(n for n, line in enumerate(lines) if "What it does" in line)
        x = lines[header].index("What it does")
        shown = words(" ".join(line[x : x + column.width] for line in lines[header + 1 :]))
        assert words(str(rows[0][3])) == "Search every command, change theme"
        for row in rows[:2]:  # "In an empty prompt: the earlier questions of this chat, ..."
            assert words(str(row[3])) in shown, shown


# --- the chat screen: footer, tree, narrow terminals -----------------------------------------


def _footer_fits(app) -> None:
    keys = [k for k in app.screen.query(FooterKey) if k.display]
    palette = next(k for k in keys if k.has_class("-command-palette"))
    shown = [k for k in keys if k is not palette]
    assert shown[0].action == "help"
    for key in shown:  # whole, and left of the palette's key
        assert key.region.right <= palette.region.x, (key.description, key.region, palette.region)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_the_footer_cuts_no_key_in_half(fake, runtimes, size):
    config, runtime = await runtimes()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: list(app.screen.query(FooterKey)), what="the footer")
        await pilot.pause(0.3)
        _footer_fits(app)
        text = screen_text(app).splitlines()[-1]
        assert not re.search(r"\bPoo\b|\bExpor\b", text), text


async def test_the_tree_keeps_cost_and_time_at_80_columns():
    """At 80 columns each step's cost and time stay on its own line, in sight: what does not fit
    moves to the line under it (its tokens, its subtask), never past the tree's right edge. The
    tree's pane is 9 rows high there, so the last step is brought into view as a user would."""
    from tests.test_tui_snapshots import replay, snapshot_app

    app = snapshot_app("stiva-dark")
    async with app.run_test(size=(80, 24)) as pilot:
        await replay(True)(pilot)
        tree = app.chat_screen.tree
        left = tree.region.x
        expected = [("$0.00011", "1.2s"), ("$0.00013", "2.4s"), ("$0.00038", "1.9s")]
        for index, (cost, seconds) in enumerate(expected):
            tree.scroll_to_node(tree.node_for(("step", 1, index)), animate=False)
            await pilot.pause(0.1)
            lines = [line[left:] for line in screen_text(app).splitlines()]
            (line,) = [line for line in lines if re.search(rf"✓ {index + 1} w1", line)]
            assert cost in line and seconds in line, line
        assert tree.virtual_size.width <= tree.size.width, "a label runs past the tree's edge"


async def test_under_80_columns_a_line_says_where_the_tree_went(fake, runtimes):
    config, runtime = await runtimes()
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=(60, 20)) as pilot:
        await pilot.pause(0.3)
        screen = app.chat_screen
        hint = screen.query_one("#narrow-hint", Static)
        assert hint.display and hint.region.height >= 1
        assert not screen.query_one("#workflow-column").display
        assert "Workflow tree hidden" in screen_text(app)
        await pilot.resize_terminal(100, 30)
        await pilot.pause(0.3)
        assert not hint.display and screen.query_one("#workflow-column").display
        assert "Workflow tree hidden" not in screen_text(app)


def test_wrap_breaks_between_words():
    from stiva_tui.tui.screens.help import wrap

    text = "Reports of `stiva bench`: accuracy, cost, latency and the frontier per system"
    assert wrap(text, 20) == "\n".join(textwrap.wrap(text, 20))
    assert all(len(line) <= 20 for line in wrap(text, 20).splitlines())

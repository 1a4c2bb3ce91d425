"""Smaller things a user met in the app (issue 43, part 7): the keys screen (focus, a confirmed
ctrl+d, where esc lands), the history's search box and its list, copying that cannot be confirmed,
the bench screen's counts, pool labels and overlapping frontier points, and the pool table at 80
columns. Pilot tests against real parts: a real file keyring, a real SQLite history, real HTTP."""

from __future__ import annotations

import os
import stat

import keyring
import pytest
from textual.widgets import DataTable, Input, OptionList, Static

from stiva_tui.store import BenchItemRecord, Store
from stiva_tui.tui.app import StivaApp
from tests.support.fakeprovider import Reply
from tests.support.tui import ask, make_runtime, make_test_config, script_plan, wait_for
from tests.support.tui_screens import Host, screens_config, wait_until, with_a_locked_model
from tests.support.tui_screens import make_runtime as make_screens_runtime

SIZE = (140, 42)


@pytest.fixture
def fresh_keyring():
    from stiva_tui import keys

    keys.reset_backend()
    yield
    keys.reset_backend()


# --- F5: the keys screen -----------------------------------------------------------------------------


async def test_f5_opens_with_the_key_input_focused_so_a_paste_lands_in_it(fake, fresh_keyring):
    from textual import events

    from stiva_tui.tui.screens.keys import KeysScreen

    config = screens_config(fake.base_url, catalog=True)
    runtime = await make_screens_runtime(config)
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, KeysScreen))
        screen = app.screen
        await app.workers.wait_for_complete()
        await pilot.pause()
        field = screen.query_one("#keys-input", Input)
        assert screen.focused is field
        # down and up in the key box choose the provider the key is for
        table = screen.query_one("#keys-table", DataTable)
        first = table.cursor_row
        await pilot.press("down")
        assert table.cursor_row == first + 1 and screen.focused is field
        await pilot.press("up")
        assert table.cursor_row == first
        screen.select_provider("openai")
        await pilot.pause()
        app.screen.post_message(events.Paste("sk-test-0000000000000000PPPP"))
        await pilot.pause()
        assert field.value == "sk-test-0000000000000000PPPP"
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keyring.get_password("stiva", "openai") == "sk-test-0000000000000000PPPP"
    await runtime.aclose()


async def test_ctrl_d_asks_before_removing_a_key_and_removes_it_only_on_yes(fake, fresh_keyring):
    from stiva_tui.tui.dialogs import ConfirmDialog
    from stiva_tui.tui.screens.keys import KeysScreen

    keyring.set_password("stiva", "openai", "sk-test-0000000000000000AAAA")
    runtime = await make_screens_runtime(screens_config(fake.base_url, catalog=True))
    app = Host(lambda: KeysScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await app.workers.wait_for_complete()
        screen.select_provider("openai")
        await pilot.pause()
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        text = " ".join(str(s.render()) for s in app.screen.query(Static))
        assert "openai" in text and "y" in text and "n" in text
        await pilot.press("n")  # no: nothing changes
        await wait_until(pilot, lambda: app.screen is screen)
        await app.workers.wait_for_complete()
        assert keyring.get_password("stiva", "openai") == "sk-test-0000000000000000AAAA"
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await wait_until(pilot, lambda: app.screen is screen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keyring.get_password("stiva", "openai") is None
        assert any("removed" in n.message for n in app._notifications)
    await runtime.aclose()


async def test_leaving_f5_opened_from_the_pool_returns_to_the_chat_not_the_pool(fake, fresh_keyring):
    from stiva_tui.tui.screens.chat import ChatScreen
    from stiva_tui.tui.screens.keys import KeysScreen
    from stiva_tui.tui.screens.pool import PoolScreen

    config = screens_config(fake.base_url)
    runtime = await make_screens_runtime(config)
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f4")
        await wait_until(pilot, lambda: isinstance(app.screen, PoolScreen))
        await pilot.press("f5")  # the pool said "add one with the keys screen"
        await wait_until(pilot, lambda: isinstance(app.screen, KeysScreen))
        await app.workers.wait_for_complete()
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, KeysScreen))
        assert isinstance(app.screen, ChatScreen)
        app.chat_screen.prompt.focus()
        await pilot.press("r")  # typed text is text, not the pool's reload
        assert app.chat_screen.prompt.text == "r"
        # and from compare mode, F5 goes back to compare mode
        await pilot.press("f3")
        compare = app.screen
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, KeysScreen))
        await app.workers.wait_for_complete()
        await pilot.press("escape")
        await wait_until(pilot, lambda: app.screen is compare)
    await runtime.aclose()


# --- F2: the history's search box and its list --------------------------------------------------------


async def test_down_from_the_history_search_moves_the_list_and_enter_opens_that_item(fake):
    from stiva_tui.tui.widgets.history import HistorySidebar

    script_plan(fake)
    config = make_test_config(fake)
    runtime = await make_runtime(config)
    store = runtime.store
    for n, title in enumerate(("Oldest question", "Middle question", "Newest question")):
        cid = store.create_conversation(title)
        store.add_message(cid, "user", title)
        with store.transaction() as c:  # fixed times, one day apart: the newest is listed first
            c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (f"2025-03-1{n}T12:00:00+00:00", cid))
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f2")
        await wait_for(pilot, lambda: app.chat_screen.query(HistorySidebar), what="the sidebar")
        sidebar = app.chat_screen.query_one(HistorySidebar)
        await wait_for(pilot, lambda: len(sidebar.items) == 3, what="three chats")
        options = sidebar.query_one("#history-list", OptionList)
        assert app.focused is sidebar.query_one("#history-search", Input)
        assert options.highlighted == 0
        await pilot.press("down")
        assert options.highlighted == 1
        assert sidebar.highlighted.title == "Middle question"
        await pilot.press("up")
        assert options.highlighted == 0
        await pilot.press("down")
        await pilot.press("enter")
        chosen = sidebar.items[1].id
        await wait_for(pilot, lambda: app.chat_screen.conversation_id == chosen, what="the middle chat opened")
    await runtime.aclose()


# --- F9: a copy that cannot be confirmed says so --------------------------------------------------------


async def _copy_answer(fake, monkeypatch) -> list[str]:
    script_plan(fake)
    fake.default("w2", Reply("the answer to copy"))
    config = make_test_config(fake)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime)
    sent: list[str] = []
    app.copy_to_clipboard = sent.append  # the OSC 52 sequence, as Textual would write it
    async with app.run_test(size=SIZE) as pilot:
        await ask(pilot, "Copy me")
        await wait_for(pilot, lambda: app.chat_screen.live.state.status == "finished", what="the run")
        await pilot.pause(0.1)
        await pilot.press("f9")
        await pilot.pause()
        notes = [n.message for n in app._notifications]
    await runtime.aclose()
    return [*notes, *("OSC52:" + s for s in sent)]


async def test_f9_through_osc_52_alone_says_it_cannot_confirm_the_copy(fake, monkeypatch):
    monkeypatch.setenv("STIVA_NO_SYSTEM_CLIPBOARD", "1")
    notes = await _copy_answer(fake, monkeypatch)
    assert "OSC52:the answer to copy" in notes
    note = next(n for n in notes if "clipboard" in n)
    assert "OSC 52" in note and "may not" in note
    assert "copied" not in note


async def test_f9_through_a_system_clipboard_tool_that_succeeded_says_copied(fake, monkeypatch, tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    clip = tmp_path / "clipboard.txt"
    tool = bin_dir / "xclip"
    tool.write_text(f"#!/bin/sh\ncat > {clip}\n")
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DISPLAY", ":99")
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("STIVA_NO_SYSTEM_CLIPBOARD", raising=False)
    notes = await _copy_answer(fake, monkeypatch)
    assert clip.read_text() == "the answer to copy"
    assert not [n for n in notes if n.startswith("OSC52:")]
    assert any(n == "Answer copied to the system clipboard." for n in notes)


# --- the bench screen ---------------------------------------------------------------------------------


def _bench(store: Store, bench_id: str, systems: list[str], models: dict[str, str], *, items: int = 3) -> None:
    """A finished bench of `items` items, every stored system graded on each; `models` names the
    pool model that answered each system's runs (its runs' steps say so)."""
    from stiva_tui.core import events as ev
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow
    from stiva_tui.store import Recorder

    store.open_bench(
        bench_id, suite="skills", suite_hash="h-" + bench_id, systems=systems, config_hash="c", items=items
    )
    recorder = Recorder(store)
    for n in range(items):
        for system, model in models.items():
            run_id = f"{bench_id}-{system}-{n}".replace(":", "-")
            mode = "direct" if system.startswith("direct:") else "conductor"
            workflow = Workflow((Step(1, "Answer it", ()),))
            for event in (
                ev.RunStarted(run_id, f"question {n}", mode, system=system, source="bench"),
                ev.RoundStarted(run_id, 1),
                ev.WorkflowReady(run_id, 1, workflow, "", Usage(10, 2), 0.1),
                ev.StepStarted(run_id, 1, 0, model, "Answer it", (), 1),
                ev.StepFinished(run_id, 1, 0, model, "42", Usage(10, 2), 0.001, 0.5, 1),
                ev.RunFinished(run_id, "42", ev.Totals(20, 4, 0.001, 0.5)),
            ):
                recorder(event)
            store.record_bench_item(
                bench_id,
                BenchItemRecord(
                    system=system,
                    item_id=f"item-{n}",
                    run_id=run_id,
                    status="graded",
                    correct=True,
                    extracted="42",
                    cost_usd=0.001 if system == "conductor" else 0.0005,
                    latency_s=0.5,
                ),
            )
    store.close_bench(bench_id, "finished")


async def test_bench_list_counts_a_finished_bench_with_oracle_and_random_as_done(tmp_path):
    """6 items x (conductor + 6 direct) asked, oracle and random derived: the list said 42/54."""
    from stiva_tui.tui.screens.bench import BenchScreen

    direct = [f"direct:sim:m{i}" for i in range(6)]
    with Store.open(tmp_path / "history.db") as store:
        _bench(
            store,
            "sim-bench",
            ["conductor", *direct, "oracle", "random"],
            {"conductor": "sim:m0", **{d: d.removeprefix("direct:") for d in direct}},
            items=6,
        )
        app = Host(lambda: BenchScreen(store))
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.screen.query_one("#bench-list", DataTable)
            await wait_until(pilot, lambda: table.row_count == 1)
            cells = [str(c) for c in table.get_row_at(0)]
            assert "finished" in cells and "42/42" in cells
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.screen.shown is not None)
            await pilot.pause()
            heading = str(app.screen.query_one("#report-heading", Static).render())
            assert "42/42 answers" in heading  # the list and the report count alike


async def test_benches_on_a_simulated_or_recorded_pool_say_so_in_the_list_and_the_report(tmp_path):
    from stiva_tui.tui.screens.bench import BenchScreen

    with Store.open(tmp_path / "history.db") as store:
        # a conductor-only bench on the simulated pool: only its runs' models tell
        _bench(store, "sim-conductor", ["conductor"], {"conductor": "sim:generalist"})
        _bench(store, "real-models", ["conductor", "direct:w1"], {"conductor": "w1", "direct:w1": "w1"})
        store.import_bench(
            "recorded-1",
            suite="zeroeval",
            suite_hash="z",
            systems=["direct:gpt-4o"],
            items=1,
            records=[BenchItemRecord(system="direct:gpt-4o", item_id="q1", status="graded", correct=True)],
        )
        app = Host(lambda: BenchScreen(store))
        async with app.run_test(size=(80, 24)) as pilot:
            table = app.screen.query_one("#bench-list", DataTable)
            await wait_until(pilot, lambda: table.row_count == 3)
            rows = {str(table.get_row_at(i)[1]): [str(c) for c in table.get_row_at(i)] for i in range(3)}
            by_id = {b.record.id: b for b in app.screen.benches}
            assert by_id["sim-conductor"].pool == "simulated pool"
            assert by_id["recorded-1"].pool == "recorded pool"
            assert by_id["real-models"].pool is None
            assert "simulated" in rows["conductor"]
            assert "recorded" in rows["direct:gpt-4o"]
            assert "simulated" not in rows["conductor, direct:w1"] and "recorded" not in rows["conductor, direct:w1"]
            table.move_cursor(row=[b.record.id for b in app.screen.benches].index("sim-conductor"))
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.screen.shown is not None)
            await pilot.pause()
            heading = str(app.screen.query_one("#report-heading", Static).render())
            assert "SIMULATED POOL" in heading
            assert app.screen.shown.report.pool == "simulated pool"


def test_the_frontier_shows_every_point_that_shares_a_cell():
    from stiva_tui.bench.report import build_report, terminal_frontier

    records = [
        BenchItemRecord(system=s, item_id="q1", status="graded", correct=True, cost_usd=0.001)
        for s in ("direct:a", "direct:b", "direct:c")
    ] + [BenchItemRecord(system="conductor", item_id="q1", status="graded", correct=False, cost_usd=0.002)]
    report = build_report("s", "b", ["direct:a", "direct:b", "direct:c", "conductor"], ["q1"], records)
    text = terminal_frontier(report, 30, 7)
    plot, _, legend = text.partition("\n\n")
    assert "+" in plot  # one combined marker for A, B and C
    assert "D" in plot
    assert "+ A, B, C: on the same point" in legend
    for line in ("A direct:a", "B direct:b", "C direct:c", "D conductor"):
        assert any(row.startswith(line) for row in legend.splitlines())


# --- F4: the pool table at 80 columns -------------------------------------------------------------------


async def test_the_pool_table_fits_80_columns_and_says_the_highlighted_models_whole_status(fake, monkeypatch):
    from stiva_tui.tui.screens.pool import PoolScreen

    monkeypatch.delenv("LOCKED_KEY", raising=False)
    config = with_a_locked_model(screens_config(fake.base_url), description="strongest and costly")
    runtime = await make_screens_runtime(config)
    app = Host(lambda: PoolScreen(runtime))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        await pilot.pause()
        table = screen.query_one("#pool-models", DataTable)
        await pilot.pause()
        assert table.virtual_size.width <= table.size.width  # nothing beyond the right edge
        labels = [str(c.label) for c in table.columns.values()]
        assert "Model" in labels and "Status" in labels
        table.focus()
        table.move_cursor(row=[str(table.get_row_at(i)[1]) for i in range(table.row_count)].index("paid"))
        await pilot.pause()
        detail = str(screen.query_one("#pool-detail", Static).render())
        assert "no key: set $LOCKED_KEY" in detail and "strongest and costly" in detail and "locked: w1" in detail
    wide = Host(lambda: PoolScreen(runtime))
    async with wide.run_test(size=(160, 45)) as pilot:  # wide: every column, as before
        await pilot.pause()
        table = wide.screen.query_one("#pool-models", DataTable)
        assert len(table.columns) == 9
    await runtime.aclose()

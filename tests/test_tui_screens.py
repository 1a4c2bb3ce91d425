"""Pilot tests of compare mode, the leaderboard, the history sidebar, the pool and the keys screens,
against scripted local providers (real HTTP on 127.0.0.1) and a real file keyring."""

from __future__ import annotations

import keyring
import pytest
from textual.widgets import Button, DataTable, Input, Markdown, OptionList, SelectionList, Static, TextArea

from stiva_tui.tui.screens.compare import CompareScreen
from stiva_tui.tui.widgets.compare_column import CompareColumn
from tests.support.tui import labels
from tests.support.tui_screens import Host, make_runtime, screens_config, script_fake, wait_until, with_a_locked_model

SIZE = (160, 45)


def _column_text(column: CompareColumn) -> tuple[str, str, str]:
    md = column.query_one(".column-answer", Markdown)
    footer = str(column.query_one(".column-footer", Static).render())
    return md.source, footer, column.status


# --- compare ---------------------------------------------------------------------------------------


async def test_compare_three_columns_stream_answers_with_totals(fake):
    script_fake(fake)
    runtime = await make_runtime(screens_config(fake.base_url))
    app = Host(lambda: CompareScreen(runtime, systems=["conductor", "w1", "w2"]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.chosen_systems() == ["conductor", "w1", "w2"]
        screen.query_one("#compare-question", TextArea).text = "What is 2+2?"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(screen.columns) == 3 and all(c.finished for c in screen.columns))
        texts = {c.system: _column_text(c) for c in screen.columns}
        assert texts["conductor"][0] == "Orchestrated final answer from w2"
        assert texts["w1"][0] == "Direct answer by w1"
        assert texts["w2"][0] == "Direct answer by w2"
        # conductor: plan (100/30 at 0.5/1.0) + w1 step (30/3 at 1/2) + w2 step (40/6 at 3/6)
        assert texts["conductor"][1].startswith("170→39 tok · $0.00")
        assert texts["w1"][1].startswith("20→4 tok · $0.000028 · ")
        assert texts["w2"][1].startswith("20→4 tok · $0.000084 · ")
        assert all(t[1].endswith("s") for t in texts.values())
        assert all(t[2] == "finished" for t in texts.values())
        # only the final step streamed into the conductor's column: the draft never shows
        assert "Draft" not in texts["conductor"][0]
        session = runtime.store.get_compare_session(screen.session_id)
        assert [e.system for e in session.entries] == ["conductor", "w1", "w2"]
        assert [e.trace.status for e in session.entries] == ["finished"] * 3
        assert [e.trace.system for e in session.entries] == ["conductor", "direct:w1", "direct:w2"]
        assert all(e.trace.source == "tui" and e.trace.conversation_id is None for e in session.entries)
    await runtime.aclose()


async def test_compare_runs_mixture_of_agents_as_a_column(fake):
    """MoA is offered as "Mixture-of-Agents"; only its aggregator's text streams into the column."""
    from stiva_tui.config import MoAConfig
    from tests.support.fakeprovider import Reply

    def worker(name: str):
        def reply(request) -> Reply:
            if "Synthesize the responses" in request.user_text:
                return Reply(f"Merged answer by {name}", usage=(50, 4), chunk_delay_s=0.01)
            return Reply(f"Proposal by {name}", usage=(10, 2))

        return reply

    fake.default("w1", worker("w1"))
    fake.default("w2", worker("w2"))
    config = screens_config(fake.base_url).model_copy(
        update={"moa": MoAConfig(proposers=["w1", "w2"], aggregator="w2", layers=1)}
    )
    runtime = await make_runtime(config)
    app = Host(lambda: CompareScreen(runtime, systems=["moa", "w1"]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        selection = screen.query_one("#compare-systems", SelectionList)
        prompts = {
            str(selection.get_option_at_index(i).prompt): selection.get_option_at_index(i).value
            for i in range(selection.option_count)
        }
        assert prompts["Mixture-of-Agents"] == "moa"
        assert screen.chosen_systems() == ["moa", "w1"]
        screen.query_one("#compare-question", TextArea).text = "Mix it"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(screen.columns) == 2 and all(c.finished for c in screen.columns))
        moa = screen.columns[0]
        assert moa.answer == "Merged answer by w2" and moa.status == "finished"
        assert _column_text(moa)[0] == "Merged answer by w2"
        assert _column_text(moa)[1].startswith("70→8 tok · ")  # two proposals and the aggregation
        assert moa.query(".column-tree")  # a MoA run has a workflow to show
        trace = runtime.store.get_trace(moa.run_id)
        assert trace.mode == "moa" and trace.system == "moa" and trace.step_count == 3
    await runtime.aclose()


async def test_compare_streams_with_markdown_stream(fake, monkeypatch):
    """The answering step's deltas go through MarkdownStream.write (no full render per token)."""
    from textual.widgets._markdown import MarkdownStream

    writes: list[str] = []
    original = MarkdownStream.write

    async def spy(self, fragment):
        writes.append(fragment)
        await original(self, fragment)

    monkeypatch.setattr(MarkdownStream, "write", spy)
    script_fake(fake)
    runtime = await make_runtime(screens_config(fake.base_url))
    app = Host(lambda: CompareScreen(runtime, systems=["w1"]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        screen.query_one("#compare-question", TextArea).text = "hi"
        await pilot.press("alt+enter")
        await wait_until(pilot, lambda: screen.columns and screen.columns[0].finished)
        assert "".join(writes) == "Direct answer by w1"
        assert len(writes) == 4
    await runtime.aclose()


async def test_compare_default_systems_and_validation(fake):
    script_fake(fake)
    runtime = await make_runtime(screens_config(fake.base_url))
    app = Host(lambda: CompareScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        # the conductor + the first two models, skipping the remote conductor's own model
        assert screen.chosen_systems() == ["conductor", "w1", "w2"]
        await pilot.press("ctrl+j")  # empty question: nothing starts
        await pilot.pause()
        assert screen.columns == []
    await runtime.aclose()


async def test_a_trained_adapter_is_compared_beside_its_base(fake, tmp_path):
    """With [conductor] adapter set, compare offers "conductor:base" (the conductor without it) and
    picks it by default; each column says which it is, and both run and are kept by those names."""
    script_fake(fake)
    config = screens_config(fake.base_url)
    adapter = tmp_path / "votes-1"
    config = config.model_copy(update={"conductor": config.conductor.model_copy(update={"adapter": str(adapter)})})
    runtime = await make_runtime(config)
    from stiva_tui.runtime import ConductorVariant

    assert runtime.conductor_config(ConductorVariant(base=True)).adapter is None
    assert runtime.conductor_config().adapter == str(adapter)
    app = Host(lambda: CompareScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert screen.chosen_systems() == ["conductor", "conductor:base", "w1", "w2"]
        screen.query_one("#compare-question", TextArea).text = "What is 2+2?"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(screen.columns) == 4 and all(c.finished for c in screen.columns))
        by = {c.system: c for c in screen.columns}
        # each column names what ran its run: a remote planner takes no adapter (issue 43)
        assert by["conductor"].subtitle == "remote: cond"
        assert by["conductor:base"].subtitle.endswith("no adapter")
        assert by["conductor:base"].status == "finished"
        session = runtime.store.get_compare_session(screen.session_id)
        assert [e.system for e in session.entries] == ["conductor", "conductor:base", "w1", "w2"]
        assert session.entries[1].trace.system == "conductor:base"
    await runtime.aclose()
    plain = await make_runtime(screens_config(fake.base_url))
    app = Host(lambda: CompareScreen(plain))
    async with app.run_test(size=SIZE):
        assert "conductor:base" not in app.screen._systems()  # no adapter, no base to set it beside
    await plain.aclose()


async def test_compare_question_box_honours_enter_sends(fake):
    """With `enter_sends = true`, enter sends the compare question as it sends the chat's, and
    alt+enter adds a line; the hint under the box says so."""
    script_fake(fake)
    config = screens_config(fake.base_url).model_copy(update={"enter_sends": True})
    runtime = await make_runtime(config)
    app = Host(lambda: CompareScreen(runtime, systems=["w1"]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert str(screen.query_one("#compare-hint", Static).render()).startswith("enter send · alt+enter new line")
        screen.query_one("#compare-question", TextArea).focus()
        await pilot.press(*"two", "alt+enter", *"lines")
        assert screen.query_one("#compare-question", TextArea).text == "two\nlines"
        assert screen.columns == []
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(screen.columns) == 1 and screen.columns[0].finished)
        assert screen.question == "two\nlines"
    await runtime.aclose()


async def test_compare_marks_chosen_systems_by_shape_and_fits_long_names(fake):
    """Chosen ● and not chosen ○ read on a monochrome terminal (the box's colour was all that told
    them apart); a long model id at four columns wraps where it reads well, its full name in the
    tooltip."""
    from stiva_tui.tui.widgets.compare_column import fit_title

    script_fake(fake)
    long_id = "openrouter/qwen/qwen3-235b-a22b"
    runtime = await make_runtime(
        screens_config(fake.base_url, extra_models=[{"id": long_id, "provider": "fake", "model": "w1"}])
    )
    app = Host(lambda: CompareScreen(runtime, systems=["conductor", "moa", "w1", long_id]))
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        picker = screen.query_one("#compare-systems", SelectionList)
        lines = [picker.render_line(y).text.strip() for y in range(3)]
        assert lines == ["▐●▌ conductor (orchestrated)", "▐○▌ conductor-mini (quick)", "▐●▌ Mixture-of-Agents"]
        picker.deselect("conductor")
        await pilot.pause()
        assert picker.render_line(0).text.strip().startswith("▐○▌ conductor")
        screen.query_one("#compare-question", TextArea).text = "hi"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(screen.columns) == 3 and all(c.finished for c in screen.columns))
        await pilot.pause()
        title = screen.columns[2].query_one(".column-title")
        assert str(title.render()) == "3  openrouter/qwen/\nqwen3-235b-a22b"
        assert long_id in str(title.tooltip)
    await runtime.aclose()
    assert fit_title("1  conductor", 20) == "1  conductor"
    assert fit_title("3  anthropic/claude-sonnet-4", 20) == "3  anthropic/\nclaude-sonnet-4"
    assert fit_title("2  a-very-long-name-without-a-slash-at-all", 16) == "2  a-very-long-\nname-without-a-…"


async def test_vote_is_stored_and_leaderboard_shows_win_rate(fake):
    from stiva_tui.tui.screens.leaderboard import LeaderboardScreen

    script_fake(fake)
    runtime = await make_runtime(screens_config(fake.base_url))
    app = Host(lambda: CompareScreen(runtime, systems=["conductor", "w1", "w2"]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        screen.query_one("#compare-question", TextArea).text = "Which is best?"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(screen.columns) == 3 and all(c.finished for c in screen.columns))
        await pilot.press("2")  # focus is on the columns: 2 votes for w1
        await pilot.pause()
        session = runtime.store.get_compare_session(screen.session_id)
        assert session.winner == "w1"
        assert screen.columns[1].has_class("-winner")
        # the button of the conductor's column changes the vote
        await pilot.click(screen.columns[0].query_one(".column-vote", Button))
        await pilot.pause()
        assert runtime.store.get_compare_session(screen.session_id).winner == "conductor"
        assert not screen.columns[1].has_class("-winner")

        await app.push_screen(LeaderboardScreen(runtime))
        await pilot.pause()
        table = app.screen.query_one(DataTable)
        rows = [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]
        assert rows[0][:5] == ["conductor", "1", "1", "1", "100%"]
        assert {r[0] for r in rows[1:]} == {"w1", "w2"}
        assert all(r[4] == "0%" for r in rows[1:])
        assert rows[0][5].startswith("$") and rows[0][6].endswith("s")
        # the conductor won over w1 and w2: two preference pairs (train/votes.py)
        pairs = str(app.screen.query_one("#leaderboard-pairs", Static).render())
        assert "2 usable preference pairs from 1 vote" in pairs, pairs
    await runtime.aclose()


async def test_compare_session_reopens_after_restart(fake):
    script_fake(fake)
    config = screens_config(fake.base_url)
    runtime = await make_runtime(config)
    app = Host(lambda: CompareScreen(runtime, systems=["conductor", "w1", "w2"]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        screen.query_one("#compare-question", TextArea).text = "Reopen me"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: len(screen.columns) == 3 and all(c.finished for c in screen.columns))
        await pilot.press("3")
        await pilot.pause()
        session_id = screen.session_id
        before = {c.system: _column_text(c)[:2] for c in screen.columns}
    await runtime.aclose()

    runtime2 = await make_runtime(config)  # a new process would open the same STIVA_HOME database
    app2 = Host(lambda: CompareScreen(runtime2, session_id=session_id))
    async with app2.run_test(size=SIZE) as pilot:
        screen = app2.screen
        await wait_until(pilot, lambda: len(screen.columns) == 3 and all(c.finished for c in screen.columns))
        box = screen.query_one("#compare-question", TextArea)
        assert box.text == "" and box.border_title == "Compared: Reopen me"  # the box, for a new one
        box.focus()
        await pilot.press("up")  # ... and up recalls the question compared
        assert box.text == "Reopen me"
        after = {c.system: _column_text(c)[:2] for c in screen.columns}
        assert after == before
        assert [c.has_class("-winner") for c in screen.columns] == [False, False, True]
        assert screen.chosen_systems() == ["conductor", "w1", "w2"]
        # the conductor's tree opens from the stored trace
        await pilot.press("ctrl+t")
        await pilot.pause()
        from stiva_tui.tui.screens.run_tree import RunTreeScreen

        assert isinstance(app2.screen, RunTreeScreen)
        from stiva_tui.tui.widgets.workflow_tree import WorkflowTree

        tree = app2.screen.query_one(WorkflowTree)
        assert app2.screen.trace.status == "finished" and len(app2.screen.trace.rounds[0].steps) == 2
        drawn = "\n".join(labels(tree))
        assert "Reopen me  ✓" in drawn and "✓ 1 w1  " in drawn and "✓ 2 w2  ← 1" in drawn
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app2.screen, CompareScreen)
    await runtime2.aclose()


async def test_escape_cancels_running_answers(fake):
    from tests.support.fakeprovider import Reply

    fake.default("w1", Reply("never " * 50, chunk_delay_s=0.2))
    fake.default("w2", Reply("slow " * 50, latency_s=5.0))
    runtime = await make_runtime(screens_config(fake.base_url))
    app = Host(lambda: CompareScreen(runtime, systems=["w1", "w2"]))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        screen.query_one("#compare-question", TextArea).text = "slow one"
        await pilot.press("ctrl+j")
        await wait_until(pilot, lambda: screen.columns and "never" in screen.columns[0].answer)
        assert screen.running
        await pilot.press("escape")
        await wait_until(pilot, lambda: not screen.running)
        assert [c.status for c in screen.columns] == ["cancelled", "cancelled"]
        assert isinstance(app.screen, CompareScreen)  # the first esc only cancels
        session = runtime.store.get_compare_session(screen.session_id)
        await wait_until(
            pilot, lambda: all((runtime.store.get_trace(e.run_id).status == "cancelled") for e in session.entries)
        )
    await runtime.aclose()


# --- pool ------------------------------------------------------------------------------------------


def _table_rows(table: DataTable) -> list[list[str]]:
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_pool_screen_lists_models_availability_prices_and_conductor(fake, monkeypatch):
    from stiva_tui.tui.screens.pool import PoolScreen

    monkeypatch.delenv("LOCKED_KEY", raising=False)
    config = with_a_locked_model(screens_config(fake.base_url))
    runtime = await make_runtime(config)  # no conductor chosen yet: the screen describes the choice
    assert runtime.conductor is None
    app = Host(lambda: PoolScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        rows = {r[1]: r for r in _table_rows(screen.query_one("#pool-models", DataTable))}
        assert list(rows) == ["cond", "w1", "w2", "local/gemma-3-270m", "paid"]  # the usable ones first
        assert rows["w2"][0] == "2" and rows["w2"][2] == "3.00" and rows["w2"][3] == "6.00"
        assert rows["w1"][4].startswith("✓ ") and rows["w1"][8] == "first worker"
        assert rows["w1"][6] == "fake: w1" and rows["w1"][7] == "config"
        assert rows["paid"][0] == "-" and rows["paid"][4].startswith("✗ no key: set $LOCKED_KEY")
        assert rows["local/gemma-3-270m"][3] == "free"
        assert all(r[5] == "yes" for r in rows.values())
        assert "discovery is off" in str(screen.query_one("#pool-servers-empty", Static).render())
        await app.workers.wait_for_complete()
        await pilot.pause()
        text = str(screen.query_one("#pool-conductor", Static).render())
        assert text.startswith("Conductor (not loaded yet): remote")
        assert "cond" in text
    await runtime.aclose()


async def test_pool_screen_shows_loaded_conductor_and_discovered_servers(fake):
    from dataclasses import replace

    from stiva_tui.pool.registry import Pool
    from stiva_tui.tui.screens.pool import PoolScreen

    runtime = await make_runtime(screens_config(fake.base_url))
    await runtime.ensure_conductor()
    found = replace(
        runtime.pool["w1"],
        id="llama3:8b",
        provider="ollama",
        model="llama3:8b",
        base_url="http://127.0.0.1:11434/v1",
        source="discovered",
        reason="server reachable",
    )
    runtime.pool = Pool([*runtime.pool, found])
    app = Host(lambda: PoolScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await pilot.pause()
        assert str(screen.query_one("#pool-conductor", Static).render()).startswith("Conductor: remote · cond")
        servers = _table_rows(screen.query_one("#pool-servers", DataTable))
        assert servers == [["http://127.0.0.1:11434/v1", "ollama", "llama3:8b"]]
    await runtime.aclose()


# --- keys ------------------------------------------------------------------------------------------


@pytest.fixture
def fresh_keyring():
    from stiva_tui import keys

    keys.reset_backend()
    yield
    keys.reset_backend()


def _key_cell(screen, provider: str) -> str:
    table = screen.query_one("#keys-table", DataTable)
    return str(table.get_cell(provider, "Key"))


async def test_keys_screen_adds_replaces_and_removes_a_key(fake, fresh_keyring):
    from stiva_tui.tui.screens.keys import KeysScreen

    runtime = await make_runtime(screens_config(fake.base_url, catalog=True))
    assert not runtime.pool["openai/gpt-5"].available
    app = Host(lambda: KeysScreen(runtime))
    first, second = "sk-test-0000000000000000AAAA", "sk-test-1111111111111111BBBB"
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await app.workers.wait_for_complete()
        providers = [e.name for e in screen.providers]
        assert providers[0] == "fake" and "openai" in providers  # config, then catalog
        assert _key_cell(screen, "openai") == "no key"
        assert screen.query_one("#keys-table", DataTable).get_row("openai")[1] == "$OPENAI_API_KEY"

        screen.select_provider("openai")
        await pilot.click("#keys-input")
        await pilot.press(*first)
        assert screen.query_one("#keys-input", Input).password
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keyring.get_password("stiva", "openai") == first
        assert _key_cell(screen, "openai") == "key in keyring: sk-…AAAA"
        assert screen.query_one("#keys-input", Input).value == ""
        assert any("the pool is updated" in n.message for n in app._notifications)
        assert runtime.pool["openai/gpt-5"].available  # runtime.pool_refresh() rebuilt the pool

        screen.query_one("#keys-input", Input).value = second
        await pilot.click("#keys-save")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keyring.get_password("stiva", "openai") == second
        assert _key_cell(screen, "openai") == "key in keyring: sk-…BBBB"
        assert any("replaced" in n.message for n in app._notifications)

        await pilot.click("#keys-remove")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keyring.get_password("stiva", "openai") is None
        assert _key_cell(screen, "openai") == "no key"
        assert not runtime.pool["openai/gpt-5"].available
    await runtime.aclose()


async def test_a_key_added_in_f5_reaches_the_chat_tree_prices(fake, fresh_keyring):
    """The chat's tree prices its "≈ instead" line from the pool it was told of: a key added in
    the keys screen rebuilds the pool, and the tree is told the new one."""
    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.screens.keys import KeysScreen

    config = screens_config(fake.base_url, catalog=True)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.chat_screen.live is not None)  # mounted after the first frame
        tree = app.chat_screen.tree
        await wait_until(pilot, lambda: tree.models)
        assert "openai/gpt-5" not in [m.id for m in tree.models]
        await pilot.press("f5")
        await wait_until(pilot, lambda: isinstance(app.screen, KeysScreen))
        screen = app.screen
        await app.workers.wait_for_complete()
        screen.select_provider("openai")
        screen.query_one("#keys-input", Input).value = "sk-test-0000000000000000AAAA"
        await pilot.click("#keys-save")
        await wait_until(pilot, lambda: "openai/gpt-5" in [m.id for m in tree.models])
        assert [m.id for m in tree.models] == [m.id for m in runtime.models]
    await runtime.aclose()


async def test_keys_screen_asks_for_a_restart_when_the_pool_cannot_refresh(fake, fresh_keyring, monkeypatch):
    from stiva_tui.tui.screens.keys import KeysScreen

    runtime = await make_runtime(screens_config(fake.base_url))

    async def broken_refresh() -> None:
        raise RuntimeError("discovery exploded")

    monkeypatch.setattr(runtime, "pool_refresh", broken_refresh)
    app = Host(lambda: KeysScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await app.workers.wait_for_complete()
        screen.select_provider("fake")
        screen.query_one("#keys-input", Input).value = "local-key-123456789"
        await pilot.click("#keys-save")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert _key_cell(screen, "fake") == "key in keyring: …6789"
        notes = [n.message for n in app._notifications]
        assert any("discovery exploded" in n for n in notes)
        assert any("restart Stiva to apply" in n for n in notes)
    await runtime.aclose()


async def test_keys_screen_environment_key_wins_and_is_not_shown(fake, fresh_keyring, monkeypatch):
    from stiva_tui.tui.screens.keys import KeysScreen

    monkeypatch.setenv("GROQ_API_KEY", "gsk-environment-secret-9999")
    runtime = await make_runtime(screens_config(fake.base_url))
    app = Host(lambda: KeysScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert _key_cell(app.screen, "groq") == "key from $GROQ_API_KEY"
    await runtime.aclose()


async def test_keys_screen_without_keyring_saves_to_the_private_file_and_says_so(fake, fresh_keyring, monkeypatch):
    from stiva_tui import keys
    from stiva_tui.tui.screens.keys import KeysScreen

    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    keys.reset_backend()
    runtime = await make_runtime(screens_config(fake.base_url, catalog=True))
    app = Host(lambda: KeysScreen(runtime))
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        await app.workers.wait_for_complete()
        await pilot.pause()
        backend = str(screen.query_one("#keys-backend", Static).render())
        assert backend.startswith("Keys are stored in the private file") and str(keys.keys_file()) in backend
        assert "no keyring works here" in backend
        assert not screen.query_one("#keys-input", Input).disabled  # headless Linux is no dead end
        assert not screen.query_one("#keys-save", Button).disabled
        screen.select_provider("openai")
        await pilot.click("#keys-input")
        await pilot.press(*"sk-test-2222222222222222CCCC")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert keys.get_key("openai", None) == ("sk-test-2222222222222222CCCC", "key file")
        assert runtime.pool["openai/gpt-5"].available  # usable at once, no restart
    await runtime.aclose()


def test_mask_key_never_shows_more_than_the_last_four():
    from stiva_tui.tui.screens.keys import mask_key

    assert mask_key("sk-abcdefghijklmnop1234") == "sk-…1234"
    assert mask_key("abcdefghijkl5678") == "…5678"
    assert mask_key("short-key") == "…(short key)"
    assert mask_key("sk-abc") == "…(short key)"


# --- history sidebar -------------------------------------------------------------------------------


async def test_history_compare_session_reopens_in_compare_screen(fake):
    """The app's wiring in small: Selected("compare", id) -> CompareScreen(runtime, session_id=id)."""
    from stiva_tui.tui.widgets.history import HistorySidebar

    script_fake(fake)
    runtime = await make_runtime(screens_config(fake.base_url))
    session = runtime.store.create_compare_session("From the sidebar")
    result = await runtime.engine().run_direct("From the sidebar", "w1")
    runtime.store.add_compare_entry(session, "w1", result.run_id)

    class SidebarHost(Host):
        def on_history_sidebar_selected(self, message: HistorySidebar.Selected) -> None:
            self.push_screen(CompareScreen(runtime, session_id=message.id))

    app = SidebarHost(None, body=lambda: [HistorySidebar(runtime.store)])
    async with app.run_test(size=SIZE) as pilot:
        app.query_one("#history-list", OptionList).focus()
        await pilot.press("enter")
        await wait_until(
            pilot,
            lambda: isinstance(app.screen, CompareScreen) and app.screen.columns and app.screen.columns[0].finished,
        )
        assert app.screen.columns[0].answer == "Direct answer by w1"
    await runtime.aclose()


# --- a stored run on a screen of its own ------------------------------------------------------------


async def test_run_screen_shows_a_stored_run_and_esc_leaves_it(stiva_home):
    from textual.widgets import Static

    from stiva_tui.store import Recorder, Store
    from stiva_tui.tui.screens.run import RunScreen
    from tests.support.tui import DEMO_ANSWER, DEMO_QUESTION, demo_events, labels
    from tests.support.tui_screens import Host, wait_until

    store = Store.open()
    recorder = Recorder(store)
    events = demo_events()
    for event in events:
        recorder(event)
    run_id = events[0].run_id
    seen: list = []
    app = Host(lambda: RunScreen(store, run_id))
    async with app.run_test(size=(120, 34), message_hook=seen.append) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, RunScreen) and app.screen.state is not None)
        screen = app.screen
        assert any(isinstance(m, RunScreen.Loaded) for m in seen)
        assert DEMO_QUESTION in "\n".join(labels(screen.query_one("#run-tree")))
        assert screen.query_one("#run-conversation").last_answer.strip() == DEMO_ANSWER.strip()
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, RunScreen))
        app.push_screen(RunScreen(store, "0123456789abcdef"))
        await wait_until(pilot, lambda: any(isinstance(m, RunScreen.LoadFailed) for m in seen))
        # the hook sees the message before the screen's handler has drawn it: wait for the title
        # itself (a single pause was not enough beside a CPU hog: benchmarks/perf/suite_under_load.py)
        title = lambda: str(app.screen.query_one("#run-title", Static).render())  # noqa: E731
        await wait_until(pilot, lambda: "no longer in the history" in title())
    store.close()

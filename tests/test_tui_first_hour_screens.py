"""What the first hour found cut or unsaid on the screens (issue 52, item 5), at 80x24 and 120x40:
the tree's "≈ instead" line and F4's reasons fold rather than being cut, no toast covers F1's help,
and F6 says why votes gave no preference pair.

What is checked is the screen's own text, as the terminal shows it (tests/test_tui_narrow.py's
`screen_text`); the runs, votes and sessions are in a real SQLite history.
"""

from __future__ import annotations

import pytest

from stiva_tui.tui.app import StivaApp
from stiva_tui.tui.screens.help import HelpScreen
from tests.support.tui import make_runtime, make_test_config, record_run, wait_for
from tests.support.tui_screens import Host
from tests.test_tui_narrow import screen_text, words
from tests.test_tui_snapshots import replay, snapshot_app

SIZES = [(80, 24), (120, 40)]


# --- the tree's "≈ instead" line ---------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_the_instead_line_folds_rather_than_being_cut(size):
    app = snapshot_app("stiva-dark")
    async with app.run_test(size=size) as pilot:
        await replay(True)(pilot)
        tree = app.chat_screen.tree
        tree.scroll_end(animate=False, immediate=True)
        await pilot.pause(0.2)
        text = screen_text(app)
        # each estimate whole, and that they are estimates
        for said in ("≈ instead", "w1 alone $0.00025", "MoA 3×2 $0.0032", "estimated"):
            assert said in text, f"{said!r} not on screen:\n{text}"


async def test_the_instead_line_is_one_line_where_it_fits_and_folds_when_the_terminal_narrows():
    app = snapshot_app("stiva-dark")
    async with app.run_test(size=(220, 50)) as pilot:
        await replay(True)(pilot)
        await pilot.pause(0.2)
        assert "≈ instead  w1 alone $0.00025  MoA 3×2 $0.0032  estimated" in screen_text(app)
        await pilot.resize_terminal(120, 40)
        await pilot.pause(0.3)
        app.chat_screen.tree.scroll_end(animate=False, immediate=True)
        await pilot.pause(0.2)
        text = screen_text(app)
        # as many estimates a line as fit, the rest under the first
        assert "≈ instead  w1 alone $0.00025" in text and "$0.00025  MoA" not in text, text
        assert "└─ MoA 3×2 $0.0032  estimated" in text, text


# --- F4: the reasons ------------------------------------------------------------------------------


def column_words(text: str, header: str) -> str:
    """The words of one table column as drawn: from its header down to the first empty line."""
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if header in line and "#" in line)
    start = lines[at].index(header)
    after = lines[at][start + len(header) :]
    gap = len(after) - len(after.lstrip())
    end = start + len(header) + gap if after.strip() else None  # where the next header starts (maybe cut)
    cells = []
    for line in lines[at + 1 :]:
        if not line.strip():
            break
        cells.append(line[start:end])
    return words(" ".join(cells))


LONG_REASON = "no key: set $OPENAI_API_KEY or add one with the keys screen"


@pytest.mark.parametrize("size", SIZES)
async def test_the_pool_screens_reasons_fold_rather_than_being_cut(size):
    from stiva_tui.pool.client import HttpWorker, PoolWorker
    from stiva_tui.pool.registry import Pool
    from stiva_tui.pool.types import PoolModel
    from stiva_tui.runtime import Runtime
    from stiva_tui.store import Store
    from stiva_tui.tui.screens.pool import PoolScreen
    from tests.test_tui_screens_snapshots import _config, _pool

    locked = PoolModel(
        id="openrouter/meta-llama/llama-3.3-70b-instruct:free",
        provider="openai",
        model="meta-llama/llama-3.3-70b-instruct:free",
        base_url="https://openai.invalid/v1",
        price_in=0.4,
        price_out=1.6,
        description="a hosted model",
        available=False,
        reason=LONG_REASON,
    )
    runtime = Runtime(
        config=_config(), pool=Pool([*_pool(), locked]), worker=PoolWorker(HttpWorker()), store=Store.open()
    )
    try:
        await runtime.ensure_conductor()
        app = Host(lambda: PoolScreen(runtime))
        async with app.run_test(size=size) as pilot:
            await pilot.pause(0.3)
            text = screen_text(app)
            status = column_words(text, "Status")
            assert f"✗ {LONG_REASON}" in status, text
            assert "✗ no key: set $PAID_KEY or add one with the keys screen" in status
            assert "…" not in status
    finally:
        runtime.store.close()


# --- F1: no toast over the help -------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_toasts_wait_under_f1s_help_and_come_back_after(fake, size):
    config = make_test_config(fake)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime)
    try:
        async with app.run_test(size=size, notifications=True) as pilot:
            await pilot.pause()
            app.notify("A toast about something else entirely", timeout=30)
            await pilot.pause(0.2)
            assert "A toast about something" in screen_text(app)
            await pilot.press("f1")
            await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help")
            await pilot.pause(0.2)
            shown = screen_text(app)
            assert "toast" not in shown, shown
            await pilot.press("escape")
            await pilot.pause(0.2)
            assert "A toast about something" in screen_text(app)  # still due: shown again
    finally:
        await runtime.aclose()


# --- F6: why no pair ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_the_leaderboard_says_why_votes_gave_no_pair(fake, size):
    from stiva_tui.tui.screens.leaderboard import LeaderboardScreen

    config = make_test_config(fake)
    runtime = await make_runtime(config)
    store = runtime.store
    # the same model twice: one plan, so no preference between them
    same = store.create_compare_session("Which is it?")
    store.add_compare_entry(same, "w1", record_run(store, "Which is it?", "it is A", system="direct:w1"))
    store.add_compare_entry(same, "direct:w1", record_run(store, "Which is it?", "it is A", system="direct:w1"))
    store.record_vote(same, "w1")
    tie = store.create_compare_session("And this?")
    store.add_compare_entry(tie, "w1", record_run(store, "And this?", "B", system="direct:w1"))
    store.add_compare_entry(tie, "w2", record_run(store, "And this?", "B", system="direct:w2"))
    store.record_vote(tie, None, kind="tie")
    try:
        app = Host(lambda: LeaderboardScreen(runtime))
        async with app.run_test(size=size) as pilot:
            await pilot.pause(0.3)
            assert (
                "Training signal: 0 usable preference pairs from 2 votes Left out: a tie names no better "
                "answer; both answers came from the same plan"
            ) in words(screen_text(app)), screen_text(app)
    finally:
        await runtime.aclose()

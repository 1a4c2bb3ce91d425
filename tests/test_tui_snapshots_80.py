"""SVG snapshots of every screen at 80x24, the smallest terminal Stiva is made for: the chat (a
finished run, and its history sidebar), compare mode (four columns, and one answer zoomed), the
F1 help, the pool and the keys screens. The bench screen's are in test_tui_bench.py (80x24 too).

Everything shown is fixed, as in test_tui_screens_snapshots.py: a hand-made pool, runs written to
the store with fixed totals, the demo run replayed in frozen mode.

Update after an intended change: `pytest tests/test_tui_snapshots_80.py --snapshot-update`.
"""

from __future__ import annotations

import pytest

from tests.support.tui_screens import Host
from tests.test_tui_narrow import SIX
from tests.test_tui_screens_snapshots import FOUR_ANSWERS, _compare_session, _settle, keys_snapshot
from tests.test_tui_snapshots import replay, snapshot_app

SIZE = (80, 24)


@pytest.fixture
def runtime():
    from stiva_tui.pool.client import HttpWorker, PoolWorker
    from stiva_tui.runtime import Runtime
    from stiva_tui.store import Store
    from tests.test_tui_screens_snapshots import _config, _pool

    rt = Runtime(config=_config(), pool=_pool(), worker=PoolWorker(HttpWorker()), store=Store.open())
    yield rt
    rt.store.close()


def _chat_then(*keys: str):
    async def run_before(pilot) -> None:
        await replay(True)(pilot)
        # The question's scroll_end runs after a refresh: before the replayed answer is laid out
        # (the question on top) or, on a busy machine, after it (the answer's end). The snapshot
        # shows the first; held there, it does not depend on the race (CI saw the second at 60 columns).
        pilot.app.chat_screen.conversation.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        if keys:
            await pilot.press(*keys)
            await pilot.pause(0.3)
        await _settle(pilot)

    return run_before


def test_chat_80x24(snap_compare):
    """The tree keeps each step's cost and time, and the footer shows only whole keys."""
    assert snap_compare(snapshot_app("stiva-dark"), terminal_size=SIZE, run_before=_chat_then())


def test_chat_60_columns_says_where_the_tree_went(snap_compare):
    assert snap_compare(snapshot_app("stiva-dark"), terminal_size=(60, 24), run_before=_chat_then())


def test_help_80x24(snap_compare):
    """Full screen, "What it does" broken between words, "?" and not "question_mark"."""
    assert snap_compare(snapshot_app("stiva-dark"), terminal_size=SIZE, run_before=_chat_then("f1"))


def test_history_80x24(snap_compare):
    """F2 on the chat screen, with chats and a comparison in the history."""
    from stiva_tui.store import Store

    store = Store.open()
    try:
        for n, title in enumerate(["Group rows in pandas", "Sum of the first 100 primes", "Rust lifetimes"]):
            cid = store.create_conversation(title)
            with store.transaction() as c:
                c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (f"2025-03-1{n}T12:00:00+00:00", cid))
        session = _compare_session(store, "What is the capital of France?", winner="w1")
        with store.transaction() as c:
            c.execute("UPDATE compare_sessions SET created_at = '2025-03-11T13:00:00+00:00' WHERE id = ?", (session,))
    finally:
        store.close()
    assert snap_compare(snapshot_app("stiva-dark"), terminal_size=SIZE, run_before=_chat_then("f2"))


def test_compare_80x24(snap_compare, runtime):
    from stiva_tui.tui.screens.compare import CompareScreen

    session = _compare_session(runtime.store, "What is the capital of France?", winner=None, answers=FOUR_ANSWERS)
    app = Host(lambda: CompareScreen(runtime, session_id=session))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle)


def test_compare_zoomed_80x24(snap_compare, runtime):
    """Six systems; z shows the conductor's answer alone, its code whole."""
    from stiva_tui.tui.screens.compare import CompareScreen

    session = _compare_session(runtime.store, "Sum the digits of a number", winner=None, answers=SIX)

    async def run_before(pilot) -> None:
        await _settle(pilot)
        pilot.app.screen.columns[0].query_one(".column-body").focus()
        await pilot.press("z")
        await _settle(pilot)

    app = Host(lambda: CompareScreen(runtime, session_id=session))
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_pool_80x24(snap_compare, runtime):
    import asyncio

    from stiva_tui.tui.screens.pool import PoolScreen

    asyncio.run(runtime.ensure_conductor())  # the remote conductor: chosen, nothing to load
    app = Host(lambda: PoolScreen(runtime))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle)


def test_keys_80x24(snap_compare, runtime):
    assert keys_snapshot(snap_compare, runtime, SIZE)

"""SVG snapshots of compare mode (3 columns, finished), the leaderboard, the history sidebar, the
pool and the keys screens. Everything shown is fixed: a hand-made pool, runs written to the store
with fixed totals, a fixed terminal size; no times, ids, ports or measured latencies.

Update after an intended change: `pytest tests/test_tui_screens_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import pytest
from textual.widgets import Static

from stiva_tui.core import events as ev
from tests.support.tui import record_run
from tests.support.tui_screens import Host

SIZE = (120, 34)
BASE_URL = "http://127.0.0.1:9/v1"  # never called: nothing here runs a model


def _config():
    from stiva_tui.config import parse_config

    return parse_config(
        {
            "conductor": {"backend": "remote", "model": "cond"},
            "providers": [
                {"name": "lab", "base_url": BASE_URL},
                {"name": "paid", "base_url": "https://paid.invalid/v1", "api_key_env": "PAID_KEY"},
            ],
            "models": [
                {"id": "cond", "provider": "lab", "model": "cond-7b", "description": "the planner"},
                {"id": "w1", "provider": "lab", "model": "worker-1", "description": "fast generalist"},
                {"id": "w2", "provider": "lab", "model": "worker-2", "description": "careful at math"},
                {"id": "big", "provider": "paid", "model": "big-1", "description": "strongest, costly"},
            ],
            "discovery": {"enabled": False},
            "catalog": False,
        }
    )


def _pool():
    from stiva_tui.pool.registry import Pool
    from stiva_tui.pool.types import PoolModel

    def lab(mid, model, price_in, price_out, description):
        return PoolModel(
            id=mid,
            provider="lab",
            model=model,
            base_url=BASE_URL,
            price_in=price_in,
            price_out=price_out,
            description=description,
            reason="no key needed",
        )

    return Pool(
        [
            lab("cond", "cond-7b", 0.2, 0.6, "the planner"),
            lab("w1", "worker-1", 1.0, 2.0, "fast generalist"),
            lab("w2", "worker-2", 3.0, 15.0, "careful at math"),
            PoolModel(
                id="big",
                provider="paid",
                model="big-1",
                base_url="https://paid.invalid/v1",
                price_in=5.0,
                price_out=25.0,
                description="strongest, costly",
                available=False,
                reason="no key: set $PAID_KEY or add one with the keys screen",
            ),
            PoolModel(
                id="qwen3:8b",
                provider="ollama",
                model="qwen3:8b",
                base_url="http://127.0.0.1:11434/v1",
                description="found on a local server",
                reason="server reachable",
                source="discovered",
            ),
            PoolModel(
                id="local/gemma-3-270m",
                provider="local",
                model="gemma-3-270m",
                kind="embedded",
                description="Gemma-3 270M base model on the CPU",
                reason="embedded: runs offline",
                source="embedded",
            ),
        ]
    )


@pytest.fixture
def runtime():
    from stiva_tui.pool.client import HttpWorker, PoolWorker
    from stiva_tui.runtime import Runtime
    from stiva_tui.store import Store

    rt = Runtime(config=_config(), pool=_pool(), worker=PoolWorker(HttpWorker()), store=Store.open())
    yield rt
    rt.store.close()


def _finished_run(store, system: str, question: str, answer: str, totals: ev.Totals) -> str:
    return record_run(
        store, question, answer, system=system if system in ("conductor", "moa") else f"direct:{system}", totals=totals
    )


ANSWERS = {
    "conductor": (
        "The capital of France is **Paris**.\n\n- seat of government\n- largest city",
        ev.Totals(812, 96, 0.00142, 3.21),
    ),
    "w1": ("Paris.", ev.Totals(24, 2, 0.000028, 0.48)),
    "w2": ("It is *Paris*, on the Seine.", ev.Totals(24, 9, 0.000207, 1.07)),
}


def _compare_session(store, question: str, winner: str | None, answers=ANSWERS) -> str:
    session = store.create_compare_session(question)
    for system, (answer, totals) in answers.items():
        store.add_compare_entry(session, system, _finished_run(store, system, question, answer, totals))
    if winner:
        store.record_vote(session, winner)
    return session


async def _settle(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    steady_cursors(pilot)
    await pilot.pause()


def steady_cursors(pilot) -> None:
    """A focused text box's cursor blinks: a snapshot taken in its off phase differs by one cell.
    Held in its on phase (Textual's own pause: the cursor shown, its timer stopped) and drawn
    again, it stays shown. Input boxes too: the history's search, the keys screen's key box.
    (cursor_blink = False is not that: this Textual then draws no cursor in a TextArea's line once
    the line is drawn again, so a picture depended on whether a line drawn before stayed cached.)"""
    from textual.widgets import Input, TextArea

    for box in [*pilot.app.screen.query(TextArea), *pilot.app.screen.query(Input)]:
        if box.has_focus:  # a box without focus shows no cursor (its blur paused it, hidden)
            box._pause_blink(visible=True)
            box.refresh()


def test_compare_three_columns_finished(snap_compare, runtime):
    from stiva_tui.tui.screens.compare import CompareScreen

    session = _compare_session(runtime.store, "What is the capital of France?", winner="conductor")
    app = Host(lambda: CompareScreen(runtime, session_id=session))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle)


FOUR_ANSWERS = {
    "conductor": ("**Paris**.", ev.Totals(812, 96, 0.00142, 3.21)),
    "moa": ("Paris, the capital.", ev.Totals(300, 40, 0.0009, 2.5)),
    "anthropic/claude-sonnet-4": ("Paris.", ev.Totals(24, 2, 0.000028, 0.48)),
    "openrouter/qwen/qwen3-235b-a22b": ("It is *Paris*.", ev.Totals(24, 9, 0.000207, 1.07)),
}


def test_compare_four_columns_at_100_columns(snap_compare, runtime):
    """Four columns at 100 columns: long names wrap onto a second line instead of ending in "…",
    and the system list marks chosen (●) and not chosen (○) systems by shape, not only colour."""
    from stiva_tui.tui.screens.compare import CompareScreen

    session = _compare_session(runtime.store, "What is the capital of France?", winner=None, answers=FOUR_ANSWERS)
    app = Host(lambda: CompareScreen(runtime, session_id=session))
    assert snap_compare(app, terminal_size=(100, 30), run_before=_settle)


def test_leaderboard(snap_compare, runtime):
    from stiva_tui.tui.screens.leaderboard import LeaderboardScreen

    _compare_session(runtime.store, "q1", winner="conductor")
    _compare_session(runtime.store, "q2", winner="conductor")
    _compare_session(runtime.store, "q3", winner="w2")
    _compare_session(runtime.store, "q4", winner=None)
    app = Host(lambda: LeaderboardScreen(runtime))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle)


def test_history_sidebar(snap_compare, runtime):
    from stiva_tui.tui.widgets.history import HistorySidebar

    store = runtime.store
    chat = store.create_conversation("Group rows in pandas")
    store.add_message(chat, "user", "How do I group rows in pandas?")
    record_run(store, "How do I group rows in pandas?", "df.groupby(...)")
    session = _compare_session(store, "What is the capital of France?", winner="w1")
    from_cli = store.create_conversation("Sum of the first 100 primes", kind="ask")
    store.create_conversation("A very long title that goes on and on about Rust lifetimes and borrowing rules")
    with store.transaction() as c:  # fixed dates (an earlier year: shown as a date, in any time zone)
        c.execute("UPDATE runs SET conversation_id = ?", (chat,))
        for n, (cid,) in enumerate(c.execute("SELECT id FROM conversations ORDER BY rowid").fetchall()):
            c.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (f"2025-03-1{n}T12:00:00+00:00", cid))
        c.execute("UPDATE compare_sessions SET created_at = '2025-03-11T13:00:00+00:00' WHERE id = ?", (session,))
    assert from_cli
    app = Host(None, body=lambda: [HistorySidebar(store), Static("the chat screen goes here", id="main")])
    assert snap_compare(app, terminal_size=(100, 20), run_before=_settle)


def test_pool_screen(snap_compare, runtime):
    import asyncio

    from stiva_tui.tui.screens.pool import PoolScreen

    asyncio.run(runtime.ensure_conductor())  # the remote conductor: chosen, nothing to load
    app = Host(lambda: PoolScreen(runtime))
    assert snap_compare(app, terminal_size=(150, 30), run_before=_settle)


def keys_snapshot(snap_compare, runtime, size) -> bool:
    """The keys screen (F5) with one stored key, compared at `size`."""
    from stiva_tui import keys
    from stiva_tui.tui.screens.keys import KeysScreen

    keys.reset_backend()
    keys.set_key("paid", "pk-snapshot-000000000000wxyz")
    app = Host(lambda: KeysScreen(runtime))
    try:
        return snap_compare(app, terminal_size=size, run_before=_settle)
    finally:
        keys.reset_backend()


def test_keys_screen(snap_compare, runtime):
    assert keys_snapshot(snap_compare, runtime, SIZE)


def test_run_screen(snap_compare, runtime):
    from stiva_tui.store import Recorder
    from stiva_tui.tui.screens.run import RunScreen
    from tests.support.tui import demo_events

    recorder = Recorder(runtime.store)
    for event in demo_events():
        recorder(event)
    with runtime.store.transaction() as c:  # a fixed date on the title line
        c.execute("UPDATE runs SET created_at = '2025-03-14T12:00:00+00:00'")
    app = Host(lambda: RunScreen(runtime.store, "demo-run"))
    assert snap_compare(app, terminal_size=SIZE, run_before=_settle)

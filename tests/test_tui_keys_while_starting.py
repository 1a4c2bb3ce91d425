"""A key pressed while the app starts (issue 58, part 5): F12 at 1.5 s was dropped ("Stiva is
still starting; try again"). It is queued, and its screen opens once the runtime is there, before
the conductor's model has loaded. The real app, driven by Textual's pilot, its runtime's start
held back until the key was pressed."""

from __future__ import annotations

import asyncio

from tests.support.tui import hold_back_runtime_start, make_test_config, wait_for


async def test_f12_pressed_while_starting_opens_the_benches_once_started(fake, monkeypatch):
    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.screens.bench import BenchScreen

    gate = hold_back_runtime_start(monkeypatch)
    app = StivaApp(make_test_config(fake))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: any(w.group == "startup" and w.is_running for w in app.workers), what="start")
        await pilot.press("f12")
        await pilot.pause(0.2)
        assert app.runtime is None and not isinstance(app.screen, BenchScreen)
        assert any("as soon as Stiva has started" in n.message for n in app._notifications)
        gate.set()
        await wait_for(pilot, lambda: isinstance(app.screen, BenchScreen), what="the benches (F12)")
        assert app.runtime is not None
        await wait_for(pilot, lambda: bool(app.screen.query("#bench-list")), what="the benches drawn")
        await pilot.pause(0.2)  # mounted whole before the app is left


async def test_the_last_screen_key_pressed_while_starting_wins_and_a_failed_start_opens_none(fake, monkeypatch):
    from stiva_tui import runtime as runtime_module
    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.screens.pool import PoolScreen

    gate = hold_back_runtime_start(monkeypatch)
    app = StivaApp(make_test_config(fake))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: any(w.group == "startup" and w.is_running for w in app.workers), what="start")
        await pilot.press("f12")
        await pilot.press("f4")
        gate.set()
        await wait_for(pilot, lambda: isinstance(app.screen, PoolScreen), what="the pool (F4)")
        await pilot.pause(0.3)
        assert len(app.screen_stack) == 2  # the pool alone over the chat: F12 was replaced by F4

    async def fails(cls, *args, **kwargs):
        await gate.wait()
        raise runtime_module.StartupError("config: a broken config")

    gate = asyncio.Event()
    monkeypatch.setattr(runtime_module.Runtime, "create", classmethod(fails))
    app = StivaApp(make_test_config(fake))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: any(w.group == "startup" and w.is_running for w in app.workers), what="start")
        await pilot.press("f12")
        gate.set()
        await wait_for(pilot, lambda: app._start_failed, what="the failed start")
        await pilot.pause(0.2)
        assert len(app.screen_stack) == 1 and app.runtime is None

"""Keys and the conductor stay in step (issue 43, part 1): a key added or removed in F5 chooses
the conductor again, the status bar says so and why, and every record names the planner that
actually planned it (the trace, F7's export, `stiva history show`, a reopened compare panel).

The pool: `cond` (marked planner) on provider `fake`, whose key is in the keyring from the start;
`big` (marked planner, cheaper) on provider `lab`, whose key the test adds in F5 and removes again.
Both providers are the same real OpenAI-wire server on 127.0.0.1; the conductor is `auto`.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from textual.widgets import Input

from stiva_tui import keys
from tests.conftest_model import model_cache  # noqa: F401  (session fixture: the converted model)
from tests.support.cli import run_stiva
from tests.support.fakeprovider import Reply
from tests.support.tui_screens import make_runtime, wait_until

SIZE = (160, 45)
ONE_STEP = 'One step will do.\nmodel_id = [0]\nsubtasks = ["Answer the question in full"]\naccess_list = [[]]'


def follows_keys_config(base_url: str):
    from stiva_tui.config import parse_config

    return parse_config(
        {
            "conductor": {"backend": "auto"},
            "providers": [
                {"name": "fake", "base_url": base_url, "api_key_env": "STIVA_TEST_FAKE_KEY"},
                {"name": "lab", "base_url": base_url, "api_key_env": "STIVA_TEST_LAB_KEY"},
            ],
            "models": [
                {"id": "cond", "provider": "fake", "model": "cond", "planner": True, "price_in": 1.0, "price_out": 2.0},
                {"id": "w1", "provider": "fake", "model": "w1", "price_in": 1.0, "price_out": 2.0},
                {"id": "big", "provider": "lab", "model": "big", "planner": True, "price_in": 0.1, "price_out": 0.2},
            ],
            "workers": {"retries": 0, "timeout_s": 10, "connect_timeout_s": 2},
            "discovery": {"enabled": False},
            "catalog": False,
            "embedded_worker": False,
        }
    )


def script(fake) -> None:
    for planner in ("cond", "big"):
        fake.default(planner, Reply(ONE_STEP, usage=(50, 10)))
    fake.default("w1", Reply("Answer from w1", usage=(20, 4)))


def status_line(app) -> str:
    from textual.widgets import Static

    return str(app.chat_screen.status_bar.query_one("#status-conductor", Static).render())


async def f5_key(pilot, app, provider: str, key: str | None) -> None:
    """Add (or, with None, remove) `provider`'s key in F5, then go back to the chat."""
    from stiva_tui.tui.screens.keys import KeysScreen

    await pilot.press("f5")
    await wait_until(pilot, lambda: isinstance(app.screen, KeysScreen))
    screen = app.screen
    await app.workers.wait_for_complete()
    screen.select_provider(provider)
    if key is None:
        screen.action_remove()
    else:
        screen.query_one("#keys-input", Input).value = key
        screen.action_save()
    await app.workers.wait_for_complete()
    app.pop_screen()
    await pilot.pause()


async def ask_and_wait(pilot, app, question: str) -> str:
    """Ask in the chat; the id of the new run, once it finished."""
    from tests.support.tui import ask

    chat = app.chat_screen
    before = chat.live.state.run_id
    await ask(pilot, question)

    def done() -> bool:
        state = chat.live.state
        return bool(state.run_id) and state.run_id != before and state.status == "finished" and not chat.running

    await wait_until(pilot, done, timeout=30)
    return chat.live.state.run_id


async def run_compare(pilot, app, runtime, question: str) -> str:
    from stiva_tui.tui.screens.compare import CompareScreen

    screen = CompareScreen(runtime, question=question)
    await app.push_screen(screen)
    await pilot.pause()
    await screen.start(question, ["conductor", "w1"])
    await wait_until(pilot, lambda: all(c.finished for c in screen.columns), timeout=30)
    session = screen.session_id
    app.pop_screen()
    await pilot.pause()
    return session


def test_a_key_added_and_removed_in_f5_chooses_the_conductor_again(fake, stiva_home, monkeypatch, tmp_path):
    from stiva_tui.store.export import run_markdown
    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.exporting import export_conversation
    from stiva_tui.tui.screens.compare import CompareScreen

    monkeypatch.chdir(tmp_path)  # F7's export writes to the current folder
    script(fake)
    keys.set_key("fake", "fake-key-0000000000001111")
    config = follows_keys_config(fake.base_url)
    seen: dict = {}

    async def scenario() -> None:
        runtime = await make_runtime(config)
        app = StivaApp(config, runtime=runtime)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: runtime.conductor_ready, timeout=30)
            await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app))
            assert "big" not in [m.id for m in runtime.models]

            await f5_key(pilot, app, "lab", "lab-key-0000000000002222")
            await wait_until(pilot, lambda: "conductor: remote big" in status_line(app), timeout=30)
            assert "conductor: remote big — a key for lab was added · remote:" in status_line(app)
            assert runtime.conductor.model == "big"
            seen["big_run"] = await ask_and_wait(pilot, app, "What is the capital of France, in one line?")
            seen["conversation"] = app.chat_screen.conversation_id
            seen["session"] = await run_compare(pilot, app, runtime, "Name a prime number above ten.")

            await f5_key(pilot, app, "lab", None)
            await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app), timeout=30)
            assert "a key for lab was removed" in status_line(app)
            assert "big" not in status_line(app)
            await pilot.press("ctrl+n")  # a new chat: the next run is cond's
            await pilot.pause()
            seen["cond_run"] = await ask_and_wait(pilot, app, "What is the capital of Italy, in one line?")

            # the records name the planner that planned each run, not the runtime's current one
            big = runtime.store.get_trace(seen["big_run"]).conductor
            assert (big.backend, big.model) == ("remote", "big")
            cond = runtime.store.get_trace(seen["cond_run"]).conductor
            assert (cond.backend, cond.model) == ("remote", "cond")
            exported = export_conversation(runtime.store, seen["conversation"], "md").read_text()
            assert "conductor: remote `big`" in exported and "`cond`" not in exported
            assert "conductor: remote `big`" in run_markdown(runtime.store.get_trace(seen["big_run"]))

            # compare panel 1, reopened now that cond plans, names big: the planner of its run
            reopened = CompareScreen(runtime, session_id=seen["session"])
            await app.push_screen(reopened)
            await wait_until(pilot, lambda: reopened.columns and reopened.columns[0].finished)
            assert reopened.columns[0].subtitle == "remote: big"
        await runtime.aclose()

    asyncio.run(scenario())
    shown = run_stiva("history", "show", seen["big_run"], env={**os.environ, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())  # rich's Markdown: the backticks are styles, not text
    assert "(conductor: remote big," in text and "remote cond" not in text


@pytest.mark.model
def test_a_key_added_in_f5_stops_the_embedded_model_planning_and_a_removed_one_brings_it_back(
    fake,
    stiva_home,
    model_cache,  # noqa: F811
):
    """The user's first hour: no key, the embedded 270M plans; a key added in F5 makes a real
    model plan (never the 270M for real models); the key removed, the 270M plans again, and the
    run planned meanwhile still names its own planner."""
    from stiva_tui.tui.app import StivaApp

    script(fake)
    config = follows_keys_config(fake.base_url).model_copy(update={"embedded_worker": True})
    seen: dict = {}

    async def scenario() -> None:
        runtime = await make_runtime(config)
        app = StivaApp(config, runtime=runtime)
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: "conductor: embedded CPU" in status_line(app), timeout=300)
            await f5_key(pilot, app, "fake", "fake-key-0000000000001111")
            await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app), timeout=60)
            assert "a key for fake was added" in status_line(app)
            seen["run"] = await ask_and_wait(pilot, app, "What is the capital of France, in one line?")
            assert [r.model for r in fake.requests][:1] == ["cond"]  # the real model planned
            await f5_key(pilot, app, "fake", None)
            await wait_until(pilot, lambda: "conductor: embedded CPU" in status_line(app), timeout=120)
            assert "a key for fake was removed" in status_line(app) and "remote cond" not in status_line(app)
            planned = runtime.store.get_trace(seen["run"]).conductor
            assert (planned.backend, planned.model) == ("remote", "cond")
        await runtime.aclose()

    asyncio.run(scenario())


def test_a_local_server_coming_and_going_chooses_the_conductor_again(fake):
    """The app looks at the pool again now and then: a local server the config names (an Ollama
    started after Stiva, say) that comes up makes its model plan when it is the cheapest marked
    planner, and the conductor goes back when it stops; the status bar says which and why."""
    from stiva_tui.config import parse_config
    from stiva_tui.pool.discovery import DEFAULT_PORTS
    from stiva_tui.tui.app import StivaApp
    from tests.support.fakeprovider import FakeProvider

    probe = FakeProvider()  # a free port, with nothing listening on it yet
    port = probe.port
    probe._server.server_close()
    local_url = f"http://127.0.0.1:{port}/v1"
    script(fake)
    keys.set_key("fake", "fake-key-0000000000001111")
    config = parse_config(
        {
            "conductor": {"backend": "auto"},
            "providers": [
                {"name": "fake", "base_url": fake.base_url, "api_key_env": "STIVA_TEST_FAKE_KEY"},
                {"name": "mylocal", "base_url": local_url},
            ],
            "models": [
                {"id": "cond", "provider": "fake", "model": "cond", "planner": True, "price_in": 1.0, "price_out": 2.0},
                {"id": "w1", "provider": "fake", "model": "w1", "price_in": 1.0, "price_out": 2.0},
                {"id": "lm", "provider": "mylocal", "model": "lm", "planner": True},
            ],
            # only the servers the config names are probed, not the machine's default ports
            "discovery": {"enabled": True, "timeout_s": 1.0, "ports": dict.fromkeys(DEFAULT_PORTS, 0)},
            "catalog": False,
            "embedded_worker": False,
        }
    )

    async def scenario() -> None:
        from stiva_tui.runtime import Runtime

        runtime = await Runtime.create(config)  # discovery as the config says: on
        assert not runtime.pool["lm"].available and runtime.pool["lm"].reason.startswith("unreachable")
        app = StivaApp(config, runtime=runtime)
        app.POOL_CHECK_S = 0.2
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app), timeout=30)
            server = FakeProvider(port=port).start()
            try:
                await wait_until(pilot, lambda: "conductor: remote lm" in status_line(app), timeout=30)
                assert f"— a local server appeared at {local_url}" in status_line(app)
            finally:
                server.stop()
            await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app), timeout=30)
            assert f"— a local server went away at {local_url}" in status_line(app)
            assert any("The conductor is now remote cond (was remote lm)" in n.message for n in app._notifications)
        await runtime.aclose()

    asyncio.run(scenario())


async def test_a_configured_remote_planner_whose_key_was_removed_plans_no_more(fake):
    """`backend = "remote"` names its planner: with its key removed it is not kept planning on
    the old key, and the next question says in one line why it cannot run."""
    from stiva_tui.conductor.base import ConductorError
    from stiva_tui.config import parse_config

    keys.set_key("fake", "fake-key-0000000000001111")
    config = parse_config(
        {
            "conductor": {"backend": "remote", "model": "cond"},
            "providers": [{"name": "fake", "base_url": fake.base_url, "api_key_env": "STIVA_TEST_FAKE_KEY"}],
            "models": [{"id": "cond", "provider": "fake", "model": "cond"}],
            "discovery": {"enabled": False},
            "catalog": False,
        }
    )
    runtime = await make_runtime(config)
    try:
        assert (await runtime.ensure_conductor()).model == "cond"
        assert await runtime.pool_refresh() == ""  # nothing changed: the conductor is kept
        assert runtime.conductor is not None
        keys.delete_key("fake")
        assert await runtime.pool_refresh() == "a key for fake was removed"
        assert runtime.conductor is None and runtime.pool_change == "a key for fake was removed"
        with pytest.raises(ConductorError, match=r"the remote conductor cond is not available now \(no key"):
            await runtime.ensure_conductor()
    finally:
        await runtime.aclose()

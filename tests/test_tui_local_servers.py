"""A local server that appears or goes while the app is open is announced once (issue 52, item 2):
a notice names the server and what it changed in the pool, and the conductor it changes has its
own. The server is real (the scripted OpenAI-wire provider) and starts after the app did, on the
port `[discovery] ports` names for vLLM; nothing else on the machine is probed."""

from __future__ import annotations

import asyncio

from tests.support.fakeprovider import FakeProvider, Reply
from tests.support.other_user import free_port
from tests.support.tui_screens import wait_until
from tests.test_tui_conductor_follows_keys import ONE_STEP, SIZE, status_line


def local_servers_config(fake_url: str, port: int):
    from stiva_tui.config import parse_config

    return parse_config(
        {
            # auto: the config's [conductor] model plans once it is in the pool, the cheapest
            # marked planner until then
            "conductor": {"backend": "auto", "model": "vllm/local-planner"},
            "providers": [{"name": "fake", "base_url": fake_url}],
            "models": [{"id": "cond", "provider": "fake", "model": "cond", "planner": True, "price_in": 1.0}],
            "discovery": {"timeout_s": 1.0, "ports": {"ollama": 0, "vllm": port, "llamacpp": 0, "lmstudio": 0}},
            "workers": {"retries": 0, "timeout_s": 10, "connect_timeout_s": 2},
            "catalog": False,
            "embedded_worker": False,
        }
    )


def notices(app, title: str) -> list[str]:
    return [n.message for n in app._notifications if n.title == title]


def test_a_local_server_that_appears_and_goes_is_announced_once(fake, stiva_home):
    from stiva_tui.runtime import Runtime
    from stiva_tui.tui.app import StivaApp

    fake.default("cond", Reply(ONE_STEP, usage=(50, 10)))
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    config = local_servers_config(fake.base_url, port)

    async def scenario() -> None:
        runtime = await Runtime.create(config)  # discovery as the config says: nothing on the port yet
        assert not any(m.source == "discovered" for m in runtime.pool)
        app = StivaApp(config, runtime=runtime)
        app.POOL_CHECK_S = 0.2
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app), timeout=30)
            assert notices(app, "Local server") == []
            server = FakeProvider(port=port)
            server.models_listed = ["local-planner", "local-coder"]
            server.start()
            try:
                await wait_until(pilot, lambda: "conductor: remote vllm/local-planner" in status_line(app), timeout=30)
                await wait_until(pilot, lambda: notices(app, "Conductor"), timeout=10)
                for _ in range(5):  # later checks find the same server: nothing more is said
                    await pilot.pause(0.2)
                assert notices(app, "Local server") == [
                    f"vLLM at {url} appeared: vllm/local-planner and vllm/local-coder joined the pool"
                ]
                assert notices(app, "Conductor") == [
                    "The conductor is now remote vllm/local-planner (was remote cond): "
                    f"a local server appeared at {url}."
                ]
            finally:
                server.stop()
            await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app), timeout=30)
            for _ in range(5):
                await pilot.pause(0.2)
            assert notices(app, "Local server")[1:] == [
                f"vLLM at {url} went away: vllm/local-planner and vllm/local-coder left the pool"
            ]
            assert len(notices(app, "Conductor")) == 2
            assert f"a local server went away at {url}" in notices(app, "Conductor")[1]
        await runtime.aclose()

    asyncio.run(scenario())


def test_a_server_of_another_user_is_left_out_with_one_notice_and_a_line_on_f4(fake, stiva_home):
    """Another login user's server on the port at start: not in the pool, a warning notice once
    (not again at each later check), and the pool screen (F4) says the same line."""
    from textual.widgets import Static

    from stiva_tui.runtime import Runtime
    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.screens.pool import PoolScreen
    from tests.support.other_user import LOGIN_UID, ServerAs, needs_root

    needs_root()
    fake.default("cond", Reply(ONE_STEP, usage=(50, 10)))
    with ServerAs(LOGIN_UID, free_port(), ("local-planner",)) as stranger:
        config = local_servers_config(fake.base_url, stranger.port)
        line = (
            f"Left out: vLLM at {stranger.base_url} runs as another user (uid {LOGIN_UID}); "
            "to use it, name it under [[providers]] in the config"
        )

        async def scenario() -> None:
            runtime = await Runtime.create(config)
            assert not any(m.source == "discovered" for m in runtime.pool)
            app = StivaApp(config, runtime=runtime)
            app.POOL_CHECK_S = 0.2
            async with app.run_test(size=(200, 45)) as pilot:
                await wait_until(pilot, lambda: "conductor: remote cond" in status_line(app), timeout=30)
                await wait_until(pilot, lambda: notices(app, "Local server"), timeout=10)
                for _ in range(5):
                    await pilot.pause(0.2)
                assert notices(app, "Local server") == [line]
                assert [n.severity for n in app._notifications if n.title == "Local server"] == ["warning"]
                await pilot.press("f4")
                await wait_until(pilot, lambda: isinstance(app.screen, PoolScreen))
                shown = str(app.screen.query_one("#pool-servers-left-out", Static).render())
                assert shown == line[0].lower() + line[1:]
                assert "vllm/local-planner" not in [m.id for m in runtime.pool]
            await runtime.aclose()

        asyncio.run(scenario())
    assert all(request.startswith("GET ") for request in stranger.requests)


def test_discovery_news_says_what_each_server_changed():
    from stiva_tui.pool.registry import Pool
    from stiva_tui.pool.types import PoolModel
    from stiva_tui.runtime.root import discovery_news

    def served(url: str, *names: str, provider: str = "ollama") -> list[PoolModel]:
        return [
            PoolModel(id=f"{provider}/{n}", provider=provider, model=n, base_url=url, source="discovered")
            for n in names
        ]

    a, b = "http://127.0.0.1:11434/v1", "http://127.0.0.1:1234/v1"
    before = Pool(served(a, "m1", "m2"))
    after = Pool(served(a, "m2", "m3") + served(b, *[f"x{i}" for i in range(5)], provider="lmstudio"))
    assert discovery_news(before, after) == [
        f"Ollama at {a} now serves ollama/m3 too and no longer serves ollama/m1",
        f"LM Studio at {b} appeared: lmstudio/x0, lmstudio/x1, lmstudio/x2 and 2 more joined the pool",
    ]
    assert discovery_news(after, after) == []

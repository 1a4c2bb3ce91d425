"""Helpers for the compare/leaderboard/history/pool/keys screen tests: configs over the scripted
local provider, runtimes with a remote conductor, and a small host app that shows one screen."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App, ComposeResult
from textual.screen import Screen

from tests.support.fakeprovider import Reply

PLAN = 'I will draft, then refine.\nmodel_id = [1, 2]\nsubtasks = ["Draft", "Refine"]\naccess_list = [[], [0]]'


def screens_config(
    base_url: str, *, provider_extra: dict | None = None, catalog: bool = False, extra_models: list[dict] | None = None
):
    """cond (the remote conductor), w1 and w2 on one provider; no discovery, no catalog."""
    from stiva_tui.config import parse_config

    provider = {"name": "fake", "base_url": base_url, **(provider_extra or {})}
    return parse_config(
        {
            "conductor": {"backend": "remote", "model": "cond"},
            "providers": [provider],
            "models": [
                {
                    "id": "cond",
                    "provider": "fake",
                    "model": "cond",
                    "description": "the planner",
                    "price_in": 0.5,
                    "price_out": 1.0,
                },
                {
                    "id": "w1",
                    "provider": "fake",
                    "model": "w1",
                    "description": "first worker",
                    "price_in": 1.0,
                    "price_out": 2.0,
                },
                {
                    "id": "w2",
                    "provider": "fake",
                    "model": "w2",
                    "description": "second worker",
                    "price_in": 3.0,
                    "price_out": 6.0,
                },
                *(extra_models or []),
            ],
            "discovery": {"enabled": False},
            "catalog": catalog,
        }
    )


def with_a_locked_model(config, **paid: object):
    """`config` and a provider "locked" whose key ($LOCKED_KEY; unset it) is missing, with a model
    "paid" on it (a copy of the second model, `paid` fields over it)."""
    locked = config.providers[0].model_copy(
        update={"name": "locked", "base_url": "https://locked.invalid/v1", "api_key_env": "LOCKED_KEY"}
    )
    model = config.models[1].model_copy(update={"id": "paid", "provider": "locked", **paid})
    return config.model_copy(update={"providers": [*config.providers, locked], "models": [*config.models, model]})


def script_fake(fake) -> None:
    """cond plans w1 -> w2; w1/w2 answer directly or as steps, with fixed usage."""
    fake.default("cond", Reply(PLAN, usage=(100, 30)))

    def worker(name: str) -> Callable:
        def reply(request) -> Reply:
            if "Your assigned subtask: Refine" in request.user_text:
                return Reply(f"Orchestrated final answer from {name}", usage=(40, 6), chunk_delay_s=0.01)
            if "Your assigned subtask: Draft" in request.user_text:
                return Reply(f"Draft by {name}", usage=(30, 3))
            return Reply(f"Direct answer by {name}", usage=(20, 4), chunk_delay_s=0.01)

        return reply

    fake.default("w1", worker("w1"))
    fake.default("w2", worker("w2"))


async def make_runtime(config, **kwargs: Any):
    """A Runtime with a store in STIVA_HOME; no conductor is chosen yet (a run chooses it)."""
    from stiva_tui.runtime import Runtime

    return await Runtime.create(config, discover=False, **kwargs)


class Host(App):
    """Shows one screen, built when the app mounts."""

    def __init__(self, make_screen: Callable[[], Screen], body: Callable[[], ComposeResult] | None = None):
        super().__init__()
        self.make_screen = make_screen
        self.body = body

    def compose(self) -> ComposeResult:
        if self.body is not None:
            yield from self.body()

    def on_mount(self) -> None:
        if self.make_screen is not None:
            self.push_screen(self.make_screen())

    def export_screenshot(self, *, title: str | None = None, simplify: bool = False) -> str:
        """As the app's: spaces kept in every SVG viewer."""
        from stiva_tui.tui.screenshot import preserve_spaces

        return preserve_spaces(super().export_screenshot(title=title, simplify=simplify))


async def wait_until(pilot, predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    """Let the app run until `predicate()` holds (fail after `timeout` seconds)."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError("timed out waiting for the app")
        await pilot.pause(0.05)

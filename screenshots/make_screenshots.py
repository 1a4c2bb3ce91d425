"""Drive the real app with Textual's pilot against scripted local providers and save SVGs.

    .venv/bin/python screenshots/make_screenshots.py          # writes screenshots/*.svg
    .venv/bin/python screenshots/make_screenshots.py fork     # writes only screenshots/fork.svg

The providers are FakeProviders (tests/support/fakeprovider.py): real HTTP on 127.0.0.1, with latencies
chosen so that a run is caught mid-way. Model names and prices are made up for the pictures.
Nothing here reaches the internet; STIVA_HOME is a temporary folder.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

SIZE = (140, 42)

PLAN = """The question has two independent parts: what changed in the data, and which fix is cheapest.
Two models draft in parallel, a third checks both, and the last one writes the answer.
model_id = [1, 2, 3, 1]
subtasks = ["List the likely causes of the slow query from the plan shown", "Propose indexes and rewrites for the query", "Check both drafts for mistakes and missing cases", "Write the final answer with the fix and the SQL"]
access_list = [[], [], [0, 1], "all"]"""

ANSWER = """The query slowed down because `orders.customer_id` lost its index in the last migration, so
every lookup scans the table.

```sql
CREATE INDEX CONCURRENTLY orders_customer_id_idx ON orders (customer_id);
ANALYZE orders;
```

After the index is back the plan uses an index scan again (**~3 ms** instead of 1.8 s)."""

BRANCH_ANSWER = """`orders.customer_id` lost its index in yesterday's migration: every lookup now scans 1.2M rows.

```sql
CREATE INDEX CONCURRENTLY orders_customer_id_idx ON orders (customer_id);
ANALYZE orders;
```

Add the index back to the migration too, or the next deploy drops it again."""

MOA_ANSWER = """All three drafts agree: `orders.customer_id` lost its index in yesterday's migration.
Recreate it with `CREATE INDEX CONCURRENTLY`, then run `ANALYZE orders` so the planner
picks the index scan again."""


def models() -> list[dict]:
    return [
        {"id": "conductor-7b", "provider": "lab", "model": "conductor-7b", "description": "the planner"},
        {
            "id": "gpt-4.1",
            "provider": "lab",
            "model": "gpt-4.1",
            "price_in": 2.0,
            "price_out": 8.0,
            "description": "strong generalist",
        },
        {
            "id": "claude-sonnet-4",
            "provider": "lab",
            "model": "claude-sonnet-4",
            "price_in": 3.0,
            "price_out": 15.0,
            "description": "careful coder",
        },
        {
            "id": "qwen3-32b",
            "provider": "lab",
            "model": "qwen3-32b",
            "price_in": 0.1,
            "price_out": 0.3,
            "description": "fast open model",
        },
    ]


def script(fake, slow: bool) -> None:
    from tests.support.fakeprovider import Reply

    words = (
        "Looking at the plan: a sequential scan on orders (1.2M rows) where an index scan was "
        "expected; the filter on customer_id removes 99.9% of the rows. "
    ) * 3
    delay = 0.15 if slow else 0.0
    fake.script("conductor-7b", Reply(PLAN, usage=(410, 96)))

    def gpt(request) -> Reply:
        if "Synthesize the responses" in request.user_text:  # the Mixture-of-Agents aggregator
            return Reply(MOA_ANSWER, chunk_delay_s=delay, usage=(1900, 70))
        return Reply(ANSWER if "final answer" in request.user_text else words, chunk_delay_s=delay, usage=(620, 180))

    fake.default("gpt-4.1", gpt)
    fake.default(
        "claude-sonnet-4",
        Reply(
            "Add `CREATE INDEX orders_customer_id_idx ON orders (customer_id)`; "
            "the rewrite with EXISTS is not needed once the index is back. " * 2,
            chunk_delay_s=delay * 1.5,
            usage=(600, 140),
        ),
    )
    fake.default(
        "qwen3-32b",
        Reply(
            "Both drafts agree on the missing index. One gap: run ANALYZE after "
            "creating it, or the planner keeps the old statistics.",
            chunk_delay_s=delay,
            usage=(900, 60),
        ),
    )


async def wait_until(pilot, predicate, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("the app never reached the state to photograph")
        await pilot.pause(0.05)


async def ask(pilot, text: str) -> None:
    prompt = pilot.app.chat_screen.query_one("#prompt")
    prompt.focus()
    prompt.insert(text)
    await pilot.press("ctrl+j")


def done(app):
    return lambda: app.chat_screen.live.state.status == "finished" and not app.chat_screen.running


async def shoot(out: Path) -> list[Path]:
    from stiva_tui.config import parse_config
    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.dialogs import ForkDialog
    from tests.support.fakeprovider import FakeProvider, Reply

    saved: list[Path] = []
    with FakeProvider() as fake:
        config = parse_config(
            {
                "conductor": {"backend": "remote", "model": "conductor-7b"},
                "providers": [{"name": "lab", "base_url": fake.base_url}],
                "models": models(),
                "workers": {"retries": 0},
                "moa": {"proposers": ["gpt-4.1", "claude-sonnet-4", "qwen3-32b"], "aggregator": "gpt-4.1", "layers": 1},
                "discovery": {"enabled": False},
                "catalog": False,
                "theme": "stiva-dark",
            }
        )
        app = StivaApp(config)
        async with app.run_test(size=SIZE) as pilot:
            chat = app.chat_screen
            await wait_until(pilot, lambda: chat.status_bar.conductor is not None)
            # An earlier conversation, for the history sidebar.
            script(fake, slow=False)
            await ask(pilot, "Why is the nightly report job twice as slow since Monday?")
            await wait_until(pilot, done(app))
            await pilot.press("ctrl+n")
            # The one photographed mid-run.
            script(fake, slow=True)
            await ask(pilot, "This query went from 40 ms to 1.8 s after yesterday's deploy. Why, and how do I fix it?")
            # Both drafts streaming, the check and the answer waiting for them.
            state = lambda: chat.live.state  # noqa: E731 - a new run gets a new state
            await wait_until(
                pilot,
                lambda: (
                    state().rounds
                    and len(state().rounds[0].steps) == 4
                    and state().step(1, 0).streamed_chars > 240
                    and state().step(1, 1).streamed_chars > 100
                ),
            )
            chat.tree.focus()
            chat.tree.move_cursor(chat.tree.node_for(("step", 1, 0)))
            await pilot.pause(0.3)
            saved.append(Path(app.save_screenshot("chat-running.svg", str(out))))
            await wait_until(pilot, done(app), timeout=60)

            await pilot.press("f2")
            await pilot.pause(0.5)
            saved.append(Path(app.save_screenshot("history.svg", str(out))))
            await pilot.press("f2")

            await pilot.press("f4")
            await pilot.pause(0.5)
            saved.append(Path(app.save_screenshot("pool.svg", str(out))))
            app.pop_screen()
            await pilot.pause(0.2)

            script(fake, slow=True)
            from stiva_tui.tui.screens.compare import CONDUCTOR, MOA, CompareScreen

            compare = CompareScreen(app.runtime, systems=[CONDUCTOR, MOA, "claude-sonnet-4"])
            await app.push_screen(compare)
            await pilot.pause(0.3)
            compare.query_one("#compare-question").insert(
                "This query went from 40 ms to 1.8 s after yesterday's deploy. Why?"
            )
            await compare.start(
                "This query went from 40 ms to 1.8 s after yesterday's deploy. Why?",
                [CONDUCTOR, MOA, "claude-sonnet-4"],
            )
            await wait_until(pilot, lambda: not compare.running, timeout=60)
            await pilot.pause(0.3)
            saved.append(Path(app.save_screenshot("compare.svg", str(out))))
            app.pop_screen()
            await pilot.pause(0.2)

            # A fork: r on step 3 (the check, on qwen3-32b), run again on claude-sonnet-4; step 4
            # reads it and runs again, steps 1 and 2 keep their drafts. Then both side by side.
            fake.script("gpt-4.1", Reply(BRANCH_ANSWER, usage=(1400, 150)))
            chat.tree.focus()
            chat.tree.move_cursor(chat.tree.node_for(("step", 1, 2)))
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, ForkDialog))
            dialog = app.screen
            while dialog.chosen() != "claude-sonnet-4":
                await pilot.press("down")
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, CompareScreen) and len(app.screen.columns) == 2)
            await pilot.pause(0.5)
            saved.append(Path(app.save_screenshot("fork.svg", str(out))))
    return saved


def main() -> int:
    wanted = {f"{name.removesuffix('.svg')}.svg" for name in sys.argv[1:]}  # none: every screenshot
    with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as shots:
        os.environ["STIVA_HOME"] = home
        os.environ.setdefault("PYTHON_KEYRING_BACKEND", "keyrings.alt.file.PlaintextKeyring")
        for path in asyncio.run(shoot(Path(shots))):
            if not wanted or path.name in wanted:
                shutil.copyfile(path, HERE / path.name)
                print(HERE / path.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""SVG snapshots of the chat screen in each theme (update with `pytest --snapshot-update`).

The run shown is replayed from fixed events (tests/support/tui.demo_events) in frozen mode: no
clocks, spinners frozen, no ports or ids on screen, so the pixels are the same on every machine.
"""

from __future__ import annotations

import pytest

from stiva_tui.config import parse_config
from stiva_tui.tui.app import StivaApp
from tests.support.tui import DEMO_QUESTION, demo_events, replay_run, wait_for

SIZE = (140, 42)


def snapshot_app(theme: str) -> StivaApp:
    # Nothing listens on port 9: the replayed run makes no calls, and the URL is never shown.
    config = parse_config(
        {
            "conductor": {"backend": "remote", "model": "cond"},
            "providers": [{"name": "fake", "base_url": "http://127.0.0.1:9/v1"}],
            "models": [
                {"id": "cond", "provider": "fake", "model": "cond"},
                {"id": "w1", "provider": "fake", "model": "w1", "price_in": 1, "price_out": 2},
                {"id": "w2", "provider": "fake", "model": "w2", "price_in": 3, "price_out": 6},
            ],
            "discovery": {"enabled": False},
            "catalog": False,
            "theme": theme,
        }
    )
    return StivaApp(config, frozen=True)


def replay(finished: bool):
    return replay_run(DEMO_QUESTION, demo_events(finished))


@pytest.mark.parametrize("theme", ["stiva-dark", "stiva-light", "stiva-high-contrast"])
def test_chat_finished_run(snap_compare, theme):
    assert snap_compare(snapshot_app(theme), terminal_size=SIZE, run_before=replay(True))


def test_chat_mid_run(snap_compare):
    assert snap_compare(snapshot_app("stiva-dark"), terminal_size=SIZE, run_before=replay(False))


def test_chat_at_80_columns_editing_a_question(snap_compare):
    """The narrowest terminal: f1 Help first in the footer, the question being edited marked."""

    async def run_before(pilot) -> None:
        from textual.widgets import TextArea

        await replay(True)(pilot)
        await pilot.press("ctrl+o")
        # The cursor and its line's highlight show only while the box has focus, and the cursor
        # blinks: wait for the focus (it moves a message later, which a busy machine delays: a
        # 4-second wait once ran out beside a CPU hog and the snapshot lost the highlight), then
        # hold the blink in its on phase and repaint, so the picture does not depend on when it is
        # taken. (cursor_blink = False is not that: this Textual then draws no cursor in the line,
        # and the committed picture had one only while a line drawn before stayed cached.)
        await wait_for(pilot, lambda: isinstance(pilot.app.focused, TextArea), timeout=30, what="the prompt's focus")
        for box in pilot.app.screen.query(TextArea):
            box._pause_blink(visible=True)  # Textual's own: the cursor shown, its timer stopped
            box.refresh()
        await pilot.pause()
        await pilot.pause(0.2)

    assert snap_compare(snapshot_app("stiva-dark"), terminal_size=(80, 24), run_before=run_before)

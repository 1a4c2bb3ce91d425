"""Compare mode's verdicts beyond a winner: a tie (0), "all wrong" (x), and a changed vote said as
such; each stored, shown on every column in words and colour, and shown again when reopened."""

from __future__ import annotations

from textual.widgets import Button, TextArea

from stiva_tui.tui.screens.compare import CompareScreen
from tests.support.tui_screens import Host, make_runtime, screens_config, script_fake, wait_until

SIZE = (160, 45)


def buttons(screen) -> list[str]:
    return [str(c.query_one(".column-vote", Button).label) for c in screen.columns]


async def test_a_tie_all_wrong_and_a_changed_vote(fake):
    script_fake(fake)
    runtime = await make_runtime(screens_config(fake.base_url))
    notes: list[str] = []
    app = Host(lambda: CompareScreen(runtime, systems=["conductor", "w1", "w2"]))
    try:
        async with app.run_test(size=SIZE) as pilot:
            screen = app.screen
            screen.notify = lambda message, **kw: notes.append(message)
            screen.query_one("#compare-question", TextArea).text = "Which is best?"
            await pilot.press("ctrl+j")
            await wait_until(pilot, lambda: len(screen.columns) == 3 and all(c.finished for c in screen.columns))
            await pilot.press("2")
            await pilot.pause()
            assert notes[-1] == "Marked w1 as the better answer"
            await pilot.press("0")
            await pilot.pause()
            session = runtime.store.get_compare_session(screen.session_id)
            assert (session.vote_kind, session.winner) == ("tie", None)
            assert buttons(screen) == ["Tie (1)", "Tie (2)", "Tie (3)"]
            assert all(c.has_class("-tie") and not c.has_class("-winner") for c in screen.columns)
            assert notes[-1] == "Vote changed from w1 better: now a tie: every answer as good"
            await pilot.press("x")
            await pilot.pause()
            assert runtime.store.get_compare_session(screen.session_id).vote_kind == "all_wrong"
            assert buttons(screen) == ["All wrong (1)", "All wrong (2)", "All wrong (3)"]
            assert notes[-1] == "Vote changed from a tie: now every answer as wrong"
            session_id = screen.session_id
        # reopened, the verdict is shown as it was left
        again = Host(lambda: CompareScreen(runtime, session_id=session_id))
        async with again.run_test(size=SIZE) as pilot:
            screen = again.screen
            await wait_until(pilot, lambda: len(screen.columns) == 3)
            await pilot.pause()
            assert buttons(screen) == ["All wrong (1)", "All wrong (2)", "All wrong (3)"]
            assert screen.verdict == ("all_wrong", None)
    finally:
        await runtime.aclose()

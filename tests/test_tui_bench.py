"""The bench screen (F12): benches and their reports read from a real SQLite history, filled through
the store's own API (`open_bench`, `record_bench_item`) and the engine's recorder for the runs;
pilot tests in a small host app and in the real app, and SVG snapshots at 80x24.

Update the snapshots after an intended change: `pytest tests/test_tui_bench.py --snapshot-update`.
"""

from __future__ import annotations

import itertools

import pytest
from textual.widgets import ContentSwitcher, DataTable, Static, TabbedContent

from stiva_tui.bench.report import build_report, terminal_frontier, wilson
from stiva_tui.store import BenchItemRecord, Store
from stiva_tui.tui import messages as msg
from stiva_tui.tui.screens.bench import BenchScreen
from stiva_tui.tui.widgets.bench_report import BenchReportView
from tests.support.tui import ask, labels, make_runtime, make_test_config, script_plan, wait_for
from tests.support.tui_screens import Host

SIZE = (80, 24)
SYSTEMS = ["conductor", "direct:w1"]
# (item, question, expected answer); each system's outcome per item below
ITEMS = [
    ("add-1", "What is 2+3?", "5"),
    ("cap-fr", "Capital of France?", "Paris"),
    ("primes", "How many primes are below 20?", "8"),
]
OUTCOMES = {  # system -> item -> (status, correct, extracted, error, latency, cost, tokens)
    "conductor": {
        "add-1": ("graded", True, "5", None, 3.2, 0.0021, 900),
        "cap-fr": ("graded", True, "Paris", None, 2.5, 0.0018, 800),
        "primes": ("graded", False, "7", "expected [2, 3, 5]", 4.9, 0.0030, 1300),
    },
    "direct:w1": {
        "add-1": ("graded", True, "5", None, 0.6, 0.00003, 40),
        "cap-fr": ("error", False, "", "w1: 429 Too Many Requests", 1.1, 0.0, 0),
        "primes": ("graded", False, "[2, 3, 5, 7]", "expected [2, 3, 5]", 0.9, 0.00004, 60),
    },
}


@pytest.fixture
def fixed_clock(monkeypatch):
    """The store's timestamps, one minute apart from a fixed start: the dates on screen never move."""
    from stiva_tui.store import benches

    minutes = itertools.count()

    def timestamp() -> str:
        m = next(minutes)
        return f"2026-11-30T{9 + m // 60:02d}:{m % 60:02d}:00.000000+00:00"

    monkeypatch.setattr(benches, "timestamp", timestamp)


def stored_run(store: Store, question: str, answer: str, system: str, *, run_id: str) -> str:
    """A finished run of `system`, written by the engine's recorder as a bench run (no conversation);
    a conductor run gets a two-step plan, so that its tree has steps to show."""
    from stiva_tui.core import events as ev
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow
    from stiva_tui.store import Recorder

    recorder = Recorder(store)
    if system == "conductor":
        workflow = Workflow((Step(1, "Work it out step by step", ()), Step(2, "Check and state the answer", (0,))))
        events = [
            ev.RunStarted(run_id, question, "conductor", "remote", "cond", system=system, source="bench"),
            ev.RoundStarted(run_id, 1),
            ev.WorkflowReady(run_id, 1, workflow, "Solve, then check.", Usage(300, 40), 0.5),
            ev.StepStarted(run_id, 1, 0, "w1", workflow.steps[0].subtask, (), 1),
            ev.StepFinished(run_id, 1, 0, "w1", f"Working: {answer}", Usage(50, 20), 0.0001, 1.0, 1),
            ev.StepStarted(run_id, 1, 1, "w2", workflow.steps[1].subtask, (0,), 1, writes_answer=True, final=True),
            ev.StepFinished(run_id, 1, 1, "w2", answer, Usage(80, 10), 0.0003, 1.5, 1),
        ]
    else:
        events = [ev.RunStarted(run_id, question, "direct", system=system, source="bench")]
    for event in [*events, ev.RunFinished(run_id, answer, ev.Totals(430, 70, 0.0021, 3.2))]:
        recorder(event)
    return run_id


def fill_store(
    store: Store,
    bench_id: str = "basic-3f2a9c0d",
    *,
    suite: str = "basic",
    systems: list[str] = SYSTEMS,
    status: str = "finished",
    stop_reason: str | None = None,
) -> None:
    """A bench of every system on ITEMS, each graded item pointing at a stored run."""
    store.open_bench(
        bench_id, suite=suite, suite_hash="sha-" + bench_id, systems=systems, config_hash="cfg", items=len(ITEMS)
    )
    for item_id, question, _ in ITEMS:
        for system in systems:
            status_, correct, extracted, error, latency, cost, tokens = OUTCOMES[system][item_id]
            run_id = None
            if status_ == "graded":
                run_id = stored_run(
                    store,
                    question,
                    f"The answer is {extracted}.",
                    system,
                    run_id=f"run-{bench_id}-{system}-{item_id}".replace(":", "-"),
                )
            store.record_bench_item(
                bench_id,
                BenchItemRecord(
                    system=system,
                    item_id=item_id,
                    run_id=run_id,
                    status=status_,
                    correct=correct,
                    answer=f"The answer is {extracted}." if extracted else "",
                    extracted=extracted,
                    error=error,
                    prompt_tokens=tokens * 3 // 4,
                    completion_tokens=tokens // 4,
                    cost_usd=cost,
                    latency_s=latency,
                ),
            )
    if status != "running":
        store.close_bench(bench_id, status, stop_reason)


@pytest.fixture
def store(tmp_path, fixed_clock):
    with Store.open(tmp_path / "history.db") as opened:
        yield opened


def _cells(table: DataTable, row: int) -> list[str]:
    return [str(cell) for cell in table.get_row_at(row)]


async def _settled(pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def _open_first_report(pilot) -> BenchScreen:
    screen = pilot.app.screen
    await wait_for(pilot, lambda: screen.query_one("#bench-list", DataTable).row_count > 0, what="the benches")
    await pilot.press("enter")
    await wait_for(pilot, lambda: screen.shown is not None, what="the report")
    await _settled(pilot)
    return screen


# --- the screen alone ------------------------------------------------------------------------------


async def test_lists_benches_newest_first_with_status_and_progress(store):
    fill_store(store, "older-bench", suite="offline", systems=["conductor"])
    fill_store(store, "basic-3f2a9c0d", status="stopped", stop_reason="budget")
    app = Host(lambda: BenchScreen(store))
    async with app.run_test(size=SIZE) as pilot:
        table = app.screen.query_one("#bench-list", DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, what="both benches")
        assert _cells(table, 0)[:4] == ["basic", "conductor, direct:w1", "stopped", "6/6"]
        assert _cells(table, 1)[:4] == ["offline", "conductor", "finished", "3/3"]
        assert _cells(table, 0)[4].startswith("2026-11-30 09:")
        assert not app.screen.query_one("#bench-empty", Static).display


async def test_report_shows_accuracy_interval_errors_and_the_frontier(store):
    fill_store(store)
    app = Host(lambda: BenchScreen(store))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_first_report(pilot)
        assert screen.query_one("#bench-views", ContentSwitcher).current == "bench-report"
        heading = str(screen.query_one("#report-heading", Static).render())
        assert "basic" in heading and "finished" in heading and "3 items × 2 systems, 6/6 answers" in heading
        systems = screen.query_one("#report-systems", DataTable)
        conductor, direct = _cells(systems, 0), _cells(systems, 1)
        lo, hi = wilson(2, 3)
        assert conductor[:5] == ["conductor", "3", "66.7%", f"{lo:.0%}–{hi:.0%}", "0"]
        assert direct[:5] == ["direct:w1", "3", "33.3%", "{:.0%}–{:.0%}".format(*wilson(1, 3)), "1"]
        assert conductor[5:] == ["1.0k", "$0.0023", "3.2s", "4.7s"]  # tokens/q, cost/q, p50, p95
        # The frontier plot, as `stiva bench` draws it, shown as-is.
        frontier = str(screen.query_one("#report-frontier", Static).render())
        assert "A conductor: accuracy 0.667" in frontier and "B direct:w1: accuracy 0.333" in frontier
        view = screen.query_one(BenchReportView)
        assert frontier == terminal_frontier(screen.shown.report, *view.frontier_size)
        items = screen.query_one("#report-items", DataTable)
        assert items.row_count == 6
        assert _cells(items, 0) == ["add-1", "conductor", "✓ right", "5", "3.2s", ""]
        cells = _cells(items, 3)
        assert (cells[2], cells[3], cells[5]) == ("! error", "", "w1: 429 Too Many Requests")
        # what was read, and why it is not right with the expected answer; brackets stay text
        cells = _cells(items, 5)
        assert (cells[2], cells[3], cells[5]) == ("✗ wrong", "[2, 3, 5, 7]", "expected [2, 3, 5]")
        assert screen.focused is items
        # p shows the plot and back; Esc goes back to the list, Esc again leaves the screen.
        await pilot.press("p")
        assert screen.query_one("#report-tabs", TabbedContent).active == "frontier-tab"
        await pilot.press("p")
        assert screen.query_one("#report-tabs", TabbedContent).active == "items-tab"
        await pilot.press("escape")
        assert screen.query_one("#bench-views", ContentSwitcher).current == "bench-list-view"
        assert screen.focused is screen.query_one("#bench-list", DataTable)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, BenchScreen)


async def test_report_matches_build_report_of_the_stored_items(store):
    """What the screen shows is `build_report` over the history's items, in the order they were graded."""
    fill_store(store)
    app = Host(lambda: BenchScreen(store))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_first_report(pilot)
        report = build_report(
            "basic", "basic-3f2a9c0d", SYSTEMS, [i for i, _, _ in ITEMS], store.bench_items("basic-3f2a9c0d")
        )
        assert screen.shown.systems == report.systems
        assert screen.shown.items == report.items


async def test_empty_history_says_how_to_start_a_bench(store):
    app = Host(lambda: BenchScreen(store))
    async with app.run_test(size=SIZE) as pilot:
        await _settled(pilot)
        empty = app.screen.query_one("#bench-empty", Static)
        assert empty.display and "stiva bench basic --systems conductor,moa" in str(empty.render())
        assert not app.screen.query_one("#bench-list", DataTable).display
        await pilot.press("enter", "p")  # nothing to open, no plot to show: nothing happens
        assert app.screen.viewing is None


async def test_with_no_hosted_model_the_empty_screen_suggests_what_runs_offline(store):
    app = Host(lambda: BenchScreen(store, hosted=False))
    async with app.run_test(size=SIZE) as pilot:
        await _settled(pilot)
        text = str(app.screen.query_one("#bench-empty", Static).render())
        assert "stiva bench offline --systems conductor" in text and "--pool sim" in text
        assert "bench basic" not in text  # it would score about nothing on the embedded model


async def test_a_bench_still_running_shows_its_progress_and_reload_reads_more(store):
    store.open_bench("live", suite="basic", suite_hash="h", systems=SYSTEMS, config_hash="c", items=3)
    store.record_bench_item(
        "live",
        BenchItemRecord(
            system="conductor", item_id="add-1", status="graded", correct=True, extracted="5", latency_s=1.0
        ),
    )
    app = Host(lambda: BenchScreen(store))
    async with app.run_test(size=SIZE) as pilot:
        screen = await _open_first_report(pilot)
        assert "running" in str(screen.query_one("#report-heading", Static).render())
        assert "1/6 answers" in str(screen.query_one("#report-heading", Static).render())
        store.record_bench_item(
            "live",
            BenchItemRecord(
                system="direct:w1", item_id="add-1", status="graded", correct=False, extracted="6", latency_s=0.5
            ),
        )
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.shown is not None and screen.shown.done == 2, what="the new item")
        assert screen.query_one("#report-items", DataTable).row_count == 2


async def test_enter_on_an_item_asks_for_its_run(store):
    fill_store(store)
    app = Host(lambda: BenchScreen(store))
    seen: list = []
    async with app.run_test(size=SIZE, message_hook=seen.append) as pilot:
        screen = await _open_first_report(pilot)
        await pilot.press("down", "enter")  # the second item: add-1 on direct:w1
        await pilot.pause()
        await pilot.press("down", "down", "enter")  # the error of direct:w1 has no run: nothing asked
        await pilot.pause()
        assert screen.shown.items[3].run_id is None
    asked = {id(m): m for m in seen if isinstance(m, msg.OpenRun)}  # the hook sees it at each hop
    assert [m.run_id for m in asked.values()] == ["run-basic-3f2a9c0d-direct-w1-add-1"]


# --- in the app ------------------------------------------------------------------------------------


async def test_f12_opens_benches_and_an_item_opens_its_run_on_a_screen_esc_leaves(fake, fixed_clock):
    from stiva_tui.tui.app import StivaApp
    from stiva_tui.tui.screens.help import binding_rows

    config = make_test_config(fake)
    runtime = await make_runtime(config)
    fill_store(runtime.store)
    app = StivaApp(config, runtime=runtime)
    try:
        async with app.run_test(size=SIZE) as pilot:
            assert any(row[2] == "bench" and row[0] == "f12, ctrl+l" for row in binding_rows(app))
            await pilot.press("f12")
            await wait_for(pilot, lambda: isinstance(app.screen, BenchScreen), what="the bench screen")
            screen = await _open_first_report(pilot)
            chat = app.chat_screen
            await chat.conversation.add_question("A chat in progress")  # the run must not replace it
            await pilot.press("enter")  # the first item: add-1 on the conductor
            from stiva_tui.tui.screens.run import RunScreen

            await wait_for(
                pilot,
                lambda: isinstance(app.screen, RunScreen) and app.screen.state is not None,
                what="the run's screen",
            )
            run_screen = app.screen
            tree = "\n".join(labels(run_screen.query_one("#run-tree")))
            assert "What is 2+3?" in tree and "1 w1" in tree and "2 w2" in tree
            assert run_screen.query_one("#run-conversation").last_answer == "The answer is 5."
            assert run_screen.focused is run_screen.query_one("#run-tree")
            assert chat.conversation.questions == ["A chat in progress"]
            await pilot.press("escape")  # back to the report, on the same item
            await wait_for(pilot, lambda: app.screen is screen, what="the report again")
            assert screen.query_one("#report-items", DataTable).cursor_row == 0
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, RunScreen), what="the run's screen again")
            # F12 there: back to the same report, on the same item.
            await pilot.press("f12")
            await wait_for(pilot, lambda: app.screen is screen, what="the bench screen again")
            assert screen.viewing == "basic-3f2a9c0d"
            assert screen.query_one("#report-items", DataTable).cursor_row == 0
            await pilot.press("escape", "escape")
            await wait_for(pilot, lambda: app.screen is chat, what="the chat screen")
            # The chat goes on where it was, never under the bench's question.
            script_plan(fake)
            await ask(pilot, "A new question")
            await wait_for(
                pilot,
                lambda: (
                    chat.live.state.question == "A new question"
                    and chat.live.state.status == "finished"
                    and not chat.running
                ),
                what="the new run",
            )
            assert chat.conversation.questions == ["A chat in progress", "A new question"]
            assert "What is 2+3?" not in str(fake.requests_for("cond")[-1].messages)
    finally:
        await runtime.aclose()


async def test_palette_offers_the_benches(fake):
    from stiva_tui.tui.app import StivaApp

    config = make_test_config(fake)
    runtime = await make_runtime(config)
    app = StivaApp(config, runtime=runtime)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await pilot.press("ctrl+p")
            await pilot.pause(0.1)
            await pilot.press(*"benches")
            await pilot.pause(0.5)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, BenchScreen), what="the bench screen")
    finally:
        await runtime.aclose()


def test_every_bench_binding_has_an_id_and_tooltip():
    for binding in BenchScreen.BINDINGS:
        assert binding.id and binding.id.startswith("bench.") and binding.tooltip, binding


# --- snapshots -------------------------------------------------------------------------------------


@pytest.fixture
def filled(store):
    fill_store(store, "offline-77aa01", suite="offline", systems=["conductor"])
    fill_store(store, "basic-1c2d3e", status="stopped", stop_reason="budget of $0.50 reached")
    fill_store(store)
    return store


async def _report(pilot) -> None:
    await _settled(pilot)
    await pilot.press("enter")
    await _settled(pilot)


async def _frontier(pilot) -> None:
    await _report(pilot)
    await pilot.press("p")
    await pilot.pause()


def test_snapshot_bench_list(snap_compare, filled):
    assert snap_compare(Host(lambda: BenchScreen(filled)), terminal_size=SIZE, run_before=_settled)


def test_snapshot_bench_report(snap_compare, filled):
    assert snap_compare(Host(lambda: BenchScreen(filled)), terminal_size=SIZE, run_before=_report)


def test_snapshot_bench_frontier(snap_compare, filled):
    assert snap_compare(Host(lambda: BenchScreen(filled)), terminal_size=SIZE, run_before=_frontier)

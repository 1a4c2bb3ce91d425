"""The tree, the status bar and F12's report read whole at 80x24, 120x40 and 200x50.

A pool of long model ids (as hosted providers name them) runs a priced three-step plan, replayed
from fixed events in frozen mode: each step's model and figures sit on its line, what does not
fit folds under it, and no label runs past the tree's edge; the status bar keeps its figures and
drops the conductor's reason first; F12 folds long system names rather than pushing accuracy,
interval and cost off the table. SVG snapshots at each size (update with
`pytest tests/test_tui_widths.py --snapshot-update`).
"""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Static

from stiva_tui.config import parse_config
from stiva_tui.tui.app import StivaApp
from stiva_tui.tui.screens.bench import BenchScreen
from tests.support.tui import labels, replay_run
from tests.support.tui_screens import Host
from tests.test_tui_bench import OUTCOMES, _report, fill_store, fixed_clock, store  # noqa: F401 - fixtures

SIZES = [(80, 24), (120, 40), (200, 50)]
SONNET = "anthropic/claude-sonnet-4-5-20250929"
MINI = "openai/gpt-4o-mini-2024-07-18"
QUESTION = "What is 30 × 43, and how would you check it?"
SUBTASKS = (
    "Work out the product step by step and state the intermediate products clearly",
    "Independently compute the same product another way, splitting 43 into 40 and 3",
    "Compare both drafts, resolve any disagreement and write the final answer in one sentence",
)


def long_app() -> StivaApp:
    # Nothing listens on port 9: the replayed run makes no calls, and the URL is never shown.
    config = parse_config(
        {
            "conductor": {"backend": "remote", "model": "planner"},
            "providers": [{"name": "lab", "base_url": "http://127.0.0.1:9/v1"}],
            "models": [
                {"id": "planner", "provider": "lab", "model": "planner"},
                {"id": SONNET, "provider": "lab", "model": SONNET, "price_in": 3, "price_out": 15},
                {"id": MINI, "provider": "lab", "model": MINI, "price_in": 0.15, "price_out": 0.6},
            ],
            "discovery": {"enabled": False},
            "catalog": False,
            "theme": "stiva-dark",
        }
    )
    return StivaApp(config, frozen=True)


def long_events(finished: bool) -> list:
    """A priced fan-in plan over the long ids: step 1 done, step 2 streaming, step 3 waiting;
    or all of it finished."""
    from stiva_tui.core import events as ev
    from stiva_tui.core.usage import Usage
    from stiva_tui.core.workflow import Step, Workflow

    rid = "widths-run"
    workflow = Workflow((Step(1, SUBTASKS[0], ()), Step(2, SUBTASKS[1], ()), Step(1, SUBTASKS[2], (0, 1))))
    estimates = (
        ev.StepEstimate(0, SONNET, 61, 400, 0.006183, 3.0, 15.0, "default"),
        ev.StepEstimate(1, MINI, 62, 180, 0.000117, 0.15, 0.6, "history"),
        ev.StepEstimate(2, SONNET, 680, 400, 0.00804, 3.0, 15.0, "default"),
    )
    draft = "30 × 43 = 30 × 40 + 30 × 3 = 1200 + 90 = 1290."
    events = [
        ev.RunStarted(rid, QUESTION, "conductor", "remote", "planner", "configured in [conductor]"),
        ev.RoundStarted(rid, 1),
        ev.WorkflowReady(rid, 1, workflow, "Two drafts by different models, then a check.", Usage(633, 120), 0.9),
        ev.PlanEstimated(rid, 1, estimates, sum(e.cost_usd for e in estimates)),
        ev.StepStarted(rid, 1, 0, SONNET, SUBTASKS[0], (), 1),
        ev.StepStarted(rid, 1, 1, MINI, SUBTASKS[1], (), 1),
        ev.StepDelta(rid, 1, 0, draft),
        ev.StepFinished(rid, 1, 0, SONNET, draft, Usage(58, 24), 0.000534, 1.2, 1),
        ev.StepDelta(rid, 1, 1, "Splitting 43 into 40 and 3: 30 × 40 = 1200, "),
    ]
    if finished:
        events += [
            ev.StepDelta(rid, 1, 1, "30 × 3 = 90, so 1290."),
            ev.StepFinished(rid, 1, 1, MINI, "Splitting 43: 1200 + 90 = 1290.", Usage(61, 33), 0.000029, 2.4, 1),
            ev.StepStarted(rid, 1, 2, SONNET, SUBTASKS[2], (0, 1), 1, writes_answer=True, final=True),
            ev.StepFinished(rid, 1, 2, SONNET, "30 × 43 = 1290.", Usage(190, 12), 0.00075, 1.9, 1),
            ev.RunFinished(rid, "30 × 43 = 1290.", ev.Totals(942, 189, 0.0015, 5.1)),
        ]
    return events


def replay(finished: bool):
    return replay_run(QUESTION, long_events(finished))


def assert_reads_whole(app) -> None:
    """Nothing of the tree or the status bar runs past its edge."""
    screen = app.chat_screen
    tree = screen.tree
    assert tree.virtual_size.width <= tree.size.width, [line for line in labels(tree) if len(line) > 40]
    bar = screen.status_bar
    shown = [w for w in bar.query(Static) if w.display and w.region.width]
    assert sum(w.outer_size.width for w in shown) <= bar.size.width, [(w.id, w.outer_size) for w in shown]
    for widget in shown:
        assert widget.render().cell_length <= widget.region.width, (widget.id, str(widget.render()))


# --- the chat: tree and status bar --------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
async def test_a_priced_plan_reads_whole_at_every_size(size):
    app = long_app()
    async with app.run_test(size=size) as pilot:
        await replay(True)(pilot)
        assert_reads_whole(app)
        tree = app.chat_screen.tree
        text = "\n".join(labels(tree))
        # each step's final cost on its line, its estimate beside it (or, at 80 columns, under it)
        for index, (cost, expected) in enumerate([("$0.00053", "$0.0062"), ("$0.000029", "$0.00012")]):
            node = tree.node_for(("step", 1, index))
            line = str(node.label)
            assert cost in line, line
            beside = line if size[0] > 80 else line + str(node.children[0].label)
            assert f"est {expected}" in beside, beside
        assert "est $0.014" in text  # the plan's estimate on its line
        assert "Compare both drafts" in text  # every subtask is shown, folded where it must be
        bar = str(app.chat_screen.status_bar.query_one("#status-totals", Static).render())
        assert bar.startswith("942→189 tok · $0.0015")


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_up_and_down_go_from_step_to_step_over_the_lines_folded_under_them(size):
    app = long_app()
    async with app.run_test(size=size) as pilot:
        await replay(True)(pilot)
        tree = app.chat_screen.tree
        first = tree.node_for(("step", 1, 0))
        assert first.children, "step 1 folds its subtask under it at this width"
        tree.focus()
        tree.move_cursor(first)
        await pilot.pause()
        await pilot.press("down")
        assert tree.cursor_node.data == ("step", 1, 1), tree.cursor_node.data
        await pilot.press("up")
        assert tree.cursor_node is first, tree.cursor_node.data


@pytest.mark.parametrize("size", SIZES)
async def test_a_streaming_step_counts_with_a_tilde_in_the_tree_and_the_bar(size):
    app = long_app()
    async with app.run_test(size=size) as pilot:
        await replay(False)(pilot)
        assert_reads_whole(app)
        screen = app.chat_screen
        streaming = str(screen.tree.node_for(("step", 1, 1)).label) + "\n" + "\n".join(labels(screen.tree))
        assert "~15 tok" in streaming  # 44 characters streamed, counted so as not to undercount
        totals = str(screen.status_bar.query_one("#status-totals", Static).render())
        # the planner's and step 1's counts, and step 2's prompt and text so far: an estimate
        assert totals.startswith("running · ~753→159 tok · ~$0.00055"), totals
        assert "0→0" not in totals


async def test_the_status_bar_drops_the_conductors_reason_before_its_model():
    from stiva_tui.tui.widgets.status_bar import ConductorLine

    line = ConductorLine("remote", SONNET, "remote: config says so (planner)", "loaded in 2.1 s")
    whole = line.content().plain
    assert whole.endswith("loaded in 2.1 s · remote: config says so (planner)")
    cut = line.content(len(whole) - 10).plain
    assert cut.startswith(f"conductor: remote {SONNET} — loaded in 2.1 s") and cut.endswith("…")
    assert line.content(len(f"conductor: remote {SONNET}") + 3).plain == f"conductor: remote {SONNET}"
    assert line.content(20).plain.startswith("remote anthropic/")  # the label goes before the model


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_priced_plan(snap_compare, size):
    assert snap_compare(long_app(), terminal_size=size, run_before=replay(True))


def test_snapshot_streaming_at_120x40(snap_compare):
    assert snap_compare(long_app(), terminal_size=(120, 40), run_before=replay(False))


# --- F12: long system names ---------------------------------------------------------------------

LONG_SYSTEMS = ["conductor", f"direct:{SONNET}", f"direct:openrouter/{MINI}"]


@pytest.fixture
def long_named(store, monkeypatch):  # noqa: F811 - the store fixture of test_tui_bench
    monkeypatch.setitem(OUTCOMES, LONG_SYSTEMS[1], OUTCOMES["direct:w1"])
    monkeypatch.setitem(OUTCOMES, LONG_SYSTEMS[2], OUTCOMES["conductor"])
    fill_store(store, "long-9e8d7c", systems=LONG_SYSTEMS)
    return store


@pytest.mark.parametrize("size", SIZES)
async def test_f12_folds_long_names_and_keeps_every_figure(long_named, size):
    app = Host(lambda: BenchScreen(long_named))
    async with app.run_test(size=size) as pilot:
        await _report(pilot)
        table = app.screen.query_one("#report-systems", DataTable)
        assert table.virtual_size.width <= table.size.width, (table.virtual_size, table.size)
        names = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert any("\n" in name for name in names) == (size[0] < 120)  # folded only where it must be
        assert {name.replace("\n", "") for name in names} >= set(LONG_SYSTEMS)
        await pilot.press("p")
        await pilot.pause()
        plot = str(app.screen.query_one("#report-frontier", Static).render())
        width = app.screen.query_one("#report-tabs").size.width
        assert max(len(line) for line in plot.splitlines()) <= width - 2
        assert plot.count("/q") >= 2 + len(LONG_SYSTEMS)  # the axis' two costs and each system's


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_f12_long_names(snap_compare, long_named, size):
    assert snap_compare(Host(lambda: BenchScreen(long_named)), terminal_size=size, run_before=_report)


# --- compare mode's columns ---------------------------------------------------------------------


async def test_a_compare_column_counts_what_streams_and_keeps_what_a_cancel_spent():
    from stiva_tui.core import events as ev
    from stiva_tui.tui.widgets.compare_column import CompareColumn

    column = CompareColumn(SONNET, 1)
    app = Host(None, lambda: [column])
    async with app.run_test(size=(120, 40)) as pilot:
        footer = column.query_one(".column-footer", Static)
        for event in long_events(False):
            await column.handle(event)
        await pilot.pause()
        live = str(footer.render())
        assert live.startswith("~753→~159 tok · ~$0.00055"), live  # the plan, step 1, and step 2 so far
        await column.handle(ev.RunCancelled("widths-run", ev.Totals(800, 160, 0.0006, 2.0, estimated=True)))
        await pilot.pause()
        assert str(footer.render()).startswith("~800→~160 tok · ~$0.0006"), str(footer.render())

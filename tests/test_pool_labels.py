"""What answered a bench, said the same way everywhere (issue 52, part 1): a bench of real models'
recorded answers is a "recorded pool" in its Markdown report, the command line's table, its plot and
the app, never "simulated models"; a simulated pool says so; real models say nothing. The app's
report counts items and answers apart, and shows a recorded answer, not its score."""

from __future__ import annotations

import asyncio
import json

import pytest

from stiva_tui.bench.report import build_report, report_markdown
from stiva_tui.store.records import BenchItemRecord
from tests.support.cli import run_stiva

RECORDED = "recorded pool (bench 3f2a9c0d1e2f: ZeroEval results, 3 models)"


def _report(pool: str | None):
    records = [
        BenchItemRecord(system=system, item_id=item, status="graded", correct=right, answer="x", extracted="x")
        for system, right in (("direct:a", True), ("direct:b", False))
        for item in ("q1", "q2")
    ]
    report = build_report("zeroeval", "b1", ["direct:a", "direct:b"], ["q1", "q2"], records)
    report.pool = pool
    return report


@pytest.mark.parametrize(
    ("pool", "says", "never"),
    [
        ("simulated pool", "**SIMULATED POOL:** every figure here comes from simulated models", "real model"),
        (RECORDED, f"**RECORDED POOL{RECORDED.removeprefix('recorded pool')}:** every answer here is a real model's", "simulated"),
        (None, "| system |", "POOL"),
    ],
    ids=["simulated", "recorded", "live"],
)  # fmt: skip
def test_each_pool_kinds_report_table_and_plot_say_what_answered(pool, says, never, monkeypatch, tmp_path):
    report = _report(pool)
    markdown = report_markdown(report)
    header = markdown.split("| system |")[0] + "| system |"  # what comes before the table
    assert says in header and never not in header, header

    from matplotlib.axes import Axes

    from stiva_tui.cli.bench import bench_table
    from stiva_tui.sim.labels import pool_kind

    # the command line's table says it in its title, in the same words
    for width in (200, 80):
        title = bench_table(report, width)[0].title
        assert title.startswith("zeroeval · bench b1") and ("POOL" in title) == (pool is not None)
        if pool is not None:
            assert title.endswith(says.split(":**")[0].removeprefix("**")), title
    # and the plot, in its title
    titles: list[str] = []
    original = Axes.set_title
    monkeypatch.setattr(Axes, "set_title", lambda ax, text, *a, **k: titles.append(text) or original(ax, text, *a, **k))
    from stiva_tui.bench.report import write_frontier_png

    assert write_frontier_png(report, tmp_path / "frontier.png")
    expected = {"simulated": "SIMULATED POOL", "recorded": "RECORDED POOL (bench 3f2a9c0d1e2f", "live": None}
    if expected[pool_kind(pool)] is None:
        assert not any("POOL" in t for t in titles), titles
    else:
        assert any(expected[pool_kind(pool)] in t for t in titles), titles


def _records(tmp_path):
    rows = []
    for index, (qid, question) in enumerate({"q1": "What is 2+2?", "q2": "What is 3+3?", "q3": "What is 4+4?"}.items()):
        rows.append(
            {"id": qid, "question": question, "model": "big", "response": f"Working.\nbig says {qid}", "correct": True}
        )
        rows.append(
            {"id": qid, "question": question, "model": "small", "response": f"small on {qid}", "correct": index == 0}
        )
    path = tmp_path / "rec.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_a_bench_on_recorded_answers_is_recorded_on_the_command_line_in_its_report_and_in_the_app(tmp_path, stiva_home):
    """The replay of an imported bench: its report.md said "every figure here comes from simulated
    models", the app said REPLAYED POOL where the command line said RECORDED POOL."""
    done = run_stiva("bench", "import", str(_records(tmp_path)), "--holdout", "0", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    bench = run_stiva("bench", summary["suite"], "--pool", f"replay:{summary['bench']}", "--systems", "direct:*")
    assert bench.returncode == 0, bench.stderr
    replayed = json.loads(
        run_stiva(
            "bench", summary["suite"], "--pool", f"replay:{summary['bench']}", "--systems", "direct:*", "--json"
        ).stdout
    )
    markdown = (stiva_home / "data" / "bench" / replayed["bench_id"] / "report.md").read_text()
    assert "simulated" not in markdown.lower(), markdown
    assert markdown.splitlines()[2].startswith(f"**RECORDED POOL (bench {summary['bench']}: records rec.jsonl):**")
    assert f"RECORDED POOL (bench {summary['bench']}" in bench.stdout and "SIMULATED" not in bench.stdout

    asyncio.run(_in_the_app(summary["bench"], replayed["bench_id"]))


async def _in_the_app(imported: str, replayed: str) -> None:
    from textual.widgets import DataTable, Static

    from stiva_tui.store import Store
    from stiva_tui.tui.screens.bench import BenchScreen
    from tests.support.tui_screens import Host, wait_until

    with Store.open() as store:
        app = Host(lambda: BenchScreen(store))
        async with app.run_test(size=(120, 30)) as pilot:
            table = app.screen.query_one("#bench-list", DataTable)
            await wait_until(pilot, lambda: table.row_count == 2)
            pools = {b.record.id: b.pool for b in app.screen.benches}
            assert pools == {imported: "recorded pool", replayed: "recorded pool"}
            table.move_cursor(row=[b.record.id for b in app.screen.benches].index(imported))
            await pilot.press("enter")
            await wait_until(pilot, lambda: app.screen.shown is not None)
            await pilot.pause()
            heading = str(app.screen.query_one("#report-heading", Static).render())
            # 3 items, 2 systems: 6 answers, not "6/6 items"
            assert "RECORDED POOL" in heading and "3 items × 2 systems, 6/6 answers" in heading
            items = app.screen.query_one("#report-items", DataTable)
            extracted = {str(items.get_row_at(i)[3]) for i in range(items.row_count)}
            # what each recorded answer says last, not its recorded score (1 or 0)
            assert extracted == {
                "big says q1",
                "big says q2",
                "big says q3",
                "small on q1",
                "small on q2",
                "small on q3",
            }

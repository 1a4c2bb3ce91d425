"""One bench's report: a heading, the per-system table, and (as tabs) its items or the frontier plot.

    view = BenchReportView(id="bench-report")
    view.report = ShownReport(...)     # renders from this reactive; None shows nothing

Enter on an item posts `messages.OpenRun(run_id)`: the app shows that run on a screen of its own.

Long system names are folded onto more lines of their row, to the width the figures leave them,
rather than pushing the accuracy, its interval and the cost off the screen; the frontier's legend
folds a long name the same way, its figures on a line of their own.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widgets import DataTable, Static, TabbedContent, TabPane

from ...core import display as fmt
from .. import messages as msg
from ..text import one_line
from .table import Table

if TYPE_CHECKING:
    from ...bench.report import BenchReport, ItemRow, SystemRow
    from ...store import BenchRecord

SYSTEM_COLUMNS = ("System", "n", "Acc", "95% CI", "Err", "Tok/q", "Cost/q", "p50", "p95")
# "Why not right" last: it is the longest, and the latency stays in view beside the answer.
ITEM_COLUMNS = ("Item", "System", "Result", "Extracted answer", "Latency", "Why not right")
STATUS_STYLES = {"finished": "green", "running": "yellow", "stopped": "magenta", "interrupted": "red"}
EXTRACTED_CHARS = 40
FRONTIER_MIN = (24, 5)  # (columns, rows) of the plot area: smaller is unreadable, larger too coarse
FRONTIER_MAX = (72, 21)
NAME_AT_LEAST = 10  # a system name is folded to no narrower than this
ITEM_NAME_CELLS = 24  # an item's id and system in the items table: folded past this


@dataclass(frozen=True)
class ShownReport:
    """A bench as the screen shows it: its record and the `BenchReport` of its items."""

    bench: "BenchRecord"
    report: "BenchReport"

    @property
    def systems(self) -> "list[SystemRow]":
        return self.report.systems

    @property
    def items(self) -> "list[ItemRow]":
        return self.report.items

    @property
    def done(self) -> int:
        """The asked systems' items with a result (graded or failed), as the list counts them."""
        asked = set(asked_systems(self.bench.systems))
        return sum(1 for item in self.items if item.system in asked)

    @property
    def total(self) -> int:
        return self.bench.items * len(asked_systems(self.bench.systems))


def asked_systems(systems: "list[str]") -> list[str]:
    """The systems a bench asks, item by item: not `oracle` and `random` (computed from the
    direct: rows) nor `knn` and `best-single` (routed from them), which have no rows of their own.
    What the bench list and the report count "done" and "total" over, as `stiva bench` does."""
    from ...bench.derived import DERIVED, router_level

    return [s for s in systems if s not in DERIVED and router_level(s) is None]


class BenchReportView(Vertical):
    """The report of `report`, re-rendered whenever it is set; the plot also when the size changes."""

    DEFAULT_CSS = """
    BenchReportView { height: 1fr; }
    BenchReportView > #report-heading { height: auto; margin-bottom: 1; }
    BenchReportView > #report-systems { height: auto; max-height: 9; margin-bottom: 1; }
    BenchReportView > #report-tabs { height: 1fr; }
    BenchReportView #report-items { height: 1fr; }
    BenchReportView #report-plot { height: 1fr; }
    BenchReportView #report-frontier { width: auto; }
    """

    report: reactive[ShownReport | None] = reactive(None, init=False)

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.frontier_size = FRONTIER_MIN  # (columns, rows) of the plot last drawn
        self._drawn_width = 0  # the width the tables were last filled for

    def compose(self) -> ComposeResult:
        yield Static("", id="report-heading")
        yield Table(id="report-systems", cursor_type="row", zebra_stripes=True)
        with TabbedContent(id="report-tabs"):
            with TabPane("Items", id="items-tab"):
                yield Table(id="report-items", cursor_type="row", zebra_stripes=True)
            with TabPane("Frontier", id="frontier-tab"):
                with VerticalScroll(id="report-plot"):
                    # The plot is plain text laid out in columns: shown as-is, never as markup.
                    yield Static("", id="report-frontier", markup=False)

    def on_mount(self) -> None:
        for table_id, labels in (("#report-systems", SYSTEM_COLUMNS), ("#report-items", ITEM_COLUMNS)):
            table = self.query_one(table_id, DataTable)
            for label in labels:
                table.add_column(
                    label
                    if label in ("System", "Item", "Result", "Extracted answer", "Why not right")
                    else Text(label, justify="right"),
                    key=label,
                )

    @property
    def items_table(self) -> DataTable:
        return self.query_one("#report-items", DataTable)

    def watch_report(self, report: ShownReport | None) -> None:
        systems = self.query_one("#report-systems", DataTable)
        items = self.items_table
        cursor = items.cursor_row  # a reload of the same bench keeps the item the user was on
        systems.clear()
        items.clear()
        self.query_one("#report-heading", Static).update(heading(report) if report is not None else "")
        # Not laid out yet (a report set as the view first shows): the screen's width, less the
        # screen's padding, until a resize says better.
        width = self.size.width or max(0, self.screen.size.width - 2)
        self._drawn_width = width
        if report is not None:
            names = name_width(report.systems, width)
            for row in report.systems:
                cells = system_cells(row)
                cells[0] = Text(fold_name(row.system, names), style="bold")
                systems.add_row(*cells, key=row.system, height=None)
            item_names = max(ITEM_NAME_CELLS, width // 4)
            for index, item in enumerate(report.items):
                cells = item_cells(item)
                cells[0], cells[1] = (
                    Text(fold_name(item.id, item_names)),
                    Text(fold_name(item.system, item_names)),
                )
                items.add_row(*cells, key=str(index), height=None)
            if report.items:
                items.move_cursor(row=min(cursor, len(report.items) - 1), animate=False)
        self._draw_frontier()
        self.call_after_refresh(self._draw_frontier)  # again once the tables' new rows are laid out

    def on_resize(self) -> None:
        if self.report is not None and self.size.width != self._drawn_width:
            self.watch_report(self.report)  # the names fold to the new width
        self.call_after_refresh(self._draw_frontier)

    @on(TabbedContent.TabActivated, "#report-tabs")
    def _plot_shown(self, event: TabbedContent.TabActivated) -> None:
        """Draw the plot again as it comes into view: the tables' rows are laid out on idle, which can
        come after the redraw that followed the report, and the plot would keep a stale size."""
        event.stop()
        if event.pane.id == "frontier-tab":
            self._draw_frontier()

    def _draw_frontier(self) -> None:
        """The plot as large as the tab's space allows, so that its legend fits below it."""
        from ...bench.report import terminal_frontier

        plot = self.query_one("#report-frontier", Static)
        if self.report is None:
            plot.update("")
            return
        tabs = self.query_one("#report-tabs", TabbedContent).size
        legend = sum(1 for row in self.report.systems if row.n)
        self.frontier_size = frontier_size(tabs.width - 2, tabs.height - 2, legend)
        plot.update(fold_legend(terminal_frontier(self.report.report, *self.frontier_size), tabs.width - 2))

    def toggle_plot(self) -> None:
        """Show the frontier tab, or the items again (focusing what is shown)."""
        tabs = self.query_one("#report-tabs", TabbedContent)
        if tabs.active == "frontier-tab":
            self.focus_items()
        else:
            tabs.active = "frontier-tab"
            self.query_one("#report-plot", VerticalScroll).focus()

    def focus_items(self) -> None:
        self.query_one("#report-tabs", TabbedContent).active = "items-tab"
        self.items_table.focus()

    def open_item(self, row: int) -> None:
        """Ask the app to show item `row`'s run (an item that ended in an error has none)."""
        if self.report is None or not 0 <= row < len(self.report.items):
            return
        run_id = self.report.items[row].run_id
        if run_id:
            self.post_message(msg.OpenRun(run_id))
        else:
            self.notify("This item has no stored run: its calls failed.", severity="warning")

    @on(DataTable.RowSelected, "#report-items")
    def _item_clicked(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.open_item(event.cursor_row)


def frontier_size(columns: int, rows: int, legend: int) -> tuple[int, int]:
    """(width, height) for `terminal_frontier` in `columns` x `rows` of text: room for its axis
    labels (6 columns), x axis (2 rows), a blank line and `legend` lines. The height is odd, so
    that the middle label reads 0.50."""
    width = max(FRONTIER_MIN[0], min(FRONTIER_MAX[0], columns - 8))
    height = max(FRONTIER_MIN[1], min(FRONTIER_MAX[1], rows - 3 - legend))
    return width, height if height % 2 else height - 1


def name_width(rows: "list[SystemRow]", width: int) -> int:
    """The cells the systems table's names may take: what its figures (and their headers and
    padding) leave of `width`; 0 (no fold) before the first layout."""
    if width <= 0:
        return 0
    cells = [system_cells(row)[1:] for row in rows]
    figures = sum(
        max([len(label), *(cell_text(row[i]) for row in cells)]) + 2 for i, label in enumerate(SYSTEM_COLUMNS[1:])
    )
    return max(NAME_AT_LEAST, width - figures - 2 - 2)  # the name's padding, the scrollbar


def cell_text(cell: object) -> int:
    return len(cell.plain) if isinstance(cell, Text) else len(str(cell))


_BREAKS = ":/@-_ "  # not ".": it breaks version numbers ("gemini-2.5")


def fold_name(name: str, width: int) -> str:
    """`name` in lines of at most `width` cells, each broken after a ':', '/', '@', '-', '_'
    or a space where one falls in its second half, else at the width; 0: one line."""
    if width <= 0 or len(name) <= width:
        return name
    lines = []
    rest = name
    while len(rest) > width:
        cut = max((rest.rfind(c, width // 2, width) for c in _BREAKS), default=-1)
        cut = cut + 1 if cut >= 0 else width
        lines.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    lines.append(rest)
    return "\n".join(lines)


def fold_legend(plot: str, width: int) -> str:
    """The frontier's text with each legend line that is wider than `width` folded: its name on
    as many lines as it needs, its accuracy and cost on a line of their own (they were cut off)."""
    if width <= 0:
        return plot
    body, _, legend = plot.partition("\n\n")
    if not legend:
        return plot
    lines = []
    for line in legend.splitlines():
        name, sep, figures = line.partition(": accuracy")
        if len(line) <= width:
            lines.append(line)
            continue
        if not sep:  # "+ A, B: on the same point (accuracy ..., $.../q)"
            lines += textwrap.wrap(line, width, subsequent_indent="    ")
            continue
        lines += fold_name(name, width).splitlines()
        lines.append(f"    accuracy{figures}")
    return body + "\n\n" + "\n".join(lines)


def heading(report: ShownReport) -> Text:
    """`basic · bench 3f2a… · finished · 12 items × 2 systems, 24/24 answers` (and why it
    stopped, when it did; and SIMULATED POOL or RECORDED POOL when no real model answered it). The
    items are the suite's; each asked system answers each, so the answers are items × systems."""
    bench = report.bench
    systems = len(asked_systems(bench.systems))
    items = f"{bench.items:,} item{'' if bench.items == 1 else 's'}"
    text = Text.assemble(
        (bench.suite, "bold"),
        f"  ·  bench {bench.id[:12]}  ·  ",
        (bench.status, STATUS_STYLES.get(bench.status, "")),
        f"  ·  {items} × {fmt.count(systems, 'system')}, {report.done:,}/{report.total:,} answers",
    )
    if bench.stop_reason:
        text.append(f"  ·  {bench.stop_reason}", style="dim")
    if report.report.pool:  # "SIMULATED POOL", as the Markdown report and the status bar say it
        from ...sim.labels import loud

        text.append("  ·  ")
        text.append(loud(report.report.pool), style="bold yellow")
    return text


def system_cells(row: "SystemRow") -> list:
    """The cells of one system's row of the report (numbers right-aligned)."""
    accuracy = row.accuracy
    lo, hi = row.ci95
    values = [
        str(row.n),
        "–" if accuracy is None else f"{accuracy:.1%}",
        f"{lo:.0%}–{hi:.0%}" if row.n else "–",
        str(row.errors),
        fmt.tokens(round(row.tokens_per_question)),
        fmt.money(row.cost_per_question),
        fmt.seconds(row.latency_p50_s),
        fmt.seconds(row.latency_p95_s),
    ]
    cells = [Text(v, justify="right") for v in values]
    if row.errors:
        cells[3].stylize("red")
    return [Text(row.system, style="bold"), *cells]


def item_cells(item: "ItemRow") -> list:
    """The cells of one item of the report: what was read from the answer, and why it is not
    right (the grader's detail with the expected answer, "expected 391, read 392", or the error)."""
    if item.status == "error":
        result = Text("! error", style="red")
    else:
        result = Text("✓ right", style="green") if item.correct else Text("✗ wrong", style="yellow")
    shown = one_line(item.extracted or "", EXTRACTED_CHARS)
    why = "" if item.correct else (item.failure or item.error or "")
    # Text, not str: a DataTable reads a str as markup, and answers hold brackets.
    return [
        Text(item.id),
        Text(item.system),
        result,
        Text(shown),
        Text(fmt.seconds(item.latency_s), justify="right"),
        Text(one_line(why, EXTRACTED_CHARS)),
    ]

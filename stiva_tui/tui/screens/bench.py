"""The bench screen: the benches `stiva bench` ran (newest first), and the report of the one chosen.

Two views, one at a time so that both fit an 80x24 terminal: the list of benches, and a bench's
report (per-system table, then its items or its frontier plot). Enter on a bench opens its report,
Esc goes back to the list; enter on an item shows its run on a screen of its own (`msg.OpenRun`),
which esc leaves again.

The history is read in threads; the results come back as the screen's typed messages
(`BenchesLoaded`, `ReportLoaded`, `LoadFailed`) and land in reactive state that the widgets
render from. The app keeps this screen once made, so going back to it finds the same report.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import ContentSwitcher, DataTable, Static

from ..text import one_line, scrub
from ..widgets.bench_report import EXTRACTED_CHARS, STATUS_STYLES, BenchReportView, ShownReport, asked_systems
from ..widgets.footer import StivaFooter
from ..widgets.table import Table

if TYPE_CHECKING:
    from ...store import BenchRecord, Store

# "Answers": of the items × the systems it asks, how many are answered (graded or failed).
COLUMNS = ("Suite", "Systems", "Status", "Answers", "Updated", "Pool")
SUITE_CHARS = 16
SYSTEMS_CHARS = 24
REFRESH_S = 5.0  # how often the screen reads again while a listed bench is still running
EMPTY = (
    "No benches yet. Start one from a terminal:\n\n"
    "    stiva bench basic --systems conductor,moa\n\n"
    "then press r here to read its report."
)
# With no hosted model (no keys), `basic` would score ~0: its questions are beyond the 270M model.
EMPTY_OFFLINE = (
    "No benches yet, and no hosted model in the pool (add a key with F5). What runs as it is:\n\n"
    "    stiva bench offline --systems conductor     (the embedded model, offline)\n"
    "    stiva bench skills --pool sim --split heldout --systems 'conductor,direct:*,oracle'\n"
    "                                                (a SIMULATED pool)\n\n"
    "then press r here to read its report."
)


@dataclass(frozen=True)
class BenchSummary:
    """A bench as the list shows it: its record, how many (system, item) pairs of the systems it
    asks are done (graded or failed: `asked_systems`, as its report counts), and what answered it
    ("simulated pool", "recorded pool"; None for real models: sim/labels.py)."""

    record: "BenchRecord"
    done: int
    pool: str | None = None

    @property
    def total(self) -> int:
        return self.record.items * len(asked_systems(self.record.systems))


def bench_summary(store: "Store", bench: "BenchRecord") -> BenchSummary:
    asked = set(asked_systems(bench.systems))
    done = {(r.system, r.item_id) for r in store.bench_items(bench.id) if r.system in asked}
    return BenchSummary(bench, len(done), bench_pool(store, bench))


def bench_pool(store: "Store", bench: "BenchRecord") -> str | None:
    """What answered a bench, as its report says it: "recorded pool" for `stiva bench import`'s
    answers and when its systems or its runs' steps name the models of `--pool replay:ID`,
    "simulated pool" for those of `--pool sim`; None for real models. From the history alone:
    the bench record keeps no pool."""
    from ...sim.labels import RECORDED_LABEL, REPLAY_PREFIX, SIM_LABEL
    from ...sim.profiles import SIM_PREFIX
    from ...store.benches import IMPORTED

    if bench.config_hash == IMPORTED:
        return RECORDED_LABEL
    models = {s.removeprefix("direct:") for s in bench.systems}
    row = store.query_one(
        "SELECT s.model FROM bench_items b JOIN steps s ON s.run_id = b.run_id WHERE b.bench_id = ?"
        " AND (s.model LIKE ? OR s.model LIKE ?) LIMIT 1",
        (bench.id, REPLAY_PREFIX + "%", SIM_PREFIX + "%"),
    )
    if row is not None:
        models.add(row["model"])
    if any(m.startswith(REPLAY_PREFIX) for m in models):
        return RECORDED_LABEL
    if any(m.startswith(SIM_PREFIX) for m in models):
        return SIM_LABEL
    return None


class BenchScreen(Screen):
    """Every bench of the history and, for the one chosen, its report."""

    CSS_PATH = "bench.tcss"
    BINDINGS = [
        # Priority: the tables' own enter (show=False) would hide this one from the footer.
        Binding(
            "enter",
            "open",
            "Open",
            id="bench.open",
            priority=True,
            tooltip="Open the bench's report, or the item's run (esc comes back)",
        ),
        Binding("escape", "back", "Back", id="bench.back", tooltip="Back to the list of benches, or leave"),
        Binding("r", "reload", "Reload", id="bench.reload", tooltip="Read the benches again (one may be running)"),
        Binding(
            "p",
            "plot",
            "Items/plot",
            id="bench.plot",
            tooltip="Switch the report between its items and the accuracy-cost frontier",
        ),
    ]

    benches: reactive[list[BenchSummary]] = reactive(list, init=False)
    viewing: reactive[str | None] = reactive(None, init=False)  # the bench whose report is open
    shown: reactive[ShownReport | None] = reactive(None, init=False)  # that report, once read
    error: reactive[str | None] = reactive(None, init=False)  # why the history could not be read

    @dataclass
    class BenchesLoaded(Message):
        benches: list[BenchSummary]

    @dataclass
    class ReportLoaded(Message):
        report: ShownReport

    @dataclass
    class LoadFailed(Message):
        error: str

    def __init__(
        self,
        store: "Store | None",
        *,
        hosted: bool = True,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """`store`: the history (None when there is none: the screen says so); `hosted`: whether
        the pool has a model besides the embedded one (what the empty screen suggests depends on it)."""
        super().__init__(name=name, id=id, classes=classes)
        self.store = store
        self.hosted = hosted

    def compose(self) -> ComposeResult:
        yield Static("Benches", id="bench-title")
        with ContentSwitcher(initial="bench-list-view", id="bench-views"):
            with Vertical(id="bench-list-view"):
                yield Table(id="bench-list", cursor_type="row", zebra_stripes=True)
                yield Static("", id="bench-empty", markup=False)
            yield BenchReportView(id="bench-report").data_bind(report=BenchScreen.shown)
        yield StivaFooter()

    def on_mount(self) -> None:
        table = self.query_one("#bench-list", DataTable)
        for label in COLUMNS:
            table.add_column(Text(label, justify="right") if label == "Answers" else label, key=label)
        self._show_empty()
        self.set_interval(REFRESH_S, self._refresh_while_running)

    def on_screen_resume(self) -> None:
        self.action_reload()

    # --- reading the history (threads) -----------------------------------------------------------

    def action_reload(self) -> None:
        self._load_benches()
        if self.viewing is not None:
            self._load_report(self.viewing)

    @work(thread=True, exclusive=True, group="bench-list", exit_on_error=False)
    def _load_benches(self) -> None:
        if self.store is None:
            self.post_message(self.BenchesLoaded([]))
            return
        try:
            benches = scrub([bench_summary(self.store, b) for b in self.store.list_benches()])
        except Exception as exc:  # a closed or unreadable history: say so, stay open
            self.post_message(self.LoadFailed(str(exc)))
            return
        self.post_message(self.BenchesLoaded(benches))

    @work(thread=True, exclusive=True, group="bench-report", exit_on_error=False)
    def _load_report(self, bench_id: str) -> None:
        try:
            report = read_report(self.store, bench_id) if self.store is not None else None
        except Exception as exc:
            self.post_message(self.LoadFailed(str(exc)))
            return
        if report is not None:
            self.post_message(self.ReportLoaded(report))

    def _refresh_while_running(self) -> None:
        if self.is_current and any(b.record.status == "running" for b in self.benches):
            self.action_reload()

    def on_bench_screen_benches_loaded(self, message: BenchesLoaded) -> None:
        self.error = None
        self.benches = message.benches

    def on_bench_screen_report_loaded(self, message: ReportLoaded) -> None:
        if message.report.bench.id != self.viewing:
            return  # read for a bench the user has left since
        first = self.shown is None
        self.shown = message.report
        if first:
            self.query_one(BenchReportView).focus_items()

    def on_bench_screen_load_failed(self, message: LoadFailed) -> None:
        self.error = message.error
        self.notify(message.error, title="Cannot read the benches", severity="error")

    # --- rendering -------------------------------------------------------------------------------

    def watch_benches(self, benches: list[BenchSummary]) -> None:
        table = self.query_one("#bench-list", DataTable)
        keep = table.cursor_row  # a reload keeps the row the user was on
        table.clear()
        for bench in benches:
            table.add_row(*bench_cells(bench), key=bench.record.id)
        if benches:
            table.move_cursor(row=min(keep, len(benches) - 1), animate=False)
        self._show_empty()

    def watch_error(self) -> None:
        self._show_empty()

    def _show_empty(self) -> None:
        empty = self.query_one("#bench-empty", Static)
        if self.error:
            empty.update(f"Cannot read the benches: {self.error}")
        elif self.store is None:
            empty.update("There is no history, so no benches to show.")
        else:
            empty.update(EMPTY if self.hosted else EMPTY_OFFLINE)
        empty.display = bool(self.error) or not self.benches
        self.query_one("#bench-list", DataTable).display = bool(self.benches)

    def watch_viewing(self, bench_id: str | None) -> None:
        switcher = self.query_one("#bench-views", ContentSwitcher)
        self.shown = None
        self.query_one("#bench-title", Static).display = bench_id is None  # a report has its own heading
        if bench_id is None:
            switcher.current = "bench-list-view"
            self.query_one("#bench-list", DataTable).focus()
        else:
            switcher.current = "bench-report"
            self._load_report(bench_id)
        self.refresh_bindings()

    # --- keys --------------------------------------------------------------------------------------

    @on(DataTable.RowSelected, "#bench-list")
    def _bench_clicked(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.viewing = event.row_key.value

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "plot":
            return self.viewing is not None  # only a report has a plot
        if action == "open":  # a bench, or an item: whichever table has the focus and a row
            focused = self.focused
            return (
                isinstance(focused, DataTable)
                and focused.id in ("bench-list", "report-items")
                and focused.row_count > 0
            )
        return True

    def action_open(self) -> None:
        focused = self.focused
        if not isinstance(focused, DataTable) or focused.row_count == 0:
            return
        if focused.id == "bench-list":
            self.viewing = self.benches[focused.cursor_row].record.id
        elif focused.id == "report-items":
            self.query_one(BenchReportView).open_item(focused.cursor_row)

    def action_plot(self) -> None:
        self.query_one(BenchReportView).toggle_plot()

    def action_back(self) -> None:
        if self.viewing is not None:
            self.viewing = None
        elif len(self.app.screen_stack) > 1:
            self.app.pop_screen()


def read_report(store: "Store", bench_id: str) -> ShownReport:
    """A bench's report from the history alone (the suite file may be elsewhere by now): items in
    the order they were graded, systems in the bench's order."""
    from ...bench.report import build_report
    from ...sim.labels import pool_kind

    bench = store.get_bench(bench_id)
    records = store.bench_items(bench_id)
    order = list(dict.fromkeys(r.item_id for r in records))
    built = build_report(
        bench.suite, bench.id, bench.systems, order, records, status=bench.status, stop_reason=bench.stop_reason
    )
    built.pool = bench_pool(store, bench)  # as `stiva bench` labels it
    if pool_kind(built.pool) == "recorded":
        # graded by the recorded score, so nothing was read from an answer (an older import
        # stored the score itself as the extracted answer): what the answer says last, its end
        built.items = [item.model_copy(update={"extracted": _answer_end(item.answer)}) for item in built.items]
    report = ShownReport(bench, built)
    return scrub(report)  # the models' extracted answers and errors, without escape sequences


def _answer_end(answer: str) -> str:
    """A recorded answer's last line, its end where it is longer than the column."""
    from ...evals.suite import recorded_answer_line

    line = " ".join(recorded_answer_line(answer).split())
    return line if len(line) <= EXTRACTED_CHARS else "…" + line[-(EXTRACTED_CHARS - 1) :]


def bench_cells(bench: BenchSummary) -> list:
    """The list's cells of one bench (Text: a DataTable reads a str as markup)."""
    record = bench.record
    return [
        Text(one_line(record.suite, SUITE_CHARS), style="bold"),
        Text(one_line(", ".join(record.systems), SYSTEMS_CHARS)),
        Text(record.status, style=STATUS_STYLES.get(record.status, "")),
        Text(f"{bench.done}/{bench.total}", justify="right"),
        Text(record.updated_at[:16].replace("T", " "), style="dim"),
        # "simulated" under the "Pool" heading: figures that are no real model's, said in yellow
        Text((bench.pool or "").removesuffix(" pool") or "real", style="bold yellow" if bench.pool else "dim"),
    ]

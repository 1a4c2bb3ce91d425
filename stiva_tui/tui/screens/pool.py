"""The pool screen: every model Stiva knows (available or not, and why), the local servers found,
and which conductor plans (or would plan) the workflows."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ...pool.listing import listing_order
from ..text import safe_text
from ..widgets.footer import StivaFooter
from ..widgets.table import Table

if TYPE_CHECKING:
    from ...config import ConductorConfig
    from ...pool.registry import Pool
    from ...pool.types import PoolModel
    from ...runtime import Runtime

MODEL_COLUMNS = ("#", "Model", "In $/1M", "Out $/1M", "Status", "Enabled", "Provider", "Source", "Description")
# Below WIDE_FROM columns, the table keeps what tells models apart and a line under it says the
# rest of the highlighted model: its whole status, provider, source and description.
NARROW_COLUMNS = ("#", "Model", "$/1M in/out", "Status")
WIDE_FROM = 120
SERVER_COLUMNS = ("Server", "Provider", "Models")
RIGHT = ("#", "In $/1M", "Out $/1M", "$/1M in/out")


class PoolScreen(Screen):
    """The pool of `runtime.pool` (incl. unavailable models), discovered servers and the conductor."""

    CSS_PATH = "pool.tcss"
    BINDINGS = [
        Binding("escape", "back", "Back", id="pool.back", tooltip="Leave the pool screen"),
        Binding("r", "reload", "Reload", id="pool.reload", tooltip="Show the pool again"),
    ]

    def __init__(
        self, runtime: "Runtime", *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.runtime = runtime
        self._shown_narrow: bool | None = None  # the layout the table has now
        self._models: dict[str, PoolModel] = {}
        self._numbers: dict[str, int] = {}

    def compose(self) -> ComposeResult:
        yield Static("", id="pool-title")
        yield Static("", id="pool-conductor", markup=False)
        yield Table(id="pool-models", cursor_type="row", zebra_stripes=True)
        yield Static("", id="pool-detail", markup=False)
        yield Static("Local servers found", id="pool-servers-title", classes="section")
        yield Table(id="pool-servers", cursor_type="row")
        yield Static("", id="pool-servers-empty")
        yield Static("", id="pool-servers-left-out", markup=False)  # another user's: not in the pool
        yield StivaFooter()

    def on_mount(self) -> None:
        servers = self.query_one("#pool-servers", DataTable)
        for label in SERVER_COLUMNS:
            servers.add_column(label, key=label)
        self.action_reload()

    @property
    def narrow(self) -> bool:
        return self.app.size.width < WIDE_FROM

    def on_resize(self) -> None:
        if self.narrow != self._shown_narrow:
            self.action_reload()

    def action_reload(self) -> None:
        pool = self.runtime.pool
        available = pool.available()
        index = {m.id: i for i, m in enumerate(available)}
        self.query_one("#pool-title", Static).update(
            Text(f"Pool: {len(available)} of {len(pool)} models available", style="bold")
        )

        narrow = self._shown_narrow = self.narrow
        table = self.query_one("#pool-models", DataTable)
        keep = table.cursor_row
        table.clear(columns=True)
        self._models = {m.id: m for m in pool}
        self._numbers = index
        listed = listing_order(pool)  # the usable ones first
        rows = [model_cells(model, index.get(model.id)) for model in listed]
        if narrow:
            rows = narrow_cells(rows, self.app.size.width - 4)
        labels = NARROW_COLUMNS if narrow else MODEL_COLUMNS
        folded = status_width(labels, rows, self.app.size.width - 4)
        for label in labels:
            width = folded if label == "Status" else None
            table.add_column(Text(label, justify="right" if label in RIGHT else "left"), key=label, width=width)
        for model, cells in zip(listed, rows, strict=True):
            table.add_row(*cells, key=model.id, height=None)  # as tall as its folded status
        if table.row_count:
            table.move_cursor(row=min(keep, table.row_count - 1), animate=False)
        detail = self.query_one("#pool-detail", Static)
        detail.display = narrow
        self._show_detail()

        servers = discovered_servers(pool)
        server_table = self.query_one("#pool-servers", DataTable)
        server_table.clear()
        for url, (provider, ids) in servers.items():  # Text: a DataTable reads a str as markup
            server_table.add_row(
                Text(safe_text(url)), Text(safe_text(provider)), Text(safe_text(", ".join(ids))), key=url
            )
        server_table.display = bool(servers)
        empty = self.query_one("#pool-servers-empty", Static)
        empty.display = not servers
        discovery = self.runtime.config.discovery.enabled
        empty.update("none found on the default ports" if discovery else "discovery is off in the config")
        left_out = self.query_one("#pool-servers-left-out", Static)
        left_out.update(safe_text("\n".join(pool.left_out)))
        left_out.display = bool(pool.left_out)
        self._show_conductor()

    @on(DataTable.RowHighlighted, "#pool-models")
    def _show_detail(self) -> None:
        """Narrow: the highlighted model's whole status, provider, source and description."""
        detail = self.query_one("#pool-detail", Static)
        table = self.query_one("#pool-models", DataTable)
        if not detail.display or not table.row_count:
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        model = self._models.get(key or "")
        if model is not None:
            detail.update(model_detail(model, self._numbers.get(model.id)))

    def _show_conductor(self) -> None:
        label = self.query_one("#pool-conductor", Static)
        conductor = self.runtime.conductor
        if conductor is not None:
            from ...conductor.choose import loaded_facts

            reason = self.runtime.conductor_reason
            facts = loaded_facts(conductor) if conductor.loaded else ""
            label.update(
                Text(
                    safe_text(
                        f"Conductor: {conductor.backend} · {conductor.model}"
                        + (f" · {facts}" if facts else "")
                        + (f" — {reason}" if reason else "")
                    )
                )
            )
            return
        from ...runtime import StartupError

        try:
            cfg = self.runtime.conductor_config()
        except StartupError as exc:  # a bad --conductor override
            label.update(f"Conductor: {exc}")
            return
        label.update(f"Conductor (not loaded yet): {cfg.backend} · {cfg.model}")
        self._describe_choice(cfg)

    @work(exclusive=True, group="pool-conductor", exit_on_error=False)
    async def _describe_choice(self, cfg: "ConductorConfig") -> None:
        """The cheap description of the conductor that would be chosen (it may probe CUDA: a thread)."""
        from ...conductor.choose import describe_choice

        try:
            text = await asyncio.to_thread(describe_choice, cfg, self.runtime.models)
        except Exception as exc:
            text = f"{cfg.backend} · {cfg.model} (cannot tell yet: {exc})"
        if self.runtime.conductor is None:
            self.query_one("#pool-conductor", Static).update(f"Conductor (not loaded yet): {text}")

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()


def format_price(value: float) -> str:
    if value == 0:
        return "free"
    return f"{value:,.2f}" if value >= 0.1 else f"{value:,.3f}"


def model_cells(model: "PoolModel", number: int | None) -> list:
    """The table cells of one pool model; `number` is the conductor's index (None: unavailable). A
    discovered model's id and name are a local server's words: shown without escape sequences."""
    usable = number is not None
    style = "" if usable else "dim"
    reason = safe_text(model.reason or ("available" if usable else "unavailable"))
    status = Text(("✓ " if usable else "✗ ") + reason, style="green" if usable else "red")
    return [
        Text(str(number) if usable else "-", justify="right"),
        Text(safe_text(model.id), style="bold" if usable else "dim"),
        Text(format_price(model.price_in), justify="right", style=style),
        Text(format_price(model.price_out), justify="right", style=style),
        status,
        Text("yes" if model.enabled else "no", style=style),
        Text(safe_text(f"{model.provider}: {model.model}"), style=style),
        Text(safe_text(model.source), style=style),
        Text(safe_text(model.description), style=style),
    ]


def narrow_cells(rows: list[list], width: int) -> list[list]:
    """The wide table's rows as the narrow one's: #, model, "in/out" prices in one cell, and the
    status (folded to the width left: `status_width`). A model id longer than a third of `width`
    folds after a "/" (a provider's prefix), so that its status keeps room to be read."""
    from ..widgets.compare_column import fit_title  # how compare mode breaks a long id too

    most = max(16, width // 3)
    prices = [Text(f"{r[2].plain}/{r[3].plain}", justify="right", style=r[2].style) for r in rows]
    out = []
    for row, price in zip(rows, prices, strict=True):
        model = row[1]
        if model.cell_len > most:
            model = Text(fit_title(model.plain, most, lines=1 + model.cell_len // 8), style=model.style)
        status = row[4].copy()
        if row[5].plain == "no":  # "Enabled": said in the status where there is no column for it
            status.append(" (off)")
        out.append([row[0], model, price, status])
    return out


def status_width(labels: tuple[str, ...], rows: list[list], width: int) -> int | None:
    """The Status column's width where some status is longer than what the columns before it leave
    of `width`: its text folds onto more lines there, read whole ("no key: set $OPENAI_API_K…" was
    cut at 80 columns, and by the screen's edge at 120). None: every status fits as it is."""
    at = labels.index("Status")
    if not rows:
        return None
    used = sum(2 + max(len(labels[i]), *(_widest_line(row[i]) for row in rows)) for i in range(at))
    room = max(12, width - used - 2)
    return room if max(row[at].cell_len for row in rows) > room else None


def _widest_line(cell: Text) -> int:
    return max((line.cell_len for line in cell.split("\n")), default=0)


def model_detail(model: "PoolModel", number: int | None) -> Text:
    """One model said whole, for the line under the narrow table."""
    usable = number is not None
    reason = safe_text(model.reason or ("available" if usable else "unavailable"))
    text = Text()
    text.append(safe_text(model.id), style="bold")
    text.append(f" · {safe_text(f'{model.provider}: {model.model}')} · {safe_text(model.source)}")
    if not model.enabled:
        text.append(" · disabled")
    if model.description:
        text.append(f" · {safe_text(model.description)}")
    text.append("\n")
    text.append(("✓ " if usable else "✗ ") + reason, style="green" if usable else "red")
    return text


def discovered_servers(pool: "Pool") -> dict[str, tuple[str, list[str]]]:
    """Local servers found by discovery: base_url -> (provider, model ids)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for model in pool:
        if model.source == "discovered":
            out.setdefault(model.base_url, (model.provider, []))[1].append(model.id)
    return out

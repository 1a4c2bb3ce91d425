"""`stiva models [--json]`: the pool as a rich table or as JSON (never with keys)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core.terminal import printable
from .registry import Pool

if TYPE_CHECKING:
    from rich.table import Table

FIELDS = ("id", "provider", "model", "available", "reason", "price_in", "price_out", "description", "source")


def _index(pool: Pool) -> dict[str, int]:
    """The conductor's numbering: position among the available models."""
    return {m.id: i for i, m in enumerate(pool.available())}


def listing_order(pool: Pool) -> list:
    """The pool as lists show it: the usable models first (in the conductor's numbering), then
    the others in pool order, so one usable model is never found under 23 without a key."""
    index = _index(pool)
    return sorted(pool, key=lambda m: (m.id not in index, index.get(m.id, 0)))


def models_json(pool: Pool, conductor_choice: str | None) -> dict:
    """{"conductor": ..., "models": [{id, provider, model, available, reason, price_in, price_out,
    description, source, index}]}; `index` is the conductor's number for the model (None when
    the model is unavailable)."""
    index = _index(pool)
    rows = []
    for model in listing_order(pool):
        public = model.public()
        row = {name: public[name] for name in FIELDS}
        row["available"] = model.enabled and model.available
        row["index"] = index.get(model.id)
        rows.append(row)
    return {
        "conductor": conductor_choice,
        "models": rows,
        "available": len(index),
        "total": len(pool),
    }


def _price(value: float) -> str:
    if value == 0:
        return "free"
    return f"${value:,.2f}" if value >= 0.1 else f"${value:,.3f}"


# The table's widths (content; every column has a space either side and a border between):
MODEL_MIN = 24  # a model's id, the row's name, folds below this only on a terminal narrower than any table
DESCRIPTION_MIN = 30  # under this, the description goes under the model's name instead (4 columns)


def models_table(pool: Pool, conductor_choice: str | None, width: int | None = None) -> "Table":
    """A rich table of the pool, usable models first; `#` is the conductor's number for the model.
    A discovered model says so, and its reason names the server's URL. Text is made printable:
    ids, names and reasons may come from a local server or a provider (`--json` stays exact).

    `width`: the columns it must fit in (a pipe's 80): every column gets its width here, so rich
    never cuts a border or a cell; a description too narrow to read beside the rest goes under the
    model's name. None: as wide as its cells (a file, a test)."""
    from rich.table import Table
    from rich.text import Text

    index = _index(pool)
    rows = []
    for model in listing_order(pool):
        usable = model.id in index
        rows.append(
            (
                model,
                str(index[model.id]) if usable else "-",
                f"{_price(model.price_in)} · {_price(model.price_out)}",
                ("✓ " if usable else "✗ ") + printable(model.reason),
                printable(model.description),
            )
        )
    widths = _widths(rows, width)
    beside = widths is None or len(widths) == 5  # the description in a column of its own
    table = Table(
        title=f"Pool: {len(index)} of {len(pool)} models available",
        caption=f"conductor: {conductor_choice or 'none'}",
        caption_justify="left",
        expand=False,
    )
    column = dict(zip(("#", "model", "price", "status", "description"), widths or [None] * 5))
    table.add_column("#", justify="right", style="bold", width=column["#"])
    table.add_column("model", overflow="fold", min_width=None if widths else MODEL_MIN, width=column["model"])
    table.add_column("$/1M in · out", justify="right", no_wrap=True, width=column["price"])
    table.add_column("status", overflow="fold", width=column["status"])
    if beside:
        table.add_column("description", overflow="fold", width=column["description"])
    for model, number, price, status, description in rows:
        usable = model.id in index
        name = Text(printable(model.id), style="bold cyan" if usable else "cyan")
        name.append(printable(f"\n{model.provider}: {model.model}"), style="dim")
        name.append(f" ({model.source})", style="dim italic")
        if not beside and description:
            name.append(f"\n{description}")
        cells = [number, name, price, Text(status, style="green" if usable else "red")]
        table.add_row(*cells, *([description] if beside else []), style=None if usable else "dim")
    return table


def _widths(rows: list, width: int | None) -> list[int] | None:
    """The content widths of the columns in `width` columns: five (#, model, price, status,
    description) where the description gets DESCRIPTION_MIN or more, else four; None for no width."""
    if width is None:
        return None
    number = max([1] + [len(row[1]) for row in rows])
    price = max([len("$/1M in · out")] + [len(row[2]) for row in rows])
    natural_model = max([MODEL_MIN] + [max(len(m.id), len(f"{m.provider}: {m.model} ({m.source})")) for m, *_ in rows])
    natural_status = max([len("status")] + [len(row[3]) for row in rows])
    natural_description = max([len("description")] + [len(row[4]) for row in rows])
    for columns in (5, 4):
        rest = width - 3 * columns - 1 - number - price  # a space either side of each, a border between
        if columns == 5 and natural_model + natural_status + natural_description <= rest:
            return [number, natural_model, price, natural_status, natural_description]  # nothing folds
        if columns == 5:
            model = min(natural_model, max(MODEL_MIN, rest * 3 // 10))
            status = min(natural_status, max(len("status"), (rest - model) * 2 // 5))
            description = min(natural_description, rest - model - status)
            if description >= DESCRIPTION_MIN or description == natural_description:
                return [number, model, price, status, description]
        else:
            status = min(natural_status, max(len("status"), rest * 2 // 5))
            model = max(MODEL_MIN, rest - status)
            return [number, model, price, status]
    return None  # not reached

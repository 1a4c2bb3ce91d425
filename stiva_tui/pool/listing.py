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


def models_table(pool: Pool, conductor_choice: str | None) -> "Table":
    """A rich table of the pool, usable models first; `#` is the conductor's number for the model.
    A discovered model says so, and its reason names the server's URL. Text is made printable:
    ids, names and reasons may come from a local server or a provider (`--json` stays exact)."""
    from rich.table import Table
    from rich.text import Text

    index = _index(pool)
    table = Table(
        title=f"Pool: {len(index)} of {len(pool)} models available",
        caption=f"conductor: {conductor_choice or 'none'}",
        caption_justify="left",
        expand=False,
    )
    table.add_column("#", justify="right", style="bold")
    table.add_column("model", overflow="fold", min_width=24)
    table.add_column("$/1M in · out", justify="right", no_wrap=True)
    table.add_column("status", overflow="fold")
    table.add_column("description", overflow="fold")
    for model in listing_order(pool):
        usable = model.id in index
        name = Text(printable(model.id), style="bold cyan" if usable else "cyan")
        name.append(printable(f"\n{model.provider}: {model.model}"), style="dim")
        name.append(f" ({model.source})", style="dim italic")
        status = Text(("✓ " if usable else "✗ ") + printable(model.reason), style="green" if usable else "red")
        table.add_row(
            str(index[model.id]) if usable else "-",
            name,
            f"{_price(model.price_in)} · {_price(model.price_out)}",
            status,
            printable(model.description),
            style=None if usable else "dim",
        )
    return table

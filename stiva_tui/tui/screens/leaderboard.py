"""The leaderboard: how often each system's answer won in compare mode, and what it cost, and how
many preference pairs the votes give for training (`stiva train dpo`, train/votes.py)."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from ...core import display as fmt
from ..text import safe_text
from ..widgets.footer import StivaFooter
from ..widgets.table import Table

if TYPE_CHECKING:
    from ...runtime import Runtime
    from ...store import LeaderboardRow

COLUMNS = ("System", "Sessions", "Voted", "Wins", "Win rate", "Avg cost", "Avg latency")


class LeaderboardScreen(Screen):
    """A table of the history's `leaderboard()`, sorted by win rate."""

    CSS_PATH = "leaderboard.tcss"
    BINDINGS = [
        Binding("escape", "back", "Back", id="leaderboard.back", tooltip="Leave the leaderboard"),
        Binding("r", "reload", "Reload", id="leaderboard.reload", tooltip="Read the votes again"),
    ]

    def __init__(
        self, runtime: "Runtime", *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.runtime = runtime

    def compose(self) -> ComposeResult:
        yield Static("Leaderboard — which system's answer won in compare mode", id="leaderboard-title")
        yield Static("", id="leaderboard-pairs")
        yield Table(id="leaderboard-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="leaderboard-empty")
        yield StivaFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label in COLUMNS:
            table.add_column(label if label == "System" else Text(label, justify="right"), key=label)
        self.action_reload()

    def action_reload(self) -> None:
        table = self.query_one(DataTable)
        table.clear()
        store = self.runtime.store
        rows = store.leaderboard() if store is not None else []
        for row in sorted(rows, key=lambda r: (-r.win_rate, -r.wins, r.system)):
            table.add_row(*leaderboard_cells(row), key=row.label)
        self.query_one("#leaderboard-pairs", Static).update(pairs_line(store))
        empty = self.query_one("#leaderboard-empty", Static)
        empty.update("" if rows else "No compare sessions yet: open compare mode and mark the better answer.")
        empty.display = not rows

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()


def pairs_line(store) -> str:
    """How many votes there are, how many usable preference pairs they give, and why the others
    give none ("0 pairs from 1 vote" alone left the user guessing)."""
    if store is None:
        return ""
    from ...train.votes import read_votes

    harvest = read_votes(store)
    if not harvest.voted:
        return "Training signal: no votes yet"
    pairs = len(harvest.pairs)
    line = f"Training signal: {fmt.count(pairs, 'usable preference pair')} from {fmt.count(harvest.voted, 'vote')}"
    line += " — stiva train --from-votes" if pairs else ""
    left_out = Counter(gone.reason for gone in harvest.left_out)
    if left_out:
        said = [  # the commonest first
            f"{words} ({-minus})" if minus < -1 else words
            for minus, words in sorted((-n, left_out_words(reason)) for reason, n in left_out.items())
        ]
        line += f"\nLeft out: {'; '.join(said)}"
    return line


def left_out_words(reason: str) -> str:
    """Why a vote (or one of its pairs) gives no preference pair, in words (train/votes.py's
    reasons; one it does not know is shown as it is)."""
    from ...train import votes

    return {
        votes.SAME_PLAN: "both answers came from the same plan",
        "tie": "a tie names no better answer",
        "all wrong": "all wrong names no better answer",
        "nothing to compare with": "the winner had no other answer beside it",
        votes.NO_TRACE: "a run is no longer in the history",
        votes.NO_PLAN: "a conductor run wrote no plan",
        votes.NO_MODELS: "a run's trace does not say its steps' models",
        votes.UNKNOWN_SYSTEM: "a system whose plan cannot be told",
    }.get(reason, reason)


def leaderboard_cells(row: "LeaderboardRow") -> list:
    """The table cells of one leaderboard row (numbers right-aligned)."""
    cost, latency = row.avg_cost_usd, row.avg_latency_s
    values = [
        str(row.sessions),
        str(row.votes),
        str(row.wins),
        f"{row.win_rate:.0%}",
        fmt.money(cost) if cost is not None else "–",
        fmt.seconds(latency) if latency is not None else "–",
    ]
    return [safe_text(row.label), *(Text(v, justify="right") for v in values)]

"""The history sidebar: past conversations and compare sessions, newest first, with a search box.

Choosing an item posts `HistorySidebar.Selected(kind, id)`: kind "chat" for a conversation (the
chat screen restores it from `store.get_conversation(id)`), "compare" for a compare session (the
chat screen asks the app to open it in compare mode).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from ...store import Store

Kind = Literal["chat", "compare"]
TITLE_CHARS = 60


class HistorySidebar(Vertical):
    """A toggleable list of past conversations and compare sessions, filtered as you type."""

    DEFAULT_CSS = """
    HistorySidebar {
        dock: left;
        width: 40;
        height: 1fr;
        border-right: vkey $panel-lighten-2;
        padding: 0 1 0 0;
    }
    HistorySidebar > #history-title { height: 1; text-style: bold; }
    HistorySidebar > #history-search { margin-bottom: 1; }
    HistorySidebar > #history-list { height: 1fr; border: none; }
    HistorySidebar > #history-empty { color: $text-muted; }
    """

    class Selected(Message):
        """The user chose a past conversation ("chat") or compare session ("compare")."""

        def __init__(self, kind: Kind, id: str) -> None:
            super().__init__()
            self.kind = kind
            self.id = id

    def __init__(self, store: "Store", *, limit: int = 200, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.store = store
        self.limit = limit
        self.items: list[tuple[Kind, str, str]] = []  # (kind, id, title) as listed

    def compose(self) -> ComposeResult:
        yield Static("History", id="history-title")
        yield Input(placeholder="Search history", id="history-search")
        yield OptionList(id="history-list")
        yield Static("", id="history-empty")

    def on_mount(self) -> None:
        self.refresh_items()

    @property
    def search(self) -> str:
        return self.query_one("#history-search", Input).value.strip()

    def refresh_items(self) -> None:
        """Read the store again and list what matches the search box."""
        self.items = history_items(self.store, self.search, self.limit)
        options = self.query_one("#history-list", OptionList)
        options.clear_options()
        options.add_options([Option(_label(kind, title), id=f"{kind}:{item_id}")
                             for kind, item_id, title in self.items])
        if self.items:
            options.highlighted = 0
        empty = self.query_one("#history-empty", Static)
        empty.display = not self.items
        empty.update(f"Nothing matches {self.search!r}" if self.search else "No history yet")

    def focus(self, scroll_visible: bool = True) -> "HistorySidebar":
        """Focus the search box (the sidebar itself takes no focus)."""
        self.query_one("#history-search", Input).focus(scroll_visible)
        return self

    def toggle(self) -> None:
        """Show (reading the store again and focusing the search) or hide the sidebar."""
        self.display = not self.display
        if self.display:
            self.refresh_items()
            self.focus()

    @on(Input.Changed, "#history-search")
    def _filter(self) -> None:
        self.refresh_items()

    @on(Input.Submitted, "#history-search")
    def _choose_first(self) -> None:
        options = self.query_one("#history-list", OptionList)
        if self.items:
            options.focus()

    @on(OptionList.OptionSelected, "#history-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        kind, _, item_id = (event.option.id or "").partition(":")
        if kind in ("chat", "compare") and item_id:
            self.post_message(self.Selected(kind, item_id))  # type: ignore[arg-type]


def history_items(store: "Store | None", search: str = "", limit: int = 200) -> list[tuple[Kind, str, str]]:
    """(kind, id, title) of conversations and compare sessions matching `search`, newest first."""
    if store is None:
        return []
    needle = search.strip().casefold()
    dated: list[tuple[str, Kind, str, str]] = []
    for conv in store.list_conversations(needle or None, limit=limit):
        if conv.kind == "compare":
            continue  # compare sessions are listed from their own table
        dated.append((conv.updated_at, "chat", conv.id, conv.title or "(untitled)"))
    for session in store.list_compare_sessions(limit=limit):
        if needle and needle not in session.question.casefold() and not any(
                needle in s.casefold() for s in session.systems):
            continue
        dated.append((session.created_at, "compare", session.id, session.question or "(no question)"))
    dated.sort(key=lambda item: item[0], reverse=True)
    return [(kind, item_id, title) for _, kind, item_id, title in dated[:limit]]


def _label(kind: Kind, title: str) -> Text:
    one_line = " ".join(title.split())
    if len(one_line) > TITLE_CHARS:
        one_line = one_line[: TITLE_CHARS - 1] + "…"
    label = Text("chat  " if kind == "chat" else "vs    ", style="dim" if kind == "chat" else "bold magenta")
    label.append(one_line)
    return label

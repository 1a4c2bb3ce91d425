"""The history sidebar: past conversations and compare sessions, newest first, with a search box.

Each item shows its title, and under it when it was last used, where it came from (the app, the
CLI, the API, a bench) and how its newest run ended. Choosing an item posts
`HistorySidebar.Selected(kind, id)`: kind "chat" for a conversation (the chat screen restores it
from `store.get_conversation(id)`), "compare" for a compare session (the chat screen asks the app to
open it in compare mode). Down or up in the search box moves into the list, one item on; enter
there opens the item. In the list, r renames the highlighted chat and delete (or d) deletes it
after a yes; the history is written in a thread, and `Renamed` / `Deleted` tell the screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ..text import scrub

if TYPE_CHECKING:
    from ...store import Store

Kind = Literal["chat", "compare"]
TITLE_CHARS = 60
# Where a conversation came from, by its kind: the words the sidebar shows.
SOURCE_OF_KIND = {"chat": "app", "ask": "CLI", "api": "API", "bench": "bench", "train": "train", "compare": "compare"}
STATUS_STYLE = {"finished": "green", "failed": "red", "cancelled": "yellow", "interrupted": "yellow", "running": "cyan"}


@dataclass(frozen=True)
class HistoryItem:
    """One line of the sidebar: a conversation ("chat") or a compare session ("compare")."""

    kind: Kind
    id: str
    title: str
    when: str  # ISO-8601 UTC: its latest activity
    source: str  # app, CLI, API, bench, train, compare
    status: str  # how its newest run ended ("no runs"), or a comparison's vote


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

    BINDINGS = [
        Binding("r", "rename", "Rename", id="history.rename", tooltip="Give the highlighted chat a new title"),
        Binding(
            "delete,d",
            "delete",
            "Delete",
            id="history.delete",
            tooltip="Delete the highlighted chat or comparison (asks first); its runs stay in the run history",
        ),
        # From the search box: into the list, one item down (or up); enter there opens it.
        Binding("down", "into_list(1)", show=False),
        Binding("up", "into_list(-1)", show=False),
    ]

    @dataclass
    class Renamed(Message):
        """A conversation was given a new title in the history."""

        id: str
        title: str

    @dataclass
    class Deleted(Message):
        """A conversation ("chat") or compare session ("compare") was deleted from the history."""

        kind: Kind
        id: str

    @dataclass
    class ChangeFailed(Message):
        """The history could not be changed; `error` says why."""

        error: str

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
        self.items: list[HistoryItem] = []  # as listed

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
        options.add_options([Option(_label(item), id=f"{item.kind}:{item.id}") for item in self.items])
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

    # --- rename and delete ---------------------------------------------------------------------------

    def action_into_list(self, step: int) -> None:
        """Down (or up) in the search box: the list takes the focus, its cursor one item on, and
        enter opens that item (what the search box shows highlighted is where the cursor starts)."""
        options = self.query_one("#history-list", OptionList)
        if not self.items:
            return
        current = options.highlighted if options.highlighted is not None else 0
        options.highlighted = max(0, min(len(self.items) - 1, current + step))
        options.focus()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("rename", "delete"):  # keys of the list: in the search box they are text
            return self.query_one("#history-list", OptionList).has_focus and self.highlighted is not None
        if action == "into_list":  # the search box's keys; the list has its own up and down
            return self.query_one("#history-search", Input).has_focus
        return True

    @property
    def highlighted(self) -> HistoryItem | None:
        index = self.query_one("#history-list", OptionList).highlighted
        return self.items[index] if index is not None and 0 <= index < len(self.items) else None

    def action_rename(self) -> None:
        from ..dialogs import TitleDialog

        item = self.highlighted
        if item is None:
            return
        if item.kind != "chat":
            self.notify("A comparison is named by its question; only chats can be renamed.", severity="warning")
            return
        self.app.push_screen(
            TitleDialog(item.title), lambda title: self._change("rename", item, title) if title else None
        )

    def action_delete(self) -> None:
        from ..dialogs import ConfirmDialog

        item = self.highlighted
        if item is None:
            return
        what = "chat" if item.kind == "chat" else "comparison"
        question = f"Delete the {what} “{_one_line(item.title, 50)}”? Its runs stay in the run history (stiva history)."
        self.app.push_screen(ConfirmDialog(question), lambda yes: self._change("delete", item) if yes else None)

    @work(thread=True, exclusive=True, group="history-change", exit_on_error=False)
    def _change(self, what: str, item: HistoryItem, title: str = "") -> None:
        try:
            if what == "rename":
                self.store.rename_conversation(item.id, title)
                self.post_message(self.Renamed(item.id, title))
            elif item.kind == "chat":
                self.store.delete_conversation(item.id)
                self.post_message(self.Deleted(item.kind, item.id))
            else:
                self.store.delete_compare_session(item.id)
                self.post_message(self.Deleted(item.kind, item.id))
        except Exception as exc:  # a read-only or full history: say so, change nothing
            self.post_message(self.ChangeFailed(str(exc)))

    @on(Renamed)
    @on(Deleted)
    def _changed(self) -> None:
        self.refresh_items()  # the message bubbles on to the screen

    @on(ChangeFailed)
    def _change_failed(self, message: "HistorySidebar.ChangeFailed") -> None:
        message.stop()
        self.notify(message.error, title="History not changed", severity="error")

    @on(OptionList.OptionSelected, "#history-list")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        kind, _, item_id = (event.option.id or "").partition(":")
        if kind in ("chat", "compare") and item_id:
            self.post_message(self.Selected(kind, item_id))  # type: ignore[arg-type]


def history_items(store: "Store | None", search: str = "", limit: int = 200) -> list[HistoryItem]:
    """The conversations and compare sessions matching `search`, newest first."""
    if store is None:
        return []
    needle = search.strip().casefold()
    items: list[HistoryItem] = []
    for conv in store.list_conversations(needle or None, limit=limit):
        if conv.kind == "compare":
            continue  # compare sessions are listed from their own table
        items.append(
            HistoryItem(
                "chat",
                conv.id,
                conv.title or "(untitled)",
                conv.updated_at,
                SOURCE_OF_KIND.get(conv.kind, conv.kind),
                conv.last_status or "no runs",
            )
        )
    for session in store.list_compare_sessions(limit=limit):
        if (
            needle
            and needle not in session.question.casefold()
            and not any(needle in s.casefold() for s in session.systems)
        ):
            continue
        items.append(
            HistoryItem(
                "compare",
                session.id,
                session.question or "(no question)",
                session.created_at,
                "compare",
                f"won by {session.winner}" if session.winner else "no vote",
            )
        )
    items.sort(key=lambda item: item.when, reverse=True)
    return scrub(items[:limit])  # titles are questions: an API client's may hold escape sequences


def when_text(timestamp: str, now: datetime | None = None) -> str:
    """A stored time as the sidebar shows it, in local time: "14:05" today, "3 Mar 14:05" this
    year, "3 Mar 2025" before."""
    try:
        moment = datetime.fromisoformat(timestamp)
    except ValueError:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone()
    now = (now or datetime.now(UTC)).astimezone()
    if moment.date() == now.date():
        return moment.strftime("%H:%M")
    if moment.year == now.year:
        return f"{moment.day} {moment:%b %H:%M}"
    return f"{moment.day} {moment:%b %Y}"


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _label(item: HistoryItem) -> Text:
    """Two lines: the title, then when · where from · how it ended."""
    label = Text(no_wrap=True, overflow="ellipsis")  # cut at the sidebar's edge, one line each
    if item.kind == "compare":
        label.append("vs ", style="bold magenta")
    label.append(_one_line(item.title, TITLE_CHARS))
    label.append("\n")
    label.append(f"{when_text(item.when)} · {item.source} · ", style="dim")
    status = item.status
    label.append(status, style=("dim " + STATUS_STYLE[status]) if status in STATUS_STYLE else "dim")
    return label

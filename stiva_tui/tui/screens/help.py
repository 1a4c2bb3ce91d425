"""F1 / `?`: the key bindings of the screen it is opened from (and the app's), each with its id (for
`keymap` in the config) and what it does, nothing cut: "What it does" is wrapped between words to
the width the terminal leaves it, and under 100 columns the help takes the whole screen. No toast
is drawn over it."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ..bindings import key_label
from ..widgets.table import Table

DESCRIPTION_WIDTH = 44  # the most "What it does" gets; less where the terminal is narrower
MIN_DESCRIPTION_WIDTH = 16
BOX_WIDTH = 100
HELP_CSS = """
HelpScreen { align: center middle; }
HelpScreen > Vertical {
    width: 100; max-width: 95%; height: 80%; border: round $primary; background: $surface; padding: 0 1;
}
HelpScreen.-narrow > Vertical { width: 100%; max-width: 100%; height: 100%; }
HelpScreen #help-title { text-style: bold; padding: 0 0 1 0; }
HelpScreen #help-hint { color: $text-muted; padding: 1 0 0 0; }
HelpScreen DataTable { height: 1fr; scrollbar-size-vertical: 1; }
/* Toasts wait under the help, not on it (they covered it for their 10 s): the screen the help
   was opened from shows those still due when the help closes. (The rack's own display is set
   by Textual at each toast: its holders are what CSS can hide.) */
HelpScreen ToastHolder { display: none; }
"""


def binding_owners(app, screen=None) -> list[type]:
    """Whose bindings the help lists: the app's, then the screen's and every widget's on it (the
    chat screen's when no screen is given)."""
    from ..widgets.history import HistorySidebar
    from .chat import ChatScreen

    if screen is None:
        from ..widgets.prompt_input import PromptInput
        from ..widgets.workflow_tree import WorkflowTree

        return [type(app), ChatScreen, PromptInput, WorkflowTree, HistorySidebar]
    owners = [type(app), type(screen)]
    for widget in screen.query("*"):
        if type(widget) not in owners:
            owners.append(type(widget))
    if isinstance(screen, ChatScreen) and HistorySidebar not in owners:
        owners.append(HistorySidebar)  # mounted on first use (F2), its keys are the chat's all along
    return owners


def binding_rows(app, screen=None) -> list[tuple[str, str, str, str]]:
    """(keys, description, id, tooltip) for every binding with an id, keymap overrides applied."""
    keymap = dict(getattr(app, "keymap", {}) or {})
    rows: list[tuple[str, str, str, str]] = []
    seen: set[str] = set()
    for owner in binding_owners(app, screen):
        for binding in _bindings(owner):
            if not binding.id or binding.id in seen:
                continue
            seen.add(binding.id)
            keys = keymap.get(binding.id, binding.key)
            shown = ", ".join(key_label(k) for k in keys.split(",") if k.strip())  # "?", not "question_mark"
            rows.append((shown, binding.description or binding.action, binding.id, binding.tooltip))
    return rows


def _bindings(owner: type) -> list[Binding]:
    found: list[Binding] = []
    for binding in getattr(owner, "BINDINGS", []):
        found.extend(Binding.make_bindings([binding]) if not isinstance(binding, Binding) else [binding])
    return found


def wrap(text: str, width: int) -> str:
    """`text` broken between words into lines of at most `width` cells (a longer word is split)."""
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_on_hyphens=False) or [""])


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = HELP_CSS
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (BOX_WIDTH, "-wide")]
    BINDINGS: list[BindingType] = [
        Binding("escape,f1,q", "dismiss", "Close", id="help.close", tooltip="Close the help"),
    ]

    def __init__(self, opened_from=None) -> None:
        """`opened_from`: the screen whose keys are listed (None: the chat screen's)."""
        super().__init__()
        self.opened_from = opened_from
        self._rows: list[tuple[str, str, str, str]] = []
        self._filled_for: tuple[int, str] | None = None  # what the rows were drawn for

    def compose(self) -> ComposeResult:
        with Vertical():
            title = "Stiva — keys and commands"
            if self.opened_from is not None:
                title += f" · the {type(self.opened_from).__name__.removesuffix('Screen').lower() or 'app'} screen"
            yield Static(title, id="help-title", markup=False)
            yield Table(id="help-table", cursor_type="row", zebra_stripes=True)
            # No markup: "[keymap]" is the config's table name, not a style
            yield Static(
                "ctrl+p opens the command palette (every action, and the theme picker). "
                'Remap a key in config.toml:  [keymap]  send = "ctrl+s"',
                id="help-hint",
                markup=False,
            )

    def on_mount(self) -> None:
        rows = [("ctrl+p", "Palette", "(built in)", "Search every command, change theme")]
        if self.opened_from is None or type(self.opened_from).__name__ == "ChatScreen":
            rows.append(
                (
                    "up, down",
                    "Earlier question",
                    "(built in)",
                    "In an empty prompt: the earlier questions of this chat, then of this session",
                )
            )
        self._rows = rows + binding_rows(self.app, self.opened_from)
        self._fill(self.app.size.width)
        self.query_one(DataTable).focus()

    def on_resize(self, event) -> None:
        self._fill(event.size.width)

    def _cells(self, screen_width: int) -> list[tuple[str, str, str, str]]:
        """The rows as drawn at `screen_width`: narrow, a binding's keys one under the other."""
        if screen_width >= BOX_WIDTH:
            return self._rows
        return [(keys.replace(", ", ",\n"), *rest) for keys, *rest in self._rows]

    def description_width(self, screen_width: int) -> int:
        """The cells "What it does" has at `screen_width`: what the box leaves after the other
        three columns (each with a cell of padding either side) and the scrollbar."""
        box = screen_width if screen_width < BOX_WIDTH else min(BOX_WIDTH, screen_width * 95 // 100)
        inner = box - 2 - 2 - 1  # border, padding, scrollbar
        cells = self._cells(screen_width)
        others = sum(max(len(line) for row in cells for line in row[n].splitlines()) + 2 for n in range(3))
        return max(MIN_DESCRIPTION_WIDTH, min(DESCRIPTION_WIDTH, inner - others - 2))

    def _fill(self, screen_width: int) -> None:
        """The rows, their descriptions wrapped to the width there is (again after a resize)."""
        if not self._rows:
            return
        width = self.description_width(screen_width)
        cells = self._cells(screen_width)
        if (width, cells[0][0]) == self._filled_for:
            return
        self._filled_for = (width, cells[0][0])
        self._filled_for = width
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear(columns=True)
        table.add_column("Keys")
        table.add_column("Action")
        table.add_column("Binding id")
        table.add_column("What it does", width=width)
        for keys, action, binding_id, tooltip in cells:
            # broken between words to the column's width: never cut, never split mid-word
            table.add_row(keys, action, binding_id, wrap(tooltip, width), height=None)
        table.move_cursor(row=min(row, table.row_count - 1))

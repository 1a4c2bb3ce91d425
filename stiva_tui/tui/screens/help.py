"""F1 / `?`: the key bindings of the screen it is opened from (and the app's), each with its id (for
`keymap` in the config) and what it does, nothing cut."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ..widgets.table import Table

DESCRIPTION_WIDTH = 44
HELP_CSS = """
HelpScreen { align: center middle; }
HelpScreen > Vertical {
    width: 100; max-width: 95%; height: 80%; border: round $primary; background: $surface; padding: 0 1;
}
HelpScreen #help-title { text-style: bold; padding: 0 0 1 0; }
HelpScreen #help-hint { color: $text-muted; padding: 1 0 0 0; }
HelpScreen DataTable { height: 1fr; }
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
            shown = ", ".join(k.strip() for k in keys.split(","))  # as written in [keymap]
            rows.append((shown, binding.description or binding.action, binding.id, binding.tooltip))
    return rows


def _bindings(owner: type) -> list[Binding]:
    found: list[Binding] = []
    for binding in getattr(owner, "BINDINGS", []):
        found.extend(Binding.make_bindings([binding]) if not isinstance(binding, Binding) else [binding])
    return found


class HelpScreen(ModalScreen[None]):
    DEFAULT_CSS = HELP_CSS
    BINDINGS: list[BindingType] = [
        Binding("escape,f1,q", "dismiss", "Close", id="help.close", tooltip="Close the help"),
    ]

    def __init__(self, opened_from=None) -> None:
        """`opened_from`: the screen whose keys are listed (None: the chat screen's)."""
        super().__init__()
        self.opened_from = opened_from

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
        from rich.text import Text

        table = self.query_one(DataTable)
        table.add_column("Keys")
        table.add_column("Action")
        table.add_column("Binding id")
        table.add_column("What it does", width=DESCRIPTION_WIDTH)
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
        rows += binding_rows(self.app, self.opened_from)
        for keys, action, binding_id, tooltip in rows:
            # folded over lines, never cut mid-word
            table.add_row(keys, action, binding_id, Text(tooltip, overflow="fold"), height=None)
        table.focus()

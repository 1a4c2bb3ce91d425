"""F1 / `?`: every key binding of the app, with its id (for `keymap` in the config) and what it does."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

HELP_CSS = """
HelpScreen { align: center middle; }
HelpScreen > Vertical {
    width: 100; max-width: 95%; height: 80%; border: round $primary; background: $surface; padding: 0 1;
}
HelpScreen #help-title { text-style: bold; padding: 0 0 1 0; }
HelpScreen #help-hint { color: $text-muted; padding: 1 0 0 0; }
HelpScreen DataTable { height: 1fr; }
"""


def binding_rows(app) -> list[tuple[str, str, str, str]]:
    """(keys, description, id, tooltip) for every binding with an id, keymap overrides applied."""
    from ..widgets.prompt_input import PromptInput
    from ..widgets.workflow_tree import WorkflowTree
    from .chat import ChatScreen

    keymap = dict(getattr(app, "keymap", {}) or {})
    rows: list[tuple[str, str, str, str]] = []
    seen: set[str] = set()
    for owner in (type(app), ChatScreen, PromptInput, WorkflowTree):
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

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("Stiva — keys and commands", id="help-title")
            yield DataTable(id="help-table", cursor_type="row", zebra_stripes=True)
            yield Static("ctrl+p opens the command palette (every action, and the theme picker). "
                         "Remap a key in config.toml:  [keymap]  send = \"ctrl+s\"", id="help-hint")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("Keys", "Action", "Binding id", "What it does")
        table.add_row("ctrl+p", "Palette", "(built in)", "Search every command, change theme")
        for row in binding_rows(self.app):
            table.add_row(*row)
        table.focus()

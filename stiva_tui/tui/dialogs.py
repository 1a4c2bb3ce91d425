"""Two small dialogs over any screen: a new title (`TitleDialog`) and a yes/no (`ConfirmDialog`).

self.app.push_screen(TitleDialog("Old title"), on_title)     # on_title(str | None)
self.app.push_screen(ConfirmDialog("Delete it?"), on_answer)  # on_answer(bool)
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

from .bindings import keys_for

DIALOG_CSS = """
{name} {{ align: center middle; }}
{name} > Vertical {{
    width: 64; max-width: 95%; height: auto; border: round $primary; background: $surface; padding: 0 1;
}}
{name} .dialog-text {{ padding: 0 0 1 0; }}
{name} .dialog-hint {{ color: $text-muted; }}
"""


class TitleDialog(ModalScreen[str | None]):
    """Asks for a new title: enter gives it (None when it is empty), esc gives None."""

    DEFAULT_CSS = DIALOG_CSS.format(name="TitleDialog")
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="dialog.cancel", tooltip="Close, changing nothing")]

    def __init__(self, title: str, *, what: str = "chat") -> None:
        super().__init__()
        self.current = title
        self.what = what

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(f"A new title for the {self.what}", classes="dialog-text", markup=False)
            yield Input(self.current, id="dialog-title", select_on_focus=True)
            yield Static(
                f"enter renames · {keys_for(self.app, 'dialog.cancel', 'escape')} cancels",
                classes="dialog-hint",
                markup=False,
            )

    @on(Input.Submitted, "#dialog-title")
    def _given(self, event: Input.Submitted) -> None:
        event.stop()
        title = " ".join(event.value.split())
        self.dismiss(title or None)


class ConfirmDialog(ModalScreen[bool]):
    """Asks a yes/no question: y or enter says yes, n or esc says no."""

    DEFAULT_CSS = DIALOG_CSS.format(name="ConfirmDialog")
    BINDINGS = [
        Binding("y,enter", "dismiss(True)", "Yes", id="dialog.yes", tooltip="Do it"),
        Binding("n,escape", "dismiss(False)", "No", id="dialog.no", tooltip="Close, changing nothing"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        hint = (
            f"{keys_for(self.app, 'dialog.yes', 'y,enter')}: yes · "
            f"{keys_for(self.app, 'dialog.no', 'n,escape')}: no"
        )  # the live keys, remapped or not
        with Vertical():
            yield Static(self.question, classes="dialog-text", markup=False)
            yield Static(hint, classes="dialog-hint", markup=False)

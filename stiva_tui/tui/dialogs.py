"""Small dialogs over any screen: a new title (`TitleDialog`), a yes/no (`ConfirmDialog`), and the
model and subtask of a fork (`ForkDialog`).

self.app.push_screen(TitleDialog("Old title"), on_title)     # on_title(str | None)
self.app.push_screen(ConfirmDialog("Delete it?"), on_answer)  # on_answer(bool)
self.app.push_screen(ForkDialog("2", "w1", models, "Draft."), on_fork)  # on_fork((model, subtask) | None)
"""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

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


class ForkDialog(ModalScreen[tuple[str, str] | None]):
    """Fork step `step`: choose another pool model (up, down) and edit the subtask if you like
    (tab); enter runs it, esc gives None. The result: (model id, subtask)."""

    DEFAULT_CSS = (
        DIALOG_CSS.format(name="ForkDialog")
        + """
    ForkDialog OptionList { height: auto; max-height: 10; margin: 0 0 1 0; }
    ForkDialog #fork-subtask { margin: 0 0 1 0; }
    """
    )
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="fork.cancel", tooltip="Close, running nothing")]

    def __init__(self, step: str, model: str, models: list[str], subtask: str) -> None:
        super().__init__()
        self.step = step
        self.model = model
        self.models = list(models)
        self.subtask = subtask

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                f"Fork step {self.step} (ran on {self.model}): run it again on another model, with every step "
                "that reads it. The other steps keep their outputs.",
                classes="dialog-text",
                markup=False,
            )
            yield OptionList(
                *(Option(m + (" (the step's model)" if m == self.model else ""), id=m) for m in self.models),
                id="fork-models",
            )
            yield Input(self.subtask, id="fork-subtask", placeholder="the step's subtask")
            yield Static(
                f"enter runs · tab edits the subtask · {keys_for(self.app, 'fork.cancel', 'escape')} cancels",
                classes="dialog-hint",
                markup=False,
            )

    def on_mount(self) -> None:
        options = self.query_one("#fork-models", OptionList)
        others = [i for i, m in enumerate(self.models) if m != self.model]
        options.highlighted = others[0] if others else 0
        options.focus()

    def chosen(self) -> str | None:
        options = self.query_one("#fork-models", OptionList)
        index = options.highlighted
        return self.models[index] if index is not None and 0 <= index < len(self.models) else None

    @on(OptionList.OptionSelected, "#fork-models")
    @on(Input.Submitted, "#fork-subtask")
    def _run(self, event: OptionList.OptionSelected | Input.Submitted) -> None:
        event.stop()
        model = self.chosen()
        if model is None:
            return
        value = self.query_one("#fork-subtask", Input).value
        self.dismiss((model, value.strip() if value.strip() and value != self.subtask else self.subtask))

"""The multi-line prompt: enter adds a line, ctrl+j or alt+enter sends (keys every terminal has).

With `enter_sends` (the config's `enter_sends = true`) enter sends and alt+enter (or shift+enter,
where the terminal tells it apart) adds a line. Up in an empty prompt walks back through `asked`
(the earlier questions, oldest first), down walks forward again, as a shell does. `editing` is the
chat's question (0-based) that the text replaces when sent: edit-and-resend.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import TextArea

from ..bindings import keys_for


class PromptInput(TextArea):
    """A TextArea that posts `PromptInput.Submitted` with its text on ctrl+j / alt+enter."""

    # Not a priority binding: those run before the keys typed just ahead of them reach the text,
    # so a fast typist (or a paste) lost the end of the question.
    SEND_KEYS = "ctrl+j,alt+enter"
    NEWLINE_KEYS = ("alt+enter", "shift+enter")  # with enter_sends: what adds a line
    BINDINGS = [
        Binding(
            SEND_KEYS,
            "send",
            "Send",
            id="send",
            tooltip="Send the question (enter only adds a new line, unless enter_sends is set)",
        ),
    ]

    # The question of the chat (0-based) the text replaces when sent; None: a new question.
    editing: reactive[int | None] = reactive(None)

    @dataclass
    class Submitted(Message):
        prompt: "PromptInput"
        text: str
        replaces: int | None = None  # the question it replaces (edit-and-resend), else None

    def __init__(
        self, *, id: str | None = None, classes: str | None = None, placeholder: str = "", enter_sends: bool = False
    ):
        super().__init__(
            id=id,
            classes=classes,
            soft_wrap=True,
            tab_behavior="focus",
            show_line_numbers=False,
            placeholder=placeholder,
        )
        self.enter_sends = enter_sends
        self.asked: list[str] = []  # earlier questions, oldest first: up shows the newest
        self._recalled: int | None = None  # the index in `asked` on show, while walking it

    def action_send(self) -> None:
        text = self.text.strip()
        if text:
            self._recalled = None
            self.post_message(self.Submitted(self, text, self.editing))

    def watch_editing(self, editing: int | None) -> None:
        # Short, to fit the prompt's border at 80 columns (F1 and docs/app.md say the rest).
        self.set_class(editing is not None, "-editing")
        self.border_title = f"Editing question {editing + 1}" if editing is not None else None
        self.border_subtitle = (
            f"sent in its place · {keys_for(self.app, 'cancel', 'escape')} leaves" if editing is not None else None
        )

    async def _on_key(self, event: events.Key) -> None:
        if self.enter_sends and not self.read_only and event.key in ("enter", *self.NEWLINE_KEYS):
            # Before the bindings: alt+enter adds a line here, though `send` has it too.
            event.stop()
            event.prevent_default()
            if event.key == "enter":
                self.action_send()
            else:
                self.insert("\n")
            return
        await super()._on_key(event)

    # --- prompt history ----------------------------------------------------------------------------

    def set_history(self, questions: list[str]) -> None:
        """The questions up and down walk through, oldest first (the walk starts again)."""
        self.asked = list(questions)
        self._recalled = None

    def action_cursor_up(self, select: bool = False) -> None:
        if select or not self._walking() or self.cursor_location[0] > 0 or not self._recall(-1):
            super().action_cursor_up(select)

    def action_cursor_down(self, select: bool = False) -> None:
        last_row = self.document.line_count - 1
        if select or not self._walking() or self.cursor_location[0] < last_row or not self._recall(+1):
            super().action_cursor_down(select)

    def _walking(self) -> bool:
        """Whether up/down walk the history: the prompt is empty, or shows a recalled question
        unchanged (anything typed is the user's, and the arrows move the cursor in it)."""
        if self.editing is not None:
            return False
        if not self.text.strip():
            self._recalled = None  # an emptied prompt starts the walk again, from the newest
            return True
        return self._recalled is not None and self.text == self.asked[self._recalled]

    def _recall(self, step: int) -> bool:
        """Show the question `step` away from the one on show; False when there is none to show."""
        if not self.asked or (self._recalled is None and step > 0):
            return False
        index = len(self.asked) - 1 if self._recalled is None else self._recalled + step
        if index < 0:
            return True  # the oldest stays
        if index >= len(self.asked):
            self._recalled = None
            self.load_text("")
            return True
        self._recalled = index
        self.load_text(self.asked[index])
        self.move_cursor(self.document.end)
        return True

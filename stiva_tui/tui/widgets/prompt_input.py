"""The multi-line prompt: enter adds a line, ctrl+j or alt+enter sends (keys every terminal has)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea


class PromptInput(TextArea):
    """A TextArea that posts `PromptInput.Submitted` with its text on ctrl+j / alt+enter."""

    # Not a priority binding: those run before the keys typed just ahead of them reach the text,
    # so a fast typist (or a paste) lost the end of the question.
    SEND_KEYS = "ctrl+j,alt+enter"
    BINDINGS = [
        Binding(SEND_KEYS, "send", "Send", id="send",
                tooltip="Send the question (enter only adds a new line)"),
    ]

    @dataclass
    class Submitted(Message):
        prompt: "PromptInput"
        text: str

    def __init__(self, *, id: str | None = None, classes: str | None = None, placeholder: str = ""):
        super().__init__(id=id, classes=classes, soft_wrap=True, tab_behavior="focus",
                         show_line_numbers=False, placeholder=placeholder)

    def action_send(self) -> None:
        text = self.text.strip()
        if text:
            self.post_message(self.Submitted(self, text))

"""The conversation's messages: the user's question and Stiva's answer (Markdown)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import Static  # Markdown (and its parser) loads with the first answer

from ...core import display as fmt
from ..text import safe_text


class UserMessage(Static):
    """A question as typed (shown without escape sequences; `text` keeps it as it was)."""

    DEFAULT_CSS = """
    UserMessage { margin: 1 0 0 0; padding: 0 1; background: $boost; border-left: thick $primary; }
    UserMessage.-editing { border-left: thick $warning; }
    """

    def __init__(self, text: str):
        super().__init__(escape(safe_text(text)))
        self.text = text


class AnswerView(Vertical):
    """Stiva's answer: a one-line header with the run's figures, then the answer as Markdown."""

    DEFAULT_CSS = """
    AnswerView { height: auto; margin: 1 0 0 0; border-left: thick $success; padding: 0 0 0 1; }
    AnswerView.-failed { border-left: thick $error; }
    AnswerView.-cancelled, AnswerView.-interrupted { border-left: thick $warning; }
    AnswerView > .answer-header { color: $text-muted; }
    AnswerView > Markdown { margin: 0; padding: 0; }
    """

    def __init__(self, text: str = "", header: str = "Stiva · working…", *, note: str = "", kind: str = ""):
        """`text`: the answer; or `note` (Markdown) in its place, marked as `kind` ("cancelled",
        "failed", "interrupted"): a stored run that gave no answer, shown as it ended."""
        super().__init__(classes=f"-{kind}" if kind else None)
        self.text = text
        self._header = header
        self._note = note

    def compose(self) -> ComposeResult:
        from textual.widgets import Markdown

        yield Static(self._header, classes="answer-header")
        yield Markdown(self.text or self._note or "_Working…_")

    def set_header(self, text: str) -> None:
        self._header = text
        if self.is_mounted:
            self.query_one(".answer-header", Static).update(text)

    async def set_answer(self, text: str, header: str) -> None:
        """The final answer: one Markdown render."""
        self.text = text
        self.set_header(header)
        await self._markdown().update(text or "_(empty answer)_")

    async def set_note(self, markdown: str, kind: str = "") -> None:
        """A note instead of an answer (waiting, failed, cancelled)."""
        if kind:
            self.add_class(f"-{kind}")
        await self._markdown().update(markdown)

    def _markdown(self):
        from textual.widgets import Markdown

        return self.query_one(Markdown)


def answer_header(
    steps: int,
    prompt_tokens: int,
    completion_tokens: int,
    cost_usd: float,
    seconds: float | None,
    frozen: bool = False,
    status: str = "finished",
    estimated: bool = False,
) -> str:
    """ "Stiva · 2 steps · 307→28 tok · $0.000023 · 1.7s", then how it ended unless it finished; a
    run stopped before its plan was written has no steps to count ("no plan"). `estimated`: the
    counts include an estimate (a call stopped before its count came), marked "~"."""
    planned = fmt.count(steps, "step") if steps or status == "finished" else "no plan"
    mark = "~" if estimated else ""
    parts = [
        f"Stiva · {planned}",
        f"{mark}{fmt.tokens(prompt_tokens)}→{fmt.tokens(completion_tokens)} tok",
        f"{mark}{fmt.money(cost_usd)}",
    ]
    if seconds is not None and not frozen:
        parts.append(fmt.seconds(seconds))
    if status != "finished":
        parts.append(status)
    return " · ".join(parts)


def stopped_note(status: str, error: str = "") -> str:
    """What stands in place of the answer of a run that gave none (Markdown)."""
    if status == "failed":
        return f"**The run failed:** {error}"
    if status == "interrupted":
        return "_Interrupted: Stiva stopped before the run ended. The partial run is kept in the history._"
    return "_Cancelled. The partial run is kept in the history._"

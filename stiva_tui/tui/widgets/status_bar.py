"""One line under the chat: run totals, the conductor backend (and why), and load progress."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.markup import escape
from textual.widgets import ProgressBar, Static

from .. import format as fmt

BACKEND_WORDS = {
    "local": "local GPU 4-bit",
    "embedded": "embedded CPU",
    "remote": "remote",
}


class StatusBar(Horizontal):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; color: $text-muted; padding: 0 1; }
    StatusBar > #status-totals { width: auto; margin-right: 2; color: $text; }
    StatusBar > #status-conductor { width: 1fr; }
    StatusBar > #status-load { width: auto; }
    StatusBar > ProgressBar { width: 30; }
    StatusBar > .-hidden { display: none; }
    """

    def compose(self) -> ComposeResult:
        yield Static("no run yet", id="status-totals")
        yield Static("conductor: starting…", id="status-conductor")
        yield Static("", id="status-load", classes="-hidden")
        yield ProgressBar(total=1.0, show_eta=False, show_percentage=True, id="status-progress",
                          classes="-hidden")

    def set_totals(self, prompt_tokens: int, completion_tokens: int, cost_usd: float,
                   seconds: float | None, status: str = "") -> None:
        """Tokens in→out, cost and time of the run shown."""
        text = (f"{fmt.tokens(prompt_tokens)}→{fmt.tokens(completion_tokens)} tok · "
                f"{fmt.money(cost_usd)}")
        if seconds is not None:
            text += f" · {fmt.seconds(seconds)}"
        if status:
            text = f"{status} · {text}"
        self.query_one("#status-totals", Static).update(text)

    def set_conductor(self, backend: str | None, model: str | None, reason: str = "") -> None:
        words = BACKEND_WORDS.get(backend or "", backend or "?")
        text = f"conductor: [b]{escape(words)}[/b] {escape(model or '')}"
        if reason:
            text += f" [dim]— {escape(reason)}[/dim]"
        self.query_one("#status-conductor", Static).update(text)

    def set_message(self, text: str) -> None:
        """Replace the conductor part with a message (starting, errors)."""
        self.query_one("#status-conductor", Static).update(escape(text))

    def set_loading(self, fraction: float | None, message: str) -> None:
        """Show the conductor's load progress (fraction None: indeterminate)."""
        label = self.query_one("#status-load", Static)
        bar = self.query_one("#status-progress", ProgressBar)
        label.update(escape(message))
        label.remove_class("-hidden")
        bar.remove_class("-hidden")
        bar.update(total=None if fraction is None else 1.0, progress=fraction or 0.0)

    def loading_done(self) -> None:
        self.query_one("#status-load").add_class("-hidden")
        self.query_one("#status-progress").add_class("-hidden")
